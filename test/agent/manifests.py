#!/usr/bin/python3
# test/agent/manifests.py: the agent's Kubernetes manifests (conf/k8s/hpn-rdma-agent.yaml and
# dep-rdma-gpu.yaml) hold together with the code and the conflist they name.
# kubectl cannot validate without an API server (it fetches the schema from
# one), so this checks, offline, what would break a node: YAML that parses,
# the kinds and API versions, the DaemonSet's host network and its mounts of
# the kubelet's sockets, the CNI lookup socket's directory, the configs and
# the journals at the paths the agent uses; the conflist it names selects a
# pool (match) whose agent.socket lies in the shared directory; the
# Deployment asks for rdma/hpn beside nvidia.com/gpu with requests equal to
# limits, is not privileged, and opts in as the conflist's podSelector wants.
# Prints "ok: ..." or "FAIL: ..." lines; exits 1 on any FAIL.
import json
import os
import sys

import yaml

src = os.environ["HPN_SRC"]
fails = 0


def check(ok, what):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    fails += 0 if ok else 1


def load(name):
    with open(os.path.join(src, "conf", "k8s", name)) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    check(len(docs) == 1, f"k8s/{name} is one YAML document")
    return docs[0]


ds = load("hpn-rdma-agent.yaml")
check(ds.get("apiVersion") == "apps/v1" and ds.get("kind") == "DaemonSet", "the agent is an apps/v1 DaemonSet")
pod = ds["spec"]["template"]["spec"]
check(ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items(),
      "the DaemonSet's selector matches its pods")
check(pod.get("hostNetwork") is True, "hostNetwork: the pool's NICs are the host netns's")
(ctr,) = pod["containers"]
sc = ctr.get("securityContext", {})
check(sc.get("privileged") is False and sc.get("runAsUser") == 0, "root, not privileged")
args = dict(a.split("=", 1) for a in ctr["args"])
kdir = args.get("--kubelet-dir", "/var/lib/kubelet")
vols = {v["name"]: v for v in pod["volumes"]}
mounts = {m["mountPath"]: vols[m["name"]]["hostPath"]["path"] for m in ctr["volumeMounts"]}
for path in (kdir + "/device-plugins", kdir + "/pod-resources", "/run/hpn-rdma", "/var/lib/cni/hpn-rdma"):
    check(mounts.get(path) == path, f"{path} is mounted from the host at the same path")
conf_path = args["--config"]
check(os.path.dirname(conf_path) in mounts, f"--config {conf_path} is under a mounted directory")
with open(os.path.join(src, "conf", os.path.basename(conf_path))) as f:
    lst = json.load(f)
(entry,) = [p for p in lst["plugins"] if p["type"] == "hpn-rdma"]
check("match" in entry, f"{os.path.basename(conf_path)}: its hpn-rdma entry selects a pool (match)")
sock = entry.get("agent", {}).get("socket", "/run/hpn-rdma/agent.sock")
check(os.path.dirname(sock) in mounts, f"agent.socket {sock} is in a directory shared with the host")
check(entry.get("stateDir", "/var/lib/cni/hpn-rdma") in mounts, "the journals' stateDir is mounted")
resource = args.get("--resource", "rdma/hpn")

dep = load("dep-rdma-gpu.yaml")
check(dep.get("apiVersion") == "apps/v1" and dep.get("kind") == "Deployment", "the workload is an apps/v1 Deployment")
tpl = dep["spec"]["template"]
res = tpl["spec"]["containers"][0]["resources"]
lim, req = res.get("limits", {}), res.get("requests", {})
check(int(lim.get(resource, 0)) > 0 and "nvidia.com/gpu" in lim, f"asks for {resource} beside nvidia.com/gpu")
check(lim == req, "requests equal limits (Guaranteed QoS: the static CPU manager, single-numa-node)")
check(not any(c.get("securityContext", {}).get("privileged") for c in tpl["spec"]["containers"]),
      "no privileged container: the devices come from Allocate")
sel = entry.get("podSelector")
if sel:
    ann = tpl["metadata"].get("annotations", {})
    check(ann.get(sel.get("annotation", "alibabacloud.com/hpn-type")) == sel.get("value", "rdma"),
          "the pod opts in as the conflist's podSelector wants")
sys.exit(1 if fails else 0)
