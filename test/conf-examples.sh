#!/bin/bash
# Every example under conf/ passes the plugin's own config validation.
#
# Each hpn-rdma config (a .conf, or the hpn-rdma entry of a .conflist with the
# list's name and cniVersion, as a runtime builds it) is fed to ADD with a
# CNI_NETNS that does not exist: the plugin validates the whole config before
# it looks at the namespace, so a valid config ends with code 3 (unknown
# container) and an invalid one with its own code (7, 1, 2...). No privileges,
# nothing on the host is touched.
set -euo pipefail
plugin=${HPN_PLUGIN:?run through ctest}
conf_dir=${HPN_SRC:?run through ctest}/conf
failed=0 checked=0

check() { # check NAME CONFIG
	local out code
	out=$(CNI_COMMAND=ADD CNI_CONTAINERID=example CNI_NETNS=/nonexistent/hpn-example \
		CNI_IFNAME=eth0 CNI_PATH=/nonexistent "$plugin" <<<"$2" 2>/dev/null) || true
	code=$(jq -r '.code // "none"' <<<"$out")
	checked=$((checked + 1))
	if [[ $code != 3 ]]; then
		echo "FAIL: $1: expected code 3 (config valid, netns missing), got: $out"
		failed=$((failed + 1))
	else
		echo "ok: $1"
	fi
}

shopt -s nullglob
for f in "$conf_dir"/*.conf; do
	check "$(basename "$f")" "$(cat "$f")"
done
for f in "$conf_dir"/*.conflist; do
	n=$(jq '[.plugins[] | select(.type == "hpn-rdma")] | length' "$f")
	((n > 0)) || { echo "FAIL: $(basename "$f") has no hpn-rdma plugin"; failed=$((failed + 1)); }
	for ((i = 0; i < n; i++)); do
		# The runtime adds name and cniVersion, and runtimeConfig for the
		# declared capabilities (deviceID from a device plugin here).
		c=$(jq -c --argjson i "$i" '. as $l | [.plugins[] | select(.type == "hpn-rdma")][$i]
			| . + {name: $l.name, cniVersion: $l.cniVersion}
			| if .capabilities.deviceID then .runtimeConfig.deviceID = "0000:af:00.1"
			  else . end | del(.capabilities)' "$f")
		check "$(basename "$f")[hpn-rdma #$i]" "$c"
	done
done
((checked > 0)) || { echo "FAIL: no examples found in $conf_dir"; exit 1; }
echo "$((checked - failed)) passed, $failed failed"
((failed == 0))
