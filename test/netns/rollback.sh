#!/bin/bash
# Rollback of a failed ADD.
#
# Proves that when ADD fails at any step, the steps already taken are undone:
# the host netns is exactly as before (name, altnames, MTU, admin state, MAC),
# the pod is empty, no state file is left, the IPAM allocation is released,
# and the same NIC can be attached and detached cleanly afterwards.
# Failures come from the plugin's test hook HPN_FAIL_AT=<step>, and from real
# syscalls failed by strace: the exec of the IPAM plugin, the creation of its
# process, and every netlink message of ADD in turn (a fault sweep).
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

STEPS=(journal altnames move mtu up rdma-move ipam addr route rdma "done")

# setup_nic: nic0 with two altnames, MTU 1400, up, peer up; a decoy nic1.
setup_nic() {
	mk_nic "$HOST_NS" nic0 peer0
	mk_nic "$HOST_NS" nic1 peer1
	ip -n "$HOST_NS" link set nic0 mtu 1400
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0-second
	ip -n "$HOST_NS" link set peer0 up
	ip -n "$HOST_NS" link set nic0 up
	snap_save "$HOST_NS" "$T/host.before"
}

# conf_for IPAM DATADIR-OR-LOG: nic0 as hpn0, MTU 9000, with an address and
# a route, from host-local (allocation on disk) or the recording IPAM (a log
# of ADD/DEL calls).
conf_for() {
	if [[ $1 == host-local ]]; then
		net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0" | .mtu = 9000 |
			.ipam = {type: "host-local", dataDir: $x,
				ranges: [[{subnet: "10.84.0.0/24", gateway: "10.84.0.1"}]],
				routes: [{dst: "10.85.0.0/16"}]}' --arg x "$2"
	else
		net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0" | .mtu = 9000 |
			.ipam = {type: "hpnt-ipam", log: $x,
				addresses: [{address: "10.84.0.7/24", gateway: "10.84.0.1"}],
				routes: [{dst: "10.85.0.0/16"}]}' --arg x "$2"
	fi
}

# expect_rolled_back IPAM DATADIR-OR-LOG WHAT: nothing of the ADD is left.
expect_rolled_back() {
	snap_same "$HOST_NS" "$T/host.before" "$3: host"
	pod_empty "$3: pod"
	expect_no_state "$3"
	if [[ $1 == host-local ]]; then
		[[ -z $(hostlocal_ips "$2") ]] ||
			fail "$3: host-local still holds $(hostlocal_ips "$2")"
	else
		ipam_log_balanced "$2" "$3"
	fi
}

# clean_cycle CONF WHAT: after a rollback, a plain ADD and DEL still work.
clean_cycle() {
	local prev
	run_plugin ADD "$1"
	expect_result "$2: ADD after rollback"
	prev=$(with_prev "$1" "$OUT")
	run_plugin DEL "$prev"
	expect_ok "$2: DEL after rollback"
}

# --- HPN_FAIL_AT at each step, with host-local and with the recording IPAM.
fail_at() {
	local ipam=$1 step=$2 x conf
	setup_nic
	x=$T/ipam-$SCEN
	conf=$(conf_for "$ipam" "$x")
	run_plugin ADD "$conf" HPN_FAIL_AT="$step"
	expect_err any "ADD with HPN_FAIL_AT=$step"
	expect_rolled_back "$ipam" "$x" "after HPN_FAIL_AT=$step"
	clean_cycle "$conf" "HPN_FAIL_AT=$step"
	expect_rolled_back "$ipam" "$x" "after clean ADD/DEL"
}
for ipam in host-local hpnt-ipam; do
	for step in "${STEPS[@]}"; do
		scenario "HPN_FAIL_AT=$step, $ipam" fail_at "$ipam" "$step"
	done
done

# --- strace: the IPAM plugin's exec fails with ENOENT. strace counts
# injections per process, and each exec of the IPAM plugin happens in a new
# child, so -P limits the injection to execve of host-local's path and
# when=1 fails the first (only) exec in each such child: the IPAM ADD, and
# also the IPAM DEL of the rollback, which must not matter as nothing was
# allocated. The move, MTU and up steps before IPAM must all be undone.
exec_fails() {
	local x conf
	setup_nic
	x=$T/ipam-$SCEN
	conf=$(conf_for host-local "$x")
	RUN_WRAP=(strace -f -qq -o "$T/strace.out" -e trace=execve
		-P "$CNI_BIN/host-local" -e inject=execve:error=ENOENT:when=1)
	run_plugin ADD "$conf"
	RUN_WRAP=()
	grep 'host-local.*INJECTED' "$T/strace.out" >/dev/null ||
		fail "strace did not fail the IPAM exec: $(cat "$T/strace.out")"
	expect_err 105 "ADD with the IPAM exec failing"
	expect_rolled_back host-local "$x" "after the IPAM exec failed"
	clean_cycle "$conf" "after the IPAM exec failed"
	expect_rolled_back host-local "$x" "after clean ADD/DEL"
}
if command -v strace >/dev/null; then
	scenario "strace: exec of the IPAM plugin fails" exec_fails
else
	info "SKIP strace scenarios: strace is not installed"
fi

# --- strace: the plugin cannot create the IPAM process. Only the plugin
# process is traced (no -f), and only its first process creation fails
# (EAGAIN; not ENOSYS, on which glibc's posix_spawn falls back from clone3 to
# clone), so IPAM ADD never runs while the IPAM DEL of the rollback can.
spawn_fails() {
	local x conf
	setup_nic
	x=$T/ipam-$SCEN
	conf=$(conf_for host-local "$x")
	# shellcheck disable=SC2054 # commas belong to strace's syntax
	RUN_WRAP=(strace -qq -o "$T/strace.out" -e trace=clone,clone3,fork,vfork
		-e inject=clone,clone3,fork,vfork:error=EAGAIN:when=1)
	run_plugin ADD "$conf"
	RUN_WRAP=()
	grep INJECTED "$T/strace.out" >/dev/null ||
		fail "strace did not fail a process creation: $(cat "$T/strace.out")"
	expect_err 105 "ADD with the IPAM spawn failing"
	expect_rolled_back host-local "$x" "after the IPAM spawn failed"
	clean_cycle "$conf" "after the IPAM spawn failed"
	expect_rolled_back host-local "$x" "after clean ADD/DEL"
}
if command -v strace >/dev/null; then
	scenario "strace: spawning the IPAM plugin fails" spawn_fails
fi

# --- strace fault sweep over netlink: fail the N-th sendmsg/sendto of the
# plugin process (its children, the IPAM plugin, are not traced), for
# N = 1, 2, ... until ADD gets through. Each failed ADD must roll back fully.
# A fault after which the rollback is incomplete is recorded, the DEL that a
# runtime would send cleans up, and the sweep goes on, so one run reports
# every such message.
# sweep_check ADD-RC CONF IPAM-DIR WHAT: the last ADD, run with a fault,
# left nothing behind.
sweep_check() {
	if [[ $1 == 0 ]]; then
		# The plugin tolerated or retried the failed send.
		expect_result "ADD with a fault at $4"
		run_plugin DEL "$(with_prev "$2" "$OUT")"
		expect_ok "DEL after ADD survived the fault at $4"
	else
		expect_err any "ADD with a fault at $4"
	fi
	expect_rolled_back host-local "$3" "after a fault at $4"
}

netlink_sweep() {
	local x conf n msg add_rc failed=0 bad=()
	setup_nic
	x=$T/ipam-$SCEN
	conf=$(conf_for host-local "$x")
	for n in $(seq 1 200); do
		# shellcheck disable=SC2054 # commas belong to strace's syntax
		RUN_WRAP=(strace -qq -o "$T/strace.out" -e trace=sendmsg,sendto
			-e inject=sendmsg,sendto:error=EIO:when="$n")
		run_plugin ADD "$conf"
		RUN_WRAP=()
		add_rc=$RC
		msg=$(grep INJECTED "$T/strace.out" | grep -o 'nlmsg_type=[^,]*\|AF_PACKET' |
			head -n1 || true)
		if [[ -z $msg ]]; then
			# No message left to fail: this was a plain ADD.
			[[ $add_rc == 0 ]] || fail "ADD failed at N=$n with no fault injected"
			break
		fi
		msg="message $n ($msg)"
		isolated sweep_check "$add_rc" "$conf" "$x" "$msg"
		if ((ISO_RC != 0)); then
			bad+=("$n")
			run_plugin DEL "$conf"
			expect_ok "recovery DEL after a fault at $msg"
			expect_rolled_back host-local "$x" "after the recovery DEL ($msg)"
		fi
		if [[ $add_rc != 0 ]]; then
			failed=$((failed + 1))
		fi
	done
	[[ $n -lt 200 ]] || fail "ADD still failing after 200 injected netlink faults"
	expect_result "ADD with no fault left to inject"
	info "netlink sweep: $failed of $((n - 1)) faults made ADD fail"
	run_plugin DEL "$(with_prev "$conf" "$OUT")"
	expect_ok "DEL after the sweep"
	expect_rolled_back host-local "$x" "after the sweep"
	((failed >= 3)) || fail "only $failed netlink faults made ADD fail: sweep is not effective"
	((${#bad[@]} == 0)) ||
		fail "rollback incomplete after a fault at netlink message(s) ${bad[*]} (see above)"
}
if command -v strace >/dev/null; then
	scenario "strace: netlink fault sweep" netlink_sweep
fi

t_done
