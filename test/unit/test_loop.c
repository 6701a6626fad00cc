// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for agent/core/loop.c, the agent's event loop: a source closed or
 * muted by a callback of the round that holds its event is not called in
 * that round (freed, it would be a use after free, which ASan reports);
 * a timer's 0 is "now" and LOOP_OFF is off; the worker's queue runs the
 * highest priority first, each in the order posted, hands every job back on
 * the loop's thread, and at stop hands back the ones never run, cancelled.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "loop.h"
#include "util.h"

/* Two readable pipes in one round; whichever runs first disposes of the other. */
struct pair_src {
	struct loop_src src;
	struct loop *l;
	int wfd;
	struct pair_src **other;
	int *calls;
	bool free_other; /* else mute it */
};

static void pair_free(struct pair_src *p)
{
	if (!p)
		return;
	loop_close(&p->src);
	close(p->wfd);
	free(p);
}

static void pair_fn(struct loop_src *s)
{
	struct pair_src *p = s->ud;
	struct pair_src *o = *p->other;

	(*p->calls)++;
	if (o) {
		if (p->free_other) {
			pair_free(o);
			*p->other = NULL;
		} else {
			loop_mute(o->l, &o->src);
		}
	}
	loop_exit(p->l, 0, NULL, NULL);
}

static struct pair_src *pair_new(struct loop *l, int *calls, bool free_other)
{
	struct pair_src *p = calloc(1, sizeof(*p));
	int fds[2];

	if (!p || pipe(fds) < 0)
		abort();
	p->l = l;
	p->wfd = fds[1];
	p->calls = calls;
	p->free_other = free_other;
	if (loop_add(l, &p->src, fds[0], pair_fn, p) < 0)
		abort();
	if (write(p->wfd, "x", 1) != 1)
		abort();
	return p;
}

static void test_closed_in_round(bool free_other)
{
	struct loop *l = NULL;
	struct pair_src *a, *b;
	int calls = 0;

	CHECK_INT_EQ(loop_new(&l), 0);
	a = pair_new(l, &calls, free_other);
	b = pair_new(l, &calls, free_other);
	a->other = &b;
	b->other = &a;
	CHECK_INT_EQ(loop_run(l), 0);
	/* Both were readable in the one round; the other was disposed of first. */
	CHECK_INT_EQ(calls, 1);
	CHECK((a == NULL) != (b == NULL) || !free_other);
	pair_free(a);
	pair_free(b);
	loop_free(l);
}

struct tick {
	struct loop_src src;
	struct loop *l;
	int calls;
	struct tick *arm; /* armed with 0 by this one's call */
};

static void tick_fn(struct loop_src *s)
{
	struct tick *t = s->ud;

	t->calls++;
	if (t->arm)
		loop_timer_set(&t->arm->src, 0, 0);
}

static void stop_fn(struct loop_src *s)
{
	struct tick *t = s->ud;

	t->calls++;
	loop_exit(t->l, 0, NULL, NULL);
}

/* 0 fires at once (a timerfd's 0 would disarm); LOOP_OFF never does. */
static void test_timer_zero_and_off(void)
{
	struct loop *l = NULL;
	struct tick now = { 0 }, off = { 0 }, disarmed = { 0 }, armed = { 0 }, end = { 0 };

	CHECK_INT_EQ(loop_new(&l), 0);
	now.l = off.l = disarmed.l = armed.l = end.l = l;
	now.arm = &armed;
	CHECK_INT_EQ(loop_timer(l, &now.src, 0, 0, tick_fn, &now), 0);
	CHECK_INT_EQ(loop_timer(l, &off.src, LOOP_OFF, 0, tick_fn, &off), 0);
	CHECK_INT_EQ(loop_timer(l, &armed.src, LOOP_OFF, 0, tick_fn, &armed), 0);
	CHECK_INT_EQ(loop_timer(l, &disarmed.src, 50, 50, tick_fn, &disarmed), 0);
	loop_timer_set(&disarmed.src, LOOP_OFF, 0);
	CHECK_INT_EQ(loop_timer(l, &end.src, 300, 0, stop_fn, &end), 0);
	CHECK_INT_EQ(loop_run(l), 0);
	CHECK_INT_EQ(now.calls, 1);
	CHECK_INT_EQ(armed.calls, 1); /* loop_timer_set(.., 0, 0) from a callback */
	CHECK_INT_EQ(off.calls, 0);
	CHECK_INT_EQ(disarmed.calls, 0);
	CHECK_INT_EQ(end.calls, 1);
	loop_close(&now.src);
	loop_close(&off.src);
	loop_close(&armed.src);
	loop_close(&disarmed.src);
	loop_close(&end.src);
	loop_free(l);
}

/* ---- the worker's queue ---------------------------------------------------------- */

#define MAX_JOBS 16

struct log {
	pthread_mutex_t lock;
	char ran[MAX_JOBS + 1]; /* names, in the order run */
	char done[MAX_JOBS + 1];
	int n_ran, n_done, n_cancelled, off_loop, want;
	pthread_t loop_thread;
	struct loop *l;
	int gate[2];	/* the gate job waits for a byte on it */
	int started[2]; /* the first job says it runs */
};

struct tjob {
	struct loop_job job; /* first */
	struct log *log;
	char name;
	bool first, gate;
	int sleep_ms;
	struct tjob *then; /* posted from done, at LOOP_PRIO_API */
};

static void tjob_run(struct loop_job *lj)
{
	struct tjob *j = (struct tjob *)lj;
	char c;

	if (j->first && write(j->log->started[1], "s", 1) != 1)
		abort();
	if (j->gate && read(j->log->gate[0], &c, 1) != 1)
		abort();
	if (j->sleep_ms)
		usleep((useconds_t)j->sleep_ms * 1000);
	pthread_mutex_lock(&j->log->lock);
	j->log->ran[j->log->n_ran++] = j->name;
	pthread_mutex_unlock(&j->log->lock);
}

static void tjob_done(struct loop_job *lj)
{
	struct tjob *j = (struct tjob *)lj;
	struct log *log = j->log;

	log->off_loop += !pthread_equal(pthread_self(), log->loop_thread);
	log->n_cancelled += lj->cancelled;
	log->done[log->n_done++] = j->name;
	if (j->then && loop_work_post(log->l, &j->then->job, LOOP_PRIO_API) < 0)
		free(j->then);
	free(j);
	if (log->n_done == log->want)
		loop_exit(log->l, 0, NULL, NULL);
}

static struct tjob *tjob(struct log *log, char name)
{
	struct tjob *j = calloc(1, sizeof(*j));

	if (!j)
		abort();
	j->job.run = tjob_run;
	j->job.done = tjob_done;
	j->log = log;
	j->name = name;
	return j;
}

static void log_init(struct log *log, struct loop *l, int want)
{
	memset(log, 0, sizeof(*log));
	pthread_mutex_init(&log->lock, NULL);
	log->loop_thread = pthread_self();
	log->l = l;
	log->want = want;
	if (pipe(log->gate) < 0 || pipe(log->started) < 0)
		abort();
}

/* Until the first job runs: the worker has taken it, the rest queue behind. */
static void log_wait_started(struct log *log)
{
	char c;

	if (read(log->started[0], &c, 1) != 1)
		abort();
}

static void log_fini(struct log *log)
{
	close(log->gate[0]);
	close(log->gate[1]);
	close(log->started[0]);
	close(log->started[1]);
	pthread_mutex_destroy(&log->lock);
}

/*
 * Posted while the gate job runs: the API's first, then the host's, each in
 * the order posted; a job posted from a done (on the loop) while the worker
 * runs another goes in after it, ahead of the host's still queued.
 */
static void test_queue_order(void)
{
	struct loop *l = NULL;
	struct log log;
	struct tjob *g, *x;
	static const struct {
		char name;
		enum loop_prio prio;
	} posts[] = {
		{ 'h', LOOP_PRIO_HOST }, { 'a', LOOP_PRIO_API }, { 'b', LOOP_PRIO_API },
		{ 'i', LOOP_PRIO_HOST }, { 'c', LOOP_PRIO_API }, { 'j', LOOP_PRIO_HOST },
	};

	CHECK_INT_EQ(loop_new(&l), 0);
	log_init(&log, l, 1 + (int)HPN_ARRAY_SIZE(posts) + 1);
	CHECK_INT_EQ(loop_work_start(l), 0);
	g = tjob(&log, 'G');
	g->gate = g->first = true;
	CHECK_INT_EQ(loop_work_post(l, &g->job, LOOP_PRIO_HOST), 0);
	log_wait_started(&log);
	for (size_t i = 0; i < HPN_ARRAY_SIZE(posts); i++) {
		struct tjob *j = tjob(&log, posts[i].name);

		/* h's done posts Z: the worker is at i by then (i lasts), Z goes before j. */
		if (j->name == 'h')
			j->then = tjob(&log, 'Z');
		if (j->name == 'i')
			j->sleep_ms = 200;
		CHECK_INT_EQ(loop_work_post(l, &j->job, posts[i].prio), 0);
	}
	x = tjob(&log, 'x');
	CHECK_INT_EQ(loop_work_post(l, &x->job, LOOP_PRIOS), -EINVAL);
	free(x);
	if (write(log.gate[1], "x", 1) != 1)
		abort();
	CHECK_INT_EQ(loop_run(l), 0);
	CHECK_STR_EQ(log.ran, "GabchiZj");
	CHECK_STR_EQ(log.done, "GabchiZj");
	CHECK_INT_EQ(log.off_loop, 0);
	CHECK_INT_EQ(log.n_cancelled, 0);
	loop_work_stop(l, 1000);
	x = tjob(&log, 'x');
	CHECK_INT_EQ(loop_work_post(l, &x->job, LOOP_PRIO_HOST), -ENOTCONN);
	free(x);
	loop_free(l);
	log_fini(&log);
}

/*
 * Stopped while a job runs and others wait: the running one finishes and is
 * handed back, the waiting ones are handed back cancelled, never run, each
 * once (ASan: none leaks).
 */
static void test_queue_stop(void)
{
	struct loop *l = NULL;
	struct log log;
	struct tjob *g;

	CHECK_INT_EQ(loop_new(&l), 0);
	log_init(&log, l, 4);
	CHECK_INT_EQ(loop_work_start(l), 0);
	g = tjob(&log, 'G');
	g->sleep_ms = 300; /* running when the stop comes */
	g->first = true;
	CHECK_INT_EQ(loop_work_post(l, &g->job, LOOP_PRIO_HOST), 0);
	log_wait_started(&log);
	CHECK_INT_EQ(loop_work_post(l, &tjob(&log, 'h')->job, LOOP_PRIO_HOST), 0);
	CHECK_INT_EQ(loop_work_post(l, &tjob(&log, 'a')->job, LOOP_PRIO_API), 0);
	CHECK_INT_EQ(loop_work_post(l, &tjob(&log, 'b')->job, LOOP_PRIO_API), 0);
	loop_work_stop(l, 5000);
	CHECK_STR_EQ(log.ran, "G");
	CHECK_STR_EQ(log.done, "Gabh");
	CHECK_INT_EQ(log.n_cancelled, 3);
	CHECK_INT_EQ(log.off_loop, 0);
	loop_free(l);
	log_fini(&log);
}

int main(void)
{
	test_closed_in_round(true);
	test_closed_in_round(false);
	test_timer_zero_and_off();
	test_queue_order();
	test_queue_stop();
	return check_done();
}
