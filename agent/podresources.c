// SPDX-License-Identifier: Apache-2.0
/*
 * The kubelet's PodResources List, as a client (podresources.h): the CNI
 * lookup's answers come from it, the pod's NICs and its GPUs. Messages are
 * packed and checked here with protobuf-c; rpc.c carries the bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "log.h"
#include "podresources.h"
#include "podresources.pb-c.h"
#include "rpc.h"
#include "util.h"

int podres_init(struct podres *p, struct rpc *rpc, const char *kubelet_dir, const char *resource,
		const char *gpu_resources, const char *gpu_driver)
{
	p->rpc = rpc;
	p->n_gpu_resources = 0;
	if (hpn_snprintf(p->sock, sizeof(p->sock), "%s/pod-resources/kubelet.sock", kubelet_dir) <
		    0 ||
	    hpn_snprintf(p->resource, sizeof(p->resource), "%s", resource) < 0 ||
	    hpn_snprintf(p->gpu_driver, sizeof(p->gpu_driver), "%s", gpu_driver) < 0)
		return -ENAMETOOLONG;
	for (const char *s = gpu_resources; *s;) {
		size_t len = strcspn(s, ",");

		if (len) {
			if (p->n_gpu_resources == PODRES_GPU_RESOURCES)
				return -E2BIG;
			if (len >= sizeof(p->gpu_resources[0]))
				return -ENAMETOOLONG;
			memcpy(p->gpu_resources[p->n_gpu_resources], s, len);
			p->gpu_resources[p->n_gpu_resources++][len] = '\0';
		}
		s += len + (s[len] == ',');
	}
	return 0;
}

struct pod_ask {
	struct podres *p;
	struct hpn_alloc_req req;
	/* The pod's extended-resource claim, its devices GPUs whatever their driver ("": none). */
	char xclaim[PODRES_DRIVER_MAX];
	int timeout_ms;
	podres_fn done;
	void *ud;
};

/* GPU IDs of one answer that were left out: said once per lookup. */
struct gpu_skips {
	size_t bad, over;
	char first_bad[48]; /* printable, cut short */
};

static bool gpu_resource(const struct podres *p, const char *name)
{
	for (size_t i = 0; i < p->n_gpu_resources; i++)
		if (!strcmp(p->gpu_resources[i], name))
			return true;
	return false;
}

/* id appended to al's GPUs unless it is there already; a bad ID or one too many is counted. */
static void add_gpu(struct hpn_alloc *al, const char *id, struct gpu_skips *sk)
{
	if (!id || !hpn_gpu_id_valid(id)) {
		/* Whatever the kubelet sent goes into a log line: printable bytes only. */
		if (!sk->bad++) {
			size_t i;

			for (i = 0; id && id[i] && i + 1 < sizeof(sk->first_bad); i++)
				sk->first_bad[i] = id[i] > 0x20 && id[i] < 0x7f ? id[i] : '?';
			sk->first_bad[i] = '\0';
		}
		return;
	}
	for (size_t k = 0; k < al->n_gpus; k++)
		if (!strcmp(al->gpus[k], id))
			return;
	if (al->n_gpus == HPN_MAX_GPUS) {
		sk->over++;
		return;
	}
	snprintf(al->gpus[al->n_gpus++], HPN_GPU_ID_MAX, "%s", id);
}

/* The NIC resource's IDs, then the GPUs, of one container. */
static void container(const struct pod_ask *q, const V1__ContainerResources *cr,
		      struct hpn_alloc *al, struct gpu_skips *sk)
{
	const struct podres *p = q->p;

	for (size_t d = 0; d < cr->n_devices; d++) {
		const V1__ContainerDevices *cd = cr->devices[d];

		if (!cd->resource_name)
			continue;
		if (gpu_resource(p, cd->resource_name)) {
			for (size_t i = 0; i < cd->n_device_ids; i++)
				add_gpu(al, cd->device_ids[i], sk);
			continue;
		}
		if (strcmp(cd->resource_name, p->resource))
			continue;
		for (size_t i = 0; i < cd->n_device_ids; i++) {
			bool seen = false;

			if (!hpn_alloc_id_valid(cd->device_ids[i]))
				continue;
			for (size_t k = 0; k < al->n; k++)
				seen |= !strcmp(al->ids[k], cd->device_ids[i]);
			if (!seen && al->n < HPN_ALLOC_MAX_DEVICES)
				snprintf(al->ids[al->n++], HPN_ALLOC_ID_MAX, "%s",
					 cd->device_ids[i]);
		}
	}
	for (size_t d = 0; d < cr->n_dynamic_resources; d++) {
		const V1__DynamicResource *dr = cr->dynamic_resources[d];
		/*
		 * The kubelet lists the scheduler's claim, all its devices, for
		 * each container its status maps (KEP-5004, "Actuation"), after
		 * the container's own claims; claim_namespace is the pod's.
		 */
		bool gpus = q->xclaim[0] && dr->claim_name && dr->claim_namespace &&
			    !strcmp(dr->claim_name, q->xclaim) &&
			    !strcmp(dr->claim_namespace, q->req.namespace);

		for (size_t i = 0; i < dr->n_claim_resources; i++) {
			const V1__ClaimResource *c = dr->claim_resources[i];

			if (gpus || (p->gpu_driver[0] && c->driver_name &&
				     !strcmp(c->driver_name, p->gpu_driver)))
				add_gpu(al, c->device_name, sk);
		}
	}
}

static void listed(void *ud, int status, const char *msg, const uint8_t *buf, size_t len)
{
	struct pod_ask *q = ud;
	struct podres *p = q->p;
	struct hpn_alloc al = { 0 };
	struct gpu_skips sk = { 0 };
	char why[512];
	V1__ListPodResourcesResponse *r = NULL;

	snprintf(al.resource, sizeof(al.resource), "%s", p->resource);
	if (status == RPC_DEADLINE_EXCEEDED) {
		hpn_msgf(why, sizeof(why),
			 "PodResources List at %s: no answer within %d ms (the kubelet is slow)",
			 p->sock, q->timeout_ms);
		q->done(q->ud, NULL, why);
		goto out;
	}
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
			container(q, pr->containers[c], &al, &sk);
	}
	if (sk.bad)
		hpn_warn("PodResources: pod %s/%s: %zu GPU IDs skipped, not of a GPU ID's syntax "
			 "(the first: \"%s\")",
			 q->req.namespace, q->req.name, sk.bad, sk.first_bad);
	if (sk.over)
		hpn_warn("PodResources: pod %s/%s: %zu GPUs past the first %d skipped",
			 q->req.namespace, q->req.name, sk.over, HPN_MAX_GPUS);
	q->done(q->ud, &al, NULL);
out:
	if (r)
		v1__list_pod_resources_response__free_unpacked(r, NULL);
	free(q);
}

/*
 * Are the devices of xc's claim all GPUs? When each resource it serves is a
 * GPU resource. PodResources does not say which request a device serves, so
 * a claim that serves another resource too counts only its devices of the GPU
 * driver, as any claim; said.
 */
static bool xclaim_gpus(const struct podres *p, const struct hpn_alloc_req *req,
			const struct podres_xclaim *xc)
{
	size_t gpu = 0, other = 0;

	for (const char *s = xc->resources; *s;) {
		size_t len = strcspn(s, ",");
		bool is = false;

		for (size_t i = 0; i < p->n_gpu_resources; i++)
			is |= strlen(p->gpu_resources[i]) == len &&
			      !memcmp(p->gpu_resources[i], s, len);
		gpu += is;
		other += !is;
		s += len + (s[len] == ',');
	}
	if (gpu && other)
		hpn_warn("PodResources: pod %s/%s: claim %s serves GPUs and other resources (%s): "
			 "only its devices of --gpu-driver are GPUs",
			 req->namespace, req->name, xc->name, xc->resources);
	return gpu && !other;
}

int podres_pod_devices(struct podres *p, const struct hpn_alloc_req *req,
		       const struct podres_xclaim *xc, int timeout_ms, podres_fn done, void *ud)
{
	V1__ListPodResourcesRequest lr = V1__LIST_POD_RESOURCES_REQUEST__INIT;
	struct pod_ask *q = calloc(1, sizeof(*q));
	uint8_t buf[8];
	size_t len;

	if (!q)
		return -ENOMEM;
	q->p = p;
	q->req = *req;
	if (xc && xclaim_gpus(p, req, xc))
		snprintf(q->xclaim, sizeof(q->xclaim), "%s", xc->name);
	q->timeout_ms = timeout_ms;
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
