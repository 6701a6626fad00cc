/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_DRASLICES_H
#define HPN_AGENT_DRASLICES_H

#include <stddef.h>

#include "err.h"

struct loop;
struct node;

/*
 * The node's pool published as ResourceSlices (doc/dra.md, "Publishing the
 * slices"): the pool's NICs rendered by lib/draslice.c, written to the API on
 * the loop's worker (list, PUT, POST, DELETE) when they change, and checked
 * again every DRASLICES_RESYNC_MS (sooner, backing off, after a failure) so
 * slices wiped or edited by someone else are put back. Never deleted at
 * exit: the kubelet does that when the driver stays gone.
 */
struct draslices_opts {
	const char *driver;	/* spec.driver */
	const char *node_name;	/* spec.nodeName and the pool's name */
	const char *kubeconfig; /* read for every round of requests */
	int api_timeout_ms;	/* one request, retries included */
};

/* For metrics (doc/metrics.md, the hpn_rdma_dra_slice* families). */
struct draslices_stats {
	unsigned long publishes; /* rounds that wrote the slices */
	unsigned long unchanged; /* rounds that found the API holding them already */
	unsigned long failures;	 /* rounds that failed */
	unsigned long writes;	 /* slices PUT or POSTed */
	double write_s;		 /* the time rounds that wrote took, from their list on */
	long generation;	 /* the pool generation last published (0: none yet) */
	size_t slices;		 /* the slices of the pool after the last good round */
};

struct draslices;

int draslices_start(struct loop *l, struct node *node, const struct draslices_opts *o,
		    struct draslices **ret, struct hpn_err *err);
/* After every scan of the node: published again (debounced) when the slices change. */
void draslices_scanned(struct draslices *s);
const struct draslices_stats *draslices_stats(const struct draslices *s);
/* At SIGTERM: no more rounds (the slices stay in the API). */
void draslices_stop(struct draslices *s);
/* After the loop and the worker; NULL is fine. */
void draslices_free(struct draslices *s);

#endif
