#!/bin/bash
# Every example under conf/ passes the plugin's own config validation.
#
# Each hpn-rdma config (a .conf, or the hpn-rdma entry of a .conflist with the
# list's name and cniVersion, as a runtime builds it) is fed to ADD with a
# CNI_NETNS that does not exist (conf-lib.sh): a valid config ends with code 3.
# No privileges, nothing on the host is touched.
set -euo pipefail
: "${HPN_PLUGIN:?run through ctest}"
conf_dir=${HPN_SRC:?run through ctest}/conf
# shellcheck source-path=SCRIPTDIR source=conf-lib.sh
source "$(dirname "$0")/conf-lib.sh"

shopt -s nullglob
for f in "$conf_dir"/*.conf; do
	conf_check "$(basename "$f")" "$(cat "$f")"
done
for f in "$conf_dir"/*.conflist; do
	conf_check_list "$(basename "$f")" "$(cat "$f")"
done
# Multus NetworkAttachmentDefinitions: the JSON under "config: |".
for f in "$conf_dir"/k8s/*.yaml; do
	grep -q '^kind: NetworkAttachmentDefinition' "$f" || continue
	c=$(awk '/^  config: \|/ { on = 1; next } on && /^    / { print; next } on { exit }' "$f")
	c=$(jq -c 'if .capabilities.deviceID then .runtimeConfig.deviceID = "0000:af:00.1"
		else . end | del(.capabilities)' <<<"$c")
	conf_check "k8s/$(basename "$f")" "$c"
done
# The example Pod template mounts its own hints file where NCCL looks for it,
# from the directory the example conflist writes to, and opts in as it selects.
dep=$conf_dir/k8s/dep-demo-hpn-gpu.yaml
list=$conf_dir/20-hpn-rdma-gpu.conflist
if [[ -f $dep ]]; then
	dir=$(jq -r '.plugins[] | select(.type == "hpn-rdma") | .nccl.dir' "$list")
	sel=$(jq -r '.plugins[] | select(.type == "hpn-rdma") | .podSelector |
		"\(.annotation): \"\(.value)\""' "$list")
	checked=$((checked + 1))
	if grep -q "path: $dir\$" "$dep" && grep -q 'mountPath: /etc/nccl.conf$' "$dep" &&
		grep -qF 'subPathExpr: $(POD_UID)/nccl.conf' "$dep" &&
		grep -qF 'fieldPath: metadata.uid' "$dep" && grep -qF "        $sel" "$dep"; then
		echo "ok: k8s/$(basename "$dep") mounts $dir/<pod UID>/nccl.conf and has $sel"
	else
		echo "FAIL: k8s/$(basename "$dep") does not mount $dir/\$(POD_UID)/nccl.conf at" \
			"/etc/nccl.conf or lacks the annotation $sel"
		failed=$((failed + 1))
	fi
fi
# The containerd conflist as doc/runtime.md shows it is the file itself.
rt_list=$conf_dir/10-hpn-rdma-containerd.conflist
rt_doc=$HPN_SRC/doc/runtime.md
if [[ -f $rt_list ]]; then
	checked=$((checked + 1))
	shown=$(awk '/^### The conflist for \/etc\/cni\/net.d/ { on = 1; next }
		on && /^```json/ { inside = 1; next } inside && /^```/ { exit } inside' "$rt_doc" 2>/dev/null)
	if [[ -n $shown ]] && [[ $(jq -S . <<<"$shown" 2>/dev/null) == "$(jq -S . "$rt_list")" ]]; then
		echo "ok: doc/runtime.md shows $(basename "$rt_list") as it is"
	else
		echo "FAIL: doc/runtime.md (\"### The conflist for /etc/cni/net.d\") does not show" \
			"$(basename "$rt_list") as it is"
		failed=$((failed + 1))
	fi
fi
((checked > 0)) || { echo "FAIL: no examples found in $conf_dir"; exit 1; }
echo "$((checked - failed)) passed, $failed failed"
((failed == 0))
