#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Kubernetes manifests under conf/k8s/, checked offline.

kubectl validates a manifest only against a server's OpenAPI document (even
`create --dry-run=client` asks the server's discovery first), and no API
server is available here. So this checks what it can without one, and says
so:
  - every document parses as YAML (python3-yaml) and is an object of a kind
    this project ships, with its apiVersion, a metadata.name of Kubernetes'
    name syntax, and only fields the API reference lists for that kind at each
    level these manifests use (a field the API does not have is refused, as
    `kubectl --validate=strict` would; the field lists below are written from
    the API reference, for these kinds only);
  - the Deployment is the seed's shape for conf/20-hpn-rdma-gpu.conflist: its
    pod template has the label podSelector.label names, with
    podSelector.value, and the GPU model label, and no annotation repeating
    them; its selector's labels are in the template; a container asks for
    the conflist's GPU resource as an integer; it mounts its own hints file
    (hostPath = nccl.dir, subPathExpr $(POD_UID)/nccl.conf at /etc/nccl.conf,
    POD_UID from metadata.uid);
  - the RBAC gives the plugin's ServiceAccount get on pods and nothing else,
    bound cluster-wide to a ServiceAccount defined in the same file;
  - the agent's DaemonSet holds together with the agent and the conflist it
    names (host network; the kubelet's device-plugins and pod-resources, the
    lookup socket's directory and the journals mounted at their host paths; a
    pool; not privileged), and the Deployment asking for its resource does so
    beside nvidia.com/gpu, requests equal to limits, unprivileged.
Prints one "ok:" or "FAIL:" line per check and "N passed, N failed" last;
exits 1 when any failed.
usage: k8s-manifests.py CONF_DIR
"""
import json
import os
import re
import sys

import yaml

NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")

# kind -> (apiVersion, allowed top-level keys)
KINDS = {
    "Deployment": ("apps/v1", {"apiVersion", "kind", "metadata", "spec"}),
    "DaemonSet": ("apps/v1", {"apiVersion", "kind", "metadata", "spec"}),
    "ServiceAccount": ("v1", {"apiVersion", "kind", "metadata", "automountServiceAccountToken",
                              "imagePullSecrets", "secrets"}),
    "ClusterRole": ("rbac.authorization.k8s.io/v1", {"apiVersion", "kind", "metadata", "rules",
                                                      "aggregationRule"}),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", {"apiVersion", "kind", "metadata",
                                                             "roleRef", "subjects"}),
    "NetworkAttachmentDefinition": ("k8s.cni.cncf.io/v1", {"apiVersion", "kind", "metadata",
                                                            "spec"}),
}
# Field names by path (from the API reference: ObjectMeta, DeploymentSpec,
# PodTemplateSpec, PodSpec, Container, EnvVar, ResourceRequirements,
# VolumeMount, Volume, PolicyRule, RoleRef, Subject), for the paths used here.
FIELDS = {
    "metadata": {"name", "namespace", "labels", "annotations"},
    "Deployment.spec": {"replicas", "selector", "template", "strategy", "minReadySeconds",
                        "revisionHistoryLimit", "progressDeadlineSeconds", "paused"},
    "DaemonSet.spec": {"selector", "template", "updateStrategy", "minReadySeconds",
                       "revisionHistoryLimit"},
    "selector": {"matchLabels", "matchExpressions"},
    "template": {"metadata", "spec"},
    "pod": {"containers", "initContainers", "volumes", "nodeSelector", "tolerations",
            "affinity", "serviceAccountName", "restartPolicy", "hostNetwork", "dnsPolicy",
            "terminationGracePeriodSeconds", "securityContext", "priorityClassName"},
    "container": {"name", "image", "command", "args", "env", "envFrom", "resources",
                  "volumeMounts", "ports", "workingDir", "securityContext", "imagePullPolicy"},
    "env": {"name", "value", "valueFrom"},
    "valueFrom": {"fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef"},
    "fieldRef": {"fieldPath", "apiVersion"},
    "resources": {"limits", "requests", "claims"},
    "volumeMount": {"name", "mountPath", "subPath", "subPathExpr", "readOnly",
                    "mountPropagation", "recursiveReadOnly"},
    "volume": {"name", "hostPath", "emptyDir", "configMap", "secret", "persistentVolumeClaim",
               "projected"},
    "hostPath": {"path", "type"},
    "emptyDir": {"medium", "sizeLimit"},
    "rule": {"apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"},
    "roleRef": {"apiGroup", "kind", "name"},
    "subject": {"kind", "name", "namespace", "apiGroup"},
    "NetworkAttachmentDefinition.spec": {"config"},
}

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok: {what}")
    else:
        failed += 1
        print(f"FAIL: {what}")
    return ok


def fields(obj, allowed, where):
    """obj is a mapping with only the allowed keys."""
    if not isinstance(obj, dict):
        return check(False, f"{where} is an object")
    extra = sorted(set(obj) - FIELDS.get(allowed, set()) if isinstance(allowed, str)
                   else set(obj) - allowed)
    return check(not extra, f"{where}: only fields the API has" +
                 (f" (not: {', '.join(extra)})" if extra else ""))


def labels_ok(m, where):
    return check(isinstance(m, dict) and all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in m.items()),
                 f"{where}: string keys and values (quoted \"rdma\", not rdma: true)")


def pod_template(doc, where):
    spec = doc.get("spec", {})
    fields(spec, f"{doc['kind']}.spec", f"{where}.spec")
    fields(spec.get("selector"), "selector", f"{where}.spec.selector")
    tmpl = spec.get("template", {})
    fields(tmpl, "template", f"{where}.spec.template")
    meta = tmpl.get("metadata", {})
    fields(meta, "metadata", f"{where}.spec.template.metadata")
    labels_ok(meta.get("labels", {}), f"{where}.spec.template.metadata.labels")
    match = spec.get("selector", {}).get("matchLabels", {})
    check(match and all(meta.get("labels", {}).get(k) == v for k, v in match.items()),
          f"{where}: spec.selector.matchLabels are labels of the template")
    pod = tmpl.get("spec", {})
    fields(pod, "pod", f"{where}.spec.template.spec")
    for i, c in enumerate(pod.get("containers", [])):
        cw = f"{where}.spec.template.spec.containers[{i}]"
        fields(c, "container", cw)
        for j, e in enumerate(c.get("env", [])):
            fields(e, "env", f"{cw}.env[{j}]")
            if "valueFrom" in e:
                fields(e["valueFrom"], "valueFrom", f"{cw}.env[{j}].valueFrom")
                if "fieldRef" in e["valueFrom"]:
                    fields(e["valueFrom"]["fieldRef"], "fieldRef", f"{cw}.env[{j}].fieldRef")
        fields(c.get("resources", {}), "resources", f"{cw}.resources")
        for j, v in enumerate(c.get("volumeMounts", [])):
            fields(v, "volumeMount", f"{cw}.volumeMounts[{j}]")
    for i, v in enumerate(pod.get("volumes", [])):
        vw = f"{where}.spec.template.spec.volumes[{i}]"
        fields(v, "volume", vw)
        for k in ("hostPath", "emptyDir"):
            if k in v:
                fields(v[k], k, f"{vw}.{k}")
    return meta, pod


def seed_deployment(doc, where, plugin):
    """The seed's pod template, as conf/20-hpn-rdma-gpu.conflist selects and hints it."""
    meta, pod = pod_template(doc, where)
    sel = plugin.get("podSelector", {})
    key, value = sel.get("label"), sel.get("value", "rdma")
    model = plugin.get("nccl", {}).get("gpuModelLabel", "alibabacloud.com/gpu-model-series")
    resource = plugin.get("kubernetes", {}).get("gpuResource", "nvidia.com/gpu")
    labels, annos = meta.get("labels", {}), meta.get("annotations", {})
    check(key and labels.get(key) == value, f"{where}: the template has the label {key}: \"{value}\"")
    check(labels.get(model), f"{where}: the template names the GPU model with the label {model}")
    check(key not in annos and model not in annos,
          f"{where}: no annotation repeats the labels (the seed's own shape)")
    gpus = [c.get("resources", {}).get("limits", {}).get(resource) for c in pod.get("containers", [])]
    check(any(isinstance(g, int) and g > 0 for g in gpus),
          f"{where}: a container asks for {resource} (limits, an integer)")
    hints = plugin.get("nccl", {}).get("dir", "/run/hpn-rdma/pods")
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = [(c, m) for c in pod.get("containers", []) for m in c.get("volumeMounts", [])
              if m.get("mountPath") == "/etc/nccl.conf"]
    check(mounts and all(vols.get(m["name"], {}).get("hostPath", {}).get("path") == hints and
                         m.get("subPathExpr") == "$(POD_UID)/nccl.conf" and
                         any(e.get("name") == "POD_UID" and
                             e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") ==
                             "metadata.uid" for e in c.get("env", []))
                         for c, m in mounts),
          f"{where}: mounts {hints}/$(POD_UID)/nccl.conf at /etc/nccl.conf")


def conflist(conf, name):
    with open(os.path.join(conf, name)) as f:
        return next(p for p in json.load(f)["plugins"] if p["type"] == "hpn-rdma")


def agent_daemonset(doc, where, conf):
    """hpn-rdma-agent's DaemonSet holds together with the agent and the conflist it names."""
    _, pod = pod_template(doc, where)
    check(pod.get("hostNetwork") is True, f"{where}: hostNetwork (the pool's NICs are the host's)")
    (ctr,) = pod["containers"]
    sc = ctr.get("securityContext", {})
    check(sc.get("privileged") is False and sc.get("runAsUser") == 0,
          f"{where}: the agent runs as root, not privileged")
    args = dict(a.split("=", 1) for a in ctr["args"])
    kdir = args.get("--kubelet-dir", "/var/lib/kubelet")
    vols = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: vols[m["name"]]["hostPath"]["path"] for m in ctr["volumeMounts"]}
    for path in (kdir + "/device-plugins", kdir + "/pod-resources", "/run/hpn-rdma",
                 "/var/lib/cni/hpn-rdma"):
        check(mounts.get(path) == path, f"{where}: {path} is mounted from the host at that path")
    conf_path = args["--config"]
    check(os.path.dirname(conf_path) in mounts,
          f"{where}: --config {conf_path} is under a mounted directory")
    entry = conflist(conf, os.path.basename(conf_path))
    check("match" in entry, f"{where}: {os.path.basename(conf_path)} selects a pool (match)")
    sock = entry.get("agent", {}).get("socket", "/run/hpn-rdma/agent.sock")
    check(os.path.dirname(sock) in mounts,
          f"{where}: agent.socket {sock} is in a directory shared with the host")
    check(entry.get("stateDir", "/var/lib/cni/hpn-rdma") in mounts,
          f"{where}: the journals' stateDir is mounted")
    # GC (on unless --cri-socket=none or --gc-interval=0) undoes attachments as DEL would.
    if args.get("--cri-socket") != "none" and args.get("--gc-interval") != "0":
        cri = args.get("--cri-socket", "/run/containerd/containerd.sock")
        check(mounts.get(cri) == cri, f"{where}: GC's CRI socket {cri} is mounted from the host")
        caps = set(sc.get("capabilities", {}).get("add", []))
        check({"NET_ADMIN", "SYS_ADMIN"} <= caps,
              f"{where}: GC has CAP_NET_ADMIN and CAP_SYS_ADMIN (it has {sorted(caps)})")
        for path in args.get("--cni-path", "/opt/cni/bin").split(":") + ["/var/run/netns"]:
            check(mounts.get(path) == path, f"{where}: {path} (GC) is mounted from the host")
        netns = [m for m in ctr["volumeMounts"] if m["mountPath"] == "/var/run/netns"]
        check(bool(netns) and netns[0].get("mountPropagation") == "HostToContainer",
              f"{where}: pods' netns mounts made after the agent starts reach it")
    addr = args.get("--metrics-address", "127.0.0.1:9467")
    if addr != "none":
        port = int(addr.rsplit(":", 1)[1])
        check(any(p.get("containerPort") == port for p in ctr.get("ports", [])),
              f"{where}: the metrics port {port} is declared")
    return args.get("--resource", "rdma/hpn"), entry


def rdma_deployment(doc, where, resource, entry):
    """A workload that asks for the agent's resource beside its GPUs."""
    meta, pod = pod_template(doc, where)
    res = pod["containers"][0].get("resources", {})
    lim, req = res.get("limits", {}), res.get("requests", {})
    check(int(lim.get(resource, 0)) > 0 and "nvidia.com/gpu" in lim,
          f"{where}: asks for {resource} beside nvidia.com/gpu")
    check(lim == req, f"{where}: requests equal limits (Guaranteed QoS, for single-numa-node)")
    check(not any(c.get("securityContext", {}).get("privileged") for c in pod["containers"]),
          f"{where}: no privileged container (the devices come from Allocate)")
    sel = entry.get("podSelector")
    if sel:
        ann = meta.get("annotations", {})
        check(ann.get(sel.get("annotation", "alibabacloud.com/hpn-type")) ==
              sel.get("value", "rdma"), f"{where}: the pod opts in as the conflist's podSelector wants")


def rbac(docs, where):
    sas = {(d["metadata"]["name"], d["metadata"].get("namespace"))
           for d in docs if d.get("kind") == "ServiceAccount"}
    roles = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ClusterRole"}
    for name, r in roles.items():
        for i, rule in enumerate(r.get("rules", [])):
            fields(rule, "rule", f"{where}: ClusterRole {name} rules[{i}]")
        check(r.get("rules") == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
              f"{where}: ClusterRole {name} allows get on pods and nothing else")
    for d in docs:
        if d.get("kind") != "ClusterRoleBinding":
            continue
        n = d["metadata"]["name"]
        ref = d.get("roleRef", {})
        fields(ref, "roleRef", f"{where}: ClusterRoleBinding {n} roleRef")
        check(ref.get("apiGroup") == "rbac.authorization.k8s.io" and ref.get("kind") ==
              "ClusterRole" and ref.get("name") in roles,
              f"{where}: ClusterRoleBinding {n} binds a ClusterRole of this file")
        subs = d.get("subjects", [])
        for i, s in enumerate(subs):
            fields(s, "subject", f"{where}: ClusterRoleBinding {n} subjects[{i}]")
        check(subs and all(s.get("kind") == "ServiceAccount" and
                           (s.get("name"), s.get("namespace")) in sas for s in subs),
              f"{where}: ClusterRoleBinding {n} binds the ServiceAccount of this file")
    return bool(sas)


def main():
    conf = sys.argv[1]
    plugin = conflist(conf, "20-hpn-rdma-gpu.conflist")
    k8s = os.path.join(conf, "k8s")
    agent = None
    seen_rbac = seen_seed = False
    for name in sorted(os.listdir(k8s)):
        if not name.endswith(".yaml"):
            continue
        where = f"k8s/{name}"
        try:
            with open(os.path.join(k8s, name)) as f:
                docs = [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            check(False, f"{where} is YAML: {e}")
            continue
        check(docs, f"{where} is YAML with at least one object")
        for i, d in enumerate(docs):
            dw = f"{where}[{i}]"
            if not check(isinstance(d, dict) and d.get("kind") in KINDS,
                         f"{dw} is an object of a kind shipped here ({', '.join(KINDS)})"):
                continue
            api, top = KINDS[d["kind"]]
            check(d.get("apiVersion") == api, f"{dw}: {d['kind']} is apiVersion {api}")
            fields(d, top, f"{dw} ({d['kind']})")
            meta = d.get("metadata", {})
            fields(meta, "metadata", f"{dw}.metadata")
            check(isinstance(meta.get("name"), str) and NAME.match(meta["name"]) and
                  len(meta["name"]) <= 253, f"{dw}: metadata.name is a Kubernetes name")
            if "labels" in meta:
                labels_ok(meta["labels"], f"{dw}.metadata.labels")
            if d["kind"] == "NetworkAttachmentDefinition":
                fields(d.get("spec"), "NetworkAttachmentDefinition.spec", f"{dw}.spec")
            if d["kind"] == "Deployment" and name == "dep-demo-hpn-gpu.yaml":
                seed_deployment(d, dw, plugin)
                seen_seed = True
            elif d["kind"] == "DaemonSet" and name == "hpn-rdma-agent.yaml":
                agent = agent_daemonset(d, dw, conf)
            elif d["kind"] in ("Deployment", "DaemonSet"):
                pod_template(d, dw)
        if any(d.get("kind") == "ClusterRoleBinding" for d in docs if isinstance(d, dict)):
            seen_rbac = rbac(docs, where)
    check(seen_seed, "k8s/dep-demo-hpn-gpu.yaml holds the seed's Deployment")
    check(agent, "k8s/hpn-rdma-agent.yaml holds the agent's DaemonSet")
    if agent:
        with open(os.path.join(k8s, "dep-rdma-gpu.yaml")) as f:
            (dep,) = [d for d in yaml.safe_load_all(f) if d]
        rdma_deployment(dep, "k8s/dep-rdma-gpu.yaml[0]", *agent)
    check(seen_rbac, "conf/k8s/ holds the plugin's RBAC (ServiceAccount, ClusterRole, binding)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
