#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq programs are single-quoted on purpose
# runtime tier: the kubelet's device plugin path through a real containerd
# and runc. hpn-rdma-agent runs on the node (its netns) against the kubelet
# stand-in hpn-kubelet; the stand-in's PodResources says pod rdma-pod holds
# rnic1. RunPodSandbox: hpn-rdma asks the agent and attaches exactly rnic1.
# CreateContainer, as the kubelet builds it from Allocate's answer: the
# DeviceSpecs and envs of rnic1, not privileged. Then, in the container: the
# verbs device node is there with its numbers and the device cgroup lets it be
# opened (the open reaches the kernel, which has no driver for it here: ENXIO
# or ENODEV, never EPERM); in a container of a pod without the resource the
# node is absent, and made with mknod it cannot be opened (EPERM: the device
# cgroup is real).
#
# What stands in for what: the node has no RDMA hardware, so the agent reads
# a fake sysfs tree (mlx5_1 serving rnic1 through its GID table, uverbs1,
# rdma_cm) and --dev-root points Allocate's host paths at device nodes this
# test makes with the kernel's numbers for them (uverbs: 231:192+N; rdma_cm:
# a misc device, 10:N). The plugin itself reads the real /sys, where rnic1 is
# a veth with no RDMA device (rdmaRequired false): the proof from inside the
# pod with a real RDMA device is the VM tier's (doc/agent.md).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

OPT_IN='{"alibabacloud.com/hpn-type": "rdma"}'
AGENT_PID=
KUBELET_PID=

[[ -x ${HPN_AGENT:-} ]] || skip "hpn-rdma-agent was not built (${HPN_AGENT:-HPN_AGENT unset})"
[[ -x ${HPN_KUBELET:-} ]] || skip "the kubelet stand-in was not built (${HPN_KUBELET:-HPN_KUBELET unset})"
command -v python3 >/dev/null || skip "python3 is needed in the containers (the host's /usr)"

rt_init

# The fake node the agent reads, and the device nodes Allocate points at.
S=$T/agent-sysfs
KL=$T/kl
mk_fake_rdma() {
	local ib=$S/class/infiniband/mlx5_1
	mkdir -p "$ib/ports/1/gids" "$ib/ports/1/gid_attrs/ndevs" "$ib/ports/1/gid_attrs/types" \
		"$S/class/infiniband_verbs/uverbs1" "$S/class/misc/rdma_cm" "$T/dev/infiniband"
	echo "1: CA" >"$ib/node_type"
	echo "4: ACTIVE" >"$ib/ports/1/state"
	echo "Ethernet" >"$ib/ports/1/link_layer"
	echo "fe80:0000:0000:0000:0000:00ff:fe00:0001" >"$ib/ports/1/gids/0"
	echo rnic1 >"$ib/ports/1/gid_attrs/ndevs/0"
	echo "RoCE v2" >"$ib/ports/1/gid_attrs/types/0"
	echo mlx5_1 >"$S/class/infiniband_verbs/uverbs1/ibdev"
	echo 231:193 >"$S/class/infiniband_verbs/uverbs1/dev"	# the numbers CDI specs carry
	echo 10:250 >"$S/class/misc/rdma_cm/dev"
	mknod -m 0666 "$T/dev/infiniband/uverbs1" c 231 193
	mknod -m 0666 "$T/dev/infiniband/rdma_cm" c 10 250
}

agent_exit() {
	local rc=$?
	[[ -n $AGENT_PID ]] && kill "$AGENT_PID" 2>/dev/null
	[[ -n $KUBELET_PID ]] && kill "$KUBELET_PID" 2>/dev/null
	# rt_exit exits with $?: the test's status, not the last kill's.
	rtn_cleanup
	exit $rc
}
trap agent_exit EXIT

mk_fake_rdma
echo '[{"namespace":"hpnr","name":"rdma-pod","containers":[{"name":"main","devices":[
	{"resource":"rdma/hpn","ids":["rnic1"]}]}]}]' >"$T/pods.json"
"$HPN_KUBELET" serve -dir "$KL" -out "$T/kubelet.events" -pods "$T/pods.json" 2>"$T/kubelet.log" &
KUBELET_PID=$!
# The agent's config: the node's network, its pool read through the fake tree.
rt_conflist | jq -c --arg s "$S" --arg a "$T/agent.sock" --arg c "$T/cdi" '.plugins |= map(
	if .type == "hpn-rdma" then .sysfsRoot = $s | .agent = {socket: $a, cdiDir: $c} else . end)' \
	>"$T/agent.conflist"
for ((i = 0; i < 100; i++)); do [[ -S $KL/device-plugins/kubelet.sock ]] && break; sleep 0.05; done
# CDI: the node's spec dir (1.7 and 2.1 read it), the plugin as the specs' hook.
rtn_in "$HPN_AGENT" --config "$T/agent.conflist" --kubelet-dir "$KL" --dev-root "$T/dev" \
	--cdi-dir "$RTN_CDI_DIR" --cdi-hook "$HPN_PLUGIN" --poll-interval 1 2>"$T/agent.log" &
AGENT_PID=$!
for ((i = 0; i < 200; i++)); do
	grep -q '"event":"list"' "$T/kubelet.events" 2>/dev/null && break
	sleep 0.05
done
grep -q '"event":"list"' "$T/kubelet.events" ||
	fail "the agent did not register: $(tail -n 5 "$T/agent.log")"
# The node's network asks the agent; its sysfsRoot stays the real one.
rtn_conflist "$(rt_conflist | jq -c --arg a "$T/agent.sock" '.plugins |= map(
	if .type == "hpn-rdma" then .agent = {socket: $a, required: true} else . end)')"
rtn_wait_network "$NET"

# ctr_with POD_ID POD_NAME DEVICES_JSON ENVS_JSON [CDI_JSON]: container "main"
# as rt_container makes it, plus CRI devices, envs and CDI devices (what the
# kubelet takes from Allocate's ContainerAllocateResponse). Prints its ID.
ctr_with() {
	try_ctr "$@" || fail "CreateContainer in $2 failed: $(<"$T/create.err")"
	echo "$OUT"
}

# try_ctr as ctr_with: sets OUT (the container's ID, once created) and
# returns non-zero, the runtime's error in $T/create.err, when CreateContainer
# or StartContainer fails (containerd runs runc, and so the OCI hooks, at
# StartContainer).
try_ctr() {
	local pod=$1 name=$2 devs=$3 envs=$4 cdi=${5:-'[]'} mounts='[]' d id
	for d in /usr /bin /lib /lib64; do
		[[ -e $d ]] || continue
		mounts=$(jq -c --arg d "$d" '. + [{containerPath: $d, hostPath: $d, readonly: true}]' <<<"$mounts")
	done
	jq -n --argjson m "$mounts" --argjson devs "$devs" --argjson envs "$envs" \
		--argjson cdi "$cdi" --arg img "$RTN_IMAGE" '{
		metadata: {name: "main", attempt: 0}, image: {image: $img},
		command: ["/pause"], envs: $envs, mounts: $m, devices: $devs,
		CDI_devices: [$cdi[] | {name: .}], logPath: "main/0.log"}' >"$T/pods/$name.ctr.json"
	OUT=
	id=$(cri create "$pod" "$T/pods/$name.ctr.json" "$T/pods/$name.json" 2>"$T/create.err") ||
		return 1
	OUT=$id
	cri start "$id" 2>"$T/create.err"
}

allocated_devices() {
	local alloc devs envs id ctr got plain pctr
	alloc=$("$HPN_KUBELET" allocate -socket "$KL/device-plugins/hpn-rdma.sock" rnic1)
	jq_ok '.[0].devices == [
		{container: "/dev/infiniband/uverbs1", host: ($d + "/uverbs1"), permissions: "rw"},
		{container: "/dev/infiniband/rdma_cm", host: ($d + "/rdma_cm"), permissions: "rw"}] and
		.[0].envs.HPN_RDMA_DEVICES == "mlx5_1"' "Allocate of rnic1" "$alloc" \
		--arg d "$T/dev/infiniband"
	devs=$(jq -c '[.[0].devices[] | {containerPath: .container, hostPath: .host,
		permissions: .permissions}]' <<<"$alloc")
	envs=$(jq -c '[.[0].envs | to_entries[] | {key, value}]' <<<"$alloc")

	rt_pod rdma-pod "$OPT_IN"
	id=$(runp rdma-pod)
	ip -n "$RTN_NS" link show rnic1 >/dev/null 2>&1 && fail "rnic1, the allocated NIC, is still on the node"
	ip -n "$RTN_NS" link show rnic0 >/dev/null 2>&1 || fail "rnic0 was taken instead of rnic1"
	grep -q 'CNI lookup for pod hpnr/rdma-pod: 1 rdma/hpn devices' "$T/agent.log" ||
		fail "the plugin did not ask the agent: $(tail -n 5 "$T/agent.log")"

	ctr=$(ctr_with "$id" rdma-pod "$devs" "$envs")
	in_ctr "$ctr" ip link show hpn0 >/dev/null || fail "no hpn0 in the container"
	got=$(in_ctr "$ctr" stat -c '%F %t:%T' /dev/infiniband/uverbs1 /dev/infiniband/rdma_cm)
	[[ $got == $'character special file e7:c1\ncharacter special file a:fa' ]] ||
		fail "the container's device nodes are not Allocate's: $got"
	got=$(open_errno "$ctr" /dev/infiniband/uverbs1)
	[[ $got == ENXIO || $got == ENODEV ]] ||
		fail "opening the allocated uverbs1 in the container: $got (the cgroup must let it reach the kernel)"
	[[ $(in_ctr "$ctr" printenv HPN_RDMA_DEVICES) == mlx5_1 ]] ||
		fail "the container lacks Allocate's envs"
	if [[ -d /sys/fs/cgroup/devices ]]; then
		got=$(in_ctr "$ctr" cat /sys/fs/cgroup/devices/devices.list)
		grep -qx 'c 231:193 rw' <<<"$got" || fail "the device cgroup lacks c 231:193 rw: $got"
		! grep -qx 'a \*:\* rwm' <<<"$got" || fail "the container is privileged (a *:* rwm)"
	fi

	# A pod without the resource: no device node, and one made by hand is refused.
	rt_pod plain-pod '{}'
	plain=$(runp plain-pod)
	pctr=$(ctr_with "$plain" plain-pod '[]' '[]')
	in_ctr "$pctr" test ! -e /dev/infiniband/uverbs1 || fail "a pod without the resource has uverbs1"
	in_ctr "$pctr" mknod /dev/uverbs1 c 231 193
	got=$(open_errno "$pctr" /dev/uverbs1)
	[[ $got == EPERM ]] || fail "a pod without the resource opened uverbs1: $got, not EPERM"

	cri stop "$pctr" || fail "StopContainer failed"
	cri rm "$pctr" || fail "RemoveContainer failed"
	stop_remove "$plain"
	cri stop "$ctr" || fail "StopContainer failed"
	cri rm "$ctr" || fail "RemoveContainer failed"
	stop_remove "$id"
	ip -n "$RTN_NS" link show rnic1 >/dev/null 2>&1 || fail "rnic1 did not come back"
}

# cdi_hints CTR POD: container CTR of pod POD, created with rnic1's CDI device
# and no mount of hpn-rdma's in its CRI config, reads its pod's NCCL hints at
# /etc/nccl.conf, read-only (ro, nosuid, nodev, noexec): the agent's spec
# mounts <nccl.dir>/nic/rnic1/nccl.conf, which the pod's ADD linked to its file.
cdi_hints() {
	local ctr=$1 pod=$2 uid got
	uid=$(pod_uid "$pod")
	jq_ok '[.mounts[] | select(.containerPath == "/etc/nccl.conf" or
		(.hostPath | startswith($h)))] == []' "the CRI config mounts no hints" \
		"$(cat "$T/pods/$pod.ctr.json")" --arg h "$HINTS"
	jq_ok '.devices[0].containerEdits.mounts == [{hostPath: ($h + "/nic/rnic1/nccl.conf"),
		containerPath: "/etc/nccl.conf", options: ["ro", "nosuid", "nodev", "noexec", "bind"],
		type: "bind"}]' "rnic1's spec mounts the hints of the pod that holds it" \
		"$(cat "$RTN_CDI_DIR/alibabacloud.com-hpn-rdma_rnic1.json")" --arg h "$HINTS"
	[[ $(readlink "$HINTS/nic/rnic1") == "../$uid" ]] ||
		fail "the pod's ADD did not link rnic1 to its hints: $(ls -l "$HINTS/nic" 2>&1)"
	got=$(ctr_read "$ctr" /etc/nccl.conf)
	[[ $got == "$(cat "$HINTS/$uid/nccl.conf")" ]] ||
		fail "/etc/nccl.conf in the container is not its pod's hints: $got"
	# shellcheck disable=SC2016 # a Python program
	got=$(in_ctr "$ctr" python3 -c 'import errno, os
for l in open("/proc/self/mountinfo"):
	f = l.split()
	if f[4] == "/etc/nccl.conf":
		print(f[5])
try:
	open("/etc/nccl.conf", "a")
	print("writable")
except OSError as e:
	print(errno.errorcode[e.errno])')
	[[ $got =~ ^ro,nosuid,nodev,noexec[^$'\n']*$'\n'EROFS$ ]] ||
		fail "/etc/nccl.conf is not mounted read-only, nosuid, nodev, noexec: $got"
}

# The kubelet of 1.32+ passes a device plugin's CDI devices only in CRI's
# CDI_devices: on 1.7 and 2.1 the container created with nothing else has
# rnic1's nodes (the agent's spec, resolved by containerd at CreateContainer),
# its env, and may open them; a container of another pod naming the same
# device is refused by the spec's hook (hpn-rdma cdi-hook) with a message
# naming the pod that holds the NIC, and nothing of it is left. The container
# reads its pod's NCCL hints at /etc/nccl.conf, read-only, with no hostPath in
# its CRI config (cdi_hints). 1.6 reads no CDI_devices: the container has no
# node and no hints.
cdi_devices() {
	local alloc cdi spec id ctr got other
	alloc=$("$HPN_KUBELET" allocate -socket "$KL/device-plugins/hpn-rdma.sock" rnic1)
	jq_ok '.[0].cdi == ["alibabacloud.com/hpn-rdma=rnic1"]' "Allocate names rnic1's CDI device" "$alloc"
	cdi=$(jq -c '.[0].cdi' <<<"$alloc")
	spec=$RTN_CDI_DIR/alibabacloud.com-hpn-rdma_rnic1.json
	jq_ok '.kind == "alibabacloud.com/hpn-rdma" and .devices[0].name == "rnic1" and
		(.devices[0].containerEdits.deviceNodes | map(.path)) ==
			["/dev/infiniband/uverbs1", "/dev/infiniband/rdma_cm"] and
		.devices[0].containerEdits.hooks[0].hookName == "createRuntime" and
		.devices[0].containerEdits.hooks[0].path == $p' \
		"the agent's spec for rnic1, with its hook" "$(cat "$spec")" --arg p "$HPN_PLUGIN"

	rt_pod rdma-pod "$OPT_IN"
	id=$(runp rdma-pod)
	ctr=$(ctr_with "$id" rdma-pod '[]' '[]' "$cdi")
	if [[ $RTN_CTRD == 1.6 ]]; then
		in_ctr "$ctr" test ! -e /dev/infiniband/uverbs1 ||
			fail "containerd 1.6 resolved a CDI device (it has no CDI)"
		in_ctr "$ctr" test ! -e /etc/nccl.conf ||
			fail "containerd 1.6 mounted a CDI device's hints (it has no CDI)"
	else
		got=$(in_ctr "$ctr" stat -c '%F %t:%T' /dev/infiniband/uverbs1 /dev/infiniband/rdma_cm)
		[[ $got == $'character special file e7:c1\ncharacter special file a:fa' ]] ||
			fail "the container's CDI device nodes are not the spec's: $got"
		got=$(open_errno "$ctr" /dev/infiniband/uverbs1)
		[[ $got == ENXIO || $got == ENODEV ]] ||
			fail "opening the CDI device uverbs1 in the container: $got (the cgroup must let it reach the kernel)"
		[[ $(in_ctr "$ctr" printenv HPN_RDMA_DEVICE_RNIC1) == mlx5_1 ]] ||
			fail "the container lacks the spec's env"
		cdi_hints "$ctr" rdma-pod

		# Another pod's container naming rnic1's device: refused by the hook.
		rt_pod thief '{}'
		other=$(runp thief)
		if try_ctr "$other" thief '[]' '[]' "$cdi"; then
			fail "a container of pod thief was given rnic1's device, which pod rdma-pod holds"
		fi
		grep -q "attached to pod hpnr/rdma-pod, not to this container's pod" "$T/create.err" ||
			fail "the container in thief failed, but not with the hook's message: $(<"$T/create.err")"
		info "thief refused: $(grep -o 'hpn-rdma: NIC.*' "$T/create.err" | head -n 1 | cut -c1-160)"
		# Never ran: no process of it; the kubelet removes it, as here.
		jq_ok '[.containers[] | select(.podSandboxId == $p) | .state] - ["CONTAINER_CREATED",
			"CONTAINER_EXITED"] == []' "the refused container never ran" "$(cri ps)" --arg p "$other"
		[[ -z $OUT ]] || cri rm "$OUT" || fail "RemoveContainer of the refused container failed"
		stop_remove "$other"
	fi
	cri stop "$ctr" || fail "StopContainer failed"
	cri rm "$ctr" || fail "RemoveContainer failed"
	stop_remove "$id"
	ip -n "$RTN_NS" link show rnic1 >/dev/null 2>&1 || fail "rnic1 did not come back"
}

scenario "a pod's container gets Allocate's devices, not privileged; without the resource, EPERM" \
	allocated_devices
scenario "CDI: the kubelet's CDI_devices alone give the device; another pod's container is refused" \
	cdi_devices
rt_done
