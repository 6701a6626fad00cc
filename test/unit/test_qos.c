// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/qos.c: a NIC's RoCE QoS from the kernel's DCB netlink
 * answers and the driver's ECN sysfs. No device on the machines here (nor in
 * the VM) implements DCB, so the answers are built byte by byte below, in the
 * layout the kernel writes them (net/dcb/dcbnl.c, include/uapi/linux/dcbnl.h,
 * host byte order as netlink is): the decoder is tested on them, and the
 * socket path (hpn_qos_read) is driven through a stand-in for the kernel
 * that checks each request it is sent and answers with them.
 *
 * The doctor's renderers are given decoded answers too (no doctor run can
 * decode one here).
 *
 * unit-qos --seeds DIR writes the answers as files instead: they are the seed
 * corpus of the fuzz target qos (test/fuzz/corpus/qos/), checked here to be
 * what this file builds.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/dcbnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "doctor.h"
#include "nccl.h"
#include "qos.h"
#include "tmpdir.h"
#include "util.h"

/* ---- the kernel's answers, byte by byte ------------------------------------------ */

#define SEL_DSCP_MAX IEEE_8021QAZ_APP_SEL_DSCP

struct msg {
	uint8_t b[4096];
	size_t len;
	size_t start;	/* of the message being built */
	size_t nest[4]; /* open nests' headers */
	int depth;
};

static void put(struct msg *m, const void *p, size_t n)
{
	if (m->len + n > sizeof(m->b))
		abort();
	memcpy(m->b + m->len, p, n);
	m->len += n;
}

static void put_u8(struct msg *m, uint8_t v)
{
	put(m, &v, 1);
}

static void put_u16(struct msg *m, uint16_t v)
{
	put(m, &v, 2);
}

static void put_u32(struct msg *m, uint32_t v)
{
	put(m, &v, 4);
}

static void put_zero(struct msg *m, size_t n)
{
	while (n--)
		put_u8(m, 0);
}

/* NLMSG_ALIGNTO and NLA_ALIGNTO are both 4. */
static void align4(struct msg *m)
{
	put_zero(m, (4 - m->len % 4) % 4);
}

static void set_u16(struct msg *m, size_t at, uint16_t v)
{
	memcpy(m->b + at, &v, 2);
}

static void set_u32(struct msg *m, size_t at, uint32_t v)
{
	memcpy(m->b + at, &v, 4);
}

/* struct nlmsghdr: len u32, type u16, flags u16, seq u32, pid u32 (16 bytes). */
static void msg_head(struct msg *m, uint16_t type, uint16_t flags)
{
	m->start = m->len;
	put_u32(m, 0); /* set by msg_end */
	put_u16(m, type);
	put_u16(m, flags);
	put_u32(m, 7); /* seq */
	put_u32(m, 0); /* pid: the kernel's */
}

/* dcbnl_newmsg: RTM_GETDCB, struct dcbmsg {family u8 (AF_UNSPEC), cmd u8, pad u16}. */
static void dcb_begin(struct msg *m, uint8_t cmd)
{
	msg_head(m, RTM_GETDCB, NLM_F_REQUEST | NLM_F_ACK); /* dcb_doit copies the request's */
	put_u8(m, 0);
	put_u8(m, cmd);
	put_u16(m, 0);
}

static void msg_end(struct msg *m)
{
	set_u32(m, m->start, (uint32_t)(m->len - m->start));
	align4(m);
}

/* struct nlattr: len u16 (header and payload, not the padding), type u16. */
static void attr(struct msg *m, uint16_t type, const void *data, size_t n)
{
	put_u16(m, (uint16_t)(4 + n));
	put_u16(m, type);
	put(m, data, n);
	align4(m);
}

static void nest_begin(struct msg *m, uint16_t type)
{
	m->nest[m->depth++] = m->len;
	put_u16(m, 0);
	put_u16(m, type); /* nla_nest_start_noflag: no NLA_F_NESTED */
}

static void nest_end(struct msg *m)
{
	size_t at = m->nest[--m->depth];

	set_u16(m, at, (uint16_t)(m->len - at));
}

static void attr_ifname(struct msg *m, const char *name)
{
	attr(m, DCB_ATTR_IFNAME, name, strlen(name) + 1);
}

/*
 * struct ieee_pfc, 136 bytes: pfc_cap u8, pfc_en u8, mbc u8, a pad byte,
 * delay u16, two pad bytes, requests u64[8], indications u64[8].
 */
static void attr_pfc(struct msg *m, uint8_t cap, uint8_t en)
{
	uint8_t pfc[136] = { cap, en };

	pfc[8] = 42; /* requests[0]: mlx5 reports its pause counters here */
	attr(m, DCB_ATTR_IEEE_PFC, pfc, sizeof(pfc));
}

/*
 * struct dcb_app: selector u8, priority u8, protocol u16, in the attribute
 * type dcbnl_app_attr_type_get gives its selector: DCB_ATTR_IEEE_APP (1) for
 * the IEEE ones (1-5), DCB_ATTR_DCB_APP (2) for PCP (255, newer kernels),
 * else 0 (a CEE entry of selector 0 that dcb_setapp filed).
 */
static void attr_app(struct msg *m, uint8_t selector, uint8_t prio, uint16_t protocol)
{
	uint16_t type = selector == 255				    ? 2
			: selector >= 1 && selector <= SEL_DSCP_MAX ? DCB_ATTR_IEEE_APP
								    : 0;
	uint8_t app[4];

	app[0] = selector;
	app[1] = prio;
	memcpy(app + 2, &protocol, 2);
	attr(m, type, app, sizeof(app));
}

/* NLMSG_ERROR: struct nlmsgerr {error s32, our request's nlmsghdr} (NETLINK_CAP_ACK). */
static void error_msg(struct msg *m, int32_t error)
{
	msg_head(m, NLMSG_ERROR, NLM_F_CAPPED); /* netlink_ack: our request's header only */
	put(m, &error, 4);
	put_u32(m, 32); /* the request for "veth0": its length, type, flags, seq, pid */
	put_u16(m, RTM_GETDCB);
	put_u16(m, NLM_F_REQUEST | NLM_F_ACK);
	put_u32(m, 7);
	put_u32(m, 4242);
	msg_end(m);
}

#define NO_DCBX (-1)

/*
 * dcbnl_ieee_fill's answer: the name, the IEEE nest (ETS, PFC, the APP table
 * of apps[0..n) as {selector, priority, protocol}, the empty rewrite table),
 * DCB_ATTR_DCBX unless dcbx is NO_DCBX.
 */
static void ieee_answer(struct msg *m, const char *ifname, uint8_t pfc_en,
			const uint16_t (*apps)[3], size_t n, int dcbx)
{
	uint8_t ets[59] = { 0 }; /* struct ieee_ets: walked over, never read */

	dcb_begin(m, DCB_CMD_IEEE_GET);
	attr_ifname(m, ifname);
	nest_begin(m, DCB_ATTR_IEEE);
	ets[1] = 8;
	attr(m, DCB_ATTR_IEEE_ETS, ets, sizeof(ets));
	attr_pfc(m, 8, pfc_en);
	nest_begin(m, DCB_ATTR_IEEE_APP_TABLE);
	for (size_t i = 0; i < n; i++)
		attr_app(m, (uint8_t)apps[i][0], (uint8_t)apps[i][1], apps[i][2]);
	nest_end(m);
	nest_begin(m, 12 /* DCB_ATTR_DCB_REWR_TABLE (6.4), nla_nest_start */ | NLA_F_NESTED);
	nest_end(m);
	nest_end(m);
	if (dcbx != NO_DCBX) {
		uint8_t v = (uint8_t)dcbx;

		attr(m, DCB_ATTR_DCBX, &v, 1);
	}
	msg_end(m);
}

static void gdcbx_answer(struct msg *m, uint8_t dcbx)
{
	dcb_begin(m, DCB_CMD_GDCBX);
	attr(m, DCB_ATTR_DCBX, &dcbx, 1);
	msg_end(m);
}

#define SEL_DSCP       IEEE_8021QAZ_APP_SEL_DSCP
#define DCBX_MLX5_HOST (DCB_CAP_DCBX_HOST | DCB_CAP_DCBX_VER_CEE | DCB_CAP_DCBX_VER_IEEE)
#define DCBX_MLX5_FW   (DCB_CAP_DCBX_VER_CEE | DCB_CAP_DCBX_VER_IEEE)

/*
 * mlx5 in trust DSCP: the driver puts all 64 DSCP entries in the table
 * (mlx5e_dcbnl_dscp_app), the firmware's default map DSCP >> 3 (26 -> 3,
 * 34 -> 4), one more entry an ETHERTYPE one (default priority 0) the kernel
 * keeps beside them. PFC on 3: the common RoCE setup.
 */
static void mlx5_common(struct msg *m, uint8_t dcbx)
{
	uint16_t apps[65][3];

	for (int d = 0; d < 64; d++) {
		apps[d][0] = SEL_DSCP;
		apps[d][1] = (uint16_t)(d >> 3);
		apps[d][2] = (uint16_t)d;
	}
	apps[64][0] = IEEE_8021QAZ_APP_SEL_ETHERTYPE;
	apps[64][1] = 0;
	apps[64][2] = 0;
	ieee_answer(m, "ens1f0np0", 1 << 3, apps, 65, dcbx);
}

/* The lossy case: PFC on 3, DSCP 26 -> 3 but 34 -> 4 (NCCL_IB_TC=136 lands on 4). */
static void lossy_as(struct msg *m, const char *ifname)
{
	static const uint16_t apps[][3] = { { SEL_DSCP, 3, 26 },
					    { SEL_DSCP, 4, 34 },
					    { SEL_DSCP, 6, 48 } };

	ieee_answer(m, ifname, 1 << 3, apps, 3, DCBX_MLX5_HOST);
}

static void lossy(struct msg *m)
{
	lossy_as(m, "ens1f0np0");
}

/* Trust PCP: mlx5 keeps no DSCP entry; PFC on 3. */
static void pcp(struct msg *m)
{
	ieee_answer(m, "ens1f0np0", 1 << 3, NULL, 0, DCBX_MLX5_HOST);
}

/* ---- the decoder ----------------------------------------------------------------- */

static int decode(const struct msg *m, struct hpn_qos *q, struct hpn_err *e)
{
	hpn_qos_init(q);
	memset(e, 0, sizeof(*e));
	return hpn_qos_decode(m->b, m->len, q, e);
}

/* What build writes, decoded from scratch: it must be accepted. */
static struct hpn_qos decoded(void (*build)(struct msg *))
{
	struct msg m = { .len = 0 };
	struct hpn_qos q;
	struct hpn_err e;

	build(&m);
	CHECK_INT_EQ(decode(&m, &q, &e), 0);
	CHECK_INT_EQ(e.code, 0);
	return q;
}

/* mlx5_common with host DCBX, and the ACK that follows (NLM_F_ACK). */
static void mlx5_acked(struct msg *m)
{
	mlx5_common(m, DCBX_MLX5_HOST);
	error_msg(m, 0);
}

static void test_common(void)
{
	struct hpn_qos q = decoded(mlx5_acked);

	CHECK_INT_EQ(q.state, HPN_QOS_DCB);
	CHECK_STR_EQ(q.ifname, "ens1f0np0");
	CHECK(q.pfc_known);
	CHECK_INT_EQ(q.pfc_en, 0x08);
	CHECK_INT_EQ(q.pfc_cap, 8);
	CHECK_INT_EQ(q.n_dscp, 64);
	CHECK(hpn_qos_trust_dscp(&q));
	CHECK_INT_EQ(q.dscp_prio[26], 1 << 3);
	CHECK_INT_EQ(q.dscp_prio[34], 1 << 4);
	CHECK_INT_EQ(q.dscp_prio[63], 1 << 7);
	CHECK_INT_EQ(q.dcbx, DCBX_MLX5_HOST);
	CHECK_INT_EQ(hpn_qos_dcbx_mode(&q), HPN_QOS_DCBX_HOST);
	CHECK_INT_EQ(hpn_qos_lossless_prio(&q), 3);
	/* NCCL_IB_TC=104 (26 << 2) and 106 (its ECT(0) bit too) ride priority 3. */
	CHECK(hpn_qos_tc_lossless(&q, hpn_qos_tc_for_dscp(26), 0));
	CHECK(hpn_qos_tc_lossless(&q, 106, 0));
	CHECK(hpn_qos_tc_lossless(&q, 106, 5)); /* trust DSCP: the SL does not matter */
	CHECK(!hpn_qos_tc_lossless(&q, 136, 0));
	CHECK(!hpn_qos_tc_lossless(&q, 136, 3));
	CHECK(!hpn_qos_tc_lossless(&q, 256, 0));
	CHECK(!hpn_qos_tc_lossless(&q, -1, 0));
	CHECK(!hpn_qos_tc_lossless(&q, 104, 16));
	/* ECN is sysfs's: the decoder leaves it unknown. */
	CHECK(!q.ecn_np_known && !q.ecn_rp_known);
}

static void test_lossy(void)
{
	struct hpn_qos q = decoded(lossy);

	CHECK_INT_EQ(q.state, HPN_QOS_DCB);
	CHECK_INT_EQ(q.n_dscp, 3);
	CHECK(hpn_qos_trust_dscp(&q));
	CHECK_INT_EQ(hpn_qos_lossless_prio(&q), 3);
	/* GU8TF's NCCL_IB_TC=136 (DSCP 34): priority 4, no PFC, whatever NCCL_IB_SL=5 says. */
	CHECK_INT_EQ(hpn_qos_tc_for_dscp(34), 136);
	CHECK(!hpn_qos_tc_lossless(&q, 136, 5));
	CHECK(hpn_qos_tc_lossless(&q, 104, 5));
	/* DSCP 10 has no entry: where the NIC puts it is not said over DCB. */
	CHECK(!hpn_qos_tc_lossless(&q, hpn_qos_tc_for_dscp(10), 3));
	CHECK(!hpn_qos_tc_lossless(&q, hpn_qos_tc_for_dscp(48), 6)); /* CNPs: lossy here too */
}

static void test_pcp(void)
{
	struct hpn_qos q = decoded(pcp);

	CHECK_INT_EQ(q.state, HPN_QOS_DCB);
	CHECK_INT_EQ(q.n_dscp, 0);
	CHECK(!hpn_qos_trust_dscp(&q));
	/* mlx5 RoCE: the QP's Ethernet priority is sl & 7; the DSCP does not classify. */
	CHECK(hpn_qos_tc_lossless(&q, 136, 3));
	CHECK(hpn_qos_tc_lossless(&q, 0, 11));
	CHECK(!hpn_qos_tc_lossless(&q, 104, 0)); /* NCCL's default SL 0: priority 0, lossy */
	CHECK(!hpn_qos_tc_lossless(&q, 104, 5));
}

/*
 * One DSCP in two priorities (the generic table allows it): lossless only if
 * both have PFC. Beside them a PCP entry and a CEE one, which are not DSCP's.
 */
static void test_two_prios(void)
{
	static const uint16_t apps[][3] = {
		{ SEL_DSCP, 3, 26 }, { SEL_DSCP, 4, 26 }, { 255, 5, 3 }, { 0, 0xff, 0x8906 }
	};
	struct msg m = { .len = 0 };
	struct hpn_qos q;
	struct hpn_err e;

	ieee_answer(&m, "eth3", 1 << 3, apps, 4, NO_DCBX);
	CHECK_INT_EQ(decode(&m, &q, &e), 0);
	CHECK_INT_EQ(q.n_dscp, 1);
	CHECK_INT_EQ(q.dscp_prio[26], (1 << 3) | (1 << 4));
	CHECK(!hpn_qos_tc_lossless(&q, 104, 3));
	m.len = 0;
	ieee_answer(&m, "eth3", (1 << 3) | (1 << 4), apps, 4, NO_DCBX);
	CHECK_INT_EQ(decode(&m, &q, &e), 0);
	CHECK(hpn_qos_tc_lossless(&q, 104, 3));
	CHECK_INT_EQ(hpn_qos_lossless_prio(&q), -ENOTUNIQ);
	CHECK_INT_EQ(q.dcbx, -1);
	CHECK_INT_EQ(hpn_qos_dcbx_mode(&q), HPN_QOS_DCBX_UNKNOWN);
}

static void test_no_dcb(void)
{
	struct msg m = { .len = 0 };
	struct hpn_qos q;
	struct hpn_err e;

	/* What the kernel answers for a veth: dcb_doit's -EOPNOTSUPP. */
	error_msg(&m, -EOPNOTSUPP);
	CHECK_INT_EQ(decode(&m, &q, &e), 0);
	CHECK_INT_EQ(q.state, HPN_QOS_NO_DCB);
	CHECK_STR_EQ(hpn_qos_state_name(q.state), "none");
	CHECK_INT_EQ(e.code, 0);
	CHECK_INT_EQ(hpn_qos_lossless_prio(&q), -ENOENT);
	CHECK(!hpn_qos_tc_lossless(&q, 104, 3));
	/* An IEEE answer without the IEEE nest: no DCB attributes, the same verdict. */
	m.len = 0;
	dcb_begin(&m, DCB_CMD_IEEE_GET);
	attr_ifname(&m, "eth0");
	msg_end(&m);
	CHECK_INT_EQ(decode(&m, &q, &e), 0);
	CHECK_INT_EQ(q.state, HPN_QOS_NO_DCB);
	/* ENODEV: an error, code 100. */
	m.len = 0;
	error_msg(&m, -ENODEV);
	CHECK_INT_EQ(decode(&m, &q, &e), -ENODEV);
	CHECK_INT_EQ(e.code, 100);
	CHECK_STR_HAS(e.msg, "no netdev of that name");
	CHECK_INT_EQ(q.state, HPN_QOS_UNREAD);
}

static void test_dcbx(void)
{
	struct msg m = { .len = 0 };
	struct hpn_qos q;
	struct hpn_err e;

	/* mlx5 with its firmware's DCBX (mlx5e_dcbnl_initialize): no HOST bit. */
	mlx5_common(&m, DCBX_MLX5_FW);
	CHECK_INT_EQ(decode(&m, &q, &e), 0);
	CHECK_INT_EQ(hpn_qos_dcbx_mode(&q), HPN_QOS_DCBX_FIRMWARE);
	CHECK_STR_EQ(hpn_qos_dcbx_name(hpn_qos_dcbx_mode(&q)), "firmware");
	/* The DCBX answer after it: its value wins; then an ACK. */
	m.len = 0;
	gdcbx_answer(&m, DCB_CAP_DCBX_LLD_MANAGED | DCB_CAP_DCBX_VER_IEEE);
	error_msg(&m, 0);
	CHECK_INT_EQ(hpn_qos_decode(m.b, m.len, &q, &e), 0);
	CHECK_INT_EQ(q.state, HPN_QOS_DCB); /* the IEEE facts stay */
	CHECK_INT_EQ(q.n_dscp, 64);
	CHECK_INT_EQ(hpn_qos_dcbx_mode(&q), HPN_QOS_DCBX_FIRMWARE);
	/* A driver without getdcbx: GDCBX's -EOPNOTSUPP after an IEEE answer is not "no DCB". */
	m.len = 0;
	error_msg(&m, -EOPNOTSUPP);
	CHECK_INT_EQ(hpn_qos_decode(m.b, m.len, &q, &e), 0);
	CHECK_INT_EQ(q.state, HPN_QOS_DCB);
	q.dcbx = DCBX_MLX5_HOST;
	CHECK_INT_EQ(hpn_qos_dcbx_mode(&q), HPN_QOS_DCBX_HOST);
	q.dcbx = DCB_CAP_DCBX_HOST | DCB_CAP_DCBX_LLD_MANAGED;
	CHECK_INT_EQ(hpn_qos_dcbx_mode(&q), HPN_QOS_DCBX_UNKNOWN);
	q.dcbx = 0;
	CHECK_INT_EQ(hpn_qos_dcbx_mode(&q), HPN_QOS_DCBX_UNKNOWN);
}

static void test_helpers(void)
{
	struct hpn_qos q;

	CHECK_INT_EQ(hpn_qos_tc_for_dscp(0), 0);
	CHECK_INT_EQ(hpn_qos_tc_for_dscp(26), 104);
	CHECK_INT_EQ(hpn_qos_tc_for_dscp(63), 252);
	CHECK_INT_EQ(hpn_qos_tc_for_dscp(64), -EINVAL);
	CHECK_INT_EQ(hpn_qos_tc_for_dscp(-1), -EINVAL);
	hpn_qos_init(&q);
	CHECK_INT_EQ(q.dcbx, -1);
	CHECK_STR_EQ(hpn_qos_state_name(q.state), "unread");
	CHECK_INT_EQ(hpn_qos_lossless_prio(&q), -ENOENT);
	q.state = HPN_QOS_DCB;
	q.pfc_en = 1 << 3; /* PFC facts unknown: nothing is lossless */
	CHECK_INT_EQ(hpn_qos_lossless_prio(&q), -ENOENT);
	CHECK(!hpn_qos_tc_lossless(&q, 0, 3));
	q.pfc_known = true;
	CHECK_INT_EQ(hpn_qos_lossless_prio(&q), 3);
	q.pfc_en = 0;
	CHECK_INT_EQ(hpn_qos_lossless_prio(&q), -ENOENT);
}

/* Each malformed answer: -EPROTO, code 102, words naming the fault, ret untouched. */
static void refused(const struct msg *m, const char *words, int line)
{
	struct hpn_qos q, before;
	struct hpn_err e = { 0 };
	int r;

	hpn_qos_init(&q);
	q.ecn_np_known = true; /* something for "untouched" to see */
	before = q;
	r = hpn_qos_decode(m->b, m->len, &q, &e);
	if (r != -EPROTO || !strstr(e.msg, words))
		fprintf(stderr, "\tline %d: r=%d msg=\"%s\"\n", line, r, e.msg);
	CHECK_INT_EQ(r, -EPROTO);
	CHECK_INT_EQ(e.code, 102);
	CHECK_STR_HAS(e.msg, "DCB answer refused: ");
	CHECK_STR_HAS(e.msg, words);
	CHECK(!memcmp(&q, &before, sizeof(q)));
}

#define REFUSED(m, words) refused(m, words, __LINE__)

/* m: a message of command cmd with one attribute, alone. */
static void one_attr(struct msg *m, uint8_t cmd, uint16_t type, const void *data, size_t n)
{
	m->len = 0;
	dcb_begin(m, cmd);
	attr(m, type, data, n);
	msg_end(m);
}

static void test_malformed(void)
{
	static const char *const bad_names[] = { "a-name-of-16-chr", "../eth0", "" };
	static const uint16_t dscp64[][3] = { { SEL_DSCP, 3, 64 } };
	static const uint16_t prio8[][3] = { { SEL_DSCP, 8, 26 } };
	static const uint16_t twice[][3] = { { SEL_DSCP, 3, 26 }, { SEL_DSCP, 3, 26 } };
	struct msg m = { .len = 0 }, whole = { .len = 0 };
	uint8_t v = 1;

	REFUSED(&m, "no message");
	mlx5_common(&whole, DCBX_MLX5_HOST);
	/* Cut anywhere: inside the header, an attribute, the nest, the last padding aside. */
	for (size_t cut = 1; cut < whole.len - 3; cut += 7) {
		struct msg c = whole;

		c.len = cut;
		REFUSED(&c, cut < 16 ? "bytes after the last message" : "where");
	}
	/* The message says it is whole; the IEEE nest inside it runs past its end. */
	m = whole;
	set_u32(&m, 0, 60);
	m.len = 60;
	REFUSED(&m, "cut short");
	/* The IEEE nest claims more than the message holds. */
	m.len = 0;
	dcb_begin(&m, DCB_CMD_IEEE_GET);
	put_u16(&m, 200);
	put_u16(&m, DCB_ATTR_IEEE);
	put_zero(&m, 8);
	msg_end(&m);
	REFUSED(&m, "cut short");
	/* PFC of the wrong size. */
	m.len = 0;
	dcb_begin(&m, DCB_CMD_IEEE_GET);
	nest_begin(&m, DCB_ATTR_IEEE);
	attr(&m, DCB_ATTR_IEEE_PFC, "\x08\x08", 2);
	nest_end(&m);
	msg_end(&m);
	REFUSED(&m, "DCB_ATTR_IEEE_PFC of 2 bytes, not 136");
	/* A short APP entry. */
	m.len = 0;
	dcb_begin(&m, DCB_CMD_IEEE_GET);
	nest_begin(&m, DCB_ATTR_IEEE);
	nest_begin(&m, DCB_ATTR_IEEE_APP_TABLE);
	attr(&m, DCB_ATTR_IEEE_APP, "\x05\x03\x1a", 3);
	nest_end(&m);
	nest_end(&m);
	msg_end(&m);
	REFUSED(&m, "an APP entry of 3 bytes, not 4");
	m.len = 0;
	ieee_answer(&m, "eth0", 8, dscp64, 1, NO_DCBX);
	REFUSED(&m, "DSCP 64 (DSCP is 0-63)");
	m.len = 0;
	ieee_answer(&m, "eth0", 8, prio8, 1, NO_DCBX);
	REFUSED(&m, "priority 8 (priorities are 0-7)");
	m.len = 0;
	ieee_answer(&m, "eth0", 8, twice, 2, NO_DCBX);
	REFUSED(&m, "DSCP 26 -> priority 3 given twice");
	/* Two PFC attributes in one nest; two DCBX attributes in one message. */
	m.len = 0;
	dcb_begin(&m, DCB_CMD_IEEE_GET);
	nest_begin(&m, DCB_ATTR_IEEE);
	attr_pfc(&m, 8, 8);
	attr_pfc(&m, 8, 16);
	nest_end(&m);
	msg_end(&m);
	REFUSED(&m, "IEEE attribute 2 given twice");
	m.len = 0;
	dcb_begin(&m, DCB_CMD_GDCBX);
	attr(&m, DCB_ATTR_DCBX, &v, 1);
	attr(&m, DCB_ATTR_DCBX, &v, 1);
	msg_end(&m);
	REFUSED(&m, "attribute 14 given twice");
	one_attr(&m, DCB_CMD_GDCBX, DCB_ATTR_DCBX, "\x01\x00", 2);
	REFUSED(&m, "DCB_ATTR_DCBX of 2 bytes, not 1");
	one_attr(&m, DCB_CMD_GDCBX, 99 /* not one we read */, "", 0);
	REFUSED(&m, "without DCB_ATTR_DCBX");
	/* The name: unterminated, too long, not a name. */
	one_attr(&m, DCB_CMD_IEEE_GET, DCB_ATTR_IFNAME, "eth0", 4);
	REFUSED(&m, "DCB_ATTR_IFNAME is not an interface name");
	for (size_t i = 0; i < HPN_ARRAY_SIZE(bad_names); i++) {
		one_attr(&m, DCB_CMD_IEEE_GET, DCB_ATTR_IFNAME, bad_names[i],
			 strlen(bad_names[i]) + 1);
		REFUSED(&m, "DCB_ATTR_IFNAME is not an interface name");
	}
	/* Headers the kernel never writes for these requests. */
	m = whole;
	m.b[16] = 2; /* dcb_family AF_INET */
	REFUSED(&m, "dcb_family 2, not AF_UNSPEC");
	m = whole;
	m.b[17] = DCB_CMD_GSTATE;
	REFUSED(&m, "DCB command 1, which we never send");
	m = whole;
	set_u16(&m, 4, RTM_NEWLINK);
	REFUSED(&m, "a message of type 16");
	m.len = 0;
	error_msg(&m, 5);
	REFUSED(&m, "an NLMSG_ERROR with error 5");
	m.len = 0;
	msg_head(&m, NLMSG_ERROR, 0);
	put_u32(&m, (uint32_t)-EOPNOTSUPP);
	msg_end(&m);
	REFUSED(&m, "an NLMSG_ERROR of 20 bytes");
	m.len = 0;
	msg_head(&m, RTM_GETDCB, 0);
	put_u16(&m, 0);
	msg_end(&m);
	REFUSED(&m, "a RTM_GETDCB message of 18 bytes");
	/* Whole, then two stray bytes. */
	m = whole;
	put_u16(&m, 0);
	REFUSED(&m, "2 bytes after the last message");
}

/* ---- hpn_qos_read, with a stand-in for the kernel ------------------------------------ */

/*
 * What stands in: the kernel (it receives our request and writes answers) and
 * hpn_nl_talk's loop over the socket (each answer message to cb until the
 * ACK; the kernel's NLMSG_ERROR as the return value, with its extended ACK
 * text). The request checked is the message hpn_qos_read built, before libnl
 * fills in the sequence number and port: that part is hpn_nl_talk's, run by
 * every other netlink user of the tree and, against the real kernel, by
 * netns.qos on a veth.
 */
struct kernel {
	const char *ifname; /* the name each request must carry */
	int n_asked;
	uint8_t cmds[4];       /* the commands asked, in order */
	struct msg answers[4]; /* the answer to the n-th request */
	const char *extack[4]; /* the kernel's text for an NLMSG_ERROR answer */
	int bad_request;       /* requests that were not what the kernel expects */
};

/* The request as dcb_doit parses it; returns its command, -1 when it would refuse it. */
static int check_request(struct kernel *k, struct nl_msg *req)
{
	const struct nlmsghdr *h = nlmsg_hdr(req);
	const uint8_t *p = (const uint8_t *)h;
	uint16_t alen, atype;
	size_t len = h->nlmsg_len;

	if (h->nlmsg_type != RTM_GETDCB || !(h->nlmsg_flags & NLM_F_REQUEST) || len < 16 + 4)
		return -1;
	if (p[16] != AF_UNSPEC || p[18] || p[19])
		return -1;
	/* One attribute: DCB_ATTR_IFNAME, NUL-terminated (NLA_NUL_STRING), our name. */
	memcpy(&alen, p + 20, 2);
	memcpy(&atype, p + 22, 2);
	if (atype != DCB_ATTR_IFNAME || alen != 4 + strlen(k->ifname) + 1 ||
	    memcmp(p + 24, k->ifname, strlen(k->ifname) + 1) || len != 20 + ((alen + 3u) & ~3u))
		return -1;
	return p[17];
}

static int kernel_talk(void *ctx, struct nl_msg *req, hpn_nl_cb cb, void *arg,
		       char extack[HPN_EXTACK_LEN])
{
	struct kernel *k = ctx;
	const struct msg *a;
	int cmd = check_request(k, req), cb_r = 0;
	size_t off = 0;

	if (cmd < 0 || k->n_asked >= 4) {
		k->bad_request++;
		return -EINVAL; /* dcb_doit's answer to a request it cannot parse */
	}
	k->cmds[k->n_asked] = (uint8_t)cmd;
	a = &k->answers[k->n_asked];
	if (k->extack[k->n_asked])
		snprintf(extack, HPN_EXTACK_LEN, "%s", k->extack[k->n_asked]);
	k->n_asked++;
	while (off < a->len) {
		const struct nlmsghdr *h = (const struct nlmsghdr *)(a->b + off);
		struct nl_msg *msg;
		int32_t error;

		if (h->nlmsg_type == NLMSG_ERROR) {
			memcpy(&error, a->b + off + 16, 4);
			return error ? error : cb_r;
		}
		msg = nlmsg_convert((struct nlmsghdr *)h);
		if (!msg)
			return -ENOMEM;
		if (!cb_r)
			cb_r = cb(msg, arg);
		nlmsg_free(msg);
		off += NLMSG_ALIGN(h->nlmsg_len);
	}
	return cb_r;
}

static int read_via(struct kernel *k, const char *root, struct hpn_qos *q, struct hpn_err *e)
{
	memset(e, 0, sizeof(*e));
	memset(q, 0x5a, sizeof(*q));
	return hpn_qos_read_via(kernel_talk, k, root, k->ifname, q, e);
}

static void test_read(void)
{
	struct kernel k = { .ifname = "ens1f0np0" };
	struct hpn_qos q, before;
	struct hpn_err e;

	/* mlx5: the IEEE answer with its ACK, then the DCBX answer with its ACK. */
	mlx5_common(&k.answers[0], DCBX_MLX5_FW);
	error_msg(&k.answers[0], 0);
	gdcbx_answer(&k.answers[1], DCBX_MLX5_HOST);
	error_msg(&k.answers[1], 0);
	CHECK_INT_EQ(read_via(&k, "/nonexistent", &q, &e), 0);
	CHECK_INT_EQ(k.bad_request, 0);
	CHECK_INT_EQ(k.n_asked, 2);
	CHECK_INT_EQ(k.cmds[0], DCB_CMD_IEEE_GET);
	CHECK_INT_EQ(k.cmds[1], DCB_CMD_GDCBX);
	CHECK_INT_EQ(q.state, HPN_QOS_DCB);
	CHECK_INT_EQ(q.n_dscp, 64);
	CHECK_INT_EQ(hpn_qos_dcbx_mode(&q), HPN_QOS_DCBX_HOST); /* GDCBX's, asked last */
	CHECK(!q.ecn_np_known && !q.ecn_rp_known);
	CHECK_INT_EQ(e.code, 0);

	/* A veth: EOPNOTSUPP, "no DCB", and no DCBX question after it. */
	memset(&k, 0, sizeof(k));
	k.ifname = "veth0";
	error_msg(&k.answers[0], -EOPNOTSUPP);
	CHECK_INT_EQ(read_via(&k, "/nonexistent", &q, &e), 0);
	CHECK_INT_EQ(k.bad_request, 0);
	CHECK_INT_EQ(k.n_asked, 1);
	CHECK_INT_EQ(q.state, HPN_QOS_NO_DCB);

	/* A driver without getdcbx. */
	memset(&k, 0, sizeof(k));
	k.ifname = "eth3";
	ieee_answer(&k.answers[0], "eth3", 1 << 3, NULL, 0, NO_DCBX);
	error_msg(&k.answers[0], 0);
	error_msg(&k.answers[1], -EOPNOTSUPP);
	CHECK_INT_EQ(read_via(&k, "/nonexistent", &q, &e), 0);
	CHECK_INT_EQ(k.n_asked, 2);
	CHECK_INT_EQ(q.state, HPN_QOS_DCB);
	CHECK_INT_EQ(q.dcbx, -1);

	/* Errors name the netdev; ret stays as it was. */
	memset(&k, 0, sizeof(k));
	k.ifname = "gone0";
	error_msg(&k.answers[0], -ENODEV);
	CHECK_INT_EQ(read_via(&k, "/nonexistent", &q, &e), -ENODEV);
	CHECK_INT_EQ(e.code, 100);
	CHECK_STR_EQ(e.msg, "QoS of \"gone0\": no netdev of that name in this netns");
	memset(&before, 0x5a, sizeof(before));
	CHECK(!memcmp(&q, &before, sizeof(q)));
	memset(&k, 0, sizeof(k));
	k.ifname = "eth0";
	error_msg(&k.answers[0], -EPERM);
	k.extack[0] = "not allowed here";
	CHECK_INT_EQ(read_via(&k, "/nonexistent", &q, &e), -EPERM);
	CHECK_INT_EQ(e.code, 102);
	CHECK_STR_HAS(e.msg, "QoS of \"eth0\": DCB request: ");
	CHECK_STR_EQ(e.details, "kernel: not allowed here");
	/* An answer about another netdev; a refused answer through the socket path. */
	memset(&k, 0, sizeof(k));
	k.ifname = "eth0";
	lossy(&k.answers[0]);
	CHECK_INT_EQ(read_via(&k, "/nonexistent", &q, &e), -EPROTO);
	CHECK_STR_EQ(e.msg, "QoS of \"eth0\": DCB answer refused: an answer about \"ens1f0np0\"");
	memset(&k, 0, sizeof(k));
	k.ifname = "eth0";
	ieee_answer(&k.answers[0], "eth0", 8, (const uint16_t[][3]){ { SEL_DSCP, 9, 1 } }, 1,
		    NO_DCBX);
	CHECK_INT_EQ(read_via(&k, "/nonexistent", &q, &e), -EPROTO);
	CHECK_STR_HAS(e.msg, "QoS of \"eth0\": DCB answer refused: APP entry DSCP 1 -> priority 9");
	CHECK_INT_EQ(k.n_asked, 1);
	/* No answer at all; a name that is none: nothing is asked. */
	memset(&k, 0, sizeof(k));
	k.ifname = "eth0";
	error_msg(&k.answers[0], 0);
	CHECK_INT_EQ(read_via(&k, "/nonexistent", &q, &e), -EPROTO);
	CHECK_STR_HAS(e.msg, "no answer to DCB_CMD_IEEE_GET");
	memset(&k, 0, sizeof(k));
	k.ifname = "../x";
	CHECK_INT_EQ(read_via(&k, "/nonexistent", &q, &e), -EINVAL);
	CHECK_INT_EQ(k.n_asked + k.bad_request, 0);
}

/* ECN from a fake tree in MLNX_OFED's mlx5 layout. */
static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0) {
		perror(path);
		exit(2);
	}
	fclose(f);
}

static void mk_ecn(const char *root, const char *ifname, const char *proto, uint8_t on)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/class/net/%s/ecn/%s/enable", root, ifname, proto);
	for (char *s = strchr(path + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		mkdir(path, 0755);
		*s = '/';
	}
	mkdir(path, 0755);
	for (int p = 0; p < 8; p++) {
		char f[PATH_MAX + 8];

		snprintf(f, sizeof(f), "%s/%d", path, p);
		write_file(f, on & (1 << p) ? "1\n" : "0\n");
	}
}

static void test_ecn(void)
{
	struct kernel k = { .ifname = "ens1f0np0" };
	char root[64], path[PATH_MAX];
	struct hpn_qos q;
	struct hpn_err e;

	tmpdir_make(root, sizeof(root), "qos");
	mk_ecn(root, "ens1f0np0", "roce_np", 1 << 3);
	mk_ecn(root, "ens1f0np0", "roce_rp", (1 << 3) | (1 << 4));
	mlx5_common(&k.answers[0], DCBX_MLX5_HOST);
	gdcbx_answer(&k.answers[1], DCBX_MLX5_HOST);
	CHECK_INT_EQ(read_via(&k, root, &q, &e), 0);
	CHECK(q.ecn_np_known && q.ecn_rp_known);
	CHECK_INT_EQ(q.ecn_np, 1 << 3);
	CHECK_INT_EQ(q.ecn_rp, (1 << 3) | (1 << 4));
	/* Without DCB, ECN is still read; a file that says neither 0 nor 1: unknown. */
	hpn_qos_init(&q);
	snprintf(path, sizeof(path), "%s/class/net/ens1f0np0/ecn/roce_rp/enable/7", root);
	write_file(path, "yes\n");
	hpn_qos_read_ecn(root, "ens1f0np0", &q);
	CHECK(q.ecn_np_known && !q.ecn_rp_known);
	CHECK_INT_EQ(q.ecn_np, 1 << 3);
	unlink(path);
	hpn_qos_init(&q);
	hpn_qos_read_ecn(root, "ens1f0np0", &q);
	CHECK(!q.ecn_rp_known);
	hpn_qos_read_ecn(root, "eth9", &q);
	CHECK(!q.ecn_np_known);
	hpn_qos_read_ecn(root, "../ens1f0np0", &q);
	CHECK(!q.ecn_np_known);
	tmpdir_rm(root);
}

/* ---- the doctor's rendering of decoded answers ----------------------------------------- */

/* A doctor row: netdev, its answer decoded (m NULL: the state alone), its ECN. */
static void doctor_row(struct hpn_doctor *d, const char *netdev, const struct msg *m,
		       enum hpn_qos_state state, uint8_t ecn)
{
	struct hpn_doctor_qos *o = &d->qos[d->n_qos++];
	struct hpn_err e;

	snprintf(o->netdev, sizeof(o->netdev), "%s", netdev);
	o->dcb_asked = true;
	if (m) {
		CHECK_INT_EQ(decode(m, &o->q, &e), 0);
	} else {
		hpn_qos_init(&o->q);
		o->q.state = state;
	}
	o->q.ecn_np_known = o->q.ecn_rp_known = ecn != 0;
	o->q.ecn_np = o->q.ecn_rp = ecn;
}

/*
 * No DCB device anywhere here, so no doctor run shows a decoded table: its
 * renderers are given answers built above, as hpn_doctor_run stores them,
 * for the NICs of the fixture as a live node would have them: eth2 and eth1
 * virtio-net (no DCB ops), ens2 and ens2d1 mlx4 (DCB ops, host DCBX, no PFC,
 * no DSCP entry: trust PCP), ens1f0np0 mlx5 in trust DSCP with PFC on 3
 * and ECN on 3, ens1f1np1 the lossy case, ens1f0v0 an mlx5 VF
 * (mlx5e_dcbnl_build_netdev gives DCB ops to the vport group manager only).
 * doc/doctor.md shows this table; the test holds it to the letter.
 */
static const char doctor_table[] =
	"QOS NETDEV      DCB      PFC      TRUST  DCBX      ECN NP   ECN RP   DSCP:PRIORITY\n"
	"eth2            none     -        -      -         -        -        -\n"
	"ens2            ieee     none     pcp    host      -        -        -\n"
	"ens2d1          ieee     none     pcp    host      -        -        -\n"
	"ens1f0np0       ieee     3        dscp   host      3        3        "
	"0-7:0 8-15:1 16-23:2 24-31:3 32-39:4 40-47:5 48-55:6 56-63:7\n"
	"  hints (GU8TF): NCCL_IB_TC=136 NCCL_IB_FIFO_TC=136 NCCL_IB_SL=5, lossless no: "
	"NCCL_IB_TC=136 (DSCP 34) on ens1f0np0 rides priority 4 without PFC (trust DSCP; PFC is on "
	"for 3)\n"
	"ens1f1np1       ieee     3        dscp   host      -        -        26:3 34:4 48:6\n"
	"  hints (GU8TF): NCCL_IB_TC=136 NCCL_IB_FIFO_TC=136 NCCL_IB_SL=5, lossless no: "
	"NCCL_IB_TC=136 (DSCP 34) on ens1f1np1 rides priority 4 without PFC (trust DSCP; PFC is on "
	"for 3)\n"
	"ens1f0v0        none     -        -      -         -        -        -\n"
	"eth1            none     -        -      -         -        -        -\n";

static void test_doctor(void)
{
	struct hpn_doctor *d = calloc(1, sizeof(*d));
	struct msg mlx5 = { .len = 0 }, lossy5 = { .len = 0 }, mlx4 = { .len = 0 };
	char *text, *json;
	cJSON *root, *qos;

	if (!d)
		exit(2);
	d->sysfs_root = "/sys";
	mlx5_common(&mlx5, DCBX_MLX5_HOST);
	lossy_as(&lossy5, "ens1f1np1");
	ieee_answer(&mlx4, "ens2", 0, NULL, 0, DCBX_MLX5_HOST); /* mlx4_en reports the same */
	doctor_row(d, "eth2", NULL, HPN_QOS_NO_DCB, 0);
	doctor_row(d, "ens2", &mlx4, 0, 0);
	doctor_row(d, "ens2d1", &mlx4, 0, 0);
	doctor_row(d, "ens1f0np0", &mlx5, 0, 1 << 3);
	doctor_row(d, "ens1f1np1", &lossy5, 0, 0);
	/* The mlx5 rows judged for the GU8TF config, as hpn_doctor_run judges a RoCE NIC's row. */
	d->conf.gpu_model = (char *)"GU8TF";
	d->conf.nccl.enabled = true;
	for (size_t i = 3; i < 5; i++) {
		d->qos[i].judged = true;
		hpn_nccl_class(&d->conf.nccl, hpn_nccl_profile(&d->conf.nccl, "GU8TF"), "mlx5",
			       &d->qos[i].q, d->qos[i].netdev, &d->qos[i].hints);
	}
	doctor_row(d, "ens1f0v0", NULL, HPN_QOS_NO_DCB, 0);
	doctor_row(d, "eth1", NULL, HPN_QOS_NO_DCB, 0);
	text = hpn_doctor_render_text(d);
	CHECK_STR_HAS(text, doctor_table);

	/* A row that could not be read: its error under it. */
	doctor_row(d, "gone0", NULL, HPN_QOS_UNREAD, 0);
	snprintf(d->qos[7].error, sizeof(d->qos[7].error),
		 "QoS of \"gone0\": no netdev of that name in this netns");
	free(text);
	text = hpn_doctor_render_text(d);
	CHECK_STR_HAS(text,
		      "\ngone0           error    -        -      -         -        -        "
		      "-\n  QoS of \"gone0\": no netdev of that name in this netns\n");
	free(text);

	json = hpn_doctor_render_json(d);
	root = json ? cJSON_Parse(json) : NULL;
	qos = cJSON_GetObjectItemCaseSensitive(root, "qos");
	CHECK_INT_EQ(cJSON_GetArraySize(qos), 8);
	if (cJSON_GetArraySize(qos) == 8) {
		char *one = cJSON_PrintUnformatted(cJSON_GetArrayItem(qos, 4));

		CHECK_STR_EQ(
			one,
			"{\"hints\":{\"trafficClass\":136,\"fifoTrafficClass\":136,"
			"\"serviceLevel\":5,\"lossless\":\"no\",\"note\":\"NCCL_IB_TC=136 (DSCP "
			"34) on ens1f1np1 rides priority 4 without PFC (trust DSCP; PFC is on for "
			"3)\"},\"netdev\":\"ens1f1np1\",\"dcb\":\"ieee\",\"dcbAsked\":true,"
			"\"error\":null,\"pfc\":[3],\"pfcCap\":8,\"trust\":\"dscp\","
			"\"dscpPrio\":{\"26\":[3],\"34\":[4],\"48\":[6]},\"dcbx\":\"host\","
			"\"dcbxRaw\":13,\"ecn\":{\"np\":null,\"rp\":null}}");
		free(one);
		one = cJSON_PrintUnformatted(cJSON_GetArrayItem(qos, 3));
		CHECK_STR_HAS(one, "\"34\":[4],\"35\":[4]");
		CHECK_STR_HAS(one, "\"ecn\":{\"np\":[3],\"rp\":[3]}");
		free(one);
		one = cJSON_PrintUnformatted(cJSON_GetArrayItem(qos, 7));
		CHECK_STR_HAS(one, "\"dcb\":\"unread\",\"dcbAsked\":true,\"error\":\"QoS of");
		free(one);
	}
	cJSON_Delete(root);
	free(json);
	d->conf.gpu_model = NULL;
	free(d);
}

/* ---- the seed corpus ---------------------------------------------------------------- */

static int write_seed(const char *dir, const char *name, const struct msg *m)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, m->b, m->len) != (ssize_t)m->len) {
		perror(path);
		return 1;
	}
	close(fd);
	return 0;
}

static void two_prios(struct msg *m)
{
	static const uint16_t two[][3] = { { SEL_DSCP, 3, 26 }, { SEL_DSCP, 4, 26 } };

	ieee_answer(m, "eth3", 1 << 3, two, 2, NO_DCBX);
}

static void mlx5_fw_gdcbx(struct msg *m)
{
	mlx5_common(m, DCBX_MLX5_FW);
	gdcbx_answer(m, DCBX_MLX5_FW);
	error_msg(m, 0);
}

static void eopnotsupp(struct msg *m)
{
	error_msg(m, -EOPNOTSUPP);
}

static void enodev(struct msg *m)
{
	error_msg(m, -ENODEV);
}

static void ifname_only(struct msg *m)
{
	dcb_begin(m, DCB_CMD_IEEE_GET);
	attr_ifname(m, "eth0");
	msg_end(m);
}

static void cut_at_200(struct msg *m)
{
	mlx5_common(m, DCBX_MLX5_HOST);
	m->len = 200;
}

static int write_seeds(const char *dir)
{
	static const struct {
		const char *name;
		void (*build)(struct msg *m);
	} seeds[] = {
		{ "ieee-mlx5-pfc3-dscp26", mlx5_acked },
		{ "ieee-lossy-dscp34-prio4", lossy },
		{ "ieee-trust-pcp", pcp },
		{ "ieee-dscp-two-prios", two_prios },
		{ "ieee-gdcbx-firmware", mlx5_fw_gdcbx },
		{ "no-dcb-eopnotsupp", eopnotsupp },
		{ "no-dcb-attributes", ifname_only },
		{ "enodev", enodev },
		{ "truncated", cut_at_200 },
	};
	int bad = 0;

	for (size_t i = 0; i < HPN_ARRAY_SIZE(seeds); i++) {
		struct msg m = { .len = 0 };

		seeds[i].build(&m);
		bad |= write_seed(dir, seeds[i].name, &m);
	}
	return bad;
}

/* The committed seeds are what --seeds writes now: byte for byte, none missing, none more. */
static void test_seeds(void)
{
	char dir[64], cmd[PATH_MAX + 128];

	tmpdir_make(dir, sizeof(dir), "qos-seeds");
	CHECK_INT_EQ(write_seeds(dir), 0);
	snprintf(cmd, sizeof(cmd), "diff -r %s %s/../fuzz/corpus/qos >&2", dir, HPN_FIXTURES);
	CHECK_INT_EQ(system(cmd), 0);
	tmpdir_rm(dir);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--seeds"))
		return write_seeds(argv[2]);
	test_common();
	test_lossy();
	test_pcp();
	test_two_prios();
	test_no_dcb();
	test_dcbx();
	test_helpers();
	test_malformed();
	test_read();
	test_ecn();
	test_doctor();
	test_seeds();
	return check_done();
}
