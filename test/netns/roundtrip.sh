#!/bin/bash
# ADD / CHECK / DEL round trips in move mode.
#
# Proves, for each selector (device, hwaddr, pciBusID, runtimeConfig.deviceID)
# and each cniVersion (1.1.0, 1.0.0, 0.4.0, 0.3.1):
#  - the selected NIC, and not the decoy next to it, lands in the pod under
#    config ifName (hpn0) or CNI_IFNAME, with its MAC, the configured or its
#    own MTU, and up;
#  - the result has the shape of that version (mtu/pciID only in 1.x,
#    ips[].version only in 0.x) and reports the interface, sandbox and IPs;
#  - one state file exists per attachment, under <stateDir>/<name>/;
#  - CHECK passes on what ADD built (0.4.0 and later) and is refused at 0.3.1;
#  - DEL puts the NIC back under its name, MTU, admin state and altnames, and
#    the host netns is exactly as before, the pod empty, the state gone.
# Then CHECK catches drift: wrong MTU, link down, address or route removed.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

PCI_NIC=0000:af:00.1
PCI_DECOY=0000:af:00.0
MAC_NIC=02:48:50:4e:00:01
MAC_DECOY=02:48:50:4e:00:02
HOST_MTU=1450

# setup_nics UP: nic0 (the NIC under test, altnames, MTU $HOST_MTU, admin
# state UP or not) and nic1 (a decoy) in the host netns, and a fake sysfs
# that maps $PCI_NIC to nic0 and $PCI_DECOY to nic1.
setup_nics() {
	mk_nic "$HOST_NS" nic0 peer0 "$MAC_NIC"
	mk_nic "$HOST_NS" nic1 peer1 "$MAC_DECOY"
	ip -n "$HOST_NS" link set nic0 mtu "$HOST_MTU"
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0
	ip -n "$HOST_NS" link property add dev nic0 altname nic0-a-rather-long-alternative-name
	ip -n "$HOST_NS" link property add dev nic1 altname hpnt-alt1
	if [[ $1 == up ]]; then
		ip -n "$HOST_NS" link set nic0 up
		ip -n "$HOST_NS" link set peer0 up
	fi
	SYSFS=$T/sysfs-$SCEN
	mk_fake_pci "$SYSFS" "$PCI_NIC" nic0
	mk_fake_pci "$SYSFS" "$PCI_DECOY" nic1
}

# One row per case: selector version ifname-source mtu host-admin-state ipam
# ifname-source: cfg = config ifName hpn0 (CNI_IFNAME eth0 must be ignored),
#                env = no ifName, CNI_IFNAME net1.
# ipam: none, static (Debian, up to 1.0.0), rec (recording test double).
CASES=(
	"device 1.1.0 cfg 9000 up   rec"
	"device 1.0.0 env -    down none"
	"device 0.4.0 cfg 1280 down static"
	"device 0.3.1 env -    up   none"
	"hwaddr 1.1.0 env -    down none"
	"hwaddr 1.0.0 cfg 4000 up   static"
	"hwaddr 0.4.0 env -    up   none"
	"hwaddr 0.3.1 cfg 9000 down static"
	"pci    1.1.0 cfg -    up   rec"
	"pci    1.0.0 env 9000 down none"
	"pci    0.4.0 cfg -    down none"
	"pci    0.3.1 env 1400 up   static"
	"devid  1.1.0 env 9000 up   none"
	"devid  1.0.0 cfg -    down static"
	"devid  0.4.0 env 1500 down rec"
	"devid  0.3.1 cfg -    up   none"
)

# roundtrip SELECTOR VERSION IFNAME-SOURCE MTU HOST-STATE IPAM: one row.
roundtrip() {
	local sel=$1 ver=$2 ifsrc=$3 mtu=$4 state=$5 ipam=$6
	local subnet ipamlog filter want_if want_mtu conf add_result pod prev
	setup_nics "$state"
	snap_save "$HOST_NS" "$T/host.before"
	subnet="10.66.$SCEN"
	ipamlog=$T/ipam-$SCEN.log

	# Build the config for this row.
	filter='.'
	case $sel in
	device) filter+=' | .device = "nic0"' ;;
	hwaddr) filter+=" | .hwaddr = \"$MAC_NIC\"" ;;
	pci) filter+=" | .pciBusID = \"$PCI_NIC\" | .sysfsRoot = \"$SYSFS\"" ;;
	devid) filter+=" | .runtimeConfig.deviceID = \"$PCI_NIC\" | .sysfsRoot = \"$SYSFS\"" ;;
	esac
	if [[ $ifsrc == cfg ]]; then
		filter+=' | .ifName = "hpn0"'
		IFNAME=eth0
		want_if=hpn0
	else
		IFNAME=net1
		want_if=net1
	fi
	want_mtu=$HOST_MTU
	if [[ $mtu != - ]]; then
		filter+=" | .mtu = $mtu"
		want_mtu=$mtu
	fi
	case $ipam in
	static)
		filter+=" | .ipam = {type: \"static\",
			addresses: [{address: \"$subnet.2/24\", gateway: \"$subnet.1\"}],
			routes: [{dst: \"10.200.0.0/16\"}]}"
		;;
	rec)
		filter+=" | .ipam = {type: \"hpnt-ipam\", log: \"$ipamlog\",
			addresses: [{address: \"$subnet.2/24\", gateway: \"$subnet.1\"}],
			routes: [{dst: \"10.200.0.0/16\", gw: \"$subnet.1\"}]}"
		;;
	esac
	conf=$(net_conf "$ver" "$filter")

	# ADD: the NIC moves into the pod.
	run_plugin ADD "$conf"
	expect_result "ADD"
	add_result=$OUT
	if has_link "$HOST_NS" nic0; then
		fail "nic0 is still in the host netns after ADD"
	fi
	has_link "$HOST_NS" nic1 || fail "decoy nic1 left the host netns"
	pod=$(link_json "$POD_NS" "$want_if")
	[[ $pod != null ]] || fail "no $want_if in the pod netns after ADD"
	jq_ok ".address == \"$MAC_NIC\"" "pod $want_if has the NIC's MAC" "$pod"
	jq_ok ".mtu == $want_mtu" "pod $want_if has MTU $want_mtu" "$pod"
	jq_ok '.flags | index("UP") != null' "pod $want_if is up" "$pod"
	if [[ $want_if == hpn0 ]] && has_link "$POD_NS" eth0; then
		fail "CNI_IFNAME eth0 was used although config ifName is hpn0"
	fi
	[[ $(state_count) == 1 ]] || fail "expected 1 state file, have $(state_count)"
	[[ -n $(find "$STATE/$NET" -type f 2>/dev/null) ]] ||
		fail "state file is not under <stateDir>/<name>/"

	# Result shape for this version.
	jq_ok ".cniVersion == \"$ver\"" "result cniVersion"
	jq_ok '.interfaces | length == 1' "result has one interface"
	jq_ok ".interfaces[0].name == \"$want_if\" and
		.interfaces[0].mac == \"$MAC_NIC\" and
		.interfaces[0].sandbox == \"$(ns_path "$POD_NS")\"" \
		"result interface name/mac/sandbox"
	case $ver in
	1.*)
		jq_ok ".interfaces[0].mtu == $want_mtu" "1.x result has interface mtu"
		if [[ $sel == pci || $sel == devid ]]; then
			jq_ok ".interfaces[0].pciID == \"$PCI_NIC\"" "1.x result has pciID"
		else
			jq_ok '.interfaces[0] | has("pciID") | not' \
				"no pciID for a NIC without a PCI device"
		fi
		jq_ok '[.ips[]? | has("version")] | any | not' "1.x ips carry no version"
		;;
	0.*)
		jq_ok '.interfaces[0] | (has("mtu") or has("pciID")) | not' \
			"0.x result has no mtu/pciID"
		jq_ok '[.ips[]? | .version == "4"] | all' "0.x ips carry version 4"
		;;
	esac
	if [[ $ipam == none ]]; then
		jq_ok '(.ips // []) | length == 0' "no ips without ipam"
	else
		jq_ok ".ips | length == 1 and .[0].address == \"$subnet.2/24\" and
			.[0].gateway == \"$subnet.1\" and .[0].interface == 0" \
			"result ips from ipam"
		jq_ok '[.routes[]? | .dst] | index("10.200.0.0/16") != null' \
			"result routes from ipam"
		ip -n "$POD_NS" -4 -o addr show dev "$want_if" |
			grep -F " $subnet.2/24 " >/dev/null ||
			fail "address $subnet.2/24 not on pod $want_if"
		ip -n "$POD_NS" -4 route show 10.200.0.0/16 | grep "dev $want_if" >/dev/null ||
			fail "route 10.200.0.0/16 not in pod: $(ip -n "$POD_NS" route)"
	fi
	if [[ $ipam == rec ]]; then
		grep -qx "ADD $CID $IFNAME $ver" "$ipamlog" ||
			fail "IPAM not called with ADD $CID $IFNAME $ver: $(cat "$ipamlog")"
	fi

	# CHECK with the ADD result as prevResult.
	prev=$(with_prev "$conf" "$add_result")
	run_plugin CHECK "$prev"
	if [[ $ver == 0.3.1 ]]; then
		expect_err any "CHECK at 0.3.1 must be refused"
	else
		expect_ok "CHECK right after ADD"
	fi

	# DEL: everything back.
	prev=$(with_prev "$conf" "$add_result")
	run_plugin DEL "$prev"
	expect_ok "DEL"
	[[ -z $OUT ]] || fail "DEL printed output: $OUT"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	pod_empty "pod after DEL"
	expect_no_state "after DEL"
	if [[ $ipam == rec ]]; then
		ipam_log_balanced "$ipamlog" "after DEL"
	fi
}

for row in "${CASES[@]}"; do
	# shellcheck disable=SC2086 # the row is split into its columns on purpose
	scenario "$row" roundtrip $row
done

# CHECK must notice when the pod interface drifts from what ADD recorded.
check_drift() {
	local conf prev
	setup_nics down
	snap_save "$HOST_NS" "$T/host.before"
	conf=$(net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0" | .mtu = 9000 |
		.ipam = {type: "static",
			addresses: [{address: "10.67.0.2/24", gateway: "10.67.0.1"}],
			routes: [{dst: "10.201.0.0/16"}]}')
	run_plugin ADD "$conf"
	expect_result "ADD"
	prev=$(with_prev "$conf" "$OUT")
	run_plugin CHECK "$conf"
	expect_err any "CHECK without prevResult"
	run_plugin CHECK "$prev"
	expect_ok "CHECK before drift"
	ip -n "$POD_NS" link set hpn0 mtu 1300
	run_plugin CHECK "$prev"
	expect_err 107 "CHECK with MTU changed to 1300"
	ip -n "$POD_NS" link set hpn0 mtu 9000
	ip -n "$POD_NS" link set hpn0 down
	run_plugin CHECK "$prev"
	expect_err 107 "CHECK with hpn0 down"
	ip -n "$POD_NS" link set hpn0 up
	ip -n "$POD_NS" addr del 10.67.0.2/24 dev hpn0
	run_plugin CHECK "$prev"
	expect_err 107 "CHECK with the address removed"
	ip -n "$POD_NS" addr add 10.67.0.2/24 dev hpn0
	ip -n "$POD_NS" route add 10.201.0.0/16 via 10.67.0.1 dev hpn0
	run_plugin CHECK "$prev"
	expect_ok "CHECK after address and route restored"
	ip -n "$POD_NS" route del 10.201.0.0/16
	run_plugin CHECK "$prev"
	expect_err 107 "CHECK with the route removed"
	ip -n "$POD_NS" route add 10.201.0.0/16 via 10.67.0.1 dev hpn0
	run_plugin CHECK "$prev"
	expect_ok "CHECK after route restored"
	run_plugin DEL "$prev"
	expect_ok "DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	pod_empty "pod after DEL"
}
scenario "CHECK detects drift" check_drift

t_done
