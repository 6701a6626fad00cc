# shellcheck shell=bash
# The serial rows of scripts/bench.sh, and the CPU floor they are held against.
#
# Rows (each measured the same way, interleaved over BENCH_ROUNDS rounds so
# that background load falls on all of them alike):
#   move mode:   hpn-rdma, host-device, iproute2 floor
#   shared mode: macvlan (reference), iproute2 floor, and hpn-rdma when the
#                plugin accepts `mode: "macvlan"` (detected by trying it)
# each without IPAM (the plugin's own cost) and with Debian's `static` IPAM
# (end to end: address and route; the IPAM plugin's CPU and RSS are included,
# as a runtime pays them).
#   a pod of 8 NICs (move8.none.*, issue 31): hpn-rdma with `match` (nic*)
#                and `count: 8`, nic0..nic7 into one pod as hpn0..hpn7, and
#                the iproute2 floor of the same 8 moves (floor_move8); no IPAM
#                only (`static` would give all 8 NICs one address); report.sh
#                also holds them against 8 times the kernel floor of one move
#                (hpn-bench-kernel) and 8 times move.none.iproute2. Not in the
#                parallel rows (N pods of 8 would need 8N NICs).
# hpn-rdma runs with rdmaRequired:false: veths have no RDMA device, so its
# RDMA discovery runs and finds nothing, and the bind is skipped. So the 8-NIC
# rows measure the moves, the rails' settings and the state of a multi-NIC ADD
# only, not the RDMA proofs such an ADD runs at once (the host kernel has no
# RDMA; vm.sh's pool8 rows measure them in a VM).
#
# Measured per row: ADD+DEL wall (median, p99), CPU (user+sys, children
# included) per ADD+DEL, peak RSS (largest ru_maxrss of a plugin run and its
# waited-for children). The same rounds hold the pairs (pairs.sh) and the CPU
# floor's two parts: the kernel's own work of a move-mode ADD+DEL in one
# process (hpn-bench-kernel) and /bin/true's start. Also: ADD's RDMA
# discovery timed alone (hpn-bench-discovery).

# select_rows: ROWS, the move, shared and 8-NIC rows BENCH_ROWS selects
# (kube.sh adds its own); none skipped yet. Before bench_netns, which makes
# the 8-NIC rows' NICs.
select_rows() {
	local v
	mapfile -t ROWS < <(
		for v in none static; do
			selected "move.$v.hpn-rdma" "move.$v.hpn-agent" ${BASE:+"move.$v.hpn-base"} \
				"move.$v.host-device" "move.$v.iproute2" \
				"shared.$v.hpn-macvlan" "shared.$v.macvlan" "shared.$v.iproute2"
		done
		selected move8.none.hpn-rdma move8.none.iproute2
	)
	SKIPPED=()
	declare -gA SKIP_WHY=()
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

# probe_hpn_macvlan: skip the hpn-macvlan rows (saying why in info_skip)
# unless the plugin has the mode.
probe_hpn_macvlan() {
	if ! hpn_macvlan_ok; then
		SKIPPED+=(shared.none.hpn-macvlan shared.static.hpn-macvlan)
		info_skip=$HPN_MACVLAN_WHY
	fi
	node_clean 1
}

# verify_rows: the run's header, then every row verified once.
verify_rows() {
	local row
	echo "# hpn-rdma benchmark: $ITER ADD+DEL cycles per row in $ROUNDS rounds," \
		"VERSION x $VITER, parallel widths $PAR x $PAR_REPS"
	echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	[[ -n ${info_skip:-} ]] && echo "# hpn-rdma shared-mode rows skipped: $info_skip"
	: >"$W/raw"
	for row in "${ROWS[@]}"; do
		is_skipped "$row" && continue
		verify "$row"
	done
}

# Serial ADD+DEL, rows interleaved round by round. The CPU floor's two parts
# (below) are taken in the same rounds, so that the load and the state of the
# machine a row meets fall on the floor it is held against, too.
serial_rounds() {
	local r row steps q0 warm
	cni_job "$JOBS/floor-true/0" VERSION 0 '{"cniVersion":"1.0.0"}' "$(type -P true)"
	: >"$W/kern.rounds"
	for ((r = 0; r < ROUNDS; r++)); do
		warm=$((r == 0 ? 3 : 1))
		for row in "${ROWS[@]}"; do
			is_skipped "$row" && continue
			mapfile -t steps < <(prepare "$row" 1)
			q0=$(kube_requests)
			run "serial|$row|r$r" "$NODE" "$PER_ROUND" "$warm" "${steps[@]}"
			[[ $row == kube.* ]] && echo $(($(kube_requests) - q0)) $((PER_ROUND + warm)) \
				>>"$W/kreq.$row"
			node_clean 1 "$(row_nics "$row")"
		done
		((${#ROWS[@]})) || continue
		pairs_round "$r" "$warm"
		run "floor|true|r$r" "$NODE" "$PER_ROUND" "$warm" "$JOBS/floor-true"
		if [[ -x $KERNEL ]]; then
			ip netns exec "$NODE" "$KERNEL" nic0 "/run/netns/$(pod 0)" "$PER_ROUND" >>"$W/kern.rounds"
			node_clean 1
		fi
	done
}

# cpu_floor: disc and kern, the JSON of the RDMA discovery and of the kernel's
# part of the CPU floor.
cpu_floor() {
	local dn dus dfound qn qus qdcb
	# ADD's RDMA discovery alone (plan_rdma: netns mode, then the device behind
	# nic0), in the node netns: on this machine, the price of rdmaRequired:false.
	disc='{"skipped": "hpn-bench-discovery not built"}'
	if [[ -x $DISCOVERY ]]; then
		{
			read -r _ _ dn dus dfound
			read -r _ _ qn qus qdcb
		} < <(ip netns exec "$NODE" "$DISCOVERY" nic0 $((QUICK ? 50 : 5000)))
		# The second line: the RoCE QoS read a RoCE NIC's ADD adds (a veth: no DCB).
		disc=$(jq -cn --argjson n "$dn" --argjson us "$dus" --arg f "$dfound" \
			--arg ib "$([[ -d /sys/class/infiniband ]] && echo present || echo absent)" \
			--argjson qn "$qn" --argjson qus "$qus" --arg qdcb "$qdcb" \
			'{netdev: "nic0", iterations: $n, us_per_add: $us, rdma_device: $f,
			  sys_class_infiniband: $ib,
			  qos_read: {iterations: $qn, us_per_add: $qus, dcb: $qdcb}}')
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
}

# serial_json: $W/serial.json, a row's figures (or why it was skipped) each.
serial_json() {
	local row n med p99 mean cpu rss user
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
	done | jq -s . >"$W/serial.json"
}

# floor_json: floortrue, /bin/true's CPU between the serial rows' rounds: the
# floor's process start.
floor_json() {
	local n cpu
	floortrue=null
	read -r n _ _ _ cpu _ _ < <(stats "floor|true")
	if ((n > 0)); then
		floortrue=$(jq -cn --argjson n "$n" --argjson c "$cpu" '{runs: $n, cpu_ms: ($c / 1e3)}')
	fi
}
