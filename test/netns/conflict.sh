#!/bin/bash
# Name clashes and devices already in use.
#
# Proves that:
#  - ADD into a pod that already has an hpn0 fails with code 104 and changes
#    neither the host, nor the pod, nor the state, nor IPAM;
#  - an hpn0 of the host's own does not stop ADD of another NIC as hpn0 into
#    a pod, and DEL brings that NIC back beside it under its own name;
#  - a NIC attached to one pod cannot be taken by a second ADD (code 100 or
#    101), and DEL of that failed second attachment leaves the first intact;
#  - two attachments in two pods are independent.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

# --- the pod already has an hpn0.
pod_has_hpn0() {
	mk_nic "$HOST_NS" nic0 peer0
	ip -n "$POD_NS" link add hpn0 type veth peer name hpn0-peer
	snap_save "$HOST_NS" "$T/host.before"
	snap_save "$POD_NS" "$T/pod.before"
	log=$T/ipam-$SCEN.log
	conf=$(net_conf 1.1.0 '.device = "nic0" | .ifName = "hpn0" |
		.ipam = {type: "hpnt-ipam", log: $log, addresses: [{address: "10.81.0.2/24"}]}' \
		--arg log "$log")
	run_plugin ADD "$conf"
	expect_err 104 "ADD as hpn0 into a pod that has hpn0"
	snap_same "$HOST_NS" "$T/host.before" "host after refused ADD"
	snap_same "$POD_NS" "$T/pod.before" "pod after refused ADD"
	expect_no_state "after refused ADD"
	ipam_log_balanced "$log" "after refused ADD"
	# CNI_IFNAME clashing (no config ifName) is refused the same way.
	run_plugin ADD "$(jq -c 'del(.ifName)' <<<"$conf")" CNI_IFNAME=hpn0
	expect_err 104 "ADD with CNI_IFNAME hpn0 into a pod that has hpn0"
	snap_same "$HOST_NS" "$T/host.before" "host after refused ADD"
	snap_same "$POD_NS" "$T/pod.before" "pod after refused ADD"
	expect_no_state "after refused ADD"
	ipam_log_balanced "$log" "after refused ADD"
}
scenario "pod already has hpn0" pod_has_hpn0

# --- the host has its own hpn0; another NIC becomes the pod's hpn0.
host_has_hpn0() {
	mk_nic "$HOST_NS" hpn0 hpn0-peer
	mk_nic "$HOST_NS" nic0 peer0
	ip -n "$HOST_NS" link set hpn0 up
	ip -n "$HOST_NS" addr add 10.82.0.1/24 dev hpn0
	snap_save "$HOST_NS" "$T/host.before"
	host_hpn0_mac=$(mac_of "$HOST_NS" hpn0)
	nic0_mac=$(mac_of "$HOST_NS" nic0)
	conf=$(net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0" | .mtu = 2000')
	run_plugin ADD "$conf"
	expect_result "ADD nic0 as hpn0"
	prev=$(with_prev "$conf" "$OUT")
	[[ $(mac_of "$POD_NS" hpn0) == "$nic0_mac" ]] || fail "pod hpn0 is not nic0"
	[[ $(mac_of "$HOST_NS" hpn0) == "$host_hpn0_mac" ]] || fail "host hpn0 changed"
	run_plugin CHECK "$prev"
	expect_ok "CHECK"
	run_plugin DEL "$prev"
	expect_ok "DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	pod_empty "pod after DEL"
	expect_no_state "after DEL"
}
scenario "host has its own hpn0" host_has_hpn0

# --- a NIC already attached to a pod cannot be taken again.
already_attached() {
	mk_nic "$HOST_NS" nic0 peer0
	mk_nic "$HOST_NS" nic1 peer1
	snap_save "$HOST_NS" "$T/host.before"
	pod2="${HPNT_PREFIX}p${SCEN}b"
	ip netns add "$pod2"
	nic0_mac=$(mac_of "$HOST_NS" nic0)
	conf=$(net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0"')
	run_plugin ADD "$conf"
	expect_result "ADD nic0 to pod 1"
	prev1=$(with_prev "$conf" "$OUT")
	other=(CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$pod2")")
	run_plugin ADD "$conf" "${other[@]}"
	expect_err "100|101" "ADD of nic0 (by name) to pod 2"
	conf_hw=$(jq -c --arg m "$nic0_mac" 'del(.device) | .hwaddr = $m' <<<"$conf")
	run_plugin ADD "$conf_hw" "${other[@]}"
	expect_err "100|101" "ADD of nic0 (by hwaddr) to pod 2"
	[[ $(ip -n "$pod2" -j link show | jq length) == 1 ]] || fail "pod 2 is not empty"
	[[ $(state_count) == 1 ]] || fail "expected only pod 1's state file, have $(state_count)"
	# The runtime cleans up the failed ADD with a DEL: pod 1 must keep nic0.
	run_plugin DEL "$conf" "${other[@]}"
	expect_ok "DEL of pod 2"
	[[ $(mac_of "$POD_NS" hpn0) == "$nic0_mac" ]] || fail "DEL of pod 2 took nic0 from pod 1"
	run_plugin CHECK "$prev1"
	expect_ok "CHECK of pod 1 after DEL of pod 2"

	# A second, independent attachment: nic1 to pod 2, then DEL pod 1 only.
	conf2=$(net_conf 1.0.0 '.device = "nic1" | .ifName = "hpn0"')
	run_plugin ADD "$conf2" "${other[@]}"
	expect_result "ADD nic1 to pod 2"
	prev2=$(with_prev "$conf2" "$OUT")
	[[ $(state_count) == 2 ]] || fail "expected 2 state files, have $(state_count)"
	run_plugin DEL "$prev1"
	expect_ok "DEL of pod 1"
	has_link "$HOST_NS" nic0 || fail "nic0 not back after DEL of pod 1"
	has_link "$pod2" hpn0 || fail "DEL of pod 1 disturbed pod 2"
	run_plugin CHECK "$prev2" "${other[@]}"
	expect_ok "CHECK of pod 2 after DEL of pod 1"
	run_plugin DEL "$prev2" "${other[@]}"
	expect_ok "DEL of pod 2"
	snap_same "$HOST_NS" "$T/host.before" "host after both DELs"
	pod_empty "pod 1 after DEL"
	expect_no_state "after both DELs"
	ip netns del "$pod2"
}
scenario "NIC already attached" already_attached

t_done
