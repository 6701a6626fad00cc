#!/usr/bin/env bash
# hpn-rdma-agent publishing its pool as DRA ResourceSlices (doc/dra.md,
# "Publishing the slices") into the API stand-in of test/kube, as root in
# throwaway namespaces (the fake node of test/agent/lib.sh: pool0..pool2 PCI
# functions with RDMA devices, pool3 a plain veth).
#
# Scenarios: the slices after start (device names, attributes, the pool, and
# kubectl reading them); a NIC removed and put back (generation + 1 each
# time); the slices deleted and edited by someone else (put back by the
# resync); the agent restarted (same names, the generation never going back,
# the slices kept at SIGTERM); a pod's NIC moved in and out (no new
# generation); a pool pick out of the slices until DEL (pool_pick); the
# API answering 503 (logged once, the agent serving on,
# published once the API is back); NICs pods share (--dra-shares: the
# scenario "shares" of drashare-slices.sh).
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# shellcheck source=dralib.sh
source "$(dirname "${BASH_SOURCE[0]}")/dralib.sh"

dra_init

# The resync, shortened so that a wiped slice comes back within seconds.
export HPN_DRA_RESYNC_MS=1000

# slices_api: the API stand-in in the scenario's host netns, a service
# account for the agent, and its DRA flags (as agent.sh's dra_api).
slices_api() {
	KUBE_WORK=$T/kube-$SCEN
	rm -rf "$KUBE_WORK"
	mkdir -p "$KUBE_WORK/pods" "$KUBE_WORK/sa"
	KUBE_RESOURCES=$KUBE_WORK/res
	mkdir -p "$KUBE_RESOURCES/resourceslices"
	kube_pki
	KUBE_PY_WRAP=(ip netns exec "$HOST_NS")
	kube_start "$KUBE_WORK/pods" || fail "the API stand-in did not start"
	echo "dra-agent-token" >"$KUBE_WORK/tokens"
	echo "dra-agent-token" >"$KUBE_WORK/sa/token"
	cp "$KUBE_WORK/pki/ca.crt" "$KUBE_WORK/sa/ca.crt"
	# shellcheck disable=SC2154 # KUBE_PORT_good: set by kube_start (printf -v)
	export KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$KUBE_PORT_good
	URL=https://127.0.0.1:$KUBE_PORT_good/apis/resource.k8s.io/v1/resourceslices
	AGENT_FLAGS=(--cri-socket none --dra --node-name node1
		--kubeconfig "$KUBE_WORK/agent.kubeconfig" --service-account "$KUBE_WORK/sa"
		--metrics-address "127.0.0.1:$MPORT")
}

# api ARGS...: curl against the stand-in, as the agent's service account.
api() {
	ip netns exec "$HOST_NS" curl -sS --max-time 10 --cacert "$KUBE_WORK/pki/ca.crt" \
		-H "Authorization: Bearer dra-agent-token" "$@"
}

NAMES='["net-pool3","pci-0000-af-00-0","pci-0000-af-00-1","pci-0000-af-00-2"]'
# The device names with a net- name's hash cut off, sorted.
NAMES_OF='([.[].spec.devices[].name | sub("^(?<p>net-[a-z0-9-]*?)-[0-9a-f]{8}$"; "\(.p)")] | sort)'

# Start: one slice of pool node1 with the four NICs and their attributes;
# kubectl reads it; a NIC removed and put back, each a new generation.
publish() {
	local -a AGENT_FLAGS
	local g
	slices_api
	node_up
	wait_slices 'length == 1' "one ResourceSlice after start"
	jq_ok '.[0] | .spec.driver == $d and .spec.nodeName == "node1"
		and .spec.pool.name == "node1" and .spec.pool.resourceSliceCount == 1
		and .spec.pool.generation >= 1' "the slice's driver, node and pool" "$OUT" \
		--arg d "$DRV"
	jq_ok "$NAMES_OF == \$n" "the four NICs, named by PCI address (pool3 by name)" "$OUT" \
		--argjson n "$NAMES"
	jq_ok '.[0].spec.devices[] | select(.name == "pci-0000-af-00-0") | .attributes |
		.["resource.kubernetes.io/pcieRoot"].string == "pci0000:ae" and
		.["resource.kubernetes.io/pciBusID"].string == "0000:af:00.0" and
		.["resource.kubernetes.io/numaNode"].int == 0' \
		"pool0's standard attributes" "$OUT"
	jq_ok '[.[0].spec.devices[] | select(.name | startswith("net-pool3")) | .attributes |
		has("resource.kubernetes.io/pcieRoot")] == [false]' \
		"pool3 (no PCI function) has no pcieRoot" "$OUT"
	if kubectl_slices; then
		jq_ok "[.items[]] | $NAMES_OF == \$n" "kubectl reads the slice's devices" "$OUT" \
			--argjson n "$NAMES"
	fi
	g=$(gen)
	ip -n "$HOST_NS" link del pool1
	wait_slices '.[0].spec.pool.generation == $g + 1' "pool1 removed: a new generation" 10 \
		--argjson g "$g"
	jq_ok "$NAMES_OF == (\$n - [\"pci-0000-af-00-1\"])" "pool1 gone from the slice" "$OUT" \
		--argjson n "$NAMES"
	mk_nic "$HOST_NS" pool1 peer1
	wait_slices '.[0].spec.pool.generation == $g + 2' "pool1 back: a new generation" 10 \
		--argjson g "$g"
	jq_ok "$NAMES_OF == \$n" "pool1 back in the slice" "$OUT" --argjson n "$NAMES"
	grep -q "published 1 ResourceSlice(s) of pool node1, generation $((g + 2))" \
		"$T/agent.log" || fail "the publish not logged: $(tail -n 5 "$T/agent.log")"
	# The metrics say the same: three rounds that wrote (start, removed, back), a
	# slice written in each, the generation the API holds, one slice.
	wait_metric "^hpn_rdma_dra_pool_generation $((g + 2))\$" "the generation in the metrics"
	for m in 'hpn_rdma_dra_slice_rounds_total\{result="written"\} 3' \
		'hpn_rdma_dra_slice_rounds_total\{result="failed"\} 0' \
		'hpn_rdma_dra_slice_writes_total 3' 'hpn_rdma_dra_slices 1' \
		'hpn_rdma_dra_slice_write_seconds_total 0\.[0-9]*[1-9]'; do
		grep -Eq "^$m\$" "$T/scrape" || fail "no '$m' in the metrics:
$(grep '^hpn_rdma_dra' "$T/scrape")"
	done
	if command -v promtool >/dev/null; then
		promtool check metrics <"$T/scrape" >"$T/promtool.out" 2>&1 ||
			fail "promtool check metrics: $(cat "$T/promtool.out")"
	fi
	node_down
	kube_stop
}
run "slices published at start, with their attributes; a NIC removed and back" publish

# Someone else's changes: the slice deleted, then edited, then a stranger's
# slice of our node and driver: each put right by the resync.
foreign() {
	local -a AGENT_FLAGS
	local g name body
	slices_api
	node_up
	wait_slices 'length == 1' "one ResourceSlice after start"
	g=$(gen)
	name=$(jq -r '.[0].metadata.name' <<<"$OUT")
	OUT=$(api -X DELETE "$URL/$name") || fail "DELETE $name: $OUT"
	[[ ! -e $KUBE_RESOURCES/resourceslices/$name.json ]] || fail "DELETE left $name"
	wait_slices 'length == 1 and .[0].spec.pool.generation > $g' \
		"the deleted slice published again within the resync" 10 --argjson g "$g"
	jq_ok "$NAMES_OF == \$n" "all four devices back" "$OUT" --argjson n "$NAMES"
	g=$(gen)
	# An edit: pool0's numaNode changed and a device dropped.
	body=$(api "$URL/$name" | jq -c '.spec.devices |= map(select(.name !=
		"pci-0000-af-00-2")) | (.spec.devices[] | select(.name == "pci-0000-af-00-0") |
		.attributes["resource.kubernetes.io/numaNode"].int) = 7')
	OUT=$(api -X PUT -H 'Content-Type: application/json' --data "$body" -w '%{http_code}' \
		"$URL/$name") || fail "PUT $name: $OUT"
	[[ $OUT == *200 ]] || fail "the edit was not taken: $OUT"
	wait_slices "$NAMES_OF == \$n and .[0].spec.pool.generation > \$g" \
		"the edited slice corrected" 10 --argjson n "$NAMES" --argjson g "$g"
	jq_ok '.[0].spec.devices[] | select(.name == "pci-0000-af-00-0") |
		.attributes["resource.kubernetes.io/numaNode"].int == 0' "pool0's numaNode back" "$OUT"
	# A slice of our node and driver that is not ours: removed.
	body=$(jq -c '.[0] | .metadata = {name: "stranger"}' <<<"$OUT")
	OUT=$(api -X POST -H 'Content-Type: application/json' --data "$body" -w '%{http_code}' \
		"$URL") || fail "POST stranger: $OUT"
	[[ $OUT == *201 ]] || fail "the stranger's slice was not made: $OUT"
	wait_slices 'length == 1 and .[0].metadata.name == $n' "the stranger's slice removed" 10 \
		--arg n "$name"
	node_down
	kube_stop
}
run "slices deleted, edited or added by someone else: put right by the resync" foreign

# A restarted agent: the same names, its generation not below the one in the
# API; slices kept at SIGTERM.
restart() {
	local -a AGENT_FLAGS
	local g before
	slices_api
	node_up
	wait_slices 'length == 1' "one ResourceSlice after start"
	# Another generation, so a restart starting at 1 would go back.
	ip -n "$HOST_NS" link del pool2
	wait_slices '.[0].spec.pool.generation >= 2' "pool2 removed: generation 2"
	mk_nic "$HOST_NS" pool2 peer2
	wait_slices "$NAMES_OF == \$n" "pool2 back" 10 --argjson n "$NAMES"
	g=$(gen)
	before=$(jq -c "$NAMES_OF" <<<"$OUT")
	stop_agent
	sleep 0.5
	OUT=$(slices)
	jq_ok 'length == 1' "the slice kept at SIGTERM" "$OUT"
	: >"$T/agent.log"
	start_agent
	wait_event '.event == "list"' "the restarted agent lists"
	sleep 1.5
	grep -q "cannot publish" "$T/agent.log" && fail "the restarted agent failed to publish:
$(cat "$T/agent.log")"
	OUT=$(slices)
	jq_ok '.[0].spec.pool.generation >= $g' "the generation not going back" "$OUT" \
		--argjson g "$g"
	[[ $(jq -c "$NAMES_OF" <<<"$OUT") == "$before" ]] ||
		fail "device names changed across a restart: $before, now $(jq -c "$NAMES_OF" <<<"$OUT")"
	# Now a change: its generation above the one before the restart.
	ip -n "$HOST_NS" link del pool0
	wait_slices '.[0].spec.pool.generation > $g' "pool0 removed after a restart" 10 \
		--argjson g "$g"
	node_down
	kube_stop
}
run "agent restart: the same device names, the generation never going back" restart

# A pod's NIC: ADD moves pool1 into the pod and its sysfs entry goes with it
# (as on a node; the fake tree's is moved away by hand), DEL brings both back.
# Neither is a new generation: pool1 keeps the attributes it was read with.
pod_nic() {
	local -a AGENT_FLAGS
	local g conf
	slices_api
	node_up
	wait_slices 'length == 1' "one ResourceSlice after start"
	g=$(gen)
	plugin_conf 'del(.match) | .device = "pool1"'
	conf=$CONF
	run_plugin ADD "$conf"
	expect_result "ADD of pool1"
	mv "$T/sysfs/class/net/pool1" "$T/pool1.sysfs"
	# A scan (every second here) and the slices' debounce (at most 1 s) later:
	sleep 2.5
	OUT=$(slices)
	jq_ok '.[0].spec.pool.generation == $g' "no new generation while a pod holds pool1" \
		"$OUT" --argjson g "$g"
	jq_ok '.[0].spec.devices[] | select(.name == "pci-0000-af-00-1") | .attributes |
		.interface.string == "pool1" and .["resource.kubernetes.io/pcieRoot"].string == "pci0000:ae"' \
		"pool1 keeps its attributes in the pod" "$OUT"
	mv "$T/pool1.sysfs" "$T/sysfs/class/net/pool1"
	run_plugin DEL "$conf"
	expect_ok "DEL of pool1"
	sleep 2.5
	jq_ok '.[0].spec.pool.generation == $g' "no new generation after DEL" "$(slices)" \
		--argjson g "$g"
	node_down
	kube_stop
}
run "a pod's NIC: ADD and DEL change no slice" pod_nic

# A pool pick (the NIC ledger, issue 40): a selected pod the kubelet and no
# claim gave anything takes pool0 from the pool; no scheduler saw that, so
# pool0 leaves the slices (a new generation) until DEL gives it back.
pool_pick() {
	local -a AGENT_FLAGS
	local g conf
	slices_api
	node_up
	wait_slices 'length == 1' "one ResourceSlice after start"
	g=$(gen)
	plugin_conf .
	conf=$CONF
	run_plugin ADD "$conf" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=selected;K8S_POD_UID=cd-34"
	expect_result "ADD of a selected pod with no allocation: a pool pick"
	has_link "$HOST_NS" pool0 && fail "the pool pick was not pool0"
	wait_slices "$NAMES_OF == (\$n - [\"pci-0000-af-00-0\"]) and .[0].spec.pool.generation > \$g" \
		"pool0, taken from the pool, leaves the slices" 10 --argjson n "$NAMES" --argjson g "$g"
	g=$(gen)
	run_plugin DEL "$conf"
	expect_ok "DEL of the selected pod"
	wait_slices "$NAMES_OF == \$n and .[0].spec.pool.generation > \$g" \
		"pool0 back in the slices after DEL" 10 --argjson n "$NAMES" --argjson g "$g"
	node_down
	kube_stop
}
run "a pool pick leaves the slices until DEL" pool_pick

# The API failing: said once, the agent serving on, the slices published
# once it answers again.
api_down() {
	local -a AGENT_FLAGS
	local g n
	slices_api
	node_up
	wait_slices 'length == 1' "one ResourceSlice after start"
	g=$(gen)
	echo "status 503" >"$KUBE_WORK/mode"
	ip -n "$HOST_NS" link del pool1
	wait_event '.event == "list" and (.devices[1].health == "Unhealthy")' \
		"the agent serves the kubelet with the API down"
	for ((n = 0; n < 100; n++)); do
		grep -q "cannot publish the ResourceSlices of pool node1" "$T/agent.log" && break
		sleep 0.1
	done
	# Another failed round (retried after 1 s, then 2, 4...), and still said once.
	wait_more 'hpn_rdma_dra_slice_rounds_total{result="failed"}' 1 "another failed round"
	n=$(grep -c "cannot publish the ResourceSlices" "$T/agent.log" || true)
	((n == 1)) || fail "the API's failure said $n times, not once: $(tail "$T/agent.log")"
	wait_metric '^hpn_rdma_dra_slice_rounds_total\{result="failed"\} [1-9][0-9]*$' \
		"the failed rounds in the metrics"
	[[ $(gen) == "$g" ]] || fail "the generation changed with the API down"
	echo ok >"$KUBE_WORK/mode"
	wait_slices '.[0].spec.pool.generation == $g + 1' "published when the API is back" 40 \
		--argjson g "$g"
	jq_ok "$NAMES_OF == (\$n - [\"pci-0000-af-00-1\"])" "pool1 gone from the slice" "$OUT" \
		--argjson n "$NAMES"
	node_down
	kube_stop
}
run "API failing: logged once, the agent serves on, published once it is back" api_down

# The publisher's own conflict handling (the stand-in fails writes alone):
# two 409s then written; four, said and written by the next round; a PUT
# answered 404 POSTs; a 422 said and retried; then a round stalled in its
# list at SIGTERM is cancelled and the agent exits cleanly (ASan: no leak).
conflicts() {
	local g n i
	slices_api
	node_up
	wait_slices 'length == 1' "one ResourceSlice after start"
	g=$(gen)
	echo "409 2" >"$KUBE_WORK/mode.write"
	ip -n "$HOST_NS" link del pool1
	wait_slices '.[0].spec.pool.generation == $g + 1' "written after two conflicts" 10 \
		--argjson g "$g"
	echo "409 4" >"$KUBE_WORK/mode.write"
	mk_nic "$HOST_NS" pool1 peer1
	wait_slices '.[0].spec.pool.generation == $g + 2' "written after a round of four conflicts" 20 \
		--argjson g "$g"
	grep -q 'still changed by someone else after 4 writes' "$T/agent.log" ||
		fail "four conflicts not said: $(tail "$T/agent.log")"
	echo "404 1" >"$KUBE_WORK/mode.write"
	ip -n "$HOST_NS" link del pool2
	wait_slices '.[0].spec.pool.generation == $g + 3' "written after a 404" 10 --argjson g "$g"
	echo "422 1" >"$KUBE_WORK/mode.write"
	mk_nic "$HOST_NS" pool2 peer2
	wait_slices '.[0].spec.pool.generation == $g + 4' "written after a 422" 20 --argjson g "$g"
	grep -q '422' "$T/agent.log" || fail "the 422 not said: $(tail "$T/agent.log")"
	echo "stall" >"$KUBE_WORK/mode"
	n=$(metric_value hpn_rdma_kube_attempts_total)
	ip -n "$HOST_NS" link del pool0
	# The round's list sent (and never answered): in flight at SIGTERM.
	for ((i = 0; i < 100; i++)); do
		(($(metric_value hpn_rdma_kube_attempts_total) > n)) && break
		sleep 0.1
	done
	(($(metric_value hpn_rdma_kube_attempts_total) > n)) || fail "no round after pool0 left"
	stop_agent
	: >"$KUBE_WORK/mode"
	node_down
	kube_stop
}
run "conflicts, a 404 and a 422 on write; a round cancelled at SIGTERM" conflicts

# NICs pods share (--dra-shares): drashare-slices.sh's scenario, on the helpers above.
# shellcheck source=drashare-slices.sh
source "$(dirname "${BASH_SOURCE[0]}")/drashare-slices.sh"

t_done
