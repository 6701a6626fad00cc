#!/bin/bash
# Chaining through a real CNI client (libcni, via test/cnitool).
#
# Proves that, driven by libcni exactly as a container runtime drives it:
#  - a conflist of Debian's bridge (+host-local) then hpn-rdma (ifName hpn0,
#    its own host-local on another subnet) gives the pod eth0 and hpn0, and
#    the result lists both with each IP's interface index pointing at the
#    right one (hpn-rdma appends to prevResult);
#  - hpn-rdma's CHECK passes with the chain's result (as libcni cached it)
#    as prevResult, and fails with 107 once hpn0 drifts; the CHECK of the
#    whole list stops at Debian's bridge plugin, for a reason of its own
#    that is asserted exactly (see below);
#  - DEL of the list leaves the host netns exactly as before, except for the
#    bridge that the bridge plugin creates and never deletes (accounted for
#    explicitly), and releases both allocations;
#  - the deviceID capability: libcni turns CAP_ARGS into
#    runtimeConfig.deviceID, and hpn-rdma selects the NIC by it; CHECK of
#    that list through libcni passes, and fails with 107 once hpn0 is down.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init
[[ -n ${HPN_CNITOOL:-} ]] || skip "no CNI client: go was not found when configuring"
[[ -x $HPN_CNITOOL ]] || fail "CNI client $HPN_CNITOOL is missing (build target hpn-cnitool)"
[[ -x $CNI_BIN/bridge ]] || skip "$CNI_BIN/bridge is missing (Debian: containernetworking-plugins)"

CONFDIR=$T/net.d
mkdir -p "$CONFDIR"

# cnitool CMD NETNAME [VAR=VALUE...]: run the client in the host netns.
# Sets RC, OUT, ERR like run_plugin.
cnitool() {
	local cmd=$1 net=$2
	shift 2
	LAST_RUN="hpn-cnitool $cmd $net $*"
	set +e
	ip netns exec "$HOST_NS" env -i PATH="$PATH" NETCONFPATH="$CONFDIR" \
		CNI_PATH="$CNI_PATH_DIRS" CNI_CACHE_DIR="$T/cache" \
		CNI_CONTAINERID="$CID" CNI_IFNAME=eth0 "$@" \
		"$HPN_CNITOOL" "$cmd" "$net" "$(ns_path "$POD_NS")" >"$T/out" 2>"$T/err"
	RC=$?
	set -e
	OUT=$(cat "$T/out")
	ERR=$(cat "$T/err")
}

# --- bridge then hpn-rdma.
bridge_chain() {
	mk_nic "$HOST_NS" nic0 peer0
	mk_nic "$HOST_NS" nic1 peer1
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0
	ip -n "$HOST_NS" link set nic0 mtu 1400
	snap_save "$HOST_NS" "$T/host.before"
	nic0_mac=$(mac_of "$HOST_NS" nic0)
	jq -n --arg state "$STATE" --arg log "$T/plugin.log" --arg t "$T" '{
		cniVersion: "1.0.0",
		name: "hpnt-chain",
		plugins: [
			{type: "bridge", bridge: "hpntbr0", isGateway: true, ipMasq: false,
			 ipam: {type: "host-local", dataDir: ($t + "/hl-br"),
				ranges: [[{subnet: "10.90.0.0/24"}]],
				routes: [{dst: "0.0.0.0/0"}]}},
			{type: "hpn-rdma", ifName: "hpn0", rdmaRequired: false, device: "nic0", mtu: 9000,
			 stateDir: $state, logFile: $log, nccl: {dir: ($t + "/pods")},
			 ipam: {type: "host-local", dataDir: ($t + "/hl-hpn"),
				ranges: [[{subnet: "10.91.0.0/24", gateway: "10.91.0.1"}]],
				routes: [{dst: "10.92.0.0/16"}]}}
		]}' >"$CONFDIR/10-hpnt-chain.conflist"

	cnitool add hpnt-chain
	expect_ok "cnitool add"
	res=$OUT
	pod=$(ns_path "$POD_NS")
	jq_ok '.cniVersion == "1.0.0"' "result version"
	jq_ok '.interfaces | map(.name) | index("hpntbr0") != null' "bridge in result"
	jq_ok '.interfaces[-1] | .name == "hpn0" and .mac == $m and .sandbox == $p' \
		"hpn0 appended last, with nic0's MAC and the pod sandbox" "$res" \
		--arg m "$nic0_mac" --arg p "$pod"
	jq_ok '[.interfaces[] | select(.name == "eth0" and .sandbox == $p)] | length == 1' \
		"eth0 in result, in the pod" "$res" --arg p "$pod"
	jq_ok '.ips | length == 2' "two ips in result"
	jq_ok '.ips[] | select(.address | startswith("10.90.0.")) | .interface as $i |
		$r.interfaces[$i].name == "eth0"' "bridge ip points at eth0" \
		"$res" --argjson r "$res"
	jq_ok '.ips[] | select(.address | startswith("10.91.0.")) | .interface as $i |
		$r.interfaces[$i].name == "hpn0"' "hpn-rdma ip points at hpn0" \
		"$res" --argjson r "$res"
	jq_ok '[.routes[] | .dst] |
		(index("0.0.0.0/0") != null and index("10.92.0.0/16") != null)' \
		"routes of both plugins in result"
	[[ $(mac_of "$POD_NS" hpn0) == "$nic0_mac" ]] || fail "pod hpn0 is not nic0"
	has_link "$POD_NS" eth0 || fail "no eth0 in the pod"
	ip -n "$POD_NS" -4 -o addr show dev eth0 | grep ' 10\.90\.0\.' >/dev/null ||
		fail "eth0 has no 10.90.0.x"
	ip -n "$POD_NS" -4 -o addr show dev hpn0 | grep ' 10\.91\.0\.' >/dev/null ||
		fail "hpn0 has no 10.91.0.x"
	ip -n "$POD_NS" -4 route show 10.92.0.0/16 | grep 'dev hpn0' >/dev/null ||
		fail "route 10.92.0.0/16 missing"
	[[ $(state_count) == 1 ]] || fail "expected 1 state file, have $(state_count)"

	# CHECK of the list. Debian's bridge plugin (1.1.x) checks every IP of the
	# final result on its own interface (ip.ValidateExpectedInterfaceIPs has no
	# interface-index filter), so it rejects the chain as soon as a later plugin
	# added an address elsewhere, before hpn-rdma is asked. Accept exactly that
	# failure; anything else is an error.
	cnitool check hpnt-chain
	if [[ $RC != 0 ]]; then
		[[ $ERR == *"Failed to match addr 10.91.0."*"on interface eth0"* ]] ||
			fail "cnitool check failed, and not for the known bridge limitation"
		info "list CHECK stopped at bridge (known limitation of Debian's bridge CHECK)"
	fi
	# So ask hpn-rdma itself, exactly as libcni would: its plugin config from the
	# list, with name, cniVersion and the cached result of the chain as prevResult.
	cached=$(cat "$T"/cache/results/hpnt-chain-*)
	prev=$(jq -c --argjson c "$cached" '{cniVersion, name} + .plugins[1] +
		{prevResult: $c.result}' "$CONFDIR/10-hpnt-chain.conflist")
	jq_ok '.prevResult.interfaces | length == 4' "libcni cached the chain's result" "$prev"
	run_plugin CHECK "$prev"
	expect_ok "hpn-rdma CHECK with the chain's result as prevResult"
	ip -n "$POD_NS" link set hpn0 mtu 1500
	run_plugin CHECK "$prev"
	expect_err 107 "hpn-rdma CHECK with hpn0's MTU changed"
	ip -n "$POD_NS" link set hpn0 mtu 9000
	run_plugin CHECK "$prev"
	expect_ok "hpn-rdma CHECK after MTU restored"

	cnitool del hpnt-chain
	expect_ok "cnitool del"
	pod_empty "pod after del"
	expect_no_state "after del"
	[[ -z $(NET=hpnt-chain hostlocal_ips "$T/hl-br") ]] || fail "bridge's address not released"
	[[ -z $(NET=hpnt-chain hostlocal_ips "$T/hl-hpn") ]] ||
		fail "hpn-rdma's address not released"
	# The bridge plugin leaves its bridge (with the gateway address) behind by
	# design. Require exactly that, then compare the rest with the snapshot.
	snap "$HOST_NS" >"$T/host.after"
	jq -e '[.links[] | select(.ifname == "hpntbr0" and .kind == "bridge")] | length == 1' \
		"$T/host.after" >/dev/null || fail "bridge hpntbr0 not found after del"
	jq '.links |= map(select(.ifname != "hpntbr0")) |
		.addrs |= map(select(.ifname != "hpntbr0"))' \
		"$T/host.after" >"$T/host.after-nobridge"
	diff -u "$T/host.before" "$T/host.after-nobridge" ||
		fail "host after del differs from before (bridge hpntbr0 excluded)"
	cnitool del hpnt-chain
	expect_ok "second cnitool del"
}
scenario "bridge + hpn-rdma chain" bridge_chain

# --- bridge then hpn-rdma with no IPAM of its own (the NIC's addressing is
# left to the job): every plugin's CHECK passes, so the whole list goes
# through libcni ADD, CHECK (also after a drift, which must fail) and DEL,
# and the host ends as it began, bar the bridge the bridge plugin keeps.
bridge_chain_check() {
	mk_nic "$HOST_NS" nic0 peer0
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0
	snap_save "$HOST_NS" "$T/host.before"
	jq -n --arg state "$STATE" --arg log "$T/plugin.log" --arg t "$T" '{
		cniVersion: "1.0.0",
		name: "hpnt-chk",
		plugins: [
			{type: "bridge", bridge: "hpntbr1", isGateway: true, ipMasq: false,
			 ipam: {type: "host-local", dataDir: ($t + "/hl-chk"),
				ranges: [[{subnet: "10.94.0.0/24"}]]}},
			{type: "hpn-rdma", ifName: "hpn0", rdmaRequired: false, device: "nic0", mtu: 4000,
			 stateDir: $state, logFile: $log, nccl: {dir: ($t + "/pods")}}
		]}' >"$CONFDIR/30-hpnt-chk.conflist"
	cnitool add hpnt-chk
	expect_ok "cnitool add"
	jq_ok '[.interfaces[].name] | index("eth0") != null and .[-1] == "hpn0"' \
		"eth0 and hpn0 in the result"
	cnitool check hpnt-chk
	expect_ok "cnitool check of the whole list"
	ip -n "$POD_NS" link set hpn0 mtu 1500
	cnitool check hpnt-chk
	expect_err 107 "cnitool check with hpn0's MTU changed"
	cnitool del hpnt-chk
	expect_ok "cnitool del"
	has_link "$POD_NS" hpn0 && fail "hpn0 still in the pod after del"
	snap "$HOST_NS" | jq '.links |= map(select(.ifname != "hpntbr1")) |
		.addrs |= map(select(.ifname != "hpntbr1"))' >"$T/host.after"
	diff -u "$T/host.before" "$T/host.after" ||
		fail "host after del differs from before (bridge hpntbr1 excluded)"
	expect_no_state "after cnitool del"
}
scenario "bridge + hpn-rdma chain, CHECK of the whole list" bridge_chain_check

# --- the deviceID capability, injected by libcni from CAP_ARGS.
deviceid_cap() {
	mk_nic "$HOST_NS" nic0 peer0
	mk_nic "$HOST_NS" nic1 peer1
	snap_save "$HOST_NS" "$T/host.before"
	mk_fake_pci "$T/sysfs" 0000:af:00.0 nic0
	mk_fake_pci "$T/sysfs" 0000:af:00.1 nic1
	nic1_mac=$(mac_of "$HOST_NS" nic1)
	jq -n --arg state "$STATE" --arg log "$T/plugin.log" --arg t "$T" '{
		cniVersion: "1.0.0",
		name: "hpnt-devid",
		plugins: [
			{type: "hpn-rdma", ifName: "hpn0", rdmaRequired: false, capabilities: {deviceID: true},
			 sysfsRoot: ($t + "/sysfs"), stateDir: $state, logFile: $log, nccl: {dir: ($t + "/pods")},
			 ipam: {type: "host-local", dataDir: ($t + "/hl-devid"),
				ranges: [[{subnet: "10.93.0.0/24"}]]}}
		]}' >"$CONFDIR/20-hpnt-devid.conflist"
	cnitool add hpnt-devid CAP_ARGS='{"deviceID": "0000:af:00.1"}'
	expect_ok "cnitool add with CAP_ARGS deviceID"
	jq_ok '.interfaces[0].name == "hpn0" and .interfaces[0].mac == $m' \
		"result names nic1 as hpn0" "$OUT" --arg m "$nic1_mac"
	[[ $(mac_of "$POD_NS" hpn0) == "$nic1_mac" ]] || fail "pod hpn0 is not nic1 (0000:af:00.1)"
	has_link "$HOST_NS" nic0 || fail "nic0 (0000:af:00.0) left the host"
	cnitool check hpnt-devid CAP_ARGS='{"deviceID": "0000:af:00.1"}'
	expect_ok "cnitool check"
	ip -n "$POD_NS" link set hpn0 down
	cnitool check hpnt-devid CAP_ARGS='{"deviceID": "0000:af:00.1"}'
	expect_err 107 "cnitool check with hpn0 down"
	ip -n "$POD_NS" link set hpn0 up
	cnitool del hpnt-devid CAP_ARGS='{"deviceID": "0000:af:00.1"}'
	expect_ok "cnitool del"
	snap_same "$HOST_NS" "$T/host.before" "host after del"
	pod_empty "pod after del"
	expect_no_state "after del"
	[[ -z $(NET=hpnt-devid hostlocal_ips "$T/hl-devid") ]] || fail "address not released"
}
scenario "deviceID capability" deviceid_cap

t_done
