#!/usr/bin/env bash
# hpn-rdma-agent's device specs, against the kubelet stand-in hpn-kubelet as
# agent.sh runs it (its header; helpers in lib.sh): a fake node of veth NICs
# behind a fake sysfs tree with RDMA devices and their character devices.
#
# Scenarios: Allocate's DeviceSpecs, the RDMA character devices of exactly
# the allocated NICs (allocate_specs); Allocate with softRoce, a directory per
# container that ADD fills (allocate_soft); the CDI specs (cdi_specs: written
# at start, following a device's numbers, gone with the NIC or its device,
# stale ones removed, another writer's files at our names left and said once,
# a read-only directory said once, Allocate's cdi_devices); no spec at all
# when the hook cannot be named (cdi_no_hook: missing, back, empty); the
# pod's NCCL hints mounted through each NIC's spec (cdi_hints: the mount, the
# link a pod's ADD makes for it, nccl.confFile, hints off).
#
# HPN_AGENT_VALGRIND=1 (ctest memcheck.agent-cdi) runs the agent under
# valgrind's memcheck for the scenarios in HPN_AGENT_SCENARIOS (space-separated
# names of the functions below; default: all).
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t_init
agent_require
# Every spec names its createRuntime hook: the plugin binary (without one, no spec: cdi_no_hook).
# shellcheck disable=SC2034 # read by start_agent (lib.sh)
AGENT_FLAGS=(--cdi-hook "$HPN_PLUGIN")

# ---- scenarios --------------------------------------------------------------------

allocate_specs() {
	NODE_CONF=".agent.deviceDir = \"$T/devdir\"" node_up
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.0 0000:af:00.2,0000:af:00.1)
	jq_ok '.[0].devices == [
		{container: "/dev/infiniband/issm0", host: "/dev/infiniband/issm0", permissions: "rw"},
		{container: "/dev/infiniband/umad0", host: "/dev/infiniband/umad0", permissions: "rw"},
		{container: "/dev/infiniband/uverbs0", host: "/dev/infiniband/uverbs0", permissions: "rw"},
		{container: "/dev/infiniband/rdma_cm", host: "/dev/infiniband/rdma_cm", permissions: "rw"}]' \
		"container 1: exactly mlx5_0's character devices and rdma_cm"
	jq_ok '[.[1].devices[].host] == ["/dev/infiniband/uverbs2", "/dev/infiniband/uverbs1",
		"/dev/infiniband/rdma_cm"]' "container 2: exactly its two NICs' verbs devices, in order"
	jq_ok '.[1].envs == {HPN_RDMA_DEVICE_IDS: "0000:af:00.2,0000:af:00.1",
		HPN_RDMA_DEVICES: "mlx5_2,mlx5_1",
		HPN_RDMA_UVERBS: "/dev/infiniband/uverbs2,/dev/infiniband/uverbs1"}' \
		"envs name the devices"
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" pool3)
	jq_ok '.[0].devices == [] and .[0].envs.HPN_RDMA_DEVICE_IDS == "pool3"' \
		"a NIC without an RDMA device: no device nodes"
	# Without softRoce nothing is made at ADD: no directory for it.
	[[ ! -e $T/devdir ]] || fail "without softRoce Allocate made a device directory"
	if "$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.9 2>"$T/err"; then
		fail "Allocate of an unknown device succeeded"
	fi
	grep -q 'unknown device 0000:af:00.9' "$T/err" || fail "Allocate's refusal: $(cat "$T/err")"
	if "$HPN_KUBELET" allocate -socket "$(plugin_sock)" '../../x' 2>"$T/err"; then
		fail "Allocate of a path-like ID succeeded"
	fi
	node_down
}
run "Allocate: the RDMA character devices of exactly the allocated NICs" allocate_specs

# softRoce: a NIC's device is made at ADD, after Allocate; Allocate names a
# directory per container that ADD fills (the nodes themselves: vm7-hpn-shared.sh).
allocate_soft() {
	local d=$T/devdir
	NODE_CONF="del(.rdmaRequired) | .softRoce = true | .agent.deviceDir = \"$d\"" node_up nordma
	mkdir -p "$T/sysfs/class/misc/rdma_cm"
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.2,0000:af:00.1 pool3)
	jq_ok '.[0].devices == [
		{container: "/dev/infiniband", host: ($d + "/0000:af:00.1"), permissions: "rw"},
		{container: "/dev/infiniband/rdma_cm", host: "/dev/infiniband/rdma_cm", permissions: "rw"}]
		and .[0].envs.HPN_RDMA_DEVICE_IDS == "0000:af:00.2,0000:af:00.1"
		and .[0].envs.HPN_RDMA_DEVICES == ""' \
		"container 1: one directory for both NICs (the kubelet keeps one spec per path), rdma_cm" \
		"$OUT" --arg d "$d"
	jq_ok '[.[1].devices[].host] == [($d + "/pool3"), "/dev/infiniband/rdma_cm"]' \
		"container 2: its own directory" "$OUT" --arg d "$d"
	# ADD writes the made device's CDI spec into agent.cdiDir (which exists: the agent made it).
	jq_ok '.[0].cdi == ["alibabacloud.com/hpn-rdma=0000:af:00.2", "alibabacloud.com/hpn-rdma=0000:af:00.1"]
		and .[1].cdi == ["alibabacloud.com/hpn-rdma=pool3"]' \
		"softRoce: the CDI devices ADD's specs will define, in the request's order" "$OUT"
	[[ -z $(ls -A "$T/cdi") ]] || fail "the agent wrote CDI specs for NICs without a device: $(ls -A "$T/cdi")"
	[[ -d $d/0000:af:00.1 && ! -L $d/0000:af:00.1 && -z $(ls -A "$d/0000:af:00.1") ]] ||
		fail "the directory of container 1 is not an empty directory: $(ls -la "$d")"
	[[ $(readlink "$d/0000:af:00.2") == 0000:af:00.1 ]] ||
		fail "the second NIC of container 1 does not lead to its directory: $(ls -la "$d")"
	# A new allocation starts empty: what an earlier ADD made there is gone.
	mknod "$d/0000:af:00.1/uverbs9" c 231 201
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.2)
	jq_ok '[.[0].devices[].host] == [($d + "/0000:af:00.2"), "/dev/infiniband/rdma_cm"]' \
		"a NIC allocated alone gets a directory of its own" "$OUT" --arg d "$d"
	[[ -d $d/0000:af:00.2 && ! -L $d/0000:af:00.2 && -z $(ls -A "$d/0000:af:00.2") ]] ||
		fail "the link was not replaced by an empty directory: $(ls -la "$d")"
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.1)
	[[ -z $(ls -A "$d/0000:af:00.1") ]] || fail "an earlier ADD's node survived a new Allocate"
	node_down
}
run "Allocate with softRoce: a directory per container that ADD fills" allocate_soft

# CDI: the agent keeps a spec per pool NIC with an RDMA device in the
# entry's agent.cdiDir ($T/cdi, made by the agent), in step with the node;
# Allocate names their CDI devices beside today's DeviceSpecs.
CDI_KIND=alibabacloud.com/hpn-rdma
cdi_file() {
	echo "$T/cdi/alibabacloud.com-hpn-rdma_$1.json"
}

# cdi_ids: the IDs of the agent's spec files now, sorted, space-separated.
cdi_ids() {
	local f out=()
	for f in "$T"/cdi/alibabacloud.com-hpn-rdma_*.json; do
		[[ -e $f || -L $f ]] || continue
		f=${f##*/alibabacloud.com-hpn-rdma_}
		out+=("${f%.json}")
	done
	echo "${out[*]}"
}

# wait_cdi IDS WHAT: the agent's spec files become exactly IDS.
wait_cdi() {
	local i
	for ((i = 0; i < 100; i++)); do
		[[ $(cdi_ids) == "$1" ]] && return 0
		sleep 0.1
	done
	fail "$2: the agent's CDI specs are [$(cdi_ids)], not [$1]; agent log: $(tail -n 8 "$T/agent.log")"
}

# wait_minor ID MINOR: ID's spec names its uverbs node with MINOR.
wait_minor() {
	local i
	for ((i = 0; i < 100; i++)); do
		jq -e --argjson m "$2" '.devices[0].containerEdits.deviceNodes[0].minor == $m' \
			"$(cdi_file "$1")" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "the spec of $1 does not get minor $2: $(cat "$(cdi_file "$1")" 2>&1)"
}

# eRDMA (the OFED layout: rocep26s0 on its own PCI function beside the ENI's
# virtio-net eth1): the device is the ENI's function, its NUMA node the RDMA
# function's (the ENI's has none); Allocate and the CDI spec name the RDMA
# device's own uverbs node.
erdma_specs() {
	local spec
	rm -rf "$T/cdi"
	NODE_CONF='.match = {devices: ["eth*"]}' node_up erdma
	jq_ok '[.[] | [.id, .health, .numa]] == [["0000:00:05.0", "Healthy", [1]]]' \
		"ListAndWatch: the ENI's function, the eRDMA function's NUMA node" "$(last_list)"
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:00:05.0)
	jq_ok '[.[0].devices[].host] == ["/dev/infiniband/uverbs3", "/dev/infiniband/rdma_cm"]
		and .[0].envs == {HPN_RDMA_DEVICE_IDS: "0000:00:05.0", HPN_RDMA_DEVICES: "rocep26s0",
			HPN_RDMA_UVERBS: "/dev/infiniband/uverbs3"}
		and .[0].cdi == [$k + "=0000:00:05.0"]' "Allocate: rocep26s0's uverbs3" "$OUT" \
		--arg k "$CDI_KIND"
	wait_cdi "0000:00:05.0" "the eRDMA NIC's spec"
	spec=$(<"$(cdi_file 0000:00:05.0)")
	jq_ok '.devices[0].containerEdits.env == ["HPN_RDMA_DEVICE_0000_00_05_0=rocep26s0",
			"HPN_RDMA_UVERBS_0000_00_05_0=/dev/infiniband/uverbs3"]
		and [.devices[0].containerEdits.deviceNodes[] | [.path, .major, .minor]] ==
			[["/dev/infiniband/uverbs3", 231, 195], ["/dev/infiniband/rdma_cm", 10, 58]]' \
		"the CDI spec: rocep26s0's uverbs3 and rdma_cm" "$spec"
	node_down
}
run "eRDMA (OFED layout): the device plugin and the CDI spec find its own uverbs node" erdma_specs

cdi_specs() {
	local s=$T/sysfs spec n mode
	rm -rf "$T/cdi"
	node_up
	# Made at start, one per NIC with an RDMA device: not pool3.
	wait_cdi "0000:af:00.0 0000:af:00.1 0000:af:00.2" "the specs at start"
	spec=$(<"$(cdi_file 0000:af:00.0)")
	jq_ok '.cdiVersion == "0.5.0" and .kind == $k and (keys == ["cdiVersion", "devices", "kind"])
		and (.devices | length == 1) and .devices[0].name == "0000:af:00.0"
		and .devices[0].containerEdits.env == ["HPN_RDMA_DEVICE_0000_AF_00_0=mlx5_0",
			"HPN_RDMA_UVERBS_0000_AF_00_0=/dev/infiniband/uverbs0"]
		and [.devices[0].containerEdits.deviceNodes[] | [.path, .hostPath, .type, .major, .minor,
			.permissions]] == [
			["/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0", "c", 231, 192, "rw"],
			["/dev/infiniband/issm0", "/dev/infiniband/issm0", "c", 231, 64, "rw"],
			["/dev/infiniband/umad0", "/dev/infiniband/umad0", "c", 231, 0, "rw"],
			["/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm", "c", 10, 58, "rw"]]' \
		"mlx5_0's spec: uverbs0 first, umad0, issm0, rdma_cm, the kernel's numbers" "$spec" \
		--arg k "$CDI_KIND"
	mode=$(stat -c %a "$(cdi_file 0000:af:00.0)")
	[[ $mode == 644 ]] || fail "a spec's mode is $mode, not 644 (the agent's umask is 077)"
	[[ $(stat -c %a "$T/cdi") == 755 ]] || fail "the CDI directory the agent made is not 0755"
	n=$(find "$T/cdi" -mindepth 1 | wc -l)
	[[ $n == 3 ]] || fail "the CDI directory holds more than the three specs: $(ls -A "$T/cdi")"

	# Allocate names the CDI devices beside the DeviceSpecs, in the request's order.
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.0 0000:af:00.2,0000:af:00.1 pool3)
	jq_ok '.[0].cdi == [$k + "=0000:af:00.0"] and (.[0].devices | length) == 4
		and .[1].cdi == [$k + "=0000:af:00.2", $k + "=0000:af:00.1"]
		and [.[1].devices[].host] == ["/dev/infiniband/uverbs2", "/dev/infiniband/uverbs1",
			"/dev/infiniband/rdma_cm"]
		and .[2].cdi == [] and .[2].devices == []' \
		"Allocate: cdi_devices of the NICs with a spec, and the DeviceSpecs as before" "$OUT" \
		--arg k "$CDI_KIND"

	# The device's numbers change (hotplug, driver reload): the spec follows.
	echo "231:200" >"$s/class/infiniband_verbs/uverbs1/dev"
	wait_minor 0000:af:00.1 200
	# The RDMA device goes: its spec goes; it comes back: so does the spec.
	mv "$s/class/infiniband/mlx5_2" "$T/mlx5_2.away"
	wait_cdi "0000:af:00.0 0000:af:00.1" "mlx5_2 gone"
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.2)
	jq_ok '.[0].cdi == []' "Allocate of a NIC whose device is gone names no CDI device" "$OUT"
	mv "$T/mlx5_2.away" "$s/class/infiniband/mlx5_2"
	wait_cdi "0000:af:00.0 0000:af:00.1 0000:af:00.2" "mlx5_2 back"
	# The NIC goes, and comes back.
	ip -n "$HOST_NS" link del pool1
	wait_cdi "0000:af:00.0 0000:af:00.2" "pool1 removed"
	mk_nic "$HOST_NS" pool1 peer1
	wait_cdi "0000:af:00.0 0000:af:00.1 0000:af:00.2" "pool1 back"
	stop_agent

	# Another writer's files at the agent's names, a stale spec of its own, ADD's spec.
	jq -c '.devices[0].name = "pool9"' "$(cdi_file 0000:af:00.0)" >"$(cdi_file pool9)"
	cp "$(cdi_file 0000:af:00.0)" "$T/cdi/alibabacloud.com-hpn-rdma-pod_pool3.json"
	echo '{"cdiVersion":"0.5.0","kind":"example.com/nic","devices":[]}' >"$(cdi_file pool3)"
	rm "$(cdi_file 0000:af:00.2)"
	ln -s "$T/elsewhere.json" "$(cdi_file 0000:af:00.2)"
	echo "231:201" >"$s/class/infiniband_verbs/uverbs1/dev"
	SEEN=$(wc -l <"$EV")
	start_agent --metrics-address "127.0.0.1:$MPORT"
	wait_event '.event == "register"' "the restarted agent registers" 20
	wait_minor 0000:af:00.1 201
	wait_cdi "0000:af:00.0 0000:af:00.1 0000:af:00.2 pool3" "stale pool9 removed, the rest left"
	[[ -L $(cdi_file 0000:af:00.2) && ! -e $T/elsewhere.json ]] ||
		fail "the symlink at 0000:af:00.2's name was replaced or followed"
	jq_ok '.kind == "example.com/nic"' "the foreign spec at pool3's name is left" \
		"$(<"$(cdi_file pool3)")"
	[[ -f $T/cdi/alibabacloud.com-hpn-rdma-pod_pool3.json ]] || fail "the agent removed ADD's spec"
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.2)
	jq_ok '.[0].cdi == [] and [.[0].devices[].host] == ["/dev/infiniband/uverbs2",
		"/dev/infiniband/rdma_cm"]' "a NIC whose name holds a symlink: DeviceSpecs, no CDI" "$OUT"
	wait_more hpn_rdma_node_scans_total 2 "two more scans" # each cause said once all the same
	n=$(grep -c "alibabacloud.com-hpn-rdma_0000:af:00.2.json is a symbolic link, not hpn-rdma's: left as it is" "$T/agent.log" || true)
	[[ $n == 1 ]] || fail "the symlink was warned about $n times, not once: $(tail -n 5 "$T/agent.log")"
	n=$(grep -c "alibabacloud.com-hpn-rdma_pool3.json is a spec of kind \"example.com/nic\"" "$T/agent.log" || true)
	[[ $n == 1 ]] || fail "the foreign spec was warned about $n times, not once"
	rm "$(cdi_file 0000:af:00.2)" "$(cdi_file pool3)" "$T/cdi/alibabacloud.com-hpn-rdma-pod_pool3.json"
	wait_cdi "0000:af:00.0 0000:af:00.1 0000:af:00.2" "the symlink gone: the spec written"
	grep -q "CDI: 0000:af:00.2 is in order again" "$T/agent.log" || fail "no word of the repair"

	# A directory it cannot write (read-only, in the agent's mount namespace: ip netns
	# exec gave it its own): said once, the agent serves on, in step again once writable.
	nsenter -t "$AGENT_PID" -m -- mount --bind "$T/cdi" "$T/cdi"
	nsenter -t "$AGENT_PID" -m -- mount -o remount,ro,bind "$T/cdi" ||
		{ nsenter -t "$AGENT_PID" -m -- umount "$T/cdi"; fail "cannot make $T/cdi read-only"; }
	echo "231:202" >"$s/class/infiniband_verbs/uverbs1/dev"
	wait_more hpn_rdma_node_scans_total 2 "two scans with the directory read-only"
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.1) || OUT="Allocate failed"
	nsenter -t "$AGENT_PID" -m -- umount "$T/cdi"
	n=$(grep -c "the CDI spec directory $T/cdi is not writable: Read-only file system" "$T/agent.log" || true)
	[[ $n == 1 ]] || fail "a read-only CDI directory was said $n times, not once"
	jq_ok '.[0].cdi == [] and (.[0].devices | length) == 2' \
		"Allocate with a CDI directory it cannot write: DeviceSpecs, no CDI" "$OUT"
	wait_minor 0000:af:00.1 202
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.1)
	jq_ok '.[0].cdi == [$k + "=0000:af:00.1"]' "writable again: named again" "$OUT" --arg k "$CDI_KIND"
	stop_agent

	# --cdi-dir "": no specs written, none named; what is there stays.
	SEEN=$(wc -l <"$EV")
	start_agent --cdi-dir ""
	wait_event '.event == "register"' "the agent without CDI registers" 20
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.0)
	jq_ok '.[0].cdi == [] and (.[0].devices | length) == 4' "--cdi-dir '': no CDI devices" "$OUT"
	grep -q 'CDI: off' "$T/agent.log" || fail "the agent does not say CDI is off"
	"$HPN_AGENT" --help | grep -- '--cdi-dir DIR' >/dev/null || fail "--help does not show --cdi-dir"
	if "$HPN_AGENT" --config "$T/net.conflist" --cdi-dir rel/dir 2>"$T/err"; then
		fail "the agent took a relative --cdi-dir"
	fi
	grep -q -- '--cdi-dir must be absolute' "$T/err" || fail "--cdi-dir's refusal: $(cat "$T/err")"
	node_down
	rm -rf "$T/cdi"
}
run "CDI specs: in step with the node, stale ones removed, others' files left, Allocate names them" cdi_specs

# The hook every spec names, and none without it: a spec without its hook
# would give a NIC's RDMA device to any pod's container that names it.
cdi_no_hook() {
	local hook=$T/hook-bin/hpn-rdma n
	rm -rf "$T/cdi" "$T/hook-bin"
	node_up
	wait_cdi "0000:af:00.0 0000:af:00.1 0000:af:00.2" "the specs at start"
	jq_ok '.devices[0].containerEdits.hooks == [{hookName: "createRuntime", path: $p,
		args: ["hpn-rdma", "cdi-hook", "--state-dir", $s, "--network", $n, "0000:af:00.0"]}]' \
		"a NIC's spec names the hook" "$(<"$(cdi_file 0000:af:00.0)")" --arg p "$HPN_PLUGIN" \
		--arg s "$STATE" --arg n "$NET"
	stop_agent

	# The hook binary missing: the specs removed, none written, Allocate names none.
	SEEN=$(wc -l <"$EV")
	start_agent --cdi-hook "$hook" --metrics-address "127.0.0.1:$MPORT"
	wait_event '.event == "register"' "the agent without its hook binary registers" 20
	wait_cdi "" "the hook binary missing"
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.0)
	jq_ok '.[0].cdi == [] and (.[0].devices | length) == 4' \
		"Allocate without the hook binary: DeviceSpecs, no CDI device" "$OUT"
	grep -q "CDI: no specs (--cdi-hook $hook: No such file or directory)" "$T/agent.log" ||
		fail "the agent does not say it writes no spec: $(tail -n 5 "$T/agent.log")"
	wait_more hpn_rdma_node_scans_total 2 "two more scans"
	n=$(grep -c "CDI: no specs" "$T/agent.log" || true)
	[[ $n == 1 ]] || fail "the missing hook was said $n times, not once"
	# It appears (a package upgrade done): the specs follow at the next scan, naming it.
	mkdir -p "${hook%/*}"
	cp "$HPN_PLUGIN" "$hook"
	wait_cdi "0000:af:00.0 0000:af:00.1 0000:af:00.2" "the hook binary there again"
	jq_ok '.devices[0].containerEdits.hooks[0].path == $p' "the spec names it" \
		"$(<"$(cdi_file 0000:af:00.1)")" --arg p "$hook"
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.1)
	jq_ok '.[0].cdi == [$k + "=0000:af:00.1"]' "the hook there: named again" "$OUT" --arg k "$CDI_KIND"
	grep -q "CDI: the hook $hook is there again" "$T/agent.log" || fail "no word of the hook's return"
	stop_agent

	# --cdi-hook "": no hook, so no spec; said at start.
	SEEN=$(wc -l <"$EV")
	start_agent --cdi-hook ""
	wait_event '.event == "register"' "the agent with --cdi-hook '' registers" 20
	wait_cdi "" "--cdi-hook ''"
	OUT=$("$HPN_KUBELET" allocate -socket "$(plugin_sock)" 0000:af:00.2)
	jq_ok '.[0].cdi == []' "--cdi-hook '': no CDI device" "$OUT"
	grep -q "CDI: no specs (--cdi-hook is empty)" "$T/agent.log" || fail "--cdi-hook '' not said"
	node_down
	rm -rf "$T/cdi" "$T/hook-bin"
}
run "CDI specs: every one names the hook; none, and no CDI device, when it cannot be named" cdi_no_hook

# wait_spec ID FILTER WHAT: ID's spec matches FILTER within 10 s.
wait_spec() {
	local i
	for ((i = 0; i < 100; i++)); do
		jq -e "$2" "$(cdi_file "$1")" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "$3: the spec of $1 does not match '$2': $(jq -c '.devices[0].containerEdits.mounts' \
		"$(cdi_file "$1")" 2>&1); agent log: $(tail -n 5 "$T/agent.log")"
}

# The pod's NCCL hints with no hostPath in the pod: each NIC's spec mounts
# <nccl.dir>/nic/<ID>/nccl.conf read-only at nccl.confFile, which the ADD of
# the pod the kubelet gave the NIC links to that pod's own file; the mount
# follows nccl.confFile and goes with nccl.enabled false (a reload, a start).
cdi_hints() {
	local spec conf host psys=$T/psys-$SCEN uid=6f1c2d9e-0b7a-4c3e-9d55-2a61f0c4b1aa id
	rm -rf "$T/cdi"
	node_up
	wait_cdi "0000:af:00.0 0000:af:00.1 0000:af:00.2" "the specs at start"
	for id in 0000:af:00.0 0000:af:00.1 0000:af:00.2; do
		jq_ok '.devices[0].containerEdits.mounts == [{hostPath: ($p + "/nic/" + $id + "/nccl.conf"),
			containerPath: "/etc/nccl.conf", options: ["ro", "nosuid", "nodev", "noexec", "bind"],
			type: "bind"}]' "$id's spec mounts the hints of the pod that holds it, read-only" \
			"$(<"$(cdi_file "$id")")" --arg p "$PODS" --arg id "$id"
	done
	spec=$(<"$(cdi_file 0000:af:00.1)")
	host=$(jq -r '.devices[0].containerEdits.mounts[0].hostPath' <<<"$spec")

	# The kubelet gives pod ns1/trainer pool1: its ADD links the spec's hostPath to its file.
	# The plugin reads a tree without the fake RDMA devices (no kernel here proves them).
	cp -a "$T/sysfs" "$psys"
	find "$psys" -depth -name infiniband -exec rm -rf {} +
	echo '[{"namespace":"ns1","name":"trainer","containers":[{"name":"main","devices":[
		{"resource":"rdma/hpn","ids":["0000:af:00.1"]}]}]}]' >"$T/pods.json"
	conf=$(agent_net_conf | jq -c --arg p "$psys" '.sysfsRoot = $p')
	[[ ! -e $host ]] || fail "$host resolves before any pod holds the NIC"
	run_plugin ADD "$conf" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer;K8S_POD_UID=$uid"
	expect_result "ADD of the pod the kubelet gave pool1"
	has_link "$HOST_NS" pool1 && fail "pool1, the allocated NIC, is still on the host"
	[[ -f $host ]] && cmp -s "$host" "$PODS/$uid/nccl.conf" ||
		fail "the spec's hostPath $host is not the pod's hints file $PODS/$uid/nccl.conf"
	run_plugin DEL "$(with_prev "$conf" "$OUT")" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer;K8S_POD_UID=$uid"
	expect_ok "DEL"
	[[ ! -e $host && ! -L $PODS/nic/0000:af:00.1 ]] || fail "DEL left the link of pool1"

	# nccl.confFile: the mount goes there; hints off: no mount (config reloads).
	write_conflist '.nccl.confFile = "/etc/hpn-rdma/nccl.conf"'
	wait_spec 0000:af:00.1 '.devices[0].containerEdits.mounts[0].containerPath == "/etc/hpn-rdma/nccl.conf"' \
		"nccl.confFile reloaded"
	write_conflist '.nccl.enabled = false'
	wait_spec 0000:af:00.1 '.devices[0].containerEdits | has("mounts") | not' "nccl.enabled false reloaded"
	stop_agent

	# Started with hints off: no mount in any spec.
	rm -rf "$T/cdi"
	SEEN=$(wc -l <"$EV")
	start_agent
	wait_event '.event == "register"' "the agent with hints off registers" 20
	wait_cdi "0000:af:00.0 0000:af:00.1 0000:af:00.2" "the specs with hints off"
	for id in 0000:af:00.0 0000:af:00.1 0000:af:00.2; do
		jq_ok '.devices[0].containerEdits | has("mounts") | not' "hints off: $id's spec mounts nothing" \
			"$(<"$(cdi_file "$id")")"
	done
	node_down
	rm -rf "$T/cdi" "$psys"
}
run "CDI specs: the hints of the pod that holds the NIC, read-only, through its ADD's link" cdi_hints

t_done
