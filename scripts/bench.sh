#!/usr/bin/env bash
# Benchmark of hpn-rdma against Debian's reference CNI plugins (host-device for
# move mode, macvlan for shared mode) and against the floor: the same netlink
# operations done by iproute2 alone. Run as root.
#
#   scripts/bench.sh [--quick] [--check] [--json PATH] [--vm]
#
# Everything runs in a throwaway "node" netns (hpnb-<pid>-node) with veth ends
# standing in for NICs, and pod netns hpnb-<pid>-p<k>; an EXIT/INT/TERM trap
# deletes them (and every veth with them) and the scratch dir, whatever
# happened. The machine's own network is never touched: the measuring runner
# (bench/runner.c, hpn-bench-run) enters the node netns once, as
# `ip netns exec` does, and starts every plugin from there.
#
# Rows (each measured the same way, interleaved over BENCH_ROUNDS rounds so
# that background load falls on all of them alike):
#   move mode:   hpn-rdma, host-device, iproute2 floor
#   shared mode: macvlan (reference), iproute2 floor, and hpn-rdma when the
#                plugin accepts `mode: "macvlan"` (detected by trying it)
# each without IPAM (the plugin's own cost) and with Debian's `static` IPAM
# (end to end: address and route; the IPAM plugin's CPU and RSS are included,
# as a runtime pays them).
# hpn-rdma runs with rdmaRequired:false: veths have no RDMA device, so its
# RDMA discovery runs and finds nothing, and the bind is skipped.
#
# Measured per row: ADD+DEL wall (median, p99), CPU (user+sys, children
# included) per ADD+DEL, peak RSS (largest ru_maxrss of a plugin run and its
# waited-for children), VERSION latency, and N-parallel throughput (N pods
# ADDed at once, then DELed at once; pods/s and the ratio to N = 1).
#
# Agent rows (hpn-rdma-agent, doc/agent.md): move.*.hpn-agent is hpn-rdma's
# ADD+DEL with the allocation lookup: the pod (CNI_ARGS K8S_POD_NAMESPACE and
# K8S_POD_NAME) holds nic<k> per the kubelet stand-in's PodResources, the
# plugin asks the agent over its unix socket and attaches that NIC; set
# against move.*.hpn-rdma, the pool path (no pod names: no lookup). And the
# device plugin through the stand-in (hpn-kubelet bench): Allocate of one NIC
# and a ListAndWatch stream to its first list, latency per call. Skipped,
# saying why, without the agent or the stand-in.
#
# Runtime rows: a pod's RunPodSandbox -> StopPodSandbox -> RemovePodSandbox
# wall time through a real containerd (Debian's 1.6.20 + runc, on a throwaway
# node of its own: test/runtime/node.sh), with the network bridge alone
# (runtime.bridge), bridge + hpn-rdma in move mode without IPAM
# (runtime.hpn-rdma), and bridge + hpn-rdma passing the pod through
# (runtime.passthrough: its podSelector picks no pod), one pod of each in turn. containerd runs hpn-rdma
# three times per pod (ADD, the DEL of Stop, the DEL of Remove); the
# difference of the medians is what hpn-rdma adds to a pod's life (also shown:
# the median of the pod-by-pod differences), printed against the iproute2
# floor of the same move (move.none.iproute2, also three processes, run once
# after each pair of pods, so that the same load falls on all three).
# Skipped, saying why, without containerd or hpn-cri.
#
# Kubernetes API rows (issue 17): hpn-rdma's ADD+DEL (move, no IPAM) with
# "kubernetes" in its config, against the stand-in API server
# (test/kube/apiserver.py: HTTPS with a test CA, bearer token; Python) on
# the node netns's loopback: kube.none.hpn-kanno, where the pod's annotations
# decide everything (no request: the path a pod with the annotations takes),
# and kube.none.hpn-klabel, where podSelector.label decides, so every ADD
# GETs the pod. The lookup's cost per ADD is the difference of the two (wall
# includes the stand-in's time to answer; CPU is the plugin's own); the
# stand-in's request log proves 0 and 1 requests per ADD. VERSION rows of the
# plugin as it would be with libyaml, and libcurl + libyaml, linked instead
# of dlopen()ed (bench/CMakeLists.txt's hpn-rdma-linked-*): what every start
# would pay. Skipped, saying why, without openssl or python3.
#
# Options and environment:
#   --quick          few iterations (smoke test; figures are not meaningful)
#   --check          after the run, fail unless the JSON holds every row
#   --json PATH      machine-readable copy (default: ./bench.json)
#   HPN_PLUGIN       plugin binary (default build/plugin/hpn-rdma)
#   HPN_BENCH_RUN    runner binary (default build/bench/hpn-bench-run)
#   HPN_BENCH_DISCOVERY  ADD's RDMA discovery timed alone (default
#                    build/bench/hpn-bench-discovery; skipped if missing)
#   HPN_BENCH_KERNEL the kernel's own work of a move-mode ADD+DEL, in one
#                    process (default build/bench/hpn-bench-kernel; skipped
#                    if missing): with two starts of /bin/true, the CPU floor
#                    of any plugin; also the cost of one CPUID on this machine
#   HPN_CNI_BIN      reference plugins (default /usr/lib/cni)
#   HPN_AGENT        the agent (default build/agent/hpn-rdma-agent)
#   HPN_KUBELET      the kubelet stand-in (default build/test/agent/hpn-kubelet)
#   BENCH_AGENT_ITER calls per device plugin latency row (default 500; quick 20)
#   HPN_PLUGIN_LINKED_YAML, HPN_PLUGIN_LINKED_KUBE  the plugin with libyaml,
#                    and libcurl + libyaml, linked (default
#                    build/bench/hpn-rdma-linked-{yaml,kube}; rows skipped if
#                    missing)
#   HPN_CRI          the CRI client (default build/test/runtime/hpn-cri)
#   HPN_PAUSE_IMAGE  the sandbox image archive (default
#                    build/test/runtime/pause-image.tar)
#   BENCH_RT_ITER    pod cycles per runtime row (default 40; quick 3)
#   BENCH_ITER       ADD+DEL cycles per row (default 200; quick 6)
#   BENCH_ROUNDS     rounds the cycles are split into (default 4; quick 2)
#   BENCH_PAR        parallel widths (default "1 8 32")
#   BENCH_PAR_REPS   repetitions per width (default 5; quick 1)
#   HPN_PLUGIN_BASE  an older hpn-rdma binary: adds hpn-base rows (move mode,
#                    VERSION), for before/after figures from the same run
#   BENCH_ROWS       only the rows matching this regex (e.g. 'move\..*hpn');
#                    --check then fails, as rows are missing
#   BENCH_HINTS_DIR  parent of the NCCL hints dir (default: /run if it is a
#                    tmpfs, as on a node, else /dev/shm)
#   BENCH_STATE_DIR  parent of hpn-rdma's stateDir (default: /run if it is a
#                    tmpfs, as a node's default /run/hpn-rdma/state, else
#                    /dev/shm; BENCH_STATE_DIR=/tmp measures it on disk)
#   BENCH_MTU        if set, every row also sets this MTU in ADD (and the
#                    device's MTU is restored on DEL); host-device has no MTU
#                    option, so its rows then do less work than the others
# VM section (--vm; needs QEMU and the vm7 tier's kernel image, which
# test/vm/prepare.sh --kernel 7 fetches and which is kept current here): RDMA
# on the current kernel in one boot (test/vm/vm7-bench.sh; alone: test/vm/run.sh
# test/vm/vm7-bench.sh) -- ib_write_bw pod to pod over two virtio NICs on one
# QEMU hub, the two pods made by hand (the floor: iproute2, rdma link add
# inside each pod) and through hpn-rdma with softRoce, run by run in turn, and
# the floor over a veth pair; then ADD's latency with the RDMA proof (softRoce)
# and with rdmaRequired false, in turn, and DEL's.
#   BENCH_VM_ITERS   64 KiB messages per ib_write_bw run (default 1000; quick 100)
#   BENCH_VM_RUNS    runs per path (default 3; quick 1)
#   BENCH_VM_ADDS    ADDs of each kind (default 5; quick 1)
#   HPN_VM_CACHE     the vm tier's cache (default /var/cache/hpn-rdma/vm)
# Timings are reported, never asserted: the targets are printed as met or not.
# shellcheck disable=SC2016 # jq programs are single-quoted on purpose
set -euo pipefail
shopt -s inherit_errexit

SRC=$(cd "$(dirname "$0")/.." && pwd)
QUICK=0
CHECK=0
VM=0
JSON=$PWD/bench.json
while (($#)); do
	case $1 in
	--quick) QUICK=1 ;;
	--check) CHECK=1 ;;
	--json)
		JSON=$2
		shift
		;;
	--json=*) JSON=${1#--json=} ;;
	--vm) VM=1 ;;
	-h | --help)
		sed -n '2,/^# Timings/p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "bench.sh: unknown argument $1" >&2
		exit 2
		;;
	esac
	shift
done

PLUGIN=${HPN_PLUGIN:-$SRC/build/plugin/hpn-rdma}
RUNNER=${HPN_BENCH_RUN:-$SRC/build/bench/hpn-bench-run}
BASE=${HPN_PLUGIN_BASE:-}
DISCOVERY=${HPN_BENCH_DISCOVERY:-$SRC/build/bench/hpn-bench-discovery}
KERNEL=${HPN_BENCH_KERNEL:-$SRC/build/bench/hpn-bench-kernel}
LINKED_YAML=${HPN_PLUGIN_LINKED_YAML:-$SRC/build/bench/hpn-rdma-linked-yaml}
LINKED_KUBE=${HPN_PLUGIN_LINKED_KUBE:-$SRC/build/bench/hpn-rdma-linked-kube}
[[ -z $BASE || -x $BASE ]] || {
	echo "bench.sh: HPN_PLUGIN_BASE $BASE is not an executable" >&2
	exit 2
}
CNI_BIN=${HPN_CNI_BIN:-/usr/lib/cni}
if ((QUICK)); then
	ITER=${BENCH_ITER:-6}
	ROUNDS=${BENCH_ROUNDS:-2}
	PAR_REPS=${BENCH_PAR_REPS:-1}
	VITER=${BENCH_VERSION_ITER:-6}
	VM_ITERS=${BENCH_VM_ITERS:-100}
	VM_RUNS=${BENCH_VM_RUNS:-1}
	VM_ADDS=${BENCH_VM_ADDS:-1}
	RT_ITER=${BENCH_RT_ITER:-3}
	AG_ITER=${BENCH_AGENT_ITER:-20}
else
	ITER=${BENCH_ITER:-200}
	ROUNDS=${BENCH_ROUNDS:-4}
	PAR_REPS=${BENCH_PAR_REPS:-5}
	VITER=${BENCH_VERSION_ITER:-200}
	VM_ITERS=${BENCH_VM_ITERS:-1000}
	VM_RUNS=${BENCH_VM_RUNS:-3}
	VM_ADDS=${BENCH_VM_ADDS:-5}
	RT_ITER=${BENCH_RT_ITER:-40}
	AG_ITER=${BENCH_AGENT_ITER:-500}
fi
AGENT=${HPN_AGENT:-$SRC/build/agent/hpn-rdma-agent}
KUBELET=${HPN_KUBELET:-$SRC/build/test/agent/hpn-kubelet}
PAR=${BENCH_PAR:-1 8 32}
MTU=${BENCH_MTU:-}
for v in ITER ROUNDS PAR_REPS VITER RT_ITER VM_ITERS VM_RUNS VM_ADDS AG_ITER; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || {
		echo "bench.sh: $v must be a positive number, not '${!v}'" >&2
		exit 2
	}
done
PER_ROUND=$(((ITER + ROUNDS - 1) / ROUNDS))
MAXPAR=1
for n in $PAR; do
	[[ $n =~ ^[1-9][0-9]*$ && $n -le 100 ]] || {
		echo "bench.sh: BENCH_PAR widths are 1..100, not '$n'" >&2
		exit 2
	}
	((n > MAXPAR)) && MAXPAR=$n
done

skip() {
	echo "SKIP: $*"
	exit 77
}
[[ $(id -u) == 0 ]] || skip "needs root (network namespaces)"
for t in ip jq awk; do
	command -v $t >/dev/null || skip "$t is not installed"
done
for p in host-device macvlan static; do
	[[ -x $CNI_BIN/$p ]] || skip "$CNI_BIN/$p is missing (Debian: containernetworking-plugins)"
done
[[ -x $PLUGIN ]] || {
	echo "bench.sh: plugin $PLUGIN is missing (build it, or set HPN_PLUGIN)" >&2
	exit 2
}
[[ -x $RUNNER ]] || {
	echo "bench.sh: runner $RUNNER is missing (cmake --build build, or set HPN_BENCH_RUN)" >&2
	exit 2
}
IP=$(command -v ip)

# ---- throwaway namespaces, cleaned up whatever happens -------------------------

PFX="hpnb-$$-"
NODE=${PFX}node
W=
cleanup() {
	local ns
	set +e
	for p in ${AGENT_PIDS:-}; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	# The runtime rows' node first: its processes are found through its netns.
	declare -F rtn_cleanup >/dev/null && rtn_cleanup
	declare -F kube_stop >/dev/null && kube_stop
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		[[ $ns == "$PFX"* ]] && ip netns del "$ns"
	done
	[[ -n $W && -d $W ]] && rm -rf "$W"
	[[ -n ${HINTS:-} && -d $HINTS ]] && rm -rf "$HINTS"
	[[ -n ${STATE:-} && -d $STATE ]] && rm -rf "$STATE"
	[[ -n ${JOBS:-} && -d $JOBS ]] && rm -rf "$JOBS"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
W=$(mktemp -d /tmp/hpnb.XXXXXX)
# The journals and the NCCL hints live where a node keeps them by default,
# /run/hpn-rdma/state and /run/hpn-rdma/pods: on tmpfs. /dev/shm stands in
# for /run when /run is not a tmpfs here.
RUNTMP=/dev/shm
[[ $(stat -f -c %T /run) == tmpfs ]] && RUNTMP=/run
STATE=${BENCH_STATE_DIR:-$RUNTMP}/hpnb-state-$$
HINTS=${BENCH_HINTS_DIR:-$RUNTMP}/hpnb-hints-$$
# The runner's job files too: each start truncates and rewrites a job's
# stdout and stderr files, which stand in for the pipes a runtime reads
# (libcni); on ext4 that costs the writer a block writeback at close, which
# the plugin would pay and /bin/true, writing nothing, would not.
JOBS=$RUNTMP/hpnb-jobs-$$
mkdir -p "$STATE" "$HINTS" "$JOBS"

ip netns add "$NODE" 2>/dev/null || skip "cannot create network namespaces here"
ip -n "$NODE" link set lo up
pod() { echo "${PFX}p$1"; }
# nic<k>: stand-in NIC k (down, like an unused NIC); its peer is up.
# mst0: the shared-mode master (up, as a node's NIC in use is).
batch=$W/setup.batch
: >"$batch"
for ((k = 0; k < MAXPAR; k++)); do
	ip netns add "$(pod $k)"
	echo "link add nic$k type veth peer name peer$k" >>"$batch"
	echo "link set peer$k up" >>"$batch"
done
{
	echo "link add mst0 type veth peer name mstp0"
	echo "link set mst0 up"
	echo "link set mstp0 up"
} >>"$batch"
ip -n "$NODE" -batch "$batch"

# ---- jobs: one plugin or ip run each, prepared as files for the runner --------

# job DIR ARGV...: a job with no stdin and no environment (ip).
job() {
	local d=$1
	shift
	mkdir -p "$d"
	printf '%s\n' "$@" >"$d/argv"
	: >"$d/env"
	: >"$d/stdin"
}

# cni_job DIR COMMAND K CONFIG BINARY [CNI_ARGS]: a CNI plugin run for pod K.
cni_job() {
	local d=$1 cmd=$2 k=$3 conf=$4 bin=$5
	mkdir -p "$d"
	echo "$bin" >"$d/argv"
	printf '%s\n' "CNI_COMMAND=$cmd" "CNI_CONTAINERID=bench-$k" \
		"CNI_NETNS=/run/netns/$(pod "$k")" CNI_IFNAME=hpn0 "CNI_PATH=$CNI_BIN" \
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin" ${6:+"CNI_ARGS=$6"} >"$d/env"
	# The agent rows' pods are Kubernetes pods: the plugin asks the agent about them.
	[[ -z ${6:-} && $bin == "$PLUGIN" && $conf == *'"agent":'* ]] &&
		echo "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=bench-$k" >>"$d/env"
	echo "$conf" >"$d/stdin"
}

# kube_uid K / kube_args K: pod K as the stand-in serves it (bench/bench-K), and
# the CNI_ARGS containerd passes for it.
kube_uid() { printf '0b3c5d1e-9a47-4f3e-8c2d-%012d' "$1"; }
kube_args() {
	echo "IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=bench-$1;K8S_POD_UID=$(kube_uid "$1")"
}

# ipam_of VARIANT K: the ipam object ("null" for none). Pod k gets 10.88.k.2/24.
ipam_of() {
	[[ $1 == static ]] || {
		echo null
		return
	}
	jq -cn --arg a "10.88.$2.2/24" --arg g "10.88.$2.1" \
		'{type: "static", addresses: [{address: $a, gateway: $g}],
		  routes: [{dst: "10.99.0.0/16"}]}'
}

# The device pod K gets. Pools (config "match", issue 5) replace this line:
# e.g. echo '.match = {driver: "veth"}' to let the plugin pick from the pool.
# hpn-rdma takes its NIC from a pool of the node's nic* veths (match), as a
# multi-NIC GPU node would; BENCH_HPN_POOL=0 names nic<K> instead, like
# host-device (and hpn-base, an older binary, always does).
hpn_select() { echo ".device = \"nic$1\""; }
hpn_pool() {
	if [[ ${BENCH_HPN_POOL:-1} == 1 ]]; then
		echo '.match = {devices: ["nic*"]}'
	else
		hpn_select "$1"
	fi
}

# conf PLUGIN VARIANT K: the network config of one row for pod K.
conf() {
	local plugin=$1 variant=$2 k=$3 base
	base=$(jq -cn --argjson ipam "$(ipam_of "$variant" "$k")" --arg mtu "$MTU" \
		'{cniVersion: "1.0.0", name: "bench"} + (if $ipam then {ipam: $ipam} else {} end)
		 + (if $mtu != "" then {mtu: ($mtu | tonumber)} else {} end)')
	case $plugin in
	hpn-rdma)
		jq -c --arg st "$STATE" --arg hints "$HINTS" '. + {type: "hpn-rdma", rdmaRequired: false,
			stateDir: $st, ifName: "hpn0", nccl: {dir: $hints}} | '"$(hpn_pool "$k")" <<<"$base"
		;;
	hpn-agent)
		# The pool path's config, asking the agent (its socket in the scratch dir).
		jq -c --arg st "$STATE" --arg hints "$HINTS" --arg a "$W/agent.sock" '. + {
			type: "hpn-rdma", rdmaRequired: false, stateDir: $st, ifName: "hpn0",
			nccl: {dir: $hints}, agent: {socket: $a, required: true}} | '"$(hpn_pool "$k")" <<<"$base"
		;;
	hpn-kanno | hpn-klabel)
		# "kubernetes" in both; the annotations decide everything in kanno
		# (selected, the model, the count), the label in klabel.
		jq -c --arg st "$STATE" --arg hints "$HINTS" --arg kc "$W/kube/kubeconfig" \
			--arg p "$plugin" '. + {type: "hpn-rdma", rdmaRequired: false,
			stateDir: $st, ifName: "hpn0", nccl: {dir: $hints},
			kubernetes: {kubeconfig: $kc},
			podSelector: {annotation: "alibabacloud.com/hpn-type",
				label: "alibabacloud.com/hpn-type", value: "rdma"}} |
			if $p == "hpn-kanno" then .runtimeConfig["io.kubernetes.cri.pod-annotations"] =
				{"alibabacloud.com/hpn-type": "rdma",
				 "alibabacloud.com/gpu-model-series": "gpu-hpn",
				 "alibabacloud.com/gpu-count": "8"} else . end | '"$(hpn_pool "$k")" <<<"$base"
		;;
	hpn-base)
		jq -c --arg st "$STATE" '. + {type: "hpn-rdma", rdmaRequired: false,
			stateDir: $st, ifName: "hpn0"} | '"$(hpn_select "$k")" <<<"$base"
		;;
	hpn-macvlan)
		# Shared mode of hpn-rdma; override the shape with BENCH_HPN_MACVLAN.
		jq -c --arg st "$STATE" --arg hints "$HINTS" '. + {type: "hpn-rdma", rdmaRequired: false,
			stateDir: $st, ifName: "hpn0", nccl: {dir: $hints}} | '"${BENCH_HPN_MACVLAN:-.mode = \"macvlan\" | .master = \"mst0\" | .macvlanMode = \"bridge\"}" <<<"$base"
		;;
	host-device)
		jq -c --arg d "nic$k" '. + {type: "host-device", device: $d} | del(.mtu)' <<<"$base"
		;;
	macvlan)
		jq -c '. + {type: "macvlan", master: "mst0", mode: "bridge"}' <<<"$base"
		;;
	esac
}

# The iproute2 floor: what a move-mode ADD does to the kernel, one `ip -batch`
# per netns (ip cannot switch netns inside a batch): in the node, move and
# rename into the pod; in the pod, (MTU,) up, address, route. DEL: in the pod,
# move back under the original name (the kernel drops the address and route
# and downs the device on the way); in the node, restore the MTU if one was set.
floor_move() {
	local dir=$1 variant=$2 k=$3 p
	p=$(pod "$k")
	mkdir -p "$dir/add-node/$k" "$dir/add-pod/$k" "$dir/del-pod/$k"
	echo "link set nic$k netns $p name hpn0" >"$dir/add-node/$k/batch"
	{
		echo "link set hpn0 ${MTU:+mtu $MTU }up"
		if [[ $variant == static ]]; then
			echo "addr add 10.88.$k.2/24 dev hpn0"
			echo "route add 10.99.0.0/16 via 10.88.$k.1 dev hpn0"
		fi
	} >"$dir/add-pod/$k/batch"
	echo "link set hpn0 netns $NODE name nic$k" >"$dir/del-pod/$k/batch"
	job "$dir/add-node/$k" "$IP" -batch "$dir/add-node/$k/batch"
	job "$dir/add-pod/$k" "$IP" -n "$p" -batch "$dir/add-pod/$k/batch"
	job "$dir/del-pod/$k" "$IP" -n "$p" -batch "$dir/del-pod/$k/batch"
	if [[ -n $MTU ]]; then
		mkdir -p "$dir/del-node/$k"
		echo "link set nic$k mtu 1500" >"$dir/del-node/$k/batch"
		job "$dir/del-node/$k" "$IP" -batch "$dir/del-node/$k/batch"
	fi
}

# Shared mode floor: a macvlan child of mst0 made directly in the pod netns.
floor_macvlan() {
	local dir=$1 variant=$2 k=$3 p
	p=$(pod "$k")
	mkdir -p "$dir/add-node/$k" "$dir/add-pod/$k" "$dir/del-pod/$k"
	echo "link add link mst0 name hpn0 netns $p ${MTU:+mtu $MTU }type macvlan mode bridge" \
		>"$dir/add-node/$k/batch"
	{
		echo "link set hpn0 up"
		if [[ $variant == static ]]; then
			echo "addr add 10.88.$k.2/24 dev hpn0"
			echo "route add 10.99.0.0/16 via 10.88.$k.1 dev hpn0"
		fi
	} >"$dir/add-pod/$k/batch"
	echo "link del hpn0" >"$dir/del-pod/$k/batch"
	job "$dir/add-node/$k" "$IP" -batch "$dir/add-node/$k/batch"
	job "$dir/add-pod/$k" "$IP" -n "$p" -batch "$dir/add-pod/$k/batch"
	job "$dir/del-pod/$k" "$IP" -n "$p" -batch "$dir/del-pod/$k/batch"
}

# prepare ROW WIDTH: step dirs $JOBS/ROW/WIDTH/<step>/<k> for pods 0..WIDTH-1.
# ROW is MODE.VARIANT.PLUGIN; prints the step dirs in order.
prepare() {
	local row=$1 n=$2 mode variant plugin bin dir k c
	IFS=. read -r mode variant plugin <<<"$row"
	dir=$JOBS/$row/$n
	if [[ ! -d $dir ]]; then
		for ((k = 0; k < n; k++)); do
			case $plugin in
			iproute2)
				if [[ $mode == move ]]; then
					floor_move "$dir" "$variant" "$k"
				else
					floor_macvlan "$dir" "$variant" "$k"
				fi
				;;
			*)
				bin=$CNI_BIN/$plugin
				[[ $plugin == hpn-* ]] && bin=$PLUGIN
				[[ $plugin == hpn-base ]] && bin=$BASE
				c=$(conf "$plugin" "$variant" "$k")
				local a=
				[[ $plugin == hpn-k* ]] && a=$(kube_args "$k")
				cni_job "$dir/1-add/$k" ADD "$k" "$c" "$bin" "$a"
				cni_job "$dir/2-del/$k" DEL "$k" "$c" "$bin" "$a"
				;;
			esac
		done
	fi
	local -a order=()
	for s in 1-add add-node add-pod 2-del del-pod del-node; do
		[[ -d $dir/$s ]] && order+=("$dir/$s")
	done
	printf '%s\n' "${order[@]}"
}

# run LABEL NETNS REPS WARMUP STEPDIR...: the runner, its lines appended to $W/raw.
run() {
	local label=$1 reps=$3 warm=$4
	shift 4
	"$RUNNER" -n "/run/netns/$NODE" -r "$reps" -w "$warm" -l "$label" "$@" >>"$W/raw"
}

# The node and pod 0 as they must be between rows: nothing of ours left.
node_clean() {
	local k n
	for ((k = 0; k < $1; k++)); do
		n=$(ip -n "$(pod "$k")" -o link show | wc -l)
		((n == 1)) || {
			echo "bench.sh: pod $k is not empty after a row:" >&2
			ip -n "$(pod "$k")" -o link show >&2
			return 1
		}
		ip -n "$NODE" link show "nic$k" >/dev/null 2>&1 || {
			echo "bench.sh: nic$k did not come back to the node" >&2
			return 1
		}
	done
	[[ -z $(find "$STATE" "$HINTS" -type f ! -name lock ! -name 'events.log*') ]] || {
		echo "bench.sh: hpn-rdma state left: $(find "$STATE" "$HINTS" -type f)" >&2
		return 1
	}
}

# verify ROW: one ADD, checked (hpn0 in pod 0, with its address), then one DEL,
# checked: a row is measured only if it does what it claims.
verify() {
	local row=$1 steps s
	mapfile -t steps < <(prepare "$row" 1)
	for s in "${steps[@]}"; do
		"$RUNNER" -n "/run/netns/$NODE" -r 1 -l verify "$s" >/dev/null
		case ${s##*/} in 1-add | add-pod)
			ip -n "$(pod 0)" link show hpn0 >/dev/null 2>&1 || {
				echo "bench.sh: $row: ADD left no hpn0 in the pod" >&2
				return 1
			}
			if [[ $row == *.static.* ]] &&
				! ip -n "$(pod 0)" -o addr show dev hpn0 | grep -F 10.88.0.2/24 >/dev/null; then
				echo "bench.sh: $row: hpn0 has no 10.88.0.2/24" >&2
				return 1
			fi
			;;
		esac
	done
	node_clean 1
}

# ---- which rows ------------------------------------------------------------------

ROWS=()
for v in none static; do
	for row in "move.$v.hpn-rdma" "move.$v.hpn-agent" ${BASE:+"move.$v.hpn-base"} "move.$v.host-device" \
		"move.$v.iproute2" \
		"shared.$v.hpn-macvlan" "shared.$v.macvlan" "shared.$v.iproute2"; do
		[[ $row =~ ${BENCH_ROWS:-.} ]] && ROWS+=("$row")
	done
done

# The Kubernetes API rows: the stand-in API server in the node netns, one pod
# per pod netns (the seed's fixture with that pod's namespace, name and UID).
KUBE_WHY=
KROWS=()
for row in kube.none.hpn-kanno kube.none.hpn-klabel; do
	[[ $row =~ ${BENCH_ROWS:-.} ]] && KROWS+=("$row")
done
if ((${#KROWS[@]})); then
	if ! command -v openssl >/dev/null; then
		KUBE_WHY="openssl is not installed (scripts/install-deps.sh)"
	elif [[ ! -x /usr/bin/python3 ]]; then
		KUBE_WHY="/usr/bin/python3 is not installed (scripts/install-deps.sh)"
	fi
fi
if ((${#KROWS[@]})) && [[ -z $KUBE_WHY ]]; then
	# shellcheck source=../test/kube/lib.sh
	source "$SRC/test/kube/lib.sh"
	KUBE_WORK=$W/kube
	mkdir -p "$KUBE_WORK/pods/bench"
	for ((k = 0; k < MAXPAR; k++)); do
		jq --arg n "bench-$k" --arg uid "$(kube_uid "$k")" '.metadata.namespace = "bench" |
			.metadata.name = $n | .metadata.uid = $uid |
			.metadata.labels["alibabacloud.com/gpu-model-series"] = "gpu-hpn"' \
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
	ROWS+=("${KROWS[@]}")
fi
# kube_requests: the pod requests the stand-in has answered so far.
kube_requests() {
	[[ -f ${KUBE_WORK:-/nonexistent}/requests.log ]] || {
		echo 0
		return
	}
	grep -c ' /api/v1/namespaces/bench/pods/' "$KUBE_WORK/requests.log" || true
}

# hpn-rdma's shared mode exists once the plugin accepts it: a macvlan child
# of mst0 in the pod, mst0 still in the node.
HPN_MACVLAN_WHY=
hpn_macvlan_ok() {
	local steps
	mapfile -t steps < <(prepare shared.none.hpn-macvlan 1)
	if ! "$RUNNER" -n "/run/netns/$NODE" -r 1 -l probe "${steps[0]}" >/dev/null 2>"$W/probe.err"; then
		HPN_MACVLAN_WHY="hpn-rdma refuses mode \"macvlan\": $(grep -o '"msg":"[^"]*"' \
			"$W/probe.err" | head -n1)"
		return 1
	fi
	local kind
	kind=$(ip -n "$(pod 0)" -d -j link show hpn0 2>/dev/null | jq -r '.[0].linkinfo.info_kind // ""')
	"$RUNNER" -n "/run/netns/$NODE" -r 1 -l probe "${steps[1]}" >/dev/null
	ip -n "$NODE" link show mst0 >/dev/null 2>&1 || {
		echo "bench.sh: the macvlan probe lost mst0" >&2
		exit 1
	}
	if [[ $kind != macvlan ]]; then
		HPN_MACVLAN_WHY="hpn-rdma ignores mode \"macvlan\" (it attached a \"${kind:-?}\" hpn0)"
		return 1
	fi
}
SKIPPED=()
if ! hpn_macvlan_ok; then
	SKIPPED=(shared.none.hpn-macvlan shared.static.hpn-macvlan)
	info_skip=$HPN_MACVLAN_WHY
fi
node_clean 1

# The agent rows: hpn-rdma-agent and the kubelet stand-in in the node netns;
# pod bench-<k> holds nic<k> (the NIC's ID: a veth has no PCI address).
declare -A SKIP_WHY=()
AGENT_WHY=
if [[ ! -x $AGENT ]]; then
	AGENT_WHY="hpn-rdma-agent not built ($AGENT)"
elif [[ ! -x $KUBELET ]]; then
	AGENT_WHY="the kubelet stand-in not built ($KUBELET)"
else
	KL=$W/kl
	jq -cn --argjson n "$MAXPAR" '[range($n) | {namespace: "bench", name: "bench-\(.)",
		containers: [{name: "c", devices: [{resource: "rdma/hpn", ids: ["nic\(.)"]}]}]}]' \
		>"$W/pods.json"
	jq -c --arg st "$STATE" '{cniVersion: "1.0.0", name: "bench", plugins: [{type: "hpn-rdma",
		match: {devices: ["nic*"]}, rdmaRequired: false, stateDir: $st}]}' <<<'{}' >"$W/agent.conflist"
	"$KUBELET" serve -dir "$KL" -out "$W/kubelet.events" -pods "$W/pods.json" 2>"$W/kubelet.log" &
	AGENT_PIDS=$!
	for ((i = 0; i < 100; i++)); do [[ -S $KL/device-plugins/kubelet.sock ]] && break; sleep 0.05; done
	ip netns exec "$NODE" "$AGENT" --config "$W/agent.conflist" --kubelet-dir "$KL" \
		--lookup-socket "$W/agent.sock" 2>"$W/agent.log" &
	AGENT_PIDS+=" $!"
	for ((i = 0; i < 200; i++)); do grep -q '"event":"list"' "$W/kubelet.events" 2>/dev/null && break; sleep 0.05; done
	grep -q '"event":"list"' "$W/kubelet.events" ||
		AGENT_WHY="the agent did not register with the stand-in: $(tail -n 3 "$W/agent.log")"
fi
if [[ -n $AGENT_WHY ]]; then
	for v in none static; do
		SKIPPED+=("move.$v.hpn-agent")
		SKIP_WHY[move.$v.hpn-agent]=$AGENT_WHY
	done
	echo "# agent rows skipped: $AGENT_WHY"
fi
is_skipped() {
	local s
	for s in "${SKIPPED[@]}"; do [[ $s == "$1" ]] && return 0; done
	return 1
}

echo "# hpn-rdma benchmark: $ITER ADD+DEL cycles per row in $ROUNDS rounds," \
	"VERSION x $VITER, parallel widths $PAR x $PAR_REPS"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
[[ -n ${info_skip:-} ]] && echo "# hpn-rdma shared-mode rows skipped: $info_skip"
: >"$W/raw"
for row in "${ROWS[@]}"; do
	is_skipped "$row" && continue
	verify "$row"
done

# has_row ROW: ROW is selected and not skipped.
has_row() {
	local x
	for x in "${ROWS[@]}"; do
		[[ $x == "$1" ]] && ! is_skipped "$x" && return 0
	done
	return 1
}

# Serial ADD+DEL, rows interleaved round by round. The CPU floor's two parts
# (below) are taken in the same rounds, so that the load and the state of the
# machine a row meets fall on the floor it is held against, too.
cni_job "$JOBS/floor-true/0" VERSION 0 '{"cniVersion":"1.0.0"}' "$(type -P true)"
: >"$W/kern.rounds"
for ((r = 0; r < ROUNDS; r++)); do
	for row in "${ROWS[@]}"; do
		is_skipped "$row" && continue
		mapfile -t steps < <(prepare "$row" 1)
		q0=$(kube_requests)
		run "serial|$row|r$r" "$NODE" "$PER_ROUND" $((r == 0 ? 3 : 1)) "${steps[@]}"
		[[ $row == kube.* ]] && echo $(($(kube_requests) - q0)) $((PER_ROUND + (r == 0 ? 3 : 1))) \
			>>"$W/kreq.$row"
		node_clean 1
	done
	((${#ROWS[@]})) || continue
	# hpn-rdma and host-device cycle by cycle (ADD, DEL, ADD, DEL in each rep):
	# what drifts between a row's reps and the next row's cancels in the pair.
	for v in none static; do
		has_row "move.$v.hpn-rdma" && has_row "move.$v.host-device" || continue
		mapfile -t steps < <(prepare "move.$v.hpn-rdma" 1; prepare "move.$v.host-device" 1)
		run "pair|$v|r$r" "$NODE" "$PER_ROUND" $((r == 0 ? 3 : 1)) "${steps[@]}"
		node_clean 1
	done
	run "floor|true|r$r" "$NODE" "$PER_ROUND" $((r == 0 ? 3 : 1)) "$JOBS/floor-true"
	if [[ -x $KERNEL ]]; then
		ip netns exec "$NODE" "$KERNEL" nic0 "/run/netns/$(pod 0)" "$PER_ROUND" >>"$W/kern.rounds"
		node_clean 1
	fi
done

# VERSION: each plugin, plus the cost of starting any process (/bin/true).
vdir=$JOBS/version
VPLUGINS=(hpn-rdma ${BASE:+hpn-base} host-device macvlan true)
[[ -x $LINKED_YAML ]] && VPLUGINS+=(hpn-rdma-linked-yaml)
[[ -x $LINKED_KUBE ]] && VPLUGINS+=(hpn-rdma-linked-curl-yaml)
for p in "${VPLUGINS[@]}"; do
	case $p in
	hpn-rdma) bin=$PLUGIN ;;
	hpn-base) bin=$BASE ;;
	hpn-rdma-linked-yaml) bin=$LINKED_YAML ;;
	hpn-rdma-linked-curl-yaml) bin=$LINKED_KUBE ;;
	true) bin=$(type -P true) ;;
	*) bin=$CNI_BIN/$p ;;
	esac
	cni_job "$vdir/$p/0" VERSION 0 '{"cniVersion":"1.0.0"}' "$bin"
done
for ((r = 0; r < ROUNDS; r++)); do
	for p in "${VPLUGINS[@]}"; do
		run "version|$p|r$r" "$NODE" $(((VITER + ROUNDS - 1) / ROUNDS)) 2 "$vdir/$p"
	done
done

# N pods at once: N ADDs started together, then N DELs (not the Kubernetes
# rows: a Python stand-in's concurrency is not kube-apiserver's).
for n in $PAR; do
	for row in "${ROWS[@]}"; do
		is_skipped "$row" && continue
		[[ $row == kube.* ]] && continue
		mapfile -t steps < <(prepare "$row" "$n")
		run "par$n|$row" "$NODE" "$PAR_REPS" 1 "${steps[@]}"
		node_clean "$n"
	done
done
# ADD's RDMA discovery alone (plan_rdma: netns mode, then the device behind
# nic0), in the node netns: on this machine, the price of rdmaRequired:false.
disc='{"skipped": "hpn-bench-discovery not built"}'
if [[ -x $DISCOVERY ]]; then
	read -r _ _ dn dus dfound < <(ip netns exec "$NODE" "$DISCOVERY" nic0 $((QUICK ? 50 : 5000)))
	disc=$(jq -cn --argjson n "$dn" --argjson us "$dus" --arg f "$dfound" \
		--arg ib "$([[ -d /sys/class/infiniband ]] && echo present || echo absent)" \
		'{netdev: "nic0", iterations: $n, us_per_add: $us, rdma_device: $f,
		  sys_class_infiniband: $ib}')
fi
# The kernel's own work of a move-mode ADD+DEL without IPAM (move nic0 into
# pod 0 as hpn0, up, move back), looped in one process that starts once: what
# no plugin can save. Two process starts (/bin/true's CPU each) on top of it
# make the CPU floor the targets are printed against.
# Taken once per round of the serial rows (above), the median round kept.
kern='{"skipped": "hpn-bench-kernel not built"}'
if [[ -x $KERNEL ]]; then
	[[ -s $W/kern.rounds ]] || {
		ip netns exec "$NODE" "$KERNEL" nic0 "/run/netns/$(pod 0)" $((QUICK ? 20 : 200)) \
			>"$W/kern.rounds"
		node_clean 1
	}
	kern=$(awk '{ print $3, $4, $5, $6 }' "$W/kern.rounds" | jq -Rsc '
		split("\n") | map(select(length > 0) | split(" ") | map(tonumber)) |
		sort_by(.[2]) | .[(length - 1) / 2 | floor] as $m |
		{rounds: length, cycles: (map(.[0]) | add), wall_ms: ($m[1] / 1e3), cpu_ms: ($m[2] / 1e3),
		 cpuid_us: (if $m[3] < 0 then null else $m[3] / 1e3 end)}')
fi
# The device plugin's latency through the stand-in: Allocate of nic0, and a
# ListAndWatch stream to its first list, AG_ITER calls each, one client.
agent_lat='{"skipped": "'"${AGENT_WHY//\"/}"'"}'
if [[ -z $AGENT_WHY ]]; then
	"$KUBELET" bench -socket "$KL/device-plugins/hpn-rdma.sock" -n "$AG_ITER" nic0 >"$W/agent.lat"
	agent_lat=$(awk '{ print $1 "\t" $2 }' "$W/agent.lat" | jq -Rsc --argjson n "$AG_ITER" '
		split("\n") | map(select(length > 0) | split("\t") | {k: .[0], v: (.[1] | tonumber)}) |
		group_by(.k) | map({(.[0].k): (map(.v) | sort | {calls: length,
			median_ms: (.[(length / 2 | floor)] / 1e6),
			p99_ms: (.[((length * 0.99) | ceil) - 1] / 1e6)})}) | add')
fi

# The VM section: one boot of the current kernel, the by-hand RDMA floor and hpn-rdma.
vm='{"skipped": "not requested (--vm)"}'
if ((VM)); then
	vcache=${HPN_VM_CACHE:-/var/cache/hpn-rdma/vm}
	echo "# VM: RDMA on the current kernel, the floor and hpn-rdma (test/vm/vm7-bench.sh, one boot)"
	if ! bash "$SRC/test/vm/prepare.sh" --kernel 7 "$vcache" >"$W/vm-prepare.out" 2>&1; then
		vm=$(jq -cn --arg why "$(tail -n 3 "$W/vm-prepare.out")" '{skipped: $why}')
	elif HPN_VM_CACHE=$vcache HPN_VM_BENCH_ITERS=$VM_ITERS HPN_VM_BENCH_RUNS=$VM_RUNS \
		HPN_VM_BENCH_ADDS=$VM_ADDS HPN_PLUGIN=$PLUGIN \
		HPN_VM_TIMEOUT=$((600 + 3 * VM_RUNS * VM_ITERS / 10 + 30 * VM_RUNS + 20 * VM_ADDS)) \
		bash "$SRC/test/vm/run.sh" "$SRC/test/vm/vm7-bench.sh" >"$W/vm.out" 2>&1 &&
		grep -q '^BENCH-JSON: ' "$W/vm.out"; then
		vm=$(sed -n 's/^BENCH-JSON: //p' "$W/vm.out" | tail -n1)
		vm=$(jq -c --arg boot "$(sed -n 's/^run\.sh: .* after \([0-9]*\)s .*/\1/p' "$W/vm.out")" \
			'. + {boot_and_run_s: ($boot | tonumber? // null)}' <<<"$vm")
	else
		echo "bench.sh: the VM section failed:" >&2
		tail -n 30 "$W/vm.out" >&2
		vm=$(jq -cn --arg why "$(grep -m1 -E '^(FAIL|SKIP|run\.sh: FAIL)' "$W/vm.out")" '{failed: $why}')
	fi
fi

# ---- runtime rows: pods through containerd ------------------------------------

# runtime_rows: make the node, measure, set $rt (JSON). The node is removed by
# cleanup (rtn_cleanup) whatever happens.
runtime_rows() {
	local d=$W/rt row net r steps bridge pod id
	rtn_setup "$d"
	rtn_plugin "$PLUGIN"
	rtn_nic 0
	mkdir -p "$d/ipam"
	bridge=$(jq -cn --arg ipam "$d/ipam" '{type: "bridge", bridge: "hpnbbr0", isGateway: true,
		ipam: {type: "host-local", ranges: [[{subnet: "10.252.0.0/24"}]], dataDir: $ipam}}')
	local -A nets=(
		[runtime.bridge]=$(jq -cn --argjson b "$bridge" \
			'{cniVersion: "1.0.0", name: "bench-bridge", plugins: [$b]}')
		[runtime.hpn-rdma]=$(jq -cn --argjson b "$bridge" --arg st "$STATE" --arg h "$HINTS" \
			'{cniVersion: "1.0.0", name: "bench-hpn-rdma", plugins: [$b,
			  {type: "hpn-rdma", ifName: "hpn0", match: {devices: ["rnic*"]},
			   rdmaRequired: false, stateDir: $st, nccl: {dir: $h}}]}')
		[runtime.passthrough]=$(jq -cn --argjson b "$bridge" --arg st "$STATE" --arg h "$HINTS" \
			'{cniVersion: "1.0.0", name: "bench-passthrough", plugins: [$b,
			  {type: "hpn-rdma", ifName: "hpn0", match: {devices: ["rnic*"]},
			   rdmaRequired: false, stateDir: $st, nccl: {dir: $h},
			   podSelector: {annotation: "bench.invalid/never", value: "1"}}]}')
	)
	pod=$d/pod.json
	jq -n --arg cg "$RTN_CGROUP" --arg logs "$d/logs" '{
		metadata: {name: "bench", uid: "0b3c5d1e-9a47-4f3e-8c2d-5e6f7a8b9c0d",
			namespace: "bench", attempt: 0},
		hostname: "bench", logDirectory: $logs,
		linux: {cgroupParent: $cg, securityContext: {namespaceOptions:
			{network: "POD", pid: "CONTAINER", ipc: "POD"}}}}' >"$pod"
	rtn_conflist "${nets[runtime.bridge]}"
	rtn_containerd_start
	rtn_import_image
	# A row is measured only if it does what it claims: hpn0 in the pod with
	# hpn-rdma, none with the bridge alone; the NIC back after Remove.
	for row in "${RT_ROWS[@]}"; do
		net=$(jq -r .name <<<"${nets[$row]}")
		rtn_conflist "${nets[$row]}"
		rtn_wait_network "$net"
		id=$(cri runp "$pod") || fail "$row: RunPodSandbox failed"
		local has=0
		rtn_in nsenter --net="$(cri inspectp "$id" | jq -r '.info.info.runtimeSpec.linux.namespaces[]
			| select(.type == "network") | .path')" ip link show hpn0 >/dev/null 2>&1 && has=1
		[[ $row == runtime.hpn-rdma ]] && ((has == 0)) && fail "$row: no hpn0 in the pod"
		[[ $row != runtime.hpn-rdma ]] && ((has == 1)) && fail "$row: hpn0 in the pod"
		cri stopp "$id" || fail "$row: StopPodSandbox failed"
		cri rmp "$id" || fail "$row: RemovePodSandbox failed"
		ip -n "$RTN_NS" link show rnic0 >/dev/null 2>&1 || fail "$row: rnic0 did not come back"
	done
	# One pod of each row in turn, then the floor once, RT_ITER times: load
	# that comes and goes falls on neighbours alike, and the added time is
	# also taken pair by pair (a pod with hpn-rdma minus the pod before it).
	: >"$W/rt.raw"
	mapfile -t steps < <(prepare move.none.iproute2 1)
	for ((r = 0; r < RT_ITER; r++)); do
		for row in "${RT_ROWS[@]}"; do
			rtn_conflist "${nets[$row]}"
			rtn_wait_network "$(jq -r .name <<<"${nets[$row]}")"
			cri cycle -n 1 -w $((r == 0 ? 2 : 0)) "$pod" |
				awk -v row="$row" -v i="$r" '{ print row "\t" $1 "\t" $2 "\t" $3 "\t" i }' >>"$W/rt.raw"
		done
		run "rtfloor|move.none.iproute2|r$r" "$NODE" 1 $((r == 0 ? 2 : 0)) "${steps[@]}"
	done
	node_clean 1
	local rows=() med p99 n run stop rm
	for row in "${RT_ROWS[@]}"; do
		read -r n med p99 run stop rm < <(awk -F'\t' -v row="$row" '$1 == row' "$W/rt.raw" |
			awk -F'\t' '
			function median(a, n,   t, i, j) {
				for (i = 1; i <= n; i++) t[i] = a[i]
				for (i = 2; i <= n; i++) for (j = i; j > 1 && t[j - 1] > t[j]; j--) {
					x = t[j]; t[j] = t[j - 1]; t[j - 1] = x }
				return n % 2 ? t[(n + 1) / 2] : (t[n / 2] + t[n / 2 + 1]) / 2
			}
			{ n++; w[n] = $2 + $3 + $4; a[n] = $2; b[n] = $3; c[n] = $4 }
			END {
				if (!n) { print "0 0 0 0 0 0"; exit }
				for (i = 1; i <= n; i++) s[i] = w[i]
				for (i = 2; i <= n; i++) for (j = i; j > 1 && s[j - 1] > s[j]; j--) {
					x = s[j]; s[j] = s[j - 1]; s[j - 1] = x }
				k = int(n * 0.99 + 0.999999); if (k > n) k = n
				printf "%d %.0f %.0f %.0f %.0f %.0f\n", n, median(w, n), s[k],
					median(a, n), median(b, n), median(c, n)
			}')
		rows+=("$(jq -cn --arg r "$row" --argjson n "$n" --argjson med "$med" --argjson p99 "$p99" \
			--argjson run "$run" --argjson stop "$stop" --argjson rm "$rm" \
			'{row: $r, cycles: $n, wall_ms: {median: ($med / 1e6), p99: ($p99 / 1e6)},
			  run_ms: ($run / 1e6), stop_ms: ($stop / 1e6), remove_ms: ($rm / 1e6)}')")
	done
	local paired
	paired=$(awk -F'\t' '$1 == "runtime.bridge" { b[$5] = $2 + $3 + $4 }
		$1 == "runtime.hpn-rdma" { h[$5] = $2 + $3 + $4 }
		END { for (i in h) if (i in b) print h[i] - b[i] }' "$W/rt.raw" | sort -n |
		awk '{ d[NR] = $1 } END { if (!NR) { print "null"; exit }
			printf "%.3f\n", (NR % 2 ? d[(NR + 1) / 2] : (d[NR / 2] + d[NR / 2 + 1]) / 2) / 1e6 }')
	rt=$(printf '%s\n' "${rows[@]}" | jq -sc --arg v "$(cri version | jq -r .runtimeVersion)" \
		--argjson paired "$paired" '{containerd: $v, rows: ., added_paired_ms: $paired}')
	rtn_containerd_stop TERM
}

RT_ROWS=()
for row in runtime.bridge runtime.hpn-rdma runtime.passthrough; do
	[[ $row =~ ${BENCH_ROWS:-.} ]] && RT_ROWS+=("$row")
done
rt='{"skipped": "no runtime row selected (BENCH_ROWS)"}'
if ((${#RT_ROWS[@]})); then
	HPN_CRI=${HPN_CRI:-$SRC/build/test/runtime/hpn-cri}
	HPN_PAUSE_IMAGE=${HPN_PAUSE_IMAGE:-$SRC/build/test/runtime/pause-image.tar}
	RTN_PREFIX=${PFX}rt-
	fail() {
		echo "bench.sh: runtime rows: $*" >&2
		exit 1
	}
	# shellcheck source=../test/runtime/node.sh
	source "$SRC/test/runtime/node.sh"
	rt_why=$(rtn_why_not)
	if [[ -n $rt_why ]]; then
		rt=$(jq -cn --arg w "$rt_why" '{skipped: $w}')
		echo "# runtime rows skipped: $rt_why"
	else
		runtime_rows
	fi
fi
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- figures ---------------------------------------------------------------------

# Per (label, rep): ADD+DEL wall = the sum of its steps; CPU summed; RSS max.
# Labels carry the round ("|r<N>"): each round's reps count from 0 again.
awk -F'\t' '{ k = $1 "\t" $2; w[k] += $5; c[k] += $6; u[k] += $8; if ($7 > m[k]) m[k] = $7 }
	END { for (k in w) { split(k, f, "\t"); l = f[1]; sub(/\|r[0-9]+$/, "", l)
		print l "\t" f[2] "\t" w[k] "\t" c[k] "\t" m[k] "\t" u[k] } }' "$W/raw" |
	sort >"$W/cycles"

# stats LABEL: "n median p99 mean" of the wall (ns), mean CPU (us), max RSS
# (kB), mean user CPU (us).
stats() {
	awk -F'\t' -v l="$1" '$1 == l { print $3 "\t" $4 "\t" $5 "\t" $6 }' "$W/cycles" | sort -n |
		awk -F'\t' '{ w[NR] = $1; c += $2; if ($3 > m) m = $3; u += $4 }
		END {
			if (!NR) { print "0 0 0 0 0 0 0"; exit }
			i = int(NR * 0.99 + 0.999999); if (i > NR) i = NR
			med = NR % 2 ? w[(NR + 1) / 2] : (w[NR / 2] + w[NR / 2 + 1]) / 2
			s = 0; for (j = 1; j <= NR; j++) s += w[j]
			printf "%d %.0f %.0f %.0f %.0f %d %.0f\n", NR, med, w[i], s / NR, c / NR, m, u / NR
		}'
}

# The iproute2 floor measured between the runtime rows' rounds.
rtfloor=null
if jq -e .rows <<<"$rt" >/dev/null; then
	read -r n med _ _ _ _ _ < <(stats "rtfloor|move.none.iproute2")
	((n > 0)) && rtfloor=$(jq -n --argjson m "$med" '$m / 1e6')
fi
machine=$(jq -cn --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
	--arg kernel "$(uname -r)" --argjson cores "$(nproc)" \
	--arg fs "$(stat -f -c %T "$STATE")" --arg hfs "$(stat -f -c %T "$HINTS")" \
	--arg load "$(cut -d' ' -f1-3 /proc/loadavg)" --arg date "$(date -u +%FT%TZ)" \
	'{cpu: $cpu, cores: $cores, kernel: $kernel, state_fs: $fs, hints_fs: $hfs,
	  loadavg_after: $load, date: $date}')
{
	for row in "${ROWS[@]}"; do
		if is_skipped "$row"; then
			jq -cn --arg r "$row" --arg why "${SKIP_WHY[$row]:-$info_skip}" '{row: $r, skipped: $why}'
			continue
		fi
		read -r n med p99 mean cpu rss user < <(stats "serial|$row")
		jq -cn --arg r "$row" --argjson n "$n" --argjson med "$med" --argjson p99 "$p99" \
			--argjson mean "$mean" --argjson cpu "$cpu" --argjson rss "$rss" \
			--argjson user "$user" \
			'{row: $r, cycles: $n, wall_ms: {median: ($med / 1e6), p99: ($p99 / 1e6),
			  mean: ($mean / 1e6)}, cpu_ms: ($cpu / 1e3), user_cpu_ms: ($user / 1e3),
			  peak_rss_kb: $rss}'
	done
} | jq -s . >"$W/serial.json"
{
	for p in "${VPLUGINS[@]}"; do
		read -r n med p99 mean cpu rss user < <(stats "version|$p")
		jq -cn --arg p "$p" --argjson n "$n" --argjson med "$med" --argjson p99 "$p99" \
			--argjson cpu "$cpu" --argjson rss "$rss" --argjson user "$user" \
			'{plugin: $p, runs: $n, wall_ms: {median: ($med / 1e6), p99: ($p99 / 1e6)},
			  cpu_ms: ($cpu / 1e3), user_cpu_ms: ($user / 1e3), peak_rss_kb: $rss}'
	done
} | jq -s . >"$W/version.json"
{
	for n in $PAR; do
		for row in "${ROWS[@]}"; do
			is_skipped "$row" && continue
			[[ $row == kube.* ]] && continue
			read -r reps med _ _ cpu _ _ < <(stats "par$n|$row")
			jq -cn --arg r "$row" --argjson n "$n" --argjson reps "$reps" \
				--argjson med "$med" --argjson cpu "$cpu" \
				'{row: $r, pods: $n, reps: $reps, round_ms: ($med / 1e6),
				  pods_per_s: (if $med > 0 then $n / ($med / 1e9) else 0 end),
				  cpu_ms_per_pod: ($cpu / 1e3 / $n)}'
		done
	done
} | jq -s '[group_by(.row)[] | (map(select(.pods == 1))[0].pods_per_s) as $s |
	.[] | . + {vs_serial: (if $s then .pods_per_s / $s else null end)}]' >"$W/par.json"

# The Kubernetes API rows: requests per ADD (runs of a row include its warm-ups).
kube='{"skipped": "no Kubernetes row selected (BENCH_ROWS)"}'
if [[ -n $KUBE_WHY ]]; then
	kube=$(jq -cn --arg w "$KUBE_WHY" '{skipped: $w}')
elif ((${#KROWS[@]})); then
	kube=$(for row in "${KROWS[@]}"; do
		awk -v r="$row" '{ q += $1; n += $2 } END { printf "{\"row\": \"%s\", \"requests\": %d, \"adds\": %d}\n", r, q, n }' \
			"$W/kreq.$row"
	done | jq -sc --arg srv "test/kube/apiserver.py (Python, HTTPS, bearer token) on the node netns's loopback" \
		'{server: $srv, rows: map(. + {requests_per_add: (if .adds > 0 then .requests / .adds else null end)})}')
fi

# The pairs: per rep, the first two steps are hpn-rdma's ADD+DEL, the next two
# host-device's; the medians of each and of the difference, over every round.
pairs=$(awk -F'\t' '$1 ~ /^pair\|/ { l = $1; sub(/\|r[0-9]+$/, "", l); sub(/^pair\|/, "", l)
		k = $1 "\t" $2; i[k]++; print l "\t" k "\t" (i[k] <= 2 ? "a" : "b") "\t" $5 }' "$W/raw" |
	jq -Rsc 'def med: sort | if length == 0 then null else .[length / 2 | floor] end;
		split("\n") | map(select(length > 0) | split("\t")) |
		group_by(.[0]) | map(.[0][0] as $v | group_by(.[1] + "\t" + .[2]) |
			map({a: (map(select(.[3] == "a") | .[4] | tonumber) | add),
			     b: (map(select(.[3] == "b") | .[4] | tonumber) | add)}) |
			{variant: $v, cycles: length, hpn_rdma_ms: (map(.a) | med / 1e6),
			 host_device_ms: (map(.b) | med / 1e6),
			 difference_ms: (map(.a - .b) | med / 1e6)} |
			. + {ratio: (.hpn_rdma_ms / .host_device_ms)})')

# /bin/true's CPU between the serial rows' rounds: the floor's process start.
floortrue=null
read -r n _ _ _ cpu _ _ < <(stats "floor|true")
((n > 0)) && floortrue=$(jq -cn --argjson n "$n" --argjson c "$cpu" '{runs: $n, cpu_ms: ($c / 1e3)}')

# Targets (issue 8), judged on the no-IPAM move-mode rows (the plugin's own
# cost) and, for throughput, on hpn-rdma's rows.
jq -n --argjson m "$machine" --slurpfile s "$W/serial.json" --slurpfile v "$W/version.json" \
	--slurpfile p "$W/par.json" --argjson disc "$disc" --argjson kern "$kern" --argjson vm "$vm" \
	--argjson floortrue "$floortrue" --argjson pairs "$pairs" \
	--argjson rt "$rt" --argjson rtfloor "$rtfloor" --argjson kube "$kube" \
	--argjson aglat "$agent_lat" \
	--arg quick "$QUICK" --argjson iter "$ITER" --argjson rounds "$ROUNDS" \
	--arg par "$PAR" --argjson preps "$PAR_REPS" --arg mtu "$MTU" '
	($s[0] | map({(.row): .}) | add) as $r |
	($v[0] | map({(.plugin): .}) | add) as $ver |
	($pairs | map({(.variant): .}) | add // {}) as $pr |
	def ratio(a; b): if (a | type) == "number" and (b | type) == "number" and b > 0
		then a / b else null end;
	def t(name; val; lim; cmp): {target: name, value: val, limit: lim,
		met: (if val == null then null elif cmp == "le" then val <= lim else val >= lim end)};
	# floor: the least any plugin could reach on this machine, where it is measured.
	def t(name; val; lim; cmp; floor): t(name; val; lim; cmp) + {floor: floor};
	# /bin/true as started between the rounds of the serial rows, else in the VERSION rows.
	($floortrue.cpu_ms // $ver["true"].cpu_ms) as $start |
	(if ($kern.cpu_ms | type) == "number" and ($start | type) == "number"
	 then 2 * $start + $kern.cpu_ms else null end) as $cpufloor |
	# What hpn-rdma adds to a pod (Run, Stop, Remove) through containerd.
	(if $rt.rows then ($rt.rows | map({(.row): .}) | add) else {} end) as $rr |
	(if $rr["runtime.hpn-rdma"] and $rr["runtime.bridge"]
	 then $rr["runtime.hpn-rdma"].wall_ms.median - $rr["runtime.bridge"].wall_ms.median
	 else null end) as $added |
	(if $rr["runtime.passthrough"] and $rr["runtime.bridge"]
	 then $rr["runtime.passthrough"].wall_ms.median - $rr["runtime.bridge"].wall_ms.median
	 else null end) as $chain |
	{
	  machine: $m,
	  settings: {quick: ($quick == "1"), cycles_per_row: $iter, rounds: $rounds,
		parallel_widths: ($par | split(" ") | map(select(. != "") | tonumber)),
		parallel_reps: $preps, mtu: (if $mtu == "" then null else ($mtu | tonumber) end),
		hpn_rdma: "rdmaRequired false (veths have no RDMA device)",
		ipam: "none, and Debian static (its CPU and RSS included)",
		floor: "iproute2, one ip -batch per netns per ADD/DEL half"},
	  serial: $s[0],
	  version: $v[0],
	  parallel: $p[0],
	  rdma_discovery: $disc,
	  kernel_floor: ($kern + {process_start_cpu_ms: $start}),
	  pairs: $pairs,
	  agent: (if $aglat.allocate then $aglat + {
		lookup_added_ms: {none: (($r["move.none.hpn-agent"].wall_ms.median // null) as $a |
			if $a then $a - $r["move.none.hpn-rdma"].wall_ms.median else null end),
		  static: (($r["move.static.hpn-agent"].wall_ms.median // null) as $a |
			if $a then $a - $r["move.static.hpn-rdma"].wall_ms.median else null end)}}
		else $aglat end),
	  kubernetes: (if $kube.rows then
		(def d(a; b): if $r[a] and $r[b] and ($r[a].wall_ms | type) == "object" and
			($r[b].wall_ms | type) == "object"
			then {wall_ms: ($r[a].wall_ms.median - $r[b].wall_ms.median),
			      cpu_ms: ($r[a].cpu_ms - $r[b].cpu_ms)} else null end;
		 $kube + {lookup_added: d("kube.none.hpn-klabel"; "kube.none.hpn-kanno"),
			annotations_added: d("kube.none.hpn-kanno"; "move.none.hpn-rdma")})
		else $kube end),
	  vm: $vm,
	  runtime: (if $rt.rows then $rt + {added_ms: $added, passthrough_added_ms: $chain,
		floor_ms: $rtfloor, floor_cycles: "move.none.iproute2, one after each pair of pods",
		vs_floor: ratio($added; $rtfloor)} else $rt end),
	  targets: ((if $cpufloor == null then [] else [
		# CPU and VERSION against what no plugin can beat here (the floor line below).
		t("cpu per ADD+DEL vs the CPU floor (no IPAM)";
		  ratio($r["move.none.hpn-rdma"].cpu_ms; $cpufloor); 2.0; "le")] end) + [
		t("cpu per ADD+DEL vs host-device (no IPAM)";
		  ratio($r["move.none.hpn-rdma"].cpu_ms; $r["move.none.host-device"].cpu_ms); 0.3; "le";
		  ratio($cpufloor; $r["move.none.host-device"].cpu_ms)),
		t("peak RSS vs host-device (no IPAM)";
		  ratio($r["move.none.hpn-rdma"].peak_rss_kb; $r["move.none.host-device"].peak_rss_kb); 0.5; "le"),
		t("VERSION latency vs /bin/true";
		  ratio($ver["hpn-rdma"].wall_ms.median; $ver["true"].wall_ms.median); 1.3; "le"),
		t("VERSION latency vs host-device";
		  ratio($ver["hpn-rdma"].wall_ms.median; $ver["host-device"].wall_ms.median); 0.3; "le";
		  ratio($ver["true"].wall_ms.median; $ver["host-device"].wall_ms.median)),
		# Judged on the pairs, cycle by cycle; on the rows when there are none.
		t("ADD+DEL wall vs host-device (no IPAM)";
		  $pr["none"].ratio // ratio($r["move.none.hpn-rdma"].wall_ms.median;
		    $r["move.none.host-device"].wall_ms.median); 1.0; "le"),
		t("ADD+DEL wall vs host-device (static IPAM)";
		  $pr["static"].ratio // ratio($r["move.static.hpn-rdma"].wall_ms.median;
		    $r["move.static.host-device"].wall_ms.median); 1.0; "le"),
		t("ADD+DEL wall vs iproute2 floor (no IPAM)";
		  ratio($r["move.none.hpn-rdma"].wall_ms.median; $r["move.none.iproute2"].wall_ms.median); 1.1; "le")
	  ] + (if ($vm.hpn.vs_floor | type) == "number" then [
		t("ib_write_bw pod to pod through hpn-rdma vs the floor (VM, virtio, softRoce)";
		  $vm.hpn.vs_floor; 0.95; "ge")] else [] end) + (if $added == null then [] else [
		t("time hpn-rdma adds to a pod through containerd vs iproute2 floor (move, no IPAM)";
		  ratio($added; $rtfloor); 1.1; "le")] end) + [ $p[0][] | select(.row | test("^move\\..*\\.hpn-rdma$")) | select(.pods > 1) |
		t("parallel throughput vs serial, \(.row | split(".")[1]) IPAM, N=\(.pods)"; .vs_serial; 1.0; "ge") ])
	}' >"$W/bench.json"
cp "$W/bench.json" "$JSON"

# ---- the table -------------------------------------------------------------------

jq -r '
	def f(x): if x == null then "-" else (x * 100 | round / 100 | tostring) end;
	def r(x): if x == null then "-" else ((x * 100 | round / 100 | tostring) + "x") end;
	# Targets are judged on the exact ratio: show enough digits that 1.002x is not "1x".
	def r3(x): if x == null then "-" else ((x * 1000 | round / 1000 | tostring) + "x") end;
	def pad(n): tostring | if length < n then . + (" " * (n - length)) else . end;
	def lpad(n): tostring | if length < n then (" " * (n - length)) + . else . end;
	(.serial | map({(.row): .}) | add) as $r |
	"ADD+DEL, serial (\(.settings.cycles_per_row) cycles per row; CPU includes IPAM children)",
	("row" | pad(28)) + ("median ms" | lpad(10)) + ("p99 ms" | lpad(9)) + ("CPU ms" | lpad(9)) +
	("user" | lpad(7)) + ("RSS MB" | lpad(8)) + ("wall/hd" | lpad(9)) + ("cpu/hd" | lpad(8)) + ("rss/hd" | lpad(8)) +
	("wall/ip" | lpad(9)),
	(.serial[] | . as $x | ($x.row | split(".")) as $k |
	 ($r["\($k[0]).\($k[1]).\(if $k[0] == "move" then "host-device" else "macvlan" end)"]) as $hd |
	 ($r["\($k[0]).\($k[1]).iproute2"]) as $ip |
	 if .skipped then ($x.row | pad(28)) + "skipped: " + .skipped else
	 ($x.row | pad(28)) + (f($x.wall_ms.median) | lpad(10)) + (f($x.wall_ms.p99) | lpad(9)) +
	 (f($x.cpu_ms) | lpad(9)) + (f($x.user_cpu_ms) | lpad(7)) + (f($x.peak_rss_kb / 1024) | lpad(8)) +
	 (r(if $hd.wall_ms then $x.wall_ms.median / $hd.wall_ms.median else null end) | lpad(9)) +
	 (r(if $hd.cpu_ms and $hd.cpu_ms > 0 then $x.cpu_ms / $hd.cpu_ms else null end) | lpad(8)) +
	 (r(if $hd.peak_rss_kb and $hd.peak_rss_kb > 0 then $x.peak_rss_kb / $hd.peak_rss_kb else null end) | lpad(8)) +
	 (r(if $ip.wall_ms then $x.wall_ms.median / $ip.wall_ms.median else null end) | lpad(9))
	 end),
	"",
	"VERSION",
	("plugin" | pad(28)) + ("median ms" | lpad(10)) + ("p99 ms" | lpad(9)) + ("CPU ms" | lpad(9)) +
	("user" | lpad(7)) + ("RSS MB" | lpad(8)) + ("vs hd" | lpad(8)),
	((.version | map({(.plugin): .}) | add) as $v |
	 .version[] | (.plugin | pad(28)) + (f(.wall_ms.median) | lpad(10)) + (f(.wall_ms.p99) | lpad(9)) +
	 (f(.cpu_ms) | lpad(9)) + (f(.user_cpu_ms) | lpad(7)) + (f(.peak_rss_kb / 1024) | lpad(8)) +
	 (r(.wall_ms.median / $v["host-device"].wall_ms.median) | lpad(8))),
	"",
	(if .kubernetes.skipped then "Kubernetes API rows skipped: " + .kubernetes.skipped, "" else
	 "Kubernetes API lookup (\(.kubernetes.server)), per ADD+DEL:",
	 (.kubernetes.rows[] | "  \(.row): \(.requests) requests for \(.adds) ADDs"),
	 (if .kubernetes.lookup_added then
	  "  podSelector.label decides (one GET per ADD): +\(f(.kubernetes.lookup_added.wall_ms)) ms wall," +
	  " +\(f(.kubernetes.lookup_added.cpu_ms)) ms CPU over the annotations deciding" else empty end),
	 (if .kubernetes.annotations_added then
	  "  the annotations decide (no request): \(f(.kubernetes.annotations_added.wall_ms)) ms wall," +
	  " \(f(.kubernetes.annotations_added.cpu_ms)) ms CPU against move.none.hpn-rdma (no \"kubernetes\"): noise" else empty end),
	 ((.version | map({(.plugin): .}) | add) as $v |
	  if $v["hpn-rdma-linked-curl-yaml"] then
	  "  linking libcurl + libyaml instead of dlopen(): +\(f($v["hpn-rdma-linked-curl-yaml"].cpu_ms - $v["hpn-rdma"].cpu_ms)) ms CPU," +
	  " +\(f($v["hpn-rdma-linked-curl-yaml"].wall_ms.median - $v["hpn-rdma"].wall_ms.median)) ms wall per start (VERSION)" else empty end),
	 "" end),
	(if (.pairs | length) > 0 then
	 "ADD+DEL wall, hpn-rdma and host-device cycle by cycle (median ms; of the per-cycle difference)",
	 (.pairs[] | "  move.\(.variant): hpn-rdma \(f(.hpn_rdma_ms)), host-device \(f(.host_device_ms))," +
	  " \(r3(.ratio)); difference \(f(.difference_ms)) ms over \(.cycles) cycles"), "" else empty end),
	"N pods at once (ADD all, then DEL all; median of \(.settings.parallel_reps))",
	("row" | pad(28)) + ("N" | lpad(4)) + ("round ms" | lpad(10)) + ("pods/s" | lpad(9)) +
	("vs N=1" | lpad(8)),
	(.parallel | sort_by(.row, .pods)[] | (.row | pad(28)) + (.pods | lpad(4)) +
	 (f(.round_ms) | lpad(10)) + (f(.pods_per_s) | lpad(9)) + (r(.vs_serial) | lpad(8))),
	"",
	(if .runtime.skipped then "Runtime rows skipped: " + .runtime.skipped, "" else
	 "A pod through containerd \(.runtime.containerd): RunPodSandbox -> StopPodSandbox -> RemovePodSandbox" +
	 " (\(.runtime.rows[0].cycles) cycles per row)",
	 ("row" | pad(28)) + ("median ms" | lpad(10)) + ("p99 ms" | lpad(9)) + ("Run" | lpad(8)) +
	 ("Stop" | lpad(8)) + ("Remove" | lpad(8)),
	 (.runtime.rows[] | (.row | pad(28)) + (f(.wall_ms.median) | lpad(10)) + (f(.wall_ms.p99) | lpad(9)) +
	  (f(.run_ms) | lpad(8)) + (f(.stop_ms) | lpad(8)) + (f(.remove_ms) | lpad(8))),
	 (if .runtime.added_ms then
	  "hpn-rdma adds \(f(.runtime.added_ms)) ms per pod (its ADD and two DELs; difference of the" +
	  " medians; median of the \(.runtime.rows[0].cycles) pairs: \(f(.runtime.added_paired_ms)) ms);" +
	  " the iproute2 floor of the same move, between them: \(f(.runtime.floor_ms)) ms (\(r3(.runtime.vs_floor)))" +
	  (if .runtime.added_ms <= 0 then "; not a figure: below this run\u0027s noise" else "" end) else empty end),
	 (if .runtime.passthrough_added_ms then
	  "hpn-rdma passing a pod through (no move) adds \(f(.runtime.passthrough_added_ms)) ms: containerd running" +
	  " one more plugin of the chain, three times" else empty end),
	 "" end),
	(if .agent.allocate then
	 "hpn-rdma-agent through the kubelet stand-in (\(.agent.allocate.calls) calls each): Allocate of one NIC" +
	 " \(f(.agent.allocate.median_ms)) ms median, \(f(.agent.allocate.p99_ms)) ms p99; ListAndWatch to its first" +
	 " list \(f(.agent.listwatch.median_ms)) ms median, \(f(.agent.listwatch.p99_ms)) ms p99",
	 "ADD+DEL with the allocation lookup (move.*.hpn-agent) minus the pool path (move.*.hpn-rdma):" +
	 " \(f(.agent.lookup_added_ms.none)) ms without IPAM, \(f(.agent.lookup_added_ms.static)) ms with static", ""
	 elif .agent.skipped then "Agent rows skipped: " + .agent.skipped, "" else empty end),
	(if .rdma_discovery.us_per_add then
	 "RDMA discovery of one netdev (ADD with rdmaRequired:false; /sys/class/infiniband " +
	 .rdma_discovery.sys_class_infiniband + "): \(f(.rdma_discovery.us_per_add / 1000)) ms per ADD, found: " +
	 .rdma_discovery.rdma_device, "" else empty end),
	"Targets",
	(.targets[] | "  [\(if .met == true then "met" elif .met == false then "NOT met" else "?" end)] " +
	 "\(.target): \(r3(.value)) (limit \(.limit)x\(if .floor then "; floor here \(r3(.floor))" else "" end))"),
	(if .kernel_floor.cpu_ms then
	 "  floor: CPU = 2 starts of /bin/true (\(f(.kernel_floor.process_start_cpu_ms)) ms each) + the kernel work" +
	 " of move, up, move back (\(f(.kernel_floor.cpu_ms)) ms, hpn-bench-kernel), both taken between the" +
	 " rounds of the serial rows; VERSION = /bin/true" else empty end),
	"",
	(if .vm.floor then
	 "RDMA in the VM (kernel \(.vm.kernel), QEMU TCG, one boot of \(.vm.boot_and_run_s // "?") s): ib_write_bw pod to pod," +
	 " \(.vm.messages_per_run) x 64 KiB, \(.vm.runs) runs, MB/s",
	 ("path" | pad(28)) + ("median" | lpad(10)) + "   runs",
	 (.vm.floor | to_entries[] | ("floor, " + .key | pad(28)) + (f(.value.median) | lpad(10)) +
	  "   " + (.value.mb_s | map(tostring) | join(" "))),
	 (if .vm.hpn.virtio then
	  ("hpn-rdma (softRoce), virtio" | pad(28)) + (f(.vm.hpn.virtio.median) | lpad(10)) + "   " +
	  (.vm.hpn.virtio.mb_s | map(tostring) | join(" ")) + "   (\(r3(.vm.hpn.vs_floor)) of the floor)",
	  "ADD and DEL in the VM (static IPAM, one virtio NIC, \(.vm.hpn.add_ms.adds) of each in turn), ms",
	  ("" | pad(28)) + ("ADD median" | lpad(12)) + ("DEL median" | lpad(12)) + "   ADD runs",
	  ("with the RDMA proof (softRoce)" | pad(28)) + (f(.vm.hpn.add_ms.softroce.median) | lpad(12)) +
	  (f(.vm.hpn.del_ms.softroce.median) | lpad(12)) + "   " + (.vm.hpn.add_ms.softroce.ms | map(tostring) | join(" ")),
	  ("rdmaRequired false" | pad(28)) + (f(.vm.hpn.add_ms.plain.median) | lpad(12)) +
	  (f(.vm.hpn.del_ms.plain.median) | lpad(12)) + "   " + (.vm.hpn.add_ms.plain.ms | map(tostring) | join(" ")),
	  "  (the proof adds \(f(.vm.hpn.add_ms.softroce.median - .vm.hpn.add_ms.plain.median)) ms to ADD here: the rxe made in the pod, port and GID waited for, the bind)"
	  else "  hpn-rdma: \(.vm.hpn.skipped // "not measured")" end), ""
	 elif .vm.skipped and (.vm.skipped | test("not requested") | not) then "VM section skipped: \(.vm.skipped)", ""
	 elif .vm.failed then "VM section FAILED: \(.vm.failed)", ""
	 else empty end),
	"hd: host-device (move) or macvlan (shared); ip: the iproute2 floor of the same mode and IPAM.",
	"Machine: \(.machine.cores) cores \(.machine.cpu), kernel \(.machine.kernel), stateDir on \(.machine.state_fs), hints on \(.machine.hints_fs); load after: \(.machine.loadavg_after)",
	(if .kernel_floor.cpuid_us then
	 "One CPUID costs \(f(.kernel_floor.cpuid_us)) us here (a VM exit on a VM); glibc runs dozens at every process start." else empty end)
	' "$JSON"
echo "JSON: $JSON"

if ((CHECK)); then
	# Every row, VERSION and parallel figure present and numeric: not timings.
	want_rows=$(printf '%s\n' "${ROWS[@]}" | jq -R . | jq -sc .)
	vp=$(printf '%s\n' "${VPLUGINS[@]}" | jq -R . | jq -sc .)
	jq -e --argjson want "$want_rows" --argjson vp "$vp" --arg par "$PAR" \
		--argjson rtcyc "$RT_ITER" \
		--argjson cyc $((PER_ROUND * ROUNDS)) --argjson vcyc $(((VITER + ROUNDS - 1) / ROUNDS * ROUNDS)) '
		([.serial[].row] | sort) == ($want | sort) and
		all(.serial[]; .skipped or (.cycles == $cyc and (.wall_ms.median > 0) and
			(.cpu_ms | type == "number") and .peak_rss_kb > 0)) and
		([.version[].plugin] | sort) == ($vp | sort) and
		all(.version[]; .runs == $vcyc and .wall_ms.median > 0) and
		(.parallel | length) == (($par | split(" ") | map(select(. != "")) | length) *
			([.serial[] | select((.skipped | not) and (.row | startswith("kube.") | not))] | length)) and
		# Not a timing: the annotation path asks nothing, the label path once per ADD.
		(.kubernetes.skipped or ((.kubernetes.rows | map({(.row): .requests_per_add}) | add) as $q |
			$q["kube.none.hpn-kanno"] == 0 and $q["kube.none.hpn-klabel"] == 1)) and
		all(.parallel[]; .reps == '"$PAR_REPS"' and .pods_per_s > 0) and
		# A pair for each variant with both of its move rows, every cycle in it.
		((.pairs | map(.variant) | sort) == ([.serial[] | select(.skipped | not) | .row |
			select(test("^move\\.[a-z]+\\.(hpn-rdma|host-device)$")) | split(".")[1]] |
			group_by(.) | map(select(length == 2)[0]) | sort)) and
		all(.pairs[]; .cycles == $cyc and .hpn_rdma_ms > 0 and .host_device_ms > 0) and
		(.kernel_floor.skipped or .kernel_floor.cpu_ms > 0) and
		(.agent.skipped or (.agent.allocate.median_ms > 0 and .agent.listwatch.median_ms > 0)) and
		('"$VM"' == 0 or .vm.skipped or (.vm.floor.virtio.median > 0 and .vm.floor.veth.median > 0 and
			.vm.hpn.virtio.median > 0 and .vm.hpn.add_ms.softroce.median > 0 and
			.vm.hpn.add_ms.plain.median > 0)) and
		(.runtime.skipped or ((.runtime.rows | length) == 3 and
			all(.runtime.rows[]; .cycles == $rtcyc and .wall_ms.median > 0) and
			(.runtime.added_ms | type == "number"))) and
		all(.targets[]; .met != null)' "$JSON" >/dev/null || {
		echo "FAIL: $JSON lacks rows or figures" >&2
		exit 1
	}
	echo "PASS: every row measured, JSON valid"
fi
