// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for agent/node/counters.c: an RDMA port's state and counters from a
 * fake sysfs tree (as on a node without RDMA netlink), and a netdev's link
 * statistics (loopback, which every netns has; no privileges needed).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "counters.h"
#include "tmpdir.h"

static char tmp[64];

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX], dir[PATH_MAX], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	snprintf(dir, sizeof(dir), "%s", path);
	for (char *p = dir + strlen(tmp) + 1; (slash = strchr(p, '/')); p = slash + 1) {
		*slash = '\0';
		mkdir(dir, 0755);
		*slash = '/';
	}
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void test_sysfs(void)
{
	struct hpn_rdma_counters c;
	struct hpn_err err = { 0 };
	const struct hpn_rdma_counter *k;

	put("class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
	put("class/infiniband/mlx5_0/ports/1/phys_state", "5: LinkUp\n");
	put("class/infiniband/mlx5_0/ports/1/hw_counters/out_of_sequence", "17\n");
	put("class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent", "18446744073709551615\n");
	put("class/infiniband/mlx5_0/ports/1/hw_counters/lifespan", "10\n");
	put("class/infiniband/mlx5_0/ports/1/hw_counters/garbage", "n/a\n");
	put("class/infiniband/mlx5_0/ports/1/counters/port_xmit_data", "1000\n");
	put("class/infiniband/mlx5_0/ports/2/state", "1: DOWN\n");

	CHECK_INT_EQ(hpn_rdma_counters(tmp, -1, "mlx5_0", 1, &c, &err), 0);
	CHECK_INT_EQ(err.code, 0);
	CHECK_INT_EQ(c.state, 4);
	CHECK_INT_EQ(c.phys_state, 5);
	CHECK(!c.netlink);
	k = hpn_rdma_counter_find(&c, HPN_COUNTER_HW, "out_of_sequence");
	CHECK(k && k->value == 17);
	k = hpn_rdma_counter_find(&c, HPN_COUNTER_HW, "np_cnp_sent");
	CHECK(k && k->value == UINT64_MAX); /* 64 bits, all of them */
	/* A setting and a file that is no number are not counters. */
	CHECK(!hpn_rdma_counter_find(&c, HPN_COUNTER_HW, "lifespan"));
	CHECK(!hpn_rdma_counter_find(&c, HPN_COUNTER_HW, "garbage"));
	/* The PMA counters are their own source: the same name could be in both. */
	k = hpn_rdma_counter_find(&c, HPN_COUNTER_PMA, "port_xmit_data");
	CHECK(k && k->value == 1000);
	CHECK(!hpn_rdma_counter_find(&c, HPN_COUNTER_HW, "port_xmit_data"));
	CHECK_INT_EQ(c.n, 3);

	/* Port 0 means the first; port 2 is DOWN with no counters at all. */
	CHECK_INT_EQ(hpn_rdma_counters(tmp, -1, "mlx5_0", 0, &c, &err), 0);
	CHECK_INT_EQ(c.state, 4);
	CHECK_INT_EQ(hpn_rdma_counters(tmp, -1, "mlx5_0", 2, &c, &err), 0);
	CHECK_INT_EQ(c.state, 1);
	CHECK_INT_EQ(c.n, 0);
	/* A device or port sysfs does not show. */
	CHECK_INT_EQ(hpn_rdma_counters(tmp, -1, "mlx5_9", 1, &c, &err), -ENODEV);
	CHECK_INT_EQ(hpn_rdma_counters(tmp, -1, "mlx5_0", 3, &c, &err), -ENODEV);
	CHECK_INT_EQ(err.code, 0);
}

static void test_link(void)
{
	struct hpn_link_stats s;
	struct hpn_err err = { 0 };

	CHECK_INT_EQ(hpn_link_stats(-1, "lo", &s, &err), 0);
	CHECK_INT_EQ(err.code, 0);
	CHECK(s.mtu > 0);
	CHECK_INT_EQ(hpn_link_stats(-1, "hpn-no-such", &s, &err), -ENODEV);
	CHECK_INT_EQ(err.code, 0);
}

int main(void)
{
	tmpdir_make(tmp, sizeof(tmp), "counters");
	test_sysfs();
	test_link();
	if (tmpdir_rm(tmp) < 0)
		perror("remove scratch directory");
	return check_done();
}
