// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/verbs.c's batch of proofs (hpn_rdma_prove): which proofs
 * run, which failure is reported, and that nothing is left behind. The
 * children are given no netns (fd -1), so each fails at its first step,
 * entering the pod netns, before it opens anything: no privileges, no RDMA
 * device, no network. What a real proof checks is the vm tier's job.
 * Each test runs twice: with forked children (the plugin's way), then with
 * children spawned afresh from this executable (hpn_rdma_proofs_by_exec, the
 * agent's way, whose subcommand main() hands on as the agent's does): the
 * outcomes must be the same.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "verbs.h"

/* The open fds of this process. */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* opendir's own */
}

/* No child of this process is left, running or zombie. */
static bool no_children(void)
{
	return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

/* Nothing to prove: no child, every r 0, nothing written. */
static void test_none(void)
{
	struct hpn_rdma_bind b = { .port = 7 };
	struct hpn_rdma_proof p[3] = { { .ret = &b }, { .ret = &b }, { .ret = &b } };

	p[1].r = -EIO;
	CHECK_INT_EQ(hpn_rdma_prove(-1, p, 3, 0), 0);
	for (int i = 0; i < 3; i++) {
		CHECK_INT_EQ(p[i].r, 0);
		CHECK_INT_EQ(p[i].err.code, 0);
	}
	CHECK_INT_EQ(b.port, 7);
	CHECK_INT_EQ(hpn_rdma_prove(-1, NULL, 0, 0), 0);
	CHECK(no_children());
}

/*
 * More proofs than run at once, the first of them failing: it is the one
 * reported, in hpn_rdma_verify's words; the ones past the window never start;
 * every child is reaped and every pipe closed.
 */
static void test_first_fails(void)
{
	enum { N = HPN_RDMA_PROOFS_MAX + 4 };
	struct hpn_rdma_bind bind[N];
	struct hpn_rdma_proof p[N];
	char names[N][16];
	int fds = open_fds(), r;

	memset(bind, 0, sizeof(bind));
	memset(p, 0, sizeof(p));
	/* Proof 0 has nothing to prove: the first failure is proof 1's. */
	for (int i = 1; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "hpnt_dev%d", i);
		p[i] = (struct hpn_rdma_proof){ .device = names[i],
						.ifname = "hpn0",
						.port = 1,
						.want_gid = -1,
						.ret = &bind[i] };
		p[i].r = 12345;
	}
	r = hpn_rdma_prove(-1, p, N, 100);
	CHECK_INT_EQ(r, -EBADF);
	CHECK_INT_EQ(p[0].r, 0);
	CHECK_INT_EQ(p[1].r, -EBADF);
	CHECK_INT_EQ(p[1].err.code, HPN_E_NETNS);
	CHECK_STR_HAS(p[1].err.msg, "enter the pod netns");
	/* Those in the first window ended one way or the other; none was proven. */
	for (int i = 2; i <= HPN_RDMA_PROOFS_MAX; i++) {
		CHECK(p[i].r == -EBADF || p[i].r == -ECANCELED);
		CHECK_INT_NE(p[i].err.code, 0);
	}
	/* The rest never started. */
	for (int i = HPN_RDMA_PROOFS_MAX + 1; i < N; i++) {
		CHECK_INT_EQ(p[i].r, -ECANCELED);
		CHECK_STR_HAS(p[i].err.msg, "was not started");
		CHECK_STR_HAS(p[i].err.msg, names[i]);
	}
	for (int i = 0; i < N; i++)
		CHECK_STR_EQ(bind[i].device, "");
	CHECK(no_children());
	CHECK_INT_EQ(open_fds(), fds);
}

/* The single proof: the same failure, through hpn_rdma_verify's err. */
static void test_verify(void)
{
	struct hpn_rdma_bind b = { 0 };
	struct hpn_err err = { 0 };
	int fds = open_fds();

	CHECK_INT_EQ(hpn_rdma_verify(-1, "hpnt_dev0", 1, "hpn0", -1, 100, &b, &err), -EBADF);
	CHECK_INT_EQ(err.code, HPN_E_NETNS);
	CHECK_STR_HAS(err.msg, "enter the pod netns");
	CHECK_STR_EQ(b.device, "");
	CHECK(no_children());
	CHECK_INT_EQ(open_fds(), fds);
}

/* The spawned child's arguments are checked before it does anything: a usage error is 2. */
static void test_proof_args(void)
{
	char *bad[][9] = {
		{ HPN_RDMA_PROOF_CMD, NULL },
		{ HPN_RDMA_PROOF_CMD, "1", "0", "dev", "1", "hpn0", "-1", "100", "extra" },
		{ HPN_RDMA_PROOF_CMD, "x", "0", "dev", "1", "hpn0", "-1", "100", NULL },
		{ HPN_RDMA_PROOF_CMD, "1", "3", "dev", "1", "hpn0", "-1", "100", NULL },
		{ HPN_RDMA_PROOF_CMD, "1", "0", "", "1", "hpn0", "-1", "100", NULL },
		{ HPN_RDMA_PROOF_CMD, "1", "0", "dev", "256", "hpn0", "-1", "100", NULL },
		{ HPN_RDMA_PROOF_CMD, "1", "0", "dev", "1", "an-ifname-too-long", "-1", "100",
		  NULL },
		{ HPN_RDMA_PROOF_CMD, "1", "0", "dev", "1", "hpn0", "-2", "100", NULL },
		{ HPN_RDMA_PROOF_CMD, "1", "0", "dev", "1", "hpn0", "-1", "1x", NULL },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int argc = 0;

		while (argc < 9 && bad[i][argc])
			argc++;
		CHECK_INT_EQ(hpn_rdma_proof_main(argc, bad[i]), 2);
	}
}

int main(int argc, char **argv)
{
	/* A proof spawned by the second round below. */
	if (argc > 1 && !strcmp(argv[1], HPN_RDMA_PROOF_CMD))
		return hpn_rdma_proof_main(argc - 1, argv + 1);
	test_none();
	test_first_fails();
	test_verify();
	CHECK_INT_EQ(hpn_rdma_proofs_by_exec(), 0);
	test_none();
	test_first_fails();
	test_verify();
	test_proof_args();
	return check_done();
}
