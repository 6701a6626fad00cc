/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_DRAKUBELET_H
#define HPN_AGENT_DRAKUBELET_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

struct dra_claims;
struct loop;
struct node;
struct rpc;
struct sbuf;

/*
 * The kubelet's side of the DRA driver (doc/dra.md, "The kubelet's side"):
 * the DRAPlugin service (v1 and v1beta1) on
 * <kubelet-dir>/plugins/<driver>/dra.sock, registered with the kubelet's
 * plugin watcher by draregister.h. NodePrepareResources
 * reads each claim from the API (on the loop), checks that its
 * devices of our driver are NICs of this node's pool that no other pod's
 * journal holds, writes a CDI spec of the claim's RDMA character devices and
 * a record of the claim in <state-dir>/dra/<claim UID>.json (read back at
 * start: a prepared claim is answered again without the API);
 * NodeUnprepareResources removes both. Beside DRAPlugin the socket serves
 * DRAResourceHealth (v1 and v1alpha1), the prepared devices' health
 * (drahealth.h). dra_start also starts the driver's other parts,
 * draregister.h, draslices.h, drastatus.h and drahealth.h, which it owns.
 */
struct kubeloop;
struct dra_opts {
	const char *kubelet_dir;
	const char *driver;	/* a DNS subdomain of at most 63 */
	const char *node_name;	/* the pool's name in the claims' results */
	const char *kubeconfig; /* read for every claim (the file kept from the service account) */
	const char *cdi_dir;	/* where the claims' specs go */
	const char *dev_root;	/* the host side of their device nodes */
	const char *cdi_hook;	/* the specs' createRuntime hook (--cdi-hook; none: no spec) */
	int api_timeout_ms;	/* one claim's GET, retries included */
	struct kubeloop *kube;	/* the API's calls, on the loop */
	const char *taint_effect; /* an unhealthy NIC's taint in the slices (NULL: NoSchedule) */
	bool shares;		  /* --dra-shares: RoCE NICs published shared too */
};

struct dra;

int dra_start(struct loop *l, struct rpc *rpc, struct node *node, const struct dra_opts *o,
	      struct dra **ret, struct hpn_err *err);
/* Its prepared claims (the lookup's and the status writer's), for as long as d lives. */
const struct dra_claims *dra_prepared(const struct dra *d);
/*
 * After the node's config was reloaded (the old one freed): the driver keeps
 * copies of what it took, sysfsRoot follows the new one; a new stateDir or
 * network name is warned about and takes effect at restart.
 */
void dra_reloaded(struct dra *d);
/* After every scan of the node: the DRA device name of each pool NIC. */
void dra_scanned(struct dra *d);
/*
 * What the kubelet sees of the node's devices changed (node.h's on_devices:
 * a NIC's health, a health loop verdict): the health streams told, if their
 * list changed, and the slices rendered again (a taint). NULL is fine.
 */
void dra_devices_changed(struct dra *d);
/*
 * The plugin's ADD of pod uid completed (the lookup's "attached" question):
 * the networkData of every prepared claim reserved for it written into the
 * claims' device metadata files from the journals, before ADD returns and so
 * before the runtime creates a container. The files rewritten, or -errno
 * (logged). NULL is fine (0).
 */
int dra_pod_attached(struct dra *d, const char *uid);
/* At SIGTERM: both servers stop (their sockets removed); claims waiting get UNAVAILABLE. */
void dra_stop(struct dra *d);
/*
 * Its metrics_render_fn (metrics.h; ud: the dra): the hpn_rdma_dra_*
 * families (doc/metrics.md), its parts' too (the slices' only when they are
 * published).
 */
void dra_metrics(struct sbuf *b, void *ud);
/* A server is not gone yet. */
bool dra_serving(const struct dra *d);
/* After the loop (and the worker); NULL is fine. */
void dra_free(struct dra *d);

#endif
