#!/usr/bin/env bash
# conf/grafana-dashboard.json against the agent: the dashboard is a Grafana
# dashboard (title, uid, schemaVersion, panels with ids unique, a grid
# position, a datasource and targets with a refId and an expr; rows hold
# none), and every PromQL expression in it (panel targets and the template
# variables' label_values queries) names at least one metric, every metric it
# names is one the agent exports (the agent's files that render with
# exposition.h: the exporter's and each service's families; histogram series
# by their _bucket, _sum, _count names), and every $variable it uses is one the dashboard
# defines or one of Grafana's own. No privileges; nothing is started.
#
#   dashboard.sh               the check (unit.dashboard)
#   dashboard.sh --exprs       print every expression, one a line, with the
#                              variables replaced by values a plain Prometheus
#                              takes (netns.agent-metrics runs them against one)
# shellcheck disable=SC2016 # PromQL and sed programs with $ are single-quoted on purpose
set -euo pipefail
src=${HPN_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
dash=${HPN_DASHBOARD:-$src/conf/grafana-dashboard.json}
# Every file that renders families: the exporter and the services registered with it.
mapfile -t metrics_c < <(grep -rl --include='*.c' '^#include "exposition.h"' "$src"/agent)

# The expressions: every target's expr, and the query of every query variable.
exprs() {
	jq -r '[.. | objects | select(has("targets")) | .targets[]? | .expr // empty] +
		[.templating.list[]? | select(.type == "query") |
			(.query | if type == "object" then .query else . end)] | .[]' "$dash"
}

if [[ ${1:-} == --exprs ]]; then
	# label_values() is Grafana's, not PromQL: its series selector is what Prometheus runs.
	exprs | sed -E 's/^label_values\((.*), *[a-z_]+\)$/\1/; s/\$__rate_interval/1m/g;
		s/\$__interval/15s/g; s/\$\{?[a-z_]+\}?/.*/g'
	exit 0
fi

fails=0
bad() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

jq -e . "$dash" >/dev/null || {
	echo "FAIL: $dash is not JSON"
	exit 1
}
jq -e '(.title | type == "string" and length > 0) and (.uid | type == "string" and length > 0)
	and (.schemaVersion | type == "number") and (.panels | type == "array" and length > 0)' \
	"$dash" >/dev/null || bad "the dashboard lacks a title, uid, schemaVersion or panels"

# Panels: rows have no targets; every other panel has a title, a grid position,
# a datasource and at least one target, each with a refId and an expr.
while IFS= read -r p; do
	bad "panel: $p"
done < <(jq -r '.panels[] | select(.type != "row") |
	select((.title | length) == 0 or (.gridPos | (.w > 0 and .h > 0 and .x >= 0 and .y >= 0 and
		.x + .w <= 24) | not) or (.datasource == null) or ((.targets | length) == 0) or
		any(.targets[]; (.refId | length) == 0 or (.expr | length) == 0)) |
	"\(.title // "(no title)"): no title, gridPos, datasource, or a target without refId or expr"' \
	"$dash")
dups=$(jq -r '[.panels[].id] | group_by(.) | map(select(length > 1) | .[0]) | .[]' "$dash")
[[ -z $dups ]] || bad "panel ids used twice: $dups"

# What the agent exports: every hpn_rdma_* name its metrics files write.
mapfile -t exported < <(grep -ohE '"hpn_rdma_[a-z0-9_]+"' "${metrics_c[@]}" | tr -d '"' | sort -u)
((${#exported[@]} > 20)) || bad "found only ${#exported[@]} metric names in ${metrics_c[*]}"
declare -A known=()
for m in "${exported[@]}"; do
	known[$m]=1
done
mapfile -t vars < <(jq -r '.templating.list[]?.name' "$dash")
declare -A defined=([__rate_interval]=1 [__interval]=1 [__range]=1)
for v in "${vars[@]}"; do
	defined[$v]=1
done

all=$(exprs)
n=0
while IFS= read -r e; do
	n=$((n + 1))
	names=$(grep -oE '\bhpn_rdma_[a-z0-9_]+' <<<"$e" | sort -u) || true
	[[ -n $names ]] || bad "names no metric of the agent: $e"
	for m in $names; do
		[[ -n ${known[$m]:-} ]] || bad "$m is not a metric the agent exports (in: $e)"
	done
	for v in $(grep -oE '\$\{?[a-zA-Z_]+' <<<"$e" | tr -d '${' | sort -u); do
		[[ -n ${defined[$v]:-} ]] || bad "\$$v is not a variable of the dashboard (in: $e)"
	done
done <<<"$all"
((n > 0)) || bad "the dashboard has no expressions"
# Every family the dashboard could show, shown: a metric added to the agent
# and forgotten here is a gap (the histogram's family name is not a series).
for m in "${exported[@]}"; do
	[[ $m == hpn_rdma_cni_command_duration_seconds ]] && continue
	grep -q "\\b$m\\b" <<<"$all" || bad "the agent's $m is on no panel"
done

((fails == 0)) || exit 1
echo "ok: $n expressions name only the agent's ${#exported[@]} metric names, every one of them shown"
