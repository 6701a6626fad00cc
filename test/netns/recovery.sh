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

# earlier_boot FILE: FILE as a journal written in another boot (its bootId).
earlier_boot() {
	jq -c '.bootId = "00000000-1111-2222-3333-444444444444"' "$1" >"$1.new"
	mv "$1.new" "$1"
}

# before_boot FILE: FILE's mtime before this boot began.
before_boot() {
	touch -d "@$(($(awk '$1 == "btime" { print $2 }' /proc/stat) - 60))" "$1"
}

# --- A journal of an earlier boot: the reboot gave its NICs back and ended its
# netns, so DEL and GC move nothing (hpn0 is left where it is here, to prove
# it), release its IPAM lease and remove it. Its owner pid, alive now, is
# another process: GC does not wait for it.
earlier_boot_journal() {
	local cmd
	setup_nic
	for cmd in DEL GC; do
		run_plugin ADD "$CONF"
		expect_result "ADD (then a reboot is pretended, $cmd)"
		earlier_boot "$STATE/$NET/$CID.$IFNAME"
		if [[ $cmd == GC ]]; then
			jq -c --argjson pid $$ '.phase = 2 | .ownerPid = $pid | .ownerStart = 0' \
				"$STATE/$NET/$CID.$IFNAME" >"$T/j" && mv "$T/j" "$STATE/$NET/$CID.$IFNAME"
			gc_all
		else
			run_plugin DEL "$CONF"
		fi
		expect_ok "$cmd of a journal of an earlier boot"
		expect_no_state "after $cmd of a journal of an earlier boot"
		ipam_released "$cmd of a journal of an earlier boot"
		has_link "$POD_NS" hpn0 || fail "$cmd moved hpn0, from a journal of an earlier boot"
		ip -n "$POD_NS" link set hpn0 netns "$HOST_NS"
		ip -n "$HOST_NS" link set hpn0 down
		ip -n "$HOST_NS" link set hpn0 name nic0 mtu 1400
		ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0
		ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0-second
		ip -n "$HOST_NS" link set nic0 up
		snap_same "$HOST_NS" "$T/host.before" "host once the test put nic0 back ($cmd)"
	done
}
scenario "DEL and GC of a journal of an earlier boot move nothing" earlier_boot_journal

# --- A journal a power loss left unparsable: from before this boot it is
# removed (DEL also releases the lease of its container and interface); from
# this boot it is corrupt, kept, and reported (code 5).
unreadable_journal() {
	setup_nic
	mkdir -p "$STATE/$NET"
	printf '{"version":2,"pha' >"$STATE/$NET/$CID.$IFNAME"
	run_plugin DEL "$CONF"
	expect_err 5 "DEL of an unparsable journal of this boot" 'corrupt'
	[[ -f $STATE/$NET/$CID.$IFNAME ]] || fail "DEL removed a corrupt journal of this boot"
	before_boot "$STATE/$NET/$CID.$IFNAME"
	run_plugin DEL "$CONF"
	expect_ok "DEL of an unparsable journal of an earlier boot"
	expect_no_state "after DEL of an unparsable journal of an earlier boot"
	grep -q "^DEL $CID eth0 " "$LOG" || fail "DEL did not release the lease: $(tr '\n' '|' <"$LOG")"
	: >"$STATE/$NET/$CID.$IFNAME"
	before_boot "$STATE/$NET/$CID.$IFNAME"
	gc_all
	expect_ok "GC of an empty journal of an earlier boot"
	expect_no_state "after GC of an empty journal of an earlier boot"
	# And an ADD finds its way past one.
	printf 'garbage' >"$STATE/$NET/$CID.$IFNAME"
	before_boot "$STATE/$NET/$CID.$IFNAME"
	run_plugin ADD "$CONF"
	expect_result "ADD past an unparsable journal of an earlier boot"
	run_plugin DEL "$CONF"
	expect_ok "DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after the unreadable journals"
}
scenario "journals a power loss left unparsable" unreadable_journal

# --- A pool NIC held by a journal of an earlier boot is free: the reboot gave
# it back (done here by the test, as the kernel does at boot).
earlier_boot_pool() {
	local conf cid2=${CID}-b pod2=${HPNT_PREFIX}p${SCEN}b
	setup_nic
	conf=$(jq -c 'del(.device) | .match = {devices: ["nic0"]}' <<<"$CONF")
	run_plugin ADD "$conf"
	expect_result "ADD from a pool of one"
	ip netns add "$pod2"
	run_plugin ADD "$conf" CNI_CONTAINERID="$cid2" CNI_NETNS="$(ns_path "$pod2")"
	expect_err 100 "ADD with the pool's one NIC held" 'used up'
	earlier_boot "$STATE/$NET/$CID.$IFNAME"
	ip -n "$POD_NS" link set hpn0 netns "$HOST_NS"
	ip -n "$HOST_NS" link set hpn0 name nic0
	run_plugin ADD "$conf" CNI_CONTAINERID="$cid2" CNI_NETNS="$(ns_path "$pod2")"
	expect_result "ADD once the journal holding the NIC is of an earlier boot"
	run_plugin DEL "$conf" CNI_CONTAINERID="$cid2" CNI_NETNS="$(ns_path "$pod2")"
	expect_ok "DEL of the second pod"
	run_plugin DEL "$conf"
	expect_ok "DEL of the earlier boot's attachment"
	has_link "$HOST_NS" nic0 || fail "nic0 is not on the host"
	expect_no_state "after both DELs"
	ip netns del "$pod2"
}
scenario "a pool NIC held by a journal of an earlier boot is free" earlier_boot_pool

t_done
