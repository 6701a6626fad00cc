# shellcheck shell=bash
# The DRA flow's shared NIC scenario (draflow.sh sources it and runs
# claim_share): one NIC of the fake node shared by two claims of two pods,
# each holding the NIC's shared device "<its device>-shared" with its own
# shareID, as the scheduler allocates them (KEP-5075: shareID and
# consumedCapacity in the results); Prepare, the claims' CDI specs and
# records, the NIC's own device refused beside them, the lookup's answer
# (and its refusal to a plugin that would move a shared NIC), ADD of each
# pod (a macvlan child of the NIC in each, the NIC on the host) with each
# claim's status under its shareID, DEL, the shared device's health (its NIC's), a share refused on a node in exclusive RDMA
# netns mode, Unprepare. It uses draflow.sh's helpers (flow_up, flow_down)
# and drahealth.sh's (wait_health, dev_is): sourced after it.

SHARE_UID1=5c1d2e3f-0000-4a5b-8c6d-7e8f9a0b1c01
SHARE_UID2=5c1d2e3f-0000-4a5b-8c6d-7e8f9a0b1c02
SHARE_UID3=5c1d2e3f-0000-4a5b-8c6d-7e8f9a0b1c03
SHARE_SID1=0f1e2d3c-4b5a-4697-8877-665544332211
SHARE_SID2=a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d
SHARE_POD_B=0d6f0e1a-2b3c-4d5e-8f70-112233445566

# share_claim NAME UID SHAREID [JQ]: a claim of pool0's shared device for
# pod $POD_A, its result as the scheduler writes it, then JQ.
share_claim() {
	mk_claim ml "$1" "$2" '.status.allocation.devices.results |= map(. + {shareID: "'"$3"'",
		consumedCapacity: {shares: "1"}}) | '"${4:-.}" pci-0000-af-00-0-shared
}

# The env of claim UID's spec, as an object.
spec_env() {
	jq -c '.devices[0].containerEdits.env | map(split("=") | {(.[0]): (.[1:] | join("="))}) | add' \
		"$(claim_spec "$1")"
}

# share_lookup UID SHARES: the lookup's answer for pod UID (ml/trainer), "shares" said or not.
share_lookup() {
	local extra=
	[[ $2 == yes ]] && extra=',"shares":true'
	lookup_raw "{\"version\":1,\"namespace\":\"ml\",\"name\":\"trainer\",\"uid\":\"$1\"$extra}"
}

claim_share() {
	local rdma key1 key2 hpid state conf res_a res_b ns_a ns_b cid_a ns
	flow_up
	share_claim s1 "$SHARE_UID1" "$SHARE_SID1"
	share_claim s2 "$SHARE_UID2" "$SHARE_SID2" '.status.reservedFor = [{resource: "pods",
		name: "second", uid: "'"$SHARE_POD_B"'"}]'
	# Both claims of the one NIC, prepared in one call.
	OUT=$(prepare -version v1 "ml/s1/$SHARE_UID1" "ml/s2/$SHARE_UID2") || fail "Prepare failed"
	jq_ok '[.[$u1], .[$u2]] | all(.error == "" and ([.devices[].device] == ["pci-0000-af-00-0-shared"]))' \
		"Prepare of two claims each holding a share of pool0" "$OUT" \
		--arg u1 "$SHARE_UID1" --arg u2 "$SHARE_UID2"
	jq_ok '.devices == [{request: "nics", pool: "node1", device: "pci-0000-af-00-0-shared",
		nic: "0000:af:00.0", ifname: "pool0", rdma: "mlx5_0", shareID: $sid}]' \
		"s1's record: the share, its NIC and shareID" "$(<"$STATE/dra/$SHARE_UID1.json")" \
		--arg sid "$SHARE_SID1"
	# Each claim's spec: pool0's RDMA nodes, as for the whole NIC, and its shareID.
	rdma=mlx5_0
	key1=CLAIM_${SHARE_UID1//-/_}
	key1=${key1^^}
	key2=CLAIM_${SHARE_UID2//-/_}
	key2=${key2^^}
	jq_ok '[.devices[0].containerEdits.deviceNodes[].path] == ["/dev/infiniband/uverbs0",
		"/dev/infiniband/issm0", "/dev/infiniband/umad0", "/dev/infiniband/rdma_cm"]' \
		"s1's spec names pool0's verbs devices" "$(<"$(claim_spec "$SHARE_UID1")")"
	jq_ok '.["HPN_RDMA_DEVICE_" + $k] == $r and .["HPN_RDMA_SHARE_IDS_" + $k] == $sid' \
		"s1's env: its RDMA device and shareID" "$(spec_env "$SHARE_UID1")" \
		--arg k "$key1" --arg r "$rdma" --arg sid "$SHARE_SID1"
	jq_ok '.["HPN_RDMA_DEVICE_" + $k] == $r and .["HPN_RDMA_SHARE_IDS_" + $k] == $sid' \
		"s2's env: its RDMA device and shareID" "$(spec_env "$SHARE_UID2")" \
		--arg k "$key2" --arg r "$rdma" --arg sid "$SHARE_SID2"

	# pool0 whole beside its shares: refused at Prepare, naming a sharing claim.
	mk_claim ml c3 "$SHARE_UID3" . pci-0000-af-00-0
	OUT=$(prepare -version v1 "ml/c3/$SHARE_UID3") || fail "Prepare of c3 failed"
	jq_ok '(.[$u].error | test("claim ml/c3: NIC 0000:af:00.0 \\(device pci-0000-af-00-0\\) is shared: claim ml/s1 \\(" + $u1 + "\\) holds a share of it"))
		and .[$u].devices == []' "the NIC whole beside its shares: refused" "$OUT" \
		--arg u "$SHARE_UID3" --arg u1 "$SHARE_UID1"
	[[ ! -e $STATE/dra/$SHARE_UID3.json && ! -e $(claim_spec "$SHARE_UID3") ]] ||
		fail "the refused claim left its record or spec"

	# The lookup: the share to a plugin that attaches shares; refused to one that would move it.
	OUT=$(share_lookup "$POD_A" yes)
	jq_ok '.devices == ["0000:af:00.0"] and .shared == [true] and .source == "dra"
		and .claims == ["ml/s1"]' "the lookup with shares: pool0, a share" "$OUT"
	OUT=$(share_lookup "$SHARE_POD_B" yes)
	jq_ok '.devices == ["0000:af:00.0"] and .shared == [true] and .claims == ["ml/s2"]' \
		"the other pod's lookup: pool0, its share" "$OUT"
	OUT=$(share_lookup "$POD_A" no)
	jq_ok '(.error | test("DRA claim ml/s1 holds a share of NIC 0000:af:00.0 \\(device pci-0000-af-00-0-shared, share " + $sid + "\\)"))
		and (.error | test("must be upgraded to attach shares")) and (has("devices") | not)' \
		"the lookup without shares: refused, naming the claim" "$OUT" --arg sid "$SHARE_SID1"
	# ADD of each pod: a macvlan child of pool0 in each, pool0 on the host; each
	# claim's status names its pod's child under its shareID.
	conf=$(flow_conf)
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_result "ADD of the first pod's share"
	res_a=$OUT
	ns_a=$POD_NS cid_a=$CID
	CID=$cid_a-b POD_NS=${POD_NS}b
	ip netns add "$POD_NS"
	run_plugin ADD "$conf" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=second;K8S_POD_UID=$SHARE_POD_B"
	expect_result "ADD of the second pod's share"
	res_b=$OUT
	ns_b=$POD_NS
	has_link "$HOST_NS" pool0 || fail "pool0 left the host for a share"
	for ns in "$ns_a" "$ns_b"; do
		ip -n "$ns" -d -j link show hpn0 | jq -e '.[0].linkinfo.info_kind == "macvlan"' \
			>/dev/null || fail "hpn0 in $ns is not a macvlan child"
	done
	[[ $(mac_of "$ns_a" hpn0) != "$(mac_of "$ns_b" hpn0)" ]] || fail "the two shares have one MAC"
	grep -q 'a share of a DRA claim' "$T/plugin.log" ||
		fail "the plugin did not log the share: $(tail -n 5 "$T/plugin.log")"
	wait_status ml s1 '(.status.devices | length) == 1' "s1 after ADD"
	wait_status ml s2 '(.status.devices | length) == 1' "s2 after ADD"
	jq_ok '.status.devices[0] | .device == "pci-0000-af-00-0-shared" and .shareID == $sid
		and .networkData.interfaceName == "hpn0" and .networkData.hardwareAddress == $mac' \
		"s1's status: its shareID, the first pod's child" "$(cat "$(claim_file ml s1)")" \
		--arg sid "$SHARE_SID1" --arg mac "$(mac_of "$ns_a" hpn0)"
	jq_ok '.status.devices[0] | .shareID == $sid and .networkData.hardwareAddress == $mac' \
		"s2's status: its shareID, the second pod's child" "$(cat "$(claim_file ml s2)")" \
		--arg sid "$SHARE_SID2" --arg mac "$(mac_of "$ns_b" hpn0)"
	kubectl_claim s2
	# DEL of each: the children gone, pool0 untouched, the statuses cleared.
	run_plugin DEL "$(with_prev "$conf" "$res_b")" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=second;K8S_POD_UID=$SHARE_POD_B"
	expect_ok "DEL of the second pod"
	ip netns del "$ns_b"
	CID=$cid_a POD_NS=$ns_a
	run_plugin DEL "$(with_prev "$conf" "$res_a")" CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=ml;K8S_POD_NAME=trainer;K8S_POD_UID=$POD_A"
	expect_ok "DEL of the first pod"
	has_link "$HOST_NS" pool0 || fail "DEL of the shares took pool0"
	wait_status ml s1 '.status | has("devices") | not' "s1 after DEL"
	wait_status ml s2 '.status | has("devices") | not' "s2 after DEL"

	# The shared device's health is pool0's, listed once for both claims.
	# shellcheck disable=SC2034 # HSEEN: wait_health's (drahealth.sh)
	HEV=$T/health-$SCEN.jsonl HSEEN=0
	: >"$HEV"
	"$HPN_KUBELET" dra-health -dir "$KL" -driver "$DRV" -out "$HEV" 2>>"$T/kubelet.log" &
	hpid=$!
	wait_health '.event == "health" and (.devices | map([.device, .health]))
		== [["pci-0000-af-00-0-shared", "HEALTHY"]]' "the shared device once, HEALTHY"
	state=$(readlink -f "$T/sysfs/class/infiniband/mlx5_0")/ports/1/state
	echo "1: DOWN" >"$state"
	wait_health "$(dev_is pci-0000-af-00-0-shared '.health == "UNHEALTHY"')" \
		"pool0's RDMA port down: its shared device UNHEALTHY" 10
	echo "4: ACTIVE" >"$state"
	kill "$hpid" 2>/dev/null || true
	wait "$hpid" 2>/dev/null || true

	# Exclusive RDMA netns mode (ib_core's parameter in the fake tree): no share prepared.
	mkdir -p "$T/sysfs/module/ib_core/parameters"
	echo N >"$T/sysfs/module/ib_core/parameters/netns_mode"
	unprepare -version v1 "ml/s2/$SHARE_UID2" >/dev/null || fail "Unprepare of s2 failed"
	OUT=$(prepare -version v1 "ml/s2/$SHARE_UID2") || fail "Prepare of s2 failed"
	jq_ok '.[$u].error | test("claim ml/s2: device pci-0000-af-00-0-shared is a share of NIC 0000:af:00.0, but the node.s RDMA netns mode is exclusive")' \
		"a share in exclusive mode: refused, saying why" "$OUT" --arg u "$SHARE_UID2"
	rm -rf "$T/sysfs/module"

	unprepare -version v1 "ml/s1/$SHARE_UID1" "ml/s2/$SHARE_UID2" >/dev/null || fail "Unprepare failed"
	[[ ! -e $STATE/dra/$SHARE_UID1.json && ! -e $(claim_spec "$SHARE_UID1") ]] ||
		fail "Unprepare left s1's record or spec"
	flow_down
}
