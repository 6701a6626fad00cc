// SPDX-License-Identifier: Apache-2.0
#include "alloc.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pod.h"
#include "sysfs.h"
#include "util.h"

static void cjson_deletep(cJSON **p)
{
	cJSON_Delete(*p);
}
#define _cleanup_cjson_ __attribute__((cleanup(cjson_deletep)))

void hpn_alloc_nic_id(const char *sysfs_root, const char *ifname, char id[HPN_ALLOC_ID_MAX])
{
	char pci[HPN_PCI_STR];

	if (hpn_sysfs_netdev_pci(sysfs_root, ifname, pci) == 0)
		snprintf(id, HPN_ALLOC_ID_MAX, "%s", pci);
	else
		snprintf(id, HPN_ALLOC_ID_MAX, "%s", ifname);
}

void hpn_alloc_journal_id(const struct hpn_journal_nic *n, char id[HPN_ALLOC_ID_MAX])
{
	snprintf(id, HPN_ALLOC_ID_MAX, "%s", n->pci[0] ? n->pci : n->host.name);
}

static bool charset(const char *s, size_t max, const char *extra, bool upper)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		      (upper && *s >= 'A' && *s <= 'Z') || strchr(extra, *s)))
			return false;
	return true;
}

bool hpn_alloc_id_valid(const char *id)
{
	return charset(id, HPN_ALLOC_ID_MAX - 1, "_.:@-", true);
}

/* Kubernetes: a namespace is a DNS label, a pod name a DNS subdomain, a UID hex and dashes. */
static int check_pod(const char *ns, const char *name, const char *uid, int code,
		     struct hpn_err *err)
{
	if (!ns || !charset(ns, 63, "-", false))
		return hpn_err_set(err, code, EINVAL,
				   "pod namespace \"%.64s\" is not a DNS label (1-63 bytes of "
				   "[a-z0-9-])",
				   ns ? ns : "");
	if (!name || !charset(name, 253, ".-", false))
		return hpn_err_set(err, code, EINVAL,
				   "pod name \"%.64s\" is not a DNS subdomain (1-253 bytes of "
				   "[a-z0-9.-])",
				   name ? name : "");
	if (uid && uid[0] && !charset(uid, 64, "-", true))
		return hpn_err_set(err, code, EINVAL,
				   "pod UID \"%.64s\" is not 1-64 bytes of [0-9a-fA-F-]", uid);
	return 0;
}

int hpn_alloc_req_set(struct hpn_alloc_req *req, const char *ns, const char *name, const char *uid,
		      struct hpn_err *err)
{
	int r = check_pod(ns, name, uid, HPN_E_INVALID_ENV, err);

	if (r < 0)
		return r;
	memset(req, 0, sizeof(*req));
	snprintf(req->namespace, sizeof(req->namespace), "%s", ns);
	snprintf(req->name, sizeof(req->name), "%s", name);
	snprintf(req->uid, sizeof(req->uid), "%s", uid ? uid : "");
	return 0;
}

/* The "query" words, by enum hpn_alloc_query (the devices: no word, "query" absent). */
static const char *const query_words[] = {
	[HPN_ALLOC_QUERY_POD] = "pod",
	[HPN_ALLOC_QUERY_NRI] = "nri",
	[HPN_ALLOC_QUERY_ATTACHED] = "attached",
};

/* keys as the request's "keys" object into o: false without memory. */
static bool keys_to_json(cJSON *o, const struct hpn_alloc_keys *k)
{
	cJSON *keys = cJSON_AddObjectToObject(o, "keys"), *a;

	if (!keys || !(a = cJSON_AddArrayToObject(keys, "labels")))
		return false;
	for (size_t i = 0; i < k->n_labels; i++)
		if (!hpn_json_push(a, cJSON_CreateString(k->labels[i])))
			return false;
	if (!(a = cJSON_AddArrayToObject(keys, "annotations")))
		return false;
	for (size_t i = 0; i < k->n_annotations; i++)
		if (!hpn_json_push(a, cJSON_CreateString(k->annotations[i])))
			return false;
	return !k->resource[0] || cJSON_AddStringToObject(keys, "resource", k->resource);
}

/* A label or annotation key, or a resource name: [A-Za-z0-9._-], one '/' at most, max bytes. */
static bool key_ok(const char *s, size_t max)
{
	const char *slash = strchr(s, '/');

	return charset(s, max, "._/-", true) && (!slash || !strchr(slash + 1, '/')) &&
	       s[0] != '/' && s[strlen(s) - 1] != '/';
}

/* An array of at most HPN_ALLOC_KEYS_MAX keys at o[name] into out. */
static int keys_array(const cJSON *o, const char *name, char out[][HPN_ALLOC_KEY_MAX], size_t *n,
		      struct hpn_err *err)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, name), *v;

	*n = 0;
	if (!a)
		return 0;
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > HPN_ALLOC_KEYS_MAX)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "keys.%s is not an array of at most %d keys", name,
				   HPN_ALLOC_KEYS_MAX);
	cJSON_ArrayForEach (v, a) {
		if (!cJSON_IsString(v) || !key_ok(v->valuestring, HPN_ALLOC_KEY_MAX - 1))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "keys.%s[%zu] is not a label or annotation key", name,
					   *n);
		snprintf(out[(*n)++], HPN_ALLOC_KEY_MAX, "%s", v->valuestring);
	}
	return 0;
}

/* The request's "keys" object, when there is one. */
static int keys_parse(const cJSON *o, struct hpn_alloc_keys *k, struct hpn_err *err)
{
	const cJSON *keys = cJSON_GetObjectItemCaseSensitive(o, "keys");
	_cleanup_free_ char *res = NULL;
	int r;

	memset(k, 0, sizeof(*k));
	if (!keys)
		return 0;
	if (!cJSON_IsObject(keys))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "keys is not an object");
	r = keys_array(keys, "labels", k->labels, &k->n_labels, err);
	if (r >= 0)
		r = keys_array(keys, "annotations", k->annotations, &k->n_annotations, err);
	if (r >= 0)
		r = hpn_json_str(keys, "resource", "keys.", HPN_E_INVALID_CONFIG,
				 HPN_ALLOC_KEY_MAX - 1, &res, err);
	if (r >= 0 && res && !key_ok(res, HPN_ALLOC_KEY_MAX - 1))
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				"keys.resource is not a resource name");
	if (r < 0)
		return r;
	snprintf(k->resource, sizeof(k->resource), "%s", res ? res : "");
	k->set = true;
	return 0;
}

char *hpn_alloc_req_render(const struct hpn_alloc_req *req)
{
	cJSON *o = cJSON_CreateObject();
	/* The NRI question is the node's: the pod goes only when there is one. */
	bool pod = req->query != HPN_ALLOC_QUERY_NRI || req->namespace[0];
	char *s, *line;
	size_t n;

	if (!o || !cJSON_AddNumberToObject(o, "version", HPN_ALLOC_PROTO_VERSION) ||
	    (pod && (!cJSON_AddStringToObject(o, "namespace", req->namespace) ||
		     !cJSON_AddStringToObject(o, "name", req->name) ||
		     !cJSON_AddStringToObject(o, "uid", req->uid))) ||
	    (req->query != HPN_ALLOC_QUERY_DEVICES &&
	     !cJSON_AddStringToObject(o, "query", query_words[req->query])) ||
	    (req->query == HPN_ALLOC_QUERY_POD && req->keys.set && !keys_to_json(o, &req->keys)) ||
	    (req->query == HPN_ALLOC_QUERY_DEVICES && req->shares &&
	     !cJSON_AddBoolToObject(o, "shares", true))) {
		cJSON_Delete(o);
		return NULL;
	}
	s = hpn_json_print(o);
	if (!s)
		return NULL;
	n = strlen(s);
	line = realloc(s, n + 2);
	if (!line) {
		free(s);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = '\0';
	return line;
}

/* "version" must be the one this build speaks: a newer peer is refused, not guessed at. */
static int check_version(const cJSON *o, const char *what, struct hpn_err *err)
{
	int v = 0;
	bool present = false;
	int r = hpn_json_int(o, "version", "", HPN_E_DECODE, 1, 1000, &v, &present, err);

	if (r < 0)
		return r;
	if (!present || v != HPN_ALLOC_PROTO_VERSION)
		return hpn_err_set(err, HPN_E_DECODE, EPROTO,
				   "%s has version %d, this build speaks %d", what, present ? v : 0,
				   HPN_ALLOC_PROTO_VERSION);
	return 0;
}

/*
 * An agent's reply, opened: a JSON object with no NUL inside, of this
 * protocol's version, and no "error" (a refusal: code 11 with its words).
 * *ret is the object (cJSON_Delete) on success.
 */
static int reply_open(const char *buf, size_t len, const char *what, cJSON **ret,
		      struct hpn_err *err)
{
	_cleanup_cjson_ cJSON *o = hpn_json_parse(buf, len);
	_cleanup_free_ char *error = NULL;
	int r;

	if (!cJSON_IsObject(o) || hpn_json_has_nul(buf, len))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "%s is not a JSON object", what);
	r = check_version(o, what, err);
	if (r >= 0)
		r = hpn_json_str(o, "error", "", HPN_E_DECODE, 1024, &error, err);
	if (r < 0)
		return r;
	if (error)
		return hpn_err_set(err, HPN_E_TRY_AGAIN, EAGAIN, "hpn-rdma-agent: %s", error);
	*ret = TAKE_PTR(o);
	return 0;
}

int hpn_alloc_req_parse(const char *buf, size_t len, struct hpn_alloc_req *req, struct hpn_err *err)
{
	_cleanup_cjson_ cJSON *o = NULL;
	_cleanup_free_ char *ns = NULL, *name = NULL, *uid = NULL, *query = NULL;
	enum hpn_alloc_query q = HPN_ALLOC_QUERY_DEVICES;
	struct hpn_alloc_keys keys;
	bool shares = false;
	int r;

	if (len > HPN_ALLOC_REQ_MAX)
		return hpn_err_set(err, HPN_E_DECODE, EMSGSIZE, "request over %d bytes",
				   HPN_ALLOC_REQ_MAX);
	o = hpn_json_parse(buf, len);
	if (!cJSON_IsObject(o) || hpn_json_has_nul(buf, len))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "request is not a JSON object");
	r = check_version(o, "request", err);
	if (r >= 0)
		r = hpn_json_str(o, "namespace", "", HPN_E_INVALID_CONFIG, 63, &ns, err);
	if (r >= 0)
		r = hpn_json_str(o, "name", "", HPN_E_INVALID_CONFIG, 253, &name, err);
	if (r >= 0)
		r = hpn_json_str(o, "uid", "", HPN_E_INVALID_CONFIG, 64, &uid, err);
	if (r >= 0)
		r = hpn_json_str(o, "query", "", HPN_E_INVALID_CONFIG, 16, &query, err);
	if (r >= 0 && query) {
		if (!strcmp(query, "pod"))
			q = HPN_ALLOC_QUERY_POD;
		else if (!strcmp(query, "nri"))
			q = HPN_ALLOC_QUERY_NRI;
		else if (!strcmp(query, "attached"))
			q = HPN_ALLOC_QUERY_ATTACHED;
		else
			r = hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					"query \"%s\" is not \"pod\", \"nri\" or \"attached\" (or "
					"absent: the devices)",
					query);
	}
	/* The NRI question may name no pod; any pod named is checked alike. */
	if (r >= 0 && (q != HPN_ALLOC_QUERY_NRI || ns || name || uid))
		r = check_pod(ns, name, uid, HPN_E_INVALID_CONFIG, err);
	if (r >= 0)
		r = keys_parse(o, &keys, err);
	/* Absent: a plugin older than shares. */
	if (r >= 0 && cJSON_GetObjectItemCaseSensitive(o, "shares"))
		r = hpn_json_bool(o, "shares", "", HPN_E_INVALID_CONFIG, &shares, err);
	if (r < 0)
		return r;
	memset(req, 0, sizeof(*req));
	req->query = q;
	req->shares = q == HPN_ALLOC_QUERY_DEVICES && shares;
	if (q == HPN_ALLOC_QUERY_POD)
		req->keys = keys;
	snprintf(req->namespace, sizeof(req->namespace), "%s", ns ? ns : "");
	snprintf(req->name, sizeof(req->name), "%s", name ? name : "");
	snprintf(req->uid, sizeof(req->uid), "%s", uid ? uid : "");
	return 0;
}

/* o[key]: the n strings of v (stride bytes apart). */
static bool add_strings(cJSON *o, const char *key, const char *v, size_t stride, size_t n)
{
	cJSON *arr = cJSON_AddArrayToObject(o, key);

	for (size_t i = 0; arr && i < n; i++) {
		cJSON *s = cJSON_CreateString(v + i * stride);

		if (!s || !cJSON_AddItemToArray(arr, s)) {
			cJSON_Delete(s);
			return false;
		}
	}
	return arr != NULL;
}

char *hpn_alloc_reply_render(const struct hpn_alloc *a, const char *error)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || !cJSON_AddNumberToObject(o, "version", HPN_ALLOC_PROTO_VERSION))
		goto fail;
	if (error) {
		if (!cJSON_AddStringToObject(o, "error", error))
			goto fail;
		return hpn_json_print(o);
	}
	if (!cJSON_AddStringToObject(o, "resource", a->resource) ||
	    !cJSON_AddBoolToObject(o, "podKnown", a->pod_known) ||
	    !add_strings(o, "devices", a->ids[0], sizeof(a->ids[0]), a->n) ||
	    !add_strings(o, "gpus", a->gpus[0], sizeof(a->gpus[0]), a->n_gpus))
		goto fail;
	/* Only when set: a reply of the device plugin's stays what older plugins read. */
	if (a->source[0] && !cJSON_AddStringToObject(o, "source", a->source))
		goto fail;
	if (a->n_claims &&
	    !add_strings(o, "claims", a->claims[0], sizeof(a->claims[0]), a->n_claims))
		goto fail;
	/* Only when a device is a share: other replies stay what older plugins read. */
	for (size_t i = 0; i < a->n; i++)
		if (a->shared[i]) {
			cJSON *arr = cJSON_AddArrayToObject(o, "shared");

			for (size_t k = 0; arr && k < a->n; k++)
				if (!cJSON_AddItemToArray(arr, cJSON_CreateBool(a->shared[k])))
					arr = NULL;
			if (!arr)
				goto fail;
			break;
		}
	return hpn_json_print(o);
fail:
	cJSON_Delete(o);
	return NULL;
}

/* A reply's "source": 1-15 letters (a newer agent's word is carried, not refused). */
static bool source_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= HPN_ALLOC_SOURCE_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return true;
}

/* A claim "<namespace>/<name>": a DNS label, "/", a DNS subdomain. */
static bool claim_valid(const char *s)
{
	const char *slash = strchr(s, '/');
	char ns[64];

	if (!slash || slash - s >= (ptrdiff_t)sizeof(ns) || strlen(s) >= HPN_ALLOC_CLAIM_MAX)
		return false;
	memcpy(ns, s, (size_t)(slash - s));
	ns[slash - s] = '\0';
	return hpn_k8s_dns_label(ns) && hpn_k8s_dns_subdomain(slash + 1);
}

/* o[key] (what names one entry in messages): at most max strings valid() accepts, into v. */
static int get_strings(const cJSON *o, const char *key, const char *what,
		       bool (*valid)(const char *), char *v, size_t stride, size_t max,
		       size_t *ret_n, struct hpn_err *err)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, key), *s;
	size_t n = 0;

	if (!cJSON_IsArray(arr))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL,
				   "hpn-rdma-agent's reply has no \"%s\" array", key);
	cJSON_ArrayForEach (s, arr) {
		if (n == max)
			return hpn_err_set(err, HPN_E_DECODE, E2BIG,
					   "hpn-rdma-agent's reply lists over %zu %ss", max, what);
		if (!cJSON_IsString(s) || !valid(s->valuestring))
			return hpn_err_set(err, HPN_E_DECODE, EINVAL,
					   "hpn-rdma-agent's reply: %s %zu is not a %s ID", what,
					   n + 1, what);
		snprintf(v + n++ * stride, stride, "%s", s->valuestring);
	}
	*ret_n = n;
	return 0;
}

/* The reply's "shared" (absent: none is a share): one bool per device. */
static int get_shared(const cJSON *o, struct hpn_alloc *a, struct hpn_err *err)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "shared"), *b;
	size_t n = 0;

	if (!arr)
		return 0;
	if (!cJSON_IsArray(arr) || (size_t)cJSON_GetArraySize(arr) != a->n)
		return hpn_err_set(err, HPN_E_DECODE, EINVAL,
				   "hpn-rdma-agent's reply: \"shared\" is not an array of %zu "
				   "booleans, one per device",
				   a->n);
	cJSON_ArrayForEach (b, arr) {
		if (!cJSON_IsBool(b))
			return hpn_err_set(err, HPN_E_DECODE, EINVAL,
					   "hpn-rdma-agent's reply: \"shared\"[%zu] is not a "
					   "boolean",
					   n);
		a->shared[n++] = cJSON_IsTrue(b);
	}
	return 0;
}

int hpn_alloc_reply_parse(const char *buf, size_t len, struct hpn_alloc *ret, struct hpn_err *err)
{
	_cleanup_cjson_ cJSON *o = NULL;
	_cleanup_free_ char *resource = NULL, *source = NULL;
	struct hpn_alloc *a;
	int r;

	r = reply_open(buf, len, "hpn-rdma-agent's reply", &o, err);
	if (r < 0)
		return r;
	/* Filled aside: ret is left as it was on any error. */
	a = calloc(1, sizeof(*a));
	if (!a)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	r = hpn_json_str(o, "resource", "", HPN_E_DECODE, HPN_ALLOC_RESOURCE_MAX - 1, &resource,
			 err);
	if (r >= 0)
		r = hpn_json_bool(o, "podKnown", "", HPN_E_DECODE, &a->pod_known, err);
	snprintf(a->resource, sizeof(a->resource), "%s", resource ? resource : "");
	if (r >= 0)
		r = get_strings(o, "devices", "device", hpn_alloc_id_valid, a->ids[0],
				sizeof(a->ids[0]), HPN_ALLOC_MAX_DEVICES, &a->n, err);
	/* An agent older than GPU lookups sends no "gpus": the pod's GPUs are unknown. */
	if (r >= 0 && cJSON_GetObjectItemCaseSensitive(o, "gpus"))
		r = get_strings(o, "gpus", "GPU", hpn_gpu_id_valid, a->gpus[0], sizeof(a->gpus[0]),
				HPN_MAX_GPUS, &a->n_gpus, err);
	/* An agent older than DRA lookups sends no "source": the device plugin's answer. */
	if (r >= 0)
		r = hpn_json_str(o, "source", "", HPN_E_DECODE, HPN_ALLOC_SOURCE_MAX - 1, &source,
				 err);
	if (r >= 0 && source && !source_valid(source))
		r = hpn_err_set(err, HPN_E_DECODE, EINVAL,
				"hpn-rdma-agent's reply: \"source\" is not a word");
	if (r >= 0 && source)
		snprintf(a->source, sizeof(a->source), "%s", source);
	if (r >= 0 && cJSON_GetObjectItemCaseSensitive(o, "claims"))
		r = get_strings(o, "claims", "claim", claim_valid, a->claims[0],
				sizeof(a->claims[0]), HPN_ALLOC_MAX_CLAIMS, &a->n_claims, err);
	if (r >= 0)
		r = get_shared(o, a, err);
	if (r >= 0)
		*ret = *a;
	free(a);
	return r < 0 ? r : 0;
}

/* ---- the NRI question ---------------------------------------------------------- */

/* A copy of s into buf (size bytes) of printable ASCII: any other byte becomes '?'. */
static const char *printable(const char *s, char *buf, size_t size)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < size; i++)
		buf[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	buf[i] = '\0';
	return buf;
}

/* n[key] = v, as printable ASCII, when v says anything. */
static bool add_text(cJSON *n, const char *key, const char *v)
{
	char buf[HPN_NRI_WHY_MAX];

	return !v[0] || cJSON_AddStringToObject(n, key, printable(v, buf, sizeof(buf)));
}

char *hpn_nri_reply_render(const struct hpn_nri_state *s, const char *error)
{
	cJSON *o = cJSON_CreateObject(), *n;

	if (!o || !cJSON_AddNumberToObject(o, "version", HPN_ALLOC_PROTO_VERSION))
		goto fail;
	if (error) {
		if (!cJSON_AddStringToObject(o, "error", error))
			goto fail;
		return hpn_json_print(o);
	}
	n = cJSON_AddObjectToObject(o, "nri");
	if (!n || !cJSON_AddBoolToObject(n, "registered", s->registered) ||
	    !add_text(n, "socket", s->socket) || !add_text(n, "runtime", s->runtime) ||
	    !add_text(n, "runtimeVersion", s->version) || !add_text(n, "why", s->why))
		goto fail;
	return hpn_json_print(o);
fail:
	cJSON_Delete(o);
	return NULL;
}

/* n[key], optional: a string of printable ASCII shorter than size, into v ("" when absent). */
static int get_text(const cJSON *n, const char *key, char *v, size_t size, struct hpn_err *err)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(n, key);
	size_t len;

	v[0] = '\0';
	if (!s || cJSON_IsNull(s))
		return 0;
	if (!cJSON_IsString(s))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL,
				   "hpn-rdma-agent's NRI reply: nri.%s is not a string", key);
	len = strlen(s->valuestring);
	if (len >= size)
		return hpn_err_set(err, HPN_E_DECODE, E2BIG,
				   "hpn-rdma-agent's NRI reply: nri.%s is over %zu bytes", key,
				   size - 1);
	for (size_t i = 0; i < len; i++)
		if (s->valuestring[i] < 0x20 || s->valuestring[i] >= 0x7f)
			return hpn_err_set(err, HPN_E_DECODE, EINVAL,
					   "hpn-rdma-agent's NRI reply: nri.%s is not printable "
					   "ASCII",
					   key);
	memcpy(v, s->valuestring, len + 1);
	return 0;
}

int hpn_nri_reply_parse(const char *buf, size_t len, struct hpn_nri_state *ret, struct hpn_err *err)
{
	_cleanup_cjson_ cJSON *o = NULL;
	struct hpn_nri_state s = { 0 };
	const cJSON *n, *reg;
	int r;

	/* An agent older than the question refuses it ("error": query "nri" is not "pod"). */
	r = reply_open(buf, len, "hpn-rdma-agent's NRI reply", &o, err);
	if (r < 0)
		return r;
	n = cJSON_GetObjectItemCaseSensitive(o, "nri");
	reg = cJSON_GetObjectItemCaseSensitive(n, "registered");
	if (!cJSON_IsObject(n) || !cJSON_IsBool(reg))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL,
				   "hpn-rdma-agent's NRI reply has no \"nri\" object with "
				   "\"registered\" true or false");
	s.registered = cJSON_IsTrue(reg);
	r = get_text(n, "socket", s.socket, sizeof(s.socket), err);
	if (r >= 0)
		r = get_text(n, "runtime", s.runtime, sizeof(s.runtime), err);
	if (r >= 0)
		r = get_text(n, "runtimeVersion", s.version, sizeof(s.version), err);
	if (r >= 0)
		r = get_text(n, "why", s.why, sizeof(s.why), err);
	if (r < 0)
		return r;
	*ret = s;
	return 0;
}

/* ---- the transport ------------------------------------------------------------- */

/* Waits for events on fd until the deadline; -ETIMEDOUT after it. */
static int wait_fd(int fd, short events, long long deadline)
{
	for (;;) {
		long long left = deadline - hpn_mono_ms();
		struct pollfd p = { .fd = fd, .events = events };
		int n;

		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static int no_agent(int r, const char *path, struct hpn_err *err)
{
	return hpn_err_set(err, HPN_E_TRY_AGAIN, -r, "hpn-rdma-agent is not answering at %s: %s",
			   path, strerror(-r));
}

/*
 * The peer of a connected fd is the agent only if it runs as root (or as we
 * do: a process of our own uid could act as us anyway; unprivileged tests).
 * Asked before anything is sent, so that a process that bound agent.socket
 * in a directory others may write (a socket path pointed into /tmp, a
 * directory left 0777) neither learns which pod asks nor decides its NICs.
 * SO_PEERCRED is the listener's credentials as of its listen(2). -EPERM
 * (code 11: the agent, once it runs, binds the path again) names the
 * socket and the uid.
 */
static int peer_trusted(int fd, const char *path, struct hpn_err *err)
{
	struct sockaddr_un peer;
	socklen_t plen = sizeof(peer);
	struct ucred uc = { 0 };
	socklen_t len = sizeof(uc);

	/* Not connected (a full backlog): nobody to ask, as the send would find. */
	if (getpeername(fd, (struct sockaddr *)&peer, &plen) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return no_agent(-errno, path, err);
	if (uc.uid == 0 || uc.uid == geteuid())
		return 0;
	return hpn_err_set(err, HPN_E_TRY_AGAIN, EPERM,
			   "refusing the hpn-rdma-agent at %s: the process listening there runs "
			   "as uid %u, not root (SO_PEERCRED); nothing was sent to it",
			   path, (unsigned int)uc.uid);
}

/* NOLINTBEGIN(clang-analyzer-unix.Malloc): line and buf are _cleanup_free_, unseen by it */
int hpn_agent_ask(const char *socket_path, int timeout_ms, const char *line, size_t max, char **ret,
		  size_t *ret_len, struct hpn_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	long long deadline = hpn_mono_ms() + timeout_ms;
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int fd = -1;
	size_t off = 0, len, got = 0;
	int r;

	if (hpn_snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", socket_path) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
				   "agent.socket \"%.64s\" is too long", socket_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno != EINPROGRESS && errno != EAGAIN)
			return no_agent(-errno, socket_path, err);
		r = wait_fd(fd, POLLOUT, deadline);
		if (r < 0)
			return no_agent(r, socket_path, err);
	}
	r = peer_trusted(fd, socket_path, err);
	if (r < 0)
		return r;
	len = strlen(line);
	while (off < len) {
		ssize_t n = send(fd, line + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			r = wait_fd(fd, POLLOUT, deadline);
			if (r < 0)
				return no_agent(r, socket_path, err);
			continue;
		}
		if (n < 0)
			return no_agent(-errno, socket_path, err);
		off += (size_t)n;
	}
	buf = malloc(max + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = recv(fd, buf + got, max + 1 - got, 0);

		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			r = wait_fd(fd, POLLIN, deadline);
			if (r < 0)
				return hpn_err_set(err, HPN_E_TRY_AGAIN, -r,
						   "hpn-rdma-agent at %s did not answer within "
						   "%d ms",
						   socket_path, timeout_ms);
			continue;
		}
		if (n < 0)
			return no_agent(-errno, socket_path, err);
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > max)
			return hpn_err_set(err, HPN_E_DECODE, EMSGSIZE,
					   "hpn-rdma-agent's reply is over %zu bytes", max);
	}
	buf[got] = '\0';
	*ret_len = got;
	*ret = TAKE_PTR(buf);
	return 0;
}

int hpn_alloc_lookup(const char *socket_path, int timeout_ms, const struct hpn_alloc_req *req,
		     struct hpn_alloc *ret, struct hpn_err *err)
{
	_cleanup_free_ char *line = hpn_alloc_req_render(req), *buf = NULL;
	size_t got = 0;
	int r;

	if (!line)
		return -ENOMEM;
	r = hpn_agent_ask(socket_path, timeout_ms, line, HPN_ALLOC_REPLY_MAX, &buf, &got, err);
	if (r < 0) {
		if (r == -ETIMEDOUT)
			hpn_err_details(err, "agent.timeoutMs %d", timeout_ms);
		return r;
	}
	return hpn_alloc_reply_parse(buf, got, ret, err);
}

int hpn_attached_tell(const char *socket_path, int timeout_ms, const struct hpn_alloc_req *req,
		      struct hpn_err *err)
{
	struct hpn_alloc_req q = *req;
	_cleanup_free_ char *line = NULL, *buf = NULL;
	_cleanup_cjson_ cJSON *o = NULL;
	const cJSON *e;
	size_t got = 0;
	int r;

	q.query = HPN_ALLOC_QUERY_ATTACHED;
	line = hpn_alloc_req_render(&q);
	if (!line)
		return -ENOMEM;
	r = hpn_agent_ask(socket_path, timeout_ms, line, HPN_NRI_REPLY_MAX, &buf, &got, err);
	if (r < 0)
		return r;
	o = hpn_json_parse(buf, got);
	if (!cJSON_IsObject(o))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL,
				   "hpn-rdma-agent's reply is not a "
				   "JSON object");
	e = cJSON_GetObjectItemCaseSensitive(o, "error");
	if (cJSON_IsString(e))
		return hpn_err_set(err, HPN_E_TRY_AGAIN, EAGAIN, "hpn-rdma-agent: %.200s",
				   e->valuestring);
	return 0;
}

int hpn_nri_ask(const char *socket_path, int timeout_ms, const struct hpn_alloc_req *req,
		struct hpn_nri_state *ret, struct hpn_err *err)
{
	struct hpn_alloc_req q = { .query = HPN_ALLOC_QUERY_NRI };
	_cleanup_free_ char *line = NULL, *buf = NULL;
	size_t got = 0;
	int r;

	if (req)
		q = *req;
	q.query = HPN_ALLOC_QUERY_NRI;
	line = hpn_alloc_req_render(&q);
	if (!line)
		return -ENOMEM;
	r = hpn_agent_ask(socket_path, timeout_ms, line, HPN_NRI_REPLY_MAX, &buf, &got, err);
	if (r < 0) {
		if (r == -ETIMEDOUT)
			hpn_err_details(err, "agent.timeoutMs %d", timeout_ms);
		return r;
	}
	return hpn_nri_reply_parse(buf, got, ret, err);
}
/* NOLINTEND(clang-analyzer-unix.Malloc) */
