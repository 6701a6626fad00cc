/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_DRAMETA_H
#define HPN_DRAMETA_H

#include <stdbool.h>
#include <stddef.h>

/*
 * A claim's device metadata as a DRA driver hands it to the containers
 * (KEP-5304, doc/dra.md "Device metadata in the container"): for each
 * request of a prepared claim, one file of DeviceMetadata objects, the same
 * object once per API version, newest first (metadata.resource.k8s.io/v1beta1,
 * then v1alpha1), one JSON object a line. A consumer takes the first it can
 * decode. Pure: nothing here touches a file.
 */

#define HPN_DRAMETA_GROUP	   "metadata.resource.k8s.io"
#define HPN_DRAMETA_CONTAINER_DIR  "/var/run/kubernetes.io/dra-device-attributes"
#define HPN_DRAMETA_MAX_IPS	   16  /* NetworkDeviceData.ips, at most */
#define HPN_DRAMETA_IFNAME_MAX	   256 /* NetworkDeviceData.interfaceName, at most */
#define HPN_DRAMETA_HWADDR_MAX	   128 /* NetworkDeviceData.hardwareAddress, at most */
#define HPN_DRAMETA_POD_CLAIM_ANNO "resource.kubernetes.io/pod-claim-name"

struct cJSON;

/* networkData of one device (resource.k8s.io/v1 NetworkDeviceData). */
struct hpn_drameta_net {
	char ifname[HPN_DRAMETA_IFNAME_MAX + 1];
	char ips[HPN_DRAMETA_MAX_IPS][64]; /* CIDR: "10.0.0.2/24" */
	size_t n_ips;
	char mac[HPN_DRAMETA_HWADDR_MAX + 1];
};

/* One device of the request. */
struct hpn_drameta_dev {
	const char *pool, *device;
	const struct cJSON *attrs;	   /* as a ResourceSlice has them (NULL: none) */
	const struct hpn_drameta_net *net; /* NULL: no networkData */
};

/* The file of one request of a claim. */
struct hpn_drameta {
	const char *ns, *name, *uid, *driver;
	const char *pod_claim; /* the claim's pod-claim-name annotation; NULL or "": none */
	const char *request;   /* "<request>" or "<request>/<subrequest>" */
	long generation;
	const struct hpn_drameta_dev *devs;
	size_t n;
};

/* The file's text (malloc'd; NULL: no memory). */
char *hpn_drameta_render(const struct hpn_drameta *m);

/*
 * The file text[0..len) with each device's networkData set from net[i] of
 * (pool[i], device[i]) (a NULL net removes it), i < n, the file's devices of
 * one (pool, device) (shares of one NIC: the v1beta1 Device has no shareID)
 * taking those i in order, and, when anything
 * changed, metadata.generation raised by one: the new text (malloc'd) and
 * *changed. The first object of the stream is the one read. -EINVAL: not a
 * file hpn_drameta_render wrote; -ENOMEM.
 */
int hpn_drameta_set_net(const char *text, size_t len, const char *const *pool,
			const char *const *device, const struct hpn_drameta_net *const *net,
			size_t n, char **ret, bool *changed);

/*
 * The path in the container: <dir>/resourceclaims/<claim>/<request>/<driver>-metadata.json,
 * or resourceclaimtemplates/<pod claim>/... for a claim made from a template
 * (pod_claim set); the request without its "/<subrequest>". -ENAMETOOLONG.
 */
int hpn_drameta_container_path(const char *claim, const char *pod_claim, const char *request,
			       const char *driver, char *out, size_t len);

/* request without "/<subrequest>" into out (len at least 64). */
void hpn_drameta_base_request(const char *request, char *out, size_t len);

#endif
