# shellcheck shell=bash
# Helpers for the Kubernetes lookup's tests and benchmark: a test PKI made with
# openssl, kubeconfigs, and the stand-in API server (apiserver.py) on loopback.
# The caller sets KUBE_WORK (a scratch directory it removes) and calls
# kube_stop from its EXIT trap.

KUBE_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=/usr/bin/python3
KUBE_PID=

# ec_key_cert NAME CA CN SAN EKU: a P-256 key and a certificate signed by CA
# (ca or otherca) in $KUBE_WORK/pki, for a day.
ec_leaf() {
	local d=$KUBE_WORK/pki name=$1 ca=$2 cn=$3 san=$4 eku=$5
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-subj "/CN=$cn" -keyout "$d/$name.key" -out "$d/$name.csr" 2>/dev/null
	{
		[[ -n $san ]] && echo "subjectAltName=$san"
		echo "extendedKeyUsage=$eku"
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature"
	} >"$d/$name.ext"
	openssl x509 -req -in "$d/$name.csr" -CA "$d/$ca.crt" -CAkey "$d/$ca.key" \
		-set_serial "0x$(openssl rand -hex 8)" -days 1 -extfile "$d/$name.ext" \
		-out "$d/$name.crt" 2>/dev/null
	rm -f "$d/$name.csr" "$d/$name.ext"
}

ec_ca() {
	local d=$KUBE_WORK/pki name=$1 cn=$2
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
		-subj "/CN=$cn" -keyout "$d/$name.key" -out "$d/$name.crt" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

# kube_pki: the test CA and its server, wrong-name and client certificates;
# another CA with a server certificate for the right names and a client
# certificate.
kube_pki() {
	mkdir -p "$KUBE_WORK/pki"
	ec_ca ca hpn-test-ca
	ec_ca otherca hpn-other-ca
	ec_leaf server ca kube-apiserver "IP:127.0.0.1,DNS:localhost" serverAuth
	ec_leaf wrongname ca kube-apiserver "IP:127.0.0.2,DNS:wrong.example" serverAuth
	ec_leaf other otherca kube-apiserver "IP:127.0.0.1,DNS:localhost" serverAuth
	ec_leaf client ca hpn-rdma "" clientAuth
	ec_leaf otherclient otherca hpn-rdma "" clientAuth
	chmod 600 "$KUBE_WORK"/pki/*.key
}

# kube_start PODDIR: the stand-in with PODDIR's pods; sets KUBE_PORT_<name>.
# KUBE_RESOURCES: a directory for its ResourceClaims and ResourceSlices
# (apiserver.py --resources), if set.
# KUBE_PY_WRAP: words put before it, which must exec it (not fork), so that
# KUBE_PID is the server: `ip netns exec NS` to serve that netns's loopback.
KUBE_PY_WRAP=()
kube_start() {
	local i
	: >"$KUBE_WORK/tokens"
	: >"$KUBE_WORK/mode"
	: >"$KUBE_WORK/requests.log"
	rm -f "$KUBE_WORK/ports"
	"${KUBE_PY_WRAP[@]}" $PY "$KUBE_LIB_DIR/apiserver.py" --dir "$1" --pki "$KUBE_WORK/pki" \
		${KUBE_RESOURCES:+--resources "$KUBE_RESOURCES"} \
		--tokens "$KUBE_WORK/tokens" --mode "$KUBE_WORK/mode" \
		--ports "$KUBE_WORK/ports" --log "$KUBE_WORK/requests.log" \
		--lifetime "${KUBE_LIFETIME:-600}" 2>"$KUBE_WORK/apiserver.err" &
	KUBE_PID=$!
	for ((i = 0; i < 200; i++)); do
		[[ -s $KUBE_WORK/ports ]] && break
		kill -0 "$KUBE_PID" 2>/dev/null || break
		sleep 0.05
	done
	[[ -s $KUBE_WORK/ports ]] || {
		echo "the stand-in API server did not start:" >&2
		cat "$KUBE_WORK/apiserver.err" >&2
		return 1
	}
	while read -r name port; do
		printf -v "KUBE_PORT_$name" %s "$port"
	done <"$KUBE_WORK/ports"
}

kube_stop() {
	if [[ -n $KUBE_PID ]]; then
		kill "$KUBE_PID" 2>/dev/null
		wait "$KUBE_PID" 2>/dev/null || true
		KUBE_PID=
	fi
	return 0
}

# kubeconfig FILE SERVER CA USER...: a kubeconfig of one context "test".
# CA: file (certificate-authority: path) or data (-data, base64) of pki/ca.crt,
# or otherfile (pki/otherca.crt). USER: yaml lines of the user, indented by
# the caller's words: "token: X", "tokenFile: F", "cert" (client certificate
# files), "certdata" (the same inline), "othercert" (from the other CA), or
# any "key: value".
kubeconfig() {
	local f=$1 server=$2 ca=$3 d=$KUBE_WORK/pki line
	shift 3
	{
		echo "apiVersion: v1"
		echo "kind: Config"
		echo "clusters:"
		echo "- name: stand-in"
		echo "  cluster:"
		echo "    server: $server"
		case $ca in
		file) echo "    certificate-authority: $d/ca.crt" ;;
		otherfile) echo "    certificate-authority: $d/otherca.crt" ;;
		data) echo "    certificate-authority-data: $(base64 -w0 "$d/ca.crt")" ;;
		esac
		echo "contexts:"
		echo "- name: test"
		echo "  context:"
		echo "    cluster: stand-in"
		echo "    user: hpn-rdma"
		echo "    namespace: default"
		echo "current-context: test"
		echo "users:"
		echo "- name: hpn-rdma"
		echo "  user:"
		for line in "$@"; do
			case $line in
			cert)
				echo "    client-certificate: $d/client.crt"
				echo "    client-key: $d/client.key"
				;;
			othercert)
				echo "    client-certificate: $d/otherclient.crt"
				echo "    client-key: $d/otherclient.key"
				;;
			certdata)
				echo "    client-certificate-data: $(base64 -w0 "$d/client.crt")"
				echo "    client-key-data: $(base64 -w0 "$d/client.key")"
				;;
			*) echo "    $line" ;;
			esac
		done
	} >"$f"
	chmod 600 "$f"
}

# kube_claim NS NAME UID DRIVER POOL POD POD_UID DEVICE...: an allocated
# ResourceClaim in $KUBE_RESOURCES (the stand-in serves it), its request
# "nics" given DEVICEs of DRIVER's POOL, reserved for pod POD (POD_UID); the
# shape the scheduler leaves for the driver to read at Prepare.
kube_claim() {
	local ns=$1 name=$2 uid=$3 drv=$4 pool=$5 pod=$6 pod_uid=$7 f
	shift 7
	f=$KUBE_RESOURCES/$ns/resourceclaims/$name.json
	mkdir -p "${f%/*}"
	jq -n --arg ns "$ns" --arg name "$name" --arg uid "$uid" --arg drv "$drv" \
		--arg pool "$pool" --arg pod "$pod" --arg pu "$pod_uid" --args '{
		apiVersion: "resource.k8s.io/v1", kind: "ResourceClaim",
		metadata: {name: $name, namespace: $ns, uid: $uid, resourceVersion: "1"},
		spec: {devices: {requests: [{name: "nics", exactly: {deviceClassName: "hpn-rdma"}}]}},
		status: {allocation: {devices: {results: [$ARGS.positional[] |
			{request: "nics", driver: $drv, pool: $pool, device: .}]}},
			reservedFor: [{resource: "pods", name: $pod, uid: $pu}]}}' "$@" >"$f"
}
