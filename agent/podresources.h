/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_PODRESOURCES_H
#define HPN_AGENT_PODRESOURCES_H

#include <limits.h>

#include "alloc.h"

struct rpc;

/*
 * The kubelet's PodResources API, as a client (v1 PodResourcesLister.List on
 * <kubelet-dir>/pod-resources/kubelet.sock): which devices of one resource a
 * pod holds, and which GPUs. The kubelet's word, asked per question, never
 * cached.
 */
#define PODRES_GPU_RESOURCES 8	 /* --gpu-resource names at most */
#define PODRES_DRIVER_MAX    254 /* a DRA driver's name: a DNS subdomain */

struct podres {
	struct rpc *rpc;
	char sock[PATH_MAX];
	char resource[HPN_ALLOC_RESOURCE_MAX];
	/* The pod's GPUs: device plugin resources whose IDs name GPUs (none: off)... */
	char gpu_resources[PODRES_GPU_RESOURCES][HPN_ALLOC_RESOURCE_MAX];
	size_t n_gpu_resources;
	/* ...and the DRA driver whose devices are GPUs (empty: off). */
	char gpu_driver[PODRES_DRIVER_MAX];
};

/*
 * gpu_resources: a comma-separated list of resource names (empty: none);
 * gpu_driver: a DRA driver's name (empty: none); both as opts.c checked
 * them. -ENAMETOOLONG when kubelet_dir makes too long a socket path or a
 * name is too long, -E2BIG for more than PODRES_GPU_RESOURCES names.
 */
int podres_init(struct podres *p, struct rpc *rpc, const char *kubelet_dir, const char *resource,
		const char *gpu_resources, const char *gpu_driver);

/*
 * The claim the scheduler made for the pod's extended resources that DRA
 * backs (KEP-5004), as the pod's status.extendedResourceClaimStatus names it:
 * the claim, and the resources its requestMappings serve (comma-separated).
 */
#define PODRES_XRES_MAX (PODRES_GPU_RESOURCES * HPN_ALLOC_RESOURCE_MAX)
struct podres_xclaim {
	char name[PODRES_DRIVER_MAX]; /* a DNS subdomain, as a claim's name */
	char resources[PODRES_XRES_MAX];
};

/*
 * done(ud, devices, NULL) or done(ud, NULL, error) on the loop, within
 * timeout_ms: the pod's devices of the resource and its GPUs (al->gpus:
 * per container in the kubelet's order, the GPU resources' IDs, then its
 * claims' devices of the GPU driver, and every device of xc's claim when
 * each resource xc serves is a GPU resource, whatever its driver: the
 * scheduler's claim for nvidia.com/gpu; each once). xc NULL: the pod has
 * none, or the agent does not know it; copied.
 */
typedef void (*podres_fn)(void *ud, const struct hpn_alloc *al, const char *error);
int podres_pod_devices(struct podres *p, const struct hpn_alloc_req *req,
		       const struct podres_xclaim *xc, int timeout_ms, podres_fn done, void *ud);

#endif
