// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's event loop (loop.h): epoll, timerfds, deferred calls and the
 * worker thread. Nothing here knows a service.
 *
 * The worker takes no lock of the loop's and the loop never waits for it:
 * a job carries everything the worker reads, an eventfd hands it back, and
 * only the loop touches the services' state.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "util.h"

#define EXIT_POLL_MS 200
#define BATCH	     16 /* events taken from epoll per round */

struct work {
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* Queued, by priority, each in the order posted (FIFO: head, *tail). */
	struct loop_job *queue[LOOP_PRIOS], **tail[LOOP_PRIOS];
	struct loop_job *doing;
	struct loop_job *done, **done_tail; /* finished, for the loop, in that order */
	bool stop, idle;
	struct loop_src efd;
};

struct loop {
	int epfd;
	/*
	 * The round being dispatched: a source closed or muted meanwhile has its
	 * entries cleared, so a callback may free another source of the round.
	 */
	struct epoll_event batch[BATCH];
	int n_batch;
	struct loop_defer *deferred;
	bool exiting;
	struct timespec exit_at;
	bool (*idle)(void *ud);
	void *idle_ud;
	struct work *work;
};

/* The time ms from now on clock id. */
static struct timespec after_ms(clockid_t id, int ms)
{
	struct timespec t;

	clock_gettime(id, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

int loop_new(struct loop **ret)
{
	struct loop *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		int e = errno;

		free(l);
		return -e;
	}
	*ret = l;
	return 0;
}

/* s watching fd for events (0: nothing until loop_watch); -errno, s->fd -1, fd left open. */
static int add(struct loop *l, struct loop_src *s, int fd, uint32_t events,
	       void (*fn)(struct loop_src *s), void *ud)
{
	struct epoll_event ev = { .events = events, .data.ptr = s };

	s->fd = fd;
	s->fn = fn;
	s->ud = ud;
	s->timer = false;
	s->loop = l;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		s->fd = -1;
		return -errno;
	}
	return 0;
}

int loop_add(struct loop *l, struct loop_src *s, int fd, void (*fn)(struct loop_src *s), void *ud)
{
	int r = add(l, s, fd, EPOLLIN, fn, ud);

	if (r < 0)
		close(fd);
	return r;
}

int loop_borrow(struct loop *l, struct loop_src *s, int fd, void (*fn)(struct loop_src *s),
		void *ud)
{
	return add(l, s, fd, 0, fn, ud);
}

int loop_watch(struct loop *l, struct loop_src *s, unsigned int events)
{
	struct epoll_event ev = { .data.ptr = s };

	if (!events) {
		loop_mute(l, s);
		return 0;
	}
	if (s->fd < 0)
		return -EBADF;
	ev.events = ((events & LOOP_IN) ? EPOLLIN : 0) | ((events & LOOP_OUT) ? EPOLLOUT : 0);
	/* Muted before: no longer in the set, added again. */
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, s->fd, &ev) < 0 &&
	    (errno != ENOENT || epoll_ctl(l->epfd, EPOLL_CTL_ADD, s->fd, &ev) < 0))
		return -errno;
	return 0;
}

void loop_timer_set(struct loop_src *s, int first_ms, int every_ms)
{
	struct itimerspec it = { 0 }; /* LOOP_OFF: all zero, which disarms */

	if (first_ms >= 0) {
		it.it_value.tv_sec = first_ms / 1000;
		it.it_value.tv_nsec = (first_ms % 1000) * 1000000L;
		/* A timerfd's it_value of 0 disarms: "now" is the smallest time instead. */
		if (first_ms == 0)
			it.it_value.tv_nsec = 1;
		if (every_ms > 0) {
			it.it_interval.tv_sec = every_ms / 1000;
			it.it_interval.tv_nsec = (every_ms % 1000) * 1000000L;
		}
	}
	if (s->fd >= 0)
		timerfd_settime(s->fd, 0, &it, NULL);
}

int loop_timer(struct loop *l, struct loop_src *s, int first_ms, int every_ms,
	       void (*fn)(struct loop_src *s), void *ud)
{
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	int r;

	if (fd < 0) {
		s->fd = -1;
		return -errno;
	}
	r = loop_add(l, s, fd, fn, ud);
	if (r < 0)
		return r;
	s->timer = true;
	loop_timer_set(s, first_ms, every_ms);
	return 0;
}

/* The round being dispatched forgets s: its later events there are not delivered. */
static void forget(struct loop *l, const struct loop_src *s)
{
	for (int i = 0; l && i < l->n_batch; i++)
		if (l->batch[i].data.ptr == s)
			l->batch[i].data.ptr = NULL;
}

void loop_mute(struct loop *l, struct loop_src *s)
{
	if (s->fd >= 0)
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, s->fd, NULL);
	forget(l, s);
}

void loop_close(struct loop_src *s)
{
	if (!s)
		return;
	/* Closing the last fd of a file takes it out of every epoll set. */
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	forget(s->loop, s);
	s->loop = NULL;
}

void loop_defer(struct loop *l, struct loop_defer *d)
{
	if (d->queued)
		return;
	d->queued = true;
	d->next = l->deferred;
	l->deferred = d;
}

static void run_deferred(struct loop *l)
{
	while (l->deferred) {
		struct loop_defer *d = l->deferred;

		l->deferred = d->next;
		d->queued = false;
		d->fn(d->ud);
	}
}

void loop_exit(struct loop *l, int grace_ms, bool (*idle)(void *ud), void *ud)
{
	l->exit_at = after_ms(CLOCK_MONOTONIC, grace_ms);
	l->exiting = true;
	l->idle = idle;
	l->idle_ud = ud;
}

bool loop_exiting(const struct loop *l)
{
	return l->exiting;
}

static bool past(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

static void dispatch(struct loop_src *s, uint32_t events)
{
	uint64_t ticks;

	if (!s || s->fd < 0)
		return;
	if (s->timer && read(s->fd, &ticks, sizeof(ticks)) < 0)
		return;
	s->revents = (events & (EPOLLERR | EPOLLHUP)) ? LOOP_IN | LOOP_OUT : 0;
	s->revents |= ((events & EPOLLIN) ? LOOP_IN : 0) | ((events & EPOLLOUT) ? LOOP_OUT : 0);
	s->fn(s);
}

int loop_run(struct loop *l)
{
	for (;;) {
		int n;

		if (l->exiting && (!l->idle || l->idle(l->idle_ud)))
			return 0;
		if (l->exiting && past(&l->exit_at))
			return -ETIMEDOUT;
		n = epoll_wait(l->epfd, l->batch, BATCH, l->exiting ? EXIT_POLL_MS : -1);
		if (n < 0 && errno != EINTR)
			return -errno;
		/* Read from l->batch each time: a callback may clear what follows. */
		l->n_batch = n > 0 ? n : 0;
		for (int i = 0; i < l->n_batch; i++)
			dispatch(l->batch[i].data.ptr, l->batch[i].events);
		l->n_batch = 0;
		run_deferred(l);
	}
}

/* ---- the worker ----------------------------------------------------------------- */

/* The first job of the highest priority queued, taken off its queue (under w->lock). */
static struct loop_job *take(struct work *w)
{
	for (int p = 0; p < LOOP_PRIOS; p++) {
		struct loop_job *j = w->queue[p];

		if (!j)
			continue;
		w->queue[p] = j->next;
		if (!w->queue[p])
			w->tail[p] = &w->queue[p];
		j->next = NULL;
		return j;
	}
	return NULL;
}

static void *worker(void *arg)
{
	struct work *w = arg;
	uint64_t one = 1;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		double t0;

		while (!w->stop && !(w->doing = take(w)))
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->stop)
			break;
		pthread_mutex_unlock(&w->lock);
		t0 = hpn_mono_s();
		w->doing->run(w->doing);
		w->doing->seconds = hpn_mono_s() - t0;
		pthread_mutex_lock(&w->lock);
		*w->done_tail = w->doing;
		w->done_tail = &w->doing->next;
		w->doing = NULL;
		if (write(w->efd.fd, &one, sizeof(one)) < 0)
			hpn_warn("worker: eventfd: %s", strerror(errno));
	}
	w->idle = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Hands each job of list back (done), in order; a done may post again meanwhile. */
static void hand_back(struct loop_job *list)
{
	while (list) {
		struct loop_job *j = list;

		list = j->next;
		j->next = NULL;
		j->done(j);
	}
}

/* The loop's side: finished jobs go back to whoever posted them. */
static void work_done(struct loop_src *s)
{
	struct work *w = s->ud;
	struct loop_job *list;
	uint64_t n;

	if (read(s->fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		hpn_warn("worker: eventfd: %s", strerror(errno));
	pthread_mutex_lock(&w->lock);
	list = w->done;
	w->done = NULL;
	w->done_tail = &w->done;
	pthread_mutex_unlock(&w->lock);
	hand_back(list);
}

int loop_work_start(struct loop *l)
{
	struct work *w = calloc(1, sizeof(*w));
	int fd, r;

	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	for (int p = 0; p < LOOP_PRIOS; p++)
		w->tail[p] = &w->queue[p];
	w->done_tail = &w->done;
	w->efd.fd = -1;
	l->work = w;
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	r = loop_add(l, &w->efd, fd, work_done, w);
	if (r < 0)
		return r;
	r = pthread_create(&w->thread, NULL, worker, w);
	if (r)
		return -r;
	w->started = true;
	return 0;
}

int loop_work_post(struct loop *l, struct loop_job *j, enum loop_prio prio)
{
	struct work *w = l->work;
	int r = 0;

	if ((unsigned int)prio >= LOOP_PRIOS)
		return -EINVAL;
	if (!w || !w->started)
		return -ENOTCONN;
	j->cancelled = false;
	j->next = NULL;
	pthread_mutex_lock(&w->lock);
	if (w->stop) {
		r = -ENOTCONN;
	} else {
		*w->tail[prio] = j;
		w->tail[prio] = &j->next;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return r;
}

void loop_work_stop(struct loop *l, int grace_ms)
{
	struct work *w = l->work;
	struct timespec until;

	if (!w)
		return;
	if (w->started) {
		bool idle;

		/* pthread_cond_timedwait's clock is CLOCK_REALTIME. */
		until = after_ms(CLOCK_REALTIME, grace_ms);
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_cond_broadcast(&w->cond);
		while (!w->idle && pthread_cond_timedwait(&w->cond, &w->lock, &until) == 0)
			;
		idle = w->idle;
		pthread_mutex_unlock(&w->lock);
		if (!idle) {
			/*
			 * A CHECK or GC still running: exiting now is what a kill at
			 * any instruction would be, which the journals are made for.
			 */
			hpn_warn("the worker is still busy after %d ms: leaving it", grace_ms);
			pthread_detach(w->thread);
			/* w, its jobs and its eventfd stay for the thread until exit */
			l->work = NULL;
			return;
		}
		pthread_join(w->thread, NULL);
	}
	/* The finished first, then the never run, by priority: done for each, once. */
	hand_back(w->done);
	for (int p = 0; p < LOOP_PRIOS; p++)
		for (struct loop_job *j = w->queue[p]; j; j = j->next)
			j->cancelled = true;
	for (int p = 0; p < LOOP_PRIOS; p++) {
		struct loop_job *list = w->queue[p];

		w->queue[p] = NULL;
		hand_back(list);
	}
	loop_close(&w->efd);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
	l->work = NULL;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	loop_work_stop(l, 0);
	if (l->epfd >= 0)
		close(l->epfd);
	free(l);
}
