#!/usr/bin/env bash
# The agent never forks without exec (issue 38, defect 6). Its health loop
# runs CHECK's RDMA proof on the worker thread while gRPC's, the loop's and
# the pod watch's threads run; a fork of that process would run the proof's
# malloc, dlopen and libibverbs under locks another thread may hold. So the
# agent spawns each proof afresh from its own executable
# (hpn_rdma_proofs_by_exec, lib/verbs.c), and this test proves it from the
# outside, as root in throwaway namespaces (test/netns/lib.sh):
#
# The agent runs under strace -f, with a health loop every second, over an
# attachment whose journal has a fake RDMA device bound (mlx5_2 of the fake
# sysfs, which libibverbs cannot see: every CHECK proves it, and fails). Of
# every process the agent's threads create (a clone without CLONE_THREAD, a
# fork, a vfork), the first call strace shows must be a successful execve:
# among the traced calls are those a proof makes first when forked (prctl,
# setns, unshare, mount, openat, mmap, socket, exit_group), and none of what
# posix_spawn's child does before its exec (signal mask and handlers, dup2).
# A child without an execve before its first other call, or that never
# execs, fails the test; so does a run in which no proof was spawned (the
# test would prove nothing), or in which the proof's failure is not the one a
# forked proof reports.
# shellcheck disable=SC2016 # jq programs are single-quoted on purpose
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t_init
agent_require
command -v strace >/dev/null || skip "strace is not installed (Debian: strace)"
command -v python3 >/dev/null || skip "python3 is not installed"

AGENT_FLAGS=(--health-interval 1 --cri-socket none)
TRACED=clone,clone3,fork,vfork,execve,execveat,prctl,setns,unshare,mount,openat,open,mmap,socket,exit_group
STRACE_PID=

# start_traced_agent: start_agent's command under strace -f (LeakSanitizer
# cannot run under ptrace: off, as run_cni does for wrapped runs); AGENT_PID
# is the agent itself, the process whose execve strace shows first.
start_traced_agent() {
	local i asan=${ASAN_OPTIONS:-}
	asan=${asan:+$asan:}detect_leaks=0
	ip netns exec "$HOST_NS" env ASAN_OPTIONS="$asan" strace -f -qq -o "$T/strace" \
		-e trace="$TRACED" "$HPN_AGENT" --config "$T/net.conflist" --kubelet-dir "$KL" \
		--poll-interval 1 "${AGENT_FLAGS[@]}" 2>>"$T/agent.log" &
	STRACE_PID=$!
	for ((i = 0; i < 100; i++)); do
		AGENT_PID=$(awk '$2 ~ /^execve\(/ { print $1; exit }' "$T/strace" 2>/dev/null || true)
		[[ -z $AGENT_PID ]] || return 0
		sleep 0.1
	done
	fail "strace did not start the agent in 10 s: $(tail -5 "$T/agent.log")"
}

# stop_traced_agent: SIGTERM to the agent; strace ends with it, with its status.
stop_traced_agent() {
	local rc=0
	kill -TERM "$AGENT_PID"
	wait "$STRACE_PID" || rc=$?
	AGENT_PID=
	STRACE_PID=
	((rc == 0)) || fail "the agent under strace exited $rc after SIGTERM: $(tail -5 "$T/agent.log")"
}

# bound_pod: pool2 moved into a pod of its own as hpn0, its journal written
# as ADD writes one, with mlx5_2 bound (as metrics.sh's second pod).
bound_pod() {
	local mac idx
	POD_B=${HPNT_PREFIX}p$SCEN-b
	ip netns add "$POD_B"
	mac=$(mac_of "$HOST_NS" pool2)
	idx=$(ip -n "$HOST_NS" -j link show pool2 | jq '.[0].ifindex')
	jq -cn --arg boot "$(</proc/sys/kernel/random/boot_id)" --arg cid "$CID-b" \
		--arg netns "$(ns_path "$POD_B")" --arg mac "$mac" --argjson idx "$idx" '{
		version: 2, bootId: $boot, phase: 4, containerId: $cid, cniIfName: "eth0",
		netns: $netns,
		nics: [{kind: "moved", podIfName: "hpn0", pci: "0000:af:00.2",
			host: {name: "pool2", ifindex: $idx, mtu: 1500, up: false, mac: $mac, altnames: []},
			rdma: {name: "mlx5_2", netdev: "pool2", moved: false}}],
		result: {cniVersion: "1.0.0", interfaces: [{name: "hpn0", mac: $mac, sandbox: $netns}],
			ips: [], dns: {},
			rdma: [{interface: 0, bound: true, device: "mlx5_2", port: 1, gidIndex: 1}]},
		pod: {namespace: "ns2", name: "roce"}}' >"$STATE/$NET/.$CID-b.eth0"
	mv "$STATE/$NET/.$CID-b.eth0" "$STATE/$NET/$CID-b.eth0"
	ip -n "$HOST_NS" link set pool2 netns "$POD_B" name hpn0
	ip -n "$POD_B" link set hpn0 up
}

# children_exec FILE AGENT: every process AGENT's threads created ran execve
# first (strace -f -o FILE lines: "PID call(...) = R", split calls as
# "<unfinished ...>" and "<... call resumed>"); prints how many, and the
# spawned proofs among them, or a FAIL line for each that did not.
children_exec() {
	python3 - "$@" <<-'EOF'
		import re, sys
		path, agent = sys.argv[1], sys.argv[2]
		pending, calls = {}, []  # calls: (pid, name, text, result) in order
		for line in open(path):
		    pid, _, rest = line.rstrip("\n").partition(" ")
		    rest = rest.lstrip()
		    if rest.startswith("+++"):
		        calls.append((pid, "+++", rest, None))
		        continue
		    m = re.match(r"<\.\.\. (\w+) resumed>(.*)", rest)
		    if m:
		        name, text = m.group(1), pending.pop(pid, "") + m.group(2)
		    elif rest.endswith("<unfinished ...>"):
		        pending[pid] = rest[: -len("<unfinished ...>")]
		        continue
		    else:
		        m = re.match(r"(\w+)\(", rest)
		        if not m:
		            continue
		        name, text = m.group(1), rest
		    r = re.search(r"\) += (-?\d+|\?)", text)
		    calls.append((pid, name, text, r.group(1) if r else None))
		group, kids, bad = {agent}, {}, []
		for pid, name, text, res in calls:
		    if pid not in group or name not in ("clone", "clone3", "fork", "vfork"):
		        continue
		    if res is None or not res.isdigit() or res == "0":
		        continue
		    if name.startswith("clone") and "CLONE_THREAD" in text:
		        group.add(res)
		    else:
		        kids[res] = text[:120]
		proofs = 0
		for kid, how in kids.items():
		    first = next((c for c in calls if c[0] == kid), None)
		    if first is None:
		        bad.append("child %s (%s): no call of it traced" % (kid, how))
		    elif first[1] not in ("execve", "execveat") or first[3] != "0":
		        bad.append("child %s (%s) ran %s before any execve" % (kid, how, first[2][:160]))
		    elif '"rdma-proof"' in first[2]:
		        proofs += 1
		for b in bad:
		    print("FAIL: " + b)
		print("children %d proofs %d" % (len(kids), proofs))
		sys.exit(1 if bad else 0)
	EOF
}

proofs_spawned() {
	local conf out agent
	node_up
	stop_agent
	# A whole attachment (pool3, no RDMA device), made by the plugin.
	conf=$(agent_net_conf '.agent.lookup = false | .match.devices = ["pool3"]')
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer"
	expect_result "ADD of pod ns1/trainer"
	bound_pod
	start_traced_agent
	# The proof's failure, as a forked proof words it (netns.rdma: the plugin's).
	local i
	for ((i = 0; i < 300; i++)); do
		grep -q "attachment $CID-b.eth0 (pod ns2/roce) is broken (rdma): RDMA device \"mlx5_2\" is not visible to libibverbs in the pod netns" \
			"$T/agent.log" && break
		sleep 0.1
	done
	((i < 300)) || fail "the health loop did not report mlx5_2's proof in 30 s: $(tail -5 "$T/agent.log")"
	# Some more periods: each proves mlx5_2 again.
	sleep 3
	grep -q "attachment $CID.eth0 (pod ns1/trainer) is broken" "$T/agent.log" &&
		fail "the whole attachment is reported broken: $(grep broken "$T/agent.log")"
	agent=$AGENT_PID
	stop_traced_agent
	out=$(children_exec "$T/strace" "$agent") ||
		fail "the agent created a process that did not exec first:
$out"
	[[ $out =~ children\ ([0-9]+)\ proofs\ ([0-9]+) ]] || fail "no count: $out"
	((BASH_REMATCH[2] >= 2)) ||
		fail "${BASH_REMATCH[2]} proofs spawned, not one a period: nothing was proven ($out)"
	info "the agent created ${BASH_REMATCH[1]} processes, ${BASH_REMATCH[2]} of them proofs: each ran execve first"
	run_plugin DEL "$conf" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$POD_B")"
	expect_ok "DEL of the bound pod"
	ip netns del "$POD_B"
	run_plugin DEL "$conf"
	expect_ok "DEL of pod ns1/trainer"
	stop_kubelet
}
run "the health loop's RDMA proofs are spawned processes: every child of the agent execs first" \
	proofs_spawned

t_done
