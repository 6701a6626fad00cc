#!/usr/bin/env bash
# hpn_kube_request (kube_req: the call the agent's DRA driver makes) against
# the stand-in API server, without root (ctest unit.kube-slices; the prologue
# in suite.sh): a pod read and the errors of the general call; ResourceSlices
# created, listed by field selector, updated (409 on a stale resourceVersion)
# and deleted, the API's validation met (422 naming the field; a device's
# taints and the 64 devices of a tainted slice too; shared devices, their
# request policies and counters, and the feature gates that drop them);
# retries go
# through 503 for GET and PUT, never for POST; kubectl reads the same slices
# with the same kubeconfig. Nothing leaves loopback.
# Prints "N passed, N failed" last; exits 1 on any failure, 77 (SKIP) without
# openssl or python3.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=suite.sh
source "$(dirname "${BASH_SOURCE[0]}")/suite.sh"

# ---- hpn_kube_request: the general call (kube_req) ------------------------------


req "$KT" GET "/api/v1/namespaces/${SEED%/*}/pods/${SEED#*/}"
expect_status "kube_req GET a pod: 200 and the pod" 200 '.metadata.uid == $u' --arg u "$(uid_of "$SEED")"
((RC == 0)) && pass "exit 0 on a 2xx" || failure "exit $RC on a 2xx"
req "$KT" GET /api/v1/namespaces/default/pods/no-such-pod
expect_status "kube_req GET a missing pod: 404 returned" 404 '.kind == "Status" and .code == 404'
expect_code "the 404's error: code 3 naming the path" 3 "$GOOD" \
	'GET /api/v1/namespaces/default/pods/no-such-pod: 404 Not Found' 'the API server says: pods "no-such-pod" not found'
echo "status 503 2" >"$W/mode"
: >"$W/requests.log"
req "$KT" GET "/api/v1/namespaces/${SEED%/*}/pods/${SEED#*/}"
expect_status "GET retried through 503 twice" 200
[[ $(requests " 503 ") == 2 ]] && pass "GET: three requests" || failure "GET under 503: $(cat "$W/requests.log")"
echo "status 503 1" >"$W/mode"
: >"$W/requests.log"
req -n "$KT" GET "/api/v1/namespaces/${SEED%/*}/pods/${SEED#*/}"
expect_code "not idempotent: a 503 is not retried" 11 "$GOOD" 'HTTP 503 Service Unavailable; 1 attempt in' \
	'not repeated: it may have been done'
[[ $(requests " 503 ") == 1 && $(requests " 200 ") == 0 ]] && pass "one request only" ||
	failure "not idempotent under 503: $(cat "$W/requests.log")"
echo "429 1 0" >"$W/mode"
req -n "$KT" GET "/api/v1/namespaces/${SEED%/*}/pods/${SEED#*/}"
expect_status "not idempotent: a 429 is retried (never acted on)" 200
echo "status 403" >"$W/mode"
req -r pods -v list "$KT" GET /api/v1/namespaces/default/pods/x
expect_code "403: the caller's verb and resource, no namespace" 109 \
	'GET /api/v1/namespaces/default/pods/x: 403 Forbidden' \
	'may not list pods \(it needs RBAC list on pods\)'
echo type >"$W/mode"
req "$KT" GET "/api/v1/namespaces/${SEED%/*}/pods/${SEED#*/}"
expect_code "a 2xx that is not JSON is refused" 109 'Content-Type is "text/html"'
: >"$W/mode"
: >"$W/requests.log"
req "$KT" GET "/api/v1/namespaces/default/pods/a b"
expect_code "a path with a blank never leaves" 106 'path "/api/v1/namespaces/default/pods/a b" is not an escaped'
req "$KT" GET /api "$W/tokens"
expect_code "a GET with a body" 106 'a GET has no body'
req "$KT" TRACE /api
expect_code "a method that is not one of the five" 106 'method "TRACE"'
[[ ! -s $W/requests.log ]] && pass "no request for a bad call" ||
	failure "a bad call reached the server: $(cat "$W/requests.log")"

# ---- resource.k8s.io: ResourceSlices, as the DRA driver publishes them ----------

SLICES=/apis/resource.k8s.io/v1/resourceslices
# slice FILE NAME NODE [JQ]: a valid ResourceSlice of two NICs on NODE, changed
# by JQ.
slice() {
	jq -n --arg name "$2" --arg node "$3" --arg drv "$DRV" '{
		apiVersion: "resource.k8s.io/v1", kind: "ResourceSlice",
		metadata: {name: $name},
		spec: {driver: $drv, nodeName: $node,
			pool: {name: $node, generation: 0, resourceSliceCount: 1},
			devices: [
				{name: "nic0", attributes: {
					"resource.kubernetes.io/pciBusID": {string: "0000:17:00.0"},
					"resource.kubernetes.io/numaNode": {int: 0},
					rdmaDevice: {string: "mlx5_0"}, roce: {bool: true},
					firmware: {version: "28.39.1002"}}},
				{name: "nic1", attributes: {rdmaDevice: {string: "mlx5_1"}}}]}}' |
		jq "${4:-.}" >"$1"
}
# names: the sorted names of a list's items in BODY.
names() {
	jq -c '[.items[].metadata.name] | sort' <<<"$BODY"
}

slice "$W/s1.json" node1-nics node1
: >"$W/requests.log"
req -n "$KT" POST "$SLICES" "$W/s1.json"
expect_status "POST a ResourceSlice: 201 Created" 201 \
	'.metadata.uid != null and .metadata.resourceVersion != null and .metadata.generation == 1
	 and .metadata.creationTimestamp != null and .spec.devices[0].name == "nic0"'
[[ $(jq -r .spec.nodeName "$W/res/resourceslices/node1-nics.json") == node1 ]] &&
	pass "the stand-in holds it" || failure "the slice is not in $W/res/resourceslices"
req -n "$KT" POST "$SLICES" "$W/s1.json"
expect_status "POST it again: 409 AlreadyExists" 409 '.reason == "AlreadyExists"'
expect_code "409 reported as an error" 109 '409 Conflict' 'already exists'
slice "$W/gen.json" "" node1 '.metadata = {generateName: "node1-more-"}'
req -n "$KT" POST "$SLICES" "$W/gen.json"
expect_status "POST with generateName: a name made from it" 201 \
	'.metadata.name | test("^node1-more-[a-z0-9]{5}$")'
GEN=$(jq -r .metadata.name <<<"$BODY")
slice "$W/s2.json" node2-nics node2
req -n "$KT" POST "$SLICES" "$W/s2.json"
expect_status "POST a slice of node2" 201
slice "$W/s3.json" node1-gpus node1 '.spec.driver = "gpu.example.com"'
req -n "$KT" POST "$SLICES" "$W/s3.json"
expect_status "POST another driver's slice of node1" 201

req -v list -r resourceslices -q "fieldSelector=spec.nodeName=node1,spec.driver=$DRV" "$KT" GET "$SLICES"
expect_status "list with fieldSelector nodeName AND driver: a ResourceSliceList" 200 \
	'.kind == "ResourceSliceList" and (.metadata.resourceVersion | length > 0)'
[[ $(names) == "$(jq -nc --arg g "$GEN" '[$g, "node1-nics"] | sort')" ]] &&
	pass "only node1's slices of the driver" || failure "fieldSelector: got $(names)"
grep -q 'fieldSelector=spec.nodeName%3Dnode1%2Cspec.driver%3Drdma.hpn.example.com ' "$W/requests.log" &&
	pass "the selector went escaped (hpn_kube_query_escape)" ||
	failure "the selector was not escaped: $(grep fieldSelector "$W/requests.log")"
req -q "fieldSelector=spec.nodeName==node2" "$KT" GET "$SLICES"
[[ $(names) == '["node2-nics"]' ]] && pass "fieldSelector spec.nodeName==node2" ||
	failure "nodeName==node2: $(names)"
req -q "fieldSelector=spec.driver!=$DRV" "$KT" GET "$SLICES"
[[ $(names) == '["node1-gpus"]' ]] && pass "fieldSelector spec.driver!=" || failure "driver!=: $(names)"
req -q "fieldSelector=spec.pool.name=node1" "$KT" GET "$SLICES"
expect_status "a field the API does not select on: 400" 400 '.message | test("field label not supported: spec.pool.name")'

req "$KT" GET "$SLICES/node1-nics"
expect_status "GET one slice" 200 '.metadata.name == "node1-nics"'
RV1=$(jq -r .metadata.resourceVersion <<<"$BODY")
jq '.spec.devices[1].attributes.rdmaDevice.string = "mlx5_3"' <<<"$BODY" >"$W/put.json"
req -w "ResourceSlice node1-nics" "$KT" PUT "$SLICES/node1-nics" "$W/put.json"
expect_status "PUT with the current resourceVersion" 200 \
	'.metadata.generation == 2 and .metadata.resourceVersion != $rv and
	 .spec.devices[1].attributes.rdmaDevice.string == "mlx5_3"' --arg rv "$RV1"
req -w "ResourceSlice node1-nics" "$KT" PUT "$SLICES/node1-nics" "$W/put.json"
expect_status "PUT with a stale resourceVersion: 409 Conflict" 409 '.reason == "Conflict"'
expect_code "the 409 as an error names the slice" 109 'PUT ResourceSlice node1-nics: 409 Conflict' \
	'the object has been modified'
jq 'del(.metadata.resourceVersion) | .spec.devices |= .[:1]' "$W/put.json" >"$W/put2.json"
req "$KT" PUT "$SLICES/node1-nics" "$W/put2.json"
expect_status "PUT without a resourceVersion: unconditional, as the strategy allows" 200 \
	'(.spec.devices | length) == 1 and .metadata.generation == 3'
RV3=$(jq -r .metadata.resourceVersion <<<"$BODY")
req "$KT" PUT "$SLICES/node1-nics" "$W/put2.json"
expect_status "PUT of the same slice: nothing written, the resourceVersion kept" 200 \
	'.metadata.resourceVersion == $rv and .metadata.generation == 3' --arg rv "$RV3"
jq '.spec.driver = "other.example.com"' "$W/put2.json" >"$W/put3.json"
req "$KT" PUT "$SLICES/node1-nics" "$W/put3.json"
expect_status "PUT changing spec.driver: 422 immutable" 422 \
	'.details.causes | any(.field == "spec.driver" and (.message | test("immutable")))'
jq '.metadata.name = "gone"' "$W/put2.json" >"$W/put4.json"
req -w "ResourceSlice gone" "$KT" PUT "$SLICES/gone" "$W/put4.json"
expect_status "PUT a slice that does not exist: 404" 404
expect_code "404 as code 3" 3 'ResourceSlice gone does not exist'
req -w "ResourceSlice node2-nics" "$KT" DELETE "$SLICES/node2-nics"
expect_status "DELETE: 200, a Status of Success" 200 '.kind == "Status" and .status == "Success"'
[[ ! -e $W/res/resourceslices/node2-nics.json ]] && pass "the stand-in dropped it" ||
	failure "node2-nics is still held"
req -w "ResourceSlice node2-nics" "$KT" DELETE "$SLICES/node2-nics"
expect_status "DELETE it again: 404" 404 '.reason == "NotFound"'
expect_code "and code 3, told from 409 by the status alone" 3 'ResourceSlice node2-nics does not exist'

# bad_slice WHAT FIELD REGEX JQ: a POST of node1's slice changed by JQ is 422
# with a cause on FIELD whose message matches REGEX, and nothing is stored.
bad_slice() {
	slice "$W/bad.json" bad-slice node9 "$4"
	req -n -w "ResourceSlice bad-slice" "$KT" POST "$SLICES" "$W/bad.json"
	expect_status "422 $1" 422 \
		'.reason == "Invalid" and (.details.causes | any(.field == $f and (.message | test($re))))' \
		--arg f "$2" --arg re "$3"
	[[ ! -e $W/res/resourceslices/bad-slice.json ]] || failure "$1: the invalid slice was stored"
}
bad_slice "driver not a DNS subdomain" spec.driver 'Invalid value: "Bad_Driver!"' '.spec.driver = "Bad_Driver!"'
bad_slice "driver over 63" spec.driver 'Too long: may not be more than 63' \
	'.spec.driver = ("a" * 60 + ".example.com")'
bad_slice "pool name with an empty part" spec.pool.name "between '/'" '.spec.pool.name = "a//b"'
bad_slice "pool name over 253" spec.pool.name 'Too long: may not be more than 253' \
	'.spec.pool.name = ([range(40)] | map("abcdef") | join("/"))'
bad_slice "resourceSliceCount 0" spec.pool.resourceSliceCount 'greater than zero' \
	'.spec.pool.resourceSliceCount = 0'
bad_slice "generation -1" spec.pool.generation 'greater than or equal to zero' '.spec.pool.generation = -1'
bad_slice "nodeName and allNodes" spec 'several are set' '.spec.allNodes = true'
bad_slice "none of nodeName, nodeSelector, allNodes, perDeviceNodeSelection" spec \
	'Required value: exactly one of .nodeName., .nodeSelector., .allNodes., .perDeviceNodeSelection.' 'del(.spec.nodeName)'
bad_slice "a nodeSelector of two terms" spec.nodeSelector.nodeSelectorTerms 'exactly one node selector term' \
	'del(.spec.nodeName) | .spec.nodeSelector = {nodeSelectorTerms: [{}, {}]}'
bad_slice "129 devices" spec.devices 'Too many: 129: must have at most 128' \
	'.spec.devices = [range(129) | {name: "nic\(.)"}]'
bad_slice "a device name that is not a DNS label" 'spec.devices[0].name' 'Invalid value: "NIC_0"' \
	'.spec.devices[0].name = "NIC_0"'
bad_slice "two devices of one name" 'spec.devices[1]' 'Duplicate value: "nic0"' '.spec.devices[1].name = "nic0"'
bad_slice "33 attributes" 'spec.devices[0]' 'attributes and capacities must not exceed 32' \
	'.spec.devices[0].attributes = ([range(33) | {key: "a\(.)", value: {int: .}}] | from_entries)'
bad_slice "an attribute name that is not a C identifier" 'spec.devices[1].attributes' \
	'Invalid value: "1speed"' '.spec.devices[1].attributes = {"1speed": {int: 100}}'
bad_slice "an attribute name over 32" 'spec.devices[1].attributes' 'Too long: may not be more than 32' \
	'.spec.devices[1].attributes = {("x" * 33): {int: 100}}'
bad_slice "an attribute's domain that is not a DNS subdomain" 'spec.devices[1].attributes' \
	'Invalid value: "Ex_ample"' '.spec.devices[1].attributes = {"Ex_ample/speed": {int: 100}}'
bad_slice "an attribute of two values" 'spec.devices[1].attributes[rdmaDevice]' \
	'exactly one value must be specified' '.spec.devices[1].attributes.rdmaDevice.int = 1'
bad_slice "a string attribute over 64" 'spec.devices[1].attributes[rdmaDevice].string' \
	'Too long: may not be more than 64' '.spec.devices[1].attributes.rdmaDevice.string = ("m" * 65)'
bad_slice "a version that is not semver" 'spec.devices[0].attributes[firmware].version' 'semver' \
	'.spec.devices[0].attributes.firmware.version = "28.39"'

# Device taints (KEP-5055, as the DRA driver publishes an unhealthy NIC): the
# API's checks of key, value, effect, count, and 64 devices to a tainted slice.
TAINT='{key: "rdma.hpn.example.com/unhealthy", value: "PortDown", effect: "NoSchedule",
	timeAdded: "2026-12-04T13:07:59Z"}'
bad_slice "a taint key whose prefix is not a DNS subdomain" 'spec.devices[0].taints[0].key' \
	'prefix part' ".spec.devices[0].taints = [$TAINT | .key = \"Bad_Domain/x\"]"
bad_slice "a taint key with no name" 'spec.devices[0].taints[0].key' 'name part' \
	".spec.devices[0].taints = [$TAINT | .key = \"example.com/\"]"
bad_slice "a taint key's name over 63" 'spec.devices[0].taints[0].key' 'name part' \
	".spec.devices[0].taints = [$TAINT | .key = (\"x\" * 64)]"
bad_slice "a taint without a key" 'spec.devices[0].taints[0].key' 'Required value' \
	".spec.devices[0].taints = [$TAINT | del(.key)]"
bad_slice "a taint value that is not a label value" 'spec.devices[0].taints[0].value' \
	'a valid label' ".spec.devices[0].taints = [$TAINT | .value = \"port down\"]"
bad_slice "a taint value over 63" 'spec.devices[0].taints[0].value' 'a valid label' \
	".spec.devices[0].taints = [$TAINT | .value = (\"v\" * 64)]"
bad_slice "an effect the API does not know" 'spec.devices[0].taints[0].effect' \
	'Unsupported value: "PreferNoSchedule": supported values: "NoExecute", "NoSchedule", "None"' \
	".spec.devices[0].taints = [$TAINT | .effect = \"PreferNoSchedule\"]"
bad_slice "a taint without an effect" 'spec.devices[0].taints[0].effect' 'Required value' \
	".spec.devices[0].taints = [$TAINT | del(.effect)]"
bad_slice "17 taints" 'spec.devices[0].taints' 'Too many: 17: must have at most 16' \
	".spec.devices[0].taints = [range(17) | $TAINT | .key = \"t\(.)\"]"
bad_slice "65 devices, one tainted" spec.devices 'Too many: 65: must have at most 64' \
	".spec.devices = [range(65) | {name: \"nic\(.)\"}] | .spec.devices[64].taints = [$TAINT]"
slice "$W/wide.json" node1-wide node5 '.spec.devices = [range(128) | {name: "nic\(.)"}]'
req -n "$KT" POST "$SLICES" "$W/wide.json"
expect_status "128 devices, none tainted: 201" 201 '(.spec.devices | length) == 128'
jq --argjson t "$(jq -nc "$TAINT")" '.spec.devices[5].taints = [$t]' <<<"$BODY" >"$W/wide2.json"
req "$KT" PUT "$SLICES/node1-wide" "$W/wide2.json"
expect_status "one of them tainted: 422, 64 at most" 422 \
	'.details.causes | any(.field == "spec.devices" and (.message | test("Too many: 128: must have at most 64")))'
req -w "ResourceSlice node1-wide" "$KT" DELETE "$SLICES/node1-wide"
slice "$W/t1.json" node1-tainted node1 ".spec.devices[0].taints = [$TAINT | .timeAdded = \"2026-12-04T14:07:59.25+01:00\"] |
	.spec.devices[1].taints = [$TAINT | del(.timeAdded, .value) | .effect = \"None\"]"
req -n "$KT" POST "$SLICES" "$W/t1.json"
expect_status "a tainted slice: 201, the time in UTC to the second, an absent one now" 201 \
	'.spec.devices[0].taints[0].timeAdded == "2026-12-04T13:07:59Z" and
	 .spec.devices[0].taints[0].effect == "NoSchedule" and .spec.devices[1].taints[0].effect == "None" and
	 (.spec.devices[1].taints[0].timeAdded | fromdateiso8601) > (now - 60)'
slice "$W/t2.json" node1-badtime node1 ".spec.devices[0].taints = [$TAINT | .timeAdded = \"2026-12-04 13:07:59\"]"
req -n "$KT" POST "$SLICES" "$W/t2.json"
expect_status "a timeAdded that is not RFC 3339: 400, as the decoder refuses it" 400 \
	'.message | test("parsing time \"2026-12-04 13:07:59\"")'
# DRADeviceTaints off (before 1.36): taints dropped, unless the stored slice has some.
echo "DRADeviceTaints=false" >"$W/mode.gates"
slice "$W/t3.json" node1-gateoff node1 ".spec.devices[0].taints = [$TAINT]"
req -n "$KT" POST "$SLICES" "$W/t3.json"
expect_status "the gate off: the slice stored, its taints dropped" 201 \
	'(.spec.devices[0] | has("taints") | not)'
req "$KT" GET "$SLICES/node1-tainted"
jq '.spec.devices[0].taints[0].value = "RDMADeviceGone"' <<<"$BODY" >"$W/t4.json"
req "$KT" PUT "$SLICES/node1-tainted" "$W/t4.json"
expect_status "the gate off: a slice that has taints keeps them" 200 \
	'.spec.devices[0].taints[0].value == "RDMADeviceGone"'
rm -f "$W/mode.gates"
req -w "ResourceSlice node1-gateoff" "$KT" DELETE "$SLICES/node1-gateoff"

# Shared devices and counters (KEP-5075 consumable capacity, KEP-4815 counters),
# as the DRA driver publishes a NIC pods share: nic0 consumes its counter set,
# nic1 is nic0's shared device; the counter set in a slice of its own.
SHARE='{allowMultipleAllocations: true, consumesCounters: [{counterSet: "nic0", counters: {nic: {value: "1"}}}],
	capacity: {shares: {value: "4", requestPolicy: {default: "1", validValues: ["1"]}}}}'
SHARED=".spec.devices[0].consumesCounters = [{counterSet: \"nic0\", counters: {nic: {value: \"1\"}}}] |
	.spec.devices[1] += $SHARE"
COUNTERS='del(.spec.devices) | .spec.sharedCounters = [{name: "nic0", counters: {nic: {value: "1"}}}]'
POL='.spec.devices[1].capacity.shares.requestPolicy'
slice "$W/sh1.json" node1-shared node1 "$SHARED"
req -n "$KT" POST "$SLICES" "$W/sh1.json"
expect_status "a slice of a NIC and its shared device: 201, kept as sent" 201 \
	'.spec.devices[1].allowMultipleAllocations == true and
	 .spec.devices[1].capacity.shares.requestPolicy.validValues == ["1"] and
	 .spec.devices[0].consumesCounters[0].counterSet == "nic0"'
slice "$W/sh2.json" node1-counters node1 "$COUNTERS"
req -n "$KT" POST "$SLICES" "$W/sh2.json"
expect_status "a slice of counter sets: 201" 201 \
	'(.spec | has("devices") | not) and .spec.sharedCounters[0].counters.nic.value == "1"'
slice "$W/sh3.json" node1-range node1 "$SHARED | $POL = {default: \"2\", validRange: {min: \"1\", max: \"4\", step: \"1\"}}"
req -n "$KT" POST "$SLICES" "$W/sh3.json"
expect_status "a validRange policy: 201" 201 '.spec.devices[1].capacity.shares.requestPolicy.validRange.max == "4"'
req -w "ResourceSlice node1-range" "$KT" DELETE "$SLICES/node1-range"
bad_slice "devices and sharedCounters in one slice" spec \
	'only one of `sharedCounters` or `devices` is allowed' '.spec.sharedCounters = [{name: "nic0", counters: {nic: {value: "1"}}}]'
bad_slice "9 counter sets" spec.sharedCounters 'Too many: 9: must have at most 8' \
	"$COUNTERS | .spec.sharedCounters = [range(9) | {name: \"s\(.)\", counters: {nic: {value: \"1\"}}}]"
bad_slice "a counter set not named by a DNS label" 'spec.sharedCounters[0].name' 'Invalid value: "NIC_0"' \
	"$COUNTERS | .spec.sharedCounters[0].name = \"NIC_0\""
bad_slice "a counter set without a name" 'spec.sharedCounters[0].name' 'Required value' \
	"$COUNTERS | del(.spec.sharedCounters[0].name)"
bad_slice "two counter sets of one name" 'spec.sharedCounters[1]' 'Duplicate value: "nic0"' \
	"$COUNTERS | .spec.sharedCounters += .spec.sharedCounters"
bad_slice "a counter set without counters" 'spec.sharedCounters[0].counters' 'Required value' \
	"$COUNTERS | .spec.sharedCounters[0].counters = {}"
bad_slice "a counter set of 33 counters" 'spec.sharedCounters[0].counters' 'Too many: 33: must have at most 32' \
	"$COUNTERS | .spec.sharedCounters[0].counters = ([range(33) | {key: \"c\(.)\", value: {value: \"1\"}}] | from_entries)"
bad_slice "a counter not named by a DNS label" 'spec.sharedCounters[0].counters' 'Invalid value: "Nic"' \
	"$COUNTERS | .spec.sharedCounters[0].counters = {Nic: {value: \"1\"}}"
bad_slice "3 counter consumptions of a device" 'spec.devices[0].consumesCounters' 'Too many: 3: must have at most 2' \
	"$SHARED | .spec.devices[0].consumesCounters = [range(3) | {counterSet: \"s\(.)\", counters: {nic: {value: \"1\"}}}]"
bad_slice "a consumption's counterSet not a DNS label" 'spec.devices[0].consumesCounters[0].counterSet' \
	'Invalid value: "Nic0"' "$SHARED | .spec.devices[0].consumesCounters[0].counterSet = \"Nic0\""
bad_slice "a consumption without its counterSet" 'spec.devices[0].consumesCounters[0].counterSet' \
	'Required value' "$SHARED | del(.spec.devices[0].consumesCounters[0].counterSet)"
bad_slice "one counter set consumed twice by a device" 'spec.devices[0].consumesCounters[1]' \
	'Duplicate value: "nic0"' "$SHARED | .spec.devices[0].consumesCounters += .spec.devices[0].consumesCounters"
bad_slice "a consumption without counters" 'spec.devices[0].consumesCounters[0].counters' 'Required value' \
	"$SHARED | del(.spec.devices[0].consumesCounters[0].counters)"
bad_slice "a consumption of 33 counters" 'spec.devices[0].consumesCounters[0].counters' \
	'Too many: 33: must have at most 32' \
	"$SHARED | .spec.devices[0].consumesCounters[0].counters = ([range(33) | {key: \"c\(.)\", value: {value: \"1\"}}] | from_entries)"
bad_slice "65 devices, one consuming counters" spec.devices 'Too many: 65: must have at most 64' \
	".spec.devices = [range(65) | {name: \"nic\(.)\"}] | .spec.devices[64].consumesCounters = [{counterSet: \"x\", counters: {nic: {value: \"1\"}}}]"
bad_slice "a requestPolicy of a device not allocatable many times" \
	'spec.devices[1].capacity[shares].requestPolicy' 'Forbidden: allowMultipleAllocations must be true' \
	"$SHARED | del(.spec.devices[1].allowMultipleAllocations)"
bad_slice "both validValues and validRange" 'spec.devices[1].capacity[shares].requestPolicy' \
	'exactly one policy can be specified' "$SHARED | $POL.validRange = {min: \"1\"}"
bad_slice "validValues without a default" 'spec.devices[1].capacity[shares].requestPolicy.default' \
	'Required value: required when validValues is defined' "$SHARED | del($POL.default)"
bad_slice "validValues not ascending" 'spec.devices[1].capacity[shares].requestPolicy.validValues[1]' \
	'Invalid value: "1": values must be sorted in ascending order' "$SHARED | $POL.validValues = [\"2\", \"1\"]"
bad_slice "a valid value twice" 'spec.devices[1].capacity[shares].requestPolicy.validValues[1]' \
	'Duplicate value' "$SHARED | $POL.validValues = [\"1\", \"1\"]"
bad_slice "11 valid values" 'spec.devices[1].capacity[shares].requestPolicy.validValues' \
	'Too many: 11: must have at most 10' \
	"$SHARED | .spec.devices[1].capacity.shares.value = \"20\" | $POL.validValues = [range(1; 12) | tostring]"
bad_slice "a valid value above the capacity" 'spec.devices[1].capacity[shares].requestPolicy.validValues[1]' \
	'option is larger than capacity value: 4' "$SHARED | $POL.validValues = [\"1\", \"5\"]"
bad_slice "a default not among the valid values" 'spec.devices[1].capacity[shares].requestPolicy.validValues' \
	'default value is not valid according to the requestPolicy' "$SHARED | $POL.default = \"2\""
bad_slice "validRange without a default" 'spec.devices[1].capacity[shares].requestPolicy.default' \
	'required when validRange is defined' "$SHARED | $POL = {validRange: {min: \"1\"}}"
bad_slice "validRange without min" 'spec.devices[1].capacity[shares].requestPolicy.validRange.min' \
	'Required value' "$SHARED | $POL = {default: \"1\", validRange: {max: \"2\"}}"
bad_slice "a min above the capacity" 'spec.devices[1].capacity[shares].requestPolicy.validRange.min' \
	'min is larger than capacity value: 4' "$SHARED | $POL = {default: \"5\", validRange: {min: \"5\"}}"
bad_slice "a default below min" 'spec.devices[1].capacity[shares].requestPolicy.validRange.default' \
	'default is less than min: 2' "$SHARED | $POL = {default: \"1\", validRange: {min: \"2\"}}"
bad_slice "min above max" 'spec.devices[1].capacity[shares].requestPolicy.validRange.max' \
	'min is larger than max: 2' "$SHARED | $POL = {default: \"3\", validRange: {min: \"3\", max: \"2\"}}"
bad_slice "a max above the capacity" 'spec.devices[1].capacity[shares].requestPolicy.validRange.max' \
	'max is larger than capacity value: 4' "$SHARED | $POL = {default: \"1\", validRange: {min: \"1\", max: \"8\"}}"
bad_slice "a default above max" 'spec.devices[1].capacity[shares].requestPolicy.validRange.default' \
	'default is more than max: 2' "$SHARED | $POL = {default: \"3\", validRange: {min: \"1\", max: \"2\"}}"
bad_slice "a step of 0" 'spec.devices[1].capacity[shares].requestPolicy.validRange.step' \
	'must be greater than zero' "$SHARED | $POL = {default: \"1\", validRange: {min: \"1\", step: \"0\"}}"
bad_slice "one step past the capacity" 'spec.devices[1].capacity[shares].requestPolicy.validRange.step' \
	'one step 6 is larger than capacity value: 4' "$SHARED | $POL = {default: \"1\", validRange: {min: \"1\", step: \"5\"}}"
bad_slice "a default off the steps" 'spec.devices[1].capacity[shares].requestPolicy.validRange.step' \
	'value is not a multiple of a given step \(2\) from \(1\)' "$SHARED | $POL = {default: \"2\", validRange: {min: \"1\", step: \"2\"}}"
bad_slice "32 attributes and a capacity" 'spec.devices[1]' 'attributes and capacities must not exceed 32' \
	"$SHARED | .spec.devices[1].attributes = ([range(32) | {key: \"a\(.)\", value: {int: .}}] | from_entries)"
# What the decoder refuses (400, as the real API's): a quantity that is not one, a bool that is not.
for q in "$POL.default = \"one\"" '.spec.devices[1].capacity.shares.value = "4 shares"' \
	"$COUNTERS | .spec.sharedCounters[0].counters.nic.value = \"1x\""; do
	slice "$W/bad.json" bad-slice node9 "$SHARED | $q"
	req -n "$KT" POST "$SLICES" "$W/bad.json"
	expect_status "400 for a quantity that is not one ($q)" 400 '.message | test("quantities must match")'
done
slice "$W/bad.json" bad-slice node9 "$SHARED | .spec.devices[1].allowMultipleAllocations = \"yes\""
req -n "$KT" POST "$SLICES" "$W/bad.json"
expect_status "400 for an allowMultipleAllocations that is not a bool" 400 \
	'.message | test("allowMultipleAllocations of type bool")'
# DRAConsumableCapacity off: allowMultipleAllocations and requestPolicy dropped;
# DRAPartitionableDevices off: the counters; a slice that uses them keeps them.
echo "DRAConsumableCapacity=false" >"$W/mode.gates"
slice "$W/g1.json" node1-nocap node1 "$SHARED"
req -n "$KT" POST "$SLICES" "$W/g1.json"
expect_status "DRAConsumableCapacity off: allowMultipleAllocations and requestPolicy dropped, the rest kept" 201 \
	'(.spec.devices[1] | has("allowMultipleAllocations") | not) and
	 (.spec.devices[1].capacity.shares | has("requestPolicy") | not) and
	 .spec.devices[1].capacity.shares.value == "4" and .spec.devices[1].consumesCounters[0].counterSet == "nic0"'
req "$KT" GET "$SLICES/node1-shared"
jq '.spec.devices[1].capacity.shares.value = "5"' <<<"$BODY" >"$W/g2.json"
req "$KT" PUT "$SLICES/node1-shared" "$W/g2.json"
expect_status "DRAConsumableCapacity off: a slice that uses it keeps it" 200 \
	'.spec.devices[1].allowMultipleAllocations == true and .spec.devices[1].capacity.shares.value == "5"'
echo "DRAPartitionableDevices=false" >"$W/mode.gates"
slice "$W/g3.json" node1-nocounters node1 "$SHARED"
req -n "$KT" POST "$SLICES" "$W/g3.json"
expect_status "DRAPartitionableDevices off: consumesCounters dropped, allowMultipleAllocations kept" 201 \
	'([.spec.devices[] | has("consumesCounters")] == [false, false]) and .spec.devices[1].allowMultipleAllocations == true'
slice "$W/g4.json" node1-nosets node1 "$COUNTERS"
req -n "$KT" POST "$SLICES" "$W/g4.json"
expect_status "DRAPartitionableDevices off: sharedCounters dropped" 201 '(.spec | has("sharedCounters") | not)'
req "$KT" GET "$SLICES/node1-counters"
jq '.spec.sharedCounters += [{name: "nic1", counters: {nic: {value: "1"}}}]' <<<"$BODY" >"$W/g5.json"
req "$KT" PUT "$SLICES/node1-counters" "$W/g5.json"
expect_status "DRAPartitionableDevices off: a slice that uses it keeps it" 200 '(.spec.sharedCounters | length) == 2'
rm -f "$W/mode.gates"
for n in node1-nocap node1-nocounters node1-nosets; do
	req -w "ResourceSlice $n" "$KT" DELETE "$SLICES/$n"
done

# Retries: idempotent calls go through 503s, POST does not.
echo "status 503 2" >"$W/mode"
: >"$W/requests.log"
req "$KT" GET "$SLICES/node1-nics"
expect_status "GET a slice through 503 twice" 200
[[ $(requests " 503 ") == 2 && $(requests " 200 ") == 1 ]] && pass "GET slice: three requests" ||
	failure "GET slice under 503: $(cat "$W/requests.log")"
jq '.spec.devices[0].attributes.roce.bool = false' <<<"$BODY" >"$W/put5.json"
echo "status 503 2" >"$W/mode"
: >"$W/requests.log"
req "$KT" PUT "$SLICES/node1-nics" "$W/put5.json"
expect_status "PUT with a resourceVersion through 503 twice (its body resent)" 200 \
	'.spec.devices[0].attributes.roce.bool == false'
[[ $(requests "resourceslices/node1-nics .* 503 ") == 2 && $(requests " 200 ") == 1 ]] &&
	pass "PUT: three requests" || failure "PUT under 503: $(cat "$W/requests.log")"
slice "$W/s4.json" node4-nics node4
echo "status 503 1" >"$W/mode"
: >"$W/requests.log"
req -n -w "ResourceSlice node4-nics" "$KT" POST "$SLICES" "$W/s4.json"
expect_code "POST under 503: not retried, try again later" 11 'POST ResourceSlice node4-nics: HTTP 503' '1 attempt in'
[[ $(requests " 503 ") == 1 && $(wc -l <"$W/requests.log") == 1 ]] && pass "POST: one request" ||
	failure "POST under 503: $(cat "$W/requests.log")"
echo "429 1 0" >"$W/mode"
: >"$W/requests.log"
req -n "$KT" POST "$SLICES" "$W/s4.json"
expect_status "POST under 429: retried (the server did not act on it)" 201
[[ $(requests " 429 ") == 1 && $(requests " 201 ") == 1 ]] && pass "POST: 429 then 201" ||
	failure "POST under 429: $(cat "$W/requests.log")"
echo "status 500" >"$W/mode"
req -t 2000 "$KT" GET "$SLICES"
expect_code "list under 500 every time: try again later" 11 'HTTP 500' 'attempts in'
echo bigchunked >"$W/mode"
req "$KT" GET "$SLICES"
expect_code "a 2 MiB list is refused" 109 'larger than 1048576 bytes'
echo "status 403" >"$W/mode"
req -r resourceslices -v list "$KT" GET /apis/resource.k8s.io/v1/resourceslices
expect_code "403 of a cluster-scoped list names verb and resource" 109 \
	'may not list resourceslices \(it needs RBAC list on resourceslices\)'
req -r resourceslices "$KT" PUT /apis/resource.k8s.io/v1/resourceslices/x "$W/s1.json"
expect_code "403 of a PUT: verb update" 109 \
	'may not update resourceslices \(it needs RBAC update on resourceslices\)'
req -r resourceclaims/status -N ml "$KT" PATCH /apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/c/status
expect_code "403 of a PATCH: verb patch, the namespace" 109 \
	'may not patch resourceclaims/status in namespace ml \(it needs RBAC patch on resourceclaims/status\)'
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
	rm -rf "$W/kcache"
	held=$(for f in "$W"/res/resourceslices/*.json; do jq -c . "$f"; done | jq -sc 'sort_by(.metadata.name)')
	kubectl_res resourceslices
	((RC == 0)) && check "kubectl get resourceslices: the slices the stand-in holds" \
		'(.items | sort_by(.metadata.name) | map({name: .metadata.name, spec})) ==
		 ($h | map({name: .metadata.name, spec}))' --argjson h "$held" ||
		failure "kubectl get resourceslices failed"
else
	failure "kubectl is missing: scripts/install-deps.sh installs Debian's kubernetes-client"
fi

echo "$passed passed, $failed failed"
((failed == 0))
