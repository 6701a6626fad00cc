# shellcheck shell=bash
# runtime.nri's pods: the seed's sandboxes and containers as the kubelet makes
# them, and what their specs and the running containers show. Sourced by nri.sh.

# ---- pods as the kubelet makes them for the managed service -------------------------

SEED_LABELS=$(jq -c .metadata.labels "$SEED_FIXTURE")
jq_ok '.["alibabacloud.com/hpn-type"] == "rdma" and .["alibabacloud.com/gpu-model-series"] == "GU8TF"' \
	"the seed's labels" "$SEED_LABELS"

# api_pod NAME LABELS: the pod's sandbox config (rt_pod: no annotation) and its
# Pod in the API stand-in: the seed's (8 nvidia.com/gpu) under the sandbox's
# identity, with LABELS.
api_pod() {
	rt_pod "$1" '{}' "$2"
	jq --arg name "$1" --arg uid "$(pod_uid "$1")" --argjson l "$2" '
		.metadata.namespace = "hpnr" | .metadata.name = $name | .metadata.uid = $uid |
		.metadata.labels = $l' "$SEED_FIXTURE" >"$KUBE_WORK/pods/hpnr/$1.json"
}

# bind_rdma SANDBOX_ID: the RDMA device of the pod's NIC written into its
# journal as ADD journals it on a node with RDMA (see the header); prints K,
# the index of the NIC (rnicK, mlx5_K) the plugin attached.
bind_rdma() {
	local j=$STATE/$NET/$1.eth0 nic
	[[ -f $j ]] || fail "no journal of sandbox $1 ($j)"
	nic=$(jq -r '.nics | if length == 1 then .[0].host.name else "" end' "$j")
	[[ $nic =~ ^rnic[0-9]+$ ]] || fail "the journal of $1 holds not one pool NIC: $(jq -c .nics "$j")"
	jq_ok '.phase == 4 and (.nics[0].rdma == null)' "the journal of $1: attached, no RDMA device" \
		"$(<"$j")"
	jq -c --arg n "mlx5_${nic#rnic}" --arg d "$nic" \
		'.nics[0].rdma = {name: $n, netdev: $d, moved: false}' "$j" >"$T/journal.new"
	mv "$T/journal.new" "$j"
	echo "${nic#rnic}"
}

# seed_pod NAME: RunPodSandbox of a seed pod, attached, its journal naming
# its RDMA device; sets POD (sandbox ID) and K (its NIC's index).
seed_pod() {
	api_pod "$1" "$SEED_LABELS"
	POD=$(runp "$1")
	K=$(bind_rdma "$POD")
}

# ctr NAME POD_ID POD_NAME [JQ [JQ_ARGS...]]: container NAME in the pod as the
# managed service's pod has it: the image and its command, nothing else (JQ
# edits the config: devices, mounts, CDI); created and started. Sets CTR and
# PID (its process, seen from here: the node has no pid namespace of its own).
ctr() {
	local name=$1 pod=$2 pname=$3 edit=${4:-.}
	shift $(($# < 4 ? $# : 4))
	jq -n --arg name "$name" --arg img "$RTN_IMAGE" '{metadata: {name: $name, attempt: 0},
		image: {image: $img}, command: ["/pause"], logPath: ($name + "/0.log")}' |
		jq "$@" "$edit" >"$T/pods/$pname.$name.json"
	CTR=$(cri create "$pod" "$T/pods/$pname.$name.json" "$T/pods/$pname.json" 2>"$T/create.err") ||
		fail "CreateContainer $name in $pname failed: $(<"$T/create.err")"
	cri start "$CTR" 2>"$T/create.err" ||
		fail "StartContainer $name in $pname failed: $(<"$T/create.err")"
	PID=$(rtn_ctrd ctr -a "$RTN_SOCK" -n k8s.io tasks ls | awk -v c="$CTR" '$1 == c { print $2 }')
	[[ $PID =~ ^[0-9]+$ && -d /proc/$PID ]] || fail "no process of container $name ($CTR)"
}

# may_raise_limits: this process has CAP_SYS_RESOURCE (runc, run by the same root, too).
may_raise_limits() {
	local cap
	cap=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
	(((16#$cap >> 24) & 1))
}

# spec ID: the OCI spec containerd handed runc for container ID (runc_wrap kept it).
spec() {
	[[ -f $RTN_DIR/specs/$1.json ]] || fail "runc was not run for container $1 (no spec kept)"
	cat "$RTN_DIR/specs/$1.json"
}

# spec_view ID: what NRI may change of container ID's spec, as one JSON line:
# devices (path, type, major, minor, fileMode), allow rules of character
# devices ([major, minor, access]), the /etc/nccl.conf mounts, the
# RLIMIT_MEMLOCK entries as strings (exact: jq would round 2^64-1).
spec_view() {
	spec "$1" | python3 -c '
import json, sys
s = json.load(sys.stdin)
lin = s.get("linux") or {}
out = {
	"devices": [{k: d.get(k) for k in ("path", "type", "major", "minor", "fileMode")}
		    for d in lin.get("devices") or []],
	"rules": [[r.get("major"), r.get("minor"), r.get("access")]
		  for r in (lin.get("resources") or {}).get("devices") or []
		  if r.get("allow") and r.get("type") == "c"],
	"nccl": [m for m in s.get("mounts") or [] if m.get("destination") == "/etc/nccl.conf"],
	"memlock": [[str(r.get("soft")), str(r.get("hard"))]
		    for r in (s.get("process") or {}).get("rlimits") or []
		    if r.get("type") == "RLIMIT_MEMLOCK"],
}
print(json.dumps(out, sort_keys=True))'
}

# want_devs K...: spec_view's devices for the NICs K... (uverbsK each) and rdma_cm.
want_devs() {
	local k out='[]'
	for k; do
		out=$(jq -c --argjson k "$k" '. + [{path: "/dev/infiniband/uverbs\($k)", type: "c",
			major: 231, minor: (192 + $k), fileMode: 438}]' <<<"$out")
	done
	jq -c '. + [{path: "/dev/infiniband/rdma_cm", type: "c", major: 10, minor: 250,
		fileMode: 438}]' <<<"$out"
}

# memlock_of PID: its RLIMIT_MEMLOCK, "SOFT HARD" (bytes, or unlimited).
memlock_of() {
	awk '/^Max locked memory/ { print $4 " " $5 }' "/proc/$1/limits"
}

# The container's own view, from the host: its device nodes' type and numbers.
ctr_nodes() {
	local pid=$1 f
	shift
	for f; do
		stat -c '%n %F %t:%T' "/proc/$pid/root$f" | sed "s|^/proc/$pid/root||"
	done
}

# adjusted ID K WHAT: container ID (process PID) of the pod whose NIC is K has,
# as containerd handed it to runc, exactly K's device nodes and rdma_cm, one
# allow rule each (rw), the pod's hints read-only at /etc/nccl.conf (HINTS_FILE)
# and RLIMIT_MEMLOCK unlimited; inside, the nodes exist with those numbers, the
# file is the pod's and mounted read-only, the limit is what runc could set.
adjusted() {
	local id=$1 k=$2 what=$3 view got mnt lim
	view=$(spec_view "$id")
	jq_ok '.devices == $d' "$what: the spec's devices are exactly uverbs$k and rdma_cm" \
		"$view" --argjson d "$(want_devs "$k")"
	jq_ok '(.rules | map(.[0:2]) | sort) == ([[231, 192 + $k], [10, 250]] | sort) and
		all(.rules[]; .[2] | test("^rw"))' \
		"$what: one allow rule (rw) for each of its devices, no other character device" \
		"$view" --argjson k "$k"
	jq_ok '.nccl | length == 1 and (.[0] | .source == $f and .type == "bind" and
		(.options | index("ro") and index("bind")))' \
		"$what: its hints file bind-mounted read-only at /etc/nccl.conf" "$view" \
		--arg f "$HINTS_FILE"
	jq_ok '.memlock == [[$u, $u]]' "$what: RLIMIT_MEMLOCK unlimited" "$view" --arg u "$UNLIMITED"
	got=$(ctr_nodes "$PID" "/dev/infiniband/uverbs$k" /dev/infiniband/rdma_cm)
	[[ $got == "/dev/infiniband/uverbs$k character special file e7:$(printf %x $((192 + k)))
/dev/infiniband/rdma_cm character special file a:fa" ]] ||
		fail "$what: the device nodes in the container: $got"
	[[ $(<"/proc/$PID/root/etc/nccl.conf") == "$(<"$HINTS_FILE")" ]] ||
		fail "$what: /etc/nccl.conf in the container is not the pod's hints file"
	mnt=$(awk '$5 == "/etc/nccl.conf" { print $6 }' "/proc/$PID/mountinfo")
	[[ ,$mnt, == *,ro,* ]] || fail "$what: /etc/nccl.conf is not mounted read-only inside ($mnt)"
	lim=$(memlock_of "$PID")
	if [[ -s $RTN_DIR/runc-wrap.log ]] && grep -q "^$id: " "$RTN_DIR/runc-wrap.log"; then
		local hard
		hard=$(memlock_of "$(rtn_ctrd_pid)")
		hard=${hard#* }
		[[ $lim == "$hard $hard" ]] ||
			fail "$what: RLIMIT_MEMLOCK inside is $lim, not runc's hard limit $hard"
	else
		[[ $lim == "unlimited unlimited" ]] || fail "$what: RLIMIT_MEMLOCK inside is $lim"
	fi
	if [[ -d /sys/fs/cgroup/devices ]]; then
		# cgroup v1: the rules runc wrote, read from the host.
		local cg rules
		cg=$(awk -F: '$2 == "devices" { print $3 }' "/proc/$PID/cgroup")
		rules=$(<"/sys/fs/cgroup/devices$cg/devices.list")
		[[ $'\n'$rules$'\n' == *$'\n'"c 231:$((192 + k)) rw"$'\n'* &&
			$'\n'$rules$'\n' == *$'\n'"c 10:250 rw"$'\n'* &&
			$'\n'$rules$'\n' != *$'\na *:* rwm\n'* ]] ||
			fail "$what: the container's device cgroup lacks its devices' rules: $rules"
	fi
}

# untouched ID WHAT: nothing of NRI's in container ID's spec.
untouched() {
	jq_ok '.devices == [] and .rules == [] and .nccl == [] and .memlock == []' \
		"$2: no device, rule, /etc/nccl.conf mount or RLIMIT_MEMLOCK" "$(spec_view "$1")"
	! grep -q "^$1: " "$RTN_DIR/runc-wrap.log" 2>/dev/null || fail "$2: runc_wrap lowered a limit"
}

# gone CTR...: StopContainer and RemoveContainer.
gone() {
	local c
	for c; do
		cri stop "$c" >/dev/null || fail "StopContainer $c failed"
		cri rm "$c" >/dev/null || fail "RemoveContainer $c failed"
	done
}

hints_of() {
	echo "$HINTS/$(pod_uid "$1")/nccl.conf"
}
