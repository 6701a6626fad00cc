#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq and Python programs are single-quoted on purpose
# runtime tier: hpn-rdma-agent --nri as containerd's own NRI plugin (issue 39),
# containerd 1.7 (NRI turned on in its config) and 2.1 (on by default), the
# socket in the node's scratch dir (node.sh, RTN_NRI). 1.6 has no NRI: the
# test is not registered for it, and skips if run there by hand.
#
# The pods are the managed service's shape: the seed Deployment's labels
# (alibabacloud.com/hpn-type: rdma, the GPU model GU8TF), read by the plugin
# from the API stand-in (test/kube) as on the label-selected node
# (conf/20-hpn-rdma-gpu.conflist), and nothing else in the CRI configs: no
# device, no mount, no env, not privileged. What containerd hands runc is
# read from the bundle (the config.json the runc shim passes, kept by the
# wrapper below) and from inside the running container, through
# /proc/PID/root and /proc/PID/limits (the pause image has no tools).
#
# Scenarios, on one node per version, each from a registered agent:
#  1. an attached pod's container: exactly its own RDMA device nodes (path,
#     c, the fake tree's numbers) with one allow rule each (rw: containerd
#     1.7 and 2.1 write one per device NRI adds, from its file mode, and
#     leave out the rules the agent sends), its hints file read-only at
#     /etc/nccl.conf, RLIMIT_MEMLOCK unlimited in the spec; in the container
#     the nodes exist (runc made them), the file is the pod's, read-only,
#     the device cgroup (v1) has the rules; without this machine's limit
#     lowered, runc refuses to start it;
#  2. two attached pods at once: each container has its own devices and
#     none of the other's; a pod not selected (no label) is untouched;
#  3. a container mounting its own /etc/nccl.conf keeps it; with its NIC's
#     CDI device the spec's hints mount replaces it (CDI's rule) and NRI adds
#     none; devices given already (CDI, and the device plugin's DeviceSpecs)
#     are not added twice; an RDMA device the host shows no verbs node of is
#     said;
#  4. the agent killed and started again between the sandbox and its
#     container: the container still gets its devices (the journals decide);
#  5. containerd restarted: the agent connects and registers again (metrics),
#     the next container is adjusted, an earlier one is not called bare;
#  6. NRI down (no agent): the container starts unadjusted (the runtime's
#     behaviour); the agent, once connected, reports it from Synchronize: a
#     warning naming it, hpn_rdma_nri_unadjusted_containers 1, and (its
#     health loop on) the pod's attachment broken for it (verdict 0, reason
#     container, naming it) while CHECK finds the attachment whole; once
#     the runtime removes the container (RemoveContainer), the gauge is 0
#     and the verdict 1 at once, before the health loop's next period (the
#     NIC Unhealthy to the kubelet meanwhile, Healthy again);
#  7. NRI down with nri.required: ADD refuses the sandbox (11) and nothing is
#     left on the node; with the agent registered it attaches;
#  8. NRI turned off in containerd's config (1.7's default; containerd
#     restarted on it): the agent cannot connect and says so, nri.required
#     refuses the sandbox (11), nothing left; NRI on again, it attaches.
#
# What stands in for what:
#  - RDMA: the node has none. The agent reads a fake sysfs tree (mlx5_K
#    serving rnicK, uverbsK 231:192+K, rdma_cm 10:250); the plugin reads the
#    real /sys, where rnicK is a veth with no RDMA device (rdmaRequired
#    false: its verbs proof in the pod cannot pass on this kernel), so its
#    journal names none. After RunPodSandbox the test writes into the pod's
#    journal the RDMA device ADD binds on a node with RDMA (rdma {name:
#    mlx5_K, netdev: rnicK, moved: false}, shared mode: nothing to undo at
#    DEL), atomically, as ADD writes it: the journal is what the agent reads.
#  - runc: root here lacks CAP_SYS_RESOURCE, so runc cannot raise
#    RLIMIT_MEMLOCK above this machine's hard limit (8 MiB) and refuses to
#    start a container whose spec asks for unlimited ("error setting rlimit
#    type 8: operation not permitted"; scenario 1 shows it). The runc shim
#    runs a wrapper (runc_wrap) that keeps containerd's config.json as it
#    came, then lowers that one limit to what this machine allows, so the
#    container runs and the rest can be seen inside; the spec is checked
#    as containerd wrote it. With CAP_SYS_RESOURCE the wrapper changes
#    nothing and the container's limit must be unlimited.

[[ ${HPN_CTRD:-1.6} != 1.6 ]] || {
	echo "SKIP: containerd 1.6 has no NRI (1.7 and 2.x have)"
	exit 77
}
# shellcheck disable=SC2034 # node.sh reads them
RTN_NRI=1 RTN_RUNC_WRAP=runc_wrap
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=../kube/lib.sh
source "$(dirname "$0")/../kube/lib.sh"

MPORT=19469
UNLIMITED=18446744073709551615 # RLIM_INFINITY, as the OCI spec carries it
SEED_FIXTURE=$HPN_SRC/test/fixtures/pods/default/seed-gu8tf-7d9c5b8f4-x2kqp.json
S=
KUBE_WORK=

[[ -x ${HPN_AGENT:-} ]] || skip "hpn-rdma-agent was not built (${HPN_AGENT:-HPN_AGENT unset})"
for t in curl openssl python3; do
	command -v $t >/dev/null || skip "$t is not installed (scripts/install-deps.sh)"
done

# The node and the agent; the pods and what their specs show.
# shellcheck source=nri-node.sh
source "$(dirname "$0")/nri-node.sh"
# shellcheck source=nri-pods.sh
source "$(dirname "$0")/nri-pods.sh"

# ---- the scenarios ---------------------------------------------------------------------

# 1. The seed pod, attached; its container; then the same container without
# this machine's limit lowered: runc refuses it, so the limit reaches runc.
seed_adjusted() {
	local m line
	agent_fresh
	seed_pod seed-a
	HINTS_FILE=$(hints_of seed-a)
	[[ -s $HINTS_FILE ]] || fail "ADD wrote no hints file for seed-a"
	m=$(log_mark)
	ctr main "$POD" seed-a
	line=$(wait_log "$m" 'NRI: container main of pod hpnr/seed-a:' "CreateContainer's adjustment")
	[[ $line == *": 2 device nodes added (0 there already), hints /etc/nccl.conf, RLIMIT_MEMLOCK raised" ]] ||
		fail "the agent's account of the adjustment: $line"
	adjusted "$CTR" "$K" "seed-a/main"
	wait_metric hpn_rdma_nri_containers_adjusted_total 1 "one container adjusted"
	wait_metric hpn_rdma_nri_containers_untouched_total 0 "no container untouched"
	info "seed-a/main (rnic$K): $(spec_view "$CTR" | jq -c '{devices: [.devices[] | "\(.path) \(.major):\(.minor)"], memlock}')"
	local main=$CTR
	if may_raise_limits; then
		info "this machine may raise RLIMIT_MEMLOCK (CAP_SYS_RESOURCE): no refusal to show"
	else
		: >"$RTN_DIR/runc.as-is"
		jq -n --arg img "$RTN_IMAGE" '{metadata: {name: "as-is", attempt: 0},
			image: {image: $img}, command: ["/pause"], logPath: "as-is/0.log"}' \
			>"$T/pods/seed-a.as-is.json"
		CTR=$(cri create "$POD" "$T/pods/seed-a.as-is.json" "$T/pods/seed-a.json") ||
			fail "CreateContainer as-is failed"
		if cri start "$CTR" 2>"$T/create.err"; then
			rm -f "$RTN_DIR/runc.as-is"
			fail "runc started a container with RLIMIT_MEMLOCK unlimited without CAP_SYS_RESOURCE"
		fi
		rm -f "$RTN_DIR/runc.as-is"
		grep -q 'error setting rlimit type 8: operation not permitted' "$T/create.err" ||
			fail "the as-is container failed otherwise: $(<"$T/create.err")"
		jq_ok '.memlock == [[$u, $u]]' "the refused container's spec" "$(spec_view "$CTR")" \
			--arg u "$UNLIMITED"
		info "as containerd asks, on this machine: $(grep -o 'error setting rlimit.*' "$T/create.err" | head -n 1)"
		cri rm "$CTR" >/dev/null || fail "RemoveContainer as-is failed"
	fi
	gone "$main"
	stop_remove "$POD"
}

# 2. Two attached pods at once, and one not selected.
two_pods_and_plain() {
	local a ka b kb ca cb plain cp m line
	agent_fresh
	seed_pod seed-a
	a=$POD ka=$K
	seed_pod seed-b
	b=$POD kb=$K
	((ka != kb)) || fail "two pods on one NIC (rnic$ka)"
	ctr main "$b" seed-b
	cb=$CTR
	HINTS_FILE=$(hints_of seed-b) adjusted "$cb" "$kb" "seed-b/main"
	ctr main "$a" seed-a
	ca=$CTR
	HINTS_FILE=$(hints_of seed-a) adjusted "$ca" "$ka" "seed-a/main beside seed-b"
	[[ ! -e /proc/$PID/root/dev/infiniband/uverbs$kb ]] || fail "seed-a's container has seed-b's uverbs$kb"
	wait_metric hpn_rdma_nri_containers_adjusted_total 2 "two containers adjusted"

	# Not selected: the label is not there; ADD passes through, NRI leaves it alone.
	api_pod plain '{"app": "plain"}'
	plain=$(runp plain)
	[[ ! -e $STATE/$NET/$plain.eth0 ]] || fail "hpn-rdma attached the pod that is not selected"
	m=$(log_mark)
	ctr main "$plain" plain
	cp=$CTR
	wait_metric hpn_rdma_nri_containers_untouched_total 1 "the plain pod's container untouched"
	untouched "$cp" "plain/main"
	[[ -z $(ls "/proc/$PID/root/dev/infiniband" 2>/dev/null) ]] || fail "plain/main has /dev/infiniband"
	[[ ! -e /proc/$PID/root/etc/nccl.conf ]] || fail "plain/main has an /etc/nccl.conf"
	[[ $(memlock_of "$PID") == "$(memlock_of "$(rtn_ctrd_pid)")" ]] ||
		fail "plain/main's RLIMIT_MEMLOCK is not containerd's: $(memlock_of "$PID")"
	if line=$(tail -n "+$((m + 1))" "$T/agent.log" | grep -m 1 'NRI: container main of pod hpnr/plain'); then
		fail "the agent adjusted the plain pod: $line"
	fi
	wait_metric hpn_rdma_nri_containers_adjusted_total 2 "still two containers adjusted"
	gone "$cp" "$cb" "$ca"
	stop_remove "$plain"
	stop_remove "$b"
	stop_remove "$a"
}

# 3. What the container has already stays as it is.
its_own() {
	local view m line cdi dp mine
	agent_fresh
	seed_pod seed-a
	echo "NCCL_DEBUG=INFO" >"$T/own-nccl.conf"
	# Its own /etc/nccl.conf: kept, NRI adds no hints over it.
	m=$(log_mark)
	ctr mine "$POD" seed-a '.mounts = [{containerPath: "/etc/nccl.conf", hostPath: $f,
		readonly: true}]' --arg f "$T/own-nccl.conf"
	mine=$CTR
	line=$(wait_log "$m" 'NRI: container mine of pod hpnr/seed-a:' "CreateContainer's adjustment")
	[[ $line == *": 2 device nodes added (0 there already), hints (mounted there already), RLIMIT_MEMLOCK raised" ]] ||
		fail "the agent's account of container mine: $line"
	jq_ok '.nccl | length == 1 and .[0].source == $f' "mine: its own /etc/nccl.conf, alone" \
		"$(spec_view "$mine")" --arg f "$T/own-nccl.conf"
	[[ $(<"/proc/$PID/root/etc/nccl.conf") == NCCL_DEBUG=INFO ]] ||
		fail "mine: /etc/nccl.conf inside is not its own file"
	# Its own /etc/nccl.conf, and its NIC's CDI device (the device plugin's
	# Allocate names it; the agent's spec gives uverbsK and rdma_cm, and the
	# pod's hints through the link its ADD made, which replace the mount at
	# that path: CDI's rule; NRI, shown the spec after CDI, adds none).
	cdi="alibabacloud.com/hpn-rdma=rnic$K"
	[[ -f $RTN_CDI_DIR/alibabacloud.com-hpn-rdma_rnic$K.json ]] ||
		fail "the agent keeps no CDI spec of rnic$K in $RTN_CDI_DIR"
	m=$(log_mark)
	ctr own "$POD" seed-a '.mounts = [{containerPath: "/etc/nccl.conf", hostPath: $f,
		readonly: true}] | .CDI_devices = [{name: $c}]' --arg f "$T/own-nccl.conf" --arg c "$cdi"
	line=$(wait_log "$m" 'NRI: container own of pod hpnr/seed-a:' "CreateContainer's adjustment")
	[[ $line == *": 0 device nodes added (2 there already), hints (mounted there already), RLIMIT_MEMLOCK raised" ]] ||
		fail "the agent's account of container own: $line"
	view=$(spec_view "$CTR")
	jq_ok '(.devices | map(.path)) == ["/dev/infiniband/uverbs\($k)", "/dev/infiniband/rdma_cm"] and
		(.rules | map(.[0:2]) | sort) == ([[231, 192 + $k], [10, 250]] | sort)' \
		"own: CDI's two device nodes and rules, each once" "$view" --argjson k "$K"
	jq_ok '.nccl | length == 1 and .[0].source == $f and .[0].options == ["ro", "nosuid", "nodev",
		"noexec", "bind"]' "own: the CDI device's hints mount, alone" \
		"$view" --arg f "$HINTS/nic/rnic$K/nccl.conf"
	jq_ok '.memlock == [[$u, $u]]' "own: RLIMIT_MEMLOCK unlimited" "$view" --arg u "$UNLIMITED"
	[[ $(<"/proc/$PID/root/etc/nccl.conf") == "$(<"$(hints_of seed-a)")" ]] ||
		fail "own: /etc/nccl.conf inside is not its pod's hints"
	local own=$CTR
	# The device plugin's DeviceSpecs (a kubelet without CDI): uverbsK only; NRI adds rdma_cm.
	m=$(log_mark)
	ctr dp "$POD" seed-a '.devices = [{containerPath: $c, hostPath: $h, permissions: "rw"}]' \
		--arg c "/dev/infiniband/uverbs$K" --arg h "$T/dev/infiniband/uverbs$K"
	dp=$CTR
	line=$(wait_log "$m" 'NRI: container dp of pod hpnr/seed-a:' "CreateContainer's adjustment")
	[[ $line == *": 1 device nodes added (1 there already), hints /etc/nccl.conf, RLIMIT_MEMLOCK raised" ]] ||
		fail "the agent's account of container dp: $line"
	view=$(spec_view "$dp")
	jq_ok '(.devices | map(.path) | sort) == (["/dev/infiniband/uverbs\($k)", "/dev/infiniband/rdma_cm"] | sort) and
		(.rules | map(.[0:2]) | sort) == ([[231, 192 + $k], [10, 250]] | sort)' \
		"dp: uverbs$K once (the kubelet's) and rdma_cm (NRI's), one rule each" "$view" --argjson k "$K"
	# A device the host does not show (exclusive RDMA netns mode takes it
	# into the pod; ib_uverbs not loaded): said, never a silent "0 added".
	local j=$STATE/$NET/$POD.eth0 none
	jq -c '.nics[0].rdma.name = "mlx5_9"' "$j" >"$T/journal.new"
	mv "$T/journal.new" "$j"
	m=$(log_mark)
	ctr none "$POD" seed-a
	none=$CTR
	line=$(wait_log "$m" 'NRI: container none of pod hpnr/seed-a' "the device the host does not show")
	[[ $line == *"no character device of RDMA device mlx5_9"* ]] ||
		fail "the agent did not say that mlx5_9 has no character device: $line"
	jq_ok '.devices == [] and (.nccl | length == 1) and (.memlock | length == 1)' 		"none: no device node; the hints and memlock still" "$(spec_view "$none")"
	gone "$none" "$dp" "$own" "$mine"
	stop_remove "$POD"
}

# 4. The agent killed after the sandbox, started again before its container.
agent_restarted() {
	local m
	agent_up
	seed_pod seed-a
	HINTS_FILE=$(hints_of seed-a)
	agent_stop KILL
	m=$(log_mark)
	agent_up
	ctr main "$POD" seed-a
	wait_log "$m" 'NRI: container main of pod hpnr/seed-a: 2 device nodes added' \
		"the restarted agent's adjustment" >/dev/null
	adjusted "$CTR" "$K" "seed-a/main after the agent's restart"
	gone "$CTR"
	stop_remove "$POD"
}

# 5. containerd stopped and started again under the agent.
containerd_restarted() {
	local m c before line
	agent_fresh
	wait_metric hpn_rdma_nri_connects_total 1 "a fresh agent's one connection"
	seed_pod seed-a
	HINTS_FILE=$(hints_of seed-a)
	# A container adjusted before: it lives on, and the new link's
	# Synchronize must not call it bare.
	ctr before "$POD" seed-a
	before=$CTR
	m=$(log_mark)
	rtn_containerd_stop TERM
	wait_log "$m" 'NRI: link to .* closed' "the agent seeing containerd go" >/dev/null
	wait_metric hpn_rdma_nri_registered 0 "the link down"
	rtn_containerd_start
	rtn_wait_network "$NET"
	wait_log "$m" 'NRI: registered as' "the agent's registration with the new containerd" >/dev/null
	wait_metric hpn_rdma_nri_registered 1 "registered again"
	wait_metric hpn_rdma_nri_connects_total 2 "one connection more"
	ctr main "$POD" seed-a
	adjusted "$CTR" "$K" "seed-a/main after containerd's restart"
	# Synchronize came before this CreateContainer (the runtime synchronizes
	# a plugin before it hands it events): its report, if any, is logged.
	if line=$(tail -n "+$((m + 1))" "$T/agent.log" | grep -m 1 'runs without'); then
		fail "Synchronize called the adjusted container bare: $line"
	fi
	wait_metric hpn_rdma_nri_unadjusted_containers 0 "no bare container after the restart"
	c=$(tail -n "+$((m + 1))" "$T/agent.log" | grep -c 'NRI: cannot connect') || true
	info "containerd restarted: connects 1 -> 2; 'cannot connect' said $c times meanwhile"
	gone "$CTR" "$before"
	stop_remove "$POD"
}

# 6. No agent: the runtime starts the container as it is; the agent, once
# connected, finds it in Synchronize and says so: log, gauge, and the
# attachment's verdict. Its health loop's period is longer than the
# scenario: the first look (1 s after start) is its one CHECK, so the
# verdict's return to 1 can only come from RemoveContainer.
nri_down() {
	local m line key id12 c0 pod='pod="seed-a"'
	agent_up
	agent_stop TERM
	seed_pod seed-a
	key=$POD.eth0
	ctr main "$POD" seed-a
	id12=${CTR:0:12}
	untouched "$CTR" "seed-a/main started with NRI down"
	[[ -z $(ls "/proc/$PID/root/dev/infiniband" 2>/dev/null) ]] ||
		fail "the container started with NRI down has /dev/infiniband"
	m=$(log_mark)
	AGENT_HEALTH_S=120 agent_up
	line=$(wait_log "$m" 'NRI: container main \([0-9a-f]{12}\) of attached pod hpnr/seed-a runs without' \
		"Synchronize's report")
	[[ $line == *"without 2 of its 2 RDMA device nodes: it started while the NRI link was down; restart it" &&
		$line == *"($id12)"* ]] || fail "Synchronize's report: $line"
	wait_metric hpn_rdma_nri_unadjusted_containers 1 "the bare container counted"
	info "Synchronize: ${line#*warn: }"
	# The verdict: broken for the container, while CHECK itself finds it whole.
	wait_metric hpn_rdma_health_checks_total 1 "the health loop's first CHECK"
	[[ $(sample hpn_rdma_health_checks_total 'result="healthy"') == 1 ]] ||
		fail "CHECK did not find seed-a's attachment whole: $(scrape | grep '^hpn_rdma_health_checks_total')"
	wait_sample hpn_rdma_attachment_healthy "$pod" 0 "seed-a's attachment, with a bare container"
	wait_sample hpn_rdma_attachment_broken "$pod" 1 "seed-a's attachment broken"
	[[ $(sample hpn_rdma_attachment_broken 'reason="container"') == 1 ]] ||
		fail "seed-a's attachment is broken for another reason: $(scrape | grep '^hpn_rdma_attachment_broken')"
	line=$(wait_log "$m" "health: attachment $key \\(pod hpnr/seed-a\\) is broken" "the health loop's report")
	[[ $line == *" is broken (container): container main ($id12) started without its RDMA device nodes while the NRI link was down: restart it" ]] ||
		fail "the health loop's report: $line"
	info "health: ${line#*health: }"
	# Its NIC, as the device plugin shows it to the kubelet.
	wait_sample hpn_rdma_device_healthy "nic=\"rnic$K\"" 0 "rnic$K of the broken attachment"
	# The container removed: the gauge and the verdict follow at once.
	c0=$(sample hpn_rdma_health_checks_total 'result="healthy"')
	m=$(log_mark)
	gone "$CTR"
	line=$(wait_log "$m" "NRI: container main \\($id12\\), which ran without its RDMA device nodes, is removed" \
		"RemoveContainer's StateChange")
	wait_metric hpn_rdma_nri_unadjusted_containers 0 "the bare container removed"
	wait_sample hpn_rdma_attachment_healthy "$pod" 1 "seed-a's attachment, its bare container removed"
	wait_sample hpn_rdma_attachment_broken "$pod" "" "seed-a's attachment no longer broken"
	wait_sample hpn_rdma_device_healthy "nic=\"rnic$K\"" 1 "rnic$K, its attachment whole again"
	wait_log "$m" "health: attachment $key \\(pod hpnr/seed-a\\) is whole again" "the health loop's account" >/dev/null
	[[ $(sample hpn_rdma_health_checks_total 'result="healthy"') == "$c0" ]] ||
		fail "the health loop checked again (the verdict must come from RemoveContainer)"
	info "RemoveContainer: ${line#*info: }; unadjusted 0, seed-a's verdict 1, rnic$K Healthy, CHECKs still $c0"
	stop_remove "$POD"
}

# 7. nri.required: with the link down, ADD refuses the seed pod (code 11, the
# kubelet's cue to try the sandbox again) before anything on the node
# changes; with the agent registered, the same pod attaches and its
# container is adjusted.
nri_required() {
	local add msg
	trap 'rtn_conflist "$(<"$T/net.conflist")"' EXIT
	jq -c '.plugins |= map(if .type == "hpn-rdma" then .nri = {required: true} else . end)' \
		"$T/net.conflist" >"$T/required.conflist"
	rtn_conflist "$(<"$T/required.conflist")"
	conflist_loaded '"nri":{"required":true}'
	agent_up
	agent_stop TERM
	api_pod seed-a "$SEED_LABELS"
	try_runp seed-a
	((RC != 0)) || fail "RunPodSandbox of seed-a succeeded with nri.required and no agent"
	add=$(rt_calls "" | jq -c '[.[] | select(.cmd == "ADD")]')
	jq_ok 'length == 1 and (.[0] | .rc == 1 and .out.code == 11 and
		(.out.msg | test("nri.required is true, but no hpn-rdma-agent answers")))' \
		"ADD refused with 11, saying the NRI link is down" "$add"
	msg=$(jq -r '.[0].out.msg' <<<"$add")
	[[ $ERR == *"$msg"* ]] || fail "RunPodSandbox's error does not carry the plugin's: $ERR"
	info "refused: $msg"
	node_as_before "after the refused sandbox"
	agent_up
	POD=$(runp seed-a)
	K=$(bind_rdma "$POD")
	HINTS_FILE=$(hints_of seed-a)
	ctr main "$POD" seed-a
	adjusted "$CTR" "$K" "seed-a/main with nri.required and the link up"
	gone "$CTR"
	stop_remove "$POD"
}

# 8. NRI turned off in containerd's config (1.7's default): the agent
# cannot connect and says so; with nri.required ADD refuses the seed pod
# (11) and nothing is left; NRI on again, a new agent registers and the pod
# attaches with its container adjusted. (Without nri.required the container
# would start bare, as in scenario 6, and no agent could ever report it.)
nri_disabled() {
	local m add
	trap 'rtn_conflist "$(<"$T/net.conflist")"' EXIT
	agent_up
	m=$(log_mark)
	nri_switch off
	wait_log "$m" 'NRI: link to .* closed' "the agent seeing containerd go" >/dev/null
	wait_log "$m" 'NRI: cannot connect' "the agent saying it cannot connect" >/dev/null
	wait_metric hpn_rdma_nri_registered 0 "the link down with NRI off"
	[[ ! -S $RTN_NRI_SOCK ]] || ! rtn_in python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' "$RTN_NRI_SOCK" 2>/dev/null ||
		fail "containerd with NRI off still serves $RTN_NRI_SOCK"
	jq -c '.plugins |= map(if .type == "hpn-rdma" then .nri = {required: true} else . end)' \
		"$T/net.conflist" >"$T/required.conflist"
	rtn_conflist "$(<"$T/required.conflist")"
	conflist_loaded '"nri":{"required":true}'
	api_pod seed-a "$SEED_LABELS"
	try_runp seed-a
	((RC != 0)) || fail "RunPodSandbox of seed-a succeeded with nri.required and NRI off"
	add=$(rt_calls "" | jq -c '[.[] | select(.cmd == "ADD")]')
	jq_ok 'length == 1 and (.[0] | .rc == 1 and .out.code == 11 and
		(.out.msg | test("NRI link")))' "ADD refused with 11, saying the NRI link is down" "$add"
	info "NRI off: $(jq -r '.[0].out.msg' <<<"$add")"
	node_as_before "after the sandbox refused with NRI off"
	nri_switch on
	agent_fresh
	POD=$(runp seed-a)
	K=$(bind_rdma "$POD")
	HINTS_FILE=$(hints_of seed-a)
	ctr main "$POD" seed-a
	adjusted "$CTR" "$K" "seed-a/main with NRI on again"
	gone "$CTR"
	stop_remove "$POD"
}

scenario "1: the seed's pod, attached: its container's devices, rules, hints and memlock" seed_adjusted
scenario "2: two attached pods each get their own devices; a pod not selected is untouched" \
	two_pods_and_plain
scenario "3: its own /etc/nccl.conf kept (a CDI device's hints replace it); devices not added twice" its_own
scenario "4: the agent restarted between the sandbox and its container" agent_restarted
scenario "5: containerd restarted: the agent registers again, the next container is adjusted" \
	containerd_restarted
scenario "6: NRI down: the container starts bare; reported (log, gauge, verdict) until removed" nri_down
scenario "7: nri.required, NRI down: the sandbox refused (11), nothing left; attached once it is up" \
	nri_required
scenario "8: NRI off in containerd's config: nri.required refuses the sandbox (11); on again, adjusted" \
	nri_disabled
agent_stop TERM
# Every agent of the run wrote here, each stopped by SIGTERM or SIGKILL: in
# a sanitizer build a finding (LeakSanitizer at a clean exit) is a failure.
! grep -E -m 3 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$T/agent.log" ||
	fail "the agent's log has sanitizer findings"
rt_done
