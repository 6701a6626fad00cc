# shellcheck shell=bash
# shellcheck disable=SC2016 # jq programs are single-quoted on purpose
# runtime.install's scenarios of the DaemonSet's pods starting (install.sh
# sources it, and runs them): install (every file by rename only, the
# ConfigMap's conflist, the plugin's kubeconfig, a pod attached), restart
# (nothing rewritten), agent (registration, the plugin's token, its own
# rotated) and agent-ipv6 (loopback metrics on an IPv6 node). It uses
# install.sh's node and helpers (ds_pod, ds_ctr, install_once, attached_pod).

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
