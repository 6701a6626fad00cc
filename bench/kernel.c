// SPDX-License-Identifier: Apache-2.0
/*
 * hpn-bench-kernel: the kernel's own cost of a move-mode ADD+DEL without IPAM,
 * the part no plugin can save, measured in one process that starts once.
 *
 *   hpn-bench-kernel NIC POD_NETNS [CYCLES]
 *
 * Run in the node netns. Each cycle does what the iproute2 floor does: move
 * NIC into POD_NETNS as hpn0, set it up there, move it back under its name.
 * Prints one line: "kernel NIC CYCLES WALL_US CPU_US CPUID_NS". WALL_US and
 * CPU_US are per cycle; CPU_US is this process's user + system time
 * (getrusage), i.e. the kernel working in the caller's context, as it does for
 * a plugin. With two process starts (scripts/bench.sh takes /bin/true's CPU
 * for each) it is the CPU floor of any plugin that does an ADD+DEL.
 * CPUID_NS is the cost of one CPUID instruction (-1 off x86): a VM exit on a
 * VM, and glibc's start-up runs dozens of them in every process, so it says
 * how much of the cost of starting any process is the machine's.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "link.h"
#include "netns.h"
#include "nl.h"

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static long long cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000LL + ru.ru_utime.tv_usec +
	       ru.ru_stime.tv_usec;
}

static long cpuid_ns(void)
{
#if defined(__x86_64__) || defined(__i386__)
	enum { N = 2000 };
	unsigned int a, b, c, d;
	long long t0 = now_us();

	/* __cpuid_count is volatile asm: the loop is not optimised away. */
	for (unsigned int i = 0; i < N; i++)
		__cpuid_count(4, i & 3, a, b, c, d);
	return (long)((now_us() - t0) * 1000 / N);
#else
	return -1;
#endif
}

static int cycle(struct nl_sock *node, struct nl_sock *pod, int node_fd, int pod_fd,
		 const char *nic, struct hpn_err *err)
{
	struct hpn_link l;
	int r;

	r = hpn_link_get(node, 0, nic, &l, err);
	if (r == 0)
		r = hpn_link_move(node, &l, pod_fd, "hpn0", err);
	if (r == 0)
		r = hpn_link_get(pod, 0, "hpn0", &l, err);
	if (r == 0)
		r = hpn_link_set(pod, &l, NULL, 0, 1, 0, err);
	if (r == 0)
		r = hpn_link_move(pod, &l, node_fd, nic, err);
	return r;
}

int main(int argc, char **argv)
{
	struct hpn_err err = { 0 };
	struct nl_sock *node = NULL, *pod = NULL;
	long n = argc > 3 ? atol(argv[3]) : 100;
	int node_fd = -1, pod_fd = -1, r;
	long long t0, c0;

	if (argc < 3 || n < 1) {
		fprintf(stderr, "usage: %s NIC POD_NETNS [CYCLES]\n", argv[0]);
		return 2;
	}
	r = hpn_netns_current(&node_fd);
	if (r == 0)
		r = hpn_netns_open(argv[2], &pod_fd, &err);
	if (r == 0)
		r = hpn_nl_open(NETLINK_ROUTE, &node);
	if (r == 0)
		r = hpn_nl_open_in(pod_fd, node_fd, argv[2], &pod, &err); /* as the plugin */
	/* One cycle unmeasured: first-use costs are the process's, not the kernel's. */
	if (r == 0)
		r = cycle(node, pod, node_fd, pod_fd, argv[1], &err);
	t0 = now_us();
	c0 = cpu_us();
	for (long i = 0; r == 0 && i < n; i++)
		r = cycle(node, pod, node_fd, pod_fd, argv[1], &err);
	if (r == 0)
		printf("kernel %s %ld %.1f %.1f %ld\n", argv[1], n,
		       (double)(now_us() - t0) / (double)n, (double)(cpu_us() - c0) / (double)n,
		       cpuid_ns());
	else
		fprintf(stderr, "hpn-bench-kernel: %s\n", err.msg[0] ? err.msg : strerror(-r));
	hpn_nl_close(pod);
	hpn_nl_close(node);
	if (pod_fd >= 0)
		close(pod_fd);
	if (node_fd >= 0)
		close(node_fd);
	return r == 0 ? 0 : 2;
}
