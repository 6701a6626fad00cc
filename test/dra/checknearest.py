#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The pairing an allocation of a conf/k8s/dra-claims.yaml "-nearest" template
must show.

usage: checknearest.py --slices FILE... --claims FILE --template NAME
                       --result FILE [--best]
The template pairs gpu-<i> (an `exactly` request of DeviceClass
gpu.nvidia.com) with nic-<i> (firstAvailable: root, numa, any, of DeviceClass
hpn-rdma.alibabacloud.com). For the allocation allocate.py printed
(--result): every request has its one device, none is given twice, each pair
is of the class its NIC's subrequest names ("root": the same
resource.kubernetes.io/pcieRoot; "numa": the same
resource.kubernetes.io/numaNode), and each GPU got the nearest class the NICs
the pairs before it left offered it (first fit in request order, what the
scheduler does with firstAvailable). The pairs' classes, counted (under one
root first, then on one NUMA node), are printed beside the best any N NICs
and N GPUs of the slices' complete pools give (every choice weighed, by sets of GPUs taken);
with --best they must be equal. Prints "ok:"/"FAIL:" lines and the pairing;
exits 1 when a check failed.
"""
import argparse
import json
import sys

import checkalign
from allocate import devices, load
from checkalign import check

GPU_DRIVER, NIC_DRIVER = "gpu.nvidia.com", "hpn-rdma.alibabacloud.com"
ROOT, NUMA = "resource.kubernetes.io/pcieRoot", "resource.kubernetes.io/numaNode"


def pair_class(g, n):
    """"root", "numa" or "any" of two devices' attributes."""
    if g.get(ROOT) is not None and g.get(ROOT) == n.get(ROOT):
        return "root"
    if g.get(NUMA) is not None and g.get(NUMA) == n.get(NUMA):
        return "numa"
    return "any"


def score(classes):
    return (classes.count("root"), classes.count("numa"))


def best(gpus, nics, n):
    """The best score of n pairs of distinct NICs and GPUs: over the NICs in turn,
    the best score for each set of GPUs taken (each NIC left out or paired with a GPU
    not yet taken), then the best of the sets of n."""
    cls = [[pair_class(g, x) for g in gpus] for x in nics]
    add = {"root": (1, 0), "numa": (0, 1), "any": (0, 0)}
    dp = {0: (0, 0)}
    for row in cls:
        nxt = dict(dp)
        for mask, sc in dp.items():
            for gi, c in enumerate(row):
                if mask & (1 << gi):
                    continue
                m2 = mask | (1 << gi)
                cand = (sc[0] + add[c][0], sc[1] + add[c][1])
                if cand > nxt.get(m2, (-1, -1)):
                    nxt[m2] = cand
        dp = nxt
    return max((sc for m, sc in dp.items() if bin(m).count("1") == n), default=(-1, -1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--slices", nargs="+", required=True)
    ap.add_argument("--claims", required=True)
    ap.add_argument("--template", required=True)
    ap.add_argument("--result", required=True)
    ap.add_argument("--best", action="store_true")
    a = ap.parse_args()
    devs = devices([s for p in a.slices for s in load(p)])
    attrs = {(d[0], d[1], d[2]): d[3] for d in devs}
    nic_keys = [(d[0], d[1], d[2]) for d in devs if d[0] == NIC_DRIVER]
    (tmpl,) = [c for c in load(a.claims) if c["metadata"]["name"] == a.template]
    reqs = tmpl["spec"]["spec"]["devices"]["requests"]
    gpu_reqs = [r["name"] for r in reqs if "exactly" in r]
    nic_reqs = {r["name"]: [s["name"] for s in r["firstAvailable"]]
                for r in reqs if "firstAvailable" in r}
    n = len(gpu_reqs)
    check(n == len(nic_reqs) and all(f"nic-{r[4:]}" in nic_reqs for r in gpu_reqs) and
          all(s == ["root", "numa", "any"] for s in nic_reqs.values()),
          f"{a.template}: {n} pairs gpu-<i>, nic-<i> (root, numa, any)")
    with open(a.result) as f:
        results = json.load(f)["results"]
    got = {}
    for r in results:
        got.setdefault(r["request"], []).append((r["driver"], r["pool"], r["device"]))
    alloc = [d for v in got.values() for d in v]
    check(len(set(alloc)) == len(alloc) and all(len(v) == 1 for v in got.values()),
          f"{a.template}: one device a request, none given twice")
    classes, lines, used = [], [], set()
    rank = {"root": 0, "numa": 1, "any": 2}
    for gr in gpu_reqs:
        nr = f"nic-{gr[4:]}"
        subs = [k for k in got if k.split("/")[0] == nr]
        if not check(len(subs) == 1 and gr in got and got[gr][0][0] == GPU_DRIVER,
                     f"{a.template}: {gr} and {nr} allocated"):
            continue
        sub = subs[0].split("/")[1]
        gd, nd = got[gr][0], got[subs[0]][0]
        c = pair_class(attrs[gd], attrs[nd])
        check(nd[0] == NIC_DRIVER and (sub == "any" or c == "root" or sub == c),
              f"{a.template}: {gr}={gd[2]} with {subs[0]}={nd[2]} is of class {c}")
        left = [pair_class(attrs[gd], attrs[k]) for k in nic_keys if k not in used]
        near = min(left, key=rank.get) if left else "any"
        check(rank[c] == rank[near], f"{a.template}: {gr} got class {c}, the nearest the NICs "
              f"left offered it ({near})")
        used.add(nd)
        classes.append(c)
        lines.append(f"{gd[2]}+{nd[2]}:{c}")
    gpus = [attrs[d[:3]] for d in devs if d[0] == GPU_DRIVER]
    nics = [attrs[k] for k in nic_keys]
    want = best(gpus, nics, n)
    line = (f"{a.template}: {score(classes)[0]} pairs under one root, {score(classes)[1]} on one "
            f"NUMA node (the best this node offers: {want[0]} and {want[1]}): " + " ".join(lines))
    if a.best:
        check(score(classes) == want, line)
    else:
        print("ok: " + line)
    return 1 if checkalign.failed else 0


if __name__ == "__main__":
    sys.exit(main())
