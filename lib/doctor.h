/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_DOCTOR_H
#define HPN_DOCTOR_H

#include <stdbool.h>
#include <stddef.h>

#include "conf.h"
#include "err.h"
#include "qos.h"
#include "store.h"
#include "types.h"

/*
 * The node doctor (`hpn-rdma doctor`), whose readiness checks are STATUS's
 * (status.h). Facts are gathered into plain structs (the RDMA NICs through rdmasys.c's discovery, the netns mode,
 * kernel modules, which pod holds which NIC per the state store), checked, and
 * rendered as text or JSON for the command layer to print.
 *
 * Where facts come from: with sysfsRoot "/sys" the netns mode is RDMA netlink's
 * (RDMA_NLDEV_CMD_SYS_GET, as "rdma system"); with any other root (a fake tree in
 * tests) everything comes from the tree: the mode from
 * <root>/module/ib_core/parameters/netns_mode (Y: shared, N: exclusive), and a
 * tree without <root>/module/ib_core has no RDMA subsystem. Modules are the
 * entries of <root>/module/ (loaded modules, and built-in ones with parameters).
 * RoCE QoS (qos.h) of every row's host netdev and of a `device` the config
 * selects: DCB over rtnetlink on the real root only (a fake tree's netdevs
 * are not the kernel's), ECN from the tree on either. Whether the node has
 * GPUs (for the eRDMA MTU check): entries of <gpus.procRoot>/driver/nvidia/gpus.
 */

enum hpn_check_state { HPN_CHECK_OK, HPN_CHECK_SKIP, HPN_CHECK_WARN, HPN_CHECK_FAIL };

#define HPN_DOCTOR_MAX_NICS   128
#define HPN_DOCTOR_MAX_CHECKS 17
#define HPN_DOCTOR_MAX_MODS   16
#define HPN_DOCTOR_MAX_QOS    (HPN_DOCTOR_MAX_NICS + 1)

/* One RDMA NIC port (or a NIC a pod holds), as the doctor's table shows it. */
struct hpn_doctor_nic {
	char netdev[HPN_IFNAMSIZ]; /* in the host netns; empty when none is */
	/*
	 * The RDMA device's own PCI function, where NCCL places the NIC (an
	 * eRDMA function is not its ENI's), else the netdev's.
	 */
	char pci[HPN_PCI_STR];
	char netdev_pci[HPN_PCI_STR]; /* the netdev's PCI function (what pciBusID selects) */
	char driver[32];
	char rdma[HPN_IBDEV_MAX]; /* empty: a held NIC with no RDMA device */
	unsigned int port;
	char state[16];	     /* port state: ACTIVE, DOWN, INIT... */
	char link_layer[16]; /* Ethernet, InfiniBand */
	int mtu;	     /* -1: unknown (not in the host netns) */
	int numa;	     /* -1: none or unknown; pci's */
	/* What the RDMA device is, by its driver and what the driver registered. */
	char kind[8];	    /* "mlx5", "erdma", "rxe", "other" */
	char transport[8];  /* "roce", "ib", "iwarp", "unknown" */
	char erdma_mode[8]; /* erdma's: "iwarp", "compat", "ofed"; empty for others */
	/* What NCCL sees of it (nccl.h's rules): */
	bool nccl_ib; /* its IB transport can use the device (not iWARP) */
	/* InfiniBand: 0; RoCE: the RoCE v2 GID of the netdev's IPv4 address here; -1: none */
	int gid_index;
	char hca[HPN_IBDEV_MAX + 16]; /* its NCCL_IB_HCA, "=dev:port"; empty when not nccl_ib */
	bool vf;
	bool journal_only; /* known only from a journal: not an RDMA port of the host */
	/* Held by an attachment in the state store. */
	char held_network[128];
	char held_container[HPN_KEY_MAX];
	char held_ifname[HPN_IFNAMSIZ];
	bool held_complete;  /* the ADD finished (phase ATTACHED) and no DEL or GC runs */
	bool held_releasing; /* a DEL or GC is undoing it */
};

/* A host netdev's RoCE QoS. */
struct hpn_doctor_qos {
	char netdev[HPN_IFNAMSIZ];
	bool dcb_asked;		 /* DCB was asked of the kernel (a live root) */
	struct hpn_qos q;	 /* state HPN_QOS_UNREAD when DCB was not asked or failed */
	char error[HPN_ERR_MSG]; /* why DCB could not be read; empty when it was */
	/* The class the config's hints give a RoCE NIC here, and its verdict (hpn_nccl_class). */
	bool judged; /* a valid config with nccl on: hints is set */
	struct hpn_rdma_qos hints;
};

struct hpn_doctor_check {
	const char *name;
	enum hpn_check_state state;
	char msg[HPN_ERR_MSG];
};

struct hpn_doctor {
	/* The config: where it came from and whether it parses. */
	char conf_file[4096];  /* empty: none found */
	char conf_first[4096]; /* the first config file in the directory (what containerd uses) */
	int conf_plugin;       /* index of the hpn-rdma entry in a conflist; -1 for a .conf */
	bool conf_valid;
	bool conf_device_plugin; /* the device comes from runtimeConfig.deviceID */
	struct hpn_err conf_err;
	struct hpn_conf conf;
	char *conf_buf;
	const char *sysfs_root;
	const char *cni_path;

	bool rdma_subsystem;
	enum hpn_rdma_netns netns_mode;
	char modules[HPN_DOCTOR_MAX_MODS][32];
	size_t n_modules;

	struct hpn_doctor_nic nics[HPN_DOCTOR_MAX_NICS];
	size_t n_nics;
	struct hpn_doctor_qos qos[HPN_DOCTOR_MAX_QOS];
	size_t n_qos;

	struct hpn_doctor_check checks[HPN_DOCTOR_MAX_CHECKS];
	size_t n_checks;
	bool ready;
};

/*
 * Finds the config (conf_file, or the first file in conf_dir sorted by name, as
 * libcni does, with an hpn-rdma plugin; .conf, .conflist, .json), gathers the
 * node's facts and runs every check. Never fails for what it finds (that is the
 * verdict); a negative errno only for running out of memory. Free with
 * hpn_doctor_free().
 */
int hpn_doctor_run(const char *conf_file, const char *conf_dir, const char *cni_path,
		   struct hpn_doctor *d);
void hpn_doctor_free(struct hpn_doctor *d);

/* The report as text (a table and the verdict) or as a JSON object; NULL on ENOMEM. */
char *hpn_doctor_render_text(const struct hpn_doctor *d);
char *hpn_doctor_render_json(const struct hpn_doctor *d);

#endif
