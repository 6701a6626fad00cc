#!/bin/bash
# The per-pod NCCL hints file and the pod opt-in (podSelector).
#
# Proves that:
#  - ADD writes <nccl.dir>/<K8S_POD_UID>/nccl.conf (0644 in a 0755 directory),
#    or under the container ID without a pod UID; read back with NCCL's own
#    rules it gives exactly the result's nccl.env; the header names the pod,
#    the owner and the devices; CHECK passes, and fails with 107 when the file
#    is edited, rewritten by another attachment, or removed; DEL removes it
#    and its directory, and again is fine;
#  - a recreated pod (same UID, new container) keeps its new file when the old
#    container's DEL comes late;
#  - with podSelector, a pod without the annotation gets prevResult back
#    unchanged and nothing on the host, the state, IPAM or the hints dir
#    changes; its DEL and CHECK are no-ops; a pod with it is attached;
#  - GPU model profiles: a GPU count the model does not run is refused with 7,
#    a model that needs RDMA on a NIC without it with 108, and neither changes
#    anything; P16EN writes IB disabled; config profiles and env keys apply;
#  - a hostile pod UID (traversal) is refused with 4, and a symlink planted as
#    the pod's hints directory fails ADD with 5 and a complete rollback,
#    without writing through it;
#  - nccl.enabled false writes nothing;
#  - for NICs moved into the pod (the kubelet's, from a stand-in of the
#    agent's lookup, and the pool's), ADD links <nccl.dir>/nic/<ID> to
#    ../<UID> (the agent's CDI spec of the NIC mounts the hints through it),
#    journalled; CHECK fails when a link is missing or leads elsewhere; DEL
#    removes them, twice is fine, and leaves a link that leads to another
#    pod's key; a failure after the first link (HPN_FAIL_AT=hints-link, a
#    failing symlinkat) leaves none, a kill there leaves it for DEL; a
#    macvlan child and nccl.enabled false get none.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

UID1=6f1c2a3e-8d4b-4c5a-9e7f-0a1b2c3d4e5f
ARGS1="IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=trainer-0;K8S_POD_UID=$UID1"

# nccl_read FILE: the settings as NCCL reads the file (src/misc/param.cc): a
# line starting with '#' is skipped, the first '=' splits name from value,
# nothing is trimmed or unquoted, and the first setting of a name stays
# (setenv(name, value, 0)). Prints one JSON object.
nccl_read() {
	awk 'substr($0, 1, 1) != "#" {
		i = index($0, "="); if (i == 0) next
		k = substr($0, 1, i - 1); if (k in seen) next
		seen[k] = 1; printf "%s\t%s\n", k, substr($0, i + 1)
	}' "$1" | jq -Rn '[inputs | split("\t") | {key: .[0], value: .[1]}] | from_entries'
}

# expect_hints FILE RESULT WHAT: FILE read as NCCL does equals RESULT's nccl.env.
expect_hints() {
	local got
	[[ -f $1 ]] || fail "$3: no hints file $1"
	got=$(nccl_read "$1")
	jq -e --argjson g "$got" '.nccl.env == $g' <<<"$2" >/dev/null ||
		fail "$3: $1 reads as $got, the result says $(jq -c .nccl <<<"$2")"
}

# --- write, CHECK, tamper, remove.
hints_lifecycle() {
	local conf prev res file mode
	mk_nic "$HOST_NS" nic0 peer0
	snap_save "$HOST_NS" "$T/host.before"
	conf=$(net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0" |
		.nccl.env = {NCCL_DEBUG: "INFO"} |
		.ipam = {type: "static", addresses: [{address: "10.83.0.2/24"}]}')
	run_plugin ADD "$conf" CNI_ARGS="$ARGS1"
	expect_result "ADD"
	res=$OUT
	file=$PODS/$UID1/nccl.conf
	jq_ok '.nccl.file == $f' "result names the hints file" "$res" --arg f "$file"
	jq_ok '.nccl.env == {NCCL_IB_DISABLE: "1", NCCL_IB_HCA: "", NCCL_SOCKET_IFNAME: "eth0",
		NCCL_DEBUG: "INFO"}' "IB disabled without an RDMA device, the extra key"
	expect_hints "$file" "$res" "after ADD"
	mode=$(stat -c '%a' "$file" "$PODS/$UID1" | tr '\n' ' ')
	[[ $mode == "644 755 " ]] || fail "file and directory modes are $mode, want 644 755"
	grep -qx "# pod team-a/trainer-0 uid $UID1" "$file" || fail "header lacks the pod: $(cat "$file")"
	grep -qx "# owner container $CID network $NET ifname eth0" "$file" ||
		fail "header lacks the owner: $(cat "$file")"
	grep -qx '# device hpn0 none' "$file" || fail "header lacks the device: $(cat "$file")"
	prev=$(with_prev "$conf" "$res")
	run_plugin CHECK "$prev" CNI_ARGS="$ARGS1"
	expect_ok "CHECK"

	cp "$file" "$T/hints.good"
	sed -i 's/^NCCL_IB_DISABLE=1$/NCCL_IB_DISABLE=0/' "$file"
	run_plugin CHECK "$prev" CNI_ARGS="$ARGS1"
	expect_err 107 "CHECK of an edited hints file" 'NCCL_IB_DISABLE=0, expected 1'
	cp "$T/hints.good" "$file"
	echo 'NCCL_P2P_DISABLE=1' >>"$file"
	run_plugin CHECK "$prev" CNI_ARGS="$ARGS1"
	expect_err 107 "CHECK of a hints file with an extra key" 'settings ADD did not write'
	sed 's/^# owner container .*/# owner container other network x ifname eth0/' \
		"$T/hints.good" >"$file"
	run_plugin CHECK "$prev" CNI_ARGS="$ARGS1"
	expect_err 107 "CHECK of a hints file another attachment wrote" 'another attachment'
	rm "$file"
	run_plugin CHECK "$prev" CNI_ARGS="$ARGS1"
	expect_err 107 "CHECK without the hints file" 'is missing'
	cp "$T/hints.good" "$file"
	run_plugin CHECK "$prev" CNI_ARGS="$ARGS1"
	expect_ok "CHECK with the file restored"

	run_plugin DEL "$prev" CNI_ARGS="$ARGS1"
	expect_ok "DEL"
	[[ ! -e $PODS/$UID1 ]] || fail "DEL left $PODS/$UID1"
	run_plugin DEL "$prev" CNI_ARGS="$ARGS1"
	expect_ok "DEL again"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	expect_no_state "after DEL"
}
scenario "hints file: write, CHECK, tamper, DEL" hints_lifecycle

# --- without K8S_POD_UID the container ID is the key.
hints_by_container() {
	local conf
	mk_nic "$HOST_NS" nic0 peer0
	conf=$(net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0"')
	run_plugin ADD "$conf"
	expect_result "ADD without a pod UID"
	expect_hints "$PODS/$CID/nccl.conf" "$OUT" "keyed by container ID"
	run_plugin DEL "$(with_prev "$conf" "$OUT")"
	expect_ok "DEL"
	[[ ! -e $PODS/$CID ]] || fail "DEL left $PODS/$CID"
}
scenario "hints keyed by container ID without K8S_POD_UID" hints_by_container

# --- a recreated pod: same UID, new container; the old DEL comes last.
recreated_pod() {
	local conf_a conf_b res_a res_b pod_b=${HPNT_PREFIX}b$SCEN
	mk_nic "$HOST_NS" nic0 peer0
	mk_nic "$HOST_NS" nic1 peer1
	ip netns add "$pod_b"
	conf_a=$(net_conf 1.1.0 '.device = "nic0" | .ifName = "hpn0"')
	conf_b=$(net_conf 1.1.0 '.device = "nic1" | .ifName = "hpn0" | .nccl.env = {NCCL_DEBUG: "WARN"}')
	run_plugin ADD "$conf_a" CNI_ARGS="$ARGS1"
	expect_result "ADD of the first sandbox"
	res_a=$OUT
	run_plugin ADD "$conf_b" CNI_ARGS="$ARGS1" CNI_CONTAINERID="$CID-new" \
		CNI_NETNS="$(ns_path "$pod_b")"
	expect_result "ADD of the recreated sandbox"
	res_b=$OUT
	expect_hints "$PODS/$UID1/nccl.conf" "$res_b" "the new sandbox's file"
	run_plugin DEL "$(with_prev "$conf_a" "$res_a")" CNI_ARGS="$ARGS1"
	expect_ok "late DEL of the first sandbox"
	expect_hints "$PODS/$UID1/nccl.conf" "$res_b" "the new sandbox's file after the old DEL"
	grep -q "^# owner container $CID-new " "$PODS/$UID1/nccl.conf" ||
		fail "the file is not the new sandbox's"
	run_plugin CHECK "$(with_prev "$conf_b" "$res_b")" CNI_ARGS="$ARGS1" \
		CNI_CONTAINERID="$CID-new" CNI_NETNS="$(ns_path "$pod_b")"
	expect_ok "CHECK of the new sandbox"
	run_plugin DEL "$(with_prev "$conf_b" "$res_b")" CNI_ARGS="$ARGS1" \
		CNI_CONTAINERID="$CID-new" CNI_NETNS="$(ns_path "$pod_b")"
	expect_ok "DEL of the new sandbox"
	[[ ! -e $PODS/$UID1 ]] || fail "the last DEL left $PODS/$UID1"
	ip netns del "$pod_b"
}
scenario "recreated pod keeps its new hints file" recreated_pod

# --- podSelector: pass-through, no-op DEL/CHECK; opted-in pods attach.
opt_in() {
	local conf prev res log ann
	mk_nic "$HOST_NS" nic0 peer0
	snap_save "$HOST_NS" "$T/host.before"
	snap_save "$POD_NS" "$T/pod.before"
	log=$T/ipam-$SCEN.log
	ann='"io.kubernetes.cri.pod-annotations"'
	conf=$(net_conf 1.1.0 '.device = "nic0" | .ifName = "hpn0" | .podSelector = {} |
		.ipam = {type: "hpnt-ipam", log: $log, addresses: [{address: "10.84.0.2/24"}]} |
		.prevResult = {cniVersion: "1.1.0",
			interfaces: [{name: "eth0", mac: "02:00:00:00:00:01", sandbox: "/x"}],
			ips: [{address: "10.1.0.5/16", interface: 0}],
			routes: [{dst: "0.0.0.0/0", gw: "10.1.0.1"}],
			dns: {nameservers: ["10.96.0.10"]}}' --arg log "$log")
	for ann in '{}' '{"alibabacloud.com/hpn-type": "tcp"}' '{"other": "rdma"}' none; do
		local c=$conf
		[[ $ann != none ]] &&
			c=$(jq -c --argjson a "$ann" '.runtimeConfig["io.kubernetes.cri.pod-annotations"] = $a' <<<"$conf")
		run_plugin ADD "$c" CNI_ARGS="$ARGS1"
		expect_result "ADD of a pod without the annotation ($ann)"
		jq -e --argjson p "$(jq -c .prevResult <<<"$c")" '. == $p' <<<"$OUT" >/dev/null ||
			fail "pass-through changed prevResult: $OUT"
		run_plugin CHECK "$c" CNI_ARGS="$ARGS1"
		expect_ok "CHECK of a pod not selected ($ann)"
		run_plugin DEL "$c" CNI_ARGS="$ARGS1"
		expect_ok "DEL of a pod not selected ($ann)"
		snap_same "$HOST_NS" "$T/host.before" "host after a pod not selected"
		snap_same "$POD_NS" "$T/pod.before" "pod after a pod not selected"
		expect_no_state "after a pod not selected"
		[[ ! -s $log ]] || fail "IPAM was called for a pod not selected: $(cat "$log")"
	done
	conf=$(jq -c '.runtimeConfig["io.kubernetes.cri.pod-annotations"] =
		{"alibabacloud.com/hpn-type": "rdma"}' <<<"$conf")
	run_plugin ADD "$conf" CNI_ARGS="$ARGS1"
	expect_result "ADD of an opted-in pod"
	res=$OUT
	jq_ok '.interfaces | length == 2' "the opted-in pod's result appends hpn0"
	expect_hints "$PODS/$UID1/nccl.conf" "$res" "opted-in pod"
	prev=$(with_prev "$conf" "$res")
	run_plugin CHECK "$prev" CNI_ARGS="$ARGS1"
	expect_ok "CHECK of the opted-in pod"
	# A DEL that arrives without the annotations still cleans up what ADD did.
	run_plugin DEL "$(jq -c 'del(.runtimeConfig)' <<<"$prev")" CNI_ARGS="$ARGS1"
	expect_ok "DEL without annotations"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	expect_no_state "after DEL"
	ipam_log_balanced "$log" "after DEL"
}
scenario "podSelector: pass-through and opt-in" opt_in

# --- GPU model profiles.
profiles() {
	local conf ann
	mk_nic "$HOST_NS" nic0 peer0
	snap_save "$HOST_NS" "$T/host.before"
	snap_save "$POD_NS" "$T/pod.before"
	conf=$(net_conf 1.1.0 '.device = "nic0" | .ifName = "hpn0"')
	for ann in 'GU8TF 4 7 runs 8-GPU pods only; this pod has 4 GPUs' \
		'P16EN 8 7 P16EN runs 16-GPU pods only' \
		'gpu-hpn 3 7 gpu-hpn runs 1/2/4/8/16-GPU pods only' \
		'GU8TF 8 108 GU8TF needs an RDMA device and none is bound' \
		'gx8sf - 108 GX8SF needs an RDMA device'; do
		read -r model count code msg <<<"$ann"
		run_plugin ADD "$(jq -c --arg m "$model" --arg n "$count" '
			.runtimeConfig["io.kubernetes.cri.pod-annotations"] =
			({"alibabacloud.com/gpu-model-series": $m} +
			 (if $n == "-" then {} else {"alibabacloud.com/gpu-count": $n} end))' <<<"$conf")"
		expect_err "$code" "ADD of a $model pod with $count GPUs" "$msg"
		snap_same "$HOST_NS" "$T/host.before" "host after refused $model"
		snap_same "$POD_NS" "$T/pod.before" "pod after refused $model"
		expect_no_state "after refused $model"
	done
	# The count from config, the model from the annotation; Type 2 disables IB.
	run_plugin ADD "$(jq -c '.nccl.gpuCount = 16 |
		.runtimeConfig["io.kubernetes.cri.pod-annotations"] =
		{"alibabacloud.com/gpu-model-series": "P16EN"}' <<<"$conf")"
	expect_result "ADD of a 16-GPU P16EN pod"
	jq_ok '.nccl.env.NCCL_IB_DISABLE == "1" and .nccl.env.NCCL_IB_HCA == ""' "P16EN disables IB"
	run_plugin DEL "$(with_prev "$conf" "$OUT")"
	expect_ok "DEL"
	# A config profile: its keys, and a model the config names that is not built in.
	run_plugin ADD "$(jq -c '.nccl.profiles = {"L20": {ib: "off", gpuCounts: [2],
		env: {NCCL_NVLS_ENABLE: "0"}}} | .nccl.gpuModel = "L20" | .nccl.gpuCount = 2' <<<"$conf")"
	expect_result "ADD with a config profile"
	jq_ok '.nccl.env.NCCL_NVLS_ENABLE == "0"' "the profile's key"
	expect_hints "$PODS/$CID/nccl.conf" "$OUT" "config profile"
	run_plugin DEL "$(with_prev "$conf" "$OUT")"
	expect_ok "DEL"
	snap_same "$HOST_NS" "$T/host.before" "host at the end"
	expect_no_state "at the end"
}
scenario "GPU model profiles" profiles

# --- hostile keys and a planted symlink.
hostile_keys() {
	local conf uid target
	mk_nic "$HOST_NS" nic0 peer0
	snap_save "$HOST_NS" "$T/host.before"
	snap_save "$POD_NS" "$T/pod.before"
	conf=$(net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0" |
		.ipam = {type: "static", addresses: [{address: "10.85.0.2/24"}]}')
	for uid in '../../etc' 'a/b' '..' '.hidden' "$(printf 'u%.0s' {1..130})"; do
		run_plugin ADD "$conf" CNI_ARGS="K8S_POD_UID=$uid"
		expect_err 4 "ADD with K8S_POD_UID $uid" 'K8S_POD_UID'
		snap_same "$HOST_NS" "$T/host.before" "host after K8S_POD_UID $uid"
		snap_same "$POD_NS" "$T/pod.before" "pod after K8S_POD_UID $uid"
		expect_no_state "after K8S_POD_UID $uid"
	done
	[[ -z $(find "$T" -name nccl.conf) ]] || fail "a hostile UID wrote $(find "$T" -name nccl.conf)"
	# A symlink where the pod's directory goes: not followed, ADD rolled back.
	target=$T/elsewhere-$SCEN
	mkdir -p "$target" "$PODS"
	ln -s "$target" "$PODS/$UID1"
	run_plugin ADD "$conf" CNI_ARGS="$ARGS1"
	expect_err 5 "ADD with the hints directory a symlink" "$UID1"
	[[ -z $(ls -A "$target") ]] || fail "ADD wrote through the symlink: $(ls -A "$target")"
	snap_same "$HOST_NS" "$T/host.before" "host after the symlinked hints dir"
	snap_same "$POD_NS" "$T/pod.before" "pod after the symlinked hints dir"
	rm "$PODS/$UID1"
	rmdir "$target"
	expect_no_state "after the symlinked hints dir"
}
scenario "hostile pod UIDs and a planted symlink" hostile_keys

# --- hints turned off.
hints_off() {
	local conf prev
	mk_nic "$HOST_NS" nic0 peer0
	conf=$(net_conf 1.1.0 '.device = "nic0" | .ifName = "hpn0" | .nccl.enabled = false')
	run_plugin ADD "$conf" CNI_ARGS="$ARGS1"
	expect_result "ADD with nccl.enabled false"
	jq_ok 'has("nccl") | not' "no nccl in the result"
	[[ ! -e $PODS/$UID1 ]] || fail "nccl.enabled false wrote $PODS/$UID1"
	prev=$(with_prev "$conf" "$OUT")
	run_plugin CHECK "$prev" CNI_ARGS="$ARGS1"
	expect_ok "CHECK"
	run_plugin DEL "$prev" CNI_ARGS="$ARGS1"
	expect_ok "DEL"
}
scenario "nccl.enabled false" hints_off

# --- the pod's NICs: a link per NIC, <nccl.dir>/nic/<ID> -> ../<key>,
# which the agent's CDI spec of the NIC mounts the hints through.

# lookup_stub IDS: a stand-in for hpn-rdma-agent's lookup socket (root's, as
# the plugin requires) answering every pod that the kubelet allocated IDS (a
# JSON array, in order); LOOKUP_SOCK names it.
STUB_PID=
lookup_stub() {
	LOOKUP_SOCK=$T/agent-$SCEN.sock
	rm -f "$LOOKUP_SOCK" "$LOOKUP_SOCK.ready"
	/usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/../lookup-stub.py" "$LOOKUP_SOCK" "$1" 2>>"$T/stub.log" &
	STUB_PID=$!
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -e $LOOKUP_SOCK.ready ]] && return 0
		sleep 0.05
	done
	fail "the lookup stand-in did not start: $(cat "$T/stub.log")"
}

stub_stop() {
	[[ -z $STUB_PID ]] || kill "$STUB_PID" 2>/dev/null || true
	[[ -z $STUB_PID ]] || wait "$STUB_PID" 2>/dev/null || true
	STUB_PID=
}

# links: the hints links there now, "NAME->TARGET" sorted, space-separated.
links() {
	local l out=()
	for l in "$PODS"/nic/*; do
		[[ -L $l ]] || continue
		out+=("${l##*/}->$(readlink "$l")")
	done
	echo "${out[*]}"
}

nic_links() {
	local conf prev res j
	trap stub_stop EXIT
	mk_nic "$HOST_NS" nic0 peer0
	mk_nic "$HOST_NS" nic1 peer1
	mk_nic "$HOST_NS" nic2 peer2
	snap_save "$HOST_NS" "$T/host.before"
	snap_save "$POD_NS" "$T/pod.before"
	lookup_stub '["nic1", "nic0"]'
	conf=$(net_conf 1.0.0 '.match = {devices: ["nic*"]} | .ifName = "hpn0" |
		.agent = {socket: $a, timeoutMs: 2000}' --arg a "$LOOKUP_SOCK")

	run_plugin ADD "$conf" CNI_ARGS="$ARGS1"
	expect_result "ADD of the kubelet's nic1 and nic0"
	res=$OUT
	has_link "$HOST_NS" nic2 || fail "nic2, not allocated, left the host"
	j=$(cat "$STATE/$NET"/*)
	jq_ok '.nicSource == "kubelet" and [.nics[].hintsLink] == ["nic1", "nic0"]' \
		"the journal holds each NIC's link" "$j"
	[[ $(links) == "nic0->../$UID1 nic1->../$UID1" ]] ||
		fail "the links after ADD are [$(links)], not nic0 and nic1 to ../$UID1"
	[[ $(stat -c %a "$PODS/nic") == 755 ]] || fail "$PODS/nic is not 0755"
	cmp -s "$PODS/nic/nic0/nccl.conf" "$PODS/$UID1/nccl.conf" ||
		fail "$PODS/nic/nic0/nccl.conf does not resolve to the pod's file"
	prev=$(with_prev "$conf" "$res")
	run_plugin CHECK "$prev" CNI_ARGS="$ARGS1"
	expect_ok "CHECK"
	ln -sfn ../other-pod "$PODS/nic/nic1"
	run_plugin CHECK "$prev" CNI_ARGS="$ARGS1"
	expect_err 107 "CHECK of a link to another pod" 'nic/nic1 leads to ../other-pod'
	rm "$PODS/nic/nic1"
	run_plugin CHECK "$prev" CNI_ARGS="$ARGS1"
	expect_err 107 "CHECK without a link" 'nic/nic1 is missing'
	ln -s "../$UID1" "$PODS/nic/nic1"
	run_plugin CHECK "$prev" CNI_ARGS="$ARGS1"
	expect_ok "CHECK with the link back"

	run_plugin DEL "$prev" CNI_ARGS="$ARGS1"
	expect_ok "DEL"
	[[ -z $(links) ]] || fail "DEL left links: $(links)"
	run_plugin DEL "$prev" CNI_ARGS="$ARGS1"
	expect_ok "DEL again"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	expect_no_state "after DEL"

	# A link another pod's ADD made since (its DEL late): DEL leaves it.
	run_plugin ADD "$conf" CNI_ARGS="$ARGS1"
	expect_result "ADD again"
	prev=$(with_prev "$conf" "$OUT")
	ln -sfn ../other-pod "$PODS/nic/nic0"
	run_plugin DEL "$prev" CNI_ARGS="$ARGS1"
	expect_ok "DEL with nic0's link another pod's"
	[[ $(links) == "nic0->../other-pod" ]] || fail "DEL did not leave the other pod's link: [$(links)]"
	grep -q "hints link $PODS/nic/nic0 leads to another pod's hints now: left" "$T/plugin.log" ||
		fail "DEL did not say it left the link"
	# And an ADD of the NIC's new holder replaces such a stale link.
	run_plugin ADD "$conf" CNI_ARGS="$ARGS1"
	expect_result "ADD over a stale link"
	[[ $(links) == "nic0->../$UID1 nic1->../$UID1" ]] || fail "ADD did not replace the stale link: [$(links)]"
	run_plugin DEL "$(with_prev "$conf" "$OUT")" CNI_ARGS="$ARGS1"
	expect_ok "DEL"
	expect_no_state "after the stale link"

	# A failure after the first link (nic1's): the rollback removes it.
	run_plugin ADD "$conf" CNI_ARGS="$ARGS1" HPN_FAIL_AT=hints-link
	expect_err any "ADD failing after nic1's link"
	[[ -z $(links) ]] || fail "the rollback left links: $(links)"
	snap_same "$HOST_NS" "$T/host.before" "host after the rollback"
	pod_empty "pod after the rollback"
	expect_no_state "after the rollback"
	# The second link's symlinkat failing (strace): the same.
	if command -v strace >/dev/null; then
		# shellcheck disable=SC2054 # commas belong to strace's syntax
		RUN_WRAP=(strace -qq -o "$T/fault.trace" -e trace=symlinkat
			-e inject=symlinkat:error=EIO:when=2)
		run_plugin ADD "$conf" CNI_ARGS="$ARGS1"
		RUN_WRAP=()
		expect_err 5 "ADD whose second symlinkat fails" 'link .*/nic/nic0 to'
		grep -q INJECTED "$T/fault.trace" || fail "no symlinkat was failed: $(cat "$T/fault.trace")"
		[[ -z $(links) ]] || fail "a failed symlinkat left links: $(links)"
		snap_same "$HOST_NS" "$T/host.before" "host after a failed symlinkat"
		expect_no_state "after a failed symlinkat"
	fi
	# Killed after the first link: the journal has it, DEL removes it. A
	# process killed exits with its fds open: run bare (RUN_WRAP), not under
	# memcheck's fd tracking (memcheck.netns-nccl).
	RUN_WRAP=(env)
	run_plugin ADD "$conf" CNI_ARGS="$ARGS1" HPN_FAIL_AT=hints-link HPN_FAIL_KILL=1
	RUN_WRAP=()
	((RC != 0)) || fail "ADD killed after the first link succeeded"
	[[ $(links) == "nic1->../$UID1" ]] || fail "the killed ADD did not leave nic1's link: [$(links)]"
	run_plugin DEL "$conf" CNI_ARGS="$ARGS1"
	expect_ok "DEL after the killed ADD"
	[[ -z $(links) ]] || fail "DEL after a killed ADD left links: $(links)"
	snap_same "$HOST_NS" "$T/host.before" "host after the killed ADD's DEL"
	expect_no_state "after the killed ADD's DEL"

	# Hints off: no file, no link.
	run_plugin ADD "$(jq -c '.nccl.enabled = false' <<<"$conf")" CNI_ARGS="$ARGS1"
	expect_result "ADD with nccl.enabled false"
	jq_ok '[.nics[] | has("hintsLink")] == [false, false]' "no link journalled" "$(cat "$STATE/$NET"/*)"
	[[ -z $(links) ]] || fail "nccl.enabled false made links: $(links)"
	run_plugin DEL "$(jq -c '.nccl.enabled = false' <<<"$conf")" CNI_ARGS="$ARGS1"
	expect_ok "DEL"
	stub_stop

	# The pool's pick (the kubelet allocated nothing): its NIC is linked too
	# (the agent's spec of it exists all the same).
	lookup_stub '[]'
	conf=$(net_conf 1.0.0 '.match = {devices: ["nic*"]} | .ifName = "hpn0" |
		.agent = {socket: $a, timeoutMs: 2000}' --arg a "$LOOKUP_SOCK")
	run_plugin ADD "$conf" CNI_ARGS="$ARGS1"
	expect_result "ADD of a pool NIC"
	jq_ok '.nicSource == "pool" and [.nics[].hintsLink] == ["nic0"]' \
		"a pool NIC: its link journalled" "$(cat "$STATE/$NET"/*)"
	[[ $(links) == "nic0->../$UID1" ]] || fail "the pool's NIC got no link: [$(links)]"
	run_plugin DEL "$(with_prev "$conf" "$OUT")" CNI_ARGS="$ARGS1"
	expect_ok "DEL of the pool NIC"
	[[ -z $(links) ]] || fail "DEL of the pool NIC left links: $(links)"
	stub_stop

	# A macvlan child: its parent serves several pods, so no link leads to one of them.
	conf=$(net_conf 1.0.0 '.mode = "macvlan" | .master = "nic2" | .ifName = "hpn0"')
	run_plugin ADD "$conf" CNI_ARGS="$ARGS1"
	expect_result "ADD of a macvlan child"
	jq_ok '[.nics[] | has("hintsLink")] == [false]' "a child: no link journalled" \
		"$(cat "$STATE/$NET"/*)"
	[[ -z $(links) ]] || fail "a child got a link: $(links)"
	run_plugin DEL "$(with_prev "$conf" "$OUT")" CNI_ARGS="$ARGS1"
	expect_ok "DEL of the child"
	snap_same "$HOST_NS" "$T/host.before" "host at the end"
	snap_same "$POD_NS" "$T/pod.before" "pod at the end"
	expect_no_state "at the end"
}
scenario "hints links of the pod's NICs: made, CHECKed, undone by DEL, rollback and a kill" \
	nic_links

t_done
