/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_DPREQUEST_H
#define HPN_AGENT_DPREQUEST_H

#include <stddef.h>

#include "cdi.h"
#include "conf.h"
#include "deviceplugin.pb-c.h"
#include "devices.h"

struct cdispecs;

/*
 * The device plugin's answers to the kubelet's requests once unpacked:
 * GetPreferredAllocation's picks and Allocate's devices, each container's
 * IDs judged against the pool first. deviceplugin.c unpacks the request and
 * sends what these answer; test/fuzz/fuzz_dprequest.c calls the same. No
 * RPC here: a gRPC status (rpc.h's codes) and a message, or the response.
 */

#define DP_MAX_CONTAINERS 64 /* container requests in one call, at most */

/* GetPreferredAllocation's answer: resp points into the rest, and into the request. */
struct dp_preferred {
	V1beta1__PreferredAllocationResponse resp;
	V1beta1__ContainerPreferredAllocationResponse *cr, **crp;
	const char **picks;
};

/*
 * GetPreferredAllocation for r (borrowed: the answer names its strings):
 * per container, its available and must-include IDs each ones the pool
 * lists, at most once, at most HPN_AGENT_MAX_DEVICES, then agent_prefer's
 * picks. RPC_OK with out->resp to send, else a status (INVALID_ARGUMENT,
 * INTERNAL) and msg. dp_preferred_free after, either way.
 */
int dp_prefer(const struct agent_devs *devs, const V1beta1__PreferredAllocationRequest *r,
	      struct dp_preferred *out, char *msg, size_t len);
void dp_preferred_free(struct dp_preferred *p);

/* One container's Allocate answer: the RDMA character devices of its NICs, envs naming them. */
#define DP_MAX_SPECS (HPN_AGENT_MAX_DEVICES * 2 + 2)
struct dp_container_answer {
	V1beta1__ContainerAllocateResponse resp;
	V1beta1__DeviceSpec specs[DP_MAX_SPECS];
	V1beta1__DeviceSpec *specp[DP_MAX_SPECS];
	char paths[DP_MAX_SPECS][64]; /* in the container: /dev/infiniband[/<name>] */
	char host_paths[DP_MAX_SPECS]
		       [512]; /* on the host: <dev-root>/infiniband/<name>, a directory */
	V1beta1__ContainerAllocateResponse__EnvsEntry env[3];
	V1beta1__ContainerAllocateResponse__EnvsEntry *envp[3];
	char ids[4096], ibdevs[4096], uverbs[8192];
	V1beta1__CDIDevice cdi[HPN_AGENT_MAX_DEVICES];
	V1beta1__CDIDevice *cdip[HPN_AGENT_MAX_DEVICES];
	char cdi_names[HPN_AGENT_MAX_DEVICES][HPN_CDI_NAME_MAX];
};

/* What Allocate's answers name on the node: the device plugin's, borrowed. */
struct dp_node {
	const struct agent_devs *devs;
	const struct hpn_conf *conf; /* softRoce, agent.deviceDir and agent.cdiDir, sysfsRoot */
	const char *dev_root;	     /* where the host's device nodes are: /dev */
	struct cdispecs *cdi;	     /* the agent's CDI specs (cdispecs.h); NULL: off */
};

/* Allocate's answer: resp points into the rest. */
struct dp_allocated {
	V1beta1__AllocateResponse resp;
	struct dp_container_answer *ca;
	V1beta1__ContainerAllocateResponse **crp;
};

/*
 * Allocate for r: per container, its IDs ones the pool lists, at most once
 * (else INVALID_ARGUMENT), none a NIC ADD took from the pool for a pod the
 * kubelet gave nothing (else FAILED_PRECONDITION, naming that pod), then its
 * answer: the RDMA character devices of its NICs under nd->dev_root, their
 * CDI devices whose specs are in place, and for NICs whose RDMA device ADD
 * makes (softRoce) one directory, <agent.deviceDir>/<least ID> made empty
 * with a link to it for every other ID (INTERNAL when it cannot be). RPC_OK
 * with out->resp to send, else a status and msg. dp_allocated_free after,
 * either way.
 */
int dp_allocate(const struct dp_node *nd, const V1beta1__AllocateRequest *r,
		struct dp_allocated *out, char *msg, size_t len);
void dp_allocated_free(struct dp_allocated *a);

#endif
