// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for what lib/cdi.c and lib/store.c write as JSON when memory
 * runs out: cJSON's allocator (cJSON_InitHooks) fails its N-th allocation,
 * for N = 0, 1, 2, ... until a run needs no more than N. Each CDI render,
 * CDI write and journal write either succeeds with exactly the output of a
 * run with memory, or fails with -ENOMEM (the error set) having written
 * nothing: no spec without its hook, no journal DEL could not undo.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi.h"
#include "check.h"
#include "store.h"
#include "tmpdir.h"
#include "util.h"

#define MAX_ALLOCS 10000 /* a bound on the loop: far above what one render takes */

static char tmp[64]; /* "/tmp/hpn-unit-json_oom-XXXXXX" */

/* cJSON's allocations: how many, and which one fails (-1: none). */
static long n_allocs, fail_at = -1;

static void *oom_malloc(size_t n)
{
	if (n_allocs++ == fail_at)
		return NULL;
	return malloc(n);
}

static void oom_arm(long n)
{
	n_allocs = 0;
	fail_at = n;
}

/* Whether the armed failure happened in the call just made. */
static bool oom_hit(void)
{
	return fail_at >= 0 && n_allocs > fail_at;
}

/* The file's contents (malloc'd), or NULL when it cannot be read. */
static char *slurp(const char *dir, const char *name)
{
	char path[PATH_MAX];
	FILE *f;
	char *buf;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	buf = calloc(1, 1 << 20);
	n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
	fclose(f);
	if (buf)
		buf[n] = '\0';
	return buf;
}

/* Entries of dir but "." and "..": what a failed write must not have left. */
static int n_entries(const char *dir)
{
	DIR *d = opendir(dir);
	const struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* A NIC's device with every part of the spec: env of both kinds, three nodes, the hook. */
static void cdi_dev(struct hpn_cdi_dev *d)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->id, sizeof(d->id), "0000:af:00.1");
	snprintf(d->ibdev, sizeof(d->ibdev), "mlx5_1");
	d->nodes[0] = (struct hpn_cdi_node){ .name = "uverbs1",
					     .host_path = "/dev/infiniband/uverbs1",
					     .major = 231,
					     .minor = 193 };
	d->nodes[1] = (struct hpn_cdi_node){
		.name = "umad1", .host_path = "/dev/infiniband/umad1", .major = 231, .minor = 1
	};
	d->nodes[2] = (struct hpn_cdi_node){
		.name = "rdma_cm", .host_path = "/dev/infiniband/rdma_cm", .major = 10, .minor = 58
	};
	d->n_nodes = 3;
	snprintf(d->hook.path, sizeof(d->hook.path), "/opt/cni/bin/hpn-rdma");
	snprintf(d->hook.state_dir, sizeof(d->hook.state_dir), "/run/hpn-rdma/state");
	snprintf(d->hook.network, sizeof(d->hook.network), "hpn-net");
}

static void test_cdi(void)
{
	struct hpn_cdi_dev d;
	char dir[PATH_MAX], file[HPN_CDI_FILE_MAX], *ref, *text;
	long n;

	cdi_dev(&d);
	CHECK_INT_EQ(hpn_cdi_file(HPN_CDI_POD, d.id, file), 0);
	oom_arm(-1);
	ref = hpn_cdi_render(&d);
	CHECK(ref != NULL);
	if (!ref)
		return;
	/* The reference is whole: the hook is its last part. */
	CHECK_STR_HAS(ref, "\"createRuntime\"");
	CHECK_STR_HAS(ref, "\"cdi-hook\"");
	CHECK_STR_HAS(ref, "HPN_RDMA_UVERBS_0000_AF_00_1=/dev/infiniband/uverbs1");

	/* The render alone: NULL, or the whole text. */
	for (n = 0; n < MAX_ALLOCS; n++) {
		bool hit;

		oom_arm(n);
		text = hpn_cdi_render(&d);
		hit = oom_hit();
		if (text && strcmp(text, ref))
			fprintf(stderr, "\tallocation %ld failed, the render returned:\n%s", n,
				text);
		if (text)
			CHECK_STR_EQ(text, ref);
		free(text);
		if (!hit) {
			CHECK(text != NULL);
			break;
		}
	}
	CHECK(n > 10 && n < MAX_ALLOCS);
	printf("CDI render: allocations 0-%ld each failed in turn\n", n - 1);

	/* The write: -ENOMEM and an empty directory, or 1 and the whole spec. */
	for (n = 0; n < MAX_ALLOCS; n++) {
		struct hpn_err err = { 0 };
		bool hit;
		int r;

		snprintf(dir, sizeof(dir), "%s/cdi-%ld", tmp, n);
		CHECK_INT_EQ(mkdir(dir, 0755), 0);
		oom_arm(n);
		r = hpn_cdi_write(dir, HPN_CDI_POD, &d, &err);
		hit = oom_hit();
		oom_arm(-1);
		text = slurp(dir, file);
		if (r < 0 ? r != -ENOMEM || text : !text || strcmp(text, ref))
			fprintf(stderr, "\tallocation %ld failed, the write returned %d:\n%s", n, r,
				text ? text : "(no file)\n");
		if (r >= 0) {
			CHECK_INT_EQ(r, 1);
			CHECK_STR_EQ(text, ref);
		} else {
			CHECK_INT_EQ(r, -ENOMEM);
			CHECK_INT_EQ(err.code, HPN_E_INTERNAL);
			CHECK_STR_HAS(err.msg, "out of memory");
			CHECK_INT_EQ(n_entries(dir), 0);
		}
		free(text);
		if (!hit) {
			CHECK_INT_EQ(r, 1);
			break;
		}
	}
	CHECK(n > 10 && n < MAX_ALLOCS);
	printf("CDI write: allocations 0-%ld each failed in turn\n", n - 1);
	oom_arm(-1);
	free(ref);
}

/* A journal with every field the writer knows: two NICs, one of them a child. */
static void full_journal(struct hpn_journal *j)
{
	static const uint8_t mac[HPN_MAC_LEN] = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 };
	struct hpn_journal_nic *n;

	hpn_journal_init(j);
	j->phase = HPN_PHASE_ATTACHED;
	j->container_id = strdup("c0ffee0123456789");
	snprintf(j->cni_ifname, sizeof(j->cni_ifname), "eth1");
	j->netns = strdup("/var/run/netns/pod1");
	j->owner_pid = 4242;
	j->owner_start = 123456789ULL;
	j->hints_dir = strdup("/run/hpn-rdma/pods");
	snprintf(j->hints_key, sizeof(j->hints_key), "team-a_trainer-0");
	j->devices_dir = strdup("/run/hpn-rdma/devices");
	j->cdi_dir = strdup("/var/run/cdi");
	j->result = strdup("{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"hpn0\","
			   "\"sandbox\":\"/n\"}],\"ips\":[{\"address\":\"10.0.0.2/24\","
			   "\"interface\":0}]}");
	hpn_journal_set_pod(j, "team-a", "trainer-0", "6f1c2d9e-0b7a-4c3e-9d55-2a61f0c4b1aa");

	n = &j->nics[0];
	memset(n, 0, sizeof(*n));
	n->kind = HPN_NIC_MOVED;
	snprintf(n->pod_ifname, sizeof(n->pod_ifname), "hpn0");
	snprintf(n->host.name, sizeof(n->host.name), "ens1f0np0");
	n->host.ifindex = 7;
	n->host.mtu = 9000;
	n->host.up = true;
	memcpy(n->host.mac, mac, sizeof(mac));
	n->host.has_mac = true;
	memcpy(n->host.perm_mac, mac, sizeof(mac));
	n->host.has_perm_mac = true;
	snprintf(n->host.kind, sizeof(n->host.kind), "veth");
	snprintf(n->host.altnames[0], sizeof(n->host.altnames[0]), "enp175s0f0np0");
	snprintf(n->host.altnames[1], sizeof(n->host.altnames[1]), "rail0");
	n->host.n_altnames = 2;
	snprintf(n->pci, sizeof(n->pci), "0000:af:00.0");
	n->pod_ifindex = 3;
	snprintf(n->gpu_id, sizeof(n->gpu_id), "GPU-0");
	snprintf(n->gpu_pci, sizeof(n->gpu_pci), "0000:b0:00.0");
	snprintf(n->gpu_dist, sizeof(n->gpu_dist), "PIX");
	snprintf(n->gpu_best, sizeof(n->gpu_best), "PIX");
	snprintf(n->rdma.name, sizeof(n->rdma.name), HPN_RDMA_SOFT_PREFIX "hpn0");
	snprintf(n->rdma.netdev, sizeof(n->rdma.netdev), "hpn0");
	snprintf(n->rdma.soft_type, sizeof(n->rdma.soft_type), "rxe");
	n->rdma.created = true;
	n->rdma.nodes[0] =
		(struct hpn_journal_node){ .name = "uverbs3", .major = 231, .minor = 195 };
	n->rdma.nodes[1] = (struct hpn_journal_node){ .name = "umad3", .major = 231, .minor = 3 };
	n->rdma.n_nodes = 2;
	CHECK_INT_EQ(hpn_cdi_file(HPN_CDI_POD, "c0ffee-hpn0", n->rdma.cdi_spec), 0);
	n->rail_table = 1001;
	n->rail_priority = 1001;

	n = &j->nics[1];
	memset(n, 0, sizeof(*n));
	n->kind = HPN_NIC_CHILD;
	snprintf(n->pod_ifname, sizeof(n->pod_ifname), "hpn1");
	snprintf(n->host.name, sizeof(n->host.name), "ens1f1np1");
	n->host.ifindex = 8;
	n->host.mtu = 1500;
	snprintf(n->child_kind, sizeof(n->child_kind), "macvlan");
	memcpy(n->child_mac, mac, sizeof(mac));
	n->has_child_mac = true;
	j->n_nics = 2;
}

static void test_journal(void)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_journal j, back;
	struct hpn_err err = { 0 };
	char state[PATH_MAX], net[PATH_MAX + 16], path[PATH_MAX + 32], *ref;
	long n;

	full_journal(&j);
	snprintf(state, sizeof(state), "%s/state", tmp);
	snprintf(net, sizeof(net), "%s/net1", state);
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	oom_arm(-1);
	CHECK_INT_EQ(hpn_journal_write(&st, "ref", &j, &err), 0);
	ref = slurp(net, "ref");
	CHECK(ref != NULL);
	/* The reference is whole: it reads back with both NICs and its result. */
	hpn_journal_init(&back);
	CHECK_INT_EQ(hpn_journal_read(&st, "ref", &back, &err), 0);
	if (err.code)
		fprintf(stderr, "\t%s\n", err.msg);
	CHECK_INT_EQ(back.n_nics, 2);
	CHECK(back.result != NULL);
	CHECK_INT_EQ(back.nics[0].rdma.n_nodes, 2);
	CHECK_INT_EQ(back.nics[0].rail_table, 1001);
	hpn_journal_free(&back);
	snprintf(path, sizeof(path), "%s/ref", net);
	CHECK_INT_EQ(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/k", net);

	/* The journal: -ENOMEM and no file (nor temp file), or 0 and the whole journal. */
	for (n = 0; ref && n < MAX_ALLOCS; n++) {
		char *text;
		bool hit;
		int r;

		memset(&err, 0, sizeof(err));
		oom_arm(n);
		r = hpn_journal_write(&st, "k", &j, &err);
		hit = oom_hit();
		oom_arm(-1);
		text = slurp(net, "k");
		if (r < 0 ? r != -ENOMEM || text : !text || strcmp(text, ref))
			fprintf(stderr, "\tallocation %ld failed, the write returned %d:\n%s\n", n,
				r, text ? text : "(no file)");
		if (r >= 0) {
			CHECK_INT_EQ(r, 0);
			CHECK_STR_EQ(text, ref);
			CHECK_INT_EQ(unlink(path), 0);
		} else {
			CHECK_INT_EQ(r, -ENOMEM);
			CHECK_INT_EQ(err.code, HPN_E_INTERNAL);
			CHECK_STR_HAS(err.msg, "out of memory");
			CHECK_INT_EQ(n_entries(net), 0);
			if (text)
				unlink(path);
		}
		free(text);
		if (!hit) {
			CHECK_INT_EQ(r, 0);
			break;
		}
	}
	CHECK(n > 10 && n < MAX_ALLOCS);
	printf("journal write: allocations 0-%ld each failed in turn\n", n - 1);
	free(ref);
	hpn_journal_free(&j);
	hpn_store_close(&st);
}

int main(void)
{
	cJSON_Hooks hooks = { .malloc_fn = oom_malloc, .free_fn = free };

	tmpdir_make(tmp, sizeof(tmp), "json_oom");
	cJSON_InitHooks(&hooks);
	test_cdi();
	test_journal();
	cJSON_InitHooks(NULL);
	if (tmpdir_rm(tmp) < 0)
		perror("remove scratch directory");
	return check_done();
}
