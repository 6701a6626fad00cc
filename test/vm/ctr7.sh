# shellcheck shell=bash
# The runtime tier's throwaway containerd node (test/runtime/node.sh) inside
# the vm7 guest: helpers of vm7-hpn-containers.sh, sourced after lib.sh. The
# node's netns gets the guest's virtio NICs as its pool; its network is a
# conflist of bridge (eth0) and hpn-rdma with softRoce (hpn0, an rxe made in
# the pod) that asks hpn-rdma-agent for the kubelet's allocation, so pods made
# through the CRI get a real RDMA device, and their containers get its verbs
# node through CRI `devices` from the agent's Allocate, as the kubelet passes
# a device plugin's DeviceSpecs (the kubelet stand-in hpn-kubelet makes the
# calls and serves PodResources).
#
# What the guest lacks and these helpers add: a cgroup filesystem (init
# mounts none; runc needs one: cgroup2 at /sys/fs/cgroup, kept for the boot)
# and a filesystem containerd's overlayfs snapshotter can use as upperdir
# (the guest root is an overlay over 9p, which overlayfs refuses: a tmpfs
# under $T holds the whole node). The bridge module autoloads (busybox
# modprobe over the kmods tree).
# shellcheck disable=SC2016 # jq programs are single-quoted on purpose

# The runtime tier's build products (what test/runtime/CMakeLists.txt passes).
: "${HPN_CRI:=${HPN_BUILD:-}/test/runtime/hpn-cri}"
: "${HPN_PAUSE_IMAGE:=${HPN_BUILD:-}/test/runtime/pause-image.tar}"
: "${HPN_PAUSE_IMAGE_NAME:=hpn.local/pause:hpn-test}"
: "${HPN_AGENT:=${HPN_BUILD:-}/agent/hpn-rdma-agent}"
: "${HPN_KUBELET:=${HPN_BUILD:-}/test/agent/hpn-kubelet}"
export HPN_CRI HPN_PAUSE_IMAGE HPN_PAUSE_IMAGE_NAME

# shellcheck source=../runtime/node.sh
source "$(dirname "${BASH_SOURCE[0]}")/../runtime/node.sh"

# The holder in the guest. The scenario runs in init's chroot (test/vm/init),
# so its root is not its mount namespace's: entering a mount namespace (setns)
# resets a process's root to that namespace's top, with whatever is mounted
# there -- in a copy of init's namespace the initramfs, with our root at
# /mnt/root. nsenter -m would then run a command on the initramfs, and so
# would every `runc exec` (CRI ExecSync), whose container root runc's
# pivot_root attaches where our root sits. So the holder's namespace gets our
# root moved on top of the initramfs (as switch_root does) first: from init's
# root (busybox's unshare, mount and chroot), our root's mount point there
# read from the two mountinfo files.
rtn_holder() {
	local id='' top='' w
	while read -r -a w; do
		[[ ${w[4]} == / ]] && id=${w[0]}
	done </proc/self/mountinfo
	while read -r -a w; do
		[[ ${w[0]} == "$id" ]] && top=${w[4]}
	done </proc/1/mountinfo
	[[ -n $top && $top != / ]] || {
		echo "ctr7.sh: cannot find this root's mount point in /proc/1/mountinfo" >&2
		exit 1
	}
	# shellcheck disable=SC2016 # the inner shell's
	exec nsenter --net="/run/netns/$RTN_NS" chroot /proc/1/root \
		/bin/busybox unshare -m --propagation private /bin/busybox sh -c \
		'cd "$1" && mount --move . / && exec chroot . /bin/bash -c "$2" hpnr-node "$3"' \
		sh "$top" "$RTN_HOLDER_SH" "$RTN_DIR"
}

VCTR_NET=hpnv7c	# the node's network name
VCTR_DIR=	# the tmpfs holding the node
VCTR_T0=	# vctr_ms's clock
declare -A VCTR_POD=()	# pod name -> sandbox ID

# vctr_ms: milliseconds since the last call (first call: 0).
vctr_ms() {
	local now=${EPOCHREALTIME/./}
	MS=$(((now - ${VCTR_T0:-$now}) / 1000))
	VCTR_T0=$now
}

# vctr_cgroup: cgroup2 at /sys/fs/cgroup unless something is mounted there.
vctr_cgroup() {
	local l
	while read -r l; do
		[[ $l == *" /sys/fs/cgroup "* ]] && return 0
	done </proc/self/mountinfo
	mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup ||
		fail "cannot mount cgroup2 at /sys/fs/cgroup"
}

# vctr_conflist PCI...: the node's network: bridge for eth0 (containerd needs
# its address), then hpn-rdma with softRoce over the NICs at PCI..., for pods
# annotated alibabacloud.com/hpn-type=rdma only.
vctr_conflist() {
	local pcis
	pcis=$(printf '%s\n' "$@" | jq -Rsc 'split("\n") | map(select(. != ""))')
	jq -cn --arg n "$VCTR_NET" --arg t "$T" --arg cdi "$RTN_CDI_DIR" --argjson p "$pcis" '{cniVersion: "1.0.0", name: $n,
		plugins: [
		{type: "bridge", bridge: "hpnvbr0", isGateway: true, ipMasq: false,
		 ipam: {type: "host-local", dataDir: ($t + "/ipam"), ranges: [[{subnet: "10.250.0.0/24"}]]}},
		{type: "hpn-rdma", capabilities: {"io.kubernetes.cri.pod-annotations": true},
		 ifName: "hpn0", softRoce: true, logLevel: "debug", match: {pciAddresses: $p},
		 podSelector: {annotation: "alibabacloud.com/hpn-type", value: "rdma"},
		 stateDir: ($t + "/state"), logFile: ($t + "/plugin.log"), nccl: {dir: ($t + "/hints")},
		 agent: {socket: ($t + "/agent.sock"), deviceDir: ($t + "/devdir"), cdiDir: $cdi,
			required: true},
		 ipam: {type: "host-local", dataDir: ($t + "/ipam"), ranges: [[{subnet: "10.251.0.0/24"}]]}}]}'
}

# vctr_up: the node with the guest's NICs as its pool, containerd serving
# CRI with the pause image and the network loaded (VCTR_CONFLIST names the
# function that writes it, given the NICs' PCI addresses: vctr_conflist by
# default). Timed (info lines). The caller's EXIT trap must call vctr_down.
VCTR_CONFLIST=vctr_conflist
vctr_up() {
	local nic
	vctr_cgroup
	local why
	why=$(rtn_why_not)
	[[ -z $why ]] || skip "$why"
	[[ -x ${HPN_PLUGIN:-} ]] || fail "HPN_PLUGIN ${HPN_PLUGIN:-(unset)} is not executable"
	VCTR_DIR=$T/node
	mkdir -p "$VCTR_DIR"
	mount -t tmpfs -o mode=0755 hpnv-node "$VCTR_DIR"
	vctr_ms
	rtn_setup "$VCTR_DIR/n"
	rtn_plugin "$HPN_PLUGIN"
	for nic in "${VM_NICS[@]}"; do
		ip link set "$nic" netns "$RTN_NS"
	done
	rtn_conflist "$("$VCTR_CONFLIST" "${VM_PCIS[@]}")"
	vctr_ms
	info "node netns and holder: $MS ms"
	rtn_containerd_start
	vctr_ms
	info "containerd $(cri version | jq -r .runtimeVersion) serving CRI: $MS ms"
	rtn_import_image
	rtn_wait_network "$VCTR_NET"
	vctr_ms
	info "pause image imported, network $VCTR_NET loaded: $MS ms"
}

# vctr_down: every pod stopped and removed (CNI DEL gives the NICs back to
# the node), the NICs back in the initial netns under their boot names,
# down, then the node gone (node.sh's rtn_cleanup) and its tmpfs.
vctr_down() {
	local id line i NAME MAC
	set +e
	if [[ -n $(rtn_ctrd_pid) ]]; then
		for id in $(cri pods 2>/dev/null | jq -r '.items[].id'); do
			cri stopp "$id" >/dev/null 2>&1
			cri rmp "$id" >/dev/null 2>&1
		done
	fi
	if [[ -e /run/netns/$RTN_NS ]]; then
		while read -r line; do
			vm_link_mac "$line"
			for i in "${!VM_MACS[@]}"; do
				[[ $MAC == "${VM_MACS[$i]}" ]] || continue
				ip -n "$RTN_NS" link set "$NAME" down
				ip -n "$RTN_NS" link set "$NAME" netns 1 name "${VM_BOOT_NAMES[$i]:-${VM_NICS[$i]}}"
			done
		done < <(ip -n "$RTN_NS" -o link show)
	fi
	# The logs, for a failure's post-mortem: run.sh keeps HPN_VM_OUT.
	cp -f "$T/plugin.log" "$T/agent.log" "$T/kubelet.log" "$T/kubelet.events" "${HPN_VM_OUT:-/nonexistent}/" 2>/dev/null
	[[ -n $VCTR_AGENT_PID ]] && kill "$VCTR_AGENT_PID" && wait "$VCTR_AGENT_PID"
	[[ -n $VCTR_KUBELET_PID ]] && kill "$VCTR_KUBELET_PID" && wait "$VCTR_KUBELET_PID"
	rtn_cleanup
	wait_for 20 vm_all_nics_home
	[[ -n $VCTR_DIR ]] && mountpoint -q "$VCTR_DIR" && umount "$VCTR_DIR"
	set -e
	return 0
}

# vctr_pod NAME ANNOTATIONS_JSON: RunPodSandbox of pod NAME (namespace hpnv,
# the node's cgroup parent, UID VCTR_UID or a new one); VCTR_POD[NAME] is its
# sandbox ID. Timed.
vctr_pod() {
	local name=$1 uid=${VCTR_UID:-} f=$VCTR_DIR/n/pods
	mkdir -p "$f"
	[[ -n $uid ]] || uid=$(</proc/sys/kernel/random/uuid)
	jq -n --arg name "$name" --arg uid "$uid" --argjson ann "$2" \
		--arg logs "$VCTR_DIR/n/logs/$uid" --arg cg "$RTN_CGROUP" '{
		metadata: {name: $name, uid: $uid, namespace: "hpnv", attempt: 0},
		hostname: $name, logDirectory: $logs, annotations: $ann,
		linux: {cgroupParent: $cg, securityContext: {namespaceOptions:
			{network: "POD", pid: "CONTAINER", ipc: "POD"}}}}' >"$f/$name.json"
	mkdir -p "$VCTR_DIR/n/logs/$uid"
	vctr_ms
	if [[ -n ${VCTR_FAILS:-} ]]; then
		# shellcheck disable=SC2034 # OUT is the caller's
		! OUT=$(cri runp "$f/$name.json" 2>&1) || fail "RunPodSandbox $name succeeded: $OUT"
		return 0
	fi
	VCTR_POD[$name]=$(cri runp "$f/$name.json") || fail "RunPodSandbox $name failed: $(tail -n 5 "$T/plugin.log" 2>/dev/null)"
	vctr_ms
	info "RunPodSandbox $name: $MS ms"
}

# vctr_pod_fails NAME ANNOTATIONS_JSON: RunPodSandbox as vctr_pod, which must
# fail; what the runtime said in OUT.
vctr_pod_fails() {
	VCTR_FAILS=1 vctr_pod "$@"
}

# vctr_fail_at STEP [kill]: the node's plugin, through a wrapper, from now on
# runs with HPN_FAIL_AT=STEP (and HPN_FAIL_KILL=1); no STEP: the plugin itself
# again. containerd runs the plugin from its CNI bin dir at every call.
vctr_fail_at() {
	local wrapper=$RTN_DIR/cni/bin/hpn-rdma
	rm -f "$wrapper"
	if [[ -z ${1:-} ]]; then
		ln -s "$HPN_PLUGIN" "$wrapper"
		return
	fi
	printf '#!/bin/bash\nexport HPN_FAIL_AT=%q%s\nexec %q "$@"\n' "$1" \
		"${2:+$'\n'export HPN_FAIL_KILL=1}" "$HPN_PLUGIN" >"$wrapper"
	chmod 0755 "$wrapper"
}

# vctr_pod_pid NAME: the pause process of pod NAME (its netns is the pod's).
vctr_pod_pid() {
	cri inspectp "${VCTR_POD[$1]}" | jq -r '.info.info.pid'
}

# vctr_rxe NAME: the rxe device on hpn0 in pod NAME (DEV) and its verbs
# device: UVERBS (uverbsN) with its MAJMIN (from /sys/class/infiniband_verbs).
DEV='' UVERBS='' MAJMIN=''
vctr_rxe() {
	local pid l d ib
	pid=$(vctr_pod_pid "$1")
	DEV='' UVERBS='' MAJMIN=''
	# Shared mode lists every pod's device; the netdev only of our own.
	while read -r l; do
		[[ $l =~ ^link\ (rxe_[0-9a-f]{12})/1\ state\ ACTIVE\ .*\ netdev\ hpn0($|\ ) ]] &&
			DEV=${BASH_REMATCH[1]}
	done < <(nsenter -t "$pid" -n rdma link show)
	[[ -n $DEV ]] || fail "pod $1 has no ACTIVE rxe on hpn0: $(nsenter -t "$pid" -n rdma link show)"
	for d in /sys/class/infiniband_verbs/uverbs*; do
		read -r ib <"$d/ibdev" || continue
		[[ $ib == "$DEV" ]] || continue
		UVERBS=${d##*/}
		read -r MAJMIN <"$d/dev"
	done
	[[ -n $UVERBS ]] || fail "no /sys/class/infiniband_verbs entry for $DEV"
}

# vctr_agent_up PODS_JSON: the kubelet stand-in (hpn-kubelet: registration,
# PodResources from PODS_JSON) and hpn-rdma-agent on the node, with the
# node's network as its config; returns once the agent listed its devices.
# vctr_down stops both.
VCTR_KL= VCTR_KUBELET_PID= VCTR_AGENT_PID=
vctr_agent_up() {
	local i
	[[ -x $HPN_AGENT ]] || skip "hpn-rdma-agent is not built ($HPN_AGENT)"
	[[ -x $HPN_KUBELET ]] || skip "the kubelet stand-in hpn-kubelet is not built ($HPN_KUBELET)"
	VCTR_KL=$T/kubelet
	mkdir -p "$VCTR_KL"
	echo "$1" >"$T/pods.json"
	"$HPN_KUBELET" serve -dir "$VCTR_KL" -out "$T/kubelet.events" -pods "$T/pods.json" \
		2>"$T/kubelet.log" &
	VCTR_KUBELET_PID=$!
	wait_for 20 test -S "$VCTR_KL/device-plugins/kubelet.sock" ||
		fail "the kubelet stand-in did not start: $(<"$T/kubelet.log")"
	rtn_in "$HPN_AGENT" --config "$RTN_DIR/cni/net.d/10-node.conflist" \
		--kubelet-dir "$VCTR_KL" --poll-interval 1 2>"$T/agent.log" &
	VCTR_AGENT_PID=$!
	for ((i = 0; i < 300; i++)); do
		[[ $(<"$T/kubelet.events") == *'"event":"list"'* ]] 2>/dev/null && return 0
		nap 0.1
	done
	fail "the agent did not register and list: $(tail -n 5 "$T/agent.log")"
}

# vctr_allocate ID: the kubelet's Allocate of device ID for one container, as
# the CRI devices of CreateContainer (what the kubelet passes on); the whole
# answer in $T/alloc-ID.json, and its CDI devices, as CRI CDIDevices, in
# $T/alloc-ID.cdi.
vctr_allocate() {
	"$HPN_KUBELET" allocate -socket "$VCTR_KL/device-plugins/hpn-rdma.sock" "$1" >"$T/alloc-$1.json" ||
		fail "Allocate of $1 failed: $(tail -n 3 "$T/agent.log")"
	jq -c '[.[0].cdi[] | {name: .}]' "$T/alloc-$1.json" >"$T/alloc-$1.cdi"
	jq -c '[.[0].devices[] | {containerPath: .container, hostPath: .host, permissions}]' \
		"$T/alloc-$1.json"
}

# vctr_ctr POD DEVICES_JSON [CDI_JSON]: container "main" in pod POD, not
# privileged, the pause image as its root with the guest's /usr, /bin, /lib,
# /lib64 and /etc/libibverbs.d (libibverbs' provider list) read-only over it,
# and the directories of VCTR_TOOLS (none by default) at their own paths,
# PATH through them (the image sets none), plus the CRI devices and CDI
# devices (ContainerConfig.CDI_devices, [{name}]: what a kubelet passes of
# Allocate's cdi_devices); created and started. VCTR_CTR is its ID. Timed.
VCTR_CTR=
VCTR_TOOLS=()
vctr_ctr() {
	local pod=$1 f=$VCTR_DIR/n/pods/$1 mounts='[]' d cdi=${3:-[]}
	for d in /usr /bin /lib /lib64 /etc/libibverbs.d ${VCTR_TOOLS[@]+"${VCTR_TOOLS[@]}"}; do
		[[ -e $d ]] && mounts=$(jq -c --arg d "$d" '. + [{containerPath: $d, hostPath: $d, readonly: true}]' <<<"$mounts")
	done
	jq -n --argjson m "$mounts" --argjson devs "$2" --argjson cdi "$cdi" --arg img "$RTN_IMAGE" '{
		metadata: {name: "main", attempt: 0}, image: {image: $img},
		command: ["/pause"], mounts: $m, devices: $devs, CDIDevices: $cdi, logPath: "main/0.log",
		envs: [{key: "PATH", value: "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}],
		linux: {securityContext: {privileged: false}}}' >"$f.ctr.json"
	vctr_ms
	VCTR_CTR=$(cri create "${VCTR_POD[$pod]}" "$f.ctr.json" "$f.json") ||
		fail "CreateContainer in $pod failed: $(tail -n 3 "$RTN_DIR/containerd.log")"
	vctr_ms
	info "CreateContainer in $pod: $MS ms"
	cri start "$VCTR_CTR" || fail "StartContainer in $pod failed: $(tail -n 3 "$RTN_DIR/containerd.log")"
	vctr_ms
	info "StartContainer in $pod: $MS ms"
}

# vctr_exec ID CMD...: ExecSync CMD in container ID; its output (stdout and
# stderr) in OUT and its status in RC. Never fails by itself.
# shellcheck disable=SC2034 # OUT and RC are the caller's
vctr_exec() {
	local id=$1
	shift
	set +e
	OUT=$(cri exec -t 120 "$id" "$@" 2>&1)
	RC=$?
	set -e
}
