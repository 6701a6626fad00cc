#!/usr/bin/env bash
# GC trusts the runtime's list only for what the runtime made (issue 40,
# finding 5). The agent's GC undoes a journalled attachment whose sandbox the
# CRI runtime does not list; but a runtime lists only its own sandboxes, so
#  - an attachment another caller made (cnitool, a script: CNI_ARGS without
#    K8S_POD_UID) is never GC'd by the agent (its caller DELs it, or the
#    CNI's own GC with cni.dev/valid-attachments does), and
#  - an empty list while attachments of this boot that a CRI runtime made are
#    journalled (--cri-socket naming another runtime, one that has not read
#    its state yet) undoes nothing: the round is counted
#    hpn_rdma_gc_runs_total{result="untrusted"} and the log says why.
# An attachment a CRI runtime made (K8S_POD_UID) whose sandbox is not listed
# is still undone, as test/runtime/agent-gc.sh shows against a real
# containerd.
#
# As root in throwaway namespaces (test/netns/lib.sh): the agent against the
# kubelet stand-in (lib.sh), GC every second with no grace, and a CRI runtime
# stand-in (ListPodSandbox over gRPC on a unix socket, HTTP/2 written by hand
# in Python: no gRPC module is packaged here) answering the sandbox IDs of a
# file the scenario writes.
#
# Scenarios: a cnitool ADD, a listed pod's and an unlisted pod's (runtime_owned);
# the runtime's list empty, then not (empty_list).
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t_init
agent_require
command -v curl >/dev/null || skip "curl is not installed"

MPORT=19473
CRI_PID=
LIST=$T/cri.ids

# The runtime stand-in: python3 FILE SOCKET LIST.
cat >"$T/fakecri.py" <<'PY'
import os, socket, struct, sys, threading

# HTTP/2 by hand (RFC 9113): SETTINGS and PING acknowledged, a request's
# HEADERS (its HPACK never decoded: one method is served) answered once its
# stream ends, with HPACK literals without Huffman (RFC 7541 6.2.2). The
# sandbox IDs are LIST's lines, read at each call; each call appends its
# count of IDs to LIST.calls.
path, ids_file = sys.argv[1], sys.argv[2]


def frame(typ, flags, sid, payload=b""):
    return (struct.pack(">I", len(payload))[1:] + bytes([typ, flags]) +
            struct.pack(">I", sid) + payload)


def lit(name, value):
    return bytes([0, len(name)]) + name + bytes([len(value)]) + value


def pb_str(field, s):
    return bytes([field << 3 | 2, len(s)]) + s


def answer():
    with open(ids_file, "rb") as f:
        ids = [line.strip() for line in f if line.strip()]
    with open(ids_file + ".calls", "a") as f:
        f.write("%d\n" % len(ids))
    # ListPodSandboxResponse { repeated PodSandbox items = 1 }, PodSandbox { string id = 1 }
    return b"".join(pb_str(1, pb_str(1, i)) for i in ids)


def recv_all(c, n):
    b = b""
    while len(b) < n:
        got = c.recv(n - len(b))
        if not got:
            raise EOFError
        b += got
    return b


def serve(c):
    try:
        recv_all(c, 24)  # the client's connection preface
        c.sendall(frame(4, 0, 0))
        while True:
            h = recv_all(c, 9)
            typ, flags = h[3], h[4]
            sid = int.from_bytes(h[5:], "big") & 0x7FFFFFFF
            payload = recv_all(c, int.from_bytes(h[:3], "big"))
            if typ == 4 and not flags & 1:
                c.sendall(frame(4, 1, 0))
            elif typ == 6 and not flags & 1:
                c.sendall(frame(6, 1, 0, payload))
            elif typ in (0, 1) and flags & 1:
                msg = answer()
                c.sendall(frame(1, 4, sid, bytes([0x88]) +
                                lit(b"content-type", b"application/grpc")) +
                          frame(0, 0, sid, b"\0" + struct.pack(">I", len(msg)) + msg) +
                          frame(1, 5, sid, lit(b"grpc-status", b"0")))
    except (EOFError, OSError):
        pass
    finally:
        c.close()


s = socket.socket(socket.AF_UNIX)
if os.path.exists(path):
    os.unlink(path)
s.bind(path)
s.listen(16)
while True:
    conn, _ = s.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
PY

# lists ID...: what the runtime lists from now on.
lists() {
	if (($# > 0)); then
		printf '%s\n' "$@" >"$LIST.tmp"
	else
		: >"$LIST.tmp"
	fi
	mv "$LIST.tmp" "$LIST"
}

start_cri() {
	lists
	: >"$LIST.calls"
	/usr/bin/python3 "$T/fakecri.py" "$T/cri.sock" "$LIST" 2>>"$T/cri.log" &
	CRI_PID=$!
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -S $T/cri.sock ]] && return 0
		sleep 0.05
	done
	fail "the runtime stand-in did not listen: $(cat "$T/cri.log")"
}

stop_cri() {
	[[ -n $CRI_PID ]] && kill "$CRI_PID" 2>/dev/null
	wait "$CRI_PID" 2>/dev/null || true
	CRI_PID=
	rm -f "$T/cri.sock"
}

# gc_runs: GC rounds finished so far, whatever their result.
gc_runs() {
	scrape 2>/dev/null | awk '/^hpn_rdma_gc_runs_total[{]/ { n += $2 } END { print n + 0 }'
}

# gc_rounds N WHAT: until N more GC rounds than now have finished (one a second).
gc_rounds() {
	local i want
	want=$(($(gc_runs) + $1))
	for ((i = 0; i < ($1 + 10) * 10; i++)); do
		(($(gc_runs) >= want)) && return 0
		sleep 0.1
	done
	fail "$2: fewer than $1 more GC rounds: $(scrape | grep '^hpn_rdma_gc')
agent log: $(tail -n 10 "$T/agent.log")"
}

gc_node() {
	AGENT_FLAGS=(--cri-socket "$T/cri.sock" --gc-interval 1 --gc-grace 0 --health-interval 0
		--metrics-address "127.0.0.1:$MPORT")
	start_cri
	node_up plain
	trap 'kill_node; stop_cri' EXIT
	wait_log "gc: every 1 s against the runtime at $T/cri.sock" "GC is on"
}

journal() {
	echo "$STATE/$NET/$1.eth0"
}

# pod_add SUFFIX NAME: ADD as a CRI runtime runs it (K8S_POD_* with a UID)
# for sandbox $CID-SUFFIX in netns p<scenario>-SUFFIX.
pod_add() {
	local ns=${HPNT_PREFIX}p$SCEN-$1
	ip netns add "$ns"
	run_plugin ADD "$(agent_net_conf)" CNI_CONTAINERID="$CID-$1" CNI_NETNS="$(ns_path "$ns")" \
		CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=$2;K8S_POD_UID=$(cat /proc/sys/kernel/random/uuid);K8S_POD_INFRA_CONTAINER_ID=$CID-$1"
	expect_result "ADD of pod ns1/$2 (sandbox $CID-$1)"
	has_link "$ns" hpn0 || fail "pod ns1/$2 has no hpn0"
}

pod_del() {
	local ns=${HPNT_PREFIX}p$SCEN-$1
	run_plugin DEL "$(agent_net_conf)" CNI_CONTAINERID="$CID-$1" CNI_NETNS="$(ns_path "$ns")"
	expect_ok "DEL of sandbox $CID-$1"
	ip netns del "$ns"
}

# ---- scenarios ---------------------------------------------------------------------

runtime_owned() {
	local mac
	gc_node
	lists "$CID-live" "$CID-other"
	# cnitool's ADD: no CNI_ARGS at all. The pool's first NIC.
	mac=$(mac_of "$HOST_NS" pool0)
	run_plugin ADD "$(agent_net_conf)"
	expect_result "cnitool's ADD"
	[[ $(mac_of "$POD_NS" hpn0) == "$mac" ]] || fail "cnitool's ADD did not take pool0"
	# A pod the runtime lists, and one it does not (its DEL never came).
	pod_add live trainer
	pod_add gone stale
	gc_rounds 3 "GC against a list of $CID-live"
	# The unlisted pod's attachment is undone, as before.
	[[ ! -e $(journal "$CID-gone") ]] || fail "the stale pod's journal is still there"
	has_link "$HOST_NS" pool2 || fail "the stale pod's NIC (pool2) is not back on the host"
	has_link "${HPNT_PREFIX}p$SCEN-gone" hpn0 && fail "the stale pod still has hpn0"
	grep -q "gc: undoing stale attachment $CID-gone.eth0 (pod ns1/stale)" "$T/agent.log" ||
		fail "the agent's log does not name the stale pod: $(grep 'gc:' "$T/agent.log")"
	# The listed pod's and cnitool's are kept, through the rounds.
	[[ -e $(journal "$CID-live") ]] || fail "the listed pod's journal is gone"
	has_link "${HPNT_PREFIX}p$SCEN-live" hpn0 || fail "the listed pod lost its hpn0"
	[[ -e $(journal "$CID") ]] || fail "GC removed cnitool's journal (the runtime never had it)"
	has_link "$POD_NS" hpn0 || fail "GC took hpn0 from cnitool's live netns"
	has_link "$HOST_NS" pool0 && fail "pool0 is back on the host: GC undid cnitool's ADD"
	# The same with nothing the runtime made left but what it lists.
	pod_del live
	lists "$CID-other"
	gc_rounds 2 "GC with only cnitool's attachment"
	has_link "$POD_NS" hpn0 || fail "GC took hpn0 from cnitool's netns (a list without it)"
	# Its caller's DEL undoes it.
	ip netns del "${HPNT_PREFIX}p$SCEN-gone"
	run_plugin DEL "$(agent_net_conf)"
	expect_ok "cnitool's DEL"
	expect_no_state "after the DELs"
	node_down
	stop_cri
}
run "GC undoes only what the runtime made: cnitool's attachment kept, an unlisted pod's undone" \
	runtime_owned

empty_list() {
	local untrusted
	gc_node
	pod_add a trainer
	# The runtime lists nothing (another runtime's socket): nothing undone, said so.
	gc_rounds 3 "GC against an empty list"
	[[ -e $(journal "$CID-a") ]] || fail "GC against an empty list removed the pod's journal"
	has_link "${HPNT_PREFIX}p$SCEN-a" hpn0 || fail "GC against an empty list took the pod's hpn0"
	untrusted=$(metric_value 'hpn_rdma_gc_runs_total{result="untrusted"}')
	((untrusted >= 3)) || fail "hpn_rdma_gc_runs_total{result=\"untrusted\"} is $untrusted, not >= 3"
	grep -Fq "gc: skipped: the runtime lists no pod sandbox while 1 attachment of this boot made by a CRI runtime is journalled (pod ns1/trainer): not trusted, nothing undone (is $T/cri.sock the runtime" \
		"$T/agent.log" || fail "the agent's log does not say why GC skipped: $(grep 'gc:' "$T/agent.log")"
	[[ $(metric_value hpn_rdma_runtime_up) == 1 && $(metric_value hpn_rdma_runtime_sandboxes) == 0 ]] ||
		fail "the runtime is up and listed 0: $(scrape | grep '^hpn_rdma_runtime')"
	# Once the runtime lists a sandbox (not this one), the pod's attachment is stale: undone.
	lists "$CID-other"
	gc_rounds 2 "GC against a list without the pod"
	[[ ! -e $(journal "$CID-a") ]] || fail "the pod's journal is still there"
	has_link "$HOST_NS" pool0 || fail "the pod's NIC (pool0) is not back on the host"
	ip netns del "${HPNT_PREFIX}p$SCEN-a"
	expect_no_state "after GC"
	node_down
	stop_cri
}
run "GC against an empty list undoes nothing while this boot's pods are journalled" empty_list

t_done
