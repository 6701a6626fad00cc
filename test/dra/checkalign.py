#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The alignment an allocation of a conf/k8s/dra-claims.yaml template must show.

usage: checkalign.py --slices FILE... --claims FILE --template NAME
                     --result FILE --topo NODE.topo
The template's constraints name its GPU/NIC pairs (two requests each, one of
DeviceClass gpu.nvidia.com, one of hpn-rdma.alibabacloud.com). For the
allocation allocate.py printed (--result), every request has its one device,
no device is given twice, and in every pair the NIC's
resource.kubernetes.io/pcieRoot is the GPU's and `nvidia-smi topo -m` (the
node's .topo: row GPU<minor>, the column whose legend names the NIC's
rdmaDevice) says PIX or PXB for the two. Prints "ok:"/"FAIL:" lines; exits 1
when any check failed.
"""
import argparse
import json
import sys

from allocate import load

GPU_CLASS, NIC_CLASS = "gpu.nvidia.com", "hpn-rdma.alibabacloud.com"
failed = 0


def check(ok, what):
    global failed
    print(("ok: " if ok else "FAIL: ") + what)
    failed += not ok
    return ok


def topo(path):
    """{(gpu row, rdma device): class} of a .topo file."""
    cols, rows, legend = [], {}, {}
    with open(path) as f:
        for line in f:
            t = line.split()
            if not t or t[0].startswith("#"):
                continue
            if t[0] == "NIC0":
                cols = t
            elif t[0].startswith("GPU"):
                rows[t[0]] = dict(zip(cols, t[1:]))
            elif t[0].startswith("NIC") and t[0].endswith(":"):
                legend[t[0][:-1]] = t[1]
    return {(g, legend[c]): v for g, r in rows.items() for c, v in r.items()}


def root(attrs):
    return attrs.get("resource.kubernetes.io/pcieRoot", {}).get("string")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--slices", nargs="+", required=True)
    ap.add_argument("--claims", required=True)
    ap.add_argument("--template", required=True)
    ap.add_argument("--result", required=True)
    ap.add_argument("--topo", required=True)
    a = ap.parse_args()
    devs = {}
    for p in a.slices:
        for s in load(p):
            for d in s["spec"].get("devices", []):
                devs[(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])] = \
                    d.get("attributes", {})
    (tmpl,) = [c for c in load(a.claims) if c["metadata"]["name"] == a.template]
    claim = tmpl["spec"]["spec"]["devices"]
    cls = {r["name"]: r["exactly"]["deviceClassName"] for r in claim["requests"]}
    pairs = []
    for c in claim.get("constraints", []):
        by = {cls.get(r): r for r in c.get("requests", [])}
        if check(len(c.get("requests", [])) == 2 and set(by) == {GPU_CLASS, NIC_CLASS},
                 f"{a.template}: constraint {c.get('requests')} pairs a GPU and a NIC"):
            pairs.append((by[GPU_CLASS], by[NIC_CLASS]))
    check(sorted(r for p in pairs for r in p) == sorted(cls),
          f"{a.template}: every request is in one pair")
    with open(a.result) as f:
        results = json.load(f)["results"]
    got = {}
    for r in results:
        got.setdefault(r["request"], []).append((r["driver"], r["pool"], r["device"]))
    check(all(len(got.get(r, [])) == 1 for r in cls) and set(got) == set(cls),
          f"{a.template}: one device for each of its {len(cls)} requests")
    alloc = [d for v in got.values() for d in v]
    check(len(set(alloc)) == len(alloc), f"{a.template}: no device given twice")
    classes = topo(a.topo)
    for g, n in pairs:
        if not (got.get(g) and got.get(n)):
            continue
        gd, nd = got[g][0], got[n][0]
        ga, na = devs.get(gd, {}), devs.get(nd, {})
        check(root(ga) is not None and root(ga) == root(na),
              f"{a.template}: {g}={gd[2]} and {n}={nd[2]} under one PCIe root "
              f"({root(ga)}, {root(na)})")
        row = f"GPU{ga.get('minor', {}).get('int')}"
        ib = na.get("rdmaDevice", {}).get("string")
        check(classes.get((row, ib)) in ("PIX", "PXB"),
              f"{a.template}: nvidia-smi topo says {classes.get((row, ib))} for {row} and {ib}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
