/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_DRASTATUS_H
#define HPN_AGENT_DRASTATUS_H

#include "err.h"

#include <stdbool.h>
#include <stddef.h>

#include "drameta.h"

struct dra_claims;
struct dra_rec;
struct kubeloop;
struct loop;
struct sbuf;

/*
 * The prepared claims' status.devices[] written back (doc/dra.md, "The
 * claim's status"): for each claim, the NICs its pod's attachment holds, with
 * networkData (the pod-side name, its addresses, its MAC) and a Ready
 * condition naming the RDMA device and GID the ADD proved; none once the
 * attachment is gone. By server-side apply with the driver as field manager,
 * when the plugin's journals change (inotify, debounced): the journals read
 * and each claim's body rendered on the loop's worker (they touch the store),
 * the applies sent from the loop (kubeloop.h), one claim after another. A
 * failed write is retried (1 s doubling to 60 s); a claim the API no longer
 * has (404) is said once and left; what was applied is remembered per claim,
 * so an unchanged state is not sent again.
 */
struct drastatus_opts {
	const char *state_dir;	/* the plugin's stateDir... */
	const char *network;	/* ...and network: its journals are in state_dir/network */
	struct kubeloop *kube;	/* the API's calls; borrowed, outlives the writer */
	const char *kubeconfig; /* read for every write (kube_call) */
	const char *driver;	/* the field manager, and the devices' driver */
	int api_timeout_ms;	/* one claim's write, retries included */
};

struct drastatus;

/* Strings are copied; cl is borrowed and must outlive the writer. */
int drastatus_start(struct loop *l, const struct dra_claims *cl, const struct drastatus_opts *o,
		    struct drastatus **ret, struct hpn_err *err);
/*
 * The networkData of claim r's devices that pod's completed attachments
 * hold, read from the plugin's journals in state_dir/network (blocking file
 * reads): nets[i] and have[i] for r->devs[i]; a share's is the pod's child
 * of its NIC that stands for it (draclaims_share_rank over recs[0..n_recs),
 * every prepared claim). -EIO when the journals cannot be listed (msg says
 * why).
 */
int drastatus_pod_nets(const char *state_dir, const char *network,
		       const struct dra_rec *const *recs, size_t n_recs, const struct dra_rec *r,
		       const char *pod, struct hpn_drameta_net *nets, bool *have, char *msg,
		       size_t len);
/*
 * The apply body of claim r's status.devices[] as a pass renders it, from
 * the journals in state_dir/network (blocking file reads): each device of r
 * that an attachment of a pod r is reserved for holds, with networkData and
 * the Ready condition at time when; a share's entry has its shareID, its
 * networkData the pod's child of the NIC that stands for it (as
 * drastatus_pod_nets). recs[0..n_recs): every prepared claim. malloc'd; NULL
 * with msg when the journals cannot be listed or no memory.
 */
char *drastatus_render(const char *state_dir, const char *network, const char *driver,
		       const struct dra_rec *const *recs, size_t n_recs, const struct dra_rec *r,
		       const char *when, char *msg, size_t len);
/* The hpn_rdma_dra_status_writes_total family into b (exposition.h), for dra_metrics. */
void drastatus_metrics(struct sbuf *b, const struct drastatus *s);
/* At SIGTERM: a write under way is cancelled and no other starts (the next start writes). */
void drastatus_stop(struct drastatus *s);
/*
 * After the loop (and the worker), before its kubeloop: a write under way is
 * cancelled (the next start writes what is due); NULL is fine.
 */
void drastatus_free(struct drastatus *s);

#endif
