#!/bin/bash
# Bad input is refused with the right CNI error code, and touches nothing.
#
# Proves that invalid environment (code 4), unparsable JSON (6), invalid
# config (7), an unsupported cniVersion (1) and a device that does not exist
# (100) each give exit 1 with a well-formed error object on stdout, and that
# none of them changes the host netns, the pod netns or the state dir. Also
# that VERSION lists the versions the plugin speaks.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

# setup: nic0 (with an altname) in the host, a device only the pod has, and
# a config that works; every case below changes one thing in it.
setup() {
	mk_nic "$HOST_NS" nic0 peer0
	ip -n "$HOST_NS" link property add dev nic0 altname hpnt-alt0
	ip -n "$POD_NS" link add podonly type veth peer name podonly-peer
	snap_save "$HOST_NS" "$T/host.before"
	snap_save "$POD_NS" "$T/pod.before"
	good=$(net_conf 1.0.0 '.device = "nic0"')
	FAILED=0
}

# refused CODES WHAT CONFIG [env changes...]: ADD is refused with one of
# CODES and nothing changed. Each case runs in a subshell so that one
# failure is reported and the others still run; an ADD that wrongly
# succeeded is undone with DEL so it does not spoil the cases after it.
refused() {
	local codes=$1 what=$2 conf=$3
	shift 3
	echo 1 >"$T/refused.rc"
	isolated refused_case "$codes" "$what" "$conf" "$@"
	if ((ISO_RC != 0)); then
		FAILED=$((FAILED + 1))
		if [[ $(cat "$T/refused.rc") == 0 ]]; then
			run_plugin DEL "$conf" "$@"
			run_plugin DEL "$conf"
		fi
		snap_same "$HOST_NS" "$T/host.before" "host after undoing: $what"
		snap_same "$POD_NS" "$T/pod.before" "pod after undoing: $what"
		expect_no_state "after undoing: $what"
	fi
}

refused_case() {
	local codes=$1 what=$2 conf=$3
	shift 3
	run_plugin ADD "$conf" "$@"
	echo "$RC" >"$T/refused.rc"
	expect_err "$codes" "$what"
	snap_same "$HOST_NS" "$T/host.before" "host after: $what"
	snap_same "$POD_NS" "$T/pod.before" "pod after: $what"
	expect_no_state "after: $what"
}

# all_refused GROUP: end of a group of cases.
all_refused() {
	((FAILED == 0)) || LAST_RUN='' fail "$FAILED $1 cases failed (see FAIL lines above)"
}

# The config is good: a plain ADD/DEL works, so every refusal is due to the
# one thing changed.
baseline() {
	setup
	run_plugin ADD "$good"
	expect_result "ADD of the good config"
	run_plugin DEL "$(with_prev "$good" "$OUT")"
	expect_ok "DEL of the good config"
	snap_same "$HOST_NS" "$T/host.before" "host after good ADD/DEL"
}
scenario "baseline: the good config works" baseline

# Environment: code 4.
bad_env() {
	setup
	refused 4 "CNI_COMMAND missing" "$good" -CNI_COMMAND
	refused 4 "CNI_COMMAND unknown" "$good" CNI_COMMAND=FROB
	refused 4 "CNI_CONTAINERID missing" "$good" -CNI_CONTAINERID
	refused 4 "CNI_CONTAINERID with a slash" "$good" CNI_CONTAINERID=abc/def
	refused 4 "CNI_CONTAINERID with a space" "$good" "CNI_CONTAINERID=abc def"
	refused 4 "CNI_CONTAINERID starting with a dot" "$good" CNI_CONTAINERID=.abc
	refused 4 "CNI_IFNAME missing" "$good" -CNI_IFNAME
	refused 4 "CNI_IFNAME of 16 bytes" "$good" CNI_IFNAME=abcdefghijklmnop
	refused 4 "CNI_IFNAME .." "$good" CNI_IFNAME=..
	refused 4 "CNI_IFNAME ." "$good" CNI_IFNAME=.
	refused 4 "CNI_IFNAME with a slash" "$good" CNI_IFNAME=a/b
	refused 4 "CNI_IFNAME with a colon" "$good" CNI_IFNAME=a:b
	refused 4 "CNI_IFNAME with a space" "$good" "CNI_IFNAME=a b"
	refused 4 "CNI_NETNS missing on ADD" "$good" -CNI_NETNS
	refused 4 "CNI_NETNS is the host's own netns" "$good" "CNI_NETNS=$(ns_path "$HOST_NS")"
	all_refused "environment"
}
scenario "invalid environment: code 4" bad_env

# JSON that does not parse: code 6.
bad_json() {
	setup
	refused 6 "empty stdin" ""
	refused 6 "truncated JSON" '{"cniVersion": "1.0.0", "name": "x"'
	refused 6 "not JSON" 'cniVersion=1.0.0'
	refused 6 "trailing garbage" "$good }"
	all_refused "JSON"
}
scenario "unparsable JSON: code 6" bad_json

# Config that parses but is wrong: code 7.
bad_conf() {
	setup
	refused 7 "name missing" "$(jq -c 'del(.name)' <<<"$good")"
	refused 7 "name is a number" "$(jq -c '.name = 5' <<<"$good")"
	refused 7 "name with a path" "$(jq -c '.name = "../../etc"' <<<"$good")"
	refused "6|7" "config is an array" '[]'
	refused 7 "device is a number" "$(jq -c '.device = 5' <<<"$good")"
	refused 7 "device is empty" "$(jq -c '.device = ""' <<<"$good")"
	refused 7 "mtu is a string" "$(jq -c '.mtu = "9000"' <<<"$good")"
	refused 7 "mtu is negative" "$(jq -c '.mtu = -1' <<<"$good")"
	refused 7 "mtu is fractional" "$(jq -c '.mtu = 1500.5' <<<"$good")"
	refused 7 "ifName of 16 bytes" "$(jq -c '.ifName = "abcdefghijklmnop"' <<<"$good")"
	refused 7 "ifName with a slash" "$(jq -c '.ifName = "a/b"' <<<"$good")"
	refused 7 "hwaddr malformed" \
		"$(jq -c 'del(.device) | .hwaddr = "02:00:zz:00:00:01"' <<<"$good")"
	refused 7 "pciBusID malformed" \
		"$(jq -c 'del(.device) | .pciBusID = "../../../etc"' <<<"$good")"
	refused 7 "deviceID malformed" \
		"$(jq -c 'del(.device) | .runtimeConfig.deviceID = "../x"' <<<"$good")"
	refused 7 "ipam is a string" "$(jq -c '.ipam = "host-local"' <<<"$good")"
	# "ipam": {} means no IPAM (as in the reference plugins); a non-empty one needs a type.
	refused 7 "ipam without type" "$(jq -c '.ipam = {"subnet": "10.0.0.0/24"}' <<<"$good")"
	refused 7 "stateDir relative" "$(jq -c '.stateDir = "state"' <<<"$good")"
	refused 7 "no selector" "$(jq -c 'del(.device)' <<<"$good")"
	refused 7 "device and hwaddr" "$(jq -c '.hwaddr = "02:00:00:00:00:01"' <<<"$good")"
	refused 7 "device and pciBusID" "$(jq -c '.pciBusID = "0000:af:00.1"' <<<"$good")"
	refused 7 "device and runtimeConfig.deviceID" \
		"$(jq -c '.runtimeConfig.deviceID = "0000:af:00.1"' <<<"$good")"
	all_refused "config"
}
scenario "invalid config: code 7" bad_conf

# cniVersion not spoken: code 1.
bad_version() {
	setup
	refused 1 "cniVersion 9.9.9" "$(jq -c '.cniVersion = "9.9.9"' <<<"$good")"
	refused 1 "cniVersion 1.2.0" "$(jq -c '.cniVersion = "1.2.0"' <<<"$good")"
	all_refused "cniVersion"
}
scenario "unsupported cniVersion: code 1" bad_version

# Nothing matches the selector: code 100.
not_found() {
	setup
	refused 100 "device not found" "$(jq -c '.device = "nosuchdev"' <<<"$good")"
	refused 100 "device only in the pod netns" "$(jq -c '.device = "podonly"' <<<"$good")"
	refused 100 "hwaddr not found" \
		"$(jq -c 'del(.device) | .hwaddr = "02:00:00:00:00:99"' <<<"$good")"
	mk_fake_pci "$T/sysfs" 0000:af:00.1 nic0
	sysconf=$(jq -c --arg s "$T/sysfs" 'del(.device) | .sysfsRoot = $s' <<<"$good")
	refused 100 "pciBusID not found" "$(jq -c '.pciBusID = "0000:af:00.7"' <<<"$sysconf")"
	refused 100 "deviceID not found" \
		"$(jq -c '.runtimeConfig.deviceID = "0000:af:00.7"' <<<"$sysconf")"
	# The same lookup with an address that exists works, so the two refusals
	# above are about the address, not a broken fake sysfs.
	pci=$(jq -c '.pciBusID = "0000:af:00.1"' <<<"$sysconf")
	run_plugin ADD "$pci"
	expect_result "ADD by an existing pciBusID"
	prev=$(with_prev "$pci" "$OUT")
	run_plugin DEL "$prev"
	expect_ok "DEL by an existing pciBusID"
	snap_same "$HOST_NS" "$T/host.before" "host after ADD/DEL by pciBusID"
	all_refused "not found"
}
scenario "no such device: code 100" not_found

# The error object's cniVersion follows the config when it can be read.
error_version() {
	setup
	run_plugin ADD "$(jq -c '.cniVersion = "0.4.0" | .device = "nosuchdev"' <<<"$good")"
	expect_err 100 "device not found at 0.4.0"
	jq_ok '.cniVersion == "0.4.0"' "error cniVersion follows the config"
}
scenario "error object in the config's cniVersion" error_version

# VERSION needs no config and lists what the plugin speaks.
version_cmd() {
	setup
	run_plugin VERSION '{"cniVersion": "1.0.0"}' -CNI_CONTAINERID -CNI_NETNS -CNI_IFNAME
	expect_ok "VERSION"
	jq_ok '.supportedVersions as $v | ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"] |
		all(. as $x | $v | index($x) != null)' "VERSION lists 0.3.0 to 1.1.0"
}
scenario "VERSION" version_cmd

t_done
