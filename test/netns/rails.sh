#!/bin/bash
# Rails: an attachment of several NICs (count 2), each NIC its own routing
# table (1000 + its ifindex in the pod) with the network of each of its
# addresses and a copy of its IPAM routes, an `ip rule from <address>` into
# it at priority 1000, and arp_ignore 1 / arp_announce 2 on it; the main
# table takes each NIC's IPAM routes on that NIC, the first NIC to name a
# destination keeping it. On veth stand-ins (the vm7 tier moves RDMA bytes on
# each rail):
# - one subnet (host-local, a lease per NIC): tables, rules, sysctls, main
#   routes, `ip route get ... from <rail address>` by the rail, the result's
#   routes; CHECK passes, and fails (107, naming the rail) without a rule,
#   without a table's network, with arp_ignore reset; DEL with the netns
#   alive removes every rule and the tables empty; no state left.
# - two subnets (an IPAM giving each NIC its own, hpnt-ipam's byIfname),
#   IPv6 too: each rail's own gateway in its table and the main table.
# - a rollback after the rails were made (HPN_FAIL_AT=rail), and GC with
#   the netns alive: rules gone.
# - one NIC: no table, no rule, no sysctl changed (as before rails).
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

# setup: NICs pool0..pool2 (peers up) in the host netns.
setup() {
	local i
	for i in 0 1 2; do
		mk_nic "$HOST_NS" "pool$i" "peer$i"
		ip -n "$HOST_NS" link set "peer$i" up
	done
	snap_save "$HOST_NS" "$T/host.before"
	DD=$T/hl-$SCEN
}

# rails_conf VERSION FILTER [jq args...]: two NICs from pool*, hpn0 and hpn1.
rails_conf() {
	local ver=$1 extra=$2
	shift 2
	net_conf "$ver" '.match = {devices: ["pool*"]} | .count = 2 | .ifName = "hpn0" | '"$extra" "$@"
}

# table_of IF: the rail table of IF in the pod (1000 + its ifindex there).
table_of() {
	echo $((1000 + $(ip -n "$POD_NS" -j link show dev "$1" | jq '.[0].ifindex')))
}

# addr_of I [FAMILY]: interface I's first address (CIDR) in the result $RES.
addr_of() {
	jq -r --argjson i "$1" --arg f "${2:-4}" '[.ips[] | select(.interface == $i) |
		select((.address | contains(":")) == ($f == "6")) | .address][0]' <<<"$RES"
}

sysctl_of() {
	ip netns exec "$POD_NS" cat "/proc/sys/net/ipv4/conf/$1/$2"
}

# rules_to TABLE: the pod's rules into TABLE (both families), one a line.
rules_to() {
	{
		ip -n "$POD_NS" -4 rule show table "$1"
		ip -n "$POD_NS" -6 rule show table "$1"
	} 2>/dev/null
}

# rail_ok I: hpnI's table, rule and sysctls are as ADD makes them.
rail_ok() {
	local i=$1 t a net r
	t=$(table_of "hpn$i")
	a=$(addr_of "$i")
	r=$(ip -n "$POD_NS" -4 rule show table "$t")
	[[ $r == "1000:	from ${a%/*} lookup $t" ]] || fail "hpn$i: the rules to table $t are '$r'"
	net=$(ip -n "$POD_NS" route show table "$t")
	[[ $net == *"${NET_OF[$i]} dev hpn$i scope link src ${a%/*}"* ]] ||
		fail "hpn$i: table $t lacks ${NET_OF[$i]} scope link src ${a%/*}: $net"
	[[ $(sysctl_of "hpn$i" arp_ignore) == 1 && $(sysctl_of "hpn$i" arp_announce) == 2 ]] ||
		fail "hpn$i: arp_ignore $(sysctl_of "hpn$i" arp_ignore), arp_announce $(sysctl_of "hpn$i" arp_announce)"
	# Traffic from the rail's address leaves by the rail, even to the other rail's peer.
	r=$(ip -n "$POD_NS" route get "${PEER_OF[$i]}" from "${a%/*}")
	[[ $r == *" dev hpn$i "* ]] || fail "hpn$i: from ${a%/*} to ${PEER_OF[$i]} goes: $r"
	echo "  # hpn$i: table $t ($(wc -l <<<"$net") routes), rule from ${a%/*}, arp_ignore 1, arp_announce 2"
}

# add_rails CONF WHAT NET0 NET1 PEER0 PEER1: ADD of CONF (count 2) succeeds,
# and both rails are as ADD makes them (rail_ok: NETi in hpni's table, PEERi
# reached from hpni's address by hpni). Sets RES, and the caller's locals t0
# and t1 (bash's dynamic scope) to hpn0's and hpn1's tables.
add_rails() {
	run_plugin ADD "$1"
	expect_result "ADD count 2, $2"
	RES=$OUT
	t0=$(table_of hpn0)
	t1=$(table_of hpn1)
	NET_OF=("$3" "$4")
	PEER_OF=("$5" "$6")
	rail_ok 0
	rail_ok 1
}

# gone_after_del T0 T1: no rule into either table, both tables empty.
gone_after_del() {
	local t
	for t in "$@"; do
		[[ -z $(rules_to "$t") ]] || fail "rules to table $t left: $(rules_to "$t")"
		[[ -z $(ip -n "$POD_NS" route show table "$t" 2>/dev/null) ]] ||
			fail "table $t not empty: $(ip -n "$POD_NS" route show table "$t")"
	done
}

one_subnet() {
	local conf prev t0 t1 a1 main
	setup
	conf=$(rails_conf 1.0.0 '.ipam = {type: "host-local", dataDir: $dd,
		ranges: [[{subnet: "10.88.0.0/24", gateway: "10.88.0.1"}]],
		routes: [{dst: "10.89.0.0/16"}]}' --arg dd "$DD")
	add_rails "$conf" "one subnet" 10.88.0.0/24 10.88.0.0/24 10.89.1.1 10.88.0.200
	# The main table: NIC 0's route; NIC 1's same destination stays in its table.
	main=$(ip -n "$POD_NS" route show 10.89.0.0/16)
	[[ $main =~ ^"10.89.0.0/16 via 10.88.0.1 dev hpn0"\ *$ ]] || fail "main table: '$main'"
	[[ $(ip -n "$POD_NS" route show table "$t1" 10.89.0.0/16) == *"via 10.88.0.1 dev hpn1"* ]] ||
		fail "table $t1 lacks hpn1's route: $(ip -n "$POD_NS" route show table "$t1")"
	# A 1.0.0 result cannot say "table": it lists the main table's routes only.
	jq_ok '.routes == [{dst: "10.89.0.0/16"}]' "1.0.0 result routes" "$RES"
	jq_ok '.result.routes == [{dst: "10.89.0.0/16"}, {dst: "10.89.0.0/16", gw: "10.88.0.1", table: $t0},
		{dst: "10.89.0.0/16", gw: "10.88.0.1", table: $t1}]' "journalled result routes" \
		"$(cat "$STATE/$NET/$CID.eth0")" --argjson t0 "$t0" --argjson t1 "$t1"
	jq_ok '[.nics[].rail] == [{table: $t0, priority: 1000}, {table: $t1, priority: 1000}]' \
		"journal names the tables" "$(cat "$STATE/$NET/$CID.eth0")" --argjson t0 "$t0" --argjson t1 "$t1"
	prev=$(with_prev "$conf" "$RES")
	run_plugin CHECK "$prev"
	expect_ok "CHECK of both rails"
	a1=$(addr_of 1)
	ip -n "$POD_NS" rule del from "${a1%/*}" table "$t1" priority 1000
	run_plugin CHECK "$prev"
	expect_err 107 "CHECK without hpn1's rule" \
		"rail \"hpn1\": the rule from ${a1//./\\.} to table $t1 \\(priority 1000\\) is gone"
	ip -n "$POD_NS" rule add from "${a1%/*}" table "$t1" priority 1000
	ip -n "$POD_NS" route del 10.88.0.0/24 table "$t0"
	run_plugin CHECK "$prev"
	expect_err 107 "CHECK without hpn0's network in its table" \
		"rail \"hpn0\": table $t0 has no route to the network of"
	ip -n "$POD_NS" route add 10.88.0.0/24 dev hpn0 table "$t0" scope link src "$(addr_of 0 | cut -d/ -f1)"
	ip -n "$POD_NS" route del 10.89.0.0/16 table "$t1"
	run_plugin CHECK "$prev"
	expect_err 107 "CHECK without hpn1's IPAM route in its table" \
		'route to 10\.89\.0\.0/16 via 10\.88\.0\.1 on "hpn1" \(its rail.s table\) is missing'
	ip -n "$POD_NS" route add 10.89.0.0/16 via 10.88.0.1 dev hpn1 table "$t1"
	ip netns exec "$POD_NS" sh -c 'echo 0 >/proc/sys/net/ipv4/conf/hpn1/arp_ignore'
	run_plugin CHECK "$prev"
	expect_err 107 "CHECK with arp_ignore reset" 'rail "hpn1": arp_ignore is 0 and arp_announce 2'
	ip netns exec "$POD_NS" sh -c 'echo 1 >/proc/sys/net/ipv4/conf/hpn1/arp_ignore'
	run_plugin CHECK "$prev"
	expect_ok "CHECK with everything back"
	# DEL with the pod netns alive: the rules go, the tables empty with the NICs.
	run_plugin DEL "$prev"
	expect_ok "DEL"
	gone_after_del "$t0" "$t1"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	pod_empty "pod after DEL"
	expect_no_state "after DEL"
	[[ -z $(hostlocal_ips "$DD") ]] || fail "host-local still holds $(hostlocal_ips "$DD")"
	run_plugin DEL "$prev"
	expect_ok "second DEL"
}
scenario "count 2 in one subnet: a table, rule and ARP settings per rail; CHECK; DEL" one_subnet

two_subnets() {
	local conf t0 t1 r
	setup
	conf=$(rails_conf 1.1.0 '.ipam = {type: "hpnt-ipam",
		addresses: [{address: "10.90.0.2/24", gateway: "10.90.0.1"},
			{address: "fd90::2/64", gateway: "fd90::1"}],
		routes: [{dst: "10.80.0.0/16"}, {dst: "fd80::/48"}],
		byIfname: {hpn1: {addresses: [{address: "10.91.0.2/24", gateway: "10.91.0.1"},
			{address: "fd91::2/64", gateway: "fd91::1"}],
			routes: [{dst: "10.80.0.0/16"}, {dst: "10.81.0.0/16"}, {dst: "fd80::/48"}]}}}')
	add_rails "$conf" "two subnets" 10.90.0.0/24 10.91.0.0/24 10.80.1.1 10.80.1.1
	# Each rail's own gateway in its table; 10.81/16 only hpn1 has: in main too.
	r=$(ip -n "$POD_NS" route show table "$t1")
	[[ $r == *"10.80.0.0/16 via 10.91.0.1 dev hpn1"* && $r == *"10.81.0.0/16 via 10.91.0.1 dev hpn1"* ]] ||
		fail "table $t1: $r"
	[[ $(ip -n "$POD_NS" route show 10.80.0.0/16) == *"via 10.90.0.1 dev hpn0"* ]] ||
		fail "main 10.80/16: $(ip -n "$POD_NS" route show 10.80.0.0/16)"
	[[ $(ip -n "$POD_NS" route show 10.81.0.0/16) == *"via 10.91.0.1 dev hpn1"* ]] ||
		fail "main 10.81/16: $(ip -n "$POD_NS" route show 10.81.0.0/16)"
	# IPv6: a rule from each rail's address, its network in the table.
	r=$(ip -n "$POD_NS" -6 rule show table "$t1")
	[[ $r == "1000:	from fd91::2 lookup $t1" ]] || fail "IPv6 rule to $t1: '$r'"
	[[ $(ip -n "$POD_NS" -6 route show table "$t0") == *"fd90::/64 dev hpn0 src fd90::2"* ]] ||
		fail "IPv6 table $t0: $(ip -n "$POD_NS" -6 route show table "$t0")"
	[[ $(ip -n "$POD_NS" -6 route get fd80::1 from fd91::2) == *" dev hpn1 "* ]] ||
		fail "IPv6 from fd91::2: $(ip -n "$POD_NS" -6 route get fd80::1 from fd91::2)"
	jq_ok '[.routes[] | select(.table == null)] == [{dst: "10.80.0.0/16"}, {dst: "fd80::/48"},
		{dst: "10.81.0.0/16", gw: "10.91.0.1"}]' "main routes in the result" "$RES"
	run_plugin CHECK "$(with_prev "$conf" "$RES")"
	expect_ok "CHECK, two subnets"
	run_plugin DEL "$(with_prev "$conf" "$RES")"
	expect_ok "DEL, two subnets"
	gone_after_del "$t0" "$t1"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	pod_empty "pod after DEL"
	expect_no_state "after DEL"
}
scenario "count 2 in two subnets, IPv4 and IPv6: each rail its gateway" two_subnets

rollback_and_gc() {
	local conf rules
	setup
	conf=$(rails_conf 1.1.0 '.ipam = {type: "hpnt-ipam", addresses: [{address: "10.92.0.2/24"}],
		byIfname: {hpn1: {addresses: [{address: "10.92.0.3/24"}]}}}')
	# The second rail's rules are made, then ADD fails: all undone.
	run_plugin ADD "$conf" HPN_FAIL_AT=rail HPN_FAIL_NIC=1
	expect_err 106 "ADD failing after rail 1" 'injected failure after step rail'
	rules=$(ip -n "$POD_NS" rule show | grep -c lookup || true)
	[[ $rules == 3 ]] || fail "rules left after the rollback: $(ip -n "$POD_NS" rule show)"
	snap_same "$HOST_NS" "$T/host.before" "host after the rollback"
	pod_empty "pod after the rollback"
	expect_no_state "after the rollback"
	# GC of an attachment the runtime no longer lists, its netns alive.
	run_plugin ADD "$conf"
	expect_result "ADD for GC"
	[[ $(ip -n "$POD_NS" rule show | grep -c lookup) == 5 ]] || fail "no rail rules: $(ip -n "$POD_NS" rule show)"
	run_plugin GC "$(jq -c '.["cni.dev/valid-attachments"] = []' <<<"$conf")"
	expect_ok "GC"
	[[ $(ip -n "$POD_NS" rule show | grep -c lookup) == 3 ]] || fail "rules left after GC: $(ip -n "$POD_NS" rule show)"
	snap_same "$HOST_NS" "$T/host.before" "host after GC"
	pod_empty "pod after GC"
	expect_no_state "after GC"
}
scenario "rails: rollback after the rules, and GC with the netns alive, delete them" rollback_and_gc

one_nic() {
	setup
	run_plugin ADD "$(net_conf 1.1.0 '.device = "pool0" | .ifName = "hpn0" |
		.ipam = {type: "hpnt-ipam", addresses: [{address: "10.93.0.2/24"}]}')"
	expect_result "ADD one NIC"
	[[ $(ip -n "$POD_NS" rule show | grep -c lookup) == 3 ]] || fail "a rule for one NIC: $(ip -n "$POD_NS" rule show)"
	[[ $(sysctl_of hpn0 arp_ignore) == 0 && $(sysctl_of hpn0 arp_announce) == 0 ]] ||
		fail "one NIC: ARP settings changed"
	jq_ok '[.nics[] | has("rail")] == [false]' "no rail in the journal" "$(cat "$STATE/$NET/$CID.eth0")"
	run_plugin DEL "$(net_conf 1.1.0 '.device = "pool0" | .ifName = "hpn0" |
		.ipam = {type: "hpnt-ipam", addresses: [{address: "10.93.0.2/24"}]}')"
	expect_ok "DEL one NIC"
	expect_no_state "after DEL"
}
scenario "one NIC: no rail (no table, rule or ARP setting)" one_nic

t_done
