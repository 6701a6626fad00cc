// SPDX-License-Identifier: Apache-2.0
/*
 * The DRA driver's rules for a claim (draclaims.h): the record Prepare may
 * make of it against the pool, its holders and the other prepared claims,
 * and a pod's NICs answered from the records (the lookup, share ranks).
 * Pure: the callers bring the node's facts and write what is decided.
 */
#include "draclaims.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* ---- a claim prepared on the node ------------------------------------------------------ */

static const struct agent_dev *dev_by_name(const struct draclaims_node *nd, const char *name)
{
	for (size_t i = 0; i < nd->n_names && i < nd->devs->n; i++)
		if (nd->names[i][0] && !strcmp(nd->names[i], name))
			return &nd->devs->v[i];
	return NULL;
}

/* A pod of the claim: does it own the journal's pod UID? */
static bool reserved_for(const struct hpn_dra_claim *cl, const char *pod)
{
	for (size_t i = 0; i < cl->n_pods; i++)
		if (!strcmp(cl->pods[i], pod))
			return true;
	return false;
}

#define HOLDS_MAX 64 /* journals of one NIC looked at: its shares' children, at most */

/*
 * The pod that keeps the NIC id from result res of claim cl: for a NIC's own
 * device, any pod holding it (moved, or children of it) that the claim is
 * not reserved for; for a share, a pod holding it moved (children of it are
 * other shares). -EBUSY with msg, else 0.
 */
static int held_check(const struct draclaims_node *nd, const struct hpn_dra_claim *cl,
		      const struct hpn_dra_result *res, const char *id, bool share, char *msg,
		      size_t len)
{
	struct draclaims_hold *h = calloc(HOLDS_MAX, sizeof(*h));
	size_t n;
	int r = 0;

	if (!h) {
		hpn_msgf(msg, len, "claim %s/%s: out of memory", cl->ns, cl->name);
		return -ENOMEM;
	}
	/* The journals themselves, not the scan's held: an ADD since the last scan counts. */
	n = nd->holders(nd->ud, id, h, HOLDS_MAX);
	for (size_t i = 0; i < n && i < HOLDS_MAX && r == 0; i++) {
		if (share && h[i].moved) {
			hpn_msgf(msg, len,
				 "claim %s/%s: NIC %s (device %s) is held whole by pod %s: it "
				 "cannot be shared until that pod is gone",
				 cl->ns, cl->name, id, res->device, h[i].pod);
			r = -EBUSY;
		} else if (!share && !reserved_for(cl, h[i].pod)) {
			hpn_msgf(msg, len,
				 "claim %s/%s: NIC %s (device %s) is held by pod %s, which the "
				 "claim is not reserved for",
				 cl->ns, cl->name, id, res->device, h[i].pod);
			r = -EBUSY;
		}
	}
	/* More holders than looked at, every one a share's: a NIC's own device is refused. */
	if (r == 0 && !share && n > HOLDS_MAX) {
		hpn_msgf(msg, len, "claim %s/%s: NIC %s (device %s) is held by %zu attachments",
			 cl->ns, cl->name, id, res->device, n);
		r = -EBUSY;
	}
	free(h);
	return r;
}

/*
 * Another prepared claim that holds NIC id the other way (whole when share,
 * shared when not): the scheduler counts the NIC's counter once for all its
 * shares and once for the whole NIC, so both are never allocated; a 1.36
 * scheduler before kubernetes #139040 did not count a shared device's
 * counters, and the driver must not let that through. -EBUSY with msg.
 */
static int other_claim(const struct draclaims_node *nd, const struct hpn_dra_claim *cl,
		       const struct hpn_dra_result *res, const char *id, bool share, char *msg,
		       size_t len)
{
	for (const struct dra_rec *o = nd->recs; o; o = o->next) {
		if (!strcmp(o->uid, cl->uid))
			continue;
		for (size_t k = 0; k < o->n; k++) {
			const struct dra_rec_dev *v = &o->devs[k];

			if (strcmp(v->nic, id) || (v->share_id[0] != '\0') == share)
				continue;
			if (share)
				hpn_msgf(msg, len,
					 "claim %s/%s: device %s is a share of NIC %s, which claim "
					 "%s/%s (%s) holds whole (device %s)",
					 cl->ns, cl->name, res->device, id, o->ns, o->name, o->uid,
					 v->device);
			else
				hpn_msgf(msg, len,
					 "claim %s/%s: NIC %s (device %s) is shared: claim %s/%s "
					 "(%s) holds a share of it (device %s, share %s)",
					 cl->ns, cl->name, id, res->device, o->ns, o->name, o->uid,
					 v->device, v->share_id);
			return -EBUSY;
		}
	}
	return 0;
}

/* The parser answers only the claim asked for: cl's namespace, name and UID are the kubelet's. */
int draclaims_rec_of(const struct draclaims_node *nd, const struct hpn_dra_claim *cl,
		     struct dra_rec *r, char *msg, size_t len)
{
	memset(r, 0, sizeof(*r));
	/* The kubelet's UID passed draclaims_request_ok: never longer. */
	if (hpn_snprintf(r->uid, sizeof(r->uid), "%s", cl->uid) < 0) {
		hpn_msgf(msg, len, "claim %s/%s: UID %s is over %d bytes", cl->ns, cl->name,
			 cl->uid, DRA_CLAIM_UID_MAX);
		return -ENAMETOOLONG;
	}
	snprintf(r->ns, sizeof(r->ns), "%s", cl->ns);
	snprintf(r->name, sizeof(r->name), "%s", cl->name);
	snprintf(r->pod_claim, sizeof(r->pod_claim), "%s", cl->pod_claim);
	for (size_t i = 0; i < cl->n_pods; i++)
		snprintf(r->pods[r->n_pods++], sizeof(r->pods[0]), "%s", cl->pods[i]);
	for (size_t i = 0; i < cl->n; i++) {
		const struct hpn_dra_result *res = &cl->v[i];
		const struct agent_dev *ad;
		struct dra_rec_dev *v = &r->devs[r->n];
		char nic[HPN_DRA_NAME_MAX];
		bool share = hpn_dra_share_of(res->device, nic);
		int ret;

		if (strcmp(res->pool, nd->node_name)) {
			hpn_msgf(msg, len,
				 "claim %s/%s: device %s/%s is in pool %s, not this node's (%s)",
				 cl->ns, cl->name, res->pool, res->device, res->pool,
				 nd->node_name);
			return -EINVAL;
		}
		ad = dev_by_name(nd, share ? nic : res->device);
		if (!ad) {
			hpn_msgf(msg, len,
				 "claim %s/%s: device %s is no NIC of the pool on node %s", cl->ns,
				 cl->name, res->device, nd->node_name);
			return -ENODEV;
		}
		if (share && nd->rdma_exclusive) {
			hpn_msgf(msg, len,
				 "claim %s/%s: device %s is a share of NIC %s, but the node's RDMA "
				 "netns mode is exclusive: a share's pod uses the NIC's RDMA "
				 "device, which stays in the host's netns, where no pod sees it "
				 "(rdma system set netns shared)",
				 cl->ns, cl->name, res->device, ad->id);
			return -EOPNOTSUPP;
		}
		/* The claim itself holding the NIC both ways (the scheduler counts the NIC twice). */
		for (size_t j = 0; j < r->n; j++)
			if (!strcmp(r->devs[j].nic, ad->id) &&
			    (r->devs[j].share_id[0] != '\0') != share) {
				hpn_msgf(msg, len,
					 "claim %s/%s: NIC %s is allocated both whole and shared "
					 "(devices %s and %s)",
					 cl->ns, cl->name, ad->id, r->devs[j].device, res->device);
				return -EBUSY;
			}
		ret = other_claim(nd, cl, res, ad->id, share, msg, len);
		if (ret == 0)
			ret = held_check(nd, cl, res, ad->id, share, msg, len);
		if (ret < 0)
			return ret;
		snprintf(v->request, sizeof(v->request), "%s", res->request);
		snprintf(v->pool, sizeof(v->pool), "%s", res->pool);
		snprintf(v->device, sizeof(v->device), "%s", res->device);
		snprintf(v->nic, sizeof(v->nic), "%s", ad->id);
		snprintf(v->ifname, sizeof(v->ifname), "%s", ad->ifname);
		snprintf(v->rdma, sizeof(v->rdma), "%s", ad->rdma);
		snprintf(v->share_id, sizeof(v->share_id), "%s", res->share_id);
		r->n++;
	}
	return 0;
}

/* Is claim r reserved for pod uid? */
static bool rec_reserved(const struct dra_rec *r, const char *uid)
{
	for (size_t i = 0; i < r->n_pods; i++)
		if (!strcmp(r->pods[i], uid))
			return true;
	return false;
}

struct hpn_alloc *draclaims_pod_nics(const struct dra_claims *cl, const char *driver,
				     const char *uid, bool shares, char *why, size_t len)
{
	struct hpn_alloc *a = NULL;

	if (len)
		why[0] = '\0';
	if (!uid[0])
		return NULL;
	for (const struct dra_rec *r = cl->recs; r; r = r->next) {
		if (!rec_reserved(r, uid) || r->n == 0)
			continue;
		/* A plugin that would move a shared NIC into the pod: told, never answered. */
		for (size_t k = 0; !shares && k < r->n; k++) {
			if (!r->devs[k].share_id[0])
				continue;
			hpn_msgf(why, len,
				 "DRA claim %s/%s holds a share of NIC %s (device %s, share %s), "
				 "which the asking plugin would move into the pod: the plugin must "
				 "be upgraded to attach shares",
				 r->ns, r->name, r->devs[k].nic, r->devs[k].device,
				 r->devs[k].share_id);
			free(a);
			return NULL;
		}
		if (!a && !(a = calloc(1, sizeof(*a))))
			return NULL;
		if (a->n_claims < HPN_ALLOC_MAX_CLAIMS)
			snprintf(a->claims[a->n_claims++], HPN_ALLOC_CLAIM_MAX, "%s/%s", r->ns,
				 r->name);
		for (size_t k = 0; k < r->n && a->n < HPN_ALLOC_MAX_DEVICES; k++) {
			a->shared[a->n] = r->devs[k].share_id[0] != '\0';
			snprintf(a->ids[a->n++], HPN_ALLOC_ID_MAX, "%s", r->devs[k].nic);
		}
	}
	if (a) {
		snprintf(a->source, sizeof(a->source), "dra");
		snprintf(a->resource, sizeof(a->resource), "%s", driver);
		a->pod_known = true;
	}
	return a;
}

size_t draclaims_share_rank(const struct dra_rec *const *recs, size_t n, const struct dra_rec *r,
			    size_t k, const char *pod)
{
	const char *nic = r->devs[k].nic;
	size_t rank = 0;

	for (size_t i = 0; i < n; i++) {
		const struct dra_rec *o = recs[i];
		int order = strcmp(o->uid, r->uid);

		/* The lookup's order: claims by UID, then devices by place. */
		if (order > 0 || !rec_reserved(o, pod))
			continue;
		for (size_t j = 0; j < o->n && (order < 0 || j < k); j++)
			rank += o->devs[j].share_id[0] && !strcmp(o->devs[j].nic, nic);
	}
	return rank;
}
