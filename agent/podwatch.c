// SPDX-License-Identifier: Apache-2.0
/*
 * The node's pods, kept from the Kubernetes API: a list then a watch of the
 * pods with spec.nodeName = this node, so that the CNI's pod lookup is
 * answered from memory (lookup.c) and not by a TLS request per ADD.
 *
 * A thread of its own: a watch is one HTTP request that lasts minutes, and
 * libcurl's easy interface blocks for it; on the loop's one worker it would
 * starve CHECK, GC and Prepare. The thread owns the list and watch; the
 * cache is the one thing it shares, behind a mutex the loop takes for one
 * lookup's copy of one entry. Nothing on the loop reacts to a pod change, so
 * no event is handed over: the loop only reads.
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
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exposition.h"
#include "kube.h"
#include "log.h"
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

struct podwatch {
	char *kubeconfig, *node, *selector; /* selector: "spec.nodeName=NODE", escaped */
	pthread_t thread;
	bool started;
	atomic_bool stop;
	pthread_mutex_t mu; /* guards what follows, and wake */
	pthread_cond_t wake;
	struct pod_entry *pods;
	size_t n;
	bool synced;
	unsigned long events, lists, failures; /* failures: rounds that ended unsynced */
	/* The thread's own. */
	char rv[64];
	bool gone; /* an ERROR event said 410: list again */
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

static struct pod_entry *find(struct podwatch *pw, const char *ns, const char *name)
{
	for (size_t i = 0; i < pw->n; i++)
		if (!strcmp(pw->pods[i].ns, ns) && !strcmp(pw->pods[i].name, name))
			return &pw->pods[i];
	return NULL;
}

/* Under mu: e replaces the entry of its name, or is added. */
static int put(struct podwatch *pw, struct pod_entry *e)
{
	struct pod_entry *old = find(pw, e->ns, e->name);

	if (old) {
		entry_free(old);
		*old = *e;
		return 0;
	}
	if (pw->n == PODS_MAX)
		return -E2BIG;
	if (pw->n % 64 == 0) {
		struct pod_entry *np = realloc(pw->pods, (pw->n + 64) * sizeof(*np));

		if (!np)
			return -ENOMEM;
		pw->pods = np;
	}
	pw->pods[pw->n++] = *e;
	return 0;
}

static void drop(struct podwatch *pw, const char *ns, const char *name)
{
	struct pod_entry *e = find(pw, ns, name);

	if (!e)
		return;
	entry_free(e);
	*e = pw->pods[--pw->n];
}

static void set_rv(struct podwatch *pw, const cJSON *obj)
{
	const char *rv =
		str_of(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "resourceVersion");

	if (rv && strlen(rv) < sizeof(pw->rv))
		snprintf(pw->rv, sizeof(pw->rv), "%s", rv);
}

/* The thread's wait: ms, or until podwatch_free. */
static void pause_ms(struct podwatch *pw, long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&pw->mu);
	if (!atomic_load(&pw->stop))
		pthread_cond_timedwait(&pw->wake, &pw->mu, &ts);
	pthread_mutex_unlock(&pw->mu);
}

static void unsynced(struct podwatch *pw)
{
	pthread_mutex_lock(&pw->mu);
	pw->synced = false;
	pw->failures++;
	pthread_mutex_unlock(&pw->mu);
}

/* One page of a list into pods; *cont the next page's token (malloc'd) or NULL. */
static int list_page(struct podwatch *pw, const struct hpn_kubeconfig *kc, const char *cont,
		     struct podwatch *into, char **next, struct hpn_err *err)
{
	_cleanup_free_ char *path = NULL, *esc = NULL;
	struct hpn_kube_call call = { .method = "GET",
				      .what = "the node's pods",
				      .resource = "pods",
				      .verb = "list",
				      .timeout_ms = LIST_TIMEOUT_MS,
				      .retry = true };
	struct hpn_kube_answer a = { 0 };
	struct hpn_kube_warn warn = { 0 };
	const cJSON *items, *item, *meta;
	cJSON *o;
	int r;

	if (cont && hpn_kube_query_escape(cont, &esc) < 0)
		return -ENOMEM;
	if (asprintf(&path, "/api/v1/pods?fieldSelector=%s&limit=%d%s%s", pw->selector, LIST_LIMIT,
		     esc ? "&continue=" : "", esc ? esc : "") < 0) {
		path = NULL;
		return -ENOMEM;
	}
	call.path = path;
	r = hpn_kube_request(kc, &call, &a, &warn, err);
	if (warn.msg[0])
		hpn_warn("%s", warn.msg);
	if (r < 0)
		return r;
	if (a.status != 200) {
		r = hpn_kube_status_err(kc, &call, &a, err);
		hpn_kube_answer_free(&a);
		return r;
	}
	o = hpn_json_parse(a.body, a.len);
	hpn_kube_answer_free(&a);
	items = cJSON_GetObjectItemCaseSensitive(o, "items");
	meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
	if (!cJSON_IsArray(items)) {
		cJSON_Delete(o);
		return hpn_err_set(err, HPN_E_KUBE, EPROTO,
				   "Kubernetes API %s: the list of the node's pods has no items",
				   kc->server);
	}
	cJSON_ArrayForEach (item, items) {
		struct pod_entry e;

		if (entry_of(item, &e) < 0)
			continue; /* not a pod we could answer for: the plugin asks the API */
		if (put(into, &e) < 0)
			entry_free(&e);
	}
	set_rv(pw, o);
	*next = NULL;
	if (str_of(meta, "continue") && str_of(meta, "continue")[0])
		*next = strdup(str_of(meta, "continue"));
	cJSON_Delete(o);
	return 0;
}

/* LIST: the cache replaced by what the API holds now, pw->rv its version. */
static int list(struct podwatch *pw, struct hpn_err *err)
{
	struct hpn_kube_warn warn = { 0 };
	struct podwatch fresh = { 0 };
	struct hpn_kubeconfig kc;
	char *cont = NULL;
	int r;

	r = hpn_kubeconfig_load(pw->kubeconfig, &kc, &warn, err);
	if (r < 0)
		return r;
	do {
		char *next = NULL;

		r = list_page(pw, &kc, cont, &fresh, &next, err);
		free(cont);
		cont = next;
	} while (r == 0 && cont);
	free(cont);
	hpn_kubeconfig_free(&kc);
	if (r == 0) {
		pthread_mutex_lock(&pw->mu);
		for (size_t i = 0; i < pw->n; i++)
			entry_free(&pw->pods[i]);
		free(pw->pods);
		pw->pods = fresh.pods;
		pw->n = fresh.n;
		pw->synced = true;
		pw->lists++;
		pthread_mutex_unlock(&pw->mu);
		hpn_info("pod cache: %zu pods of node %s listed (resourceVersion %s)", fresh.n,
			 pw->node, pw->rv);
		return 0;
	}
	for (size_t i = 0; i < fresh.n; i++)
		entry_free(&fresh.pods[i]);
	free(fresh.pods);
	return r;
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
		pthread_mutex_lock(&pw->mu);
		pw->events++;
		if (!strcmp(type, "DELETED")) {
			if (ns && name)
				drop(pw, ns, name);
		} else if (entry_of(obj, &e) == 0) {
			if (put(pw, &e) < 0)
				entry_free(&e);
		} else if (ns && name) {
			drop(pw, ns, name); /* not one we can answer for: the API is asked */
		}
		pthread_mutex_unlock(&pw->mu);
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

static bool stopping(void *ud)
{
	struct podwatch *pw = ud;

	return atomic_load(&pw->stop);
}

/* WATCH from pw->rv until the server ends it: 1 to list again, 0 to watch again, < 0. */
static int watch(struct podwatch *pw, struct hpn_err *err)
{
	_cleanup_free_ char *path = NULL, *rv = NULL;
	struct hpn_kube_stream st = { .on_data = on_data, .stop = stopping, .ud = pw };
	struct hpn_kube_call call = { .method = "GET",
				      .what = "the watch of the node's pods",
				      .resource = "pods",
				      .verb = "watch",
				      .timeout_ms = WATCH_TIMEOUT_MS };
	struct hpn_kube_answer a = { 0 };
	struct hpn_kube_warn warn = { 0 };
	struct hpn_kubeconfig kc;
	int r;

	if (hpn_kube_query_escape(pw->rv, &rv) < 0)
		return -ENOMEM;
	if (asprintf(&path,
		     "/api/v1/pods?fieldSelector=%s&watch=1&resourceVersion=%s"
		     "&allowWatchBookmarks=true&timeoutSeconds=%d",
		     pw->selector, rv, WATCH_SECONDS) < 0) {
		path = NULL;
		return -ENOMEM;
	}
	call.path = path;
	r = hpn_kubeconfig_load(pw->kubeconfig, &kc, &warn, err);
	if (r < 0)
		return r;
	pw->len = 0;
	pw->gone = false;
	r = hpn_kube_stream(&kc, &call, &st, &a, &warn, err);
	if (warn.msg[0])
		hpn_warn("%s", warn.msg);
	/* 410, or the stream ended by a bad event (not by a stop): list again. */
	if (r >= 0 && a.status != 200 && a.status != 410)
		r = hpn_kube_status_err(&kc, &call, &a, err);
	else if ((r >= 0 && a.status == 410) ||
		 (r == -ECANCELED && (pw->gone || !atomic_load(&pw->stop))))
		r = 1;
	if (r == 1)
		hpn_info("pod cache: resourceVersion %s is gone (410) or the stream was bad; "
			 "listing again",
			 pw->rv);
	hpn_kube_answer_free(&a);
	hpn_kubeconfig_free(&kc);
	return r;
}

static void *run(void *arg)
{
	struct podwatch *pw = arg;
	long backoff = BACKOFF_MIN_MS;
	bool need_list = true, down = false;

	while (!atomic_load(&pw->stop)) {
		struct hpn_err err = { 0 };
		int r = need_list ? list(pw, &err) : 0;

		if (r == 0) {
			down = false;
			long long start = hpn_mono_ms();

			r = watch(pw, &err);
			if (atomic_load(&pw->stop))
				break;
			if (r >= 0) {
				need_list = r == 1;
				/* A server that ends every watch at once is not asked again at once. */
				if (hpn_mono_ms() - start < 1000) {
					pause_ms(pw, backoff);
					backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
									       : backoff * 2;
				} else {
					backoff = BACKOFF_MIN_MS;
				}
				continue;
			}
		}
		if (atomic_load(&pw->stop))
			break;
		unsynced(pw);
		/* Said once until a list succeeds again (an API down, RBAC refusing). */
		if (!down)
			hpn_warn("pod cache of node %s: %s; not synced, listing again in %ld ms "
				 "(said once until it lists)",
				 pw->node, err.msg[0] ? err.msg : strerror(-r), backoff);
		else
			hpn_debug("pod cache of node %s: %s; listing again in %ld ms", pw->node,
				  err.msg[0] ? err.msg : strerror(-r), backoff);
		down = true;
		pause_ms(pw, backoff);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
		need_list = true;
	}
	return NULL;
}

int podwatch_start(const char *kubeconfig, const char *node, struct podwatch **ret)
{
	struct podwatch *pw = calloc(1, sizeof(*pw));
	_cleanup_free_ char *sel = NULL;
	struct hpn_err err = { 0 };
	int r;

	if (!pw)
		return -ENOMEM;
	pthread_mutex_init(&pw->mu, NULL);
	pthread_cond_init(&pw->wake, NULL);
	atomic_init(&pw->stop, false);
	pw->kubeconfig = strdup(kubeconfig);
	pw->node = strdup(node);
	if (!pw->kubeconfig || !pw->node || asprintf(&sel, "spec.nodeName=%s", node) < 0 ||
	    hpn_kube_query_escape(sel, &pw->selector) < 0) {
		podwatch_free(pw);
		return -ENOMEM;
	}
	/* libcurl initialised here, before another thread can make a request. */
	r = hpn_kube_init(&err);
	if (r < 0) {
		hpn_error("pod cache: %s", err.msg);
		podwatch_free(pw);
		return r;
	}
	r = -pthread_create(&pw->thread, NULL, run, pw);
	if (r < 0) {
		podwatch_free(pw);
		return r;
	}
	pw->started = true;
	hpn_info("pod cache: watching the pods of node %s (kubeconfig %s)", node, kubeconfig);
	*ret = pw;
	return 0;
}

void podwatch_free(struct podwatch *pw)
{
	if (!pw)
		return;
	if (pw->started) {
		pthread_mutex_lock(&pw->mu);
		atomic_store(&pw->stop, true);
		pthread_cond_signal(&pw->wake);
		pthread_mutex_unlock(&pw->mu);
		pthread_join(pw->thread, NULL);
	}
	for (size_t i = 0; i < pw->n; i++)
		entry_free(&pw->pods[i]);
	free(pw->pods);
	free(pw->line);
	free(pw->kubeconfig);
	free(pw->node);
	free(pw->selector);
	pthread_cond_destroy(&pw->wake);
	pthread_mutex_destroy(&pw->mu);
	free(pw);
}

char *podwatch_answer(struct podwatch *pw, const struct hpn_alloc_req *req)
{
	const char *why = NULL, *json = NULL;
	const struct pod_entry *e;
	char *out;

	pthread_mutex_lock(&pw->mu);
	e = find(pw, req->namespace, req->name);
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
	pthread_mutex_unlock(&pw->mu);
	if (why)
		hpn_info("pod lookup for %s/%s: unknown (%s)", req->namespace, req->name, why);
	else
		hpn_debug("pod lookup for %s/%s: from the cache", req->namespace, req->name);
	return out;
}

void podwatch_metrics(struct sbuf *b, void *ud)
{
	struct podwatch *pw = ud;
	unsigned long lists, events, failures;
	bool synced;

	pthread_mutex_lock(&pw->mu);
	synced = pw->synced;
	lists = pw->lists;
	events = pw->events;
	failures = pw->failures;
	pthread_mutex_unlock(&pw->mu);
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
