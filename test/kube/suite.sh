# shellcheck shell=bash
# The prologue of the Kubernetes API tests without root (kube.sh, slices.sh,
# claims.sh; each its own ctest): the tools checked, the scratch directory and
# the EXIT trap that stops the server and removes it, the report helpers
# (pass, failure, check, expect_code: "N passed, N failed" at the end of each
# script), kube_get's and kube_req's runners (get, req, expect_status), the
# test PKI and the stand-in API server (apiserver.py, lib.sh), the fixtures'
# pods and the token kubeconfig $KT every file uses. Sourced after
# `set -euo pipefail`.
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

# The driver name of the ResourceSlices and claims of slices.sh and claims.sh.
DRV=rdma.hpn.example.com
