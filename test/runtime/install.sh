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
# runs). Scenarios:
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

install_fresh() {
	local id events bad name
	# The kubeconfig's hostPath directory exists before the container starts
	# (DirectoryOrCreate; containerd makes it here): made before the watch,
	# whose -r would race the installer into a directory made after it started.
	mkdir -p "$(dirname "$KUBECONFIG_HOST")"
	inotifywait -q -m -r -e create,close_write,moved_to,moved_from --format '%e %w%f' \
		"$CNIBIN" "$CNICONF" >"$T/events" 2>/dev/null </dev/null &
	local watch=$!
	bg_started "$watch"
	sleep 0.3
	install_once install-1
	sleep 0.3
	kill "$watch" 2>/dev/null
	wait "$watch" 2>/dev/null || true
	grep -q '^done: 4 item' <<<"$(ctr_log install-1 install)" ||
		fail "the installer did not install 4 items: $(ctr_log install-1 install)"
	# Never written in place under a name a runtime reads; temp names never loadable.
	for name in "$CNIBIN/hpn-rdma" "$CNICONF/$KEY" "$KUBECONFIG_HOST"; do
		grep -q "^MOVED_TO $name\$" "$T/events" || fail "$name did not arrive by rename"
		bad=$(grep -E "^(CREATE|CLOSE_WRITE[A-Z_,]*) $name\$" "$T/events" || true)
		[[ -z $bad ]] || fail "$name was written in place: $bad"
	done
	bad=$(awk '$1 ~ /CREATE|CLOSE_WRITE/ && $2 ~ /\.(conf|conflist|json)$/' "$T/events")
	[[ -z $bad ]] || fail "a file a runtime loads was written in place: $bad"
	# What is there.
	cmp -s "$CNICONF/$KEY" "$CM/$KEY" || fail "the installed conflist is not the ConfigMap's"
	[[ $(stat -c %a "$KUBECONFIG_HOST") == 600 ]] || fail "the kubeconfig is not 0600"
	head -n 1 "$KUBECONFIG_HOST" | grep -q '^# hpn-rdma-plugin-token: hpn-rdma/hpn-rdma-plugin until ' ||
		fail "the kubeconfig is not the plugin's own token: $(head -n 1 "$KUBECONFIG_HOST")"
	grep -qF "token: \"$(awk '{t = $2} END {print t}' "$KUBE_WORK/token-requests.issued")\"" \
		"$KUBECONFIG_HOST" || fail "the kubeconfig lacks the token the API issued for the plugin"
	! grep -qF "token-one.$$" "$KUBECONFIG_HOST" || fail "the agent's token is in the plugin's kubeconfig"
	grep -qF "server: \"https://$API\"" "$KUBECONFIG_HOST" ||
		fail "the kubeconfig does not name KUBERNETES_SERVICE_HOST:PORT"
	interp=$(readelf -l "$CNIBIN/hpn-rdma" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
	[[ $interp == /opt/hpn-rdma/*/lib/ld-* && -e $BUNDLE/${interp#/opt/hpn-rdma/} ]] ||
		fail "the installed plugin's loader $interp is not in the installed bundle"
	[[ $(rtn_in "$CNIBIN/hpn-rdma" --version) == "hpn-rdma "* ]] ||
		fail "the installed plugin does not run on the node"
	# containerd takes the network and runs the installed plugin for a pod.
	rtn_wait_network "$NET"
	id=$(attached_pod rdma-1)
	stop_remove "$id"
}

install_restart() {
	local before after
	before=$(snap)
	sleep 0.05
	install_once install-1 1
	grep -q '^nothing changed' <<<"$(ctr_log install-1 install 1)" ||
		fail "a second install changed something: $(ctr_log install-1 install 1)"
	after=$(snap)
	[[ $before == "$after" ]] || fail "a second install rewrote files:
$(diff <(echo "$before") <(echo "$after"))"
}

agent_rotation() {
	local pod id i old new KUBELET_PID
	echo '[]' >"$T/pods.json"
	"$HPN_KUBELET" serve -dir "$KL" -out "$T/kubelet.events" -pods "$T/pods.json" \
		>/dev/null 2>"$T/kubelet.log" </dev/null &
	KUBELET_PID=$!
	bg_started "$KUBELET_PID"
	for ((i = 0; i < 100; i++)); do [[ -S $KL/device-plugins/kubelet.sock ]] && break; sleep 0.05; done
	pod=$(ds_pod agent-1)
	id=$(ds_ctr "$pod" agent-1 "$MANIFEST" hpn-rdma main agent)
	for ((i = 0; i < 200; i++)); do
		jq -se 'map(select(.event == "list")) | last | .devices | length == '"$POOL" \
			"$T/kubelet.events" >/dev/null 2>&1 && break
		sleep 0.05
	done
	grep -q '"event":"list"' "$T/kubelet.events" ||
		fail "the agent did not register: $(ctr_log agent-1 agent | tail -n 5)"
	jq -se 'map(select(.event == "list")) | last | .devices | length == '"$POOL" \
		"$T/kubelet.events" >/dev/null || fail "the agent did not list the $POOL pool NICs: \
$(grep '"event":"list"' "$T/kubelet.events" | tail -n 1); agent: $(ctr_log agent-1 agent | tail -n 5)"
	# At start the plugin's kubeconfig gets a token of its own, by rename, 0600.
	for ((i = 0; i < 100; i++)); do
		(($(wc -l <"$KUBE_WORK/token-requests.issued") >= 2)) && break
		sleep 0.05
	done
	grep -qF "token: \"$(awk '{t = $2} END {print t}' "$KUBE_WORK/token-requests.issued")\"" \
		"$KUBECONFIG_HOST" || fail "the agent did not renew the plugin's token: $(ctr_log agent-1 agent | tail -n 3)"
	[[ $(stat -c %a "$KUBECONFIG_HOST") == 600 ]] || fail "the plugin's kubeconfig is not 0600"
	# Its own token rotated and the old one revoked: its next list is made with the new one.
	wait_list() { # wait_list TOKEN: a list of pods made with TOKEN
		for ((i = 0; i < 100; i++)); do
			grep -q "/api/v1/pods?.* token:${1:0:8} 200 " "$KUBE_WORK/requests.log" && return 0
			sleep 0.1
		done
		fail "no list of pods with ${1:0:8}...: $(tail -n 3 "$KUBE_WORK/requests.log"); agent: \
$(ctr_log agent-1 agent | tail -n 3)"
	}
	wait_list "token-one.$$"
	sa_version 2 "token-two.$$"
	printf '%s\n' "token-two.$$" >"$KUBE_WORK/tokens"
	sleep 0.5
	touch "$KUBE_WORK/pods/.drop-watches"
	wait_list "token-two.$$"
	old=$(grep -rlF -e "token-one.$$" -e "token-two.$$" "$CNICONF" "$RUNDIR" "$STATE" 2>/dev/null || true)
	[[ -z $old ]] || fail "the agent's token is in a file on the node: $old"
	cri stop -t 10 "$id" >/dev/null || fail "StopContainer agent failed"
	[[ $(cri inspect "$id" | jq -r .exitCode) == 0 ]] ||
		fail "the agent did not exit 0 on SIGTERM: $(ctr_log agent-1 agent | tail -n 3)"
	grep -q "kubeconfig .*: a token of service account hpn-rdma/hpn-rdma-plugin" <<<"$(ctr_log agent-1 agent)" ||
		fail "the agent's log does not say it renewed the plugin's token"
	# The image holds what the agent dlopen()s too: its API calls have their libcurl.
	grep -q 'pod cache: watching the pods of node' <<<"$(ctr_log agent-1 agent)" ||
		fail "the agent in the image has no pod cache: $(ctr_log agent-1 agent | grep -i 'curl\|pod cache')"
	cri rm "$id" >/dev/null
	stop_remove "$pod"
	kill "$KUBELET_PID" 2>/dev/null
	wait "$KUBELET_PID" 2>/dev/null || true
}

# ds_args DAEMONSET CONTAINER: its args as the kubelet would pass them on this
# node ($HOST_IP), one a line.
ds_args() {
	/usr/bin/python3 "$HPN_SRC/test/runtime/daemonset.py" "$MANIFEST" "$1" main "$2" x \
		"${MAP[@]}" --configmap "$CM" --service-account "$SA" --image "$IMAGE" \
		--host-ip "$HOST_IP" --api-server "$API" --args-only
}

# An IPv6 single-stack node (issue 40, finding 7): one more start of the
# agent's container, with HOST_IP as the Downward API gives it there.
agent_ipv6() {
	local HOST_IP=fd00::5 pod id i addr url listen out proxy
	# (The scenario's subshell: the address goes whatever happens, so the
	# node is as before for the next scenario.)
	trap 'rtn_in ip -6 addr del fd00::5/128 dev lo 2>/dev/null || true' EXIT
	rtn_in ip -6 addr add "$HOST_IP/128" dev lo nodad || fail "cannot give the node's lo $HOST_IP"
	addr=$(ds_args hpn-rdma agent | sed -n 's/^--metrics-address=//p')
	[[ -n $addr && $addr != none ]] || fail "the DaemonSet's agent serves no metrics (--metrics-address=$addr)"
	# As the agent reads it: the port after the last ':', IPv6 bracketed or not.
	url=${addr%:*}
	[[ $url == *:* && $url != \[* ]] && url="[$url]"
	url="http://$url:${addr##*:}/metrics"
	pod=$(ds_pod agent-6)
	id=$(ds_ctr "$pod" agent-6 "$MANIFEST" hpn-rdma main agent)
	for ((i = 0; i < 100; i++)); do
		out=$(rtn_in curl -sf -g "$url" 2>/dev/null) && break
		[[ $(cri inspect "$id" | jq -r .state) == CONTAINER_RUNNING ]] ||
			fail "the agent exited on an IPv6 node (HOST_IP=$HOST_IP): $(ctr_log agent-6 agent | tail -n 3)"
		sleep 0.05
	done
	grep -q '^hpn_rdma_agent_build_info' <<<"$out" ||
		fail "the agent does not serve $url on an IPv6 node: $(ctr_log agent-6 agent | tail -n 3)"
	# The labels name every attachment's pod: only the node itself reads them.
	/usr/bin/python3 -c 'import ipaddress, sys
sys.exit(not ipaddress.ip_address(sys.argv[1].strip("[]")).is_loopback)' "${addr%:*}" ||
		fail "the agent serves its metrics on $addr, not loopback (HOST_IP=$HOST_IP): any pod reads them"
	# What the metrics proxy listens on, from the same HOST_IP: [fd00::5]:PORT.
	# Nothing of the agent's is there (it would be EADDRINUSE), and the
	# address is one to bind: Go's net.Listen reads it as this does.
	proxy=$(ds_args hpn-rdma kube-rbac-proxy) || fail "daemonset.py cannot translate the metrics proxy"
	listen=$(sed -n 's/^--secure-listen-address=//p' <<<"$proxy")
	[[ $listen == "[$HOST_IP]:"* && ${listen##*:} =~ ^[0-9]+$ ]] ||
		fail "the metrics proxy's address on an IPv6 node is $listen, not [$HOST_IP]:PORT"
	grep -qx -- "--upstream=http://$addr/" <<<"$proxy" ||
		fail "the metrics proxy's upstream is not the agent's $addr: $proxy"
	rtn_in /usr/bin/python3 -c 'import socket, sys
h, p = sys.argv[1].rsplit(":", 1)
s = socket.socket(socket.AF_INET6)
s.bind((h.strip("[]"), int(p)))' "$listen" 2>"$T/bind.err" ||
		fail "the metrics proxy could not listen on $listen: $(tail -n 1 "$T/bind.err")"
	ctr_end "$pod" "$id"
	rtn_in ip -6 addr del "$HOST_IP/128" dev lo
}

upgrade() {
	local id fifo holder out old_id new_id
	old_id=$(readelf -l "$CNIBIN/hpn-rdma" | sed -n 's|.*interpreter: /opt/hpn-rdma/\([^/]*\)/.*|\1|p')
	id=$(attached_pod rdma-old)
	# An old plugin still running (VERSION, waiting for its stdin) across the swap.
	fifo=$T/version.fifo
	mkfifo "$fifo"
	rtn_in env CNI_COMMAND=VERSION "$CNIBIN/hpn-rdma" <"$fifo" >"$T/version.out" 2>&1 &
	holder=$!
	bg_started "$holder"
	exec {hold}>"$fifo"
	sleep 0.2
	install_once install-2 0 "$NEXT"
	grep -q "updated .*/hpn-rdma$" <<<"$(ctr_log install-2 install)" ||
		fail "the newer installer did not update the plugin: $(ctr_log install-2 install)"
	new_id=$(readelf -l "$CNIBIN/hpn-rdma" | sed -n 's|.*interpreter: /opt/hpn-rdma/\([^/]*\)/.*|\1|p')
	[[ -n $new_id && $new_id != "$old_id" && -d $BUNDLE/$old_id && -d $BUNDLE/$new_id ]] ||
		fail "after the swap: bundle $new_id named, $old_id kept ($(ls "$BUNDLE"))"
	echo '{"cniVersion":"1.0.0"}' >&"$hold"
	exec {hold}>&-
	wait "$holder" || fail "the old plugin process failed after the swap: $(cat "$T/version.out")"
	grep -q supportedVersions "$T/version.out" || fail "the old plugin did not answer: $(cat "$T/version.out")"
	# DEL by the new binary gives the NIC the old one attached back.
	stop_remove "$id"
	# The next install (an init container restart) drops the bundle no binary names.
	install_once install-2 1 "$NEXT"
	[[ ! -e $BUNDLE/$old_id && -d $BUNDLE/$new_id ]] ||
		fail "the old bundle $old_id was not removed: $(ls "$BUNDLE")"
}

# uninstall_ctr NAME: hpn-rdma-uninstall.yaml's container started; prints its pod and container IDs.
uninstall_ctr() {
	local pod
	pod=$(ds_pod "$1")
	echo "$pod $(ds_ctr "$pod" "$1" "$UNINSTALL" hpn-rdma-uninstall main uninstall)"
}

# log_wait POD_NAME CONTAINER REGEX: until the container's log has a line matching (30 s at most).
log_wait() {
	local i
	for ((i = 0; i < 300; i++)); do
		grep -q -- "$3" <<<"$(ctr_log "$1" "$2")" && return 0
		sleep 0.1
	done
	fail "$1's $2 never printed /$3/: $(ctr_log "$1" "$2" | tail -n 5)"
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

uninstall_held() {
	local id un probe rc err
	id=$(attached_pod rdma-held)
	mapfile -t probe < <(/usr/bin/python3 "$HPN_SRC/test/runtime/daemonset.py" "$UNINSTALL" \
		hpn-rdma-uninstall main uninstall x "${MAP[@]}" --configmap "$CM" \
		--service-account "$SA" --image "$IMAGE" --probe)
	read -r -a un < <(uninstall_ctr uninstall-1)
	log_wait uninstall-1 uninstall 'kept .*hpn-rdma$'
	grep -q 'may still hold NICs' <<<"$(ctr_log uninstall-1 uninstall)" ||
		fail "uninstall did not say why it keeps the plugin: $(ctr_log uninstall-1 uninstall)"
	[[ ! -e $CNICONF/$KEY && ! -e $KUBECONFIG_HOST && -x $CNIBIN/hpn-rdma ]] ||
		fail "with a pod attached: the conflist and kubeconfig must go, the plugin stay"
	set +e
	cri exec "${un[1]}" "${probe[@]}" >/dev/null 2>&1
	rc=$?
	set -e
	((rc == 1)) || fail "the readiness probe said $rc with the plugin still there"
	# What the operator meets when pods were left attached: with its only
	# network config gone, containerd (1.6) cannot tear a pod down at all
	# ("cni plugin not initialized"), so the journal stays. doc/install.md
	# says to remove the RDMA pods first; the way back is the DaemonSet.
	wait_network_gone
	if err=$(cri stopp "$id" 2>&1); then
		fail "StopPodSandbox succeeded with no network config (doc/install.md says it cannot)"
	fi
	grep -q 'cni plugin not initialized' <<<"$err" || fail "StopPodSandbox failed otherwise: $err"
	# Stopped while it waits: 75 (EX_TEMPFAIL), the plugin kept.
	ctr_end "${un[0]}" "${un[1]}" 75
	install_once install-3
	rtn_wait_network "$NET"
	stop_remove "$id"
	# Now, with no pod attached, uninstall removes everything and stays (a DaemonSet's pod).
	read -r -a un < <(uninstall_ctr uninstall-2)
	log_wait uninstall-2 uninstall '^done'
	[[ ! -e $CNICONF/$KEY && ! -e $KUBECONFIG_HOST && ! -e $CNIBIN/hpn-rdma &&
		-z $(ls -A "$BUNDLE") ]] || fail "uninstall left: $(ls -A "$CNICONF" "$CNIBIN" "$BUNDLE")"
	in_ctr "${un[1]}" "${probe[@]}" >/dev/null || fail "the readiness probe does not say it is done"
	[[ $(cri inspect "${un[1]}" | jq -r .state) == CONTAINER_RUNNING ]] ||
		fail "the uninstall container exited (a DaemonSet would restart it)"
	ctr_end "${un[0]}" "${un[1]}"
}

# wait_network_gone: until containerd has dropped its network (NetworkReady false).
wait_network_gone() {
	local i
	for ((i = 0; i < 200; i++)); do
		cri -timeout 5 status -v 2>/dev/null | jq -e '.status.conditions[]
			| select(.type == "NetworkReady") | .status == false' >/dev/null && return 0
		sleep 0.05
	done
	fail "containerd still has a network after the conflist went"
}

# A newer image: the same agent, a plugin whose bytes differ (a section more), so its bundle is another.
NEXT=${IMAGE%:*}:${IMAGE##*:}-next
objcopy --add-section .hpn_next=/dev/null "$HPN_PLUGIN" "$T/plugin-next" ||
	fail "objcopy could not make the newer plugin"
bash "$HPN_SRC/scripts/image.sh" --agent "$HPN_AGENT" --plugin "$T/plugin-next" --name "$NEXT" \
	--out "$T/next.tar" >"$T/next.log" 2>&1 || fail "scripts/image.sh could not build the newer image: $(tail -n 3 "$T/next.log")"
rtn_ctrd ctr -a "$RTN_SOCK" -n k8s.io images import "$T/next.tar" >/dev/null ||
	fail "ctr could not import the newer image"

# build_id ELF: its GNU build ID (a hash of the whole file, debug data included).
build_id() { readelf -n "$1" | awk '/Build ID:/ { print $3 }'; }

# The same sources elsewhere: a copy of the tree (the files git tracks or
# would, as they are now) and a build directory, each at another path than
# this build's (here of other lengths too), as reproducible-builds varies it;
# this build's cache (generator, compiler, type, flags, options; its
# pkg-config results too, which spares the configure 20 s of grpc's) under
# the new paths, and only the image built there: both binaries compiled
# again. The same build IDs, the same archive byte for byte, the same digest.
reproducible() {
	local src=$T/elsewhere/hpn-rdma-src b=$T/b2 line d bin mine theirs
	[[ -f ${HPN_BUILD:-}/CMakeCache.txt ]] || fail "no CMakeCache.txt in HPN_BUILD=${HPN_BUILD:-}"
	git -C "$HPN_SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
		fail "$HPN_SRC is not a git work tree: cannot tell its sources from the rest"
	mkdir -p "$src" "$b"
	git -C "$HPN_SRC" ls-files -z --cached --others --exclude-standard |
		tar -C "$HPN_SRC" --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "$src" -xf - ||
		fail "could not copy the tree to $src"
	# The build dir first: it may lie inside the tree.
	while IFS= read -r line; do
		line=${line//"$HPN_BUILD"/$b}
		printf '%s\n' "${line//"$HPN_SRC"/$src}"
	done <"$HPN_BUILD/CMakeCache.txt" >"$b/CMakeCache.txt"
	cmake -S "$src" -B "$b" -DBUILD_TESTING=OFF >"$T/b2.log" 2>&1 ||
		fail "cmake could not configure the copy: $(tail -n 3 "$T/b2.log")"
	cmake --build "$b" --target hpn-image -j2 >>"$T/b2.log" 2>&1 ||
		fail "the copy's image did not build: $(tail -n 3 "$T/b2.log")"
	for bin in plugin/hpn-rdma agent/hpn-rdma-agent; do
		mine=$(build_id "$HPN_BUILD/$bin") theirs=$(build_id "$b/$bin")
		[[ -n $mine && $mine == "$theirs" ]] || fail "$bin: build ID $mine in $HPN_BUILD, \
$theirs built from $src in $b (is $HPN_BUILD up to date with the tree?)"
	done
	d=$(cat "$b/hpn-rdma-image.digest")
	[[ $d == "$(cat "$DIGEST_FILE")" ]] || fail "built in two places: $(cat "$DIGEST_FILE"), then $d"
	cmp -s "$HPN_IMAGE" "$b/hpn-rdma-image.tar" || fail "built in two places: the archives differ, digests equal"
	info "image digest, built in $HPN_BUILD and again in $b: $d"
	rm -rf "$src" "$b"
}

# podman load into a scratch store (not the machine's): the name and digest
# ctr sees. (Running it under podman is not tried: podman's runc sets rlimits
# this sandbox refuses, "error setting rlimit type 6"; containerd runs it here.)
podman_load() {
	local p=$T/podman d
	local pm=(podman --root "$p/root" --runroot "$p/run" --storage-driver vfs
		--events-backend none --cgroup-manager cgroupfs)
	"${pm[@]}" load -i "$HPN_IMAGE" >"$T/podman.log" 2>&1 ||
		fail "podman load failed: $(tail -n 3 "$T/podman.log")"
	d=$("${pm[@]}" image inspect --format '{{.Digest}} {{.Config.Entrypoint}}' "$IMAGE") ||
		fail "podman loaded no $IMAGE: $(tail -n 3 "$T/podman.log")"
	[[ $d == "$(cat "$DIGEST_FILE") [/usr/sbin/hpn-rdma-agent]" ]] ||
		fail "podman sees $d, the build made $(cat "$DIGEST_FILE")"
	"${pm[@]}" rmi -a >/dev/null 2>&1 || true
	rm -rf "$p"
}

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
