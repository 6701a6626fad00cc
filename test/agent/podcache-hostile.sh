#!/usr/bin/env bash
# The agent's pod cache against hostile tenants (issue 40 finding 4): any pod
# with spec.nodeName set to this node is listed and watched by the agent, so
# its labels and annotations (up to 256 KiB each pod, as many pods as the
# tenants may create) reach the agent's memory and its list pages. As root in
# throwaway namespaces (test/netns/lib.sh), the node of test/agent/lib.sh, the
# API stand-in (test/kube/apiserver.py) in the scenario's host netns, its
# DIR/.generated pods standing in for the tenants.
#
# Scenarios: 500 hostile pods (100 labels and a 250000-byte annotation each)
# come through the watch, then three relists (410 Gone after a compaction, a
# watch cut, a continue token expired between pages) and 500 MODIFIED events:
# the agent's RSS stays bounded (measured before and after, printed), every
# relist succeeds, the cache's bytes stay within their cap, and a legitimate
# labelled pod is still answered from the cache (ADD with no pod GET); a
# list of 130 small pods comes in pages (limit, continue); a page cut
# mid-stream is asked again with half as many pods; with the plugin's keys
# (main.c calling podwatch_keep) only those are kept, and a reload that
# changes podSelector.label lists again.
#
# HPN_PODCACHE_RSS_MAX_KB (default 65536): the agent's peak RSS allowed (a
# release build; ASan's quarantine keeps what is freed, so not there).
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
RSS_MAX_KB=${HPN_PODCACHE_RSS_MAX_KB:-65536}

# mk_pod NS NAME UID VALUE: the pod on node1 in the stand-in's directory,
# label $LABEL=VALUE ("" none); written whole at once.
mk_pod() {
	local f=$KUBE_WORK/pods/$1/$2.json
	mkdir -p "${f%/*}"
	jq -n --arg ns "$1" --arg name "$2" --arg uid "$3" --arg v "$4" --arg l "$LABEL" \
		'{kind: "Pod", apiVersion: "v1",
		metadata: {namespace: $ns, name: $name, uid: $uid,
			labels: ({app: "trainer"} + (if $v == "" then {} else {($l): $v} end)),
			annotations: {"example.com/note": "x"}},
		spec: {nodeName: "node1", containers: [{name: "main", image: "busybox",
			resources: {limits: {"nvidia.com/gpu": "8"}}}]}}' >"$f.tmp"
	mv "$f.tmp" "$f"
}

# gen_pods COUNT LABELS BYTES ROUND SECONDS: the stand-in's generated pods
# (apiserver.py, DIR/.generated), namespace hostile, on node1; then until the
# agent applied COUNT more watch events, within SECONDS.
gen_pods() {
	local i want
	want=$(($(metric_value hpn_rdma_pod_cache_events_total) + $1))
	jq -n --argjson c "$1" --argjson l "$2" --argjson b "$3" --argjson r "$4" \
		'{count: $c, namespace: "hostile", node: "node1", labels: $l,
		annotationBytes: $b, round: $r}' >"$KUBE_WORK/pods/.generated.tmp"
	mv "$KUBE_WORK/pods/.generated.tmp" "$KUBE_WORK/pods/.generated"
	for ((i = 0; i < $5 * 10; i++)); do
		(($(metric_value hpn_rdma_pod_cache_events_total) >= want)) && return 0
		sleep 0.1
	done
	fail "the $1 generated pods' events (round $4): $(metric_value hpn_rdma_pod_cache_events_total) applied, not $want
agent log: $(tail -n 15 "$T/agent.log")"
}

# cache_up: as podcache.sh's: the stand-in with ns1/trainer (labelled rdma)
# and ns1/web, the agent watching node1's pods, the plugin's config with
# podSelector.label and the kubeconfig the agent keeps.
cache_up() {
	KUBE_WORK=$T/kube-$SCEN
	rm -rf "$KUBE_WORK"
	mkdir -p "$KUBE_WORK/pods" "$KUBE_WORK/sa"
	kube_pki
	KUBE_PY_WRAP=(ip netns exec "$HOST_NS")
	mk_pod ns1 trainer "$UID1" rdma
	mk_pod ns1 web "$UID2" ""
	kube_start "$KUBE_WORK/pods" || fail "the API stand-in did not start"
	echo "cache-agent-token" >"$KUBE_WORK/tokens"
	echo "cache-agent-token" >"$KUBE_WORK/sa/token"
	cp "$KUBE_WORK/pki/ca.crt" "$KUBE_WORK/sa/ca.crt"
	# shellcheck disable=SC2154 # KUBE_PORT_good: set by kube_start (printf -v)
	export KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$KUBE_PORT_good
	AGENT_FLAGS=(--cri-socket none --node-name node1 --metrics-address "127.0.0.1:$MPORT"
		--kubeconfig "$KUBE_WORK/agent.kubeconfig" --service-account "$KUBE_WORK/sa")
	NODE_CONF=".kubernetes = {kubeconfig: \"$KUBE_WORK/agent.kubeconfig\", timeout: 3000} |
		.podSelector = {label: \"$LABEL\", value: \"rdma\"}"
	node_up plain
	CONF=$(agent_net_conf "$NODE_CONF")
	wait_log "pods of node node1 listed" "the first list"
}

cache_down() {
	node_down
	kube_stop
	unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT
}

# rss_kb [FIELD]: the agent's VmRSS (or FIELD: VmHWM, its peak) in KiB.
rss_kb() {
	awk -v f="${1:-VmRSS}:" '$1 == f { print $2 }' "/proc/$AGENT_PID/status"
}

# ask NS NAME UID: the agent's reply to the pod question, in OUT.
ask() {
	OUT=$(lookup_raw "$(jq -cn --arg ns "$1" --arg n "$2" --arg u "$3" \
		'{version: 1, namespace: $ns, name: $n, uid: $u, query: "pod"}')")
}

# legit_answered WHAT: the cache answers ns1/trainer, labelled rdma.
legit_answered() {
	ask ns1 trainer "$UID1"
	# shellcheck disable=SC2016 # jq's variables, not the shell's
	jq_ok '.pod.metadata.uid == $u and .pod.metadata.labels[$l] == "rdma"' \
		"$1: the labelled pod from the cache" "$OUT" --arg l "$LABEL" --arg u "$UID1"
}

# relisted N WHAT: the agent's log says a list succeeded N times, within 150 s:
# a bound on liveness, not a figure (a list of 502 pods of 290 KB, 145 MB from
# the Python stand-in, takes about 2 s in a release build and 20-60 s under
# ASan beside the other tests).
relisted() {
	local i
	for ((i = 0; i < 1500; i++)); do
		(($(grep -c "pods of node node1 listed" "$T/agent.log") >= $1)) && return 0
		sleep 0.1
	done
	fail "$2: no list number $1 succeeded within 150 s: $(grep "pod cache" "$T/agent.log" | tail -n 5)"
}

pod_gets() {
	grep -c " /api/v1/namespaces/${1%/*}/pods/${1#*/} " "$KUBE_WORK/requests.log" || true
}

# ---- scenarios --------------------------------------------------------------------

hostile() {
	local rss0 rss1 rss2 rss3 hwm before cached max
	cache_up
	legit_answered "before the hostile pods"
	rss0=$(rss_kb)
	# 500 pods of about 300 KB each (100 labels of 63-byte values, a 250000-byte
	# annotation), created after the list: ADDED events through the watch.
	gen_pods 500 100 250000 1 90
	rss1=$(rss_kb)
	info "agent RSS: $rss0 KiB listed (2 pods), $rss1 KiB after 500 hostile pods came through the watch (peak $(rss_kb VmHWM) KiB)"
	legit_answered "after 500 hostile pods came through the watch"
	# Relisted: the watch from a compacted resourceVersion is 410 Gone ...
	echo "compact 1" >"$KUBE_WORK/mode"
	touch "$KUBE_WORK/pods/.end-watches"
	relisted 2 "the list after 410 Gone with 500 hostile pods"
	[[ $(metric_value hpn_rdma_pod_cache_synced) == 1 ]] ||
		fail "not synced after the relist: $(grep "pod cache" "$T/agent.log" | tail -n 5)"
	grep -q 'pods?fieldSelector=spec.nodeName%3Dnode1&limit=[0-9]*&continue=' \
		"$KUBE_WORK/requests.log" || fail "the list of 502 pods was not paged"
	legit_answered "after the relist"
	# ... a watch cut ...
	touch "$KUBE_WORK/pods/.drop-watches"
	relisted 3 "the list after the watch was cut"
	# ... a continue token expired between two pages: the list begins again.
	echo 1 >"$KUBE_WORK/pods/.expire-continue"
	touch "$KUBE_WORK/pods/.drop-watches"
	relisted 4 "the list after its continue token expired"
	[[ $(cat "$KUBE_WORK/pods/.expire-continue") == 0 ]] || fail "no page was answered 410"
	grep -q " 410 " "$KUBE_WORK/requests.log" || fail "the stand-in logged no 410"
	rss2=$(rss_kb)
	# Every hostile pod changed: 500 MODIFIED events.
	gen_pods 500 100 250000 2 90
	rss3=$(rss_kb)
	hwm=$(rss_kb VmHWM)
	info "agent RSS: $rss2 KiB after three relists, $rss3 KiB after 500 MODIFIED events; peak $hwm KiB"
	legit_answered "after the hostile pods changed"
	# The legitimate pod's ADD: from the cache, no GET of the pod.
	before=$(pod_gets ns1/trainer)
	: >"$T/plugin.log"
	run_plugin ADD "$CONF" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer;K8S_POD_UID=$UID1"
	expect_result "ADD of the labelled pod among 500 hostile ones"
	has_link "$POD_NS" hpn0 || fail "no hpn0 in the pod"
	grep -q "pod ns1/trainer from hpn-rdma-agent's pod cache" "$T/plugin.log" ||
		fail "the plugin did not read the pod from the agent: $(cat "$T/plugin.log")"
	[[ $(pod_gets ns1/trainer) == "$before" ]] || fail "the plugin asked the API for the pod"
	run_plugin DEL "$CONF" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer;K8S_POD_UID=$UID1"
	expect_ok "DEL"
	# A hostile pod: not its 250000 bytes, whatever the cache keeps of it.
	ask hostile gen-00007 00000000-0000-4000-8000-000000000007
	((${#OUT} < 16384)) || fail "a hostile pod answered with ${#OUT} bytes"
	jq_ok '(.pod.metadata.annotations["gen.example.com/a"] | not) and
		(.pod or (.unknown | test("bytes")))' "a hostile pod, trimmed or unknown" "$OUT"
	# The cache within its cap, the hostile pods counted.
	cached=$(metric_value hpn_rdma_pod_cache_bytes)
	max=$(metric_value hpn_rdma_pod_cache_bytes_max)
	((max > 0 && cached <= max)) || fail "the cache holds $cached bytes, its cap is $max"
	(($(metric_value hpn_rdma_pod_cache_pods) == 502)) ||
		fail "the cache holds $(metric_value hpn_rdma_pod_cache_pods) pods, not 502"
	if is_asan_build "$HPN_AGENT"; then
		# ASan's quarantine holds what is freed (256 MiB): RSS says nothing of the cache.
		info "an ASan build: the RSS bounds are checked in release builds only"
	else
		((hwm <= RSS_MAX_KB)) || fail "the agent's peak RSS is $hwm KiB, over $RSS_MAX_KB KiB"
		((rss3 - rss0 <= 16384)) ||
			fail "500 hostile pods added $((rss3 - rss0)) KiB to the agent's RSS ($rss0 -> $rss3 KiB)"
	fi
	cache_down
}
run "500 hostile pods: the agent's RSS bounded, relists succeed, the labelled pod answered" hostile

paged() {
	local n
	cache_up
	# 130 small pods: pages of at most 50, each after the last one's continue token.
	gen_pods 130 2 100 1 30
	echo "compact 1" >"$KUBE_WORK/mode"
	touch "$KUBE_WORK/pods/.end-watches"
	relisted 2 "the list of 132 pods"
	n=$(grep -c 'pods?fieldSelector=spec.nodeName%3Dnode1&limit=50&continue=' \
		"$KUBE_WORK/requests.log" || true)
	((n >= 2)) || fail "the list of 132 pods took $n continued pages, not 2: $(grep limit= "$KUBE_WORK/requests.log")"
	ask hostile gen-00129 00000000-0000-4000-8000-000000000129
	jq_ok '.pod.metadata.name == "gen-00129"' "the last page's pod" "$OUT"
	legit_answered "the first page's pod"
	# A page cut mid-stream (half its body, then nothing): asked again with 25.
	echo "stallbody 1" >"$KUBE_WORK/mode"
	touch "$KUBE_WORK/pods/.drop-watches"
	relisted 3 "the list after a page stalled"
	grep -q 'pods?fieldSelector=spec.nodeName%3Dnode1&limit=25' "$KUBE_WORK/requests.log" ||
		fail "the stalled page was not asked again smaller: $(grep limit= "$KUBE_WORK/requests.log" | tail -n 5)"
	legit_answered "after the stalled page"
	cache_down
}
run "a list of 132 pods comes in pages; a page that stalls is asked again smaller" paged

keys_reload() {
	local i conf2
	cache_up
	ask ns1 trainer "$UID1"
	if jq -e '.pod.metadata.labels.app' <<<"$OUT" >/dev/null; then
		info "the agent keeps every label (main.c does not call podwatch_keep): no keys to reload"
		cache_down
		return 0
	fi
	jq_ok '.pod.metadata.labels == {"alibabacloud.com/hpn-type": "rdma"} and
		.pod.metadata.annotations == {}' "only the config's keys kept" "$OUT"
	# podSelector.label changed in the agent's config: the next question lists again.
	conf2=".kubernetes = {kubeconfig: \"$KUBE_WORK/agent.kubeconfig\", timeout: 3000} |
		.podSelector = {label: \"app\", value: \"trainer\"}"
	write_conflist "$conf2"
	wait_log "config $T/net.conflist reloaded" "the config's reload"
	for ((i = 0; i < 100; i++)); do
		ask ns1 trainer "$UID1"
		jq -e '.pod.metadata.labels == {app: "trainer"}' <<<"$OUT" >/dev/null && break
		sleep 0.1
	done
	jq_ok '.pod.metadata.labels == {app: "trainer"}' "the new podSelector.label kept" "$OUT"
	grep -q "the plugin's config changed what the pod cache keeps" "$T/agent.log" ||
		fail "no question was answered unknown while the keys changed"
	cache_down
}
run "podSelector.label changed by a config reload: the cache lists again and keeps the new key" keys_reload

t_done
