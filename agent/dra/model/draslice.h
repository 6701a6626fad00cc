/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_DRASLICE_H
#define HPN_DRASLICE_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "gpu.h"
#include "types.h"

/*
 * The pool's NICs as a DRA driver publishes them (resource.k8s.io/v1
 * ResourceSlice, doc/dra.md): each NIC read from sysfs into a plain struct,
 * a device name per NIC, and the slice objects as JSON. Nothing here talks
 * to the API server; the agent publishes what this renders.
 */

#define HPN_DRA_DRIVER "hpn-rdma.alibabacloud.com" /* the default driver name */
/* resource.k8s.io/v1 limits (ResourceSliceMaxDevices, ...MaxAttributesAndCapacitiesPerDevice,
 * DeviceAttributeMaxValueLength). */
#define HPN_DRA_MAX_DEVICES 128
/*
 * ResourceSliceMaxDevicesWithAdvancedFeatures: a slice where any device has
 * a taint or consumes counters (a shared NIC's two devices).
 */
#define HPN_DRA_MAX_DEVICES_TAINTED 64
#define HPN_DRA_MAX_TAINTS	    16 /* DeviceTaintsMaxLength: taints of one device */
#define HPN_DRA_MAX_ATTRS	    32
#define HPN_DRA_MAX_VALUE	    64
#define HPN_DRA_NAME_MAX	    64 /* a device name, a DNS label (63) with the NUL */

/*
 * The taint a device is published with (KEP-5055, Device.taints): the
 * driver's key "<driver>/unhealthy" (HPN_DRA_TAINT_NAME), a value, an
 * effect; the scheduler allocates a tainted device only to a claim that
 * tolerates it (NoSchedule), the eviction controller also evicts the pods
 * using it (NoExecute), None only says so.
 */
#define HPN_DRA_TAINT_NAME "unhealthy"
struct hpn_dra_taint {
	char effect[12]; /* "NoSchedule", "NoExecute" or "None"; "": no taint */
	char value[64];	 /* why, a label value (63 at most, [A-Za-z0-9._-]); "": none */
	long long since; /* timeAdded, seconds since the epoch: when it was first seen */
};

/* One pool NIC as a DRA device. */
struct hpn_dra_nic {
	char ifname[HPN_IFNAMSIZ];
	char pci[HPN_PCI_STR]; /* "0000:1b:00.0"; empty: no PCI function of its own */
	unsigned int dev_port; /* the netdev's port on its PCI function (sysfs dev_port) */
	/*
	 * Where NCCL places the NIC: its RDMA device's PCI function (an eRDMA
	 * device's own, beside the ENI's virtio-net function), else the
	 * netdev's; path empty: sysfs does not place it.
	 */
	struct hpn_pci_pos pos;
	char rdma[HPN_IBDEV_MAX];   /* its RDMA device; empty: none */
	char rdma_pci[HPN_PCI_STR]; /* that device's own PCI function; empty: none (software) */
	char link_layer[16];	    /* "Ethernet", "InfiniBand"; empty: unknown */
	char transport[8];	    /* "roce", "ib", "iwarp"; empty: no RDMA device or unknown */
	unsigned long speed_mbps;   /* 0: unknown (link down, virtual) */
	char driver[128];	    /* the kernel driver: "mlx5_core", "erdma", "virtio_net" */
	bool softroce_capable;	    /* Ethernet with no hardware RDMA device: rxe could serve it */
	unsigned int rail;	    /* its index among the pool's NICs, in PCI order */
	struct hpn_dra_taint taint; /* the caller's, not sysfs's: unhealthy but present */
	unsigned int port;	    /* the RDMA device's port serving the netdev; 0: none */
	/*
	 * The caller's (hpn_dra_nic_shares): 0, published as one device; else
	 * the pods that may share it, N, published twice (doc/dra.md).
	 */
	unsigned int shares;
};

/* An effect a device taint may have: "NoSchedule", "NoExecute", "None" (Kubernetes 1.35 on). */
bool hpn_dra_taint_effect_valid(const char *effect);
/* A label value as the API checks one: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends. */
bool hpn_dra_label_value(const char *v);

/*
 * Fills *ret for netdev ifname from sysfs under sysfs_root: its PCI function
 * (a virtio NIC's PCI parent), its driver, speed and dev_port, and its RDMA
 * device (hpn_rdma_of_netdev: RDMA netlink on the real root, sysfs on a fake
 * one) with that device's PCI function, port 1 link layer and node type; the
 * place is the RDMA device's function when it has one, else the netdev's; the
 * netdev's type gives the link layer when there is no RDMA device. What sysfs
 * does not say is left empty or 0. Code 100 naming ifname when the netdev is
 * not there.
 */
int hpn_dra_nic_read(const char *sysfs_root, const char *ifname, unsigned int rail,
		     struct hpn_dra_nic *ret, struct hpn_err *err);

/*
 * The NIC's device name, a DNS label stable across restarts: "pci-" and the
 * PCI address with ':' and '.' as '-' ("pci-0000-1b-00-0"), and "-p<N>" for
 * dev_port N > 0 (a second port of one function); a NIC without a PCI
 * function is "net-", its name in [a-z0-9-] (others as '-'), '-' and 8 hex
 * digits of a hash of the name itself, so "eth_0" and "eth.0" stay apart.
 * -EINVAL when the NIC has neither a PCI address nor a netdev name.
 */
int hpn_dra_device_name(const struct hpn_dra_nic *nic, char out[HPN_DRA_NAME_MAX]);

/*
 * A NIC that pods share (KEP-5075: a child of it in each pod) is published
 * twice: as itself, and as "<its device name>-shared", a device the
 * scheduler may allocate many times. No NIC's own name ends so (a PCI one
 * ends in a digit, a "net-" one in 8 hex digits).
 */
#define HPN_DRA_SHARE_SUFFIX "-shared"
/* The shared device's name of the NIC whose device name is nic_device; -EINVAL when too long. */
int hpn_dra_share_name(const char *nic_device, char out[HPN_DRA_NAME_MAX]);
/* device is a NIC's shared device: true, and its NIC's device name in nic_device. */
bool hpn_dra_share_of(const char *device, char nic_device[HPN_DRA_NAME_MAX]);

/*
 * The shares the NIC can be published with (drashare.h's
 * hpn_dra_gid_shares on its RDMA device's port), 0 when it cannot be
 * shared: an RDMA device that is not RoCE (InfiniBand, iWARP as eRDMA), a
 * Soft-RoCE (rxe) one or none, no GID table. Whether the node's RDMA netns
 * mode lets pods share it is the caller's to judge.
 */
unsigned int hpn_dra_nic_shares(const char *sysfs_root, const struct hpn_dra_nic *nic);

struct cJSON;
/*
 * The NIC's attributes as its device in the slice has them (a
 * DeviceAttribute object by name: the device metadata's, drameta.h); the
 * caller frees it. NULL with err set (a value over the API's limit, no memory).
 */
struct cJSON *hpn_dra_nic_attrs(const struct hpn_dra_nic *nic, struct hpn_err *err);

/*
 * How many ResourceSlices the pool nics[0..n) takes (at least 1: an empty
 * pool is one slice). The NICs go in order, each slice as full as the API
 * lets it be: 128 devices, 64 when any of them has a taint or consumes
 * counters (a tainted NIC after 64 untainted ones starts the next slice). A
 * NIC with shares is two devices, in one slice, both consuming its counter
 * set; the counter sets of those NICs follow the device slices, in slices
 * of their own, 8 a slice (HPN_DRA_MAX_COUNTER_SETS).
 */
size_t hpn_dra_slice_split(const struct hpn_dra_nic *nics, size_t n);

/*
 * Slice slice_index of slice_count (which must be hpn_dra_slice_split) of
 * the pool nics[0..n): a ResourceSlice of resource.k8s.io/v1 as JSON,
 * holding that slice's devices with their attributes (doc/dra.md: the
 * standard resource.kubernetes.io/pcieRoot, pciBusID and numaNode of the
 * RDMA device's PCI function, else the netdev's, where sysfs gave them; the
 * driver's own unqualified ones) and, for a NIC with one, its taint
 * "<driver>/unhealthy" with value, effect and timeAdded (RFC 3339, UTC); a
 * NIC with shares consumes its counter set and is followed by its shared
 * device (hpn_dra_share_name: the same attributes and taint, the bool
 * attribute "shared", allowMultipleAllocations, capacity "shares" of N); or,
 * for an index past the device slices, a slice of counter sets (one a
 * shared NIC, named by its device, counter "nic" of 1); each slice named
 * "<node>-<driver>-<index>" (cut, with a hash, to 253). Checks the
 * API's limits: driver, node and pool names, device names unique in the
 * pool, string values of at most 64 characters, a taint's effect and value
 * (the error names the NIC). The caller frees the text; NULL with err set
 * on failure.
 */
char *hpn_dra_slice_render(const char *driver, const char *node, const char *pool, long generation,
			   const struct hpn_dra_nic *nics, size_t n, size_t slice_index,
			   size_t slice_count, struct hpn_err *err);

/* ---- the publisher's round, from the API's list -------------------------------------- */

#define HPN_DRA_SLICES_LIST_MAX 64 /* slices of our node and driver read, at most */
/* The highest pool generation read or written: exact in a double, which cJSON keeps. */
#define HPN_DRA_GENERATION_MAX 999999999999999L

struct cJSON;

/* metadata.<key> of an object of the API, when a string; else NULL. */
const char *hpn_dra_slice_meta(const struct cJSON *obj, const char *key);

/*
 * What a round of the ResourceSlice publisher writes, decided from the API's
 * answer to the list of the slices of node and driver: nothing when the API
 * holds the pool's slices already at a generation of their own (one
 * listed, at least floor, our last). When it holds exactly our slices, each
 * at that generation with the devices (or counter sets) ours has (by name,
 * in order), only
 * the slices that differ (a taint, an attribute, a capacity) are PUT, at that
 * generation: every device stays in its slice, so whichever of the old and
 * new slices a reader sees, it sees each device once. Otherwise (a device
 * added, removed or moved to another slice, a slice missing or someone
 * else's) every slice at a generation above every one listed and floor
 * (HPN_DRA_GENERATION_MAX at most: one listed above it is not read, and
 * the generation written is one the next round reads), each to be PUT over
 * the resourceVersion listed for its name or POSTed, then the listed slices
 * not ours DELETEd. A taint of ours the list holds on a device of the same
 * name with the same effect keeps its timeAdded (a restarted agent does not
 * move it).
 */
struct hpn_dra_slices_plan {
	struct cJSON **v; /* the pool's slices at gen, count of them (hpn_dra_slice_split) */
	size_t count;
	long gen;
	bool write;	    /* some of v to write; false: the API holds them already */
	bool *put;	    /* v[i] to write (write only); false: the API holds it as it is */
	bool bumped;	    /* gen is a new generation (write): every slice written */
	const char **rv;    /* v[i]'s resourceVersion in the list, "" when not listed */
	const char **del;   /* names of the listed slices not ours, in the list's order, n_del */
	size_t n_del;	    /* (a listed slice without a name ends them) */
	struct cJSON *list; /* the answer, parsed: rv and del point into it */
};

/*
 * The plan for the pool nics[0..n) of driver and node (the pool's name too)
 * from the list's answer body[0..len): code HPN_E_KUBE (-EPROTO) naming what
 * when it is not JSON with items, an array of at most HPN_DRA_SLICES_LIST_MAX;
 * -EINVAL with err as hpn_dra_slice_render set it when the pool cannot be
 * rendered. hpn_dra_slices_plan_free after, either way.
 */
int hpn_dra_slices_plan(const char *body, size_t len, const char *what, const char *driver,
			const char *node, const struct hpn_dra_nic *nics, size_t n, long floor,
			struct hpn_dra_slices_plan *ret, struct hpn_err *err);
void hpn_dra_slices_plan_free(struct hpn_dra_slices_plan *p);

#endif
