#!/usr/bin/env bash
# The plugin's kubeconfig as `hpn-rdma-agent install` writes it (issue 40,
# finding 8), against the stand-in API server without root (ctest
# unit.kube-token; the prologue in suite.sh): it carries a token of the
# plugin's own ServiceAccount from TokenRequest (0600, its first line the
# marker), never the agent's; with it the plugin's pod lookup works and a list
# is refused; refused (no grant: an old manifest) the install goes on loudly,
# an older agent's file with the agent's token is removed and the plugin's own
# earlier one kept; installed again, a token with more than a fifth of its
# lifetime left is kept as it is. The running agent's renewal:
# netns.agent-podcache.
# Prints "N passed, N failed" last; exits 1 on any failure, 77 (SKIP) without
# openssl or python3.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=suite.sh
source "$(dirname "${BASH_SOURCE[0]}")/suite.sh"
AGENT=${HPN_AGENT:?run through ctest (HPN_AGENT=hpn-rdma-agent)}

mkdir -p "$W/sa" "$W/etc/net.d"
echo "$TA" >"$W/sa/token"
printf hpn-rdma >"$W/sa/namespace"
cp "$W/pki/ca.crt" "$W/sa/ca.crt"
export KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$KUBE_PORT_good
KC=$W/etc/net.d/hpn-rdma.d/hpn-rdma.kubeconfig
CONF=$W/conf.conflist
jq -n --arg kc "$KC" '{cniVersion: "1.0.0", name: "t", plugins: [{type: "hpn-rdma",
	device: "x", kubernetes: {kubeconfig: $kc}}]}' >"$CONF"
ISSUED=$W/token-requests.issued

# install_kc ARGS...: the agent's install, its kubeconfig step only; OUT, RC.
install_kc() {
	LAST="hpn-rdma-agent install $*"
	RC=0
	OUT=$("$AGENT" install --no-plugin --conf "$CONF" --cni-conf-dir "$W/etc/net.d" \
		--kubeconfig "$KC" --service-account "$W/sa" "$@" 2>&1) || RC=$?
}
# ok WHAT CONDITION...: pass when the command succeeds.
ok() {
	local what=$1
	shift
	if "$@"; then pass "$what"; else failure "$what"; fi
}
last_issued() { awk '{print $2}' "$ISSUED" | tail -n 1; }

# Granted: the plugin's token, not the agent's.
echo "hpn-rdma/hpn-rdma-plugin $TA" >"$W/token-requests"
install_kc --plugin-token-seconds 600
ok "install with the grant" test "$RC" = 0
ok "the kubeconfig is 0600" test "$(stat -c %a "$KC")" = 600
ok "its first line names the plugin's ServiceAccount" \
	grep -q '^# hpn-rdma-plugin-token: hpn-rdma/hpn-rdma-plugin until ' <(head -n 1 "$KC")
ok "the agent's token is not in it" bash -c "! grep -qF '$TA' '$KC'"
TOK=$(last_issued)
ok "it holds the token the API issued" grep -qF "token: \"$TOK\"" "$KC"
ok "the TokenRequest was the agent's, for hpn-rdma/hpn-rdma-plugin" grep -qE \
	' /api/v1/namespaces/hpn-rdma/serviceaccounts/hpn-rdma-plugin/token token:hpn-tokA 201 ' \
	"$W/requests.log"
EXP=$(awk '{print $3}' "$ISSUED" | tail -n 1)
ok "expirationSeconds as asked (600)" test $((EXP - $(date +%s) <= 600 && EXP - $(date +%s) > 590)) = 1

# The plugin's lookup with it: the pod, as the plugin's ServiceAccount; no list.
get -k "$KC" "$P16"
expect_pod "the plugin's lookup with its own token" "$(uid_of "$P16")" 16
ok "the GET was the plugin ServiceAccount's" grep -q \
	" /api/v1/namespaces/ml/pods/p16en-16gpu-0 system:serviceaccount:hpn-rdma:hpn-rdma-plugin 200 " \
	"$W/requests.log"
CODE=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$W/pki/ca.crt" \
	-H "Authorization: Bearer $TOK" "$good/api/v1/pods")
ok "the plugin's token cannot list pods (403)" test "$CODE" = 403

# Again (an init container's restart): the token has more than a fifth of its
# lifetime left, the file is left as it is, no TokenRequest.
N=$(wc -l <"$ISSUED")
install_kc --plugin-token-seconds 600
ok "install again: unchanged" grep -q "unchanged .*hpn-rdma.kubeconfig" <<<"$OUT"
ok "install again: no new TokenRequest" test "$(wc -l <"$ISSUED")" = "$N"
# Again for 3600 s: 600 s left is less than a fifth of that: a new token.
install_kc
ok "install again for 3600 s" test "$RC" = 0
ok "install again for 3600 s writes a new token" grep -qF "token: \"$(last_issued)\"" "$KC"
ok "install again for 3600 s asked the API" test "$(wc -l <"$ISSUED")" = $((N + 1))

# Refused (an old manifest: no grant), an older agent's file in place.
: >"$W/token-requests"
kubeconfig "$KC" "$good" data "token: $TA"
install_kc
ok "refused: the install goes on" test "$RC" = 0
ok "refused: said, with the 403 and the missing permission" \
	bash -c 'grep -q "ERROR: the plugin'"'"'s kubeconfig" <<<"$1" && grep -q 403 <<<"$1" &&
		grep -q serviceaccounts/token <<<"$1"' _ "$OUT"
ok "refused: the agent's token removed from disk" test ! -e "$KC"
ok "refused: the removal said, and counted as a change" bash -c 'grep -q "^  removed .*hpn-rdma.kubeconfig" <<<"$1" &&
	! grep -q "^nothing changed" <<<"$1"' _ "$OUT"

# Refused with the plugin's own earlier kubeconfig in place: kept until it expires.
# (600 s, then asked for 3600: it is renewed.)
echo "hpn-rdma/hpn-rdma-plugin $TA" >"$W/token-requests"
install_kc --plugin-token-seconds 600
: >"$W/token-requests"
install_kc
ok "refused with its own token in place: said" grep -q 403 <<<"$OUT"
ok "refused: the plugin's own earlier token kept" grep -qF "token: \"$(last_issued)\"" "$KC"

# A grant for another ServiceAccount only: refused (403).
echo "hpn-rdma/other $TA" >"$W/token-requests"
rm -f "$KC"
install_kc
ok "a grant for another ServiceAccount only: 403" grep -q 403 <<<"$OUT"

echo "$passed passed, $failed failed"
((failed == 0))
