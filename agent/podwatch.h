/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_PODWATCH_H
#define HPN_AGENT_PODWATCH_H

#include "alloc.h"

/*
 * The pods of this node, listed then watched from the Kubernetes API
 * (podwatch.c), so that the CNI's label lookup asks the agent (lookup.c,
 * "query": "pod") instead of the API server once per ADD.
 */
struct podwatch;

/*
 * Starts the watch of node's pods with the kubeconfig at path (read anew for
 * every list and watch: the token rotates), its calls on kl, on loop l.
 */
struct loop;
struct kubeloop;
int podwatch_start(struct loop *l, struct kubeloop *kl, const char *kubeconfig, const char *node,
		   struct podwatch **ret);
/* Ends its call in flight and frees all; NULL is fine. */
void podwatch_free(struct podwatch *pw);
struct sbuf;
/* Its families (doc/metrics.md): the cache's state and rounds; ud: the podwatch (metrics.h). */
void podwatch_metrics(struct sbuf *b, void *ud);

/*
 * The reply to a pod question (podask.h), malloc'd (NULL: ENOMEM): the cached
 * pod when the cache is synced, holds req's namespace/name, and its UID (or a
 * static pod's mirror annotation) is req->uid; else "unknown" with why.
 */
char *podwatch_answer(struct podwatch *pw, const struct hpn_alloc_req *req);

#endif
