# shellcheck shell=bash
# The agent rows of scripts/bench.sh (hpn-rdma-agent, doc/agent.md):
# move.*.hpn-agent is hpn-rdma's ADD+DEL with the allocation lookup: the pod
# (CNI_ARGS K8S_POD_NAMESPACE and K8S_POD_NAME) holds nic<k> per the kubelet
# stand-in's PodResources, the plugin asks the agent over its unix socket and
# attaches that NIC; set against move.*.hpn-rdma, the pool path (no pod names:
# no lookup). And the device plugin through the stand-in (hpn-kubelet bench):
# Allocate of one NIC and a ListAndWatch stream to its first list, latency per
# call. Skipped, saying why, without the agent or the stand-in.
# With the Kubernetes rows (kube.sh), the agent also keeps its pod cache of
# node bench-node from the API stand-in, which kube.none.hpn-kagent asks.

# agent_start: hpn-rdma-agent and the kubelet stand-in in the node netns (their
# pids in AGENT_PIDS, for cleanup); pod bench-<k> holds nic<k> (the NIC's ID:
# a veth has no PCI address). Else AGENT_WHY says why not, and the agent rows
# are skipped.
agent_start() {
	local i v
	AGENT_WHY=
	if [[ ! -x $AGENT ]]; then
		AGENT_WHY="hpn-rdma-agent not built ($AGENT)"
	elif [[ ! -x $KUBELET ]]; then
		AGENT_WHY="the kubelet stand-in not built ($KUBELET)"
	else
		KL=$W/kl
		jq -cn --argjson n "$MAXPAR" '[range($n) | {namespace: "bench", name: "bench-\(.)",
			containers: [{name: "c", devices: [{resource: "rdma/hpn", ids: ["nic\(.)"]}]}]}]' \
			>"$W/pods.json"
		# The label path's podSelector too: the pod cache keeps the keys this config reads
		# (kube.none.hpn-kagent's, bench/lib.sh).
		jq -c --arg st "$STATE" '{cniVersion: "1.0.0", name: "bench", plugins: [{type: "hpn-rdma",
			match: {devices: ["nic*"]}, rdmaRequired: false, stateDir: $st,
			podSelector: {annotation: "alibabacloud.com/hpn-type",
				label: "alibabacloud.com/hpn-type", value: "rdma"}}]}' <<<'{}' >"$W/agent.conflist"
		"$KUBELET" serve -dir "$KL" -out "$W/kubelet.events" -pods "$W/pods.json" 2>"$W/kubelet.log" &
		AGENT_PIDS=$!
		for ((i = 0; i < 100; i++)); do [[ -S $KL/device-plugins/kubelet.sock ]] && break; sleep 0.05; done
		local -a kflags=()
		[[ -n ${KUBE_PORT_good:-} && -d ${KUBE_WORK:-}/sa ]] &&
			kflags=(--kubeconfig "$KUBE_WORK/agent.kubeconfig" --service-account "$KUBE_WORK/sa"
				--node-name bench-node)
		KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=${KUBE_PORT_good:-} \
			ip netns exec "$NODE" "$AGENT" --config "$W/agent.conflist" --kubelet-dir "$KL" \
			--lookup-socket "$W/agent.sock" --cdi-dir "$W/cdi" "${kflags[@]}" 2>"$W/agent.log" &
		AGENT_PIDS+=" $!"
		for ((i = 0; i < 200; i++)); do grep -q '"event":"list"' "$W/kubelet.events" 2>/dev/null && break; sleep 0.05; done
		grep -q '"event":"list"' "$W/kubelet.events" ||
			AGENT_WHY="the agent did not register with the stand-in: $(tail -n 3 "$W/agent.log")"
		if ((${#kflags[@]})); then
			for ((i = 0; i < 200; i++)); do grep -q 'pod cache: .* listed' "$W/agent.log" && break; sleep 0.05; done
			grep -q 'pod cache: .* listed' "$W/agent.log" || {
				SKIPPED+=(kube.none.hpn-kagent)
				SKIP_WHY[kube.none.hpn-kagent]="the agent's pod cache did not list: $(tail -n 3 "$W/agent.log")"
			}
		fi
	fi
	if [[ -n $AGENT_WHY || -z ${KUBE_PORT_good:-} ]]; then
		SKIPPED+=(kube.none.hpn-kagent)
		SKIP_WHY[kube.none.hpn-kagent]=${AGENT_WHY:-"no API stand-in (kube.sh): ${KUBE_WHY:-no kube row}"}
	fi
	if [[ -n $AGENT_WHY ]]; then
		for v in none static; do
			SKIPPED+=("move.$v.hpn-agent")
			SKIP_WHY["move.$v.hpn-agent"]=$AGENT_WHY
		done
		echo "# agent rows skipped: $AGENT_WHY"
	fi
}

# agent_latency: agent_lat, the device plugin's latency through the stand-in:
# Allocate of nic0, and a ListAndWatch stream to its first list, AG_ITER calls
# each, one client.
agent_latency() {
	agent_lat='{"skipped": "'"${AGENT_WHY//\"/}"'"}'
	if [[ -z $AGENT_WHY ]]; then
		"$KUBELET" bench -socket "$KL/device-plugins/hpn-rdma.sock" -n "$AG_ITER" nic0 >"$W/agent.lat"
		agent_lat=$(latency_json "$W/agent.lat")
	fi
}
