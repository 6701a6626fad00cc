#!/bin/bash
# hpn-vm: kernel=7 nics=4
# hpn-rdma on the current kernel (7.x) in the default shared RDMA netns mode,
# with softRoce: the virtio NICs have no RDMA device, so the plugin makes an
# rxe device on hpn0 inside each pod. Every scenario in one boot:
#  pods      two pods, one virtio NIC each (pciBusID); each result and hints
#            file name the pod's own rxe_<hash> device, port 1 and GID index;
#            rping (rdma_cm), ibv_rc_pingpong and ib_write_bw pod to pod with
#            exactly those; counters rise on both devices; each pod has its
#            own UDP 4791 socket; CHECK; DEL twice: no rdma link, both NICs
#            back under their names, no state.
#  macvlan   the same over macvlan children of one parent (mode macvlan):
#            one rxe per child, made in its pod; the parent stays as it was.
#  parent    a parent with an rxe of its own: a child bound to it would carry
#            nothing on 7.x, and with it there rdma_cm resolves the child's
#            address to it: ADD is refused (108) before anything changes, with
#            softRoce or without; once it is deleted the child gets its own.
#  gone      pod netns deleted with the rxe inside: DEL (the NIC is back under
#            its pod-side name) and GC clean up, no rdma link left.
#  crash     ADD killed right after the rxe was made: DEL deletes it; killed
#            again, the retried ADD undoes it first and makes the same name;
#            an ADD failing after the proof rolls it back.
#  rails     a pod with count 2 (hpn0, hpn1) beside another, first in one
#            subnet (host-local), then in two: rping and ib_write_bw on each
#            rail move bytes on that rail's devices only; the hints list both
#            devices exactly, with the GID index; CHECK; DEL.
#  proofs    a pod of four veth NICs (a pool, count 4), an rxe made for each,
#            the four proven at once: each NIC bound to its own device, as the
#            hints say; CHECK; DEL. Then NIC 2's peer down (its port never
#            ACTIVE): ADD fails with 108 naming NIC 2's device, rolled back
#            exactly, no process left in the pod; then the plugin killed while
#            that proof waits: its children die with it, DEL cleans up.
#  nccl      a real NCCL 2.22 (the runtime cache's, test/runtime/ncclprobe.sh)
#            in a softRoce pod: its hints bound at /etc/nccl.conf in a mount
#            namespace of its own, NCCL takes every setting of theirs it reads
#            at bootstrap and bootstraps on hpn0's address (a few seconds).
# Run one: test/vm/run.sh test/vm/vm7-hpn-shared.sh NAME...
# shellcheck disable=SC2034,SC2016 # counter arrays are used through namerefs
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=floor.sh
source "$(dirname "$0")/floor.sh"
# shellcheck source=hpn7.sh
source "$(dirname "$0")/hpn7.sh"
# shellcheck source=../runtime/ncclprobe.sh
source "$(dirname "$0")/../runtime/ncclprobe.sh"

[[ -n ${HPN_PLUGIN:-} ]] || fail "HPN_PLUGIN is not set (run through ctest)"
vm7_require shared
[[ -x $CNI_BIN/static && -x $CNI_BIN/host-local ]] ||
	skip "$CNI_BIN/static or host-local is missing (Debian: containernetworking-plugins)"

A=hpnv-a
B=hpnv-b
ITERS=40	# ib_write_bw iterations of 64 KiB (the bench runs more)

pci() {
	jq -cn --arg p "${VM_PCIS[$1]}" '{pciBusID: $p}'
}

# traffic SPOD SADDR CPOD CADDR: rping from CPOD (bound to CADDR) to SADDR in
# SPOD, then ibv_rc_pingpong and ib_write_bw between the devices and GID
# indexes the two pods' hints files name; both devices counted the bytes.
traffic() {
	local spod=$1 sa=$2 cpod=$3 ca=$4 sdev sg cdev cg
	local -A c0 c1
	soft_named "$spod" 0
	sdev=$DEV sg=$GID
	soft_named "$cpod" 0
	cdev=$DEV cg=$GID
	counters c0
	rping_pods "$spod" "$sa" "$cpod" "$ca"
	pingpong_pods "$spod" "$sdev" "$cpod" "$cdev" "$sa" "$sg" "$cg"
	write_bw_pods "$spod" "$sdev" "$cpod" "$cdev" "$sa" "$ITERS" "$sg" "$cg"
	counters c1
	rose_dir c0 c1 "$cdev/1" sent_bytes $((ITERS * 65536))
	rose_dir c0 c1 "$sdev/1" rcvd_bytes $((ITERS * 65536))
	rose_dir c0 c1 "$sdev/1" sent_bytes 1
	rose_dir c0 c1 "$cdev/1" rcvd_bytes 1
}

scen_pods() {
	local l
	info "pods: ${VM_NICS[0]} -> $A, ${VM_NICS[1]} -> $B through hpn-rdma, softRoce"
	pod_add "$A"
	pod_add "$B"
	hpn_add "$A" "$(hconf "$(pci 0)" 10.81.0.1/24)"
	hpn_add "$B" "$(hconf "$(pci 1)" 10.81.0.2/24)"
	soft_named "$A" 0
	l=$(ip netns exec "$A" rdma link show "$DEV/1")
	[[ $l == *"state ACTIVE physical_state LINK_UP netdev hpn0 "* ]] ||
		fail "in $A, $DEV is not ACTIVE on hpn0: $l"
	jq_ok '.rdma[0].netnsMode == "shared" and .rdma[0].gid == "::ffff:10.81.0.1" and
		.interfaces[0].pciID == $p' "$A result" "${RES[$A]}" --arg p "${VM_PCIS[0]}"
	udp4791 "$A" || fail "no UDP 4791 socket in $A"
	udp4791 "$B" || fail "no UDP 4791 socket in $B"
	traffic "$A" 10.81.0.1 "$B" 10.81.0.2
	hpn_run CHECK "$A"
	expect_ok "CHECK $A"
	hpn_del "$A"
	hpn_del "$B"
	wait_for 5 rdma_none || fail "rdma links left after DEL: $(rdma link show)"
	! udp4791 "$A" || fail "$A kept a UDP 4791 socket"
	nics_as_booted
	no_state
	fx ip netns del "$A"
	fx ip netns del "$B"
}

scen_macvlan() {
	local p=${VM_NICS[2]} da db
	info "macvlan: children of $p in $A and $B, an rxe per child"
	pod_add "$A"
	pod_add "$B"
	fx ip link set "$p" up
	hpn_add "$A" "$(hconf '{"master": "'"$p"'", "mode": "macvlan"}' 10.83.0.1/24)"
	hpn_add "$B" "$(hconf '{"master": "'"$p"'", "mode": "macvlan"}' 10.83.0.2/24)"
	soft_named "$A" 0
	da=$DEV
	soft_named "$B" 0
	db=$DEV
	[[ $da != "$db" ]] || fail "both children got $da"
	[[ $(ip netns exec "$A" rdma link show "$da/1") == *" netdev hpn0 "* ]] ||
		fail "$da is not on $A's child"
	traffic "$A" 10.83.0.1 "$B" 10.83.0.2
	hpn_del "$A"
	hpn_del "$B"
	wait_for 5 rdma_none || fail "rdma links left after DEL: $(rdma link show)"
	[[ $(<"/sys/class/net/$p/operstate") == up ]] || fail "the parent $p is not up any more"
	no_state
	fx ip link set "$p" down
	fx ip netns del "$A"
	fx ip netns del "$B"
}

scen_parent() {
	local p=${VM_NICS[2]} conf
	info "parent: $p with an rxe of its own, a macvlan child in $A"
	pod_add "$A"
	fx ip link set "$p" up
	rxe_add "$p" rxp
	in_pod "$A"
	conf=$(hconf '{"master": "'"$p"'", "mode": "macvlan"}' 10.84.0.1/24)
	run_plugin ADD "$(jq -c 'del(.softRoce)' <<<"$conf")"
	expect_err 108 "macvlan child of rxp without softRoce" \
		'the rxe device "rxp" of "'"$p"'" cannot carry the traffic of "'"$p"'".s macvlan in a pod: from Linux 7.1'
	# With softRoce too: while rxp exists rdma_cm resolves the child's address to it.
	run_plugin ADD "$conf"
	expect_err 108 "macvlan child of rxp with softRoce" \
		'the rxe device "rxp" of "'"$p"'" serves only the host netns, yet rdma_cm would resolve'
	[[ -z $(ip -n "$A" -o link show type macvlan) ]] || fail "a child was made"
	[[ $(rdma link show) == "link rxp/1 "* ]] || fail "rxp changed: $(rdma link show)"
	no_state
	fx rdma link delete rxp
	hpn_add "$A" "$conf"
	soft_named "$A" 0
	hpn_del "$A"
	wait_for 5 rdma_none || fail "rdma links left: $(rdma link show)"
	fx ip link set "$p" down
	fx ip netns del "$A"
}

scen_gone() {
	local name
	info "gone: a pod netns deleted with its rxe inside, then DEL; another, then GC"
	pod_add "$A"
	pod_add "$B"
	hpn_add "$A" "$(hconf "$(pci 0)" 10.81.0.1/24)"
	hpn_add "$B" "$(hconf "$(pci 1)" 10.81.0.2/24)"
	soft_named "$A" 0
	fx ip netns del "$A"
	wait_for 20 is_home "${VM_MACS[0]}" || fail "${VM_NICS[0]} did not come back from $A"
	name=$(home_as "${VM_MACS[0]}")
	[[ $name == hpn0 ]] || fail "${VM_NICS[0]} came back as $name"
	! seen_dev "$DEV" || fail "$DEV outlived its netns"
	hpn_del "$A"
	[[ $(home_as "${VM_MACS[0]}") == "${VM_NICS[0]}" ]] ||
		fail "DEL did not name the NIC ${VM_NICS[0]} again: $(home_as "${VM_MACS[0]}")"
	fx ip netns del "$B"
	wait_for 20 is_home "${VM_MACS[1]}" || fail "${VM_NICS[1]} did not come back from $B"
	in_pod "$B"
	# Debian's static stops at 1.0.0, GC needs 1.1.0: without IPAM (static holds no lease).
	run_plugin GC "$(jq -c '.cniVersion = "1.1.0" | del(.ipam) | .["cni.dev/valid-attachments"] = []' <<<"${CONFS[$B]}")"
	expect_ok "GC after $B was deleted"
	wait_for 5 rdma_none || fail "rdma links left: $(rdma link show)"
	nics_as_booted
	no_state
}

# seen_dev NAME: `rdma dev show` lists NAME.
seen_dev() {
	[[ $(rdma dev show) == *" $1: "* ]]
}

scen_crash() {
	local first r
	info "crash: ADD killed after the rxe was made; DEL, retried ADD, rollback"
	pod_add "$A"
	in_pod "$A"
	CONFS[$A]=$(hconf "$(pci 0)" 10.81.0.1/24)
	run_plugin ADD "${CONFS[$A]}" HPN_FAIL_AT=rdma-create HPN_FAIL_KILL=1
	[[ $RC == 137 ]] || fail "ADD killed after rdma-create: exit $RC"
	first=$(jq -r '.nics[0].rdma | select(.created) | .name' "$T/state/$HPN7_NET/cid-$A.eth0")
	[[ $first =~ ^rxe_ ]] || fail "the journal names no created device: $(cat "$T/state/$HPN7_NET/cid-$A.eth0")"
	seen_dev "$first" || fail "the killed ADD left no $first to clean up"
	RES[$A]=null
	hpn_del "$A"
	! seen_dev "$first" || fail "DEL left $first"
	nics_as_booted
	no_state
	# Killed again; the retried ADD of the same attachment undoes it first.
	run_plugin ADD "${CONFS[$A]}" HPN_FAIL_AT=rdma-create HPN_FAIL_KILL=1
	[[ $RC == 137 ]] || fail "second killed ADD: exit $RC"
	hpn_add "$A" "${CONFS[$A]}"
	plugin_log_has "found state of an earlier ADD for cid-$A.eth0; undoing it first"
	soft_named "$A" 0
	[[ $DEV == "$first" ]] || fail "the same attachment got $DEV, first $first: names must be stable"
	[[ $(rdma link show | grep -c .) == 1 ]] || fail "more than one device: $(rdma link show)"
	hpn_del "$A"
	# A failure after the proof: the rollback deletes the device before the NIC leaves.
	run_plugin ADD "${CONFS[$A]}" HPN_FAIL_AT=rdma
	expect_err 106 "ADD failing after the proof" 'injected failure after step rdma'
	r=$(rdma link show)
	[[ -z $r ]] || fail "the rollback left: $r"
	nics_as_booted
	no_state
	fx ip netns del "$A"
}

# rail_traffic SPOD CPOD I SA CA: rail I between the pods: rping bound to the
# rail's addresses, ib_write_bw between the rail's devices with the hints'
# GID index; bytes only on that rail's devices.
rail_traffic() {
	local spod=$1 cpod=$2 i=$3 sa=$4 ca=$5 o sdev cdev sodev codev sg cg
	local -A c0 c1
	o=$((1 - i))
	hints "$spod"
	sdev=${HCA[i]%:1} sodev=${HCA[o]%:1} sg=$GID
	hints "$cpod"
	cdev=${HCA[i]%:1} codev=${HCA[o]%:1} cg=$GID
	counters c0
	rping_pods "$spod" "$sa" "$cpod" "$ca"
	write_bw_pods "$spod" "$sdev" "$cpod" "$cdev" "$sa" "$ITERS" "$sg" "$cg"
	counters c1
	rose_dir c0 c1 "$cdev/1" sent_bytes $((ITERS * 65536))
	rose_dir c0 c1 "$sdev/1" rcvd_bytes $((ITERS * 65536))
	still c0 c1 "$sodev/1" "$codev/1"
	echo "  # rail $i: the other rail's $sodev and $codev counted nothing"
}

# rail_pods CONF_A CONF_B: $A with NICs 0 and 1, $B with 2 and 3, count 2.
rail_pods() {
	hpn_add "$A" "$1"
	hpn_add "$B" "$2"
	local p i
	for p in "$A" "$B"; do
		hints "$p"
		((${#HCA[@]} == 2)) || fail "$p: hints name ${HCA[*]}, expected two devices"
		for i in 0 1; do
			soft_named "$p" "$i"
		done
		[[ ${HCA[0]} != "${HCA[1]}" ]] || fail "$p: both rails on ${HCA[0]}"
		echo "  # $p: NCCL_IB_HCA==${HCA[0]},${HCA[1]} NCCL_IB_GID_INDEX=$GID"
		hpn_run CHECK "$p"
		expect_ok "CHECK $p"
	done
}

# addr POD I: NIC I's IPv4 address in POD's result, without the prefix.
addr() {
	jq -r --argjson i "$2" '[.ips[] | select(.interface == $i) | .address][0] | sub("/.*"; "")' <<<"${RES[$1]}"
}

scen_rails() {
	local sel dd=$T/hl-rails ipam a0 a1 b0 b1
	info "rails: $A with ${VM_NICS[0]}, ${VM_NICS[1]} as hpn0, hpn1; $B with ${VM_NICS[2]}, ${VM_NICS[3]}"
	pod_add "$A"
	pod_add "$B"
	sel() {
		jq -cn --arg a "${VM_PCIS[$1]}" --arg b "${VM_PCIS[$2]}" '{match: {pciAddresses: [$a, $b]}, count: 2}'
	}
	info "rails: one subnet, 10.75.0.0/24 (host-local)"
	ipam='.ipam = {type: "host-local", dataDir: "'"$dd"'", ranges: [[{subnet: "10.75.0.0/24"}]]}'
	rail_pods "$(hconf "$(sel 0 1)" 0/0 "$ipam")" "$(hconf "$(sel 2 3)" 0/0 "$ipam")"
	a0=$(addr "$A" 0) a1=$(addr "$A" 1) b0=$(addr "$B" 0) b1=$(addr "$B" 1)
	rail_traffic "$A" "$B" 0 "$a0" "$b0"
	rail_traffic "$A" "$B" 1 "$a1" "$b1"
	hpn_del "$A"
	hpn_del "$B"
	wait_for 5 rdma_none || fail "rdma links left: $(rdma link show)"
	[[ -z $(ip -n "$A" rule show | grep -v -E 'lookup (local|main|default)') ]] ||
		fail "$A kept rules: $(ip -n "$A" rule show)"
	info "rails: two subnets, 10.75.0.0/24 on hpn0 and 10.76.0.0/24 on hpn1"
	ipam() {
		echo '.ipam = {type: "hpnt-ipam", addresses: [{address: "10.75.0.'"$1"'/24"}],
			byIfname: {hpn1: {addresses: [{address: "10.76.0.'"$1"'/24"}]}}}'
	}
	CNI_PATH_EXTRA=CNI_PATH=${HPN_PLUGIN%/*}:$HPN_SRC/test/netns/bin:$CNI_BIN
	hpn_add "$A" "$(hconf "$(sel 0 1)" 0/0 "$(ipam 1)")" "$CNI_PATH_EXTRA"
	hpn_add "$B" "$(hconf "$(sel 2 3)" 0/0 "$(ipam 2)")" "$CNI_PATH_EXTRA"
	rail_traffic "$A" "$B" 0 10.75.0.1 10.75.0.2
	rail_traffic "$A" "$B" 1 10.76.0.1 10.76.0.2
	hpn_run CHECK "$A" "$CNI_PATH_EXTRA"
	expect_ok "CHECK $A, two subnets"
	hpn_run DEL "$A" "$CNI_PATH_EXTRA"
	expect_ok "DEL $A"
	hpn_run DEL "$B" "$CNI_PATH_EXTRA"
	expect_ok "DEL $B"
	wait_for 5 rdma_none || fail "rdma links left: $(rdma link show)"
	nics_as_booted
	no_state
	fx ip netns del "$A"
	fx ip netns del "$B"
}

# proofs_pids POD: the processes in POD's netns (the proofs' children enter it first).
proofs_pids() {
	ip netns pids "$1"
}

# no_pids POD: no process is in POD's netns.
no_pids() {
	[[ -z $(proofs_pids "$1") ]]
}

# made_for NIC: the rxe device the plugin's log says ADD made for NIC (last).
made_for() {
	sed -n 's/.*no RDMA device serves "'"$1"'": softRoce makes rxe device "\([^"]*\)".*/\1/p' \
		"$T/plugin.log" | tail -n1
}

scen_proofs() {
	local i dd=$T/hl-proofs conf dev2 pid ppid bg
	local -A seen=()
	info "proofs: $A with pv0..pv3 (veth pairs, a pool, count 4), an rxe each, proven at once"
	pod_add "$A"
	for i in 0 1 2 3; do
		fx ip link add "pv$i" type veth peer name "pvp$i"
		fx ip link set "pvp$i" up
	done
	conf=$(hconf '{"match": {"devices": ["pv*"]}, "count": 4}' 0/0 \
		'.ipam = {type: "host-local", dataDir: "'"$dd"'", ranges: [[{subnet: "10.77.0.0/24"}]]}')
	hpn_add "$A" "$conf"
	hints "$A"
	((${#HCA[@]} == 4)) || fail "$A: hints name ${HCA[*]}, expected four devices"
	for i in 0 1 2 3; do
		soft_named "$A" "$i"
		[[ -z ${seen[$DEV]:-} ]] || fail "$A: NICs ${seen[$DEV]} and $i both bound to $DEV"
		seen[$DEV]=$i
		[[ $(ip netns exec "$A" rdma link show "$DEV/1") == *"state ACTIVE "* ]] ||
			fail "$A: $DEV is not ACTIVE"
	done
	echo "  # $A: NCCL_IB_HCA==${HCA[*]}"
	hpn_run CHECK "$A"
	expect_ok "CHECK $A"
	hpn_del "$A"
	wait_for 5 rdma_none || fail "rdma links left: $(rdma link show)"
	no_state

	info "proofs: pvp2 down, so NIC 2's port is never ACTIVE: 108 naming its device, rolled back"
	fx ip link set pvp2 down
	in_pod "$A"
	run_plugin ADD "$conf"
	dev2=$(made_for pv2)
	[[ $dev2 =~ ^rxe_[0-9a-f]{12}$ ]] || fail "the log names no device made for pv2: $(tail -n 20 "$T/plugin.log")"
	expect_err 108 "ADD with NIC 2 unprovable" \
		'^after 10000 ms: RDMA device "'"$dev2"'" port 1 is [a-zA-Z_]+, not ACTIVE( |$)'
	no_pids "$A" || fail "processes left in $A: $(proofs_pids "$A")"
	wait_for 5 rdma_none || fail "the rollback left: $(rdma link show)"
	[[ $(ip -n "$A" -o link show | grep -vc ': lo:') == 0 ]] || fail "$A is not empty: $(ip -n "$A" -o link show)"
	for i in 0 1 2 3; do
		ip link show "pv$i" >/dev/null 2>&1 || fail "pv$i is not back under its name"
	done
	[[ -z $(compgen -G "$dd/*/10.77.*") ]] || fail "host-local still holds $(ls "$dd"/*)"
	no_state

	info "proofs: the plugin killed while NIC 2's proof waits: its children go with it"
	(run_plugin ADD "$conf") &
	bg=$!
	wait_for 20 eval '[[ -n $(proofs_pids "$A") ]]' || fail "no proof ever ran in $A"
	nap 1
	# The first one still there: the other NICs' proofs end as this one waits,
	# and one listed may be gone by the time its stat is read.
	ppid=
	for pid in $(proofs_pids "$A"); do
		{ read -r _ _ _ ppid _ <"/proc/$pid/stat"; } 2>/dev/null && break
		ppid=
	done
	[[ -n $ppid ]] || fail "no proof in $A lived long enough to be seen"
	[[ $(readlink "/proc/$ppid/exe") == "$HPN_PLUGIN" ]] || fail "$pid in $A is not a child of the plugin"
	echo "  # proofs in $A: $(proofs_pids "$A" | xargs), the plugin $ppid"
	kill -9 "$ppid"
	wait "$bg" || true
	wait_for 3 no_pids "$A" || fail "the proofs outlived the plugin: $(proofs_pids "$A")"
	RES[$A]=null
	CONFS[$A]=$conf
	hpn_del "$A"
	wait_for 5 rdma_none || fail "DEL left: $(rdma link show)"
	for i in 0 1 2 3; do
		ip link show "pv$i" >/dev/null 2>&1 || fail "pv$i is not back under its name after DEL"
		fx ip link del "pv$i"
	done
	no_state
	fx ip netns del "$A"
}

# The probe in POD's netns and a private mount namespace where FILE is bound at
# /etc/nccl.conf (the mount point made for it, then removed: the VM's root is
# an overlay over this machine's, which has none), through trixie's loader
# from the runtime cache with only NCCL_DEBUG=INFO in its environment: its
# output and NCCL's. One process chain, as few starts as TCG allows.
probe_in() {
	local made=
	[[ -e /etc/nccl.conf ]] || { : >/etc/nccl.conf && made=1; }
	# shellcheck disable=SC2016 # the inner shell's
	ip netns exec "$1" unshare -m --propagation private bash -c \
		'mount --bind -o ro "$0" /etc/nccl.conf && exec env -i NCCL_DEBUG=INFO "$@"' \
		"$2" "$NCCL_LOADER" --library-path "$NCCL_LIBDIR" "$NCCL_PROBE" 2>&1 || true
	[[ -z $made ]] || rm -f /etc/nccl.conf
}

scen_nccl() {
	local why f log t0
	why=$(ncclprobe_why_not)
	[[ -z $why ]] || skip "$why"
	info "nccl: ${VM_NICS[0]} -> $A (softRoce), NCCL $NCCL_BOOT_VERSION reading its hints at /etc/nccl.conf"
	pod_add "$A"
	# The bootstrap on hpn0 (the pod has no eth0 here) and the family, which
	# NCCL reads at bootstrap too; NCCL_DEBUG, which the probe's own wins over.
	hpn_add "$A" "$(hconf "$(pci 0)" 10.81.0.1/24 '.nccl.socketIfname = "hpn0" |
		.nccl.env = {NCCL_SOCKET_FAMILY: "AF_INET", NCCL_DEBUG: "WARN"}')"
	soft_named "$A" 0
	f=$(jq -r .nccl.file <<<"${RES[$A]}")
	t0=${EPOCHREALTIME/./}
	log=$(probe_in "$A" "$f")
	sed 's/^/  | /' <<<"$log"
	echo "  # the probe: $(((${EPOCHREALTIME/./} - t0) / 1000)) ms"
	# The hints also name the rxe device and its GID (NCCL_IB_HCA,
	# NCCL_IB_GID_INDEX) and NCCL_IB_DISABLE=0: NCCL 2.22 reads those only at
	# communicator init, which needs a GPU, so the check (exactly the lines
	# NCCL_BOOT_KEYS predicts) also proves it logged none of them here.
	nccl_took "$log" "$(<"$f")" 10.81.0.1 ||
		fail "NCCL did not take its bootstrap settings from the hints: $NCCL_WHY"
	echo "  # NCCL $NCCL_VERSION took from the hints: $(printf '%s; ' "${NCCL_WANT[@]}")$NCCL_BOOT"
	[[ ${#NCCL_WANT[@]} == 2 ]] || fail "expected NCCL_SOCKET_FAMILY and NCCL_SOCKET_IFNAME: ${NCCL_WANT[*]}"
	hpn_del "$A"
	wait_for 5 rdma_none || fail "rdma links left after DEL: $(rdma link show)"
	nics_as_booted
	no_state
	fx ip netns del "$A"
}

run_scenarios pods macvlan parent gone crash rails proofs nccl
