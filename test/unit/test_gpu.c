// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/gpu.c against three real GPU nodes' PCI trees
 * (test/fixtures/gpu-nodes/, built by mknode.sh into a scratch directory):
 * the distance of every GPU-NIC pair against the node's nvidia-smi matrix,
 * the kubelet's GPU IDs placed through procfs, and the NIC choice for every
 * 1-, 2-, 4- and 8-GPU pod, under contention, against a bad allocation and
 * with other NIC counts than GPUs.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "gpu.h"
#include "gpunode.h"
#include "rdma.h"
#include "tmpdir.h"

#define MAX_GPUS 8
#define MAX_NICS 16

/* One node as the fixture describes it, and as the test expects it. */
struct node {
	const char *name;
	char sys[PATH_MAX];
	char proc[PATH_MAX];
	size_t n_gpus, n_nics;
	/* GPU k: nvidia-smi's GPUk, the k-th in PCI order. */
	char gpu_pci[MAX_GPUS][HPN_PCI_STR];
	char gpu_uuid[MAX_GPUS][HPN_GPU_ID_MAX];
	struct hpn_pci_pos gpu_pos[MAX_GPUS];
	/* NIC k: nvidia-smi's NICk (its legend's RDMA device) and the netdev on it. */
	char nic_ibdev[MAX_NICS][HPN_IBDEV_MAX];
	char nic_if[MAX_NICS][HPN_IFNAMSIZ];
	char nic_pci[MAX_NICS][HPN_PCI_STR]; /* the RDMA device's function */
	struct hpn_pci_pos nic_pos[MAX_NICS];
	enum hpn_gpu_dist want[MAX_GPUS][MAX_NICS]; /* the matrix, NODE read as PHB */
	/* The pool's candidates as the plugin orders them (netdev names, strverscmp). */
	size_t cand_nic[MAX_NICS]; /* candidate i is NIC cand_nic[i] */
	struct hpn_gpu_nic cand[MAX_NICS];
};

static char scratch[256];

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = calloc(1, 65536);
	n = buf ? fread(buf, 1, 65535, f) : 0;
	fclose(f);
	if (buf)
		buf[n] = '\0';
	return buf;
}

/*
 * The matrix file: the header names NIC0..NICn-1, a row per GPU, the NIC
 * legend names their RDMA devices. nvidia-smi's NODE (another host bridge of
 * the NUMA node) is NCCL's PHB, as gpu.h's classes are NCCL's.
 */
static void read_matrix(struct node *nd)
{
	char path[PATH_MAX], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.topo", GPUNODES, nd->name);
	f = fopen(path, "re");
	if (!f) {
		perror(path);
		exit(2);
	}
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *tok = strtok_r(line, " \t\n", &save);
		unsigned k;
		char dev[HPN_IBDEV_MAX];

		if (!tok || tok[0] == '#')
			continue;
		if (!strcmp(tok, "NIC0")) {
			nd->n_nics = 1;
			while (strtok_r(NULL, " \t\n", &save))
				nd->n_nics++;
		} else if (sscanf(tok, "GPU%u", &k) == 1 && k == nd->n_gpus && k < MAX_GPUS) {
			for (size_t j = 0; j < nd->n_nics; j++) {
				const char *c = strtok_r(NULL, " \t\n", &save);
				int d = !c		     ? -1
					: !strcmp(c, "NODE") ? HPN_DIST_PHB
							     : hpn_gpu_dist_parse(c);

				if (d < 0) {
					fprintf(stderr, "%s: GPU%u NIC%zu: bad class\n", path, k,
						j);
					exit(2);
				}
				nd->want[k][j] = d;
			}
			nd->n_gpus++;
		} else if (sscanf(tok, "NIC%u:", &k) == 1 && k < MAX_NICS &&
			   (tok = strtok_r(NULL, " \t\n", &save)) && strlen(tok) < sizeof(dev)) {
			snprintf(nd->nic_ibdev[k], sizeof(nd->nic_ibdev[k]), "%s", tok);
		}
	}
	fclose(f);
	if (!nd->n_gpus || !nd->n_nics || nd->n_nics > MAX_NICS) {
		fprintf(stderr, "%s: no matrix\n", path);
		exit(2);
	}
}

/* The GPUs procfs lists, in PCI order (nvidia-smi's GPU numbers), with their UUIDs. */
static void read_gpus(struct node *nd)
{
	char dir[PATH_MAX + 32];
	struct dirent **ents;
	int n;
	size_t k = 0;

	snprintf(dir, sizeof(dir), "%s/driver/nvidia/gpus", nd->proc);
	n = scandir(dir, &ents, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		if (ents[i]->d_name[0] != '.' && k < MAX_GPUS) {
			char path[PATH_MAX * 2];
			char *text, *u;

			snprintf(nd->gpu_pci[k], HPN_PCI_STR, "%.15s", ents[i]->d_name);
			snprintf(path, sizeof(path), "%s/%s/information", dir, ents[i]->d_name);
			text = slurp(path);
			u = text ? strstr(text, "GPU-") : NULL;
			if (u)
				sscanf(u, "%95s", nd->gpu_uuid[k]);
			free(text);
			k++;
		}
		free(ents[i]);
	}
	free(ents);
	CHECK_INT_EQ(k, nd->n_gpus);
}

/*
 * The netdev each legend RDMA device serves, as discovery ties them (rdmasys.c:
 * on its PCI function, or an eRDMA function's ENI by its MAC), and the
 * device's own PCI function, where NCCL and nvidia-smi place the NIC.
 */
static void read_nics(struct node *nd)
{
	for (size_t k = 0; k < nd->n_nics; k++) {
		struct hpn_rdma_dev rd;
		struct hpn_err err = { 0 };

		if (hpn_rdma_netdev_of(nd->sys, NULL, nd->nic_ibdev[k], 0, nd->nic_if[k], &rd,
				       &err) < 0) {
			fprintf(stderr, "%s: %s\n", nd->name, err.msg);
			exit(2);
		}
		snprintf(nd->nic_pci[k], HPN_PCI_STR, "%s", rd.pci);
	}
}

/* qsort has no context argument: the node being ordered. */
static const struct node *by_ifname_node;
static int by_ifname(const void *a, const void *b)
{
	const struct node *nd = by_ifname_node;

	return strverscmp(nd->nic_if[*(const size_t *)a], nd->nic_if[*(const size_t *)b]);
}

static void node_load(struct node *nd, const char *name)
{
	char dest[512];
	int r;

	memset(nd, 0, sizeof(*nd));
	nd->name = name;
	snprintf(dest, sizeof(dest), "%s/%s", scratch, name);
	gpunode_make(name, dest);
	snprintf(nd->sys, sizeof(nd->sys), "%s/sys", dest);
	snprintf(nd->proc, sizeof(nd->proc), "%s/proc", dest);
	read_matrix(nd);
	read_gpus(nd);
	read_nics(nd);
	for (size_t k = 0; k < nd->n_gpus; k++) {
		r = hpn_pci_pos_of_pci(nd->sys, nd->gpu_pci[k], &nd->gpu_pos[k]);
		CHECK_INT_EQ(r, 0);
		CHECK(nd->gpu_pos[k].path[0] != '\0');
	}
	for (size_t k = 0; k < nd->n_nics; k++) {
		r = hpn_pci_pos_of_nic(nd->sys, nd->nic_if[k], nd->nic_pci[k], &nd->nic_pos[k]);
		CHECK_INT_EQ(r, 0);
		CHECK(nd->nic_pos[k].path[0] != '\0');
	}
	for (size_t k = 0; k < nd->n_nics; k++)
		nd->cand_nic[k] = k;
	by_ifname_node = nd;
	qsort(nd->cand_nic, nd->n_nics, sizeof(nd->cand_nic[0]), by_ifname);
	for (size_t i = 0; i < nd->n_nics; i++) {
		nd->cand[i].pos = nd->nic_pos[nd->cand_nic[i]];
		nd->cand[i].free = true;
	}
}

static void all_free(struct node *nd)
{
	for (size_t i = 0; i < nd->n_nics; i++)
		nd->cand[i].free = true;
}

/* The node's GPU k of resolved GPU v (by its PCI address); -1 when none. */
static int gpu_index(const struct node *nd, const struct hpn_gpu *v)
{
	for (size_t k = 0; k < nd->n_gpus; k++)
		if (!strcmp(nd->gpu_pci[k], v->pci))
			return (int)k;
	return -1;
}

/* The candidate index of the NIC whose RDMA device is ibdev. */
static size_t cand_of(const struct node *nd, const char *ibdev)
{
	for (size_t i = 0; i < nd->n_nics; i++)
		if (!strcmp(nd->nic_ibdev[nd->cand_nic[i]], ibdev))
			return i;
	fprintf(stderr, "%s: no NIC %s\n", nd->name, ibdev);
	exit(2);
}

/* The nearest class GPU k has to any NIC of the node. */
static enum hpn_gpu_dist row_best(const struct node *nd, size_t k)
{
	enum hpn_gpu_dist b = HPN_DIST_UNKNOWN;

	for (size_t j = 0; j < nd->n_nics; j++)
		if (nd->want[k][j] < b)
			b = nd->want[k][j];
	return b;
}

/* Resolves the node's GPUs in mask (bit k: GPU k) by their UUIDs. */
static int resolve_mask(const struct node *nd, unsigned mask, struct hpn_gpus *g)
{
	char ids[MAX_GPUS][HPN_GPU_ID_MAX];
	size_t n = 0;
	struct hpn_err err = { 0 };

	for (size_t k = 0; k < nd->n_gpus; k++)
		if (mask & (1u << k))
			snprintf(ids[n++], HPN_GPU_ID_MAX, "%s", nd->gpu_uuid[k]);
	return hpn_gpus_resolve(nd->proc, nd->sys, (const char(*)[HPN_GPU_ID_MAX])ids, n, g, &err);
}

/* (i) Every GPU-NIC pair's class is the node's nvidia-smi matrix. */
static void test_matrix(const struct node *nd)
{
	for (size_t k = 0; k < nd->n_gpus; k++)
		for (size_t j = 0; j < nd->n_nics; j++) {
			enum hpn_gpu_dist d = hpn_pci_dist(&nd->gpu_pos[k], &nd->nic_pos[j]);

			if (d != nd->want[k][j])
				fprintf(stderr,
					"\t%s: GPU%zu (%s) NIC%zu (%s %s): got %s, want %s\n",
					nd->name, k, nd->gpu_pci[k], j, nd->nic_ibdev[j],
					nd->nic_if[j], hpn_gpu_dist_name(d),
					hpn_gpu_dist_name(nd->want[k][j]));
			CHECK_INT_EQ(d, nd->want[k][j]);
			/* A distance has no direction. */
			CHECK_INT_EQ(hpn_pci_dist(&nd->nic_pos[j], &nd->gpu_pos[k]), d);
		}
}

/* (iii) Every 1-, 2-, 4- and 8-GPU pod, one NIC per GPU, the whole pool free. */
static void test_all_shapes(struct node *nd, bool all_pix)
{
	static struct hpn_gpus g;
	size_t shapes = 0;

	all_free(nd);
	for (unsigned mask = 1; mask < (1u << nd->n_gpus); mask++) {
		size_t n = (size_t)__builtin_popcount(mask);
		struct hpn_gpu_pick picks[MAX_GPUS];
		bool used[MAX_NICS] = { false };
		int r;

		if (n != 1 && n != 2 && n != 4 && n != 8)
			continue;
		shapes++;
		r = resolve_mask(nd, mask, &g);
		CHECK_INT_EQ(r, 0);
		CHECK_INT_EQ(g.n, n);
		CHECK_INT_EQ(g.n_unknown, 0);
		if (r || g.n != n)
			continue;
		r = hpn_gpu_assign(&g, nd->cand, nd->n_nics, n, picks);
		CHECK_INT_EQ(r, 0);
		if (r)
			continue;
		for (size_t i = 0; i < n; i++) {
			int k = gpu_index(nd, &g.v[picks[i].gpu]);
			size_t c = picks[i].nic;

			CHECK_INT_EQ(picks[i].gpu, i); /* n == g.n: pick i serves GPU i */
			CHECK(k >= 0 && c < nd->n_nics);
			if (k < 0 || c >= nd->n_nics)
				continue;
			CHECK(!used[c]);
			used[c] = true;
			if (picks[i].dist != row_best(nd, k))
				fprintf(stderr, "\t%s mask 0x%02x: GPU%d got %s (%s), best %s\n",
					nd->name, mask, k, nd->nic_if[nd->cand_nic[c]],
					hpn_gpu_dist_name(picks[i].dist),
					hpn_gpu_dist_name(row_best(nd, k)));
			CHECK_INT_EQ(picks[i].dist, nd->want[k][nd->cand_nic[c]]);
			CHECK_INT_EQ(picks[i].dist, row_best(nd, k));
			CHECK_INT_EQ(picks[i].best, row_best(nd, k));
			if (all_pix)
				CHECK_INT_EQ(picks[i].dist, HPN_DIST_PIX);
		}
	}
	/* C(8,1) + C(8,2) + C(8,4) + C(8,8) */
	CHECK_INT_EQ(shapes, 8 + 28 + 70 + 1);
}

/* Hand-made positions: the rules of the classes where no fixture has them. */
static void test_dist_rules(void)
{
	static const struct {
		const char *a;
		int na;
		const char *b;
		int nb;
		enum hpn_gpu_dist want;
		const char *bug; /* a known bug of lib/gpu.c this case shows */
	} c[] = {
		/* One switch: both ends on its downstream ports. */
		{ "pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:00.0/0000:1b:00.0", 0,
		  "pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:01.0/0000:1c:00.0", 0, HPN_DIST_PIX,
		  NULL },
		/* One end is a downstream port itself. */
		{ "pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:00.0", 0,
		  "pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:01.0/0000:1c:00.0", 0, HPN_DIST_PIX,
		  NULL },
		/* A second switch below the first: several switches, one root port. */
		{ "pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:00.0/0000:1b:00.0", 0,
		  "pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:01.0/0000:1c:00.0/0000:1d:00.0/"
		  "0000:1e:00.0",
		  0, HPN_DIST_PXB, NULL },
		/* Two root ports of one host bridge. */
		{ "pci0000:17/0000:17:00.0/0000:18:00.0", 0, "pci0000:17/0000:17:01.0/0000:20:00.0",
		  0, HPN_DIST_PHB, NULL },
		/* Two host bridges of one NUMA node, and of two. */
		{ "pci0000:17/0000:17:00.0/0000:18:00.0", 0, "pci0000:26/0000:26:00.0/0000:27:00.0",
		  0, HPN_DIST_PHB, NULL },
		{ "pci0000:17/0000:17:00.0/0000:18:00.0", 0, "pci0000:97/0000:97:00.0/0000:98:00.0",
		  1, HPN_DIST_SYS, NULL },
		/* NUMA unknown at both ends counts as one node; at one end it does not. */
		{ "pci0000:00/0000:00:05.0", -1, "pci0000:00/0000:00:0d.0", -1, HPN_DIST_PHB,
		  NULL },
		{ "pci0000:00/0000:00:05.0", -1, "pci0000:80/0000:80:01.0/0000:81:00.0", 0,
		  HPN_DIST_SYS, NULL },
		/*
		 * One host bridge, the NUMA node known at one end only: one root
		 * complex is one socket's, whatever a numa_node file says, so PHB.
		 */
		{ "pci0000:00/0000:00:05.0", 0, "pci0000:00/0000:00:0d.0", -1, HPN_DIST_PHB, NULL },
		/* Not placed. */
		{ "", -1, "pci0000:00/0000:00:0d.0", -1, HPN_DIST_UNKNOWN, NULL },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct hpn_pci_pos a = { .numa = c[i].na }, b = { .numa = c[i].nb };

		snprintf(a.path, sizeof(a.path), "%s", c[i].a);
		snprintf(b.path, sizeof(b.path), "%s", c[i].b);
		if (hpn_pci_dist(&a, &b) != c[i].want)
			fprintf(stderr, "\tcase %zu (%s numa %d, %s numa %d): got %s, want %s%s\n",
				i, c[i].a, c[i].na, c[i].b, c[i].nb,
				hpn_gpu_dist_name(hpn_pci_dist(&a, &b)),
				hpn_gpu_dist_name(c[i].want), c[i].bug ? c[i].bug : "");
		CHECK_INT_EQ(hpn_pci_dist(&a, &b), c[i].want);
		CHECK_INT_EQ(hpn_pci_dist(&b, &a), c[i].want);
	}
	for (int d = HPN_DIST_PIX; d <= HPN_DIST_UNKNOWN; d++)
		CHECK_INT_EQ(hpn_gpu_dist_parse(hpn_gpu_dist_name(d)), d);
	CHECK_INT_EQ(hpn_gpu_dist_parse("NODE"), -1);
	CHECK_INT_EQ(hpn_gpu_dist_parse("pix"), -1);
}

/* The netdevs' positions: a PCI NIC's own function; virtio-net's PCI parent. */
static void test_netdev_pos(const struct node *vm)
{
	struct hpn_pci_pos p = { .path = "untouched", .numa = 7 };

	CHECK_INT_EQ(hpn_pci_pos_of_netdev(vm->sys, "eth0", &p), 0);
	CHECK_STR_EQ(p.path, "pci0000:00/0000:00:03.0");
	CHECK_INT_EQ(p.numa, -1);
	CHECK_INT_EQ(hpn_pci_dist(&p, &vm->gpu_pos[0]), HPN_DIST_PHB);
	CHECK_STR_EQ(vm->gpu_pos[0].path, "pci0000:00/0000:00:05.0");
	/* Outputs are written only on success (STYLE.md). */
	p = (struct hpn_pci_pos){ .path = "untouched", .numa = 7 };
	CHECK_INT_EQ(hpn_pci_pos_of_netdev(vm->sys, "nosuch0", &p), -ENOENT);
	CHECK_STR_EQ(p.path, "untouched");
	CHECK_INT_EQ(p.numa, 7);
}

/*
 * vm-erdma: each NIC placed by its eRDMA function, not its ENI's virtio-net
 * one (on the root bus, no NUMA node: SYS to every GPU, so the choice could
 * not tell the NICs apart). Every 1-GPU pod gets the NIC of its GPU's host
 * bridge (PHB), every 2-GPU pod one per host bridge its GPUs are on.
 */
static void test_erdma(struct node *nd)
{
	static struct hpn_gpus g;

	for (size_t j = 0; j < nd->n_nics; j++) {
		struct hpn_pci_pos eni;

		CHECK_INT_EQ(hpn_pci_pos_of_netdev(nd->sys, nd->nic_if[j], &eni), 0);
		CHECK(strcmp(eni.path, nd->nic_pos[j].path) != 0);
		for (size_t k = 0; k < nd->n_gpus; k++)
			CHECK_INT_EQ(hpn_pci_dist(&eni, &nd->gpu_pos[k]), HPN_DIST_SYS);
	}
	CHECK_STR_EQ(nd->nic_pci[0], "0000:16:04.0");
	CHECK_STR_EQ(nd->nic_if[0], "eth1");
	CHECK_STR_EQ(nd->nic_pci[1], "0000:80:04.0");
	CHECK_STR_EQ(nd->nic_if[1], "eth2");
	all_free(nd);
	for (unsigned mask = 1; mask < (1u << nd->n_gpus); mask++) {
		size_t n = (size_t)__builtin_popcount(mask);
		struct hpn_gpu_pick picks[2];

		if (n > 2 || resolve_mask(nd, mask, &g) < 0)
			continue;
		CHECK_INT_EQ(hpn_gpu_assign(&g, nd->cand, nd->n_nics, n, picks), 0);
		for (size_t i = 0; i < n; i++) {
			int k = gpu_index(nd, &g.v[picks[i].gpu]);

			CHECK(k >= 0);
			if (k < 0)
				continue;
			/* Both GPUs on one node: the other NIC is SYS to the second. */
			if (n == 1 || __builtin_popcount(mask & 0x0f) == 1) {
				CHECK_INT_EQ(picks[i].dist, row_best(nd, k));
				CHECK_INT_EQ(picks[i].dist, HPN_DIST_PHB);
			}
			if (picks[i].dist == HPN_DIST_PHB)
				CHECK_INT_EQ(nd->cand_nic[picks[i].nic], k < 4 ? 0 : 1);
		}
	}
}

/* (ii) The kubelet's GPU IDs placed through procfs, on the HGX node. */
static void test_resolve(const struct node *nd)
{
	/* As hgx-h100.tree writes them: GPU1, GPU3, GPU5 (a check of read_gpus too). */
	static const char *const u1 = "GPU-c81d2e47-0b39-4f6c-8e15-6a3b7c90d212";
	static const char *const u3 = "GPU-a4c7f219-86de-4d13-9b0e-7f28c5e1a934";
	static const char *const u5 = "GPU-e71f3a96-4b08-4d2e-8c5a-b09d62f1e756";
	static struct hpn_gpus g;
	char ids[8][HPN_GPU_ID_MAX];
	struct hpn_err err = { 0 };
	int r;

	CHECK_STR_EQ(nd->gpu_uuid[1], u1);
	CHECK_STR_EQ(nd->gpu_uuid[3], u3);
	CHECK_STR_EQ(nd->gpu_uuid[5], u5);

	/* Each form of an ID names GPU3 (0000:0c:00.0, minor 3). */
	static const char *const forms[] = {
		"GPU-a4c7f219-86de-4d13-9b0e-7f28c5e1a934",
		"GPU-a4c7f219-86de-4d13-9b0e-7f28c5e1a934::3",
		"MIG-GPU-a4c7f219-86de-4d13-9b0e-7f28c5e1a934/1/0",
		"gpu-3",
		"gpu-3-mig-1g.10gb-0",
	};
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		snprintf(ids[0], HPN_GPU_ID_MAX, "%s", forms[i]);
		memset(&g, 0, sizeof(g));
		r = hpn_gpus_resolve(nd->proc, nd->sys, (const char(*)[HPN_GPU_ID_MAX])ids, 1, &g,
				     &err);
		if (r || g.n != 1 || strcmp(g.v[0].pci, "0000:0c:00.0"))
			fprintf(stderr, "\tform %s: r=%d n=%zu pci=%s\n", forms[i], r, g.n,
				g.v[0].pci);
		CHECK_INT_EQ(r, 0);
		CHECK_INT_EQ(g.n, 1);
		CHECK_INT_EQ(g.n_unknown, 0);
		CHECK_STR_EQ(g.v[0].pci, "0000:0c:00.0");
		CHECK_STR_EQ(g.v[0].id, forms[i]);
		CHECK_STR_EQ(g.v[0].pos.path, nd->gpu_pos[3].path);
		CHECK_INT_EQ(g.v[0].pos.numa, 0);
	}

	/* Several IDs of one GPU count once, under the first of them. */
	snprintf(ids[0], HPN_GPU_ID_MAX, "%s::0", u3);
	snprintf(ids[1], HPN_GPU_ID_MAX, "%s::1", u3);
	snprintf(ids[2], HPN_GPU_ID_MAX, "MIG-%s/2/0", u3);
	snprintf(ids[3], HPN_GPU_ID_MAX, "gpu-3-mig-1g.10gb-1");
	snprintf(ids[4], HPN_GPU_ID_MAX, "%s", u3);
	r = hpn_gpus_resolve(nd->proc, nd->sys, (const char(*)[HPN_GPU_ID_MAX])ids, 5, &g, &err);
	CHECK_INT_EQ(r, 0);
	CHECK_INT_EQ(g.n, 1);
	CHECK_INT_EQ(g.n_unknown, 0);
	CHECK_STR_EQ(g.v[0].id, ids[0]);

	/* PCI order whatever the IDs' order; unknown ones last, in their order. */
	snprintf(ids[0], HPN_GPU_ID_MAX, "%s", "GPU-00000000-1111-4222-8333-444444444444");
	snprintf(ids[1], HPN_GPU_ID_MAX, "%s", u5);
	snprintf(ids[2], HPN_GPU_ID_MAX, "MIG-%s", "7f4e1c2a-9b3d-5e6f-8a1b-2c3d4e5f6a7b");
	snprintf(ids[3], HPN_GPU_ID_MAX, "%s", u1);
	snprintf(ids[4], HPN_GPU_ID_MAX, "gpu-5");  /* GPU5 again, by its DRA name */
	snprintf(ids[5], HPN_GPU_ID_MAX, "gpu-33"); /* no minor 33 (nor is it minor 3) */
	r = hpn_gpus_resolve(nd->proc, nd->sys, (const char(*)[HPN_GPU_ID_MAX])ids, 6, &g, &err);
	CHECK_INT_EQ(r, 0);
	CHECK_INT_EQ(g.n, 5);
	CHECK_INT_EQ(g.n_unknown, 3);
	CHECK_STR_EQ(g.v[0].pci, "0000:05:00.0");
	CHECK_STR_EQ(g.v[0].id, u1);
	CHECK_STR_EQ(g.v[1].pci, "0000:85:00.0");
	CHECK_STR_EQ(g.v[1].id, u5);
	CHECK_STR_EQ(g.v[2].id, ids[0]);
	CHECK_STR_EQ(g.v[3].id, ids[2]);
	CHECK_STR_EQ(g.v[4].id, "gpu-33");
	for (size_t i = 2; i < 5; i++) {
		CHECK_STR_EQ(g.v[i].pci, "");
		CHECK_STR_EQ(g.v[i].pos.path, "");
	}

	/* All eight, given backwards: PCI order comes back. */
	for (size_t k = 0; k < nd->n_gpus; k++)
		snprintf(ids[k], HPN_GPU_ID_MAX, "%s", nd->gpu_uuid[nd->n_gpus - 1 - k]);
	r = hpn_gpus_resolve(nd->proc, nd->sys, (const char(*)[HPN_GPU_ID_MAX])ids, nd->n_gpus, &g,
			     &err);
	CHECK_INT_EQ(r, 0);
	CHECK_INT_EQ(g.n, nd->n_gpus);
	for (size_t k = 0; k < g.n && k < nd->n_gpus; k++)
		CHECK_STR_EQ(g.v[k].pci, nd->gpu_pci[k]);

	/* Bad IDs: code 4, naming the ID. */
	static const char *const bad[] = { "GPU-a4c7f219 86de", "", "gpu-3;rm", "gpu-\xc3\xa9" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct hpn_err e = { 0 };

		snprintf(ids[0], HPN_GPU_ID_MAX, "%s", u1);
		snprintf(ids[1], HPN_GPU_ID_MAX, "%s", bad[i]);
		CHECK(!hpn_gpu_id_valid(bad[i]));
		r = hpn_gpus_resolve(nd->proc, nd->sys, (const char(*)[HPN_GPU_ID_MAX])ids, 2, &g,
				     &e);
		CHECK(r < 0);
		CHECK_INT_EQ(e.code, HPN_E_INVALID_ENV);
	}
	/* Over-long: HPN_GPU_ID_MAX - 1 bytes of ID are the most, and no NUL at all is bad. */
	{
		struct hpn_err e = { 0 };

		memset(ids[0], 'a', HPN_GPU_ID_MAX - 1);
		ids[0][HPN_GPU_ID_MAX - 1] = '\0';
		CHECK(hpn_gpu_id_valid(ids[0]));
		memset(ids[0], 'a', HPN_GPU_ID_MAX);
		r = hpn_gpus_resolve(nd->proc, nd->sys, (const char(*)[HPN_GPU_ID_MAX])ids, 1, &g,
				     &e);
		CHECK(r < 0);
		CHECK_INT_EQ(e.code, HPN_E_INVALID_ENV);
	}
	/*
	 * An ID with no NUL in its HPN_GPU_ID_MAX bytes, and nothing after it:
	 * bad, and read no further than its bytes (memcheck.unit-gpu would
	 * show a read past them).
	 */
	{
		char(*one)[HPN_GPU_ID_MAX] = malloc(sizeof(*one));
		struct hpn_err e = { 0 };

		if (one) {
			memset(one[0], 'a', sizeof(*one));
			r = hpn_gpus_resolve(nd->proc, nd->sys, (const char(*)[HPN_GPU_ID_MAX])one,
					     1, &g, &e);
			CHECK(r < 0);
			CHECK_INT_EQ(e.code, HPN_E_INVALID_ENV);
			free(one);
		}
	}
	CHECK(hpn_gpu_id_valid(u1));
	CHECK(hpn_gpu_id_valid("MIG-GPU-a4c7f219-86de-4d13-9b0e-7f28c5e1a934/1/0"));

	/* No procfs (no NVIDIA driver here): every GPU unknown, not an error. */
	snprintf(ids[0], HPN_GPU_ID_MAX, "%s", u1);
	snprintf(ids[1], HPN_GPU_ID_MAX, "gpu-3");
	memset(&err, 0, sizeof(err));
	r = hpn_gpus_resolve("/nonexistent-hpn-proc", nd->sys, (const char(*)[HPN_GPU_ID_MAX])ids,
			     2, &g, &err);
	CHECK_INT_EQ(r, 0);
	CHECK_INT_EQ(g.n, 2);
	CHECK_INT_EQ(g.n_unknown, 2);
	CHECK_STR_EQ(g.v[0].pci, "");
	CHECK_STR_EQ(g.v[1].pci, "");
	CHECK_INT_EQ(err.code, 0);
}

/* (iv) Pods one after the other on one switch's GPUs, each taking its NICs out of the pool. */
static void test_contention(struct node *nd)
{
	static struct hpn_gpus g;
	struct hpn_gpu_pick p[2];
	size_t first;

	all_free(nd);
	/* Pod A: GPU0. */
	CHECK_INT_EQ(resolve_mask(nd, 1u << 0, &g), 0);
	CHECK_INT_EQ(hpn_gpu_assign(&g, nd->cand, nd->n_nics, 1, p), 0);
	CHECK_INT_EQ(p[0].dist, HPN_DIST_PIX);
	CHECK_INT_EQ(p[0].best, HPN_DIST_PIX);
	first = p[0].nic;
	nd->cand[p[0].nic].free = false;
	/* Pod B: GPU1, on GPU0's switch: its other NIC. */
	CHECK_INT_EQ(resolve_mask(nd, 1u << 1, &g), 0);
	CHECK_INT_EQ(hpn_gpu_assign(&g, nd->cand, nd->n_nics, 1, p), 0);
	CHECK_INT_EQ(p[0].dist, HPN_DIST_PIX);
	CHECK_INT_EQ(p[0].best, HPN_DIST_PIX);
	CHECK_INT_NE(p[0].nic, first);
	nd->cand[p[0].nic].free = false;
	/* Pod C: GPU0 and GPU1 again: the switch has no NIC left; its socket's are next. */
	CHECK_INT_EQ(resolve_mask(nd, 3u, &g), 0);
	CHECK_INT_EQ(hpn_gpu_assign(&g, nd->cand, nd->n_nics, 2, p), 0);
	for (size_t i = 0; i < 2; i++) {
		CHECK_INT_EQ(p[i].dist, HPN_DIST_PHB);
		CHECK_INT_EQ(p[i].best, HPN_DIST_PHB);
		CHECK(nd->cand[p[i].nic].free);
	}
	CHECK_INT_NE(p[0].nic, p[1].nic);
	all_free(nd);
}

/* (v) The kubelet's allocation judged: far NICs while near ones are free. */
static void test_pair(struct node *nd)
{
	static struct hpn_gpus g;
	struct hpn_gpu_pick p[2];

	all_free(nd);
	/* GPU0 given mlx5_5 (the other socket's) while mlx5_1, on its switch, is free. */
	CHECK_INT_EQ(resolve_mask(nd, 1u << 0, &g), 0);
	memset(p, 0, sizeof(p));
	p[0].nic = cand_of(nd, "mlx5_5");
	hpn_gpu_pair(&g, nd->cand, nd->n_nics, 1, p);
	CHECK_INT_EQ(p[0].nic, cand_of(nd, "mlx5_5"));
	CHECK_INT_EQ(p[0].gpu, 0);
	CHECK_INT_EQ(p[0].dist, HPN_DIST_SYS);
	CHECK_INT_EQ(p[0].best, HPN_DIST_PIX);
	CHECK(p[0].dist > p[0].best);
	/* The same with the given NIC already out of the pool (the claim made). */
	nd->cand[cand_of(nd, "mlx5_5")].free = false;
	hpn_gpu_pair(&g, nd->cand, nd->n_nics, 1, p);
	CHECK_INT_EQ(p[0].dist, HPN_DIST_SYS);
	CHECK_INT_EQ(p[0].best, HPN_DIST_PIX);
	all_free(nd);
	/* A good allocation: dist == best. */
	p[0].nic = cand_of(nd, "mlx5_2");
	hpn_gpu_pair(&g, nd->cand, nd->n_nics, 1, p);
	CHECK_INT_EQ(p[0].dist, HPN_DIST_PIX);
	CHECK_INT_EQ(p[0].best, HPN_DIST_PIX);
	/* GPU0 and GPU4 given GPU4's NIC first: each NIC goes to the GPU it is nearest to. */
	CHECK_INT_EQ(resolve_mask(nd, (1u << 0) | (1u << 4), &g), 0);
	p[0].nic = cand_of(nd, "mlx5_5");
	p[1].nic = cand_of(nd, "mlx5_1");
	hpn_gpu_pair(&g, nd->cand, nd->n_nics, 2, p);
	CHECK_STR_EQ(g.v[p[0].gpu].pci, nd->gpu_pci[4]);
	CHECK_STR_EQ(g.v[p[1].gpu].pci, nd->gpu_pci[0]);
	CHECK_INT_EQ(p[0].dist, HPN_DIST_PIX);
	CHECK_INT_EQ(p[1].dist, HPN_DIST_PIX);
	CHECK_INT_EQ(p[0].best, HPN_DIST_PIX);
	CHECK_INT_EQ(p[1].best, HPN_DIST_PIX);
}

/* (vi) Fewer NICs than GPUs spread over them; more go round. (vii) Too few: -ENOSPC. */
static void test_counts(struct node *nd)
{
	static struct hpn_gpus g;
	struct hpn_gpu_pick p[MAX_NICS];
	size_t cls[HPN_DIST_UNKNOWN + 1] = { 0 };
	bool pix[MAX_GPUS] = { false };

	all_free(nd);
	/* 2 NICs for 8 GPUs: picks serve GPU 0 * 8 / 2 = 0 and 1 * 8 / 2 = 4. */
	CHECK_INT_EQ(resolve_mask(nd, 0xff, &g), 0);
	CHECK_INT_EQ(hpn_gpu_assign(&g, nd->cand, nd->n_nics, 2, p), 0);
	CHECK_INT_EQ(p[0].gpu, 0);
	CHECK_INT_EQ(p[1].gpu, 4);
	CHECK_INT_EQ(p[0].dist, HPN_DIST_PIX);
	CHECK_INT_EQ(p[1].dist, HPN_DIST_PIX);
	CHECK_INT_NE(p[0].nic, p[1].nic);

	/*
	 * 8 NICs for GPU0-3 (socket 0: four NICs on their switches, the
	 * frontend on another host bridge, four on the other socket): pick i
	 * serves GPU i mod 4; the four PIX NICs go one to each GPU, then the
	 * frontend (PHB), then three of the other socket's (SYS).
	 */
	CHECK_INT_EQ(resolve_mask(nd, 0x0f, &g), 0);
	CHECK_INT_EQ(hpn_gpu_assign(&g, nd->cand, nd->n_nics, 8, p), 0);
	for (size_t i = 0; i < 8; i++) {
		bool dup = false;

		CHECK_INT_EQ(p[i].gpu, i % 4);
		CHECK(p[i].dist >= p[i].best);
		if (p[i].dist <= HPN_DIST_UNKNOWN)
			cls[p[i].dist]++;
		if (p[i].dist == HPN_DIST_PIX && p[i].gpu < MAX_GPUS)
			pix[p[i].gpu] = true;
		for (size_t j = 0; j < i; j++)
			dup |= p[j].nic == p[i].nic;
		CHECK(!dup);
	}
	CHECK_INT_EQ(cls[HPN_DIST_PIX], 4);
	CHECK_INT_EQ(cls[HPN_DIST_PHB], 1);
	CHECK_INT_EQ(cls[HPN_DIST_SYS], 3);
	for (size_t k = 0; k < 4; k++)
		CHECK(pix[k]);

	/* (vii) More than the pool holds, or than it has free. */
	CHECK_INT_EQ(resolve_mask(nd, 1u, &g), 0);
	CHECK_INT_EQ(hpn_gpu_assign(&g, nd->cand, nd->n_nics, nd->n_nics + 1, p), -ENOSPC);
	for (size_t i = 1; i < nd->n_nics; i++)
		nd->cand[i].free = false;
	CHECK_INT_EQ(hpn_gpu_assign(&g, nd->cand, nd->n_nics, 2, p), -ENOSPC);
	CHECK_INT_EQ(hpn_gpu_assign(&g, nd->cand, nd->n_nics, 1, p), 0);
	CHECK_INT_EQ(p[0].nic, 0);
	all_free(nd);

	/* No GPUs: the first n free in candidate order, distance unknown. */
	memset(&g, 0, sizeof(g));
	nd->cand[0].free = false;
	CHECK_INT_EQ(hpn_gpu_assign(&g, nd->cand, nd->n_nics, 2, p), 0);
	CHECK_INT_EQ(p[0].nic, 1);
	CHECK_INT_EQ(p[1].nic, 2);
	CHECK_INT_EQ(p[0].dist, HPN_DIST_UNKNOWN);
	CHECK_INT_EQ(p[1].dist, HPN_DIST_UNKNOWN);
	all_free(nd);
}

int main(void)
{
	static struct node hgx, a800, vm, vme;

	tmpdir_make(scratch, sizeof(scratch), "gpu");
	node_load(&hgx, "hgx-h100");
	node_load(&a800, "a800-1nic");
	node_load(&vm, "vm-flat");
	node_load(&vme, "vm-erdma");
	CHECK_INT_EQ(vme.n_gpus, 8);
	CHECK_INT_EQ(vme.n_nics, 2);
	CHECK_INT_EQ(hgx.n_gpus, 8);
	CHECK_INT_EQ(hgx.n_nics, 9);
	CHECK_INT_EQ(a800.n_gpus, 8);
	CHECK_INT_EQ(a800.n_nics, 9);
	CHECK_INT_EQ(vm.n_gpus, 8);
	CHECK_INT_EQ(vm.n_nics, 8);

	test_dist_rules();
	test_matrix(&hgx);
	test_matrix(&a800);
	test_matrix(&vm);
	test_matrix(&vme);
	test_erdma(&vme);
	test_netdev_pos(&vm);
	test_resolve(&hgx);
	test_all_shapes(&hgx, true);
	test_all_shapes(&a800, true);
	test_all_shapes(&vm, false);
	test_contention(&hgx);
	test_pair(&hgx);
	test_counts(&hgx);

	tmpdir_rm(scratch);
	return check_done();
}
