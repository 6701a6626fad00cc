# shellcheck shell=bash disable=SC2016,SC2030,SC2031
# Shared helpers of the hostile-input scripts (hostile-*.sh): what a confused
# or malicious runtime, device plugin or pod owner could hand the plugin. Every
# case is refused with exit 1 and the documented CNI error code, as one JSON
# object on stdout (valid UTF-8) whose msg names the offending field or
# variable, without a sanitizer report, and changes nothing: host netns, pod
# netns, every entry of the state dir (lock included) and the decoy file the
# symlink cases aim at are exactly as before.
#
# Threat model assumed here (doc/threat-model.md states it): the network config file
# is root's, so its own paths (stateDir, logFile, sysfsRoot) are trusted and may
# go through symlinked directories; the values a pod or a device plugin can
# influence (CNI_ARGS, runtimeConfig, args, prevResult, CNI_IFNAME,
# CNI_CONTAINERID) never name a path, and inside the state dir the plugin
# follows no symlink.
#
# Source it, call hostile_init, run timed_scenario for each scenario, end with
# hostile_done.

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DECOY_TEXT='root:x:0:0:root:/root:/bin/bash'
CASES=

# hostile_init: t_init, then the case list: one line per case, across
# scenarios (each runs in a subshell).
hostile_init() {
	t_init
	CASES=$T/cases
	: >"$CASES"
}

# hostile_done: how many cases ran, then t_done.
hostile_done() {
	info "hostile cases: $(grep -c . "$CASES") ($(grep -c '^refused' "$CASES") refused, $(grep -c '^accepted' "$CASES") accepted)"
	t_done
}

# setup: nic0 (with an altname) in the host, a working config, a good ADD/DEL
# (so the state dir and its lock exist and every refusal below is due to the
# one thing changed), a decoy file for the symlink cases, then the snapshots.
setup() {
	mk_nic "$HOST_NS" nic0 peer0
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0
	good=$(net_conf 1.0.0 '.device = "nic0" | .ifName = "hpn0"')
	run_plugin ADD "$good"
	expect_result "ADD of the good config"
	run_plugin DEL "$good"
	expect_ok "DEL of the good config"
	echo "$DECOY_TEXT" >"$T/decoy"
	take_snapshots
	FAILED=0
	CASE_CMD=ADD
}

take_snapshots() {
	snap_save "$HOST_NS" "$T/host.before"
	snap_save "$POD_NS" "$T/pod.before"
	raw_snap >"$T/raw.before"
	state_tree >"$T/state.before"
}

# raw_snap: ip's own view of the host and the pod, verbatim. Equal to the one
# taken before, nothing can have changed; otherwise snap_same decides (it
# ignores what the plugin may not control, and shows a readable diff). Saves
# the jq runs of snap for each of the hundreds of cases.
raw_snap() {
	ip -n "$HOST_NS" -d link show
	ip -n "$HOST_NS" addr show
	ip -n "$POD_NS" -d link show
	ip -n "$POD_NS" addr show
}

# nothing_changed WHAT: host, pod, state dir and decoy as in the snapshots.
nothing_changed() {
	if ! raw_snap | cmp -s "$T/raw.before" -; then
		snap_same "$HOST_NS" "$T/host.before" "host after: $1"
		snap_same "$POD_NS" "$T/pod.before" "pod after: $1"
	fi
	state_tree | diff -u "$T/state.before" - >"$T/statediff" ||
		fail "$1: the state dir changed (- before, + now):
$(cat "$T/statediff")"
	[[ $(cat "$T/decoy") == "$DECOY_TEXT" ]] || fail "$1: the decoy file was modified"
}

# clean_output WHAT: stdout is valid UTF-8 (RFC 8259 JSON text), stderr has
# no sanitizer report (ASan's exit code is 1, like a refusal's).
clean_output() {
	iconv -f UTF-8 -t UTF-8 "$T/out" >/dev/null 2>&1 ||
		fail "$1: stdout is not valid UTF-8: $(od -c "$T/out" | head -n 5)"
	if grep -Eq 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/err"; then
		fail "$1: sanitizer report on stderr"
	fi
}

# refused CODES PATTERN WHAT CONFIG [env changes...]: $CASE_CMD (ADD unless a
# scenario says otherwise) fails with exit 1, one CNI error object whose code
# is one of CODES and whose msg or details match PATTERN (the field's name),
# and nothing changed. A failed case is reported and the next still runs; an
# ADD that wrongly succeeded is undone with DEL, and the snapshots retaken, so
# it cannot spoil the cases after it.
refused() {
	local codes=$1 pat=$2 what=$3 conf=$4
	shift 4
	echo "refused $codes: ${what//$'\n'/\\n}" >>"$CASES"
	isolated refused_case "$codes" "$pat" "$what" "$conf" "$@"
	((ISO_RC == 0)) || case_failed "$what" "$conf" "$@"
}

refused_case() {
	local codes=$1 pat=$2 what=$3 conf=$4
	shift 4
	run_plugin "$CASE_CMD" "$conf" "$@"
	[[ $RC == 1 ]] || fail "$what: expected exit 1 with code $codes, got exit $RC"
	# expect_err's test, on exactly one JSON value, in one jq run.
	jq -se --arg c "$codes" --arg p "$pat" 'length == 1 and (.[0] | type == "object" and
		(.code | type == "number") and (.msg | type == "string" and length > 0) and
		(.cniVersion | type == "string") and
		((.code | tostring) as $got | "|" + $c + "|" | contains("|" + $got + "|")) and
		(.msg + " " + (.details // "") | test($p)))' "$T/out" >/dev/null 2>&1 ||
		fail "$what: expected one CNI error object with code $codes matching /$pat/"
	clean_output "$what"
	nothing_changed "$what"
}

# accepted WHAT CONFIG [env changes...]: ADD succeeds with a result and DEL
# undoes it; host, pod and state dir are as before.
accepted() {
	local what=$1 conf=$2
	shift 2
	echo "accepted: ${what//$'\n'/\\n}" >>"$CASES"
	isolated accepted_case "$what" "$conf" "$@"
	((ISO_RC == 0)) || case_failed "$what" "$conf" "$@"
}

accepted_case() {
	local what=$1 conf=$2
	shift 2
	run_plugin ADD "$conf" "$@"
	expect_result "ADD: $what"
	clean_output "$what"
	run_plugin DEL "$conf" "$@"
	expect_ok "DEL: $what"
	nothing_changed "$what"
}

case_failed() {
	local what=$1 conf=$2
	shift 2
	FAILED=$((FAILED + 1))
	# A failed ADD may still have attached (that can be the finding).
	if [[ $CASE_CMD == ADD ]]; then
		run_plugin DEL "$conf" "$@"
		run_plugin DEL "$good"
	fi
	snap_same "$HOST_NS" "$T/host.before" "host after undoing: $what"
	echo "$DECOY_TEXT" >"$T/decoy"
	take_snapshots
}

# all_done GROUP: end of a group of cases.
all_done() {
	((FAILED == 0)) || LAST_RUN='' fail "$FAILED $1 cases failed (see FAIL lines above)"
}

# raw CONF PLACEHOLDER TEXT: CONF with the JSON string "PLACEHOLDER" replaced
# by TEXT verbatim (numbers jq would round, bytes jq would not emit).
raw() {
	local conf=$1
	echo "${conf/\"$2\"/$3}"
}

# timed_scenario NAME FUNCTION: scenario, then how long it took.
timed_scenario() {
	local t0=$SECONDS
	scenario "$@"
	info "($((SECONDS - t0)) s)"
}

# gc_env: the environment of GC (no per-container variables).
# shellcheck disable=SC2034 # the hostile-*.sh scripts use it
GC_ENV=(-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME)
