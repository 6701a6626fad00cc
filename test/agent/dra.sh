#!/usr/bin/env bash
# hpn-rdma-agent's DRA driver, the kubelet's side (doc/dra.md), against the
# kubelet stand-in hpn-kubelet as agent.sh runs it (its header; helpers in
# lib.sh), with the claims in the API stand-in of test/kube.
#
# Scenarios: registration for both versions, a refusal and a wiped registry,
# Prepare and Unprepare through v1 and v1beta1, the CDI spec and record of a
# claim, a second Prepare with no API request, a claim prepared after the
# config was reloaded, the agent restarted with the API down, hostile claims (dra_kubelet); a NIC another pod holds, that
# claim's error (dra_held).
#
# HPN_AGENT_VALGRIND=1 (ctest memcheck.agent-dra) runs the agent under
# valgrind's memcheck for the scenarios in HPN_AGENT_SCENARIOS (space-separated
# names of the functions below; default: all).
# shellcheck source=../netns/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netns/lib.sh"

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t_init
agent_require

# ---- DRA: the kubelet's side (doc/dra.md) ---------------------------------------------

# shellcheck source=dralib.sh
source "$(dirname "${BASH_SOURCE[0]}")/dralib.sh"
UID2=0d6f0e1a-2b3c-4d5e-8f70-112233445566

# Registration as the kubelet's plugin watcher does it, for both versions;
# Prepare and Unprepare of claims read from the API stand-in; the record
# answering a second Prepare and a restarted agent with the API down;
# hostile claims, each answered as that claim's error.
dra_kubelet() {
	local -a AGENT_FLAGS
	local mode spec n want
	for f in '--dra ' '--dra-driver NAME' '--node-name NAME'; do
		"$HPN_AGENT" --help | grep -- "$f" >/dev/null || fail "--help does not show $f"
	done
	if "$HPN_AGENT" --config /dev/null --dra 2>"$T/err" ||
		! grep -q 'reads claims with --kubeconfig' "$T/err"; then
		fail "--dra without --kubeconfig: $(cat "$T/err")"
	fi
	if "$HPN_AGENT" --config /dev/null --dra --kubeconfig /x --dra-driver Bad_Name 2>"$T/err" ||
		! grep -q 'is not a DNS subdomain of at most 63' "$T/err"; then
		fail "--dra-driver Bad_Name: $(cat "$T/err")"
	fi
	dra_api
	node_up
	wait_file "$(reg_sock)" "the DRA registration socket"
	OUT=$("$HPN_KUBELET" dra-register -dir "$KL" -driver "$DRV") ||
		fail "dra-register: $OUT $(tail -n 5 "$T/agent.log")"
	jq_ok '.type == "DRAPlugin" and .name == $d and .endpoint == $e
		and .versions == ["v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
			"v1alpha1.DRAResourceHealth"]' \
		"GetInfo: a DRAPlugin of both versions, then both health versions, at the driver's socket" \
		"$OUT" \
		--arg d "$DRV" --arg e "$(dra_sock)"
	grep -q "the kubelet registered driver $DRV" "$T/agent.log" ||
		fail "NotifyRegistrationStatus not logged: $(tail -n 5 "$T/agent.log")"
	mode=$(stat -c %a "$(dra_sock)")
	[[ $mode == 600 ]] || fail "dra.sock mode $mode, not 600"
	mode=$(stat -c %a "$(reg_sock)")
	[[ $mode == 600 ]] || fail "registration socket mode $mode, not 600"
	mode=$(stat -c %a "$KL/plugins/$DRV")
	[[ $mode == 750 ]] || fail "plugins/$DRV mode $mode, not 750"
	# Refused: logged, and the socket made anew for the watcher to try again.
	"$HPN_KUBELET" dra-register -dir "$KL" -driver "$DRV" -error "test refusal" >/dev/null ||
		fail "dra-register -error failed"
	grep -q "did not register driver $DRV: test refusal" "$T/agent.log" ||
		fail "a refused registration not logged: $(tail -n 5 "$T/agent.log")"
	sleep 0.5
	wait_file "$(reg_sock)" "the registration socket made anew"
	"$HPN_KUBELET" dra-register -dir "$KL" -driver "$DRV" >/dev/null ||
		fail "the registration socket does not answer after a refusal"
	# The registry wiped (a kubelet's cleanup): served anew.
	rm -f "$(reg_sock)"
	wait_file "$(reg_sock)" "the registration socket after it was removed"
	# The whole directory taken away (moved, then removed: the agent serves anew at once).
	mv "$KL/plugins_registry" "$KL/registry.old"
	rm -rf "$KL/registry.old"
	wait_file "$(reg_sock)" "the registration socket after its directory was removed"
	rm -f "$(reg_sock)"
	wait_file "$(reg_sock)" "the registration socket removed again, in the new directory"
	"$HPN_KUBELET" dra-register -dir "$KL" -driver "$DRV" >/dev/null ||
		fail "the registration socket made anew does not answer"

	# Prepare (v1): pool0 and pool1, the CDI spec of exactly their devices.
	mk_claim ml c1 "$UID1"
	OUT=$(prepare -version v1 "ml/c1/$UID1") || fail "Prepare v1 failed"
	jq_ok '.[$u].error == "" and .[$u].devices == [
		{requests: ["nics"], pool: "node1", device: "pci-0000-af-00-0", cdi: [$c]},
		{requests: ["nics"], pool: "node1", device: "pci-0000-af-00-1", cdi: [$c]}]' \
		"Prepare: both devices, the claim's CDI device" "$OUT" --arg u "$UID1" \
		--arg c "alibabacloud.com/hpn-rdma=claim-$UID1"
	spec=$(claim_spec "$UID1")
	[[ -f $spec ]] || fail "no CDI spec $spec: $(ls "$T/cdi")"
	jq_ok '.kind == "alibabacloud.com/hpn-rdma" and (.devices | length) == 1
		and .devices[0].name == ("claim-" + $u)
		and ([.devices[0].containerEdits.deviceNodes[].path] | sort) == ["/dev/infiniband/issm0",
			"/dev/infiniband/rdma_cm", "/dev/infiniband/umad0", "/dev/infiniband/uverbs0",
			"/dev/infiniband/uverbs1"]
		and (.devices[0].containerEdits.env | any(endswith("=mlx5_0,mlx5_1")))' \
		"the claim's spec: mlx5_0's and mlx5_1's character devices and rdma_cm, env naming both" \
		"$(cat "$spec")" --arg u "$UID1"
	[[ -f $STATE/dra/$UID1.json ]] || fail "no record $STATE/dra/$UID1.json"
	jq_ok '.uid == $u and .namespace == "ml" and .name == "c1" and .pods == [$p]
		and [.devices[] | [.nic, .rdma]] == [["0000:af:00.0", "mlx5_0"], ["0000:af:00.1", "mlx5_1"]]' \
		"the record: claim, pod, NICs" "$(cat "$STATE/dra/$UID1.json")" --arg u "$UID1" --arg p "$POD_A"
	[[ $(stat -c %a "$STATE/dra") == 700 ]] || fail "the records' directory is not 0700"
	# Again (v1beta1): the same answer, no API request.
	n=$(api_requests)
	want=$OUT
	OUT=$(prepare -version v1beta1 "ml/c1/$UID1") || fail "Prepare v1beta1 failed"
	[[ $(jq -S . <<<"$OUT") == "$(jq -S . <<<"$want")" ]] ||
		fail "a second Prepare answered otherwise: $OUT, not $want"
	[[ $(api_requests) == "$n" ]] || fail "a second Prepare asked the API again"
	# The spec gone (a wiped CDI dir): the next Prepare writes it anew, from the record.
	cp "$spec" "$T/spec.before"
	rm "$spec"
	OUT=$(prepare -version v1 "ml/c1/$UID1") || fail "Prepare after the spec was removed failed"
	[[ $(jq -S . <<<"$OUT") == "$(jq -S . <<<"$want")" ]] ||
		fail "Prepare after the spec was removed answered otherwise: $OUT"
	[[ -f $spec ]] || fail "Prepare answered from the record, but the spec $spec is not back"
	cmp -s "$spec" "$T/spec.before" || fail "the spec written anew differs: $(diff "$T/spec.before" "$spec")"
	grep -q "its CDI spec .* is gone: written anew" "$T/agent.log" || fail "the rewrite is not logged"
	[[ $(api_requests) == "$n" ]] || fail "rewriting the spec asked the API"

	# The config reloaded after a Prepare (a ConfigMap update): the old config's
	# strings are freed, and the driver must read the next claim's devices from
	# its own copies (it kept the old sysfsRoot by pointer, a use after free).
	write_conflist '.logLevel = "debug"'
	for ((n = 0; n < 100; n++)); do
		grep -q "config $T/net.conflist reloaded" "$T/agent.log" && break
		sleep 0.1
	done
	grep -q "config $T/net.conflist reloaded" "$T/agent.log" ||
		fail "the rewritten config was not reloaded: $(tail -n 5 "$T/agent.log")"

	# Hostile answers, one call (v1beta1): each claim its error, the good one prepared.
	mk_claim ml good "$UID2" . pci-0000-af-00-2
	mk_claim ml wronguid 11111111-2222-4333-8444-555555555555
	mk_claim ml unalloc 22222222-2222-4333-8444-555555555555 'del(.status.allocation)'
	mk_claim ml otherdrv 33333333-2222-4333-8444-555555555555 \
		'.status.allocation.devices.results[].driver = "gpu.nvidia.com"'
	mk_claim ml unknown 44444444-2222-4333-8444-555555555555 . pci-0000-af-00-9
	mk_claim ml othernode 55555555-2222-4333-8444-555555555555 \
		'.status.allocation.devices.results[].pool = "node2"'
	printf '{"kind": "ResourceClaim", "metadata": ' \
		>"$KUBE_RESOURCES/ml/resourceclaims/broken.json"
	{
		printf '{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"annotations":{"x":"'
		head -c 1100000 /dev/zero | tr '\0' a
		printf '"},"name":"huge","namespace":"ml","uid":"77777777-2222-4333-8444-555555555555"}}'
	} >"$KUBE_RESOURCES/ml/resourceclaims/huge.json"
	OUT=$(prepare -version v1beta1 "ml/good/$UID2" \
		ml/wronguid/99999999-2222-4333-8444-555555555555 \
		ml/unalloc/22222222-2222-4333-8444-555555555555 \
		ml/otherdrv/33333333-2222-4333-8444-555555555555 \
		ml/unknown/44444444-2222-4333-8444-555555555555 \
		ml/othernode/55555555-2222-4333-8444-555555555555 \
		ml/broken/66666666-2222-4333-8444-555555555555 \
		ml/huge/77777777-2222-4333-8444-555555555555 \
		ml/gone/88888888-2222-4333-8444-555555555555) || fail "Prepare with hostile claims failed"
	jq_ok 'length == 9 and .[$u].error == "" and [.[$u].devices[].device] == ["pci-0000-af-00-2"]' \
		"the good claim among hostile ones prepared" "$OUT" --arg u "$UID2"
	jq_ok '[.devices[0].containerEdits.deviceNodes[].path] | index("/dev/infiniband/uverbs2")' \
		"the claim prepared after the reload: its spec names mlx5_2's uverbs2" \
		"$(cat "$(claim_spec "$UID2")")"
	for c in wronguid:99999999 unalloc:22222222 otherdrv:33333333 unknown:44444444 \
		othernode:55555555 broken:66666666 huge:77777777 gone:88888888; do
		jq_ok '.[$u].error | startswith("claim ml/" + $n) and (. != "")' \
			"claim $c answered with an error naming it" "$OUT" \
			--arg n "${c%%:*}" --arg u "${c##*:}-2222-4333-8444-555555555555"
		[[ ! -e $(claim_spec "${c##*:}-2222-4333-8444-555555555555") ]] ||
			fail "a spec was written for the hostile claim $c"
	done
	jq_ok '(.["44444444-2222-4333-8444-555555555555"].error | test("pci-0000-af-00-9 is no NIC"))
		and (.["55555555-2222-4333-8444-555555555555"].error | test("pool node2"))
		and (.["99999999-2222-4333-8444-555555555555"].error | test("another one"))
		and (.["88888888-2222-4333-8444-555555555555"].error | test("does not exist"))' \
		"the errors say the cause" "$OUT"
	# Malformed calls: INVALID_ARGUMENT for the whole call.
	if prepare -version v1 "ml/bad/x.y" 2>"$T/err"; then
		fail "a claim UID with a path in it was prepared"
	fi
	grep -q InvalidArgument "$T/err" || fail "a bad UID: $(cat "$T/err")"
	set --
	for ((n = 0; n < 33; n++)); do
		set -- "$@" "ml/c$n/00000000-0000-4000-8000-0000000000$((10 + n))"
	done
	if prepare -version v1 "$@" 2>"$T/err"; then
		fail "a call of 33 claims was served"
	fi
	grep -q 'InvalidArgument.*33 claims' "$T/err" || fail "33 claims: $(cat "$T/err")"

	# The agent restarted, the API down: what was prepared still answers.
	stop_agent
	[[ ! -e $(dra_sock) && ! -e $(reg_sock) ]] || fail "DRA sockets left at SIGTERM"
	kube_stop
	start_agent
	wait_file "$(dra_sock)" "the restarted agent's dra.sock"
	OUT=$(prepare -version v1 "ml/c1/$UID1" ml/new/12121212-2222-4333-8444-555555555555) ||
		fail "Prepare after the restart failed"
	[[ $(jq -S ".[\"$UID1\"]" <<<"$OUT") == "$(jq -S ".[\"$UID1\"]" <<<"$want")" ]] ||
		fail "the restarted agent answered otherwise: $OUT"
	jq_ok '.["12121212-2222-4333-8444-555555555555"].error | test("claim ml/new")' \
		"a new claim with the API down: its error" "$OUT"

	# Unprepare: spec and record gone; twice, and an unknown claim, are fine.
	OUT=$(unprepare -version v1 "ml/c1/$UID1") || fail "Unprepare failed"
	jq_ok '. == {($u): {error: ""}}' "Unprepare answers" "$OUT" --arg u "$UID1"
	[[ ! -e $(claim_spec "$UID1") && ! -e $STATE/dra/$UID1.json ]] ||
		fail "Unprepare left the spec or the record"
	[[ -e $(claim_spec "$UID2") ]] || fail "Unprepare of c1 took the other claim's spec"
	OUT=$(unprepare -version v1beta1 "ml/c1/$UID1" "ml/good/$UID2" ml/x/abc) ||
		fail "Unprepare again failed"
	jq_ok 'length == 3 and all(.[]; .error == "")' "Unprepare twice and of an unknown claim" "$OUT"
	[[ ! -e $(claim_spec "$UID2") && -z $(ls -A "$STATE/dra") ]] || fail "state left after Unprepare"
	node_down
	[[ ! -e $(dra_sock) && ! -e $(reg_sock) ]] || fail "DRA sockets left at SIGTERM"
	unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT
}
run "DRA: registration, Prepare and Unprepare (v1, v1beta1), records, restart, hostile claims" dra_kubelet

# A NIC an attachment of another pod holds: that claim's error names the NIC
# and the holder, never another NIC; the pod the claim is reserved for may hold it.
dra_held() {
	local -a AGENT_FLAGS
	local conf
	dra_api
	node_up plain
	echo '[{"namespace":"ns1","name":"trainer","containers":[{"name":"main","devices":[
		{"resource":"rdma/hpn","ids":["0000:af:00.0"]}]}]}]' >"$T/pods.json"
	conf=$(agent_net_conf)
	run_plugin ADD "$conf" CNI_ARGS="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=trainer;K8S_POD_UID=ab-12"
	expect_result "ADD of a pod holding pool0"
	mk_claim ml held "$UID1" . pci-0000-af-00-0
	OUT=$(prepare -version v1 "ml/held/$UID1") || fail "Prepare failed"
	jq_ok '.[$u].error | test("NIC 0000:af:00.0 \\(device pci-0000-af-00-0\\) is held by pod ab-12")' \
		"a NIC another pod holds: the claim's error names it and the holder" "$OUT" --arg u "$UID1"
	jq_ok '.[$u].devices == []' "and no other NIC instead" "$OUT" --arg u "$UID1"
	# Reserved for the pod that holds it: past that check (and here no RDMA device).
	mk_claim ml held "$UID1" '.status.reservedFor[0].uid = "ab-12"' pci-0000-af-00-0
	OUT=$(prepare -version v1beta1 "ml/held/$UID1") || fail "Prepare failed"
	jq_ok '.[$u].error | test("has no RDMA device")' \
		"the holder's own claim passes the holder check" "$OUT" --arg u "$UID1"
	[[ ! -e $STATE/dra/$UID1.json ]] || fail "a claim that failed was recorded"
	run_plugin DEL "$conf"
	expect_ok "DEL"
	node_down
	unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT
}
run "DRA: a NIC held by another pod's attachment is that claim's error" dra_held

t_done
