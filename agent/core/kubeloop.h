/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_KUBELOOP_H
#define HPN_AGENT_KUBELOOP_H

#include <stdbool.h>

#include "kubecall.h"

/*
 * The Kubernetes API on the agent's loop: libcurl's multi interface, its
 * sockets and timer in the loop's epoll, so a call waits on the network and
 * on its retries without a thread (the pod watch, the DRA driver's claims,
 * slices and status). Each call means what hpn_kube_request's means (kube.h:
 * TLS, credentials, retries within one budget, errors); kubecall.c judges
 * both transports' attempts.
 */
struct loop;
struct kubeloop;
struct kube_op; /* a call in flight */

int kubeloop_new(struct loop *l, struct kubeloop **ret, struct hpn_err *err);
/* Every call still in flight cancelled (its done never called); NULL is fine. Before loop_free. */
void kubeloop_free(struct kubeloop *kl);

/* How a call ended: r < 0 and err, or 0 and the answer (the owner's: hpn_kube_answer_free). */
struct kube_result {
	int r;
	struct hpn_kube_answer a;
	struct hpn_err err;
	char server[256]; /* for messages: the kubeconfig's server (cut), "" if it did not load */
};
/*
 * An answer that is not the 2xx the owner wanted made res's error (as
 * hpn_kube_status_err, call naming the call made); returns res->r.
 */
int kube_result_status_err(struct kube_result *res, const struct hpn_kube_call *call);
typedef void kube_done_fn(void *ud, struct kube_result *res);

/*
 * Makes call (copied: nothing is borrowed past the return) to the server of
 * the kubeconfig at path, read now (its tokenFile too: tokens rotate; what
 * it warns of is logged). done(ud, res) runs on the loop once, in a later
 * round, also for a call that could not start (a kubeconfig that does not
 * load, a bad call), unless kube_cancel came first. *ret (may be NULL) names
 * the call until done runs. -ENOMEM alone is returned at once.
 */
int kube_call(struct kubeloop *kl, const char *kubeconfig, const struct hpn_kube_call *call,
	      kube_done_fn *done, void *ud, struct kube_op **ret);
/*
 * A watch: a GET whose 200 body goes to on_data as it arrives (any pieces),
 * until the server ends it or call->timeout_ms passes (res->r 0, a.status
 * 200), on_data returns < 0 (code 11, -ECANCELED), or it fails as
 * hpn_kube_stream_judge says; another status is an answer (410 Gone...).
 * Never repeated: the owner watches again.
 */
int kube_watch(struct kubeloop *kl, const char *kubeconfig, const struct hpn_kube_call *call,
	       int (*on_data)(void *ud, const char *data, size_t len), kube_done_fn *done, void *ud,
	       struct kube_op **ret);
/* Ends op now; its done is not called. Not from its own on_data (return < 0 there). */
void kube_cancel(struct kube_op *op);
/* Calls in flight (for the owner's idle check at exit and for tests). */
unsigned kubeloop_pending(const struct kubeloop *kl);
struct sbuf;
/* Its families (doc/metrics.md): calls by result, attempts, in flight; ud: the kubeloop. */
void kubeloop_metrics(struct sbuf *b, void *ud);

#endif
