/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_NRI_ADJUST_H
#define HPN_AGENT_NRI_ADJUST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "nri.pb-c.h"

/*
 * What NRI's CreateContainer answers for a container of a pod hpn-rdma
 * attached, as data: the pod's RDMA character devices with their cgroup
 * rules, its NCCL hints file bind-mounted read-only, RLIMIT_MEMLOCK raised;
 * minus what the container has already (a device the device plugin, CDI or
 * a DRA claim gave, a mount at that path: its own, or the hints mount of a
 * CDI device's spec, which containerd applies to the spec before it asks
 * NRI; a higher limit). Pure:
 * the service (agent/nri.c) finds the pod's devices and file; this decides
 * and packs.
 */

#define NRI_DEVS_MAX 32
#define NRI_PATH_MAX 4096

struct nri_dev {
	char path[64]; /* in the container: /dev/infiniband/uverbs0, /dev/infiniband/rdma_cm */
	unsigned int major, minor;
};

/* What a container of an attached pod should have. */
struct nri_want {
	struct nri_dev devs[NRI_DEVS_MAX];
	size_t n_devs;
	char hints[NRI_PATH_MAX];    /* the pod's hints file on the host ("": none) */
	char hints_at[NRI_PATH_MAX]; /* its path in the container */
	uint64_t memlock;	     /* RLIMIT_MEMLOCK at least this (0: leave it) */
};

/* What the answer gave, and what the container had already. */
struct nri_given {
	size_t devs, devs_had;
	bool hints, hints_had;
	bool memlock, memlock_had;
};

/*
 * The CreateContainerResponse for container c (its linux devices, mounts
 * and rlimits read) packed into *ret (malloc'd, *ret_len bytes; an empty
 * message when nothing is to change). given says what. -ENOMEM.
 */
int nri_adjust(const struct nri_want *w, const Nri__Pkg__Api__V1alpha1__Container *c, uint8_t **ret,
	       size_t *ret_len, struct nri_given *given);

/* Whether container c has a device at path (its spec's linux devices). */
bool nri_has_device(const Nri__Pkg__Api__V1alpha1__Container *c, const char *path);

#endif
