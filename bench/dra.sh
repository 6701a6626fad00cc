# shellcheck shell=bash
# The DRA rows of scripts/bench.sh (hpn-rdma-agent as a DRA driver, doc/dra.md).
# dra.none.hpn-dra is hpn-rdma's ADD+DEL (move, no IPAM) of a pod whose NIC
# a prepared ResourceClaim names: the plugin asks the agent by K8S_POD_UID and
# attaches the claim's NIC (pod 0 gets nic<MAXPAR-1>, which the pool would
# give it last; verify checks that it did); set against move.none.hpn-rdma
# (the pool) and move.none.hpn-agent (the device plugin's allocation). The
# driver is an agent of its own (the other rows' agent is left as it was)
# with --dra against the API stand-in of kube.sh, its kubelet stand-in, and a
# fake sysfs tree (test/netns/fakesys.sh) in which nic<k> is PCI function
# 0000:af:<k/8>.<k%8>, as a node's NICs are, and the claim's NIC has RDMA
# device mlx5_<k> (Prepare takes only NICs with one). The row's plugin reads
# the same tree without it, as the host kernel has no RDMA device: ADD
# attaches the netdev alone, as in every row here and in
# test/agent/draflow.sh. One RDMA device, not one per NIC: on a fake tree
# the agent matches every netdev against every RDMA device at each scan
# (sysfs; a node's agent asks RDMA netlink), a test-only cost that at 32 of
# each would be most of the row. Serial only, so not in the parallel rows.
# The driver publishes the pool as ResourceSlices, the claim is written with
# the device name they give, and the kubelet stand-in prepares it before
# the rows run.
# After the rows, through the same agent:
#   Prepare latency (hpn-kubelet dra-bench, v1): one claim read from the API
#     (a GET through TLS to the Python stand-in, the claim checked, its
#     record and CDI spec written), answered again from the record, and
#     Unprepare;
#   the slices published: the pool grown to DRA_POOL NICs (two slices of at
#     most 128 devices) and shrunk back, DRA_CHANGES times: the time from the
#     change (the links made or deleted) to the stand-in holding the new
#     generation (the agent's 200 ms debounce and its scan included), and the
#     agent's own rate from its metrics (slices written over the time its
#     written rounds took, list to last write).
# Skipped, saying why, without the agent, the stand-in or the API stand-in.

# shellcheck source=../test/netns/fakesys.sh
source "$SRC/test/netns/fakesys.sh"

DRA_DRIVER=hpn-rdma.alibabacloud.com
DRA_MPORT=19469 # the agent's metrics, on the node netns's loopback
DRA_POOL=240    # the pool's NICs while the slices are timed (the agent takes 256)

# dra_uid K, dra_pod_uid K, dra_args K: pod dra-K's claim, the pod, and the
# CNI_ARGS containerd passes for it (only pod 0 is measured: the row is serial).
dra_uid() { printf '6c1f0e2a-5b3d-4a7e-9f10-%012d' "$1"; }
dra_pod_uid() { printf '2d9b7c41-8e6f-4b2a-a153-%012d' "$1"; }
dra_args() {
	echo "IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=dra-$1;K8S_POD_UID=$(dra_pod_uid "$1")"
}

# dra_pci K: nic<K>'s PCI function in the fake tree.
dra_pci() { printf '0000:af:%02x.%d' $(($1 / 8)) $(($1 % 8)); }

# The NIC pod 0's claim names: the last, which the pool would give it last.
DRA_NIC=nic$((MAXPAR - 1))

# dra_skip WHY: the DRA row skipped, and the figures with it.
dra_skip() {
	DRA_WHY=$1
	if ((${#DROWS[@]})) && ! is_skipped dra.none.hpn-dra; then
		SKIPPED+=(dra.none.hpn-dra)
		SKIP_WHY[dra.none.hpn-dra]=$1
	fi
}

# dra_slices_now: the stand-in's slices of our driver, one JSON array.
dra_slices_now() {
	local f
	shopt -s nullglob
	f=("$KUBE_RESOURCES"/resourceslices/*.json)
	shopt -u nullglob
	if ((${#f[@]})); then
		jq -s --arg d "$DRA_DRIVER" '[.[] | select(.spec.driver == $d)]' "${f[@]}" 2>/dev/null ||
			echo '[]'
	else
		echo '[]'
	fi
}

# dra_wait_pool N [SECONDS]: the stand-in holds N devices of ours at one
# generation above DRA_GEN; DRA_GEN becomes it.
dra_wait_pool() {
	local i s
	for ((i = 0; i < ${2:-10} * 100; i++)); do
		s=$(dra_slices_now | jq --argjson n "$1" --argjson g "${DRA_GEN:-0}" '
			[.[].spec.pool.generation] as $gs | [.[].spec.devices[]] as $d |
			if ($gs | unique | length) == 1 and $gs[0] > $g and ($d | length) == $n
			then $gs[0] else empty end' 2>/dev/null) || s=
		if [[ -n $s ]]; then
			DRA_GEN=$s
			return 0
		fi
		sleep 0.01
	done
	return 1
}

# dra_agent: the driver's agent and its kubelet stand-in in the node netns
# (their pids in AGENT_PIDS, for cleanup), on the fake sysfs tree; 1 if
# either did not come up.
dra_agent() {
	local k i
	# The plugin's tree: the PCI functions; the agent's: with their RDMA devices.
	# The row's stateDir: another agent's journals name the same NICs by other
	# IDs (the real sysfs has no PCI functions), which this agent would keep
	# as devices vanished from the host.
	DRA_STATE=$STATE-dra
	mkdir -p "$DRA_STATE"
	DRA_SYSFS=$W/dra-sysfs
	DRA_KL=$W/dra-kl
	for ((k = 0; k < MAXPAR; k++)); do
		mk_fake_pci "$DRA_SYSFS" "$(dra_pci "$k")" "nic$k"
	done
	cp -a "$DRA_SYSFS" "$W/dra-agent-sysfs"
	k=${DRA_NIC#nic}
	mk_rdma "$W/dra-agent-sysfs" "$(dra_pci "$k")" "mlx5_$k" "uverbs$k"
	jq -cn --arg st "$DRA_STATE" --arg s "$W/dra-agent-sysfs" '{cniVersion: "1.0.0", name: "bench",
		plugins: [{type: "hpn-rdma", match: {devices: ["nic*"]}, rdmaRequired: false,
		stateDir: $st, sysfsRoot: $s}]}' >"$W/dra.conflist"
	echo '[]' >"$W/dra-pods.json"
	"$KUBELET" serve -dir "$DRA_KL" -out "$W/dra-kubelet.events" -pods "$W/dra-pods.json" \
		2>"$W/dra-kubelet.log" &
	AGENT_PIDS+=" $!"
	for ((i = 0; i < 100; i++)); do [[ -S $DRA_KL/device-plugins/kubelet.sock ]] && break; sleep 0.05; done
	KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$KUBE_PORT_good \
		ip netns exec "$NODE" "$AGENT" --config "$W/dra.conflist" --kubelet-dir "$DRA_KL" \
		--lookup-socket "$W/dra.sock" --cdi-dir "$W/dra-cdi" --cri-socket none \
		--kubeconfig "$W/dra.kubeconfig" --service-account "$KUBE_WORK/sa" \
		--node-name bench-node --dra --dra-driver "$DRA_DRIVER" \
		--metrics-address "127.0.0.1:$DRA_MPORT" 2>"$W/dra-agent.log" &
	AGENT_PIDS+=" $!"
	DRA_SOCK=$DRA_KL/plugins/$DRA_DRIVER/dra.sock
	for ((i = 0; i < 200; i++)); do [[ -S $DRA_SOCK ]] && return 0; sleep 0.05; done
	return 1
}

# dra_claims: after agent_start, the driver started, pod 0's claim made from
# its published slices and prepared; else the row is skipped, saying why.
dra_claims() {
	local slices out
	DRA_WHY=${DRA_WHY:-}
	((${#DROWS[@]})) || return 0
	[[ -n $DRA_WHY ]] && return 0
	if [[ ! -x $AGENT ]]; then
		dra_skip "hpn-rdma-agent not built ($AGENT)"
		return 0
	elif [[ ! -x $KUBELET ]]; then
		dra_skip "the kubelet stand-in not built ($KUBELET)"
		return 0
	fi
	dra_agent || {
		dra_skip "the DRA driver did not serve $DRA_SOCK: $(tail -n 3 "$W/dra-agent.log")"
		return 0
	}
	DRA_GEN=0
	dra_wait_pool "$(ip -n "$NODE" -o link show | grep -cE '^[0-9]+: nic[0-9]+@')" 20 || {
		dra_skip "the agent published no ResourceSlices: $(grep DRA "$W/dra-agent.log" | tail -n 3)"
		return 0
	}
	slices=$(dra_slices_now)
	DRA_DEV=$(jq -r --arg i "$DRA_NIC" '[.[].spec.devices[] |
		select(.attributes.interface.string == $i) | .name][0] // ""' <<<"$slices")
	[[ -n $DRA_DEV ]] || {
		dra_skip "no device of $DRA_NIC in the slices"
		return 0
	}
	DRA_MAC0=$(ip -n "$NODE" -j link show "$DRA_NIC" | jq -r '.[0].address')
	kube_claim bench dra-0 "$(dra_uid 0)" "$DRA_DRIVER" bench-node dra-0 "$(dra_pod_uid 0)" \
		"$DRA_DEV"
	out=$("$KUBELET" dra-prepare -socket "$DRA_SOCK" -version v1 "bench/dra-0/$(dra_uid 0)" 2>&1) &&
		jq -e 'all(.[]; .error == "" and (.devices | length) == 1)' <<<"$out" >/dev/null || {
		dra_skip "Prepare of the claim failed: $out"
		return 0
	}
}

# dra_verify: pod 0 holds its claim's NIC as hpn0 (its MAC), not the pool's first.
dra_verify() {
	local got
	got=$(ip -n "$(pod 0)" -j link show hpn0 | jq -r '.[0].address')
	[[ $got == "${DRA_MAC0:-}" ]] || {
		echo "bench.sh: dra.none.hpn-dra: hpn0 ($got) is not $DRA_NIC (${DRA_MAC0:-?}), the claim's NIC" >&2
		return 1
	}
}

# dra_latency: dra_lat, Prepare (from the API, from the record) and
# Unprepare, AG_ITER rounds of claim bench/dra-bench (the row's NIC, free by then).
dra_latency() {
	local uid=7a0d4e5f-3c2b-4d1a-8e9f-000000000001
	dra_lat=$(jq -cn --arg w "${DRA_WHY:-no DRA row selected (BENCH_ROWS)}" '{skipped: $w}')
	((${#DROWS[@]})) && [[ -z ${DRA_WHY:-} ]] || return 0
	kube_claim bench dra-bench "$uid" "$DRA_DRIVER" bench-node dra-bench \
		7a0d4e5f-3c2b-4d1a-8e9f-000000000002 "$DRA_DEV"
	if ! "$KUBELET" dra-bench -socket "$DRA_SOCK" -n "$AG_ITER" "bench/dra-bench/$uid" \
		>"$W/dra.lat" 2>"$W/dra.lat.err"; then
		dra_lat=$(jq -cn --arg w "hpn-kubelet dra-bench failed: $(head -c 300 "$W/dra.lat.err")" \
			'{failed: $w}')
		return 0
	fi
	dra_lat=$(latency_json "$W/dra.lat")
}

# dra_counters: the agent's slices written, their seconds and the rounds
# that wrote, from one scrape ("null" for one it lacks).
dra_counters() {
	ip netns exec "$NODE" curl -sf "http://127.0.0.1:$DRA_MPORT/metrics" | awk '
		$1 == "hpn_rdma_dra_slice_writes_total" { w = $2 }
		$1 == "hpn_rdma_dra_slice_write_seconds_total" { s = $2 }
		$1 == "hpn_rdma_dra_slice_rounds_total{result=\"written\"}" { r = $2 }
		END { print (w == "" ? "null" : w), (s == "" ? "null" : s), (r == "" ? "null" : r) }'
}

# dra_publish: dra_pub, the slices published as the pool grows to DRA_POOL
# NICs and shrinks back, DRA_CHANGES times each.
dra_publish() {
	local base extra j i step t0 t1 w0 s0 r0 w1 s1 r1
	local -a ms=()
	dra_pub=$(jq -cn --arg w "${DRA_WHY:-no DRA row selected (BENCH_ROWS)}" '{skipped: $w}')
	((${#DROWS[@]})) && [[ -z ${DRA_WHY:-} ]] || return 0
	base=$(dra_slices_now | jq '[.[].spec.devices[]] | length')
	extra=$((DRA_POOL - base))
	: >"$W/dra.grow"
	: >"$W/dra.shrink"
	for ((j = 0; j < extra; j++)); do
		echo "link add nicx$j type veth peer name peerx$j" >>"$W/dra.grow"
		echo "link del nicx$j" >>"$W/dra.shrink"
	done
	read -r w0 s0 r0 < <(dra_counters)
	for ((i = 0; i < DRA_CHANGES; i++)); do
		for step in grow:$DRA_POOL shrink:$base; do
			ip -n "$NODE" -batch "$W/dra.${step%%:*}"
			t0=$(date +%s%N)
			dra_wait_pool "${step#*:}" 20 || {
				dra_pub=$(jq -cn --arg s "$step" --argjson a "$(dra_slices_now | jq -c '{
					generations: [.[].spec.pool.generation], devices: ([.[].spec.devices[]] | length)}')" \
					--arg log "$(grep DRA "$W/dra-agent.log" | tail -n 2)" \
					'{failed: "the pool did not reach the API within 20 s (\($s)): the API holds \($a); the agent: \($log)"}')
				return 0
			}
			t1=$(date +%s%N)
			ms+=("${step%%:*} $(((t1 - t0) / 1000))")
		done
	done
	read -r w1 s1 r1 < <(dra_counters)
	[[ "$w0$s0$r0$w1$s1$r1" != *null* ]] || {
		dra_pub='{"failed": "the agent'"'"'s metrics lack the hpn_rdma_dra_slice families"}'
		return 0
	}
	dra_pub=$(printf '%s\n' "${ms[@]}" | jq -Rsc --argjson pool "$DRA_POOL" --argjson base "$base" \
		--argjson w "$((w1 - w0))" --argjson s "$(awk -v a="$s0" -v b="$s1" 'BEGIN { print b - a }')" \
		--argjson r "$((r1 - r0))" '
		def med: sort | .[(length / 2 | floor)];
		split("\n") | map(select(length > 0) | split(" ") | {k: .[0], ms: (.[1] | tonumber / 1000)}) |
		{pool_nics: $pool, base_nics: $base, changes: length,
		 grow_ms: (map(select(.k == "grow") | .ms) | {median: med, max: max}),
		 shrink_ms: (map(select(.k == "shrink") | .ms) | {median: med, max: max}),
		 rounds_written: $r, slices_written: $w, write_s: $s,
		 round_ms: (if $r > 0 then $s / $r * 1000 else null end),
		 slices_per_s: (if $s > 0 then $w / $s else null end)}')
}

# dra_json: dra, the DRA figures: Prepare latency, the slices, and the row
# against the pool and the device plugin's allocation.
dra_json() {
	dra=$(jq -cn --argjson lat "${dra_lat:-null}" --argjson pub "${dra_pub:-null}" \
		--arg w "${DRA_WHY:-}" --arg srv "test/kube/apiserver.py (Python, HTTPS, bearer token) on the node netns's loopback" \
		--argjson sel "${#DROWS[@]}" '
		if $w != "" then {skipped: $w} elif $sel == 0 then {skipped: "no DRA row selected (BENCH_ROWS)"}
		else {server: $srv, prepare: $lat, slices: $pub} end')
}
