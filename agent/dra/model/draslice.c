// SPDX-License-Identifier: Apache-2.0
#include "draslice.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "drashare.h"
#include "rdma.h"
#include "sysfs.h"
#include "util.h"

/* Kubernetes' names: a DNS label is 1-63 of [a-z0-9-], alphanumeric at both ends. */
static bool dns_label(const char *s, size_t len)
{
	if (!len || len > 63 || !isalnum((unsigned char)s[0]) ||
	    !isalnum((unsigned char)s[len - 1]))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
			return false;
	return true;
}

/*
 * A DNS subdomain as the API server checks an object's name (IsDNS1123Subdomain):
 * at most max characters, labels of [a-z0-9-] joined by '.', each alphanumeric
 * at both ends (their length is not held to 63 there, nor here).
 */
static bool dns_subdomain(const char *s, size_t len, size_t max)
{
	size_t start = 0;

	if (!len || len > max)
		return false;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '.')
			continue;
		if (i == start || !isalnum((unsigned char)s[start]) ||
		    !isalnum((unsigned char)s[i - 1]))
			return false;
		for (size_t k = start; k < i; k++)
			if (!(islower((unsigned char)s[k]) || isdigit((unsigned char)s[k]) ||
			      s[k] == '-'))
				return false;
		start = i + 1;
	}
	return true;
}

/* A pool name: at most 253 characters, DNS subdomains joined by '/'. */
static bool pool_name(const char *s)
{
	size_t len = strlen(s), start = 0;

	if (!len || len > 253)
		return false;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '/')
			continue;
		if (!dns_subdomain(s + start, i - start, 253))
			return false;
		start = i + 1;
	}
	return true;
}

bool hpn_dra_label_value(const char *v)
{
	size_t len = strlen(v);

	if (!len)
		return true;
	if (len > 63 || !isalnum((unsigned char)v[0]) || !isalnum((unsigned char)v[len - 1]))
		return false;
	return strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") ==
	       len;
}

bool hpn_dra_taint_effect_valid(const char *effect)
{
	return effect && (!strcmp(effect, "NoSchedule") || !strcmp(effect, "NoExecute") ||
			  !strcmp(effect, "None"));
}

/* The basename of the symlink <dir>/driver's text: the kernel driver bound to dir. */
static void bound_driver(const char *dir, char *out, size_t len)
{
	char path[PATH_MAX], link[PATH_MAX];
	const char *base;
	ssize_t n;

	out[0] = '\0';
	if (hpn_snprintf(path, sizeof(path), "%s/driver", dir) < 0)
		return;
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return;
	link[n] = '\0';
	base = strrchr(link, '/');
	hpn_msgf(out, len, "%s", base ? base + 1 : link);
}

/* netdev type (ARPHRD_*) as a link layer: 1 Ethernet, 32 InfiniBand. */
static void netdev_link_layer(const char *root, const char *ifname, char *out, size_t len)
{
	char v[16];

	if (hpn_sysfs_read(v, sizeof(v), "%s/class/net/%s/type", root, ifname) < 0)
		return;
	if (!strcmp(v, "1"))
		snprintf(out, len, "Ethernet");
	else if (!strcmp(v, "32"))
		snprintf(out, len, "InfiniBand");
}

/* The RDMA device serving the NIC, its link layer and transport. */
static int read_rdma(const char *root, struct hpn_dra_nic *nic, struct hpn_err *err)
{
	struct hpn_link l = { 0 };
	struct hpn_rdma_dev rd;
	char v[32];
	int r;

	snprintf(l.name, sizeof(l.name), "%s", nic->ifname);
	if (hpn_sysfs_read(v, sizeof(v), "%s/class/net/%s/ifindex", root, nic->ifname) == 0)
		l.ifindex = (int)strtol(v, NULL, 10);
	if (hpn_sysfs_read(v, sizeof(v), "%s/class/net/%s/address", root, nic->ifname) == 0 &&
	    hpn_mac_parse(v, l.mac) == 0)
		l.has_mac = true;
	/* No kind: a NIC of the pool is never a stacked link, so no rtnetlink socket is needed. */
	r = hpn_rdma_of_netdev(root, NULL, &l, &rd, err);
	if (r == -ENODEV) {
		/* None: the netdev's type says the link layer; rxe could serve an Ethernet one. */
		netdev_link_layer(root, nic->ifname, nic->link_layer, sizeof(nic->link_layer));
		nic->softroce_capable = !strcmp(nic->link_layer, "Ethernet");
		return 0;
	}
	if (r < 0)
		return r;
	snprintf(nic->rdma, sizeof(nic->rdma), "%s", rd.name);
	snprintf(nic->rdma_pci, sizeof(nic->rdma_pci), "%s", rd.pci);
	nic->port = rd.port ? rd.port : 1;
	hpn_sysfs_read(nic->link_layer, sizeof(nic->link_layer),
		       "%s/class/infiniband/%s/ports/%u/link_layer", root, rd.name, nic->port);
	if (!nic->link_layer[0])
		netdev_link_layer(root, nic->ifname, nic->link_layer, sizeof(nic->link_layer));
	/* node_type "4: RNIC" is iWARP (erdma, siw); a channel adapter speaks its link layer. */
	if (hpn_sysfs_read(v, sizeof(v), "%s/class/infiniband/%s/node_type", root, rd.name) == 0 &&
	    v[0] == '4')
		snprintf(nic->transport, sizeof(nic->transport), "iwarp");
	else if (!strcmp(nic->link_layer, "InfiniBand"))
		snprintf(nic->transport, sizeof(nic->transport), "ib");
	else if (!strcmp(nic->link_layer, "Ethernet"))
		snprintf(nic->transport, sizeof(nic->transport), "roce");
	/* An rxe device already over it: Soft-RoCE serves it today. */
	nic->softroce_capable = rd.soft && !strcmp(nic->link_layer, "Ethernet");
	return 0;
}

int hpn_dra_nic_read(const char *sysfs_root, const char *ifname, unsigned int rail,
		     struct hpn_dra_nic *ret, struct hpn_err *err)
{
	struct hpn_dra_nic nic = { .pos = { .numa = -1 }, .rail = rail };
	char v[32], dev[PATH_MAX];
	int r;

	if (!hpn_valid_ifname(ifname))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "\"%.*s\" is not a netdev name", HPN_IFNAMSIZ, ifname);
	if (!hpn_sysfs_exists("%s/class/net/%s", sysfs_root, ifname))
		return hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
				   "netdev \"%s\" not found in %s/class/net", ifname, sysfs_root);
	snprintf(nic.ifname, sizeof(nic.ifname), "%s", ifname);
	if (hpn_sysfs_netdev_pci(sysfs_root, ifname, nic.pci) < 0)
		nic.pci[0] = '\0';
	if (hpn_sysfs_read(v, sizeof(v), "%s/class/net/%s/dev_port", sysfs_root, ifname) == 0)
		nic.dev_port = (unsigned int)strtoul(v, NULL, 0);
	/* "-1" or EINVAL while the link is down: unknown. */
	if (hpn_sysfs_read(v, sizeof(v), "%s/class/net/%s/speed", sysfs_root, ifname) == 0) {
		char *e;
		long s = strtol(v, &e, 10);

		if (!*e && s > 0)
			nic.speed_mbps = (unsigned long)s;
	}
	/* The device's driver: the PCI function's, or a virtio NIC's virtio_net. */
	if (hpn_snprintf(dev, sizeof(dev), "%s/class/net/%s/device", sysfs_root, ifname) == 0)
		bound_driver(dev, nic.driver, sizeof(nic.driver));
	r = read_rdma(sysfs_root, &nic, err);
	if (r < 0) {
		hpn_err_prefix(err, "NIC \"%s\"", ifname);
		return r;
	}
	/* Placed as NCCL and dranet place it: by the RDMA device's function (eRDMA's own). */
	if (nic.rdma_pci[0] || nic.pci[0])
		hpn_pci_pos_of_nic(sysfs_root, ifname, nic.rdma_pci, &nic.pos);
	*ret = nic;
	return 0;
}

int hpn_dra_device_name(const struct hpn_dra_nic *nic, char out[HPN_DRA_NAME_MAX])
{
	char name[HPN_DRA_NAME_MAX];
	size_t n;

	if (nic->pci[0]) {
		n = (size_t)snprintf(name, sizeof(name), "pci-");
		for (const char *c = nic->pci; *c && n < sizeof(name) - 1; c++)
			name[n++] = *c == ':' || *c == '.' ? '-' : (char)tolower((unsigned char)*c);
		name[n] = '\0';
		if (nic->dev_port &&
		    hpn_snprintf(name + n, sizeof(name) - n, "-p%u", nic->dev_port) < 0)
			return -EINVAL;
	} else if (nic->ifname[0]) {
		/* The hash of the name as it is keeps names apart that the charset folds. */
		n = (size_t)snprintf(name, sizeof(name), "net-");
		for (const char *c = nic->ifname; *c && n < sizeof(name) - 1; c++)
			name[n++] =
				isalnum((unsigned char)*c) ? (char)tolower((unsigned char)*c) : '-';
		if (hpn_snprintf(name + n, sizeof(name) - n, "-%08x",
				 (unsigned int)(hpn_hash64(nic->ifname) & 0xffffffffu)) < 0)
			return -EINVAL;
	} else {
		return -EINVAL;
	}
	if (!dns_label(name, strlen(name)))
		return -EINVAL;
	memcpy(out, name, sizeof(name));
	return 0;
}

int hpn_dra_share_name(const char *nic_device, char out[HPN_DRA_NAME_MAX])
{
	return hpn_snprintf(out, HPN_DRA_NAME_MAX, "%s" HPN_DRA_SHARE_SUFFIX, nic_device) < 0
		       ? -EINVAL
		       : 0;
}

bool hpn_dra_share_of(const char *device, char nic_device[HPN_DRA_NAME_MAX])
{
	size_t n = strlen(device), k = strlen(HPN_DRA_SHARE_SUFFIX);

	if (n <= k || n - k >= HPN_DRA_NAME_MAX || strcmp(device + n - k, HPN_DRA_SHARE_SUFFIX))
		return false;
	memcpy(nic_device, device, n - k);
	nic_device[n - k] = '\0';
	return true;
}

unsigned int hpn_dra_nic_shares(const char *sysfs_root, const struct hpn_dra_nic *nic)
{
	/* RoCE on a device of its own: an rxe one is softroce_capable, eRDMA's is iWARP. */
	if (!nic->rdma[0] || strcmp(nic->transport, "roce") || nic->softroce_capable ||
	    strcmp(nic->link_layer, "Ethernet"))
		return 0;
	return hpn_dra_gid_shares(sysfs_root, nic->rdma, nic->port ? nic->port : 1, nic->ifname);
}

/*
 * The pool's device slices, NICs in order (a NIC with shares is two
 * devices), each as full as the API allows (128, 64 once a device of it has
 * a taint or consumes counters): their count, and slice want's NICs
 * [*first, *last) when it is one of them.
 */
static size_t layout(const struct hpn_dra_nic *nics, size_t n, size_t want, size_t *first,
		     size_t *last)
{
	size_t count = 0, start = 0, devs = 0;
	bool advanced = false;

	for (size_t i = 0; i < n; i++) {
		bool a = nics[i].taint.effect[0] != '\0' || nics[i].shares;
		size_t d = nics[i].shares ? 2 : 1;
		size_t cap = advanced || a ? HPN_DRA_MAX_DEVICES_TAINTED : HPN_DRA_MAX_DEVICES;

		if (devs + d > cap) {
			if (count == want) {
				*first = start;
				*last = i;
			}
			count++;
			start = i;
			devs = 0;
			advanced = false;
		}
		devs += d;
		advanced = advanced || a;
	}
	if (count == want) {
		*first = start;
		*last = n;
	}
	return count + 1;
}

/* The slices of counter sets after the device slices: one set a shared NIC, 8 a slice. */
static size_t counter_slices(const struct hpn_dra_nic *nics, size_t n)
{
	size_t shared = 0;

	for (size_t i = 0; i < n; i++)
		shared += nics[i].shares != 0;
	return (shared + HPN_DRA_MAX_COUNTER_SETS - 1) / HPN_DRA_MAX_COUNTER_SETS;
}

size_t hpn_dra_slice_split(const struct hpn_dra_nic *nics, size_t n)
{
	size_t first, last;

	return layout(nics, n, SIZE_MAX, &first, &last) + counter_slices(nics, n);
}

/*
 * The slice's name: "<node>-<driver>-<index>"; one longer than 253 is cut
 * to fit '-' and 16 hex digits of a hash of the whole, which keeps two long
 * node names that share a prefix apart.
 */
static void slice_name(const char *node, const char *driver, size_t idx, char out[254])
{
	char full[600];
	size_t len;

	snprintf(full, sizeof(full), "%s-%s-%zu", node, driver, idx);
	len = strlen(full);
	if (len <= 253) {
		memcpy(out, full, len + 1);
		return;
	}
	len = 253 - 17;
	while (len && (full[len - 1] == '-' || full[len - 1] == '.'))
		len--;
	snprintf(out, 254, "%.*s-%016llx", (int)len, full, (unsigned long long)hpn_hash64(full));
}

/* attrs[key] = {type: v}, as DeviceAttribute's one-of; v is freed on failure. */
static int add_attr(cJSON *attrs, const char *key, const char *type, cJSON *v, struct hpn_err *err)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || !v || !cJSON_AddItemToObject(o, type, v)) {
		cJSON_Delete(o);
		cJSON_Delete(v);
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	}
	if (!cJSON_AddItemToObject(attrs, key, o)) {
		cJSON_Delete(o);
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

static int add_str(cJSON *attrs, const char *key, const char *v, const struct hpn_dra_nic *nic,
		   struct hpn_err *err)
{
	if (!v[0])
		return 0;
	if (strlen(v) > HPN_DRA_MAX_VALUE)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "NIC \"%s\": attribute %s \"%.70s...\" is longer than the "
				   "%d characters resource.k8s.io allows",
				   nic->ifname, key, v, HPN_DRA_MAX_VALUE);
	return add_attr(attrs, key, "string", cJSON_CreateString(v), err);
}

/* "2026-12-04T13:07:59Z": a metav1.Time as the API writes one (RFC 3339, UTC, seconds). */
static int rfc3339(long long t, char out[32])
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (t <= 0 || !gmtime_r(&tt, &tm) || tm.tm_year + 1900 > 9999 ||
	    !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
		return -EINVAL;
	return 0;
}

/*
 * devices[].taints: the NIC's one taint, "<driver>/unhealthy" (a label
 * name: the driver is a DNS subdomain of at most 63), its value, effect and
 * timeAdded, each as the API checks it.
 */
static int add_taint(cJSON *dev, const char *driver, const struct hpn_dra_nic *nic,
		     struct hpn_err *err)
{
	const struct hpn_dra_taint *t = &nic->taint;
	char key[128], when[32];
	cJSON *taints, *o;

	if (!hpn_dra_taint_effect_valid(t->effect))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "NIC \"%s\": taint effect \"%.12s\" is none of NoSchedule, "
				   "NoExecute, None",
				   nic->ifname, t->effect);
	if (!hpn_dra_label_value(t->value))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "NIC \"%s\": taint value \"%.64s\" is not a label value",
				   nic->ifname, t->value);
	if (rfc3339(t->since, when) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "NIC \"%s\": taint time %lld is no date of years 1970-9999",
				   nic->ifname, t->since);
	snprintf(key, sizeof(key), "%s/%s", driver, HPN_DRA_TAINT_NAME);
	if (!(taints = cJSON_AddArrayToObject(dev, "taints")) || !(o = cJSON_CreateObject()) ||
	    !cJSON_AddItemToArray(taints, o) || !cJSON_AddStringToObject(o, "key", key) ||
	    (t->value[0] && !cJSON_AddStringToObject(o, "value", t->value)) ||
	    !cJSON_AddStringToObject(o, "effect", t->effect) ||
	    !cJSON_AddStringToObject(o, "timeAdded", when))
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	return 0;
}

/*
 * The device name of nic into devs: the NIC itself, or (shared) its shared
 * device; consuming counter_set when not NULL.
 */
static int device(cJSON *devs, const char *driver, const struct hpn_dra_nic *nic, const char *name,
		  const char *counter_set, bool shared, struct hpn_err *err)
{
	cJSON *dev = cJSON_CreateObject(), *attrs;
	int r = 0;

	if (!dev || !cJSON_AddItemToArray(devs, dev))
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	if (!cJSON_AddStringToObject(dev, "name", name) ||
	    !(attrs = cJSON_AddObjectToObject(dev, "attributes")))
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	/* The standard ones, fully qualified: comparable across drivers (GPUs publish them too). */
	if (nic->pos.path[0]) {
		/* One more than the limit: a longer root is cut there and refused by add_str. */
		char root[HPN_DRA_MAX_VALUE + 2];

		snprintf(root, sizeof(root), "%.*s", (int)strcspn(nic->pos.path, "/"),
			 nic->pos.path);
		r = add_str(attrs, "resource.kubernetes.io/pcieRoot", root, nic, err);
	}
	if (r == 0)
		r = add_str(attrs, "resource.kubernetes.io/pciBusID",
			    nic->rdma_pci[0] ? nic->rdma_pci : nic->pci, nic, err);
	if (r == 0 && nic->pos.numa >= 0)
		r = add_attr(attrs, "resource.kubernetes.io/numaNode", "int",
			     cJSON_CreateNumber(nic->pos.numa), err);
	/* The driver's own, unqualified: the API puts them in the driver's domain. */
	if (r == 0)
		r = add_str(attrs, "interface", nic->ifname, nic, err);
	if (r == 0)
		r = add_str(attrs, "rdmaDevice", nic->rdma, nic, err);
	if (r == 0)
		r = add_str(attrs, "linkLayer", nic->link_layer, nic, err);
	if (r == 0)
		r = add_str(attrs, "transport", nic->transport, nic, err);
	if (r == 0 && nic->speed_mbps)
		r = add_attr(attrs, "speedMbps", "int", cJSON_CreateNumber((double)nic->speed_mbps),
			     err);
	if (r == 0)
		r = add_str(attrs, "kernelDriver", nic->driver, nic, err);
	if (r == 0)
		r = add_attr(attrs, "softRoce", "bool", cJSON_CreateBool(nic->softroce_capable),
			     err);
	if (r == 0)
		r = add_attr(attrs, "rail", "int", cJSON_CreateNumber(nic->rail), err);
	if (r == 0 && shared)
		r = add_attr(attrs, HPN_DRA_SHARE_ATTR, "bool", cJSON_CreateBool(true), err);
	if (r == 0 && shared && hpn_dra_share_capacity(dev, nic->shares) < 0)
		r = hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	/* 13 at most today (12 attributes, 1 capacity); the guard is for the next one added. */
	if (r == 0 &&
	    cJSON_GetArraySize(attrs) +
			    cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(dev, "capacity")) >
		    HPN_DRA_MAX_ATTRS)
		r = hpn_err_set(err, HPN_E_INTERNAL, E2BIG,
				"NIC \"%s\": %d attributes, more than the %d resource.k8s.io "
				"allows",
				nic->ifname, cJSON_GetArraySize(attrs), HPN_DRA_MAX_ATTRS);
	if (r == 0 && counter_set && hpn_dra_share_consumes(dev, counter_set) < 0)
		r = hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	if (r == 0 && nic->taint.effect[0])
		r = add_taint(dev, driver, nic, err);
	return r;
}

struct cJSON *hpn_dra_nic_attrs(const struct hpn_dra_nic *nic, struct hpn_err *err)
{
	cJSON *devs = cJSON_CreateArray(), *attrs = NULL;

	if (!devs) {
		hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
		return NULL;
	}
	/* The driver names only a taint, which is not an attribute. */
	if (device(devs, HPN_DRA_DRIVER, nic, "x", NULL, false, err) == 0)
		attrs = cJSON_DetachItemFromObjectCaseSensitive(cJSON_GetArrayItem(devs, 0),
								"attributes");
	cJSON_Delete(devs);
	return attrs;
}

/* The names of every device of the pool, each a DNS label, none twice. */
static int device_names(const struct hpn_dra_nic *nics, size_t n, char (*names)[HPN_DRA_NAME_MAX],
			struct hpn_err *err)
{
	for (size_t i = 0; i < n; i++) {
		char share[HPN_DRA_NAME_MAX];

		/* No NIC's own name ends in the suffix, so a shared device's is unique too. */
		if (hpn_dra_device_name(&nics[i], names[i]) < 0 ||
		    (nics[i].shares && hpn_dra_share_name(names[i], share) < 0))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "NIC %zu (\"%s\", PCI \"%s\"): no device name of the "
					   "DNS label syntax",
					   i, nics[i].ifname, nics[i].pci);
		for (size_t k = 0; k < i; k++)
			if (!strcmp(names[k], names[i]))
				return hpn_err_set(err, HPN_E_INVALID_CONFIG, EEXIST,
						   "NICs \"%s\" and \"%s\" have one device name "
						   "\"%s\": a pool's device names are unique",
						   nics[k].ifname, nics[i].ifname, names[i]);
	}
	return 0;
}

/* Counter slice k's sets into sets: the shared NICs' 8k-th to 8k+7-th, each named by its device. */
static int shared_counters(cJSON *sets, const struct hpn_dra_nic *nics, size_t n,
			   const char (*names)[HPN_DRA_NAME_MAX], size_t k, struct hpn_err *err)
{
	size_t seen = 0;

	for (size_t i = 0; i < n; i++) {
		if (!nics[i].shares)
			continue;
		if (seen / HPN_DRA_MAX_COUNTER_SETS == k &&
		    hpn_dra_share_counter_set(sets, names[i]) < 0)
			return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
		seen++;
	}
	return 0;
}

char *hpn_dra_slice_render(const char *driver, const char *node, const char *pool, long generation,
			   const struct hpn_dra_nic *nics, size_t n, size_t slice_index,
			   size_t slice_count, struct hpn_err *err)
{
	char(*names)[HPN_DRA_NAME_MAX] = NULL;
	cJSON *root = NULL, *spec, *p, *devs;
	char name[254];
	size_t first = 0, last = 0, dev_slices = layout(nics, n, slice_index, &first, &last);
	char *text = NULL;

	if (!driver || !dns_subdomain(driver, strlen(driver), 63)) {
		hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
			    "DRA driver name \"%s\" is not a DNS subdomain of at most 63 "
			    "characters",
			    driver ? driver : "");
		return NULL;
	}
	if (!node || !dns_subdomain(node, strlen(node), 253)) {
		hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
			    "node name \"%.253s\" is not a DNS subdomain", node ? node : "");
		return NULL;
	}
	if (!pool || !pool_name(pool)) {
		hpn_err_set(
			err, HPN_E_INVALID_CONFIG, EINVAL,
			"pool name \"%.253s\" is not DNS subdomains joined by '/' (253 at most)",
			pool ? pool : "");
		return NULL;
	}
	if (generation < 0 || slice_count != dev_slices + counter_slices(nics, n) ||
	    slice_index >= slice_count) {
		hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
			    "slice %zu of %zu (generation %ld) for %zu devices: the pool takes %zu "
			    "slices (of %d devices, %d with a taint)",
			    slice_index, slice_count, generation, n, hpn_dra_slice_split(nics, n),
			    HPN_DRA_MAX_DEVICES, HPN_DRA_MAX_DEVICES_TAINTED);
		return NULL;
	}
	names = calloc(n ? n : 1, sizeof(*names));
	if (!names) {
		hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
		return NULL;
	}
	if (device_names(nics, n, names, err) < 0)
		goto out;
	slice_name(node, driver, slice_index, name);
	root = cJSON_CreateObject();
	if (!root || !cJSON_AddStringToObject(root, "apiVersion", "resource.k8s.io/v1") ||
	    !cJSON_AddStringToObject(root, "kind", "ResourceSlice") ||
	    !(p = cJSON_AddObjectToObject(root, "metadata")) ||
	    !cJSON_AddStringToObject(p, "name", name) ||
	    !(spec = cJSON_AddObjectToObject(root, "spec")) ||
	    !cJSON_AddStringToObject(spec, "driver", driver) ||
	    !cJSON_AddStringToObject(spec, "nodeName", node) ||
	    !(p = cJSON_AddObjectToObject(spec, "pool")) ||
	    !cJSON_AddStringToObject(p, "name", pool) ||
	    !cJSON_AddNumberToObject(p, "generation", (double)generation) ||
	    !cJSON_AddNumberToObject(p, "resourceSliceCount", (double)slice_count) ||
	    !(devs = cJSON_AddArrayToObject(spec, slice_index < dev_slices ? "devices"
									   : "sharedCounters"))) {
		hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
		goto out;
	}
	if (slice_index >= dev_slices &&
	    shared_counters(devs, nics, n, names, slice_index - dev_slices, err) < 0)
		goto out;
	for (size_t i = first; slice_index < dev_slices && i < last; i++) {
		char share[HPN_DRA_NAME_MAX];
		const char *set = nics[i].shares ? names[i] : NULL;

		if (device(devs, driver, &nics[i], names[i], set, false, err) < 0 ||
		    (set && (hpn_dra_share_name(names[i], share) < 0 ||
			     device(devs, driver, &nics[i], share, set, true, err) < 0)))
			goto out;
	}
	text = hpn_json_print(TAKE_PTR(root));
	if (!text)
		hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
out:
	cJSON_Delete(root);
	free(names);
	return text;
}

/* ---- the publisher's round, from the API's list -------------------------------------- */

const char *hpn_dra_slice_meta(const cJSON *obj, const char *key)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, "metadata");

	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, key));
}

static long gen_of(const cJSON *obj)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(spec, "pool"), "generation");

	return cJSON_IsNumber(g) && g->valuedouble >= 0 &&
			       g->valuedouble <= (double)HPN_DRA_GENERATION_MAX
		       ? (long)g->valuedouble
		       : 0;
}

static void free_all(cJSON **v, size_t count)
{
	for (size_t i = 0; v && i < count; i++)
		cJSON_Delete(v[i]);
	free(v);
}

static const cJSON *at(const cJSON *obj, const char *a, const char *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);

	return b ? cJSON_GetObjectItemCaseSensitive(v, b) : v;
}

/* A timeAdded as the API writes one (RFC 3339, UTC, whole seconds), of a date that exists. */
static bool api_time(const char *s)
{
	struct tm tm = { 0 };
	const char *end;
	char again[32];

	if (!s || strlen(s) != 20)
		return false;
	end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
	/* Written back the same: no 30 February, no second 60, no sign or space in a field. */
	return end && !*end && rfc3339((long long)timegm(&tm), again) == 0 && !strcmp(again, s);
}

/* The listed device named name whose taints hold key with effect: that taint. */
static const cJSON *listed_taint(const cJSON *items, const char *name, const char *key,
				 const char *effect)
{
	const cJSON *it, *dev, *t;

	cJSON_ArrayForEach (it, items) {
		cJSON_ArrayForEach (dev, at(at(it, "spec", NULL), "devices", NULL)) {
			const char *dn = cJSON_GetStringValue(at(dev, "name", NULL));

			if (!dn || strcmp(dn, name))
				continue;
			cJSON_ArrayForEach (t, at(dev, "taints", NULL)) {
				const char *k = cJSON_GetStringValue(at(t, "key", NULL));
				const char *e = cJSON_GetStringValue(at(t, "effect", NULL));

				if (k && e && !strcmp(k, key) && !strcmp(e, effect) &&
				    api_time(cJSON_GetStringValue(at(t, "timeAdded", NULL))))
					return t;
			}
		}
	}
	return NULL;
}

/*
 * Our taints keep the timeAdded the API holds for them (the device's name,
 * our key, the same effect): when the agent first saw the NIC unhealthy is
 * what it wrote before a restart, not when it saw it again.
 */
static int keep_times(const cJSON *items, cJSON **v, size_t count, const char *driver,
		      struct hpn_err *err)
{
	char key[128];

	snprintf(key, sizeof(key), "%s/%s", driver, HPN_DRA_TAINT_NAME);
	for (size_t i = 0; i < count; i++) {
		cJSON *dev;

		cJSON_ArrayForEach (dev, at(at(v[i], "spec", NULL), "devices", NULL)) {
			cJSON *t = cJSON_GetArrayItem(at(dev, "taints", NULL), 0);
			const cJSON *was;

			if (!t)
				continue;
			was = listed_taint(items, cJSON_GetStringValue(at(dev, "name", NULL)), key,
					   cJSON_GetStringValue(at(t, "effect", NULL)));
			if (was && !cJSON_ReplaceItemInObjectCaseSensitive(
					   t, "timeAdded",
					   cJSON_CreateString(cJSON_GetStringValue(
						   at(was, "timeAdded", NULL)))))
				return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
		}
	}
	return 0;
}

/* The slices of the pool at generation gen, parsed, taints' times as listed; NULL with err set. */
static cJSON **render_all(const char *driver, const char *node, const struct hpn_dra_nic *nics,
			  size_t n, long gen, size_t count, const cJSON *items, struct hpn_err *err)
{
	cJSON **v = calloc(count, sizeof(void *)); /* cJSON pointers */

	if (!v) {
		hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < count; i++) {
		char *text = hpn_dra_slice_render(driver, node, node, gen, nics, n, i, count, err);

		v[i] = text ? cJSON_Parse(text) : NULL;
		free(text);
		if (!v[i] || !hpn_dra_slice_meta(v[i], "name")) {
			if (text)
				hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
					    "a ResourceSlice rendered is not JSON");
			free_all(v, i + 1);
			return NULL;
		}
	}
	if (keep_times(items, v, count, driver, err) < 0) {
		free_all(v, count);
		return NULL;
	}
	return v;
}

static const cJSON *item_named(const cJSON *items, const char *name)
{
	const cJSON *it;

	cJSON_ArrayForEach (it, items) {
		const char *got = hpn_dra_slice_meta(it, "name");

		if (got && !strcmp(got, name))
			return it;
	}
	return NULL;
}

/* Our slices as they should be, all there, no others: the pool at generation gen is published. */
static bool up_to_date(const cJSON *items, cJSON *const *v, size_t count)
{
	if ((size_t)cJSON_GetArraySize(items) != count)
		return false;
	for (size_t i = 0; i < count; i++) {
		const cJSON *it = item_named(items, hpn_dra_slice_meta(v[i], "name"));

		if (!it || !cJSON_Compare(at(it, "spec", NULL), at(v[i], "spec", NULL), true))
			return false;
	}
	return true;
}

/*
 * Two slices' devices, or counter sets: the same names in the same order
 * (one slice of devices and one of counter sets differ).
 */
static bool same_names(const cJSON *a, const cJSON *b)
{
	const char *what = at(at(b, "spec", NULL), "devices", NULL) ? "devices" : "sharedCounters";
	const cJSON *da = at(at(a, "spec", NULL), what, NULL);
	const cJSON *db = at(at(b, "spec", NULL), what, NULL);

	if (!cJSON_IsArray(da) || !cJSON_IsArray(db) ||
	    cJSON_GetArraySize(da) != cJSON_GetArraySize(db))
		return false;
	for (da = da->child, db = db->child; da && db; da = da->next, db = db->next) {
		const char *na = cJSON_GetStringValue(at(da, "name", NULL));
		const char *nb = cJSON_GetStringValue(at(db, "name", NULL));

		if (!na || !nb || strcmp(na, nb))
			return false;
	}
	return true;
}

/*
 * The API holds exactly our slices, each at generation gen of a pool of
 * count slices, each with our devices: what changed (a taint, an attribute)
 * can be written over them in place, one slice at a time.
 */
static bool same_devices(const cJSON *items, cJSON *const *v, size_t count, long gen)
{
	if ((size_t)cJSON_GetArraySize(items) != count)
		return false;
	for (size_t i = 0; i < count; i++) {
		const cJSON *it = item_named(items, hpn_dra_slice_meta(v[i], "name"));
		const cJSON *c = at(at(it, "spec", NULL), "pool", NULL);

		c = at(c, "resourceSliceCount", NULL);
		if (!it || gen_of(it) != gen || !cJSON_IsNumber(c) ||
		    c->valuedouble != (double)count || !same_names(it, v[i]))
			return false;
	}
	return true;
}

/* What to write: each slice's resourceVersion listed, the listed slices not ours. */
static int plan_writes(const cJSON *items, struct hpn_dra_slices_plan *p, struct hpn_err *err)
{
	const cJSON *it;

	p->rv = calloc(p->count, sizeof(*p->rv));
	p->del = calloc((size_t)cJSON_GetArraySize(items) + 1, sizeof(*p->del));
	if (!p->rv || !p->del)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	for (size_t i = 0; i < p->count; i++) {
		const cJSON *cur = item_named(items, hpn_dra_slice_meta(p->v[i], "name"));

		p->rv[i] = cur && hpn_dra_slice_meta(cur, "resourceVersion")
				   ? hpn_dra_slice_meta(cur, "resourceVersion")
				   : "";
	}
	cJSON_ArrayForEach (it, items) {
		const char *name = hpn_dra_slice_meta(it, "name");
		bool ours = false;

		if (!name)
			break;
		for (size_t i = 0; i < p->count; i++)
			ours = ours || !strcmp(name, hpn_dra_slice_meta(p->v[i], "name"));
		if (!ours)
			p->del[p->n_del++] = name;
	}
	return 0;
}

/*
 * v at the generation the API holds, written over the slices that differ:
 * 0 with p->write set, or 1 when the API does not hold our devices as v
 * places them (v freed: a new generation).
 */
static int plan_in_place(const cJSON *items, struct hpn_dra_slices_plan *p, long api_gen,
			 struct hpn_err *err)
{
	if (up_to_date(items, p->v, p->count)) {
		p->gen = api_gen;
		return 0;
	}
	if (!same_devices(items, p->v, p->count, api_gen)) {
		free_all(p->v, p->count);
		p->v = NULL;
		return 1;
	}
	p->gen = api_gen;
	p->write = true;
	for (size_t i = 0; i < p->count; i++)
		p->put[i] = !cJSON_Compare(
			at(item_named(items, hpn_dra_slice_meta(p->v[i], "name")), "spec", NULL),
			at(p->v[i], "spec", NULL), true);
	return plan_writes(items, p, err);
}

int hpn_dra_slices_plan(const char *body, size_t len, const char *what, const char *driver,
			const char *node, const struct hpn_dra_nic *nics, size_t n, long floor,
			struct hpn_dra_slices_plan *ret, struct hpn_err *err)
{
	struct hpn_dra_slices_plan *p = ret;
	const cJSON *items, *it;
	long api_gen = 0;

	*p = (struct hpn_dra_slices_plan){ 0 };
	p->list = cJSON_ParseWithLength(body, len);
	items = cJSON_GetObjectItemCaseSensitive(p->list, "items");
	if (!cJSON_IsArray(items) || cJSON_GetArraySize(items) > HPN_DRA_SLICES_LIST_MAX)
		return hpn_err_set(err, HPN_E_KUBE, EPROTO, "%s: not a list of at most %d", what,
				   HPN_DRA_SLICES_LIST_MAX);
	cJSON_ArrayForEach (it, items)
		if (gen_of(it) > api_gen)
			api_gen = gen_of(it);
	p->count = hpn_dra_slice_split(nics, n);
	p->put = calloc(p->count, sizeof(*p->put));
	if (!p->put)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	/* What is there already, at its own generation: nothing, or some slices, to write. */
	if (api_gen > 0 && api_gen >= floor) {
		int r;

		p->v = render_all(driver, node, nics, n, api_gen, p->count, items, err);
		if (!p->v)
			return -EINVAL;
		r = plan_in_place(items, p, api_gen, err);
		if (r <= 0)
			return r;
	}
	/*
	 * Above every generation there, so the scheduler takes ours as the
	 * newest; at the bound, the bound (what else is there is deleted or
	 * written over), never one gen_of would not read back: the next round
	 * would write again, and every round after it (found by fuzz_draslices).
	 */
	p->gen = api_gen > floor ? api_gen : floor;
	p->gen = p->gen < HPN_DRA_GENERATION_MAX ? p->gen + 1 : HPN_DRA_GENERATION_MAX;
	p->v = render_all(driver, node, nics, n, p->gen, p->count, items, err);
	if (!p->v)
		return -EINVAL;
	p->write = true;
	p->bumped = true;
	for (size_t i = 0; i < p->count; i++)
		p->put[i] = true;
	return plan_writes(items, p, err);
}

void hpn_dra_slices_plan_free(struct hpn_dra_slices_plan *p)
{
	free_all(p->v, p->count);
	free(p->put);
	free(p->rv);
	free(p->del);
	cJSON_Delete(p->list);
	*p = (struct hpn_dra_slices_plan){ 0 };
}
