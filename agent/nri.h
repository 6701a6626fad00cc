/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_NRI_H
#define HPN_AGENT_NRI_H

#include <stdbool.h>

/*
 * hpn-rdma-agent as an NRI plugin (doc/agent.md, "NRI"): connected to the
 * runtime's NRI socket, registered, it answers CreateContainer for the
 * containers of pods hpn-rdma attached (their journals, keyed by the
 * sandbox ID, decide) with their RDMA character devices and cgroup rules,
 * their NCCL hints file read-only at nccl.confFile, and RLIMIT_MEMLOCK
 * raised; every other container is left as it is. On the loop, with
 * reconnects after a backoff when the runtime goes away or its socket is
 * not there yet.
 */

#define NRI_DEFAULT_SOCKET "/var/run/nri/nri.sock"
#define NRI_DEFAULT_NAME   "hpn-rdma"
#define NRI_DEFAULT_INDEX  "50"

struct loop;
struct node;
struct nri;

struct nri_opts {
	const char *socket;   /* the runtime's NRI socket */
	const char *name;     /* the plugin's name, as the runtime logs it */
	const char *index;    /* two digits: the order among the runtime's plugins */
	const char *dev_root; /* where the host's device nodes are (--dev-root) */
};

/*
 * Strings copied; node is borrowed (its config and devices, read per call:
 * RLIMIT_MEMLOCK is its nri.memlock, so a reloaded config applies).
 */
int nri_start(struct loop *l, struct node *node, const struct nri_opts *o, struct nri **ret);
/* Closes the link (the runtime sees the plugin go); NULL is fine. */
void nri_free(struct nri *n);
/* Registered with a runtime now. */
bool nri_registered(const struct nri *n);
/* The runtime's name and version as its last Configure said them ("" before one). */
void nri_runtime(const struct nri *n, const char **ret_name, const char **ret_version);
struct sbuf;
/* Its families (doc/metrics.md, hpn_rdma_nri_*); ud: the nri. */
void nri_metrics(struct sbuf *b, void *ud);

#endif
