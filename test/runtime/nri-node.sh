# shellcheck shell=bash
# runtime.nri's node: the runc wrapper, the fake RDMA tree the agent reads, the
# API stand-in, the network and the agent with --nri, and their metrics and
# logs. Sourced by nri.sh (its header says what stands in for what).

# runc_wrap PATH: the runc the runc shim runs (node.sh's RTN_RUNC_WRAP). At
# `create` it keeps the bundle's config.json as containerd wrote it in
# $RTN_DIR/specs/<ID>.json; then, unless $RTN_DIR/runc.as-is exists or it
# may raise limits (CAP_SYS_RESOURCE), it lowers RLIMIT_MEMLOCK to its own
# hard limit (containerd's), saying so in $RTN_DIR/runc-wrap.log. Everything
# else is runc's.
runc_wrap() {
	mkdir -p "$RTN_DIR/specs"
	printf '#!/bin/bash\nd=%q\n' "$RTN_DIR" >"$1"
	cat >>"$1" <<'EOF'
prev='' bundle='' create=''
for a; do
	[[ $prev == --bundle || $prev == -b ]] && bundle=$a
	[[ $a == create ]] && create=1
	prev=$a
done
if [[ -n $create && -f $bundle/config.json ]]; then
	id=${!#}
	cp "$bundle/config.json" "$d/specs/$id.json"
	if [[ ! -e $d/runc.as-is ]]; then
		python3 "$d/runc-wrap.py" "$bundle/config.json" "$id" >>"$d/runc-wrap.log" || exit 1
	fi
fi
exec runc "$@"
EOF
	cat >"$RTN_DIR/runc-wrap.py" <<'EOF'
import json, os, resource, sys

path, ctr = sys.argv[1], sys.argv[2]
with open("/proc/self/status") as f:
    cap = int([l.split()[1] for l in f if l.startswith("CapEff:")][0], 16)
hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
if cap & (1 << 24) or hard == resource.RLIM_INFINITY:
    sys.exit(0)  # runc may set any limit
with open(path) as f:
    spec = json.load(f)
for r in (spec.get("process") or {}).get("rlimits") or []:
    if r.get("type") == "RLIMIT_MEMLOCK" and r.get("hard", 0) > hard:
        print("%s: RLIMIT_MEMLOCK %d lowered to %d" % (ctr, r["hard"], hard), flush=True)
        r["hard"], r["soft"] = hard, min(r.get("soft", 0), hard)
with open(path + ".tmp", "w") as f:
    json.dump(spec, f)
os.rename(path + ".tmp", path)
EOF
	chmod 0755 "$1"
}

rt_init

# ---- the fake RDMA node the agent reads ---------------------------------------------

S=$T/agent-sysfs
mk_fake_rdma() {
	local k ib
	mkdir -p "$S/class/misc/rdma_cm" "$T/dev/infiniband"
	echo 10:250 >"$S/class/misc/rdma_cm/dev"
	mknod -m 0666 "$T/dev/infiniband/rdma_cm" c 10 250
	for ((k = 0; k < POOL; k++)); do
		ib=$S/class/infiniband/mlx5_$k
		mkdir -p "$ib/ports/1/gids" "$ib/ports/1/gid_attrs/ndevs" \
			"$ib/ports/1/gid_attrs/types" "$S/class/infiniband_verbs/uverbs$k"
		echo "1: CA" >"$ib/node_type"
		echo "4: ACTIVE" >"$ib/ports/1/state"
		echo "Ethernet" >"$ib/ports/1/link_layer"
		printf 'fe80:0000:0000:0000:0000:00ff:fe00:%04x\n' "$k" >"$ib/ports/1/gids/0"
		echo "rnic$k" >"$ib/ports/1/gid_attrs/ndevs/0"
		echo "RoCE v2" >"$ib/ports/1/gid_attrs/types/0"
		echo "mlx5_$k" >"$S/class/infiniband_verbs/uverbs$k/ibdev"
		echo "231:$((192 + k))" >"$S/class/infiniband_verbs/uverbs$k/dev"
		mknod -m 0666 "$T/dev/infiniband/uverbs$k" c 231 $((192 + k))
	done
}
mk_fake_rdma

# ---- the API, the network, the agent --------------------------------------------------

KUBE_WORK=$T/kube
mkdir -p "$KUBE_WORK/pods/hpnr"
nri_exit() {
	local rc=$?
	set +e
	[[ -f $T/agent.pid ]] && kill -KILL "$(<"$T/agent.pid")" 2>/dev/null
	kube_stop
	rtn_cleanup
	exit $rc
}
trap nri_exit EXIT
kube_pki
# ip netns exec execs the server: KUBE_PID is its pid. Its lifetime outlasts the test's budget.
# shellcheck disable=SC2034 # kube_start reads them
KUBE_PY_WRAP=(ip netns exec "$RTN_NS") KUBE_LIFETIME=900
kube_start "$KUBE_WORK/pods" || fail "the API stand-in did not start"
echo "hpnr-token-$$" >"$KUBE_WORK/tokens"
# shellcheck disable=SC2154 # KUBE_PORT_good: set by kube_start (printf -v)
kubeconfig "$KUBE_WORK/kubeconfig" "https://127.0.0.1:$KUBE_PORT_good" file "token: hpnr-token-$$"

# The label-selected node's network (conf/20) with rt_conflist's changes; the
# agent's socket in the scratch dir and no lookup (no kubelet here); GU8TF's
# profile as pods.sh runs it (ib auto: the built-in one requires mlx5).
nri_conflist() {
	jq -c --arg net "$NET" --arg ipam "$IPAM" --arg st "$STATE" --arg hints "$HINTS" \
		--arg log "$T/plugin.log" --arg kc "$KUBE_WORK/kubeconfig" --arg a "$T/agent.sock" '
		.name = $net |
		.plugins |= map(
			if .type == "bridge" then
				.bridge = "hpnrbr0" | .ipMasq = false |
				.ipam.ranges = [[{subnet: "10.250.0.0/24"}]] | .ipam.dataDir = $ipam
			elif .type == "hpn-rdma" then
				.match = {devices: ["rnic*"]} | .rdmaRequired = false |
				.stateDir = $st | .logFile = $log | .nccl.dir = $hints |
				.ipam.ranges = [[{subnet: "10.251.0.0/24"}]] | .ipam.dataDir = $ipam |
				.kubernetes.kubeconfig = $kc | .agent = {socket: $a, lookup: false} |
				.nccl.profiles = {GU8TF: {ib: "auto", gpuCounts: [8],
					env: {NCCL_NET_GDR_LEVEL: "PHB"}}}
			else . end)' "$HPN_SRC/conf/20-hpn-rdma-gpu.conflist"
}
: >"$T/agent.log"
nri_conflist >"$T/net.conflist"
# The agent's view of the same network: the fake tree.
jq -c --arg s "$S" '.plugins |= map(if .type == "hpn-rdma" then .sysfsRoot = $s else . end)' \
	"$T/net.conflist" >"$T/agent.conflist"
rtn_conflist "$(<"$T/net.conflist")"
rtn_wait_network "$NET"

# conflist_loaded TEXT: until containerd's loaded network config holds TEXT
# (the network keeps its name, so rtn_wait_network cannot tell).
conflist_loaded() {
	local i
	for ((i = 0; i < 200; i++)); do
		cri -timeout 5 status -v 2>/dev/null | jq -e --arg t "$1" \
			'[.info.cniconfig | .. | strings | contains($t)] | any' >/dev/null && return 0
		sleep 0.05
	done
	fail "containerd did not load the network config holding $1"
}

# agent_start: the agent on the node (its netns: the metrics' loopback), its
# pid in a file (a scenario, a subshell, restarts it). No kubelet, no GC; no
# health loop unless AGENT_HEALTH_S says its period.
agent_start() {
	# nsenter itself, not rtn_in: a function run with & is a subshell, and its pid not the agent's.
	nsenter -t "$RTN_NODE_PID" -m -n -- "$HPN_AGENT" --config "$T/agent.conflist" \
		--kubelet-dir "$T/kl" --lookup-socket "$T/agent.sock" --dev-root "$T/dev" \
		--cdi-dir "$RTN_CDI_DIR" --cdi-hook "$HPN_PLUGIN" --cri-socket none \
		--health-interval "${AGENT_HEALTH_S:-0}" --metrics-address "127.0.0.1:$MPORT" \
		--nri="$RTN_NRI_SOCK" 2>>"$T/agent.log" &
	echo $! >"$T/agent.pid"
}

# alive PID: a process that has not exited. Not kill -0, which a zombie
# passes: an agent a scenario's subshell started is reaped by whoever
# inherits it, here seconds later.
alive() {
	local st
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	st=${st##*) }
	[[ ${st%% *} != Z ]]
}

# agent_stop [SIGNAL]: TERM (by default) or KILL, and until it is gone.
agent_stop() {
	local pid i sig=${1:-TERM}
	pid=$(cat "$T/agent.pid" 2>/dev/null) || return 0
	kill -"$sig" "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		alive "$pid" || break
		sleep 0.05
	done
	! alive "$pid" || fail "the agent did not exit within 5 s of SIG$sig"
	rm -f "$T/agent.pid"
}

agent_running() {
	[[ -f $T/agent.pid ]] && alive "$(<"$T/agent.pid")"
}

scrape() {
	rtn_in curl -sf "http://127.0.0.1:$MPORT/metrics"
}

# metric NAME: its value (the sum of its samples), empty when the agent does not answer.
metric() {
	local out
	out=$(scrape 2>/dev/null) || return 0
	awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2; f = 1 }
		END { if (f) print s + 0 }' <<<"$out"
}

# wait_metric NAME VALUE WHAT: until NAME is VALUE (10 s).
wait_metric() {
	local i v=
	for ((i = 0; i < 200; i++)); do
		v=$(metric "$1")
		[[ $v == "$2" ]] && return 0
		sleep 0.05
	done
	fail "$3: $1 is ${v:-(no answer)}, not $2: $(scrape 2>/dev/null | grep '^hpn_rdma_nri_')"
}

# sample NAME MATCH: the value of NAME's one sample whose labels hold MATCH
# (e.g. 'pod="seed-a"'); empty when none (or the agent does not answer), "2+"
# when more than one.
sample() {
	local out
	out=$(scrape 2>/dev/null) || return 0
	awk -v n="$1" -v m="$2" 'index($1, n "{") == 1 && index($1, m) { v = $2; c++ }
		END { if (c == 1) print v + 0; else if (c > 1) print "2+" }' <<<"$out"
}

# wait_sample NAME MATCH VALUE WHAT: until sample NAME MATCH is VALUE ("" for
# none) (10 s).
wait_sample() {
	local i v=
	for ((i = 0; i < 200; i++)); do
		v=$(sample "$1" "$2")
		[[ $v == "$3" ]] && return 0
		sleep 0.05
	done
	fail "$4: $1{$2} is ${v:-(none)}, not ${3:-(none)}: $(scrape 2>/dev/null | grep -E '^hpn_rdma_(nri_|attachment_(healthy|broken)|health_checks)')"
}

# log_mark: the agent log's length now; wait_log MARK REGEX WHAT: a line after
# MARK matches REGEX (10 s); prints it.
log_mark() {
	wc -l <"$T/agent.log"
}
wait_log() {
	local i line
	for ((i = 0; i < 200; i++)); do
		line=$(tail -n "+$(($1 + 1))" "$T/agent.log" | grep -E -m 1 "$2") && {
			echo "$line"
			return 0
		}
		sleep 0.05
	done
	fail "$3: no agent log line matching '$2' after line $1: $(tail -n 10 "$T/agent.log")"
}

# agent_up: the agent running and registered with containerd's NRI (a
# running one was when it started: scenario 5 waits for its new link). Its
# log says so at once; the metrics may be a second old.
agent_up() {
	local m
	agent_running && return 0
	m=$(log_mark)
	agent_start
	wait_log "$m" 'NRI: registered as hpn-rdma \(index 50\)' "the agent's registration" >/dev/null
}

# agent_fresh: a new agent, registered: its counters start from 0 (the
# metrics are rendered at most once a second, so a value read as a baseline
# may be a second old; a fresh process needs none).
agent_fresh() {
	agent_stop TERM
	agent_up
}

# nri_switch on|off: containerd's NRI turned on or off in its config (the
# `disable` key of its io.containerd.nri.v1.nri section, 1.7's default off),
# containerd restarted on it: the node's pods and containers live on.
nri_switch() {
	local want=false
	[[ $1 == on ]] || want=true
	rtn_containerd_stop TERM
	awk -v want="$want" '/io\.containerd\.nri\.v1\.nri/ { sec = 1 }
		sec && $1 == "disable" { sub(/= *(true|false)/, "= " want); sec = 0 }
		{ print }' "$RTN_DIR/config.toml" >"$RTN_DIR/config.new"
	grep -qE "^[[:space:]]*disable = $want\$" "$RTN_DIR/config.new" ||
		fail "no disable key in containerd's NRI section: $(grep -A3 nri.v1.nri "$RTN_DIR/config.toml")"
	mv "$RTN_DIR/config.new" "$RTN_DIR/config.toml"
	rtn_containerd_start
	rtn_wait_network "$NET"
}
