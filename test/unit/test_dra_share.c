// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for shared NICs in the DRA slices (agent/dra/model/drashare.c and
 * draslice.c): the shares a GID table gives (a scratch sysfs tree: the
 * parent's own GIDs taken off, its children's and the empty entries not;
 * no table, no RoCE, Soft-RoCE: none); a shared NIC rendered as two devices
 * (the shared one with the NIC's attributes and taint, "shared",
 * allowMultipleAllocations, capacity shares of N with its request policy,
 * both consuming the NIC's counter set) and its counter set in a slice of
 * its own after the device slices, 8 sets a slice; the layout (64 devices
 * in a slice with counters, a NIC and its shared device never apart); the
 * publisher's rounds over such a pool (a taint written in place, counter
 * slices left alone, N changed in place, a NIC's shares gone a new
 * generation); what an API server dropped, told from its answer.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "draplan.h"
#include "drashare.h"
#include "draslice.h"
#include "tmpdir.h"

static char root[256];

/* text and a newline into <root>/rel, its directories made. */
static void put(const char *rel, const char *text)
{
	tmpdir_put(root, rel, text);
}

#define ZERO_GID "0000:0000:0000:0000:0000:0000:0000:0000"

/* GID entry i of mlx5_0 port 1: gid ("" zeros), and its ndev (NULL: none, as an unused one). */
static void gid(int i, const char *g, const char *ndev)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "class/infiniband/mlx5_0/ports/1/gids/%d", i);
	put(rel, g[0] ? g : ZERO_GID);
	if (ndev) {
		snprintf(rel, sizeof(rel), "class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/%d", i);
		put(rel, ndev);
	}
}

/* The RoCE type of mlx5_0 port 1's GID entry i ("IB/RoCE v1", "RoCE v2"). */
static void gid_type(int i, const char *type)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "class/infiniband/mlx5_0/ports/1/gid_attrs/types/%d", i);
	put(rel, type);
}

static void roce_nic(struct hpn_dra_nic *n)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->ifname, sizeof(n->ifname), "eth0");
	snprintf(n->rdma, sizeof(n->rdma), "mlx5_0");
	snprintf(n->transport, sizeof(n->transport), "roce");
	snprintf(n->link_layer, sizeof(n->link_layer), "Ethernet");
	n->port = 1;
}

/* N = floor((table length - the parent's own GIDs) / (2 addresses x its RoCE types)). */
static void test_gid_table(void)
{
	struct hpn_dra_nic n;

	roce_nic(&n);
	CHECK_INT_EQ(hpn_dra_gid_shares(root, "mlx5_0", 1, "eth0"), 0);
	CHECK_INT_EQ(hpn_dra_nic_shares(root, &n), 0);
	/* 16 entries: eth0's link-local and IPv4 (v1, v2), a child's two, the rest empty. */
	gid(0, "fe80:0000:0000:0000:0a00:27ff:fe00:0001", "eth0");
	gid(1, "fe80:0000:0000:0000:0a00:27ff:fe00:0001", "eth0");
	gid(2, "0000:0000:0000:0000:0000:ffff:0a01:0005", "eth0");
	gid(3, "0000:0000:0000:0000:0000:ffff:0a01:0005", "eth0");
	gid(4, "0000:0000:0000:0000:0000:ffff:0a01:0009", "eth0m1");
	gid(5, "fe80:0000:0000:0000:0a00:27ff:fe00:0009", "eth0m1");
	/* A stale ndev of an empty entry is not the parent's. */
	gid(6, "", "eth0");
	for (int i = 7; i < 16; i++)
		gid(i, "", NULL);
	CHECK_INT_EQ(hpn_dra_gid_shares(root, "mlx5_0", 1, "eth0"), 3);
	CHECK_INT_EQ(hpn_dra_nic_shares(root, &n), 3);
	/* The child's view: only its own two taken off. */
	CHECK_INT_EQ(hpn_dra_gid_shares(root, "mlx5_0", 1, "eth0m1"), 3);
	/* 17 entries, 13 free: still 3; 20, 16 free: 4. */
	gid(16, "", NULL);
	CHECK_INT_EQ(hpn_dra_nic_shares(root, &n), 3);
	for (int i = 17; i < 20; i++)
		gid(i, "", NULL);
	CHECK_INT_EQ(hpn_dra_nic_shares(root, &n), 4);
	/* Another port, a missing device, bad names: none. */
	CHECK_INT_EQ(hpn_dra_gid_shares(root, "mlx5_0", 2, "eth0"), 0);
	CHECK_INT_EQ(hpn_dra_gid_shares(root, "mlx5_9", 1, "eth0"), 0);
	CHECK_INT_EQ(hpn_dra_gid_shares(root, "../mlx5_0", 1, "eth0"), 0);
	CHECK_INT_EQ(hpn_dra_gid_shares(root, "mlx5_0", 0, "eth0"), 0);
	/* What cannot be shared: InfiniBand, iWARP (eRDMA), Soft-RoCE, no RDMA device. */
	snprintf(n.transport, sizeof(n.transport), "ib");
	CHECK_INT_EQ(hpn_dra_nic_shares(root, &n), 0);
	snprintf(n.transport, sizeof(n.transport), "iwarp");
	CHECK_INT_EQ(hpn_dra_nic_shares(root, &n), 0);
	roce_nic(&n);
	n.softroce_capable = true;
	CHECK_INT_EQ(hpn_dra_nic_shares(root, &n), 0);
	roce_nic(&n);
	n.rdma[0] = '\0';
	CHECK_INT_EQ(hpn_dra_nic_shares(root, &n), 0);
	/* Port 0 (unknown) is port 1. */
	roce_nic(&n);
	n.port = 0;
	CHECK_INT_EQ(hpn_dra_nic_shares(root, &n), 4);
	/* Types unread count as two; a port of RoCE v2 alone (rxe) takes 2 a child: 16 free, 8. */
	for (int i = 0; i < 4; i++)
		gid_type(i, "RoCE v2");
	CHECK_INT_EQ(hpn_dra_gid_shares(root, "mlx5_0", 1, "eth0"), 8);
	/* v1 and v2 (mlx5's): 4 a child. A child's entries' types do not count. */
	gid_type(4, "IB/RoCE v1");
	CHECK_INT_EQ(hpn_dra_gid_shares(root, "mlx5_0", 1, "eth0"), 8);
	gid_type(0, "IB/RoCE v1");
	CHECK_INT_EQ(hpn_dra_gid_shares(root, "mlx5_0", 1, "eth0"), 4);
}

static void fake_nic(struct hpn_dra_nic *n, unsigned int i, unsigned int shares)
{
	memset(n, 0, sizeof(*n));
	n->pos.numa = -1;
	snprintf(n->ifname, sizeof(n->ifname), "ens%u", i & 0xffffu);
	snprintf(n->pci, sizeof(n->pci), "0000:%02x:%02x.%x", (0x10 + i / 64) & 0xffu, (i / 8) % 8,
		 i % 8);
	snprintf(n->rdma, sizeof(n->rdma), "mlx5_%u", i & 0xffffu);
	snprintf(n->transport, sizeof(n->transport), "roce");
	snprintf(n->link_layer, sizeof(n->link_layer), "Ethernet");
	n->rail = i;
	n->shares = shares;
}

static cJSON *render(const struct hpn_dra_nic *nics, size_t n, size_t s, size_t count)
{
	struct hpn_err err = { 0 };
	char *text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 4, nics, n, s, count, &err);
	cJSON *o = text ? cJSON_Parse(text) : NULL;

	if (!text)
		fprintf(stderr, "\trender %zu of %zu: %s\n", s, count, err.msg);
	free(text);
	return o;
}

static const cJSON *at(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const cJSON *spec_of(const cJSON *s, const char *k)
{
	return at(at(s, "spec"), k);
}

/* "name" of each item of list, joined by ','. */
static void names_of(const cJSON *list, char *out, size_t len)
{
	const cJSON *it;
	size_t n = 0;

	out[0] = '\0';
	cJSON_ArrayForEach (it, list)
		n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%s", n ? "," : "",
				      cJSON_GetStringValue(at(it, "name")));
}

static bool json_is(const cJSON *got, const char *want)
{
	cJSON *w = cJSON_Parse(want);
	bool same = w && cJSON_Compare(got, w, true);

	if (!same) {
		char *g = cJSON_PrintUnformatted(got);

		fprintf(stderr, "\tgot  %s\n\twant %s\n", g ? g : "(null)", want);
		free(g);
	}
	cJSON_Delete(w);
	return same;
}

/* Three NICs, the second shared by 5 pods and tainted: four devices, then its counter set. */
static void test_render(void)
{
	struct hpn_dra_nic nics[3];
	const cJSON *devs, *d1, *d2;
	char names[512];
	cJSON *s0, *s1, *a1, *a2;

	for (unsigned int i = 0; i < 3; i++)
		fake_nic(&nics[i], i, i == 1 ? 5 : 0);
	snprintf(nics[1].taint.effect, sizeof(nics[1].taint.effect), "NoSchedule");
	snprintf(nics[1].taint.value, sizeof(nics[1].taint.value), "PortDown");
	nics[1].taint.since = 1796389679LL;
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 3), 2);
	s0 = render(nics, 3, 0, 2);
	s1 = render(nics, 3, 1, 2);
	CHECK(s0 && s1);
	devs = spec_of(s0, "devices");
	names_of(devs, names, sizeof(names));
	CHECK_STR_EQ(names, "pci-0000-10-00-0,pci-0000-10-00-1,pci-0000-10-00-1-shared,"
			    "pci-0000-10-00-2");
	CHECK(spec_of(s0, "sharedCounters") == NULL);
	CHECK_INT_EQ(at(spec_of(s0, "pool"), "resourceSliceCount")->valueint, 2);
	CHECK_INT_EQ(at(spec_of(s1, "pool"), "resourceSliceCount")->valueint, 2);
	/* A NIC without shares: as before, no counters. */
	CHECK(at(cJSON_GetArrayItem(devs, 0), "consumesCounters") == NULL);
	CHECK(at(cJSON_GetArrayItem(devs, 0), "capacity") == NULL);
	d1 = cJSON_GetArrayItem(devs, 1);
	d2 = cJSON_GetArrayItem(devs, 2);
	CHECK(json_is(at(d1, "consumesCounters"), "[{\"counterSet\":\"pci-0000-10-00-1\","
						  "\"counters\":{\"nic\":{\"value\":\"1\"}}}]"));
	CHECK(at(d1, "allowMultipleAllocations") == NULL && at(d1, "capacity") == NULL);
	CHECK(cJSON_Compare(at(d1, "consumesCounters"), at(d2, "consumesCounters"), true));
	CHECK(cJSON_IsTrue(at(d2, "allowMultipleAllocations")));
	CHECK(json_is(at(d2, "capacity"), "{\"shares\":{\"value\":\"5\",\"requestPolicy\":"
					  "{\"default\":\"1\",\"validValues\":[\"1\"]}}}"));
	CHECK(cJSON_Compare(at(d1, "taints"), at(d2, "taints"), true));
	CHECK_INT_EQ(cJSON_GetArraySize(at(d2, "taints")), 1);
	/* The shared device's attributes: the NIC's, and shared: true. */
	a1 = cJSON_Duplicate(at(d1, "attributes"), true);
	a2 = cJSON_Duplicate(at(d2, "attributes"), true);
	CHECK(json_is(at(a2, "shared"), "{\"bool\":true}"));
	cJSON_DeleteItemFromObjectCaseSensitive(a2, "shared");
	CHECK(cJSON_Compare(a1, a2, true));
	CHECK(at(a1, "shared") == NULL);
	cJSON_Delete(a1);
	cJSON_Delete(a2);
	/* The counter slice: no devices, the one set. */
	CHECK(spec_of(s1, "devices") == NULL);
	CHECK(json_is(
		spec_of(s1, "sharedCounters"),
		"[{\"name\":\"pci-0000-10-00-1\",\"counters\":{\"nic\":{\"value\":\"1\"}}}]"));
	CHECK_STR_EQ(cJSON_GetStringValue(at(at(s1, "metadata"), "name")),
		     "n1-" HPN_DRA_DRIVER "-1");
	cJSON_Delete(s0);
	cJSON_Delete(s1);
	/* A slice index past them, or a count that is not the pool's: refused. */
	CHECK(render(nics, 3, 2, 2) == NULL);
	CHECK(render(nics, 3, 0, 1) == NULL);
	/* hpn_dra_nic_attrs (the device metadata's) is the NIC's: no "shared". */
	{
		struct hpn_err err = { 0 };
		cJSON *a = hpn_dra_nic_attrs(&nics[1], &err);

		CHECK(a && !at(a, "shared") && at(a, "rail"));
		cJSON_Delete(a);
	}
}

/* The devices of slice s, and whether each NIC's shared device follows it there. */
static size_t devices_in(const struct hpn_dra_nic *nics, size_t n, size_t s, size_t count,
			 size_t *sets)
{
	cJSON *o = render(nics, n, s, count);
	const cJSON *devs = spec_of(o, "devices"), *d;
	size_t k = (size_t)cJSON_GetArraySize(devs);
	const char *prev = "";

	*sets = (size_t)cJSON_GetArraySize(spec_of(o, "sharedCounters"));
	cJSON_ArrayForEach (d, devs) {
		const char *name = cJSON_GetStringValue(at(d, "name"));
		char nic[HPN_DRA_NAME_MAX];

		if (hpn_dra_share_of(name, nic))
			CHECK_STR_EQ(nic, prev);
		prev = name;
	}
	cJSON_Delete(o);
	return k;
}

/* 64 devices to a slice with counters, a NIC and its shared device together, 8 sets a slice. */
static void test_layout(void)
{
	struct hpn_dra_nic *nics = calloc(200, sizeof(*nics));
	size_t sets, total = 0, all_sets = 0;

	if (!nics)
		exit(2);
	/* 100 shared NICs: 200 devices, 32 NICs (64 devices) a slice; 13 counter slices. */
	for (unsigned int i = 0; i < 100; i++)
		fake_nic(&nics[i], i, 2);
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 100), 4 + 13);
	for (size_t s = 0; s < 17; s++) {
		size_t k = devices_in(nics, 100, s, 17, &sets);

		CHECK_INT_EQ(k, s < 3 ? 64 : s == 3 ? 8 : 0);
		CHECK_INT_EQ(sets, s < 4 ? 0 : s < 16 ? 8 : 4);
		total += k;
		all_sets += sets;
	}
	CHECK_INT_EQ(total, 200);
	CHECK_INT_EQ(all_sets, 100);
	/* 62 plain NICs and a shared one: 64 devices, one slice; 63 and one: two slices. */
	for (unsigned int i = 0; i < 200; i++)
		fake_nic(&nics[i], i, 0);
	nics[62].shares = 3;
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 63), 1 + 1);
	CHECK_INT_EQ(devices_in(nics, 63, 0, 2, &sets), 64);
	nics[62].shares = 0;
	nics[63].shares = 3;
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 64), 2 + 1);
	CHECK_INT_EQ(devices_in(nics, 64, 0, 3, &sets), 63);
	CHECK_INT_EQ(devices_in(nics, 64, 1, 3, &sets), 2);
	/* 120 plain NICs fill 128 as before; a shared 121st starts the next slice. */
	nics[63].shares = 0;
	nics[120].shares = 3;
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 121), 2 + 1);
	CHECK_INT_EQ(devices_in(nics, 121, 0, 3, &sets), 120);
	/* A shared NIC in the first 64 makes its slice one of 64 devices. */
	nics[120].shares = 0;
	nics[10].shares = 3;
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 200), 3 + 1);
	CHECK_INT_EQ(devices_in(nics, 200, 0, 4, &sets), 64);
	CHECK_INT_EQ(devices_in(nics, 200, 1, 4, &sets), 128);
	CHECK_INT_EQ(devices_in(nics, 200, 2, 4, &sets), 9);
	CHECK_INT_EQ(devices_in(nics, 200, 3, 4, &sets), 0);
	CHECK_INT_EQ(sets, 1);
	free(nics);
}

/*
 * Rounds over a pool with shares: published; listed back, nothing to write;
 * a taint, only its device slice written at the same generation (the counter
 * slices matched by their sets' names); N changed, in place too; a NIC's
 * shares gone, a new generation and its counter slice deleted.
 */
static void test_rounds(void)
{
	struct hpn_dra_nic nics[10];
	struct hpn_dra_slices_plan p;
	char *body;

	for (unsigned int i = 0; i < 10; i++)
		fake_nic(&nics[i], i, i == 9 ? 0 : 4);
	CHECK_INT_EQ(plan("{\"items\":[]}", nics, 10, 0, &p), 0);
	CHECK(p.write && p.bumped && p.gen == 1 && p.count == 3);
	body = list_of(&p);
	hpn_dra_slices_plan_free(&p);
	CHECK_INT_EQ(plan(body, nics, 10, 1, &p), 0);
	CHECK(!p.write && p.gen == 1);
	hpn_dra_slices_plan_free(&p);
	snprintf(nics[3].taint.effect, sizeof(nics[3].taint.effect), "NoExecute");
	nics[3].taint.since = 1796389679LL;
	CHECK_INT_EQ(plan(body, nics, 10, 1, &p), 0);
	CHECK(p.write && !p.bumped && p.gen == 1 && p.put[0] && !p.put[1] && !p.put[2]);
	hpn_dra_slices_plan_free(&p);
	nics[3].taint = (struct hpn_dra_taint){ 0 };
	nics[3].shares = 7;
	CHECK_INT_EQ(plan(body, nics, 10, 1, &p), 0);
	CHECK(p.write && !p.bumped && p.gen == 1 && p.put[0] && !p.put[1] && !p.put[2]);
	hpn_dra_slices_plan_free(&p);
	/* NIC 0 no longer shared: the second counter slice gone, devices moved. */
	nics[3].shares = 4;
	nics[0].shares = 0;
	CHECK_INT_EQ(plan(body, nics, 10, 1, &p), 0);
	CHECK(p.write && p.bumped && p.gen == 2 && p.count == 2 && p.n_del == 1);
	CHECK_STR_EQ(p.del[0], "n1-" HPN_DRA_DRIVER "-2");
	hpn_dra_slices_plan_free(&p);
	free(body);
}

/* What the API dropped, from its answer: taints, the shares' fields, each alone. */
static void test_dropped(void)
{
	struct hpn_dra_nic nics[2];
	cJSON *s0, *s1, *cut;
	char *text;

	fake_nic(&nics[0], 0, 0);
	fake_nic(&nics[1], 1, 3);
	snprintf(nics[0].taint.effect, sizeof(nics[0].taint.effect), "NoSchedule");
	nics[0].taint.since = 1796389679LL;
	s0 = render(nics, 2, 0, 2);
	s1 = render(nics, 2, 1, 2);
	text = cJSON_PrintUnformatted(s0);
	CHECK_INT_EQ(hpn_dra_slice_dropped(s0, text, strlen(text)), 0);
	free(text);
	/* Both dropped: the answer a slice of neither. */
	cut = cJSON_Duplicate(s0, true);
	cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(cut, "spec"),
					       "devices", cJSON_CreateArray());
	text = cJSON_PrintUnformatted(cut);
	CHECK_INT_EQ(hpn_dra_slice_dropped(s0, text, strlen(text)),
		     HPN_DRA_DROP_TAINTS | HPN_DRA_DROP_SHARES);
	free(text);
	cJSON_Delete(cut);
	/* DRAConsumableCapacity off: allowMultipleAllocations and requestPolicy gone. */
	cut = cJSON_Duplicate(s0, true);
	cJSON_DeleteItemFromObjectCaseSensitive(
		cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(at(cut, "spec"), "devices"), 2),
		"allowMultipleAllocations");
	text = cJSON_PrintUnformatted(cut);
	CHECK_INT_EQ(hpn_dra_slice_dropped(s0, text, strlen(text)), HPN_DRA_DROP_SHARES);
	free(text);
	cJSON_Delete(cut);
	/* DRAPartitionableDevices off: consumesCounters gone; sharedCounters gone. */
	cut = cJSON_Duplicate(s0, true);
	cJSON_DeleteItemFromObjectCaseSensitive(
		cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(at(cut, "spec"), "devices"), 1),
		"consumesCounters");
	text = cJSON_PrintUnformatted(cut);
	CHECK_INT_EQ(hpn_dra_slice_dropped(s0, text, strlen(text)), HPN_DRA_DROP_SHARES);
	free(text);
	cJSON_Delete(cut);
	cut = cJSON_Duplicate(s1, true);
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(cut, "spec"),
						"sharedCounters");
	text = cJSON_PrintUnformatted(cut);
	CHECK_INT_EQ(hpn_dra_slice_dropped(s1, text, strlen(text)), HPN_DRA_DROP_SHARES);
	free(text);
	cJSON_Delete(cut);
	/* Taints alone. */
	cut = cJSON_Duplicate(s0, true);
	cJSON_DeleteItemFromObjectCaseSensitive(
		cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(at(cut, "spec"), "devices"), 0),
		"taints");
	text = cJSON_PrintUnformatted(cut);
	CHECK_INT_EQ(hpn_dra_slice_dropped(s0, text, strlen(text)), HPN_DRA_DROP_TAINTS);
	free(text);
	cJSON_Delete(cut);
	CHECK_INT_EQ(hpn_dra_slice_dropped(s0, "not json", 8), 0);
	cJSON_Delete(s0);
	cJSON_Delete(s1);
}

int main(void)
{
	tmpdir_make(root, sizeof(root), "drashare");
	test_gid_table();
	test_render();
	test_layout();
	test_rounds();
	test_dropped();
	tmpdir_rm(root);
	return check_done();
}
