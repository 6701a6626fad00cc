# shellcheck shell=bash
# The plugin on the current kernel: helpers of vm7-hpn-shared.sh and
# vm7-hpn-exclusive.sh, sourced after lib.sh and floor.sh. Pods are named
# netns; each pod's attachment is CNI_CONTAINERID cid-<pod>, CNI_IFNAME eth0,
# its config and result kept here (CONFS, RES) for CHECK and DEL.
# shellcheck disable=SC2016 # jq filters are single-quoted on purpose

HPN7_NET=hpnv7	# the network name: a directory of the state and part of each rxe name
declare -A CONFS=() RES=()

# hconf SELECTOR ADDR [FILTER]: a softRoce config: the device of SELECTOR (a
# JSON object such as {"pciBusID": "0000:00:04.0"}) as hpn0, static ADDR, a
# state dir, log and hints dir under $T, agent.cdiDir $T/cdi (which no one
# makes: no CDI spec unless a scenario makes it); then FILTER.
hconf() {
	jq -cn --argjson sel "$1" --arg a "$2" --arg t "$T" --arg n "$HPN7_NET" '{cniVersion: "1.0.0",
		name: $n, type: "hpn-rdma", ifName: "hpn0", softRoce: true, logLevel: "debug",
		stateDir: ($t + "/state"), logFile: ($t + "/plugin.log"), nccl: {dir: ($t + "/pods")},
		agent: {lookup: false, deviceDir: ($t + "/devdir"), cdiDir: ($t + "/cdi")},
		ipam: {type: "static", addresses: [{address: $a}]}} + $sel | '"${3:-.}"
}

# in_pod POD: the CNI environment for POD's attachment (NETNS, CID).
in_pod() {
	NETNS=/run/netns/$1
	CID=cid-$1
}

# hpn_add POD CONF [ENV...]: ADD of POD's attachment, which must succeed;
# RES[POD] is its result.
hpn_add() {
	local pod=$1 conf=$2
	shift 2
	in_pod "$pod"
	run_plugin ADD "$conf" "$@"
	expect_result "ADD $pod"
	RES[$pod]=$OUT
	CONFS[$pod]=$conf
}

# hpn_run CMD POD [ENV...]: CMD (CHECK, DEL) for POD's attachment, with its
# result as prevResult; RC, OUT as run_plugin.
hpn_run() {
	local cmd=$1 pod=$2
	shift 2
	in_pod "$pod"
	run_plugin "$cmd" "$(jq -c --argjson r "${RES[$pod]:-null}" '.prevResult = $r' <<<"${CONFS[$pod]}")" "$@"
}

# hpn_del POD: DEL of POD's attachment, which must succeed, and again.
hpn_del() {
	hpn_run DEL "$1"
	expect_ok "DEL $1"
	hpn_run DEL "$1"
	expect_ok "second DEL $1"
}

# hints POD: what POD's hints file (named by its result) says: HCA (the
# "device:port" entries of NCCL_IB_HCA, without its "="), GID
# (NCCL_IB_GID_INDEX); fails unless the file says NCCL_IB_DISABLE=0.
HCA=()
GID=
hints() {
	local f line ib=
	f=$(jq -r '.nccl.file' <<<"${RES[$1]}")
	[[ -f $f ]] || fail "$1: no hints file ($f)"
	HCA=() GID=
	while IFS= read -r line; do
		case $line in
		NCCL_IB_HCA==*) IFS=, read -r -a HCA <<<"${line#NCCL_IB_HCA==}" ;;
		NCCL_IB_GID_INDEX=*) GID=${line#*=} ;;
		NCCL_IB_DISABLE=*) ib=${line#*=} ;;
		esac
	done <"$f"
	[[ $ib == 0 && ${#HCA[@]} -gt 0 && -n $GID ]] ||
		fail "$1: the hints file does not enable IB with HCA and GID index: $(<"$f")"
}

# soft_named POD I: NIC I of POD's result is bound to a device hpn-rdma made
# (rxe_ and 12 hex digits, driver rxe, port 1) which its hints name exactly,
# with the result's GID index; DEV is its name.
DEV=
soft_named() {
	local pod=$1 i=$2
	hints "$pod"
	DEV=$(jq -r --argjson i "$i" '.rdma[] | select(.interface == $i) | .device' <<<"${RES[$pod]}")
	[[ $DEV =~ ^rxe_[0-9a-f]{12}$ ]] || fail "$pod NIC $i: bound to '$DEV', not an rxe_<hash> device"
	jq_ok '.rdma[] | select(.interface == $i) | .bound and .driver == "rxe" and .port == 1 and
		.transport == "roce" and (.gidIndex | tostring) == $g' "$pod NIC $i rdma entry" "${RES[$pod]}" \
		--argjson i "$i" --arg g "$GID"
	[[ ${HCA[i]} == "$DEV:1" ]] || fail "$pod: hints name ${HCA[*]}, NIC $i is bound to $DEV"
}

# udp4791 POD: POD has a UDP socket on RoCE v2's port 4791 (0x12B7): an rxe's.
udp4791() {
	[[ $(ip netns exec "$1" cat /proc/net/udp) =~ :12B7\ 00000000:0000\ 07 ]]
}

# plugin_log_has TEXT: the plugin's log holds TEXT.
plugin_log_has() {
	grep -qF -- "$1" "$T/plugin.log" || fail "the plugin's log lacks '$1': $(tail -n 20 "$T/plugin.log")"
}

# rose_dir BEFORE AFTER DEV/PORT COUNTER MIN: COUNTER grew by MIN or more.
rose_dir() {
	local d
	d=$(delta "$1" "$2" "$3" "$4")
	((d >= $5)) || fail "$3 $4 grew by $d, expected at least $5"
	echo "  # $3 $4 +$d"
}

# nodes_made POD ID: ADD made the uverbs node of POD's device (DEV) in the
# device directory of NIC ID (the agent's Allocate makes it; here the
# scenario did), with the numbers the pod's own sysfs gives it.
nodes_made() {
	local want got
	# shellcheck disable=SC2016 # the inner shell's
	want=$(ip netns exec "$1" bash -c 'for d in /sys/class/infiniband_verbs/uverbs*; do
		read -r ib <"$d/ibdev" && [[ $ib == "$0" ]] && echo "${d##*/} $(<"$d/dev")"; done; exit 0' "$DEV")
	[[ $want =~ ^(uverbs[0-9]+)\ ([0-9]+):([0-9]+)$ ]] ||
		fail "$1: no verbs device of $DEV in its sysfs: '$want'"
	got=$(stat -c '%F %t:%T' "$T/devdir/$2/${BASH_REMATCH[1]}") ||
		fail "ADD made no ${BASH_REMATCH[1]} for $DEV in $T/devdir/$2"
	[[ $got == "$(printf 'character special file %x:%x' "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}")" ]] ||
		fail "$T/devdir/$2/${BASH_REMATCH[1]} is $got, not $want"
	echo "  # $1: ${BASH_REMATCH[1]} of $DEV (${BASH_REMATCH[2]}:${BASH_REMATCH[3]}) in the device directory of $2"
}

# no_nodes ID: the device directory of NIC ID holds no node.
no_nodes() {
	[[ -z $(compgen -G "$T/devdir/$1/*") ]] || fail "device nodes left: $(ls -l "$T/devdir/$1")"
}

# no_state: the state dir holds no journal.
no_state() {
	[[ -z $(compgen -G "$T/state/$HPN7_NET/*") ]] || fail "journals left: $(ls "$T/state/$HPN7_NET")"
}
