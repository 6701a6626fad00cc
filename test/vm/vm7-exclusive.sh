#!/bin/bash
# hpn-vm: kernel=7 nics=2 append=ib_core.netns_mode=0
# The current kernel (7.x) booted in exclusive RDMA netns mode
# (ib_core.netns_mode=0): an RDMA device belongs to one netns and is seen
# only there. RDMA pods made by hand (floor.sh), every scenario in one boot:
#  move      `rdma link add` run inside the pod lands in the initial netns;
#            `rdma dev set NAME netns POD` moves it (ACTIVE, netdev hpn0,
#            seen only in the pod); ibv_rc_pingpong and ib_write_bw work pod
#            to pod and count on both devices; rdma_cm connect (rping) fails
#            with this kernel's known limit, asserted exactly (QP1 is not
#            re-created by the move: "rxe_create_qp: returned err = -22",
#            "Couldn't create ib_mad QP1"; rping: "rdma_connect: Invalid
#            argument"), so a kernel that fixes it makes this scenario say
#            so; the device goes back to the initial netns before the NIC
#            leaves the pod.
#  lifetime  what survives what: the NIC leaving the pod destroys its rxe
#            (moved in or not); a pod netns deleted with its rxe moved in
#            takes the device with it (the NIC comes back as hpn0); a device
#            moved into the pod before its NIC dies when the NIC follows; the
#            mode cannot change while a pod netns exists (EBUSY).
#  names     device names are unique per netns, not per node: a moved-away
#            device's name is free again in the initial netns, and a move
#            into a netns holding that name fails with EEXIST -- the way home
#            too; the move must be asked from the device's own netns.
# Run one: test/vm/run.sh test/vm/vm7-exclusive.sh NAME...
# shellcheck disable=SC2034 # counter arrays are used through namerefs
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=floor.sh
source "$(dirname "$0")/floor.sh"

vm7_require exclusive

A=hpnv-a
B=hpnv-b
ITERS=40

# seen_in POD DEV: `rdma dev show` run in POD (empty: the initial netns)
# lists DEV.
seen_in() {
	local -a in=()
	[[ -n $1 ]] && in=(ip netns exec "$1")
	[[ $("${in[@]}" rdma dev show) == *" $2: "* ]]
}

# seen_nowhere DEV POD...: DEV is seen neither in the initial netns nor in
# any POD.
seen_nowhere() {
	local dev=$1 p
	shift
	for p in "" "$@"; do
		! seen_in "$p" "$dev" || return 1
	done
}

# only_in POD DEV OTHER...: DEV is seen in POD and in none of the OTHERs.
only_in() {
	local where=$1 dev=$2 o
	shift 2
	seen_in "$where" "$dev" || fail "$dev is not seen in ${where:-the initial netns}"
	for o in "$@"; do
		! seen_in "$o" "$dev" || fail "$dev is seen in ${o:-the initial netns} too"
	done
	echo "  # $dev is seen only in ${where:-the initial netns}"
}

# pods_with_nics SUBNET: $A and $B with NIC 0 and 1 as hpn0 (SUBNET.1, .2),
# and "init" naming the initial netns for `rdma dev set ... netns init`.
pods_with_nics() {
	pod_add "$A"
	pod_add "$B"
	nic_to_pod "${VM_NICS[0]}" "$A" hpn0 "$1.1/24"
	nic_to_pod "${VM_NICS[1]}" "$B" hpn0 "$1.2/24"
	fx ip netns attach init 1
}

scen_move() {
	local l k
	local -A c0 c1
	info "move: rxe made from inside each pod, then moved into it"
	pods_with_nics 10.72.0
	rxe_in "$A" hpn0 rxa
	rxe_in "$B" hpn0 rxb
	# The device is registered in the initial netns, whoever asked; the pod
	# cannot see it (its verbs would find no device).
	only_in "" rxa "$A" "$B"
	l=$(ip netns exec "$A" ibv_devices)
	[[ $l != *rxa* ]] || fail "$A sees rxa before the move: $l"
	fx rdma dev set rxa netns "$A"
	fx rdma dev set rxb netns "$B"
	only_in "$A" rxa "" "$B"
	only_in "$B" rxb "" "$A"
	l=$(ip netns exec "$A" rdma link show rxa/1)
	[[ $l == *"state ACTIVE physical_state LINK_UP netdev hpn0 "* ]] ||
		fail "in $A, rxa is not ACTIVE on hpn0 after the move: $l"
	port_gid "$A" rxa 10.72.0.1
	port_gid "$B" rxb 10.72.0.2
	# The kernel's known limit, as it logs it at the move: QP1 (GSI) is not
	# re-created in the new netns, so MADs, and with them rdma_cm, cannot run.
	l=$(dmesg)
	for k in "rxa: rxe_create_qp: returned err = -22" "infiniband rxa: Couldn't create ib_mad QP1" \
		"rxb: rxe_create_qp: returned err = -22" "infiniband rxb: Couldn't create ib_mad QP1"; do
		[[ $l == *"$k"* ]] || fail "dmesg after the move lacks '$k': $(grep -E 'rxa|rxb' <<<"$l")"
	done
	echo "  # dmesg at the move: rxe_create_qp: returned err = -22; Couldn't create ib_mad QP1 (both)"
	# Verbs traffic with the exact device and GID index; counters in the pods.
	counters c0 "$A" "$B"
	pingpong_pods "$A" rxa "$B" rxb 10.72.0.1
	write_bw_pods "$A" rxa "$B" rxb 10.72.0.1 "$ITERS"
	counters c1 "$A" "$B"
	k=$(delta c0 c1 rxb/1 sent_bytes)
	((k >= ITERS * 65536)) || fail "rxb sent $k bytes, expected at least $((ITERS * 65536))"
	k=$(delta c0 c1 rxa/1 rcvd_bytes)
	((k >= ITERS * 65536)) || fail "rxa received $k bytes, expected at least $((ITERS * 65536))"
	echo "  # rxb sent and rxa received at least $((ITERS * 65536)) bytes"
	# rdma_cm: the server listens (no MAD needed for that), the connect fails.
	serve "$A" rping -s -a 10.72.0.1 -p "$FLOOR_RPING_PORT" -C 3 -V
	server_ready rping cm_listening "$A" 10.72.0.1 "$FLOOR_RPING_PORT"
	client "$B" 30 --until 'rdma_connect: ' rping -c -a 10.72.0.1 -p "$FLOOR_RPING_PORT" -C 3 -V -v
	kill "$SRV" 2>/dev/null || true
	server_wait 5
	if [[ $CLI_RC == 0 && $CLI_OUT == *"ping data: rdma-ping-2: "* ]]; then
		fail "rping (rdma_cm) between pods worked in exclusive mode on $VM_KVER: 7.3 refused it" \
			"(QP1 not re-created after rdma dev set netns). The kernel fixed it: update DESIGN.md," \
			"the plugin's documentation and this scenario."
	fi
	[[ $CLI_OUT == *"rdma_connect: Invalid argument"* ]] ||
		fail "rping failed otherwise than with this kernel's known limit (exit $CLI_RC): $CLI_OUT"
	echo "  # known limit: rping client: rdma_connect: Invalid argument (then it hangs: killed)"
	# Home: the device back to the initial netns before its NIC leaves.
	fx ip netns exec "$A" rdma dev set rxa netns init
	only_in "" rxa "$A"
	fx rdma link delete rxa
	# Deleting it where it is works as well.
	fx ip netns exec "$B" rdma link delete rxb
	if ! seen_nowhere rxa "$A" "$B" || ! seen_nowhere rxb "$A" "$B"; then
		fail "an rxe is left"
	fi
	nic_home "$A" hpn0 "${VM_NICS[0]}"
	nic_home "$B" hpn0 "${VM_NICS[1]}"
	fx ip netns del "$A"
	fx ip netns del "$B"
	fx ip netns del init
}

scen_lifetime() {
	local name
	info "lifetime: what an rxe in exclusive mode survives"
	pods_with_nics 10.72.0
	# The NIC leaving the pod destroys the rxe moved in with it.
	rxe_in "$A" hpn0 rxa
	fx rdma dev set rxa netns "$A"
	nic_home "$A" hpn0 "${VM_NICS[0]}"
	wait_for 5 seen_nowhere rxa "$A" ||
		fail "rxa survived its netdev leaving $A"
	echo "  # hpn0 left $A: rxa destroyed, in no netns"
	# The pod netns deleted with the rxe moved in: it is not handed back.
	rxe_in "$B" hpn0 rxb
	fx rdma dev set rxb netns "$B"
	fx ip netns del "$B"
	wait_for 20 is_home "${VM_MACS[1]}" || fail "${VM_NICS[1]} did not come back"
	name=$(home_as "${VM_MACS[1]}")
	[[ $name == hpn0 ]] || fail "${VM_NICS[1]} came back as '$name', expected its pod-side name hpn0"
	! seen_in "" rxb || fail "rxb came back to the initial netns with its pod gone"
	echo "  # $B deleted: rxb gone, ${VM_NICS[1]} back as hpn0"
	fx ip link set hpn0 name "${VM_NICS[1]}"
	# A device moved into the pod before its NIC: DOWN there, then destroyed
	# when the NIC follows (its netdev changed netns).
	pod_add "$B"
	fx rdma link add rxb type rxe netdev "${VM_NICS[1]}"
	fx rdma dev set rxb netns "$B"
	[[ $(ip netns exec "$B" rdma link show rxb/1) == *"state DOWN physical_state DISABLED"* ]] ||
		fail "rxb moved ahead of its NIC is not DOWN/DISABLED: $(ip netns exec "$B" rdma link show)"
	fx ip link set "${VM_NICS[1]}" netns "$B" name hpn0
	wait_for 5 seen_nowhere rxb "$B" || fail "rxb survived its NIC following it into $B"
	echo "  # rxb moved ahead of ${VM_NICS[1]}: DOWN in $B, destroyed when the NIC followed"
	# The mode is fixed while any netns but the initial one exists.
	fx_refused "error: Device or resource busy" rdma system set netns shared
	nic_home "$B" hpn0 "${VM_NICS[1]}"
	fx ip netns del "$A"
	fx ip netns del "$B"
	fx ip netns del init
}

scen_names() {
	info "names: RDMA device names are per netns in exclusive mode"
	pods_with_nics 10.72.0
	rxe_in "$A" hpn0 rxa
	# The move has to be asked from where the device is: rdma(8) looks the
	# name up in its own netns first.
	fx_refused "Wrong device name - rxa" ip netns exec "$A" rdma dev set rxa netns "$A"
	fx rdma dev set rxa netns "$A"
	# With $A's rxa gone from the initial netns, the name is free there again.
	rxe_in "$B" hpn0 rxa
	only_in "" rxa
	fx_refused "Error: Device name already exists in the target net namespace."$'\n'"error: File exists" \
		rdma dev set rxa netns "$A"
	fx rdma dev set rxa netns "$B"
	# The way home can be taken the same way: a new rxa in the initial netns
	# (on a veth here) makes $A's refuse to come back.
	fx ip link add hpnv-v0 type veth peer name hpnv-v1
	fx rdma link add rxa type rxe netdev hpnv-v0
	fx_refused "Error: Device name already exists in the target net namespace."$'\n'"error: File exists" \
		ip netns exec "$A" rdma dev set rxa netns init
	echo "  # three devices named rxa: in $A, in $B and in the initial netns"
	fx rdma link delete rxa
	fx ip link del hpnv-v0
	fx ip netns exec "$A" rdma link delete rxa
	fx ip netns exec "$B" rdma link delete rxa
	nic_home "$A" hpn0 "${VM_NICS[0]}"
	nic_home "$B" hpn0 "${VM_NICS[1]}"
	fx ip netns del "$A"
	fx ip netns del "$B"
	fx ip netns del init
}

run_scenarios move lifetime names
