// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for agent/loop.c, the agent's event loop: a source closed or
 * muted by a callback of the round that holds its event is not called in
 * that round (freed, it would be a use after free, which ASan reports);
 * a timer's 0 is "now" and LOOP_OFF is off.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "loop.h"

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

int main(void)
{
	test_closed_in_round(true);
	test_closed_in_round(false);
	test_timer_zero_and_off();
	return check_done();
}
