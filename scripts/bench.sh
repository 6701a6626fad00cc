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
# This file reads the options and the environment, then runs the sections
# (bench/*.sh, sourced below), in order; each section's file says at its top
# what its rows measure.
# doc/performance.md has the method and the figures.
#
# Options and environment:
#   --quick          few iterations (smoke test; figures are not meaningful)
#   --check          after the run, fail unless the JSON holds every row
#   --json PATH      machine-readable copy (default: ./bench.json)
#   --vm             the VM section (QEMU; test/vm/prepare.sh --kernel 7)
#   HPN_PLUGIN       plugin binary (default build/plugin/hpn-rdma)
#   HPN_BENCH_RUN    runner binary (default build/bench/hpn-bench-run)
#   HPN_BENCH_DISCOVERY  ADD's RDMA discovery timed alone (default
#                    build/bench/hpn-bench-discovery; skipped if missing)
#   HPN_BENCH_KERNEL the kernel's own work of a move-mode ADD+DEL, in one
#                    process (default build/bench/hpn-bench-kernel; skipped
#                    if missing): with two starts of /bin/true, the CPU floor
#                    of any plugin; also the cost of one CPUID on this machine
#   HPN_BENCH_GPU    the GPU-aware NIC choice against the first match on
#                    test/fixtures/gpu-nodes (default
#                    build/bench/hpn-bench-gpu-choice; skipped if missing)
#   HPN_CNI_BIN      reference plugins (default /usr/lib/cni)
#   HPN_AGENT        the agent (default build/agent/hpn-rdma-agent)
#   HPN_KUBELET      the kubelet stand-in (default build/test/agent/hpn-kubelet)
#   BENCH_AGENT_ITER calls per device plugin latency row, and rounds of the
#                    DRA Prepare latency (default 500; quick 20)
#   BENCH_DRA_CHANGES  times the DRA pool grows and shrinks (default 5; quick 1)
#   HPN_PLUGIN_LINKED_YAML, HPN_PLUGIN_LINKED_KUBE  the plugin with libyaml,
#                    and libcurl + libyaml, linked (default
#                    build/bench/hpn-rdma-linked-{yaml,kube}; rows skipped if
#                    missing)
#   HPN_CRI          the CRI client (default build/test/runtime/hpn-cri)
#   HPN_PAUSE_IMAGE  the sandbox image archive (default
#                    build/test/runtime/pause-image.tar)
#   BENCH_RT_ITER    pod cycles per runtime row, and containers per NRI row
#                    (default 40; quick 3)
#   HPN_RUNTIME_CACHE  the runtime tier's cache (test/runtime/fetch.sh; default
#                    /var/cache/hpn-rdma/runtime): containerd 2.1 for the NRI
#                    rows (bench/nri.sh; with HPN_AGENT, skipped without)
#   BENCH_ITER       ADD+DEL cycles per row (default 200; quick 6)
#   BENCH_ROUNDS     rounds the cycles are split into (default 4; quick 2)
#   BENCH_VERSION_ITER  runs per VERSION row (default 200; quick 6)
#   BENCH_PAR        parallel widths (default "1 8 32")
#   BENCH_PAR_REPS   repetitions per width (default 5; quick 1)
#   HPN_PLUGIN_BASE  an older hpn-rdma binary: adds hpn-base rows (move mode,
#                    VERSION), for before/after figures from the same run
#   BENCH_ROWS       only the rows matching this regex (e.g. 'move\..*hpn');
#                    --check then fails, as rows are missing
#   BENCH_HPN_POOL   0: hpn-rdma names nic<k> (as host-device does) instead
#                    of taking it from the pool (default 1)
#   BENCH_HPN_MACVLAN  the jq filter that makes the hpn-macvlan rows' config
#   BENCH_HINTS_DIR  parent of the NCCL hints dir (default: /run if it is a
#                    tmpfs, as on a node, else /dev/shm)
#   BENCH_STATE_DIR  parent of hpn-rdma's stateDir (default: /run if it is a
#                    tmpfs, as a node's default /run/hpn-rdma/state, else
#                    /dev/shm; BENCH_STATE_DIR=/tmp measures it on disk)
#   BENCH_MTU        if set, every row also sets this MTU in ADD (and the
#                    device's MTU is restored on DEL); host-device has no MTU
#                    option, so its rows then do less work than the others
#   BENCH_VM_ITERS   64 KiB messages per ib_write_bw run (default 1000; quick 100)
#   BENCH_VM_RUNS    runs per path (default 3; quick 1)
#   BENCH_VM_ADDS    ADDs of each kind (default 5; quick 1)
#   HPN_VM_CACHE     the vm tier's cache (default /var/cache/hpn-rdma/vm)
# Timings are reported, never asserted: the targets are printed as met or not.
# shellcheck source-path=SCRIPTDIR/.. # the sections: bench/*.sh
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
GPU_CHOICE=${HPN_BENCH_GPU:-$SRC/build/bench/hpn-bench-gpu-choice}
LINKED_YAML=${HPN_PLUGIN_LINKED_YAML:-$SRC/build/bench/hpn-rdma-linked-yaml}
LINKED_KUBE=${HPN_PLUGIN_LINKED_KUBE:-$SRC/build/bench/hpn-rdma-linked-kube}
[[ -z $BASE || -x $BASE ]] || {
	echo "bench.sh: HPN_PLUGIN_BASE $BASE is not an executable" >&2
	exit 2
}
CNI_BIN=${HPN_CNI_BIN:-/usr/lib/cni}
AGENT=${HPN_AGENT:-$SRC/build/agent/hpn-rdma-agent}
KUBELET=${HPN_KUBELET:-$SRC/build/test/agent/hpn-kubelet}
PAR=${BENCH_PAR:-1 8 32}
MTU=${BENCH_MTU:-}
# The counts: variable, its environment variable, default with --quick, default.
while read -r v e q d; do
	printf -v "$v" %s "${!e:-$((QUICK ? q : d))}"
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || {
		echo "bench.sh: $v must be a positive number, not '${!v}'" >&2
		exit 2
	}
done <<'EOF'
ITER BENCH_ITER 6 200
ROUNDS BENCH_ROUNDS 2 4
PAR_REPS BENCH_PAR_REPS 1 5
VITER BENCH_VERSION_ITER 6 200
RT_ITER BENCH_RT_ITER 3 40
VM_ITERS BENCH_VM_ITERS 100 1000
VM_RUNS BENCH_VM_RUNS 1 3
VM_ADDS BENCH_VM_ADDS 1 5
AG_ITER BENCH_AGENT_ITER 20 500
DRA_CHANGES BENCH_DRA_CHANGES 1 5
EOF
PER_ROUND=$(((ITER + ROUNDS - 1) / ROUNDS))
MAXPAR=1
for n in $PAR; do
	[[ $n =~ ^[1-9][0-9]*$ && $n -le 100 ]] || {
		echo "bench.sh: BENCH_PAR widths are 1..100, not '$n'" >&2
		exit 2
	}
	((n > MAXPAR)) && MAXPAR=$n
done

source "$SRC/bench/lib.sh" # the netns, the jobs and configs of every row, the runner
source "$SRC/bench/serial.sh" # ADD+DEL rows (move, shared; none and static IPAM), the CPU floor
source "$SRC/bench/kube.sh" # the Kubernetes API lookup rows
source "$SRC/bench/agent.sh" # the hpn-rdma-agent rows
source "$SRC/bench/dra.sh" # the DRA driver's rows
source "$SRC/bench/pairs.sh" # hpn-rdma and host-device cycle by cycle
source "$SRC/bench/version.sh" # VERSION latency
source "$SRC/bench/parallel.sh" # N pods at once
source "$SRC/bench/vm.sh" # RDMA in a VM (--vm)
source "$SRC/bench/runtime.sh" # pods through containerd
source "$SRC/bench/nri.sh" # containers through containerd's NRI, with and without the agent's plugin
source "$SRC/bench/gpu.sh" # the GPU-aware NIC choice against the first match
source "$SRC/bench/report.sh" # the JSON, the targets, the table, --check

bench_prereqs
select_rows # before the netns: the 8-NIC rows need 8 NICs in the node
bench_netns
kube_setup
probe_hpn_macvlan
agent_start
dra_claims
verify_rows
serial_rounds # the pairs and the CPU floor's parts in every round
version_rows
parallel_rows
cpu_floor
agent_latency
dra_latency
dra_publish
vm_section
runtime_section
nri_section
gpu_choice
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
report
if ((CHECK)); then
	report_check
fi
