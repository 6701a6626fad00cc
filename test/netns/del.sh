#!/bin/bash
# DEL is idempotent and survives a vanished pod.
#
# Proves that DEL succeeds and changes nothing more when repeated, when no
# ADD ever happened (with the pod netns present or its path gone), and when
# the pod netns was deleted under the plugin (the veth dies with it): the
# state and the IPAM allocation are released all the same.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

# setup_nic: nic0 (with an altname) and a decoy nic1 in the host.
setup_nic() {
	mk_nic "$HOST_NS" nic0 peer0
	mk_nic "$HOST_NS" nic1 peer1
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0
	snap_save "$HOST_NS" "$T/host.before"
}

# conf_hl DATADIR: nic0 as hpn0 with host-local IPAM.
conf_hl() {
	net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0" |
		.ipam = {type: "host-local", dataDir: $dd,
			ranges: [[{subnet: "10.80.0.0/24"}]]}' --arg dd "$1"
}

# --- DEL twice after one ADD: both succeed, the second changes nothing.
del_twice() {
	setup_nic
	dd=$T/hl-$SCEN
	conf=$(conf_hl "$dd")
	run_plugin ADD "$conf"
	expect_result "ADD"
	prev=$(with_prev "$conf" "$OUT")
	run_plugin DEL "$prev"
	expect_ok "first DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after first DEL"
	run_plugin DEL "$prev"
	expect_ok "second DEL"
	[[ -z $OUT ]] || fail "second DEL printed: $OUT"
	run_plugin DEL "$conf"
	expect_ok "third DEL, without prevResult"
	snap_same "$HOST_NS" "$T/host.before" "host after repeated DEL"
	pod_empty "pod after repeated DEL"
	expect_no_state "after repeated DEL"
	[[ -z $(hostlocal_ips "$dd") ]] || fail "host-local holds $(hostlocal_ips "$dd")"
}
scenario "DEL twice" del_twice

# --- DEL with no ADD before: success, nothing touched, no state created.
del_without_add() {
	setup_nic
	dd=$T/hl-$SCEN
	conf=$(conf_hl "$dd")
	run_plugin DEL "$conf"
	expect_ok "DEL without ADD"
	[[ -z $OUT ]] || fail "DEL printed: $OUT"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL without ADD"
	pod_empty "pod after DEL without ADD"
	expect_no_state "after DEL without ADD"
	run_plugin DEL "$conf" CNI_NETNS=/run/netns/hpnt-never-existed
	expect_ok "DEL without ADD, netns path that does not exist"
	run_plugin DEL "$conf" -CNI_NETNS
	expect_ok "DEL without ADD, CNI_NETNS unset"
	snap_same "$HOST_NS" "$T/host.before" "host after DELs without ADD"
	expect_no_state "after DELs without ADD"
}
scenario "DEL without ADD" del_without_add

# --- the pod netns is deleted before DEL: the veth pair is destroyed with it.
# DEL must still succeed and release the state and the IPAM allocation.
del_netns_gone() {
	setup_nic
	dd=$T/hl-$SCEN
	conf=$(conf_hl "$dd")
	run_plugin ADD "$conf"
	expect_result "ADD"
	prev=$(with_prev "$conf" "$OUT")
	[[ -n $(hostlocal_ips "$dd") ]] || fail "no host-local allocation after ADD"
	ip netns del "$POD_NS"
	for _ in $(seq 50); do
		has_link "$HOST_NS" peer0 || break
		sleep 0.1
	done
	if has_link "$HOST_NS" peer0; then
		fail "peer0 survived the pod netns (test setup)"
	fi
	run_plugin DEL "$prev"
	expect_ok "DEL with the pod netns gone"
	expect_no_state "after DEL with the pod netns gone"
	[[ -z $(hostlocal_ips "$dd") ]] ||
		fail "host-local still holds $(hostlocal_ips "$dd") after DEL"
	# The host is as before, less the veth pair that died with the pod.
	jq '.links |= map(select(.ifname != "nic0" and .ifname != "peer0"))' \
		"$T/host.before" >"$T/host.expected"
	snap_same "$HOST_NS" "$T/host.expected" "host after DEL with the pod netns gone"
	run_plugin DEL "$prev"
	expect_ok "second DEL with the pod netns gone"
}
scenario "DEL after the pod netns is gone" del_netns_gone

t_done
