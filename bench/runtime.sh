# shellcheck shell=bash
# The runtime rows of scripts/bench.sh: a pod's RunPodSandbox ->
# StopPodSandbox -> RemovePodSandbox wall time through a real containerd
# (each of BENCH_CTRDS, default "1.6 2.1": Debian 12's, forky's from the
# runtime tier's cache, each with Debian 12's runc, on a throwaway node of its
# own: test/runtime/node.sh; 2.x at CNI 1.1.0), with the network bridge alone (runtime.bridge),
# bridge + hpn-rdma in move mode without IPAM (runtime.hpn-rdma), and bridge +
# hpn-rdma passing the pod through (runtime.passthrough: its podSelector picks
# no pod), one pod of each in turn. containerd runs hpn-rdma three times per
# pod (ADD, the DEL of Stop, the DEL of Remove); the difference of the medians
# is what hpn-rdma adds to a pod's life (also shown: the median of the
# pod-by-pod differences), printed against the iproute2 floor of the same move
# (move.none.iproute2, also three processes, run once after each pair of
# pods, so that the same load falls on all three). Skipped, saying why,
# without containerd or hpn-cri. The first version's figures are .runtime,
# each other's one of .runtime.others.

# runtime_rows LABEL: make the node, measure, set $rt1 (JSON); the floor's
# runs are labelled LABEL. The node is removed by cleanup (rtn_cleanup)
# whatever happens.
runtime_rows() {
	local d=$W/rt-$RTN_CTRD row net r steps bridge pod id label=$1 cv=1.0.0
	[[ $RTN_CTRD != 2.* ]] || cv=1.1.0
	rtn_setup "$d"
	rtn_plugin "$PLUGIN"
	rtn_nic 0
	mkdir -p "$d/ipam"
	bridge=$(jq -cn --arg ipam "$d/ipam" '{type: "bridge", bridge: "hpnbbr0", isGateway: true,
		ipam: {type: "host-local", ranges: [[{subnet: "10.252.0.0/24"}]], dataDir: $ipam}}')
	local -A nets=(
		[runtime.bridge]=$(jq -cn --argjson b "$bridge" --arg v "$cv" \
			'{cniVersion: $v, name: "bench-bridge", plugins: [$b]}')
		[runtime.hpn-rdma]=$(jq -cn --argjson b "$bridge" --arg st "$STATE" --arg h "$HINTS" --arg v "$cv" \
			'{cniVersion: $v, name: "bench-hpn-rdma", plugins: [$b,
			  {type: "hpn-rdma", ifName: "hpn0", match: {devices: ["rnic*"]},
			   rdmaRequired: false, stateDir: $st, nccl: {dir: $h}}]}')
		[runtime.passthrough]=$(jq -cn --argjson b "$bridge" --arg st "$STATE" --arg h "$HINTS" --arg v "$cv" \
			'{cniVersion: $v, name: "bench-passthrough", plugins: [$b,
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
	: >"$d.raw"
	mapfile -t steps < <(prepare move.none.iproute2 1)
	for ((r = 0; r < RT_ITER; r++)); do
		for row in "${RT_ROWS[@]}"; do
			rtn_conflist "${nets[$row]}"
			rtn_wait_network "$(jq -r .name <<<"${nets[$row]}")"
			cri cycle -n 1 -w $((r == 0 ? 2 : 0)) "$pod" |
				awk -v row="$row" -v i="$r" '{ print row "\t" $1 "\t" $2 "\t" $3 "\t" i }' >>"$d.raw"
		done
		run "$label|move.none.iproute2|r$r" "$NODE" 1 $((r == 0 ? 2 : 0)) "${steps[@]}"
	done
	node_clean 1
	local rows=() med p99 n run stop rm
	for row in "${RT_ROWS[@]}"; do
		read -r n med p99 run stop rm < <(awk -F'\t' -v row="$row" '$1 == row' "$d.raw" |
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
		END { for (i in h) if (i in b) print h[i] - b[i] }' "$d.raw" | sort -n |
		awk '{ d[NR] = $1 } END { if (!NR) { print "null"; exit }
			printf "%.3f\n", (NR % 2 ? d[(NR + 1) / 2] : (d[NR / 2] + d[NR / 2 + 1]) / 2) / 1e6 }')
	rt1=$(printf '%s\n' "${rows[@]}" | jq -sc --arg v "$(cri version | jq -r .runtimeVersion)" \
		--argjson paired "$paired" --arg cv "$cv" --arg l "$label" \
		'{containerd: $v, cniVersion: $cv, rows: ., added_paired_ms: $paired, floor_label: $l}')
	rtn_containerd_stop TERM
}

# runtime_section: rt, the runtime rows' JSON (or why they were skipped).
runtime_section() {
	local rt_why
	mapfile -t RT_ROWS < <(selected runtime.bridge runtime.hpn-rdma runtime.passthrough)
	rt='{"skipped": "no runtime row selected (BENCH_ROWS)"}'
	if ((${#RT_ROWS[@]} == 0)); then
		return 0
	fi
	HPN_CRI=${HPN_CRI:-$SRC/build/test/runtime/hpn-cri}
	HPN_PAUSE_IMAGE=${HPN_PAUSE_IMAGE:-$SRC/build/test/runtime/pause-image.tar}
	RTN_PREFIX=${PFX}rt-
	fail() {
		echo "bench.sh: runtime rows: $*" >&2
		exit 1
	}
	# shellcheck source=../test/runtime/node.sh
	source "$SRC/test/runtime/node.sh"
	local v label=rtfloor rt1 others=()
	for v in ${BENCH_CTRDS:-1.6 2.1}; do
		rtn_use "$v"
		rt_why=$(rtn_why_not)
		if [[ -n $rt_why ]]; then
			rt1=$(jq -cn --arg w "containerd $v: $rt_why" '{skipped: $w}')
			echo "# runtime rows skipped: containerd $v: $rt_why"
		else
			runtime_rows "$label"
			rtn_cleanup
		fi
		if [[ $label == rtfloor ]]; then
			rt=$rt1
		else
			others+=("$rt1")
		fi
		label=rtfloor@$v
	done
	rt=$(printf '%s\n' "${others[@]}" | jq -sc --argjson rt "$rt" '$rt + {others: .}')
}

# runtime_floor_json: rtfloor, the iproute2 floor measured between the first
# version's runtime rows' rounds; each other version's added time against its
# own floor, in rt.others.
runtime_floor_json() {
	local n med i l f
	rtfloor=null
	if jq -e .rows <<<"$rt" >/dev/null; then
		read -r n med _ _ _ _ _ < <(stats "rtfloor|move.none.iproute2")
		if ((n > 0)); then
			rtfloor=$(jq -n --argjson m "$med" '$m / 1e6')
		fi
	fi
	for ((i = 0; i < $(jq '.others | length' <<<"$rt"); i++)); do
		l=$(jq -r --argjson i "$i" '.others[$i].floor_label // empty' <<<"$rt")
		[[ -n $l ]] || continue
		read -r n med _ _ _ _ _ < <(stats "$l|move.none.iproute2")
		f=null
		((n > 0)) && f=$(jq -n --argjson m "$med" '$m / 1e6')
		rt=$(jq -c --argjson i "$i" --argjson f "$f" '.others[$i] |= (
			(.rows | map({(.row): .wall_ms.median}) | add) as $m |
			(if $m["runtime.hpn-rdma"] and $m["runtime.bridge"]
			 then $m["runtime.hpn-rdma"] - $m["runtime.bridge"] else null end) as $a |
			. + {added_ms: $a, floor_ms: $f,
			     vs_floor: (if $a and $f and $f > 0 then $a / $f else null end)})' <<<"$rt")
	done
}
