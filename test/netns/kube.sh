#!/bin/bash
# ADD reads the pod from the Kubernetes API (issue 17): "kubernetes" and
# podSelector.label, against the stand-in API server (test/kube/apiserver.py:
# HTTPS with a test CA made here by openssl, bearer tokens, the fixture pods of
# test/fixtures/pods) started inside each scenario's host netns, where the
# plugin runs, so every request stays on that netns's loopback.
#
# Proves that:
#  - the seed's pod (labels only: hpn-type rdma, GU8TF; 8 nvidia.com/gpu) is
#    selected by its label and gets GU8TF's profile: the built-in one refuses
#    this node's NIC (no mlx5 device) with 108 naming GU8TF, before anything
#    changes; a node config's own GU8TF profile (no driver asked) attaches it
#    with that profile's settings in the hints; CHECK and DEL ask nothing;
#  - P16EN with 16 GPUs attaches with IB disabled; P16EN with 8 is refused
#    (7) with nothing changed; a pod without the label is passed through
#    (prevResult unchanged, nothing changed); a pod whose uid is not
#    K8S_POD_UID is refused (3);
#  - 401, 403, 404, a server that never answers (kubernetes.timeout), a
#    missing kubeconfig and CNI_ARGS without the pod's names are each a clean
#    CNI error naming what failed, with nothing changed on the node;
#  - where the annotations decide (selection, model and count), no request is
#    made at all (the stand-in logs every request); a token file readable by
#    others is a warning on the plugin's log, and the lookup goes on;
#  - with the API server gone, CHECK, STATUS, DEL and GC succeed, and DEL
#    puts the NIC back: only ADD ever asks the API.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=../kube/lib.sh
source "$(dirname "$0")/../kube/lib.sh"
t_init
command -v openssl >/dev/null || skip "openssl is not installed (scripts/install-deps.sh)"
[[ -x $PY ]] || skip "$PY is not installed (scripts/install-deps.sh)"

FIX=$HPN_SRC/test/fixtures/pods
KUBE_WORK=$T/kube
KUBE_LIFETIME=120	# a stand-in a failed scenario leaves behind ends by itself
mkdir -p "$KUBE_WORK"
kube_pki
TOKEN=hpnt-token-$$
KC=$KUBE_WORK/kubeconfig

# The fixture pods: NS/NAME, and the CNI_ARGS containerd would pass for them.
SEED=default/seed-gu8tf-7d9c5b8f4-x2kqp
P16=ml/p16en-16gpu-0
P8=ml/p16en-8gpu-0
PLAIN=default/plain-web-5c6d7e8f9-abcde
uid_of() {
	jq -r .metadata.uid "$FIX/$1.json"
}
args_of() { # args_of NS/NAME [UID]
	echo "IgnoreUnknown=1;K8S_POD_NAMESPACE=${1%/*};K8S_POD_NAME=${1#*/};K8S_POD_INFRA_CONTAINER_ID=$CID;K8S_POD_UID=${2:-$(uid_of "$1")}"
}

# api_up: the stand-in in this scenario's host netns, a kubeconfig for it
# with a bearer token; stopped when the scenario's subshell exits.
api_up() {
	local -a RUN_IN=(ip netns exec "$HOST_NS")
	trap kube_stop EXIT
	KUBE_PY_WRAP=("${RUN_IN[@]}")
	kube_start "$FIX"
	echo "$TOKEN" >"$KUBE_WORK/tokens"
	API=https://127.0.0.1:$KUBE_PORT_good
	kubeconfig "$KC" "$API" file "token: $TOKEN"
}

# requests: how many pod requests the stand-in has answered (or refused).
requests() {
	grep -c ' /api/v1/namespaces/' "$KUBE_WORK/requests.log" || true
}

# expect_requests N WHAT: the stand-in saw N pod requests in all.
expect_requests() {
	local n
	n=$(requests)
	[[ $n == "$1" ]] || fail "$2: the API server saw $n pod requests, expected $1:
$(cat "$KUBE_WORK/requests.log")"
}

# kconf [FILTER [jq args]]: nic0 as hpn0, static IPAM, the API and the
# label selector, then FILTER.
kconf() {
	local filter=${1:-.}
	(($# > 0)) && shift
	net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0" |
		.ipam = {type: "static", addresses: [{address: "10.86.0.2/24"}]} |
		.kubernetes = {kubeconfig: $_kc, timeout: 3000} |
		.podSelector = {label: "alibabacloud.com/hpn-type", value: "rdma"} | '"$filter" \
		--arg _kc "$KC" "$@"
}

# untouched WHAT: the node and the pod are as before, no state, no hints.
untouched() {
	snap_same "$HOST_NS" "$T/host.before" "host after $1"
	snap_same "$POD_NS" "$T/pod.before" "pod after $1"
	expect_no_state "after $1"
}

setup() {
	mk_nic "$HOST_NS" nic0 peer0
	snap_save "$HOST_NS" "$T/host.before"
	snap_save "$POD_NS" "$T/pod.before"
	api_up
}

# --- the seed's pod: label only, GU8TF, 8 GPUs.
seed_pod() {
	local conf res prev file uid
	setup
	uid=$(uid_of "$SEED")
	conf=$(kconf)
	run_plugin ADD "$conf" CNI_ARGS="$(args_of "$SEED")"
	expect_err 108 "ADD of the seed's pod with the built-in GU8TF profile" \
		'GU8TF needs an RDMA device'
	expect_requests 1 "the seed's pod"
	grep -q "pod default/seed-gu8tf-7d9c5b8f4-x2kqp: selected (podSelector label alibabacloud.com/hpn-type=rdma), GPU model GU8TF, 8 GPUs" \
		"$T/plugin.log" || fail "the plugin's log does not say what the pod decided"
	untouched "the seed's pod refused for its NIC"

	# The node's own GU8TF profile, as an operator without mlx5 would write it.
	conf=$(kconf '.nccl.profiles = {GU8TF: {ib: "auto", gpuCounts: [8],
		env: {NCCL_NET_GDR_LEVEL: "PHB"}}}')
	run_plugin ADD "$conf" CNI_ARGS="$(args_of "$SEED")"
	expect_result "ADD of the seed's pod"
	res=$OUT
	expect_requests 2 "the seed's pod, attached"
	jq_ok '(.interfaces | map(.name) | index("hpn0")) and
		.nccl.env == {NCCL_IB_DISABLE: "1", NCCL_IB_HCA: "", NCCL_SOCKET_IFNAME: "eth0",
			NCCL_NET_GDR_LEVEL: "PHB"}' \
		"hpn0, and GU8TF's settings (this NIC has no RDMA device: IB off)" "$res"
	file=$PODS/$uid/nccl.conf
	grep -qx 'NCCL_NET_GDR_LEVEL=PHB' "$file" || fail "the hints file lacks GU8TF's setting"
	grep -qx "# pod default/seed-gu8tf-7d9c5b8f4-x2kqp uid $uid" "$file" ||
		fail "the hints file does not name the pod"
	has_link "$POD_NS" hpn0 || fail "no hpn0 in the pod"
	prev=$(with_prev "$conf" "$res")
	run_plugin CHECK "$prev" CNI_ARGS="$(args_of "$SEED")"
	expect_ok "CHECK"
	run_plugin DEL "$prev" CNI_ARGS="$(args_of "$SEED")"
	expect_ok "DEL"
	expect_requests 2 "CHECK and DEL"
	untouched "DEL of the seed's pod"

}
scenario "the seed's pod: label only, GU8TF, 8 GPUs" seed_pod

# --- P16EN: 16 GPUs attach with IB disabled; 8 are refused.
p16en() {
	local conf res
	setup
	conf=$(kconf)
	run_plugin ADD "$conf" CNI_ARGS="$(args_of "$P8")"
	expect_err 7 "ADD of P16EN with 8 GPUs" 'P16EN runs 16-GPU pods only; this pod has 8 GPUs'
	untouched "P16EN with 8 GPUs refused"
	run_plugin ADD "$conf" CNI_ARGS="$(args_of "$P16")"
	expect_result "ADD of P16EN with 16 GPUs"
	res=$OUT
	jq_ok '.nccl.env.NCCL_IB_DISABLE == "1" and .nccl.env.NCCL_IB_HCA == "" and
		.nccl.env.NCCL_SOCKET_IFNAME == "eth0"' "P16EN: IB disabled" "$res"
	expect_requests 2 "two P16EN pods"
	run_plugin DEL "$(with_prev "$conf" "$res")" CNI_ARGS="$(args_of "$P16")"
	expect_ok "DEL"
	untouched "DEL of P16EN"
}
scenario "P16EN: 16 GPUs with IB disabled, 8 refused" p16en

# --- no label: passed through; a recreated pod: refused.
not_selected() {
	local conf prev
	setup
	prev='{"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": "/x"}],
		"ips": [{"address": "10.1.0.5/16", "interface": 0}]}'
	conf=$(kconf '.prevResult = $p' --argjson p "$prev")
	run_plugin ADD "$conf" CNI_ARGS="$(args_of "$PLAIN")"
	expect_result "ADD of a pod without the label"
	jq_ok '.interfaces == $p.interfaces and .ips == $p.ips and (has("nccl") | not)' \
		"prevResult passed through unchanged" "$OUT" --argjson p "$prev"
	expect_requests 1 "a pod without the label"
	untouched "a pod passed through"
	run_plugin DEL "$conf" CNI_ARGS="$(args_of "$PLAIN")"
	expect_ok "DEL of a pod passed through"
	run_plugin ADD "$conf" CNI_ARGS="$(args_of "$SEED" 00000000-1111-2222-3333-444444444444)"
	expect_err 3 "ADD of a pod whose uid is not K8S_POD_UID" \
		"uid is $(uid_of "$SEED"), not K8S_POD_UID 00000000-1111-2222-3333-444444444444"
	untouched "a recreated pod refused"
}
scenario "a pod without the label passes through; another pod's uid is refused" not_selected

# --- the API's and the caller's faults: clean errors, nothing changed.
faults() {
	local conf
	setup
	conf=$(kconf)
	kubeconfig "$KUBE_WORK/bad.kubeconfig" "$API" file "token: not-$TOKEN"
	run_plugin ADD "$(jq -c --arg k "$KUBE_WORK/bad.kubeconfig" '.kubernetes.kubeconfig = $k' <<<"$conf")" \
		CNI_ARGS="$(args_of "$SEED")"
	expect_err 109 "401" "Kubernetes API $API: GET pod $SEED: 401 Unauthorized"
	untouched "401"
	echo "status 403" >"$KUBE_WORK/mode"
	run_plugin ADD "$conf" CNI_ARGS="$(args_of "$SEED")"
	expect_err 109 "403" '403 Forbidden: user "hpn-rdma" .* may not get pods in namespace default'
	untouched "403"
	: >"$KUBE_WORK/mode"
	run_plugin ADD "$conf" CNI_ARGS="$(args_of default/gone-0 "$(uid_of "$SEED")")"
	expect_err 3 "404" 'pod default/gone-0 does not exist'
	untouched "404"
	echo stall >"$KUBE_WORK/mode"
	run_plugin ADD "$(jq -c '.kubernetes.timeout = 1000' <<<"$conf")" CNI_ARGS="$(args_of "$SEED")"
	expect_err 11 "a server that never answers" "$API.*no answer in time"
	untouched "a timeout"
	: >"$KUBE_WORK/mode"
	run_plugin ADD "$(jq -c --arg k "$KUBE_WORK/none" '.kubernetes.kubeconfig = $k' <<<"$conf")" \
		CNI_ARGS="$(args_of "$SEED")"
	expect_err 5 "a missing kubeconfig" \
		"read pod $SEED from the Kubernetes API \\(podSelector.label decides\\): kubeconfig $KUBE_WORK/none"
	untouched "a missing kubeconfig"
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=default"
	expect_err 4 "CNI_ARGS without the pod's name and uid" \
		'ADD must read the pod from the Kubernetes API \(podSelector.label decides\), but CNI_ARGS lacks K8S_POD_NAME, K8S_POD_UID'
	run_plugin ADD "$conf"
	expect_err 4 "no CNI_ARGS" 'lacks K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID'
	untouched "missing CNI_ARGS"
	# The stalled request is never answered, so the stand-in does not log it.
	expect_requests 3 "401, 403, 404"
}
scenario "401, 403, 404, timeout, kubeconfig, CNI_ARGS: clean errors, nothing changed" faults

# --- where the annotations decide, the API is never asked.
annotations_decide() {
	local conf res ann
	setup
	ann='{"alibabacloud.com/hpn-type": "rdma", "alibabacloud.com/gpu-model-series": "P16EN",
		"alibabacloud.com/gpu-count": "16"}'
	conf=$(kconf '.podSelector.annotation = "alibabacloud.com/hpn-type" |
		.runtimeConfig["io.kubernetes.cri.pod-annotations"] = $a' --argjson a "$ann")
	run_plugin ADD "$conf" CNI_ARGS="$(args_of "$P16")"
	expect_result "ADD of a pod its annotations decide"
	res=$OUT
	jq_ok '.nccl.env.NCCL_IB_DISABLE == "1"' "P16EN from the annotation" "$res"
	expect_requests 0 "a pod the annotations decide"
	run_plugin DEL "$(with_prev "$conf" "$res")" CNI_ARGS="$(args_of "$P16")"
	expect_ok "DEL"
	untouched "DEL"
	# An annotation selector alone that does not select: nothing to ask.
	run_plugin ADD "$(jq -c '.podSelector = {annotation: "alibabacloud.com/hpn-type"} |
		del(.runtimeConfig)' <<<"$conf")" CNI_ARGS="$(args_of "$SEED")"
	expect_result "ADD of a pod an annotation selector does not pick"
	expect_requests 0 "a pod an annotation selector does not pick"
	# The count missing from the annotations: asked, and the pod's answer used.
	run_plugin ADD "$(jq -c 'del(.runtimeConfig["io.kubernetes.cri.pod-annotations"]["alibabacloud.com/gpu-count"])' <<<"$conf")" \
		CNI_ARGS="$(args_of "$P8")"
	expect_err 7 "P16EN annotated, 8 GPUs in the pod spec" 'this pod has 8 GPUs'
	expect_requests 1 "the count missing from the annotations"
	untouched "the count from the pod"
	# A token file others can read: a warning, and the lookup goes on.
	echo "$TOKEN" >"$KUBE_WORK/token"
	chmod 0644 "$KUBE_WORK/token"
	kubeconfig "$KUBE_WORK/tf.kubeconfig" "$API" file "tokenFile: $KUBE_WORK/token"
	run_plugin ADD "$(jq -c --arg k "$KUBE_WORK/tf.kubeconfig" '.kubernetes.kubeconfig = $k |
		del(.runtimeConfig)' <<<"$conf")" CNI_ARGS="$(args_of "$P16")"
	expect_result "ADD with a world-readable token file"
	res=$OUT
	grep -q "warn: token file $KUBE_WORK/token .*readable by group or others (mode 0644)" \
		"$T/plugin.log" || fail "no warning about the token file in the plugin's log"
	run_plugin DEL "$(with_prev "$conf" "$res")" CNI_ARGS="$(args_of "$P16")"
	expect_ok "DEL"
	untouched "DEL"
}
scenario "annotations decide: no request; a readable token file: a warning" annotations_decide

# --- the API server down after ADD: CHECK, STATUS, DEL and GC go by the journal.
api_down() {
	local conf res prev
	setup
	conf=$(kconf)
	run_plugin ADD "$conf" CNI_ARGS="$(args_of "$P16")"
	expect_result "ADD"
	res=$OUT
	expect_requests 1 "ADD"
	kube_stop
	prev=$(with_prev "$conf" "$res")
	run_plugin CHECK "$prev" CNI_ARGS="$(args_of "$P16")"
	expect_ok "CHECK with the API server down"
	# STATUS and GC are 1.1.0's; Debian's static plugin speaks up to 1.0.0.
	run_plugin STATUS "$(jq -c '.cniVersion = "1.1.0" | del(.ipam)' <<<"$conf")"
	expect_ok "STATUS with the API server down"
	run_plugin DEL "$prev" CNI_ARGS="$(args_of "$P16")"
	expect_ok "DEL with the API server down"
	untouched "DEL with the API server down"
	run_plugin DEL "$prev" CNI_ARGS="$(args_of "$P16")"
	expect_ok "DEL again"
	run_plugin GC "$(jq -c '.cniVersion = "1.1.0" | del(.ipam) |
		.["cni.dev/valid-attachments"] = []' <<<"$conf")"
	expect_ok "GC with the API server down"
	# And ADD then fails, cleanly: try again later.
	run_plugin ADD "$conf" CNI_ARGS="$(args_of "$P16")"
	expect_err 11 "ADD with the API server down" "$API.*Couldn't connect"
	untouched "ADD with the API server down"
}
scenario "the API server down: CHECK, STATUS, DEL, GC succeed; ADD fails cleanly" api_down

t_done
