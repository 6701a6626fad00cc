/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_RDMA_H
#define HPN_RDMA_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "types.h"

struct nl_sock;

/*
 * RDMA devices as the kernel shows them: which one belongs to a netdev, the
 * node's RDMA netns mode, and moving a device between netns. RDMA netlink
 * (NETLINK_RDMA, the "nldev" client: rdma.c) when the kernel has it; sysfs
 * (rdmasys.c) under a root that tests point at a fake tree, or when the
 * kernel has no RDMA netlink. Every call acts in the caller's current netns.
 */

enum hpn_rdma_kind { HPN_RDMA_OTHER, HPN_RDMA_MLX5, HPN_RDMA_ERDMA, HPN_RDMA_RXE };

/*
 * What a device's port speaks, from its node type and link layer: a
 * channel adapter (node type 1) speaks its link layer (RoCE on Ethernet,
 * InfiniBand), an RNIC (4) iWARP, which connects only through iw_cm: no
 * NCCL IB transport over it.
 */
enum hpn_rdma_proto {
	HPN_RDMA_PROTO_UNKNOWN,
	HPN_RDMA_PROTO_ROCE,
	HPN_RDMA_PROTO_IB,
	HPN_RDMA_PROTO_IWARP,
};

/*
 * The erdma driver's mode (HPN_RDMA_ERDMA only), told by the node type and
 * never by the device's name: iWARP (its default, an RNIC), compat (module
 * parameter compat_mode, or a device that reports RoCE v2: a channel
 * adapter with RoCE v2 GIDs), and the OFED-style package of Alibaba's eRDMA
 * controller: compat underneath, the device carrying rdma-core's persistent
 * name of its PCI function ("rocep26s0"), which is how it is told from
 * compat and all it changes.
 */
enum hpn_erdma_mode { HPN_ERDMA_NONE, HPN_ERDMA_IWARP, HPN_ERDMA_COMPAT, HPN_ERDMA_OFED };

struct hpn_rdma_dev {
	char name[HPN_IBDEV_MAX];
	uint32_t index; /* RDMA netlink device index; 0 when found through sysfs only */
	uint32_t port;
	char netdev[HPN_IFNAMSIZ]; /* the netdev the device serves (a macvlan's parent) */
	enum hpn_rdma_kind kind;
	char driver[32];	   /* "mlx5_core", "erdma", "rdma_rxe", or the parent's driver */
	char pci[HPN_PCI_STR];	   /* the device's PCI function; empty for software devices */
	bool vf;		   /* an SR-IOV virtual function */
	bool soft;		   /* a software device over a netdev (rxe): recreated on restore */
	enum hpn_rdma_proto proto; /* its port's (the found port, else port 1) */
	enum hpn_erdma_mode erdma; /* HPN_ERDMA_NONE unless kind is HPN_RDMA_ERDMA */
};

/* ---- rdma.c: names, and RDMA netlink ------------------------------------------ */

const char *hpn_rdma_kind_name(enum hpn_rdma_kind kind);
/* The kernel module that registers RDMA devices of a kind (mlx5_ib...); NULL for other. */
const char *hpn_rdma_kind_module(enum hpn_rdma_kind kind);
const char *hpn_rdma_netns_name(enum hpn_rdma_netns mode);
/* "roce", "ib", "iwarp" (as the result's transport), "unknown". */
const char *hpn_rdma_proto_name(enum hpn_rdma_proto proto);
/* "iwarp", "compat", "ofed"; "" for HPN_ERDMA_NONE. */
const char *hpn_erdma_mode_name(enum hpn_erdma_mode mode);
/* Can NCCL's IB transport use the device? Not over iWARP (QPs connect only through iw_cm). */
bool hpn_rdma_nccl_ib(const struct hpn_rdma_dev *dev);
/*
 * The MTUs an eRDMA NIC may have on a GPU instance (ECS, "Enable eRDMA on
 * GPU-accelerated instances"): 8500 with jumbo frames, else 1400; NCCL's
 * LL128 protocol corrupts data over any other.
 */
#define HPN_ERDMA_GPU_MTU_JUMBO 8500
#define HPN_ERDMA_GPU_MTU	1400
bool hpn_erdma_gpu_mtu_ok(unsigned int mtu);

/*
 * The kernel's RDMA netns mode. -EPROTONOSUPPORT when the kernel has no RDMA
 * netlink (no RDMA subsystem at all); err is then left alone.
 */
int hpn_rdma_netns_mode(enum hpn_rdma_netns *mode, struct hpn_err *err);

/* Is RDMA device name visible in the current netns? 1 yes, 0 no, or -errno;
 * -EPROTONOSUPPORT (err untouched) when the kernel has no RDMA netlink. */
int hpn_rdma_present(const char *name, struct hpn_err *err);

/*
 * Has port of RDMA device name (in the current netns) its GSI QP, QP1, which
 * MADs and with them every rdma_cm connection need? 1 yes, 0 no (rdma res
 * show qp); -EPROTONOSUPPORT without RDMA netlink.
 */
int hpn_rdma_has_gsi(const char *name, uint32_t port, struct hpn_err *err);

/* Moves RDMA device name from the current netns into netns_fd (exclusive mode). */
int hpn_rdma_set_netns(const char *name, int netns_fd, struct hpn_err *err);

/*
 * Creates software RDMA device name of link type ("rxe") over netdev, which
 * the kernel looks up in the current netns (rdma link add). The device is
 * registered in this netns in shared mode, in the initial one in exclusive
 * mode.
 */
int hpn_rdma_link_add(const char *name, const char *type, const char *netdev, struct hpn_err *err);
/*
 * Deletes RDMA device name, looked up in the current netns (rdma link
 * delete): 0, or -ENODEV (err untouched) when it is not there.
 */
int hpn_rdma_link_del(const char *name, struct hpn_err *err);

/*
 * Soft-RoCE devices hpn-rdma makes for a pod (softRoce): "rxe_" and 12 hex
 * digits of a hash of the network, the attachment key and the NIC's index,
 * so that a name is the same for every run on one attachment and no two
 * attachments of the node share one (shared mode keeps device names unique
 * node-wide).
 */
void hpn_rdma_soft_name(const char *network, const char *key, size_t nic, char out[HPN_IBDEV_MAX]);

/*
 * Every port of every RDMA device in this netns (rdma link show) and the
 * netdev it serves, if any, in this netns: index and port numbers as the
 * kernel has them, ndev_index 0 and ndev "" for none. At most
 * HPN_RDMA_PORTS_MAX ports. About 24 KB: allocate it unzeroed, as
 * hpn_rdma_port_dump empties it and touches only the rows it fills.
 * -EPROTONOSUPPORT (err untouched) without RDMA netlink.
 */
#define HPN_RDMA_PORTS_MAX 256
struct hpn_rdma_ports {
	struct hpn_rdma_port {
		uint32_t index, port, ndev_index;
		char name[HPN_IBDEV_MAX];
		char ndev[HPN_IFNAMSIZ];
	} rows[HPN_RDMA_PORTS_MAX];
	size_t n;
};
int hpn_rdma_port_dump(struct hpn_rdma_ports *d, struct hpn_err *err);

/* ---- rdmasys.c: through sysfs ------------------------------------------------- */

/*
 * What the OFED-style eRDMA package (rdma-core's rdma_rename, NAME_FALLBACK)
 * names a device of protocol proto on PCI function pci under sysfs_root:
 * "<prefix>o<index>" from the function's acpi_index or index, else
 * "<prefix>[P<domain>](s<slot>|p<bus>s<device>)[f<function>]", with
 * prefix "roce", "ib" or "iw" (RDMA netlink's protocol names), decimal
 * numbers, the physical slot's number when one of <root>/bus/pci/slots
 * holds the function's address, and the function (ARI: slot * 8 +
 * function) when it is not 0 or the device is multi-function (bit 7 of the
 * config header type). -EINVAL for an address that is not one, or a
 * protocol without a prefix; -ENAMETOOLONG.
 */
int hpn_rdma_persistent_name(const char *sysfs_root, const char *pci, enum hpn_rdma_proto proto,
			     char out[HPN_IBDEV_MAX]);

/*
 * The RDMA netns mode of the node under sysfs_root: hpn_rdma_netns_mode's on
 * the real root; on a fake one the ib_core module parameter (the kernel keeps
 * it in step with "rdma system set netns"), and -EPROTONOSUPPORT without
 * <root>/module/ib_core.
 */
int hpn_rdma_node_netns_mode(const char *sysfs_root, enum hpn_rdma_netns *mode,
			     struct hpn_err *err);

/*
 * The RDMA device and port behind netdev l (through its lower device for a
 * macvlan, ipvlan or vlan). -ENODEV, err untouched, when it has none.
 * sysfs_root other than "/sys" means a fake tree: only sysfs is consulted.
 */
int hpn_rdma_of_netdev(const char *sysfs_root, struct nl_sock *rt, const struct hpn_link *l,
		       struct hpn_rdma_dev *ret, struct hpn_err *err);

/*
 * The reverse: the netdev served by RDMA device name (port 0: its only port
 * with a netdev). Fills ifname and *ret. Errors name the device (code 100).
 */
int hpn_rdma_netdev_of(const char *sysfs_root, struct nl_sock *rt, const char *name,
		       unsigned int port, char ifname[HPN_IFNAMSIZ], struct hpn_rdma_dev *ret,
		       struct hpn_err *err);

/* Linux 7.1 gave each netns its own rxe socket: before, a pod's rxe sent from the host's. */
#define HPN_RDMA_SOFT_KERNEL_MAJOR 7
#define HPN_RDMA_SOFT_KERNEL_MINOR 1
/* Does the running kernel give each netns its own rxe socket (release >= 7.1)? */
bool hpn_rdma_rxe_per_netns(void);
/*
 * Can this node make a Soft-RoCE device that serves a pod's netns? The
 * kernel's release (uname) at least 7.1, an RDMA subsystem, and rdma_rxe
 * loaded or among the running kernel's modules (RDMA netlink loads it).
 * 0, or -EOPNOTSUPP with a sentence naming everything missing in why.
 */
int hpn_rdma_soft_ready(const char *sysfs_root, char *why, size_t len);

/*
 * Classifies RDMA device name from <root>/class/infiniband/<name>: kind
 * (by the driver bound to its bus device, never by its name), driver, PCI
 * function, and for its port (dev->port, else 1) the protocol and, for
 * erdma, the mode.
 */
void hpn_rdma_classify(const char *sysfs_root, struct hpn_rdma_dev *dev);

/*
 * The character devices of RDMA device ibdev under sysfs_root, what a
 * container needs in /dev/infiniband to use it: uverbsN (class
 * infiniband_verbs), umadN and issmN (infiniband_mad, where the port has
 * them), each with the kernel's numbers from its "dev" file (0:0 when it has
 * none), sorted by name; and whether rdma_cm is there (class misc), with its numbers.
 */
#define HPN_RDMA_CDEVS_MAX 8
struct hpn_rdma_cdevs {
	struct hpn_rdma_cdev {
		char name[32];
		unsigned int major, minor;
	} v[HPN_RDMA_CDEVS_MAX];
	size_t n;
	bool rdma_cm;		 /* <root>/class/misc/rdma_cm: /dev/infiniband/rdma_cm exists */
	struct hpn_rdma_cdev cm; /* "rdma_cm" and its numbers (0:0 when its "dev" says none) */
};
void hpn_rdma_cdevs(const char *sysfs_root, const char *ibdev, struct hpn_rdma_cdevs *out);

#endif
