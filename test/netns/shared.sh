#!/bin/bash
# Shared mode: "mode": "macvlan" (and "ipvlan" where the kernel has it)
# creates a child of the parent NIC directly in the pod under the pod-side
# name; DEL deletes it; the parent never leaves the host.
# - master + macvlan with host-local: ADD, result, the child's kind, mode,
#   MTU and MAC, CHECK, DEL twice; macvlanMode private.
# - through a real CNI client (libcni's hpn-cnitool): add, check, del.
# - match + macvlan: pods spread over the least-loaded parents, a parent
#   shared by several pods; the pool's parents are not claimed.
# - GC after the pod netns vanished (rollback and kill -9: rollback.sh).
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

# mv_conf [FILTER [args]]: a macvlan child of ens0 as hpn0, host-local on $DD.
mv_conf() {
	local extra=${1:-.}
	shift || true
	net_conf 1.0.0 '.mode = "macvlan" | .master = "ens0" | .ifName = "hpn0" | .mtu = 1400 |
		.ipam = {type: "host-local", dataDir: $dd,
			ranges: [[{subnet: "10.94.0.0/24", gateway: "10.94.0.1"}]],
			routes: [{dst: "10.95.0.0/16"}]} | '"$extra" --arg dd "$DD" "$@"
}

setup_parent() {
	DD=$T/hl-$SCEN
	mk_nic "$HOST_NS" ens0 enspeer0
	ip -n "$HOST_NS" link set ens0 up
	ip -n "$HOST_NS" link set enspeer0 up
	snap_save "$HOST_NS" "$T/host.before"
}

expect_back() {
	snap_same "$HOST_NS" "$T/host.before" "$1: host"
	pod_empty "$1: pod"
	expect_no_state "$1"
	[[ -z $(hostlocal_ips "$DD") ]] || fail "$1: host-local still holds $(hostlocal_ips "$DD")"
}

macvlan_master() {
	local conf prev l
	setup_parent
	conf=$(mv_conf)
	run_plugin ADD "$conf"
	expect_result "ADD macvlan"
	l=$(link_json "$POD_NS" hpn0)
	jq_ok '.linkinfo.info_kind == "macvlan" and .linkinfo.info_data.mode == "bridge" and
		.mtu == 1400' "hpn0 is a bridge-mode macvlan with MTU 1400" "$l"
	jq_ok '.interfaces | length == 1 and .[0].name == "hpn0" and .[0].mac == $m and
		.[0].mtu == 1400 and (.[0] | has("pciID") | not)' "result names the child" "$OUT" \
		--arg m "$(jq -r .address <<<"$l")"
	jq_ok '.ips[0].address | startswith("10.94.0.")' "address from host-local"
	jq_ok '.rdma[0].bound == false and .rdma[0].interface == 0' "no RDMA behind a veth"
	has_link "$HOST_NS" ens0 || fail "the parent left the host"
	ip -n "$POD_NS" route show 10.95.0.0/16 | grep -q "dev hpn0" || fail "route missing"
	[[ $(jq -r '.nics[0].kind + " " + .nics[0].childKind + " " + .nics[0].host.name' \
		"$STATE/$NET/$CID.eth0") == "child macvlan ens0" ]] || fail "journal: $(cat "$STATE/$NET/$CID.eth0")"
	prev=$(with_prev "$conf" "$OUT")
	run_plugin CHECK "$prev"
	expect_ok "CHECK macvlan"
	ip -n "$POD_NS" link set hpn0 mtu 1300
	run_plugin CHECK "$prev"
	expect_err 107 "CHECK with the child's MTU changed" 'MTU'
	run_plugin DEL "$prev"
	expect_ok "DEL macvlan"
	run_plugin DEL "$prev"
	expect_ok "second DEL"
	expect_back "after DEL"

	# macvlanMode private; no IPAM.
	run_plugin ADD "$(net_conf 1.0.0 '.mode = "macvlan" | .master = "ens0" | .macvlanMode = "private"')"
	expect_result "ADD private macvlan"
	jq_ok '.linkinfo.info_data.mode == "private"' "macvlanMode private" "$(link_json "$POD_NS" eth0)"
	run_plugin DEL "$(net_conf 1.0.0 '.mode = "macvlan" | .master = "ens0"')"
	expect_ok "DEL private macvlan"
	expect_back "after DEL of the private macvlan"

	# passthru: the child takes the parent's MAC; the parent's stays as it was.
	run_plugin ADD "$(net_conf 1.0.0 '.mode = "macvlan" | .master = "ens0" | .macvlanMode = "passthru"')"
	expect_result "ADD passthru macvlan"
	jq_ok '.linkinfo.info_data.mode == "passthru"' "macvlanMode passthru" "$(link_json "$POD_NS" eth0)"
	run_plugin CHECK "$(with_prev "$(net_conf 1.0.0 '.mode = "macvlan" | .master = "ens0"')" "$OUT")"
	expect_ok "CHECK passthru macvlan"
	run_plugin DEL "$(net_conf 1.0.0 '.mode = "macvlan" | .master = "ens0"')"
	expect_ok "DEL passthru macvlan"
	expect_back "after DEL of the passthru macvlan"
}
scenario "macvlan child of master with host-local" macvlan_master

# A pod that already has the name: 104, nothing created.
macvlan_clash() {
	setup_parent
	ip -n "$POD_NS" link add hpn0 type veth peer name hpn0peer
	run_plugin ADD "$(mv_conf)"
	expect_err 104 "ADD into a pod with hpn0"
	[[ $(ip -n "$POD_NS" -d -j link show dev hpn0 | jq -r '.[0].linkinfo.info_kind') == veth ]] ||
		fail "the pod's own hpn0 was replaced"
	run_plugin DEL "$(mv_conf)"
	expect_ok "DEL after the refused ADD"
	has_link "$POD_NS" hpn0 || fail "DEL deleted the pod's own hpn0"
	ip -n "$POD_NS" link del hpn0
	expect_back "after the refused ADD"
}
scenario "macvlan: the pod already has hpn0" macvlan_clash

macvlan_cnitool() {
	[[ -n ${HPN_CNITOOL:-} && -x ${HPN_CNITOOL:-} ]] || {
		info "SKIP: no CNI client (go was not found when configuring)"
		return 0
	}
	local confdir=$T/net.d-$SCEN
	setup_parent
	mkdir -p "$confdir"
	mv_conf '.name = "hpnt-mv"' >"$confdir/20-hpnt-mv.conf"
	cni() {
		LAST_RUN="hpn-cnitool $1 hpnt-mv"
		set +e
		ip netns exec "$HOST_NS" env -i PATH="$PATH" NETCONFPATH="$confdir" \
			CNI_PATH="$CNI_PATH_DIRS" CNI_CACHE_DIR="$T/cache-$SCEN" \
			CNI_CONTAINERID="$CID" CNI_IFNAME=hpn0 \
			"$HPN_CNITOOL" "$1" hpnt-mv "$(ns_path "$POD_NS")" >"$T/out" 2>"$T/err"
		RC=$?
		set -e
		OUT=$(cat "$T/out")
		ERR=$(cat "$T/err")
	}
	cni add
	expect_ok "cnitool add"
	jq_ok '.interfaces[0].name == "hpn0" and (.ips[0].address | startswith("10.94.0."))' \
		"cnitool's result"
	[[ $(link_json "$POD_NS" hpn0 | jq -r .linkinfo.info_kind) == macvlan ]] ||
		fail "no macvlan hpn0 in the pod"
	cni check
	expect_ok "cnitool check"
	cni del
	expect_ok "cnitool del"
	cni del
	expect_ok "second cnitool del"
	snap_same "$HOST_NS" "$T/host.before" "host after cnitool del"
	pod_empty "pod after cnitool del"
	[[ -z $(state_files) ]] || fail "state left: $(state_files)"
	[[ -z $(hostlocal_ips "$DD") ]] || fail "host-local still holds $(hostlocal_ips "$DD")"
}
scenario "macvlan through a real CNI client" macvlan_cnitool

# match + macvlan: 4 pods over 2 parents, 2 each; the parents stay free.
macvlan_pool() {
	local i pod conf
	local -a pods=()
	DD=$T/hl-$SCEN
	mk_nic "$HOST_NS" ens0 xpeer0
	mk_nic "$HOST_NS" ens1 xpeer1
	snap_save "$HOST_NS" "$T/host.before"
	conf=$(net_conf 1.0.0 '.mode = "macvlan" | .match = {devices: ["ens*"]} | .ifName = "hpn0"')
	for i in 0 1 2 3; do
		pod=${HPNT_PREFIX}p$SCEN-$i
		ip netns add "$pod"
		pods+=("$pod")
		run_plugin ADD "$conf" CNI_CONTAINERID="$CID-$i" CNI_NETNS="$(ns_path "$pod")"
		expect_result "ADD pod $i"
	done
	[[ $(jq -rs '[.[].nics[0].host.name] | sort | join(",")' "$STATE/$NET"/*) == "ens0,ens0,ens1,ens1" ]] ||
		fail "children not spread over the parents: $(jq -rs '[.[].nics[0].host.name]' "$STATE/$NET"/*)"
	# A move-mode ADD cannot take a parent that has children.
	run_plugin ADD "$(net_conf 1.0.0 '.device = "ens0"')" CNI_CONTAINERID="$CID-m"
	expect_err 100 "move of a parent with children" 'held by'
	for i in 0 1 2 3; do
		run_plugin DEL "$conf" CNI_CONTAINERID="$CID-$i" CNI_NETNS="$(ns_path "${pods[i]}")"
		expect_ok "DEL pod $i"
		POD_NS=${pods[i]} pod_empty "pod $i after DEL"
		ip netns del "${pods[i]}"
	done
	run_plugin DEL "$(net_conf 1.0.0 '.device = "ens0"')" CNI_CONTAINERID="$CID-m"
	expect_ok "DEL of the refused move"
	expect_back "after the DELs"
}
scenario "match + macvlan: children spread over parents" macvlan_pool

# The pod netns vanishes: the child died with it; GC releases the lease (the
# recording IPAM: Debian's host-local stops at 1.0.0) and the state.
macvlan_gc() {
	local x=$T/ipam-$SCEN.log conf
	setup_parent
	conf=$(net_conf 1.1.0 '.mode = "macvlan" | .master = "ens0" | .ifName = "hpn0" |
		.ipam = {type: "hpnt-ipam", log: $x, addresses: [{address: "10.94.0.7/24"}]}' --arg x "$x")
	run_plugin ADD "$conf"
	expect_result "ADD"
	ip netns del "$POD_NS"
	run_plugin GC "$(jq -c '.["cni.dev/valid-attachments"] = []' <<<"$conf")" \
		-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "GC"
	snap_same "$HOST_NS" "$T/host.before" "host after GC"
	expect_no_state "after GC"
	[[ $(tail -n1 "$x") == "DEL $CID eth0 1.1.0" ]] || fail "GC did not release the lease: $(tr '\n' '|' <"$x")"
}
scenario "macvlan: GC after the pod vanished" macvlan_gc

# ipvlan where the kernel has it (Debian's VM kernel does; this host may not).
ipvlan_l3() {
	local conf
	setup_parent
	if ! ip -n "$HOST_NS" link add hpntipv link ens0 type ipvlan mode l2 2>/dev/null; then
		info "SKIP ipvlan: this kernel has no ipvlan"
		return 0
	fi
	ip -n "$HOST_NS" link del hpntipv
	conf=$(mv_conf '.mode = "ipvlan" | del(.master) | .device = "ens0" | .ipvlanMode = "l3"')
	run_plugin ADD "$conf"
	expect_result "ADD ipvlan"
	jq_ok '.linkinfo.info_kind == "ipvlan" and .linkinfo.info_data.mode == "l3"' "ipvlan l3" \
		"$(link_json "$POD_NS" hpn0)"
	run_plugin CHECK "$(with_prev "$conf" "$OUT")"
	expect_ok "CHECK ipvlan"
	run_plugin DEL "$conf"
	expect_ok "DEL ipvlan"
	expect_back "after DEL of ipvlan"
}
scenario "ipvlan l3 child" ipvlan_l3

t_done
