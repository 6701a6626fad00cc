#!/bin/bash
# pciBusID selection of a real PCI NIC (virtio-net) through the real sysfs,
# and DEL after the pod's netns is gone.
#
# Proves that ADD with "pciBusID" = the second virtio NIC's PCI address moves
# that NIC (and not the first) into the pod as hpn0 with its MAC, up, with
# the host-local address, and that the result reports its name, MAC, sandbox
# and pciID; that CHECK passes and DEL puts the NIC back under its name, MAC,
# MTU and admin state and releases the address. Then that when the pod netns
# is deleted the kernel hands the NIC back to the host under its pod-side
# name hpn0, that DEL finds it there and restores its name, and that a
# second DEL succeeds and changes nothing.
# jq filters are single-quoted on purpose; NETNS, IFNAME and CID are read
# by lib.sh's run_plugin.
# shellcheck disable=SC2016,SC2034
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

[[ -n ${HPN_PLUGIN:-} ]] || fail "HPN_PLUGIN is not set (run through ctest)"
[[ -x $CNI_BIN/host-local ]] ||
	skip "$CNI_BIN/host-local is missing (Debian: containernetworking-plugins)"

vm_nics
nic=${VM_NICS[1]} pci=${VM_PCIS[1]} mac=${VM_MACS[1]}
other=${VM_NICS[0]}
info "NIC under test: $nic $pci $mac"

POD=hpnv-pod
NETNS=/run/netns/$POD
IFNAME=eth0
SUBNET=10.77.0
# rdmaRequired false: this is about the netdev; no RDMA device serves it.
conf='{"cniVersion": "1.0.0", "name": "hpnv-net", "type": "hpn-rdma",
	"pciBusID": "'$pci'", "ifName": "hpn0", "rdmaRequired": false,
	"stateDir": "'$T/state'", "logFile": "'$T/plugin.log'", "nccl": {"dir": "'$T/pods'"},
	"ipam": {"type": "host-local", "dataDir": "'$T/ipam'",
		"ranges": [[{"subnet": "'$SUBNET'.0/24"}]]}}'

# sysfs_link IF: "mac mtu flags" of IF in this netns, by bash builtins.
sysfs_link() {
	local d=/sys/class/net/$1 a m f
	read -r a <"$d/address" && read -r m <"$d/mtu" && read -r f <"$d/flags" &&
		echo "$a $m $f"
}

# host_restored WHAT: the NIC is back under its name as it was, no hpn0 on
# the host, the other NIC untouched, no journal and no address left.
host_restored() {
	local left
	[[ -e /sys/class/net/$nic ]] || fail "$1: $nic is not back on the host"
	[[ $(sysfs_link "$nic") == "$before" ]] ||
		fail "$1: $nic is '$(sysfs_link "$nic")', was '$before' (mac mtu flags)"
	[[ ! -e /sys/class/net/hpn0 ]] || fail "$1: hpn0 left on the host"
	[[ -e /sys/class/net/$other ]] || fail "$1: $other left the host"
	left=$(compgen -G "$T/state/hpnv-net/*" || true)
	[[ -z $left ]] || fail "$1: journal left: $left"
	left=$(compgen -G "$T/ipam/hpnv-net/$SUBNET.*" || true)
	[[ -z $left ]] || fail "$1: host-local still holds $left"
}

# add_ok: ADD succeeded and moved the NIC into the pod as hpn0 with its MAC,
# up, with the address host-local gave; the result says so.
add_ok() {
	run_plugin ADD "$conf"
	expect_result "ADD by pciBusID $pci"
	[[ ! -e /sys/class/net/$nic ]] || fail "$nic is still on the host after ADD"
	[[ -e /sys/class/net/$other ]] || fail "$other (not selected) left the host"
	jq_ok '.ips[0].address as $a |
		(.interfaces | length == 1) and (.interfaces[0] |
			.name == "hpn0" and .mac == $mac and .pciID == $pci and
			.sandbox == $ns) and
		($a | startswith($sub + ".") and endswith("/24")) and .ips[0].interface == 0 and
		($pod[0] | .address == $mac and (.flags | index("UP")) and
			any(.addr_info[]; "\(.local)/\(.prefixlen)" == $a))' \
		"ADD result and pod hpn0" "$OUT" \
		--arg mac "$mac" --arg pci "$pci" --arg ns "$NETNS" --arg sub "$SUBNET" \
		--argjson pod "$(ip -n "$POD" -j addr show dev hpn0)"
	RESULT=$OUT
}

before=$(sysfs_link "$nic")

info "ADD / CHECK / DEL"
ip netns add "$POD"
add_ok
run_plugin CHECK "${conf%\}},\"prevResult\": $RESULT}"
expect_ok "CHECK after ADD"
run_plugin DEL "${conf%\}},\"prevResult\": $RESULT}"
expect_ok "DEL"
[[ -z $OUT ]] || fail "DEL printed: $OUT"
host_restored "after DEL"
if ip -n "$POD" link show dev hpn0 >/dev/null 2>&1; then
	fail "hpn0 still in the pod after DEL"
fi

info "ADD, delete the pod netns, DEL"
CID=hpnv-$$-2
add_ok
ip netns del "$POD"
# The kernel returns a physical NIC to the initial netns when its netns dies,
# under the name it had there, asynchronously (netns cleanup is a workqueue).
wait_for 10 test -e /sys/class/net/hpn0 ||
	fail "$nic did not come back as hpn0 within 10 s of deleting the pod netns;" \
		"host links: $(ip -br link | tr -s ' \n' ' ')"
compgen -G "/sys/bus/pci/devices/$pci/virtio*/net/hpn0" >/dev/null ||
	fail "the hpn0 that came back is not the NIC at $pci"
[[ ! -e /sys/class/net/$nic ]] || fail "$nic is on the host before DEL"
run_plugin DEL "${conf%\}},\"prevResult\": $RESULT}"
expect_ok "DEL after the pod netns is gone"
host_restored "after DEL with the netns gone"
run_plugin DEL "$conf"
expect_ok "second DEL"
host_restored "after the second DEL"

echo "PASS: $(basename "$0")"
