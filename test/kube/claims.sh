#!/usr/bin/env bash
# A ResourceClaim read and its status applied (server-side apply, the DRA
# driver's field manager) through hpn_kube_request (kube_req) against the
# stand-in API server, without root (ctest unit.kube-claims; the prologue in
# suite.sh): the claim's GET and 404, status.devices applied and refused (422
# naming the field), apply never retried under 503; a claim of two shares of
# one device (each entry keyed by its shareID, a UUID in normalized form, one
# of the allocation's); kubectl reads the claim with its applied status. Nothing leaves loopback.
# Prints "N passed, N failed" last; exits 1 on any failure, 77 (SKIP) without
# openssl or python3.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=suite.sh
source "$(dirname "${BASH_SOURCE[0]}")/suite.sh"

# ---- resource.k8s.io: a ResourceClaim's status, by server-side apply -------------

CLAIMS=/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims
CLAIM=$W/res/ml/resourceclaims/train-0-nics.json
mkdir -p "${CLAIM%/*}"
jq -n --arg drv "$DRV" '{
	apiVersion: "resource.k8s.io/v1", kind: "ResourceClaim",
	metadata: {name: "train-0-nics", namespace: "ml", resourceVersion: "500",
		uid: "5b0c7a51-1f7e-4c55-9d43-2a1c0b9e7f10", creationTimestamp: "2026-12-01T00:00:00Z"},
	spec: {devices: {requests: [{name: "nics", exactly: {deviceClassName: "hpn-rdma",
		allocationMode: "ExactCount", count: 2}}]}},
	status: {allocation: {devices: {results: [
		{request: "nics", driver: $drv, pool: "node1", device: "nic0"},
		{request: "nics", driver: $drv, pool: "node1", device: "nic1"}]}}}}' >"$CLAIM"
req -w "ResourceClaim ml/train-0-nics" "$KT" GET "$CLAIMS/train-0-nics"
expect_status "GET a ResourceClaim" 200 '.metadata.uid == "5b0c7a51-1f7e-4c55-9d43-2a1c0b9e7f10" and
	(.status.allocation.devices.results | length) == 2'
req -w "ResourceClaim ml/none" "$KT" GET "$CLAIMS/none"
expect_status "GET a claim that does not exist: 404" 404
expect_code "its error: code 3" 3 'GET ResourceClaim ml/none: 404 Not Found: ResourceClaim ml/none does not exist'

# apply_patch FILE DEVICE [JQ]: an apply patch of the claim's status with one entry
# for DEVICE (its network data), changed by JQ.
apply_patch() {
	jq -n --arg drv "$DRV" --arg dev "$2" '{
		apiVersion: "resource.k8s.io/v1", kind: "ResourceClaim",
		metadata: {name: "train-0-nics", namespace: "ml"},
		status: {devices: [{driver: $drv, pool: "node1", device: $dev,
			conditions: [{type: "Ready", status: "True", reason: "NetworkReady",
				lastTransitionTime: "2026-12-04T10:00:00Z"}],
			networkData: {interfaceName: "hpn0", ips: ["10.1.0.5/24", "fd00::5/64"],
				hardwareAddress: "02:00:00:00:00:01"}}]}}' | jq "${3:-.}" >"$1"
}
APPLY=application/apply-patch+yaml
# patch_status WHO FILE [TYPE]: PATCH the status as field manager WHO ("" for none).
patch_status() {
	local q=()
	[[ -n $1 ]] && q=(-q "fieldManager=$1")
	req -n "${q[@]}" -w "ResourceClaim ml/train-0-nics status" -r resourceclaims/status -N ml \
		"$KT" PATCH "$CLAIMS/train-0-nics/status" "$2" "${3:-$APPLY}"
}
apply_patch "$W/p0.json" nic0
patch_status "$DRV" "$W/p0.json"
expect_status "apply the status of nic0" 200 \
	'.status.devices == [$p[0].status.devices[0]] and .metadata.resourceVersion != "500"' \
	--slurpfile p "$W/p0.json"
jq -e --arg m "$DRV" '.status.devices[0].networkData.ips == ["10.1.0.5/24", "fd00::5/64"] and
	(.metadata.managedFields | map(select(.manager == $m and .subresource == "status")) | length) == 1' \
	"$CLAIM" >/dev/null && pass "stored in the claim, owned by the manager" ||
	failure "the claim file after apply: $(jq -c .status,.metadata.managedFields "$CLAIM")"
# YAML too: JSON is YAML, and the apply patch type is YAML.
printf '%s\n' 'apiVersion: resource.k8s.io/v1' 'kind: ResourceClaim' \
	'metadata: {name: train-0-nics, namespace: ml}' 'status:' '  devices:' \
	"  - {driver: $DRV, pool: node1, device: nic1, networkData: {interfaceName: hpn1}}" >"$W/p1.yaml"
patch_status other-manager "$W/p1.yaml"
expect_status "another manager applies nic1 (YAML): both entries kept" 200 \
	'[.status.devices[].device] == ["nic0", "nic1"]'
apply_patch "$W/p2.json" nic0 '.status.devices = []'
patch_status "$DRV" "$W/p2.json"
expect_status "the first manager applies none: its entry goes, the other's stays" 200 \
	'[.status.devices[].device] == ["nic1"]'
RV=$(jq -r .metadata.resourceVersion "$CLAIM")

# bad_status WHAT FIELD REGEX JQ: an apply of nic0 changed by JQ is 422 with a
# cause on FIELD matching REGEX, and the claim is unchanged.
bad_status() {
	apply_patch "$W/bad.json" nic0 "$4"
	patch_status "$DRV" "$W/bad.json"
	expect_status "status 422 $1" 422 \
		'.reason == "Invalid" and (.details.causes | any(.field == $f and (.message | test($re))))' \
		--arg f "$2" --arg re "$3"
	[[ $(jq -r .metadata.resourceVersion "$CLAIM") == "$RV" ]] || failure "$1: the claim changed"
}
bad_status "a device not allocated to the claim" 'status.devices[1]' \
	"Invalid value: \"$DRV/node1/nic7\": must be an allocated device" '.status.devices[0].device = "nic7"'
bad_status "an address without its prefix length" 'status.devices[1].networkData.ips[0]' \
	'Invalid value: "10.1.0.5"' '.status.devices[0].networkData.ips[0] = "10.1.0.5"'
bad_status "17 addresses" 'status.devices[1].networkData.ips' 'Too many: 17: must have at most 16' \
	'.status.devices[0].networkData.ips = [range(17) | "10.1.0.\(.)/24"]'
bad_status "an interface name over 256" 'status.devices[1].networkData.interfaceName' \
	'may not be more than 256' '.status.devices[0].networkData.interfaceName = ("i" * 257)'
bad_status "a hardware address over 128" 'status.devices[1].networkData.hardwareAddress' \
	'may not be more than 128' '.status.devices[0].networkData.hardwareAddress = ("0" * 129)'
bad_status "9 conditions" 'status.devices[1].conditions' 'Too many: 9: must have at most 8' \
	'.status.devices[0].conditions = [range(9) as $i | .status.devices[0].conditions[0] | .type = "T\($i)"]'
bad_status "a condition without a reason" 'status.devices[1].conditions[0].reason' 'Required value' \
	'del(.status.devices[0].conditions[0].reason)'
bad_status "the same device twice" 'status.devices[2]' 'Duplicate value' \
	'.status.devices += [.status.devices[0]]'
apply_patch "$W/p3.json" nic0
patch_status "" "$W/p3.json"
expect_status "apply without fieldManager: 422 as PatchOptions validation answers" 422 \
	'.details.kind == "PatchOptions" and .details.causes[0].field == "fieldManager"'
patch_status "$DRV" "$W/p3.json" application/merge-patch+json
expect_status "another patch type: 415" 415 '.reason == "UnsupportedMediaType"'
[[ $(jq -r .metadata.resourceVersion "$CLAIM") == "$RV" ]] && pass "the claim unchanged by refused patches" ||
	failure "a refused patch changed the claim"
echo "status 503 1" >"$W/mode"
: >"$W/requests.log"
patch_status "$DRV" "$W/p3.json"
expect_code "apply (not marked idempotent) under 503: code 11, one request" 11 'PATCH ResourceClaim ml/train-0-nics status: HTTP 503'
[[ $(wc -l <"$W/requests.log") == 1 ]] || failure "apply under 503: $(cat "$W/requests.log")"
: >"$W/mode"

# ---- a claim of shares: each result and status entry has its shareID ------------

SCLAIM=$W/res/ml/resourceclaims/train-1-share.json
S1=3f1c2b0a-5d6e-4f70-8a9b-0c1d2e3f4a5b
S2=7e6d5c4b-3a29-4817-9605-f4e3d2c1b0a9
# share_claim [JQ]: the claim's file, two shares of nic0-shared, changed by JQ.
share_claim() {
	jq -n --arg drv "$DRV" --arg s1 "$S1" --arg s2 "$S2" '{
		apiVersion: "resource.k8s.io/v1", kind: "ResourceClaim",
		metadata: {name: "train-1-share", namespace: "ml", resourceVersion: "600",
			uid: "6c1d8b62-2e8f-4d66-8e54-3b2d1c0f8e21", creationTimestamp: "2026-12-01T00:00:00Z"},
		spec: {devices: {requests: [{name: "nic", exactly: {deviceClassName: "hpn-rdma-shared",
			allocationMode: "ExactCount", count: 2, capacity: {requests: {shares: "1"}}}}]}},
		status: {allocation: {devices: {results: [
			{request: "nic", driver: $drv, pool: "node1", device: "nic0-shared", shareID: $s1,
			 consumedCapacity: {shares: "1"}},
			{request: "nic", driver: $drv, pool: "node1", device: "nic0-shared", shareID: $s2,
			 consumedCapacity: {shares: "1"}}]}}}}' | jq "${1:-.}" >"$SCLAIM"
}
# share_patch FILE [JQ]: an apply patch of both shares' status, changed by JQ.
share_patch() {
	jq -n --arg drv "$DRV" --arg s1 "$S1" --arg s2 "$S2" '{
		apiVersion: "resource.k8s.io/v1", kind: "ResourceClaim",
		metadata: {name: "train-1-share", namespace: "ml"},
		status: {devices: [
			{driver: $drv, pool: "node1", device: "nic0-shared", shareID: $s1,
			 networkData: {interfaceName: "hpn0"}},
			{driver: $drv, pool: "node1", device: "nic0-shared", shareID: $s2,
			 networkData: {interfaceName: "hpn1"}}]}}' | jq "${2:-.}" >"$1"
}
patch_share() {
	req -n -q "fieldManager=$DRV" -w "ResourceClaim ml/train-1-share status" -r resourceclaims/status \
		-N ml "$KT" PATCH "$CLAIMS/train-1-share/status" "$1" "$APPLY"
}
share_claim
share_patch "$W/sp0.json"
patch_share "$W/sp0.json"
expect_status "apply two shares of one device: each entry keyed by its shareID" 200 \
	'[.status.devices[].shareID] == [$a, $b]' --arg a "$S1" --arg b "$S2"
SRV=$(jq -r .metadata.resourceVersion "$SCLAIM")
# bad_share WHAT FIELD REGEX JQ [CLAIM_JQ]: the apply changed by JQ (the claim's
# file by CLAIM_JQ) is 422 with a cause on FIELD matching REGEX, the claim unchanged.
bad_share() {
	share_claim "${5:-.}"
	jq --arg rv "$SRV" '.metadata.resourceVersion = $rv' "$SCLAIM" >"$SCLAIM.new" && mv "$SCLAIM.new" "$SCLAIM"
	share_patch "$W/bad.json" "$4"
	patch_share "$W/bad.json"
	expect_status "status 422 $1" 422 \
		'.reason == "Invalid" and (.details.causes | any(.field == $f and (.message | test($re))))' \
		--arg f "$2" --arg re "$3"
	[[ $(jq -r .metadata.resourceVersion "$SCLAIM") == "$SRV" ]] || failure "$1: the claim changed"
}
bad_share "a shareID in upper case" 'status.devices[0].shareID' 'RFC 4122 normalized form' \
	'.status.devices[0].shareID |= ascii_upcase'
bad_share "a shareID without its dashes" 'status.devices[0].shareID' 'RFC 4122 normalized form' \
	'.status.devices[0].shareID |= gsub("-"; "")'
bad_share "a shareID that is no UUID" 'status.devices[0].shareID' 'error validating uid: invalid UUID format' \
	'.status.devices[0].shareID = "share-1"'
bad_share "a shareID the allocation does not have" 'status.devices[0]' 'must be an allocated device' \
	'.status.devices[0].shareID = "00000000-0000-4000-8000-000000000000"'
bad_share "a share's entry without its shareID" 'status.devices[0]' 'must be an allocated device' \
	'del(.status.devices[0].shareID)'
bad_share "one share twice" 'status.devices[1]' 'Duplicate value' '.status.devices[1] = .status.devices[0]'
bad_share "an allocation result's shareID in upper case" 'status.allocation.devices.results[1].shareID' \
	'RFC 4122 normalized form' '.status.devices |= .[:1]' \
	'.status.allocation.devices.results[1].shareID |= ascii_upcase'
# DRAConsumableCapacity off: a claim with shares already keeps its entries' shareIDs.
share_claim
echo "DRAConsumableCapacity=false" >"$W/mode.gates"
share_patch "$W/sp1.json"
patch_share "$W/sp1.json"
expect_status "DRAConsumableCapacity off, the claim using shares: the shareIDs kept" 200 \
	'[.status.devices[].shareID] == [$a, $b]' --arg a "$S1" --arg b "$S2"
rm -f "$W/mode.gates"

# ---- kubectl reads the same pods, slices and claims with the same kubeconfigs ---

if command -v kubectl >/dev/null; then
	# kubectl_res ARGS...: kubectl get ARGS -o json with the token kubeconfig.
	kubectl_res() {
		RC=0
		OUT=$(kubectl --kubeconfig "$KT" --cache-dir "$W/kcache" --request-timeout 10s \
			get "$@" -o json 2>"$W/kerr") || RC=$?
		ERR=$(cat "$W/kerr")
		LAST="kubectl get $* -o json"
	}
	kubectl_res resourceclaims -n ml train-0-nics
	((RC == 0)) && check "kubectl get resourceclaims -n ml: the claim with its applied status" \
		'.kind == "ResourceClaim" and .status == $c.status and .metadata.resourceVersion == $c.metadata.resourceVersion' \
		--argjson c "$(cat "$CLAIM")" || failure "kubectl get resourceclaims failed"
else
	failure "kubectl is missing: scripts/install-deps.sh installs Debian's kubernetes-client"
fi

echo "$passed passed, $failed failed"
((failed == 0))
