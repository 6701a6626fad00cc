#!/bin/bash
# Upgrades: DEL by this binary undoes attachments journalled by earlier ones.
#
# A DaemonSet rollout replaces the binary under pods an older binary attached;
# their DEL (and GC) then runs the new binary against the old journals. Each
# fixture in test/fixtures/journals/ is one journal format the plugin has
# written: version 1 (the one moved NIC at the top level), completed and
# mid-ADD; version 2 (a NIC list) with the NCCL hints, a macvlan child, two
# NICs with an owner pid from another process; with this boot's bootId; and
# the current format with the pod's namespace, name and UID, also left in the
# earlier default stateDir (/var/lib/cni/hpn-rdma, on disk), which the first
# run adopts into today's. For each, the scenario puts the node in the state the
# older ADD left (the NIC moved into the pod and renamed, or a child created
# there; the hints file with its owner line), writes the journal, and expects
# DEL to give everything back (host exactly as before, pod empty, journal and
# hints gone, one IPAM DEL per NIC), twice, and GC to do the same.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# Private mounts, tmpfs over /run and /var/lib: the scenario of the default
# stateDir's move (an older binary's /var/lib/cni/hpn-rdma, adopted into
# /run/hpn-rdma/state) uses the plugin's real default paths, and the node's
# own stay untouched. The netns of this test live in the private /run too.
if [[ -z ${HPNT_PRIVATE_MOUNTS:-} ]]; then
	command -v unshare >/dev/null || { echo "SKIP: unshare (util-linux) is missing"; exit 77; }
	HPNT_PRIVATE_MOUNTS=1 exec unshare -m --propagation private "$BASH" "$0" "$@"
fi
mount -t tmpfs -o mode=0755,size=16m hpnt-run /run
mount -t tmpfs -o mode=0755,size=16m hpnt-var-lib /var/lib
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

FIX=$(cd "$(dirname "$0")/../fixtures/journals" && pwd)

# setup NICS: nic0 (and nic1) with peers, up, MTU 1500; the recording IPAM.
setup() {
	local i
	for ((i = 0; i < $1; i++)); do
		mk_nic "$HOST_NS" "nic$i" "peer$i"
		ip -n "$HOST_NS" link set "peer$i" up
		ip -n "$HOST_NS" link set "nic$i" up
	done
	snap_save "$HOST_NS" "$T/host.before"
	LOG=$T/ipam-$SCEN.log
	CONF=$(net_conf 1.1.0 '.device = "nic0" | .ifName = "hpn0" |
		.ipam = {type: "hpnt-ipam", log: $log, addresses: [{address: "10.86.0.5/24"}]}' \
		--arg log "$LOG")
}

# ifindex NAME: NAME's ifindex in the host netns.
ifindex() { ip -n "$HOST_NS" -j link show dev "$1" | jq -r '.[0].ifindex'; }

# old_move I: what an older ADD did to nic I: into the pod as hpnI, MTU 9000, up.
old_move() {
	ip -n "$HOST_NS" link set "nic$1" netns "$POD_NS" name "hpn$1"
	ip -n "$POD_NS" link set "hpn$1" mtu 9000 up
}

# journal FIXTURE KEY [CHILDMAC]: the fixture with this scenario's names, as
# the journal of attachment $CID/eth0. Call before the NICs move (ifindexes).
journal() {
	local key=$CID.eth0 f=$STATE/$NET/$CID.eth0 boot
	boot=$(</proc/sys/kernel/random/boot_id)
	mkdir -p "$STATE/$NET"
	sed -e "s|@CID@|$CID|g" -e "s|@NETNS@|$(ns_path "$POD_NS")|g" -e "s|@PODS@|$PODS|g" \
		-e "s|@KEY@|$2|g" -e "s|@BOOT@|$boot|g" -e "s|@CMAC@|${3:-}|g" \
		-e "s|@MAC0@|$(mac_of "$HOST_NS" nic0)|g" -e "s|@IFINDEX0@|$(ifindex nic0)|g" \
		-e "s|@MAC1@|$(mac_of "$HOST_NS" nic1 2>/dev/null || echo none)|g" \
		-e "s|@IFINDEX1@|$(ifindex nic1 2>/dev/null || echo 0)|g" "$FIX/$1" >"$T/journal"
	jq -e . "$T/journal" >/dev/null || fail "fixture $1 did not become JSON"
	cp "$T/journal" "$f"
}

# hints KEY: the hints file an older ADD wrote for this attachment.
hints() {
	mkdir -p "$PODS/$1"
	printf '# NCCL settings written by hpn-rdma for what it bound; do not edit\n# pod - uid -\n# owner container %s network %s ifname eth0\nNCCL_IB_DISABLE=1\nNCCL_IB_HCA=\nNCCL_SOCKET_IFNAME=eth0\n' \
		"$CID" "$NET" >"$PODS/$1/nccl.conf"
}

# undone CMD NICS: CMD (DEL or GC) undid everything; one IPAM DEL per NIC.
undone() {
	local cmd=$1 n=$2
	if [[ $cmd == GC ]]; then
		run_plugin GC "$(jq -c '.["cni.dev/valid-attachments"] = []' <<<"$CONF")" \
			-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	else
		run_plugin DEL "$CONF"
	fi
	expect_ok "$cmd of an older binary's attachment"
	snap_same "$HOST_NS" "$T/host.before" "host after $cmd"
	pod_empty "pod after $cmd"
	expect_no_state "after $cmd"
	[[ -z $(find "$PODS" -mindepth 1 2>/dev/null) ]] || fail "$cmd left hints: $(find "$PODS")"
	[[ $(grep -c "^DEL $CID " "$LOG") == "$n" ]] ||
		fail "$cmd ran $(grep -c "^DEL $CID " "$LOG") IPAM DELs, expected $n: $(tr '\n' '|' <"$LOG")"
	run_plugin DEL "$CONF"
	expect_ok "DEL again after $cmd"
	: >"$LOG"
}

# each FIXTURE NICS KIND [hints]: the fixture's attachment undone by DEL, then by GC.
each() {
	local fix=$1 n=$2 kind=$3 with_hints=${4:-} cmd key=hpnt-key-$SCEN cmac=02:00:00:00:5a:01 i
	setup "$n"
	for cmd in DEL GC; do
		journal "$fix" "$key" "$cmac"
		[[ -n $with_hints ]] && hints "$key"
		if [[ $kind == child ]]; then
			ip -n "$HOST_NS" link add link nic0 name hpntc type macvlan mode bridge
			ip -n "$HOST_NS" link set hpntc address "$cmac" netns "$POD_NS" name hpn0
			ip -n "$POD_NS" link set hpn0 up
		else
			for ((i = 0; i < n; i++)); do
				old_move "$i"
			done
		fi
		undone "$cmd" "$n"
	done
}

# old_default: the config names no stateDir, and an older binary kept the
# attachment's journal in the default of its time, on disk: DEL (then GC)
# adopts it into today's default, undoes it, and the old directory is gone.
old_default() {
	local cmd key=hpnt-key-$SCEN old=/var/lib/cni/hpn-rdma
	setup 1
	CONF=$(jq -c 'del(.stateDir)' <<<"$CONF")
	STATE=/run/hpn-rdma/state
	for cmd in DEL GC; do
		STATE=$old journal v2-pod.json "$key"
		echo '{"v":1}' >"$old/events.log"
		hints "$key"
		old_move 0
		[[ ! -e $STATE ]] || fail "$STATE exists before the $cmd"
		undone "$cmd" 1
		[[ ! -e $old ]] || fail "$cmd left $old: $(find "$old")"
		[[ -d $STATE/$NET ]] || fail "$cmd did not adopt into $STATE/$NET"
		rm -rf "$STATE"
	done
}

scenario "a version 1 journal of a completed ADD" each v1-attached.json 1 moved
scenario "a version 1 journal of an ADD that died after its move" each v1-moving.json 1 moved
scenario "a version 2 journal with the NCCL hints" each v2-attached.json 1 moved hints
scenario "a version 2 journal of a macvlan child" each v2-child.json 1 child
scenario "a version 2 journal of two NICs, owner pid of another process" each v2-multi.json 2 moved
scenario "a journal with this boot's bootId and the hints" each v2-boot.json 1 moved hints
scenario "the current journal (the pod's namespace, name and UID) with the hints" each v2-pod.json 1 moved hints
scenario "a journal in the earlier default stateDir, on disk, the config naming none" old_default

t_done
