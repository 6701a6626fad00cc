#!/usr/bin/env bash
# A ResourceClaim read and its status applied (server-side apply, the DRA
# driver's field manager) through hpn_kube_request (kube_req) against the
# stand-in API server, without root (ctest unit.kube-claims; the prologue in
# suite.sh): the claim's GET and 404, status.devices applied and refused (422
# naming the field), apply never retried under 503; kubectl reads the claim
# with its applied status. Nothing leaves loopback.
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
