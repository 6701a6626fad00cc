// SPDX-License-Identifier: Apache-2.0
#include "sysfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int list_net_dir(const char *dir, char (*names)[16], size_t max, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !hpn_valid_ifname(de->d_name))
			continue;
		if (*n < max)
			memcpy(names[*n], de->d_name, strlen(de->d_name) + 1);
		(*n)++;
	}
	closedir(d);
	return 0;
}

int hpn_sysfs_pci_netdevs(const char *root, const char *pci, char (*names)[16], size_t max,
			  size_t *ret_n)
{
	char path[PATH_MAX], sub[PATH_MAX];
	struct dirent *de;
	size_t n = 0;
	DIR *d;
	int r;

	r = hpn_snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", root, pci);
	if (r < 0)
		return r;
	d = opendir(path);
	if (!d)
		return -errno;
	/* A PCI NIC has net/<name>; virtio-net hangs it off its virtio<N> child device. */
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, "net"))
			r = hpn_snprintf(sub, sizeof(sub), "%s/net", path);
		else if (!strncmp(de->d_name, "virtio", 6))
			r = hpn_snprintf(sub, sizeof(sub), "%s/%s/net", path, de->d_name);
		else
			continue;
		if (r == 0)
			list_net_dir(sub, names, max, &n);
	}
	closedir(d);
	*ret_n = n;
	return 0;
}

int hpn_sysfs_netdev_pci(const char *root, const char *ifname, char out[HPN_PCI_STR])
{
	char path[PATH_MAX], real[PATH_MAX], pci[HPN_PCI_STR];
	char *base;
	ssize_t n;
	int r;

	r = hpn_snprintf(path, sizeof(path), "%s/class/net/%s/device", root, ifname);
	if (r < 0)
		return r;
	/*
	 * .../0000:af:00.1 for a PCI NIC, .../0000:00:04.0/virtio1 for virtio-net,
	 * whose PCI function is the virtio device's parent. Anything else (an mlx5
	 * sub-function, USB, platform devices) has no PCI function of its own.
	 * The link's own text names the device: one readlink, where realpath
	 * would readlink every component (a NIC without a device, a veth, is
	 * told by the first). Only virtio's parent needs the whole path.
	 */
	n = readlink(path, real, sizeof(real) - 1);
	if (n < 0)
		return -errno;
	real[n] = '\0';
	base = strrchr(real, '/');
	if (!strncmp(base ? base + 1 : real, "virtio", 6)) {
		if (!realpath(path, real))
			return -errno;
		base = strrchr(real, '/');
		*base = '\0';
		base = strrchr(real, '/');
	}
	if (!base || strlen(base + 1) != 12 || hpn_pci_normalise(base + 1, pci) < 0)
		return -ENOENT;
	memcpy(out, pci, HPN_PCI_STR);
	return 0;
}

int hpn_sysfs_read(char *out, size_t len, const char *fmt, ...)
{
	char path[PATH_MAX];
	_cleanup_close_ int fd = -1;
	va_list ap;
	ssize_t n;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	if (r < 0 || (size_t)r >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, out, len - 1);
	if (n < 0)
		return -errno;
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

bool hpn_sysfs_fake(const char *root)
{
	return strcmp(root, HPN_SYSFS_ROOT) != 0;
}

bool hpn_sysfs_exists(const char *fmt, ...)
{
	char path[PATH_MAX];
	struct stat st;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return n >= 0 && (size_t)n < sizeof(path) && stat(path, &st) == 0;
}
