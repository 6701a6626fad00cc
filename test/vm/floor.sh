# shellcheck shell=bash
# The floor: an RDMA pod made by hand, with iproute2 and rdma(8) only -- what
# hpn-rdma must do (and no more), and what its bench row is compared with.
# Sourced by the vm7 scenarios (after lib.sh) and the VM bench; each step
# prints the exact command it runs ("  $ ..."), so a scenario's output is the
# reference transcript for the plugin.
#
# Under TCG a process start costs 0.15-0.4 s: the helpers wait with builtins
# (nap, /proc reads) and read a device's state and GID table in one process.

FLOOR_PORT=18515	# perftest's and ibv_rc_pingpong's TCP port (their default)
FLOOR_RPING_PORT=7174	# rping's rdma_cm port (its default)

# fx CMD...: print and run CMD; fail with its stderr when it fails.
fx() {
	echo "  \$ $*"
	"$@" 2>"$T/fx.err" || fail "'$*' failed: $(<"$T/fx.err")"
}

# fx_refused MESSAGE CMD...: print and run CMD, which must fail with MESSAGE
# on stderr (iproute2 and rdma print the kernel's errno as strerror).
fx_refused() {
	local msg=$1 err
	shift
	if "$@" 2>"$T/fx.err" >/dev/null; then
		fail "'$*' succeeded; expected it to fail with '$msg'"
	fi
	err=$(<"$T/fx.err")
	[[ $err == *"$msg"* ]] || fail "'$*' failed with '$err', expected '$msg'"
	echo "  \$ $*  -> ${err//$'\n'/ | }"
}

# pod_add NAME: a pod netns with lo up.
pod_add() {
	fx ip netns add "$1"
	fx ip -n "$1" link set lo up
}

# nic_to_pod NIC POD IFNAME ADDR/LEN: move NIC into POD renamed IFNAME (one
# RTM_NEWLINK: netns and name together), give it ADDR, bring it up.
nic_to_pod() {
	fx ip link set "$1" netns "$2" name "$3"
	fx ip -n "$2" addr add "$4" dev "$3"
	fx ip -n "$2" link set "$3" up
}

# nic_home POD IFNAME NIC: move IFNAME from POD back to the initial netns
# (PID 1's) under its name NIC. The kernel takes it down and drops its
# addresses on the way.
nic_home() {
	fx ip -n "$1" link set "$2" netns 1 name "$3"
}

# rxe_in POD IFNAME RXE: a Soft-RoCE device RXE on IFNAME, made from inside
# POD (in shared mode it stays there and gets POD's own UDP 4791 socket).
rxe_in() {
	fx ip netns exec "$1" rdma link add "$3" type rxe netdev "$2"
}

# rxe_del POD RXE: delete RXE from inside POD.
rxe_del() {
	fx ip netns exec "$1" rdma link delete "$2"
}

# port_gid POD RXE ADDR [INDEX]: seen from POD with one ibv_devinfo, port 1
# of RXE is PORT_ACTIVE and GID INDEX (default 1) is ::ffff:ADDR, RoCE v2.
# The GID entry follows the address by a netdev event: up to 5 s.
port_gid() {
	local pod=$1 dev=$2 addr=$3 idx=${4:-1} out='' re end
	re="GID\[ *$idx\]:[[:space:]]+::ffff:${addr//./\\.}, RoCE v2"
	end=$((${EPOCHREALTIME/./} + 5000000))
	while :; do
		out=$(ip netns exec "$pod" ibv_devinfo -v -d "$dev" -i 1 2>&1) || out="ibv_devinfo failed: $out"
		[[ $out =~ state:[[:space:]]+PORT_ACTIVE && $out =~ $re ]] && break
		((${EPOCHREALTIME/./} < end)) || fail "in $pod, $dev port 1 is not PORT_ACTIVE with GID[$idx] ::ffff:$addr RoCE v2: $(grep -E 'state:|GID' <<<"$out")"
		nap 0.3
	done
	echo "  # in $pod: ibv_devinfo -v -d $dev: PORT_ACTIVE, GID[$idx] ::ffff:$addr RoCE v2"
}

# home_as MAC: the name of the NIC with MAC in the initial netns (empty if
# it is not there), by MAC as the plugin's DEL finds it: its name may be
# another than it left with.
home_as() {
	local dev mac
	for dev in /sys/class/net/*; do
		[[ -e $dev/device ]] || continue
		read -r mac <"$dev/address"
		[[ $mac == "$1" ]] && echo "${dev##*/}"
	done
	return 0
}

# is_home MAC: the NIC with MAC is in the initial netns.
is_home() {
	[[ -n $(home_as "$1") ]]
}

# rdma_none: no RDMA link is listed (in the initial netns).
rdma_none() {
	[[ -z $(rdma link show) ]]
}

# has_gid DEV ADDR: DEV's GID table (seen from here) has ::ffff:ADDR RoCE v2.
has_gid() {
	[[ $(ibv_devinfo -v -d "$1" -i 1) == *"::ffff:$2, RoCE v2"* ]]
}

# nics_as_booted: every NIC in the initial netns under its boot name.
nics_as_booted() {
	local i
	for i in "${!VM_MACS[@]}"; do
		[[ $(home_as "${VM_MACS[$i]}") == "${VM_BOOT_NAMES[$i]}" ]] ||
			fail "NIC ${VM_MACS[$i]} is '$(home_as "${VM_MACS[$i]}")', booted as ${VM_BOOT_NAMES[$i]}"
	done
}

# ---- traffic -----------------------------------------------------------------

# proc_done PID: PID has exited (gone, or a zombie not yet waited for).
proc_done() {
	local stat=
	read -r stat 2>/dev/null <"/proc/$1/stat" || return 0
	stat=${stat##*) }
	[[ ${stat%% *} == Z ]]
}

# serve POD CMD...: start CMD inside POD in the background: SRV (its pid:
# ip netns exec execs the command), output in $T/srv.out.
SRV=
serve() {
	local pod=$1
	shift
	echo "  \$ ip netns exec $pod $* &"
	ip netns exec "$pod" "$@" >"$T/srv.out" 2>&1 &
	SRV=$!
}

# tcp_listening PID PORT: PID's netns has a TCP socket listening on PORT
# (/proc/PID/net is the netns of PID; builtins only).
tcp_listening() {
	local f hex l st
	printf -v hex '%04X' "$2"
	proc_done "$1" && return 1
	for f in "/proc/$1/net/tcp" "/proc/$1/net/tcp6"; do
		while read -r _ l _ st _; do
			[[ $l == *":$hex" && $st == 0A ]] && return 0
		done <"$f" 2>/dev/null
	done
	return 1
}

# cm_listening POD ADDR PORT: an rdma_cm id in POD listens on ADDR:PORT.
cm_listening() {
	proc_done "$SRV" && return 1
	[[ $(ip netns exec "$1" rdma res show cm_id 2>/dev/null) == *"state LISTEN "*"src-addr $2:$3 "* ]]
}

# server_ready WHAT COMMAND...: wait up to 20 s for COMMAND; fail, with the
# server's output, if it did not come true.
server_ready() {
	local what=$1
	shift
	wait_for 20 "$@" || fail "$what server did not start listening: $(<"$T/srv.out")"
}

# server_wait SECS: wait for the server to exit (killed after SECS): SRV_RC,
# SRV_OUT.
SRV_RC=
SRV_OUT=
server_wait() {
	wait_for "$1" proc_done "$SRV" || kill "$SRV" 2>/dev/null || true
	SRV_RC=0
	wait "$SRV" || SRV_RC=$?
	SRV_OUT=$(<"$T/srv.out")
	SRV=
}

# client POD SECS [--until REGEX] CMD...: run CMD inside POD; killed after
# SECS (CLI_RC 124), or once its output matches REGEX (CLI_RC "matched"):
# CLI_RC, CLI_OUT.
CLI_RC=
CLI_OUT=
client() {
	local pod=$1 secs=$2 re='' pid end
	shift 2
	if [[ $1 == --until ]]; then
		re=$2
		shift 2
	fi
	echo "  \$ ip netns exec $pod $*"
	ip netns exec "$pod" "$@" >"$T/cli.out" 2>&1 &
	pid=$!
	end=$((${EPOCHREALTIME/./} + secs * 1000000))
	CLI_RC=
	until proc_done "$pid"; do
		if [[ -n $re && $(<"$T/cli.out") =~ $re ]]; then
			CLI_RC=matched
			break
		fi
		if ((${EPOCHREALTIME/./} >= end)); then
			CLI_RC=124
			break
		fi
		nap 0.1
	done
	if [[ -n $CLI_RC ]]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" || true
	else
		CLI_RC=0
		wait "$pid" || CLI_RC=$?
	fi
	CLI_OUT=$(<"$T/cli.out")
}

# traffic_ok WHAT: client and server both exited 0.
traffic_ok() {
	[[ $CLI_RC == 0 && $SRV_RC == 0 ]] ||
		fail "$1: client exit $CLI_RC, server exit $SRV_RC"$'\n'"client: $CLI_OUT"$'\n'"server: $SRV_OUT"
}

# rping_pods SPOD SADDR CPOD [CADDR]: rdma_cm between pods: rping server on
# SADDR in SPOD, client in CPOD (bound to CADDR if given: the rail's own
# address), 3 pings with data check (-V). Fails unless both succeed.
rping_pods() {
	local src=()
	[[ -n ${4:-} ]] && src=(-I "$4")
	serve "$1" rping -s -a "$2" -p "$FLOOR_RPING_PORT" -C 3 -V
	server_ready rping cm_listening "$1" "$2" "$FLOOR_RPING_PORT"
	client "$3" 60 rping -c -a "$2" -p "$FLOOR_RPING_PORT" "${src[@]}" -C 3 -V -v
	server_wait 30
	traffic_ok "rping $3 -> $1 ($2)"
	[[ $CLI_OUT == *"ping data: rdma-ping-2: "* ]] || fail "rping: no third ping in: $CLI_OUT"
}

# pingpong_pods SPOD SDEV CPOD CDEV SADDR [GID]: ibv_rc_pingpong (RC send/recv,
# 10 iterations) between SDEV in SPOD and CDEV in CPOD, both with GID index
# GID (default 1); the client must see the server's ::ffff:SADDR GID.
pingpong_pods() {
	local g=${6:-1}
	serve "$1" ibv_rc_pingpong -d "$2" -i 1 -g "$g" -n 10
	server_ready ibv_rc_pingpong tcp_listening "$SRV" "$FLOOR_PORT"
	client "$3" 60 ibv_rc_pingpong -d "$4" -i 1 -g "$g" -n 10 "$5"
	server_wait 30
	traffic_ok "ibv_rc_pingpong $3/$4 -> $1/$2"
	[[ $CLI_OUT =~ remote\ address:.*GID\ ::ffff:${5//./\\.} ]] ||
		fail "ibv_rc_pingpong: the client did not talk to ::ffff:$5: $CLI_OUT"
}

# write_bw_pods SPOD SDEV CPOD CDEV SADDR ITERS [GID]: ib_write_bw (RC RDMA
# write, 64 KiB messages) between SDEV in SPOD and CDEV in CPOD with GID index
# GID (default 1): BW = the client's average, MB/s.
BW=
write_bw_pods() {
	local g=${7:-1} line
	serve "$1" ib_write_bw -d "$2" -i 1 -x "$g" -F -n "$6"
	server_ready ib_write_bw tcp_listening "$SRV" "$FLOOR_PORT"
	client "$3" 300 ib_write_bw -d "$4" -i 1 -x "$g" -F -n "$6" "$5"
	server_wait 30
	traffic_ok "ib_write_bw $3/$4 -> $1/$2"
	# " 65536      200              4.77               3.66   		   0.000059"
	BW=
	while read -r line; do
		[[ $line =~ ^65536[[:space:]]+$6[[:space:]]+[0-9.]+[[:space:]]+([0-9.]+) ]] && BW=${BASH_REMATCH[1]}
	done <<<"$CLI_OUT"
	[[ -n $BW ]] || fail "ib_write_bw: no result line in: $CLI_OUT"
	echo "  # ib_write_bw $4 -> $2: $BW MB/s"
}

# ---- counters ------------------------------------------------------------------

# counters ARRAY [POD...]: every RDMA port counter `rdma statistic show`
# prints, as ARRAY[dev/port.name]=value; from the initial netns, or from
# each POD (exclusive mode: a device is visible only in its own netns).
counters() {
	local -n _c=$1
	local pod dev
	shift
	_c=()
	local -a where=("")
	(($#)) && where=("$@")
	for pod in "${where[@]}"; do
		local -a in=()
		[[ -n $pod ]] && in=(ip netns exec "$pod")
		# "link rxa/1 sent_pkts 337 rcvd_pkts 12938 ... rcvd_bytes 13790440"
		local -a w
		local i
		while read -r -a w; do
			[[ ${w[0]:-} == link ]] || continue
			dev=${w[1]}
			for ((i = 2; i + 1 < ${#w[@]}; i += 2)); do
				_c[$dev.${w[i]}]=${w[i + 1]}
			done
		done < <("${in[@]}" rdma statistic show)
	done
	((${#_c[@]})) || fail "rdma statistic show${pod:+ in $pod} printed no counters"
}

# delta BEFORE AFTER DEV/PORT NAME: how much counter NAME of DEV/PORT grew.
delta() {
	local -n _b=$1 _a=$2
	[[ -n ${_a[$3.$4]:-} ]] || fail "no counter $4 for $3 (have: ${!_a[*]})"
	echo $((${_a[$3.$4]} - ${_b[$3.$4]:-0}))
}

# rose BEFORE AFTER MIN DEV/PORT...: each DEV/PORT sent and received at
# least MIN bytes (sent_bytes, rcvd_bytes).
rose() {
	local b=$1 a=$2 min=$3 d s r
	shift 3
	for d in "$@"; do
		s=$(delta "$b" "$a" "$d" sent_bytes)
		r=$(delta "$b" "$a" "$d" rcvd_bytes)
		((s >= min && r >= min)) ||
			fail "$d: sent $s and received $r bytes, expected at least $min each"
		echo "  # $d: sent $s, received $r bytes"
	done
}

# still BEFORE AFTER DEV/PORT...: no packet sent or received on each DEV/PORT.
still() {
	local b=$1 a=$2 d s r
	shift 2
	for d in "$@"; do
		s=$(delta "$b" "$a" "$d" sent_pkts)
		r=$(delta "$b" "$a" "$d" rcvd_pkts)
		((s == 0 && r == 0)) || fail "$d: sent $s and received $r packets, expected none"
	done
}
