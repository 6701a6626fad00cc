/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_POOL_H
#define HPN_POOL_H

#include <netlink/netlink.h>
#include <stdbool.h>

#include "conf.h"
#include "err.h"
#include "gpu.h"
#include "link.h"
#include "rdma.h"
#include "store.h"

/*
 * Node-wide NIC pools (config "match"): which host netdevs a pool selects,
 * which of them other attachments' journals hold, and which an ADD takes.
 * Mechanism only: claim.c decides when (under the store lock) and ADD
 * journals the claim.
 */

/* A NIC some attachment's journal holds (read under the store lock). */
struct hpn_holder {
	struct hpn_link host; /* moved: the NIC itself; child: its parent */
	bool child;
	bool live; /* an ADD, DEL or GC in flight: the NIC may come back soon */
	char key[HPN_KEY_MAX];
};

struct hpn_holders {
	struct hpn_holder *v;
	size_t n;
};

/*
 * Every NIC recorded in the journals of the store except skip_key's (NULL:
 * none skipped): those are in use, from the claim until DEL, GC or a
 * rollback has given the NIC back. A journal that cannot be read is skipped
 * with a warning: GC reports it.
 */
int hpn_holders_load(struct hpn_store *st, const char *skip_key, struct hpn_holders *h,
		     struct hpn_err *err);
void hpn_holders_free(struct hpn_holders *h);
/* The holder of host netdev l (moved NICs only, or any, parents included), or NULL. */
const struct hpn_holder *hpn_held_by(const struct hpn_holders *h, const struct hpn_link *l,
				     bool moved_only);

struct hpn_linkv {
	struct hpn_link *v;
	struct hpn_rdma_dev *rd; /* per link, when match asked for RDMA devices */
	size_t n, cap;
};

/* The host netdevs (host: a socket in the host netns) match selects, in name order. */
int hpn_pool_candidates(struct nl_sock *host, const struct hpn_conf *conf, struct hpn_linkv *out,
			struct hpn_err *err);
void hpn_linkv_free(struct hpn_linkv *lv);

/* The NUMA node of netdev name's device under root (a virtio device asks its PCI parent). */
int hpn_netdev_numa(const char *root, const char *name, int *ret);

/*
 * One NIC the pool gives an ADD, with its RDMA device when match named RDMA
 * devices, and the GPU it serves (gpu: index into the pod's GPUs, SIZE_MAX
 * when none is known) at which class, and the nearest class a NIC left free had.
 */
struct hpn_pool_pick {
	struct hpn_link dev;
	bool has_rdma;
	struct hpn_rdma_dev rdma;
	size_t gpu;
	enum hpn_gpu_dist dist, best;
};

/*
 * n NICs from the pool into picks. Move mode takes NICs no other attachment
 * holds; shared modes the parents with the fewest children. Without GPUs
 * (g NULL or empty) in name order; with them, each the nearest to its GPU
 * (hpn_gpu_assign: a NIC placed by its RDMA device's PCI function, as NCCL
 * places it), the least used and then name order among equals. Code 11
 * when too few are free but NICs of runs in flight may come back, 100 when
 * too few are free.
 */
int hpn_pool_select(struct nl_sock *host, const struct hpn_conf *conf, const struct hpn_holders *h,
		    const struct hpn_gpus *g, size_t n, struct hpn_pool_pick *picks,
		    struct hpn_err *err);
/*
 * The report of hpn_gpu_pair for NICs chosen elsewhere (the kubelet's):
 * picks[0..n) have dev and has_rdma set (rdma too when it is); gpu, dist and
 * best are filled against the pool's NICs that h leaves free. Every NIC is
 * placed where NCCL places it: its RDMA device's PCI function.
 */
int hpn_pool_pair(struct nl_sock *host, const struct hpn_conf *conf, const struct hpn_holders *h,
		  const struct hpn_gpus *g, size_t n, struct hpn_pool_pick *picks,
		  struct hpn_err *err);

/*
 * A pool (match) is fit to serve: the drivers it names are loaded and it has
 * at least count NICs, free on the host or held by pods (a pool that pods
 * use up is working, not broken: that ADD answers 100). 1 when the config
 * has no match (note says so), 0 when fit (note says how many are free and
 * held), else code 50. Creates nothing. A readiness check of STATUS and the
 * doctor.
 */
int hpn_pool_ready(const struct hpn_conf *conf, char *note, size_t len, struct hpn_err *err);

#endif
