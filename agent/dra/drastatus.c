// SPDX-License-Identifier: Apache-2.0
/*
 * The DRA claims' status.devices[] (networkData, Ready) written back by
 * server-side apply (drastatus.h): a pass reads the journals and renders each
 * claim's body on the worker, then its applies go out from the loop
 * (kubeloop.h), one claim after another, and the pass is accounted when the
 * last one ended.
 */
#include "drastatus.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "draclaims.h"
#include "exposition.h"
#include "kubeloop.h"
#include "log.h"
#include "loop.h"
#include "result.h"
#include "store.h"
#include "util.h"

#define DEBOUNCE_MS    300   /* an ADD writes its journal several times */
#define FIRST_MS       500   /* the first pass after start: every claim applied once */
#define BACKOFF_MIN_MS 1000  /* a failed write: again after 1 s, doubling... */
#define BACKOFF_MAX_MS 60000 /* ...up to 60 s */

/* What was last applied to one claim, in memory only (a restart applies once more). */
struct applied {
	char uid[DRA_CLAIM_UID_MAX + 1];
	char ns[64], name[254];
	char *sig; /* the body without its times (NULL: nothing applied yet) */
	bool gone; /* the API said 404: said once, not written again */
	bool seen;
	struct applied *next;
};

/* For metrics: claims' status writes by outcome. */
struct drastatus_stats {
	unsigned long applied; /* written (an unchanged state is not sent) */
	unsigned long gone;    /* the claim was not in the API (404, 409) */
	unsigned long failed;  /* to be retried */
};

struct drastatus {
	struct loop *loop;
	struct kubeloop *kube;
	const struct dra_claims *cl;
	char *state_dir, *network, *kubeconfig, *driver;
	int api_timeout_ms;
	struct loop_src inotify, timer;
	struct applied *mem;
	bool job_out; /* a pass is on the worker or sending its applies */
	bool again;
	struct job *sending; /* the pass sending its applies, NULL: none... */
	struct kube_op *op;  /* ...and its apply in flight */
	int backoff_ms;
	struct drastatus_stats st;
};

/* One claim in a pass: a copy of its record, what was applied, and the outcome. */
struct item {
	struct dra_rec rec;
	char *last; /* in: the applied sig */
	char *sig;  /* out: this pass's sig */
	bool due;   /* the worker's: sig is not last, an apply is due... */
	char *body; /* ...with this body (NULL: no memory) */
	int r;	    /* out: 0 written or unchanged, -ENOENT a 404, else failed */
	bool sent;
	char msg[512];
};

/* A pass: its job on the worker, then its applies on the loop, item at after item. */
struct job {
	struct loop_job job;
	struct drastatus *s;
	char *state_dir, *network, *driver; /* the worker's copies */
	struct item *v;
	size_t n;
	/* Every prepared claim, for the place of a share among a pod's children of its NIC. */
	struct dra_rec *recs;
	const struct dra_rec **recp;
	size_t n_recs;
	size_t at;		   /* the item being applied */
	bool down;		   /* an apply failed: the rest wait for the next pass */
	char path[768], what[384]; /* the apply in flight's */
};

/* ---- the worker: journals read, bodies rendered --------------------------------- */

/* A journal of an attachment ADD completed and no DEL is undoing, with its result. */
struct att {
	struct hpn_journal j;
	struct hpn_result *res;
};

static void atts_free(struct att *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		hpn_journal_free(&v[i].j);
		hpn_result_free(v[i].res);
	}
	free(v);
}

/*
 * NULL when the journals cannot be listed (msg says why): then nothing is
 * known, and no status may be cleared for it.
 */
static struct att *atts_read(const char *state_dir, const char *network, size_t *ret_n, char *msg,
			     size_t len)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	char **keys = NULL;
	struct att *v = NULL;
	size_t n = 0, k = 0;

	*ret_n = 0;
	if (hpn_store_open_here(state_dir, network, &st, &err) < 0 ||
	    hpn_store_keys(&st, &keys, &err) < 0) {
		hpn_msgf(msg, len, "list the journals: %s", err.msg);
		hpn_store_close(&st);
		return NULL;
	}
	while (keys[k])
		k++;
	v = calloc(k ? k : 1, sizeof(*v));
	if (!v)
		hpn_msgf(msg, len, "out of memory");
	for (size_t i = 0; v && i < k; i++) {
		struct att *a = &v[n];
		struct hpn_err jerr = { 0 };

		if (hpn_journal_read(&st, keys[i], &a->j, &jerr) < 0)
			continue;
		if (a->j.phase != HPN_PHASE_ATTACHED || a->j.releasing || a->j.stale ||
		    !a->j.result || !a->j.pod.uid[0] ||
		    hpn_result_parse(a->j.result, strlen(a->j.result), &a->res, &jerr) < 0) {
			hpn_journal_free(&a->j);
			continue;
		}
		n++;
	}
	hpn_strv_free(keys);
	hpn_store_close(&st);
	*ret_n = n;
	return v;
}

static bool add_str(cJSON *o, const char *k, const char *v)
{
	return cJSON_AddStringToObject(o, k, v) != NULL;
}

/* The networkData and Ready condition of NIC i of attachment a, into dev; false: no memory. */
static bool render_nic(cJSON *dev, const struct att *a, size_t i, const char *when)
{
	const struct hpn_journal_nic *jn = &a->j.nics[i];
	const struct hpn_result *res = a->res;
	cJSON *net = cJSON_AddObjectToObject(dev, "networkData");
	cJSON *ips = net ? cJSON_AddArrayToObject(net, "ips") : NULL;
	cJSON *conds = cJSON_AddArrayToObject(dev, "conditions");
	cJSON *c = cJSON_CreateObject();
	char mac[64] = "", msg[512];
	const struct hpn_rdma_info *rd = NULL;
	int ifc = -1;

	if (!net || !ips || !conds || !c || !cJSON_AddItemToArray(conds, c)) {
		cJSON_Delete(c);
		return false;
	}
	for (size_t k = 0; k < res->n_ifaces && ifc < 0; k++)
		if (res->ifaces[k].sandbox && res->ifaces[k].sandbox[0] && res->ifaces[k].name &&
		    !strcmp(res->ifaces[k].name, jn->pod_ifname))
			ifc = (int)k;
	if (ifc >= 0 && res->ifaces[ifc].mac)
		for (size_t k = 0; k + 1 < sizeof(mac) && res->ifaces[ifc].mac[k]; k++)
			mac[k] = (char)tolower((unsigned char)res->ifaces[ifc].mac[k]);
	for (size_t k = 0; ifc >= 0 && k < res->n_ips; k++)
		if (res->ips[k].interface == ifc && res->ips[k].address &&
		    !cJSON_AddItemToArray(ips, cJSON_CreateString(res->ips[k].address)))
			return false;
	for (size_t k = 0; ifc >= 0 && k < res->n_rdma && !rd; k++)
		if (res->rdma[k].interface == ifc && res->rdma[k].bound && res->rdma[k].device[0])
			rd = &res->rdma[k];
	if (rd && rd->gid[0])
		hpn_msgf(msg, sizeof(msg),
			 "RDMA device %s port %d proven at ADD, GID %s (index %d)", rd->device,
			 rd->port > 0 ? rd->port : 1, rd->gid, rd->gid_index);
	else if (rd)
		hpn_msgf(msg, sizeof(msg), "RDMA device %s port %d proven at ADD", rd->device,
			 rd->port > 0 ? rd->port : 1);
	else
		hpn_msgf(msg, sizeof(msg), "%s attached; no RDMA device bound", jn->pod_ifname);
	if (!add_str(net, "interfaceName", jn->pod_ifname) ||
	    (mac[0] && !add_str(net, "hardwareAddress", mac)) || !add_str(c, "type", "Ready") ||
	    !add_str(c, "status", "True") ||
	    !add_str(c, "reason", rd ? "RDMAProven" : "NetdevAttached") ||
	    !add_str(c, "message", msg) || !add_str(c, "lastTransitionTime", when))
		return false;
	return true;
}

/* The networkData of NIC i of attachment a (the device metadata's, drameta.h). */
static void nic_net(const struct att *a, size_t i, struct hpn_drameta_net *out)
{
	const struct hpn_result *res = a->res;
	int ifc = -1;

	memset(out, 0, sizeof(*out));
	snprintf(out->ifname, sizeof(out->ifname), "%s", a->j.nics[i].pod_ifname);
	for (size_t k = 0; k < res->n_ifaces && ifc < 0; k++)
		if (res->ifaces[k].sandbox && res->ifaces[k].sandbox[0] && res->ifaces[k].name &&
		    !strcmp(res->ifaces[k].name, out->ifname))
			ifc = (int)k;
	if (ifc < 0)
		return;
	for (size_t k = 0; res->ifaces[ifc].mac && res->ifaces[ifc].mac[k] && k + 1 < 64; k++)
		out->mac[k] = (char)tolower((unsigned char)res->ifaces[ifc].mac[k]);
	for (size_t k = 0; k < res->n_ips && out->n_ips < HPN_DRAMETA_MAX_IPS; k++)
		if (res->ips[k].interface == ifc && res->ips[k].address)
			snprintf(out->ips[out->n_ips++], sizeof(out->ips[0]), "%s",
				 res->ips[k].address);
}

/*
 * The attachment that holds device d of claim r, and its NIC there, in
 * *ra and *rnic: of pod (NULL: of the pods r is reserved for, the first that
 * holds it). A NIC's own device is the first NIC of the pod with its ID; a
 * share is a child of its NIC in the pod (kind child, the NIC its parent):
 * the pod's children of that NIC are its shares in the lookup's order, as
 * ADD attached them, so the share of rank k (draclaims_share_rank) is the
 * k-th of them, the pod's journals in their order.
 */
static bool holding(const struct att *atts, size_t n_atts, const struct dra_rec *const *recs,
		    size_t n_recs, const struct dra_rec *r, size_t d, const char *pod,
		    const struct att **ra, size_t *rnic)
{
	const struct dra_rec_dev *v = &r->devs[d];
	bool share = v->share_id[0] != '\0';

	for (size_t p = 0; p < r->n_pods; p++) {
		size_t want, seen = 0;

		if (pod && strcmp(pod, r->pods[p]))
			continue;
		want = share ? draclaims_share_rank(recs, n_recs, r, d, r->pods[p]) : 0;
		for (size_t k = 0; k < n_atts; k++) {
			if (strcmp(atts[k].j.pod.uid, r->pods[p]))
				continue;
			for (size_t i = 0; i < atts[k].j.n_nics; i++) {
				char id[HPN_ALLOC_ID_MAX];

				hpn_alloc_journal_id(&atts[k].j.nics[i], id);
				if (strcmp(id, v->nic) ||
				    (share && atts[k].j.nics[i].kind != HPN_NIC_CHILD) ||
				    seen++ != want)
					continue;
				*ra = &atts[k];
				*rnic = i;
				return true;
			}
		}
	}
	return false;
}

int drastatus_pod_nets(const char *state_dir, const char *network,
		       const struct dra_rec *const *recs, size_t n_recs, const struct dra_rec *r,
		       const char *pod, struct hpn_drameta_net *nets, bool *have, char *msg,
		       size_t len)
{
	size_t n_atts = 0;
	struct att *atts = atts_read(state_dir, network, &n_atts, msg, len);

	if (!atts)
		return -EIO;
	for (size_t d = 0; d < r->n; d++) {
		const struct att *a;
		size_t i;

		have[d] = holding(atts, n_atts, recs, n_recs, r, d, pod, &a, &i);
		if (have[d])
			nic_net(a, i, &nets[d]);
	}
	atts_free(atts, n_atts);
	return 0;
}

/*
 * The apply body of claim r: its devices that an attachment of a pod it is
 * reserved for holds, in result order, a share's entry with its shareID
 * (the list's key is driver, pool, device and shareID). recs[0..n_recs):
 * every prepared claim (holding). when: the conditions' time ("" for the
 * sig that tells a change). malloc'd, NULL: no memory.
 */
static char *render(const char *driver, const struct dra_rec *const *recs, size_t n_recs,
		    const struct dra_rec *r, const struct att *atts, size_t n_atts,
		    const char *when)
{
	cJSON *o = cJSON_CreateObject(), *meta = NULL, *status = NULL, *devs = NULL;

	if (o && add_str(o, "apiVersion", "resource.k8s.io/v1") &&
	    add_str(o, "kind", "ResourceClaim"))
		meta = cJSON_AddObjectToObject(o, "metadata");
	/* The UID too: a claim recreated under the name is not written (a conflict). */
	if (meta && add_str(meta, "name", r->name) && add_str(meta, "namespace", r->ns) &&
	    add_str(meta, "uid", r->uid))
		status = cJSON_AddObjectToObject(o, "status");
	devs = status ? cJSON_AddArrayToObject(status, "devices") : NULL;
	if (!devs)
		goto fail;
	for (size_t d = 0; d < r->n; d++) {
		const struct att *a = NULL;
		size_t nic = 0;
		cJSON *dev;

		if (!holding(atts, n_atts, recs, n_recs, r, d, NULL, &a, &nic))
			continue;
		dev = cJSON_CreateObject();
		if (!dev || !cJSON_AddItemToArray(devs, dev)) {
			cJSON_Delete(dev);
			goto fail;
		}
		if (!add_str(dev, "driver", driver) || !add_str(dev, "pool", r->devs[d].pool) ||
		    !add_str(dev, "device", r->devs[d].device) ||
		    (r->devs[d].share_id[0] && !add_str(dev, "shareID", r->devs[d].share_id)) ||
		    !render_nic(dev, a, nic, when))
			goto fail;
	}
	return hpn_json_print(o);
fail:
	cJSON_Delete(o);
	return NULL;
}

char *drastatus_render(const char *state_dir, const char *network, const char *driver,
		       const struct dra_rec *const *recs, size_t n_recs, const struct dra_rec *r,
		       const char *when, char *msg, size_t len)
{
	size_t n_atts = 0;
	struct att *atts = atts_read(state_dir, network, &n_atts, msg, len);
	char *body;

	if (!atts)
		return NULL;
	body = render(driver, recs, n_recs, r, atts, n_atts, when);
	if (!body)
		hpn_msgf(msg, len, "out of memory");
	atts_free(atts, n_atts);
	return body;
}

static void now_rfc3339(char out[32])
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void job_run(struct loop_job *lj)
{
	struct job *jb = (struct job *)lj;
	size_t n_atts = 0;
	char when[32], why[256] = "";
	struct att *atts = atts_read(jb->state_dir, jb->network, &n_atts, why, sizeof(why));

	now_rfc3339(when);
	for (size_t i = 0; !atts && i < jb->n; i++) {
		jb->v[i].r = -EIO;
		snprintf(jb->v[i].msg, sizeof(jb->v[i].msg), "%s", why);
	}
	for (size_t i = 0; atts && i < jb->n; i++) {
		struct item *it = &jb->v[i];

		it->sig = render(jb->driver, jb->recp, jb->n_recs, &it->rec, atts, n_atts, "");
		if (!it->sig) {
			it->r = -ENOMEM;
			snprintf(it->msg, sizeof(it->msg), "out of memory");
			continue;
		}
		if (it->last && !strcmp(it->last, it->sig))
			continue; /* applied already */
		it->due = true;
		it->body = render(jb->driver, jb->recp, jb->n_recs, &it->rec, atts, n_atts, when);
	}
	atts_free(atts, n_atts);
}

/* ---- the loop: what to write, when ------------------------------------------- */

static struct applied *remembered(struct drastatus *s, const char *uid, bool add)
{
	struct applied *m;

	for (m = s->mem; m; m = m->next)
		if (!strcmp(m->uid, uid))
			return m;
	if (!add || !(m = calloc(1, sizeof(*m))))
		return NULL;
	snprintf(m->uid, sizeof(m->uid), "%s", uid);
	m->next = s->mem;
	s->mem = m;
	return m;
}

/* Devices of ours are in the claim's status, as last applied. */
static bool shown(const struct applied *m)
{
	return m->sig && !m->gone && !strstr(m->sig, "\"devices\":[]");
}

/*
 * Marks the claims still prepared; a claim unprepared (its record gone, the
 * kubelet's Unprepare may come before the write that follows DEL) stays
 * remembered until its devices are cleared, then is forgotten.
 */
static void forget_gone(struct drastatus *s)
{
	struct applied **p = &s->mem;

	for (struct applied *m = s->mem; m; m = m->next)
		m->seen = false;
	for (const struct dra_rec *r = s->cl->recs; r; r = r->next) {
		struct applied *m = remembered(s, r->uid, false);

		if (m)
			m->seen = true;
	}
	while (*p) {
		struct applied *m = *p;

		if (m->seen || shown(m)) {
			p = &m->next;
			continue;
		}
		*p = m->next;
		free(m->sig);
		free(m);
	}
}

static void job_free(struct job *jb)
{
	for (size_t i = 0; i < jb->n; i++) {
		free(jb->v[i].last);
		free(jb->v[i].sig);
		free(jb->v[i].body);
	}
	free(jb->v);
	free(jb->recs);
	free(jb->recp);
	free(jb->state_dir);
	free(jb->network);
	free(jb->driver);
	free(jb);
}

/* The pass over, every apply ended: what was applied remembered, failures retried. */
static void pass_done(struct job *jb)
{
	struct drastatus *s = jb->s;
	bool failed = false;

	s->job_out = false;
	s->sending = NULL;
	for (size_t i = 0; i < jb->n; i++) {
		struct item *it = &jb->v[i];
		struct applied *m = remembered(s, it->rec.uid, true);

		if (!m)
			continue;
		snprintf(m->ns, sizeof(m->ns), "%s", it->rec.ns);
		snprintf(m->name, sizeof(m->name), "%s", it->rec.name);
		if (it->r == 0 && it->sig) {
			s->st.applied += it->sent;
			if (it->sent)
				hpn_info("DRA status: claim %s/%s: applied (%s)", it->rec.ns,
					 it->rec.name,
					 strstr(it->sig, "\"devices\":[]") ? "no devices"
									   : "networkData, Ready");
			free(m->sig);
			m->sig = TAKE_PTR(it->sig);
		} else if (it->r == -ENOENT) {
			s->st.gone++;
			if (!m->gone)
				hpn_warn("DRA status: claim %s/%s is gone from the API (404, or "
					 "409: "
					 "recreated under its name): its status is not written",
					 it->rec.ns, it->rec.name);
			m->gone = true;
		} else {
			hpn_warn("DRA status: claim %s/%s: not written, retried: %s", it->rec.ns,
				 it->rec.name, it->msg);
			s->st.failed++;
			failed = true;
		}
	}
	forget_gone(s);
	job_free(jb);
	if (failed) {
		s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : BACKOFF_MIN_MS;
		if (s->backoff_ms > BACKOFF_MAX_MS)
			s->backoff_ms = BACKOFF_MAX_MS;
		loop_timer_set(&s->timer, s->backoff_ms, 0);
	} else {
		s->backoff_ms = 0;
		if (s->again)
			loop_timer_set(&s->timer, DEBOUNCE_MS, 0);
	}
	s->again = false;
}

/* The pass dropped, its applies not (all) made: the agent stops, the next start writes what is due. */
static void pass_drop(struct job *jb)
{
	struct drastatus *s = jb->s;

	s->job_out = false;
	s->sending = NULL;
	job_free(jb);
}

/* The apply of item it's body, as a call naming claim it's status (path and what are jb's). */
static struct hpn_kube_call apply_call(const struct job *jb, const struct item *it)
{
	return (struct hpn_kube_call){
		.method = "PATCH",
		.path = jb->path,
		.body = it->body,
		.body_len = it->body ? strlen(it->body) : 0,
		.content_type = "application/apply-patch+yaml",
		.what = jb->what,
		.resource = "resourceclaims/status",
		.ns = it->rec.ns,
		.timeout_ms = (unsigned)jb->s->api_timeout_ms,
		.retry = true, /* an apply of the same body is idempotent */
	};
}

static void apply_next(struct job *jb);

/* An apply ended: 0, -ENOENT (404, 409), or -errno with the item's msg; then the next one. */
static void apply_done(void *ud, struct kube_result *res)
{
	struct job *jb = ud;
	struct item *it = &jb->v[jb->at];
	struct hpn_kube_call call = apply_call(jb, it);
	long st = res->a.status;

	jb->s->op = NULL;
	/* 409 with force=true: only the UID precondition, a claim recreated under the name. */
	if (res->r >= 0 && (st == 404 || st == 409))
		it->r = -ENOENT;
	else if (res->r >= 0 && (st < 200 || st > 299))
		it->r = kube_result_status_err(res, &call);
	else
		it->r = res->r < 0 ? res->r : 0;
	if (it->r < 0 && it->r != -ENOENT) {
		hpn_msgf(it->msg, sizeof(it->msg), "%s%s%s",
			 res->err.msg[0] ? res->err.msg : strerror(-it->r),
			 res->err.details[0] ? ": " : "", res->err.details);
		jb->down = true;
	}
	jb->at++;
	if (loop_exiting(jb->s->loop)) {
		pass_drop(jb);
		return;
	}
	apply_next(jb);
}

/* Item it's apply sent (apply_done follows); < 0 with its r and msg when it could not be. */
static int apply_send(struct job *jb, struct item *it)
{
	struct drastatus *s = jb->s;
	_cleanup_free_ char *mgr = NULL;
	struct hpn_kube_call call;
	int r;

	if (hpn_kube_query_escape(s->driver, &mgr) < 0) {
		snprintf(it->msg, sizeof(it->msg), "out of memory");
		return it->r = -ENOMEM;
	}
	snprintf(jb->what, sizeof(jb->what), "ResourceClaim %s/%s status", it->rec.ns,
		 it->rec.name);
	snprintf(jb->path, sizeof(jb->path),
		 "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s/status"
		 "?fieldManager=%s&force=true",
		 it->rec.ns, it->rec.name, mgr);
	call = apply_call(jb, it);
	r = kube_call(s->kube, s->kubeconfig, &call, apply_done, jb, &s->op);
	if (r < 0) {
		snprintf(it->msg, sizeof(it->msg), "out of memory");
		return it->r = r;
	}
	return 0;
}

/*
 * The pass's applies, one claim after another in its order, each started
 * from the last one's done; after one failure the rest are not tried (the
 * API is likely to refuse them too, each after its whole timeout): the next
 * pass, after the backoff, tries them. After the last, the pass is done.
 */
static void apply_next(struct job *jb)
{
	for (; jb->at < jb->n; jb->at++) {
		struct item *it = &jb->v[jb->at];

		if (!it->due)
			continue;
		if (jb->down) {
			it->r = -EAGAIN;
			snprintf(it->msg, sizeof(it->msg), "not tried: an earlier write failed");
			continue;
		}
		it->sent = true;
		if (!it->body) {
			it->r = -ENOMEM;
			snprintf(it->msg, sizeof(it->msg), "out of memory");
		} else if (apply_send(jb, it) == 0) {
			return;
		}
		jb->down = true;
	}
	pass_done(jb);
}

/* The worker read and rendered: the applies go out from the loop. */
static void job_done(struct loop_job *lj)
{
	struct job *jb = (struct job *)lj;
	struct drastatus *s = jb->s;

	/* The worker stopped first, or the agent stops: the next start writes what is due. */
	if (lj->cancelled || loop_exiting(s->loop)) {
		pass_drop(jb);
		return;
	}
	s->sending = jb;
	jb->at = 0;
	apply_next(jb);
}

static struct job *job_new(struct drastatus *s)
{
	struct job *jb = calloc(1, sizeof(*jb));
	size_t n = 0;

	if (!jb)
		return NULL;
	for (const struct dra_rec *r = s->cl->recs; r; r = r->next)
		n++;
	jb->recs = calloc(n ? n : 1, sizeof(*jb->recs));
	jb->recp = calloc(n ? n : 1, sizeof(void *)); /* pointers */
	for (const struct applied *m = s->mem; m; m = m->next)
		n++;
	jb->v = calloc(n ? n : 1, sizeof(*jb->v));
	jb->state_dir = strdup(s->state_dir);
	jb->network = strdup(s->network);
	jb->driver = strdup(s->driver);
	if (!jb->v || !jb->recs || !jb->recp || !jb->state_dir || !jb->network || !jb->driver) {
		job_free(jb);
		return NULL;
	}
	/* Copies: the worker reads them while the loop prepares and unprepares. */
	for (const struct dra_rec *r = s->cl->recs; r; r = r->next) {
		jb->recs[jb->n_recs] = *r;
		jb->recs[jb->n_recs].next = NULL;
		jb->recp[jb->n_recs] = &jb->recs[jb->n_recs];
		jb->n_recs++;
	}
	for (const struct dra_rec *r = s->cl->recs; r; r = r->next) {
		const struct applied *m = remembered(s, r->uid, false);
		struct item *it = &jb->v[jb->n];

		if (m && m->gone)
			continue;
		it->rec = *r;
		it->rec.next = NULL;
		if (m && m->sig && !(it->last = strdup(m->sig))) {
			job_free(jb);
			return NULL;
		}
		jb->n++;
	}
	/* Unprepared while its devices are shown: applied empty (a record of no devices). */
	for (const struct applied *m = s->mem; m; m = m->next) {
		struct item *it = &jb->v[jb->n];
		bool prepared = false;

		for (const struct dra_rec *r = s->cl->recs; r && !prepared; r = r->next)
			prepared = !strcmp(r->uid, m->uid);
		if (prepared || !shown(m))
			continue;
		snprintf(it->rec.uid, sizeof(it->rec.uid), "%s", m->uid);
		snprintf(it->rec.ns, sizeof(it->rec.ns), "%s", m->ns);
		snprintf(it->rec.name, sizeof(it->rec.name), "%s", m->name);
		if (!(it->last = strdup(m->sig))) {
			job_free(jb);
			return NULL;
		}
		jb->n++;
	}
	jb->job.run = job_run;
	jb->job.done = job_done;
	jb->s = s;
	return jb;
}

static void on_timer(struct loop_src *src)
{
	struct drastatus *s = src->ud;
	struct job *jb;
	int r;

	if (loop_exiting(s->loop))
		return;
	if (s->job_out) {
		s->again = true;
		return;
	}
	jb = job_new(s);
	if (!jb) {
		loop_timer_set(&s->timer, BACKOFF_MIN_MS, 0);
		return;
	}
	if (jb->n == 0) {
		job_free(jb);
		forget_gone(s);
		return;
	}
	/* The API's view: after the kubelet's Prepare, before the node's upkeep. */
	r = loop_work_post(s->loop, &jb->job, LOOP_PRIO_API);
	if (r == 0) {
		s->job_out = true;
		return;
	}
	job_free(jb);
	hpn_warn("DRA status: the worker: %s", strerror(-r));
}

static void on_inotify(struct loop_src *src)
{
	struct drastatus *s = src->ud;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	while (read(src->fd, buf, sizeof(buf)) > 0)
		;
	if (s->job_out) {
		s->again = true;
		return;
	}
	/* A pending backoff is cut short: the state changed, and is tried anew. */
	loop_timer_set(&s->timer, DEBOUNCE_MS, 0);
}

int drastatus_start(struct loop *l, const struct dra_claims *cl, const struct drastatus_opts *o,
		    struct drastatus **ret, struct hpn_err *err)
{
	struct drastatus *s = calloc(1, sizeof(*s));
	struct hpn_store st = HPN_STORE_INIT;
	char dir[PATH_MAX];
	int fd, r;

	if (!s)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	s->loop = l;
	s->kube = o->kube;
	s->cl = cl;
	s->api_timeout_ms = o->api_timeout_ms;
	s->inotify.fd = s->timer.fd = -1;
	s->state_dir = strdup(o->state_dir);
	s->network = strdup(o->network);
	s->kubeconfig = strdup(o->kubeconfig);
	s->driver = strdup(o->driver);
	if (!s->state_dir || !s->network || !s->kubeconfig || !s->driver) {
		r = hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
		goto fail;
	}
	if (!s->kube) {
		r = hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
				"DRA status: the claims' writes need the Kubernetes API's loop");
		goto fail;
	}
	/* The journals' directory, made as the plugin makes it, so it can be watched before any ADD. */
	r = hpn_store_open_here(o->state_dir, o->network, &st, err);
	hpn_store_close(&st);
	if (r < 0)
		goto fail;
	if (hpn_snprintf(dir, sizeof(dir), "%s/%s", o->state_dir, o->network) < 0) {
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG, "%s is too long",
				o->state_dir);
		goto fail;
	}
	r = loop_timer(l, &s->timer, FIRST_MS, 0, on_timer, s);
	if (r < 0) {
		hpn_err_set(err, HPN_E_INTERNAL, -r, "timer: %s", strerror(-r));
		goto fail;
	}
	fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (fd < 0 || loop_add(l, &s->inotify, fd, on_inotify, s) < 0 ||
	    inotify_add_watch(s->inotify.fd, dir,
			      IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM) < 0) {
		r = hpn_err_set(err, HPN_E_INTERNAL, errno, "inotify on %s: %s", dir,
				strerror(errno));
		goto fail;
	}
	hpn_info("DRA status: the claims' status.devices follow the journals in %s", dir);
	*ret = s;
	return 0;
fail:
	drastatus_free(s);
	return r;
}

void drastatus_metrics(struct sbuf *b, const struct drastatus *s)
{
	const struct drastatus_stats *ss = &s->st;

	expo_family(b, "hpn_rdma_dra_status_writes_total", "counter",
		    "Claims' status.devices written by server-side apply: applied, gone (the "
		    "claim not in the API), failed (retried).");
	expo_by_result(b, "hpn_rdma_dra_status_writes_total",
		       (const char *[]){ "applied", "gone", "failed" },
		       (uint64_t[]){ ss->applied, ss->gone, ss->failed }, 3);
}

void drastatus_stop(struct drastatus *s)
{
	if (!s)
		return;
	loop_timer_set(&s->timer, LOOP_OFF, 0);
	if (s->sending) {
		kube_cancel(s->op);
		pass_drop(s->sending);
	}
}

void drastatus_free(struct drastatus *s)
{
	if (!s)
		return;
	if (s->sending) {
		kube_cancel(s->op);
		job_free(s->sending);
	}
	while (s->mem) {
		struct applied *m = s->mem;

		s->mem = m->next;
		free(m->sig);
		free(m);
	}
	loop_close(&s->inotify);
	loop_close(&s->timer);
	free(s->state_dir);
	free(s->network);
	free(s->kubeconfig);
	free(s->driver);
	free(s);
}
