// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/nccl.c (the hints: profiles, rendering, NCCL's file
 * rules, the file's safe writing and removal) and for the config fields that
 * feed it (nccl, podSelector, the pod annotations).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "conf.h"
#include "nccl.h"
#include "result.h"
#include "tmpdir.h"

/* The hints render from what a result binds (hpn_result_bound), as ADD's do. */
static int nccl_render(const struct hpn_nccl_conf *nc, const struct hpn_nccl_profile *p,
		       const struct hpn_result *res, struct hpn_vars *v, struct hpn_err *err)
{
	struct hpn_bound_nic b[HPN_MAX_RDMA];

	return hpn_nccl_render(nc, p, b, hpn_result_bound(res, b, HPN_MAX_RDMA), v, err);
}

static char *nccl_format(const struct hpn_vars *v, const struct hpn_nccl_owner *o,
			 const struct hpn_result *res)
{
	struct hpn_bound_nic b[HPN_MAX_RDMA];

	return hpn_nccl_format(v, o, NULL, b, hpn_result_bound(res, b, HPN_MAX_RDMA));
}

static char tmp[64];

/* A result with n bound RoCE devices on interfaces hpn0..: name mlx5_<2+i>, port 1. */
static struct hpn_result *bound(size_t n, const int *gids, const char *driver,
				const char *transport, const char *addr)
{
	struct hpn_result *res = hpn_result_new();

	for (size_t i = 0; i < n; i++) {
		char name[24], dev[64];
		struct hpn_iface ifc = { .name = name };
		struct hpn_rdma_info *ri = &res->rdma[res->n_rdma++];

		snprintf(name, sizeof(name), "hpn%zu", i);
		snprintf(dev, sizeof(dev), "%s_%zu", !strcmp(driver, "mlx5") ? "mlx5" : driver,
			 2 + i);
		hpn_result_add_iface(res, &ifc);
		*ri = (struct hpn_rdma_info){ .interface = (int)i, .bound = true, .port = 1 };
		ri->gid_index = gids[i];
		snprintf(ri->device, sizeof(ri->device), "%s", dev);
		snprintf(ri->driver, sizeof(ri->driver), "%s", driver);
		snprintf(ri->transport, sizeof(ri->transport), "%s", transport);
		snprintf(ri->link_layer, sizeof(ri->link_layer), "%s",
			 !strcmp(transport, "ib") ? "InfiniBand" : "Ethernet");
	}
	if (addr) {
		res->ips[0] = (struct hpn_ipcfg){ .address = strdup(addr), .interface = 0 };
		res->n_ips = 1;
	}
	return res;
}

static struct hpn_nccl_conf *nconf(void)
{
	static struct hpn_nccl_conf nc;

	hpn_nccl_conf_free(&nc);
	memset(&nc, 0, sizeof(nc));
	nc.enabled = true;
	nc.dir = strdup("/run/hpn-rdma/pods");
	return &nc;
}

/* Renders res with the profile of model; the vars as "K=V;K=V", or "ERR <code>: msg". */
static char *render(const struct hpn_nccl_conf *nc, const char *model, const struct hpn_result *res)
{
	struct hpn_vars v = { 0 };
	struct hpn_err err = { 0 };
	char *out = calloc(1, 8192);
	size_t off = 0;

	if (nccl_render(nc, hpn_nccl_profile(nc, model), res, &v, &err) < 0) {
		snprintf(out, 8192, "ERR %d: %s", err.code, err.msg);
		return out;
	}
	for (size_t i = 0; i < v.n; i++)
		off += (size_t)snprintf(out + off, 8192 - off, "%s%s=%s", i ? ";" : "", v.v[i].key,
					v.v[i].value);
	hpn_vars_free(&v);
	return out;
}

#define CHECK_RENDER(nc, model, res, want)                                                         \
	do {                                                                                       \
		char *_got = render((nc), (model), (res));                                         \
		CHECK_STR_EQ(_got, (want));                                                        \
		free(_got);                                                                        \
	} while (0)

static void test_names(void)
{
	char longname[HPN_NCCL_NAME_MAX + 2], longval[HPN_NCCL_VALUE_MAX + 2];

	CHECK(hpn_nccl_valid_name("NCCL_DEBUG"));
	CHECK(hpn_nccl_valid_name("NCCL_IB_TIMEOUT_2"));
	CHECK(!hpn_nccl_valid_name("NCCL_"));
	CHECK(!hpn_nccl_valid_name("nccl_debug"));
	CHECK(!hpn_nccl_valid_name("NCCL_DE BUG"));
	CHECK(!hpn_nccl_valid_name("NCCL_A=B"));
	CHECK(!hpn_nccl_valid_name("LD_PRELOAD"));
	CHECK(!hpn_nccl_valid_name(NULL));
	memset(longname, 'A', sizeof(longname));
	memcpy(longname, "NCCL_", 5);
	longname[HPN_NCCL_NAME_MAX] = '\0';
	CHECK(hpn_nccl_valid_name(longname));
	longname[HPN_NCCL_NAME_MAX] = 'A';
	longname[HPN_NCCL_NAME_MAX + 1] = '\0';
	CHECK(!hpn_nccl_valid_name(longname));

	CHECK(hpn_nccl_valid_value(""));
	CHECK(hpn_nccl_valid_value("=mlx5_2:1,mlx5_3:1"));
	CHECK(!hpn_nccl_valid_value("a\nNCCL_IB_HCA=evil"));
	CHECK(!hpn_nccl_valid_value("a\r"));
	CHECK(!hpn_nccl_valid_value("caf\xc3\xa9"));
	memset(longval, 'x', sizeof(longval));
	longval[HPN_NCCL_VALUE_MAX] = '\0';
	CHECK(hpn_nccl_valid_value(longval));
	longval[HPN_NCCL_VALUE_MAX] = 'x';
	longval[HPN_NCCL_VALUE_MAX + 1] = '\0';
	CHECK(!hpn_nccl_valid_value(longval));

	CHECK(hpn_nccl_computed_name("NCCL_IB_HCA"));
	CHECK(hpn_nccl_computed_name("NCCL_SOCKET_IFNAME"));
	CHECK(!hpn_nccl_computed_name("NCCL_DEBUG"));

	{
		char key[HPN_NCCL_KEY_MAX], cid[1001];

		hpn_nccl_key("uid-1", "ctr", key);
		CHECK_STR_EQ(key, "uid-1");
		hpn_nccl_key(NULL, "ctr", key);
		CHECK_STR_EQ(key, "ctr");
		memset(cid, 'c', 1000);
		cid[1000] = '\0';
		hpn_nccl_key(NULL, cid, key);
		CHECK(hpn_nccl_valid_key(key));
		CHECK_INT_EQ(key[100], '-');
		CHECK_INT_EQ(strlen(key), 117);
		cid[999] = 'd';
		{
			char key2[HPN_NCCL_KEY_MAX];

			hpn_nccl_key(NULL, cid, key2);
			CHECK(strcmp(key, key2) != 0);
		}
	}
	CHECK(hpn_nccl_valid_key("6f1c2a3e-8d4b-4c5a-9e7f-0a1b2c3d4e5f"));
	CHECK(hpn_nccl_valid_key("ctr.1_a"));
	CHECK(!hpn_nccl_valid_key(".."));
	CHECK(!hpn_nccl_valid_key("../etc"));
	CHECK(!hpn_nccl_valid_key("a/b"));
	CHECK(!hpn_nccl_valid_key(""));
	CHECK(!hpn_nccl_valid_key(".hidden"));
	memset(longval, 'a', HPN_NCCL_KEY_MAX);
	longval[HPN_NCCL_KEY_MAX] = '\0';
	CHECK(!hpn_nccl_valid_key(longval));
	longval[HPN_NCCL_KEY_MAX - 1] = '\0';
	CHECK(hpn_nccl_valid_key(longval));
}

/*
 * The links of the kubelet's NICs: names, the paths the CDI specs mount,
 * and the links themselves (made, idempotent, another key's replaced, the
 * unlink of a key that is not the link's leaving it, anything but a link
 * left alone, a planted "nic" symlink never followed).
 */
static void test_links(void)
{
	static const char *const good[] = {
		"0000:af:00.1", "pool3", "a", "eth_0.1-x", "a@b", "..."
	};
	static const char *const bad[] = { "",	   ".",	  "..",	  "a/b",
					   "../x", "a b", "a\nb", "caf\xc3\xa9" };
	char id[HPN_NIC_ID_MAX + 1], key[HPN_NCCL_KEY_MAX], dir[128], path[512], got[256];
	struct hpn_err err = { 0 };
	struct stat st;
	mode_t old;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK(hpn_nccl_valid_link(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!hpn_nccl_valid_link(bad[i]));
	memset(id, 'a', HPN_NIC_ID_MAX - 1);
	id[HPN_NIC_ID_MAX - 1] = '\0';
	CHECK(hpn_nccl_valid_link(id));
	id[HPN_NIC_ID_MAX - 1] = 'a';
	id[HPN_NIC_ID_MAX] = '\0';
	CHECK(!hpn_nccl_valid_link(id));

	/* "nic" is the links' directory: never a key; a container named so is hashed. */
	CHECK(!hpn_nccl_valid_key("nic"));
	CHECK(hpn_nccl_valid_key("nic0"));
	hpn_nccl_key(NULL, "nic", key);
	CHECK(strcmp(key, "nic") != 0 && hpn_nccl_valid_key(key));
	CHECK(!strncmp(key, "nic-", 4));

	CHECK_INT_EQ(hpn_nccl_file_path("/run/p", "uid-1", path, sizeof(path)), 0);
	CHECK_STR_EQ(path, "/run/p/uid-1/nccl.conf");
	CHECK_INT_EQ(hpn_nccl_file_path("/run/p", "../x", path, sizeof(path)), -EINVAL);
	CHECK_INT_EQ(hpn_nccl_file_path("/run/p", "nic", path, sizeof(path)), -EINVAL);
	CHECK(hpn_nccl_file_path("/run/p", "uid-1", path, 12) < 0);
	CHECK_INT_EQ(hpn_nccl_link_file_path("/run/p", "0000:af:00.1", path, sizeof(path)), 0);
	CHECK_STR_EQ(path, "/run/p/nic/0000:af:00.1/nccl.conf");
	CHECK_INT_EQ(hpn_nccl_link_file_path("/run/p", "..", path, sizeof(path)), -EINVAL);
	CHECK_INT_EQ(hpn_nccl_link_file_path("/run/p", "a/b", path, sizeof(path)), -EINVAL);

	/* Made 0755 whatever the umask, relative, and it resolves to the pod's file. */
	snprintf(dir, sizeof(dir), "%s/links", tmp);
	CHECK_INT_EQ(hpn_nccl_link_read(dir, "0000:af:00.1", "uid-1", NULL, 0), -ENOENT);
	CHECK_INT_EQ(hpn_nccl_unlink(dir, "0000:af:00.1", "uid-1", &err), 0);
	CHECK_INT_EQ(hpn_nccl_write(dir, "uid-1", "NCCL_IB_DISABLE=1\n", &err), 0);
	old = umask(077);
	CHECK_INT_EQ(hpn_nccl_link(dir, "0000:af:00.1", "uid-1", &err), 0);
	umask(old);
	snprintf(path, sizeof(path), "%s/nic", dir);
	CHECK(lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0755);
	snprintf(path, sizeof(path), "%s/nic/0000:af:00.1", dir);
	CHECK(readlink(path, got, sizeof(got)) == 8 && !memcmp(got, "../uid-1", 8));
	snprintf(path, sizeof(path), "%s/nic/0000:af:00.1/nccl.conf", dir);
	CHECK(stat(path, &st) == 0 && S_ISREG(st.st_mode));
	CHECK_INT_EQ(hpn_nccl_link_read(dir, "0000:af:00.1", "uid-1", NULL, 0), 0);
	/* Again: nothing to do. */
	CHECK_INT_EQ(hpn_nccl_link(dir, "0000:af:00.1", "uid-1", &err), 0);

	/* Another key's link: the unlink of uid-2 leaves it; the link of uid-2 replaces it. */
	got[0] = '\0';
	CHECK_INT_EQ(hpn_nccl_link_read(dir, "0000:af:00.1", "uid-2", got, sizeof(got)), -EXDEV);
	CHECK_STR_EQ(got, "../uid-1");
	CHECK_INT_EQ(hpn_nccl_unlink(dir, "0000:af:00.1", "uid-2", &err), 1);
	CHECK_INT_EQ(hpn_nccl_link_read(dir, "0000:af:00.1", "uid-1", NULL, 0), 0);
	CHECK_INT_EQ(hpn_nccl_link(dir, "0000:af:00.1", "uid-2", &err), 1);
	CHECK_INT_EQ(hpn_nccl_link_read(dir, "0000:af:00.1", "uid-2", NULL, 0), 0);
	CHECK_INT_EQ(hpn_nccl_unlink(dir, "0000:af:00.1", "uid-1", &err), 1);
	CHECK_INT_EQ(hpn_nccl_unlink(dir, "0000:af:00.1", "uid-2", &err), 0);
	CHECK_INT_EQ(hpn_nccl_link_read(dir, "0000:af:00.1", "uid-2", NULL, 0), -ENOENT);
	CHECK_INT_EQ(hpn_nccl_unlink(dir, "0000:af:00.1", "uid-2", &err), 0);
	/* The last link gone, its directory went too. */
	snprintf(path, sizeof(path), "%s/nic", dir);
	CHECK(lstat(path, &st) < 0 && errno == ENOENT);

	/* Not a link at the name: refused with 5 by the link, left by the unlink. */
	CHECK(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/nic/pool3", dir);
	CHECK(mkdir(path, 0700) == 0);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_nccl_link(dir, "pool3", "uid-1", &err), -EEXIST);
	CHECK_INT_EQ(err.code, 5);
	CHECK_STR_HAS(err.msg, "is not a symlink of hpn-rdma's");
	CHECK_INT_EQ(hpn_nccl_unlink(dir, "pool3", "uid-1", &err), 1);
	CHECK_INT_EQ(hpn_nccl_link_read(dir, "pool3", "uid-1", NULL, 0), -EINVAL);
	CHECK(lstat(path, &st) == 0 && S_ISDIR(st.st_mode));
	CHECK(rmdir(path) == 0);
	/* Names and keys that cannot be one: nothing done. */
	memset(&err, 0, sizeof(err));
	CHECK(hpn_nccl_link(dir, "..", "uid-1", &err) < 0);
	CHECK(hpn_nccl_link(dir, "pool3", "../uid-1", &err) < 0);
	CHECK_INT_EQ(hpn_nccl_unlink(dir, "..", "uid-1", &err), 0);

	/* A symlink planted as "nic": never followed, never written through. */
	snprintf(dir, sizeof(dir), "%s/links2", tmp);
	CHECK(mkdir(dir, 0755) == 0);
	snprintf(path, sizeof(path), "%s/nic", dir);
	snprintf(got, sizeof(got), "%s/links2-elsewhere", tmp);
	CHECK(mkdir(got, 0755) == 0);
	CHECK(symlink(got, path) == 0);
	memset(&err, 0, sizeof(err));
	CHECK(hpn_nccl_link(dir, "pool3", "uid-1", &err) < 0);
	CHECK_INT_EQ(err.code, 5);
	CHECK_INT_EQ(hpn_nccl_unlink(dir, "pool3", "uid-1", &err), 0);
	snprintf(path, sizeof(path), "%s/pool3", got);
	CHECK(lstat(path, &st) < 0 && errno == ENOENT);
}

static void test_profiles(void)
{
	struct hpn_nccl_conf *nc = nconf();
	struct hpn_err err = { 0 };

	CHECK_STR_EQ(hpn_nccl_profile(nc, "GU8TF")->name, "GU8TF");
	CHECK_STR_EQ(hpn_nccl_profile(nc, "gu8tef")->name, "GU8TEF");
	CHECK_STR_EQ(hpn_nccl_profile(nc, "GX8SF")->name, "GX8SF");
	CHECK_STR_EQ(hpn_nccl_profile(nc, "P16EN")->name, "P16EN");
	CHECK_STR_EQ(hpn_nccl_profile(nc, "gpu-hpn")->name, "gpu-hpn");
	CHECK_STR_EQ(hpn_nccl_profile(nc, "H20")->name, "auto");
	CHECK_STR_EQ(hpn_nccl_profile(nc, NULL)->name, "auto");
	CHECK_STR_EQ(hpn_nccl_profile(nc, "")->name, "auto");

	/* Type 1: 8-GPU pods, mlx5 only. */
	CHECK_INT_EQ(hpn_nccl_check_gpus(hpn_nccl_profile(nc, "GU8TF"), 8, &err), 0);
	CHECK_INT_EQ(hpn_nccl_check_gpus(hpn_nccl_profile(nc, "GU8TF"), 0, &err), 0);
	CHECK_INT_EQ(hpn_nccl_check_gpus(hpn_nccl_profile(nc, "GU8TF"), 4, &err), -EINVAL);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_CONFIG);
	CHECK_STR_HAS(err.msg, "GU8TF runs 8-GPU pods only; this pod has 4 GPUs");
	err = (struct hpn_err){ 0 };
	CHECK_INT_EQ(hpn_nccl_check_gpus(hpn_nccl_profile(nc, "P16EN"), 16, &err), 0);
	CHECK_INT_EQ(hpn_nccl_check_gpus(hpn_nccl_profile(nc, "P16EN"), 8, &err), -EINVAL);
	err = (struct hpn_err){ 0 };
	for (int n = 1; n <= 16; n++) {
		bool ok = n == 1 || n == 2 || n == 4 || n == 8 || n == 16;

		CHECK_INT_EQ(hpn_nccl_check_gpus(hpn_nccl_profile(nc, "gpu-hpn"), n, &err),
			     ok ? 0 : -EINVAL);
	}
	CHECK_STR_HAS(err.msg, "1/2/4/8/16-GPU");
	err = (struct hpn_err){ 0 };
	CHECK_INT_EQ(hpn_nccl_check_gpus(hpn_nccl_profile(nc, "other"), 3, &err), 0);

	CHECK_INT_EQ(hpn_nccl_check_driver(hpn_nccl_profile(nc, "GU8TF"), "mlx5", &err), 0);
	CHECK_INT_EQ(hpn_nccl_check_driver(hpn_nccl_profile(nc, "GU8TF"), "rxe", &err), -EINVAL);
	CHECK_INT_EQ(err.code, HPN_E_RDMA);
	CHECK_STR_HAS(err.msg, "GU8TF needs a mlx5 RDMA device; the NIC's is rxe");
	err = (struct hpn_err){ 0 };
	CHECK_INT_EQ(hpn_nccl_check_driver(hpn_nccl_profile(nc, "GU8TF"), NULL, &err), -ENODEV);
	CHECK_STR_HAS(err.msg, "needs an RDMA device and none is bound");
	err = (struct hpn_err){ 0 };
	CHECK_INT_EQ(hpn_nccl_check_driver(hpn_nccl_profile(nc, "P16EN"), NULL, &err), 0);
	CHECK_INT_EQ(hpn_nccl_check_driver(hpn_nccl_profile(nc, "gpu-hpn"), "erdma", &err), 0);
	CHECK_INT_EQ(hpn_nccl_check_driver(hpn_nccl_profile(nc, "x"), NULL, &err), 0);

	/* A config profile is found before the built-in one of the same name. */
	nc->profiles = calloc(1, sizeof(*nc->profiles));
	nc->profiles[0] =
		(struct hpn_nccl_profile){ .name = strdup("gu8tf"), .ib = HPN_NCCL_IB_OFF };
	nc->n_profiles = 1;
	CHECK(hpn_nccl_profile(nc, "GU8TF") == &nc->profiles[0]);
	CHECK_INT_EQ(hpn_nccl_check_gpus(hpn_nccl_profile(nc, "GU8TF"), 4, &err), 0);
}

static void test_render(void)
{
	struct hpn_nccl_conf *nc = nconf();
	int g3[] = { 3, 3, 3, 3 }, g_mixed[] = { 3, 1 }, g0[] = { 0, 0 };
	struct hpn_result *res;

	/* One mlx5 RoCE device: exact HCA with port, its GID index. */
	res = bound(1, g3, "mlx5", "roce", "10.1.2.3/24");
	CHECK_RENDER(nc, NULL, res,
		     "NCCL_IB_DISABLE=0;NCCL_IB_HCA==mlx5_2:1;NCCL_IB_GID_INDEX=3;"
		     "NCCL_SOCKET_IFNAME=eth0");
	/* Type 1 adds the fabric settings PAI Lingjun documents (the GID index stays computed). */
	CHECK_RENDER(nc, "GU8TF", res,
		     "NCCL_IB_DISABLE=0;NCCL_IB_HCA==mlx5_2:1;NCCL_IB_GID_INDEX=3;"
		     "NCCL_SOCKET_IFNAME=eth0;NCCL_IB_TC=136;NCCL_IB_SL=5;NCCL_IB_TIMEOUT=22;"
		     "NCCL_IB_QPS_PER_CONNECTION=8");
	/* Type 2 turns IB off even with a device bound. */
	CHECK_RENDER(nc, "P16EN", res, "NCCL_IB_DISABLE=1;NCCL_IB_HCA=;NCCL_SOCKET_IFNAME=eth0");
	hpn_result_free(res);

	/* Several NICs with one GID index: a comma list and that index. */
	res = bound(4, g3, "mlx5", "roce", "10.1.2.3/24");
	CHECK_RENDER(nc, "gpu-hpn", res,
		     "NCCL_IB_DISABLE=0;NCCL_IB_HCA==mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1;"
		     "NCCL_IB_GID_INDEX=3;NCCL_SOCKET_IFNAME=eth0");
	hpn_result_free(res);

	/* Different indexes: NCCL picks the RoCE v2 GID within hpn0's subnet. */
	res = bound(2, g_mixed, "mlx5", "roce", "10.1.2.3/20");
	CHECK_RENDER(nc, NULL, res,
		     "NCCL_IB_DISABLE=0;NCCL_IB_HCA==mlx5_2:1,mlx5_3:1;NCCL_IB_GID_INDEX=-1;"
		     "NCCL_IB_ROCE_VERSION_NUM=2;NCCL_IB_ADDR_FAMILY=AF_INET;"
		     "NCCL_IB_ADDR_RANGE=10.1.0.0/20;NCCL_SOCKET_IFNAME=eth0");
	hpn_result_free(res);
	res = bound(2, g_mixed, "rxe", "roce", "fd00:1:2::5/64");
	CHECK_RENDER(nc, NULL, res,
		     "NCCL_IB_DISABLE=0;NCCL_IB_HCA==rxe_2:1,rxe_3:1;NCCL_IB_GID_INDEX=-1;"
		     "NCCL_IB_ROCE_VERSION_NUM=2;NCCL_IB_ADDR_FAMILY=AF_INET6;"
		     "NCCL_IB_ADDR_RANGE=fd00:1:2::/64;NCCL_SOCKET_IFNAME=eth0");
	/* ...and with no address, no range. */
	free(res->ips[0].address);
	res->ips[0].address = NULL;
	res->n_ips = 0;
	CHECK_RENDER(nc, NULL, res,
		     "NCCL_IB_DISABLE=0;NCCL_IB_HCA==rxe_2:1,rxe_3:1;NCCL_IB_GID_INDEX=-1;"
		     "NCCL_IB_ROCE_VERSION_NUM=2;NCCL_SOCKET_IFNAME=eth0");
	hpn_result_free(res);

	/* InfiniBand: NCCL's own GID choice, no GID settings. */
	res = bound(1, g0, "mlx5", "ib", "10.1.2.3/24");
	CHECK_RENDER(nc, NULL, res,
		     "NCCL_IB_DISABLE=0;NCCL_IB_HCA==mlx5_2:1;NCCL_SOCKET_IFNAME=eth0");
	hpn_result_free(res);
	/*
	 * iWARP (erdma's default mode): NCCL's IB transport cannot connect its
	 * QPs (iw_cm only), so IB is off and sockets carry the traffic.
	 */
	res = bound(1, g0, "erdma", "iwarp", "10.1.2.3/24");
	CHECK_RENDER(nc, "gpu-hpn", res, "NCCL_IB_DISABLE=1;NCCL_IB_HCA=;NCCL_SOCKET_IFNAME=eth0");
	CHECK_RENDER(nc, NULL, res, "NCCL_IB_DISABLE=1;NCCL_IB_HCA=;NCCL_SOCKET_IFNAME=eth0");
	/* Type 1 refuses a device that is not mlx5. */
	CHECK_RENDER(nc, "GX8SF", res,
		     "ERR 108: GPU model series GX8SF needs a mlx5 RDMA device; the NIC's is "
		     "erdma");
	hpn_result_free(res);

	/* Nothing bound: IB off with auto, an error where the model needs RDMA. */
	res = bound(1, g0, "mlx5", "roce", NULL);
	res->rdma[0].bound = false;
	CHECK_RENDER(nc, NULL, res, "NCCL_IB_DISABLE=1;NCCL_IB_HCA=;NCCL_SOCKET_IFNAME=eth0");
	CHECK_RENDER(nc, "GU8TF", res,
		     "ERR 108: GPU model series GU8TF needs an RDMA device and none is bound");
	hpn_result_free(res);

	/* Socket interface and extra keys: the model's, then the network's on top. */
	nc->socket_ifname = strdup("=eth0");
	hpn_vars_set(&nc->env, "NCCL_DEBUG", "INFO");
	hpn_vars_set(&nc->env, "NCCL_NET_GDR_LEVEL", "PHB");
	nc->profiles = calloc(1, sizeof(*nc->profiles));
	nc->profiles[0] = (struct hpn_nccl_profile){ .name = strdup("H800"), .ib = HPN_NCCL_IB_ON };
	hpn_vars_set(&nc->profiles[0].env, "NCCL_DEBUG", "WARN");
	hpn_vars_set(&nc->profiles[0].env, "NCCL_IB_QPS_PER_CONNECTION", "4");
	nc->n_profiles = 1;
	res = bound(1, g3, "mlx5", "roce", "10.1.2.3/24");
	CHECK_RENDER(nc, "h800", res,
		     "NCCL_IB_DISABLE=0;NCCL_IB_HCA==mlx5_2:1;NCCL_IB_GID_INDEX=3;"
		     "NCCL_SOCKET_IFNAME==eth0;NCCL_DEBUG=INFO;NCCL_IB_QPS_PER_CONNECTION=4;"
		     "NCCL_NET_GDR_LEVEL=PHB");
	/* The network's settings override Type 1's own, in place. */
	hpn_vars_set(&nc->env, "NCCL_IB_TC", "160");
	CHECK_RENDER(nc, "GX8SF", res,
		     "NCCL_IB_DISABLE=0;NCCL_IB_HCA==mlx5_2:1;NCCL_IB_GID_INDEX=3;"
		     "NCCL_SOCKET_IFNAME==eth0;NCCL_IB_TC=160;NCCL_IB_SL=5;NCCL_IB_TIMEOUT=22;"
		     "NCCL_IB_QPS_PER_CONNECTION=8;NCCL_DEBUG=INFO;NCCL_NET_GDR_LEVEL=PHB");
	hpn_result_free(res);

	/* 16 devices with 63-byte names: the HCA list is over NCCL's 1023 bytes. */
	res = bound(16, (int[16]){ 0 }, "mlx5", "roce", NULL);
	for (size_t i = 0; i < res->n_rdma; i++)
		snprintf(res->rdma[i].device, sizeof(res->rdma[i].device), "mlx5_%058zu", i);
	{
		char *got = render(nc, NULL, res);

		CHECK_STR_HAS(got, "ERR 7: NCCL setting NCCL_IB_HCA would be");
		CHECK_STR_HAS(got, "NCCL reads at most 1023");
		free(got);
	}
	hpn_result_free(res);
	nconf();
}

/* The file as NCCL reads it gives exactly the rendered variables. */
/*
 * eRDMA by mode, as the proof reports it (driver "erdma", transport): iWARP
 * turns IB off, or is refused where the model needs IB; compat and the OFED
 * package are RoCE v2, with the exact HCA and the GID index of the proof,
 * and the eRDMA profile (PAI's values) on top; never a Type 1 profile's
 * traffic class or service level. The eRDMA profile is overridable, found
 * by the devices' driver and never by a GPU model.
 */
/* What follows NCCL_SOCKET_IFNAME when the erdma profile applies. */
#define ERDMA_TAIL                                                                                 \
	"NCCL_SOCKET_IFNAME=eth0;NCCL_IB_QPS_PER_CONNECTION=8;NCCL_MIN_NCHANNELS=16;"              \
	"NCCL_NET_PLUGIN=none"

static void test_render_erdma(void)
{
	struct hpn_nccl_conf *nc = nconf();
	int g1[] = { 1, 1 }, g0[] = { 0, 0 };
	struct hpn_result *res;
	const struct hpn_nccl_profile *dp;

	/*
	 * Each case: the proof's facts for NICs hpn0 (and hpn1: second),
	 * the pod's model, the settings. PAI's values are the erdma
	 * profile's; the GID and the HCA are the proof's, exact.
	 */
	static const struct {
		const char *why;
		size_t n;
		const char *dev0, *second; /* NIC 0's name; NIC 1's driver:transport:device:gid */
		int gid0, gid1;
		const char *model, *want;
	} cases[] = {
		{ "compat: RoCE v2, GID 1, PAI's values, no TC/SL/timeout", 1, NULL, NULL, 1, 1,
		  NULL,
		  "NCCL_IB_DISABLE=0;NCCL_IB_HCA==erdma_2:1;NCCL_IB_GID_INDEX=1;" ERDMA_TAIL },
		{ "compat under gpu-hpn", 1, NULL, NULL, 1, 1, "gpu-hpn",
		  "NCCL_IB_DISABLE=0;NCCL_IB_HCA==erdma_2:1;NCCL_IB_GID_INDEX=1;" ERDMA_TAIL },
		{ "a Lingjun RoCE profile never lands its TC/SL on eRDMA", 1, NULL, NULL, 1, 1,
		  "GU8TF",
		  "ERR 108: GPU model series GU8TF needs a mlx5 RDMA device; the NIC's is erdma" },
		{ "Type 2 turns IB off: no eRDMA keys then", 1, NULL, NULL, 1, 1, "P16EN",
		  "NCCL_IB_DISABLE=1;NCCL_IB_HCA=;NCCL_SOCKET_IFNAME=eth0" },
		{ "the OFED package: rdma-core's name, matched exactly", 1, "rocep26s0", NULL, 1, 1,
		  NULL,
		  "NCCL_IB_DISABLE=0;NCCL_IB_HCA==rocep26s0:1;NCCL_IB_GID_INDEX=1;" ERDMA_TAIL },
		{ "two ERIs at GIDs 2 and 1 (the controller's example): -1 and hpn0's range", 2,
		  NULL, NULL, 2, 1, NULL,
		  "NCCL_IB_DISABLE=0;NCCL_IB_HCA==erdma_2:1,erdma_3:1;NCCL_IB_GID_INDEX=-1;"
		  "NCCL_IB_ROCE_VERSION_NUM=2;NCCL_IB_ADDR_FAMILY=AF_INET;"
		  "NCCL_IB_ADDR_RANGE=192.168.10.0/24;" ERDMA_TAIL },
		{ "iWARP beside RoCE: only the RoCE one is NCCL's, with its driver's keys", 2, NULL,
		  "erdma:iwarp:erdma_3", 1, 0, NULL,
		  "NCCL_IB_DISABLE=0;NCCL_IB_HCA==erdma_2:1;NCCL_IB_GID_INDEX=1;" ERDMA_TAIL },
		{ "mlx5 beside eRDMA: no one driver, no driver's keys", 2, NULL, "mlx5:roce:mlx5_3",
		  1, 1, NULL,
		  "NCCL_IB_DISABLE=0;NCCL_IB_HCA==erdma_2:1,mlx5_3:1;NCCL_IB_GID_INDEX=1;"
		  "NCCL_SOCKET_IFNAME=eth0" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int gids[2] = { cases[i].gid0, cases[i].gid1 };
		char *got;

		res = bound(cases[i].n, gids, "erdma", "roce", "192.168.10.20/24");
		if (cases[i].dev0)
			snprintf(res->rdma[0].device, sizeof(res->rdma[0].device), "%s",
				 cases[i].dev0);
		if (cases[i].second)
			sscanf(cases[i].second, "%15[^:]:%7[^:]:%63s", res->rdma[1].driver,
			       res->rdma[1].transport, res->rdma[1].device);
		got = render(nc, cases[i].model, res);
		if (strcmp(got, cases[i].want))
			fprintf(stderr, "\tcase %zu, %s\n", i, cases[i].why);
		CHECK_STR_EQ(got, cases[i].want);
		free(got);
		hpn_result_free(res);
	}

	/* A profile whose ib is on refuses iWARP, naming the device. */
	nc->profiles = calloc(2, sizeof(*nc->profiles));
	nc->profiles[0] = (struct hpn_nccl_profile){ .name = strdup("H20"),
						     .ib = HPN_NCCL_IB_ON,
						     .drivers = HPN_NCCL_DRV_ERDMA };
	nc->n_profiles = 1;
	res = bound(1, g0, "erdma", "iwarp", "192.168.10.20/24");
	CHECK_RENDER(nc, "H20", res,
		     "ERR 108: GPU model series H20 needs NCCL's IB transport, and RDMA device "
		     "\"erdma_2\" (erdma) speaks iWARP, which it cannot use");
	hpn_result_free(res);

	/* The eRDMA profile, overridden by the config's "erdma" (any case), in order. */
	nc->profiles[1] = (struct hpn_nccl_profile){ .name = strdup("eRDMA") };
	hpn_vars_set(&nc->profiles[1].env, "NCCL_MIN_NCHANNELS", "32");
	hpn_vars_set(&nc->profiles[1].env, "NCCL_DEBUG", "INFO");
	nc->n_profiles = 2;
	dp = hpn_nccl_driver_profile(nc, "erdma");
	CHECK(dp == &nc->profiles[1]);
	CHECK(hpn_nccl_driver_profile(nc, "mlx5") == NULL);
	CHECK(hpn_nccl_driver_profile(nc, NULL) == NULL);
	CHECK(hpn_nccl_driver_profile(nc, "H20") == NULL);
	/* Never a GPU model's profile, even when a pod's model says "erdma". */
	CHECK_STR_EQ(hpn_nccl_profile(nc, "erdma")->name, "auto");
	CHECK_STR_EQ(hpn_nccl_profile(nc, "ERDMA")->name, "auto");
	CHECK(hpn_nccl_driver_profile_name("Mlx5"));
	CHECK(!hpn_nccl_driver_profile_name("gpu-hpn"));
	CHECK(!hpn_nccl_driver_profile_name(NULL));
	res = bound(1, g1, "erdma", "roce", "192.168.10.20/24");
	CHECK_RENDER(nc, "erdma", res,
		     "NCCL_IB_DISABLE=0;NCCL_IB_HCA==erdma_2:1;NCCL_IB_GID_INDEX=1;"
		     "NCCL_SOCKET_IFNAME=eth0;NCCL_MIN_NCHANNELS=32;NCCL_DEBUG=INFO");
	/* The network's env over the driver's: the more specific wins. */
	hpn_vars_set(&nc->env, "NCCL_DEBUG", "WARN");
	CHECK_RENDER(nc, NULL, res,
		     "NCCL_IB_DISABLE=0;NCCL_IB_HCA==erdma_2:1;NCCL_IB_GID_INDEX=1;"
		     "NCCL_SOCKET_IFNAME=eth0;NCCL_MIN_NCHANNELS=32;NCCL_DEBUG=WARN");
	hpn_result_free(res);
	{
		char hca[64];

		CHECK_INT_EQ(hpn_nccl_hca("rocep26s0", 1, hca, sizeof(hca)), 0);
		CHECK_STR_EQ(hca, "=rocep26s0:1");
		CHECK(hpn_nccl_ib_transport("roce"));
		CHECK(hpn_nccl_ib_transport("ib"));
		CHECK(!hpn_nccl_ib_transport("iwarp"));
		CHECK(!hpn_nccl_ib_transport(NULL));
	}
}

static void test_format_parse(void)
{
	struct hpn_nccl_conf *nc = nconf();
	int g[] = { 3, 1 };
	struct hpn_result *res = bound(2, g, "mlx5", "roce", "10.1.2.3/24");
	struct hpn_nccl_owner o = { .container_id = "c1",
				    .network = "net",
				    .ifname = "eth0",
				    .pod_namespace = "ns\nNCCL_IB_HCA=evil",
				    .pod_name = "p=1",
				    .pod_uid = "u1" };
	struct hpn_vars v = { 0 }, got = { 0 };
	struct hpn_err err = { 0 };
	char *owner, *other;
	bool mine = false;
	char *text;

	CHECK_INT_EQ(nccl_render(nc, hpn_nccl_profile(nc, NULL), res, &v, &err), 0);
	text = nccl_format(&v, &o, res);
	CHECK(text != NULL);
	owner = hpn_nccl_owner_line(&o);
	CHECK_STR_EQ(owner, "# owner container c1 network net ifname eth0");
	CHECK_STR_HAS(text, owner);
	/* Pod names from the runtime cannot start a line or hold '='. */
	CHECK_STR_HAS(text, "# pod ns?NCCL_IB_HCA?evil/p?1 uid u1\n");
	CHECK_STR_HAS(text, "# device hpn0 mlx5_2:1 gid 3");
	CHECK_STR_HAS(text, "\nNCCL_IB_HCA==mlx5_2:1,mlx5_3:1\n");
	CHECK_INT_EQ(hpn_nccl_parse(text, owner, &got, &mine), 0);
	CHECK(mine);
	CHECK(hpn_vars_equal(&got, &v));
	CHECK_INT_EQ(got.n, v.n);
	hpn_vars_free(&got);
	o.container_id = "c2";
	other = hpn_nccl_owner_line(&o);
	CHECK_INT_EQ(hpn_nccl_parse(text, other, &got, &mine), 0);
	CHECK(!mine);
	hpn_vars_free(&got);
	/* The default conf file: no NCCL_CONF_FILE line. */
	CHECK(!strstr(text, "NCCL_CONF_FILE"));
	free(text);
	free(owner);
	free(other);
	{
		struct hpn_bound_nic b[HPN_MAX_RDMA];
		size_t nb = hpn_result_bound(res, b, HPN_MAX_RDMA);

		text = hpn_nccl_format(&v, &o, "/etc/nccl.conf", b, nb);
		CHECK(!strstr(text, "NCCL_CONF_FILE"));
		free(text);
		/* Elsewhere: the header says NCCL_CONF_FILE, with no '=' (a setting to NCCL). */
		text = hpn_nccl_format(&v, &o, "/etc/hpn-rdma/nccl.conf", b, nb);
		CHECK_STR_HAS(text, "\n# for NCCL_CONF_FILE set to /etc/hpn-rdma/nccl.conf "
				    "(NCCL 2.23 and later)\n");
		owner = hpn_nccl_owner_line(&o);
		CHECK_INT_EQ(hpn_nccl_parse(text, owner, &got, &mine), 0);
		CHECK(mine);
		CHECK(hpn_vars_equal(&got, &v));
		hpn_vars_free(&got);
		free(owner);
		free(text);
	}

	/* A result's names cannot add lines through the header (fuzz finding). */
	{
		struct hpn_result *bad = bound(1, g, "mlx5", "roce", NULL);
		struct hpn_vars bv = { 0 };

		free(bad->ifaces[0].name);
		bad->ifaces[0].name = strdup("hp\nNCCL_IB_GID_INDEX=7\n");
		/* A newline in a device name would be in NCCL_IB_HCA: render refuses that. */
		snprintf(bad->rdma[0].device, sizeof(bad->rdma[0].device), "mlx5\nNCCL_X=1");
		CHECK_INT_EQ(nccl_render(nc, hpn_nccl_profile(nc, NULL), bad, &bv, &err), -E2BIG);
		CHECK_STR_HAS(err.msg, "NCCL setting NCCL_IB_HCA");
		err = (struct hpn_err){ 0 };
		snprintf(bad->rdma[0].device, sizeof(bad->rdma[0].device), "mlx5 =X");
		CHECK_INT_EQ(nccl_render(nc, hpn_nccl_profile(nc, NULL), bad, &bv, &err), 0);
		text = nccl_format(&bv, &o, bad);
		owner = hpn_nccl_owner_line(&o);
		CHECK_INT_EQ(hpn_nccl_parse(text, owner, &got, &mine), 0);
		CHECK(hpn_vars_equal(&got, &bv));
		CHECK(!hpn_vars_get(&got, "NCCL_X"));
		CHECK_STR_HAS(text, "# device hp?NCCL_IB_GID_INDEX?7? mlx5??X:1 gid 3");
		hpn_vars_free(&got);
		hpn_vars_free(&bv);
		free(text);
		free(owner);
		hpn_result_free(bad);
	}

	/* NCCL's rules: first '=' splits, no trimming, '#' lines and lines without '='
	 * are skipped, the first setting of a name stays (setenv(.., 0)). */
	CHECK_INT_EQ(hpn_nccl_parse("#NCCL_A=1\nNCCL_B==x=y\n NCCL_C=2\nNCCL_D\nNCCL_B=z\n"
				    "NCCL_E= sp \nNCCL_F=\nNCCL_G=last",
				    NULL, &got, &mine),
		     0);
	CHECK(!hpn_vars_get(&got, "NCCL_A"));
	CHECK_STR_EQ(hpn_vars_get(&got, "NCCL_B"), "=x=y");
	CHECK_STR_EQ(hpn_vars_get(&got, " NCCL_C"), "2");
	CHECK(!hpn_vars_get(&got, "NCCL_D"));
	CHECK_STR_EQ(hpn_vars_get(&got, "NCCL_E"), " sp ");
	CHECK_STR_EQ(hpn_vars_get(&got, "NCCL_F"), "");
	CHECK_STR_EQ(hpn_vars_get(&got, "NCCL_G"), "last");
	CHECK_INT_EQ(got.n, 5);
	hpn_vars_free(&got);
	hpn_vars_free(&v);
	hpn_result_free(res);
	nconf();
}

static void test_files(void)
{
	char dir[128], path[512], target[256];
	struct hpn_err err = { 0 };
	struct stat st;
	char *text = NULL;
	mode_t old;

	snprintf(dir, sizeof(dir), "%s/run/pods", tmp);
	/* Modes are exact whatever the runtime's umask. */
	old = umask(077);
	CHECK_INT_EQ(hpn_nccl_write(dir, "uid-1",
				    "# owner container a network n ifname e\n"
				    "NCCL_IB_DISABLE=1\n",
				    &err),
		     0);
	umask(old);
	snprintf(path, sizeof(path), "%s/uid-1/nccl.conf", dir);
	CHECK_INT_EQ(stat(path, &st), 0);
	CHECK_INT_EQ(st.st_mode & 07777, 0644);
	snprintf(path, sizeof(path), "%s/uid-1", dir);
	CHECK_INT_EQ(stat(path, &st), 0);
	CHECK_INT_EQ(st.st_mode & 07777, 0755);
	CHECK_INT_EQ(stat(dir, &st), 0);
	CHECK_INT_EQ(st.st_mode & 07777, 0755);
	CHECK_INT_EQ(hpn_nccl_read(dir, "uid-1", &text, &err), 0);
	CHECK_STR_EQ(text, "# owner container a network n ifname e\nNCCL_IB_DISABLE=1\n");
	free(text);
	text = NULL;

	/* A recreated pod (same key, new container) rewrites it; the old DEL keeps it. */
	CHECK_INT_EQ(hpn_nccl_write(dir, "uid-1",
				    "# owner container b network n ifname e\n"
				    "NCCL_IB_DISABLE=0\n",
				    &err),
		     0);
	CHECK_INT_EQ(hpn_nccl_remove(dir, "uid-1", "# owner container a network n ifname e", &err),
		     0);
	CHECK_INT_EQ(hpn_nccl_read(dir, "uid-1", &text, &err), 0);
	CHECK_STR_HAS(text, "container b");
	free(text);
	text = NULL;
	/* Its own DEL removes file and directory; again is fine. */
	CHECK_INT_EQ(hpn_nccl_remove(dir, "uid-1", "# owner container b network n ifname e", &err),
		     0);
	CHECK_INT_EQ(stat(path, &st), -1);
	CHECK_INT_EQ(hpn_nccl_remove(dir, "uid-1", "# owner container b network n ifname e", &err),
		     0);
	CHECK_INT_EQ(hpn_nccl_read(dir, "uid-1", &text, &err), -ENOENT);
	CHECK_INT_EQ(hpn_nccl_remove("/nonexistent/hpn", "uid-1", "x", &err), 0);
	CHECK_INT_EQ(err.code, 0);

	/* A killed writer's temp file does not keep the directory. */
	CHECK_INT_EQ(hpn_nccl_write(dir, "uid-2", "# owner container a network n ifname e\n", &err),
		     0);
	snprintf(path, sizeof(path), "%s/uid-2/.nccl.conf.99999", dir);
	close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	CHECK_INT_EQ(hpn_nccl_remove(dir, "uid-2", "# owner container a network n ifname e", &err),
		     0);
	snprintf(path, sizeof(path), "%s/uid-2", dir);
	CHECK_INT_EQ(stat(path, &st), -1);

	/* Traversal in the key is refused before anything is created. */
	CHECK_INT_EQ(hpn_nccl_write(dir, "../escape", "x\n", &err), -EINVAL);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_ENV);
	err = (struct hpn_err){ 0 };
	CHECK_INT_EQ(hpn_nccl_write(dir, "a/b", "x\n", &err), -EINVAL);
	err = (struct hpn_err){ 0 };
	snprintf(path, sizeof(path), "%s/run/escape", tmp);
	CHECK_INT_EQ(stat(path, &st), -1);

	/* A symlink planted as the key directory is not followed. */
	snprintf(target, sizeof(target), "%s/elsewhere", tmp);
	mkdir(target, 0755);
	snprintf(path, sizeof(path), "%s/uid-3", dir);
	CHECK_INT_EQ(symlink(target, path), 0);
	CHECK(hpn_nccl_write(dir, "uid-3", "x\n", &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_IO);
	CHECK_STR_HAS(err.msg, "uid-3");
	err = (struct hpn_err){ 0 };
	snprintf(path, sizeof(path), "%s/nccl.conf", target);
	CHECK_INT_EQ(stat(path, &st), -1);
	/* ...nor by DEL, which leaves it alone and succeeds. */
	CHECK_INT_EQ(hpn_nccl_remove(dir, "uid-3", "x", &err), 0);
	CHECK_INT_EQ(hpn_nccl_read(dir, "uid-3", &text, &err) < 0, 1);
	err = (struct hpn_err){ 0 };

	/* A symlink planted as the file is replaced, its target untouched. */
	snprintf(path, sizeof(path), "%s/uid-4", dir);
	mkdir(path, 0755);
	snprintf(target, sizeof(target), "%s/victim", tmp);
	close(open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	snprintf(path, sizeof(path), "%s/uid-4/nccl.conf", dir);
	CHECK_INT_EQ(symlink(target, path), 0);
	CHECK_INT_EQ(hpn_nccl_read(dir, "uid-4", &text, &err) < 0, 1);
	err = (struct hpn_err){ 0 };
	CHECK_INT_EQ(hpn_nccl_write(dir, "uid-4", "NCCL_IB_DISABLE=1\n", &err), 0);
	CHECK_INT_EQ(lstat(path, &st), 0);
	CHECK(S_ISREG(st.st_mode));
	CHECK_INT_EQ(stat(target, &st), 0);
	CHECK_INT_EQ(st.st_size, 0);

	/* A FIFO as the file: an error, not a hang. */
	snprintf(path, sizeof(path), "%s/uid-5", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/uid-5/nccl.conf", dir);
	CHECK_INT_EQ(mkfifo(path, 0600), 0);
	CHECK(hpn_nccl_read(dir, "uid-5", &text, &err) < 0);
	CHECK_STR_HAS(err.msg, "not a regular file");
	err = (struct hpn_err){ 0 };
	CHECK(hpn_nccl_remove(dir, "uid-5", "x", &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_IO);
}

static int parse(const char *json, struct hpn_conf *conf, struct hpn_err *err)
{
	memset(err, 0, sizeof(*err));
	return hpn_conf_parse(json, strlen(json), HPN_CMD_ADD, conf, err);
}

#define BASE	 "\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"hpn-rdma\",\"device\":\"nic0\""
#define ANNOS(x) "\"runtimeConfig\":{\"io.kubernetes.cri.pod-annotations\":{" x "}}"

/* The config fails with code 7 and a message naming what. */
#define CHECK_CONF_ERR(json, what)                                                                 \
	do {                                                                                       \
		struct hpn_conf _c;                                                                \
		struct hpn_err _e;                                                                 \
		CHECK(parse(json, &_c, &_e) < 0);                                                  \
		CHECK_INT_EQ(_e.code, HPN_E_INVALID_CONFIG);                                       \
		CHECK_STR_HAS(_e.msg, what);                                                       \
		hpn_conf_free(&_c);                                                                \
	} while (0)

static void test_conf(void)
{
	struct hpn_conf c;
	struct hpn_err e;

	/* Defaults: hints on, every pod selected, no model. */
	CHECK_INT_EQ(parse("{" BASE "}", &c, &e), 0);
	CHECK(c.nccl.enabled);
	CHECK_STR_EQ(c.nccl.dir, HPN_DEFAULT_NCCL_DIR);
	CHECK_STR_EQ(c.nccl.conf_file, "/etc/nccl.conf");
	CHECK(c.nccl.socket_ifname == NULL);
	CHECK(c.pod_selected);
	CHECK(c.pod_selector == NULL);
	CHECK(c.gpu_model == NULL);
	CHECK_INT_EQ(c.gpu_count, 0);
	hpn_conf_free(&c);

	/* podSelector {}: the default annotation and value. */
	CHECK_INT_EQ(parse("{" BASE ",\"podSelector\":{}}", &c, &e), 0);
	CHECK(!c.pod_selected);
	CHECK_STR_EQ(c.pod_selector, "alibabacloud.com/hpn-type=rdma");
	hpn_conf_free(&c);
	CHECK_INT_EQ(parse("{" BASE ",\"podSelector\":{}," ANNOS(
				   "\"alibabacloud.com/hpn-type\":\"rdma\","
				   "\"alibabacloud.com/gpu-model-series\":\"GU8TF\","
				   "\"alibabacloud.com/gpu-count\":\"8\"") "}",
			   &c, &e),
		     0);
	CHECK(c.pod_selected);
	CHECK_STR_EQ(c.gpu_model, "GU8TF");
	CHECK_INT_EQ(c.gpu_count, 8);
	hpn_conf_free(&c);
	CHECK_INT_EQ(parse("{" BASE ",\"podSelector\":{}," ANNOS(
				   "\"alibabacloud.com/hpn-type\":\"RDMA\"") "}",
			   &c, &e),
		     0);
	CHECK(!c.pod_selected);
	hpn_conf_free(&c);
	/* Configured key and value. */
	CHECK_INT_EQ(parse("{" BASE
			   ",\"podSelector\":{\"annotation\":\"x/y\",\"value\":\"on\"}," ANNOS(
				   "\"x/y\":\"on\"") "}",
			   &c, &e),
		     0);
	CHECK(c.pod_selected);
	CHECK_STR_EQ(c.pod_selector, "x/y=on");
	hpn_conf_free(&c);
	/* Without podSelector the annotations do not matter. */
	CHECK_INT_EQ(parse("{" BASE "," ANNOS("\"alibabacloud.com/hpn-type\":\"no\"") "}", &c, &e),
		     0);
	CHECK(c.pod_selected);
	hpn_conf_free(&c);
	/* Config model and count; the pod's annotation wins. */
	CHECK_INT_EQ(parse("{" BASE ",\"nccl\":{\"gpuModel\":\"P16EN\",\"gpuCount\":16,"
			   "\"gpuModelAnnotation\":\"m\",\"gpuCountAnnotation\":\"c\","
			   "\"socketIfname\":\"=eth0\",\"dir\":\"/run/x\",\"enabled\":false,"
			   "\"env\":{\"NCCL_DEBUG\":\"INFO\"},"
			   "\"profiles\":{\"H20\":{\"ib\":\"on\",\"drivers\":[\"mlx5\",\"erdma\"],"
			   "\"gpuCounts\":[1,8],\"env\":{\"NCCL_IB_QPS_PER_CONNECTION\":\"2\"}}}}"
			   "," ANNOS("\"m\":\"H20\"") "}",
			   &c, &e),
		     0);
	CHECK_STR_EQ(e.msg, "");
	CHECK_STR_EQ(c.gpu_model, "H20");
	CHECK_INT_EQ(c.gpu_count, 16);
	CHECK(!c.nccl.enabled);
	CHECK_STR_EQ(c.nccl.dir, "/run/x");
	CHECK_STR_EQ(c.nccl.socket_ifname, "=eth0");
	CHECK_STR_EQ(hpn_vars_get(&c.nccl.env, "NCCL_DEBUG"), "INFO");
	CHECK_INT_EQ(c.nccl.n_profiles, 1);
	CHECK_INT_EQ(c.nccl.profiles[0].ib, HPN_NCCL_IB_ON);
	CHECK_INT_EQ(c.nccl.profiles[0].drivers, HPN_NCCL_DRV_MLX5 | HPN_NCCL_DRV_ERDMA);
	CHECK_INT_EQ(c.nccl.profiles[0].gpu_counts, (1 << 1) | (1 << 8));
	CHECK_STR_EQ(hpn_vars_get(&c.nccl.profiles[0].env, "NCCL_IB_QPS_PER_CONNECTION"), "2");
	CHECK(hpn_nccl_profile(&c.nccl, "h20") == &c.nccl.profiles[0]);
	hpn_conf_free(&c);

	CHECK_CONF_ERR("{" BASE ",\"nccl\":[]}", "nccl must be an object");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"dir\":\"pods\"}}", "nccl.dir \"pods\" must be an "
								 "absolute path");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"dir\":\"/run/../etc\"}}", "nccl.dir");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"enabled\":1}}", "nccl.enabled");
	/* nccl.confFile: where the pods mount the file, for NCCL_CONF_FILE. */
	CHECK_INT_EQ(
		parse("{" BASE ",\"nccl\":{\"confFile\":\"/etc/hpn-rdma/nccl.conf\"}}", &c, &e), 0);
	CHECK_STR_EQ(c.nccl.conf_file, "/etc/hpn-rdma/nccl.conf");
	hpn_conf_free(&c);
	CHECK_INT_EQ(parse("{" BASE ",\"nccl\":{\"confFile\":\"/home/u/.nccl.conf\"}}", &c, &e), 0);
	hpn_conf_free(&c);
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"confFile\":\"nccl.conf\"}}",
		       "nccl.confFile \"nccl.conf\" must be an absolute path");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"confFile\":\"/etc/../nccl.conf\"}}",
		       "nccl.confFile \"/etc/../nccl.conf\" must be an absolute path without ..");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"confFile\":\"/etc/./nccl.conf\"}}",
		       "nccl.confFile \"/etc/./nccl.conf\" must be a file's absolute path");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"confFile\":\"/etc/nccl/\"}}", "nccl.confFile");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"confFile\":\"/\"}}", "nccl.confFile");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"confFile\":\"/etc/nccl conf\"}}", "nccl.confFile");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"confFile\":\"/etc/a=b\"}}", "nccl.confFile");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"confFile\":\"/etc/x\\nNCCL_A=1\"}}", "nccl.confFile");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"confFile\":1}}", "nccl.confFile must be a string");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"socketIfname\":\"\"}}", "nccl.socketIfname");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"socketIfname\":\"eth0\\nNCCL_X=1\"}}",
		       "nccl.socketIfname");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"env\":{\"LD_PRELOAD\":\"x\"}}}",
		       "nccl.env.LD_PRELOAD is not an NCCL variable name");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"env\":{\"NCCL_IB_HCA\":\"mlx5\"}}}",
		       "nccl.env.NCCL_IB_HCA is computed from the bound devices");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"env\":{\"NCCL_DEBUG\":1}}}",
		       "nccl.env.NCCL_DEBUG must be a string");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"env\":{\"NCCL_DEBUG\":\"a\\nb\"}}}",
		       "nccl.env.NCCL_DEBUG must be a string of printable ASCII");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"env\":{\"NCCL_DEBUG\":\"a\",\"NCCL_DEBUG\":\"b\"}}}",
		       "nccl.env.NCCL_DEBUG is repeated");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"env\":[]}}", "nccl.env must be an object");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"gpuCount\":0}}", "nccl.gpuCount");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"gpuCount\":64}}", "nccl.gpuCount");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"profiles\":[]}}", "nccl.profiles must be an object");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"profiles\":{\"X\":1}}}",
		       "nccl.profiles.X must be an object");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"profiles\":{\"X\":{\"ib\":\"maybe\"}}}}",
		       "nccl.profiles.X.ib \"maybe\" is not one of auto, on, off");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"profiles\":{\"X\":{\"drivers\":[\"mlx4\"]}}}}",
		       "nccl.profiles.X.drivers");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"profiles\":{\"X\":{\"gpuCounts\":[0]}}}}",
		       "nccl.profiles.X.gpuCounts");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"profiles\":{\"X\":{\"gpuCounts\":[1.5]}}}}",
		       "nccl.profiles.X.gpuCounts");
	/* A driver's profile ("erdma"): its env, found by the devices' driver, nothing else. */
	CHECK_INT_EQ(parse("{" BASE ",\"nccl\":{\"profiles\":{\"erdma\":{\"env\":"
			   "{\"NCCL_IB_QPS_PER_CONNECTION\":\"4\"}}}}}",
			   &c, &e),
		     0);
	CHECK(hpn_nccl_driver_profile(&c.nccl, "erdma") == &c.nccl.profiles[0]);
	CHECK_STR_EQ(hpn_nccl_profile(&c.nccl, "erdma")->name, "auto");
	hpn_conf_free(&c);
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"profiles\":{\"erdma\":{\"ib\":\"on\"}}}}",
		       "nccl.profiles.erdma.ib: erdma names a driver, whose profile is chosen by "
		       "the bound devices and holds only env");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"profiles\":{\"ERDMA\":{\"drivers\":[\"erdma\"]}}}}",
		       "nccl.profiles.ERDMA.drivers");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"profiles\":{\"mlx5\":{\"gpuCounts\":[8]}}}}",
		       "nccl.profiles.mlx5.gpuCounts");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"profiles\":{\"erdma\":{\"env\":"
		       "{\"NCCL_IB_GID_INDEX\":\"1\"}}}}}",
		       "nccl.profiles.erdma.env.NCCL_IB_GID_INDEX is computed");
	CHECK_CONF_ERR("{" BASE ",\"nccl\":{\"profiles\":{\"X\":{\"env\":"
		       "{\"NCCL_IB_DISABLE\":\"0\"}}}}}",
		       "nccl.profiles.X.env.NCCL_IB_DISABLE is computed");
	CHECK_CONF_ERR("{" BASE ",\"podSelector\":\"rdma\"}", "podSelector must be an object");
	CHECK_CONF_ERR("{" BASE ",\"podSelector\":{\"annotation\":\"\"}}",
		       "podSelector.annotation must not be empty");
	CHECK_CONF_ERR("{" BASE ",\"podSelector\":{\"value\":true}}",
		       "podSelector.value must be a string");
	CHECK_CONF_ERR("{" BASE ",\"runtimeConfig\":{\"io.kubernetes.cri.pod-annotations\":[]}}",
		       "pod-annotations\" must be an object");
	CHECK_CONF_ERR("{" BASE ",\"podSelector\":{}," ANNOS("\"alibabacloud.com/hpn-type\":1") "}",
		       "\"alibabacloud.com/hpn-type\" must be a string");
	CHECK_CONF_ERR("{" BASE "," ANNOS("\"alibabacloud.com/gpu-count\":\"08\"") "}",
		       "pod annotation alibabacloud.com/gpu-count \"08\" is not a GPU count");
	CHECK_CONF_ERR("{" BASE "," ANNOS("\"alibabacloud.com/gpu-count\":\"64\"") "}",
		       "is not a GPU count (1-63)");
	CHECK_CONF_ERR("{" BASE "," ANNOS("\"alibabacloud.com/gpu-count\":\"8 \"") "}",
		       "is not a GPU count");
	/* Other annotations of any type are none of our business. */
	CHECK_INT_EQ(parse("{" BASE "," ANNOS("\"other\":{\"a\":1}") "}", &c, &e), 0);
	hpn_conf_free(&c);
}

/* The result's "nccl" object: rendered in every version, parsed back, appended. */
static void test_result(void)
{
	struct hpn_result *res = hpn_result_new(), *back = NULL, *sum = hpn_result_new();
	struct hpn_err err = { 0 };
	char *json;

	res->nccl_file = strdup("/run/hpn-rdma/pods/u/nccl.conf");
	res->nccl_conf_file = strdup("/etc/hpn-rdma/nccl.conf");
	hpn_vars_set(&res->nccl, "NCCL_IB_HCA", "=mlx5_2:1");
	hpn_vars_set(&res->nccl, "NCCL_IB_DISABLE", "0");
	json = hpn_result_render(res, "0.3.1");
	CHECK_STR_HAS(json, "\"nccl\":{\"file\":\"/run/hpn-rdma/pods/u/nccl.conf\","
			    "\"confFile\":\"/etc/hpn-rdma/nccl.conf\",\"env\":{"
			    "\"NCCL_IB_HCA\":\"=mlx5_2:1\",\"NCCL_IB_DISABLE\":\"0\"}}");
	CHECK_INT_EQ(hpn_result_parse(json, strlen(json), &back, &err), 0);
	CHECK_STR_EQ(back->nccl_file, res->nccl_file);
	CHECK_STR_EQ(back->nccl_conf_file, res->nccl_conf_file);
	CHECK(hpn_vars_equal(&back->nccl, &res->nccl));
	CHECK_INT_EQ(hpn_result_append(sum, back, -1), 0);
	CHECK_STR_EQ(sum->nccl_file, res->nccl_file);
	CHECK_STR_EQ(sum->nccl_conf_file, res->nccl_conf_file);
	CHECK(hpn_vars_equal(&sum->nccl, &res->nccl));
	free(json);
	hpn_result_free(back);
	back = NULL;
	json = "{\"cniVersion\":\"1.0.0\",\"nccl\":{\"env\":{\"NCCL_A\":\"x\\ny\"}}}";
	CHECK(hpn_result_parse(json, strlen(json), &back, &err) < 0);
	CHECK_STR_HAS(err.msg, "nccl.env.NCCL_A");
	err = (struct hpn_err){ 0 };
	json = "{\"cniVersion\":\"1.0.0\",\"nccl\":{\"env\":{\"PATH\":\"x\"}}}";
	CHECK(hpn_result_parse(json, strlen(json), &back, &err) < 0);
	json = "{\"cniVersion\":\"1.0.0\",\"nccl\":{\"file\":1}}";
	CHECK(hpn_result_parse(json, strlen(json), &back, &err) < 0);
	err = (struct hpn_err){ 0 };
	json = "{\"cniVersion\":\"1.0.0\",\"nccl\":{\"confFile\":[]}}";
	CHECK(hpn_result_parse(json, strlen(json), &back, &err) < 0);
	CHECK_STR_HAS(err.msg, "nccl.confFile");
	/* A result (or journal) from before confFile has none. */
	json = "{\"cniVersion\":\"1.0.0\",\"nccl\":{\"file\":\"/f\",\"env\":{}}}";
	CHECK_INT_EQ(hpn_result_parse(json, strlen(json), &back, &err), 0);
	CHECK(back->nccl_conf_file == NULL);
	hpn_result_free(back);
	hpn_result_free(res);
	hpn_result_free(sum);
}

int main(void)
{
	tmpdir_make(tmp, sizeof(tmp), "nccl");
	test_names();
	test_profiles();
	test_render();
	test_render_erdma();
	test_format_parse();
	test_files();
	test_links();
	test_conf();
	test_result();
	nconf();
	hpn_nccl_conf_free(nconf());
	tmpdir_rm(tmp);
	return check_done();
}
