// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/rdma.c: which RDMA device (and port) serves a netdev and
 * the reverse, and how a device is classified, against the fake tree in
 * test/fixtures/sysfs/ (see its README) and against shapes built here in a
 * scratch directory. Any sysfsRoot other than /sys is read through sysfs only,
 * so nothing here opens an RDMA netlink socket.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "rdma.h"
#include "tmpdir.h"
#include "util.h"

static const char *const fixture = HPN_FIXTURES "/sysfs";

/* One line of a file under root, without the newline; "" when unreadable. */
static void read_line(const char *root, const char *rel, char *out, size_t len)
{
	char path[PATH_MAX];
	FILE *f;

	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "r");
	if (!f)
		return;
	if (!fgets(out, (int)len, f))
		out[0] = '\0';
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
}

/*
 * The netdev as RTM_NEWLINK would describe it: name, ifindex and MAC from the
 * tree's class/net/<name>/{ifindex,address}, no kind (hardware), no lower link.
 */
static struct hpn_link tree_link(const char *root, const char *name)
{
	struct hpn_link l;
	char rel[PATH_MAX], line[64];

	memset(&l, 0, sizeof(l));
	snprintf(l.name, sizeof(l.name), "%s", name);
	snprintf(rel, sizeof(rel), "class/net/%s/ifindex", name);
	read_line(root, rel, line, sizeof(line));
	l.ifindex = atoi(line);
	snprintf(rel, sizeof(rel), "class/net/%s/address", name);
	read_line(root, rel, line, sizeof(line));
	l.has_mac = hpn_mac_parse(line, l.mac) == 0;
	return l;
}

struct want {
	const char *dev;
	unsigned int port;
	enum hpn_rdma_kind kind;
	const char *driver;
	const char *pci;
	bool vf, soft;
};

/* All the classified facts of d are those of w. */
static void check_dev(const struct hpn_rdma_dev *d, const struct want *w)
{
	CHECK_STR_EQ(d->name, w->dev);
	CHECK_INT_EQ(d->kind, w->kind);
	CHECK_STR_EQ(d->driver, w->driver);
	CHECK_STR_EQ(d->pci, w->pci);
	CHECK_INT_EQ(d->vf, w->vf);
	CHECK_INT_EQ(d->soft, w->soft);
	CHECK_INT_EQ(d->index, 0); /* found through sysfs: no netlink index */
}

/* d filled with junk (strings terminated), so that a field left unwritten shows. */
static void junk(struct hpn_rdma_dev *d)
{
	memset(d, 0x5a, sizeof(*d));
	strcpy(d->name, "untouched");
	d->netdev[sizeof(d->netdev) - 1] = '\0';
	d->driver[sizeof(d->driver) - 1] = '\0';
	d->pci[sizeof(d->pci) - 1] = '\0';
}

/* hpn_rdma_of_netdev(l) finds w (w NULL: -ENODEV, err and ret untouched). */
static void check_of(const char *root, const struct hpn_link *l, const struct want *w, int line)
{
	struct hpn_rdma_dev d;
	struct hpn_err err = { 0 };
	int failed = check_failed, r;

	junk(&d);
	r = hpn_rdma_of_netdev(root, NULL, l, &d, &err);
	CHECK_INT_EQ(err.code, 0);
	CHECK_STR_EQ(err.msg, "");
	if (!w) {
		CHECK_INT_EQ(r, -ENODEV);
		CHECK_STR_EQ(d.name, "untouched");
	} else {
		CHECK_INT_EQ(r, 0);
		check_dev(&d, w);
		CHECK_INT_EQ(d.port, w->port);
		CHECK_STR_EQ(d.netdev, l->name);
	}
	if (check_failed != failed)
		fprintf(stderr, "\tRDMA device of %s (line %d): r=%d dev=%s port=%u msg=%s\n",
			l->name, line, r, d.name, d.port, err.msg);
}

static void check_of_name(const char *root, const char *ifname, const struct want *w, int line)
{
	struct hpn_link l = tree_link(root, ifname);

	check_of(root, &l, w, line);
}

/* hpn_rdma_netdev_of(dev, port) is ifname and w. */
static void check_netdev_of(const char *root, const char *dev, unsigned int port,
			    const char *ifname, const struct want *w, int line)
{
	char got[HPN_IFNAMSIZ] = "untouched";
	struct hpn_rdma_dev d;
	struct hpn_err err = { 0 };
	int failed = check_failed, r;

	junk(&d);
	r = hpn_rdma_netdev_of(root, NULL, dev, port, got, &d, &err);
	CHECK_INT_EQ(r, 0);
	CHECK_INT_EQ(err.code, 0);
	CHECK_STR_EQ(got, ifname);
	CHECK_STR_EQ(d.netdev, ifname);
	CHECK_INT_EQ(d.port, w->port);
	check_dev(&d, w);
	if (check_failed != failed)
		fprintf(stderr, "\tnetdev of %s:%u (line %d): r=%d got=%s msg=%s\n", dev, port,
			line, r, got, err.msg);
}

/* hpn_rdma_netdev_of(dev, port) fails with code, want in the message; ifname untouched. */
static void check_netdev_of_bad(const char *root, const char *dev, unsigned int port, int code,
				const char *want, int line)
{
	char got[HPN_IFNAMSIZ] = "untouched";
	struct hpn_rdma_dev d;
	struct hpn_err err = { 0 };
	int failed = check_failed, r;

	r = hpn_rdma_netdev_of(root, NULL, dev, port, got, &d, &err);
	CHECK(r < 0);
	CHECK_INT_EQ(err.code, code);
	CHECK_STR_HAS(err.msg, want);
	CHECK_STR_EQ(got, "untouched");
	if (check_failed != failed)
		fprintf(stderr, "\tnetdev of %s:%u (line %d): r=%d got=%s code=%d msg=%s\n", dev,
			port, line, r, got, err.code, err.msg);
}

static void check_classify(const char *root, const struct want *w, int line)
{
	struct hpn_rdma_dev d;
	int failed = check_failed;

	/* Whatever was there before is replaced, not kept. */
	junk(&d);
	snprintf(d.name, sizeof(d.name), "%s", w->dev);
	d.port = w->port;
	hpn_rdma_classify(root, &d);
	CHECK_STR_EQ(d.name, w->dev);
	CHECK_INT_EQ(d.kind, w->kind);
	CHECK_STR_EQ(d.driver, w->driver);
	CHECK_STR_EQ(d.pci, w->pci);
	CHECK_INT_EQ(d.vf, w->vf);
	CHECK_INT_EQ(d.soft, w->soft);
	if (check_failed != failed)
		fprintf(stderr, "\tclassify %s (line %d): kind=%d driver=%s pci=%s\n", w->dev, line,
			d.kind, d.driver, d.pci);
}

/* The devices of the fixture, as discovery must report them. */
enum { MLX5_0, MLX5_1, MLX5_2, MLX4_0_P1, MLX4_0_P2, ERDMA_0, RXE0 };
static const struct want fx[] = {
	[MLX5_0] = { "mlx5_0", 1, HPN_RDMA_MLX5, "mlx5_core", "0000:af:00.0", false, false },
	[MLX5_1] = { "mlx5_1", 1, HPN_RDMA_MLX5, "mlx5_core", "0000:af:00.1", false, false },
	[MLX5_2] = { "mlx5_2", 1, HPN_RDMA_MLX5, "mlx5_core", "0000:af:00.2", true, false },
	[MLX4_0_P1] = { "mlx4_0", 1, HPN_RDMA_OTHER, "mlx4_core", "0000:3b:00.0", false, false },
	[MLX4_0_P2] = { "mlx4_0", 2, HPN_RDMA_OTHER, "mlx4_core", "0000:3b:00.0", false, false },
	[ERDMA_0] = { "erdma_0", 1, HPN_RDMA_ERDMA, "erdma", "0000:00:06.0", false, false },
	[RXE0] = { "rxe0", 1, HPN_RDMA_RXE, "rdma_rxe", "", false, true },
};

static void test_names(void)
{
	CHECK_STR_EQ(hpn_rdma_kind_name(HPN_RDMA_MLX5), "mlx5");
	CHECK_STR_EQ(hpn_rdma_kind_name(HPN_RDMA_ERDMA), "erdma");
	CHECK_STR_EQ(hpn_rdma_kind_name(HPN_RDMA_RXE), "rxe");
	CHECK_STR_EQ(hpn_rdma_kind_name(HPN_RDMA_OTHER), "other");
	CHECK_STR_EQ(hpn_rdma_netns_name(HPN_RDMA_NETNS_AUTO), "auto");
	CHECK_STR_EQ(hpn_rdma_netns_name(HPN_RDMA_NETNS_SHARED), "shared");
	CHECK_STR_EQ(hpn_rdma_netns_name(HPN_RDMA_NETNS_EXCLUSIVE), "exclusive");
	/* A protocol as the result's transport says it; erdma's modes as the doctor does. */
	{
		static const char *const protos[] = { "unknown", "roce", "ib", "iwarp", "unknown" };
		static const char *const modes[] = { "", "iwarp", "compat", "ofed", "" };

		for (size_t i = 0; i < HPN_ARRAY_SIZE(protos); i++)
			CHECK_STR_EQ(hpn_rdma_proto_name((enum hpn_rdma_proto)i), protos[i]);
		for (size_t i = 0; i < HPN_ARRAY_SIZE(modes); i++)
			CHECK_STR_EQ(hpn_erdma_mode_name((enum hpn_erdma_mode)i), modes[i]);
	}
}

static void test_fixture_shape(void)
{
	char path[PATH_MAX], line[64];
	struct stat sb;

	/* Real symlinks (a checkout without them would mislead), and the address the
	 * EUI-64 expectations below are derived from. */
	snprintf(path, sizeof(path), "%s/class/infiniband/mlx5_0", fixture);
	CHECK(lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode));
	snprintf(path, sizeof(path), "%s/class/infiniband/rxe0/device", fixture);
	CHECK(lstat(path, &sb) < 0 && errno == ENOENT); /* software: no bus device */
	read_line(fixture, "class/net/eth1/address", line, sizeof(line));
	CHECK_STR_EQ(line, "52:54:00:12:34:56");
	read_line(fixture, "class/infiniband/rxe0/node_guid", line, sizeof(line));
	CHECK_STR_EQ(line, "5054:00ff:fe12:3456");
	read_line(fixture, "class/net/eth2/address", line, sizeof(line));
	CHECK_STR_EQ(line, "00:16:3e:12:34:56");
	read_line(fixture, "class/infiniband/erdma_0/node_guid", line, sizeof(line));
	CHECK_STR_EQ(line, "0216:3eff:fe12:3456");
}

static void test_of_netdev(void)
{
	/* RoCE: the GID table names the netdev. */
	check_of_name(fixture, "ens1f0np0", &fx[MLX5_0], __LINE__);
	check_of_name(fixture, "ens1f1np1", &fx[MLX5_1], __LINE__);
	/* A VF whose GID table is still empty: the RDMA device on its own PCI function. */
	check_of_name(fixture, "ens1f0v0", &fx[MLX5_2], __LINE__);
	/* Two netdevs on one function: port 1 by GID table, port 2 by dev_port. */
	check_of_name(fixture, "ens2", &fx[MLX4_0_P1], __LINE__);
	check_of_name(fixture, "ens2d1", &fx[MLX4_0_P2], __LINE__);
	/* eRDMA (iWARP, no GID netdevs, own PCI function): node GUID = EUI-64 of the MAC. */
	check_of_name(fixture, "eth2", &fx[ERDMA_0], __LINE__);
	/* Soft-RoCE over virtio-net. */
	check_of_name(fixture, "eth1", &fx[RXE0], __LINE__);

	/* Nothing behind these: -ENODEV, err untouched. */
	/* A switchdev representor (phys_port_name pf1vf0) shares the uplink's PCI
	 * function but has no RDMA device of its own. */
	check_of_name(fixture, "ens1f1npf1vf0", NULL, __LINE__);
	check_of_name(fixture, "veth0", NULL, __LINE__);
	check_of_name(fixture, "lo", NULL, __LINE__);
	check_of_name(fixture, "nosuch0", NULL, __LINE__);

	/* The rule is the MAC as the kernel reports it: without one, eth2 has no match. */
	{
		struct hpn_link l = tree_link(fixture, "eth2");

		l.has_mac = false;
		check_of(fixture, &l, NULL, __LINE__);
		/* A MAC matching no node GUID (the ENI's MAC changed): none either. */
		l.has_mac = true;
		l.mac[5] ^= 1;
		check_of(fixture, &l, NULL, __LINE__);
	}

	/* A root with no class/infiniband at all. */
	{
		struct hpn_link l = tree_link(fixture, "ens1f0np0");

		check_of("/nonexistent-sysfs", &l, NULL, __LINE__);
	}
}

static void test_netdev_of(void)
{
	check_netdev_of(fixture, "mlx5_0", 0, "ens1f0np0", &fx[MLX5_0], __LINE__);
	check_netdev_of(fixture, "mlx5_0", 1, "ens1f0np0", &fx[MLX5_0], __LINE__);
	check_netdev_of(fixture, "mlx5_2", 0, "ens1f0v0", &fx[MLX5_2], __LINE__);
	check_netdev_of(fixture, "mlx5_1", 0, "ens1f1np1", &fx[MLX5_1], __LINE__);
	check_netdev_of(fixture, "mlx5_1", 1, "ens1f1np1", &fx[MLX5_1], __LINE__);
	check_netdev_of(fixture, "mlx4_0", 1, "ens2", &fx[MLX4_0_P1], __LINE__);
	check_netdev_of(fixture, "mlx4_0", 2, "ens2d1", &fx[MLX4_0_P2], __LINE__);
	check_netdev_of(fixture, "erdma_0", 0, "eth2", &fx[ERDMA_0], __LINE__);
	check_netdev_of(fixture, "rxe0", 0, "eth1", &fx[RXE0], __LINE__);

	/* Two ports with a netdev each: the config must say which. */
	check_netdev_of_bad(fixture, "mlx4_0", 0, HPN_E_INVALID_CONFIG, "\"mlx4_0\"", __LINE__);
	check_netdev_of_bad(fixture, "mlx4_0", 0, HPN_E_INVALID_CONFIG, "2 netdevs", __LINE__);
	check_netdev_of_bad(fixture, "mlx4_0", 0, HPN_E_INVALID_CONFIG, "mlx4_0:<port>", __LINE__);
	/* No such port, no such device. */
	check_netdev_of_bad(fixture, "mlx4_0", 3, HPN_E_DEVICE_NOT_FOUND, "\"mlx4_0\"", __LINE__);
	check_netdev_of_bad(fixture, "mlx4_0", 3, HPN_E_DEVICE_NOT_FOUND, "port 3", __LINE__);
	check_netdev_of_bad(fixture, "mlx5_0", 2, HPN_E_DEVICE_NOT_FOUND, "port 2", __LINE__);
	check_netdev_of_bad(fixture, "nosuch", 0, HPN_E_DEVICE_NOT_FOUND, "\"nosuch\"", __LINE__);
	check_netdev_of_bad(fixture, "nosuch", 1, HPN_E_DEVICE_NOT_FOUND, "\"nosuch\"", __LINE__);
	check_netdev_of_bad("/nonexistent-sysfs", "mlx5_0", 0, HPN_E_DEVICE_NOT_FOUND, "mlx5_0",
			    __LINE__);

	/* Both directions agree: the device found for a netdev leads back to it. */
	{
		static const char *const netdevs[] = { "ens1f0np0", "ens1f1np1", "ens1f0v0", "ens2",
						       "ens2d1",    "eth2",	 "eth1" };

		for (size_t i = 0; i < HPN_ARRAY_SIZE(netdevs); i++) {
			struct hpn_link l = tree_link(fixture, netdevs[i]);
			struct hpn_rdma_dev d = { 0 }, back = { 0 };
			struct hpn_err err = { 0 };
			char ifname[HPN_IFNAMSIZ] = "";

			CHECK_INT_EQ(hpn_rdma_of_netdev(fixture, NULL, &l, &d, &err), 0);
			CHECK_INT_EQ(hpn_rdma_netdev_of(fixture, NULL, d.name, d.port, ifname,
							&back, &err),
				     0);
			CHECK_STR_EQ(ifname, netdevs[i]);
			CHECK_INT_EQ(back.port, d.port);
			CHECK_INT_EQ(err.code, 0);
		}
	}
}

static void test_classify(void)
{
	static const struct want none = { "nosuch", 0, HPN_RDMA_OTHER, "", "", false, false };

	check_classify(fixture, &fx[MLX5_0], __LINE__);
	check_classify(fixture, &fx[MLX5_1], __LINE__);
	check_classify(fixture, &fx[MLX5_2], __LINE__);
	check_classify(fixture, &fx[MLX4_0_P1], __LINE__);
	check_classify(fixture, &fx[ERDMA_0], __LINE__);
	check_classify(fixture, &fx[RXE0], __LINE__);
	check_classify(fixture, &none, __LINE__);
	check_classify("/nonexistent-sysfs", &none, __LINE__);
}

/* ---- scratch trees ---- */

/* mkdir -p under root. */
static void mkdirs(const char *root, const char *rel)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	CHECK(mkdir(path, 0755) == 0 || errno == EEXIST);
}

/* A symlink at root/rel, its directory made first. */
static void link_at(const char *root, const char *rel, const char *target)
{
	char path[PATH_MAX], dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s", rel);
	if (strrchr(dir, '/')) {
		*strrchr(dir, '/') = '\0';
		mkdirs(root, dir);
	}
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if (symlink(target, path) < 0) {
		fprintf(stderr, "\tsymlink %s -> %s: %s\n", path, target, strerror(errno));
		CHECK(!"symlink");
	}
}

/* root/rel holding text and a newline, as sysfs prints attributes. */
static void write_at(const char *root, const char *rel, const char *text)
{
	char path[PATH_MAX], dir[PATH_MAX];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s", rel);
	if (strrchr(dir, '/')) {
		*strrchr(dir, '/') = '\0';
		mkdirs(root, dir);
	}
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fprintf(f, "%s\n", text);
		fclose(f);
	}
}

/* A virtual netdev (devices/virtual/net/<name>) with a MAC and an ifindex. */
static void virtual_netdev(const char *root, const char *name, const char *mac, int ifindex)
{
	char rel[PATH_MAX], target[PATH_MAX], idx[16];

	snprintf(rel, sizeof(rel), "devices/virtual/net/%s/address", name);
	write_at(root, rel, mac);
	snprintf(rel, sizeof(rel), "devices/virtual/net/%s/ifindex", name);
	snprintf(idx, sizeof(idx), "%d", ifindex);
	write_at(root, rel, idx);
	snprintf(rel, sizeof(rel), "class/net/%s", name);
	snprintf(target, sizeof(target), "../../devices/virtual/net/%s", name);
	link_at(root, rel, target);
}

/* A software RDMA device over parent: node_type, node GUID, port 1 with GID netdevs. */
static void soft_ibdev(const char *root, const char *name, const char *node_type, const char *guid,
		       const char *parent, const char *const *ndevs)
{
	char rel[PATH_MAX], target[PATH_MAX];

	snprintf(rel, sizeof(rel), "devices/virtual/infiniband/%s/parent", name);
	write_at(root, rel, parent);
	snprintf(rel, sizeof(rel), "devices/virtual/infiniband/%s/node_type", name);
	write_at(root, rel, node_type);
	snprintf(rel, sizeof(rel), "devices/virtual/infiniband/%s/node_guid", name);
	write_at(root, rel, guid);
	snprintf(rel, sizeof(rel), "devices/virtual/infiniband/%s/ports/1/link_layer", name);
	write_at(root, rel, "Ethernet");
	for (int i = 0; ndevs && ndevs[i]; i++) {
		snprintf(rel, sizeof(rel),
			 "devices/virtual/infiniband/%s/ports/1/gid_attrs/ndevs/%d", name, i);
		write_at(root, rel, ndevs[i]);
	}
	snprintf(rel, sizeof(rel), "class/infiniband/%s", name);
	snprintf(target, sizeof(target), "../../devices/virtual/infiniband/%s", name);
	link_at(root, rel, target);
}

/*
 * A GID table naming "eth10" says nothing about "eth1" (nor the reverse): the
 * whole name is compared, not a prefix. 15-byte names (IFNAMSIZ - 1) work too.
 */
static void test_prefix_names(void)
{
	static const char *const on_eth10[] = { "eth10", "eth10", NULL };
	static const char *const on_long[] = { "abcdefghijklmno", NULL };
	static const struct want rxe_a = { "rxe_a", 1, HPN_RDMA_RXE, "rdma_rxe", "", false, true };
	static const struct want rxe_b = { "rxe_b", 1, HPN_RDMA_RXE, "rdma_rxe", "", false, true };
	char root[64];

	tmpdir_make(root, sizeof(root), "rdma-prefix");
	virtual_netdev(root, "eth1", "02:00:00:00:01:01", 3);
	virtual_netdev(root, "eth10", "02:00:00:00:01:10", 4);
	virtual_netdev(root, "abcdefghijklmn", "02:00:00:00:01:14", 5);
	virtual_netdev(root, "abcdefghijklmno", "02:00:00:00:01:15", 6);
	/* Node GUIDs that match no MAC: only the GID table can tie them to a netdev. */
	soft_ibdev(root, "rxe_a", "1: CA", "0000:0000:0000:00aa", "eth10", on_eth10);
	soft_ibdev(root, "rxe_b", "1: CA", "0000:0000:0000:00bb", "abcdefghijklmno", on_long);

	check_of_name(root, "eth10", &rxe_a, __LINE__);
	check_of_name(root, "eth1", NULL, __LINE__);
	check_netdev_of(root, "rxe_a", 0, "eth10", &rxe_a, __LINE__);
	check_of_name(root, "abcdefghijklmno", &rxe_b, __LINE__);
	check_of_name(root, "abcdefghijklmn", NULL, __LINE__);
	check_netdev_of(root, "rxe_b", 0, "abcdefghijklmno", &rxe_b, __LINE__);

	if (tmpdir_rm(root) < 0)
		perror("remove scratch directory");
}

/*
 * A PCI function that went away under a netdev and an RDMA device (dangling
 * device links): nothing matches through it, and nothing crashes.
 */
static void test_dangling(void)
{
	static const struct want gone = { "mlx5_9", 0, HPN_RDMA_OTHER, "", "", false, false };
	const char *fn = "devices/pci0000:98/0000:98:00.0";
	char root[64], rel[PATH_MAX];

	tmpdir_make(root, sizeof(root), "rdma-dangling");
	/* Both device links point at the same missing function. */
	snprintf(rel, sizeof(rel), "%s/0000:99:00.0/net/ens9np0/address", fn);
	write_at(root, rel, "b8:ce:f6:00:09:00");
	snprintf(rel, sizeof(rel), "%s/0000:99:00.0/net/ens9np0/device", fn);
	link_at(root, rel, "../../../0000:99:00.9");
	snprintf(rel, sizeof(rel), "../../%s/0000:99:00.0/net/ens9np0", fn);
	link_at(root, "class/net/ens9np0", rel);
	snprintf(rel, sizeof(rel), "%s/0000:99:00.0/infiniband/mlx5_9/node_guid", fn);
	write_at(root, rel, "b8ce:f603:0000:0900");
	snprintf(rel, sizeof(rel), "%s/0000:99:00.0/infiniband/mlx5_9/ports/1/link_layer", fn);
	write_at(root, rel, "Ethernet");
	snprintf(rel, sizeof(rel), "%s/0000:99:00.0/infiniband/mlx5_9/device", fn);
	link_at(root, rel, "../../../0000:99:00.9");
	snprintf(rel, sizeof(rel), "../../%s/0000:99:00.0/infiniband/mlx5_9", fn);
	link_at(root, "class/infiniband/mlx5_9", rel);
	/* And a class/infiniband entry whose directory is gone altogether. */
	link_at(root, "class/infiniband/mlx5_8", "../../devices/pci0000:98/gone/mlx5_8");

	check_of_name(root, "ens9np0", NULL, __LINE__);
	check_netdev_of_bad(root, "mlx5_9", 0, HPN_E_DEVICE_NOT_FOUND, "\"mlx5_9\"", __LINE__);
	check_netdev_of_bad(root, "mlx5_8", 0, HPN_E_DEVICE_NOT_FOUND, "\"mlx5_8\"", __LINE__);
	check_classify(root, &gone, __LINE__);

	if (tmpdir_rm(root) < 0)
		perror("remove scratch directory");
}

/*
 * Node GUIDs compared without regard to case ("0216:3EFF:..."), an erdma
 * function built from scratch, a VF whose GID table directory exists but is
 * empty, a multi-port function whose netdev has no dev_port (no guess), and
 * siw (a software RNIC: soft, but not rxe).
 */
static void test_built(void)
{
	static const struct want w[] = {
		{ "erdma_1", 1, HPN_RDMA_ERDMA, "erdma", "0000:00:07.0", false, false },
		{ "mlx5_7", 1, HPN_RDMA_MLX5, "mlx5_core", "0000:5e:00.2", true, false },
	};
	const struct want *erdma_1 = &w[0], *mlx5_7 = &w[1];
	static const struct want siw0 = { "siw0", 1, HPN_RDMA_OTHER, "", "", false, true };
	static const char *const on_eth5[] = { "eth5", NULL };
	char root[64];

	tmpdir_make(root, sizeof(root), "rdma-built");
	mkdirs(root, "bus/pci/drivers/erdma");
	mkdirs(root, "bus/pci/drivers/mlx5_core");
	mkdirs(root, "bus/pci/drivers/mlx4_core");

	/* ENI eth3 (virtio-net at 00:03.0) and its eRDMA at 00:07.0, GUID in upper case. */
	write_at(root, "devices/pci0000:00/0000:00:03.0/virtio0/net/eth3/address",
		 "00:16:3e:12:34:56");
	link_at(root, "devices/pci0000:00/0000:00:03.0/virtio0/net/eth3/device",
		"../../../virtio0");
	link_at(root, "class/net/eth3", "../../devices/pci0000:00/0000:00:03.0/virtio0/net/eth3");
	link_at(root, "devices/pci0000:00/0000:00:07.0/driver", "../../../bus/pci/drivers/erdma");
	write_at(root, "devices/pci0000:00/0000:00:07.0/infiniband/erdma_1/node_type", "4: RNIC");
	write_at(root, "devices/pci0000:00/0000:00:07.0/infiniband/erdma_1/node_guid",
		 "0216:3EFF:FE12:3456");
	write_at(root, "devices/pci0000:00/0000:00:07.0/infiniband/erdma_1/ports/1/link_layer",
		 "Ethernet");
	link_at(root, "devices/pci0000:00/0000:00:07.0/infiniband/erdma_1/device",
		"../../../0000:00:07.0");
	link_at(root, "class/infiniband/erdma_1",
		"../../devices/pci0000:00/0000:00:07.0/infiniband/erdma_1");

	/* VF 0000:5e:00.2 of PF 0000:5e:00.0: GID table directories present, empty. */
	mkdirs(root, "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0");
	link_at(root, "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.2/physfn", "../0000:5e:00.0");
	link_at(root, "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.2/driver",
		"../../../../bus/pci/drivers/mlx5_core");
	write_at(root, "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.2/net/ens3f0v0/address",
		 "02:00:00:00:5e:02");
	link_at(root, "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.2/net/ens3f0v0/device",
		"../../../0000:5e:00.2");
	link_at(root, "class/net/ens3f0v0",
		"../../devices/pci0000:5d/0000:5d:00.0/0000:5e:00.2/net/ens3f0v0");
	write_at(root, "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.2/infiniband/mlx5_7/node_guid",
		 "0000:0000:0000:0000");
	mkdirs(root, "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.2/infiniband/mlx5_7/ports/1/"
		     "gid_attrs/ndevs");
	mkdirs(root, "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.2/infiniband/mlx5_7/ports/1/"
		     "gid_attrs/types");
	link_at(root, "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.2/infiniband/mlx5_7/device",
		"../../../0000:5e:00.2");
	link_at(root, "class/infiniband/mlx5_7",
		"../../devices/pci0000:5d/0000:5d:00.0/0000:5e:00.2/infiniband/mlx5_7");

	/* A two-port function whose netdev has no dev_port: which port is unknown. */
	link_at(root, "devices/pci0000:80/0000:81:00.0/driver",
		"../../../bus/pci/drivers/mlx4_core");
	write_at(root, "devices/pci0000:80/0000:81:00.0/net/ens4/address", "e4:1d:2d:00:81:01");
	link_at(root, "devices/pci0000:80/0000:81:00.0/net/ens4/device", "../../../0000:81:00.0");
	link_at(root, "class/net/ens4", "../../devices/pci0000:80/0000:81:00.0/net/ens4");
	mkdirs(root, "devices/pci0000:80/0000:81:00.0/infiniband/mlx4_1/ports/1");
	mkdirs(root, "devices/pci0000:80/0000:81:00.0/infiniband/mlx4_1/ports/2");
	link_at(root, "devices/pci0000:80/0000:81:00.0/infiniband/mlx4_1/device",
		"../../../0000:81:00.0");
	link_at(root, "class/infiniband/mlx4_1",
		"../../devices/pci0000:80/0000:81:00.0/infiniband/mlx4_1");

	/* siw over eth5 (node type 4: an RNIC, though software). */
	virtual_netdev(root, "eth5", "02:00:00:00:00:05", 5);
	soft_ibdev(root, "siw0", "4: RNIC", "0000:00ff:fe00:0005", "eth5", on_eth5);

	check_of_name(root, "eth3", erdma_1, __LINE__);
	check_netdev_of(root, "erdma_1", 0, "eth3", erdma_1, __LINE__);
	check_of_name(root, "ens3f0v0", mlx5_7, __LINE__);
	check_netdev_of(root, "mlx5_7", 1, "ens3f0v0", mlx5_7, __LINE__);
	check_of_name(root, "ens4", NULL, __LINE__);
	check_netdev_of_bad(root, "mlx4_1", 0, HPN_E_DEVICE_NOT_FOUND, "\"mlx4_1\"", __LINE__);
	check_of_name(root, "eth5", &siw0, __LINE__);
	check_classify(root, &siw0, __LINE__);

	if (tmpdir_rm(root) < 0)
		perror("remove scratch directory");
}

/*
 * softRoce's device names: "rxe_" and 12 hex digits, the same for one
 * attachment and NIC every time, different for another network, attachment
 * or NIC.
 */
static void test_soft_name(void)
{
	char a[HPN_IBDEV_MAX], b[HPN_IBDEV_MAX], longkey[300];

	hpn_rdma_soft_name("net", "cid.eth0", 0, a);
	CHECK_INT_EQ(strlen(a), 16);
	CHECK(!strncmp(a, HPN_RDMA_SOFT_PREFIX, 4));
	CHECK_INT_EQ(strspn(a + 4, "0123456789abcdef"), 12);
	hpn_rdma_soft_name("net", "cid.eth0", 0, b);
	CHECK_STR_EQ(a, b);
	/* The value itself: names on nodes must not change between versions. */
	CHECK_STR_EQ(a, "rxe_c92e6357a6e8");
	hpn_rdma_soft_name("net", "cid.eth0", 1, b);
	/* NICs of one attachment: names that differ at a glance, not in one digit. */
	CHECK_STR_EQ(b, "rxe_5da3414865c3");
	hpn_rdma_soft_name("net2", "cid.eth0", 0, b);
	CHECK(strcmp(a, b) != 0);
	hpn_rdma_soft_name("net", "cid2.eth0", 0, b);
	CHECK(strcmp(a, b) != 0);
	hpn_rdma_soft_name("net", "cid.eth1", 0, b);
	CHECK(strcmp(a, b) != 0);
	/* The separators keep "n/et" + "x" apart from "n" + "et/x". */
	hpn_rdma_soft_name("ne", "t.cid.eth0", 0, b);
	CHECK(strcmp(a, b) != 0);
	/* The longest keys still give a short name (IB device names stop at 63 bytes). */
	memset(longkey, 'k', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = '\0';
	hpn_rdma_soft_name(longkey, longkey, 15, b);
	CHECK_INT_EQ(strlen(b), 16);
}

/*
 * What a node lacks for softRoce, named: a fake root without ib_core and
 * rdma_rxe lacks both; with them, only the kernel release can be missing.
 */
static void test_soft_ready(void)
{
	char root[64], why[512];
	bool kernel_ok = hpn_rdma_rxe_per_netns();

	tmpdir_make(root, sizeof(root), "rdma-soft");
	why[0] = '\0';
	CHECK_INT_EQ(hpn_rdma_soft_ready(root, why, sizeof(why)), -EOPNOTSUPP);
	CHECK_STR_HAS(why, "Soft-RoCE in a pod netns needs ");
	CHECK_STR_HAS(why, "the kernel's RDMA subsystem (no module/ib_core: load ib_core)");
	CHECK_STR_HAS(why, "the rdma_rxe module");
	if (kernel_ok)
		CHECK(!strstr(why, "or later"));
	else
		CHECK_STR_HAS(why, "Linux 7.1 or later (before it, every rxe device sends from "
				   "the initial netns; this kernel is ");
	mkdirs(root, "module/ib_core/parameters");
	why[0] = '\0';
	CHECK_INT_EQ(hpn_rdma_soft_ready(root, why, sizeof(why)), -EOPNOTSUPP);
	CHECK(!strstr(why, "ib_core"));
	CHECK_STR_HAS(why, "the rdma_rxe module (not loaded, and not in this kernel's modules)");
	mkdirs(root, "module/rdma_rxe");
	why[0] = '\0';
	CHECK_INT_EQ(hpn_rdma_soft_ready(root, why, sizeof(why)), kernel_ok ? 0 : -EOPNOTSUPP);
	if (!kernel_ok)
		CHECK_STR_HAS(why, "needs Linux 7.1 or later");
	CHECK(!strstr(why, "rdma_rxe"));
	if (tmpdir_rm(root) < 0)
		perror("remove scratch directory");
}

/*
 * The character devices of one RDMA device: its uverbs and umad/issm by
 * ibdev, with their numbers, sorted; another device's, and names that are
 * not RDMA character devices, left out.
 */
static void test_cdevs(void)
{
	struct hpn_rdma_cdevs cd;
	char root[64];

	tmpdir_make(root, sizeof(root), "rdma-cdevs");
	hpn_rdma_cdevs(root, "rxe_a", &cd);
	CHECK_INT_EQ(cd.n, 0);
	CHECK(!cd.rdma_cm);
	write_at(root, "class/infiniband_verbs/uverbs3/ibdev", "rxe_a");
	write_at(root, "class/infiniband_verbs/uverbs3/dev", "231:195");
	write_at(root, "class/infiniband_verbs/uverbs1/ibdev", "mlx5_0");
	write_at(root, "class/infiniband_verbs/uverbs1/dev", "231:193");
	write_at(root, "class/infiniband_verbs/abi_version", "6");
	write_at(root, "class/infiniband_mad/umad2/ibdev", "rxe_a");
	write_at(root, "class/infiniband_mad/umad2/dev", "231:2");
	write_at(root, "class/infiniband_mad/issm2/ibdev", "rxe_a");
	write_at(root, "class/infiniband_mad/other/ibdev", "rxe_a");
	mkdirs(root, "class/misc/rdma_cm");
	hpn_rdma_cdevs(root, "rxe_a", &cd);
	CHECK_INT_EQ(cd.n, 3);
	CHECK_STR_EQ(cd.v[0].name, "issm2");
	CHECK(cd.v[0].major == 0 && cd.v[0].minor == 0); /* no dev file */
	CHECK_STR_EQ(cd.v[1].name, "umad2");
	CHECK(cd.v[1].major == 231 && cd.v[1].minor == 2);
	CHECK_STR_EQ(cd.v[2].name, "uverbs3");
	CHECK(cd.v[2].major == 231 && cd.v[2].minor == 195);
	CHECK(cd.rdma_cm);
	CHECK(cd.cm.major == 0 && cd.cm.minor == 0); /* no dev file */
	write_at(root, "class/misc/rdma_cm/dev", "10:58");
	hpn_rdma_cdevs(root, "rxe_a", &cd);
	CHECK_STR_EQ(cd.cm.name, "rdma_cm");
	CHECK(cd.cm.major == 10 && cd.cm.minor == 58);
	if (tmpdir_rm(root) < 0)
		perror("remove scratch directory");
}

/* ---- eRDMA in its three modes (test/fixtures/erdma/, README) ---- */

static const char *const compat_tree = HPN_FIXTURES "/erdma/compat";
static const char *const ofed_tree = HPN_FIXTURES "/erdma/ofed";

/* w as check_classify has it, and what its port speaks and erdma's mode. */
static void check_as(const char *root, const struct want *w, enum hpn_rdma_proto proto,
		     enum hpn_erdma_mode mode, int line)
{
	struct hpn_rdma_dev d = { .port = w->port };
	int failed = check_failed;

	check_classify(root, w, line);
	snprintf(d.name, sizeof(d.name), "%s", w->dev);
	hpn_rdma_classify(root, &d);
	CHECK_INT_EQ(d.proto, proto);
	CHECK_INT_EQ(d.erdma, mode);
	CHECK_INT_EQ(hpn_rdma_nccl_ib(&d), proto != HPN_RDMA_PROTO_IWARP);
	if (check_failed != failed)
		fprintf(stderr, "\t%s in %s (line %d) speaks %s, erdma mode \"%s\"\n", w->dev, root,
			line, hpn_rdma_proto_name(d.proto), hpn_erdma_mode_name(d.erdma));
}

/*
 * The fixtures' devices in each mode: the iWARP default (sysfs/'s erdma_0),
 * compat (erdma_0 a channel adapter with RoCE v2 GIDs) and the OFED-style
 * package (rocep26s0, rdma-core's name of 0000:1a:00.0); the RDMA function
 * is the device's PCI address, never the ENI's; and the netdev of each. The
 * other devices of sysfs/ by their node type and link layer.
 */
static void test_erdma_modes(void)
{
	static const struct want compat = { "erdma_0",	    1,	   HPN_RDMA_ERDMA, "erdma",
					    "0000:00:06.0", false, false };
	static const struct want ofed = { "rocep26s0",	  1,	 HPN_RDMA_ERDMA, "erdma",
					  "0000:1a:00.0", false, false };
	static const struct {
		const char *const *root, *file, *want;
	} facts[] = {
		/* The RDMA function is class 0x00ff00 (no network controller), the ENI's not. */
		{ &fixture, "bus/pci/devices/0000:00:06.0/class", "0x00ff00" },
		{ &compat_tree, "bus/pci/devices/0000:00:06.0/class", "0x00ff00" },
		{ &ofed_tree, "bus/pci/devices/0000:1a:00.0/class", "0x00ff00" },
		{ &ofed_tree, "bus/pci/devices/0000:00:05.0/class", "0x020000" },
		{ &compat_tree, "class/infiniband/erdma_0/ports/1/gid_attrs/types/1", "RoCE v2" },
	};
	char line[64];

	check_as(fixture, &fx[ERDMA_0], HPN_RDMA_PROTO_IWARP, HPN_ERDMA_IWARP, __LINE__);
	check_as(compat_tree, &compat, HPN_RDMA_PROTO_ROCE, HPN_ERDMA_COMPAT, __LINE__);
	check_as(ofed_tree, &ofed, HPN_RDMA_PROTO_ROCE, HPN_ERDMA_OFED, __LINE__);
	check_as(fixture, &fx[MLX5_0], HPN_RDMA_PROTO_ROCE, HPN_ERDMA_NONE, __LINE__);
	check_as(fixture, &fx[MLX4_0_P2], HPN_RDMA_PROTO_ROCE, HPN_ERDMA_NONE, __LINE__);
	check_as(fixture, &fx[RXE0], HPN_RDMA_PROTO_ROCE, HPN_ERDMA_NONE, __LINE__);
	for (size_t i = 0; i < HPN_ARRAY_SIZE(facts); i++) {
		read_line(*facts[i].root, facts[i].file, line, sizeof(line));
		CHECK_STR_EQ(line, facts[i].want);
	}

	/* Netdev and device, both ways: by the GID table (and, in compat, the node GUID). */
	check_of_name(compat_tree, "eth2", &compat, __LINE__);
	check_netdev_of(compat_tree, "erdma_0", 0, "eth2", &compat, __LINE__);
	check_of_name(ofed_tree, "eth1", &ofed, __LINE__);
	check_netdev_of(ofed_tree, "rocep26s0", 1, "eth1", &ofed, __LINE__);
}

/* An RDMA device on PCI function bdf of pci0000:00 bound to driver, node type nt. */
static void pci_ibdev(const char *root, const char *bdf, const char *driver, const char *ibdev,
		      const char *nt)
{
	char fn[64], dev[160], rel[PATH_MAX], to[PATH_MAX];
	/* rel and to, formatted in place: the paths of one step. */
#define REL(...) (snprintf(rel, sizeof(rel), __VA_ARGS__), rel)
#define TO(...)	 (snprintf(to, sizeof(to), __VA_ARGS__), to)

	snprintf(fn, sizeof(fn), "devices/pci0000:00/%s", bdf);
	snprintf(dev, sizeof(dev), "%s/infiniband/%s", fn, ibdev);
	mkdirs(root, REL("bus/pci/drivers/%s", driver));
	link_at(root, REL("%s/driver", fn), TO("../../../bus/pci/drivers/%s", driver));
	link_at(root, REL("bus/pci/devices/%s", bdf), TO("../../../%s", fn));
	write_at(root, REL("%s/node_type", dev), nt);
	write_at(root, REL("%s/ports/1/link_layer", dev), "Ethernet");
	link_at(root, REL("%s/device", dev), TO("../../../%s", bdf));
	link_at(root, REL("class/infiniband/%s", ibdev), TO("../../%s", dev));
#undef REL
#undef TO
}

/*
 * Driver and node type decide, never a name: an iWARP erdma device named as
 * rdma-core would name a RoCE one is iWARP; a compat one under the kernel's
 * name is compat, under a PCI-like name that is not its function's too; an
 * mlx5 device named "erdma_9" or "rocep0s9" is mlx5; a device named
 * "erdma_8" with no driver is nothing of eRDMA.
 */
static void test_erdma_not_by_name(void)
{
	/* Each device: its name, function, driver and node type; what it must be classified. */
	static const struct {
		const char *ibdev, *bdf, *driver, *node_type;
		enum hpn_rdma_kind kind;
		enum hpn_rdma_proto proto;
		enum hpn_erdma_mode mode;
	} c[] = {
		{ "rocep0s6", "0000:00:06.0", "erdma", "4: RNIC", HPN_RDMA_ERDMA,
		  HPN_RDMA_PROTO_IWARP, HPN_ERDMA_IWARP },
		{ "erdma_1", "0000:00:07.0", "erdma", "1: CA", HPN_RDMA_ERDMA, HPN_RDMA_PROTO_ROCE,
		  HPN_ERDMA_COMPAT },
		{ "rocep0s9", "0000:00:08.0", "erdma", "1: CA", HPN_RDMA_ERDMA, HPN_RDMA_PROTO_ROCE,
		  HPN_ERDMA_COMPAT },
		{ "rocep0s10", "0000:00:0a.0", "erdma", "1: CA", HPN_RDMA_ERDMA,
		  HPN_RDMA_PROTO_ROCE, HPN_ERDMA_OFED },
		{ "erdma_9", "0000:00:09.0", "mlx5_core", "1: CA", HPN_RDMA_MLX5,
		  HPN_RDMA_PROTO_ROCE, HPN_ERDMA_NONE },
		{ "rocep0s11", "0000:00:0b.0", "mlx5_core", "1: CA", HPN_RDMA_MLX5,
		  HPN_RDMA_PROTO_ROCE, HPN_ERDMA_NONE },
	};
	static const struct want orphan = { "erdma_8", 1, HPN_RDMA_OTHER, "", "", false, false };
	char root[64];

	tmpdir_make(root, sizeof(root), "rdma-names");
	for (size_t i = 0; i < HPN_ARRAY_SIZE(c); i++)
		pci_ibdev(root, c[i].bdf, c[i].driver, c[i].ibdev, c[i].node_type);
	/* No bus device, no driver, no port: not eRDMA whatever its name. */
	mkdirs(root, "devices/pci0000:00/0000:00:0c.0/infiniband/erdma_8");
	write_at(root, "devices/pci0000:00/0000:00:0c.0/infiniband/erdma_8/node_type", "1: CA");
	link_at(root, "class/infiniband/erdma_8",
		"../../devices/pci0000:00/0000:00:0c.0/infiniband/erdma_8");

	for (size_t i = 0; i < HPN_ARRAY_SIZE(c); i++) {
		const struct want w = { c[i].ibdev, 1,	   c[i].kind, c[i].driver,
					c[i].bdf,   false, false };

		check_as(root, &w, c[i].proto, c[i].mode, __LINE__);
	}
	check_as(root, &orphan, HPN_RDMA_PROTO_UNKNOWN, HPN_ERDMA_NONE, __LINE__);
	if (tmpdir_rm(root) < 0)
		perror("remove scratch directory");
}

static void check_pname(const char *root, const char *pci, enum hpn_rdma_proto proto,
			const char *want, int line)
{
	char got[HPN_IBDEV_MAX] = "untouched";
	int r = hpn_rdma_persistent_name(root, pci, proto, got);

	if (!want) {
		CHECK(r < 0);
		CHECK_STR_EQ(got, "untouched");
	} else {
		CHECK_INT_EQ(r, 0);
		CHECK_STR_EQ(got, want);
	}
	if (r < 0 && want)
		fprintf(stderr, "\tpersistent name of %s (line %d): %d\n", pci, line, r);
}

/*
 * rdma-core's rdma_rename NAME_FALLBACK, rule by rule: the example of its
 * rules file (0000:00:0c.4 InfiniBand is ibp0s12f4), ACK's rocep26s0, the
 * domain, a slot number, a multi-function device's function 0, ARI, an
 * on-board index before all, and what has no name.
 */
static void test_persistent_name(void)
{
	unsigned char cfg[64] = { 0 };
	char root[64], path[PATH_MAX];
	FILE *f;

	tmpdir_make(root, sizeof(root), "rdma-pname");
	mkdirs(root, "devices/pci0000:00/0000:00:0c.4");
	link_at(root, "bus/pci/devices/0000:00:0c.4", "../../../devices/pci0000:00/0000:00:0c.4");
	check_pname(root, "0000:00:0c.4", HPN_RDMA_PROTO_IB, "ibp0s12f4", __LINE__);
	check_pname(root, "0000:00:0c.4", HPN_RDMA_PROTO_ROCE, "rocep0s12f4", __LINE__);
	check_pname(root, "0000:00:0c.4", HPN_RDMA_PROTO_IWARP, "iwp0s12f4", __LINE__);
	check_pname(root, "0000:00:0c.4", HPN_RDMA_PROTO_UNKNOWN, NULL, __LINE__);
	check_pname(root, "not-pci", HPN_RDMA_PROTO_ROCE, NULL, __LINE__);
	check_pname(ofed_tree, "0000:1a:00.0", HPN_RDMA_PROTO_ROCE, "rocep26s0", __LINE__);
	check_pname(compat_tree, "0000:00:06.0", HPN_RDMA_PROTO_ROCE, "rocep0s6", __LINE__);
	/* Domain 2 is P2; bus and device are decimal. */
	mkdirs(root, "devices/pci0002:00/0002:af:1f.0");
	link_at(root, "bus/pci/devices/0002:af:1f.0", "../../../devices/pci0002:00/0002:af:1f.0");
	check_pname(root, "0002:af:1f.0", HPN_RDMA_PROTO_ROCE, "roceP2p175s31", __LINE__);
	/* A physical slot holding the device: its number, no bus or device. */
	write_at(root, "bus/pci/slots/7/address", "0002:af:1f");
	check_pname(root, "0002:af:1f.0", HPN_RDMA_PROTO_ROCE, "roceP2s7", __LINE__);
	/* Function 0 of a multi-function device: f0 (bit 7 of the header type). */
	cfg[0x0e] = 0x80;
	snprintf(path, sizeof(path), "%s/devices/pci0002:00/0002:af:1f.0/config", root);
	f = fopen(path, "w");
	CHECK(f && fwrite(cfg, 1, sizeof(cfg), f) == sizeof(cfg));
	if (f)
		fclose(f);
	check_pname(root, "0002:af:1f.0", HPN_RDMA_PROTO_ROCE, "roceP2s7f0", __LINE__);
	/* ARI: function 4 of device 12 is function 100. */
	write_at(root, "devices/pci0000:00/0000:00:0c.4/ari_enabled", "1");
	check_pname(root, "0000:00:0c.4", HPN_RDMA_PROTO_ROCE, "rocep0s12f100", __LINE__);
	/* An on-board index comes before the PCI rule; one above 16383 is not taken. */
	write_at(root, "devices/pci0000:00/0000:00:0c.4/acpi_index", "16384");
	check_pname(root, "0000:00:0c.4", HPN_RDMA_PROTO_ROCE, "rocep0s12f100", __LINE__);
	write_at(root, "devices/pci0000:00/0000:00:0c.4/acpi_index", "3");
	check_pname(root, "0000:00:0c.4", HPN_RDMA_PROTO_ROCE, "roceo3", __LINE__);
	if (tmpdir_rm(root) < 0)
		perror("remove scratch directory");
}

int main(void)
{
	test_names();
	test_fixture_shape();
	test_of_netdev();
	test_netdev_of();
	test_classify();
	test_prefix_names();
	test_dangling();
	test_built();
	test_soft_name();
	test_soft_ready();
	test_cdevs();
	test_erdma_modes();
	test_erdma_not_by_name();
	test_persistent_name();
	return check_done();
}
