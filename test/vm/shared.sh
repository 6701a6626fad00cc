#!/bin/bash
# Shared (macvlan) mode and multi-NIC pods on real RDMA devices (rxe).
#
# Proves, on a real 6.1 kernel, in one boot:
#  1. mode macvlan with master: the child is created in the pod as hpn0 and
#     the parent's RDMA device rxe0 is bound through the child's GID entry
#     (the result's gidIndex is the one ibv_devinfo -v shows in the pod for
#     hpn0's address); CHECK passes; DEL deletes the child; the host is as
#     before and rxe0 is untouched.
#  2. a 2-NIC pod from a pool (match.rdmaDevices "rxe*", count 2, macvlan
#     children, host-local): hpn0 bound to one rxe device, hpn1 to the other
#     (the NCCL hints list both, with the GID index or NCCL's own choice in hpn0's subnet),
#     each through its own address's GID; CHECK; DEL.
#  2b. mode ipvlan l2 on nic1: bound to rxe1 through the child's GID; DEL.
#  3. exclusive RDMA netns mode: mode macvlan is refused (108, saying why),
#     STATUS says 50; move mode of a macvlan child (stacked on rxe0's NIC)
#     is refused (108) before anything changes.
# jq filters are single-quoted on purpose.
# shellcheck disable=SC2016
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

[[ -n ${HPN_PLUGIN:-} ]] || fail "HPN_PLUGIN is not set (run through ctest)"
for p in static host-local; do
	[[ -x $CNI_BIN/$p ]] || skip "$CNI_BIN/$p is missing (Debian: containernetworking-plugins)"
done

rxe_nics 2

POD=hpnv-pod
NETNS=/run/netns/$POD
ADDR=10.78.0.2

# conf [FILTER]: a macvlan child of nic0 as hpn0 with a static address.
conf() {
	jq -cn --arg m "$nic0" --arg t "$T" --arg a "$ADDR/24" '{cniVersion: "1.0.0",
		name: "hpnv-shared", type: "hpn-rdma", mode: "macvlan", master: $m,
		ifName: "hpn0", mtu: 1400,
		stateDir: ($t + "/state"), logFile: ($t + "/plugin.log"),
		ipam: {type: "static", addresses: [{address: $a}]}} | '"${1:-.}"
}

host_view() {
	{
		ip -o link show | sed 's/^[0-9]*: //'
		rdma link show
	} | sort
}

restored() {
	host_view >"$T/after"
	diff -u "$T/before" "$T/after" >&2 || fail "$1: the host changed (diff above)"
	[[ -z $(compgen -G "$T/state/hpnv-shared/*") ]] || fail "$1: a journal is left"
	if [[ -e $NETNS ]]; then
		[[ $(ip -n "$POD" -o link show | wc -l) == 1 ]] ||
			fail "$1: the pod still has $(ip -n "$POD" -o link show)"
	fi
}

# gid_index DEV ADDR: the GID index ibv_devinfo -v shows in the pod for RoCE
# v2 GID ::ffff:ADDR of DEV port 1.
gid_index() {
	ip netns exec "$POD" ibv_devinfo -v -d "$1" -i 1 |
		sed -n 's/^[[:space:]]*GID\[[[:space:]]*\([0-9]*\)\]:[[:space:]]*::ffff:'"${2//./\\.}"', RoCE v2$/\1/p'
}

# --- 1. macvlan child of nic0, bound to rxe0 ----------------------------------
info "1. mode macvlan, master $nic0 (rxe0)"
host_view >"$T/before"
ip netns add "$POD"
run_plugin STATUS "$(conf '.cniVersion = "1.1.0"')"
expect_ok "STATUS in shared mode"
run_plugin ADD "$(conf)"
expect_result "ADD macvlan"
result=$OUT
jq_ok '.interfaces | length == 1 and .[0].name == "hpn0" and .[0].mtu == 1400' "interfaces"
jq_ok '.rdma | length == 1 and (.[0] | .interface == 0 and .bound and .device == "rxe0" and
	.port == 1 and .driver == "rxe" and .netnsMode == "shared" and
	.gid == ("::ffff:" + $a))' "rdma entry" "$OUT" --arg a "$ADDR"
# Its RoCE QoS, read from the macvlan's parent (no DCB on a virtual NIC): unknown, and why.
jq_ok '.rdma[0].qos | .dcb == "none" and (.netdev | length > 0) and .trafficClass == 0 and
	.lossless == "unknown" and (.note | test("reports no DCB"))' "rdma entry's qos"
[[ $(ip -n "$POD" -d -o link show hpn0) == *" macvlan mode bridge "* ]] ||
	fail "hpn0 is not a bridge macvlan: $(ip -n "$POD" -d -o link show hpn0)"
gid=$(jq -r '.rdma[0].gidIndex' <<<"$result")
ibv=$(gid_index rxe0 "$ADDR")
info "result gidIndex $gid, ibv_devinfo in the pod: ${ibv:-none}"
[[ $ibv == "$gid" ]] || fail "ibv_devinfo shows ::ffff:$ADDR at '$ibv', the result says $gid"
prev=$(jq -c --argjson r "$result" '.prevResult = $r' <<<"$(conf)")
run_plugin CHECK "$prev"
expect_ok "CHECK macvlan"
run_plugin DEL "$prev"
expect_ok "DEL macvlan"
restored "after DEL of the macvlan child"
port_active rxe0 || fail "rxe0 is not ACTIVE after DEL"
run_plugin DEL "$prev"
expect_ok "second DEL"

# --- 2. a 2-NIC pod from the pool of rxe devices ------------------------------
info "2. count 2 from match.rdmaDevices rxe*, macvlan children"
pconf=$(jq -cn --arg t "$T" '{cniVersion: "1.0.0", name: "hpnv-shared", type: "hpn-rdma",
	mode: "macvlan", match: {rdmaDevices: ["rxe*"]}, count: 2, ifName: "hpn0",
	stateDir: ($t + "/state"), logFile: ($t + "/plugin.log"), nccl: {dir: ($t + "/pods")},
	ipam: {type: "host-local", dataDir: ($t + "/hl"),
		ranges: [[{subnet: "10.79.0.0/24"}]]}}')
run_plugin ADD "$pconf"
expect_result "ADD 2 NICs"
result=$OUT
jq_ok '[.interfaces[].name] == ["hpn0", "hpn1"] and (.rdma | length == 2) and
	([.rdma[].bound] | all) and ([.rdma[].device] | sort) == ["rxe0", "rxe1"] and
	([.rdma[].interface] | sort) == [0, 1] and ([.ips[].interface] | sort) == [0, 1]' \
	"two NICs, two rxe devices"
for i in 0 1; do
	dev=$(jq -r --argjson i "$i" '.rdma[] | select(.interface == $i) | .device' <<<"$result")
	a=$(jq -r --argjson i "$i" '.ips[] | select(.interface == $i) | .address | split("/")[0]' <<<"$result")
	gid=$(jq -r --argjson i "$i" '.rdma[] | select(.interface == $i) | .gidIndex' <<<"$result")
	ibv=$(gid_index "$dev" "$a")
	info "hpn$i: $dev, address $a, gidIndex $gid, ibv_devinfo: ${ibv:-none}"
	[[ $ibv == "$gid" ]] || fail "hpn$i: ibv_devinfo shows ::ffff:$a on $dev at '$ibv', the result says $gid"
done
# The NCCL hints name both devices in interface order, and the GID index when
# both have the same one, else let NCCL pick within hpn0's subnet.
jq_ok '(.rdma | sort_by(.interface)) as $r | .nccl.env as $e |
	$e.NCCL_IB_HCA == ("=" + ($r | map(.device + ":1") | join(","))) and $e.NCCL_IB_DISABLE == "0" and
	(if $r[0].gidIndex == $r[1].gidIndex then $e.NCCL_IB_GID_INDEX == ($r[0].gidIndex | tostring)
	 else $e.NCCL_IB_GID_INDEX == "-1" and $e.NCCL_IB_ROCE_VERSION_NUM == "2" and
	      $e.NCCL_IB_ADDR_FAMILY == "AF_INET" and $e.NCCL_IB_ADDR_RANGE == "10.79.0.0/24" end)' \
	"NCCL hints of the 2-NIC pod" "$result"
hints=$(jq -r '.nccl.file' <<<"$result")
grep -qxF "NCCL_IB_HCA=$(jq -r '.nccl.env.NCCL_IB_HCA' <<<"$result")" "$hints" ||
	fail "hints file $hints does not say what the result says: $(cat "$hints")"
prev=$(jq -c --argjson r "$result" '.prevResult = $r' <<<"$pconf")
run_plugin CHECK "$prev"
expect_ok "CHECK of 2 NICs"
run_plugin DEL "$prev"
expect_ok "DEL of 2 NICs"
restored "after DEL of the 2-NIC pod"
[[ ! -e $hints ]] || fail "DEL left the hints file $hints"
ip netns del "$POD"

# --- 2b. ipvlan (Debian's kernel has it; the development host does not) ---------
info "2b. mode ipvlan l2, master $nic1 (rxe1)"
ip netns add "$POD"
iconf=$(conf '.mode = "ipvlan" | .master = $m | .ipvlanMode = "l2"' | jq -c --arg m "$nic1" '.master = $m')
run_plugin ADD "$iconf"
expect_result "ADD ipvlan"
result=$OUT
[[ $(ip -n "$POD" -d -o link show hpn0) == *" ipvlan "*"mode l2 "* ]] ||
	fail "hpn0 is not an l2 ipvlan: $(ip -n "$POD" -d -o link show hpn0)"
jq_ok '.rdma[0] | .bound and .device == "rxe1" and .gid == ("::ffff:" + $a)' "ipvlan rdma entry" \
	"$OUT" --arg a "$ADDR"
gid=$(jq -r '.rdma[0].gidIndex' <<<"$result")
ibv=$(gid_index rxe1 "$ADDR")
info "ipvlan: result gidIndex $gid, ibv_devinfo in the pod: ${ibv:-none}"
[[ $ibv == "$gid" ]] || fail "ipvlan: ibv_devinfo shows '$ibv', the result says $gid"
prev=$(jq -c --argjson r "$result" '.prevResult = $r' <<<"$iconf")
run_plugin CHECK "$prev"
expect_ok "CHECK ipvlan"
run_plugin DEL "$prev"
expect_ok "DEL ipvlan"
restored "after DEL of the ipvlan child"
ip netns del "$POD"

# --- 3. exclusive mode ----------------------------------------------------------
info "3. exclusive mode"
ip link add mv0 link "$nic0" type macvlan mode bridge
rdma system set netns exclusive || fail "rdma system set netns exclusive failed"
host_view >"$T/before"
ip netns add "$POD"
run_plugin STATUS "$(conf '.cniVersion = "1.1.0"')"
expect_err 50 "STATUS of macvlan mode on an exclusive node" 'needs the shared RDMA netns mode'
run_plugin ADD "$(conf)"
expect_err 108 "macvlan on an exclusive node" 'cannot carry the whole RDMA device'
restored "after the refused macvlan"
run_plugin ADD "$(conf 'del(.mode, .master, .mtu) | .device = "mv0"')"
expect_err 108 "move of a macvlan child on an exclusive node" '"mv0" is a macvlan of'
restored "after the refused move of mv0"
ip netns del "$POD"
rdma system set netns shared

info "all shared-mode scenarios passed"
