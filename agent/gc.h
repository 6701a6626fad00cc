/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_GC_H
#define HPN_AGENT_GC_H

struct loop;
struct node;
struct rpc;
struct sbuf;

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

struct gc;

int gc_start(struct loop *l, struct rpc *rpc, struct node *node, const struct gc_opts *o,
	     struct gc **ret);
/* At SIGTERM: no new round. */
void gc_stop(struct gc *g);
/* After the worker stopped. */
void gc_free(struct gc *g);
/*
 * Its metrics_render_fn (metrics.h; ud: the gc): its rounds, what they
 * undid, the runtime's answer (doc/metrics.md).
 */
void gc_metrics(struct sbuf *b, void *ud);

#endif
