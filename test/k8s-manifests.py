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
  - the Deployment is the managed service's own, exactly, for
    conf/20-hpn-rdma-gpu.conflist: its pod template has the label
    podSelector.label names, with podSelector.value, and the GPU model label,
    and no annotation repeating them; its selector's labels are in the
    template; a container asks for the conflist's GPU resource as an integer
    limit, and no container for any other resource (limits, requests, claims);
    nothing of hpn-rdma's is in it, since the agent's NRI plugin gives each
    container its hints, devices and memlock: no volume, no volumeMount, no
    POD_UID (no env from metadata.uid), no privileged container or added
    capability, no NCCL_IB_* variable (it would win over the hints); and
    hpn-rdma.yaml's agent runs --nri with the socket's directory mounted. Its
    variant dep-demo-hpn-gpu-conffile.yaml (nccl.confFile) is the same, its
    container's NCCL_CONF_FILE a usable nccl.confFile other than
    /etc/nccl.conf, which nothing in the pod mounts (NRI mounts it there).
    Broken copies of both (a volume, a volumeMount, POD_UID, a capability, a
    privileged container, a CPU limit, a memory request, a claim, an
    NCCL_IB_* variable, no GPU; the variant's file mounted by the pod, no
    NCCL_CONF_FILE) must each fail the check that names what broke;
  - the RBAC gives the plugin's ServiceAccount get, list and watch on pods
    (the plugin's lookup, the agent's cache of its node's pods) and nothing else,
    bound cluster-wide to a ServiceAccount defined in the same file;
  - hpn-rdma.yaml, the one manifest a cluster operator applies, holds
    together: every namespaced object in its Namespace; its ConfigMap's
    conflist is conf/<key> itself (one source of truth; conf-examples.sh
    validates it with the plugin like every example); the DaemonSet's init
    container runs the image's installer with that ConfigMap key, and writes
    where the runtime and the plugin read: the CNI bin and conf dirs and the
    bundle root scripts/image.sh bakes in, each a hostPath mounted at its own
    path, the kubeconfig at the conflist's kubernetes.kubeconfig; its agent
    container reads the same key, keeps that kubeconfig (mounted writable),
    and has the kubelet's device-plugins and pod-resources, the lookup
    socket's directory and the journals mounted at their host paths; the pod
    runs as the file's ServiceAccount, in the host network, not privileged,
    on GPU nodes (affinity or nodeSelector) with tolerations, rolling update;
    the image is the one the build makes (CMakeLists.txt's version);
    the agent's metrics (their labels name pods: issue 40) are on loopback,
    and what listens on the node's IP is kube-rbac-proxy at a pinned version:
    HTTPS at [$(HOST_IP)]:PORT (status.hostIP, bracketed for IPv6), only
    /metrics, no plain listener nor unauthorized path, upstream the agent's
    loopback address, its ServiceAccount allowed TokenReviews and
    SubjectAccessReviews, a ClusterRole for scrapers to get /metrics; six
    broken copies (the agent on the node's IP as before, ...) must fail;
  - hpn-rdma-uninstall.yaml's DaemonSet removes exactly what the installer
    wrote (the same flags, mounts and image; its readiness probe is
    uninstall --check with the same flags), the NetworkAttachmentDefinition
    names the agent's resource, and the Deployment asking for that resource
    does so beside nvidia.com/gpu, requests equal to limits, unprivileged.
  - the DRA manifests (resource.k8s.io/v1, doc/dra.md): the DeviceClass
    named for hpn-rdma's driver (HPN_DRA_DRIVER of agent/dra/model/draslice.h) selects
    exactly that driver's whole NICs by CEL (its devices without the attribute
    HPN_DRA_SHARE_ATTR of drashare.h), the class hpn-rdma-shared.<domain> the
    shared devices (with it); the template hpn-rdma-share asks for one device
    of the shared class and one share of it (capacity.requests, the capacity
    HPN_DRA_SHARE_CAPACITY, "1"), with no constraint; ten broken copies
    (a class selecting both kinds, a class gone, two shares, a misnamed
    capacity, a field the API lacks, ...) must each fail; dra-claims.yaml's
    ResourceClaimTemplates hpn-gpuN-rdmaN (N = 1, 2, 4, 8) each ask for N
    GPUs of gpu.nvidia.com and N NICs of that class, one device per
    `exactly` request, and pair them with N matchAttribute constraints on
    resource.kubernetes.io/pcieRoot, each of one GPU and one NIC request,
    every request in one pair (the API's limits of 32 requests and 32
    constraints kept); the example Pod names one of those templates and its
    container the Pod's claim. No DRA object is in hpn-rdma.yaml: the CNI
    install must not need the DRA API.
  - the DRA driver's install (hpn-rdma-dra.yaml, hpn-rdma-dra-patch.json):
    hpn-rdma.yaml runs the agent without --dra; the JSON patch, applied to
    its DaemonSet as kubectl patch --type json would, turns it on, and the
    patched agent has <kubelet-dir>/plugins_registry, plugins/<driver> and
    the CDI dir mounted writable at their host paths and NODE_NAME from
    spec.nodeName; the ClusterRoles bound to the agent's ServiceAccount cover
    every request the driver makes (DRA_NEEDS, Kubernetes 1.36's
    resourceclaims/driver associated-node verbs for this driver alone) and
    the DRA role nothing more; the ValidatingAdmissionPolicy matches
    ResourceSlice CREATE/UPDATE/DELETE by that account alone, reads
    authentication.kubernetes.io/node-name and compares object's and
    oldObject's spec.nodeName (CEL is not compiled here: no CEL library; its
    brackets and quotes are checked), and its binding denies. Fourteen
    broken copies of these (a mount, a verb, NODE_NAME, --dra, the policy's
    account, ...) must each fail those checks: the checks can fail.
Prints one "ok:" or "FAIL:" line per check and "N passed, N failed" last;
exits 1 when any failed.
usage: k8s-manifests.py CONF_DIR
"""
import copy
import ipaddress
import json
import os
import re
import sys

import yaml

NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
# nccl.confFile's characters (lib/nccl.c, hpn_nccl_valid_conf_file); . and .. are checked apart.
CONF_FILE = re.compile(r"^/[A-Za-z0-9._/-]*[^/]$")
# lib/conf.h: HPN_DEFAULT_STATE_DIR, and HPN_OLD_STATE_DIR it adopts at the first run.
STATE_DIR = "/run/hpn-rdma/state"
OLD_STATE_DIR = "/var/lib/cni/hpn-rdma"

# kind -> (apiVersion, allowed top-level keys)
KINDS = {
    "Namespace": ("v1", {"apiVersion", "kind", "metadata", "spec"}),
    "ConfigMap": ("v1", {"apiVersion", "kind", "metadata", "data", "binaryData", "immutable"}),
    "Deployment": ("apps/v1", {"apiVersion", "kind", "metadata", "spec"}),
    "DaemonSet": ("apps/v1", {"apiVersion", "kind", "metadata", "spec"}),
    "ServiceAccount": ("v1", {"apiVersion", "kind", "metadata", "automountServiceAccountToken",
                              "imagePullSecrets", "secrets"}),
    "ClusterRole": ("rbac.authorization.k8s.io/v1", {"apiVersion", "kind", "metadata", "rules",
                                                      "aggregationRule"}),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", {"apiVersion", "kind", "metadata",
                                                             "roleRef", "subjects"}),
    "Role": ("rbac.authorization.k8s.io/v1", {"apiVersion", "kind", "metadata", "rules"}),
    "RoleBinding": ("rbac.authorization.k8s.io/v1", {"apiVersion", "kind", "metadata", "roleRef",
                                                      "subjects"}),
    "NetworkAttachmentDefinition": ("k8s.cni.cncf.io/v1", {"apiVersion", "kind", "metadata",
                                                            "spec"}),
    "Pod": ("v1", {"apiVersion", "kind", "metadata", "spec"}),
    "DeviceClass": ("resource.k8s.io/v1", {"apiVersion", "kind", "metadata", "spec"}),
    "ResourceClaimTemplate": ("resource.k8s.io/v1", {"apiVersion", "kind", "metadata", "spec"}),
    "ValidatingAdmissionPolicy": ("admissionregistration.k8s.io/v1",
                                  {"apiVersion", "kind", "metadata", "spec"}),
    "ValidatingAdmissionPolicyBinding": ("admissionregistration.k8s.io/v1",
                                         {"apiVersion", "kind", "metadata", "spec"}),
}
# Field names by path (from the API reference: ObjectMeta, DeploymentSpec,
# DaemonSetSpec, DaemonSetUpdateStrategy, PodTemplateSpec, PodSpec, Affinity,
# NodeAffinity, NodeSelector(Term, Requirement), Toleration, Container,
# SecurityContext, Capabilities, Probe, ExecAction, EnvVar,
# ResourceRequirements, VolumeMount, Volume, ConfigMapVolumeSource,
# PolicyRule, RoleRef, Subject), for the paths used here.
FIELDS = {
    "metadata": {"name", "namespace", "labels", "annotations"},
    "Deployment.spec": {"replicas", "selector", "template", "strategy", "minReadySeconds",
                        "revisionHistoryLimit", "progressDeadlineSeconds", "paused"},
    "DaemonSet.spec": {"selector", "template", "updateStrategy", "minReadySeconds",
                       "revisionHistoryLimit"},
    "updateStrategy": {"type", "rollingUpdate"},
    "rollingUpdate": {"maxUnavailable", "maxSurge"},
    "affinity": {"nodeAffinity", "podAffinity", "podAntiAffinity"},
    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution",
                     "preferredDuringSchedulingIgnoredDuringExecution"},
    "nodeSelector": {"nodeSelectorTerms"},
    "nodeSelectorTerm": {"matchExpressions", "matchFields"},
    "nodeSelectorRequirement": {"key", "operator", "values"},
    "toleration": {"key", "operator", "value", "effect", "tolerationSeconds"},
    "securityContext": {"runAsUser", "runAsGroup", "runAsNonRoot", "privileged",
                        "allowPrivilegeEscalation", "readOnlyRootFilesystem", "capabilities",
                        "seLinuxOptions", "seccompProfile", "procMount"},
    "capabilities": {"add", "drop"},
    "probe": {"exec", "httpGet", "tcpSocket", "grpc", "initialDelaySeconds", "periodSeconds",
              "timeoutSeconds", "successThreshold", "failureThreshold",
              "terminationGracePeriodSeconds"},
    "exec": {"command"},
    "configMap": {"name", "items", "defaultMode", "optional"},
    "selector": {"matchLabels", "matchExpressions"},
    "template": {"metadata", "spec"},
    "pod": {"containers", "initContainers", "volumes", "nodeSelector", "tolerations",
            "affinity", "serviceAccountName", "restartPolicy", "hostNetwork", "dnsPolicy",
            "terminationGracePeriodSeconds", "securityContext", "priorityClassName",
            "automountServiceAccountToken", "resourceClaims"},
    "container": {"name", "image", "command", "args", "env", "envFrom", "resources",
                  "volumeMounts", "ports", "workingDir", "securityContext", "imagePullPolicy",
                  "readinessProbe", "livenessProbe", "startupProbe"},
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
    # resource.k8s.io/v1 (DeviceClassSpec, DeviceSelector, CELDeviceSelector,
    # ResourceClaimTemplateSpec, ResourceClaimSpec, DeviceClaim, DeviceRequest,
    # ExactDeviceRequest, DeviceConstraint) and core/v1's PodResourceClaim and
    # ResourceClaim (a container's resources.claims entry).
    "DeviceClass.spec": {"selectors", "config", "extendedResourceName"},
    "deviceSelector": {"cel"},
    "cel": {"expression"},
    # admissionregistration.k8s.io/v1: ValidatingAdmissionPolicySpec,
    # MatchResources, NamedRuleWithOperations, MatchCondition, Variable,
    # Validation, ValidatingAdmissionPolicyBindingSpec.
    "ValidatingAdmissionPolicy.spec": {"paramKind", "matchConstraints", "validations",
                                       "failurePolicy", "auditAnnotations", "matchConditions",
                                       "variables"},
    "matchResources": {"namespaceSelector", "objectSelector", "resourceRules",
                       "excludeResourceRules", "matchPolicy"},
    "resourceRule": {"apiGroups", "apiVersions", "operations", "resources", "resourceNames",
                     "scope"},
    "matchCondition": {"name", "expression"},
    "variable": {"name", "expression"},
    "validation": {"expression", "message", "reason", "messageExpression"},
    "ValidatingAdmissionPolicyBinding.spec": {"policyName", "paramRef", "matchResources",
                                              "validationActions"},
    "ResourceClaimTemplate.spec": {"metadata", "spec"},
    "claimSpec": {"devices"},
    "deviceClaim": {"requests", "constraints", "config"},
    "deviceRequest": {"name", "exactly", "firstAvailable"},
    "exactly": {"deviceClassName", "selectors", "allocationMode", "count", "adminAccess",
                "tolerations", "capacity"},
    # CapacityRequirements (KEP-5075): the capacity a request takes of a device.
    "capacityRequirements": {"requests"},
    "subRequest": {"name", "deviceClassName", "selectors", "allocationMode", "count",
                   "tolerations", "capacity"},
    "constraint": {"requests", "matchAttribute", "distinctAttribute"},
    "podResourceClaim": {"name", "resourceClaimName", "resourceClaimTemplateName"},
    "containerClaim": {"name", "request"},
}
# The metrics proxy's own rules (its TokenReviews and SubjectAccessReviews), and the
# scrapers' (get /metrics, which kube-rbac-proxy asks a SubjectAccessReview about).
METRICS_AUTH_RULES = [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
                       "verbs": ["create"]},
                      {"apiGroups": ["authorization.k8s.io"],
                       "resources": ["subjectaccessreviews"], "verbs": ["create"]}]
METRICS_READER_RULES = [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
# The plugin's own ServiceAccount (agent/install/sakubeconfig.h KC_PLUGIN_SA): its token is
# the one on the host, so it may get pods and nothing else; the agent may create a token
# for it and for no other ServiceAccount (issue 40, finding 8).
PLUGIN_SA = "hpn-rdma-plugin"
PLUGIN_RULES = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
PLUGIN_TOKEN_RULES = [{"apiGroups": [""], "resources": ["serviceaccounts/token"],
                       "resourceNames": [PLUGIN_SA], "verbs": ["create"]}]
METRICS_PROXY_IMAGE = re.compile(r"^quay\.io/brancz/kube-rbac-proxy(:v\d+\.\d+\.\d+)?"
                                 r"(@sha256:[0-9a-f]{64})?$")
DRA_GPU_CLASS = "gpu.nvidia.com"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
NUMA_NODE = "resource.kubernetes.io/numaNode"
LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

passed = failed = 0
quiet = False  # refused(): a broken copy is checked without printing
quiet_fails = []  # what failed while quiet


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        if not quiet:
            print(f"ok: {what}")
    else:
        failed += 1
        if not quiet:
            print(f"FAIL: {what}")
        else:
            quiet_fails.append(what)
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
    if "updateStrategy" in spec:
        fields(spec["updateStrategy"], "updateStrategy", f"{where}.spec.updateStrategy")
        if "rollingUpdate" in spec["updateStrategy"]:
            fields(spec["updateStrategy"]["rollingUpdate"], "rollingUpdate",
                   f"{where}.spec.updateStrategy.rollingUpdate")
    aff = pod.get("affinity")
    if aff is not None:
        pw = f"{where}.spec.template.spec.affinity"
        fields(aff, "affinity", pw)
        na = aff.get("nodeAffinity", {})
        fields(na, "nodeAffinity", f"{pw}.nodeAffinity")
        req = na.get("requiredDuringSchedulingIgnoredDuringExecution", {})
        fields(req, "nodeSelector", f"{pw}.nodeAffinity.required...")
        for i, t in enumerate(req.get("nodeSelectorTerms", [])):
            fields(t, "nodeSelectorTerm", f"{pw}...nodeSelectorTerms[{i}]")
            for j, e in enumerate(t.get("matchExpressions", [])):
                fields(e, "nodeSelectorRequirement", f"{pw}...nodeSelectorTerms[{i}][{j}]")
                check(e.get("operator") in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
                      and (("values" in e) == (e.get("operator") in ("In", "NotIn", "Gt", "Lt"))),
                      f"{pw}...nodeSelectorTerms[{i}][{j}]: an operator with values as it needs")
    for i, t in enumerate(pod.get("tolerations", [])):
        fields(t, "toleration", f"{where}.spec.template.spec.tolerations[{i}]")
    ctrs = [(f"containers[{i}]", c) for i, c in enumerate(pod.get("containers", []))]
    ctrs += [(f"initContainers[{i}]", c) for i, c in enumerate(pod.get("initContainers", []))]
    for name, c in ctrs:
        cw = f"{where}.spec.template.spec.{name}"
        fields(c, "container", cw)
        if "securityContext" in c:
            fields(c["securityContext"], "securityContext", f"{cw}.securityContext")
            if "capabilities" in c["securityContext"]:
                fields(c["securityContext"]["capabilities"], "capabilities",
                       f"{cw}.securityContext.capabilities")
        for pk in ("readinessProbe", "livenessProbe", "startupProbe"):
            if pk in c:
                fields(c[pk], "probe", f"{cw}.{pk}")
                if "exec" in c[pk]:
                    fields(c[pk]["exec"], "exec", f"{cw}.{pk}.exec")
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
        for k in ("hostPath", "emptyDir", "configMap"):
            if k in v:
                fields(v[k], k, f"{vw}.{k}")
    return meta, pod


def seed_deployment(doc, where, plugin, at="/etc/nccl.conf"):
    """The managed service's pod template, as conf/20-hpn-rdma-gpu.conflist selects and hints
    it, with nothing of hpn-rdma's in it: the agent's NRI plugin mounts the hints at `at` (the
    conflist's nccl.confFile), adds the devices and raises RLIMIT_MEMLOCK."""
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
    ctrs = pod.get("containers", []) + pod.get("initContainers", [])
    gpus = [c.get("resources", {}).get("limits", {}).get(resource) for c in ctrs]
    check(any(isinstance(g, int) and not isinstance(g, bool) and g > 0 for g in gpus),
          f"{where}: a container asks for {resource} (limits, an integer)")
    other = sorted({f"{c.get('name')}: {kind} {r}" for c in ctrs
                    for kind in ("limits", "requests")
                    for r in c.get("resources", {}).get(kind, {}) if r != resource} |
                   {f"{c.get('name')}: claims" for c in ctrs
                    if c.get("resources", {}).get("claims")} |
                   ({"the pod: resourceClaims"} if pod.get("resourceClaims") else set()))
    check(not other, f"{where}: no container asks for any resource but {resource}" +
          (f" (asked: {', '.join(other)})" if other else ""))
    # NRI gives the containers what the old hostPath + subPathExpr mount did.
    vols = [v.get("name") for v in pod.get("volumes", [])]
    check(not vols, f"{where}: no volume (NRI mounts the hints)" +
          (f" (has: {', '.join(map(str, vols))})" if vols else ""))
    mounts = [f"{c.get('name')}: {m.get('mountPath')}" for c in ctrs
              for m in c.get("volumeMounts", [])]
    check(not mounts, f"{where}: no volumeMount (NRI mounts the hints)" +
          (f" (has: {', '.join(mounts)})" if mounts else ""))
    uid = [f"{c.get('name')}: {e.get('name')}" for c in ctrs for e in c.get("env", [])
           if e.get("name") == "POD_UID" or
           e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.uid"]
    check(not uid, f"{where}: no POD_UID, no env from metadata.uid (no subPathExpr to feed)" +
          (f" (has: {', '.join(uid)})" if uid else ""))
    priv = [f"{c.get('name')}: " + ("privileged" if sc.get("privileged") else
                                   f"adds {sc['capabilities']['add']}")
            for c in ctrs for sc in [c.get("securityContext") or {}]
            if sc.get("privileged") or (sc.get("capabilities") or {}).get("add")]
    check(not priv, f"{where}: no privileged container, no added capability (NRI adds the "
          "devices)" + (f" (has: {', '.join(priv)})" if priv else ""))
    ib = [f"{c.get('name')}: {e.get('name')}" for c in ctrs for e in c.get("env", [])
          if str(e.get("name", "")).startswith("NCCL_IB_")]
    check(not ib, f"{where}: no NCCL_IB_* variable (the environment wins over the hints)" +
          (f" (has: {', '.join(ib)})" if ib else ""))
    if at != "/etc/nccl.conf":
        names = [c.get("name") for c in ctrs
                 if any(e.get("name") == "NCCL_CONF_FILE" and e.get("value") == at
                        for e in c.get("env", []))]
        check(names, f"{where}: a container's NCCL_CONF_FILE names {at}")
        mine = [c.get("name") for c in ctrs for m in c.get("volumeMounts", [])
                if m.get("mountPath") == at]
        check(not mine, f"{where}: nothing in the pod mounts {at} (NRI mounts the hints "
              "there)" + (f" (mounted by: {', '.join(map(str, mine))})" if mine else ""))


def selection_policy(docs, plugin):
    """hpn-rdma-selection-policy.yaml: who may opt a pod in by label or annotation. Its
    policy refuses pods (CREATE, UPDATE) carrying the conflist's podSelector key and value,
    as a label or an annotation, and its binding applies it (Deny) to every namespace not
    labelled hpn-rdma.alibabacloud.com/rdma-pods=allowed."""
    where = "k8s/hpn-rdma-selection-policy.yaml"
    sel = plugin.get("podSelector", {})
    pol = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
    bind = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    if not check(len(pol) == 1 and len(bind) == 1,
                 f"{where}: one ValidatingAdmissionPolicy and its binding"):
        return
    spec = pol[0].get("spec", {})
    var = {v.get("name"): v.get("expression") for v in spec.get("variables", [])}
    check(var.get("key") == f"'{sel.get('label')}'" and sel.get("label") == sel.get("annotation")
          and var.get("value") == f"'{sel.get('value', 'rdma')}'",
          f"{where}: its key and value are the conflist's podSelector ({sel})")
    rules = spec.get("matchConstraints", {}).get("resourceRules", [])
    check(any(r.get("resources") == ["pods"] and set(r.get("operations", [])) ==
              {"CREATE", "UPDATE"} for r in rules), f"{where}: it judges pods at CREATE and UPDATE")
    exprs = " ".join(v.get("expression", "") for v in spec.get("validations", []))
    check("labels[?variables.key]" in exprs and "annotations[?variables.key]" in exprs,
          f"{where}: it refuses the key as a label and as an annotation")
    b = bind[0].get("spec", {})
    ns = b.get("matchResources", {}).get("namespaceSelector", {}).get("matchExpressions", [])
    check(b.get("policyName") == pol[0]["metadata"]["name"] and b.get("validationActions") ==
          ["Deny"] and ns == [{"key": "hpn-rdma.alibabacloud.com/rdma-pods",
                               "operator": "NotIn", "values": ["allowed"]}],
          f"{where}: the binding denies in every namespace not labelled "
          "hpn-rdma.alibabacloud.com/rdma-pods=allowed")


def conffile_deployment(doc, where, plugin):
    """The seed's Deployment with NCCL_CONF_FILE naming the nccl.confFile NRI mounts at."""
    pod = doc.get("spec", {}).get("template", {}).get("spec", {})
    paths = [e.get("value") for c in pod.get("containers", []) for e in c.get("env", [])
             if e.get("name") == "NCCL_CONF_FILE"]
    at = paths[0] if paths else None
    if check(isinstance(at, str) and CONF_FILE.match(at) and at != "/etc/nccl.conf" and
             "/./" not in at + "/" and "/../" not in at + "/",
             f"{where}: a container's NCCL_CONF_FILE is a usable nccl.confFile, "
             "not /etc/nccl.conf"):
        seed_deployment(doc, where, plugin, at)


def seed_refused(doc, where, plugin, variant, what, edit, says):
    """A broken copy of the seed's Deployment must fail the check that names what broke it
    (`says` in the failing check's words): the checks can fail, each for its own reason."""
    global passed, failed, quiet
    doc = copy.deepcopy(doc)
    edit(doc["spec"]["template"]["spec"])
    saved, quiet = (passed, failed), True
    del quiet_fails[:]
    try:
        (conffile_deployment if variant else seed_deployment)(doc, where, plugin)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError) as e:
        quiet_fails.append(f"{type(e).__name__}: {e}")
    named = [f.removeprefix(where + ": ") for f in quiet_fails if says in f]
    (passed, failed), quiet = saved, False
    check(named, f"{where}: a broken copy ({what}) is refused: " +
          ("; ".join(named) if named else
           f"no failing check says {says!r} (failed: {quiet_fails or 'none'})"))


def seed_broken_copies(doc, where, plugin, variant):
    def ctr(pod):
        return pod["containers"][0]

    def volume(pod):
        pod["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]

    def mount(pod):
        ctr(pod)["volumeMounts"] = [{"name": "x", "mountPath": "/data"}]

    def pod_uid(pod):
        ctr(pod).setdefault("env", []).append(
            {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}})

    def cap(pod):
        ctr(pod)["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}

    def privileged(pod):
        ctr(pod)["securityContext"] = {"privileged": True}

    def cpu(pod):
        ctr(pod)["resources"]["limits"]["cpu"] = "8"

    def memory(pod):
        ctr(pod)["resources"]["requests"] = {"memory": "64Gi"}

    def claim(pod):
        ctr(pod)["resources"]["claims"] = [{"name": "gpus"}]

    def ib(pod):
        ctr(pod).setdefault("env", []).append({"name": "NCCL_IB_HCA", "value": "mlx5_0"})

    resource = plugin.get("kubernetes", {}).get("gpuResource", "nvidia.com/gpu")

    def no_gpu(pod):
        del ctr(pod)["resources"]["limits"][resource]

    edits = [("a volume", volume, "has: dshm"), ("a volumeMount", mount, "has: trainer: /data"),
             ("POD_UID", pod_uid, "has: trainer: POD_UID"),
             ("an added capability", cap, "adds ['IPC_LOCK']"),
             ("a privileged container", privileged, "has: trainer: privileged"),
             ("a cpu limit", cpu, "limits cpu"), ("a memory request", memory, "requests memory"),
             ("a resource claim", claim, "trainer: claims"),
             ("NCCL_IB_HCA set", ib, "has: trainer: NCCL_IB_HCA"),
             (f"no {resource}", no_gpu, f"a container asks for {resource}")]
    if variant:
        def conf_mount(pod):
            at = next(e["value"] for e in ctr(pod)["env"] if e["name"] == "NCCL_CONF_FILE")
            ctr(pod)["volumeMounts"] = [{"name": "hints", "mountPath": at,
                                         "subPathExpr": "$(POD_UID)/nccl.conf"}]

        def no_conf(pod):
            ctr(pod)["env"] = [e for e in ctr(pod)["env"] if e["name"] != "NCCL_CONF_FILE"]

        edits += [("the confFile mounted by the pod", conf_mount, "mounted by: trainer"),
                  ("no NCCL_CONF_FILE", no_conf, "NCCL_CONF_FILE is a usable")]
    for what, edit, says in edits:
        seed_refused(doc, where, plugin, variant, what, edit, says)


def conflist(conf, name):
    with open(os.path.join(conf, name)) as f:
        return next(p for p in json.load(f)["plugins"] if p["type"] == "hpn-rdma")


def flags(args):
    """--name=value arguments as a dict (a bare --flag is True)."""
    out = {}
    for a in args:
        k, eq, v = a.partition("=")
        out[k] = v if eq else True
    return out


def host_paths(ctr, vols):
    """mountPath -> (hostPath path or None, readOnly) of a container's mounts."""
    out = {}
    for m in ctr.get("volumeMounts", []):
        v = vols.get(m["name"], {})
        out[m["mountPath"]] = (v.get("hostPath", {}).get("path"), bool(m.get("readOnly")))
    return out


def at_host_path(ctr, vols, path, where, what, writable):
    """path lies under a hostPath mounted at its own path (so a path the
    container writes is the path the host's runtime and plugin read)."""
    mounts = host_paths(ctr, vols)
    best = max((m for m in mounts if path == m or path.startswith(m.rstrip("/") + "/")),
               key=len, default=None)
    ok = best is not None and mounts[best][0] == best and (not writable or not mounts[best][1])
    check(ok, f"{where}: {what} {path} is under a hostPath mounted at its own path" +
          (" (writable)" if writable else ""))


def tree_facts(src):
    """What the build bakes in: the image's name, entrypoint and bundle root."""
    with open(os.path.join(src, "CMakeLists.txt")) as f:
        version = re.search(r"project\(hpn-rdma VERSION (\S+)", f.read()).group(1)
    with open(os.path.join(src, "agent", "CMakeLists.txt")) as f:
        name = re.search(r'set\(HPN_IMAGE_NAME "([^"]+)"\)', f.read()).group(1)
    with open(os.path.join(src, "scripts", "image.sh")) as f:
        text = f.read()
    root = re.search(r"bundle_root=(\S+)", text).group(1)
    entry = re.search(r'"\$out" (/\S+)\s*$', text, re.M).group(1)
    return name.replace("${PROJECT_VERSION}", version), entry, root


def cluster(docs, where, conf, src):
    """hpn-rdma.yaml: namespace, ConfigMap, RBAC identity and the DaemonSet hold together."""
    image, entry_point, bundle_root = tree_facts(src)
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    for k in ("Namespace", "ConfigMap", "DaemonSet"):
        check(len(by_kind.get(k, [])) == 1, f"{where}: one {k}")
    # The agent's and the plugin's (rbac() checks what each may do).
    check(len(by_kind.get("ServiceAccount", [])) == 2, f"{where}: two ServiceAccounts")
    # The agent's role and binding, the plugin's; the metrics proxy's role and binding and
    # the scrapers' role (metrics_proxy()) besides.
    check(2 <= len(by_kind.get("ClusterRole", [])) <= 4 and
          2 <= len(by_kind.get("ClusterRoleBinding", [])) <= 3,
          f"{where}: the agent's and the plugin's ClusterRoles and bindings, and the metrics "
          "proxy's")
    ns = by_kind["Namespace"][0]["metadata"]["name"]
    for d in docs:
        if d["kind"] in ("ServiceAccount", "ConfigMap", "DaemonSet"):
            check(d["metadata"].get("namespace") == ns,
                  f"{where}: {d['kind']} {d['metadata']['name']} is in the namespace {ns}")
    cm = by_kind["ConfigMap"][0]
    data = cm.get("data", {})
    for key, text in data.items():
        try:
            got = json.loads(text)
        except ValueError as e:
            check(False, f"{where}: ConfigMap key {key} is JSON: {e}")
            continue
        # The DaemonSet always runs the agent, so its conflist requires it (issue 40: a pool
        # pick never replaces the kubelet's NICs while the agent is down): agent.required
        # true in every hpn-rdma entry, and nothing else that differs from conf/<key>.
        bare = copy.deepcopy(got)
        for p in bare.get("plugins", [bare]) if isinstance(bare, dict) else []:
            if isinstance(p, dict) and p.get("type") == "hpn-rdma":
                agent = p.get("agent") if isinstance(p.get("agent"), dict) else {}
                check(agent.get("required") is True,
                      f"{where}: ConfigMap key {key}: agent.required is true (the DaemonSet "
                      "runs the agent)")
                agent.pop("required", None)
                if not agent:
                    p.pop("agent", None)
        path = os.path.join(conf, key)
        same = os.path.isfile(path) and bare == json.load(open(path))
        check(same, f"{where}: ConfigMap key {key} is conf/{key} but for agent.required "
              "(one source of truth)")
    ds = by_kind["DaemonSet"][0]
    dw = f"{where}: DaemonSet {ds['metadata']['name']}"
    pod = ds["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    sa = [d["metadata"]["name"] for d in by_kind["ServiceAccount"]
          if d["metadata"]["name"] != PLUGIN_SA]
    check(len(sa) == 1 and pod.get("serviceAccountName") == sa[0],
          f"{dw} runs as the agent's ServiceAccount {sa}, not the plugin's {PLUGIN_SA}")
    check(pod.get("hostNetwork") is True, f"{dw}: hostNetwork (the pool's NICs are the host's)")
    check(ds["spec"].get("updateStrategy", {}).get("type") == "RollingUpdate",
          f"{dw}: updateStrategy RollingUpdate")
    terms = (pod.get("affinity", {}).get("nodeAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms"))
    check(bool(terms) or bool(pod.get("nodeSelector")), f"{dw}: chooses its nodes (GPU nodes)")
    check(bool(pod.get("tolerations")), f"{dw}: tolerates the GPU nodes' taints")
    inits, ctrs = pod.get("initContainers", []), pod.get("containers", [])
    # The agent first (hpn-rdma-dra-patch.json patches containers/0), then the metrics
    # proxy, which is not hpn-rdma's image (metrics_proxy() checks it).
    check(len(inits) == 1 and 1 <= len(ctrs) <= 2,
          f"{dw}: one init container, the agent's container and at most the metrics proxy")
    for c in inits + ctrs[:1]:
        sc = c.get("securityContext", {})
        check(c.get("image") == image, f"{dw} {c['name']}: the image the build makes ({image})")
        check(sc.get("privileged") is False and sc.get("runAsUser") == 0,
              f"{dw} {c['name']}: root, not privileged")
    init, agent = inits[0], ctrs[0]
    check(init.get("args", [""])[0] == "install" and "command" not in init,
          f"{dw}: the init container runs the image's installer ({entry_point} install)")
    f = flags(init["args"][1:])
    conf_path = f.get("--conf", "")
    cm_mounts = [m["mountPath"] for m in init.get("volumeMounts", [])
                 if vols.get(m["name"], {}).get("configMap", {}).get("name") ==
                 cm["metadata"]["name"]]
    key = os.path.basename(conf_path)
    check(os.path.dirname(conf_path) in cm_mounts and key in data,
          f"{dw}: install --conf {conf_path} is the ConfigMap's key {key}")
    if key not in data:
        return None
    entry = next(p for p in json.loads(data[key])["plugins"] if p["type"] == "hpn-rdma")
    bin_dir = f.get("--cni-bin-dir", "/opt/cni/bin")
    conf_dir = f.get("--cni-conf-dir", "/etc/cni/net.d")
    at_host_path(init, vols, bin_dir, dw, "install's CNI bin dir", True)
    at_host_path(init, vols, conf_dir, dw, "install's CNI conf dir", True)
    at_host_path(init, vols, bundle_root, dw, "the plugin's bundle root (scripts/image.sh)", True)
    kc = entry.get("kubernetes", {}).get("kubeconfig")
    check(kc and f.get("--kubeconfig") == kc,
          f"{dw}: install writes the kubeconfig the conflist reads ({kc})")
    if kc:
        at_host_path(init, vols, os.path.dirname(kc), dw, "the kubeconfig's directory", True)
    # The agent: the same conflist, the same kubeconfig, the kubelet's and the plugin's dirs.
    check(not agent.get("args", ["-"])[0] in ("install", "uninstall"),
          f"{dw}: the container runs the agent itself")
    a = flags(agent.get("args", []))
    check(a.get("--config") == conf_path and os.path.dirname(conf_path) in
          [m["mountPath"] for m in agent.get("volumeMounts", [])
           if vols.get(m["name"], {}).get("configMap")],
          f"{dw}: the agent reads the conflist install installs ({conf_path})")
    check("match" in entry, f"{dw}: {key} selects a pool (match), which the agent lists")
    check(kc and a.get("--kubeconfig") == kc, f"{dw}: the agent keeps the kubeconfig {kc}")
    if kc:
        at_host_path(agent, vols, os.path.dirname(kc), dw, "the agent's kubeconfig directory",
                     True)
    kdir = a.get("--kubelet-dir", "/var/lib/kubelet")
    for path in (kdir + "/device-plugins", kdir + "/pod-resources"):
        at_host_path(agent, vols, path, dw, "the kubelet's", True)
    sock = entry.get("agent", {}).get("socket", "/run/hpn-rdma/agent.sock")
    at_host_path(agent, vols, os.path.dirname(sock), dw, "agent.socket's directory", True)
    # The CDI specs: --cdi-dir, else the entry's agent.cdiDir ("": none).
    cdi = a.get("--cdi-dir", entry.get("agent", {}).get("cdiDir", "/var/run/cdi"))
    if cdi:
        at_host_path(agent, vols, cdi, dw, "the CDI spec directory", True)
    # The seed's Deployment has nothing of hpn-rdma's: its hints, devices and memlock come
    # through the runtime's NRI (agent/nri.c), whose socket is made anew at each restart.
    nri = a.get("--nri")
    check(nri is not None, f"{dw}: the agent runs --nri (the seed's pods get their hints, "
          "devices and memlock from it)")
    if nri is not None:
        nri = "/var/run/nri/nri.sock" if nri is True else nri
        at_host_path(agent, vols, os.path.dirname(nri), dw, "the NRI socket's directory", False)
    state = entry.get("stateDir", STATE_DIR)
    at_host_path(agent, vols, state, dw, "the journals' stateDir", True)
    if "stateDir" not in entry:
        # The default moved from disk: whoever opens it first adopts the old one's journals.
        at_host_path(agent, vols, OLD_STATE_DIR, dw, "the earlier default stateDir", True)
    # GC (on unless --cri-socket=none or --gc-interval=0) undoes attachments as DEL would.
    if a.get("--cri-socket") != "none" and a.get("--gc-interval") != "0":
        cri = a.get("--cri-socket", "/run/containerd/containerd.sock")
        at_host_path(agent, vols, cri, dw, "GC's CRI socket", True)
        caps = set(agent.get("securityContext", {}).get("capabilities", {}).get("add", []))
        check({"NET_ADMIN", "SYS_ADMIN"} <= caps,
              f"{dw}: GC has CAP_NET_ADMIN and CAP_SYS_ADMIN (it has {sorted(caps)})")
        for path in a.get("--cni-path", "/opt/cni/bin").split(":"):
            at_host_path(agent, vols, path, dw, "GC's IPAM plugins", False)
        for path in ("/var/run/netns", "/var/lib/cni/networks"):
            at_host_path(agent, vols, path, dw, "GC's", path != "/var/run/netns")
        netns = [m for m in agent["volumeMounts"] if m["mountPath"] == "/var/run/netns"]
        check(bool(netns) and netns[0].get("mountPropagation") == "HostToContainer",
              f"{dw}: pods' netns mounts made after the agent starts reach it")
    metrics_proxy(docs, ds, a.get("--metrics-address", "127.0.0.1:9467"), dw)
    metrics_broken_copies(docs, dw)
    return {"resource": a.get("--resource", "rdma/hpn"), "entry": entry, "ns": ns,
            "cm": cm["metadata"]["name"], "image": image, "entry_point": entry_point,
            "bundle_root": bundle_root, "state": state,
            "flags": {k: f[k] for k in ("--conf", "--cni-bin-dir", "--cni-conf-dir",
                                        "--kubeconfig") if k in f}}


def loopback(addr):
    """ADDR:PORT of the agent's --metrics-address (the port after the last ':', IPv6
    bracketed or not, as agent/metrics.c reads it) names a loopback address."""
    host = addr.rsplit(":", 1)[0]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # $(HOST_IP), a name, anything the kubelet fills in


def metrics_proxy(docs, ds, addr, dw):
    """Issue 40 (finding 6): the metrics name every attachment's pod. The agent serves
    them on loopback only; whatever listens on the node's IP (hostNetwork) is
    kube-rbac-proxy, which authenticates (TokenReview) and authorizes (SubjectAccessReview
    of get /metrics) every request before it asks the agent; its RBAC is here."""
    pod = ds["spec"]["template"]["spec"]
    ctrs = pod.get("containers", [])
    check(addr == "none" or loopback(addr),
          f"{dw}: the agent's own --metrics-address ({addr}) is loopback (its labels name pods)")
    agent_ports = [p for p in ctrs[0].get("ports", [])] if ctrs else []
    check(not agent_ports, f"{dw}: the agent declares no port (it listens on no node address)")
    proxies = ctrs[1:]
    if addr == "none":
        check(not proxies, f"{dw}: no metrics proxy when the agent serves no metrics")
        return
    if not check(len(proxies) == 1, f"{dw}: a metrics proxy serves the agent's metrics "
                 "to the cluster"):
        return
    (px,) = proxies
    pw = f"{dw} {px.get('name')}"
    img = px.get("image", "")
    check(bool(METRICS_PROXY_IMAGE.match(img)) and img != "quay.io/brancz/kube-rbac-proxy",
          f"{pw}: kube-rbac-proxy at a pinned version ({px.get('image')})")
    f = flags(px.get("args", []))
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
           for e in px.get("env", [])}
    listen = f.get("--secure-listen-address", "")
    m = re.match(r"^\[\$\((\w+)\)\]:(\d+)$", listen if isinstance(listen, str) else "")
    check(bool(m) and env.get(m.group(1)) == "status.hostIP",
          f"{pw}: HTTPS on the node's IP, bracketed ([$(HOST_IP)]:PORT, HOST_IP from "
          f"status.hostIP: a bare IPv6 address on an IPv6 node) ({listen})")
    port = int(m.group(2)) if m else None
    check(any(p.get("containerPort") == port for p in px.get("ports", [])),
          f"{pw}: the port it listens on ({port}) is declared")
    ann = ds["spec"]["template"].get("metadata", {}).get("annotations", {})
    if "prometheus.io/port" in ann:
        check(ann["prometheus.io/port"] == str(port) and
              ann.get("prometheus.io/scheme") == "https",
              f"{dw}: the scrape annotations name the proxy's port, HTTPS")
    check(not any(k in f for k in ("--insecure-listen-address", "--ignore-paths")),
          f"{pw}: no plain-HTTP listener, no path that skips authorization")
    check(f.get("--allow-paths") == "/metrics", f"{pw}: only /metrics is proxied")
    check(f.get("--upstream") == f"http://{addr}/",
          f"{pw}: its upstream is the agent's loopback address (http://{addr}/)")
    sc = px.get("securityContext", {})
    check(sc.get("privileged") is not True and sc.get("allowPrivilegeEscalation") is False and
          sc.get("capabilities", {}).get("drop") == ["ALL"] and not
          sc.get("capabilities", {}).get("add"),
          f"{pw}: not privileged, no capabilities")
    check(pod.get("automountServiceAccountToken", True) is not False,
          f"{dw}: the proxy has the pod's token for its reviews")
    roles = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ClusterRole"}
    sa = (pod.get("serviceAccountName"), ds["metadata"].get("namespace"))
    bound = {b["roleRef"]["name"] for b in docs if b.get("kind") == "ClusterRoleBinding" and
             any(s.get("kind") == "ServiceAccount" and (s.get("name"), s.get("namespace")) == sa
                 for s in b.get("subjects", []))}
    check(any(roles.get(n, {}).get("rules") == METRICS_AUTH_RULES for n in bound),
          f"{dw}: its ServiceAccount may create tokenreviews and subjectaccessreviews "
          "(the proxy's authentication and authorization)")
    readers = [n for n, r in roles.items() if r.get("rules") == METRICS_READER_RULES]
    check(bool(readers), f"{dw}: a ClusterRole for scrapers to get /metrics")
    check(not any(n in bound for n in readers),
          f"{dw}: the DaemonSet's own account is not a scraper")


def metrics_broken_copies(docs, dw):
    """Copies of hpn-rdma.yaml exposed as before issue 40 (or nearly) must fail
    metrics_proxy(): the checks can fail."""
    global passed, failed, quiet

    def ds_of(ds):
        return [d for d in ds if d["kind"] == "DaemonSet"][0]

    def ctrs(ds):
        return ds_of(ds)["spec"]["template"]["spec"]["containers"]

    def set_arg(i, old, new):
        def edit(ds):
            c = ctrs(ds)[i]
            c["args"] = [new if a.partition("=")[0] == old else a for a in c["args"]]
        return edit

    def no_sar(ds):
        for d in ds:
            if d["kind"] == "ClusterRole" and d.get("rules") == METRICS_AUTH_RULES:
                d["rules"] = d["rules"][:1]

    def old_manifest(ds):  # the agent on the node's IP, no proxy (3623a16)
        del ctrs(ds)[1:]
        set_arg(0, "--metrics-address", "--metrics-address=$(HOST_IP):9467")(ds)

    for what, edit in (
            ("the agent on the node's IP, no proxy", old_manifest),
            ("the agent on every address", set_arg(0, "--metrics-address",
                                                   "--metrics-address=0.0.0.0:9468")),
            ("the proxy's address unbracketed",
             set_arg(1, "--secure-listen-address", "--secure-listen-address=$(HOST_IP):9467")),
            ("a path that skips authorization", set_arg(1, "--allow-paths",
                                                        "--ignore-paths=/metrics")),
            ("the proxy without SubjectAccessReviews", no_sar),
            ("an unpinned proxy image",
             lambda ds: ctrs(ds)[1].update(image="quay.io/brancz/kube-rbac-proxy"))):
        broken = copy.deepcopy(docs)
        edit(broken)
        ds = ds_of(broken)
        a = flags(ctrs(broken)[0].get("args", []))
        saved, quiet = (passed, failed), True
        try:
            metrics_proxy(broken, ds, a.get("--metrics-address", "127.0.0.1:9467"), dw)
        except (KeyError, IndexError, ValueError, TypeError):
            failed += 1
        got = failed - saved[1]
        (passed, failed), quiet = saved, False
        check(got > 0, f"{dw}: a broken copy ({what}) is refused ({got} checks failed)")


def uninstall(d, where, inst):
    """The uninstall DaemonSet removes what install wrote, from the same places."""
    pod = d["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    check(d["metadata"].get("namespace") == inst["ns"], f"{where}: in the namespace {inst['ns']}")
    (c,) = pod["containers"]
    args = c.get("args", [])
    check(args[:2] == ["uninstall", "--wait"] and c.get("image") == inst["image"],
          f"{where}: runs {inst['image']}'s uninstall --wait")
    f = flags(args[2:])
    check(f == inst["flags"], f"{where}: the installer's own flags ({inst['flags']})")
    probe = c.get("readinessProbe", {}).get("exec", {}).get("command")
    check(probe == [inst["entry_point"], "uninstall", "--check"] + args[2:],
          f"{where}: Ready when uninstall --check (same flags) finds nothing left")
    conf = inst["flags"].get("--conf", "")
    check(any(m["mountPath"] == os.path.dirname(conf) and
              vols.get(m["name"], {}).get("configMap", {}).get("name") == inst["cm"]
              for m in c.get("volumeMounts", [])), f"{where}: {conf} from the same ConfigMap")
    at_host_path(c, vols, inst["flags"].get("--cni-bin-dir", "/opt/cni/bin"), where,
                 "the CNI bin dir", True)
    at_host_path(c, vols, inst["flags"].get("--cni-conf-dir", "/etc/cni/net.d"), where,
                 "the CNI conf dir", True)
    at_host_path(c, vols, inst["bundle_root"], where, "the bundle root", True)
    if "--kubeconfig" in inst["flags"]:
        at_host_path(c, vols, os.path.dirname(inst["flags"]["--kubeconfig"]), where,
                     "the kubeconfig's directory", True)
    # Writable: uninstall adopts an earlier version's journals, as any run does.
    at_host_path(c, vols, inst["state"], where, "the journals' stateDir", True)
    if inst["state"] == STATE_DIR:
        at_host_path(c, vols, OLD_STATE_DIR, where, "the earlier default stateDir", True)
    check(not c.get("securityContext", {}).get("privileged"), f"{where}: not privileged")


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


def plugin_identity(docs, where):
    """The plugin's ServiceAccount (its token is the one on the host): get pods, nothing
    else, bound to it alone; the agent's Role: create a token for it alone, bound to the
    agent's ServiceAccount (the DaemonSet's) alone."""
    sas = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ServiceAccount"}
    ds = [d for d in docs if d.get("kind") == "DaemonSet"]
    agent_sa = ds[0]["spec"]["template"]["spec"].get("serviceAccountName") if ds else None
    ns = sas.get(PLUGIN_SA, {}).get("metadata", {}).get("namespace")
    if not check(PLUGIN_SA in sas, f"{where}: the plugin's ServiceAccount {PLUGIN_SA}"):
        return
    check(agent_sa and agent_sa != PLUGIN_SA, f"{where}: the DaemonSet runs as the agent's "
          f"ServiceAccount, not the plugin's")
    check(sas[PLUGIN_SA].get("automountServiceAccountToken") is False,
          f"{where}: ServiceAccount {PLUGIN_SA}: no token mounted into any pod")
    subj = {"kind": "ServiceAccount", "name": PLUGIN_SA, "namespace": ns}
    binds = [b for b in docs if b.get("kind") in ("ClusterRoleBinding", "RoleBinding") and
             subj in b.get("subjects", [])]
    croles = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ClusterRole"}
    ok = (len(binds) == 1 and binds[0]["kind"] == "ClusterRoleBinding" and
          binds[0]["subjects"] == [subj] and binds[0]["roleRef"].get("kind") == "ClusterRole" and
          croles.get(binds[0]["roleRef"].get("name"), {}).get("rules") == PLUGIN_RULES)
    check(ok, f"{where}: {PLUGIN_SA} is bound once, alone, to a ClusterRole of exactly get pods")
    roles = {(d["metadata"]["name"], d["metadata"].get("namespace")): d
             for d in docs if d.get("kind") == "Role"}
    for (n, rns), r in roles.items():
        for i, rule in enumerate(r.get("rules", [])):
            fields(rule, "rule", f"{where}: Role {n} rules[{i}]")
        check(r.get("rules") == PLUGIN_TOKEN_RULES and rns == ns,
              f"{where}: Role {n} allows create on serviceaccounts/token for {PLUGIN_SA} alone, "
              f"in its namespace")
    token_binds = [b for b in docs if b.get("kind") == "RoleBinding"]
    check(len(roles) == 1 and len(token_binds) == 1 and
          token_binds[0]["metadata"].get("namespace") == ns and
          token_binds[0].get("roleRef") == {"apiGroup": "rbac.authorization.k8s.io",
                                            "kind": "Role", "name": next(iter(roles))[0]} and
          token_binds[0].get("subjects") == [{"kind": "ServiceAccount", "name": agent_sa,
                                              "namespace": ns}],
          f"{where}: one RoleBinding gives that Role to the agent's ServiceAccount alone")
    for b in docs:
        if b.get("kind") == "ClusterRoleBinding" and \
                croles.get(b["roleRef"].get("name"), {}).get("rules") == PLUGIN_RULES:
            continue
        check(not any(s.get("name") == agent_sa and "serviceaccounts/token" in json.dumps(
            croles.get(b.get("roleRef", {}).get("name"), {}).get("rules", []))
            for s in b.get("subjects", [])),
            f"{where}: ClusterRoleBinding {b['metadata']['name']}: no cluster-wide token rights "
            "for the agent")


def rbac(docs, where):
    sas = {(d["metadata"]["name"], d["metadata"].get("namespace"))
           for d in docs if d.get("kind") == "ServiceAccount"}
    roles = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ClusterRole"}
    plugin_identity(docs, where)
    for name, r in roles.items():
        for i, rule in enumerate(r.get("rules", [])):
            fields(rule, "rule", f"{where}: ClusterRole {name} rules[{i}]")
        # get: the plugin's label lookup; list, watch: the agent's cache of its node's pods.
        # The metrics proxy's review role and the scrapers' role are metrics_proxy()'s; the
        # plugin's (get pods) plugin_identity()'s.
        if r.get("rules") in (METRICS_AUTH_RULES, METRICS_READER_RULES, PLUGIN_RULES):
            continue
        check(r.get("rules") == [{"apiGroups": [""], "resources": ["pods"],
                                  "verbs": ["get", "list", "watch"]}],
              f"{where}: ClusterRole {name} allows get, list, watch on pods and nothing else")
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


def dra_driver(src):
    """The driver name the agent publishes (agent/dra/model/draslice.h), the one source of it."""
    with open(os.path.join(src, "agent", "dra", "model", "draslice.h")) as f:
        return re.search(r'#define HPN_DRA_DRIVER "([^"]+)"', f.read()).group(1)


def dra_share_names(src):
    """The shared device's attribute and capacity (agent/dra/model/drashare.h)."""
    with open(os.path.join(src, "agent", "dra", "model", "drashare.h")) as f:
        text = f.read()
    return tuple(re.search(rf'#define HPN_DRA_SHARE_{k}\s+"([^"]+)"', text).group(1)
                 for k in ("ATTR", "CAPACITY"))


def shared_class(driver):
    """The shared NICs' class: the driver's name with "-shared" after its first label."""
    first, dot, rest = driver.partition(".")
    return f"{first}-shared{dot}{rest}"


def dra_class(d, where, driver, shared):
    """A DeviceClass of hpn-rdma's driver: the whole NICs' (named for the driver) or the
    shared NICs' (shared_class), selecting that driver's devices without, or with, the
    attribute that marks a shared device."""
    spec = d.get("spec", {})
    fields(spec, "DeviceClass.spec", f"{where}.spec")
    sels = spec.get("selectors", [])
    for i, sel in enumerate(sels):
        fields(sel, "deviceSelector", f"{where}.spec.selectors[{i}]")
        fields(sel.get("cel"), "cel", f"{where}.spec.selectors[{i}].cel")
    name = d["metadata"]["name"]
    check(name in (driver, shared_class(driver)),
          f"{where}: named for the driver ({driver}) or its shares ({shared_class(driver)})")
    has = f'has(device.attributes["{driver}"].{shared})'
    want = f'device.driver == "{driver}" && ' + ("!" if name == driver else "") + has
    exprs = [s.get("cel", {}).get("expression") for s in sels]
    check(exprs == [want], f"{where}: one selector, {want}")


def dra_share_template(d, where, driver, capacity):
    """hpn-rdma-share: one request of one device of the shared NICs' class, taking one
    share of its capacity; no constraint."""
    spec = d.get("spec", {})
    fields(spec, "ResourceClaimTemplate.spec", f"{where}.spec")
    claim = spec.get("spec", {})
    fields(claim, "claimSpec", f"{where}.spec.spec")
    devs = claim.get("devices", {})
    fields(devs, "deviceClaim", f"{where}.spec.spec.devices")
    reqs = devs.get("requests", [])
    check(len(reqs) == 1 and not devs.get("constraints") and not devs.get("config"),
          f"{where}: one request, no constraint")
    for i, r in enumerate(reqs):
        rw = f"{where}.spec.spec.devices.requests[{i}]"
        fields(r, "deviceRequest", rw)
        ex = r.get("exactly", {})
        fields(ex, "exactly", f"{rw}.exactly")
        cap = ex.get("capacity", {})
        fields(cap, "capacityRequirements", f"{rw}.exactly.capacity")
        check(isinstance(r.get("name"), str) and LABEL.match(r["name"]) and
              "firstAvailable" not in r and ex.get("allocationMode", "ExactCount") ==
              "ExactCount" and ex.get("count", 1) == 1,
              f"{rw}: exactly one device (exactly, ExactCount, count 1), a DNS label name")
        check(ex.get("deviceClassName") == shared_class(driver),
              f"{rw}: of the shared NICs' class ({shared_class(driver)})")
        check(cap.get("requests") == {capacity: "1"},
              f"{rw}: one share, capacity.requests {{{capacity}: \"1\"}} (a quoted quantity)")


def dra_template(d, where, nic_class):
    """A ResourceClaimTemplate hpn-gpuN-rdmaN: N GPU/NIC pairs, each under one PCIe root;
    hpn-gpuN-rdmaN-nearest: each GPU then its NIC as firstAvailable root, numa, any, the
    first two held to the GPU by a constraint on PCIE_ROOT and NUMA_NODE."""
    spec = d.get("spec", {})
    fields(spec, "ResourceClaimTemplate.spec", f"{where}.spec")
    claim = spec.get("spec", {})
    fields(claim, "claimSpec", f"{where}.spec.spec")
    devs = claim.get("devices", {})
    fields(devs, "deviceClaim", f"{where}.spec.spec.devices")
    reqs, cons = devs.get("requests", []), devs.get("constraints", [])
    check(len(reqs) <= 32 and len(cons) <= 32,
          f"{where}: at most 32 requests and 32 constraints (the API's limits)")
    name = d["metadata"]["name"]
    m = re.match(r"^hpn-gpu(\d+)-rdma(\d+)(-nearest)?$", name)
    if not check(m and m.group(1) == m.group(2), f"{where}: named hpn-gpu<N>-rdma<N>[-nearest]"):
        return None
    nearest = bool(m.group(3))
    cls = {}  # request (or request/subrequest) -> DeviceClass
    for i, r in enumerate(reqs):
        rw = f"{where}.spec.spec.devices.requests[{i}]"
        fields(r, "deviceRequest", rw)
        check(isinstance(r.get("name"), str) and LABEL.match(r["name"]) and r["name"] not in cls,
              f"{rw}: a name of its own, a DNS label")
        if "firstAvailable" in r and nearest:
            subs = r["firstAvailable"]
            for j, sub in enumerate(subs):
                fields(sub, "subRequest", f"{rw}.firstAvailable[{j}]")
                check(sub.get("allocationMode", "ExactCount") == "ExactCount" and
                      sub.get("count", 1) == 1, f"{rw}.firstAvailable[{j}]: one device")
                cls[f"{r.get('name')}/{sub.get('name')}"] = sub.get("deviceClassName")
            check([x.get("name") for x in subs] == ["root", "numa", "any"] and
                  len({x.get("deviceClassName") for x in subs}) == 1 and len(subs) <= 8,
                  f"{rw}: firstAvailable root, numa, any, of one DeviceClass (at most 8)")
            cls[r.get("name")] = subs[0].get("deviceClassName") if subs else None
            continue
        ex = r.get("exactly", {})
        fields(ex, "exactly", f"{rw}.exactly")
        check("firstAvailable" not in r and ex.get("allocationMode", "ExactCount") ==
              "ExactCount" and ex.get("count", 1) == 1,
              f"{rw}: exactly one device (exactly, ExactCount, count 1)")
        cls[r.get("name")] = ex.get("deviceClassName")
    n = int(m.group(1))
    top = {r: c for r, c in cls.items() if "/" not in r}
    check(sorted(top.values()) == sorted([DRA_GPU_CLASS] * n + [nic_class] * n),
          f"{where}: {n} GPU requests ({DRA_GPU_CLASS}) and {n} NIC requests ({nic_class})")
    paired = []
    for i, c in enumerate(cons):
        cw = f"{where}.spec.spec.devices.constraints[{i}]"
        fields(c, "constraint", cw)
        rs = c.get("requests", [])
        want = PCIE_ROOT if not nearest or (len(rs) == 2 and rs[1].endswith("/root")) \
            else NUMA_NODE
        check(c.get("matchAttribute") == want and len(rs) == 2 and
              sorted(cls.get(r) for r in rs) == sorted([DRA_GPU_CLASS, nic_class]),
              f"{cw}: one GPU and one NIC request (or subrequest) under one {want}")
        paired += rs
    if nearest:
        want = sorted(r for r in cls if r.startswith("gpu-")) * 2 + \
            sorted(r for r in cls if r.startswith("nic-") and r.split("/")[-1] in ("root", "numa"))
        check(len(cons) == 2 * n and sorted(paired) == sorted(want),
              f"{where}: {2 * n} constraints, each GPU in two, each NIC's root and numa in one")
    else:
        check(len(cons) == n and sorted(paired) == sorted(cls),
              f"{where}: {n} constraints, every request in exactly one")
    return n, nearest


def dra(files, driver, share=("shared", "shares")):
    """conf/k8s/dra-*.yaml: the classes, the templates, the example Pod; none in the install."""
    classes = [d for d in files.get("dra-deviceclass.yaml", []) if d["kind"] == "DeviceClass"]
    if check(sorted(d["metadata"]["name"] for d in classes) ==
             sorted([driver, shared_class(driver)]),
             "k8s/dra-deviceclass.yaml holds the whole NICs' DeviceClass and the shared NICs'"):
        for i, d in enumerate(classes):
            dra_class(d, f"k8s/dra-deviceclass.yaml[{i}]", driver, share[0])
    sizes, names = set(), set()
    shares = 0
    for i, d in enumerate(files.get("dra-claims.yaml", [])):
        if not check(d["kind"] == "ResourceClaimTemplate",
                     f"k8s/dra-claims.yaml[{i}] is a ResourceClaimTemplate"):
            continue
        if d["metadata"]["name"] == "hpn-rdma-share":
            dra_share_template(d, f"k8s/dra-claims.yaml[{i}]", driver, share[1])
            shares += 1
        else:
            sizes.add(dra_template(d, f"k8s/dra-claims.yaml[{i}]", driver))
        names.add(d["metadata"]["name"])
    check(shares == 1, "k8s/dra-claims.yaml: the template hpn-rdma-share")
    check(sizes == {(n, near) for n in (1, 2, 4, 8) for near in (False, True)},
          "k8s/dra-claims.yaml: templates for 1, 2, 4 and 8 GPUs, strict and -nearest")
    for i, d in enumerate(files.get("dra-pod.yaml", [])):
        where = f"k8s/dra-pod.yaml[{i}]"
        pod = d.get("spec", {})
        fields(pod, "pod", f"{where}.spec")
        rcs = pod.get("resourceClaims", [])
        for j, rc in enumerate(rcs):
            fields(rc, "podResourceClaim", f"{where}.spec.resourceClaims[{j}]")
        check(rcs and all(rc.get("resourceClaimTemplateName") in names for rc in rcs),
              f"{where}: its resourceClaims name templates of dra-claims.yaml")
        for c in pod.get("containers", []):
            fields(c, "container", f"{where}: container {c.get('name')}")
            claims = c.get("resources", {}).get("claims", [])
            for j, cc in enumerate(claims):
                fields(cc, "containerClaim", f"{where}: container {c.get('name')} claims[{j}]")
            check(claims and all(cc.get("name") in {rc.get("name") for rc in rcs}
                                 for cc in claims),
                  f"{where}: container {c.get('name')} uses the Pod's claim")
    inst = [d["kind"] for d in files.get("hpn-rdma.yaml", []) if
            d["kind"] in ("DeviceClass", "ResourceClaimTemplate")]
    check(not inst, "k8s/hpn-rdma.yaml holds no DRA object (the CNI install needs no DRA API)")


# What the DRA driver asks of the API server (agent/dra/drakubelet.c and
# agent/dra/model/draslice.c's requests; pods get, list, watch are hpn-rdma.yaml's): (apiGroup,
# resource, verb, resourceName or None). The DRA ClusterRole must cover these
# and hold nothing else.
DRA_NEEDS = {
    ("resource.k8s.io", "resourceclaims", "get", None),
    ("resource.k8s.io", "resourceclaims/status", "update", None),
    ("resource.k8s.io", "resourceclaims/status", "patch", None),
    ("resource.k8s.io", "resourceclaims/driver", "associated-node:update", "DRIVER"),
    ("resource.k8s.io", "resourceclaims/driver", "associated-node:patch", "DRIVER"),
    ("", "nodes", "get", None),
} | {("resource.k8s.io", "resourceslices", v, None)
     for v in ("get", "list", "watch", "create", "update", "patch", "delete")}
NODE_NAME_KEY = "authentication.kubernetes.io/node-name"


def json_patch(doc, ops):
    """RFC 6902 add/replace/remove, as kubectl patch --type json applies them."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1]
        if isinstance(parent, list):
            i = len(parent) if last == "-" else int(last)
            if op["op"] == "add":
                parent.insert(i, op["value"])
            elif op["op"] == "replace":
                parent[i] = op["value"]
            else:
                del parent[i]
        elif op["op"] == "remove":
            del parent[last]
        else:
            parent[last] = op["value"]
    return doc


def rules_of(docs, sa):
    """Every (apiGroup, resource, verb, resourceName) a ServiceAccount is bound to."""
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    out = set()
    for b in docs:
        if b["kind"] != "ClusterRoleBinding" or not any(
                s.get("kind") == "ServiceAccount" and (s.get("name"), s.get("namespace")) == sa
                for s in b.get("subjects", [])):
            continue
        for r in roles.get(b["roleRef"]["name"], {}).get("rules", []):
            for g in r.get("apiGroups", []):
                for res in r.get("resources", []):
                    for v in r.get("verbs", []):
                        for n in r.get("resourceNames") or [None]:
                            out.add((g, res, v, n))
    return out


def dra_daemonset(ds, where, driver):
    """The agent with --dra: the kubelet's DRA paths, the CDI dir, its node's name."""
    pod = ds["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    agent = pod["containers"][0]
    a = flags(agent.get("args", []))
    check(a.get("--dra") is True, f"{where}: the agent runs with --dra")
    drv = a.get("--dra-driver", driver)
    check(drv == driver, f"{where}: the driver is {driver}, the DeviceClass's")
    kdir = a.get("--kubelet-dir", "/var/lib/kubelet")
    at_host_path(agent, vols, f"{kdir}/plugins_registry", where,
                 "the registration socket's directory", True)
    at_host_path(agent, vols, f"{kdir}/plugins/{drv}", where, "dra.sock's directory", True)
    at_host_path(agent, vols, a.get("--cdi-dir", "/var/run/cdi"), where,
                 "the claims' CDI spec directory", True)
    check(bool(a.get("--kubeconfig")), f"{where}: claims are read with --kubeconfig")
    env = {e["name"]: e for e in agent.get("env", [])}
    node = env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    check("--node-name" in a or node == "spec.nodeName",
          f"{where}: NODE_NAME (--node-name's default) is the pod's spec.nodeName")


def dra_policy(docs, where, sa):
    """The ValidatingAdmissionPolicy keeping the agent to its own node's ResourceSlices."""
    pols = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
    binds = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    if not check(len(pols) == 1 and len(binds) == 1,
                 f"{where}: one ValidatingAdmissionPolicy and its binding"):
        return
    pol, bind = pols[0], binds[0]
    pw = f"{where}: ValidatingAdmissionPolicy {pol['metadata']['name']}"
    spec = pol.get("spec", {})
    fields(spec, "ValidatingAdmissionPolicy.spec", f"{pw}.spec")
    mc = spec.get("matchConstraints", {})
    fields(mc, "matchResources", f"{pw}.spec.matchConstraints")
    for i, r in enumerate(mc.get("resourceRules", [])):
        fields(r, "resourceRule", f"{pw}.spec.matchConstraints.resourceRules[{i}]")
    for key, kind in (("matchConditions", "matchCondition"), ("variables", "variable"),
                      ("validations", "validation")):
        for i, x in enumerate(spec.get(key, [])):
            fields(x, kind, f"{pw}.spec.{key}[{i}]")
    rules = mc.get("resourceRules", [])
    check(any("resource.k8s.io" in r.get("apiGroups", []) and
              "resourceslices" in r.get("resources", []) and
              {"CREATE", "UPDATE", "DELETE"} <= set(r.get("operations", [])) for r in rules),
          f"{pw}: matches ResourceSlices (resource.k8s.io) on CREATE, UPDATE and DELETE")
    check(spec.get("failurePolicy", "Fail") == "Fail", f"{pw}: failurePolicy Fail")
    user = f"system:serviceaccount:{sa[1]}:{sa[0]}"
    conds = " ".join(c.get("expression", "") for c in spec.get("matchConditions", []))
    check(f'request.userInfo.username == "{user}"' in conds,
          f"{pw}: applies to the agent's ServiceAccount ({user}) alone")
    # No CEL compiler here: the expressions are checked for what they must
    # compare, and for balanced brackets and quotes.
    exprs = [x.get("expression", "") for k in ("variables", "validations")
             for x in spec.get(k, [])] + [x.get("messageExpression", "")
                                          for x in spec.get("validations", [])]
    text = " ".join(exprs)
    balanced = all(e.count("(") == e.count(")") and e.count("[") == e.count("]") and
                   e.count("'") % 2 == 0 and e.count('"') % 2 == 0 for e in exprs)
    check(balanced, f"{pw}: its CEL expressions have balanced brackets and quotes")
    check(f"request.userInfo.extra[?'{NODE_NAME_KEY}']" in text,
          f"{pw}: reads the token's node ({NODE_NAME_KEY})")
    check("object.spec" in text.replace("oldObject.spec", "") and "oldObject.spec" in text,
          f"{pw}: compares the slice's spec.nodeName, new (create, update) and old "
          "(update, delete)")
    bs = bind.get("spec", {})
    fields(bs, "ValidatingAdmissionPolicyBinding.spec", f"{where}: its binding's spec")
    check(bs.get("policyName") == pol["metadata"]["name"] and
          "Deny" in bs.get("validationActions", []),
          f"{where}: the binding enforces {pol['metadata']['name']} (Deny)")


def dra_install(files, k8s, driver, checked=None):
    """hpn-rdma-dra.yaml and hpn-rdma-dra-patch.json over hpn-rdma.yaml: the DRA driver on."""
    where = "k8s/hpn-rdma-dra.yaml"
    base = files.get("hpn-rdma.yaml", [])
    extra = files.get(where[4:], [])
    if checked is None:
        check(extra, f"{where}: the DRA driver's RBAC and admission policy")
        with open(os.path.join(k8s, "hpn-rdma-dra-patch.json")) as f:
            ops = json.load(f)
    else:
        ops = checked
    (ds,) = [d for d in base if d["kind"] == "DaemonSet"]
    check("--dra" not in ds["spec"]["template"]["spec"]["containers"][0].get("args", []),
          "k8s/hpn-rdma.yaml: the DRA driver is off (a cluster without DRA keeps the rest)")
    check(all(o.get("op") in ("add", "replace") for o in ops),
          "k8s/hpn-rdma-dra-patch.json: JSON patch operations add or replace")
    try:
        on = json_patch(ds, ops)
    except (KeyError, IndexError, ValueError, TypeError) as e:
        check(False, f"k8s/hpn-rdma-dra-patch.json applies to hpn-rdma.yaml's DaemonSet: {e}")
        return
    dra_daemonset(on, "k8s/hpn-rdma.yaml + hpn-rdma-dra-patch.json: DaemonSet", driver)
    (sa,) = [(d["metadata"]["name"], d["metadata"].get("namespace"))
             for d in base if d["kind"] == "ServiceAccount" and d["metadata"]["name"] != PLUGIN_SA]
    have = rules_of(base + extra, sa)
    needs = {(g, r, v, driver if n == "DRIVER" else n) for g, r, v, n in DRA_NEEDS}
    missing = sorted(needs - have, key=str)
    check(not missing, f"{where}: {sa[1]}/{sa[0]} may do what the DRA driver asks" +
          (f" (missing: {missing})" if missing else ""))
    mine = rules_of(extra, sa)
    more = sorted(mine - needs, key=str)
    check(not more, f"{where}: and nothing more" + (f" (also: {more})" if more else ""))
    for d in extra:
        if d["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            for i, r in enumerate(d.get("rules", [])):
                fields(r, "rule", f"{where}: ClusterRole {d['metadata']['name']} rules[{i}]")
    dra_policy(extra, where, sa)


def refused(files, k8s, driver, what, edit):
    """A broken copy of the DRA install must fail dra_install: the checks can fail."""
    global passed, failed, quiet
    files = copy.deepcopy(files)
    with open(os.path.join(k8s, "hpn-rdma-dra-patch.json")) as f:
        ops = json.load(f)
    new = edit(files, ops)
    ops = ops if new is None else new
    saved, quiet = (passed, failed), True
    try:
        dra_install(files, k8s, driver, checked=ops)
    except (KeyError, IndexError, ValueError, TypeError, StopIteration):
        failed += 1
    got = failed - saved[1]
    (passed, failed), quiet = saved, False
    check(got > 0, f"a broken copy ({what}) is refused ({got} checks failed)")


def dra_broken_copies(files, driver, share):
    """A broken copy of the DRA classes or the share template must fail dra(): its checks
    can fail."""
    global passed, failed, quiet

    def cls(f, name):
        return next(d for d in f["dra-deviceclass.yaml"] if d["metadata"]["name"] == name)

    def expr(f, name, edit):
        sel = cls(f, name)["spec"]["selectors"][0]["cel"]
        sel["expression"] = edit(sel["expression"])

    def tmpl(f):
        d = next(d for d in f["dra-claims.yaml"] if d["metadata"]["name"] == "hpn-rdma-share")
        return d["spec"]["spec"]["devices"]["requests"][0]["exactly"]

    sc = shared_class(driver)
    for what, edit in (
            ("the whole NICs' class selects shared devices too",
             lambda f: expr(f, driver, lambda e: e.split(" && ")[0])),
            ("the shared NICs' class selects whole NICs too",
             lambda f: expr(f, sc, lambda e: e.split(" && ")[0])),
            ("the shared NICs' class selects whole NICs alone",
             lambda f: expr(f, sc, lambda e: e.replace("&& has(", "&& !has("))),
            ("the shared NICs' class gone",
             lambda f: f["dra-deviceclass.yaml"].remove(cls(f, sc))),
            ("the share template asks for the whole NICs' class",
             lambda f: tmpl(f).update(deviceClassName=driver)),
            ("the share template asks for two shares",
             lambda f: tmpl(f)["capacity"]["requests"].update({share[1]: "2"})),
            ("the share template's capacity misnamed",
             lambda f: tmpl(f)["capacity"].update(requests={"share": "1"})),
            ("a field the API lacks (capacity.request)",
             lambda f: tmpl(f)["capacity"].update(request={share[1]: "1"})),
            ("the share template asks for two devices", lambda f: tmpl(f).update(count=2)),
            ("the share template gone", lambda f: f["dra-claims.yaml"].remove(
                next(d for d in f["dra-claims.yaml"]
                     if d["metadata"]["name"] == "hpn-rdma-share")))):
        broken = copy.deepcopy(files)
        edit(broken)
        saved, quiet = (passed, failed), True
        try:
            dra(broken, driver, share)
        except (KeyError, IndexError, ValueError, TypeError, StopIteration):
            failed += 1
        got = failed - saved[1]
        (passed, failed), quiet = saved, False
        check(got > 0, f"a broken copy of the DRA manifests ({what}) is refused "
                       f"({got} checks failed)")


def doc_of(files, name, kind):
    return next(d for d in files[name] if d["kind"] == kind)


def agent_of(files):
    return doc_of(files, "hpn-rdma.yaml", "DaemonSet")["spec"]["template"]["spec"]["containers"][0]


def broken_copies(files, k8s, driver):
    def no_mount(path):
        def edit(f, ops):
            a = agent_of(f)
            a["volumeMounts"] = [m for m in a["volumeMounts"] if m["mountPath"] != path]
        return edit

    def drop_verb(res, verb):
        def edit(f, ops):
            for r in doc_of(f, "hpn-rdma-dra.yaml", "ClusterRole")["rules"]:
                if res in r["resources"] and verb in r["verbs"]:
                    r["verbs"].remove(verb)
        return edit

    def no_node_name(f, ops):
        a = agent_of(f)
        a["env"] = [e for e in a["env"] if e["name"] != "NODE_NAME"]

    def other_sa(f, ops):
        c = doc_of(f, "hpn-rdma-dra.yaml", "ValidatingAdmissionPolicy")["spec"]["matchConditions"]
        c[0]["expression"] = c[0]["expression"].replace(":hpn-rdma:hpn-rdma", ":kube-system:x")

    def no_old(f, ops):
        v = doc_of(f, "hpn-rdma-dra.yaml", "ValidatingAdmissionPolicy")["spec"]["validations"]
        v[:] = [x for x in v if "oldObject" not in x["expression"]]
        spec = doc_of(f, "hpn-rdma-dra.yaml", "ValidatingAdmissionPolicy")["spec"]
        spec["variables"] = [x for x in spec["variables"] if "oldObject" not in x["expression"]]

    def more_verbs(f, ops):
        doc_of(f, "hpn-rdma-dra.yaml", "ClusterRole")["rules"].append(
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})

    def bad_field(f, ops):
        doc_of(f, "hpn-rdma-dra.yaml", "ValidatingAdmissionPolicy")["spec"]["matchConstrains"] = {}

    def unbalanced(f, ops):
        v = doc_of(f, "hpn-rdma-dra.yaml", "ValidatingAdmissionPolicy")["spec"]["validations"]
        v[0]["expression"] += ")"

    for what, edit in (
            ("no plugins_registry mount", no_mount("/var/lib/kubelet/plugins_registry")),
            ("no plugins/<driver> mount", no_mount(f"/var/lib/kubelet/plugins/{driver}")),
            ("no CDI dir mount", no_mount("/var/run/cdi")),
            ("no NODE_NAME", no_node_name),
            ("the patch forgets --dra", lambda f, ops: []),
            ("--kubelet-dir elsewhere", lambda f, ops: ops + [{
                "op": "add", "path": "/spec/template/spec/containers/0/args/-",
                "value": "--kubelet-dir=/data/kubelet"}]),
            ("resourceslices without delete", drop_verb("resourceslices", "delete")),
            ("resourceclaims/status without patch", drop_verb("resourceclaims/status", "patch")),
            ("resourceclaims/driver without associated-node:update",
             drop_verb("resourceclaims/driver", "associated-node:update")),
            ("the DRA role also reads secrets", more_verbs),
            ("the policy for another ServiceAccount", other_sa),
            ("the policy without oldObject", no_old),
            ("a field the policy API lacks", bad_field),
            ("an unbalanced CEL expression", unbalanced)):
        refused(files, k8s, driver, what, edit)


def main():
    conf = sys.argv[1]
    src = os.path.dirname(os.path.abspath(conf))
    plugin = conflist(conf, "20-hpn-rdma-gpu.conflist")
    k8s = os.path.join(conf, "k8s")
    files = {}
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
        good = []
        for i, d in enumerate(docs):
            dw = f"{where}[{i}]"
            if not check(isinstance(d, dict) and d.get("kind") in KINDS,
                         f"{dw} is an object of a kind shipped here ({', '.join(KINDS)})"):
                continue
            good.append(d)
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
            if d["kind"] == "ConfigMap":
                check(all(isinstance(v, str) for v in d.get("data", {}).values()),
                      f"{dw}: ConfigMap data values are strings")
            if d["kind"] == "Deployment" and name == "dep-demo-hpn-gpu.yaml":
                seed_deployment(d, dw, plugin)
                seed_broken_copies(d, dw, plugin, False)
            elif d["kind"] == "Deployment" and name == "dep-demo-hpn-gpu-conffile.yaml":
                conffile_deployment(d, dw, plugin)
                seed_broken_copies(d, dw, plugin, True)
            elif d["kind"] in ("Deployment", "DaemonSet"):
                pod_template(d, dw)
        files[name] = good
    selection_policy(files.get("hpn-rdma-selection-policy.yaml", []), plugin)
    check("dep-demo-hpn-gpu.yaml" in files, "k8s/dep-demo-hpn-gpu.yaml holds the seed's Deployment")
    check("dep-demo-hpn-gpu-conffile.yaml" in files,
          "k8s/dep-demo-hpn-gpu-conffile.yaml holds its nccl.confFile variant")
    inst = None
    if check("hpn-rdma.yaml" in files, "k8s/hpn-rdma.yaml: the one manifest of the cluster install"):
        docs = files["hpn-rdma.yaml"]
        check(rbac(docs, "k8s/hpn-rdma.yaml"),
              "k8s/hpn-rdma.yaml holds the plugin's RBAC (ServiceAccount, ClusterRole, binding)")
        inst = cluster(docs, "k8s/hpn-rdma.yaml", conf, src)
    # hpn-rdma-dra.yaml adds the DRA driver's own ClusterRole and binding.
    others = [n for n, docs in files.items() if n != "hpn-rdma.yaml" and
              any(d["kind"] in ("ServiceAccount", "Namespace", "ConfigMap") or
                  (d["kind"] in ("ClusterRole", "ClusterRoleBinding") and
                   n != "hpn-rdma-dra.yaml") for d in docs)]
    check(not others, "no other file repeats the install's objects" +
          (f" (found in {', '.join(others)})" if others else ""))
    if inst:
        un = [d for d in files.get("hpn-rdma-uninstall.yaml", []) if d["kind"] == "DaemonSet"]
        if check(len(un) == 1, "k8s/hpn-rdma-uninstall.yaml holds the uninstall DaemonSet"):
            uninstall(un[0], "k8s/hpn-rdma-uninstall.yaml[0]", inst)
        for d in files.get("hpn-rdma-nad.yaml", []):
            if d["kind"] == "NetworkAttachmentDefinition":
                nw = "k8s/hpn-rdma-nad.yaml"
                check(d["metadata"].get("namespace") == inst["ns"] and
                      d["metadata"].get("annotations", {})
                      .get("k8s.v1.cni.cncf.io/resourceName") == inst["resource"],
                      f"{nw}: in {inst['ns']}, taking its NIC from {inst['resource']}")
                cfg = json.loads(d["spec"]["config"])
                kc = cfg.get("kubernetes", {}).get("kubeconfig")
                check(kc is None or kc == inst["flags"].get("--kubeconfig"),
                      f"{nw}: its kubeconfig, if any, is the one the DaemonSet keeps")
        with open(os.path.join(k8s, "dep-rdma-gpu.yaml")) as f:
            (dep,) = [d for d in yaml.safe_load_all(f) if d]
        rdma_deployment(dep, "k8s/dep-rdma-gpu.yaml[0]", inst["resource"], inst["entry"])
    dra(files, dra_driver(src), dra_share_names(src))
    dra_broken_copies(files, dra_driver(src), dra_share_names(src))
    if inst and check("hpn-rdma-dra.yaml" in files, "k8s/hpn-rdma-dra.yaml is here"):
        dra_install(files, k8s, dra_driver(src))
        broken_copies(files, k8s, dra_driver(src))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
