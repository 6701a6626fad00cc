#!/usr/bin/env bash
# The Kubernetes API lookup end to end, without root (ctest unit.kube):
# kube_get (kubeconfig load + hpn_kube_get_pod + hpn_pod_parse, as the plugin
# will call them) against the stand-in API server (apiserver.py: HTTPS on
# 127.0.0.1, a test PKI made here with openssl, bearer tokens and client
# certificates), through every fault mode and the good paths, asserting the
# exact CNI code and that the message names the server, the pod or the field.
# kube_req (hpn_kube_request, the call the agent's DRA driver makes) creates,
# lists by field selector, updates (409 on a stale resourceVersion) and
# deletes ResourceSlices, meets the API's validation (422 naming the field),
# reads a ResourceClaim and applies its status; retries go through 503 for GET
# and PUT, never for POST or apply.
# kubectl reads the same pods, slices and claims with the same kubeconfigs, so
# the stand-in and the kubeconfigs are checked by a real Kubernetes client.
# Nothing leaves loopback; the scratch directory and the server go in the EXIT
# trap (and the server ends by itself after 5 minutes anyway).
# Prints "N passed, N failed" last; exits 1 on any failure, 77 (SKIP) without
# openssl or python3.
set -euo pipefail
GET=${HPN_KUBE_GET:?run through ctest (HPN_KUBE_GET=kube_get)}
SRC=${HPN_SRC:?run through ctest}
PODS=$SRC/test/fixtures/pods
# shellcheck source=test/kube/lib.sh
source "$SRC/test/kube/lib.sh"

command -v openssl >/dev/null || { echo "SKIP: no openssl (scripts/install-deps.sh)"; exit 77; }
[[ -x $PY ]] || { echo "SKIP: no $PY (scripts/install-deps.sh)"; exit 77; }
command -v jq >/dev/null || { echo "SKIP: no jq (scripts/install-deps.sh)"; exit 77; }

KUBE_WORK=$(mktemp -d /tmp/hpn-kube.XXXXXX)
trap 'kube_stop; rm -rf "$KUBE_WORK"' EXIT
W=$KUBE_WORK
# Proxies from the environment would take kubectl elsewhere (libcurl is told
# to use none); HOME keeps kubectl's files in the scratch dir.
unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy ALL_PROXY all_proxy NO_PROXY no_proxy
export HOME=$W

passed=0 failed=0
pass() {
	passed=$((passed + 1))
	echo "ok: $*"
}
failure() {
	failed=$((failed + 1))
	{
		echo "FAIL: $*"
		echo "  command: ${LAST:-}"
		echo "  exit: ${RC:-} stdout: ${OUT:-}"
		echo "  stderr: ${ERR:-}"
	} >&2
}

# get ARGS...: runs kube_get; sets OUT (its last line), ERR, RC.
get() {
	LAST="kube_get $*"
	RC=0
	"$GET" "$@" >"$W/out" 2>"$W/err" || RC=$?
	OUT=$(tail -n 1 "$W/out")
	ERR=$(cat "$W/err")
}

# check WHAT JQ [jq args]: the JQ filter is true on OUT.
check() {
	local what=$1 filter=$2
	shift 2
	if jq -e "$@" "$filter" <<<"$OUT" >/dev/null 2>&1; then
		pass "$what"
	else
		failure "$what: jq '$filter' is false"
	fi
}

# expect_pod WHAT UID COUNT: the lookup succeeded with this pod and count.
expect_pod() {
	if ((RC == 0)); then
		check "$1" '.uid == $u and .count == ($n | tonumber)' --arg u "$2" --arg n "$3"
	else
		failure "$1: expected the pod, got exit $RC"
	fi
}

# expect_code WHAT CODE REGEX...: the lookup failed with CODE and msg + details
# matching every REGEX.
expect_code() {
	local what=$1 code=$2 re
	shift 2
	if ((RC != 1)); then
		failure "$what: expected code $code, got exit $RC"
		return
	fi
	for re in "$@"; do
		jq -e --arg re "$re" '(.msg + " " + .details) | test($re)' <<<"$OUT" >/dev/null 2>&1 ||
			{ failure "$what: the message does not match /$re/"; return; }
	done
	check "$what" '.code == ($c | tonumber)' --arg c "$code"
}

# requests PATH-REGEX: how many logged requests match.
requests() {
	grep -cE "$1" "$W/requests.log" || true
}

re_quote() {
	sed 's/[][\.|$(){}?+*^]/\\&/g' <<<"$1"
}

uid_of() {
	jq -r .metadata.uid "$PODS/$1.json"
}

kube_pki
KUBE_RESOURCES=$W/res
kube_start "$PODS"
good=https://127.0.0.1:$KUBE_PORT_good
GOOD=$(re_quote "$good")
TA=hpn-tokA-$$ TB=hpn-tokB-$$
echo "$TA" >"$W/tokens"
SEED=default/seed-gu8tf-7d9c5b8f4-x2kqp
P16=ml/p16en-16gpu-0
P8=ml/p16en-8gpu-0
PLAIN=default/plain-web-5c6d7e8f9-abcde
SIDE=ml/init-sidecar-0
KT=$W/token.kubeconfig
kubeconfig "$KT" "$good" file "token: $TA"

# ---- good paths -----------------------------------------------------------------

get -k "$KT" "$SEED"
expect_pod "token, CA file: the seed's pod" "$(uid_of "$SEED")" 8
check "the seed's labels" '.labels["alibabacloud.com/hpn-type"] == "rdma" and
	.labels["alibabacloud.com/gpu-model-series"] == "GU8TF" and .namespace == "default"'
[[ $(requests "pods/seed-gu8tf-7d9c5b8f4-x2kqp token:${TA:0:8} 200") == 1 ]] &&
	pass "one request, with the bearer token" || failure "the request log lacks the token request"
get -k "$KT" "$P16"
expect_pod "P16EN with 16 GPUs (8 + 8)" "$(uid_of "$P16")" 16
get -k "$KT" "$P8"
expect_pod "P16EN with 8 GPUs" "$(uid_of "$P8")" 8
get -k "$KT" "$SIDE"
expect_pod "init container and sidecar: max(2 + 2 + 1, 1 + 8)" "$(uid_of "$SIDE")" 9
get -k "$KT" "$PLAIN"
expect_pod "a pod without the label or GPUs" "$(uid_of "$PLAIN")" 0
check "no hpn label on it" '.labels | has("alibabacloud.com/hpn-type") | not'
get -k "$KT" -r cpu "$PLAIN"
expect_code "resource cpu: 500m is not a count" 109 "$GOOD" \
	'pod\.spec\.containers\[0\]\.resources\.limits\.cpu is "500m"'
get -k "$KT" -u "$(uid_of "$SEED")" "$SEED"
expect_pod "K8S_POD_UID matches" "$(uid_of "$SEED")" 8
get -k "$KT" -u 00000000-1111-2222-3333-444444444444 "$SEED"
expect_code "K8S_POD_UID differs: another pod under that name" 3 "$GOOD" \
	"uid is $(uid_of "$SEED"), not K8S_POD_UID 00000000-1111-2222-3333-444444444444"

# A static pod: K8S_POD_UID is the static pod's own, the API's mirror pod names it.
MIRROR=kube-system/rdma-probe-gpu-node-17
get -k "$KT" -u 3c1f0e9a7b5d42c8a6e4f2d0b8c6a4e2 "$MIRROR"
expect_pod "a static pod's mirror: K8S_POD_UID in kubernetes.io/config.mirror" "$(uid_of "$MIRROR")" 1
get -k "$KT" -u 3c1f0e9a7b5d42c8a6e4f2d0b8c6a4e3 "$MIRROR"
expect_code "a mirror pod of another static pod" 3 "uid is $(uid_of "$MIRROR"), not K8S_POD_UID"

# tokenFile: read on every call. Rotated between two lookups of one process,
# on the server and in the file, both succeed; with an inline token the second
# is refused, so the server did rotate.
echo "$TA" >"$W/tokenfile"
chmod 600 "$W/tokenfile"
kubeconfig "$W/tf.kubeconfig" "$good" file "tokenFile: $W/tokenfile"
: >"$W/requests.log"
get -k "$W/tf.kubeconfig" -b "echo $TB >'$W/tokenfile'; echo $TB >'$W/tokens'" "$SEED" "$SEED"
if ((RC == 0)) && [[ $(requests "token:${TA:0:8} 200") == 1 && $(requests "token:${TB:0:8} 200") == 1 ]]; then
	pass "tokenFile rotated between two calls: the new token is sent"
else
	failure "tokenFile rotated between two calls"
fi
[[ -z $ERR ]] && pass "no warning for a token file of mode 0600" ||
	failure "a warning for a private token file: $ERR"
echo "$TA" >"$W/tokens"
get -k "$KT" -b "echo $TB >'$W/tokens'" "$SEED" "$SEED"
expect_code "inline token after the server rotated: 401 (the control)" 109 "401 Unauthorized"
echo "$TA" >"$W/tokens"
echo "$TA" >"$W/tokenfile"
chmod 644 "$W/tokenfile"
get -k "$W/tf.kubeconfig" "$SEED"
if ((RC == 0)) && grep -q "^warning: token file $W/tokenfile .*readable by group or others (mode 0644)" "$W/err"; then
	pass "a token file readable by others: a warning, and the lookup goes on"
else
	failure "no warning for a token file of mode 0644"
fi

kubeconfig "$W/cert.kubeconfig" "$good" data cert
: >"$W/requests.log"
get -k "$W/cert.kubeconfig" "$P16"
expect_pod "client certificate files, CA data" "$(uid_of "$P16")" 16
[[ $(requests "cert:hpn-rdma 200") == 1 ]] && pass "the server saw the certificate's user" ||
	failure "the server did not see the client certificate"
KC=$W/certdata.kubeconfig
kubeconfig "$KC" "https://localhost:$KUBE_PORT_good" file certdata
get -k "$KC" "$SEED"
expect_pod "client certificate data, https://localhost (DNS SAN)" "$(uid_of "$SEED")" 8

# ---- the API server's faults ------------------------------------------------------

kubeconfig "$W/bad.kubeconfig" "$good" file "token: not-$TA"
get -k "$W/bad.kubeconfig" "$SEED"
expect_code "401" 109 "$GOOD" "GET pod $SEED" '401 Unauthorized' 'user "hpn-rdma"'
echo "status 403" >"$W/mode"
get -k "$KT" "$SEED"
expect_code "403" 109 "$GOOD" '403 Forbidden' 'may not get pods in namespace default' \
	'the API server says: stand-in fault: 403'
: >"$W/mode"
get -k "$KT" default/no-such-pod
expect_code "404: the pod does not exist" 3 "$GOOD" 'pod default/no-such-pod does not exist'

echo "status 503 2" >"$W/mode"
: >"$W/requests.log"
get -k "$KT" "$SEED"
expect_pod "503 twice, then the pod" "$(uid_of "$SEED")" 8
[[ $(requests " 503 ") == 2 && $(requests " 200 ") == 1 ]] && pass "three requests made" ||
	failure "503 twice: $(cat "$W/requests.log")"
echo "status 500" >"$W/mode"
get -k "$KT" "$SEED"
expect_code "500 every time: try again later" 11 "$GOOD" "GET pod $SEED" 'HTTP 500' \
	'5 attempts in [0-9]+ ms'
echo "429 1 1" >"$W/mode"
: >"$W/requests.log"
get -k "$KT" "$SEED"
expect_pod "429 with Retry-After: 1, then the pod" "$(uid_of "$SEED")" 8
if awk '/ 429 / { t = $5 } / 200 / && t { ok = ($5 - t >= 0.95) } END { exit !ok }' "$W/requests.log"; then
	pass "the retry waited the Retry-After second"
else
	failure "Retry-After not honoured: $(cat "$W/requests.log")"
fi
echo "429 1 30" >"$W/mode"
: >"$W/requests.log"
get -k "$KT" -t 2000 "$SEED"
expect_code "429 with a Retry-After past the budget" 11 "$GOOD" \
	'HTTP 429 Too Many Requests with Retry-After of 30 s, past the 2000 ms budget'
[[ $(requests " 429 ") == 1 && $(requests " 200 ") == 0 ]] && pass "no request after it" ||
	failure "requests after a long Retry-After: $(cat "$W/requests.log")"
echo type >"$W/mode"
get -k "$KT" "$SEED"
expect_code "Content-Type text/html" 109 "$GOOD" 'Content-Type is "text/html", not application/json'
echo big >"$W/mode"
get -k "$KT" "$SEED"
expect_code "a 2 MiB answer with Content-Length" 109 "$GOOD" 'larger than 1048576 bytes'
echo bigchunked >"$W/mode"
get -k "$KT" "$SEED"
expect_code "a 2 MiB chunked answer" 109 "$GOOD" 'larger than 1048576 bytes'
echo badjson >"$W/mode"
get -k "$KT" "$SEED"
expect_code "truncated JSON" 109 "$GOOD" "GET pod $SEED" 'not a valid Pod: it is not valid JSON'
echo stall >"$W/mode"
get -k "$KT" -t 1000 "$SEED"
expect_code "a server that never answers" 11 "$GOOD" 'no answer in time' '1 attempt in'
echo stallbody >"$W/mode"
get -k "$KT" -t 1000 "$SEED"
expect_code "a server that stops halfway" 11 "$GOOD" 'no answer in time'
: >"$W/mode"

closed=https://127.0.0.1:$KUBE_PORT_closed
kubeconfig "$W/closed.kubeconfig" "$closed" file "token: $TA"
get -k "$W/closed.kubeconfig" "$SEED"
expect_code "connection refused: retried, then try again later" 11 "$(re_quote "$closed")" \
	"Couldn't connect" '5 attempts'
wrong=https://127.0.0.1:$KUBE_PORT_wrongname
kubeconfig "$W/wrong.kubeconfig" "$wrong" file "token: $TA"
get -k "$W/wrong.kubeconfig" "$SEED"
expect_code "TLS: a certificate for another name" 109 "$(re_quote "$wrong")" \
	'not issued for the host of cluster "stand-in"' '127\.0\.0\.1'
other=https://127.0.0.1:$KUBE_PORT_otherca
kubeconfig "$W/other.kubeconfig" "$other" file "token: $TA"
get -k "$W/other.kubeconfig" "$SEED"
expect_code "TLS: a certificate from another CA" 109 "$(re_quote "$other")" \
	"not signed by the kubeconfig's certificate-authority $(re_quote "$W/pki/ca.crt")"
kubeconfig "$W/otherfile.kubeconfig" "$good" otherfile "token: $TA"
get -k "$W/otherfile.kubeconfig" "$SEED"
expect_code "TLS: the kubeconfig trusts another CA" 109 "$GOOD" 'not signed by'
kubeconfig "$W/othercert.kubeconfig" "$good" file othercert
get -k "$W/othercert.kubeconfig" "$SEED"
expect_code "TLS: a client certificate the server does not trust" 109 "$GOOD" \
	'client certificate' 'unknown ca'

# ---- what never reaches the server ---------------------------------------------

: >"$W/requests.log"
get -k "$KT" Bad_NS/pod
expect_code "a namespace that is not a DNS label" 4 'K8S_POD_NAMESPACE "Bad_NS"'
get -k "$KT" "default/a%2F..%2Fb"
expect_code "a pod name that is not a DNS subdomain" 4 'K8S_POD_NAME'
[[ ! -s $W/requests.log ]] && pass "no request for bad names" ||
	failure "bad names reached the server: $(cat "$W/requests.log")"
get -k "$W/missing.kubeconfig" "$SEED"
expect_code "a missing kubeconfig" 5 "kubeconfig $(re_quote "$W")/missing.kubeconfig: No such file"
kubeconfig "$W/exec.kubeconfig" "$good" file "exec:" "  command: aws" "  apiVersion: client.authentication.k8s.io/v1"
get -k "$W/exec.kubeconfig" "$SEED"
expect_code "an exec user" 7 'users\["hpn-rdma"\]\.user\.exec \(an exec credential plugin\) is not supported'

# ---- hpn_kube_request: the general call (kube_req) ------------------------------

REQ=${HPN_KUBE_REQ:?run through ctest (HPN_KUBE_REQ=kube_req)}
# req ARGS...: runs kube_req; sets RC, ST (the status line's number, or
# "none"), BODY (what follows it) and OUT (the error line: the last line when
# the status is not 2xx or there is none).
req() {
	LAST="kube_req $*"
	RC=0
	"$REQ" "$@" >"$W/out" 2>"$W/err" || RC=$?
	ERR=$(cat "$W/err")
	if [[ $(head -n 1 "$W/out") =~ ^status\ ([0-9]+)$ ]]; then
		ST=${BASH_REMATCH[1]}
		if ((ST >= 200 && ST <= 299)); then
			BODY=$(tail -n +2 "$W/out")
		else
			BODY=$(tail -n +2 "$W/out" | head -n -1)
		fi
	else
		ST=none BODY=
	fi
	OUT=$(tail -n 1 "$W/out")
}

# expect_status WHAT CODE [JQ [jq args]]: kube_req got HTTP CODE, and the JQ
# filter is true on the body.
expect_status() {
	local what=$1 code=$2
	shift 2
	if [[ $ST != "$code" ]]; then
		failure "$what: expected HTTP $code, got ${ST} (exit $RC)"
	elif (($# == 0)); then
		pass "$what"
	elif jq -e "${@:2}" "$1" <<<"$BODY" >/dev/null 2>&1; then
		pass "$what"
	else
		failure "$what: jq '$1' is false on the body: $BODY"
	fi
}

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
DRV=rdma.hpn.example.com
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

# kubectl_get KUBECONFIG NS/NAME: kubectl's JSON of the pod in OUT (exit in RC).
kubectl_get() {
	RC=0
	OUT=$(kubectl --kubeconfig "$1" --cache-dir "$W/kcache" --request-timeout 10s \
		get pod -n "${2%/*}" "${2#*/}" -o json 2>"$W/kerr") || RC=$?
	ERR=$(cat "$W/kerr")
	LAST="kubectl --kubeconfig $1 get pod -n ${2%/*} ${2#*/} -o json"
}
if command -v kubectl >/dev/null; then
	kubectl_get "$KT" "$SEED"
	((RC == 0)) && check "kubectl, token kubeconfig: the same pod" \
		'.metadata.uid == $u and .metadata.labels == $l' --arg u "$(uid_of "$SEED")" \
		--argjson l "$(jq -c .metadata.labels "$PODS/$SEED.json")" ||
		failure "kubectl with the token kubeconfig failed"
	rm -rf "$W/kcache"
	kubectl_get "$KC" "$P16"
	((RC == 0)) && check "kubectl, client certificate data: the same pod" \
		'.metadata.uid == $u and ([.spec.containers[].resources.limits["nvidia.com/gpu"]] == ["8", "8"])' \
		--arg u "$(uid_of "$P16")" || failure "kubectl with the certificate kubeconfig failed"
	kubectl_get "$W/tf.kubeconfig" "$P8"
	((RC == 0)) && check "kubectl, tokenFile kubeconfig: the same pod" '.metadata.uid == $u' \
		--arg u "$(uid_of "$P8")" || failure "kubectl with the tokenFile kubeconfig failed"
	rm -rf "$W/kcache"
	kubectl_get "$W/wrong.kubeconfig" "$SEED"
	((RC != 0)) && grep -q "x509: certificate is valid for .*localhost\|x509: certificate is valid for 127.0.0.2" "$W/kerr" &&
		pass "kubectl refuses the wrong-name certificate too" ||
		failure "kubectl and the wrong-name certificate: exit $RC, $ERR"
	rm -rf "$W/kcache"
	kubectl_get "$W/other.kubeconfig" "$SEED"
	((RC != 0)) && grep -q "x509: certificate signed by unknown authority" "$W/kerr" &&
		pass "kubectl refuses the other CA's certificate too" ||
		failure "kubectl and the other CA: exit $RC, $ERR"
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
	kubectl_res resourceclaims -n ml train-0-nics
	((RC == 0)) && check "kubectl get resourceclaims -n ml: the claim with its applied status" \
		'.kind == "ResourceClaim" and .status == $c.status and .metadata.resourceVersion == $c.metadata.resourceVersion' \
		--argjson c "$(cat "$CLAIM")" || failure "kubectl get resourceclaims failed"
else
	failure "kubectl is missing: scripts/install-deps.sh installs Debian's kubernetes-client"
fi

echo "$passed passed, $failed failed"
((failed == 0))
