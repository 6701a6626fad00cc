# shellcheck shell=bash
# The Kubernetes API rows of scripts/bench.sh (issue 17): hpn-rdma's ADD+DEL
# (move, no IPAM) with "kubernetes" in its config, against the stand-in API
# server (test/kube/apiserver.py: HTTPS with a test CA, bearer token; Python)
# on the node netns's loopback: kube.none.hpn-kanno, where the pod's
# annotations decide everything (no request: the path a pod with the
# annotations takes), and kube.none.hpn-klabel, where podSelector.label
# decides, so every ADD GETs the pod. The lookup's cost per ADD is the
# difference of the two (wall includes the stand-in's time to answer; CPU is
# the plugin's own); the stand-in's request log proves 0 and 1 requests per
# ADD. kube.none.hpn-kagent is klabel with hpn-rdma-agent's pod cache
# (agent.sh starts the agent watching the stand-in's pods of node
# bench-node): the plugin asks the agent over its socket, so 0 requests per
# ADD; its config names the agent, so the ADD also makes the allocation
# lookup of move.none.hpn-agent. The VERSION rows of the plugin as it would be with libyaml, and
# libcurl + libyaml, linked instead of dlopen()ed (version.sh) say what every
# start would pay. Skipped, saying why, without openssl or python3. Not in
# the parallel rows: a Python stand-in's concurrency is not kube-apiserver's.

# kube_uid K / kube_args K: pod K as the stand-in serves it (bench/bench-K), and
# the CNI_ARGS containerd passes for it.
kube_uid() { printf '0b3c5d1e-9a47-4f3e-8c2d-%012d' "$1"; }
kube_args() {
	echo "IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=bench-$1;K8S_POD_UID=$(kube_uid "$1")"
}

# kube_setup: KROWS, the selected Kubernetes rows, added to ROWS once the
# stand-in API server runs in the node netns, one pod per pod netns (the
# seed's fixture with that pod's namespace, name and UID); else KUBE_WHY says
# why not.
kube_setup() {
	local k
	KUBE_WHY=
	mapfile -t KROWS < <(selected kube.none.hpn-kanno kube.none.hpn-klabel kube.none.hpn-kagent)
	mapfile -t DROWS < <(selected dra.none.hpn-dra) # dra.sh: the DRA driver's row
	if ((${#KROWS[@]} + ${#DROWS[@]})); then
		if ! command -v openssl >/dev/null; then
			KUBE_WHY="openssl is not installed (scripts/install-deps.sh)"
		elif [[ ! -x /usr/bin/python3 ]]; then
			KUBE_WHY="/usr/bin/python3 is not installed (scripts/install-deps.sh)"
		fi
	fi
	if ((${#KROWS[@]} + ${#DROWS[@]} == 0)) || [[ -n $KUBE_WHY ]]; then
		DRA_WHY=${KUBE_WHY:+"no API stand-in: $KUBE_WHY"}
		DROWS=()
		return 0
	fi
	# shellcheck source=../test/kube/lib.sh
	source "$SRC/test/kube/lib.sh"
	KUBE_WORK=$W/kube
	KUBE_RESOURCES=$KUBE_WORK/res # the DRA row's claims and slices
	mkdir -p "$KUBE_WORK/pods/bench" "$KUBE_WORK/sa" "$KUBE_RESOURCES"
	for ((k = 0; k < MAXPAR; k++)); do
		jq --arg n "bench-$k" --arg uid "$(kube_uid "$k")" '.metadata.namespace = "bench" |
			.metadata.name = $n | .metadata.uid = $uid |
			.metadata.labels["alibabacloud.com/gpu-model-series"] = "gpu-hpn" |
			.spec.nodeName = "bench-node"' \
			"$SRC/test/fixtures/pods/default/seed-gu8tf-7d9c5b8f4-x2kqp.json" \
			>"$KUBE_WORK/pods/bench/bench-$k.json"
	done
	kube_pki
	KUBE_PY_WRAP=(ip netns exec "$NODE")
	KUBE_LIFETIME=$((QUICK ? 600 : 7200))
	kube_start "$KUBE_WORK/pods"
	echo "bench-token-$$" >"$KUBE_WORK/tokens"
	kubeconfig "$KUBE_WORK/kubeconfig" "https://127.0.0.1:$KUBE_PORT_good" file \
		"token: bench-token-$$"
	# The agent's service account (agent.sh: its pod cache, for kube.none.hpn-kagent).
	echo "bench-token-$$" >"$KUBE_WORK/sa/token"
	cp "$KUBE_WORK/pki/ca.crt" "$KUBE_WORK/sa/ca.crt"
	ROWS+=("${KROWS[@]}" "${DROWS[@]}")
}

# kube_requests: the pod requests the stand-in has answered so far.
kube_requests() {
	[[ -f ${KUBE_WORK:-/nonexistent}/requests.log ]] || {
		echo 0
		return
	}
	grep -c ' /api/v1/namespaces/bench/pods/' "$KUBE_WORK/requests.log" || true
}

# kube_json: kube, the Kubernetes API rows' requests per ADD (runs of a row
# include its warm-ups).
kube_json() {
	local row
	kube='{"skipped": "no Kubernetes row selected (BENCH_ROWS)"}'
	if [[ -n $KUBE_WHY ]]; then
		kube=$(jq -cn --arg w "$KUBE_WHY" '{skipped: $w}')
	elif ((${#KROWS[@]})); then
		kube=$(for row in "${KROWS[@]}"; do
			[[ -f $W/kreq.$row ]] || continue # skipped (agent.sh says why)
			awk -v r="$row" '{ q += $1; n += $2 } END { printf "{\"row\": \"%s\", \"requests\": %d, \"adds\": %d}\n", r, q, n }' \
				"$W/kreq.$row"
		done | jq -sc --arg srv "test/kube/apiserver.py (Python, HTTPS, bearer token) on the node netns's loopback" \
			'{server: $srv, rows: map(. + {requests_per_add: (if .adds > 0 then .requests / .adds else null end)})}')
	fi
}
