/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_PODRESOURCES_H
#define HPN_AGENT_PODRESOURCES_H

#include <limits.h>

#include "alloc.h"

struct rpc;

/*
 * The kubelet's PodResources API, as a client (v1 PodResourcesLister.List on
 * <kubelet-dir>/pod-resources/kubelet.sock): which devices of one resource a
 * pod holds. The kubelet's word, asked per question, never cached.
 */
struct podres {
	struct rpc *rpc;
	char sock[PATH_MAX];
	char resource[HPN_ALLOC_RESOURCE_MAX];
};

/* -ENAMETOOLONG when kubelet_dir makes too long a socket path. */
int podres_init(struct podres *p, struct rpc *rpc, const char *kubelet_dir, const char *resource);

/* done(ud, devices, NULL) or done(ud, NULL, error) on the loop, within timeout_ms. */
typedef void (*podres_fn)(void *ud, const struct hpn_alloc *al, const char *error);
int podres_pod_devices(struct podres *p, const struct hpn_alloc_req *req, int timeout_ms,
		       podres_fn done, void *ud);

#endif
