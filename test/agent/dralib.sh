# shellcheck shell=bash
# The DRA tests' helpers (dra.sh, draflow.sh, draslices.sh, drataint.sh),
# sourced after ../netns/lib.sh and lib.sh: the API stand-in of test/kube
# with the agent's service account, claims in it, the slices it holds, and
# the kubelet stand-in's DRA calls.
# shellcheck source=../kube/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../kube/lib.sh"

# dra_init: the scenarios' scratch tree (t_init), or a skip that says why (the
# agent or the kubelet stand-in not built, no curl); kubectl and curl reach
# the stand-in, not a proxy.
dra_init() {
	t_init
	agent_require
	command -v curl >/dev/null || skip "curl is not installed"
	unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy ALL_PROXY all_proxy NO_PROXY no_proxy
}

DRV=hpn-rdma.alibabacloud.com
UID1=5b0c7a51-1f7e-4c55-9d43-2a1c0b9e7f10
POD_A=7e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b

# dra_api: the API stand-in in the scenario's host netns with ResourceClaims in
# $KUBE_RESOURCES, a service account for it, and the agent's DRA flags.
dra_api() {
	KUBE_WORK=$T/kube-$SCEN
	rm -rf "$KUBE_WORK"
	mkdir -p "$KUBE_WORK/pods" "$KUBE_WORK/sa"
	KUBE_RESOURCES=$KUBE_WORK/res
	mkdir -p "$KUBE_RESOURCES"
	kube_pki
	KUBE_PY_WRAP=(ip netns exec "$HOST_NS")
	kube_start "$KUBE_WORK/pods" || fail "the API stand-in did not start"
	api_token
	# shellcheck disable=SC2154 # KUBE_PORT_good: set by kube_start (printf -v)
	export KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$KUBE_PORT_good
	AGENT_FLAGS=(--cri-socket none --dra --node-name node1 --cdi-hook "$HPN_PLUGIN"
		--kubeconfig "$KUBE_WORK/agent.kubeconfig" --service-account "$KUBE_WORK/sa"
		--metrics-address "127.0.0.1:$MPORT")
}

# api_token: the stand-in (re)started knows the agent's token.
api_token() {
	echo "dra-agent-token" >"$KUBE_WORK/tokens"
	echo "dra-agent-token" >"$KUBE_WORK/sa/token"
	cp "$KUBE_WORK/pki/ca.crt" "$KUBE_WORK/sa/ca.crt"
}

# mk_claim NS NAME UID [JQ [DEVICE...]]: a ResourceClaim of ours allocating
# DEVICEs (default the NICs pool0 and pool1) in pool node1, reserved for pod
# $POD_A, changed by JQ.
mk_claim() {
	local ns=$1 name=$2 uid=$3 filter=${4:-.} f
	shift 3
	(($# > 0)) && shift
	(($# > 0)) || set -- pci-0000-af-00-0 pci-0000-af-00-1
	kube_claim "$ns" "$name" "$uid" "$DRV" node1 trainer "$POD_A" "$@"
	f=$KUBE_RESOURCES/$ns/resourceclaims/$name.json
	jq "$filter" "$f" >"$f.new" && mv "$f.new" "$f"
}

dra_sock() {
	echo "$KL/plugins/$DRV/dra.sock"
}

reg_sock() {
	echo "$KL/plugins_registry/$DRV-reg.sock"
}

# wait_file PATH WHAT: PATH is there within 10 s.
wait_file() {
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -e $1 ]] && return 0
		sleep 0.1
	done
	fail "$2: no $1 within 10 s; agent log: $(tail -n 10 "$T/agent.log")"
}

prepare() {
	"$HPN_KUBELET" dra-prepare -socket "$(dra_sock)" "$@"
}

unprepare() {
	"$HPN_KUBELET" dra-unprepare -socket "$(dra_sock)" "$@"
}

api_requests() {
	grep -c resourceclaims "$KUBE_WORK/requests.log" || true
}

claim_spec() {
	echo "$T/cdi/alibabacloud.com-hpn-rdma_claim-$1.json"
}

# slices: every slice the stand-in holds, one JSON array (read again when
# the stand-in replaced a file under us).
slices() {
	local f i
	for ((i = 0; i < 20; i++)); do
		shopt -s nullglob
		f=("$KUBE_RESOURCES"/resourceslices/*.json)
		shopt -u nullglob
		((${#f[@]})) || {
			echo '[]'
			return 0
		}
		jq -s . "${f[@]}" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "cannot read the slices in $KUBE_RESOURCES/resourceslices"
}

# wait_slices FILTER WHAT [SECONDS [jq args...]]: FILTER holds on slices
# within SECONDS (default 10); OUT is the slices then.
wait_slices() {
	local filter=$1 what=$2 secs=${3:-10} i
	shift 2
	(($# > 0)) && shift
	for ((i = 0; i < secs * 10; i++)); do
		OUT=$(slices)
		jq -e "$@" "$filter" <<<"$OUT" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "$what: jq '$filter' not true within ${secs}s on: $OUT
agent log: $(tail -n 10 "$T/agent.log")"
}

gen() {
	jq '[.[].spec.pool.generation] | max // 0' <<<"$(slices)"
}

# kubectl_slices: kubectl get resourceslices of node1 and our driver, -o json,
# as the agent's service account, into OUT; 1 (said) without kubectl.
kubectl_slices() {
	if ! command -v kubectl >/dev/null; then
		info "kubectl not installed: its reading of the slices not checked"
		return 1
	fi
	kubeconfig "$KUBE_WORK/kubectl.kubeconfig" "https://127.0.0.1:$KUBE_PORT_good" file \
		"token: dra-agent-token"
	OUT=$(HOME=$KUBE_WORK ip netns exec "$HOST_NS" kubectl \
		--kubeconfig "$KUBE_WORK/kubectl.kubeconfig" --cache-dir "$KUBE_WORK/kcache" \
		--request-timeout 10s get resourceslices \
		--field-selector "spec.nodeName=node1,spec.driver=$DRV" -o json) ||
		fail "kubectl get resourceslices: $OUT"
}

# plugin_conf FILTER: into CONF, the CNI config a scenario's ADD runs with
# (agent_net_conf, FILTER applied), reading a copy of the fake tree without
# RDMA devices: the host kernel has none to bind.
plugin_conf() {
	local psys=$T/psys-$SCEN
	rm -rf "$psys"
	cp -a "$T/sysfs" "$psys"
	find "$psys" -depth -name infiniband -exec rm -rf {} +
	CONF=$(jq -c --arg s "$psys" "$1"' | .sysfsRoot = $s' <<<"$(agent_net_conf)")
}
