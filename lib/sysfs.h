/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_SYSFS_H
#define HPN_SYSFS_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/*
 * PCI <-> netdev through sysfs, under a root that tests point at a fake tree.
 * Sysfs shows the netdevs of the netns that mounted it: call these in the host netns.
 */

#define HPN_SYSFS_ROOT "/sys"

/* A root other than the real one: a test's fake tree, where only the tree tells facts. */
bool hpn_sysfs_fake(const char *root);
/* Whether the formatted path exists (stat). */
bool hpn_sysfs_exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Netdev names of PCI function pci: <root>/bus/pci/devices/<pci>/net/ and, for
 * virtio-net, <pci>/virtio<N>/net/. *ret_n is how many there are, which may exceed
 * max (only max are stored). -ENOENT when the PCI device does not exist. */
int hpn_sysfs_pci_netdevs(const char *root, const char *pci, char (*names)[16], size_t max,
			  size_t *ret_n);
/* PCI address behind netdev ifname (<root>/class/net/<ifname>/device), or -ENOENT. */
int hpn_sysfs_netdev_pci(const char *root, const char *ifname, char out[HPN_PCI_STR]);

/* The first line of a small file (a sysfs attribute) at the formatted path, without
 * the newline, into out (len bytes); -errno. */
int hpn_sysfs_read(char *out, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
