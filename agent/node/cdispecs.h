/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_CDISPECS_H
#define HPN_AGENT_CDISPECS_H

#include <stdbool.h>

#include "cdi.h"

struct node;

/*
 * The agent's CDI specs (lib/cdi.h, doc/agent.md#cdi): one per pool NIC
 * whose RDMA device the host has, named by the NIC's device ID, in
 * --cdi-dir; kept in step with the node after every scan (written when a
 * device appears or its character devices' numbers change, removed when
 * the NIC or its device goes, and any other spec of the agent's file-name
 * rule removed as stale). Never touches ADD's specs (softRoce), nor a file
 * at its names that is not its own. A directory it cannot write is said
 * once per cause, and the agent serves on.
 */
struct cdispecs_opts {
	const char *dir;      /* --cdi-dir, made if missing */
	const char *dev_root; /* --dev-root: the host side of the device nodes */
	const char *hook;     /* --cdi-hook: the hpn-rdma binary (empty, unusable: none) */
};

struct cdispecs;

int cdispecs_start(struct node *node, const struct cdispecs_opts *o, struct cdispecs **ret);
/* After a scan: every device's spec in step, stale ones gone. */
void cdispecs_sync(struct cdispecs *c);
/*
 * For Allocate: device id's spec brought in step now; whether it is there
 * (false for a NIC without an RDMA device on the host, or c NULL: CDI off).
 */
bool cdispecs_ready(struct cdispecs *c, const char *id);
void cdispecs_free(struct cdispecs *c);

/*
 * Appends to out->nodes the character devices of RDMA device ibdev that
 * have numbers (uverbsN first, then umadN, issmN), host paths under
 * dev_root, leaving one place for rdma_cm: whether a uverbs node was added.
 * Also the DRA driver's way to a claim's nodes (drakubelet.c).
 */
bool cdispecs_nic_nodes(const char *sysfs_root, const char *dev_root, const char *ibdev,
			struct hpn_cdi_dev *out);
/* Appends rdma_cm when the node has it (sysfs class/misc/rdma_cm with numbers) and room is left. */
void cdispecs_cm_node(const char *sysfs_root, const char *dev_root, struct hpn_cdi_dev *out);

/*
 * The DRA driver's spec of a claim (drakubelet.c) is named "claim-<claim UID>":
 * longer than any netdev name and no PCI address, so never a NIC's ID; the
 * stale sweep leaves such specs to the driver.
 */
#define CDISPECS_CLAIM_PREFIX "claim-"
bool cdispecs_is_claim(const char *id);

#endif
