# shellcheck shell=bash disable=SC2030,SC2031,SC2016,SC2034 # jq programs; globals for the scripts
# Shared helpers of the runtime tier: hpn-rdma run by a real containerd,
# driven through the CRI as kubelet drives it. Source it from a test script,
# then call rt_init; each scenario runs through `scenario` and must leave the
# node exactly as rt_init found it (rt_node_state), which `scenario` checks.
#
# The node (node.sh): netns hpnr-<pid>-node with POOL stand-in NICs
# (rnic0.., veth ends, MTU 1500) and the bridge the bridge plugin makes, its
# own containerd and the pods' cgroups under /hpnr-<pid>. Its network is
# conf/10-hpn-rdma-containerd.conflist, the example shipped for
# /etc/cni/net.d, with only what belongs to this node changed (rt_conflist).
# hpn-rdma runs behind test/runtime/record.sh, so every call containerd made
# is on record in $CALLS (rt_calls).
#
# Exit codes: 0 pass, 1 fail (a FAIL line says what), 77 skipped (SKIP says why).

set -euo pipefail
shopt -s inherit_errexit

# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
# shellcheck source=node.sh
source "$(dirname "${BASH_SOURCE[0]}")/node.sh"

T=
CALLS=
STATE=
HINTS=
IPAM=
NET=hpnr-net
POOL=4
NIC_MTU=1500
POD_MTU=4200		# the example conflist's "mtu"
NIC_MACS=()		# rnicK and rpeerK MACs, to recreate a veth lost with a netns
PEER_MACS=()
BASELINE=
SCEN=0
SCEN_NAME=
LAST_RUN=
RC=0
OUT=
ERR=
START_NS=

# The example for this node's containerd: 2.x reads CNI 1.1.0 (and then calls
# STATUS), 1.6 and 1.7 stay at 1.0.0 (1.7 fails a 1.1.0 result in bridge).
EXAMPLE=${HPN_SRC:-}/conf/10-hpn-rdma-containerd.conflist
[[ ${HPN_CTRD:-1.6} != 2.* ]] || EXAMPLE=${HPN_SRC:-}/conf/10-hpn-rdma-containerd2.conflist

# rt_conflist: the example conflist as this node runs it. Changed: the network
# name, the bridge's name and subnets (inside the node only), no ipMasq (no
# iptables here), host-local's dataDir, and hpn-rdma's node-specific fields:
# the pool (the veth stand-ins instead of mlx5_core NICs, which have no RDMA
# device, hence rdmaRequired false), stateDir, logFile and nccl.dir. Kept:
# the chain, ifName, mtu, podSelector, the annotations capability, nccl.
rt_conflist() {
	jq -c --arg net "$NET" --arg ipam "$IPAM" --arg st "$STATE" --arg hints "$HINTS" \
		--arg log "$T/plugin.log" '
		.name = $net |
		.plugins |= map(
			if .type == "bridge" then
				.bridge = "hpnrbr0" | .ipMasq = false |
				.ipam.ranges = [[{subnet: "10.250.0.0/24"}]] | .ipam.dataDir = $ipam
			elif .type == "hpn-rdma" then
				.match = {devices: ["rnic*"]} | .rdmaRequired = false |
				.stateDir = $st | .logFile = $log | .nccl.dir = $hints |
				.ipam.ranges = [[{subnet: "10.251.0.0/24"}]] | .ipam.dataDir = $ipam
			else . end)' "$EXAMPLE"
}

rt_init() {
	local why k
	why=$(rtn_why_not)
	[[ -z $why ]] || skip "$why"
	[[ -n ${HPN_PLUGIN:-} && -x ${HPN_PLUGIN:-} ]] ||
		fail "plugin binary ${HPN_PLUGIN:-(HPN_PLUGIN unset)} is missing (run through ctest)"
	[[ -f $EXAMPLE ]] || fail "$EXAMPLE is missing (HPN_SRC)"
	START_NS=$(date +%s%N)
	T=$(mktemp -d /tmp/hpnr.XXXXXX)
	trap rt_exit EXIT
	CALLS=$T/calls
	STATE=$T/hpn-state
	HINTS=$T/hints
	IPAM=$T/ipam
	mkdir -p "$STATE" "$HINTS" "$IPAM" "$T/pods"
	SELF_BEFORE=$(self_snap)
	rtn_setup "$T"
	rtn_plugin "$HPN_PLUGIN" "$CALLS"
	rtn_nics "$POOL" "$NIC_MTU"
	for ((k = 0; k < POOL; k++)); do
		NIC_MACS[k]=$(ip -n "$RTN_NS" -j link show "rnic$k" | jq -r '.[0].address')
		PEER_MACS[k]=$(ip -n "$RTN_NS" -j link show "rpeer$k" | jq -r '.[0].address')
	done
	rtn_conflist "$(rt_conflist)"
	rtn_containerd_start
	rtn_import_image
	rtn_wait_network "$NET"
	# One pod that is not opted in, started and removed: the bridge plugin
	# makes its bridge (and keeps it), and containerd's first sandbox is slow.
	local id
	rt_pod warmup '{}'
	id=$(cri runp "$T/pods/warmup.json") || fail "the warm-up pod did not start"
	cri stopp "$id" || fail "the warm-up pod did not stop"
	cri rmp "$id" || fail "the warm-up pod was not removed"
	BASELINE=$(rt_node_state)
	rm -rf "${CALLS:?}"/*
	local v
	v=$(cri version | jq -r .runtimeVersion)
	# The test's name says which containerd it ran under: it must be that one.
	[[ ${v#v} == "$RTN_CTRD".* ]] || fail "HPN_CTRD=$RTN_CTRD, but containerd says $v"
	info "node ready: containerd $v, $(jq -r .cniVersion "$EXAMPLE") conflist, pool of $POOL," \
		"$((($(date +%s%N) - START_NS) / 1000000)) ms"
}

rt_exit() {
	local rc=$?
	rtn_cleanup
	exit $rc
}

# self_snap: the machine's own links and addresses (it must not change).
self_snap() {
	ip -j addr show | jq -c '[.[] | {ifname, mtu, operstate,
		a: [.addr_info[]? | "\(.local)/\(.prefixlen)"] | sort}] | sort_by(.ifname)'
}

# rt_done: the machine's own network is as before; the verdict and the time.
rt_done() {
	SCEN_NAME=
	LAST_RUN=
	[[ $(self_snap) == "$SELF_BEFORE" ]] || fail "the machine's own network changed"
	local ms=$((($(date +%s%N) - START_NS) / 1000000))
	if ((${#FAILED_SCENARIOS[@]} > 0)); then
		fail "$(basename "$0"): ${#FAILED_SCENARIOS[@]} of $SCEN scenarios failed:
$(printf '  - %s\n' "${FAILED_SCENARIOS[@]}")"
	fi
	echo "PASS: $(basename "$0") ($SCEN scenarios, $((ms / 1000)).$((ms % 1000 / 100)) s)"
}

# ---- the node's state --------------------------------------------------------

# rt_node_state: everything a pod may leave behind on the node, as JSON:
# links (name, MTU, up, MAC, kind, master) and addresses of the node's netns;
# hpn-rdma journals (the lock may stay), NCCL hints, host-local leases;
# containerd's sandboxes, containers and netns mounts; processes in the
# pods' cgroups; mounts under the scratch dir; netns the host's /run/netns got.
rt_node_state() {
	local links addrs netns mounts procs pods ctrs
	links=$(ip -n "$RTN_NS" -d -j link show)
	addrs=$(ip -n "$RTN_NS" -j addr show)
	pods=$(cri pods | jq -c '[.items[] | {id, name: .metadata.name, state}]')
	ctrs=$(cri ps | jq -c '[.containers[] | {id, name: .metadata.name, state}]')
	netns=$(rtn_in find "$T/state" -path '*/netns/*' 2>/dev/null | sort | jq -Rsc 'split("\n") | map(select(. != ""))')
	mounts=$(rtn_in findmnt -rn -o TARGET | { grep -F "$T/" || true; } | sort |
		jq -Rsc 'split("\n") | map(select(. != ""))')
	local cg=/sys/fs/cgroup/pids$RTN_CGROUP	# cgroup v1; v2 has one tree
	[[ -d /sys/fs/cgroup/pids ]] || cg=/sys/fs/cgroup$RTN_CGROUP
	procs=$({ find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null || true; } | wc -l)
	jq -n --argjson l "$links" --argjson a "$addrs" --argjson pods "$pods" \
		--argjson ctrs "$ctrs" --argjson netns "$netns" --argjson mounts "$mounts" \
		--argjson procs "$procs" \
		--arg journals "$(find "$STATE" -type f ! -name lock ! -name 'events.log*' | sort)" \
		--arg hints "$(find "$HINTS" -mindepth 1 | sort)" \
		--arg leases "$(find "$IPAM" -type f ! -name lock ! -name 'last_reserved_ip*' | sort)" \
		--arg hostns "$(ip netns list | awk '{print $1}' | grep '^cni-' || true)" '
		def lines: split("\n") | map(select(. != ""));
		{links: [$l[] | {ifname, mtu, address, up: (.flags | index("UP") != null),
			kind: (.linkinfo.info_kind // null), master: (.master // null)}] | sort_by(.ifname),
		 addrs: [$a[] | {ifname, a: [.addr_info[] | select(.scope != "link")
			| "\(.local)/\(.prefixlen)"] | sort} | select(.a | length > 0)] | sort_by(.ifname),
		 journals: ($journals | lines), hints: ($hints | lines), leases: ($leases | lines),
		 sandboxes: $pods, containers: $ctrs, netns_mounts: $netns, mounts: $mounts,
		 pod_processes: $procs, host_cni_netns: ($hostns | lines)}'
}

# node_as_before WHAT: the node is in its baseline state.
node_as_before() {
	local now
	now=$(rt_node_state)
	if [[ $now != "$BASELINE" ]]; then
		fail "$1: the node differs from before (- before, + now):
$(diff <(jq . <<<"$BASELINE") <(jq . <<<"$now") | grep '^[<>]' | sed 's/^</-/; s/^>/+/')"
	fi
}

# force_clean: after a failed scenario, remove every pod and bring back lost
# stand-in NICs, so that the next scenario starts from the baseline.
force_clean() {
	local id k
	set +e
	[[ -n $(rtn_ctrd_pid) ]] || rtn_containerd_start
	for id in $(cri pods | jq -r '.items[].id'); do
		cri stopp "$id" >/dev/null 2>&1
		cri rmp "$id" >/dev/null 2>&1
	done
	for ((k = 0; k < POOL; k++)); do
		ip -n "$RTN_NS" link show "rnic$k" >/dev/null 2>&1 || restore_nic "$k"
	done
	set -e
}

# restore_nic K: stand-in K again as it was (a veth dies with the netns it is
# in; a real NIC would come back to the host).
restore_nic() {
	ip -n "$RTN_NS" link del "rpeer$1" 2>/dev/null || true
	ip -n "$RTN_NS" link add "rnic$1" address "${NIC_MACS[$1]}" mtu "$NIC_MTU" type veth \
		peer name "rpeer$1" address "${PEER_MACS[$1]}"
	ip -n "$RTN_NS" link set "rpeer$1" up
}

# scenario NAME FUNCTION [ARGS...]: run one scenario in a subshell; then the
# node must be as before. A failure is recorded, the node is cleaned, and the
# next scenario still runs.
FAILED_SCENARIOS=()
scenario() {
	local name=$1 rc t0
	shift
	SCEN=$((SCEN + 1))
	t0=$(date +%s%N)
	info "scenario $SCEN: $name"
	set +e
	(
		set -e
		SCEN_NAME=$name
		rm -rf "${CALLS:?}"/* "$T/plugin.log"
		"$@"
		node_as_before "end of scenario"
	)
	rc=$?
	set -e
	if ((rc != 0)); then
		FAILED_SCENARIOS+=("$name")
		force_clean
		BASELINE_NOW=$(rt_node_state)
		[[ $BASELINE_NOW == "$BASELINE" ]] ||
			echo "WARNING: the node could not be brought back after [$name]" >&2
	fi
	info "scenario $SCEN: $((($(date +%s%N) - t0) / 1000000)) ms"
}

# ---- pods and containers, as kubelet makes them -------------------------------

# rt_pod NAME ANNOTATIONS_JSON [LABELS_JSON]: $T/pods/NAME.json, the pod's
# PodSandboxConfig (a fresh UID, namespace "hpnr", the pods' cgroup parent).
rt_pod() {
	local name=$1 ann=$2 labels=${3:-'{}'} uid
	uid=$(cat /proc/sys/kernel/random/uuid)
	mkdir -p "$T/logs/$uid"
	jq -n --arg name "$name" --arg uid "$uid" --argjson ann "$ann" --argjson labels "$labels" \
		--arg logs "$T/logs/$uid" --arg cg "$RTN_CGROUP" '{
		metadata: {name: $name, uid: $uid, namespace: "hpnr", attempt: 0},
		hostname: $name, logDirectory: $logs, labels: $labels, annotations: $ann,
		linux: {cgroupParent: $cg, securityContext: {namespaceOptions:
			{network: "POD", pid: "CONTAINER", ipc: "POD"}}}}' >"$T/pods/$name.json"
}

pod_uid() {
	jq -r .metadata.uid "$T/pods/$1.json"
}

# try_runp NAME: RunPodSandbox for pod NAME; sets RC, OUT (the sandbox ID) and ERR.
try_runp() {
	LAST_RUN="RunPodSandbox $1"
	set +e
	OUT=$(cri runp "$T/pods/$1.json" 2>"$T/cri.err")
	RC=$?
	set -e
	ERR=$(<"$T/cri.err")
}

# runp NAME: RunPodSandbox that must succeed; prints the sandbox ID.
runp() {
	try_runp "$1"
	((RC == 0)) || fail "RunPodSandbox $1 failed: $ERR"
	echo "$OUT"
}

# kubelet_subpath HOSTPATH SUBPATH: the host path kubelet mounts for a volume
# mount with subPath(Expr): HOSTPATH/SUBPATH, created as a directory when it
# does not exist (kubelet does that, after the sandbox and so after CNI ADD).
kubelet_subpath() {
	local p=$1/$2
	[[ -e $p ]] || mkdir -p "$p"
	echo "$p"
}

# rt_container POD_ID POD_NAME: create and start container "main" in the pod,
# as kubelet would for the seed Deployment: the pause image as its root, the
# host's /usr, /bin, /lib, /lib64 read-only over it (so ip and cat run), and
# the hints volume: hostPath = the network's nccl.dir, subPathExpr
# $(POD_UID)/nccl.conf, mountPath /etc/nccl.conf, read-only. Prints its ID.
rt_container() {
	local pod=$1 name=$2 uid hints mounts id d
	uid=$(pod_uid "$name")
	hints=$(kubelet_subpath "$HINTS" "$uid/nccl.conf")
	mounts='[]'
	for d in /usr /bin /lib /lib64; do
		[[ -e $d ]] || continue
		mounts=$(jq -c --arg d "$d" '. + [{containerPath: $d, hostPath: $d, readonly: true}]' <<<"$mounts")
	done
	mounts=$(jq -c --arg h "$hints" '. + [{containerPath: "/etc/nccl.conf", hostPath: $h,
		readonly: true}]' <<<"$mounts")
	jq -n --argjson m "$mounts" --arg uid "$uid" --arg img "$RTN_IMAGE" '{
		metadata: {name: "main", attempt: 0}, image: {image: $img},
		command: ["/pause"], envs: [{key: "POD_UID", value: $uid}],
		mounts: $m, logPath: "main/0.log"}' >"$T/pods/$name.ctr.json"
	id=$(cri create "$pod" "$T/pods/$name.ctr.json" "$T/pods/$name.json") ||
		fail "CreateContainer in $name failed"
	cri start "$id" || fail "StartContainer $id failed"
	echo "$id"
}

# in_ctr ID CMD...: ExecSync in the container; its stdout (fails on non-zero).
in_ctr() {
	local id=$1 out
	shift
	out=$(cri exec "$id" "$@" 2>"$T/exec.err") ||
		fail "ExecSync $* in $id failed ($?): $(<"$T/exec.err")"
	echo "$out"
}

# ctr_read ID FILE: FILE's text in container ID, a file never empty. An exec
# whose process exits at once can lose its output in the runtime's copy (seen
# once in this tier, under load): an empty answer is asked again, twice.
ctr_read() {
	local out try
	for try in 1 2 3; do
		out=$(in_ctr "$1" cat "$2")
		[[ -z $out ]] || break
	done
	[[ -n $out ]] || fail "$2 in $1 read empty three times"
	echo "$out"
}

# open_errno ID PATH: the errno name of opening PATH read-write in container ID
# ("OK" when it opens).
open_errno() {
	# shellcheck disable=SC2016 # a Python program
	in_ctr "$1" python3 -c 'import errno, os, sys
try:
	os.close(os.open(sys.argv[1], os.O_RDWR))
	print("OK")
except OSError as e:
	print(errno.errorcode[e.errno])' "$2"
}

# pod_netns ID: the netns path containerd made for the sandbox.
pod_netns() {
	cri inspectp "$1" | jq -r '.info.info.runtimeSpec.linux.namespaces[]
		| select(.type == "network") | .path'
}

# pod_pid ID: the sandbox's pause process.
pod_pid() {
	cri inspectp "$1" | jq -r '.info.info.pid'
}

# stop_remove ID: StopPodSandbox then RemovePodSandbox, both must succeed.
stop_remove() {
	cri stopp "$1" || fail "StopPodSandbox $1 failed"
	cri rmp "$1" || fail "RemovePodSandbox $1 failed"
}

# ---- what containerd passed ------------------------------------------------------

# rt_calls [CID]: the recorded hpn-rdma calls (of sandbox CID), in order.
rt_calls() {
	local f
	shopt -s nullglob
	local files=("$CALLS"/*.json)
	shopt -u nullglob
	if ((${#files[@]} == 0)); then
		echo '[]'
		return
	fi
	jq -s --arg c "${1:-}" '[.[] | select($c == "" or .cid == $c)] | sort_by(.t)' "${files[@]}"
}

# nccl_env FILE_CONTENT: a hints file's KEY=value lines as a JSON object, read
# with NCCL's rules (first = splits, # comments, nothing trimmed).
nccl_env() {
	jq -Rsc 'split("\n") | map(select(. != "" and (startswith("#") | not))
		| capture("^(?<key>[^=]*)=(?<value>.*)$")) | from_entries' <<<"$1"
}
