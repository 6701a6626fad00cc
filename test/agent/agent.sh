#!/usr/bin/env bash
# hpn-rdma-agent against a kubelet stand-in (hpn-kubelet: real gRPC, see its
# header), as root in throwaway namespaces (test/netns/lib.sh): veth NICs
# behind a fake sysfs tree that gives them PCI addresses, NUMA nodes and RDMA
# devices with character devices. The agent runs in the scenario's host
# netns; the stand-in's sockets live under $T/kl (a kubelet dir of its own).
#
# Scenarios: registration and the devices with their NUMA nodes; Allocate's
# specs; GetPreferredAllocation; a NIC removed and put back, an RDMA port
# DOWN and up; the kubelet restarted (socket dir swept, re-registration);
# the agent restarted (same IDs, sockets removed at SIGTERM); the CNI
# attaching exactly the allocated NICs in their order; an allocated NIC
# already held refused; the CDI specs (written at start, following a
# device's numbers, gone with the NIC or its device, stale ones removed,
# another writer's files at our names left and said once, a read-only
# directory said once, Allocate's cdi_devices); the pod's GPUs in the lookup's reply (nvidia.com/gpu
# IDs and gpu.nvidia.com DRA devices, in order, once each; the flags that
# turn them off); the DRA driver's kubelet side (registration for both
# versions, a refusal and a wiped registry, Prepare and Unprepare through v1
# and v1beta1 with the claims in the API stand-in of test/kube, the CDI spec
# and record of a claim, a second Prepare with no API request, the agent
# restarted with the API down, hostile claims, a NIC another pod holds); a PodResources List slower than the lookup's budget (the
# CNI told so, the agent serving on); no agent -> the pool (and
# agent.required).
#
# HPN_AGENT_VALGRIND=1 (ctest memcheck.agent) runs the agent under valgrind's
# memcheck for the scenarios in HPN_AGENT_SCENARIOS (space-separated names
# of the functions below; default: all).
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t_init
[[ -n ${HPN_AGENT_WHY:-} ]] && skip "$HPN_AGENT_WHY"
[[ -x ${HPN_AGENT:-} ]] || skip "hpn-rdma-agent was not built"
[[ -x ${HPN_KUBELET:-} ]] || skip "${HPN_KUBELET_WHY:-the kubelet stand-in hpn-kubelet was not built}"

ALL_IDS='["0000:af:00.0","0000:af:00.1","0000:af:00.2","pool3"]'

# ---- scenarios --------------------------------------------------------------------

registration() {
	local mode
	node_up
	jq_ok '.version == "v1beta1" and .resource == "rdma/hpn" and .endpoint == "hpn-rdma.sock"
		and .preferred' "RegisterRequest" "$(jq -c 'select(.event == "register")' "$EV")"
	jq_ok '.preferred and (.preStart | not)' "GetDevicePluginOptions" \
		"$(jq -c 'select(.event == "options")' "$EV")"
	jq_ok '[.[].id] == $ids and all(.health == "Healthy")' \
		"one device per pool NIC, PCI address or name" "$(last_list)" --argjson ids "$ALL_IDS"
	jq_ok '[.[].numa] == [[0],[1],[1],[]]' "TopologyInfo: the NICs' NUMA nodes" "$(last_list)"
	# Root only: the sockets are 0600, the agent's directory 0700.
	mode=$(stat -c %a "$(plugin_sock)")
	[[ $mode == 600 ]] || fail "device plugin socket mode $mode, not 600"
	mode=$(stat -c %a "$T/agent.sock")
	[[ $mode == 600 ]] || fail "lookup socket mode $mode, not 600"
	# Requests are validated like stdin JSON: a path in a pod name, a stranger version.
	for req in '{"version":1,"namespace":"../x","name":"p"}' '{"version":7,"namespace":"a","name":"p"}' \
		'not json'; do
		OUT=$(lookup_raw "$req")
		jq_ok '.version == 1 and (.error | type == "string") and (has("devices") | not)' \
			"the agent refuses the request $req" "$OUT"
	done
	OUT=$(lookup_raw '{"version":1,"namespace":"a","name":"p"}')
	jq_ok '. == {version: 1, resource: "rdma/hpn", podKnown: false, devices: [], gpus: []}' \
		"a pod the kubelet does not list holds nothing"
	node_down
}
run "registration, devices, NUMA topology, socket modes" registration

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
	start_agent
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
	sleep 2.5	# scans every second: each cause said once all the same
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
	sleep 2.5
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
	"$HPN_AGENT" --help | grep -q -- '--cdi-dir DIR' || fail "--help does not show --cdi-dir"
	if "$HPN_AGENT" --config "$T/net.conflist" --cdi-dir rel/dir 2>"$T/err"; then
		fail "the agent took a relative --cdi-dir"
	fi
	grep -q -- '--cdi-dir must be absolute' "$T/err" || fail "--cdi-dir's refusal: $(cat "$T/err")"
	node_down
	rm -rf "$T/cdi"
}
run "CDI specs: in step with the node, stale ones removed, others' files left, Allocate names them" cdi_specs

preferred() {
	local all=0000:af:00.0,0000:af:00.1,0000:af:00.2,pool3 conf
	node_up plain	# an ADD holds a NIC below: no fake RDMA device for its proof
	OUT=$("$HPN_KUBELET" prefer -socket "$(plugin_sock)" -available "$all" -size 2)
	jq_ok '. == ["0000:af:00.1","0000:af:00.2"]' "two NICs: the NUMA node that has two"
	OUT=$("$HPN_KUBELET" prefer -socket "$(plugin_sock)" -available "$all" \
		-must 0000:af:00.2 -size 2)
	jq_ok '. == ["0000:af:00.2","0000:af:00.1"]' "must_include first, then its NUMA node"
	# A journal holds pool1 (0000:af:00.1): a CNI ADD from the pool took it.
	conf=$(agent_net_conf '.agent.lookup = false')
	run_plugin ADD "$(jq -c '.match.devices = ["pool1"]' <<<"$conf")"
	expect_result "ADD holding pool1"
	OUT=$("$HPN_KUBELET" prefer -socket "$(plugin_sock)" \
		-available 0000:af:00.1,0000:af:00.2 -size 1)
	jq_ok '. == ["0000:af:00.2"]' "a NIC a journal holds is not preferred"
	run_plugin DEL "$(jq -c '.match.devices = ["pool1"]' <<<"$conf")"
	expect_ok "DEL"
	node_down
}
run "GetPreferredAllocation: fewest NUMA nodes, must_include first, held NICs last" preferred

health() {
	local state=$T/sysfs/devices/pci0000:ae/0000:ae:00.0/0000:af:00.0/infiniband/mlx5_0/ports/1/state
	node_up
	ip -n "$HOST_NS" link del pool1
	wait_event '.event == "list" and (.devices[1] | .id == "0000:af:00.1" and
		.health == "Unhealthy")' "pool1 removed: Unhealthy"
	jq_ok '[.[].id] == $ids' "the removed NIC keeps its place" "$(last_list)" \
		--argjson ids "$ALL_IDS"
	mk_nic "$HOST_NS" pool1 peer1
	wait_event '.event == "list" and all(.devices[]; .health == "Healthy")' \
		"pool1 back: Healthy"
	echo "1: DOWN" >"$state"
	wait_event '.event == "list" and (.devices[0].health == "Unhealthy")' \
		"mlx5_0 port DOWN: Unhealthy"
	echo "4: ACTIVE" >"$state"
	wait_event '.event == "list" and all(.devices[]; .health == "Healthy")' \
		"mlx5_0 port ACTIVE: Healthy"
	node_down
}
run "a NIC removed and put back, an RDMA port down and up" health

kubelet_restart() {
	node_up
	stop_kubelet
	start_kubelet
	wait_event '.event == "register"' "re-registration after the kubelet restarted" 15
	wait_event '.event == "list"' "ListAndWatch again"
	jq_ok '[.[].id] == $ids' "the same devices" "$(last_list)" --argjson ids "$ALL_IDS"
	[[ -S $(plugin_sock) ]] || fail "no device plugin socket after the kubelet's sweep"
	# A config change is a new pool: registered again, listed anew.
	write_conflist '.match.devices = ["pool0", "pool3"]'
	wait_event '.event == "register"' "re-registration after the pool changed" 15
	wait_event '.event == "list"' "the new pool listed"
	jq_ok '[.[].id] == ["0000:af:00.0","pool3"]' "the new pool's devices" "$(last_list)"
	node_down
}
run "kubelet restart (socket swept, kubelet.sock new) and a pool change" kubelet_restart

agent_restart() {
	local before
	node_up
	before=$(last_list)
	stop_agent
	[[ ! -e $(plugin_sock) && ! -e $T/agent.sock ]] || fail "sockets left at SIGTERM"
	wait_event '.event == "list-end"' "the stream ends with the agent"
	start_agent
	wait_event '.event == "register"' "the restarted agent registers"
	wait_event '.event == "list"' "and lists"
	[[ $(last_list) == "$before" ]] || fail "device list changed across an agent restart:
before $before
after  $(last_list)"
	node_down
}
run "agent restart: same device IDs, sockets removed at SIGTERM" agent_restart

# ---- DRA: the kubelet's side (doc/dra.md) ---------------------------------------------

# shellcheck source=../kube/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../kube/lib.sh"

DRV=hpn-rdma.alibabacloud.com
UID1=5b0c7a51-1f7e-4c55-9d43-2a1c0b9e7f10
UID2=0d6f0e1a-2b3c-4d5e-8f70-112233445566
POD_A=7e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b

# dra_api: the API stand-in in the scenario's host netns with ResourceClaims in
# $KUBE_RESOURCES, a service account for it, and the agent's DRA flags.
dra_api() {
	KUBE_WORK=$T/kube-$SCEN
	rm -rf "$KUBE_WORK"
	mkdir -p "$KUBE_WORK/pods" "$KUBE_WORK/sa"
	KUBE_RESOURCES=$KUBE_WORK/res
	mkdir -p "$KUBE_RESOURCES"
	kube_pki
	KUBE_PY_WRAP=(ip netns exec "$HOST_NS")
	kube_start "$KUBE_WORK/pods" || fail "the API stand-in did not start"
	echo "dra-agent-token" >"$KUBE_WORK/tokens"
	echo "dra-agent-token" >"$KUBE_WORK/sa/token"
	cp "$KUBE_WORK/pki/ca.crt" "$KUBE_WORK/sa/ca.crt"
	# shellcheck disable=SC2154 # KUBE_PORT_good: set by kube_start (printf -v)
	export KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$KUBE_PORT_good
	AGENT_FLAGS=(--cri-socket none --dra --node-name node1
		--kubeconfig "$KUBE_WORK/agent.kubeconfig" --service-account "$KUBE_WORK/sa")
}

# mk_claim NS NAME UID [JQ [DEVICE...]]: a ResourceClaim of ours allocating
# DEVICEs (default the NICs pool0 and pool1) in pool node1, reserved for pod
# $POD_A, changed by JQ.
mk_claim() {
	local ns=$1 name=$2 uid=$3 filter=${4:-.} f
	shift 3
	(($# > 0)) && shift
	(($# > 0)) || set -- pci-0000-af-00-0 pci-0000-af-00-1
	f=$KUBE_RESOURCES/$ns/resourceclaims/$name.json
	mkdir -p "${f%/*}"
	jq -n --arg ns "$ns" --arg name "$name" --arg uid "$uid" --arg drv "$DRV" \
		--arg pod "$POD_A" --args '{
		apiVersion: "resource.k8s.io/v1", kind: "ResourceClaim",
		metadata: {name: $name, namespace: $ns, uid: $uid, resourceVersion: "1"},
		spec: {devices: {requests: [{name: "nics", exactly: {deviceClassName: "hpn-rdma"}}]}},
		status: {allocation: {devices: {results: [$ARGS.positional[] |
			{request: "nics", driver: $drv, pool: "node1", device: .}]}},
			reservedFor: [{resource: "pods", name: "trainer", uid: $pod}]}}' "$@" |
		jq "$filter" >"$f"
}

dra_sock() {
	echo "$KL/plugins/$DRV/dra.sock"
}

reg_sock() {
	echo "$KL/plugins_registry/$DRV-reg.sock"
}

# wait_file PATH WHAT: PATH is there within 10 s.
wait_file() {
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -e $1 ]] && return 0
		sleep 0.1
	done
	fail "$2: no $1 within 10 s; agent log: $(tail -n 10 "$T/agent.log")"
}

prepare() {
	"$HPN_KUBELET" dra-prepare -socket "$(dra_sock)" "$@"
}

unprepare() {
	"$HPN_KUBELET" dra-unprepare -socket "$(dra_sock)" "$@"
}

api_requests() {
	grep -c resourceclaims "$KUBE_WORK/requests.log" || true
}

claim_spec() {
	echo "$T/cdi/alibabacloud.com-hpn-rdma_claim-$1.json"
}

# Registration as the kubelet's plugin watcher does it, for both versions;
# Prepare and Unprepare of claims read from the API stand-in; the record
# answering a second Prepare and a restarted agent with the API down;
# hostile claims, each answered as that claim's error.
dra_kubelet() {
	local -a AGENT_FLAGS
	local mode spec n want
	for f in '--dra ' '--dra-driver NAME' '--node-name NAME'; do
		"$HPN_AGENT" --help | grep -q -- "$f" || fail "--help does not show $f"
	done
	if "$HPN_AGENT" --config /dev/null --dra 2>"$T/err" ||
		! grep -q 'reads claims with --kubeconfig' "$T/err"; then
		fail "--dra without --kubeconfig: $(cat "$T/err")"
	fi
	if "$HPN_AGENT" --config /dev/null --dra --kubeconfig /x --dra-driver Bad_Name 2>"$T/err" ||
		! grep -q 'is not a DNS subdomain of at most 63' "$T/err"; then
		fail "--dra-driver Bad_Name: $(cat "$T/err")"
	fi
	dra_api
	node_up
	wait_file "$(reg_sock)" "the DRA registration socket"
	OUT=$("$HPN_KUBELET" dra-register -dir "$KL" -driver "$DRV") ||
		fail "dra-register: $OUT $(tail -n 5 "$T/agent.log")"
	jq_ok '.type == "DRAPlugin" and .name == $d and .endpoint == $e
		and .versions == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]' \
		"GetInfo: a DRAPlugin of both versions at the driver's socket" "$OUT" \
		--arg d "$DRV" --arg e "$(dra_sock)"
	grep -q "the kubelet registered driver $DRV" "$T/agent.log" ||
		fail "NotifyRegistrationStatus not logged: $(tail -n 5 "$T/agent.log")"
	mode=$(stat -c %a "$(dra_sock)")
	[[ $mode == 600 ]] || fail "dra.sock mode $mode, not 600"
	mode=$(stat -c %a "$(reg_sock)")
	[[ $mode == 600 ]] || fail "registration socket mode $mode, not 600"
	mode=$(stat -c %a "$KL/plugins/$DRV")
	[[ $mode == 750 ]] || fail "plugins/$DRV mode $mode, not 750"
	# Refused: logged, and the socket made anew for the watcher to try again.
	"$HPN_KUBELET" dra-register -dir "$KL" -driver "$DRV" -error "test refusal" >/dev/null ||
		fail "dra-register -error failed"
	grep -q "did not register driver $DRV: test refusal" "$T/agent.log" ||
		fail "a refused registration not logged: $(tail -n 5 "$T/agent.log")"
	sleep 0.5
	wait_file "$(reg_sock)" "the registration socket made anew"
	"$HPN_KUBELET" dra-register -dir "$KL" -driver "$DRV" >/dev/null ||
		fail "the registration socket does not answer after a refusal"
	# The registry wiped (a kubelet's cleanup): served anew.
	rm -f "$(reg_sock)"
	wait_file "$(reg_sock)" "the registration socket after it was removed"
	# The whole directory taken away (moved, then removed: the agent serves anew at once).
	mv "$KL/plugins_registry" "$KL/registry.old"
	rm -rf "$KL/registry.old"
	wait_file "$(reg_sock)" "the registration socket after its directory was removed"
	rm -f "$(reg_sock)"
	wait_file "$(reg_sock)" "the registration socket removed again, in the new directory"
	"$HPN_KUBELET" dra-register -dir "$KL" -driver "$DRV" >/dev/null ||
		fail "the registration socket made anew does not answer"

	# Prepare (v1): pool0 and pool1, the CDI spec of exactly their devices.
	mk_claim ml c1 "$UID1"
	OUT=$(prepare -version v1 "ml/c1/$UID1") || fail "Prepare v1 failed"
	jq_ok '.[$u].error == "" and .[$u].devices == [
		{requests: ["nics"], pool: "node1", device: "pci-0000-af-00-0", cdi: [$c]},
		{requests: ["nics"], pool: "node1", device: "pci-0000-af-00-1", cdi: [$c]}]' \
		"Prepare: both devices, the claim's CDI device" "$OUT" --arg u "$UID1" \
		--arg c "alibabacloud.com/hpn-rdma=claim-$UID1"
	spec=$(claim_spec "$UID1")
	[[ -f $spec ]] || fail "no CDI spec $spec: $(ls "$T/cdi")"
	jq_ok '.kind == "alibabacloud.com/hpn-rdma" and (.devices | length) == 1
		and .devices[0].name == ("claim-" + $u)
		and ([.devices[0].containerEdits.deviceNodes[].path] | sort) == ["/dev/infiniband/issm0",
			"/dev/infiniband/rdma_cm", "/dev/infiniband/umad0", "/dev/infiniband/uverbs0",
			"/dev/infiniband/uverbs1"]
		and (.devices[0].containerEdits.env | any(endswith("=mlx5_0,mlx5_1")))' \
		"the claim's spec: mlx5_0's and mlx5_1's character devices and rdma_cm, env naming both" \
		"$(cat "$spec")" --arg u "$UID1"
	[[ -f $STATE/dra/$UID1.json ]] || fail "no record $STATE/dra/$UID1.json"
	jq_ok '.uid == $u and .namespace == "ml" and .name == "c1" and .pods == [$p]
		and [.devices[] | [.nic, .rdma]] == [["0000:af:00.0", "mlx5_0"], ["0000:af:00.1", "mlx5_1"]]' \
		"the record: claim, pod, NICs" "$(cat "$STATE/dra/$UID1.json")" --arg u "$UID1" --arg p "$POD_A"
	[[ $(stat -c %a "$STATE/dra") == 700 ]] || fail "the records' directory is not 0700"
	# Again (v1beta1): the same answer, no API request.
	n=$(api_requests)
	want=$OUT
	OUT=$(prepare -version v1beta1 "ml/c1/$UID1") || fail "Prepare v1beta1 failed"
	[[ $(jq -S . <<<"$OUT") == "$(jq -S . <<<"$want")" ]] ||
		fail "a second Prepare answered otherwise: $OUT, not $want"
	[[ $(api_requests) == "$n" ]] || fail "a second Prepare asked the API again"

	# Hostile answers, one call (v1beta1): each claim its error, the good one prepared.
	mk_claim ml good "$UID2" . pci-0000-af-00-2
	mk_claim ml wronguid 11111111-2222-4333-8444-555555555555
	mk_claim ml unalloc 22222222-2222-4333-8444-555555555555 'del(.status.allocation)'
	mk_claim ml otherdrv 33333333-2222-4333-8444-555555555555 \
		'.status.allocation.devices.results[].driver = "gpu.nvidia.com"'
	mk_claim ml unknown 44444444-2222-4333-8444-555555555555 . pci-0000-af-00-9
	mk_claim ml othernode 55555555-2222-4333-8444-555555555555 \
		'.status.allocation.devices.results[].pool = "node2"'
	printf '{"kind": "ResourceClaim", "metadata": ' \
		>"$KUBE_RESOURCES/ml/resourceclaims/broken.json"
	{
		printf '{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"annotations":{"x":"'
		head -c 1100000 /dev/zero | tr '\0' a
		printf '"},"name":"huge","namespace":"ml","uid":"77777777-2222-4333-8444-555555555555"}}'
	} >"$KUBE_RESOURCES/ml/resourceclaims/huge.json"
	OUT=$(prepare -version v1beta1 "ml/good/$UID2" \
		ml/wronguid/99999999-2222-4333-8444-555555555555 \
		ml/unalloc/22222222-2222-4333-8444-555555555555 \
		ml/otherdrv/33333333-2222-4333-8444-555555555555 \
		ml/unknown/44444444-2222-4333-8444-555555555555 \
		ml/othernode/55555555-2222-4333-8444-555555555555 \
		ml/broken/66666666-2222-4333-8444-555555555555 \
		ml/huge/77777777-2222-4333-8444-555555555555 \
		ml/gone/88888888-2222-4333-8444-555555555555) || fail "Prepare with hostile claims failed"
	jq_ok 'length == 9 and .[$u].error == "" and [.[$u].devices[].device] == ["pci-0000-af-00-2"]' \
		"the good claim among hostile ones prepared" "$OUT" --arg u "$UID2"
	for c in wronguid:99999999 unalloc:22222222 otherdrv:33333333 unknown:44444444 \
		othernode:55555555 broken:66666666 huge:77777777 gone:88888888; do
		jq_ok '.[$u].error | startswith("claim ml/" + $n) and (. != "")' \
			"claim $c answered with an error naming it" "$OUT" \
			--arg n "${c%%:*}" --arg u "${c##*:}-2222-4333-8444-555555555555"
		[[ ! -e $(claim_spec "${c##*:}-2222-4333-8444-555555555555") ]] ||
			fail "a spec was written for the hostile claim $c"
	done
	jq_ok '(.["44444444-2222-4333-8444-555555555555"].error | test("pci-0000-af-00-9 is no NIC"))
		and (.["55555555-2222-4333-8444-555555555555"].error | test("pool node2"))
		and (.["99999999-2222-4333-8444-555555555555"].error | test("another one"))
		and (.["88888888-2222-4333-8444-555555555555"].error | test("does not exist"))' \
		"the errors say the cause" "$OUT"
	# Malformed calls: INVALID_ARGUMENT for the whole call.
	if prepare -version v1 "ml/bad/x.y" 2>"$T/err"; then
		fail "a claim UID with a path in it was prepared"
	fi
	grep -q InvalidArgument "$T/err" || fail "a bad UID: $(cat "$T/err")"
	set --
	for ((n = 0; n < 33; n++)); do
		set -- "$@" "ml/c$n/00000000-0000-4000-8000-0000000000$((10 + n))"
	done
	if prepare -version v1 "$@" 2>"$T/err"; then
		fail "a call of 33 claims was served"
	fi
	grep -q 'InvalidArgument.*33 claims' "$T/err" || fail "33 claims: $(cat "$T/err")"

	# The agent restarted, the API down: what was prepared still answers.
	stop_agent
	[[ ! -e $(dra_sock) && ! -e $(reg_sock) ]] || fail "DRA sockets left at SIGTERM"
	kube_stop
	start_agent
	wait_file "$(dra_sock)" "the restarted agent's dra.sock"
	OUT=$(prepare -version v1 "ml/c1/$UID1" ml/new/12121212-2222-4333-8444-555555555555) ||
		fail "Prepare after the restart failed"
	[[ $(jq -S ".[\"$UID1\"]" <<<"$OUT") == "$(jq -S ".[\"$UID1\"]" <<<"$want")" ]] ||
		fail "the restarted agent answered otherwise: $OUT"
	jq_ok '.["12121212-2222-4333-8444-555555555555"].error | test("claim ml/new")' \
		"a new claim with the API down: its error" "$OUT"

	# Unprepare: spec and record gone; twice, and an unknown claim, are fine.
	OUT=$(unprepare -version v1 "ml/c1/$UID1") || fail "Unprepare failed"
	jq_ok '. == {($u): {error: ""}}' "Unprepare answers" "$OUT" --arg u "$UID1"
	[[ ! -e $(claim_spec "$UID1") && ! -e $STATE/dra/$UID1.json ]] ||
		fail "Unprepare left the spec or the record"
	[[ -e $(claim_spec "$UID2") ]] || fail "Unprepare of c1 took the other claim's spec"
	OUT=$(unprepare -version v1beta1 "ml/c1/$UID1" "ml/good/$UID2" ml/x/abc) ||
		fail "Unprepare again failed"
	jq_ok 'length == 3 and all(.[]; .error == "")' "Unprepare twice and of an unknown claim" "$OUT"
	[[ ! -e $(claim_spec "$UID2") && -z $(ls -A "$STATE/dra") ]] || fail "state left after Unprepare"
	node_down
	[[ ! -e $(dra_sock) && ! -e $(reg_sock) ]] || fail "DRA sockets left at SIGTERM"
	unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT
}
run "DRA: registration, Prepare and Unprepare (v1, v1beta1), records, restart, hostile claims" dra_kubelet

# A NIC an attachment of another pod holds: that claim's error names the NIC
# and the holder, never another NIC; the pod the claim is reserved for may hold it.
dra_held() {
	local -a AGENT_FLAGS
	local conf
	dra_api
	node_up plain
	echo '[{"namespace":"ns1","name":"trainer","containers":[{"name":"main","devices":[
		{"resource":"rdma/hpn","ids":["0000:af:00.0"]}]}]}]' >"$T/pods.json"
	conf=$(agent_net_conf)
	run_plugin ADD "$conf" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer;K8S_POD_UID=ab-12"
	expect_result "ADD of a pod holding pool0"
	mk_claim ml held "$UID1" . pci-0000-af-00-0
	OUT=$(prepare -version v1 "ml/held/$UID1") || fail "Prepare failed"
	jq_ok '.[$u].error | test("NIC 0000:af:00.0 \\(device pci-0000-af-00-0\\) is held by pod ab-12")' \
		"a NIC another pod holds: the claim's error names it and the holder" "$OUT" --arg u "$UID1"
	jq_ok '.[$u].devices == []' "and no other NIC instead" "$OUT" --arg u "$UID1"
	# Reserved for the pod that holds it: past that check (and here no RDMA device).
	mk_claim ml held "$UID1" '.status.reservedFor[0].uid = "ab-12"' pci-0000-af-00-0
	OUT=$(prepare -version v1beta1 "ml/held/$UID1") || fail "Prepare failed"
	jq_ok '.[$u].error | test("has no RDMA device")' \
		"the holder's own claim passes the holder check" "$OUT" --arg u "$UID1"
	[[ ! -e $STATE/dra/$UID1.json ]] || fail "a claim that failed was recorded"
	run_plugin DEL "$conf"
	expect_ok "DEL"
	node_down
	unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT
}
run "DRA: a NIC held by another pod's attachment is that claim's error" dra_held

# The kubelet gave pod ns1/trainer pool2 then pool0: the CNI attaches exactly
# those, in that order, though the pool's own order would pick pool0 first.
cni_allocated() {
	local conf mac0 mac2
	node_up plain
	mac0=$(mac_of "$HOST_NS" pool0)
	mac2=$(mac_of "$HOST_NS" pool2)
	echo '[{"namespace":"ns1","name":"trainer","containers":[{"name":"main","devices":[
		{"resource":"nvidia.com/gpu","ids":["GPU-7"]},
		{"resource":"rdma/hpn","ids":["0000:af:00.2","0000:af:00.0"]}]}]}]' >"$T/pods.json"
	snap_save "$HOST_NS" "$T/host.before"
	conf=$(agent_net_conf)
	run_plugin ADD "$conf" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer;K8S_POD_UID=ab-12"
	expect_result "ADD of a pod holding two rdma/hpn devices"
	[[ $(mac_of "$POD_NS" hpn0) == "$mac2" ]] || fail "hpn0 is not pool2, the first allocated"
	[[ $(mac_of "$POD_NS" hpn1) == "$mac0" ]] || fail "hpn1 is not pool0, the second allocated"
	jq_ok '[.interfaces[] | select(.sandbox) | .name] == ["hpn0","hpn1"]' "two pod interfaces"
	grep -q 'CNI lookup for pod ns1/trainer: 2 rdma/hpn devices' "$T/agent.log" ||
		fail "the agent did not answer the lookup: $(tail -5 "$T/agent.log")"

	# Another pod allocated pool0, which the first one holds: refused, nothing taken.
	echo '[{"namespace":"ns1","name":"second","containers":[{"name":"main","devices":[
		{"resource":"rdma/hpn","ids":["0000:af:00.0"]}]}]}]' >"$T/pods.json"
	ip netns add "${HPNT_PREFIX}p$SCEN-b"
	run_plugin ADD "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "${HPNT_PREFIX}p$SCEN-b")" \
		CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=second"
	expect_err 100 "ADD of a pod allocated a held NIC" \
		'allocated rdma/hpn device 0000:af:00.0 to the pod, but attachment .* holds it'
	[[ $(state_count) == 1 ]] || fail "the refused ADD left state"
	has_link "$HOST_NS" pool1 || fail "the refused ADD took another NIC"

	# An allocation naming a NIC the pool does not have: refused too.
	echo '[{"namespace":"ns1","name":"second","containers":[{"name":"main","devices":[
		{"resource":"rdma/hpn","ids":["0000:af:00.7"]}]}]}]' >"$T/pods.json"
	run_plugin ADD "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "${HPNT_PREFIX}p$SCEN-b")" \
		CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=second"
	expect_err 100 "ADD of a pod allocated an unknown NIC" 'no free-standing NIC of the pool'

	# A pod without devices of the resource: the pool as today (pool1, name order).
	echo '[]' >"$T/pods.json"
	run_plugin ADD "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "${HPNT_PREFIX}p$SCEN-b")" \
		CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=second"
	expect_result "ADD of a pod without an allocation"
	has_link "$HOST_NS" pool1 && fail "the pool pick was not pool1, the first free NIC"
	run_plugin DEL "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "${HPNT_PREFIX}p$SCEN-b")"
	expect_ok "DEL of the second pod"
	ip netns del "${HPNT_PREFIX}p$SCEN-b"
	run_plugin DEL "$conf"
	expect_ok "DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after both DELs"
	expect_no_state "after both DELs"
	node_down
}
run "the CNI attaches exactly the allocated NICs in order; a held NIC refused" cni_allocated

# The pod's GPUs, as the CNI's lookup answers them: the IDs of nvidia.com/gpu
# (UUIDs, a time-sliced replica "::1") and the devices of its claims whose
# driver is gpu.nvidia.com, per container in PodResources' order, each once;
# another driver's devices and other resources are not GPUs; IDs that are no
# GPU ID are skipped with one warning per lookup.
GPU_A=GPU-2f6b1c1e-8a3d-4c55-9e0f-7d1a2b3c4d5e
GPU_B=GPU-9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d
GPU_C=GPU-0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f
gpu_pods() {
	jq -cn --arg a "$GPU_A" --arg b "$GPU_B" --arg c "$GPU_C" '[{namespace: "ns1", name: "trainer",
		containers: [
		{name: "main", devices: [
			{resource: "nvidia.com/gpu", ids: [$a, ($b + "::1")]},
			{resource: "rdma/hpn", ids: ["0000:af:00.2"]},
			{resource: "example.com/fpga", ids: ["fpga-0"]}],
		 dynamic: [
			{claim: "gpus", namespace: "ns1", driver: "gpu.nvidia.com", pool: "node-a",
			 device: "gpu-3", cdi: ["k8s.gpu.nvidia.com/gpu=gpu-3"]},
			{claim: "nics", namespace: "ns1", driver: "rdma.example.com", pool: "node-a",
			 device: "nic-0", cdi: []}]},
		{name: "side", devices: [
			{resource: "nvidia.com/gpu", ids: [$a, $c, "GPU with spaces", ("G" * 120)]},
			{resource: "rdma/hpn", ids: ["0000:af:00.0"]}],
		 dynamic: [
			{claim: "gpus", namespace: "ns1", driver: "gpu.nvidia.com", pool: "node-a",
			 device: "gpu-3"},
			{claim: "more", namespace: "ns1", driver: "gpu.nvidia.com", pool: "node-a",
			 device: "gpu-5"}]}]}]' >"$T/pods.json"
}

gpus() {
	local req='{"version":1,"namespace":"ns1","name":"trainer"}' n
	node_up plain
	gpu_pods
	OUT=$(lookup_raw "$req")
	jq_ok '.podKnown and .devices == ["0000:af:00.2", "0000:af:00.0"]' \
		"the NICs of the resource, as before" "$OUT"
	jq_ok '.gpus == [$a, ($b + "::1"), "gpu-3", $c, "gpu-5"]' \
		"the GPUs: device plugin IDs and gpu.nvidia.com claims, in order, once each" "$OUT" \
		--arg a "$GPU_A" --arg b "$GPU_B" --arg c "$GPU_C"
	grep -q 'CNI lookup for pod ns1/trainer: 2 rdma/hpn devices, 5 GPUs' "$T/agent.log" ||
		fail "the agent's log does not count the GPUs: $(tail -5 "$T/agent.log")"
	n=$(grep -c 'pod ns1/trainer: 2 GPU IDs skipped, not of a GPU ID.s syntax (the first: "GPU?with?spaces")' \
		"$T/agent.log")
	[[ $n == 1 ]] || fail "the bad GPU IDs were warned about $n times in one lookup, not once: $(tail -5 "$T/agent.log")"
	OUT=$(lookup_raw "$req")
	n=$(grep -c 'GPU IDs skipped' "$T/agent.log")
	[[ $n == 2 ]] || fail "two lookups warned $n times, not once each"
	# A pod without GPUs has none.
	OUT=$(lookup_raw '{"version":1,"namespace":"ns1","name":"other"}')
	jq_ok '.gpus == [] and .podKnown == false' "a pod the kubelet does not list: no GPUs" "$OUT"
	stop_agent

	# --gpu-resource '': the device plugin's GPUs are not counted, the claims' are.
	start_agent --gpu-resource ''
	wait_event '.event == "list"' "the agent with --gpu-resource ''" 20
	OUT=$(lookup_raw "$req")
	jq_ok '.devices == ["0000:af:00.2", "0000:af:00.0"] and .gpus == ["gpu-3", "gpu-5"]' \
		"--gpu-resource '': only the DRA devices" "$OUT"
	stop_agent
	# Both off: no GPUs at all; another resource and another driver as the GPUs'.
	start_agent --gpu-resource '' --gpu-driver ''
	wait_event '.event == "list"' "the agent with no GPU sources" 20
	OUT=$(lookup_raw "$req")
	jq_ok '.gpus == [] and (.devices | length) == 2' "both flags empty: no GPUs" "$OUT"
	stop_agent
	start_agent --gpu-resource example.com/fpga,nvidia.com/gpu --gpu-driver rdma.example.com
	wait_event '.event == "list"' "the agent with other GPU sources" 20
	OUT=$(lookup_raw "$req")
	jq_ok '.gpus == [$a, ($b + "::1"), "fpga-0", "nic-0", $c]' \
		"a comma list of resources, another driver" "$OUT" \
		--arg a "$GPU_A" --arg b "$GPU_B" --arg c "$GPU_C"
	node_down
	# Flags that are not names: refused before anything starts.
	for bad in '--gpu-resource nogpu' '--gpu-resource nvidia.com/gpu,a/b/c' \
		'--gpu-driver Gpu_Nvidia' '--gpu-driver .gpu.nvidia.com'; do
		# shellcheck disable=SC2086 # the flag and its value, split on purpose
		if "$HPN_AGENT" --config "$T/net.conflist" $bad 2>"$T/err"; then
			fail "the agent took $bad"
		fi
		grep -q 'gpu-' "$T/err" || fail "the refusal of $bad does not name the flag: $(cat "$T/err")"
	done
	"$HPN_AGENT" --help | grep -q -- '--gpu-resource NAMES' || fail "--help does not show --gpu-resource"
}
run "the pod's GPUs in the lookup: nvidia.com/gpu IDs and gpu.nvidia.com claims, in order, once" gpus

# A kubelet whose PodResources List is slower than the lookup's budget
# (400 ms): the CNI gets an error reply at once, saying so, ADD fails with
# code 11 (retried by the runtime) and changes nothing; the agent serves on.
slow_kubelet() {
	local req='{"version":1,"namespace":"ns1","name":"trainer"}' t0 ms conf i
	local -a pids=()
	node_up plain
	echo '[{"namespace":"ns1","name":"trainer","containers":[{"name":"main","devices":[
		{"resource":"rdma/hpn","ids":["0000:af:00.2"]}]}]}]' >"$T/pods.json"
	stop_kubelet
	start_kubelet -podres-delay 3s
	wait_event '.event == "register"' "the slow kubelet: re-registration" 15
	t0=$(date +%s%N)
	OUT=$(lookup_raw "$req")
	ms=$((($(date +%s%N) - t0) / 1000000))
	jq_ok '.version == 1 and (.error | test("PodResources List at .*: no answer within 400 ms"))
		and (has("devices") | not)' "a slow List: the lookup's error reply says so" "$OUT"
	((ms < 2500)) || fail "the error reply took $ms ms: the agent waited for the slow List"
	# The kubelet answers late, to a caller long gone: nothing of it reaches the agent's state.
	wait_event '.event == "podresources-list"' "the slow List's late answer" 10
	conf=$(agent_net_conf)
	run_plugin ADD "$conf" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer"
	expect_err 11 "ADD while the kubelet is slow" 'no answer within 400 ms'
	pod_empty "pod after the refused ADD"
	expect_no_state "after the refused ADD"
	# Several at once, while every List is slow: each answered, none left hanging.
	for i in 1 2 3 4; do
		lookup_raw "$req" >"$T/slow-$i.json" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do
		wait "$i" || fail "a concurrent lookup got no reply"
	done
	for i in 1 2 3 4; do
		jq_ok '.error | test("no answer within")' "concurrent lookup $i" "$(cat "$T/slow-$i.json")"
	done
	kill -0 "$AGENT_PID" 2>/dev/null || fail "the agent died under slow Lists"
	# The kubelet fast again: answered as before.
	stop_kubelet
	start_kubelet
	wait_event '.event == "register"' "the kubelet again: re-registration" 15
	OUT=$(lookup_raw "$req")
	jq_ok '.devices == ["0000:af:00.2"] and (has("error") | not)' \
		"after the slow kubelet, the lookup answers" "$OUT"
	node_down
}
run "a PodResources List slower than the lookup's budget: an error reply, the agent serves on" slow_kubelet

no_agent() {
	local conf
	KL=$T/kl-$SCEN
	EV=$T/events-$SCEN.jsonl
	mk_node plain
	conf=$(agent_net_conf)
	run_plugin ADD "$conf" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer"
	expect_result "ADD without an agent: from the pool"
	has_link "$HOST_NS" pool0 && fail "the pool's first NIC was not taken"
	run_plugin DEL "$conf"
	expect_ok "DEL"
	run_plugin ADD "$(jq -c '.agent.required = true' <<<"$conf")" \
		CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer"
	expect_err 11 "ADD without an agent, agent.required" \
		'agent.required is true: hpn-rdma-agent is not answering'
	pod_empty "pod after the refused ADD"
	expect_no_state "after the refused ADD"
}
run "no agent: the pool; agent.required makes it an error" no_agent

t_done
