// SPDX-License-Identifier: Apache-2.0
/*
 * Prometheus metrics over HTTP (GET /metrics, text exposition format 0.0.4),
 * served by Debian's libmicrohttpd from the agent's own event loop: MHD runs
 * in its external-epoll mode (MHD_USE_EPOLL without a thread of its own), its
 * epoll fd sits in the loop's epoll, and MHD_run is called when that fd is
 * readable or MHD's connection timeout comes due (a timerfd). So a scrape is
 * answered on the loop's thread from the loop's own state (the devices, the
 * health loop's verdicts, the GC's and the event log's counts) with no lock
 * and no copy; only the kernel's counters are read at scrape time: each NIC's
 * link statistics and RDMA port counters, from the pod's netns (the calling
 * thread enters it to open a netlink socket there, and leaves), at most once
 * a second (a scrape within a second of the last gets the same text). Every
 * metric, its labels and where it comes from: doc/metrics.md.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grpc/grpc.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cnilog.h"
#include "counters.h"
#include "deviceplugin.h"
#include "gc.h"
#include "gpu.h"
#include "health.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "netns.h"
#include "node.h"
#include "result.h"
#include "store.h"
#include "util.h"

#define CACHE_S		1.0
#define MAX_CONNECTIONS 16
#define CONN_TIMEOUT_S	10
#define CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"

struct metrics {
	struct metrics_sources src;
	struct MHD_Daemon *d;
	struct loop_src mhd, timer;
	char *cache;
	size_t cache_len;
	double cache_at;
	double collect_s; /* the last collection's own time */
	uint64_t scrapes;
};

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- text ----------------------------------------------------------------------- */

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

__attribute__((format(printf, 2, 0))) static void sb_vadd(struct sbuf *b, const char *fmt,
							  va_list ap)
{
	va_list cp;
	int n;

	if (b->oom)
		return;
	va_copy(cp, ap);
	n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, cp);
	va_end(cp);
	if (n < 0) {
		b->oom = true;
		return;
	}
	if (!b->p || b->len + (size_t)n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 16384;
		char *p;

		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	}
	b->len += (size_t)n;
}

static void sb_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_add(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sb_vadd(b, fmt, ap);
	va_end(ap);
}

/* A label value: backslash, double quote and newline escaped (the exposition format's rule). */
static void sb_value(struct sbuf *b, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\')
			sb_add(b, "\\\\");
		else if (*v == '"')
			sb_add(b, "\\\"");
		else if (*v == '\n')
			sb_add(b, "\\n");
		else
			sb_add(b, "%c", *v);
	}
}

/* A family's header. */
static void family(struct sbuf *b, const char *name, const char *type, const char *help)
{
	sb_add(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Labels as "k1", "v1", "k2", "v2", ..., NULL. */
static void sample_v(struct sbuf *b, const char *name, const char *const *labels, double v)
{
	sb_add(b, "%s", name);
	for (size_t i = 0; labels && labels[i]; i += 2) {
		sb_add(b, "%s%s=\"", i ? "," : "{", labels[i]);
		sb_value(b, labels[i + 1]);
		sb_add(b, "\"");
	}
	if (labels && labels[0])
		sb_add(b, "}");
	/* Integers print as integers; %.17g keeps every bit of the others. */
	if (v == (double)(long long)v && v < 9e15 && v > -9e15)
		sb_add(b, " %lld\n", (long long)v);
	else
		sb_add(b, " %.17g\n", v);
}

static void sample_u64(struct sbuf *b, const char *name, const char *const *labels, uint64_t v)
{
	sb_add(b, "%s", name);
	for (size_t i = 0; labels && labels[i]; i += 2) {
		sb_add(b, "%s%s=\"", i ? "," : "{", labels[i]);
		sb_value(b, labels[i + 1]);
		sb_add(b, "\"");
	}
	if (labels && labels[0])
		sb_add(b, "}");
	sb_add(b, " %llu\n", (unsigned long long)v);
}

/* ---- what the journals hold ---------------------------------------------------- */

#define NIC_LABELS 22 /* 11 pairs and a NULL */

/* One NIC of one attachment, read at scrape time. */
struct nic_rec {
	const char *labels[NIC_LABELS + 1];
	bool have_link, have_rdma;
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

/* The RDMA device and port ADD bound for NIC i, from the journal's result. */
static void bound_rdma(const struct hpn_journal *j, size_t i, char dev[HPN_IBDEV_MAX],
		       unsigned int *port)
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
		}
	hpn_result_free(res);
}

static void read_attachment(const struct metrics_sources *src, struct att_rec *r)
{
	const struct hpn_journal *j = &r->j;
	struct hpn_err err = { 0 };

	r->lab[0] = "network";
	r->lab[1] = src->node->conf.name;
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
		bound_rdma(j, i, r->rdma_dev[i], &port);
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
	for (size_t i = 0; i < r->n_nics; i++) {
		struct nic_rec *n = &r->nics[i];
		struct hpn_err e = { 0 };

		n->have_link = hpn_link_stats(r->pod_fd, j->nics[i].pod_ifname, &n->link, &e) == 0;
		if (!r->rdma_dev[i][0])
			continue;
		n->rdma = calloc(1, sizeof(*n->rdma));
		memset(&e, 0, sizeof(e));
		n->have_rdma = n->rdma &&
			       hpn_rdma_counters(
				       src->node->conf.sysfs_root, r->pod_fd, r->rdma_dev[i],
				       (unsigned int)strtoul(n->port, NULL, 10), n->rdma, &e) == 0;
		if (e.msg[0])
			hpn_debug("metrics: %s: %s", r->key, e.msg);
	}
	close(r->pod_fd);
	r->pod_fd = -1;
}

/* Every journal of the network, with its NICs' counters. */
static struct att_rec *read_attachments(const struct metrics_sources *src, size_t *ret_n)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct att_rec *v = NULL;
	char **keys = NULL;
	size_t n = 0, cap = 0;

	*ret_n = 0;
	if (hpn_store_open(src->node->conf.state_dir, src->node->conf.name, &st, &err) < 0 ||
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
		read_attachment(src, &v[n]);
		n++;
	}
	hpn_strv_free(keys);
	hpn_store_close(&st);
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

	family(b, "hpn_rdma_interface_up", "gauge",
	       "Whether the pod's interface is administratively up (1) or down (0).");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++)
			if (v[i].nics[k].have_link)
				sample_v(b, "hpn_rdma_interface_up", v[i].nics[k].labels,
					 v[i].nics[k].link.up);
	family(b, "hpn_rdma_interface_carrier", "gauge",
	       "Whether the pod's interface has carrier (IFF_RUNNING).");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++)
			if (v[i].nics[k].have_link)
				sample_v(b, "hpn_rdma_interface_carrier", v[i].nics[k].labels,
					 v[i].nics[k].link.running);
	family(b, "hpn_rdma_interface_mtu_bytes", "gauge", "The pod's interface's MTU.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++)
			if (v[i].nics[k].have_link)
				sample_v(b, "hpn_rdma_interface_mtu_bytes", v[i].nics[k].labels,
					 v[i].nics[k].link.mtu);
	for (size_t m = 0; m < HPN_ARRAY_SIZE(f); m++) {
		family(b, f[m].name, "counter", f[m].help);
		for (size_t i = 0; i < n; i++)
			for (size_t k = 0; k < v[i].n_nics; k++)
				if (v[i].nics[k].have_link)
					sample_u64(b, f[m].name, v[i].nics[k].labels,
						   *(const uint64_t
							     *)((const char *)&v[i].nics[k].link +
								f[m].off));
	}
}

static void nics_rdma(struct sbuf *b, struct att_rec *v, size_t n)
{
	family(b, "hpn_rdma_port_state", "gauge",
	       "The RDMA port's state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++)
			if (v[i].nics[k].have_rdma)
				sample_v(b, "hpn_rdma_port_state", v[i].nics[k].labels,
					 v[i].nics[k].rdma->state);
	family(b, "hpn_rdma_port_active", "gauge", "Whether the RDMA port is ACTIVE.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++)
			if (v[i].nics[k].have_rdma)
				sample_v(b, "hpn_rdma_port_active", v[i].nics[k].labels,
					 v[i].nics[k].rdma->state == 4);
	family(b, "hpn_rdma_port_physical_state", "gauge",
	       "The RDMA port's physical state (5 LinkUp, 3 Disabled, 2 Polling; 0 unknown).");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < v[i].n_nics; k++)
			if (v[i].nics[k].have_rdma)
				sample_v(b, "hpn_rdma_port_physical_state", v[i].nics[k].labels,
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
					family(b, canon[c].metric, "counter", canon[c].help);
				head = true;
				sample_u64(b, canon[c].metric, v[i].nics[k].labels, val);
			}
	}
	family(b, "hpn_rdma_port_statistic_total", "counter",
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
				sample_u64(b, "hpn_rdma_port_statistic_total", lab,
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

/* The GPU each NIC of a completed attachment serves (journalled at the claim), and how far. */
static void nics_gpu(struct sbuf *b, struct att_rec *v, size_t n)
{
	family(b, "hpn_rdma_nic_gpu_distance", "gauge",
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
			sample_v(b, "hpn_rdma_nic_gpu_distance", lab, dist_class(jn->gpu_dist));
		}
	family(b, "hpn_rdma_nic_far", "gauge",
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
			sample_v(b, "hpn_rdma_nic_far", lab, health_nic_far(jn));
		}
}

static void attachments(struct sbuf *b, const struct metrics_sources *src, struct att_rec *v,
			size_t n)
{
	const struct health_stats *h = health_stats(src->health);

	family(b, "hpn_rdma_attachments", "gauge",
	       "Attachments the network's journals record (pods holding NICs, or being added).");
	sample_v(b, "hpn_rdma_attachments",
		 (const char *[]){ "network", src->node->conf.name, NULL }, n);
	family(b, "hpn_rdma_attachment_info", "gauge",
	       "One per journalled attachment: its pod, and how far its ADD got (phase).");
	for (size_t i = 0; i < n; i++) {
		const char *lab[17];

		memcpy(lab, v[i].lab, 12 * sizeof(lab[0]));
		lab[12] = "phase";
		lab[13] = phase_name(v[i].j.phase);
		lab[14] = "stale";
		lab[15] = v[i].j.stale ? "true" : "false";
		lab[16] = NULL;
		sample_v(b, "hpn_rdma_attachment_info", lab, 1);
	}
	family(b, "hpn_rdma_attachment_healthy", "gauge",
	       "The health loop's last verdict on the attachment: 1 as ADD left it, 0 broken.");
	for (size_t i = 0; h && i < n; i++)
		for (size_t k = 0; k < h->n; k++)
			if (!strcmp(h->v[k].key, v[i].key) && h->v[k].state >= 0)
				sample_v(b, "hpn_rdma_attachment_healthy", v[i].lab, h->v[k].state);
	family(b, "hpn_rdma_attachment_broken", "gauge",
	       "1 for a broken attachment, with what broke: netns, interface, rdma, hints, state.");
	for (size_t i = 0; h && i < n; i++)
		for (size_t k = 0; k < h->n; k++) {
			const char *lab[15];

			if (strcmp(h->v[k].key, v[i].key) || h->v[k].state != 0)
				continue;
			memcpy(lab, v[i].lab, 12 * sizeof(lab[0]));
			lab[12] = "reason";
			lab[13] = h->v[k].reason ? h->v[k].reason : "check";
			lab[14] = NULL;
			sample_v(b, "hpn_rdma_attachment_broken", lab, 1);
		}
	family(b, "hpn_rdma_attachment_last_check_timestamp_seconds", "gauge",
	       "When the health loop last checked the attachment (unix time).");
	for (size_t i = 0; h && i < n; i++)
		for (size_t k = 0; k < h->n; k++)
			if (!strcmp(h->v[k].key, v[i].key) && h->v[k].state >= 0)
				sample_v(b, "hpn_rdma_attachment_last_check_timestamp_seconds",
					 v[i].lab, h->v[k].checked_at);
	if (h) {
		family(b, "hpn_rdma_health_checks_total", "counter",
		       "Attachments the health loop checked, by verdict (skipped: an ADD or DEL "
		       "was working on it, or it is not a completed attachment of this boot).");
		sample_u64(b, "hpn_rdma_health_checks_total",
			   (const char *[]){ "result", "healthy", NULL }, h->checks_healthy);
		sample_u64(b, "hpn_rdma_health_checks_total",
			   (const char *[]){ "result", "broken", NULL }, h->checks_broken);
		sample_u64(b, "hpn_rdma_health_checks_total",
			   (const char *[]){ "result", "skipped", NULL }, h->checks_skipped);
	}
}

static void pool(struct sbuf *b, const struct metrics_sources *src)
{
	size_t held = 0, free_ = 0, bad = 0;

	for (size_t i = 0; i < src->node->devs.n; i++) {
		held += src->node->devs.v[i].held;
		free_ += !src->node->devs.v[i].held && src->node->devs.v[i].healthy;
		bad += !src->node->devs.v[i].healthy;
	}
	family(b, "hpn_rdma_pool_nics", "gauge",
	       "NICs of the pool, as the device plugin lists them to the kubelet.");
	sample_v(b, "hpn_rdma_pool_nics", (const char *[]){ "resource", src->resource, NULL },
		 src->node->devs.n);
	family(b, "hpn_rdma_pool_nics_held", "gauge", "Pool NICs a journal holds (in pods).");
	sample_v(b, "hpn_rdma_pool_nics_held", (const char *[]){ "resource", src->resource, NULL },
		 held);
	family(b, "hpn_rdma_pool_nics_free", "gauge", "Pool NICs no journal holds, Healthy.");
	sample_v(b, "hpn_rdma_pool_nics_free", (const char *[]){ "resource", src->resource, NULL },
		 free_);
	family(b, "hpn_rdma_pool_nics_unhealthy", "gauge",
	       "Pool NICs the device plugin reports Unhealthy.");
	sample_v(b, "hpn_rdma_pool_nics_unhealthy",
		 (const char *[]){ "resource", src->resource, NULL }, bad);
	family(b, "hpn_rdma_device_healthy", "gauge",
	       "Each device of the pool as the kubelet sees it: 1 Healthy, 0 Unhealthy.");
	for (size_t i = 0; i < src->node->devs.n; i++) {
		const struct agent_dev *d = &src->node->devs.v[i];
		char numa[12];

		snprintf(numa, sizeof(numa), "%d", d->numa);
		sample_v(b, "hpn_rdma_device_healthy",
			 (const char *[]){ "resource", src->resource, "device_id", d->id, "nic",
					   d->ifname, "rdma_device", d->rdma, "numa_node",
					   d->numa >= 0 ? numa : "", NULL },
			 d->healthy);
	}
	family(b, "hpn_rdma_device_held", "gauge",
	       "Each device of the pool: 1 when a journal holds it (a pod has it).");
	for (size_t i = 0; i < src->node->devs.n; i++) {
		const struct agent_dev *d = &src->node->devs.v[i];
		char numa[12];

		snprintf(numa, sizeof(numa), "%d", d->numa);
		sample_v(b, "hpn_rdma_device_held",
			 (const char *[]){ "resource", src->resource, "device_id", d->id, "nic",
					   d->ifname, "rdma_device", d->rdma, "numa_node",
					   d->numa >= 0 ? numa : "", NULL },
			 d->held);
	}
}

static void cni(struct sbuf *b, const struct metrics_sources *src)
{
	const struct cnilog_stats *c = cnilog_stats(src->cnilog);

	if (!c)
		return;
	family(b, "hpn_rdma_cni_commands_total", "counter",
	       "CNI commands the plugin ran (from its event log), by network, command and result "
	       "code (0: success, else the CNI error code).");
	for (size_t i = 0; i < c->n; i++) {
		char code[12];

		snprintf(code, sizeof(code), "%d", c->v[i].code);
		sample_u64(b, "hpn_rdma_cni_commands_total",
			   (const char *[]){ "network", c->v[i].network, "command", c->v[i].command,
					     "code", code, NULL },
			   c->v[i].count);
	}
	family(b, "hpn_rdma_cni_command_duration_seconds", "histogram",
	       "The plugin's own wall time per CNI command, by network, command and result code.");
	for (size_t i = 0; i < c->n; i++) {
		const struct cnilog_series *s = &c->v[i];
		char code[12], le[32];
		const char *lab[] = { "network", s->network, "command", s->command, "code",
				      code,	 "le",	     le,	NULL };

		snprintf(code, sizeof(code), "%d", s->code);
		for (size_t k = 0; k < CNILOG_BUCKETS; k++) {
			snprintf(le, sizeof(le), "%g", cnilog_buckets[k]);
			sample_u64(b, "hpn_rdma_cni_command_duration_seconds_bucket", lab,
				   s->bucket[k]);
		}
		snprintf(le, sizeof(le), "+Inf");
		sample_u64(b, "hpn_rdma_cni_command_duration_seconds_bucket", lab, s->count);
		lab[6] = NULL;
		sample_v(b, "hpn_rdma_cni_command_duration_seconds_sum", lab, s->sum);
		sample_u64(b, "hpn_rdma_cni_command_duration_seconds_count", lab, s->count);
	}
	family(b, "hpn_rdma_cni_events_skipped_total", "counter",
	       "Lines of the plugin's event log that were not a record (or had no series left).");
	sample_u64(b, "hpn_rdma_cni_events_skipped_total", NULL, c->skipped + c->dropped);
}

static void gc(struct sbuf *b, const struct metrics_sources *src)
{
	const struct gc_stats *g = gc_stats(src->gc);

	if (!g)
		return;
	family(b, "hpn_rdma_gc_runs_total", "counter",
	       "GC rounds against the runtime's sandboxes: ok, failed (an undo failed), skipped "
	       "(the runtime could not be asked, or the worker was busy).");
	sample_u64(b, "hpn_rdma_gc_runs_total", (const char *[]){ "result", "ok", NULL },
		   g->runs_ok);
	sample_u64(b, "hpn_rdma_gc_runs_total", (const char *[]){ "result", "failed", NULL },
		   g->runs_failed);
	sample_u64(b, "hpn_rdma_gc_runs_total", (const char *[]){ "result", "skipped", NULL },
		   g->runs_skipped);
	family(b, "hpn_rdma_gc_undone_total", "counter",
	       "Attachments of pods the runtime no longer has that GC undid.");
	sample_u64(b, "hpn_rdma_gc_undone_total", NULL, g->undone);
	family(b, "hpn_rdma_gc_undo_failures_total", "counter",
	       "Attachments whose undo by GC failed (their journals stay for the next round).");
	sample_u64(b, "hpn_rdma_gc_undo_failures_total", NULL, g->failed);
	family(b, "hpn_rdma_gc_last_run_timestamp_seconds", "gauge",
	       "When GC last asked the runtime (unix time; 0: not yet).");
	sample_v(b, "hpn_rdma_gc_last_run_timestamp_seconds", NULL, g->last_run);
	family(b, "hpn_rdma_runtime_up", "gauge",
	       "Whether the runtime answered GC's last ListPodSandbox.");
	sample_v(b, "hpn_rdma_runtime_up", NULL, g->runtime_up);
	family(b, "hpn_rdma_runtime_sandboxes", "gauge",
	       "Pod sandboxes the runtime listed at GC's last ListPodSandbox.");
	sample_v(b, "hpn_rdma_runtime_sandboxes", NULL, (double)g->sandboxes);
}

static void agent_info(struct sbuf *b, const struct metrics_sources *src, const struct metrics *m)
{
	family(b, "hpn_rdma_agent_build_info", "gauge",
	       "Always 1: the agent's version and the libraries it runs on.");
	sample_v(b, "hpn_rdma_agent_build_info",
		 (const char *[]){ "version", HPN_VERSION, "grpc", grpc_version_string(),
				   "microhttpd", MHD_get_version(), NULL },
		 1);
	family(b, "hpn_rdma_agent_start_time_seconds", "gauge",
	       "When the agent started (unix time).");
	sample_v(b, "hpn_rdma_agent_start_time_seconds", NULL, src->start_time);
	family(b, "hpn_rdma_agent_registered", "gauge",
	       "Whether the device plugin is registered with the kubelet.");
	sample_v(b, "hpn_rdma_agent_registered", NULL, deviceplugin_registered(src->dp));
	family(b, "hpn_rdma_agent_collect_duration_seconds", "gauge",
	       "How long the previous collection of the node's counters took.");
	sample_v(b, "hpn_rdma_agent_collect_duration_seconds", NULL, m->collect_s);
	family(b, "hpn_rdma_agent_scrapes_total", "counter", "Requests for /metrics answered.");
	sample_u64(b, "hpn_rdma_agent_scrapes_total", NULL, m->scrapes);
}

static char *render(const struct metrics_sources *src, struct metrics *m, size_t *len)
{
	struct sbuf b = { 0 };
	double t0 = clock_s(CLOCK_MONOTONIC);
	size_t n = 0;
	struct att_rec *v = read_attachments(src, &n);

	agent_info(&b, src, m);
	pool(&b, src);
	attachments(&b, src, v, n);
	nics_link(&b, v, n);
	nics_rdma(&b, v, n);
	nics_gpu(&b, v, n);
	cni(&b, src);
	gc(&b, src);
	free_attachments(v, n);
	m->collect_s = clock_s(CLOCK_MONOTONIC) - t0;
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}

/* ---- HTTP ----------------------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status, const char *type,
			     const char *body, size_t len, bool copy)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, (void *)body, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ok;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_len, void **req)
{
	static int first;
	static const char index_page[] = "hpn-rdma-agent: metrics at /metrics\n";
	struct metrics *m = cls;
	double now;

	/* The first call has the headers only: answer on the next, once the request is whole. */
	if (*req != &first) {
		*req = &first;
		return MHD_YES;
	}
	if (*upload_len) {
		*upload_len = 0; /* a body is read and ignored */
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n", 9, false);
	if (!strcmp(url, "/"))
		return reply(c, MHD_HTTP_OK, "text/plain", index_page, sizeof(index_page) - 1,
			     false);
	if (strcmp(url, "/metrics"))
		return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n", 10, false);
	now = clock_s(CLOCK_MONOTONIC);
	m->scrapes++;
	if (!m->cache || now - m->cache_at >= CACHE_S) {
		size_t len = 0;
		char *text = render(&m->src, m, &len);

		if (!text)
			return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain",
				     "out of memory\n", 14, false);
		free(m->cache);
		m->cache = text;
		m->cache_len = len;
		m->cache_at = now;
	}
	return reply(c, MHD_HTTP_OK, CONTENT_TYPE, m->cache, m->cache_len, true);
}

/* MHD's timeouts (idle connections): run it when the next one is due. */
static void rearm(struct metrics *m)
{
	MHD_UNSIGNED_LONG_LONG ms = 0;

	if (MHD_get_timeout(m->d, &ms) == MHD_YES)
		loop_timer_set(&m->timer, ms ? (int)(ms > 60000 ? 60000 : ms) : 1, 0);
	else
		loop_timer_set(&m->timer, 0, 0);
}

static void on_mhd(struct loop_src *s)
{
	struct metrics *m = s->ud;

	MHD_run(m->d);
	rearm(m);
}

static void on_timer(struct loop_src *s)
{
	struct metrics *m = s->ud;

	MHD_run(m->d);
	rearm(m);
}

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	hpn_warn("metrics: %s", msg);
}

/* "127.0.0.1:9467", "[::1]:9467", "0.0.0.0:0" into sa. */
int metrics_parse_address(const char *s, struct sockaddr_storage *sa, unsigned int *len)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	char *end;
	long port;

	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(host))
		return -EINVAL;
	port = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || port < 0 || port > 65535)
		return -EINVAL;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(sa, 0, sizeof(*sa));
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)sa;

		host[strlen(host) - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
			return -EINVAL;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*s6);
		return 0;
	}
	{
		struct sockaddr_in *s4 = (struct sockaddr_in *)sa;

		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return -EINVAL;
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		*len = sizeof(*s4);
	}
	return 0;
}

int metrics_start(struct loop *l, const char *address, const struct metrics_sources *src,
		  struct metrics **ret)
{
	struct metrics *m = calloc(1, sizeof(*m));
	struct sockaddr_storage sa;
	const union MHD_DaemonInfo *info;
	unsigned int len;
	char host[INET6_ADDRSTRLEN] = "";
	unsigned int flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	int r;

	if (!m)
		return -ENOMEM;
	m->src = *src;
	m->mhd.fd = m->timer.fd = -1;
	r = metrics_parse_address(address, &sa, &len);
	if (r < 0)
		goto fail;
	if (sa.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	m->d = MHD_start_daemon(
		flags, ntohs(((struct sockaddr_in *)&sa)->sin_port), NULL, NULL, on_request, m,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_SOCK_ADDR,
		(struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)MAX_CONNECTIONS,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CONN_TIMEOUT_S, MHD_OPTION_END);
	if (!m->d) {
		hpn_error("metrics: cannot listen on %s", address);
		r = -EADDRNOTAVAIL;
		goto fail;
	}
	info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_EPOLL_FD);
	/* MHD keeps its epoll fd; ours only watches it: a dup, which is ours to close. */
	r = !info || info->epoll_fd < 0 ? -EIO : fcntl(info->epoll_fd, F_DUPFD_CLOEXEC, 0);
	if (r < 0 && r != -EIO)
		r = -errno;
	if (r >= 0)
		r = loop_add(l, &m->mhd, r, on_mhd, m);
	if (r >= 0)
		r = loop_timer(l, &m->timer, 0, 0, on_timer, m);
	if (r < 0)
		goto fail;
	info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
	if (sa.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, host, sizeof(host));
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, host, sizeof(host));
	hpn_info("metrics on http://%s%s%s:%u/metrics", sa.ss_family == AF_INET6 ? "[" : "", host,
		 sa.ss_family == AF_INET6 ? "]" : "", info ? info->port : 0);
	*ret = m;
	return 0;
fail:
	metrics_free(m);
	return r;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	loop_close(&m->mhd);
	loop_close(&m->timer);
	if (m->d)
		MHD_stop_daemon(m->d);
	free(m->cache);
	free(m);
}
