/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_CDI_H
#define HPN_CDI_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "types.h"

/*
 * CDI (Container Device Interface) specs of one NIC each, the files
 * containerd (1.7 with enable_cdi, 2.x) and CRI-O read from /etc/cdi and
 * /var/run/cdi at CreateContainer to resolve the names a device plugin's
 * Allocate gives (CRI ContainerConfig.CDI_devices): kind HPN_CDI_KIND, one
 * device named by the NIC's allocation ID, its RDMA character devices as
 * deviceNodes. Written by the agent for NICs whose RDMA device the host
 * has, and by ADD for a device it made (softRoce); doc/agent.md#cdi.
 *
 * The rule of file names, which tells the two writers apart and tells both
 * a file of ours from anything else in the directory:
 *   <dir>/alibabacloud.com-hpn-rdma_<ID>.json      the agent's (HPN_CDI_AGENT)
 *   <dir>/alibabacloud.com-hpn-rdma-pod_<ID>.json  an ADD's (HPN_CDI_POD)
 * (neither prefix is a prefix of the other). A file is ours when it is a
 * regular file at such a name holding a spec of HPN_CDI_KIND whose one
 * device is <ID>; anything else there (a symlink, a FIFO, another kind, not
 * JSON) is another writer's, refused and left untouched.
 */

#define HPN_CDI_KIND	    "alibabacloud.com/hpn-rdma"
#define HPN_CDI_VERSION	    "0.5.0" /* hostPath of deviceNodes came in 0.5.0 */
#define HPN_DEFAULT_CDI_DIR "/var/run/cdi"
#define HPN_CDI_ID_MAX	    64 /* an allocation ID: at most 63 bytes */
#define HPN_CDI_NAME_MAX    (sizeof(HPN_CDI_KIND) + HPN_CDI_ID_MAX) /* "<kind>=<ID>" */
#define HPN_CDI_FILE_MAX    128
#define HPN_CDI_NODES_MAX   32	 /* a DRA claim's device: 8 NICs of 3 nodes each, and rdma_cm */
#define HPN_CDI_DIR_MAX	    200	 /* agent.cdiDir, --cdi-dir: at most this many bytes */
#define HPN_CDI_PATH_MAX    1024 /* a mount's hostPath and containerPath */
/* A DRA claim's shareIDs, comma-separated: 32 devices of 36 bytes, their commas, the NUL. */
#define HPN_CDI_SHARE_IDS_MAX (32 * 37)

/*
 * The agent's spec of a DRA claim names its one device "claim-<claim UID>":
 * longer than any netdev name and no PCI address, so never a NIC's ID.
 */
#define HPN_CDI_CLAIM_PREFIX "claim-"

enum hpn_cdi_owner {
	HPN_CDI_AGENT, /* the agent's: a NIC whose RDMA device the host has */
	HPN_CDI_POD,   /* an ADD's: the device it made for the pod (softRoce) */
};

/* One character device: /dev/infiniband/<name> in the container. */
struct hpn_cdi_node {
	char name[32];	     /* uverbsN, umadN, issmN, rdma_cm */
	char host_path[256]; /* where the node is on the host */
	unsigned int major, minor;
};

/* One NIC's device: uverbsN first (what libibverbs opens), then the others. */
struct hpn_cdi_dev {
	char id[HPN_CDI_ID_MAX];   /* the device name: the NIC's allocation ID */
	char ibdev[HPN_IBDEV_MAX]; /* its RDMA device, for the env; may be empty */
	/*
	 * A DRA claim's devices' shareIDs in device order, comma-separated, ""
	 * for a whole NIC (HPN_RDMA_SHARE_IDS_<S>); empty: no such env.
	 */
	char share_ids[HPN_CDI_SHARE_IDS_MAX];
	struct hpn_cdi_node nodes[HPN_CDI_NODES_MAX];
	size_t n_nodes;
	/*
	 * The pod's NCCL hints (nccl.h) as containerEdits.mounts: host_path
	 * bind-mounted read-only (nosuid, nodev, noexec) at container_path;
	 * host_path empty: no mount. The runtime resolves host_path (and any
	 * symlink in it) when it creates the container, so it need not exist
	 * when the spec is written.
	 */
	struct hpn_cdi_mount {
		char host_path[HPN_CDI_PATH_MAX];
		char container_path[HPN_CDI_PATH_MAX];
	} hints;
	/*
	 * More read-only bind mounts of the same options after the hints one
	 * (a DRA claim's device metadata files, agent/dra/draclaims.c):
	 * borrowed, n_mounts of them, each path absolute; NULL: none.
	 */
	const struct hpn_cdi_mount *mounts;
	size_t n_mounts;
	/*
	 * The createRuntime hook the spec names, `<path> cdi-hook --state-dir
	 * <state_dir> --network <network> <id>` (lib/cdihook.h): the runtime gives
	 * the device only to a container of the pod that holds the NIC (of a
	 * claim's device: every NIC of the claim, held by a pod it was prepared
	 * for). path empty: no hook, which only a test renders: the agent and
	 * ADD write no spec without one (doc/agent.md#cdi).
	 */
	struct hpn_cdi_hook {
		char path[256];
		char state_dir[256];
		char network[128];
	} hook;
};

/*
 * Can id name a CDI device and a file: 1-63 bytes, first and last a letter
 * or digit, between them also '_', '.', ':', '-' (CDI's device names, which
 * PCI addresses and most netdev names are).
 */
bool hpn_cdi_id_valid(const char *id);
/* Does id name a DRA claim's device ("claim-<uid>", HPN_CDI_CLAIM_PREFIX)? */
bool hpn_cdi_is_claim(const char *id);
/* The fully qualified name "alibabacloud.com/hpn-rdma=<id>" (id valid). */
void hpn_cdi_name(const char *id, char out[HPN_CDI_NAME_MAX]);
/* The file name of o's spec for id: -EINVAL when id is not valid. */
int hpn_cdi_file(enum hpn_cdi_owner o, const char *id, char out[HPN_CDI_FILE_MAX]);
/* The owner and ID a file name says, if it is one of the rule's: -EINVAL when not. */
int hpn_cdi_parse_file(const char *file, enum hpn_cdi_owner *o, char id[HPN_CDI_ID_MAX]);
/*
 * d's hints mount: host_path at container_path, both absolute; -EINVAL (a
 * relative path), -ENAMETOOLONG; d->hints untouched then.
 */
int hpn_cdi_set_hints(struct hpn_cdi_dev *d, const char *host_path, const char *container_path);
/*
 * The spec's text for d (the env names it: HPN_RDMA_DEVICE_<S>=<ibdev>,
 * HPN_RDMA_SHARE_IDS_<S>=<share_ids> when set, and
 * HPN_RDMA_UVERBS_<S>=/dev/infiniband/uverbsN, <S> the ID upper-cased with
 * every other byte '_', per device so that a container of several NICs keeps
 * each); NULL without memory.
 */
char *hpn_cdi_render(const struct hpn_cdi_dev *d);

/*
 * Makes <dir>/<o's file for d->id> hold d's spec, durably: the directory
 * opened without following a symlink, a temp file beside it (no .json
 * ending: the runtime never loads it) written, fsync()ed and renamed over
 * the name, the directory fsync()ed. 0 when the file held exactly that
 * already (nothing written), 1 when written. A name that holds anything
 * but a spec of ours is refused, left as it is: code 5, -EEXIST, the
 * message naming the path and what is there. No directory: -ENOENT (err
 * set). On error no temp file is left.
 */
int hpn_cdi_write(const char *dir, enum hpn_cdi_owner o, const struct hpn_cdi_dev *d,
		  struct hpn_err *err);
/*
 * Removes <dir>/<file> (a name of the rule) when it is a spec of ours, and
 * fsync()s the directory: 0 when removed or not there (nor the directory),
 * 1 when something else is there, left alone (err says what), -errno.
 */
int hpn_cdi_remove(const char *dir, const char *file, struct hpn_err *err);
/* Is there a spec of ours for o and id in dir? */
bool hpn_cdi_present(const char *dir, enum hpn_cdi_owner o, const char *id);
/*
 * Calls fn for the ID of each of o's file names in dir (whatever the file
 * holds), in directory order: 0, -ENOENT (err untouched) when there is no
 * directory, or -errno.
 */
int hpn_cdi_each(const char *dir, enum hpn_cdi_owner o, void (*fn)(const char *id, void *ud),
		 void *ud, struct hpn_err *err);

#endif
