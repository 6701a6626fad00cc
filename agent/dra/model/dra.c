// SPDX-License-Identifier: Apache-2.0
#include "dra.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "draslice.h"
#include "util.h"

#define RESULTS "status.allocation.devices.results"

static void cjson_deletep(cJSON **p)
{
	cJSON_Delete(*p);
}

#define _cleanup_cjson_ __attribute__((cleanup(cjson_deletep)))

/* One parse: the claim asked for, as every message shows it, and where errors go. */
struct ctx {
	char ns[68];
	char name[258];
	struct hpn_err *err;
};

/*
 * An answer we cannot use: code HPN_E_KUBE, -EINVAL. A macro, so that the
 * analyzers (which do not follow variadic calls) see the negative return.
 */
#define bad(c, fmt, ...)                                                                           \
	(hpn_err_set((c)->err, HPN_E_KUBE, EINVAL, "ResourceClaim %s/%s: " fmt, (c)->ns,           \
		     (c)->name, ##__VA_ARGS__),                                                    \
	 -EINVAL)

/* A value in a message: valid UTF-8, cut to n - 4 bytes and "..." when longer. */
static const char *shown(char *buf, size_t n, const char *v)
{
	hpn_utf8_sanitize(buf, v, n - 3);
	if (strlen(v) > n - 4)
		memcpy(buf + n - 4, "...", 4);
	return buf;
}

#define SHOWN(buf, v) shown(buf, sizeof(buf), v)

/*
 * An optional member key of obj (named by what: "" for the top level) of
 * the given cJSON type (cJSON_Object, cJSON_Array, cJSON_String): NULL when
 * it is absent or null.
 */
static int member(const struct ctx *c, const cJSON *obj, const char *what, const char *key,
		  int type, const cJSON **ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	const char *dot = what[0] ? "." : "";

	*ret = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if ((v->type & 0xff) != type)
		return bad(c, "%s%s%s must be %s", what, dot, key,
			   type == cJSON_Object	 ? "an object"
			   : type == cJSON_Array ? "an array"
						 : "a string");
	*ret = v;
	return 0;
}

/* A required string member. */
static int req_str(const struct ctx *c, const cJSON *obj, const char *what, const char *key,
		   const char **ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	const char *dot = what[0] ? "." : "";

	if (!v || cJSON_IsNull(v))
		return bad(c, "%s%s%s is missing", what, dot, key);
	if (!cJSON_IsString(v))
		return bad(c, "%s%s%s must be a string", what, dot, key);
	*ret = v->valuestring;
	return 0;
}

/* A driver name: a DNS subdomain of at most 63 bytes, upper case allowed (as the API does). */
static bool driver_ok(const char *s)
{
	char low[64];
	size_t n = strlen(s);

	if (n >= sizeof(low))
		return false;
	for (size_t i = 0; i <= n; i++)
		low[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
	return hpn_k8s_dns_subdomain(low);
}

/* A result's request: a request's name, or "<request>/<subrequest>" (firstAvailable). */
bool hpn_dra_request_ok(const char *s)
{
	const char *slash = strchr(s, '/');
	char first[64];

	if (!slash)
		return hpn_k8s_dns_label(s);
	if ((size_t)(slash - s) >= sizeof(first))
		return false;
	memcpy(first, s, (size_t)(slash - s));
	first[slash - s] = '\0';
	return hpn_k8s_dns_label(first) && hpn_k8s_dns_label(slash + 1);
}

/* A pool's name: at most 253 bytes of DNS subdomains separated by '/'. */
bool hpn_dra_pool_ok(const char *s)
{
	char part[254];
	size_t n = strlen(s), start = 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '/')
			continue;
		memcpy(part, s + start, i - start);
		part[i - start] = '\0';
		if (!hpn_k8s_dns_subdomain(part))
			return false;
		start = i + 1;
	}
	return true;
}

bool hpn_dra_share_id_ok(const char *s)
{
	if (strlen(s) != HPN_DRA_SHARE_ID_MAX - 1)
		return false;
	for (size_t i = 0; s[i]; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? s[i] != '-'
			 : !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	}
	return true;
}

/* metadata: well-formed, and the claim asked for. */
static int parse_meta(const struct ctx *c, const cJSON *root, const char *ns, const char *name,
		      const char *uid, struct hpn_dra_claim *claim)
{
	const char *got_ns, *got_name, *got_uid;
	const cJSON *meta;
	char b[260];
	int r;

	r = member(c, root, "", "metadata", cJSON_Object, &meta);
	if (r < 0)
		return r;
	if (!meta)
		return bad(c, "metadata is missing");
	r = req_str(c, meta, "metadata", "namespace", &got_ns);
	if (r == 0)
		r = req_str(c, meta, "metadata", "name", &got_name);
	if (r == 0)
		r = req_str(c, meta, "metadata", "uid", &got_uid);
	if (r)
		return r;
	if (!hpn_k8s_dns_label(got_ns))
		return bad(c, "metadata.namespace \"%s\" is not a namespace name",
			   SHOWN(b, got_ns));
	if (!hpn_k8s_dns_subdomain(got_name))
		return bad(c, "metadata.name \"%s\" is not a claim name", SHOWN(b, got_name));
	if (!hpn_k8s_uid(got_uid))
		return bad(c, "metadata.uid \"%s\" is not a UID", SHOWN(b, got_uid));
	if (strcmp(got_ns, ns) || strcmp(got_name, name))
		return hpn_err_set(c->err, HPN_E_UNKNOWN_CONTAINER, ESTALE,
				   "ResourceClaim %s/%s: the answer is ResourceClaim %s/%s "
				   "(metadata.namespace, metadata.name), not the one asked for",
				   c->ns, c->name, got_ns, got_name);
	if (strcmp(got_uid, uid))
		return hpn_err_set(c->err, HPN_E_UNKNOWN_CONTAINER, ESTALE,
				   "ResourceClaim %s/%s: metadata.uid is %s, not %s as asked: a "
				   "different claim (the one asked for was deleted and another "
				   "created under its name)",
				   c->ns, c->name, got_uid, SHOWN(b, uid));
	{
		/* The pod's own name for a claim made from a template: a DNS label, as the pod's. */
		const cJSON *annos, *pc;

		r = member(c, meta, "metadata", "annotations", cJSON_Object, &annos);
		if (r == 0 && annos)
			r = member(c, annos, "metadata.annotations",
				   "resource.kubernetes.io/pod-claim-name", cJSON_String, &pc);
		else
			pc = NULL;
		if (r < 0)
			return r;
		if (pc && !hpn_k8s_dns_label(pc->valuestring))
			return bad(c,
				   "annotation resource.kubernetes.io/pod-claim-name \"%s\" is "
				   "not a DNS label",
				   SHOWN(b, pc->valuestring));
		if (pc)
			snprintf(claim->pod_claim, sizeof(claim->pod_claim), "%s", pc->valuestring);
	}
	snprintf(claim->ns, sizeof(claim->ns), "%s", got_ns);
	snprintf(claim->name, sizeof(claim->name), "%s", got_name);
	snprintf(claim->uid, sizeof(claim->uid), "%s", got_uid);
	return 0;
}

/*
 * results[i].consumedCapacity: an object of quantities (a Quantity is a
 * string in JSON). Nothing of it is kept: our shared device's one capacity
 * allows a single value, and the scheduler counted it.
 */
static int parse_consumed(const struct ctx *c, const cJSON *e, const char *what)
{
	const cJSON *cap, *q;
	char b[260];
	int r = member(c, e, what, "consumedCapacity", cJSON_Object, &cap);

	if (r < 0)
		return r;
	cJSON_ArrayForEach (q, cap) {
		if (!cJSON_IsString(q))
			return bad(c, "%s.consumedCapacity.%s must be a quantity (a string)", what,
				   SHOWN(b, q->string ? q->string : ""));
	}
	return 0;
}

/* results[i]: checked whatever its driver; kept when it is driver's. */
static int parse_result(const struct ctx *c, const cJSON *e, size_t i, const char *driver,
			struct hpn_dra_claim *claim)
{
	const char *request, *drv, *pool, *device, *share = "";
	char what[64], b[260], nic[HPN_DRA_NAME_MAX];
	struct hpn_dra_result *res;
	const cJSON *sid;
	bool shared;
	int r;

	snprintf(what, sizeof(what), RESULTS "[%zu]", i);
	if (!cJSON_IsObject(e))
		return bad(c, "%s must be an object", what);
	r = req_str(c, e, what, "request", &request);
	if (r == 0)
		r = req_str(c, e, what, "driver", &drv);
	if (r == 0)
		r = req_str(c, e, what, "pool", &pool);
	if (r == 0)
		r = req_str(c, e, what, "device", &device);
	if (r == 0)
		r = member(c, e, what, "shareID", cJSON_String, &sid);
	if (r == 0)
		r = parse_consumed(c, e, what);
	if (r)
		return r;
	if (!hpn_dra_request_ok(request))
		return bad(c, "%s.request \"%s\" is not a request name", what, SHOWN(b, request));
	if (!driver_ok(drv))
		return bad(c, "%s.driver \"%s\" is not a driver name", what, SHOWN(b, drv));
	if (!hpn_dra_pool_ok(pool))
		return bad(c, "%s.pool \"%s\" is not a pool name", what, SHOWN(b, pool));
	if (!hpn_k8s_dns_label(device))
		return bad(c, "%s.device \"%s\" is not a device name", what, SHOWN(b, device));
	if (sid && !hpn_dra_share_id_ok(sid->valuestring))
		return bad(c,
			   "%s.shareID \"%s\" is not a UUID (36 characters, lower-case hex "
			   "8-4-4-4-12)",
			   what, SHOWN(b, sid->valuestring));
	if (sid)
		share = sid->valuestring;
	if (strcmp(drv, driver))
		return 0;
	/* Our shared devices are the ones the scheduler allocates many times, each with an ID. */
	shared = hpn_dra_share_of(device, nic);
	if (shared && !share[0])
		return bad(c, "%s allocates the shared device %s without a shareID", what, device);
	if (!shared && share[0])
		return bad(c,
			   "%s.shareID %s: device %s is a NIC's own device, which is allocated "
			   "whole, never shared",
			   what, share, device);
	for (size_t j = 0; j < claim->n; j++)
		if (!strcmp(claim->v[j].pool, pool) && !strcmp(claim->v[j].device, device) &&
		    !strcmp(claim->v[j].share_id, share))
			return bad(c, "%s allocates device %s/%s%s%s again", what, pool, device,
				   share[0] ? " share " : "", share);
	if (claim->n == HPN_DRA_MAX_RESULTS)
		return bad(c, RESULTS " holds more than %d devices of %s", HPN_DRA_MAX_RESULTS,
			   driver);
	res = &claim->v[claim->n++];
	snprintf(res->request, sizeof(res->request), "%s", request);
	snprintf(res->pool, sizeof(res->pool), "%s", pool);
	snprintf(res->device, sizeof(res->device), "%s", device);
	snprintf(res->share_id, sizeof(res->share_id), "%s", share);
	return 0;
}

static int parse_allocation(const struct ctx *c, const cJSON *status, const char *driver,
			    struct hpn_dra_claim *claim)
{
	const cJSON *alloc, *devices, *results = NULL, *e;
	size_t i = 0;
	int r;

	r = member(c, status, "status", "allocation", cJSON_Object, &alloc);
	if (r < 0)
		return r;
	if (!alloc)
		return bad(c, "not allocated (status.allocation is missing)");
	r = member(c, alloc, "status.allocation", "devices", cJSON_Object, &devices);
	if (r == 0 && devices)
		r = member(c, devices, "status.allocation.devices", "results", cJSON_Array,
			   &results);
	if (r < 0)
		return r;
	cJSON_ArrayForEach (e, results) {
		r = parse_result(c, e, i++, driver, claim);
		if (r < 0)
			return r;
	}
	if (!claim->n)
		return bad(c, "allocates no device of %s (" RESULTS ")", driver);
	return 0;
}

/* status.reservedFor: the uids of the pods among its consumers. */
static int parse_reserved(const struct ctx *c, const cJSON *status, struct hpn_dra_claim *claim)
{
	const cJSON *list, *e;
	size_t i = 0;
	int r;

	r = member(c, status, "status", "reservedFor", cJSON_Array, &list);
	if (r < 0)
		return r;
	cJSON_ArrayForEach (e, list) {
		const char *group = NULL, *resource, *name, *uid;
		const cJSON *g;
		char what[48];

		snprintf(what, sizeof(what), "status.reservedFor[%zu]", i++);
		if (!cJSON_IsObject(e))
			return bad(c, "%s must be an object", what);
		r = member(c, e, what, "apiGroup", cJSON_String, &g);
		if (r == 0)
			r = req_str(c, e, what, "resource", &resource);
		if (r == 0)
			r = req_str(c, e, what, "name", &name);
		if (r == 0)
			r = req_str(c, e, what, "uid", &uid);
		if (r)
			return r;
		if (!hpn_k8s_uid(uid)) {
			char b[48];

			return bad(c, "%s.uid \"%s\" is not a UID", what, SHOWN(b, uid));
		}
		if (g)
			group = g->valuestring;
		/* A pod is resource "pods" of the core group, whose name is empty. */
		if (strcmp(resource, "pods") || (group && group[0]))
			continue;
		for (size_t j = 0; j < claim->n_pods; j++)
			if (!strcmp(claim->pods[j], uid))
				return bad(c, "%s.uid %s: the pod is there twice", what, uid);
		if (claim->n_pods == HPN_DRA_MAX_PODS)
			return bad(c, "status.reservedFor holds more than %d pods",
				   HPN_DRA_MAX_PODS);
		snprintf(claim->pods[claim->n_pods++], sizeof(claim->pods[0]), "%s", uid);
	}
	return 0;
}

static bool api_version_ok(const char *v)
{
	static const char *const known[] = { "resource.k8s.io/v1", "resource.k8s.io/v1beta2",
					     "resource.k8s.io/v1beta1" };

	for (size_t i = 0; i < HPN_ARRAY_SIZE(known); i++)
		if (!strcmp(v, known[i]))
			return true;
	return false;
}

int hpn_dra_claim_parse(const char *json, size_t len, const char *ns, const char *name,
			const char *uid, const char *driver, struct hpn_dra_claim *ret,
			struct hpn_err *err)
{
	_cleanup_cjson_ cJSON *root = NULL;
	struct hpn_dra_claim claim = { 0 };
	struct ctx c = { .err = err };
	const char *kind, *api;
	const cJSON *status;
	char b1[48];
	int r;

	SHOWN(c.ns, ns);
	SHOWN(c.name, name);
	if (!driver_ok(driver))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "DRA driver name \"%s\" is not a DNS subdomain of at most 63 "
				   "bytes",
				   SHOWN(b1, driver));
	if (len > HPN_DRA_BODY_MAX)
		return bad(&c, "the answer is %zu bytes, more than %u", len, HPN_DRA_BODY_MAX);
	if (hpn_json_has_nul(json, len))
		return bad(&c, "the answer holds a \\u0000 escape");
	root = hpn_json_parse(json, len);
	if (!root)
		return bad(&c, "the answer is not valid JSON");
	if (!cJSON_IsObject(root))
		return bad(&c, "the answer is not a JSON object");
	r = req_str(&c, root, "", "kind", &kind);
	if (r == 0)
		r = req_str(&c, root, "", "apiVersion", &api);
	if (r)
		return r;
	if (strcmp(kind, "ResourceClaim") || !api_version_ok(api)) {
		char b2[48];

		return bad(&c,
			   "the answer's apiVersion and kind are %s %s, not resource.k8s.io/v1 "
			   "(or v1beta1, v1beta2) ResourceClaim",
			   SHOWN(b1, api), SHOWN(b2, kind));
	}
	r = parse_meta(&c, root, ns, name, uid, &claim);
	if (r < 0)
		return r;
	r = member(&c, root, "", "status", cJSON_Object, &status);
	if (r < 0)
		return r;
	if (!status)
		return bad(&c, "not allocated (status is missing)");
	r = parse_allocation(&c, status, driver, &claim);
	if (r == 0)
		r = parse_reserved(&c, status, &claim);
	if (r < 0)
		return r;
	*ret = claim;
	return 0;
}
