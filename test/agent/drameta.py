#!/usr/bin/env python3
"""Checks a claim's device metadata file (KEP-5304) as upstream's v1beta1
declarative validation would (metadata.resource.k8s.io, doc/dra.md "Device
metadata in the container"), with the API stand-in's own checks of the
resource.k8s.io/v1 types it embeds (test/kube/apiserver.py): the driver, pool
and device names, at most 32 attributes each of one typed value, networkData
as NetworkDeviceData. Every line one object, v1beta1 first, then v1alpha1,
the same content. Prints the objects as a JSON array; exit 1 naming each
cause when something is wrong."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kube"))
import apiserver as api  # noqa: E402

VERSIONS = ["metadata.resource.k8s.io/v1beta1", "metadata.resource.k8s.io/v1alpha1"]


def check(obj, i, errs):
    f = f"[{i}]"
    if obj.get("kind") != "DeviceMetadata":
        errs.invalid(f + ".kind", obj.get("kind"), "must be DeviceMetadata")
    if obj.get("apiVersion") != (VERSIONS[i] if i < len(VERSIONS) else None):
        errs.invalid(f + ".apiVersion", obj.get("apiVersion"), "not the version expected here")
    meta = obj.get("metadata") or {}
    if not api.is_subdomain(meta.get("name")):
        errs.invalid(f + ".metadata.name", meta.get("name"), "must be a DNS subdomain")
    if not api.is_label(meta.get("namespace")):
        errs.invalid(f + ".metadata.namespace", meta.get("namespace"), "must be a DNS label")
    if not meta.get("uid"):
        errs.required(f + ".metadata.uid")
    gen = meta.get("generation")
    if not isinstance(gen, int) or isinstance(gen, bool) or gen < 1:
        errs.invalid(f + ".metadata.generation", gen, "must be a positive integer")
    pcn = obj.get("podClaimName")
    if pcn is not None and not api.is_label(pcn):
        errs.invalid(f + ".podClaimName", pcn, "must be a DNS label (k8s-short-name)")
    for r, req in enumerate(obj.get("requests") or []):
        rf = f"{f}.requests[{r}]"
        name = req.get("name") or ""
        if not name or not all(api.is_label(p) for p in name.split("/")) or name.count("/") > 1:
            errs.invalid(rf + ".name", name, "must be a request name, or request/subrequest")
        devices = req.get("devices") or []
        # status.devices' checks: driver, pool, device name, networkData.
        for c in api.check_claim_status(
                [{k: d[k] for k in ("driver", "pool", "networkData") if k in d} | {"device": d.get("name")}
                 for d in devices],
                {(d.get("driver"), d.get("pool"), d.get("name"), None) for d in devices}):
            errs.add(c["reason"], rf + "." + c["field"].replace("status.devices", "devices")
                     .replace(".device", ".name", 1), c["message"])
        for d_i, d in enumerate(devices):
            attrs = d.get("attributes") or {}
            af = f"{rf}.devices[{d_i}].attributes"
            if len(attrs) > 32:
                errs.too_many(af, len(attrs), 32)
            for k, v in attrs.items():
                api.check_qualified_name(errs, k, f"{af}[{k}]")
                api.check_attribute(errs, v, f"{af}[{k}]")


def main():
    text = open(sys.argv[1]).read()
    errs = api.Errors()
    objs = []
    lines = text.split("\n")
    if lines[-1] != "":
        errs.invalid("file", "", "must end with a newline")
    for i, line in enumerate(lines[:-1]):
        obj = json.loads(line)
        objs.append(obj)
        check(obj, i, errs)
    if len(objs) != len(VERSIONS):
        errs.invalid("file", len(objs), f"must hold {len(VERSIONS)} objects, one a version")
    strip = [{k: v for k, v in o.items() if k != "apiVersion"} for o in objs]
    if any(s != strip[0] for s in strip):
        errs.invalid("file", "", "the versions' objects differ beyond apiVersion")
    for c in errs.causes:
        print(f"{c['field']}: {c['message']}", file=sys.stderr)
    print(json.dumps(objs))
    return 1 if errs.causes else 0


if __name__ == "__main__":
    sys.exit(main())
