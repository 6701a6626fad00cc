/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_COUNTERS_H
#define HPN_COUNTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/*
 * The kernel's counters of what an attachment holds, for hpn-rdma-agent's
 * metrics: a netdev's link statistics and an RDMA port's state and hardware
 * counters. Read only. netns_fd (-1: the caller's own netns) is entered by
 * the calling thread alone, for as long as it takes to open a netlink socket
 * there, and left again; nothing else of the process changes netns.
 */

/* IFLA_STATS64 of one netdev, with its flags and MTU. */
struct hpn_link_stats {
	uint64_t rx_bytes, tx_bytes;
	uint64_t rx_packets, tx_packets;
	uint64_t rx_errors, tx_errors;
	uint64_t rx_dropped, tx_dropped;
	bool up;      /* IFF_UP: administratively up */
	bool running; /* IFF_RUNNING: the kernel says it has carrier */
	unsigned int mtu;
};

/* The netdev ifname in netns_fd. -ENODEV (err untouched) when there is none. */
int hpn_link_stats(int netns_fd, const char *ifname, struct hpn_link_stats *ret,
		   struct hpn_err *err);

#define HPN_RDMA_COUNTERS_MAX 192
#define HPN_RDMA_COUNTER_NAME 64

/* Where a counter was read: the driver's hardware counters, or the IB PMA counters. */
enum hpn_counter_src {
	HPN_COUNTER_HW,	 /* RDMA netlink STAT_GET (rdma statistic), or sysfs hw_counters/ */
	HPN_COUNTER_PMA, /* sysfs ports/<p>/counters/ (port_xmit_data: 4-octet units) */
};

struct hpn_rdma_counter {
	char name[HPN_RDMA_COUNTER_NAME];
	uint64_t value;
	enum hpn_counter_src src;
};

struct hpn_rdma_counters {
	/* IB port state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER; 0 unknown */
	int state;
	/* physical state: 1 sleep, 2 polling, 3 disabled, 4 training, 5 link up...; 0 unknown */
	int phys_state;
	bool netlink; /* state and hardware counters came from RDMA netlink (else sysfs) */
	size_t n;
	struct hpn_rdma_counter v[HPN_RDMA_COUNTERS_MAX];
};

/*
 * RDMA device dev, port port, seen from netns_fd (exclusive mode hides a
 * device from every netns but its own): its port state and the counters
 * `rdma statistic show` prints (RDMA netlink: RDMA_NLDEV_CMD_PORT_GET and
 * STAT_GET), plus the IB PMA counters under sysfs where sysfs shows the
 * device. Without RDMA netlink, or under a sysfs_root other than "/sys" (a
 * test's fake tree), all of it from <sysfs_root>/class/infiniband/<dev>/
 * ports/<port>/ (state, phys_state, hw_counters/, counters/). -ENODEV (err
 * untouched) when neither shows the device.
 */
int hpn_rdma_counters(const char *sysfs_root, int netns_fd, const char *dev, unsigned int port,
		      struct hpn_rdma_counters *ret, struct hpn_err *err);
/* The counter name of source src in c, or NULL. */
const struct hpn_rdma_counter *hpn_rdma_counter_find(const struct hpn_rdma_counters *c,
						     enum hpn_counter_src src, const char *name);

#endif
