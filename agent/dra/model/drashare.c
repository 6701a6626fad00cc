// SPDX-License-Identifier: Apache-2.0
/*
 * A shared NIC's capacity from its RoCE GID table, and its parts of the
 * ResourceSlices (drashare.h): counters, their consumption, the shared
 * device's capacity; and what of those (or of the taints) an API server
 * dropped from a slice it stored.
 */
#include "drashare.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "sysfs.h"
#include "util.h"

/* A GID as sysfs prints one (8 groups of 4 hex digits) that is not all zeros: an entry in use. */
static bool gid_set(const char *v)
{
	bool any = false;

	if (strlen(v) != 39)
		return false;
	for (const char *c = v; *c; c++) {
		if (*c == ':')
			continue;
		if (!strchr("0123456789abcdefABCDEF", *c))
			return false;
		any = any || *c != '0';
	}
	return any;
}

unsigned int hpn_dra_gid_shares(const char *sysfs_root, const char *rdma, unsigned int port,
				const char *netdev)
{
	char dir[PATH_MAX], gids[PATH_MAX + 8];
	unsigned int len = 0, used = 0, types;
	bool v1 = false, v2 = false;
	struct dirent *de;
	DIR *d;

	if (!rdma[0] || !netdev[0] || strchr(rdma, '/') || strchr(netdev, '/') || !port ||
	    hpn_snprintf(dir, sizeof(dir), "%s/class/infiniband/%s/ports/%u", sysfs_root, rdma,
			 port) < 0 ||
	    hpn_snprintf(gids, sizeof(gids), "%s/gids", dir) < 0)
		return 0;
	d = opendir(gids);
	if (!d)
		return 0;
	while ((de = readdir(d)) && len < HPN_DRA_GID_TABLE_MAX) {
		char gid[64], nd[HPN_IFNAMSIZ + 2];

		if (!de->d_name[0] || strspn(de->d_name, "0123456789") != strlen(de->d_name))
			continue;
		len++;
		/* An entry the kernel has not filled reads as zeros, its ndev as EINVAL. */
		if (hpn_sysfs_read(gid, sizeof(gid), "%s/gids/%s", dir, de->d_name) == 0 &&
		    gid_set(gid) &&
		    hpn_sysfs_read(nd, sizeof(nd), "%s/gid_attrs/ndevs/%s", dir, de->d_name) == 0 &&
		    !strcmp(nd, netdev)) {
			char type[32];

			used++;
			if (hpn_sysfs_read(type, sizeof(type), "%s/gid_attrs/types/%s", dir,
					   de->d_name) == 0) {
				v1 |= !strcmp(type, "IB/RoCE v1");
				v2 |= !strcmp(type, "RoCE v2");
			}
		}
	}
	closedir(d);
	/* None read: both, the larger cost. */
	types = (unsigned int)v1 + (unsigned int)v2;
	if (!types)
		types = 2;
	return len > used ? (len - used) / (HPN_DRA_ADDRS_PER_SHARE * types) : 0;
}

/* {nic: {value: "1"}}: one of the NIC, the one counter of its set. */
static cJSON *one_nic(void)
{
	cJSON *c = cJSON_CreateObject(), *v;

	if (!c || !(v = cJSON_AddObjectToObject(c, HPN_DRA_SHARE_COUNTER)) ||
	    !cJSON_AddStringToObject(v, "value", "1")) {
		cJSON_Delete(c);
		return NULL;
	}
	return c;
}

/* {<key>: name, counters: {nic: {value: "1"}}} added to the array arr. */
static int named_one_nic(cJSON *arr, const char *key, const char *name)
{
	cJSON *o = cJSON_CreateObject(), *c;

	if (!o || !cJSON_AddItemToArray(arr, o)) {
		cJSON_Delete(o);
		return -ENOMEM;
	}
	if (!cJSON_AddStringToObject(o, key, name))
		return -ENOMEM;
	c = one_nic();
	if (!c || !cJSON_AddItemToObject(o, "counters", c)) {
		cJSON_Delete(c);
		return -ENOMEM;
	}
	return 0;
}

int hpn_dra_share_consumes(cJSON *dev, const char *counter_set)
{
	cJSON *list = cJSON_AddArrayToObject(dev, "consumesCounters");

	return list ? named_one_nic(list, "counterSet", counter_set) : -ENOMEM;
}

int hpn_dra_share_capacity(cJSON *dev, unsigned int shares)
{
	cJSON *cap, *c, *pol, *vals;
	char n[16];

	if (!shares)
		return -EINVAL;
	snprintf(n, sizeof(n), "%u", shares);
	/* One share an allocation: the scheduler rounds a request up to a valid value. */
	if (!cJSON_AddBoolToObject(dev, "allowMultipleAllocations", true) ||
	    !(cap = cJSON_AddObjectToObject(dev, "capacity")) ||
	    !(c = cJSON_AddObjectToObject(cap, HPN_DRA_SHARE_CAPACITY)) ||
	    !cJSON_AddStringToObject(c, "value", n) ||
	    !(pol = cJSON_AddObjectToObject(c, "requestPolicy")) ||
	    !cJSON_AddStringToObject(pol, "default", "1") ||
	    !(vals = cJSON_AddArrayToObject(pol, "validValues")) ||
	    !cJSON_AddItemToArray(vals, cJSON_CreateString("1")))
		return -ENOMEM;
	return 0;
}

int hpn_dra_share_counter_set(cJSON *sets, const char *name)
{
	return named_one_nic(sets, "name", name);
}

static const cJSON *at(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* What of a feature the slice holds: taints, or the shares' fields (each counted). */
static void count(const cJSON *slice, int *taints, int *shares)
{
	const cJSON *spec = at(slice, "spec"), *dev = NULL, *cap = NULL;

	*taints = 0;
	*shares = cJSON_GetArraySize(at(spec, "sharedCounters"));
	cJSON_ArrayForEach (dev, at(spec, "devices")) {
		*taints += cJSON_GetArraySize(at(dev, "taints"));
		*shares += cJSON_GetArraySize(at(dev, "consumesCounters"));
		*shares += cJSON_IsTrue(at(dev, "allowMultipleAllocations"));
		cJSON_ArrayForEach (cap, at(dev, "capacity"))
			*shares += at(cap, "requestPolicy") != NULL;
	}
}

unsigned int hpn_dra_slice_dropped(const cJSON *sent, const char *body, size_t len)
{
	cJSON *got = cJSON_ParseWithLength(body, len);
	unsigned int dropped = 0;
	int st, ss, gt, gs;

	if (got) {
		count(sent, &st, &ss);
		count(got, &gt, &gs);
		dropped = (gt < st ? HPN_DRA_DROP_TAINTS : 0) | (gs < ss ? HPN_DRA_DROP_SHARES : 0);
	}
	cJSON_Delete(got);
	return dropped;
}
