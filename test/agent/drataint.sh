#!/usr/bin/env bash
# An unhealthy NIC in the DRA driver's ResourceSlices (doc/dra.md, "Taints"):
# it stays, with the taint <driver>/unhealthy, as root in throwaway
# namespaces with the fake node of lib.sh (pool0..pool2 PCI functions with
# RDMA devices mlx5_0..mlx5_2, pool3 a plain veth) and the API stand-in of
# test/kube.
#
# Scenarios: an RDMA port DOWN (the taint NoSchedule PortDown with
# timeAdded, one slice written, the generation kept, kubectl reading it,
# nothing written again while it lasts, the time kept across an agent
# restart), up again (the taint gone, one write, the generation kept), an
# RDMA device vanished (RDMADeviceGone), the NIC removed (gone from the
# slice, a new generation); --dra-taint-effect NoExecute and None, a bad
# one refused; an API server with DRADeviceTaints off (the taint dropped,
# said once, written once, not again every round); a pod's NIC whose
# attachment the health loop finds broken (AttachmentBroken).
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# shellcheck source=dralib.sh
source "$(dirname "${BASH_SOURCE[0]}")/dralib.sh"

dra_init

# The resync, shortened: a round every second shows whether a taint is written again.
export HPN_DRA_RESYNC_MS=1000

PCI0=devices/pci0000:ae/0000:ae:00.0
DEV0=pci-0000-af-00-0
KEY=$DRV/unhealthy

# port STATE: mlx5_0's port 1 state in the fake sysfs tree ("1: DOWN", "4: ACTIVE").
port() {
	echo "$1" >"$T/sysfs/$PCI0/0000:af:00.0/infiniband/mlx5_0/ports/1/state"
}

# writes: the slice writes (PUT, POST) the stand-in answered 2xx so far.
writes() {
	awk '$2 ~ /resourceslices/ && ($6 == "PUT" || $6 == "POST") && $4 ~ /^2/' \
		"$KUBE_WORK/requests.log" | wc -l
}

# taint_of DEVICE: the device's taints in the slices, compact JSON (null: none).
taint_of() {
	jq -c --arg d "$1" '[.[].spec.devices[] | select(.name == $d)][0].taints' <<<"$(slices)"
}

# settle: two resyncs (and a scan) pass, so a round that would write has written.
settle() {
	wait_more 'hpn_rdma_dra_slice_rounds_total{result="unchanged"}' 2 "two resync rounds"
}

taint_start() {
	dra_api
	AGENT_FLAGS+=("$@")
	node_up
	wait_slices 'length == 1 and ([.[0].spec.devices[].name] | length) == 4' \
		"one ResourceSlice of the four NICs after start"
}

# An RDMA port DOWN: the NIC stays, tainted, in one write at the same generation.
port_down() {
	local -a AGENT_FLAGS
	local g w t0 t now
	taint_start
	settle
	g=$(gen)
	w=$(writes)
	port "1: DOWN"
	wait_slices '[.[].spec.devices[] | select(.name == $d)][0].taints != null' \
		"mlx5_0's port DOWN: pool0 tainted" 10 --arg d "$DEV0"
	jq_ok '[.[].spec.devices[] | select(.name == $d)][0].taints as $t |
		($t | length) == 1 and $t[0].key == $k and $t[0].value == "PortDown" and
		$t[0].effect == "NoSchedule" and ($t[0].timeAdded | test("^[0-9-]{10}T[0-9:]{8}Z$"))' \
		"the taint: <driver>/unhealthy, PortDown, NoSchedule, an RFC 3339 timeAdded" "$OUT" \
		--arg d "$DEV0" --arg k "$KEY"
	now=$(date +%s)
	t0=$(taint_of "$DEV0" | jq -r '.[0].timeAdded')
	t=$(date -ud "$t0" +%s)
	((t <= now && t >= now - 5)) || fail "timeAdded $t0 is not when the port went down ($now)"
	jq_ok '([.[].spec.devices[].name] | length) == 4 and .[0].spec.pool.generation == $g' \
		"every NIC still in the slice, the generation kept ($g)" "$OUT" --argjson g "$g"
	(($(writes) == w + 1)) || fail "the taint took $(($(writes) - w)) slice writes, not 1"
	info "measured: port DOWN -> $(($(writes) - w)) slice write(s), generation $g -> $(gen)"
	wait_metric '^hpn_rdma_dra_tainted_devices 1$' "one tainted device in the metrics"
	grep -q "wrote 1 of the 1 ResourceSlice(s) of pool node1 over, generation $g kept" \
		"$T/agent.log" || fail "the write in place not logged: $(tail -n 5 "$T/agent.log")"
	if kubectl_slices; then
		jq_ok '[.items[].spec.devices[] | select(.name == $d)][0].taints[0] |
			.key == $k and .value == "PortDown" and .timeAdded == $t' \
			"kubectl reads the taint" "$OUT" --arg d "$DEV0" --arg k "$KEY" --arg t "$t0"
	fi
	# The kubelet's device plugin side: Unhealthy, as before.
	wait_event '.event == "list" and (.devices[0].health == "Unhealthy")' \
		"pool0 Unhealthy to the device plugin"
	# While it lasts, the rounds write nothing: the taint and its time are kept.
	w=$(writes)
	settle
	(($(writes) == w)) || fail "the taint written again by the resync: $(($(writes) - w)) writes"
	[[ $(taint_of "$DEV0" | jq -r '.[0].timeAdded') == "$t0" ]] || fail "timeAdded moved"
	# A restart while it lasts: the API's timeAdded kept, nothing written.
	stop_agent
	sleep 1.1
	start_agent
	wait_event '.event == "list"' "the restarted agent lists"
	settle
	(($(writes) == w)) || fail "the restarted agent wrote $(($(writes) - w)) slices"
	[[ $(taint_of "$DEV0" | jq -r '.[0].timeAdded') == "$t0" ]] ||
		fail "timeAdded moved across a restart: $t0, now $(taint_of "$DEV0")"
	# Up again: the taint gone, one write, the generation kept.
	port "4: ACTIVE"
	wait_slices '[.[].spec.devices[] | select(.name == $d)][0].taints == null' \
		"mlx5_0's port ACTIVE: the taint gone" 10 --arg d "$DEV0"
	jq_ok '.[0].spec.pool.generation == $g' "the generation kept ($g)" "$OUT" --argjson g "$g"
	(($(writes) == w + 1)) || fail "the recovery took $(($(writes) - w)) slice writes, not 1"
	info "measured: port ACTIVE -> $(($(writes) - w)) slice write(s), generation $g -> $(gen)"
	wait_metric '^hpn_rdma_dra_tainted_devices 0$' "no tainted device in the metrics"
	# Its RDMA device vanished, the netdev there: tainted RDMADeviceGone, still one write.
	w=$(writes)
	rm -rf "$T/sysfs/$PCI0/0000:af:00.2/infiniband" "$T/sysfs/class/infiniband/mlx5_2"
	wait_slices '[.[].spec.devices[] | select(.name == "pci-0000-af-00-2")][0].taints[0].value ==
		"RDMADeviceGone"' "mlx5_2 vanished: pool2 tainted RDMADeviceGone"
	jq_ok '.[0].spec.pool.generation == $g' "the generation kept ($g)" "$OUT" --argjson g "$g"
	(($(writes) == w + 1)) || fail "RDMADeviceGone took $(($(writes) - w)) writes, not 1"
	# The NIC removed: it leaves the slice, a new generation.
	ip -n "$HOST_NS" link del pool1
	wait_slices '([.[].spec.devices[].name] | index("pci-0000-af-00-1")) == null' \
		"pool1 removed: gone from the slice"
	jq_ok '.[0].spec.pool.generation == $g + 1' "a new generation for a device gone" "$OUT" \
		--argjson g "$g"
	node_down
	kube_stop
}
run "an RDMA port down and up, an RDMA device gone, a NIC removed" port_down

# --dra-taint-effect E: the taint's effect E; a bad one refused (exit 2, said).
effect() {
	local -a AGENT_FLAGS
	local rc=0
	taint_start --dra-taint-effect "$1"
	port "1: DOWN"
	wait_slices '[.[].spec.devices[] | select(.name == $d)][0].taints[0].effect == $e' \
		"--dra-taint-effect $1" 10 --arg d "$DEV0" --arg e "$1"
	node_down
	kube_stop
	"$HPN_AGENT" --config /dev/null --dra-taint-effect PreferNoSchedule \
		>"$T/out" 2>&1 || rc=$?
	((rc == 2)) && grep -q "dra-taint-effect is NoSchedule, NoExecute or None" "$T/out" ||
		fail "--dra-taint-effect PreferNoSchedule: exit $rc, $(cat "$T/out")"
}
run "--dra-taint-effect NoExecute (PreferNoSchedule refused)" effect NoExecute
run "--dra-taint-effect None (PreferNoSchedule refused)" effect None

# An API server with DRADeviceTaints off (before 1.36): the taint dropped, said
# once; the slice written once, not again every round (no churn).
gate_off() {
	local -a AGENT_FLAGS
	local w
	taint_start
	echo "DRADeviceTaints=false" >"$KUBE_WORK/mode.gates"
	settle
	w=$(writes)
	port "1: DOWN"
	wait_log "the API server dropped the device taints" "the drop said"
	wait_metric '^hpn_rdma_dra_taints_dropped 1$' "the drop in the metrics"
	[[ $(taint_of "$DEV0") == null ]] || fail "the stand-in kept the taint: $(taint_of "$DEV0")"
	settle
	settle
	(($(writes) == w + 1)) || fail "taints dropped: $(($(writes) - w)) writes, not 1"
	wait_metric '^hpn_rdma_dra_tainted_devices 0$' "no tainted device in the API"
	(($(grep -c "dropped the device taints" "$T/agent.log") == 1)) ||
		fail "the drop said more than once: $(grep -c "dropped the device taints" "$T/agent.log")"
	# The gate on again (an upgraded API server): the next change writes them.
	rm -f "$KUBE_WORK/mode.gates"
	rm -rf "$T/sysfs/$PCI0/0000:af:00.2/infiniband" "$T/sysfs/class/infiniband/mlx5_2"
	wait_slices '[.[].spec.devices[] | select(.name == $d)][0].taints[0].value == "PortDown"' \
		"the taints published once the API keeps them" 10 --arg d "$DEV0"
	wait_metric '^hpn_rdma_dra_taints_dropped 0$' "the drop over in the metrics"
	node_down
	kube_stop
}
run "DRADeviceTaints off: dropped, said once, no write every round" gate_off

# A pod's NIC (ADD moves pool1 into it) whose attachment the health loop
# finds broken (the pod's hpn0 MTU changed): tainted AttachmentBroken while
# it is, at the same generation.
broken() {
	local -a AGENT_FLAGS
	local g ns
	taint_start --health-interval 1
	plugin_conf 'del(.match) | .device = "pool1"'
	run_plugin ADD "$CONF"
	expect_result "ADD of pool1"
	settle
	g=$(gen)
	ns=$POD_NS
	ip -n "$ns" link set hpn0 mtu 1400
	wait_slices '[.[].spec.devices[] | select(.name == "pci-0000-af-00-1")][0].taints[0].value ==
		"AttachmentBroken"' "pool1's attachment broken: tainted AttachmentBroken" 15
	jq_ok '.[0].spec.pool.generation == $g' "the generation kept ($g)" "$OUT" --argjson g "$g"
	ip -n "$ns" link set hpn0 mtu 1500
	wait_slices '[.[].spec.devices[] | select(.name == "pci-0000-af-00-1")][0].taints == null' \
		"pool1's attachment whole again: the taint gone" 15
	run_plugin DEL "$CONF"
	expect_ok "DEL of pool1"
	node_down
	kube_stop
}
run "a pod's NIC whose attachment breaks: tainted AttachmentBroken" broken

t_done
