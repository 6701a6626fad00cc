# shellcheck shell=bash
# A scenario of draslices.sh (sourced by it, run with its helpers): NICs pods
# share (--dra-shares, doc/dra.md) published into the API stand-in. The fake
# tree of lib.sh with the RDMA netns mode shared (module/ib_core's netns_mode
# Y) and GID tables: mlx5_0 (pool0) 16 entries, 4 of them pool0's own and 2 a
# child's, so 3 shares; mlx5_1 (pool1) 8 entries, 4 its own, 1 share; mlx5_2
# (pool2) none, pool3 no RDMA device: not shared.
#
# With --dra-shares: pool0 and pool1 each followed by its "-shared" device
# (capacity 3 and 1, the NIC's attributes and shared: true), both consuming
# the NIC's counter set, the sets in a slice of their own; kubectl reads
# both slices; the metrics count 2 shared devices. pool1's table grown by 4
# at a scan: capacity 2, written in place (no new generation). The netns
# mode exclusive at a scan: no NIC shared (said), shared again when back to
# shared. Restarted
# without the flag: the pool as before, one slice, no shared device. With
# the flag again against an API server whose DRAConsumableCapacity gate is
# off: the drop said once, the pool published without shared devices
# (the counter slice deleted), and then no write round after round.
# --dra-shares without --dra: refused (exit 2).

# share_tree: the netns mode and the GID tables, into the scenario's fake tree.
share_tree() {
	local s=$T/sysfs
	mkdir -p "$s/module/ib_core/parameters"
	echo Y >"$s/module/ib_core/parameters/netns_mode"
	share_gids mlx5_0 pool0 0 16
	share_gids mlx5_1 pool1 0 8
}

# share_gids IBDEV NETDEV FROM TO: GID entries FROM..TO-1 of IBDEV's port 1;
# from 0: the first 4 NETDEV's own, the next 2 a child's, the rest empty.
share_gids() {
	local p=$T/sysfs/class/infiniband/$1/ports/1 i
	mkdir -p "$p/gids" "$p/gid_attrs/ndevs"
	for ((i = $3; i < $4; i++)); do
		if ((i < 4)); then
			printf 'fe80:0000:0000:0000:0000:0000:0000:%04x\n' $((i + 1)) >"$p/gids/$i"
			echo "$2" >"$p/gid_attrs/ndevs/$i"
		elif ((i < 6)); then
			printf 'fe80:0000:0000:0000:0000:0000:0001:%04x\n' "$i" >"$p/gids/$i"
			echo "${2}m1" >"$p/gid_attrs/ndevs/$i"
		else
			echo 0000:0000:0000:0000:0000:0000:0000:0000 >"$p/gids/$i"
		fi
	done
}

# share_writes: the slice writes (PUT, POST) the stand-in answered 2xx so far.
share_writes() {
	awk '$2 ~ /resourceslices/ && ($6 == "PUT" || $6 == "POST") && $4 ~ /^2/' \
		"$KUBE_WORK/requests.log" | wc -l
}

SHARED_OF='[.[].spec.devices // [] | .[] | select(.name | endswith("-shared"))]'

shares() {
	local -a AGENT_FLAGS w
	local g f
	slices_api
	# mk_node, then the tree's shares, before the agent's first scan.
	eval "mk_node_plain() $(declare -f mk_node | tail -n +2)"
	mk_node() {
		mk_node_plain "$@"
		share_tree
	}
	AGENT_FLAGS+=(--dra-shares)
	node_up
	wait_slices 'length == 2' "two slices: the devices, the counter sets"
	jq_ok '[.[] | select(.spec.devices) | .spec.devices[].name] as $d |
		($d | index("pci-0000-af-00-0")) + 1 == ($d | index("pci-0000-af-00-0-shared")) and
		($d | index("pci-0000-af-00-1")) + 1 == ($d | index("pci-0000-af-00-1-shared")) and
		($d | length) == 6' "pool0 and pool1 each followed by its shared device, 6 devices" "$OUT"
	jq_ok "$SHARED_OF"' | map({name, c: .capacity.shares.value, m: .allowMultipleAllocations,
		s: .attributes.shared.bool, p: .capacity.shares.requestPolicy}) ==
		[{name: "pci-0000-af-00-0-shared", c: "3", m: true, s: true,
		  p: {default: "1", validValues: ["1"]}},
		 {name: "pci-0000-af-00-1-shared", c: "1", m: true, s: true,
		  p: {default: "1", validValues: ["1"]}}]' \
		"the shares from the GID tables: 3 and 1" "$OUT"
	jq_ok '[.[].spec.devices // [] | .[] | select(.name | startswith("pci-0000-af-00-0"))] |
		(.[0].attributes + {shared: {bool: true}}) == .[1].attributes and
		.[0].consumesCounters == .[1].consumesCounters and
		.[0].consumesCounters == [{counterSet: "pci-0000-af-00-0", counters: {nic: {value: "1"}}}]' \
		"pool0's shared device: its attributes, its counter set consumed by both" "$OUT"
	jq_ok '[.[] | select(.spec.sharedCounters) | .spec] as $c | ($c | length) == 1 and
		($c[0] | has("devices") | not) and
		[$c[0].sharedCounters[].name] == ["pci-0000-af-00-0", "pci-0000-af-00-1"] and
		all(.[]; .spec.pool.resourceSliceCount == 2)' \
		"the counter sets in a slice of their own, 2 slices in the pool" "$OUT"
	jq_ok '[.[].spec.devices // [] | .[] | select(.name | test("^pci-0000-af-00-2|^net-pool3")) |
		has("consumesCounters")] == [false, false]' "pool2 (no GID table), pool3 not shared" "$OUT"
	if kubectl_slices; then
		jq_ok '([.items[] | {n: .metadata.name, spec}] | sort_by(.n)) ==
			($a | map({n: .metadata.name, spec}) | sort_by(.n))' \
			"kubectl reads both slices as the stand-in holds them" "$OUT" --argjson a "$(slices)"
	fi
	wait_metric '^hpn_rdma_dra_shared_devices 2$' "2 shared devices in the metrics"
	wait_metric '^hpn_rdma_dra_shares_dropped 0$' "no drop in the metrics"
	# pool1's table grows at a scan: capacity 2, written in place.
	g=$(gen)
	share_gids mlx5_1 pool1 8 12
	wait_slices "$SHARED_OF"' | map(.capacity.shares.value) == ["3", "2"]' \
		"pool1's table grown: its capacity 2 at the next scan"
	jq_ok '[.[].spec.pool.generation] | unique == [$g]' "written in place, generation $g kept" \
		"$OUT" --argjson g "$g"
	# The RDMA netns mode exclusive (a pod's netns sees only what it was given): none shared.
	echo N >"$T/sysfs/module/ib_core/parameters/netns_mode"
	wait_slices "length == 1 and ($SHARED_OF | length) == 0" "netns mode exclusive: no shared device"
	wait_log "the node's RDMA netns mode is exclusive; no NIC is published shared" "exclusive said"
	echo Y >"$T/sysfs/module/ib_core/parameters/netns_mode"
	wait_slices "length == 2 and ($SHARED_OF | length) == 2" "netns mode shared again: shared again"
	g=$(gen)
	# Without the flag: as before.
	stop_agent
	w=("${AGENT_FLAGS[@]}")
	AGENT_FLAGS=()
	for f in "${w[@]}"; do
		[[ $f == --dra-shares ]] || AGENT_FLAGS+=("$f")
	done
	start_agent
	wait_slices "length == 1 and ($SHARED_OF | length) == 0 and
		([.[].spec.devices[] | select(has(\"consumesCounters\"))] | length) == 0 and
		.[0].spec.pool.generation > \$g" "without --dra-shares: one slice, no shared device" 15 \
		--argjson g "$g"
	jq_ok "$NAMES_OF == \$n" "the four NICs as before" "$OUT" --argjson n "$NAMES"
	# The API server's DRAConsumableCapacity off: the flag's shares dropped, said once.
	echo "DRAConsumableCapacity=false" >"$KUBE_WORK/mode.gates"
	stop_agent
	AGENT_FLAGS+=(--dra-shares)
	start_agent
	wait_log "the API server dropped the shared devices'" "the drop said"
	wait_metric '^hpn_rdma_dra_shares_dropped 1$' "the drop in the metrics"
	wait_slices "length == 1 and ($SHARED_OF | length) == 0" \
		"published without shared devices, the counter slice deleted" 15
	wait_more 'hpn_rdma_dra_slice_rounds_total{result="unchanged"}' 1 "a resync round"
	f=$(share_writes)
	wait_more 'hpn_rdma_dra_slice_rounds_total{result="unchanged"}' 2 "two more resync rounds"
	(($(share_writes) == f)) || fail "the dropped shares written again: $(($(share_writes) - f)) writes"
	wait_metric '^hpn_rdma_dra_shared_devices 0$' "no shared device in the API"
	(($(grep -c "dropped the shared devices'" "$T/agent.log") == 1)) ||
		fail "the drop said $(grep -c "dropped the shared devices'" "$T/agent.log") times, not once"
	node_down
	kube_stop
	f=0
	"$HPN_AGENT" --config /dev/null --dra-shares >"$T/out" 2>&1 || f=$?
	((f == 2)) && grep -q -- "--dra-shares needs --dra" "$T/out" ||
		fail "--dra-shares without --dra: exit $f, $(cat "$T/out")"
}
run "--dra-shares: RoCE NICs published shared too, as their GID tables allow; the API's drop" shares
