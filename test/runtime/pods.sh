#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq programs are single-quoted on purpose
# runtime tier: pods as kubelet runs them through containerd's CRI, with the
# example conflist (Debian's bridge + host-local as eth0, then hpn-rdma from a
# pool of stand-in NICs, opted in by annotation); last, the GPU conflist
# (conf/20-hpn-rdma-gpu.conflist), which reads the pod's labels from the
# Kubernetes API (a stand-in on the node netns's loopback). Each scenario
# ends with the node exactly as before. See lib.sh.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

OPT_IN='{"alibabacloud.com/hpn-type": "rdma"}'

# check_add_call POD_ID NAME: hpn-rdma's one ADD for the sandbox carried what
# containerd 1.6 passes (DESIGN.md): CNI_IFNAME eth0, the pod in CNI_ARGS,
# the annotations in runtimeConfig (null for a pod with none), the bridge's result as prevResult, and no
# label anywhere. Prints the call.
check_add_call() {
	local id=$1 name=$2 calls add uid netns
	calls=$(rt_calls "$id")
	add=$(jq -c '[.[] | select(.cmd == "ADD")]' <<<"$calls")
	jq_ok 'length == 1' "one ADD for $name" "$add"
	add=$(jq -c '.[0]' <<<"$add")
	uid=$(pod_uid "$name")
	netns=$(pod_netns "$id")
	jq_ok '.ifname == "eth0" and .netns == $ns and .cid == $id' \
		"ADD: CNI_IFNAME eth0, CNI_NETNS the sandbox's, CNI_CONTAINERID the sandbox ID" \
		"$add" --arg ns "$netns" --arg id "$id"
	jq_ok '(.args | split(";") | sort) == ([
		"IgnoreUnknown=1", "K8S_POD_NAMESPACE=hpnr", "K8S_POD_NAME=\($name)",
		"K8S_POD_INFRA_CONTAINER_ID=\($id)", "K8S_POD_UID=\($uid)"] | sort)' \
		"ADD: CNI_ARGS names the pod" "$add" --arg name "$name" --arg id "$id" --arg uid "$uid"
	# A pod without annotations gets null there, not {}.
	jq_ok '.conf.runtimeConfig["io.kubernetes.cri.pod-annotations"] ==
		(if $ann == {} then null else $ann end)' \
		"ADD: runtimeConfig holds the pod's annotations" "$add" \
		--argjson ann "$(jq -c .annotations "$T/pods/$name.json")"
	jq_ok '.conf.prevResult.interfaces | map(.name) | index("eth0")' \
		"ADD: prevResult is the bridge's result with eth0" "$add"
	jq_ok '[.. | strings | select(test("hpnr-label"))] | length == 0' \
		"ADD: no pod label reaches the plugin" "$add"
	echo "$add"
}

# The opted-in pod: hpn0 in its container, with the address the result gave
# and the MTU the conflist sets; /etc/nccl.conf mounted as the Deployment
# mounts it, holding exactly the result's settings; a real runc container.
# Then Stop (DEL with the netns and prevResult; the NIC back under its name
# and MTU, the hints gone) and Remove (DEL without netns or prevResult).
opted_in() {
	local id ctr add res uid addr mac file inside env nic calls del cg rules
	rt_pod opted-in "$OPT_IN" '{"app": "hpnr-label-app"}'
	uid=$(pod_uid opted-in)
	id=$(runp opted-in)
	add=$(check_add_call "$id" opted-in)
	res=$(jq -c .out <<<"$add")
	jq_ok '.rc == 0' "ADD succeeded" "$add"
	addr=$(jq -r '.interfaces as $i | [.ips[] | select($i[.interface].name == "hpn0")][0].address' <<<"$res")
	mac=$(jq -r '[.interfaces[] | select(.name == "hpn0")][0].mac' <<<"$res")
	[[ $addr == 10.251.0.* && $mac =~ ^[0-9a-f:]{17}$ ]] ||
		fail "the result has no hpn0 address in 10.251.0.0/24 and MAC: $res"
	nic=$(ip -n "$RTN_NS" -j link show | jq -r --arg m "$mac" '.[] | select(.address == $m) | .ifname')
	[[ -z $nic ]] || fail "hpn0's NIC ($mac) is still on the node as $nic"

	ctr=$(rt_container "$id" opted-in)
	inside=$(in_ctr "$ctr" ip -j addr show)
	jq_ok '([.[] | select(.ifname == "hpn0")][0] | .mtu == $mtu and
		([.addr_info[] | "\(.local)/\(.prefixlen)"] | index($a))) and
		([.[].ifname] | index("eth0"))' \
		"the container sees hpn0 (MTU $POD_MTU, $addr) and eth0" "$inside" \
		--arg a "$addr" --argjson mtu "$POD_MTU"
	file=$(jq -r .nccl.file <<<"$res")
	[[ $file == "$HINTS/$uid/nccl.conf" ]] || fail "result's nccl.file is $file"
	inside=$(in_ctr "$ctr" cat /etc/nccl.conf)
	[[ $inside == "$(<"$file")" ]] || fail "/etc/nccl.conf in the container is not the hints file"
	env=$(nccl_env "$inside")
	jq_ok '. == $env' "/etc/nccl.conf holds exactly the result's nccl.env" "$env" \
		--argjson env "$(jq -c .nccl.env <<<"$res")"
	jq_ok '.NCCL_SOCKET_IFNAME == "eth0"' "the hints name eth0 as the socket interface" "$env"
	# A runc container: its own mount namespace, a device cgroup under the
	# pod's parent that does not allow every device.
	[[ $(in_ctr "$ctr" readlink /proc/self/ns/mnt) != "$(readlink /proc/self/ns/mnt)" ]] ||
		fail "the container shares the test's mount namespace"
	# Matched in the shell, not by grep -q in a pipe, whose early exit could
	# SIGPIPE the writer (pipefail calls that a failure); failures show the text.
	cg=$(ctr_read "$ctr" /proc/self/cgroup)
	if [[ -d /sys/fs/cgroup/devices ]]; then
		[[ $'\n'$cg =~ $'\n'[0-9]+:devices:$RTN_CGROUP/ ]] ||
			fail "the container's device cgroup is not under $RTN_CGROUP: $cg"
		rules=$(ctr_read "$ctr" /sys/fs/cgroup/devices/devices.list)
		[[ $'\n'$rules$'\n' != *$'\na *:* rwm\n'* ]] ||
			fail "the container's device cgroup allows every device: $rules"
	else
		# cgroup v2: the device rules are an eBPF program on the container's cgroup.
		[[ $'\n'$cg =~ $'\n'0::$RTN_CGROUP/ ]] ||
			fail "the container's cgroup is not under $RTN_CGROUP: $cg"
	fi

	cri stop "$ctr" || fail "StopContainer failed"
	cri stopp "$id" || fail "StopPodSandbox failed"
	calls=$(rt_calls "$id")
	del=$(jq -c '[.[] | select(.cmd == "DEL")]' <<<"$calls")
	jq_ok 'length == 1 and (.[0] | .rc == 0 and .netns == $ns and .conf.prevResult != null and
		(.conf.prevResult.interfaces | map(.name) | index("hpn0")))' \
		"StopPodSandbox: one DEL with the netns and prevResult (hpn0 in it)" "$del" \
		--arg ns "$(jq -r .netns <<<"$add")"
	nic=$(ip -n "$RTN_NS" -j link show | jq -c --arg m "$mac" '.[] | select(.address == $m)')
	jq_ok '(.ifname | test("^rnic[0-9]$")) and .mtu == $mtu' \
		"the NIC is back on the node under its name and MTU" "$nic" --argjson mtu "$NIC_MTU"
	[[ ! -e $file && ! -e $HINTS/$uid ]] || fail "the hints are still there after Stop"
	[[ -z $(find "$STATE" -type f ! -name lock ! -name 'events.log*') ]] ||
		fail "a journal is left after Stop"
	cri rm "$ctr" || fail "RemoveContainer failed"
	cri rmp "$id" || fail "RemovePodSandbox failed"
	del=$(rt_calls "$id" | jq -c '[.[] | select(.cmd == "DEL")]')
	jq_ok 'length == 2 and (.[1] | .rc == 0 and .netns == "" and .conf.prevResult == null)' \
		"RemovePodSandbox: a second DEL, without netns or prevResult, succeeds" "$del"
	jq_ok 'all(.[]; .cmd == "ADD" or .cmd == "DEL")' "containerd called only ADD and DEL" \
		"$(rt_calls)"
}

# A pod that is not opted in (it has the label, which never reaches CNI, but
# not the annotation): hpn-rdma passes the bridge's result through; the
# container has eth0 and no hpn0; nothing of hpn-rdma's is on the node.
passes_through() {
	local id ctr add inside
	rt_pod plain '{"team": "a"}' '{"alibabacloud.com/hpn-type": "rdma", "app": "hpnr-label-app"}'
	id=$(runp plain)
	add=$(check_add_call "$id" plain)
	jq_ok '.rc == 0 and .out.interfaces == .conf.prevResult.interfaces and .out.nccl == null' \
		"ADD passed prevResult through" "$add"
	[[ -z $(find "$STATE" "$HINTS" -type f ! -name lock ! -name 'events.log*') ]] ||
		fail "hpn-rdma left state or hints for a pod it does not attach"
	ctr=$(rt_container "$id" plain)
	inside=$(in_ctr "$ctr" ip -j link show)
	jq_ok '[.[].ifname] | index("eth0") and (index("hpn0") | not)' \
		"the container has eth0 and no hpn0" "$inside"
	# kubelet made the subPath a directory, as it does when the file is not there.
	[[ -d $HINTS/$(pod_uid plain)/nccl.conf ]] || fail "kubelet_subpath did not act as kubelet"
	cri stop "$ctr"
	stop_remove "$id"
	rm -r "${HINTS:?}/$(pod_uid plain)"
	[[ $(ip -n "$RTN_NS" -j link show | jq '[.[] | select(.ifname | test("^rnic"))] | length') == "$POOL" ]] ||
		fail "a pool NIC is missing"
}

# A used-up pool: RunPodSandbox of one pod more fails with hpn-rdma's message
# and leaves nothing (containerd's DEL after the failed ADD cleans eth0 too);
# the same pod starts once another pod is removed, on the NIC it freed.
pool_used_up() {
	local k ids=() add msg mac
	for ((k = 0; k < POOL; k++)); do
		rt_pod "full$k" "$OPT_IN"
		ids+=("$(runp "full$k")")
	done
	rt_pod extra "$OPT_IN"
	try_runp extra
	((RC != 0)) || fail "RunPodSandbox succeeded with the pool used up"
	add=$(rt_calls | jq -c '[.[] | select(.cmd == "ADD" and .rc != 0)]')
	jq_ok 'length == 1 and (.[0].out.code | type == "number")' \
		"the refused pod's ADD failed with a CNI error" "$add"
	msg=$(jq -r '.[0].out.msg' <<<"$add")
	[[ $ERR == *"$msg"* ]] || fail "RunPodSandbox's error does not carry the plugin's message
  plugin: $msg
  containerd: $ERR"
	info "refused: $msg"
	jq_ok 'map(select(.cmd == "DEL" and .cid == $c and .rc == 0)) | length >= 1' \
		"containerd ran DEL after the failed ADD" "$(rt_calls)" --arg c "$(jq -r '.[0].cid' <<<"$add")"
	local st
	st=$(rt_node_state)
	jq_ok '(.sandboxes | length) == $n and (.netns_mounts | length) == $n and
		(.leases | length) == 2 * $n and (.journals | length) == $n and
		(.hints | map(select(endswith("nccl.conf"))) | length) == $n' \
		"the refused pod left nothing ($POOL pods, their netns, leases, journals, hints)" \
		"$st" --argjson n "$POOL"
	mac=$(rtn_in nsenter --net="$(pod_netns "${ids[0]}")" ip -j link show hpn0 | jq -r '.[0].address')
	stop_remove "${ids[0]}"
	local id
	id=$(runp extra)
	[[ $(rtn_in nsenter --net="$(pod_netns "$id")" ip -j link show hpn0 | jq -r '.[0].address') == "$mac" ]] ||
		fail "the pod started after a removal did not get the freed NIC"
	stop_remove "$id"
	for id in "${ids[@]:1}"; do
		stop_remove "$id"
	done
}

# The seed's 8-GPU pod (conf/k8s/dep-demo-hpn-gpu.yaml's pod template): labels
# only, as the managed service writes it; kubelet puts them in the
# PodSandboxConfig, and containerd passes none of them to CNI. With this
# node's conflist (annotations only) the pod passes through. The same pod
# annotated as the Deployment had to be before labels were read (the label
# repeated as an annotation, with the GPU model and count): GU8TF's profile
# (mlx5, 8 GPUs) is then enforced, so on this node, whose pool NICs have no
# RDMA device, ADD is refused (108) before anything changes; with a GPU count
# the model does not run, refused as a bad pod (7).
seed_yaml_meta() { # seed_yaml_meta labels|annotations: the template's map as JSON
	awk -v want="$1" '
		/^  template:/ { tmpl = 1 }
		tmpl && /^    metadata:/ { meta = 1; next }
		meta && /^    [a-z]/ { exit }
		meta && $0 ~ "^      " want ":" { on = 1; next }
		on && /^        [^ ]/ { sub(/^ +/, ""); k = $0; sub(/: .*/, "", k); v = $0
			sub(/^[^:]*: */, "", v); gsub(/"/, "", v); print k "\t" v; next }
		on { on = 0 }' "$HPN_SRC/conf/k8s/dep-demo-hpn-gpu.yaml" |
		jq -Rsc 'split("\n") | map(select(. != "") | split("\t") | {key: .[0], value: .[1]})
			| from_entries'
}

# The template's GPU count: its container's limits of nvidia.com/gpu.
seed_yaml_gpus() {
	awk '/^              nvidia.com\/gpu:/ { print $2; exit }' "$HPN_SRC/conf/k8s/dep-demo-hpn-gpu.yaml"
}

seed_gpu_pod() {
	local labels ann add id
	labels=$(seed_yaml_meta labels)
	jq_ok '.["alibabacloud.com/hpn-type"] == "rdma" and
		.["alibabacloud.com/gpu-model-series"] == "GU8TF" and .app' "the seed's labels" "$labels"
	jq_ok '. == {}' "the seed's template has no annotations" "$(seed_yaml_meta annotations)"
	[[ $(seed_yaml_gpus) == 8 ]] || fail "the seed's container does not ask for 8 nvidia.com/gpu"

	rt_pod seed-label "{}" "$labels"
	id=$(runp seed-label)
	add=$(check_add_call "$id" seed-label)
	jq_ok '.rc == 0 and .out.interfaces == .conf.prevResult.interfaces' \
		"the seed pod with its labels alone passes through (labels never reach CNI)" "$add"
	stop_remove "$id"

	rm -rf "${CALLS:?}"/*
	ann=$(jq -c '{"alibabacloud.com/hpn-type": .["alibabacloud.com/hpn-type"],
		"alibabacloud.com/gpu-model-series": .["alibabacloud.com/gpu-model-series"],
		"alibabacloud.com/gpu-count": $n}' --arg n "$(seed_yaml_gpus)" <<<"$labels")
	rt_pod seed-gpu "$ann" "$labels"
	try_runp seed-gpu
	add=$(rt_calls | jq -c '[.[] | select(.cmd == "ADD")]')
	jq_ok 'length == 1 and (.[0].conf.runtimeConfig["io.kubernetes.cri.pod-annotations"] == $ann)' \
		"the annotated seed pod's annotations reached hpn-rdma" "$add" --argjson ann "$ann"
	jq_ok '.[0].rc == 1 and .[0].out.code == 108 and (.[0].out.msg | test("GU8TF"))' \
		"GU8TF on a NIC without an mlx5 device: refused with 108 naming the model" "$add"
	((RC != 0)) || fail "RunPodSandbox of the seed pod succeeded"
	[[ $ERR == *"$(jq -r '.[0].out.msg' <<<"$add")"* ]] ||
		fail "RunPodSandbox of the seed pod did not fail with the plugin's message: $ERR"
	info "seed pod: $(jq -r '.[0].out.msg' <<<"$add")"
	node_as_before "after the refused seed pod"

	rm -rf "${CALLS:?}"/*
	rt_pod seed-gpu4 "$(jq -c '.["alibabacloud.com/gpu-count"] = "4"' <<<"$ann")" "$labels"
	try_runp seed-gpu4
	add=$(rt_calls | jq -c '[.[] | select(.cmd == "ADD")]')
	jq_ok '.[0].rc == 1 and .[0].out.code == 7' "GU8TF with 4 GPUs: refused with 7" "$add"
	((RC != 0)) || fail "RunPodSandbox of a 4-GPU GU8TF pod succeeded"
	info "seed pod, 4 GPUs: $(jq -r '.[0].out.msg' <<<"$add")"
}

# The issue-17 flow: the node runs conf/20-hpn-rdma-gpu.conflist, which reads
# the pod's labels from the Kubernetes API ("kubernetes", podSelector.label).
# The API server is the stand-in (test/kube/apiserver.py), started in the
# node's netns, where containerd runs the plugin, on its loopback; it serves
# the Pod kube-apiserver would hold for the sandbox kubelet asks for: the
# seed's template (labels, the trainer's 8 nvidia.com/gpu) under the
# sandbox's namespace, name and UID. The pod gets hpn0 and GU8TF's hints in
# its container, through its labels alone; StopPodSandbox with the API server
# gone still cleans up (DEL never asks it).
kube_conflist() { # the GPU conflist as this node runs it (rt_conflist's changes, and the kubeconfig)
	jq -c --arg net "$NET-kube" --arg ipam "$IPAM" --arg st "$STATE" --arg hints "$HINTS" \
		--arg log "$T/plugin.log" --arg kc "$KUBE_WORK/kubeconfig" '
		.name = $net |
		.plugins |= map(
			if .type == "bridge" then
				.bridge = "hpnrbr0" | .ipMasq = false |
				.ipam.ranges = [[{subnet: "10.250.0.0/24"}]] | .ipam.dataDir = $ipam
			elif .type == "hpn-rdma" then
				.match = {devices: ["rnic*"]} | .rdmaRequired = false |
				.stateDir = $st | .logFile = $log | .nccl.dir = $hints |
				.ipam.ranges = [[{subnet: "10.251.0.0/24"}]] | .ipam.dataDir = $ipam |
				.kubernetes.kubeconfig = $kc |
				.nccl.profiles = {GU8TF: {ib: "auto", gpuCounts: [8],
					env: {NCCL_NET_GDR_LEVEL: "PHB"}}}
			else . end)' "$HPN_SRC/conf/20-hpn-rdma-gpu.conflist"
}

seed_by_label() {
	local labels id ctr add res uid env inside calls
	# shellcheck source=../kube/lib.sh
	source "$HPN_SRC/test/kube/lib.sh"
	command -v openssl >/dev/null || fail "openssl is not installed (scripts/install-deps.sh)"
	KUBE_WORK=$T/kube
	KUBE_LIFETIME=120
	mkdir -p "$KUBE_WORK/pods/hpnr"
	trap 'kube_stop; rtn_conflist "$(rt_conflist)"' EXIT
	kube_pki
	KUBE_PY_WRAP=(ip netns exec "$RTN_NS")
	kube_start "$KUBE_WORK/pods"
	echo "hpnr-token-$$" >"$KUBE_WORK/tokens"
	kubeconfig "$KUBE_WORK/kubeconfig" "https://127.0.0.1:$KUBE_PORT_good" file \
		"token: hpnr-token-$$"
	rtn_conflist "$(kube_conflist)"
	rtn_wait_network "$NET-kube"

	labels=$(seed_yaml_meta labels)
	rt_pod seed "{}" "$labels"
	uid=$(pod_uid seed)
	# The Pod object: the fixture's shape, the sandbox's identity, the template's labels and GPUs.
	jq --arg uid "$uid" --argjson l "$labels" --arg n "$(seed_yaml_gpus)" '
		.metadata.namespace = "hpnr" | .metadata.name = "seed" | .metadata.uid = $uid |
		.metadata.labels = $l | .metadata.generateName = "seed-" |
		.spec.containers[0].resources.limits["nvidia.com/gpu"] = $n |
		.spec.containers[0].resources.requests["nvidia.com/gpu"] = $n' \
		"$HPN_SRC/test/fixtures/pods/default/seed-gu8tf-7d9c5b8f4-x2kqp.json" \
		>"$KUBE_WORK/pods/hpnr/seed.json"
	id=$(runp seed)
	add=$(check_add_call "$id" seed)
	res=$(jq -c .out <<<"$add")
	jq_ok '.rc == 0 and (.out.interfaces | map(.name) | index("hpn0"))' \
		"the seed's pod, labels only, gets hpn0" "$add"
	[[ $(grep -c ' /api/v1/namespaces/hpnr/pods/seed token:' "$KUBE_WORK/requests.log") == 1 ]] ||
		fail "the plugin did not read the pod once: $(cat "$KUBE_WORK/requests.log")"
	grep -q 'pod hpnr/seed: selected (podSelector .*label alibabacloud.com/hpn-type=rdma), GPU model GU8TF, 8 GPUs' \
		"$T/plugin.log" || fail "the plugin's log does not say the label selected GU8TF with 8 GPUs"
	ctr=$(rt_container "$id" seed)
	inside=$(in_ctr "$ctr" ip -j link show)
	jq_ok '[.[].ifname] | index("hpn0") and index("eth0")' "the container has hpn0 and eth0" "$inside"
	env=$(nccl_env "$(in_ctr "$ctr" cat /etc/nccl.conf)")
	jq_ok '. == $env and .NCCL_NET_GDR_LEVEL == "PHB" and .NCCL_SOCKET_IFNAME == "eth0"' \
		"/etc/nccl.conf holds the result's settings, GU8TF's among them" "$env" \
		--argjson env "$(jq -c .nccl.env <<<"$res")"
	kube_stop
	cri stop "$ctr" || fail "StopContainer failed"
	cri rm "$ctr" || fail "RemoveContainer failed"
	stop_remove "$id"
	calls=$(rt_calls "$id")
	jq_ok '[.[] | select(.cmd == "DEL")] | length == 2 and all(.rc == 0)' \
		"Stop and Remove: both DELs succeed with the API server gone" "$calls"
	[[ $(grep -c ' /api/v1/' "$KUBE_WORK/requests.log") == 1 ]] ||
		fail "a request besides ADD's: $(cat "$KUBE_WORK/requests.log")"
}

rt_init
scenario "opted-in pod: hpn0 and /etc/nccl.conf in its container; Stop, Remove" opted_in
scenario "pod not opted in passes through" passes_through
scenario "pool used up: refused with the plugin's message; starts after a removal" pool_used_up
scenario "the seed's 8-GPU pod (dep-demo-hpn-gpu.yaml metadata)" seed_gpu_pod
# Last: it runs the node on another conflist (put back when it ends).
scenario "the seed's Deployment, unchanged, gets hpn0 through its label (conf/20)" seed_by_label
rt_done
