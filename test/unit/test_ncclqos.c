// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/ncclqos.c (the hints' traffic class against each NIC's
 * RoCE QoS: nccl.trafficClass auto, the verdict, the warning, the refusal)
 * and the config and result fields that carry it; and doc/nccl.md's table
 * "Every setting, by NIC and profile", each row rendered as ADD renders it:
 * the file and the result's nccl.env must both hold exactly the row's
 * settings, in its order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "conf.h"
#include "nccl.h"
#include "qos.h"
#include "result.h"
#include "util.h"

#define DOC HPN_FIXTURES "/../../doc/nccl.md"

/* The node QoS the table names, as lib/qos.c decodes it. */
static int node_qos(const char *name, struct hpn_qos *q)
{
	hpn_qos_init(q);
	if (!strcmp(name, "not read"))
		return 0;
	if (!strcmp(name, "no DCB")) {
		q->state = HPN_QOS_NO_DCB;
		return 1;
	}
	q->state = HPN_QOS_DCB;
	q->pfc_known = true;
	if (strstr(name, "mlx5's map")) {
		/* mlx5 at trust DSCP fills the APP table with its default: DSCP d to d/8. */
		for (int d = 0; d < HPN_QOS_DSCPS; d++)
			q->dscp_prio[d] = (uint8_t)(1u << (d >> 3));
		q->n_dscp = HPN_QOS_DSCPS;
	} else if (!strstr(name, "trust PCP")) {
		return -1;
	}
	if (!strncmp(name, "PFC 3 and 4,", 12))
		q->pfc_en = 0x18;
	else if (!strncmp(name, "PFC 3,", 6))
		q->pfc_en = 0x08;
	else if (!strncmp(name, "PFC 4,", 6))
		q->pfc_en = 0x10;
	else if (strncmp(name, "no PFC,", 7))
		return -1;
	return 1;
}

/* A result binding the table's NIC kind on hpn0 (and hpn1). */
static struct hpn_result *nic_kind(const char *kind)
{
	static const struct {
		const char *kind, *dev, *driver, *transport;
		int gid;
	} kinds[] = {
		{ "mlx5 RoCE", "mlx5_2", "mlx5", "roce", 3 },
		{ "mlx5 RoCE, 2 NICs", "mlx5_2", "mlx5", "roce", 3 },
		{ "mlx5 IB", "mlx5_2", "mlx5", "ib", -1 },
		{ "eRDMA default (iWARP)", "erdma_2", "erdma", "iwarp", 0 },
		{ "eRDMA compat", "erdma_2", "erdma", "roce", 1 },
		{ "eRDMA OFED", "rocep26s0", "erdma", "roce", 1 },
		{ "Soft-RoCE", "rxe_2", "rxe", "roce", 1 },
	};
	struct hpn_result *res;
	size_t n;

	for (size_t k = 0; k < HPN_ARRAY_SIZE(kinds); k++) {
		if (strcmp(kind, kinds[k].kind))
			continue;
		res = hpn_result_new();
		n = strstr(kind, "2 NICs") ? 2 : 1;
		for (size_t i = 0; i < n; i++) {
			char name[24];
			struct hpn_iface ifc = { .name = name };
			struct hpn_rdma_info *ri = &res->rdma[res->n_rdma++];

			snprintf(name, sizeof(name), "hpn%zu", i);
			hpn_result_add_iface(res, &ifc);
			*ri = (struct hpn_rdma_info){ .interface = (int)i,
						      .bound = true,
						      .port = 1 };
			ri->gid_index = kinds[k].gid + 2 * (int)i;
			snprintf(ri->device, sizeof(ri->device), "%s", kinds[k].dev);
			if (i)
				snprintf(ri->device, sizeof(ri->device), "mlx5_3");
			snprintf(ri->driver, sizeof(ri->driver), "%s", kinds[k].driver);
			snprintf(ri->transport, sizeof(ri->transport), "%s", kinds[k].transport);
		}
		res->ips[0] =
			(struct hpn_ipcfg){ .address = strdup("10.200.0.2/24"), .interface = 0 };
		res->n_ips = 1;
		return res;
	}
	return NULL;
}

/*
 * ADD's hints for res on QoS q (NULL: not read) with model's profile:
 * hpn_nccl_render, hpn_nccl_qos, as hints_prepare calls them. The settings
 * as "K=V K=V" from the file read back and from the result rendered and
 * parsed (they must agree: "MISMATCH" otherwise), or "refused <code>";
 * lossless: NIC 0's verdict.
 */
static char *add_hints(const struct hpn_nccl_conf *nc, const char *model, struct hpn_result *res,
		       const struct hpn_qos *q, char lossless[8])
{
	struct hpn_bound_nic b[HPN_MAX_RDMA];
	struct hpn_rdma_qos rq[HPN_MAX_RDMA] = { 0 };
	size_t n = hpn_result_bound(res, b, HPN_MAX_RDMA);
	struct hpn_nccl_owner o = { .container_id = "c", .network = "net", .ifname = "eth0" };
	struct hpn_vars file = { 0 };
	struct hpn_result *back = NULL;
	struct hpn_err err = { 0 };
	char *out = calloc(1, 4096), *text, *json, *line;
	bool mine = false;
	size_t off = 0;
	int r;

	for (size_t i = 0; i < n; i++)
		b[i].qos = q;
	r = hpn_nccl_render(nc, hpn_nccl_profile(nc, model), b, n, &res->nccl, &err);
	if (r >= 0)
		r = hpn_nccl_qos(nc, b, n, &res->nccl, rq, &err);
	if (r < 0) {
		snprintf(out, 4096, "refused %d", err.code);
		return out;
	}
	for (size_t i = 0; i < n; i++)
		res->rdma[i].qos = rq[i];
	snprintf(lossless, 8, "%s", rq[0].lossless);
	res->nccl_file = strdup("/run/hpn-rdma/pods/k/nccl.conf");
	text = hpn_nccl_format(&res->nccl, &o, NULL, b, n);
	line = hpn_nccl_owner_line(&o);
	CHECK(text && line && hpn_nccl_parse(text, line, &file, &mine) >= 0 && mine);
	json = hpn_result_render(res, "1.1.0");
	CHECK(json && hpn_result_parse(json, strlen(json), &back, &err) >= 0);
	if (!back || !hpn_vars_equal(&back->nccl, &file) || back->nccl.n != res->nccl.n) {
		snprintf(out, 4096, "MISMATCH");
	} else {
		for (size_t i = 0; i < file.n; i++)
			off += (size_t)snprintf(out + off, 4096 - off, "%s%s=%s", i ? " " : "",
						file.v[i].key, file.v[i].value);
		/* The result's order is the file's. */
		for (size_t i = 0; i < file.n; i++)
			CHECK_STR_EQ(back->nccl.v[i].key, file.v[i].key);
		/* And the verdict round-trips. */
		CHECK_STR_EQ(back->rdma[0].qos.lossless, rq[0].lossless);
		CHECK_INT_EQ(back->rdma[0].qos.tc, rq[0].tc);
	}
	hpn_result_free(back);
	hpn_vars_free(&file);
	free(text);
	free(line);
	free(json);
	return out;
}

static struct hpn_nccl_conf *nconf(bool tc_auto, bool required)
{
	static struct hpn_nccl_conf nc;

	hpn_nccl_conf_free(&nc);
	memset(&nc, 0, sizeof(nc));
	nc.enabled = true;
	nc.dir = strdup("/run/hpn-rdma/pods");
	nc.tc_auto = tc_auto;
	nc.lossless_required = required;
	return &nc;
}

/* The cells of a table row "| a | | c |", trimmed (empty ones kept), into cell. */
static int cells(char *line, char *cell[8])
{
	char *c = strchr(line, '|');
	int n = 0;

	while (c && n < 8) {
		char *end = strchr(c + 1, '|');

		if (!end)
			break;
		*end = '\0';
		for (c++; *c == ' '; c++)
			;
		for (size_t l = strlen(c); l && c[l - 1] == ' '; l--)
			c[l - 1] = '\0';
		cell[n++] = c;
		c = end;
	}
	return n;
}

/* "`A=1` `B=`" as "A=1 B=". */
static void settings(const char *cell, char *out, size_t len)
{
	size_t off = 0;

	out[0] = '\0';
	for (const char *p = strchr(cell, '`'); p && off < len; p = strchr(p, '`')) {
		const char *end = strchr(p + 1, '`');

		if (!end)
			break;
		off += (size_t)snprintf(out + off, len - off, "%s%.*s", off ? " " : "",
					(int)(end - p - 1), p + 1);
		p = end + 1;
	}
}

static void test_table(void)
{
	FILE *f = fopen(DOC, "r");
	char line[4096];
	bool in = false;
	int rows = 0, refused = 0, warned_kinds = 0;

	CHECK(f != NULL);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *c[8], want[2048], lossless[8] = "", copy[4096];
		struct hpn_result *res;
		struct hpn_qos q;
		char *got;
		int kq;

		if (strstr(line, "<!-- settings-table -->")) {
			in = true;
			continue;
		}
		if (strstr(line, "<!-- /settings-table -->"))
			break;
		if (!in || line[0] != '|' || strstr(line, "---|") || strstr(line, "NIC kind, mode"))
			continue;
		snprintf(copy, sizeof(copy), "%s", line);
		if (cells(line, c) != 7) {
			fprintf(stderr, "\tbad row: %s", copy);
			CHECK(false);
			continue;
		}
		rows++;
		res = nic_kind(c[0]);
		kq = node_qos(c[1], &q);
		if (!res || kq < 0) {
			fprintf(stderr, "\tunknown NIC kind or QoS: %s", copy);
			CHECK(false);
			hpn_result_free(res);
			continue;
		}
		/* ADD reads QoS for RoCE NICs of any driver but erdma, and for no other. */
		CHECK_INT_EQ(kq == 0, strstr(c[0], "eRDMA") || strstr(c[0], " IB"));
		got = add_hints(
			nconf(strstr(c[3], "auto") != NULL, strstr(c[3], "required") != NULL), c[2],
			res, kq ? &q : NULL, lossless);
		if (!strncmp(c[4], "refused", 7)) {
			snprintf(want, sizeof(want), "%s", c[4]);
			refused++;
		} else {
			settings(c[4], want, sizeof(want));
		}
		if (strcmp(got, want) || (strncmp(want, "refused", 7) && strcmp(lossless, c[5])))
			fprintf(stderr, "\trow: %s\tgot: %s (lossless %s)\n", copy, got, lossless);
		CHECK_STR_EQ(got, want);
		if (strncmp(want, "refused", 7))
			CHECK_STR_EQ(lossless, c[5]);
		warned_kinds += !strcmp(lossless, "no");
		free(got);
		hpn_result_free(res);
	}
	fclose(f);
	/* The table is there, whole: every kind, refusals and lossy rows among them. */
	CHECK(rows >= 20);
	CHECK(refused >= 3);
	CHECK(warned_kinds >= 3);
}

/* The verdict's notes: the warning names the class, the NIC and the PFC priority. */
static void test_verdict(void)
{
	struct hpn_rdma_qos rq = { .tc = 136, .fifo_tc = 136, .sl = 5 };
	struct hpn_qos q;

	node_qos("PFC 3, mlx5's map", &q);
	hpn_nccl_qos_verdict(&q, "hpn0", &rq);
	CHECK_STR_EQ(rq.lossless, "no");
	CHECK_STR_EQ(rq.dcb, "ieee");
	CHECK_STR_EQ(rq.trust, "dscp");
	CHECK_INT_EQ(rq.pfc, 8);
	CHECK_STR_EQ(rq.note, "NCCL_IB_TC=136 (DSCP 34) on hpn0 rides priority 4 without PFC "
			      "(trust DSCP; PFC is on for 3)");
	/* The data class lossless, the FIFO's not: the FIFO's is named. */
	rq = (struct hpn_rdma_qos){ .tc = 104, .fifo_tc = 0, .sl = 0 };
	hpn_nccl_qos_verdict(&q, "hpn0", &rq);
	CHECK_STR_EQ(rq.lossless, "no");
	CHECK_STR_HAS(rq.note, "NCCL_IB_FIFO_TC=0 (DSCP 0) on hpn0 rides priority 0");
	rq = (struct hpn_rdma_qos){ .tc = 104, .fifo_tc = 104, .sl = 0 };
	hpn_nccl_qos_verdict(&q, "hpn0", &rq);
	CHECK_STR_EQ(rq.lossless, "yes");
	CHECK_STR_EQ(rq.note, "");
	node_qos("PFC 3, trust PCP", &q);
	rq = (struct hpn_rdma_qos){ .tc = 136, .fifo_tc = 136, .sl = 5 };
	hpn_nccl_qos_verdict(&q, "hpn0", &rq);
	CHECK_STR_EQ(rq.trust, "pcp");
	CHECK_STR_EQ(rq.note, "NCCL_IB_SL=5 on hpn0 rides priority 5 without PFC (trust PCP; PFC "
			      "is on for 3)");
	/* Unread, no DCB, a class NCCL cannot carry: unknown, and why. */
	hpn_nccl_qos_verdict(NULL, "hpn0", &rq);
	CHECK_STR_EQ(rq.lossless, "unknown");
	CHECK_STR_EQ(rq.dcb, "error");
	CHECK_STR_EQ(rq.note, "the QoS of hpn0 could not be read");
	node_qos("no DCB", &q);
	hpn_nccl_qos_verdict(&q, "hpn0", &rq);
	CHECK_STR_EQ(rq.dcb, "none");
	CHECK_INT_EQ(rq.pfc, -1);
	CHECK_STR_EQ(rq.note, "hpn0 reports no DCB: no class is known lossless");
	node_qos("PFC 3, mlx5's map", &q);
	rq = (struct hpn_rdma_qos){ .tc = -1, .fifo_tc = 0, .sl = 0 };
	hpn_nccl_qos_verdict(&q, "hpn0", &rq);
	CHECK_STR_EQ(rq.lossless, "unknown");
	CHECK_STR_HAS(rq.note, "not a number");
}

/* auto on APP tables that are not mlx5's default; the refusal's words. */
static void test_auto(void)
{
	struct hpn_result *res = nic_kind("mlx5 RoCE");
	struct hpn_bound_nic b[HPN_MAX_RDMA];
	struct hpn_rdma_qos rq[HPN_MAX_RDMA] = { 0 };
	struct hpn_err err = { 0 };
	struct hpn_vars v = { 0 };
	struct hpn_qos q;
	size_t n = hpn_result_bound(res, b, HPN_MAX_RDMA);

	/* DSCP 26 is not mapped to 3 alone: the lowest that is (40), as TC 160. */
	node_qos("PFC 3, mlx5's map", &q);
	memset(q.dscp_prio, 0, sizeof(q.dscp_prio));
	q.dscp_prio[26] = 0x0c;
	q.dscp_prio[40] = 0x08;
	q.dscp_prio[41] = 0x08;
	b[0].qos = &q;
	hpn_vars_set(&v, "NCCL_IB_DISABLE", "0");
	CHECK_INT_EQ(hpn_nccl_qos(nconf(true, false), b, n, &v, rq, &err), 0);
	CHECK_STR_EQ(hpn_vars_get(&v, "NCCL_IB_TC"), "160");
	CHECK_STR_EQ(hpn_vars_get(&v, "NCCL_IB_FIFO_TC"), "160");
	CHECK_STR_EQ(rq[0].lossless, "yes");
	/* An NCCL_IB_FIFO_TC already lossless stays. */
	hpn_vars_set(&v, "NCCL_IB_FIFO_TC", "164");
	hpn_vars_set(&v, "NCCL_IB_TC", "0");
	CHECK_INT_EQ(hpn_nccl_qos(nconf(true, false), b, n, &v, rq, &err), 0);
	CHECK_STR_EQ(hpn_vars_get(&v, "NCCL_IB_FIFO_TC"), "164");
	CHECK_INT_EQ(rq[0].fifo_tc, 164);
	/* No DSCP maps to 3 alone: none derived, the note says why; required refuses. */
	q.dscp_prio[40] = q.dscp_prio[41] = 0;
	hpn_vars_free(&v);
	hpn_vars_set(&v, "NCCL_IB_DISABLE", "0");
	CHECK_INT_EQ(hpn_nccl_qos(nconf(true, false), b, n, &v, rq, &err), 0);
	CHECK(hpn_vars_get(&v, "NCCL_IB_TC") == NULL);
	CHECK_STR_EQ(rq[0].lossless, "no");
	CHECK_INT_EQ(hpn_nccl_qos(nconf(true, true), b, n, &v, rq, &err), -EPROTO);
	CHECK_INT_EQ(err.code, HPN_E_RDMA);
	CHECK_STR_HAS(err.msg, "nccl.losslessRequired: the hints' class on hpn0 (RDMA device "
			       "\"mlx5_2\") is not lossless: NCCL_IB_TC=0 (DSCP 0) on hpn0 rides "
			       "priority 0 (no APP entry) without PFC");
	/* IB off: nothing is judged, nothing refused. */
	hpn_vars_set(&v, "NCCL_IB_DISABLE", "1");
	memset(rq, 0, sizeof(rq));
	CHECK_INT_EQ(hpn_nccl_qos(nconf(true, true), b, n, &v, rq, &err), 0);
	CHECK_STR_EQ(rq[0].lossless, "");
	hpn_vars_free(&v);
	hpn_result_free(res);
}

static int parse(const char *json, struct hpn_conf *conf, struct hpn_err *err)
{
	memset(err, 0, sizeof(*err));
	return hpn_conf_parse(json, strlen(json), HPN_CMD_ADD, conf, err);
}

static void test_conf(void)
{
	struct hpn_conf conf;
	struct hpn_err err;

#define NET "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"hpn-rdma\",\"device\":\"eth1\","
	CHECK_INT_EQ(parse(NET "\"nccl\":{}}", &conf, &err), 0);
	CHECK(!conf.nccl.tc_auto && !conf.nccl.lossless_required);
	hpn_conf_free(&conf);
	CHECK_INT_EQ(parse(NET "\"nccl\":{\"trafficClass\":\"auto\",\"losslessRequired\":true}}",
			   &conf, &err),
		     0);
	CHECK(conf.nccl.tc_auto && conf.nccl.lossless_required);
	hpn_conf_free(&conf);
	CHECK_INT_EQ(parse(NET "\"nccl\":{\"trafficClass\":\"profile\"}}", &conf, &err), 0);
	CHECK(!conf.nccl.tc_auto);
	hpn_conf_free(&conf);
	CHECK(parse(NET "\"nccl\":{\"trafficClass\":\"lossless\"}}", &conf, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_CONFIG);
	CHECK_STR_HAS(err.msg, "nccl.trafficClass");
	hpn_conf_free(&conf);
	CHECK(parse(NET "\"nccl\":{\"losslessRequired\":\"yes\"}}", &conf, &err) < 0);
	CHECK_STR_HAS(err.msg, "nccl.losslessRequired");
	hpn_conf_free(&conf);
	CHECK(parse(NET "\"nccl\":{\"trafficClass\":\"auto\",\"env\":{\"NCCL_IB_SL\":\"3\"}}}",
		    &conf, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_CONFIG);
	CHECK_STR_EQ(err.msg, "nccl.env.NCCL_IB_SL contradicts nccl.trafficClass \"auto\", which "
			      "derives it from the node's lossless class");
	hpn_conf_free(&conf);
	/* Without auto, the network may set its class. */
	CHECK_INT_EQ(parse(NET "\"nccl\":{\"env\":{\"NCCL_IB_TC\":\"104\"}}}", &conf, &err), 0);
	hpn_conf_free(&conf);
#undef NET
}

/* rdma[i].qos in a result: parsed back as rendered, refused when malformed. */
static void test_result(void)
{
	static const char *const bad[] = {
		"{\"dcb\":\"ieee\",\"pfc\":[8]}",
		"{\"pfc\":3}",
		"{\"trafficClass\":256}",
		"{\"serviceLevel\":16}",
		"{\"pfc\":[1.5]}",
		"[]",
		"{\"lossless\":1}",
	};
	struct hpn_result *res = NULL;
	struct hpn_err err = { 0 };
	char json[512];

	snprintf(json, sizeof(json),
		 "{\"cniVersion\":\"1.1.0\",\"interfaces\":[{\"name\":\"hpn0\"}],\"rdma\":[{"
		 "\"interface\":0,\"bound\":true,\"device\":\"mlx5_2\",\"port\":1,\"qos\":{"
		 "\"dcb\":\"ieee\",\"netdev\":\"ens1f0\",\"pfc\":[3,4],\"trust\":\"dscp\","
		 "\"trafficClass\":104,\"fifoTrafficClass\":104,\"serviceLevel\":0,"
		 "\"lossless\":\"yes\"}}]}");
	CHECK_INT_EQ(hpn_result_parse(json, strlen(json), &res, &err), 0);
	if (res) {
		CHECK_INT_EQ(res->rdma[0].qos.pfc, 0x18);
		CHECK_STR_EQ(res->rdma[0].qos.netdev, "ens1f0");
		CHECK_INT_EQ(res->rdma[0].qos.tc, 104);
		CHECK_STR_EQ(res->rdma[0].qos.lossless, "yes");
	}
	hpn_result_free(res);
	for (size_t i = 0; i < HPN_ARRAY_SIZE(bad); i++) {
		res = NULL;
		snprintf(json, sizeof(json),
			 "{\"cniVersion\":\"1.1.0\",\"interfaces\":[{\"name\":\"hpn0\"}],"
			 "\"rdma\":[{\"interface\":0,\"bound\":true,\"qos\":%s}]}",
			 bad[i]);
		CHECK(hpn_result_parse(json, strlen(json), &res, &err) < 0);
		CHECK_STR_HAS(err.msg, "rdma[0].qos");
		hpn_result_free(res);
	}
}

int main(void)
{
	test_verdict();
	test_auto();
	test_table();
	test_conf();
	test_result();
	hpn_nccl_conf_free(nconf(false, false));
	return check_done();
}
