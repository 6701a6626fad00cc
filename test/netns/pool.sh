#!/bin/bash
# Node-wide NIC pools (config "match"), multi-NIC pods ("count") and GC of
# pods that vanished without a DEL, with veth ends as the pool's NICs.
#
# - 32 concurrent ADDs for 32 pods on a pool of 32: every pod gets its own
#   NIC; then on a pool of 16: exactly 16 succeed, the others fail cleanly
#   (code 11 while the pool is held by ADDs in flight, 100 once it is simply
#   taken), no NIC is in two pods, and concurrent DELs leave the host exactly
#   as before.
# - count 3 with host-local: hpn0, hpn1, hpn2, one lease each, CHECK, DEL;
#   count larger than the free pool: refused, nothing changed. (Rollback
#   and kill -9 of multi-NIC and macvlan ADDs: rollback.sh.)
# - an ADD in flight (held there by a gated IPAM): another pod's ADD of the
#   same NICs gets 11, GC leaves the ADD alone, then 100 once it is done.
# - a DEL in flight (held the same way) does not hold the state lock: its
#   attachment's DEL and CHECK get 11, another pod's ADD of its NIC gets 11,
#   GC leaves it alone; then the NIC is free.
# - GC after pods vanish (netns deleted, no DEL): their journals and leases
#   go, the listed pod keeps its NICs.
# - match.numaNode, read through a fake sysfs.
# - config errors of match / count / mode.
# HPN_POOL_PARALLEL (default 32) scales the concurrent rounds.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

PAR=${HPN_POOL_PARALLEL:-32}
[[ $PAR =~ ^[0-9]+$ ]] && ((PAR >= 2 && PAR <= 64)) || fail "HPN_POOL_PARALLEL must be 2..64"

now_ms() {
	local us=${EPOCHREALTIME//[.,]/}
	echo $((us / 1000))
}

# mk_pool N: veth NICs pool0..pool(N-1) in the host netns, and a decoy.
mk_pool() {
	local i
	for ((i = 0; i < $1; i++)); do
		mk_nic "$HOST_NS" "pool$i" "peer$i"
	done
	mk_nic "$HOST_NS" other0 otherpeer0
}

# pool_conf [FILTER [jq args...]]: hpn0 from the pool "pool*", then FILTER.
pool_conf() {
	local extra=${1:-.}
	shift || true
	net_conf 1.0.0 '.match = {devices: ["pool*"]} | .ifName = "hpn0" | '"$extra" "$@"
}

# par_add_del CMD: CMD for pod 0..PAR-1 at once; $T/par/I/{rc,out} per pod.
par_run() {
	local cmd=$1 i=$2 d=$T/par/$2
	T=$d
	POD_NS=${HPNT_PREFIX}p$SCEN-$i
	CID=hpnt-$$-$SCEN-$i
	run_plugin "$cmd" "$(<"$d/$cmd.conf")"
	echo "$RC" >"$d/rc"
	printf '%s' "$OUT" >"$d/$cmd.out"
}

par_round() {
	local cmd=$1 i t0
	local -a pids=()
	t0=$(now_ms)
	for ((i = 0; i < PAR; i++)); do
		par_run "$cmd" "$i" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do
		wait "$i" || true
	done
	info "$PAR ${cmd}s at once: $(($(now_ms) - t0)) ms wall"
}

# concurrent POOLSIZE: PAR pods ADD at once from a pool of POOLSIZE.
concurrent() {
	local size=$1 i ok=0 n11=0 n100=0 conf out macs pod
	local -a pods=()
	mk_pool "$size"
	snap_save "$HOST_NS" "$T/host.before"
	conf=$(pool_conf)
	for ((i = 0; i < PAR; i++)); do
		pod=${HPNT_PREFIX}p$SCEN-$i
		ip netns add "$pod"
		pods+=("$pod")
		mkdir -p "$T/par/$i"
		printf '%s' "$conf" >"$T/par/$i/ADD.conf"
	done
	par_round ADD
	macs=
	for ((i = 0; i < PAR; i++)); do
		out=$(<"$T/par/$i/ADD.out")
		if [[ $(<"$T/par/$i/rc") == 0 ]]; then
			ok=$((ok + 1))
			jq -e --arg ns "$(ns_path "${pods[i]}")" '.interfaces | length == 1 and
				.[0].name == "hpn0" and .[0].sandbox == $ns' <<<"$out" >/dev/null ||
				fail "pod $i: result is not one hpn0 in its pod: $out"
			macs+="$(jq -r '.interfaces[0].mac' <<<"$out") $(ip -n "${pods[i]}" -j link show dev hpn0 | jq -r '.[0].address')"$'\n'
			printf '%s' "$(with_prev "$conf" "$out")" >"$T/par/$i/DEL.conf"
		else
			case $out in
			*'"code":11'* | *'"code": 11'*) n11=$((n11 + 1)) ;;
			*'"code":100'* | *'"code": 100'*) n100=$((n100 + 1)) ;;
			*) fail "pod $i: failed with neither code 11 nor 100: $out $(<"$T/par/$i/rc")" ;;
			esac
			POD_NS=${pods[i]} pod_empty "pod $i after its failed ADD"
			printf '%s' "$conf" >"$T/par/$i/DEL.conf"
		fi
	done
	local want=$((size < PAR ? size : PAR))
	info "pool of $size, $PAR pods: $ok attached, $n11 code 11 (pool held by ADDs in flight), $n100 code 100 (pool taken)"
	((ok == want)) || fail "$ok ADDs succeeded, expected exactly $want"
	# No NIC twice: every pod's hpn0 has another MAC, as its result says.
	[[ $(awk 'NF && $1 == $2' <<<"$macs" | wc -l) == "$ok" ]] ||
		fail "a result's MAC is not the one in its pod: $macs"
	[[ $(awk 'NF {print $1}' <<<"$macs" | sort -u | wc -l) == "$ok" ]] ||
		fail "a NIC is in two pods: $macs"
	[[ $(state_count) == "$ok" ]] || fail "$(state_count) journals, expected $ok"
	for ((i = 0; i < size && ok == size; i++)); do
		has_link "$HOST_NS" "pool$i" && fail "pool$i is still on the host"
	done
	has_link "$HOST_NS" other0 || fail "the decoy other0 was taken"
	# The runtime DELs every attachment, failed or not.
	par_round DEL
	for ((i = 0; i < PAR; i++)); do
		[[ $(<"$T/par/$i/rc") == 0 ]] || fail "DEL of pod $i: $(<"$T/par/$i/DEL.out")"
		POD_NS=${pods[i]} pod_empty "pod $i after DEL"
	done
	snap_same "$HOST_NS" "$T/host.before" "host after the concurrent DELs"
	expect_no_state "after the concurrent DELs"
	[[ -z $(find "$STATE" -name '.tmp*') ]] || fail "temp files left: $(find "$STATE" -name '.tmp*')"
	for pod in "${pods[@]}"; do
		ip netns del "$pod"
	done
}
scenario "$PAR concurrent ADDs on a pool of $PAR" concurrent "$PAR"
scenario "$PAR concurrent ADDs on a pool of $((PAR / 2))" concurrent "$((PAR / 2))"

# --- count 3 with host-local: three NICs, a lease each.
multi_nic() {
	local dd=$T/hl-$SCEN conf prev
	mk_pool 4
	ip -n "$HOST_NS" link set pool1 mtu 1400
	ip -n "$HOST_NS" link property add dev pool2 altname hpnt-pool-alt
	snap_save "$HOST_NS" "$T/host.before"
	conf=$(pool_conf '.count = 3 | .mtu = 1300 | .ipam = {type: "host-local", dataDir: $dd,
		ranges: [[{subnet: "10.86.0.0/24", gateway: "10.86.0.1"}]],
		routes: [{dst: "10.87.0.0/16"}]}' --arg dd "$dd")
	run_plugin ADD "$conf"
	expect_result "ADD count 3"
	jq_ok '[.interfaces[].name] == ["hpn0", "hpn1", "hpn2"] and
		([.interfaces[].mtu] | unique) == [1300] and
		([.ips[].interface] | sort) == [0, 1, 2] and
		([.ips[].address] | unique | length) == 3 and
		(.routes | length) == 1 and
		([.rdma[].interface] | sort) == [0, 1, 2] and ([.rdma[].bound] | unique) == [false]' \
		"result of count 3"
	for i in 0 1 2; do
		has_link "$POD_NS" "hpn$i" || fail "hpn$i is not in the pod"
		ip -n "$POD_NS" -j addr show dev "hpn$i" | jq -e --argjson r "$OUT" --argjson i "$i" \
			'.[0].addr_info | map("\(.local)/\(.prefixlen)") |
			index([$r.ips[] | select(.interface == $i) | .address][0]) != null' >/dev/null ||
			fail "hpn$i does not carry its address"
	done
	ip -n "$POD_NS" route show 10.87.0.0/16 | grep -q "dev hpn0" || fail "route not on hpn0"
	has_link "$HOST_NS" pool3 || fail "pool3 (not needed) was taken"
	[[ $(hostlocal_ips "$dd" | wc -l) == 3 ]] || fail "host-local holds $(hostlocal_ips "$dd" | wc -l) leases, expected 3"
	[[ $(state_count) == 1 ]] || fail "$(state_count) journals, expected 1"
	prev=$(with_prev "$conf" "$OUT")
	run_plugin CHECK "$prev"
	expect_ok "CHECK of the 3 NICs"
	# CHECK verifies every NIC, not just the first.
	ip -n "$POD_NS" link set hpn2 down
	run_plugin CHECK "$prev"
	expect_err 107 "CHECK with hpn2 down" 'hpn2'
	ip -n "$POD_NS" link set hpn2 up

	# A second pod wants 2, only 1 is free: refused, nothing changes.
	local pod2=${HPNT_PREFIX}p${SCEN}b
	ip netns add "$pod2"
	snap_save "$HOST_NS" "$T/host.mid"
	run_plugin ADD "$(jq -c '.count = 2' <<<"$conf")" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$pod2")"
	expect_err 100 "ADD count 2 with 1 free" 'count needs 2'
	snap_same "$HOST_NS" "$T/host.mid" "host after the refused ADD"
	POD_NS=$pod2 pod_empty "pod 2 after the refused ADD"
	[[ $(state_count) == 1 ]] || fail "the refused ADD left state"
	ip netns del "$pod2"

	run_plugin DEL "$prev"
	expect_ok "DEL count 3"
	run_plugin DEL "$prev"
	expect_ok "second DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	pod_empty "pod after DEL"
	expect_no_state "after DEL"
	[[ -z $(hostlocal_ips "$dd") ]] || fail "host-local still holds $(hostlocal_ips "$dd")"
}
scenario "count 3 with host-local, CHECK, DEL" multi_nic

# gated_ipam CMD GATE: the recording IPAM as $T/slowbin/hpnt-slow, whose CMD
# (ADD or DEL) says it has started (GATE.started), then waits (at most 10
# minutes) until the test opens the gate (GATE.open). Steps then wait on each
# other, not on timers (under valgrind each plugin run takes seconds).
gated_ipam() {
	mkdir -p "$T/slowbin"
	printf '#!/bin/bash\nif [[ $CNI_COMMAND == %s ]]; then\n\t: >%q.started\n\tfor ((i = 0; i < 6000; i++)); do [[ -e %q.open ]] && break; sleep 0.1; done\nfi\nexec %q "$@"\n' \
		"$1" "$2" "$2" "$HPNT_BIN/hpnt-ipam" >"$T/slowbin/hpnt-slow"
	chmod +x "$T/slowbin/hpnt-slow"
}

# gate_reached GATE JOB: wait until the gated IPAM has started (JOB still running).
gate_reached() {
	local i
	for ((i = 0; i < 3000; i++)); do
		[[ -e $1.started ]] && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	[[ -e $1.started ]]
}

# bg_plugin CMD CONF DIR [VAR=value...]: run_plugin in the background; its exit
# status and stdout go to DIR/rc and DIR/res. Sets BG_JOB.
bg_plugin() {
	local cmd=$1 conf=$2 dir=$3
	shift 3
	mkdir -p "$dir"
	(
		T=$dir
		run_plugin "$cmd" "$conf" "$@"
		echo "$RC" >"$T/rc"
		printf '%s' "$OUT" >"$T/res"
	) &
	BG_JOB=$!
}

# --- An ADD in flight holds its NICs: another pod's ADD gets 11 (retry), a
# GC that does not list it leaves it alone; once it is done, the other gets
# 100 (the pool is simply taken). The ADD is held in flight at the IPAM gate.
in_flight() {
	local x=$T/ipam-$SCEN.log conf slow=$T/slowbin gate=$T/gate-$SCEN pod2=${HPNT_PREFIX}p${SCEN}b c
	mk_pool 1
	snap_save "$HOST_NS" "$T/host.before"
	gated_ipam ADD "$gate"
	conf=$(pool_conf '.cniVersion = "1.1.0" | .ipam = {type: "hpnt-slow", log: $x,
		addresses: [{address: "10.91.0.7/24"}]}' --arg x "$x")
	ip netns add "$pod2"
	bg_plugin ADD "$conf" "$T/a" CNI_PATH="$slow:$CNI_PATH_DIRS"
	# Whatever happens next (a failed check exits this subshell), the gate
	# opens and the ADD ends before the scenario's cleanup runs.
	trap ": >$(printf %q "$gate.open"); wait" EXIT
	gate_reached "$gate" "$BG_JOB" || fail "the first ADD never reached IPAM: $(cat "$T/a/res" 2>/dev/null)"
	# The claim is journalled before IPAM runs.
	[[ $(state_count) == 1 ]] || fail "the first ADD wrote no claim"
	run_plugin ADD "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$pod2")" \
		CNI_PATH="$slow:$CNI_PATH_DIRS"
	expect_err 11 "ADD while the pool is held by an ADD in flight" 'being attached or released by other runs'
	run_plugin ADD "$(net_conf 1.0.0 '.device = "pool0"')" CNI_CONTAINERID="$CID-c" \
		CNI_NETNS="$(ns_path "$pod2")"
	# By name, a NIC already moved is simply not on the host (as before pools).
	expect_err 100 "ADD by name of the NIC an ADD in flight moved" 'not found'
	run_plugin GC "$(jq -c '.["cni.dev/valid-attachments"] = []' <<<"$conf")" \
		-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME CNI_PATH="$slow:$CNI_PATH_DIRS"
	expect_ok "GC while the ADD is in flight"
	[[ $(state_count) == 1 ]] || fail "GC removed the journal of an ADD in flight"
	: >"$gate.open"
	wait "$BG_JOB"
	trap - EXIT
	[[ $(<"$T/a/rc") == 0 ]] || fail "the ADD in flight failed: $(<"$T/a/res")"
	has_link "$POD_NS" hpn0 || fail "the ADD in flight did not attach pool0"
	run_plugin ADD "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$pod2")" \
		CNI_PATH="$slow:$CNI_PATH_DIRS"
	expect_err 100 "ADD once the pool is taken" '0 of them free'
	POD_NS=$pod2 pod_empty "pod 2 after its refused ADDs"
	for c in "$CID" "$CID-b"; do
		run_plugin DEL "$conf" CNI_CONTAINERID="$c" CNI_PATH="$slow:$CNI_PATH_DIRS"
		expect_ok "DEL $c"
	done
	snap_same "$HOST_NS" "$T/host.before" "host after the DELs"
	pod_empty "pod after DEL"
	expect_no_state "after the DELs"
	ip netns del "$pod2"
}
scenario "an ADD in flight holds its NICs: 11, GC leaves it alone, then 100" in_flight

# --- A DEL in flight (held at the IPAM gate, the NIC still in the pod) holds
# the state lock only to mark its journal: the same attachment's DEL and CHECK
# get 11, another pod's ADD from the pool gets 11 (the NIC is coming back,
# not taken), a GC that does not list it leaves it alone; once the DEL is
# done, the NIC is free for the other pod.
del_in_flight() {
	local x=$T/ipam-$SCEN.log conf prev slow=$T/slowbin gate=$T/gate-$SCEN pod2=${HPNT_PREFIX}p${SCEN}b
	mk_pool 1
	snap_save "$HOST_NS" "$T/host.before"
	gated_ipam DEL "$gate"
	conf=$(pool_conf '.cniVersion = "1.1.0" | .ipam = {type: "hpnt-slow", log: $x,
		addresses: [{address: "10.91.0.7/24"}]}' --arg x "$x")
	ip netns add "$pod2"
	run_plugin ADD "$conf" CNI_PATH="$slow:$CNI_PATH_DIRS"
	expect_result "ADD"
	prev=$(with_prev "$conf" "$OUT")
	bg_plugin DEL "$conf" "$T/d" CNI_PATH="$slow:$CNI_PATH_DIRS"
	trap ": >$(printf %q "$gate.open"); wait" EXIT
	gate_reached "$gate" "$BG_JOB" || fail "the DEL never reached IPAM: $(cat "$T/d/res" 2>/dev/null)"
	run_plugin DEL "$conf" CNI_PATH="$slow:$CNI_PATH_DIRS"
	expect_err 11 "a second DEL while the first runs" 'a DEL or GC of .* is still running'
	run_plugin CHECK "$prev" CNI_PATH="$slow:$CNI_PATH_DIRS"
	expect_err 11 "CHECK while the DEL runs" 'a DEL or GC of .* is still running'
	run_plugin ADD "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$pod2")" \
		CNI_PATH="$slow:$CNI_PATH_DIRS"
	expect_err 11 "another pod's ADD while the pool's NIC is being released" \
		'being attached or released by other runs'
	run_plugin GC "$(jq -c '.["cni.dev/valid-attachments"] = []' <<<"$conf")" \
		-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME CNI_PATH="$slow:$CNI_PATH_DIRS"
	expect_ok "GC while the DEL runs"
	[[ $(state_count) == 1 ]] || fail "GC removed the journal a DEL is releasing"
	has_link "$POD_NS" hpn0 || fail "GC took the NIC a DEL is releasing"
	: >"$gate.open"
	wait "$BG_JOB"
	trap - EXIT
	[[ $(<"$T/d/rc") == 0 ]] || fail "the DEL in flight failed: $(<"$T/d/res")"
	expect_no_state "after the DEL"
	pod_empty "pod after DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after the DEL"
	run_plugin ADD "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$pod2")" \
		CNI_PATH="$slow:$CNI_PATH_DIRS"
	expect_result "ADD of another pod once the NIC is back"
	run_plugin DEL "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$pod2")" \
		CNI_PATH="$slow:$CNI_PATH_DIRS"
	expect_ok "DEL of the other pod"
	snap_same "$HOST_NS" "$T/host.before" "host after both DELs"
	expect_no_state "after both DELs"
	ip netns del "$pod2"
}
scenario "a DEL in flight: 11 for its attachment and its NIC, GC leaves it alone" del_in_flight

# --- match.numaNode on a fake sysfs: pool0 on node 0, pool1 on node 1; the
# pool of node 1 is pool1 alone, node 2 has none.
numa_match() {
	local conf mac1
	mk_pool 2
	mk_fake_pci "$T/sysfs" 0000:af:00.0 pool0
	mk_fake_pci "$T/sysfs" 0000:af:00.1 pool1
	echo 0 >"$T/sysfs/devices/pci0000:ae/0000:ae:00.0/0000:af:00.0/numa_node"
	echo 1 >"$T/sysfs/devices/pci0000:ae/0000:ae:00.0/0000:af:00.1/numa_node"
	snap_save "$HOST_NS" "$T/host.before"
	mac1=$(ip netns exec "$HOST_NS" cat /sys/class/net/pool1/address)
	conf=$(pool_conf '.match.numaNode = 1 | .sysfsRoot = $s' --arg s "$T/sysfs")
	run_plugin ADD "$conf"
	expect_result "ADD from the NICs of NUMA node 1"
	[[ $(ip -n "$POD_NS" -j link show dev hpn0 | jq -r '.[0].address') == "$mac1" ]] ||
		fail "hpn0 is not pool1, the NIC of NUMA node 1"
	run_plugin DEL "$conf"
	expect_ok "DEL"
	run_plugin ADD "$(jq -c '.match.numaNode = 2' <<<"$conf")"
	expect_err 100 "ADD from NUMA node 2" 'match selects 0 devices'
	snap_same "$HOST_NS" "$T/host.before" "host after the DEL and the refused ADD"
	pod_empty "pod after the DEL and the refused ADD"
	expect_no_state "after the DEL"
}
scenario "match.numaNode on a fake sysfs" numa_match

# lease_held LOG CID IFNAME: the recording IPAM's last ADD for CID and IFNAME
# has no later DEL.
lease_held() {
	local add del
	[[ -f $1 ]] || return 1
	add=$(grep -n "^ADD $2 $3 " "$1" | tail -n1 | cut -d: -f1 || true)
	del=$(grep -n "^DEL $2 $3 " "$1" | tail -n1 | cut -d: -f1 || true)
	[[ -n $add ]] && [[ -z $del || $del -lt $add ]]
}

# --- Pods vanish (netns deleted, no DEL); GC with only pod A listed. Debian's
# host-local stops at 1.0.0, so the recording IPAM stands in for GC's 1.1.0.
gc_vanished() {
	local x=$T/ipam-$SCEN.log conf l i podb=${HPNT_PREFIX}q$SCEN podc=${HPNT_PREFIX}r$SCEN gc prev
	mk_pool 4
	conf=$(pool_conf '.cniVersion = "1.1.0" | .ipam = {type: "hpnt-ipam", log: $x,
		addresses: [{address: "10.90.0.7/24"}]}' --arg x "$x")
	ip netns add "$podb"
	ip netns add "$podc"
	run_plugin ADD "$conf" CNI_CONTAINERID="$CID-a"
	expect_result "ADD A"
	prev=$(with_prev "$conf" "$OUT")
	run_plugin ADD "$(jq -c '.count = 2' <<<"$conf")" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$podb")"
	expect_result "ADD B (2 NICs)"
	run_plugin ADD "$conf" CNI_CONTAINERID="$CID-c" CNI_NETNS="$(ns_path "$podc")"
	expect_result "ADD C"
	[[ $(state_count) == 3 ]] || fail "expected 3 journals: $(state_files)"
	for l in "$CID-a eth0" "$CID-b eth0" "$CID-b hpn1" "$CID-c eth0"; do
		# shellcheck disable=SC2086 # two words on purpose
		lease_held "$x" $l || fail "no lease for $l: $(tr '\n' '|' <"$x")"
	done
	# B and C vanish: their veths die with their netns.
	ip netns del "$podb"
	ip netns del "$podc"
	# The kernel tears the dead pods' veths down asynchronously (A has pool0;
	# B pool1 and pool2, C pool3, in name order).
	for l in peer1 peer2 peer3; do
		for ((i = 0; i < 100; i++)); do
			has_link "$HOST_NS" "$l" || break
			sleep 0.1
		done
		has_link "$HOST_NS" "$l" && fail "$l outlived its pod's netns"
	done
	snap_save "$HOST_NS" "$T/host.vanished"
	gc=$(jq -c --arg a "$CID-a" '.["cni.dev/valid-attachments"] = [{containerID: $a, ifname: "eth0"}]' <<<"$conf")
	run_plugin GC "$gc" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "GC"
	[[ $(state_files) == "$STATE/$NET/$CID-a.eth0" ]] || fail "journals after GC: $(state_files)"
	for l in "$CID-b eth0" "$CID-b hpn1" "$CID-c eth0"; do
		# shellcheck disable=SC2086
		! lease_held "$x" $l || fail "GC did not release $l: $(tr '\n' '|' <"$x")"
	done
	lease_held "$x" "$CID-a" eth0 || fail "GC released A's lease"
	snap_same "$HOST_NS" "$T/host.vanished" "host after GC"
	run_plugin CHECK "$prev" CNI_CONTAINERID="$CID-a"
	expect_ok "CHECK of A after GC"
	run_plugin GC "$(jq -c '.["cni.dev/valid-attachments"] = []' <<<"$gc")" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "GC of everything"
	expect_no_state "after GC of everything"
	! lease_held "$x" "$CID-a" eth0 || fail "GC did not release A's lease"
	pod_empty "pod A after GC"
}
scenario "GC after pods vanished" gc_vanished

# --- Config errors (code 7), nothing touched.
bad_configs() {
	local c line filter pat
	mk_pool 1
	snap_save "$HOST_NS" "$T/host.before"
	while read -r line; do
		filter=${line%% ## *}
		pat=${line#* ## }
		c=$(net_conf 1.0.0 "$filter")
		run_plugin ADD "$c"
		expect_err 7 "ADD with $filter" "$pat"
	done <<'EOF'
.match = {devices: ["pool*"]} | .device = "pool0" ## device and match both select
.match = {} ## match needs at least one
.match = {devices: "pool*"} ## match.devices must be an array
.match = {pciAddresses: ["zz"]} ## pciAddresses
.device = "pool0" | .count = 2 ## count 2 needs match
.match = {devices: ["pool*"]} | .count = 17 ## count
.master = "pool0" ## master needs mode macvlan
.device = "pool0" | .mode = "bridge" ## mode "bridge"
.master = "pool0" | .mode = "macvlan" | .macvlanMode = "l2" ## macvlanMode
.master = "pool0" | .mode = "macvlan" | .ipvlanMode = "l2" ## ipvlanMode needs mode ipvlan
.master = "pool0" | .device = "pool0" | .mode = "macvlan" ## both select
.match = {devices: ["pool*", "other*"]} | .count = 2 | .ifName = "abcdefghijklmn9" ## over 15 bytes
EOF
	snap_same "$HOST_NS" "$T/host.before" "host after bad configs"
	pod_empty "pod after bad configs"
	expect_no_state "after bad configs"
}
scenario "config errors of match, count, mode" bad_configs

# --- STATUS: code 50 only for a pool that cannot serve (too few NICs in all, a
# driver missing, a match that selects nothing); one that pods use up is fine
# (on containerd 2.1+ a failing STATUS makes the whole node NotReady).
status_pool() {
	local c one podb=${HPNT_PREFIX}p${SCEN}b podc=${HPNT_PREFIX}p${SCEN}c
	mk_pool 2
	ip netns add "$podb"
	ip netns add "$podc"
	c=$(net_conf 1.1.0 '.match = {devices: ["pool*"]} | .count = 2')
	one=$(jq -c '.count = 1' <<<"$c")
	run_plugin STATUS "$c" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "STATUS with 2 free of 2"
	run_plugin STATUS "$(jq -c '.count = 3' <<<"$c")" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_err 50 "STATUS with 2 free of 3 needed" 'count needs 3'
	run_plugin STATUS "$(jq -c '.match.drivers = ["hpnt_no_such_driver"]' <<<"$c")" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_err 50 "STATUS with a driver not loaded" 'hpnt_no_such_driver.*not loaded'
	run_plugin STATUS "$(jq -c '.match.devices = ["hpnt-none*"]' <<<"$c")" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_err 50 "STATUS with a match that selects nothing" 'selects 0 devices'
	run_plugin ADD "$one"
	expect_result "ADD of 1"
	run_plugin STATUS "$c" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "STATUS with 1 free, 1 held, count 2"
	run_plugin ADD "$one" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$podb")"
	expect_result "ADD of the last NIC"
	run_plugin STATUS "$one" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "STATUS with every NIC held by pods"
	run_plugin STATUS "$(jq -c '.count = 3' <<<"$c")" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_err 50 "STATUS with 2 NICs in pods, count 3" 'selects 2 devices \(0 free on the host, 2 in pods\)'
	run_plugin ADD "$one" CNI_CONTAINERID="$CID-c" CNI_NETNS="$(ns_path "$podc")"
	expect_err 100 "ADD beyond the pool (the pool is working: it is used up)"
	run_plugin DEL "$one" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$podb")"
	expect_ok "DEL b"
	run_plugin DEL "$one"
	expect_ok "DEL a"
	expect_no_state "after both DELs"
	ip netns del "$podb"
	ip netns del "$podc"
}
scenario "STATUS of a pool" status_pool

t_done
