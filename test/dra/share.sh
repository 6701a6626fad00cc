#!/usr/bin/env bash
# unit.dra-share: a NIC pods share (the agent's --dra-shares, KEP-5075) and the
# claims of conf/k8s: the hgx-h100 node of test/fixtures/gpu-nodes, its RDMA
# devices made RoCE (port 1's link layer Ethernet) and mlx5_0 given a GID
# table of 16 entries, 4 of them eth0's own (and 2 of a child's): 3 shares.
# dra-nicslice --shares renders the slices with the real renderer
# (agent/dra/model/draslice.c); allocate.py, the stand-in for the
# scheduler's allocator, allocates claims one after another, each with the
# claims before it passed in (--allocated):
#   - the template hpn-rdma-share (conf/k8s/dra-claims.yaml) 3 times, each a
#     share of eth0's shared device with its own shareID and consumedCapacity
#     shares 1; the 4th cannot be allocated;
#   - a whole NIC (the class hpn-rdma.alibabacloud.com) while a share of
#     eth0 is allocated: never eth0 (a claim of all 9 NICs cannot be
#     allocated, and can without the share); a share while eth0 is a whole
#     NIC's: cannot;
#   - mlx5_1 given a table too: a claim of two shares with distinctAttribute
#     on interface gets eth0 and ens1np0; without the constraint, two of eth0.
# Without --shares the slices are as before: no shared device, no counters.
# Environment: HPN_SRC, HPN_NICSLICE.
# shellcheck disable=SC2016 # jq programs with $ are single-quoted on purpose
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1

here=$(cd "$(dirname "$0")" && pwd)
alloc=$here/allocate.py
classes=$HPN_SRC/conf/k8s/dra-deviceclass.yaml
share_claims=$HPN_SRC/conf/k8s/dra-claims.yaml
drv=hpn-rdma.alibabacloud.com
# shellcheck source=lib.sh
source "$here/lib.sh"
dra_start share
# is WHAT JQ FILE [ARGS...]: jq -e JQ of FILE holds.
is() {
	local what=$1 filter=$2 file=$3
	shift 3
	if jq -e "$@" "$filter" "$file" >/dev/null 2>&1; then ok "$what"; else
		bad "$what: jq '$filter' is false of $(jq -c . "$file" 2>&1 | head -c 2000)"
	fi
}
# allocate OUT TEMPLATE CLAIMS SLICES [ALLOCATED...]: allocate.py's exit status in RC, result in OUT.
allocate() {
	local out=$1 t=$2 claims=$3 slices=$4 more=()
	shift 4
	(($# == 0)) || more=(--allocated "$@")
	RC=0
	python3 "$alloc" --slices "$slices" --classes "$classes" --claims "$claims" \
		--template "$t" "${more[@]}" >"$out" 2>"$tmp/err" || RC=$?
}
# want_rc WHAT RC: the last allocate exited RC (1 said as "cannot be allocated").
want_rc() {
	if ((RC == $2)) && { (($2 != 1)) || grep -q "cannot be allocated" "$tmp/err"; }; then
		ok "$1 (exit $RC)"
	else
		bad "$1: exit $RC, not $2: $(cat "$tmp/err")"
	fi
}

node=$tmp/hgx-h100
bash "$HPN_SRC/test/fixtures/gpu-nodes/mknode.sh" hgx-h100 "$node" >/dev/null
sys=$node/sys
for ib in "$sys"/class/infiniband/*; do
	mkdir -p "$ib/ports/1"
	echo Ethernet >"$ib/ports/1/link_layer"
	echo "1: CA" >"$ib/node_type"
done
# gids IBDEV NETDEV N: a GID table of N entries, the first 4 NETDEV's, 2 a child's, the rest empty.
gids() {
	local p=$sys/class/infiniband/$1/ports/1 i
	mkdir -p "$p/gids" "$p/gid_attrs/ndevs"
	for ((i = 0; i < $3; i++)); do
		echo 0000:0000:0000:0000:0000:0000:0000:0000 >"$p/gids/$i"
	done
	for i in 0 1 2 3; do
		printf 'fe80:0000:0000:0000:0000:0000:0000:%04x\n' $((i + 1)) >"$p/gids/$i"
		echo "$2" >"$p/gid_attrs/ndevs/$i"
	done
	for i in 4 5; do
		printf 'fe80:0000:0000:0000:0000:0000:0001:%04x\n' "$i" >"$p/gids/$i"
		echo "${2}m1" >"$p/gid_attrs/ndevs/$i"
	done
}
gids mlx5_0 eth0 16
"$HPN_NICSLICE" "$sys" n1 >"$tmp/noshares.json"
"$HPN_NICSLICE" --shares "$sys" n1 >"$tmp/a.json"

# ---- the slices ---------------------------------------------------------------
is "without --shares: no shared device, no counters, one slice" \
	'length == 1 and ([.[].spec.devices[] | select(has("consumesCounters") or has("capacity"))] | length) == 0
	 and ([.[].spec.devices[].name | select(endswith("-shared"))] | length) == 0' "$tmp/noshares.json"
is "with --shares: eth0 and its shared device, 9 NICs, the counter set in a slice of its own" \
	'length == 2 and (.[0].spec.devices | length) == 10 and (.[0].spec.devices[1].name | endswith("-shared"))
	 and .[0].spec.devices[1].attributes.interface.string == "eth0"
	 and .[0].spec.devices[1].attributes.shared.bool == true
	 and .[0].spec.devices[1].allowMultipleAllocations == true
	 and .[0].spec.devices[1].capacity.shares.value == "3"
	 and .[0].spec.devices[0].consumesCounters == .[0].spec.devices[1].consumesCounters
	 and .[0].spec.devices[0].consumesCounters[0].counterSet == .[0].spec.devices[0].name
	 and .[1].spec.sharedCounters == [{name: .[0].spec.devices[0].name, counters: {nic: {value: "1"}}}]
	 and (.[1].spec | has("devices") | not)
	 and all(.[].spec.pool.resourceSliceCount; . == 2)' "$tmp/a.json"
is "the other NICs (no GID table) are not shared" \
	'[.[0].spec.devices[2:][] | select(has("consumesCounters"))] == []' "$tmp/a.json"
eth0=$(jq -r '.[0].spec.devices[0].name' "$tmp/a.json")
eth0s=${eth0}-shared

# ---- shares of eth0, one claim after another ------------------------------------
done_=()
for i in 1 2 3; do
	allocate "$tmp/s$i.json" hpn-rdma-share "$share_claims" "$tmp/a.json" "${done_[@]}"
	want_rc "share claim $i of 3 allocated" 0
	is "share claim $i: eth0's shared device, a shareID of its own, consumedCapacity shares 1" \
		'.results | length == 1 and .[0].request == "nic" and .[0].device == $d and .[0].driver == $drv
		 and (.[0].shareID | test("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"))
		 and .[0].consumedCapacity == {shares: "1"}' "$tmp/s$i.json" --arg d "$eth0s" --arg drv "$drv"
	done_+=("$tmp/s$i.json")
done
if [[ $(jq -r '.results[0].shareID' "${done_[@]}" | sort -u | wc -l) == 3 ]]; then
	ok "three shareIDs, none twice"
else
	bad "shareIDs: $(jq -r '.results[0].shareID' "${done_[@]}")"
fi
allocate "$tmp/s4.json" hpn-rdma-share "$share_claims" "$tmp/a.json" "${done_[@]}"
want_rc "the 4th share of eth0 (its capacity 3) cannot be allocated" 1

# ---- a whole NIC and a share exclude each other -----------------------------------
cat >"$tmp/claims.yaml" <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: whole-1}
spec: {spec: {devices: {requests: [{name: nic, exactly: {deviceClassName: $drv}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: whole-all}
spec: {spec: {devices: {requests: [{name: nics, exactly: {deviceClassName: $drv, count: 9}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-shares}
spec:
  spec:
    devices:
      requests:
        - {name: nic, exactly: {deviceClassName: hpn-rdma-shared.alibabacloud.com, count: 2,
           capacity: {requests: {shares: "1"}}}}
      constraints:
        - {requests: [nic], distinctAttribute: $drv/interface}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-shares-loose}
spec:
  spec:
    devices:
      requests:
        - {name: nic, exactly: {deviceClassName: hpn-rdma-shared.alibabacloud.com, count: 2,
           capacity: {requests: {shares: "1"}}}}
EOF
allocate "$tmp/w0.json" whole-all "$tmp/claims.yaml" "$tmp/a.json"
want_rc "all 9 whole NICs, no share allocated" 0
is "...9 whole NICs, none shared, no shareID" \
	'(.results | length) == 9 and all(.results[]; (.device | endswith("-shared") | not) and (has("shareID") | not))' \
	"$tmp/w0.json"
allocate "$tmp/w1.json" whole-all "$tmp/claims.yaml" "$tmp/a.json" "$tmp/s1.json"
want_rc "all 9 whole NICs while a share of eth0 is allocated: cannot" 1
allocate "$tmp/w2.json" whole-1 "$tmp/claims.yaml" "$tmp/a.json" "$tmp/s1.json"
want_rc "one whole NIC while a share of eth0 is allocated" 0
is "...is not eth0 (its counter taken by the share)" '.results[0].device != $d' "$tmp/w2.json" \
	--arg d "$eth0"
allocate "$tmp/w3.json" whole-1 "$tmp/claims.yaml" "$tmp/a.json"
is "one whole NIC, no share allocated: eth0 (first fit)" '.results[0].device == $d' "$tmp/w3.json" \
	--arg d "$eth0"
allocate "$tmp/s5.json" hpn-rdma-share "$share_claims" "$tmp/a.json" "$tmp/w3.json"
want_rc "a share while eth0 is a whole NIC's claim: cannot" 1

# ---- two shares with distinctAttribute on interface: two NICs ----------------------
gids mlx5_1 ens1np0 12
"$HPN_NICSLICE" --shares "$sys" n1 >"$tmp/b.json"
is "ens1np0 shared too: capacity 2, two counter sets" \
	'([.[].spec.devices // [] | .[] | select(.name | endswith("-shared")) | .capacity.shares.value] == ["3", "2"])
	 and ([.[].spec.sharedCounters // [] | .[]] | length) == 2' "$tmp/b.json"
allocate "$tmp/d1.json" two-shares "$tmp/claims.yaml" "$tmp/b.json"
want_rc "two shares, distinct interfaces" 0
is "...one of eth0, one of ens1np0, two shareIDs" \
	'[.results[] | .device] == [$a, $b] and (.results[0].shareID != .results[1].shareID)' \
	"$tmp/d1.json" --arg a "$eth0s" --arg b "$(jq -r '[.[0].spec.devices[].name | select(endswith("-shared"))][1]' "$tmp/b.json")"
allocate "$tmp/d2.json" two-shares-loose "$tmp/claims.yaml" "$tmp/b.json"
want_rc "two shares without the constraint" 0
is "...both of eth0 (first fit): the constraint is what spread them" \
	'[.results[] | .device] == [$a, $a] and (.results[0].shareID != .results[1].shareID)' \
	"$tmp/d2.json" --arg a "$eth0s"
allocate "$tmp/d3.json" two-shares "$tmp/claims.yaml" "$tmp/b.json" "$tmp/d1.json"
want_rc "another claim of two distinct shares" 0
is "...eth0 and ens1np0 again" '[.results[] | .device] == [$a, $b]' "$tmp/d3.json" \
	--arg a "$eth0s" --arg b "$(jq -r '[.[0].spec.devices[].name | select(endswith("-shared"))][1]' "$tmp/b.json")"
allocate "$tmp/d4.json" two-shares "$tmp/claims.yaml" "$tmp/b.json" "$tmp/d1.json" "$tmp/d3.json"
want_rc "a third: ens1np0's 2 shares taken, no two distinct NICs left" 1

# ---- what the stand-in does not model, refused -------------------------------------
jq '.[0].spec.devices[1].capacity.shares.requestPolicy.validValues = ["2"]' "$tmp/a.json" >"$tmp/odd.json"
allocate "$tmp/o1.json" hpn-rdma-share "$share_claims" "$tmp/odd.json"
want_rc "a request of 1 share where only 2 are valid: rounded up to 2" 0
is "...consumedCapacity shares 2" '.results[0].consumedCapacity == {shares: "2"}' "$tmp/o1.json"
jq '.[0].spec.devices[1].capacity.shares.requestPolicy.validValues = ["4"]' "$tmp/a.json" >"$tmp/odd.json"
allocate "$tmp/o2.json" hpn-rdma-share "$share_claims" "$tmp/odd.json"
want_rc "a request of 1 share where only 4 (above the capacity 3) is valid: no device fits" 1
jq '.[0].spec.devices[0].taints = [{key: "k", effect: "NoSchedule"}]' "$tmp/a.json" >"$tmp/odd.json"
allocate "$tmp/o3.json" hpn-rdma-share "$share_claims" "$tmp/odd.json"
want_rc "a tainted device: refused (tolerations are not modelled)" 2
jq '.[0].spec.devices[0].consumesCounters[0].counterSet = "nowhere"' "$tmp/a.json" >"$tmp/odd.json"
allocate "$tmp/o4.json" hpn-rdma-share "$share_claims" "$tmp/odd.json"
want_rc "a device consuming a counter set the pool lacks: refused" 2
jq 'del(.[1])' "$tmp/a.json" >"$tmp/odd.json"
allocate "$tmp/o5.json" hpn-rdma-share "$share_claims" "$tmp/odd.json"
want_rc "the pool without its counter slice (incomplete): refused" 2

dra_done
