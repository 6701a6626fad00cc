#!/bin/bash
# Stress: many ADD/DEL cycles on one NIC, the plugin's fds at exit, and many
# NICs attached and detached at once.
#
# Proves that:
#  - HPN_STRESS_CYCLES (default 1000) ADD/DEL cycles of one veth NIC with
#    Debian's host-local IPAM each succeed with the expected result, and that
#    every 100 cycles and at the end the host netns is exactly as before, the
#    pod holds only lo, no journal or temp file is left in the state dir,
#    host-local holds no address, and no netns leaked;
#  - the plugin leaves no fd open at exit that it opened itself: every 50th
#    ADD and DEL, and a CHECK, STATUS, GC, VERSION, a refused ADD and a rolled
#    back ADD, run under valgrind (memcheck with --track-fds, HPN_VALGRIND in
#    test/common.sh), which also makes any memory error or leak a failure.
#    Valgrind cannot run an ASan build: there this part is skipped with an
#    info line (the release build's run covers it);
#  - HPN_STRESS_PARALLEL (default 64) NICs ADDed to as many pods all at once
#    (each its own container ID and pod, one network config but for
#    `device`) all succeed even though each run serialises on the state lock
#    (30 s timeout, code 11), each NIC ends up as hpn0 in its pod; DELs all at
#    once succeed and leave the host as before and no state. Repeated
#    HPN_STRESS_ROUNDS (default 3) times.
# Figures (cycles, wall time, per-cycle mean, round times, per-run latency)
# are printed as "# ..." lines for the ctest log.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# With the whole tier under valgrind (HPN_VALGRIND=1 ctest -L netns), 1000
# cycles would take hours; this test runs its own valgrind sample instead.
[[ ${HPN_VALGRIND:-0} != 1 ]] || skip "HPN_VALGRIND=1: stress runs its own valgrind sample"
t_init

CYCLES=${HPN_STRESS_CYCLES:-1000}
PAR=${HPN_STRESS_PARALLEL:-64}
ROUNDS=${HPN_STRESS_ROUNDS:-3}
FD_EVERY=${HPN_STRESS_FD_EVERY:-50}	# every Nth ADD and DEL under valgrind
CHECK_EVERY=100				# full host/pod/state check every N cycles
for v in CYCLES PAR ROUNDS FD_EVERY; do
	[[ ${!v} =~ ^[0-9]+$ ]] || fail "$v must be a number, not '${!v}'"
done
((FD_EVERY > 0)) || fail "HPN_STRESS_FD_EVERY must be at least 1"
# snap (lib.sh) hands `ip -d -j link` to jq as one argument, which Linux caps
# at 128 KiB: about 110 veth pairs.
((PAR <= 100)) || fail "HPN_STRESS_PARALLEL is at most 100 (snap's jq argument)"

# Valgrind runs only on a non-ASan plugin (both want the address space).
VG=1
if ! command -v valgrind >/dev/null; then
	VG=0
	info "valgrind is not installed: the fd checks are skipped (Debian: valgrind)"
elif is_asan_build "$HPN_PLUGIN"; then
	VG=0
	info "ASan build: valgrind cannot run it, the fd checks are skipped" \
		"(the release build's netns.stress runs them)"
fi

# now_ms: wall clock in milliseconds, from bash itself (no fork per sample).
now_ms() {
	local us=${EPOCHREALTIME//[.,]/}
	echo $((us / 1000))
}

# hl_conf VERSION DEVICE DATADIR: DEVICE as hpn0 with host-local on a /24, so
# that 1000 cycles wrap around the range and reuse released addresses.
hl_conf() {
	net_conf "$1" '.device = $dev | .ifName = "hpn0" |
		.ipam = {type: "host-local", dataDir: $dd,
			ranges: [[{subnet: "10.80.0.0/24", gateway: "10.80.0.1"}]]}' \
		--arg dev "$2" --arg dd "$3"
}

# expect_clean WHAT DATADIR NS...: the host netns is as snapshotted, every pod
# NS holds only lo, no journal or temp file is left, host-local holds nothing,
# and of this test's netns only the host and the NS given exist.
expect_clean() {
	local what=$1 dd=$2 ns held left want
	shift 2
	snap_same "$HOST_NS" "$T/host.before" "$what: host"
	for ns in "$@"; do
		POD_NS=$ns pod_empty "$what: pod $ns"
	done
	expect_no_state "$what"
	# Journals are written to .tmp.<key>.<pid> and renamed: none may stay.
	left=$(find "$STATE" -name '.tmp*' 2>/dev/null)
	[[ -z $left ]] || fail "$what: temp files left in the state dir: $left"
	held=$(hostlocal_ips "$dd")
	[[ -z $held ]] || fail "$what: host-local still holds: $held"
	left=$(ns_left | sort)
	want=$(printf '%s\n' "$HOST_NS" "$@" | sort)
	[[ $left == "$want" ]] || fail "$what: netns are [$(echo $left)], expected [$(echo $want)]"
}

# vg_run CMD CONFIG [NAME=VALUE]...: run_plugin under valgrind (fd leaks and
# memory errors fail there), counted in VG_RUNS.
VG_RUNS=0
vg_run() {
	HPN_VALGRIND=1 run_plugin "$@"
	VG_RUNS=$((VG_RUNS + 1))
}

# --- HPN_STRESS_CYCLES ADD/DEL cycles of one NIC.
cycles() {
	local dd=$T/hl-$SCEN conf prev i t0 t1 vg ts
	local add_ms=0 del_ms=0 plain=0
	mk_nic "$HOST_NS" nic0 peer0
	ip -n "$HOST_NS" link set peer0 up
	ip -n "$HOST_NS" link set nic0 mtu 4000
	snap_save "$HOST_NS" "$T/host.before"
	conf=$(hl_conf 1.0.0 nic0 "$dd")
	t0=$(now_ms)
	for ((i = 1; i <= CYCLES; i++)); do
		vg=0
		((VG && i % FD_EVERY == 0)) && vg=1
		ts=$(now_ms)
		if ((vg)); then vg_run ADD "$conf"; else run_plugin ADD "$conf"; fi
		((vg)) || add_ms=$((add_ms + $(now_ms) - ts))
		expect_ok "cycle $i: ADD"
		# One jq per cycle (its start-up is most of a cycle's cost): the
		# result is one object with hpn0 in the pod and one host-local
		# address, and becomes the DEL's prevResult.
		prev=$(jq -cse --argjson c "$conf" --arg ns "$(ns_path "$POD_NS")" '
			if length == 1 and (.[0] | (.interfaces | length == 1) and
				.interfaces[0].name == "hpn0" and .interfaces[0].sandbox == $ns and
				(.interfaces[0].mac | length == 17) and .interfaces[0].mtu == 4000 and
				(.ips | length == 1) and .ips[0].interface == 0 and
				.ips[0].gateway == "10.80.0.1" and
				(.ips[0].address | test("^10\\.80\\.0\\.([2-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-4])/24$")))
			then $c + {prevResult: .[0]} else false end' <<<"$OUT" 2>&1) ||
			fail "cycle $i: ADD result is not one hpn0 in $POD_NS with a 10.80.0.x/24 address: $OUT"
		has_link "$POD_NS" hpn0 || fail "cycle $i: hpn0 is not in the pod after ADD"
		has_link "$HOST_NS" nic0 && fail "cycle $i: nic0 is still in the host after ADD"
		ts=$(now_ms)
		if ((vg)); then vg_run DEL "$prev"; else run_plugin DEL "$prev"; fi
		((vg)) || { del_ms=$((del_ms + $(now_ms) - ts)) && plain=$((plain + 1)); }
		expect_ok "cycle $i: DEL"
		[[ -z $OUT ]] || fail "cycle $i: DEL printed: $OUT"
		has_link "$HOST_NS" nic0 || fail "cycle $i: nic0 is not back in the host after DEL"
		if ((i % CHECK_EVERY == 0 || i == CYCLES)); then
			expect_clean "after $i cycles" "$dd" "$POD_NS"
		fi
	done
	t1=$(now_ms)
	info "cycles: $CYCLES ADD/DEL cycles in $(((t1 - t0) / 1000)).$(printf %03d $(((t1 - t0) % 1000))) s," \
		"mean $(((t1 - t0) * 1000 / CYCLES)) us per cycle" \
		"(ADD + DEL + checks; $VG_RUNS runs under valgrind)"
	# The plugin's own share, from the cycles not under valgrind.
	((plain == 0)) || info "cycles: mean ADD $((add_ms / plain)) ms, mean DEL $((del_ms / plain)) ms" \
		"(plugin run through ip netns exec, IPAM included; $plain cycles)"
}
if ((CYCLES > 0)); then
	scenario "$CYCLES ADD/DEL cycles" cycles
fi

# --- The other commands and the failure paths under valgrind, for their fds.
fd_commands() {
	local dd=$T/hl-$SCEN conf conf11 res log=$T/ipam-$SCEN.log
	mk_nic "$HOST_NS" nic0 peer0
	snap_save "$HOST_NS" "$T/host.before"
	conf=$(hl_conf 1.0.0 nic0 "$dd")
	# Debian's host-local stops at 1.0.0; STATUS and GC need 1.1.0.
	conf11=$(net_conf 1.1.0 '.device = "nic0" | .ifName = "hpn0" |
		.ipam = {type: "hpnt-ipam", log: $log,
			addresses: [{address: "10.81.0.5/24", gateway: "10.81.0.1"}]}' \
		--arg log "$log")
	vg_run VERSION '{"cniVersion": "1.0.0"}' -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "VERSION"
	info "VERSION: $VG_FDS"
	vg_run ADD "$conf"
	expect_result "ADD"
	info "ADD: $VG_FDS"
	res=$OUT
	vg_run CHECK "$(with_prev "$conf" "$res")"
	expect_ok "CHECK"
	info "CHECK: $VG_FDS"
	vg_run DEL "$(with_prev "$conf" "$res")"
	expect_ok "DEL"
	info "DEL: $VG_FDS"
	vg_run DEL "$(with_prev "$conf" "$res")"
	expect_ok "DEL again"
	vg_run ADD "$(jq -c '.device = "hpnt-none0"' <<<"$conf")"
	expect_err 100 "ADD of a missing NIC"
	info "refused ADD: $VG_FDS"
	vg_run ADD "$conf" HPN_FAIL_AT=route
	expect_err any "ADD failing after the route step"
	info "rolled back ADD: $VG_FDS"
	vg_run STATUS "$conf11" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "STATUS"
	info "STATUS: $VG_FDS"
	vg_run ADD "$conf11"
	expect_result "ADD for GC"
	vg_run GC "$(jq -c '.["cni.dev/valid-attachments"] = []' <<<"$conf11")" \
		-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "GC"
	info "GC: $VG_FDS"
	ipam_log_balanced "$log" "IPAM after GC"
	expect_clean "after the valgrind runs" "$dd" "$POD_NS"
}
if ((VG)); then
	scenario "fds at exit of each command (valgrind)" fd_commands
fi

# par_run CMD I: one background run of the parallel rounds, for NIC I in pod
# I, with the config in $T/par/I/CMD.conf; its status, stdout, stderr and
# wall time go to $T/par/I/.
par_run() {
	local cmd=$1 i=$2 t0 d=$T/par/$2
	T=$d	# run_cni's scratch files: one set per job
	POD_NS=${HPNT_PREFIX}p$SCEN-$i
	CID=hpnt-$$-$SCEN-$i
	t0=$(now_ms)
	run_plugin "$cmd" "$(<"$d/$cmd.conf")"
	echo "$RC" >"$d/rc"
	echo "$(($(now_ms) - t0))" >"$d/ms"
	printf '%s' "$OUT" >"$d/$cmd.out"
	printf '%s' "$ERR" >"$d/$cmd.err"
}

# par_round CMD ROUND: CMD for every NIC at once (the configs are prepared
# beforehand, so the jobs start within a few ms of each other), then the exit
# status of each. Prints the round's figures; code 11 (the state lock's
# timeout) is counted apart, with each failed run's time.
par_round() {
	local cmd=$1 r=$2 i t0 t1 tl rc ms
	local -a pids=() lat=()
	local n11=0 nfail=0 fails=
	t0=$(now_ms)
	for ((i = 0; i < PAR; i++)); do
		par_run "$cmd" "$i" &
		pids+=($!)
	done
	tl=$(now_ms)
	for i in "${pids[@]}"; do
		wait "$i" || true	# the verdict is in the job's files
	done
	t1=$(now_ms)
	for ((i = 0; i < PAR; i++)); do
		rc=$(<"$T/par/$i/rc")
		ms=$(<"$T/par/$i/ms")
		lat+=("$ms")
		if [[ $rc != 0 ]]; then
			nfail=$((nfail + 1))
			[[ $(<"$T/par/$i/$cmd.out") == *'"code":11'* ]] && n11=$((n11 + 1))
			fails+="  nic$i: exit $rc after $ms ms: $(<"$T/par/$i/$cmd.out") $(<"$T/par/$i/$cmd.err")"$'\n'
		fi
	done
	info "parallel round $r: $PAR ${cmd}s at once in $((t1 - t0)) ms wall" \
		"(all started within $((tl - t0)) ms); per run (ms):" \
		"$(printf '%s\n' "${lat[@]}" | sort -n | awk '{a[NR] = $1; s += $1}
			END {printf "min %d, median %d, mean %d, max %d",
				a[1], a[int((NR + 1) / 2)], s / NR, a[NR]}')"
	((nfail == 0)) || fail "round $r: $nfail of $PAR ${cmd}s failed" \
		"($n11 with code 11, the state lock's timeout):"$'\n'"$fails"
}

# --- HPN_STRESS_PARALLEL NICs, ADD all at once then DEL all at once.
parallel() {
	local dd=$T/hl-$SCEN i r res pod out mac got
	local -a pods=() confs=()
	for ((i = 0; i < PAR; i++)); do
		mk_nic "$HOST_NS" "nic$i" "peer$i"
		pod=${HPNT_PREFIX}p$SCEN-$i
		ip netns add "$pod"
		pods+=("$pod")
		mkdir -p "$T/par/$i"
	done
	snap_save "$HOST_NS" "$T/host.before"
	# One network config for all, but for the device; made by one jq.
	mapfile -t confs < <(hl_conf 1.0.0 nic "$dd" |
		jq -c --argjson n "$PAR" 'range($n) as $i | .device = "nic\($i)"')
	((${#confs[@]} == PAR)) || fail "made ${#confs[@]} configs, expected $PAR"
	for ((i = 0; i < PAR; i++)); do
		printf '%s' "${confs[i]}" >"$T/par/$i/ADD.conf"
	done
	for ((r = 1; r <= ROUNDS; r++)); do
		par_round ADD "$r"
		# Each result names hpn0 in its own pod; its MAC is the one there;
		# it becomes the DEL's prevResult.
		for ((i = 0; i < PAR; i++)); do
			res=$(<"$T/par/$i/ADD.out")
			out=$(jq -crse --argjson c "${confs[i]}" --arg ns "$(ns_path "${pods[i]}")" '
				if length == 1 and (.[0] | (.interfaces | length == 1) and
					.interfaces[0].name == "hpn0" and
					.interfaces[0].sandbox == $ns and (.ips | length == 1))
				then .[0].interfaces[0].mac, $c + {prevResult: .[0]}
				else false end' <<<"$res" 2>&1) ||
				fail "round $r: ADD of nic$i: not one hpn0 in ${pods[i]}: $res"
			{ read -r mac && read -r res; } <<<"$out"
			printf '%s' "$res" >"$T/par/$i/DEL.conf"
			got=$(ip -n "${pods[i]}" -br link show dev hpn0 2>/dev/null | awk '{print $3}')
			[[ $got == "$mac" ]] ||
				fail "round $r: hpn0 with $mac is not in pod ${pods[i]}: $(ip -n "${pods[i]}" -br link)"
			has_link "$HOST_NS" "nic$i" && fail "round $r: nic$i is still in the host"
		done
		# Every NIC has its own address and its own journal.
		[[ $(hostlocal_ips "$dd" | wc -l) == "$PAR" ]] ||
			fail "round $r: host-local holds $(hostlocal_ips "$dd" | wc -l) addresses, expected $PAR"
		[[ $(state_count) == "$PAR" ]] ||
			fail "round $r: $(state_count) journals, expected $PAR"
		par_round DEL "$r"
		expect_clean "after parallel round $r" "$dd" "$POD_NS" "${pods[@]}"
	done
	for pod in "${pods[@]}"; do
		ip netns del "$pod"
	done
}
if ((PAR > 0)); then
	scenario "$PAR NICs ADDed and DELeted in parallel, $ROUNDS rounds" parallel
fi

t_done
