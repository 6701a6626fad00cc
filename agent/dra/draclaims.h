/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_DRACLAIMS_H
#define HPN_AGENT_DRACLAIMS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

struct cJSON;

#include "alloc.h"
#include "cdi.h"
#include "devices.h"
#include "dra-v1.pb-c.h"
#include "dra.h"
#include "drameta.h"
#include "draslice.h"
#include "err.h"
#include "nccl.h"
#include "pod.h"
#include "types.h"

/*
 * The DRA driver's prepared claims (drakubelet.h): each one a record
 * <state-dir>/dra/<claim UID>.json, written durably before Prepare answers
 * and read back at start, and a CDI spec "claim-<uid>" of its NICs' RDMA
 * character devices whose createRuntime hook (hpn-rdma cdi-hook) gives them
 * only to a container of a pod the claim is reserved for that holds every
 * NIC of it; no hook, no spec, and the claim is not prepared. The loop's
 * thread alone touches them.
 */

#define DRA_CLAIM_UID_MAX 57 /* "claim-" and the UID name a CDI device: at most 63 */
#define DRA_CALL_CLAIMS	  32 /* claims in one kubelet call, at most (a pod's, of every driver) */

/* One device of a prepared claim, as recorded. */
struct dra_rec_dev {
	char request[128];
	char pool[254];
	/* A NIC's own device, or its shared one ("<NIC device>-shared", with share_id). */
	char device[HPN_DRA_NAME_MAX];
	char nic[HPN_ALLOC_ID_MAX]; /* the NIC (of a share: the NIC shared) */
	char ifname[HPN_IFNAMSIZ];
	char rdma[HPN_IBDEV_MAX];
	char share_id[HPN_DRA_SHARE_ID_MAX]; /* the allocation's shareID; "": the NIC whole */
};

/* A prepared claim: <state>/dra/<uid>.json holds the same. The list is in UID order. */
struct dra_rec {
	char uid[DRA_CLAIM_UID_MAX + 1];
	char ns[64];
	char name[254];
	char pod_claim[64]; /* the claim's pod-claim-name annotation ("": none) */
	char pods[HPN_DRA_MAX_PODS][HPN_POD_UID_MAX + 1];
	size_t n_pods;
	struct dra_rec_dev devs[HPN_DRA_MAX_RESULTS];
	size_t n;
	struct dra_rec *next;
};

struct dra_claims {
	char dir[PATH_MAX]; /* <state-dir>/dra */
	/* Copies, never the config's strings: a reload frees those (dra_reloaded updates sysfs_root). */
	char sysfs_root[PATH_MAX], dev_root[PATH_MAX], cdi_dir[PATH_MAX];
	/* The specs' hook: `<hook> cdi-hook --state-dir <state_dir> --network <network>`. */
	char state_dir[256], network[128], hook[256];
	/*
	 * The config's NCCL hints (draclaims_set_hints): when on, the spec of a
	 * claim reserved for exactly one pod mounts that pod's file
	 * <hints_dir>/<pod UID>/nccl.conf read-only at hints_at.
	 */
	bool hints;
	char hints_dir[PATH_MAX], hints_at[HPN_CDI_PATH_MAX];
	/*
	 * The claims' device metadata files (KEP-5304, drameta.h):
	 * <meta_dir>/<uid>/<request>/metadata.json, 0644, mounted read-only by
	 * the claim's spec at the documented path; meta_dir empty: none.
	 */
	char meta_dir[PATH_MAX], driver[64];
	struct dra_rec *recs;
};

struct draclaims_opts {
	const char *state_dir, *network; /* the node's network: the hook reads its journals */
	const char *sysfs_root, *dev_root, *cdi_dir;
	const char *hook; /* --cdi-hook (empty, not an executable: no spec, no claim prepared) */
	const struct hpn_nccl_conf *nccl; /* the config's hints (NULL: off) */
	const char *meta_dir, *driver;	  /* the device metadata files (NULL: none) */
};

/*
 * dir made (0700), the records of an earlier run read back and their specs
 * written as this run writes them (with the hook; without it, removed).
 */
int draclaims_open(struct dra_claims *cl, const struct draclaims_opts *o, struct hpn_err *err);
struct dra_rec *draclaims_find(const struct dra_claims *cl, const char *uid);
/*
 * Claim r (malloc'd) prepared: its device metadata files (generation 1, each
 * device's attributes attrs[i], NULL: none; attrs NULL: none at all), its
 * spec and then its record written, and r listed (the list owns it). Else
 * msg says why and nothing is left (-ENOEXEC: no hook, so no spec).
 */
int draclaims_add(struct dra_claims *cl, struct dra_rec *r, const struct cJSON *const *attrs,
		  char *msg, size_t len);
/*
 * The networkData of claim r's devices: net[i] for r->devs[i] (NULL: none),
 * written into its metadata files, each file whose content changes rewritten
 * atomically with its generation raised. The number of files rewritten, or
 * -errno (msg says which file).
 */
int draclaims_meta_net(const struct dra_claims *cl, const struct dra_rec *r,
		       const struct hpn_drameta_net *const *net, char *msg, size_t len);
/*
 * Prepared claim r answered again: its spec written anew if it is gone (a
 * CDI dir wiped, a node's tmpfs after an agent restart), removed if the hook
 * is gone (-ENOEXEC). 0, or msg says why.
 */
int draclaims_respec(const struct dra_claims *cl, const struct dra_rec *r, char *msg, size_t len);
/*
 * Claim uid unprepared: its spec and then its record removed (a record
 * without a spec is prepared again, never the reverse). *gone is the record
 * taken off the list (NULL: none; the caller frees it). -errno when the
 * record cannot be removed.
 */
int draclaims_drop(struct dra_claims *cl, const char *uid, struct dra_rec **gone);
/*
 * The config's hints (NULL: off) taken for the claims' specs: whether they
 * changed, and then every prepared claim's spec is written anew (a reload).
 */
bool draclaims_set_hints(struct dra_claims *cl, const struct hpn_nccl_conf *nc);
/* A claim UID a record and a CDI name can carry. */
bool draclaims_uid_ok(const char *s);

/*
 * The claims of a NodePrepareResources or NodeUnprepareResources call, as
 * the kubelet names them (v1 and v1beta1 are the same bytes: dra-v1.proto's
 * messages), checked as any input is: at most DRA_CALL_CLAIMS, each
 * namespace a DNS label, name a DNS subdomain and uid draclaims_uid_ok, no
 * uid twice. false with msg naming the claim (its place, from 1) and the
 * field that is wrong, or the uid named twice.
 */
bool draclaims_request_ok(K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *const *v, size_t n,
			  char *msg, size_t len);

/* A NIC a journal of the network holds: for the pod pod, moved into it or as a child's parent. */
struct draclaims_hold {
	char pod[HPN_POD_UID_MAX + 1]; /* its UID; "(no pod)" when the journal names none */
	bool moved;		       /* the NIC itself; false: a child of it (macvlan, ipvlan) */
};

/* The node a claim is prepared on: the pool's NICs by DRA name, and who holds each. */
struct draclaims_node {
	const char *node_name; /* the pool's name in the claims' results */
	const struct agent_devs *devs;
	char (*names)[HPN_DRA_NAME_MAX]; /* devs->v[i]'s DRA device name ("": none), n_names */
	size_t n_names;
	/*
	 * The journals that hold NIC id, at most max into out: how many there
	 * are (more than max: the first max told).
	 */
	size_t (*holders)(void *ud, const char *id, struct draclaims_hold *out, size_t max);
	void *ud;
	const struct dra_rec *recs; /* the claims prepared already (their list) */
	bool rdma_exclusive;	    /* the node's RDMA netns mode is exclusive */
};

/*
 * The record of claim cl (as hpn_dra_claim_parse gave it, for the claim the
 * kubelet named) on node nd, into r (zeroed first): every result of our
 * driver a device of the pool nd->node_name that is a NIC of the pool here
 * (a shared device's NIC: hpn_dra_share_of, then by its name). A NIC's own
 * device: held by no pod's journal but one the claim is reserved for, and
 * no other prepared claim holds a share of the NIC. A share: on a node whose
 * RDMA netns mode is shared (the child in the pod uses the NIC's RDMA
 * device, which stays on the host), no pod holds the NIC moved (children of
 * it: other pods' shares), no other prepared claim holds the NIC whole, and
 * the claim does not hold the NIC whole too. 0, else msg names the claim,
 * the device and what is in the way (the other claim, the pod), and r is
 * not a record.
 */
int draclaims_rec_of(const struct draclaims_node *nd, const struct hpn_dra_claim *cl,
		     struct dra_rec *r, char *msg, size_t len);

/*
 * A record as <state-dir>/dra/<uid>.json holds it, and back: the text is
 * freed with cJSON_free (NULL: no memory); the parse fills *r (next NULL),
 * -EINVAL when the text is not a record NodePrepareResources could have
 * written (names and UIDs of the API's syntax, a device ID, a netdev name).
 */
char *draclaims_rec_render(const struct dra_rec *r);
int draclaims_rec_parse(const char *text, size_t len, struct dra_rec *r);
/* The CDI device of claim uid: "claim-<uid>". */
void draclaims_cdi_id(const char *uid, char out[HPN_CDI_ID_MAX]);
void draclaims_free(struct dra_claims *cl);

/*
 * The NICs of the prepared claims reserved for pod uid, in record order (by
 * claim UID) and each claim's result order, as the lookup answers them
 * (source "dra", resource driver), a share marked (shared[i]: its NIC's ID,
 * to be attached as a child of it; two shares of one NIC are two children):
 * malloc'd; NULL: none, or no memory (the lookup then falls back to the
 * kubelet's answer). shares false (the asker would move every NIC it is
 * given: a plugin older than shares) and a claim of the pod holds a share:
 * NULL, and why (len bytes) names the claim and the share.
 */
struct hpn_alloc *draclaims_pod_nics(const struct dra_claims *cl, const char *driver,
				     const char *uid, bool shares, char *why, size_t len);

/*
 * Which of pod's children of its NIC device k of claim r (a share) stands
 * for: its place, from 0, among the shares of that NIC in the NICs the
 * lookup answers the pod (draclaims_pod_nics: claims by UID, each one's
 * devices in result order), which ADD attaches in that order. recs[0..n) are
 * the prepared claims, r among them, in any order.
 */
size_t draclaims_share_rank(const struct dra_rec *const *recs, size_t n, const struct dra_rec *r,
			    size_t k, const char *pod);

#endif
