#!/bin/bash
# The node doctor on a real kernel with a real RDMA device (Soft-RoCE).
#
# Proves, in one boot: the doctor reads the netns mode from RDMA netlink
# (shared), the modules from /sys/module, lists rxe0 with its netdev, PCI
# address, driver, ACTIVE port, link layer and MTU, and finds the selected
# macvlan child served by its parent's rxe0 (as ADD does): ready, exit 0, and
# STATUS agrees. After ADD the macvlan is HELD BY this attachment (a warning,
# still ready); after DEL it is free again. In exclusive mode a config that
# wants shared is not ready (exit 1) with the same reason STATUS gives.
# RoCE QoS on this kernel: the virtio-net PCI NIC and the macvlan it selects
# have no DCB ops, so both are "none" over the real DCB netlink.
# jq filters are single-quoted on purpose.
# shellcheck disable=SC2016
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

[[ -n ${HPN_PLUGIN:-} ]] || fail "HPN_PLUGIN is not set (run through ctest)"
[[ -x $CNI_BIN/static ]] || skip "$CNI_BIN/static is missing (Debian: containernetworking-plugins)"

rxe_nics 1
ip link add mv0 link "$nic0" type macvlan mode bridge
POD=hpnv-doctor
NETNS=/run/netns/$POD
ip netns add "$POD"

mkdir -p "$T/net.d"
# conf [FILTER]: the config file the doctor reads, and on stdin for the plugin.
# (Debian's static IPAM stops at 1.0.0; STATUS needs 1.1.0.)
conf() {
	jq -n --arg t "$T" '{cniVersion: "1.0.0", name: "hpnv-doctor", type: "hpn-rdma",
		device: "mv0", ifName: "hpn0", stateDir: ($t + "/state"),
		ipam: {type: "static", addresses: [{address: "10.78.0.2/24"}]}} | '"${1:-.}" |
		tee "$T/net.d/10-hpnv.conf"
}
doctor() { # doctor [ARGS]: sets RC and OUT
	RC=0
	OUT=$("$HPN_PLUGIN" doctor --conf-dir "$T/net.d" --cni-path "$CNI_BIN" "$@") || RC=$?
}

# --- ready --------------------------------------------------------------------
conf >/dev/null
doctor
info "doctor, before ADD (exit $RC):"
printf '%s\n' "$OUT" >&2
[[ $RC == 0 ]] || fail "doctor: exit $RC on a ready node"
doctor --json
jq_ok '.ready and .netnsMode == "shared" and
	(.modules | index("ib_core") and index("ib_uverbs") and index("rdma_ucm") and
	 index("rdma_rxe")) and
	any(.nics[]; .rdmaDevice == "rxe0" and .netdev == $nic and .port == 1 and
	    .state == "ACTIVE" and .linkLayer == "Ethernet" and .driver == "rdma_rxe" and
	    .pci == $pci and (.mtu | type == "number") and .heldBy == null) and
	any(.checks[]; .name == "device" and .state == "ok" and
	    (.message | test("rxe0 port 1 ACTIVE, through " + $nic))) and
	all(.checks[]; .state == "ok" or .state == "skip")' \
	"doctor --json on a ready node" "$OUT" --arg nic "$nic0" --arg pci "${VM_PCIS[0]}"
jq_ok '[.qos[] | {netdev, dcb, dcbAsked, error}] ==
	[{netdev: $nic, dcb: "none", dcbAsked: true, error: null},
	 {netdev: "mv0", dcb: "none", dcbAsked: true, error: null}]' \
	"doctor --json: RoCE QoS of the NIC and of the macvlan it selects" "$OUT" --arg nic "$nic0"
# The class the hints give rxe0's RoCE there: the kernel answers no DCB, so no class is known lossless.
jq_ok '.qos[] | select(.netdev == $nic) | .hints | .lossless == "unknown" and .trafficClass == 0 and
	.note == ($nic + " reports no DCB: no class is known lossless")' \
	"doctor --json: the hints' class on the NIC, judged on the kernel's answer" "$OUT" --arg nic "$nic0"
run_plugin STATUS "$(conf '.cniVersion = "1.1.0"')"
expect_ok "STATUS on the node the doctor calls ready"

# --- held by a pod --------------------------------------------------------------
run_plugin ADD "$(conf)"
expect_result "ADD mv0"
result=$OUT
doctor --json
jq_ok '.ready and any(.nics[]; .netdev == "mv0" and .rdmaDevice == "rxe0" and
	.heldBy == {network: "hpnv-doctor", containerId: $cid, ifName: "hpn0", attached: true,
		releasing: false}) and
	any(.checks[]; .name == "device" and .state == "warn" and (.message | test("held by")))' \
	"doctor after ADD: mv0 held by this attachment" "$OUT" --arg cid "$CID"
doctor
info "doctor, after ADD (exit $RC):"
printf '%s\n' "$OUT" >&2
run_plugin DEL "$(jq -c --argjson r "$result" '.prevResult = $r' <<<"$(conf)")"
expect_ok "DEL"
doctor --json
jq_ok '.ready and all(.nics[]; .heldBy == null)' "doctor after DEL: nothing held" "$OUT"

# --- exclusive mode, a config that wants shared ---------------------------------
ip netns del "$POD"
rdma system set netns exclusive || fail "rdma system set netns exclusive failed"
conf '.rdmaNetns = "shared"' >/dev/null
doctor --json
[[ $RC == 1 ]] || fail "doctor: exit $RC in exclusive mode with rdmaNetns shared"
jq_ok '(.ready | not) and .netnsMode == "exclusive" and
	.reasons == ["the node'"'"'s RDMA netns mode is exclusive, but rdmaNetns requires shared"]' \
	"doctor: not ready, one reason" "$OUT"
reason=$(jq -r '.reasons[0]' <<<"$OUT")
run_plugin STATUS "$(conf '.rdmaNetns = "shared" | .cniVersion = "1.1.0"')"
expect_err 50 "STATUS in exclusive mode" "$reason"
rdma system set netns shared
info "doctor on a real kernel: ok"
