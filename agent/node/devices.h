/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_DEVICES_H
#define HPN_AGENT_DEVICES_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc.h"
#include "conf.h"
#include "err.h"
#include "types.h"

struct nl_sock;

/*
 * The pool's NICs as the kubelet's devices: one per NIC that the config's
 * match selects on the host, or that a journal of the network holds (moved
 * into a pod). Built from lib/ alone: hpn_pool_candidates, the journals,
 * hpn_rdma_of_netdev; the agent keeps nothing the node does not show.
 */

#define HPN_AGENT_MAX_DEVICES 256
#define AGENT_VERDICT_MSG     512

/* The health loop's verdict on the attachment that holds a device. */
enum agent_verdict {
	AGENT_VERDICT_NONE,   /* no journal holds it, its attachment not checked yet, or no loop */
	AGENT_VERDICT_WHOLE,  /* CHECK found the attachment as ADD left it */
	AGENT_VERDICT_BROKEN, /* CHECK (or the loop's second source) found it broken */
	AGENT_VERDICT_UNCHECKED, /* its check could not run: no completed attachment, a run on it */
};

/* Why the node shows a device Unhealthy (its health before the health loop's verdict). */
enum agent_fault {
	AGENT_FAULT_NONE,
	AGENT_FAULT_VANISHED,  /* the NIC: neither on the host nor in a journal */
	AGENT_FAULT_RDMA_GONE, /* its RDMA device vanished, the netdev still there */
	AGENT_FAULT_PORT_DOWN, /* its RDMA port is DOWN */
};

struct agent_dev {
	char id[HPN_ALLOC_ID_MAX]; /* PCI address, else netdev name (hpn_alloc_nic_id) */
	char ifname[HPN_IFNAMSIZ]; /* on the host (before ADD moved it) */
	int numa;		   /* -1: unknown */
	bool healthy;
	bool held; /* a journal of the network holds it */
	/*
	 * Held by an attachment whose NICs ADD took from the pool (a pod
	 * selected by label or annotation, allocated nothing): the kubelet
	 * and the scheduler never gave it, so it is not theirs to give now:
	 * Unhealthy in ListAndWatch (healthy stays the NIC's own health),
	 * refused by Allocate, left out of the DRA slices, until no journal
	 * holds it. taker: that pod ("ns/name").
	 */
	bool taken;
	char taker[320];
	char rdma[HPN_IBDEV_MAX]; /* its RDMA device, as last seen; empty: none */
	unsigned int port;
	char why[192]; /* why Unhealthy, for the log */
	/*
	 * The health loop found the attachment that holds it broken (health.c,
	 * agent_devs_set_verdict): Unhealthy whatever the host shows, until the
	 * loop finds it whole again or no journal holds the NIC any more.
	 */
	bool broken;
	bool base_healthy; /* the health the node shows, before broken */
	/*
	 * The health loop's last verdict on the attachment that holds it, and
	 * what it found (broken: what broke; unchecked: why its check could not
	 * run): the DRA driver's health stream tells the kubelet (drahealth.c).
	 */
	enum agent_verdict verdict;
	char verdict_msg[AGENT_VERDICT_MSG];
	/*
	 * Gone from the node: the NIC (neither on the host nor in a journal) or
	 * its RDMA device; kept in the list, Unhealthy, with rdma as last seen.
	 */
	bool gone;
	enum agent_fault fault; /* why base_healthy is false */
};

struct agent_devs {
	struct agent_dev v[HPN_AGENT_MAX_DEVICES];
	size_t n;
};

/*
 * Scans the node into devs, keeping the devices of the last scan (and their
 * order; new ones after) so IDs stay put: a device no longer found is kept,
 * Unhealthy. 1 when what the kubelet sees (IDs, health, NUMA; a verdict
 * dropped with its journal) changed, 0 when not, -errno.
 */
int agent_devs_scan(struct agent_devs *devs, const struct hpn_conf *conf, struct nl_sock *host,
		    struct hpn_err *err);
const struct agent_dev *agent_devs_find(const struct agent_devs *devs, const char *id);
/*
 * The health loop's verdict v on the attachment that holds device id, with
 * msg (what broke, why no check ran; "" or NULL: none): BROKEN makes it
 * Unhealthy (why: msg), any other verdict whole again. 1 when what the
 * kubelet sees of it changed (its health, the verdict or msg), 0 when not
 * (also for an ID not listed, or a verdict but NONE on a device not held).
 */
int agent_devs_set_verdict(struct agent_devs *devs, const char *id, enum agent_verdict v,
			   const char *msg);

/*
 * Why d is Unhealthy, one word (a label value, the DRA taint's: doc/dra.md,
 * "Taints"): AttachmentBroken (the health loop's verdict), PortDown,
 * RDMADeviceGone, Vanished; NULL when it is Healthy.
 */
const char *agent_dev_fault(const struct agent_dev *d);

/*
 * GetPreferredAllocation for one container: size IDs out of avail, every
 * one of must (which must be in avail) first, then free NICs (held by no journal) on the NUMA nodes
 * already chosen, then on the node with the most free NICs, fewest nodes in
 * all; held NICs only when free ones run out. Names point into avail/must.
 * -EINVAL (err says why) for a request that cannot be met.
 */
int agent_prefer(const struct agent_devs *devs, char **avail, size_t n_avail, char **must,
		 size_t n_must, size_t size, const char **out, struct hpn_err *err);

#endif
