/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_ATTACH_H
#define HPN_ATTACH_H

#include "cni.h"
#include "conf.h"
#include "err.h"

/*
 * The commands as ordered, undoable steps over the mechanisms (link, addr,
 * ipam, store). ADD journals before each step that changes the host; any
 * failure runs the same restore that DEL runs, so the undo logic exists once.
 */

/*
 * ADD: on success *ret is the result to print (prevResult plus this
 * attachment's NICs). When conf->pod_lookup, the pod is read from the
 * Kubernetes API first, before anything on the node changes, and conf's pod
 * decision completed from it (hpn_conf_apply_pod: the only change ADD makes
 * to conf). The NICs are selected and claimed (journalled) under the store
 * lock, which is dropped for the slow steps that follow.
 */
int hpn_add(const struct hpn_env *env, struct hpn_conf *conf, struct hpn_result **ret,
	    struct hpn_err *err);
/* DEL: idempotent; succeeds when the netns or the device is already gone. */
int hpn_del(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err);
/* CHECK: the attachment still looks as ADD left it; an error names what differs. */
int hpn_check(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err);
/*
 * CHECK's checks of one journalled attachment from its journal alone (the
 * agent's health loop; no CNI environment or prevResult, so no IPAM CHECK
 * and no prevResult comparison): its interfaces in the journal's netns as
 * its result says (MAC, MTU, up, addresses, routes), each RDMA device proven
 * again from the pod (port ACTIVE, the GID ADD reported), the hints file.
 * key names the journal in conf's stateDir and network; the store lock is
 * never taken. 0: as ADD left it; 1: nothing to check (no journal, not a
 * completed attachment of this boot, or another run is working on it, also
 * when one began while this checked); -errno: broken, err says what and
 * rep->reason which part.
 */
struct hpn_check_report {
	/* "netns", "interface", "rdma", "qos", "hints" or "state" (the journal or its result); NULL */
	const char *reason;
	/*
	 * What breaks nothing but is worth saying, on success too: the class the
	 * hints give NCCL rides no PFC priority on a NIC that has one, without
	 * nccl.losslessRequired (which makes it a failure, reason "qos"). "": none.
	 */
	char warning[HPN_ERR_MSG];
};
int hpn_check_journal(const struct hpn_conf *conf, const char *key, struct hpn_check_report *rep,
		      struct hpn_err *err);

/* STATUS: the plugin can do ADD now (state store writable, netlink, IPAM plugin present,
 * RDMA netns mode, match drivers loaded and enough free NICs in the pool). */
int hpn_status(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err);

/* GC: undoes every attachment of this network not in cni.dev/valid-attachments
 * and not still being added (every NIC back to the host or its child deleted,
 * IPAM DEL for each NIC's lease, journal removed); goes on past errors. */
int hpn_gc(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err);

/*
 * The same GC for hpn-rdma-agent, with the runtime's sandboxes as the valid
 * attachments: every journalled attachment of conf's network whose
 * container ID is not among sandboxes is undone, unless an ADD or DEL is
 * working on it or its journal was written less than min_age_s ago (an ADD
 * that has just completed: the runtime lists its sandbox only once
 * RunPodSandbox returns). IPAM DEL runs from cni_path. The counts say what
 * this round did; returns as hpn_gc. Journals without a pod UID (not made by
 * a CRI runtime's ADD) are kept unless of an earlier boot. An empty
 * sandboxes list while journals of this boot with a pod UID exist undoes
 * nothing: -ECANCELED (code 11), err naming the first such pod.
 */
struct hpn_gc_live {
	const char *const *sandboxes;
	size_t n_sandboxes;
	int min_age_s;
	const char *cni_path;
	/* out */
	size_t undone; /* attachments undone */
	size_t kept;   /* left alone: live, in flight, or young */
	size_t young;  /* of which: written less than min_age_s ago */
	size_t failed; /* whose undo failed (the journal stays for the next round) */
};
int hpn_gc_sandboxes(const struct hpn_conf *conf, struct hpn_gc_live *live, struct hpn_err *err);

#endif
