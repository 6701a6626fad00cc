/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_KUBECALL_H
#define HPN_KUBECALL_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "kubeconfig.h"

/*
 * A Kubernetes API call's logic without its transport: what a call may be,
 * how an answer's bytes are kept, and what an attempt's outcome means
 * (answer, try again after a wait, or fail, with the message). Pure: no
 * libcurl, no clock of its own, no sleep; fuzzed (test/fuzz/fuzz_kubecall.c).
 * Two transports drive it: lib/kube.c's blocking one (the plugin's single
 * GET) and the agent's on its loop (agent/core/kubeloop.c).
 */

#define HPN_KUBE_BODY_MAX (1 << 20) /* an answer (or a body to send) larger is refused */
#define HPN_KUBE_ATTEMPTS 5	    /* requests per call, at most */
#define HPN_KUBE_PATH_MAX 4096

/* One request. Strings are borrowed for the call. */
struct hpn_kube_call {
	const char *method; /* "GET", "POST", "PUT", "PATCH" or "DELETE" */
	/*
	 * "/api/..." or "/apis/...", appended to kc's server: names in it are
	 * checked by the caller (DNS labels and subdomains need no escaping),
	 * query values escaped with hpn_kube_query_escape. Only the characters
	 * of a URL's path and query are allowed (no blank, '#' or control).
	 */
	const char *path;
	const char *body; /* sent as is, at most HPN_KUBE_BODY_MAX (NULL: none) */
	size_t body_len;
	/*
	 * Of body (NULL: application/json); for PATCH:
	 * application/apply-patch+yaml (server-side apply),
	 * application/merge-patch+json...
	 */
	const char *content_type;
	const char *what; /* for messages: "pod ns/name", "ResourceSlice name" */
	/*
	 * For the 403 message "user U may not VERB RESOURCE [in namespace NS]":
	 * the RBAC resource ("pods", "resourceclaims/status"), NULL: not named;
	 * the verb (NULL: from the method: get, create, update, patch, delete;
	 * "list" for a collection's GET); ns (NULL: cluster-scoped).
	 */
	const char *resource;
	const char *verb;
	const char *ns;
	unsigned timeout_ms; /* the whole call, retries included (0: the default) */
	/*
	 * Idempotent (GET, PUT with a resourceVersion, DELETE): retried as
	 * below. When false, only what the server never acted on is retried (a
	 * connection refused, a name that does not resolve, a 429: kube-apiserver
	 * rejects before the handler); a 5xx, a reset or a timeout after the
	 * request was sent is code 11 at once, since it may have been done.
	 */
	bool retry;
};

/* The server's answer: a status, and its body (NUL-terminated, never NULL). */
struct hpn_kube_answer {
	long status;
	char *body;
	size_t len;
};
void hpn_kube_answer_free(struct hpn_kube_answer *a);

/*
 * The call as the API's rules and ours allow: a known method, an escaped
 * absolute path, no GET with a body, what it is for named, a body within
 * HPN_KUBE_BODY_MAX, a Content-Type that is a header's value (HPN_E_INTERNAL:
 * a caller's mistake), a timeout within HPN_KUBE_TIMEOUT_MS_MAX
 * (HPN_E_INVALID_CONFIG). stream: a GET whose answer is unbounded.
 */
int hpn_kube_call_check(const struct hpn_kube_call *call, bool stream, struct hpn_err *err);
/* POST, PUT and PATCH carry a body, if an empty one. */
bool hpn_kube_call_has_body(const struct hpn_kube_call *call);
/* call->timeout_ms, or HPN_KUBE_TIMEOUT_MS_DEFAULT for 0. */
unsigned hpn_kube_call_budget(const struct hpn_kube_call *call);
/*
 * The request's header lines, malloc'd, NULL-terminated, in order (Accept;
 * Content-Type and an empty Expect for a body; Authorization when token);
 * free with hpn_kube_headers_free, which zeroes them (the token).
 */
int hpn_kube_headers(const struct hpn_kube_call *call, const char *token, char ***ret);
void hpn_kube_headers_free(char **h);

/*
 * An answer's bytes as they arrive: bounded by HPN_KUBE_BODY_MAX, and
 * refused at its first byte when a 2xx is not JSON (the API's objects never
 * are anything else).
 */
struct hpn_kube_body {
	char *buf; /* NUL-terminated once anything came */
	size_t len, cap;
	long status;	/* the status the bytes came with */
	char type[64];	/* its Content-Type */
	bool too_big;	/* stopped: over HPN_KUBE_BODY_MAX */
	bool not_json;	/* stopped: a 2xx that is not application/json */
	bool no_memory; /* stopped: realloc failed */
};
/* application/json, with parameters or not ("application/json; charset=utf-8"). */
bool hpn_kube_is_json(const char *type);
/*
 * Keeps data (n bytes of the answer, which has status and Content-Type type,
 * NULL: none): false when the body is refused (a flag says why), and the
 * transport stops the transfer.
 */
bool hpn_kube_body_add(struct hpn_kube_body *b, long status, const char *type, const char *data,
		       size_t n);
/* Emptied for another attempt (the buffer freed). */
void hpn_kube_body_reset(struct hpn_kube_body *b);

/* How one attempt ended, as its transport saw it. */
enum hpn_kube_net {
	HPN_KUBE_NET_OK,	 /* an HTTP answer arrived whole: see status */
	HPN_KUBE_NET_UNSENT,	 /* no connection (refused, no such name): nothing was sent */
	HPN_KUBE_NET_BROKEN,	 /* the connection failed or closed after it was made */
	HPN_KUBE_NET_TLS_ALERT,	 /* the server ended TLS: our client certificate refused */
	HPN_KUBE_NET_TIMEOUT,	 /* no answer in the time the attempt had */
	HPN_KUBE_NET_TLS_VERIFY, /* the server's certificate refused: see verify */
	HPN_KUBE_NET_STOPPED,	 /* the body refused it (hpn_kube_body_add's flags) */
	HPN_KUBE_NET_CREDS,	 /* the kubeconfig's client certificate or key cannot be used */
	HPN_KUBE_NET_CA,	 /* the kubeconfig's CA cannot be used */
	HPN_KUBE_NET_OTHER,	 /* anything else the transport reports */
};
struct hpn_kube_attempt {
	enum hpn_kube_net net;
	const char *text;	 /* the transport's words (libcurl's error buffer) */
	long verify;		 /* for TLS_VERIFY: OpenSSL's X509_V_ERR_* */
	long status;		 /* for OK */
	long long retry_after_s; /* for OK: a 429's or 503's Retry-After (0: none) */
};

/* A call's attempts, from the first to its answer or error. */
struct hpn_kube_try {
	const struct hpn_kubeconfig *kc;
	const struct hpn_kube_call *call;
	long long start, deadline, backoff; /* ms on the caller's monotonic clock */
	unsigned attempts;
	/* Where the last retryable attempt failed, for the code 11 message. */
	char why[HPN_ERR_MSG];
	long long retry_after_ms;
	bool closed;  /* a connection was closed on us after it was made */
	bool unacted; /* the last failure is one the server never acted on */
};
enum hpn_kube_next {
	HPN_KUBE_ANSWER, /* the body is the caller's answer (a 2xx, or a status it tells apart) */
	HPN_KUBE_AGAIN,	 /* attempt again after *wait_ms */
	HPN_KUBE_FAILED, /* *r and err say why */
};
void hpn_kube_try_start(struct hpn_kube_try *t, const struct hpn_kubeconfig *kc,
			const struct hpn_kube_call *call, long long now_ms);
/* The time the next attempt may take (its transfer timeout); <= 0: the budget is spent. */
long long hpn_kube_try_left(const struct hpn_kube_try *t, long long now_ms);
/*
 * The attempt a, whose answer's bytes are b, judged at now_ms (kube.h's
 * hpn_kube_request says what is retried and what fails, and how): AGAIN
 * with the wait, FAILED with the negative errno in *r and err set, ANSWER.
 * After ANSWER the caller takes b's bytes; a FAILED call is over.
 */
enum hpn_kube_next hpn_kube_try_judge(struct hpn_kube_try *t, const struct hpn_kube_attempt *a,
				      const struct hpn_kube_body *b, long long now_ms,
				      long long *wait_ms, int *r, struct hpn_err *err);
/*
 * A stream's attempt (one request, never repeated: the caller watches
 * again), judged: 0 with the answer to take from b (a 200 that ended, at
 * the server's end or at its timeout, or another status the caller tells
 * apart, e.g. 410), or the error: 401 and 403 as a request's; a 5xx, a 429,
 * a connection that fails or breaks: code 11, -EAGAIN; stopped by the
 * caller: code 11, -ECANCELED.
 */
int hpn_kube_stream_judge(struct hpn_kube_try *t, const struct hpn_kube_attempt *a,
			  const struct hpn_kube_body *b, bool stopped, struct hpn_err *err);

/*
 * The error for an answer that is not the 2xx the caller wanted, named as
 * a call's own errors are: 404 code 3 ("CALL->WHAT does not exist"),
 * -ENOENT; 409 HPN_E_KUBE, -EBUSY (Conflict: a stale resourceVersion, or
 * AlreadyExists); 422 HPN_E_KUBE, -EINVAL (Invalid); another status
 * HPN_E_KUBE, -EPROTO. Details: the Status object's message. Returns the
 * negative errno.
 */
int hpn_kube_status_err(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call,
			const struct hpn_kube_answer *a, struct hpn_err *err);

/*
 * An error about call, named as the call's own are: "Kubernetes API SERVER:
 * METHOD WHAT: " then fmt; details (may be NULL) as the error's details.
 * Returns -e.
 */
int hpn_kube_call_err(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call,
		      struct hpn_err *err, int code, int e, const char *details, const char *fmt,
		      ...) __attribute__((format(printf, 7, 8)));

/*
 * s percent-escaped for a query value (a labelSelector or fieldSelector):
 * every byte but A-Z a-z 0-9 - . _ ~ as %XX, so "spec.nodeName=n1,spec.driver=d"
 * stays one value. *ret (malloc) written on success; -ENOMEM.
 */
int hpn_kube_query_escape(const char *s, char **ret);

#endif
