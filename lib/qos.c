// SPDX-License-Identifier: Apache-2.0
#include "qos.h"

#include <errno.h>
#include <linux/dcbnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "sysfs.h"
#include "util.h"

/*
 * What the kernel sends, from net/dcb/dcbnl.c: dcb_doit() answers a
 * RTM_GETDCB request (struct dcbmsg, family AF_UNSPEC, and DCB_ATTR_IFNAME,
 * a NUL-terminated name) with one RTM_GETDCB message of the same command,
 * or an error: -ENODEV for no netdev of that name in the socket's netns,
 * -EOPNOTSUPP for a netdev without dcbnl_ops (and rtnetlink says the same
 * for RTM_GETDCB on a kernel built without CONFIG_DCB). DCB_CMD_IEEE_GET's
 * answer (dcbnl_ieee_fill): DCB_ATTR_IFNAME, then the DCB_ATTR_IEEE nest
 * (ETS, maxrate, QCN, DCB_ATTR_IEEE_PFC when the driver has ieee_getpfc,
 * the buffer, the DCB_ATTR_IEEE_APP_TABLE nest of struct dcb_app entries,
 * the rewrite and trust tables, the peer's), then DCB_ATTR_DCBX (u8) when the
 * driver has getdcbx. DCB_CMD_GDCBX's answer: DCB_ATTR_DCBX alone, or
 * -EOPNOTSUPP without getdcbx. Only what RoCE QoS needs is read; the rest is
 * walked over, its lengths checked like everything else.
 */

#define REFUSED "DCB answer refused: "

static int refuse(struct hpn_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int refuse(struct hpn_err *err, const char *fmt, ...)
{
	char what[HPN_ERR_MSG];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return hpn_err_set(err, HPN_E_NETLINK, EPROTO, REFUSED "%s", what);
}

const char *hpn_qos_state_name(enum hpn_qos_state s)
{
	static const char *const names[] = { "unread", "none", "ieee" };

	return (unsigned int)s < HPN_ARRAY_SIZE(names) ? names[s] : names[0];
}

const char *hpn_qos_dcbx_name(enum hpn_qos_dcbx m)
{
	static const char *const names[] = { "unknown", "host", "firmware" };

	return (unsigned int)m < HPN_ARRAY_SIZE(names) ? names[m] : names[0];
}

void hpn_qos_init(struct hpn_qos *q)
{
	memset(q, 0, sizeof(*q));
	q->dcbx = -1;
}

/*
 * The kernel's error for one of our requests, applied to q: -EOPNOTSUPP is a
 * fact (no DCB ops; or, after an IEEE answer, no getdcbx: DCBX stays as it
 * is), anything else an error. extack: the kernel's text, or NULL.
 */
static int answer_error(int error, const char *extack, struct hpn_qos *q, struct hpn_err *err)
{
	if (error == -EOPNOTSUPP) {
		if (q->state != HPN_QOS_DCB)
			q->state = HPN_QOS_NO_DCB;
		return 0;
	}
	if (error == -ENODEV)
		return hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
				   "no netdev of that name in this netns");
	return hpn_nl_err(err, error, extack, "DCB request");
}

/*
 * The attribute at *off of p[0..len): its type (flags masked), payload and
 * payload length. 1: one; 0: the end; -EPROTO: a header or a length that
 * runs past the end. The padding after the last attribute may be absent.
 */
static int next_attr(const uint8_t *p, size_t len, size_t *off, unsigned int *type,
		     const uint8_t **data, size_t *dlen)
{
	struct nlattr a;

	if (*off >= len)
		return 0;
	if (len - *off < NLA_HDRLEN)
		return -EPROTO;
	memcpy(&a, p + *off, sizeof(a));
	if (a.nla_len < NLA_HDRLEN || a.nla_len > len - *off)
		return -EPROTO;
	*type = a.nla_type & NLA_TYPE_MASK;
	*data = p + *off + NLA_HDRLEN;
	*dlen = a.nla_len - NLA_HDRLEN;
	*off += NLA_ALIGN((size_t)a.nla_len);
	return 1;
}

/* 1 when bit was already in *seen (an attribute given twice), after setting it. */
static int seen_twice(unsigned int *seen, unsigned int type)
{
	unsigned int bit = 1u << (type & 31);
	int again = !!(*seen & bit);

	*seen |= bit;
	return again;
}

/* DCB_ATTR_IEEE_APP_TABLE: the DSCP entries; other selectors are no RoCE QoS. */
static int decode_apps(const uint8_t *p, size_t len, struct hpn_qos *q, struct hpn_err *err)
{
	const uint8_t *data;
	unsigned int type;
	size_t off = 0, dlen;
	int r;

	while ((r = next_attr(p, len, &off, &type, &data, &dlen)) > 0) {
		struct dcb_app app;
		uint8_t bit;

		/* DCB_ATTR_DCB_APP (the PCP selector of newer kernels) and the rest: not ours. */
		if (type != DCB_ATTR_IEEE_APP)
			continue;
		/* The kernel's own check of an entry it is given (dcbnl_app_table_setdel). */
		if (dlen < sizeof(app))
			return refuse(err, "an APP entry of %zu bytes, not %zu", dlen, sizeof(app));
		memcpy(&app, data, sizeof(app));
		if (app.selector != IEEE_8021QAZ_APP_SEL_DSCP)
			continue;
		if (app.protocol >= HPN_QOS_DSCPS)
			return refuse(err, "an APP entry for DSCP %u (DSCP is 0-63)", app.protocol);
		if (app.priority >= HPN_QOS_PRIOS)
			return refuse(err, "APP entry DSCP %u -> priority %u (priorities are 0-7)",
				      app.protocol, app.priority);
		bit = (uint8_t)(1u << app.priority);
		/* dcb_ieee_setapp refuses an entry it holds already (-EEXIST). */
		if (q->dscp_prio[app.protocol] & bit)
			return refuse(err, "APP entry DSCP %u -> priority %u given twice",
				      app.protocol, app.priority);
		q->dscp_prio[app.protocol] |= bit;
	}
	return r < 0 ? refuse(err, "DCB_ATTR_IEEE_APP_TABLE is cut short") : 0;
}

/* The DCB_ATTR_IEEE nest: PFC and the APP table. */
static int decode_ieee(const uint8_t *p, size_t len, struct hpn_qos *q, struct hpn_err *err)
{
	const uint8_t *data;
	unsigned int type, seen = 0;
	size_t off = 0, dlen;
	int r;

	while ((r = next_attr(p, len, &off, &type, &data, &dlen)) > 0) {
		if (type != DCB_ATTR_IEEE_PFC && type != DCB_ATTR_IEEE_APP_TABLE)
			continue;
		if (seen_twice(&seen, type))
			return refuse(err, "IEEE attribute %u given twice", type);
		if (type == DCB_ATTR_IEEE_PFC) {
			/* The whole struct, as iproute2's dcb reads it (dcb_get_attribute). */
			if (dlen != sizeof(struct ieee_pfc))
				return refuse(err, "DCB_ATTR_IEEE_PFC of %zu bytes, not %zu", dlen,
					      sizeof(struct ieee_pfc));
			q->pfc_cap = data[offsetof(struct ieee_pfc, pfc_cap)];
			q->pfc_en = data[offsetof(struct ieee_pfc, pfc_en)];
			q->pfc_known = true;
		} else {
			r = decode_apps(data, dlen, q, err);
			if (r < 0)
				return r;
		}
	}
	return r < 0 ? refuse(err, "DCB_ATTR_IEEE is cut short") : 0;
}

static int decode_ifname(const uint8_t *data, size_t dlen, struct hpn_qos *q, struct hpn_err *err)
{
	const uint8_t *nul = memchr(data, '\0', dlen);

	/* NLA_NUL_STRING of at most IFNAMSIZ - 1 characters (dcbnl_rtnl_policy). */
	if (!nul || (size_t)(nul - data) >= sizeof(q->ifname) ||
	    !hpn_valid_ifname((const char *)data))
		return refuse(err, "DCB_ATTR_IFNAME is not an interface name");
	memcpy(q->ifname, data, (size_t)(nul - data) + 1);
	return 0;
}

/* One RTM_GETDCB message of mlen bytes. */
static int decode_dcb(const uint8_t *m, size_t mlen, struct hpn_qos *q, struct hpn_err *err)
{
	size_t off = 0, dlen, alen;
	const uint8_t *a, *data;
	unsigned int type, seen = 0;
	struct dcbmsg d;
	bool ieee = false, dcbx = false;
	int r;

	if (mlen < NLMSG_HDRLEN + sizeof(d))
		return refuse(err, "a RTM_GETDCB message of %zu bytes", mlen);
	memcpy(&d, m + NLMSG_HDRLEN, sizeof(d));
	if (d.dcb_family != AF_UNSPEC)
		return refuse(err, "dcb_family %u, not AF_UNSPEC", d.dcb_family);
	if (d.cmd != DCB_CMD_IEEE_GET && d.cmd != DCB_CMD_GDCBX)
		return refuse(err, "an answer to DCB command %u, which we never send", d.cmd);
	a = m + NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(d));
	alen = mlen - (NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(d)));
	if (d.cmd == DCB_CMD_IEEE_GET) {
		/* A newer IEEE answer replaces the older one's facts. */
		memset(q->ifname, 0, sizeof(q->ifname));
		memset(q->dscp_prio, 0, sizeof(q->dscp_prio));
		q->pfc_known = false;
		q->pfc_en = q->pfc_cap = 0;
	}
	while ((r = next_attr(a, alen, &off, &type, &data, &dlen)) > 0) {
		if (type != DCB_ATTR_IFNAME && type != DCB_ATTR_IEEE && type != DCB_ATTR_DCBX)
			continue;
		if (seen_twice(&seen, type))
			return refuse(err, "DCB attribute %u given twice", type);
		if (type == DCB_ATTR_DCBX) {
			if (dlen != 1)
				return refuse(err, "DCB_ATTR_DCBX of %zu bytes, not 1", dlen);
			q->dcbx = data[0];
			dcbx = true;
		} else if (d.cmd != DCB_CMD_IEEE_GET) {
			continue; /* a DCBX answer carries nothing else we read */
		} else if (type == DCB_ATTR_IFNAME) {
			r = decode_ifname(data, dlen, q, err);
		} else {
			r = decode_ieee(data, dlen, q, err);
			ieee = true;
		}
		if (r < 0)
			return r;
	}
	if (r < 0)
		return refuse(err, "the attributes of a RTM_GETDCB message are cut short");
	if (d.cmd == DCB_CMD_GDCBX && !dcbx)
		return refuse(err, "a DCBX answer without DCB_ATTR_DCBX");
	if (d.cmd == DCB_CMD_IEEE_GET)
		q->state = ieee ? HPN_QOS_DCB : HPN_QOS_NO_DCB;
	return 0;
}

/* NLMSG_ERROR: an ACK, or the kernel's error for our request. */
static int decode_error(const uint8_t *m, size_t mlen, struct hpn_qos *q, struct hpn_err *err)
{
	struct nlmsgerr e;

	/* NETLINK_CAP_ACK: the error and our request's header, then extended ACK TLVs. */
	if (mlen < NLMSG_HDRLEN + sizeof(e))
		return refuse(err, "an NLMSG_ERROR of %zu bytes", mlen);
	memcpy(&e, m + NLMSG_HDRLEN, sizeof(e));
	if (e.error == 0)
		return 0;
	if (e.error > 0 || e.error < -4095)
		return refuse(err, "an NLMSG_ERROR with error %d", e.error);
	return answer_error(e.error, NULL, q, err);
}

int hpn_qos_decode(const void *nlmsg, size_t len, struct hpn_qos *ret, struct hpn_err *err)
{
	const uint8_t *p = nlmsg;
	struct hpn_qos q = *ret;
	size_t off = 0;

	if (!len)
		return refuse(err, "no message");
	while (off < len) {
		struct nlmsghdr h;
		int r;

		if (len - off < NLMSG_HDRLEN)
			return refuse(err, "%zu bytes after the last message", len - off);
		memcpy(&h, p + off, sizeof(h));
		if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > len - off)
			return refuse(err, "a message of %u bytes where %zu are left", h.nlmsg_len,
				      len - off);
		if (h.nlmsg_type == NLMSG_ERROR)
			r = decode_error(p + off, h.nlmsg_len, &q, err);
		else if (h.nlmsg_type == RTM_GETDCB)
			r = decode_dcb(p + off, h.nlmsg_len, &q, err);
		else
			r = refuse(err, "a message of type %u", h.nlmsg_type);
		if (r < 0)
			return r;
		off += NLMSG_ALIGN((size_t)h.nlmsg_len);
	}
	q.n_dscp = 0;
	for (size_t d = 0; d < HPN_QOS_DSCPS; d++)
		q.n_dscp += q.dscp_prio[d] != 0;
	*ret = q;
	return 0;
}

/* ---- the socket path --------------------------------------------------------- */

struct reply {
	struct hpn_qos *q;
	struct hpn_err err; /* the decoder's, kept apart from the kernel's errors */
	int r;
};

static int on_reply(struct nl_msg *msg, void *arg)
{
	const struct nlmsghdr *h = nlmsg_hdr(msg);
	struct reply *c = arg;

	c->r = hpn_qos_decode(h, h->nlmsg_len, c->q, &c->err);
	return c->r;
}

/* One request, cmd for ifname, and its answer decoded into q. */
static int ask(hpn_qos_talk talk, void *ctx, const char *ifname, uint8_t cmd, struct hpn_qos *q,
	       struct hpn_err *err)
{
	const struct dcbmsg d = { .dcb_family = AF_UNSPEC, .cmd = cmd };
	_cleanup_nl_msg_ struct nl_msg *m = hpn_nl_msg(RTM_GETDCB, NLM_F_REQUEST, &d, sizeof(d));
	struct reply c = { .q = q };
	char extack[HPN_EXTACK_LEN] = "";
	int r;

	if (!m || nla_put_string(m, DCB_ATTR_IFNAME, ifname) < 0)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "DCB request: out of memory");
	r = talk(ctx, m, on_reply, &c, extack);
	if (c.r < 0)
		return hpn_err_set(err, c.err.code, c.r, "%s", c.err.msg);
	return r < 0 ? answer_error(r, extack, q, err) : 0;
}

static int talk_socket(void *ctx, struct nl_msg *req, hpn_nl_cb cb, void *arg,
		       char extack[HPN_EXTACK_LEN])
{
	return hpn_nl_talk(ctx, req, cb, arg, extack);
}

int hpn_qos_read_via(hpn_qos_talk talk, void *ctx, const char *sysfs_root, const char *ifname,
		     struct hpn_qos *ret, struct hpn_err *err)
{
	struct hpn_qos q;
	int r;

	if (!ifname || !hpn_valid_ifname(ifname))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "QoS: \"%s\" is not an interface name", ifname ? ifname : "");
	hpn_qos_init(&q);
	r = ask(talk, ctx, ifname, DCB_CMD_IEEE_GET, &q, err);
	if (r == 0 && q.state == HPN_QOS_UNREAD)
		r = refuse(err, "the kernel sent no answer to DCB_CMD_IEEE_GET");
	/* dcb_doit looks the netdev up by the name we sent, and the answer names it. */
	if (r == 0 && q.state == HPN_QOS_DCB && strcmp(q.ifname, ifname))
		r = refuse(err, "an answer about \"%s\"", q.ifname);
	if (r == 0 && q.state == HPN_QOS_DCB)
		r = ask(talk, ctx, ifname, DCB_CMD_GDCBX, &q, err);
	if (r < 0) {
		hpn_err_prefix(err, "QoS of \"%s\"", ifname);
		return r;
	}
	hpn_qos_read_ecn(sysfs_root, ifname, &q);
	/* No DCB: the name asked about (the answer named none). */
	if (!q.ifname[0])
		snprintf(q.ifname, sizeof(q.ifname), "%s", ifname);
	*ret = q;
	return 0;
}

int hpn_qos_read(struct nl_sock *rt, const char *sysfs_root, const char *ifname,
		 struct hpn_qos *ret, struct hpn_err *err)
{
	_cleanup_nl_sock_ struct nl_sock *own = NULL;

	if (!rt) {
		int r = hpn_nl_open(NETLINK_ROUTE, &own);

		if (r < 0)
			return hpn_err_set(err, HPN_E_NETLINK, r, "QoS: netlink socket: %s",
					   strerror(-r));
		rt = own;
	}
	return hpn_qos_read_via(talk_socket, rt, sysfs_root, ifname, ret, err);
}

/* ---- sysfs ------------------------------------------------------------------- */

/*
 * <root>/class/net/<if>/ecn/<proto>/enable/<p>, p = 0-7, each "0" or "1"
 * (MLNX_OFED's and DOCA's mlx5 layout; proto roce_np, the notification
 * point, or roce_rp, the reaction point). false, *mask untouched, when the
 * directory is absent or any file is missing or holds something else.
 */
static bool read_ecn(const char *root, const char *ifname, const char *proto, uint8_t *mask)
{
	uint8_t m = 0;

	if (!hpn_sysfs_exists("%s/class/net/%s/ecn/%s/enable", root, ifname, proto))
		return false;
	for (int p = 0; p < HPN_QOS_PRIOS; p++) {
		char v[8];

		if (hpn_sysfs_read(v, sizeof(v), "%s/class/net/%s/ecn/%s/enable/%d", root, ifname,
				   proto, p) < 0)
			return false;
		if (!strcmp(v, "1"))
			m |= (uint8_t)(1u << p);
		else if (strcmp(v, "0"))
			return false;
	}
	*mask = m;
	return true;
}

void hpn_qos_read_ecn(const char *sysfs_root, const char *ifname, struct hpn_qos *q)
{
	const char *root = sysfs_root ? sysfs_root : HPN_SYSFS_ROOT;

	if (!ifname || !hpn_valid_ifname(ifname))
		return;
	q->ecn_np_known = read_ecn(root, ifname, "roce_np", &q->ecn_np);
	q->ecn_rp_known = read_ecn(root, ifname, "roce_rp", &q->ecn_rp);
}

/* ---- the rules ---------------------------------------------------------------- */

enum hpn_qos_dcbx hpn_qos_dcbx_mode(const struct hpn_qos *q)
{
	bool host, lld;

	if (q->dcbx < 0)
		return HPN_QOS_DCBX_UNKNOWN;
	host = q->dcbx & DCB_CAP_DCBX_HOST;
	lld = q->dcbx & DCB_CAP_DCBX_LLD_MANAGED;
	if (host != lld)
		return host ? HPN_QOS_DCBX_HOST : HPN_QOS_DCBX_FIRMWARE;
	/*
	 * mlx5 says firmware mode with its versions and no HOST bit (0x0c:
	 * mlx5e_dcbnl_initialize, mlx5e_dcbnl_setdcbx); no version bit, or both
	 * HOST and LLD_MANAGED, says nothing we can trust.
	 */
	if (!host && (q->dcbx & (DCB_CAP_DCBX_VER_CEE | DCB_CAP_DCBX_VER_IEEE)))
		return HPN_QOS_DCBX_FIRMWARE;
	return HPN_QOS_DCBX_UNKNOWN;
}

int hpn_qos_lossless_prio(const struct hpn_qos *q)
{
	if (q->state != HPN_QOS_DCB || !q->pfc_known || !q->pfc_en)
		return -ENOENT;
	if (q->pfc_en & (q->pfc_en - 1))
		return -ENOTUNIQ;
	return __builtin_ctz(q->pfc_en);
}

int hpn_qos_tc_for_dscp(int dscp)
{
	return dscp >= 0 && dscp < HPN_QOS_DSCPS ? dscp << 2 : -EINVAL;
}

bool hpn_qos_tc_lossless(const struct hpn_qos *q, int tc, int sl)
{
	uint8_t prios;

	if (q->state != HPN_QOS_DCB || !q->pfc_known || tc < 0 || tc > 255 || sl < 0 || sl > 15)
		return false;
	if (hpn_qos_trust_dscp(q))
		prios = q->dscp_prio[tc >> 2];
	else
		prios = (uint8_t)(1u << (sl & 7));
	return prios && !(prios & (uint8_t)~q->pfc_en);
}
