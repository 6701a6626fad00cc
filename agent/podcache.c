// SPDX-License-Identifier: Apache-2.0
/*
 * The pod cache itself (podcache.h): what is kept of a pod, and the table of
 * the node's pods within its caps; podwatch.c fills it from the API.
 *
 * The pods are the tenants' to write: any pod may name this node, with up
 * to 256 KiB of annotations and as many labels as etcd's object size
 * allows, so nothing here grows with what they write. Each pod is kept
 * trimmed to what hpn_pod_parse reads for the plugin's config (the keys its
 * pod question names, hpn_podask_keys: two labels, an annotation and the
 * static pods' mirror, one resource of each container), at most
 * PODWATCH_POD_BYTES_MAX bytes of JSON, else by name only (answered
 * "unknown"); the cache at most PODWATCH_BYTES_MAX bytes and PODS_MAX pods,
 * else the pods that do not fit are not kept (a warning, a counter; their
 * questions "unknown").
 */
#include "podcache.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"
#include "log.h"
#include "pod.h"
#include "podask.h"
#include "util.h"

#define PODS_MAX 4096
/* Distinct resources of an extended-resource claim kept: as many as --gpu-resource names. */
#define XRES_MAX 8
/* An entry's struct and its allocations' headers, counted beside its strings. */
#define ENTRY_OVERHEAD 128

static void entry_free(struct pod_entry *e)
{
	free(e->ns);
	free(e->name);
	free(e->uid);
	free(e->mirror);
	free(e->json);
	free(e->xclaim);
	free(e->xres);
	memset(e, 0, sizeof(*e));
}

static const char *str_of(const cJSON *o, const char *key)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

/* ---- what a pod keeps -------------------------------------------------------------- */

static bool names_equal(const char (*a)[HPN_ALLOC_KEY_MAX], const char (*b)[HPN_ALLOC_KEY_MAX],
			size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(a[i], b[i]))
			return false;
	return true;
}

/*
 * Field by field, not memcmp: a struct assigned (a list's keys made the
 * cache's) need not carry its padding bytes along.
 */
static bool keys_equal(const struct hpn_alloc_keys *a, const struct hpn_alloc_keys *b)
{
	return a->set == b->set && a->n_labels == b->n_labels &&
	       a->n_annotations == b->n_annotations &&
	       names_equal(a->labels, b->labels, a->n_labels) &&
	       names_equal(a->annotations, b->annotations, a->n_annotations) &&
	       !strcmp(a->resource, b->resource);
}

void pod_keys_of(const struct hpn_conf *conf, struct hpn_alloc_keys *ret)
{
	if (conf)
		hpn_podask_keys(conf, ret);
	else
		memset(ret, 0, sizeof(*ret));
}

bool pod_keys_same(const struct hpn_alloc_keys *k, const struct hpn_conf *conf)
{
	struct hpn_alloc_keys want;

	pod_keys_of(conf, &want);
	return keys_equal(k, &want);
}

/* o[key] copied into to when it is there. */
static bool copy_item(cJSON *to, const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	cJSON *c;

	if (!v)
		return true;
	c = cJSON_Duplicate(v, true);
	if (c && cJSON_AddItemToObject(to, key, c))
		return true;
	cJSON_Delete(c);
	return false;
}

/*
 * o[key] copied into to with only the members named in keep (n, NULL ones
 * skipped); whole when keep is NULL, or when it is not an object (hpn_pod_parse
 * then says what is wrong, as it would of the API's answer).
 */
static bool copy_some(cJSON *to, const cJSON *o, const char *key, const char *const *keep, size_t n)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	cJSON *out;

	if (!v)
		return true;
	if (!keep || !cJSON_IsObject(v))
		return copy_item(to, o, key);
	out = cJSON_AddObjectToObject(to, key);
	if (!out)
		return false;
	for (size_t i = 0; i < n; i++)
		if (keep[i] && !cJSON_GetObjectItemCaseSensitive(out, keep[i]) &&
		    !copy_item(out, v, keep[i]))
			return false;
	return true;
}

/* A container's resources: limits and requests of resource alone (NULL: all). */
static bool copy_resources(cJSON *to, const cJSON *c, const char *resource)
{
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(c, "resources");
	cJSON *out;

	if (!res)
		return true;
	if (!resource || !cJSON_IsObject(res))
		return copy_item(to, c, "resources");
	out = cJSON_AddObjectToObject(to, "resources");
	return out && copy_some(out, res, "limits", &resource, 1) &&
	       copy_some(out, res, "requests", &resource, 1);
}

/* spec[key]: each container's name, resources and restartPolicy. */
static bool copy_containers(cJSON *spec, const cJSON *from, const char *key, const char *resource)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(from, key), *c;
	cJSON *out;

	if (!arr)
		return true;
	if (!cJSON_IsArray(arr))
		return copy_item(spec, from, key); /* hpn_pod_parse says what is wrong */
	out = cJSON_AddArrayToObject(spec, key);
	if (!out)
		return false;
	cJSON_ArrayForEach (c, arr) {
		/* Not an object: kept as it is, for hpn_pod_parse to refuse. */
		cJSON *t = cJSON_IsObject(c) ? cJSON_CreateObject() : cJSON_Duplicate(c, true);

		if (!t || !cJSON_AddItemToArray(out, t)) {
			cJSON_Delete(t);
			return false;
		}
		if (cJSON_IsObject(c) &&
		    (!copy_item(t, c, "name") || !copy_resources(t, c, resource) ||
		     !copy_item(t, c, "restartPolicy")))
			return false;
	}
	return true;
}

/* n keys of names as copy_some's list, into ret (room for HPN_ALLOC_KEYS_MAX): how many. */
static size_t key_list(const char (*names)[HPN_ALLOC_KEY_MAX], size_t n, const char **ret)
{
	size_t i;

	for (i = 0; i < n && i < HPN_ALLOC_KEYS_MAX; i++)
		ret[i] = names[i];
	return i;
}

/* A Pod's metadata and spec trimmed to k, as a Pod; NULL: out of memory. */
static cJSON *trimmed(const struct hpn_alloc_keys *k, const cJSON *meta, const cJSON *spec)
{
	const char *labels[HPN_ALLOC_KEYS_MAX], *annotations[HPN_ALLOC_KEYS_MAX + 1];
	size_t n_labels = key_list(k->labels, k->n_labels, labels);
	size_t n_annotations = key_list(k->annotations, k->n_annotations, annotations);
	const char *resource = k->resource[0] ? k->resource : NULL;
	cJSON *t = cJSON_CreateObject();
	cJSON *tm = cJSON_AddObjectToObject(t, "metadata");
	cJSON *ts = cJSON_AddObjectToObject(t, "spec");

	annotations[n_annotations++] = HPN_KUBE_MIRROR_ANNOTATION;
	if (!tm || !ts || !cJSON_AddStringToObject(t, "apiVersion", "v1") ||
	    !cJSON_AddStringToObject(t, "kind", "Pod") || !copy_item(tm, meta, "namespace") ||
	    !copy_item(tm, meta, "name") || !copy_item(tm, meta, "uid") ||
	    !copy_some(tm, meta, "labels", k->set ? labels : NULL, n_labels) ||
	    !copy_some(tm, meta, "annotations", k->set ? annotations : NULL, n_annotations) ||
	    !copy_containers(ts, spec, "containers", resource) ||
	    !copy_containers(ts, spec, "initContainers", resource)) {
		cJSON_Delete(t);
		return NULL;
	}
	return t;
}

/*
 * status.extendedResourceClaimStatus into e (KEP-5004, "Pod API"): the
 * claim's name and its requestMappings' resources. The scheduler writes it,
 * no tenant; still each name is checked, and a status of another form, or
 * serving more than XRES_MAX resources, is not kept (the lookup then counts
 * the claim's devices as any other claim's). -ENOMEM alone is an error.
 */
static int xclaim_of(const cJSON *pod, struct pod_entry *e)
{
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(pod, "status");
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(st, "extendedResourceClaimStatus");
	const cJSON *maps = cJSON_GetObjectItemCaseSensitive(x, "requestMappings"), *m;
	const char *claim = str_of(x, "resourceClaimName");
	const char *names[XRES_MAX];
	size_t n = 0, len = 0;
	char *out;

	if (!claim || !hpn_k8s_dns_subdomain(claim) || !cJSON_IsArray(maps))
		return 0;
	cJSON_ArrayForEach (m, maps) {
		const char *r = str_of(m, "resourceName");
		bool seen = false;

		if (!r || !hpn_k8s_qualified_name(r) || strlen(r) >= HPN_ALLOC_RESOURCE_MAX)
			return 0;
		for (size_t i = 0; i < n; i++)
			seen |= !strcmp(names[i], r);
		if (seen)
			continue;
		if (n == XRES_MAX)
			return 0;
		names[n++] = r;
		len += strlen(r) + 1;
	}
	if (!n)
		return 0;
	out = malloc(len);
	e->xclaim = strdup(claim);
	if (!out || !e->xclaim) {
		free(out);
		free(e->xclaim);
		e->xclaim = NULL;
		return -ENOMEM;
	}
	len = 0;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(names[i]);

		memcpy(out + len, names[i], l);
		len += l;
		out[len++] = i + 1 < n ? ',' : '\0';
	}
	e->xres = out;
	return 0;
}

/*
 * A Pod from the API made an entry: identity checked (names as the API's
 * rules have them; the rest is hpn_pod_parse's, in the plugin), the JSON
 * trimmed to k, or left out (json NULL) when over pod_max bytes.
 * -EINVAL for an object that is not one.
 */
static int entry_of(const struct hpn_alloc_keys *k, size_t pod_max, const cJSON *pod,
		    struct pod_entry *ret)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
	const char *ns = str_of(meta, "namespace"), *name = str_of(meta, "name");
	const char *uid = str_of(meta, "uid"), *mirror = str_of(ann, HPN_KUBE_MIRROR_ANNOTATION);
	struct pod_entry e = { 0 };
	cJSON *t;

	if (!ns || !name || !uid || !hpn_k8s_dns_label(ns) || !hpn_k8s_dns_subdomain(name) ||
	    !uid[0] || strlen(uid) > HPN_POD_UID_MAX || !cJSON_IsObject(spec))
		return -EINVAL;
	/* A mirror longer than a UID matches no K8S_POD_UID: not kept. */
	if (mirror && strlen(mirror) > HPN_POD_UID_MAX)
		mirror = NULL;
	t = trimmed(k, meta, spec);
	if (!t)
		return -ENOMEM;
	e.json = hpn_json_print(t);
	e.ns = strdup(ns);
	e.name = strdup(name);
	e.uid = strdup(uid);
	e.mirror = mirror ? strdup(mirror) : NULL;
	if (!e.json || !e.ns || !e.name || !e.uid || (mirror && !e.mirror) ||
	    xclaim_of(pod, &e) < 0) {
		entry_free(&e);
		return -ENOMEM;
	}
	if (strlen(e.json) > pod_max) {
		free(e.json);
		e.json = NULL;
	}
	e.bytes = ENTRY_OVERHEAD + strlen(e.ns) + strlen(e.name) + strlen(e.uid) +
		  (e.mirror ? strlen(e.mirror) : 0) + (e.json ? strlen(e.json) : 0) +
		  (e.xclaim ? strlen(e.xclaim) + strlen(e.xres) : 0);
	*ret = e;
	return 0;
}

/* ---- the pods ---------------------------------------------------------------------- */

struct pod_entry *pods_find(struct pods *p, const char *ns, const char *name)
{
	for (size_t i = 0; i < p->n; i++)
		if (!strcmp(p->v[i].ns, ns) && !strcmp(p->v[i].name, name))
			return &p->v[i];
	return NULL;
}

static void drop_entry(struct pods *p, struct pod_entry *e)
{
	p->bytes -= e->bytes;
	entry_free(e);
	*e = p->v[--p->n];
}

void pods_drop(struct pods *p, const char *ns, const char *name)
{
	struct pod_entry *e = pods_find(p, ns, name);

	if (e)
		drop_entry(p, e);
}

/*
 * e replaces the entry of its name, or is added (p takes it): -ENOSPC when
 * that would pass p->max bytes or PODS_MAX pods, e not taken and the entry it
 * would replace dropped (it is stale).
 */
static int put(struct pods *p, struct pod_entry *e)
{
	struct pod_entry *old = pods_find(p, e->ns, e->name);
	size_t bytes = p->bytes - (old ? old->bytes : 0) + e->bytes;

	if (bytes > p->max || (!old && p->n == PODS_MAX)) {
		if (old)
			drop_entry(p, old);
		p->refused++;
		return -ENOSPC;
	}
	if (old) {
		entry_free(old);
		*old = *e;
		p->bytes = bytes;
		return 0;
	}
	if (p->n % 64 == 0) {
		struct pod_entry *np = realloc(p->v, (p->n + 64) * sizeof(*np));

		if (!np)
			return -ENOMEM;
		p->v = np;
	}
	p->v[p->n++] = *e;
	p->bytes = bytes;
	return 0;
}

void pods_free(struct pods *p)
{
	size_t max = p->max;

	for (size_t i = 0; i < p->n; i++)
		entry_free(&p->v[i]);
	free(p->v);
	memset(p, 0, sizeof(*p));
	p->max = max;
}

size_t pods_by_name(const struct pods *p)
{
	size_t n = 0;

	for (size_t i = 0; i < p->n; i++)
		n += !p->v[i].json;
	return n;
}

int pods_keep(struct pods *p, const struct hpn_alloc_keys *k, const cJSON *pod, bool nul,
	      struct pod_skips *s)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const char *ns = str_of(meta, "namespace"), *name = str_of(meta, "name");
	struct pod_entry e;
	int r = entry_of(k, s->pod_max, pod, &e);

	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		if (ns && name)
			pods_drop(p, ns, name); /* not one we can answer for: the API is asked */
		return 0;
	}
	if (nul && e.json) {
		e.bytes -= strlen(e.json);
		free(e.json);
		e.json = NULL;
		e.nul = true;
	}
	if (!e.json && !e.nul) {
		s->too_large++;
		if (!s->said_large)
			hpn_warn("pod cache of node %s: pod %s/%s is over the %zu bytes kept of a "
				 "pod: kept by name only, its lookups answered unknown (the plugin "
				 "asks the API); said once a list, counted in "
				 "hpn_rdma_pod_cache_skipped_total",
				 s->node, e.ns, e.name, s->pod_max);
		s->said_large = true;
	}
	r = put(p, &e);
	if (r == -ENOSPC) {
		s->refused++;
		if (!s->said_full)
			hpn_warn("pod cache of node %s: full (%zu pods, %zu bytes of %zu): pod "
				 "%s/%s not kept, nor any other that does not fit, their lookups "
				 "answered unknown (the plugin asks the API); said once a list, "
				 "counted in hpn_rdma_pod_cache_skipped_total",
				 s->node, p->n, p->bytes, p->max, e.ns, e.name);
		s->said_full = true;
	}
	if (r < 0)
		entry_free(&e);
	return r == -ENOMEM ? r : 0;
}
