#!/usr/bin/env bash
# The DRA flow past Prepare (doc/dra.md, "The CNI's side" and "The claim's
# status"), as root in throwaway namespaces with the fake node of lib.sh, the
# kubelet stand-in hpn-kubelet and the API stand-in of test/kube:
# a claim of two NICs prepared, then CNI ADD by K8S_POD_UID attaches exactly
# those, in the claim's order, and the claim's status gets networkData and
# Ready (the stand-in's file and kubectl agree), cleared by DEL; the agent
# restarted between Prepare and ADD; the API down during ADD and DEL (both
# succeed, the status follows once it is back); the claim deleted under a
# running pod (said once, DEL fine); a pod without a claim (the device
# plugin's allocation and the pool, as before); the claim's spec mounting
# its one pod's NCCL hints (none for a claim of two pods, none with hints off);
# each claim's device metadata file, its networkData after ADD (drameta.sh);
# a NIC shared by two claims of two pods (drashare.sh); the prepared
# devices' health streamed to the kubelet (drahealth.sh).
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# shellcheck source=dralib.sh
source "$(dirname "${BASH_SOURCE[0]}")/dralib.sh"

t_init
agent_require
# kubectl must reach the stand-in, not a proxy; its cache stays in the scratch dir.
unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy ALL_PROXY all_proxy NO_PROXY no_proxy

# ---- helpers ----------------------------------------------------------------------

# api_off, api_on: the API down (its port refusing connections in the
# scenario's host netns, by iptables; without iptables, 503 to every request),
# and back, on the same port the agent's kubeconfig names.
api_off() {
	if command -v iptables >/dev/null &&
		ip netns exec "$HOST_NS" iptables -I INPUT -p tcp --dport "$KUBE_PORT_good" \
			-j REJECT --reject-with tcp-reset 2>/dev/null; then
		API_BLOCKED=1
	else
		info "no iptables: the API down is 503 Service Unavailable"
		echo "status 503" >"$KUBE_WORK/mode"
	fi
}

api_on() {
	if [[ ${API_BLOCKED:-} == 1 ]]; then
		ip netns exec "$HOST_NS" iptables -D INPUT -p tcp --dport "$KUBE_PORT_good" \
			-j REJECT --reject-with tcp-reset || fail "the API's port not unblocked"
	fi
	API_BLOCKED=
	: >"$KUBE_WORK/mode"
}

claim_file() {
	echo "$KUBE_RESOURCES/$1/resourceclaims/$2.json"
}

# unprepare_c1: the kubelet's Unprepare of claim c1, after the pod is gone.
unprepare_c1() {
	"$HPN_KUBELET" dra-unprepare -socket "$(dra_sock)" -version v1 "ml/c1/$UID1" >/dev/null ||
		fail "Unprepare failed"
}

# wait_status NS NAME FILTER WHAT [SECONDS]: the stand-in's claim matches FILTER in time.
wait_status() {
	local f i secs=${5:-15}
	f=$(claim_file "$1" "$2")
	for ((i = 0; i < secs * 10; i++)); do
		jq -e "$3" "$f" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "$4: the claim's status within ${secs}s: $(jq -c .status.devices "$f" 2>&1)
agent log: $(grep 'DRA status' "$T/agent.log" | tail -n 5)"
}

# The pod's addresses of hpn0 and hpn1: what networkData must say.
pod_ips() {
	ip -n "$POD_NS" -j addr show dev "$1" | jq -c '[.[0].addr_info[] | select(.scope == "global")
		| "\(.local)/\(.prefixlen)"]'
}

# The plugin's conf: the pool of lib.sh, an address per NIC from host-local,
# and a sysfs tree of the same PCI functions without the RDMA devices (the
# agent's has them, as Prepare needs; no kernel here could prove fake ones).
flow_conf() {
	if [[ ! -d $T/psys-$SCEN ]]; then
		cp -a "$T/sysfs" "$T/psys-$SCEN"
		find "$T/psys-$SCEN" -depth -name infiniband -exec rm -rf {} +
	fi
	jq -c --arg h "$T/hl-$SCEN" --arg s "$T/psys-$SCEN" '.ipam = {type: "host-local",
		dataDir: $h, ranges: [[{subnet: "10.93.0.0/24"}]]} | .sysfsRoot = $s' <<<"$(agent_net_conf)"
}

# check_status NAME D0 D1 RESULT: the status claim NAME must show for pod
# interfaces hpn0 (device D0) and hpn1 (D1) that the ADD of RESULT made.
check_status() {
	local f ips0 ips1 mac0 mac1
	f=$(claim_file ml "$1")
	mac0=$(mac_of "$POD_NS" hpn0)
	mac1=$(mac_of "$POD_NS" hpn1)
	ips0=$(pod_ips hpn0)
	ips1=$(pod_ips hpn1)
	[[ $ips0 != "[]" && $ips1 != "[]" ]] || fail "the pod's NICs got no addresses: $ips0 $ips1"
	jq_ok '.status.devices | length == 2
		and map([.driver, .pool, .device]) == [[$drv, "node1", $d0], [$drv, "node1", $d1]]
		and map(.networkData) == [
			{interfaceName: "hpn0", ips: $i0, hardwareAddress: $m0},
			{interfaceName: "hpn1", ips: $i1, hardwareAddress: $m1}]
		and all(.[]; (.conditions | length) == 1 and .conditions[0].type == "Ready"
			and .conditions[0].status == "True"
			and (.conditions[0].lastTransitionTime | test("^[0-9-]+T[0-9:]+Z$")))
		and ([.[].conditions[0] | [.reason, .message]] == $rd)' \
		"the claim's status: networkData of hpn0 and hpn1 (name, IPs, MAC of ip link), Ready" \
		"$(cat "$f")" --arg drv "$DRV" --arg d0 "$2" --arg d1 "$3" --argjson i0 "$ips0" \
		--argjson i1 "$ips1" --arg m0 "$mac0" --arg m1 "$mac1" --argjson rd "$(ready_of "$4")"
	jq_ok '[.metadata.managedFields[] | select(.subresource == "status") | .manager] == [$drv]' \
		"the status is the driver's, as field manager" "$(cat "$f")" --arg drv "$DRV"
}

# ready_of RESULT: per pod interface (hpn0, hpn1) the Ready condition's reason
# and message its RDMA entry in the ADD's result calls for.
ready_of() {
	jq -c '. as $r | [range(0; 2) as $k | ("hpn" + ($k | tostring)) as $n
		| ([$r.interfaces | to_entries[] | select(.value.name == $n and .value.sandbox) | .key][0]) as $i
		| ([$r.rdma[]? | select(.interface == $i and .bound)][0]) as $d
		| if $d then ["RDMAProven", "RDMA device \($d.device) port \($d.port // 1) proven at ADD"
			+ (if ($d.gid // "") != "" then ", GID \($d.gid) (index \($d.gidIndex))" else "" end)]
		  else ["NetdevAttached", "\($n) attached; no RDMA device bound"] end]' <<<"$1"
}

# kubectl reads the claim through the stand-in: the same status.
kubectl_claim() {
	local kc=$KUBE_WORK/test.kubeconfig out
	kubeconfig "$kc" "https://127.0.0.1:$KUBE_PORT_good" file "token: dra-agent-token"
	out=$(HOME=$T ip netns exec "$HOST_NS" kubectl --kubeconfig "$kc" --cache-dir "$T/kcache-$SCEN" \
		--request-timeout 10s get resourceclaim -n ml "$1" -o json 2>"$T/kerr") ||
		fail "kubectl get resourceclaim: $(cat "$T/kerr")"
	jq_ok '.kind == "ResourceClaim" and .status.devices == $d' \
		"kubectl: the claim's status as the stand-in holds it" "$out" \
		--argjson d "$(jq -c '.status.devices // null' "$(claim_file ml "$1")")"
}

# flow_up [AGENT FLAGS...]: the API stand-in, the node, the agent with the DRA flags and these.
flow_up() {
	trap 'kill_node; kube_stop' EXIT
	API_BLOCKED=
	dra_api
	AGENT_FLAGS+=("$@")
	node_up
	wait_file "$(dra_sock)" "the DRA plugin socket"
}

# dra_metrics REGEX...: each a whole line of the last scrape (wait_metric's).
dra_metrics() {
	local m
	for m in "$@"; do
		grep -Eq "^$m\$" "$T/scrape" || fail "no '$m' in the metrics:
$(grep '^hpn_rdma_dra' "$T/scrape")"
	done
}

flow_down() {
	node_down
	kube_stop
	unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT
}

# ---- scenarios --------------------------------------------------------------------

# A claim of pool2 then pool0: ADD attaches exactly those, in that order (the
# pool's own order would take pool0, then pool1); pool1 stays on the host.
# The claim's status follows ADD and DEL.
claim_flow() {
	local conf mac0 mac2 n res
	flow_up
	mac0=$(mac_of "$HOST_NS" pool0)
	mac2=$(mac_of "$HOST_NS" pool2)
	mk_claim ml c1 "$UID1" . pci-0000-af-00-2 pci-0000-af-00-0
	OUT=$(prepare -version v1 "ml/c1/$UID1") || fail "Prepare failed"
	jq_ok '.[$u].error == "" and [.[$u].devices[].device] == ["pci-0000-af-00-2", "pci-0000-af-00-0"]' \
		"Prepare of the claim" "$OUT" --arg u "$UID1"
	# Again, as the kubelet may: from the record. The metrics count both, and the registration.
	prepare -version v1beta1 "ml/c1/$UID1" >/dev/null || fail "the second Prepare failed"
	"$HPN_KUBELET" dra-register -dir "$KL" -driver "$DRV" >/dev/null || fail "dra-register failed"
	wait_metric '^hpn_rdma_dra_registered 1$' "the registration in the metrics"
	dra_metrics 'hpn_rdma_dra_prepares_total\{from="api",result="ok"\} 1' \
		'hpn_rdma_dra_prepares_total\{from="record",result="ok"\} 1' \
		'hpn_rdma_dra_prepares_total\{from="api",result="error"\} 0' \
		'hpn_rdma_dra_claims_prepared 1' 'hpn_rdma_dra_unprepares_total 0'
	# The lookup answers the claim's NICs by the pod's UID, in its order, and says so.
	OUT=$(lookup_raw "{\"version\":1,\"namespace\":\"ml\",\"name\":\"trainer\",\"uid\":\"$POD_A\"}")
	jq_ok '.devices == ["0000:af:00.2", "0000:af:00.0"] and .source == "dra" and .claims == ["ml/c1"]
		and .resource == $drv' "the lookup: the claim's NICs, source dra" "$OUT" --arg drv "$DRV"
	snap_save "$HOST_NS" "$T/host.before"
	conf=$(flow_conf)
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_result "ADD of the claim's pod"
	res=$OUT
	[[ $(mac_of "$POD_NS" hpn0) == "$mac2" ]] || fail "hpn0 is not pool2, the claim's first NIC"
	[[ $(mac_of "$POD_NS" hpn1) == "$mac0" ]] || fail "hpn1 is not pool0, the claim's second NIC"
	has_link "$HOST_NS" pool1 || fail "pool1, not in the claim, left the host"
	jq_ok '[.interfaces[] | select(.sandbox) | .name] == ["hpn0","hpn1"]' "two pod interfaces"
	grep -q "NICs of DRA claim ml/c1" "$T/plugin.log" ||
		fail "the plugin did not log the DRA source: $(tail -n 5 "$T/plugin.log")"
	grep -q "CNI lookup for pod ml/trainer: 2 NICs of DRA claim ml/c1" "$T/agent.log" ||
		fail "the agent did not log the DRA answer: $(tail -n 5 "$T/agent.log")"
	wait_status ml c1 '(.status.devices | length) == 2' "after ADD"
	check_status c1 pci-0000-af-00-2 pci-0000-af-00-0 "$res"
	kubectl_claim c1
	# Nothing changed: nothing sent again.
	sleep 1.5
	n=$(grep -c 'resourceclaims/c1/status' "$KUBE_WORK/requests.log")
	touch "$STATE/$NET/x" && rm -f "$STATE/$NET/x"
	sleep 1.5
	[[ $(grep -c 'resourceclaims/c1/status' "$KUBE_WORK/requests.log") == "$n" ]] ||
		fail "an unchanged status was applied again"
	run_plugin DEL "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_ok "DEL"
	# The kubelet's Unprepare at once, before the write that follows DEL: still cleared.
	unprepare_c1
	wait_status ml c1 '.status | has("devices") | not' "after DEL and an immediate Unprepare"
	jq_ok '[.metadata.managedFields[]? | select(.subresource == "status")] == []' \
		"after DEL the driver owns no status field" "$(cat "$(claim_file ml c1)")"
	kubectl_claim c1
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	expect_no_state "after DEL and Unprepare"
	# The status written after ADD and after DEL (and, if the writer saw the
	# journal before the attachment was done, once with no devices), the
	# claim unprepared.
	wait_metric '^hpn_rdma_dra_claims_prepared 0$' "no claim prepared, in the metrics"
	dra_metrics 'hpn_rdma_dra_unprepares_total 1' \
		'hpn_rdma_dra_status_writes_total\{result="applied"\} [23]' \
		'hpn_rdma_dra_status_writes_total\{result="failed"\} 0'
	flow_down
}
run "DRA: ADD attaches exactly the claim's NICs in order; its status follows ADD and DEL" claim_flow

# The agent restarted between Prepare and ADD: the record answers the lookup,
# and the status is written by the new agent.
restart_flow() {
	local conf mac0 mac2 res
	flow_up
	mac0=$(mac_of "$HOST_NS" pool0)
	mac2=$(mac_of "$HOST_NS" pool2)
	mk_claim ml c1 "$UID1" . pci-0000-af-00-2 pci-0000-af-00-0
	prepare -version v1 "ml/c1/$UID1" >/dev/null || fail "Prepare failed"
	stop_agent
	start_agent
	wait_file "$T/agent.sock" "the restarted agent's lookup socket"
	conf=$(flow_conf)
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_result "ADD after the agent's restart"
	res=$OUT
	[[ $(mac_of "$POD_NS" hpn0) == "$mac2" ]] || fail "hpn0 is not pool2, the claim's first NIC"
	[[ $(mac_of "$POD_NS" hpn1) == "$mac0" ]] || fail "hpn1 is not pool0, the claim's second NIC"
	has_link "$HOST_NS" pool1 || fail "pool1, not in the claim, left the host"
	wait_status ml c1 '(.status.devices | length) == 2' "after ADD by the restarted agent"
	check_status c1 pci-0000-af-00-2 pci-0000-af-00-0 "$res"
	run_plugin DEL "$conf"
	expect_ok "DEL"
	wait_status ml c1 '.status | has("devices") | not' "after DEL"
	unprepare_c1
	expect_no_state "after DEL and Unprepare"
	flow_down
}
run "DRA: the agent restarted between Prepare and ADD" restart_flow

# run_hook DEV PID: the claim spec's hook as runc runs it, for the process PID.
run_hook() {
	echo "{\"ociVersion\":\"1.0.2\",\"id\":\"ctr\",\"pid\":$2}" |
		"$HPN_PLUGIN" cdi-hook --state-dir "$STATE" --network "$NET" "$1" 2>"$T/hook.err"
}

# A claim's spec names the hook the NICs' specs name: its container gets the
# claim's devices only in a pod that holds every NIC of it and that the claim
# is reserved for. Without the hook binary: no spec, and Prepare fails the claim.
claim_hook() {
	local conf spec pid_pod pid_host dev=claim-$UID1 uid2=0d6f0e1a-2b3c-4d5e-8f70-112233445566
	flow_up
	mk_claim ml c1 "$UID1" . pci-0000-af-00-2 pci-0000-af-00-0
	OUT=$(prepare -version v1 "ml/c1/$UID1") || fail "Prepare failed"
	jq_ok '.[$u].error == ""' "Prepare of the claim" "$OUT" --arg u "$UID1"
	spec=$(<"$(claim_spec "$UID1")")
	jq_ok '.devices[0].containerEdits.hooks == [{hookName: "createRuntime", path: $p,
		args: ["hpn-rdma", "cdi-hook", "--state-dir", $s, "--network", $n, $d]}]' \
		"the claim's spec names the hook" "$spec" --arg p "$HPN_PLUGIN" --arg s "$STATE" \
		--arg n "$NET" --arg d "$dev"
	# Before ADD no pod holds its NICs: refused.
	ip netns exec "$POD_NS" sleep 60 &
	pid_pod=$!
	sleep 60 &
	pid_host=$!
	! run_hook "$dev" "$pid_pod" || fail "the hook gave the claim's devices before ADD"
	grep -q "is attached to no pod" "$T/hook.err" || fail "the hook's refusal: $(cat "$T/hook.err")"
	conf=$(flow_conf)
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_result "ADD of the claim's pod"
	run_hook "$dev" "$pid_pod" || fail "the hook refused the claim's own pod: $(cat "$T/hook.err")"
	! run_hook "$dev" "$pid_host" || fail "the hook gave the claim's devices to another netns"
	grep -q "is attached to pod ml/trainer, not to this container's pod" "$T/hook.err" ||
		fail "the hook's refusal of another pod: $(cat "$T/hook.err")"
	kill "$pid_pod" "$pid_host" 2>/dev/null || true
	wait "$pid_pod" "$pid_host" 2>/dev/null || true

	# The agent restarted without its hook binary: the claim's spec removed,
	# Prepare (from the record, or of a new claim) fails, naming why.
	stop_agent
	start_agent --cdi-hook "$T/no-such/hpn-rdma"
	wait_file "$T/agent.sock" "the restarted agent's lookup socket"
	wait_file "$(dra_sock)" "the DRA plugin socket"
	[[ ! -e $(claim_spec "$UID1") ]] || fail "the claim's spec stays without the hook binary"
	grep -q "DRA: claim ml/c1: its CDI spec removed: no CDI spec without its createRuntime hook" \
		"$T/agent.log" || fail "the removal not said: $(tail -n 5 "$T/agent.log")"
	OUT=$(prepare -version v1 "ml/c1/$UID1") || fail "Prepare failed"
	jq_ok '.[$u].error | test("no CDI spec without its createRuntime hook \\(--cdi-hook .*/no-such/hpn-rdma: No such file or directory\\)")' \
		"Prepare without the hook binary: the claim's error" "$OUT" --arg u "$UID1"
	jq_ok '.[$u].devices == []' "and no CDI device named" "$OUT" --arg u "$UID1"
	[[ ! -e $(claim_spec "$UID1") ]] || fail "Prepare wrote a spec without the hook"
	mk_claim ml c2 "$uid2" . pci-0000-af-00-1
	OUT=$(prepare -version v1 "ml/c2/$uid2") || fail "Prepare of c2 failed"
	jq_ok '(.[$u].error | test("no CDI spec without its createRuntime hook")) and .[$u].devices == []' \
		"a new claim without the hook binary: refused" "$OUT" --arg u "$uid2"
	[[ ! -e $(claim_spec "$uid2") && ! -e $STATE/dra/$uid2.json ]] ||
		fail "a claim refused for want of the hook left its spec or record"
	run_plugin DEL "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_ok "DEL"
	unprepare_c1
	expect_no_state "after DEL and Unprepare"
	flow_down
}
run "DRA: a claim's spec names the hook; without the hook binary, no spec and no claim prepared" claim_hook

# The pod's NCCL hints with no hostPath in the pod: the spec of a claim
# reserved for one pod mounts that pod's file read-only at nccl.confFile
# (the file its ADD writes before the runtime resolves the spec); a claim
# reserved for two pods mounts nothing, said once; hints off (a reload):
# the specs are written anew without it.
claim_hints() {
	local conf spec pod_b=0d6f0e1a-2b3c-4d5e-8f70-112233445566 uid2=3c2b1a09-8f7e-4d6c-9b5a-a1b2c3d4e5f6
	flow_up
	mk_claim ml c1 "$UID1" . pci-0000-af-00-2
	OUT=$(prepare -version v1 "ml/c1/$UID1") || fail "Prepare failed"
	jq_ok '.[$u].error == ""' "Prepare of the claim" "$OUT" --arg u "$UID1"
	spec=$(<"$(claim_spec "$UID1")")
	jq_ok '.devices[0].containerEdits.mounts | map(select(.containerPath == "/etc/nccl.conf"))
		== [{hostPath: ($p + "/" + $pod + "/nccl.conf"),
		containerPath: "/etc/nccl.conf", options: ["ro", "nosuid", "nodev", "noexec", "bind"],
		type: "bind"}]' "the claim's spec mounts its pod's hints read-only" "$spec" \
		--arg p "$PODS" --arg pod "$POD_A"
	[[ ! -e $PODS/$POD_A/nccl.conf ]] || fail "the hints exist before the pod's ADD"
	conf=$(flow_conf)
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_result "ADD of the claim's pod"
	jq_ok '.nccl.file == $f' "the mount's hostPath is the file ADD wrote" "$OUT" \
		--arg f "$(jq -r '.devices[0].containerEdits.mounts[] | select(.containerPath == "/etc/nccl.conf")
			| .hostPath' <<<"$spec")"
	[[ -f $PODS/$POD_A/nccl.conf ]] || fail "ADD wrote no $PODS/$POD_A/nccl.conf"
	run_plugin DEL "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_ok "DEL"

	# Reserved for two pods: the file is neither's alone; no mount, said once.
	mk_claim ml c2 "$uid2" '.status.reservedFor += [{resource: "pods", name: "second",
		uid: "'"$pod_b"'"}]' pci-0000-af-00-1
	OUT=$(prepare -version v1 "ml/c2/$uid2") || fail "Prepare of c2 failed"
	jq_ok '.[$u].error == ""' "Prepare of the claim of two pods" "$OUT" --arg u "$uid2"
	jq_ok '(.devices[0].containerEdits.mounts | all(.containerPath != "/etc/nccl.conf"))
		and (.devices[0].containerEdits.deviceNodes | length) > 0' \
		"the spec of a claim of two pods mounts no hints" "$(<"$(claim_spec "$uid2")")"
	prepare -version v1beta1 "ml/c2/$uid2" >/dev/null || fail "the second Prepare of c2 failed"
	[[ $(grep -c "DRA: claim ml/c2 is reserved for 2 pods, not one: its CDI spec mounts no NCCL hints" \
		"$T/agent.log") == 1 ]] || fail "the claim of two pods not said exactly once: $(grep c2 "$T/agent.log")"

	# Hints off (a reload): every claim's spec written anew, without the mount.
	write_conflist '.nccl.enabled = false'
	wait_log "DRA: the config's NCCL hints changed (off)" "the reload"
	jq_ok '.devices[0].containerEdits.mounts | all(.containerPath != "/etc/nccl.conf")' \
		"hints off: c1's spec mounts no hints" \
		"$(<"$(claim_spec "$UID1")")"
	unprepare -version v1 "ml/c1/$UID1" "ml/c2/$uid2" >/dev/null || fail "Unprepare failed"
	expect_no_state "after DEL and Unprepare"
	flow_down
}
run "DRA: a claim's spec mounts its one pod's NCCL hints; none for two pods or hints off" claim_hints

# The API down during ADD and DEL: both succeed; the status is written once it is back.
api_down() {
	local conf mac0 res i
	flow_up
	mac0=$(mac_of "$HOST_NS" pool0)
	mk_claim ml c1 "$UID1" . pci-0000-af-00-2 pci-0000-af-00-0
	prepare -version v1 "ml/c1/$UID1" >/dev/null || fail "Prepare failed"
	api_off
	conf=$(flow_conf)
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_result "ADD with the API down"
	res=$OUT
	[[ $(mac_of "$POD_NS" hpn1) == "$mac0" ]] || fail "hpn1 is not pool0, the claim's second NIC"
	has_link "$HOST_NS" pool1 || fail "pool1, not in the claim, left the host"
	# The slices' rounds fail too (each up to 1.5 s), on the same API: within 10 s.
	for ((i = 0; i < 100; i++)); do
		grep -q 'DRA status: claim ml/c1: not written, retried' "$T/agent.log" && break
		sleep 0.1
	done
	grep -q 'DRA status: claim ml/c1: not written, retried' "$T/agent.log" ||
		fail "the failed write was not logged: $(grep 'DRA status' "$T/agent.log" | tail -n 3)"
	jq_ok '.status | has("devices") | not' "no status while the API is down" \
		"$(cat "$(claim_file ml c1)")"
	api_on
	wait_status ml c1 '(.status.devices | length) == 2' "once the API is back" 70
	check_status c1 pci-0000-af-00-2 pci-0000-af-00-0 "$res"
	api_off
	run_plugin DEL "$conf"
	expect_ok "DEL with the API down"
	sleep 2
	jq_ok '(.status.devices | length) == 2' "the status stays while the API is down" \
		"$(cat "$(claim_file ml c1)")"
	api_on
	wait_status ml c1 '.status | has("devices") | not' "cleared once the API is back" 70
	unprepare_c1
	expect_no_state "after DEL and Unprepare"
	flow_down
}
run "DRA: the API down during ADD and DEL; the status follows when it is back" api_down

# The claim deleted from the API under a running pod: said once, DEL fine.
claim_gone() {
	local conf
	flow_up
	mk_claim ml c1 "$UID1" . pci-0000-af-00-1
	prepare -version v1 "ml/c1/$UID1" >/dev/null || fail "Prepare failed"
	conf=$(flow_conf)
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_result "ADD"
	has_link "$HOST_NS" pool1 && fail "pool1, the claim's NIC, is on the host"
	wait_status ml c1 '(.status.devices | length) == 1' "after ADD"
	rm -f "$(claim_file ml c1)"
	run_plugin DEL "$conf"
	expect_ok "DEL of the pod whose claim is gone"
	sleep 2
	unprepare_c1
	expect_no_state "after DEL and Unprepare"
	[[ $(grep -c 'claim ml/c1 is gone from the API (404' "$T/agent.log") == 1 ]] ||
		fail "the claim's 404 not said exactly once: $(grep 'DRA status' "$T/agent.log" | tail -n 3)"
	grep -q 'claim ml/c1: not written, retried' "$T/agent.log" &&
		fail "a 404 was retried as a failure"
	flow_down
}
run "DRA: the claim deleted under a running pod" claim_gone

# A pod without a claim: the device plugin's allocation, then the pool, as before.
no_claim() {
	local conf
	flow_up
	mk_claim ml c1 "$UID1" . pci-0000-af-00-2
	prepare -version v1 "ml/c1/$UID1" >/dev/null || fail "Prepare failed"
	echo '[{"namespace":"ns1","name":"other","containers":[{"name":"main","devices":[
		{"resource":"rdma/hpn","ids":["0000:af:00.1"]}]}]}]' >"$T/pods.json"
	OUT=$(lookup_raw '{"version":1,"namespace":"ns1","name":"other","uid":"ab-12"}')
	jq_ok '.devices == ["0000:af:00.1"] and .resource == "rdma/hpn" and (has("source") | not)' \
		"another pod's lookup: the device plugin's allocation, no source" "$OUT"
	conf=$(flow_conf)
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=other;K8S_POD_UID=ab-12"
	expect_result "ADD of a pod without a claim"
	has_link "$HOST_NS" pool1 && fail "pool1, the device plugin's allocation, is on the host"
	has_link "$HOST_NS" pool2 || fail "pool2 (the other pod's claim) was taken"
	run_plugin DEL "$conf"
	expect_ok "DEL"
	# Nothing allocated at all: the pool's first free NIC.
	echo '[]' >"$T/pods.json"
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=third;K8S_POD_UID=cd-34"
	expect_result "ADD of a pod with nothing allocated"
	has_link "$HOST_NS" pool0 && fail "the pool pick was not pool0, the first free NIC"
	run_plugin DEL "$conf"
	expect_ok "DEL"
	jq_ok '.status | has("devices") | not' "the unattached claim's status stays empty" \
		"$(cat "$(claim_file ml c1)")"
	unprepare_c1
	flow_down
}
run "DRA: a pod without a claim takes the device plugin's allocation, else the pool" no_claim

# A status apply refused (422: said, retried, applied), then one that never
# gets an answer: Unprepare is answered meanwhile (the call waits on the loop,
# not in front of it), and SIGTERM cancels it (exit 0 at once; ASan: no leak).
status_faults() {
	local conf n i
	flow_up
	mk_claim ml c1 "$UID1" . pci-0000-af-00-2 pci-0000-af-00-0
	prepare -version v1 "ml/c1/$UID1" >/dev/null || fail "Prepare failed"
	# The slices written first: the write fault is the status apply's.
	wait_log "published 1 ResourceSlice" "the slices published"
	echo "422 1" >"$KUBE_WORK/mode.write"
	conf=$(flow_conf)
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_result "ADD"
	wait_status ml c1 '(.status.devices | length) == 2' "applied after a 422" 15
	grep -q 'claim ml/c1: not written, retried: .*422' "$T/agent.log" ||
		fail "the 422 not said: $(grep 'DRA status' "$T/agent.log")"
	echo "stall" >"$KUBE_WORK/mode"
	n=$(metric_value hpn_rdma_kube_attempts_total)
	run_plugin DEL "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_ok "DEL"
	for ((i = 0; i < 100; i++)); do
		(($(metric_value hpn_rdma_kube_attempts_total) > n)) && break
		sleep 0.1
	done
	(($(metric_value hpn_rdma_kube_attempts_total) > n)) || fail "no apply after DEL"
	unprepare_c1
	stop_agent
	: >"$KUBE_WORK/mode"
	flow_down
}
run "DRA: a status apply refused, then one unanswered at Unprepare and SIGTERM" status_faults

# Each claim's device metadata in the container (KEP-5304): claim_meta.
# shellcheck source=drameta.sh
source "$(dirname "${BASH_SOURCE[0]}")/drameta.sh"
run "DRA: each claim's device metadata file, mounted read-only, networkData after ADD" claim_meta

# The prepared devices' health to the kubelet: claim_health and its helpers.
# shellcheck source=drahealth.sh
source "$(dirname "${BASH_SOURCE[0]}")/drahealth.sh"

# A NIC shared by two claims of two pods (KEP-5075): claim_share, on drahealth.sh's helpers.
# shellcheck source=drashare.sh
source "$(dirname "${BASH_SOURCE[0]}")/drashare.sh"
run "DRA: a NIC shared by two claims: Prepare, specs, the NIC whole refused, the lookup, ADD, status, health" claim_share

run "DRA: the prepared devices' health streamed to the kubelet, from the health loop's verdicts" claim_health

t_done
