#!/bin/bash
# IPAM delegation with Debian's host-local and static plugins.
#
# Proves that the plugin runs the IPAM plugin named by ipam.type from
# CNI_PATH, puts the addresses and routes it returns on the pod interface and
# into the result, and gives the allocation back: on DEL, on an ADD that fails
# after IPAM (HPN_FAIL_AT=addr, route), and when the IPAM plugin itself is
# missing or fails (code 105) or its pool is exhausted, with the host netns
# left as it was each time.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

MAC_NIC=02:48:50:4e:01:01

# setup_nic: nic0 in the host, its peer up so the pod side has carrier.
setup_nic() {
	mk_nic "$HOST_NS" nic0 peer0 "$MAC_NIC"
	ip -n "$HOST_NS" link set peer0 up
	snap_save "$HOST_NS" "$T/host.before"
}

# hostlocal_conf DATADIR RANGES ROUTES: a 1.0.0 config (Debian's plugins
# stop at 1.0.0) selecting nic0 as hpn0 with host-local IPAM.
hostlocal_conf() {
	net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0" |
		.ipam = {type: "host-local", dataDir: $dd, ranges: $r, routes: $rt}' \
		--arg dd "$1" --argjson r "$2" --argjson rt "$3"
}

# expect_released DATADIR WHAT: host-local holds no address for $NET.
expect_released() {
	local held
	held=$(hostlocal_ips "$1")
	[[ -z $held ]] || fail "$2: host-local still holds: $held"
}

# --- host-local IPv4: allocate, apply, report, release on DEL.
hl_ipv4() {
	setup_nic
	dd=$T/hl-$SCEN
	conf=$(hostlocal_conf "$dd" \
		'[[{"subnet": "10.70.0.0/24", "rangeStart": "10.70.0.10",
		    "gateway": "10.70.0.1"}]]' \
		'[{"dst": "10.71.0.0/16"}, {"dst": "10.72.0.0/16", "gw": "10.70.0.254"}]')
	run_plugin ADD "$conf"
	expect_result "ADD"
	res=$OUT
	jq_ok '.ips | length == 1' "one ip in result"
	jq_ok '.ips[0].address == "10.70.0.10/24" and .ips[0].gateway == "10.70.0.1" and
		.ips[0].interface == 0' "result ip is the first of the range, on interface 0"
	jq_ok '[.routes[] | .dst] | sort == ["10.71.0.0/16", "10.72.0.0/16"]' "result routes"
	[[ $(hostlocal_ips "$dd") == 10.70.0.10 ]] ||
		fail "host-local did not record 10.70.0.10: $(hostlocal_ips "$dd")"
	grep -q "$CID" "$dd/$NET/10.70.0.10" || fail "host-local allocation is not for $CID"
	ip -n "$POD_NS" -4 -o addr show dev hpn0 | grep -F ' 10.70.0.10/24 ' >/dev/null ||
		fail "10.70.0.10/24 not on pod hpn0: $(ip -n "$POD_NS" addr)"
	ip -n "$POD_NS" -4 route show 10.71.0.0/16 | grep 'dev hpn0' >/dev/null ||
		fail "route 10.71.0.0/16 missing in pod: $(ip -n "$POD_NS" route)"
	ip -n "$POD_NS" -4 route show 10.72.0.0/16 | grep 'via 10.70.0.254 dev hpn0' >/dev/null ||
		fail "route 10.72.0.0/16 via 10.70.0.254 missing in pod: $(ip -n "$POD_NS" route)"
	prev=$(with_prev "$conf" "$res")
	run_plugin CHECK "$prev"
	expect_ok "CHECK"
	prev=$(with_prev "$conf" "$res")
	run_plugin DEL "$prev"
	expect_ok "DEL"
	expect_released "$dd" "after DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	pod_empty "pod after DEL"
	expect_no_state "after DEL"
}
scenario "host-local IPv4 ADD/CHECK/DEL" hl_ipv4

# --- host-local dual stack: both families applied and released.
hl_dual() {
	setup_nic
	dd=$T/hl-$SCEN
	conf=$(hostlocal_conf "$dd" \
		'[[{"subnet": "10.73.0.0/24", "gateway": "10.73.0.1"}],
		  [{"subnet": "fd73::/64", "gateway": "fd73::1"}]]' \
		'[{"dst": "10.74.0.0/16"}, {"dst": "fd74::/64"}]')
	run_plugin ADD "$conf"
	expect_result "ADD"
	res=$OUT
	jq_ok '[.ips[] | .address] == ["10.73.0.2/24", "fd73::2/64"]' "result has both families"
	jq_ok '[.ips[] | .interface] == [0, 0]' "both ips on interface 0"
	ip -n "$POD_NS" -o addr show dev hpn0 | grep -F ' fd73::2/64 ' >/dev/null ||
		fail "fd73::2/64 not on pod hpn0: $(ip -n "$POD_NS" addr)"
	ip -n "$POD_NS" -6 route show fd74::/64 | grep 'dev hpn0' >/dev/null ||
		fail "route fd74::/64 missing in pod: $(ip -n "$POD_NS" -6 route)"
	[[ $(hostlocal_ips "$dd" | wc -l) == 2 ]] || fail "host-local holds $(hostlocal_ips "$dd")"
	prev=$(with_prev "$conf" "$res")
	run_plugin DEL "$prev"
	expect_ok "DEL"
	expect_released "$dd" "after DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	expect_no_state "after DEL"
}
scenario "host-local dual stack" hl_dual

# --- static: default route via the gateway, DNS passed through.
static_dns() {
	setup_nic
	conf=$(net_conf 1.0.0 '.hwaddr = $mac | .ifName = "hpn0" | .ipam = {type: "static",
		addresses: [{address: "10.75.0.5/24", gateway: "10.75.0.1"}],
		routes: [{dst: "0.0.0.0/0"}],
		dns: {nameservers: ["10.75.0.53"], domain: "hpn.test", search: ["hpn.test"]}}' \
		--arg mac "$MAC_NIC")
	run_plugin ADD "$conf"
	expect_result "ADD"
	res=$OUT
	jq_ok '.ips[0].address == "10.75.0.5/24" and .ips[0].interface == 0' "static ip in result"
	jq_ok '.dns.nameservers == ["10.75.0.53"] and .dns.domain == "hpn.test"' "dns in result"
	ip -n "$POD_NS" -4 route show default | grep 'via 10.75.0.1 dev hpn0' >/dev/null ||
		fail "default route via 10.75.0.1 missing in pod: $(ip -n "$POD_NS" route)"
	prev=$(with_prev "$conf" "$res")
	run_plugin CHECK "$prev"
	expect_ok "CHECK"
	prev=$(with_prev "$conf" "$res")
	run_plugin DEL "$prev"
	expect_ok "DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	pod_empty "pod after DEL"
	expect_no_state "after DEL"
}
scenario "static with default route and DNS" static_dns

# --- a failure after IPAM gives the address back.
fail_after_ipam() {
	local step=$1 dd conf
	setup_nic
	dd=$T/hl-$SCEN
	conf=$(hostlocal_conf "$dd" '[[{"subnet": "10.76.0.0/24"}]]' '[{"dst": "10.77.0.0/16"}]')
	run_plugin ADD "$conf" HPN_FAIL_AT="$step"
	expect_err any "ADD with HPN_FAIL_AT=$step"
	expect_released "$dd" "after failed ADD"
	snap_same "$HOST_NS" "$T/host.before" "host after failed ADD"
	pod_empty "pod after failed ADD"
	expect_no_state "after failed ADD"
}
for step in addr route; do
	scenario "host-local released when ADD fails at $step" fail_after_ipam "$step"
done

# --- the IPAM plugin is missing: code 105, and nothing changed. It never
# ran, so nothing can have been allocated and nothing is kept for DEL.
ipam_missing() {
	local conf
	setup_nic
	conf=$(net_conf 1.0.0 '.device = "nic0" | .ipam = {type: "hpnt-no-such-ipam"}')
	run_plugin ADD "$conf"
	expect_err 105 "ADD with a missing IPAM plugin"
	snap_same "$HOST_NS" "$T/host.before" "host after failed ADD"
	pod_empty "pod after failed ADD"
	expect_no_state "after failed ADD"
}
scenario "IPAM plugin missing" ipam_missing

# --- the IPAM plugin fails: code 105 (or the delegate's own code, passed
# through), and nothing changed.
ipam_failing() {
	local conf log
	setup_nic
	log=$T/ipam-$SCEN.log
	conf=$(net_conf 1.0.0 '.device = "nic0" | .ipam = {type: "hpnt-ipam", log: $log,
		failAdd: true, addresses: [{address: "10.78.0.2/24"}]}' --arg log "$log")
	run_plugin ADD "$conf"
	expect_err "105|11" "ADD with a failing IPAM plugin"
	snap_same "$HOST_NS" "$T/host.before" "host after failed ADD"
	pod_empty "pod after failed ADD"
	expect_no_state "after failed ADD"
	grep "^ADD $CID " "$log" >/dev/null || fail "IPAM ADD was never called: $(cat "$log")"
}
scenario "IPAM plugin failing" ipam_failing

# --- pool exhaustion: a range of one address serves one pod; the second ADD
# fails and restores its NIC; after DEL of the first, the second ADD works.
pool_of_one() {
	mk_nic "$HOST_NS" nic0 peer0
	mk_nic "$HOST_NS" nic1 peer1
	snap_save "$HOST_NS" "$T/host.before"
	pod2="${HPNT_PREFIX}p${SCEN}b"
	ip netns add "$pod2"
	dd=$T/hl-$SCEN
	ranges='[[{"subnet": "10.79.0.0/24", "rangeStart": "10.79.0.9", "rangeEnd": "10.79.0.9"}]]'
	conf0=$(hostlocal_conf "$dd" "$ranges" '[]')
	conf1=$(jq -c '.device = "nic1"' <<<"$conf0")
	run_plugin ADD "$conf0"
	expect_result "first ADD"
	res0=$OUT
	jq_ok '.ips[0].address == "10.79.0.9/24"' "first pod gets the only address"
	run_plugin ADD "$conf1" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$pod2")"
	expect_err any "second ADD with the pool exhausted"
	has_link "$HOST_NS" nic1 || fail "nic1 not back in the host after the failed ADD"
	[[ $(ip -n "$pod2" -j link show | jq length) == 1 ]] || fail "second pod is not empty"
	[[ $(state_count) == 1 ]] || fail "failed ADD left state: $(state_files)"
	prev=$(with_prev "$conf0" "$res0")
	run_plugin DEL "$prev"
	expect_ok "DEL of the first pod"
	run_plugin ADD "$conf1" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$pod2")"
	expect_result "second ADD after the address was released"
	res1=$OUT
	jq_ok '.ips[0].address == "10.79.0.9/24"' "second pod gets the released address"
	prev=$(with_prev "$conf1" "$res1")
	run_plugin DEL "$prev" CNI_CONTAINERID="$CID-b" \
		CNI_NETNS="$(ns_path "$pod2")"
	expect_ok "DEL of the second pod"
	expect_released "$dd" "after both DELs"
	snap_same "$HOST_NS" "$T/host.before" "host after both DELs"
	expect_no_state "after both DELs"
	ip netns del "$pod2"
}
scenario "host-local pool of one address" pool_of_one

t_done
