/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_LOOP_H
#define HPN_AGENT_LOOP_H

#include <stdbool.h>

/*
 * The agent's event loop, the bottom of agent/ (doc/architecture.md): epoll
 * over the fds and timerfds that services register, calls deferred to the
 * end of a round of events, and one worker thread for lib/ code that blocks.
 * It knows no service: each registers what it owns and is called back.
 */

struct loop;

/*
 * An fd in the loop, embedded in its owner's state: fn(s) runs on the loop
 * when the fd is readable (for a timer, once per expiry batch, the count
 * already read). loop_close closes it, before the loop is freed. A source
 * closed or muted while the loop dispatches a round of events (by any
 * callback of that round) is not called again in that round, so its owner
 * may free it at once (sd-event's source_disconnect).
 */
struct loop_src {
	int fd; /* -1: none */
	bool timer;
	void (*fn)(struct loop_src *s);
	void *ud;
	struct loop *loop;    /* set by loop_add: the loop whose round may name s */
	unsigned int revents; /* for fn: LOOP_IN, LOOP_OUT (an error or a hangup: both) */
};

/* What a source is watched for (loop_watch) and what woke it (revents). */
#define LOOP_IN	 1u
#define LOOP_OUT 2u

int loop_new(struct loop **ret);
/* After loop_run: the worker joined (or left to the exit), the epoll closed. */
void loop_free(struct loop *l);

/* Watches fd for input; on error fd is closed and s->fd is -1. */
int loop_add(struct loop *l, struct loop_src *s, int fd, void (*fn)(struct loop_src *s), void *ud);
/*
 * Watches fd, which stays its owner's (libcurl's sockets): for nothing until
 * loop_watch says what; on error nothing is closed. loop_mute ends it, never
 * loop_close.
 */
int loop_borrow(struct loop *l, struct loop_src *s, int fd, void (*fn)(struct loop_src *s),
		void *ud);
/*
 * Watches s (added, maybe muted since) for events instead: LOOP_IN, LOOP_OUT
 * or both; 0 is loop_mute. A socket waits for LOOP_OUT to write what did not
 * fit, never blocking the loop.
 */
int loop_watch(struct loop *l, struct loop_src *s, unsigned int events);
/*
 * A CLOCK_MONOTONIC timer: first after first_ms (0: at the next round, not
 * off as a timerfd's 0 would be; LOOP_OFF: not armed), then every every_ms
 * (0: once). loop_timer_set arms it anew, or disarms it with LOOP_OFF.
 */
#define LOOP_OFF (-1)
int loop_timer(struct loop *l, struct loop_src *s, int first_ms, int every_ms,
	       void (*fn)(struct loop_src *s), void *ud);
void loop_timer_set(struct loop_src *s, int first_ms, int every_ms);
/* Stops watching s (its fd stays open, the owner's to use and close); not called again. */
void loop_mute(struct loop *l, struct loop_src *s);
/*
 * Closes s's fd (which takes it out of the epoll set) and drops what the
 * round being dispatched still holds for s; NULL and -1 are fine.
 */
void loop_close(struct loop_src *s);

/* A call made once after the current round of events, however often it was asked. */
struct loop_defer {
	void (*fn)(void *ud);
	void *ud;
	bool queued;
	struct loop_defer *next;
};
void loop_defer(struct loop *l, struct loop_defer *d);

/*
 * Runs until loop_exit was called and idle(ud) holds (returns 0), or the
 * grace time passed first (-ETIMEDOUT); -errno when epoll fails.
 */
int loop_run(struct loop *l);
void loop_exit(struct loop *l, int grace_ms, bool (*idle)(void *ud), void *ud);
bool loop_exiting(const struct loop *l);

/*
 * The worker thread, for lib/ code written for a process of its own that
 * may block (CHECK, GC: the store lock, IPAM plugins, the RDMA proof; the
 * journals the DRA status writer reads). Network calls never come here: the
 * Kubernetes API's are on the loop (kubeloop.h). Jobs queue by priority, each priority in the
 * order posted; the worker runs one at a time, the highest priority first:
 * run(j) on the worker touches only the job; then done(j) on the loop, which
 * owns everything else. done is called once for every job posted, also for
 * one still queued when the worker stops (then j->cancelled, run never
 * called), unless the worker is left running at exit (loop_work_stop).
 * Posting never fails for a busy worker: a service keeps its own "queued or
 * running" mark, so it never has the same work queued twice.
 */
enum loop_prio {
	LOOP_PRIO_API,	/* the API's view waits on it: the journals behind the claims' status */
	LOOP_PRIO_HOST, /* the node's upkeep: health's CHECKs, GC */
	LOOP_PRIOS
};
struct loop_job {
	void (*run)(struct loop_job *j);
	void (*done)(struct loop_job *j); /* frees the job */
	double seconds;			  /* run's own time */
	bool cancelled;			  /* for done: never run, the worker stopped first */
	struct loop_job *next;		  /* the queue's */
};
int loop_work_start(struct loop *l);
/* Queues j at prio; -ENOTCONN when the worker is not running (or stopping). */
int loop_work_post(struct loop *l, struct loop_job *j, enum loop_prio prio);
/*
 * Waits up to grace_ms for a job in progress, then joins the worker and
 * hands back the finished and the queued jobs (cancelled), or leaves the
 * worker and its jobs to the exit.
 */
void loop_work_stop(struct loop *l, int grace_ms);

#endif
