#!/bin/bash
# DEL is idempotent, survives a vanished pod, and finishes under faults.
#
# Proves that DEL succeeds and changes nothing more when repeated, when no
# ADD ever happened (with the pod netns present or its path gone), and when
# the pod netns was deleted under the plugin (the veth dies with it): the
# state and the IPAM allocation are released all the same. And that a DEL,
# or a GC, with one netlink message or one file-system call failing (strace,
# each in turn) either succeeds having done everything, or fails with a CNI
# error after which a retried DEL (GC) does everything.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

# setup_nic: nic0 (with an altname) and a decoy nic1 in the host.
setup_nic() {
	mk_nic "$HOST_NS" nic0 peer0
	mk_nic "$HOST_NS" nic1 peer1
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0
	snap_save "$HOST_NS" "$T/host.before"
}

# conf_hl DATADIR: nic0 as hpn0 with host-local IPAM.
conf_hl() {
	net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0" |
		.ipam = {type: "host-local", dataDir: $dd,
			ranges: [[{subnet: "10.80.0.0/24"}]]}' --arg dd "$1"
}

# --- DEL twice after one ADD: both succeed, the second changes nothing.
del_twice() {
	setup_nic
	dd=$T/hl-$SCEN
	conf=$(conf_hl "$dd")
	run_plugin ADD "$conf"
	expect_result "ADD"
	prev=$(with_prev "$conf" "$OUT")
	run_plugin DEL "$prev"
	expect_ok "first DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after first DEL"
	run_plugin DEL "$prev"
	expect_ok "second DEL"
	[[ -z $OUT ]] || fail "second DEL printed: $OUT"
	run_plugin DEL "$conf"
	expect_ok "third DEL, without prevResult"
	snap_same "$HOST_NS" "$T/host.before" "host after repeated DEL"
	pod_empty "pod after repeated DEL"
	expect_no_state "after repeated DEL"
	[[ -z $(hostlocal_ips "$dd") ]] || fail "host-local holds $(hostlocal_ips "$dd")"
}
scenario "DEL twice" del_twice

# --- DEL with no ADD before: success, nothing touched, no state created.
del_without_add() {
	setup_nic
	dd=$T/hl-$SCEN
	conf=$(conf_hl "$dd")
	run_plugin DEL "$conf"
	expect_ok "DEL without ADD"
	[[ -z $OUT ]] || fail "DEL printed: $OUT"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL without ADD"
	pod_empty "pod after DEL without ADD"
	expect_no_state "after DEL without ADD"
	run_plugin DEL "$conf" CNI_NETNS=/run/netns/hpnt-never-existed
	expect_ok "DEL without ADD, netns path that does not exist"
	run_plugin DEL "$conf" -CNI_NETNS
	expect_ok "DEL without ADD, CNI_NETNS unset"
	snap_same "$HOST_NS" "$T/host.before" "host after DELs without ADD"
	expect_no_state "after DELs without ADD"
}
scenario "DEL without ADD" del_without_add

# --- the pod netns is deleted before DEL: the veth pair is destroyed with it.
# DEL must still succeed and release the state and the IPAM allocation.
del_netns_gone() {
	setup_nic
	dd=$T/hl-$SCEN
	conf=$(conf_hl "$dd")
	run_plugin ADD "$conf"
	expect_result "ADD"
	prev=$(with_prev "$conf" "$OUT")
	[[ -n $(hostlocal_ips "$dd") ]] || fail "no host-local allocation after ADD"
	ip netns del "$POD_NS"
	for _ in $(seq 50); do
		has_link "$HOST_NS" peer0 || break
		sleep 0.1
	done
	if has_link "$HOST_NS" peer0; then
		fail "peer0 survived the pod netns (test setup)"
	fi
	run_plugin DEL "$prev"
	expect_ok "DEL with the pod netns gone"
	expect_no_state "after DEL with the pod netns gone"
	[[ -z $(hostlocal_ips "$dd") ]] ||
		fail "host-local still holds $(hostlocal_ips "$dd") after DEL"
	# The host is as before, less the veth pair that died with the pod.
	jq '.links |= map(select(.ifname != "nic0" and .ifname != "peer0"))' \
		"$T/host.before" >"$T/host.expected"
	snap_same "$HOST_NS" "$T/host.expected" "host after DEL with the pod netns gone"
	run_plugin DEL "$prev"
	expect_ok "second DEL with the pod netns gone"
}
scenario "DEL after the pod netns is gone" del_netns_gone

# ---- DEL and GC under faults ----------------------------------------------
# After a good ADD, DEL runs with one fault injected by strace: each netlink
# message it sends in turn (sendmsg/sendto failing with EIO), then each of its
# file-system calls in turn (openat, write, fsync, unlinkat, mkdir, mkdirat,
# flock; counted from a clean DEL, after main() begins; see fault_wrap). The
# faulted DEL either succeeds, and then must have done everything, or fails
# with a CNI error, and then a retried DEL succeeds and does everything: host
# exactly as before (name, MTU, MAC, altnames, admin state), pod empty, no
# journal, host-local's lease released. A failed log write must not fail it.
# GC likewise, with a listed attachment A that must stay untouched and a stale
# one B that GC (or the retried GC) must undo, getdents64 (its directory
# listing) included.

SWEEP_MACS=(02:00:00:00:d0:01 02:00:00:00:d0:02 02:00:00:00:d1:01 02:00:00:00:d1:02)

# sweep_nics: nic0 (MTU 1400, two altnames, up, peer up) and nic1 (an
# altname), with fixed MACs, so that reset_nics can make them again exactly
# after a fault that did lasting damage.
sweep_nics() {
	mk_nic "$HOST_NS" nic0 peer0 "${SWEEP_MACS[0]}"
	ip -n "$HOST_NS" link set peer0 address "${SWEEP_MACS[1]}"
	ip -n "$HOST_NS" link set nic0 mtu 1400
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0-second
	ip -n "$HOST_NS" link set peer0 up
	ip -n "$HOST_NS" link set nic0 up
	mk_nic "$HOST_NS" nic1 peer1 "${SWEEP_MACS[2]}"
	ip -n "$HOST_NS" link set peer1 address "${SWEEP_MACS[3]}"
	ip -n "$HOST_NS" link property add dev nic1 altname hpnt-alt1
}

# reset_nics POD...: after a fault the plugin did not recover from, remove
# both NICs wherever they are (the pods' hpn0) and every journal and lease,
# and make the NICs again, so the next fault starts from a clean host.
reset_nics() {
	local ns
	for ns in "$@"; do
		ip -n "$ns" link del hpn0 2>/dev/null || true
	done
	for ns in nic0 nic1 hpn0; do
		ip -n "$HOST_NS" link del "$ns" 2>/dev/null || true
	done
	rm -rf "${STATE:?}/$NET" "$X"
	sweep_nics
}

# conf_sweep DEVICE: DEVICE as hpn0, MTU 9000, an address and a route from
# host-local (its leases are files in $X).
conf_sweep() {
	net_conf 1.0.0 '.device = $dev | .ifName = "hpn0" | .mtu = 9000 |
		.ipam = {type: "host-local", dataDir: $dd,
			ranges: [[{subnet: "10.81.0.0/24", gateway: "10.81.0.1"}]],
			routes: [{dst: "10.82.0.0/16"}]}' --arg dd "$X" --arg dev "$1"
}

# conf_gc DEVICE: the same at 1.1.0 (GC's version), with the recording IPAM
# (log $X): Debian's host-local stops at 1.0.0.
conf_gc() {
	net_conf 1.1.0 '.device = $dev | .ifName = "hpn0" | .mtu = 9000 |
		.ipam = {type: "hpnt-ipam", log: $log,
			addresses: [{address: "10.81.0.7/24", gateway: "10.81.0.1"}],
			routes: [{dst: "10.82.0.0/16"}]}' --arg log "$X" --arg dev "$1"
}

# lease_held CID: the recording IPAM's last ADD for CID has no later DEL.
lease_held() {
	local add del
	[[ -f $X ]] || return 1
	add=$(grep -n "^ADD $1 " "$X" | tail -n1 | cut -d: -f1 || true)
	del=$(grep -n "^DEL $1 " "$X" | tail -n1 | cut -d: -f1 || true)
	[[ -n $add ]] && [[ -z $del || $del -lt $add ]]
}

# del_clean WHAT: nothing of the attachment is left.
del_clean() {
	snap_same "$HOST_NS" "$T/host.before" "host after $1"
	pod_empty "pod after $1"
	expect_no_state "$1"
	[[ -z $(hostlocal_ips "$X") ]] || fail "$1: host-local still holds $(hostlocal_ips "$X")"
}

# del_fault_check RC CLASS WHAT: the DEL just run under a fault.
del_fault_check() {
	local rc=$1 class=$2 what=$3
	if [[ $rc != 0 ]]; then
		[[ $class != log ]] || fail "a failed log write failed DEL ($what)"
		expect_err any "DEL with a fault at $what"
		run_plugin DEL "$CONF"
		expect_ok "retried DEL after a fault at $what"
		what="$what, then a retried DEL"
	fi
	[[ -z $OUT ]] || fail "DEL printed: $OUT"
	del_clean "$what"
}

# fault_class TARGET: log for the log file (best effort), else other.
fault_class() {
	case $1 in
	"$T/plugin.log" | /etc/localtime) echo log ;;
	*) echo other ;;
	esac
}

# netlink_msg: the message the last strace run failed ("" if none).
netlink_msg() {
	grep INJECTED "$T/fault.trace" | grep -o 'nlmsg_type=[^,]*\|AF_PACKET' | head -n1 || true
}

# One faulted DEL after a good ADD; sets SW_INJECTED, SW_FAILED, SW_BAD.
SW_INJECTED=0
SW_FAILED=0
SW_BAD=()
del_once() {
	local what=$1 rc=$2 class=$3
	SW_INJECTED=$((SW_INJECTED + 1))
	((rc == 0)) || SW_FAILED=$((SW_FAILED + 1))
	isolated del_fault_check "$rc" "$class" "$what"
	if ((ISO_RC != 0)); then
		SW_BAD+=("$what")
		reset_nics "$POD_NS"
	fi
}

del_netlink_sweep() {
	local n msg rc
	sweep_nics
	snap_save "$HOST_NS" "$T/host.before"
	X=$T/hl-$SCEN
	CONF=$(conf_sweep nic0)
	for n in $(seq 1 100); do
		run_plugin ADD "$CONF"
		expect_result "ADD before DEL #$n"
		# shellcheck disable=SC2054 # commas belong to strace's syntax
		RUN_WRAP=(strace -qq -o "$T/fault.trace" -e trace=sendmsg,sendto
			-e inject=sendmsg,sendto:error=EIO:when="$n")
		run_plugin DEL "$CONF"
		RUN_WRAP=()
		rc=$RC
		msg=$(netlink_msg)
		if [[ -z $msg ]]; then
			expect_ok "DEL with no netlink message left to fail"
			del_clean "the last DEL of the netlink sweep"
			break
		fi
		del_once "netlink message $n ($msg)" "$rc" other
	done
	((n < 100)) || fail "DEL still faulted after 100 netlink messages"
	info "DEL netlink sweep: $SW_FAILED of $SW_INJECTED faults made DEL fail"
	((SW_INJECTED >= 4)) || fail "only $SW_INJECTED netlink messages in DEL: sweep is not effective"
	((${#SW_BAD[@]} == 0)) || fail "wrong outcome after a fault at: $(printf '\n  %s' "${SW_BAD[@]}")"
}

del_fs_sweep() {
	local sc n rc line target
	sweep_nics
	snap_save "$HOST_NS" "$T/host.before"
	X=$T/hl-$SCEN
	CONF=$(conf_sweep nic0)
	for sc in openat write fsync unlinkat mkdir mkdirat flock; do
		run_plugin ADD "$CONF"
		expect_result "ADD before the counting DEL ($sc)"
		syscall_counts DEL "$CONF" "$sc"
		expect_ok "counting DEL ($sc)"
		info "$sc: $((SC_TOTAL - SC_PRE)) calls in DEL"
		for ((n = SC_PRE + 1; n <= SC_TOTAL + 1; n++)); do
			run_plugin ADD "$CONF"
			expect_result "ADD before DEL with $sc #$n failing"
			fault_wrap "$sc" "$n"
			run_plugin DEL "$CONF"
			RUN_WRAP=()
			rc=$RC
			line=$(fault_line)
			if ((n > SC_TOTAL)); then
				[[ -z $line ]] || fail "$sc: call #$n exists, but the clean DEL made $SC_TOTAL"
				expect_ok "DEL with no $sc left to fail"
				del_clean "the last DEL of the $sc sweep"
				break
			fi
			[[ -n $line ]] || fail "$sc: no call #$n, but the clean DEL made $SC_TOTAL"
			target=$(fault_target)
			del_once "$sc #$n ($target)" "$rc" "$(fault_class "$target")"
		done
	done
	info "DEL file-system sweep: $SW_FAILED of $SW_INJECTED faults made DEL fail"
	((SW_INJECTED >= 10)) || fail "only $SW_INJECTED file-system faults in DEL: sweep is not effective"
	((${#SW_BAD[@]} == 0)) || fail "wrong outcome after a fault at: $(printf '\n  %s' "${SW_BAD[@]}")"
}

# GC: A (nic0, listed) in the scenario's pod, B (nic1, stale) in pod B.
gc_setup() {
	sweep_nics
	snap_save "$HOST_NS" "$T/host.before"
	X=$T/ipam-$SCEN.log
	POD_B=${HPNT_PREFIX}q$SCEN
	ip netns add "$POD_B"
	CID_A=$CID-a CID_B=$CID-b
	CONF=$(conf_gc nic0)
	CONF_B=$(conf_gc nic1)
	GC_CONF=$(jq -c --arg a "$CID_A" '.["cni.dev/valid-attachments"] = [{containerID: $a, ifname: "eth0"}]' \
		<<<"$CONF")
	run_plugin ADD "$CONF" CNI_CONTAINERID="$CID_A"
	expect_result "ADD A"
	snap_save "$HOST_NS" "$T/host.with-a"
}

add_b() {
	run_plugin ADD "$CONF_B" CNI_CONTAINERID="$CID_B" CNI_NETNS="$(ns_path "$POD_B")"
	expect_result "ADD B"
}

run_gc() {
	run_plugin GC "$1" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
}

# gc_clean WHAT: B is undone, A untouched.
gc_clean() {
	snap_same "$HOST_NS" "$T/host.with-a" "host after $1"
	[[ $(ip -n "$POD_B" -j link show | jq -c '[.[].ifname]') == '["lo"]' ]] ||
		fail "$1: pod B still has $(ip -n "$POD_B" -j link show | jq -c '[.[].ifname]')"
	has_link "$POD_NS" hpn0 || fail "$1: GC took A's hpn0, which is listed"
	[[ $(state_files) == "$STATE/$NET/$CID_A.eth0" ]] || fail "$1: journals: $(state_files)"
	! lease_held "$CID_B" || fail "$1: IPAM DEL of B did not run: $(tr '\n' '|' <"$X")"
	lease_held "$CID_A" || fail "$1: A's lease was released: $(tr '\n' '|' <"$X")"
}

gc_fault_check() {
	local rc=$1 class=$2 what=$3
	if [[ $rc != 0 ]]; then
		[[ $class != log ]] || fail "a failed log write failed GC ($what)"
		expect_err any "GC with a fault at $what"
		run_gc "$GC_CONF"
		expect_ok "retried GC after a fault at $what"
		what="$what, then a retried GC"
	fi
	gc_clean "$what"
}

gc_once() {
	local what=$1 rc=$2 class=$3
	SW_INJECTED=$((SW_INJECTED + 1))
	((rc == 0)) || SW_FAILED=$((SW_FAILED + 1))
	isolated gc_fault_check "$rc" "$class" "$what"
	if ((ISO_RC != 0)); then
		SW_BAD+=("$what")
		# Put B back on the host by hand: its pod, journal and lease go.
		ip -n "$POD_B" link del hpn0 2>/dev/null || true
		ip -n "$HOST_NS" link del nic1 2>/dev/null || true
		rm -f "$STATE/$NET/$CID_B.eth0" "$STATE/$NET"/.tmp.*
		echo "DEL $CID_B eth0 (reset by the test)" >>"$X"
		mk_nic "$HOST_NS" nic1 peer1 "${SWEEP_MACS[2]}"
		ip -n "$HOST_NS" link set peer1 address "${SWEEP_MACS[3]}"
		ip -n "$HOST_NS" link property add dev nic1 altname hpnt-alt1
	fi
}

gc_end() {
	run_gc "$(jq -c '.["cni.dev/valid-attachments"] = []' <<<"$CONF")"
	expect_ok "GC of everything"
	snap_same "$HOST_NS" "$T/host.before" "host after GC of everything"
	pod_empty "pod after GC of everything"
	expect_no_state "GC of everything"
	! lease_held "$CID_A" || fail "GC of everything did not release A"
	ip netns del "$POD_B"
	((${#SW_BAD[@]} == 0)) || fail "wrong outcome after a fault at: $(printf '\n  %s' "${SW_BAD[@]}")"
}

gc_netlink_sweep() {
	local n msg rc
	gc_setup
	for n in $(seq 1 100); do
		add_b
		# shellcheck disable=SC2054 # commas belong to strace's syntax
		RUN_WRAP=(strace -qq -o "$T/fault.trace" -e trace=sendmsg,sendto
			-e inject=sendmsg,sendto:error=EIO:when="$n")
		run_gc "$GC_CONF"
		RUN_WRAP=()
		rc=$RC
		msg=$(netlink_msg)
		if [[ -z $msg ]]; then
			expect_ok "GC with no netlink message left to fail"
			gc_clean "the last GC of the netlink sweep"
			break
		fi
		gc_once "netlink message $n ($msg)" "$rc" other
	done
	((n < 100)) || fail "GC still faulted after 100 netlink messages"
	info "GC netlink sweep: $SW_FAILED of $SW_INJECTED faults made GC fail"
	((SW_INJECTED >= 4)) || fail "only $SW_INJECTED netlink messages in GC: sweep is not effective"
	gc_end
}

gc_fs_sweep() {
	local sc n rc line target
	gc_setup
	for sc in openat write fsync unlinkat mkdir mkdirat flock getdents64; do
		add_b
		syscall_counts GC "$GC_CONF" "$sc" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
		expect_ok "counting GC ($sc)"
		info "$sc: $((SC_TOTAL - SC_PRE)) calls in GC"
		for ((n = SC_PRE + 1; n <= SC_TOTAL + 1; n++)); do
			add_b
			fault_wrap "$sc" "$n"
			run_gc "$GC_CONF"
			RUN_WRAP=()
			rc=$RC
			line=$(fault_line)
			if ((n > SC_TOTAL)); then
				[[ -z $line ]] || fail "$sc: call #$n exists, but the clean GC made $SC_TOTAL"
				expect_ok "GC with no $sc left to fail"
				gc_clean "the last GC of the $sc sweep"
				break
			fi
			[[ -n $line ]] || fail "$sc: no call #$n, but the clean GC made $SC_TOTAL"
			target=$(fault_target)
			gc_once "$sc #$n ($target)" "$rc" "$(fault_class "$target")"
		done
	done
	info "GC file-system sweep: $SW_FAILED of $SW_INJECTED faults made GC fail"
	((SW_INJECTED >= 10)) || fail "only $SW_INJECTED file-system faults in GC: sweep is not effective"
	gc_end
}

if command -v strace >/dev/null; then
	scenario "DEL: netlink fault sweep, then a retried DEL" del_netlink_sweep
	scenario "DEL: file-system fault sweep, then a retried DEL" del_fs_sweep
	scenario "GC: netlink fault sweep, then a retried GC" gc_netlink_sweep
	scenario "GC: file-system fault sweep, then a retried GC" gc_fs_sweep
else
	info "SKIP fault sweeps: strace is not installed"
fi

t_done
