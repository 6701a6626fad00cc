// SPDX-License-Identifier: Apache-2.0
/*
 * hpn_qos_decode: what the kernel answers hpn_qos_read's DCB requests
 * (RTM_GETDCB replies to DCB_CMD_IEEE_GET and DCB_CMD_GDCBX, NLMSG_ERROR),
 * one or more netlink messages. The kernel is trusted, but the bytes come
 * from a driver's tables that any root tool can fill, and the decoder is the
 * one place that turns them into the facts NCCL's traffic class is judged by.
 *
 * A refusal has a code and words and leaves the result untouched. An accepted
 * answer has DSCP values 0-63 mapped to priorities 0-7 (the struct's shape),
 * n_dscp counting them, a valid interface name or none; hpn_qos_tc_lossless
 * agrees, for every traffic class and SL, with the rule written out again
 * here (lossless iff every priority the class maps to has its PFC bit);
 * hpn_qos_lossless_prio names the one PFC priority. Decoding message by
 * message gives what decoding all at once gives, and decoding the answer
 * again over its own result changes nothing.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <string.h>

#include "fuzz.h"
#include "qos.h"
#include "util.h"

static bool same(const struct hpn_qos *a, const struct hpn_qos *b)
{
	return a->state == b->state && !strcmp(a->ifname, b->ifname) &&
	       a->pfc_known == b->pfc_known && a->pfc_en == b->pfc_en && a->pfc_cap == b->pfc_cap &&
	       !memcmp(a->dscp_prio, b->dscp_prio, HPN_QOS_DSCPS) && a->n_dscp == b->n_dscp &&
	       a->dcbx == b->dcbx && a->ecn_np_known == b->ecn_np_known &&
	       a->ecn_rp_known == b->ecn_rp_known && a->ecn_np == b->ecn_np &&
	       a->ecn_rp == b->ecn_rp;
}

/* The rule of doc/rdma.md, written again from scratch. */
static bool lossless(const struct hpn_qos *q, int tc, int sl)
{
	unsigned int prios;

	if (q->state != HPN_QOS_DCB || !q->pfc_known)
		return false;
	prios = q->n_dscp ? q->dscp_prio[tc / 4] : 1u << (sl % 8);
	if (!prios)
		return false;
	for (int p = 0; p < HPN_QOS_PRIOS; p++)
		if ((prios >> p & 1) && !(q->pfc_en >> p & 1))
			return false;
	return true;
}

static void check_result(const struct hpn_qos *q)
{
	unsigned int n = 0;
	int lp = hpn_qos_lossless_prio(q);

	FUZZ_ASSERT(q->state == HPN_QOS_UNREAD || q->state == HPN_QOS_NO_DCB ||
		    q->state == HPN_QOS_DCB);
	FUZZ_ASSERT(memchr(q->ifname, '\0', sizeof(q->ifname)));
	FUZZ_ASSERT(!q->ifname[0] || hpn_valid_ifname(q->ifname));
	FUZZ_ASSERT(q->dcbx >= -1 && q->dcbx <= 255);
	FUZZ_ASSERT(q->pfc_known || (!q->pfc_en && !q->pfc_cap));
	FUZZ_ASSERT(!q->ecn_np_known && !q->ecn_rp_known && !q->ecn_np && !q->ecn_rp);
	for (int d = 0; d < HPN_QOS_DSCPS; d++)
		n += q->dscp_prio[d] != 0;
	FUZZ_ASSERT(q->n_dscp == n && n <= HPN_QOS_DSCPS);
	FUZZ_ASSERT(hpn_qos_trust_dscp(q) == (n > 0));
	if (lp >= 0)
		FUZZ_ASSERT(lp < HPN_QOS_PRIOS && q->state == HPN_QOS_DCB && q->pfc_known &&
			    q->pfc_en == 1u << lp);
	else
		FUZZ_ASSERT(lp == -ENOENT || lp == -ENOTUNIQ);
	for (int tc = -1; tc <= 256; tc++)
		for (int sl = -1; sl <= 16; sl++) {
			bool in = tc >= 0 && tc <= 255 && sl >= 0 && sl <= 15;
			bool got = hpn_qos_tc_lossless(q, tc, sl);

			FUZZ_ASSERT(got == (in && lossless(q, tc, sl)));
			/* One priority p behind the class: lossless iff PFC bit p. */
			if (in && q->state == HPN_QOS_DCB && q->pfc_known && !n)
				FUZZ_ASSERT(got == !!(q->pfc_en >> (sl & 7) & 1));
		}
	FUZZ_ASSERT(hpn_qos_tc_for_dscp(26) == 104 && hpn_qos_tc_for_dscp(64) == -EINVAL);
}

/* Decodes data message by message, with the decoder's framing; -1 when it is not framed. */
static int piecewise(const uint8_t *data, size_t size, struct hpn_qos *q)
{
	size_t off = 0;

	while (off < size) {
		struct nlmsghdr h;
		struct hpn_err err = { 0 };

		if (size - off < NLMSG_HDRLEN)
			return -1;
		memcpy(&h, data + off, sizeof(h));
		if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > size - off)
			return -1;
		if (hpn_qos_decode(data + off, h.nlmsg_len, q, &err) < 0)
			return -2;
		off += NLMSG_ALIGN((size_t)h.nlmsg_len);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hpn_qos q, before, parts, again;
	struct hpn_err err = { 0 };
	int r, p;

	hpn_qos_init(&q);
	before = q;
	r = hpn_qos_decode(data, size, &q, &err);
	if (r < 0) {
		FUZZ_ASSERT(err.code != 0 && err.msg[0]);
		FUZZ_ASSERT(same(&q, &before));
	} else {
		FUZZ_ASSERT(r == 0 && err.code == 0);
		check_result(&q);
		again = q;
		FUZZ_ASSERT(hpn_qos_decode(data, size, &again, &err) == 0 && same(&again, &q));
	}
	if (!size)
		return 0;
	hpn_qos_init(&parts);
	p = piecewise(data, size, &parts);
	if (p == -1)
		FUZZ_ASSERT(r < 0); /* not framed: refused as a whole too */
	else
		FUZZ_ASSERT((p == 0) == (r == 0) && (r < 0 || same(&parts, &q)));
	return 0;
}
