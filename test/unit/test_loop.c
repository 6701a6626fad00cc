// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for agent/loop.c, the agent's event loop: a source closed or
 * muted by a callback of the round that holds its event is not called in
 * that round (freed, it would be a use after free, which ASan reports).
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

int main(void)
{
	test_closed_in_round(true);
	test_closed_in_round(false);
	return check_done();
}
