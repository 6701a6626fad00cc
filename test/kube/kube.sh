#!/usr/bin/env bash
# The Kubernetes API pod lookup end to end, without root (ctest unit.kube):
# kube_get (kubeconfig load + hpn_kube_get_pod + hpn_pod_parse, as the plugin
# will call them) against the stand-in API server (apiserver.py: HTTPS on
# 127.0.0.1, a test PKI made here with openssl, bearer tokens and client
# certificates), through every fault mode and the good paths, asserting the
# exact CNI code and that the message names the server, the pod or the field;
# kubectl reads the same pods with the same kubeconfigs, so the stand-in and
# the kubeconfigs are checked by a real Kubernetes client. hpn_kube_request
# and ResourceSlices are in slices.sh (unit.kube-slices), a ResourceClaim's
# status in claims.sh (unit.kube-claims); the shared prologue in suite.sh.
# Nothing leaves loopback; the scratch directory and the server go in the EXIT
# trap (and the server ends by itself after 5 minutes anyway).
# Prints "N passed, N failed" last; exits 1 on any failure, 77 (SKIP) without
# openssl or python3.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=suite.sh
source "$(dirname "${BASH_SOURCE[0]}")/suite.sh"

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
else
	failure "kubectl is missing: scripts/install-deps.sh installs Debian's kubernetes-client"
fi

echo "$passed passed, $failed failed"
((failed == 0))
