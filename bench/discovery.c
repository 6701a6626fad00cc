// SPDX-License-Identifier: Apache-2.0
/*
 * hpn-bench-discovery: the cost of ADD's RDMA discovery for one netdev, as
 * attach.c's plan_rdma runs it (the node's RDMA netns mode, then the RDMA
 * device behind the netdev), in this process's netns and /sys.
 *
 *   hpn-bench-discovery IFNAME [ITERATIONS]
 *
 * Prints one line: "discovery IFNAME ITERATIONS US_PER_CALL FOUND", FOUND
 * being the RDMA device's name or "-" when none serves IFNAME (as on a node
 * without RDMA, where this is the price of rdmaRequired:false). Then the
 * RoCE QoS read ADD adds for a RoCE NIC with nccl on (claim.c's plan_qos,
 * lib/qos.c): "qos IFNAME ITERATIONS US_PER_CALL DCB", DCB "ieee" or "none".
 */
#include <errno.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conf.h"
#include "link.h"
#include "nl.h"
#include "qos.h"
#include "rdma.h"

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	struct hpn_err err = { 0 };
	struct nl_sock *sk = NULL;
	struct hpn_rdma_dev dev;
	struct hpn_qos q;
	struct hpn_link l;
	long n = argc > 2 ? atol(argv[2]) : 1000;
	long long t0;
	int found = 0, r;

	if (argc < 2 || n < 1) {
		fprintf(stderr, "usage: %s IFNAME [ITERATIONS]\n", argv[0]);
		return 2;
	}
	r = hpn_nl_open(NETLINK_ROUTE, &sk);
	if (r == 0)
		r = hpn_link_get(sk, 0, argv[1], &l, &err);
	if (r < 0) {
		fprintf(stderr, "hpn-bench-discovery: %s: %s\n", argv[1],
			err.msg[0] ? err.msg : strerror(-r));
		return 2;
	}
	t0 = now_ns();
	for (long i = 0; i < n; i++) {
		enum hpn_rdma_netns mode;

		memset(&err, 0, sizeof(err));
		r = hpn_rdma_netns_mode(&mode, &err);
		if (r < 0 && r != -EPROTONOSUPPORT)
			break;
		r = hpn_rdma_of_netdev(HPN_DEFAULT_SYSFS_ROOT, sk, &l, &dev, &err);
		if (r < 0 && r != -ENODEV)
			break;
		found = r == 0;
	}
	if (r < 0 && r != -ENODEV && r != -EPROTONOSUPPORT) {
		fprintf(stderr, "hpn-bench-discovery: %s\n", err.msg[0] ? err.msg : strerror(-r));
		hpn_nl_close(sk);
		return 2;
	}
	printf("discovery %s %ld %.2f %s\n", argv[1], n, (double)(now_ns() - t0) / 1e3 / (double)n,
	       found ? dev.name : "-");
	t0 = now_ns();
	r = 0;
	for (long i = 0; i < n && r >= 0; i++)
		r = hpn_qos_read(sk, HPN_DEFAULT_SYSFS_ROOT, argv[1], &q, &err);
	if (r < 0) {
		fprintf(stderr, "hpn-bench-discovery: %s\n", err.msg);
		hpn_nl_close(sk);
		return 2;
	}
	printf("qos %s %ld %.2f %s\n", argv[1], n, (double)(now_ns() - t0) / 1e3 / (double)n,
	       hpn_qos_state_name(q.state));
	hpn_nl_close(sk);
	return 0;
}
