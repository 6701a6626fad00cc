// SPDX-License-Identifier: Apache-2.0
#include "pod.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

#define WHAT_MAX 512

static void cjson_deletep(cJSON **p)
{
	cJSON_Delete(*p);
}

#define _cleanup_cjson_ __attribute__((cleanup(cjson_deletep)))

static bool lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool alnum(char c)
{
	return lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* s[0..n) is [a-z0-9]([-a-z0-9]*[a-z0-9])? */
static bool dns_label_n(const char *s, size_t n)
{
	if (n == 0 || n > 63 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!lower_alnum(s[i]) && s[i] != '-')
			return false;
	return true;
}

/* s[0..n) is dot-separated DNS labels, at most 253 bytes. */
static bool dns_subdomain_n(const char *s, size_t n)
{
	size_t start = 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '.')
			continue;
		if (!dns_label_n(s + start, i - start))
			return false;
		start = i + 1;
	}
	return true;
}

/* s[0..n) is ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], at most 63 bytes. */
static bool name_part_n(const char *s, size_t n)
{
	if (n == 0 || n > 63 || !alnum(s[0]) || !alnum(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

bool hpn_k8s_dns_label(const char *s)
{
	return s && dns_label_n(s, strlen(s));
}

bool hpn_k8s_dns_subdomain(const char *s)
{
	return s && dns_subdomain_n(s, strlen(s));
}

bool hpn_k8s_qualified_name(const char *s)
{
	const char *slash;

	if (!s)
		return false;
	slash = strchr(s, '/');
	if (!slash)
		return name_part_n(s, strlen(s));
	return dns_subdomain_n(s, (size_t)(slash - s)) && name_part_n(slash + 1, strlen(slash + 1));
}

bool hpn_k8s_label_value(const char *s)
{
	return s && (!s[0] || name_part_n(s, strlen(s)));
}

/*
 * An answer that is not a valid Pod: always code HPN_E_KUBE and -EINVAL. A
 * macro, so that the analyzers (which do not follow variadic calls) see the
 * negative return.
 */
#define bad(err, ...)                                                                              \
	(hpn_err_set(err, HPN_E_KUBE, EINVAL, "the answer is not a valid Pod: " __VA_ARGS__),      \
	 -EINVAL)

/* A value from the answer in a message: valid UTF-8, at most 40 bytes. */
static const char *shown(const char *v, char buf[44])
{
	hpn_utf8_sanitize(buf, v, 41);
	if (strlen(v) > 40)
		memcpy(buf + 40, "...", 4);
	return buf;
}

/* A required string member of obj; what names obj ("pod.metadata"). */
static int req_str(const cJSON *obj, const char *what, const char *key, const char **ret,
		   struct hpn_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!v || cJSON_IsNull(v))
		return bad(err, "%s.%s is missing", what, key);
	if (!cJSON_IsString(v))
		return bad(err, "%s.%s must be a string", what, key);
	*ret = v->valuestring;
	return 0;
}

/* An optional member of the given type (cJSON_Object, cJSON_Array, cJSON_String): NULL if absent. */
static int opt(const cJSON *obj, const char *what, const char *key, int type, const cJSON **ret,
	       struct hpn_err *err)
{
	static const struct {
		int type;
		const char *name;
	} names[] = { { cJSON_Object, "an object" },
		      { cJSON_Array, "an array" },
		      { cJSON_String, "a string" } };
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	*ret = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if ((v->type & 0xff) != type) {
		for (size_t i = 0; i < HPN_ARRAY_SIZE(names); i++)
			if (names[i].type == type)
				return bad(err, "%s.%s must be %s", what, key, names[i].name);
		return bad(err, "%s.%s has the wrong type", what, key);
	}
	*ret = v;
	return 0;
}

/* labels or annotations: an object of strings, keys checked, unique, bounded. */
static int parse_kv(const cJSON *meta, const char *key, bool labels, struct hpn_pod_kv **ret,
		    size_t *ret_n, struct hpn_err *err)
{
	const cJSON *obj, *e;
	struct hpn_pod_kv *kv;
	size_t n = 0, bytes = 0;
	char b1[44], b2[44];
	int r;

	r = opt(meta, "pod.metadata", key, cJSON_Object, &obj, err);
	if (r < 0 || !obj)
		return r;
	cJSON_ArrayForEach (e, obj) {
		if (++n > HPN_POD_META_MAX)
			return bad(err, "pod.metadata.%s has more than %d entries", key,
				   HPN_POD_META_MAX);
	}
	if (!n)
		return 0;
	kv = calloc(n, sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	n = 0;
	cJSON_ArrayForEach (e, obj) {
		const char *k = e->string;

		if (!hpn_k8s_qualified_name(k)) {
			r = bad(err,
				"pod.metadata.%s key \"%s\" is not a Kubernetes qualified name",
				key, shown(k, b1));
			goto fail;
		}
		if (!cJSON_IsString(e)) {
			r = bad(err, "pod.metadata.%s.%s must be a string", key, k);
			goto fail;
		}
		if (labels && !hpn_k8s_label_value(e->valuestring)) {
			r = bad(err, "pod.metadata.%s.%s value \"%s\" is not a label value", key, k,
				shown(e->valuestring, b2));
			goto fail;
		}
		bytes += strlen(k) + strlen(e->valuestring);
		if (bytes > HPN_POD_ANNOTATIONS_BYTES) {
			r = bad(err, "pod.metadata.%s is larger than %zu bytes", key,
				HPN_POD_ANNOTATIONS_BYTES);
			goto fail;
		}
		for (size_t i = 0; i < n; i++) {
			if (!strcmp(kv[i].key, k)) {
				r = bad(err, "pod.metadata.%s.%s is given twice", key, k);
				goto fail;
			}
		}
		kv[n].key = strdup(k);
		kv[n].value = strdup(e->valuestring);
		n++;
		if (!kv[n - 1].key || !kv[n - 1].value) {
			r = -ENOMEM;
			goto fail;
		}
	}
	*ret = kv;
	*ret_n = n;
	return 0;
fail:
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
	return r;
}

/* A quantity of a countable resource: "0".."999999999", as the API writes integers. */
static int quantity(const cJSON *v, const char *what, unsigned long *ret, struct hpn_err *err)
{
	const char *s;
	size_t n;

	if (!cJSON_IsString(v))
		return bad(err, "%s must be a string (the API writes quantities as strings)", what);
	s = v->valuestring;
	n = strlen(s);
	if (n == 0 || n > 9 || strspn(s, "0123456789") != n) {
		char b[44];

		return bad(err, "%s is \"%s\": a count must be a plain non-negative integer", what,
			   shown(s, b));
	}
	*ret = strtoul(s, NULL, 10);
	return 0;
}

/*
 * What container idx of list asks of resource: limits first, requests where
 * there is no limit. *sidecar: an init container with restartPolicy Always.
 */
static int container_count(const cJSON *c, const char *list, size_t idx, const char *resource,
			   unsigned long *ret, bool *sidecar, struct hpn_err *err)
{
	static const char *const kinds[] = { "limits", "requests" };
	char what[WHAT_MAX], field[WHAT_MAX + 16];
	const cJSON *res, *rp;
	int r;

	snprintf(what, sizeof(what), "pod.spec.%s[%zu]", list, idx);
	*ret = 0;
	*sidecar = false;
	if (!cJSON_IsObject(c))
		return bad(err, "%s must be an object", what);
	r = opt(c, what, "restartPolicy", cJSON_String, &rp, err);
	if (r < 0)
		return r;
	if (rp) {
		if (strcmp(list, "initContainers") || strcmp(rp->valuestring, "Always"))
			return bad(err,
				   "%s.restartPolicy must be Always, and only in an init "
				   "container",
				   what);
		*sidecar = true;
	}
	r = opt(c, what, "resources", cJSON_Object, &res, err);
	if (r < 0 || !res)
		return r;
	snprintf(field, sizeof(field), "%s.resources", what);
	for (size_t i = 0; i < HPN_ARRAY_SIZE(kinds); i++) {
		const cJSON *m, *q;
		char qwhat[WHAT_MAX + 32];

		r = opt(res, field, kinds[i], cJSON_Object, &m, err);
		if (r < 0)
			return r;
		q = m ? cJSON_GetObjectItemCaseSensitive(m, resource) : NULL;
		if (!q || cJSON_IsNull(q))
			continue;
		snprintf(qwhat, sizeof(qwhat), "%s.%s.%s", field, kinds[i], resource);
		return quantity(q, qwhat, ret, err);
	}
	return 0;
}

/* See hpn_pod_parse for the rule (the scheduler's PodRequests, one resource). */
static int pod_count(const cJSON *spec, const char *resource, unsigned long *ret,
		     struct hpn_err *err)
{
	unsigned long long sum = 0, sidecars = 0, max_init = 0;
	const cJSON *list, *c;
	size_t i = 0;
	int r;

	r = opt(spec, "pod.spec", "initContainers", cJSON_Array, &list, err);
	if (r < 0)
		return r;
	if (list && cJSON_GetArraySize(list) > HPN_POD_CONTAINERS_MAX)
		return bad(err, "pod.spec.initContainers has more than %d entries",
			   HPN_POD_CONTAINERS_MAX);
	cJSON_ArrayForEach (c, list) {
		unsigned long n;
		bool sidecar;

		r = container_count(c, "initContainers", i++, resource, &n, &sidecar, err);
		if (r < 0)
			return r;
		/* A sidecar runs from here on; a plain init container beside the earlier ones. */
		if (sidecar)
			sidecars += n;
		if ((sidecar ? sidecars : sidecars + n) > max_init)
			max_init = sidecar ? sidecars : sidecars + n;
	}
	r = opt(spec, "pod.spec", "containers", cJSON_Array, &list, err);
	if (r < 0)
		return r;
	if (!list || !cJSON_GetArraySize(list))
		return bad(err, "pod.spec.containers is missing or empty");
	if (cJSON_GetArraySize(list) > HPN_POD_CONTAINERS_MAX)
		return bad(err, "pod.spec.containers has more than %d entries",
			   HPN_POD_CONTAINERS_MAX);
	i = 0;
	cJSON_ArrayForEach (c, list) {
		unsigned long n;
		bool sidecar;

		r = container_count(c, "containers", i++, resource, &n, &sidecar, err);
		if (r < 0)
			return r;
		sum += n;
	}
	sum += sidecars;
	if (max_init > sum)
		sum = max_init;
	if (sum > HPN_POD_COUNT_MAX)
		return bad(err, "the pod asks for %llu %s, more than %lu", sum, resource,
			   HPN_POD_COUNT_MAX);
	*ret = (unsigned long)sum;
	return 0;
}

bool hpn_k8s_uid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > HPN_POD_UID_MAX)
		return false;
	for (; *s; s++)
		if (!alnum(*s) && *s != '-')
			return false;
	return true;
}

int hpn_pod_parse(const char *json, size_t len, const char *resource, struct hpn_pod *ret,
		  struct hpn_err *err)
{
	_cleanup_cjson_ cJSON *root = NULL;
	struct hpn_pod pod = { 0 };
	const cJSON *meta, *spec;
	const char *kind, *api, *uid, *ns, *name;
	char b[44];
	int r;

	if (!resource)
		resource = HPN_POD_GPU_RESOURCE;
	if (!hpn_k8s_qualified_name(resource))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "resource name \"%s\" is not a Kubernetes resource name",
				   shown(resource, b));
	if (hpn_json_has_nul(json, len))
		return bad(err, "it holds a \\u0000 escape");
	root = hpn_json_parse(json, len);
	if (!root)
		return bad(err, "it is not valid JSON");
	if (!cJSON_IsObject(root))
		return bad(err, "it is not a JSON object");
	r = req_str(root, "pod", "kind", &kind, err);
	if (r < 0)
		return r;
	r = req_str(root, "pod", "apiVersion", &api, err);
	if (r < 0)
		return r;
	if (strcmp(kind, "Pod") || strcmp(api, "v1"))
		return bad(err, "it is a %s/%s, not a v1/Pod", shown(api, b), kind);
	r = opt(root, "pod", "metadata", cJSON_Object, &meta, err);
	if (r < 0)
		return r;
	if (!meta)
		return bad(err, "pod.metadata is missing");
	r = req_str(meta, "pod.metadata", "uid", &uid, err);
	if (r < 0)
		return r;
	if (!hpn_k8s_uid(uid))
		return bad(err, "pod.metadata.uid \"%s\" is not a UID", shown(uid, b));
	r = req_str(meta, "pod.metadata", "namespace", &ns, err);
	if (r < 0)
		return r;
	if (!hpn_k8s_dns_label(ns))
		return bad(err, "pod.metadata.namespace \"%s\" is not a namespace name",
			   shown(ns, b));
	r = req_str(meta, "pod.metadata", "name", &name, err);
	if (r < 0)
		return r;
	if (!hpn_k8s_dns_subdomain(name))
		return bad(err, "pod.metadata.name \"%s\" is not a pod name", shown(name, b));
	r = opt(root, "pod", "spec", cJSON_Object, &spec, err);
	if (r < 0)
		return r;
	if (!spec)
		return bad(err, "pod.spec is missing");
	r = pod_count(spec, resource, &pod.count, err);
	if (r < 0)
		return r;
	pod.uid = strdup(uid);
	pod.ns = strdup(ns);
	pod.name = strdup(name);
	pod.resource = strdup(resource);
	if (!pod.uid || !pod.ns || !pod.name || !pod.resource) {
		hpn_pod_free(&pod);
		return -ENOMEM;
	}
	r = parse_kv(meta, "labels", true, &pod.labels, &pod.n_labels, err);
	if (r == 0)
		r = parse_kv(meta, "annotations", false, &pod.annotations, &pod.n_annotations, err);
	if (r < 0) {
		hpn_pod_free(&pod);
		return r;
	}
	*ret = pod;
	return 0;
}

static void kv_free(struct hpn_pod_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

void hpn_pod_free(struct hpn_pod *pod)
{
	if (!pod)
		return;
	free(pod->uid);
	free(pod->ns);
	free(pod->name);
	free(pod->resource);
	kv_free(pod->labels, pod->n_labels);
	kv_free(pod->annotations, pod->n_annotations);
	memset(pod, 0, sizeof(*pod));
}

static const char *kv_get(const struct hpn_pod_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; key && i < n; i++)
		if (!strcmp(kv[i].key, key))
			return kv[i].value;
	return NULL;
}

const char *hpn_pod_label(const struct hpn_pod *pod, const char *key)
{
	return kv_get(pod->labels, pod->n_labels, key);
}

const char *hpn_pod_annotation(const struct hpn_pod *pod, const char *key)
{
	return kv_get(pod->annotations, pod->n_annotations, key);
}
