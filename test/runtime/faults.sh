#!/usr/bin/env bash
# shellcheck disable=SC2016 # jq programs are single-quoted on purpose
# runtime tier: what a node lives through. Pods started at once beyond the
# pool; containerd killed with SIGKILL while pods run, then restarted; a pod
# netns removed behind containerd's back. Each scenario ends with the node
# exactly as before. See lib.sh.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

OPT_IN='{"alibabacloud.com/hpn-type": "rdma"}'

# hpn0_mac ID: the MAC of hpn0 in the sandbox's netns (empty when absent).
hpn0_mac() {
	rtn_in nsenter --net="$(pod_netns "$1")" ip -j link show hpn0 2>/dev/null |
		jq -r '.[0].address' || true
}

# 2 x POOL pods, RunPodSandbox all at once (as kubelet's pod workers do):
# exactly POOL start, each on its own NIC; the others fail with hpn-rdma's
# message and leave nothing; then all go, at once too, and the pool is whole.
pods_at_once() {
	local n=$((2 * POOL)) k ok=() macs st msg id
	for ((k = 0; k < n; k++)); do
		rt_pod "many$k" "$OPT_IN"
	done
	for ((k = 0; k < n; k++)); do
		(
			set +e
			cri runp "$T/pods/many$k.json" >"$T/many$k.out" 2>"$T/many$k.err"
			echo $? >"$T/many$k.rc"
		) &
	done
	wait
	for ((k = 0; k < n; k++)); do
		if [[ $(<"$T/many$k.rc") == 0 ]]; then
			ok+=("$(<"$T/many$k.out")")
			continue
		fi
		# The refused pod's own ADD: its message is what RunPodSandbox said.
		id=$(grep -o 'sandbox "[0-9a-f]*"' "$T/many$k.err" | head -n1 | tr -d '"' | cut -d' ' -f2)
		msg=$(rt_calls "$id" | jq -r '[.[] | select(.cmd == "ADD")][0].out.msg // empty')
		[[ -n $msg && $(<"$T/many$k.err") == *"$msg"* ]] ||
			fail "pod many$k failed, but not with hpn-rdma's message: $(<"$T/many$k.err")"
		info "many$k refused: $msg"
	done
	((${#ok[@]} == POOL)) || fail "${#ok[@]} of $n pods started on a pool of $POOL"
	macs=$(for id in "${ok[@]}"; do hpn0_mac "$id"; done | sort)
	[[ $macs == "$(printf '%s\n' "${NIC_MACS[@]}" | sort)" ]] ||
		fail "the $POOL pods do not hold the $POOL NICs, one each: $(tr '\n' ' ' <<<"$macs")"
	st=$(rt_node_state)
	jq_ok '(.sandboxes | length) == $n and (.netns_mounts | length) == $n and
		(.leases | length) == 2 * $n and (.journals | length) == $n' \
		"the refused pods left nothing" "$st" --argjson n "$POOL"
	for id in "${ok[@]}"; do
		cri stopp "$id" &
	done
	wait
	for id in "${ok[@]}"; do
		cri rmp "$id" &
	done
	wait
}

# containerd killed with SIGKILL between RunPodSandbox and StopPodSandbox:
# the pod (its shim, pause and container) lives on with hpn0; containerd
# restarts, finds it, and Stop then Remove clean up as usual, the DEL of Stop
# still carrying the netns and the prevResult it cached before the kill.
containerd_killed() {
	local id ctr mac pid del
	rt_pod survivor "$OPT_IN"
	id=$(runp survivor)
	ctr=$(rt_container "$id" survivor)
	mac=$(hpn0_mac "$id")
	pid=$(pod_pid "$id")
	rtn_containerd_stop KILL
	kill -0 "$pid" || fail "the sandbox died with containerd"
	[[ $(nsenter --net="/proc/$pid/ns/net" ip -j link show hpn0 | jq -r '.[0].address') == "$mac" ]] ||
		fail "hpn0 is gone from the pod after containerd's death"
	rtn_containerd_start
	rtn_wait_network "$NET"
	jq_ok '[.items[] | select(.id == $id and .state == "SANDBOX_READY")] | length == 1' \
		"the restarted containerd knows the pod, ready" "$(cri pods)" --arg id "$id"
	in_ctr "$ctr" ip -j link show hpn0 | jq -e --arg m "$mac" '.[0].address == $m' >/dev/null ||
		fail "the container does not see hpn0 after the restart"
	cri stop "$ctr" || fail "StopContainer after the restart failed"
	cri stopp "$id" || fail "StopPodSandbox after the restart failed"
	del=$(rt_calls "$id" | jq -c '[.[] | select(.cmd == "DEL")]')
	jq_ok 'length == 1 and (.[0] | .rc == 0 and .netns != "" and
		(.conf.prevResult.interfaces | map(.name) | index("hpn0")))' \
		"Stop after the restart: DEL with the netns and the cached prevResult" "$del"
	cri rmp "$id" || fail "RemovePodSandbox after the restart failed"
}

# The pod's netns mount removed behind containerd's back (as `ip netns del`
# would): the pause process still holds the netns, hpn0 in it. Stop kills the
# sandbox, the netns dies, and with it the veth standing in for the NIC (a
# physical NIC would return to the host); containerd finds the netns closed
# and runs DEL with CNI_NETNS empty, which must succeed and drop the journal,
# the hints and the lease. The stand-in is then made again as it was.
netns_removed() {
	local id ns pid mac k del
	rt_pod orphan "$OPT_IN"
	id=$(runp orphan)
	ns=$(pod_netns "$id")
	pid=$(pod_pid "$id")
	mac=$(hpn0_mac "$id")
	rtn_in umount "$ns" || fail "cannot unmount the pod's netns $ns"
	rtn_in rm -f "$ns"
	[[ $(nsenter --net="/proc/$pid/ns/net" ip -j link show hpn0 | jq -r '.[0].address') == "$mac" ]] ||
		fail "hpn0 left the pod when its netns mount went"
	cri stopp "$id" || fail "StopPodSandbox of a pod whose netns is gone failed"
	del=$(rt_calls "$id" | jq -c '[.[] | select(.cmd == "DEL")]')
	jq_ok 'length == 1 and (.[0] | .rc == 0 and .netns == "")' \
		"Stop: DEL with CNI_NETNS empty (the netns is gone) succeeds" "$del"
	[[ -z $(find "$STATE" -type f ! -name lock ! -name 'events.log*') ]] ||
		fail "the journal is left"
	[[ -z $(find "$HINTS" -mindepth 1) ]] || fail "the hints are left"
	cri rmp "$id" || fail "RemovePodSandbox failed"
	for ((k = 0; k < POOL; k++)); do
		[[ ${NIC_MACS[k]} == "$mac" ]] || continue
		! ip -n "$RTN_NS" link show "rnic$k" >/dev/null 2>&1 ||
			fail "rnic$k is on the node; a veth should have died with the pod's netns"
		restore_nic "$k"
	done
}

rt_init
scenario "$((2 * POOL)) pods at once on a pool of $POOL" pods_at_once
scenario "containerd killed (SIGKILL) while a pod runs, then restarted" containerd_killed
scenario "a pod's netns removed behind containerd's back" netns_removed
rt_done
