#!/bin/bash
# Recovery by GC: from the journal of an ADD killed with SIGKILL, and from
# journals whose pod netns no longer exists.
#
# Proves that GC, with the attachment not in cni.dev/valid-attachments, puts
# the host back exactly as it was and releases IPAM for the journal's
# container and interface, with no journal and no temp file left, when ADD
# was killed (kill -9, injected by strace) at each netlink send, and at each
# openat, write, fsync and renameat of ADD (between a journal's temp file and
# its rename, at the log, at the result on stdout). lifecycle.sh covers kill -9
# followed by DEL or by a retried ADD; this is the runtime's other way back.
# And that GC cleans a journal whose netns is gone: the pod netns deleted (the
# veth died with it), a physical NIC the kernel handed back to the host under
# its pod-side name, a boot-time leftover (netns path and ifindexes stale, the
# NIC on the host as it was), and a netns path reused by a new pod whose own
# hpn0 (another MAC) GC must leave alone.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

# setup_nic: nic0 (MTU 1400, two altnames, up, peer up) and a decoy nic1.
setup_nic() {
	mk_nic "$HOST_NS" nic0 peer0
	mk_nic "$HOST_NS" nic1 peer1
	ip -n "$HOST_NS" link set nic0 mtu 1400
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0-second
	ip -n "$HOST_NS" link set peer0 up
	ip -n "$HOST_NS" link set nic0 up
	snap_save "$HOST_NS" "$T/host.before"
	LOG=$T/ipam-$SCEN.log
	CONF=$(net_conf 1.1.0 '.device = "nic0" | .ifName = "hpn0" | .mtu = 9000 |
		.ipam = {type: "hpnt-ipam", log: $log,
			addresses: [{address: "10.86.0.5/24", gateway: "10.86.0.1"}],
			routes: [{dst: "10.87.0.0/16"}]}' --arg log "$LOG")
}

# gc_all: GC with nothing listed (every attachment of the network is stale).
gc_all() {
	run_plugin GC "$(jq -c '.["cni.dev/valid-attachments"] = []' <<<"$CONF")" \
		-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
}

# ipam_released WHAT: the recording IPAM saw a DEL for this container and
# interface after its last ADD (or never an ADD).
ipam_released() {
	local add del
	add=$(grep -n "^ADD $CID eth0 " "$LOG" 2>/dev/null | tail -n1 | cut -d: -f1 || true)
	del=$(grep -n "^DEL $CID eth0 " "$LOG" 2>/dev/null | tail -n1 | cut -d: -f1 || true)
	[[ -z $add || (-n $del && $del -gt $add) ]] ||
		fail "$1: IPAM ADD for $CID without a later DEL: $(tr '\n' '|' <"$LOG")"
}

# recovered WHAT: GC succeeded and nothing of the attachment is left.
recovered() {
	expect_ok "GC $1"
	[[ -z $OUT ]] || fail "GC printed: $OUT"
	snap_same "$HOST_NS" "$T/host.before" "host after GC $1"
	pod_empty "pod after GC $1"
	expect_no_state "after GC $1"
	ipam_released "GC $1"
}

# --- kill -9 at each netlink send of ADD, then GC.
crash_netlink_gc() {
	local n
	setup_nic
	for n in $(seq 1 60); do
		# shellcheck disable=SC2054 # commas belong to strace's syntax
		RUN_WRAP=(strace -qq -o "$T/fault.trace" -e trace=sendmsg,sendto
			-e inject=sendmsg,sendto:signal=KILL:when="$n")
		run_plugin ADD "$CONF"
		RUN_WRAP=()
		if ((RC == 0)); then
			# No send left to kill at: ADD completed; GC undoes that too.
			gc_all
			recovered "of a completed ADD"
			break
		fi
		[[ $RC == 137 ]] || fail "ADD killed at send $n: exit $RC, not 137 (SIGKILL)"
		gc_all
		recovered "after a kill at netlink send $n"
	done
	((n > 5)) || fail "ADD survived a kill at send $n: too few sends to matter"
	((n < 60)) || fail "ADD never got through"
	info "killed ADD at each of $((n - 1)) netlink sends, GC recovered each"
}
scenario "kill -9 at each netlink send of ADD, then GC" crash_netlink_gc

# --- kill -9 at each file-system call of ADD, then GC (which also removes
# the temp file of a journal write that never reached its rename).
crash_fs_gc() {
	local sc n kills=0 tmp_seen=0
	setup_nic
	for sc in openat write fsync renameat; do
		syscall_counts ADD "$CONF" "$sc"
		expect_result "counting ADD ($sc)"
		gc_all
		recovered "of the counting ADD ($sc)"
		for ((n = SC_PRE + 1; n <= SC_TOTAL; n++)); do
			fault_wrap "$sc" "$n" signal=KILL
			run_plugin ADD "$CONF"
			RUN_WRAP=()
			[[ -n $(fault_line) ]] || fail "$sc: no call #$n to kill at, but the clean ADD made $SC_TOTAL"
			[[ $RC == 137 ]] || fail "ADD killed at $sc #$n: exit $RC, not 137"
			kills=$((kills + 1))
			if compgen -G "$STATE/$NET/.tmp.*" >/dev/null; then
				tmp_seen=$((tmp_seen + 1))
			fi
			gc_all
			recovered "after a kill at $sc #$n ($(fault_target))"
		done
	done
	info "killed ADD at $kills file-system calls ($tmp_seen left a temp file), GC recovered each"
	((kills >= 20)) || fail "only $kills kill points: sweep is not effective"
	((tmp_seen >= 3)) || fail "no kill left a journal temp file: the temp-file case was not exercised"
}
scenario "kill -9 at each file-system call of ADD, then GC" crash_fs_gc

# --- The pod netns is deleted before GC: the veth dies with it. GC releases
# IPAM and drops the journal; the host is as before less the dead pair.
netns_gone_veth() {
	setup_nic
	run_plugin ADD "$CONF"
	expect_result "ADD"
	ip netns del "$POD_NS"
	for _ in $(seq 50); do
		has_link "$HOST_NS" peer0 || break
		sleep 0.1
	done
	! has_link "$HOST_NS" peer0 || fail "peer0 survived the pod netns (test setup)"
	gc_all
	expect_ok "GC with the pod netns gone"
	expect_no_state "after GC with the pod netns gone"
	ipam_released "GC with the pod netns gone"
	jq '.links |= map(select(.ifname != "nic0" and .ifname != "peer0"))' \
		"$T/host.before" >"$T/host.expected"
	snap_same "$HOST_NS" "$T/host.expected" "host after GC with the pod netns gone"
}
scenario "GC after the pod netns is gone (veth died)" netns_gone_veth

# --- A physical NIC outlives its pod netns: the kernel hands it back under
# its pod-side name, down, without altnames (done here as the kernel does it,
# a veth would die instead). GC finds it and restores name, MTU, altnames, up.
netns_gone_handback() {
	setup_nic
	run_plugin ADD "$CONF"
	expect_result "ADD"
	ip -n "$POD_NS" link set hpn0 netns "$HOST_NS"
	ip netns del "$POD_NS"
	has_link "$HOST_NS" hpn0 || fail "hand-back did not happen (test setup)"
	gc_all
	expect_ok "GC after the NIC came back as hpn0"
	snap_same "$HOST_NS" "$T/host.before" "host after GC of a handed-back NIC"
	expect_no_state "after GC of a handed-back NIC"
	ipam_released "GC of a handed-back NIC"
}
scenario "GC after the pod netns is gone (NIC handed back)" netns_gone_handback

# journal_from_add: the journal of a completed ADD, then DEL: the host is as
# before and the journal, as it was before the DEL, is in $T/journal.
journal_from_add() {
	run_plugin ADD "$CONF"
	expect_result "ADD"
	cp "$STATE/$NET/$CID.$IFNAME" "$T/journal"
	run_plugin DEL "$CONF"
	expect_ok "DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after ADD and DEL"
}

# --- Boot-time leftover: a journal whose netns path no longer exists and
# whose ifindexes are stale (numbering restarts at boot), with the NIC on the
# host as it was. GC removes it, runs IPAM DEL, and changes nothing on the
# host. Once as a completed attachment, once as an ADD that died midway.
boot_leftover() {
	local phase
	setup_nic
	journal_from_add
	for phase in 4 2; do
		jq -c --arg ns "${NETNS_DIR}/${HPNT_PREFIX}gone-$SCEN" --argjson ph "$phase" \
			'.netns = $ns | .phase = $ph | .host.ifindex = 99999 | .podIfIndex = 99998' \
			"$T/journal" >"$STATE/$NET/$CID.$IFNAME"
		gc_all
		expect_ok "GC of a boot-time leftover journal (phase $phase)"
		snap_same "$HOST_NS" "$T/host.before" "host after GC of a leftover (phase $phase)"
		expect_no_state "after GC of a leftover (phase $phase)"
		ipam_released "GC of a leftover (phase $phase)"
		[[ $(grep -c "^DEL $CID eth0 " "$LOG") == $((phase == 4 ? 2 : 3)) ]] ||
			fail "GC of a leftover (phase $phase) did not run IPAM DEL: $(tr '\n' '|' <"$LOG")"
	done
}
scenario "GC of a boot-time leftover journal (netns path gone)" boot_leftover

# --- The journal's netns path now names another netns (a new pod got the
# same path) holding its own hpn0 with another MAC: GC must not take it.
netns_path_reused() {
	setup_nic
	journal_from_add
	ip netns del "$POD_NS"
	ip netns add "$POD_NS"
	ip -n "$POD_NS" link add hpn0 address 02:00:00:00:ee:01 type veth peer name other0
	snap_save "$POD_NS" "$T/pod.new"
	cp "$T/journal" "$STATE/$NET/$CID.$IFNAME"
	gc_all
	expect_ok "GC with the netns path reused"
	snap_same "$POD_NS" "$T/pod.new" "the new pod after GC"
	snap_same "$HOST_NS" "$T/host.before" "host after GC with the netns path reused"
	expect_no_state "after GC with the netns path reused"
	ipam_released "GC with the netns path reused"
}
scenario "GC with the netns path reused by another pod" netns_path_reused

t_done
