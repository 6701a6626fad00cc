/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_DRA_H
#define HPN_DRA_H

#include <stddef.h>

#include "err.h"
#include "pod.h"

/*
 * A ResourceClaim as the DRA driver reads it from the Kubernetes API after
 * the kubelet's NodePrepareResources, which names only the claim's
 * namespace, name and UID: the devices of our driver the scheduler
 * allocated, and the pods the claim is reserved for. resource.k8s.io/v1,
 * and v1beta1 and v1beta2, whose fields at every path read here are the same.
 */

/* The answer's size, at most: kube.h's HPN_KUBE_BODY_MAX, which this layer cannot include. */
#define HPN_DRA_BODY_MAX (1u << 20)
/* Results of our driver, at most: the API's own limit on a claim's results, of all drivers. */
#define HPN_DRA_MAX_RESULTS 32
/* Pods a claim of ours is reserved for, at most (a NIC moved into a pod serves that pod). */
#define HPN_DRA_MAX_PODS 8

/* A share's ID: an RFC 4122 UUID as the API normalizes it, 36 bytes, and the NUL. */
#define HPN_DRA_SHARE_ID_MAX 37

/* One allocated device (status.allocation.devices.results[]), sizes as the API limits them. */
struct hpn_dra_result {
	char request[128]; /* "<request>" or "<request>/<subrequest>": DNS labels */
	char pool[254];	   /* DNS subdomains separated by '/', <= 253 */
	char device[64];   /* a DNS label */
	/*
	 * shareID: one allocation of a device the scheduler may allocate many
	 * times (KEP-5075, our "<NIC device>-shared"); "" for a NIC's own device.
	 */
	char share_id[HPN_DRA_SHARE_ID_MAX];
};

struct hpn_dra_claim {
	char ns[64];		       /* metadata.namespace */
	char name[254];		       /* metadata.name */
	char uid[HPN_POD_UID_MAX + 1]; /* metadata.uid */
	/* annotation resource.kubernetes.io/pod-claim-name (a claim from a template); "": none */
	char pod_claim[64];
	struct hpn_dra_result v[HPN_DRA_MAX_RESULTS]; /* our driver's results, in the API's order */
	size_t n;
	/* status.reservedFor[] entries of resource "pods" in the core group: their uid, in order */
	char pods[HPN_DRA_MAX_PODS][HPN_POD_UID_MAX + 1];
	size_t n_pods;
};

/* A result's request: a DNS label, or "<request>/<subrequest>" (firstAvailable). */
bool hpn_dra_request_ok(const char *s);
/* A pool's name: at most 253 bytes of DNS subdomains separated by '/'. */
bool hpn_dra_pool_ok(const char *s);
/*
 * A shareID as the API stores it (its normalized form): 36 bytes, 8-4-4-4-12
 * lower-case hex digits separated by '-'.
 */
bool hpn_dra_share_id_ok(const char *s);

/*
 * Parses json[0..len) (the body of GET
 * /apis/resource.k8s.io/v1/namespaces/NS/resourceclaims/NAME) into *ret,
 * keeping the results whose driver is exactly driver (a DNS subdomain of at
 * most 63 bytes, upper case allowed as the API allows it; else code
 * HPN_E_INVALID_CONFIG: the caller's own name is wrong).
 * ns, name and uid are the claim the kubelet asked for (none NULL).
 * Strict: at most HPN_DRA_BODY_MAX bytes of one JSON object, kind
 * ResourceClaim, a known apiVersion, metadata's namespace, name and uid
 * well-formed; status.allocation present; every result an object of request,
 * driver, pool and device strings of the API's syntax, shareID (optional)
 * a normalized UUID, consumedCapacity (optional) an object of quantities
 * (strings; not kept); at least one and at most HPN_DRA_MAX_RESULTS results
 * of driver, no (pool, device, shareID) twice; of driver's, a shared device
 * ("<NIC device>-shared", hpn_dra_share_of) with a shareID and a NIC's own
 * device without one;
 * status.reservedFor entries objects of strings (apiGroup optional) with a
 * UID, at most HPN_DRA_MAX_PODS distinct pods. Unknown fields are ignored.
 * Every error is code HPN_E_KUBE (the API answered something we cannot
 * use) with a message "ResourceClaim NS/NAME: ..." naming the field, e.g.
 * status.allocation.devices.results[2].device; except a namespace, name or
 * uid other than the ones asked for: code HPN_E_UNKNOWN_CONTAINER and
 * -ESTALE (the claim asked for is gone, or was recreated under its name).
 * *ret is written only on success.
 */
int hpn_dra_claim_parse(const char *json, size_t len, const char *ns, const char *name,
			const char *uid, const char *driver, struct hpn_dra_claim *ret,
			struct hpn_err *err);

#endif
