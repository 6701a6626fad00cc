/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_CDISPECS_H
#define HPN_AGENT_CDISPECS_H

#include <stdbool.h>
#include <stddef.h>

#include "cdi.h"

struct node;

/*
 * The agent's CDI specs (lib/cdi.h, doc/agent.md#cdi): one per pool NIC
 * whose RDMA device the host has, named by the NIC's device ID, in
 * --cdi-dir; kept in step with the node after every scan (written when a
 * device appears or its character devices' numbers change, removed when
 * the NIC or its device goes, and any other spec of the agent's file-name
 * rule removed as stale). Every spec carries the hook (cdispecs_hook); none
 * is written without it. Never touches ADD's specs (softRoce), nor a file
 * at its names that is not its own. A directory it cannot write is said
 * once per cause, and the agent serves on.
 */
struct cdispecs_opts {
	const char *dir;      /* --cdi-dir, made if missing */
	const char *dev_root; /* --dev-root: the host side of the device nodes */
	/*
	 * --cdi-hook: the hpn-rdma binary every spec names as its createRuntime
	 * hook. Empty, or not an executable now: no spec at all (the agent's
	 * removed, Allocate naming none), said at start and when it changes.
	 */
	const char *hook;
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
 * Fills h, the createRuntime hook `<hook> cdi-hook --state-dir <state_dir>
 * --network <network> <id>` every spec of the agent's names (the NICs' and
 * the DRA claims'): true when hook is an executable now; else false, h
 * untouched, and why (len bytes, may be NULL) says what is wrong.
 */
bool cdispecs_hook(const char *hook, const char *state_dir, const char *network,
		   struct hpn_cdi_hook *h, char *why, size_t len);

/*
 * The DRA driver's spec of a claim (drakubelet.c) is named "claim-<claim UID>"
 * (HPN_CDI_CLAIM_PREFIX): never a NIC's ID; the stale sweep leaves such specs
 * to the driver.
 */
#define CDISPECS_CLAIM_PREFIX HPN_CDI_CLAIM_PREFIX
bool cdispecs_is_claim(const char *id);

#endif
