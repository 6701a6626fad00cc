#!/usr/bin/env bash
# A DRA Prepare's latency while the agent's worker thread is busy with the
# node's upkeep, for two builds of hpn-rdma-agent (issue 38: the worker's
# single busy slot, where a Prepare that found it busy got -EBUSY and asked
# again 20 ms later, against the priority job queue of df0c9c3, where a
# Prepare is queued first and waits only for the job that is running). Not a
# row of scripts/bench.sh and not in ctest: run it by hand, as root.
#
#   bench/queue.sh --before AGENT --after AGENT [--json PATH]
#
# What it stands for: a node whose agent is the DRA driver (--dra) and also
# runs its health loop and GC, with the kubelet preparing claims one after
# another. Each run starts the agent afresh and runs hpn-kubelet dra-bench
# (QUEUE_ROUNDS rounds of Prepare from the API, Prepare from the record,
# Unprepare of one claim); the figure is "prepare-api", the Prepare that
# reads its claim from the API (a job on the worker up to ab59024, on the
# loop since: doc/performance.md has both). Two conditions:
#   idle  health and GC off, the pool still: the floor;
#   load  --health-interval 1 --health-batch QUEUE_PODS over QUEUE_PODS real
#         attachments (veths moved into pod netns by hpn-rdma's ADD, so each
#         CHECK enters a netns and reads its links; a node has far fewer, but
#         its CHECKs prove RDMA devices in spawned processes, which these
#         cannot: the count stands for a batch's time, not a node's pods), --gc-interval 1 against
#         a containerd's CRI socket, and the pool changed every QUEUE_CHURN
#         seconds (a veth added to and deleted from the node), so the driver
#         rewrites its ResourceSlices through the API (the claim's status is
#         written only when its pod's ADD journals it: not here).
# Runs go before, after, before, after (QUEUE_PAIRS times, idle then load),
# so both builds see the same machine; the load average is printed with each.
#
# Stand-ins (what a node has that this does not):
#   the API server: test/kube/apiserver.py (Python, HTTPS) on the node netns's
#     loopback, its --mode left "ok": its faults hit every endpoint, the
#     Prepare's own claim GET too, and it has no "slow" answer, so a slow API
#     would not load the worker alone;
#   the kubelet: hpn-kubelet (test/agent/kubelet), one client, calls in series;
#   the NICs: veths in a throwaway node netns (bench/lib.sh's bench_netns),
#     nic0, the claim's, under a fake sysfs tree (test/netns/fakesys.sh) as
#     PCI function 0000:af:00.0 with RDMA device mlx5_0; the attachments'
#     hc<k> have neither, so no CHECK runs an RDMA proof;
#   the runtime: a containerd of our own (its own root, state and socket in
#     the scratch dir) with no pods; --gc-grace 86400 keeps every journal, so
#     each GC round reads every journal under the state lock and undoes none
#     (the CRI call itself is on the loop, not the worker).
# Skipped (exit 77), saying why, without root, the tools, or a binary.
#
# Environment: HPN_PLUGIN (default build/plugin/hpn-rdma), HPN_KUBELET
# (default build/test/agent/hpn-kubelet), QUEUE_ROUNDS (default 400),
# QUEUE_CHURN (default 2 s; a node's pool changes far less often),
# QUEUE_PAIRS (default 3), QUEUE_PODS (default 1000), HPN_CNI_BIN (default
# /usr/lib/cni, for CNI_PATH only). No --metrics-address: with 250 held NICs
# a scrape crashed both builds (doc/performance.md says where).
# doc/performance.md ("Prepare under a busy worker") has the figures.
set -euo pipefail
shopt -s inherit_errexit

SRC=$(cd "$(dirname "$0")/.." && pwd)
A_BEFORE=
A_AFTER=
JSON=$PWD/queue.json
while (($#)); do
	case $1 in
	--before)
		A_BEFORE=$2
		shift
		;;
	--after)
		A_AFTER=$2
		shift
		;;
	--json)
		JSON=$2
		shift
		;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "queue.sh: unknown argument $1" >&2
		exit 2
		;;
	esac
	shift
done

PLUGIN=${HPN_PLUGIN:-$SRC/build/plugin/hpn-rdma}
KUBELET=${HPN_KUBELET:-$SRC/build/test/agent/hpn-kubelet}
CNI_BIN=${HPN_CNI_BIN:-/usr/lib/cni}
ROUNDS=${QUEUE_ROUNDS:-400}
PAIRS=${QUEUE_PAIRS:-3}
PODS=${QUEUE_PODS:-1000}
CHURN=${QUEUE_CHURN:-2}
[[ $CHURN =~ ^[0-9]+(\.[0-9]+)?$ ]] || {
	echo "queue.sh: QUEUE_CHURN must be seconds, not '$CHURN'" >&2
	exit 2
}
for v in ROUNDS PAIRS PODS; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || {
		echo "queue.sh: QUEUE_$v must be a positive number, not '${!v}'" >&2
		exit 2
	}
done

# What bench/lib.sh, kube.sh and dra.sh expect of scripts/bench.sh: no rows
# of theirs, nic0 in the node (the claim's), pod netns 0 (unused).
ROWS=()
QUICK=0
MTU=
MAXPAR=1
source "$SRC/bench/lib.sh"  # skip, bench_netns, cleanup, pod, selected
source "$SRC/bench/kube.sh" # kube_setup: the API stand-in in the node netns
source "$SRC/bench/dra.sh"  # dra_pci, dra_slices_now, DRA_DRIVER; fakesys.sh
DRA_NIC=nic0

[[ $(id -u) == 0 ]] || skip "needs root (network namespaces)"
for t in ip jq awk openssl containerd; do
	command -v $t >/dev/null || skip "$t is not installed"
done
[[ -x /usr/bin/python3 ]] || skip "/usr/bin/python3 is not installed (the API stand-in)"
for b in "$A_BEFORE" "$A_AFTER" "$PLUGIN" "$KUBELET"; do
	[[ -n $b && -x $b ]] || {
		echo "queue.sh: '$b' is not an executable (--before, --after, HPN_PLUGIN, HPN_KUBELET)" >&2
		exit 2
	}
done

# ---- the node: NICs, attachments, the API, the runtime ---------------------------

AGENT_PIDS=
CTRD_PID=
CHURN_PID=
AGENT_PID=
q_cleanup() {
	set +e
	for p in $CHURN_PID $AGENT_PID $CTRD_PID; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	cleanup
}
bench_netns
trap q_cleanup EXIT
kube_setup
DRA_STATE=$STATE-dra
mkdir -p "$DRA_STATE"

# The plugin's tree: nic0's PCI function; the agent's: with mlx5_0.
mk_fake_pci "$W/sysfs" "$(dra_pci 0)" nic0
cp -a "$W/sysfs" "$W/agent-sysfs"
mk_rdma "$W/agent-sysfs" "$(dra_pci 0)" mlx5_0 uverbs0
jq -cn --arg st "$DRA_STATE" --arg s "$W/agent-sysfs" --arg log "$W/agent-file.log" '{
	cniVersion: "1.0.0", name: "bench", plugins: [{type: "hpn-rdma",
	match: {devices: ["nic*"]}, rdmaRequired: false, stateDir: $st, sysfsRoot: $s,
	logFile: $log, logLevel: "debug"}]}' >"$W/agent.conflist"

# Attachment k: veth hc<k> (its peer in pod k) moved into pod k as hpn0 by
# the plugin's ADD, as containerd runs it (journal, NCCL hints). Not nic*:
# outside the driver's pool, so its slices stay one NIC; the agent still
# counts a moved NIC of a journal as a held device (up to its 256).
echo "# $PODS attachments for the health loop"
: >"$W/hc.batch"
for ((k = 1; k <= PODS; k++)); do
	ip netns add "$(pod "$k")"
	echo "link add hc$k type veth peer name hcp$k netns $(pod "$k")" >>"$W/hc.batch"
done
ip -n "$NODE" -batch "$W/hc.batch"
for ((k = 1; k <= PODS; k++)); do
	jq -cn --arg st "$DRA_STATE" --arg s "$W/sysfs" --arg h "$HINTS" --arg d "hc$k" '{
		cniVersion: "1.0.0", name: "bench", type: "hpn-rdma", rdmaRequired: false,
		stateDir: $st, sysfsRoot: $s, device: $d, ifName: "hpn0", nccl: {dir: $h}}' |
		CNI_COMMAND=ADD CNI_CONTAINERID=queue-$k CNI_NETNS=/run/netns/$(pod "$k") \
			CNI_IFNAME=hpn0 CNI_PATH=$CNI_BIN \
			CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=queue-$k" \
			ip netns exec "$NODE" "$PLUGIN" >"$W/add.out" 2>&1 || {
		echo "queue.sh: ADD of attachment $k failed: $(head -c 400 "$W/add.out")" >&2
		exit 1
	}
done

# The runtime: containerd, no pods; GC asks its CRI ListPodSandbox.
mkdir -p "$W/ctrd"
cat >"$W/ctrd/config.toml" <<EOF
version = 2
root = "$W/ctrd/root"
state = "$W/ctrd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.nri.v1.nri"]
[grpc]
  address = "$W/ctrd/ctrd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$W/ctrd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$W/ctrd/cni/bin"
    conf_dir = "$W/ctrd/cni/net.d"
EOF
containerd --config "$W/ctrd/config.toml" >"$W/ctrd/log" 2>&1 &
CTRD_PID=$!
for ((i = 0; i < 200; i++)); do [[ -S $W/ctrd/ctrd.sock ]] && break; sleep 0.05; done
[[ -S $W/ctrd/ctrd.sock ]] || {
	echo "queue.sh: containerd did not start: $(tail -n 5 "$W/ctrd/log")" >&2
	exit 1
}

# ---- one run ---------------------------------------------------------------------

# agent_up AGENT COND: the agent in the node netns, its kubelet stand-in, the
# DRA socket served and the claim's NIC published; with load, its health loop
# and GC each through one round.
agent_up() {
	local agent=$1 cond=$2 i
	local -a flags=(--health-interval 0 --cri-socket none)
	[[ $cond == load ]] && flags=(--health-interval 1 --health-batch "$PODS"
		--cri-socket "$W/ctrd/ctrd.sock" --gc-interval 1 --gc-grace 86400)
	rm -rf "$W/kl"
	: >"$W/agent-file.log"
	"$KUBELET" serve -dir "$W/kl" -out "$W/kubelet.events" -pods "$W/dra-pods.json" \
		2>"$W/kubelet.log" &
	AGENT_PIDS=$!
	for ((i = 0; i < 100; i++)); do [[ -S $W/kl/device-plugins/kubelet.sock ]] && break; sleep 0.05; done
	KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$KUBE_PORT_good \
		ip netns exec "$NODE" "$agent" --config "$W/agent.conflist" --kubelet-dir "$W/kl" \
		--lookup-socket "$W/agent.sock" --cdi-dir "$W/cdi" \
		--kubeconfig "$W/dra.kubeconfig" --service-account "$KUBE_WORK/sa" \
		--node-name bench-node --dra --dra-driver "$DRA_DRIVER" "${flags[@]}" \
		2>"$W/agent.log" &
	AGENT_PID=$!
	DRA_SOCK=$W/kl/plugins/$DRA_DRIVER/dra.sock
	for ((i = 0; i < 300; i++)); do
		[[ -S $DRA_SOCK ]] && dra_slices_now | jq -e --arg i "$DRA_NIC" \
			'any(.[].spec.devices[]; .attributes.interface.string == $i)' >/dev/null && break
		sleep 0.05
	done
	((i < 300)) || {
		echo "queue.sh: the driver did not serve $DRA_SOCK with $DRA_NIC published: $(tail -n 5 "$W/agent.log")" >&2
		exit 1
	}
	if [[ $cond == load ]]; then
		for ((i = 0; i < 200; i++)); do
			# Before the queue, GC finding the worker busy skipped its round.
			grep -q 'attachments checked in' "$W/agent-file.log" &&
				grep -q 'gc: nothing to undo\|gc: .*skipped' "$W/agent-file.log" && return 0
			sleep 0.05
		done
		echo "queue.sh: no health batch and GC round within 10 s: $(tail -n 5 "$W/agent-file.log")" >&2
		exit 1
	fi
}

agent_down() {
	kill "$AGENT_PID" $AGENT_PIDS 2>/dev/null || true
	wait "$AGENT_PID" $AGENT_PIDS 2>/dev/null || true
	AGENT_PID=
	AGENT_PIDS=
}

# churn: the pool changes every CHURN seconds, so the driver writes its
# slices (on the worker); each change is also a scan of every NIC on the
# loop (33 ms here for 252 NICs on the fake tree), which both builds pay.
churn() {
	while :; do
		ip -n "$NODE" link add nicz type veth peer name peerz 2>/dev/null || true
		sleep "$CHURN"
		ip -n "$NODE" link del nicz 2>/dev/null || true
		sleep "$CHURN"
	done
}

# run N BUILD COND: one agent, ROUNDS rounds; $W/runs gets one JSON line.
run() {
	local n=$1 build=$2 cond=$3 agent l0 l1 t0 t1
	agent=$A_BEFORE
	[[ $build == after ]] && agent=$A_AFTER
	agent_up "$agent" "$cond"
	[[ $cond == load ]] && {
		churn &
		CHURN_PID=$!
	}
	f0=$(wc -l <"$W/agent-file.log")
	l0=$(cut -d' ' -f1 /proc/loadavg)
	t0=$(date +%s.%N)
	"$KUBELET" dra-bench -socket "$DRA_SOCK" -n "$ROUNDS" "bench/queue/$CLAIM_UID" \
		>"$W/lat.$n" 2>"$W/lat.err" || {
		echo "queue.sh: dra-bench ($build, $cond) failed: $(head -c 400 "$W/lat.err"); agent: $(tail -n 5 "$W/agent.log")" >&2
		exit 1
	}
	t1=$(date +%s.%N)
	l1=$(cut -d' ' -f1 /proc/loadavg)
	tail -n +$((f0 + 1)) "$W/agent-file.log" >"$W/log.$n"
	if [[ -n $CHURN_PID ]]; then
		kill "$CHURN_PID" 2>/dev/null || true
		wait "$CHURN_PID" 2>/dev/null || true
		CHURN_PID=
		ip -n "$NODE" link del nicz 2>/dev/null || true
	fi
	agent_down
	# The worker's upkeep during the run, from the agent's debug log: each
	# health batch's and GC round's own time, the slices published.
	awk '/attachments checked in/ { for (i = 1; i <= NF; i++) if ($i == "in") print "health", $(i + 1) }
	     /gc: nothing to undo/ { for (i = 1; i <= NF; i++) if ($i == "in") print "gc", $(i + 1) }' \
		"$W/log.$n" >"$W/jobs.$n"
	awk '$1 == "prepare-api" { print $2 }' "$W/lat.$n" | sort -n | jq -sc \
		--arg b "$build" --arg c "$cond" --argjson n "$n" --argjson l0 "$l0" --argjson l1 "$l1" \
		--argjson s "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
		--argjson pub "$(grep -c 'DRA: published' "$W/log.$n" || true)" \
		--argjson skip "$(grep -c 'this period is skipped\|this round is skipped' "$W/log.$n" || true)" \
		--argjson jobs "$(jq -Rsc 'split("\n") | map(select(length > 0) | split(" ")) |
			group_by(.[0]) | map({(.[0][0]): (map(.[1] | tonumber * 1000) | sort |
			{n: length, median_ms: .[length / 2 | floor], max_ms: max})}) | add // {}' "$W/jobs.$n")" '
		def q(p): .[((length * p) | ceil) - 1] / 1e6;
		{run: $n, build: $b, cond: $c, seconds: $s, load1_before: $l0, load1_after: $l1,
		 prepares: length, prepare_api_ms: map(. / 1e6), median_ms: q(0.5), p90_ms: q(0.9), p99_ms: q(0.99), max_ms: (max / 1e6),
		 slice_rounds: $pub, upkeep_skipped: $skip, worker_jobs: $jobs}' >>"$W/runs"
	jq -r '"# run \(.run): \(.build) \(.cond): median \(.median_ms * 100 | round / 100) p90 \(.p90_ms * 100 | round / 100) p99 \(.p99_ms * 100 | round / 100) max \(.max_ms * 100 | round / 100) ms; load \(.load1_before)->\(.load1_after); worker: \(.worker_jobs | tostring), \(.slice_rounds) slice rounds, \(.upkeep_skipped) upkeep skipped"' \
		<<<"$(tail -n 1 "$W/runs")"
}

# ---- the claim, then the runs ------------------------------------------------------

kubeconfig "$W/dra.kubeconfig" "https://127.0.0.1:$KUBE_PORT_good" file "token: bench-token-$$"
echo '[]' >"$W/dra-pods.json"
agent_up "$A_AFTER" idle
DRA_DEV=$(dra_slices_now | jq -r --arg i "$DRA_NIC" '[.[].spec.devices[] |
	select(.attributes.interface.string == $i) | .name][0] // ""')
agent_down
[[ -n $DRA_DEV ]] || {
	echo "queue.sh: no device of $DRA_NIC in the slices" >&2
	exit 1
}
CLAIM_UID=7a0d4e5f-3c2b-4d1a-8e9f-0000000000a1
kube_claim bench queue "$CLAIM_UID" "$DRA_DRIVER" bench-node queue \
	7a0d4e5f-3c2b-4d1a-8e9f-0000000000a2 "$DRA_DEV"

: >"$W/runs"
n=0
for ((p = 0; p < PAIRS; p++)); do
	for cond in idle load; do
		for build in before after; do
			run $((n++)) "$build" "$cond"
		done
	done
done

# Pooled over the runs of each build and condition; each run's own figures kept.
jq -sc --argjson rounds "$ROUNDS" --argjson pods "$PODS" --arg cpus "$(nproc)" \
	--arg before "$A_BEFORE" --arg after "$A_AFTER" '
	{rounds_per_run: $rounds, attachments: $pods, cpus: ($cpus | tonumber),
	 before: $before, after: $after, runs: .,
	 by: (group_by(.cond + "/" + .build) | map({key: "\(.[0].cond)/\(.[0].build)", value: {
		runs: length, median_ms: (map(.median_ms) | sort), p90_ms: (map(.p90_ms) | sort),
		p99_ms: (map(.p99_ms) | sort), max_ms: (map(.max_ms) | max),
		load1: (map(.load1_before, .load1_after) | {min: min, max: max})}}) | from_entries)}' \
	"$W/runs" >"$JSON"
echo "# per condition and build (each run's figure, smallest first):"
jq -r '.by | to_entries[] | "\(.key)\tmedian \(.value.median_ms | map(. * 100 | round / 100))\tp90 \(.value.p90_ms | map(. * 100 | round / 100))\tp99 \(.value.p99_ms | map(. * 100 | round / 100))\tmax \(.value.max_ms * 100 | round / 100) ms\tload1 \(.value.load1.min)-\(.value.load1.max)"' "$JSON"
echo "# JSON: $JSON"
