/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_PODWATCH_H
#define HPN_AGENT_PODWATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc.h"

/*
 * The pods of this node, listed then watched from the Kubernetes API
 * (podwatch.c) into a cache (podcache.c), so that the CNI's label lookup
 * asks the agent (lookup.c, "query": "pod") instead of the API server once
 * per ADD.
 *
 * Any tenant that may create a pod may name this node in it, so what the
 * cache holds is bounded whatever the pods carry (doc/agent.md, "The pod
 * cache"; podcache.c): a pod is kept as at most PODWATCH_POD_BYTES_MAX bytes
 * of JSON (else by its name alone, and its question answered "unknown"), the
 * cache as at most PODWATCH_BYTES_MAX (else the pods that do not fit are not
 * kept).
 */
#define PODWATCH_POD_BYTES_MAX ((size_t)16 << 10)
#define PODWATCH_BYTES_MAX     ((size_t)8 << 20)

struct podwatch;

/*
 * Starts the watch of node's pods with the kubeconfig at path (read anew for
 * every list and watch: the token rotates), its calls on kl, on loop l. The
 * first list is asked at the loop's next round.
 */
struct loop;
struct kubeloop;
int podwatch_start(struct loop *l, struct kubeloop *kl, const char *kubeconfig, const char *node,
		   struct podwatch **ret);

/*
 * Keeps of each pod only what the plugin reads with conf (the agent's
 * --config, the plugin's own): the keys its pod question names
 * (hpn_podask_keys: the labels podSelector.label and nccl.gpuModelLabel,
 * the annotation nccl.gpuModelAnnotation, each container's
 * kubernetes.gpuResource), and the annotation kubernetes.io/config.mirror.
 * conf is read at every list and question, not copied: it must outlive pw
 * (the node's, reloaded in place); keys changed by a reload make the cache
 * list again, and until then its questions are "unknown". Without this call
 * every label and annotation is kept (within the bytes above).
 */
struct hpn_conf;
void podwatch_keep(struct podwatch *pw, const struct hpn_conf *conf);

/* Ends its call in flight and frees all; NULL is fine. */
void podwatch_free(struct podwatch *pw);
struct sbuf;
/* Its families (doc/metrics.md): the cache's state, size and rounds; ud: the podwatch (metrics.h). */
void podwatch_metrics(struct sbuf *b, void *ud);

/*
 * The reply to a pod question (podask.h), malloc'd (NULL: ENOMEM): the cached
 * pod when the cache is synced, holds req's namespace/name whole, and its UID
 * (or a static pod's mirror annotation) is req->uid; else "unknown" with why.
 */
char *podwatch_answer(struct podwatch *pw, const struct hpn_alloc_req *req);

/*
 * The pod's extended-resource claim (KEP-5004), for the lookup's GPUs: true
 * when the cache holds req's pod (its UID, when req has one) with a
 * status.extendedResourceClaimStatus, its claim's name copied into claim and
 * the resources it serves (comma-separated) into res; false otherwise (pw
 * NULL: no cache), neither written. The cache need not be synced: a claim
 * name once written stays the pod's.
 */
bool podwatch_xclaim(struct podwatch *pw, const struct hpn_alloc_req *req, char *claim,
		     size_t claim_len, char *res, size_t res_len);

/*
 * The same cache with no loop and no API, for the fuzzer
 * (test/fuzz/fuzz_podcache.c): keys from conf as podwatch_keep's (NULL:
 * all), pod_max and bytes_max in place of the two caps above, its first list
 * begun. The bodies are fed as they would stream in, in pieces of any size;
 * every wait is over at once.
 */
struct podwatch *podwatch_offline(const struct hpn_conf *conf, size_t pod_max, size_t bytes_max);
/* Bytes of the list page in flight: < 0, not a list (the page failed: it is asked again). */
int podwatch_offline_page(struct podwatch *pw, const char *data, size_t len);
/*
 * The page's stream ended: 1, its continue token asks for the next page; 0,
 * the list made the cache and the watch began; < 0, it was not a whole list
 * (the page failed: it is asked again).
 */
int podwatch_offline_page_end(struct podwatch *pw);
/* Bytes of the watch: < 0, the stream ends (the list begins again). */
int podwatch_offline_watch(struct podwatch *pw, const char *data, size_t len);

#endif
