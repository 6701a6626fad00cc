# shellcheck shell=bash
# The GPU-aware NIC choice row of scripts/bench.sh: on each node of
# test/fixtures/gpu-nodes (built by its mknode.sh into the scratch dir), the
# share of a pod's GPUs that get a NIC behind their own PCIe switches (PIX or
# PXB) with hpn_gpu_assign and with today's first match (the first n free NICs
# in name order), over every 1-, 2-, 4- and 8-GPU pod (hpn-bench-gpu-choice,
# bench/gpu-choice.c). No namespaces, no timing that matters: a fraction of
# GPUs, and the microseconds hpn_gpu_assign took a pod.

# gpu_choice: gpu, the row's JSON (or why it was skipped).
gpu_choice() {
	local nodes=$SRC/test/fixtures/gpu-nodes n args=()
	gpu='{"skipped": "hpn-bench-gpu-choice not built"}'
	[[ -x $GPU_CHOICE ]] || return 0
	for n in hgx-h100 a800-1nic vm-flat vm-erdma; do
		"$nodes/mknode.sh" "$n" "$W/gpu-nodes/$n"
		args+=("$n=$W/gpu-nodes/$n")
	done
	gpu=$("$GPU_CHOICE" --tsv "${args[@]}" | jq -Rsc '
		split("\n") | map(select(length > 0) | split("\t")) |
		map({node: .[0], gpus_per_pod: (.[1] | tonumber), pods: (.[2] | tonumber),
		     gpus: (.[3] | tonumber), near_gpu_aware: (.[4] | tonumber),
		     near_first_match: (.[5] | tonumber), assign_us: (.[6] | tonumber),
		     numa_gpu_aware: (.[7] | tonumber), numa_first_match: (.[8] | tonumber)}) |
		{rows: ., overall: {gpus: (map(.gpus) | add),
			near_gpu_aware: (map(.near_gpu_aware) | add),
			near_first_match: (map(.near_first_match) | add),
			numa_gpu_aware: (map(.numa_gpu_aware) | add),
			numa_first_match: (map(.numa_first_match) | add),
			assign_us_per_pod: ((map(.assign_us) | add) / (map(.pods) | add))}}')
}
