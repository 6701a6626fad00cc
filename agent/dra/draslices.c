// SPDX-License-Identifier: Apache-2.0
/*
 * The DRA driver's ResourceSlices (draslices.h): the pool rendered on the
 * loop, published on the loop's worker (lib/kube.c blocks), one round of
 * requests per job.
 */
#include "draslices.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "draslice.h"
#include "exposition.h"
#include "kube.h"
#include "kubeconfig.h"
#include "log.h"
#include "loop.h"
#include "node.h"
#include "util.h"

#define DEBOUNCE_MS	200   /* a burst of scans is one round... */
#define DEBOUNCE_MAX_MS 1000  /* ...rendered at most this long after its first scan */
#define RESYNC_MS	60000 /* the API checked again this often */
#define BACKOFF_MIN_MS	1000  /* after a failed round, then doubled... */
#define BACKOFF_MAX_MS	30000 /* ...up to this */
#define CONFLICT_TRIES	4     /* PUTs of one slice answered 409, read again in between */
#define MAX_SLICES_LIST 64    /* slices of our node and driver read, at most */

/* One round on the worker: touches only itself. */
struct pub_job {
	struct loop_job job;
	struct draslices *s;
	char *kubeconfig, *driver, *node, *key;
	int timeout_ms;
	struct hpn_dra_nic *nics;
	size_t n;
	long floor; /* the generation we last published: a new one goes above */
	int r;
	struct hpn_err err;
	long gen;   /* the generation in the API after the round */
	bool wrote; /* the round wrote (or deleted) a slice */
	size_t slices;
	unsigned long writes; /* slices PUT or POSTed */
	double took_s;	      /* the round's time on the worker */
};

/* A NIC as sysfs last showed it: what it keeps in the slices while a pod holds it. */
struct seen {
	char id[HPN_ALLOC_ID_MAX];
	struct hpn_dra_nic nic;
};

/* For metrics (doc/metrics.md, the hpn_rdma_dra_slice* families). */
struct draslices_stats {
	unsigned long publishes; /* rounds that wrote the slices */
	unsigned long unchanged; /* rounds that found the API holding them already */
	unsigned long failures;	 /* rounds that failed */
	unsigned long writes;	 /* slices PUT or POSTed */
	double write_s;		 /* the time rounds that wrote took, from their list on */
	long generation;	 /* the pool generation last published (0: none yet) */
	size_t slices;		 /* the slices of the pool after the last good round */
};

struct draslices {
	struct draslices_opts o;
	struct loop *loop;
	struct node *node;
	struct loop_src timer;
	struct hpn_dra_nic *want; /* the pool's NICs as last scanned */
	size_t n_want;
	char *want_key; /* want rendered at generation 0 */
	char *done_key; /* what the last good round published */
	bool job_out, stopping, down;
	bool dirty;	    /* scanned since the last rendering */
	long long dirty_at; /* CLOCK_MONOTONIC ms: the first scan since */
	long long due;	    /* CLOCK_MONOTONIC ms: the next round, change or not */
	struct seen *seen;  /* the pool's NICs as last read from sysfs, by ID */
	size_t n_seen;
	int backoff_ms, resync_ms;
	struct draslices_stats st;
};

/* ---- the worker's side ------------------------------------------------------------ */

/* One request; 0 with the answer, whatever its status, or the error of a call that failed. */
static int req(const struct hpn_kubeconfig *kc, struct pub_job *j, const char *method,
	       const char *path, const char *body, const char *what, const char *verb, bool retry,
	       struct hpn_kube_answer *a)
{
	struct hpn_kube_warn warn = { 0 };
	struct hpn_kube_call call = {
		.method = method,
		.path = path,
		.body = body,
		.body_len = body ? strlen(body) : 0,
		.what = what,
		.resource = "resourceslices",
		.verb = verb,
		.timeout_ms = (unsigned)j->timeout_ms,
		.retry = retry,
	};

	return hpn_kube_request(kc, &call, a, &warn, &j->err);
}

/* The error of an answer that is not a 2xx. */
static int status_err(const struct hpn_kubeconfig *kc, struct pub_job *j, const char *method,
		      const char *path, const char *what, const struct hpn_kube_answer *a)
{
	struct hpn_kube_call call = {
		.method = method, .path = path, .what = what, .resource = "resourceslices"
	};

	return hpn_kube_status_err(kc, &call, a, &j->err);
}

static const char *rv_of(const cJSON *obj)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, "metadata");

	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "resourceVersion"));
}

static const char *name_of(const cJSON *obj)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, "metadata");

	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "name"));
}

static long gen_of(const cJSON *obj)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(spec, "pool"), "generation");

	return cJSON_IsNumber(g) && g->valuedouble >= 0 && g->valuedouble < 1e15
		       ? (long)g->valuedouble
		       : 0;
}

/*
 * Writes obj (the slice rendered, named name) over the one in the API with
 * resourceVersion rv (NULL: none there, POSTed). A 409 on PUT reads the
 * slice again for its resourceVersion, CONFLICT_TRIES times at most; a PUT
 * answered 404 (deleted meanwhile) POSTs, a POST answered 409 (made
 * meanwhile) PUTs.
 */
static int write_slice(const struct hpn_kubeconfig *kc, struct pub_job *j, cJSON *obj,
		       const char *name, const char *rv)
{
	char path[512], what[320], rvbuf[64];
	int r = 0;

	snprintf(what, sizeof(what), "ResourceSlice %s", name);
	snprintf(rvbuf, sizeof(rvbuf), "%s", rv ? rv : "");
	for (int i = 0; i < CONFLICT_TRIES; i++) {
		struct hpn_kube_answer a = { 0 };
		cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
		bool put = rvbuf[0] != '\0';
		char *body;
		long st;

		cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
		if (put && !cJSON_AddStringToObject(meta, "resourceVersion", rvbuf))
			return hpn_err_set(&j->err, HPN_E_INTERNAL, ENOMEM, "out of memory");
		body = cJSON_PrintUnformatted(obj);
		if (!body)
			return hpn_err_set(&j->err, HPN_E_INTERNAL, ENOMEM, "out of memory");
		if (put)
			snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/resourceslices/%s",
				 name);
		else
			snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/resourceslices");
		r = req(kc, j, put ? "PUT" : "POST", path, body, what, NULL, put, &a);
		free(body);
		if (r < 0)
			return r;
		st = a.status;
		if (st >= 200 && st <= 299) {
			hpn_kube_answer_free(&a);
			return 0;
		}
		if (st == 404 && put) {
			rvbuf[0] = '\0';
		} else if (st == 409) {
			struct hpn_kube_answer g = { 0 };
			cJSON *cur;

			/* Changed (or made) by someone else since we read it: read it again. */
			snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/resourceslices/%s",
				 name);
			hpn_kube_answer_free(&a);
			r = req(kc, j, "GET", path, NULL, what, NULL, true, &g);
			if (r < 0)
				return r;
			cur = g.status == 200 ? cJSON_ParseWithLength(g.body, g.len) : NULL;
			snprintf(rvbuf, sizeof(rvbuf), "%s", rv_of(cur) ? rv_of(cur) : "");
			cJSON_Delete(cur);
			hpn_kube_answer_free(&g);
			r = hpn_err_set(&j->err, HPN_E_KUBE, EBUSY,
					"%s: still changed by someone else after %d writes", what,
					CONFLICT_TRIES);
			continue;
		} else {
			r = status_err(kc, j, put ? "PUT" : "POST", path, what, &a);
			hpn_kube_answer_free(&a);
			return r;
		}
		hpn_kube_answer_free(&a);
	}
	return r < 0 ? r : hpn_err_set(&j->err, HPN_E_KUBE, EBUSY, "%s: not written", what);
}

/* The slices of j's pool at generation gen, parsed; NULL with j->err set. */
static cJSON **render_all(struct pub_job *j, long gen, size_t count)
{
	cJSON **v = calloc(count, sizeof(void *)); /* cJSON pointers */

	if (!v) {
		hpn_err_set(&j->err, HPN_E_INTERNAL, ENOMEM, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < count; i++) {
		char *text = hpn_dra_slice_render(j->driver, j->node, j->node, gen, j->nics, j->n,
						  i, count, &j->err);

		v[i] = text ? cJSON_Parse(text) : NULL;
		free(text);
		if (!v[i] || !name_of(v[i])) {
			if (text)
				hpn_err_set(&j->err, HPN_E_INTERNAL, EINVAL,
					    "a ResourceSlice rendered is not JSON");
			for (size_t k = 0; k <= i; k++)
				cJSON_Delete(v[k]);
			free(v);
			return NULL;
		}
	}
	return v;
}

static void free_all(cJSON **v, size_t count)
{
	for (size_t i = 0; v && i < count; i++)
		cJSON_Delete(v[i]);
	free(v);
}

static const cJSON *item_named(const cJSON *items, const char *name)
{
	const cJSON *it;

	cJSON_ArrayForEach (it, items)
		if (name_of(it) && !strcmp(name_of(it), name))
			return it;
	return NULL;
}

/* Our slices as they should be, all there, no others: the pool at generation gen is published. */
static bool up_to_date(const cJSON *items, cJSON *const *v, size_t count)
{
	if ((size_t)cJSON_GetArraySize(items) != count)
		return false;
	for (size_t i = 0; i < count; i++) {
		const cJSON *it = item_named(items, name_of(v[i]));

		if (!it || !cJSON_Compare(cJSON_GetObjectItemCaseSensitive(it, "spec"),
					  cJSON_GetObjectItemCaseSensitive(v[i], "spec"), true))
			return false;
	}
	return true;
}

static int publish(const struct hpn_kubeconfig *kc, struct pub_job *j)
{
	char fs[512], path[1024], what[384];
	struct hpn_kube_answer a = { 0 };
	size_t count = hpn_dra_slice_split(j->n);
	cJSON *list = NULL, **v = NULL;
	const cJSON *items, *it;
	char *esc = NULL;
	long api_gen = 0;
	int r;

	snprintf(fs, sizeof(fs), "spec.nodeName=%s,spec.driver=%s", j->node, j->driver);
	if (hpn_kube_query_escape(fs, &esc) < 0)
		return hpn_err_set(&j->err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=%s",
		 esc);
	free(esc);
	snprintf(what, sizeof(what), "the ResourceSlices of node %s and driver %s", j->node,
		 j->driver);
	r = req(kc, j, "GET", path, NULL, what, "list", true, &a);
	if (r < 0)
		return r;
	if (a.status != 200) {
		r = status_err(kc, j, "GET", path, what, &a);
		goto out;
	}
	list = cJSON_ParseWithLength(a.body, a.len);
	items = cJSON_GetObjectItemCaseSensitive(list, "items");
	if (!cJSON_IsArray(items) || cJSON_GetArraySize(items) > MAX_SLICES_LIST) {
		r = hpn_err_set(&j->err, HPN_E_KUBE, EPROTO, "%s: not a list of at most %d", what,
				MAX_SLICES_LIST);
		goto out;
	}
	cJSON_ArrayForEach (it, items)
		if (gen_of(it) > api_gen)
			api_gen = gen_of(it);
	/* What is there already, at its own generation: nothing to write. */
	if (api_gen > 0 && api_gen >= j->floor) {
		v = render_all(j, api_gen, count);
		if (!v) {
			r = -EINVAL;
			goto out;
		}
		if (up_to_date(items, v, count)) {
			j->gen = api_gen;
			j->slices = count;
			goto out;
		}
		free_all(v, count);
	}
	/* Above every generation there, so the scheduler takes ours as the newest. */
	j->gen = (api_gen > j->floor ? api_gen : j->floor) + 1;
	v = render_all(j, j->gen, count);
	if (!v) {
		r = -EINVAL;
		goto out;
	}
	j->wrote = true;
	for (size_t i = 0; i < count && r >= 0; i++) {
		const cJSON *cur = item_named(items, name_of(v[i]));

		r = write_slice(kc, j, v[i], name_of(v[i]), cur ? rv_of(cur) : NULL);
		j->writes += r >= 0;
	}
	/* Ours no more (a smaller pool, another pool name): removed. */
	cJSON_ArrayForEach (it, items) {
		struct hpn_kube_answer d = { 0 };
		const char *name = name_of(it);
		bool ours = false;

		if (r < 0 || !name)
			break;
		for (size_t i = 0; i < count; i++)
			ours = ours || !strcmp(name, name_of(v[i]));
		if (ours)
			continue;
		snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/resourceslices/%s", name);
		snprintf(what, sizeof(what), "ResourceSlice %s", name);
		r = req(kc, j, "DELETE", path, NULL, what, NULL, true, &d);
		if (r >= 0 && d.status != 404 && (d.status < 200 || d.status > 299))
			r = status_err(kc, j, "DELETE", path, what, &d);
		hpn_kube_answer_free(&d);
	}
	j->slices = count;
out:
	free_all(v, count);
	cJSON_Delete(list);
	hpn_kube_answer_free(&a);
	return r < 0 ? r : 0;
}

static void pub_run(struct loop_job *lj)
{
	struct pub_job *j = (struct pub_job *)lj;
	struct hpn_kubeconfig kc = { 0 };
	struct hpn_kube_warn warn = { 0 };
	double t0 = hpn_mono_s();

	j->r = hpn_kubeconfig_load(j->kubeconfig, &kc, &warn, &j->err);
	if (j->r < 0)
		return;
	j->r = publish(&kc, j);
	hpn_kubeconfig_free(&kc);
	j->took_s = hpn_mono_s() - t0;
}

/* ---- the loop's side --------------------------------------------------------------- */

static void job_free(struct pub_job *j)
{
	if (!j)
		return;
	free(j->kubeconfig);
	free(j->driver);
	free(j->node);
	free(j->key);
	free(j->nics);
	free(j);
}

static void pub_done(struct loop_job *lj)
{
	struct pub_job *j = (struct pub_job *)lj;
	struct draslices *s = j->s;
	int next;

	s->job_out = false;
	if (s->stopping || lj->cancelled) {
		job_free(j);
		return;
	}
	s->st.writes += j->writes;
	if (j->r < 0) {
		s->st.failures++;
		if (!s->down)
			hpn_warn("DRA: cannot publish the ResourceSlices of pool %s: %s%s%s; "
				 "retrying (said once until they are published)",
				 s->o.node_name, j->err.msg[0] ? j->err.msg : strerror(-j->r),
				 j->err.details[0] ? ": " : "", j->err.details);
		else
			hpn_debug("DRA: ResourceSlices still not published: %s", j->err.msg);
		s->down = true;
		next = s->backoff_ms;
		s->due = hpn_mono_ms() + next;
		s->backoff_ms =
			s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
	} else {
		if (j->wrote) {
			s->st.publishes++;
			s->st.write_s += j->took_s;
			hpn_info("DRA: published %zu ResourceSlice(s) of pool %s, generation %ld, "
				 "%zu device(s)",
				 j->slices, s->o.node_name, j->gen, j->n);
		} else {
			s->st.unchanged++;
		}
		if (!j->wrote && s->down) {
			hpn_info(
				"DRA: the ResourceSlices of pool %s are published (generation %ld)",
				s->o.node_name, j->gen);
		}
		s->down = false;
		s->backoff_ms = BACKOFF_MIN_MS;
		s->st.generation = j->gen;
		s->st.slices = j->slices;
		free(s->done_key);
		s->done_key = j->key;
		j->key = NULL;
		/* Rendered anew while the round ran: another one soon. */
		next = strcmp(s->done_key, s->want_key ? s->want_key : "") ? DEBOUNCE_MS
									   : s->resync_ms;
		s->due = hpn_mono_ms() + next;
	}
	/* Scanned while the round ran: rendered (and maybe published) soon. */
	loop_timer_set(&s->timer, s->dirty && next > DEBOUNCE_MS ? DEBOUNCE_MS : next, 0);
	job_free(j);
}

static void round_start(struct draslices *s)
{
	struct pub_job *j;
	int r;

	if (s->stopping || s->job_out || !s->want_key)
		return;
	j = calloc(1, sizeof(*j));
	if (j) {
		j->kubeconfig = strdup(s->o.kubeconfig);
		j->driver = strdup(s->o.driver);
		j->node = strdup(s->o.node_name);
		j->key = strdup(s->want_key);
		j->nics = calloc(s->n_want ? s->n_want : 1, sizeof(*j->nics));
	}
	if (!j || !j->kubeconfig || !j->driver || !j->node || !j->key || !j->nics) {
		job_free(j);
		loop_timer_set(&s->timer, BACKOFF_MIN_MS, 0);
		return;
	}
	memcpy(j->nics, s->want, s->n_want * sizeof(*j->nics));
	j->n = s->n_want;
	j->floor = s->st.generation;
	j->timeout_ms = s->o.api_timeout_ms;
	j->s = s;
	j->job.run = pub_run;
	j->job.done = pub_done;
	/* The API's view: after the kubelet's Prepare, before the node's upkeep. */
	r = loop_work_post(s->loop, &j->job, LOOP_PRIO_API);
	if (r == 0) {
		s->job_out = true;
		return;
	}
	job_free(j);
	/* The worker not running: try again later. */
	loop_timer_set(&s->timer, s->backoff_ms, 0);
}

/* Renders the pool's devices the scheduler may allocate: the healthy ones, and
 * those a pod holds. true when they differ from the last rendering. */
static bool render(struct draslices *s)
{
	const struct agent_devs *devs = &s->node->devs;
	struct hpn_dra_nic *nics;
	struct seen *seen;
	char *key = NULL;
	size_t n = 0, n_seen = 0, count, len = 0;
	struct hpn_err err = { 0 };

	nics = calloc(devs->n ? devs->n : 1, sizeof(*nics));
	seen = calloc(devs->n ? devs->n : 1, sizeof(*seen));
	if (!nics || !seen) {
		free(nics);
		free(seen);
		return false;
	}
	for (size_t i = 0; i < devs->n; i++) {
		const struct agent_dev *ad = &devs->v[i];
		struct hpn_dra_nic *nic = &nics[n];
		const struct seen *was = NULL;

		if (!ad->healthy && !ad->held)
			continue;
		for (size_t k = 0; k < s->n_seen && !was; k++)
			if (!strcmp(s->seen[k].id, ad->id))
				was = &s->seen[k];
		/*
		 * A NIC moved into a pod is not in the host's sysfs: it keeps what it
		 * was read as before (so a pod's start and stop change no slice), or,
		 * never read, is named by its ID alone.
		 */
		if (hpn_dra_nic_read(s->node->conf.sysfs_root, ad->ifname, (unsigned int)i, nic,
				     &err) < 0) {
			memset(nic, 0, sizeof(*nic));
			if (was)
				*nic = was->nic;
			else if (hpn_pci_normalise(ad->id, nic->pci) < 0)
				snprintf(nic->ifname, sizeof(nic->ifname), "%s", ad->ifname);
			nic->rail = (unsigned int)i;
		}
		if (nic->ifname[0] || nic->pci[0]) {
			snprintf(seen[n_seen].id, sizeof(seen[0].id), "%s", ad->id);
			seen[n_seen++].nic = *nic;
		}
		n++;
	}
	free(s->seen);
	s->seen = seen;
	s->n_seen = n_seen;
	/* The slices at generation 0 tell one pool from another. */
	count = hpn_dra_slice_split(n);
	for (size_t i = 0; i < count; i++) {
		char *t = hpn_dra_slice_render(s->o.driver, s->o.node_name, s->o.node_name, 0, nics,
					       n, i, count, &err);
		char *k;

		if (!t && asprintf(&t, "error: %s", err.msg) < 0)
			t = NULL;
		k = t ? realloc(key, len + strlen(t) + 1) : NULL;
		if (!k) {
			free(t);
			free(key);
			free(nics);
			return false;
		}
		key = k;
		memcpy(key + len, t, strlen(t) + 1);
		len += strlen(t);
		free(t);
	}
	if (!key || (s->want_key && !strcmp(s->want_key, key))) {
		free(key);
		free(nics);
		return false;
	}
	free(s->want);
	free(s->want_key);
	s->want = nics;
	s->n_want = n;
	s->want_key = key;
	return true;
}

/*
 * The debounce after a scan, a resync or a backoff: what
 * was scanned is rendered (once for a burst of scans), and a round runs when
 * that changed the slices or the next round is due anyway.
 */
static void on_timer(struct loop_src *src)
{
	struct draslices *s = src->ud;
	long long now = hpn_mono_ms();

	/* A round running: its end arms the timer again. */
	if (s->job_out)
		return;
	if (s->dirty) {
		s->dirty = false;
		if (render(s))
			s->due = now;
	}
	if (now >= s->due)
		round_start(s);
	else
		loop_timer_set(&s->timer, (int)(s->due - now), 0);
}

/*
 * After every scan: rendered once DEBOUNCE_MS pass without one, or
 * DEBOUNCE_MAX_MS after the first, not at every scan (reading each NIC's
 * sysfs is most of what a scan costs, and the lookup socket waits for the
 * loop meanwhile).
 */
void draslices_scanned(struct draslices *s)
{
	long long now = hpn_mono_ms(), left;

	if (!s || s->stopping)
		return;
	if (!s->dirty) {
		s->dirty = true;
		s->dirty_at = now;
	}
	left = s->dirty_at + DEBOUNCE_MAX_MS - now;
	if (!s->job_out)
		loop_timer_set(&s->timer,
			       left < DEBOUNCE_MS ? (left > 0 ? (int)left : 1) : DEBOUNCE_MS, 0);
}

void draslices_metrics(struct sbuf *b, const struct draslices *s)
{
	const struct draslices_stats *sl = &s->st;

	expo_family(b, "hpn_rdma_dra_slice_rounds_total", "counter",
		    "Rounds of the ResourceSlice publisher: written (a new generation), unchanged "
		    "(the API held them already), failed (retried with backoff).");
	expo_by_result(b, "hpn_rdma_dra_slice_rounds_total",
		       (const char *[]){ "written", "unchanged", "failed" },
		       (uint64_t[]){ sl->publishes, sl->unchanged, sl->failures }, 3);
	expo_counter(b, "hpn_rdma_dra_slice_writes_total",
		     "ResourceSlices written to the API (PUT or POST).", sl->writes);
	expo_family(b, "hpn_rdma_dra_slice_write_seconds_total", "counter",
		    "Time the written rounds took, from their list to their last write.");
	expo_sample(b, "hpn_rdma_dra_slice_write_seconds_total", NULL, sl->write_s);
	expo_gauge(b, "hpn_rdma_dra_pool_generation",
		   "The pool generation last published (0: none yet).", (double)sl->generation);
	expo_gauge(b, "hpn_rdma_dra_slices",
		   "The pool's ResourceSlices in the API after the last good round.",
		   (double)sl->slices);
}

int draslices_start(struct loop *l, struct node *node, const struct draslices_opts *o,
		    struct draslices **ret, struct hpn_err *err)
{
	struct draslices *s = calloc(1, sizeof(*s));
	const char *env = getenv("HPN_DRA_RESYNC_MS");
	long ms = env ? strtol(env, NULL, 10) : 0;
	int r;

	if (!s)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	*s = (struct draslices){ .o = *o, .loop = l, .node = node };
	s->timer.fd = -1;
	s->backoff_ms = BACKOFF_MIN_MS;
	/* Tests shorten the resync (test/agent/draslices.sh). */
	s->resync_ms = ms >= 100 && ms <= RESYNC_MS ? (int)ms : RESYNC_MS;
	r = loop_timer(l, &s->timer, LOOP_OFF, 0, on_timer, s);
	if (r < 0) {
		free(s);
		return hpn_err_set(err, HPN_E_INTERNAL, -r, "timer: %s", strerror(-r));
	}
	draslices_scanned(s);
	*ret = s;
	return 0;
}

void draslices_stop(struct draslices *s)
{
	if (!s)
		return;
	s->stopping = true;
	loop_timer_set(&s->timer, LOOP_OFF, 0);
}

void draslices_free(struct draslices *s)
{
	if (!s)
		return;
	loop_close(&s->timer);
	free(s->want);
	free(s->want_key);
	free(s->done_key);
	free(s->seen);
	free(s);
}
