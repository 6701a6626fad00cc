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
#define HPN_DRA_MAX_ATTRS   32
#define HPN_DRA_MAX_VALUE   64
#define HPN_DRA_NAME_MAX    64 /* a device name, a DNS label (63) with the NUL */

/* One pool NIC as a DRA device. */
struct hpn_dra_nic {
	char ifname[HPN_IFNAMSIZ];
	char pci[HPN_PCI_STR];	  /* "0000:1b:00.0"; empty: no PCI function of its own */
	unsigned int dev_port;	  /* the netdev's port on its PCI function (sysfs dev_port) */
	struct hpn_pci_pos pos;	  /* path empty: sysfs does not place it */
	char rdma[HPN_IBDEV_MAX]; /* its RDMA device; empty: none */
	char link_layer[16];	  /* "Ethernet", "InfiniBand"; empty: unknown */
	char transport[8];	  /* "roce", "ib", "iwarp"; empty: no RDMA device or unknown */
	unsigned long speed_mbps; /* 0: unknown (link down, virtual) */
	char driver[128];	  /* the kernel driver: "mlx5_core", "erdma", "virtio_net" */
	bool softroce_capable;	  /* Ethernet with no hardware RDMA device: rxe could serve it */
	unsigned int rail;	  /* its index among the pool's NICs, in PCI order */
};

/*
 * Fills *ret for netdev ifname from sysfs under sysfs_root: its PCI function
 * (a virtio NIC's PCI parent) and place, its driver, speed and dev_port, and
 * its RDMA device (hpn_rdma_of_netdev: RDMA netlink on the real root, sysfs on
 * a fake one) with that device's port 1 link layer and node type; the netdev's
 * type gives the link layer when there is no RDMA device. What sysfs does not
 * say is left empty or 0. Code 100 naming ifname when the netdev is not there.
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

/* How many ResourceSlices a pool of n devices takes (at least 1: an empty pool is one slice). */
size_t hpn_dra_slice_split(size_t n);

/*
 * Slice slice_index of slice_count (which must be hpn_dra_slice_split(n))
 * of the pool nics[0..n): a ResourceSlice of resource.k8s.io/v1 as JSON,
 * holding the devices [index * 128, ...) with their attributes
 * (doc/dra.md: the standard resource.kubernetes.io/pcieRoot, pciBusID and
 * numaNode where sysfs gave them, the driver's own unqualified ones), named
 * "<node>-<driver>-<index>" (cut, with a hash, to 253). Checks the API's
 * limits: driver, node and pool names, device names unique in the pool,
 * string values of at most 64 characters (the error names the NIC). The
 * caller frees the text; NULL with err set on failure.
 */
char *hpn_dra_slice_render(const char *driver, const char *node, const char *pool, long generation,
			   const struct hpn_dra_nic *nics, size_t n, size_t slice_index,
			   size_t slice_count, struct hpn_err *err);

#endif
