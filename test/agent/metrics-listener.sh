#!/usr/bin/env bash
# The agent's metrics listener (agent/metrics.c: libmicrohttpd on the agent's
# loop) against hostile clients and on IPv6, as root in throwaway namespaces
# (test/netns/lib.sh) with the agent started as metrics.sh starts it (lib.sh):
# it listens on the loopback of the scenario's own host netns, whose
# 127.0.0.0/8 gives the clients as many source addresses as they want; the
# clients are metrics-clients.py. Issue 40, findings 3 and 7.
#
# Scenarios:
#  slow_clients  idle connections, more than the listener's limit, from 20
#                addresses, held without a byte sent past the connection
#                timeout: every scrape afterwards is answered (the listener
#                used to stop accepting for good once MHD's timeout had
#                closed the last of 16).
#  one_client    20 idle connections from one address: the per-address limit
#                closes all but a few at once, and a scrape from another
#                address is answered while they are held.
#  attempts      3000 connection attempts from 40 addresses, held up to 200
#                at a time and the last ones past the timeout: the scrapes
#                answered afterwards (the issue's figure), the agent's log
#                not flooded by the refusals.
#  ipv6          --metrics-address with an unbracketed IPv6 address, as
#                $(HOST_IP):9467 gives on an IPv6 node: ::1:PORT and
#                fd00::5:PORT served and scraped over IPv6.
#  bad_address   addresses that are not ADDRESS:PORT: the agent exits 2 at
#                once, naming the flag.
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t_init
agent_require
command -v curl >/dev/null || skip "curl is not installed (Debian: curl)"

CLIENTS=$(dirname "${BASH_SOURCE[0]}")/metrics-clients.py
# Longer than the listener's connection timeout (metrics.c's CONN_TIMEOUT_S,
# 10 s before issue 40), so that every idle connection it accepted was closed
# by it before the scrapes.
HOLD_S=12

AGENT_FLAGS=(--metrics-address "127.0.0.1:$MPORT" --cri-socket none)

# clients ARGS...: metrics-clients.py in the scenario's host netns; its JSON.
clients() {
	ip netns exec "$HOST_NS" python3 "$CLIENTS" "$@"
}

# sources N: 127.0.0.2, 127.0.0.3, ... N addresses, comma-separated.
sources() {
	local i out=
	for ((i = 0; i < $1; i++)); do
		out+="${out:+,}127.0.$((i / 250)).$((2 + i % 250))"
	done
	echo "$out"
}

# answered N WHAT [HOST]: N scrapes in a row, each answered within 3 s.
answered() {
	local out
	out=$(clients scrape "${3:-127.0.0.1}" "$MPORT" "$1" 3)
	info "$2: $out"
	jq -e --argjson n "$1" '.answered == $n' <<<"$out" >/dev/null ||
		fail "$2: $(jq -r '"\(.answered) of \(.scrapes) scrapes answered, errors: \(.errors)"' <<<"$out")
agent log: $(tail -n 10 "$T/agent.log")"
}

slow_clients() {
	local out
	node_up plain
	answered 1 "before the slow clients"
	out=$(clients hold 127.0.0.1 "$MPORT" "$(sources 20)" 4 "$HOLD_S")
	info "80 idle connections from 20 addresses, held ${HOLD_S}s: $out"
	answered 5 "after 80 idle connections held past the connection timeout"
	kill -0 "$AGENT_PID" || fail "the agent is gone: $(tail -n 10 "$T/agent.log")"
	node_down
}
run "slow clients: more idle connections than the limit, held past the timeout; scrapes answered afterwards" slow_clients

one_client() {
	local out pid
	node_up plain
	answered 1 "before the client"
	# Held 8 s: before issue 40, the 16 it held made the scrapes wait for the end of the hold.
	clients hold 127.0.0.1 "$MPORT" 127.0.0.2 20 8 >"$T/hold.json" &
	pid=$!
	sleep 1
	answered 3 "while one address holds 20 idle connections"
	wait "$pid" || fail "metrics-clients.py hold failed"
	out=$(cat "$T/hold.json")
	info "20 idle connections from 127.0.0.2: $out"
	# metrics.c's PER_IP_CONNECTIONS (4): the rest closed as they come.
	jq -e '.opened == 20 and .closed_within_1s >= 16' <<<"$out" >/dev/null ||
		fail "one address kept more than 4 connections: $out"
	node_down
}
run "one client: its address held to a few connections, the others closed at once; scrapes answered meanwhile" one_client

attempts() {
	local out n
	node_up plain
	answered 1 "before the attempts"
	out=$(clients attempts 127.0.0.1 "$MPORT" "$(sources 40)" 3000 200 "$HOLD_S")
	info "3000 connection attempts from 40 addresses: $out"
	out=$(clients scrape 127.0.0.1 "$MPORT" 20 2)
	info "figure: scrapes answered after 3000 connection attempts: $(jq -r '"\(.answered) of \(.scrapes)"' <<<"$out") ($out)"
	jq -e '.answered == 20' <<<"$out" >/dev/null ||
		fail "after 3000 connection attempts $(jq -r '"\(.answered) of \(.scrapes)"' <<<"$out") scrapes answered
agent log: $(tail -n 10 "$T/agent.log")"
	# Each refusal is a line of libmicrohttpd's: a few, then a count of the rest.
	n=$(grep -c 'metrics: ' "$T/agent.log" || true)
	((n <= 40)) || fail "the refusals flooded the agent's log: $n lines: $(grep 'metrics: ' "$T/agent.log" | sort | uniq -c | sort -rn | head -n 5)"
	node_down
}
run "3000 connection attempts: every scrape afterwards answered, the log not flooded" attempts

ipv6() {
	AGENT_FLAGS=(--metrics-address "::1:$MPORT" --cri-socket none)
	node_up plain
	wait_log "metrics on http://[::1]:$MPORT/metrics" "::1:$MPORT unbracketed is [::1]:$MPORT"
	answered 3 "scrapes over IPv6 loopback" ::1
	ip netns exec "$HOST_NS" curl -sf -o /dev/null --max-time 3 "http://127.0.0.1:$MPORT/metrics" &&
		fail "::1:$MPORT answers on IPv4 too"
	stop_agent
	# The issue's node: the Downward API's status.hostIP, fd00::5, then :PORT.
	ip -n "$HOST_NS" addr add fd00::5/128 dev lo nodad
	AGENT_FLAGS=(--metrics-address "fd00::5:$MPORT" --cri-socket none)
	start_agent
	wait_log "metrics on http://[fd00::5]:$MPORT/metrics" "fd00::5:$MPORT"
	answered 3 "scrapes of fd00::5" fd00::5
	node_down
}
if [[ $(cat /proc/sys/net/ipv6/conf/default/disable_ipv6 2>/dev/null) == 0 ]]; then
	run "IPv6: ::1:PORT and fd00::5:PORT unbracketed, served and scraped over IPv6" ipv6
else
	info "SKIP: the ipv6 scenario: IPv6 is off here (net.ipv6.conf.default.disable_ipv6)"
fi

bad_address() {
	local a rc
	for a in fd00::5 ::1 localhost:9467 '[::1]9467' '[::1' '[::1]:' '[::1]:+1' 1.2.3.4:70000 \
		1.2.3:9467 ' 127.0.0.1:9467' 127.0.0.1:-1 ':9467' 'fe80::1%lo:9467' '[127.0.0.1]:9467'; do
		rc=0
		ip netns exec "$HOST_NS" "$HPN_AGENT" --metrics-address "$a" --cri-socket none \
			>"$T/out" 2>"$T/err" || rc=$?
		((rc == 2)) || fail "--metrics-address \"$a\": exit $rc, not 2: $(head -n 2 "$T/err")"
		grep -qF -- "--metrics-address \"$a\"" "$T/err" ||
			fail "--metrics-address \"$a\": the message does not name the flag: $(head -n 2 "$T/err")"
	done
}
run "bad addresses: exit 2 at once, naming the flag" bad_address

t_done
