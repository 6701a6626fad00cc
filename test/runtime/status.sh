#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq programs are single-quoted on purpose
# runtime tier: CNI STATUS as kubelet sees it, the CRI Status condition
# NetworkReady. containerd 2.x runs STATUS on a cniVersion 1.1.0 conflist at
# every CRI Status (kubelet asks every 5 s) and nowhere else; 1.6 and 1.7 never
# call it, so there a node fault stays invisible to kubelet until ADD fails.
# Each fault STATUS reports is made on the node, seen through CRI Status, and
# undone: state dir read-only, hpn-rdma's IPAM plugin missing, a `match` that
# selects nothing, the GPU model's RDMA driver not loaded. Each scenario ends
# with the node exactly as before. See lib.sh.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

OPT_IN='{"alibabacloud.com/hpn-type": "rdma"}'
IPAM_BIN=hpnr-ipam	# hpn-rdma's own IPAM binary here (host-local under another name)

# hpn-rdma's IPAM is its own binary, as on a node whose pods' eth0 and RDMA
# NICs take addresses from different IPAM plugins: one can be missing alone.
rt_conflist_status() {
	rt_conflist | jq -c --arg ipam "$IPAM_BIN" --arg model "${1:-}" '.plugins |= map(
		if .type == "hpn-rdma" then .ipam.type = $ipam |
			(if $model != "" then .nccl.gpuModel = $model else . end)
		else . end)'
}

status_calls() {
	rt_calls | jq '[.[] | select(.cmd == "STATUS")] | length'
}

# ready: CRI Status's NetworkReady condition, as JSON {status, reason, message}.
ready() {
	cri status | jq -c '.status.conditions[] | select(.type == "NetworkReady")
		| {status, reason, message}'
}

# expect_ready WHAT: NetworkReady true; on 2.x the Status ran STATUS, which
# succeeded; on 1.x nothing was called.
expect_ready() {
	local before r
	before=$(status_calls)
	r=$(ready)
	jq_ok '.status == true' "$1: NetworkReady true" "$r"
	if [[ $RTN_CTRD == 2.* ]]; then
		[[ $(status_calls) == $((before + 1)) ]] ||
			fail "$1: one CRI Status ran STATUS $(($(status_calls) - before)) times"
		jq_ok '[.[] | select(.cmd == "STATUS")][-1].rc == 0' "$1: STATUS succeeded" "$(rt_calls)"
	else
		[[ $(status_calls) == 0 ]] || fail "$1: containerd $RTN_CTRD called STATUS"
	fi
}

# expect_fault WHAT WORDS: on 2.x NetworkReady false, its message naming
# hpn-rdma and the plugin's own message, which contains WORDS; the plugin
# answered code 50 (spec 1.1.0). On 1.x NetworkReady stays true: that
# runtime never asks.
expect_fault() {
	local r msg
	r=$(ready)
	if [[ $RTN_CTRD != 2.* ]]; then
		jq_ok '.status == true' "$1: containerd $RTN_CTRD does not see it (NetworkReady true)" "$r"
		[[ $(status_calls) == 0 ]] || fail "$1: containerd $RTN_CTRD called STATUS"
		return
	fi
	jq_ok '[.[] | select(.cmd == "STATUS")][-1] | .rc != 0 and .out.code == 50' \
		"$1: STATUS answered code 50" "$(rt_calls)"
	msg=$(rt_calls | jq -r '[.[] | select(.cmd == "STATUS")][-1].out.msg')
	[[ $msg == *"$2"* ]] || fail "$1: the plugin's message does not say \"$2\": $msg"
	jq_ok '.status == false and (.message | contains("hpn-rdma")) and (.message | contains($m))' \
		"$1: NetworkReady false, naming hpn-rdma and the cause" "$r" --arg m "$msg"
	info "$1: $(jq -r '"\(.reason): \(.message)"' <<<"$r")"
}

# On its own containerd never calls STATUS; each CRI Status calls it once (2.x).
calls() {
	sleep 6
	[[ $(status_calls) == 0 ]] || fail "containerd called STATUS $(status_calls) times in 6 s of no CRI call"
	local k
	for ((k = 0; k < 5; k++)); do
		expect_ready "Status $k"
	done
	info "STATUS calls: 0 in 6 s idle, $(status_calls) for 5 CRI Status"
	# A pod's life: ADD, then DEL at Stop (netns, prevResult) and at Remove
	# (neither), at the conflist's version; no CHECK, no GC; a restart calls nothing.
	local id v
	v=$(jq -r .cniVersion "$EXAMPLE")
	rm -rf "${CALLS:?}"/*
	rt_pod life "$OPT_IN"
	id=$(runp life)
	stop_remove "$id"
	rtn_containerd_stop TERM
	rtn_containerd_start
	sleep 2
	jq_ok 'map([.cmd, .conf.cniVersion, .conf.prevResult != null, .netns != "", .rc]) ==
		[["ADD", $v, true, true, 0], ["DEL", $v, true, true, 0], ["DEL", $v, false, false, 0]]' \
		"a pod's life through containerd $RTN_CTRD: ADD, DEL, DEL at $v, and nothing else" \
		"$(rt_calls)" --arg v "$v"
	jq_ok '[.[] | select(.cmd == "ADD") | .out.cniVersion] == [$v]' \
		"the result hpn-rdma gave containerd $RTN_CTRD is at $v" "$(rt_calls)" --arg v "$v"
}

# A used-up pool is not a fault: kubelet must not mark the node NotReady for
# it (every other pod still starts).
used_up() {
	local k ids=()
	for ((k = 0; k < POOL; k++)); do
		rt_pod "full$k" "$OPT_IN"
		ids+=("$(runp "full$k")")
	done
	expect_ready "pool of $POOL used up"
	for k in "${ids[@]}"; do
		stop_remove "$k"
	done
}

# A storm of CRI Status calls while a pod starts: every one answered, NetworkReady
# true in each, the pod's ADD unaffected; nothing left behind.
storm() {
	local k id n=40 bad
	rt_pod storm "$OPT_IN"
	for ((k = 0; k < n; k++)); do
		cri status >"$T/storm$k.json" 2>&1 &
	done
	id=$(runp storm)
	wait
	bad=$(for ((k = 0; k < n; k++)); do
		jq -e '.status.conditions[] | select(.type == "NetworkReady") | .status' "$T/storm$k.json" \
			>/dev/null 2>&1 || echo "$k"
	done)
	[[ -z $bad ]] || fail "Status calls of the storm not answered ready: $bad"
	[[ $RTN_CTRD != 2.* || $(status_calls) -ge $n ]] ||
		fail "$n CRI Status calls ran STATUS $(status_calls) times"
	[[ -n $(hpn0_addr "$id") ]] || fail "the pod started during the storm has no hpn0"
	stop_remove "$id"
	rm -f "$T"/storm*.json
}

hpn0_addr() {
	rtn_in nsenter --net="$(pod_netns "$1")" ip -j -4 addr show hpn0 2>/dev/null |
		jq -r '.[0].addr_info[0].local // empty' || true
}

# The state dir on a read-only mount (a node's full or read-only /run).
state_ro() {
	mkdir -p "$STATE"
	rtn_in mount --bind "$STATE" "$STATE"
	trap 'rtn_in umount "$STATE"' EXIT	# the scenario's subshell: undone if it fails
	rtn_in mount -o remount,bind,ro "$STATE"
	expect_fault "stateDir read-only" "is not writable"
	rtn_in umount "$STATE"
	trap - EXIT
	expect_ready "stateDir writable again"
}

ipam_missing() {
	rm "$RTN_DIR/cni/bin/$IPAM_BIN"
	trap 'ln -sf "$RTN_CNI_BIN/host-local" "$RTN_DIR/cni/bin/$IPAM_BIN"' EXIT
	expect_fault "IPAM plugin missing" "ipam plugin \"$IPAM_BIN\" not found"
	ln -s "$RTN_CNI_BIN/host-local" "$RTN_DIR/cni/bin/$IPAM_BIN"
	trap - EXIT
	expect_ready "IPAM plugin back"
}

# Every NIC of the pool renamed away (a driver update that renamed them).
match_nothing() {
	local k
	for ((k = 0; k < POOL; k++)); do
		ip -n "$RTN_NS" link set "rnic$k" name "xnic$k"
	done
	trap 'for ((k = 0; k < POOL; k++)); do ip -n "$RTN_NS" link set "xnic$k" name "rnic$k"; done' EXIT
	expect_fault "match selects nothing" "selects 0 devices"
	for ((k = 0; k < POOL; k++)); do
		ip -n "$RTN_NS" link set "xnic$k" name "rnic$k"
	done
	trap - EXIT
	expect_ready "the NICs back"
}

# The conflist's GPU model (GU8TF, Type 1) needs mlx5_ib, which this machine
# does not have; `modprobe mlx5_ib` is stood in for by a tmpfs over the
# node's own /sys/module (its mount namespace only) that lists it.
driver() {
	local m
	rtn_conflist "$(rt_conflist_status GU8TF)"
	trap 'rtn_in umount /sys/module 2>/dev/null; rtn_conflist "$(rt_conflist_status)"' EXIT
	wait_conf GU8TF
	expect_fault "GPU model's driver not loaded" "mlx5_ib"
	m=$(rtn_in ls /sys/module)
	rtn_in mount -t tmpfs -o size=1m hpnr-modules /sys/module
	# shellcheck disable=SC2086 # one name per word
	(cd / && rtn_in sh -c 'cd /sys/module && mkdir -p "$@" mlx5_ib' sh $m)
	expect_ready "mlx5_ib loaded"
	rtn_in umount /sys/module
	rtn_conflist "$(rt_conflist_status)"
	trap - EXIT
	wait_conf ""
	expect_ready "the conflist without a GPU model"
}

# wait_conf MODEL: until containerd has reloaded the conflist (its hpn-rdma
# entry's nccl.gpuModel is MODEL, or none).
wait_conf() {
	local i
	for ((i = 0; i < 200; i++)); do
		cri status -v | jq -e --arg m "$1" '[.info.cniconfig.Networks[]?.Config.Plugins[]?
			| select(.Network.type == "hpn-rdma") | .Source | fromjson
			| .nccl.gpuModel // ""] | index($m)' >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	fail "containerd did not reload the conflist (gpuModel \"$1\") in 10 s"
}

rt_init
ln -s "$RTN_CNI_BIN/host-local" "$RTN_DIR/cni/bin/$IPAM_BIN"
rtn_conflist "$(rt_conflist_status)"
wait_conf ""
BASELINE=$(rt_node_state)
scenario "STATUS only at CRI Status" calls
scenario "used-up pool: NetworkReady true" used_up
scenario "a storm of Status calls during ADD" storm
scenario "state dir read-only, then writable" state_ro
scenario "IPAM plugin missing, then back" ipam_missing
scenario "match selects nothing, then NICs back" match_nothing
scenario "GPU model's driver not loaded, then loaded" driver
rt_done
