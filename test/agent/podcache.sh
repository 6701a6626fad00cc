#!/usr/bin/env bash
# The agent as the node's API client (issue 30 item 6): hpn-rdma-agent lists
# and watches the pods of its node from the API stand-in (test/kube/
# apiserver.py, in the scenario's host netns) and answers the plugin's pod
# lookup (podSelector.label) on its lookup socket ("query": "pod"), so ADD
# makes no request to the API; as root in throwaway namespaces
# (test/netns/lib.sh), the node of test/agent/lib.sh.
#
# Scenarios: a pod whose label decides attached from the cache with no pod
# GET in the stand-in's log; a label changed in the API seen by the next ADD
# through the watch; a pod created after the agent started known; a pod
# recreated under its name (new UID) not answered from the stale entry; the
# agent down, the plugin asks the API itself; the watch cut (connection
# lost) and a 410 Gone (compacted) each relisted, the cache right again; the
# plugin's kubeconfig holds a token of its own service account (TokenRequest,
# get pods only), renewed at 80% of its lifetime, the agent's own token in no
# file, a refusal loud and the plugin's token kept until it expires; a
# plugin config reading a label the cache does not keep is answered
# "unknown" and the plugin asks the API.
# kubectl (when installed) lists the node's pods by field selector and
# watches the label change, so a real client checks the stand-in's list and watch.
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=../kube/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../kube/lib.sh"

t_init
agent_require
command -v openssl >/dev/null || skip "openssl is not installed (scripts/install-deps.sh)"
[[ -x $PY ]] || skip "$PY is not installed (scripts/install-deps.sh)"

UID1=5b0c7a51-1f7e-4c55-9d43-2a1c0b9e7f10
UID2=0d6f0e1a-2b3c-4d5e-8f70-112233445566
LABEL=alibabacloud.com/hpn-type
KUBE_LIFETIME=300

# mk_pod NS NAME UID VALUE [NODE]: the pod in the stand-in's directory, label
# $LABEL=VALUE ("" none), on NODE (default node1); written whole at once.
mk_pod() {
	local f=$KUBE_WORK/pods/$1/$2.json
	mkdir -p "${f%/*}"
	jq -n --arg ns "$1" --arg name "$2" --arg uid "$3" --arg v "$4" --arg node "${5:-node1}" \
		--arg l "$LABEL" '{kind: "Pod", apiVersion: "v1",
		metadata: {namespace: $ns, name: $name, uid: $uid,
			labels: ({app: "trainer"} + (if $v == "" then {} else {($l): $v} end)),
			annotations: {"example.com/note": "x"}},
		spec: {nodeName: $node, containers: [{name: "main", image: "busybox",
			env: [{name: "A", value: "b"}],
			resources: {limits: {"nvidia.com/gpu": "8"}}}]}}' >"$f.tmp"
	mv "$f.tmp" "$f"
}

# cache_up: the stand-in, the agent's service account for it, the node with
# the agent watching node1's pods; the plugin's config with podSelector and
# the kubeconfig the agent keeps.
cache_up() {
	KUBE_WORK=$T/kube-$SCEN
	rm -rf "$KUBE_WORK"
	mkdir -p "$KUBE_WORK/pods" "$KUBE_WORK/sa"
	kube_pki
	KUBE_PY_WRAP=(ip netns exec "$HOST_NS")
	mk_pod ns1 trainer "$UID1" rdma
	mk_pod ns1 web "$UID2" ""
	mk_pod ns1 elsewhere "$UID2" rdma node2
	kube_start "$KUBE_WORK/pods" || fail "the API stand-in did not start"
	echo "cache-agent-token" >"$KUBE_WORK/tokens"
	echo "cache-agent-token" >"$KUBE_WORK/sa/token"
	cp "$KUBE_WORK/pki/ca.crt" "$KUBE_WORK/sa/ca.crt"
	# shellcheck disable=SC2154 # KUBE_PORT_good: set by kube_start (printf -v)
	export KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$KUBE_PORT_good
	AGENT_FLAGS=(--cri-socket none --node-name node1 --metrics-address "127.0.0.1:$MPORT"
		--kubeconfig "$KUBE_WORK/agent.kubeconfig" --service-account "$KUBE_WORK/sa"
		${PTTL:+--plugin-token-seconds "$PTTL"})
	NODE_CONF=".kubernetes = {kubeconfig: \"$KUBE_WORK/agent.kubeconfig\", timeout: 3000} |
		.podSelector = {label: \"$LABEL\", value: \"rdma\"}"
	node_up plain
	CONF=$(agent_net_conf "$NODE_CONF")
	wait_log "pod cache: 2 pods of node node1 listed" "the first list"
}

cache_down() {
	node_down
	kube_stop
	unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT
}

# pod_gets NS/NAME: the stand-in's GETs of that pod.
pod_gets() {
	grep -c " /api/v1/namespaces/${1%/*}/pods/${1#*/} " "$KUBE_WORK/requests.log" || true
}

# ask NS NAME UID: the agent's reply to the pod question, in OUT.
ask() {
	OUT=$(lookup_raw "$(jq -cn --arg ns "$1" --arg n "$2" --arg u "$3" \
		'{version: 1, namespace: $ns, name: $n, uid: $u, query: "pod"}')")
}

# wait_label NS NAME UID VALUE: the cache answers the pod with $LABEL=VALUE ("" none) within 10 s.
wait_label() {
	local i
	for ((i = 0; i < 100; i++)); do
		ask "$1" "$2" "$3"
		jq -e --arg l "$LABEL" --arg v "$4" --arg u "$3" '.pod.metadata.uid == $u and
			(.pod.metadata.labels[$l] // "") == $v' <<<"$OUT" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "the cache does not answer $1/$2 with $LABEL=\"$4\" within 10 s: $OUT
$(tail -n 10 "$T/agent.log")"
}

args() { # args NAME UID
	echo "K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=$1;K8S_POD_UID=$2"
}

# add_from_cache NAME UID WHAT: ADD attaches hpn0, the pod read from the
# agent (the plugin's log says so), no GET of the pod; then DEL.
add_from_cache() {
	local before
	before=$(pod_gets "ns1/$1")
	: >"$T/plugin.log"
	run_plugin ADD "$CONF" CNI_ARGS="$(args "$1" "$2")"
	expect_result "$3"
	has_link "$POD_NS" hpn0 || fail "$3: no hpn0 in the pod"
	grep -q "pod ns1/$1 from hpn-rdma-agent's pod cache (podSelector.label decides): uid $2, 8 nvidia.com/gpu" \
		"$T/plugin.log" || fail "$3: the plugin's log does not say the agent answered: $(cat "$T/plugin.log")"
	[[ $(pod_gets "ns1/$1") == "$before" ]] ||
		fail "$3: the plugin asked the API: $(tail -n 5 "$KUBE_WORK/requests.log")"
	run_plugin DEL "$CONF" CNI_ARGS="$(args "$1" "$2")"
	expect_ok "DEL after $3"
}

# ---- scenarios --------------------------------------------------------------------

from_cache() {
	local n
	cache_up
	add_from_cache trainer "$UID1" "ADD of a pod labelled rdma, from the cache"
	[[ $(pod_gets ns1/trainer) == 0 ]] || fail "a GET of the pod was made"
	grep -q 'pods?fieldSelector=spec.nodeName%3Dnode1&limit=' "$KUBE_WORK/requests.log" ||
		fail "the agent did not list node1's pods: $(cat "$KUBE_WORK/requests.log")"
	grep -q 'pods?fieldSelector=spec.nodeName%3Dnode1&watch=1&resourceVersion=[0-9]' \
		"$KUBE_WORK/requests.log" || fail "the agent did not watch node1's pods"
	# The cache holds what the plugin reads with its config (podSelector.label,
	# the GPU model's label and annotation, the GPU resource), not the whole object.
	ask ns1 trainer "$UID1"
	jq_ok '.version == 1 and .pod.kind == "Pod" and .pod.metadata.labels == {"alibabacloud.com/hpn-type": "rdma"}
		and .pod.metadata.annotations == {}
		and .pod.spec.containers == [{name: "main", resources: {limits: {"nvidia.com/gpu": "8"}}}]
		and (.pod.spec | has("nodeName") | not)' "the cached pod, trimmed" "$OUT"
	# A pod of another node is not watched; a pod without the label passes through.
	ask ns1 elsewhere "$UID2"
	jq_ok '.unknown == "the pod is not in the cache"' "another node's pod" "$OUT"
	run_plugin ADD "$CONF" CNI_ARGS="$(args web "$UID2")"
	expect_result "ADD of a pod without the label"
	has_link "$POD_NS" hpn0 && fail "a pod without the label got hpn0"
	n=$(pod_gets ns1/web)
	[[ $n == 0 ]] || fail "the unlabelled pod was read from the API ($n GETs)"
	# A question the agent refuses: an unknown query.
	OUT=$(lookup_raw '{"version":1,"namespace":"ns1","name":"trainer","query":"node"}')
	jq_ok '.error | test("query \"node\" is not \"pod\"")' "an unknown query refused" "$OUT"
	cache_down
}
run "ADD of a labelled pod answered from the agent's cache, no pod GET" from_cache

# kube_ctl ARGS...: kubectl in the host netns as the agent's service account
# (the plugin's kubeconfig may get a pod, nothing else: issue 40, finding 8).
kube_ctl() {
	[ -f "$KUBE_WORK/ctl.kubeconfig" ] ||
		kubeconfig "$KUBE_WORK/ctl.kubeconfig" "https://127.0.0.1:$KUBE_PORT_good" file \
			"token: cache-agent-token"
	HOME=$KUBE_WORK ip netns exec "$HOST_NS" kubectl --kubeconfig "$KUBE_WORK/ctl.kubeconfig" "$@"
}

label_change() {
	local kpid=
	cache_up
	# kubectl, a real client, lists by the node's field selector and watches the change too.
	if command -v kubectl >/dev/null; then
		OUT=$(kube_ctl get pods -A --field-selector spec.nodeName=node1 -o name 2>&1)
		[[ $(sort <<<"$OUT" | tr '\n' ' ') == "pod/trainer pod/web " ]] ||
			fail "kubectl get pods --field-selector spec.nodeName=node1: $OUT"
		# The plugin's own kubeconfig lists nothing (it gets a pod by name: plugin-token.sh).
		OUT=$(HOME=$KUBE_WORK ip netns exec "$HOST_NS" kubectl --kubeconfig "$KUBE_WORK/agent.kubeconfig" \
			get pods -A -o name 2>&1) && fail "the plugin's kubeconfig lists pods: $OUT"
		grep -q "Forbidden\|forbidden" <<<"$OUT" || fail "the plugin's list not refused as forbidden: $OUT"
		kube_ctl get pods -n ns1 --watch -o 'jsonpath={.metadata.name}={.metadata.labels.alibabacloud\.com/hpn-type}{"\n"}' \
			>"$T/kubectl.watch" 2>&1 &
		kpid=$!
		sleep 1
	else
		echo "# kubectl is not installed: the stand-in's watch is not read by kubectl"
	fi
	mk_pod ns1 trainer "$UID1" none
	wait_label ns1 trainer "$UID1" none
	if [[ -n $kpid ]]; then
		sleep 0.5
		kill "$kpid" 2>/dev/null || true
		wait "$kpid" 2>/dev/null || true
		{ grep -qx 'trainer=rdma' "$T/kubectl.watch" && grep -qx 'trainer=none' "$T/kubectl.watch"; } ||
			fail "kubectl get pods --watch did not see the label change: $(cat "$T/kubectl.watch")"
	fi
	: >"$T/plugin.log"
	run_plugin ADD "$CONF" CNI_ARGS="$(args trainer "$UID1")"
	expect_result "ADD after the label was changed to none"
	has_link "$POD_NS" hpn0 && fail "the label changed to none, yet hpn0 was attached"
	grep -q "pod ns1/trainer from hpn-rdma-agent's pod cache" "$T/plugin.log" ||
		fail "the changed pod was not answered by the agent"
	mk_pod ns1 trainer "$UID1" rdma
	wait_label ns1 trainer "$UID1" rdma
	add_from_cache trainer "$UID1" "ADD after the label was set back to rdma"
	[[ $(pod_gets ns1/trainer) == 0 ]] || fail "a GET of the pod was made"
	cache_down
}
run "a label changed in the API is seen by the next ADD through the watch" label_change

new_pod() {
	cache_up
	ask ns1 late "$UID2"
	jq_ok '.unknown == "the pod is not in the cache"' "a pod not yet created" "$OUT"
	mk_pod ns1 late "$UID2" rdma
	wait_label ns1 late "$UID2" rdma
	add_from_cache late "$UID2" "ADD of a pod created after the agent started"
	# Deleted: gone from the cache.
	rm "$KUBE_WORK/pods/ns1/late.json"
	for ((i = 0; i < 100; i++)); do
		ask ns1 late "$UID2"
		[[ $(jq -r '.unknown // ""' <<<"$OUT") == "the pod is not in the cache" ]] && break
		sleep 0.1
	done
	jq_ok '.unknown == "the pod is not in the cache"' "a deleted pod" "$OUT"
	cache_down
}
run "a pod created after the agent started is known; a deleted one is not" new_pod

recreated() {
	local n
	cache_up
	rm "$KUBE_WORK/pods/ns1/trainer.json"
	sleep 0.3
	mk_pod ns1 trainer "$UID2" rdma
	wait_label ns1 trainer "$UID2" rdma
	ask ns1 trainer "$UID1"
	jq_ok '.unknown == "the cached pod has another UID"' "the old UID of a recreated pod" "$OUT"
	# The old sandbox's ADD: not from the cache; the API says the same (code 3).
	: >"$T/plugin.log"
	run_plugin ADD "$CONF" CNI_ARGS="$(args trainer "$UID1")"
	expect_err 3 "ADD under the old UID" "not K8S_POD_UID $UID1"
	grep -q "pod ns1/trainer: not from hpn-rdma-agent (hpn-rdma-agent does not know: the cached pod has another UID)" \
		"$T/plugin.log" || fail "the plugin's log does not say why the agent did not answer"
	n=$(pod_gets ns1/trainer)
	[[ $n == 1 ]] || fail "the plugin did not ask the API itself ($n GETs)"
	add_from_cache trainer "$UID2" "ADD of the recreated pod"
	cache_down
}
run "a pod recreated under its name (new UID) is not answered from the stale entry" recreated

agent_down() {
	local n
	cache_up
	stop_agent
	: >"$T/plugin.log"
	run_plugin ADD "$CONF" CNI_ARGS="$(args trainer "$UID1")"
	expect_result "ADD with the agent down"
	has_link "$POD_NS" hpn0 || fail "no hpn0 with the agent down"
	n=$(pod_gets ns1/trainer)
	[[ $n == 1 ]] || fail "with the agent down the plugin made $n GETs of the pod, not 1"
	grep -q "pod ns1/trainer from the Kubernetes API" "$T/plugin.log" ||
		fail "the plugin's log does not say the API answered: $(cat "$T/plugin.log")"
	run_plugin DEL "$CONF" CNI_ARGS="$(args trainer "$UID1")"
	expect_ok "DEL"
	node_down
	kube_stop
	unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT
}
run "the agent down: the plugin reads the pod from the API" agent_down

watch_lost() {
	cache_up
	# A connection lost under the watch: not synced, listed again.
	touch "$KUBE_WORK/pods/.drop-watches"
	wait_log "not synced, listing again" "the watch cut"
	wait_log "pod cache: 2 pods of node node1 listed" "the list after the cut" 2
	mk_pod ns1 trainer "$UID1" none
	wait_label ns1 trainer "$UID1" none
	# 410 Gone: the events after our resourceVersion were compacted away;
	# the watch ends cleanly, the next one from our version is refused.
	echo "compact 1" >"$KUBE_WORK/mode"
	touch "$KUBE_WORK/pods/.end-watches"
	wait_log "is gone (410)" "the watch after compaction"
	wait_log "pod cache: 2 pods of node node1 listed" "the list after 410" 3
	[[ $(cat "$KUBE_WORK/mode") == "compact 0" ]] || fail "the compaction was not asked for"
	mk_pod ns1 trainer "$UID1" rdma
	wait_label ns1 trainer "$UID1" rdma
	add_from_cache trainer "$UID1" "ADD after the watch was cut and compacted"
	# Its calls on the loop: the watch the one under way, the lists answered.
	[[ $(metric_value hpn_rdma_kube_calls_in_flight) == 1 ]] ||
		fail "hpn_rdma_kube_calls_in_flight is not 1 (the watch): $(metric_value hpn_rdma_kube_calls_in_flight)"
	(($(metric_value 'hpn_rdma_kube_calls_total{result="answer"}') >= 3)) ||
		fail "fewer than three lists answered: $(scrape | grep hpn_rdma_kube_)"
	# The API down: not synced, so "unknown", and the plugin's own lookup.
	kube_stop
	touch "$KUBE_WORK/pods/.drop-watches"
	wait_log "not synced, listing again" "the API gone" 2
	# Said once while it stays down, though listed again meanwhile (0.2 s, doubling).
	wait_more hpn_rdma_pod_cache_failures_total 2 "two more failed lists with the API down"
	wait_more 'hpn_rdma_kube_calls_total{result="error"}' 1 "a list that ended in an error"
	[[ $(metric_value hpn_rdma_pod_cache_synced) == 0 ]] ||
		fail "hpn_rdma_pod_cache_synced is not 0 with the API down"
	(($(grep -c "not synced, listing again" "$T/agent.log") == 2)) ||
		fail "the API down said more than once: $(grep "not synced" "$T/agent.log")"
	ask ns1 trainer "$UID1"
	jq_ok '.unknown == "the pod cache is not synced with the API"' "not synced: unknown" "$OUT"
	node_down
	unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT
}
run "the watch cut, and 410 Gone: relisted, the cache right again; the API down: unknown" watch_lost


# wait_log_s TEXT N SECONDS WHAT: the agent's log says TEXT N times within SECONDS.
wait_log_s() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		(($(grep -cF "$1" "$T/agent.log") >= $2)) && return 0
		sleep 0.1
	done
	fail "$4: the agent's log does not say \"$1\" $2 times in $3 s: $(tail -n 15 "$T/agent.log")"
}

plugin_token() {
	local kc tok f
	PTTL=10 cache_up
	kc=$KUBE_WORK/agent.kubeconfig
	head -n 1 "$kc" | grep -q '^# hpn-rdma-plugin-token: hpn-rdma/hpn-rdma-plugin until ' ||
		fail "the plugin's kubeconfig is not the plugin's token: $(head -n 1 "$kc")"
	[[ $(stat -c %a "$kc") == 600 ]] || fail "the plugin's kubeconfig is not 0600"
	# The agent's token in no file but the stand-in's own and the service account's.
	f=$({ grep -rlF cache-agent-token "$KUBE_WORK" /run/hpn-rdma
		grep -rlF --exclude-dir='kube-*' cache-agent-token "$T"; } 2>/dev/null |
		grep -vxF -e "$KUBE_WORK/tokens" -e "$KUBE_WORK/sa/token" || true)
	[[ -z $f ]] || fail "the agent's token is on disk in $f"
	ls -l "/proc/$AGENT_PID/fd" 2>/dev/null | grep -q 'memfd:' ||
		fail "the agent's own kubeconfig is not in a memfd"
	# Its watch as the agent, its lookups never as the plugin.
	grep -q "/api/v1/pods.*token:cache-ag" "$KUBE_WORK/requests.log" ||
		fail "the agent's list was not made with its own token: $(tail -n 3 "$KUBE_WORK/requests.log")"
	tok=$(sed -n 's/^ *token: "\(.*\)"$/\1/p' "$kc")
	wait_log_s "a token of service account hpn-rdma/hpn-rdma-plugin, for " 2 12 "renewed at 80% (8 s)"
	grep -qF "token: \"$tok\"" "$kc" && fail "renewed, yet the kubeconfig holds the first token"
	# Refused: said once, loud; the plugin's current token stays (until it expires).
	tok=$(sed -n 's/^ *token: "\(.*\)"$/\1/p' "$kc")
	: >"$KUBE_WORK/token-requests"
	wait_log_s "the API refused the plugin's token" 1 12 "a refused TokenRequest"
	grep -qF "token: \"$tok\"" "$kc" || fail "refused, and the plugin's current token was dropped"
	rm "$KUBE_WORK/token-requests"
	wait_log_s "the plugin's token renewed after" 1 70 "granted again"
	grep -qF "token: \"$tok\"" "$kc" && fail "granted again, yet the old token stayed"
	add_from_cache trainer "$UID1" "ADD after the renewals"
	cache_down
}
run "the plugin's kubeconfig: its own service account's token, renewed; refused, loud and kept" plugin_token

# A plugin config that reads another label than the agent's --config: the
# cache does not keep it, so the agent answers "unknown" naming the key and
# the plugin asks the API (before: the cached pod without the label, and the
# pod silently not attached).
other_keys() {
	local conf2 uid3=7e3f1c2a-5b6d-4e8f-9a0b-1c2d3e4f5a6b before
	cache_up
	LABEL=example.com/rdma mk_pod ns1 other "$uid3" rdma
	conf2=$(agent_net_conf ".kubernetes = {kubeconfig: \"$KUBE_WORK/agent.kubeconfig\", timeout: 3000} |
		.podSelector = {label: \"example.com/rdma\", value: \"rdma\"}")
	before=$(pod_gets ns1/other)
	: >"$T/plugin.log"
	run_plugin ADD "$conf2" CNI_ARGS="$(args other "$uid3")"
	expect_result "ADD of a pod selected by a label the agent does not keep"
	has_link "$POD_NS" hpn0 || fail "the pod selected by example.com/rdma got no hpn0"
	grep -q 'not from hpn-rdma-agent (.*label \\\?"example.com/rdma\\\?" is not kept' "$T/plugin.log" ||
		fail "the plugin's log does not say the agent lacks the key: $(cat "$T/plugin.log")"
	(($(pod_gets ns1/other) > before)) || fail "the plugin did not ask the API for the pod"
	run_plugin DEL "$conf2" CNI_ARGS="$(args other "$uid3")"
	expect_ok "DEL of the pod selected by another label"
	# The agent's own keys are still answered from the cache.
	add_from_cache trainer "$UID1" "ADD with the agent's keys, after"
	cache_down
}
run "a plugin config reading a label the cache does not keep: unknown, the plugin asks the API" other_keys

t_done
