/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_CDISPECS_H
#define HPN_AGENT_CDISPECS_H

#include <stdbool.h>

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

#endif
