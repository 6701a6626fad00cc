# shellcheck shell=bash
# Validating hpn-rdma network configs with the plugin itself, for
# conf-examples.sh (the files under conf/) and doc-check.sh (the JSON blocks
# of README.md and doc/*.md). Sourced; the caller sets HPN_PLUGIN.
#
# A config is fed to ADD with a CNI_NETNS that does not exist: the plugin
# validates the whole config before it looks at the namespace, so a valid
# config ends with code 3 (unknown container) and an invalid one with its own
# code (7, 1, 2...). No privileges, nothing on the host is touched.
# conf_check counts into $checked and $failed.
checked=0 failed=0

conf_check() { # conf_check NAME CONFIG
	local out code
	out=$(CNI_COMMAND=ADD CNI_CONTAINERID=example CNI_NETNS=/nonexistent/hpn-example \
		CNI_IFNAME=eth0 CNI_PATH=/nonexistent "$HPN_PLUGIN" <<<"$2" 2>/dev/null) || true
	code=$(jq -r '.code // "none"' <<<"$out" 2>/dev/null) || code="not JSON"
	checked=$((checked + 1))
	if [[ $code != 3 ]]; then
		echo "FAIL: $1: expected code 3 (config valid, netns missing), got: $out"
		failed=$((failed + 1))
	else
		echo "ok: $1"
	fi
}

# What a runtime adds to a plugin's config: name and cniVersion from a list,
# and runtimeConfig for the declared capabilities (deviceID from a device
# plugin, the pod's annotations from containerd or CRI-O).
conf_runtime_filter='if .capabilities.deviceID then .runtimeConfig.deviceID = "0000:af:00.1"
	else . end
	| if .capabilities["io.kubernetes.cri.pod-annotations"] then
	    .runtimeConfig["io.kubernetes.cri.pod-annotations"] =
	    {"alibabacloud.com/hpn-type": "rdma",
	     "alibabacloud.com/gpu-model-series": "GU8TF",
	     "alibabacloud.com/gpu-count": "8"}
	  else . end | del(.capabilities)'

# conf_check_list NAME CONFLIST: each hpn-rdma entry of a conflist, as the
# runtime builds it. Fails (counted) when the list has none.
conf_check_list() {
	local c i=0
	while IFS= read -r c; do
		conf_check "$1[hpn-rdma #$i]" "$c"
		i=$((i + 1))
	done < <(jq -c '. as $l | .plugins[] | select(.type == "hpn-rdma")
		| . + {name: $l.name, cniVersion: $l.cniVersion} | '"$conf_runtime_filter" <<<"$2")
	if ((i == 0)); then
		echo "FAIL: $1 has no hpn-rdma plugin"
		checked=$((checked + 1)) failed=$((failed + 1))
	fi
}

# conf_kind JSON: "conf" (a network config of type hpn-rdma), "list" (a
# conflist with at least one hpn-rdma plugin) or "other".
conf_kind() {
	jq -r 'if type != "object" then "other"
		elif .type == "hpn-rdma" then "conf"
		elif (.plugins | type) == "array" and
		     any(.plugins[]; type == "object" and .type == "hpn-rdma") then "list"
		else "other" end' <<<"$1"
}

# conf_check_conf NAME CONFIG: a single network config, with what the
# runtime adds for its declared capabilities.
conf_check_conf() {
	conf_check "$1" "$(jq -c "$conf_runtime_filter" <<<"$2")"
}
