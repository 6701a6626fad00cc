# shellcheck shell=bash
# The DRA flow's device metadata scenario (draflow.sh sources it and runs
# claim_meta): each prepared claim's KEP-5304 metadata file, mounted
# read-only by the claim's CDI spec, its networkData written when ADD is done
# (doc/dra.md, "Device metadata in the container"). It uses draflow.sh's
# helpers (flow_up, flow_conf, pod_ips, flow_down).

META_DIR_IN=/var/run/kubernetes.io/dra-device-attributes

# meta_file UID REQUEST: the host file of a claim's request.
meta_file() {
	echo "$KL/plugins/$DRV/dra-device-metadata/$1/$2/metadata.json"
}

# meta_read UID REQUEST: the file's objects (a JSON array), checked as the
# API would check its fields (drameta.py, with the API stand-in's checks).
meta_read() {
	local f
	f=$(meta_file "$1" "$2")
	[[ -f $f ]] || fail "no device metadata file $f"
	python3 "$(dirname "${BASH_SOURCE[0]}")/drameta.py" "$f" 2>"$T/meta.err" ||
		fail "the device metadata file $f is not valid: $(cat "$T/meta.err")"
}

# Prepare writes the file (generation 1, the claim's devices with the
# slice's attributes, rdmaDevice and pcieRoot among them), the spec mounts it
# read-only at the documented path; ADD fills networkData (generation 2) before
# it returns; a claim from a template is under resourceclaimtemplates/ by its
# pod claim name; Unprepare removes the files, and a restart the files of a
# claim with no record.
claim_meta() {
	local conf objs spec f rdma0 rdma1 ips0 ips1 uid2=5b4a3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d
	flow_up
	mk_claim ml c1 "$UID1" . pci-0000-af-00-2 pci-0000-af-00-0
	OUT=$(prepare -version v1 "ml/c1/$UID1") || fail "Prepare failed"
	jq_ok '.[$u].error == ""' "Prepare of the claim" "$OUT" --arg u "$UID1"
	f=$(meta_file "$UID1" nics)
	[[ $(stat -c %a "$f") == 644 ]] || fail "the file's mode is $(stat -c %a "$f"), not 644"
	objs=$(meta_read "$UID1" nics)
	rdma0=$(jq -r '.devices[0].rdma' "$STATE/dra/$UID1.json")
	rdma1=$(jq -r '.devices[1].rdma' "$STATE/dra/$UID1.json")
	jq_ok 'map(.apiVersion) == ["metadata.resource.k8s.io/v1beta1", "metadata.resource.k8s.io/v1alpha1"]
		and all(.[]; .kind == "DeviceMetadata"
			and .metadata == {name: "c1", namespace: "ml", uid: $u, generation: 1}
			and (has("podClaimName") | not)
			and (.requests | length) == 1 and .requests[0].name == "nics"
			and (.requests[0].devices | map([.driver, .pool, .name]))
				== [[$drv, "node1", "pci-0000-af-00-2"], [$drv, "node1", "pci-0000-af-00-0"]]
			and ([.requests[0].devices[].attributes.rdmaDevice.string] == [$r0, $r1])
			and all(.requests[0].devices[]; (.attributes["resource.kubernetes.io/pcieRoot"].string
				| test("^pci[0-9a-f]{4}:[0-9a-f]{2}$"))
				and .attributes["resource.kubernetes.io/pciBusID"].string != null
				and (has("networkData") | not)))' \
		"after Prepare: generation 1, both versions, the devices with their attributes" "$objs" \
		--arg u "$UID1" --arg drv "$DRV" --arg r0 "$rdma0" --arg r1 "$rdma1"
	spec=$(<"$(claim_spec "$UID1")")
	jq_ok '.devices[0].containerEdits.mounts | map(select(.hostPath == $f)) == [{hostPath: $f,
		containerPath: ($in + "/resourceclaims/c1/nics/" + $drv + "-metadata.json"),
		options: ["ro", "nosuid", "nodev", "noexec", "bind"], type: "bind"}]' \
		"the claim's spec mounts the file read-only at the documented path" "$spec" \
		--arg f "$f" --arg in "$META_DIR_IN" --arg drv "$DRV"

	conf=$(flow_conf)
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_result "ADD of the claim's pod"
	grep -q "hpn-rdma-agent wrote its DRA claims' networkData" "$T/plugin.log" 2>/dev/null ||
		grep -q "networkData of pod $POD_A in its device metadata" "$T/agent.log" ||
		fail "ADD did not have the agent write the networkData: $(tail -n 5 "$T/agent.log")"
	# Read at once after ADD returned: what a container created now mounts.
	objs=$(meta_read "$UID1" nics)
	ips0=$(pod_ips hpn0)
	ips1=$(pod_ips hpn1)
	jq_ok 'all(.[]; .metadata.generation == 2
		and (.requests[0].devices | map(.networkData)) == [
			{interfaceName: "hpn0", ips: $i0, hardwareAddress: $m0},
			{interfaceName: "hpn1", ips: $i1, hardwareAddress: $m1}]
		and (.requests[0].devices[0].attributes.rdmaDevice.string == $r0))' \
		"after ADD: networkData of hpn0 and hpn1 (ip addr, ip link), generation 2" "$objs" \
		--argjson i0 "$ips0" --argjson i1 "$ips1" --arg m0 "$(mac_of "$POD_NS" hpn0)" \
		--arg m1 "$(mac_of "$POD_NS" hpn1)" --arg r0 "$rdma0"
	[[ $(stat -c %a "$f") == 644 ]] || fail "the rewritten file's mode is $(stat -c %a "$f")"

	# A claim from a template: under its pod claim name, podClaimName in the file.
	mk_claim ml pod-x-rdma-7fz2k "$uid2" '.metadata.annotations["resource.kubernetes.io/pod-claim-name"] = "rdma"' \
		pci-0000-af-00-1
	OUT=$(prepare -version v1 "ml/pod-x-rdma-7fz2k/$uid2") || fail "Prepare of the template's claim failed"
	jq_ok '.[$u].error == ""' "Prepare of the template's claim" "$OUT" --arg u "$uid2"
	jq_ok 'all(.[]; .podClaimName == "rdma" and .metadata.name == "pod-x-rdma-7fz2k")' \
		"the template's claim: podClaimName" "$(meta_read "$uid2" nics)"
	jq_ok '.devices[0].containerEdits.mounts | any(.containerPath ==
		($in + "/resourceclaimtemplates/rdma/nics/" + $drv + "-metadata.json"))' \
		"the template's claim mounted under resourceclaimtemplates/<pod claim name>" \
		"$(<"$(claim_spec "$uid2")")" --arg in "$META_DIR_IN" --arg drv "$DRV"

	run_plugin DEL "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_ok "DEL"
	unprepare -version v1 "ml/c1/$UID1" >/dev/null || fail "Unprepare failed"
	[[ ! -e $KL/plugins/$DRV/dra-device-metadata/$UID1 ]] ||
		fail "Unprepare left $(find "$KL/plugins/$DRV/dra-device-metadata/$UID1")"
	# Unprepared while the agent was down (its record gone by hand): removed at start.
	stop_agent
	rm -f "$STATE/dra/$uid2.json"
	start_agent
	wait_file "$T/agent.sock" "the restarted agent's lookup socket"
	[[ ! -e $KL/plugins/$DRV/dra-device-metadata/$uid2 ]] ||
		fail "the files of a claim with no record survived a restart"
	grep -q "device metadata of claim $uid2, which has no record: removed" "$T/agent.log" ||
		fail "the stale files' removal not said"
	flow_down
}
