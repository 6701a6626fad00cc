/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_PODCACHE_H
#define HPN_AGENT_PODCACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc.h"

/*
 * The pod cache itself (podcache.c), for podwatch.c: what is kept of a pod,
 * and the table of pods within its byte and count caps. No loop, no API.
 */

struct pod_entry {
	char *ns, *name, *uid;
	char *mirror; /* a static pod's kubernetes.io/config.mirror, or NULL */
	char *json;   /* the trimmed Pod; NULL: kept by name only (too large, or nul) */
	/*
	 * status.extendedResourceClaimStatus (KEP-5004): the ResourceClaim the
	 * scheduler made for the extended resources DRA backs, and the distinct
	 * resourceName of its requestMappings, comma-separated; NULL: none, or
	 * not of the API's form. The lookup's GPUs (podwatch_xclaim).
	 */
	char *xclaim, *xres;
	size_t bytes; /* counted against PODWATCH_BYTES_MAX */
	bool nul;     /* its JSON held \u0000, which hpn_pod_parse refuses: the API says so */
};

/* The pods of one list, or the cache. */
struct pods {
	struct pod_entry *v;
	size_t n, bytes;
	size_t max;	/* bytes, at most (PODWATCH_BYTES_MAX) */
	size_t refused; /* pods not kept: the cache was full */
};

/* How pods are kept (pods_keep), and those not kept whole: counted, warned of once a list. */
struct pod_skips {
	const char *node; /* named in the warnings (the owner's string) */
	size_t pod_max;	  /* bytes of a pod's JSON kept, at most (PODWATCH_POD_BYTES_MAX) */
	unsigned long too_large, refused; /* pods kept by name only; not kept */
	bool said_large, said_full;	  /* warned, since the list began */
};

/*
 * The keys a pod is trimmed to: those conf's plugin reads (hpn_podask_keys,
 * what its pod question names); conf NULL: !set, every label and annotation.
 */
struct hpn_conf;
void pod_keys_of(const struct hpn_conf *conf, struct hpn_alloc_keys *ret);
/* Does k keep what conf's plugin reads (conf NULL: everything)? */
bool pod_keys_same(const struct hpn_alloc_keys *k, const struct hpn_conf *conf);

/* The entry of ns/name in p, or NULL. */
struct pod_entry *pods_find(struct pods *p, const char *ns, const char *name);
/* The entry of ns/name dropped from p, if there is one. */
void pods_drop(struct pods *p, const char *ns, const char *name);
/* Entries kept by name only. */
size_t pods_by_name(const struct pods *p);
/* Emptied; its cap stays. */
void pods_free(struct pods *p);

/*
 * pod from the API into p (the cache, or the list under way) trimmed to k:
 * too large, kept by name; p full, not kept; each said once a list in s
 * (then counted); not a pod at all, dropped (the plugin asks the API). nul:
 * its JSON held \u0000, which the trimming would cut and the plugin refuses:
 * kept by name, so that the API's answer decides as it would without the
 * cache. -ENOMEM alone is an error.
 */
struct cJSON;
int pods_keep(struct pods *p, const struct hpn_alloc_keys *k, const struct cJSON *pod, bool nul,
	      struct pod_skips *s);

#endif
