#!/bin/bash
# RoCE QoS (lib/qos.c) against the real kernel, the one DCB answer this
# machine's kernel can give: a veth has no DCB ops, so DCB_CMD_IEEE_GET is
# answered -EOPNOTSUPP (net/dcb/dcbnl.c, dcb_doit), and hpn_qos_read must say
# "no DCB", not fail. The answer proves the request well formed: a request
# the kernel could not parse is -EINVAL, one whose DCB_ATTR_IFNAME it did
# not read is -EINVAL or -ENODEV; the netdev is looked up in the caller's
# netns (a name from the other netns is -ENODEV). No device here implements
# DCB: everything past "no DCB" is unit.qos's and fuzz.qos's (decoded from
# answers built in the kernel's format). Then hpn-rdma doctor on a live root
# in the throwaway host netns shows the veth its config selects as "none", and
# with softRoce the hints' class on it as unknown, from the kernel's answer.
# jq filters are single-quoted on purpose; scenarios run in subshells.
# shellcheck disable=SC2016,SC2030,SC2031
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t_init
probe=${HPN_QOS_PROBE:?run through ctest}

# probe NS IFNAME...: hpn-qos-probe in NS; one JSON line per name in OUT.
probe() {
	local ns=$1
	shift
	OUT=$(ip netns exec "$ns" "$probe" "$@") || fail "hpn-qos-probe $* in $ns failed"
}

veth() {
	mk_nic "$HOST_NS" qveth0 qpeer0
	ip -n "$HOST_NS" link set qveth0 up
	ip -n "$HOST_NS" link set qpeer0 netns "$POD_NS"
	probe "$HOST_NS" qveth0 lo nosuch0 qpeer0
	jq_ok '.[0] | .r == 0 and .code == 0 and .state == "none" and .dcbx == -1 and
		.nDscp == 0 and (.pfcKnown | not)' "a veth: no DCB, not an error" "$OUT" -s
	jq_ok '.[1] | .r == 0 and .state == "none"' "lo: no DCB" "$OUT" -s
	jq_ok '.[2] | .r == -19 and .code == 100 and
		.msg == "QoS of \"nosuch0\": no netdev of that name in this netns"' \
		"no such netdev: ENODEV, code 100, the name in the message" "$OUT" -s
	jq_ok '.[3] | .r == -19' "the peer, in the pod netns, is not the host's" "$OUT" -s
	probe "$POD_NS" qpeer0
	jq_ok '.r == 0 and .state == "none"' "the peer, asked in its own netns"
}
scenario "a veth has no DCB ops: \"none\", not an error; the caller's netns is asked" veth

doctor_veth() {
	local conf=$T/doctor-$SCEN.conf
	mk_nic "$HOST_NS" qveth0 qpeer0
	net_conf 1.1.0 '.device = "qveth0" | .ipam = {type: "host-local", subnet: "10.99.0.0/24"}' \
		>"$conf"
	OUT=$(ip netns exec "$HOST_NS" env CNI_PATH="$CNI_PATH_DIRS" "$HPN_PLUGIN" doctor \
		--config "$conf" --json) || true
	jq_ok '.sysfsRoot == "/sys" and
		[.qos[] | select(.netdev == "qveth0")] == [{netdev: "qveth0", dcb: "none",
			dcbAsked: true, error: null, pfc: null, pfcCap: null, trust: null,
			dscpPrio: null, dcbx: null, dcbxRaw: null, ecn: {np: null, rp: null},
			hints: null}]' \
		"the doctor, live: the selected veth has no DCB (no RDMA device: no class judged)"
	# With softRoce its rxe would carry RoCE: the class judged on the kernel's answer.
	jq '.softRoce = true | .rdmaRequired = true' "$conf" >"$conf.soft"
	OUT=$(ip netns exec "$HOST_NS" env CNI_PATH="$CNI_PATH_DIRS" "$HPN_PLUGIN" doctor \
		--config "$conf.soft" --json) || true
	jq_ok '[.qos[] | select(.netdev == "qveth0") | .hints] == [{trafficClass: 0,
		fifoTrafficClass: 0, serviceLevel: 0, lossless: "unknown",
		note: "qveth0 reports no DCB: no class is known lossless"}]' \
		"the doctor, live, softRoce: the hints' class on the veth, unknown"
	OUT=$(ip netns exec "$HOST_NS" env CNI_PATH="$CNI_PATH_DIRS" "$HPN_PLUGIN" doctor \
		--config "$conf") || true
	grep -Eq '^qveth0 +none +- +- +- +- +- +-$' <<<"$OUT" ||
		fail "the doctor's text lacks the veth's QoS row: $OUT"
}
scenario "hpn-rdma doctor on a live root: the veth it selects, \"none\"" doctor_veth

t_done
