/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_DRASLICES_H
#define HPN_AGENT_DRASLICES_H

#include "err.h"

struct loop;
struct node;
struct sbuf;

/*
 * The node's pool published as ResourceSlices (doc/dra.md, "Publishing the
 * slices"): the pool's NICs rendered by agent/dra/model/draslice.c, written to the API on
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

struct draslices;

int draslices_start(struct loop *l, struct node *node, const struct draslices_opts *o,
		    struct draslices **ret, struct hpn_err *err);
/* After every scan of the node: published again (debounced) when the slices change. */
void draslices_scanned(struct draslices *s);
/* The hpn_rdma_dra_slice* families into b (exposition.h), for dra_metrics. */
void draslices_metrics(struct sbuf *b, const struct draslices *s);
/* At SIGTERM: no more rounds (the slices stay in the API). */
void draslices_stop(struct draslices *s);
/* After the loop and the worker; NULL is fine. */
void draslices_free(struct draslices *s);

#endif
