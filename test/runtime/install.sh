#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq programs are single-quoted on purpose
# runtime tier: the cluster install (conf/k8s/hpn-rdma.yaml) run by a real
# containerd from hpn-rdma's own image (build/hpn-rdma-image.tar, imported
# with ctr), as the kubelet would run the DaemonSet's pods: hostPath mounts
# into a throwaway host root, the service account's projected volume, the
# host network. The containers are the manifest's own, translated by
# daemonset.py (its args, mounts and security context; host paths remapped
# to scratch directories: the CNI bin and conf dirs are this node's
# containerd's own, so what the installer puts there is what containerd
# runs). Scenarios (their code: install-start.sh, install-change.sh):
#   install     the files installed, each by rename only (an inotify watch on
#               the CNI dirs: no final name is ever written in place, no temp
#               name is one a runtime loads); the conflist the ConfigMap's,
#               the plugin's kubeconfig (0600) holding a token of its own
#               ServiceAccount the installer asked the API for, never the
#               agent's; containerd loads the
#               network and a pod gets hpn0 from the installed plugin, which
#               runs on its bundle (its loader under /opt/hpn-rdma)
#   restart     the init container again: nothing rewritten (inodes, mtimes)
#   agent       the DaemonSet's container: registers with the kubelet
#               stand-in; its own token rotated as the kubelet does it (a new
#               ..data directory, the symlink renamed), the old one revoked:
#               its next list is made with the new one, and no file on the
#               node holds either; the plugin's kubeconfig renewed with a new
#               token at start; SIGTERM stops it
#   agent-ipv6  the same container once more on an IPv6 node (HOST_IP
#               fd00::5, bare, as the Downward API gives it; on the node's
#               lo): it starts and serves /metrics at its --metrics-address
#               (loopback: the labels name pods), nothing of it is on the
#               node's IP, and the metrics proxy's address there, from the
#               same HOST_IP, is a bracketed IPv6 address it can bind
#   upgrade     a pod attached by the installed plugin; a newer image's
#               installer swaps the plugin while an old plugin process runs
#               (it finishes on its own binary and bundle); DEL by the new one
#               gives the NIC back; the next install drops the old bundle
#   uninstall   hpn-rdma-uninstall.yaml's container with a pod attached: the
#               conflist and kubeconfig go, the plugin stays and it says why;
#               the pod removed, the plugin and bundles go; its readiness
#               probe (uninstall --check) says so
# What stands in: the node is test/runtime/node.sh's; the kubelet's part is
# played by this script (CRI calls through hpn-cri) and, for the device
# plugin, by test/agent/kubelet (hpn-kubelet); the API server by
# test/kube/apiserver.py on the node's loopback (the TokenRequest of the
# plugin's token, the agent's pod cache; the pods' annotations decide
# everything, so the plugin itself asks for nothing).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=../kube/lib.sh
source "$(dirname "$0")/../kube/lib.sh"

MANIFEST=$HPN_SRC/conf/k8s/hpn-rdma.yaml
UNINSTALL=$HPN_SRC/conf/k8s/hpn-rdma-uninstall.yaml
IMAGE=${HPN_IMAGE_NAME:-}
KEY=20-hpn-rdma-gpu.conflist
OPT_IN='{"alibabacloud.com/hpn-type": "rdma", "alibabacloud.com/gpu-model-series": "gpu-hpn",
	"alibabacloud.com/gpu-count": "8"}'

[[ -n ${HPN_IMAGE:-} && -f ${HPN_IMAGE:-} ]] ||
	skip "${HPN_IMAGE_WHY:-the image archive is not built (${HPN_IMAGE:-HPN_IMAGE unset})}"
[[ -x ${HPN_KUBELET:-} ]] || skip "the kubelet stand-in was not built (${HPN_KUBELET:-HPN_KUBELET unset})"
command -v inotifywait >/dev/null || skip "inotifywait is not installed (Debian: inotify-tools)"
/usr/bin/python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml is not installed"
command -v podman >/dev/null || skip "podman is not installed (Debian: podman)"
command -v curl >/dev/null || skip "curl is not installed (scripts/install-deps.sh)"
command -v openssl >/dev/null || skip "openssl is not installed (scripts/install-deps.sh)"
DIGEST_FILE=${HPN_IMAGE%.tar}.digest
[[ -s $DIGEST_FILE ]] || skip "the build wrote no $DIGEST_FILE"

# Background helpers (the kubelet stand-in, inotifywait) are started inside
# a scenario's subshell: their PIDs go to a file, so that the EXIT trap ends
# them even when a scenario failed half-way.
install_exit() {
	local rc=$? pid
	if [[ -n ${T:-} && -f $T/bg.pids ]]; then
		while read -r pid; do kill "$pid" 2>/dev/null || true; done <"$T/bg.pids"
	fi
	# The test's status, not the loop's (rt_exit would exit with the latter).
	rtn_cleanup
	exit $rc
}

bg_started() { echo "$1" >>"$T/bg.pids"; }

rt_init
trap install_exit EXIT

# The "host": containerd's own CNI dirs, and scratch for the rest.
HOSTR=$T/host
CNIBIN=$RTN_DIR/cni/bin
CNICONF=$RTN_DIR/cni/net.d
KL=$T/kl
RUNDIR=$T/run-hpn-rdma
BUNDLE=$HOSTR/opt/hpn-rdma
SA=$T/sa
CM=$T/configmap
# (The agent's /var/run/netns: an empty scratch dir; containerd's pods' netns
# are under its state dir here, and the agent's scenario needs none.)
mkdir -p "$BUNDLE" "$KL/device-plugins" "$KL/pod-resources" "$RUNDIR" "$SA" "$CM" "$T/logs/ds" \
	"$T/netns" "$T/nri"
MAP=(--map "/opt/cni/bin=$CNIBIN" --map "/etc/cni/net.d=$CNICONF" --map "/var/lib/kubelet=$KL"
	--map "/run/hpn-rdma=$RUNDIR" --map "/var/lib/cni/hpn-rdma=$STATE"
	--map "/var/lib/cni/networks=$IPAM" --map "/opt/hpn-rdma=$BUNDLE" --keep /opt/hpn-rdma
	--map "/run/containerd/containerd.sock=$RTN_SOCK" --map "/var/run/netns=$T/netns"
	--map "/var/run/cdi=$RTN_CDI_DIR" --map "/var/run/nri=$T/nri")
KUBECONFIG_HOST=$CNICONF/hpn-rdma.d/hpn-rdma.kubeconfig

# The plugin's loader is /opt/hpn-rdma/<id>/lib/ld-linux*: the node sees the
# scratch bundle root there (its own mount namespace; the host's is untouched).
if [[ ! -d /opt/hpn-rdma ]]; then
	mkdir -p /opt/hpn-rdma
	RTN_MADE_DIRS=(/opt/hpn-rdma "${RTN_MADE_DIRS[@]}")
fi
rtn_in mount --bind "$BUNDLE" /opt/hpn-rdma || fail "cannot mount the bundle root on the node"

# The ConfigMap's conflist, as this node runs it (rt_conflist's changes on
# the manifest's own conflist), the one file of its volume.
/usr/bin/python3 -c 'import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
	if d and d["kind"] == "ConfigMap":
		sys.stdout.write(d["data"][sys.argv[2]])' "$MANIFEST" "$KEY" >"$T/cm.conflist" ||
	fail "no ConfigMap key $KEY in $MANIFEST"
# shellcheck disable=SC2034 # rt_conflist (lib.sh) reads it
EXAMPLE=$T/cm.conflist
# agent.required off: scenarios 3 and 6 attach pods with no agent running (the
# shipped conflist requires it: netns.agent-trust runs that).
rt_conflist | jq --arg kc "$KUBECONFIG_HOST" --arg sock "$RUNDIR/agent.sock" '.plugins |= map(
	if .type == "hpn-rdma" then .kubernetes.kubeconfig = $kc | .agent.socket = $sock |
		.agent.required = false else . end)' \
	>"$CM/$KEY"

# The service account's projected volume, as the kubelet writes it.
sa_version() { # sa_version N TOKEN: the ..data swap of the kubelet's atomic writer
	local v=..2026_01_01_00_00_0$1.$$
	mkdir "$SA/$v"
	printf '%s' "$2" >"$SA/$v/token"
	cp "$T/ca.crt" "$SA/$v/ca.crt"
	ln -sfn "$v" "$SA/..data_tmp"
	mv -T "$SA/..data_tmp" "$SA/..data"
	ln -sfn ..data/token "$SA/token"
	ln -sfn ..data/ca.crt "$SA/ca.crt"
}
# The API server: the stand-in on the node's loopback, the one the
# containers' KUBERNETES_SERVICE_HOST/PORT name; the agent's tokens are its
# users, and may ask for the plugin's ServiceAccount's token (the manifest's
# Role).
KUBE_WORK=$T/kube
mkdir -p "$KUBE_WORK/pods"
kube_pki || fail "the stand-in's PKI could not be made"
cp "$KUBE_WORK/pki/ca.crt" "$T/ca.crt"
install_exit() {
	local rc=$?
	kube_stop
	rtn_cleanup
	exit $rc
}
KUBE_PY_WRAP=(rtn_in)
kube_start "$KUBE_WORK/pods" || fail "the API stand-in did not start on the node"
trap install_exit EXIT
# shellcheck disable=SC2154 # KUBE_PORT_good: set by kube_start (printf -v)
API=127.0.0.1:$KUBE_PORT_good
printf '%s\n' "token-one.$$" >"$KUBE_WORK/tokens"
echo "hpn-rdma/hpn-rdma-plugin token-one.$$ token-two.$$" >"$KUBE_WORK/token-requests"
sa_version 1 "token-one.$$"
printf hpn-rdma >"$SA/namespace"

rtn_ctrd ctr -a "$RTN_SOCK" -n k8s.io images import "$HPN_IMAGE" >/dev/null ||
	fail "ctr could not import $HPN_IMAGE"
# (The list taken whole first: grep -q would end the pipe early, and ctr's SIGPIPE fail it.)
imgs=$(rtn_ctrd ctr -a "$RTN_SOCK" -n k8s.io images ls) || fail "ctr images ls failed"
[[ $(awk -v n="$IMAGE" '$1 == n { print $3 }' <<<"$imgs") == "$(cat "$DIGEST_FILE")" ]] ||
	fail "ctr imported $HPN_IMAGE but lists no $IMAGE at $(cat "$DIGEST_FILE"): $imgs"
# Only the installer's conflist from now on.
rm -f "$CNICONF"/*

# ds_pod NAME: the DaemonSet's pod sandbox (host network: no CNI call).
ds_pod() {
	local uid
	uid=$(cat /proc/sys/kernel/random/uuid)
	mkdir -p "$T/logs/ds/$1"
	jq -n --arg name "$1" --arg uid "$uid" --arg logs "$T/logs/ds/$1" --arg cg "$RTN_CGROUP" '{
		metadata: {name: $name, uid: $uid, namespace: "hpn-rdma", attempt: 0},
		logDirectory: $logs,
		linux: {cgroupParent: $cg, securityContext: {namespaceOptions:
			{network: "NODE", pid: "CONTAINER", ipc: "POD"}}}}' >"$T/pods/$1.json"
	cri runp "$T/pods/$1.json" || fail "RunPodSandbox $1 failed"
}

# The node's address as the Downward API gives it (status.hostIP): IPv4, or
# IPv6 without brackets.
HOST_IP=127.0.0.1

# ds_ctr POD_ID POD_NAME MANIFEST DAEMONSET init|main CONTAINER [ATTEMPT]: create
# and start it, on a node whose address is $HOST_IP; prints its ID.
ds_ctr() {
	local id
	/usr/bin/python3 "$HPN_SRC/test/runtime/daemonset.py" "$3" "$4" "$5" "$6" "$6/${7:-0}.log" \
		"${MAP[@]}" --configmap "$CM" --service-account "$SA" --image "$IMAGE" \
		--host-ip "$HOST_IP" --api-server "$API" |
		jq --argjson a "${7:-0}" '.metadata.attempt = $a' >"$T/pods/$2.$6.json" ||
		fail "daemonset.py could not translate $4's $6"
	id=$(cri create "$1" "$T/pods/$2.$6.json" "$T/pods/$2.json") || fail "CreateContainer $6 failed"
	cri start "$id" || fail "StartContainer $6 failed"
	echo "$id"
}

# ctr_log POD_NAME CONTAINER [ATTEMPT]: what it printed (the CRI log's messages).
ctr_log() {
	sed -E 's/^[^ ]+ (stdout|stderr) [PF] //' "$T/logs/ds/$1/$2/${3:-0}.log" 2>/dev/null
}

# run_to_end ID: until the container exits (60 s at most); prints its exit code.
run_to_end() {
	local i st
	for ((i = 0; i < 600; i++)); do
		st=$(cri inspect "$1") || fail "ContainerStatus $1 failed"
		if [[ $(jq -r .state <<<"$st") == CONTAINER_EXITED ]]; then
			jq -r .exitCode <<<"$st"
			return 0
		fi
		sleep 0.1
	done
	fail "container $1 did not exit in 60 s"
}

# install_once POD_NAME [ATTEMPT] [IMAGE]: the DaemonSet's init container to its end; must exit 0.
install_once() {
	local pod id rc saved=$IMAGE
	IMAGE=${3:-$IMAGE}
	pod=$(ds_pod "$1")
	id=$(ds_ctr "$pod" "$1" "$MANIFEST" hpn-rdma init install "${2:-0}")
	IMAGE=$saved
	rc=$(run_to_end "$id")
	[[ $rc == 0 ]] || fail "the install container exited $rc: $(ctr_log "$1" install "${2:-0}")"
	cri rm "$id" >/dev/null || fail "RemoveContainer failed"
	cri stopp "$pod" >/dev/null || fail "the install pod did not stop"
	cri rmp "$pod" >/dev/null || fail "the install pod was not removed"
}

# snap: inode, mode and mtime of everything installed.
snap() {
	find "$CNIBIN/hpn-rdma" "$CNICONF" "$BUNDLE" -printf '%p %i %m %T@\n' 2>/dev/null | sort
}

attached_pod() { # attached_pod NAME: an opted-in pod that got hpn0; prints its ID
	local id
	rt_pod "$1" "$OPT_IN"
	id=$(runp "$1")
	[[ -n $(find "$STATE/$NET" -type f 2>/dev/null) ]] || fail "$1 has no journal"
	nsenter -t "$(pod_pid "$id")" -n ip link show hpn0 >/dev/null 2>&1 || fail "$1 has no hpn0"
	echo "$id"
}

# ctr_end POD_ID CTR_ID [CODE]: SIGTERM; it must exit CODE (0); container and pod removed.
ctr_end() {
	local rc
	cri stop -t 10 "$2" >/dev/null || fail "StopContainer $2 failed"
	rc=$(cri inspect "$2" | jq -r .exitCode)
	[[ $rc == "${3:-0}" ]] || fail "container $2 exited $rc on SIGTERM, not ${3:-0}"
	cri rm "$2" >/dev/null
	stop_remove "$1"
}

# The scenarios: the DaemonSet's pods starting (install, restart, agent,
# agent-ipv6), then what changes the node or proves the image (upgrade,
# uninstall, the image built again, podman load); sourcing the second builds
# and imports the newer image the upgrade installs.
# shellcheck source=install-start.sh
source "$(dirname "$0")/install-start.sh"
# shellcheck source=install-change.sh
source "$(dirname "$0")/install-change.sh"

# The image's own properties do not depend on the runtime: checked once, with
# containerd 1.6 (the matrix's other versions run the install itself).
if [[ $RTN_CTRD == 1.6 ]]; then
	scenario "image: built again from a copy elsewhere, the same build IDs, archive and digest" reproducible
	scenario "podman load: the image under its name and digest" podman_load
fi
scenario "install: by rename only, the ConfigMap's conflist, the kubeconfig, a pod attached" install_fresh
scenario "restart: the init container again rewrites nothing" install_restart
scenario "agent: registers; the plugin's token renewed; its own rotates in memory; SIGTERM" agent_rotation
scenario "agent-ipv6: on an IPv6 node it starts, serves on loopback, not on the node's IP" agent_ipv6
scenario "upgrade: the plugin swapped under a running one; DEL by the new; old bundle dropped" upgrade
scenario "uninstall: conflist first, the plugin kept while a pod holds a NIC; drained: all gone" uninstall_held
rt_done
