# shellcheck shell=bash
# Reporting and assertions shared by the netns and vm tiers (sourced by their
# lib.sh). A failed assertion prints what failed with the last plugin run for
# context and exits 1; skip exits 77, which ctest shows as skipped.
# The callers' run_plugin sets LAST_RUN, RC, OUT and ERR; T is the scratch dir.

skip() {
	echo "SKIP: $*"
	exit 77
}

# fail MESSAGE: print what failed, with the last plugin run for context.
fail() {
	{
		echo "FAIL: ${SCEN_NAME:+[$SCEN_NAME] }$*"
		if [[ -n ${LAST_RUN:-} ]]; then
			echo "  last plugin run: $LAST_RUN"
			echo "  exit status: $RC"
			echo "  stdout: $OUT"
			echo "  stderr: $ERR"
			if [[ -n ${T:-} && -s $T/plugin.log ]]; then
				echo "  plugin log (tail):"
				tail -n 20 "$T/plugin.log" | sed 's/^/    /'
			fi
		fi
	} >&2
	exit 1
}

info() {
	echo "# $*"
}

# expect_ok WHAT: the last run succeeded.
expect_ok() {
	[[ $RC == 0 ]] || fail "$1: expected success, got exit $RC"
}

# expect_result WHAT: the last run succeeded and printed exactly one JSON
# object (a CNI result) and nothing else.
expect_result() {
	expect_ok "$1"
	jq -se 'length == 1 and (.[0] | type == "object")' <<<"$OUT" >/dev/null 2>&1 ||
		fail "$1: stdout is not one JSON object"
}

# expect_err CODES WHAT [PATTERN]: the last run failed with exit 1 and a CNI
# error object on stdout whose code is one of CODES ("105" or "105|11"; "any"),
# and whose msg or details match the regex PATTERN. One jq: it is slow in the VM.
expect_err() {
	local codes=$1 what=$2 pat=${3:-}
	[[ $RC == 1 ]] || fail "$what: expected exit 1 with code $codes, got exit $RC"
	jq -e --arg c "$codes" --arg p "$pat" 'type == "object" and
		(.code | type == "number") and (.msg | type == "string" and length > 0) and
		(.cniVersion | type == "string") and
		((.code | tostring) as $got |
			$c == "any" or ("|" + $c + "|" | contains("|" + $got + "|"))) and
		(.msg + " " + (.details // "") | test($p))' <<<"$OUT" >/dev/null 2>&1 ||
		fail "$what: expected a CNI error with code $codes${pat:+ matching /$pat/}"
}

# jq_ok FILTER WHAT [JSON] [jq args...]: FILTER is true on JSON (default $OUT).
jq_ok() {
	local filter=$1 what=$2 json=${3-$OUT}
	shift 2
	(($# > 0)) && shift
	jq -e "$@" "$filter" <<<"$json" >/dev/null 2>&1 ||
		fail "$what: jq '$filter' is not true on: $json"
}

# run_cni CMD CONFIG NETNS CNI_PATH [NAME=VALUE | -NAME]...: the core of each
# tier's run_plugin. Runs "${RUN_IN[@]}" env -i <env> "${RUN_WRAP[@]}" $HPN_PLUGIN
# with CONFIG on stdin, where <env> is CNI_COMMAND=CMD, CNI_CONTAINERID=$CID,
# CNI_NETNS=NETNS, CNI_IFNAME=$IFNAME, CNI_PATH, then NAME=VALUE added or
# overridden and -NAME removed, plus PATH and the sanitizer settings. Sets
# LAST_RUN, RC, OUT (stdout) and ERR (stderr) in $T. Never fails by itself,
# except when the plugin left an fd open at exit that it did not have at start
# (HPN_FD_CHECK, every run but RUN_WRAP's), and under HPN_VALGRIND=1 (below),
# where a valgrind finding fails.
#
# HPN_VALGRIND=1 (the memcheck tests; the stress test's sampled runs): when
# RUN_WRAP is empty, the plugin runs under valgrind's memcheck with fd
# tracking, every process (the plugin and its forks) logging to its own file.
# Runs wrapped by RUN_WRAP are left alone: strace would trace valgrind, not
# the plugin, and the kill -9 and fault-injection tests count the plugin's own
# syscalls. After the run,
# a memory error or leak (any process), or an fd the plugin opened and left
# open at exit, is a FAIL line with valgrind's report: not exit 99 for
# expect_ok / expect_err to misread as the plugin's own status. VG_FDS is left
# with the plugin's "FILE DESCRIPTORS: N open (3 std) at exit." line.
RUN_IN=()
RUN_WRAP=()
run_cni() {
	local cmd=$1 conf=$2 kv
	local -A env=([CNI_COMMAND]=$cmd [CNI_CONTAINERID]=$CID [CNI_NETNS]=$3
		[CNI_IFNAME]=$IFNAME [CNI_PATH]=$4)
	shift 4
	for kv in "$@"; do
		if [[ $kv == -* ]]; then
			unset "env[${kv#-}]"
		else
			env[${kv%%=*}]=${kv#*=}
		fi
	done
	local -a envv=("PATH=$PATH")
	# Sanitizer settings survive env -i. LeakSanitizer cannot run under ptrace
	# (strace), so leak checking is off for wrapped runs only.
	local asan=${ASAN_OPTIONS:-}
	((${#RUN_WRAP[@]})) && asan=${asan:+$asan:}detect_leaks=0
	[[ -n $asan ]] && envv+=("ASAN_OPTIONS=$asan")
	[[ -n ${UBSAN_OPTIONS:-} ]] && envv+=("UBSAN_OPTIONS=$UBSAN_OPTIONS")
	for kv in "${!env[@]}"; do
		envv+=("$kv=${env[$kv]}")
	done
	LAST_RUN="$cmd ${RUN_IN[*]:+in ${RUN_IN[*]}: }$(printf '%s ' "$@")<<< $conf"
	local -a wrap=("${RUN_WRAP[@]}")
	local vgdir= fdcheck=
	# The plugin's fds at exit (hpn_fd_check_arm, lib/util.h): not for wrapped
	# runs, whose injected faults skip the very close() they fail.
	if ((${#RUN_WRAP[@]} == 0)); then
		fdcheck=$T/fd-check
		rm -f "$fdcheck"
		envv+=("HPN_FD_CHECK=$fdcheck")
	fi
	if [[ ${HPN_VALGRIND:-0} == 1 ]] && ((${#RUN_WRAP[@]} == 0)); then
		valgrind_usable
		vgdir=$(mktemp -d "$T/valgrind.XXXXXX")
		wrap=("${VALGRIND_CMD[@]}" "--log-file=$vgdir/%p")
		LAST_RUN="(valgrind) $LAST_RUN"
	fi
	set +e
	"${RUN_IN[@]}" env -i "${envv[@]}" "${wrap[@]}" "$HPN_PLUGIN" <<<"$conf" \
		>"$T/out" 2>"$T/err"
	RC=$?
	set -e
	OUT=$(<"$T/out")
	ERR=$(<"$T/err")
	if [[ -n $vgdir ]]; then
		valgrind_verdict "$vgdir"
		rm -rf "$vgdir"
	fi
	if [[ -s $fdcheck ]]; then
		fail "the plugin left fds open at exit ($LAST_RUN): $(<"$fdcheck")"
	fi
	return 0
}

# The memcheck command of HPN_VALGRIND=1: exit 99 on any error (so a finding
# cannot pass for the plugin's own exit 0 or 1), leaks counted as errors when
# definitely or indirectly lost, fds tracked. Not --quiet: that would also
# drop the fd summary, and the output goes to per-process log files anyway,
# so the plugin's stderr stays its own.
# Only the leak kinds that count are shown; test/valgrind.supp holds
# valgrind's own false positives.
VALGRIND_CMD=(valgrind --tool=memcheck --error-exitcode=99 --leak-check=full
	--errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect
	--track-fds=yes --num-callers=30
	"--suppressions=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/valgrind.supp")

# is_asan_build BINARY: BINARY is built with AddressSanitizer (valgrind cannot
# run it: both want the address space layout to themselves).
is_asan_build() {
	# No grep -q: its early exit would SIGPIPE nm, and pipefail would call that "no".
	nm -D "$1" 2>/dev/null | grep -w __asan_init >/dev/null
}

# valgrind_usable: fails, saying why, when HPN_VALGRIND=1 cannot be honoured.
valgrind_usable() {
	command -v valgrind >/dev/null ||
		fail "HPN_VALGRIND=1 but valgrind is not installed (Debian: valgrind)"
	! is_asan_build "$HPN_PLUGIN" ||
		fail "HPN_VALGRIND=1 but $HPN_PLUGIN is an ASan build: use the release build"
}

# valgrind_verdict DIR: read the per-process logs valgrind wrote in DIR for
# one plugin run; fail with the report on a finding, set VG_FDS.
# The plugin's own process is the log whose parent is none of the others; the
# others are its forks: IPAM children that exec'd (no summary: valgrind does
# not follow exec) and the RDMA proof child, whose errors count but whose
# open fds at _exit are the parent's, inherited by design.
VG_FDS=
valgrind_verdict() {
	local dir=$1 f main= ppid bad= leaked
	local -A pids=()
	for f in "$dir"/*; do
		[[ -f $f ]] && pids[${f##*/}]=1
	done
	((${#pids[@]})) || fail "valgrind wrote no log (did it run?)"
	for f in "$dir"/*; do
		ppid=$(sed -n 's/^==[0-9]*== Parent PID: \([0-9]*\)$/\1/p' "$f")
		[[ -n ${pids[$ppid]:-} ]] || main=$f
	done
	[[ -n $main ]] || fail "valgrind: cannot tell the plugin's log among: ${!pids[*]}"
	for f in "$dir"/*; do
		grep -q '== ERROR SUMMARY: [1-9]' "$f" || continue
		bad+="memcheck errors in pid ${f##*/}$([[ $f == "$main" ]] || echo ", a fork of the plugin"):"$'\n'
		# The report without its header and its fd list.
		bad+=$(sed -n '/== Parent PID:/,$p' "$f" | tail -n +2 |
			sed '/FILE DESCRIPTORS:/,/HEAP SUMMARY:/{/HEAP SUMMARY:/!d}')$'\n'
	done
	VG_FDS=$(sed -n 's/^==[0-9]*== \(FILE DESCRIPTORS: .*\)$/\1/p' "$main")
	# Each "Open ... <fd>:" record is followed by "<inherited from parent>"
	# (fds the test harness or valgrind itself had open: not the plugin's) or
	# by the stack that opened it: a leak. 0, 1 and 2 are the plugin's stdio.
	leaked=$(awk '
		/== Open / {
			rec = $0; fd = $0; sub(/:.*/, "", fd); sub(/.* /, "", fd)
			if ((getline nxt) <= 0) nxt = ""
			if (nxt !~ /<inherited from parent>/ && fd + 0 > 2) {
				print rec; print nxt
				while ((getline l) > 0 && l !~ /^==[0-9]+== *$/) print l
			}
		}' "$main")
	[[ -z $leaked ]] ||
		bad+="fds opened by the plugin and still open at exit ($VG_FDS):"$'\n'$leaked$'\n'
	if [[ -z $bad ]] && ((RC == 99)); then
		bad="exit 99 (valgrind's error exit code) but no finding in its logs:"$'\n'
		bad+=$(cat "$dir"/*)
	fi
	[[ -z $bad ]] || fail "valgrind: $bad"
}
