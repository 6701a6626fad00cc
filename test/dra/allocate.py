#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A test-only stand-in for one rule of kube-scheduler's DRA allocator.

It stands for the scheduler's allocation of one ResourceClaim on one node as
far as `exactly` requests with a count and `constraints[].matchAttribute` go,
and nothing more: no CEL beyond the DeviceClass form `device.driver == "X"`,
no request selectors, no `All` mode, no `firstAvailable`, no
`distinctAttribute`, no admin access, taints, capacity or counters, no other
claims holding devices, no scoring. What it does not model it refuses
(exit 2), never ignores. It exists so that unit.dra-align can show that the
claim templates of conf/k8s/dra-claims.yaml, over the slices hpn-rdma renders
and the GPUs' slice, pair each GPU with a NIC under its own PCIe root.

The rules it follows are the API's (resource.k8s.io/v1 types): only the
highest generation of a pool counts, and only when all resourceSliceCount
slices of it are there; a device is allocated at most once per claim; an
attribute name without a domain is in the domain of the device's driver;
matchAttribute holds when every device of the named requests (all requests
when none are named) has the attribute, of one type and one value. The search
is first fit with backtracking, over the requests in the claim's order and the
devices in slice order, so the result is deterministic.

usage: allocate.py --slices FILE... --classes FILE... --claims FILE
                   --template NAME [--drop-constraints]
FILE: JSON (an object or an array of objects) or YAML (several documents);
--claims holds ResourceClaimTemplates (or ResourceClaims), --template names
one. --drop-constraints allocates as if the claim had no constraints: the
test's negative control, to show a pairing the checker refuses is possible.
Prints {"results": [{"request", "driver", "pool", "device"}, ...]} and exits 0;
exits 1 with a sentence on stderr when the claim cannot be allocated; 2 for
bad input or anything this stand-in does not model.
"""
import argparse
import json
import re
import sys

import yaml

CLASS_CEL = re.compile(r'^\s*device\.driver\s*==\s*(["\'])([a-z0-9.-]+)\1\s*$')


class Refused(Exception):
    """Input this stand-in does not model, or bad input: exit 2."""


def load(path):
    """The objects of a JSON or YAML file."""
    with open(path) as f:
        text = f.read()
    try:
        data = json.loads(text)
        docs = data if isinstance(data, list) else [data]
    except ValueError:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    for d in docs:
        if not isinstance(d, dict):
            raise Refused(f"{path}: not an object: {d!r}")
    return docs


def qualify(name, driver):
    return name if "/" in name else f"{driver}/{name}"


def devices(slices):
    """(driver, pool, name, attributes by qualified name) of the complete pools' newest
    generation, in slice order."""
    newest, seen = {}, {}
    for s in slices:
        if s.get("apiVersion") != "resource.k8s.io/v1" or s.get("kind") != "ResourceSlice":
            raise Refused(f"not a resource.k8s.io/v1 ResourceSlice: {s.get('metadata')}")
        spec = s["spec"]
        key = (spec["driver"], spec["pool"]["name"])
        gen = spec["pool"]["generation"]
        if key not in newest or gen > newest[key]:
            newest[key] = gen
    out = []
    for s in slices:
        spec = s["spec"]
        key = (spec["driver"], spec["pool"]["name"])
        if spec["pool"]["generation"] != newest[key]:
            continue
        seen.setdefault(key, []).append(spec["pool"]["resourceSliceCount"])
        for d in spec.get("devices", []):
            attrs = {qualify(k, spec["driver"]): v for k, v in d.get("attributes", {}).items()}
            for k, v in attrs.items():
                if not isinstance(v, dict) or len(v) != 1:
                    raise Refused(f"{d['name']}: attribute {k} is not one typed value")
            out.append((spec["driver"], spec["pool"]["name"], d["name"], attrs))
    for key, counts in seen.items():
        if len(set(counts)) != 1 or counts[0] != len(counts):
            raise Refused(f"pool {key[1]} of {key[0]}: {len(counts)} slices of generation "
                          f"{newest[key]}, which say {sorted(set(counts))}: incomplete")
    names = [(d[0], d[1], d[2]) for d in out]
    if len(set(names)) != len(names):
        raise Refused("a device name twice in one pool")
    return out


def class_drivers(classes):
    """DeviceClass name -> the driver its one selector names."""
    out = {}
    for c in classes:
        if c.get("apiVersion") != "resource.k8s.io/v1" or c.get("kind") != "DeviceClass":
            continue
        sels = c.get("spec", {}).get("selectors", [])
        m = [CLASS_CEL.match(s.get("cel", {}).get("expression", "")) for s in sels]
        if len(m) != 1 or not m[0] or c["spec"].get("config"):
            raise Refused(f"DeviceClass {c['metadata']['name']}: only one selector "
                          "device.driver == \"X\" (and no config) is modelled here")
        out[c["metadata"]["name"]] = m[0].group(2)
    return out


def requests_of(claim, drivers):
    """[(request name, driver, count)] of a claim's spec.devices."""
    out = []
    for r in claim.get("requests", []):
        ex = r.get("exactly")
        if "firstAvailable" in r or ex is None:
            raise Refused(f"request {r.get('name')}: only `exactly` is modelled here")
        for k in ("selectors", "adminAccess", "tolerations", "capacity"):
            if k in ex:
                raise Refused(f"request {r['name']}: exactly.{k} is not modelled here")
        if ex.get("allocationMode", "ExactCount") != "ExactCount":
            raise Refused(f"request {r['name']}: allocationMode {ex['allocationMode']} "
                          "is not modelled here")
        count = ex.get("count", 1)
        if not isinstance(count, int) or count < 1:
            raise Refused(f"request {r['name']}: count {count!r} is not a positive integer")
        if ex.get("deviceClassName") not in drivers:
            raise Refused(f"request {r['name']}: no DeviceClass {ex.get('deviceClassName')!r}")
        out.append((r["name"], drivers[ex["deviceClassName"]], count))
    names = [r[0] for r in out]
    if len(set(names)) != len(names):
        raise Refused("a request name twice")
    return out


def constraints_of(claim, names):
    """[(set of request names, qualified attribute)] of the claim's matchAttribute ones."""
    out = []
    for i, c in enumerate(claim.get("constraints", [])):
        if "distinctAttribute" in c or "matchAttribute" not in c:
            raise Refused(f"constraints[{i}]: only matchAttribute is modelled here")
        reqs = set(c.get("requests") or names)
        if not reqs <= set(names):
            raise Refused(f"constraints[{i}]: no request {sorted(reqs - set(names))}")
        if "/" not in c["matchAttribute"]:
            raise Refused(f"constraints[{i}]: matchAttribute {c['matchAttribute']} "
                          "has no domain (the API requires one)")
        out.append((reqs, c["matchAttribute"]))
    return out


def allocate(reqs, cons, devs):
    """Results [(request, device index)] or None: first fit, backtracking."""
    slots = [(name, driver) for name, driver, count in reqs for _ in range(count)]
    chosen = []  # (request, device index)
    used = set()

    def fits(req, di):
        attrs = devs[di][3]
        for names, attr in cons:
            if req not in names:
                continue
            if attr not in attrs:
                return False
            for other, dj in chosen:
                if other in names and devs[dj][3].get(attr) != attrs[attr]:
                    return False
        return True

    def step(i):
        if i == len(slots):
            return True
        req, driver = slots[i]
        for di, d in enumerate(devs):
            if di in used or d[0] != driver or not fits(req, di):
                continue
            chosen.append((req, di))
            used.add(di)
            if step(i + 1):
                return True
            chosen.pop()
            used.discard(di)
        return False

    return list(chosen) if step(0) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slices", nargs="+", required=True)
    ap.add_argument("--classes", nargs="+", required=True)
    ap.add_argument("--claims", required=True)
    ap.add_argument("--template", required=True)
    ap.add_argument("--drop-constraints", action="store_true")
    a = ap.parse_args()
    try:
        devs = devices([s for p in a.slices for s in load(p)])
        drivers = class_drivers([c for p in a.classes for c in load(p)])
        claims = [c for c in load(a.claims) if c.get("metadata", {}).get("name") == a.template
                  and c.get("kind") in ("ResourceClaimTemplate", "ResourceClaim")]
        if len(claims) != 1:
            raise Refused(f"{a.claims}: {len(claims)} claims or templates named {a.template}")
        c = claims[0]
        spec = c["spec"]["spec"] if c["kind"] == "ResourceClaimTemplate" else c["spec"]
        claim = spec.get("devices", {})
        reqs = requests_of(claim, drivers)
        cons = [] if a.drop_constraints else constraints_of(claim, [r[0] for r in reqs])
    except (Refused, KeyError, TypeError, OSError, yaml.YAMLError) as e:
        print(f"allocate.py: {e}", file=sys.stderr)
        return 2
    got = allocate(reqs, cons, devs)
    if got is None:
        per = {}
        for _, d, k in reqs:
            per[d] = per.get(d, 0) + k
        want = ", ".join(f"{k} of {d}" for d, k in per.items())
        print(f"allocate.py: {a.template} cannot be allocated on these slices ({want}; "
              f"under {len(cons)} matchAttribute constraints)", file=sys.stderr)
        return 1
    print(json.dumps({"results": [{"request": r, "driver": devs[di][0], "pool": devs[di][1],
                                   "device": devs[di][2]} for r, di in got]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
