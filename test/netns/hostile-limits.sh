#!/bin/bash
# Hostile input, limits: stdin over 1 MiB, 64 MiB streamed, endless, or a
# 64 MiB file (the plugin reads at most 1 MiB + 1 byte, stays small and fast);
# JSON nested 10,000 deep; prevResult and GC lists past their limits.
# The contract of every case (exit 1, one CNI error object naming the field,
# nothing changed) and its helpers are in hostile-lib.sh.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=hostile-lib.sh
source "$(dirname "$0")/hostile-lib.sh"
hostile_init

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

hostile_done
