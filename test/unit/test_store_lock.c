// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for hpn_store_lock's wait in a process with threads, as in the
 * agent: the timeout ends the wait with code 11 in about the time asked
 * while SIGALRM is blocked in the waiting thread, and no signal or
 * process-wide timer takes part (the test's own SIGALRM disposition stays,
 * no ITIMER_REAL is armed during the wait, no SIGALRM is sent); two threads
 * that wait at once both time out on their own, or one takes the lock when
 * its holder lets go and the other after that one.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/file.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "store.h"
#include "tmpdir.h"

#define WATCHDOG_MS 3000 /* a wait that never ends is ended here, and fails */

static char tmp[64]; /* "/tmp/hpn-unit-store_lock-XXXXXX" */
static char state[PATH_MAX], lock_path[PATH_MAX + 16];

static atomic_int alarms; /* SIGALRMs the test's own handler saw */

static void on_alarm(int sig)
{
	(void)sig;
	atomic_fetch_add(&alarms, 1);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The lock held through an open file description of the test's own (flock is per description). */
static int hold(void)
{
	int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	CHECK(fd >= 0);
	CHECK_INT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
	return fd;
}

/*
 * Watches the process while a wait runs, from a thread with SIGALRM
 * unblocked (where a process-wide alarm would land, as in the agent's
 * worker): ITIMER_REAL never armed, the SIGALRM disposition never another
 * than the test's. At WATCHDOG_MS it lets the holder go, so that a wait
 * that would never end returns (and is seen to have taken too long).
 */
struct watch {
	atomic_bool stop;
	int holder_fd;
	int timer_armed, handler_swapped;
};

static void *watcher(void *arg)
{
	struct watch *w = arg;
	long long t0 = now_ms();
	sigset_t alrm;

	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
	while (!atomic_load(&w->stop)) {
		struct itimerval it;
		struct sigaction sa;

		if (getitimer(ITIMER_REAL, &it) == 0 && (it.it_value.tv_sec || it.it_value.tv_usec))
			w->timer_armed++;
		if (sigaction(SIGALRM, NULL, &sa) == 0 && sa.sa_handler != on_alarm)
			w->handler_swapped++;
		if (w->holder_fd >= 0 && now_ms() - t0 > WATCHDOG_MS) {
			close(w->holder_fd);
			w->holder_fd = -1;
		}
		sleep_ms(1);
	}
	return NULL;
}

static void watch_start(struct watch *w, pthread_t *t, int holder_fd)
{
	memset(w, 0, sizeof(*w));
	w->holder_fd = holder_fd;
	CHECK_INT_EQ(pthread_create(t, NULL, watcher, w), 0);
}

/* Stops the watcher; the holder's fd, unless the watchdog closed it, is still open. */
static void watch_end(struct watch *w, pthread_t t)
{
	atomic_store(&w->stop, true);
	pthread_join(t, NULL);
	CHECK_INT_EQ(w->timer_armed, 0);
	CHECK_INT_EQ(w->handler_swapped, 0);
	if (w->holder_fd >= 0)
		close(w->holder_fd);
	else
		fprintf(stderr, "\tthe watchdog released the lock after %d ms\n", WATCHDOG_MS);
	CHECK(w->holder_fd >= 0);
}

/* One waiter on a store of its own; what it got and when. */
struct waiter {
	int timeout_ms;
	int hold_ms; /* once it has the lock, kept this long */
	int r;
	struct hpn_err err;
	long long t_start, t_got, t_end;
};

static atomic_int inside; /* waiters holding the lock now: never more than one */
static atomic_int most_inside;

static void *waiter(void *arg)
{
	struct waiter *w = arg;
	struct hpn_store st = HPN_STORE_INIT;

	w->r = hpn_store_open(state, "net1", &st, &w->err);
	w->t_start = now_ms();
	if (w->r == 0)
		w->r = hpn_store_lock(&st, w->timeout_ms, &w->err);
	w->t_got = now_ms();
	if (w->r == 0) {
		int k = atomic_fetch_add(&inside, 1) + 1;

		if (k > atomic_load(&most_inside))
			atomic_store(&most_inside, k);
		sleep_ms(w->hold_ms);
		atomic_fetch_sub(&inside, 1);
	}
	w->t_end = now_ms();
	hpn_store_close(&st);
	return NULL;
}

/* The waiting thread (this one) has SIGALRM blocked: code 11 at the timeout all the same. */
static void test_timeout_alarm_blocked(void)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct itimerval it;
	struct sigaction sa;
	struct watch w;
	pthread_t t;
	sigset_t pending;
	long long t0, ms;
	int fd = hold();

	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	watch_start(&w, &t, fd);
	t0 = now_ms();
	CHECK_INT_EQ(hpn_store_lock(&st, 200, &err), -EAGAIN);
	ms = now_ms() - t0;
	watch_end(&w, t);
	CHECK_INT_EQ(err.code, HPN_E_TRY_AGAIN);
	CHECK_STR_HAS(err.msg, "200 ms");
	if (ms < 200 || ms > 1500)
		fprintf(stderr, "\ta lock timeout of 200 ms took %lld ms\n", ms);
	CHECK(ms >= 200);
	CHECK(ms <= 1500);
	hpn_store_close(&st);

	/* Nothing of SIGALRM's touched: no timer left, the handler the test's, none sent. */
	CHECK_INT_EQ(getitimer(ITIMER_REAL, &it), 0);
	CHECK(!it.it_value.tv_sec && !it.it_value.tv_usec);
	CHECK(!it.it_interval.tv_sec && !it.it_interval.tv_usec);
	CHECK_INT_EQ(sigaction(SIGALRM, NULL, &sa), 0);
	CHECK(sa.sa_handler == on_alarm);
	CHECK_INT_EQ(sa.sa_flags & SA_RESTART, SA_RESTART);
	CHECK_INT_EQ(sigpending(&pending), 0);
	CHECK(!sigismember(&pending, SIGALRM));
	CHECK_INT_EQ(atomic_load(&alarms), 0);

	/* Timeout 0: one try, at once. */
	memset(&err, 0, sizeof(err));
	fd = hold();
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	t0 = now_ms();
	CHECK_INT_EQ(hpn_store_lock(&st, 0, &err), -EAGAIN);
	CHECK(now_ms() - t0 < 500);
	CHECK_INT_EQ(err.code, HPN_E_TRY_AGAIN);
	hpn_store_close(&st);
	close(fd);
}

/* Two threads wait at once while the lock stays held: each times out on its own, in time. */
static void test_two_time_out(void)
{
	struct waiter a = { .timeout_ms = 150 }, b = { .timeout_ms = 300 };
	struct watch w;
	pthread_t ta, tb, t;
	int fd = hold();

	watch_start(&w, &t, fd);
	CHECK_INT_EQ(pthread_create(&ta, NULL, waiter, &a), 0);
	CHECK_INT_EQ(pthread_create(&tb, NULL, waiter, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	watch_end(&w, t);
	CHECK_INT_EQ(a.r, -EAGAIN);
	CHECK_INT_EQ(a.err.code, HPN_E_TRY_AGAIN);
	CHECK_INT_EQ(b.r, -EAGAIN);
	CHECK_INT_EQ(b.err.code, HPN_E_TRY_AGAIN);
	if (a.t_got - a.t_start < 150 || a.t_got - a.t_start > 1500 || b.t_got - b.t_start < 300 ||
	    b.t_got - b.t_start > 1500)
		fprintf(stderr, "\ttimeouts of 150 and 300 ms took %lld and %lld ms\n",
			a.t_got - a.t_start, b.t_got - b.t_start);
	CHECK(a.t_got - a.t_start >= 150);
	CHECK(a.t_got - a.t_start <= 1500);
	CHECK(b.t_got - b.t_start >= 300);
	CHECK(b.t_got - b.t_start <= 1500);
	CHECK_INT_EQ(atomic_load(&alarms), 0);
}

/*
 * Two threads wait at once; the holder lets go after 100 ms: one takes it
 * then, holds it 100 ms, and the other takes it when that one lets go.
 * Never both at once; neither times out.
 */
static void test_two_hand_over(void)
{
	struct waiter a = { .timeout_ms = 2000, .hold_ms = 100 };
	struct waiter b = { .timeout_ms = 2000, .hold_ms = 100 };
	const struct waiter *first, *second;
	pthread_t ta, tb;
	long long released;
	int fd = hold();

	atomic_store(&most_inside, 0);
	CHECK_INT_EQ(pthread_create(&ta, NULL, waiter, &a), 0);
	CHECK_INT_EQ(pthread_create(&tb, NULL, waiter, &b), 0);
	sleep_ms(100);
	released = now_ms();
	close(fd);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	CHECK_INT_EQ(a.r, 0);
	CHECK_INT_EQ(b.r, 0);
	CHECK_INT_EQ(atomic_load(&most_inside), 1);
	first = a.t_got <= b.t_got ? &a : &b;
	second = first == &a ? &b : &a;
	/* Handed over within a few naps (4 ms each), with room for a loaded machine. */
	if (first->t_got - released > 500 || second->t_got - first->t_end > 500)
		fprintf(stderr, "\thanded over %lld ms and %lld ms after each release\n",
			first->t_got - released, second->t_got - first->t_end);
	CHECK(first->t_got >= released);
	CHECK(first->t_got - released <= 500);
	CHECK(second->t_got >= first->t_got + 100);
	CHECK(second->t_got - first->t_end <= 500);
	CHECK_INT_EQ(atomic_load(&alarms), 0);
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	sigset_t alrm;

	tmpdir_make(tmp, sizeof(tmp), "store_lock");
	snprintf(state, sizeof(state), "%s/state", tmp);
	snprintf(lock_path, sizeof(lock_path), "%s/lock", state);
	{
		struct hpn_store st = HPN_STORE_INIT;
		struct hpn_err err = { 0 };

		CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
		hpn_store_close(&st);
	}
	/*
	 * The agent's arrangement: a disposition of the process's own, and
	 * SIGALRM blocked in this thread and the threads it starts (the
	 * watcher unblocks it, as the agent's worker did).
	 */
	sigemptyset(&sa.sa_mask);
	CHECK_INT_EQ(sigaction(SIGALRM, &sa, NULL), 0);
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	CHECK_INT_EQ(pthread_sigmask(SIG_BLOCK, &alrm, NULL), 0);

	test_timeout_alarm_blocked();
	test_two_time_out();
	test_two_hand_over();
	/* Waits in several threads at once left the disposition the test's too. */
	CHECK_INT_EQ(sigaction(SIGALRM, NULL, &sa), 0);
	CHECK(sa.sa_handler == on_alarm);
	if (tmpdir_rm(tmp) < 0)
		perror("remove scratch directory");
	return check_done();
}
