// SPDX-License-Identifier: Apache-2.0
/*
 * GC by the agent, because containerd never calls the plugin's GC: every
 * --gc-interval, the runtime's live sandboxes (CRI ListPodSandbox, cri.c) are
 * the valid attachments of lib/gc.c's GC (hpn_gc_sandboxes), run in-process
 * on the worker thread. Attachments of pods whose DEL never came are undone
 * (NICs back, IPAM released, hints and journal removed); a live pod's never,
 * nor one whose ADD or DEL is running, nor a journal younger than
 * --gc-grace (an ADD that has just finished: containerd lists the sandbox
 * only once RunPodSandbox returns), nor one the runtime did not make (no pod
 * UID: cnitool's, a script's). When the runtime cannot be asked (no socket,
 * an error, a timeout), the round does nothing and says so; when it lists
 * no sandbox while this boot's journals hold pods a CRI runtime attached
 * (another runtime's socket), the round is "untrusted": nothing undone,
 * said so.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attach.h"
#include "cri.h"
#include "err.h"
#include "exposition.h"
#include "gc.h"
#include "log.h"
#include "loop.h"
#include "node.h"
#include "util.h"

#define LIST_TIMEOUT_MS 5000

struct gc_stats {
	uint64_t runs_ok, runs_failed, runs_skipped;
	uint64_t runs_untrusted; /* an empty list while this boot's pods are journalled */
	uint64_t undone, failed;
	double last_run; /* unix seconds of the last round that asked the runtime */
	bool runtime_up; /* the last ListPodSandbox answered */
	size_t sandboxes;
	char last_error[HPN_ERR_MSG];
};

struct gc {
	struct loop *loop;
	struct rpc *rpc;
	struct node *node;
	struct gc_opts o;
	struct loop_src timer;
	struct gc_stats st;
	bool asking, quitting;
	bool job_out; /* a round queued or running on the worker */
};

/* One round of lib/gc.c's GC, done on the worker. */
struct gc_job {
	struct loop_job job; /* first: the worker hands this back */
	struct gc *g;
	char *conf_text; /* the entry, parsed by the worker (the loop may reload) */
	char **sandboxes;
	struct hpn_gc_live counts;
	int rc;
	struct hpn_err err;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void job_free(struct gc_job *j)
{
	if (!j)
		return;
	free(j->conf_text);
	hpn_strv_free(j->sandboxes);
	free(j);
}

static void run(struct loop_job *lj)
{
	struct gc_job *j = (struct gc_job *)lj;
	struct hpn_conf conf = { 0 };

	j->rc = hpn_conf_parse(j->conf_text, strlen(j->conf_text), HPN_CMD_ADD, &conf, &j->err);
	if (j->rc >= 0)
		j->rc = hpn_gc_sandboxes(&conf, &j->counts, &j->err);
	hpn_conf_free(&conf);
}

static void done(struct loop_job *lj)
{
	struct gc_job *j = (struct gc_job *)lj;
	struct gc *g = j->g;

	g->job_out = false;
	if (lj->cancelled) {
		/* Never run: the worker stopped first (the agent exits). */
		g->st.runs_skipped++;
		job_free(j);
		return;
	}
	g->st.undone += j->counts.undone;
	g->st.failed += j->counts.failed;
	if (j->rc == -ECANCELED) {
		/* lib/gc.c did not trust the list: nothing undone. */
		g->st.runs_untrusted++;
		snprintf(g->st.last_error, sizeof(g->st.last_error), "%s", j->err.msg);
		hpn_warn("gc: skipped: %s (is %s the runtime of this node's pods? --cri-socket)",
			 j->err.msg, g->o.cri_socket);
	} else if (j->rc < 0) {
		g->st.runs_failed++;
		snprintf(g->st.last_error, sizeof(g->st.last_error), "%s", j->err.msg);
		hpn_warn("gc: %zu attachments undone, %zu failed: %s", j->counts.undone,
			 j->counts.failed, j->err.msg);
	} else {
		g->st.runs_ok++;
		g->st.last_error[0] = '\0';
		if (j->counts.undone)
			hpn_info("gc: %zu attachments of pods the runtime no longer has undone "
				 "(%zu kept, %zu of them younger than %d s) in %.2f s",
				 j->counts.undone, j->counts.kept, j->counts.young,
				 j->counts.min_age_s, j->job.seconds);
		else
			hpn_debug("gc: nothing to undo (%zu kept) in %.3f s", j->counts.kept,
				  j->job.seconds);
	}
	job_free(j);
}

static void listed(void *ud, char **ids, size_t n, const char *error)
{
	struct gc *g = ud;
	struct gc_job *j;

	g->asking = false;
	g->st.last_run = now_s();
	if (error) {
		g->st.runtime_up = false;
		g->st.runs_skipped++;
		snprintf(g->st.last_error, sizeof(g->st.last_error), "%s", error);
		hpn_warn("gc: skipped, the runtime cannot be asked which pods it runs: %s", error);
		return;
	}
	g->st.runtime_up = true;
	g->st.sandboxes = n;
	if (g->quitting || g->job_out) {
		hpn_strv_free(ids);
		g->st.runs_skipped++;
		hpn_debug("gc: the last round is still queued or running; this one is skipped");
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j || !(j->conf_text = strdup(g->node->conf_text))) {
		hpn_strv_free(ids);
		job_free(j);
		hpn_error("gc: out of memory");
		return;
	}
	j->job.run = run;
	j->job.done = done;
	j->g = g;
	j->sandboxes = ids;
	j->counts = (struct hpn_gc_live){ .sandboxes = (const char *const *)ids,
					  .n_sandboxes = n,
					  .min_age_s = g->o.grace_s,
					  .cni_path = g->o.cni_path };
	/* The node's upkeep: after the kubelet's Prepare and the API's view. */
	if (loop_work_post(g->loop, &j->job, LOOP_PRIO_HOST) < 0) {
		g->st.runs_skipped++;
		job_free(j);
		return;
	}
	g->job_out = true;
}

static void tick(struct loop_src *s)
{
	struct gc *g = s->ud;

	if (g->quitting || g->asking)
		return;
	g->asking = true;
	if (cri_list_sandboxes(g->rpc, g->o.cri_socket, LIST_TIMEOUT_MS, listed, g) < 0) {
		g->asking = false;
		hpn_error("gc: out of memory");
	}
}

int gc_start(struct loop *l, struct rpc *rpc, struct node *node, const struct gc_opts *o,
	     struct gc **ret)
{
	struct gc *g = calloc(1, sizeof(*g));
	int r;

	if (!g)
		return -ENOMEM;
	*g = (struct gc){ .loop = l, .rpc = rpc, .node = node, .o = *o };
	hpn_info("gc: every %d s against the runtime at %s (journals younger than %d s kept)",
		 o->period_s, o->cri_socket, o->grace_s);
	/* The first round a period after start: the health loop looks first. */
	r = loop_timer(l, &g->timer, o->period_s * 1000, o->period_s * 1000, tick, g);
	if (r < 0) {
		free(g);
		return r;
	}
	*ret = g;
	return 0;
}

void gc_stop(struct gc *g)
{
	if (g) {
		g->quitting = true;
		loop_timer_set(&g->timer, LOOP_OFF, 0);
	}
}

void gc_free(struct gc *g)
{
	if (!g)
		return;
	loop_close(&g->timer);
	free(g);
}

void gc_metrics(struct sbuf *b, void *ud)
{
	const struct gc_stats *g = &((const struct gc *)ud)->st;

	expo_family(
		b, "hpn_rdma_gc_runs_total", "counter",
		"GC rounds against the runtime's sandboxes: ok, failed (an undo failed), skipped "
		"(the runtime could not be asked, or the last round was still on the worker), "
		"untrusted (the runtime listed no sandbox while pods of this boot are journalled: "
		"nothing undone).");
	expo_by_result(
		b, "hpn_rdma_gc_runs_total",
		(const char *[]){ "ok", "failed", "skipped", "untrusted" },
		(uint64_t[]){ g->runs_ok, g->runs_failed, g->runs_skipped, g->runs_untrusted }, 4);
	expo_counter(b, "hpn_rdma_gc_undone_total",
		     "Attachments of pods the runtime no longer has that GC undid.", g->undone);
	expo_counter(
		b, "hpn_rdma_gc_undo_failures_total",
		"Attachments whose undo by GC failed (their journals stay for the next round).",
		g->failed);
	expo_gauge(b, "hpn_rdma_gc_last_run_timestamp_seconds",
		   "When GC last asked the runtime (unix time; 0: not yet).", g->last_run);
	expo_gauge(b, "hpn_rdma_runtime_up",
		   "Whether the runtime answered GC's last ListPodSandbox.", g->runtime_up);
	expo_gauge(b, "hpn_rdma_runtime_sandboxes",
		   "Pod sandboxes the runtime listed at GC's last ListPodSandbox.",
		   (double)g->sandboxes);
}
