#!/usr/bin/env bash
# unit.dra-align: hpn-rdma's DRA slices and the claim templates of
# conf/k8s/dra-claims.yaml give each GPU a NIC under its own PCIe root, on the
# GPU nodes of test/fixtures/gpu-nodes. For each node: mknode.sh builds the
# fake tree, dra-nicslice renders the NICs' slices (agent/dra/model/draslice.c),
# dra-gpuslice the GPUs' (gpu.nvidia.com, lib/gpu.c), allocate.py (the
# stand-in for the scheduler's matchAttribute rule) allocates every template,
# checkalign.py holds the result to the .topo matrix. a800-7nic is a800-1nic
# without GPU7's NIC (built here): its 8-GPU template cannot be allocated.
# Negative controls: the constraints dropped, and a hand-made swap of two
# pairs' NICs, must both be refused by the checker.
# The "-nearest" templates (firstAvailable: a NIC under the GPU's root, else
# on its NUMA node, else any) on those nodes and on vm-erdma (no GPU shares a
# root with a NIC: the templates above cannot be allocated there):
# checknearest.py holds each pair to the nearest class the NICs left offered
# its GPU, and, where first fit finds it (all but the eRDMA nodes' 2-GPU pod,
# whose two GPUs first fit takes from one NUMA node), to the best pairing the
# node offers; a worse pairing it refuses.
# Environment: HPN_SRC, HPN_NICSLICE, HPN_GPUSLICE.
set -euo pipefail
# checkalign.py imports allocate.py: no __pycache__ in the source tree.
export PYTHONDONTWRITEBYTECODE=1

here=$(cd "$(dirname "$0")" && pwd)
nodes=$HPN_SRC/test/fixtures/gpu-nodes
claims=$HPN_SRC/conf/k8s/dra-claims.yaml
classes=("$HPN_SRC/conf/k8s/dra-deviceclass.yaml" "$here/gpu-deviceclass.yaml")
# shellcheck source=lib.sh
source "$here/lib.sh"
dra_start align
# expect WHAT STATUS CMD...: CMD exits STATUS; a refusal (1) of checkalign.py
# must come from its own FAIL lines about roots, not from a crash.
expect() {
	local what=$1 want=$2 rc=0
	shift 2
	"$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	if ((rc == want)) && [[ ! -s $tmp/err ]] &&
		{ ((rc == 0)) || grep -q '^FAIL: .* under one PCIe root' "$tmp/out"; }; then
		ok "$what (exit $rc)"
	else
		bad "$what: exit $rc, not $want (or not for a PCIe root)"
		cat "$tmp/out" "$tmp/err"
	fi
}

mkdir "$tmp/nodes"
cp "$nodes/mknode.sh" "$tmp/nodes/"
grep -v ' mlx5_7$' "$nodes/a800-1nic.tree" >"$tmp/nodes/a800-7nic.tree"
cp "$nodes/a800-1nic.topo" "$tmp/nodes/a800-7nic.topo"
cp "$nodes"/{hgx-h100,a800-1nic}.{tree,topo} "$tmp/nodes/"

for node in hgx-h100 a800-1nic a800-7nic; do
	bash "$tmp/nodes/mknode.sh" "$node" "$tmp/$node"
	"$HPN_NICSLICE" "$tmp/$node/sys" "$node" >"$tmp/$node.nics.json"
	"$HPN_GPUSLICE" "$tmp/$node/sys" "$tmp/$node/proc" "$node" >"$tmp/$node.gpus.json"
	n_nics=$(grep -c ' nic ' "$tmp/nodes/$node.tree")
	got=$(python3 -c 'import json,sys; print(sum(len(s["spec"]["devices"]) for s in json.load(open(sys.argv[1]))))' "$tmp/$node.nics.json")
	if [[ $got == "$n_nics" ]]; then ok "$node: $got NIC devices, one per RDMA NIC of the tree"; else
		bad "$node: $got NIC devices, the tree has $n_nics RDMA NICs"
	fi
	slices=("$tmp/$node.nics.json" "$tmp/$node.gpus.json")
	for n in 8 4 2 1; do
		t=hpn-gpu$n-rdma$n
		res=$tmp/$node.$t.json
		rc=0
		python3 "$here/allocate.py" --slices "${slices[@]}" --classes "${classes[@]}" \
			--claims "$claims" --template "$t" >"$res" 2>"$tmp/err" || rc=$?
		if [[ $node == a800-7nic && $n == 8 ]]; then
			if ((rc == 1)) && grep -q "$t cannot be allocated on these slices" "$tmp/err"; then
				ok "$node: $t cannot be allocated (GPU7 has no NIC under its root): $(cat "$tmp/err")"
			else
				bad "$node: $t: exit $rc, want 1 and 'cannot be allocated'"
				cat "$res" "$tmp/err"
			fi
			continue
		fi
		if ((rc != 0)); then
			bad "$node: $t: allocate.py exit $rc"
			cat "$tmp/err"
			continue
		fi
		expect "$node: $t allocated, every GPU paired under its root (PIX/PXB)" 0 \
			python3 "$here/checkalign.py" --slices "${slices[@]}" --claims "$claims" \
			--template "$t" --result "$res" --topo "$tmp/nodes/$node.topo"
	done
	# Negative control 1: without the constraints, first fit pairs GPUs with the wrong NICs.
	res=$tmp/$node.loose.json
	expect "$node: hpn-gpu8-rdma8 without constraints allocates" 0 \
		python3 "$here/allocate.py" --slices "${slices[@]}" --classes "${classes[@]}" \
		--claims "$claims" --template hpn-gpu8-rdma8 --drop-constraints
	cp "$tmp/out" "$res"
	expect "$node: ...and the checker refuses that allocation" 1 \
		python3 "$here/checkalign.py" --slices "${slices[@]}" --claims "$claims" \
		--template hpn-gpu8-rdma8 --result "$res" --topo "$tmp/nodes/$node.topo"
done

# Negative control 2: a good allocation with the NICs of pairs 0 and 7 swapped.
python3 - "$tmp/hgx-h100.hpn-gpu8-rdma8.json" >"$tmp/swapped.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
by = {x["request"]: x for x in r["results"]}
by["nic-0"]["device"], by["nic-7"]["device"] = by["nic-7"]["device"], by["nic-0"]["device"]
print(json.dumps(r))
PY
expect "hgx-h100: the checker refuses pairs 0 and 7 with their NICs swapped" 1 \
	python3 "$here/checkalign.py" --slices "$tmp/hgx-h100.nics.json" "$tmp/hgx-h100.gpus.json" \
	--claims "$claims" --template hpn-gpu8-rdma8 --result "$tmp/swapped.json" \
	--topo "$tmp/nodes/hgx-h100.topo"
if grep -q "FAIL: hpn-gpu8-rdma8: gpu-0=gpu-0 and nic-0=" "$tmp/out"; then
	ok "...naming the pair"
else
	bad "the swap's failure does not name pair 0"
fi

# The -nearest templates, on every node; first the nodes of eRDMA: vm-erdma,
# each eRDMA function on the host bridge of four GPUs (so a pair under one
# root there is PHB), and vm-erdma-apart (built here), each on a host bridge
# of its own on the same NUMA node, where no GPU shares a root with a NIC and
# the templates above cannot be allocated at all.
sed -e 's/^  erdma 0000:16:04.0 /host pci0000:20 numa=0\n  erdma 0000:20:04.0 /' \
	-e 's/^  erdma 0000:80:04.0 /host pci0000:90 numa=1\n  erdma 0000:90:04.0 /' \
	"$nodes/vm-erdma.tree" >"$tmp/nodes/vm-erdma-apart.tree"
cp "$nodes/vm-erdma.tree" "$tmp/nodes/"
for node in vm-erdma vm-erdma-apart; do
	bash "$tmp/nodes/mknode.sh" "$node" "$tmp/$node"
	"$HPN_NICSLICE" "$tmp/$node/sys" "$node" >"$tmp/$node.nics.json"
	"$HPN_GPUSLICE" "$tmp/$node/sys" "$tmp/$node/proc" "$node" >"$tmp/$node.gpus.json"
done
for n in 1 2 4 8; do
	rc=0
	python3 "$here/allocate.py" --slices "$tmp/vm-erdma-apart.nics.json" \
		"$tmp/vm-erdma-apart.gpus.json" --classes "${classes[@]}" --claims "$claims" \
		--template "hpn-gpu$n-rdma$n" >/dev/null 2>"$tmp/err" || rc=$?
	if ((rc == 1)) && grep -q "cannot be allocated" "$tmp/err"; then
		ok "vm-erdma-apart: hpn-gpu$n-rdma$n cannot be allocated (no GPU under a NIC's root)"
	else
		bad "vm-erdma-apart: hpn-gpu$n-rdma$n: exit $rc, want 1 and 'cannot be allocated'"
	fi
done
for node in hgx-h100 a800-1nic a800-7nic vm-erdma vm-erdma-apart; do
	slices=("$tmp/$node.nics.json" "$tmp/$node.gpus.json")
	n_nics=$(python3 -c 'import json,sys; print(sum(len(s["spec"]["devices"]) for s in json.load(open(sys.argv[1]))))' "$tmp/$node.nics.json")
	for n in 1 2 4 8; do
		t=hpn-gpu$n-rdma$n-nearest
		res=$tmp/$node.$t.json
		rc=0
		python3 "$here/allocate.py" --slices "${slices[@]}" --classes "${classes[@]}" \
			--claims "$claims" --template "$t" >"$res" 2>"$tmp/err" || rc=$?
		if ((n > n_nics)); then
			if ((rc == 1)) && grep -q "$t cannot be allocated" "$tmp/err"; then
				ok "$node: $t cannot be allocated ($n_nics NICs)"
			else
				bad "$node: $t: exit $rc with $n_nics NICs, want 1 and 'cannot be allocated'"
			fi
			continue
		fi
		if ((rc != 0)); then
			bad "$node: $t: allocate.py exit $rc"
			cat "$tmp/err"
			continue
		fi
		# First fit takes the 2-GPU pod's GPUs from one NUMA node: short of the best on eRDMA.
		best=(--best)
		[[ $node == vm-erdma* && $n == 2 ]] && best=()
		rc=0
		python3 "$here/checknearest.py" --slices "${slices[@]}" --claims "$claims" \
			--template "$t" --result "$res" "${best[@]}" >"$tmp/out" 2>"$tmp/err" || rc=$?
		if ((rc == 0)) && [[ ! -s $tmp/err ]]; then
			ok "$node: $(tail -1 "$tmp/out" | sed 's/^ok: //')"
		else
			bad "$node: $t: checknearest.py exit $rc"
			cat "$tmp/out" "$tmp/err"
		fi
	done
done
# Negative control 3: a800-7nic's 8-GPU pairing with the NICs of pairs 0 and 7
# swapped (GPU0 then across a root from its NIC): neither first fit nor the best.
python3 - "$tmp/a800-7nic.hpn-gpu8-rdma8-nearest.json" >"$tmp/worse.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
by = {x["request"].split("/")[0]: x for x in r["results"]}
by["nic-0"]["device"], by["nic-7"]["device"] = by["nic-7"]["device"], by["nic-0"]["device"]
by["nic-0"]["request"], by["nic-7"]["request"] = "nic-0/any", "nic-7/any"
print(json.dumps(r))
PY
rc=0
python3 "$here/checknearest.py" --slices "$tmp/a800-7nic.nics.json" "$tmp/a800-7nic.gpus.json" \
	--claims "$claims" --template hpn-gpu8-rdma8-nearest --result "$tmp/worse.json" --best \
	>"$tmp/out" 2>"$tmp/err" || rc=$?
if ((rc == 1)) && grep -q '^FAIL: hpn-gpu8-rdma8-nearest: gpu-0 got class' "$tmp/out" &&
	grep -q '^FAIL: .*the best this node offers' "$tmp/out"; then
	ok "a800-7nic: the checker refuses a pairing worse than first fit and the best"
else
	bad "a800-7nic: the worse pairing: exit $rc"
	cat "$tmp/out" "$tmp/err"
fi

dra_done
