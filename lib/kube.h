/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_KUBE_H
#define HPN_KUBE_H

#include "err.h"
#include "kubeconfig.h"
#include "pod.h"

/*
 * Requests to the Kubernetes API over HTTPS with libcurl, which is dlopen()ed
 * (and curl_global_init run) on the first request only, so a run that makes
 * none pays nothing for it. The plugin makes one (GET a pod); the agent's DRA
 * driver makes the others (ResourceClaims, ResourceSlices) through
 * hpn_kube_request.
 */

#define HPN_KUBE_BODY_MAX (1 << 20) /* an answer (or a body to send) larger is refused */
#define HPN_KUBE_ATTEMPTS 5	    /* requests per call, at most */
/* On a static pod's mirror pod: the static pod's UID, which is K8S_POD_UID. */
#define HPN_KUBE_MIRROR_ANNOTATION "kubernetes.io/config.mirror"

struct hpn_kube_req {
	const char *ns;	  /* K8S_POD_NAMESPACE: a DNS-1123 label */
	const char *name; /* K8S_POD_NAME: a DNS-1123 subdomain */
	const char *uid;  /* K8S_POD_UID: the pod's metadata.uid must equal it (NULL: unchecked) */
	const char *resource; /* resource counted (NULL: HPN_POD_GPU_RESOURCE) */
	unsigned timeout_ms;  /* the whole lookup, retries included (0: the default) */
};

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

/*
 * Makes call to kc's server: TLS always verified, against kc's CA only (the
 * system's CAs are not trusted), with kc's client certificate if it has one
 * (both given to libcurl as memory blobs: nothing is written to disk); the
 * bearer token (kc's tokenFile read now) in Authorization; Accept:
 * application/json; no proxy, no redirect, HTTP/1.1.
 * One budget, call->timeout_ms, covers every attempt and wait. Retried (up to
 * HPN_KUBE_ATTEMPTS requests, backing off 100, 200, 400, 800 ms, or as long as
 * a 429 or 503 says in Retry-After; see call->retry): 429, 5xx, a connection
 * refused or reset, a name that does not resolve. When the budget or the
 * attempts run out: code 11 (try again later) naming the server, call->what
 * and the last failure.
 * Errors, never retried: 401 and 403 (HPN_E_KUBE, naming the user), a 2xx
 * whose Content-Type is not application/json, an answer over
 * HPN_KUBE_BODY_MAX, TLS verification failures (the server's certificate not
 * signed by the kubeconfig's CA, or not for the server's name; our client
 * certificate refused): HPN_E_KUBE; a timeout over HPN_KUBE_TIMEOUT_MS_MAX:
 * HPN_E_INVALID_CONFIG; a method or path not as above, a GET with a body:
 * HPN_E_INTERNAL (before any request). Messages name the server, the method
 * and call->what; details hold the API server's own message or libcurl's.
 * Every other answer is returned, 0: a 2xx, and a status the caller tells
 * apart (404 Not Found, 409 Conflict or AlreadyExists, 422 Invalid, 415...),
 * whose body is then the API server's Status object; hpn_kube_status_err
 * turns one into an error. warn (may be NULL) gets what the caller should
 * log (a token file readable by others). *ret is written only on success;
 * free it with hpn_kube_answer_free.
 */
int hpn_kube_request(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call,
		     struct hpn_kube_answer *ret, struct hpn_kube_warn *warn, struct hpn_err *err);
void hpn_kube_answer_free(struct hpn_kube_answer *a);

/* What a stream's bytes go to (hpn_kube_stream). */
struct hpn_kube_stream {
	/* The 200's body as it arrives, in pieces of any size; < 0 ends the stream. */
	int (*on_data)(void *ud, const char *data, size_t len);
	/* Asked at least once a second, also while nothing comes; true ends it (NULL: never). */
	bool (*stop)(void *ud);
	void *ud;
};

/*
 * A long GET (a watch: ?watch=1) to kc's server, set up as hpn_kube_request
 * sets one up (TLS, credentials, headers), whose 200 body goes to
 * st->on_data as it comes, unbounded, until the server ends it or
 * call->timeout_ms passes (both a normal end: 0, ret->status 200, an empty
 * body). One request, never retried: the caller watches again. Another
 * status: 0 with it and its body (bounded, as hpn_kube_request's), e.g. 410
 * Gone; 401 and 403 the errors of hpn_kube_request; a 5xx, a connection that
 * fails or breaks: code 11, -EAGAIN; ended by on_data or stop: code 11,
 * -ECANCELED. Runs on the caller's thread: a thread of its own, since it
 * blocks while the stream lasts.
 */
int hpn_kube_stream(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call,
		    const struct hpn_kube_stream *st, struct hpn_kube_answer *ret,
		    struct hpn_kube_warn *warn, struct hpn_err *err);

/*
 * libcurl loaded and curl_global_init run now, on this thread, when other
 * threads will make requests (before 7.84, curl_global_init is not
 * thread-safe). Errors as hpn_kube_request's for a libcurl it cannot use.
 */
int hpn_kube_init(struct hpn_err *err);

/*
 * The error for an answer that is not the 2xx the caller wanted, named as
 * hpn_kube_request names its own: 404 code 3 ("CALL->WHAT does not exist"),
 * -ENOENT; 409 HPN_E_KUBE, -EBUSY (Conflict: a stale resourceVersion, or
 * AlreadyExists); 422 HPN_E_KUBE, -EINVAL (Invalid); another status
 * HPN_E_KUBE, -EPROTO. Details: the Status object's message. Returns the
 * negative errno.
 */
int hpn_kube_status_err(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call,
			const struct hpn_kube_answer *a, struct hpn_err *err);

/*
 * s percent-escaped for a query value (a labelSelector or fieldSelector):
 * every byte but A-Z a-z 0-9 - . _ ~ as %XX, so "spec.nodeName=n1,spec.driver=d"
 * stays one value. *ret (malloc) written on success; -ENOMEM.
 */
int hpn_kube_query_escape(const char *s, char **ret);

/*
 * GET /api/v1/namespaces/{ns}/pods/{name} from kc's server (hpn_kube_request,
 * retried, resource "pods"), then hpn_pod_parse, then the pod's namespace,
 * name and (if req->uid) uid must be the ones asked for (a static pod's mirror pod matches by its
 * HPN_KUBE_MIRROR_ANNOTATION instead of its uid). Errors as hpn_kube_request
 * (the messages name the pod), and: 404 (code 3: the pod does not exist,
 * nothing to clean up), another status than 200, a body that is not a valid
 * Pod: HPN_E_KUBE; a wrong namespace, name or uid: code 3 (the pod asked for
 * is gone, or was recreated under the same name); a namespace or name that
 * is not a DNS label or subdomain: code 4, before any request.
 * warn (may be NULL) gets what the caller should log (a token file readable
 * by others). *ret is written only on success; free with hpn_pod_free.
 */
int hpn_kube_get_pod(const struct hpn_kubeconfig *kc, const struct hpn_kube_req *req,
		     struct hpn_pod *ret, struct hpn_kube_warn *warn, struct hpn_err *err);

#endif
