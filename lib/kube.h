/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_KUBE_H
#define HPN_KUBE_H

#include "err.h"
#include "kubeconfig.h"
#include "pod.h"

/*
 * The one Kubernetes API request the plugin makes: GET a pod, over HTTPS with
 * libcurl, which is dlopen()ed (and curl_global_init run) on the first lookup
 * only, so a run that makes none pays nothing for it.
 */

#define HPN_KUBE_BODY_MAX (1 << 20) /* an answer larger than this is refused */
#define HPN_KUBE_ATTEMPTS 5	    /* requests per lookup, at most */
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
 * GET /api/v1/namespaces/{ns}/pods/{name} from kc's server, then
 * hpn_pod_parse, then the pod's namespace, name and (if req->uid) uid must be
 * the ones asked for (a static pod's mirror pod matches by its
 * HPN_KUBE_MIRROR_ANNOTATION instead of its uid). TLS is always verified, against kc's CA only (the
 * system's CAs are not trusted), with kc's client certificate if it has one
 * (both given to libcurl as memory blobs: nothing is written to disk); the
 * bearer token (kc's tokenFile read now) in Authorization; Accept:
 * application/json; no proxy, no redirect, HTTP/1.1.
 * One budget, req->timeout_ms, covers every attempt and wait. Retried (up to
 * HPN_KUBE_ATTEMPTS requests, backing off 100, 200, 400, 800 ms, or as long as
 * a 429 or 503 says in Retry-After): 429, 5xx, a connection refused or reset,
 * a name that does not resolve. When the budget or the attempts run out: code
 * 11 (try again later) naming the server, the pod and the last failure.
 * Not retried: 401 and 403 (HPN_E_KUBE, naming the user), 404 (code 3: the pod
 * does not exist, nothing to clean up), another status, a Content-Type that is
 * not application/json, an answer over HPN_KUBE_BODY_MAX, a body that is not a
 * valid Pod, TLS verification failures (the server's certificate not signed by
 * the kubeconfig's CA, or not for the server's name; our client certificate
 * refused): HPN_E_KUBE; a wrong namespace, name or uid: code 3 (the pod asked
 * for is gone, or was recreated under the same name). Messages name the
 * server and the pod; details hold the API server's own message or libcurl's.
 * warn (may be NULL) gets what the caller should log (a token file readable
 * by others). *ret is written only on success; free with hpn_pod_free.
 */
int hpn_kube_get_pod(const struct hpn_kubeconfig *kc, const struct hpn_kube_req *req,
		     struct hpn_pod *ret, struct hpn_kube_warn *warn, struct hpn_err *err);

#endif
