/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_NODE_H
#define HPN_AGENT_NODE_H

#include <limits.h>

#include "conf.h"
#include "devices.h"
#include "err.h"
#include "loop.h"

/*
 * The node as the agent sees it: the config file's hpn-rdma entry, parsed
 * by lib/conf.c as an ADD would see it and reloaded when the file changes,
 * and the pool's NICs as the kubelet's devices (devices.c), rescanned on
 * link events and every poll period. Services read conf and devs; they
 * change devs only through node_devices_changed's contract.
 */

struct nl_sock;

struct node {
	struct hpn_conf conf;
	char *conf_text; /* the entry as JSON, for the worker's jobs; conf points into it */
	struct agent_devs devs;
	/*
	 * Set by main.c before node_start: what the kubelet sees changed (the
	 * device plugin's list, a health verdict of the DRA driver's stream); a
	 * new pool; a scan done (every one, changed or not: what the list does
	 * not show, such as an RDMA device's numbers, may have changed).
	 */
	void (*on_devices)(void *ud);
	void (*on_reload)(void *ud);
	void (*on_scan)(void *ud);
	void *ud;

	const char *path;
	char dir[PATH_MAX];
	const char *name; /* the file's name in dir */
	struct nl_sock *host;
	struct loop *loop;
	struct loop_src inotify, links, poll;
	struct loop_defer rescan;
	unsigned long scans; /* scans of the pool done (node_metrics) */
};

struct sbuf;
/* Its families (doc/metrics.md): hpn_rdma_node_scans_total; ud: the node (metrics.h). */
void node_metrics(struct sbuf *b, void *ud);

/* Reads path (a .conflist or .conf whose hpn-rdma entry selects a pool with match) into n. */
int node_load(struct node *n, const char *path, struct hpn_err *err);
/* Watches the file, link events and a poll timer (poll_s) on l; a first scan. */
int node_start(struct node *n, struct loop *l, int poll_s, struct hpn_err *err);
/* Scans the pool again after this round of events (on_devices when its list changed). */
void node_rescan(struct node *n);
/* A service changed devs (agent_devs_set_verdict): tell on_devices. */
void node_devices_changed(struct node *n);
void node_free(struct node *n);

#endif
