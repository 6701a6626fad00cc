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
 * Each pod is kept trimmed to what hpn_pod_parse reads (metadata's
 * identity, labels and annotations; each container's resources and
 * restartPolicy), at most HPN_PODASK_REPLY_MAX bytes of JSON.
 */
#include "podwatch.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exposition.h"
#include "kube.h"
#include "kubeloop.h"
#include "log.h"
#include "loop.h"
#include "podask.h"
#include "util.h"

#define LIST_LIMIT	 50 /* pods per page: a page within HPN_KUBE_BODY_MAX */
#define LIST_TIMEOUT_MS	 10000
#define WATCH_SECONDS	 45 /* the server ends a watch after this: we watch again */
#define WATCH_TIMEOUT_MS ((WATCH_SECONDS + 10) * 1000)
#define BACKOFF_MIN_MS	 200
#define BACKOFF_MAX_MS	 10000
#define EVENT_MAX	 ((size_t)2 << 20) /* one event line, at most */
#define PODS_MAX	 4096

struct pod_entry {
	char *ns, *name, *uid;
	char *mirror; /* a static pod's kubernetes.io/config.mirror, or NULL */
	char *json;   /* the trimmed Pod */
};

/* The pods of one list, or the cache. */
struct pods {
	struct pod_entry *v;
	size_t n;
};

struct podwatch {
	char *kubeconfig, *node, *selector; /* selector: "spec.nodeName=NODE", escaped */
	struct kubeloop *kl;
	struct kube_op *op;   /* the list page or the watch in flight */
	struct loop_src wait; /* the backoff before the next list or watch */
	struct pods cache;
	struct pods fresh; /* a list's pages so far */
	bool synced;
	unsigned long events, lists, failures; /* failures: rounds that ended unsynced */
	char rv[64];
	bool gone;	   /* an ERROR event said 410: list again */
	bool need_list;	   /* what the wait leads to: a list, or a watch */
	bool down;	   /* said once: the API failed, until a list succeeds */
	long backoff;	   /* ms */
	long long started; /* the watch's start (ms) */
	char *line;
	size_t len, cap;
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

/* o[key] copied into to when it is there. */
static bool copy_item(cJSON *to, const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	cJSON *c;

	if (!v)
		return true;
	c = cJSON_Duplicate(v, true);
	return c && cJSON_AddItemToObject(to, key, c);
}

/* spec[key]: each container's name, resources and restartPolicy. */
static bool copy_containers(cJSON *spec, const cJSON *from, const char *key)
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
		cJSON *t = cJSON_CreateObject();

		if (!t || !cJSON_AddItemToArray(out, t)) {
			cJSON_Delete(t);
			return false;
		}
		if (!cJSON_IsObject(c))
			continue;
		if (!copy_item(t, c, "name") || !copy_item(t, c, "resources") ||
		    !copy_item(t, c, "restartPolicy"))
			return false;
	}
	return true;
}

/*
 * A Pod from the API made an entry: identity checked (names as the API's
 * rules have them; the rest is hpn_pod_parse's, in the plugin), the JSON
 * trimmed. -EINVAL for an object that is not one.
 */
static int entry_of(const cJSON *pod, struct pod_entry *ret)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
	const char *ns = str_of(meta, "namespace"), *name = str_of(meta, "name");
	const char *uid = str_of(meta, "uid"), *mirror = str_of(ann, HPN_KUBE_MIRROR_ANNOTATION);
	cJSON *t, *tm, *ts;
	struct pod_entry e = { 0 };

	if (!ns || !name || !uid || !hpn_k8s_dns_label(ns) || !hpn_k8s_dns_subdomain(name) ||
	    !uid[0] || strlen(uid) > HPN_POD_UID_MAX || !cJSON_IsObject(spec))
		return -EINVAL;
	t = cJSON_CreateObject();
	tm = cJSON_AddObjectToObject(t, "metadata");
	ts = cJSON_AddObjectToObject(t, "spec");
	if (!tm || !ts || !cJSON_AddStringToObject(t, "apiVersion", "v1") ||
	    !cJSON_AddStringToObject(t, "kind", "Pod") || !copy_item(tm, meta, "namespace") ||
	    !copy_item(tm, meta, "name") || !copy_item(tm, meta, "uid") ||
	    !copy_item(tm, meta, "labels") || !copy_item(tm, meta, "annotations") ||
	    !copy_containers(ts, spec, "containers") ||
	    !copy_containers(ts, spec, "initContainers")) {
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
	if (strlen(e.json) > HPN_PODASK_REPLY_MAX - 64) {
		entry_free(&e);
		return -EFBIG;
	}
	*ret = e;
	return 0;
}

static struct pod_entry *find(struct pods *p, const char *ns, const char *name)
{
	for (size_t i = 0; i < p->n; i++)
		if (!strcmp(p->v[i].ns, ns) && !strcmp(p->v[i].name, name))
			return &p->v[i];
	return NULL;
}

/* e replaces the entry of its name, or is added. */
static int put(struct pods *p, struct pod_entry *e)
{
	struct pod_entry *old = find(p, e->ns, e->name);

	if (old) {
		entry_free(old);
		*old = *e;
		return 0;
	}
	if (p->n == PODS_MAX)
		return -E2BIG;
	if (p->n % 64 == 0) {
		struct pod_entry *np = realloc(p->v, (p->n + 64) * sizeof(*np));

		if (!np)
			return -ENOMEM;
		p->v = np;
	}
	p->v[p->n++] = *e;
	return 0;
}

static void drop(struct pods *p, const char *ns, const char *name)
{
	struct pod_entry *e = find(p, ns, name);

	if (!e)
		return;
	entry_free(e);
	*e = p->v[--p->n];
}

static void pods_free(struct pods *p)
{
	for (size_t i = 0; i < p->n; i++)
		entry_free(&p->v[i]);
	free(p->v);
	p->v = NULL;
	p->n = 0;
}

static void set_rv(struct podwatch *pw, const cJSON *obj)
{
	const char *rv =
		str_of(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "resourceVersion");

	if (rv && strlen(rv) < sizeof(pw->rv))
		snprintf(pw->rv, sizeof(pw->rv), "%s", rv);
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
			hpn_warn("pod cache: the watch's ERROR: %s", str_of(obj, "message") ?: "?");
		r = -EPROTO;
	} else if (!strcmp(type, "BOOKMARK")) {
		set_rv(pw, obj);
	} else if (!strcmp(type, "ADDED") || !strcmp(type, "MODIFIED") ||
		   !strcmp(type, "DELETED")) {
		const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
		const char *ns = str_of(meta, "namespace"), *name = str_of(meta, "name");
		struct pod_entry e;

		set_rv(pw, obj);
		pw->events++;
		if (!strcmp(type, "DELETED")) {
			if (ns && name)
				drop(&pw->cache, ns, name);
		} else if (entry_of(obj, &e) == 0) {
			if (put(&pw->cache, &e) < 0)
				entry_free(&e);
		} else if (ns && name) {
			drop(&pw->cache, ns,
			     name); /* not one we can answer for: the API is asked */
		}
		hpn_debug("pod cache: %s %s/%s", type, ns ? ns : "?", name ? name : "?");
	}
	cJSON_Delete(o);
	return r;
}

/* The stream's bytes cut into lines, one event each. */
static int on_data(void *ud, const char *data, size_t len)
{
	struct podwatch *pw = ud;

	for (size_t i = 0; i < len; i++) {
		if (data[i] == '\n') {
			int r = pw->len ? event(pw, pw->line, pw->len) : 0;

			pw->len = 0;
			if (r < 0)
				return r;
			continue;
		}
		if (pw->len + 1 >= pw->cap) {
			size_t cap = pw->cap ? pw->cap * 2 : 65536;
			char *nl;

			if (cap > EVENT_MAX) {
				hpn_warn("pod cache: a watch event over %zu bytes; listing again",
					 EVENT_MAX);
				return -EFBIG;
			}
			nl = realloc(pw->line, cap);
			if (!nl)
				return -ENOMEM;
			pw->line = nl;
			pw->cap = cap;
		}
		pw->line[pw->len++] = data[i];
	}
	return 0;
}

static void list_page(struct podwatch *pw, const char *cont);
static void watch(struct podwatch *pw);

static long next_backoff(long b)
{
	return b * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b * 2;
}

/* The next list (or watch) after the backoff. */
static void later(struct podwatch *pw, bool list)
{
	pw->need_list = list;
	loop_timer_set(&pw->wait, (int)pw->backoff, 0);
	pw->backoff = next_backoff(pw->backoff);
}

/* A list or watch failed: the cache is not in step; listed again after the backoff. */
static void failed(struct podwatch *pw, const struct kube_result *res)
{
	const char *why = res->err.msg[0] ? res->err.msg : strerror(-res->r);

	pods_free(&pw->fresh);
	pw->synced = false;
	pw->failures++;
	/* Said once until a list succeeds again (an API down, RBAC refusing). */
	if (!pw->down)
		hpn_warn("pod cache of node %s: %s; not synced, listing again in %ld ms (said "
			 "once until it lists)",
			 pw->node, why, pw->backoff);
	else
		hpn_debug("pod cache of node %s: %s; listing again in %ld ms", pw->node, why,
			  pw->backoff);
	pw->down = true;
	later(pw, true);
}

/* One page of a list into pw->fresh; the next page asked, or the list made the cache. */
static void page_done(void *ud, struct kube_result *res)
{
	struct podwatch *pw = ud;
	const cJSON *items, *item, *meta;
	const char *cont;
	cJSON *o;

	pw->op = NULL;
	if (res->r >= 0 && res->a.status != 200)
		kube_result_status_err(
			res, &(struct hpn_kube_call){ .method = "GET", .what = "the node's pods" });
	if (res->r < 0) {
		failed(pw, res);
		return;
	}
	o = hpn_json_parse(res->a.body, res->a.len);
	items = cJSON_GetObjectItemCaseSensitive(o, "items");
	meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
	if (!cJSON_IsArray(items)) {
		cJSON_Delete(o);
		res->r = hpn_err_set(&res->err, HPN_E_KUBE, EPROTO,
				     "Kubernetes API %s: the list of the node's pods has no items",
				     res->server);
		failed(pw, res);
		return;
	}
	cJSON_ArrayForEach (item, items) {
		struct pod_entry e;

		if (entry_of(item, &e) < 0)
			continue; /* not a pod we could answer for: the plugin asks the API */
		if (put(&pw->fresh, &e) < 0)
			entry_free(&e);
	}
	set_rv(pw, o);
	cont = str_of(meta, "continue");
	if (cont && cont[0]) {
		list_page(pw, cont);
		cJSON_Delete(o);
		return;
	}
	cJSON_Delete(o);
	pods_free(&pw->cache);
	pw->cache = pw->fresh;
	memset(&pw->fresh, 0, sizeof(pw->fresh));
	pw->synced = true;
	pw->down = false;
	pw->lists++;
	hpn_info("pod cache: %zu pods of node %s listed (resourceVersion %s)", pw->cache.n,
		 pw->node, pw->rv);
	watch(pw);
}

/* LIST, a page at a time (cont: the next page's token, NULL: the first). */
static void list_page(struct podwatch *pw, const char *cont)
{
	_cleanup_free_ char *path = NULL, *esc = NULL;
	struct hpn_kube_call call = { .method = "GET",
				      .what = "the node's pods",
				      .resource = "pods",
				      .verb = "list",
				      .timeout_ms = LIST_TIMEOUT_MS,
				      .retry = true };
	struct kube_result res = { .r = -ENOMEM };

	if (!cont)
		pods_free(&pw->fresh);
	if ((cont && hpn_kube_query_escape(cont, &esc) < 0) ||
	    asprintf(&path, "/api/v1/pods?fieldSelector=%s&limit=%d%s%s", pw->selector, LIST_LIMIT,
		     esc ? "&continue=" : "", esc ? esc : "") < 0) {
		path = NULL;
		failed(pw, &res);
		return;
	}
	call.path = path;
	res.r = kube_call(pw->kl, pw->kubeconfig, &call, page_done, pw, &pw->op);
	if (res.r < 0)
		failed(pw, &res);
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
		failed(pw, res);
		return;
	}
	if (relist)
		hpn_info("pod cache: resourceVersion %s is gone (410) or the stream was bad; "
			 "listing again",
			 pw->rv);
	/* A server that ends every watch at once is not asked again at once. */
	if (hpn_mono_ms() - pw->started < 1000) {
		later(pw, relist);
		return;
	}
	pw->backoff = BACKOFF_MIN_MS;
	if (relist)
		list_page(pw, NULL);
	else
		watch(pw);
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

	if (hpn_kube_query_escape(pw->rv, &rv) < 0 ||
	    asprintf(&path,
		     "/api/v1/pods?fieldSelector=%s&watch=1&resourceVersion=%s"
		     "&allowWatchBookmarks=true&timeoutSeconds=%d",
		     pw->selector, rv, WATCH_SECONDS) < 0) {
		path = NULL;
		failed(pw, &res);
		return;
	}
	call.path = path;
	pw->len = 0;
	pw->gone = false;
	pw->started = hpn_mono_ms();
	res.r = kube_watch(pw->kl, pw->kubeconfig, &call, on_data, watch_done, pw, &pw->op);
	if (res.r < 0)
		failed(pw, &res);
}

static void on_wait(struct loop_src *s)
{
	struct podwatch *pw = s->ud;

	if (pw->need_list)
		list_page(pw, NULL);
	else
		watch(pw);
}
int podwatch_start(struct loop *l, struct kubeloop *kl, const char *kubeconfig, const char *node,
		   struct podwatch **ret)
{
	struct podwatch *pw = calloc(1, sizeof(*pw));
	_cleanup_free_ char *sel = NULL;
	int r;

	if (!pw)
		return -ENOMEM;
	pw->kl = kl;
	pw->wait.fd = -1;
	pw->backoff = BACKOFF_MIN_MS;
	pw->kubeconfig = strdup(kubeconfig);
	pw->node = strdup(node);
	if (!pw->kubeconfig || !pw->node || asprintf(&sel, "spec.nodeName=%s", node) < 0 ||
	    hpn_kube_query_escape(sel, &pw->selector) < 0) {
		sel = NULL;
		podwatch_free(pw);
		return -ENOMEM;
	}
	r = loop_timer(l, &pw->wait, LOOP_OFF, 0, on_wait, pw);
	if (r < 0) {
		podwatch_free(pw);
		return r;
	}
	list_page(pw, NULL);
	hpn_info("pod cache: watching the pods of node %s (kubeconfig %s)", node, kubeconfig);
	*ret = pw;
	return 0;
}

void podwatch_free(struct podwatch *pw)
{
	if (!pw)
		return;
	kube_cancel(pw->op);
	loop_close(&pw->wait);
	pods_free(&pw->cache);
	pods_free(&pw->fresh);
	free(pw->line);
	free(pw->kubeconfig);
	free(pw->node);
	free(pw->selector);
	free(pw);
}

char *podwatch_answer(struct podwatch *pw, const struct hpn_alloc_req *req)
{
	const char *why = NULL, *json = NULL;
	const struct pod_entry *e;
	char *out;

	e = find(&pw->cache, req->namespace, req->name);
	if (!pw->synced)
		why = "the pod cache is not synced with the API";
	else if (!e)
		why = "the pod is not in the cache";
	else if (req->uid[0] && strcmp(e->uid, req->uid) &&
		 !(e->mirror && !strcmp(e->mirror, req->uid)))
		why = "the cached pod has another UID";
	else
		json = e->json;
	out = hpn_podask_reply_render(json, why);
	if (why)
		hpn_info("pod lookup for %s/%s: unknown (%s)", req->namespace, req->name, why);
	else
		hpn_debug("pod lookup for %s/%s: from the cache", req->namespace, req->name);
	return out;
}

void podwatch_metrics(struct sbuf *b, void *ud)
{
	const struct podwatch *pw = ud;
	unsigned long lists = pw->lists, events = pw->events, failures = pw->failures;
	bool synced = pw->synced;
	expo_gauge(b, "hpn_rdma_pod_cache_synced",
		   "1 while the node's pod cache is in step with the API (listed, watching).",
		   synced ? 1 : 0);
	expo_counter(b, "hpn_rdma_pod_cache_lists_total",
		     "Lists of the node's pods that succeeded.", lists);
	expo_counter(b, "hpn_rdma_pod_cache_events_total", "Watch events applied to the cache.",
		     events);
	expo_counter(b, "hpn_rdma_pod_cache_failures_total",
		     "Lists and watches that failed, each followed by a list after a backoff.",
		     failures);
}
