// SPDX-License-Identifier: Apache-2.0
#include "conf.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_read.h"
#include "kubeconfig.h"
#include "pod.h"
#include "util.h"

#define POD_ANNOTATIONS	    "io.kubernetes.cri.pod-annotations"
#define DEFAULT_SEL_KEY	    "alibabacloud.com/hpn-type"
#define DEFAULT_SEL_VALUE   "rdma"
#define DEFAULT_MODEL_ANNO  "alibabacloud.com/gpu-model-series"
#define DEFAULT_COUNT_ANNO  "alibabacloud.com/gpu-count"
#define DEFAULT_MODEL_LABEL "alibabacloud.com/gpu-model-series"

/* A string annotation of the pod (runtimeConfig's pod-annotations); NULL when absent. */
static int pod_annotation(const cJSON *annos, const char *key, const char **ret,
			  struct hpn_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(annos, key);

	*ret = NULL;
	if (!v)
		return 0;
	if (!cJSON_IsString(v))
		return hpn_err_set(
			err, HPN_E_INVALID_CONFIG, EINVAL,
			"runtimeConfig.\"" POD_ANNOTATIONS "\".\"%.64s\" must be a string", key);
	*ret = v->valuestring;
	return 0;
}

/* "env": {"NCCL_DEBUG": "INFO"}: NCCL names, values NCCL reads whole, none we compute. */
static int parse_env(const cJSON *obj, const char *path, struct hpn_vars *vars, struct hpn_err *err)
{
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(obj, "env"), *v;

	if (!env || cJSON_IsNull(env))
		return 0;
	if (!cJSON_IsObject(env))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "%senv must be an object",
				   path);
	cJSON_ArrayForEach (v, env) {
		int r;

		if (!hpn_nccl_valid_name(v->string))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "%senv.%.64s is not an NCCL variable name "
					   "(NCCL_[A-Z0-9_]+, at most %d bytes)",
					   path, v->string, HPN_NCCL_NAME_MAX);
		if (hpn_nccl_computed_name(v->string))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "%senv.%s is computed from the bound devices and cannot "
					   "be set",
					   path, v->string);
		if (!cJSON_IsString(v) || !hpn_nccl_valid_value(v->valuestring))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "%senv.%s must be a string of printable ASCII, at most "
					   "%d bytes",
					   path, v->string, HPN_NCCL_VALUE_MAX);
		if (hpn_vars_get(vars, v->string))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "%senv.%s is repeated", path, v->string);
		r = hpn_vars_set(vars, v->string, v->valuestring);
		if (r == -E2BIG)
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, E2BIG,
					   "%senv has more than %d settings", path, HPN_MAX_VARS);
		if (r < 0)
			return r;
	}
	return 0;
}

/* "profiles": {"GU8TF": {"ib": "on", "drivers": ["mlx5"], "gpuCounts": [8], "env": {}}} */
static int parse_profile(const cJSON *o, struct hpn_nccl_profile *p, struct hpn_err *err)
{
	static const struct hpn_conf_name ib_modes[] = {
		{ "auto", HPN_NCCL_IB_AUTO },
		{ "on", HPN_NCCL_IB_ON },
		{ "off", HPN_NCCL_IB_OFF },
	};
	char path[160];
	_cleanup_free_ char *ib = NULL;
	const cJSON *arr, *v;
	int r, mode = HPN_NCCL_IB_AUTO;

	snprintf(path, sizeof(path), "nccl.profiles.%.64s.", o->string);
	if (!cJSON_IsObject(o))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "%.*s must be an object",
				   (int)strlen(path) - 1, path);
	if (!o->string[0] || strlen(o->string) > 64)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "nccl.profiles: a GPU model series name has 1-64 bytes");
	p->name = strdup(o->string);
	if (!p->name)
		return -ENOMEM;
	/* A driver's profile applies to its devices whatever the model: its env alone. */
	if (hpn_nccl_driver_profile_name(p->name)) {
		static const char *const model_only[] = { "ib", "drivers", "gpuCounts" };

		for (size_t i = 0; i < HPN_ARRAY_SIZE(model_only); i++)
			if (cJSON_GetObjectItemCaseSensitive(o, model_only[i]))
				return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
						   "%s%s: %s names a driver, whose profile is "
						   "chosen by the bound devices and holds only env",
						   path, model_only[i], p->name);
	}
	r = hpn_conf_str(o, "ib", path, &ib, err);
	if (r >= 0)
		r = hpn_conf_pick(path, "ib", ib, ib_modes, HPN_ARRAY_SIZE(ib_modes), &mode, err);
	if (r < 0)
		return r;
	p->ib = (enum hpn_nccl_ib)mode;
	arr = cJSON_GetObjectItemCaseSensitive(o, "drivers");
	if (arr && !cJSON_IsArray(arr))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "%sdrivers must be an array",
				   path);
	cJSON_ArrayForEach (v, arr) {
		unsigned int bit = cJSON_IsString(v) ? hpn_nccl_driver_bit(v->valuestring) : 0;

		if (!bit)
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "%sdrivers: each is one of mlx5, erdma, rxe, other",
					   path);
		p->drivers |= bit;
	}
	arr = cJSON_GetObjectItemCaseSensitive(o, "gpuCounts");
	if (arr && !cJSON_IsArray(arr))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "%sgpuCounts must be an array", path);
	cJSON_ArrayForEach (v, arr) {
		if (!cJSON_IsNumber(v) || v->valuedouble != (double)v->valueint ||
		    v->valueint < 1 || v->valueint > HPN_NCCL_MAX_GPUS)
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "%sgpuCounts: each is an integer 1-%d", path,
					   HPN_NCCL_MAX_GPUS);
		p->gpu_counts |= UINT64_C(1) << v->valueint;
	}
	return parse_env(o, path, &p->env, err);
}

/*
 * "trafficClass": "profile" | "auto", "losslessRequired": false. With auto
 * the class is the node's: a network-wide NCCL_IB_TC, NCCL_IB_FIFO_TC or
 * NCCL_IB_SL in env would contradict it (a profile's is what auto replaces).
 */
static int parse_qos(const cJSON *o, struct hpn_nccl_conf *nc, struct hpn_err *err)
{
	static const struct hpn_conf_name modes[] = { { "profile", 0 }, { "auto", 1 } };
	static const char *const derived[] = { "NCCL_IB_TC", "NCCL_IB_FIFO_TC", "NCCL_IB_SL" };
	_cleanup_free_ char *mode = NULL;
	int tc_auto = 0, r;

	r = hpn_conf_str(o, "trafficClass", "nccl.", &mode, err);
	if (r >= 0)
		r = hpn_conf_pick("nccl.", "trafficClass", mode, modes, HPN_ARRAY_SIZE(modes),
				  &tc_auto, err);
	if (r >= 0)
		r = hpn_json_bool(o, "losslessRequired", "nccl.", HPN_E_INVALID_CONFIG,
				  &nc->lossless_required, err);
	if (r < 0)
		return r;
	nc->tc_auto = tc_auto;
	for (size_t i = 0; tc_auto && i < HPN_ARRAY_SIZE(derived); i++)
		if (hpn_vars_get(&nc->env, derived[i]))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "nccl.env.%s contradicts nccl.trafficClass \"auto\", "
					   "which derives it from the node's lossless class",
					   derived[i]);
	return 0;
}

int hpn_conf_parse_nccl(struct hpn_conf *conf, const void *vroot, struct hpn_err *err)
{
	const cJSON *root = vroot;
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "nccl"), *profiles, *v;
	struct hpn_nccl_conf *nc = &conf->nccl;
	int r;

	nc->enabled = true;
	if (o && !cJSON_IsNull(o) && !cJSON_IsObject(o))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "nccl must be an object");
	if (!cJSON_IsObject(o))
		o = NULL;
	r = hpn_json_bool(o, "enabled", "nccl.", HPN_E_INVALID_CONFIG, &nc->enabled, err);
	if (r >= 0)
		r = hpn_conf_abs_path(o, "nccl.", "dir", HPN_DEFAULT_NCCL_DIR, &nc->dir, err);
	if (r >= 0)
		r = hpn_conf_abs_path(o, "nccl.", "confFile", HPN_DEFAULT_NCCL_CONF_FILE,
				      &nc->conf_file, err);
	if (r >= 0 && !hpn_nccl_valid_conf_file(nc->conf_file))
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				"nccl.confFile \"%.64s\" must be a file's absolute path of "
				"letters, digits, '.', '_', '-' and '/', without . or .. "
				"(at most %d bytes)",
				nc->conf_file, HPN_NCCL_VALUE_MAX);
	if (r >= 0)
		r = hpn_conf_str(o, "socketIfname", "nccl.", &nc->socket_ifname, err);
	if (r < 0)
		return r;
	if (nc->socket_ifname &&
	    (!nc->socket_ifname[0] || !hpn_nccl_valid_value(nc->socket_ifname)))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "nccl.socketIfname must be a non-empty NCCL_SOCKET_IFNAME value "
				   "(printable, at most %d bytes)",
				   HPN_NCCL_VALUE_MAX);
	r = parse_env(o, "nccl.", &nc->env, err);
	if (r >= 0)
		r = parse_qos(o, nc, err);
	if (r < 0)
		return r;
	profiles = cJSON_GetObjectItemCaseSensitive(o, "profiles");
	if (profiles && !cJSON_IsObject(profiles))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "nccl.profiles must be an object");
	if (cJSON_GetArraySize(profiles) > HPN_NCCL_MAX_PROFILES)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, E2BIG,
				   "nccl.profiles has more than %d entries", HPN_NCCL_MAX_PROFILES);
	if (cJSON_GetArraySize(profiles) > 0) {
		nc->profiles = calloc((size_t)cJSON_GetArraySize(profiles), sizeof(*nc->profiles));
		if (!nc->profiles)
			return -ENOMEM;
	}
	cJSON_ArrayForEach (v, profiles) {
		r = parse_profile(v, &nc->profiles[nc->n_profiles++], err);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * "kubernetes": {"kubeconfig": "/etc/cni/net.d/hpn-rdma.d/hpn-rdma.kubeconfig",
 * "timeout": 5000, "gpuResource": "nvidia.com/gpu"}. Only the shape is
 * checked here: the file is read by the ADD that needs it, and by no other
 * command (a kubeconfig that is gone must not fail DEL).
 */
static int parse_kubernetes(struct hpn_conf *conf, const cJSON *root, struct hpn_err *err)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(root, "kubernetes");
	struct hpn_kube_conf *kc = &conf->kube;
	int timeout = HPN_KUBE_TIMEOUT_MS_DEFAULT, r;

	if (!k || cJSON_IsNull(k))
		return 0;
	if (!cJSON_IsObject(k))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "kubernetes must be an object");
	r = hpn_conf_abs_path(k, "kubernetes.", "kubeconfig", NULL, &kc->kubeconfig, err);
	if (r < 0)
		return r;
	if (!kc->kubeconfig)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "kubernetes.kubeconfig is required (the kubeconfig file of "
				   "the plugin's identity, an absolute path)");
	r = hpn_json_int(k, "timeout", "kubernetes.", HPN_E_INVALID_CONFIG, 1,
			 HPN_KUBE_TIMEOUT_MS_MAX, &timeout, NULL, err);
	if (r >= 0)
		r = hpn_conf_str(k, "gpuResource", "kubernetes.", &kc->gpu_resource, err);
	if (r < 0)
		return r;
	kc->timeout_ms = (unsigned int)timeout;
	if (!kc->gpu_resource) {
		kc->gpu_resource = strdup(HPN_POD_GPU_RESOURCE);
		return kc->gpu_resource ? 0 : -ENOMEM;
	}
	if (!hpn_k8s_qualified_name(kc->gpu_resource))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "kubernetes.gpuResource \"%.64s\" is not a resource name like "
				   "nvidia.com/gpu",
				   kc->gpu_resource);
	return 0;
}

/* podSelector: which pods are attached; the others pass prevResult through. */
static int parse_selector(struct hpn_conf *conf, const cJSON *sel, const cJSON *annos,
			  struct hpn_err *err)
{
	const char *a;
	int r;

	conf->pod_selected = false;
	if (!cJSON_IsObject(sel))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "podSelector must be an object");
	r = hpn_conf_str(sel, "annotation", "podSelector.", &conf->pod_annotation, err);
	if (r >= 0)
		r = hpn_conf_str(sel, "label", "podSelector.", &conf->pod_label, err);
	if (r >= 0)
		r = hpn_conf_str(sel, "value", "podSelector.", &conf->pod_value, err);
	if (r < 0)
		return r;
	if (conf->pod_annotation && !conf->pod_annotation[0])
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "podSelector.annotation must not be empty");
	/* Neither named: the annotation the managed service sets, as before labels. */
	if (!conf->pod_annotation && !conf->pod_label) {
		conf->pod_annotation = strdup(DEFAULT_SEL_KEY);
		if (!conf->pod_annotation)
			return -ENOMEM;
	}
	if (!conf->pod_value) {
		conf->pod_value = strdup(DEFAULT_SEL_VALUE);
		if (!conf->pod_value)
			return -ENOMEM;
	}
	if (conf->pod_label) {
		if (!hpn_k8s_qualified_name(conf->pod_label))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "podSelector.label \"%.64s\" is not a label key like "
					   "alibabacloud.com/hpn-type",
					   conf->pod_label);
		/* A value no label can have would never select. */
		if (!hpn_k8s_label_value(conf->pod_value))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "podSelector.value \"%.64s\" is not a label value "
					   "(at most 63 of [A-Za-z0-9_.-], alphanumeric at both "
					   "ends), so podSelector.label could never select",
					   conf->pod_value);
		if (!conf->kube.kubeconfig)
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "podSelector.label needs kubernetes.kubeconfig: no "
					   "container runtime passes pod labels to CNI plugins, so "
					   "ADD reads them from the Kubernetes API");
	}
	/* For messages: "key=value", "label key=value", or both joined by " or ". */
	if (!conf->pod_label)
		r = asprintf(&conf->pod_selector, "%s=%s", conf->pod_annotation, conf->pod_value);
	else if (!conf->pod_annotation)
		r = asprintf(&conf->pod_selector, "label %s=%s", conf->pod_label, conf->pod_value);
	else
		r = asprintf(&conf->pod_selector, "%s=%s or label %s=%s", conf->pod_annotation,
			     conf->pod_value, conf->pod_label, conf->pod_value);
	if (r < 0) {
		conf->pod_selector = NULL;
		return -ENOMEM;
	}
	if (!conf->pod_annotation)
		return 0;
	r = pod_annotation(annos, conf->pod_annotation, &a, err);
	if (r < 0)
		return r;
	conf->pod_selected = a && !strcmp(a, conf->pod_value);
	return 0;
}

/*
 * podSelector and the GPU model and count, from the pod's annotations (the
 * capability containerd and CRI-O fill for plugins that declare it) or config;
 * and whether ADD must read the rest from the Kubernetes API.
 */
int hpn_conf_parse_pod(struct hpn_conf *conf, const void *vroot, const void *vrc,
		       struct hpn_err *err)
{
	const cJSON *root = vroot, *rc = vrc;
	const cJSON *sel = cJSON_GetObjectItemCaseSensitive(root, "podSelector");
	const cJSON *nccl = cJSON_GetObjectItemCaseSensitive(root, "nccl");
	const cJSON *annos = cJSON_GetObjectItemCaseSensitive(rc, POD_ANNOTATIONS);
	_cleanup_free_ char *count_key = NULL;
	const char *a;
	int r;

	if (!cJSON_IsObject(nccl))
		nccl = NULL;
	if (annos && !cJSON_IsNull(annos) && !cJSON_IsObject(annos))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "runtimeConfig.\"" POD_ANNOTATIONS "\" must be an object");
	if (!cJSON_IsObject(annos))
		annos = NULL;
	r = parse_kubernetes(conf, root, err);
	if (r < 0)
		return r;
	conf->pod_selected = true;
	if (sel && !cJSON_IsNull(sel)) {
		r = parse_selector(conf, sel, annos, err);
		if (r < 0)
			return r;
	}

	r = hpn_conf_str(nccl, "gpuModelAnnotation", "nccl.", &conf->gpu_model_annotation, err);
	if (r >= 0)
		r = hpn_conf_str(nccl, "gpuModelLabel", "nccl.", &conf->gpu_model_label, err);
	if (r >= 0)
		r = hpn_conf_str(nccl, "gpuCountAnnotation", "nccl.", &count_key, err);
	if (r >= 0)
		r = hpn_conf_str(nccl, "gpuModel", "nccl.", &conf->gpu_model, err);
	if (r >= 0)
		r = hpn_json_int(nccl, "gpuCount", "nccl.", HPN_E_INVALID_CONFIG, 1,
				 HPN_NCCL_MAX_GPUS, &conf->gpu_count, NULL, err);
	if (r < 0)
		return r;
	if (!conf->gpu_model_annotation)
		conf->gpu_model_annotation = strdup(DEFAULT_MODEL_ANNO);
	if (!conf->gpu_model_label)
		conf->gpu_model_label = strdup(DEFAULT_MODEL_LABEL);
	if (!conf->gpu_model_annotation || !conf->gpu_model_label)
		return -ENOMEM;
	if (!hpn_k8s_qualified_name(conf->gpu_model_label))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "nccl.gpuModelLabel \"%.64s\" is not a label key like "
				   "alibabacloud.com/gpu-model-series",
				   conf->gpu_model_label);
	r = pod_annotation(annos, conf->gpu_model_annotation, &a, err);
	if (r < 0)
		return r;
	if (a) {
		free(conf->gpu_model);
		conf->gpu_model = strdup(a);
		if (!conf->gpu_model)
			return -ENOMEM;
		conf->gpu_model_annotated = true;
	}
	r = pod_annotation(annos, count_key ? count_key : DEFAULT_COUNT_ANNO, &a, err);
	if (r < 0)
		return r;
	if (a) {
		char *end;
		long n;

		errno = 0;
		n = strtol(a, &end, 10);
		if (a[0] < '1' || a[0] > '9' || *end || errno || n > HPN_NCCL_MAX_GPUS)
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "pod annotation %s \"%.32s\" is not a GPU count (1-%d)",
					   count_key ? count_key : DEFAULT_COUNT_ANNO, a,
					   HPN_NCCL_MAX_GPUS);
		conf->gpu_count = (int)n;
		conf->gpu_count_annotated = true;
	}

	/* What the annotations left open, and only the API can say. */
	if (!conf->kube.kubeconfig)
		return 0;
	if (conf->pod_label && !conf->pod_selected)
		conf->pod_lookup_why = "podSelector.label decides";
	else if (conf->pod_selected && conf->nccl.enabled && !conf->gpu_model_annotated)
		conf->pod_lookup_why = "the GPU model is not in the pod's annotations";
	else if (conf->pod_selected && conf->nccl.enabled && !conf->gpu_count_annotated)
		conf->pod_lookup_why = "the GPU count is not in the pod's annotations";
	conf->pod_lookup = conf->pod_lookup_why != NULL;
	return 0;
}

int hpn_conf_apply_pod(struct hpn_conf *conf, const struct hpn_pod *pod, struct hpn_err *err)
{
	const char *v;

	conf->pod_lookup = false;
	if (conf->pod_label && !conf->pod_selected) {
		v = hpn_pod_label(pod, conf->pod_label);
		conf->pod_selected = v && !strcmp(v, conf->pod_value);
	}
	if (!conf->pod_selected)
		return 0;
	if (!conf->gpu_model_annotated) {
		v = hpn_pod_label(pod, conf->gpu_model_label);
		if (!v)
			v = hpn_pod_annotation(pod, conf->gpu_model_annotation);
		if (v) {
			char *m = strdup(v);

			if (!m)
				return -ENOMEM;
			free(conf->gpu_model);
			conf->gpu_model = m;
		}
	}
	/* A pod without the resource keeps the config's count (0: unknown). */
	if (!conf->gpu_count_annotated && pod->count > 0) {
		if (pod->count > HPN_NCCL_MAX_GPUS)
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "pod %s/%s asks for %lu %s, more than a GPU count can "
					   "be (1-%d)",
					   pod->ns, pod->name, pod->count, pod->resource,
					   HPN_NCCL_MAX_GPUS);
		conf->gpu_count = (int)pod->count;
	}
	return 0;
}
