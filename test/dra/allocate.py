#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A test-only stand-in for one rule of kube-scheduler's DRA allocator.

It stands for the scheduler's allocation of one ResourceClaim on one node as
far as `exactly` requests with a count, `firstAvailable` requests (KEP-4816,
GA in 1.36: subrequests with a DeviceClass and a count, tried in order) and
`constraints[].matchAttribute` go, and nothing more: no CEL beyond the
DeviceClass form `device.driver == "X"`, no request or subrequest selectors,
no `All` mode, no `distinctAttribute`, no admin access, taints, capacity or
counters, no other claims holding devices, no scoring. What it does not model it refuses
(exit 2), never ignores. It exists so that unit.dra-align can show that the
claim templates of conf/k8s/dra-claims.yaml, over the slices hpn-rdma renders
and the GPUs' slice, pair each GPU with a NIC under its own PCIe root.

The rules it follows are the API's (resource.k8s.io/v1 types): only the
highest generation of a pool counts, and only when all resourceSliceCount
slices of it are there; a device is allocated at most once per claim; an
attribute name without a domain is in the domain of the device's driver;
matchAttribute holds when every device of the named requests (all requests
when none are named) has the attribute, of one type and one value; a
constraint may name a subrequest as <request>/<subrequest>, and then holds
only for that subrequest's devices, when it is the one chosen (naming the
request holds for whichever is). The search is first fit with backtracking,
over the requests in the claim's order, a firstAvailable request's
subrequests in theirs, and the devices in slice order, so the result is
deterministic. A result of a subrequest names it <request>/<subrequest>, as
the API's allocation results do.

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


def exactly_of(where, ex, drivers):
    """(driver, count) of an `exactly` request or a subrequest."""
    for k in ("selectors", "adminAccess", "tolerations", "capacity"):
        if k in ex:
            raise Refused(f"{where}: {k} is not modelled here")
    if ex.get("allocationMode", "ExactCount") != "ExactCount":
        raise Refused(f"{where}: allocationMode {ex['allocationMode']} is not modelled here")
    count = ex.get("count", 1)
    if not isinstance(count, int) or count < 1:
        raise Refused(f"{where}: count {count!r} is not a positive integer")
    if ex.get("deviceClassName") not in drivers:
        raise Refused(f"{where}: no DeviceClass {ex.get('deviceClassName')!r}")
    return drivers[ex["deviceClassName"]], count


def requests_of(claim, drivers):
    """[(request name, [(subrequest name or None, driver, count)])] of a claim's
    spec.devices: one alternative for `exactly`, a firstAvailable request's in order."""
    out = []
    for r in claim.get("requests", []):
        ex, fa = r.get("exactly"), r.get("firstAvailable")
        if (ex is None) == (fa is None):
            raise Refused(f"request {r.get('name')}: exactly one of exactly, firstAvailable")
        if ex is not None:
            out.append((r["name"], [(None,) + exactly_of(f"request {r['name']}", ex, drivers)]))
            continue
        if not isinstance(fa, list) or not 1 <= len(fa) <= 8:
            raise Refused(f"request {r['name']}: firstAvailable must hold 1 to 8 subrequests")
        subs = [(sub["name"],) + exactly_of(f"request {r['name']}/{sub['name']}", sub, drivers)
                for sub in fa]
        if len({x[0] for x in subs}) != len(subs):
            raise Refused(f"request {r['name']}: a subrequest name twice")
        out.append((r["name"], subs))
    names = [r[0] for r in out]
    if len(set(names)) != len(names):
        raise Refused("a request name twice")
    return out


def constraints_of(claim, reqs):
    """[(set of request or request/subrequest names, qualified attribute)] of the claim's
    matchAttribute ones."""
    known = {name for name, _ in reqs}
    known |= {f"{name}/{sub}" for name, subs in reqs for sub, _, _ in subs if sub}
    out = []
    for i, c in enumerate(claim.get("constraints", [])):
        if "distinctAttribute" in c or "matchAttribute" not in c:
            raise Refused(f"constraints[{i}]: only matchAttribute is modelled here")
        names = set(c.get("requests") or [name for name, _ in reqs])
        if not names <= known:
            raise Refused(f"constraints[{i}]: no request {sorted(names - known)}")
        if "/" not in c["matchAttribute"]:
            raise Refused(f"constraints[{i}]: matchAttribute {c['matchAttribute']} "
                          "has no domain (the API requires one)")
        out.append((names, c["matchAttribute"]))
    return out


def allocate(reqs, cons, devs):
    """Results [(request or request/subrequest, device index)] or None: first fit,
    backtracking."""
    chosen = []  # (request, subrequest or None, device index)
    used = set()

    def applies(names, req, sub):
        return req in names or (sub is not None and f"{req}/{sub}" in names)

    def fits(req, sub, di):
        attrs = devs[di][3]
        for names, attr in cons:
            if not applies(names, req, sub):
                continue
            if attr not in attrs:
                return False
            for oreq, osub, dj in chosen:
                if applies(names, oreq, osub) and devs[dj][3].get(attr) != attrs[attr]:
                    return False
        return True

    def fill(ri, sub, driver, left):
        """count more devices of request ri's subrequest sub, then the requests after."""
        if left == 0:
            return step(ri + 1)
        req = reqs[ri][0]
        for di, d in enumerate(devs):
            if di in used or d[0] != driver or not fits(req, sub, di):
                continue
            chosen.append((req, sub, di))
            used.add(di)
            if fill(ri, sub, driver, left - 1):
                return True
            chosen.pop()
            used.discard(di)
        return False

    def step(ri):
        if ri == len(reqs):
            return True
        return any(fill(ri, sub, driver, count) for sub, driver, count in reqs[ri][1])

    if not step(0):
        return None
    return [(req if sub is None else f"{req}/{sub}", di) for req, sub, di in chosen]


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
        cons = [] if a.drop_constraints else constraints_of(claim, reqs)
    except (Refused, KeyError, TypeError, OSError, yaml.YAMLError) as e:
        print(f"allocate.py: {e}", file=sys.stderr)
        return 2
    got = allocate(reqs, cons, devs)
    if got is None:
        per = {}
        for _, subs in reqs:
            _, d, k = subs[-1]
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
