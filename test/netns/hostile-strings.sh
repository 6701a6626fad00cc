#!/bin/bash
# Hostile input, strings: non-UTF-8 bytes and NUL (\u0000) inside strings;
# names with "/", "..", newlines, spaces; CNI_IFNAME and CNI_CONTAINERID with
# "/", "..", bad bytes or over 1024 bytes.
# The contract of every case (exit 1, one CNI error object naming the field,
# nothing changed) and its helpers are in hostile-lib.sh.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=hostile-lib.sh
source "$(dirname "$0")/hostile-lib.sh"
hostile_init

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

hostile_done
