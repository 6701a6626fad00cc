/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_STORE_H
#define HPN_STORE_H

#include <stdbool.h>

#include "cdi.h"
#include "err.h"
#include "types.h"

/*
 * The default stateDir, on tmpfs: a journal lives as long as the boot whose
 * NICs and netns it describes. Earlier versions kept it on disk, in
 * HPN_OLD_STATE_DIR.
 */
#define HPN_DEFAULT_STATE_DIR "/run/hpn-rdma/state"
#define HPN_OLD_STATE_DIR     "/var/lib/cni/hpn-rdma"

/*
 * The on-disk state: <stateDir>/lock serialises plugin runs that change the
 * node, and <stateDir>/<network>/<key> holds one attachment's journal, written
 * atomically (temp file, rename) before every step that changes the host, with
 * the boot it was written in.
 */
struct hpn_store {
	int root_fd; /* stateDir */
	int net_fd;  /* stateDir/<network> */
	int lock_fd;
};

#define HPN_STORE_INIT                                                                             \
	{                                                                                          \
		.root_fd = -1, .net_fd = -1, .lock_fd = -1                                         \
	}
#define HPN_KEY_MAX 256

/* How far ADD got. Recorded before each step, so DEL knows what may need undoing. */
enum hpn_phase {
	HPN_PHASE_SELECTED = 1, /* device chosen, nothing changed yet */
	HPN_PHASE_MOVING,	/* host device may be changed / moved */
	HPN_PHASE_IPAM,		/* IPAM ADD may have allocated */
	HPN_PHASE_ATTACHED,	/* ADD completed */
};

#define HPN_JOURNAL_NODES_MAX 2 /* device nodes per NIC: an rxe has uverbsN and umadN */

/*
 * Who chose an attachment's NICs: ADD from the pool (a pod selected by its
 * label or annotation that holds no allocation: NICs no scheduler saw), the
 * kubelet (the device plugin's allocation), a DRA claim, or the conflist
 * (device, rdmaDevice). Unknown in journals of binaries before the field.
 */
enum hpn_nic_source {
	HPN_NIC_SRC_UNKNOWN,
	HPN_NIC_SRC_POOL,
	HPN_NIC_SRC_KUBELET,
	HPN_NIC_SRC_DRA,
	HPN_NIC_SRC_CONFIG,
};

/* What ADD did to one NIC of an attachment. */
enum hpn_nic_kind {
	HPN_NIC_MOVED, /* the host netdev itself moved into the pod */
	HPN_NIC_CHILD, /* a macvlan/ipvlan child of it created in the pod */
};

struct hpn_journal_nic {
	enum hpn_nic_kind kind;
	char pod_ifname[HPN_IFNAMSIZ]; /* the name in the pod */
	/* moved: the device as it was on the host before ADD; child: its parent */
	struct hpn_link host;
	char pci[HPN_PCI_STR]; /* empty when not a PCI device */
	int pod_ifindex;       /* 0 until known */
	/*
	 * The pod's GPU this NIC serves (doc/gpu.md), chosen at the claim:
	 * gpu_id empty when the pod has none known; gpu_dist the pair's class,
	 * gpu_best the nearest class a NIC left free had ("PIX" ... "unknown").
	 */
	char gpu_id[HPN_GPU_ID_MAX];
	char gpu_pci[HPN_PCI_STR];
	char gpu_dist[HPN_DIST_STR], gpu_best[HPN_DIST_STR];
	/* child: "macvlan" or "ipvlan", and the MAC chosen for a macvlan before it exists */
	char child_kind[16];
	uint8_t child_mac[HPN_MAC_LEN];
	bool has_child_mac;
	/* The RDMA device ADD bound, what restoring it needs. */
	struct hpn_journal_rdma {
		char name[HPN_IBDEV_MAX];  /* empty: none */
		char netdev[HPN_IFNAMSIZ]; /* the host netdev it serves; created: the pod's */
		char soft_type[8];	   /* "rxe": recreate over netdev if the kernel drops it */
		bool moved;		   /* exclusive mode: (being) moved into the pod netns */
		/*
		 * softRoce: made by ADD over the pod-side interface (type rxe),
		 * journalled before it is made; undone by deleting it, in the
		 * pod and then in the host netns, before the NIC leaves the pod.
		 */
		bool created;
		/*
		 * Its character devices (uverbsN, umadN) that ADD made for the pod's
		 * containers in <devices dir>/<NIC ID>, the directory the agent's
		 * Allocate named (doc/agent.md); journalled before they are made,
		 * undone by removing each that still has these numbers.
		 */
		struct hpn_journal_node {
			char name[16];
			unsigned int major, minor;
		} nodes[HPN_JOURNAL_NODES_MAX];
		size_t n_nodes;
		/*
		 * The CDI spec ADD writes for the created device (cdi.h, the
		 * file name of HPN_CDI_POD's rule, in the journal's cdi_dir);
		 * journalled before it is written, undone by removing it if it
		 * is still ours. Empty: none (and in journals before it).
		 */
		char cdi_spec[HPN_CDI_FILE_MAX];
	} rdma;
	/*
	 * A rail (an attachment of several NICs): the NIC's own routing table
	 * and the priority of its "from <address>" rules, journalled before
	 * they are made; 0: none. DEL deletes the rules (the table's routes go
	 * with the NIC).
	 */
	unsigned int rail_table;
	unsigned int rail_priority;
	/*
	 * A moved NIC: the name of its link <hints_dir>/nic/<hints_link> ->
	 * ../<hints_key> (nccl.h), which the agent's CDI spec of the NIC mounts
	 * the hints through; its device ID. Journalled with the claim, before
	 * it is made; undone by removing it if it still leads to hints_key.
	 * Empty: none (and in older journals).
	 */
	char hints_link[HPN_NIC_ID_MAX];
};

/*
 * One attachment (container ID + CNI_IFNAME). Version 2 lists its NICs; a
 * version 1 journal (one moved NIC, its fields at the top level) reads as a
 * list of one.
 */
struct hpn_journal {
	enum hpn_phase phase;
	char *container_id;
	char cni_ifname[HPN_IFNAMSIZ]; /* CNI_IFNAME: with the container ID, the attachment key */
	char *netns;
	/* The ADD that writes it, while in flight: pid and its start time (0: none). */
	int owner_pid;
	unsigned long long owner_start;
	size_t n_nics; /* nics[0..n_nics), the rest of nics undefined (see below) */
	enum hpn_nic_source nic_source; /* who chose them ("nicSource") */
	/* The NCCL hints file <hints_dir>/<hints_key>/nccl.conf, journalled before it is written. */
	char *hints_dir;
	char hints_key[HPN_NCCL_KEY_MAX]; /* empty: none */
	char *devices_dir;		  /* agent.deviceDir, when a NIC has nodes there */
	char *cdi_dir;			  /* agent.cdiDir, when a NIC has a CDI spec there */
	char *result;			  /* JSON of this attachment's own result, once attached */
	/*
	 * The Kubernetes pod, from CNI_ARGS (K8S_POD_NAMESPACE, K8S_POD_NAME,
	 * K8S_POD_UID) when the runtime passed them: what the agent's metrics
	 * and logs name an attachment by. Optional: empty in journals of
	 * binaries before these fields, and for values that are not a DNS
	 * label, a DNS subdomain and hex-and-dashes (hpn_journal_set_pod).
	 */
	struct hpn_journal_pod {
		char namespace[64];
		char name[254];
		char uid[65];
	} pod;
	/* Read only, never written: a DEL or GC is undoing it now (see hpn_journal_hold). */
	bool releasing;
	/*
	 * Read only: written in an earlier boot (its bootId is not this boot's,
	 * or it has none and its mtime predates this boot). The reboot returned
	 * every NIC and ended every netns: only its IPAM leases and files remain.
	 */
	bool stale;
	/*
	 * Last: hpn_journal_init zeroes what comes before it, and an entry is
	 * zeroed as it is added, so a one-NIC pod touches 1 KB of these 21, not
	 * every page (each a page fault, at every ADD and DEL).
	 */
	struct hpn_journal_nic nics[HPN_MAX_NICS];
};

/*
 * A far NIC: the claim journalled its GPU, and a NIC left free was nearer to
 * that GPU (gpu_best nearer than gpu_dist). Said (the result, the agent's
 * metrics and health loop), never a fault: NCCL's traffic only crosses more
 * of the PCI tree than it had to.
 */
bool hpn_journal_nic_far(const struct hpn_journal_nic *n);

/* An empty journal: every field but nics zeroed. */
void hpn_journal_init(struct hpn_journal *j);
/* Frees what j owns and leaves it empty (hpn_journal_init). */
void hpn_journal_free(struct hpn_journal *j);
/*
 * Sets j->pod from the three values (NULL: absent); each one that is not of
 * Kubernetes' syntax for it is left empty, so a journal never holds what a
 * label or a log line could not carry. Never fails: the pod is not needed
 * to undo anything.
 */
void hpn_journal_set_pod(struct hpn_journal *j, const char *ns, const char *name, const char *uid);

/*
 * Creates stateDir (0700) and stateDir/<network> as needed and opens them.
 * With the default stateDir it first adopts what older binaries kept in
 * HPN_OLD_STATE_DIR (hpn_store_adopt).
 */
int hpn_store_open(const char *state_dir, const char *network, struct hpn_store *st,
		   struct hpn_err *err);
/*
 * hpn_store_open without the adoption, so without waiting for any lock: for
 * the agent, which adopts once at its start (hpn_store_adopt_old) and whose
 * event loop must never wait for a lock an older binary's run holds.
 */
int hpn_store_open_here(const char *state_dir, const char *network, struct hpn_store *st,
			struct hpn_err *err);
void hpn_store_close(struct hpn_store *st);
/*
 * Moves every network's journals from old_dir (an earlier default stateDir)
 * into state_dir (created if need be), each with its mtime, under both locks (the
 * old one first, so a run of an older binary in flight ends first), drops
 * the rest (temp files, the event log) and removes old_dir. 0 when there is
 * no old_dir; code 11 when a lock stays held for timeout_ms, nothing moved.
 */
int hpn_store_adopt(const char *old_dir, const char *state_dir, int timeout_ms,
		    struct hpn_err *err);
#define HPN_ADOPT_LOCK_MS 10000
/* hpn_store_adopt of HPN_OLD_STATE_DIR (HPN_ADOPT_LOCK_MS) if state_dir is the default; else 0. */
int hpn_store_adopt_old(const char *state_dir, struct hpn_err *err);
/* Exclusive lock on stateDir/lock; -EAGAIN with code 11 after timeout_ms. */
int hpn_store_lock(struct hpn_store *st, int timeout_ms, struct hpn_err *err);
/* Drops the lock (ADD, once its claim is journalled); idempotent. */
void hpn_store_unlock(struct hpn_store *st);

/*
 * The journal keys of the network (not temp files): a NULL-terminated array
 * of strings, one allocation each; free with hpn_strv_free.
 */
int hpn_store_keys(struct hpn_store *st, char ***ret, struct hpn_err *err);
void hpn_strv_free(char **v);

/* The file name for an attachment: "<containerid>.<ifname>" (hashed when long). */
int hpn_store_key(const char *container_id, const char *ifname, char key[HPN_KEY_MAX]);
int hpn_journal_write(struct hpn_store *st, const char *key, const struct hpn_journal *j,
		      struct hpn_err *err);
/*
 * -ENOENT when there is no journal for key; -ESTALE (err set) when it cannot
 * be parsed and its mtime predates this boot: a write a power loss cut short,
 * which nothing can undo and nothing needs to (remove it). j is empty
 * (hpn_journal_init: nothing to free) on any error.
 */
int hpn_journal_read(struct hpn_store *st, const char *key, struct hpn_journal *j,
		     struct hpn_err *err);
int hpn_journal_remove(struct hpn_store *st, const char *key, struct hpn_err *err);
/*
 * Marks the journal of key as being undone by this process, for as long as
 * *fd stays open (an open-file-description lock: a crash drops it): every
 * hpn_journal_read meanwhile says "releasing". Call it with the store locked,
 * so that two runs cannot both take it; -EBUSY when another run holds it.
 */
int hpn_journal_hold(struct hpn_store *st, const char *key, int *fd, struct hpn_err *err);
/*
 * Another run is working on the attachment: an ADD that has not finished and
 * whose process is alive (not this one), or a DEL or GC undoing it.
 */
bool hpn_journal_busy(const struct hpn_journal *j);
/*
 * Whether stateDir/<network>/<key> may exist, without creating, opening or
 * locking the store: false only when it certainly does not (ENOENT).
 */
bool hpn_journal_may_exist(const char *state_dir, const char *network, const char *key);

#endif
