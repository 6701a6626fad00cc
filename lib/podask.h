/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_PODASK_H
#define HPN_PODASK_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc.h"
#include "err.h"
#include "pod.h"

/*
 * The pod question on the agent's lookup socket (doc/agent.md, "The lookup
 * protocol"): the request of alloc.h with "query": "pod"; the reply
 * {"version": 1, "pod": {...}}, the Pod as the API returns it (trimmed to
 * what hpn_pod_parse reads), or {"version": 1, "unknown": "why"} when the
 * agent's pod cache cannot say (not synced, no such pod, another UID).
 */

#define HPN_PODASK_REPLY_MAX  ((size_t)1 << 20) /* a pod's JSON: the API's own body limit */
#define HPN_PODASK_TIMEOUT_MS 250		/* at most: the answer comes from memory */

struct hpn_conf;
/*
 * The keys of a pod conf's plugin reads (hpn_conf_apply_pod): the labels
 * podSelector.label and nccl.gpuModelLabel, the annotation
 * nccl.gpuModelAnnotation, the resource kubernetes.gpuResource (else
 * HPN_POD_GPU_RESOURCE). ret->set.
 */
void hpn_podask_keys(const struct hpn_conf *conf, struct hpn_alloc_keys *ret);
/*
 * Does a cache that keeps kept hold every key asked names? false with why
 * (the first key it lacks). asked not set (an older plugin): true.
 */
bool hpn_podask_keys_kept(const struct hpn_alloc_keys *asked, const struct hpn_alloc_keys *kept,
			  char *why, size_t len);

/* The reply around pod_json (a JSON object, NULL: unknown for why). malloc'd, NULL: ENOMEM. */
char *hpn_podask_reply_render(const char *pod_json, const char *why);

/*
 * Parses a reply: 0 with *ret (hpn_pod_parse of "pod", resource counted);
 * -ENOENT for "unknown" (err holds the agent's why, code 11); an "error"
 * reply (a refusal) code 11, -EAGAIN; a malformed one code 6 or the pod's
 * hpn_pod_parse error. *ret written only on success.
 */
int hpn_podask_reply_parse(const char *buf, size_t len, const char *resource, struct hpn_pod *ret,
			   struct hpn_err *err);

/*
 * Asks the agent at socket_path for pod req (req->uid must be the cached
 * pod's), within timeout_ms: 0 with *ret; the errors of hpn_agent_ask (no
 * agent: -ENOENT or -ECONNREFUSED; -ETIMEDOUT) and hpn_podask_reply_parse.
 */
int hpn_podask(const char *socket_path, int timeout_ms, const struct hpn_alloc_req *req,
	       const char *resource, struct hpn_pod *ret, struct hpn_err *err);

#endif
