# shellcheck shell=bash
# The parallel rows of scripts/bench.sh: N pods at once, for each width N of
# BENCH_PAR: N ADDs started together, then N DELs, BENCH_PAR_REPS times; pods/s
# and the ratio to N = 1. Each hpn-rdma pod takes a free NIC from the pool
# (host-device pods name their own, nic<k>). Not the Kubernetes rows: a Python
# stand-in's concurrency is not kube-apiserver's; nor the 8-NIC pod rows
# (move8.*): N pods of 8 NICs would need 8N NICs; nor the DRA row (dra.sh:
# one pod's claim).

# parallel_of: the rows measured in parallel, one a line.
parallel_of() {
	local row
	for row in "${ROWS[@]}"; do
		if ! is_skipped "$row" && [[ $row != kube.* && $row != move8.* && $row != dra.* ]]; then
			echo "$row"
		fi
	done
}

# parallel_rows: every width, every row.
parallel_rows() {
	local n row rows steps
	mapfile -t rows < <(parallel_of)
	for n in $PAR; do
		for row in "${rows[@]}"; do
			mapfile -t steps < <(prepare "$row" "$n")
			run "par$n|$row" "$NODE" "$PAR_REPS" 1 "${steps[@]}"
			node_clean "$n"
		done
	done
}

# parallel_json: $W/par.json, a row and width's figures each.
parallel_json() {
	local n row rows reps med cpu
	mapfile -t rows < <(parallel_of)
	for n in $PAR; do
		for row in "${rows[@]}"; do
			read -r reps med _ _ cpu _ _ < <(stats "par$n|$row")
			jq -cn --arg r "$row" --argjson n "$n" --argjson reps "$reps" \
				--argjson med "$med" --argjson cpu "$cpu" \
				'{row: $r, pods: $n, reps: $reps, round_ms: ($med / 1e6),
				  pods_per_s: (if $med > 0 then $n / ($med / 1e9) else 0 end),
				  cpu_ms_per_pod: ($cpu / 1e3 / $n)}'
		done
	done | jq -s '[group_by(.row)[] | (map(select(.pods == 1))[0].pods_per_s) as $s |
		.[] | . + {vs_serial: (if $s then .pods_per_s / $s else null end)}]' >"$W/par.json"
}
