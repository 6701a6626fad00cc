#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A container of a DaemonSet in conf/k8s/, as the kubelet would hand it to
the runtime: a CRI ContainerConfig (proto3 JSON, agent/proto/cri.proto)
for hpn-cri, on a throwaway "host".

The kubelet turns a hostPath volume mounted at MOUNTPATH into a bind mount
of the host's PATH. Here the host is a scratch directory: every host path
is remapped by the longest matching prefix of the map (HOST=SCRATCH pairs),
and, because the manifests mount host paths at their own paths, the mount
path and every argument naming such a path are remapped the same way, so
the container sees the paths the plugin, running on the host, reads. Paths
given with --keep stay as they are inside the container (the bundle root
/opt/hpn-rdma, which the plugin's loader names and the node mounts there).
A configMap volume is the directory --configmap; the service account's
projected volume is --service-account at its in-cluster path (unless
automountServiceAccountToken is false). The container's env gets
KUBERNETES_SERVICE_HOST and _PORT as the kubelet sets them (the API
server's service, or --api-server HOST:PORT: the stand-in's), and the
container's own env: plain values, the node's address (--host-ip, the
node's loopback unless given; an IPv6 one bare, as the Downward API gives
it, never bracketed) for a fieldRef to status.hostIP, and the
node's name (--node-name, "hpnr-node" unless given) for one to
spec.nodeName; $(NAME) of such a variable in an argument is replaced by its
value, as the kubelet does.

usage: daemonset.py MANIFEST DAEMONSET init|main CONTAINER_NAME LOG_PATH
         --map HOST=SCRATCH ... [--keep PATH ...] --configmap DIR
         --service-account DIR --image NAME [--host-ip IP] [--node-name NAME]
         [--api-server HOST:PORT] [--args-only | --probe]
Prints the ContainerConfig JSON (or, with --args-only, the args one a line;
with --probe, the readiness probe's exec command, remapped, one a line).
"""
import argparse
import ipaddress
import json
import re
import sys

import yaml

SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("manifest")
    ap.add_argument("daemonset")
    ap.add_argument("which", choices=["init", "main"])
    ap.add_argument("name")
    ap.add_argument("log_path")
    ap.add_argument("--map", action="append", default=[])
    ap.add_argument("--keep", action="append", default=[])
    ap.add_argument("--configmap", required=True)
    ap.add_argument("--service-account", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--host-ip", default="127.0.0.1")
    ap.add_argument("--node-name", default="hpnr-node")
    ap.add_argument("--api-server", default="10.96.0.1:443")
    ap.add_argument("--args-only", action="store_true")
    ap.add_argument("--probe", action="store_true")
    o = ap.parse_args()
    try:
        ipaddress.ip_address(o.host_ip)
    except ValueError:
        sys.exit(f"daemonset.py: --host-ip {o.host_ip} is not an address as status.hostIP "
                 "gives it (IPv4, or IPv6 without brackets)")
    pairs = sorted((tuple(m.split("=", 1)) for m in o.map), key=lambda p: -len(p[0]))

    def remap(path):
        for host, scratch in pairs:
            if path == host or path.startswith(host.rstrip("/") + "/"):
                return scratch + path[len(host):]
        sys.exit(f"daemonset.py: no --map for the host path {path}")

    def kept(path):
        return any(path == k or path.startswith(k.rstrip("/") + "/") for k in o.keep)

    docs = [d for d in yaml.safe_load_all(open(o.manifest)) if d]
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"] == o.daemonset]
    pod = ds["spec"]["template"]["spec"]
    ctrs = pod.get("initContainers" if o.which == "init" else "containers", [])
    (c,) = [c for c in ctrs if c["name"] == o.name]
    vols = {v["name"]: v for v in pod["volumes"]}
    mounts, cm_dirs = [], []
    for m in c.get("volumeMounts", []):
        v = vols[m["name"]]
        if "configMap" in v:
            mounts.append({"containerPath": m["mountPath"], "hostPath": o.configmap,
                           "readonly": True})
            cm_dirs.append(m["mountPath"])
            continue
        host = v["hostPath"]["path"]
        inside = m["mountPath"]
        if not kept(inside):
            if inside != host:
                sys.exit(f"daemonset.py: {o.name} mounts {host} at {inside}, not at its own path")
            inside = remap(host)
        mounts.append({"containerPath": inside, "hostPath": remap(host),
                       "readonly": bool(m.get("readOnly"))})
    if pod.get("automountServiceAccountToken", True):
        mounts.append({"containerPath": SA_PATH, "hostPath": o.service_account, "readonly": True})

    # A container that mounts no host path names none in its args either: its
    # /... values are its own (the metrics proxy's --allow-paths=/metrics).
    has_host = any("hostPath" in vols[m["name"]] for m in c.get("volumeMounts", []))

    def arg(a):
        k, eq, v = a.partition("=")
        if eq and has_host and v.startswith("/") and not kept(v) and not any(
                v.startswith(d.rstrip("/") + "/") for d in cm_dirs):
            return f"{k}={remap(v)}"
        return a

    env = {}
    fields = {"status.hostIP": o.host_ip, "spec.nodeName": o.node_name}
    for e in c.get("env", []):
        field = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if "value" in e:
            env[e["name"]] = e["value"]
        elif field in fields:
            env[e["name"]] = fields[field]
        else:
            sys.exit(f"daemonset.py: {o.name}'s env {e['name']} is neither a value, "
                     "status.hostIP nor spec.nodeName")

    def expand(a):
        return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                      lambda m: env.get(m.group(1), m.group(0)), a)

    args = [arg(expand(a)) for a in c.get("args", [])]
    if o.probe:
        print("\n".join(arg(a) for a in c["readinessProbe"]["exec"]["command"]))
        return 0
    if o.args_only:
        print("\n".join(args))
        return 0
    sc = c.get("securityContext", {})
    cfg = {
        "metadata": {"name": o.name, "attempt": 0},
        "image": {"image": o.image},
        "args": args,
        "envs": [{"key": "KUBERNETES_SERVICE_HOST", "value": o.api_server.rsplit(":", 1)[0]},
                 {"key": "KUBERNETES_SERVICE_PORT", "value": o.api_server.rsplit(":", 1)[1]}]
        + [{"key": k, "value": v} for k, v in env.items()],
        "mounts": mounts,
        "logPath": o.log_path,
        "linux": {"securityContext": {
            "privileged": bool(sc.get("privileged")),
            "readonlyRootfs": bool(sc.get("readOnlyRootFilesystem")),
            "runAsUser": {"value": sc.get("runAsUser", 0)},
            "capabilities": {"dropCapabilities": sc.get("capabilities", {}).get("drop", []),
                             "addCapabilities": sc.get("capabilities", {}).get("add", [])},
            "namespaceOptions": {"network": "NODE" if pod.get("hostNetwork") else "POD",
                                 "pid": "CONTAINER", "ipc": "POD"}}},
    }
    if "command" in c:
        cfg["command"] = c["command"]
    print(json.dumps(cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
