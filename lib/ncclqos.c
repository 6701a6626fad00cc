// SPDX-License-Identifier: Apache-2.0
/*
 * The hints' traffic class against each NIC's RoCE QoS (nccl.h): the class
 * nccl.trafficClass "auto" derives from the node's lossless priority, and
 * whether the class NCCL will use rides a PFC priority, said as a verdict,
 * a warning, or (nccl.losslessRequired) a refusal. The rules and their
 * sources: doc/nccl.md, "The traffic class and the node's QoS".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "nccl.h"
#include "qos.h"
#include "store.h"
#include "util.h"

/* A setting as NCCL reads it (strtol, base 0 accepted): absent is dflt; -1 when not in lo..hi. */
static int setting(const struct hpn_vars *v, const char *key, int dflt, int hi)
{
	const char *s = hpn_vars_get(v, key);
	char *end;
	long n;

	if (!s)
		return dflt;
	errno = 0;
	n = strtol(s, &end, 10);
	if (errno || end == s || *end || n < 0 || n > hi)
		return -1;
	return (int)n;
}

/* The priorities set in mask as "3" or "3,4"; "none" for 0. */
static void prios_str(unsigned int mask, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int p = 0; p < HPN_QOS_PRIOS && off < len; p++)
		if (mask & (1u << p))
			off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? "," : "", p);
	if (!off)
		snprintf(buf, len, "none");
}

/* The priorities a class (tc, sl) rides on q (trust DSCP: tc's DSCP's; PCP: sl's). */
static unsigned int class_prios(const struct hpn_qos *q, int tc, int sl)
{
	return hpn_qos_trust_dscp(q) ? q->dscp_prio[tc >> 2] : 1u << (sl & 7);
}

void hpn_nccl_qos_verdict(const struct hpn_qos *q, const char *nic, struct hpn_rdma_qos *rq)
{
	/* The netdev whose QoS it is: a child's parent, a VF's PF, or the NIC itself. */
	const char *ifname = q && q->ifname[0] ? q->ifname : nic;
	char on[24], rides[24];
	bool data, fifo;

	rq->note[0] = '\0';
	rq->pfc = q && q->state == HPN_QOS_DCB && q->pfc_known ? q->pfc_en : -1;
	snprintf(rq->dcb, sizeof(rq->dcb), "%s",
		 !q || q->state == HPN_QOS_UNREAD ? "error"
		 : q->state == HPN_QOS_DCB	  ? "ieee"
						  : "none");
	snprintf(rq->trust, sizeof(rq->trust), "%s",
		 q && q->state == HPN_QOS_DCB ? (hpn_qos_trust_dscp(q) ? "dscp" : "pcp") : "");
	snprintf(rq->lossless, sizeof(rq->lossless), "unknown");
	if (rq->tc < 0 || rq->fifo_tc < 0 || rq->sl < 0) {
		snprintf(rq->note, sizeof(rq->note),
			 "NCCL_IB_TC, NCCL_IB_FIFO_TC or NCCL_IB_SL is not a number NCCL's RoCE "
			 "QPs can carry (0-255, 0-255, 0-15)");
		return;
	}
	if (!q || q->state == HPN_QOS_UNREAD) {
		snprintf(rq->note, sizeof(rq->note), "the QoS of %s could not be read", ifname);
		return;
	}
	if (q->state == HPN_QOS_NO_DCB || !q->pfc_known) {
		snprintf(rq->note, sizeof(rq->note), "%s reports no %s: no class is known lossless",
			 ifname, q->state == HPN_QOS_NO_DCB ? "DCB" : "PFC");
		return;
	}
	data = hpn_qos_tc_lossless(q, rq->tc, rq->sl);
	fifo = hpn_qos_tc_lossless(q, rq->fifo_tc, rq->sl);
	snprintf(rq->lossless, sizeof(rq->lossless), "%s", data && fifo ? "yes" : "no");
	/* A NIC without PFC anywhere runs lossy by design (ECN alone): no warning. */
	if ((data && fifo) || !q->pfc_en)
		return;
	prios_str(q->pfc_en, on, sizeof(on));
	prios_str(class_prios(q, data ? rq->fifo_tc : rq->tc, rq->sl), rides, sizeof(rides));
	if (hpn_qos_trust_dscp(q))
		snprintf(rq->note, sizeof(rq->note),
			 "%s=%d (DSCP %d) on %s rides priority %s without PFC (trust DSCP; PFC is "
			 "on for %s)",
			 data ? "NCCL_IB_FIFO_TC" : "NCCL_IB_TC", data ? rq->fifo_tc : rq->tc,
			 (data ? rq->fifo_tc : rq->tc) >> 2, ifname,
			 strcmp(rides, "none") ? rides : "0 (no APP entry)", on);
	else
		snprintf(rq->note, sizeof(rq->note),
			 "NCCL_IB_SL=%d on %s rides priority %s without PFC (trust PCP; PFC is on "
			 "for %s)",
			 rq->sl, ifname, rides, on);
}

/*
 * The class nccl.trafficClass auto gives, from q's one lossless priority p.
 * Trust DSCP: the class kept when it rides p alone, else DSCP 8p+2 (the AF
 * class's low-drop codepoint, RFC 2597: AF31 = 26 for priority 3, the RoCE
 * DSCP NVIDIA's guides use) when the APP table maps it to p alone, else the
 * lowest DSCP that does. Trust PCP: NCCL_IB_SL p. *why says when there is
 * none. Returns whether one was found.
 */
static bool auto_class(const struct hpn_qos *q, const char *ifname, int *tc, int *sl, char *why,
		       size_t len)
{
	int p = q->state == HPN_QOS_DCB ? hpn_qos_lossless_prio(q) : -ENOENT;

	if (p < 0) {
		snprintf(why, len, "%s has %s", ifname,
			 q->state != HPN_QOS_DCB ? "no DCB"
			 : p == -ENOTUNIQ	 ? "PFC on several priorities"
						 : "no priority with PFC");
		return false;
	}
	if (!hpn_qos_trust_dscp(q)) {
		*sl = p;
		return true;
	}
	if (*tc >= 0 && q->dscp_prio[*tc >> 2] == 1u << p)
		return true;
	if (q->dscp_prio[8 * p + 2] == 1u << p) {
		*tc = hpn_qos_tc_for_dscp(8 * p + 2);
		return true;
	}
	for (int d = 0; d < HPN_QOS_DSCPS; d++)
		if (q->dscp_prio[d] == 1u << p) {
			*tc = hpn_qos_tc_for_dscp(d);
			return true;
		}
	snprintf(why, len, "%s maps no DSCP to its PFC priority %d alone", ifname, p);
	return false;
}

static int set_int(struct hpn_vars *v, const char *key, int n)
{
	char num[8];

	snprintf(num, sizeof(num), "%d", n);
	return hpn_vars_set(v, key, num);
}

/* NCCL's IB transport carries RoCE through this NIC, and ADD read its QoS. */
static bool counts(const struct hpn_bound_nic *nic)
{
	return nic->qos && nic->rdma->bound && !strcmp(nic->rdma->transport, "roce");
}

int hpn_nccl_qos(const struct hpn_nccl_conf *nc, const struct hpn_bound_nic *nics, size_t n,
		 struct hpn_vars *v, struct hpn_rdma_qos *out, struct hpn_err *err)
{
	const char *ib_off = hpn_vars_get(v, "NCCL_IB_DISABLE");
	int tc = setting(v, "NCCL_IB_TC", 0, 255), sl = setting(v, "NCCL_IB_SL", 0, 15);
	int fifo = setting(v, "NCCL_IB_FIFO_TC", -2, 255);
	char why[160] = "";
	bool derived = false;
	int r = 0;

	if (ib_off && !strcmp(ib_off, "1"))
		return 0;
	for (size_t i = 0; nc->tc_auto && !derived && i < n; i++) {
		int atc = tc, asl = sl;

		if (!counts(&nics[i]))
			continue;
		derived = auto_class(nics[i].qos, nics[i].ifname ? nics[i].ifname : "?", &atc, &asl,
				     why, sizeof(why));
		if (derived) {
			tc = atc;
			sl = asl;
			/* The control messages' class too, unless the one set rides it already. */
			if (fifo < 0 || !hpn_qos_tc_lossless(nics[i].qos, fifo, sl))
				fifo = tc;
			r = set_int(v, "NCCL_IB_TC", tc);
			if (r >= 0)
				r = set_int(v, "NCCL_IB_FIFO_TC", fifo);
			if (r >= 0 && (sl || hpn_vars_get(v, "NCCL_IB_SL")))
				r = set_int(v, "NCCL_IB_SL", sl);
			if (r == -E2BIG)
				return hpn_err_set(err, HPN_E_INVALID_CONFIG, E2BIG,
						   "more than %d NCCL settings", HPN_MAX_VARS);
			if (r < 0)
				return r;
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct hpn_rdma_qos *rq = &out[i];
		const char *ifname = nics[i].ifname ? nics[i].ifname : "?";

		if (!counts(&nics[i]))
			continue;
		*rq = (struct hpn_rdma_qos){ .tc = tc,
					     .fifo_tc = fifo == -2 ? tc : fifo,
					     .sl = sl };
		hpn_nccl_qos_verdict(nics[i].qos, ifname, rq);
		if (nc->tc_auto && !derived && !rq->note[0])
			snprintf(rq->note, sizeof(rq->note), "trafficClass auto found no class: %s",
				 why);
		if (strcmp(rq->lossless, "yes") && nc->lossless_required)
			return hpn_err_set(err, HPN_E_RDMA, EPROTO,
					   "nccl.losslessRequired: the hints' class on %s (RDMA "
					   "device \"%s\") is not lossless: %s",
					   ifname, nics[i].rdma->device,
					   rq->note[0] ? rq->note : "it rides no PFC priority");
		/* Warned when the NIC has a lossless class the hints miss; else said. */
		if (!strcmp(rq->lossless, "no") && rq->pfc > 0)
			hpn_warn("%s", rq->note);
		else if (rq->note[0])
			hpn_info("%s", rq->note);
	}
	return 0;
}

void hpn_nccl_qos_now(const struct hpn_journal_nic *n, const struct hpn_rdma_qos *added,
		      struct nl_sock *host, struct nl_sock *pod, const char *sysfs_root,
		      struct hpn_rdma_qos *ret)
{
	/* A moved NIC's own QoS went with it; a child's parent and a VF's PF stay on the host. */
	bool in_pod = n->kind == HPN_NIC_MOVED && !strcmp(added->netdev, n->host.name);
	const char *ifname = in_pod ? n->pod_ifname : added->netdev;
	struct hpn_err e = { 0 };
	struct hpn_qos q;

	*ret = *added;
	if (hpn_qos_read(in_pod ? pod : host, sysfs_root, ifname, &q, &e) < 0)
		hpn_qos_init(&q);
	hpn_nccl_qos_verdict(&q, ifname, ret);
	if (q.state == HPN_QOS_UNREAD)
		snprintf(ret->note, sizeof(ret->note), "%.255s", e.msg);
}

int hpn_nccl_judge(const struct hpn_nccl_conf *nc, const struct hpn_nccl_profile *p,
		   const struct hpn_bound_nic *nics, size_t n, struct hpn_rdma_qos *out,
		   struct hpn_err *err)
{
	struct hpn_vars v = { 0 };
	int r = hpn_nccl_render(nc, p, nics, n, &v, err);

	if (r >= 0)
		r = hpn_nccl_qos(nc, nics, n, &v, out, err);
	hpn_vars_free(&v);
	return r;
}

void hpn_nccl_class(const struct hpn_nccl_conf *nc, const struct hpn_nccl_profile *p,
		    const char *driver, const struct hpn_qos *q, const char *ifname,
		    struct hpn_rdma_qos *out)
{
	struct hpn_rdma_info ri = { .bound = true, .port = 1, .gid_index = -1 };
	struct hpn_bound_nic b = { .ifname = ifname, .rdma = &ri, .qos = q };
	struct hpn_nccl_conf judged = *nc;
	struct hpn_err err = { 0 };

	*out = (struct hpn_rdma_qos){ .pfc = -1 };
	snprintf(ri.device, sizeof(ri.device), "%s", "dev");
	snprintf(ri.driver, sizeof(ri.driver), "%s", driver);
	snprintf(ri.transport, sizeof(ri.transport), "roce");
	/* A verdict, never a refusal: the doctor says what ADD would. */
	judged.lossless_required = false;
	if (hpn_nccl_judge(&judged, p, &b, 1, out, &err) < 0)
		snprintf(out->note, sizeof(out->note), "%.255s", err.msg);
	else if (!out->lossless[0])
		snprintf(out->note, sizeof(out->note), "NCCL's IB transport is off: no class");
}
