// SPDX-License-Identifier: Apache-2.0
/*
 * NodePrepareResources' state machine (draprepare.h): the queue of the
 * kubelet's calls, which claim is fetched next, and the answers. The owner's
 * ops do the rest.
 */
#include "draprepare.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void hpn_dra_prep_init(struct hpn_dra_prep *m, const struct hpn_dra_prep_ops *ops, void *ud,
		       size_t max_fetches)
{
	*m = (struct hpn_dra_prep){ .ops = ops,
				    .ud = ud,
				    .max_fetches = max_fetches ? max_fetches : 1 };
	m->tail = &m->calls;
}

struct hpn_dra_prep_call *hpn_dra_prep_call_new(size_t n)
{
	struct hpn_dra_prep_call *pc;

	if (n > (SIZE_MAX - sizeof(*pc)) / sizeof(pc->v[0]))
		return NULL;
	pc = calloc(1, sizeof(*pc) + n * sizeof(pc->v[0]));
	if (pc)
		pc->n = n;
	return pc;
}

static bool call_done(const struct hpn_dra_prep_call *pc)
{
	for (size_t i = 0; i < pc->n; i++)
		if (pc->v[i].state != HPN_DRA_PREP_DONE)
			return false;
	return true;
}

/* Every claim of pc answered: off the queue, replied to (when its kubelet waits), freed. */
static void finish(struct hpn_dra_prep *m, struct hpn_dra_prep_call *pc)
{
	struct hpn_dra_prep_call **p = &m->calls;

	while (*p && *p != pc)
		p = &(*p)->next;
	if (*p)
		*p = pc->next;
	if (m->tail == &pc->next)
		m->tail = p;
	if (!pc->gone) {
		m->ops->reply(m->ud, pc);
		for (size_t i = 0; i < pc->n; i++)
			m->prepares[pc->v[i].api][pc->v[i].rec != NULL]++;
	}
	free(pc);
}

/* Claim i of pc answered (rec or err set): its call finished when it was the last. */
static void answered(struct hpn_dra_prep *m, struct hpn_dra_prep_call *pc, size_t i)
{
	pc->v[i].state = HPN_DRA_PREP_DONE;
	if (call_done(pc))
		finish(m, pc);
}

/* A claim no fetch will answer: answered with why. */
static void give_up(struct hpn_dra_prep *m, struct hpn_dra_prep_call *pc, size_t i, const char *why)
{
	struct hpn_dra_prep_claim *q = &pc->v[i];

	hpn_msgf(q->err, sizeof(q->err), "claim %s/%s: not prepared: %s", q->ns, q->name, why);
	answered(m, pc, i);
}

static bool uid_fetching(const struct hpn_dra_prep *m, const char *uid)
{
	for (const struct hpn_dra_prep_call *pc = m->calls; pc; pc = pc->next)
		for (size_t i = 0; i < pc->n; i++)
			if (pc->v[i].state == HPN_DRA_PREP_FETCHING && !strcmp(pc->v[i].uid, uid))
				return true;
	return false;
}

/*
 * The first waiting claim of the first call that has one, and its index; a
 * claim whose UID is being fetched waits for that fetch (its record then
 * answers it), unless its call gives up anyway.
 */
static struct hpn_dra_prep_call *next_claim(const struct hpn_dra_prep *m, size_t *i)
{
	for (struct hpn_dra_prep_call *pc = m->calls; pc; pc = pc->next)
		for (size_t k = 0; k < pc->n; k++) {
			if (pc->v[k].state != HPN_DRA_PREP_WAITING)
				continue;
			if (!m->quitting && !pc->gone && uid_fetching(m, pc->v[k].uid))
				continue;
			*i = k;
			return pc;
		}
	return NULL;
}

void hpn_dra_prep_pump(struct hpn_dra_prep *m)
{
	struct hpn_dra_prep_call *pc;
	size_t i = 0;

	/* A fetch that answers before it returns comes back here: the loop below goes on. */
	if (m->pumping)
		return;
	m->pumping = true;
	while (m->fetching < m->max_fetches && (pc = next_claim(m, &i))) {
		struct hpn_dra_prep_claim *q = &pc->v[i];
		int r;

		if (m->quitting || pc->gone) {
			/* Nobody to answer, or no time: the rest need no fetch. */
			give_up(m, pc, i,
				m->quitting ? "hpn-rdma-agent is stopping"
					    : "the kubelet went away");
			continue;
		}
		/* Prepared since its call came, by an earlier call: no fetch. */
		if (m->ops->lookup(m->ud, q)) {
			answered(m, pc, i);
			continue;
		}
		q->state = HPN_DRA_PREP_FETCHING;
		q->api = true;
		m->fetching++;
		r = m->ops->fetch(m->ud, pc, i);
		if (r == 0)
			continue; /* q may be answered (and pc gone) already */
		q->state = HPN_DRA_PREP_WAITING;
		q->api = false;
		m->fetching--;
		if (r == -ENOMEM) {
			m->ops->retry(m->ud);
			break;
		}
		give_up(m, pc, i, strerror(-r));
	}
	m->pumping = false;
}

void hpn_dra_prep_submit(struct hpn_dra_prep *m, struct hpn_dra_prep_call *pc)
{
	/* Idempotent: what was prepared is the answer, with no fetch. */
	for (size_t i = 0; i < pc->n; i++)
		if (m->ops->lookup(m->ud, &pc->v[i]))
			pc->v[i].state = HPN_DRA_PREP_DONE;
	/* Queued even when all are answered: finish takes it off the queue. */
	pc->next = NULL;
	*m->tail = pc;
	m->tail = &pc->next;
	if (call_done(pc)) {
		finish(m, pc);
		return;
	}
	hpn_dra_prep_pump(m);
}

void hpn_dra_prep_fetched(struct hpn_dra_prep *m, struct hpn_dra_prep_call *pc, size_t i, int r,
			  const struct hpn_dra_claim *cl, const struct hpn_err *err)
{
	struct hpn_dra_prep_claim *q;

	if (i >= pc->n || pc->v[i].state != HPN_DRA_PREP_FETCHING)
		return;
	q = &pc->v[i];
	m->fetching--;
	if (r < 0) {
		const char *msg = err && err->msg[0] ? err->msg : strerror(-r);
		const char *details = err ? err->details : "";

		if (r == -ESTALE)
			hpn_msgf(q->err, sizeof(q->err),
				 "claim %s/%s (%s): the claim in the API is another one (recreated "
				 "under its name, or gone): %s",
				 q->ns, q->name, q->uid, msg);
		else
			hpn_msgf(q->err, sizeof(q->err), "claim %s/%s: %s%s%s", q->ns, q->name, msg,
				 details[0] ? ": " : "", details);
		if (m->ops->fetch_failed)
			m->ops->fetch_failed(m->ud, q);
	} else if (m->quitting) {
		hpn_msgf(q->err, sizeof(q->err), "claim %s/%s: hpn-rdma-agent is stopping", q->ns,
			 q->name);
	} else if (!m->ops->lookup(m->ud, q)) {
		/* (A record made meanwhile, by another call, answered it above.) */
		m->ops->prepare(m->ud, q, cl);
	}
	answered(m, pc, i);
	hpn_dra_prep_pump(m);
}

void hpn_dra_prep_gone(struct hpn_dra_prep_call *pc)
{
	pc->gone = true;
}

void hpn_dra_prep_stop(struct hpn_dra_prep *m)
{
	m->quitting = true;
	hpn_dra_prep_pump(m);
}

void hpn_dra_prep_forget(struct hpn_dra_prep *m, const void *rec)
{
	for (struct hpn_dra_prep_call *pc = m->calls; pc; pc = pc->next)
		for (size_t i = 0; i < pc->n; i++)
			if (pc->v[i].rec == rec)
				pc->v[i].rec = NULL;
}

void hpn_dra_prep_free(struct hpn_dra_prep *m)
{
	while (m->calls) {
		struct hpn_dra_prep_call *pc = m->calls;

		m->calls = pc->next;
		free(pc);
	}
	m->tail = &m->calls;
	m->fetching = 0;
}
