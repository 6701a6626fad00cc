// SPDX-License-Identifier: Apache-2.0
/*
 * GC by the agent, because containerd never calls the plugin's GC: every
 * --gc-interval, the runtime's live sandboxes (CRI ListPodSandbox, cri.c) are
 * the valid attachments of lib/gc.c's GC (hpn_gc_sandboxes), run in-process
 * on the worker thread. Attachments of pods whose DEL never came are undone
 * (NICs back, IPAM released, hints and journal removed); a live pod's never,
 * nor one whose ADD or DEL is running, nor a journal younger than
 * --gc-grace (an ADD that has just finished: containerd lists the sandbox
 * only once RunPodSandbox returns). When the runtime cannot be asked (no
 * socket, an error, a timeout), the round does nothing and says so.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "log.h"
#include "util.h"

#define LIST_TIMEOUT_MS 5000

struct gc {
	struct agent_fd timer;
	struct gc_stats st;
	bool asking, quitting;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

const struct gc_stats *gc_stats(const struct agent *a)
{
	return a->ext.gc ? &a->ext.gc->st : NULL;
}

static void done(struct agent *a, struct work_job *j)
{
	struct gc *g = a->ext.gc;

	if (g) {
		g->st.undone += j->counts.undone;
		g->st.failed += j->counts.failed;
		if (j->rc < 0) {
			g->st.runs_failed++;
			snprintf(g->st.last_error, sizeof(g->st.last_error), "%s", j->err.msg);
			hpn_warn("gc: %zu attachments undone, %zu failed: %s", j->counts.undone,
				 j->counts.failed, j->err.msg);
		} else {
			g->st.runs_ok++;
			g->st.last_error[0] = '\0';
			if (j->counts.undone)
				hpn_info("gc: %zu attachments of pods the runtime no longer has "
					 "undone "
					 "(%zu kept, %zu of them younger than %d s) in %.2f s",
					 j->counts.undone, j->counts.kept, j->counts.young,
					 j->grace_s, j->seconds);
			else
				hpn_debug("gc: nothing to undo (%zu kept) in %.3f s",
					  j->counts.kept, j->seconds);
		}
	}
	work_job_free(j);
}

static void listed(struct agent *a, void *ud, char **ids, size_t n, const char *error)
{
	struct gc *g = a->ext.gc;
	struct work_job *j;

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
	if (g->quitting || a->quitting || work_busy(a)) {
		hpn_strv_free(ids);
		g->st.runs_skipped++;
		hpn_debug("gc: the worker is busy; this round is skipped");
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j || !(j->conf_text = strdup(a->conf_buf)) ||
	    !(j->cni_path = strdup(a->ext.opts.cni_path))) {
		hpn_strv_free(ids);
		work_job_free(j);
		hpn_error("gc: out of memory");
		return;
	}
	j->kind = WORK_GC;
	j->done = done;
	j->sandboxes = ids;
	j->n_sandboxes = n;
	j->grace_s = a->ext.opts.gc_grace_s;
	if (work_post(a, j) < 0) {
		g->st.runs_skipped++;
		work_job_free(j);
	}
}

static void tick(struct agent *a, struct agent_fd *f)
{
	struct gc *g = a->ext.gc;
	uint64_t n;

	if (read(f->fd, &n, sizeof(n)) < 0 || g->quitting || g->asking)
		return;
	g->asking = true;
	if (cri_list_sandboxes(a, a->ext.opts.cri_socket, LIST_TIMEOUT_MS, listed, NULL) < 0) {
		g->asking = false;
		hpn_error("gc: out of memory");
	}
}

int gc_start(struct agent *a)
{
	struct gc *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	a->ext.gc = g;
	hpn_info("gc: every %d s against the runtime at %s (journals younger than %d s kept)",
		 a->ext.opts.gc_s, a->ext.opts.cri_socket, a->ext.opts.gc_grace_s);
	/* The first round a period after start: the health loop looks first. */
	return agent_timer_add(a, &g->timer, a->ext.opts.gc_s * 1000, a->ext.opts.gc_s * 1000,
			       tick);
}

void gc_stop(struct agent *a)
{
	struct gc *g = a->ext.gc;

	if (g) {
		g->quitting = true;
		agent_timer_set(&g->timer, 0, 0);
	}
}

void gc_free(struct agent *a)
{
	struct gc *g = a->ext.gc;

	if (!g)
		return;
	agent_fd_close(&g->timer);
	free(g);
	a->ext.gc = NULL;
}
