// SPDX-License-Identifier: Apache-2.0
/*
 * What ADD asks and tells about the pod around its steps (session.h): before
 * anything changes, the pod from the API or the agent's cache, its hints key
 * and GPU count, its GPUs placed, the runtime's NRI readiness; after, the
 * agent told that the pod's DRA NICs are attached.
 */
#include "session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kube.h"
#include "log.h"
#include "podask.h"
#include "util.h"

/* What the pod itself decides before anything changes: hints key, GPU count. */
int hpn_add_pod_checks(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	const char *uid = hpn_env_arg(env, "K8S_POD_UID");

	if (!conf->nccl.enabled)
		return 0;
	if (uid && !hpn_nccl_valid_key(uid))
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
				   "CNI_ARGS K8S_POD_UID \"%.64s\" cannot name the hints directory "
				   "([A-Za-z0-9][A-Za-z0-9_.-]*, at most %d bytes)",
				   uid, HPN_NCCL_KEY_MAX - 1);
	return hpn_nccl_check_gpus(hpn_nccl_profile(&conf->nccl, conf->gpu_model), conf->gpu_count,
				   err);
}

/*
 * The pod's GPUs as the agent listed them (gpus.enabled), placed on the PCI
 * tree; *ret stays NULL when it has none. The GPU count, when nothing else
 * said it, is theirs, and the profile must allow it.
 */
int hpn_add_pod_gpus(struct hpn_conf *conf, const struct hpn_alloc *al, struct hpn_gpus **ret,
		     struct hpn_err *err)
{
	struct hpn_gpus *g;
	int r;

	if (!conf->gpus.enabled || !al->n_gpus)
		return 0;
	g = calloc(1, sizeof(*g));
	if (!g)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	r = hpn_gpus_resolve(conf->gpus.proc_root, conf->sysfs_root, al->gpus, al->n_gpus, g, err);
	if (r >= 0 && conf->gpus.per_gpu && g->n > HPN_MAX_NICS)
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, E2BIG,
				"gpus.nicPerGpu: the pod has %zu GPUs, over the %d NICs of one "
				"attachment",
				g->n, HPN_MAX_NICS);
	if (r >= 0 && !conf->gpu_count && g->n <= HPN_NCCL_MAX_GPUS) {
		conf->gpu_count = (int)g->n;
		if (conf->nccl.enabled)
			r = hpn_nccl_check_gpus(hpn_nccl_profile(&conf->nccl, conf->gpu_model),
						conf->gpu_count, err);
	}
	if (r < 0) {
		free(g);
		return r;
	}
	hpn_info("the pod's GPUs: %zu, %zu of them placed under %s", g->n, g->n - g->n_unknown,
		 conf->gpus.proc_root);
	*ret = g;
	return 0;
}

/*
 * The pod from hpn-rdma-agent's cache of the node's pods (podask.h), when
 * the config asks the agent and one listens: 0 with *ret; < 0 (no agent, not
 * known to it, too slow, a bad answer) and the caller asks the API itself.
 */
static int pod_from_agent(const struct hpn_conf *conf, const struct hpn_kube_req *kreq,
			  struct hpn_pod *ret)
{
	const char *sock = conf->agent.socket ? conf->agent.socket : HPN_DEFAULT_AGENT_SOCKET;
	int timeout = conf->agent.timeout_ms > 0 && conf->agent.timeout_ms < HPN_PODASK_TIMEOUT_MS
			      ? conf->agent.timeout_ms
			      : HPN_PODASK_TIMEOUT_MS;
	struct hpn_err err = { 0 };
	struct hpn_alloc_req req;
	struct stat st;
	int r;

	if (!conf->agent.lookup || stat(sock, &st) < 0)
		return -ENOENT;
	r = hpn_alloc_req_set(&req, kreq->ns, kreq->name, kreq->uid, &err);
	if (r >= 0) {
		hpn_podask_keys(conf, &req.keys);
		r = hpn_podask(sock, timeout, &req, kreq->resource, ret, &err);
	}
	if (r < 0) {
		hpn_info("pod %s/%s: not from hpn-rdma-agent (%s): asking the Kubernetes API",
			 kreq->ns, kreq->name, err.msg);
		return r;
	}
	hpn_info("pod %s/%s from hpn-rdma-agent's pod cache (%s): uid %s, %lu %s", ret->ns,
		 ret->name, conf->pod_lookup_why, ret->uid, ret->count, ret->resource);
	return 0;
}

/*
 * The pod from the Kubernetes API, when its annotations left the decision
 * open (conf->pod_lookup): read before anything on the node changes, and
 * applied to conf (hpn_conf_apply_pod). Every failure is a CNI error, with
 * nothing to undo.
 */
int hpn_add_pod_lookup(const struct hpn_env *env, struct hpn_conf *conf, struct hpn_err *err)
{
	static const char *const keys[] = { "K8S_POD_NAMESPACE", "K8S_POD_NAME", "K8S_POD_UID" };
	const char *v[HPN_ARRAY_SIZE(keys)];
	char missing[64] = "";
	struct hpn_kube_warn warn = { 0 };
	struct hpn_kube_req req;
	struct hpn_kubeconfig kc;
	struct hpn_pod pod;
	int r;

	for (size_t i = 0; i < HPN_ARRAY_SIZE(keys); i++) {
		v[i] = hpn_env_arg(env, keys[i]);
		if (!v[i] || !v[i][0])
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing),
				 "%s%s", missing[0] ? ", " : "", keys[i]);
	}
	if (missing[0])
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
				   "ADD must read the pod from the Kubernetes API (%s), but "
				   "CNI_ARGS lacks %s",
				   conf->pod_lookup_why, missing);
	req = (struct hpn_kube_req){ .ns = v[0],
				     .name = v[1],
				     .uid = v[2],
				     .resource = conf->kube.gpu_resource,
				     .timeout_ms = conf->kube.timeout_ms };
	if (pod_from_agent(conf, &req, &pod) == 0)
		goto apply;
	r = hpn_kubeconfig_load(conf->kube.kubeconfig, &kc, &warn, err);
	if (r < 0) {
		if (warn.msg[0])
			hpn_warn("%s", warn.msg);
		hpn_err_prefix(err, "read pod %s/%s from the Kubernetes API (%s)", req.ns, req.name,
			       conf->pod_lookup_why);
		return r;
	}
	r = hpn_kube_get_pod(&kc, &req, &pod, &warn, err);
	if (warn.msg[0])
		hpn_warn("%s", warn.msg);
	if (r < 0) {
		hpn_kubeconfig_free(&kc);
		return r;
	}
	hpn_info("pod %s/%s from the Kubernetes API %s (%s): uid %s, %lu %s", pod.ns, pod.name,
		 kc.server, conf->pod_lookup_why, pod.uid, pod.count, pod.resource);
	hpn_kubeconfig_free(&kc);
apply:
	r = hpn_conf_apply_pod(conf, &pod, err);
	hpn_pod_free(&pod);
	if (r == 0 && conf->pod_selected)
		hpn_info("pod %s/%s: selected (podSelector %s), GPU model %s, %d GPUs", req.ns,
			 req.name, conf->pod_selector ? conf->pod_selector : "none",
			 conf->gpu_model ? conf->gpu_model : "none", conf->gpu_count);
	return r;
}

/*
 * nri.required: the containers of the pod get their RDMA devices only from
 * hpn-rdma-agent's NRI plugin at CreateContainer, and a runtime whose link
 * to it is down starts them without (containerd 2.1 skips a plugin whose
 * connection died). So ADD asks the agent first, before anything on the
 * node changes: no agent, or a link not registered, is code 11, and the
 * kubelet tries the sandbox again. The pod named in the question (when
 * CNI_ARGS has a valid one) is for the agent's log only.
 */
int hpn_add_nri_ready(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	const char *sock = conf->agent.socket ? conf->agent.socket : HPN_DEFAULT_AGENT_SOCKET;
	struct hpn_err lerr = { 0 }, ignored = { 0 };
	struct hpn_alloc_req req;
	struct hpn_nri_state st;
	bool pod;
	int r;

	pod = hpn_alloc_req_set(&req, hpn_env_arg(env, "K8S_POD_NAMESPACE"),
				hpn_env_arg(env, "K8S_POD_NAME"), hpn_env_arg(env, "K8S_POD_UID"),
				&ignored) == 0;
	r = hpn_nri_ask(sock, conf->agent.timeout_ms, pod ? &req : NULL, &st, &lerr);
	if (r == -ENOENT || r == -ECONNREFUSED)
		return hpn_err_set(
			err, HPN_E_TRY_AGAIN, -r,
			"nri.required is true, but no hpn-rdma-agent answers at %s (%s): "
			"its NRI link is down, and containers of this pod would start "
			"without their RDMA devices",
			sock, strerror(-r));
	if (r < 0) {
		hpn_err_set(err, lerr.code ? lerr.code : HPN_E_TRY_AGAIN, -r,
			    "nri.required is true, but hpn-rdma-agent at %s cannot say whether "
			    "its NRI link is up (%s): containers of this pod could start without "
			    "their RDMA devices",
			    sock, lerr.msg[0] ? lerr.msg : strerror(-r));
		if (lerr.details[0])
			hpn_err_details(err, "%s", lerr.details);
		return r;
	}
	if (!st.registered)
		return hpn_err_set(err, HPN_E_TRY_AGAIN, EAGAIN,
				   "nri.required is true, but hpn-rdma-agent's NRI link is down, "
				   "and containers of this pod would start without their RDMA "
				   "devices: %s (the agent at %s)",
				   st.why[0] ? st.why : "not registered with the runtime", sock);
	hpn_info("hpn-rdma-agent's NRI link is registered%s%s%s%s: the pod's containers get "
		 "their RDMA devices",
		 st.runtime[0] ? " with " : "", st.runtime, st.version[0] ? " " : "", st.version);
	return 0;
}

/*
 * The pod's NICs came from its DRA claims: the agent is told that ADD is
 * done, and waits with its answer until the claims' device metadata files
 * hold the pod's networkData (doc/dra.md), so a container the runtime
 * creates after ADD mounts the file with it. Best effort: the attachment
 * stands whatever the agent says (a file without networkData, logged).
 */
void hpn_add_tell_attached(const struct hpn_env *env, const struct hpn_conf *conf)
{
	const char *sock = conf->agent.socket ? conf->agent.socket : HPN_DEFAULT_AGENT_SOCKET;
	const char *ns = hpn_env_arg(env, "K8S_POD_NAMESPACE"),
		   *name = hpn_env_arg(env, "K8S_POD_NAME");
	struct hpn_alloc_req req = { 0 };
	struct hpn_err err = { 0 };

	if (hpn_alloc_req_set(&req, ns, name, hpn_env_arg(env, "K8S_POD_UID"), &err) < 0 ||
	    hpn_attached_tell(sock, conf->agent.timeout_ms, &req, &err) < 0)
		hpn_warn(
			"pod %.253s/%.253s: hpn-rdma-agent not told that ADD is done (%s): its DRA "
			"claims' device metadata lacks networkData",
			ns ? ns : "?", name ? name : "?", err.msg);
	else
		hpn_info("pod %.253s/%.253s: hpn-rdma-agent wrote its DRA claims' networkData",
			 ns ? ns : "?", name ? name : "?");
}
