// SPDX-License-Identifier: Apache-2.0
#include "gpu.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sysfs.h"
#include "util.h"

int hpn_pci_pos_of_pci(const char *sysfs_root, const char *bdf, struct hpn_pci_pos *ret)
{
	char path[PATH_MAX], real[PATH_MAX], top[PATH_MAX], v[32];
	struct hpn_pci_pos pos = { .numa = -1 };
	size_t tl;

	if (hpn_snprintf(path, sizeof(path), "%s/devices", sysfs_root) < 0 || !realpath(path, top))
		return -ENOENT;
	if (hpn_snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", sysfs_root, bdf) < 0 ||
	    !realpath(path, real))
		return -ENOENT;
	/* Only a function placed in the device tree (a fake tree may say otherwise) has a path. */
	tl = strlen(top);
	if (strncmp(real, top, tl) || real[tl] != '/' ||
	    hpn_snprintf(pos.path, sizeof(pos.path), "%s", real + tl + 1) < 0)
		return -ENOENT;
	if (hpn_sysfs_read(v, sizeof(v), "%s/numa_node", real) == 0)
		pos.numa = (int)strtol(v, NULL, 10);
	*ret = pos;
	return 0;
}

int hpn_pci_pos_of_netdev(const char *sysfs_root, const char *ifname, struct hpn_pci_pos *ret)
{
	char pci[HPN_PCI_STR];

	if (hpn_sysfs_netdev_pci(sysfs_root, ifname, pci) < 0)
		return -ENOENT;
	return hpn_pci_pos_of_pci(sysfs_root, pci, ret);
}

int hpn_pci_pos_of_nic(const char *sysfs_root, const char *ifname, const char *rdma_pci,
		       struct hpn_pci_pos *ret)
{
	if (rdma_pci && rdma_pci[0])
		return hpn_pci_pos_of_pci(sysfs_root, rdma_pci, ret);
	return hpn_pci_pos_of_netdev(sysfs_root, ifname, ret);
}

/* The next '/'-separated component of *p (advanced past it) and its length; 0 at the end. */
static size_t component(const char **p)
{
	const char *s = *p, *e;

	if (!*s)
		return 0;
	e = strchr(s, '/');
	if (!e)
		e = s + strlen(s);
	*p = *e ? e + 1 : e;
	return (size_t)(e - s);
}

static size_t count_components(const char *p)
{
	size_t n = 0;

	while (component(&p))
		n++;
	return n;
}

enum hpn_gpu_dist hpn_pci_dist(const struct hpn_pci_pos *a, const struct hpn_pci_pos *b)
{
	const char *pa = a->path, *pb = b->path;
	size_t common = 0, na, nb;

	if (!a->path[0] || !b->path[0])
		return HPN_DIST_UNKNOWN;
	/* Components shared from the root (pciDDDD:BB) down. */
	for (;;) {
		const char *ra = pa, *rb = pb;
		size_t la = component(&pa), lb = component(&pb);

		if (!la || la != lb || memcmp(ra, rb, la))
			break;
		common++;
	}
	/* Another root complex: through the host bridges, in one NUMA node or across. */
	if (common == 0)
		return a->numa == b->numa ? HPN_DIST_PHB : HPN_DIST_SYS;
	/* Only the root in common: through this root complex's host bridge. */
	if (common == 1)
		return HPN_DIST_PHB;
	na = count_components(a->path);
	nb = count_components(b->path);
	/* One end is a bridge above the other. */
	if (na <= common || nb <= common)
		return HPN_DIST_PIX;
	/* Bridges strictly between the common one and each end: one switch's ports at most. */
	return na - common - 1 <= 1 && nb - common - 1 <= 1 ? HPN_DIST_PIX : HPN_DIST_PXB;
}

/* One GPU procfs lists. */
struct proc_gpu {
	char pci[HPN_PCI_STR];
	char uuid[64]; /* "GPU-..." as the driver prints it */
	long minor;    /* -1: not given */
};

#define MAX_PROC_GPUS 256

/* "Key: \t value" lines of an information file into g. */
static void parse_information(const char *text, struct proc_gpu *g)
{
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *colon = strchr(l, ':'), *v, *end = strchr(l, '\n');
		size_t vl;

		if (!end)
			end = l + strlen(l);
		if (!colon || colon > end)
			continue;
		for (v = colon + 1; v < end && (*v == ' ' || *v == '\t'); v++)
			;
		vl = (size_t)(end - v);
		while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t' || v[vl - 1] == '\r'))
			vl--;
		if (!strncmp(l, "GPU UUID:", 9) && vl < sizeof(g->uuid)) {
			memcpy(g->uuid, v, vl);
			g->uuid[vl] = '\0';
		} else if (!strncmp(l, "Device Minor:", 13)) {
			char num[24], *e;

			if (vl && vl < sizeof(num)) {
				memcpy(num, v, vl);
				num[vl] = '\0';
				g->minor = strtol(num, &e, 10);
				if (*e || g->minor < 0)
					g->minor = -1;
			}
		}
	}
}

/* The GPUs under proc_root/driver/nvidia/gpus: none when it is not there. */
static size_t proc_gpus(const char *proc_root, struct proc_gpu *out, size_t max)
{
	char path[PATH_MAX];
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	if (hpn_snprintf(path, sizeof(path), "%s/driver/nvidia/gpus", proc_root) < 0)
		return 0;
	d = opendir(path);
	if (!d)
		return 0;
	while (n < max && (de = readdir(d))) {
		char file[PATH_MAX], *text = NULL;
		struct hpn_err e = { 0 };
		size_t len;
		struct proc_gpu *g = &out[n];

		/* Each entry is named by its PCI address: dddd:bb:dd.f */
		if (de->d_name[0] == '.' || hpn_pci_normalise(de->d_name, g->pci) < 0)
			continue;
		if (hpn_snprintf(file, sizeof(file), "%s/%s/information", path, de->d_name) < 0 ||
		    hpn_read_file(file, 65536, &text, &len, &e) < 0)
			continue;
		g->uuid[0] = '\0';
		g->minor = -1;
		parse_information(text, g);
		free(text);
		n++;
	}
	closedir(d);
	return n;
}

/* The procfs GPU id names, or NULL; *stem gets the ID unknown ones are told apart by. */
static const struct proc_gpu *lookup_id(const char *id, const struct proc_gpu *pg, size_t n,
					char stem[HPN_GPU_ID_MAX])
{
	char uuid[HPN_GPU_ID_MAX];
	const char *sep;
	long minor = -1;

	snprintf(stem, HPN_GPU_ID_MAX, "%s", id);
	uuid[0] = '\0';
	if (!strncmp(id, "GPU-", 4)) {
		/* A time-slicing replica: <uuid>::<n>. */
		sep = strstr(id, "::");
		snprintf(uuid, sizeof(uuid), "%.*s", (int)(sep ? (size_t)(sep - id) : strlen(id)),
			 id);
		snprintf(stem, HPN_GPU_ID_MAX, "%s", uuid);
	} else if (!strncmp(id, "MIG-GPU-", 8)) {
		/* The old MIG form: MIG-GPU-<uuid>/<gi>/<ci>. */
		sep = strchr(id, '/');
		snprintf(uuid, sizeof(uuid), "%.*s",
			 (int)(sep ? (size_t)(sep - id) - 4 : strlen(id) - 4), id + 4);
		snprintf(stem, HPN_GPU_ID_MAX, "%s", uuid);
	} else if (!strncmp(id, "gpu-", 4) && isdigit((unsigned char)id[4])) {
		/* DRA: gpu-<minor>, and its partitions gpu-<minor>-... */
		char *e;

		minor = strtol(id + 4, &e, 10);
		if (*e && *e != '-')
			minor = -1;
		else
			snprintf(stem, HPN_GPU_ID_MAX, "gpu-%ld", minor);
	}
	for (size_t i = 0; i < n; i++) {
		if (uuid[0] && !strcasecmp(pg[i].uuid, uuid))
			return &pg[i];
		if (minor >= 0 && pg[i].minor == minor)
			return &pg[i];
	}
	return NULL;
}

static int by_pci(const void *a, const void *b)
{
	return strcmp(((const struct hpn_gpu *)a)->pci, ((const struct hpn_gpu *)b)->pci);
}

int hpn_gpus_resolve(const char *proc_root, const char *sysfs_root,
		     const char (*ids)[HPN_GPU_ID_MAX], size_t n, struct hpn_gpus *ret,
		     struct hpn_err *err)
{
	struct proc_gpu *pg;
	char(*stems)[HPN_GPU_ID_MAX];
	size_t npg;

	for (size_t i = 0; i < n; i++)
		if (!hpn_gpu_id_valid(ids[i]))
			return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
					   "GPU ID \"%.*s\" of the pod is not an ID the kubelet "
					   "gives (1 to %d of A-Z a-z 0-9 _ . : @ / -)",
					   HPN_GPU_ID_MAX, ids[i], HPN_GPU_ID_MAX - 1);
	pg = calloc(MAX_PROC_GPUS, sizeof(*pg));
	stems = calloc(HPN_MAX_GPUS, sizeof(*stems));
	if (!pg || !stems) {
		free(pg);
		free(stems);
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	}
	npg = proc_gpus(proc_root, pg, MAX_PROC_GPUS);
	ret->n = ret->n_unknown = 0;
	for (size_t i = 0; i < n && ret->n < HPN_MAX_GPUS; i++) {
		char stem[HPN_GPU_ID_MAX];
		const struct proc_gpu *p = lookup_id(ids[i], pg, npg, stem);
		struct hpn_gpu *g;
		bool seen = false;

		/* Several IDs of one GPU (MIG slices, replicas) are one GPU. */
		for (size_t k = 0; !seen && k < ret->n; k++)
			seen = p ? !strcmp(ret->v[k].pci, p->pci) : !strcmp(stems[k], stem);
		if (seen)
			continue;
		g = &ret->v[ret->n];
		memcpy(stems[ret->n], stem, sizeof(stem));
		ret->n++;
		snprintf(g->id, sizeof(g->id), "%s", ids[i]);
		g->pci[0] = '\0';
		g->pos.path[0] = '\0';
		g->pos.numa = -1;
		if (p) {
			memcpy(g->pci, p->pci, sizeof(g->pci));
			/* Procfs knows it; sysfs may still not place it (a fake tree, a VF). */
			hpn_pci_pos_of_pci(sysfs_root, g->pci, &g->pos);
		} else {
			ret->n_unknown++;
		}
	}
	free(pg);
	free(stems);
	/* Placed GPUs first in PCI order, unknown ones after in the kubelet's order. */
	for (size_t i = 0, placed = 0; i < ret->n; i++)
		if (ret->v[i].pci[0]) {
			struct hpn_gpu t = ret->v[i];

			memmove(&ret->v[placed + 1], &ret->v[placed], (i - placed) * sizeof(t));
			ret->v[placed++] = t;
		}
	qsort(ret->v, ret->n - ret->n_unknown, sizeof(ret->v[0]), by_pci);
	return 0;
}

/* Pick i's GPU: i mod G when there are at least as many picks, else spread over them. */
static size_t target(size_t i, size_t n, size_t g)
{
	return n >= g ? i % g : i * g / n;
}

/* The nearest class a free NIC (not among picks[0..n)) has to gpu, and dist itself. */
static enum hpn_gpu_dist best_left(const struct hpn_gpu *gpu, const struct hpn_gpu_nic *nics,
				   size_t n_nics, const struct hpn_gpu_pick *picks, size_t n,
				   enum hpn_gpu_dist dist)
{
	enum hpn_gpu_dist best = dist;

	for (size_t k = 0; k < n_nics; k++) {
		bool taken = false;
		enum hpn_gpu_dist d;

		for (size_t i = 0; !taken && i < n; i++)
			taken = picks[i].nic == k;
		if (taken || !nics[k].free)
			continue;
		d = hpn_pci_dist(&gpu->pos, &nics[k].pos);
		if (d < best)
			best = d;
	}
	return best;
}

int hpn_gpu_assign(const struct hpn_gpus *g, const struct hpn_gpu_nic *nics, size_t n_nics,
		   size_t n, struct hpn_gpu_pick *picks)
{
	bool *taken;
	size_t nfree = 0, done = 0;

	for (size_t k = 0; k < n_nics; k++)
		nfree += nics[k].free;
	if (nfree < n)
		return -ENOSPC;
	taken = calloc(n_nics + 1, sizeof(*taken));
	if (!taken)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		picks[i].nic = SIZE_MAX;
		picks[i].gpu = g->n ? target(i, n, g->n) : SIZE_MAX;
		picks[i].dist = picks[i].best = HPN_DIST_UNKNOWN;
	}
	/*
	 * Class by class, nearest first, every pick gets the first free NIC at
	 * that class from its GPU: on a PCI tree the classes nest (a switch in a
	 * root complex in a NUMA node), so serving the near ones first never
	 * costs another GPU a nearer NIC.
	 */
	for (int c = HPN_DIST_PIX; c <= HPN_DIST_UNKNOWN && done < n; c++)
		for (size_t i = 0; i < n; i++) {
			const struct hpn_gpu *gpu = g->n ? &g->v[picks[i].gpu] : NULL;

			if (picks[i].nic != SIZE_MAX)
				continue;
			for (size_t k = 0; k < n_nics; k++) {
				enum hpn_gpu_dist d;

				if (!nics[k].free || taken[k])
					continue;
				d = gpu ? hpn_pci_dist(&gpu->pos, &nics[k].pos) : HPN_DIST_UNKNOWN;
				if ((int)d > c)
					continue;
				picks[i].nic = k;
				picks[i].dist = d;
				taken[k] = true;
				done++;
				break;
			}
		}
	free(taken);
	for (size_t i = 0; g->n && i < n; i++)
		picks[i].best =
			best_left(&g->v[picks[i].gpu], nics, n_nics, picks, n, picks[i].dist);
	return 0;
}

void hpn_gpu_pair(const struct hpn_gpus *g, const struct hpn_gpu_nic *nics, size_t n_nics, size_t n,
		  struct hpn_gpu_pick *picks)
{
	size_t load[HPN_MAX_GPUS] = { 0 };
	size_t cap = g->n ? (n + g->n - 1) / g->n : 0;

	for (size_t i = 0; i < n; i++) {
		picks[i].gpu = SIZE_MAX;
		picks[i].dist = picks[i].best = HPN_DIST_UNKNOWN;
	}
	if (!g->n)
		return;
	/* Class by class, as hpn_gpu_assign: each NIC to the least served GPU at that class. */
	for (int c = HPN_DIST_PIX; c <= HPN_DIST_UNKNOWN; c++)
		for (size_t i = 0; i < n; i++) {
			size_t best = SIZE_MAX;

			if (picks[i].gpu != SIZE_MAX || picks[i].nic >= n_nics)
				continue;
			for (size_t k = 0; k < g->n; k++) {
				enum hpn_gpu_dist d =
					hpn_pci_dist(&g->v[k].pos, &nics[picks[i].nic].pos);

				if ((int)d > c || load[k] >= cap)
					continue;
				if (best == SIZE_MAX || load[k] < load[best])
					best = k;
			}
			if (best == SIZE_MAX)
				continue;
			picks[i].gpu = best;
			picks[i].dist = hpn_pci_dist(&g->v[best].pos, &nics[picks[i].nic].pos);
			load[best]++;
		}
	for (size_t i = 0; i < n; i++)
		if (picks[i].gpu != SIZE_MAX)
			picks[i].best = best_left(&g->v[picks[i].gpu], nics, n_nics, picks, n,
						  picks[i].dist);
}
