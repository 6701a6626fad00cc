// SPDX-License-Identifier: Apache-2.0
#include "doctor.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qos.h"
#include "rdma.h"
#include "util.h"

static void cjson_deletep(cJSON **p)
{
	cJSON_Delete(*p);
}
#define _cleanup_cjson_ __attribute__((cleanup(cjson_deletep)))

static const char *state_name(enum hpn_check_state s)
{
	static const char *const names[] = { "ok", "skip", "warn", "fail" };

	return names[s];
}

/* Appends " what a,b,c" for a non-empty match list. */
static void match_list(FILE *f, const char *what, char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? "," : what, v[i]);
}

static const char *selector_text(const struct hpn_doctor *d, char *buf, size_t len)
{
	static const char *const keys[] = {
		[HPN_SEL_DEVICE] = "device",   [HPN_SEL_HWADDR] = "hwaddr",
		[HPN_SEL_PCI] = "pciBusID",    [HPN_SEL_DEVICE_ID] = "runtimeConfig.deviceID",
		[HPN_SEL_RDMA] = "rdmaDevice",
	};
	const struct hpn_conf *c = &d->conf;
	const struct hpn_match *m = &c->match;
	FILE *f;

	if (d->conf_device_plugin && c->selector == HPN_SEL_DEVICE_ID)
		return "runtimeConfig.deviceID (from the device plugin)";
	if (c->selector == HPN_SEL_RDMA && c->rdma_port) {
		snprintf(buf, len, "rdmaDevice %s:%u", c->selector_value, c->rdma_port);
	} else if (c->selector == HPN_SEL_MATCH && (f = fmemopen(buf, len, "w"))) {
		fprintf(f, "match (count %u):", c->count);
		match_list(f, " devices ", m->devices, m->n_devices);
		match_list(f, " drivers ", m->drivers, m->n_drivers);
		match_list(f, " rdmaDevices ", m->rdma_devices, m->n_rdma_devices);
		match_list(f, " pci ", m->pci, m->n_pci);
		if (m->has_numa_node)
			fprintf(f, " numaNode %d", m->numa_node);
		fclose(f);
	} else if (c->selector > HPN_SEL_NONE && c->selector < HPN_ARRAY_SIZE(keys) &&
		   keys[c->selector] && c->selector_value) {
		snprintf(buf, len, "%s %s", keys[c->selector], c->selector_value);
	} else {
		snprintf(buf, len, "nothing (no selector)");
	}
	return buf;
}

/* "3,4" for the priorities of mask into buf (at least 16 bytes); "none" for 0. */
static void prio_list(uint8_t mask, char *buf, size_t len)
{
	size_t n = 0;

	snprintf(buf, len, "none");
	for (int p = 0; p < HPN_QOS_PRIOS; p++)
		if (mask & (1u << p))
			n += (size_t)snprintf(buf + n, len - n, "%s%d", n ? "," : "", p);
}

/*
 * The DSCP entries as runs of consecutive DSCP values with the same
 * priorities: "0-7:0 8-15:1 26:3 48:3+6"; "-" when there are none.
 */
static void dscp_runs(const struct hpn_qos *q, FILE *f)
{
	bool any = false;

	for (int d = 0; d < HPN_QOS_DSCPS;) {
		uint8_t m = q->dscp_prio[d];
		int end = d;

		while (end + 1 < HPN_QOS_DSCPS && q->dscp_prio[end + 1] == m)
			end++;
		if (m) {
			fprintf(f, any ? " %d" : "%d", d);
			if (end > d)
				fprintf(f, "-%d", end);
			for (int p = 0, first = 1; p < HPN_QOS_PRIOS; p++)
				if (m & (1u << p)) {
					fprintf(f, "%c%d", first ? ':' : '+', p);
					first = 0;
				}
			any = true;
		}
		d = end + 1;
	}
	if (!any)
		fputs("-", f);
}

static const char *qos_dcb_text(const struct hpn_doctor_qos *o)
{
	if (o->q.state != HPN_QOS_UNREAD)
		return hpn_qos_state_name(o->q.state);
	return o->dcb_asked ? "error" : "not read";
}

/* Under a QoS row: the class the config's hints give a RoCE NIC there, and whether it is lossless. */
static void hints_text(const struct hpn_doctor *d, const struct hpn_doctor_qos *o, FILE *f)
{
	const struct hpn_rdma_qos *h = &o->hints;
	const char *model = d->conf.gpu_model ? d->conf.gpu_model : "auto";

	if (!o->judged)
		return;
	if (!h->lossless[0]) {
		fprintf(f, "  hints (%s): %s\n", model, h->note);
		return;
	}
	fprintf(f,
		"  hints (%s%s): NCCL_IB_TC=%d NCCL_IB_FIFO_TC=%d NCCL_IB_SL=%d, lossless %s%s%s\n",
		model, d->conf.nccl.tc_auto ? ", trafficClass auto" : "", h->tc, h->fifo_tc, h->sl,
		h->lossless, h->note[0] ? ": " : "", h->note);
}

/* The RoCE QoS table: one row per netdev, an error under its row, the hints' class below. */
static void qos_text(const struct hpn_doctor *d, FILE *f)
{
	fprintf(f, "\n%-15s %-8s %-8s %-6s %-9s %-8s %-8s %s\n", "QOS NETDEV", "DCB", "PFC",
		"TRUST", "DCBX", "ECN NP", "ECN RP", "DSCP:PRIORITY");
	for (size_t i = 0; i < d->n_qos; i++) {
		const struct hpn_doctor_qos *o = &d->qos[i];
		const struct hpn_qos *q = &o->q;
		bool dcb = q->state == HPN_QOS_DCB;
		char pfc[32] = "-", np[32] = "-", rp[32] = "-";

		if (dcb && q->pfc_known)
			prio_list(q->pfc_en, pfc, sizeof(pfc));
		if (q->ecn_np_known)
			prio_list(q->ecn_np, np, sizeof(np));
		if (q->ecn_rp_known)
			prio_list(q->ecn_rp, rp, sizeof(rp));
		fprintf(f, "%-15s %-8s %-8s %-6s %-9s %-8s %-8s ", o->netdev, qos_dcb_text(o), pfc,
			dcb ? (hpn_qos_trust_dscp(q) ? "dscp" : "pcp") : "-",
			dcb ? hpn_qos_dcbx_name(hpn_qos_dcbx_mode(q)) : "-", np, rp);
		dscp_runs(q, f);
		fputc('\n', f);
		if (o->error[0])
			fprintf(f, "  %s\n", o->error);
		hints_text(d, o, f);
	}
	if (!d->n_qos)
		fprintf(f, "(no host netdev to read)\n");
}

/*
 * What NCCL sees of each RDMA port: the device's kind and transport (erdma's
 * mode), whether its IB transport can use it, the GID index of the netdev's
 * IPv4 address here, and the exact NCCL_IB_HCA the hints write.
 */
static void nccl_text(const struct hpn_doctor *d, FILE *f)
{
	size_t rows = 0;

	for (size_t i = 0; i < d->n_nics; i++) {
		const struct hpn_doctor_nic *n = &d->nics[i];
		char kind[32], gid[16] = "-";

		if (!n->rdma[0] || !n->kind[0])
			continue;
		if (!rows++)
			fprintf(f, "\n%-15s %-4s %-14s %-3s %-4s %s\n", "NCCL VIEW", "PORT", "KIND",
				"IB", "GID", "NCCL_IB_HCA");
		snprintf(kind, sizeof(kind), "%s %s", n->kind,
			 n->erdma_mode[0] ? n->erdma_mode : n->transport);
		if (n->gid_index >= 0)
			snprintf(gid, sizeof(gid), "%d", n->gid_index);
		fprintf(f, "%-15s %-4u %-14s %-3s %-4s %s\n", n->rdma, n->port, kind,
			n->nccl_ib ? "yes" : "no", gid,
			n->nccl_ib ? n->hca
				   : "- (iWARP: its QPs connect through iw_cm only; the hints say "
				     "NCCL_IB_DISABLE=1)");
	}
}

static size_t n_failed(const struct hpn_doctor *d)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n_checks; i++)
		n += d->checks[i].state == HPN_CHECK_FAIL;
	return n;
}

char *hpn_doctor_render_text(const struct hpn_doctor *d)
{
	char *out = NULL;
	size_t len = 0, fails;
	FILE *f = open_memstream(&out, &len);

	if (!f)
		return NULL;
	fprintf(f, "hpn-rdma doctor %s\n\n", HPN_VERSION);
	fprintf(f, "config      %s\n", d->conf_file[0] ? d->conf_file : "(none found)");
	if (d->conf_valid) {
		char sel[128];

		fprintf(f, "network     %s (cniVersion %s", d->conf.name, d->conf.cni_version);
		if (d->conf_plugin >= 0)
			fprintf(f, ", plugin %d of the list", d->conf_plugin + 1);
		fprintf(f, ")\n");
		fprintf(f, "selects     %s\n", selector_text(d, sel, sizeof(sel)));
		fprintf(f, "rdma        rdmaRequired %s, rdmaNetns %s\n",
			d->conf.rdma_required ? "true" : "false",
			hpn_rdma_netns_name(d->conf.rdma_netns));
		fprintf(f, "stateDir    %s\n", d->conf.state_dir);
	}
	fprintf(f, "sysfsRoot   %s\n", d->sysfs_root);
	fprintf(f, "netns mode  %s\n",
		d->rdma_subsystem ? hpn_rdma_netns_name(d->netns_mode)
				  : "none (no RDMA subsystem)");
	fprintf(f, "modules    ");
	for (size_t i = 0; i < d->n_modules; i++)
		fprintf(f, " %s", d->modules[i]);
	fprintf(f, "%s\n\n", d->n_modules ? "" : " (no RDMA modules)");

	fprintf(f, "%-15s %-12s %-10s %-10s %-4s %-6s %-10s %-5s %-4s %s\n", "NETDEV", "PCI",
		"DRIVER", "RDMA", "PORT", "STATE", "LINK", "MTU", "NUMA", "HELD BY");
	for (size_t i = 0; i < d->n_nics; i++) {
		const struct hpn_doctor_nic *n = &d->nics[i];
		char mtu[16] = "-", numa[16] = "-", port[16] = "-", held[400] = "-";

		if (n->mtu >= 0)
			snprintf(mtu, sizeof(mtu), "%d", n->mtu);
		if (n->numa >= 0)
			snprintf(numa, sizeof(numa), "%d", n->numa);
		if (n->port)
			snprintf(port, sizeof(port), "%u", n->port);
		if (n->held_container[0])
			snprintf(held, sizeof(held), "%s/%.12s as %s%s", n->held_network,
				 n->held_container, n->held_ifname,
				 n->held_releasing  ? " (being released)"
				 : n->held_complete ? ""
						    : " (ADD unfinished)");
		fprintf(f, "%-15s %-12s %-10s %-10s %-4s %-6s %-10s %-5s %-4s %s\n",
			n->netdev[0] ? n->netdev : "-", n->pci[0] ? n->pci : "-",
			n->driver[0] ? n->driver : "-", n->rdma[0] ? n->rdma : "-", port,
			n->state[0] ? n->state : "-", n->link_layer[0] ? n->link_layer : "-", mtu,
			numa, held);
	}
	if (!d->n_nics)
		fprintf(f, "(no RDMA devices)\n");
	nccl_text(d, f);
	qos_text(d, f);

	fprintf(f, "\nchecks\n");
	for (size_t i = 0; i < d->n_checks; i++)
		fprintf(f, "  %-4s  %-8s  %s\n", state_name(d->checks[i].state), d->checks[i].name,
			d->checks[i].msg);
	fails = n_failed(d);
	if (fails)
		fprintf(f, "\nverdict: NOT READY (%zu problem%s)\n", fails, fails == 1 ? "" : "s");
	else
		fprintf(f, "\nverdict: READY\n");
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

static void add_str_or_null(cJSON *o, const char *key, const char *v)
{
	if (v && v[0])
		cJSON_AddStringToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

static void add_int_or_null(cJSON *o, const char *key, int v)
{
	if (v >= 0)
		cJSON_AddNumberToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

/* [p, ...] of the priorities in mask. */
static cJSON *prio_array(uint8_t mask)
{
	cJSON *a = cJSON_CreateArray();

	for (int p = 0; a && p < HPN_QOS_PRIOS; p++)
		if (mask & (1u << p))
			cJSON_AddItemToArray(a, cJSON_CreateNumber(p));
	return a;
}

/* "hints": the class the config's hints give a RoCE NIC there, and its verdict; null: not judged. */
static void hints_json(const struct hpn_doctor_qos *o, cJSON *j)
{
	const struct hpn_rdma_qos *h = &o->hints;
	cJSON *x;

	if (!o->judged) {
		cJSON_AddNullToObject(j, "hints");
		return;
	}
	x = cJSON_AddObjectToObject(j, "hints");
	if (!x)
		return;
	if (h->lossless[0]) {
		cJSON_AddNumberToObject(x, "trafficClass", h->tc);
		cJSON_AddNumberToObject(x, "fifoTrafficClass", h->fifo_tc);
		cJSON_AddNumberToObject(x, "serviceLevel", h->sl);
	}
	add_str_or_null(x, "lossless", h->lossless);
	add_str_or_null(x, "note", h->note);
}

static void qos_json(const struct hpn_doctor_qos *o, cJSON *j)
{
	const struct hpn_qos *q = &o->q;
	bool dcb = q->state == HPN_QOS_DCB;
	cJSON *m, *e;

	hints_json(o, j);
	cJSON_AddStringToObject(j, "netdev", o->netdev);
	cJSON_AddStringToObject(j, "dcb", hpn_qos_state_name(q->state));
	cJSON_AddBoolToObject(j, "dcbAsked", o->dcb_asked);
	add_str_or_null(j, "error", o->error);
	if (dcb && q->pfc_known) {
		cJSON_AddItemToObject(j, "pfc", prio_array(q->pfc_en));
		cJSON_AddNumberToObject(j, "pfcCap", q->pfc_cap);
	} else {
		cJSON_AddNullToObject(j, "pfc");
		cJSON_AddNullToObject(j, "pfcCap");
	}
	add_str_or_null(j, "trust", dcb ? (hpn_qos_trust_dscp(q) ? "dscp" : "pcp") : NULL);
	m = dcb ? cJSON_AddObjectToObject(j, "dscpPrio") : cJSON_AddNullToObject(j, "dscpPrio");
	for (int d = 0; dcb && m && d < HPN_QOS_DSCPS; d++) {
		char key[4];

		if (!q->dscp_prio[d])
			continue;
		snprintf(key, sizeof(key), "%d", d);
		cJSON_AddItemToObject(m, key, prio_array(q->dscp_prio[d]));
	}
	add_str_or_null(j, "dcbx", dcb ? hpn_qos_dcbx_name(hpn_qos_dcbx_mode(q)) : NULL);
	add_int_or_null(j, "dcbxRaw", q->dcbx);
	e = cJSON_AddObjectToObject(j, "ecn");
	if (!e)
		return;
	if (q->ecn_np_known)
		cJSON_AddItemToObject(e, "np", prio_array(q->ecn_np));
	else
		cJSON_AddNullToObject(e, "np");
	if (q->ecn_rp_known)
		cJSON_AddItemToObject(e, "rp", prio_array(q->ecn_rp));
	else
		cJSON_AddNullToObject(e, "rp");
}

char *hpn_doctor_render_json(const struct hpn_doctor *d)
{
	_cleanup_cjson_ cJSON *root = cJSON_CreateObject();
	cJSON *c, *a;

	if (!root)
		return NULL;
	cJSON_AddStringToObject(root, "version", HPN_VERSION);
	cJSON_AddBoolToObject(root, "ready", n_failed(d) == 0);
	c = cJSON_AddObjectToObject(root, "config");
	add_str_or_null(c, "file", d->conf_file);
	cJSON_AddBoolToObject(c, "valid", d->conf_valid);
	if (d->conf_valid) {
		char sel[128];

		cJSON_AddStringToObject(c, "network", d->conf.name);
		cJSON_AddStringToObject(c, "cniVersion", d->conf.cni_version);
		if (d->conf_plugin >= 0)
			cJSON_AddNumberToObject(c, "pluginIndex", d->conf_plugin);
		cJSON_AddStringToObject(c, "selects", selector_text(d, sel, sizeof(sel)));
		cJSON_AddBoolToObject(c, "rdmaRequired", d->conf.rdma_required);
		cJSON_AddStringToObject(c, "rdmaNetns", hpn_rdma_netns_name(d->conf.rdma_netns));
		cJSON_AddStringToObject(c, "stateDir", d->conf.state_dir);
	} else {
		cJSON_AddNumberToObject(c, "code", d->conf_err.code);
		cJSON_AddStringToObject(c, "error", d->conf_err.msg);
	}
	cJSON_AddStringToObject(root, "sysfsRoot", d->sysfs_root);
	add_str_or_null(root, "netnsMode",
			d->rdma_subsystem ? hpn_rdma_netns_name(d->netns_mode) : NULL);
	a = cJSON_AddArrayToObject(root, "modules");
	for (size_t i = 0; a && i < d->n_modules; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(d->modules[i]));
	a = cJSON_AddArrayToObject(root, "nics");
	for (size_t i = 0; a && i < d->n_nics; i++) {
		const struct hpn_doctor_nic *n = &d->nics[i];
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(a, o))
			break;
		add_str_or_null(o, "netdev", n->netdev);
		add_str_or_null(o, "pci", n->pci);
		add_str_or_null(o, "driver", n->driver);
		add_str_or_null(o, "rdmaDevice", n->rdma);
		add_int_or_null(o, "port", n->port ? (int)n->port : -1);
		add_str_or_null(o, "state", n->state);
		add_str_or_null(o, "linkLayer", n->link_layer);
		add_int_or_null(o, "mtu", n->mtu);
		add_int_or_null(o, "numaNode", n->numa);
		add_str_or_null(o, "netdevPci", n->netdev_pci);
		cJSON_AddBoolToObject(o, "vf", n->vf);
		add_str_or_null(o, "kind", n->kind);
		add_str_or_null(o, "transport", n->transport);
		add_str_or_null(o, "erdmaMode", n->erdma_mode);
		if (n->rdma[0] && n->kind[0]) {
			cJSON *nc = cJSON_AddObjectToObject(o, "nccl");

			cJSON_AddBoolToObject(nc, "ib", n->nccl_ib);
			add_int_or_null(nc, "gidIndex", n->gid_index);
			add_str_or_null(nc, "hca", n->hca);
		} else {
			cJSON_AddNullToObject(o, "nccl");
		}
		if (n->held_container[0]) {
			cJSON *h = cJSON_AddObjectToObject(o, "heldBy");

			cJSON_AddStringToObject(h, "network", n->held_network);
			cJSON_AddStringToObject(h, "containerId", n->held_container);
			cJSON_AddStringToObject(h, "ifName", n->held_ifname);
			cJSON_AddBoolToObject(h, "attached", n->held_complete);
			cJSON_AddBoolToObject(h, "releasing", n->held_releasing);
		} else {
			cJSON_AddNullToObject(o, "heldBy");
		}
	}
	a = cJSON_AddArrayToObject(root, "qos");
	for (size_t i = 0; a && i < d->n_qos; i++) {
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(a, o))
			break;
		qos_json(&d->qos[i], o);
	}
	a = cJSON_AddArrayToObject(root, "checks");
	for (size_t i = 0; a && i < d->n_checks; i++) {
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(a, o))
			break;
		cJSON_AddStringToObject(o, "name", d->checks[i].name);
		cJSON_AddStringToObject(o, "state", state_name(d->checks[i].state));
		cJSON_AddStringToObject(o, "message", d->checks[i].msg);
	}
	a = cJSON_AddArrayToObject(root, "reasons");
	for (size_t i = 0; a && i < d->n_checks; i++)
		if (d->checks[i].state == HPN_CHECK_FAIL)
			cJSON_AddItemToArray(a, cJSON_CreateString(d->checks[i].msg));
	return cJSON_Print(root);
}
