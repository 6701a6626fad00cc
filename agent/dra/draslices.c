// SPDX-License-Identifier: Apache-2.0
/*
 * The DRA driver's ResourceSlices (draslices.h): the pool rendered and
 * published on the loop. A round is a chain of API calls (kubeloop.h), one
 * in flight at a time, each started from the last one's done: the list, each
 * slice's write (a conflict read again in between), the deletes. What the
 * list's answer asks of a round is hpn_dra_slices_plan's (draslice.h).
 */
#include "draslices.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "drashare.h"
#include "draslice.h"
#include "exposition.h"
#include "kubeloop.h"
#include "log.h"
#include "loop.h"
#include "node.h"
#include "rdma.h"
#include "util.h"

#define DEBOUNCE_MS	200   /* a burst of scans is one round... */
#define DEBOUNCE_MAX_MS 1000  /* ...rendered at most this long after its first scan */
#define RESYNC_MS	60000 /* the API checked again this often */
#define BACKOFF_MIN_MS	1000  /* after a failed round, then doubled... */
#define BACKOFF_MAX_MS	30000 /* ...up to this */
#define CONFLICT_TRIES	4     /* PUTs of one slice answered 409, read again in between */

/*
 * One round of requests: what it publishes (copied at its start), where its
 * chain is, and how it went. The publisher owns it while it runs.
 */
struct round {
	struct draslices *s;
	struct kube_op *op; /* the call in flight (NULL between two) */
	char *key;	    /* the pool rendered at generation 0, as the round started */
	struct hpn_dra_nic *nics;
	size_t n;
	size_t tainted; /* NICs of nics with a taint */
	size_t shared;	/* NICs of nics with shares: their shared devices */
	long floor;	/* the generation we last published: a new one goes above */
	double t0;	/* the list's start */
	struct hpn_err err;
	long gen;    /* the generation in the API after the round */
	bool wrote;  /* the round wrote (or deleted) a slice */
	bool bumped; /* at a new generation: every slice written */
	size_t slices;
	unsigned long writes;		 /* slices PUT or POSTed */
	struct hpn_dra_slices_plan plan; /* what the list's answer asks of the round */
	size_t at;			 /* the slice being written */
	int tries;			 /* its PUTs and POSTs so far */
	char rv[64];	    /* its resourceVersion in the API ("": none there, POSTed) */
	size_t del;	    /* the plan's delete made next */
	const char *method; /* the call in flight's, for its errors */
	char path[1024], what[384];
};

/*
 * A NIC as sysfs last showed it: what it keeps in the slices while a pod
 * holds it; and since when it is unhealthy (its taint's timeAdded).
 */
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
	size_t tainted;		 /* its devices with our taint then */
	size_t shared;		 /* its shared devices then */
};

struct draslices {
	struct draslices_opts o;
	struct loop *loop;
	struct node *node;
	struct loop_src timer;
	struct hpn_dra_nic *want; /* the pool's NICs as last scanned */
	size_t n_want;
	char *want_key;	     /* want rendered at generation 0 */
	char *done_key;	     /* what the last good round published */
	struct round *round; /* the round under way, NULL: none */
	bool stopping, down;
	bool dirty;	    /* scanned since the last rendering */
	long long dirty_at; /* CLOCK_MONOTONIC ms: the first scan since */
	long long seen_at;  /* its wall clock, s: when a NIC found unhealthy then became so */
	/*
	 * Features the API drops (HPN_DRA_DROP_*: taints with its
	 * DRADeviceTaints gate off, shares with DRAConsumableCapacity or
	 * DRAPartitionableDevices off): the rounds publish the pool without
	 * them until the pool changes (then they are tried again); each said
	 * once.
	 */
	unsigned int dropped, said_dropped;
	bool said_exclusive; /* --dra-shares on a node whose RDMA netns mode is exclusive */
	long long due;	     /* CLOCK_MONOTONIC ms: the next round, change or not */
	struct seen *seen;   /* the pool's NICs as last read from sysfs, by ID */
	size_t n_seen;
	int backoff_ms, resync_ms;
	struct draslices_stats st;
};

/* ---- the slices as JSON --------------------------------------------------------- */

static const char *rv_of(const cJSON *obj)
{
	return hpn_dra_slice_meta(obj, "resourceVersion");
}

static const char *name_of(const cJSON *obj)
{
	return hpn_dra_slice_meta(obj, "name");
}

/* ---- a round: its requests, one after another ------------------------------------ */

static void round_free(struct round *rd)
{
	if (!rd)
		return;
	kube_cancel(rd->op);
	hpn_dra_slices_plan_free(&rd->plan);
	free(rd->key);
	free(rd->nics);
	free(rd);
}

/*
 * The round over (r < 0: failed, rd->err says why): counted, said, the next
 * one timed, rd freed.
 */
static void round_end(struct round *rd, int r)
{
	struct draslices *s = rd->s;
	double took_s = hpn_mono_s() - rd->t0;
	int next;

	s->round = NULL;
	s->st.writes += rd->writes;
	if (r < 0) {
		s->st.failures++;
		if (!s->down)
			hpn_warn("DRA: cannot publish the ResourceSlices of pool %s: %s%s%s; "
				 "retrying (said once until they are published)",
				 s->o.node_name, rd->err.msg[0] ? rd->err.msg : strerror(-r),
				 rd->err.details[0] ? ": " : "", rd->err.details);
		else
			hpn_debug("DRA: ResourceSlices still not published: %s", rd->err.msg);
		s->down = true;
		next = s->backoff_ms;
		s->due = hpn_mono_ms() + next;
		s->backoff_ms =
			s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
	} else {
		if (rd->wrote && rd->bumped) {
			s->st.publishes++;
			s->st.write_s += took_s;
			hpn_info("DRA: published %zu ResourceSlice(s) of pool %s, generation %ld, "
				 "%zu device(s), %zu tainted, %zu shared",
				 rd->slices, s->o.node_name, rd->gen, rd->n, rd->tainted,
				 rd->shared);
		} else if (rd->wrote) {
			s->st.publishes++;
			s->st.write_s += took_s;
			hpn_info(
				"DRA: wrote %lu of the %zu ResourceSlice(s) of pool %s over, "
				"generation %ld kept (no device moved), %zu device(s), %zu tainted",
				rd->writes, rd->slices, s->o.node_name, rd->gen, rd->n,
				rd->tainted);
		} else {
			s->st.unchanged++;
		}
		if (!rd->wrote && s->down) {
			hpn_info(
				"DRA: the ResourceSlices of pool %s are published (generation %ld)",
				s->o.node_name, rd->gen);
		}
		s->down = false;
		s->backoff_ms = BACKOFF_MIN_MS;
		s->st.generation = rd->gen;
		s->st.slices = rd->slices;
		s->st.tainted = rd->tainted;
		s->st.shared = rd->shared;
		free(s->done_key);
		s->done_key = TAKE_PTR(rd->key);
		/* Rendered anew while the round ran: another one soon. */
		next = strcmp(s->done_key, s->want_key ? s->want_key : "") ? DEBOUNCE_MS
									   : s->resync_ms;
		s->due = hpn_mono_ms() + next;
	}
	/* Scanned while the round ran: rendered (and maybe published) soon. */
	loop_timer_set(&s->timer, s->dirty && next > DEBOUNCE_MS ? DEBOUNCE_MS : next, 0);
	round_free(rd);
}

/*
 * The request rd->method rd->path (about rd->what) sent, done called with
 * its end. < 0 (rd->err set) when it could not be: the caller ends the round.
 */
static int call_api(struct round *rd, const char *method, const char *body, const char *verb,
		    bool retry, kube_done_fn *done)
{
	struct hpn_kube_call call = {
		.method = method,
		.path = rd->path,
		.body = body,
		.body_len = body ? strlen(body) : 0,
		.what = rd->what,
		.resource = "resourceslices",
		.verb = verb,
		.timeout_ms = (unsigned)rd->s->o.api_timeout_ms,
		.retry = retry,
	};
	int r;

	rd->method = method;
	r = kube_call(rd->s->o.kube, rd->s->o.kubeconfig, &call, done, rd, &rd->op);
	return r < 0 ? hpn_err_set(&rd->err, HPN_E_INTERNAL, -r, "out of memory") : 0;
}

/* A call's end taken: < 0 when it failed (rd->err says why). */
static int ended(struct round *rd, const struct kube_result *res)
{
	rd->op = NULL;
	if (res->r < 0)
		rd->err = res->err;
	return res->r;
}

/* The error of an answer that is not a 2xx, into rd->err. */
static int status_err(struct round *rd, struct kube_result *res)
{
	struct hpn_kube_call call = { .method = rd->method,
				      .path = rd->path,
				      .what = rd->what,
				      .resource = "resourceslices" };

	kube_result_status_err(res, &call);
	rd->err = res->err;
	return res->r;
}

static void write_next(struct round *rd);
static void write_send(struct round *rd);
static void delete_next(struct round *rd);

/* A slice's DELETE ended: a 404 (gone already) is as good as a 2xx. */
static void delete_done(void *ud, struct kube_result *res)
{
	struct round *rd = ud;

	if (ended(rd, res) < 0) {
		round_end(rd, res->r);
		return;
	}
	if (res->a.status != 404 && (res->a.status < 200 || res->a.status > 299)) {
		round_end(rd, status_err(rd, res));
		return;
	}
	rd->del++;
	delete_next(rd);
}

/*
 * Ours no more (a smaller pool, another pool name): each listed slice that is
 * not one of ours deleted, in the list's order; then the round is over.
 */
static void delete_next(struct round *rd)
{
	const char *name;
	int r;

	if (rd->del == rd->plan.n_del) {
		rd->slices = rd->plan.count;
		round_end(rd, 0);
		return;
	}
	name = rd->plan.del[rd->del];
	snprintf(rd->path, sizeof(rd->path), "/apis/resource.k8s.io/v1/resourceslices/%s", name);
	snprintf(rd->what, sizeof(rd->what), "ResourceSlice %s", name);
	r = call_api(rd, "DELETE", NULL, NULL, true, delete_done);
	if (r < 0)
		round_end(rd, r);
}

/* The slice's next PUT or POST, CONFLICT_TRIES in all; r: how the last one ended. */
static void write_again(struct round *rd, int r)
{
	if (++rd->tries < CONFLICT_TRIES) {
		write_send(rd);
		return;
	}
	round_end(rd,
		  r < 0 ? r
			: hpn_err_set(&rd->err, HPN_E_KUBE, EBUSY, "%s: not written", rd->what));
}

/* The slice read again after a 409: its resourceVersion now ("" when it is not there). */
static void reread_done(void *ud, struct kube_result *res)
{
	struct round *rd = ud;
	cJSON *cur;

	if (ended(rd, res) < 0) {
		round_end(rd, res->r);
		return;
	}
	cur = res->a.status == 200 ? cJSON_ParseWithLength(res->a.body, res->a.len) : NULL;
	snprintf(rd->rv, sizeof(rd->rv), "%s", rv_of(cur) ? rv_of(cur) : "");
	cJSON_Delete(cur);
	write_again(rd, hpn_err_set(&rd->err, HPN_E_KUBE, EBUSY,
				    "%s: still changed by someone else after %d writes", rd->what,
				    CONFLICT_TRIES));
}

/*
 * A slice written: when the API's answer lost the taints or the shares it
 * carried (a feature gate of the API server off), the pool is published
 * without them until it changes: else every round would write them again
 * (each said once, and in the metrics while it lasts).
 */
static void features_kept(struct round *rd, const struct kube_result *res)
{
	struct draslices *s = rd->s;
	unsigned int dropped = hpn_dra_slice_dropped(rd->plan.v[rd->at], res->a.body, res->a.len);
	unsigned int news = dropped & ~s->said_dropped;

	s->dropped |= dropped;
	s->said_dropped |= dropped;
	if (news & HPN_DRA_DROP_TAINTS)
		hpn_warn("DRA: the API server dropped the device taints of %s (its feature gate "
			 "DRADeviceTaints is off: Kubernetes before 1.36?); the pool's unhealthy "
			 "NICs are published without them, and allocated (said once)",
			 rd->what);
	if (news & HPN_DRA_DROP_SHARES)
		hpn_warn(
			"DRA: the API server dropped the shared devices' allowMultipleAllocations, "
			"capacity policy or counters of %s (its feature gate DRAConsumableCapacity "
			"or DRAPartitionableDevices is off: Kubernetes before 1.36?); the pool is "
			"published without shared devices (said once)",
			rd->what);
}

/*
 * A slice's PUT or POST ended. A 409 reads the slice again for its
 * resourceVersion (changed, or made, by someone else since the list); a PUT
 * answered 404 (deleted meanwhile) POSTs; a POST answered 409 (made
 * meanwhile) PUTs once read.
 */
static void write_done(void *ud, struct kube_result *res)
{
	struct round *rd = ud;
	long st;
	int r;

	if (ended(rd, res) < 0) {
		round_end(rd, res->r);
		return;
	}
	st = res->a.status;
	if (st >= 200 && st <= 299) {
		features_kept(rd, res);
		rd->writes++;
		rd->at++;
		write_next(rd);
	} else if (st == 404 && rd->rv[0]) {
		rd->rv[0] = '\0';
		write_again(rd, 0);
	} else if (st == 409) {
		snprintf(rd->path, sizeof(rd->path), "/apis/resource.k8s.io/v1/resourceslices/%s",
			 name_of(rd->plan.v[rd->at]));
		r = call_api(rd, "GET", NULL, NULL, true, reread_done);
		if (r < 0)
			round_end(rd, r);
	} else {
		round_end(rd, status_err(rd, res));
	}
}

/* Slice rd->at written over the one in the API with resourceVersion rd->rv ("": POSTed). */
static void write_send(struct round *rd)
{
	cJSON *obj = rd->plan.v[rd->at];
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const char *name = name_of(obj);
	bool put = rd->rv[0] != '\0';
	char *body;
	int r;

	snprintf(rd->what, sizeof(rd->what), "ResourceSlice %s", name);
	cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
	if (put && !cJSON_AddStringToObject(meta, "resourceVersion", rd->rv)) {
		round_end(rd, hpn_err_set(&rd->err, HPN_E_INTERNAL, ENOMEM, "out of memory"));
		return;
	}
	body = cJSON_PrintUnformatted(obj);
	if (!body) {
		round_end(rd, hpn_err_set(&rd->err, HPN_E_INTERNAL, ENOMEM, "out of memory"));
		return;
	}
	if (put)
		snprintf(rd->path, sizeof(rd->path), "/apis/resource.k8s.io/v1/resourceslices/%s",
			 name);
	else
		snprintf(rd->path, sizeof(rd->path), "/apis/resource.k8s.io/v1/resourceslices");
	r = call_api(rd, put ? "PUT" : "POST", body, NULL, put, write_done);
	free(body);
	if (r < 0)
		round_end(rd, r);
}

/*
 * Our slices written in order, each with the resourceVersion listed (those
 * the API holds as they are left alone); then the deletes.
 */
static void write_next(struct round *rd)
{
	while (rd->at < rd->plan.count && !rd->plan.put[rd->at])
		rd->at++;
	if (rd->at == rd->plan.count) {
		rd->del = 0;
		delete_next(rd);
		return;
	}
	snprintf(rd->rv, sizeof(rd->rv), "%s", rd->plan.rv[rd->at]);
	rd->tries = 0;
	write_send(rd);
}

/*
 * The list ended: nothing to write when the API holds our slices at its own
 * generation; else the pool at a generation above every one there and ours
 * (hpn_dra_slices_plan).
 */
static void list_done(void *ud, struct kube_result *res)
{
	struct round *rd = ud;
	const struct draslices_opts *o = &rd->s->o;
	int r;

	if (ended(rd, res) < 0) {
		round_end(rd, res->r);
		return;
	}
	if (res->a.status != 200) {
		round_end(rd, status_err(rd, res));
		return;
	}
	r = hpn_dra_slices_plan(res->a.body, res->a.len, rd->what, o->driver, o->node_name,
				rd->nics, rd->n, rd->floor, &rd->plan, &rd->err);
	if (r < 0) {
		round_end(rd, r);
		return;
	}
	rd->gen = rd->plan.gen;
	if (!rd->plan.write) {
		rd->slices = rd->plan.count;
		round_end(rd, 0);
		return;
	}
	rd->wrote = true;
	rd->bumped = rd->plan.bumped;
	rd->at = 0;
	write_next(rd);
}

/* The slices of our node and driver listed: the round's first request. */
static void list_start(struct round *rd)
{
	const struct draslices_opts *o = &rd->s->o;
	char fs[512];
	char *esc = NULL;
	int r;

	rd->t0 = hpn_mono_s();
	snprintf(fs, sizeof(fs), "spec.nodeName=%s,spec.driver=%s", o->node_name, o->driver);
	if (hpn_kube_query_escape(fs, &esc) < 0) {
		round_end(rd, hpn_err_set(&rd->err, HPN_E_INTERNAL, ENOMEM, "out of memory"));
		return;
	}
	snprintf(rd->path, sizeof(rd->path),
		 "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=%s", esc);
	free(esc);
	snprintf(rd->what, sizeof(rd->what), "the ResourceSlices of node %s and driver %s",
		 o->node_name, o->driver);
	r = call_api(rd, "GET", NULL, "list", true, list_done);
	if (r < 0)
		round_end(rd, r);
}

/* ---- the publisher: what to publish, when ------------------------------------------ */

static void round_start(struct draslices *s)
{
	struct round *rd;

	if (s->stopping || s->round || !s->want_key)
		return;
	rd = calloc(1, sizeof(*rd));
	if (rd) {
		rd->key = strdup(s->want_key);
		rd->nics = calloc(s->n_want ? s->n_want : 1, sizeof(*rd->nics));
	}
	if (!rd || !rd->key || !rd->nics) {
		round_free(rd);
		loop_timer_set(&s->timer, BACKOFF_MIN_MS, 0);
		return;
	}
	memcpy(rd->nics, s->want, s->n_want * sizeof(*rd->nics));
	rd->n = s->n_want;
	for (size_t i = 0; i < rd->n; i++) {
		if (s->dropped & HPN_DRA_DROP_TAINTS)
			rd->nics[i].taint = (struct hpn_dra_taint){ 0 };
		if (s->dropped & HPN_DRA_DROP_SHARES)
			rd->nics[i].shares = 0;
		rd->tainted += rd->nics[i].taint.effect[0] != '\0';
		rd->shared += rd->nics[i].shares != 0;
	}
	rd->floor = s->st.generation;
	rd->s = s;
	s->round = rd;
	list_start(rd);
}

/*
 * An unhealthy NIC's taint: the flag's effect, why in a word, since when
 * (what was seen before, else the scan that found it).
 */
static void taint(const struct draslices *s, const struct agent_dev *ad, const struct seen *was,
		  struct hpn_dra_nic *nic)
{
	const char *why = agent_dev_fault(ad);

	nic->taint = (struct hpn_dra_taint){ 0 };
	if (!why)
		return;
	snprintf(nic->taint.effect, sizeof(nic->taint.effect), "%s", s->o.taint_effect);
	snprintf(nic->taint.value, sizeof(nic->taint.value), "%s", why);
	nic->taint.since = was && was->nic.taint.since ? was->nic.taint.since : s->seen_at;
}

/*
 * Whether the pool's NICs may be shared: --dra-shares, on a node whose RDMA
 * netns mode is shared (in exclusive mode a pod's netns sees no RDMA device
 * it was not given, and a share is given none); said once when it is not.
 */
static bool shares_on(struct draslices *s)
{
	enum hpn_rdma_netns mode = HPN_RDMA_NETNS_EXCLUSIVE;
	struct hpn_err err = { 0 };
	int r;

	if (!s->o.shares)
		return false;
	r = hpn_rdma_node_netns_mode(s->node->conf.sysfs_root, &mode, &err);
	if (r == 0 && mode == HPN_RDMA_NETNS_SHARED)
		return true;
	if (!s->said_exclusive)
		hpn_warn("DRA: --dra-shares: the node's RDMA netns mode is %s; no NIC is published "
			 "shared (said once)",
			 r < 0 ? (err.msg[0] ? err.msg : strerror(-r)) : hpn_rdma_netns_name(mode));
	s->said_exclusive = true;
	return false;
}

/*
 * Renders the pool's devices the scheduler may see: every NIC that is there,
 * an unhealthy one with the driver's taint, and those a pod holds, but never
 * one that vanished, nor one ADD took from the pool for a pod that no claim
 * gave it (taken). true when they differ from the last rendering.
 */
static bool render(struct draslices *s)
{
	const struct agent_devs *devs = &s->node->devs;
	struct hpn_dra_nic *nics;
	struct seen *seen;
	char *key = NULL;
	size_t n = 0, n_seen = 0, count, len = 0;
	struct hpn_err err = { 0 };
	bool shares = shares_on(s);

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

		if ((ad->fault == AGENT_FAULT_VANISHED && !ad->held) || ad->taken)
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
		} else {
			/* Read again at each scan: the GID table's size, less its own addresses. */
			nic->shares =
				shares ? hpn_dra_nic_shares(s->node->conf.sysfs_root, nic) : 0;
		}
		taint(s, ad, was, nic);
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
	count = hpn_dra_slice_split(nics, n);
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
	/* The pool changed: what the API dropped tried again (one upgraded meanwhile keeps it). */
	s->dropped = 0;
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
	if (s->round)
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
		s->seen_at = (long long)time(NULL);
	}
	left = s->dirty_at + DEBOUNCE_MAX_MS - now;
	if (!s->round)
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
	expo_gauge(b, "hpn_rdma_dra_tainted_devices",
		   "The pool's devices published with the driver's unhealthy taint after the last "
		   "good round (0 while the API server drops taints).",
		   (double)sl->tainted);
	expo_gauge(b, "hpn_rdma_dra_taints_dropped",
		   "1: the API server dropped the device taints of a slice written (its "
		   "DRADeviceTaints feature gate is off); the pool is published without them.",
		   (s->dropped & HPN_DRA_DROP_TAINTS) ? 1 : 0);
	expo_gauge(b, "hpn_rdma_dra_shared_devices",
		   "The pool's shared devices (NICs many pods may share, --dra-shares) "
		   "published after the last good round (0 while the API server drops them).",
		   (double)sl->shared);
	expo_gauge(b, "hpn_rdma_dra_shares_dropped",
		   "1: the API server dropped the shared devices' fields of a slice written (its "
		   "DRAConsumableCapacity or DRAPartitionableDevices feature gate is off); the "
		   "pool is published without shared devices.",
		   (s->dropped & HPN_DRA_DROP_SHARES) ? 1 : 0);
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
	if (!o->kube) {
		free(s);
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
				   "DRA: the ResourceSlices need the Kubernetes API's loop");
	}
	*s = (struct draslices){ .o = *o, .loop = l, .node = node };
	if (!s->o.taint_effect)
		s->o.taint_effect = "NoSchedule";
	if (!hpn_dra_taint_effect_valid(s->o.taint_effect)) {
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				"DRA: taint effect \"%s\" is none of NoSchedule, NoExecute, None",
				s->o.taint_effect);
		free(s);
		return r;
	}
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
	round_free(s->round);
	s->round = NULL;
}

void draslices_free(struct draslices *s)
{
	if (!s)
		return;
	round_free(s->round);
	loop_close(&s->timer);
	free(s->want);
	free(s->want_key);
	free(s->done_key);
	free(s->seen);
	free(s);
}
