#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq programs are single-quoted on purpose
# runtime tier: a DRA claim through a real containerd and runc, the way the
# kubelet drives a DRA driver. hpn-rdma-agent --dra runs on the node against
# the kubelet stand-in hpn-kubelet (registration, NodePrepareResources,
# NodeUnprepareResources) and the API stand-in of test/kube (ResourceSlices
# the agent publishes, the ResourceClaim it reads and whose status it writes).
# The flow: the slices name the pool's NICs; a claim allocates two of them in
# the order rnic2, rnic1 (the scheduler's, not the pool's); the kubelet
# prepares it (the claim's CDI device) before RunPodSandbox; ADD asks the agent
# by the pod's UID and attaches exactly rnic2 and rnic1, in the claim's order;
# a container created with only the claim's CDI device (CRI CDI_devices, what
# the kubelet passes) has both NICs' verbs nodes and may open them, and not
# rnic3's, which the claim does not hold (made by hand: EPERM), and reads its
# pod's NCCL hints at /etc/nccl.conf, read-only, from the claim's spec, and the
# claim's device metadata (networkData of hpn0, hpn1; generation 2), read-only; the
# claim's status names hpn0 with its address and MAC. Then the kubelet restarted (the
# agent registers again and answers the same Prepare), the API down (Prepare
# of a new claim is that claim's error; the pod's DEL unaffected), and
# Unprepare with the API still down (spec and record gone). containerd 1.6
# resolves no CDI device: there the container part is skipped and said.
#
# What stands in for what: as in devices.sh, the agent reads a fake sysfs tree
# (mlx5_N serving rnicN, uverbsN) and --dev-root points its specs at device
# nodes this test makes with the kernel's numbers; the plugin reads the real
# /sys (veths, rdmaRequired false).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=../kube/lib.sh
source "$(dirname "$0")/../kube/lib.sh"

OPT_IN='{"alibabacloud.com/hpn-type": "rdma"}'
DRV=hpn-rdma.alibabacloud.com
CLAIM_UID=9c1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f
AGENT_PID=

[[ -x ${HPN_AGENT:-} ]] || skip "hpn-rdma-agent was not built (${HPN_AGENT:-HPN_AGENT unset})"
[[ -x ${HPN_KUBELET:-} ]] || skip "the kubelet stand-in was not built (${HPN_KUBELET:-HPN_KUBELET unset})"
command -v python3 >/dev/null || skip "python3 is needed in the containers (the host's /usr)"
command -v openssl >/dev/null || skip "openssl is needed for the API stand-in's certificates"

rt_init

S=$T/agent-sysfs
KL=$T/kl
KUBE_WORK=$T/kube
KUBE_RESOURCES=$KUBE_WORK/res

# mlx5_N serving rnicN, N = 1..3, with uverbsN (231:192+N) and rdma_cm.
mk_fake_rdma() {
	local n ib
	mkdir -p "$S/class/misc/rdma_cm" "$T/dev/infiniband"
	for n in 1 2 3; do
		ib=$S/class/infiniband/mlx5_$n
		mkdir -p "$ib/ports/1/gids" "$ib/ports/1/gid_attrs/ndevs" "$ib/ports/1/gid_attrs/types" \
			"$S/class/infiniband_verbs/uverbs$n"
		echo "1: CA" >"$ib/node_type"
		echo "4: ACTIVE" >"$ib/ports/1/state"
		echo "Ethernet" >"$ib/ports/1/link_layer"
		echo "fe80:0000:0000:0000:0000:00ff:fe00:000$n" >"$ib/ports/1/gids/0"
		echo "rnic$n" >"$ib/ports/1/gid_attrs/ndevs/0"
		echo "RoCE v2" >"$ib/ports/1/gid_attrs/types/0"
		echo "mlx5_$n" >"$S/class/infiniband_verbs/uverbs$n/ibdev"
		echo "231:$((192 + n))" >"$S/class/infiniband_verbs/uverbs$n/dev"
		mknod -m 0666 "$T/dev/infiniband/uverbs$n" c 231 $((192 + n))
	done
	echo 10:250 >"$S/class/misc/rdma_cm/dev"
	mknod -m 0666 "$T/dev/infiniband/rdma_cm" c 10 250
}

dra_exit() {
	local rc=$?
	[[ -n $AGENT_PID ]] && kill "$AGENT_PID" 2>/dev/null
	kubelet_stop
	api_stop
	rtn_cleanup
	exit $rc
}
trap dra_exit EXIT

# The kubelet stand-in, its pid in a file: a scenario (a subshell) restarts it.
kubelet_start() {
	"$HPN_KUBELET" serve -dir "$KL" -out "$T/kubelet.events" -pods "$T/pods.json" \
		2>>"$T/kubelet.log" &
	echo $! >"$T/kubelet.pid"
}

kubelet_stop() {
	stop_pidfile "$T/kubelet.pid"
}

# stop_pidfile FILE: its process gone within 5 s (not the caller's child when a
# scenario, a subshell, started it: no wait). A process left would hold the
# test's output open, and ctest would wait for it.
stop_pidfile() {
	local pid i
	pid=$(cat "$1" 2>/dev/null) || return 0
	kill "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	rm -f "$1"
}

# The API on the node's loopback, a service account for the agent; its pid
# in a file, as the kubelet's.
api_start() {
	# shellcheck disable=SC2034 # kube_start reads it
	KUBE_PY_WRAP=(nsenter -t "$RTN_NODE_PID" -m -n --)
	kube_start "$KUBE_WORK/pods" || fail "the API stand-in did not start"
	echo "$KUBE_PID" >"$T/api.pid"
	echo "dra-agent-token" >"$KUBE_WORK/tokens"
}

api_stop() {
	stop_pidfile "$T/api.pid"
}

mk_fake_rdma
mkdir -p "$KUBE_WORK/pods" "$KUBE_WORK/sa" "$KUBE_RESOURCES"
kube_pki
api_start
echo "dra-agent-token" >"$KUBE_WORK/sa/token"
cp "$KUBE_WORK/pki/ca.crt" "$KUBE_WORK/sa/ca.crt"
echo '[]' >"$T/pods.json"
kubelet_start
rt_conflist | jq -c --arg s "$S" --arg a "$T/agent.sock" '.plugins |= map(
	if .type == "hpn-rdma" then .sysfsRoot = $s | .agent = {socket: $a} else . end)' \
	>"$T/agent.conflist"
for ((i = 0; i < 100; i++)); do [[ -S $KL/device-plugins/kubelet.sock ]] && break; sleep 0.05; done
# The service account's API, as a pod's environment names it.
# shellcheck disable=SC2154 # KUBE_PORT_good: set by kube_start (printf -v)
export KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$KUBE_PORT_good
# nsenter execs the agent: AGENT_PID is the agent's.
nsenter -t "$RTN_NODE_PID" -m -n -- "$HPN_AGENT" --config "$T/agent.conflist" --kubelet-dir "$KL" --dev-root "$T/dev" \
	--cdi-dir "$RTN_CDI_DIR" --cdi-hook "$HPN_PLUGIN" --poll-interval 1 --cri-socket none \
	--dra --node-name node1 --kubeconfig "$KUBE_WORK/agent.kubeconfig" \
	--service-account "$KUBE_WORK/sa" 2>"$T/agent.log" &
AGENT_PID=$!
DRA_SOCK=$KL/plugins/$DRV/dra.sock
for ((i = 0; i < 200; i++)); do
	[[ -S $KL/plugins_registry/$DRV-reg.sock && -S $DRA_SOCK ]] && break
	sleep 0.05
done
[[ -S $DRA_SOCK ]] || fail "the agent's DRA driver does not serve: $(tail -n 5 "$T/agent.log")"
"$HPN_KUBELET" dra-register -dir "$KL" -driver "$DRV" >/dev/null ||
	fail "the kubelet's registration of the driver failed: $(tail -n 5 "$T/agent.log")"
rtn_conflist "$(rt_conflist | jq -c --arg a "$T/agent.sock" '.plugins |= map(
	if .type == "hpn-rdma" then .agent = {socket: $a, required: true} else . end)')"
rtn_wait_network "$NET"

# device_of IFNAME: the DRA device the published slices name for host NIC IFNAME.
device_of() {
	local f
	for f in "$KUBE_RESOURCES"/resourceslices/*.json; do
		[[ -f $f ]] || continue
		jq -r --arg i "$1" '.spec.devices[] | select(.attributes.interface.string == $i) | .name' "$f"
	done | head -n 1
}

# mk_claim NAME UID POD_UID DEVICE...: an allocated ResourceClaim in hpnr.
mk_claim() {
	local name=$1 uid=$2 pod=$3
	shift 3
	kube_claim hpnr "$name" "$uid" "$DRV" node1 rdma-pod "$pod" "$@"
}

prepare() {
	"$HPN_KUBELET" dra-prepare -socket "$DRA_SOCK" "$@"
}

# ctr_cdi POD_ID NAME CDI_JSON: container "main" with CRI CDI_devices only; sets OUT.
ctr_cdi() {
	local mounts='[]' d
	for d in /usr /bin /lib /lib64; do
		[[ -e $d ]] || continue
		mounts=$(jq -c --arg d "$d" '. + [{containerPath: $d, hostPath: $d, readonly: true}]' <<<"$mounts")
	done
	jq -n --argjson m "$mounts" --argjson cdi "$3" --arg img "$RTN_IMAGE" '{
		metadata: {name: "main", attempt: 0}, image: {image: $img},
		command: ["/pause"], mounts: $m, CDI_devices: [$cdi[] | {name: .}],
		logPath: "main/0.log"}' >"$T/pods/$2.ctr.json"
	OUT=$(cri create "$1" "$T/pods/$2.ctr.json" "$T/pods/$2.json" 2>"$T/create.err") ||
		fail "CreateContainer in $2 failed: $(<"$T/create.err")"
	cri start "$OUT" 2>"$T/create.err" || fail "StartContainer in $2 failed: $(<"$T/create.err")"
}

claim_flow() {
	local d1 d2 pod id ctr got cdi i status mac addr prepared meta
	for ((i = 0; i < 100; i++)); do
		d1=$(device_of rnic1)
		d2=$(device_of rnic2)
		[[ -n $d1 && -n $d2 ]] && break
		sleep 0.1
	done
	[[ -n $d1 && -n $d2 ]] ||
		fail "no published slice names rnic1 and rnic2: $(ls "$KUBE_RESOURCES/resourceslices" 2>&1)"
	rt_pod rdma-pod "$OPT_IN"
	pod=$(pod_uid rdma-pod)
	mk_claim nics "$CLAIM_UID" "$pod" "$d2" "$d1"

	# The kubelet prepares before it makes the sandbox.
	prepared=$(prepare -version v1 "hpnr/nics/$CLAIM_UID") || fail "Prepare failed"
	cdi="alibabacloud.com/hpn-rdma=claim-$CLAIM_UID"
	jq_ok '.[$u].error == "" and [.[$u].devices[].device] == [$d2, $d1] and
		([.[$u].devices[].cdi[]] | unique) == [$c]' "Prepare: rnic2's and rnic1's devices, one CDI device" \
		"$prepared" --arg u "$CLAIM_UID" --arg d1 "$d1" --arg d2 "$d2" --arg c "$cdi"

	id=$(runp rdma-pod)
	for i in 1 2; do
		ip -n "$RTN_NS" link show "rnic$i" >/dev/null 2>&1 && fail "rnic$i, a NIC of the claim, is still on the node"
	done
	for i in 0 3; do
		ip -n "$RTN_NS" link show "rnic$i" >/dev/null 2>&1 || fail "rnic$i, not in the claim, was taken"
	done
	# The claim's order: hpn0 is rnic2 (its MAC), hpn1 rnic1.
	mac=$(rtn_in nsenter --net="$(pod_netns "$id")" ip -j link show hpn0 | jq -r '.[0].address')
	[[ $mac == "${NIC_MACS[2]}" ]] || fail "hpn0 is $mac, not rnic2 (${NIC_MACS[2]}): the claim's order"
	mac=$(rtn_in nsenter --net="$(pod_netns "$id")" ip -j link show hpn1 | jq -r '.[0].address')
	[[ $mac == "${NIC_MACS[1]}" ]] || fail "hpn1 is $mac, not rnic1 (${NIC_MACS[1]})"

	if [[ $RTN_CTRD == 1.6 ]]; then
		info "containerd 1.6 resolves no CDI device: the container part is 1.7's and 2.1's"
	else
		ctr_cdi "$id" rdma-pod "[\"$cdi\"]"
		ctr=$OUT
		got=$(in_ctr "$ctr" stat -c '%t:%T' /dev/infiniband/uverbs1 /dev/infiniband/uverbs2 \
			/dev/infiniband/rdma_cm)
		[[ $got == $'e7:c1\ne7:c2\na:fa' ]] || fail "the container's nodes are not the claim's: $got"
		for i in 1 2; do
			got=$(open_errno "$ctr" "/dev/infiniband/uverbs$i")
			[[ $got == ENXIO || $got == ENODEV ]] ||
				fail "opening the claim's uverbs$i in the container: $got (the cgroup must let it through)"
		done
		in_ctr "$ctr" test ! -e /dev/infiniband/uverbs3 || fail "the container has uverbs3, not the claim's"
		in_ctr "$ctr" mknod /dev/uverbs3 c 231 195
		got=$(open_errno "$ctr" /dev/uverbs3)
		[[ $got == EPERM ]] || fail "the container opened uverbs3, not the claim's: $got, not EPERM"
		got=$(in_ctr "$ctr" printenv "HPN_RDMA_DEVICE_CLAIM_$(tr a-z- A-Z_ <<<"$CLAIM_UID")")
		[[ $got == mlx5_2,mlx5_1 ]] || fail "the claim's env names '$got', not mlx5_2,mlx5_1"
		# The pod's NCCL hints, from the claim's spec, with no mount in the CRI config.
		got=$(ctr_read "$ctr" /etc/nccl.conf)
		[[ $got == "$(cat "$HINTS/$pod/nccl.conf")" ]] ||
			fail "/etc/nccl.conf in the container is not its pod's hints: $got"
		got=$(in_ctr "$ctr" python3 -c 'import errno
try:
	open("/etc/nccl.conf", "a")
	print("writable")
except OSError as e:
	print(errno.errorcode[e.errno])')
		[[ $got == EROFS ]] || fail "the container's /etc/nccl.conf is not read-only: $got"
		# The claim's device metadata (KEP-5304), with the networkData ADD gave it, read-only.
		meta=/var/run/kubernetes.io/dra-device-attributes/resourceclaims/nics/nics/$DRV-metadata.json
		got=$(ctr_read "$ctr" "$meta")
		jq -se 'map(.apiVersion) == ["metadata.resource.k8s.io/v1beta1", "metadata.resource.k8s.io/v1alpha1"]
			and all(.[]; .metadata.generation == 2
				and (.requests[0].devices | map(.networkData.interfaceName)) == ["hpn0", "hpn1"])' \
			<<<"$got" >/dev/null || fail "the container's device metadata is not the claim's after ADD: $got"
		got=$(in_ctr "$ctr" python3 -c 'import errno, sys
try:
	open(sys.argv[1], "a")
	print("writable")
except OSError as e:
	print(errno.errorcode[e.errno])' "$meta")
		[[ $got == EROFS ]] || fail "the container's device metadata is not read-only: $got"
		cri stop "$ctr" || fail "StopContainer failed"
		cri rm "$ctr" || fail "RemoveContainer failed"
	fi

	# The claim's status: hpn0 with its address and MAC, Ready.
	addr=$(rtn_in nsenter --net="$(pod_netns "$id")" ip -j addr show hpn0 |
		jq -r '.[0].addr_info[] | select(.family == "inet") | "\(.local)/\(.prefixlen)"')
	for ((i = 0; i < 100; i++)); do
		status=$(jq -c '.status.devices // []' "$KUBE_RESOURCES/hpnr/resourceclaims/nics.json")
		[[ $status == *hpn0* ]] && break
		sleep 0.1
	done
	jq_ok 'map(select(.device == $d2))[0] | .driver == $drv and .pool == "node1" and
		.networkData.interfaceName == "hpn0" and (.networkData.ips | index($a)) != null and
		(.networkData.hardwareAddress | ascii_downcase) == $m and
		any(.conditions[]; .type == "Ready" and .status == "True")' \
		"the claim's status: hpn0, its address and MAC, Ready" "$status" \
		--arg d2 "$d2" --arg drv "$DRV" --arg a "$addr" --arg m "${NIC_MACS[2]}"

	# The kubelet restarted: the driver registers again, the same Prepare answers the same.
	kubelet_stop
	kubelet_start
	"$HPN_KUBELET" dra-register -dir "$KL" -driver "$DRV" >/dev/null ||
		fail "no registration after the kubelet's restart: $(tail -n 5 "$T/agent.log")"
	got=$(prepare -version v1beta1 "hpnr/nics/$CLAIM_UID") || fail "Prepare after the restart failed"
	[[ $(jq -S . <<<"$got") == "$(jq -S . <<<"$prepared")" ]] ||
		fail "Prepare after the kubelet's restart answered otherwise: $got"

	# The API down: a new claim's Prepare is its error; the pod's DEL is unaffected.
	api_stop
	mk_claim other 1a2b3c4d-0000-4000-8000-000000000001 "$pod" "$(device_of rnic3)"
	got=$(prepare -version v1 "hpnr/other/1a2b3c4d-0000-4000-8000-000000000001") ||
		fail "Prepare with the API down failed as a call (it must answer the claim's error)"
	jq_ok '.["1a2b3c4d-0000-4000-8000-000000000001"].error | length > 0' \
		"Prepare with the API down: the claim's error" "$got"
	stop_remove "$id"
	for i in 1 2; do
		ip -n "$RTN_NS" link show "rnic$i" >/dev/null 2>&1 || fail "rnic$i did not come back"
	done

	# Unprepare, the API still down: the spec and the record gone.
	"$HPN_KUBELET" dra-unprepare -socket "$DRA_SOCK" -version v1 "hpnr/nics/$CLAIM_UID" >/dev/null ||
		fail "Unprepare failed"
	[[ ! -e $RTN_CDI_DIR/alibabacloud.com-hpn-rdma_claim-$CLAIM_UID.json ]] ||
		fail "the claim's CDI spec is left after Unprepare"
	[[ ! -e $STATE/dra/$CLAIM_UID.json ]] || fail "the claim's record is left after Unprepare"
}

scenario "a DRA claim: slices, Prepare, ADD of exactly its NICs in order, its CDI device, its status" \
	claim_flow
rt_done
