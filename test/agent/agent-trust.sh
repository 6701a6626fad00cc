#!/usr/bin/env bash
# Who the plugin trusts on agent.socket, and what happens when nobody is
# there (issue 40, findings 2 and 11). As root in throwaway namespaces
# (test/netns/lib.sh), the agent against the kubelet stand-in (lib.sh).
#
# shipped_agent_down (finding 2): the agent section of the conflist the
# DaemonSet ships (conf/k8s/hpn-rdma.yaml's ConfigMap) makes ADD of a pod the
# kubelet gave 0000:af:00.2 attach exactly that NIC while the agent is up,
# and fail with code 11 naming the socket, nothing changed on the node, once
# the agent is killed (its socket file left, nobody listening: ECONNREFUSED)
# or stopped (the socket removed: ENOENT): never a pool pick instead.
#
# impostor (finding 11): a process that is not root listening on
# agent.socket (here a shared sticky directory, as /tmp is, where anyone may
# bind) is refused before the plugin sends it anything (SO_PEERCRED), with
# code 11 naming the socket and the peer's uid, agent.required or not; the
# same answer from a root listener is taken.
#
# runtime_dir (finding 11): the agent's lookup socket directory, when it is
# ours (named hpn-rdma..., owned by root, not sticky), is tightened to 0700
# if it was looser; a shared sticky directory, one not named for us, one
# another user owns, and a symlink's target are left as they are.
# The jq filters' $names are jq arguments, not shell:
# shellcheck disable=SC2016
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t_init
agent_require
/usr/bin/python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml is not installed"
command -v setpriv >/dev/null || skip "setpriv is not installed (Debian: util-linux)"

POD_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer;K8S_POD_UID=6f1c2d9e-0b7a-4c3e-9d55-2a61f0c4b1aa"
MANIFEST=${HPN_SRC:?run through ctest}/conf/k8s/hpn-rdma.yaml
NOBODY=$(id -u nobody)
SHARED=
LISTENER_PID=

# The agent section of the hpn-rdma entry of the conflist the DaemonSet ships.
SHIPPED=$(/usr/bin/python3 -c 'import json, sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
	if d and d["kind"] == "ConfigMap":
		for text in d["data"].values():
			c = json.loads(text)
			for p in c.get("plugins", [c]):
				if p.get("type") == "hpn-rdma":
					print(json.dumps(p.get("agent", {})))
					sys.exit(0)
sys.exit("no hpn-rdma entry in a ConfigMap of " + sys.argv[1])' "$MANIFEST")
info "the shipped conflist's agent section: $SHIPPED"

# shipped_conf: this node's config with the shipped agent section (the socket, timeout and CDI
# directory the test's own).
shipped_conf() {
	agent_net_conf | jq -c --argjson s "$SHIPPED" '.agent = $s + .agent'
}

# The state of the node a refused ADD must leave as it was.
state_list() {
	find "$STATE" -mindepth 1 ! -name events.log ! -name events.log.1 -printf '%y %P\n' | sort
}

# refused CONF WHAT PATTERN: ADD of ns1/trainer fails with code 11 matching PATTERN, nothing changed.
refused() {
	snap_save "$HOST_NS" "$T/host.before"
	state_list >"$T/state.before"
	run_plugin ADD "$1" CNI_ARGS="$POD_ARGS"
	expect_err 11 "$2" "$3"
	snap_same "$HOST_NS" "$T/host.before" "$2: the host's NICs"
	pod_empty "$2: the pod"
	state_list | diff -u "$T/state.before" - >"$T/state.diff" ||
		fail "$2: the stateDir changed: $(cat "$T/state.diff")"
	expect_no_state "$2"
}

trust_exit() {
	kill_node
	[[ -n $LISTENER_PID ]] && kill "$LISTENER_PID" 2>/dev/null
	[[ -n $SHARED ]] && rm -rf "$SHARED"
	return 0
}

# ---- scenarios ---------------------------------------------------------------------

shipped_agent_down() {
	local conf mac2
	node_up plain
	echo '[{"namespace":"ns1","name":"trainer","containers":[{"name":"main","devices":[
		{"resource":"rdma/hpn","ids":["0000:af:00.2"]}]}]}]' >"$T/pods.json"
	conf=$(shipped_conf)
	mac2=$(mac_of "$HOST_NS" pool2)
	# The agent up: exactly the kubelet's NIC.
	run_plugin ADD "$conf" CNI_ARGS="$POD_ARGS"
	expect_result "ADD with the agent up"
	[[ $(mac_of "$POD_NS" hpn0) == "$mac2" ]] ||
		fail "ADD with the agent up did not take pool2 (0000:af:00.2)"
	run_plugin DEL "$conf" CNI_ARGS="$POD_ARGS"
	expect_ok "DEL"
	# Killed: its socket file left, nobody listening.
	kill -KILL "$AGENT_PID"
	wait "$AGENT_PID" 2>/dev/null || true
	AGENT_PID=
	[[ -S $T/agent.sock ]] || fail "the killed agent's socket file is gone"
	refused "$conf" "ADD, the agent killed (the shipped conflist)" \
		"agent.required is true: hpn-rdma-agent is not answering at $T/agent.sock: Connection refused"
	# Stopped: its socket removed.
	start_agent
	wait_log "CNI lookups on $T/agent.sock" "the agent again" 2
	stop_agent
	[[ ! -e $T/agent.sock ]] || fail "the stopped agent left its socket"
	refused "$conf" "ADD, the agent stopped (the shipped conflist)" \
		"agent.required is true: hpn-rdma-agent is not answering at $T/agent.sock: No such file or directory"
	stop_kubelet
}
run "the shipped conflist: the agent killed or stopped, ADD refused (11), never a pool pick" \
	shipped_agent_down

# listen AS SOCKET: a lookup stand-in on SOCKET run as user AS that answers
# every question with pool3 and records what it was sent in SOCKET.got.
listen() {
	local as=$1 sock=$2
	rm -f "$sock" "$sock.got" "$sock.ready"
	# (A copy beside the socket: the source tree may be root's alone.)
	install -m 0644 "$HPN_SRC/test/lookup-stub.py" "${sock%/*}/lookup-stub.py"
	setpriv --reuid="$as" --regid="$(id -g "$as")" --clear-groups /usr/bin/python3 \
		"${sock%/*}/lookup-stub.py" "$sock" '["pool3"]' 2>>"$T/listener.log" &
	LISTENER_PID=$!
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -e $sock.ready ]] && return 0
		sleep 0.05
	done
	fail "the listener as $as did not start: $(cat "$T/listener.log")"
}

unlisten() {
	[[ -n $LISTENER_PID ]] && kill "$LISTENER_PID" 2>/dev/null
	wait "$LISTENER_PID" 2>/dev/null || true
	LISTENER_PID=
}

impostor() {
	local sock conf
	trap trust_exit EXIT
	# A shared directory as /tmp is: anyone may bind a socket in it.
	SHARED=$(mktemp -d /tmp/hpnt-shared.XXXXXX)
	chmod 1777 "$SHARED"
	sock=$SHARED/agent.sock
	mk_node plain
	listen nobody "$sock"
	[[ $(stat -c %u "$sock") == "$NOBODY" ]] || fail "the listener's socket is not nobody's"
	for req in false true; do
		conf=$(agent_net_conf ".agent.required = $req" | jq -c --arg s "$sock" '.agent.socket = $s')
		refused "$conf" "ADD, a listener of uid $NOBODY on agent.socket (agent.required $req)" \
			"refusing the hpn-rdma-agent at $sock: the process listening there runs as uid $NOBODY, not root"
		[[ ! -s $sock.got ]] || fail "the plugin sent the listener of uid $NOBODY: $(cat "$sock.got")"
	done
	unlisten
	# The same answer from root: taken (root is who the agent runs as).
	listen root "$sock"
	run_plugin ADD "$conf" CNI_ARGS="$POD_ARGS"
	expect_result "ADD, a root listener on agent.socket"
	has_link "$HOST_NS" pool3 && fail "ADD did not take pool3, which the root listener answered"
	grep -q '"name":"trainer"' "$sock.got" || fail "the root listener was not asked: $(cat "$sock.got")"
	run_plugin DEL "$conf" CNI_ARGS="$POD_ARGS"
	expect_ok "DEL"
	expect_no_state "after DEL"
	unlisten
	rm -rf "$SHARED"
	SHARED=
}
run "a listener that is not root on agent.socket: refused (11) before it is sent anything" impostor

# agent_on SOCKET: the agent serves its lookups on SOCKET, then stops.
agent_on() {
	start_agent --lookup-socket "$1"
	wait_log "CNI lookups on $1" "the agent listens on $1"
	[[ $(stat -c %a "$1") == 600 ]] || fail "$1 is not 0600"
	stop_agent
}

runtime_dir() {
	local d
	node_up plain
	trap trust_exit EXIT
	stop_agent
	# Ours, left 0755 (a hostPath the kubelet made, an older agent): tightened.
	mkdir -p "$T/run/hpn-rdma"
	chmod 0755 "$T/run" "$T/run/hpn-rdma"
	agent_on "$T/run/hpn-rdma/agent.sock"
	[[ $(stat -c %a "$T/run/hpn-rdma") == 700 ]] ||
		fail "the agent's directory $T/run/hpn-rdma is $(stat -c %a "$T/run/hpn-rdma"), not 700"
	[[ $(stat -c %a "$T/run") == 755 ]] || fail "its parent $T/run was changed"
	# A shared sticky directory (the socket pointed into /tmp): left as it is.
	SHARED=$(mktemp -d /tmp/hpnt-shared.XXXXXX)
	chmod 1777 "$SHARED"
	agent_on "$SHARED/agent.sock"
	[[ $(stat -c %a "$SHARED") == 1777 ]] || fail "the shared directory became $(stat -c %a "$SHARED")"
	# Not named for us: left as it is.
	mkdir -m 0755 "$T/sockets"
	agent_on "$T/sockets/agent.sock"
	[[ $(stat -c %a "$T/sockets") == 755 ]] || fail "$T/sockets became $(stat -c %a "$T/sockets")"
	# Named for us, another user's: left as it is.
	mkdir -m 0755 "$T/run/hpn-rdma-other"
	chown nobody "$T/run/hpn-rdma-other"
	agent_on "$T/run/hpn-rdma-other/agent.sock"
	d=$(stat -c '%a %U' "$T/run/hpn-rdma-other")
	[[ $d == "755 nobody" ]] || fail "nobody's $T/run/hpn-rdma-other became $d"
	# A symlink named for us: its target left as it is.
	mkdir -m 0755 "$T/target"
	ln -s "$T/target" "$T/run/hpn-rdma-link"
	agent_on "$T/run/hpn-rdma-link/agent.sock"
	[[ $(stat -c %a "$T/target") == 755 ]] || fail "the symlink's target became $(stat -c %a "$T/target")"
	rm -rf "$SHARED" "$T/run" "$T/sockets" "$T/target"
	SHARED=
	start_agent
	wait_log "CNI lookups on $T/agent.sock" "the agent on its own socket" 2
	node_down
}
run "the agent's own directory tightened to 0700; shared, foreign and other directories left" \
	runtime_dir

t_done
