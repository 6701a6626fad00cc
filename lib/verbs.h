/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_VERBS_H
#define HPN_VERBS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "rdma.h"
#include "types.h"

/* What the pod sees of its RDMA device: the facts the result and NCCL hints carry. */
struct hpn_rdma_bind {
	char device[HPN_IBDEV_MAX];
	uint32_t port;
	int gid_index;
	char gid[INET6_ADDRSTRLEN];  /* the GID, in IPv6 notation */
	char addr[INET6_ADDRSTRLEN]; /* the interface address it carries, bound with rdma_cm */
	char link_layer[16];	     /* "Ethernet" or "InfiniBand" */
	char transport[8];	     /* "roce", "iwarp" or "ib" */
	uint16_t lid;		     /* InfiniBand only */
	char port_guid[20];	     /* InfiniBand only: "0002:c903:0031:7cc1" */
	/*
	 * RoCE and InfiniBand: whether the port has its GSI QP (QP1), without
	 * which rdma_cm binds but cannot connect (7.3 does not re-create it
	 * for an rxe device moved into a netns); gsi_known false: not asked.
	 */
	bool gsi_known, gsi;
	/* Its character devices as the pod's sysfs shows them (softroce.c makes their nodes). */
	struct hpn_rdma_cdevs cdevs;
};

/* At most this many proofs run at once: one child process each (see hpn_rdma_prove). */
#define HPN_RDMA_PROOFS_MAX 8

/*
 * Proves, from inside the netns of netns_fd, that RDMA device `device` port
 * `port` serves interface ifname: libibverbs lists and opens it, the port is
 * ACTIVE, and (RoCE) the GID table has a RoCE v2 entry whose netdev is ifname
 * and whose GID is ifname's address (IPv4 preferred, else IPv6); then
 * rdma_bind_addr on that address resolves to the same device and port.
 * Waits up to timeout_ms for what the kernel fills in asynchronously (port
 * state, GID entries). want_gid >= 0 also requires that GID index (CHECK).
 * Runs in a child process with its own mount namespace and a sysfs of the pod
 * netns, so the caller's netns, mounts and library state stay untouched
 * (hpn_rdma_prove with one proof; forked, or spawned afresh after
 * hpn_rdma_proofs_by_exec). Failures are code 108 and name what is
 * missing.
 */
int hpn_rdma_verify(int netns_fd, const char *device, uint32_t port, const char *ifname,
		    int want_gid, int timeout_ms, struct hpn_rdma_bind *ret, struct hpn_err *err);

/* One proof of hpn_rdma_prove: hpn_rdma_verify's arguments, then its outcome. */
struct hpn_rdma_proof {
	const char *device, *ifname; /* device NULL: nothing to prove here, r is 0 */
	uint32_t port;
	int want_gid;
	struct hpn_rdma_bind *ret; /* written only when r is 0 */
	int r;			   /* out: 0, or hpn_rdma_verify's error, with err */
	struct hpn_err err;	   /* out: why, when r < 0 */
};

/*
 * hpn_rdma_verify of each of p[0..n-1], in the netns of netns_fd, each
 * proof in its own child, at most HPN_RDMA_PROOFS_MAX children at once:
 * an 8-NIC pod waits for its slowest device, not for the sum of them (each
 * child waits for its own port and GIDs). Every p[i].r is set; each failure
 * is worded as hpn_rdma_verify's. The first failure in array order decides:
 * proofs after it that have not ended are stopped or never started, and end
 * with -ECANCELED (their outcome cannot matter to a caller that stops at the
 * first failure too; one that had ended keeps its outcome). Every
 * child started has been reaped when this returns, whatever failed; each
 * also dies with the thread that started it (PR_SET_PDEATHSIG), so killing
 * the caller leaves none behind. Returns 0 when every proof passed, else
 * the first failure's r.
 */
int hpn_rdma_prove(int netns_fd, struct hpn_rdma_proof *p, size_t n, int timeout_ms);

/* The hidden subcommand of a program whose proofs are spawned: argv[1] of the child. */
#define HPN_RDMA_PROOF_CMD "rdma-proof"

/*
 * From now on, hpn_rdma_prove runs each proof in a fresh process of this
 * program's own executable (posix_spawn of /proc/self/exe, opened here once,
 * as "<argv0> rdma-proof ..."), not in a fork of the caller: for a process
 * with threads (the agent), whose fork would run the proof's malloc, dlopen
 * and libibverbs under locks another thread may hold. The program must hand
 * argv[1] == HPN_RDMA_PROOF_CMD to hpn_rdma_proof_main before it does
 * anything else. Without this call proofs fork (the plugin: one thread).
 * Call before any thread starts. 0, or -errno when the executable cannot be
 * opened (nothing changed).
 */
int hpn_rdma_proofs_by_exec(void);

/*
 * The spawned child's side (argv from the subcommand on, as main's): runs
 * the one proof its arguments name in the netns on its stdin, the very code
 * a forked child runs, and writes the answer on its stdout in this
 * executable's own layout, which its parent shares. Never returns but on a
 * usage error (2, said on stderr).
 */
int hpn_rdma_proof_main(int argc, char **argv);

#endif
