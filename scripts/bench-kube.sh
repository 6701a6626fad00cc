#!/usr/bin/env bash
# Cost of the Kubernetes API lookup (issue 17), measured with the benchmark's
# runner (bench/runner.c, hpn-bench-run), no root needed:
#
#   scripts/bench-kube.sh [--quick] [--check] [--json PATH]
#
# Rows, interleaved over BENCH_ROUNDS rounds so background load falls on all:
#   version.*  start-up: `hpn-rdma` VERSION as built (libcurl and libyaml
#              dlopen()ed on a lookup only), and the same main.c with libyaml,
#              and with libcurl + libyaml, linked (bench/CMakeLists.txt's
#              hpn-rdma-linked-*), and /bin/true (any process start)
#   lookup.*   kube_get (test/kube/kube_get.c, the library's lookup as a
#              program) against the stand-in API server (test/kube/apiserver.py,
#              HTTPS on 127.0.0.1): start only (-n), kubeconfig load (-l,
#              libyaml dlopen()ed), one GET with a bearer token, one GET with a
#              client certificate
# Figures: wall (median, p99) and CPU (user + system, mean) per run; the
# lookup's own cost is a GET row minus the start row. The stand-in is Python:
# its time serving the GET is in the wall, not in the CPU.
# Environment: HPN_PLUGIN, HPN_BENCH_RUN, HPN_KUBE_GET, HPN_PLUGIN_LINKED_YAML,
# HPN_PLUGIN_LINKED_KUBE (default: under build/), BENCH_ITER (runs per row,
# default 400; quick 8), BENCH_ROUNDS (default 4; quick 2).
# Timings are reported, never asserted (--check: every row has figures).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
QUICK=0 CHECK=0 JSON=$PWD/bench-kube.json
while (($#)); do
	case $1 in
	--quick) QUICK=1 ;;
	--check) CHECK=1 ;;
	--json)
		JSON=$2
		shift
		;;
	-h | --help)
		sed -n '2,/^# Timings/p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "bench-kube.sh: unknown argument $1" >&2
		exit 2
		;;
	esac
	shift
done
B=$SRC/build
PLUGIN=${HPN_PLUGIN:-$B/plugin/hpn-rdma}
RUNNER=${HPN_BENCH_RUN:-$B/bench/hpn-bench-run}
GET=${HPN_KUBE_GET:-$B/test/kube/kube_get}
LYAML=${HPN_PLUGIN_LINKED_YAML:-$B/bench/hpn-rdma-linked-yaml}
LKUBE=${HPN_PLUGIN_LINKED_KUBE:-$B/bench/hpn-rdma-linked-kube}
if ((QUICK)); then
	ITER=${BENCH_ITER:-8} ROUNDS=${BENCH_ROUNDS:-2}
else
	ITER=${BENCH_ITER:-400} ROUNDS=${BENCH_ROUNDS:-4}
fi
for b in "$PLUGIN" "$RUNNER" "$GET" "$LYAML" "$LKUBE"; do
	[[ -x $b ]] || {
		echo "bench-kube.sh: $b is missing (cmake --build build)" >&2
		exit 2
	}
done
for t in openssl jq awk; do
	command -v $t >/dev/null || {
		echo "SKIP: $t is not installed"
		exit 77
	}
done

# shellcheck source=test/kube/lib.sh
source "$SRC/test/kube/lib.sh"
KUBE_WORK=$(mktemp -d /tmp/hpn-bench-kube.XXXXXX)
trap 'kube_stop; rm -rf "$KUBE_WORK"' EXIT
W=$KUBE_WORK
kube_pki
kube_start "$SRC/test/fixtures/pods"
echo "bench-token-$$" >"$W/tokens"
kubeconfig "$W/token.kubeconfig" "https://127.0.0.1:$KUBE_PORT_good" file "token: bench-token-$$"
kubeconfig "$W/cert.kubeconfig" "https://127.0.0.1:$KUBE_PORT_good" data cert
POD=default/seed-gu8tf-7d9c5b8f4-x2kqp

# job NAME STDIN ARGV...: a job directory for the runner.
job() {
	local d=$W/jobs/$1 in=$2
	shift 2
	mkdir -p "$d/0"
	printf '%s\n' "$@" >"$d/0/argv"
	printf '%s\n' "PATH=/usr/sbin:/usr/bin:/sbin:/bin" CNI_COMMAND=VERSION >"$d/0/env"
	printf '%s\n' "$in" >"$d/0/stdin"
}
V='{"cniVersion":"1.0.0"}'
job version.hpn-rdma "$V" "$PLUGIN"
job version.linked-yaml "$V" "$LYAML"
job version.linked-curl-yaml "$V" "$LKUBE"
job version.true "" "$(type -P true)"
job lookup.start "" "$GET" -n
job lookup.kubeconfig "" "$GET" -k "$W/token.kubeconfig" -l
job lookup.get-token "" "$GET" -k "$W/token.kubeconfig" "$POD"
job lookup.get-cert "" "$GET" -k "$W/cert.kubeconfig" "$POD"
ROWS=(version.hpn-rdma version.linked-yaml version.linked-curl-yaml version.true
	lookup.start lookup.kubeconfig lookup.get-token lookup.get-cert)

# Each job must work before it is timed: a benchmark of failures measures nothing.
for r in "${ROWS[@]}"; do
	"$RUNNER" -r 1 -w 0 -l check "$W/jobs/$r" >/dev/null
done
"$GET" -k "$W/cert.kubeconfig" "$POD" | jq -e '.count == 8' >/dev/null

PER=$(((ITER + ROUNDS - 1) / ROUNDS))
: >"$W/raw"
for ((i = 0; i < ROUNDS; i++)); do
	for r in "${ROWS[@]}"; do
		"$RUNNER" -r "$PER" -w 2 -l "$r" "$W/jobs/$r" >>"$W/raw"
	done
done

# Per row: runs, wall median and p99 (ms), CPU mean (ms), peak RSS (KB).
stats() {
	awk -v r="$1" '$1 == r { print $5 / 1e6, $6 / 1e3, $7 }' "$W/raw" | sort -n | awk '
		{ w[NR] = $1; c += $2; if ($3 > rss) rss = $3 }
		END { p = int(NR * 0.99); if (p < 1) p = 1
		      printf "%d %.3f %.3f %.3f %d\n", NR, w[int((NR + 1) / 2)], w[p], c / NR, rss }'
}
{
	for r in "${ROWS[@]}"; do
		read -r n med p99 cpu rss < <(stats "$r")
		jq -n --arg r "$r" --argjson n "$n" --argjson med "$med" --argjson p99 "$p99" \
			--argjson cpu "$cpu" --argjson rss "$rss" \
			'{row: $r, runs: $n, wall_ms: {median: $med, p99: $p99}, cpu_ms: $cpu, maxrss_kb: $rss}'
	done
} | jq -s --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
	'{machine: {cpu: $cpu, nproc: '"$(nproc)"'}, rows: .}' >"$JSON"

jq -r '
	(.rows | map({(.row): .}) | add) as $r |
	def f: . * 1000 | round / 1000 | tostring;
	def d(a; b): "+" + (($r[a].wall_ms.median - $r[b].wall_ms.median) | f) + " ms wall, +" +
		(($r[a].cpu_ms - $r[b].cpu_ms) | f) + " ms CPU";
	"row                          wall median    p99   CPU mean  maxRSS KB",
	(.rows[] | (.row + "                              ")[:28] + (.wall_ms.median | f | "      " + . | .[-9:]) +
		(.wall_ms.p99 | f | "      " + . | .[-8:]) + (.cpu_ms | f | "      " + . | .[-10:]) +
		(.maxrss_kb | tostring | "        " + . | .[-10:])),
	"",
	"linking libyaml:            " + d("version.linked-yaml"; "version.hpn-rdma") + " per start",
	"linking libcurl + libyaml:  " + d("version.linked-curl-yaml"; "version.hpn-rdma") + " per start",
	"kubeconfig load (dlopen):   " + d("lookup.kubeconfig"; "lookup.start"),
	"lookup, token:              " + d("lookup.get-token"; "lookup.start"),
	"lookup, client certificate: " + d("lookup.get-cert"; "lookup.start")' "$JSON"
echo "(JSON: $JSON; $ITER runs per row in $ROUNDS rounds)"
if ((CHECK)); then
	jq -e --argjson n "${#ROWS[@]}" '(.rows | length) == $n and
		all(.rows[]; .runs > 0 and .wall_ms.median > 0 and .cpu_ms >= 0)' "$JSON" >/dev/null
fi
