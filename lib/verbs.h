/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_VERBS_H
#define HPN_VERBS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "rdma.h"
#include "types.h"

/* What the pod sees of its RDMA device: the facts the result and NCCL hints carry. */
struct hpn_rdma_bind {
	char device[HPN_IBDEV_MAX];
	uint32_t port;
	int gid_index;
	char gid[INET6_ADDRSTRLEN];  /* the GID, in IPv6 notation */
	char addr[INET6_ADDRSTRLEN]; /* the interface address it carries, bound with rdma_cm */
	char link_layer[16];	     /* "Ethernet" or "InfiniBand" */
	char transport[8];	     /* "roce", "iwarp" or "ib" */
	uint16_t lid;		     /* InfiniBand only */
	char port_guid[20];	     /* InfiniBand only: "0002:c903:0031:7cc1" */
	/*
	 * RoCE and InfiniBand: whether the port has its GSI QP (QP1), without
	 * which rdma_cm binds but cannot connect (7.3 does not re-create it
	 * for an rxe device moved into a netns); gsi_known false: not asked.
	 */
	bool gsi_known, gsi;
	/* Its character devices as the pod's sysfs shows them (softroce.c makes their nodes). */
	struct hpn_rdma_cdevs cdevs;
};

/*
 * Proves, from inside the netns of netns_fd, that RDMA device `device` port
 * `port` serves interface ifname: libibverbs lists and opens it, the port is
 * ACTIVE, and (RoCE) the GID table has a RoCE v2 entry whose netdev is ifname
 * and whose GID is ifname's address (IPv4 preferred, else IPv6); then
 * rdma_bind_addr on that address resolves to the same device and port.
 * Waits up to timeout_ms for what the kernel fills in asynchronously (port
 * state, GID entries). want_gid >= 0 also requires that GID index (CHECK).
 * Runs in a child process with its own mount namespace and a sysfs of the pod
 * netns, so the caller's netns, mounts and library state stay untouched.
 * Failures are code 108 and name what is missing.
 */
int hpn_rdma_verify(int netns_fd, const char *device, uint32_t port, const char *ifname,
		    int want_gid, int timeout_ms, struct hpn_rdma_bind *ret, struct hpn_err *err);

#endif
