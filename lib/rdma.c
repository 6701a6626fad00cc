// SPDX-License-Identifier: Apache-2.0
/*
 * RDMA netlink (NETLINK_RDMA, the "nldev" client): the node's netns mode, a
 * device's presence and its move to another netns, rxe links made and
 * deleted, a port's GSI QP, every port with the netdev it serves; and the
 * names of rdma.h's kinds, protocols and modes and of our Soft-RoCE
 * devices. Finding and describing devices through sysfs is rdmasys.c's.
 */
#include "rdma.h"

#include <errno.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <rdma/rdma_netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nl.h"
#include "util.h"

#ifndef NETLINK_RDMA
#define NETLINK_RDMA 20
#endif

#define NLDEV(op) RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op)

const char *hpn_rdma_kind_module(enum hpn_rdma_kind kind)
{
	switch (kind) {
	case HPN_RDMA_MLX5:
		return "mlx5_ib";
	case HPN_RDMA_ERDMA:
		return "erdma";
	case HPN_RDMA_RXE:
		return "rdma_rxe";
	case HPN_RDMA_OTHER:
		break;
	}
	return NULL;
}

const char *hpn_rdma_kind_name(enum hpn_rdma_kind kind)
{
	switch (kind) {
	case HPN_RDMA_MLX5:
		return "mlx5";
	case HPN_RDMA_ERDMA:
		return "erdma";
	case HPN_RDMA_RXE:
		return "rxe";
	case HPN_RDMA_OTHER:
		break;
	}
	return "other";
}

const char *hpn_rdma_netns_name(enum hpn_rdma_netns mode)
{
	return mode == HPN_RDMA_NETNS_EXCLUSIVE ? "exclusive"
	       : mode == HPN_RDMA_NETNS_SHARED	? "shared"
						: "auto";
}

/* names[v], or dflt for a value past the table. */
static const char *enum_name(const char *const *names, size_t n, unsigned int v, const char *dflt)
{
	return v < n ? names[v] : dflt;
}

const char *hpn_rdma_proto_name(enum hpn_rdma_proto proto)
{
	/* In the enum's order. */
	static const char *const names[] = { "unknown", "roce", "ib", "iwarp" };

	return enum_name(names, HPN_ARRAY_SIZE(names), (unsigned int)proto, "unknown");
}

const char *hpn_erdma_mode_name(enum hpn_erdma_mode mode)
{
	static const char *const names[] = { "", "iwarp", "compat", "ofed" };

	return enum_name(names, HPN_ARRAY_SIZE(names), (unsigned int)mode, "");
}

bool hpn_rdma_nccl_ib(const struct hpn_rdma_dev *dev)
{
	return dev->proto != HPN_RDMA_PROTO_IWARP;
}

bool hpn_erdma_gpu_mtu_ok(unsigned int mtu)
{
	return mtu == HPN_ERDMA_GPU_MTU_JUMBO || mtu == HPN_ERDMA_GPU_MTU;
}

/* ---- RDMA netlink ------------------------------------------------------------ */

/* One nldev attribute table; NULL entries for what the message lacks or is too short. */
struct nldev {
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];
};

static int nldev_parse(struct nl_msg *msg, struct nldev *a)
{
	if (nlmsg_parse(nlmsg_hdr(msg), 0, a->tb, RDMA_NLDEV_ATTR_MAX - 1, NULL) < 0)
		return -EINVAL;
	return 0;
}

static uint32_t nldev_u32(const struct nldev *a, int type)
{
	return a->tb[type] && nla_len(a->tb[type]) >= 4 ? nla_get_u32(a->tb[type]) : 0;
}

static void nldev_str(const struct nldev *a, int type, char *out, size_t len)
{
	out[0] = '\0';
	if (a->tb[type])
		nla_strlcpy(out, a->tb[type], len);
}

/* Sends one nldev request on a fresh NETLINK_RDMA socket in the current netns. */
static int nldev_talk(int op, int flags, int (*build)(struct nl_msg *m, const void *arg),
		      const void *barg, hpn_nl_cb cb, void *cbarg, char extack[HPN_EXTACK_LEN])
{
	_cleanup_nl_sock_ struct nl_sock *sk = NULL;
	_cleanup_nl_msg_ struct nl_msg *m = NULL;
	int r;

	r = hpn_nl_open(NETLINK_RDMA, &sk);
	if (r < 0)
		return r;
	m = nlmsg_alloc_simple(NLDEV(op), NLM_F_REQUEST | NLM_F_ACK | flags);
	if (!m)
		return -ENOMEM;
	if (build && build(m, barg) < 0)
		return -EMSGSIZE;
	return hpn_nl_talk(sk, m, cb, cbarg, extack);
}

static int on_sys(struct nl_msg *msg, void *arg)
{
	struct nldev a;
	uint8_t *shared = arg;

	if (nldev_parse(msg, &a) == 0 && a.tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE] &&
	    nla_len(a.tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE]) >= 1)
		*shared = nla_get_u8(a.tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE]);
	return 0;
}

int hpn_rdma_netns_mode(enum hpn_rdma_netns *mode, struct hpn_err *err)
{
	char extack[HPN_EXTACK_LEN];
	uint8_t shared = 0xff;
	int r;

	r = nldev_talk(RDMA_NLDEV_CMD_SYS_GET, 0, NULL, NULL, on_sys, &shared, extack);
	if (r == -EPROTONOSUPPORT)
		return r;
	if (r < 0)
		return hpn_nl_err(err, r, extack, "RDMA netlink: read the netns mode");
	if (shared == 0xff)
		return hpn_err_set(err, HPN_E_NETLINK, EPROTO,
				   "RDMA netlink: the kernel did not report the netns mode");
	*mode = shared ? HPN_RDMA_NETNS_SHARED : HPN_RDMA_NETNS_EXCLUSIVE;
	return 0;
}

static int on_port(struct nl_msg *msg, void *arg)
{
	struct hpn_rdma_ports *d = arg;
	struct hpn_rdma_port *row;
	struct nldev a;

	if (nldev_parse(msg, &a) < 0 || d->n == HPN_RDMA_PORTS_MAX)
		return 0;
	row = &d->rows[d->n];
	row->index = nldev_u32(&a, RDMA_NLDEV_ATTR_DEV_INDEX);
	row->port = nldev_u32(&a, RDMA_NLDEV_ATTR_PORT_INDEX);
	row->ndev_index = nldev_u32(&a, RDMA_NLDEV_ATTR_NDEV_INDEX);
	nldev_str(&a, RDMA_NLDEV_ATTR_DEV_NAME, row->name, sizeof(row->name));
	nldev_str(&a, RDMA_NLDEV_ATTR_NDEV_NAME, row->ndev, sizeof(row->ndev));
	if (row->name[0] && row->port)
		d->n++;
	return 0;
}

struct dev_dump {
	uint32_t index[HPN_RDMA_PORTS_MAX];
	char name[HPN_RDMA_PORTS_MAX][HPN_IBDEV_MAX];
	size_t n;
};

/*
 * Empty, and not zeroed: entries are filled as they come, so the pages of the
 * unused ones (most of 17 KB) are never touched, nor faulted in.
 */
static struct dev_dump *dev_dump_new(void)
{
	struct dev_dump *d = malloc(sizeof(*d));

	if (d)
		d->n = 0;
	return d;
}

static int on_dev(struct nl_msg *msg, void *arg)
{
	struct dev_dump *d = arg;
	struct nldev a;

	if (nldev_parse(msg, &a) == 0 && d->n < HPN_RDMA_PORTS_MAX &&
	    a.tb[RDMA_NLDEV_ATTR_DEV_INDEX]) {
		nldev_str(&a, RDMA_NLDEV_ATTR_DEV_NAME, d->name[d->n], HPN_IBDEV_MAX);
		d->index[d->n++] = nldev_u32(&a, RDMA_NLDEV_ATTR_DEV_INDEX);
	}
	return 0;
}

/*
 * The netlink index of RDMA device name in this netns (one device dump):
 * 1 found, 0 not there, -EPROTONOSUPPORT (err untouched) without RDMA netlink.
 */
static int dev_index(const char *name, uint32_t *index, struct hpn_err *err)
{
	struct dev_dump *d = dev_dump_new();
	char extack[HPN_EXTACK_LEN];
	int r;

	if (!d)
		return -ENOMEM;
	r = nldev_talk(RDMA_NLDEV_CMD_GET, NLM_F_DUMP, NULL, NULL, on_dev, d, extack);
	if (r < 0 && r != -EPROTONOSUPPORT)
		hpn_nl_err(err, r, extack, "RDMA netlink: list RDMA devices");
	for (size_t i = 0; r == 0 && i < d->n; i++) {
		if (!strcmp(d->name[i], name)) {
			*index = d->index[i];
			r = 1;
		}
	}
	free(d);
	return r;
}

static int put_dev_index(struct nl_msg *m, const void *arg)
{
	return nla_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, *(const uint32_t *)arg) < 0 ? -EMSGSIZE
										     : 0;
}

/* The kernel dumps ports one device at a time: the devices are listed first. */
int hpn_rdma_port_dump(struct hpn_rdma_ports *d, struct hpn_err *err)
{
	char extack[HPN_EXTACK_LEN];
	struct dev_dump *devs = dev_dump_new();
	int r;

	if (!devs)
		return -ENOMEM;
	d->n = 0;
	r = nldev_talk(RDMA_NLDEV_CMD_GET, NLM_F_DUMP, NULL, NULL, on_dev, devs, extack);
	for (size_t i = 0; r == 0 && i < devs->n; i++) {
		r = nldev_talk(RDMA_NLDEV_CMD_PORT_GET, NLM_F_DUMP, put_dev_index, &devs->index[i],
			       on_port, d, extack);
		/* A device unregistered since the first dump is not an error. */
		if (r == -ENODEV || r == -EINVAL)
			r = 0;
	}
	free(devs);
	if (r < 0 && r != -EPROTONOSUPPORT)
		return hpn_nl_err(err, r, extack, "RDMA netlink: list RDMA ports");
	return r;
}

int hpn_rdma_present(const char *name, struct hpn_err *err)
{
	uint32_t index = 0;

	return dev_index(name, &index, err);
}

static int put_set_netns(struct nl_msg *m, const void *arg)
{
	const uint32_t *v = arg;

	if (nla_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, v[0]) < 0 ||
	    nla_put_u32(m, RDMA_NLDEV_NET_NS_FD, v[1]) < 0)
		return -EMSGSIZE;
	return 0;
}

int hpn_rdma_set_netns(const char *name, int netns_fd, struct hpn_err *err)
{
	char extack[HPN_EXTACK_LEN];
	uint32_t v[2] = { 0, (uint32_t)netns_fd };
	int r = dev_index(name, &v[0], err);

	if (r == -EPROTONOSUPPORT)
		return hpn_err_set(err, HPN_E_RDMA, -r, "RDMA netlink is not available");
	if (r < 0)
		return r;
	if (r == 0)
		return hpn_err_set(err, HPN_E_RDMA, ENODEV, "RDMA device \"%s\" not found", name);
	r = nldev_talk(RDMA_NLDEV_CMD_SET, 0, put_set_netns, v, NULL, NULL, extack);
	if (r < 0) {
		hpn_nl_err(err, r, extack, "move RDMA device \"%s\" to another netns", name);
		err->code = HPN_E_RDMA;
	}
	return r;
}

struct link_add {
	const char *name, *type, *netdev;
};

static int put_link_add(struct nl_msg *m, const void *arg)
{
	const struct link_add *l = arg;

	if (nla_put_string(m, RDMA_NLDEV_ATTR_DEV_NAME, l->name) < 0 ||
	    nla_put_string(m, RDMA_NLDEV_ATTR_LINK_TYPE, l->type) < 0 ||
	    nla_put_string(m, RDMA_NLDEV_ATTR_NDEV_NAME, l->netdev) < 0)
		return -EMSGSIZE;
	return 0;
}

int hpn_rdma_link_add(const char *name, const char *type, const char *netdev, struct hpn_err *err)
{
	const struct link_add l = { name, type, netdev };
	char extack[HPN_EXTACK_LEN];
	int r;

	r = nldev_talk(RDMA_NLDEV_CMD_NEWLINK, 0, put_link_add, &l, NULL, NULL, extack);
	if (r < 0) {
		hpn_nl_err(err, r, extack, "create %s device \"%s\" over \"%s\"", type, name,
			   netdev);
		err->code = HPN_E_RDMA;
		/* The kernel loads the link type's module itself; EINVAL: it has none. */
		if (r == -EINVAL || r == -ENOENT)
			hpn_err_details(err,
					"is the rdma_%s module available (and, for rxe, "
					"crc32_generic)?",
					type);
	}
	return r;
}

int hpn_rdma_link_del(const char *name, struct hpn_err *err)
{
	char extack[HPN_EXTACK_LEN];
	uint32_t index = 0;
	int r = dev_index(name, &index, err);

	if (r == -EPROTONOSUPPORT || r == 0)
		return -ENODEV;
	if (r < 0)
		return r;
	r = nldev_talk(RDMA_NLDEV_CMD_DELLINK, 0, put_dev_index, &index, NULL, NULL, extack);
	/* Unregistered meanwhile (its netdev left): what was asked for. */
	if (r == -ENODEV)
		return -ENODEV;
	if (r < 0) {
		hpn_nl_err(err, r, extack, "delete RDMA device \"%s\"", name);
		err->code = HPN_E_RDMA;
	}
	return r;
}

struct qp_scan {
	uint32_t port;
	bool gsi;
};

/* One device's QPs: RDMA_NLDEV_ATTR_RES_QP holds an entry per QP, each its own table. */
static int on_qp(struct nl_msg *msg, void *arg)
{
	struct qp_scan *q = arg;
	struct nlattr *e;
	struct nldev a;
	int rem;

	if (nldev_parse(msg, &a) < 0 || !a.tb[RDMA_NLDEV_ATTR_RES_QP])
		return 0;
	nla_for_each_nested (e, a.tb[RDMA_NLDEV_ATTR_RES_QP], rem) {
		struct nldev t = { 0 };

		if (nla_type(e) != RDMA_NLDEV_ATTR_RES_QP_ENTRY ||
		    nla_parse_nested(t.tb, RDMA_NLDEV_ATTR_MAX - 1, e, NULL) < 0)
			continue;
		if (nldev_u32(&t, RDMA_NLDEV_ATTR_RES_LQPN) == 1 &&
		    (!t.tb[RDMA_NLDEV_ATTR_PORT_INDEX] ||
		     nldev_u32(&t, RDMA_NLDEV_ATTR_PORT_INDEX) == q->port))
			q->gsi = true;
	}
	return 0;
}

int hpn_rdma_has_gsi(const char *name, uint32_t port, struct hpn_err *err)
{
	struct qp_scan q = { .port = port };
	char extack[HPN_EXTACK_LEN];
	uint32_t index = 0;
	int r = dev_index(name, &index, err);

	if (r == 0)
		return hpn_err_set(err, HPN_E_RDMA, ENODEV, "RDMA device \"%s\" not found", name);
	if (r < 0)
		return r;
	r = nldev_talk(RDMA_NLDEV_CMD_RES_QP_GET, NLM_F_DUMP, put_dev_index, &index, on_qp, &q,
		       extack);
	if (r < 0)
		return hpn_nl_err(err, r, extack, "RDMA netlink: list the QPs of \"%s\"", name);
	return q.gsi;
}

void hpn_rdma_soft_name(const char *network, const char *key, size_t nic, char out[HPN_IBDEV_MAX])
{
	char id[512];

	uint64_t h;

	snprintf(id, sizeof(id), "%s/%s/%zu", network, key, nic);
	/*
	 * FNV alone leaves names of one attachment's NICs a digit apart (the
	 * index is its last byte): a 64-bit finaliser (MurmurHash3's fmix64)
	 * spreads every input bit over the 48 kept, 12 hex digits.
	 */
	h = hpn_hash64(id);
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	snprintf(out, HPN_IBDEV_MAX, "%s%012llx", HPN_RDMA_SOFT_PREFIX,
		 (unsigned long long)(h >> 16));
}
