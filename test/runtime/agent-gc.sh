#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq programs are single-quoted on purpose
# runtime tier: hpn-rdma-agent's GC against a real containerd (its CRI
# ListPodSandbox on the node's socket), with pods containerd runs. The agent
# runs on the node (its netns and mount namespace, where containerd's netns
# mounts are), GC every second, journals younger than 30 s kept.
#
# The node holds: two live pods (runp, opted in: hpn0 each); two orphans,
# attachments of sandboxes containerd never had (the plugin's ADD run as
# containerd would run it, their netns left in place: pods whose DEL never
# came); and a pod whose ADD is in flight (held at its IPAM by a gate:
# containerd does not list a sandbox before RunPodSandbox returns). Every
# journal but one orphan's is dated 10 minutes back, past the grace, so that
# only the listing (or the ADD in flight) can keep it. First with the runtime
# unreachable (a socket that is not there): GC does nothing and says so.
# Then with containerd's socket: the old orphan is undone (its NIC back on
# the node under its name, its lease released, its journal gone, the log
# names its pod); the live pods, the ADD in flight and the young orphan are
# left alone; the gate opens and the in-flight pod, once listed (and aged),
# keeps its NIC through more rounds; the young orphan, aged, is undone. The
# metrics say the same. Then every pod is stopped and removed.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

OPT_IN='{"alibabacloud.com/hpn-type": "rdma"}'
POOL=5 # two live pods, an ADD in flight, two orphans
AGENT_PID=
MPORT=19468

[[ -x ${HPN_AGENT:-} ]] || skip "hpn-rdma-agent was not built (${HPN_AGENT:-HPN_AGENT unset})"
command -v curl >/dev/null || skip "curl is not installed (scripts/install-deps.sh)"

rt_init

GATE=$T/gate

# gated_conflist: the node's network with hpn-rdma's IPAM behind a gate:
# hpnr-gated runs host-local, but an ADD waits while $GATE.armed exists and
# $GATE.open does not (saying so in $GATE.started). The bridge keeps its own.
gated_conflist() {
	printf '#!/bin/bash\nif [[ $CNI_COMMAND == ADD && -e %q.armed ]]; then\n\t: >%q.started\n\tfor ((i = 0; i < 600; i++)); do [[ -e %q.open ]] && break; sleep 0.1; done\nfi\nexec %q "$@"\n' \
		"$GATE" "$GATE" "$GATE" "$RTN_CNI_BIN/host-local" >"$RTN_DIR/cni/bin/hpnr-gated"
	chmod 0755 "$RTN_DIR/cni/bin/hpnr-gated"
	rt_conflist | jq -c '.plugins |= map(if .type == "hpn-rdma" then .ipam.type = "hpnr-gated"
		else . end)'
}

agent_exit() {
	local rc=$?
	[[ -n $AGENT_PID ]] && kill -KILL "$AGENT_PID" 2>/dev/null
	[[ -e $GATE.armed ]] && : >"$GATE.open"
	rtn_cleanup
	exit $rc
}
trap agent_exit EXIT

gated_conflist >"$T/gated.conflist"
rtn_conflist "$(<"$T/gated.conflist")"
# Loaded: the same network name as before, so wait for the gate in its source.
for ((i = 0; i < 200; i++)); do
	cri -timeout 5 status -v 2>/dev/null | jq -e '.info.cniconfig | tostring | contains("hpnr-gated")' \
		>/dev/null && break
	sleep 0.05
done
cri -timeout 5 status -v | jq -e '.info.cniconfig | tostring | contains("hpnr-gated")' >/dev/null ||
	fail "containerd did not load the gated conflist"

# start_agent CRI_SOCKET: the agent on the node, GC every second.
start_agent() {
	# nsenter itself, not rtn_in: a function run with & is a subshell, and its pid not the agent's.
	nsenter -t "$RTN_NODE_PID" -m -n -- "$HPN_AGENT" --config "$T/gated.conflist" \
		--kubelet-dir "$T/kl" --lookup-socket "$T/agent.sock" --cdi-dir "$T/cdi" \
		--cri-socket "$1" --cni-path "$RTN_DIR/cni/bin" --gc-interval 1 --gc-grace 30 \
		--health-interval 1 --metrics-address "127.0.0.1:$MPORT" 2>>"$T/agent.log" &
	AGENT_PID=$!
}

stop_agent() {
	local i
	[[ -n $AGENT_PID ]] || return 0
	kill -TERM "$AGENT_PID" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$AGENT_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$AGENT_PID" 2>/dev/null && fail "the agent did not stop within 10 s of SIGTERM"
	wait "$AGENT_PID" || fail "the agent exited $? after SIGTERM: $(tail -n 5 "$T/agent.log")"
	AGENT_PID=
}

# wait_log REGEX WHAT [SECONDS]
wait_log() {
	local i
	for ((i = 0; i < ${3:-20} * 10; i++)); do
		grep -Eq "$1" "$T/agent.log" 2>/dev/null && return 0
		sleep 0.1
	done
	fail "$2: the agent's log has no line matching '$1': $(tail -n 15 "$T/agent.log")"
}

scrape() {
	rtn_in curl -sf "http://127.0.0.1:$MPORT/metrics"
}

# metric LINE_REGEX WHAT: the agent exports a line matching it (within 10 s).
metric() {
	local i
	for ((i = 0; i < 100; i++)); do
		scrape >"$T/scrape" 2>/dev/null && grep -Eq "$1" "$T/scrape" && return 0
		sleep 0.1
	done
	fail "$2: no metric line matching '$1': $(grep -E '^hpn_rdma_(gc|runtime)' "$T/scrape")"
}

# gc_runs: GC rounds run so far, whatever their result (hpn_rdma_gc_runs_total).
gc_runs() {
	scrape 2>/dev/null | awk '/^hpn_rdma_gc_runs_total[{]/ { n += $2 } END { print n + 0 }'
}

# gc_rounds N WHAT: until N more GC rounds than now have run (a round a second).
gc_rounds() {
	local i want
	want=$(($(gc_runs) + $1))
	for ((i = 0; i < 200; i++)); do
		(($(gc_runs) >= want)) && return 0
		sleep 0.1
	done
	fail "$2: fewer than $1 more GC rounds within 20 s: $(grep -E '^hpn_rdma_gc' "$T/scrape")"
}

# journal_of CID: the journal file of the sandbox's attachment (CNI_IFNAME eth0).
journal_of() {
	echo "$STATE/$NET/$1.eth0"
}

# in_netns PATH CMD...: CMD in the netns mounted at PATH on the node.
in_netns() {
	local ns=$1
	shift
	rtn_in nsenter --net="$ns" "$@"
}

# orphan_add ID NAME: the plugin's ADD as containerd runs it, for sandbox ID
# of pod hpnr/NAME, which containerd never had, its netns bound at a file on
# the node ($T/ID.netns). Sets ORPHAN_MAC (the NIC it took).
orphan_add() {
	local id=$1 conf out ns=$T/$1.netns uid
	uid=$(cat /proc/sys/kernel/random/uuid)
	: >"$ns"
	rtn_in unshare --net="$ns" true
	conf=$(jq -c '{cniVersion, name} + (.plugins[] | select(.type == "hpn-rdma")) +
		{runtimeConfig: {"io.kubernetes.cri.pod-annotations": $ann}}' --argjson ann "$OPT_IN" \
		"$T/gated.conflist")
	out=$(rtn_in env -i PATH="$PATH" CNI_COMMAND=ADD CNI_CONTAINERID="$id" \
		CNI_NETNS="$ns" CNI_IFNAME=eth0 CNI_PATH="$RTN_DIR/cni/bin" \
		CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=hpnr;K8S_POD_NAME=$2;K8S_POD_UID=$uid" \
		"$HPN_PLUGIN" <<<"$conf") || fail "the ADD of $2 failed: $out"
	ORPHAN_MAC=$(jq -r '[.interfaces[] | select(.name == "hpn0")][0].mac' <<<"$out")
	in_netns "$ns" ip link show hpn0 >/dev/null || fail "$2 has no hpn0"
	[[ -f $(journal_of "$id") ]] || fail "$2 has no journal"
}

# aged ID...: the journals of these sandboxes dated 10 minutes back, past any
# grace: only the runtime's listing, or an ADD in flight, can keep them now.
aged() {
	local id
	for id in "$@"; do
		touch -d '10 minutes ago' "$(journal_of "$id")"
	done
}

leases() {
	find "$IPAM" -type f ! -name lock ! -name 'last_reserved_ip*' | sort
}

gc_orphans() {
	local a b d_id d_job d_journal lease_n i id old=hpnr-orphan-$$ young=hpnr-young-$$ mac_old
	trap '[[ -n $AGENT_PID ]] && kill -KILL "$AGENT_PID" 2>/dev/null; : >"$GATE.open"' EXIT
	rt_pod live-a "$OPT_IN"
	rt_pod live-b "$OPT_IN"
	rt_pod in-flight "$OPT_IN"
	a=$(runp live-a)
	b=$(runp live-b)
	orphan_add "$old" orphan
	mac_old=$ORPHAN_MAC
	orphan_add "$young" young
	# A pod whose ADD is held at its IPAM: containerd does not list it yet.
	: >"$GATE.armed"
	cri runp "$T/pods/in-flight.json" >"$T/in-flight.id" 2>"$T/in-flight.err" &
	d_job=$!
	for ((i = 0; i < 300; i++)); do
		[[ -e $GATE.started ]] && break
		sleep 0.1
	done
	[[ -e $GATE.started ]] || fail "the in-flight pod's ADD never reached its IPAM: $(<"$T/in-flight.err")"
	[[ $(cri pods | jq '[.items[] | select(.metadata.name == "in-flight")] | length') == 0 ]] ||
		fail "containerd lists the sandbox whose ADD is in flight (the test's premise)"
	d_journal=$(grep -l '"name":"in-flight"' "$STATE/$NET"/* 2>/dev/null | head -n1) ||
		fail "no journal of the in-flight ADD"
	touch -d '10 minutes ago' "$d_journal"
	aged "$a" "$b" "$old"
	lease_n=$(leases | wc -l)

	# The runtime unreachable: GC does nothing, and says so.
	start_agent "$T/no-such.sock"
	wait_log "gc: skipped, the runtime cannot be asked which pods it runs: the runtime's CRI socket $T/no-such.sock" \
		"GC without a runtime"
	metric '^hpn_rdma_gc_runs_total\{result="skipped"\} [1-9]' "skipped rounds counted"
	metric '^hpn_rdma_runtime_up 0$' "the runtime down"
	[[ -f $(journal_of "$old") ]] || fail "GC without a runtime undid the orphan"
	stop_agent

	start_agent "$RTN_SOCK"
	wait_log "gc: undoing stale attachment $old.eth0 \(pod hpnr/orphan\)" "GC undoes the orphan"
	wait_log 'gc: 1 attachments of pods the runtime no longer has undone' "GC's round"
	[[ ! -e $(journal_of "$old") ]] || fail "the orphan's journal is left"
	in_netns "$T/$old.netns" ip link show hpn0 >/dev/null 2>&1 && fail "the orphan's pod still has hpn0"
	jq_ok 'length == 1 and (.[0].ifname | test("^rnic[0-9]$")) and .[0].mtu == 1500' \
		"the orphan's NIC is back on the node under its name and MTU" \
		"$(ip -n "$RTN_NS" -j link show | jq -c --arg m "$mac_old" '[.[] | select(.address == $m)]')"
	[[ $(leases | wc -l) == $((lease_n - 1)) ]] ||
		fail "the orphan's lease was not released: $(leases)"
	metric '^hpn_rdma_gc_undone_total 1$' "one attachment undone"
	metric '^hpn_rdma_runtime_up 1$' "the runtime answers"
	metric '^hpn_rdma_runtime_sandboxes [1-9]' "the runtime's sandboxes"
	# The live pods, the ADD in flight and the young orphan are left alone, round after round.
	gc_rounds 2 "the rounds after the orphan's"
	for id in "$a" "$b"; do
		[[ -f $(journal_of "$id") ]] || fail "GC removed the journal of live pod $id"
		in_netns "$(pod_netns "$id")" ip link show hpn0 >/dev/null ||
			fail "GC took hpn0 out of live pod $id"
	done
	[[ -f $d_journal ]] || fail "GC removed the journal of the ADD in flight"
	[[ -f $(journal_of "$young") ]] || fail "GC undid an attachment younger than --gc-grace"
	metric '^hpn_rdma_gc_undone_total 1$' "still one attachment undone"
	: >"$GATE.open"
	wait "$d_job" || fail "the in-flight pod's RunPodSandbox failed: $(<"$T/in-flight.err")"
	d_id=$(<"$T/in-flight.id")
	rm -f "$GATE.armed" "$GATE.started" "$GATE.open"
	# Listed now: only that keeps it.
	aged "$d_id"
	gc_rounds 2 "the rounds after the pod in flight started"
	[[ -f $(journal_of "$d_id") ]] || fail "GC removed the journal of the pod that has just started"
	in_netns "$(pod_netns "$d_id")" ip link show hpn0 >/dev/null ||
		fail "the pod that has just started lost hpn0"
	metric '^hpn_rdma_attachment_healthy\{.*pod="live-a".*\} 1$' "the health loop checks live pods"
	# Past its grace, the young orphan goes too.
	aged "$young"
	wait_log "gc: undoing stale attachment $young.eth0 \(pod hpnr/young\)" "GC undoes the orphan once older than --gc-grace"
	metric '^hpn_rdma_gc_undone_total 2$' "two attachments undone"
	grep -E "undoing stale attachment .*\(pod hpnr/(live-a|live-b|in-flight)\)" "$T/agent.log" &&
		fail "GC undid a live pod"
	stop_agent
	for id in "$a" "$b" "$d_id"; do
		stop_remove "$id"
	done
	for id in "$old" "$young"; do
		rtn_in umount "$T/$id.netns"
		rm -f "$T/$id.netns"
	done
}
scenario "agent GC: the orphan undone, live pods and an ADD in flight kept; no runtime, no GC" gc_orphans

rt_done
