#!/usr/bin/env bash
# GPU-aware NIC choice through the whole chain (doc/gpu.md): the kubelet
# stand-in's PodResources lists a pod's GPUs (nvidia.com/gpu device IDs, DRA
# devices of gpu.nvidia.com), hpn-rdma-agent answers the CNI's lookup with
# them, and ADD places them on the fake sysfs and procfs of an HGX H100-class
# node (test/fixtures/gpu-nodes/hgx-h100: four switches, each with two GPUs
# and two NICs) whose eight rail NICs are veths in the scenario's host netns.
#
# Scenarios: one NIC per GPU, each behind its GPU's switch, named in the
# GPUs' PCI order, said in the result, the hints and the journal; a second
# pod on the same switch (contention); a third with no near NIC left,
# refused (gpus.far "refuse") with nothing changed, or given the nearest
# (allow); unknown GPUs; the kubelet's far allocation attached and reported;
# the GPU count from PodResources against the model's profile; GPUs in the
# claim the scheduler made for nvidia.com/gpu (KEP-5004), the pod's status
# read from the API stand-in (test/kube) by the agent's pod cache, given the
# NICs the device plugin's same GPUs get.
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=dralib.sh
source "$(dirname "${BASH_SOURCE[0]}")/dralib.sh"

t_init
agent_require

FIX=$HPN_SRC/test/fixtures/gpu-nodes
# hgx-h100.tree's GPUs: 0 and 1 share switch 1 (ens1np0, ens2np0), 2 and 3
# switch 2 (ens3np0, ens4np0), on socket 0; 4 and 5 switch 3 (ens5np0,
# ens6np0) on socket 1.
U0=GPU-3f0a9c52-7d1e-4b8a-a6c2-19e5d0b47f01 # 0000:04:00.0, minor 0
U1=GPU-c81d2e47-0b39-4f6c-8e15-6a3b7c90d212 # 0000:05:00.0, minor 1
U5=GPU-e71f3a96-4b08-4d2e-8c5a-b09d62f1e756 # 0000:85:00.0, minor 5

# mk_node: the eight rail NICs as veths, the node's sysfs and procfs (replaces lib.sh's).
# mk_node erdma: vm-erdma instead, its ENIs eth1 and eth2 veths of the tree's
# MACs at MTU 8500 (the eRDMA MTU of GPU pods), their eRDMA devices kept.
mk_node() {
	local i
	rm -rf "$T/node"
	if [[ ${1:-} == erdma ]]; then
		"$FIX/mknode.sh" vm-erdma "$T/node" || fail "mknode.sh vm-erdma"
		for i in 1 2; do
			mk_nic "$HOST_NS" "eth$i" "peer$i" "$(cat "$T/node/sys/class/net/eth$i/address")"
			ip -n "$HOST_NS" link set "eth$i" mtu 8500
		done
		return 0
	fi
	"$FIX/mknode.sh" hgx-h100 "$T/node" || fail "mknode.sh hgx-h100"
	# Plain NICs: no fake RDMA device for ADD to bind (the proof is the vm tier's).
	rm -rf "$T/node/sys/class/infiniband"
	find "$T/node/sys/devices" -depth -type d -name infiniband -exec rm -rf {} +
	for i in 1 2 3 4 5 6 7 8; do
		mk_nic "$HOST_NS" "ens${i}np0" "peer$i"
	done
}

# The network: the rails "ens*" of the node, each pod's GPUs from the agent.
NODE_CONF=".match = {devices: [\"ens*\"]} | .sysfsRoot = \"$T/node/sys\" |
	.gpus = {nicPerGpu: true, far: \"refuse\", procRoot: \"$T/node/proc\"}"
conf_with() {
	agent_net_conf "$NODE_CONF | ${1:-.}"
}
write_conflist() {
	conf_with >"$T/net.conflist.tmp"
	jq -c '{cniVersion, name, plugins: [del(.cniVersion, .name)]}' "$T/net.conflist.tmp" \
		>"$T/net.conflist"
}

# pods JSON: POD GPU-ID... as one container's nvidia.com/gpu devices.
pod_gpus() {
	local name=$1
	shift
	jq -cn --arg n "$name" '[{namespace: "ns1", name: $n, containers: [{name: "main",
		devices: [{resource: "nvidia.com/gpu", ids: $ARGS.positional}]}]}]' --args "$@"
}

# add_pod NAME CONF: ADD of pod ns1/NAME in a netns of its own (container ID $CID-NAME).
add_pod() {
	ip netns list | grep -qw "${HPNT_PREFIX}p$SCEN-$1" || ip netns add "${HPNT_PREFIX}p$SCEN-$1"
	run_plugin ADD "$2" CNI_CONTAINERID="$CID-$1" \
		CNI_NETNS="$(ns_path "${HPNT_PREFIX}p$SCEN-$1")" \
		CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=$1;K8S_POD_UID=uid-$1"
}

del_pod() {
	run_plugin DEL "$2" CNI_CONTAINERID="$CID-$1" \
		CNI_NETNS="$(ns_path "${HPNT_PREFIX}p$SCEN-$1")" \
		CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=$1;K8S_POD_UID=uid-$1"
	expect_ok "DEL of pod $1"
	ip netns del "${HPNT_PREFIX}p$SCEN-$1"
}

# in_pod POD IFNAME NIC: the pod's IFNAME is host NIC NIC (by the MAC it had there).
in_pod() {
	[[ $(mac_of "${HPNT_PREFIX}p$SCEN-$1" "$2") == "${MACS[$3]}" ]] ||
		fail "pod $1's $2 is not $3"
}

declare -A MACS
save_macs() {
	local i
	for i in 1 2 3 4 5 6 7 8; do
		MACS[ens${i}np0]=$(mac_of "$HOST_NS" "ens${i}np0")
	done
}

# ---- scenarios --------------------------------------------------------------------

per_gpu() {
	local conf hints
	node_up plain
	save_macs
	snap_save "$HOST_NS" "$T/host.before"
	conf=$(conf_with)

	# GPUs 5 and 0, in the kubelet's order: a NIC each, named in PCI order.
	pod_gpus a "$U5" "$U0" >"$T/pods.json"
	add_pod a "$conf"
	expect_result "ADD of a pod with GPUs 5 and 0"
	in_pod a hpn0 ens1np0
	in_pod a hpn1 ens5np0
	jq_ok '[.rdma[] | .gpu | [.pciID, .id, .distance, (.far // false)]] ==
		[["0000:04:00.0", $u0, "PIX", false], ["0000:85:00.0", $u5, "PIX", false]]' \
		"each NIC's GPU in the result" "$OUT" --arg u0 "$U0" --arg u5 "$U5"
	hints=$PODS/uid-a/nccl.conf
	grep -qx "# gpu hpn0 0000:04:00.0 $U0 PIX" "$hints" || fail "hints: hpn0's GPU: $(cat "$hints")"
	grep -qx "# gpu hpn1 0000:85:00.0 $U5 PIX" "$hints" || fail "hints: hpn1's GPU: $(cat "$hints")"
	jq_ok '[.nics[].gpu | [.pci, .distance, .best]] ==
		[["0000:04:00.0", "PIX", "PIX"], ["0000:85:00.0", "PIX", "PIX"]]' "the journal's GPUs" \
		"$(cat "$(state_files | head -n1)")"
	grep -q 'for GPU 0000:85:00.0 at PIX' "$T/plugin.log" || fail "the log names hpn1's GPU"

	# GPU 1 (DRA's name for it), on GPU 0's switch: the switch's other NIC.
	jq -c --arg u1 "$U1" '[{namespace: "ns1", name: "b", containers: [{name: "main",
		dynamic: [{claim: "gpus", namespace: "ns1", driver: "gpu.nvidia.com",
		pool: "node1", device: "gpu-1"}]}]}]' -n >"$T/pods.json"
	add_pod b "$conf"
	expect_result "ADD of a pod with GPU 1 as a DRA device"
	in_pod b hpn0 ens2np0
	jq_ok '.rdma[0].gpu.pciID == "0000:05:00.0" and .rdma[0].gpu.distance == "PIX"' \
		"pod b's GPU, placed by its minor"

	# GPU 1 again (a replica): switch 1 is used up; the nearest free is PHB.
	pod_gpus c "$U1::3" >"$T/pods.json"
	add_pod c "$conf"
	expect_err 100 "ADD with no free NIC near GPU 1 (refuse)" \
		'GPU 0000:05:00.0 .* has no free NIC within PXB of it: NIC "ens3np0" is PHB .*refuse'
	[[ $(state_count) == 2 ]] || fail "the refused ADD left state"
	has_link "$HOST_NS" ens3np0 || fail "the refused ADD took ens3np0"
	add_pod c "$(conf_with '.gpus.far = "allow"')"
	expect_result "ADD with no free NIC near GPU 1 (allow)"
	in_pod c hpn0 ens3np0
	jq_ok '.rdma[0].gpu.distance == "PHB" and (.rdma[0].gpu.far | not)' \
		"a far NIC, the nearest free: not flagged"
	grep -q 'has no free NIC within PXB' <<<"$ERR$(cat "$T/plugin.log")" ||
		fail "the far pick was not said"

	del_pod c "$conf"
	del_pod b "$conf"
	del_pod a "$conf"
	snap_same "$HOST_NS" "$T/host.before" "host after the DELs"
	expect_no_state "after the DELs"
	node_down
}
run "a NIC per GPU behind its switch, in PCI order; contention; refuse and allow" per_gpu

unknown_gpus() {
	local conf
	node_up plain
	save_macs
	conf=$(conf_with)
	# A MIG device of today's form: no procfs maps it to its GPU.
	pod_gpus a "MIG-0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f" >"$T/pods.json"
	add_pod a "$conf"
	expect_err 100 "ADD with an unknown GPU (refuse)" \
		'GPU MIG-0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f of the pod is not under .*/proc/driver/nvidia/gpus'
	expect_no_state "after the refused ADD"
	add_pod a "$(conf_with '.gpus.far = "allow"')"
	expect_result "ADD with an unknown GPU (allow)"
	in_pod a hpn0 ens1np0
	jq_ok '.rdma[0].gpu.distance == "unknown" and (.rdma[0].gpu | has("pciID") | not)' \
		"an unknown GPU's NIC"
	del_pod a "$conf"
	# Without GPUs in PodResources: count, in name order, as before.
	echo '[]' >"$T/pods.json"
	add_pod z "$conf"
	expect_result "ADD of a pod without GPUs"
	in_pod z hpn0 ens1np0
	jq_ok '.rdma[0] | has("gpu") | not' "no GPU said for a pod without GPUs"
	del_pod z "$conf"
	expect_no_state "after the DELs"
	node_down
}
run "unknown GPUs: refused or taken, said either way; no GPUs: as before" unknown_gpus

kubelet_far() {
	local conf
	node_up plain
	save_macs
	conf=$(conf_with)
	# The kubelet gave GPU 0's pod socket 1's NIC: attached as given, reported.
	jq -cn --arg u0 "$U0" '[{namespace: "ns1", name: "a", containers: [{name: "main",
		devices: [{resource: "nvidia.com/gpu", ids: [$u0]},
			  {resource: "rdma/hpn", ids: ["0000:86:00.0"]}]}]}]' >"$T/pods.json"
	add_pod a "$conf"
	expect_result "ADD of the kubelet's far allocation"
	in_pod a hpn0 ens5np0
	jq_ok '.rdma[0].gpu.distance == "SYS" and .rdma[0].gpu.far' "the kubelet's far NIC, flagged"
	grep -q "the kubelet's choice" <<<"$ERR$(cat "$T/plugin.log")" || fail "the far allocation was not said"
	del_pod a "$conf"

	# No GPU count anywhere else: PodResources' two GPUs against GU8TF's 8.
	pod_gpus b "$U0" "$U1" >"$T/pods.json"
	add_pod b "$(conf_with '.nccl.gpuModel = "GU8TF"')"
	expect_err 7 "a 2-GPU pod of an 8-GPU model" 'runs 8-GPU pods only; this pod has 2 GPUs'
	expect_no_state "after the refused ADD"
	ip netns del "${HPNT_PREFIX}p$SCEN-b"
	node_down
}
run "the kubelet's far allocation reported; the GPU count from PodResources" kubelet_far

# ---- GPUs the scheduler claimed (KEP-5004) ----------------------------------------

# A node without NVIDIA's device plugin on Kubernetes 1.34+: the pod asks
# nvidia.com/gpu: 2, the scheduler allocates two GPUs of a DeviceClass whose
# extendedResourceName is nvidia.com/gpu in a claim it makes, names it in
# the pod's status.extendedResourceClaimStatus, and the kubelet lists it
# under dynamic_resources (the stand-in's "extended"). The driver is not
# --gpu-driver: the claim makes its devices GPUs. XDRV stands for a cloud's
# own GPU DRA driver, which names its devices as NVIDIA's does.
XDRV=gpu.example-cloud.com
XCLAIM=x-extended-resources-7kq2d

# sched_api: the API stand-in (dralib.sh's, without the DRA driver) holding
# pod ns1/x with the scheduler's claim in its status, and the agent's flags
# to watch it (the pod cache).
sched_api() {
	dra_api
	mkdir -p "$KUBE_WORK/pods/ns1"
	jq -n --arg c "$XCLAIM" '{kind: "Pod", apiVersion: "v1",
		metadata: {namespace: "ns1", name: "x", uid: "uid-x"},
		spec: {nodeName: "node1", containers: [{name: "main", image: "busybox",
			resources: {limits: {"nvidia.com/gpu": "2"}}}]},
		status: {extendedResourceClaimStatus: {resourceClaimName: $c,
			requestMappings: [{containerName: "main", resourceName: "nvidia.com/gpu",
				requestName: "container-0-request-0"}]}}}' >"$KUBE_WORK/pods/ns1/x.json"
	AGENT_FLAGS=(--cri-socket none --node-name node1 --kubeconfig "$KUBE_WORK/agent.kubeconfig"
		--service-account "$KUBE_WORK/sa")
}

# picks POD: what ADD gave pod POD, without the GPUs' IDs (the two sources
# name them differently): each hpnN's host NIC, then per NIC of the result its
# GPU's PCI address, class and far flag, then the journal's address, class
# and best class.
picks() {
	local i nic n=
	for i in 0 1 2; do
		ip -n "${HPNT_PREFIX}p$SCEN-$1" link show "hpn$i" >/dev/null 2>&1 || break
		for nic in "${!MACS[@]}"; do
			[[ $(mac_of "${HPNT_PREFIX}p$SCEN-$1" "hpn$i") == "${MACS[$nic]}" ]] && n+="hpn$i=$nic "
		done
	done
	echo "$n"
	jq -c '[.rdma[] | .gpu | [.pciID, .distance, (.far // false)]]' <<<"$OUT"
	jq -c '[.nics[].gpu | [.pci, .distance, .best]]' "$(state_files | head -n1)"
}

sched_claim() {
	local conf plugin scheduler
	if ! command -v openssl >/dev/null; then
		echo "skipped: openssl is not installed (the API stand-in's certificates)"
		return 0
	fi
	sched_api
	node_up plain
	wait_log "pod cache: 1 pods of node node1 listed" "the pod cache's first list"
	save_macs
	conf=$(conf_with)

	# The device plugin's GPUs 5 and 0, in the kubelet's order.
	pod_gpus d "$U5" "$U0" >"$T/pods.json"
	add_pod d "$conf"
	expect_result "ADD of the device plugin's GPUs 5 and 0"
	plugin=$(picks d)
	del_pod d "$conf"

	# The same GPUs in the scheduler's claim, in the same order, beside a
	# claim of the container's own of another driver (not GPUs).
	jq -cn --arg c "$XCLAIM" --arg drv "$XDRV" '[{namespace: "ns1", name: "x",
		containers: [{name: "main", dynamic: [{claim: "x-scratch", namespace: "ns1",
			driver: "fpga.example.com", pool: "node1", device: "gpu-1"}]}],
		extended: {claim: $c, containers: ["main"], devices: [
			{driver: $drv, pool: "node1", device: "gpu-5", cdi: ["k8s.gpu.example-cloud.com/gpu=gpu-5"]},
			{driver: $drv, pool: "node1", device: "gpu-0", cdi: ["k8s.gpu.example-cloud.com/gpu=gpu-0"]}]}}]' \
		>"$T/pods.json"
	: >"$T/plugin.log"
	add_pod x "$conf"
	expect_result "ADD of the scheduler's claim of GPUs 5 and 0"
	scheduler=$(picks x)
	[[ $scheduler == "$plugin" ]] || fail "the scheduler's claim's NICs are not the device plugin's:
device plugin: $plugin
claim:         $scheduler"
	[[ $(head -n1 <<<"$scheduler") == "hpn0=ens1np0 hpn1=ens5np0 " ]] ||
		fail "the NICs are not GPU 0's and GPU 5's switches': $scheduler"
	jq_ok '[.rdma[].gpu.id] == ["gpu-0", "gpu-5"]' "the claim's GPUs, by their device names"
	grep -q 'for GPU 0000:85:00.0 at PIX' "$T/plugin.log" || fail "the log names hpn1's GPU"
	del_pod x "$conf"
	expect_no_state "after the DELs"
	node_down
	kube_stop
	unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT
	AGENT_FLAGS=(--cri-socket none)
}
run "GPUs the scheduler claimed for nvidia.com/gpu: the device plugin's NICs, order and classes" sched_claim

# vm-erdma: each ENI's virtio-net function is SYS to every GPU; its eRDMA
# function is PHB to the four GPUs of its host bridge. The pool places a NIC
# where NCCL does, by its RDMA device's function: GPU 5's pod gets eth2 (PHB),
# GPU 0's eth1, both within near = PHB; the ENIs' own places would have made
# both SYS and refused them. The proof that follows fails here (a fake
# device), and ADD rolls back.
erdma_pool() {
	local conf
	local NODE_CONF=".match = {devices: [\"eth*\"]} | .sysfsRoot = \"$T/node/sys\" |
		.gpus = {nicPerGpu: true, far: \"refuse\", near: \"PHB\", procRoot: \"$T/node/proc\"}"
	node_up erdma
	snap_save "$HOST_NS" "$T/host.before"
	conf=$(conf_with)
	pod_gpus a "GPU-4d72e9a5-b81c-4063-95f1-a0c38e6b2d74" >"$T/pods.json" # GPU 5, 0000:80:01.0
	add_pod a "$conf"
	expect_err 108 "GPU 5's pod: eth2 taken, then the proof" '"erdma_1" is not visible to libibverbs'
	grep -q 'attach "eth2" pci 0000:00:06.0 as "hpn0" .*, for GPU 0000:80:01.0 at PHB' \
		"$T/plugin.log" || fail "GPU 5's NIC is not eth2 at PHB: $(cat "$T/plugin.log")"
	grep -q 'RDMA device "erdma_1" port 1 (erdma iwarp) serves "eth2"' "$T/plugin.log" ||
		fail "eth2's device is not erdma_1: $(cat "$T/plugin.log")"
	: >"$T/plugin.log"
	pod_gpus b "GPU-5c0e8a41-2d7f-4b39-a1c6-08f3e92d4b17" >"$T/pods.json" # GPU 0, 0000:16:00.0
	add_pod b "$conf"
	expect_err 108 "GPU 0's pod: eth1 taken, then the proof" '"erdma_0" is not visible to libibverbs'
	grep -q 'attach "eth1" pci 0000:00:05.0 as "hpn0" .*, for GPU 0000:16:00.0 at PHB' \
		"$T/plugin.log" || fail "GPU 0's NIC is not eth1 at PHB: $(cat "$T/plugin.log")"
	snap_same "$HOST_NS" "$T/host.before" "host after the rolled-back ADDs"
	expect_no_state "after the rolled-back ADDs"
	ip netns del "${HPNT_PREFIX}p$SCEN-a"
	ip netns del "${HPNT_PREFIX}p$SCEN-b"
	node_down
}
run "eRDMA: the pool places each NIC by its eRDMA function, as NCCL does" erdma_pool

t_done
