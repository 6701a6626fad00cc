// SPDX-License-Identifier: Apache-2.0
#include "verbs.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <net/if.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rdma.h"
#include "util.h"

#define POLL_MS 50

struct reply {
	int r;
	struct hpn_err err;
	struct hpn_rdma_bind bind;
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/*
 * libibverbs and librdmacm are opened here, in the child that checks the bind,
 * the only code that needs them. Linked into the binary they were mapped and
 * relocated by every run of the plugin, VERSION, DEL and every ADD without an
 * RDMA device included: measured on the benchmark machine, +0.13 ms CPU,
 * +0.15 ms wall and +0.4 MB RSS per run. The functions below carry the names
 * verbs.h's inline helpers call (ibv_query_port, _ibv_query_gid_table) and
 * this file calls; they are hidden (-fvisibility=hidden), so the libraries'
 * own calls never land here. Versions as rdma-core exports them (IBVERBS_1.0
 * holds older, incompatible variants of some of these names).
 */
static struct {
	struct ibv_device **(*get_device_list)(int *n);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
	int (*query_port)(struct ibv_context *ctx, uint8_t port,
			  struct _compat_ibv_port_attr *attr);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
	ssize_t (*query_gid_table)(struct ibv_context *ctx, struct ibv_gid_entry *entries,
				   size_t max, uint32_t flags, size_t entry_size);
	const char *(*port_state_str)(enum ibv_port_state state);
	int (*create_id)(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx,
			 enum rdma_port_space ps);
	int (*bind_addr)(struct rdma_cm_id *id, struct sockaddr *addr);
	int (*destroy_id)(struct rdma_cm_id *id);
} lib;

static int sym(void *h, const char *soname, const char *name, const char *version, void **ret,
	       struct hpn_err *err)
{
	*ret = dlvsym(h, name, version);
	if (!*ret)
		return hpn_err_set(err, HPN_E_RDMA, ENOSYS, "%s has no %s@%s", soname, name,
				   version);
	return 0;
}

/* Opens both libraries for the rest of this process (the child): never closed. */
static int verbs_load(struct hpn_err *err)
{
	static const char iv[] = "libibverbs.so.1", cm[] = "librdmacm.so.1";
	void *v = dlopen(iv, RTLD_NOW | RTLD_LOCAL), *c;
	int r = 0;

	if (!v)
		return hpn_err_set(err, HPN_E_RDMA, ENOENT, "load %s (rdma-core): %s", iv,
				   dlerror());
	c = dlopen(cm, RTLD_NOW | RTLD_LOCAL);
	if (!c)
		return hpn_err_set(err, HPN_E_RDMA, ENOENT, "load %s (rdma-core): %s", cm,
				   dlerror());
	r = r
		    ?: sym(v, iv, "ibv_get_device_list", "IBVERBS_1.1",
			   (void **)&lib.get_device_list, err);
	r = r
		    ?: sym(v, iv, "ibv_free_device_list", "IBVERBS_1.1",
			   (void **)&lib.free_device_list, err);
	r = r
		    ?: sym(v, iv, "ibv_get_device_name", "IBVERBS_1.1",
			   (void **)&lib.get_device_name, err);
	r = r ?: sym(v, iv, "ibv_open_device", "IBVERBS_1.1", (void **)&lib.open_device, err);
	r = r ?: sym(v, iv, "ibv_close_device", "IBVERBS_1.1", (void **)&lib.close_device, err);
	r = r ?: sym(v, iv, "ibv_query_device", "IBVERBS_1.1", (void **)&lib.query_device, err);
	r = r ?: sym(v, iv, "ibv_query_port", "IBVERBS_1.1", (void **)&lib.query_port, err);
	r = r ?: sym(v, iv, "ibv_query_gid", "IBVERBS_1.1", (void **)&lib.query_gid, err);
	r = r
		    ?: sym(v, iv, "_ibv_query_gid_table", "IBVERBS_1.11",
			   (void **)&lib.query_gid_table, err);
	r = r ?: sym(v, iv, "ibv_port_state_str", "IBVERBS_1.1", (void **)&lib.port_state_str, err);
	r = r ?: sym(c, cm, "rdma_create_id", "RDMACM_1.0", (void **)&lib.create_id, err);
	r = r ?: sym(c, cm, "rdma_bind_addr", "RDMACM_1.0", (void **)&lib.bind_addr, err);
	r = r ?: sym(c, cm, "rdma_destroy_id", "RDMACM_1.0", (void **)&lib.destroy_id, err);
	return r;
}

struct ibv_device **ibv_get_device_list(int *n)
{
	return lib.get_device_list(n);
}

void ibv_free_device_list(struct ibv_device **list)
{
	lib.free_device_list(list);
}

const char *ibv_get_device_name(struct ibv_device *dev)
{
	return lib.get_device_name(dev);
}

struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	return lib.open_device(dev);
}

int ibv_close_device(struct ibv_context *ctx)
{
	return lib.close_device(ctx);
}

int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	return lib.query_device(ctx, attr);
}

/* The name the inline ___ibv_query_port falls back to: parenthesised past verbs.h's macro. */
int(ibv_query_port)(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr)
{
	return lib.query_port(ctx, port, attr);
}

int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	return lib.query_gid(ctx, port, index, gid);
}

ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries, size_t max,
			     uint32_t flags, size_t entry_size)
{
	return lib.query_gid_table(ctx, entries, max, flags, entry_size);
}

const char *ibv_port_state_str(enum ibv_port_state state)
{
	return lib.port_state_str(state);
}

int rdma_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx,
		   enum rdma_port_space ps)
{
	return lib.create_id(ch, id, ctx, ps);
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	return lib.bind_addr(id, addr);
}

int rdma_destroy_id(struct rdma_cm_id *id)
{
	return lib.destroy_id(id);
}

/*
 * The address a RoCE GID of ifname must carry: its IPv4 address, else a global
 * IPv6 one, else its IPv6 link-local one (the default GID). Family 0: none yet.
 */
static int pick_addr(const char *ifname, struct sockaddr_storage *ss)
{
	struct ifaddrs *ifa, *i;
	int best = 0;

	if (getifaddrs(&ifa) < 0)
		return -errno;
	for (i = ifa; i; i = i->ifa_next) {
		int rank;

		if (!i->ifa_addr || strcmp(i->ifa_name, ifname))
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			rank = 3;
		else if (i->ifa_addr->sa_family == AF_INET6)
			rank = IN6_IS_ADDR_LINKLOCAL(
				       &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr)
				       ? 1
				       : 2;
		else
			continue;
		if (rank > best) {
			best = rank;
			memset(ss, 0, sizeof(*ss));
			memcpy(ss, i->ifa_addr,
			       rank == 3 ? sizeof(struct sockaddr_in)
					 : sizeof(struct sockaddr_in6));
		}
	}
	freeifaddrs(ifa);
	if (!best)
		ss->ss_family = 0;
	return 0;
}

/* The GID that carries address ss: IPv4-mapped for IPv4, the address itself for IPv6. */
static void addr_gid(const struct sockaddr_storage *ss, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (ss->ss_family == AF_INET) {
		gid->raw[10] = gid->raw[11] = 0xff;
		memcpy(&gid->raw[12], &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	}
}

static void addr_str(const struct sockaddr_storage *ss, char out[INET6_ADDRSTRLEN])
{
	const void *a = ss->ss_family == AF_INET
				? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
				: (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;

	if (!inet_ntop(ss->ss_family, a, out, INET6_ADDRSTRLEN))
		snprintf(out, INET6_ADDRSTRLEN, "?");
}

/* The pod's own view: its netns, and a sysfs mounted there (RDMA devices are netns-tagged). */
static int enter_pod(int netns_fd, struct hpn_err *err)
{
	if (setns(netns_fd, CLONE_NEWNET) < 0)
		return hpn_err_set(err, HPN_E_NETNS, errno, "enter the pod netns: %s",
				   strerror(errno));
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return hpn_err_set(err, HPN_E_INTERNAL, errno, "private mount namespace: %s",
				   strerror(errno));
	umount2("/sys", MNT_DETACH);
	if (mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return hpn_err_set(err, HPN_E_INTERNAL, errno, "mount sysfs of the pod netns: %s",
				   strerror(errno));
	return 0;
}

struct probe {
	const char *device, *ifname;
	uint32_t port;
	int want_gid;
	struct hpn_rdma_bind *b;
	struct sockaddr_storage addr;
};

/*
 * One look at the device. 0: everything is there; -EAGAIN: something the
 * kernel may still fill in is missing (err says what); other: a hard failure.
 */
static int probe_once(struct probe *p, struct hpn_err *err)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	struct ibv_gid_entry *gids = NULL;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	union ibv_gid want;
	unsigned int ifindex;
	size_t n_gids = 0;
	int r = -EAGAIN;
	ssize_t n;

	if (!list)
		return hpn_err_set(err, HPN_E_RDMA, errno,
				   "RDMA device \"%s\" is not visible to libibverbs in the pod "
				   "netns: %s",
				   p->device,
				   errno == ENOSYS ? "the kernel has no RDMA support"
						   : strerror(errno));
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), p->device))
			ctx = ibv_open_device(list[i]);
	/* Not worth waiting for: the kernel shows a device in a netns at once. */
	if (!ctx) {
		r = hpn_err_set(err, HPN_E_RDMA, ENODEV,
				"RDMA device \"%s\" is not visible to libibverbs in the pod netns",
				p->device);
		goto out;
	}
	if (ibv_query_device(ctx, &da) || ibv_query_port(ctx, (uint8_t)p->port, &pa)) {
		r = hpn_err_set(err, HPN_E_RDMA, errno, "query RDMA device \"%s\" port %u: %s",
				p->device, p->port, strerror(errno));
		goto out;
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		hpn_err_set(err, HPN_E_RDMA, ENETDOWN,
			    "RDMA device \"%s\" port %u is %s, not ACTIVE", p->device, p->port,
			    ibv_port_state_str(pa.state));
		goto out;
	}
	snprintf(p->b->device, sizeof(p->b->device), "%s", p->device);
	p->b->port = p->port;
	if (pa.link_layer == IBV_LINK_LAYER_INFINIBAND) {
		union ibv_gid g;

		/* InfiniBand: addressed by LID and port GUID, GID 0 (the port GUID's). */
		snprintf(p->b->link_layer, sizeof(p->b->link_layer), "InfiniBand");
		snprintf(p->b->transport, sizeof(p->b->transport), "ib");
		if (ibv_query_gid(ctx, (uint8_t)p->port, 0, &g)) {
			r = hpn_err_set(err, HPN_E_RDMA, errno, "read GID 0 of \"%s\" port %u",
					p->device, p->port);
			goto out;
		}
		p->b->lid = pa.lid;
		snprintf(p->b->port_guid, sizeof(p->b->port_guid),
			 "%02x%02x:%02x%02x:%02x%02x:%02x%02x", g.raw[8], g.raw[9], g.raw[10],
			 g.raw[11], g.raw[12], g.raw[13], g.raw[14], g.raw[15]);
		inet_ntop(AF_INET6, g.raw, p->b->gid, sizeof(p->b->gid));
		p->b->gid_index = 0;
		r = pick_addr(p->ifname, &p->addr);
		goto out;
	}
	snprintf(p->b->link_layer, sizeof(p->b->link_layer), "Ethernet");
	r = pick_addr(p->ifname, &p->addr);
	if (r < 0)
		goto out;
	if (!p->addr.ss_family) {
		r = -EAGAIN;
		hpn_err_set(err, HPN_E_RDMA, EADDRNOTAVAIL, "\"%s\" has no IP address to bind",
			    p->ifname);
		goto out;
	}
	addr_str(&p->addr, p->b->addr);
	if (ctx->device->transport_type == IBV_TRANSPORT_IWARP) {
		/* iWARP (erdma) connects by IP through rdma_cm; GID 0 is the MAC's. */
		snprintf(p->b->transport, sizeof(p->b->transport), "iwarp");
		p->b->gid_index = 0;
		r = 0;
		goto out;
	}
	snprintf(p->b->transport, sizeof(p->b->transport), "roce");
	ifindex = if_nametoindex(p->ifname);
	addr_gid(&p->addr, &want);
	/* The table call returns every port's entries: room for all of them. */
	for (uint8_t i = 1; i <= da.phys_port_cnt; i++) {
		struct ibv_port_attr pi;

		n_gids += ibv_query_port(ctx, i, &pi) == 0 ? (size_t)pi.gid_tbl_len : 0;
	}
	gids = calloc(n_gids + 1, sizeof(*gids));
	if (!gids) {
		r = -ENOMEM;
		goto out;
	}
	n = ibv_query_gid_table(ctx, gids, n_gids + 1, 0);
	if (n < 0) {
		r = hpn_err_set(err, HPN_E_RDMA, (int)-n, "read the GID table of \"%s\": %s",
				p->device, strerror((int)-n));
		goto out;
	}
	for (ssize_t i = 0; i < n; i++) {
		const struct ibv_gid_entry *e = &gids[i];

		if (e->port_num != p->port || e->gid_type != IBV_GID_TYPE_ROCE_V2 ||
		    e->ndev_ifindex != ifindex || memcmp(e->gid.raw, want.raw, 16) ||
		    (p->want_gid >= 0 && e->gid_index != (uint32_t)p->want_gid))
			continue;
		p->b->gid_index = (int)e->gid_index;
		inet_ntop(AF_INET6, e->gid.raw, p->b->gid, sizeof(p->b->gid));
		r = 0;
		goto out;
	}
	if (p->want_gid >= 0)
		hpn_err_set(err, HPN_E_RDMA, ENOENT,
			    "RDMA device \"%s\" port %u has no RoCE v2 GID at index %d for \"%s\" "
			    "address %s",
			    p->device, p->port, p->want_gid, p->ifname, p->b->addr);
	else
		hpn_err_set(err, HPN_E_RDMA, ENOENT,
			    "RDMA device \"%s\" port %u has no RoCE v2 GID for \"%s\" address %s",
			    p->device, p->port, p->ifname, p->b->addr);
out:
	free(gids);
	if (ctx)
		ibv_close_device(ctx);
	ibv_free_device_list(list);
	return r;
}

/* rdma_cm's view must agree: binding the address picks the same device and port. */
static int cm_confirm(struct probe *p, struct hpn_err *err)
{
	struct rdma_cm_id *id = NULL;
	struct sockaddr_storage ss = p->addr;
	const char *got;
	int r = 0;

	if (ss.ss_family == AF_INET6 &&
	    IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)&ss)->sin6_addr))
		((struct sockaddr_in6 *)&ss)->sin6_scope_id = if_nametoindex(p->ifname);
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return hpn_err_set(err, HPN_E_RDMA, errno, "rdma_cm: create an id: %s",
				   strerror(errno));
	if (rdma_bind_addr(id, (struct sockaddr *)&ss)) {
		r = hpn_err_set(err, HPN_E_RDMA, errno, "rdma_cm: bind %s: %s", p->b->addr,
				strerror(errno));
	} else if (!id->verbs) {
		r = hpn_err_set(err, HPN_E_RDMA, ENODEV,
				"rdma_cm: %s does not resolve to an RDMA device", p->b->addr);
	} else {
		got = ibv_get_device_name(id->verbs->device);
		if (strcmp(got, p->device) || id->port_num != p->port)
			r = hpn_err_set(
				err, HPN_E_RDMA, EXDEV,
				"rdma_cm: %s resolves to \"%s\" port %u, not \"%s\" port %u",
				p->b->addr, got, id->port_num, p->device, p->port);
	}
	rdma_destroy_id(id);
	return r;
}

static void child(int wfd, int netns_fd, const struct probe *given, int timeout_ms)
{
	struct reply rep = { 0 };
	struct probe q = *given, *p = &q;
	long long deadline = now_ms() + timeout_ms;
	ssize_t w;

	q.b = &rep.bind;
	rep.r = enter_pod(netns_fd, &rep.err);
	if (rep.r == 0)
		rep.r = verbs_load(&rep.err);
	while (rep.r == 0) {
		struct hpn_err e = { 0 };

		rep.r = probe_once(p, &e);
		if (rep.r == -EAGAIN && now_ms() < deadline) {
			rep.r = 0;
			usleep(POLL_MS * 1000);
			continue;
		}
		rep.err = e;
		if (rep.r == -EAGAIN && timeout_ms > 0)
			hpn_err_prefix(&rep.err, "after %d ms", timeout_ms);
		break;
	}
	if (rep.r == 0 && p->addr.ss_family)
		rep.r = cm_confirm(p, &rep.err);
	/* A fact for the caller to report, not a condition: verbs work without QP1. */
	if (rep.r == 0 && strcmp(rep.bind.transport, "iwarp")) {
		struct hpn_err e = { 0 };
		int g = hpn_rdma_has_gsi(p->device, p->port, &e);

		rep.bind.gsi_known = g >= 0;
		rep.bind.gsi = g == 1;
	}
	if (rep.r == 0)
		hpn_rdma_cdevs("/sys", p->device, &rep.bind.cdevs);
	w = write(wfd, &rep, sizeof(rep));
	_exit(w == (ssize_t)sizeof(rep) ? 0 : 1);
}

/*
 * How proofs are started, for the whole process: -1, by fork() alone (the
 * plugin: one thread, short-lived); else an O_PATH fd of this process's own
 * executable, which each proof runs afresh as HPN_RDMA_PROOF_CMD
 * (hpn_rdma_proofs_by_exec). Set once, before any thread starts.
 */
static int proof_exe = -1;

int hpn_rdma_proofs_by_exec(void)
{
	int fd = open("/proc/self/exe", O_PATH | O_CLOEXEC), hi;

	if (fd < 0)
		return -errno;
	/* Above stdin and stdout, which the spawn replaces in the child. */
	hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	close(fd);
	if (hi < 0)
		return -errno;
	if (proof_exe >= 0)
		close(proof_exe);
	proof_exe = hi;
	return 0;
}

/*
 * The proof of pr run by a fresh process of this executable: posix_spawn, so
 * nothing of this process but its executable, its stderr and what the
 * arguments say reaches the child (a fork of a process with threads would
 * run the proof's malloc, dlopen and libibverbs with whatever locks the
 * other threads held). The child's stdin is the netns (none: -1 in its
 * arguments, and it fails as a fork's child would), its stdout wfd;
 * every other fd of ours is O_CLOEXEC, the other proofs' pipes too.
 */
static int proof_spawn(int netns_fd, const struct probe *pr, int timeout_ms, int wfd,
		       pid_t *ret_pid)
{
	char exe[32], parent[16], port[16], gid[16], timeout[16];
	char *argv[] = { program_invocation_name,
			 (char *)HPN_RDMA_PROOF_CMD,
			 parent,
			 netns_fd >= 0 ? (char *)"0" : (char *)"-1",
			 (char *)pr->device,
			 port,
			 (char *)pr->ifname,
			 gid,
			 timeout,
			 NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none;
	int r;

	snprintf(exe, sizeof(exe), "/proc/self/fd/%d", proof_exe);
	snprintf(parent, sizeof(parent), "%d", (int)getpid());
	snprintf(port, sizeof(port), "%u", pr->port);
	snprintf(gid, sizeof(gid), "%d", pr->want_gid);
	snprintf(timeout, sizeof(timeout), "%d", timeout_ms);
	sigemptyset(&none);
	r = posix_spawn_file_actions_init(&fa);
	if (r)
		return -r;
	r = posix_spawnattr_init(&attr);
	if (r) {
		posix_spawn_file_actions_destroy(&fa);
		return -r;
	}
	/* In this order: wfd is above 2, netns_fd may be anything (a same-fd dup2 keeps it). */
	if (netns_fd >= 0)
		r = posix_spawn_file_actions_adddup2(&fa, netns_fd, STDIN_FILENO);
	r = r ?: posix_spawn_file_actions_adddup2(&fa, wfd, STDOUT_FILENO);
	/* The loop's threads block the signals it takes: a fresh process blocks none. */
	r = r ?: posix_spawnattr_setsigmask(&attr, &none);
	r = r ?: posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
	r = r ?: posix_spawn(ret_pid, exe, &fa, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	return -r;
}

/* Digits of an int in [min, max], whole. */
static bool arg_int(const char *s, long min, long max, int *ret)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return false;
	*ret = (int)v;
	return true;
}

int hpn_rdma_proof_main(int argc, char **argv)
{
	struct probe pr = { 0 };
	int parent, netns_fd, port, timeout_ms;

	if (argc != 8 || !arg_int(argv[1], 1, INT_MAX, &parent) ||
	    !arg_int(argv[2], -1, 0, &netns_fd) || !argv[3][0] ||
	    strlen(argv[3]) >= HPN_IBDEV_MAX || !arg_int(argv[4], 0, 255, &port) || !argv[5][0] ||
	    strlen(argv[5]) >= IFNAMSIZ || !arg_int(argv[6], -1, INT_MAX, &pr.want_gid) ||
	    !arg_int(argv[7], 0, INT_MAX, &timeout_ms)) {
		fprintf(stderr,
			"%s %s: bad arguments; this subcommand is the RDMA proof's own, "
			"started by hpn_rdma_prove (lib/verbs.c), not for use by hand\n",
			program_invocation_short_name, HPN_RDMA_PROOF_CMD);
		return 2;
	}
	/* The parent may be killed before it reaps us: go with it, now or later. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(1);
	pr.device = argv[3];
	pr.port = (uint32_t)port;
	pr.ifname = argv[5];
	child(STDOUT_FILENO, netns_fd, &pr, timeout_ms);
	return 1; /* child() never returns */
}

/* The child can outlive its answer by this much before the parent gives up on it. */
#define GUARD_MS 30000

/* A proof under way: its child, the read end of its pipe, what it has said so far. */
struct running {
	size_t idx; /* in the caller's array */
	pid_t pid;
	int fd;
	size_t got;
	long long guard; /* past this, the child is killed */
	struct reply rep;
};

/*
 * Starts the child of proof p into s: spawned afresh once the process has
 * chosen so (hpn_rdma_proofs_by_exec), else forked, when the fork closes the
 * pipes of the proofs already running (n_run in run). Either dies with the
 * calling thread and runs the same child().
 */
static int proof_start(int netns_fd, struct hpn_rdma_proof *p, int timeout_ms,
		       const struct running *run, size_t n_run, struct running *s)
{
	struct probe pr = {
		.device = p->device, .ifname = p->ifname, .port = p->port, .want_gid = p->want_gid
	};
	pid_t parent = getpid();
	int fds[2];

	s->fd = -1;
	s->got = 0;
	s->guard = now_ms() + timeout_ms + GUARD_MS;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return hpn_err_set(&p->err, HPN_E_INTERNAL, errno, "pipe: %s", strerror(errno));
	if (proof_exe >= 0) {
		int hi = fds[1] > STDERR_FILENO ? fds[1] : fcntl(fds[1], F_DUPFD_CLOEXEC, 3);
		int r = hi < 0 ? -errno : proof_spawn(netns_fd, &pr, timeout_ms, hi, &s->pid);

		if (hi >= 0 && hi != fds[1])
			close(hi);
		close(fds[1]);
		if (r < 0) {
			close(fds[0]);
			return hpn_err_set(&p->err, HPN_E_INTERNAL, -r, "spawn the RDMA check: %s",
					   strerror(-r));
		}
		s->fd = fds[0];
		return 0;
	}
	s->pid = fork();
	if (s->pid < 0) {
		int e = errno;

		close(fds[0]);
		close(fds[1]);
		return hpn_err_set(&p->err, HPN_E_INTERNAL, e, "fork: %s", strerror(e));
	}
	if (s->pid == 0) {
		/* The parent may be killed before it reaps us: go with it, now or later. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(1);
		close(fds[0]);
		for (size_t k = 0; k < n_run; k++)
			close(run[k].fd);
		child(fds[1], netns_fd, &pr, timeout_ms);
	}
	close(fds[1]);
	s->fd = fds[0];
	return 0;
}

/*
 * Ends the proof of s, answered or not: kills a child that has not answered
 * in full, reaps it, closes its pipe, and writes the outcome into p; with
 * stop, the outcome is -ECANCELED whatever the child said.
 */
static void proof_end(struct running *s, struct hpn_rdma_proof *p, bool stop)
{
	bool answered = s->got == sizeof(s->rep);
	int status = 0;

	if (!answered)
		kill(s->pid, SIGKILL);
	while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
		;
	close(s->fd);
	if (stop) {
		p->r = hpn_err_set(&p->err, HPN_E_INTERNAL, ECANCELED,
				   "the RDMA check of \"%s\" was stopped: one before it failed",
				   p->device);
	} else if (!answered) {
		p->r = hpn_err_set(&p->err, HPN_E_INTERNAL, EIO,
				   "the RDMA check of \"%s\" died without an answer (status %d)",
				   p->device, status);
	} else if (s->rep.r < 0) {
		p->err = s->rep.err;
		p->r = s->rep.r;
	} else {
		*p->ret = s->rep.bind;
		p->r = 0;
	}
}

/* Reads what s's child has written; true once it has answered in full or can say no more. */
static bool proof_read(struct running *s)
{
	ssize_t n = read(s->fd, (char *)&s->rep + s->got, sizeof(s->rep) - s->got);

	if (n < 0)
		return errno != EINTR && errno != EAGAIN;
	s->got += (size_t)n;
	return n == 0 || s->got == sizeof(s->rep);
}

int hpn_rdma_prove(int netns_fd, struct hpn_rdma_proof *p, size_t n, int timeout_ms)
{
	struct running run[HPN_RDMA_PROOFS_MAX];
	struct pollfd pfd[HPN_RDMA_PROOFS_MAX];
	size_t next = 0, n_run = 0, first = n; /* first: the first failure so far */

	for (size_t i = 0; i < n; i++) {
		p[i].r = p[i].device ? -ECANCELED : 0;
		memset(&p[i].err, 0, sizeof(p[i].err));
	}
	for (;;) {
		long long now, wait = -1;
		int pr;

		/* Start proofs in order while there is room; none after a failure. */
		while (n_run < HPN_RDMA_PROOFS_MAX && next < first) {
			struct running *s = &run[n_run];

			if (!p[next].device) {
				next++;
				continue;
			}
			s->idx = next;
			p[next].r = proof_start(netns_fd, &p[next], timeout_ms, run, n_run, s);
			if (p[next].r < 0)
				first = next;
			else
				n_run++;
			next++;
		}
		if (!n_run)
			break;
		/* Wait for any child to answer or die, or the earliest guard. */
		now = now_ms();
		for (size_t k = 0; k < n_run; k++) {
			long long left = run[k].guard > now ? run[k].guard - now : 0;

			pfd[k] = (struct pollfd){ .fd = run[k].fd, .events = POLLIN };
			if (wait < 0 || left < wait)
				wait = left;
		}
		pr = poll(pfd, n_run, (int)wait);
		if (pr < 0 && errno != EINTR)
			now = LLONG_MAX; /* cannot wait: every child ends unanswered */
		else
			now = now_ms();
		/*
		 * Backwards, so that moving the last slot into a finished one's place
		 * leaves the slots still to look at where poll saw them.
		 */
		for (size_t k = n_run; k-- > 0;) {
			struct running *s = &run[k];
			bool done = now >= s->guard;

			if (!done && pr > 0 && pfd[k].revents)
				done = proof_read(s);
			if (!done)
				continue;
			proof_end(s, &p[s->idx], false);
			if (p[s->idx].r < 0 && s->idx < first)
				first = s->idx;
			if (k != --n_run)
				*s = run[n_run];
		}
		/* A failure stops the proofs after it: only the first in order is reported. */
		for (size_t k = n_run; k-- > 0;) {
			struct running *s = &run[k];

			if (s->idx < first)
				continue;
			proof_end(s, &p[s->idx], true);
			if (k != --n_run)
				*s = run[n_run];
		}
	}
	for (size_t i = first + 1; i < n; i++)
		if (p[i].r == -ECANCELED && !p[i].err.code)
			hpn_err_set(
				&p[i].err, HPN_E_INTERNAL, ECANCELED,
				"the RDMA check of \"%s\" was not started: one before it failed",
				p[i].device);
	return first < n ? p[first].r : 0;
}

int hpn_rdma_verify(int netns_fd, const char *device, uint32_t port, const char *ifname,
		    int want_gid, int timeout_ms, struct hpn_rdma_bind *ret, struct hpn_err *err)
{
	struct hpn_rdma_proof p = {
		.device = device, .ifname = ifname, .port = port, .want_gid = want_gid, .ret = ret
	};
	int r = hpn_rdma_prove(netns_fd, &p, 1, timeout_ms);

	if (r < 0)
		*err = p.err;
	return r;
}
