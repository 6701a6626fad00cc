// SPDX-License-Identifier: Apache-2.0
/*
 * The health loop: CHECK's logic (lib/check.c, hpn_check_journal) over every
 * journal of the network, because no runtime calls CHECK. Bounded: each
 * period (--health-interval) checks at most --health-batch attachments, in
 * key order from where the last period stopped, on the worker thread; a
 * period that finds the worker busy is skipped. A broken attachment makes its
 * NICs' devices Unhealthy to the kubelet (a new ListAndWatch list), is
 * exported (hpn_rdma_attachment_healthy) and logged with what broke; a whole
 * one again makes them Healthy. Every verdict (whole, broken, could not be
 * checked) is also its NICs' devices' (agent_devs_set_verdict), which the DRA
 * driver's health stream tells the kubelet. Beside CHECK, one source main.c wires (NRI's
 * bare containers) may find an attachment broken: its verdict is combined
 * with CHECK's in settle(), at each CHECK result and whenever the source
 * says it changed, and applied the same way. An attachment with a far NIC
 * (a NIC left free was nearer to its GPU) is logged once, and stays Healthy.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attach.h"
#include "gpu.h"
#include "health.h"
#include "log.h"
#include "loop.h"
#include "node.h"
#include "store.h"
#include "util.h"

struct health {
	struct loop *loop;
	struct node *node;
	struct health_opts o;
	struct loop_src timer;
	struct health_stats st;
	size_t cap;
	char last[256]; /* the last key checked: the next period goes on after it */
	bool quitting;
	bool job_out; /* a batch queued or running on the worker */
	struct {
		const char *reason;
		bool (*broken)(void *ud, const char *sandbox, char *msg, size_t len);
		void *ud;
	} src; /* health_source's: broken NULL when none */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One attachment's check (hpn_check_journal), done on the worker. */
struct health_result {
	char key[256];
	int rc; /* 0 healthy, 1 not checked, <0 broken */
	const char *reason;
	char msg[HEALTH_MSG];
	char warning[HEALTH_MSG]; /* hpn_check_report's: breaks nothing, said once */
};

struct health_job {
	struct loop_job job; /* first: the worker hands this back */
	struct health *h;
	char *conf_text; /* the entry, parsed by the worker (the loop may reload) */
	char **keys;
	size_t n_keys;
	struct health_result *results;
	int rc;
	struct hpn_err err;
};

const struct health_stats *health_stats(const struct health *h)
{
	return h ? &h->st : NULL;
}

static struct health_entry *entry(struct health *h, const char *key, bool add)
{
	for (size_t i = 0; i < h->st.n; i++)
		if (!strcmp(h->st.v[i].key, key))
			return &h->st.v[i];
	if (!add)
		return NULL;
	if (h->st.n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 16;
		struct health_entry *v = realloc(h->st.v, cap * sizeof(*v));

		if (!v)
			return NULL;
		h->st.v = v;
		h->cap = cap;
	}
	memset(&h->st.v[h->st.n], 0, sizeof(h->st.v[0]));
	snprintf(h->st.v[h->st.n].key, sizeof(h->st.v[0].key), "%s", key);
	h->st.v[h->st.n].state = h->st.v[h->st.n].check_state = -1;
	return &h->st.v[h->st.n++];
}

/* The far NICs of a completed attachment, said once: the NICs stay Healthy. */
static void gpus_look(struct health_entry *e, const char *key, const struct hpn_journal *j)
{
	if (e->gpus_seen || j->phase != HPN_PHASE_ATTACHED || j->stale)
		return;
	e->gpus_seen = true;
	for (size_t i = 0; i < j->n_nics && i < HPN_MAX_NICS; i++) {
		const struct hpn_journal_nic *n = &j->nics[i];

		if (!hpn_journal_nic_far(n))
			continue;
		hpn_warn("health: attachment %s%s: NIC %s (%s) serves GPU %s (%s) at %s, but a NIC "
			 "left free was %s from it: NCCL's traffic crosses more of the PCI tree",
			 key, e->pod, n->host.name, n->pci[0] ? n->pci : "no PCI address",
			 n->gpu_id, n->gpu_pci[0] ? n->gpu_pci : "not placed", n->gpu_dist,
			 n->gpu_best);
	}
}

/*
 * CHECK's warning (a lossy hints class), said when it appears or changes and
 * when it is gone: the attachment stays healthy, its NICs' devices Healthy.
 */
static void warn_once(struct health_entry *e, const struct health_result *r)
{
	if (r->rc != 0 || !strcmp(e->warning, r->warning))
		return;
	if (r->warning[0])
		hpn_warn("health: attachment %s%s: %s (it stays healthy; nccl.losslessRequired "
			 "would make it broken)",
			 e->key, e->pod, r->warning);
	else
		hpn_info("health: attachment %s%s: no longer warned of: %s", e->key, e->pod,
			 e->warning);
	snprintf(e->warning, sizeof(e->warning), "%s", r->warning);
}

static int cmp_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/*
 * The journals of the network now, sorted: entries for new ones, the NICs
 * each holds (device IDs, as devices.c names them), entries of vanished ones
 * dropped. NULL-terminated, or NULL.
 */
static char **list(struct health *h)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	char **keys = NULL;
	size_t n = 0;

	if (hpn_store_open_here(h->node->conf.state_dir, h->node->conf.name, &st, &err) < 0 ||
	    hpn_store_keys(&st, &keys, &err) < 0) {
		hpn_warn("health: list the journals: %s", err.msg);
		hpn_store_close(&st);
		return NULL;
	}
	while (keys[n])
		n++;
	qsort(keys, n, sizeof(*keys), cmp_str);
	for (size_t i = 0; i < h->st.n; i++)
		h->st.v[i].seen = false;
	for (size_t k = 0; k < n; k++) {
		struct health_entry *e = entry(h, keys[k], true);
		struct hpn_journal j = { 0 };
		struct hpn_err jerr = { 0 };

		if (!e)
			break;
		e->seen = true;
		if (hpn_journal_read(&st, keys[k], &j, &jerr) < 0)
			continue;
		if (hpn_snprintf(e->sandbox, sizeof(e->sandbox), "%s",
				 j.container_id ? j.container_id : "") < 0)
			e->sandbox[0] = '\0';
		e->n_ids = 0;
		for (size_t i = 0; i < j.n_nics && i < HPN_MAX_NICS; i++)
			hpn_alloc_journal_id(&j.nics[i], e->ids[e->n_ids++]);
		if (j.pod.name[0])
			snprintf(e->pod, sizeof(e->pod), " (pod %s/%s)", j.pod.namespace,
				 j.pod.name);
		else
			e->pod[0] = '\0';
		gpus_look(e, keys[k], &j);
		hpn_journal_free(&j);
	}
	for (size_t i = 0; i < h->st.n;) {
		if (h->st.v[i].seen) {
			i++;
			continue;
		}
		/* Gone (DEL or GC): its NICs are no attachment's now. */
		h->st.v[i] = h->st.v[h->st.n - 1];
		h->st.n--;
	}
	hpn_store_close(&st);
	return keys;
}

/* The attachment that holds NIC id, its broken one first; NULL: none. */
static const struct health_entry *holder(const struct health *h, const char *id)
{
	const struct health_entry *found = NULL;

	for (size_t i = 0; i < h->st.n; i++)
		for (size_t k = 0; k < h->st.v[i].n_ids; k++)
			if (!strcmp(h->st.v[i].ids[k], id) && (!found || h->st.v[i].state == 0))
				found = &h->st.v[i];
	return found;
}

/*
 * The journals' verdicts as the kubelet sees them: devices of broken
 * attachments Unhealthy (ListAndWatch), and each NIC's verdict with what was
 * found (the DRA driver's health stream).
 */
static void apply(struct health *h)
{
	struct agent_devs *devs = &h->node->devs;
	int changed = 0;

	for (size_t d = 0; d < devs->n; d++) {
		const struct health_entry *e = holder(h, devs->v[d].id);
		enum agent_verdict v = AGENT_VERDICT_NONE;
		char msg[AGENT_VERDICT_MSG] = "";

		if (e && e->state == 0) {
			v = AGENT_VERDICT_BROKEN;
			hpn_msgf(msg, sizeof(msg), "its attachment is broken (%s): %s", e->reason,
				 e->msg);
		} else if (e && e->state == 1) {
			v = AGENT_VERDICT_WHOLE;
		} else if (e && e->unchecked) {
			v = AGENT_VERDICT_UNCHECKED;
			hpn_msgf(
				msg, sizeof(msg),
				"the health loop could not check its attachment%s: not a completed "
				"attachment of this boot, or an ADD or DEL is working on it",
				e->pod);
		}
		changed |= agent_devs_set_verdict(devs, devs->v[d].id, v, msg);
	}
	if (changed)
		node_devices_changed(h->node);
}

/*
 * The attachment's verdict from CHECK's last and the source's now: CHECK's
 * broken first, then the source's, else CHECK's (healthy, or not checked).
 * Logged when it breaks, changes why, or is whole again. True when it changed.
 */
static bool settle(struct health *h, struct health_entry *e)
{
	char msg[HEALTH_MSG] = "";
	const char *reason = e->check_reason;
	int state = e->check_state;
	bool changed;

	if (state == 0)
		snprintf(msg, sizeof(msg), "%s", e->check_msg);
	else if (h->src.broken && e->sandbox[0] &&
		 h->src.broken(h->src.ud, e->sandbox, msg, sizeof(msg))) {
		state = 0;
		reason = h->src.reason;
	} else {
		msg[0] = '\0';
	}
	changed = state != e->state || strcmp(msg, e->msg) != 0;
	if (state == 1 && e->state == 0)
		hpn_info("health: attachment %s%s is whole again", e->key, e->pod);
	if (state == 0 && changed)
		hpn_warn("health: attachment %s%s is broken (%s): %s", e->key, e->pod,
			 reason ? reason : "check", msg);
	e->state = state;
	e->reason = state == 0 ? (reason ? reason : "check") : NULL;
	snprintf(e->msg, sizeof(e->msg), "%s", msg);
	return changed;
}

/* Every verdict again (the source changed, or new entries were listed), applied. */
static void settle_all(struct health *h)
{
	for (size_t i = 0; i < h->st.n; i++)
		if (settle(h, &h->st.v[i]) && h->st.v[i].state >= 0)
			h->st.v[i].checked_at = now_s();
	apply(h);
}

static void job_free(struct health_job *j)
{
	if (!j)
		return;
	free(j->conf_text);
	hpn_strv_free(j->keys);
	free(j->results);
	free(j);
}

/* On the worker: CHECK each key, with the config as the job has it. */
static void run(struct loop_job *lj)
{
	struct health_job *j = (struct health_job *)lj;
	struct hpn_conf conf = { 0 };

	j->rc = hpn_conf_parse(j->conf_text, strlen(j->conf_text), HPN_CMD_ADD, &conf, &j->err);
	for (size_t i = 0; j->rc >= 0 && i < j->n_keys; i++) {
		struct health_result *res = &j->results[i];
		struct hpn_check_report rep;
		struct hpn_err err = { 0 };

		snprintf(res->key, sizeof(res->key), "%s", j->keys[i]);
		res->rc = hpn_check_journal(&conf, j->keys[i], &rep, &err);
		res->reason = rep.reason;
		snprintf(res->warning, sizeof(res->warning), "%s", rep.warning);
		if (res->rc < 0)
			snprintf(res->msg, sizeof(res->msg), "%s",
				 err.msg[0] ? err.msg : strerror(-res->rc));
	}
	hpn_conf_free(&conf);
}

static void done(struct loop_job *lj)
{
	struct health_job *j = (struct health_job *)lj;
	struct health *h = j->h;

	h->job_out = false;
	if (h->quitting || lj->cancelled) {
		job_free(j);
		return;
	}
	if (j->rc < 0)
		hpn_warn("health: the config did not parse: %s", j->err.msg);
	for (size_t i = 0; i < j->n_keys; i++) {
		const struct health_result *r = &j->results[i];
		struct health_entry *e = entry(h, r->key, false);

		if (r->rc == 1)
			h->st.checks_skipped++;
		else if (r->rc == 0)
			h->st.checks_healthy++;
		else
			h->st.checks_broken++;
		if (!e)
			continue; /* gone since the job was posted */
		warn_once(e, r);
		e->check_state = r->rc == 1 ? -1 : r->rc == 0 ? 1 : 0;
		e->unchecked = r->rc == 1;
		e->check_reason = r->rc < 0 ? (r->reason ? r->reason : "check") : NULL;
		snprintf(e->check_msg, sizeof(e->check_msg), "%s", r->rc < 0 ? r->msg : "");
		if (settle(h, e) || r->rc != 1)
			e->checked_at = now_s();
	}
	hpn_debug("health: %zu attachments checked in %.3f s", j->n_keys, j->job.seconds);
	job_free(j);
	apply(h);
}

static void tick(struct loop_src *s)
{
	struct health *h = s->ud;
	struct health_job *j;
	char **keys;
	size_t total = 0, start = 0, batch = (size_t)h->o.batch;

	if (h->quitting)
		return;
	h->st.last_tick = now_s();
	if (h->job_out) {
		hpn_debug("health: the last batch is still queued or running; this period is "
			  "skipped");
		return;
	}
	keys = list(h);
	if (!keys)
		return;
	while (keys[total])
		total++;
	/*
	 * Health of NICs whose attachment went away is theirs again; a new
	 * attachment gets the source's verdict before CHECK reaches it.
	 */
	settle_all(h);
	if (!total) {
		hpn_strv_free(keys);
		return;
	}
	while (start < total && h->last[0] && strcmp(keys[start], h->last) <= 0)
		start++;
	if (start == total)
		start = 0;
	if (batch > total)
		batch = total;
	j = calloc(1, sizeof(*j));
	if (j) {
		j->keys = calloc(batch + 1, sizeof(char *));
		j->results = calloc(batch, sizeof(*j->results));
		j->conf_text = strdup(h->node->conf_text);
	}
	if (!j || !j->keys || !j->results || !j->conf_text) {
		job_free(j);
		hpn_strv_free(keys);
		hpn_error("health: out of memory");
		return;
	}
	j->job.run = run;
	j->job.done = done;
	j->h = h;
	for (size_t i = 0; i < batch; i++) {
		size_t k = (start + i) % total;

		j->keys[i] = keys[k];
		keys[k] = NULL;
		j->n_keys++;
	}
	snprintf(h->last, sizeof(h->last), "%s", j->keys[j->n_keys - 1]);
	for (size_t k = 0; k < total; k++)
		free(keys[k]);
	free(keys);
	/* The node's upkeep: after the kubelet's Prepare and the API's view. */
	if (loop_work_post(h->loop, &j->job, LOOP_PRIO_HOST) < 0)
		job_free(j);
	else
		h->job_out = true;
}

int health_start(struct loop *l, struct node *node, const struct health_opts *o,
		 struct health **ret)
{
	struct health *h = calloc(1, sizeof(*h));
	int r;

	if (!h)
		return -ENOMEM;
	h->loop = l;
	h->node = node;
	h->o = *o;
	/* The first look soon after start: a restarted agent learns the node at once. */
	r = loop_timer(l, &h->timer, 1000, o->period_s * 1000, tick, h);
	if (r < 0) {
		free(h);
		return r;
	}
	*ret = h;
	return 0;
}

void health_stop(struct health *h)
{
	if (h) {
		h->quitting = true;
		loop_timer_set(&h->timer, LOOP_OFF, 0);
	}
}

void health_free(struct health *h)
{
	if (!h)
		return;
	loop_close(&h->timer);
	free(h->st.v);
	free(h);
}

void health_source(struct health *h, const char *reason,
		   bool (*broken)(void *ud, const char *sandbox, char *msg, size_t len), void *ud)
{
	if (!h)
		return;
	h->src.reason = reason;
	h->src.broken = broken;
	h->src.ud = ud;
}

void health_refresh(struct health *h)
{
	if (h && !h->quitting)
		settle_all(h);
}
