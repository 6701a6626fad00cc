// SPDX-License-Identifier: Apache-2.0
/*
 * hpn-bench-gpu-choice [--tsv] NAME=DIR...: how often a pod's GPU gets a NIC
 * behind its own PCIe switches (PIX or PXB), with the GPU-aware choice
 * (hpn_gpu_assign) and with today's first match (the first n free NICs in
 * name order, what lib/pool.c takes without GPUs, each then paired with the
 * GPU it is nearest to by hpn_gpu_pair, as NCCL in the pod would use it).
 *
 * DIR is a node's fake root as test/fixtures/gpu-nodes/mknode.sh writes it
 * (DIR/sys, DIR/proc). The pool is every netdev an RDMA device serves, all
 * free; the pods are every 1-, 2-, 4- and 8-GPU subset of the node's GPUs,
 * with one NIC per GPU. Prints a table per node and overall, or with --tsv
 * one line per node and shape: name, GPUs per pod, pods, GPUs, GPUs near
 * with the GPU-aware choice, GPUs near with the first match, microseconds
 * spent in hpn_gpu_assign, then GPUs at PHB or nearer (their own NUMA node:
 * on a node such as vm-erdma, where no NIC shares a switch with a GPU, the
 * one class there is to win) with each.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu.h"
#include "rdma.h"
#include "sysfs.h"
#include "types.h"
#include "util.h"

#define MAX_GPUS 16
#define MAX_NICS 32

struct node {
	const char *name;
	char sys[PATH_MAX], proc[PATH_MAX];
	char ids[MAX_GPUS][HPN_GPU_ID_MAX]; /* UUIDs, PCI order */
	size_t n_gpus;
	char ifname[MAX_NICS][256];
	struct hpn_gpu_nic nics[MAX_NICS]; /* name order */
	size_t n_nics;
};

struct tally {
	size_t pods, gpus, aware, first; /* near: PIX or PXB */
	size_t aware_numa, first_numa;	 /* PHB or nearer: the GPU's own NUMA node */
	double assign_us;
};

static int by_version(const void *a, const void *b)
{
	return strverscmp(*(const char *const *)a, *(const char *const *)b);
}

/* The GPUs procfs lists (PCI order) by the UUID each information file gives. */
static int load_gpus(struct node *nd)
{
	char dir[PATH_MAX + 32];
	struct dirent **ents;
	int n = 0;

	snprintf(dir, sizeof(dir), "%s/driver/nvidia/gpus", nd->proc);
	n = scandir(dir, &ents, NULL, alphasort);
	if (n < 0)
		return -errno;
	for (int i = 0; i < n; i++) {
		if (ents[i]->d_name[0] != '.' && nd->n_gpus < MAX_GPUS) {
			char path[PATH_MAX * 2], text[4096];
			const char *u;
			FILE *f;
			size_t len = 0;

			snprintf(path, sizeof(path), "%s/%s/information", dir, ents[i]->d_name);
			f = fopen(path, "re");
			if (f) {
				len = fread(text, 1, sizeof(text) - 1, f);
				fclose(f);
			}
			text[len] = '\0';
			u = strstr(text, "GPU UUID:");
			u = u ? strstr(u, "GPU-") : NULL;
			if (u && sscanf(u, "%95s", nd->ids[nd->n_gpus]) == 1)
				nd->n_gpus++;
		}
		free(ents[i]);
	}
	free(ents);
	return nd->n_gpus ? 0 : -ENOENT;
}

/*
 * The pool: netdevs an RDMA device serves, in name order, each placed where
 * NCCL places it (lib/pool.c does the same): by its RDMA device's PCI
 * function, which for eRDMA is not the ENI's (hpn_rdma_of_netdev pairs them
 * by MAC on this fake tree).
 */
static int load_nics(struct node *nd)
{
	char dir[PATH_MAX + 16];
	char *names[MAX_NICS];
	size_t n = 0;
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/class/net", nd->sys);
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((e = readdir(d)) && n < MAX_NICS)
		if (e->d_name[0] != '.')
			names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, n, sizeof(names[0]), by_version);
	for (size_t i = 0; i < n; i++) {
		struct hpn_link l = { 0 };
		struct hpn_rdma_dev dev;
		struct hpn_err err = { 0 };
		char mac[32];

		if (names[i] && strlen(names[i]) < sizeof(l.name) &&
		    hpn_sysfs_read(mac, sizeof(mac), "%s/%s/address", dir, names[i]) == 0 &&
		    hpn_mac_parse(mac, l.mac) == 0) {
			l.has_mac = true;
			snprintf(l.name, sizeof(l.name), "%s", names[i]);
			if (hpn_rdma_of_netdev(nd->sys, NULL, &l, &dev, &err) == 0 &&
			    hpn_pci_pos_of_nic(nd->sys, names[i], dev.pci,
					       &nd->nics[nd->n_nics].pos) == 0) {
				snprintf(nd->ifname[nd->n_nics], sizeof(nd->ifname[0]), "%s",
					 names[i]);
				nd->nics[nd->n_nics++].free = true;
			}
		}
		free(names[i]);
	}
	return nd->n_nics ? 0 : -ENOENT;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Every pod of size GPUs on nd, both ways. */
static int run_shape(const struct node *nd, size_t size, struct tally *t)
{
	static struct hpn_gpus g;

	for (unsigned mask = 1; mask < (1u << nd->n_gpus); mask++) {
		char ids[MAX_GPUS][HPN_GPU_ID_MAX];
		struct hpn_gpu_pick picks[MAX_GPUS];
		struct hpn_err err = { 0 };
		size_t n = 0;
		double t0;
		int r;

		if ((size_t)__builtin_popcount(mask) != size)
			continue;
		for (size_t k = 0; k < nd->n_gpus; k++)
			if (mask & (1u << k))
				memcpy(ids[n++], nd->ids[k], HPN_GPU_ID_MAX);
		r = hpn_gpus_resolve(nd->proc, nd->sys, (const char(*)[HPN_GPU_ID_MAX])ids, n, &g,
				     &err);
		if (r < 0 || g.n != n || g.n_unknown) {
			fprintf(stderr, "%s: GPUs 0x%x: not placed (%s)\n", nd->name, mask,
				err.msg);
			return -EINVAL;
		}
		if (n > nd->n_nics)
			continue;
		t->pods++;
		t->gpus += n;
		t0 = now_us();
		r = hpn_gpu_assign(&g, nd->nics, nd->n_nics, n, picks);
		t->assign_us += now_us() - t0;
		if (r < 0) {
			fprintf(stderr, "%s: GPUs 0x%x: hpn_gpu_assign: %s\n", nd->name, mask,
				strerror(-r));
			return r;
		}
		for (size_t i = 0; i < n; i++) {
			t->aware += picks[i].dist <= HPN_DIST_PXB;
			t->aware_numa += picks[i].dist <= HPN_DIST_PHB;
		}
		/* The first match: candidates 0..n-1 (all are free), paired as NCCL would. */
		for (size_t i = 0; i < n; i++)
			picks[i].nic = i;
		hpn_gpu_pair(&g, nd->nics, nd->n_nics, n, picks);
		for (size_t i = 0; i < n; i++) {
			t->first += picks[i].dist <= HPN_DIST_PXB;
			t->first_numa += picks[i].dist <= HPN_DIST_PHB;
		}
	}
	return 0;
}

static double pct(size_t a, size_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static void row(const char *name, const char *shape, const struct tally *t)
{
	printf("%-12s %5s %6zu %6zu %12.1f%% %12.1f%% %12.1f%% %12.1f%%\n", name, shape, t->pods,
	       t->gpus, pct(t->aware, t->gpus), pct(t->first, t->gpus), pct(t->aware_numa, t->gpus),
	       pct(t->first_numa, t->gpus));
}

static void add(struct tally *to, const struct tally *t)
{
	to->pods += t->pods;
	to->gpus += t->gpus;
	to->aware += t->aware;
	to->first += t->first;
	to->aware_numa += t->aware_numa;
	to->first_numa += t->first_numa;
	to->assign_us += t->assign_us;
}

int main(int argc, char **argv)
{
	static const size_t shapes[] = { 1, 2, 4, 8 };
	static struct node nd;
	struct tally all = { 0 };
	bool tsv = argc > 1 && !strcmp(argv[1], "--tsv");

	if (argc < 2 + tsv) {
		fprintf(stderr, "usage: hpn-bench-gpu-choice [--tsv] NAME=DIR...\n");
		return 2;
	}
	if (!tsv)
		printf("GPUs given a NIC behind their own PCIe switches (PIX or PXB), and on "
		       "their NUMA node (PHB or nearer), one NIC per GPU, every pod shape\n"
		       "%-12s %5s %6s %6s %13s %13s %13s %13s\n",
		       "node", "GPUs", "pods", "GPUs", "gpu-aware", "first-match", "aware<=PHB",
		       "first<=PHB");
	for (int a = 1 + tsv; a < argc; a++) {
		struct tally node_all = { 0 };
		char *eq = strchr(argv[a], '=');

		memset(&nd, 0, sizeof(nd));
		if (!eq) {
			fprintf(stderr, "hpn-bench-gpu-choice: %s is not NAME=DIR\n", argv[a]);
			return 2;
		}
		*eq = '\0';
		nd.name = argv[a];
		snprintf(nd.sys, sizeof(nd.sys), "%.4000s/sys", eq + 1);
		snprintf(nd.proc, sizeof(nd.proc), "%.4000s/proc", eq + 1);
		if (load_gpus(&nd) < 0 || load_nics(&nd) < 0) {
			fprintf(stderr,
				"hpn-bench-gpu-choice: %s: no GPUs or no RDMA NICs under %s\n",
				nd.name, eq + 1);
			return 1;
		}
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			struct tally t = { 0 };
			char shape[8];

			/* One NIC per GPU: no pod larger than the NICs. */
			if (shapes[s] > nd.n_gpus || shapes[s] > nd.n_nics)
				continue;
			if (run_shape(&nd, shapes[s], &t) < 0)
				return 1;
			snprintf(shape, sizeof(shape), "%zu", shapes[s]);
			if (tsv)
				printf("%s\t%zu\t%zu\t%zu\t%zu\t%zu\t%.1f\t%zu\t%zu\n", nd.name,
				       shapes[s], t.pods, t.gpus, t.aware, t.first, t.assign_us,
				       t.aware_numa, t.first_numa);
			else
				row(nd.name, shape, &t);
			add(&node_all, &t);
		}
		if (!tsv)
			row(nd.name, "all", &node_all);
		add(&all, &node_all);
	}
	if (!tsv) {
		row("overall", "all", &all);
		printf("(hpn_gpu_assign: %.2f us a pod)\n",
		       all.pods ? all.assign_us / (double)all.pods : 0);
	}
	return 0;
}
