# shellcheck shell=bash
# The NRI rows of scripts/bench.sh (issue 39): what hpn-rdma-agent's NRI
# plugin (--nri; doc/agent.md "NRI") adds to a container's CreateContainer and
# StartContainer through a real containerd 2.1 (forky's, from the runtime
# tier's cache, with Debian 12's runc, NRI on and its socket in the node's
# scratch dir: test/runtime/node.sh, RTN_NRI=1), on a throwaway node of its
# own. Two pods live through the section, made once: "rdma", which hpn-rdma
# attaches (the annotation alibabacloud.com/hpn-type: rdma, as in
# conf/10-hpn-rdma-containerd2.conflist; move mode, rnic0), and "plain", which
# it passes through. The node has no RDMA: as in runtime.nri, the agent reads
# a fake sysfs tree (mlx5_0 behind uverbs0 231:192, rdma_cm 10:250) and the
# rdma pod's journal is given mlx5_0 once after RunPodSandbox, as ADD writes
# it on a node with RDMA; so each of its containers gets uverbs0 and rdma_cm
# (nodes and cgroup rules), its hints file at /etc/nccl.conf and
# RLIMIT_MEMLOCK.
#
# Rows, one container each a round, created and started: each call timed as
# containerd handled it (from the lines its log writes when the call comes in
# and when it returns: no client start, no gRPC), and the client's wall
# (hpn-cri's start included: the same in every row) apart; what the plugin
# adds is the difference of the medians against nri.off (and the median of
# the round-by-round differences):
#   nri.off    the rdma pod's container, containerd's NRI on and no plugin
#              registered (the agent stopped, and containerd's log saying it
#              dropped the link): the fair baseline. NRI turned off in the
#              config is not measured (it would cost a node of its own).
#   nri.on     the same with the agent registered: containerd asks it at
#              CreateContainer and applies its adjustment; runc makes the
#              nodes, the mount and the limit at StartContainer
#   nri.other  the plain pod's container with the agent registered: what
#              every other container of the node pays (one call, nothing
#              adjusted)
# Each round runs the off container and, with a freshly started agent (once
# containerd's log says it is connected and synchronized), a first container
# of the rdma pod (reported apart: a fresh process's first answer, rarer on a
# node than the warm ones), then the on and the other one; off comes first in
# even rounds, last in odd ones, so that load falls on both alike.
# BENCH_RT_ITER rounds, after one of each, untimed. Between the timed calls
# (never inside them) each container is checked to be what its row claims
# (its bundle's config.json: both device nodes, the hints mount and the limit,
# or none of them) and removed; the agent's metrics must count each round's
# first and on containers adjusted and its other container untouched. The
# agent's CPU per container it answered: its threads' run time
# (/proc/PID/task/*/schedstat, ns) and utime+stime (/proc/PID/stat, whole
# clock ticks: 10 ms here, so only a sum over many rounds says anything),
# from before that container's CreateContainer to after its removal (every
# event of it the agent subscribes to), summed over the rounds. The agent's config sits alone in its directory (the agent
# watches that directory; the section's own files would wake it).
#
# Memlock: root here may lack CAP_SYS_RESOURCE, and then runc cannot raise
# RLIMIT_MEMLOCK above containerd's hard limit (8 MiB under Debian's defaults)
# and refuses a container asking for unlimited (the agent's default). No
# runc wrapper here (runtime.nri's would add a Python start to every
# container): the agent's conflist sets nri.memlock to this shell's hard
# limit, which containerd and runc inherit, so runc sets it and succeeds;
# with CAP_SYS_RESOURCE it stays "unlimited". Either way the agent adds the
# same rlimit entry and runc makes the same setrlimit call.
#
# Skipped, saying why, without containerd 2.1 in the cache (or any of what
# the node needs: rtn_why_not), hpn-cri, the agent, or curl. The node is
# removed by cleanup (rtn_cleanup) whatever happens.

NRI_MPORT=19470

# nri_fake_sysfs DIR: the agent's view of the node's one RDMA device: mlx5_0
# with its verbs node uverbs0, and rdma_cm (what the agent's NRI answer
# reads: the character devices' classes; the device nodes themselves are
# runc's to make in the container).
nri_fake_sysfs() {
	mkdir -p "$1/class/infiniband_verbs/uverbs0" "$1/class/misc/rdma_cm" \
		"$1/class/infiniband/mlx5_0/ports/1"
	echo mlx5_0 >"$1/class/infiniband_verbs/uverbs0/ibdev"
	echo 231:192 >"$1/class/infiniband_verbs/uverbs0/dev"
	echo 10:250 >"$1/class/misc/rdma_cm/dev"
	echo "4: ACTIVE" >"$1/class/infiniband/mlx5_0/ports/1/state"
	echo Ethernet >"$1/class/infiniband/mlx5_0/ports/1/link_layer"
}

# nri_agent_start: the agent on the node (its netns: the metrics' loopback),
# registered with containerd's NRI and synchronized (containerd's log says so:
# only then does it ask the plugin about new containers); NRI_AGENT_PID.
nri_agent_start() {
	local i m
	m=$(wc -l <"$RTN_DIR/containerd.log")
	# nsenter itself execs the agent: $! is its pid.
	nsenter -t "$RTN_NODE_PID" -m -n -- "$AGENT" --config "$NRI_D/agent/agent.conflist" \
		--kubelet-dir "$NRI_D/kl" --lookup-socket "$NRI_D/agent.sock" --dev-root "$NRI_D/dev" \
		--cdi-dir "" --cri-socket none --health-interval 0 \
		--metrics-address "127.0.0.1:$NRI_MPORT" --nri="$RTN_NRI_SOCK" 2>>"$NRI_D/agent.log" &
	NRI_AGENT_PID=$!
	AGENT_PIDS="${AGENT_PIDS:-} $NRI_AGENT_PID"
	for ((i = 0; i < 400; i++)); do
		tail -n "+$((m + 1))" "$RTN_DIR/containerd.log" |
			grep -q 'plugin \\"50-hpn-rdma\\" connected and synchronized' && return 0
		kill -0 "$NRI_AGENT_PID" 2>/dev/null ||
			fail "the agent exited: $(tail -n 3 "$NRI_D/agent.log")"
		sleep 0.01
	done
	fail "the agent was not registered and synchronized in 4 s: $(tail -n 3 "$NRI_D/agent.log")"
}

# nri_agent_stop: SIGTERM, until it is gone and containerd has dropped it
# (its log says so), so that the next container meets no plugin at all.
nri_agent_stop() {
	local i m
	[[ -n ${NRI_AGENT_PID:-} ]] || return 0
	m=$(wc -l <"$RTN_DIR/containerd.log")
	kill -TERM "$NRI_AGENT_PID" 2>/dev/null || true
	wait "$NRI_AGENT_PID" 2>/dev/null || true
	AGENT_PIDS=${AGENT_PIDS// $NRI_AGENT_PID/}
	NRI_AGENT_PID=
	for ((i = 0; i < 400; i++)); do
		tail -n "+$((m + 1))" "$RTN_DIR/containerd.log" |
			grep -q 'connection to plugin \\"50-hpn-rdma\\" closed' && return 0
		sleep 0.01
	done
	fail "containerd did not drop the stopped agent in 4 s: $(tail -n 3 "$RTN_DIR/containerd.log")"
}

# nri_cpu: the agent's CPU so far: "TICKS NS" (utime+stime; its threads' run time).
nri_cpu() {
	local st ns=0 t a f
	st=$(<"/proc/$NRI_AGENT_PID/stat")
	st=${st##*) }
	read -ra f <<<"$st"
	for t in /proc/"$NRI_AGENT_PID"/task/*/schedstat; do
		read -r a _ <"$t" && ns=$((ns + a))
	done
	echo "$((f[11] + f[12])) $ns"
}

# nri_ctr ROW POD_ID POD_JSON ROUND: one container of ROW, created and
# started (timed: a line of $NRI_D/raw), checked, stopped and removed. Timed
# twice: the wall of each hpn-cri run, and each call as containerd handled
# it, from its log's lines (CreateContainer and StartContainer, when each
# came in and when each returned): without the client's start and the gRPC.
nri_ctr() {
	local row=$1 pod=$2 pcfg=$3 r=$4 id t0 t1 t2 m srv spec want
	jq -n --arg img "$RTN_IMAGE" --argjson r "$r" '{metadata: {name: "c", attempt: $r},
		image: {image: $img}, command: ["/pause"], logPath: "c/\($r).log"}' >"$NRI_D/ctr.json"
	m=$(wc -l <"$RTN_DIR/containerd.log")
	t0=$EPOCHREALTIME
	id=$(cri create "$pod" "$NRI_D/ctr.json" "$pcfg" 2>"$NRI_D/cri.err") ||
		fail "$row: CreateContainer failed: $(<"$NRI_D/cri.err")"
	t1=$EPOCHREALTIME
	cri start "$id" 2>"$NRI_D/cri.err" || fail "$row: StartContainer failed: $(<"$NRI_D/cri.err")"
	t2=$EPOCHREALTIME
	srv=$(tail -n "+$((m + 1))" "$RTN_DIR/containerd.log" | awk -v id="$id" '
		function ns(l,   t) {
			if (!match(l, /T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9]+Z/)) return -1
			t = substr(l, RSTART + 1, RLENGTH - 2)
			split(t, h, /[:.]/)
			return ((h[1] * 60 + h[2]) * 60 + h[3]) * 1e9 + substr(h[4] "000000000", 1, 9)
		}
		/msg="CreateContainer within sandbox/ && !/returns container id/ && c0 == "" { c0 = ns($0) }
		/msg="CreateContainer within sandbox/ && /returns container id/ && index($0, id) { c1 = ns($0) }
		/msg="StartContainer for/ && index($0, id) && !/returns/ && s0 == "" { s0 = ns($0) }
		/msg="StartContainer for/ && index($0, id) && /returns successfully/ { s1 = ns($0) }
		END {
			if (c0 == "" || c0 < 0 || c1 == "" || s0 == "" || s1 == "") { print "-"; exit }
			# A call across midnight: a day more.
			if (c1 < c0) c1 += 86400e9
			if (s1 < s0) s1 += 86400e9
			printf "%.0f\t%.0f\n", c1 - c0, s1 - s0
		}')
	[[ $srv != - ]] ||
		fail "$row: containerd's log lacks the lines of CreateContainer and StartContainer of $id"
	printf '%s\t%s\t%s\t%s\t%s\n' "$row" "$(((${t1/./} - ${t0/./}) * 1000))" \
		"$(((${t2/./} - ${t1/./}) * 1000))" "$srv" "$r" >>"$NRI_D/raw"
	# What containerd handed runc: the row's adjustment, or none of it.
	spec=$RTN_DIR/state/io.containerd.runtime.v2.task/k8s.io/$id/config.json
	[[ -f $spec ]] || fail "$row: no bundle of container $id ($spec)"
	want=false
	[[ $row == nri.on || $row == nri.first ]] && want=true
	jq -e --argjson on "$want" --arg h "$NRI_HINTS_FILE" --arg ml "$NRI_MEMLOCK_N" '
		([.linux.devices[]?.path] | sort) as $d |
		([.mounts[] | select(.destination == "/etc/nccl.conf")]) as $m |
		([.process.rlimits[]? | select(.type == "RLIMIT_MEMLOCK")]) as $l |
		if $on then $d == ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0"] and
			($m | length == 1 and .[0].source == $h) and
			($l | length == 1 and (.[0].hard | tostring) == $ml)
		else ($d | map(select(startswith("/dev/infiniband/"))) == []) and $m == [] and $l == [] end' \
		"$spec" >/dev/null ||
		fail "$row: container $id is not what the row claims: $(jq -c '{devices: .linux.devices,
			rlimits: .process.rlimits, nccl: [.mounts[] | select(.destination == "/etc/nccl.conf")]}' "$spec")"
	cri stop "$id" >/dev/null || fail "$row: StopContainer failed"
	cri rm "$id" >/dev/null || fail "$row: RemoveContainer failed"
}

# nri_rows: make the node, measure, set nri (JSON).
nri_rows() {
	local r j row cv=1.1.0 net=bench-nri rdma plain hard
	local on_ticks=0 on_ns=0 oth_ticks=0 oth_ns=0 first_ticks=0 first_ns=0 cf c0 c1 c2 a1 u1
	NRI_D=$W/nri
	rtn_setup "$NRI_D"
	rtn_plugin "$PLUGIN"
	rtn_nic 0
	# The agent's config alone in its directory: the agent watches that
	# directory, and this section's files written beside it would wake it.
	mkdir -p "$NRI_D/ipam" "$NRI_D/kl" "$NRI_D/dev" "$NRI_D/pods" "$NRI_D/agent"
	nri_fake_sysfs "$NRI_D/sysfs"
	: >"$NRI_D/agent.log"
	# The shipped example with this node's changes (runtime.sh's bridge; the
	# pool rnic*, rdmaRequired false: veths have no RDMA device).
	jq -c --arg net "$net" --arg ipam "$NRI_D/ipam" --arg st "$STATE" --arg h "$HINTS" --arg v "$cv" '
		.cniVersion = $v | .name = $net |
		.plugins |= map(
			if .type == "bridge" then
				.bridge = "hpnbbr1" | .ipMasq = false |
				.ipam.ranges = [[{subnet: "10.252.1.0/24"}]] | .ipam.dataDir = $ipam
			elif .type == "hpn-rdma" then
				.match = {devices: ["rnic*"]} | .rdmaRequired = false | del(.mtu) |
				.stateDir = $st | .nccl.dir = $h |
				.ipam.ranges = [[{subnet: "10.252.2.0/24"}]] | .ipam.dataDir = $ipam
			else . end)' "$SRC/conf/10-hpn-rdma-containerd2.conflist" >"$NRI_D/net.conflist"
	hard=$(ulimit -Hl)
	NRI_MEMLOCK=unlimited
	NRI_MEMLOCK_N=18446744073709551615
	if [[ $hard != unlimited ]] && ! (((16#$(awk '/^CapEff:/ { print $2 }' /proc/self/status) >> 24) & 1)); then
		NRI_MEMLOCK=$((hard * 1024))
		NRI_MEMLOCK_N=$NRI_MEMLOCK
	fi
	jq -c --arg s "$NRI_D/sysfs" --arg ml "$NRI_MEMLOCK" '.plugins |= map(if .type == "hpn-rdma" then
		.sysfsRoot = $s | .nri.memlock = (if $ml == "unlimited" then $ml else ($ml | tonumber) end)
		else . end)' "$NRI_D/net.conflist" >"$NRI_D/agent/agent.conflist"
	rtn_conflist "$(<"$NRI_D/net.conflist")"
	rtn_containerd_start
	NRI_CTRD_V=$(cri version | jq -r .runtimeVersion)
	rtn_import_image
	rtn_wait_network "$net"

	local pod
	for pod in rdma plain; do
		jq -n --arg name "$pod" --arg uid "$(cat /proc/sys/kernel/random/uuid)" \
			--arg logs "$NRI_D/logs/$pod" --arg cg "$RTN_CGROUP" '{
			metadata: {name: $name, uid: $uid, namespace: "bench", attempt: 0},
			hostname: $name, logDirectory: $logs,
			annotations: (if $name == "rdma" then {"alibabacloud.com/hpn-type": "rdma"} else {} end),
			linux: {cgroupParent: $cg, securityContext: {namespaceOptions:
				{network: "POD", pid: "CONTAINER", ipc: "POD"}}}}' >"$NRI_D/pods/$pod.json"
		mkdir -p "$NRI_D/logs/$pod"
	done
	rdma=$(cri runp "$NRI_D/pods/rdma.json") || fail "RunPodSandbox of the rdma pod failed"
	plain=$(cri runp "$NRI_D/pods/plain.json") || fail "RunPodSandbox of the plain pod failed"
	# The rdma pod's journal names the RDMA device ADD binds on a node with
	# RDMA (runtime.nri's bind_rdma: shared, nothing to undo at DEL).
	j=$STATE/$net/$rdma.eth0
	[[ -f $j && ! -e $STATE/$net/$plain.eth0 ]] ||
		fail "hpn-rdma did not attach the rdma pod alone ($(ls "$STATE/$net" 2>&1 | tr '\n' ' '))"
	jq -e '.phase == 4 and (.nics | length == 1) and .nics[0].host.name == "rnic0"' "$j" >/dev/null ||
		fail "the rdma pod's journal: $(jq -c '{phase, nics}' "$j")"
	jq -c '.nics[0].rdma = {name: "mlx5_0", netdev: "rnic0", moved: false}' "$j" >"$j.new"
	mv "$j.new" "$j"
	NRI_HINTS_FILE=$(find "$HINTS" -path "*/$(jq -r .metadata.uid "$NRI_D/pods/rdma.json")/nccl.conf")
	[[ -s $NRI_HINTS_FILE ]] || fail "ADD wrote no hints file for the rdma pod"

	# A first container of each kind, not timed (images, caches, the first runc).
	: >"$NRI_D/raw"
	nri_ctr nri.off "$rdma" "$NRI_D/pods/rdma.json" 0
	nri_agent_start
	nri_ctr nri.on "$rdma" "$NRI_D/pods/rdma.json" 0
	nri_ctr nri.other "$plain" "$NRI_D/pods/plain.json" 0
	nri_agent_stop
	: >"$NRI_D/raw"
	local adjusted=0 untouched=0 calls=0 v order
	for ((r = 0; r < RT_ITER; r++)); do
		order=(off on)
		((r % 2 == 0)) || order=(on off)
		for row in "${order[@]}"; do
			if [[ $row == off ]]; then
				nri_ctr nri.off "$rdma" "$NRI_D/pods/rdma.json" "$r"
				continue
			fi
			nri_agent_start
			# Its first container, apart: a fresh process's first answer.
			cf=$(nri_cpu)
			nri_ctr nri.first "$rdma" "$NRI_D/pods/rdma.json" "$r"
			c0=$(nri_cpu)
			nri_ctr nri.on "$rdma" "$NRI_D/pods/rdma.json" "$r"
			c1=$(nri_cpu)
			nri_ctr nri.other "$plain" "$NRI_D/pods/plain.json" "$r"
			c2=$(nri_cpu)
			# A fresh agent's counters start from 0; the first scrape renders them.
			read -r a1 u1 v < <(rtn_in curl -sf "http://127.0.0.1:$NRI_MPORT/metrics" | awk '
				{ m[$1] = $2 }
				END { print m["hpn_rdma_nri_containers_adjusted_total"] + 0,
					m["hpn_rdma_nri_containers_untouched_total"] + 0,
					m["hpn_rdma_nri_calls_total"] + 0 }')
			[[ $a1 == 2 && $u1 == 1 ]] ||
				fail "round $r: the agent counts $a1 containers adjusted, $u1 untouched (2 and 1 wanted)"
			adjusted=$((adjusted + a1)) untouched=$((untouched + u1)) calls=$((calls + v))
			first_ticks=$((first_ticks + ${c0% *} - ${cf% *}))
			first_ns=$((first_ns + ${c0#* } - ${cf#* }))
			on_ticks=$((on_ticks + ${c1% *} - ${c0% *}))
			on_ns=$((on_ns + ${c1#* } - ${c0#* }))
			oth_ticks=$((oth_ticks + ${c2% *} - ${c1% *}))
			oth_ns=$((oth_ns + ${c2#* } - ${c1#* }))
			nri_agent_stop
		done
	done
	rtn_containerd_stop TERM
	# Per row: medians and p99 of each call as containerd handled it, their
	# sum, and the client's walls; the on and other rows' added time against
	# off (difference of the medians, and the median of the round-by-round
	# differences); the agent's CPU per container it answered.
	jq -Rn --arg v "$NRI_CTRD_V" \
		--argjson tck "$(getconf CLK_TCK)" --argjson n "$RT_ITER" \
		--argjson ont "$on_ticks" --argjson onns "$on_ns" --argjson ot "$oth_ticks" --argjson ons "$oth_ns" \
		--argjson ft "$first_ticks" --argjson fns "$first_ns" \
		--argjson adj "$adjusted" --argjson unt "$untouched" --argjson calls "$calls" \
		--arg ml "$NRI_MEMLOCK" --arg rows "${NRI_ROWS[*]}" '
		def med: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
			else (.[length / 2 - 1] + .[length / 2]) / 2 end;
		def p99: sort | if length == 0 then null else .[((length * 0.99) | ceil) - 1] end;
		def ms: if . == null then null else . / 1e6 end;
		[inputs | select(length > 0) | split("\t") |
		 {row: .[0], cc: (.[1] | tonumber), cs: (.[2] | tonumber), sc: (.[3] | tonumber),
		  ss: (.[4] | tonumber), r: (.[5] | tonumber)} | .st = .sc + .ss | .ct = .cc + .cs] as $all |
		($all | group_by(.row) | map({(.[0].row): .}) | add) as $by |
		def row(r): ($by[r] // []) as $x | {row: r, containers: ($x | length),
			create_ms: {median: ([$x[].sc] | med | ms), p99: ([$x[].sc] | p99 | ms)},
			start_ms: {median: ([$x[].ss] | med | ms), p99: ([$x[].ss] | p99 | ms)},
			total_ms: {median: ([$x[].st] | med | ms), p99: ([$x[].st] | p99 | ms)},
			client_ms: {create: ([$x[].cc] | med | ms), start: ([$x[].cs] | med | ms),
				total: ([$x[].ct] | med | ms)}};
		($rows | split(" ") | map(row(.))) as $r |
		(["nri.off", "nri.on", "nri.other", "nri.first"] | map({(.): row(.)}) | add) as $m |
		def added(a): if $m[a] and $m["nri.off"] and $m[a].containers > 0 and $m["nri.off"].containers > 0 then
			{total_ms: ($m[a].total_ms.median - $m["nri.off"].total_ms.median),
			 create_ms: ($m[a].create_ms.median - $m["nri.off"].create_ms.median),
			 start_ms: ($m[a].start_ms.median - $m["nri.off"].start_ms.median),
			 client_total_ms: ($m[a].client_ms.total - $m["nri.off"].client_ms.total),
			 paired_total_ms: ([($by[a] // [])[] as $o | ($by["nri.off"] // [])[] |
				select(.r == $o.r) | $o.st - .st] | med | ms)}
			else null end;
		def cpu(t; ns; k): if k > 0 then {ticks: (t * 1000 / $tck / k), schedstat: (ns / 1e6 / k)}
			else null end;
		($by["nri.first"] // [] | length) as $nf |
		{containerd: $v, memlock: $ml, rounds: $n, rows: $r,
		 added_on: added("nri.on"), added_other: added("nri.other"),
		 first_after_register: (row("nri.first") + {added: added("nri.first")}),
		 agent: {adjusted: $adj, untouched: $unt, calls: $calls,
			cpu_ms_per_adjusted: cpu($ont; $onns; $nf),
			cpu_ms_per_untouched: cpu($ot; $ons; $nf),
			cpu_ms_first_adjusted: cpu($ft; $fns; $nf)}}' <"$NRI_D/raw" >"$NRI_D/nri.json"
}

# nri_section: nri, the NRI rows' JSON (or why they were skipped).
nri_section() {
	local why
	mapfile -t NRI_ROWS < <(selected nri.off nri.on nri.other)
	nri='{"skipped": "no nri row selected (BENCH_ROWS)"}'
	((${#NRI_ROWS[@]} > 0)) || return 0
	HPN_CRI=${HPN_CRI:-$SRC/build/test/runtime/hpn-cri}
	HPN_PAUSE_IMAGE=${HPN_PAUSE_IMAGE:-$SRC/build/test/runtime/pause-image.tar}
	# The runtime rows' prefix: node.sh's cleanup knows its nodes by it.
	RTN_PREFIX=${PFX}rt-
	fail() {
		echo "bench.sh: nri rows: $*" >&2
		exit 1
	}
	# shellcheck source=../test/runtime/node.sh
	source "$SRC/test/runtime/node.sh"
	RTN_NRI=1
	rtn_use 2.1
	why=$(rtn_why_not)
	[[ -n $why || -x $AGENT ]] || why="hpn-rdma-agent not built ($AGENT)"
	[[ -n $why ]] || command -v curl >/dev/null || why="curl is not installed (the agent's metrics)"
	if [[ -n $why ]]; then
		nri=$(jq -cn --arg w "$why" '{skipped: $w}')
		echo "# nri rows skipped: $why"
		RTN_NRI=
		return 0
	fi
	nri_rows
	nri=$(jq -c . "$NRI_D/nri.json")
	rtn_cleanup
	RTN_NRI=
}
