#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for the few kube-apiserver endpoints hpn-rdma uses, and nothing more.

Pods: GET /api/v1/namespaces/{ns}/pods/{name} from DIR/{ns}/{name}.json.
  Lists and watches (the agent's pod cache, kubectl get pods --watch):
  GET /api/v1/pods and /api/v1/namespaces/{ns}/pods, a PodList of the pods
  whose spec.nodeName matches fieldSelector (spec.nodeName, metadata.name,
  metadata.namespace; = == !=) with metadata.resourceVersion; with watch=1
  (or true) a chunked stream of {"type", "object"} lines: from
  resourceVersion R the events after R (none or "0": ADDED for every pod
  first), then each change as it comes, until timeoutSeconds (default 300)
  ends it cleanly. DIR is polled every 50 ms: a file added, changed (its
  bytes) or removed is an ADDED, MODIFIED or DELETED event with a new
  resourceVersion (one counter for pods, slices and claims). The last 1000
  events are kept: an R older than those, or than a compaction (the mode
  "compact" below), is answered as kube-apiserver does, 200 then an ERROR
  event with a Status of code 410 (Gone); R in the future waits. Touching
  DIR/.drop-watches cuts every open watch without its last chunk (a
  connection lost), DIR/.end-watches ends them as timeoutSeconds does.
  Bookmarks are not sent. The served pods carry
  metadata.resourceVersion; the files are left as they are.
  Pages: a list with limit=N (N > 0) answers at most N pods, in (namespace,
  name) order, and metadata.continue (with remainingItemCount) when more are
  left; a list with continue=TOKEN goes on after the token's last pod, its
  metadata.resourceVersion the first page's (the pods are those of now, not a
  snapshot). A token older than a compaction is answered as kube-apiserver
  does, 410 Expired; so are the next COUNT lists with a continue parameter
  when DIR/.expire-continue holds COUNT (rewritten with the count left).
  Generated pods (hostile tenants, served in lists and watches only, never
  as files): DIR/.generated holds {"count": N, "namespace": NS, "node":
  NODE, "labels": L, "annotationBytes": B, "round": R}; N pods NS/gen-00000..,
  each with L labels of 63-byte values and one annotation of B bytes, on
  NODE; another round (any change of the file) is a MODIFIED event for each.

resource.k8s.io/v1 (the agent's DRA driver), with --resources RDIR:
  ResourceSlices (cluster-scoped), in memory, each also written to
  RDIR/resourceslices/{name}.json after every change for the tests to read:
    GET .../resourceslices (a ResourceSliceList; fieldSelector on
      metadata.name, spec.nodeName, spec.driver and labelSelector, with =, ==
      and != joined by ',' as AND; another field 400 "field label not
      supported"), POST (metadata.name or generateName; uid,
      resourceVersion, creationTimestamp, generation 1; 409 AlreadyExists),
    GET, PUT and DELETE .../resourceslices/{name}: PUT with a
      metadata.resourceVersion that is not the stored one is 409 Conflict;
      without one it is unconditional (the ResourceSlice strategy allows
      that); a missing slice is 404 (no create on update); a spec change
      bumps metadata.generation, no change keeps the resourceVersion; driver,
      pool.name and nodeName immutable.
      DELETE answers a Status of Success, as the generic registry does.
    Validated as pkg/apis/resource/validation does for the fields a driver
    publishes (422 Invalid, a Status with one cause per field): driver and
    pool names, pool generation and resourceSliceCount, exactly one of
    nodeName, nodeSelector (one term), allNodes, perDeviceNodeSelection;
    at most 128 devices (names DNS labels, unique), 64 when any device has
    a taint or consumes counters (ResourceSliceMaxDevicesWithAdvancedFeatures),
    32 attributes and
    capacities per device, attribute names (a C identifier of at most 32,
    optionally after "domain/"), each attribute exactly one of int, bool,
    string (at most 64) and version (semver, at most 64); a device's taints
    (KEP-5055), unless they are the stored device's own: at most 16, each a
    key that is a label name ([prefix/]name: a DNS subdomain of at most 253,
    a name of at most 63 of [A-Za-z0-9._-] alphanumeric at both ends),
    a value that is empty or a label value, an effect of NoSchedule,
    NoExecute or None (a NotSupported cause, as validateDeviceTaint gives).
    A taint's timeAdded is a metav1.Time: RFC 3339, else 400 as the decoder
    refuses it; stored in UTC to the second; now when absent (the API's
    default).
    Shared devices and counters (KEP-5075, KEP-4815): a slice has either
    devices or sharedCounters; at most 8 counter sets (TooMany alone past
    it), each named by a DNS label, unique, with 1 to 32 counters named by
    DNS labels; a device's consumesCounters at most 2, each a counterSet
    that is a DNS label, unique, with 1 to 32 counters; a capacity's
    requestPolicy only when allowMultipleAllocations is true ("Forbidden:
    allowMultipleAllocations must be true"), and then validRequestPolicy's
    rules: not both validValues and validRange; validValues with a default,
    ascending, at most 10, unique (by the integer each rounds up to), none
    above the capacity's value, the default among them; validRange with a
    default and a min, min and max at most the value, min <= max, default
    in [min, max], a step above zero, min + step at most the value, default
    and max a whole number of steps from min. A capacity as the stored
    device has it is not validated again. Quantities (capacity values,
    request policies, counters) that are not Quantities, and an
    allowMultipleAllocations that is not a bool, are the decoder's 400.
    Feature gates DRADeviceTaints, DRAConsumableCapacity and
    DRAPartitionableDevices are on (1.36) unless the --mode file's name with
    ".gates" after it holds "NAME=false" (read at every write): then the
    slice's fields of that feature are dropped before validation, unless the
    stored slice uses them, as the ResourceSlice strategy's
    dropDisabledFields does: taints; allowMultipleAllocations and
    requestPolicy; sharedCounters, perDeviceNodeSelection and the devices'
    consumesCounters and node fields.
  ResourceClaims (namespaced), from RDIR/{ns}/resourceclaims/{name}.json,
  which the tests write: GET .../resourceclaims/{name} and its /status, and
  PATCH .../resourceclaims/{name}/status as server-side apply only
  (Content-Type application/apply-patch+yaml, a YAML body if PyYAML is
  there, else JSON only; any other patch type 415; no fieldManager 422 as
  PatchOptions validation answers).
  Simplified apply: only status.devices may be in the patch (the stand-in
  refuses other status fields with 400); the entries the manager applied
  before are replaced by the patch's (keyed by driver, pool, device,
  shareID), other managers' entries are kept; ownership is kept in
  metadata.managedFields (one Apply entry per manager, "f:status" >
  "f:devices" > "k:{...}" keys only). The result is validated as a status
  update (422): each entry names an allocated device of
  status.allocation.devices.results (driver, pool, device and shareID),
  unique; a shareID (of an entry, or of an allocation result the test wrote
  into the file, as the API checked it when the scheduler wrote it) a UUID
  in RFC 4122's normalized form, 36 characters in lower case; with
  DRAConsumableCapacity off an entry's shareID is dropped unless the claim
  has shares already; at most 8 conditions, each with
  type, status True/False/Unknown, reason and lastTransitionTime; data a JSON
  object; networkData.interfaceName at most 256, hardwareAddress at most 128,
  at most 16 ips, unique, each an address in CIDR form. Written back to the
  file with a new resourceVersion.
Left out: watches of slices and claims, pagination of anything but pods, managed
fields' per-field merge and apply conflicts between managers, json-patch,
merge and strategic-merge patches, dryRun, finalizers, admission, the other
resource.k8s.io kinds and versions, and validation of fields hpn-rdma does
not send (per-device node selection, list attributes, CEL, fractional
capacity ranges, binding conditions).

TokenRequest (the agent asks for the plugin's ServiceAccount's token):
  POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token, a TokenRequest
  (authentication.k8s.io/v1) with spec.expirationSeconds (default 3600;
  below 1 is 422: kube-apiserver's floor of 600 s is not kept, so tests
  see renewals), answered 201 with status.token and
  status.expirationTimestamp, as the API does. Who may: the --token-requests
  file (default: "token-requests" beside --tokens), read on every request,
  lines "NS/NAME TOKEN...": the bearer tokens (of the tokens file) allowed to
  create tokens for that ServiceAccount, as RBAC's create on
  serviceaccounts/token with resourceNames [NAME] would; anyone else, or a
  ServiceAccount the file does not list, 403 with the message RBAC gives.
  Without the file, any user of the tokens file may (as everywhere else
  here: the stand-in has no RBAC of its own); an empty file refuses all.
  Issued tokens are kept in memory until they expire (then 401) and
  appended to that file's name + ".issued" as "NS/NAME TOKEN EXPIRY" lines
  (EXPIRY: epoch seconds); their user is system:serviceaccount:NS:NAME, and
  such a user may only GET one pod (the plugin's ClusterRole): anything else
  is 403.

Discovery (/api, /api/v1, /apis, /apis/resource.k8s.io,
/apis/resource.k8s.io/v1) is what kubectl reads to map "pod",
"resourceslices" and "resourceclaims" to these endpoints, so that a real
client checks the stand-in and the kubeconfig the tests use. Test code only
(test/kube/), written from the public API's types, validation and
conventions.

Authentication as kube-apiserver does it: a bearer token listed in the tokens
file (read on every request, so tests rotate tokens), or a client certificate
signed by the client CA (its CN is the user); otherwise 401 with a Status
object, as the API answers.

Listeners, each on an ephemeral port of 127.0.0.1, written to --ports as
"NAME PORT" lines once all listen:
  good       the server certificate (SAN IP:127.0.0.1, DNS:localhost)
  wrongname  a certificate of the same CA for another name
  otherca    a certificate for the right names from another CA
  closed     a port that was bound and closed again: nothing listens there

Faults of the pod, ResourceSlice and ResourceClaim endpoints (not discovery),
from the --mode file, read on every request, before the request is acted on;
one line "WHAT [COUNT [RETRY_AFTER]]". With a COUNT, the fault answers COUNT
requests and then the endpoint serves normally again (the file is rewritten
with the count left, so tests see how many were used):
  ok              serve the request (also an empty or missing file)
  status CODE     answer CODE (401, 403, 500, 503...) with a Status object
  429 [N [S]]     429 Too Many Requests with Retry-After: S (default 1)
  type            the answer with Content-Type: text/html
  big             a 2 MiB application/json body, with Content-Length
  bigchunked      a 2 MiB application/json body, chunked (no length)
  badjson         a truncated JSON body
  stall           read the request, never answer
  stallbody       send the headers and half the body, then stall
  compact         the pod events kept are dropped and the resourceVersion
                  moves on (a watch from before now gets 410), then the
                  request is served
A second file, the --mode file's name with ".write" after it, fails writes
alone (PUT, POST, PATCH, DELETE; checked before the --mode file): one line
"CODE COUNT", COUNT writes answered CODE (409 Conflict, 404, 422...) with a
Status object, the count rewritten as above.

Every request is logged to --log as one line: LISTENER PATH USER STATUS TIME
(CLOCK_MONOTONIC seconds) METHOD; a failed TLS handshake as LISTENER - - tls:ERROR.
The server exits by itself after --lifetime seconds (default 600).
"""
import argparse
import base64
import datetime
import math
import http.server
import ipaddress
import json
import os
import random
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse
import uuid
from fractions import Fraction

STOP = threading.Event()


def status_object(code, reason, message):
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}

GROUP = "resource.k8s.io"
GV = GROUP + "/v1"
REQUEST_MAX = 3 << 20  # kube-apiserver's limit on a request body

# ---- validation, as pkg/apis/resource/validation checks the fields in use ----

LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
C_IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# semver.org 2.0.0: MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], no leading zeros.
_NUM = r"(0|[1-9][0-9]*)"
_PRE = r"(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
SEMVER_RE = re.compile(rf"^{_NUM}\.{_NUM}\.{_NUM}(-{_PRE}(\.{_PRE})*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$")
CONDITION_REASON_RE = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
LABEL_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def is_label(v):
    return isinstance(v, str) and len(v) <= 63 and bool(LABEL_RE.match(v))


def is_subdomain(v):
    return (isinstance(v, str) and 0 < len(v) <= 253 and
            all(is_label(p) for p in v.split(".")))


class Errors:
    """A field.ErrorList: each cause as the Status object carries it."""

    def __init__(self):
        self.causes = []

    def add(self, reason, field, message):
        self.causes.append({"reason": reason, "message": message, "field": field})

    def invalid(self, field, value, detail):
        self.add("FieldValueInvalid", field, f"Invalid value: {json.dumps(value)}: {detail}")

    def required(self, field, detail=""):
        self.add("FieldValueRequired", field, "Required value" + (f": {detail}" if detail else ""))

    def too_long(self, field, limit):
        self.add("FieldValueTooLong", field, f"Too long: may not be more than {limit} bytes")

    def too_many(self, field, got, limit):
        self.add("FieldValueTooMany", field, f"Too many: {got}: must have at most {limit} items")

    def not_supported(self, field, value, values):
        self.add("FieldValueNotSupported", field,
                 f"Unsupported value: {json.dumps(value)}: supported values: "
                 + ", ".join(json.dumps(v) for v in sorted(values)))

    def objects(self, items, field, limit):
        """A list of at most limit objects: each (its field, it); what is
        not a list, or not an object, said."""
        if not isinstance(items, list):
            self.invalid(field, items, "must be a list")
            return
        if len(items) > limit:
            self.too_many(field, len(items), limit)
        for i, item in enumerate(items):
            if isinstance(item, dict):
                yield f"{field}[{i}]", item
            else:
                self.invalid(f"{field}[{i}]", item, "must be an object")

    def duplicate(self, field, value):
        self.add("FieldValueDuplicate", field, f"Duplicate value: {json.dumps(value)}")

    def immutable(self, field, value):
        self.invalid(field, value, "field is immutable")


class ApiError(Exception):
    """An answer other than success: a code and its Status object."""

    def __init__(self, code, message, reason=None, details=None):
        super().__init__(message)
        self.code = code
        self.status = status_object(code, reason or REASONS.get(code, "Unknown"), message)
        if details:
            self.status["details"] = details


def bad_request(message):
    return ApiError(400, message)


def not_found(resource, name):
    return ApiError(404, f'{resource}.{GROUP} "{name}" not found',
                    details={"name": name, "group": GROUP, "kind": resource})


def invalid(kind, name, causes, group=GROUP):
    texts = [f"{c['field']}: {c['message']}" for c in causes]
    text = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return ApiError(422, f'{kind}.{group} "{name}" is invalid: {text}',
                    details={"name": name, "group": group, "kind": kind, "causes": causes})


def check_driver(errs, value, field):
    """A driver name: a DNS subdomain of at most 63 (upper case tolerated)."""
    if not value:
        errs.required(field)
    elif not isinstance(value, str):
        errs.invalid(field, value, "must be a string")
    elif len(value) > 63:
        errs.too_long(field, 63)
    elif not is_subdomain(value.lower()):
        errs.invalid(field, value, "must be a DNS subdomain (RFC 1123)")


def check_pool(errs, value, field):
    """A pool name: DNS subdomains separated by '/', at most 253 in all."""
    if not value:
        errs.required(field)
        return
    if not isinstance(value, str):
        return errs.invalid(field, value, "must be a string")
    if len(value) > 253:
        errs.too_long(field, 253)
    for part in value.split("/"):
        if not is_subdomain(part):
            errs.invalid(field, value, "each part between '/' must be a DNS subdomain (RFC 1123)")
            break


def check_device_name(errs, value, field):
    if not value:
        errs.required(field)
    elif not is_label(value):
        errs.invalid(field, value, "must be a DNS label (RFC 1123)")


def check_c_identifier(errs, value, field):
    if len(value) > 32:
        errs.too_long(field, 32)
    if not C_IDENTIFIER_RE.match(value):
        errs.invalid(field, value, "must be a C identifier: a letter or '_', then letters, digits, '_'")


def check_qualified_name(errs, name, field):
    """An attribute or capacity name: ID or DOMAIN/ID."""
    parts = name.split("/")
    if len(parts) == 1:
        check_c_identifier(errs, parts[0], field)
    elif len(parts) == 2:
        if not parts[0]:
            errs.invalid(field, "", "the domain must not be empty")
        else:
            check_driver(errs, parts[0], field)
        if not parts[1]:
            errs.invalid(field, "", "the name must not be empty")
        else:
            check_c_identifier(errs, parts[1], field)
    else:
        errs.invalid(field, name, "must not contain more than one slash")


def check_attribute(errs, attr, field):
    if not isinstance(attr, dict):
        return errs.invalid(field, attr, "must be an object")
    kinds = {"int": int, "bool": bool, "string": str, "version": str}
    set_ = [k for k in kinds if k in attr and attr[k] is not None]
    for k in set_:
        v = attr[k]
        if not isinstance(v, kinds[k]) or (k == "int" and isinstance(v, bool)):
            errs.invalid(f"{field}.{k}", v, f"must be a JSON {k}")
        elif k in ("string", "version") and len(v) > 64:
            errs.too_long(f"{field}.{k}", 64)
        if k == "version" and isinstance(v, str) and not SEMVER_RE.match(v):
            errs.invalid(f"{field}.{k}", v, "must be a semantic version (semver.org 2.0.0)")
    if len(set_) != 1:
        errs.invalid(field, attr, "exactly one value must be specified")


TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")
RFC3339_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?"
                        r"([Zz]|[+-]\d{2}:\d{2})$")


def check_label_name(errs, key, field):
    """metav1validation.ValidateLabelName: a qualified name, [prefix/]name."""
    if not isinstance(key, str) or not key:
        return errs.required(field)
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or not is_subdomain(prefix)):
        errs.invalid(field, key, "prefix part must be a DNS subdomain (RFC 1123)")
    if not name or len(name) > 63 or not LABEL_NAME_RE.match(name):
        errs.invalid(field, key, "name part must consist of alphanumeric characters, '-', "
                     "'_' or '.', and must start and end with an alphanumeric character "
                     "(at most 63)")
    if key.count("/") > 1:
        errs.invalid(field, key, "a qualified name must consist of an optional prefix and a name")


def check_taints(errs, taints, field):
    for f, t in errs.objects(taints, field, 16):
        check_label_name(errs, t.get("key"), f + ".key")
        v = t.get("value", "")
        if v and (not isinstance(v, str) or len(v) > 63 or not LABEL_NAME_RE.match(v)):
            errs.invalid(f + ".value", v, "a valid label must be an empty string or consist "
                         "of alphanumeric characters, '-', '_' or '.', and must start and end "
                         "with an alphanumeric character (at most 63)")
        e = t.get("effect")
        if not e:
            errs.required(f + ".effect")
        elif e not in TAINT_EFFECTS:
            errs.not_supported(f + ".effect", e, TAINT_EFFECTS)


def decode_taint_times(obj):
    """The taints' timeAdded decoded as metav1.Time is: RFC 3339 or a 400,
    stored in UTC to the second, now when absent."""
    devices = (obj.get("spec") or {}).get("devices") if isinstance(obj.get("spec"), dict) else None
    for dev in devices if isinstance(devices, list) else []:
        for t in (dev.get("taints") or []) if isinstance(dev, dict) else []:
            if not isinstance(t, dict):
                continue
            v = t.get("timeAdded")
            if v is None:
                t["timeAdded"] = now_rfc3339()
                continue
            m = RFC3339_RE.match(v) if isinstance(v, str) else None
            try:
                when = datetime.datetime.fromisoformat(v.upper().replace("Z", "+00:00")) \
                    if m else None
            except ValueError:
                when = None
            if when is None:
                raise bad_request(f'ResourceSlice in version "v1" cannot be handled as a '
                                  f'ResourceSlice: parsing time {json.dumps(v)} as '
                                  f'"2006-01-02T15:04:05Z07:00": cannot parse')
            t["timeAdded"] = when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def spec_devices(spec):
    devices = spec.get("devices") if isinstance(spec, dict) else None
    return [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []


def has_taints(spec):
    return any(d.get("taints") for d in spec_devices(spec))


def has_consumes_counters(spec):
    return any(d.get("consumesCounters") for d in spec_devices(spec))


def uses_consumable_capacity(spec):
    """A device allocatable many times, or a capacity with a request policy."""
    return any(d.get("allowMultipleAllocations") is not None or
               any(isinstance(c, dict) and c.get("requestPolicy") is not None
                   for c in (d.get("capacity") or {}).values()
                   if isinstance(d.get("capacity"), dict))
               for d in spec_devices(spec))


def uses_partitionable(spec):
    """Counters shared or consumed, or per-device node selection."""
    return isinstance(spec, dict) and (
        spec.get("sharedCounters") is not None or spec.get("perDeviceNodeSelection") is not None
        or any(d.get(k) is not None for d in spec_devices(spec)
               for k in ("consumesCounters", "nodeName", "nodeSelector", "allNodes")))


def gates_off(gates_path):
    """The feature gates the --mode file's ".gates" file turns off (NAME=false)."""
    try:
        with open(gates_path) as f:
            return {w[:-len("=false")] for w in f.read().split() if w.endswith("=false")}
    except FileNotFoundError:
        return set()


def drop_disabled_fields(obj, old, gates_path):
    """A gate off: the new slice's fields of that feature dropped, unless
    the stored one uses them (the ResourceSlice strategy's dropDisabledFields):
    DRADeviceTaints the taints, DRAConsumableCapacity allowMultipleAllocations
    and the capacities' requestPolicy, DRAPartitionableDevices sharedCounters,
    perDeviceNodeSelection and the devices' consumesCounters, nodeName,
    nodeSelector and allNodes."""
    off = gates_off(gates_path)
    ospec = (old or {}).get("spec")
    spec = obj.get("spec")
    if "DRADeviceTaints" in off and not has_taints(ospec):
        for dev in spec_devices(spec):
            dev.pop("taints", None)
    if "DRAConsumableCapacity" in off and not uses_consumable_capacity(ospec):
        for dev in spec_devices(spec):
            dev.pop("allowMultipleAllocations", None)
            for c in (dev.get("capacity") or {}).values() if isinstance(dev.get("capacity"),
                                                                       dict) else []:
                if isinstance(c, dict):
                    c.pop("requestPolicy", None)
    if "DRAPartitionableDevices" in off and not uses_partitionable(ospec) and \
            isinstance(spec, dict):
        spec.pop("sharedCounters", None)
        spec.pop("perDeviceNodeSelection", None)
        for dev in spec_devices(spec):
            for k in ("consumesCounters", "nodeName", "nodeSelector", "allNodes"):
                dev.pop(k, None)


# resource.Quantity's serialized form (k8s.io/apimachinery/pkg/api/resource).
QUANTITY_RE = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
QUANTITY_SUFFIX = {"": 1, "n": Fraction(1, 10**9), "u": Fraction(1, 10**6),
                   "m": Fraction(1, 1000), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
                   "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
                   "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def quantity(v):
    """A Quantity's exact value (a Fraction), or None when it is not one."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return Fraction(v)
    if isinstance(v, float):
        return Fraction(repr(v))
    m = QUANTITY_RE.match(v) if isinstance(v, str) else None
    if not m or m.group(1).count(".") > 1 or m.group(1) in (".", "+.", "-.", "+", "-"):
        return None
    num, suffix = Fraction(m.group(1)), m.group(2)
    if suffix in QUANTITY_SUFFIX:
        return num * QUANTITY_SUFFIX[suffix]
    e = re.match(r"^[eE]([-+]?[0-9]+)$", suffix)
    return num * Fraction(10) ** int(e.group(1)) if e else None


def quantity_text(q):
    """A Quantity as the API writes a whole one back; a fraction in milli units."""
    return str(q.numerator) if q.denominator == 1 else f"{int(q * 1000)}m"


def decode_slice_fields(obj):
    """What the decoder refuses with 400 before validation: the shares'
    quantities that are not Quantities (capacity values, request policies,
    counters), allowMultipleAllocations not a bool."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}

    def q(v, where):
        if quantity(v) is None:
            raise bad_request(f'ResourceSlice in version "v1" cannot be handled as a '
                              f'ResourceSlice: {where}: quantities must match the regular '
                              f'expression \'{QUANTITY_RE.pattern}\'')

    def counters(cs, where):
        for k, c in (cs or {}).items() if isinstance(cs, dict) else []:
            q((c or {}).get("value", 0) if isinstance(c, dict) else c, f"{where}[{k}].value")

    for i, cs in enumerate(spec.get("sharedCounters") or []):
        if isinstance(cs, dict):
            counters(cs.get("counters"), f"spec.sharedCounters[{i}].counters")
    for i, dev in enumerate(spec_devices(spec)):
        f = f"spec.devices[{i}]"
        a = dev.get("allowMultipleAllocations")
        if a is not None and not isinstance(a, bool):
            raise bad_request(f'ResourceSlice in version "v1" cannot be handled as a '
                              f'ResourceSlice: json: cannot unmarshal {type(a).__name__} into '
                              f'Go struct field Device.{f}.allowMultipleAllocations of type bool')
        for j, cc in enumerate(dev.get("consumesCounters") or []):
            if isinstance(cc, dict):
                counters(cc.get("counters"), f"{f}.consumesCounters[{j}].counters")
        caps = dev.get("capacity") if isinstance(dev.get("capacity"), dict) else {}
        for k, c in caps.items():
            if not isinstance(c, dict):
                continue
            q(c.get("value", 0), f"{f}.capacity[{k}].value")
            pol = c.get("requestPolicy")
            if not isinstance(pol, dict):
                continue
            if pol.get("default") is not None:
                q(pol["default"], f"{f}.capacity[{k}].requestPolicy.default")
            for n, v in enumerate(pol.get("validValues") or []):
                q(v, f"{f}.capacity[{k}].requestPolicy.validValues[{n}]")
            for r in ("min", "max", "step"):
                if isinstance(pol.get("validRange"), dict) and \
                        pol["validRange"].get(r) is not None:
                    q(pol["validRange"][r], f"{f}.capacity[{k}].requestPolicy.validRange.{r}")


def check_counters(errs, counters, field):
    """A counter set's or a consumption's counters: 1 to 32, each name a DNS
    label (validated at the map's path, as validateMap does)."""
    if not counters:
        return errs.required(field)
    if not isinstance(counters, dict):
        return errs.invalid(field, counters, "must be an object")
    if len(counters) > 32:
        return errs.too_many(field, len(counters), 32)
    for k in counters:
        if not is_label(k):
            errs.invalid(field, k, "must be a DNS label (RFC 1123)")


def check_counter_names(errs, items, field, key, limit):
    """A list of counter sets (key "name") or consumptions (key
    "counterSet"): at most limit (TooMany alone past it), each named by a
    DNS label, with counters, no name twice."""
    if not isinstance(items, list):
        return errs.invalid(field, items, "must be a list")
    if len(items) > limit:
        return errs.too_many(field, len(items), limit)
    seen = set()
    for i, it in enumerate(items):
        f = f"{field}[{i}]"
        if not isinstance(it, dict):
            errs.invalid(f, it, "must be an object")
            continue
        name = it.get(key)
        if not name:
            errs.required(f"{f}.{key}")
        elif not is_label(name):
            errs.invalid(f"{f}.{key}", name, "must be a DNS label (RFC 1123)")
        check_counters(errs, it.get("counters"), f + ".counters")
        if name in seen:
            errs.duplicate(f, name)
        seen.add(name)


def check_request_policy(errs, value, pol, field):
    """validateRequestPolicy: one of validValues and validRange, each with
    its default, in the capacity's value."""
    if not isinstance(pol, dict):
        return errs.invalid(field, pol, "must be an object")
    cap = quantity(value)
    values, rng = pol.get("validValues") or [], pol.get("validRange")
    default = quantity(pol["default"]) if pol.get("default") is not None else None
    if values and rng is not None:
        return errs.add("FieldValueForbidden", field,
                        'Forbidden: exactly one policy can be specified, cannot specify '
                        '"validValues" and "validRange" at the same time')
    if values:
        if default is None:
            return errs.required(field + ".default", "required when validValues is defined")
        vf = field + ".validValues"
        qs = [quantity(v) for v in values]
        for i in range(len(qs) - 1):
            if qs[i] > qs[i + 1]:
                errs.invalid(f"{vf}[{i + 1}]", quantity_text(qs[i + 1]),
                             "values must be sorted in ascending order")
        found = False
        if len(qs) > 10:
            errs.too_many(vf, len(qs), 10)
        else:
            seen = set()
            for i, v in enumerate(qs):
                if v > cap:
                    errs.invalid(f"{vf}[{i}]", quantity_text(v),
                                 f"option is larger than capacity value: {quantity_text(cap)}")
                found = found or v == default
                # Keyed by the integer each rounds up to (quantityKeyInt).
                key = math.ceil(v)
                if key in seen:
                    errs.duplicate(f"{vf}[{i}]", quantity_text(v))
                seen.add(key)
        if not found:
            errs.invalid(vf, quantity_text(default),
                         "default value is not valid according to the requestPolicy")
    elif rng is not None:
        rf = field + ".validRange"
        if default is None:
            return errs.required(field + ".default", "required when validRange is defined")
        if not isinstance(rng, dict) or rng.get("min") is None:
            return errs.required(rf + ".min", "required when validRange is defined")
        lo = quantity(rng["min"])
        hi = quantity(rng["max"]) if rng.get("max") is not None else None
        step = quantity(rng["step"]) if rng.get("step") is not None else None
        if lo > cap:
            errs.invalid(rf + ".min", quantity_text(lo),
                         f"min is larger than capacity value: {quantity_text(cap)}")
        if default < lo:
            errs.invalid(rf + ".default", quantity_text(default),
                         f"default is less than min: {quantity_text(lo)}")
        if hi is not None:
            if lo > hi:
                errs.invalid(rf + ".max", quantity_text(lo),
                             f"min is larger than max: {quantity_text(hi)}")
            if hi > cap:
                errs.invalid(rf + ".max", quantity_text(hi),
                             f"max is larger than capacity value: {quantity_text(cap)}")
            if default > hi:
                errs.invalid(rf + ".default", quantity_text(default),
                             f"default is more than max: {quantity_text(hi)}")
        if step is not None:
            if step <= 0:
                errs.invalid(rf + ".step", quantity_text(step), "must be greater than zero")
            else:
                if lo + step > cap:
                    errs.invalid(rf + ".step", quantity_text(step),
                                 f"one step {quantity_text(lo + step)} is larger than "
                                 f"capacity value: {quantity_text(cap)}")
                # The integer path: each read with Value(), which rounds up.
                for v in [default] + ([hi] if hi is not None else []):
                    if (math.ceil(v) - math.ceil(lo)) % math.ceil(step):
                        errs.invalid(rf + ".step", quantity_text(v),
                                     f"value is not a multiple of a given step "
                                     f"({quantity_text(step)}) from ({quantity_text(lo)})")


def check_slice(obj, old=None):
    """A ResourceSlice's metadata.name and spec; old: the stored one (PUT)."""
    errs = Errors()
    name = obj["metadata"].get("name")
    if not is_subdomain(name):
        errs.invalid("metadata.name", name, "must be a DNS subdomain (RFC 1123)")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        errs.required("spec")
        return errs.causes
    check_driver(errs, spec.get("driver"), "spec.driver")
    pool = spec.get("pool") or {}
    check_pool(errs, pool.get("name"), "spec.pool.name")
    count = pool.get("resourceSliceCount", 0)
    if not isinstance(count, int) or count <= 0:
        errs.invalid("spec.pool.resourceSliceCount", count, "must be greater than zero")
    gen = pool.get("generation", 0)
    if not isinstance(gen, int) or gen < 0:
        errs.invalid("spec.pool.generation", gen, "must be greater than or equal to zero")
    if old:
        ospec = old["spec"]
        if pool.get("name") != (ospec.get("pool") or {}).get("name"):
            errs.immutable("spec.pool.name", pool.get("name"))
        if spec.get("driver") != ospec.get("driver"):
            errs.immutable("spec.driver", spec.get("driver"))
        if spec.get("nodeName") != ospec.get("nodeName"):
            errs.immutable("spec.nodeName", spec.get("nodeName"))
    where = []
    node = spec.get("nodeName")
    if node is not None:
        if node == "":
            errs.invalid("spec.nodeName", node, "must be either unset or set to a non-empty string")
        else:
            where.append("`nodeName`")
            if not is_subdomain(node):
                errs.invalid("spec.nodeName", node, "must be a node name (a DNS subdomain)")
    selector = spec.get("nodeSelector")
    if selector is not None:
        where.append("`nodeSelector`")
        terms = selector.get("nodeSelectorTerms") if isinstance(selector, dict) else None
        if not isinstance(terms, list) or len(terms) != 1:
            errs.invalid("spec.nodeSelector.nodeSelectorTerms", terms,
                         "must have exactly one node selector term")
    for flag in ("allNodes", "perDeviceNodeSelection"):
        v = spec.get(flag)
        if v is True:
            where.append(f"`{flag}`")
        elif v is not None:
            errs.invalid(f"spec.{flag}", v, "must be either unset or set to true")
    one_of = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"
    if not where:
        errs.required("spec", one_of + " is required")
    elif len(where) > 1:
        errs.invalid("spec", "{" + ", ".join(where) + "}", one_of + " is required, but several are set")
    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        errs.invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed")
    if spec.get("sharedCounters") is not None:
        check_counter_names(errs, spec["sharedCounters"], "spec.sharedCounters", "name", 8)
    devices = spec.get("devices") or []
    # ResourceSliceMaxDevicesWithAdvancedFeatures when any device has a taint or consumes counters.
    max_devices = 64 if has_taints(spec) or has_consumes_counters(spec) else 128
    old_devices = {d.get("name"): d for d in ((old or {}).get("spec") or {}).get("devices") or []
                   if isinstance(d, dict)}
    if not isinstance(devices, list):
        errs.invalid("spec.devices", devices, "must be a list")
    elif len(devices) > max_devices:
        errs.too_many("spec.devices", len(devices), max_devices)
    else:
        seen = set()
        for i, dev in enumerate(devices):
            field = f"spec.devices[{i}]"
            if not isinstance(dev, dict):
                errs.invalid(field, dev, "must be an object")
                continue
            check_device_name(errs, dev.get("name"), field + ".name")
            attrs = dev.get("attributes") or {}
            caps = dev.get("capacity") or {}
            if len(attrs) + len(caps) > 32:
                errs.invalid(field, len(attrs) + len(caps),
                             "the total number of attributes and capacities must not exceed 32")
            for key, attr in attrs.items():
                check_qualified_name(errs, key, field + ".attributes")
                check_attribute(errs, attr, f"{field}.attributes[{key}]")
            for key in caps:
                check_qualified_name(errs, key, field + ".capacity")
            was = old_devices.get(dev.get("name"))
            # A capacity as the stored device has it is not validated again (ratcheting).
            if isinstance(caps, dict) and not (was and was.get("capacity") == dev.get("capacity")):
                for key, c in caps.items():
                    pol = c.get("requestPolicy") if isinstance(c, dict) else None
                    if pol is None:
                        continue
                    cf = f"{field}.capacity[{key}].requestPolicy"
                    if dev.get("allowMultipleAllocations") is not True:
                        errs.add("FieldValueForbidden", cf,
                                 "Forbidden: allowMultipleAllocations must be true")
                    else:
                        check_request_policy(errs, c.get("value", 0), pol, cf)
            if dev.get("consumesCounters") is not None:
                check_counter_names(errs, dev["consumesCounters"], field + ".consumesCounters",
                                    "counterSet", 2)
            taints = dev.get("taints")
            # Taints as the stored device has them are not validated again (ratcheting).
            if taints is not None and not (was and was.get("taints") == taints):
                check_taints(errs, taints, field + ".taints")
            if dev.get("name") in seen:
                errs.duplicate(field, dev.get("name"))
            seen.add(dev.get("name"))
    return errs.causes


def interface_address(s):
    """An address with its prefix length, in canonical form: 10.9.8.7/24."""
    addr, slash, plen = s.partition("/") if isinstance(s, str) else ("", "", "")
    try:
        iface = ipaddress.ip_interface(s)
    except ValueError:
        return False
    return bool(slash) and str(iface.ip) == addr and str(iface.network.prefixlen) == plen


def device_key(d):
    return (d.get("driver"), d.get("pool"), d.get("device"), d.get("shareID"))


def key_text(k):
    return "/".join(p for p in k if p)


def check_conditions(errs, conds, field):
    for f, c in errs.objects(conds, field, 8):
        t = c.get("type") or ""
        if not t:
            errs.required(f + ".type")
        elif not (LABEL_NAME_RE.match(t.rpartition("/")[2]) and len(t.rpartition("/")[2]) <= 63):
            errs.invalid(f + ".type", t, "must be a qualified name")
        if c.get("status") not in ("True", "False", "Unknown"):
            errs.not_supported(f + ".status", c.get("status"), ("True", "False", "Unknown"))
        if not c.get("lastTransitionTime"):
            errs.required(f + ".lastTransitionTime", "must be set")
        reason = c.get("reason") or ""
        if not reason:
            errs.required(f + ".reason")
        elif len(reason) > 1024 or not CONDITION_REASON_RE.match(reason):
            errs.invalid(f + ".reason", reason, "must be a CamelCase word")


# The forms github.com/google/uuid's Validate takes (then the API wants the first, lower case).
UUID_FORMS_RE = re.compile(r"^(urn:uuid:|\{)?[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                           r"[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}\}?$")


def check_uid(errs, uid, field):
    """validateUID: a UUID, in RFC 4122's normalized form (36, lower case)."""
    if not isinstance(uid, str) or not UUID_FORMS_RE.match(uid) or \
            len(uid) not in (32, 36, 38, 45) or (len(uid) == 36 and uid.count("-") != 4):
        errs.invalid(field, uid, "error validating uid: invalid UUID format")
    elif len(uid) != 36 or uid != uid.lower():
        errs.invalid(field, uid, "uid must be in RFC 4122 normalized form, "
                     "`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal "
                     "characters")


def check_allocation(results):
    """status.allocation.devices.results as the API checked them when the
    scheduler wrote them (the tests write them into the claim's file): each
    shareID a UUID in normalized form."""
    errs = Errors()
    for i, r in enumerate(results):
        if isinstance(r, dict) and r.get("shareID") is not None:
            check_uid(errs, r["shareID"], f"status.allocation.devices.results[{i}].shareID")
    return errs.causes


def check_claim_status(devices, allocated):
    """status.devices of a claim whose allocated devices are `allocated`."""
    errs = Errors()
    seen = set()
    for i, d in enumerate(devices):
        field = f"status.devices[{i}]"
        check_driver(errs, d.get("driver"), field + ".driver")
        check_pool(errs, d.get("pool"), field + ".pool")
        check_device_name(errs, d.get("device"), field + ".device")
        if d.get("shareID") is not None:
            check_uid(errs, d["shareID"], field + ".shareID")
        key = device_key(d)
        if key not in allocated:
            errs.invalid(field, key_text(key), "must be an allocated device in the claim")
        if "conditions" in d:
            check_conditions(errs, d["conditions"], field + ".conditions")
        if "data" in d and not isinstance(d["data"], dict):
            errs.invalid(field + ".data", "<value omitted>", "must be a valid JSON object")
        net = d.get("networkData")
        if isinstance(net, dict):
            nf = field + ".networkData"
            if len(net.get("interfaceName") or "") > 256:
                errs.too_long(nf + ".interfaceName", 256)
            if len(net.get("hardwareAddress") or "") > 128:
                errs.too_long(nf + ".hardwareAddress", 128)
            ips = net.get("ips") or []
            if len(ips) > 16:
                errs.too_many(nf + ".ips", len(ips), 16)
            else:
                for j, ip in enumerate(ips):
                    if not interface_address(ip):
                        errs.invalid(f"{nf}.ips[{j}]", ip,
                                     "must be an IP address with a prefix length, in canonical "
                                     "form (10.9.8.7/24, 2001:db8::1/64)")
                    elif ips.index(ip) != j:
                        errs.duplicate(f"{nf}.ips[{j}]", ip)
        if key in seen:
            errs.duplicate(field, key_text(key))
        seen.add(key)
    return errs.causes


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


class Store:
    """ResourceSlices in memory, claims in files; one resourceVersion counter
    for all, as etcd's revision."""

    def __init__(self, rdir):
        self.lock = threading.Lock()
        self.rdir = rdir
        self.rv = 1000
        self.slices = {}

    def next_rv(self):
        self.rv += 1
        return str(self.rv)

    def dump(self, name):
        if not self.rdir:
            return
        path = os.path.join(self.rdir, "resourceslices", name + ".json")
        if name in self.slices:
            write_json(path, self.slices[name])
        elif os.path.exists(path):
            os.remove(path)

    def claim_path(self, ns, name):
        if not (self.rdir and is_label(ns) and is_subdomain(name)):
            return None
        return os.path.join(self.rdir, ns, "resourceclaims", name + ".json")


def selector(text, what):
    """Terms of a field or label selector: [(key, op, value)], op "=", "!=",
    "exists" or "!exists" (labels only)."""
    terms = []
    for part in filter(None, text.split(",")):
        for op, sym in (("!=", "!="), ("=", "=="), ("=", "=")):
            if sym in part:
                key, _, value = part.partition(sym)
                terms.append((key.strip(), op, value.strip()))
                break
        else:
            if what != "label" or not part.strip().lstrip("!"):
                raise bad_request(f'invalid {what} selector: "{part}": no operator')
            key = part.strip()
            terms.append((key.lstrip("!"), "!exists" if key.startswith("!") else "exists", None))
    return terms


def matches(terms, values):
    for key, op, want in terms:
        have = values.get(key)
        if op == "=" and have != want or op == "!=" and have == want:
            return False
        if op == "exists" and have is None or op == "!exists" and have is not None:
            return False
    return True


def generated_name(prefix):
    # The generic registry's SimpleNameGenerator: 5 characters of this alphabet.
    return prefix + "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))


def discovery_resources():
    slice_verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                   "watch"]
    return [
        {"name": "resourceclaims", "singularName": "resourceclaim", "namespaced": True,
         "kind": "ResourceClaim", "verbs": slice_verbs},
        {"name": "resourceclaims/status", "singularName": "", "namespaced": True,
         "kind": "ResourceClaim", "verbs": ["get", "patch", "update"]},
        {"name": "resourceslices", "singularName": "resourceslice", "namespaced": False,
         "kind": "ResourceSlice", "verbs": slice_verbs},
    ]


GROUP_VERSION = {"groupVersion": GV, "version": "v1"}
API_GROUP = {"name": GROUP, "versions": [GROUP_VERSION], "preferredVersion": GROUP_VERSION}


class Pods:
    """DIR's pods, polled: each a resourceVersion, and the events of their
    changes for the watches."""

    KEEP = 1000

    def __init__(self, pdir, store):
        self.dir = pdir
        self.store = store  # its lock and counter: one resourceVersion for all
        self.cond = threading.Condition(store.lock)
        self.pods = {}  # (ns, name) -> (file signature, object)
        self.events = []  # (rv int, type, object)
        self.floor = 0  # the oldest resourceVersion a watch may start from
        self.gen = (None, {})  # DIR/.generated's bytes, and its pods
        self.scan()
        threading.Thread(target=self.poll, daemon=True).start()

    def read_dir(self):
        seen = {}
        try:
            namespaces = os.listdir(self.dir)
        except OSError:
            return seen
        for ns in namespaces:
            d = os.path.join(self.dir, ns)
            if ns.startswith(".") or not os.path.isdir(d):
                continue
            for f in os.listdir(d):
                if not f.endswith(".json"):
                    continue
                try:
                    with open(os.path.join(d, f), "rb") as fh:
                        data = fh.read()
                    obj = json.loads(data)
                except (OSError, ValueError):
                    continue  # being written, or not a pod: not served in lists
                if isinstance(obj, dict):
                    seen[(ns, f[:-5])] = (data, obj)
        seen.update(self.generated())
        return seen

    def generated(self):
        """DIR/.generated's pods, made once for each content of the file."""
        try:
            with open(os.path.join(self.dir, ".generated"), "rb") as fh:
                spec_bytes = fh.read()
            spec = json.loads(spec_bytes)
        except (OSError, ValueError):
            return {}
        if self.gen[0] == spec_bytes:
            return self.gen[1]
        ns, node = spec.get("namespace", "generated"), spec.get("node", "node1")
        value = "v" * 63
        pods = {}
        for i in range(int(spec.get("count", 0))):
            name = f"gen-{i:05d}"
            obj = {"kind": "Pod", "apiVersion": "v1",
                   "metadata": {"namespace": ns, "name": name,
                                "uid": f"00000000-0000-4000-8000-{i:012d}",
                                "labels": {f"gen.example.com/l{j}": value
                                           for j in range(int(spec.get("labels", 0)))},
                                "annotations": {"gen.example.com/a": "a" * int(
                                    spec.get("annotationBytes", 0)),
                                    "gen.example.com/round": str(spec.get("round", 0))}},
                   "spec": {"nodeName": node, "containers": [
                       {"name": "main", "image": "busybox",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
            data = json.dumps(obj).encode()
            pods[(ns, name)] = (data, obj)
        self.gen = (spec_bytes, pods)
        return pods

    def scan(self):
        seen = self.read_dir()
        with self.cond:
            for key, (data, obj) in seen.items():
                old = self.pods.get(key)
                if old and old[0] == data:
                    continue
                rv = self.store.next_rv()
                obj = json.loads(data)
                obj.setdefault("metadata", {})["resourceVersion"] = rv
                self.pods[key] = (data, obj)
                self.event("MODIFIED" if old else "ADDED", obj)
            for key in [k for k in self.pods if k not in seen]:
                obj = json.loads(json.dumps(self.pods.pop(key)[1]))
                obj["metadata"]["resourceVersion"] = self.store.next_rv()
                self.event("DELETED", obj)

    def event(self, kind, obj):
        self.events.append((int(self.store.rv), kind, obj))
        del self.events[:-self.KEEP]
        if len(self.events) == self.KEEP:
            self.floor = max(self.floor, self.events[0][0] - 1)
        self.cond.notify_all()

    def compact(self):
        with self.cond:
            # etcd keeps the compacted revision itself: one past it is gone too.
            self.floor = int(self.store.next_rv())
            self.events = []

    def poll(self):
        while not STOP.wait(0.05):
            self.scan()

    def touched(self, name):
        try:
            return os.stat(os.path.join(self.dir, name)).st_mtime
        except OSError:
            return 0


def pod_values(obj):
    meta = obj.get("metadata") or {}
    return {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
            "spec.nodeName": (obj.get("spec") or {}).get("nodeName") or ""}


class Mode:
    """The --mode file, consumed under a lock (requests run in threads)."""

    lock = threading.Lock()

    def __init__(self, path):
        self.path = path

    def take(self):
        with self.lock:
            try:
                with open(self.path) as f:
                    words = f.read().split()
            except FileNotFoundError:
                words = []
            if not words or words[0] == "ok":
                return ["ok"]
            what = words[0]
            # "status CODE [COUNT]": the count is the third word.
            at = 2 if what == "status" else 1
            if len(words) > at:
                left = int(words[at])
                if left <= 0:
                    return ["ok"]
                words[at] = str(left - 1)
                tmp = self.path + ".tmp"
                with open(tmp, "w") as f:
                    f.write(" ".join(words) + "\n")
                os.replace(tmp, self.path)
            return words


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hpn-test-apiserver"
    # TCP_NODELAY, as Go's net/http (kube-apiserver) sets it: the headers and
    # the body go out as two writes, and with Nagle the body would wait for
    # the client's delayed ACK (40 ms) of the headers.
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        pass

    def record(self, user, code):
        cfg = self.server.cfg
        with cfg.log_lock:
            with open(cfg.log, "a") as f:
                f.write(f"{self.server.name} {self.path} {user or '-'} {code} "
                        f"{time.monotonic():.3f} {self.command}\n")

    def user(self):
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            token = auth[len("Bearer "):]
            issued = self.server.cfg.issued
            with issued.lock:
                sa = issued.tokens.get(token)
            if sa:
                return f"system:serviceaccount:{sa[0]}:{sa[1]}" if sa[2] > time.time() else None
            try:
                with open(self.server.cfg.tokens) as f:
                    tokens = f.read().split()
            except FileNotFoundError:
                tokens = []
            return "token:" + token[:8] if token in tokens else None
        cert = self.connection.getpeercert()
        for rdn in (cert or {}).get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    return "cert:" + value
        return None

    def send(self, code, body, ctype="application/json", user=None, extra=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.record(user, code)

    def fail(self, code, message, user=None, extra=()):
        self.send(code, status_object(code, REASONS.get(code, "Unknown"), message), user=user,
                  extra=extra)

    def do_GET(self):
        self.handle_method("GET")

    def do_POST(self):
        self.handle_method("POST")

    def do_PUT(self):
        self.handle_method("PUT")

    def do_PATCH(self):
        self.handle_method("PATCH")

    def do_DELETE(self):
        self.handle_method("DELETE")

    def handle_method(self, method):
        # The body is read first, whatever the answer: the connection is
        # kept alive and a retry comes on it.
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(min(length, REQUEST_MAX + 1))
        user = self.user()
        if not user:
            return self.fail(401, "Unauthorized")
        if len(self.body) > REQUEST_MAX:
            self.close_connection = True
            return self.fail(413, "the request is too large", user)
        url = urllib.parse.urlsplit(self.path)
        path, self.query = url.path, urllib.parse.parse_qs(url.query)
        port = self.server.server_address[1]
        parts = path.split("/")
        if user.startswith("system:serviceaccount:") and not (
                method == "GET" and len(parts) == 7 and parts[1:4] == ["api", "v1", "namespaces"]
                and parts[5] == "pods"):
            # An issued token's user: get pods, nothing else (the plugin's role).
            return self.fail(403, f'User "{user}" cannot {method.lower()} {path}: the stand-in '
                             f"grants issued tokens get pods only", user)
        # ['', 'api', 'v1', 'namespaces', NS, 'serviceaccounts', NAME, 'token']
        if len(parts) == 8 and parts[1:4] == ["api", "v1", "namespaces"] and \
                parts[5] == "serviceaccounts" and parts[7] == "token":
            try:
                self.allow(method, "POST")
                return self.token_request(parts[4], parts[6], user)
            except ApiError as e:
                return self.send(e.code, e.status, user=user)
        if method == "GET" and path in ("/api", "/apis", "/api/v1", "/apis/" + GROUP,
                                        "/apis/" + GV):
            return self.send(200, self.discovery(path, port), user=user)
        parts = path.split("/")
        try:
            # ['', 'api', 'v1', 'namespaces', NS, 'pods', NAME]
            if len(parts) == 7 and parts[1:4] == ["api", "v1", "namespaces"] and parts[5] == "pods":
                self.allow(method, "GET")
                return self.pod(parts[4], parts[6], user)
            if path == "/api/v1/pods" or (len(parts) == 6 and parts[1:4] == ["api", "v1", "namespaces"]
                                           and parts[5] == "pods"):
                self.allow(method, "GET")
                return self.pod_list(parts[4] if len(parts) == 6 else None, user)
            if path.startswith(f"/apis/{GV}/"):
                return self.resource(method, parts[4:], user)
        except ApiError as e:
            return self.send(e.code, e.status, user=user)
        self.fail(404, "the server could not find the requested resource", user)

    def token_request(self, ns, name, user):
        """TokenRequest for ServiceAccount ns/name, if the --token-requests file lets user."""
        cfg = self.server.cfg
        auth = self.headers.get("Authorization", "")
        bearer = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        allowed = []
        try:
            with open(cfg.token_requests) as f:
                for line in f:
                    words = line.split()
                    if words and words[0] == f"{ns}/{name}":
                        allowed += words[1:]
        except FileNotFoundError:
            allowed = None
        if not bearer or (allowed is not None and bearer not in allowed):
            raise ApiError(403, f'serviceaccounts "{name}" is forbidden: User "{user}" cannot '
                           f'create resource "serviceaccounts/token" in API group "" in the '
                           f'namespace "{ns}"', details={"name": name, "kind": "serviceaccounts"})
        try:
            req = json.loads(self.body or b"{}")
        except ValueError:
            raise ApiError(400, "the TokenRequest is not JSON")
        if not isinstance(req, dict) or req.get("kind", "TokenRequest") != "TokenRequest":
            raise ApiError(400, "not a TokenRequest")
        seconds = (req.get("spec") or {}).get("expirationSeconds", 3600)
        if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 1:
            raise invalid("TokenRequest", name, [{"reason": "FieldValueInvalid",
                          "field": "spec.expirationSeconds",
                          "message": "may not specify a duration less than 1 second"}],
                          group="authentication.k8s.io")
        token = f"sa.{ns}.{name}.{uuid.uuid4().hex}"
        expiry = int(time.time()) + seconds
        with cfg.issued.lock:
            cfg.issued.tokens[token] = (ns, name, expiry)
            with open(cfg.token_requests + ".issued", "a") as f:
                f.write(f"{ns}/{name} {token} {expiry}\n")
        self.send(201, {
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns,
                         "creationTimestamp": now_rfc3339()},
            "spec": {"audiences": ["https://kubernetes.default.svc"],
                     "expirationSeconds": seconds, "boundObjectRef": None},
            "status": {"token": token,
                       "expirationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                            time.gmtime(expiry))}}, user=user)

    def discovery(self, path, port):
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                    "serverAddress": f"127.0.0.1:{port}"}]}
        if path == "/api/v1":
            return {"kind": "APIResourceList", "groupVersion": "v1",
                    "resources": [{"name": "pods", "singularName": "pod", "namespaced": True,
                                   "kind": "Pod", "verbs": ["get", "list", "watch"],
                                   "shortNames": ["po"]}]}
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [API_GROUP]}
        if path == "/apis/" + GROUP:
            return dict(API_GROUP, kind="APIGroup", apiVersion="v1")
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GV,
                "resources": discovery_resources()}

    def allow(self, method, *allowed):
        if method not in allowed:
            raise ApiError(405, "the server does not allow this method on the requested resource")

    def write_fault(self, user):
        """The --mode file's .write fault, for a write: True when it answered."""
        if self.command not in ("PUT", "POST", "PATCH", "DELETE"):
            return False
        path = self.server.cfg.mode.path + ".write"
        with Mode.lock:
            try:
                with open(path) as f:
                    words = f.read().split()
            except FileNotFoundError:
                return False
            if len(words) != 2 or int(words[1]) <= 0:
                return False
            with open(path, "w") as f:
                f.write(f"{words[0]} {int(words[1]) - 1}\n")
        code = int(words[0])
        self.fail(code, f"stand-in write fault: {code}", user)
        return True

    def fault(self, user):
        """The --mode fault: None when it answered, else what to do to the
        answer (ok, type, badjson, stallbody)."""
        if self.write_fault(user):
            return None
        mode = self.server.cfg.mode.take()
        what = mode[0]
        if what == "status":
            code = int(mode[1])
            self.fail(code, f"stand-in fault: {code}", user)
            return None
        if what == "429":
            after = mode[2] if len(mode) > 2 else "1"
            self.fail(429, "stand-in fault: too many requests", user,
                      extra=[("Retry-After", after)])
            return None
        if what == "stall":
            STOP.wait()
            return None
        if what in ("big", "bigchunked"):
            self.big(what == "bigchunked", user)
            return None
        return what

    def answer(self, what, code, body, user):
        """A successful answer, spoilt as the fault `what` says."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        if what == "type":
            return self.send(code, data, ctype="text/html", user=user)
        if what == "badjson":
            return self.send(code, data[: len(data) // 2], user=user)
        if what == "stallbody":
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.record(user, code)
            STOP.wait()
            return None
        return self.send(code, data, user=user)

    def pod(self, ns, name, user):
        what = self.fault(user)
        if what is None:
            return
        file = os.path.join(self.server.cfg.dir, ns, name + ".json")
        if not (ns.isprintable() and "/" not in ns + name and os.path.isfile(file)):
            return self.fail(404, f'pods "{name}" not found', user)
        with open(file, "rb") as f:
            body = f.read()
        self.answer(what, 200, body, user)

    def pod_list(self, ns, user):
        pods = self.server.cfg.pods
        fields = selector(self.query.get("fieldSelector", [""])[0], "field")
        for key, _, _ in fields:
            if key not in ("metadata.name", "metadata.namespace", "spec.nodeName"):
                raise bad_request(f"field label not supported: {key}")
        if ns:
            fields.append(("metadata.namespace", "=", ns))
        what = self.fault(user)
        if what is None:
            return
        if what == "compact":
            pods.compact()
        if self.query.get("watch", [""])[0] in ("1", "true"):
            return self.pod_watch(pods, fields, user)
        limit, after, rv = self.page_query(pods)
        with pods.cond:
            items = [obj for _, obj in pods.pods.values() if matches(fields, pod_values(obj))]
            rv = rv or pods.store.rv
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"].get("name", "")))
        meta = {"resourceVersion": str(rv)}
        if after:
            items = [o for o in items if (o["metadata"].get("namespace", ""),
                                          o["metadata"].get("name", "")) > after]
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            token = json.dumps({"rv": str(rv), "after": [last.get("namespace", ""),
                                                         last.get("name", "")]})
            meta["continue"] = base64.urlsafe_b64encode(token.encode()).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        self.answer(what, 200, {"kind": "PodList", "apiVersion": "v1",
                                "metadata": meta, "items": items}, user)

    def page_query(self, pods):
        """limit and continue: (limit or 0, the last pod before this page or
        None, the first page's resourceVersion or None)."""
        try:
            limit = int(self.query.get("limit", ["0"])[0])
        except ValueError:
            raise bad_request("limit is not an integer")
        token = self.query.get("continue", [""])[0]
        if not token:
            return max(limit, 0), None, None
        try:
            t = json.loads(base64.urlsafe_b64decode(token.encode()))
            rv, after = str(int(t["rv"])), tuple(t["after"])
        except (ValueError, KeyError, TypeError):
            raise bad_request("continue key is not valid")
        expired = int(rv) < pods.floor
        path = os.path.join(self.server.cfg.dir, ".expire-continue")
        with Mode.lock:
            try:
                with open(path) as f:
                    left = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                left = 0
            if left > 0:
                with open(path, "w") as f:
                    f.write(f"{left - 1}\n")
                expired = True
        if expired:
            raise ApiError(410, "The provided continue parameter is too old to display a "
                           "consistent list result. You can start a new list without the "
                           "continue parameter.", "Expired")
        return max(limit, 0), after, rv

    def chunk(self, obj):
        data = json.dumps(obj).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def pod_watch(self, pods, fields, user):
        rv = self.query.get("resourceVersion", [""])[0]
        timeout = float(self.query.get("timeoutSeconds", ["300"])[0])
        start, started = time.monotonic(), time.time()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.record(user, 200)
        with pods.cond:
            if rv in ("", "0"):
                pending = [("ADDED", obj) for _, obj in pods.pods.values()]
                at = int(pods.store.rv)
            elif not rv.isdigit() or int(rv) < pods.floor:
                pending, at = None, 0
            else:
                at = int(rv)
                pending = []
        try:
            if pending is None:
                self.chunk({"type": "ERROR", "object": status_object(
                    410, "Expired", f"too old resource version: {rv} ({pods.floor})")})
                self.wfile.write(b"0\r\n\r\n")
                return
            while True:
                for kind, obj in pending:
                    if matches(fields, pod_values(obj)):
                        self.chunk({"type": kind, "object": obj})
                if pods.touched(".drop-watches") > started:
                    # Cut: no last chunk, the connection closed under the client.
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                left = timeout - (time.monotonic() - start)
                if left <= 0 or STOP.is_set() or pods.touched(".end-watches") > started:
                    self.wfile.write(b"0\r\n\r\n")
                    return
                with pods.cond:
                    if pods.floor > at:
                        pending = None
                    else:
                        pods.cond.wait(min(left, 0.1))
                        pending = [(k, o) for r, k, o in pods.events if r > at]
                        if pods.events:
                            at = max(at, pods.events[-1][0])
                if pending is None:
                    self.chunk({"type": "ERROR", "object": status_object(
                        410, "Expired", "too old resource version: compacted")})
                    self.wfile.write(b"0\r\n\r\n")
                    return
        except OSError:
            self.close_connection = True  # the client went away

    # ---- resource.k8s.io/v1 ------------------------------------------------------

    def resource(self, method, parts, user):
        """parts: the path after /apis/resource.k8s.io/v1/."""
        if parts == ["resourceslices"]:
            self.allow(method, "GET", "POST")
            kind = "list" if method == "GET" else "create"
        elif len(parts) == 2 and parts[0] == "resourceslices":
            self.allow(method, "GET", "PUT", "DELETE")
            kind = method.lower()
        elif len(parts) in (4, 5) and parts[0] == "namespaces" and parts[2] == "resourceclaims" \
                and parts[4:] in ([], ["status"]):
            self.allow(method, *(["GET", "PATCH"] if parts[4:] else ["GET"]))
            kind = "claim-" + method.lower()
        else:
            raise ApiError(404, "the server could not find the requested resource")
        what = self.fault(user)
        if what is None:
            return
        store = self.server.cfg.store
        with store.lock:
            try:
                code, obj = self.resource_call(store, kind, parts)
            except (TypeError, AttributeError, ValueError) as e:
                # A field of the wrong JSON type: the real server fails to decode it.
                raise bad_request(f"the object cannot be decoded: {type(e).__name__}: {e}")
        self.answer(what, code, obj, user)

    def resource_call(self, store, kind, parts):
        if kind == "list":
            code, obj = 200, self.list_slices(store)
        elif kind == "create":
            code, obj = 201, self.create_slice(store)
        elif kind == "get":
            code, obj = 200, self.slice_of(store, parts[1])
        elif kind == "put":
            code, obj = 200, self.update_slice(store, parts[1])
        elif kind == "delete":
            code, obj = 200, self.delete_slice(store, parts[1])
        elif kind == "claim-get":
            code, obj = 200, self.claim(store, parts[1], parts[3])[1]
        else:
            code, obj = 200, self.apply_claim_status(store, parts[1], parts[3])
        return code, obj

    def json_body(self, kind):
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
        if ctype != "application/json":
            raise ApiError(415, f'the stand-in takes a {kind} as application/json, not "{ctype}"')
        try:
            obj = json.loads(self.body)
        except ValueError as e:
            raise bad_request(f"the body is not JSON: {e}")
        if not isinstance(obj, dict):
            raise bad_request("the body is not an object")
        if obj.get("kind", kind) != kind or obj.get("apiVersion", GV) != GV:
            raise bad_request(f"the body is a {obj.get('apiVersion')} {obj.get('kind')}, "
                              f"not a {GV} {kind}")
        obj["kind"], obj["apiVersion"] = kind, GV
        if not isinstance(obj.get("metadata"), dict):
            obj["metadata"] = {}
        return obj

    def list_slices(self, store):
        fields = selector(self.query.get("fieldSelector", [""])[0], "field")
        labels = selector(self.query.get("labelSelector", [""])[0], "label")
        for key, _, _ in fields:
            if key not in ("metadata.name", "spec.nodeName", "spec.driver"):
                raise bad_request(f'field label not supported: {key}')
        items = []
        for name in sorted(store.slices):
            s = store.slices[name]
            values = {"metadata.name": name, "spec.nodeName": s["spec"].get("nodeName") or "",
                      "spec.driver": s["spec"].get("driver")}
            if matches(fields, values) and matches(labels, s["metadata"].get("labels") or {}):
                items.append({k: v for k, v in s.items() if k not in ("kind", "apiVersion")})
        return {"kind": "ResourceSliceList", "apiVersion": GV,
                "metadata": {"resourceVersion": str(store.rv)}, "items": items}

    def slice_of(self, store, name):
        if name not in store.slices:
            raise not_found("resourceslices", name)
        return store.slices[name]

    def create_slice(self, store):
        obj = self.json_body("ResourceSlice")
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = generated_name(meta["generateName"])
        name = meta.get("name") or ""
        if not name:
            raise invalid("ResourceSlice", "", [{
                "reason": "FieldValueRequired", "field": "metadata.name",
                "message": "Required value: name or generateName is required"}])
        decode_taint_times(obj)
        decode_slice_fields(obj)
        drop_disabled_fields(obj, None, self.server.cfg.mode.path + ".gates")
        causes = check_slice(obj)
        if causes:
            raise invalid("ResourceSlice", name, causes)
        if name in store.slices:
            raise ApiError(409, f'resourceslices.{GROUP} "{name}" already exists',
                           reason="AlreadyExists",
                           details={"name": name, "group": GROUP, "kind": "resourceslices"})
        meta.update(uid=str(uuid.uuid4()), resourceVersion=store.next_rv(),
                    creationTimestamp=now_rfc3339(), generation=1)
        store.slices[name] = obj
        store.dump(name)
        return obj

    def update_slice(self, store, name):
        obj = self.json_body("ResourceSlice")
        meta = obj["metadata"]
        if meta.get("name") != name:
            raise bad_request(f"the name of the object ({meta.get('name')}) does not match the "
                              f"name on the URL ({name})")
        old = self.slice_of(store, name)
        rv = meta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise ApiError(409, f'Operation cannot be fulfilled on resourceslices.{GROUP} '
                           f'"{name}": the object has been modified (resourceVersion '
                           f'{old["metadata"]["resourceVersion"]}, not {rv}): read it again',
                           details={"name": name, "group": GROUP, "kind": "resourceslices"})
        decode_taint_times(obj)
        decode_slice_fields(obj)
        drop_disabled_fields(obj, old, self.server.cfg.mode.path + ".gates")
        causes = check_slice(obj, old)
        if causes:
            raise invalid("ResourceSlice", name, causes)
        gen = old["metadata"].get("generation", 1)
        meta.update(uid=old["metadata"]["uid"],
                    creationTimestamp=old["metadata"]["creationTimestamp"],
                    generation=gen + (obj["spec"] != old["spec"]),
                    resourceVersion=old["metadata"]["resourceVersion"])
        if obj == old:
            return old  # the storage writes nothing when nothing changes
        meta["resourceVersion"] = store.next_rv()
        store.slices[name] = obj
        store.dump(name)
        return obj

    def delete_slice(self, store, name):
        old = self.slice_of(store, name)
        del store.slices[name]
        store.dump(name)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "group": GROUP, "kind": "resourceslices",
                            "uid": old["metadata"]["uid"]}}

    def claim(self, store, ns, name):
        path = store.claim_path(ns, name)
        if not path or not os.path.isfile(path):
            raise not_found("resourceclaims", name)
        with open(path) as f:
            return path, json.load(f)

    def apply_claim_status(self, store, ns, name):
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
        if ctype != "application/apply-patch+yaml":
            raise ApiError(415, f'the body of the request was in an unknown format ("{ctype}"): '
                           "the stand-in takes application/apply-patch+yaml only")
        manager = self.query.get("fieldManager", [""])[0]
        if not manager or len(manager) > 128:
            raise invalid("PatchOptions", "", [{
                "reason": "FieldValueRequired" if not manager else "FieldValueTooLong",
                "field": "fieldManager",
                "message": "Required value: is required for apply patch" if not manager
                else "Too long: may not be more than 128 bytes"}], group="meta.k8s.io")
        path, claim = self.claim(store, ns, name)
        patch = apply_body(self.body)
        if not isinstance(patch, dict):
            raise bad_request("the body is not an object")
        if patch.get("apiVersion") != GV or patch.get("kind") != "ResourceClaim":
            raise bad_request(f"the apply patch is a {patch.get('apiVersion')} "
                              f"{patch.get('kind')}, not a {GV} ResourceClaim")
        pmeta = patch.get("metadata") or {}
        if pmeta.get("name") != name or pmeta.get("namespace", ns) != ns:
            raise bad_request("the name and namespace of the object do not match the URL")
        status = patch.get("status") or {}
        if not isinstance(status, dict) or set(status) - {"devices"}:
            raise bad_request("the stand-in applies status.devices only")
        mine = status.get("devices") or []
        if not isinstance(mine, list) or not all(isinstance(d, dict) for d in mine):
            raise bad_request("status.devices is not a list of objects")
        # DRAConsumableCapacity off: a shareID dropped, unless the claim uses shares already.
        claim_status = claim.get("status") or {}
        if "DRAConsumableCapacity" in gates_off(self.server.cfg.mode.path + ".gates") and \
                not any(isinstance(d, dict) and d.get("shareID") is not None for d in
                        ((claim_status.get("allocation") or {}).get("devices") or {})
                        .get("results", []) + (claim_status.get("devices") or [])):
            for d in mine:
                d.pop("shareID", None)
        # Simplified apply: the manager's entries are the patch's, whoever
        # had them before; the other managers keep the rest.
        meta = claim.setdefault("metadata", {})
        managed = [m for m in meta.get("managedFields") or []
                   if not (m.get("manager") == manager and m.get("subresource") == "status")]
        keys = {device_key(d) for d in mine}
        before = [m for m in meta.get("managedFields") or [] if m not in managed]
        owned_before = {k for m in before for k in owned_keys(m)}
        stored = (claim.get("status") or {}).get("devices") or []
        kept = [d for d in stored if device_key(d) not in keys | owned_before]
        devices = kept + mine
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices")
                   or {}).get("results") or []
        allocated = {device_key(r) for r in results if isinstance(r, dict)}
        causes = check_allocation(results) + check_claim_status(devices, allocated)
        if causes:
            raise invalid("ResourceClaim", name, causes)
        for m in managed:
            if m.get("subresource") == "status":
                set_owned(m, owned_keys(m) - keys)
        managed = [m for m in managed if m.get("subresource") != "status" or owned_keys(m)]
        if mine:
            entry = {"manager": manager, "operation": "Apply", "apiVersion": GV,
                     "time": now_rfc3339(), "fieldsType": "FieldsV1", "subresource": "status"}
            set_owned(entry, keys)
            managed.append(entry)
        meta["managedFields"] = managed
        claim.setdefault("status", {})["devices"] = devices
        if not devices:
            del claim["status"]["devices"]
        meta["resourceVersion"] = store.next_rv()
        write_json(path, claim)
        return claim

    def big(self, chunked, user):
        size = 2 << 20
        chunk = b" " * 65536
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(size))
        self.end_headers()
        self.record(user, 200)
        try:
            for _ in range(size // len(chunk)):
                if chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                else:
                    self.wfile.write(chunk)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client stopped reading, as it should


def apply_body(body):
    """An apply patch: YAML (PyYAML, if there), or JSON, which is YAML too."""
    try:
        import yaml
    except ImportError:
        yaml = None
    try:
        return yaml.safe_load(body) if yaml else json.loads(body)
    except (ValueError, getattr(yaml, "YAMLError", ValueError)) as e:
        raise bad_request(f"the body is not {'YAML' if yaml else 'JSON'}: {e}")


def owned_keys(entry):
    """The status.devices keys a managedFields entry owns."""
    devs = ((entry.get("fieldsV1") or {}).get("f:status") or {}).get("f:devices") or {}
    keys = set()
    for k in devs:
        if k.startswith("k:"):
            d = json.loads(k[2:])
            keys.add(device_key(d))
    return keys


def set_owned(entry, keys):
    names = ("driver", "pool", "device", "shareID")
    devs = {}
    for k in sorted(keys, key=lambda k: tuple(p or "" for p in k)):
        d = {n: v for n, v in zip(names, k) if v is not None}
        devs["k:" + json.dumps(dict(sorted(d.items())), separators=(",", ":"))] = {".": {}}
    entry["fieldsV1"] = {"f:status": {"f:devices": devs}}


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, name, cfg, ctx):
        self.name = name
        self.cfg = cfg
        super().__init__(("127.0.0.1", 0), Handler)
        # The handshake in the request's thread: a client that stalls in it
        # (or fails it) does not hold up the others.
        self.socket = ctx.wrap_socket(self.socket, server_side=True,
                                      do_handshake_on_connect=False)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ssl.SSLError, ConnectionError, BrokenPipeError)):
            with self.cfg.log_lock:
                with open(self.cfg.log, "a") as f:
                    f.write(f"{self.name} - - tls:{type(exc).__name__}\n")
            if isinstance(exc, ssl.SSLError):
                linger(request)
            return
        super().handle_error(request, client_address)


def linger(request):
    """After a failed handshake (the alert is sent), read what the client
    still sends until it closes (1 s at most) before closing: closed with
    unread data, the socket would send a reset that can overtake the alert
    (TLS 1.3 verifies the client certificate after the client's handshake is
    done), so the client could not tell a refused certificate from a crash.
    kube-apiserver does not linger; the plugin's message says so when it
    retries on such resets (kube.c)."""
    try:
        raw = socket.socket(fileno=os.dup(request.fileno()))
    except OSError:
        return
    with raw:
        raw.settimeout(1)
        try:
            raw.shutdown(socket.SHUT_WR)
            while raw.recv(65536):
                pass
        except OSError:
            pass


def context(cert, key, client_ca):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(client_ca)
    # As kube-apiserver (Go's VerifyClientCertIfGiven): a certificate is
    # optional, but one that is given must verify.
    ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", required=True, help="pods: DIR/NS/NAME.json")
    p.add_argument("--resources", help="claims: RDIR/NS/resourceclaims/NAME.json; slices "
                   "written to RDIR/resourceslices/NAME.json")
    p.add_argument("--pki", required=True,
                   help="dir with ca.crt, server.{crt,key}, wrongname.{crt,key}, other.{crt,key}")
    p.add_argument("--tokens", required=True)
    p.add_argument("--token-requests", help="who may create which ServiceAccount's tokens "
                   "(default: token-requests beside --tokens)")
    p.add_argument("--mode", required=True)
    p.add_argument("--ports", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--lifetime", type=float, default=600)
    cfg = p.parse_args()
    cfg.log_lock = threading.Lock()
    if not cfg.token_requests:
        cfg.token_requests = os.path.join(os.path.dirname(os.path.abspath(cfg.tokens)),
                                          "token-requests")
    cfg.issued = argparse.Namespace(lock=threading.Lock(), tokens={})
    cfg.mode = Mode(cfg.mode)
    cfg.store = Store(cfg.resources)
    cfg.pods = Pods(cfg.dir, cfg.store)
    pki = cfg.pki
    ca = os.path.join(pki, "ca.crt")
    servers = {
        "good": Server("good", cfg, context(f"{pki}/server.crt", f"{pki}/server.key", ca)),
        "wrongname": Server("wrongname", cfg,
                            context(f"{pki}/wrongname.crt", f"{pki}/wrongname.key", ca)),
        "otherca": Server("otherca", cfg, context(f"{pki}/other.crt", f"{pki}/other.key", ca)),
    }
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed = s.getsockname()[1]
    s.close()
    for srv in servers.values():
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    tmp = cfg.ports + ".tmp"
    with open(tmp, "w") as f:
        for name, srv in servers.items():
            f.write(f"{name} {srv.server_address[1]}\n")
        f.write(f"closed {closed}\n")
    os.replace(tmp, cfg.ports)
    # Ends by itself: a test that dies never leaves it behind for long.
    STOP.wait(cfg.lifetime)
    STOP.set()
    os._exit(0)


if __name__ == "__main__":
    main()
