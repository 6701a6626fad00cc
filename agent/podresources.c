// SPDX-License-Identifier: Apache-2.0
/*
 * The kubelet's PodResources List, as a client (podresources.h): the CNI
 * lookup's answers come from it. Messages are packed and checked here with
 * protobuf-c; rpc.c carries the bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "podresources.h"
#include "podresources.pb-c.h"
#include "rpc.h"
#include "util.h"

int podres_init(struct podres *p, struct rpc *rpc, const char *kubelet_dir, const char *resource)
{
	p->rpc = rpc;
	if (hpn_snprintf(p->sock, sizeof(p->sock), "%s/pod-resources/kubelet.sock", kubelet_dir) <
		    0 ||
	    hpn_snprintf(p->resource, sizeof(p->resource), "%s", resource) < 0)
		return -ENAMETOOLONG;
	return 0;
}

struct pod_ask {
	struct podres *p;
	struct hpn_alloc_req req;
	podres_fn done;
	void *ud;
};

static void listed(void *ud, int status, const char *msg, const uint8_t *buf, size_t len)
{
	struct pod_ask *q = ud;
	struct podres *p = q->p;
	struct hpn_alloc al = { 0 };
	char why[512];
	V1__ListPodResourcesResponse *r = NULL;

	snprintf(al.resource, sizeof(al.resource), "%s", p->resource);
	if (status != RPC_OK) {
		hpn_msgf(why, sizeof(why), "PodResources List at %s: status %d %s", p->sock, status,
			 msg);
		q->done(q->ud, NULL, why);
		goto out;
	}
	r = v1__list_pod_resources_response__unpack(NULL, len, buf);
	if (!r) {
		hpn_msgf(why, sizeof(why), "PodResources List at %s: undecodable reply", p->sock);
		q->done(q->ud, NULL, why);
		goto out;
	}
	for (size_t n = 0; n < r->n_pod_resources; n++) {
		const V1__PodResources *pr = r->pod_resources[n];

		if (!pr->name || !pr->namespace_ || strcmp(pr->name, q->req.name) ||
		    strcmp(pr->namespace_, q->req.namespace))
			continue;
		al.pod_known = true;
		for (size_t c = 0; c < pr->n_containers; c++)
			for (size_t d = 0; d < pr->containers[c]->n_devices; d++) {
				const V1__ContainerDevices *cd = pr->containers[c]->devices[d];

				if (!cd->resource_name || strcmp(cd->resource_name, p->resource))
					continue;
				for (size_t i = 0; i < cd->n_device_ids; i++) {
					bool seen = false;

					if (!hpn_alloc_id_valid(cd->device_ids[i]))
						continue;
					for (size_t k = 0; k < al.n; k++)
						seen |= !strcmp(al.ids[k], cd->device_ids[i]);
					if (!seen && al.n < HPN_ALLOC_MAX_DEVICES)
						snprintf(al.ids[al.n++], HPN_ALLOC_ID_MAX, "%s",
							 cd->device_ids[i]);
				}
			}
	}
	q->done(q->ud, &al, NULL);
out:
	if (r)
		v1__list_pod_resources_response__free_unpacked(r, NULL);
	free(q);
}

int podres_pod_devices(struct podres *p, const struct hpn_alloc_req *req, int timeout_ms,
		       podres_fn done, void *ud)
{
	V1__ListPodResourcesRequest lr = V1__LIST_POD_RESOURCES_REQUEST__INIT;
	struct pod_ask *q = calloc(1, sizeof(*q));
	uint8_t buf[8];
	size_t len;

	if (!q)
		return -ENOMEM;
	q->p = p;
	q->req = *req;
	q->done = done;
	q->ud = ud;
	len = v1__list_pod_resources_request__pack(&lr, buf);
	if (rpc_unary(p->rpc, p->sock, "/v1.PodResourcesLister/List", buf, len, timeout_ms, listed,
		      q) < 0) {
		free(q);
		return -ENOMEM;
	}
	return 0;
}
