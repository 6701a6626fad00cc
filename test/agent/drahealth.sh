# shellcheck shell=bash
# The DRA flow's health scenario (draflow.sh sources it, and runs
# claim_health last): the prepared devices' health streamed to the kubelet
# stand-in (hpn-kubelet dra-health), from the health loop's verdicts
# (doc/dra.md, "Device health"). It uses draflow.sh's helpers (flow_up,
# flow_conf, unprepare_c1, dra_metrics, flow_down).

# wait_health FILTER WHAT [SECONDS]: wait_event on the health stand-in's file.
HSEEN=0
wait_health() {
	local ev=$EV seen=$SEEN
	EV=$HEV SEEN=$HSEEN
	wait_event "$@"
	HSEEN=$SEEN EV=$ev SEEN=$seen
}

# dev_is DEVICE COND: a filter true on a health event whose DEVICE entry meets COND.
dev_is() {
	echo '.event == "health" and any(.devices[]; .pool == "node1" and .device == "'"$1"'" and '"$2"')'
}

# The prepared devices' health to the kubelet (doc/dra.md, "Device health"):
# the stand-in picks the service from the registration as 1.37 does (v1), its
# first list; an attachment broken (hpn0's MTU changed) makes both its NICs
# UNHEALTHY with what broke, within the health period (the latency measured,
# three times), and whole again HEALTHY; the list resent while nothing changes; a check that cannot
# run (a DEL holding the journal) UNKNOWN, saying why; 1.36's v1alpha1 stream
# beside it; Unprepare empties the list; a stream the kubelet closes is
# dropped (the gauge, the log), and the agent goes on; SIGTERM with a stream
# open ends it.
claim_health() {
	local conf t0 lat gaps journal lock_pid n
	export HPN_DRA_HEALTH_RESEND_MS=1000
	HEV=$T/health-$SCEN.jsonl HSEEN=0 HEALTH_PID=
	: >"$HEV"
	flow_up --health-interval 1
	trap 'kill_node; kube_stop; [[ -z $HEALTH_PID ]] || kill -KILL "$HEALTH_PID" 2>/dev/null || true' EXIT
	mk_claim ml c1 "$UID1" . pci-0000-af-00-2 pci-0000-af-00-0
	prepare -version v1 "ml/c1/$UID1" >/dev/null || fail "Prepare failed"
	"$HPN_KUBELET" dra-health -dir "$KL" -driver "$DRV" -out "$HEV" 2>>"$T/kubelet.log" &
	HEALTH_PID=$!
	wait_health '.event == "health-open" and .service == "v1.DRAResourceHealth"' 		"1.37's choice: v1, from the registration"
	wait_health '.event == "health" and (.devices | map([.pool, .device, .health, .message, .timeout])
		== [["node1", "pci-0000-af-00-2", "HEALTHY", "", 30], ["node1", "pci-0000-af-00-0", "HEALTHY", "", 30]])
		and all(.devices[]; (.lastUpdated - now | fabs) < 5)' "the first full list: both HEALTHY"
	wait_metric '^hpn_rdma_dra_health_streams 1$' "one stream open, in the metrics"
	dra_metrics 'hpn_rdma_dra_health_devices\{health="healthy"\} 2' \
		'hpn_rdma_dra_health_messages_total\{cause="open"\} 1'

	conf=$(flow_conf)
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_result "ADD of the claim's pod"
	# Checked whole first (the health loop every second), then broken.
	sleep 2
	jq_ok 'all(.[]; .health == "HEALTHY")' "the attached NICs HEALTHY" \
		"$(jq -c 'select(.event == "health") | .devices' "$HEV" | tail -n1)"
	# Three times: hpn0's MTU changed (CHECK compares it with ADD's result), then put back.
	for n in 1 2 3; do
		t0=$(date +%s.%N)
		ip -n "$POD_NS" link set hpn0 mtu 1400
		wait_health "$(dev_is pci-0000-af-00-2 '.health == "UNHEALTHY" and
			(.message | startswith("its attachment is broken (interface): "))')" \
			"hpn0's MTU changed: UNHEALTHY with what broke" 10
		lat=$(jq -n --argjson a "$(jq '.at' <<<"$LAST_EVENT")" --argjson t "$t0" '$a - $t')
		info "latency from hpn0's MTU changed to the stand-in's UNHEALTHY: ${lat} s (health period 1 s)"
		jq_ok '. < 3' "UNHEALTHY within the health period and a little" "$lat"
		jq_ok 'all(.devices[]; .health == "UNHEALTHY")' \
			"both NICs of the broken attachment UNHEALTHY" "$LAST_EVENT"
		((n > 1)) || wait_metric '^hpn_rdma_dra_health_devices\{health="unhealthy"\} 2$' \
			"two unhealthy, in the metrics"
		ip -n "$POD_NS" link set hpn0 mtu 1500
		wait_health "$(dev_is pci-0000-af-00-2 '.health == "HEALTHY"') and
			all(.devices[]; .health == \"HEALTHY\" and .message == \"\")" "hpn0 whole again: HEALTHY" 10
	done
	grep -q 'DRA: device node1/pci-0000-af-00-2 is UNHEALTHY to the kubelet: its attachment is broken' \
		"$T/agent.log" || fail "the change not logged: $(grep 'DRA: device' "$T/agent.log" | tail -n 3)"

	# Nothing changes: the list comes again every resend period (1 s here, 20 s by default).
	n=$(grep -c '"event":"health"' "$HEV")
	sleep 3.5
	gaps=$(tail -n +"$((HSEEN + 1))" "$HEV" | jq -s -c '[.[] | select(.event == "health") | .gap]')
	jq_ok 'length >= 3 and max < 2' "the list resent every second while nothing changes" "$gaps"
	(($(grep -c '"event":"health"' "$HEV") >= n + 3)) || fail "no resends"
	scrape >"$T/scrape"
	(($(metric_value 'hpn_rdma_dra_health_messages_total{cause="resend"}') >= 3)) ||
		fail "resends not counted: $(grep health_messages "$T/scrape")"

	# A check that cannot run: a DEL holds the journal (its OFD lock): UNKNOWN, saying why.
	journal=$(find "$STATE/$NET" -maxdepth 1 -type f | head -n1)
	[[ -n $journal ]] || fail "no journal of the attachment"
	/usr/bin/python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "r+")
fcntl.lockf(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)' "$journal" >"$T/lock.out" &
	lock_pid=$!
	wait_health "$(dev_is pci-0000-af-00-2 '.health == "UNKNOWN" and
		(.message | test("could not check its attachment \\(pod ml/trainer\\)"))')" \
		"a check that cannot run: UNKNOWN" 10
	kill "$lock_pid"
	wait "$lock_pid" 2>/dev/null || true
	wait_health "$(dev_is pci-0000-af-00-2 '.health == "HEALTHY"')" "checked again: HEALTHY" 10

	# 1.36's stream beside it (v1alpha1, listed or not), closed by the kubelet after 1 s.
	"$HPN_KUBELET" dra-health -dir "$KL" -driver "$DRV" -out "$T/health-v1alpha1.jsonl" \
		-version v1alpha1 -for 1s 2>>"$T/kubelet.log" || fail "the v1alpha1 stream failed"
	jq -e -s 'map(select(.event == "health")) | length >= 1 and
		(.[0].devices | map(.device) == ["pci-0000-af-00-2", "pci-0000-af-00-0"])' \
		"$T/health-v1alpha1.jsonl" >/dev/null ||
		fail "v1alpha1: the full list: $(cat "$T/health-v1alpha1.jsonl")"
	grep -q 'opened a device health stream (v1alpha1)' "$T/agent.log" ||
		fail "the v1alpha1 stream not served: $(tail -n 5 "$T/agent.log")"
	wait_metric '^hpn_rdma_dra_health_streams 1$' "the closed v1alpha1 stream dropped"

	run_plugin DEL "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_ok "DEL"
	unprepare_c1
	wait_health '.event == "health" and .devices == []' "Unprepare: an empty list"
	wait_metric '^hpn_rdma_dra_health_devices\{health="healthy"\} 0$' "no device, in the metrics"

	# The kubelet closes its stream: the agent drops it and goes on.
	kill -TERM "$HEALTH_PID"
	wait "$HEALTH_PID" || fail "the health stand-in failed: $(tail -n 3 "$T/kubelet.log")"
	HEALTH_PID=
	wait_log "DRA: device health stream closed (0 open)" "the stream closed by the kubelet"
	wait_metric '^hpn_rdma_dra_health_streams 0$' "no stream open, in the metrics"
	prepare -version v1 "ml/c1/$UID1" >/dev/null || fail "Prepare after the stream closed failed"
	unprepare_c1
	# SIGTERM with a stream open: the agent ends it and stops (exit 0, at once: stop_agent).
	"$HPN_KUBELET" dra-health -dir "$KL" -driver "$DRV" -out "$HEV" 2>>"$T/kubelet.log" &
	HEALTH_PID=$!
	wait_health '.event == "health" and .devices == []' "a stream open again, the list empty"
	stop_agent
	wait_health '.event == "health-end"' "the stream ended by the agent's stop"
	wait "$HEALTH_PID" || true
	HEALTH_PID=
	flow_down
}
