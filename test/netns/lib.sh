# shellcheck shell=bash disable=SC2030,SC2031
# Shared helpers of the netns test tier. Source it from a test script, then
# call t_init. Bash only; every test runs with `set -euo pipefail`.
#
# Isolation: the plugin never runs in the machine's own network namespace.
# Each scenario makes a throwaway "host" netns and a pod netns, creates veth
# pairs inside the host netns to stand in for NICs, and runs the plugin with
# `ip netns exec <host>`, so the plugin's host is the throwaway netns. All
# netns carry the prefix "hpnt-<pid>-"; an EXIT trap deletes them (and with
# them every veth) and the temp dir, whatever happened.
#
# Exit codes: 0 pass, 1 fail (a FAIL line says what), 77 skipped (a SKIP line
# says why).

set -euo pipefail
shopt -s inherit_errexit

NETNS_DIR=/run/netns
CNI_BIN=${HPN_CNI_BIN:-/usr/lib/cni}	# Debian's containernetworking-plugins
HPNT_PREFIX="hpnt-$$-"
HPNT_BIN="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/bin"

# Globals a scenario sets and run_plugin reads.
HOST_NS=
POD_NS=
CID=
IFNAME=eth0
RUN_WRAP=()	# command words put before the plugin (e.g. strace)

# Set by run_plugin.
RC=0
OUT=
ERR=

T=
STATE=
PODS=
NET=hpnt-net
SCEN=0
SCEN_NAME=
LAST_RUN=

# ---- reporting: skip, fail, info, expect_*, jq_ok --------------------------

# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

# ---- setup and teardown ------------------------------------------------------

t_cleanup() {
	local ns
	set +e
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		if [[ $ns == "$HPNT_PREFIX"* ]]; then
			ip netns del "$ns" 2>/dev/null
		fi
	done
	if [[ -n $T && -d $T ]]; then
		rm -rf "$T"
	fi
}

# t_sweep: the netns of earlier runs killed outright. ctest's TIMEOUT ends a
# test with SIGKILL (measured with cmake 3.25: the EXIT trap does not run),
# so a run killed mid-scenario leaves its "hpnt-<pid>-" netns (a host and a
# pod netns, and a scenario's extra pods, e.g. gpu.sh's p<N>-<pod> under
# memcheck) for good. Removed here when <pid> is no longer a live process; a
# live one (a parallel ctest -j run) keeps its own.
t_sweep() {
	local ns pid
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		[[ $ns =~ ^hpnt-([0-9]+)- ]] || continue
		pid=${BASH_REMATCH[1]}
		[[ $pid != "$$" && ! -e /proc/$pid ]] || continue
		if ip netns del "$ns" 2>/dev/null; then
			info "removed netns $ns, left by a run killed outright (pid $pid is gone)"
		fi
	done
}

# t_init: check we can run, make the temp dir, install the trap.
t_init() {
	local tool
	[[ $(id -u) == 0 ]] || skip "needs root (network namespaces)"
	for tool in ip jq; do
		command -v "$tool" >/dev/null || skip "$tool is not installed"
	done
	for tool in host-local static; do
		[[ -x $CNI_BIN/$tool ]] ||
			skip "$CNI_BIN/$tool is missing (Debian: containernetworking-plugins)"
	done
	[[ -n ${HPN_PLUGIN:-} ]] || fail "HPN_PLUGIN is not set (run through ctest)"
	[[ -x $HPN_PLUGIN ]] || fail "plugin binary $HPN_PLUGIN is missing"
	ip netns add "${HPNT_PREFIX}probe" 2>/dev/null ||
		skip "cannot create network namespaces here"
	ip netns del "${HPNT_PREFIX}probe"
	t_sweep

	T=$(mktemp -d /tmp/hpnt.XXXXXX)
	trap t_cleanup EXIT
	# The machine's own netns, to prove at the end that it was not touched.
	snap self >"$T/root.before"
	STATE=$T/state
	PODS=$T/pods
	mkdir -p "$STATE"
	# Plugin dir first, then the test doubles, then Debian's plugins.
	CNI_PATH_DIRS="$(dirname "$HPN_PLUGIN"):$HPNT_BIN:$CNI_BIN"
}

# t_done: prove nothing leaked, then report. Fails if any scenario failed.
t_done() {
	local left
	left=$(ns_left)
	[[ -z $left ]] || fail "netns leaked: $left"
	left=$(state_files)
	[[ -z $left ]] || fail "state files leaked: $left"
	left=$(hints_files)
	[[ -z $left ]] || fail "NCCL hints files leaked: $left"
	SCEN_NAME=
	LAST_RUN=
	snap_same self "$T/root.before" "the machine's own netns"
	if ((${#FAILED_SCENARIOS[@]} > 0)); then
		fail "$(basename "$0"): ${#FAILED_SCENARIOS[@]} of $SCEN scenarios failed:
$(printf '  - %s\n' "${FAILED_SCENARIOS[@]}")"
	fi
	echo "PASS: $(basename "$0") ($SCEN scenarios)"
}

ns_path() {
	echo "$NETNS_DIR/$1"
}

# ns_left: this test's netns that still exist.
ns_left() {
	ip netns list | awk '{print $1}' | grep "^$HPNT_PREFIX" || true
}

# scenario NAME FUNCTION [ARGS...]: run one scenario in a subshell with a
# fresh host netns ($HOST_NS), pod netns ($POD_NS) and container ID ($CID).
# A failure is recorded and the next scenario still runs; whatever a failed
# scenario left (netns, state files) is removed so it cannot spoil the next.
# Extra netns a scenario makes must be named "$HPNT_PREFIX...".
FAILED_SCENARIOS=()
scenario() {
	local name=$1 rc left
	shift
	SCEN=$((SCEN + 1))
	isolated scenario_run "$name" "$@"
	rc=$ISO_RC
	left=$(ns_left)
	if ((rc == 0)) && [[ -n $left ]]; then
		echo "FAIL: [$name] netns left behind: $left" >&2
		rc=1
	fi
	if ((rc != 0)); then
		FAILED_SCENARIOS+=("$name")
		for left in $(ns_left); do
			ip netns del "$left"
		done
		rm -rf "${STATE:?}"/* "${PODS:?}"
	fi
}

scenario_run() {
	SCEN_NAME=$1
	shift
	HOST_NS="${HPNT_PREFIX}h$SCEN"
	POD_NS="${HPNT_PREFIX}p$SCEN"
	CID="hpnt-$$-$SCEN"
	ip netns add "$HOST_NS"
	ip netns add "$POD_NS"
	ip -n "$HOST_NS" link set lo up
	: >"$T/plugin.log"
	info "scenario $SCEN: $SCEN_NAME"
	"$@"
	ip netns del "$HOST_NS"
	if [[ -e $(ns_path "$POD_NS") ]]; then
		ip netns del "$POD_NS"
	fi
}

# isolated FUNCTION [ARGS...]: run FUNCTION in a subshell with errexit on,
# so that a failure in it (fail, or any command failing) ends only the
# subshell; its exit status goes to ISO_RC. Call it as a plain statement:
# inside if, ! , || or && bash ignores errexit in everything it runs.
ISO_RC=0
isolated() {
	set +e
	(
		set -e
		"$@"
	)
	ISO_RC=$?
	set -e
}

# ---- stand-in NICs -----------------------------------------------------------

# mk_nic NS NAME PEER [MAC]: a veth pair in NS; NAME plays the NIC.
mk_nic() {
	local ns=$1 name=$2 peer=$3 mac=${4:-}
	ip -n "$ns" link add "$name" ${mac:+address "$mac"} type veth peer name "$peer"
}

mac_of() {
	ip -n "$1" -j link show dev "$2" | jq -r '.[0].address'
}

# mk_fake_pci, mk_rdma: a fake sysfs tree of PCI NICs and their RDMA devices.
# shellcheck source=fakesys.sh
source "$(dirname "${BASH_SOURCE[0]}")/fakesys.sh"

# ---- running the plugin ------------------------------------------------------

# run_plugin CMD CONFIG [NAME=VALUE | -NAME]...
# Runs the plugin in $HOST_NS with a clean CNI environment built from the
# scenario globals; NAME=VALUE adds or overrides a variable, -NAME removes
# one. Sets RC, OUT (stdout) and ERR (stderr). Never fails by itself.
run_plugin() {
	local -a RUN_IN=(ip netns exec "$HOST_NS")
	run_cni "$1" "$2" "$(ns_path "$POD_NS")" "$CNI_PATH_DIRS" "${@:3}"
}

# ---- configs -----------------------------------------------------------------

# net_conf VERSION [FILTER [jq args...]]: a network config for the plugin
# with this test's stateDir and log file, then FILTER applied. FILTER may use
# the jq args; names starting with _ are taken.
net_conf() {
	local ver=$1 filter=${2:-.}
	shift
	(($# > 0)) && shift
	jq -cn --arg _ver "$ver" --arg _name "$NET" --arg _state "$STATE" \
		--arg _log "$T/plugin.log" --arg _pods "$PODS" "$@" \
		'{cniVersion: $_ver, name: $_name, type: "hpn-rdma",
		  rdmaRequired: false, stateDir: $_state, logFile: $_log,
		  nccl: {dir: $_pods}} | '"$filter"
}

# with_prev CONFIG RESULT: CONFIG with prevResult set, as runtimes do for
# CHECK and DEL.
with_prev() {
	jq -c --argjson r "$2" '.prevResult = $r' <<<"$1"
}

# ---- observing the host and the pod ------------------------------------------

# snap NS: the facts of NS that the plugin must leave as it found them:
# per link name, kind, MTU, admin state, MAC, altnames, master; and every
# address that is not link-local. NS "self" is the netns the test runs in,
# the machine's own network.
snap() {
	local links addrs
	if [[ $1 == self ]]; then
		links=$(ip -d -j link show)
		addrs=$(ip -j addr show)
	else
		links=$(ip -n "$1" -d -j link show)
		addrs=$(ip -n "$1" -j addr show)
	fi
	jq -n --argjson l "$links" --argjson a "$addrs" '{
		links: [$l[] | {
			ifname, mtu, address,
			up: (.flags | index("UP") != null),
			altnames: ((.altnames // []) | sort),
			kind: (.linkinfo.info_kind // null),
			master: (.master // null)
		}] | sort_by(.ifname),
		addrs: [$a[] | {ifname, a: [.addr_info[] | select(.scope != "link")
			| "\(.local)/\(.prefixlen)"] | sort}
			| select(.a | length > 0)] | sort_by(.ifname)
	}'
}

# snap_save NS FILE / snap_same NS FILE WHAT: record, then compare.
snap_save() {
	snap "$1" >"$2"
}

snap_same() {
	local now
	now=$(snap "$1")
	if ! diff -u "$2" - <<<"$now" >"$T/snapdiff"; then
		fail "$3: netns $1 differs from before (- before, + now):
$(cat "$T/snapdiff")"
	fi
}

# pod_empty WHAT: the pod netns holds only lo.
pod_empty() {
	local names
	names=$(ip -n "$POD_NS" -j link show | jq -c '[.[].ifname]')
	[[ $names == '["lo"]' ]] || fail "$1: pod netns has $names, expected only lo"
}

# link_json NS IF: one link's `ip -d -j` object ("null" when absent).
link_json() {
	if has_link "$1" "$2"; then
		ip -n "$1" -d -j link show dev "$2" | jq -c '.[0]'
	else
		echo null
	fi
}

has_link() {
	ip -n "$1" link show dev "$2" >/dev/null 2>&1
}

# state_files: the files of this test's stateDir that belong to attachments
# (anything but the plugin's lock file <stateDir>/lock, which may stay, and its
# event log <stateDir>/events.log[.1], which every command appends to).
state_files() {
	find "$STATE" -type f ! -path "$STATE/lock" ! -path "$STATE/events.log" \
		! -path "$STATE/events.log.1" 2>/dev/null || true
}

state_count() {
	state_files | grep -c . || true
}

# hints_files: NCCL hints files (and temp files) under the test's hints dir.
hints_files() {
	find "$PODS" -mindepth 1 ! -type d 2>/dev/null || true
}

expect_no_state() {
	local files
	files=$(state_files)
	[[ -z $files ]] || fail "$1: state files left: $files"
	files=$(hints_files)
	[[ -z $files ]] || fail "$1: NCCL hints files left: $files"
}

# hostlocal_ips DATADIR: the addresses host-local holds for $NET.
hostlocal_ips() {
	local d=$1/$NET
	[[ -d $d ]] || return 0
	find "$d" -maxdepth 1 -type f ! -name lock ! -name 'last_reserved_ip*' \
		-printf '%f\n' | sort
}

# ipam_log_balanced LOG WHAT: the recording IPAM saw a DEL after its last ADD
# (an allocation made during a failed or deleted attachment was released).
ipam_log_balanced() {
	local last_add last_del
	[[ -f $1 ]] || return 0
	last_add=$(grep -n '^ADD ' "$1" | tail -n1 | cut -d: -f1 || true)
	last_del=$(grep -n '^DEL ' "$1" | tail -n1 | cut -d: -f1 || true)
	[[ -z $last_add ]] && return 0
	[[ -n $last_del && $last_del -gt $last_add ]] ||
		fail "$2: IPAM ADD without a later DEL: $(tr '\n' '|' <"$1")"
}

# ---- the state dir as a whole; strace fault injection (hostile input, fault sweeps)

# state_tree: every entry under $STATE, lock and directories included: type,
# mode, size of files, symlink target. To prove a run created, removed or
# changed nothing there, where state_files looks at journals only. The event
# log is left out: a refused command is recorded there too, by design.
state_tree() {
	[[ -d $STATE ]] || return 0
	find "$STATE" -mindepth 1 \( -path "$STATE/events.log" -o -path "$STATE/events.log.1" \) \
		-prune -o \( -type d -printf '%y %m %P\n' \) -o -printf '%y %m %s %P -> %l\n' | sort
}

# Fault injection with strace, in the plugin process only: without -f, since
# strace counts `when=` per traced process, and following the IPAM child would
# fail its N-th call too (a second, unrelated fault in the same run).
# fault_wrap SYSCALL N [ACTION]: RUN_WRAP that makes the N-th SYSCALL of the
# plugin process fail with EIO (or ACTION, e.g. signal=KILL), tracing it with
# openat and close (to name fds) and read (to tell where main() begins) to
# $T/fault.trace.
fault_wrap() {
	local trace=openat,close,read
	[[ ,$trace, == *,$1,* ]] || trace+=,$1
	# shellcheck disable=SC2054 # commas belong to strace's syntax
	RUN_WRAP=(strace -qq -o "$T/fault.trace" -e trace="$trace"
		-e inject="$1:${3:-error=EIO}:when=$2")
}

# fault_line: the call the last fault_wrap run failed (or was killed in);
# empty when the run made fewer than N such calls (nothing was injected).
fault_line() {
	[[ -f $T/fault.trace ]] || return 0
	awk '/INJECTED/ { print; exit }
		/^\+\+\+ killed by SIGKILL/ { print last; exit }
		{ last = $0 }' "$T/fault.trace"
}

# fault_target: what the injected call worked on: the path it names, else the
# path its fd was opened with (by an earlier openat of the same run), else
# "fd N" (stdout, a pipe, a socket).
fault_target() {
	local line fd
	line=$(fault_line)
	# Calls on an fd (write, fsync, flock, getdents64...) carry data, not a path.
	if [[ ! $line =~ ^(write|read|fsync|fdatasync|flock|getdents64|send|recv) &&
		$line =~ ^[a-z0-9_]+\([^\"]*\"([^\"]*)\" ]]; then
		echo "${BASH_REMATCH[1]}"
		return
	fi
	[[ $line =~ ^[a-z0-9_]+\(([0-9]+) ]] || return 0
	fd=${BASH_REMATCH[1]}
	FAULT_LINE=$line awk -v fd="$fd" '
		$0 == ENVIRON["FAULT_LINE"] { if (p == "") p = "fd " fd; print p; exit }
		/^openat\(/ && $NF == fd { s = $0; sub(/^[^"]*"/, "", s); sub(/".*/, "", s); p = s }
		index($0, "close(" fd ")") == 1 { p = "" }' "$T/fault.trace"
}

# syscall_counts CMD CONFIG SYSCALL [env...]: run CMD once, cleanly, counting
# the plugin's own calls of SYSCALL; sets SC_PRE to those made before main()
# read its stdin (the dynamic loader, a sanitizer runtime: not the plugin's
# steps) and SC_TOTAL to all of them. The run's effect is the caller's to undo.
SC_PRE=0
SC_TOTAL=0
syscall_counts() {
	local cmd=$1 conf=$2 sc=$3
	shift 3
	RUN_WRAP=(strace -qq -o "$T/count.trace" -e trace="read,$sc")
	run_plugin "$cmd" "$conf" "$@"
	RUN_WRAP=()
	# shellcheck disable=SC2034 # read by the callers
	read -r SC_PRE SC_TOTAL < <(awk -v sc="$sc" '
		/^read\(0,/ { main = 1 }
		index($0, sc "(") == 1 { total++; if (!main) pre++ }
		END { print pre + 0, total + 0 }' "$T/count.trace")
}
