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
# ConfigMaps (conf/k8s/hpn-rdma.yaml: the conflist the installer puts on
# every node): each .conflist / .conf key, validated like the files above.
for f in "$conf_dir"/k8s/*.yaml; do
	grep -q '^kind: ConfigMap' "$f" || continue
	while IFS=$'\t' read -r key c; do
		case $key in
		*.conflist) conf_check_list "k8s/$(basename "$f") $key" "$c" ;;
		*.conf) conf_check_conf "k8s/$(basename "$f") $key" "$c" ;;
		esac
	done < <(/usr/bin/python3 -c 'import json, sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
	if d and d.get("kind") == "ConfigMap":
		for k, v in sorted(d.get("data", {}).items()):
			print(k + "\t" + json.dumps(json.loads(v)))' "$f")
done
# The manifests under conf/k8s/ (the seed's Deployment as the GPU conflist
# selects and hints it, the cluster install's objects and paths, its RBAC),
# checked offline by k8s-manifests.py: kubectl validates fields only against
# a server, and none is here.
if compgen -G "$conf_dir/k8s/*.yaml" >/dev/null; then
	checked=$((checked + 1))
	if out=$(/usr/bin/python3 "$(dirname "$0")/k8s-manifests.py" "$conf_dir" 2>&1); then
		echo "ok: k8s/*.yaml ($(tail -n 1 <<<"$out"))"
	else
		grep -v '^ok: ' <<<"$out"
		failed=$((failed + 1))
	fi
	# And kubectl's own client-side reading of them, which needs no server:
	# kustomize (built into kubectl) parses every document and refuses one
	# without apiVersion, kind or metadata.name. Every object must come out.
	if command -v kubectl >/dev/null; then
		checked=$((checked + 1))
		kz=$(mktemp -d)
		{
			echo "resources:"
			for f in "$conf_dir"/k8s/*.yaml; do
				cp "$f" "$kz/" && echo "  - $(basename "$f")"
			done
		} >"$kz/kustomization.yaml"
		want=$(cat "$conf_dir"/k8s/*.yaml | grep -c '^kind:')
		if out=$(HOME=$kz timeout 60 kubectl kustomize "$kz" 2>&1) &&
			[[ $(grep -c '^kind:' <<<"$out") == "$want" ]]; then
			echo "ok: kubectl kustomize reads k8s/*.yaml: $want objects"
		else
			echo "FAIL: kubectl kustomize k8s/*.yaml (want $want objects): $out" | head -n 5
			failed=$((failed + 1))
		fi
		rm -rf "$kz"
		# The DRA driver turned on as doc/dra.md says: hpn-rdma.yaml's
		# DaemonSet with hpn-rdma-dra-patch.json (kustomize applies the same
		# RFC 6902 patch kubectl patch --type json does) runs the agent with
		# --dra, and its DRA mounts stay.
		if [[ -f $conf_dir/k8s/hpn-rdma-dra-patch.json ]]; then
			checked=$((checked + 1))
			kz=$(mktemp -d)
			cp "$conf_dir/k8s/hpn-rdma.yaml" "$conf_dir/k8s/hpn-rdma-dra.yaml" \
				"$conf_dir/k8s/hpn-rdma-dra-patch.json" "$kz/"
			cat >"$kz/kustomization.yaml" <<-'EOF'
				resources: [hpn-rdma.yaml, hpn-rdma-dra.yaml]
				patches:
				  - path: hpn-rdma-dra-patch.json
				    target: {kind: DaemonSet, name: hpn-rdma}
			EOF
			if out=$(HOME=$kz timeout 60 kubectl kustomize "$kz" 2>&1) &&
				grep -q -- '- --dra$' <<<"$out" &&
				grep -q 'mountPath: /var/lib/kubelet/plugins_registry' <<<"$out" &&
				grep -q 'kind: ValidatingAdmissionPolicyBinding' <<<"$out"; then
				echo "ok: kubectl kustomize: hpn-rdma.yaml + hpn-rdma-dra.yaml with the patch runs the agent with --dra"
			else
				echo "FAIL: kubectl kustomize with hpn-rdma-dra-patch.json: $out" | head -n 5
				failed=$((failed + 1))
			fi
			rm -rf "$kz"
		fi
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
