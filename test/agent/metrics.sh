#!/usr/bin/env bash
# hpn-rdma-agent's metrics, health loop and event log, as root in throwaway
# namespaces (test/netns/lib.sh) against the kubelet stand-in, with a real
# Prometheus (Debian's) scraping it: both listen on the loopback of the
# scenario's own host netns, nothing else of the machine's network is used.
#
# Scenarios:
#  prometheus  a pod ADDed by the plugin (pool3, ns1/trainer) and one whose
#              journal is written as ADD would (pool2 with a fake RDMA device
#              whose sysfs counters are set); Prometheus, started with a
#              scratch config, scrapes the agent every second and its query
#              API returns the series: the pool, the attachments with their
#              pods, link counters that rise with traffic, the RDMA port's
#              state and counters under their names, the plugin's ADD count
#              and latency histogram, build info, the health verdicts (the
#              fake RDMA device cannot be proven: broken, reason rdma);
#              promtool check metrics passes on the exposition, which starts
#              with the exporter's own families, has each family once and
#              none of a service that is off (GC, the DRA driver); every
#              expression of conf/grafana-dashboard.json runs there, with
#              series (but GC's: no runtime here).
#  health      the pod's hpn0 set down: its device Unhealthy in ListAndWatch,
#              hpn_rdma_attachment_healthy 0 with reason interface, the log
#              says what broke; up again: Healthy and 1.
#  events      the event log: a refused CHECK counted by its code, lines the
#              agent finds at start, rotation followed, garbage skipped.
#  gpu_far     an attachment whose claim journalled its NICs' GPUs, one NIC
#              farther from its GPU than a NIC left free: each NIC's distance
#              class and far gauge, the health loop's warning once (naming
#              pod, NIC, GPU, both classes), its devices still Healthy;
#              promtool check metrics passes.
# shellcheck disable=SC2016 # jq and PromQL programs are single-quoted on purpose
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t_init
agent_require
for tool in prometheus promtool curl; do
	command -v "$tool" >/dev/null ||
		skip "$tool is not installed (Debian: prometheus, curl; scripts/install-deps.sh)"
done

PPORT=19090 # Prometheus there
PROM_PID=
UID_A=6f1c2d9e-0b7a-4c3e-9d55-2a61f0c4b1aa
UID_B=0b3c5d1e-9a47-4f3e-8c2d-00000000000b

# The agent's metrics on loopback, a health loop every second, no GC (no runtime here).
AGENT_FLAGS=(--metrics-address "127.0.0.1:$MPORT" --health-interval 1 --cri-socket none)

# metrics_up [plain]: the fake node, the kubelet stand-in and the agent.
metrics_up() {
	node_up "$@"
	trap 'kill_node; [[ -n $PROM_PID ]] && kill -KILL "$PROM_PID" 2>/dev/null; true' EXIT
}

prom_start() {
	mkdir -p "$T/prom-$SCEN"
	cat >"$T/prom-$SCEN.yml" <<-EOF
		global:
		  scrape_interval: 1s
		  scrape_timeout: 1s
		scrape_configs:
		  - job_name: hpn-rdma-agent
		    static_configs:
		      - targets: ["127.0.0.1:$MPORT"]
	EOF
	promtool check config "$T/prom-$SCEN.yml" >/dev/null || fail "promtool refuses the scratch config"
	ip netns exec "$HOST_NS" prometheus --config.file="$T/prom-$SCEN.yml" \
		--storage.tsdb.path="$T/prom-$SCEN" --web.listen-address="127.0.0.1:$PPORT" \
		--log.level=warn >>"$T/prometheus.log" 2>&1 &
	PROM_PID=$!
	local i
	for ((i = 0; i < 300; i++)); do
		ip netns exec "$HOST_NS" curl -sf "http://127.0.0.1:$PPORT/-/ready" >/dev/null 2>&1 &&
			return 0
		kill -0 "$PROM_PID" 2>/dev/null || fail "prometheus exited: $(tail -5 "$T/prometheus.log")"
		sleep 0.1
	done
	fail "prometheus was not ready in 30 s: $(tail -5 "$T/prometheus.log")"
}

prom_stop() {
	[[ -n $PROM_PID ]] || return 0
	kill -TERM "$PROM_PID" 2>/dev/null || true
	wait "$PROM_PID" 2>/dev/null || true
	PROM_PID=
}

# promq QUERY: Prometheus's instant query API, the JSON answer.
promq() {
	ip netns exec "$HOST_NS" curl -sf -G "http://127.0.0.1:$PPORT/api/v1/query" \
		--data-urlencode "query=$1"
}

# wait_prom QUERY JQ WHAT [SECONDS]: the answer's .data.result satisfies JQ.
wait_prom() {
	local i out=
	for ((i = 0; i < ${4:-30} * 4; i++)); do
		out=$(promq "$1" 2>/dev/null) || out=
		if [[ -n $out ]] && jq -e '.status == "success"' <<<"$out" >/dev/null &&
			jq -e ".data.result | $2" <<<"$out" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.25
	done
	fail "$3: Prometheus answered '$1' with $(jq -c .data.result <<<"$out" 2>/dev/null || echo "$out"),
not '$2'; targets: $(ip netns exec "$HOST_NS" curl -s "http://127.0.0.1:$PPORT/api/v1/targets" |
		jq -c '[.data.activeTargets[] | {health, lastError}]' 2>/dev/null)"
}

# pod_a: pool3 (no RDMA device), which the kubelet stand-in allocated to pod
# ns1/trainer (so it stays the kubelet's: the NIC ledger), ADDed by the plugin,
# hpn0 with 10.99.0.2/24 and its veth peer on the host side 10.99.0.1/24 for
# traffic.
pod_a() {
	echo '[{"namespace":"ns1","name":"trainer","containers":[{"name":"main","devices":[
		{"resource":"rdma/hpn","ids":["pool3"]}]}]}]' >"$T/pods.json"
	CONF_A=$(agent_net_conf '.match.devices = ["pool3"]')
	run_plugin ADD "$CONF_A" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer;K8S_POD_UID=$UID_A"
	expect_result "ADD of pod ns1/trainer"
	jq_ok '.pod == {namespace: "ns1", name: "trainer", uid: $u}' \
		"the journal names the pod (from CNI_ARGS)" "$(cat "$STATE/$NET/$CID.eth0")" --arg u "$UID_A"
	ip -n "$POD_NS" addr add 10.99.0.2/24 dev hpn0
	ip -n "$HOST_NS" addr add 10.99.0.1/24 dev peer3
	ip -n "$HOST_NS" link set peer3 up
}

# pod_b: pool2 moved into a second pod as hpn0, its journal written as ADD
# writes one, with mlx5_2 (a fake RDMA device of the fake sysfs, whose port
# counters are set here) bound; libibverbs cannot prove it, so CHECK cannot.
pod_b() {
	local ns=${HPNT_PREFIX}p$SCEN-b mac idx port=$T/sysfs/class/infiniband/mlx5_2/ports/1
	POD_B=$ns
	mk_rdma "$T/sysfs" 0000:af:00.2 mlx5_2 uverbs2
	ip netns add "$ns"
	mac=$(mac_of "$HOST_NS" pool2)
	idx=$(ip -n "$HOST_NS" -j link show pool2 | jq '.[0].ifindex')
	mkdir -p "$port/hw_counters" "$port/counters"
	echo "5: LinkUp" >"$port/phys_state"
	echo 5 >"$port/hw_counters/np_cnp_sent"
	echo 3 >"$port/hw_counters/out_of_sequence"
	echo 10 >"$port/hw_counters/lifespan"
	echo 100 >"$port/counters/port_xmit_data"
	echo 7 >"$port/counters/port_xmit_discards"
	# The rest of what the dashboard shows, so that each of its panels has a series.
	echo 2 >"$port/hw_counters/rp_cnp_handled"
	echo 4 >"$port/hw_counters/np_ecn_marked_roce_packets"
	echo 1 >"$port/hw_counters/out_of_buffer"
	echo 50 >"$port/counters/port_rcv_data"
	echo 6 >"$port/counters/port_xmit_packets"
	echo 8 >"$port/counters/port_rcv_packets"
	echo 0 >"$port/counters/port_rcv_errors"
	jq -cn --arg boot "$(</proc/sys/kernel/random/boot_id)" --arg cid "$CID-b" \
		--arg netns "$(ns_path "$ns")" --arg mac "$mac" --argjson idx "$idx" --arg uid "$UID_B" '{
		version: 2, bootId: $boot, phase: 4, containerId: $cid, cniIfName: "eth0",
		netns: $netns,
		nics: [{kind: "moved", podIfName: "hpn0", pci: "0000:af:00.2",
			host: {name: "pool2", ifindex: $idx, mtu: 1500, up: false, mac: $mac, altnames: []},
			rdma: {name: "mlx5_2", netdev: "pool2", moved: false},
			gpu: {id: "GPU-5e0a6c2b-1d3f-4e8a-9b7c-6d5e4f3a2b1c", pci: "0000:b1:00.0",
				distance: "PHB", best: "PHB"}}],
		result: {cniVersion: "1.0.0", interfaces: [{name: "hpn0", mac: $mac, sandbox: $netns}],
			ips: [], dns: {},
			rdma: [{interface: 0, bound: true, device: "mlx5_2", port: 1, gidIndex: 1,
				qos: {dcb: "ieee", netdev: "pool2", pfc: [3], trust: "dscp",
					trafficClass: 104, fifoTrafficClass: 104, serviceLevel: 0,
					lossless: "yes"}}]},
		pod: {namespace: "ns2", name: "roce", uid: $uid}}' >"$STATE/$NET/.$CID-b.eth0"
	mv "$STATE/$NET/.$CID-b.eth0" "$STATE/$NET/$CID-b.eth0"
	# Journalled first, then moved, as ADD does.
	ip -n "$HOST_NS" link set pool2 netns "$ns" name hpn0
	ip -n "$ns" link set hpn0 up
}

pod_b_del() {
	run_plugin DEL "$CONF_A" CNI_CONTAINERID="$CID-b" CNI_NETNS="$(ns_path "$POD_B")"
	expect_ok "DEL of the second pod"
	ip netns del "$POD_B"
}

prometheus_scrapes() {
	local q
	metrics_up plain
	pod_a
	pod_b
	prom_start
	wait_prom 'hpn_rdma_agent_build_info' 'length == 1 and .[0].value[1] == "1" and
		(.[0].metric.version | length > 0) and (.[0].metric.microhttpd | length > 0)' \
		"build info"
	wait_prom 'up{job="hpn-rdma-agent"}' '.[0].value[1] == "1"' "the agent is up for Prometheus"
	wait_prom 'hpn_rdma_pool_nics' '.[0].value[1] == "4" and .[0].metric.resource == "rdma/hpn"' \
		"the pool: four NICs"
	wait_prom 'hpn_rdma_pool_nics_held' '.[0].value[1] == "2"' "two held"
	wait_prom 'hpn_rdma_pool_nics_free' '.[0].value[1] == "2"' "two free"
	wait_prom 'hpn_rdma_device_held{device_id="pool3"}' '.[0].value[1] == "1"' "pool3 held"
	wait_prom 'hpn_rdma_attachments' '.[0].value[1] == "2"' "two attachments"
	q='hpn_rdma_attachment_info{namespace="ns1",pod="trainer",uid="'$UID_A'",phase="attached",container_id="'$CID'",network="'$NET'"}'
	wait_prom "$q" 'length == 1' "pod ns1/trainer's attachment, all labels"
	# Traffic over hpn0: the link counters rise.
	wait_prom 'hpn_rdma_interface_up{pod="trainer",interface="hpn0",nic="pool3"}' \
		'.[0].value[1] == "1"' "hpn0 up"
	local before
	before=$(promq 'hpn_rdma_interface_transmit_packets_total{pod="trainer"}' | jq -r '.data.result[0].value[1]')
	[[ $before =~ ^[0-9]+$ ]] || fail "no transmit packets of hpn0: $before"
	# Five datagrams to the peer's discard port (after an ARP request): no tool needed.
	ip netns exec "$POD_NS" bash -c 'for i in 1 2 3 4 5; do echo hpn >/dev/udp/10.99.0.1/9; done' ||
		fail "UDP over hpn0"
	wait_prom 'hpn_rdma_interface_transmit_packets_total{pod="trainer"}' \
		"(.[0].value[1] | tonumber) >= $((before + 5))" "hpn0's transmit packets rose by 5"
	wait_prom 'hpn_rdma_interface_receive_bytes_total{pod="trainer"}' \
		'(.[0].value[1] | tonumber) > 0' "hpn0 received bytes"
	# The RDMA port of the second pod: state and counters under their names.
	wait_prom 'hpn_rdma_port_state{pod="roce",rdma_device="mlx5_2",port="1"}' \
		'.[0].value[1] == "4"' "mlx5_2 port 1 ACTIVE"
	wait_prom 'hpn_rdma_port_active{pod="roce"}' '.[0].value[1] == "1"' "port active"
	# Its QoS read again where ADD read it (pool2, moved: hpn0 in the pod), a veth: no DCB.
	wait_prom 'hpn_rdma_nic_dcb{pod="roce",interface="hpn0",nic="pool2"}' '.[0].value[1] == "0"' \
		"the roce pod's NIC has no DCB"
	wait_prom 'hpn_rdma_port_physical_state{pod="roce"}' '.[0].value[1] == "5"' "LinkUp"
	wait_prom 'hpn_rdma_port_cnp_sent_total{pod="roce",namespace="ns2",uid="'$UID_B'",device_id="0000:af:00.2"}' \
		'.[0].value[1] == "5"' "CNPs sent (np_cnp_sent)"
	wait_prom 'hpn_rdma_port_out_of_sequence_total{pod="roce"}' '.[0].value[1] == "3"' \
		"out of sequence"
	wait_prom 'hpn_rdma_port_transmit_bytes_total{pod="roce"}' '.[0].value[1] == "400"' \
		"bytes sent: port_xmit_data counts 4-octet words"
	wait_prom 'hpn_rdma_port_transmit_discards_total{pod="roce"}' '.[0].value[1] == "7"' \
		"discards"
	wait_prom 'hpn_rdma_port_statistic_total{pod="roce",source="hw",statistic="np_cnp_sent"}' \
		'.[0].value[1] == "5"' "the driver's own name"
	wait_prom 'hpn_rdma_port_statistic_total{statistic="lifespan"}' 'length == 0' \
		"hw_counters/lifespan is a setting, not a counter"
	echo 9 >"$T/sysfs/class/infiniband/mlx5_2/ports/1/hw_counters/np_cnp_sent"
	wait_prom 'hpn_rdma_port_cnp_sent_total{pod="roce"}' '.[0].value[1] == "9"' \
		"a counter that rose is read again"
	# The plugin's commands from its event log.
	wait_prom 'hpn_rdma_cni_commands_total{command="ADD",code="0",network="'$NET'"}' \
		'(.[0].value[1] | tonumber) >= 1' "ADDs counted"
	wait_prom 'hpn_rdma_cni_command_duration_seconds_count{command="ADD",code="0"}' \
		'(.[0].value[1] | tonumber) >= 1' "the ADD latency histogram"
	wait_prom 'histogram_quantile(0.5, sum by (le) (hpn_rdma_cni_command_duration_seconds_bucket{command="ADD"}))' \
		'(.[0].value[1] | tonumber) > 0' "a median ADD latency"
	# Health: the first pod as ADD left it; the second's RDMA device cannot be proven.
	wait_prom 'hpn_rdma_attachment_healthy{pod="trainer"}' '.[0].value[1] == "1"' \
		"pod ns1/trainer healthy"
	wait_prom 'hpn_rdma_attachment_healthy{pod="roce"}' '.[0].value[1] == "0"' "pod ns2/roce broken"
	wait_prom 'hpn_rdma_attachment_broken{pod="roce",reason="rdma"}' '.[0].value[1] == "1"' \
		"broken: its RDMA device"
	wait_prom 'hpn_rdma_device_healthy{device_id="0000:af:00.2"}' '.[0].value[1] == "0"' \
		"the broken pod's device Unhealthy"
	wait_prom 'hpn_rdma_pool_nics_unhealthy' '.[0].value[1] == "1"' "one NIC unhealthy"
	wait_event '.event == "list" and any(.devices[]; .id == "0000:af:00.2" and
		.health == "Unhealthy")' "ListAndWatch: the broken pod's device Unhealthy"
	wait_prom 'hpn_rdma_health_checks_total{result="healthy"}' '(.[0].value[1] | tonumber) >= 1' \
		"health checks counted"
	# Every expression of the Grafana dashboard (conf/grafana-dashboard.json, its
	# variables as "all"): Prometheus takes it, and it has series here, but GC's
	# (no runtime in this scenario), the DRA driver's (no --dra here:
	# draflow.sh and draslices.sh check those families), the pod cache's and
	# the API calls' (no --kubeconfig here: podcache.sh waits on their
	# counters), NRI's (no --nri here: the runtime tier's nri.sh reads them)
	# the failed commands' (none failed) and the QoS of NICs with DCB (a veth
	# has none: unit.ncclqos judges those).
	local e n=0
	while IFS= read -r e; do
		n=$((n + 1))
		if [[ $e =~ hpn_rdma_(gc|runtime|dra|pod_cache|kube|nri)_|hpn_rdma_nic_(pfc|trust|class)_|code!=\"0\" ]]; then
			promq "$e" | jq -e '.status == "success"' >/dev/null ||
				fail "Prometheus refuses the dashboard's $e: $(promq "$e" 2>&1)"
		else
			wait_prom "$e" 'length > 0' "the dashboard's expression $e" 10
		fi
	done < <(bash "$HPN_SRC/test/dashboard.sh" --exprs)
	((n > 20)) || fail "only $n expressions from the dashboard"
	echo "# the dashboard's $n expressions run by Prometheus"
	# The exposition itself passes promtool's lint (names, units, types, HELP).
	scrape >"$T/exposition" || fail "no exposition"
	# HPN_EXPOSITION_OUT=FILE keeps it, to compare one build's exposition with another's.
	[[ -z ${HPN_EXPOSITION_OUT:-} ]] || cp "$T/exposition" "$HPN_EXPOSITION_OUT"
	# The exporter's own families first, then each service's that is on (main.c
	# registers them): each family once; none of GC's (--cri-socket none) nor the
	# DRA driver's (no --dra).
	[[ $(grep -m1 '^# TYPE' "$T/exposition") == '# TYPE hpn_rdma_agent_build_info gauge' ]] ||
		fail "the exposition does not start with the exporter's own families"
	[[ -z $(grep '^# TYPE' "$T/exposition" | sort | uniq -d) ]] ||
		fail "families exported twice: $(grep '^# TYPE' "$T/exposition" | sort | uniq -d)"
	! grep -qE '^# TYPE hpn_rdma_(gc|runtime|dra)_' "$T/exposition" ||
		fail "families of a service that is off: $(grep -E '^# TYPE hpn_rdma_(gc|runtime|dra)_' "$T/exposition")"
	promtool check metrics <"$T/exposition" >"$T/promtool.out" 2>&1 ||
		fail "promtool check metrics: $(cat "$T/promtool.out")"
	[[ ! -s $T/promtool.out ]] || fail "promtool check metrics warns: $(cat "$T/promtool.out")"
	[[ $(ip netns exec "$HOST_NS" curl -s -o /dev/null -w '%{http_code}' \
		"http://127.0.0.1:$MPORT/nothing") == 404 ]] || fail "an unknown path is not 404"
	[[ $(ip netns exec "$HOST_NS" curl -s -o /dev/null -w '%{http_code}' -X POST \
		"http://127.0.0.1:$MPORT/metrics") == 405 ]] || fail "POST is not 405"
	prom_stop
	pod_b_del
	run_plugin DEL "$CONF_A"
	expect_ok "DEL of pod ns1/trainer"
	wait_metric '^hpn_rdma_attachments\{network="'$NET'"\} 0$' "no attachments after both DELs"
	wait_metric '^hpn_rdma_pool_nics_unhealthy\{resource="rdma/hpn"\} 0$' \
		"the device of the gone attachment Healthy again"
	node_down
}
run "Prometheus scrapes the agent: pool, attachments, link and RDMA counters, CNI latency, health; promtool passes" prometheus_scrapes

health_flips() {
	metrics_up plain
	pod_a
	wait_metric '^hpn_rdma_attachment_healthy\{.*pod="trainer".*\} 1$' "pod ns1/trainer healthy"
	ip -n "$POD_NS" link set hpn0 down
	wait_event '.event == "list" and any(.devices[]; .id == "pool3" and .health == "Unhealthy")' \
		"hpn0 down: its device Unhealthy in ListAndWatch" 15
	wait_metric '^hpn_rdma_attachment_healthy\{.*pod="trainer".*\} 0$' "the health gauge 0"
	wait_metric '^hpn_rdma_attachment_broken\{.*pod="trainer".*reason="interface"\} 1$' \
		"broken: the interface"
	wait_metric '^hpn_rdma_device_healthy\{.*device_id="pool3".*\} 0$' "the device gauge 0"
	grep -q "attachment $CID.eth0 (pod ns1/trainer) is broken (interface): interface \"hpn0\" is down" \
		"$T/agent.log" || fail "the log does not say what broke: $(tail -5 "$T/agent.log")"
	grep -q 'device pool3 ("pool3") is Unhealthy: its attachment is broken' "$T/agent.log" ||
		fail "the log does not name the device: $(tail -5 "$T/agent.log")"
	ip -n "$POD_NS" link set hpn0 up
	wait_event '.event == "list" and any(.devices[]; .id == "pool3" and .health == "Healthy")' \
		"hpn0 up: Healthy again" 15
	wait_metric '^hpn_rdma_attachment_healthy\{.*pod="trainer".*\} 1$' "the health gauge 1 again"
	if grep -q '^hpn_rdma_attachment_broken{' "$T/scrape"; then
		fail "a broken attachment is still exported: $(grep '^hpn_rdma_attachment_broken' "$T/scrape")"
	fi
	grep -q "attachment $CID.eth0 (pod ns1/trainer) is whole again" "$T/agent.log" ||
		fail "the log does not say it is whole again"
	run_plugin DEL "$CONF_A"
	expect_ok "DEL"
	node_down
}
run "health: hpn0 down makes its device Unhealthy and the gauge 0; up again, Healthy and 1" health_flips

events_counted() {
	local conf
	metrics_up plain
	stop_agent
	conf=$(agent_net_conf '.agent.lookup = false | .match.devices = ["pool3"]')
	# Before the agent starts: a refused CHECK (no prevResult: code 7), and garbage.
	run_plugin CHECK "$conf"
	expect_err 7 "CHECK without prevResult" 'CHECK needs prevResult'
	echo 'not a record' >>"$STATE/events.log"
	jq_ok '.command == "CHECK" and .code == 7 and .network == $n and .containerId == $c and
		.seconds >= 0' "the event log's last record" \
		"$(grep -v '^not' "$STATE/events.log" | tail -n1)" --arg n "$NET" --arg c "$CID"
	start_agent
	wait_event '.event == "list"' "the agent is back" 20
	wait_metric '^hpn_rdma_cni_commands_total\{network="'$NET'",command="CHECK",code="7"\} 1$' \
		"the CHECK the log held before the agent started"
	wait_metric '^hpn_rdma_cni_events_skipped_total [1-9]' "the garbage line skipped"
	run_plugin CHECK "$conf"
	wait_metric '^hpn_rdma_cni_commands_total\{network="'$NET'",command="CHECK",code="7"\} 2$' \
		"a CHECK appended while the agent runs"
	# Full: the next command rotates the file, and the agent follows it.
	truncate -s 1048576 "$STATE/events.log"
	run_plugin CHECK "$conf"
	[[ -f $STATE/events.log.1 && $(wc -l <"$STATE/events.log") == 1 ]] ||
		fail "the event log was not rotated: $(ls -l "$STATE")"
	wait_metric '^hpn_rdma_cni_commands_total\{network="'$NET'",command="CHECK",code="7"\} 3$' \
		"the first CHECK after the rotation"
	run_plugin CHECK "$conf"
	wait_metric '^hpn_rdma_cni_commands_total\{network="'$NET'",command="CHECK",code="7"\} 4$' \
		"and the next"
	node_down
}
run "the plugin's event log: refused commands by code, lines before the start, rotation, garbage" events_counted

# A pod whose claim knew its GPUs: pool2 (hpn0) serves GPU A at SYS though a
# NIC left free was PIX from it (the kubelet's allocation put it there),
# pool1 (hpn1) serves GPU B at PXB, the nearest there was. Journalled as the
# claim writes it, then moved, as ADD does.
GPU_A=GPU-2f6b1c1e-8a3d-4c55-9e0f-7d1a2b3c4d5e
GPU_B=GPU-9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d
gpu_far() {
	local ns=${HPNT_PREFIX}p$SCEN-g mac1 mac2 idx1 idx2 n line
	metrics_up plain
	ip netns add "$ns"
	mac1=$(mac_of "$HOST_NS" pool1)
	mac2=$(mac_of "$HOST_NS" pool2)
	idx1=$(ip -n "$HOST_NS" -j link show pool1 | jq '.[0].ifindex')
	idx2=$(ip -n "$HOST_NS" -j link show pool2 | jq '.[0].ifindex')
	jq -cn --arg boot "$(</proc/sys/kernel/random/boot_id)" --arg cid "$CID-g" \
		--arg netns "$(ns_path "$ns")" --arg mac1 "$mac1" --arg mac2 "$mac2" \
		--argjson idx1 "$idx1" --argjson idx2 "$idx2" --arg ga "$GPU_A" --arg gb "$GPU_B" '{
		version: 2, bootId: $boot, phase: 4, containerId: $cid, cniIfName: "eth0",
		netns: $netns,
		nics: [{kind: "moved", podIfName: "hpn0", pci: "0000:af:00.2",
			host: {name: "pool2", ifindex: $idx2, mtu: 1500, up: false, mac: $mac2, altnames: []},
			gpu: {id: $ga, pci: "0000:1b:00.0", distance: "SYS", best: "PIX"}},
			{kind: "moved", podIfName: "hpn1", pci: "0000:af:00.1",
			host: {name: "pool1", ifindex: $idx1, mtu: 1500, up: false, mac: $mac1, altnames: []},
			gpu: {id: $gb, distance: "PXB", best: "PXB"}}],
		result: {cniVersion: "1.0.0", interfaces: [
				{name: "hpn0", mac: $mac2, sandbox: $netns},
				{name: "hpn1", mac: $mac1, sandbox: $netns}],
			ips: [], dns: {}},
		pod: {namespace: "ns3", name: "far", uid: "0b3c5d1e-9a47-4f3e-8c2d-00000000000c"}}' \
		>"$STATE/$NET/.$CID-g.eth0"
	mv "$STATE/$NET/.$CID-g.eth0" "$STATE/$NET/$CID-g.eth0"
	ip -n "$HOST_NS" link set pool2 netns "$ns" name hpn0
	ip -n "$HOST_NS" link set pool1 netns "$ns" name hpn1
	ip -n "$ns" link set hpn0 up
	ip -n "$ns" link set hpn1 up
	wait_metric '^hpn_rdma_nic_gpu_distance\{.*pod="far".*interface="hpn0",nic="pool2",device_id="0000:af:00.2".*,gpu="'"$GPU_A"'",gpu_pci="0000:1b:00.0"\} 3$' \
		"hpn0's GPU across NUMA nodes: SYS, 3"
	grep -Eq '^hpn_rdma_nic_gpu_distance\{.*pod="far".*nic="pool1".*,gpu="'"$GPU_B"'",gpu_pci=""\} 1$' \
		"$T/scrape" || fail "hpn1's GPU through several switches: PXB, 1: $(grep nic_gpu "$T/scrape")"
	grep -Eq '^hpn_rdma_nic_far\{.*pod="far".*nic="pool2".*,gpu="'"$GPU_A"'",distance="SYS",best="PIX"\} 1$' \
		"$T/scrape" || fail "hpn0 is not far: $(grep nic_far "$T/scrape")"
	grep -Eq '^hpn_rdma_nic_far\{.*pod="far".*nic="pool1".*,distance="PXB",best="PXB"\} 0$' \
		"$T/scrape" || fail "hpn1, the nearest there was, is far: $(grep nic_far "$T/scrape")"
	# The health loop (every second) says it once, naming pod, NIC, GPU and both classes.
	line="attachment $CID-g.eth0 (pod ns3/far): NIC pool2 (0000:af:00.2) serves GPU $GPU_A (0000:1b:00.0) at SYS, but a NIC left free was PIX from it"
	for ((n = 0; n < 100; n++)); do
		grep -qF "$line" "$T/agent.log" && break
		sleep 0.1
	done
	grep -qF "$line" "$T/agent.log" || fail "no warning about the far NIC: $(tail -5 "$T/agent.log")"
	wait_metric '^hpn_rdma_health_checks_total\{result="healthy"\} [3-9]' "three health periods" 15
	n=$(grep -cF "serves GPU" "$T/agent.log")
	[[ $n == 1 ]] || fail "the far NIC was warned about $n times, not once: $(grep -F 'serves GPU' "$T/agent.log")"
	# Nothing is broken: the attachment healthy, its devices Healthy.
	wait_metric '^hpn_rdma_attachment_healthy\{.*pod="far".*\} 1$' "the far pod's attachment healthy"
	grep -Eq '^hpn_rdma_device_healthy\{.*device_id="0000:af:00.2".*\} 1$' "$T/scrape" ||
		fail "the far NIC's device is not Healthy: $(grep device_healthy "$T/scrape")"
	jq -e 'all(.[]; .health == "Healthy")' <<<"$(last_list)" >/dev/null ||
		fail "ListAndWatch has an Unhealthy device: $(last_list)"
	promtool check metrics <"$T/scrape" >"$T/promtool.out" 2>&1 ||
		fail "promtool check metrics: $(cat "$T/promtool.out")"
	[[ ! -s $T/promtool.out ]] || fail "promtool check metrics warns: $(cat "$T/promtool.out")"
	run_plugin DEL "$(agent_net_conf '.agent.lookup = false')" CNI_CONTAINERID="$CID-g" \
		CNI_NETNS="$(ns_path "$ns")"
	expect_ok "DEL of the far pod"
	ip netns del "$ns"
	wait_metric '^hpn_rdma_attachments\{network="'$NET'"\} 0$' "no attachment after DEL"
	if grep -q '^hpn_rdma_nic_' "$T/scrape"; then
		fail "NIC GPU series outlive their attachment: $(grep '^hpn_rdma_nic_' "$T/scrape")"
	fi
	node_down
}
run "far NICs: each NIC's GPU distance, the far gauge, one warning, devices Healthy" gpu_far

t_done
