#!/bin/bash
# hpn-vm: kernel=7 nics=2
# The VM section of scripts/bench.sh (--vm): RDMA on the current kernel, in
# one boot. ib_write_bw (RC RDMA write, 64 KiB messages) from pod B's rxe to
# pod A's, HPN_VM_BENCH_RUNS times, over
#   virtio  two virtio NICs on one QEMU hub, one per pod, as hpn0: the floor
#           (pods made by hand, floor.sh: iproute2 and rdma(8), rxe made
#           inside each pod) and hpn-rdma (the same two pods through the
#           plugin with softRoce, the devices and GID index its hints files
#           name), run by run in turn, so that the load falls on both alike
#   veth    a veth pair, one end per pod, as hpn0 (the floor)
# and ADD's latency, alternately with the RDMA proof (softRoce: the rxe made
# in the pod, the port and GID waited for, the bind proven) and without
# (rdmaRequired false: a plain netdev), HPN_VM_BENCH_ADDS times each, with
# static IPAM; DEL's too; then the same for a pod of 8 NICs and of 1 from a
# pool of 8 veth pairs (host-local IPAM), the 8 proofs against one. The figures as one line "BENCH-JSON: {...}" (MB/s,
# the client's average; ms, wall as a caller sees it; each ib_write_bw run's
# output is kept in run.sh's results dir with HPN_VM_KEEP=1). Not a test: it
# asserts only that everything works.
#
#   test/vm/run.sh test/vm/vm7-bench.sh      (scripts/bench.sh --vm runs it)
# Environment: HPN_VM_BENCH_ITERS (messages per run, default 1000),
# HPN_VM_BENCH_RUNS (runs per path, default 3), HPN_VM_BENCH_ADDS (ADDs of
# each kind, default 5), HPN_PLUGIN (the plugin; without it the hpn-rdma
# figures are skipped).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=floor.sh
source "$(dirname "$0")/floor.sh"
# shellcheck source=hpn7.sh
source "$(dirname "$0")/hpn7.sh"

vm7_require shared
ITERS=${HPN_VM_BENCH_ITERS:-1000}
RUNS=${HPN_VM_BENCH_RUNS:-3}
ADDS=${HPN_VM_BENCH_ADDS:-5}
[[ $ITERS =~ ^[1-9][0-9]*$ && $RUNS =~ ^[1-9][0-9]*$ && $ADDS =~ ^[1-9][0-9]*$ ]] ||
	fail "HPN_VM_BENCH_ITERS, HPN_VM_BENCH_RUNS and HPN_VM_BENCH_ADDS must be positive numbers"
HPN=0
[[ -n ${HPN_PLUGIN:-} && -x ${HPN_PLUGIN:-} && -x $CNI_BIN/static ]] && HPN=1
A=hpnb-a
B=hpnb-b
vm_nics

# run_once PATH R SDEV CDEV [GID [CGID]]: ib_write_bw run R between SDEV in
# $A and CDEV in $B; FIG[PATH] gets the figure.
declare -A FIG=()
run_once() {
	write_bw_pods "$A" "$3" "$B" "$4" 10.79.0.1 "$ITERS" "${5:-1}" "${6:-${5:-1}}"
	FIG[$1]+="${FIG[$1]:+ }$BW"
	# Kept in run.sh's results dir (HPN_VM_KEEP=1 keeps it).
	printf '%s\n' "$CLI_OUT" >"$HPN_VM_OUT/$1-$2.client"
	printf '%s\n' "$SRV_OUT" >"$HPN_VM_OUT/$1-$2.server"
}

# floor_pods / floor_unpods: the two pods by hand, and back.
floor_pods() {
	nic_to_pod "${VM_NICS[0]}" "$A" hpn0 10.79.0.1/24
	nic_to_pod "${VM_NICS[1]}" "$B" hpn0 10.79.0.2/24
	rxe_in "$A" hpn0 rxa
	rxe_in "$B" hpn0 rxb
	port_gid "$A" rxa 10.79.0.1
	port_gid "$B" rxb 10.79.0.2
}
floor_unpods() {
	rxe_del "$A" rxa
	rxe_del "$B" rxb
	nic_home "$A" hpn0 "${VM_NICS[0]}"
	nic_home "$B" hpn0 "${VM_NICS[1]}"
}

pci() {
	jq -cn --arg p "${VM_PCIS[$1]}" '{pciBusID: $p}'
}

info "virtio: ${VM_NICS[0]} and ${VM_NICS[1]} on one QEMU hub, the floor and hpn-rdma in turn"
pod_add "$A"
pod_add "$B"
FIG[virtio]=
FIG[hpn]=
for ((r = 0; r < RUNS; r++)); do
	floor_pods
	run_once virtio "$r" rxa rxb
	floor_unpods
	((HPN)) || continue
	hpn_add "$A" "$(hconf "$(pci 0)" 10.79.0.1/24)"
	hpn_add "$B" "$(hconf "$(pci 1)" 10.79.0.2/24)"
	soft_named "$A" 0
	sdev=$DEV sg=$GID
	soft_named "$B" 0
	run_once hpn "$r" "$sdev" "$DEV" "$sg" "$GID"
	hpn_del "$A"
	hpn_del "$B"
done
info "virtio: floor ${FIG[virtio]} MB/s; hpn-rdma ${FIG[hpn]:-skipped} MB/s"

# ADD latency: with the RDMA proof (softRoce) and without (rdmaRequired false), in turn.
declare -A LAT=()
ms_since() {
	echo $(((${EPOCHREALTIME/./} - $1) / 1000))
}
for ((k = 0; HPN && k < ADDS; k++)); do
	for kind in softroce plain; do
		filter=.
		[[ $kind == plain ]] && filter='del(.softRoce) | .rdmaRequired = false'
		t0=${EPOCHREALTIME/./}
		hpn_add "$A" "$(hconf "$(pci 0)" 10.79.0.1/24 "$filter")"
		LAT[add.$kind]+="${LAT[add.$kind]:+ }$(ms_since "$t0")"
		t0=${EPOCHREALTIME/./}
		hpn_run DEL "$A"
		expect_ok "DEL $kind"
		LAT[del.$kind]+="${LAT[del.$kind]:+ }$(ms_since "$t0")"
	done
done
((HPN)) && info "ADD ms: with the proof ${LAT[add.softroce]}; rdmaRequired false ${LAT[add.plain]}"

# A pod of eight NICs from a pool of eight veth pairs (pv0..pv7, count 8,
# host-local: an address each), with an rxe and its proof each (softRoce) and
# without (rdmaRequired false), and one NIC of the same pool both ways, in
# turn: what eight proofs cost beside one (they run at once, see verbs.h).
for ((i = 0; HPN && i < 8; i++)); do
	fx ip link add "pv$i" type veth peer name "pvp$i"
	fx ip link set "pvp$i" up
done
# pool_conf COUNT FILTER: a softRoce config taking COUNT NICs of pv*, then FILTER.
pool_conf() {
	hconf '{"match": {"devices": ["pv*"]}, "count": '"$1"'}' 0/0 \
		'.ipam = {type: "host-local", dataDir: "'"$T/hl-pool"'", ranges: [[{subnet: "10.78.0.0/24"}]]} | '"$2"
}
for ((k = 0; HPN && k < ADDS; k++)); do
	for n in 1 8; do
		for kind in softroce plain; do
			filter=.
			[[ $kind == plain ]] && filter='del(.softRoce) | .rdmaRequired = false'
			t0=${EPOCHREALTIME/./}
			hpn_add "$A" "$(pool_conf "$n" "$filter")"
			LAT[add$n.$kind]+="${LAT[add$n.$kind]:+ }$(ms_since "$t0")"
			[[ $(jq '[.rdma[] | select(.bound)] | length' <<<"${RES[$A]}") == $([[ $kind == plain ]] && echo 0 || echo "$n") ]] ||
				fail "ADD of $n NICs ($kind) bound $(jq -c '[.rdma[].device]' <<<"${RES[$A]}")"
			t0=${EPOCHREALTIME/./}
			hpn_run DEL "$A"
			expect_ok "DEL of $n NICs, $kind"
			LAT[del$n.$kind]+="${LAT[del$n.$kind]:+ }$(ms_since "$t0")"
		done
	done
done
((HPN)) && info "ADD ms, pool of veths: 8 NICs with proofs ${LAT[add8.softroce]}, without ${LAT[add8.plain]};" \
	"1 NIC with its proof ${LAT[add1.softroce]}, without ${LAT[add1.plain]}"
for ((i = 0; HPN && i < 8; i++)); do
	fx ip link del "pv$i"
done

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
FIG[veth]=
for ((r = 0; r < RUNS; r++)); do
	run_once veth "$r" rxa rxb
done
info "veth: ${FIG[veth]} MB/s"
rxe_del "$A" rxa
rxe_del "$B" rxb
fx ip netns del "$A"
fx ip netns del "$B"

# median "N N ...": the median of the numbers.
median() {
	tr ' ' '\n' <<<"$1" | sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'
}
# nums "N N ...": a JSON array (empty string: null).
nums() {
	if [[ -z $1 ]]; then echo null; else jq -cn --arg s "$1" '$s | split(" ") | map(tonumber)'; fi
}
med() {
	if [[ -z $1 ]]; then echo null; else median "$1"; fi
}
# pool_json: the pool rows: ADD and DEL ms of 1 and 8 NICs, with and without
# proofs; the target: 8 NICs with proofs within 1.5 times one NIC with its
# proof plus the seven extra NICs' cost without proofs (8 plain - 1 plain).
pool_json() {
	local n kind args=()
	((HPN)) || {
		echo null
		return
	}
	for n in 1 8; do
		for kind in softroce plain; do
			args+=(--argjson "a$n$kind" "$(nums "${LAT[add$n.$kind]:-}")"
				--argjson "d$n$kind" "$(nums "${LAT[del$n.$kind]:-}")")
		done
	done
	jq -cn "${args[@]}" '
		def med: if . == null then null else sort | if length % 2 == 1 then .[length / 2 | floor]
			else (.[length / 2 - 1] + .[length / 2]) / 2 end end;
		def row(a; d): {add_ms: a, add_median: (a | med), del_ms: d, del_median: (d | med)};
		{nics: "veth pairs pv0..pv7, match devices pv*, host-local",
		 "1": {softroce: row($a1softroce; $d1softroce), plain: row($a1plain; $d1plain)},
		 "8": {softroce: row($a8softroce; $d8softroce), plain: row($a8plain; $d8plain)}} |
		(.["1"].softroce.add_median + .["8"].plain.add_median - .["1"].plain.add_median) as $base |
		. + {add8_base_ms: $base, add8_vs_base: (if $base > 0 then .["8"].softroce.add_median / $base
			else null end), target: "add8_vs_base <= 1.5"}'
}
json=$(jq -cn --arg k "$VM_KVER" --argjson it "$ITERS" --argjson runs "$RUNS" --argjson adds "$ADDS" \
	--argjson v "$(nums "${FIG[virtio]}")" --argjson e "$(nums "${FIG[veth]}")" \
	--argjson h "$(nums "${FIG[hpn]:-}")" \
	--argjson mv "$(med "${FIG[virtio]}")" --argjson me "$(med "${FIG[veth]}")" \
	--argjson mh "$(med "${FIG[hpn]:-}")" \
	--argjson adds_s "$(nums "${LAT[add.softroce]:-}")" --argjson adds_p "$(nums "${LAT[add.plain]:-}")" \
	--argjson dels_s "$(nums "${LAT[del.softroce]:-}")" --argjson dels_p "$(nums "${LAT[del.plain]:-}")" \
	--argjson mas "$(med "${LAT[add.softroce]:-}")" --argjson mapl "$(med "${LAT[add.plain]:-}")" \
	--argjson mds "$(med "${LAT[del.softroce]:-}")" --argjson mdp "$(med "${LAT[del.plain]:-}")" \
	--argjson pool "$(pool_json)" '
	{kernel: $k, tool: "ib_write_bw -F (RC RDMA write), pod B -> pod A, the GID index each side names",
	 message_bytes: 65536, messages_per_run: $it, runs: $runs,
	 floor: {virtio: {mb_s: $v, median: $mv}, veth: {mb_s: $e, median: $me}},
	 hpn: (if $h == null then {skipped: "no HPN_PLUGIN or static IPAM in the VM"} else
		{virtio: {mb_s: $h, median: $mh},
		 vs_floor: (if $mv > 0 then $mh / $mv else null end),
		 add_ms: {adds: $adds, softroce: {ms: $adds_s, median: $mas}, plain: {ms: $adds_p, median: $mapl}},
		 del_ms: {softroce: {ms: $dels_s, median: $mds}, plain: {ms: $dels_p, median: $mdp}},
		 pool8: $pool} end)}')
echo "BENCH-JSON: $json"
