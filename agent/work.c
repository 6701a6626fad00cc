// SPDX-License-Identifier: Apache-2.0
/*
 * The worker thread: the one place the agent runs lib/'s CHECK and GC,
 * which were written for a process of their own and block (the store lock
 * for up to 30 s, IPAM plugins, the RDMA proof in a child). The loop hands it
 * one job at a time; the job carries everything the worker reads (the config
 * as text, parsed here: a reload in the loop cannot pull it away) and gets
 * its results written into it; an eventfd hands it back to the loop, which
 * alone touches the agent's state. The worker takes no lock of the loop's
 * and the loop never waits for the worker.
 *
 * SIGALRM, with which lib/store.c times the store lock, is blocked in every
 * thread but this one (main.c blocks it before any thread starts), so the
 * alarm interrupts this thread's flock() and nobody else's system call.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"
#include "util.h"

struct work {
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct work_job *todo; /* handed over, not yet taken */
	struct work_job *doing;
	struct work_job *done; /* finished, for the loop */
	bool stop, idle;
	struct agent_fd efd;
};

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void work_job_free(struct work_job *j)
{
	if (!j)
		return;
	free(j->conf_text);
	hpn_strv_free(j->keys);
	hpn_strv_free(j->sandboxes);
	free(j->results);
	free(j->cni_path);
	free(j);
}

static void run_health(struct work_job *j, const struct hpn_conf *conf)
{
	for (size_t i = 0; i < j->n_keys; i++) {
		struct health_result *res = &j->results[i];
		struct hpn_check_report rep;
		struct hpn_err err = { 0 };

		snprintf(res->key, sizeof(res->key), "%s", j->keys[i]);
		res->rc = hpn_check_journal(conf, j->keys[i], &rep, &err);
		res->reason = rep.reason;
		if (res->rc < 0)
			snprintf(res->msg, sizeof(res->msg), "%s",
				 err.msg[0] ? err.msg : strerror(-res->rc));
	}
}

static void run_gc(struct work_job *j, const struct hpn_conf *conf)
{
	j->counts = (struct hpn_gc_live){ .sandboxes = (const char *const *)j->sandboxes,
					  .n_sandboxes = j->n_sandboxes,
					  .min_age_s = j->grace_s,
					  .cni_path = j->cni_path };
	j->rc = hpn_gc_sandboxes(conf, &j->counts, &j->err);
}

static void run(struct work_job *j)
{
	struct hpn_conf conf = { 0 };
	double t0 = mono();

	j->rc = hpn_conf_parse(j->conf_text, strlen(j->conf_text), HPN_CMD_ADD, &conf, &j->err);
	if (j->rc >= 0) {
		if (j->kind == WORK_HEALTH)
			run_health(j, &conf);
		else
			run_gc(j, &conf);
	}
	hpn_conf_free(&conf);
	j->seconds = mono() - t0;
}

static void *worker(void *arg)
{
	struct work *w = arg;
	sigset_t alarm;
	uint64_t one = 1;

	sigemptyset(&alarm);
	sigaddset(&alarm, SIGALRM);
	pthread_sigmask(SIG_UNBLOCK, &alarm, NULL);
	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->todo && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->stop)
			break;
		w->doing = w->todo;
		w->todo = NULL;
		pthread_mutex_unlock(&w->lock);
		run(w->doing);
		pthread_mutex_lock(&w->lock);
		w->done = w->doing;
		w->doing = NULL;
		pthread_cond_broadcast(&w->cond);
		if (write(w->efd.fd, &one, sizeof(one)) < 0)
			hpn_warn("worker: eventfd: %s", strerror(errno));
	}
	w->idle = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* The loop's side: a finished job goes back to whoever posted it. */
static void on_done(struct agent *a, struct agent_fd *f)
{
	struct work *w = a->ext.work;
	struct work_job *j;
	uint64_t n;

	if (read(f->fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		hpn_warn("worker: eventfd: %s", strerror(errno));
	pthread_mutex_lock(&w->lock);
	j = w->done;
	w->done = NULL;
	pthread_mutex_unlock(&w->lock);
	if (j)
		j->done(a, j);
}

int work_start(struct agent *a)
{
	struct work *w = calloc(1, sizeof(*w));
	int fd, r;

	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	a->ext.work = w;
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	r = agent_fd_add(a, &w->efd, fd, on_done);
	if (r < 0)
		return r;
	r = pthread_create(&w->thread, NULL, worker, w);
	if (r)
		return -r;
	w->started = true;
	return 0;
}

bool work_busy(const struct agent *a)
{
	struct work *w = a->ext.work;
	bool busy;

	if (!w)
		return true;
	pthread_mutex_lock(&w->lock);
	busy = w->todo || w->doing || w->done;
	pthread_mutex_unlock(&w->lock);
	return busy;
}

int work_post(struct agent *a, struct work_job *j)
{
	struct work *w = a->ext.work;
	int r = 0;

	if (!w || !w->started)
		return -ENOTCONN;
	pthread_mutex_lock(&w->lock);
	if (w->todo || w->doing || w->done || w->stop) {
		r = -EBUSY;
	} else {
		w->todo = j;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return r;
}

void work_stop(struct agent *a, int grace_ms)
{
	struct work *w = a->ext.work;
	struct timespec until;

	if (!w)
		return;
	if (w->started) {
		bool idle;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += grace_ms / 1000;
		until.tv_nsec += (grace_ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
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
			return; /* w, its job and its eventfd stay for the thread until exit */
		}
		pthread_join(w->thread, NULL);
	}
	work_job_free(w->todo);
	work_job_free(w->done);
	agent_fd_close(&w->efd);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
	a->ext.work = NULL;
}
