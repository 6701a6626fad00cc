#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A test-only stand-in for the rules of kube-scheduler's DRA allocator that hpn-rdma's claims use.

It stands for the scheduler's allocation of one ResourceClaim on one node as
far as `exactly` requests with a count, `firstAvailable` requests (KEP-4816,
GA in 1.36: subrequests with a DeviceClass and a count, tried in order),
`constraints[].matchAttribute` and `distinctAttribute`, and consumable
capacity with shared counters (KEP-5075 and KEP-4815, beta in 1.36) go, and
nothing more: no CEL beyond the DeviceClass forms `device.driver == "X"`,
optionally `&& has(device.attributes["D"].A)` or `&& !has(...)`, no request
or subrequest selectors, no `All` mode, no admin access, no tolerations
(a tainted device is refused as input), no scoring. What it does not model
it refuses (exit 2), never ignores. It exists so that unit.dra-align can
show that the claim templates of conf/k8s/dra-claims.yaml, over the slices
hpn-rdma renders and the GPUs' slice, pair each GPU with a NIC under its
own PCIe root, and unit.dra-share that a NIC's shares and the whole NIC
exclude each other.

The rules it follows are the API's (resource.k8s.io/v1 types): only the
highest generation of a pool counts, and only when all resourceSliceCount
slices of it are there (slices of counter sets included); an attribute
name without a domain is in the domain of the device's driver;
matchAttribute holds when every device of the named requests (all requests
when none are named) has the attribute, of one type and one value;
distinctAttribute when every one has it and no two the same value; a
constraint may name a subrequest as <request>/<subrequest>, and then holds
only for that subrequest's devices, when it is the one chosen (naming the
request holds for whichever is).

A device is allocated once, in this claim and in the claims already
allocated (--allocated), unless it has allowMultipleAllocations: then any
number of times, each allocation taking of its capacities what the request
asks (exactly.capacity.requests), as the capacity's requestPolicy rounds
it: validValues up to the smallest value at least that; validRange up to min,
then to min + a whole number of steps; the policy's default when the
request names no amount of that capacity; beyond the largest value, or
above the capacity left (its value less what the allocations of the device
took), the device does not fit. A request that names a capacity the device
lacks does not fit it. A device's consumesCounters take from its pool's
sharedCounters, a device allocatable many times at its first allocation
only; a device whose counters are not left does not fit. A result of a
device allocatable many times has a shareID (a random UUID in RFC 4122's
normalized form, as the scheduler makes) and consumedCapacity.

The search is first fit with backtracking, over the requests in the
claim's order, a firstAvailable request's subrequests in theirs, and the
devices in slice order, so the result is deterministic but for shareIDs. A
result of a subrequest names it <request>/<subrequest>, as the API's
allocation results do.

usage: allocate.py --slices FILE... --classes FILE... --claims FILE
                   --template NAME [--allocated FILE...] [--drop-constraints]
FILE: JSON (an object or an array of objects) or YAML (several documents);
--claims holds ResourceClaimTemplates (or ResourceClaims), --template names
one. --allocated: the claims allocated already, each a ResourceClaim (its
status.allocation.devices.results) or this program's output. --drop-constraints
allocates as if the claim had no constraints: the test's negative control, to
show a pairing the checker refuses is possible.
Prints {"results": [{"request", "driver", "pool", "device"[, "shareID",
"consumedCapacity"]}, ...]} and exits 0; exits 1 with a sentence on stderr
when the claim cannot be allocated; 2 for bad input or anything this
stand-in does not model.
"""
import argparse
import json
import math
import re
import sys
import uuid
from fractions import Fraction

import yaml

CLASS_CEL = re.compile(r'^\s*device\.driver\s*==\s*(["\'])([a-z0-9.-]+)\1\s*'
                       r'(?:&&\s*(!?)\s*has\(\s*device\.attributes\[\s*(["\'])([a-z0-9.-]+)\4\s*\]'
                       r'\.([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*)?$')
QUANTITY = re.compile(r"^([+-]?[0-9]+(?:\.[0-9]*)?|[+-]?\.[0-9]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
SUFFIX = {"": 1, "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
          "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


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


def quantity(v, where):
    """A resource.Quantity's value, exactly."""
    if isinstance(v, int) and not isinstance(v, bool):
        return Fraction(v)
    m = QUANTITY.match(v) if isinstance(v, str) else None
    if m and m.group(2) in SUFFIX:
        return Fraction(m.group(1)) * SUFFIX[m.group(2)]
    e = re.match(r"^[eE]([-+]?[0-9]+)$", m.group(2)) if m else None
    if e:
        return Fraction(m.group(1)) * Fraction(10) ** int(e.group(1))
    raise Refused(f"{where}: {v!r} is not a quantity")


def qtext(q):
    return str(q.numerator) if q.denominator == 1 else f"{math.ceil(q * 1000)}m"


def device_of(d, driver, where):
    """The allocation-relevant fields of a slice's device: multi (allowMultipleAllocations),
    capacity {qualified name: (value, requestPolicy or None)}, consumes [(set, {counter:
    amount})]."""
    for k in d:
        if k not in ("name", "attributes", "capacity", "allowMultipleAllocations",
                     "consumesCounters", "taints"):
            raise Refused(f"{where}: {k} is not modelled here")
    if d.get("taints"):
        raise Refused(f"{where}: taints (and tolerations) are not modelled here")
    caps = {}
    for k, c in (d.get("capacity") or {}).items():
        pol = c.get("requestPolicy")
        if pol is not None:
            if "validRange" in pol and "validValues" in pol:
                raise Refused(f"{where}: capacity {k}: validValues and validRange")
            pol = {"default": quantity(pol["default"], f"{where}.{k}.default")
                   if pol.get("default") is not None else None,
                   "values": sorted(quantity(v, f"{where}.{k}") for v in pol["validValues"])
                   if "validValues" in pol else None,
                   "range": {r: quantity(pol["validRange"][r], f"{where}.{k}.{r}")
                             for r in ("min", "max", "step") if r in pol["validRange"]}
                   if "validRange" in pol else None}
        caps[qualify(k, driver)] = (quantity(c.get("value", 0), f"{where}.{k}"), pol)
    consumes = [(cc["counterSet"], {n: quantity(v["value"], f"{where}.{cc['counterSet']}.{n}")
                                    for n, v in cc["counters"].items()})
                for cc in d.get("consumesCounters") or []]
    multi = d.get("allowMultipleAllocations", False)
    if not isinstance(multi, bool):
        raise Refused(f"{where}: allowMultipleAllocations {multi!r} is not a bool")
    return {"multi": multi, "capacity": caps, "consumes": consumes}


def pools(slices):
    """The complete pools' newest generation: the devices in slice order, each (driver, pool,
    name, attributes by qualified name, device_of), and the counters {(driver, pool, set):
    {counter: amount}}."""
    newest, seen = {}, {}
    for s in slices:
        if s.get("apiVersion") != "resource.k8s.io/v1" or s.get("kind") != "ResourceSlice":
            raise Refused(f"not a resource.k8s.io/v1 ResourceSlice: {s.get('metadata')}")
        spec = s["spec"]
        key = (spec["driver"], spec["pool"]["name"])
        gen = spec["pool"]["generation"]
        if key not in newest or gen > newest[key]:
            newest[key] = gen
    out, counters = [], {}
    for s in slices:
        spec = s["spec"]
        key = (spec["driver"], spec["pool"]["name"])
        if spec["pool"]["generation"] != newest[key]:
            continue
        seen.setdefault(key, []).append(spec["pool"]["resourceSliceCount"])
        if spec.get("devices") is not None and spec.get("sharedCounters") is not None:
            raise Refused(f"slice {s['metadata'].get('name')}: devices and sharedCounters")
        for cs in spec.get("sharedCounters") or []:
            ck = key + (cs["name"],)
            if ck in counters:
                raise Refused(f"pool {key[1]}: counter set {cs['name']} twice")
            counters[ck] = {n: quantity(v["value"], f"counter set {cs['name']}.{n}")
                            for n, v in cs["counters"].items()}
        for d in spec.get("devices", []):
            attrs = {qualify(k, spec["driver"]): v for k, v in d.get("attributes", {}).items()}
            for k, v in attrs.items():
                if not isinstance(v, dict) or len(v) != 1:
                    raise Refused(f"{d['name']}: attribute {k} is not one typed value")
            out.append((spec["driver"], spec["pool"]["name"], d["name"], attrs,
                        device_of(d, spec["driver"], f"device {d['name']}")))
    for key, counts in seen.items():
        if len(set(counts)) != 1 or counts[0] != len(counts):
            raise Refused(f"pool {key[1]} of {key[0]}: {len(counts)} slices of generation "
                          f"{newest[key]}, which say {sorted(set(counts))}: incomplete")
    names = [(d[0], d[1], d[2]) for d in out]
    if len(set(names)) != len(names):
        raise Refused("a device name twice in one pool")
    for d in out:
        for cset, _ in d[4]["consumes"]:
            if (d[0], d[1], cset) not in counters:
                raise Refused(f"device {d[2]}: no counter set {cset} in pool {d[1]}")
    return out, counters


def devices(slices):
    """The devices of pools(slices)."""
    return pools(slices)[0]


def class_selectors(classes):
    """DeviceClass name -> (driver, qualified attribute or None, whether it must be there)."""
    out = {}
    for c in classes:
        if c.get("apiVersion") != "resource.k8s.io/v1" or c.get("kind") != "DeviceClass":
            continue
        sels = c.get("spec", {}).get("selectors", [])
        m = [CLASS_CEL.match(s.get("cel", {}).get("expression", "")) for s in sels]
        if len(m) != 1 or not m[0] or c["spec"].get("config"):
            raise Refused(f"DeviceClass {c['metadata']['name']}: only one selector "
                          "device.driver == \"X\" [&& [!]has(device.attributes[\"D\"].A)] "
                          "(and no config) is modelled here")
        g = m[0].groups()
        attr = f"{g[4]}/{g[5]}" if g[4] else None
        out[c["metadata"]["name"]] = (g[1], attr, g[2] != "!")
    return out


def selects(sel, dev):
    driver, attr, present = sel
    return dev[0] == driver and (attr is None or (attr in dev[3]) == present)


def exactly_of(where, ex, classes):
    """(class selector, count, capacity requests {qualified name: amount}) of an `exactly`
    request or a subrequest."""
    for k in ("selectors", "adminAccess", "tolerations"):
        if k in ex:
            raise Refused(f"{where}: {k} is not modelled here")
    if ex.get("allocationMode", "ExactCount") != "ExactCount":
        raise Refused(f"{where}: allocationMode {ex['allocationMode']} is not modelled here")
    count = ex.get("count", 1)
    if not isinstance(count, int) or count < 1:
        raise Refused(f"{where}: count {count!r} is not a positive integer")
    if ex.get("deviceClassName") not in classes:
        raise Refused(f"{where}: no DeviceClass {ex.get('deviceClassName')!r}")
    sel = classes[ex["deviceClassName"]]
    cap = ex.get("capacity") or {}
    if set(cap) - {"requests"}:
        raise Refused(f"{where}: capacity {sorted(set(cap) - {'requests'})} is not modelled")
    reqs = {qualify(k, sel[0]): quantity(v, f"{where}.capacity.requests.{k}")
            for k, v in (cap.get("requests") or {}).items()}
    return sel, count, reqs


def requests_of(claim, classes):
    """[(request name, [(subrequest name or None, selector, count, capacity)])] of a
    claim's spec.devices: one alternative for `exactly`, a firstAvailable request's in order."""
    out = []
    for r in claim.get("requests", []):
        ex, fa = r.get("exactly"), r.get("firstAvailable")
        if (ex is None) == (fa is None):
            raise Refused(f"request {r.get('name')}: exactly one of exactly, firstAvailable")
        if ex is not None:
            out.append((r["name"], [(None,) + exactly_of(f"request {r['name']}", ex, classes)]))
            continue
        if not isinstance(fa, list) or not 1 <= len(fa) <= 8:
            raise Refused(f"request {r['name']}: firstAvailable must hold 1 to 8 subrequests")
        subs = [(sub["name"],) + exactly_of(f"request {r['name']}/{sub['name']}", sub, classes)
                for sub in fa]
        if len({x[0] for x in subs}) != len(subs):
            raise Refused(f"request {r['name']}: a subrequest name twice")
        out.append((r["name"], subs))
    names = [r[0] for r in out]
    if len(set(names)) != len(names):
        raise Refused("a request name twice")
    return out


def constraints_of(claim, reqs):
    """[(set of request or request/subrequest names, qualified attribute, distinct)] of the
    claim's matchAttribute and distinctAttribute ones."""
    known = {name for name, _ in reqs}
    known |= {f"{name}/{sub[0]}" for name, subs in reqs for sub in subs if sub[0]}
    out = []
    for i, c in enumerate(claim.get("constraints", [])):
        kinds = [k for k in ("matchAttribute", "distinctAttribute") if k in c]
        if len(kinds) != 1 or set(c) - {"requests", kinds[0]}:
            raise Refused(f"constraints[{i}]: one of matchAttribute, distinctAttribute (and "
                          "requests) is modelled here")
        names = set(c.get("requests") or [name for name, _ in reqs])
        if not names <= known:
            raise Refused(f"constraints[{i}]: no request {sorted(names - known)}")
        if "/" not in c[kinds[0]]:
            raise Refused(f"constraints[{i}]: {kinds[0]} {c[kinds[0]]} "
                          "has no domain (the API requires one)")
        out.append((names, c[kinds[0]], kinds[0] == "distinctAttribute"))
    return out


def consumption(dev, asked, where):
    """What one allocation of dev takes of its capacities, {name: amount}, or None when the
    request does not fit them (a capacity it lacks, an amount past what its policy allows)."""
    caps = dev[4]["capacity"]
    if set(asked) - set(caps):
        return None
    if not dev[4]["multi"]:
        # Not consumable: the device must have what is asked; nothing is taken.
        return {} if all(asked[k] <= caps[k][0] for k in asked) else None
    out = {}
    for name, (value, pol) in caps.items():
        want = asked.get(name)
        if want is None:
            want = pol["default"] if pol and pol["default"] is not None else value
        if pol and pol["values"] is not None:
            fit = [v for v in pol["values"] if v >= want]
            if not fit:
                return None
            want = fit[0]
        elif pol and pol["range"] is not None:
            rng = pol["range"]
            if "min" not in rng:
                raise Refused(f"{where}: validRange without min")
            want = max(want, rng["min"])
            if "step" in rng:
                want = rng["min"] + math.ceil((want - rng["min"]) / rng["step"]) * rng["step"]
            if "max" in rng and want > rng["max"]:
                return None
        if want > value:
            return None
        out[name] = want
    return out


class State:
    """What the claims allocated already and this claim's choices so far take: devices
    given once, capacity taken of devices given many times, counters left, devices whose
    counters are taken."""

    def __init__(self, devs, counters):
        self.devs = devs
        self.counters = {k: dict(v) for k, v in counters.items()}
        self.once = set()  # device indexes given to a claim, not allocatable many times
        self.taken = {}  # device index -> {capacity: amount taken}
        self.counted = set()  # device indexes whose counters are taken

    def take(self, di, use):
        """Allocates device di once, use of its capacities: an undo, or None when it does
        not fit."""
        dev = self.devs[di]
        if di in self.once:
            return None
        taken = self.taken.get(di, {})
        for k, v in use.items():
            if taken.get(k, 0) + v > dev[4]["capacity"][k][0]:
                return None
        fresh = di not in self.counted
        if fresh:
            for cset, amounts in dev[4]["consumes"]:
                left = self.counters[(dev[0], dev[1], cset)]
                for n, v in amounts.items():
                    if n not in left:
                        raise Refused(f"device {dev[2]}: counter {n} not in set {cset}")
                    if left[n] < v:
                        return None
            for cset, amounts in dev[4]["consumes"]:
                for n, v in amounts.items():
                    self.counters[(dev[0], dev[1], cset)][n] -= v
            self.counted.add(di)
        if not dev[4]["multi"]:
            self.once.add(di)
        self.taken[di] = {k: taken.get(k, 0) + use.get(k, 0) for k in set(taken) | set(use)}

        def undo():
            self.taken[di] = taken
            self.once.discard(di)
            if fresh:
                self.counted.discard(di)
                for cset, amounts in dev[4]["consumes"]:
                    for n, v in amounts.items():
                        self.counters[(dev[0], dev[1], cset)][n] += v
        return undo


def allocated(state, files):
    """The results of the claims allocated already, taken from state."""
    index = {(d[0], d[1], d[2]): i for i, d in enumerate(state.devs)}
    for path in files:
        for doc in load(path):
            results = doc.get("results")
            if results is None:
                results = (((doc.get("status") or {}).get("allocation") or {})
                           .get("devices") or {}).get("results")
            if not isinstance(results, list):
                raise Refused(f"{path}: no allocation results")
            for r in results:
                key = (r.get("driver"), r.get("pool"), r.get("device"))
                if key not in index:
                    continue  # a device of a pool gone since: it takes nothing now
                di = index[key]
                dev = state.devs[di]
                if dev[4]["multi"] and "consumedCapacity" not in r and dev[4]["capacity"]:
                    raise Refused(f"{path}: {key[2]} is shared, its result has no "
                                  "consumedCapacity")
                use = {qualify(k, dev[0]): quantity(v, f"{path}: {key[2]}")
                       for k, v in (r.get("consumedCapacity") or {}).items()}
                if state.take(di, use) is None:
                    raise Refused(f"{path}: {key[2]} allocated past what it has")


def allocate(reqs, cons, devs, state=None):
    """Results [(request or request/subrequest, device index, consumed capacity)] or None:
    first fit, backtracking."""
    state = state or State(devs, {})
    chosen = []  # (request, subrequest or None, device index, consumed)

    def applies(names, req, sub):
        return req in names or (sub is not None and f"{req}/{sub}" in names)

    def fits(req, sub, di):
        attrs = devs[di][3]
        for names, attr, distinct in cons:
            if not applies(names, req, sub):
                continue
            if attr not in attrs:
                return False
            for oreq, osub, dj, _ in chosen:
                if not applies(names, oreq, osub):
                    continue
                same = devs[dj][3].get(attr) == attrs[attr]
                if same == distinct:
                    return False
        return True

    def fill(ri, sub, sel, left, asked):
        """count more devices of request ri's subrequest sub, then the requests after."""
        if left == 0:
            return step(ri + 1)
        req = reqs[ri][0]
        for di, d in enumerate(devs):
            if not selects(sel, d) or not fits(req, sub, di):
                continue
            use = consumption(d, asked, f"device {d[2]}")
            undo = state.take(di, use) if use is not None else None
            if undo is None:
                continue
            chosen.append((req, sub, di, use))
            if fill(ri, sub, sel, left - 1, asked):
                return True
            chosen.pop()
            undo()
        return False

    def step(ri):
        if ri == len(reqs):
            return True
        return any(fill(ri, sub, sel, count, asked) for sub, sel, count, asked in reqs[ri][1])

    if not step(0):
        return None
    return [(req if sub is None else f"{req}/{sub}", di, use) for req, sub, di, use in chosen]


def result(devs, req, di, use):
    d = devs[di]
    out = {"request": req, "driver": d[0], "pool": d[1], "device": d[2]}
    if d[4]["multi"]:
        out["shareID"] = str(uuid.uuid4())
        out["consumedCapacity"] = {k.split("/", 1)[1] if k.startswith(d[0] + "/") else k:
                                   qtext(v) for k, v in sorted(use.items())}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slices", nargs="+", required=True)
    ap.add_argument("--classes", nargs="+", required=True)
    ap.add_argument("--claims", required=True)
    ap.add_argument("--template", required=True)
    ap.add_argument("--allocated", nargs="*", default=[])
    ap.add_argument("--drop-constraints", action="store_true")
    a = ap.parse_args()
    try:
        devs, counters = pools([s for p in a.slices for s in load(p)])
        classes = class_selectors([c for p in a.classes for c in load(p)])
        claims = [c for c in load(a.claims) if c.get("metadata", {}).get("name") == a.template
                  and c.get("kind") in ("ResourceClaimTemplate", "ResourceClaim")]
        if len(claims) != 1:
            raise Refused(f"{a.claims}: {len(claims)} claims or templates named {a.template}")
        c = claims[0]
        spec = c["spec"]["spec"] if c["kind"] == "ResourceClaimTemplate" else c["spec"]
        claim = spec.get("devices", {})
        if set(claim) - {"requests", "constraints"}:
            raise Refused(f"{a.template}: {sorted(set(claim) - {'requests', 'constraints'})} "
                          "is not modelled here")
        reqs = requests_of(claim, classes)
        cons = [] if a.drop_constraints else constraints_of(claim, reqs)
        state = State(devs, counters)
        allocated(state, a.allocated)
        got = allocate(reqs, cons, devs, state)
    except (Refused, KeyError, TypeError, AttributeError, OSError, ValueError,
            yaml.YAMLError) as e:
        print(f"allocate.py: {e}", file=sys.stderr)
        return 2
    if got is None:
        per = {}
        for _, subs in reqs:
            _, sel, k, _ = subs[-1]
            per[sel[0]] = per.get(sel[0], 0) + k
        want = ", ".join(f"{k} of {d}" for d, k in per.items())
        print(f"allocate.py: {a.template} cannot be allocated on these slices ({want}; "
              f"under {len(cons)} constraints, {len(a.allocated)} claims allocated already)",
              file=sys.stderr)
        return 1
    print(json.dumps({"results": [result(devs, r, di, use) for r, di, use in got]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
