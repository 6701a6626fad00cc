/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_LOOKUP_H
#define HPN_AGENT_LOOKUP_H

#include <stddef.h>

struct hpn_alloc;
struct hpn_alloc_req;
struct hpn_nri_state;
struct loop;
struct podres;
struct podwatch;

/*
 * The CNI's question on the agent's own unix socket (doc/agent.md, "The
 * lookup protocol"): which devices of our resource does pod ns/name hold?
 * Answered from the kubelet's PodResources (podresources.h).
 */
struct lookup;

/* Listens on path (mode 0600, its directory made 0700). */
int lookup_start(struct loop *l, struct podres *pr, const char *path, struct lookup **ret);
/*
 * With the DRA driver on: a pod (by its UID) that pod_nics(ud, req, why,
 * len) answers (its prepared claims' NICs, malloc'd; NULL: none) is answered
 * those first; NULL with why set (a claim's share, and req without "shares":
 * a plugin that would move the NIC) is refused with why. ud outlives lk.
 */
void lookup_dra(struct lookup *lk,
		struct hpn_alloc *(*pod_nics)(void *ud, const struct hpn_alloc_req *req, char *why,
					      size_t len),
		void *ud);
/*
 * The "attached" question (the plugin's ADD of a pod done): attached(ud, uid)
 * writes what the pod's DRA claims hold of its attachment, before the
 * answer; a negative errno is an "error" reply. Without it: answered at once.
 */
void lookup_attached(struct lookup *lk, int (*attached)(void *ud, const char *uid), void *ud);
/* The pod question ("query": "pod") answered from pw's cache (it must outlive lk). */
void lookup_set_pods(struct lookup *lk, struct podwatch *pw);
/*
 * The NRI question ("query": "nri") answered by nri_state(ud, ret), which
 * fills ret with the link's state now; without it (the default) the answer is
 * "not registered: the agent runs without --nri". ud outlives lk.
 */
void lookup_nri(struct lookup *lk, void (*nri_state)(void *ud, struct hpn_nri_state *ret),
		void *ud);
/*
 * At SIGTERM: the socket closed and removed, connections not yet asking
 * closed (replies being written go on until lookup_free).
 */
void lookup_stop(struct lookup *lk);
void lookup_free(struct lookup *lk);

#endif
