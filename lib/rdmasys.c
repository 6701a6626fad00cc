// SPDX-License-Identifier: Apache-2.0
/*
 * RDMA devices as sysfs shows them, under a root that tests point at a fake
 * tree: which device serves a netdev and the reverse (RDMA netlink's port
 * dump first on the real root, rdma.c's), a device's kind, driver, PCI
 * function, protocol and erdma mode, rdma-core's persistent names, the
 * character devices a container needs, the netns mode of a fake tree, and
 * whether the node can make a Soft-RoCE device for a pod.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "link.h"
#include "rdma.h"
#include "sysfs.h"
#include "util.h"

/* ---- Soft-RoCE readiness ---------------------------------------------------- */

/* Does a modules file of the running kernel name rdma_rxe (a module modprobe can load)? */
static bool module_listed(const char *release, const char *file, const char *mod)
{
	static const char *const dirs[] = { "/lib/modules", "/usr/lib/modules" };
	char path[PATH_MAX], line[1024], want[64];
	bool found = false;

	snprintf(want, sizeof(want), "/%s.ko", mod);
	for (size_t i = 0; !found && i < HPN_ARRAY_SIZE(dirs); i++) {
		FILE *f;

		if (hpn_snprintf(path, sizeof(path), "%s/%s/%s", dirs[i], release, file) < 0 ||
		    !(f = fopen(path, "re")))
			continue;
		while (!found && fgets(line, sizeof(line), f)) {
			char *colon = strchr(line, ':'), *nl = strchr(line, '\n');

			/* modules.dep: "kernel/.../rdma_rxe.ko.xz: deps"; builtin: one path a line. */
			if (colon)
				*colon = '\0';
			else if (nl)
				*nl = '\0';
			char *hit = strstr(line, want);

			found = hit && (hit[strlen(want)] == '\0' || hit[strlen(want)] == '.');
		}
		fclose(f);
	}
	return found;
}

/* The running kernel's release, "unknown" when uname fails. */
static void kernel_release(struct utsname *u)
{
	if (uname(u) < 0)
		snprintf(u->release, sizeof(u->release), "unknown");
}

/*
 * By the release, not by a probe: a probe would have to make an rxe device
 * over a netdev in a second netns (a netns, a veth pair, a module load) and
 * see which netns its socket lands in -- changes on the node, tens of
 * milliseconds, before ADD may change anything. The release is what tells
 * the kernels apart; a distribution kernel that backported the per-netns
 * socket would be refused (none is known).
 */
bool hpn_rdma_rxe_per_netns(void)
{
	unsigned int major = 0, minor = 0;
	struct utsname u;

	kernel_release(&u);
	return hpn_kernel_version(u.release, &major, &minor) == 0 &&
	       (major > HPN_RDMA_SOFT_KERNEL_MAJOR ||
		(major == HPN_RDMA_SOFT_KERNEL_MAJOR && minor >= HPN_RDMA_SOFT_KERNEL_MINOR));
}

int hpn_rdma_soft_ready(const char *sysfs_root, char *why, size_t len)
{
	char missing[3][200];
	size_t n = 0, off = 0;
	struct utsname u;
	enum hpn_rdma_netns mode;
	struct hpn_err e = { 0 };
	int r;

	kernel_release(&u);
	if (!hpn_rdma_rxe_per_netns())
		snprintf(missing[n++], sizeof(missing[0]),
			 "Linux %d.%d or later (before it, every rxe device sends from the initial "
			 "netns; this kernel is %.64s)",
			 HPN_RDMA_SOFT_KERNEL_MAJOR, HPN_RDMA_SOFT_KERNEL_MINOR, u.release);
	r = hpn_rdma_node_netns_mode(sysfs_root, &mode, &e);
	if (r == -EPROTONOSUPPORT)
		snprintf(missing[n++], sizeof(missing[0]),
			 "the kernel's RDMA subsystem (%s: load ib_core)",
			 hpn_sysfs_fake(sysfs_root) ? "no module/ib_core" : "no RDMA netlink");
	else if (r < 0)
		snprintf(missing[n++], sizeof(missing[0]), "the RDMA netns mode (%.150s)", e.msg);
	if (!hpn_sysfs_exists("%s/module/rdma_rxe", sysfs_root) &&
	    (hpn_sysfs_fake(sysfs_root) ||
	     (!module_listed(u.release, "modules.dep", "rdma_rxe") &&
	      !module_listed(u.release, "modules.builtin", "rdma_rxe"))))
		snprintf(missing[n++], sizeof(missing[0]),
			 "the rdma_rxe module (not loaded, and not in this kernel's modules)");
	if (!n)
		return 0;
	off = (size_t)snprintf(why, len, "Soft-RoCE in a pod netns needs ");
	for (size_t i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(why + off, len - off, "%s%s",
					i == 0	     ? ""
					: i + 1 == n ? " and "
						     : ", ",
					missing[i]);
	return -EOPNOTSUPP;
}

/* ---- sysfs ------------------------------------------------------------------ */

static int pathf(char path[PATH_MAX], const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int pathf(char path[PATH_MAX], const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(path, PATH_MAX, fmt, ap);
	va_end(ap);
	return r < 0 || r >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static bool exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* basename(realpath(path)) into out, or -errno. */
static int link_base(char *out, size_t len, const char *path)
{
	char real[PATH_MAX];
	const char *base;

	if (!realpath(path, real))
		return -errno;
	base = strrchr(real, '/');
	return hpn_snprintf(out, len, "%s", base ? base + 1 : real);
}

/* "%s%u" appended to out (len HPN_IBDEV_MAX), -ENAMETOOLONG when it does not fit. */
static int name_add(char *out, const char *what, unsigned int v)
{
	size_t n = strlen(out);

	return hpn_snprintf(out + n, HPN_IBDEV_MAX - n, "%s%u", what, v);
}

/* Is bit 7 of the function's config header type (offset 0x0e) set: a multi-function device? */
static bool multi_function(const char *fn)
{
	char path[PATH_MAX];
	unsigned char hdr[16];
	ssize_t n;
	int fd;

	if (pathf(path, "%s/config", fn) < 0 || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, hdr, sizeof(hdr));
	close(fd);
	return n == (ssize_t)sizeof(hdr) && (hdr[0x0e] & 0x80);
}

/* The number of the physical slot whose address is "dddd:bb:ss", 0 when none is. */
static unsigned int slot_number(const char *root, const char *pci)
{
	char path[PATH_MAX], addr[32];
	unsigned int found = 0;
	struct dirent *de;
	DIR *d;

	if (pathf(path, "%s/bus/pci/slots", root) < 0 || !(d = opendir(path)))
		return 0;
	while (!found && (de = readdir(d))) {
		unsigned long v = strtoul(de->d_name, NULL, 10);

		if (v > 0 && v < 65536 &&
		    hpn_sysfs_read(addr, sizeof(addr), "%s/%s/address", path, de->d_name) == 0 &&
		    !strncmp(addr, pci, 10) && !addr[10])
			found = (unsigned int)v;
	}
	closedir(d);
	return found;
}

int hpn_rdma_persistent_name(const char *root, const char *pci, enum hpn_rdma_proto proto,
			     char out[HPN_IBDEV_MAX])
{
	/* RDMA netlink's RDMA_NLDEV_ATTR_DEV_PROTOCOL, which rdma_rename takes as the prefix. */
	const char *prefix = proto == HPN_RDMA_PROTO_ROCE    ? "roce"
			     : proto == HPN_RDMA_PROTO_IB    ? "ib"
			     : proto == HPN_RDMA_PROTO_IWARP ? "iw"
							     : NULL;
	unsigned int domain, bus, slot, func, sun;
	char norm[HPN_PCI_STR], fn[PATH_MAX], v[32], name[HPN_IBDEV_MAX];
	int r;

	if (!prefix || hpn_pci_normalise(pci, norm) < 0)
		return -EINVAL;
	/* "dddd:bb:ss.f", checked by hpn_pci_normalise: each field ends at a separator. */
	domain = (unsigned int)strtoul(norm, NULL, 16);
	bus = (unsigned int)strtoul(norm + 5, NULL, 16);
	slot = (unsigned int)strtoul(norm + 8, NULL, 16);
	func = (unsigned int)(norm[11] - '0');
	r = pathf(fn, "%s/bus/pci/devices/%s", root, norm);
	if (r < 0)
		return r;
	/* NAME_ONBOARD first: the firmware's index of an on-board device. */
	if (hpn_sysfs_read(v, sizeof(v), "%s/acpi_index", fn) == 0 ||
	    hpn_sysfs_read(v, sizeof(v), "%s/index", fn) == 0) {
		char *end;
		unsigned long o = strtoul(v, &end, 10);

		/* rdma_rename (after systemd's net_id) takes none above 16383. */
		if (end != v && !*end && o <= 16383)
			return hpn_snprintf(out, HPN_IBDEV_MAX, "%so%lu", prefix, o);
	}
	/* ARI: one 8-bit function number, the slot its upper 5 bits. */
	if (hpn_sysfs_read(v, sizeof(v), "%s/ari_enabled", fn) == 0 && !strcmp(v, "1"))
		func += slot * 8;
	sun = slot_number(root, norm);
	snprintf(name, sizeof(name), "%s", prefix);
	r = domain ? name_add(name, "P", domain) : 0;
	if (r >= 0)
		r = sun ? name_add(name, "s", sun) : name_add(name, "p", bus);
	if (r >= 0 && !sun)
		r = name_add(name, "s", slot);
	if (r >= 0 && (func || multi_function(fn)))
		r = name_add(name, "f", func);
	if (r < 0)
		return r;
	memcpy(out, name, sizeof(name));
	return 0;
}

/* The protocol of port (1 when 0) of device dev under dir, from its node type and link layer. */
static enum hpn_rdma_proto port_proto(const char *dir, uint32_t port)
{
	char node_type[32], ll[32];

	if (hpn_sysfs_read(node_type, sizeof(node_type), "%s/node_type", dir) < 0)
		return HPN_RDMA_PROTO_UNKNOWN;
	/* RDMA_NODE_RNIC, "4: RNIC": erdma's default, siw, cxgb4, irdma in iWARP mode. */
	if (node_type[0] == '4')
		return HPN_RDMA_PROTO_IWARP;
	if (node_type[0] != '1' ||
	    hpn_sysfs_read(ll, sizeof(ll), "%s/ports/%u/link_layer", dir, port ? port : 1) < 0)
		return HPN_RDMA_PROTO_UNKNOWN;
	return !strcmp(ll, "InfiniBand") ? HPN_RDMA_PROTO_IB
	       : !strcmp(ll, "Ethernet") ? HPN_RDMA_PROTO_ROCE
					 : HPN_RDMA_PROTO_UNKNOWN;
}

/*
 * erdma's mode, by what the driver registered: an RNIC is iWARP; a channel
 * adapter is compat, or the OFED-style package when the device bears
 * rdma-core's persistent name for its function (the only trace the package
 * leaves in sysfs; the name decides nothing else).
 */
static enum hpn_erdma_mode erdma_mode(const char *root, const struct hpn_rdma_dev *dev)
{
	char want[HPN_IBDEV_MAX];

	if (dev->proto == HPN_RDMA_PROTO_IWARP)
		return HPN_ERDMA_IWARP;
	if (dev->proto != HPN_RDMA_PROTO_ROCE)
		return HPN_ERDMA_NONE;
	if (dev->pci[0] && hpn_rdma_persistent_name(root, dev->pci, dev->proto, want) == 0 &&
	    !strcmp(want, dev->name))
		return HPN_ERDMA_OFED;
	return HPN_ERDMA_COMPAT;
}

void hpn_rdma_classify(const char *root, struct hpn_rdma_dev *dev)
{
	char base[PATH_MAX], dir[PATH_MAX], path[PATH_MAX];

	dev->kind = HPN_RDMA_OTHER;
	dev->driver[0] = dev->pci[0] = '\0';
	dev->vf = dev->soft = false;
	dev->proto = HPN_RDMA_PROTO_UNKNOWN;
	dev->erdma = HPN_ERDMA_NONE;
	if (pathf(dir, "%s/class/infiniband/%s", root, dev->name) < 0)
		return;
	dev->proto = port_proto(dir, dev->port);
	if (pathf(path, "%s/device", dir) == 0 && link_base(base, sizeof(base), path) == 0) {
		if (strlen(base) != 12 || hpn_pci_normalise(base, dev->pci) < 0)
			dev->pci[0] = '\0';
		dev->vf = pathf(path, "%s/device/physfn", dir) == 0 && exists(path);
		if (pathf(path, "%s/device/driver", dir) == 0)
			link_base(dev->driver, sizeof(dev->driver), path);
		if (!strcmp(dev->driver, "mlx5_core")) {
			dev->kind = HPN_RDMA_MLX5;
		} else if (!strcmp(dev->driver, "erdma")) {
			dev->kind = HPN_RDMA_ERDMA;
			dev->erdma = erdma_mode(root, dev);
		}
		return;
	}
	/* No bus device: a software device over a netdev, named by its "parent". */
	if (pathf(path, "%s/parent", dir) < 0 || !exists(path))
		return;
	dev->soft = true;
	/* rxe is a channel adapter (node type 1); siw is an RNIC (4). */
	if (hpn_sysfs_read(base, sizeof(base), "%s/node_type", dir) == 0 && base[0] == '1') {
		dev->kind = HPN_RDMA_RXE;
		snprintf(dev->driver, sizeof(dev->driver), "rdma_rxe");
	}
}

/* EUI-64 of a MAC as sysfs prints a node GUID: "0216:3eff:fe12:3456". */
static void mac_guid(const uint8_t m[HPN_MAC_LEN], char out[20])
{
	snprintf(out, 20, "%02x%02x:%02xff:fe%02x:%02x%02x", m[0] ^ 0x02, m[1], m[2], m[3], m[4],
		 m[5]);
}

/* Port of device dev whose GID table names netdev ifname; 0 when none does. */
static uint32_t gid_port(const char *root, const char *dev, const char *ifname)
{
	char path[PATH_MAX], nd[HPN_IFNAMSIZ + 2];
	struct dirent *pe, *ge;
	uint32_t found = 0;
	DIR *pd;

	if (hpn_snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports", root, dev) < 0 ||
	    !(pd = opendir(path)))
		return 0;
	while (!found && (pe = readdir(pd))) {
		unsigned long port = strtoul(pe->d_name, NULL, 10);
		DIR *gd;

		if (!port ||
		    hpn_snprintf(path, sizeof(path),
				 "%s/class/infiniband/%s/ports/%s/gid_attrs/ndevs", root, dev,
				 pe->d_name) < 0 ||
		    !(gd = opendir(path)))
			continue;
		while (!found && (ge = readdir(gd)))
			if (ge->d_name[0] != '.' &&
			    hpn_sysfs_read(nd, sizeof(nd), "%s/%s", path, ge->d_name) == 0 &&
			    !strcmp(nd, ifname))
				found = (uint32_t)port;
		closedir(gd);
	}
	closedir(pd);
	return found;
}

/*
 * A switchdev representor (phys_port_name "pf0vf1", "pf0", "c1pf0vf2", "pf0sf1")
 * sits on the uplink's PCI function but has no RDMA device of its own; the
 * uplink is "p0", "p1"; an ordinary NIC has no phys_port_name.
 */
/*
 * Do symlinks p and q end in the same name? One readlink each: checked
 * before realpath's walk of every component, which a node of n NICs and n
 * RDMA devices would otherwise pay n * n times per scan.
 */
static bool same_base(const char *p, const char *q)
{
	char a[PATH_MAX], b[PATH_MAX];
	ssize_t la = readlink(p, a, sizeof(a) - 1), lb = readlink(q, b, sizeof(b) - 1);
	const char *ba, *bb;

	if (la < 0 || lb < 0)
		return true; /* not both links: realpath decides */
	a[la] = b[lb] = '\0';
	ba = strrchr(a, '/');
	bb = strrchr(b, '/');
	return !strcmp(ba ? ba + 1 : a, bb ? bb + 1 : b);
}

static bool representor(const char *root, const char *ifname)
{
	char name[64];
	size_t i = 1;

	if (hpn_sysfs_read(name, sizeof(name), "%s/class/net/%s/phys_port_name", root, ifname) <
		    0 ||
	    !name[0])
		return false;
	if (name[0] == 'p')
		while (name[i] >= '0' && name[i] <= '9')
			i++;
	return !(name[0] == 'p' && i > 1 && !name[i]);
}

/* Number of ports of dev. */
static unsigned int port_count(const char *root, const char *dev)
{
	char path[PATH_MAX];
	struct dirent *de;
	unsigned int n = 0;
	DIR *d;

	if (hpn_snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports", root, dev) < 0 ||
	    !(d = opendir(path)))
		return 0;
	while ((de = readdir(d)))
		n += de->d_name[0] >= '1' && de->d_name[0] <= '9';
	closedir(d);
	return n;
}

/*
 * Does RDMA device dev serve netdev ifname (with MAC mac), and on which port?
 * Through the GID table's netdevs (RoCE), a shared parent device (an mlx5 PF or
 * VF, whose netdev and RDMA device hang off one PCI function), or a node GUID
 * that is the EUI-64 of the MAC (erdma and rxe derive theirs from the netdev).
 */
static uint32_t sysfs_serves(const char *root, const char *dev, const char *ifname,
			     const uint8_t *mac)
{
	char guid[32], dev_port[16];
	unsigned int n;
	uint32_t port = gid_port(root, dev, ifname);
	bool match = false;

	if (port)
		return port;
	/* Whole paths: the same PCI function, not just the same basename. */
	if (!representor(root, ifname)) {
		char p[PATH_MAX], q[PATH_MAX], a[PATH_MAX], b[PATH_MAX];

		match = pathf(p, "%s/class/infiniband/%s/device", root, dev) == 0 &&
			pathf(q, "%s/class/net/%s/device", root, ifname) == 0 && same_base(p, q) &&
			realpath(p, a) && realpath(q, b) && !strcmp(a, b);
	}
	if (!match && mac &&
	    hpn_sysfs_read(guid, sizeof(guid), "%s/class/infiniband/%s/node_guid", root, dev) ==
		    0) {
		char want[20];

		mac_guid(mac, want);
		match = !strcasecmp(guid, want);
	}
	if (!match)
		return 0;
	n = port_count(root, dev);
	if (n <= 1)
		return 1;
	/* A multi-port function: netdev dev_port 0 is RDMA port 1, and so on. */
	if (hpn_sysfs_read(dev_port, sizeof(dev_port), "%s/class/net/%s/dev_port", root, ifname) ==
		    0 &&
	    strtoul(dev_port, NULL, 0) + 1 <= n)
		return (uint32_t)strtoul(dev_port, NULL, 0) + 1;
	return 0;
}

static int sysfs_of_netdev(const char *root, const char *ifname, const uint8_t *mac,
			   struct hpn_rdma_dev *ret)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int r = -ENODEV;

	if (hpn_snprintf(path, sizeof(path), "%s/class/infiniband", root) < 0 ||
	    !(d = opendir(path)))
		return -ENODEV;
	while (r < 0 && (de = readdir(d))) {
		uint32_t port;

		if (de->d_name[0] == '.' || strlen(de->d_name) >= HPN_IBDEV_MAX)
			continue;
		port = sysfs_serves(root, de->d_name, ifname, mac);
		if (!port)
			continue;
		memset(ret, 0, sizeof(*ret));
		memcpy(ret->name, de->d_name, strlen(de->d_name) + 1);
		snprintf(ret->netdev, sizeof(ret->netdev), "%s", ifname);
		ret->port = port;
		r = 0;
	}
	closedir(d);
	return r;
}

/* ---- discovery --------------------------------------------------------------- */

/* Kinds of link whose RDMA device is their lower device's. */
static bool stacked(const struct hpn_link *l)
{
	static const char *const kinds[] = { "macvlan", "macvtap", "ipvlan", "ipvtap", "vlan" };

	for (size_t i = 0; i < HPN_ARRAY_SIZE(kinds); i++)
		if (!strcmp(l->kind, kinds[i]))
			return l->lower_ifindex > 0;
	return false;
}

static int of_netdev_once(const char *root, const struct hpn_link *l, struct hpn_rdma_dev *ret,
			  struct hpn_err *err)
{
	struct hpn_rdma_ports *d;
	int r;

	if (hpn_sysfs_fake(root))
		return sysfs_of_netdev(root, l->name, l->has_mac ? l->mac : NULL, ret);
	d = malloc(sizeof(*d)); /* hpn_rdma_port_dump empties it (rdma.h) */
	if (!d)
		return -ENOMEM;
	r = hpn_rdma_port_dump(d, err);
	if (r == -EPROTONOSUPPORT) {
		/* No RDMA netlink: the kernel has no RDMA subsystem; sysfs says the same. */
		free(d);
		return sysfs_of_netdev(root, l->name, l->has_mac ? l->mac : NULL, ret);
	}
	for (size_t i = 0; r == 0 && i < d->n; i++) {
		const struct hpn_rdma_port *row = &d->rows[i];

		if (row->ndev_index != (uint32_t)l->ifindex)
			continue;
		memset(ret, 0, sizeof(*ret));
		memcpy(ret->name, row->name, sizeof(ret->name));
		ret->index = row->index;
		ret->port = row->port;
		snprintf(ret->netdev, sizeof(ret->netdev), "%s", l->name);
		free(d);
		return 0;
	}
	free(d);
	return r < 0 ? r : -ENODEV;
}

int hpn_rdma_of_netdev(const char *root, struct nl_sock *rt, const struct hpn_link *l,
		       struct hpn_rdma_dev *ret, struct hpn_err *err)
{
	struct hpn_link cur = *l, lower;
	int r;

	/* A macvlan's RDMA device is its parent's; the GID entries name the macvlan. */
	for (int depth = 0; depth < 4; depth++) {
		r = of_netdev_once(root, &cur, ret, err);
		if (r != -ENODEV || !stacked(&cur))
			break;
		r = hpn_link_get(rt, cur.lower_ifindex, NULL, &lower, err);
		if (r < 0)
			return r == -ENODEV ? -ENODEV : r;
		cur = lower;
	}
	if (r == 0)
		hpn_rdma_classify(root, ret);
	return r;
}

int hpn_rdma_netdev_of(const char *root, struct nl_sock *rt, const char *name, unsigned int port,
		       char ifname[HPN_IFNAMSIZ], struct hpn_rdma_dev *out, struct hpn_err *err)
{
	struct hpn_rdma_ports *d = malloc(sizeof(*d)); /* hpn_rdma_port_dump empties it (rdma.h) */
	struct hpn_rdma_dev dev, *ret = &dev;
	size_t found = 0, ports = 0;
	struct dirent *de;
	char path[PATH_MAX];
	DIR *dir;
	int r = -EPROTONOSUPPORT;

	if (!d)
		return -ENOMEM;
	if (!hpn_sysfs_fake(root))
		r = hpn_rdma_port_dump(d, err);
	if (r == 0) {
		for (size_t i = 0; i < d->n; i++) {
			const struct hpn_rdma_port *row = &d->rows[i];

			if (strcmp(row->name, name))
				continue;
			ports++;
			if ((port && row->port != port) || !row->ndev[0])
				continue;
			if (!found++) {
				memset(ret, 0, sizeof(*ret));
				memcpy(ret->name, row->name, sizeof(ret->name));
				ret->index = row->index;
				ret->port = row->port;
				memcpy(ret->netdev, row->ndev, sizeof(ret->netdev));
			}
		}
	} else if (r == -EPROTONOSUPPORT &&
		   hpn_snprintf(path, sizeof(path), "%s/class/net", root) == 0 &&
		   (dir = opendir(path))) {
		/* Sysfs: ask every netdev which device serves it. */
		r = 0;
		ports = pathf(path, "%s/class/infiniband/%s", root, name) == 0 && exists(path);
		while ((de = readdir(dir))) {
			char addr[32];
			uint8_t mac[HPN_MAC_LEN];
			bool has_mac;
			uint32_t p;

			if (de->d_name[0] == '.' || !hpn_valid_ifname(de->d_name))
				continue;
			has_mac = hpn_sysfs_read(addr, sizeof(addr), "%s/class/net/%s/address",
						 root, de->d_name) == 0 &&
				  hpn_mac_parse(addr, mac) == 0;
			p = sysfs_serves(root, name, de->d_name, has_mac ? mac : NULL);
			if (!p || (port && p != port))
				continue;
			if (!found++) {
				memset(ret, 0, sizeof(*ret));
				snprintf(ret->name, sizeof(ret->name), "%s", name);
				hpn_snprintf(ret->netdev, sizeof(ret->netdev), "%s", de->d_name);
				ret->port = p;
			}
		}
		closedir(dir);
	}
	free(d);
	if (r < 0 && r != -EPROTONOSUPPORT)
		return r;
	if (!ports)
		return hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
				   "RDMA device \"%s\" not found in the host netns", name);
	if (!found)
		return port ? hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
					  "RDMA device \"%s\" has no netdev on port %u", name, port)
			    : hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
					  "RDMA device \"%s\" has no netdev in the host netns",
					  name);
	if (found > 1)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "RDMA device \"%s\" serves %zu netdevs: give the port as "
				   "\"%s:<port>\"",
				   name, found, name);
	memcpy(ifname, ret->netdev, HPN_IFNAMSIZ);
	hpn_rdma_classify(root, ret);
	*out = dev;
	return 0;
}

int hpn_rdma_node_netns_mode(const char *sysfs_root, enum hpn_rdma_netns *mode, struct hpn_err *err)
{
	char v[16];
	int r;

	if (!hpn_sysfs_fake(sysfs_root))
		return hpn_rdma_netns_mode(mode, err);
	if (!hpn_sysfs_exists("%s/module/ib_core", sysfs_root))
		return -EPROTONOSUPPORT;
	r = hpn_sysfs_read(v, sizeof(v), "%s/module/ib_core/parameters/netns_mode", sysfs_root);
	/* A kernel before netns modes (5.2) shares every device. */
	*mode = r == 0 && (v[0] == 'N' || v[0] == '0') ? HPN_RDMA_NETNS_EXCLUSIVE
						       : HPN_RDMA_NETNS_SHARED;
	return 0;
}

/* "231:192": the numbers of a character device, as its sysfs "dev" file says; else 0:0. */
static void dev_numbers(const char *v, struct hpn_rdma_cdev *cd)
{
	char *end;
	unsigned long ma = strtoul(v, &end, 10), mi;

	if (end == v || *end != ':' || ma > 4095)
		return;
	v = end + 1;
	mi = strtoul(v, &end, 10);
	if (end == v || *end || mi > 1048575)
		return;
	cd->major = (unsigned int)ma;
	cd->minor = (unsigned int)mi;
}

static int cdev_cmp(const void *a, const void *b)
{
	return strcmp(((const struct hpn_rdma_cdev *)a)->name,
		      ((const struct hpn_rdma_cdev *)b)->name);
}

void hpn_rdma_cdevs(const char *sysfs_root, const char *ibdev, struct hpn_rdma_cdevs *out)
{
	static const char *const classes[] = { "infiniband_verbs", "infiniband_mad" };

	memset(out, 0, sizeof(*out));
	for (size_t c = 0; c < HPN_ARRAY_SIZE(classes); c++) {
		char path[4096];
		struct dirent *de;
		DIR *d;

		if (hpn_snprintf(path, sizeof(path), "%s/class/%s", sysfs_root, classes[c]) < 0 ||
		    !(d = opendir(path)))
			continue;
		while ((de = readdir(d)) && out->n < HPN_RDMA_CDEVS_MAX) {
			struct hpn_rdma_cdev *cd = &out->v[out->n];
			char v[HPN_IBDEV_MAX];

			/* uverbsN, umadN, issmN: nothing else may become a /dev path. */
			if ((strncmp(de->d_name, "uverbs", 6) && strncmp(de->d_name, "umad", 4) &&
			     strncmp(de->d_name, "issm", 4)) ||
			    strlen(de->d_name) >= sizeof(cd->name) ||
			    !hpn_valid_path_component(de->d_name) ||
			    hpn_sysfs_read(v, sizeof(v), "%s/%s/ibdev", path, de->d_name) < 0 ||
			    strcmp(v, ibdev))
				continue;
			memcpy(cd->name, de->d_name, strlen(de->d_name) + 1);
			if (hpn_sysfs_read(v, sizeof(v), "%s/%s/dev", path, de->d_name) == 0)
				dev_numbers(v, cd);
			out->n++;
		}
		closedir(d);
	}
	/* Sorted, so that every caller sees them in the same order. */
	qsort(out->v, out->n, sizeof(out->v[0]), cdev_cmp);
	out->rdma_cm = hpn_sysfs_exists("%s/class/misc/rdma_cm", sysfs_root);
	snprintf(out->cm.name, sizeof(out->cm.name), "rdma_cm");
	if (out->rdma_cm) {
		char v[32];

		if (hpn_sysfs_read(v, sizeof(v), "%s/class/misc/rdma_cm/dev", sysfs_root) == 0)
			dev_numbers(v, &out->cm);
	}
}
