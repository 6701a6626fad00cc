// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/sysfs.c: PCI address <-> netdev through sysfs, against
 * the fake tree in test/fixtures/sysfs/ (see its README) and against shapes
 * built here in a scratch directory.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "sysfs.h"
#include "tmpdir.h"

static const char *const fixture = HPN_FIXTURES "/sysfs";

/* names[0..n) holds want (order free). */
static bool has_name(char (*names)[16], size_t n, const char *want)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], want))
			return true;
	return false;
}

/* pci has exactly the netdevs in want (NULL-terminated), in any order. */
static void check_netdevs(const char *root, const char *pci, const char *const *want, int line)
{
	char names[8][16];
	size_t n = 99, n_want = 0;
	int r = hpn_sysfs_pci_netdevs(root, pci, names, 8, &n);

	while (want[n_want])
		n_want++;
	if (r != 0 || n != n_want)
		fprintf(stderr, "\tnetdevs of %s (line %d): r=%d n=%zu\n", pci, line, r, n);
	CHECK_INT_EQ(r, 0);
	CHECK_INT_EQ(n, n_want);
	for (size_t i = 0; r == 0 && i < n_want; i++) {
		if (!has_name(names, n < 8 ? n : 8, want[i]))
			fprintf(stderr, "\t%s lacks %s (line %d)\n", pci, want[i], line);
		CHECK(has_name(names, n < 8 ? n : 8, want[i]));
	}
}

static void check_pci(const char *root, const char *ifname, const char *want, int line)
{
	char out[HPN_PCI_STR] = "untouched";
	int r = hpn_sysfs_netdev_pci(root, ifname, out);

	if (want) {
		if (r != 0 || strcmp(out, want))
			fprintf(stderr, "\tPCI of %s (line %d): r=%d out=%s\n", ifname, line, r,
				out);
		CHECK_INT_EQ(r, 0);
		CHECK_STR_EQ(out, want);
	} else {
		if (r != -ENOENT)
			fprintf(stderr, "\tPCI of %s (line %d): r=%d out=%s\n", ifname, line, r,
				out);
		CHECK_INT_EQ(r, -ENOENT);
		CHECK_STR_EQ(out, "untouched");
	}
}

static void test_fixture(void)
{
	static const char *const pf0[] = { "ens1f0np0", NULL };
	static const char *const pf1[] = { "ens1f1np1", "ens1f1npf1vf0", NULL };
	static const char *const vf0[] = { "ens1f0v0", NULL };
	static const char *const virtio[] = { "eth1", NULL };
	static const char *const eni[] = { "eth2", NULL };
	static const char *const cx3[] = { "ens2", "ens2d1", NULL };
	static const char *const none[] = { NULL };
	char path[PATH_MAX];
	struct stat sb;

	/* The tree is really made of symlinks (a checkout without them would mislead). */
	snprintf(path, sizeof(path), "%s/class/net/ens1f0np0", fixture);
	CHECK(lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode));
	snprintf(path, sizeof(path), "%s/bus/pci/devices/0000:af:00.0", fixture);
	CHECK(lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode));

	/* PCI function -> netdevs. */
	check_netdevs(fixture, "0000:af:00.0", pf0, __LINE__);
	check_netdevs(fixture, "0000:af:00.1", pf1, __LINE__); /* switchdev: two */
	check_netdevs(fixture, "0000:af:00.2", vf0, __LINE__);
	check_netdevs(fixture, "0000:00:04.0", virtio, __LINE__); /* via virtio1/net */
	check_netdevs(fixture, "0000:af:00.3", none, __LINE__);	  /* VF on vfio-pci */
	check_netdevs(fixture, "0000:ae:00.0", none, __LINE__);	  /* a bridge */
	check_netdevs(fixture, "0000:3b:00.0", cx3, __LINE__);	  /* two ports, one function */
	check_netdevs(fixture, "0000:00:05.0", eni, __LINE__);	  /* via virtio2/net */
	check_netdevs(fixture, "0000:00:06.0", none, __LINE__);	  /* eRDMA: RDMA only */

	/* No such PCI function: -ENOENT, count untouched. */
	{
		char names[4][16];
		size_t n = 99;

		CHECK_INT_EQ(hpn_sysfs_pci_netdevs(fixture, "0000:3c:00.0", names, 4, &n), -ENOENT);
		CHECK_INT_EQ(n, 99);
		CHECK_INT_EQ(
			hpn_sysfs_pci_netdevs("/nonexistent-sysfs", "0000:af:00.0", names, 4, &n),
			-ENOENT);
		CHECK_INT_EQ(n, 99);
	}

	/* Room for fewer names than there are: no overflow, max stored, the true count
	 * reported so a caller can tell "several netdevs" from "one". */
	{
		char names[2][16];
		size_t n = 99;

		memset(names, 'Z', sizeof(names));
		CHECK_INT_EQ(hpn_sysfs_pci_netdevs(fixture, "0000:af:00.1", names, 1, &n), 0);
		CHECK_INT_EQ(n, 2);
		CHECK(!strcmp(names[0], "ens1f1np1") || !strcmp(names[0], "ens1f1npf1vf0"));
		CHECK_INT_EQ(names[1][0], 'Z');
	}

	/* Netdev -> PCI function. */
	check_pci(fixture, "ens1f0np0", "0000:af:00.0", __LINE__);
	check_pci(fixture, "ens1f1np1", "0000:af:00.1", __LINE__);
	check_pci(fixture, "ens1f1npf1vf0", "0000:af:00.1", __LINE__);
	check_pci(fixture, "ens1f0v0", "0000:af:00.2", __LINE__);
	check_pci(fixture, "eth1", "0000:00:04.0", __LINE__); /* up from virtio1 */
	check_pci(fixture, "eth2", "0000:00:05.0", __LINE__); /* the ENI, not its eRDMA */
	check_pci(fixture, "ens2", "0000:3b:00.0", __LINE__);
	check_pci(fixture, "ens2d1", "0000:3b:00.0", __LINE__);
	/* Virtual devices have no device link; unknown names have nothing. */
	check_pci(fixture, "veth0", NULL, __LINE__);
	check_pci(fixture, "lo", NULL, __LINE__);
	check_pci(fixture, "nosuch0", NULL, __LINE__);
	check_pci("/nonexistent-sysfs", "ens1f0np0", NULL, __LINE__);

	/* Both directions agree for every PCI netdev in the tree. */
	{
		static const char *const netdevs[] = { "ens1f0np0", "ens1f1np1", "ens1f1npf1vf0",
						       "ens1f0v0",  "eth1",	 "eth2",
						       "ens2",	    "ens2d1" };

		for (size_t i = 0; i < HPN_ARRAY_SIZE(netdevs); i++) {
			char pci[HPN_PCI_STR] = "", names[8][16];
			size_t n = 0;

			CHECK_INT_EQ(hpn_sysfs_netdev_pci(fixture, netdevs[i], pci), 0);
			CHECK_INT_EQ(hpn_sysfs_pci_netdevs(fixture, pci, names, 8, &n), 0);
			CHECK(has_name(names, n, netdevs[i]));
		}
	}
}

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

static void link_at(const char *root, const char *rel, const char *target)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if (symlink(target, path) < 0) {
		fprintf(stderr, "\tsymlink %s -> %s: %s\n", path, target, strerror(errno));
		CHECK(!"symlink");
	}
}

static void touch_at(const char *root, const char *rel)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
}

/*
 * Shapes built here, in the real layout: a ConnectX PF and a virtio-net NIC
 * (as in the fixture, made from scratch), a USB NIC under a PCI xHCI
 * controller, virtio-mmio (no PCI at all), a netdev whose PCI device was
 * unplugged (dangling link), and virtio children that are not network devices.
 */
static void test_built(void)
{
	static const char *const pf[] = { "ens2f0np0", NULL };
	static const char *const virtio[] = { "eth0", NULL };
	static const char *const none[] = { NULL };
	char root[64];

	tmpdir_make(root, sizeof(root), "sysfs");

	/* ConnectX PF. */
	mkdirs(root, "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/net/ens2f0np0");
	touch_at(root, "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/vendor");
	link_at(root, "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/net/ens2f0np0/device",
		"../../../0000:3b:00.0");
	mkdirs(root, "bus/pci/devices");
	mkdirs(root, "class/net");
	link_at(root, "bus/pci/devices/0000:3b:00.0",
		"../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
	link_at(root, "class/net/ens2f0np0",
		"../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/net/ens2f0np0");

	/* virtio-net at 0000:00:03.0, child virtio2 (as on this kind of VM). */
	mkdirs(root, "devices/pci0000:00/0000:00:03.0/virtio2/net/eth0");
	link_at(root, "devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/device",
		"../../../virtio2");
	link_at(root, "bus/pci/devices/0000:00:03.0", "../../../devices/pci0000:00/0000:00:03.0");
	link_at(root, "class/net/eth0", "../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth0");

	/* virtio-blk at 0000:00:05.0: a virtio child without net/. */
	mkdirs(root, "devices/pci0000:00/0000:00:05.0/virtio3/block/vda");
	link_at(root, "bus/pci/devices/0000:00:05.0", "../../../devices/pci0000:00/0000:00:05.0");

	/* A USB NIC: its parent chain reaches a PCI xHCI controller, but it is not PCI. */
	mkdirs(root, "devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/net/enx001122334455");
	link_at(root, "devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/net/enx001122334455/device",
		"../../../1-1:1.0");
	link_at(root, "bus/pci/devices/0000:00:14.0", "../../../devices/pci0000:00/0000:00:14.0");
	link_at(root, "class/net/enx001122334455",
		"../../devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/net/enx001122334455");

	/* virtio-mmio (arm64 VMs): virtio child of a platform device. */
	mkdirs(root, "devices/platform/a003e00.virtio_mmio/virtio4/net/eth2");
	link_at(root, "devices/platform/a003e00.virtio_mmio/virtio4/net/eth2/device",
		"../../../virtio4");
	link_at(root, "class/net/eth2",
		"../../devices/platform/a003e00.virtio_mmio/virtio4/net/eth2");

	/* Hot-unplugged: class/net link left pointing at nothing. */
	link_at(root, "class/net/ghost0", "../../devices/pci0000:00/0000:00:09.0/net/ghost0");

	/* A veth: class/net link into devices/virtual, no device link. */
	mkdirs(root, "devices/virtual/net/veth1");
	link_at(root, "class/net/veth1", "../../devices/virtual/net/veth1");

	check_netdevs(root, "0000:3b:00.0", pf, __LINE__);
	check_netdevs(root, "0000:00:03.0", virtio, __LINE__);
	check_netdevs(root, "0000:00:05.0", none, __LINE__);
	check_netdevs(root, "0000:00:14.0", none, __LINE__);
	{
		char names[2][16];
		size_t n = 99;

		CHECK_INT_EQ(hpn_sysfs_pci_netdevs(root, "0000:00:09.0", names, 2, &n), -ENOENT);
	}

	check_pci(root, "ens2f0np0", "0000:3b:00.0", __LINE__);
	check_pci(root, "eth0", "0000:00:03.0", __LINE__);
	check_pci(root, "enx001122334455", NULL, __LINE__); /* not the xHCI controller's */
	check_pci(root, "eth2", NULL, __LINE__);
	check_pci(root, "ghost0", NULL, __LINE__);
	check_pci(root, "veth1", NULL, __LINE__);

	if (tmpdir_rm(root) < 0)
		perror("remove scratch directory");
}

int main(void)
{
	test_fixture();
	test_built();
	return check_done();
}
