/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_SESSION_H
#define HPN_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc.h"
#include "cni.h"
#include "conf.h"
#include "err.h"
#include "gpu.h"
#include "nccl.h"
#include "qos.h"
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
	char key[HPN_KEY_MAX];
	bool have_journal;
	bool stale_file; /* an unreadable journal of an earlier boot: to remove, nothing to undo */
	bool ipam_added; /* IPAM ADD succeeded in this run: a rollback must release it */
	/* CHECK: which part of the attachment failed (hpn_check_report), NULL when none did. */
	const char *check_reason;
	/* CHECK: what it found that breaks nothing (a lossy hints class, ncclqos.c); "": none. */
	char check_warning[HPN_ERR_MSG];
	struct hpn_journal j; /* last, as its NIC list is (hpn_attach_open) */
};

/* What ADD decided about RDMA before changing anything. */
struct hpn_rdma_plan {
	bool found;
	bool create; /* softRoce: dev is to be made on the pod-side interface (softroce.c) */
	struct hpn_rdma_dev dev;
	enum hpn_rdma_netns mode;      /* the node's */
	char reason[256];	       /* why nothing is bound, when !found */
	bool qos_read;		       /* qos is the RoCE QoS of the netdev dev serves (claim.c) */
	struct hpn_qos qos;	       /* state HPN_QOS_UNREAD when the read failed */
	char qos_netdev[HPN_IFNAMSIZ]; /* the host netdev it was read from */
};

/*
 * One NIC ADD attaches: the host device (moved, or the parent of a child),
 * its RDMA, and the pod's GPU it serves (index into the pod's GPUs; SIZE_MAX:
 * none) at which class, with the nearest class a NIC left free had.
 */
struct hpn_nic_plan {
	struct hpn_link dev;
	struct hpn_rdma_plan rdma;
	size_t gpu;
	enum hpn_gpu_dist dist, best;
	/*
	 * A share of the NIC (the agent's reply marks it "shared": a DRA
	 * claim's device that other pods' claims share): a child of it in the
	 * pod, whatever the config's mode; the NIC stays on the host.
	 */
	bool share;
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
/*
 * The hints links an attachment will make (nccl.h), which the agent's CDI
 * spec of each NIC mounts the pod's hints through: for every NIC moved into
 * the pod (whoever chose it: the runtime mounts the spec's hints for any
 * container that names the device, before the spec's hook admits only the
 * pod that holds the NIC, so a NIC without its link fails even that pod's
 * container), its device ID, when a CDI device can be named by it, in
 * nics[i].hints_link. Not a child's: its parent serves several pods. Called
 * before the claim is journalled; the caller checks that hints are on.
 */
void hpn_hints_links_plan(struct hpn_journal *j);
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

/* ---- softroce.c: Soft-RoCE devices made for a pod (softRoce) ---- */

/*
 * The claim's decision for NIC i (its plan, whose RDMA part p is
 * plan->rdma; its journal entry n, pod-side name set) once discovery ran
 * (p->found says whether it found a device): with softRoce, a NIC without a
 * usable RDMA device gets one planned (p->create, the device's name in
 * p->dev and n->rdma), if the node can make one that serves a pod (code 108
 * naming what it lacks, before anything changes). A child (a shared mode,
 * or a share: hpn_conf_nic_mode) whose parent's device is an rxe is refused on a
 * kernel where that device cannot serve the child's netns, with softRoce
 * too (the parent's rxe must go first).
 */
int hpn_soft_plan(const struct hpn_attach *a, const struct hpn_conf *conf, size_t i,
		  struct hpn_nic_plan *plan, struct hpn_journal_nic *n, struct hpn_err *err);
/*
 * ADD: makes the planned device on n's interface in the pod (in exclusive
 * mode: moved there); fault is ADD's test hook, called after each step.
 */
int hpn_soft_make(struct hpn_attach *a, const struct hpn_journal_nic *n,
		  const struct hpn_rdma_plan *p,
		  int (*fault)(const char *step, struct hpn_err *err), struct hpn_err *err);
/*
 * ADD, after the proof of NIC i (its made device's character devices cd, as
 * the pod sees them): when the agent's Allocate made <root>/<NIC ID> (the
 * container's device directory, or a link to it), plans their nodes there in
 * the journal and returns 1 (the caller journals, then makes them); 0 when
 * there is nothing to make; -ENOMEM (err set).
 */
int hpn_soft_nodes_plan(struct hpn_journal *j, size_t i, const char *root,
			const struct hpn_rdma_cdevs *cd, struct hpn_err *err);
int hpn_soft_nodes_make(const struct hpn_journal *j, size_t i, struct hpn_err *err);
/*
 * ADD, after NIC i's nodes: when cdi_dir (agent.cdiDir) is a directory that
 * exists, records the name of the CDI spec of its made device (HPN_CDI_POD,
 * its NIC ID) and the directory in the journal and returns 1 (the caller
 * journals, then writes it with hpn_soft_cdi_write); 0 when there is none to
 * write (no directory, or an ID that cannot name a CDI device); -ENOMEM.
 */
int hpn_soft_cdi_plan(struct hpn_journal *j, size_t i, const char *cdi_dir, struct hpn_err *err);
/*
 * Writes NIC i's CDI spec: the made device's character devices cd (as the
 * pod sees them: uverbsN first, umadN, rdma_cm) with the kernel's numbers,
 * and this binary as its hook (hpn-rdma cdi-hook, conf's stateDir and
 * network: only the pod's own containers get it). A file there that is not
 * ours fails it (code 5, naming the path).
 */
int hpn_soft_cdi_write(const struct hpn_journal *j, size_t i, const struct hpn_rdma_cdevs *cd,
		       const struct hpn_conf *conf, struct hpn_err *err);
/*
 * Undo: removes every NIC's journalled CDI spec that is still ours (another
 * writer's file at the name is left, with a warning); before any device goes,
 * so that no runtime resolves the name to numbers a later device may get.
 * Gone already is success.
 */
int hpn_soft_cdi_remove(const struct hpn_journal *j, struct hpn_err *err);
/*
 * Undo: removes n's device nodes that still have their numbers, then
 * deletes n's created device (RDMA netlink DELLINK) in the pod netns pod_fd
 * (-1: gone), then in the host netns, wherever it still is; before the NIC
 * leaves the pod. Gone already is success.
 */
int hpn_soft_remove(struct hpn_nsctx *ns, int pod_fd, const struct hpn_journal *j,
		    const struct hpn_journal_nic *n, struct hpn_err *err);

/* ---- rails.c: a routing table and rules of its own for each NIC of several ---- */

/* Table of a rail: this plus the NIC's ifindex in the pod; its rules' priority. */
#define HPN_RAIL_TABLE_BASE 1000
#define HPN_RAIL_PRIORITY   1000

/* Are the attachment's NICs rails (more than one)? */
bool hpn_rails(const struct hpn_journal *j);
/* Records NIC n's table and rule priority, from its ifindex in the pod. */
void hpn_rail_plan(struct hpn_journal_nic *n, int pod_ifindex);
/*
 * NIC i's routes from its IPAM result ipam[i], as ADD installs them on it and
 * the result lists them: in the main table unless an earlier NIC's result
 * has the destination (at the same priority), then, for a rail, every one
 * again in its own table; a later NIC's gateways spelled out. The strings
 * are ipam's. Returns how many were filled.
 */
size_t hpn_nic_routes(const struct hpn_journal *j, struct hpn_result *const *ipam, size_t i,
		      struct hpn_route *out, size_t max);
/* ADD, once NIC n (ifindex in the pod) has its addresses and routes: its table's networks, its rules. */
int hpn_rail_apply(struct nl_sock *pod, const struct hpn_journal_nic *n, int ifindex,
		   const struct hpn_result *ipam, struct hpn_err *err);
/* CHECK: the rules and networks of NIC i (link l, addresses in own), and its ARP settings; 107. */
int hpn_rail_check(struct nl_sock *pod, const struct hpn_journal_nic *n, const struct hpn_link *l,
		   const struct hpn_result *own, size_t i, struct hpn_err *err);
/* Undo, with the pod netns there: deletes n's rules (its table empties as the NIC leaves). */
int hpn_rail_remove(struct nl_sock *pod, const struct hpn_journal_nic *n, struct hpn_err *err);

/* ---- addpod.c: what ADD asks and tells about the pod around its steps ---- */

/*
 * Before anything changes (conf->pod_lookup): the pod from the agent's cache,
 * else the API; its labels, annotations and GPU count into conf.
 */
int hpn_add_pod_lookup(const struct hpn_env *env, struct hpn_conf *conf, struct hpn_err *err);
/* What the pod itself decides before anything changes: hints key, GPU count. */
int hpn_add_pod_checks(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err);
/* nri.required: the runtime's NRI plugin of the agent is there, or code 11. */
int hpn_add_nri_ready(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err);
/*
 * The pod's GPUs as the agent listed them (gpus.enabled), placed on the PCI
 * tree; *ret stays NULL when it has none; the profile must allow their count.
 */
int hpn_add_pod_gpus(struct hpn_conf *conf, const struct hpn_alloc *al, struct hpn_gpus **ret,
		     struct hpn_err *err);
/* ADD of a pod whose NICs came from DRA claims is done: the agent is told (best effort). */
void hpn_add_tell_attached(const struct hpn_env *env, const struct hpn_conf *conf);

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
 * How many NICs hpn_claim takes (plans it fills): al's, one per GPU of the
 * pod (gpus.nicPerGpu), the pool's count, or one.
 */
size_t hpn_claim_count(const struct hpn_conf *conf, const struct hpn_alloc *al,
		       const struct hpn_gpus *gpus);
/*
 * Selection, under the store lock: the device(s) (exactly al's, in its
 * order, when the kubelet allocated some; else the selector's or the
 * pool's, the pool's nearest the pod's GPUs when gpus has some), each one's
 * pod-side name, RDMA plan and GPU, filled into a->j for ADD to journal as
 * this attachment's claim. Nothing on the node is changed.
 */
int hpn_claim(struct hpn_attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
	      const struct hpn_alloc *al, const struct hpn_gpus *gpus, struct hpn_nic_plan *plans,
	      struct hpn_err *err);

#endif
