/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_ALLOC_H
#define HPN_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "store.h"
#include "types.h"

/*
 * The kubelet's allocation of pool NICs (hpn-rdma-agent's device plugin) and
 * the CNI's question about it. One definition for both programs:
 *  - the device ID of a pool NIC (what ListAndWatch lists, Allocate and
 *    PodResources name): its PCI address, else its netdev name;
 *  - the lookup protocol on the agent's unix socket (doc/agent.md): the CNI
 *    connects, writes one JSON request line, reads one JSON reply to EOF;
 *  - the CNI's client of it, with a bounded timeout.
 */

#define HPN_ALLOC_ID_MAX	64   /* device IDs: at most 63 bytes (device plugin API) */
#define HPN_ALLOC_MAX_DEVICES	64   /* IDs in one reply */
#define HPN_ALLOC_REQ_MAX	4096 /* request bytes, newline included */
#define HPN_ALLOC_REPLY_MAX	65536u
#define HPN_ALLOC_RESOURCE_MAX	254 /* "<domain>/<name>" */
#define HPN_ALLOC_PROTO_VERSION 1
#define HPN_ALLOC_MAX_CLAIMS	8   /* DRA claims named in one reply */
#define HPN_ALLOC_CLAIM_MAX	320 /* "<namespace>/<name>" */
#define HPN_ALLOC_SOURCE_MAX	16
#define HPN_ALLOC_KEY_MAX	318 /* a label or annotation key: "<prefix>/<name>", 253 + 1 + 63 */
#define HPN_ALLOC_KEYS_MAX	2   /* labels, and annotations, in one pod question */

/* The device ID of host netdev ifname: its PCI address under sysfs_root, else the name. */
void hpn_alloc_nic_id(const char *sysfs_root, const char *ifname, char id[HPN_ALLOC_ID_MAX]);
/* The same ID from a journal's NIC (what it was on the host before ADD). */
void hpn_alloc_journal_id(const struct hpn_journal_nic *n, char id[HPN_ALLOC_ID_MAX]);
/* A device ID the protocol accepts: 1-63 bytes of [A-Za-z0-9_.:@-]. */
bool hpn_alloc_id_valid(const char *id);

/* "query": what a request asks. */
enum hpn_alloc_query {
	HPN_ALLOC_QUERY_DEVICES, /* absent: the pod's devices (struct hpn_alloc) */
	HPN_ALLOC_QUERY_POD,	 /* "pod": the pod (lib/podask.h) */
	HPN_ALLOC_QUERY_NRI,	 /* "nri": the agent's NRI link (struct hpn_nri_state) */
	/* "attached": the pod's ADD completed (its DRA claims' device metadata get networkData) */
	HPN_ALLOC_QUERY_ATTACHED,
};

/*
 * Which pod asks: CNI_ARGS K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID (may
 * be empty). The NRI question is the node's: its pod is optional, for the
 * agent's log (namespace and name both empty: none).
 */
/*
 * The pod question's "keys": what of the pod the asker's config reads (the
 * labels podSelector.label and nccl.gpuModelLabel, the annotation
 * nccl.gpuModelAnnotation, the resource kubernetes.gpuResource), so an agent
 * whose cache keeps other keys answers "unknown" rather than a pod without
 * them. !set: not said (a plugin older than the field): the cache's pod.
 */
struct hpn_alloc_keys {
	bool set;
	char labels[HPN_ALLOC_KEYS_MAX][HPN_ALLOC_KEY_MAX];
	size_t n_labels;
	char annotations[HPN_ALLOC_KEYS_MAX][HPN_ALLOC_KEY_MAX];
	size_t n_annotations;
	char resource[HPN_ALLOC_KEY_MAX]; /* "": none; a qualified name, as a key */
};

struct hpn_alloc_req {
	char namespace[64];
	char name[254];
	char uid[65];
	enum hpn_alloc_query query;
	struct hpn_alloc_keys keys; /* the pod question's; sent only with it */
	/*
	 * The devices question's "shares": the asker attaches a share of a NIC
	 * (a DRA claim's device with allowMultipleAllocations) as a child of it;
	 * false: a plugin older than the field, which would move the NIC.
	 */
	bool shares;
};

/* What the agent answers: the pod's devices of the resource, in PodResources' order. */
struct hpn_alloc {
	char resource[HPN_ALLOC_RESOURCE_MAX];
	char ids[HPN_ALLOC_MAX_DEVICES][HPN_ALLOC_ID_MAX];
	size_t n;
	bool pod_known; /* the kubelet lists the pod at all */
	/* The pod's GPUs (the agent's --gpu-resource IDs and --gpu-driver DRA devices), in order. */
	char gpus[HPN_MAX_GPUS][HPN_GPU_ID_MAX];
	size_t n_gpus;
	/*
	 * What decided the devices: "dra" (the pod's prepared DRA claims, named
	 * ns/name in claims), else empty (the kubelet's device plugin
	 * allocation; an agent older than the field sends none).
	 */
	char source[HPN_ALLOC_SOURCE_MAX];
	char claims[HPN_ALLOC_MAX_CLAIMS][HPN_ALLOC_CLAIM_MAX];
	size_t n_claims;
	/* ids[i] is a share of its NIC (a child of it in the pod), not the NIC ("shared"). */
	bool shared[HPN_ALLOC_MAX_DEVICES];
};

/* Fills req from the three values (NULL: absent); code 4 naming the bad one. */
int hpn_alloc_req_set(struct hpn_alloc_req *req, const char *ns, const char *name, const char *uid,
		      struct hpn_err *err);
/* The request line ("{...}\n"), malloc'd. */
char *hpn_alloc_req_render(const struct hpn_alloc_req *req);
/* Parses and validates one request (the agent's side); code 6 or 7 on bad input. */
int hpn_alloc_req_parse(const char *buf, size_t len, struct hpn_alloc_req *req,
			struct hpn_err *err);
/* The reply: the allocation, or error (not NULL) as the agent's refusal. malloc'd. */
char *hpn_alloc_reply_render(const struct hpn_alloc *a, const char *error);
/*
 * Parses a reply (the CNI's side). An "error" reply is code 11 with the
 * agent's words; malformed replies are code 6.
 */
int hpn_alloc_reply_parse(const char *buf, size_t len, struct hpn_alloc *ret, struct hpn_err *err);

/*
 * The NRI question's answer ("query": "nri"): is the agent registered with
 * the runtime's NRI now, so that the containers ADD's pod is about to get are
 * given their RDMA devices at CreateContainer (doc/agent.md, "The NRI
 * question")? Strings are printable ASCII, "" when not said.
 */
#define HPN_NRI_NAME_MAX   64  /* runtime and runtimeVersion, NUL included */
#define HPN_NRI_SOCKET_MAX 108 /* sun_path */
#define HPN_NRI_WHY_MAX	   256
#define HPN_NRI_REPLY_MAX  4096u
struct hpn_nri_state {
	bool registered;
	char runtime[HPN_NRI_NAME_MAX];	 /* the runtime's name ("containerd"), as it told */
	char version[HPN_NRI_NAME_MAX];	 /* and its version ("v2.1.9") */
	char socket[HPN_NRI_SOCKET_MAX]; /* the runtime's NRI socket the agent dials */
	char why[HPN_NRI_WHY_MAX];	 /* not registered: why, in the agent's words */
};

/* The NRI reply, or error (not NULL) as the agent's refusal. malloc'd. */
char *hpn_nri_reply_render(const struct hpn_nri_state *s, const char *error);
/*
 * Parses an NRI reply (the CNI's side): 0 with *ret; an "error" reply (an
 * agent that does not know the question) code 11, -EAGAIN; a malformed one
 * code 6. *ret written only on success.
 */
int hpn_nri_reply_parse(const char *buf, size_t len, struct hpn_nri_state *ret,
			struct hpn_err *err);

/*
 * The protocol's transport, for every question: connects to socket_path,
 * checks that the listener runs as root (SO_PEERCRED; or as our own uid),
 * writes line, reads the reply to EOF, at most max bytes, all within
 * timeout_ms. 0 with *ret (malloc'd, NUL-terminated) and *ret_len;
 * -ENOENT or -ECONNREFUSED (err set, code 11) when no agent listens there;
 * -EPERM (code 11, naming the socket and the uid) when a listener of
 * another uid does, which is sent nothing; -ETIMEDOUT (code 11); -EMSGSIZE
 * (code 6) over max; other -errno.
 */
int hpn_agent_ask(const char *socket_path, int timeout_ms, const char *line, size_t max, char **ret,
		  size_t *ret_len, struct hpn_err *err);

/*
 * Asks the agent at socket_path which devices the pod holds, within
 * timeout_ms for all of connect, write and read. 0 with *ret filled;
 * -ENOENT or -ECONNREFUSED (err set, code 11) when no agent listens there;
 * -EPERM (code 11) when what listens there is not root (hpn_agent_ask);
 * -ETIMEDOUT (code 11); other -errno.
 */
int hpn_alloc_lookup(const char *socket_path, int timeout_ms, const struct hpn_alloc_req *req,
		     struct hpn_alloc *ret, struct hpn_err *err);

/*
 * Tells the agent at socket_path that ADD of req's pod completed, within
 * timeout_ms, and waits for its answer: the agent writes the networkData of
 * the pod's DRA claims' device metadata before it answers. 0; the errors of
 * hpn_agent_ask; an "error" reply code 11, -EAGAIN (an agent older than the
 * question refuses it).
 */
int hpn_attached_tell(const char *socket_path, int timeout_ms, const struct hpn_alloc_req *req,
		      struct hpn_err *err);

/*
 * Asks the agent at socket_path about its NRI link, within timeout_ms; req
 * (NULL: none) names the pod ADD is for, its query ignored. 0 with *ret
 * (registered or not); the errors of hpn_agent_ask (no agent: -ENOENT or
 * -ECONNREFUSED; not root: -EPERM; -ETIMEDOUT) and hpn_nri_reply_parse.
 */
int hpn_nri_ask(const char *socket_path, int timeout_ms, const struct hpn_alloc_req *req,
		struct hpn_nri_state *ret, struct hpn_err *err);

#endif
