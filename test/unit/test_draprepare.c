// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for agent/dra/model/draprepare.c, NodePrepareResources' state
 * machine, driven through fake ops that write down every op in order: F:uid
 * a fetch started (F:uid! failed at once, F:uid~ out of memory), L:uid a
 * claim answered from a record, P:uid a fetched claim prepared, W:uid a fetch
 * error reported, T the retry asked for, R:owner(uid ... -uid) a reply (-: no
 * record). Each test holds the whole sequence to an exact string: claims in
 * order, two calls sharing a claim (fetched once), the limit on fetches
 * (1 and 3), a fetch failing at start, fetch errors and their messages, a
 * kubelet gone mid-call, the driver stopping, out of memory and the retry, a
 * record forgotten (Unprepare), a record made while a fetch was out, fetches
 * that answer before they return, a result reported twice, and the counters.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dra.h"
#include "draprepare.h"
#include "err.h"

#define NS	 "ml"
#define MAX_OUT	 16
#define MAX_RECS 16

/* A record the fake driver holds: the claim it was prepared as. */
struct frec {
	char uid[64], name[64];
	bool live;
};

static struct fake {
	struct hpn_dra_prep m;
	char log[4096];
	struct frec recs[MAX_RECS];
	struct {
		struct hpn_dra_prep_call *pc;
		size_t i;
		char uid[64];
	} out[MAX_OUT]; /* fetches started, not yet answered, in order */
	size_t n_out, max_out;
	char fail_uid[64]; /* its fetch fails at once with fail_r */
	int fail_r;
	int nomem;			    /* fetches that fail with -ENOMEM first */
	char bad_uid[64];		    /* its preparation fails */
	bool sync;			    /* a fetch answers (ok) before it returns */
	char errs[8][HPN_DRA_PREP_ERR_MAX]; /* the last reply's errors, claim by claim */
} f;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One op more in the log. */
static void say(const char *fmt, ...)
{
	size_t at = strlen(f.log);
	va_list ap;

	if (at && at + 1 < sizeof(f.log))
		f.log[at++] = ' ';
	va_start(ap, fmt);
	vsnprintf(f.log + at, sizeof(f.log) - at, fmt, ap);
	va_end(ap);
}

/* The ops written down since the last take, and a fresh log. */
static const char *take(void)
{
	static char got[sizeof(f.log)];

	snprintf(got, sizeof(got), "%s", f.log);
	f.log[0] = '\0';
	return got;
}

static struct frec *rec_find(const char *uid)
{
	for (size_t i = 0; i < MAX_RECS; i++)
		if (f.recs[i].live && !strcmp(f.recs[i].uid, uid))
			return &f.recs[i];
	return NULL;
}

static struct frec *rec_add(const char *uid, const char *name)
{
	for (size_t i = 0; i < MAX_RECS; i++)
		if (!f.recs[i].live) {
			snprintf(f.recs[i].uid, sizeof(f.recs[i].uid), "%s", uid);
			snprintf(f.recs[i].name, sizeof(f.recs[i].name), "%s", name);
			f.recs[i].live = true;
			return &f.recs[i];
		}
	return NULL;
}

static void answer(const char *uid, int r, const struct hpn_err *err);

static int op_fetch(void *ud, struct hpn_dra_prep_call *pc, size_t i)
{
	const char *uid = pc->v[i].uid;

	CHECK(ud == &f);
	if (f.nomem > 0) {
		f.nomem--;
		say("F:%s~", uid);
		return -ENOMEM;
	}
	if (f.fail_uid[0] && !strcmp(f.fail_uid, uid)) {
		say("F:%s!", uid);
		return f.fail_r;
	}
	say("F:%s", uid);
	CHECK(f.n_out < MAX_OUT);
	f.out[f.n_out].pc = pc;
	f.out[f.n_out].i = i;
	snprintf(f.out[f.n_out].uid, sizeof(f.out[0].uid), "%s", uid);
	f.n_out++;
	if (f.n_out > f.max_out)
		f.max_out = f.n_out;
	if (f.sync)
		answer(uid, 0, NULL);
	return 0;
}

static bool op_lookup(void *ud, struct hpn_dra_prep_claim *q)
{
	const struct frec *r = rec_find(q->uid);

	(void)ud;
	if (!r)
		return false;
	say("L:%s", q->uid);
	if (strcmp(r->name, q->name))
		snprintf(q->err, sizeof(q->err), "prepared as %s", r->name);
	else
		q->rec = r;
	return true;
}

static void op_prepare(void *ud, struct hpn_dra_prep_claim *q, const struct hpn_dra_claim *cl)
{
	(void)ud;
	CHECK_STR_EQ(cl->uid, q->uid);
	CHECK_STR_EQ(cl->name, q->name);
	if (!strcmp(q->uid, f.bad_uid)) {
		say("P:%s!", q->uid);
		snprintf(q->err, sizeof(q->err), "claim %s/%s: bad device", q->ns, q->name);
		return;
	}
	say("P:%s", q->uid);
	q->rec = rec_add(q->uid, q->name);
}

static void op_reply(void *ud, const struct hpn_dra_prep_call *pc)
{
	char s[512] = "";

	(void)ud;
	for (size_t i = 0; i < pc->n; i++) {
		size_t at = strlen(s);

		CHECK_INT_EQ(pc->v[i].state, HPN_DRA_PREP_DONE);
		snprintf(s + at, sizeof(s) - at, "%s%s%s", i ? " " : "", pc->v[i].rec ? "" : "-",
			 pc->v[i].uid);
		if (i < 8)
			snprintf(f.errs[i], sizeof(f.errs[i]), "%s", pc->v[i].err);
	}
	say("R:%s(%s)", (const char *)pc->owner, s);
}

static void op_retry(void *ud)
{
	(void)ud;
	say("T");
}

static void op_fetch_failed(void *ud, const struct hpn_dra_prep_claim *q)
{
	(void)ud;
	CHECK(q->err[0] != '\0');
	say("W:%s", q->uid);
}

static const struct hpn_dra_prep_ops ops = {
	.fetch = op_fetch,
	.lookup = op_lookup,
	.prepare = op_prepare,
	.reply = op_reply,
	.retry = op_retry,
	.fetch_failed = op_fetch_failed,
};

static void reset(size_t max_fetches)
{
	hpn_dra_prep_free(&f.m);
	memset(&f, 0, sizeof(f));
	hpn_dra_prep_init(&f.m, &ops, &f, max_fetches);
}

/* A call named owner of the claims in uids (space-separated; name = uid), submitted. */
static struct hpn_dra_prep_call *call(const char *owner, const char *uids)
{
	char buf[256], *save = NULL;
	size_t n = 0;
	struct hpn_dra_prep_call *pc;

	snprintf(buf, sizeof(buf), "%s", uids);
	for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
		n++;
	pc = hpn_dra_prep_call_new(n);
	if (!pc)
		abort();
	pc->owner = (void *)owner;
	snprintf(buf, sizeof(buf), "%s", uids);
	n = 0;
	for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save), n++) {
		snprintf(pc->v[n].ns, sizeof(pc->v[n].ns), "%s", NS);
		snprintf(pc->v[n].name, sizeof(pc->v[n].name), "%s", t);
		snprintf(pc->v[n].uid, sizeof(pc->v[n].uid), "%s", t);
	}
	hpn_dra_prep_submit(&f.m, pc);
	return pc;
}

/* The fetch of uid out first ends: r 0 (its claim), or an error. */
static void answer(const char *uid, int r, const struct hpn_err *err)
{
	static struct hpn_dra_claim cl;
	struct hpn_dra_prep_call *pc;
	size_t k = 0, i;

	while (k < f.n_out && strcmp(f.out[k].uid, uid))
		k++;
	if (k == f.n_out) {
		CHECK(!"no fetch of that claim is out");
		fprintf(stderr, "\t%s\n", uid);
		return;
	}
	pc = f.out[k].pc;
	i = f.out[k].i;
	memmove(&f.out[k], &f.out[k + 1], (f.n_out - k - 1) * sizeof(f.out[0]));
	f.n_out--;
	memset(&cl, 0, sizeof(cl));
	snprintf(cl.ns, sizeof(cl.ns), "%s", NS);
	snprintf(cl.name, sizeof(cl.name), "%s", uid);
	snprintf(cl.uid, sizeof(cl.uid), "%s", uid);
	hpn_dra_prep_fetched(&f.m, pc, i, r, r < 0 ? NULL : &cl, err);
}

#define CHECK_COUNTS(rec_err, rec_ok, api_err, api_ok)                                             \
	do {                                                                                       \
		CHECK_INT_EQ(f.m.prepares[0][0], rec_err);                                         \
		CHECK_INT_EQ(f.m.prepares[0][1], rec_ok);                                          \
		CHECK_INT_EQ(f.m.prepares[1][0], api_err);                                         \
		CHECK_INT_EQ(f.m.prepares[1][1], api_ok);                                          \
	} while (0)

/* One call of three claims, one fetch at a time: fetched and answered in order. */
static void test_in_order(void)
{
	reset(1);
	call("A", "c1 c2 c3");
	CHECK_STR_EQ(take(), "F:c1");
	CHECK_INT_EQ(f.m.fetching, 1);
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "P:c1 F:c2");
	answer("c2", 0, NULL);
	CHECK_STR_EQ(take(), "P:c2 F:c3");
	answer("c3", 0, NULL);
	CHECK_STR_EQ(take(), "P:c3 R:A(c1 c2 c3)");
	CHECK_INT_EQ(f.m.fetching, 0);
	CHECK(f.m.calls == NULL);
	CHECK_INT_EQ(f.max_out, 1);
	CHECK_COUNTS(0, 0, 0, 3);
}

/* Claims with a record: answered at once, with no fetch; a call of only those replied to at once. */
static void test_records(void)
{
	reset(1);
	rec_add("r1", "r1");
	rec_add("r2", "other"); /* the UID prepared under another name */
	call("A", "r1 c1 r2");
	CHECK_STR_EQ(take(), "L:r1 L:r2 F:c1");
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "P:c1 R:A(r1 c1 -r2)");
	CHECK_STR_EQ(f.errs[2], "prepared as other");
	call("B", "r1 c1");
	CHECK_STR_EQ(take(), "L:r1 L:c1 R:B(r1 c1)");
	CHECK(f.m.calls == NULL);
	CHECK_COUNTS(1, 3, 0, 1);
}

/* Two calls sharing c1, one fetch at a time: B's c1 from A's record, fetched once. */
static void test_shared_one(void)
{
	reset(1);
	call("A", "c1 c2");
	CHECK_STR_EQ(take(), "F:c1");
	call("B", "c1 c3");
	CHECK_STR_EQ(take(), "");
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "P:c1 F:c2");
	answer("c2", 0, NULL);
	CHECK_STR_EQ(take(), "P:c2 R:A(c1 c2) L:c1 F:c3");
	answer("c3", 0, NULL);
	CHECK_STR_EQ(take(), "P:c3 R:B(c1 c3)");
	CHECK_COUNTS(0, 1, 0, 3);
}

/* The same with three fetches at a time: B's c1 waits for A's fetch of it, not a second one. */
static void test_shared_three(void)
{
	reset(3);
	call("A", "c1 c2");
	CHECK_STR_EQ(take(), "F:c1 F:c2");
	call("B", "c1 c3");
	CHECK_STR_EQ(take(), "F:c3");
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "P:c1 L:c1");
	answer("c3", 0, NULL);
	CHECK_STR_EQ(take(), "P:c3 R:B(c1 c3)");
	answer("c2", 0, NULL);
	CHECK_STR_EQ(take(), "P:c2 R:A(c1 c2)");
	CHECK_COUNTS(0, 1, 0, 3);
	/* A's fetch of the shared claim fails: B's claim is fetched for B. */
	reset(3);
	call("A", "c1");
	call("B", "c1");
	CHECK_STR_EQ(take(), "F:c1");
	answer("c1", -EIO, NULL);
	CHECK_STR_EQ(take(), "W:c1 R:A(-c1) F:c1");
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "P:c1 R:B(c1)");
	CHECK_COUNTS(0, 0, 1, 1);
}

/* At most N fetches out, calls served in the order they came. */
static void test_limit(void)
{
	reset(3);
	call("A", "c1 c2 c3 c4 c5");
	CHECK_STR_EQ(take(), "F:c1 F:c2 F:c3");
	call("B", "c6");
	CHECK_STR_EQ(take(), "");
	CHECK_INT_EQ(f.m.fetching, 3);
	answer("c2", 0, NULL);
	CHECK_STR_EQ(take(), "P:c2 F:c4");
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "P:c1 F:c5");
	answer("c3", 0, NULL);
	CHECK_STR_EQ(take(), "P:c3 F:c6");
	answer("c6", 0, NULL);
	CHECK_STR_EQ(take(), "P:c6 R:B(c6)");
	answer("c5", 0, NULL);
	CHECK_STR_EQ(take(), "P:c5");
	answer("c4", 0, NULL);
	CHECK_STR_EQ(take(), "P:c4 R:A(c1 c2 c3 c4 c5)");
	CHECK_INT_EQ(f.max_out, 3);
	CHECK_INT_EQ(f.m.fetching, 0);
	CHECK_COUNTS(0, 0, 0, 6);
	/* One at a time: three calls, each after the one before. */
	reset(1);
	call("A", "c1");
	call("B", "c2");
	call("C", "c3 c4");
	CHECK_STR_EQ(take(), "F:c1");
	answer("c1", 0, NULL);
	answer("c2", 0, NULL);
	answer("c3", 0, NULL);
	answer("c4", 0, NULL);
	CHECK_STR_EQ(take(), "P:c1 R:A(c1) F:c2 P:c2 R:B(c2) F:c3 P:c3 F:c4 P:c4 R:C(c3 c4)");
	CHECK_INT_EQ(f.max_out, 1);
}

/* A fetch that cannot start: that claim given up with the reason, the others go on. */
static void test_fetch_start_fails(void)
{
	char want[HPN_DRA_PREP_ERR_MAX];

	reset(1);
	snprintf(f.fail_uid, sizeof(f.fail_uid), "c2");
	f.fail_r = -ENOTCONN;
	call("A", "c1 c2 c3");
	CHECK_STR_EQ(take(), "F:c1");
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "P:c1 F:c2! F:c3");
	CHECK_INT_EQ(f.m.fetching, 1);
	answer("c3", 0, NULL);
	CHECK_STR_EQ(take(), "P:c3 R:A(c1 -c2 c3)");
	snprintf(want, sizeof(want), "claim ml/c2: not prepared: %s", strerror(ENOTCONN));
	CHECK_STR_EQ(f.errs[1], want);
	CHECK_COUNTS(1, 0, 0, 2);
	/* Every claim's fetch fails at once: replied to within the submit. */
	reset(2);
	snprintf(f.fail_uid, sizeof(f.fail_uid), "c1");
	f.fail_r = -ENOTCONN;
	call("A", "c1");
	CHECK_STR_EQ(take(), "F:c1! R:A(-c1)");
	CHECK(f.m.calls == NULL);
}

/* Fetch errors: each claim's message, logged through fetch_failed; the preparation's own. */
static void test_fetch_errors(void)
{
	struct hpn_err e1 = { .msg = "ResourceClaim ml/c1: not found" };
	struct hpn_err e2 = { .msg = "GET failed", .details = "HTTP 500" };
	struct hpn_err e4 = { .msg = "ResourceClaim ml/c4: uid is x" };
	char want[HPN_DRA_PREP_ERR_MAX];

	reset(1);
	snprintf(f.bad_uid, sizeof(f.bad_uid), "c5");
	call("A", "c1 c2 c3 c4 c5");
	answer("c1", -ENOENT, &e1);
	answer("c2", -EIO, &e2);
	answer("c3", -ETIMEDOUT, NULL);
	answer("c4", -ESTALE, &e4);
	answer("c5", 0, NULL);
	CHECK_STR_EQ(take(), "F:c1 W:c1 F:c2 W:c2 F:c3 W:c3 F:c4 W:c4 F:c5 P:c5! "
			     "R:A(-c1 -c2 -c3 -c4 -c5)");
	CHECK_STR_EQ(f.errs[0], "claim ml/c1: ResourceClaim ml/c1: not found");
	CHECK_STR_EQ(f.errs[1], "claim ml/c2: GET failed: HTTP 500");
	snprintf(want, sizeof(want), "claim ml/c3: %s", strerror(ETIMEDOUT));
	CHECK_STR_EQ(f.errs[2], want);
	CHECK_STR_EQ(f.errs[3], "claim ml/c4 (c4): the claim in the API is another one (recreated "
				"under its name, or gone): ResourceClaim ml/c4: uid is x");
	CHECK_STR_EQ(f.errs[4], "claim ml/c5: bad device");
	CHECK(rec_find("c5") == NULL);
	CHECK_COUNTS(0, 0, 5, 0);
}

/* The kubelet gone mid-call: the fetch out is still consumed, no other fetched, no reply. */
static void test_gone(void)
{
	struct hpn_dra_prep_call *a;

	reset(1);
	a = call("A", "c1 c2 c3");
	call("B", "c4");
	CHECK_STR_EQ(take(), "F:c1");
	hpn_dra_prep_gone(a);
	CHECK_STR_EQ(take(), "");
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "P:c1 F:c4");
	CHECK(rec_find("c1") != NULL); /* its record answers the kubelet's next call */
	answer("c4", 0, NULL);
	CHECK_STR_EQ(take(), "P:c4 R:B(c4)");
	CHECK(f.m.calls == NULL);
	CHECK_COUNTS(0, 0, 0, 1);
	/* Gone while its claim waits for another call's fetch of the same UID: given up anyway. */
	reset(3);
	call("A", "c1");
	a = call("B", "c1 c2");
	CHECK_STR_EQ(take(), "F:c1 F:c2");
	hpn_dra_prep_gone(a);
	answer("c2", 0, NULL);
	CHECK_STR_EQ(take(), "P:c2");
	CHECK(f.m.calls != NULL && f.m.calls->next == NULL); /* B done, only A left */
	answer("c1", -EIO, NULL);
	CHECK_STR_EQ(take(), "W:c1 R:A(-c1)");
	CHECK_COUNTS(0, 0, 1, 0);
}

/* The driver stopping: the fetch out answers that it stops, waiting claims are given up. */
static void test_stop(void)
{
	reset(1);
	rec_add("r1", "r1");
	call("A", "c1 c2");
	CHECK_STR_EQ(take(), "F:c1");
	hpn_dra_prep_stop(&f.m);
	CHECK_STR_EQ(take(), "");
	call("B", "r1 c3");
	CHECK_STR_EQ(take(), "L:r1");
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "R:A(-c1 -c2) R:B(r1 -c3)");
	CHECK_STR_EQ(f.errs[1], "claim ml/c3: not prepared: hpn-rdma-agent is stopping");
	CHECK(rec_find("c1") == NULL);
	call("C", "c5");
	CHECK_STR_EQ(take(), "R:C(-c5)");
	CHECK_STR_EQ(f.errs[0], "claim ml/c5: not prepared: hpn-rdma-agent is stopping");
	CHECK_COUNTS(3, 1, 1, 0);
	/* Room for a fetch (B's c1 waits for A's): given up as soon as the driver stops. */
	reset(3);
	call("A", "c1");
	call("B", "c1 c2");
	CHECK_STR_EQ(take(), "F:c1 F:c2");
	hpn_dra_prep_stop(&f.m);
	CHECK_STR_EQ(take(), "");
	CHECK(f.m.calls && f.m.calls->next && f.m.calls->next->v[0].state == HPN_DRA_PREP_DONE);
	answer("c2", 0, NULL);
	CHECK_STR_EQ(take(), "R:B(-c1 -c2)");
	CHECK_STR_EQ(f.errs[0], "claim ml/c1: not prepared: hpn-rdma-agent is stopping");
	CHECK_STR_EQ(f.errs[1], "claim ml/c2: hpn-rdma-agent is stopping");
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "R:A(-c1)");
	CHECK(f.m.calls == NULL);
	CHECK_COUNTS(1, 0, 2, 0);
}

/* Out of memory starting a fetch: the retry asked for, nothing lost, fetched on the pump. */
static void test_nomem(void)
{
	reset(1);
	f.nomem = 2;
	call("A", "c1 c2");
	CHECK_STR_EQ(take(), "F:c1~ T");
	CHECK_INT_EQ(f.m.fetching, 0);
	hpn_dra_prep_pump(&f.m);
	CHECK_STR_EQ(take(), "F:c1~ T");
	hpn_dra_prep_pump(&f.m);
	CHECK_STR_EQ(take(), "F:c1");
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "P:c1 F:c2");
	answer("c2", 0, NULL);
	CHECK_STR_EQ(take(), "P:c2 R:A(c1 c2)");
	CHECK_COUNTS(0, 0, 0, 2);
	/* Stopped while it waits for the retry: answered, no fetch. */
	reset(1);
	f.nomem = 1;
	call("A", "c1");
	CHECK_STR_EQ(take(), "F:c1~ T");
	hpn_dra_prep_stop(&f.m);
	CHECK_STR_EQ(take(), "R:A(-c1)");
	CHECK_COUNTS(1, 0, 0, 0);
}

/* A record freed while its call waits (Unprepare): that claim answers with no record. */
static void test_forget(void)
{
	struct frec *r;

	reset(1);
	r = rec_add("r1", "r1");
	call("A", "r1 c1");
	CHECK_STR_EQ(take(), "L:r1 F:c1");
	r->live = false;
	hpn_dra_prep_forget(&f.m, r);
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "P:c1 R:A(-r1 c1)");
	CHECK_STR_EQ(f.errs[0], "");
	CHECK_COUNTS(1, 0, 0, 1);
}

/*
 * A record of the claim made while its fetch was out, not by this machine
 * (the owner's other paths): the fetched claim answered from it, not prepared twice.
 */
static void test_meanwhile(void)
{
	reset(1);
	call("A", "c1 c2");
	CHECK_STR_EQ(take(), "F:c1");
	rec_add("c1", "c1");
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "L:c1 F:c2");
	answer("c2", 0, NULL);
	CHECK_STR_EQ(take(), "P:c2 R:A(c1 c2)");
	CHECK_COUNTS(0, 0, 0, 2); /* fetched, so "api" */
}

/* Fetches that answer before they return (a cache, a fake): the same order, nothing twice. */
static void test_sync(void)
{
	reset(1);
	f.sync = true;
	call("A", "c1 c2 c3");
	CHECK_STR_EQ(take(), "F:c1 P:c1 F:c2 P:c2 F:c3 P:c3 R:A(c1 c2 c3)");
	call("B", "c1 c4");
	CHECK_STR_EQ(take(), "L:c1 F:c4 P:c4 R:B(c1 c4)");
	CHECK_INT_EQ(f.m.fetching, 0);
	CHECK(f.m.calls == NULL);
	CHECK_COUNTS(0, 1, 0, 4);
	reset(2);
	f.sync = true;
	call("A", "c1 c2");
	call("B", "c3");
	CHECK_STR_EQ(take(), "F:c1 P:c1 F:c2 P:c2 R:A(c1 c2) F:c3 P:c3 R:B(c3)");
}

/* A result reported twice, or for no claim being fetched: ignored. */
static void test_once(void)
{
	struct hpn_dra_prep_call *a;

	reset(1);
	a = call("A", "c1 c2");
	CHECK_STR_EQ(take(), "F:c1");
	answer("c1", 0, NULL);
	CHECK_STR_EQ(take(), "P:c1 F:c2");
	hpn_dra_prep_fetched(&f.m, a, 0, -EIO, NULL, NULL); /* c1 again */
	hpn_dra_prep_fetched(&f.m, a, 2, 0, NULL, NULL);    /* no claim 2 */
	CHECK_STR_EQ(take(), "");
	CHECK_INT_EQ(f.m.fetching, 1);
	answer("c2", 0, NULL);
	CHECK_STR_EQ(take(), "P:c2 R:A(c1 c2)");
	CHECK_COUNTS(0, 0, 0, 2);
	/* A call of no claims: replied to at once. */
	call("E", "");
	CHECK_STR_EQ(take(), "R:E()");
}

/* Calls still queued at the end are freed with no op called (LeakSanitizer would tell). */
static void test_free(void)
{
	reset(1);
	call("A", "c1 c2");
	call("B", "c3");
	CHECK_STR_EQ(take(), "F:c1");
	hpn_dra_prep_free(&f.m);
	CHECK_STR_EQ(take(), "");
	CHECK(f.m.calls == NULL);
	CHECK_INT_EQ(f.m.fetching, 0);
}

int main(void)
{
	test_in_order();
	test_records();
	test_shared_one();
	test_shared_three();
	test_limit();
	test_fetch_start_fails();
	test_fetch_errors();
	test_gone();
	test_stop();
	test_nomem();
	test_forget();
	test_meanwhile();
	test_sync();
	test_once();
	test_free();
	hpn_dra_prep_free(&f.m);
	return check_done();
}
