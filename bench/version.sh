# shellcheck shell=bash
# The VERSION rows of scripts/bench.sh: the latency, CPU and RSS of a VERSION
# run of each plugin, plus the cost of starting any process (/bin/true), in
# BENCH_ROUNDS rounds; also hpn-rdma as it would be with libyaml, and libcurl
# + libyaml, linked instead of dlopen()ed (bench/CMakeLists.txt's
# hpn-rdma-linked-*: what every start would pay; rows left out if missing).
# hpn-rdma-status: a STATUS call of hpn-rdma with the node's pool (nic*) at
# CNI 1.1.0, which containerd 2.x runs at every CRI Status (kubelet asks
# every 5 s; doc/runtime.md).

# version_rows: VPLUGINS, and their runs.
version_rows() {
	local vdir=$JOBS/version p bin r
	VPLUGINS=(hpn-rdma hpn-rdma-status ${BASE:+hpn-base} host-device macvlan true)
	[[ -x $LINKED_YAML ]] && VPLUGINS+=(hpn-rdma-linked-yaml)
	[[ -x $LINKED_KUBE ]] && VPLUGINS+=(hpn-rdma-linked-curl-yaml)
	for p in "${VPLUGINS[@]}"; do
		case $p in
		hpn-rdma | hpn-rdma-status) bin=$PLUGIN ;;
		hpn-base) bin=$BASE ;;
		hpn-rdma-linked-yaml) bin=$LINKED_YAML ;;
		hpn-rdma-linked-curl-yaml) bin=$LINKED_KUBE ;;
		true) bin=$(type -P true) ;;
		*) bin=$CNI_BIN/$p ;;
		esac
		if [[ $p == hpn-rdma-status ]]; then
			cni_job "$vdir/$p/0" STATUS 0 "$(jq -cn --arg st "$STATE" --arg h "$HINTS" \
				'{cniVersion: "1.1.0", name: "bench", type: "hpn-rdma", ifName: "hpn0",
				  match: {devices: ["nic*"]}, rdmaRequired: false, stateDir: $st,
				  nccl: {dir: $h}}')" "$bin"
			continue
		fi
		cni_job "$vdir/$p/0" VERSION 0 '{"cniVersion":"1.0.0"}' "$bin"
	done
	for ((r = 0; r < ROUNDS; r++)); do
		for p in "${VPLUGINS[@]}"; do
			run "version|$p|r$r" "$NODE" $(((VITER + ROUNDS - 1) / ROUNDS)) 2 "$vdir/$p"
		done
	done
}

# version_json: $W/version.json, a plugin's figures each.
version_json() {
	local p n med p99 cpu rss user
	for p in "${VPLUGINS[@]}"; do
		read -r n med p99 _ cpu rss user < <(stats "version|$p")
		jq -cn --arg p "$p" --argjson n "$n" --argjson med "$med" --argjson p99 "$p99" \
			--argjson cpu "$cpu" --argjson rss "$rss" --argjson user "$user" \
			'{plugin: $p, runs: $n, wall_ms: {median: ($med / 1e6), p99: ($p99 / 1e6)},
			  cpu_ms: ($cpu / 1e3), user_cpu_ms: ($user / 1e3), peak_rss_kb: $rss}'
	done | jq -s . >"$W/version.json"
}
