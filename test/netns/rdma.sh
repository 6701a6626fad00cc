#!/bin/bash
# RDMA decisions a host without RDMA can prove.
#
# Proves that with rdmaRequired (the default) a NIC with no RDMA device is
# refused with code 108 naming it and the option; that an RDMA device found
# through sysfs but not usable from the pod (a fake mlx5 behind a veth) fails
# ADD with 108 naming it, and ADD is rolled back; that in a pod of four NICs
# with two such devices both proofs run and the first NIC's is reported, with
# no process of the proofs left; that rdmaDevice selects the
# NIC behind an RDMA device (and 100 for an unknown one); that rdmaNetns
# "exclusive" on a node in shared mode is refused before anything changes;
# that rdmaRequired false attaches a plain netdev whose result says no RDMA
# device was bound, which CHECK and DEL accept; and that eRDMA (the fixtures
# of its three modes, behind a veth of the ENI's MAC) is judged by its mode
# against the GPU model's profile before anything changes. Real RDMA devices are the vm
# tier's job (test/vm).
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init

PCI=0000:af:00.0

# setup [FAKE]: nic0 up with an address-less peer; FAKE builds a sysfs tree
# in which nic0 is a ConnectX PCI function carrying RDMA device mlx5_0.
setup() {
	mk_nic "$HOST_NS" nic0 peer0
	ip -n "$HOST_NS" link set nic0 up
	snap_save "$HOST_NS" "$T/host.before"
	SYS=$T/sysfs-$SCEN
	mk_fake_pci "$SYS" "$PCI" nic0
	[[ ${1:-} != fake ]] || fake_mlx5 "$SYS" "$PCI" nic0 mlx5_0
}

# fake_mlx5 ROOT PCIADDR IFNAME DEV: in the fake tree ROOT (mk_fake_pci),
# the PCI function carries RDMA device DEV (mlx5), port 1 ACTIVE on IFNAME.
fake_mlx5() {
	local root=$1 pci=$2 ifname=$3 ib=$4
	local dev="$root/devices/pci0000:ae/0000:ae:00.0/$pci"
	mkdir -p "$dev/infiniband/$ib/ports/1/gid_attrs/ndevs" "$root/class/infiniband"
	echo "$ifname" >"$dev/infiniband/$ib/ports/1/gid_attrs/ndevs/0"
	echo "1: CA" >"$dev/infiniband/$ib/node_type"
	echo "4: ACTIVE" >"$dev/infiniband/$ib/ports/1/state"
	ln -s "../../../$pci" "$dev/infiniband/$ib/device"
	mkdir -p "$root/bus/pci/drivers/mlx5_core"
	ln -sfn ../../../../bus/pci/drivers/mlx5_core "$dev/driver"
	ln -s "../../devices/pci0000:ae/0000:ae:00.0/$pci/infiniband/$ib" \
		"$root/class/infiniband/$ib"
}

# refused_unchanged CODE WHAT PATTERN: the last ADD failed with CODE, its
# message matches PATTERN, and host, pod and state are as before.
refused_unchanged() {
	expect_err "$1" "$2" "$3"
	snap_same "$HOST_NS" "$T/host.before" "$2: host"
	pod_empty "$2: pod"
	expect_no_state "$2"
}

no_rdma_required() {
	setup
	run_plugin ADD "$(net_conf 1.0.0 'del(.rdmaRequired) | .device = "nic0"')"
	refused_unchanged 108 "default rdmaRequired, veth" 'no RDMA device serves "nic0".*rdmaRequired'
	run_plugin ADD "$(net_conf 1.0.0 '.rdmaRequired = true | .pciBusID = $p |
		.sysfsRoot = $s' --arg p "$PCI" --arg s "$SYS")"
	refused_unchanged 108 "rdmaRequired true, PCI NIC without RDMA" 'no RDMA device serves'
}
scenario "rdmaRequired: a NIC without RDMA is refused (108)" no_rdma_required

unusable_device() {
	setup fake
	conf=$(net_conf 1.0.0 '.rdmaRequired = true | .device = "nic0" | .ifName = "hpn0" |
		.sysfsRoot = $s' --arg s "$SYS")
	run_plugin ADD "$conf"
	refused_unchanged 108 "fake mlx5_0 behind nic0" '"mlx5_0" is not visible to libibverbs'
	grep -q 'RDMA device "mlx5_0" port 1 (mlx5) serves "nic0"' "$T/plugin.log" ||
		fail "log does not say which RDMA device was found: $(cat "$T/plugin.log")"
	# The same device found the other way round: rdmaDevice selects nic0.
	run_plugin ADD "$(jq -c 'del(.device) | .rdmaDevice = "mlx5_0:1"' <<<"$conf")"
	refused_unchanged 108 "rdmaDevice mlx5_0:1" '"mlx5_0" is not visible to libibverbs'
	grep -q 'attach "nic0" pci 0000:af:00.0 as "hpn0"' "$T/plugin.log" ||
		fail "rdmaDevice did not select nic0: $(cat "$T/plugin.log")"
	run_plugin ADD "$(jq -c 'del(.device) | .rdmaDevice = "mlx5_9"' <<<"$conf")"
	refused_unchanged 100 "rdmaDevice mlx5_9" 'RDMA device "mlx5_9" not found'
	run_plugin ADD "$(jq -c 'del(.device) | .rdmaDevice = "mlx5_0:2"' <<<"$conf")"
	refused_unchanged 100 "rdmaDevice mlx5_0:2" 'no netdev on port 2'
}
scenario "an RDMA device the pod cannot use fails ADD (108), rolled back" unusable_device

netns_mode_mismatch() {
	setup fake
	run_plugin ADD "$(net_conf 1.0.0 '.device = "nic0" | .sysfsRoot = $s |
		.rdmaRequired = true | .rdmaNetns = "exclusive"' --arg s "$SYS")"
	refused_unchanged 108 "rdmaNetns exclusive on a shared node" \
		'mode is shared, but rdmaNetns requires exclusive'
}
scenario "rdmaNetns that the node does not have is refused (108)" netns_mode_mismatch

# nccl.losslessRequired on a RoCE NIC without DCB (a veth: the kernel answers
# DCB_CMD_IEEE_GET with EOPNOTSUPP): refused (108) before anything changes,
# naming the NIC, its device and why, with or without trafficClass auto;
# without it ADD goes on to the proof (which fails here) and the log says
# the verdict. InfiniBand reads no QoS: losslessRequired refuses it too (no
# class is known lossless), which the message says the same way.
lossless_required() {
	local ports
	setup fake
	ports="$SYS/devices/pci0000:ae/0000:ae:00.0/$PCI/infiniband/mlx5_0/ports/1"
	echo Ethernet >"$ports/link_layer"
	conf=$(net_conf 1.0.0 '.rdmaRequired = true | .device = "nic0" | .ifName = "hpn0" |
		.sysfsRoot = $s | .nccl.losslessRequired = true' --arg s "$SYS")
	want='^nccl.losslessRequired: the hints. class on hpn0 \(RDMA device "mlx5_0"\) is not lossless: nic0 reports no DCB: no class is known lossless( |$)'
	run_plugin ADD "$conf"
	refused_unchanged 108 "losslessRequired, a RoCE NIC without DCB" "$want"
	run_plugin ADD "$(jq -c '.nccl.trafficClass = "auto"' <<<"$conf")"
	refused_unchanged 108 "losslessRequired with trafficClass auto" "$want"
	run_plugin ADD "$(jq -c 'del(.nccl.losslessRequired)' <<<"$conf")"
	expect_err 108 "without losslessRequired: on to the proof" '"mlx5_0" is not visible to libibverbs'
	snap_same "$HOST_NS" "$T/host.before" "host after the proof"
	expect_no_state "after the proof"
	# nccl off: no class, nothing read, nothing refused.
	run_plugin ADD "$(jq -c '.nccl.enabled = false' <<<"$conf")"
	expect_err 108 "nccl off: on to the proof" '"mlx5_0" is not visible to libibverbs'
}
scenario "nccl.losslessRequired without DCB: refused before any change (108)" lossless_required

# A pod of four NICs (a pool, count 4) in which NICs 1 and 3 carry an RDMA
# device (fake mlx5, so each proof fails: not visible to libibverbs): both are
# proven at once, and the error is NIC 1's, the first in NIC order, whichever
# child answered first. ADD is rolled back exactly, and no proof's child is
# left in the pod netns (each enters it before anything else).
pool_proofs() {
	local i conf
	for i in 0 1 2 3; do
		mk_nic "$HOST_NS" "pool$i" "ppeer$i"
		ip -n "$HOST_NS" link set "ppeer$i" up
	done
	snap_save "$HOST_NS" "$T/host.before"
	SYS=$T/sysfs-$SCEN
	for i in 0 1 2 3; do
		mk_fake_pci "$SYS" "0000:af:00.$i" "pool$i"
	done
	fake_mlx5 "$SYS" 0000:af:00.1 pool1 mlx5_1
	fake_mlx5 "$SYS" 0000:af:00.3 pool3 mlx5_3
	conf=$(net_conf 1.0.0 '.match = {devices: ["pool*"]} | .count = 4 | .ifName = "hpn0" |
		.sysfsRoot = $s' --arg s "$SYS")
	for i in 1 2 3; do
		run_plugin ADD "$conf"
		refused_unchanged 108 "4 NICs, 1 and 3 unprovable (run $i)" \
			'^RDMA device "mlx5_1" is not visible to libibverbs in the pod netns([: ]|$)'
		for dev in mlx5_1:pool1 mlx5_3:pool3; do
			grep -q "RDMA device \"${dev%:*}\" port 1 (mlx5) serves \"${dev#*:}\"" "$T/plugin.log" ||
				fail "the log does not say ${dev%:*} serves ${dev#*:}: $(cat "$T/plugin.log")"
		done
		[[ -z $(ip netns pids "$POD_NS") ]] ||
			fail "processes left in the pod netns: $(ip netns pids "$POD_NS" | xargs -r ps -o pid,ppid,args -p)"
	done
	# A proof that passes (none on this host) is the vm tier's: vm7-hpn-shared.sh proofs.
	run_plugin ADD "$(jq -c '.count = 1 | .match.devices = ["pool0"]' <<<"$conf")"
	expect_result "NIC 0 alone: no RDMA device, nothing to prove"
	run_plugin DEL "$(jq -c '.count = 1 | .match.devices = ["pool0"]' <<<"$conf")"
	expect_ok "DEL of NIC 0 alone"
	snap_same "$HOST_NS" "$T/host.before" "host after the DEL"
	expect_no_state "after the DEL"
}
scenario "4 NICs proven at once: the first failing NIC in order is reported, rolled back" pool_proofs

plain_netdev() {
	setup
	for ver in 1.1.0 0.4.0; do
		conf=$(net_conf "$ver" '.device = "nic0" | .ifName = "hpn0"')
		run_plugin ADD "$conf"
		expect_result "ADD $ver, rdmaRequired false"
		jq_ok '.rdma == [{interface: 0, bound: false,
			reason: "no RDMA device serves \"nic0\""}]' "$ver: result says nothing is bound"
		prev=$(with_prev "$conf" "$OUT")
		run_plugin CHECK "$prev"
		expect_ok "CHECK $ver"
		run_plugin DEL "$prev"
		expect_ok "DEL $ver"
		snap_same "$HOST_NS" "$T/host.before" "host after DEL $ver"
		expect_no_state "after DEL $ver"
	done
}
scenario "rdmaRequired false: a plain netdev, the result says so" plain_netdev

status_rdma() {
	setup
	if ip netns exec "$HOST_NS" rdma system show >/dev/null 2>&1; then
		info "this kernel has RDMA netlink: STATUS would pass; checked in the vm tier"
		return 0
	fi
	run_plugin STATUS "$(net_conf 1.1.0 'del(.rdmaRequired) | .device = "nic0"')"
	expect_err 50 "STATUS with rdmaRequired on a kernel without RDMA"
	jq_ok '.msg | test("no RDMA subsystem")' "STATUS names the missing RDMA subsystem"
	run_plugin STATUS "$(net_conf 1.1.0 '.device = "nic0"')"
	expect_ok "STATUS with rdmaRequired false"
}
scenario "STATUS: rdmaRequired needs an RDMA subsystem (50)" status_rdma

# softRoce on this host: the kernel needs 7.1 for an rxe device to serve a
# pod netns, and an RDMA subsystem with rdma_rxe. What is missing is named,
# every time, before anything changes (108 for ADD, 50 for STATUS); the
# config's contradictions are code 7.
soft_roce_refused() {
	local rel maj min want=() conf w
	setup
	rel=$(uname -r)
	IFS=. read -r maj min _ <<<"$rel"
	min=${min%%[!0-9]*}
	if ((maj > 7 || (maj == 7 && min >= 1))) &&
		ip netns exec "$HOST_NS" rdma system show >/dev/null 2>&1; then
		info "kernel $rel with RDMA netlink: softRoce can work here; the vm7 tier proves it"
		return 0
	fi
	((maj > 7 || (maj == 7 && min >= 1))) ||
		want+=("Linux 7.1 or later (before it, every rxe device sends from the initial netns; this kernel is $rel)")
	ip netns exec "$HOST_NS" rdma system show >/dev/null 2>&1 ||
		want+=("the kernel's RDMA subsystem (no RDMA netlink: load ib_core)")
	[[ -e /sys/module/rdma_rxe ]] || want+=("the rdma_rxe module")
	for conf in '.device = "nic0"' '.mode = "macvlan" | .master = "nic0"' \
		'.match = {devices: ["nic*"]} | .count = 1'; do
		run_plugin ADD "$(net_conf 1.0.0 'del(.rdmaRequired) | .softRoce = true |
			.ifName = "hpn0" | .ipam = {type: "static", addresses: [{address: "10.91.0.2/24"}]} | '"$conf")"
		refused_unchanged 108 "softRoce, $conf" \
			'softRoce: no RDMA device serves "nic0", and this node cannot make one: Soft-RoCE in a pod netns needs '
		for w in "${want[@]}"; do
			jq_ok '.msg | contains($w)' "softRoce, $conf: names '$w'" "$OUT" --arg w "$w"
		done
		run_plugin DEL "$(net_conf 1.0.0 '.softRoce = true | del(.rdmaRequired) | '"$conf")"
		expect_ok "DEL after the refused ADD ($conf)"
		expect_no_state "DEL after the refused ADD ($conf)"
	done
	# A fake tree with ib_core and rdma_rxe: the kernel release alone is named.
	mkdir -p "$SYS/module/ib_core/parameters" "$SYS/module/rdma_rxe"
	echo Y >"$SYS/module/ib_core/parameters/netns_mode"
	run_plugin ADD "$(net_conf 1.0.0 'del(.rdmaRequired) | .softRoce = true | .pciBusID = $p |
		.sysfsRoot = $s' --arg p "$PCI" --arg s "$SYS")"
	if ((maj > 7 || (maj == 7 && min >= 1))); then
		# The fake tree says yes; the real kernel then has no RDMA netlink to make it.
		expect_err 108 "softRoce on the fake tree, a 7.1+ kernel without RDMA" 'rxe'
	else
		refused_unchanged 108 "softRoce, fake RDMA subsystem, kernel $rel" \
			"cannot make one: Soft-RoCE in a pod netns needs Linux 7.1 or later \\(before it, every rxe device sends from the initial netns; this kernel is $rel\\)( |$)"
	fi
	# STATUS says the same, with code 50.
	run_plugin STATUS "$(net_conf 1.1.0 'del(.rdmaRequired) | .softRoce = true | .device = "nic0"')"
	expect_err 50 "STATUS with softRoce" '^hpn-rdma: softRoce: Soft-RoCE in a pod netns needs '
	for w in "${want[@]}"; do
		jq_ok '.msg | contains($w)' "STATUS names '$w'" "$OUT" --arg w "$w"
	done
	# Contradictions in the config.
	run_plugin ADD "$(net_conf 1.0.0 '.softRoce = true | .rdmaRequired = false | .device = "nic0"')"
	refused_unchanged 7 "softRoce with rdmaRequired false" 'rdmaRequired cannot be false'
	run_plugin ADD "$(net_conf 1.0.0 'del(.rdmaRequired) | .softRoce = true | .rdmaDevice = "mlx5_0"')"
	refused_unchanged 7 "softRoce with rdmaDevice" 'rdmaDevice selects a NIC by the RDMA device it has'
	run_plugin ADD "$(net_conf 1.0.0 'del(.rdmaRequired) | .softRoce = true |
		.match = {rdmaDevices: ["mlx5_*"]}')"
	refused_unchanged 7 "softRoce with match.rdmaDevices" 'match.rdmaDevices takes only NICs'
	run_plugin ADD "$(net_conf 1.0.0 'del(.rdmaRequired) | .softRoce = true | .mode = "ipvlan" |
		.master = "nic0"')"
	refused_unchanged 7 "softRoce with mode ipvlan" 'softRoce needs mode move or macvlan'
	run_plugin ADD "$(net_conf 1.0.0 'del(.rdmaRequired) | .softRoce = "yes" | .device = "nic0"')"
	refused_unchanged 7 "softRoce not a boolean" 'softRoce'
}
scenario "softRoce: refused before any change where the kernel cannot (108, 50), config errors (7)" soft_roce_refused

# erdma_node MODE: the fixture of eRDMA in MODE (iwarp: test/fixtures/sysfs's
# erdma_0; compat, ofed: test/fixtures/erdma/MODE) copied as $SYS, and its ENI
# (eth2, or eth1 for ofed) a veth of the tree's MAC in the host netns, up:
# discovery ties them as on a node (GID table, node GUID = EUI-64 of the MAC).
erdma_node() {
	local src
	case $1 in
	iwarp) src=$HPN_SRC/test/fixtures/sysfs ENI=eth2 IBDEV=erdma_0 ;;
	compat) src=$HPN_SRC/test/fixtures/erdma/compat ENI=eth2 IBDEV=erdma_0 ;;
	ofed) src=$HPN_SRC/test/fixtures/erdma/ofed ENI=eth1 IBDEV=rocep26s0 ;;
	esac
	SYS=$T/sysfs-$SCEN
	rm -rf "$SYS"
	cp -a "$src" "$SYS"
	chmod -R u+w "$SYS"
	mk_nic "$HOST_NS" "$ENI" "peer-$ENI" "$(cat "$SYS/class/net/$ENI/address")"
	ip -n "$HOST_NS" link set "$ENI" up
	snap_save "$HOST_NS" "$T/host.before"
}

# The GPU model's profile against eRDMA's mode, before anything changes: a
# model whose ib is on refuses iWARP (erdma's default) naming the device and
# its mode; Type 1 (mlx5 only) refuses eRDMA in any mode, so its traffic class
# never reaches it; auto takes iWARP (the hints then turn IB off) and compat,
# the log naming the mode (the proof, which needs a real device, fails after).
erdma_profiles() {
	local conf mode gpu_hpn ib_on
	for mode in iwarp compat ofed; do
		erdma_node "$mode"
		conf=$(net_conf 1.0.0 '.device = $d | .ifName = "hpn0" | .sysfsRoot = $s |
			.nccl.profiles = {H20: {ib: "on", drivers: ["erdma"]}}' --arg d "$ENI" --arg s "$SYS")
		# Type 1 refuses eRDMA in every mode (iWARP names its mode first: ib is on).
		run_plugin ADD "$(jq -c '.nccl.gpuModel = "GX8SF" | .nccl.gpuCount = 8' <<<"$conf")"
		refused_unchanged 108 "$mode eRDMA, GX8SF" '^GPU model series GX8SF needs '
		gpu_hpn=$(jq -c '.nccl.gpuModel = "gpu-hpn"' <<<"$conf")
		ib_on=$(jq -c '.nccl.gpuModel = "H20"' <<<"$conf")
		if [[ $mode == iwarp ]]; then
			run_plugin ADD "$ib_on"
			refused_unchanged 108 "iWARP eRDMA, a model with ib on" \
				'^GPU model series H20 needs NCCL.s IB transport \(ib on\), but RDMA device "erdma_0" serving "eth2" is eRDMA in iWARP mode \(the erdma driver.s default\), which NCCL.s IB transport cannot use: load erdma with compat_mode=1, or install the eRDMA controller.s OFED package'
		else
			jq_ok '.msg | endswith("the NIC'"'"'s is erdma")' "$mode eRDMA, GX8SF: the driver"
			gpu_hpn=$ib_on
		fi
		# Taken (the log names the mode), then the proof fails here and ADD rolls back.
		run_plugin ADD "$gpu_hpn"
		expect_err 108 "$mode eRDMA, $(jq -r .nccl.gpuModel <<<"$gpu_hpn"): taken, then the proof" \
			"\"$IBDEV\" is not visible to libibverbs"
		grep -q "RDMA device \"$IBDEV\" port 1 (erdma $mode) serves \"$ENI\"" "$T/plugin.log" ||
			fail "the log does not name $IBDEV's mode: $(cat "$T/plugin.log")"
		snap_same "$HOST_NS" "$T/host.before" "$mode: host after the rolled-back ADD"
		expect_no_state "$mode: after the rolled-back ADD"
		ip -n "$HOST_NS" link del "$ENI"
	done
}
scenario "eRDMA: the model's profile against its mode, refused before any change (108)" erdma_profiles

# The MTU of an eRDMA NIC of a pod with GPUs: 8500 or 1400 (Alibaba's rule for
# GPU instances), else refused before anything changes, naming the NIC, its
# MTU and the allowed values: 108 for the NIC's own MTU (moved or a child's
# parent), 7 for the config's mtu; erdmaAnyMtu, a pod of unknown GPU count,
# or an allowed MTU (the config's or the NIC's) go on to the proof, which
# fails here (no real device) and rolls back.
erdma_mtu() {
	local conf mode want
	erdma_node compat
	conf=$(net_conf 1.0.0 '.device = $d | .ifName = "hpn0" | .sysfsRoot = $s |
		.nccl.gpuCount = 8' --arg d "$ENI" --arg s "$SYS")
	want='^NIC "eth2" \(eRDMA compat, RDMA device "erdma_0"\) would have MTU 1500 in a pod with 8 GPUs: on GPU instances an eRDMA NIC.s MTU must be 8500 \(jumbo frames\) or 1400, or NCCL.s LL128 protocol corrupts data \(set the NIC.s MTU, or mtu, to 8500 or 1400, or erdmaAnyMtu to allow it\)'
	run_plugin ADD "$conf"
	refused_unchanged 108 "compat eRDMA at MTU 1500, 8 GPUs" "$want"
	run_plugin ADD "$(jq -c '.mtu = 9000' <<<"$conf")"
	refused_unchanged 7 "compat eRDMA, the config's mtu 9000" \
		'would have MTU 9000 \(the config.s mtu\) in a pod with 8 GPUs: .*\(set mtu to 8500 or 1400, or erdmaAnyMtu'
	# The count from the pod's annotation, and a macvlan child (its parent's MTU).
	run_plugin ADD "$(jq -c 'del(.nccl.gpuCount) | .runtimeConfig = {"io.kubernetes.cri.pod-annotations":
		{"alibabacloud.com/gpu-count": "4"}}' <<<"$conf")"
	refused_unchanged 108 "compat eRDMA, 4 GPUs by annotation" 'would have MTU 1500 in a pod with 4 GPUs'
	run_plugin ADD "$(jq -c 'del(.device) | .master = $d | .mode = "macvlan"' --arg d "$ENI" <<<"$conf")"
	refused_unchanged 108 "a macvlan child of compat eRDMA" 'NIC "eth2" .* would have MTU 1500 in a pod'
	# Allowed: on to the proof (which fails here), rolled back, the host as it was.
	for how in '.mtu = 1400' '.mtu = 8500' '.erdmaAnyMtu = true' 'del(.nccl.gpuCount)'; do
		run_plugin ADD "$(jq -c "$how" <<<"$conf")"
		expect_err 108 "compat eRDMA, $how: past the MTU, to the proof" \
			'"erdma_0" is not visible to libibverbs'
		snap_same "$HOST_NS" "$T/host.before" "host after $how"
		expect_no_state "after $how"
	done
	ip -n "$HOST_NS" link set "$ENI" mtu 8500
	snap_save "$HOST_NS" "$T/host.before"
	run_plugin ADD "$conf"
	expect_err 108 "compat eRDMA at MTU 8500: to the proof" '"erdma_0" is not visible to libibverbs'
	snap_same "$HOST_NS" "$T/host.before" "host after the NIC at 8500"
	ip -n "$HOST_NS" link del "$ENI"
	# Every mode is eRDMA: the rule holds for iWARP and the OFED package too.
	for mode in iwarp ofed; do
		erdma_node "$mode"
		run_plugin ADD "$(net_conf 1.0.0 '.device = $d | .ifName = "hpn0" | .sysfsRoot = $s |
			.nccl.gpuCount = 8 | .mtu = 4000' --arg d "$ENI" --arg s "$SYS")"
		refused_unchanged 7 "$mode eRDMA, mtu 4000" \
			"^NIC \"$ENI\" \\(eRDMA $mode, RDMA device \"$IBDEV\"\\) would have MTU 4000"
		ip -n "$HOST_NS" link del "$ENI"
	done
}
scenario "eRDMA of a GPU pod: MTU 8500 or 1400, else refused before any change (108, 7)" erdma_mtu

t_done
