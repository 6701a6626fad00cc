/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_GC_H
#define HPN_AGENT_GC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct loop;
struct node;
struct rpc;

/*
 * GC by the agent (doc/metrics.md): every period, the runtime's live
 * sandboxes (cri.h) are the valid attachments of lib/gc.c's GC, run on the
 * loop's worker.
 */
struct gc_opts {
	const char *cri_socket; /* the runtime's CRI socket */
	const char *cni_path;	/* where GC finds the IPAM plugin */
	int period_s;		/* --gc-interval */
	int grace_s;		/* journals younger than this are never GC'd */
};

struct gc_stats {
	uint64_t runs_ok, runs_failed, runs_skipped;
	uint64_t undone, failed;
	double last_run; /* unix seconds of the last round that asked the runtime */
	bool runtime_up; /* the last ListPodSandbox answered */
	size_t sandboxes;
	char last_error[HPN_ERR_MSG];
};

struct gc;

int gc_start(struct loop *l, struct rpc *rpc, struct node *node, const struct gc_opts *o,
	     struct gc **ret);
/* At SIGTERM: no new round. */
void gc_stop(struct gc *g);
/* After the worker stopped. */
void gc_free(struct gc *g);
/* NULL for NULL (GC is off). */
const struct gc_stats *gc_stats(const struct gc *g);

#endif
