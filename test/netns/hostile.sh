#!/bin/bash
# Hostile input: what a confused or malicious runtime, device plugin or pod
# owner could hand the plugin. Every case is refused with exit 1 and the
# documented CNI error code, as one JSON object on stdout (valid UTF-8) whose
# msg names the offending field or variable, without a sanitizer report, and
# changes nothing: host netns, pod netns, every entry of the state dir (lock
# included) and the decoy file the symlink cases aim at are exactly as before.
#
# Cases: stdin over 1 MiB, 64 MiB streamed, endless, or a 64 MiB file (the
# plugin reads at most 1 MiB + 1 byte, stays small and fast); JSON nested
# 10,000 deep; every field with every wrong JSON type; huge, negative-zero and
# wrapping numbers; non-UTF-8 bytes and NUL (\u0000) inside strings; names with
# "/", "..", newlines, spaces; CNI_CONTAINERID with "/", ".." or over 1024
# bytes (and 1000 bytes, which is valid: hashed into the journal name);
# CNI_NETNS that is a file, a directory, a FIFO, another kind of namespace, a
# dangling symlink; hostile CNI_ARGS; stateDir / logFile / sysfsRoot relative
# or with ".."; symlinks planted as the journal, the network's state dir and
# the lock; prevResult and GC lists past their limits. And that nothing the pod
# side controls (CNI_ARGS, runtimeConfig, args) can choose a path.
#
# Threat model assumed here (doc/threat-model.md states it): the network config file
# is root's, so its own paths (stateDir, logFile, sysfsRoot) are trusted and may
# go through symlinked directories; the values a pod or a device plugin can
# influence (CNI_ARGS, runtimeConfig, args, prevResult, CNI_IFNAME,
# CNI_CONTAINERID) never name a path, and inside the state dir the plugin
# follows no symlink.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

# One line per case, across scenarios (each runs in a subshell).
CASES=$T/cases
: >"$CASES"
DECOY_TEXT='root:x:0:0:root:/root:/bin/bash'

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
GC_ENV=(-CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME)

# ---- stdin size -------------------------------------------------------------

# stream_wrap PRODUCER: RUN_WRAP feeding the plugin's stdin from the shell
# command PRODUCER instead of the config, recording the producer's exit status
# in $T/producer.rc and, when /usr/bin/time is there, the plugin's peak RSS
# (KiB) in $T/rss.
stream_wrap() {
	local timer=
	[[ -x /usr/bin/time ]] && timer='/usr/bin/time -f %M -o "$0/rss"'
	RUN_WRAP=(bash -c "{ $1; } | $timer \"\$@\"
		st=(\"\${PIPESTATUS[@]}\"); echo \"\${st[0]}\" >\"\$0/producer.rc\"
		exit \"\${st[1]}\"" "$T")
	rm -f "$T/rss" "$T/producer.rc"
}

rss_kib() {
	tail -n 1 "$T/rss"
}

# A config of exactly N bytes on stdin (run_cni adds a newline): good, with a
# "pad" string member filling the rest.
config_of_size() {
	local n=$1 head
	head=$(jq -c '.pad = ""' <<<"$good")
	local fill=$((n - 1 - ${#head}))
	echo "${head%\"\"\}}\"$(head -c "$fill" /dev/zero | tr '\0' x)\"}"
}

oversized() {
	setup
	local conf t0 t1 base pos
	conf=$(config_of_size $((1 << 20)))
	accepted "stdin of exactly 1 MiB" "$conf"
	refused 7 'larger than 1048576' "stdin of 1 MiB + 1 byte" "$(config_of_size $(((1 << 20) + 1)))"
	all_done "stdin size"

	# Baseline: the same pipe with 1 KiB of unterminated JSON (code 6).
	stream_wrap 'printf "{\"cniVersion\": \"1.0.0\", \"name\": \""; head -c 1024 /dev/zero | tr "\0" a'
	run_plugin ADD ""
	RUN_WRAP=()
	expect_err 6 "1 KiB unterminated"
	[[ -f $T/rss ]] && base=$(rss_kib)

	# 64 MiB through a pipe: refused after reading past 1 MiB, so the producer
	# is killed by SIGPIPE (141) instead of writing it all; fast, and small.
	echo "refused 7: 64 MiB streamed" >>"$CASES"
	stream_wrap 'printf "{\"cniVersion\": \"1.0.0\", \"name\": \""; head -c 64M /dev/zero | tr "\0" a'
	t0=$(date +%s%N)
	run_plugin ADD ""
	t1=$(date +%s%N)
	RUN_WRAP=()
	expect_err 7 "64 MiB streamed" 'larger than 1048576'
	[[ $(cat "$T/producer.rc") == 141 ]] ||
		fail "64 MiB streamed: the producer exited $(cat "$T/producer.rc"), not 141 (SIGPIPE): the plugin read it all"
	(((t1 - t0) / 1000000 < 5000)) || fail "64 MiB streamed: took $(((t1 - t0) / 1000000)) ms"
	info "64 MiB streamed: refused in $(((t1 - t0) / 1000000)) ms"
	if [[ -n ${base:-} ]]; then
		(($(rss_kib) <= base + 4096)) ||
			fail "64 MiB streamed: peak RSS $(rss_kib) KiB, over $base KiB (1 KiB input) + 4 MiB"
		info "peak RSS: $(rss_kib) KiB for 64 MiB, $base KiB for 1 KiB"
	else
		info "no /usr/bin/time: peak RSS not measured (the SIGPIPE check stands)"
	fi
	nothing_changed "64 MiB streamed"

	# Endless stdin: it must stop by itself (SIGKILL after 20 s otherwise).
	echo "refused 7: endless stdin" >>"$CASES"
	RUN_WRAP=(timeout -s KILL 20 bash -c 'exec "$@" </dev/zero' _)
	t0=$(date +%s%N)
	run_plugin ADD ""
	t1=$(date +%s%N)
	RUN_WRAP=()
	expect_err 7 "endless stdin (/dev/zero)" 'larger than 1048576'
	info "endless stdin: refused in $(((t1 - t0) / 1000000)) ms"
	nothing_changed "endless stdin"

	# A 64 MiB regular file: the shared file offset says how much was read.
	echo "refused 7: 64 MiB file" >>"$CASES"
	head -c 64M /dev/zero | tr '\0' ' ' >"$T/big"
	exec 3<"$T/big"
	RUN_WRAP=(bash -c 'exec "$@" <&3' _)
	run_plugin ADD ""
	RUN_WRAP=()
	pos=$(awk '/^pos:/ {print $2}' "/proc/$BASHPID/fdinfo/3")
	exec 3<&-
	rm -f "$T/big"
	expect_err 7 "64 MiB file" 'larger than 1048576'
	((pos <= (1 << 20) + 1)) || fail "64 MiB file: the plugin read $pos bytes, more than 1 MiB + 1"
	info "64 MiB file: read $pos bytes"
	nothing_changed "64 MiB file"
}
timed_scenario "stdin over 1 MiB, streamed, endless (code 7)" oversized

# ---- JSON structure ---------------------------------------------------------

nesting() {
	setup
	local open close objs
	open=$(head -c 10000 /dev/zero | tr '\0' '[')
	close=$(head -c 10000 /dev/zero | tr '\0' ']')
	objs=$(printf '{"a":%.0s' $(seq 10000))
	refused 6 'not valid JSON' "10,000 [ alone" "$open"
	refused 6 'not valid JSON' "10,000 [ ] balanced as the config" "$open$close"
	refused 6 'not valid JSON' "10,000 [ ] inside args" "$(raw "$good" nic0 "\"nic0\", \"args\": $open$close")"
	refused 6 'not valid JSON' "10,000 [ unclosed inside args" "$(raw "$good" nic0 "\"nic0\", \"args\": $open")"
	refused 6 'not valid JSON' "10,000 nested objects" \
		"$(raw "$good" nic0 "\"nic0\", \"args\": ${objs}1$(printf '}%.0s' $(seq 10000))")"
	refused 6 'not valid JSON' "10,000 [ inside prevResult" \
		"$(raw "$good" nic0 "\"nic0\", \"prevResult\": {\"interfaces\": $open$close}")"
	all_done "nesting"
}
timed_scenario "JSON nested 10,000 deep (code 6)" nesting

# ---- every field, every wrong type (code 7) ---------------------------------

# cases FILTER: run refused 7 for each case FILTER (a jq program on the good
# config, with $p the prevResult below) generates as {pat, what, conf}: one jq
# run makes them all (a jq run per case would double the scenario's time).
PREV='{"cniVersion": "1.0.0", "interfaces": [{"name": "eth0"}],
	"ips": [{"address": "10.1.0.2/24", "interface": 0}], "routes": [{"dst": "0.0.0.0/0"}]}'
cases() {
	local pat what conf
	jq -c --argjson p "$PREV" "$1"' | .pat, .what, (.conf | tojson)' <<<"$good" >"$T/cases.gen"
	while read -r pat && read -r what && read -r conf; do
		refused 7 "$pat" "$what" "$conf"
	done < <(jq -r '.' "$T/cases.gen")
}

wrong_types() {
	setup
	# Every string field, then the boolean, the integer, the objects.
	cases '. as $g |
		(["cniVersion", "name", "type", "device", "hwaddr", "pciBusID", "rdmaDevice",
		  "rdmaNetns", "ifName", "stateDir", "sysfsRoot", "logFile", "logLevel"][] as $f |
		 [5, true, [], {}, ["nic0"]][] as $v |
		 {pat: $f, what: "\($f) = \($v | tojson)", conf: ($g | .[$f] = $v)}),
		([1, "true", [], {}][] as $v |
		 {pat: "rdmaRequired", what: "rdmaRequired = \($v | tojson)", conf: ($g | .rdmaRequired = $v)}),
		(["1500", true, [], {}, [1500]][] as $v |
		 {pat: "mtu", what: "mtu = \($v | tojson)", conf: ($g | .mtu = $v)}),
		(["ipam", "dns", "prevResult", "runtimeConfig", "args"][] as $f |
		 [5, "x", true, [], [{}]][] as $v |
		 {pat: $f, what: "\($f) = \($v | tojson)", conf: ($g | .[$f] = $v)}),
		([5, true, [], {}][] as $v |
		 {pat: "ipam.type", what: "ipam.type = \($v | tojson)", conf: ($g | .ipam = {type: $v})},
		 {pat: "runtimeConfig.deviceID", what: "runtimeConfig.deviceID = \($v | tojson)",
		  conf: ($g | del(.device) | .runtimeConfig.deviceID = $v)},
		 {pat: "dns.domain", what: "dns.domain = \($v | tojson)", conf: ($g | .dns.domain = $v)}),
		(["nameservers", "search", "options"][] as $f | [5, "8.8.8.8", {}, [5], [null]][] as $v |
		 {pat: "dns.\($f)", what: "dns.\($f) = \($v | tojson)", conf: ($g | .dns[$f] = $v)})'
	# prevResult members, at each level.
	cases '. as $g |
		(["interfaces", "ips", "routes"][] as $f | [5, "x", {}, [5], [[]]][] as $v |
		 {pat: "prevResult.*\($f)", what: "prevResult.\($f) = \($v | tojson)",
		  conf: ($g | .prevResult = ($p | .[$f] = $v))}),
		(["name", "mac", "sandbox", "pciID"][] as $f |
		 {pat: "prevResult.*\($f)", what: "prevResult.interfaces[0].\($f) = 5",
		  conf: ($g | .prevResult = ($p | .interfaces[0][$f] = 5))}),
		{pat: "prevResult.*mtu", what: "prevResult.interfaces[0].mtu = \"9000\"",
		 conf: ($g | .prevResult = ($p | .interfaces[0].mtu = "9000"))},
		(["address", "gateway", "interface"][] as $f |
		 {pat: "prevResult.*\($f)", what: "prevResult.ips[0].\($f) = true",
		  conf: ($g | .prevResult = ($p | .ips[0][$f] = true))}),
		(["dst", "gw", "mtu", "advmss", "priority", "table", "scope"][] as $f |
		 {pat: "prevResult.*\($f)", what: "prevResult.routes[0].\($f) = []",
		  conf: ($g | .prevResult = ($p | .routes[0][$f] = []))}),
		{pat: "prevResult.*dns", what: "prevResult.dns = 5", conf: ($g | .prevResult = ($p | .dns = 5))}'
	all_done "wrong type"
}
timed_scenario "every field with every wrong JSON type (code 7)" wrong_types

# GC's own field: cni.dev/valid-attachments.
gc_types() {
	setup
	local gc v
	CASE_CMD=GC
	gc=$(jq -c '.cniVersion = "1.1.0"' <<<"$good")
	refused 7 'valid-attachments' "GC without cni.dev/valid-attachments" "$gc" "${GC_ENV[@]}"
	for v in 5 '"x"' '{}' 'true' '[5]' '[[]]' '[{"containerID": 5, "ifname": "eth0"}]' \
		'[{"containerID": "a", "ifname": null}]' '[{"containerID": "a"}]'; do
		refused 7 'valid-attachments' "cni.dev/valid-attachments = $v" \
			"$(jq -c --argjson v "$v" '.["cni.dev/valid-attachments"] = $v' <<<"$gc")" "${GC_ENV[@]}"
	done
	all_done "GC list type"
}
timed_scenario "GC's valid-attachments with wrong types (code 7)" gc_types

# ---- numbers ----------------------------------------------------------------

numbers() {
	setup
	local v p
	# 2^32 + 68 would be a valid MTU if truncated to 32 bits.
	for v in 1e400 -1e400 -0 9223372036854775808 18446744073709551616 1e10 4294967364 \
		65536 67 1e-400 68.5 -68; do
		refused 7 mtu "mtu = $v" "$(raw "$(jq -c '.mtu = "@N@"' <<<"$good")" @N@ "$v")"
	done
	p='{"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "mtu": "@N@"}],
		"ips": [{"address": "10.1.0.2/24", "interface": "@I@"}],
		"routes": [{"dst": "0.0.0.0/0", "table": "@T@"}]}'
	p=$(jq -c --argjson p "$p" '.prevResult = $p' <<<"$good")
	for v in 1e400 -1 9223372036854775808 4294967296; do
		refused 7 'prevResult.*mtu' "prevResult.interfaces[0].mtu = $v" \
			"$(raw "$(raw "$(raw "$p" @N@ "$v")" @I@ 0)" @T@ 1)"
		refused 7 'prevResult.*interface' "prevResult.ips[0].interface = $v" \
			"$(raw "$(raw "$(raw "$p" @N@ 1500)" @I@ "$v")" @T@ 1)"
		refused 7 'prevResult.*table' "prevResult.routes[0].table = $v" \
			"$(raw "$(raw "$(raw "$p" @N@ 1500)" @I@ 0)" @T@ "$v")"
	done
	all_done "number"
}
timed_scenario "huge, negative-zero and wrapping numbers (code 7)" numbers

# ---- bytes inside strings ---------------------------------------------------

non_utf8() {
	setup
	local f
	# Raw invalid UTF-8 (a lone 0xff, a truncated sequence, an overlong "/").
	for f in device ifName name logLevel rdmaNetns; do
		refused 7 "$f" "$f with byte 0xff" "$(raw "$(jq -c --arg f "$f" '.[$f] = "@S@"' <<<"$good")" @S@ $'"nic\xff"')"
		refused 7 "$f" "$f with a truncated UTF-8 sequence" \
			"$(raw "$(jq -c --arg f "$f" '.[$f] = "@S@"' <<<"$good")" @S@ $'"h\xc3"')"
		refused 7 "$f" "$f with an overlong /" \
			"$(raw "$(jq -c --arg f "$f" '.[$f] = "@S@"' <<<"$good")" @S@ $'"a\xc0\xafb"')"
	done
	refused 7 'ipam.type' "ipam.type with byte 0xff" \
		"$(raw "$(jq -c '.ipam.type = "@S@"' <<<"$good")" @S@ $'"host\xfflocal"')"
	refused 1 cniVersion "cniVersion with byte 0xff" \
		"$(raw "$(jq -c '.cniVersion = "@S@"' <<<"$good")" @S@ $'"1.0.0\xff"')"
	refused 4 CNI_IFNAME "CNI_IFNAME with byte 0xff" "$good" CNI_IFNAME=$'eth\xff'
	refused 4 CNI_CONTAINERID "CNI_CONTAINERID with byte 0xff" "$good" CNI_CONTAINERID=$'abc\xff'
	refused 4 CNI_ARGS "CNI_ARGS key with byte 0xff" "$good" CNI_ARGS=$'K8S_POD_NAME\xff=a'
	refused 4 CNI_ARGS "CNI_ARGS value with a bad IgnoreUnknown" "$good" CNI_ARGS=$'IgnoreUnknown=\xff'
	all_done "non-UTF-8"
}
timed_scenario "non-UTF-8 bytes in strings and names" non_utf8

# A NUL inside a JSON string is a different string from its prefix: it must
# not be read as the prefix (C strings stop at the NUL). The message names the
# field, or says that a string holds a NUL.
nul_bytes() {
	setup
	local f nul='|NUL|u0000|U\+0000'
	for f in device ifName name; do
		refused 7 "$f$nul" "$f with \\u0000" "$(jq -c --arg f "$f" '.[$f] += "\u0000x"' <<<"$good")"
	done
	refused 7 "logLevel$nul" 'logLevel with \u0000' "$(jq -c '.logLevel = "info\u0000x"' <<<"$good")"
	refused 7 "stateDir$nul" 'stateDir with \u0000' \
		"$(jq -c --arg s "$STATE" '.stateDir = $s + "\u0000/../x"' <<<"$good")"
	refused 7 "logFile$nul" 'logFile with \u0000' "$(jq -c '.logFile += "\u0000.x"' <<<"$good")"
	refused 7 "sysfsRoot$nul" 'sysfsRoot with \u0000' "$(jq -c '.sysfsRoot = "/sys\u0000/x"' <<<"$good")"
	refused 7 "ipam.type$nul" 'ipam.type with \u0000' "$(jq -c '.ipam.type = "static\u0000x"' <<<"$good")"
	refused 7 "deviceID$nul" 'runtimeConfig.deviceID with \u0000' \
		"$(jq -c 'del(.device) | .runtimeConfig.deviceID = "0000:af:00.1\u0000x"' <<<"$good")"
	refused '1|7' "cniVersion$nul" 'cniVersion with \u0000' "$(jq -c '.cniVersion += "\u0000"' <<<"$good")"
	all_done "NUL"
}
timed_scenario "NUL (\\u0000) inside JSON strings (code 7)" nul_bytes

# ---- names ------------------------------------------------------------------

names() {
	setup
	local v long
	long=$(head -c 201 /dev/zero | tr '\0' a)
	for v in a/b .. . $'a\nb' 'a b' $'a\tb' -a .hidden "$long" 'a;b' "a'b"; do
		refused 7 name "name \"$v\"" "$(jq -c --arg v "$v" '.name = $v' <<<"$good")"
	done
	for v in a/b .. . $'a\nb' 'a b' a:b abcdefghijklmnop; do
		refused 7 device "device \"$v\"" "$(jq -c --arg v "$v" '.device = $v' <<<"$good")"
	done
	for v in .. . $'a\nb' 'a b' $'a\tb' a:b; do
		refused 7 ifName "ifName \"$v\"" "$(jq -c --arg v "$v" '.ifName = $v' <<<"$good")"
	done
	for v in ../../bin/sh /bin/sh .hidden 'a b' host-local/x ..; do
		refused 7 'ipam.type' "ipam.type \"$v\"" "$(jq -c --arg v "$v" '.ipam.type = $v' <<<"$good")"
	done
	for v in ../mlx5_0 mlx5_0/x mlx5_0:0 mlx5_0:256 mlx5_0:1x . .. mlx5_0:; do
		refused 7 rdmaDevice "rdmaDevice \"$v\"" \
			"$(jq -c --arg v "$v" 'del(.device) | del(.rdmaRequired) | .rdmaDevice = $v' <<<"$good")"
	done
	for v in $'a\tb' $'a\nb' "$(printf 'é%.0s' $(seq 8))"; do
		refused 4 CNI_IFNAME "CNI_IFNAME \"$v\"" "$good" CNI_IFNAME="$v"
	done
	for v in .. a/../b ../x $'a\nb' 'a;b' "$(head -c 1025 /dev/zero | tr '\0' a)"; do
		refused 4 CNI_CONTAINERID "CNI_CONTAINERID \"${v:0:40}\"" "$good" CNI_CONTAINERID="$v"
	done
	refused 4 CNI_CONTAINERID "CNI_CONTAINERID empty" "$good" CNI_CONTAINERID=
	all_done "name"
}
timed_scenario "names with /, .., newlines, spaces (codes 7 and 4)" names

# A 1000-byte container ID is valid: the journal's name is cut to 150 bytes
# plus a hash of the whole ID, so two IDs that differ only at the end get two
# journals, and each DEL undoes only its own attachment.
long_container_id() {
	setup
	local base cid_a cid_b pod_b res_a res_b j
	mk_nic "$HOST_NS" nic1 peer1
	take_snapshots
	pod_b=${HPNT_PREFIX}q$SCEN
	ip netns add "$pod_b"
	base=$(head -c 999 /dev/zero | tr '\0' c)
	cid_a=${base}a cid_b=${base}b
	echo "accepted: CNI_CONTAINERID of 1000 bytes (two of them)" >>"$CASES"
	run_plugin ADD "$good" CNI_CONTAINERID="$cid_a"
	expect_result "ADD with a 1000-byte CNI_CONTAINERID"
	res_a=$OUT
	run_plugin ADD "$(jq -c '.device = "nic1"' <<<"$good")" CNI_CONTAINERID="$cid_b" \
		CNI_NETNS="$(ns_path "$pod_b")"
	expect_result "ADD with another 1000-byte CNI_CONTAINERID, same first 999 bytes"
	res_b=$OUT
	[[ $(state_count) == 2 ]] || fail "expected 2 journals, have: $(state_files)"
	for j in $(state_files); do
		j=${j##*/}
		((${#j} <= 255)) || fail "journal name of ${#j} bytes"
	done
	run_plugin DEL "$(with_prev "$good" "$res_a")" CNI_CONTAINERID="$cid_a"
	expect_ok "DEL of the first"
	has_link "$pod_b" hpn0 || fail "DEL of the first took the second's interface"
	has_link "$HOST_NS" nic0 || fail "DEL of the first did not return nic0"
	[[ $(state_count) == 1 ]] || fail "expected 1 journal, have: $(state_files)"
	run_plugin DEL "$(with_prev "$good" "$res_b")" CNI_CONTAINERID="$cid_b"
	expect_ok "DEL of the second"
	ip netns del "$pod_b"
	nothing_changed "two 1000-byte container IDs"
}
timed_scenario "CNI_CONTAINERID of 1000 bytes (valid, hashed)" long_container_id

# ---- CNI_NETNS that is not a network namespace ------------------------------

netns_paths() {
	setup
	ln -s /nonexistent/hpnt "$T/dangling"
	mkfifo "$T/fifo"
	refused 4 CNI_NETNS "CNI_NETNS a regular file" "$good" CNI_NETNS="$T/decoy"
	refused 4 CNI_NETNS "CNI_NETNS a directory" "$good" CNI_NETNS="$T"
	refused 4 CNI_NETNS "CNI_NETNS /dev/null" "$good" CNI_NETNS=/dev/null
	refused 4 CNI_NETNS "CNI_NETNS a mount namespace" "$good" CNI_NETNS=/proc/self/ns/mnt
	refused 4 CNI_NETNS "CNI_NETNS a user namespace" "$good" CNI_NETNS=/proc/self/ns/user
	refused 4 CNI_NETNS "CNI_NETNS the plugin's own, by /proc/self" "$good" CNI_NETNS=/proc/self/ns/net
	refused 4 CNI_NETNS "CNI_NETNS relative" "$good" CNI_NETNS=run/netns/x
	refused 4 CNI_NETNS "CNI_NETNS of 5000 bytes" "$good" \
		CNI_NETNS="/$(head -c 5000 /dev/zero | tr '\0' a)"
	refused 3 'does not exist' "CNI_NETNS a dangling symlink" "$good" CNI_NETNS="$T/dangling"
	refused 3 'does not exist' "CNI_NETNS does not exist" "$good" CNI_NETNS="$T/nonexistent"
	# A FIFO with no writer: open(O_RDONLY) would block for ever (holding the
	# state lock). SIGKILL after 10 s, so a hang is a failed case, not a hung test.
	RUN_WRAP=(timeout -s KILL 10)
	refused 4 CNI_NETNS "CNI_NETNS a FIFO" "$good" CNI_NETNS="$T/fifo"
	RUN_WRAP=()
	all_done "CNI_NETNS"
}
timed_scenario "CNI_NETNS that is not a network namespace (codes 4 and 3)" netns_paths

# ---- CNI_ARGS ---------------------------------------------------------------

cni_args() {
	setup
	local many long
	many=$(for i in $(seq 1000); do printf 'k%d=v;' "$i"; done)
	long="K8S_POD_NAME=$(head -c 9000 /dev/zero | tr '\0' a)"
	refused 4 CNI_ARGS "CNI_ARGS without =" "$good" CNI_ARGS=abc
	refused 4 CNI_ARGS "CNI_ARGS with an empty key" "$good" CNI_ARGS==v
	refused 4 CNI_ARGS "CNI_ARGS with an empty key after a good pair" "$good" 'CNI_ARGS=K8S_POD_NAME=a;=v'
	refused 4 CNI_ARGS "CNI_ARGS of 1000 pairs" "$good" "CNI_ARGS=IgnoreUnknown=1;$many"
	refused 4 CNI_ARGS "CNI_ARGS of 9000 bytes" "$good" CNI_ARGS="$long"
	refused 4 CNI_ARGS "CNI_ARGS with a duplicate key" "$good" 'CNI_ARGS=K8S_POD_NAME=a;K8S_POD_NAME=b'
	refused 4 CNI_ARGS "CNI_ARGS with IgnoreUnknown twice" "$good" 'CNI_ARGS=IgnoreUnknown=1;IgnoreUnknown=1'
	refused 4 CNI_ARGS "CNI_ARGS IgnoreUnknown=maybe" "$good" 'CNI_ARGS=IgnoreUnknown=maybe;Foo=1'
	refused 4 CNI_ARGS "CNI_ARGS IgnoreUnknown empty" "$good" 'CNI_ARGS=IgnoreUnknown=;Foo=1'
	refused 4 CNI_ARGS "CNI_ARGS unknown key" "$good" 'CNI_ARGS=Foo=1'
	refused 4 CNI_ARGS "CNI_ARGS key with a newline" "$good" CNI_ARGS=$'K8S_POD_NAME\n=a'
	accepted "CNI_ARGS of only separators" "$good" 'CNI_ARGS=;;;'
	accepted "CNI_ARGS unknown keys with IgnoreUnknown=1" "$good" 'CNI_ARGS=IgnoreUnknown=1;Foo=bar;Baz='
	all_done "CNI_ARGS"
}
timed_scenario "hostile CNI_ARGS (code 4)" cni_args

# ---- the config's own paths -------------------------------------------------

conf_paths() {
	setup
	local f v
	for f in stateDir logFile sysfsRoot; do
		# shellcheck disable=SC2088 # a literal ~: the plugin must not expand it
		for v in rel ./rel ../rel "$T/../x" "$T/.." /.. "$T/a/../b" '~/x'; do
			refused 7 "$f" "$f \"$v\"" "$(jq -c --arg f "$f" --arg v "$v" '.[$f] = $v' <<<"$good")"
		done
	done
	# Not a parent reference: a name that starts with "..".
	accepted 'stateDir "$T/..x" (no .. component)' "$(jq -c --arg v "$T/..x" '.stateDir = $v' <<<"$good")"
	rm -rf "$T/..x"
	all_done "config path"
}
timed_scenario "stateDir, logFile, sysfsRoot relative or with .. (code 7)" conf_paths

# ---- symlinks where the plugin keeps its state ------------------------------

# Inside the state dir the plugin follows no symlink: a symlink planted as an
# attachment's journal, as the network's directory or as the lock makes ADD,
# DEL and GC fail with code 5 naming it, and the file it points at is
# neither read into nor written. (Only root can write the state dir, so this
# is corruption or an attack already past root; refusing is the safe answer.)
symlinks() {
	setup
	local j=$STATE/$NET/$CID.$IFNAME gc
	gc=$(jq -c '.cniVersion = "1.1.0" | .["cni.dev/valid-attachments"] = []' <<<"$good")

	ln -s "$T/decoy" "$j"
	take_snapshots
	refused 5 'open state' "ADD with the journal a symlink" "$good"
	CASE_CMD=DEL refused 5 'open state' "DEL with the journal a symlink" "$good"
	CASE_CMD=GC refused 5 'state' "GC with a journal a symlink" "$gc" "${GC_ENV[@]}"
	[[ $(readlink "$j") == "$T/decoy" ]] || fail "the planted symlink was replaced"
	rm "$j"

	rmdir "$STATE/$NET"
	mkdir "$T/elsewhere"
	ln -s "$T/elsewhere" "$STATE/$NET"
	take_snapshots
	refused 5 "$NET" "ADD with <stateDir>/<name> a symlink to a directory" "$good"
	CASE_CMD=DEL refused 5 "$NET" "DEL with <stateDir>/<name> a symlink" "$good"
	CASE_CMD=GC refused 5 "$NET" "GC with <stateDir>/<name> a symlink" "$gc" "${GC_ENV[@]}"
	[[ -z $(ls -A "$T/elsewhere") ]] || fail "the plugin wrote through the symlinked directory: $(ls -A "$T/elsewhere")"
	rm "$STATE/$NET"
	mkdir -m 0700 "$STATE/$NET"

	mv "$STATE/lock" "$T/lock.saved"
	ln -s "$T/decoy" "$STATE/lock"
	take_snapshots
	refused 5 lock "ADD with the lock a symlink" "$good"
	CASE_CMD=DEL refused 5 lock "DEL with the lock a symlink" "$good"
	rm "$STATE/lock"
	mv "$T/lock.saved" "$STATE/lock"
	all_done "state symlink"
}
timed_scenario "symlinks planted in the state dir (code 5)" symlinks

# The config's own paths are trusted (root wrote it): a stateDir that is a
# symlink to a directory is followed. logFile is opened without following a
# final symlink, nor blocking on a FIFO: the log is best effort, so ADD goes on
# without it, says so on stderr, and the file the link points at is untouched.
trusted_paths() {
	setup
	local conf
	mkdir "$T/real-state"
	ln -s "$T/real-state" "$T/state-link"
	conf=$(jq -c --arg s "$T/state-link" '.stateDir = $s' <<<"$good")
	echo "accepted: stateDir a symlink" >>"$CASES"
	run_plugin ADD "$conf"
	expect_result "ADD with stateDir a symlink to a directory"
	[[ -f $T/real-state/$NET/$CID.$IFNAME ]] || fail "the journal is not in the symlink's target"
	run_plugin DEL "$conf"
	expect_ok "DEL with stateDir a symlink"
	[[ -z $(find "$T/real-state/$NET" -type f) ]] || fail "journal left in the symlinked stateDir"

	ln -s "$T/decoy" "$T/log-link"
	mkfifo "$T/log-fifo"
	for log in "$T/log-link" "$T" "$T/log-fifo"; do
		echo "accepted: logFile $log" >>"$CASES"
		conf=$(jq -c --arg l "$log" '.logFile = $l' <<<"$good")
		RUN_WRAP=(timeout -s KILL 10)
		run_plugin ADD "$conf"
		RUN_WRAP=()
		expect_result "ADD with logFile $log"
		grep -q 'cannot open logFile' "$T/err" || fail "ADD with logFile $log: no warning on stderr"
		run_plugin DEL "$conf"
		expect_ok "DEL with logFile $log"
	done
	nothing_changed "trusted paths"
}
timed_scenario "stateDir a symlink (followed), logFile a symlink or FIFO (not used)" trusted_paths

# Nothing a pod or device plugin controls picks a path: stateDir, logFile or
# sysfsRoot given in runtimeConfig, args or CNI_ARGS are ignored.
pod_paths() {
	setup
	local conf e=$T/evil
	conf=$(jq -c --arg e "$e" '
		.runtimeConfig = {stateDir: ($e + "-rc"), logFile: ($e + "-rc.log"), sysfsRoot: ($e + "-sys")} |
		.args = {cni: {stateDir: ($e + "-args"), logFile: ($e + "-args.log")},
			 "io.kubernetes.cri": {stateDir: ($e + "-cri")}}' <<<"$good")
	echo "accepted: pod-controlled paths ignored" >>"$CASES"
	run_plugin ADD "$conf" "CNI_ARGS=IgnoreUnknown=1;stateDir=$e-env;logFile=$e-env.log;K8S_POD_NAME=../../../etc/passwd;K8S_POD_NAMESPACE=/etc"
	expect_result "ADD with paths in runtimeConfig, args and CNI_ARGS"
	[[ -f $STATE/$NET/$CID.$IFNAME ]] || fail "the journal is not in the config's stateDir"
	[[ -z $(compgen -G "$e*" || true) ]] || fail "a pod-controlled value chose a path: $(compgen -G "$e*" || true)"
	run_plugin DEL "$conf" "CNI_ARGS=IgnoreUnknown=1;stateDir=$e-env"
	expect_ok "DEL"
	[[ -z $(compgen -G "$e*" || true) ]] || fail "a pod-controlled value chose a path: $(compgen -G "$e*" || true)"
	nothing_changed "pod-controlled paths"
}
timed_scenario "values from the pod side never pick a path" pod_paths

# ---- sizes of prevResult and of GC's list -----------------------------------

sizes() {
	setup
	local gc
	refused 7 'interfaces' "prevResult with 10,000 interfaces" \
		"$(jq -c '.prevResult = {cniVersion: "1.0.0", interfaces: [range(10000) | {name: "e\(.)"}]}' <<<"$good")"
	refused 7 'interfaces' "prevResult with 65 interfaces" \
		"$(jq -c '.prevResult = {cniVersion: "1.0.0", interfaces: [range(65) | {name: "e\(.)"}]}' <<<"$good")"
	# 64 is the limit: with this plugin's own interface the result would hold 65.
	refused 7 'interfaces' "prevResult with 64 interfaces (65 with ours)" \
		"$(jq -c '.prevResult = {cniVersion: "1.0.0", interfaces: [range(64) | {name: "e\(.)"}]}' <<<"$good")"
	refused 7 'ips' "prevResult with 10,000 ips" \
		"$(jq -c '.prevResult = {cniVersion: "1.0.0", ips: [range(10000) | {address: "10.1.\(. / 256 | floor).\(. % 256)/16"}]}' <<<"$good")"
	refused 7 'routes' "prevResult with 10,000 routes" \
		"$(jq -c '.prevResult = {cniVersion: "1.0.0", routes: [range(10000) | {dst: "10.\(. / 256 | floor).\(. % 256).0/24"}]}' <<<"$good")"
	refused 7 'nameservers' "prevResult with 10,000 nameservers" \
		"$(jq -c '.prevResult = {cniVersion: "1.0.0", dns: {nameservers: [range(10000) | "10.0.0.1"]}}' <<<"$good")"
	refused 7 'nameservers' "dns with 10,000 nameservers" \
		"$(jq -c '.dns = {nameservers: [range(10000) | "10.0.0.1"]}' <<<"$good")"
	# 64 IPs chained, and IPAM adds one: the result would hold 65 (known only
	# after IPAM ADD, so this one must be rolled back, IPAM released).
	refused 7 'ips' "prevResult with 64 ips, IPAM adds one" \
		"$(jq -c '.ipam = {type: "static", addresses: [{address: "10.2.0.1/24"}]} |
			.prevResult = {cniVersion: "1.0.0", interfaces: [{name: "eth0"}],
				ips: [range(64) | {address: "10.1.0.\(.)/24", interface: 0}]}' <<<"$good")"

	CASE_CMD=GC
	gc=$(jq -c '.cniVersion = "1.1.0"' <<<"$good")
	# 100,000 valid entries do not fit in 1 MiB (that alone is code 7); the
	# shortest JSON values do, to reach the list's own limit of 65536.
	refused 7 '65536' "GC list of 100,000 entries" \
		"$(jq -c '.["cni.dev/valid-attachments"] = [range(100000) | 0]' <<<"$gc")" "${GC_ENV[@]}"
	refused 7 'larger than 1048576' "GC list of 100,000 full entries (over 1 MiB)" \
		"$(jq -c '.["cni.dev/valid-attachments"] = [range(100000) | {containerID: "c\(.)", ifname: "eth0"}]' <<<"$gc")" \
		"${GC_ENV[@]}"
	all_done "size"

	# 20,000 entries (near what fits), the live attachment last: GC keeps it.
	echo "accepted: GC list of 20,000 entries" >>"$CASES"
	run_plugin ADD "$gc"
	expect_result "ADD before the big GC"
	run_plugin GC "$(jq -c --arg c "$CID" '.["cni.dev/valid-attachments"] =
		[range(19999) | {containerID: "c\(.)", ifname: "eth0"}] + [{containerID: $c, ifname: "eth0"}]' <<<"$gc")" \
		"${GC_ENV[@]}"
	expect_ok "GC with 20,000 entries"
	has_link "$POD_NS" hpn0 || fail "GC removed an attachment its list keeps"
	[[ $(state_count) == 1 ]] || fail "GC removed the journal of a listed attachment"
	run_plugin DEL "$gc"
	expect_ok "DEL after the big GC"
	nothing_changed "big GC"
}
timed_scenario "prevResult and GC lists past their limits (code 7)" sizes

info "hostile cases: $(grep -c . "$CASES") ($(grep -c '^refused' "$CASES") refused, $(grep -c '^accepted' "$CASES") accepted)"
t_done
