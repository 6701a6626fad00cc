/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_DRAPREPARE_H
#define HPN_DRAPREPARE_H

#include <stdbool.h>
#include <stddef.h>

#include "dra.h"
#include "err.h"

/*
 * The DRA driver's NodePrepareResources as a state machine, with no gRPC,
 * no loop and no I/O of its own (doc/dra.md, "NodePrepareResources"). The
 * kubelet's calls wait in the order they came; a claim the driver has a
 * record of is answered from it, any other from the ResourceClaim its owner
 * fetches from the API; every claim is answered once, and every call once,
 * when its last claim is. Whatever touches the world is the owner's, through
 * the ops: the fetch, the records, the preparation of a fetched claim
 * (devices, journals, files) and the reply. The machine keeps the counters.
 *
 * Claims are fetched at most max_fetches at a time, the first waiting claim
 * of the first call first; a claim is looked up again just before its fetch
 * would start (an earlier call may have prepared it meanwhile: then it is
 * answered from that record, with no fetch), and a claim whose UID is being
 * fetched for another call waits for that one. A call whose kubelet went
 * away (hpn_dra_prep_gone), or every call once the driver stops, gives up
 * its waiting claims without fetching them; a fetch already out still ends
 * in hpn_dra_prep_fetched and is consumed as any other.
 *
 * Single-threaded: everything here runs where the owner calls it (the loop).
 */

#define HPN_DRA_PREP_ERR_MAX 512
/* A claim's UID, at most: agent/dra/draclaims.h's (it names a CDI device and a file). */
#define HPN_DRA_PREP_UID_MAX 57

enum hpn_dra_prep_state {
	HPN_DRA_PREP_WAITING,  /* neither answered nor being fetched */
	HPN_DRA_PREP_FETCHING, /* ops->fetch started, hpn_dra_prep_fetched not yet called */
	HPN_DRA_PREP_DONE,     /* answered: rec, or err */
};

/* One claim of a call, as the kubelet named it (the owner checked the names). */
struct hpn_dra_prep_claim {
	char ns[64], name[254], uid[HPN_DRA_PREP_UID_MAX + 1];
	const void *rec;		/* the answer: the owner's record (opaque here), or NULL */
	char err[HPN_DRA_PREP_ERR_MAX]; /* rec NULL: why (empty: no reason given) */
	enum hpn_dra_prep_state state;
	bool api; /* a fetch was started for it: "api", not "record", in the counters */
};

/* One NodePrepareResources call. */
struct hpn_dra_prep_call {
	void *owner; /* the owner's (drakubelet.c: its rpc_call); the machine never reads it */
	bool gone;   /* its kubelet went away: no reply, no more fetches */
	struct hpn_dra_prep_call *next; /* the queue's */
	size_t n;
	struct hpn_dra_prep_claim v[];
};

/* What the owner does for the machine; ud is hpn_dra_prep_init's. */
struct hpn_dra_prep_ops {
	/*
	 * Starts fetching claim i of pc from the API. 0: started, and the owner
	 * calls hpn_dra_prep_fetched(pc, i) exactly once later (or even before
	 * fetch returns). -ENOMEM: nothing started, try again later (retry is
	 * called). Another negative errno: nothing started, the claim is given
	 * up with strerror as the reason. In no case is pc freed by it.
	 */
	int (*fetch)(void *ud, struct hpn_dra_prep_call *pc, size_t i);
	/*
	 * The driver's record of q's UID, if it has one: q answered from it
	 * (q->rec, or q->err when the record cannot answer it) and true; false
	 * when there is no record.
	 */
	bool (*lookup)(void *ud, struct hpn_dra_prep_claim *q);
	/* q prepared from the API's claim cl (cl->uid is q's): q->rec set, or q->err says why not. */
	void (*prepare)(void *ud, struct hpn_dra_prep_claim *q, const struct hpn_dra_claim *cl);
	/* Every claim of pc answered, its kubelet still there: the answer. pc is freed after. */
	void (*reply)(void *ud, const struct hpn_dra_prep_call *pc);
	/* A fetch could not start for want of memory: call hpn_dra_prep_pump again soon. */
	void (*retry)(void *ud);
	/* Optional (NULL: none): a fetch ended in an error, q->err says which (to be logged). */
	void (*fetch_failed)(void *ud, const struct hpn_dra_prep_claim *q);
};

struct hpn_dra_prep {
	const struct hpn_dra_prep_ops *ops;
	void *ud;
	size_t max_fetches, fetching; /* fetching: claims in HPN_DRA_PREP_FETCHING */
	bool quitting, pumping;
	struct hpn_dra_prep_call *calls, **tail; /* the queue, in arrival order */
	/* Claims answered in replies sent, by [api][ok]: ok is an answer with a record. */
	unsigned long prepares[2][2];
};

/* m empty; max_fetches at least 1 (0 is taken as 1). Nothing to free until a call is submitted. */
void hpn_dra_prep_init(struct hpn_dra_prep *m, const struct hpn_dra_prep_ops *ops, void *ud,
		       size_t max_fetches);
/* A call of n claims, zeroed (state WAITING): the owner fills in owner and each ns, name, uid. */
struct hpn_dra_prep_call *hpn_dra_prep_call_new(size_t n);
/*
 * pc (from hpn_dra_prep_call_new) taken over: each claim looked up, the
 * call queued, fetches started as the limit allows. A call all of whose
 * claims are answered at once is replied to and freed before this returns.
 */
void hpn_dra_prep_submit(struct hpn_dra_prep *m, struct hpn_dra_prep_call *pc);
/*
 * The fetch of claim i of pc ended: r 0 and cl the parsed claim, or r a
 * negative errno and err (may be NULL) its message (-ESTALE: the API holds
 * another claim under that name). The claim is answered: with the error; or,
 * when the driver stops, that it stops; or from a record made meanwhile; or
 * by ops->prepare (cl is read only during this call). Then its call is
 * replied to if it was the last, and the next fetches start. A claim not
 * being fetched is ignored.
 */
void hpn_dra_prep_fetched(struct hpn_dra_prep *m, struct hpn_dra_prep_call *pc, size_t i, int r,
			  const struct hpn_dra_claim *cl, const struct hpn_err *err);
/*
 * pc's kubelet went away (pc stays the machine's): it gets no reply, and its
 * waiting claims no fetch; they are given up at the machine's next step (a
 * fetch's end, a pump, a submit), not in this call.
 */
void hpn_dra_prep_gone(struct hpn_dra_prep_call *pc);
/* Starts the fetches the limit allows (after ops->retry). */
void hpn_dra_prep_pump(struct hpn_dra_prep *m);
/*
 * The driver stops: every waiting claim, of calls queued or submitted later,
 * answers so without a fetch, as soon as the limit lets the machine at it
 * (with the limit reached, when a fetch out ends).
 */
void hpn_dra_prep_stop(struct hpn_dra_prep *m);
/*
 * The owner frees record rec (an Unprepare): claims of calls still queued
 * that were answered from it are left with no record and no reason
 * (drakubelet.c replies "not prepared").
 */
void hpn_dra_prep_forget(struct hpn_dra_prep *m, const void *rec);
/* Every call freed with no reply and no op called (after the loop); m may be zeroed. */
void hpn_dra_prep_free(struct hpn_dra_prep *m);

#endif
