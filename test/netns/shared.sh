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
# - DRA shares (the agent's reply marks a device "shared"; a stand-in answers,
#   test/lookup-stub.py): children of one NIC in several pods and in one pod,
#   under move, macvlan and ipvlan configs; the NIC's whole claim refused
#   while they exist, a share refused while the NIC is moved; CHECK, DEL, GC.
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

# ---- DRA shares: the agent's reply marks a device "shared" (a share of the
# NIC a DRA claim got, doc/dra.md): ADD makes a child of that NIC in the pod
# whatever the config's mode (a bridge macvlan under move), the NIC stays on
# the host; the NIC's own device (shared false) keeps the config's mode.

# share_stub: the stand-in for hpn-rdma-agent's lookup socket (root's, as the
# plugin requires), answering each pod what SHARE_PODS (a JSON object by
# "team-a/<pod>", lookup-stub.py's @FILE) says now; SHARE_SOCK names it.
SHARE_PID=
share_stub() {
	SHARE_SOCK=$T/agent-$SCEN.sock
	SHARE_PODS=$T/pods-$SCEN.json
	echo '{}' >"$SHARE_PODS"
	rm -f "$SHARE_SOCK" "$SHARE_SOCK.ready" "$SHARE_SOCK.got"
	/usr/bin/python3 "$HPN_SRC/test/lookup-stub.py" "$SHARE_SOCK" "@$SHARE_PODS" \
		2>>"$T/stub.log" &
	SHARE_PID=$!
	trap share_stop EXIT
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -e $SHARE_SOCK.ready ]] && return 0
		sleep 0.05
	done
	fail "the lookup stand-in did not start: $(cat "$T/stub.log")"
}

share_stop() {
	[[ -z $SHARE_PID ]] || kill "$SHARE_PID" 2>/dev/null || true
	[[ -z $SHARE_PID ]] || wait "$SHARE_PID" 2>/dev/null || true
	SHARE_PID=
}

# answer POD DEVICES SHARED: pod team-a/POD holds DEVICES (a JSON array of NIC
# IDs) of a prepared DRA claim, SHARED (a JSON array of booleans) saying
# which are shares.
answer() {
	jq --arg p "team-a/$1" --argjson d "$2" --argjson s "$3" \
		'.[$p] = {resource: "hpn-rdma.alibabacloud.com", devices: $d, source: "dra",
			claims: ["team-a/nics-\($p | split("/")[1])"], shared: $s}' \
		"$SHARE_PODS" >"$SHARE_PODS.new"
	mv "$SHARE_PODS.new" "$SHARE_PODS"
}

# pod_ns POD: pod a is the scenario's $POD_NS; b and c are made on demand.
pod_ns() {
	if [[ $1 == a ]]; then
		echo "$POD_NS"
		return
	fi
	local ns=${HPNT_PREFIX}p$SCEN-$1
	[[ -e $(ns_path "$ns") ]] || ip netns add "$ns"
	echo "$ns"
}

# pod_run CMD POD CONFIG [NAME=VALUE...]: the plugin for pod team-a/POD (a,
# b or c: its own netns, container ID, pod name and UID).
pod_run() {
	local cmd=$1 pod=$2 conf=$3 ns
	shift 3
	ns=$(pod_ns "$pod")
	run_plugin "$cmd" "$conf" CNI_CONTAINERID="$CID-$pod" CNI_NETNS="$(ns_path "$ns")" \
		CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=$pod;K8S_POD_UID=6f1c2a3e-8d4b-4c5a-9e7f-0a1b2c3d4e0$pod" \
		"$@"
}

# share_conf [FILTER [args]]: match over ens*, the stand-in as the agent.
share_conf() {
	local extra=${1:-.}
	shift || true
	net_conf 1.0.0 '.match = {devices: ["ens*"]} | .ifName = "hpn0" |
		.agent = {socket: $_a, timeoutMs: 2000} | '"$extra" --arg _a "$SHARE_SOCK" "$@"
}

share_setup() {
	mk_nic "$HOST_NS" ens0 xpeer0
	mk_nic "$HOST_NS" ens1 xpeer1
	ip -n "$HOST_NS" link set ens0 up
	ip -n "$HOST_NS" link set xpeer0 up
	snap_save "$HOST_NS" "$T/host.before"
	share_stub
}

# is_child POD IF KIND MODE WHAT: IF in POD's netns is a KIND child in MODE
# whose link is the host's ens0, with a MAC of its own (macvlan).
is_child() {
	local l
	l=$(link_json "$(pod_ns "$1")" "$2")
	jq_ok '.linkinfo.info_kind == $k and .linkinfo.info_data.mode == $m and
		.link_index == $i and .link_netnsid != null and
		($k != "macvlan" or .address != $mac)' "$5" "$l" \
		--arg k "$3" --arg m "$4" \
		--argjson i "$(ip -n "$HOST_NS" -j link show dev ens0 | jq '.[0].ifindex')" \
		--arg mac "$(mac_of "$HOST_NS" ens0)"
}

pods_del() {
	local p
	for p in b c; do
		[[ ! -e $(ns_path "${HPNT_PREFIX}p$SCEN-$p") ]] || ip netns del "${HPNT_PREFIX}p$SCEN-$p"
	done
}

# Two pods' shares of ens0 under a move config: children, the NIC stays; a
# whole-NIC claim of it is refused while they exist; a share while a pod has
# the NIC moved is refused.
share_move() {
	local conf ra rb rc key
	share_setup
	conf=$(share_conf)
	answer a '["ens0"]' '[true]'
	answer b '["ens0"]' '[true]'
	answer c '["ens0"]' '[false]'

	pod_run ADD a "$conf"
	expect_result "ADD of pod a's share of ens0"
	ra=$OUT
	grep -q '"shares":true' "$SHARE_SOCK.got" || fail "the lookup did not say \"shares\": $(cat "$SHARE_SOCK.got")"
	is_child a hpn0 macvlan bridge "pod a's hpn0 is a bridge macvlan of ens0"
	has_link "$HOST_NS" ens0 || fail "ens0 left the host for a share"
	jq_ok '.interfaces | length == 1 and .[0].name == "hpn0" and (.[0] | has("pciID") | not)' \
		"pod a's result names the child" "$ra"
	jq_ok '.nicSource == "dra" and (.nics | length == 1) and .nics[0].kind == "child" and
		.nics[0].childKind == "macvlan" and .nics[0].host.name == "ens0" and
		(.nics[0] | has("hintsLink") | not)' "pod a's journal: a child of ens0" \
		"$(cat "$STATE/$NET/$CID-a.eth0")"
	grep -q 'attach "ens0" as a child "hpn0" in .*, a share of a DRA claim' "$T/plugin.log" ||
		fail "the log does not call it a share: $(grep attach "$T/plugin.log")"
	grep -q 'pod team-a/a: 1 NICs (1 of them shares) of DRA claim team-a/nics-a' "$T/plugin.log" ||
		fail "the log does not count the shares: $(grep 'DRA claim' "$T/plugin.log")"

	# ens0 gone from the host (renamed), pod a's child still on it: not held by a.
	ip -n "$HOST_NS" link set ens0 down
	ip -n "$HOST_NS" link set ens0 name hpntgone0
	pod_run ADD b "$conf"
	expect_err 100 "ADD of a share of ens0 with ens0 gone" \
		'device ens0 to the pod, but no free-standing NIC of the pool has that ID'
	pod_run DEL b "$conf"
	expect_ok "DEL after the refusal"
	ip -n "$HOST_NS" link set hpntgone0 name ens0
	ip -n "$HOST_NS" link set ens0 up

	pod_run ADD b "$conf"
	expect_result "ADD of pod b's share of ens0"
	rb=$OUT
	is_child b hpn0 macvlan bridge "pod b's hpn0 is a bridge macvlan of ens0"
	[[ $(mac_of "$(pod_ns a)" hpn0) != $(mac_of "$(pod_ns b)" hpn0) ]] || fail "the two shares have one MAC"
	pod_run CHECK a "$(with_prev "$conf" "$ra")"
	expect_ok "CHECK of pod a's share"
	pod_run CHECK b "$(with_prev "$conf" "$rb")"
	expect_ok "CHECK of pod b's share"

	# The whole NIC (shared false, move config) while the shares' children exist.
	pod_run ADD c "$conf"
	expect_err 100 "ADD of ens0 whole while pods have shares of it" \
		"device ens0 \\(\"ens0\"\\) to the pod, but attachment $CID-[ab]\\.eth0 holds a child of it"
	has_link "$HOST_NS" ens0 || fail "the refused ADD moved ens0"
	POD_NS=$(pod_ns c) pod_empty "pod c after the refused ADD"
	pod_run DEL c "$conf"
	expect_ok "DEL after the refused ADD"

	# CHECK sees a share's child gone.
	ip -n "$(pod_ns b)" link set hpn0 down
	pod_run CHECK b "$(with_prev "$conf" "$rb")"
	expect_err 107 "CHECK of pod b with its child down" '"hpn0" is down'
	ip -n "$(pod_ns b)" link set hpn0 up

	pod_run DEL a "$(with_prev "$conf" "$ra")"
	expect_ok "DEL of pod a's share"
	pod_empty "pod a after DEL"
	has_link "$HOST_NS" ens0 || fail "DEL of a share took ens0"
	pod_run DEL a "$(with_prev "$conf" "$ra")"
	expect_ok "second DEL of pod a's share"
	# One child left: still refused.
	pod_run ADD c "$conf"
	expect_err 100 "ADD of ens0 whole while pod b has a share of it" \
		"but attachment $CID-b\\.eth0 holds a child of it"
	pod_run DEL c "$conf"
	expect_ok "DEL after the second refused ADD"
	pod_run DEL b "$conf"
	expect_ok "DEL of pod b's share (no prevResult)"
	POD_NS=$(pod_ns b) pod_empty "pod b after DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after the shares' DELs"
	expect_no_state "after the shares' DELs"

	# Now the whole NIC goes: moved into pod c.
	pod_run ADD c "$conf"
	expect_result "ADD of ens0 whole once no share is left"
	rc=$OUT
	has_link "$HOST_NS" ens0 && fail "ens0, claimed whole, stayed on the host"
	[[ $(link_json "$(pod_ns c)" hpn0 | jq -r '.linkinfo.info_kind') == veth ]] ||
		fail "pod c's hpn0 is not the moved NIC"
	# A share of it while it is in pod c.
	pod_run ADD a "$conf"
	key=$CID-c.eth0
	expect_err 100 "ADD of a share of ens0 while pod c holds it" \
		"device ens0 to the pod, but attachment $key holds it"
	pod_empty "pod a after the refused share"
	pod_run DEL a "$conf"
	expect_ok "DEL after the refused share"
	pod_run DEL c "$(with_prev "$conf" "$rc")"
	expect_ok "DEL of pod c"
	snap_same "$HOST_NS" "$T/host.before" "host after pod c's DEL"
	expect_no_state "at the end"
	share_stop
	pods_del
}
scenario "DRA shares of one NIC under a move config" share_move

# One pod: two shares of ens0 (hpn0, hpn1), or a share of ens0 beside ens1
# whole (moved: the mode is per NIC); ens0 whole and as a share is refused.
share_one_pod() {
	local conf res
	share_setup
	conf=$(share_conf)
	answer a '["ens0", "ens0"]' '[true, true]'
	pod_run ADD a "$conf"
	expect_result "ADD of two shares of ens0"
	res=$OUT
	is_child a hpn0 macvlan bridge "hpn0 is a macvlan of ens0"
	is_child a hpn1 macvlan bridge "hpn1 is a macvlan of ens0"
	[[ $(mac_of "$POD_NS" hpn0) != $(mac_of "$POD_NS" hpn1) ]] || fail "hpn0 and hpn1 have one MAC"
	jq_ok '[.interfaces[].name] == ["hpn0", "hpn1"]' "the result names both"
	pod_run CHECK a "$(with_prev "$conf" "$res")"
	expect_ok "CHECK of two shares"
	pod_run DEL a "$(with_prev "$conf" "$res")"
	expect_ok "DEL of two shares"
	pod_empty "pod after DEL of two shares"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL of two shares"
	expect_no_state "after two shares"

	answer a '["ens0", "ens1"]' '[true, false]'
	pod_run ADD a "$conf"
	expect_result "ADD of a share of ens0 and ens1 whole"
	res=$OUT
	is_child a hpn0 macvlan bridge "hpn0 is a macvlan of ens0"
	[[ $(link_json "$POD_NS" hpn1 | jq -r '.linkinfo.info_kind') == veth ]] || fail "hpn1 is not ens1 moved"
	has_link "$HOST_NS" ens1 && fail "ens1, claimed whole, stayed on the host"
	jq_ok '[.nics[].kind] == ["child", "moved"] and .nics[1].hintsLink == "ens1"' \
		"the journal: a child, then a moved NIC" "$(cat "$STATE/$NET/$CID-a.eth0")"
	pod_run CHECK a "$(with_prev "$conf" "$res")"
	expect_ok "CHECK of a share and a whole NIC"
	pod_run DEL a "$(with_prev "$conf" "$res")"
	expect_ok "DEL of a share and a whole NIC"
	pod_run DEL a "$(with_prev "$conf" "$res")"
	expect_ok "second DEL"
	pod_empty "pod after DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL of a share and a whole NIC"
	expect_no_state "after a share and a whole NIC"

	answer a '["ens0", "ens0"]' '[false, true]'
	pod_run ADD a "$conf"
	expect_err 7 "ADD of ens0 whole and as a share" 'device ens0 twice \(whole and as a share\)'
	pod_run DEL a "$conf"
	expect_ok "DEL after the refusal"
	snap_same "$HOST_NS" "$T/host.before" "host after the refusal"
	expect_no_state "after the refusal"
	share_stop
}
scenario "DRA shares: two of one NIC in one pod, beside a whole NIC" share_one_pod

# Under a macvlan config a share is the config's child (macvlanMode private),
# none under passthru (refused); GC collects a share whose pod vanished like
# any child.
share_macvlan() {
	local conf
	share_setup
	conf=$(share_conf '.cniVersion = "1.1.0" | .mode = "macvlan" | .macvlanMode = "private"')
	answer a '["ens0", "ens0"]' '[true, true]'
	pod_run ADD a "$conf"
	expect_result "ADD of two shares under macvlanMode private"
	is_child a hpn0 macvlan private "hpn0 is a private macvlan of ens0"
	is_child a hpn1 macvlan private "hpn1 is a private macvlan of ens0"
	# A passthru macvlan is a NIC's only child: a share under it, refused before any change.
	answer b '["ens0"]' '[true]'
	pod_run ADD b "$(share_conf '.mode = "macvlan" | .macvlanMode = "passthru"')"
	expect_err 7 "ADD of a share under macvlanMode passthru" \
		'is a share of a NIC, but macvlanMode is passthru'
	POD_NS=$(pod_ns b) pod_empty "pod b after the refused passthru share"
	ip netns del "$(pod_ns b)"
	ip netns del "$POD_NS"
	run_plugin GC "$(jq -c '.["cni.dev/valid-attachments"] = []' <<<"$conf")" \
		-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "GC of the shares of a vanished pod"
	snap_same "$HOST_NS" "$T/host.before" "host after GC"
	expect_no_state "after GC"
	share_stop
}
scenario "DRA shares under a macvlan config; GC" share_macvlan

# Under an ipvlan config a share is an ipvlan child (where the kernel has it).
share_ipvlan() {
	local conf res
	share_setup
	if ! ip -n "$HOST_NS" link add hpntipv link ens0 type ipvlan mode l2 2>/dev/null; then
		info "SKIP ipvlan shares: this kernel has no ipvlan"
		share_stop
		return 0
	fi
	ip -n "$HOST_NS" link del hpntipv
	conf=$(share_conf '.mode = "ipvlan" | .ipvlanMode = "l3"')
	answer a '["ens0", "ens0"]' '[true, true]'
	pod_run ADD a "$conf"
	expect_result "ADD of two shares under an ipvlan config"
	res=$OUT
	is_child a hpn0 ipvlan l3 "hpn0 is an l3 ipvlan of ens0"
	is_child a hpn1 ipvlan l3 "hpn1 is an l3 ipvlan of ens0"
	pod_run CHECK a "$(with_prev "$conf" "$res")"
	expect_ok "CHECK of ipvlan shares"
	pod_run DEL a "$(with_prev "$conf" "$res")"
	expect_ok "DEL of ipvlan shares"
	pod_empty "pod after DEL of ipvlan shares"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL of ipvlan shares"
	expect_no_state "after ipvlan shares"
	share_stop
}
scenario "DRA shares under an ipvlan config" share_ipvlan

t_done
