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
# LAST_RUN, RC, OUT (stdout) and ERR (stderr) in $T. Never fails by itself.
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
	set +e
	"${RUN_IN[@]}" env -i "${envv[@]}" "${RUN_WRAP[@]}" "$HPN_PLUGIN" <<<"$conf" \
		>"$T/out" 2>"$T/err"
	RC=$?
	set -e
	OUT=$(<"$T/out")
	ERR=$(<"$T/err")
}
