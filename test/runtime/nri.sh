#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq and Python programs are single-quoted on purpose
# runtime tier: hpn-rdma-agent --nri as containerd's own NRI plugin (issue 39),
# containerd 1.7 (NRI turned on in its config) and 2.1 (on by default), the
# socket in the node's scratch dir (node.sh, RTN_NRI). 1.6 has no NRI: the
# test is not registered for it, and skips if run there by hand.
#
# The pods are the managed service's shape: the seed Deployment's labels
# (alibabacloud.com/hpn-type: rdma, the GPU model GU8TF), read by the plugin
# from the API stand-in (test/kube) as on the label-selected node
# (conf/20-hpn-rdma-gpu.conflist), and nothing else in the CRI configs: no
# device, no mount, no env, not privileged. What containerd hands runc is
# read from the bundle (the config.json the runc shim passes, kept by the
# wrapper below) and from inside the running container, through
# /proc/PID/root and /proc/PID/limits (the pause image has no tools).
#
# Scenarios, on one node per version, each from a registered agent:
#  1. an attached pod's container: exactly its own RDMA device nodes (path,
#     c, the fake tree's numbers) with one allow rule each (rw: containerd
#     1.7 and 2.1 write one per device NRI adds, from its file mode, and
#     leave out the rules the agent sends), its hints file read-only at
#     /etc/nccl.conf, RLIMIT_MEMLOCK unlimited in the spec; in the container
#     the nodes exist (runc made them), the file is the pod's, read-only,
#     the device cgroup (v1) has the rules; without this machine's limit
#     lowered, runc refuses to start it;
#  2. two attached pods at once: each container has its own devices and
#     none of the other's; a pod not selected (no label) is untouched;
#  3. a container mounting its own /etc/nccl.conf keeps it; devices given
#     already (CDI, and the device plugin's DeviceSpecs) are not added
#     twice; an RDMA device the host shows no verbs node of is said;
#  4. the agent killed and started again between the sandbox and its
#     container: the container still gets its devices (the journals decide);
#  5. containerd restarted: the agent connects and registers again (metrics),
#     the next container is adjusted, an earlier one is not called bare;
#  6. NRI down (no agent): the container starts unadjusted (the runtime's
#     behaviour); the agent, once connected, reports it from Synchronize
#     (a warning naming it, hpn_rdma_nri_unadjusted_containers 1);
#  7. NRI down with nri.required: ADD refuses the sandbox (11) and nothing is
#     left on the node; with the agent registered it attaches. (NRI turned
#     off in containerd 1.7's config is the same to ADD: a link not
#     registered; not run, it would cost a containerd restart.)
#
# What stands in for what:
#  - RDMA: the node has none. The agent reads a fake sysfs tree (mlx5_K
#    serving rnicK, uverbsK 231:192+K, rdma_cm 10:250); the plugin reads the
#    real /sys, where rnicK is a veth with no RDMA device (rdmaRequired
#    false: its verbs proof in the pod cannot pass on this kernel), so its
#    journal names none. After RunPodSandbox the test writes into the pod's
#    journal the RDMA device ADD binds on a node with RDMA (rdma {name:
#    mlx5_K, netdev: rnicK, moved: false}, shared mode: nothing to undo at
#    DEL), atomically, as ADD writes it: the journal is what the agent reads.
#  - runc: root here lacks CAP_SYS_RESOURCE, so runc cannot raise
#    RLIMIT_MEMLOCK above this machine's hard limit (8 MiB) and refuses to
#    start a container whose spec asks for unlimited ("error setting rlimit
#    type 8: operation not permitted"; scenario 1 shows it). The runc shim
#    runs a wrapper (runc_wrap) that keeps containerd's config.json as it
#    came, then lowers that one limit to what this machine allows, so the
#    container runs and the rest can be seen inside; the spec is checked
#    as containerd wrote it. With CAP_SYS_RESOURCE the wrapper changes
#    nothing and the container's limit must be unlimited.

[[ ${HPN_CTRD:-1.6} != 1.6 ]] || {
	echo "SKIP: containerd 1.6 has no NRI (1.7 and 2.x have)"
	exit 77
}
# shellcheck disable=SC2034 # node.sh reads them
RTN_NRI=1 RTN_RUNC_WRAP=runc_wrap
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=../kube/lib.sh
source "$(dirname "$0")/../kube/lib.sh"

MPORT=19469
UNLIMITED=18446744073709551615 # RLIM_INFINITY, as the OCI spec carries it
SEED_FIXTURE=$HPN_SRC/test/fixtures/pods/default/seed-gu8tf-7d9c5b8f4-x2kqp.json
S=
KUBE_WORK=

[[ -x ${HPN_AGENT:-} ]] || skip "hpn-rdma-agent was not built (${HPN_AGENT:-HPN_AGENT unset})"
for t in curl openssl python3; do
	command -v $t >/dev/null || skip "$t is not installed (scripts/install-deps.sh)"
done

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
# pid in a file (a scenario, a subshell, restarts it). No kubelet, no GC.
agent_start() {
	# nsenter itself, not rtn_in: a function run with & is a subshell, and its pid not the agent's.
	nsenter -t "$RTN_NODE_PID" -m -n -- "$HPN_AGENT" --config "$T/agent.conflist" \
		--kubelet-dir "$T/kl" --lookup-socket "$T/agent.sock" --dev-root "$T/dev" \
		--cdi-dir "$RTN_CDI_DIR" --cdi-hook "" --cri-socket none --health-interval 0 \
		--metrics-address "127.0.0.1:$MPORT" --nri="$RTN_NRI_SOCK" 2>>"$T/agent.log" &
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

# ---- pods as the kubelet makes them for the managed service -------------------------

SEED_LABELS=$(jq -c .metadata.labels "$SEED_FIXTURE")
jq_ok '.["alibabacloud.com/hpn-type"] == "rdma" and .["alibabacloud.com/gpu-model-series"] == "GU8TF"' \
	"the seed's labels" "$SEED_LABELS"

# api_pod NAME LABELS: the pod's sandbox config (rt_pod: no annotation) and its
# Pod in the API stand-in: the seed's (8 nvidia.com/gpu) under the sandbox's
# identity, with LABELS.
api_pod() {
	rt_pod "$1" '{}' "$2"
	jq --arg name "$1" --arg uid "$(pod_uid "$1")" --argjson l "$2" '
		.metadata.namespace = "hpnr" | .metadata.name = $name | .metadata.uid = $uid |
		.metadata.labels = $l' "$SEED_FIXTURE" >"$KUBE_WORK/pods/hpnr/$1.json"
}

# bind_rdma SANDBOX_ID: the RDMA device of the pod's NIC written into its
# journal as ADD journals it on a node with RDMA (see the header); prints K,
# the index of the NIC (rnicK, mlx5_K) the plugin attached.
bind_rdma() {
	local j=$STATE/$NET/$1.eth0 nic
	[[ -f $j ]] || fail "no journal of sandbox $1 ($j)"
	nic=$(jq -r '.nics | if length == 1 then .[0].host.name else "" end' "$j")
	[[ $nic =~ ^rnic[0-9]+$ ]] || fail "the journal of $1 holds not one pool NIC: $(jq -c .nics "$j")"
	jq_ok '.phase == 4 and (.nics[0].rdma == null)' "the journal of $1: attached, no RDMA device" \
		"$(<"$j")"
	jq -c --arg n "mlx5_${nic#rnic}" --arg d "$nic" \
		'.nics[0].rdma = {name: $n, netdev: $d, moved: false}' "$j" >"$T/journal.new"
	mv "$T/journal.new" "$j"
	echo "${nic#rnic}"
}

# seed_pod NAME: RunPodSandbox of a seed pod, attached, its journal naming
# its RDMA device; sets POD (sandbox ID) and K (its NIC's index).
seed_pod() {
	api_pod "$1" "$SEED_LABELS"
	POD=$(runp "$1")
	K=$(bind_rdma "$POD")
}

# ctr NAME POD_ID POD_NAME [JQ [JQ_ARGS...]]: container NAME in the pod as the
# managed service's pod has it: the image and its command, nothing else (JQ
# edits the config: devices, mounts, CDI); created and started. Sets CTR and
# PID (its process, seen from here: the node has no pid namespace of its own).
ctr() {
	local name=$1 pod=$2 pname=$3 edit=${4:-.}
	shift $(($# < 4 ? $# : 4))
	jq -n --arg name "$name" --arg img "$RTN_IMAGE" '{metadata: {name: $name, attempt: 0},
		image: {image: $img}, command: ["/pause"], logPath: ($name + "/0.log")}' |
		jq "$@" "$edit" >"$T/pods/$pname.$name.json"
	CTR=$(cri create "$pod" "$T/pods/$pname.$name.json" "$T/pods/$pname.json" 2>"$T/create.err") ||
		fail "CreateContainer $name in $pname failed: $(<"$T/create.err")"
	cri start "$CTR" 2>"$T/create.err" ||
		fail "StartContainer $name in $pname failed: $(<"$T/create.err")"
	PID=$(rtn_ctrd ctr -a "$RTN_SOCK" -n k8s.io tasks ls | awk -v c="$CTR" '$1 == c { print $2 }')
	[[ $PID =~ ^[0-9]+$ && -d /proc/$PID ]] || fail "no process of container $name ($CTR)"
}

# may_raise_limits: this process has CAP_SYS_RESOURCE (runc, run by the same root, too).
may_raise_limits() {
	local cap
	cap=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
	(((16#$cap >> 24) & 1))
}

# spec ID: the OCI spec containerd handed runc for container ID (runc_wrap kept it).
spec() {
	[[ -f $RTN_DIR/specs/$1.json ]] || fail "runc was not run for container $1 (no spec kept)"
	cat "$RTN_DIR/specs/$1.json"
}

# spec_view ID: what NRI may change of container ID's spec, as one JSON line:
# devices (path, type, major, minor, fileMode), allow rules of character
# devices ([major, minor, access]), the /etc/nccl.conf mounts, the
# RLIMIT_MEMLOCK entries as strings (exact: jq would round 2^64-1).
spec_view() {
	spec "$1" | python3 -c '
import json, sys
s = json.load(sys.stdin)
lin = s.get("linux") or {}
out = {
	"devices": [{k: d.get(k) for k in ("path", "type", "major", "minor", "fileMode")}
		    for d in lin.get("devices") or []],
	"rules": [[r.get("major"), r.get("minor"), r.get("access")]
		  for r in (lin.get("resources") or {}).get("devices") or []
		  if r.get("allow") and r.get("type") == "c"],
	"nccl": [m for m in s.get("mounts") or [] if m.get("destination") == "/etc/nccl.conf"],
	"memlock": [[str(r.get("soft")), str(r.get("hard"))]
		    for r in (s.get("process") or {}).get("rlimits") or []
		    if r.get("type") == "RLIMIT_MEMLOCK"],
}
print(json.dumps(out, sort_keys=True))'
}

# want_devs K...: spec_view's devices for the NICs K... (uverbsK each) and rdma_cm.
want_devs() {
	local k out='[]'
	for k; do
		out=$(jq -c --argjson k "$k" '. + [{path: "/dev/infiniband/uverbs\($k)", type: "c",
			major: 231, minor: (192 + $k), fileMode: 438}]' <<<"$out")
	done
	jq -c '. + [{path: "/dev/infiniband/rdma_cm", type: "c", major: 10, minor: 250,
		fileMode: 438}]' <<<"$out"
}

# memlock_of PID: its RLIMIT_MEMLOCK, "SOFT HARD" (bytes, or unlimited).
memlock_of() {
	awk '/^Max locked memory/ { print $4 " " $5 }' "/proc/$1/limits"
}

# The container's own view, from the host: its device nodes' type and numbers.
ctr_nodes() {
	local pid=$1 f
	shift
	for f; do
		stat -c '%n %F %t:%T' "/proc/$pid/root$f" | sed "s|^/proc/$pid/root||"
	done
}

# adjusted ID K WHAT: container ID (process PID) of the pod whose NIC is K has,
# as containerd handed it to runc, exactly K's device nodes and rdma_cm, one
# allow rule each (rw), the pod's hints read-only at /etc/nccl.conf (HINTS_FILE)
# and RLIMIT_MEMLOCK unlimited; inside, the nodes exist with those numbers, the
# file is the pod's and mounted read-only, the limit is what runc could set.
adjusted() {
	local id=$1 k=$2 what=$3 view got mnt lim
	view=$(spec_view "$id")
	jq_ok '.devices == $d' "$what: the spec's devices are exactly uverbs$k and rdma_cm" \
		"$view" --argjson d "$(want_devs "$k")"
	jq_ok '(.rules | map(.[0:2]) | sort) == ([[231, 192 + $k], [10, 250]] | sort) and
		all(.rules[]; .[2] | test("^rw"))' \
		"$what: one allow rule (rw) for each of its devices, no other character device" \
		"$view" --argjson k "$k"
	jq_ok '.nccl | length == 1 and (.[0] | .source == $f and .type == "bind" and
		(.options | index("ro") and index("bind")))' \
		"$what: its hints file bind-mounted read-only at /etc/nccl.conf" "$view" \
		--arg f "$HINTS_FILE"
	jq_ok '.memlock == [[$u, $u]]' "$what: RLIMIT_MEMLOCK unlimited" "$view" --arg u "$UNLIMITED"
	got=$(ctr_nodes "$PID" "/dev/infiniband/uverbs$k" /dev/infiniband/rdma_cm)
	[[ $got == "/dev/infiniband/uverbs$k character special file e7:$(printf %x $((192 + k)))
/dev/infiniband/rdma_cm character special file a:fa" ]] ||
		fail "$what: the device nodes in the container: $got"
	[[ $(<"/proc/$PID/root/etc/nccl.conf") == "$(<"$HINTS_FILE")" ]] ||
		fail "$what: /etc/nccl.conf in the container is not the pod's hints file"
	mnt=$(awk '$5 == "/etc/nccl.conf" { print $6 }' "/proc/$PID/mountinfo")
	[[ ,$mnt, == *,ro,* ]] || fail "$what: /etc/nccl.conf is not mounted read-only inside ($mnt)"
	lim=$(memlock_of "$PID")
	if [[ -s $RTN_DIR/runc-wrap.log ]] && grep -q "^$id: " "$RTN_DIR/runc-wrap.log"; then
		local hard
		hard=$(memlock_of "$(rtn_ctrd_pid)")
		hard=${hard#* }
		[[ $lim == "$hard $hard" ]] ||
			fail "$what: RLIMIT_MEMLOCK inside is $lim, not runc's hard limit $hard"
	else
		[[ $lim == "unlimited unlimited" ]] || fail "$what: RLIMIT_MEMLOCK inside is $lim"
	fi
	if [[ -d /sys/fs/cgroup/devices ]]; then
		# cgroup v1: the rules runc wrote, read from the host.
		local cg rules
		cg=$(awk -F: '$2 == "devices" { print $3 }' "/proc/$PID/cgroup")
		rules=$(<"/sys/fs/cgroup/devices$cg/devices.list")
		[[ $'\n'$rules$'\n' == *$'\n'"c 231:$((192 + k)) rw"$'\n'* &&
			$'\n'$rules$'\n' == *$'\n'"c 10:250 rw"$'\n'* &&
			$'\n'$rules$'\n' != *$'\na *:* rwm\n'* ]] ||
			fail "$what: the container's device cgroup lacks its devices' rules: $rules"
	fi
}

# untouched ID WHAT: nothing of NRI's in container ID's spec.
untouched() {
	jq_ok '.devices == [] and .rules == [] and .nccl == [] and .memlock == []' \
		"$2: no device, rule, /etc/nccl.conf mount or RLIMIT_MEMLOCK" "$(spec_view "$1")"
	! grep -q "^$1: " "$RTN_DIR/runc-wrap.log" 2>/dev/null || fail "$2: runc_wrap lowered a limit"
}

# gone CTR...: StopContainer and RemoveContainer.
gone() {
	local c
	for c; do
		cri stop "$c" >/dev/null || fail "StopContainer $c failed"
		cri rm "$c" >/dev/null || fail "RemoveContainer $c failed"
	done
}

hints_of() {
	echo "$HINTS/$(pod_uid "$1")/nccl.conf"
}

# ---- the scenarios ---------------------------------------------------------------------

# 1. The seed pod, attached; its container; then the same container without
# this machine's limit lowered: runc refuses it, so the limit reaches runc.
seed_adjusted() {
	local m line
	agent_fresh
	seed_pod seed-a
	HINTS_FILE=$(hints_of seed-a)
	[[ -s $HINTS_FILE ]] || fail "ADD wrote no hints file for seed-a"
	m=$(log_mark)
	ctr main "$POD" seed-a
	line=$(wait_log "$m" 'NRI: container main of pod hpnr/seed-a:' "CreateContainer's adjustment")
	[[ $line == *": 2 device nodes added (0 there already), hints /etc/nccl.conf, RLIMIT_MEMLOCK raised" ]] ||
		fail "the agent's account of the adjustment: $line"
	adjusted "$CTR" "$K" "seed-a/main"
	wait_metric hpn_rdma_nri_containers_adjusted_total 1 "one container adjusted"
	wait_metric hpn_rdma_nri_containers_untouched_total 0 "no container untouched"
	info "seed-a/main (rnic$K): $(spec_view "$CTR" | jq -c '{devices: [.devices[] | "\(.path) \(.major):\(.minor)"], memlock}')"
	local main=$CTR
	if may_raise_limits; then
		info "this machine may raise RLIMIT_MEMLOCK (CAP_SYS_RESOURCE): no refusal to show"
	else
		: >"$RTN_DIR/runc.as-is"
		jq -n --arg img "$RTN_IMAGE" '{metadata: {name: "as-is", attempt: 0},
			image: {image: $img}, command: ["/pause"], logPath: "as-is/0.log"}' \
			>"$T/pods/seed-a.as-is.json"
		CTR=$(cri create "$POD" "$T/pods/seed-a.as-is.json" "$T/pods/seed-a.json") ||
			fail "CreateContainer as-is failed"
		if cri start "$CTR" 2>"$T/create.err"; then
			rm -f "$RTN_DIR/runc.as-is"
			fail "runc started a container with RLIMIT_MEMLOCK unlimited without CAP_SYS_RESOURCE"
		fi
		rm -f "$RTN_DIR/runc.as-is"
		grep -q 'error setting rlimit type 8: operation not permitted' "$T/create.err" ||
			fail "the as-is container failed otherwise: $(<"$T/create.err")"
		jq_ok '.memlock == [[$u, $u]]' "the refused container's spec" "$(spec_view "$CTR")" \
			--arg u "$UNLIMITED"
		info "as containerd asks, on this machine: $(grep -o 'error setting rlimit.*' "$T/create.err" | head -n 1)"
		cri rm "$CTR" >/dev/null || fail "RemoveContainer as-is failed"
	fi
	gone "$main"
	stop_remove "$POD"
}

# 2. Two attached pods at once, and one not selected.
two_pods_and_plain() {
	local a ka b kb ca cb plain cp m line
	agent_fresh
	seed_pod seed-a
	a=$POD ka=$K
	seed_pod seed-b
	b=$POD kb=$K
	((ka != kb)) || fail "two pods on one NIC (rnic$ka)"
	ctr main "$b" seed-b
	cb=$CTR
	HINTS_FILE=$(hints_of seed-b) adjusted "$cb" "$kb" "seed-b/main"
	ctr main "$a" seed-a
	ca=$CTR
	HINTS_FILE=$(hints_of seed-a) adjusted "$ca" "$ka" "seed-a/main beside seed-b"
	[[ ! -e /proc/$PID/root/dev/infiniband/uverbs$kb ]] || fail "seed-a's container has seed-b's uverbs$kb"
	wait_metric hpn_rdma_nri_containers_adjusted_total 2 "two containers adjusted"

	# Not selected: the label is not there; ADD passes through, NRI leaves it alone.
	api_pod plain '{"app": "plain"}'
	plain=$(runp plain)
	[[ ! -e $STATE/$NET/$plain.eth0 ]] || fail "hpn-rdma attached the pod that is not selected"
	m=$(log_mark)
	ctr main "$plain" plain
	cp=$CTR
	wait_metric hpn_rdma_nri_containers_untouched_total 1 "the plain pod's container untouched"
	untouched "$cp" "plain/main"
	[[ -z $(ls "/proc/$PID/root/dev/infiniband" 2>/dev/null) ]] || fail "plain/main has /dev/infiniband"
	[[ ! -e /proc/$PID/root/etc/nccl.conf ]] || fail "plain/main has an /etc/nccl.conf"
	[[ $(memlock_of "$PID") == "$(memlock_of "$(rtn_ctrd_pid)")" ]] ||
		fail "plain/main's RLIMIT_MEMLOCK is not containerd's: $(memlock_of "$PID")"
	if line=$(tail -n "+$((m + 1))" "$T/agent.log" | grep -m 1 'NRI: container main of pod hpnr/plain'); then
		fail "the agent adjusted the plain pod: $line"
	fi
	wait_metric hpn_rdma_nri_containers_adjusted_total 2 "still two containers adjusted"
	gone "$cp" "$cb" "$ca"
	stop_remove "$plain"
	stop_remove "$b"
	stop_remove "$a"
}

# 3. What the container has already stays as it is.
its_own() {
	local view m line cdi dp
	agent_fresh
	seed_pod seed-a
	echo "NCCL_DEBUG=INFO" >"$T/own-nccl.conf"
	# Its own /etc/nccl.conf, and its NIC's CDI device (the device plugin's
	# Allocate names it; the agent's spec gives uverbsK and rdma_cm).
	cdi="alibabacloud.com/hpn-rdma=rnic$K"
	[[ -f $RTN_CDI_DIR/alibabacloud.com-hpn-rdma_rnic$K.json ]] ||
		fail "the agent keeps no CDI spec of rnic$K in $RTN_CDI_DIR"
	m=$(log_mark)
	ctr own "$POD" seed-a '.mounts = [{containerPath: "/etc/nccl.conf", hostPath: $f,
		readonly: true}] | .CDI_devices = [{name: $c}]' --arg f "$T/own-nccl.conf" --arg c "$cdi"
	line=$(wait_log "$m" 'NRI: container own of pod hpnr/seed-a:' "CreateContainer's adjustment")
	[[ $line == *": 0 device nodes added (2 there already), hints (its own mount), RLIMIT_MEMLOCK raised" ]] ||
		fail "the agent's account of container own: $line"
	view=$(spec_view "$CTR")
	jq_ok '(.devices | map(.path)) == ["/dev/infiniband/uverbs\($k)", "/dev/infiniband/rdma_cm"] and
		(.rules | map(.[0:2]) | sort) == ([[231, 192 + $k], [10, 250]] | sort)' \
		"own: CDI's two device nodes and rules, each once" "$view" --argjson k "$K"
	jq_ok '.nccl | length == 1 and .[0].source == $f' "own: its own /etc/nccl.conf, alone" \
		"$view" --arg f "$T/own-nccl.conf"
	jq_ok '.memlock == [[$u, $u]]' "own: RLIMIT_MEMLOCK unlimited" "$view" --arg u "$UNLIMITED"
	[[ $(<"/proc/$PID/root/etc/nccl.conf") == NCCL_DEBUG=INFO ]] ||
		fail "own: /etc/nccl.conf inside is not its own file"
	local own=$CTR
	# The device plugin's DeviceSpecs (a kubelet without CDI): uverbsK only; NRI adds rdma_cm.
	m=$(log_mark)
	ctr dp "$POD" seed-a '.devices = [{containerPath: $c, hostPath: $h, permissions: "rw"}]' \
		--arg c "/dev/infiniband/uverbs$K" --arg h "$T/dev/infiniband/uverbs$K"
	dp=$CTR
	line=$(wait_log "$m" 'NRI: container dp of pod hpnr/seed-a:' "CreateContainer's adjustment")
	[[ $line == *": 1 device nodes added (1 there already), hints /etc/nccl.conf, RLIMIT_MEMLOCK raised" ]] ||
		fail "the agent's account of container dp: $line"
	view=$(spec_view "$dp")
	jq_ok '(.devices | map(.path) | sort) == (["/dev/infiniband/uverbs\($k)", "/dev/infiniband/rdma_cm"] | sort) and
		(.rules | map(.[0:2]) | sort) == ([[231, 192 + $k], [10, 250]] | sort)' \
		"dp: uverbs$K once (the kubelet's) and rdma_cm (NRI's), one rule each" "$view" --argjson k "$K"
	# A device the host does not show (exclusive RDMA netns mode takes it
	# into the pod; ib_uverbs not loaded): said, never a silent "0 added".
	local j=$STATE/$NET/$POD.eth0 none
	jq -c '.nics[0].rdma.name = "mlx5_9"' "$j" >"$T/journal.new"
	mv "$T/journal.new" "$j"
	m=$(log_mark)
	ctr none "$POD" seed-a
	none=$CTR
	line=$(wait_log "$m" 'NRI: container none of pod hpnr/seed-a' "the device the host does not show")
	[[ $line == *"no character device of RDMA device mlx5_9"* ]] ||
		fail "the agent did not say that mlx5_9 has no character device: $line"
	jq_ok '.devices == [] and (.nccl | length == 1) and (.memlock | length == 1)' 		"none: no device node; the hints and memlock still" "$(spec_view "$none")"
	gone "$none" "$dp" "$own"
	stop_remove "$POD"
}

# 4. The agent killed after the sandbox, started again before its container.
agent_restarted() {
	local m
	agent_up
	seed_pod seed-a
	HINTS_FILE=$(hints_of seed-a)
	agent_stop KILL
	m=$(log_mark)
	agent_up
	ctr main "$POD" seed-a
	wait_log "$m" 'NRI: container main of pod hpnr/seed-a: 2 device nodes added' \
		"the restarted agent's adjustment" >/dev/null
	adjusted "$CTR" "$K" "seed-a/main after the agent's restart"
	gone "$CTR"
	stop_remove "$POD"
}

# 5. containerd stopped and started again under the agent.
containerd_restarted() {
	local m c before line
	agent_fresh
	wait_metric hpn_rdma_nri_connects_total 1 "a fresh agent's one connection"
	seed_pod seed-a
	HINTS_FILE=$(hints_of seed-a)
	# A container adjusted before: it lives on, and the new link's
	# Synchronize must not call it bare.
	ctr before "$POD" seed-a
	before=$CTR
	m=$(log_mark)
	rtn_containerd_stop TERM
	wait_log "$m" 'NRI: link to .* closed' "the agent seeing containerd go" >/dev/null
	wait_metric hpn_rdma_nri_registered 0 "the link down"
	rtn_containerd_start
	rtn_wait_network "$NET"
	wait_log "$m" 'NRI: registered as' "the agent's registration with the new containerd" >/dev/null
	wait_metric hpn_rdma_nri_registered 1 "registered again"
	wait_metric hpn_rdma_nri_connects_total 2 "one connection more"
	ctr main "$POD" seed-a
	adjusted "$CTR" "$K" "seed-a/main after containerd's restart"
	# Synchronize came before this CreateContainer (the runtime synchronizes
	# a plugin before it hands it events): its report, if any, is logged.
	if line=$(tail -n "+$((m + 1))" "$T/agent.log" | grep -m 1 'runs without'); then
		fail "Synchronize called the adjusted container bare: $line"
	fi
	wait_metric hpn_rdma_nri_unadjusted_containers 0 "no bare container after the restart"
	c=$(tail -n "+$((m + 1))" "$T/agent.log" | grep -c 'NRI: cannot connect') || true
	info "containerd restarted: connects 1 -> 2; 'cannot connect' said $c times meanwhile"
	gone "$CTR" "$before"
	stop_remove "$POD"
}

# 6. No agent: the runtime starts the container as it is; the agent, once
# connected, finds it in Synchronize and says so.
nri_down() {
	local m line
	agent_up
	agent_stop TERM
	seed_pod seed-a
	ctr main "$POD" seed-a
	untouched "$CTR" "seed-a/main started with NRI down"
	[[ -z $(ls "/proc/$PID/root/dev/infiniband" 2>/dev/null) ]] ||
		fail "the container started with NRI down has /dev/infiniband"
	m=$(log_mark)
	agent_up
	line=$(wait_log "$m" 'NRI: container main \([0-9a-f]{12}\) of attached pod hpnr/seed-a runs without' \
		"Synchronize's report")
	[[ $line == *"without 2 of its 2 RDMA device nodes: it started while the NRI link was down; restart it" &&
		$line == *"(${CTR:0:12})"* ]] || fail "Synchronize's report: $line"
	wait_metric hpn_rdma_nri_unadjusted_containers 1 "the bare container counted"
	info "Synchronize: ${line#*warn: }"
	gone "$CTR"
	stop_remove "$POD"
}

# 7. nri.required: with the link down, ADD refuses the seed pod (code 11, the
# kubelet's cue to try the sandbox again) before anything on the node
# changes; with the agent registered, the same pod attaches and its
# container is adjusted.
nri_required() {
	local add msg
	trap 'rtn_conflist "$(<"$T/net.conflist")"' EXIT
	jq -c '.plugins |= map(if .type == "hpn-rdma" then .nri = {required: true} else . end)' \
		"$T/net.conflist" >"$T/required.conflist"
	rtn_conflist "$(<"$T/required.conflist")"
	conflist_loaded '"nri":{"required":true}'
	agent_up
	agent_stop TERM
	api_pod seed-a "$SEED_LABELS"
	try_runp seed-a
	((RC != 0)) || fail "RunPodSandbox of seed-a succeeded with nri.required and no agent"
	add=$(rt_calls "" | jq -c '[.[] | select(.cmd == "ADD")]')
	jq_ok 'length == 1 and (.[0] | .rc == 1 and .out.code == 11 and
		(.out.msg | test("nri.required is true, but no hpn-rdma-agent answers")))' \
		"ADD refused with 11, saying the NRI link is down" "$add"
	msg=$(jq -r '.[0].out.msg' <<<"$add")
	[[ $ERR == *"$msg"* ]] || fail "RunPodSandbox's error does not carry the plugin's: $ERR"
	info "refused: $msg"
	node_as_before "after the refused sandbox"
	agent_up
	POD=$(runp seed-a)
	K=$(bind_rdma "$POD")
	HINTS_FILE=$(hints_of seed-a)
	ctr main "$POD" seed-a
	adjusted "$CTR" "$K" "seed-a/main with nri.required and the link up"
	gone "$CTR"
	stop_remove "$POD"
}

scenario "1: the seed's pod, attached: its container's devices, rules, hints and memlock" seed_adjusted
scenario "2: two attached pods each get their own devices; a pod not selected is untouched" \
	two_pods_and_plain
scenario "3: its own /etc/nccl.conf kept; CDI's and the device plugin's devices not added twice" its_own
scenario "4: the agent restarted between the sandbox and its container" agent_restarted
scenario "5: containerd restarted: the agent registers again, the next container is adjusted" \
	containerd_restarted
scenario "6: NRI down: the container starts bare; Synchronize reports it once connected" nri_down
scenario "7: nri.required, NRI down: the sandbox refused (11), nothing left; attached once it is up" \
	nri_required
agent_stop TERM
# Every agent of the run wrote here, each stopped by SIGTERM or SIGKILL: in
# a sanitizer build a finding (LeakSanitizer at a clean exit) is a failure.
! grep -E -m 3 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$T/agent.log" ||
	fail "the agent's log has sanitizer findings"
rt_done
