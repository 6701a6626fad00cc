#!/usr/bin/env bash
# hpn-rdma-agent against a kubelet stand-in (hpn-kubelet: real gRPC, see its
# header), as root in throwaway namespaces (test/netns/lib.sh): veth NICs
# behind a fake sysfs tree that gives them PCI addresses, NUMA nodes and RDMA
# devices with character devices. The agent runs in the scenario's host
# netns; the stand-in's sockets live under $T/kl (a kubelet dir of its own).
#
# Scenarios: registration and the devices with their NUMA nodes
# (registration); GetPreferredAllocation (preferred); a NIC removed and put
# back, an RDMA port DOWN and up (health); the kubelet restarted (socket dir
# swept, re-registration: kubelet_restart); the agent restarted (same IDs,
# sockets removed at SIGTERM: agent_restart); the CNI attaching exactly the
# allocated NICs in their order, an allocated NIC already held refused
# (cni_allocated); a pool pick out of the kubelet's hands until DEL (taken);
# the pod's GPUs in the lookup's reply (nvidia.com/gpu IDs
# and gpu.nvidia.com DRA devices, in order, once each; the flags that turn
# them off: gpus); a PodResources List slower than the lookup's budget (the
# CNI told so, the agent serving on: slow_kubelet); no agent -> the pool (and
# agent.required: no_agent). Allocate's specs and the CDI specs are in
# cdi.sh, the DRA driver's kubelet side in dra.sh.
#
# HPN_AGENT_VALGRIND=1 (ctest memcheck.agent) runs the agent under valgrind's
# memcheck for the scenarios in HPN_AGENT_SCENARIOS (space-separated names
# of the functions below; default: all).
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t_init
agent_require

ALL_IDS='["0000:af:00.0","0000:af:00.1","0000:af:00.2","pool3"]'

# ---- scenarios --------------------------------------------------------------------

registration() {
	local mode
	node_up
	jq_ok '.version == "v1beta1" and .resource == "rdma/hpn" and .endpoint == "hpn-rdma.sock"
		and .preferred' "RegisterRequest" "$(jq -c 'select(.event == "register")' "$EV")"
	jq_ok '.preferred and (.preStart | not)' "GetDevicePluginOptions" \
		"$(jq -c 'select(.event == "options")' "$EV")"
	jq_ok '[.[].id] == $ids and all(.health == "Healthy")' \
		"one device per pool NIC, PCI address or name" "$(last_list)" --argjson ids "$ALL_IDS"
	jq_ok '[.[].numa] == [[0],[1],[1],[]]' "TopologyInfo: the NICs' NUMA nodes" "$(last_list)"
	# Root only: the sockets are 0600, the agent's directory 0700.
	mode=$(stat -c %a "$(plugin_sock)")
	[[ $mode == 600 ]] || fail "device plugin socket mode $mode, not 600"
	mode=$(stat -c %a "$T/agent.sock")
	[[ $mode == 600 ]] || fail "lookup socket mode $mode, not 600"
	# Requests are validated like stdin JSON: a path in a pod name, a stranger version.
	for req in '{"version":1,"namespace":"../x","name":"p"}' '{"version":7,"namespace":"a","name":"p"}' \
		'not json'; do
		OUT=$(lookup_raw "$req")
		jq_ok '.version == 1 and (.error | type == "string") and (has("devices") | not)' \
			"the agent refuses the request $req" "$OUT"
	done
	OUT=$(lookup_raw '{"version":1,"namespace":"a","name":"p"}')
	jq_ok '. == {version: 1, resource: "rdma/hpn", podKnown: false, devices: [], gpus: []}' \
		"a pod the kubelet does not list holds nothing"
	node_down
}
run "registration, devices, NUMA topology, socket modes" registration

preferred() {
	local all=0000:af:00.0,0000:af:00.1,0000:af:00.2,pool3 conf
	node_up plain	# an ADD holds a NIC below: no fake RDMA device for its proof
	OUT=$("$HPN_KUBELET" prefer -socket "$(plugin_sock)" -available "$all" -size 2)
	jq_ok '. == ["0000:af:00.1","0000:af:00.2"]' "two NICs: the NUMA node that has two"
	OUT=$("$HPN_KUBELET" prefer -socket "$(plugin_sock)" -available "$all" \
		-must 0000:af:00.2 -size 2)
	jq_ok '. == ["0000:af:00.2","0000:af:00.1"]' "must_include first, then its NUMA node"
	# A journal holds pool1 (0000:af:00.1): a CNI ADD from the pool took it.
	conf=$(agent_net_conf '.agent.lookup = false')
	run_plugin ADD "$(jq -c '.match.devices = ["pool1"]' <<<"$conf")"
	expect_result "ADD holding pool1"
	OUT=$("$HPN_KUBELET" prefer -socket "$(plugin_sock)" \
		-available 0000:af:00.1,0000:af:00.2 -size 1)
	jq_ok '. == ["0000:af:00.2"]' "a NIC a journal holds is not preferred"
	run_plugin DEL "$(jq -c '.match.devices = ["pool1"]' <<<"$conf")"
	expect_ok "DEL"
	node_down
}
run "GetPreferredAllocation: fewest NUMA nodes, must_include first, held NICs last" preferred

health() {
	local state=$T/sysfs/devices/pci0000:ae/0000:ae:00.0/0000:af:00.0/infiniband/mlx5_0/ports/1/state
	node_up
	ip -n "$HOST_NS" link del pool1
	wait_event '.event == "list" and (.devices[1] | .id == "0000:af:00.1" and
		.health == "Unhealthy")' "pool1 removed: Unhealthy"
	jq_ok '[.[].id] == $ids' "the removed NIC keeps its place" "$(last_list)" \
		--argjson ids "$ALL_IDS"
	mk_nic "$HOST_NS" pool1 peer1
	wait_event '.event == "list" and all(.devices[]; .health == "Healthy")' \
		"pool1 back: Healthy"
	echo "1: DOWN" >"$state"
	wait_event '.event == "list" and (.devices[0].health == "Unhealthy")' \
		"mlx5_0 port DOWN: Unhealthy"
	echo "4: ACTIVE" >"$state"
	wait_event '.event == "list" and all(.devices[]; .health == "Healthy")' \
		"mlx5_0 port ACTIVE: Healthy"
	node_down
}
run "a NIC removed and put back, an RDMA port down and up" health

kubelet_restart() {
	node_up
	stop_kubelet
	start_kubelet
	wait_event '.event == "register"' "re-registration after the kubelet restarted" 15
	wait_event '.event == "list"' "ListAndWatch again"
	jq_ok '[.[].id] == $ids' "the same devices" "$(last_list)" --argjson ids "$ALL_IDS"
	[[ -S $(plugin_sock) ]] || fail "no device plugin socket after the kubelet's sweep"
	# A config change is a new pool: registered again, listed anew.
	write_conflist '.match.devices = ["pool0", "pool3"]'
	wait_event '.event == "register"' "re-registration after the pool changed" 15
	wait_event '.event == "list"' "the new pool listed"
	jq_ok '[.[].id] == ["0000:af:00.0","pool3"]' "the new pool's devices" "$(last_list)"
	node_down
}
run "kubelet restart (socket swept, kubelet.sock new) and a pool change" kubelet_restart

agent_restart() {
	local before
	node_up
	before=$(last_list)
	stop_agent
	[[ ! -e $(plugin_sock) && ! -e $T/agent.sock ]] || fail "sockets left at SIGTERM"
	wait_event '.event == "list-end"' "the stream ends with the agent"
	start_agent
	wait_event '.event == "register"' "the restarted agent registers"
	wait_event '.event == "list"' "and lists"
	[[ $(last_list) == "$before" ]] || fail "device list changed across an agent restart:
before $before
after  $(last_list)"
	node_down
}
run "agent restart: same device IDs, sockets removed at SIGTERM" agent_restart

# The kubelet gave pod ns1/trainer pool2 then pool0: the CNI attaches exactly
# those, in that order, though the pool's own order would pick pool0 first.
cni_allocated() {
	local conf mac0 mac2
	node_up plain
	mac0=$(mac_of "$HOST_NS" pool0)
	mac2=$(mac_of "$HOST_NS" pool2)
	echo '[{"namespace":"ns1","name":"trainer","containers":[{"name":"main","devices":[
		{"resource":"nvidia.com/gpu","ids":["GPU-7"]},
		{"resource":"rdma/hpn","ids":["0000:af:00.2","0000:af:00.0"]}]}]}]' >"$T/pods.json"
	snap_save "$HOST_NS" "$T/host.before"
	conf=$(agent_net_conf)
	run_plugin ADD "$conf" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer;K8S_POD_UID=ab-12"
	expect_result "ADD of a pod holding two rdma/hpn devices"
	[[ $(mac_of "$POD_NS" hpn0) == "$mac2" ]] || fail "hpn0 is not pool2, the first allocated"
	[[ $(mac_of "$POD_NS" hpn1) == "$mac0" ]] || fail "hpn1 is not pool0, the second allocated"
	jq_ok '[.interfaces[] | select(.sandbox) | .name] == ["hpn0","hpn1"]' "two pod interfaces"
	grep -q 'CNI lookup for pod ns1/trainer: 2 rdma/hpn devices' "$T/agent.log" ||
		fail "the agent did not answer the lookup: $(tail -5 "$T/agent.log")"

	# Another pod allocated pool0, which the first one holds: refused, nothing taken.
	echo '[{"namespace":"ns1","name":"second","containers":[{"name":"main","devices":[
		{"resource":"rdma/hpn","ids":["0000:af:00.0"]}]}]}]' >"$T/pods.json"
	ip netns add "${HPNT_PREFIX}p$SCEN-b"
	run_plugin ADD "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "${HPNT_PREFIX}p$SCEN-b")" \
		CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=second"
	expect_err 100 "ADD of a pod allocated a held NIC" \
		'allocated rdma/hpn device 0000:af:00.0 to the pod, but attachment .* holds it'
	[[ $(state_count) == 1 ]] || fail "the refused ADD left state"
	has_link "$HOST_NS" pool1 || fail "the refused ADD took another NIC"

	# An allocation naming a NIC the pool does not have: refused too.
	echo '[{"namespace":"ns1","name":"second","containers":[{"name":"main","devices":[
		{"resource":"rdma/hpn","ids":["0000:af:00.7"]}]}]}]' >"$T/pods.json"
	run_plugin ADD "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "${HPNT_PREFIX}p$SCEN-b")" \
		CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=second"
	expect_err 100 "ADD of a pod allocated an unknown NIC" 'no free-standing NIC of the pool'

	# A pod without devices of the resource: the pool as today (pool1, name order).
	echo '[]' >"$T/pods.json"
	run_plugin ADD "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "${HPNT_PREFIX}p$SCEN-b")" \
		CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=second"
	expect_result "ADD of a pod without an allocation"
	has_link "$HOST_NS" pool1 && fail "the pool pick was not pool1, the first free NIC"
	run_plugin DEL "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "${HPNT_PREFIX}p$SCEN-b")"
	expect_ok "DEL of the second pod"
	ip netns del "${HPNT_PREFIX}p$SCEN-b"
	run_plugin DEL "$conf"
	expect_ok "DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after both DELs"
	expect_no_state "after both DELs"
	node_down
}
run "the CNI attaches exactly the allocated NICs in order; a held NIC refused" cni_allocated

# The NIC ledger (issue 40): a pod selected by its label or annotation that
# the kubelet allocated nothing takes NICs from the pool, which no scheduler
# saw; from then on they are not the kubelet's to give: Unhealthy in
# ListAndWatch with the reason, Allocate refused (FAILED_PRECONDITION,
# naming the pod), until DEL gives them back. A pod the kubelet allocated
# keeps its NICs Healthy (the kubelet's own allocation). The journals say
# who chose: nicSource pool, kubelet.
taken() {
	local conf sel kube err
	node_up plain
	conf=$(agent_net_conf)
	echo '[{"namespace":"ns1","name":"trainer","containers":[{"name":"main","devices":[
		{"resource":"rdma/hpn","ids":["0000:af:00.2"]}]}]}]' >"$T/pods.json"
	run_plugin ADD "$conf" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer;K8S_POD_UID=ab-12"
	expect_result "ADD of the kubelet's pod (0000:af:00.2)"
	ip netns add "${HPNT_PREFIX}p$SCEN-b"
	run_plugin ADD "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "${HPNT_PREFIX}p$SCEN-b")" \
		CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=selected;K8S_POD_UID=cd-34"
	expect_result "ADD of a selected pod the kubelet allocated nothing: a pool pick"
	has_link "$HOST_NS" pool0 && fail "the pool pick was not pool0, the first free NIC"
	sel=$(jq -c 'select(.pod.name == "selected")' $(state_files | grep -v '/lock$'))
	kube=$(jq -c 'select(.pod.name == "trainer")' $(state_files | grep -v '/lock$'))
	jq_ok '.nicSource == "pool"' "the selected pod's journal: its NICs from the pool" "$sel"
	jq_ok '.nicSource == "kubelet"' "the kubelet's pod's journal: its NICs the kubelet's" "$kube"
	# ListAndWatch: the pool pick Unhealthy, the kubelet's allocation Healthy.
	wait_event '.event == "list" and any(.devices[]; .id == "0000:af:00.0" and .health == "Unhealthy")' \
		"the pool pick leaves the kubelet's view"
	jq_ok 'map({(.id): .health}) | add == {"0000:af:00.0": "Unhealthy", "0000:af:00.1": "Healthy",
		"0000:af:00.2": "Healthy", "pool3": "Healthy"}' \
		"only the pool pick is out of the kubelet's hands" "$(last_list)"
	grep -q 'device 0000:af:00.0 ("pool0") is out of the kubelet.s hands: pod ns1/selected took it from the pool' \
		"$T/agent.log" || fail "the agent did not say why pool0 is Unhealthy: $(tail -n 5 "$T/agent.log")"
	# A kubelet that allocates it anyway (raced the list): refused, naming the pod.
	if "$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.0 2>"$T/err"; then
		fail "Allocate of a NIC a selected pod took from the pool succeeded"
	fi
	err=$(<"$T/err")
	[[ $err == *"device 0000:af:00.0 is held by pod ns1/selected, which took it from the pool"* &&
		$err == *FailedPrecondition* ]] || fail "Allocate's refusal: $err"
	"$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.1 >/dev/null ||
		fail "Allocate of a free NIC failed beside the taken one"
	# Released: the kubelet's again.
	run_plugin DEL "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "${HPNT_PREFIX}p$SCEN-b")"
	expect_ok "DEL of the selected pod"
	ip netns del "${HPNT_PREFIX}p$SCEN-b"
	wait_event '.event == "list" and all(.devices[]; .health == "Healthy")' \
		"the pool pick back in the kubelet's hands"
	"$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.0 >/dev/null ||
		fail "Allocate of pool0 after DEL failed: $(tail -n 3 "$T/agent.log")"
	run_plugin DEL "$conf"
	expect_ok "DEL of the kubelet's pod"
	expect_no_state "after both DELs"
	node_down
}
run "the NIC ledger: a pool pick leaves the kubelet's view until DEL; Allocate refuses it" taken

# The pod's GPUs, as the CNI's lookup answers them: the IDs of nvidia.com/gpu
# (UUIDs, a time-sliced replica "::1") and the devices of its claims whose
# driver is gpu.nvidia.com, per container in PodResources' order, each once;
# another driver's devices and other resources are not GPUs; IDs that are no
# GPU ID are skipped with one warning per lookup.
GPU_A=GPU-2f6b1c1e-8a3d-4c55-9e0f-7d1a2b3c4d5e
GPU_B=GPU-9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d
GPU_C=GPU-0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f
gpu_pods() {
	jq -cn --arg a "$GPU_A" --arg b "$GPU_B" --arg c "$GPU_C" '[{namespace: "ns1", name: "trainer",
		containers: [
		{name: "main", devices: [
			{resource: "nvidia.com/gpu", ids: [$a, ($b + "::1")]},
			{resource: "rdma/hpn", ids: ["0000:af:00.2"]},
			{resource: "example.com/fpga", ids: ["fpga-0"]}],
		 dynamic: [
			{claim: "gpus", namespace: "ns1", driver: "gpu.nvidia.com", pool: "node-a",
			 device: "gpu-3", cdi: ["k8s.gpu.nvidia.com/gpu=gpu-3"]},
			{claim: "nics", namespace: "ns1", driver: "rdma.example.com", pool: "node-a",
			 device: "nic-0", cdi: []}]},
		{name: "side", devices: [
			{resource: "nvidia.com/gpu", ids: [$a, $c, "GPU with spaces", ("G" * 120)]},
			{resource: "rdma/hpn", ids: ["0000:af:00.0"]}],
		 dynamic: [
			{claim: "gpus", namespace: "ns1", driver: "gpu.nvidia.com", pool: "node-a",
			 device: "gpu-3"},
			{claim: "more", namespace: "ns1", driver: "gpu.nvidia.com", pool: "node-a",
			 device: "gpu-5"}]}]}]' >"$T/pods.json"
}

gpus() {
	local req='{"version":1,"namespace":"ns1","name":"trainer"}' n
	node_up plain
	gpu_pods
	OUT=$(lookup_raw "$req")
	jq_ok '.podKnown and .devices == ["0000:af:00.2", "0000:af:00.0"]' \
		"the NICs of the resource, as before" "$OUT"
	jq_ok '.gpus == [$a, ($b + "::1"), "gpu-3", $c, "gpu-5"]' \
		"the GPUs: device plugin IDs and gpu.nvidia.com claims, in order, once each" "$OUT" \
		--arg a "$GPU_A" --arg b "$GPU_B" --arg c "$GPU_C"
	grep -q 'CNI lookup for pod ns1/trainer: 2 rdma/hpn devices, 5 GPUs' "$T/agent.log" ||
		fail "the agent's log does not count the GPUs: $(tail -5 "$T/agent.log")"
	n=$(grep -c 'pod ns1/trainer: 2 GPU IDs skipped, not of a GPU ID.s syntax (the first: "GPU?with?spaces")' \
		"$T/agent.log")
	[[ $n == 1 ]] || fail "the bad GPU IDs were warned about $n times in one lookup, not once: $(tail -5 "$T/agent.log")"
	OUT=$(lookup_raw "$req")
	n=$(grep -c 'GPU IDs skipped' "$T/agent.log")
	[[ $n == 2 ]] || fail "two lookups warned $n times, not once each"
	# A pod without GPUs has none.
	OUT=$(lookup_raw '{"version":1,"namespace":"ns1","name":"other"}')
	jq_ok '.gpus == [] and .podKnown == false' "a pod the kubelet does not list: no GPUs" "$OUT"
	stop_agent

	# --gpu-resource '': the device plugin's GPUs are not counted, the claims' are.
	start_agent --gpu-resource ''
	wait_event '.event == "list"' "the agent with --gpu-resource ''" 20
	OUT=$(lookup_raw "$req")
	jq_ok '.devices == ["0000:af:00.2", "0000:af:00.0"] and .gpus == ["gpu-3", "gpu-5"]' \
		"--gpu-resource '': only the DRA devices" "$OUT"
	stop_agent
	# Both off: no GPUs at all; another resource and another driver as the GPUs'.
	start_agent --gpu-resource '' --gpu-driver ''
	wait_event '.event == "list"' "the agent with no GPU sources" 20
	OUT=$(lookup_raw "$req")
	jq_ok '.gpus == [] and (.devices | length) == 2' "both flags empty: no GPUs" "$OUT"
	stop_agent
	start_agent --gpu-resource example.com/fpga,nvidia.com/gpu --gpu-driver rdma.example.com
	wait_event '.event == "list"' "the agent with other GPU sources" 20
	OUT=$(lookup_raw "$req")
	jq_ok '.gpus == [$a, ($b + "::1"), "fpga-0", "nic-0", $c]' \
		"a comma list of resources, another driver" "$OUT" \
		--arg a "$GPU_A" --arg b "$GPU_B" --arg c "$GPU_C"
	node_down
	# Flags that are not names: refused before anything starts.
	for bad in '--gpu-resource nogpu' '--gpu-resource nvidia.com/gpu,a/b/c' \
		'--gpu-driver Gpu_Nvidia' '--gpu-driver .gpu.nvidia.com'; do
		# shellcheck disable=SC2086 # the flag and its value, split on purpose
		if "$HPN_AGENT" --config "$T/net.conflist" $bad 2>"$T/err"; then
			fail "the agent took $bad"
		fi
		grep -q 'gpu-' "$T/err" || fail "the refusal of $bad does not name the flag: $(cat "$T/err")"
	done
	"$HPN_AGENT" --help | grep -- '--gpu-resource NAMES' >/dev/null || fail "--help does not show --gpu-resource"
}
run "the pod's GPUs in the lookup: nvidia.com/gpu IDs and gpu.nvidia.com claims, in order, once" gpus

# A kubelet whose PodResources List is slower than the lookup's budget
# (400 ms): the CNI gets an error reply at once, saying so, ADD fails with
# code 11 (retried by the runtime) and changes nothing; the agent serves on.
slow_kubelet() {
	local req='{"version":1,"namespace":"ns1","name":"trainer"}' t0 ms conf i
	local -a pids=()
	node_up plain
	echo '[{"namespace":"ns1","name":"trainer","containers":[{"name":"main","devices":[
		{"resource":"rdma/hpn","ids":["0000:af:00.2"]}]}]}]' >"$T/pods.json"
	stop_kubelet
	start_kubelet -podres-delay 3s
	wait_event '.event == "register"' "the slow kubelet: re-registration" 15
	t0=$(date +%s%N)
	OUT=$(lookup_raw "$req")
	ms=$((($(date +%s%N) - t0) / 1000000))
	jq_ok '.version == 1 and (.error | test("PodResources List at .*: no answer within 400 ms"))
		and (has("devices") | not)' "a slow List: the lookup's error reply says so" "$OUT"
	((ms < 2500)) || fail "the error reply took $ms ms: the agent waited for the slow List"
	# The kubelet answers late, to a caller long gone: nothing of it reaches the agent's state.
	wait_event '.event == "podresources-list"' "the slow List's late answer" 10
	conf=$(agent_net_conf)
	run_plugin ADD "$conf" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer"
	expect_err 11 "ADD while the kubelet is slow" 'no answer within 400 ms'
	pod_empty "pod after the refused ADD"
	expect_no_state "after the refused ADD"
	# Several at once, while every List is slow: each answered, none left hanging.
	for i in 1 2 3 4; do
		lookup_raw "$req" >"$T/slow-$i.json" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do
		wait "$i" || fail "a concurrent lookup got no reply"
	done
	for i in 1 2 3 4; do
		jq_ok '.error | test("no answer within")' "concurrent lookup $i" "$(cat "$T/slow-$i.json")"
	done
	kill -0 "$AGENT_PID" 2>/dev/null || fail "the agent died under slow Lists"
	# The kubelet fast again: answered as before.
	stop_kubelet
	start_kubelet
	wait_event '.event == "register"' "the kubelet again: re-registration" 15
	OUT=$(lookup_raw "$req")
	jq_ok '.devices == ["0000:af:00.2"] and (has("error") | not)' \
		"after the slow kubelet, the lookup answers" "$OUT"
	node_down
}
run "a PodResources List slower than the lookup's budget: an error reply, the agent serves on" slow_kubelet

no_agent() {
	local conf
	KL=$T/kl-$SCEN
	EV=$T/events-$SCEN.jsonl
	mk_node plain
	conf=$(agent_net_conf)
	run_plugin ADD "$conf" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer"
	expect_result "ADD without an agent: from the pool"
	has_link "$HOST_NS" pool0 && fail "the pool's first NIC was not taken"
	run_plugin DEL "$conf"
	expect_ok "DEL"
	run_plugin ADD "$(jq -c '.agent.required = true' <<<"$conf")" \
		CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer"
	expect_err 11 "ADD without an agent, agent.required" \
		'agent.required is true: hpn-rdma-agent is not answering'
	pod_empty "pod after the refused ADD"
	expect_no_state "after the refused ADD"
}
run "no agent: the pool; agent.required makes it an error" no_agent

t_done
