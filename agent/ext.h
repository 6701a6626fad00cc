/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_EXT_H
#define HPN_AGENT_EXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "attach.h"
#include "err.h"
#include "events.h"
#include "types.h"

/*
 * What the agent watches on the node besides serving the kubelet
 * (doc/metrics.md): Prometheus metrics over HTTP (metrics.c), the plugin's
 * event log (cnilog.c), the health loop that runs CHECK over the journals
 * (health.c), and GC against the runtime's sandboxes (gc.c, asked over CRI
 * by cri.c). CHECK and GC are lib/ code written for a process of its own that
 * may block (the store lock, IPAM plugins, the RDMA proof): they run on one
 * worker thread (work.c) that owns nothing of the loop's state; the loop
 * hands it a job and takes the job back when it is done.
 */

struct agent;

#define AGENT_TAG_EXT 64 /* main.c's epoll tag for an agent_fd */

/* An fd of these modules in the loop's epoll: main.c calls fn(a, f) when it is readable. */
struct agent_fd {
	int type; /* AGENT_TAG_EXT: first, as every epoll tag of main.c */
	void (*fn)(struct agent *a, struct agent_fd *f);
	int fd;
};
int agent_fd_add(struct agent *a, struct agent_fd *f, int fd,
		 void (*fn)(struct agent *a, struct agent_fd *f));
/* A timerfd (CLOCK_MONOTONIC): first after first_ms, then every every_ms (0: once). */
int agent_timer_add(struct agent *a, struct agent_fd *f, int first_ms, int every_ms,
		    void (*fn)(struct agent *a, struct agent_fd *f));
void agent_timer_set(struct agent_fd *f, int first_ms, int every_ms);
void agent_fd_close(struct agent_fd *f);

/* The flags of these modules (main.c parses them; defaults in ext_defaults). */
struct agent_ext_opts {
	const char *metrics_address; /* "127.0.0.1:9467"; "" or "none": no metrics */
	const char *cri_socket;	     /* the runtime's CRI socket ("" or "none": no GC) */
	const char *cni_path;	     /* where GC finds the IPAM plugin */
	int health_s;		     /* health loop period */
	int health_batch;	     /* attachments checked per period at most */
	int gc_s;		     /* GC period */
	int gc_grace_s;		     /* journals younger than this are never GC'd */
};
void ext_defaults(struct agent_ext_opts *o);
/* One of the flags below, for main.c's getopt loop: 0 taken, -1 not ours, 2 bad value. */
int ext_option(struct agent_ext_opts *o, const char *name, const char *value);

/* ---- work.c: the worker thread -------------------------------------------------- */

enum work_kind { WORK_HEALTH, WORK_GC };

#define HEALTH_MSG 512

/* One attachment's check (hpn_check_journal). */
struct health_result {
	char key[256];
	int rc; /* 0 healthy, 1 not checked, <0 broken */
	const char *reason;
	char msg[HEALTH_MSG];
};

struct work_job {
	enum work_kind kind;
	char *conf_text; /* the hpn-rdma entry, parsed by the worker (the loop may reload) */
	/* WORK_HEALTH */
	char **keys;
	size_t n_keys;
	struct health_result *results;
	/* WORK_GC */
	char **sandboxes;
	size_t n_sandboxes;
	int grace_s;
	char *cni_path;
	struct hpn_gc_live counts;
	int rc;
	struct hpn_err err;
	double seconds; /* the job's own time */
	/* Called on the loop with the job done; it frees the job (work_job_free). */
	void (*done)(struct agent *a, struct work_job *j);
};

int work_start(struct agent *a);
bool work_busy(const struct agent *a);
/* Hands j to the worker (-EBUSY while it has one). */
int work_post(struct agent *a, struct work_job *j);
/* At exit: waits up to grace_ms for a job in progress, then joins or leaves it. */
void work_stop(struct agent *a, int grace_ms);
void work_job_free(struct work_job *j);

/* ---- health.c ------------------------------------------------------------------- */

int health_start(struct agent *a);
void health_free(struct agent *a);
/* The journals' verdicts as the kubelet sees them: devices of broken attachments Unhealthy. */
void health_apply(struct agent *a);
void health_stop(struct agent *a);

/* One attachment's latest verdict, for the metrics. */
struct health_entry {
	char key[256];
	int state; /* 1 healthy, 0 broken, -1 never checked */
	const char *reason;
	char msg[HEALTH_MSG];
	double checked_at;			  /* unix seconds */
	bool seen;				  /* its journal was there at the last listing */
	char pod[340];				  /* " (pod ns/name)" for the log, or empty */
	char ids[HPN_MAX_NICS][HPN_ALLOC_ID_MAX]; /* its NICs, as devices.c names them */
	size_t n_ids;
};
struct health_stats {
	uint64_t checks_healthy, checks_broken, checks_skipped;
	double last_tick;
	struct health_entry *v;
	size_t n;
};
const struct health_stats *health_stats(const struct agent *a);

/* ---- cri.c: ListPodSandbox --------------------------------------------------------- */

/* done(a, ud, ids, n, error): the sandbox IDs, or error (ids NULL) when the runtime cannot say. */
typedef void (*cri_sandboxes_fn)(struct agent *a, void *ud, char **ids, size_t n,
				 const char *error);
int cri_list_sandboxes(struct agent *a, const char *socket, int timeout_ms, cri_sandboxes_fn done,
		       void *ud);

/* ---- gc.c ---------------------------------------------------------------------------- */

int gc_start(struct agent *a);
void gc_stop(struct agent *a);
void gc_free(struct agent *a);
struct gc_stats {
	uint64_t runs_ok, runs_failed, runs_skipped;
	uint64_t undone, failed;
	double last_run; /* unix seconds of the last round that asked the runtime */
	bool runtime_up; /* the last ListPodSandbox answered */
	size_t sandboxes;
	char last_error[HPN_ERR_MSG];
};
const struct gc_stats *gc_stats(const struct agent *a);

/* ---- cnilog.c: <stateDir>/events.log ------------------------------------------------- */

#define CNILOG_BUCKETS 14
extern const double cnilog_buckets[CNILOG_BUCKETS];
struct cnilog_series {
	char network[HPN_EVENT_FIELD_MAX];
	char command[8];
	int code;
	uint64_t count;
	double sum;
	uint64_t bucket[CNILOG_BUCKETS]; /* cumulative: count of durations <= cnilog_buckets[i] */
};
#define CNILOG_MAX_SERIES 128
struct cnilog_stats {
	struct cnilog_series v[CNILOG_MAX_SERIES];
	size_t n;
	uint64_t lines, skipped, dropped; /* read; unparsable; no series left for them */
};
int cnilog_start(struct agent *a);
void cnilog_stop(struct agent *a);
const struct cnilog_stats *cnilog_stats(const struct agent *a);

/* ---- metrics.c ------------------------------------------------------------------------ */

int metrics_start(struct agent *a);
void metrics_stop(struct agent *a);
/* "127.0.0.1:9467", "[::1]:9467" (port 0: any) into sa (a struct sockaddr_storage). */
struct sockaddr_storage;
int metrics_parse_address(const char *s, struct sockaddr_storage *sa, unsigned int *len);

/* ---- ext.c: all of the above ---------------------------------------------------------- */

struct agent_ext {
	struct agent_ext_opts opts;
	double start_time;
	struct work *work;
	struct health *health;
	struct gc *gc;
	struct cnilog *cnilog;
	struct metrics *metrics;
};
/* Starts every module the options ask for; an error is logged and fails the agent. */
int ext_start(struct agent *a);
/* At SIGTERM: no new work, sockets closed. */
void ext_stop(struct agent *a);
/* After the loop: the worker joined (or left), everything freed. */
void ext_free(struct agent *a);

#endif
