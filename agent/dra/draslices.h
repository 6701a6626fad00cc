/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_DRASLICES_H
#define HPN_AGENT_DRASLICES_H

#include <stdbool.h>

#include "err.h"

struct kubeloop;
struct loop;
struct node;
struct sbuf;

/*
 * The node's pool published as ResourceSlices (doc/dra.md, "Publishing the
 * slices"): the pool's NICs rendered by agent/dra/model/draslice.c, written to
 * the API from the loop (kubeloop.h: list, PUT, POST, DELETE, one request at a
 * time) when they change, and checked again every 60 s (sooner, backing off,
 * after a failure) so slices wiped or edited by someone else are put back.
 * An unhealthy NIC that is still there stays, with the driver's taint; with
 * shares, a RoCE NIC is published twice, as itself and as a device many pods
 * share (as many as its GID table allows), one excluding the other; a
 * taint or an attribute changed rewrites only its slice, at the generation
 * the API holds. Never deleted at exit: the kubelet does that when the
 * driver stays gone.
 */
struct draslices_opts {
	const char *driver;	  /* spec.driver */
	const char *node_name;	  /* spec.nodeName and the pool's name */
	struct kubeloop *kube;	  /* the API's calls; borrowed, outlives the publisher */
	const char *kubeconfig;	  /* read for every request (kube_call) */
	int api_timeout_ms;	  /* one request, retries included */
	const char *taint_effect; /* an unhealthy NIC's taint: NoSchedule, NoExecute, None */
	bool shares; /* --dra-shares: a RoCE NIC also published as a device pods share */
};

struct draslices;

int draslices_start(struct loop *l, struct node *node, const struct draslices_opts *o,
		    struct draslices **ret, struct hpn_err *err);
/* After every scan of the node: published again (debounced) when the slices change. */
void draslices_scanned(struct draslices *s);
/* The hpn_rdma_dra_slice* families into b (exposition.h), for dra_metrics. */
void draslices_metrics(struct sbuf *b, const struct draslices *s);
/* At SIGTERM: no more rounds, the one under way cancelled (the slices stay in the API). */
void draslices_stop(struct draslices *s);
/* After the loop, before its kubeloop (a round under way is cancelled); NULL is fine. */
void draslices_free(struct draslices *s);

#endif
