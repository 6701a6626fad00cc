// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for agent/dra/model/draslice.c: the HGX H100 node of test/fixtures/gpu-nodes
 * (built by mknode.sh into a scratch directory) read NIC by NIC and rendered
 * as a ResourceSlice, each device's pcieRoot, pciBusID and numaNode held to
 * what the fixture's .tree file says (read here, not through lib/gpu.c); the
 * facts mknode.sh does not write (speed, driver, link layer, node type, a NIC
 * without PCI function) added to the scratch tree; vm-flat's virtio-net NIC;
 * device names stable and DNS labels; the API's limits refused with messages;
 * 200 NICs in two slices; an unhealthy NIC's taint (its fields, the API's
 * limits on them, 64 devices in a slice that has one) and the publisher's
 * rounds around it (one slice written over at the same generation, the
 * timeAdded the API holds kept, a device gone a new generation).
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "draplan.h"
#include "drashare.h"
#include "draslice.h"
#include "gpunode.h"
#include "tmpdir.h"

#define MAX_NICS 16

/* A NIC as the .tree file says: its address, names, host bridge and NUMA node. */
struct tree_nic {
	char bdf[HPN_PCI_STR];
	char ifname[HPN_IFNAMSIZ];
	char ibdev[HPN_IBDEV_MAX];
	char root[32];
	int numa;
};

static char scratch[256], sys_root[PATH_MAX];
static struct tree_nic tnics[MAX_NICS];
static size_t n_tnics;

/* "host pciDDDD:BB numa=N" and "nic BDF ID IF IBDEV" lines, in file (PCI) order. */
static void read_tree(const char *node)
{
	char path[PATH_MAX], line[512], root[32] = "";
	int numa = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.tree", GPUNODES, node);
	f = fopen(path, "re");
	if (!f) {
		perror(path);
		exit(2);
	}
	while (fgets(line, sizeof(line), f)) {
		char kind[16], a[64], b[64], c[64], d[64];
		int n = sscanf(line, " %15s %63s %63s %63s %63s", kind, a, b, c, d);

		if (n >= 3 && !strcmp(kind, "host")) {
			snprintf(root, sizeof(root), "%.31s", a);
			numa = atoi(b + strlen("numa="));
		} else if (n == 5 && !strcmp(kind, "nic") && n_tnics < MAX_NICS) {
			struct tree_nic *t = &tnics[n_tnics++];

			snprintf(t->bdf, sizeof(t->bdf), "%.15s", a);
			snprintf(t->ifname, sizeof(t->ifname), "%.15s", c);
			snprintf(t->ibdev, sizeof(t->ibdev), "%.63s", d);
			snprintf(t->root, sizeof(t->root), "%s", root);
			t->numa = numa;
		}
	}
	fclose(f);
	if (!n_tnics) {
		fprintf(stderr, "%s: no NICs\n", path);
		exit(2);
	}
}

/* text and a newline into <sys_root>/rel, as sysfs shows an attribute. */
static void put(const char *text, const char *rel)
{
	tmpdir_put(sys_root, rel, text);
}

/* <ibdev>/ports/1 of the scratch tree, where a real device keeps its link layer. */
static void port_dir(const char *ibdev)
{
	char dir[PATH_MAX + 64];

	snprintf(dir, sizeof(dir), "%s/class/infiniband/%s/ports", sys_root, ibdev);
	CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST);
	strcat(dir, "/1");
	CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST);
}

static bool dns_label(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return false;
	for (; *s; s++)
		if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '-'))
			return false;
	return true;
}

/* attrs[key][type] of a rendered device, or NULL. */
static const cJSON *attr(const cJSON *dev, const char *key, const char *type)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(dev, "attributes");

	return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, key), type);
}

static const char *attr_str(const cJSON *dev, const char *key)
{
	const cJSON *v = attr(dev, key, "string");

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static long attr_int(const cJSON *dev, const char *key)
{
	const cJSON *v = attr(dev, key, "int");

	return cJSON_IsNumber(v) ? (long)v->valuedouble : LONG_MIN;
}

static size_t n_attrs(const cJSON *dev)
{
	return (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(dev, "attributes"));
}

static const cJSON *device_named(const cJSON *slice, const char *name)
{
	const cJSON *devs = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(slice, "spec"), "devices");
	const cJSON *d;

	cJSON_ArrayForEach (d, devs) {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(d, "name");

		if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
			return d;
	}
	return NULL;
}

/* Every NIC of the tree: read, named, rendered; the standard attributes as the tree says. */
static void test_hgx(void)
{
	struct hpn_dra_nic nics[MAX_NICS], again;
	struct hpn_err err = { 0 };
	char *text, *text2;
	cJSON *slice;

	for (size_t i = 0; i < n_tnics; i++) {
		char name[HPN_DRA_NAME_MAX], want[HPN_DRA_NAME_MAX];
		size_t k = 0;

		CHECK_INT_EQ(
			hpn_dra_nic_read(sys_root, tnics[i].ifname, (unsigned)i, &nics[i], &err),
			0);
		CHECK_STR_EQ(nics[i].pci, tnics[i].bdf);
		CHECK_STR_EQ(nics[i].rdma, tnics[i].ibdev);
		CHECK_INT_EQ(nics[i].pos.numa, tnics[i].numa);
		CHECK_INT_EQ(nics[i].rail, i);
		CHECK(!nics[i].softroce_capable);
		CHECK_INT_EQ(hpn_dra_device_name(&nics[i], name), 0);
		CHECK(dns_label(name));
		/* pci-<bdf> with ':' and '.' as '-'. */
		k = (size_t)snprintf(want, sizeof(want), "pci-");
		for (const char *c = tnics[i].bdf; *c; c++)
			want[k++] = *c == ':' || *c == '.' ? '-' : *c;
		want[k] = '\0';
		CHECK_STR_EQ(name, want);
		/* Read again: the same name (stable across restarts of the agent). */
		CHECK_INT_EQ(hpn_dra_nic_read(sys_root, tnics[i].ifname, (unsigned)i, &again, &err),
			     0);
		CHECK_INT_EQ(hpn_dra_device_name(&again, name), 0);
		CHECK_STR_EQ(name, want);
	}
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "gpu-node-1", "gpu-node-1", 3, nics, n_tnics, 0,
				    1, &err);
	CHECK(text != NULL);
	text2 = hpn_dra_slice_render(HPN_DRA_DRIVER, "gpu-node-1", "gpu-node-1", 3, nics, n_tnics,
				     0, 1, &err);
	CHECK_STR_EQ(text, text2);
	free(text2);
	slice = cJSON_Parse(text ? text : "");
	CHECK(slice != NULL);
	CHECK_STR_HAS(text, "\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\"");
	CHECK_STR_HAS(text, "\"metadata\":{\"name\":\"gpu-node-1-hpn-rdma.alibabacloud.com-0\"}");
	CHECK_STR_HAS(text, "\"driver\":\"hpn-rdma.alibabacloud.com\",\"nodeName\":\"gpu-node-1\"");
	CHECK_STR_HAS(
		text,
		"\"pool\":{\"name\":\"gpu-node-1\",\"generation\":3,\"resourceSliceCount\":1}");
	for (size_t i = 0; slice && i < n_tnics; i++) {
		char name[HPN_DRA_NAME_MAX];
		const cJSON *d;

		hpn_dra_device_name(&nics[i], name);
		d = device_named(slice, name);
		CHECK(d != NULL);
		CHECK_STR_EQ(attr_str(d, "resource.kubernetes.io/pcieRoot"), tnics[i].root);
		CHECK_STR_EQ(attr_str(d, "resource.kubernetes.io/pciBusID"), tnics[i].bdf);
		CHECK_INT_EQ(attr_int(d, "resource.kubernetes.io/numaNode"), tnics[i].numa);
		CHECK_STR_EQ(attr_str(d, "interface"), tnics[i].ifname);
		CHECK_STR_EQ(attr_str(d, "rdmaDevice"), tnics[i].ibdev);
		CHECK_INT_EQ(attr_int(d, "rail"), i);
		CHECK(cJSON_IsFalse(attr(d, "softRoce", "bool")));
		CHECK(n_attrs(d) <= HPN_DRA_MAX_ATTRS);
		/* What mknode.sh does not write is left out, not guessed. */
		CHECK(attr(d, "speedMbps", "int") == NULL);
		CHECK(attr_str(d, "kernelDriver") == NULL);
	}
	cJSON_Delete(slice);
	free(text);
}

/* Facts mknode.sh leaves out, added to the scratch tree NIC by NIC. */
static void test_more_facts(void)
{
	char dir[PATH_MAX + 32], link[PATH_MAX + 32], name[HPN_DRA_NAME_MAX],
		name2[HPN_DRA_NAME_MAX];
	struct hpn_err err = { 0 };
	struct hpn_dra_nic n;
	char *text;
	cJSON *slice;

	put("400000", "class/net/ens1np0/speed");
	snprintf(link, sizeof(link), "%s/class/net/ens1np0/device/driver", sys_root);
	CHECK_INT_EQ(symlink("../../../bus/pci/drivers/mlx5_core", link), 0);
	port_dir("mlx5_1");
	put("Ethernet", "class/infiniband/mlx5_1/ports/1/link_layer");
	put("-1", "class/net/ens2np0/speed");
	port_dir("mlx5_2");
	put("InfiniBand", "class/infiniband/mlx5_2/ports/1/link_layer");
	put("4: RNIC", "class/infiniband/mlx5_3/node_type");
	put("1", "class/net/ens3np0/type");

	CHECK_INT_EQ(hpn_dra_nic_read(sys_root, "ens1np0", 0, &n, &err), 0);
	CHECK_INT_EQ(n.speed_mbps, 400000);
	CHECK_STR_EQ(n.driver, "mlx5_core");
	CHECK_STR_EQ(n.link_layer, "Ethernet");
	CHECK_STR_EQ(n.transport, "roce");
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 0, &n, 1, 0, 1, &err);
	slice = cJSON_Parse(text ? text : "");
	CHECK(slice != NULL);
	if (slice) {
		const cJSON *d = device_named(slice, "pci-0000-06-00-0");

		CHECK_INT_EQ(attr_int(d, "speedMbps"), 400000);
		CHECK_STR_EQ(attr_str(d, "kernelDriver"), "mlx5_core");
		CHECK_STR_EQ(attr_str(d, "linkLayer"), "Ethernet");
		CHECK_STR_EQ(attr_str(d, "transport"), "roce");
		/* Every attribute there is, within the API's 32. */
		CHECK_INT_EQ(n_attrs(d), 11);
	}
	cJSON_Delete(slice);
	free(text);

	CHECK_INT_EQ(hpn_dra_nic_read(sys_root, "ens2np0", 1, &n, &err), 0);
	CHECK_INT_EQ(n.speed_mbps, 0);
	CHECK_STR_EQ(n.transport, "ib");
	CHECK_INT_EQ(hpn_dra_nic_read(sys_root, "ens3np0", 2, &n, &err), 0);
	CHECK_STR_EQ(n.link_layer, "Ethernet");
	CHECK_STR_EQ(n.transport, "iwarp");
	CHECK(!n.softroce_capable);

	/* A second port of one PCI function: its own name. */
	put("1", "class/net/ens4np0/dev_port");
	CHECK_INT_EQ(hpn_dra_nic_read(sys_root, "ens4np0", 3, &n, &err), 0);
	CHECK_INT_EQ(hpn_dra_device_name(&n, name), 0);
	CHECK_STR_EQ(name, "pci-0000-0e-00-0-p1");

	/* A netdev with no device (a veth): no PCI, no RDMA device, Soft-RoCE could serve it. */
	snprintf(dir, sizeof(dir), "%s/class/net/Veth_a.1", sys_root);
	CHECK_INT_EQ(mkdir(dir, 0755), 0);
	put("1", "class/net/Veth_a.1/type");
	CHECK_INT_EQ(hpn_dra_nic_read(sys_root, "Veth_a.1", 8, &n, &err), 0);
	CHECK_STR_EQ(n.pci, "");
	CHECK_STR_EQ(n.rdma, "");
	CHECK_STR_EQ(n.pos.path, "");
	CHECK(n.softroce_capable);
	CHECK_INT_EQ(hpn_dra_device_name(&n, name), 0);
	CHECK(dns_label(name));
	CHECK(!strncmp(name, "net-veth-a-1-", 13) && strlen(name) == 13 + 8);
	/* Folded alike, told apart by the hash. */
	snprintf(n.ifname, sizeof(n.ifname), "veth_a_1");
	CHECK_INT_EQ(hpn_dra_device_name(&n, name2), 0);
	CHECK(!strncmp(name2, "net-veth-a-1-", 13));
	CHECK(strcmp(name, name2) != 0);
	snprintf(n.ifname, sizeof(n.ifname), "Veth_a.1");
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 0, &n, 1, 0, 1, &err);
	CHECK(text != NULL);
	/* Not placed: no standard attribute at all. */
	CHECK_STR_LACKS(text, "resource.kubernetes.io");
	CHECK_STR_HAS(text, "\"softRoce\":{\"bool\":true}");
	free(text);

	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_dra_nic_read(sys_root, "nosuch0", 0, &n, &err), -ENODEV);
	CHECK_INT_EQ(err.code, HPN_E_DEVICE_NOT_FOUND);
	CHECK_STR_HAS(err.msg, "\"nosuch0\"");
}

static void fake_nic(struct hpn_dra_nic *n, uint8_t i)
{
	memset(n, 0, sizeof(*n));
	n->pos.numa = -1;
	snprintf(n->ifname, sizeof(n->ifname), "ens%u", i);
	snprintf(n->pci, sizeof(n->pci), "0000:%02x:%02x.%x", 0x10 + i / 64, (i / 8) % 8, i % 8);
	snprintf(n->pos.path, sizeof(n->pos.path), "pci0000:%02x/0000:%02x:00.0/%s", 0x10 + i / 64,
		 0x10 + i / 64, n->pci);
	n->rail = i;
}

/* The API's limits, each refused with a message naming what broke it. */
static void test_limits(void)
{
	struct hpn_dra_nic two[2], none;
	struct hpn_err err = { 0 };
	char name[HPN_DRA_NAME_MAX], node[300];
	char *text;
	cJSON *s;

	fake_nic(&two[0], 0);
	fake_nic(&two[1], 1);
	text = hpn_dra_slice_render("HPN_rdma.example.com", "n1", "n1", 0, two, 2, 0, 1, &err);
	CHECK(text == NULL);
	CHECK_STR_HAS(err.msg, "DRA driver name \"HPN_rdma.example.com\"");
	memset(&err, 0, sizeof(err));
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "Node_1", "n1", 0, two, 2, 0, 1, &err);
	CHECK(text == NULL);
	CHECK_STR_HAS(err.msg, "node name \"Node_1\"");
	memset(&err, 0, sizeof(err));
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1//x", 0, two, 2, 0, 1, &err);
	CHECK(text == NULL);
	CHECK_STR_HAS(err.msg, "pool name \"n1//x\"");
	memset(&err, 0, sizeof(err));
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 0, two, 2, 0, 2, &err);
	CHECK(text == NULL);
	CHECK_STR_HAS(err.msg, "the pool takes 1 slices (of 128 devices, 64 with a taint)");
	/* A value longer than 64: the NIC named. */
	memset(&err, 0, sizeof(err));
	memset(two[1].driver, 'd', 70);
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 0, two, 2, 0, 1, &err);
	CHECK(text == NULL);
	CHECK_STR_HAS(err.msg, "NIC \"ens1\": attribute kernelDriver");
	CHECK_STR_HAS(err.msg, "64 characters");
	memset(two[1].driver, 'd', 64);
	two[1].driver[64] = '\0';
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 0, two, 2, 0, 1, &err);
	CHECK(text != NULL);
	free(text);
	/* A PCIe root longer than 64 (no real one is): refused, not cut. */
	memset(&err, 0, sizeof(err));
	memset(two[1].pos.path, 'p', 70);
	two[1].pos.path[70] = '\0';
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 0, two, 2, 0, 1, &err);
	CHECK(text == NULL);
	CHECK_STR_HAS(err.msg, "NIC \"ens1\": attribute resource.kubernetes.io/pcieRoot");
	fake_nic(&two[1], 1);
	/* One device name twice in the pool. */
	memset(&err, 0, sizeof(err));
	memcpy(two[1].pci, two[0].pci, sizeof(two[0].pci));
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 0, two, 2, 0, 1, &err);
	CHECK(text == NULL);
	CHECK_STR_HAS(err.msg,
		      "NICs \"ens0\" and \"ens1\" have one device name \"pci-0000-10-00-0\"");
	/* Neither a PCI address nor a name; a PCI address that makes no label. */
	memset(&none, 0, sizeof(none));
	CHECK_INT_EQ(hpn_dra_device_name(&none, name), -EINVAL);
	snprintf(none.pci, sizeof(none.pci), "0000:1b:00.0/");
	CHECK_INT_EQ(hpn_dra_device_name(&none, name), -EINVAL);
	/* A node name of 253: the slice's name cut to 253 with a hash, still a subdomain. */
	memset(node, 'a', 253);
	node[253] = '\0';
	node[100] = '.';
	fake_nic(&two[1], 1);
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, node, "n1", 0, two, 2, 0, 1, &err);
	s = cJSON_Parse(text ? text : "");
	CHECK(s != NULL);
	if (s) {
		const char *sn = cJSON_GetObjectItemCaseSensitive(
					 cJSON_GetObjectItemCaseSensitive(s, "metadata"), "name")
					 ->valuestring;

		CHECK_INT_EQ(strlen(sn), 253);
		CHECK(isalnum((unsigned char)sn[252]) && sn[253 - 17] == '-');
		CHECK(!strncmp(sn, node, 200));
	}
	cJSON_Delete(s);
	free(text);
}

/*
 * vm-flat's virtio-net eth0: the netdev on the virtio0 child, the PCI function
 * its parent, the driver virtio_net's (the link added here), no RDMA device.
 */
static void test_virtio(void)
{
	char dest[512], sys[PATH_MAX], link[PATH_MAX + 64], name[HPN_DRA_NAME_MAX];
	struct hpn_err err = { 0 };
	struct hpn_dra_nic n;
	FILE *f;

	snprintf(dest, sizeof(dest), "%s/vm-flat", scratch);
	gpunode_make("vm-flat", dest);
	snprintf(sys, sizeof(sys), "%s/sys", dest);
	snprintf(link, sizeof(link), "%s/class/net/eth0/device/driver", sys);
	CHECK_INT_EQ(symlink("../../../../bus/virtio/drivers/virtio_net", link), 0);
	snprintf(link, sizeof(link), "%s/class/net/eth0/type", sys);
	f = fopen(link, "we");
	CHECK(f != NULL);
	if (f) {
		fputs("1\n", f);
		fclose(f);
	}
	CHECK_INT_EQ(hpn_dra_nic_read(sys, "eth0", 0, &n, &err), 0);
	CHECK_STR_EQ(n.pci, "0000:00:03.0");
	CHECK_STR_EQ(n.pos.path, "pci0000:00/0000:00:03.0");
	CHECK_INT_EQ(n.pos.numa, -1);
	CHECK_STR_EQ(n.driver, "virtio_net");
	CHECK_STR_EQ(n.rdma, "");
	CHECK_STR_EQ(n.link_layer, "Ethernet");
	CHECK_STR_EQ(n.transport, "");
	CHECK(n.softroce_capable);
	CHECK_INT_EQ(hpn_dra_device_name(&n, name), 0);
	CHECK_STR_EQ(name, "pci-0000-00-03-0");
	/* NUMA -1 (a flat VM): no numaNode attribute. */
	{
		char *text = hpn_dra_slice_render(HPN_DRA_DRIVER, "vm", "vm", 0, &n, 1, 0, 1, &err);

		CHECK_STR_HAS(text,
			      "\"resource.kubernetes.io/pcieRoot\":{\"string\":\"pci0000:00\"}");
		CHECK_STR_LACKS(text, "numaNode");
		CHECK_STR_HAS(text, "\"kernelDriver\":{\"string\":\"virtio_net\"}");
		free(text);
	}
	/* A name that is no netdev name at all. */
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_dra_nic_read(sys, "../eth0", 0, &n, &err), -EINVAL);
	CHECK_STR_HAS(err.msg, "\"../eth0\" is not a netdev name");
}

/*
 * eRDMA (test/fixtures/sysfs's iWARP erdma_0, erdma/compat, erdma/ofed): the
 * device named by the ENI's own function, which names it across restarts;
 * pcieRoot, pciBusID and numaNode those of the RDMA function, where NCCL and
 * dranet place the NIC (in ofed/ another host bridge and NUMA node).
 */
static void check_erdma(const char *tree, const char *ifname, const char *rdma, const char *rpci,
			const char *path, int numa, const char *transport, int line)
{
	char root[PATH_MAX], name[HPN_DRA_NAME_MAX], want[256];
	struct hpn_err err = { 0 };
	struct hpn_dra_nic n;
	char *text;
	int failed = check_failed;

	snprintf(root, sizeof(root), "%s/%s", HPN_FIXTURES, tree);
	CHECK_INT_EQ(hpn_dra_nic_read(root, ifname, 0, &n, &err), 0);
	CHECK_STR_EQ(n.pci, "0000:00:05.0");
	CHECK_STR_EQ(n.rdma, rdma);
	CHECK_STR_EQ(n.rdma_pci, rpci);
	CHECK_STR_EQ(n.pos.path, path);
	CHECK_INT_EQ(n.pos.numa, numa);
	CHECK_STR_EQ(n.transport, transport);
	CHECK_INT_EQ(hpn_dra_device_name(&n, name), 0);
	CHECK_STR_EQ(name, "pci-0000-00-05-0");
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 0, &n, 1, 0, 1, &err);
	CHECK(text != NULL);
	snprintf(want, sizeof(want), "\"resource.kubernetes.io/pcieRoot\":{\"string\":\"%.*s\"}",
		 (int)strcspn(path, "/"), path);
	CHECK_STR_HAS(text, want);
	snprintf(want, sizeof(want), "\"resource.kubernetes.io/pciBusID\":{\"string\":\"%s\"}",
		 rpci);
	CHECK_STR_HAS(text, want);
	CHECK_STR_LACKS(text, "\"resource.kubernetes.io/pciBusID\":{\"string\":\"0000:00:05.0\"}");
	if (numa >= 0) {
		snprintf(want, sizeof(want), "\"resource.kubernetes.io/numaNode\":{\"int\":%d}",
			 numa);
		CHECK_STR_HAS(text, want);
	} else {
		CHECK_STR_LACKS(text, "numaNode");
	}
	snprintf(want, sizeof(want), "\"rdmaDevice\":{\"string\":\"%s\"}", rdma);
	CHECK_STR_HAS(text, want);
	if (check_failed != failed)
		fprintf(stderr, "\t%s %s (line %d): %s\n", tree, ifname, line,
			text ? text : err.msg);
	free(text);
}

static void test_erdma(void)
{
	check_erdma("sysfs", "eth2", "erdma_0", "0000:00:06.0", "pci0000:00/0000:00:06.0", -1,
		    "iwarp", __LINE__);
	check_erdma("erdma/compat", "eth2", "erdma_0", "0000:00:06.0", "pci0000:00/0000:00:06.0",
		    -1, "roce", __LINE__);
	check_erdma("erdma/ofed", "eth1", "rocep26s0", "0000:1a:00.0", "pci0000:1a/0000:1a:00.0", 1,
		    "roce", __LINE__);
}

/* 200 NICs: two slices, 128 and 72 devices, each saying the pool has 2. */
static void test_split(void)
{
	struct hpn_dra_nic *nics = calloc(200, sizeof(*nics));
	struct hpn_err err = { 0 };
	size_t total = 0;
	char first_name[300] = "";

	if (!nics)
		exit(2);
	for (unsigned i = 0; i < 200; i++)
		fake_nic(&nics[i], i);
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 0), 1);
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 1), 1);
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 128), 1);
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 129), 2);
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 200), 2);
	for (size_t s = 0; s < 2; s++) {
		char *text = hpn_dra_slice_render(HPN_DRA_DRIVER, "big", "big", 7, nics, 200, s, 2,
						  &err);
		cJSON *o = cJSON_Parse(text ? text : "");
		const cJSON *spec = cJSON_GetObjectItemCaseSensitive(o, "spec");
		const cJSON *pool = cJSON_GetObjectItemCaseSensitive(spec, "pool");
		const cJSON *devs = cJSON_GetObjectItemCaseSensitive(spec, "devices");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(o, "metadata"), "name");

		CHECK(o != NULL);
		CHECK_INT_EQ(cJSON_GetArraySize(devs), s == 0 ? 128 : 72);
		CHECK_INT_EQ(cJSON_GetObjectItemCaseSensitive(pool, "resourceSliceCount")->valueint,
			     2);
		CHECK_INT_EQ(cJSON_GetObjectItemCaseSensitive(pool, "generation")->valueint, 7);
		CHECK(cJSON_IsString(name));
		if (s == 0)
			snprintf(first_name, sizeof(first_name), "%s", name->valuestring);
		else
			CHECK(strcmp(first_name, name->valuestring) != 0);
		/* The slice's first device is NIC s*128. */
		CHECK_INT_EQ(attr_int(cJSON_GetArrayItem(devs, 0), "rail"), s * 128);
		total += (size_t)cJSON_GetArraySize(devs);
		cJSON_Delete(o);
		free(text);
	}
	CHECK_INT_EQ(total, 200);
	CHECK(hpn_dra_slice_render(HPN_DRA_DRIVER, "big", "big", 7, nics, 200, 2, 2, &err) == NULL);
	free(nics);
}

/* The taints of device name in slice s ("" when it has none). */
static const cJSON *taints(const cJSON *s, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(device_named(s, name), "taints");
}

static const char *taint_str(const cJSON *s, const char *name, const char *field)
{
	return cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(taints(s, name), 0), field));
}

/* 2026-12-04T13:07:59Z */
#define WHEN 1796389679LL

static void set_taint(struct hpn_dra_nic *n, const char *effect, const char *value, long long since)
{
	snprintf(n->taint.effect, sizeof(n->taint.effect), "%s", effect);
	snprintf(n->taint.value, sizeof(n->taint.value), "%s", value);
	n->taint.since = since;
}

/* An unhealthy NIC's taint as the API wants it; what it refuses, refused here. */
static void test_taint_fields(void)
{
	struct hpn_dra_nic two[2];
	struct hpn_err err = { 0 };
	char *text;
	cJSON *s;

	fake_nic(&two[0], 0);
	fake_nic(&two[1], 1);
	set_taint(&two[1], "NoSchedule", "PortDown", WHEN);
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 2, two, 2, 0, 1, &err);
	s = cJSON_Parse(text ? text : "");
	CHECK(s != NULL);
	CHECK(taints(s, "pci-0000-10-00-0") == NULL);
	CHECK_INT_EQ(cJSON_GetArraySize(taints(s, "pci-0000-10-00-1")), 1);
	CHECK_STR_EQ(taint_str(s, "pci-0000-10-00-1", "key"), HPN_DRA_DRIVER "/unhealthy");
	CHECK_STR_EQ(taint_str(s, "pci-0000-10-00-1", "value"), "PortDown");
	CHECK_STR_EQ(taint_str(s, "pci-0000-10-00-1", "effect"), "NoSchedule");
	CHECK_STR_EQ(taint_str(s, "pci-0000-10-00-1", "timeAdded"), "2026-12-04T13:07:59Z");
	cJSON_Delete(s);
	free(text);
	/* The other effects; no value: none written. */
	set_taint(&two[1], "NoExecute", "", WHEN);
	set_taint(&two[0], "None", "RDMADeviceGone", 1);
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 2, two, 2, 0, 1, &err);
	s = cJSON_Parse(text ? text : "");
	CHECK_STR_EQ(taint_str(s, "pci-0000-10-00-1", "effect"), "NoExecute");
	CHECK(taint_str(s, "pci-0000-10-00-1", "value") == NULL);
	CHECK_STR_EQ(taint_str(s, "pci-0000-10-00-0", "effect"), "None");
	CHECK_STR_EQ(taint_str(s, "pci-0000-10-00-0", "timeAdded"), "1970-01-01T00:00:01Z");
	cJSON_Delete(s);
	free(text);
	/* What the API refuses: an effect it does not know, a value no label value, no time. */
	fake_nic(&two[0], 0);
	set_taint(&two[1], "PreferNoSchedule", "PortDown", WHEN);
	CHECK(hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 2, two, 2, 0, 1, &err) == NULL);
	CHECK_STR_HAS(err.msg, "NIC \"ens1\": taint effect \"PreferNoSch\" is none of");
	memset(&err, 0, sizeof(err));
	set_taint(&two[1], "NoSchedule", "port down", WHEN);
	CHECK(hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 2, two, 2, 0, 1, &err) == NULL);
	CHECK_STR_HAS(err.msg, "NIC \"ens1\": taint value \"port down\" is not a label value");
	set_taint(&two[1], "NoSchedule", "PortDown-", WHEN);
	CHECK(hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 2, two, 2, 0, 1, &err) == NULL);
	memset(two[1].taint.value, 'v', 63);
	two[1].taint.value[63] = '\0';
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 2, two, 2, 0, 1, &err);
	CHECK(text != NULL);
	free(text);
	memset(&err, 0, sizeof(err));
	set_taint(&two[1], "NoSchedule", "PortDown", 0);
	CHECK(hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 2, two, 2, 0, 1, &err) == NULL);
	CHECK_STR_HAS(err.msg, "NIC \"ens1\": taint time 0");
	CHECK(hpn_dra_label_value("") && hpn_dra_label_value("a.b_c-D9") &&
	      !hpn_dra_label_value("_a") && !hpn_dra_label_value("a/b"));
	CHECK(hpn_dra_taint_effect_valid("None") && !hpn_dra_taint_effect_valid("noschedule") &&
	      !hpn_dra_taint_effect_valid(NULL));
}

/* slice s of count of the 200 NICs: its devices' rails, [first, last). */
static void check_slice_rails(const struct hpn_dra_nic *nics, size_t s, size_t count,
			      unsigned first, unsigned last, int line)
{
	struct hpn_err err = { 0 };
	char *text =
		hpn_dra_slice_render(HPN_DRA_DRIVER, "big", "big", 1, nics, 200, s, count, &err);
	cJSON *o = cJSON_Parse(text ? text : "");
	const cJSON *devs = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(o, "spec"), "devices");
	int failed = check_failed;

	CHECK_INT_EQ(cJSON_GetArraySize(devs), last - first);
	CHECK_INT_EQ(attr_int(cJSON_GetArrayItem(devs, 0), "rail"), first);
	CHECK_INT_EQ(attr_int(cJSON_GetArrayItem(devs, (int)(last - first) - 1), "rail"), last - 1);
	if (failed != check_failed)
		fprintf(stderr, "\tslice %zu of %zu (line %d): %s\n", s, count, line,
			text ? "" : err.msg);
	cJSON_Delete(o);
	free(text);
}

/* A slice with a taint holds 64 devices at most; the others stay at 128. */
static void test_taint_split(void)
{
	struct hpn_dra_nic *nics = calloc(200, sizeof(*nics));

	if (!nics)
		exit(2);
	for (unsigned i = 0; i < 200; i++)
		fake_nic(&nics[i], (uint8_t)i);
	/* NIC 5 unhealthy: its slice 64, the next ones 128 and the rest. */
	set_taint(&nics[5], "NoSchedule", "PortDown", WHEN);
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 200), 3);
	check_slice_rails(nics, 0, 3, 0, 64, __LINE__);
	check_slice_rails(nics, 1, 3, 64, 192, __LINE__);
	check_slice_rails(nics, 2, 3, 192, 200, __LINE__);
	/* NIC 100: the 100 before it one slice, then it and 63 more, then the rest. */
	nics[5].taint = (struct hpn_dra_taint){ 0 };
	set_taint(&nics[100], "NoSchedule", "PortDown", WHEN);
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 200), 3);
	check_slice_rails(nics, 0, 3, 0, 100, __LINE__);
	check_slice_rails(nics, 1, 3, 100, 164, __LINE__);
	check_slice_rails(nics, 2, 3, 164, 200, __LINE__);
	/* 64 tainted NICs fill one slice; every NIC tainted: four slices of 64 at most. */
	for (unsigned i = 0; i < 200; i++)
		set_taint(&nics[i], "NoExecute", "Vanished", WHEN);
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 64), 1);
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 65), 2);
	CHECK_INT_EQ(hpn_dra_slice_split(nics, 200), 4);
	check_slice_rails(nics, 3, 4, 192, 200, __LINE__);
	free(nics);
}

/*
 * The publisher's rounds around a taint: published at generation 1; NIC 1
 * unhealthy, its slice written over at 1 (no new generation); the same
 * again, nothing written; a restarted agent that saw it later keeps the
 * API's timeAdded; another effect is a new taint (its own time); recovered,
 * the taint gone at 1; a NIC gone, generation 2.
 */
static void test_taint_rounds(void)
{
	struct hpn_dra_nic nics[3];
	struct hpn_dra_slices_plan p;
	char *body;
	cJSON *got;

	for (unsigned i = 0; i < 3; i++)
		fake_nic(&nics[i], (uint8_t)i);
	CHECK_INT_EQ(plan("{\"items\":[]}", nics, 3, 0, &p), 0);
	CHECK(p.write && p.bumped && p.gen == 1 && p.count == 1 && p.put[0]);
	body = list_of(&p);
	hpn_dra_slices_plan_free(&p);

	set_taint(&nics[1], "NoSchedule", "PortDown", WHEN);
	CHECK_INT_EQ(plan(body, nics, 3, 1, &p), 0);
	CHECK(p.write && !p.bumped && p.gen == 1 && p.put[0] && !p.n_del);
	CHECK_STR_EQ(p.rv[0], "7");
	CHECK_STR_EQ(taint_str(p.v[0], "pci-0000-10-00-1", "timeAdded"), "2026-12-04T13:07:59Z");
	free(body);
	body = list_of(&p);
	hpn_dra_slices_plan_free(&p);
	CHECK_INT_EQ(plan(body, nics, 3, 1, &p), 0);
	CHECK(!p.write && p.gen == 1);
	hpn_dra_slices_plan_free(&p);
	/* Restarted (floor 0), seen unhealthy an hour later: the API's time kept, nothing written. */
	nics[1].taint.since = WHEN + 3600;
	CHECK_INT_EQ(plan(body, nics, 3, 0, &p), 0);
	CHECK(!p.write && p.gen == 1);
	CHECK_STR_EQ(taint_str(p.v[0], "pci-0000-10-00-1", "timeAdded"), "2026-12-04T13:07:59Z");
	hpn_dra_slices_plan_free(&p);
	/* Another effect: another taint, timed anew, still in place. */
	snprintf(nics[1].taint.effect, sizeof(nics[1].taint.effect), "NoExecute");
	CHECK_INT_EQ(plan(body, nics, 3, 1, &p), 0);
	CHECK(p.write && !p.bumped && p.gen == 1);
	CHECK_STR_EQ(taint_str(p.v[0], "pci-0000-10-00-1", "timeAdded"), "2026-12-04T14:07:59Z");
	hpn_dra_slices_plan_free(&p);
	/* A timeAdded the API would not have written is not taken. */
	got = cJSON_Parse(body);
	free(body);
	cJSON_ReplaceItemInObjectCaseSensitive(
		cJSON_GetArrayItem(
			cJSON_GetObjectItemCaseSensitive(
				device_named(
					cJSON_GetArrayItem(
						cJSON_GetObjectItemCaseSensitive(got, "items"), 0),
					"pci-0000-10-00-1"),
				"taints"),
			0),
		"timeAdded", cJSON_CreateString("2026-02-30T13:07:59Z"));
	body = cJSON_PrintUnformatted(got);
	cJSON_Delete(got);
	snprintf(nics[1].taint.effect, sizeof(nics[1].taint.effect), "NoSchedule");
	CHECK_INT_EQ(plan(body, nics, 3, 1, &p), 0);
	CHECK(p.write && !p.bumped);
	CHECK_STR_EQ(taint_str(p.v[0], "pci-0000-10-00-1", "timeAdded"), "2026-12-04T14:07:59Z");
	hpn_dra_slices_plan_free(&p);
	/* Recovered: the taint gone, in place. */
	nics[1].taint = (struct hpn_dra_taint){ 0 };
	CHECK_INT_EQ(plan(body, nics, 3, 1, &p), 0);
	CHECK(p.write && !p.bumped && p.gen == 1 && taints(p.v[0], "pci-0000-10-00-1") == NULL);
	free(body);
	body = list_of(&p);
	hpn_dra_slices_plan_free(&p);
	/* A NIC gone: the device set changed, a new generation. */
	CHECK_INT_EQ(plan(body, nics, 2, 1, &p), 0);
	CHECK(p.write && p.bumped && p.gen == 2 && p.put[0]);
	hpn_dra_slices_plan_free(&p);
	free(body);
}

/* Taints: 64 devices to a slice, so one taint in a slice of 100 moves devices: a new generation. */
static void test_taint_moves(void)
{
	struct hpn_dra_nic *nics = calloc(100, sizeof(*nics));
	struct hpn_dra_slices_plan p;
	char *body;

	if (!nics)
		exit(2);
	for (unsigned i = 0; i < 100; i++)
		fake_nic(&nics[i], (uint8_t)i);
	CHECK_INT_EQ(plan("{\"items\":[]}", nics, 100, 0, &p), 0);
	CHECK(p.count == 1 && p.gen == 1);
	body = list_of(&p);
	hpn_dra_slices_plan_free(&p);
	set_taint(&nics[99], "NoSchedule", "PortDown", WHEN);
	CHECK_INT_EQ(plan(body, nics, 100, 1, &p), 0);
	CHECK(p.write && p.bumped && p.gen == 2 && p.count == 2 && p.put[0] && p.put[1]);
	hpn_dra_slices_plan_free(&p);
	free(body);
	free(nics);
}

/* The API's answer to a write without the taints sent: dropped (its gate off). */
static void test_taints_dropped(void)
{
	struct hpn_dra_nic nic;
	struct hpn_err err = { 0 };
	char *text;
	cJSON *sent, *devs;
	char *without;

	fake_nic(&nic, 0);
	set_taint(&nic, "NoSchedule", "PortDown", WHEN);
	text = hpn_dra_slice_render(HPN_DRA_DRIVER, "n1", "n1", 1, &nic, 1, 0, 1, &err);
	sent = cJSON_Parse(text ? text : "");
	CHECK(!hpn_dra_slice_dropped(sent, text, strlen(text)));
	devs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sent, "spec"),
						"devices");
	without = cJSON_PrintUnformatted(sent);
	CHECK(!hpn_dra_slice_dropped(sent, without, strlen(without)));
	free(without);
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetArrayItem(devs, 0), "taints");
	without = cJSON_PrintUnformatted(sent);
	cJSON_Delete(sent);
	sent = cJSON_Parse(text);
	CHECK(hpn_dra_slice_dropped(sent, without, strlen(without)) == HPN_DRA_DROP_TAINTS);
	CHECK(!hpn_dra_slice_dropped(sent, "not json", 8));
	cJSON_Delete(sent);
	free(without);
	free(text);
}

int main(void)
{
	char dest[512];

	tmpdir_make(scratch, sizeof(scratch), "draslice");
	snprintf(dest, sizeof(dest), "%s/hgx-h100", scratch);
	gpunode_make("hgx-h100", dest);
	snprintf(sys_root, sizeof(sys_root), "%s/sys", dest);
	read_tree("hgx-h100");
	test_hgx();
	test_more_facts();
	test_limits();
	test_virtio();
	test_erdma();
	test_split();
	test_taint_fields();
	test_taint_split();
	test_taint_rounds();
	test_taint_moves();
	test_taints_dropped();
	tmpdir_rm(scratch);
	return check_done();
}
