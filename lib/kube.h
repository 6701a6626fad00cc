/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_KUBE_H
#define HPN_KUBE_H

#include "err.h"
#include "kubecall.h"
#include "kubeconfig.h"
#include "pod.h"

/*
 * Requests to the Kubernetes API over HTTPS with libcurl, which is dlopen()ed
 * (and curl_global_init run) on the first request only, so a run that makes
 * none pays nothing for it: the blocking transport, for the plugin's one GET
 * of a pod (the agent's calls go through its loop, agent/core/kubeloop.c).
 * What a call may be and what its answer means: kubecall.h.
 */

/* On a static pod's mirror pod: the static pod's UID, which is K8S_POD_UID. */
#define HPN_KUBE_MIRROR_ANNOTATION "kubernetes.io/config.mirror"

struct hpn_kube_req {
	const char *ns;	  /* K8S_POD_NAMESPACE: a DNS-1123 label */
	const char *name; /* K8S_POD_NAME: a DNS-1123 subdomain */
	const char *uid;  /* K8S_POD_UID: the pod's metadata.uid must equal it (NULL: unchecked) */
	const char *resource; /* resource counted (NULL: HPN_POD_GPU_RESOURCE) */
	unsigned timeout_ms;  /* the whole lookup, retries included (0: the default) */
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
