#!/usr/bin/env bash
# nri.required (issue 39, "No silent half-attach"): an attached pod's
# containers get their RDMA devices only from hpn-rdma-agent's NRI plugin, so
# ADD with nri.required asks the agent first ("query": "nri" on its lookup
# socket) and refuses, with code 11 and before anything on the node changes,
# when the agent is not there or its NRI link is not registered. As root in
# throwaway namespaces, the agent against the kubelet stand-in (lib.sh), its
# NRI socket one nobody serves (no runtime here: the registered case is the
# runtime tier's, test/runtime/).
#
# Scenarios: the link down (--nri on a socket nobody serves): ADD refused,
# the host's NICs and the stateDir as they were; without nri.required the
# same ADD attaches (link_down). The agent without --nri: refused, saying so
# (no_nri). The agent stopped (its socket removed) and killed (its socket
# file left, nobody listening): refused; DEL, CHECK and GC never ask
# (agent_gone).
# The jq filters' $names are jq arguments, not shell:
# shellcheck disable=SC2016
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t_init
agent_require

POD_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer;K8S_POD_UID=6f1c2d9e-0b7a-4c3e-9d55-2a61f0c4b1aa"
# What every refusal says: what the link being down would cost the pod.
COST='containers of this pod would start without their RDMA devices'
GONE='no hpn-rdma-agent answers at .*/agent.sock'

# state_list: the stateDir's entries but the event log (which records every command, refused
# ones too), and the hints directory's: a refused ADD leaves both as they were.
state_list() {
	find "$STATE" -mindepth 1 ! -name events.log ! -name events.log.1 -printf '%y %P\n' | sort
	if [[ -d $PODS ]]; then
		find "$PODS" -mindepth 1 -printf 'hints %y %P\n' | sort
	fi
}

# refused WHAT PATTERN: ADD with nri.required fails with code 11, its message matching
# PATTERN, and changes nothing: the host's NICs, the pod, the stateDir, the hints.
refused() {
	local what=$1 pat=$2
	snap_save "$HOST_NS" "$T/host.before"
	state_list >"$T/state.before"
	run_plugin ADD "$(agent_net_conf '.nri = {required: true}')" CNI_ARGS="$POD_ARGS"
	expect_err 11 "$what" "$pat"
	snap_same "$HOST_NS" "$T/host.before" "$what: the host's NICs"
	pod_empty "$what: the pod"
	state_list | diff -u "$T/state.before" - >"$T/state.diff" ||
		fail "$what: the stateDir changed: $(cat "$T/state.diff")"
}

link_down() {
	local nri=$T/nri-$SCEN.sock
	AGENT_FLAGS+=("--nri=$nri")
	node_up plain
	wait_log "NRI: cannot connect to $nri" "the agent dials a socket nobody serves"
	# The question as the plugin asks it, and the agent's answer.
	OUT=$(lookup_raw '{"version":1,"query":"nri"}')
	jq_ok '.version == 1 and .nri.registered == false and .nri.socket == $s and
		(.nri.why | contains($s)) and (.nri | has("runtime") | not)' \
		"the NRI question: not registered" "$OUT" --arg s "$nri"
	refused "ADD with nri.required, the link down" "NRI link is down, and $COST: not registered \
with the runtime's NRI at .*/nri-$SCEN.sock: .* \\(the agent at .*/agent.sock\\)"
	expect_no_state "after the refused ADD"
	# The message names the agent's socket and the runtime's NRI socket it dials.
	jq_ok '(.msg | contains($a)) and (.msg | contains($n)) and (.msg | contains("nri.required"))' \
		"the refusal names both sockets" "$OUT" --arg a "$T/agent.sock" --arg n "$nri"
	wait_log "CNI NRI question (pod ns1/trainer): not registered" "the agent logs the question"
	# Without nri.required nothing changes: the pool, as today.
	run_plugin ADD "$(agent_net_conf '.nri = {required: false}')" CNI_ARGS="$POD_ARGS"
	expect_result "ADD without nri.required, the link down"
	has_link "$HOST_NS" pool0 && fail "ADD without nri.required did not take the pool's first NIC"
	has_link "$POD_NS" hpn0 || fail "ADD without nri.required: no hpn0 in the pod"
	run_plugin DEL "$(agent_net_conf)" CNI_ARGS="$POD_ARGS"
	expect_ok "DEL"
	expect_no_state "after DEL"
	run_plugin ADD "$(agent_net_conf)" CNI_ARGS="$POD_ARGS"
	expect_result "ADD without an nri section, the link down"
	run_plugin DEL "$(agent_net_conf)" CNI_ARGS="$POD_ARGS"
	expect_ok "DEL"
	node_down
}
run "the NRI link down: ADD with nri.required refused (11), nothing changed; without it, attached" \
	link_down

no_nri() {
	node_up plain
	OUT=$(lookup_raw '{"version":1,"query":"nri"}')
	jq_ok '. == {version: 1, nri: {registered: false,
		why: "no NRI link: the agent runs without --nri"}}' "the NRI question without --nri"
	refused "ADD with nri.required, the agent without --nri" \
		"NRI link is down, and $COST: no NRI link: the agent runs without --nri \\(the agent at "
	expect_no_state "after the refused ADD"
	node_down
}
run "the agent without --nri: ADD with nri.required refused (11)" no_nri

agent_gone() {
	local nri=$T/nri-$SCEN.sock conf result
	AGENT_FLAGS+=("--nri=$nri")
	node_up plain
	conf=$(agent_net_conf '.nri = {required: true}')
	# An attachment made while the agent is up (without the requirement), for CHECK and DEL.
	run_plugin ADD "$(agent_net_conf)" CNI_ARGS="$POD_ARGS"
	expect_result "ADD before the agent stops"
	result=$OUT
	# Stopped: its socket removed (ENOENT). A second pod's ADD is refused.
	node_down
	[[ ! -e $T/agent.sock ]] || fail "the agent's socket is still there"
	CID=$CID-b
	POD_NS_A=$POD_NS
	POD_NS=${HPNT_PREFIX}p${SCEN}b
	ip netns add "$POD_NS"
	refused "ADD with nri.required, the agent stopped" \
		"$GONE \\(No such file or directory\\): its NRI link is down, and $COST"
	# Killed: its socket file left, nobody listening (ECONNREFUSED).
	start_agent "--nri=$nri"
	wait_log "CNI lookups on $T/agent.sock" "the agent again" 2
	kill -KILL "$AGENT_PID"
	wait "$AGENT_PID" 2>/dev/null || true
	AGENT_PID=
	[[ -S $T/agent.sock ]] || fail "the killed agent's socket file is gone"
	refused "ADD with nri.required, the agent killed" \
		"$GONE \\(Connection refused\\): its NRI link is down, and $COST"
	rm -f "$T/agent.sock"
	ip netns del "$POD_NS"
	# DEL, CHECK and GC never ask: the first pod's attachment is checked and undone.
	POD_NS=$POD_NS_A
	CID=${CID%-b}
	run_plugin CHECK "$(with_prev "$conf" "$result")" CNI_ARGS="$POD_ARGS"
	expect_ok "CHECK with nri.required, no agent"
	run_plugin DEL "$(with_prev "$conf" "$result")" CNI_ARGS="$POD_ARGS"
	expect_ok "DEL with nri.required, no agent"
	expect_no_state "after DEL"
	has_link "$HOST_NS" pool0 || fail "DEL did not give pool0 back"
	run_plugin GC "$(jq -c '.cniVersion = "1.1.0" | ."cni.dev/valid-attachments" = []' \
		<<<"$conf")"
	expect_ok "GC with nri.required, no agent"
	stop_kubelet
}
run "the agent stopped or killed: ADD with nri.required refused (11); DEL, CHECK, GC never ask" \
	agent_gone

t_done
