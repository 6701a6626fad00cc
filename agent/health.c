// SPDX-License-Identifier: Apache-2.0
/*
 * The health loop: CHECK's logic (lib/check.c, hpn_check_journal) over every
 * journal of the network, because no runtime calls CHECK. Bounded: each
 * period (--health-interval) checks at most --health-batch attachments, in
 * key order from where the last period stopped, on the worker thread; a
 * period that finds the worker busy is skipped. A broken attachment makes its
 * NICs' devices Unhealthy to the kubelet (a new ListAndWatch list), is
 * exported (hpn_rdma_attachment_healthy) and logged with what broke; a whole
 * one again makes them Healthy.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "log.h"
#include "store.h"
#include "util.h"

struct health {
	struct agent_fd timer;
	struct health_stats st;
	size_t cap;
	char last[256]; /* the last key checked: the next period goes on after it */
	bool quitting;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

const struct health_stats *health_stats(const struct agent *a)
{
	return a->ext.health ? &a->ext.health->st : NULL;
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
	h->st.v[h->st.n].state = -1;
	return &h->st.v[h->st.n++];
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
static char **list(struct agent *a, struct health *h)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	char **keys = NULL;
	size_t n = 0;

	if (hpn_store_open(a->conf.state_dir, a->conf.name, &st, &err) < 0 ||
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
		e->n_ids = 0;
		for (size_t i = 0; i < j.n_nics && i < HPN_MAX_NICS; i++)
			hpn_alloc_journal_id(&j.nics[i], e->ids[e->n_ids++]);
		if (j.pod.name[0])
			snprintf(e->pod, sizeof(e->pod), " (pod %s/%s)", j.pod.namespace,
				 j.pod.name);
		else
			e->pod[0] = '\0';
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

void health_apply(struct agent *a)
{
	struct health *h = a->ext.health;
	int changed = 0;

	if (!h)
		return;
	for (size_t d = 0; d < a->devs.n; d++) {
		const char *id = a->devs.v[d].id, *why = NULL;

		for (size_t i = 0; !why && i < h->st.n; i++)
			for (size_t k = 0; h->st.v[i].state == 0 && k < h->st.v[i].n_ids; k++)
				if (!strcmp(h->st.v[i].ids[k], id))
					why = h->st.v[i].msg;
		changed |= agent_devs_set_broken(&a->devs, id, why);
	}
	if (changed)
		kubelet_broadcast(a);
}

static void done(struct agent *a, struct work_job *j)
{
	struct health *h = a->ext.health;

	if (!h || h->quitting) {
		work_job_free(j);
		return;
	}
	if (j->rc < 0)
		hpn_warn("health: the config did not parse: %s", j->err.msg);
	for (size_t i = 0; i < j->n_keys; i++) {
		const struct health_result *r = &j->results[i];
		struct health_entry *e = entry(h, r->key, false);
		const char *pod = e ? e->pod : "";

		if (r->rc == 1) {
			h->st.checks_skipped++;
			if (e) {
				e->state = -1;
				e->reason = NULL;
			}
			continue;
		}
		if (r->rc == 0)
			h->st.checks_healthy++;
		else
			h->st.checks_broken++;
		if (!e)
			continue; /* gone since the job was posted */
		if (r->rc == 0 && e->state == 0)
			hpn_info("health: attachment %s%s is whole again", r->key, pod);
		if (r->rc < 0 && (e->state != 0 || strcmp(e->msg, r->msg)))
			hpn_warn("health: attachment %s%s is broken (%s): %s", r->key, pod,
				 r->reason ? r->reason : "check", r->msg);
		e->state = r->rc == 0 ? 1 : 0;
		e->reason = r->rc == 0 ? NULL : r->reason ? r->reason : "check";
		snprintf(e->msg, sizeof(e->msg), "%s", r->rc == 0 ? "" : r->msg);
		e->checked_at = now_s();
	}
	hpn_debug("health: %zu attachments checked in %.3f s", j->n_keys, j->seconds);
	work_job_free(j);
	health_apply(a);
}

static void tick(struct agent *a, struct agent_fd *f)
{
	struct health *h = a->ext.health;
	struct work_job *j;
	uint64_t n;
	char **keys;
	size_t total = 0, start = 0, batch = (size_t)a->ext.opts.health_batch;

	if (read(f->fd, &n, sizeof(n)) < 0 || h->quitting)
		return;
	h->st.last_tick = now_s();
	if (work_busy(a)) {
		hpn_debug("health: the worker is busy; this period is skipped");
		return;
	}
	keys = list(a, h);
	if (!keys)
		return;
	while (keys[total])
		total++;
	/* Health of NICs whose attachment went away is theirs again. */
	health_apply(a);
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
		j->conf_text = strdup(a->conf_buf);
	}
	if (!j || !j->keys || !j->results || !j->conf_text) {
		work_job_free(j);
		hpn_strv_free(keys);
		hpn_error("health: out of memory");
		return;
	}
	j->kind = WORK_HEALTH;
	j->done = done;
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
	if (work_post(a, j) < 0)
		work_job_free(j);
}

int health_start(struct agent *a)
{
	struct health *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	a->ext.health = h;
	/* The first look soon after start: a restarted agent learns the node at once. */
	return agent_timer_add(a, &h->timer, 1000, a->ext.opts.health_s * 1000, tick);
}

void health_stop(struct agent *a)
{
	struct health *h = a->ext.health;

	if (h) {
		h->quitting = true;
		agent_timer_set(&h->timer, 0, 0);
	}
}

void health_free(struct agent *a)
{
	struct health *h = a->ext.health;

	if (!h)
		return;
	agent_fd_close(&h->timer);
	free(h->st.v);
	free(h);
	a->ext.health = NULL;
}
