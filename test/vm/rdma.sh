#!/bin/bash
# Binding a real RDMA device (Soft-RoCE, rdma_rxe) behind hpn0.
#
# Proves, on a real 6.1 kernel, in one boot:
#  1. shared mode: STATUS passes (and fails, 50, for rdmaNetns exclusive);
#     a macvlan child of an rxe-backed NIC attached as hpn0 gets
#     a result naming rxe0, port 1 and the GID index that ibv_devinfo -v shows
#     for hpn0's address inside the pod, and rdma_cm (rping bound to that
#     address in the pod) lands on the same device and port; CHECK passes,
#     fails (107) when the address and with it the GID entry is removed, passes
#     again when it is back; DEL restores the host. The NCCL hints file and the
#     result's nccl name rxe0:1 and that GID index; DEL removes the file.
#  2. CHECK fails (107) when the RDMA device is deleted; DEL still cleans up.
#  3. a NIC whose rxe device the kernel destroys when the NIC leaves the host
#     netns: ADD fails with 108 saying so, the NIC is back as it was and the
#     rxe device is recreated over it, no state is left.
#  4. exclusive mode: moving a macvlan child of an rxe-backed NIC would take
#     the parent's whole RDMA device into one pod: ADD fails with 108 saying
#     so, before anything changes; rdmaNetns "shared" on that node is refused
#     before anything changes.
#  5. softRoce on 6.1: refused (108; STATUS 50) naming the kernel release
#     before anything changes; a child of an rxe-backed parent still binds
#     the parent's device, as without softRoce on this kernel.
# jq filters are single-quoted on purpose.
# shellcheck disable=SC2016
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

[[ -n ${HPN_PLUGIN:-} ]] || fail "HPN_PLUGIN is not set (run through ctest)"
[[ -x $CNI_BIN/static ]] || skip "$CNI_BIN/static is missing (Debian: containernetworking-plugins)"

rxe_nics 2

POD=hpnv-pod
NETNS=/run/netns/$POD
ADDR=10.77.0.2

# conf DEVICE [FILTER]: hpn0 from DEVICE with a static address.
conf() {
	jq -cn --arg dev "$1" --arg t "$T" --arg a "$ADDR/24" '{cniVersion: "1.0.0",
		name: "hpnv-rdma", type: "hpn-rdma", device: $dev, ifName: "hpn0",
		stateDir: ($t + "/state"), logFile: ($t + "/plugin.log"), nccl: {dir: ($t + "/pods")},
		ipam: {type: "static", addresses: [{address: $a}]}} | '"${2:-.}"
}

# host_view: what must be as before on the host (links and RDMA links), by
# name: a recreated device may come back under another index.
host_view() {
	{
		ip -o link show | sed 's/^[0-9]*: //'
		rdma link show
	} | sort
}

# restored WHAT: host as in $T/before, no journal, pod has no hpn0.
restored() {
	host_view >"$T/after"
	diff -u "$T/before" "$T/after" >&2 || fail "$1: the host changed (diff above)"
	[[ -z $(compgen -G "$T/state/hpnv-rdma/*") ]] || fail "$1: a journal is left"
	if [[ -e $NETNS ]]; then
		! ip -n "$POD" link show hpn0 >/dev/null 2>&1 || fail "$1: hpn0 left in the pod"
	fi
}

# ibv_gid_index ADDR: the GID index ibv_devinfo -v shows, from inside the pod,
# for RoCE v2 GID ::ffff:ADDR of rxe0 port 1.
ibv_gid_index() {
	ip netns exec "$POD" ibv_devinfo -v -d rxe0 -i 1 |
		sed -n 's/^[[:space:]]*GID\[[[:space:]]*\([0-9]*\)\]:[[:space:]]*::ffff:'"${1//./\\.}"', RoCE v2$/\1/p'
}

# --- 1. shared mode, macvlan child -------------------------------------------
info "1. shared mode: macvlan child of $nic0 (rxe0)"
ip link add mv0 link "$nic0" type macvlan mode bridge
host_view >"$T/before"
ip netns add "$POD"
run_plugin STATUS "$(conf mv0 '.cniVersion = "1.1.0"')"
expect_ok "STATUS on a node with RDMA"
run_plugin STATUS "$(conf mv0 '.cniVersion = "1.1.0" | .rdmaNetns = "exclusive"')"
expect_err 50 "STATUS, rdmaNetns exclusive on a shared node" 'mode is shared, but rdmaNetns requires exclusive'
run_plugin ADD "$(conf mv0)"
expect_result "ADD mv0"
jq_ok '.interfaces == [{name: "hpn0", mac: .interfaces[0].mac, mtu: 1500, sandbox: $ns}]' \
	"interfaces" "$OUT" --arg ns "$NETNS"
jq_ok '.rdma | length == 1 and (.[0] | .interface == 0 and .bound and .device == "rxe0" and
	.port == 1 and .driver == "rxe" and .netnsMode == "shared" and
	.linkLayer == "Ethernet" and .transport == "roce" and .gid == ("::ffff:" + $a) and
	(.gidIndex | type == "number"))' "rdma entry" "$OUT" --arg a "$ADDR"
result=$OUT
gid=$(jq -r '.rdma[0].gidIndex' <<<"$result")
ibv=$(ibv_gid_index "$ADDR")
info "result gidIndex $gid, ibv_devinfo in the pod: ${ibv:-none}"
[[ $ibv == "$gid" ]] || fail "ibv_devinfo -v shows ::ffff:$ADDR RoCE v2 at '${ibv}', the result says $gid"
# The NCCL hints name that device, port and GID index, in the file and the result.
hints=$(jq -r '.nccl.file' <<<"$result")
for want in 'NCCL_IB_DISABLE=0' 'NCCL_IB_HCA==rxe0:1' "NCCL_IB_GID_INDEX=$ibv" 'NCCL_SOCKET_IFNAME=eth0'; do
	grep -qxF "$want" "$hints" || fail "hints file $hints lacks $want: $(cat "$hints")"
done
[[ $(grep -vc '^#' "$hints") == 4 ]] || fail "hints file has other settings: $(cat "$hints")"
jq_ok '.nccl.env == {NCCL_IB_DISABLE: "0", NCCL_IB_HCA: "=rxe0:1", NCCL_IB_GID_INDEX: $g,
	NCCL_SOCKET_IFNAME: "eth0"}' "result nccl" "$result" --arg g "$ibv"

# rdma_cm from the pod: rping bound to hpn0's address listens on rxe0 port 1.
ip netns exec "$POD" rping -s -a "$ADDR" -p 7471 >/dev/null 2>&1 &
rping=$!
cm_listens() { ip netns exec "$POD" rdma res show cm_id | grep -q "link rxe0/1 .*src-addr $ADDR:7471"; }
wait_for 10 cm_listens || fail "rdma_cm: no cm_id on rxe0/1 bound to $ADDR: $(rdma res show cm_id)"
kill "$rping"
wait "$rping" || true

prev=$(jq -c --argjson r "$result" '.prevResult = $r' <<<"$(conf mv0)")
run_plugin CHECK "$prev"
expect_ok "CHECK after ADD"
ip -n "$POD" addr del "$ADDR/24" dev hpn0
run_plugin CHECK "$prev"
expect_err 107 "CHECK without the address" "address .* is missing|no RoCE v2 GID"
ip -n "$POD" addr add "$ADDR/24" dev hpn0
wait_for 10 test -n "$(ibv_gid_index "$ADDR")" || fail "the GID did not come back"
run_plugin CHECK "$prev"
expect_ok "CHECK with the address back"
run_plugin DEL "$prev"
expect_ok "DEL"
restored "after DEL"
[[ ! -e $hints ]] || fail "DEL left the hints file $hints"
run_plugin DEL "$prev"
expect_ok "second DEL"

# --- 2. CHECK when the device is deleted ---------------------------------------
info "2. CHECK after rdma link delete rxe0"
run_plugin ADD "$(conf mv0)"
expect_result "ADD mv0 again"
prev=$(jq -c --argjson r "$OUT" '.prevResult = $r' <<<"$(conf mv0)")
rdma link delete rxe0
run_plugin CHECK "$prev"
expect_err 107 "CHECK without rxe0" '"rxe0" is not visible'
run_plugin DEL "$prev"
expect_ok "DEL after rxe0 was deleted"
[[ -e /sys/class/net/mv0 ]] || fail "mv0 is not back on the host"
! rdma link show rxe0/1 >/dev/null 2>&1 || fail "DEL recreated rxe0, which an admin deleted"
ip netns del "$POD"
rxe_add "$nic0" rxe0
rxe_port_active rxe0

# --- 3. rxe follows its netdev --------------------------------------------------
info "3. $nic1 itself, whose rxe1 the kernel destroys when it leaves"
host_view >"$T/before"
ip netns add "$POD"
run_plugin ADD "$(conf "$nic1")"
expect_err 108 "ADD $nic1" '"rxe1" was destroyed by the kernel when "'"$nic1"'" left'
wait_for 10 rdma link show rxe1/1 >/dev/null 2>&1 || fail "rxe1 was not recreated"
restored "after the failed ADD of $nic1"
ip netns del "$POD"

# --- 4. exclusive mode ------------------------------------------------------------
info "4. exclusive mode"
rdma system set netns exclusive || fail "rdma system set netns exclusive failed"
[[ $(rdma system show) == *"netns exclusive"* ]] || fail "not in exclusive mode"
host_view >"$T/before"
ip netns add "$POD"
run_plugin ADD "$(conf mv0 '.rdmaNetns = "shared"')"
expect_err 108 "rdmaNetns shared on an exclusive node" \
	'mode is exclusive, but rdmaNetns requires shared'
restored "after the refused rdmaNetns"
run_plugin ADD "$(conf mv0)"
expect_err 108 "ADD of a macvlan child in exclusive mode" '"mv0" is a macvlan of "'"$nic0"'"'
restored "after the refused move"
ip netns del "$POD"
rdma system set netns shared

# --- 5. softRoce on 6.1 ---------------------------------------------------------
# The kernel has an RDMA subsystem and rdma_rxe, but its rxe devices send from
# the initial netns: softRoce is refused, naming the release, before anything
# changes (the vm7 tier runs it on 7.x).
info "5. softRoce on $(uname -r)"
host_view >"$T/before"
ip netns add "$POD"
# A NIC whose own rxe the move would destroy: softRoce will not lose it.
run_plugin ADD "$(conf "$nic1" '.softRoce = true')"
expect_err 108 "softRoce, $nic1 with rxe1" '"'"$nic1"'" carries the rxe device "rxe1", which the kernel destroys'
restored "after the refused softRoce ADD of $nic1 with rxe1"
rdma link delete rxe1
host_view >"$T/before"
run_plugin ADD "$(conf "$nic1" '.softRoce = true')"
expect_err 108 "softRoce on 6.1" \
	"Soft-RoCE in a pod netns needs Linux 7\\.1 or later \\(before it, every rxe device sends from the initial netns; this kernel is $(uname -r | sed 's/[.+]/\\&/g')\\)( |\$)"
restored "after the refused softRoce ADD"
run_plugin STATUS "$(conf "$nic1" '.softRoce = true | .cniVersion = "1.1.0"')"
expect_err 50 "STATUS with softRoce on 6.1" '^hpn-rdma: softRoce: Soft-RoCE in a pod netns needs Linux 7\.1'
run_plugin ADD "$(conf mv0 '.softRoce = true')"
expect_result "softRoce on 6.1, macvlan of rxe0: the parent's device, as before"
jq_ok '.rdma[0].device == "rxe0"' "softRoce does not replace a device that serves"
run_plugin DEL "$(conf mv0 '.softRoce = true')"
expect_ok "DEL"
restored "after DEL"
ip netns del "$POD"
rxe_add "$nic1" rxe1

info "all rdma scenarios passed"
