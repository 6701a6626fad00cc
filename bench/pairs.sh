# shellcheck shell=bash
# The pairs of scripts/bench.sh: hpn-rdma's and host-device's move-mode
# ADD+DEL cycle by cycle (hpn-rdma ADD, DEL, host-device ADD, DEL in each rep
# of one runner), with and without static IPAM, in every round of the serial
# rows: what drifts between a row's reps and the next row's cancels in the
# pair. The move-mode wall target is judged on them.

# pairs_round ROUND WARMUP: the pairs of one round, for each variant that has
# both of its rows.
pairs_round() {
	local v steps
	for v in none static; do
		if has_row "move.$v.hpn-rdma" && has_row "move.$v.host-device"; then
			mapfile -t steps < <(prepare "move.$v.hpn-rdma" 1; prepare "move.$v.host-device" 1)
			run "pair|$v|r$1" "$NODE" "$PER_ROUND" "$2" "${steps[@]}"
			node_clean 1
		fi
	done
}

# pairs_json: pairs, per variant: per rep, the first two steps are hpn-rdma's
# ADD+DEL, the next two host-device's; the medians of each and of the
# difference, over every round.
pairs_json() {
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
}
