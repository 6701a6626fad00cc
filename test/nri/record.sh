#!/bin/bash
# record.sh [--one-frame] OUTDIR: what a real containerd 2.1 sends an NRI
# plugin, recorded by nri-record (test/nri/record.c, on agent/nri/'s wire)
# against a throwaway containerd: the runtime tier's node (test/runtime/node.sh:
# its own netns, mount namespace, root, state and sockets under a mktemp dir)
# with NRI turned on and its socket in that dir. Nothing of the machine's own
# containerd or network is touched; everything is killed and removed on exit,
# failure included. Root; the environment of the runtime tier's tests
# (HPN_CRI, HPN_PAUSE_IMAGE, HPN_RUNTIME_CACHE) and HPN_NRI_RECORD, the
# nri-record binary. Run it from a build tree:
#
#   b=/tmp/b-nri; HPN_CRI=$b/test/runtime/hpn-cri HPN_PAUSE_IMAGE=$b/test/runtime/pause-image.tar \
#     HPN_NRI_RECORD=$b/test/nri/nri-record bash test/nri/record.sh /tmp/nri-rec
#
# The scenario: pod "nri-before" (labels, an annotation) with a running
# container "main" (env, a bind mount), then the recorder connects
# (RegisterPlugin; Configure and Synchronize carry that pod); then pod
# "nri-after" and its container (RunPodSandbox and CreateContainer, answered
# with a 6000-byte annotation split into 4096-byte frames, which the
# container's OCI spec must then carry), stopped and removed (the pod and
# container events); then containerd is stopped. OUTDIR gets recv.bin (every
# byte containerd sent, as read from the socket), sent.bin (what the recorder
# sent), NN-Method.pb (each call's payload), record.log and containerd.log.
#
# --one-frame: the negative control. The recorder sends each answer in one
# frame, as upstream's own writer would; containerd must drop it at the
# CreateContainer answer ("ttrpc: closed"), and the container is still
# created, unadjusted.
# Exit 0 when the scenario held, 1 (FAIL line) when not, 77 (SKIP) when it cannot run.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../common.sh
source "$here/../common.sh"
HPN_CTRD=2.1
# shellcheck source=../runtime/node.sh
source "$here/../runtime/node.sh"

one_frame=
if [[ ${1:-} == --one-frame ]]; then
	one_frame=--one-frame
	shift
fi
out=${1:?usage: record.sh [--one-frame] OUTDIR}
why=$(rtn_why_not)
[[ -z $why ]] || skip "$why"
[[ -x ${HPN_NRI_RECORD:-} ]] || skip "HPN_NRI_RECORD (the nri-record binary) is not set"
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/*.pb "$out"/*.bin "$out"/*.log

T=$(mktemp -d /tmp/hpnnri.XXXXXX)
REC_PID=
cleanup() {
	local rc=$?
	set +e
	[[ -n $REC_PID ]] && kill "$REC_PID" 2>/dev/null
	[[ -n $RTN_DIR && -f $RTN_DIR/containerd.log ]] && cp "$RTN_DIR/containerd.log" "$out/"
	rtn_cleanup
	rm -rf "$T"
	exit $rc
}
trap cleanup EXIT

rtn_setup "$T/node"
# NRI on, everything of it in the node's dir: its socket, and no plugin
# directory of the machine's (/opt/nri/plugins, /etc/nri/conf.d).
mkdir -p "$RTN_DIR"/nri/{plugins,conf.d}
grep -q "^ *\[plugins.'io.containerd.nri.v1.nri'\]" "$RTN_DIR/config.toml" &&
	fail "the migrated config already has an NRI section"
sed -i "s/, *'io.containerd.nri.v1.nri'//; s/'io.containerd.nri.v1.nri', *//" "$RTN_DIR/config.toml"
grep -q "io.containerd.nri.v1.nri" "$RTN_DIR/config.toml" &&
	fail "NRI is still disabled in $RTN_DIR/config.toml"
cat >>"$RTN_DIR/config.toml" <<-EOF

	[plugins.'io.containerd.nri.v1.nri']
	  disable = false
	  socket_path = '$RTN_DIR/nri/nri.sock'
	  plugin_path = '$RTN_DIR/nri/plugins'
	  plugin_config_path = '$RTN_DIR/nri/conf.d'
	  plugin_registration_timeout = '5s'
	  plugin_request_timeout = '2s'
EOF
mkdir -p "$T/ipam" "$T/pods" "$T/logs" "$T/data"
echo hello >"$T/data/file"
rtn_conflist "$(jq -nc --arg ipam "$T/ipam" '{cniVersion: "1.1.0", name: "nri-net",
	plugins: [{type: "bridge", bridge: "hpnnri0", isGateway: true, ipam: {type: "host-local",
	ranges: [[{subnet: "10.252.0.0/24"}]], dataDir: $ipam}}]}')"
rtn_containerd_start
rtn_import_image
rtn_wait_network nri-net
[[ -S $RTN_DIR/nri/nri.sock ]] || fail "containerd serves no NRI socket at $RTN_DIR/nri/nri.sock"

# pod NAME UID: its PodSandboxConfig; container NAME: its ContainerConfig.
pod() {
	jq -n --arg name "$1" --arg uid "$2" --arg logs "$T/logs/$1" --arg cg "$RTN_CGROUP" '{
		metadata: {name: $name, uid: $uid, namespace: "hpnr", attempt: 0},
		hostname: $name, logDirectory: $logs,
		labels: {app: $name, "alibabacloud.com/hpn-type": "rdma"},
		annotations: {"hpn.example/note": ("pod " + $name)},
		linux: {cgroupParent: $cg, securityContext: {namespaceOptions:
			{network: "POD", pid: "CONTAINER", ipc: "POD"}}}}' >"$T/pods/$1.json"
	mkdir -p "$T/logs/$1"
}
container() {
	jq -n --arg img "$RTN_IMAGE" --arg data "$T/data" '{
		metadata: {name: "main", attempt: 0}, image: {image: $img},
		command: ["/pause"], envs: [{key: "HPN_TEST", value: "1"}],
		labels: {role: "main"}, annotations: {"hpn.example/ctr": "main"},
		mounts: [{containerPath: "/data", hostPath: $data, readonly: true}],
		logPath: "main/0.log"}' >"$T/pods/$1.ctr.json"
}
run_pod() {
	local pod_id ctr_id
	pod_id=$(cri runp "$T/pods/$1.json") || fail "RunPodSandbox $1 failed"
	container "$1"
	ctr_id=$(cri create "$pod_id" "$T/pods/$1.ctr.json" "$T/pods/$1.json") ||
		fail "CreateContainer in $1 failed"
	cri start "$ctr_id" >/dev/null || fail "StartContainer $ctr_id failed"
	echo "$pod_id $ctr_id"
}

pod nri-before 11111111-2222-4333-8444-555555555555
ids=$(run_pod nri-before)
before_pod=${ids% *}

"$HPN_NRI_RECORD" "$RTN_DIR/nri/nri.sock" "$out" --pad 6000 $one_frame --seconds 100 \
	>"$out/record.log" 2>&1 &
REC_PID=$!
for ((i = 0; i < 100; i++)); do
	grep -q '^  synchronize:' "$out/record.log" && break
	sleep 0.1
done
grep -q '^  synchronize:' "$out/record.log" ||
	fail "the recorder was not synchronized in 10 s: $(tail -n 5 "$out/record.log")"

pod nri-after 66666666-7777-4888-9999-000000000000
ids=$(run_pod nri-after)
after_pod=${ids% *} after_ctr=${ids#* }
spec=$(find "$RTN_DIR/state" -path "*/$after_ctr/config.json" | head -n 1)
[[ -n $spec ]] || fail "no OCI spec of container $after_ctr under $RTN_DIR/state"
pad=$(jq -r '.annotations["hpn.test/pad"] // "" | length' "$spec")
if [[ -z $one_frame ]]; then
	((pad == 6000)) || fail "the container's spec lacks the 6000-byte annotation (has $pad bytes)"
	info "CreateContainer's answer (split into frames of at most 4096 bytes) applied: 6000 bytes"
else
	((pad == 0)) || fail "--one-frame: the annotation was applied ($pad bytes)"
	grep -q 'closing plugin 50-hpn-record' "$RTN_DIR/containerd.log" ||
		fail "--one-frame: containerd did not say it closed the plugin"
	info "--one-frame: containerd: $(grep -o 'closing plugin 50-hpn-record[^"]*' "$RTN_DIR/containerd.log" | head -n 1)"
fi
cri stopp "$after_pod" >/dev/null
cri rmp "$after_pod" >/dev/null
cri stopp "$before_pod" >/dev/null
cri rmp "$before_pod" >/dev/null
sleep 0.5
rtn_containerd_stop
for ((i = 0; i < 50; i++)); do
	kill -0 "$REC_PID" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$REC_PID" 2>/dev/null; then
	# Still connected: who else holds the runtime's end of the socket.
	info "no end of the NRI socket 5 s after containerd exited; its peers:" \
		"$(ss -xp 2>/dev/null | grep -F "$RTN_DIR/nri/nri.sock" | grep -o 'users:([^)]*))' | sort -u | tr '\n' ' ')"
	kill "$REC_PID"
fi
rc=0
wait "$REC_PID" || rc=$?
REC_PID=
info "recorder exited $rc: $(tail -n 1 "$out/record.log")"
[[ -n $one_frame ]] || ((rc == 0)) || fail "the recorder failed: $(tail -n 5 "$out/record.log")"
echo "PASS: record.sh: $(grep -c '^call ' "$out/record.log") calls recorded in $out"
