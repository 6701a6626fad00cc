#!/bin/bash
# Hostile input, types: every field with every wrong JSON type, GC's
# valid-attachments with wrong types, and huge, negative-zero and wrapping
# numbers.
# The contract of every case (exit 1, one CNI error object naming the field,
# nothing changed) and its helpers are in hostile-lib.sh.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=hostile-lib.sh
source "$(dirname "$0")/hostile-lib.sh"
hostile_init

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
		(["rdmaRequired", "erdmaAnyMtu"][] as $f | [1, "true", [], {}][] as $v |
		 {pat: $f, what: "\($f) = \($v | tojson)", conf: ($g | .[$f] = $v)}),
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

hostile_done
