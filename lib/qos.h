/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_QOS_H
#define HPN_QOS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "nl.h"

/*
 * A NIC's RoCE QoS as the node has it: which 802.1p priorities have PFC
 * (lossless), how DSCP values map to priorities (the DCB APP table, whose DSCP
 * entries make mlx5 trust DSCP), who runs DCBX, and ECN per priority. Read
 * from the kernel's DCB netlink (rtnetlink RTM_GETDCB, net/dcb/dcbnl.c) in
 * the caller's netns, and from the driver's sysfs where it has ECN knobs.
 * The rules, their sources and what was never exercised: doc/rdma.md, "RoCE
 * QoS as the node has it".
 */

#define HPN_QOS_PRIOS 8	 /* IEEE_8021QAZ_MAX_TCS: 802.1p priorities 0-7 */
#define HPN_QOS_DSCPS 64 /* 6-bit DSCP values 0-63 */

enum hpn_qos_state {
	HPN_QOS_UNREAD = 0, /* nothing decoded yet */
	/*
	 * The kernel answered that the netdev has no DCB ops (EOPNOTSUPP: a veth,
	 * a virtio NIC, a kernel without CONFIG_DCB), or its IEEE answer carried
	 * no IEEE attributes: no PFC, no APP table, nothing to trust.
	 */
	HPN_QOS_NO_DCB,
	HPN_QOS_DCB, /* an IEEE 802.1Qaz answer was decoded */
};

enum hpn_qos_dcbx {
	HPN_QOS_DCBX_UNKNOWN,  /* the driver reports no DCBX mode (no getdcbx op) */
	HPN_QOS_DCBX_HOST,     /* DCB_CAP_DCBX_HOST: the host (lldpad, dcb) sets the QoS */
	HPN_QOS_DCBX_FIRMWARE, /* not HOST, or LLD_MANAGED: the NIC's firmware negotiates */
};

struct hpn_qos {
	enum hpn_qos_state state;
	char ifname[16]; /* as the kernel's IEEE answer names it (no DCB: the name read); empty before */
	bool pfc_known;	 /* the answer had DCB_ATTR_IEEE_PFC (the driver has ieee_getpfc) */
	uint8_t pfc_en;	 /* bit p: PFC is on for priority p (struct ieee_pfc.pfc_en) */
	uint8_t pfc_cap; /* how many priorities may have PFC at once (ieee_pfc.pfc_cap) */
	/*
	 * The APP table's DSCP entries (selector IEEE_8021QAZ_APP_SEL_DSCP), as the
	 * kernel's own dcb_ieee_getapp_dscp_prio_mask_map keeps them: for DSCP d,
	 * bit p of dscp_prio[d] is an entry d -> p. 0: no entry for d. mlx5 keeps
	 * one priority per DSCP; the kernel's generic table allows several.
	 */
	uint8_t dscp_prio[HPN_QOS_DSCPS];
	unsigned int n_dscp; /* DSCP values with an entry; > 0: the NIC trusts DSCP */
	int dcbx;	     /* DCB_ATTR_DCBX as the driver reports it (DCB_CAP_DCBX_*); -1: not */
	/* ECN per priority from <sysfs>/class/net/<if>/ecn/roce_{np,rp}/enable/<p>. */
	bool ecn_np_known, ecn_rp_known; /* the driver has that layout (MLNX_OFED's mlx5) */
	uint8_t ecn_np, ecn_rp;		 /* bit p: enabled for priority p */
};

/* "unread", "none", "ieee". */
const char *hpn_qos_state_name(enum hpn_qos_state s);
/* "unknown", "host", "firmware". */
const char *hpn_qos_dcbx_name(enum hpn_qos_dcbx m);

/*
 * Decodes the kernel's answer to one of our DCB requests: len bytes holding
 * one or more netlink messages as a netlink socket delivers them. RTM_GETDCB
 * replies to DCB_CMD_IEEE_GET (the interface name, PFC, the APP table's DSCP
 * entries, DCBX) and to DCB_CMD_GDCBX (DCBX); NLMSG_ERROR: 0 is an ACK,
 * -EOPNOTSUPP is "no DCB" (or, once an IEEE answer was decoded, a driver
 * without getdcbx: DCBX unknown), any other error is returned, naming it.
 * Every length is checked against the buffer and the uapi structs; a DSCP
 * entry outside 0-63 or with a priority outside 0-7, an attribute given twice
 * or a message the kernel never sends for these commands is refused (-EPROTO,
 * code 102, naming what was wrong).
 *
 * ret holds what earlier answers of the same read said (zeroed with dcbx -1
 * before the first: hpn_qos_init); this answer's facts are added to it. On
 * error ret is untouched. No I/O: tests and the fuzzer feed it bytes.
 */
int hpn_qos_decode(const void *nlmsg, size_t len, struct hpn_qos *ret, struct hpn_err *err);
/* An hpn_qos before any answer: all zero, dcbx -1. */
void hpn_qos_init(struct hpn_qos *q);

/*
 * How hpn_qos_read reaches the kernel: send req and hand each reply to cb,
 * with hpn_nl_talk's contract (0, or the kernel's -errno). hpn_qos_read uses
 * hpn_nl_talk on a rtnetlink socket; a test passes a stand-in for the kernel.
 */
typedef int (*hpn_qos_talk)(void *ctx, struct nl_msg *req, hpn_nl_cb cb, void *arg,
			    char extack[HPN_EXTACK_LEN]);

/*
 * The QoS of netdev ifname in the caller's netns: DCB_CMD_IEEE_GET, then (when
 * the netdev has DCB) DCB_CMD_GDCBX, over rt (a NETLINK_ROUTE socket of that
 * netns; NULL: one is opened and closed here), then ECN from sysfs_root
 * (sysfs shows the netdevs of the netns that mounted it). "No DCB" is a
 * result, not an error. Errors: -ENODEV for no such netdev, the kernel's
 * -errno, a refused answer (hpn_qos_decode); err names ifname. ret is
 * written only on success.
 */
int hpn_qos_read(struct nl_sock *rt, const char *sysfs_root, const char *ifname,
		 struct hpn_qos *ret, struct hpn_err *err);
/* hpn_qos_read with its requests sent through talk(ctx, ...). */
int hpn_qos_read_via(hpn_qos_talk talk, void *ctx, const char *sysfs_root, const char *ifname,
		     struct hpn_qos *ret, struct hpn_err *err);
/* Only the sysfs part (ECN), into q: for a fake tree, whose netdevs the kernel lacks. */
void hpn_qos_read_ecn(const char *sysfs_root, const char *ifname, struct hpn_qos *q);

/* The NIC trusts DSCP: the APP table has DSCP entries (mlx5 sets trust DSCP with the first). */
static inline bool hpn_qos_trust_dscp(const struct hpn_qos *q)
{
	return q->n_dscp > 0;
}

enum hpn_qos_dcbx hpn_qos_dcbx_mode(const struct hpn_qos *q);

/*
 * The node's lossless class: the one priority with PFC on (0-7). -ENOENT
 * when none has (or PFC is unknown, or there is no DCB); -ENOTUNIQ when more
 * than one has, so that no class is picked for the caller.
 */
int hpn_qos_lossless_prio(const struct hpn_qos *q);

/* NCCL_IB_TC for a DSCP: the IPv6 traffic class byte, DSCP << 2 with ECN bits 0; -EINVAL outside 0-63. */
int hpn_qos_tc_for_dscp(int dscp);

/*
 * Whether RoCE v2 traffic that NCCL sends with NCCL_IB_TC=tc and NCCL_IB_SL=sl
 * rides a PFC-enabled priority on this NIC. mlx5 RoCE puts tc >> 2 in the
 * DSCP field and sl & 7 in the Ethernet priority of the QP's path; the NIC
 * classifies by DSCP when it trusts DSCP, else by that priority. So, trust
 * DSCP: every priority the APP table maps DSCP tc >> 2 to has PFC (none
 * mapped: false); trust PCP: priority sl & 7 has PFC. False without DCB,
 * without PFC facts, or for tc outside 0-255, sl outside 0-15.
 */
bool hpn_qos_tc_lossless(const struct hpn_qos *q, int tc, int sl);

#endif
