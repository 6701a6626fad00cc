/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_TYPES_H
#define HPN_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Plain value types and sizes that every layer shares: the protocol renders
 * them, the mechanisms fill them, the store journals them. No functions here,
 * and nothing that knows where a value came from.
 */

#define HPN_IFNAMSIZ	 16 /* IFNAMSIZ, with the NUL */
#define HPN_MAX_ALTNAMES 8
#define HPN_ALTNAMSIZ	 128 /* ALTIFNAMSIZ */
#define HPN_MAC_LEN	 6
#define HPN_MAC_STR	 18  /* "aa:bb:cc:dd:ee:ff" + NUL */
#define HPN_PCI_STR	 16  /* "0000:af:00.1" + NUL, with room */
#define HPN_IBDEV_MAX	 64  /* IB_DEVICE_NAME_MAX, with the NUL */
#define HPN_MAX_NICS	 16  /* count: NICs of one attachment */
#define HPN_NCCL_KEY_MAX 129 /* a pod UID or container ID, as a directory name */
#define HPN_NIC_ID_MAX	 64  /* a NIC's device ID (alloc.h), as a hints link's name */
#define HPN_MAX_GPUS	 64  /* GPUs of one pod (gpu.h) */
#define HPN_GPU_ID_MAX	 96  /* a GPU as the kubelet names it: "GPU-<uuid>::<n>", "gpu-3" */
#define HPN_DIST_STR	 8   /* a PCI distance class's name: "PIX", "unknown" */
/* Soft-RoCE devices made for a pod (softRoce) are "rxe_" and 12 hex digits (rdma.h). */
#define HPN_RDMA_SOFT_PREFIX "rxe_"

/* What the kernel says about one netdev (RTM_NEWLINK). */
struct hpn_link {
	int ifindex;
	unsigned int mtu;
	int lower_ifindex; /* IFLA_LINK in the same netns (a veth's peer, a macvlan's parent); 0 */
	/* Its IPv4 settings (net.ipv4.conf.<name>), when the kernel sent them. */
	unsigned int arp_ignore, arp_announce;
	bool has_inet_conf;
	bool has_mac;
	bool has_perm_mac;
	bool up; /* administratively up (IFF_UP) */
	size_t n_altnames;
	char name[HPN_IFNAMSIZ];
	char altnames[HPN_MAX_ALTNAMES][HPN_ALTNAMSIZ];
	char kind[16]; /* IFLA_INFO_KIND: "veth", "macvlan"; empty for hardware */
	uint8_t mac[HPN_MAC_LEN];
	uint8_t perm_mac[HPN_MAC_LEN]; /* IFLA_PERM_ADDRESS: burned-in, survives renames */
};

/* The node's RDMA netns mode (rdma system), and what config rdmaNetns asks of it. */
enum hpn_rdma_netns { HPN_RDMA_NETNS_AUTO, HPN_RDMA_NETNS_SHARED, HPN_RDMA_NETNS_EXCLUSIVE };

/* Distance classes, NCCL's names, nearest first. */
enum hpn_gpu_dist {
	HPN_DIST_PIX,	  /* through at most one PCIe switch */
	HPN_DIST_PXB,	  /* through several switches, not the host bridge */
	HPN_DIST_PHB,	  /* through the host bridge: another root complex of the NUMA node */
	HPN_DIST_SYS,	  /* across NUMA nodes */
	HPN_DIST_UNKNOWN, /* one end is not a PCI function the host's sysfs places */
};
struct hpn_kv {
	char *key;
	char *value;
};

/* An address of an interface (the CNI result's "ips" entry). */
struct hpn_ipcfg {
	char *address; /* CIDR */
	char *gateway;
	int interface; /* index into interfaces, -1 when absent */
};

/* A route (the CNI result's "routes" entry); has says which optional fields are set. */
struct hpn_route {
	char *dst; /* CIDR */
	char *gw;
	int mtu, advmss, priority, table, scope;
	unsigned has; /* HPN_ROUTE_HAS_* */
};

enum {
	HPN_ROUTE_HAS_MTU = 1,
	HPN_ROUTE_HAS_ADVMSS = 2,
	HPN_ROUTE_HAS_PRIORITY = 4,
	HPN_ROUTE_HAS_TABLE = 8,
	HPN_ROUTE_HAS_SCOPE = 16,
};

/*
 * A NIC's RoCE QoS as ADD read it (lib/qos.c) and where the traffic class the
 * hints give NCCL lands on it (lib/ncclqos.c): the result's "rdma[i].qos".
 * Read only for a RoCE device NCCL's IB transport uses (not eRDMA, whose
 * fabric is the cloud's) while nccl is on.
 */
struct hpn_rdma_qos {
	char dcb[8]; /* "ieee" (the DCB answer), "none" (no DCB), "error" (unread); "": not read */
	char netdev[16];  /* the host netdev it was read from (a VF's: its PF) */
	int pfc;	  /* priorities with PFC, bit p; -1: unknown */
	char trust[8];	  /* "dscp", "pcp"; empty without DCB */
	int tc;		  /* NCCL_IB_TC the hints give its QPs (0: NCCL's default) */
	int fifo_tc;	  /* NCCL_IB_FIFO_TC, or tc when the hints leave it unset */
	int sl;		  /* NCCL_IB_SL (0: NCCL's default) */
	char lossless[8]; /* "yes", "no", "unknown" */
	char note[256];	  /* the warning ADD gave, or why the verdict is unknown */
};

/*
 * The RDMA device bound for one interface: the result's "rdma" list, an
 * hpn-rdma extension (decoders ignore unknown keys). bound false carries the
 * reason (rdmaRequired false and no RDMA device behind the NIC).
 */
struct hpn_rdma_info {
	int interface; /* index into interfaces */
	int port;
	int gid_index; /* -1: none */
	int lid;       /* InfiniBand only */
	/* Its RoCE QoS and the hints' class on it; qos.dcb empty: not read. */
	struct hpn_rdma_qos qos;
	bool bound;
	bool vf;      /* an SR-IOV VF */
	bool gpu_far; /* a NIC left free was nearer to that GPU */
	char device[64];
	char gid[48];	     /* IPv6 notation */
	char driver[16];     /* "mlx5", "erdma", "rxe", "other" */
	char netns_mode[16]; /* "shared" or "exclusive" */
	char link_layer[16]; /* "Ethernet" or "InfiniBand" */
	char transport[8];   /* "roce", "iwarp", "ib" */
	char pci[16];	     /* the RDMA device's PCI function (eRDMA: not the NIC's) */
	char port_guid[20];  /* InfiniBand only */
	char reason[256];    /* why nothing is bound */
	/* The pod's GPU this NIC serves (doc/gpu.md); gpu_id empty: none known. */
	char gpu_id[HPN_GPU_ID_MAX];
	char gpu_pci[HPN_PCI_STR];   /* empty: procfs does not place it */
	char gpu_dist[HPN_DIST_STR]; /* NCCL's class of the pair: "PIX" ... "SYS", "unknown" */
};

/*
 * One NIC of an attachment as what renders from the binding (the NCCL hints)
 * sees it. The pointers borrow from whoever filled it (a result).
 */
struct hpn_qos;

struct hpn_bound_nic {
	const char *ifname;		  /* the pod-side name; NULL: unknown */
	const char *address;		  /* its first address, IPv4 first (CIDR); NULL: none */
	const struct hpn_rdma_info *rdma; /* what was bound on it (rdma->bound) */
	const struct hpn_qos *qos;	  /* its QoS as ADD read it; NULL: not read */
};

#endif
