#!/bin/bash
# Lifecycle beyond ADD/DEL: STATUS, GC, neighbour announcements, a physical
# NIC handed back by the kernel after its pod netns died, crash recovery from
# the journal, and the log file.
#
# Proves that STATUS answers 50 with the reason when the plugin cannot serve
# ADD; that GC returns every NIC of an attachment the runtime no longer lists
# and releases its IPAM, leaving listed ones alone; that ADD announces each
# address (gratuitous ARP, unsolicited NA) on the wire; that DEL restores a NIC
# that came back to the host under its pod-side name; that a plugin killed in
# the middle of ADD leaves a journal from which DEL, or the next ADD of the
# same attachment, restores the host; and that logFile records each run with
# timestamp, command and container ID.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

setup_nic() {
	mk_nic "$HOST_NS" nic0 peer0
	mk_nic "$HOST_NS" nic1 peer1
	ip -n "$HOST_NS" link set nic0 mtu 9000
	ip -n "$HOST_NS" link set nic0 up
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0
	snap_save "$HOST_NS" "$T/host.before"
}

# conf_fake VERSION DEVICE LOG: DEVICE as hpn0, recording IPAM with one address.
conf_fake() {
	net_conf "$1" '.device = $dev | .ifName = "hpn0" |
		.ipam = {type: "hpnt-ipam", log: $log,
			addresses: [{address: "10.90.0.5/24", gateway: "10.90.0.1"}]}' \
		--arg dev "$2" --arg log "$3"
}

# --- STATUS: ready, then code 50 naming what is missing; not before 1.1.0.
status() {
	setup_nic
	conf=$(conf_fake 1.1.0 nic0 "$T/ipam-$SCEN.log")
	run_plugin STATUS "$conf" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "STATUS"
	[[ -z $OUT ]] || fail "STATUS printed: $OUT"
	run_plugin STATUS "$(jq -c '.ipam.type = "hpnt-no-such-ipam"' <<<"$conf")" \
		-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_err 50 "STATUS without the IPAM plugin"
	jq_ok '.msg | contains("hpnt-no-such-ipam")' "STATUS names the missing plugin"
	touch "$T/not-a-dir"
	run_plugin STATUS "$(jq -c --arg s "$T/not-a-dir/state" '.stateDir = $s' <<<"$conf")" \
		-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_err 50 "STATUS with an unusable stateDir"
	run_plugin STATUS "$(jq -c '.cniVersion = "1.0.0"' <<<"$conf")" \
		-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_err 1 "STATUS with cniVersion 1.0.0"
	# A GPU model whose profile takes mlx5 only needs mlx5_ib loaded.
	if [[ -e /sys/module/mlx5_ib ]]; then
		info "mlx5_ib is loaded here: the missing-module case is checked on the fake tree only"
	else
		run_plugin STATUS "$(jq -c '.nccl.gpuModel = "GU8TF"' <<<"$conf")" \
			-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
		expect_err 50 "STATUS for GU8TF without mlx5_ib" 'GU8TF.*mlx5_ib.*not loaded'
	fi
	mkdir -p "$T/sys/module/rdma_rxe"
	run_plugin STATUS "$(jq -c --arg r "$T/sys" '.nccl.gpuModel = "GU8TF" | .sysfsRoot = $r' \
		<<<"$conf")" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_err 50 "STATUS for GU8TF with only rdma_rxe" 'mlx5_ib'
	mkdir -p "$T/sys/module/mlx5_ib"
	run_plugin STATUS "$(jq -c --arg r "$T/sys" '.nccl.gpuModel = "GU8TF" | .sysfsRoot = $r' \
		<<<"$conf")" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "STATUS for GU8TF with mlx5_ib"
	run_plugin STATUS "$(jq -c '.nccl.gpuModel = "P16EN"' <<<"$conf")" \
		-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "STATUS for P16EN (any driver)"
	snap_same "$HOST_NS" "$T/host.before" "host after STATUS"
}
scenario "STATUS" status

# --- GC: attachment B is not listed, A is. B's NIC goes home, IPAM DEL runs
# for B's container and interface, B's journal goes; A is untouched.
gc() {
	setup_nic
	log=$T/ipam-$SCEN.log
	cid_a=$CID-a cid_b=$CID-b
	pod_b=${HPNT_PREFIX}q$SCEN
	ip netns add "$pod_b"
	conf_a=$(conf_fake 1.1.0 nic0 "$log")
	conf_b=$(conf_fake 1.1.0 nic1 "$log")
	run_plugin ADD "$conf_a" CNI_CONTAINERID="$cid_a"
	expect_result "ADD A"
	res_a=$OUT
	run_plugin ADD "$conf_b" CNI_CONTAINERID="$cid_b" CNI_NETNS="$(ns_path "$pod_b")"
	expect_result "ADD B"
	[[ $(state_count) == 2 ]] || fail "expected 2 journals, have $(state_count)"
	gc_conf=$(jq -c --arg a "$cid_a" \
		'.["cni.dev/valid-attachments"] = [{containerID: $a, ifname: "eth0"}]' \
		<<<"$conf_a")
	run_plugin GC "$gc_conf" -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "GC"
	has_link "$HOST_NS" nic1 || fail "GC did not return nic1 to the host"
	has_link "$pod_b" hpn0 && fail "hpn0 is still in pod B after GC"
	has_link "$POD_NS" hpn0 || fail "GC took hpn0 from pod A, which is listed"
	grep -qx "DEL $cid_b eth0 1.1.0" "$log" || fail "GC did not IPAM DEL B: $(cat "$log")"
	grep -q "DEL $cid_a" "$log" && fail "GC released A's IPAM: $(cat "$log")"
	[[ $(state_count) == 1 ]] || fail "expected A's journal only, have: $(state_files)"
	run_plugin CHECK "$(with_prev "$conf_a" "$res_a")" CNI_CONTAINERID="$cid_a"
	expect_ok "CHECK A after GC"
	run_plugin GC "$(jq -c '.["cni.dev/valid-attachments"] = []' <<<"$conf_a")" \
		-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "GC of everything"
	expect_no_state "after GC of everything"
	snap_same "$HOST_NS" "$T/host.before" "host after GC"
	ip netns del "$pod_b"
}
scenario "GC" gc

# --- ADD announces its addresses: a gratuitous ARP (the kernel's, at link up)
# and an unsolicited NA (override flag, target = our address) reach the other
# end of the wire.
announce() {
	command -v tcpdump >/dev/null || fail "tcpdump is not installed (scripts/install-deps.sh)"
	setup_nic
	ip -n "$HOST_NS" link set peer0 up
	conf=$(net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0" |
		.ipam = {type: "static", addresses: [{address: "10.91.0.7/24"},
			{address: "fd00:91::7/64"}]}')
	ip netns exec "$HOST_NS" timeout 10 tcpdump -l -nn -vv -i peer0 -c 2 \
		'arp or (icmp6 and ip6[40] == 136)' >"$T/cap" 2>"$T/cap.err" &
	cap=$!
	# tcpdump says "listening on" once its filter is in place.
	for _ in $(seq 100); do grep -q listening "$T/cap.err" && break; sleep 0.05; done
	run_plugin ADD "$conf"
	expect_result "ADD"
	wait "$cap" || fail "capture ended without 2 packets: $(cat "$T/cap" "$T/cap.err")"
	grep -q 'Request who-has 10.91.0.7 tell 10.91.0.7' "$T/cap" ||
		fail "no gratuitous ARP for 10.91.0.7: $(cat "$T/cap")"
	grep -q 'neighbor advertisement.*tgt is fd00:91::7, Flags \[override\]' "$T/cap" ||
		fail "no unsolicited NA for fd00:91::7: $(cat "$T/cap")"
	grep -q 'icmp6 sum ok' "$T/cap" || fail "NA checksum: $(cat "$T/cap")"
	# The ARP is the kernel's (arp_notify, set before the link came up with
	# its address); the setting stays in the pod: back on the host, nic0 has
	# the host's default again.
	[[ $(ip netns exec "$POD_NS" sysctl -n net.ipv4.conf.hpn0.arp_notify) == 1 ]] ||
		fail "arp_notify is not set on hpn0"
	run_plugin DEL "$(with_prev "$conf" "$OUT")"
	expect_ok "DEL"
	[[ $(ip netns exec "$HOST_NS" sysctl -n net.ipv4.conf.nic0.arp_notify) == 0 ]] ||
		fail "arp_notify came back to the host with nic0"
	ip -n "$HOST_NS" link set peer0 down
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
}
scenario "gratuitous ARP and unsolicited NA" announce

# --- A physical NIC outlives its pod netns: the kernel hands it back to the
# host under its pod-side name, down, without its altnames. (A veth would die
# instead, so the hand-back is done here as the kernel does it.) DEL finds it
# by ifindex and MAC and restores name, MTU, altnames and admin state.
refund() {
	setup_nic
	log=$T/ipam-$SCEN.log
	conf=$(conf_fake 1.0.0 nic0 "$log")
	run_plugin ADD "$(jq -c '.mtu = 4000' <<<"$conf")"
	expect_result "ADD"
	ip -n "$POD_NS" link set hpn0 netns "$HOST_NS"
	ip netns del "$POD_NS"
	has_link "$HOST_NS" hpn0 || fail "hand-back did not happen"
	run_plugin DEL "$conf"
	expect_ok "DEL after the pod netns died"
	grep -q "^DEL $CID eth0" "$log" || fail "DEL did not release IPAM"
	snap_same "$HOST_NS" "$T/host.before" "host after DEL"
	expect_no_state "after DEL"
}
scenario "NIC handed back under its pod name" refund

# crash_at N CONF: run ADD, killed with SIGKILL at its N-th netlink send
# (RC stays 0 when ADD has fewer sends than N).
crash_at() {
	RUN_WRAP=(strace -qq -o "$T/strace.out" -e trace=sendmsg
		-e inject=sendmsg:signal=KILL:when="$1")
	run_plugin ADD "$2"
	RUN_WRAP=()
}

# --- kill -9 inside ADD at every netlink send in turn (lookups, dropping
# altnames, the move, MTU and up, addresses, routes): DEL restores the host
# from the journal and releases IPAM.
crash_then_del() {
	setup_nic
	log=$T/ipam-$SCEN.log
	conf=$(conf_fake 1.0.0 nic0 "$log" | jq -c '.mtu = 4000')
	for n in $(seq 1 30); do
		crash_at "$n" "$conf"
		((RC != 0)) || break
		run_plugin DEL "$conf"
		expect_ok "DEL after a kill at send $n"
		ipam_log_balanced "$log" "IPAM after a kill at send $n and DEL"
		snap_same "$HOST_NS" "$T/host.before" "host after a kill at send $n and DEL"
		pod_empty "pod after a kill at send $n and DEL"
		expect_no_state "after a kill at send $n and DEL"
	done
	((n > 5)) || fail "ADD survived a kill at send $n: too few sends to matter"
	((RC == 0)) || fail "ADD never got through"
	info "killed ADD at each of $((n - 1)) netlink sends"
	run_plugin DEL "$conf"
	expect_ok "DEL after the last ADD"
	snap_same "$HOST_NS" "$T/host.before" "host after the sweep"
}
scenario "kill -9 inside ADD, then DEL" crash_then_del

# --- kill -9 after the move, then the runtime retries ADD for the same
# attachment: ADD undoes the leftover first and succeeds; DEL cleans up.
crash_then_add() {
	setup_nic
	conf=$(net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0"')
	crash_at 5 "$conf"
	((RC != 0)) || fail "ADD survived SIGKILL at send 5"
	has_link "$POD_NS" hpn0 || fail "kill at send 5 came before the move; adjust the test"
	run_plugin ADD "$conf"
	expect_result "ADD after a killed ADD"
	grep -q "undoing it first" "$T/plugin.log" || fail "ADD did not report the recovery"
	run_plugin DEL "$(with_prev "$conf" "$OUT")"
	expect_ok "DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after recovery and DEL"
	expect_no_state "after recovery and DEL"
}
scenario "kill -9 inside ADD, then ADD again" crash_then_add

# --- The kernel refuses the move (lo is netns-local): code 102 with the
# kernel's extended ACK text, and the rollback must not mistake the pod's own
# lo (same all-zero MAC) for the device: no journal left, nothing changed.
kernel_refusal() {
	setup_nic
	conf=$(net_conf 1.1.0 '.device = "lo" | .ifName = "hpn0"')
	run_plugin ADD "$conf"
	expect_err 102 "ADD of lo"
	jq_ok '.msg | contains("\"lo\"")' "the error names the device"
	jq_ok '.details | startswith("kernel: ")' "the error carries the kernel's reason"
	expect_no_state "after the refused move"
	pod_empty "pod after the refused move"
	run_plugin ADD "$(jq -c '.device = "nic0"' <<<"$conf")"
	expect_result "a following ADD of nic0"
	run_plugin DEL "$conf"
	expect_ok "DEL"
	snap_same "$HOST_NS" "$T/host.before" "host after the refusal scenario"
}
scenario "kernel refuses the move" kernel_refusal

# --- logFile: one line per event with ISO timestamp, pid, command, container.
logfile() {
	setup_nic
	conf=$(net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0" | .logLevel = "debug"')
	run_plugin ADD "$conf"
	expect_result "ADD"
	run_plugin DEL "$conf"
	expect_ok "DEL"
	run_plugin ADD "$(jq -c '.device = "nic9"' <<<"$conf")"
	expect_err 100 "ADD of a missing device"
	re='^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]{15}Z hpn-rdma\[[0-9]+\] '
	grep -Eq "${re}ADD $CID info: attach \"nic0\" as \"hpn0\"" "$T/plugin.log" ||
		fail "no ADD line: $(cat "$T/plugin.log")"
	grep -Eq "${re}DEL $CID info: DEL done" "$T/plugin.log" ||
		fail "no DEL line: $(cat "$T/plugin.log")"
	grep -Eq "${re}ADD $CID error: device \"nic9\" not found" "$T/plugin.log" ||
		fail "no error line: $(cat "$T/plugin.log")"
	grep -Eq "${re}ADD $CID debug: " "$T/plugin.log" ||
		fail "logLevel debug wrote no debug line: $(cat "$T/plugin.log")"
	snap_same "$HOST_NS" "$T/host.before" "host after the log scenario"
}
scenario "logFile" logfile

t_done
