#!/bin/bash
# hpn-rdma doctor against fake sysfs trees, with golden output.
#
# Each scenario copies test/fixtures/sysfs into a scratch directory, adds what a
# live node has there (ib_core's netns_mode parameter, module directories, the
# verbs and rdma_cm classes, MTU and NUMA node files), points a config's
# sysfsRoot and stateDir at it, and compares `doctor` (text) and `doctor --json`
# (normalised with jq -S) with test/doctor/golden/<scenario>.{txt,json}, the
# scratch path written as @TMP@ and the version as @VERSION@. It also checks the exit code, that STATUS gives
# the same reason as the doctor, and how the doctor picks a config file.
# No privileges; nothing outside the scratch directory is touched.
# HPN_UPDATE_GOLDEN=1 rewrites the golden files instead of comparing.
set -euo pipefail
plugin=${HPN_PLUGIN:?run through ctest}
src=${HPN_SRC:?run through ctest}
golden=$src/test/doctor/golden
version=$("$plugin" --version)
version=${version#hpn-rdma }	# kept out of the golden files as @VERSION@
T=$(mktemp -d /tmp/hpn-doctor.XXXXXX)
trap 'rm -rf "$T"' EXIT
failed=0

fail() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}
ok() { echo "ok: $*"; }

# tree NAME: a scratch copy of the fixture, as a healthy shared-mode node shows it.
tree() {
	local s=$T/$1/sys
	mkdir -p "$T/$1"
	cp -a "$src/test/fixtures/sysfs" "$s"
	chmod -R u+w "$s"
	mkdir -p "$s/module/ib_core/parameters" "$s/class/infiniband_verbs/uverbs0" \
		"$s/class/misc/rdma_cm"
	echo Y >"$s/module/ib_core/parameters/netns_mode"
	for m in ib_uverbs ib_cm iw_cm rdma_cm rdma_ucm mlx5_core mlx5_ib mlx4_core mlx4_ib; do
		mkdir -p "$s/module/$m"
	done
	for n in ens1f0np0:9000 ens1f1np1:9000 ens1f0v0:9000 ens2:1500 ens2d1:1500 eth1:1500 \
		eth2:8500; do
		echo "${n#*:}" >"$s/class/net/${n%%:*}/mtu"
	done
	for p in 0000:af:00.0:0 0000:af:00.1:0 0000:af:00.2:0 0000:3b:00.0:1 0000:00:04.0:-1 \
		0000:00:05.0:-1 0000:00:06.0:-1; do
		echo "${p##*:}" >"$s/bus/pci/devices/${p%:*}/numa_node"
	done
	# MLNX_OFED's mlx5 ECN knobs on ens1f0np0 (<if>/ecn/<proto>/enable/<prio>):
	# the notification point on priority 3, the reaction point on 3 and 4.
	local proto prio on
	for proto in roce_np:3 roce_rp:34; do
		mkdir -p "$s/class/net/ens1f0np0/ecn/${proto%:*}/enable"
		for prio in 0 1 2 3 4 5 6 7; do
			on=0
			[[ ${proto#*:} == *$prio* ]] && on=1
			echo $on >"$s/class/net/ens1f0np0/ecn/${proto%:*}/enable/$prio"
		done
	done
	mkdir -p "$T/$1/state" "$T/$1/bin" "$T/$1/net.d"
	printf '#!/bin/sh\nexit 0\n' >"$T/$1/bin/host-local"
	chmod +x "$T/$1/bin/host-local"
}

# etree NAME MODE: a scratch copy of eRDMA's MODE layout (test/fixtures/erdma/MODE),
# as a healthy shared-mode node with its modules shows it.
etree() {
	local s=$T/$1/sys
	mkdir -p "$T/$1"
	cp -a "$src/test/fixtures/erdma/$2" "$s"
	chmod -R u+w "$s"
	mkdir -p "$s/module/ib_core/parameters" "$s/class/infiniband_verbs/uverbs0" \
		"$s/class/misc/rdma_cm"
	echo Y >"$s/module/ib_core/parameters/netns_mode"
	for m in ib_uverbs ib_cm iw_cm rdma_cm rdma_ucm; do
		mkdir -p "$s/module/$m"
	done
	mkdir -p "$T/$1/state" "$T/$1/bin" "$T/$1/net.d"
	printf '#!/bin/sh\nexit 0\n' >"$T/$1/bin/host-local"
	chmod +x "$T/$1/bin/host-local"
}

# conf NAME JQ-FILTER [JQ ARGS...]: writes $T/NAME/net.d/10-hpn.conf for the scenario.
conf() {
	local n=$1 filter=$2
	shift 2
	jq -n --arg s "$T/$n/sys" --arg d "$T/$n/state" "$@" '{
		cniVersion: "1.1.0", name: "hpnt-doctor", type: "hpn-rdma", ifName: "hpn0",
		sysfsRoot: $s, stateDir: $d,
		ipam: {type: "host-local", ranges: [[{subnet: "10.200.0.0/16"}]]}
	} | '"$filter" >"$T/$n/net.d/10-hpn.conf"
}

doctor() { # doctor NAME [args]: runs the doctor on the scenario; sets OUT and RC
	local n=$1
	shift
	RC=0
	OUT=$("$plugin" doctor --conf-dir "$T/$n/net.d" --cni-path "$T/$n/bin" "$@" 2>&1) || RC=$?
	OUT=${OUT//$T/@TMP@}
	OUT=${OUT//"doctor $version"/doctor @VERSION@}
	OUT=${OUT//"\"version\":	\"$version\""/\"version\":	\"@VERSION@\"}
}

# compare NAME EXPECTED-RC: text and JSON output against the golden files.
compare() {
	local n=$1 want=$2 g
	doctor "$n"
	[[ $RC == "$want" ]] || fail "$n: exit $RC, expected $want"
	g=$golden/$n.txt
	if [[ ${HPN_UPDATE_GOLDEN:-} == 1 ]]; then
		printf '%s\n' "$OUT" >"$g"
	elif diff -u "$g" <(printf '%s\n' "$OUT"); then
		ok "$n: text matches $(basename "$g")"
	else
		fail "$n: text differs from $g"
	fi
	doctor "$n" --json
	[[ $RC == "$want" ]] || fail "$n --json: exit $RC, expected $want"
	jq -e . >/dev/null <<<"$OUT" || { fail "$n --json: not JSON: $OUT"; return; }
	jq -e --argjson r "$([[ $want == 0 ]] && echo true || echo false)" \
		'.ready == $r and ((.reasons | length == 0) == $r)' >/dev/null <<<"$OUT" ||
		fail "$n --json: ready/reasons do not match exit $want"
	g=$golden/$n.json
	if [[ ${HPN_UPDATE_GOLDEN:-} == 1 ]]; then
		jq -S . <<<"$OUT" >"$g"
	elif diff -u "$g" <(jq -S . <<<"$OUT"); then
		ok "$n: JSON matches $(basename "$g")"
	else
		fail "$n: JSON differs from $g"
	fi
}

# 1. Healthy node: the NIC at 0000:af:00.0 (mlx5_0, ACTIVE) is free.
tree healthy
conf healthy '.pciBusID = "0000:af:00.0"'
compare healthy 0

# RoCE QoS on a fake tree: DCB is not asked (the tree's netdevs are not the
# kernel's), ECN comes from the tree, where the driver has its knobs.
doctor healthy --json
jq -e '(.qos | map({(.netdev): .}) | add) as $q | (.qos | length) == 7 and
	$q.ens1f0np0 == {netdev: "ens1f0np0", dcb: "unread", dcbAsked: false, error: null,
		pfc: null, pfcCap: null, trust: null, dscpPrio: null, dcbx: null, dcbxRaw: null,
		ecn: {np: [3], rp: [3, 4]},
		hints: {trafficClass: 0, fifoTrafficClass: 0, serviceLevel: 0, lossless: "unknown",
			note: "DCB not asked (a fake tree: its netdevs are not the kernel'"'"'s)"}} and
	$q.eth2.ecn == {np: null, rp: null} and $q.eth2.dcb == "unread"' >/dev/null <<<"$OUT" &&
	ok "QoS on a fake tree: DCB not asked, ECN from the tree" || fail "QoS on a fake tree: $OUT"
# The class the config's hints give a RoCE NIC there: Type 1's with GU8TF, none with P16EN.
conf healthy '.pciBusID = "0000:af:00.0" | .nccl.gpuModel = "GU8TF"'
doctor healthy --json
jq -e '(.qos[] | select(.netdev == "ens1f0np0") | .hints) == {trafficClass: 136,
	fifoTrafficClass: 136, serviceLevel: 5, lossless: "unknown",
	note: "DCB not asked (a fake tree: its netdevs are not the kernel'"'"'s)"}' >/dev/null <<<"$OUT" &&
	ok "QoS: GU8TF's class judged" || fail "QoS: GU8TF's class: $OUT"
doctor healthy
grep -q '^  hints (GU8TF): NCCL_IB_TC=136 NCCL_IB_FIFO_TC=136 NCCL_IB_SL=5, lossless unknown: ' <<<"$OUT" &&
	ok "QoS: GU8TF's class in the text" || fail "QoS: GU8TF's class in the text: $OUT"
conf healthy '.pciBusID = "0000:af:00.0" | .nccl.gpuModel = "P16EN"'
doctor healthy --json
jq -e '(.qos[] | select(.netdev == "ens1f0np0") | .hints) ==
	{lossless: null, note: "NCCL'"'"'s IB transport is off: no class"}' >/dev/null <<<"$OUT" &&
	ok "QoS: P16EN gives no class" || fail "QoS: P16EN: $OUT"

# 2. No RDMA devices (ib_core loaded, no device registered).
tree nodev
rm -rf "$T/nodev/sys/class/infiniband" "$T/nodev/sys/class/infiniband_verbs/uverbs0"
mkdir "$T/nodev/sys/class/infiniband"
conf nodev '.device = "ens1f0np0"'
compare nodev 1

# 3. Wrong netns mode: the node is exclusive, the config wants shared.
tree netns
echo N >"$T/netns/sys/module/ib_core/parameters/netns_mode"
conf netns '.rdmaDevice = "mlx5_1" | .rdmaNetns = "shared"'
compare netns 1

# 4. A NIC held by a pod: ens1f0np0 has left the host (shared mode: mlx5_0
#    stays, without a netdev) and a journal in the state store says who has it.
tree held
rm "$T/held/sys/class/net/ens1f0np0"
mkdir -p "$T/held/state/hpnt-doctor"
jq -nc '{version: 1, phase: 4, containerId: "0123456789abcdef0123", cniIfName: "eth0",
	podIfName: "hpn0", netns: "/run/netns/pod-a",
	host: {name: "ens1f0np0", ifindex: 4, mtu: 9000, up: true, mac: "b8:ce:f6:00:00:10",
	       altnames: []},
	pci: "0000:af:00.0", rdma: {name: "mlx5_0", netdev: "ens1f0np0", moved: false}}' \
	>"$T/held/state/hpnt-doctor/0123456789abcdef0123.eth0"
conf held '.device = "ens1f0np0"'
compare held 0

# softRoce on a node without RDMA devices: none is needed, but the kernel must
# be able to make one for a pod (the rdma check names what it lacks).
tree soft
rm -rf "$T/soft/sys/class/infiniband" "$T/soft/sys/class/infiniband_verbs/uverbs0"
mkdir "$T/soft/sys/class/infiniband"
conf soft '.device = "eth1" | .softRoce = true'
doctor soft --json
jq -e '(.checks | map({(.name): .}) | add) as $c |
	$c.devices.state == "ok" and ($c.devices.message | contains("softRoce makes one in each pod")) and
	$c.device.state == "ok" and $c.device.message == "eth1 (no RDMA device: softRoce makes one in the pod)" and
	$c.rdma.state == "fail" and ($c.rdma.message | startswith("softRoce: Soft-RoCE in a pod netns needs")) and
	($c.rdma.message | contains("the rdma_rxe module (not loaded"))' >/dev/null <<<"$OUT" &&
	ok "softRoce without RDMA devices: devices and device ok, rdma names rdma_rxe" ||
	fail "softRoce doctor: $OUT"
mkdir -p "$T/soft/sys/module/rdma_rxe"
doctor soft --json
rel=$(uname -r)
IFS=. read -r kmaj kmin _ <<<"$rel"
kmin=${kmin%%[!0-9]*}
if ((kmaj > 7 || (kmaj == 7 && kmin >= 1))); then
	jq -e '.checks[] | select(.name == "rdma") | .state == "ok"' >/dev/null <<<"$OUT" &&
		ok "softRoce with rdma_rxe on $rel: rdma ok" || fail "softRoce with rdma_rxe: $OUT"
else
	jq -e --arg r "$rel" '.checks[] | select(.name == "rdma") | .state == "fail" and
		.message == "softRoce: Soft-RoCE in a pod netns needs Linux 7.1 or later (before it, every rxe device sends from the initial netns; this kernel is \($r))"' \
		>/dev/null <<<"$OUT" && ok "softRoce with rdma_rxe on $rel: rdma names the release alone" ||
		fail "softRoce with rdma_rxe: $OUT"
fi

# 5. eRDMA in compat mode and from the OFED package: each row's PCI function is
#    the RDMA device's own (not the ENI's, which JSON gives as netdevPci), its
#    NUMA node that function's; the NCCL view (RoCE v2, the GID index of the
#    ENI's address, the exact HCA); the MTU check.
etree erdma-compat compat
conf erdma-compat '.device = "eth2"'
compare erdma-compat 0
etree erdma-ofed ofed
conf erdma-ofed '.pciBusID = "0000:00:05.0"'
compare erdma-ofed 0
doctor erdma-ofed --json
jq -e '.nics == [{driver: "erdma", erdmaMode: "ofed", heldBy: null, kind: "erdma",
		linkLayer: "Ethernet", mtu: 8500, nccl: {gidIndex: 1, hca: "=rocep26s0:1", ib: true},
		netdev: "eth1", netdevPci: "0000:00:05.0", numaNode: 1, pci: "0000:1a:00.0", port: 1,
		rdmaDevice: "rocep26s0", state: "ACTIVE", transport: "roce", vf: false}]' \
	>/dev/null <<<"$OUT" && ok "ofed: the RDMA function's place, its mode, NCCL's view" ||
	fail "ofed: $OUT"
doctor healthy --json
jq -e '(.nics[] | select(.rdmaDevice == "erdma_0")) as $e |
	$e.pci == "0000:00:06.0" and $e.netdevPci == "0000:00:05.0" and $e.erdmaMode == "iwarp" and
	$e.transport == "iwarp" and $e.nccl == {ib: false, gidIndex: null, hca: null} and
	(.nics[] | select(.rdmaDevice == "mlx5_0")).nccl == {ib: true, gidIndex: null, hca: "=mlx5_0:1"}' \
	>/dev/null <<<"$OUT" && ok "iWARP: no IB for NCCL; mlx5: its exact HCA" || fail "iwarp view: $OUT"

# The eRDMA MTU: 8500 or 1400 on a GPU instance. MTU 1500: a warning on a node
# without GPUs, a failure with them (procRoot lists one), a warning again with
# erdmaAnyMtu.
echo 1500 >"$T/erdma-ofed/sys/class/net/eth1/mtu"
doctor erdma-ofed --json
jq -e '.ready and (.checks[] | select(.name == "erdma")) ==
	{name: "erdma", state: "warn", message: ("eth1 (rocep26s0, ofed) MTU 1500: on GPU instances " +
	"an eRDMA NIC'"'"'s MTU must be 8500 (jumbo frames) or 1400, or NCCL'"'"'s LL128 protocol corrupts " +
	"data; ADD refuses it for pods with GPUs (none listed under procRoot/driver/nvidia/gpus here)")}' \
	>/dev/null <<<"$OUT" && ok "eRDMA at MTU 1500 without GPUs: a warning" || fail "mtu warn: $OUT"
mkdir -p "$T/erdma-ofed/proc/driver/nvidia/gpus/0000:1b:00.0"
conf erdma-ofed '.pciBusID = "0000:00:05.0" | .gpus.procRoot = $p' --arg p "$T/erdma-ofed/proc"
doctor erdma-ofed
[[ $RC == 1 && $OUT == *"fail  erdma     eth1 (rocep26s0, ofed) MTU 1500: "*"ADD refuses it for pods with GPUs, and this node has GPUs"* ]] &&
	ok "eRDMA at MTU 1500 on a GPU node: not ready" || fail "mtu fail: exit $RC: $OUT"
conf erdma-ofed '.pciBusID = "0000:00:05.0" | .gpus.procRoot = $p | .erdmaAnyMtu = true' \
	--arg p "$T/erdma-ofed/proc"
doctor erdma-ofed
[[ $RC == 0 && $OUT == *"warn  erdma     eth1 (rocep26s0, ofed) MTU 1500: "*"erdmaAnyMtu lets ADD take it"* ]] &&
	ok "eRDMA at MTU 1500 with erdmaAnyMtu: a warning" || fail "mtu erdmaAnyMtu: exit $RC: $OUT"
echo 1400 >"$T/erdma-ofed/sys/class/net/eth1/mtu"
doctor erdma-ofed
[[ $RC == 0 && $OUT == *"ok    erdma     eth1 (rocep26s0, ofed) MTU 1400: fit for pods with GPUs (8500 or 1400)"* ]] &&
	ok "eRDMA at MTU 1400 on a GPU node: ok" || fail "mtu 1400: exit $RC: $OUT"

# STATUS gives the doctor's reason, word for word after "hpn-rdma: " (one set of checks).
stat_msg=$(CNI_COMMAND=STATUS CNI_PATH="$T/netns/bin" "$plugin" <"$T/netns/net.d/10-hpn.conf" |
	jq -r .msg) || true
doc_msg=$("$plugin" doctor --json --conf-dir "$T/netns/net.d" --cni-path "$T/netns/bin" |
	jq -r '.checks[] | select(.name == "rdma") | .message') || true
if [[ -n $doc_msg && $stat_msg == "hpn-rdma: $doc_msg" ]]; then
	ok "STATUS and the doctor give the same reason: $stat_msg"
else
	fail "STATUS said \"$stat_msg\", the doctor \"$doc_msg\""
fi
CNI_COMMAND=STATUS CNI_PATH="$T/healthy/bin" "$plugin" <"$T/healthy/net.d/10-hpn.conf" &&
	ok "STATUS on the healthy node" || fail "STATUS on the healthy node failed"
[[ -z $(find "$T/healthy/state" -mindepth 1) ]] && ok "doctor and STATUS created nothing" ||
	fail "state dir not empty: $(find "$T/healthy/state" -mindepth 1)"

# Which config: the first file (sorted) with an hpn-rdma plugin; a warning when
# another file sorts first; --config picks a conflist's hpn-rdma entry.
echo '{"cniVersion": "1.0.0", "name": "other", "type": "bridge"}' >"$T/healthy/net.d/05-bridge.conf"
echo 'not json' >"$T/healthy/net.d/07-broken.conflist"
echo '{}' >"$T/healthy/net.d/00-ignored.txt"
doctor healthy --json
jq -e '.config.file == "@TMP@/healthy/net.d/10-hpn.conf" and .ready and
	any(.checks[]; .state == "warn" and (.message | contains("05-bridge.conf sorts first")))' \
	>/dev/null <<<"$OUT" && ok "the first hpn-rdma file, with a warning" || fail "conf-dir: $OUT"
doctor healthy --json --config "$src/conf/10-hpn-rdma.conflist"
jq -e '.config.valid and .config.pluginIndex == 1 and
	.config.selects == "runtimeConfig.deviceID (from the device plugin)"' >/dev/null <<<"$OUT" &&
	ok "--config takes a conflist's hpn-rdma entry" || fail "--config conflist: $OUT"
conf healthy '.match = {devices: ["ens1f*"], drivers: ["mlx5_core"], numaNode: 0} | .count = 2'
doctor healthy --json
jq -e '.config.selects == "match (count 2): devices ens1f* drivers mlx5_core numaNode 0"' \
	>/dev/null <<<"$OUT" && ok "a match config: what it selects" || fail "match selects: $OUT"
conf healthy '.pciBusID = "0000:af:00.0"'
mkdir "$T/empty"
RC=0
OUT=$("$plugin" doctor --conf-dir "$T/empty") || RC=$?
[[ $RC == 1 && $OUT == *"no CNI config with an hpn-rdma plugin in $T/empty"* ]] &&
	ok "no config: not ready, says so" || fail "no config: exit $RC: $OUT"
doctor healthy --config "$T/healthy/net.d/05-bridge.conf"
[[ $RC == 1 && $OUT == *"05-bridge.conf has no hpn-rdma plugin"* ]] &&
	ok "--config without hpn-rdma: not ready" || fail "--config bridge: exit $RC: $OUT"
conf healthy '.pciBusID = "0000:af:00.0" | .mtu = 7'
doctor healthy
[[ $RC == 1 && $OUT == *"fail  config"*"mtu"*"(code 7)"* ]] &&
	ok "an invalid config: its error and code" || fail "invalid config: exit $RC: $OUT"
RC=0
"$plugin" doctor --bogus >/dev/null 2>&1 || RC=$?
[[ $RC == 2 ]] && ok "a bad argument: exit 2" || fail "bad argument: exit $RC"

((failed == 0)) || { echo "$failed failed"; exit 1; }
echo "all passed"
