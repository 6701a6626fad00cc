/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_NRI_H
#define HPN_AGENT_NRI_H

#include <stdbool.h>
#include <stddef.h>

/*
 * hpn-rdma-agent as an NRI plugin (doc/agent.md, "NRI"): connected to the
 * runtime's NRI socket, registered, it answers CreateContainer for the
 * containers of pods hpn-rdma attached (their journals, keyed by the
 * sandbox ID, decide) with their RDMA character devices and cgroup rules,
 * their NCCL hints file read-only at nccl.confFile, and RLIMIT_MEMLOCK
 * raised; every other container is left as it is. Containers of such pods
 * that started while the link was down are found at Synchronize and kept
 * (the bare set) until removed. On the loop, with reconnects after a
 * backoff when the runtime goes away or its socket is not there yet.
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
/*
 * The bare containers of pod sandbox id: those Synchronize found running
 * without their RDMA device nodes (they started while the link was down),
 * not removed since. Their number (0 for a NULL n); when some, msg (len
 * bytes) names the first: "container NAME (ID12) started without ...".
 */
int nri_bare_of(const struct nri *n, const char *sandbox, char *msg, size_t len);
/*
 * changed(ud) on the loop whenever the bare set changes (a Synchronize's
 * last part, a container removed, a pod's attachment gone); ud outlives n.
 */
void nri_watch_bare(struct nri *n, void (*changed)(void *ud), void *ud);
struct sbuf;
/*
 * Its families (doc/metrics.md, hpn_rdma_nri_*); ud: the nri. Drops first
 * the bare containers whose pod's attachment is gone (telling changed).
 */
void nri_metrics(struct sbuf *b, void *ud);

#endif
