/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_GPU_H
#define HPN_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "types.h"
#include "util.h"

/*
 * A pod's GPUs and the NICs nearest them (doc/gpu.md): the kubelet's GPU IDs
 * placed on the host's PCI tree through procfs, the distance between two PCI
 * functions in NCCL's classes, and the choice of one NIC per GPU.
 */

/* Where a PCI function sits: its sysfs path below devices/ and its NUMA node. */
struct hpn_pci_pos {
	char path[512]; /* "pci0000:00/0000:00:01.0/.../0000:1b:00.0"; empty: not placed */
	int numa;	/* -1: the kernel does not say */
};
/* PCI function bdf ("0000:1b:00.0") under sysfs_root/bus/pci/devices. */
int hpn_pci_pos_of_pci(const char *sysfs_root, const char *bdf, struct hpn_pci_pos *ret);
/* The PCI function of netdev ifname (a virtio device: its PCI parent); -ENOENT when none. */
int hpn_pci_pos_of_netdev(const char *sysfs_root, const char *ifname, struct hpn_pci_pos *ret);
/*
 * Where a NIC sits as NCCL sees it: its RDMA device's PCI function rdma_pci
 * when it has one (NCCL places a NIC by class/infiniband/<dev>/device; an
 * eRDMA device is a function of its own beside the ENI's virtio-net one),
 * else netdev ifname's. rdma_pci NULL or "": the netdev's.
 */
int hpn_pci_pos_of_nic(const char *sysfs_root, const char *ifname, const char *rdma_pci,
		       struct hpn_pci_pos *ret);
/* The class of a pair; UNKNOWN when either is not placed. */
enum hpn_gpu_dist hpn_pci_dist(const struct hpn_pci_pos *a, const struct hpn_pci_pos *b);

/* One GPU of a pod: the first ID naming it, and where procfs puts it. */
struct hpn_gpu {
	char id[HPN_GPU_ID_MAX];
	char pci[HPN_PCI_STR]; /* empty: procfs knows no such GPU */
	struct hpn_pci_pos pos;
};
struct hpn_gpus {
	struct hpn_gpu v[HPN_MAX_GPUS];
	size_t n;	  /* distinct GPUs: placed ones in PCI order, then unknown ones */
	size_t n_unknown; /* the last n_unknown of v */
};

/*
 * The distinct GPUs ids name, read from proc_root/driver/nvidia/gpus/<bdf>/
 * information ("GPU UUID:", "Device Minor:"): "GPU-<uuid>", a replica
 * "GPU-<uuid>::<n>", a MIG device in the old "MIG-GPU-<uuid>/<gi>/<ci>" form
 * and DRA's "gpu-<minor>" and "gpu-<minor>-..." name their GPU; a MIG UUID of
 * today's form ("MIG-<uuid>") and any ID procfs does not list are unknown.
 * Several IDs of one GPU (MIG slices, replicas) count once. Code 4 for an
 * ID that is not of the syntax; a missing procfs is not an error (every GPU
 * is unknown).
 */
int hpn_gpus_resolve(const char *proc_root, const char *sysfs_root,
		     const char (*ids)[HPN_GPU_ID_MAX], size_t n, struct hpn_gpus *ret,
		     struct hpn_err *err);

/* A pool NIC as the choice sees it. */
struct hpn_gpu_nic {
	struct hpn_pci_pos pos;
	bool free; /* no other attachment holds it */
};

/* NIC pick i of the attachment: which candidate, which GPU it serves, how far. */
struct hpn_gpu_pick {
	size_t nic;		/* index into the candidates */
	size_t gpu;		/* index into the GPUs */
	enum hpn_gpu_dist dist; /* between the two */
	/* The nearest class a NIC left free (or this one) had to that GPU: dist > best is a far pick. */
	enum hpn_gpu_dist best;
};

/*
 * n picks among free candidates for g's GPUs: pick i serves GPU target(i) (i
 * mod g->n when n >= g->n, else spread: i * g->n / n), and every GPU's NIC
 * is the nearest free one, nearer classes served first over all GPUs, the
 * candidates' order among equals; each NIC once. With g->n == 0 the first
 * n free ones in candidate order (dist UNKNOWN). -ENOSPC when fewer than n
 * are free. Pure: reads nothing but its arguments.
 */
int hpn_gpu_assign(const struct hpn_gpus *g, const struct hpn_gpu_nic *nics, size_t n_nics,
		   size_t n, struct hpn_gpu_pick *picks);

/*
 * The same report for NICs chosen elsewhere (the kubelet's device plugin
 * allocation): picks[i].nic is given for each i; each is paired with the GPU
 * it is nearest to, GPUs shared out as hpn_gpu_assign would, and best
 * computed against the candidates still free.
 */
void hpn_gpu_pair(const struct hpn_gpus *g, const struct hpn_gpu_nic *nics, size_t n_nics, size_t n,
		  struct hpn_gpu_pick *picks);

#endif
