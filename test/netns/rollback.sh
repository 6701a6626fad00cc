#!/bin/bash
# Rollback of a failed ADD.
#
# Proves that when ADD fails at any step, the steps already taken are undone:
# the host netns is exactly as before (name, altnames, MTU, admin state, MAC),
# the pod is empty, no state file is left, the IPAM allocation is released,
# and the same NIC can be attached and detached cleanly afterwards.
# Failures come from the plugin's test hook HPN_FAIL_AT=<step>, and from real
# syscalls failed by strace: the exec of the IPAM plugin, the creation of its
# process, every netlink message of ADD in turn, every file-system call of ADD
# in turn (fault sweeps), the unlinkat calls of a failing ADD's rollback, and
# the open behind the check that CNI_NETNS is not the host's own netns.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

STEPS=(journal altnames move mtu up rdma-move ipam addr route rdma nccl "done")

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

# --- strace fault sweep over the file system: each openat, write, fsync,
# renameat, renameat2, mkdir, mkdirat, flock and unlinkat of the plugin process
# (not of the IPAM child: strace counts per process, see fault_wrap) fails with
# EIO in turn, N = 1 .. the number of such calls a clean ADD makes after main()
# begins (the dynamic loader's and a sanitizer's own opens come before it and
# are not the plugin's steps). Each faulted ADD either succeeds (the call was
# not essential) and a DEL then undoes it, or fails with a CNI error; either
# way nothing is left: host as before, pod empty, no journal and no temp file,
# host-local's lease released; then a clean ADD/DEL cycle works.
# What may and may not fail ADD, by what the failed call worked on:
#   the log file and the event log (and /etc/localtime, read for its
#     timestamps): best effort, ADD must succeed;
#   the journal (its temp file, the rename over it, the state dir, the lock):
#     ADD must fail, with code 5, since no undo could be trusted otherwise;
#   stdout (the result itself): ADD cannot succeed, and as the runtime gets no
#     result it must not be left attached either: rolled back like any failure;
#   anything else (the netns and /proc files, sysfs, the IPAM pipe): either
#     outcome, with nothing left.
# fsync is swept to prove there is none: journals and hints are not synced
# (a power loss reboots every pod away; see the journal's bootId).
#   the clearing of a stale temp file before each write (unlinkat of .tmp.*):
#     best effort, the exclusive create after it refuses whatever is left.
# unlinkat is swept too, here and inside failing ADDs below.
FS_SYSCALLS=(openat write fsync renameat renameat2 mkdir mkdirat flock unlinkat)

# fs_class TARGET SYSCALL: log, journal, stdout or other.
fs_class() {
	if [[ $2 == unlinkat && $1 == .tmp.* ]]; then
		echo other # a stale temp file cleared before creating it afresh (O_EXCL)
		return
	fi
	case $1 in
	"$T/plugin.log" | /etc/localtime | "$STATE/events.log"*) echo log ;;
	"fd 1") echo stdout ;;
	.tmp.* | "$STATE" | "$STATE/"* | "$NET" | lock | "$CID.$IFNAME" | /tmp | "$T") echo journal ;;
	*) [[ $2 == renameat* || $2 == flock ]] && echo journal || echo other ;;
	esac
}

# fs_fault_check RC CONF DATADIR SYSCALL N TARGET: the last ADD, run with a
# fault, behaved as its class says and left nothing behind.
fs_fault_check() {
	local rc=$1 conf=$2 x=$3 what="$4 #$5 on $6" class
	class=$(fs_class "$6" "$4")
	if [[ $rc == 0 ]]; then
		[[ $class != journal && $class != stdout ]] ||
			fail "ADD succeeded with its $class failing ($what)"
		expect_result "ADD with a fault at $what"
		run_plugin DEL "$(with_prev "$conf" "$OUT")"
		expect_ok "DEL after ADD survived the fault at $what"
	else
		[[ $class != log ]] || fail "a failed log write failed ADD ($what)"
		if [[ $class == journal ]]; then
			expect_err 5 "ADD with a fault at $what"
		else
			expect_err any "ADD with a fault at $what"
		fi
	fi
	expect_rolled_back host-local "$x" "after a fault at $what"
	clean_cycle "$conf" "after a fault at $what"
	expect_rolled_back host-local "$x" "after a fault at $what and a clean ADD/DEL"
}

fs_sweep() {
	local x conf sc n rc line target injected=0 failed=0 bad=()
	setup_nic
	x=$T/ipam-$SCEN
	conf=$(conf_for host-local "$x")
	for sc in "${FS_SYSCALLS[@]}"; do
		syscall_counts ADD "$conf" "$sc"
		expect_result "counting ADD ($sc)"
		run_plugin DEL "$conf"
		expect_ok "DEL after the counting ADD ($sc)"
		info "$sc: $((SC_TOTAL - SC_PRE)) calls in ADD (and $SC_PRE before main)"
		[[ $sc != fsync || $SC_TOTAL == 0 ]] ||
			fail "ADD made $SC_TOTAL fsync calls: journals and hints are not synced"
		for ((n = SC_PRE + 1; n <= SC_TOTAL + 1; n++)); do
			fault_wrap "$sc" "$n"
			run_plugin ADD "$conf"
			RUN_WRAP=()
			rc=$RC
			line=$(fault_line)
			if ((n > SC_TOTAL)); then
				[[ -z $line ]] || fail "$sc: call #$n exists, but the clean ADD made $SC_TOTAL"
				expect_result "ADD with no $sc left to fail"
				run_plugin DEL "$conf"
				expect_ok "DEL after the $sc sweep"
				break
			fi
			[[ -n $line ]] || fail "$sc: no call #$n, but the clean ADD made $SC_TOTAL"
			target=$(fault_target)
			injected=$((injected + 1))
			((rc == 0)) || failed=$((failed + 1))
			isolated fs_fault_check "$rc" "$conf" "$x" "$sc" "$n" "$target"
			if ((ISO_RC != 0)); then
				bad+=("$sc #$n ($target)")
				run_plugin DEL "$conf"
				expect_ok "recovery DEL after a fault at $sc #$n"
				expect_rolled_back host-local "$x" "after the recovery DEL ($sc #$n)"
			fi
		done
	done
	info "file-system sweep: $failed of $injected faults made ADD fail"
	((injected >= 30)) || fail "only $injected file-system faults injected: sweep is not effective"
	((${#bad[@]} == 0)) || fail "wrong outcome after a fault at: ${bad[*]} (see above)"
}
if command -v strace >/dev/null; then
	scenario "strace: file-system fault sweep" fs_sweep
fi

# --- unlinkat in a failing ADD: HPN_FAIL_AT=<step> fails ADD, and each
# unlinkat of its rollback fails too. The journal then cannot be removed: it
# may stay (it describes a device that is back on the host, and IPAM released),
# and the next DEL removes it. Nothing else may be left.
unlink_sweep() {
	local x conf step n line injected=0
	setup_nic
	x=$T/ipam-$SCEN
	conf=$(conf_for host-local "$x")
	for step in journal move ipam "done"; do
		syscall_counts ADD "$conf" unlinkat HPN_FAIL_AT="$step"
		expect_err any "counting ADD with HPN_FAIL_AT=$step"
		((SC_TOTAL > SC_PRE)) || fail "a failed ADD (HPN_FAIL_AT=$step) removed no journal"
		for ((n = SC_PRE + 1; n <= SC_TOTAL; n++)); do
			fault_wrap unlinkat "$n"
			run_plugin ADD "$conf" HPN_FAIL_AT="$step"
			RUN_WRAP=()
			line=$(fault_line)
			[[ -n $line ]] || fail "unlinkat #$n not reached (HPN_FAIL_AT=$step)"
			injected=$((injected + 1))
			expect_err 106 "ADD with HPN_FAIL_AT=$step and unlinkat #$n failing" 'injected failure'
			snap_same "$HOST_NS" "$T/host.before" "host after HPN_FAIL_AT=$step, unlinkat #$n failing"
			pod_empty "pod after HPN_FAIL_AT=$step, unlinkat #$n failing"
			[[ -z $(hostlocal_ips "$x") ]] || fail "IPAM lease kept (HPN_FAIL_AT=$step, unlinkat #$n)"
			[[ $(state_files) == "" || $(state_files) == "$STATE/$NET/$CID.$IFNAME" ]] ||
				fail "HPN_FAIL_AT=$step, unlinkat #$n failing left: $(state_files)"
			run_plugin DEL "$conf"
			expect_ok "DEL after HPN_FAIL_AT=$step, unlinkat #$n failing"
			expect_rolled_back host-local "$x" "after HPN_FAIL_AT=$step, unlinkat #$n and DEL"
		done
	done
	# The journal's temp file: its write fails, then removing it fails (the
	# second unlinkat: the first cleared any stale temp file before the
	# create). The temp file stays (a later GC removes it); nothing else.
	RUN_WRAP=(strace -qq -y -o "$T/count.trace" -e trace=write)
	run_plugin ADD "$conf"
	RUN_WRAP=()
	expect_result "counting ADD (the journal's first write)"
	run_plugin DEL "$conf"
	expect_ok "DEL after the counting ADD"
	n=$(awk 'index($0, "write(") == 1 { n++; if (index($0, "/.tmp.")) { print n; exit } }' \
		"$T/count.trace")
	[[ -n $n ]] || fail "the counting ADD wrote no journal temp file: $(cat "$T/count.trace")"
	# shellcheck disable=SC2054 # commas belong to strace's syntax
	RUN_WRAP=(strace -qq -o "$T/fault.trace" -e trace=write,unlinkat
		-e inject=write:error=EIO:when="$n" -e inject=unlinkat:error=EIO:when=2)
	run_plugin ADD "$conf"
	RUN_WRAP=()
	[[ $(grep -c INJECTED "$T/fault.trace") == 2 ]] ||
		fail "expected the write and unlinkat both failed: $(cat "$T/fault.trace")"
	injected=$((injected + 2))
	expect_err 5 "ADD with the journal's write and the temp file's removal failing"
	snap_same "$HOST_NS" "$T/host.before" "host after write and unlinkat failed"
	pod_empty "pod after write and unlinkat failed"
	[[ $(state_files) == "$STATE/$NET/.tmp.$CID.$IFNAME."* ]] ||
		fail "expected only the temp file left, have: $(state_files)"
	run_plugin GC "$(jq -c '.cniVersion = "1.1.0" | .["cni.dev/valid-attachments"] = []' <<<"$conf")" \
		-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "GC after a temp file was left"
	expect_rolled_back host-local "$x" "after GC removed the temp file"
	clean_cycle "$conf" "after the unlinkat sweep"
	expect_rolled_back host-local "$x" "after the unlinkat sweep"
	info "unlinkat in failing ADDs: $injected faults injected"
}
if command -v strace >/dev/null; then
	scenario "strace: unlinkat failing inside a failing ADD" unlink_sweep
fi

# --- The check that CNI_NETNS is not the host's own netns must fail closed:
# with CNI_NETNS naming the host netns and the check's own stat of
# /proc/thread-self/ns/net failing, ADD must still be refused (4, or 103 for
# the failed stat) and the host left alone: proceeding would "move" nic0 into
# the netns it is in, renamed, addressed, on the host.
self_netns_fault() {
	local conf n
	setup_nic
	conf=$(conf_for hpnt-ipam "$T/ipam-$SCEN.log")
	RUN_WRAP=(strace -qq -o "$T/count.trace" -e trace=openat,newfstatat)
	run_plugin ADD "$conf" CNI_NETNS="$(ns_path "$HOST_NS")"
	RUN_WRAP=()
	expect_err 4 "ADD with CNI_NETNS the host's netns" "host's own"
	# The check's stat: the first of /proc/thread-self/ns/net after CNI_NETNS's open.
	n=$(awk -v ns="\"$(ns_path "$HOST_NS")\"" '
		/^newfstatat\(/ { i++ }
		/^openat\(/ && index($0, ns) { seen = 1; next }
		seen && /^newfstatat\(.*"\/proc\/thread-self\/ns\/net"/ { print i; exit }' "$T/count.trace")
	[[ -n $n ]] || fail "no stat of /proc/thread-self/ns/net after CNI_NETNS's open: $(cat "$T/count.trace")"
	fault_wrap newfstatat "$n"
	run_plugin ADD "$conf" CNI_NETNS="$(ns_path "$HOST_NS")"
	RUN_WRAP=()
	[[ $(fault_target) == /proc/thread-self/ns/net ]] ||
		fail "injected at $(fault_line), not the check's stat"
	expect_err "4|103" "ADD with CNI_NETNS the host's netns and the check's stat failing"
	snap_same "$HOST_NS" "$T/host.before" "host after the self-netns check failed"
	expect_no_state "after the self-netns check failed"
}
if command -v strace >/dev/null; then
	scenario "strace: the host-netns check fails closed" self_netns_fault
fi

# --- Multi-NIC and shared mode. pool_conf EXTRA [jq args]: 3 NICs of the
# pool "pool*" (MTU 1300) with host-local; mv_conf: a macvlan child of ens0.
setup_pool() {
	local i
	for i in 0 1 2; do
		mk_nic "$HOST_NS" "pool$i" "ppeer$i"
	done
	mk_nic "$HOST_NS" ens0 epeer0
	ip -n "$HOST_NS" link set pool2 mtu 1400
	ip -n "$HOST_NS" link property add dev pool1 altname hpnt-pool-alt
	ip -n "$HOST_NS" link set pool1 up
	snap_save "$HOST_NS" "$T/host.before"
}

pool_conf() {
	net_conf 1.0.0 '.match = {devices: ["pool*"]} | .count = 3 | .ifName = "hpn0" |
		.mtu = 1300 | .ipam = {type: "host-local", dataDir: $x,
			ranges: [[{subnet: "10.84.0.0/24"}]], routes: [{dst: "10.85.0.0/16"}]}' --arg x "$1"
}

mv_conf() {
	net_conf 1.0.0 '.mode = "macvlan" | .master = "ens0" | .ifName = "hpn0" | .mtu = 1300 |
		.ipam = {type: "host-local", dataDir: $x,
			ranges: [[{subnet: "10.84.0.0/24"}]], routes: [{dst: "10.85.0.0/16"}]}' --arg x "$1"
}

# HPN_FAIL_AT at each step of NIC 0 and of NIC 2 of three, and of a macvlan
# child: every NIC comes back (the child is deleted), every lease goes.
fail_at_multi() {
	local x=$T/hl-$SCEN conf step nic what
	setup_pool
	for what in pool macvlan; do
		if [[ $what == pool ]]; then conf=$(pool_conf "$x"); else conf=$(mv_conf "$x"); fi
		for step in "${STEPS[@]}"; do
			for nic in 0 2; do
				# journal, nccl and done are once per attachment; a child has no altnames.
				[[ $nic == 2 && ($what == macvlan || $step == journal || $step == nccl ||
					$step == done) ]] && continue
				[[ $what == macvlan && $step == altnames ]] && continue
				run_plugin ADD "$conf" HPN_FAIL_AT="$step" HPN_FAIL_NIC="$nic"
				expect_err any "$what ADD failing after $step of NIC $nic"
				expect_rolled_back host-local "$x" "$what: after HPN_FAIL_AT=$step of NIC $nic"
			done
		done
		clean_cycle "$conf" "$what"
		expect_rolled_back host-local "$x" "$what: after a clean ADD/DEL"
	done
}
scenario "HPN_FAIL_AT at each step of a 3-NIC pod and of a macvlan child" fail_at_multi

# kill -9 at each netlink send of a 3-NIC ADD and of a macvlan ADD, then DEL
# (for the macvlan ADD every other time GC first: it deletes the child and the
# journal; Debian's host-local stops at 1.0.0, so the DEL releases the lease):
# the host is as before, no lease, no state.
crash_multi() {
	local x=$T/hl-$SCEN conf n what
	setup_pool
	for what in pool macvlan; do
		if [[ $what == pool ]]; then conf=$(pool_conf "$x"); else conf=$(mv_conf "$x"); fi
		for n in $(seq 1 60); do
			RUN_WRAP=(strace -qq -o "$T/strace.out" -e trace=sendmsg
				-e inject=sendmsg:signal=KILL:when="$n")
			run_plugin ADD "$conf"
			RUN_WRAP=()
			((RC != 0)) || break
			if [[ $what == macvlan ]] && ((n % 2)); then
				run_plugin GC "$(jq -c '.cniVersion = "1.1.0" | del(.ipam) |
					.["cni.dev/valid-attachments"] = []' <<<"$conf")" \
					-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
				expect_ok "$what: GC after a kill at send $n"
				[[ -z $(state_files) ]] || fail "$what: GC after a kill at send $n left $(state_files)"
			fi
			run_plugin DEL "$conf"
			expect_ok "$what: DEL after a kill at send $n"
			expect_rolled_back host-local "$x" "$what: after a kill at send $n"
		done
		((RC == 0)) || fail "$what: ADD never got through"
		((n > 6)) || fail "$what: ADD survived a kill at send $n: too few sends"
		info "$what: killed ADD at each of $((n - 1)) netlink sends"
		run_plugin DEL "$conf"
		expect_ok "$what: DEL after the last ADD"
		expect_rolled_back host-local "$x" "$what: after the sweep"
	done
}
if command -v strace >/dev/null; then
	scenario "kill -9 at each netlink send of a 3-NIC and of a macvlan ADD, then GC or DEL" crash_multi
fi

t_done
