#!/bin/bash
# hpn-vm: kernel=7 nics=2
# The VM section of scripts/bench.sh (--vm): the RDMA floor on the current
# kernel, in one boot. Two pods made by hand (floor.sh: iproute2 and rdma(8),
# rxe made inside each pod), then ib_write_bw (RC RDMA write, 64 KiB
# messages) from pod B's rxe to pod A's, HPN_VM_BENCH_RUNS times, over
#   virtio  two virtio NICs on one QEMU hub, one per pod, as hpn0
#   veth    a veth pair, one end per pod, as hpn0
# and the figures as one line "BENCH-JSON: {...}" (MB/s, the client's
# average; each run's output is kept in run.sh's results dir with
# HPN_VM_KEEP=1). The plugin's row (the same two pods through hpn-rdma) is compared
# with these. Not a test: it asserts only that the floor works.
#
#   test/vm/run.sh test/vm/vm7-bench.sh      (scripts/bench.sh --vm runs it)
# Environment: HPN_VM_BENCH_ITERS (messages per run, default 1000),
# HPN_VM_BENCH_RUNS (runs per path, default 3).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=floor.sh
source "$(dirname "$0")/floor.sh"

read -r kver </proc/sys/kernel/osrelease
[[ ${kver%%.*} -ge 7 ]] || skip "kernel $kver: the VM bench needs Debian's 7.x"
[[ $(rdma system show) == *"netns shared"* ]] || fail "the VM did not boot in shared mode"
ITERS=${HPN_VM_BENCH_ITERS:-1000}
RUNS=${HPN_VM_BENCH_RUNS:-3}
[[ $ITERS =~ ^[1-9][0-9]*$ && $RUNS =~ ^[1-9][0-9]*$ ]] ||
	fail "HPN_VM_BENCH_ITERS and HPN_VM_BENCH_RUNS must be positive numbers"
A=hpnb-a
B=hpnb-b
vm_nics

# runs PATH: RUNS ib_write_bw runs between the pods' rxa and rxb; FIG[PATH]
# = "bw bw ...".
declare -A FIG=()
runs() {
	local r
	FIG[$1]=
	for ((r = 0; r < RUNS; r++)); do
		write_bw_pods "$A" rxa "$B" rxb 10.79.0.1 "$ITERS"
		FIG[$1]+="${FIG[$1]:+ }$BW"
		# Kept in run.sh's results dir (HPN_VM_KEEP=1 keeps it).
		printf '%s\n' "$CLI_OUT" >"$HPN_VM_OUT/$1-$r.client"
		printf '%s\n' "$SRV_OUT" >"$HPN_VM_OUT/$1-$r.server"
	done
	info "$1: ${FIG[$1]} MB/s"
}

info "virtio: ${VM_NICS[0]} and ${VM_NICS[1]} on one QEMU hub"
pod_add "$A"
pod_add "$B"
nic_to_pod "${VM_NICS[0]}" "$A" hpn0 10.79.0.1/24
nic_to_pod "${VM_NICS[1]}" "$B" hpn0 10.79.0.2/24
rxe_in "$A" hpn0 rxa
rxe_in "$B" hpn0 rxb
port_gid "$A" rxa 10.79.0.1
port_gid "$B" rxb 10.79.0.2
runs virtio
rxe_del "$A" rxa
rxe_del "$B" rxb
nic_home "$A" hpn0 "${VM_NICS[0]}"
nic_home "$B" hpn0 "${VM_NICS[1]}"

info "veth: a veth pair, one end in each pod"
fx ip link add hpn0 netns "$A" type veth peer name hpn0 netns "$B"
fx ip -n "$A" addr add 10.79.0.1/24 dev hpn0
fx ip -n "$A" link set hpn0 up
fx ip -n "$B" addr add 10.79.0.2/24 dev hpn0
fx ip -n "$B" link set hpn0 up
rxe_in "$A" hpn0 rxa
rxe_in "$B" hpn0 rxb
port_gid "$A" rxa 10.79.0.1
port_gid "$B" rxb 10.79.0.2
runs veth
rxe_del "$A" rxa
rxe_del "$B" rxb
fx ip netns del "$A"
fx ip netns del "$B"

# median "N N ...": the median of the numbers.
median() {
	tr ' ' '\n' <<<"$1" | sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'
}
json=$(jq -cn --arg k "$kver" --argjson it "$ITERS" --argjson runs "$RUNS" \
	--arg v "${FIG[virtio]}" --arg e "${FIG[veth]}" \
	--argjson mv "$(median "${FIG[virtio]}")" --argjson me "$(median "${FIG[veth]}")" '
	def nums(s): s | split(" ") | map(tonumber);
	{kernel: $k, tool: "ib_write_bw -F (RC RDMA write), pod B rxb -> pod A rxa, GID index 1",
	 message_bytes: 65536, messages_per_run: $it, runs: $runs,
	 floor: {virtio: {mb_s: nums($v), median: $mv}, veth: {mb_s: nums($e), median: $me}}}')
echo "BENCH-JSON: $json"
