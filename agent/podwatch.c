// SPDX-License-Identifier: Apache-2.0
/*
 * The node's pods, kept from the Kubernetes API: a list then a watch of the
 * pods with spec.nodeName = this node, so that the CNI's pod lookup is
 * answered from memory (lookup.c) and not by a TLS request per ADD.
 *
 * On the loop, as every call to the API (agent/core/kubeloop.c): a watch is
 * one HTTP request that lasts minutes, waited on by the loop's epoll with
 * the other services' sockets, so no thread, no lock: the lookup reads the
 * cache on the same thread that keeps it.
 *
 * As client-go's reflector: LIST (resourceVersion R), WATCH from R with
 * bookmarks, R following every event; the server ends a watch after
 * timeoutSeconds (watched again from R), 410 Gone (a status or an ERROR
 * event: R is older than the server keeps) lists again; a failure (API down,
 * a broken stream) marks the cache not synced, waits (0.2 s doubling to
 * 10 s) and lists again. While not synced every question is "unknown" and
 * the plugin asks the API itself: a pod missing from the cache (created a
 * moment ago) is the same. A label changed in the API is seen here as soon
 * as its event arrives, the same lag the kubelet has.
 *
 * The pods are the tenants' to write: any pod may name this node, with up
 * to 256 KiB of annotations and as many labels as etcd's object size
 * allows, so nothing here grows with what they write. Each pod is kept
 * trimmed to what hpn_pod_parse reads for the plugin's config
 * (podwatch_keep: two labels, two annotations, one resource of each
 * container), at most PODWATCH_POD_BYTES_MAX bytes of JSON, else by name
 * only (answered "unknown"); the cache at most PODWATCH_BYTES_MAX bytes and
 * PODS_MAX pods, else the pods that do not fit are not kept (a warning, a
 * counter; their questions "unknown"). A list is read in pages (limit and
 * continue) streamed through the watch's transport: each item is cut out of
 * the body as it arrives and parsed alone, so neither a page nor a pod is
 * held whole beside the cache and no page is refused for its size (the
 * answer cap, HPN_KUBE_BODY_MAX, is for answers kept whole). A page over
 * PAGE_BYTES, or one that failed, makes the next ones ask for half as many
 * pods; small ones, twice as many again.
 */
#include "podwatch.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "exposition.h"
#include "kube.h"
#include "kubeloop.h"
#include "log.h"
#include "loop.h"
#include "podask.h"
#include "util.h"

#define LIST_LIMIT	 50		   /* pods a page asks for, at most */
#define PAGE_BYTES	 ((size_t)4 << 20) /* a page larger: the next ones ask for half */
#define LIST_TIMEOUT_MS	 10000
#define WATCH_SECONDS	 45 /* the server ends a watch after this: we watch again */
#define WATCH_TIMEOUT_MS ((WATCH_SECONDS + 10) * 1000)
#define BACKOFF_MIN_MS	 200
#define BACKOFF_MAX_MS	 10000
#define EVENT_MAX	 ((size_t)2 << 20)  /* one event line, or one item of a list, at most */
#define LIST_META_MAX	 ((size_t)64 << 10) /* a list's metadata (resourceVersion, continue) */
#define DEPTH_MAX	 10000		    /* a list body's nesting */
#define BUF_KEEP	 ((size_t)64 << 10) /* a cut buffer larger is freed after use */
#define PODS_MAX	 4096
/* An entry's struct and its allocations' headers, counted beside its strings. */
#define ENTRY_OVERHEAD 128

struct pod_entry {
	char *ns, *name, *uid;
	char *mirror; /* a static pod's kubernetes.io/config.mirror, or NULL */
	char *json;   /* the trimmed Pod; NULL: kept by name only (too large, or nul) */
	size_t bytes; /* counted against PODWATCH_BYTES_MAX */
	bool nul;     /* its JSON held \u0000, which hpn_pod_parse refuses: the API says so */
};

/* The pods of one list, or the cache. */
struct pods {
	struct pod_entry *v;
	size_t n, bytes;
	size_t max;	/* bytes, at most (PODWATCH_BYTES_MAX) */
	size_t refused; /* pods not kept: the cache was full */
};

/* What of a pod is kept (podwatch_keep); !set: every label and annotation. */
struct keys {
	bool set;
	char *label; /* podSelector.label, or NULL */
	char *model_label, *model_annotation;
	char *resource; /* kubernetes.gpuResource */
};

/* Bytes cut out of a stream: a watch's event line, a list's item or metadata. */
struct cut {
	char *p;
	size_t len, cap;
};

/* A list page's body as it streams in: its items cut out one at a time. */
struct page {
	size_t bytes;	/* of the body so far */
	unsigned depth; /* objects and arrays open */
	bool started;	/* the body's object opened */
	bool ended;	/* and closed */
	bool in_str, esc;
	bool want_key; /* at depth 1: the next string is a member's name */
	bool in_key;   /* reading that name */
	char key[16];  /* the name (cut: longer ones match nothing) */
	size_t klen;
	bool items_seen, in_items;
	enum { CUT_NONE, CUT_ITEM, CUT_META } cut;
	bool over;  /* the item being cut is over EVENT_MAX: skipped */
	char *meta; /* the list's metadata object, once it came */
	size_t n_items, n_over;
	const char *bad; /* why the body is not a list of pods */
};

/* What a wait leads to. */
enum next { NEXT_LIST, NEXT_PAGE, NEXT_WATCH };

struct podwatch {
	char *kubeconfig, *node, *selector; /* selector: "spec.nodeName=NODE", escaped */
	struct kubeloop *kl;		    /* NULL: offline (the fuzzer) */
	struct kube_op *op;		    /* the list page or the watch in flight */
	struct loop_src wait;		    /* the backoff before the next list or watch */
	const struct hpn_conf *conf;	    /* podwatch_keep's, or NULL */
	struct keys keys;		    /* what the cache's pods keep */
	struct keys fresh_keys;		    /* what the list under way keeps */
	struct pods cache;
	struct pods fresh; /* a list's pages so far */
	bool listing;	   /* a list is under way (fresh, cont, page) */
	char *cont;	   /* the next page's continue token, NULL: the first page */
	struct page page;
	int limit;	  /* pods a page asks for */
	size_t pod_max;	  /* PODWATCH_POD_BYTES_MAX */
	size_t bytes_max; /* PODWATCH_BYTES_MAX */
	bool synced;
	unsigned long events, lists, failures; /* failures: rounds that ended unsynced */
	unsigned long too_large, refused;      /* pods kept by name only; not kept */
	bool said_large, said_full;	       /* warned once each, since the list began */
	char rv[64];
	bool gone;	   /* an ERROR event said 410: list again */
	enum next next;	   /* what the wait leads to */
	bool waiting;	   /* for it */
	bool down;	   /* said once: the API failed, until a list succeeds */
	long backoff;	   /* ms */
	long long started; /* the watch's start (ms) */
	struct cut buf;	   /* the watch's line, or the page's item */
};

static void entry_free(struct pod_entry *e)
{
	free(e->ns);
	free(e->name);
	free(e->uid);
	free(e->mirror);
	free(e->json);
	memset(e, 0, sizeof(*e));
}

static const char *str_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- what a pod keeps -------------------------------------------------------------- */

static void keys_free(struct keys *k)
{
	free(k->label);
	free(k->model_label);
	free(k->model_annotation);
	free(k->resource);
	memset(k, 0, sizeof(*k));
}

static const char *conf_resource(const struct hpn_conf *c)
{
	return c->kube.gpu_resource ? c->kube.gpu_resource : HPN_POD_GPU_RESOURCE;
}

static bool same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* Does k keep what conf's plugin reads (no conf: everything)? */
static bool keys_same(const struct keys *k, const struct hpn_conf *c)
{
	if (!c)
		return !k->set;
	return k->set && same(k->label, c->pod_label) && same(k->model_label, c->gpu_model_label) &&
	       same(k->model_annotation, c->gpu_model_annotation) &&
	       same(k->resource, conf_resource(c));
}

static char *dup_or_null(const char *s, bool *oom)
{
	char *d = s ? strdup(s) : NULL;

	*oom |= s && !d;
	return d;
}

/* k made what c's plugin reads (c NULL: everything). */
static int keys_load(struct keys *k, const struct hpn_conf *c)
{
	bool oom = false;

	keys_free(k);
	if (!c)
		return 0;
	k->set = true;
	k->label = dup_or_null(c->pod_label, &oom);
	k->model_label = dup_or_null(c->gpu_model_label, &oom);
	k->model_annotation = dup_or_null(c->gpu_model_annotation, &oom);
	k->resource = dup_or_null(conf_resource(c), &oom);
	if (oom) {
		keys_free(k);
		return -ENOMEM;
	}
	return 0;
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

/*
 * A Pod from the API made an entry: identity checked (names as the API's
 * rules have them; the rest is hpn_pod_parse's, in the plugin), the JSON
 * trimmed to k, or left out (json NULL) when over pod_max bytes.
 * -EINVAL for an object that is not one.
 */
static int entry_of(const struct keys *k, size_t pod_max, const cJSON *pod, struct pod_entry *ret)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
	const char *ns = str_of(meta, "namespace"), *name = str_of(meta, "name");
	const char *uid = str_of(meta, "uid"), *mirror = str_of(ann, HPN_KUBE_MIRROR_ANNOTATION);
	const char *labels[] = { k->label, k->model_label };
	const char *annotations[] = { k->model_annotation, HPN_KUBE_MIRROR_ANNOTATION };
	cJSON *t, *tm, *ts;
	struct pod_entry e = { 0 };

	if (!ns || !name || !uid || !hpn_k8s_dns_label(ns) || !hpn_k8s_dns_subdomain(name) ||
	    !uid[0] || strlen(uid) > HPN_POD_UID_MAX || !cJSON_IsObject(spec))
		return -EINVAL;
	/* A mirror longer than a UID matches no K8S_POD_UID: not kept. */
	if (mirror && strlen(mirror) > HPN_POD_UID_MAX)
		mirror = NULL;
	t = cJSON_CreateObject();
	tm = cJSON_AddObjectToObject(t, "metadata");
	ts = cJSON_AddObjectToObject(t, "spec");
	if (!tm || !ts || !cJSON_AddStringToObject(t, "apiVersion", "v1") ||
	    !cJSON_AddStringToObject(t, "kind", "Pod") || !copy_item(tm, meta, "namespace") ||
	    !copy_item(tm, meta, "name") || !copy_item(tm, meta, "uid") ||
	    !copy_some(tm, meta, "labels", k->set ? labels : NULL, HPN_ARRAY_SIZE(labels)) ||
	    !copy_some(tm, meta, "annotations", k->set ? annotations : NULL,
		       HPN_ARRAY_SIZE(annotations)) ||
	    !copy_containers(ts, spec, "containers", k->resource) ||
	    !copy_containers(ts, spec, "initContainers", k->resource)) {
		cJSON_Delete(t);
		return -ENOMEM;
	}
	e.json = hpn_json_print(t);
	e.ns = strdup(ns);
	e.name = strdup(name);
	e.uid = strdup(uid);
	e.mirror = mirror ? strdup(mirror) : NULL;
	if (!e.json || !e.ns || !e.name || !e.uid || (mirror && !e.mirror)) {
		entry_free(&e);
		return -ENOMEM;
	}
	if (strlen(e.json) > pod_max) {
		free(e.json);
		e.json = NULL;
	}
	e.bytes = ENTRY_OVERHEAD + strlen(e.ns) + strlen(e.name) + strlen(e.uid) +
		  (e.mirror ? strlen(e.mirror) : 0) + (e.json ? strlen(e.json) : 0);
	*ret = e;
	return 0;
}

/* ---- the pods ---------------------------------------------------------------------- */

static struct pod_entry *find(struct pods *p, const char *ns, const char *name)
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

static void drop(struct pods *p, const char *ns, const char *name)
{
	struct pod_entry *e = find(p, ns, name);

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
	struct pod_entry *old = find(p, e->ns, e->name);
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

/* Emptied; its cap stays. */
static void pods_free(struct pods *p)
{
	size_t max = p->max;

	for (size_t i = 0; i < p->n; i++)
		entry_free(&p->v[i]);
	free(p->v);
	memset(p, 0, sizeof(*p));
	p->max = max;
}

/*
 * pod from the API into p (the cache, or the list under way) as k keeps it:
 * too large, kept by name; the cache full, not kept; said once each (then
 * counted); not a pod at all, dropped (the plugin asks the API). nul: its
 * JSON held \u0000, which the trimming would cut and the plugin refuses: kept
 * by name, so that the API's answer decides as it would without the cache.
 * -ENOMEM alone is an error.
 */
static int keep_pod(struct podwatch *pw, struct pods *p, const struct keys *k, const cJSON *pod,
		    bool nul)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const char *ns = str_of(meta, "namespace"), *name = str_of(meta, "name");
	struct pod_entry e;
	int r = entry_of(k, pw->pod_max, pod, &e);

	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		if (ns && name)
			drop(p, ns, name); /* not one we can answer for: the API is asked */
		return 0;
	}
	if (nul && e.json) {
		e.bytes -= strlen(e.json);
		free(e.json);
		e.json = NULL;
		e.nul = true;
	}
	if (!e.json && !e.nul) {
		pw->too_large++;
		if (!pw->said_large)
			hpn_warn("pod cache of node %s: pod %s/%s is over the %zu bytes kept of a "
				 "pod: kept by name only, its lookups answered unknown (the plugin "
				 "asks the API); said once a list, counted in "
				 "hpn_rdma_pod_cache_skipped_total",
				 pw->node, e.ns, e.name, pw->pod_max);
		pw->said_large = true;
	}
	r = put(p, &e);
	if (r == -ENOSPC) {
		pw->refused++;
		if (!pw->said_full)
			hpn_warn("pod cache of node %s: full (%zu pods, %zu bytes of %zu): pod "
				 "%s/%s not kept, nor any other that does not fit, their lookups "
				 "answered unknown (the plugin asks the API); said once a list, "
				 "counted in hpn_rdma_pod_cache_skipped_total",
				 pw->node, p->n, p->bytes, p->max, e.ns, e.name);
		pw->said_full = true;
	}
	if (r < 0)
		entry_free(&e);
	return r == -ENOMEM ? r : 0;
}

static void set_rv(struct podwatch *pw, const cJSON *obj)
{
	const char *rv =
		str_of(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "resourceVersion");

	if (rv && strlen(rv) < sizeof(pw->rv))
		snprintf(pw->rv, sizeof(pw->rv), "%s", rv);
}

/* ---- streams cut into pieces ------------------------------------------------------- */

/* n more bytes of data onto c, within max: false when over it or out of memory. */
static bool cut_add(struct cut *c, const char *data, size_t n, size_t max, bool *oom)
{
	if (n > max - c->len)
		return false;
	if (c->len + n + 1 > c->cap) {
		size_t cap = c->cap ? c->cap : 65536;
		char *p;

		while (cap < c->len + n + 1)
			cap *= 2;
		if (cap > max + 1)
			cap = max + 1;
		p = realloc(c->p, cap);
		if (!p) {
			*oom = true;
			return false;
		}
		c->p = p;
		c->cap = cap;
	}
	memcpy(c->p + c->len, data, n);
	c->len += n;
	c->p[c->len] = '\0';
	return true;
}

/* Emptied; a large buffer given back (one hostile pod does not pin 2 MiB). */
static void cut_reset(struct cut *c)
{
	c->len = 0;
	if (c->cap > BUF_KEEP) {
		free(c->p);
		c->p = NULL;
		c->cap = 0;
	}
}

/* One watch event (a line): the cache changed; < 0 ends the stream. */
static int event(struct podwatch *pw, const char *buf, size_t len)
{
	cJSON *o = hpn_json_parse(buf, len);
	const cJSON *obj = cJSON_GetObjectItemCaseSensitive(o, "object");
	const char *type = str_of(o, "type");
	int r = 0;

	if (!type || !cJSON_IsObject(obj)) {
		hpn_warn("pod cache: a watch event that is not one; listing again");
		r = -EPROTO;
	} else if (!strcmp(type, "ERROR")) {
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");

		pw->gone = cJSON_IsNumber(code) && code->valueint == 410;
		if (!pw->gone)
			hpn_warn("pod cache: the watch's ERROR: %.256s",
				 str_of(obj, "message") ?: "?");
		r = -EPROTO;
	} else if (!strcmp(type, "BOOKMARK")) {
		set_rv(pw, obj);
	} else if (!strcmp(type, "ADDED") || !strcmp(type, "MODIFIED") ||
		   !strcmp(type, "DELETED")) {
		const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
		const char *ns = str_of(meta, "namespace"), *name = str_of(meta, "name");

		set_rv(pw, obj);
		pw->events++;
		if (!strcmp(type, "DELETED")) {
			if (ns && name)
				drop(&pw->cache, ns, name);
		} else {
			r = keep_pod(pw, &pw->cache, &pw->keys, obj, hpn_json_has_nul(buf, len));
		}
		hpn_debug("pod cache: %s %.64s/%.256s", type, ns ? ns : "?", name ? name : "?");
	}
	cJSON_Delete(o);
	return r;
}

/* The watch's bytes cut into lines, one event each. */
static int on_data(void *ud, const char *data, size_t len)
{
	struct podwatch *pw = ud;

	while (len) {
		const char *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) : len;
		bool oom = false;
		int r;

		if (!cut_add(&pw->buf, data, n, EVENT_MAX, &oom)) {
			if (oom)
				return -ENOMEM;
			/* Its pod is not known: only a list can make the cache right again. */
			hpn_warn("pod cache: a watch event over %zu bytes; listing again",
				 EVENT_MAX);
			return -EFBIG;
		}
		if (!nl)
			return 0;
		r = pw->buf.len ? event(pw, pw->buf.p, pw->buf.len) : 0;
		cut_reset(&pw->buf);
		if (r < 0)
			return r;
		data = nl + 1;
		len -= n + 1;
	}
	return 0;
}

/* ---- a list page, streamed --------------------------------------------------------- */

static void page_reset(struct page *pg)
{
	free(pg->meta);
	memset(pg, 0, sizeof(*pg));
}

/* A whole item of the list cut out: into the list under way. */
static int page_item(struct podwatch *pw)
{
	struct page *pg = &pw->page;
	cJSON *o;
	int r;

	pg->n_items++;
	if (pg->over) {
		/* Not known: its lookups are "not in the cache", answered by the API. */
		pg->n_over++;
		return 0;
	}
	o = hpn_json_parse(pw->buf.p, pw->buf.len);
	r = o ? keep_pod(pw, &pw->fresh, &pw->fresh_keys, o,
			 hpn_json_has_nul(pw->buf.p, pw->buf.len))
	      : 0;
	cJSON_Delete(o);
	return r;
}

/* The list's metadata cut out: kept for the page's end. */
static int page_meta(struct podwatch *pw)
{
	struct page *pg = &pw->page;

	if (pg->meta || pg->over) {
		pg->bad = pg->meta ? "it has two metadata" : "its metadata is too large";
		return -EPROTO;
	}
	pg->meta = strdup(pw->buf.p ? pw->buf.p : "");
	return pg->meta ? 0 : -ENOMEM;
}

/* A cut ends at data[i]: its bytes from data[from], then the item or the metadata. */
static int cut_end(struct podwatch *pw, const char *data, size_t from, size_t i)
{
	struct page *pg = &pw->page;
	size_t max = pg->cut == CUT_META ? LIST_META_MAX : EVENT_MAX;
	bool oom = false;
	int r;

	if (!pg->over && !cut_add(&pw->buf, data + from, i + 1 - from, max, &oom)) {
		if (oom)
			return -ENOMEM;
		pg->over = true;
	}
	r = pg->cut == CUT_META ? page_meta(pw) : page_item(pw);
	cut_reset(&pw->buf);
	pg->cut = CUT_NONE;
	pg->over = false;
	return r;
}

/* A value opens at depth 1 or 2 (c: its first byte, at data[i]): what it means for the list. */
static int page_open(struct page *pg, char c)
{
	if (pg->depth == 1) {
		if (pg->klen == 5 && !memcmp(pg->key, "items", 5)) {
			if (c != '[' || pg->items_seen) {
				pg->bad = "its items are not one array";
				return -EPROTO;
			}
			pg->items_seen = pg->in_items = true;
		} else if (pg->klen == 8 && !memcmp(pg->key, "metadata", 8) && c == '{') {
			pg->cut = CUT_META;
		}
	} else if (pg->depth == 2 && pg->in_items) {
		if (c != '{') {
			pg->bad = "an item is not an object";
			return -EPROTO;
		}
		pg->cut = CUT_ITEM;
	}
	return 0;
}

/*
 * A page's bytes: the body's structure followed (strings, nesting), each
 * item of the top object's "items" and its "metadata" cut out whole; the
 * rest (kind, apiVersion) passed over. Not JSON enough to follow: -EPROTO,
 * pg->bad says why; each cut is parsed as JSON on its own.
 */
static int page_data(struct podwatch *pw, const char *data, size_t len)
{
	struct page *pg = &pw->page;
	size_t from = 0;
	int r;

	if (pg->bad)
		return -EPROTO;
	pg->bytes += len;
	for (size_t i = 0; i < len; i++) {
		char c = data[i];

		if (pg->in_str) {
			if (pg->esc) {
				pg->esc = false;
			} else if (c == '\\') {
				pg->esc = true;
				if (pg->in_key)
					pg->klen = sizeof(pg->key); /* escaped: matches nothing */
			} else if (c == '"') {
				pg->in_str = pg->in_key = false;
			} else if (pg->in_key && pg->klen < sizeof(pg->key)) {
				pg->key[pg->klen++] = c;
			}
			continue;
		}
		switch (c) {
		case ' ':
		case '\t':
		case '\n':
		case '\r':
			continue;
		case '"':
			if (!pg->started || pg->ended) {
				pg->bad = "it is not a JSON object";
				return -EPROTO;
			}
			if (pg->depth == 2 && pg->in_items) {
				pg->bad = "an item is not an object";
				return -EPROTO;
			}
			pg->in_str = true;
			if (pg->depth == 1 && pg->want_key) {
				pg->in_key = true;
				pg->want_key = false;
				pg->klen = 0;
			}
			continue;
		case '{':
		case '[':
			if (!pg->started) {
				if (c != '{')
					break;
				pg->started = pg->want_key = true;
				pg->depth = 1;
				continue;
			}
			if (pg->ended || pg->depth >= DEPTH_MAX)
				break;
			if (pg->cut == CUT_NONE) {
				r = page_open(pg, c);
				if (r < 0)
					return r;
				if (pg->cut != CUT_NONE)
					from = i;
			}
			pg->depth++;
			continue;
		case '}':
		case ']':
			if (!pg->started || pg->ended)
				break;
			pg->depth--;
			if (pg->depth == 0) {
				if (c != '}')
					break;
				pg->ended = true;
			} else if ((pg->cut == CUT_META && pg->depth == 1) ||
				   (pg->cut == CUT_ITEM && pg->depth == 2)) {
				r = cut_end(pw, data, from, i);
				if (r < 0)
					return r;
			} else if (pg->in_items && pg->depth == 1) {
				pg->in_items = false;
			}
			continue;
		case ',':
			if (pg->depth == 1)
				pg->want_key = true;
			if (pg->started && !pg->ended)
				continue;
			break;
		default:
			/* A number or a literal: a member's value, never an item nor outside. */
			if (pg->started && !pg->ended && !(pg->depth == 2 && pg->in_items))
				continue;
			if (pg->depth == 2 && pg->in_items) {
				pg->bad = "an item is not an object";
				return -EPROTO;
			}
			break;
		}
		pg->bad = "it is not a JSON object";
		return -EPROTO;
	}
	if (pg->cut != CUT_NONE && !pg->over) {
		bool oom = false;

		if (!cut_add(&pw->buf, data + from, len - from,
			     pg->cut == CUT_META ? LIST_META_MAX : EVENT_MAX, &oom)) {
			if (oom)
				return -ENOMEM;
			pg->over = true;
			cut_reset(&pw->buf);
		}
	}
	return 0;
}

static int on_page_data(void *ud, const char *data, size_t len)
{
	struct podwatch *pw = ud;
	int r = page_data(pw, data, len);

	if (r == -ENOMEM && !pw->page.bad)
		pw->page.bad = "out of memory";
	return r;
}

/* ---- the rounds -------------------------------------------------------------------- */

static void list_page(struct podwatch *pw);
static void watch(struct podwatch *pw);

static long next_backoff(long b)
{
	return b * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b * 2;
}

static void on_wait(struct loop_src *s)
{
	struct podwatch *pw = s->ud;

	pw->waiting = false;
	switch (pw->next) {
	case NEXT_LIST:
		free(pw->cont);
		pw->cont = NULL;
		list_page(pw);
		break;
	case NEXT_PAGE:
		list_page(pw);
		break;
	case NEXT_WATCH:
		watch(pw);
		break;
	}
}

/* The next list, page or watch after the backoff (offline: at the next offline_step). */
static void later(struct podwatch *pw, enum next next)
{
	pw->next = next;
	pw->waiting = true;
	if (!pw->kl)
		return;
	loop_timer_set(&pw->wait, (int)pw->backoff, 0);
	pw->backoff = next_backoff(pw->backoff);
}

/*
 * A list or watch failed: the cache is not in step; after the backoff, the
 * failed page is asked again (page), or the list begins again.
 */
static void failed(struct podwatch *pw, const struct kube_result *res, bool page)
{
	const char *why = res->err.msg[0] ? res->err.msg : strerror(-res->r);
	const char *then = page && pw->cont ? "asking for the page again" : "listing again";

	if (!page) {
		pods_free(&pw->fresh);
		pw->listing = false;
	}
	pw->synced = false;
	pw->failures++;
	/* Said once until a list succeeds again (an API down, RBAC refusing). */
	if (!pw->down)
		hpn_warn("pod cache of node %s: %s; not synced, %s in %ld ms (said once until it "
			 "lists)",
			 pw->node, why, then, pw->backoff);
	else
		hpn_debug("pod cache of node %s: %s; %s in %ld ms", pw->node, why, then,
			  pw->backoff);
	pw->down = true;
	later(pw, page ? NEXT_PAGE : NEXT_LIST);
}

/* The page's end: -EPROTO and res's error when the body was not a whole list. */
static int page_whole(struct podwatch *pw, struct kube_result *res)
{
	const struct page *pg = &pw->page;
	const char *why = pg->bad;

	if (!why && !pg->ended)
		why = pg->started ? "it ended before its end" : "it is empty";
	if (!why && !pg->items_seen)
		why = "it has no items";
	if (!why)
		return 0;
	res->r = hpn_err_set(&res->err, HPN_E_KUBE, EPROTO,
			     "Kubernetes API %s: the list of the node's pods (%zu bytes, %zu "
			     "items): %s",
			     res->server[0] ? res->server : "(offline)", pg->bytes, pg->n_items,
			     why);
	return res->r;
}

/* Entries kept by name only. */
static size_t by_name(const struct pods *p)
{
	size_t n = 0;

	for (size_t i = 0; i < p->n; i++)
		n += !p->v[i].json;
	return n;
}

/*
 * A page's body was whole: the next page asked (1), or the list made the
 * cache and the watch began (0); < 0, a metadata that is not one.
 */
static int page_end(struct podwatch *pw, struct kube_result *res)
{
	struct page *pg = &pw->page;
	cJSON *meta = pg->meta ? hpn_json_parse(pg->meta, strlen(pg->meta)) : NULL;
	const char *cont = str_of(meta, "continue"), *rv;
	char *next = NULL;

	if (pg->meta && !cJSON_IsObject(meta)) {
		cJSON_Delete(meta);
		return hpn_err_set(&res->err, HPN_E_KUBE, EPROTO,
				   "Kubernetes API %s: the list of the node's pods has a metadata "
				   "that is not an object",
				   res->server[0] ? res->server : "(offline)");
	}
	rv = str_of(meta, "resourceVersion");
	if (rv && strlen(rv) < sizeof(pw->rv))
		snprintf(pw->rv, sizeof(pw->rv), "%s", rv);
	/* Pages sized to PAGE_BYTES: half as many after a large one, twice after a small one. */
	if (pg->bytes > PAGE_BYTES && pw->limit > 1)
		pw->limit /= 2;
	else if (pg->bytes < PAGE_BYTES / 4 && pw->limit < LIST_LIMIT)
		pw->limit = pw->limit * 2 > LIST_LIMIT ? LIST_LIMIT : pw->limit * 2;
	if (pg->n_over)
		hpn_warn("pod cache of node %s: %zu pods of a list page over %zu bytes: not kept, "
			 "their lookups answered unknown",
			 pw->node, pg->n_over, EVENT_MAX);
	if (cont && cont[0]) {
		next = strdup(cont);
		cJSON_Delete(meta);
		if (!next)
			return -ENOMEM;
		free(pw->cont);
		pw->cont = next;
		list_page(pw);
		return 1;
	}
	cJSON_Delete(meta);
	free(pw->cont);
	pw->cont = NULL;
	pods_free(&pw->cache);
	pw->cache = pw->fresh;
	memset(&pw->fresh, 0, sizeof(pw->fresh));
	pw->fresh.max = pw->bytes_max;
	keys_free(&pw->keys);
	pw->keys = pw->fresh_keys;
	memset(&pw->fresh_keys, 0, sizeof(pw->fresh_keys));
	pw->listing = false;
	pw->synced = true;
	pw->down = false;
	pw->lists++;
	pw->backoff = BACKOFF_MIN_MS;
	hpn_info("pod cache: %zu pods of node %s listed (resourceVersion %s): %zu bytes, %zu kept "
		 "by name only, %zu not kept",
		 pw->cache.n, pw->node, pw->rv, pw->cache.bytes, by_name(&pw->cache),
		 pw->cache.refused);
	watch(pw);
	return 0;
}

/* One page's stream ended: the next page, the watch, or asked again. */
static void page_done(void *ud, struct kube_result *res)
{
	struct podwatch *pw = ud;
	int r;

	pw->op = NULL;
	/* A continue token older than the server keeps: the list from its start (client-go's pager). */
	if (res->r >= 0 && res->a.status == 410 && pw->cont) {
		hpn_info("pod cache: the list's continue token expired (410); listing from the "
			 "start");
		pods_free(&pw->fresh);
		pw->listing = false;
		later(pw, NEXT_LIST);
		return;
	}
	if (res->r >= 0 && res->a.status != 200)
		kube_result_status_err(
			res, &(struct hpn_kube_call){ .method = "GET", .what = "the node's pods" });
	/* Not a status: the stream, which page_data stopped or which ended short. */
	if (res->r >= 0 || res->r == -ECANCELED)
		page_whole(pw, res);
	if (res->r < 0) {
		/* Cut in its body (slow, too large for the time): asked again with half as many. */
		if (pw->page.bytes && pw->limit > 1)
			pw->limit /= 2;
		failed(pw, res, true);
		return;
	}
	r = page_end(pw, res);
	if (r < 0) {
		res->r = r;
		failed(pw, res, true);
	}
}

/* LIST, a page at a time: the page after pw->cont (NULL: the first, and the list begins). */
static void list_page(struct podwatch *pw)
{
	_cleanup_free_ char *path = NULL, *esc = NULL;
	struct hpn_kube_call call = { .method = "GET",
				      .what = "the node's pods",
				      .resource = "pods",
				      .verb = "list",
				      .timeout_ms = LIST_TIMEOUT_MS };
	struct kube_result res = { .r = -ENOMEM };

	if (!pw->cont) {
		pods_free(&pw->fresh);
		pw->said_large = pw->said_full = false;
		if (keys_load(&pw->fresh_keys, pw->conf) < 0) {
			failed(pw, &res, false);
			return;
		}
	}
	pw->listing = true;
	page_reset(&pw->page);
	cut_reset(&pw->buf);
	if (!pw->kl)
		return;
	if ((pw->cont && hpn_kube_query_escape(pw->cont, &esc) < 0) ||
	    asprintf(&path, "/api/v1/pods?fieldSelector=%s&limit=%d%s%s", pw->selector, pw->limit,
		     esc ? "&continue=" : "", esc ? esc : "") < 0) {
		path = NULL;
		failed(pw, &res, true);
		return;
	}
	call.path = path;
	/* Streamed: its items parsed as they come, none of its size held (podwatch.c's head). */
	res.r = kube_watch(pw->kl, pw->kubeconfig, &call, on_page_data, page_done, pw, &pw->op);
	if (res.r < 0)
		failed(pw, &res, true);
}

/* The watch ended: watched again, or listed again (410, a bad event), or it failed. */
static void watch_done(void *ud, struct kube_result *res)
{
	struct podwatch *pw = ud;
	bool relist;

	pw->op = NULL;
	if (res->r >= 0 && res->a.status != 200 && res->a.status != 410)
		kube_result_status_err(
			res, &(struct hpn_kube_call){ .method = "GET",
						      .what = "the watch of the node's pods" });
	/* 410, or the stream ended by a bad event: list again. */
	relist = (res->r >= 0 && res->a.status == 410) || res->r == -ECANCELED;
	if (res->r < 0 && !relist) {
		failed(pw, res, false);
		return;
	}
	if (relist)
		hpn_info("pod cache: resourceVersion %s is gone (410) or the stream was bad; "
			 "listing again",
			 pw->rv);
	/* A server that ends every watch at once is not asked again at once. */
	if (hpn_mono_ms() - pw->started < 1000) {
		later(pw, relist ? NEXT_LIST : NEXT_WATCH);
		return;
	}
	pw->backoff = BACKOFF_MIN_MS;
	if (relist) {
		free(pw->cont);
		pw->cont = NULL;
		list_page(pw);
	} else {
		watch(pw);
	}
}

/* WATCH from pw->rv until the server ends it. */
static void watch(struct podwatch *pw)
{
	_cleanup_free_ char *path = NULL, *rv = NULL;
	struct hpn_kube_call call = { .method = "GET",
				      .what = "the watch of the node's pods",
				      .resource = "pods",
				      .verb = "watch",
				      .timeout_ms = WATCH_TIMEOUT_MS };
	struct kube_result res = { .r = -ENOMEM };

	cut_reset(&pw->buf);
	pw->gone = false;
	pw->started = hpn_mono_ms();
	if (!pw->kl)
		return;
	if (hpn_kube_query_escape(pw->rv, &rv) < 0 ||
	    asprintf(&path,
		     "/api/v1/pods?fieldSelector=%s&watch=1&resourceVersion=%s"
		     "&allowWatchBookmarks=true&timeoutSeconds=%d",
		     pw->selector, rv, WATCH_SECONDS) < 0) {
		path = NULL;
		failed(pw, &res, false);
		return;
	}
	call.path = path;
	res.r = kube_watch(pw->kl, pw->kubeconfig, &call, on_data, watch_done, pw, &pw->op);
	if (res.r < 0)
		failed(pw, &res, false);
}

/* The list begun again now, with what pw->conf keeps (a reload changed it). */
static void relist_now(struct podwatch *pw)
{
	kube_cancel(pw->op);
	pw->op = NULL;
	if (pw->kl)
		loop_timer_set(&pw->wait, LOOP_OFF, 0);
	pw->waiting = false;
	free(pw->cont);
	pw->cont = NULL;
	list_page(pw);
}

static struct podwatch *podwatch_new(size_t pod_max, size_t bytes_max)
{
	struct podwatch *pw = calloc(1, sizeof(*pw));

	if (!pw)
		return NULL;
	pw->wait.fd = -1;
	pw->wait.ud = pw; /* offline, offline_step calls on_wait itself */
	pw->backoff = BACKOFF_MIN_MS;
	pw->limit = LIST_LIMIT;
	pw->pod_max = pod_max;
	pw->bytes_max = pw->cache.max = pw->fresh.max = bytes_max;
	return pw;
}

int podwatch_start(struct loop *l, struct kubeloop *kl, const char *kubeconfig, const char *node,
		   struct podwatch **ret)
{
	struct podwatch *pw = podwatch_new(PODWATCH_POD_BYTES_MAX, PODWATCH_BYTES_MAX);
	_cleanup_free_ char *sel = NULL;
	int r;

	if (!pw)
		return -ENOMEM;
	pw->kl = kl;
	pw->kubeconfig = strdup(kubeconfig);
	pw->node = strdup(node);
	if (!pw->kubeconfig || !pw->node || asprintf(&sel, "spec.nodeName=%s", node) < 0 ||
	    hpn_kube_query_escape(sel, &pw->selector) < 0) {
		sel = NULL;
		podwatch_free(pw);
		return -ENOMEM;
	}
	/* The first list at the next round: podwatch_keep, if called now, is in it. */
	r = loop_timer(l, &pw->wait, 0, 0, on_wait, pw);
	if (r < 0) {
		podwatch_free(pw);
		return r;
	}
	pw->next = NEXT_LIST;
	pw->waiting = true;
	hpn_info("pod cache: watching the pods of node %s (kubeconfig %s)", node, kubeconfig);
	*ret = pw;
	return 0;
}

/*
 * What pw keeps is not what pw->conf's plugin reads: the list begun again with
 * it, unless one with it is under way or a list is waited for (it reads conf).
 */
static void keys_check(struct podwatch *pw)
{
	if (pw->listing ? keys_same(&pw->fresh_keys, pw->conf) : keys_same(&pw->keys, pw->conf))
		return;
	if (pw->waiting && pw->next == NEXT_LIST)
		return;
	relist_now(pw);
}

void podwatch_keep(struct podwatch *pw, const struct hpn_conf *conf)
{
	pw->conf = conf;
	keys_check(pw);
}

void podwatch_free(struct podwatch *pw)
{
	if (!pw)
		return;
	kube_cancel(pw->op);
	loop_close(&pw->wait);
	pods_free(&pw->cache);
	pods_free(&pw->fresh);
	keys_free(&pw->keys);
	keys_free(&pw->fresh_keys);
	page_reset(&pw->page);
	free(pw->cont);
	free(pw->buf.p);
	free(pw->kubeconfig);
	free(pw->node);
	free(pw->selector);
	free(pw);
}

char *podwatch_answer(struct podwatch *pw, const struct hpn_alloc_req *req)
{
	const char *why = NULL, *json = NULL;
	const struct pod_entry *e;
	struct hpn_alloc_keys kept = { 0 };
	char said[128], lacks[512] = "";
	char *out;

	e = find(&pw->cache, req->namespace, req->name);
	if (!keys_same(&pw->keys, pw->conf))
		keys_check(pw);
	if (pw->conf)
		hpn_podask_keys(pw->conf, &kept);
	if (!pw->synced) {
		why = "the pod cache is not synced with the API";
	} else if (!keys_same(&pw->keys, pw->conf)) {
		why = "the plugin's config changed what the pod cache keeps; listing again";
	} else if (!hpn_podask_keys_kept(&req->keys, &kept, lacks, sizeof(lacks))) {
		why = lacks; /* a plugin config naming other keys than the agent's --config */
	} else if (!e) {
		snprintf(said, sizeof(said),
			 "the pod is not in the cache, which is full (%zu bytes)", pw->bytes_max);
		why = pw->cache.refused ? said : "the pod is not in the cache";
	} else if (req->uid[0] && strcmp(e->uid, req->uid) &&
		   !(e->mirror && !strcmp(e->mirror, req->uid))) {
		why = "the cached pod has another UID";
	} else if (e->nul) {
		why = "the pod's JSON holds a \\u0000 escape";
	} else if (!e->json) {
		snprintf(said, sizeof(said),
			 "the pod is over the %zu bytes the cache keeps of a pod", pw->pod_max);
		why = said;
	} else {
		json = e->json;
	}
	out = hpn_podask_reply_render(json, why);
	if (why)
		hpn_info("pod lookup for %s/%s: unknown (%s)", req->namespace, req->name, why);
	else
		hpn_debug("pod lookup for %s/%s: from the cache", req->namespace, req->name);
	return out;
}

void podwatch_metrics(struct sbuf *b, void *ud)
{
	static const char *const reason[] = { "too_large", "cache_full" };
	const struct podwatch *pw = ud;
	uint64_t skipped[] = { pw->too_large, pw->refused };

	expo_gauge(b, "hpn_rdma_pod_cache_synced",
		   "1 while the node's pod cache is in step with the API (listed, watching).",
		   pw->synced ? 1 : 0);
	expo_counter(b, "hpn_rdma_pod_cache_lists_total",
		     "Lists of the node's pods that succeeded.", pw->lists);
	expo_counter(b, "hpn_rdma_pod_cache_events_total", "Watch events applied to the cache.",
		     pw->events);
	expo_counter(b, "hpn_rdma_pod_cache_failures_total",
		     "Lists and watches that failed, each followed by a list after a backoff.",
		     pw->failures);
	expo_gauge(b, "hpn_rdma_pod_cache_pods",
		   "Pods in the cache, those kept by name only included.", (double)pw->cache.n);
	expo_gauge(b, "hpn_rdma_pod_cache_bytes",
		   "Bytes the cache holds, as counted against its cap.", (double)pw->cache.bytes);
	expo_gauge(b, "hpn_rdma_pod_cache_bytes_max",
		   "The cache's cap: pods that do not fit are not kept.", (double)pw->bytes_max);
	expo_family(b, "hpn_rdma_pod_cache_skipped_total", "counter",
		    "Pods a list or an event did not keep whole, by reason: too_large (over the "
		    "bytes kept of a pod: kept by name only), cache_full (not kept).");
	for (size_t i = 0; i < HPN_ARRAY_SIZE(reason); i++)
		expo_sample_u64(b, "hpn_rdma_pod_cache_skipped_total",
				(const char *const[]){ "reason", reason[i], NULL }, skipped[i]);
}

/* ---- offline, for the fuzzer --------------------------------------------------------- */

/* Offline, a wait is over at once: its step taken (one: no loop on a failure that recurs). */
static void offline_step(struct podwatch *pw)
{
	if (pw->waiting)
		on_wait(&pw->wait);
}

struct podwatch *podwatch_offline(const struct hpn_conf *conf, size_t pod_max, size_t bytes_max)
{
	struct podwatch *pw = podwatch_new(pod_max, bytes_max);

	if (!pw)
		return NULL;
	pw->node = strdup("offline");
	if (!pw->node) {
		podwatch_free(pw);
		return NULL;
	}
	pw->conf = conf;
	list_page(pw);
	offline_step(pw);
	return pw;
}

int podwatch_offline_page(struct podwatch *pw, const char *data, size_t len)
{
	int r = on_page_data(pw, data, len);

	if (r < 0) {
		struct kube_result res = { .r = -ECANCELED };

		page_done(pw, &res);
		offline_step(pw);
	}
	return r;
}

int podwatch_offline_page_end(struct podwatch *pw)
{
	struct kube_result res = { .a.status = 200 };
	int r;

	if (page_whole(pw, &res) < 0) {
		if (pw->page.bytes && pw->limit > 1)
			pw->limit /= 2;
		failed(pw, &res, true);
		offline_step(pw);
		return res.r;
	}
	r = page_end(pw, &res);
	if (r < 0) {
		res.r = r;
		failed(pw, &res, true);
	}
	offline_step(pw);
	return r;
}

int podwatch_offline_watch(struct podwatch *pw, const char *data, size_t len)
{
	int r = on_data(pw, data, len);

	if (r < 0) {
		free(pw->cont);
		pw->cont = NULL;
		list_page(pw);
		offline_step(pw);
	}
	return r;
}
