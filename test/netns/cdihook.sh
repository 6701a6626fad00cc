#!/bin/bash
# hpn-rdma cdi-hook, the createRuntime hook of the agent's CDI specs, run as
# runc runs it: the OCI state on stdin, the verdict in the exit code. The
# state carries the container's annotations (CRI-O copies the pod's, up to
# 256 KiB), so the hook reads it whole, up to 1 MiB (issue 38, defect 4).
#
# Proves, for a NIC ADDed into a pod whose process is the container:
#  - a state with 200 KiB of annotations is read whole: the pid is found, the
#    NIC is the pod's, exit 0 (a 64 KiB read cut it, and said "no pid");
#  - a state of exactly 1 MiB is accepted, one byte more is refused, exit 1,
#    with "the OCI state on stdin exceeds 1048576 bytes"; so is 64 MiB
#    streamed, without reading it all;
#  - the same state from a process outside the pod is refused (exit 1,
#    naming the pod's NIC), so the accepted cases cannot pass by default.
# The real hook under containerd is runtime.devices-* (test/runtime/devices.sh).
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init
command -v python3 >/dev/null || skip "python3 is not installed"

# oci_state PID SIZE: an OCI state as runc writes it (ociVersion, id, status,
# pid, bundle, annotations), its annotations filled so that the whole is
# SIZE bytes, without a newline.
oci_state() {
	python3 - "$1" "$2" <<-'EOF'
		import json, sys
		pid, size = int(sys.argv[1]), int(sys.argv[2])
		def state(ann):
		    return json.dumps({"ociVersion": "1.0.2", "id": "c1", "status": "created",
		                       "pid": pid, "bundle": "/run/c1", "annotations": ann},
		                      separators=(",", ":"))
		ann, i = {}, 0
		while len(state(ann)) + 4200 < size:
		    ann["io.kubernetes.pod.a%03d" % i] = "x" * 4096
		    i += 1
		ann["io.kubernetes.pod.zz"] = ""
		ann["io.kubernetes.pod.zz"] = "y" * (size - len(state(ann)))
		out = state(ann)
		assert len(out) == size, (len(out), size)
		sys.stdout.write(out)
	EOF
}

# run_hook ID [PRODUCER]: the hook for NIC ID of $NET, its stdin $T/oci.json (or
# the output of the shell command PRODUCER); sets RC, ERR. Under
# HPN_VALGRIND=1, run under memcheck like every plugin run of this tier.
run_hook() {
	local -a wrap=()
	local vgdir=
	if [[ ${HPN_VALGRIND:-0} == 1 ]]; then
		valgrind_usable
		vgdir=$(mktemp -d "$T/valgrind.XXXXXX")
		wrap=("${VALGRIND_CMD[@]}" "--log-file=$vgdir/%p")
	fi
	# shellcheck disable=SC2034 # read by fail() (test/common.sh)
	LAST_RUN="cdi-hook --state-dir $STATE --network $NET $1"
	set +e
	if [[ -n ${2:-} ]]; then
		bash -c "$2" | "${wrap[@]}" "$HPN_PLUGIN" cdi-hook --state-dir "$STATE" \
			--network "$NET" "$1" >"$T/out" 2>"$T/err"
		RC=${PIPESTATUS[1]}
	else
		"${wrap[@]}" "$HPN_PLUGIN" cdi-hook --state-dir "$STATE" --network "$NET" "$1" \
			<"$T/oci.json" >"$T/out" 2>"$T/err"
		RC=$?
	fi
	set -e
	ERR=$(<"$T/err")
	[[ -z $vgdir ]] || valgrind_verdict "$vgdir"
}

hook_reads_whole() {
	local conf ctr
	mk_nic "$HOST_NS" nic0 peer0
	conf=$(net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0"')
	run_plugin ADD "$conf"
	expect_result "ADD of nic0"
	# The container: a process in the pod netns.
	ip netns exec "$POD_NS" sleep 300 &
	ctr=$!
	# shellcheck disable=SC2064 # the pid now
	trap "kill $ctr 2>/dev/null || true" EXIT

	oci_state "$ctr" $((200 * 1024)) >"$T/oci.json"
	run_hook nic0
	((RC == 0)) || fail "a state with 200 KiB of annotations: exit $RC, not 0: $ERR"
	[[ -z $ERR ]] || fail "a state with 200 KiB of annotations: stderr says: $ERR"
	info "200 KiB state: the pid found, nic0 is the pod's, exit 0"

	oci_state "$ctr" $((1 << 20)) >"$T/oci.json"
	run_hook nic0
	((RC == 0)) || fail "a state of exactly 1 MiB: exit $RC, not 0: $ERR"

	oci_state "$ctr" $(((1 << 20) + 1)) >"$T/oci.json"
	run_hook nic0
	((RC == 1)) || fail "a state of 1 MiB + 1 byte: exit $RC, not 1: $ERR"
	[[ $ERR == "hpn-rdma cdi-hook: the OCI state on stdin exceeds 1048576 bytes" ]] ||
		fail "a state of 1 MiB + 1 byte: the message is not the limit's: $ERR"

	# 64 MiB through a pipe: refused after 1 MiB + 1 byte, the writer cut off.
	run_hook nic0 "printf '{\"pid\":$ctr,\"annotations\":{\"a\":\"'; head -c 64M /dev/zero | tr '\\0' x"
	((RC == 1)) || fail "64 MiB streamed: exit $RC, not 1: $ERR"
	[[ $ERR == *"exceeds 1048576 bytes" ]] || fail "64 MiB streamed: $ERR"

	# A process outside the pod (this shell) with the same 200 KiB state: refused.
	oci_state $$ $((200 * 1024)) >"$T/oci.json"
	run_hook nic0
	((RC == 1)) || fail "a process outside the pod: exit $RC, not 1: $ERR"
	[[ $ERR == "hpn-rdma: NIC nic0 "*"not to this container's pod"* ]] ||
		fail "a process outside the pod: not refused for the NIC: $ERR"

	kill "$ctr"
	wait "$ctr" 2>/dev/null || true
	trap - EXIT
	run_plugin DEL "$conf"
	expect_ok "DEL of nic0"
}
scenario "cdi-hook reads the OCI state whole: 200 KiB of annotations pass, over 1 MiB is refused" \
	hook_reads_whole

t_done
