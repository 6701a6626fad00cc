/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_SESSION_H
#define HPN_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc.h"
#include "cni.h"
#include "conf.h"
#include "err.h"
#include "nccl.h"
#include "rdma.h"
#include "result.h"
#include "store.h"

/*
 * Internal to the command files (add, claim, undo, del, check, gc): the state
 * one run shares between them, and the steps more than one of them takes.
 * Nothing outside lib/ includes this.
 */

/* How long a command waits for the state lock before it answers code 11. */
#define HPN_LOCK_TIMEOUT_MS 30000

struct nl_sock;

/*
 * Everything one command needs about the two namespaces: fds and one netlink
 * socket opened in each (a socket stays bound to the netns it was opened in).
 */
struct hpn_nsctx {
	int host_fd;
	int pod_fd;
	struct nl_sock *host;
	struct nl_sock *pod;
};

struct hpn_attach {
	struct hpn_store st;
	struct hpn_nsctx ns;
	struct hpn_journal j;
	char key[HPN_KEY_MAX];
	bool have_journal;
	bool stale_file; /* an unreadable journal of an earlier boot: to remove, nothing to undo */
	bool ipam_added; /* IPAM ADD succeeded in this run: a rollback must release it */
	/* CHECK: which part of the attachment failed (hpn_check_report), NULL when none did. */
	const char *check_reason;
};

/* What ADD decided about RDMA before changing anything. */
struct hpn_rdma_plan {
	bool found;
	struct hpn_rdma_dev dev;
	enum hpn_rdma_netns mode; /* the node's */
	char reason[256];	  /* why nothing is bound, when !found */
};

/* One NIC ADD attaches: the host device (moved, or the parent of a child) and its RDMA. */
struct hpn_nic_plan {
	struct hpn_link dev;
	struct hpn_rdma_plan rdma;
};

/* ---- session.c: the state store, the namespaces, names the commands share ---- */

void hpn_nsctx_close(struct hpn_nsctx *ns);
/* Opens a netlink socket inside netns_fd and comes back to the host netns. */
int hpn_nsctx_open_pod(struct hpn_nsctx *ns, const char *netns, struct hpn_err *err);
/* The calling thread's netns as the host's, and a netlink socket in it. */
int hpn_nsctx_open_host(struct hpn_nsctx *ns, struct hpn_err *err);
/* The state store, locked, and the host netns with its netlink socket. */
int hpn_session_open(struct hpn_store *st, struct hpn_nsctx *ns, const struct hpn_conf *conf,
		     struct hpn_err *err);
/*
 * One command's session on one attachment (CNI_CONTAINERID + CNI_IFNAME): the
 * store locked, the host netns open, the journal read if there is one. Code
 * 11 when another run is still working on the attachment. Close it with
 * hpn_attach_close() whatever this returns.
 */
int hpn_attach_open(struct hpn_attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		    struct hpn_err *err);
void hpn_attach_close(struct hpn_attach *a);
/* Who a hints file belongs to (its owner line): the attachment, by container, network, ifname. */
void hpn_hints_owner(const struct hpn_conf *conf, const char *container_id, const char *cni_ifname,
		     struct hpn_nccl_owner *o);
/* The CNI_IFNAME IPAM sees for NIC i: the attachment's own for the first, its pod name after. */
const char *hpn_ipam_ifname(const struct hpn_journal *j, const char *cni_ifname, size_t i);
/* DEL and CHECK of a pod podSelector does not pick, which ADD never attached. */
bool hpn_untouched_pod(const struct hpn_env *env, const struct hpn_conf *conf);

/* ---- undo.c: put back what ADD did (rollback, DEL, GC) ---- */

/*
 * The hints file (if still this attachment's), device restore of every NIC
 * (last first), then IPAM release when ADD got that far (or always, for DEL):
 * one release per NIC. Goes on past a failure so that as much as possible is
 * back; returns the first error, a device not back before the others.
 */
int hpn_undo(struct hpn_nsctx *ns, const struct hpn_env *env, const struct hpn_conf *conf,
	     const struct hpn_journal *j, bool ipam, struct hpn_err *err);
/*
 * Undo a journalled attachment and remove its journal without the store lock
 * across the slow steps (IPAM, moves, deletes): the journal is held first,
 * so other runs see it in flight and leave it and its NICs alone; the lock
 * goes; the undo runs; and the journal is removed under the lock again, so
 * that no reader sees it unheld after the NICs are back. Called, and returns,
 * with the store locked (or with code 11 if the lock did not come back). On
 * an undo error the journal stays, no longer held, for a later DEL or GC.
 */
int hpn_release(struct hpn_store *st, struct hpn_nsctx *ns, const struct hpn_env *env,
		const struct hpn_conf *conf, const char *key, const struct hpn_journal *j,
		bool ipam, struct hpn_err *err);

/* ---- claim.c: ADD's selection, journalled as the attachment's claim ---- */

/*
 * The kubelet's choice, when hpn-rdma-agent serves a pool (match) as a device
 * plugin: the pod's devices of the agent's resource, asked of the agent by
 * pod namespace and name, before the store is even opened. 1 with *ret
 * filled when the pod holds some, 0 to take from the pool as without an
 * agent (no agent listening and agent.required false, the pod not a
 * Kubernetes pod, none allocated, no match).
 */
int hpn_claim_allocation(const struct hpn_env *env, const struct hpn_conf *conf,
			 struct hpn_alloc *ret, struct hpn_err *err);
/*
 * Selection, under the store lock: the device(s) (exactly al's, in its
 * order, when the kubelet allocated some; else the selector's or the
 * pool's), each one's pod-side name and RDMA plan, filled into a->j for ADD
 * to journal as this attachment's claim. Nothing on the node is changed.
 */
int hpn_claim(struct hpn_attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
	      const struct hpn_alloc *al, struct hpn_nic_plan *plans, struct hpn_err *err);

#endif
