# shellcheck shell=bash
# What every section of scripts/bench.sh (which sources this file) stands on:
# the throwaway node and pod namespaces and their cleanup, the jobs the runner
# starts (one plugin or ip run each, prepared as files), the network config of
# every row, the iproute2 floor, the runner itself, and the checks that a row
# does what it claims and leaves nothing behind.

skip() {
	echo "SKIP: $*"
	exit 77
}

# bench_prereqs: root, the tools and plugins every row needs; skips or fails,
# saying why.
bench_prereqs() {
	local t p
	[[ $(id -u) == 0 ]] || skip "needs root (network namespaces)"
	for t in ip jq awk; do
		command -v $t >/dev/null || skip "$t is not installed"
	done
	for p in host-device macvlan static; do
		[[ -x $CNI_BIN/$p ]] || skip "$CNI_BIN/$p is missing (Debian: containernetworking-plugins)"
	done
	[[ -x $PLUGIN ]] || {
		echo "bench.sh: plugin $PLUGIN is missing (build it, or set HPN_PLUGIN)" >&2
		exit 2
	}
	[[ -x $RUNNER ]] || {
		echo "bench.sh: runner $RUNNER is missing (cmake --build build, or set HPN_BENCH_RUN)" >&2
		exit 2
	}
	IP=$(command -v ip)
}

# ---- throwaway namespaces, cleaned up whatever happens -------------------------

cleanup() {
	local ns
	set +e
	for p in ${AGENT_PIDS:-}; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	# The runtime rows' node first: its processes are found through its netns.
	declare -F rtn_cleanup >/dev/null && rtn_cleanup
	declare -F kube_stop >/dev/null && kube_stop
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		[[ $ns == "$PFX"* ]] && ip netns del "$ns"
	done
	[[ -n $W && -d $W ]] && rm -rf "$W"
	[[ -n ${HINTS:-} && -d $HINTS ]] && rm -rf "$HINTS"
	[[ -n ${STATE:-} && -d $STATE ]] && rm -rf "$STATE"
	[[ -n ${DRA_STATE:-} && -d $DRA_STATE ]] && rm -rf "$DRA_STATE"
	[[ -n ${JOBS:-} && -d $JOBS ]] && rm -rf "$JOBS"
}

# The NICs of the 8-NIC pod rows (move8.*, serial.sh): nic0..nic7 into pod 0.
POD8=8

# bench_netns: the node netns (nic<k> veths for pods 0..MAXPAR-1, and at least
# POD8 of them when a move8 row is selected; the shared mode's master mst0),
# the pod netns, the scratch dirs; cleanup on exit. Needs ROWS (select_rows).
bench_netns() {
	local k batch row nics=$MAXPAR
	for row in "${ROWS[@]}"; do
		[[ $row == move8.* ]] && ((nics < POD8)) && nics=$POD8
	done
	PFX="hpnb-$$-"
	NODE=${PFX}node
	W=
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	W=$(mktemp -d /tmp/hpnb.XXXXXX)
	# The journals and the NCCL hints live where a node keeps them by default,
	# /run/hpn-rdma/state and /run/hpn-rdma/pods: on tmpfs. /dev/shm stands in
	# for /run when /run is not a tmpfs here.
	RUNTMP=/dev/shm
	[[ $(stat -f -c %T /run) == tmpfs ]] && RUNTMP=/run
	STATE=${BENCH_STATE_DIR:-$RUNTMP}/hpnb-state-$$
	HINTS=${BENCH_HINTS_DIR:-$RUNTMP}/hpnb-hints-$$
	# The runner's job files too: each start truncates and rewrites a job's
	# stdout and stderr files, which stand in for the pipes a runtime reads
	# (libcni); on ext4 that costs the writer a block writeback at close, which
	# the plugin would pay and /bin/true, writing nothing, would not.
	JOBS=$RUNTMP/hpnb-jobs-$$
	mkdir -p "$STATE" "$HINTS" "$JOBS"

	ip netns add "$NODE" 2>/dev/null || skip "cannot create network namespaces here"
	ip -n "$NODE" link set lo up
	# nic<k>: stand-in NIC k (down, like an unused NIC); its peer is up.
	# mst0: the shared-mode master (up, as a node's NIC in use is).
	batch=$W/setup.batch
	: >"$batch"
	for ((k = 0; k < MAXPAR; k++)); do
		ip netns add "$(pod $k)"
	done
	for ((k = 0; k < nics; k++)); do
		echo "link add nic$k type veth peer name peer$k" >>"$batch"
		echo "link set peer$k up" >>"$batch"
	done
	{
		echo "link add mst0 type veth peer name mstp0"
		echo "link set mst0 up"
		echo "link set mstp0 up"
	} >>"$batch"
	ip -n "$NODE" -batch "$batch"
}

pod() { echo "${PFX}p$1"; }

# ---- jobs: one plugin or ip run each, prepared as files for the runner --------

# job DIR ARGV...: a job with no stdin and no environment (ip).
job() {
	local d=$1
	shift
	mkdir -p "$d"
	printf '%s\n' "$@" >"$d/argv"
	: >"$d/env"
	: >"$d/stdin"
}

# cni_job DIR COMMAND K CONFIG BINARY [CNI_ARGS]: a CNI plugin run for pod K.
cni_job() {
	local d=$1 cmd=$2 k=$3 conf=$4 bin=$5
	mkdir -p "$d"
	echo "$bin" >"$d/argv"
	printf '%s\n' "CNI_COMMAND=$cmd" "CNI_CONTAINERID=bench-$k" \
		"CNI_NETNS=/run/netns/$(pod "$k")" CNI_IFNAME=hpn0 "CNI_PATH=$CNI_BIN" \
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin" ${6:+"CNI_ARGS=$6"} >"$d/env"
	# The agent rows' pods are Kubernetes pods: the plugin asks the agent about them.
	[[ -z ${6:-} && $bin == "$PLUGIN" && $conf == *'"agent":'* ]] &&
		echo "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=bench-$k" >>"$d/env"
	echo "$conf" >"$d/stdin"
}

# ipam_of VARIANT K: the ipam object ("null" for none). Pod k gets 10.88.k.2/24.
ipam_of() {
	[[ $1 == static ]] || {
		echo null
		return
	}
	jq -cn --arg a "10.88.$2.2/24" --arg g "10.88.$2.1" \
		'{type: "static", addresses: [{address: $a, gateway: $g}],
		  routes: [{dst: "10.99.0.0/16"}]}'
}

# The device pod K gets. Pools (config "match", issue 5) replace this line:
# e.g. echo '.match = {driver: "veth"}' to let the plugin pick from the pool.
# hpn-rdma takes its NIC from a pool of the node's nic* veths (match), as a
# multi-NIC GPU node would; BENCH_HPN_POOL=0 names nic<K> instead, like
# host-device (and hpn-base, an older binary, always does).
hpn_select() { echo ".device = \"nic$1\""; }
hpn_pool() {
	if [[ ${BENCH_HPN_POOL:-1} == 1 ]]; then
		echo '.match = {devices: ["nic*"]}'
	else
		hpn_select "$1"
	fi
}

# conf PLUGIN VARIANT K: the network config of one row for pod K.
conf() {
	local plugin=$1 variant=$2 k=$3 base
	base=$(jq -cn --argjson ipam "$(ipam_of "$variant" "$k")" --arg mtu "$MTU" \
		'{cniVersion: "1.0.0", name: "bench"} + (if $ipam then {ipam: $ipam} else {} end)
		 + (if $mtu != "" then {mtu: ($mtu | tonumber)} else {} end)')
	case $plugin in
	hpn-rdma)
		jq -c --arg st "$STATE" --arg hints "$HINTS" '. + {type: "hpn-rdma", rdmaRequired: false,
			stateDir: $st, ifName: "hpn0", nccl: {dir: $hints}} | '"$(hpn_pool "$k")" <<<"$base"
		;;
	hpn-agent | hpn-dra)
		# The pool path's config, asking the agent (its socket in the scratch dir);
		# hpn-dra's pods have a claim the DRA driver's agent prepared, which reads
		# the fake sysfs tree the plugin is given too, and a stateDir of their own,
		# whose journals only that agent reads (dra.sh).
		jq -c --arg st "$STATE" --arg hints "$HINTS" --arg a "$W/agent.sock" \
			--arg da "$W/dra.sock" --arg ds "${DRA_SYSFS:-}" --arg dst "${DRA_STATE:-}" \
			--arg p "$plugin" '. + {
			type: "hpn-rdma", rdmaRequired: false, stateDir: $st, ifName: "hpn0",
			nccl: {dir: $hints}, agent: {socket: $a, required: true}} |
			if $p == "hpn-dra" then .agent.socket = $da | .sysfsRoot = $ds | .stateDir = $dst
			else . end | '"$(hpn_pool "$k")" <<<"$base"
		;;
	hpn-kanno | hpn-klabel | hpn-kagent)
		# "kubernetes" in all; the annotations decide everything in kanno
		# (selected, the model, the count), the label in klabel and kagent,
		# which asks the agent's pod cache first.
		jq -c --arg st "$STATE" --arg hints "$HINTS" --arg kc "$W/kube/kubeconfig" \
			--arg p "$plugin" --arg a "$W/agent.sock" '. + {type: "hpn-rdma", rdmaRequired: false,
			stateDir: $st, ifName: "hpn0", nccl: {dir: $hints},
			kubernetes: {kubeconfig: $kc},
			podSelector: {annotation: "alibabacloud.com/hpn-type",
				label: "alibabacloud.com/hpn-type", value: "rdma"}} |
			if $p == "hpn-kagent" then .agent = {socket: $a, required: true} else . end |
			if $p == "hpn-kanno" then .runtimeConfig["io.kubernetes.cri.pod-annotations"] =
				{"alibabacloud.com/hpn-type": "rdma",
				 "alibabacloud.com/gpu-model-series": "gpu-hpn",
				 "alibabacloud.com/gpu-count": "8"} else . end | '"$(hpn_pool "$k")" <<<"$base"
		;;
	hpn-base)
		jq -c --arg st "$STATE" '. + {type: "hpn-rdma", rdmaRequired: false,
			stateDir: $st, ifName: "hpn0"} | '"$(hpn_select "$k")" <<<"$base"
		;;
	hpn-macvlan)
		# Shared mode of hpn-rdma; override the shape with BENCH_HPN_MACVLAN.
		jq -c --arg st "$STATE" --arg hints "$HINTS" '. + {type: "hpn-rdma", rdmaRequired: false,
			stateDir: $st, ifName: "hpn0", nccl: {dir: $hints}} | '"${BENCH_HPN_MACVLAN:-.mode = \"macvlan\" | .master = \"mst0\" | .macvlanMode = \"bridge\"}" <<<"$base"
		;;
	host-device)
		jq -c --arg d "nic$k" '. + {type: "host-device", device: $d} | del(.mtu)' <<<"$base"
		;;
	macvlan)
		jq -c '. + {type: "macvlan", master: "mst0", mode: "bridge"}' <<<"$base"
		;;
	esac
}

# floor_steps DIR VARIANT K NODE-ADD UP DEL: the iproute2 floor's runs for pod
# K, one `ip -batch` per netns (ip cannot switch netns inside a batch): ADD is
# NODE-ADD in the node, then in the pod `link set hpn0 UPup` and, with static
# IPAM, the address and route; DEL is DEL in the pod.
floor_steps() {
	local dir=$1 variant=$2 k=$3 p
	p=$(pod "$k")
	mkdir -p "$dir/add-node/$k" "$dir/add-pod/$k" "$dir/del-pod/$k"
	echo "$4" >"$dir/add-node/$k/batch"
	{
		echo "link set hpn0 $5up"
		if [[ $variant == static ]]; then
			echo "addr add 10.88.$k.2/24 dev hpn0"
			echo "route add 10.99.0.0/16 via 10.88.$k.1 dev hpn0"
		fi
	} >"$dir/add-pod/$k/batch"
	echo "$6" >"$dir/del-pod/$k/batch"
	job "$dir/add-node/$k" "$IP" -batch "$dir/add-node/$k/batch"
	job "$dir/add-pod/$k" "$IP" -n "$p" -batch "$dir/add-pod/$k/batch"
	job "$dir/del-pod/$k" "$IP" -n "$p" -batch "$dir/del-pod/$k/batch"
}

# The iproute2 floor of move mode: what a move-mode ADD does to the kernel: in
# the node, move and rename into the pod; in the pod, (MTU,) up, address,
# route. DEL: in the pod, move back under the original name (the kernel drops
# the address and route and downs the device on the way); in the node, restore
# the MTU if one was set.
floor_move() {
	local dir=$1 variant=$2 k=$3
	floor_steps "$dir" "$variant" "$k" "link set nic$k netns $(pod "$k") name hpn0" \
		"${MTU:+mtu $MTU }" "link set hpn0 netns $NODE name nic$k"
	if [[ -n $MTU ]]; then
		mkdir -p "$dir/del-node/$k"
		echo "link set nic$k mtu 1500" >"$dir/del-node/$k/batch"
		job "$dir/del-node/$k" "$IP" -batch "$dir/del-node/$k/batch"
	fi
}

# The iproute2 floor of a pod of POD8 NICs: floor_move's shape, one
# `ip -batch` per netns, with POD8 links in each: in the node, move nic<j> into
# pod K as hpn<j>; in the pod, (MTU,) up each; DEL: in the pod, move each back
# under its name (then, with an MTU, restore it in the node). Pod K takes
# nic<8K>..nic<8K+7> (only pod 0 is measured). No IPAM variant: see serial.sh.
floor_move8() {
	local dir=$1 k=$3 p j n
	p=$(pod "$k")
	mkdir -p "$dir/add-node/$k" "$dir/add-pod/$k" "$dir/del-pod/$k"
	: >"$dir/add-node/$k/batch"
	: >"$dir/add-pod/$k/batch"
	: >"$dir/del-pod/$k/batch"
	for ((j = 0; j < POD8; j++)); do
		n=$((k * POD8 + j))
		echo "link set nic$n netns $p name hpn$j" >>"$dir/add-node/$k/batch"
		echo "link set hpn$j ${MTU:+mtu $MTU }up" >>"$dir/add-pod/$k/batch"
		echo "link set hpn$j netns $NODE name nic$n" >>"$dir/del-pod/$k/batch"
	done
	job "$dir/add-node/$k" "$IP" -batch "$dir/add-node/$k/batch"
	job "$dir/add-pod/$k" "$IP" -n "$p" -batch "$dir/add-pod/$k/batch"
	job "$dir/del-pod/$k" "$IP" -n "$p" -batch "$dir/del-pod/$k/batch"
	if [[ -n $MTU ]]; then
		mkdir -p "$dir/del-node/$k"
		: >"$dir/del-node/$k/batch"
		for ((j = 0; j < POD8; j++)); do
			echo "link set nic$((k * POD8 + j)) mtu 1500" >>"$dir/del-node/$k/batch"
		done
		job "$dir/del-node/$k" "$IP" -batch "$dir/del-node/$k/batch"
	fi
}

# Shared mode floor: a macvlan child of mst0 made directly in the pod netns.
floor_macvlan() {
	local k=$3
	floor_steps "$1" "$2" "$k" \
		"link add link mst0 name hpn0 netns $(pod "$k") ${MTU:+mtu $MTU }type macvlan mode bridge" \
		"" "link del hpn0"
}

# prepare ROW WIDTH: step dirs $JOBS/ROW/WIDTH/<step>/<k> for pods 0..WIDTH-1.
# ROW is MODE.VARIANT.PLUGIN; prints the step dirs in order.
prepare() {
	local row=$1 n=$2 mode variant plugin bin dir k c
	IFS=. read -r mode variant plugin <<<"$row"
	dir=$JOBS/$row/$n
	if [[ ! -d $dir ]]; then
		for ((k = 0; k < n; k++)); do
			case $plugin in
			iproute2)
				case $mode in
				move) floor_move "$dir" "$variant" "$k" ;;
				move8) floor_move8 "$dir" "$variant" "$k" ;;
				*) floor_macvlan "$dir" "$variant" "$k" ;;
				esac
				;;
			*)
				bin=$CNI_BIN/$plugin
				[[ $plugin == hpn-* ]] && bin=$PLUGIN
				[[ $plugin == hpn-base ]] && bin=$BASE
				c=$(conf "$plugin" "$variant" "$k")
				# A pod of POD8 NICs from the pool, whatever BENCH_HPN_POOL says:
				# count needs match. Pod-side names hpn0..hpn7.
				[[ $mode == move8 ]] && c=$(jq -c --argjson n "$POD8" \
					'del(.device) | .match = {devices: ["nic*"]} | .count = $n' <<<"$c")
				local a=
				[[ $plugin == hpn-k* ]] && a=$(kube_args "$k")
				[[ $plugin == hpn-dra ]] && a=$(dra_args "$k")
				cni_job "$dir/1-add/$k" ADD "$k" "$c" "$bin" "$a"
				cni_job "$dir/2-del/$k" DEL "$k" "$c" "$bin" "$a"
				;;
			esac
		done
	fi
	local -a order=()
	for s in 1-add add-node add-pod 2-del del-pod del-node; do
		[[ -d $dir/$s ]] && order+=("$dir/$s")
	done
	printf '%s\n' "${order[@]}"
}

# run LABEL NETNS REPS WARMUP STEPDIR...: the runner, its lines appended to $W/raw.
run() {
	local label=$1 reps=$3 warm=$4
	shift 4
	"$RUNNER" -n "/run/netns/$NODE" -r "$reps" -w "$warm" -l "$label" "$@" >>"$W/raw"
}

# node_clean PODS [NICS]: the node and pods 0..PODS-1 as they must be between
# rows: nothing of ours left, nic0..nic<NICS-1> (default PODS) back in the node.
node_clean() {
	local k n
	for ((k = 0; k < $1; k++)); do
		n=$(ip -n "$(pod "$k")" -o link show | wc -l)
		((n == 1)) || {
			echo "bench.sh: pod $k is not empty after a row:" >&2
			ip -n "$(pod "$k")" -o link show >&2
			return 1
		}
	done
	for ((k = 0; k < ${2:-$1}; k++)); do
		ip -n "$NODE" link show "nic$k" >/dev/null 2>&1 || {
			echo "bench.sh: nic$k did not come back to the node" >&2
			return 1
		}
	done
	# The DRA row's stateDir too (dra.sh), but for the records of the claims its
	# driver prepared, which are the agent's.
	local -a st=("$STATE" "$HINTS" ${DRA_STATE:+"$DRA_STATE"})
	[[ -z $(find "${st[@]}" -type f ! -name lock ! -name 'events.log*' ! -path "${DRA_STATE:-/nonexistent}/dra/*") ]] || {
		echo "bench.sh: hpn-rdma state left: $(find "${st[@]}" -type f ! -name lock ! -name 'events.log*' ! -path "${DRA_STATE:-/nonexistent}/dra/*")" >&2
		return 1
	}
}

# row_nics ROW: the NICs node_clean checks after a pod of ROW (its second
# argument): a move8 pod's eight; every NIC for a DRA pod (pod k's claim
# names nic<MAXPAR-1-k>); else the one of pod 0.
row_nics() {
	case $1 in
	move8.*) echo "$POD8" ;;
	dra.*) echo "$MAXPAR" ;;
	*) echo 1 ;;
	esac
}

# verify8 ROW: after ADD, pod 0 holds hpn0..hpn7, each up, and nothing else
# but lo.
verify8() {
	local n
	n=$(ip -n "$(pod 0)" -j link show | jq -r --argjson n "$POD8" '
		[.[] | select(.ifname != "lo")] as $l |
		if ($l | length) == $n and ([$l[] | select((.ifname | test("^hpn[0-9]+$")) and
			(.ifname[3:] | tonumber) < $n and (.flags | index("UP")))] | length) == $n
		then "ok" else ([$l[].ifname] | join(" ")) end')
	[[ $n == ok ]] || {
		echo "bench.sh: $1: ADD did not leave hpn0..hpn$((POD8 - 1)), up, in the pod: $n" >&2
		return 1
	}
}

# verify ROW: one ADD, checked (hpn0 in pod 0, with its address; a move8 row:
# all of hpn0..hpn7), then one DEL, checked (every NIC back, no state): a row
# is measured only if it does what it claims.
verify() {
	local row=$1 steps s
	mapfile -t steps < <(prepare "$row" 1)
	for s in "${steps[@]}"; do
		"$RUNNER" -n "/run/netns/$NODE" -r 1 -l verify "$s" >/dev/null
		case ${s##*/} in 1-add | add-pod)
			if [[ $row == move8.* ]]; then
				verify8 "$row" || return 1
				continue
			fi
			ip -n "$(pod 0)" link show hpn0 >/dev/null 2>&1 || {
				echo "bench.sh: $row: ADD left no hpn0 in the pod" >&2
				return 1
			}
			[[ $row == dra.* ]] && { dra_verify || return 1; }
			if [[ $row == *.static.* ]] &&
				! ip -n "$(pod 0)" -o addr show dev hpn0 | grep -F 10.88.0.2/24 >/dev/null; then
				echo "bench.sh: $row: hpn0 has no 10.88.0.2/24" >&2
				return 1
			fi
			;;
		esac
	done
	node_clean 1 "$(row_nics "$row")"
}

is_skipped() {
	local s
	for s in "${SKIPPED[@]}"; do [[ $s == "$1" ]] && return 0; done
	return 1
}

# has_row ROW: ROW is selected and not skipped.
has_row() {
	local x
	for x in "${ROWS[@]}"; do
		[[ $x == "$1" ]] && ! is_skipped "$x" && return 0
	done
	return 1
}

# stats LABEL: "n median p99 mean" of the wall (ns), mean CPU (us), max RSS
# (kB), mean user CPU (us), from $W/cycles (report.sh).
stats() {
	awk -F'\t' -v l="$1" '$1 == l { print $3 "\t" $4 "\t" $5 "\t" $6 }' "$W/cycles" | sort -n |
		awk -F'\t' '{ w[NR] = $1; c += $2; if ($3 > m) m = $3; u += $4 }
		END {
			if (!NR) { print "0 0 0 0 0 0 0"; exit }
			i = int(NR * 0.99 + 0.999999); if (i > NR) i = NR
			med = NR % 2 ? w[(NR + 1) / 2] : (w[NR / 2] + w[NR / 2 + 1]) / 2
			s = 0; for (j = 1; j <= NR; j++) s += w[j]
			printf "%d %.0f %.0f %.0f %.0f %d %.0f\n", NR, med, w[i], s / NR, c / NR, m, u / NR
		}'
}

# selected ROW...: the ROWs that BENCH_ROWS selects, one a line.
selected() {
	local row
	for row; do
		if [[ $row =~ ${BENCH_ROWS:-.} ]]; then
			echo "$row"
		fi
	done
}

# latency_json FILE: FILE's lines "KIND NANOSECONDS" (hpn-kubelet bench and
# dra-bench) as {KIND: {calls, median_ms, p99_ms}}.
latency_json() {
	jq -Rsc 'split("\n") | map(select(length > 0) | split(" ") | {k: .[0], v: (.[1] | tonumber)}) |
		group_by(.k) | map({(.[0].k): (map(.v) | sort | {calls: length,
			median_ms: (.[(length / 2 | floor)] / 1e6),
			p99_ms: (.[((length * 0.99) | ceil) - 1] / 1e6)})}) | add' "$1"
}
