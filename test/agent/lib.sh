# shellcheck shell=bash
# Helpers of the agent's tests (agent.sh, cdi.sh, dra.sh, metrics.sh, gpu.sh): a fake node of veth
# NICs behind a fake sysfs tree, the kubelet stand-in hpn-kubelet, and the
# agent run against it in the scenario's host netns. Sourced after
# test/netns/lib.sh.

KL=
# Flags every start_agent passes: never the machine's own containerd.
AGENT_FLAGS=(--cri-socket none)
AGENT_PID=
KUBELET_PID=
EV=

# ---- the fake node -------------------------------------------------------------

# mk_pool N: veth NICs pool0..pool(N-1) in the host netns, and a decoy (as pool.sh).
mk_pool() {
	local i
	for ((i = 0; i < $1; i++)); do
		mk_nic "$HOST_NS" "pool$i" "peer$i"
	done
	mk_nic "$HOST_NS" other0 otherpeer0
}

# pool_conf [FILTER [jq args...]]: hpn0 from the pool "pool*", then FILTER.
pool_conf() {
	local extra=${1:-.}
	shift || true
	net_conf 1.0.0 '.match = {devices: ["pool*"]} | .ifName = "hpn0" | '"$extra" "$@"
}

# A pool of four: pool0 on NUMA node 0 (mlx5_0: uverbs0 umad0 issm0), pool1
# and pool2 on node 1 (mlx5_1: uverbs1; mlx5_2: uverbs2), pool3 a plain veth
# (no PCI function: its name is its ID, no NUMA node, no RDMA device).
#
# mk_node erdma instead: eRDMA's OFED layout (test/fixtures/erdma/ofed): the
# ENI eth1 a veth of the tree's MAC, its RDMA device rocep26s0 on a PCI
# function of its own (NUMA node 1; the ENI's has none), with uverbs3.
mk_node() {
	local s=$T/sysfs i
	rm -rf "$s"
	if [[ ${1:-} == erdma ]]; then
		cp -a "$HPN_SRC/test/fixtures/erdma/ofed" "$s"
		chmod -R u+w "$s"
		mk_nic "$HOST_NS" eth1 peer1 "$(cat "$s/class/net/eth1/address")"
		mkdir -p "$s/class/infiniband_verbs/uverbs3" "$s/class/misc/rdma_cm"
		echo rocep26s0 >"$s/class/infiniband_verbs/uverbs3/ibdev"
		echo 231:195 >"$s/class/infiniband_verbs/uverbs3/dev"
		echo 10:58 >"$s/class/misc/rdma_cm/dev"
		return 0
	fi
	mk_pool 4
	for i in 0 1 2; do
		mk_fake_pci "$s" "0000:af:00.$i" "pool$i"
	done
	echo 0 >"$s/devices/pci0000:ae/0000:ae:00.0/0000:af:00.0/numa_node"
	echo 1 >"$s/devices/pci0000:ae/0000:ae:00.0/0000:af:00.1/numa_node"
	echo 1 >"$s/devices/pci0000:ae/0000:ae:00.0/0000:af:00.2/numa_node"
	if [[ ${1:-rdma} == rdma ]]; then
		mk_rdma "$s" 0000:af:00.0 mlx5_0 uverbs0 umad0 issm0
		mk_rdma "$s" 0000:af:00.1 mlx5_1 uverbs1
		mk_rdma "$s" 0000:af:00.2 mlx5_2 uverbs2
	fi
}

# agent_require: skips, saying why, unless the agent and the kubelet stand-in were built.
agent_require() {
	[[ -z ${HPN_AGENT_WHY:-} ]] || skip "$HPN_AGENT_WHY"
	[[ -x ${HPN_AGENT:-} ]] || skip "hpn-rdma-agent was not built"
	[[ -x ${HPN_KUBELET:-} ]] ||
		skip "${HPN_KUBELET_WHY:-the kubelet stand-in hpn-kubelet was not built}"
}

# The CNI config, and the agent's conflist around it.
agent_net_conf() {
	pool_conf '.sysfsRoot = $s | .agent = {socket: $a, timeoutMs: 2000, cdiDir: $c} | '"${1:-.}" \
		--arg s "$T/sysfs" --arg a "$T/agent.sock" --arg c "$T/cdi"
}

write_conflist() {
	jq -c '{cniVersion, name, plugins: [del(.cniVersion, .name)]}' <<<"$(agent_net_conf "$@")" \
		>"$T/net.conflist.tmp"
	mv "$T/net.conflist.tmp" "$T/net.conflist"
}

# ---- the kubelet stand-in and the agent ------------------------------------------

# start_kubelet [FLAGS...]: hpn-kubelet serve, FLAGS added (-podres-delay 2s).
start_kubelet() {
	"$HPN_KUBELET" serve -dir "$KL" -out "$EV" -pods "$T/pods.json" "$@" 2>>"$T/kubelet.log" &
	KUBELET_PID=$!
}

stop_kubelet() {
	if [[ -n $KUBELET_PID ]]; then
		kill "$KUBELET_PID" 2>/dev/null || true
		wait "$KUBELET_PID" 2>/dev/null || true
	fi
	KUBELET_PID=
}

start_agent() {
	local -a wrap=()
	if [[ ${HPN_AGENT_VALGRIND:-0} == 1 ]]; then
		wrap=("${VALGRIND_CMD[@]}" "--log-file=$T/agent-vg.%p")
	fi
	ip netns exec "$HOST_NS" "${wrap[@]}" "$HPN_AGENT" --config "$T/net.conflist" \
		--kubelet-dir "$KL" --poll-interval 1 "${AGENT_FLAGS[@]}" "$@" 2>>"$T/agent.log" &
	AGENT_PID=$!
}

# stop_agent: SIGTERM, and it must exit 0 within 10 s.
stop_agent() {
	local rc=0 i
	[[ -n $AGENT_PID ]] || return 0
	kill -TERM "$AGENT_PID" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$AGENT_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$AGENT_PID" 2>/dev/null; then
		kill -KILL "$AGENT_PID"
		AGENT_PID=
		fail "the agent did not stop within 10 s of SIGTERM"
	fi
	wait "$AGENT_PID" || rc=$?
	AGENT_PID=
	# Under valgrind, exit 99 is a memcheck error or a definite/indirect leak.
	((rc == 0)) || fail "the agent exited $rc after SIGTERM: $(tail -5 "$T/agent.log")
$(cat "$T"/agent-vg.* 2>/dev/null)"
	rm -f "$T"/agent-vg.*
	return 0
}

# wait_event FILTER WHAT [SECONDS]: an event line after the first $SEEN lines matches.
SEEN=0
wait_event() {
	local filter=$1 what=$2 secs=${3:-10} i hit
	for ((i = 0; i < secs * 20; i++)); do
		# [line number after SEEN, event] of the first match.
		hit=$(tail -n +"$((SEEN + 1))" "$EV" 2>/dev/null |
			jq -c "select($filter) | [input_line_number, .]" 2>/dev/null | head -n1)
		if [[ -n $hit ]]; then
			LAST_EVENT=$(jq -c '.[1]' <<<"$hit")
			SEEN=$((SEEN + $(jq '.[0]' <<<"$hit")))
			return 0
		fi
		sleep 0.05
	done
	fail "$what: no kubelet event matching '$filter' within ${secs}s; events: $(tail -n 5 "$EV")
agent log: $(tail -n 15 "$T/agent.log")"
}

# last_list: the devices of the latest ListAndWatch response.
last_list() {
	jq -c 'select(.event == "list") | .devices' "$EV" | tail -n1
}

# kill_node: whatever a failed scenario left running.
kill_node() {
	# Each whatever happened to the one before (a process gone already fails
	# its kill, which under set -e would end the trap here).
	[[ -z $AGENT_PID ]] || kill -KILL "$AGENT_PID" 2>/dev/null || true
	[[ -z $KUBELET_PID ]] || kill -KILL "$KUBELET_PID" 2>/dev/null || true
	# The API stand-in of the DRA scenarios (test/kube/lib.sh), if one runs.
	[[ -z ${KUBE_PID:-} ]] || kill -KILL "$KUBE_PID" 2>/dev/null || true
	return 0
}

node_up() {
	trap kill_node EXIT
	KL=$T/kl-$SCEN
	EV=$T/events-$SCEN.jsonl
	SEEN=0
	: >"$EV"
	: >"$T/agent.log"
	echo '[]' >"$T/pods.json"
	mk_node "${1:-rdma}"
	write_conflist "${NODE_CONF:-.}"
	start_kubelet
	wait_event '.event == "kubelet-started"' "the kubelet stand-in starts"
	start_agent
	wait_event '.event == "list"' "the first ListAndWatch list" 20
}

node_down() {
	stop_agent
	stop_kubelet
	[[ ! -e $KL/device-plugins/hpn-rdma.sock ]] || fail "the agent left its device plugin socket"
	[[ ! -e $T/agent.sock ]] || fail "the agent left its lookup socket"
}

# lookup_raw LINE: LINE sent to the agent's lookup socket as a client would; the reply.
lookup_raw() {
	/usr/bin/python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
out = b""
while True:
	b = s.recv(65536)
	if not b:
		break
	out += b
print(out.decode())' "$T/agent.sock" "$1"
}

plugin_sock() {
	echo "$KL/device-plugins/hpn-rdma.sock"
}

# run NAME FUNCTION: a scenario, unless HPN_AGENT_SCENARIOS leaves it out.
run() {
	if [[ -n ${HPN_AGENT_SCENARIOS:-} && " $HPN_AGENT_SCENARIOS " != *" $2 "* ]]; then
		return 0
	fi
	scenario "$@"
}

# The agent's metrics, when a test gives it --metrics-address 127.0.0.1:$MPORT
# (on the scenario host netns's loopback).
MPORT=19467

# scrape: the agent's exposition.
scrape() {
	ip netns exec "$HOST_NS" curl -sf "http://127.0.0.1:$MPORT/metrics"
}

# metric_value SAMPLE: the value of the exposition's SAMPLE (a name with its
# labels as the agent writes them, e.g. 'x_total{result="ok"}'), 0 when absent.
metric_value() {
	scrape 2>/dev/null | awk -v s="$1" '$1 == s { v = $2 } END { print v + 0 }'
}

# wait_log TEXT WHAT [N]: the agent's log holds TEXT N times (default 1) within 10 s.
wait_log() {
	local i
	for ((i = 0; i < 100; i++)); do
		(($(grep -cF "$1" "$T/agent.log") >= ${3:-1})) && return 0
		sleep 0.1
	done
	fail "$2: the agent's log does not say \"$1\"${3:+ $3 times}: $(tail -n 15 "$T/agent.log")"
}

# wait_more SAMPLE N WHAT [SECONDS]: until the counter SAMPLE has grown by N
# from now: a wait on what the agent did, not on the clock.
wait_more() {
	local i want
	want=$(($(metric_value "$1") + $2))
	for ((i = 0; i < ${4:-15} * 10; i++)); do
		(($(metric_value "$1") >= want)) && return 0
		sleep 0.1
	done
	fail "$3: $1 did not grow by $2 within ${4:-15}s: $(metric_value "$1"), not $want
agent log: $(tail -n 15 "$T/agent.log")"
}

# wait_metric REGEX WHAT [SECONDS]: a line of the exposition matches REGEX.
wait_metric() {
	local i
	for ((i = 0; i < ${3:-15} * 10; i++)); do
		scrape >"$T/scrape" 2>/dev/null && grep -Eq "$1" "$T/scrape" && return 0
		sleep 0.1
	done
	fail "$2: no line matching '$1' in the metrics within ${3:-15}s:
$(grep -v '^#' "$T/scrape" 2>/dev/null | head -n 60)
agent log: $(tail -n 15 "$T/agent.log")"
}
