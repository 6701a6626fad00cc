// SPDX-License-Identifier: Apache-2.0
/*
 * The families of each journalled attachment and its NICs (attachmetrics.h):
 * the attachment's phase and the health loop's verdict, each NIC's link
 * statistics and RDMA port counters read from the pod's netns at scrape time
 * (the calling thread enters it to open a netlink socket there, and leaves),
 * and the GPU each NIC serves. Every metric and its labels: doc/metrics.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attachmetrics.h"
#include "counters.h"
#include "exposition.h"
#include "gpu.h"
#include "health.h"
#include "log.h"
#include "nccl.h"
#include "netns.h"
#include "nl.h"
#include "node.h"
#include "result.h"
#include "store.h"
#include "util.h"

#define NIC_LABELS 22 /* 11 pairs and a NULL */

/* One NIC of one attachment, read at scrape time. */
struct nic_rec {
	const char *labels[NIC_LABELS + 1];
	bool have_link, have_rdma;
	struct hpn_rdma_qos added,
		qos; /* the result's, and read now (added.dcb[0]: there is one) */
	struct hpn_link_stats link;
	struct hpn_rdma_counters *rdma;
	char port[12];
};

struct att_rec {
	char key[HPN_KEY_MAX];
	struct hpn_journal j;
	char *labels[13]; /* pointers into j and key */
	const char *lab[13];
	int pod_fd;
	struct nic_rec nics[HPN_MAX_NICS];
	char ids[HPN_MAX_NICS][HPN_ALLOC_ID_MAX];
	char rdma_dev[HPN_MAX_NICS][HPN_IBDEV_MAX];
	size_t n_nics;
};

static const char *phase_name(enum hpn_phase p)
{
	switch (p) {
	case HPN_PHASE_SELECTED:
		return "selected";
	case HPN_PHASE_MOVING:
		return "moving";
	case HPN_PHASE_IPAM:
		return "ipam";
	case HPN_PHASE_ATTACHED:
		return "attached";
	}
	return "unknown";
}

/* The RDMA device, port and QoS verdict ADD bound for NIC i, from the journal's result. */
static void bound_rdma(const struct hpn_journal *j, size_t i, char dev[HPN_IBDEV_MAX],
		       unsigned int *port, struct hpn_rdma_qos *qos)
{
	struct hpn_result *res = NULL;
	struct hpn_err err = { 0 };

	snprintf(dev, HPN_IBDEV_MAX, "%s", j->nics[i].rdma.name);
	*port = 1;
	if (!j->result || hpn_result_parse(j->result, strlen(j->result), &res, &err) < 0)
		return;
	for (size_t k = 0; k < res->n_rdma; k++)
		if (res->rdma[k].interface == (int)i && res->rdma[k].bound &&
		    res->rdma[k].device[0]) {
			snprintf(dev, HPN_IBDEV_MAX, "%s", res->rdma[k].device);
			*port = res->rdma[k].port > 0 ? (unsigned int)res->rdma[k].port : 1;
			*qos = res->rdma[k].qos;
		}
	hpn_result_free(res);
}

/* Each NIC's QoS now, where ADD read it, against the class its hints gave (ncclqos.c). */
static void read_qos(const struct node *node, struct att_rec *r)
{
	_cleanup_nl_sock_ struct nl_sock *pod = NULL;
	_cleanup_close_ int home = -1;
	struct hpn_err e = { 0 };
	bool any = false;

	for (size_t i = 0; i < r->n_nics; i++)
		any = any || r->nics[i].added.dcb[0];
	if (!any || hpn_netns_current(&home) < 0 ||
	    hpn_nl_open_in(r->pod_fd, home, r->j.netns, &pod, &e) < 0)
		return;
	for (size_t i = 0; i < r->n_nics; i++)
		if (r->nics[i].added.dcb[0])
			hpn_nccl_qos_now(&r->j.nics[i], &r->nics[i].added, NULL, pod,
					 node->conf.sysfs_root, &r->nics[i].qos);
}

static void read_attachment(const struct node *node, struct att_rec *r)
{
	const struct hpn_journal *j = &r->j;
	struct hpn_err err = { 0 };

	r->lab[0] = "network";
	r->lab[1] = node->conf.name;
	r->lab[2] = "namespace";
	r->lab[3] = j->pod.namespace;
	r->lab[4] = "pod";
	r->lab[5] = j->pod.name;
	r->lab[6] = "uid";
	r->lab[7] = j->pod.uid;
	r->lab[8] = "container_id";
	r->lab[9] = j->container_id;
	r->lab[10] = "cni_ifname";
	r->lab[11] = j->cni_ifname;
	r->lab[12] = NULL;
	r->pod_fd = -1;
	r->n_nics = j->n_nics;
	for (size_t i = 0; i < j->n_nics && i < HPN_MAX_NICS; i++) {
		struct nic_rec *n = &r->nics[i];
		unsigned int port;

		hpn_alloc_journal_id(&j->nics[i], r->ids[i]);
		bound_rdma(j, i, r->rdma_dev[i], &port, &n->added);
		snprintf(n->port, sizeof(n->port), "%u", port);
		memcpy(n->labels, r->lab, 12 * sizeof(char *));
		n->labels[12] = "interface";
		n->labels[13] = j->nics[i].pod_ifname;
		n->labels[14] = "nic";
		n->labels[15] = j->nics[i].host.name;
		n->labels[16] = "device_id";
		n->labels[17] = r->ids[i];
		n->labels[18] = "rdma_device";
		n->labels[19] = r->rdma_dev[i];
		n->labels[20] = "port";
		n->labels[21] = n->port;
		n->labels[22] = NULL;
	}
	/* Counters only of a completed attachment of this boot, in a netns that is there. */
	if (j->phase != HPN_PHASE_ATTACHED || j->stale || !j->netns ||
	    hpn_netns_open(j->netns, &r->pod_fd, &err) < 0)
		return;
	read_qos(node, r);
	for (size_t i = 0; i < r->n_nics; i++) {
		struct nic_rec *n = &r->nics[i];
		struct hpn_err e = { 0 };

		n->have_link = hpn_link_stats(r->pod_fd, j->nics[i].pod_ifname, &n->link, &e) == 0;
		if (!r->rdma_dev[i][0])
			continue;
		n->rdma = calloc(1, sizeof(*n->rdma));
		memset(&e, 0, sizeof(e));
		n->have_rdma = n->rdma &&
			       hpn_rdma_counters(node->conf.sysfs_root, r->pod_fd, r->rdma_dev[i],
						 (unsigned int)strtoul(n->port, NULL, 10), n->rdma,
						 &e) == 0;
		if (e.msg[0])
			hpn_debug("metrics: %s: %s", r->key, e.msg);
	}
	close(r->pod_fd);
	r->pod_fd = -1;
}

/* Every journal of the network, with its NICs' counters. */
static struct att_rec *read_attachments(const struct node *node, size_t *ret_n)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct att_rec *v = NULL;
	char **keys = NULL;
	size_t n = 0, cap = 0;

	*ret_n = 0;
	if (hpn_store_open_here(node->conf.state_dir, node->conf.name, &st, &err) < 0 ||
	    hpn_store_keys(&st, &keys, &err) < 0) {
		hpn_store_close(&st);
		return NULL;
	}
	for (size_t k = 0; keys[k]; k++) {
		struct hpn_err jerr = { 0 };

		if (n == cap) {
			size_t c = cap ? cap * 2 : 16;
			struct att_rec *nv = realloc(v, c * sizeof(*nv));

			if (!nv)
				break;
			v = nv;
			cap = c;
		}
		memset(&v[n], 0, sizeof(v[n]));
		if (hpn_journal_read(&st, keys[k], &v[n].j, &jerr) < 0)
			continue;
		snprintf(v[n].key, sizeof(v[n].key), "%s", keys[k]);
		n++;
	}
	hpn_strv_free(keys);
	hpn_store_close(&st);
	/* The labels point into each record: only once realloc has put them where they stay. */
	for (size_t i = 0; i < n; i++)
		read_attachment(node, &v[i]);
	*ret_n = n;
	return v;
}

static void free_attachments(struct att_rec *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < v[i].n_nics; k++)
			free(v[i].nics[k].rdma);
		hpn_journal_free(&v[i].j);
	}
	free(v);
}

/* ---- the families -------------------------------------------------------------- */

/*
 * Counters under one name whatever the driver calls them: the first source
 * that has one, times its unit (the IB PMA data counters count 4-octet words).
 */
static const struct canon {
	const char *metric, *help;
	struct {
		enum hpn_counter_src src;
		const char *name;
		unsigned int mult;
	} from[3];
} canon[] = {
	{ "hpn_rdma_port_transmit_bytes_total",
	  "Bytes the RDMA port sent (rxe sent_bytes; IB PMA port_xmit_data x 4).",
	  { { HPN_COUNTER_HW, "sent_bytes", 1 }, { HPN_COUNTER_PMA, "port_xmit_data", 4 } } },
	{ "hpn_rdma_port_receive_bytes_total",
	  "Bytes the RDMA port received (rxe rcvd_bytes; IB PMA port_rcv_data x 4).",
	  { { HPN_COUNTER_HW, "rcvd_bytes", 1 }, { HPN_COUNTER_PMA, "port_rcv_data", 4 } } },
	{ "hpn_rdma_port_transmit_packets_total",
	  "Packets the RDMA port sent (rxe sent_pkts; IB PMA port_xmit_packets).",
	  { { HPN_COUNTER_HW, "sent_pkts", 1 }, { HPN_COUNTER_PMA, "port_xmit_packets", 1 } } },
	{ "hpn_rdma_port_receive_packets_total",
	  "Packets the RDMA port received (rxe rcvd_pkts; IB PMA port_rcv_packets).",
	  { { HPN_COUNTER_HW, "rcvd_pkts", 1 }, { HPN_COUNTER_PMA, "port_rcv_packets", 1 } } },
	{ "hpn_rdma_port_out_of_sequence_total",
	  "Out-of-sequence packets received (mlx5 out_of_sequence; rxe out_of_seq_request).",
	  { { HPN_COUNTER_HW, "out_of_sequence", 1 },
	    { HPN_COUNTER_HW, "out_of_seq_request", 1 } } },
	{ "hpn_rdma_port_cnp_sent_total",
	  "Congestion notification packets sent as the notification point (mlx5 np_cnp_sent).",
	  { { HPN_COUNTER_HW, "np_cnp_sent", 1 } } },
	{ "hpn_rdma_port_cnp_handled_total",
	  "Congestion notification packets handled as the reaction point (mlx5 rp_cnp_handled).",
	  { { HPN_COUNTER_HW, "rp_cnp_handled", 1 } } },
	{ "hpn_rdma_port_ecn_marked_packets_total",
	  "RoCE packets received with an ECN mark (mlx5 np_ecn_marked_roce_packets).",
	  { { HPN_COUNTER_HW, "np_ecn_marked_roce_packets", 1 } } },
	{ "hpn_rdma_port_out_of_buffer_total",
	  "Packets dropped for lack of a posted receive buffer (mlx5 out_of_buffer).",
	  { { HPN_COUNTER_HW, "out_of_buffer", 1 } } },
	{ "hpn_rdma_port_transmit_discards_total",
	  "Packets the port discarded on transmit (IB PMA port_xmit_discards).",
	  { { HPN_COUNTER_PMA, "port_xmit_discards", 1 } } },
	{ "hpn_rdma_port_receive_errors_total",
	  "Packets with errors the port received (IB PMA port_rcv_errors).",
	  { { HPN_COUNTER_PMA, "port_rcv_errors", 1 } } },
};

static bool canon_value(const struct canon *c, const struct hpn_rdma_counters *r, uint64_t *v)
{
	for (size_t i = 0; i < HPN_ARRAY_SIZE(c->from) && c->from[i].name; i++) {
		const struct hpn_rdma_counter *k =
			hpn_rdma_counter_find(r, c->from[i].src, c->from[i].name);

		if (k) {
			*v = k->value * c->from[i].mult;
			return true;
		}
	}
	return false;
}

static void nics_link(struct sbuf *b, struct att_rec *v, size_t n)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} f[] = {
		{ "hpn_rdma_interface_receive_bytes_total", "Bytes the pod's interface received.",
		  offsetof(struct hpn_link_stats, rx_bytes) },
		{ "hpn_rdma_interface_transmit_bytes_total", "Bytes the pod's interface sent.",
		  offsetof(struct hpn_link_stats, tx_bytes) },
		{ "hpn_rdma_interface_receive_packets_total",
		  "Packets the pod's interface received.",
		  offsetof(struct hpn_link_stats, rx_packets) },
		{ "hpn_rdma_interface_transmit_packets_total", "Packets the pod's interface sent.",
		  offsetof(struct hpn_link_stats, tx_packets) },
		{ "hpn_rdma_interface_receive_errors_total",
		  "Receive errors of the pod's interface.",
		  offsetof(struct hpn_link_stats, rx_errors) },
		{ "hpn_rdma_interface_transmit_errors_total",
		  "Transmit errors of the pod's interface.",
		  offsetof(struct hpn_link_stats, tx_errors) },
		{ "hpn_rdma_interface_receive_dropped_total",
		  "Received packets the pod's interface dropped.",
		  offsetof(struct hpn_link_stats, rx_dropped) },
		{ "hpn_rdma_interface_transmit_dropped_total",
		  "Packets to send the pod's interface dropped.",
		  offsetof(struct hpn_link_stats, tx_dropped) },
	};

	expo_family(b, "hpn_rdma_interface_up", "gauge",
		    "Whether the pod's interface is administratively up (1) or down (0).");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++)
			if (v[i].nics[k].have_link)
				expo_sample(b, "hpn_rdma_interface_up", v[i].nics[k].labels,
					    v[i].nics[k].link.up);
	expo_family(b, "hpn_rdma_interface_carrier", "gauge",
		    "Whether the pod's interface has carrier (IFF_RUNNING).");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++)
			if (v[i].nics[k].have_link)
				expo_sample(b, "hpn_rdma_interface_carrier", v[i].nics[k].labels,
					    v[i].nics[k].link.running);
	expo_family(b, "hpn_rdma_interface_mtu_bytes", "gauge", "The pod's interface's MTU.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++)
			if (v[i].nics[k].have_link)
				expo_sample(b, "hpn_rdma_interface_mtu_bytes", v[i].nics[k].labels,
					    v[i].nics[k].link.mtu);
	for (size_t m = 0; m < HPN_ARRAY_SIZE(f); m++) {
		expo_family(b, f[m].name, "counter", f[m].help);
		for (size_t i = 0; i < n; i++)
			for (size_t k = 0; k < v[i].n_nics; k++)
				if (v[i].nics[k].have_link)
					expo_sample_u64(
						b, f[m].name, v[i].nics[k].labels,
						*(const uint64_t *)((const char *)&v[i].nics[k].link +
								    f[m].off));
	}
}

static void nics_rdma(struct sbuf *b, struct att_rec *v, size_t n)
{
	expo_family(b, "hpn_rdma_port_state", "gauge",
		    "The RDMA port's state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++)
			if (v[i].nics[k].have_rdma)
				expo_sample(b, "hpn_rdma_port_state", v[i].nics[k].labels,
					    v[i].nics[k].rdma->state);
	expo_family(b, "hpn_rdma_port_active", "gauge", "Whether the RDMA port is ACTIVE.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++)
			if (v[i].nics[k].have_rdma)
				expo_sample(b, "hpn_rdma_port_active", v[i].nics[k].labels,
					    v[i].nics[k].rdma->state == 4);
	expo_family(b, "hpn_rdma_port_physical_state", "gauge",
		    "The RDMA port's physical state (5 LinkUp, 3 Disabled, 2 Polling; 0 unknown).");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++)
			if (v[i].nics[k].have_rdma)
				expo_sample(b, "hpn_rdma_port_physical_state", v[i].nics[k].labels,
					    v[i].nics[k].rdma->phys_state);
	for (size_t c = 0; c < HPN_ARRAY_SIZE(canon); c++) {
		bool head = false;

		for (size_t i = 0; i < n; i++)
			for (size_t k = 0; k < v[i].n_nics; k++) {
				uint64_t val;

				if (!v[i].nics[k].have_rdma ||
				    !canon_value(&canon[c], v[i].nics[k].rdma, &val))
					continue;
				if (!head)
					expo_family(b, canon[c].metric, "counter", canon[c].help);
				head = true;
				expo_sample_u64(b, canon[c].metric, v[i].nics[k].labels, val);
			}
	}
	expo_family(b, "hpn_rdma_port_statistic_total", "counter",
		    "Every counter the driver has for the port, under its own name: source hw is "
		    "what rdma statistic shows (RDMA netlink) or sysfs hw_counters, pma the IB PMA "
		    "counters of sysfs.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++) {
			const struct nic_rec *nr = &v[i].nics[k];
			const char *lab[NIC_LABELS + 5];

			if (!nr->have_rdma)
				continue;
			memcpy(lab, nr->labels, NIC_LABELS * sizeof(char *));
			for (size_t c = 0; c < nr->rdma->n; c++) {
				lab[NIC_LABELS] = "source";
				lab[NIC_LABELS + 1] =
					nr->rdma->v[c].src == HPN_COUNTER_PMA ? "pma" : "hw";
				lab[NIC_LABELS + 2] = "statistic";
				lab[NIC_LABELS + 3] = nr->rdma->v[c].name;
				lab[NIC_LABELS + 4] = NULL;
				expo_sample_u64(b, "hpn_rdma_port_statistic_total", lab,
						nr->rdma->v[c].value);
			}
		}
}

/* A journalled class name as its number (enum hpn_gpu_dist); none or a stranger: unknown. */
static int dist_class(const char *name)
{
	int d = name[0] ? hpn_gpu_dist_parse(name) : -1;

	return d < 0 ? HPN_DIST_UNKNOWN : d;
}

/*
 * Each RoCE NIC's QoS now (read where ADD read it) and whether the class its
 * hints gave NCCL rides a PFC priority: doc/metrics.md, doc/nccl.md.
 */
static void nics_qos(struct sbuf *b, struct att_rec *v, size_t n)
{
	static const struct {
		const char *name, *help;
	} f[] = {
		{ "hpn_rdma_nic_dcb",
		  "1 when the NIC answers DCB (its QoS is known), 0 when it has none (a virtual "
		  "NIC: no class is known lossless)." },
		{ "hpn_rdma_nic_pfc_priorities",
		  "The priorities with PFC on the NIC's port as a mask (bit p: priority p)." },
		{ "hpn_rdma_nic_trust_dscp", "1 when the NIC classes by DSCP (its DCB APP table "
					     "has DSCP entries), 0 by PCP." },
		{ "hpn_rdma_nic_class_lossless",
		  "1 when the traffic class the pod's NCCL hints give (NCCL_IB_TC, "
		  "NCCL_IB_FIFO_TC, NCCL_IB_SL) rides a PFC priority on the NIC, 0 when not; "
		  "absent when the NIC says nothing of PFC." },
	};

	for (size_t m = 0; m < HPN_ARRAY_SIZE(f); m++) {
		expo_family(b, f[m].name, "gauge", f[m].help);
		for (size_t i = 0; i < n; i++)
			for (size_t k = 0; k < v[i].n_nics; k++) {
				const struct hpn_rdma_qos *q = &v[i].nics[k].qos;
				const char *const *lab = v[i].nics[k].labels;

				bool dcb = !strcmp(q->dcb, "ieee");

				if (m == 0 && (dcb || !strcmp(q->dcb, "none")))
					expo_sample(b, f[m].name, lab, dcb);
				else if (!dcb)
					continue;
				else if (m == 1 && q->pfc >= 0)
					expo_sample(b, f[m].name, lab, q->pfc);
				else if (m == 2)
					expo_sample(b, f[m].name, lab, !strcmp(q->trust, "dscp"));
				else if (m == 3 && strcmp(q->lossless, "unknown"))
					expo_sample(b, f[m].name, lab, !strcmp(q->lossless, "yes"));
			}
	}
}

/* The GPU each NIC of a completed attachment serves (journalled at the claim), and how far. */
static void nics_gpu(struct sbuf *b, struct att_rec *v, size_t n)
{
	expo_family(
		b, "hpn_rdma_nic_gpu_distance", "gauge",
		"NCCL's distance class between the NIC and the pod's GPU it serves: 0 PIX, 1 PXB, "
		"2 PHB, 3 SYS, 4 unknown.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++) {
			const struct hpn_journal_nic *jn = &v[i].j.nics[k];
			const struct nic_rec *nr = &v[i].nics[k];
			const char *lab[NIC_LABELS + 5];

			if (v[i].j.phase != HPN_PHASE_ATTACHED || v[i].j.stale || !jn->gpu_id[0])
				continue;
			memcpy(lab, nr->labels, NIC_LABELS * sizeof(lab[0]));
			lab[NIC_LABELS] = "gpu";
			lab[NIC_LABELS + 1] = jn->gpu_id;
			lab[NIC_LABELS + 2] = "gpu_pci";
			lab[NIC_LABELS + 3] = jn->gpu_pci;
			lab[NIC_LABELS + 4] = NULL;
			expo_sample(b, "hpn_rdma_nic_gpu_distance", lab, dist_class(jn->gpu_dist));
		}
	expo_family(
		b, "hpn_rdma_nic_far", "gauge",
		"1 when a NIC left free was nearer to this NIC's GPU (distance farther than best, "
		"NCCL's classes), else 0.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++) {
			const struct hpn_journal_nic *jn = &v[i].j.nics[k];
			const struct nic_rec *nr = &v[i].nics[k];
			const char *lab[NIC_LABELS + 7];

			if (v[i].j.phase != HPN_PHASE_ATTACHED || v[i].j.stale || !jn->gpu_id[0])
				continue;
			memcpy(lab, nr->labels, NIC_LABELS * sizeof(lab[0]));
			lab[NIC_LABELS] = "gpu";
			lab[NIC_LABELS + 1] = jn->gpu_id;
			lab[NIC_LABELS + 2] = "distance";
			lab[NIC_LABELS + 3] =
				hpn_gpu_dist_name((enum hpn_gpu_dist)dist_class(jn->gpu_dist));
			lab[NIC_LABELS + 4] = "best";
			lab[NIC_LABELS + 5] =
				hpn_gpu_dist_name((enum hpn_gpu_dist)dist_class(jn->gpu_best));
			lab[NIC_LABELS + 6] = NULL;
			expo_sample(b, "hpn_rdma_nic_far", lab, hpn_journal_nic_far(jn));
		}
}

static void attachments(struct sbuf *b, const struct node *node, const struct health *health,
			struct att_rec *v, size_t n)
{
	const struct health_stats *h = health_stats(health);

	expo_family(
		b, "hpn_rdma_attachments", "gauge",
		"Attachments the network's journals record (pods holding NICs, or being added).");
	expo_sample(b, "hpn_rdma_attachments", (const char *[]){ "network", node->conf.name, NULL },
		    n);
	expo_family(b, "hpn_rdma_attachment_info", "gauge",
		    "One per journalled attachment: its pod, and how far its ADD got (phase).");
	for (size_t i = 0; i < n; i++) {
		const char *lab[17];

		memcpy(lab, v[i].lab, 12 * sizeof(lab[0]));
		lab[12] = "phase";
		lab[13] = phase_name(v[i].j.phase);
		lab[14] = "stale";
		lab[15] = v[i].j.stale ? "true" : "false";
		lab[16] = NULL;
		expo_sample(b, "hpn_rdma_attachment_info", lab, 1);
	}
	expo_family(
		b, "hpn_rdma_attachment_healthy", "gauge",
		"The health loop's last verdict on the attachment: 1 as ADD left it, 0 broken.");
	for (size_t i = 0; h && i < n; i++)
		for (size_t k = 0; k < h->n; k++)
			if (!strcmp(h->v[k].key, v[i].key) && h->v[k].state >= 0)
				expo_sample(b, "hpn_rdma_attachment_healthy", v[i].lab,
					    h->v[k].state);
	expo_family(
		b, "hpn_rdma_attachment_broken", "gauge",
		"1 for a broken attachment, with what broke: netns, interface, rdma, qos, hints, "
		"state (CHECK's), container (a container NRI found without its devices).");
	for (size_t i = 0; h && i < n; i++)
		for (size_t k = 0; k < h->n; k++) {
			const char *lab[15];

			if (strcmp(h->v[k].key, v[i].key) || h->v[k].state != 0)
				continue;
			memcpy(lab, v[i].lab, 12 * sizeof(lab[0]));
			lab[12] = "reason";
			lab[13] = h->v[k].reason ? h->v[k].reason : "check";
			lab[14] = NULL;
			expo_sample(b, "hpn_rdma_attachment_broken", lab, 1);
		}
	expo_family(b, "hpn_rdma_attachment_last_check_timestamp_seconds", "gauge",
		    "When the health loop last checked the attachment (unix time).");
	for (size_t i = 0; h && i < n; i++)
		for (size_t k = 0; k < h->n; k++)
			if (!strcmp(h->v[k].key, v[i].key) && h->v[k].state >= 0)
				expo_sample(b, "hpn_rdma_attachment_last_check_timestamp_seconds",
					    v[i].lab, h->v[k].checked_at);
	if (h) {
		expo_family(
			b, "hpn_rdma_health_checks_total", "counter",
			"Attachments the health loop checked, by verdict (skipped: an ADD or DEL "
			"was working on it, or it is not a completed attachment of this boot).");
		expo_by_result(
			b, "hpn_rdma_health_checks_total",
			(const char *[]){ "healthy", "broken", "skipped" },
			(uint64_t[]){ h->checks_healthy, h->checks_broken, h->checks_skipped }, 3);
	}
}

void attachmetrics_render(struct sbuf *b, void *ud)
{
	const struct attachmetrics *am = ud;
	size_t n = 0;
	struct att_rec *v = read_attachments(am->node, &n);

	attachments(b, am->node, am->health, v, n);
	nics_link(b, v, n);
	nics_rdma(b, v, n);
	nics_gpu(b, v, n);
	nics_qos(b, v, n);
	free_attachments(v, n);
}
