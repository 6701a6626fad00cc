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
 * What a pod keeps and the cache's caps are podcache.c's. A list is read in
 * pages (limit and continue) streamed through the watch's transport, each
 * item cut out as it arrives (podstream.c) and kept alone. A page over
 * PAGE_BYTES, or one that failed, makes the next ones ask for half as many
 * pods; small ones, twice as many again.
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
#include "podcache.h"
#include "podstream.h"
#include "util.h"

#define LIST_LIMIT	 50		   /* pods a page asks for, at most */
#define PAGE_BYTES	 ((size_t)4 << 20) /* a page larger: the next ones ask for half */
#define LIST_TIMEOUT_MS	 10000
#define WATCH_SECONDS	 45 /* the server ends a watch after this: we watch again */
#define WATCH_TIMEOUT_MS ((WATCH_SECONDS + 10) * 1000)
#define BACKOFF_MIN_MS	 200
#define BACKOFF_MAX_MS	 10000

/* What a wait leads to. */
enum next { NEXT_LIST, NEXT_PAGE, NEXT_WATCH };

struct podwatch {
	char *kubeconfig, *node, *selector; /* selector: "spec.nodeName=NODE", escaped */
	struct kubeloop *kl;		    /* NULL: offline (the fuzzer) */
	struct kube_op *op;		    /* the list page or the watch in flight */
	struct loop_src wait;		    /* the backoff before the next list or watch */
	const struct hpn_conf *conf;	    /* podwatch_keep's, or NULL */
	struct hpn_alloc_keys keys;	    /* what the cache's pods keep */
	struct hpn_alloc_keys fresh_keys;   /* what the list under way keeps */
	struct pods cache;
	struct pods fresh; /* a list's pages so far */
	bool listing;	   /* a list is under way (fresh, cont, page) */
	char *cont;	   /* the next page's continue token, NULL: the first page */
	struct page page;
	int limit;		/* pods a page asks for */
	size_t bytes_max;	/* PODWATCH_BYTES_MAX */
	struct pod_skips skips; /* PODWATCH_POD_BYTES_MAX, the pods not kept whole */
	bool synced;
	unsigned long events, lists, failures; /* failures: rounds that ended unsynced */
	char rv[64];
	bool gone;	   /* an ERROR event said 410: list again */
	enum next next;	   /* what the wait leads to */
	bool waiting;	   /* for it */
	bool down;	   /* said once: the API failed, until a list succeeds */
	long backoff;	   /* ms */
	long long started; /* the watch's start (ms) */
	struct cut buf;	   /* the watch's line, or the page's item */
};

static const char *str_of(const cJSON *o, const char *key)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static void set_rv(struct podwatch *pw, const cJSON *obj)
{
	const char *rv =
		str_of(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "resourceVersion");

	if (rv && strlen(rv) < sizeof(pw->rv))
		snprintf(pw->rv, sizeof(pw->rv), "%s", rv);
}

/* ---- the watch's events ------------------------------------------------------------ */

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
				pods_drop(&pw->cache, ns, name);
		} else {
			r = pods_keep(&pw->cache, &pw->keys, obj, hpn_json_has_nul(buf, len),
				      &pw->skips);
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

/* A whole item of the list cut out (page_item_fn): into the list under way. */
static int page_item(void *ud, const char *item, size_t len)
{
	struct podwatch *pw = ud;
	cJSON *o = hpn_json_parse(item, len);
	int r = o ? pods_keep(&pw->fresh, &pw->fresh_keys, o, hpn_json_has_nul(item, len),
			      &pw->skips)
		  : 0;

	cJSON_Delete(o);
	return r;
}

static int on_page_data(void *ud, const char *data, size_t len)
{
	struct podwatch *pw = ud;

	return page_data(&pw->page, data, len);
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
	const char *why = page_not_whole(pg);

	if (!why)
		return 0;
	res->r = hpn_err_set(&res->err, HPN_E_KUBE, EPROTO,
			     "Kubernetes API %s: the list of the node's pods (%zu bytes, %zu "
			     "items): %s",
			     res->server[0] ? res->server : "(offline)", pg->bytes, pg->n_items,
			     why);
	return res->r;
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
	pw->keys = pw->fresh_keys;
	pw->listing = false;
	pw->synced = true;
	pw->down = false;
	pw->lists++;
	pw->backoff = BACKOFF_MIN_MS;
	hpn_info("pod cache: %zu pods of node %s listed (resourceVersion %s): %zu bytes, %zu kept "
		 "by name only, %zu not kept",
		 pw->cache.n, pw->node, pw->rv, pw->cache.bytes, pods_by_name(&pw->cache),
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
		pw->skips.said_large = pw->skips.said_full = false;
		pod_keys_of(pw->conf, &pw->fresh_keys);
	}
	pw->listing = true;
	page_begin(&pw->page, &pw->buf, page_item, pw);
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
	/* Streamed: its items parsed as they come, none of its size held (podstream.c's head). */
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
	pw->skips.pod_max = pod_max;
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
	pw->skips.node = pw->node;
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
	if (pod_keys_same(pw->listing ? &pw->fresh_keys : &pw->keys, pw->conf))
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
	page_free(&pw->page);
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
	char said[128], lacks[512] = "";
	char *out;

	e = pods_find(&pw->cache, req->namespace, req->name);
	if (!pod_keys_same(&pw->keys, pw->conf))
		keys_check(pw);
	if (!pw->synced) {
		why = "the pod cache is not synced with the API";
	} else if (!pod_keys_same(&pw->keys, pw->conf)) {
		why = "the plugin's config changed what the pod cache keeps; listing again";
	} else if (!hpn_podask_keys_kept(&req->keys, &pw->keys, lacks, sizeof(lacks))) {
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
			 "the pod is over the %zu bytes the cache keeps of a pod",
			 pw->skips.pod_max);
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
	uint64_t skipped[] = { pw->skips.too_large, pw->skips.refused };

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
	pw->skips.node = pw->node;
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

bool podwatch_xclaim(struct podwatch *pw, const struct hpn_alloc_req *req, char *claim,
		     size_t claim_len, char *res, size_t res_len)
{
	const struct pod_entry *e = pw ? pods_find(&pw->cache, req->namespace, req->name) : NULL;

	/* Another pod under the name (a UID given and not its own) has another claim. */
	if (!e || !e->xclaim || (req->uid[0] && strcmp(e->uid, req->uid)))
		return false;
	return hpn_snprintf(claim, claim_len, "%s", e->xclaim) >= 0 &&
	       hpn_snprintf(res, res_len, "%s", e->xres) >= 0;
}
