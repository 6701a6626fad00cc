// SPDX-License-Identifier: Apache-2.0
#include "nccl.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define FILE_MAX   ((size_t)64 * 1024)
#define TMP_PREFIX ".nccl.conf."

/* DESIGN.md's table, from the managed service's public GPU model list. */
#define GPUS(n) (UINT64_C(1) << (n))
/*
 * Type 1's fabric settings, as PAI Lingjun documents them for its 8-GPU
 * RoCE nodes: traffic class 136 (DSCP 34), service
 * level 5, the longer timeout (4.096 us * 2^22) and 8 QPs per connection.
 * NCCL_IB_GID_INDEX, which it gives as 3, stays computed from the proof.
 */
#define TYPE1_ENV                                                                                  \
	{                                                                                          \
		.v = { { (char *)"NCCL_IB_TC", (char *)"136" },                                    \
		       { (char *)"NCCL_IB_SL", (char *)"5" },                                      \
		       { (char *)"NCCL_IB_TIMEOUT", (char *)"22" },                                \
		       { (char *)"NCCL_IB_QPS_PER_CONNECTION", (char *)"8" } },                    \
		.n = 4                                                                             \
	}
static const struct hpn_nccl_profile builtin[] = {
	{ .name = "GU8TF",
	  .ib = HPN_NCCL_IB_ON,
	  .drivers = HPN_NCCL_DRV_MLX5,
	  .gpu_counts = GPUS(8),
	  .env = TYPE1_ENV },
	{ .name = "GU8TEF",
	  .ib = HPN_NCCL_IB_ON,
	  .drivers = HPN_NCCL_DRV_MLX5,
	  .gpu_counts = GPUS(8),
	  .env = TYPE1_ENV },
	{ .name = "GX8SF",
	  .ib = HPN_NCCL_IB_ON,
	  .drivers = HPN_NCCL_DRV_MLX5,
	  .gpu_counts = GPUS(8),
	  .env = TYPE1_ENV },
	{ .name = "P16EN", .ib = HPN_NCCL_IB_OFF, .gpu_counts = GPUS(16) },
	{ .name = "gpu-hpn",
	  .ib = HPN_NCCL_IB_AUTO,
	  .gpu_counts = GPUS(1) | GPUS(2) | GPUS(4) | GPUS(8) | GPUS(16) },
};
static const struct hpn_nccl_profile auto_profile = { .name = "auto", .ib = HPN_NCCL_IB_AUTO };

/*
 * Profiles chosen by the driver of the devices NCCL's IB transport uses,
 * named after it: eRDMA (in RoCE v2: compat, or the OFED-style package) as
 * PAI's eRDMA training guide sets it (8 QPs per connection, 16 channels at
 * least, no external net plugin). Not its NCCL_IB_GID_INDEX=1 (computed
 * from the proof) nor NCCL_IB_HCA=erdma (a prefix that no rdma-core name
 * such as rocep26s0 has: the exact name is computed), and no traffic class,
 * service level or timeout: those are a Lingjun RoCE fabric's, not eRDMA's.
 */
static const struct hpn_nccl_profile builtin_drivers[] = {
	{ .name = "erdma",
	  .ib = HPN_NCCL_IB_AUTO,
	  .env = { .v = { { (char *)"NCCL_IB_QPS_PER_CONNECTION", (char *)"8" },
			  { (char *)"NCCL_MIN_NCHANNELS", (char *)"16" },
			  { (char *)"NCCL_NET_PLUGIN", (char *)"none" } },
		   .n = 3 } },
};

static const char *const computed[] = {
	"NCCL_IB_DISABLE",	    "NCCL_IB_HCA",	   "NCCL_IB_GID_INDEX",
	"NCCL_IB_ROCE_VERSION_NUM", "NCCL_IB_ADDR_FAMILY", "NCCL_IB_ADDR_RANGE",
	"NCCL_SOCKET_IFNAME",
};

static const char *const drivers[] = { "mlx5", "erdma", "rxe", "other" };

bool hpn_nccl_computed_name(const char *s)
{
	for (size_t i = 0; i < HPN_ARRAY_SIZE(computed); i++)
		if (!strcmp(s, computed[i]))
			return true;
	return false;
}

unsigned int hpn_nccl_driver_bit(const char *driver)
{
	for (size_t i = 0; driver && i < HPN_ARRAY_SIZE(drivers); i++)
		if (!strcmp(driver, drivers[i]))
			return 1U << i;
	return 0;
}

bool hpn_nccl_driver_profile_name(const char *name)
{
	for (size_t i = 0; name && i < HPN_ARRAY_SIZE(drivers); i++)
		if (!strcasecmp(name, drivers[i]))
			return true;
	return false;
}

/* The profile called name (any case): the config's, else one of table[0..n); NULL. */
static const struct hpn_nccl_profile *find_profile(const struct hpn_nccl_conf *nc, const char *name,
						   const struct hpn_nccl_profile *table, size_t n)
{
	for (size_t i = 0; i < nc->n_profiles; i++)
		if (!strcasecmp(nc->profiles[i].name, name))
			return &nc->profiles[i];
	for (size_t i = 0; i < n; i++)
		if (!strcasecmp(table[i].name, name))
			return &table[i];
	return NULL;
}

const struct hpn_nccl_profile *hpn_nccl_driver_profile(const struct hpn_nccl_conf *nc,
						       const char *driver)
{
	if (!hpn_nccl_driver_profile_name(driver))
		return NULL;
	return find_profile(nc, driver, builtin_drivers, HPN_ARRAY_SIZE(builtin_drivers));
}

const struct hpn_nccl_profile *hpn_nccl_profile(const struct hpn_nccl_conf *nc, const char *model)
{
	const struct hpn_nccl_profile *p;

	/* A driver's profile is never a GPU model's. */
	if (!model || !model[0] || hpn_nccl_driver_profile_name(model))
		return &auto_profile;
	p = find_profile(nc, model, builtin, HPN_ARRAY_SIZE(builtin));
	return p ? p : &auto_profile;
}

static void counts_str(uint64_t mask, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int n = 1; n <= HPN_NCCL_MAX_GPUS && off < len; n++)
		if (mask & GPUS(n))
			off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? "/" : "", n);
}

int hpn_nccl_check_gpus(const struct hpn_nccl_profile *p, int gpus, struct hpn_err *err)
{
	char allowed[128];

	if (!gpus || !p->gpu_counts)
		return 0;
	if (gpus > 0 && gpus <= HPN_NCCL_MAX_GPUS && (p->gpu_counts & GPUS(gpus)))
		return 0;
	counts_str(p->gpu_counts, allowed, sizeof(allowed));
	return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
			   "GPU model series %s runs %s-GPU pods only; this pod has %d GPUs",
			   p->name, allowed, gpus);
}

static void drivers_str(unsigned int mask, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < HPN_ARRAY_SIZE(drivers) && off < len; i++)
		if (mask & (1U << i))
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? " or " : "",
						drivers[i]);
}

int hpn_nccl_check_driver(const struct hpn_nccl_profile *p, const char *driver, struct hpn_err *err)
{
	char want[64];

	if (!driver) {
		if (p->ib != HPN_NCCL_IB_ON)
			return 0;
		return hpn_err_set(err, HPN_E_RDMA, ENODEV,
				   "GPU model series %s needs an RDMA device and none is bound",
				   p->name);
	}
	if (!p->drivers || (p->drivers & hpn_nccl_driver_bit(driver)))
		return 0;
	drivers_str(p->drivers, want, sizeof(want));
	return hpn_err_set(err, HPN_E_RDMA, EINVAL,
			   "GPU model series %s needs a %s RDMA device; the NIC's is %s", p->name,
			   want, driver);
}

/* addr/prefix of an address in CIDR notation, as its network: 10.1.2.3/24 -> 10.1.2.0/24. */
static int subnet_of(const char *cidr, int *family, char *out, size_t len)
{
	char buf[INET6_ADDRSTRLEN + 8], *slash;
	unsigned char a[16];
	char *end;
	long plen;
	long bytes;
	int af;

	if (hpn_snprintf(buf, sizeof(buf), "%s", cidr) < 0 || !(slash = strchr(buf, '/')))
		return -EINVAL;
	*slash = '\0';
	af = strchr(buf, ':') ? AF_INET6 : AF_INET;
	bytes = af == AF_INET ? 4 : 16;
	errno = 0;
	plen = strtol(slash + 1, &end, 10);
	if (*end || errno || plen < 0 || plen > bytes * 8 || inet_pton(af, buf, a) != 1)
		return -EINVAL;
	for (long i = 0; i < bytes; i++) {
		long keep = plen - i * 8;

		if (keep <= 0)
			a[i] = 0;
		else if (keep < 8)
			a[i] &= (unsigned char)(0xff << (8 - keep));
	}
	if (!inet_ntop(af, a, buf, sizeof(buf)))
		return -errno;
	*family = af;
	return hpn_snprintf(out, len, "%s/%ld", buf, plen);
}

static int set(struct hpn_vars *v, const char *key, const char *value, struct hpn_err *err)
{
	int r;

	if (!hpn_nccl_valid_value(value))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, E2BIG,
				   "NCCL setting %s would be %zu bytes; NCCL reads at most %d", key,
				   strlen(value), HPN_NCCL_VALUE_MAX);
	r = hpn_vars_set(v, key, value);
	if (r == -E2BIG)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, E2BIG, "more than %d NCCL settings",
				   HPN_MAX_VARS);
	return r;
}

bool hpn_nccl_ib_transport(const char *transport)
{
	return transport && strcmp(transport, "iwarp") != 0;
}

/* Bound, and usable by NCCL's IB transport. */
static bool ib_usable(const struct hpn_rdma_info *ri)
{
	return ri->bound && hpn_nccl_ib_transport(ri->transport);
}

int hpn_nccl_hca(const char *device, int port, char *out, size_t len)
{
	return hpn_snprintf(out, len, "=%s:%d", device, port);
}

/* The driver every device NCCL's IB transport uses shares, else NULL. */
static const char *ib_driver(const struct hpn_bound_nic *nics, size_t n)
{
	const char *d = NULL;

	for (size_t i = 0; i < n; i++) {
		if (!ib_usable(nics[i].rdma))
			continue;
		if (d && strcmp(d, nics[i].rdma->driver))
			return NULL;
		d = nics[i].rdma->driver;
	}
	return d;
}

static int render_ib(const struct hpn_nccl_profile *p, const struct hpn_bound_nic *nics, size_t n,
		     struct hpn_vars *v, struct hpn_err *err)
{
	char hca[HPN_NCCL_VALUE_MAX + 2] = "=", range[INET6_ADDRSTRLEN + 8];
	const struct hpn_bound_nic *first = NULL;
	bool roce = true, same_gid = true;
	size_t off = 1;
	int r, family = AF_INET;

	for (size_t i = 0; i < n; i++) {
		const struct hpn_rdma_info *ri = nics[i].rdma;

		if (!ri->bound)
			continue;
		r = hpn_nccl_check_driver(p, ri->driver, err);
		if (r < 0)
			return r;
		/*
		 * iWARP (erdma's default mode) connects its QPs only through
		 * iw_cm; NCCL's IB transport connects them itself: never listed.
		 */
		if (!ib_usable(ri)) {
			if (p->ib != HPN_NCCL_IB_ON)
				continue;
			return hpn_err_set(err, HPN_E_RDMA, EPROTONOSUPPORT,
					   "GPU model series %s needs NCCL's IB transport, and "
					   "RDMA device \"%s\" (%s) speaks iWARP, which it cannot "
					   "use",
					   p->name, ri->device, ri->driver);
		}
		/* "=" makes NCCL match names exactly: mlx5_1 would also match mlx5_10. */
		off += (size_t)snprintf(hca + off, sizeof(hca) - off, "%s%s:%d", first ? "," : "",
					ri->device, ri->port);
		if (off >= sizeof(hca))
			off = sizeof(hca) - 1;
		roce = roce && !strcmp(ri->transport, "roce");
		if (first && ri->gid_index != first->rdma->gid_index)
			same_gid = false;
		if (!first)
			first = &nics[i];
	}
	/* Only a profile with ib on gets here without a device. */
	if (!first)
		return hpn_nccl_check_driver(p, NULL, err);
	r = set(v, "NCCL_IB_DISABLE", "0", err);
	if (r >= 0)
		r = set(v, "NCCL_IB_HCA", hca, err);
	/* InfiniBand: NCCL's own GID choice (0, the port GUID's) is right; RoCE needs the v2 entry. */
	if (r < 0 || !roce)
		return r;
	if (same_gid && first->rdma->gid_index >= 0) {
		char num[16];

		snprintf(num, sizeof(num), "%d", first->rdma->gid_index);
		return set(v, "NCCL_IB_GID_INDEX", num, err);
	}
	/* Different indexes per device: let NCCL pick the RoCE v2 GID in hpn0's subnet. */
	r = set(v, "NCCL_IB_GID_INDEX", "-1", err);
	if (r >= 0)
		r = set(v, "NCCL_IB_ROCE_VERSION_NUM", "2", err);
	if (r >= 0 && first->address &&
	    subnet_of(first->address, &family, range, sizeof(range)) >= 0) {
		r = set(v, "NCCL_IB_ADDR_FAMILY", family == AF_INET ? "AF_INET" : "AF_INET6", err);
		if (r >= 0)
			r = set(v, "NCCL_IB_ADDR_RANGE", range, err);
	}
	return r;
}

int hpn_nccl_render(const struct hpn_nccl_conf *nc, const struct hpn_nccl_profile *p,
		    const struct hpn_bound_nic *nics, size_t n, struct hpn_vars *out,
		    struct hpn_err *err)
{
	const struct hpn_nccl_profile *dp = NULL;
	struct hpn_vars v = { 0 };
	bool usable = false;
	int r;

	for (size_t i = 0; i < n; i++)
		usable = usable || ib_usable(nics[i].rdma);
	/* Only iWARP bound (or nothing): NCCL's IB transport has no device, sockets carry it. */
	if (p->ib == HPN_NCCL_IB_ON || (p->ib == HPN_NCCL_IB_AUTO && usable)) {
		r = render_ib(p, nics, n, &v, err);
		if (r >= 0)
			dp = hpn_nccl_driver_profile(nc, ib_driver(nics, n));
	} else {
		r = set(&v, "NCCL_IB_DISABLE", "1", err);
		if (r >= 0)
			r = set(&v, "NCCL_IB_HCA", "", err);
	}
	if (r >= 0)
		r = set(&v, "NCCL_SOCKET_IFNAME",
			nc->socket_ifname ? nc->socket_ifname : HPN_DEFAULT_SOCKET_IF, err);
	/*
	 * The driver's keys (for the devices NCCL's IB transport uses, all of
	 * one driver), the model's, then the network's: the more specific
	 * config wins.
	 */
	for (size_t i = 0; r >= 0 && dp && i < dp->env.n; i++)
		r = set(&v, dp->env.v[i].key, dp->env.v[i].value, err);
	for (size_t i = 0; r >= 0 && i < p->env.n; i++)
		r = set(&v, p->env.v[i].key, p->env.v[i].value, err);
	for (size_t i = 0; r >= 0 && i < nc->env.n; i++)
		r = set(&v, nc->env.v[i].key, nc->env.v[i].value, err);
	if (r < 0) {
		hpn_vars_free(&v);
		return r;
	}
	*out = v;
	return 0;
}

/* Comment text: pod names come from the runtime; keep them to one printable line. */
static void clean(char *dst, const char *src, size_t len)
{
	size_t i = 0;

	for (; src && src[i] && i + 1 < len; i++)
		dst[i] = (src[i] > 0x20 && src[i] < 0x7f && src[i] != '=') ? src[i] : '?';
	dst[i] = '\0';
}

char *hpn_nccl_owner_line(const struct hpn_nccl_owner *o)
{
	char *line;

	/* No '=' in comments: an NCCL that did not skip them would still set nothing. */
	if (asprintf(&line, "# owner container %s network %s ifname %s", o->container_id,
		     o->network, o->ifname) < 0)
		return NULL;
	return line;
}

bool hpn_nccl_valid_conf_file(const char *path)
{
	char buf[HPN_NCCL_VALUE_MAX + 1];
	size_t n = strlen(path);

	if (path[0] != '/' || n < 2 || n > HPN_NCCL_VALUE_MAX || path[n - 1] == '/')
		return false;
	/* Each component a file name we would create (no "." or ".."): the pod's mount path is
	 * the one it says. */
	memcpy(buf, path, n + 1);
	for (char *save = NULL, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save))
		if (!hpn_valid_path_component(c))
			return false;
	return true;
}

char *hpn_nccl_format(const struct hpn_vars *v, const struct hpn_nccl_owner *o,
		      const char *conf_file, const struct hpn_bound_nic *nics, size_t n)
{
	char ns[256], name[256], uid[256];
	_cleanup_free_ char *owner = hpn_nccl_owner_line(o);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	clean(ns, o->pod_namespace ? o->pod_namespace : "-", sizeof(ns));
	clean(name, o->pod_name ? o->pod_name : "-", sizeof(name));
	clean(uid, o->pod_uid ? o->pod_uid : "-", sizeof(uid));
	fprintf(f, "# NCCL settings written by hpn-rdma for what it bound; do not edit\n");
	fprintf(f, "# pod %s/%s uid %s\n", ns, name, uid);
	if (!owner) {
		fclose(f);
		free(buf);
		return NULL;
	}
	fprintf(f, "%s\n", owner);
	/*
	 * Mounted elsewhere than /etc/nccl.conf, the file is read only through
	 * NCCL_CONF_FILE, which NCCL has from 2.23 on (older ones read
	 * ~/.nccl.conf instead). No '=' here either.
	 */
	if (conf_file && strcmp(conf_file, HPN_DEFAULT_NCCL_CONF_FILE)) {
		char cf[HPN_NCCL_VALUE_MAX + 1];

		clean(cf, conf_file, sizeof(cf));
		fprintf(f, "# for NCCL_CONF_FILE set to %s (NCCL 2.23 and later)\n", cf);
	}
	for (size_t i = 0; i < n; i++) {
		const struct hpn_rdma_info *ri = nics[i].rdma;
		/* Comment text again: one line whatever a result holds. */
		char ifn[64], dev[64], gid[64], drv[32], tr[16];

		clean(ifn, nics[i].ifname ? nics[i].ifname : "?", sizeof(ifn));
		clean(dev, ri->device, sizeof(dev));
		clean(gid, ri->gid[0] ? ri->gid : "-", sizeof(gid));
		clean(drv, ri->driver, sizeof(drv));
		clean(tr, ri->transport, sizeof(tr));
		if (ri->bound)
			fprintf(f, "# device %s %s:%d gid %d %s %s %s\n", ifn, dev, ri->port,
				ri->gid_index, gid, drv, tr);
		else
			fprintf(f, "# device %s none\n", ifn);
		/* The GPU it serves (doc/gpu.md), and how near. */
		if (ri->gpu_id[0]) {
			char gid_[HPN_GPU_ID_MAX], gpci[HPN_PCI_STR], dist[HPN_DIST_STR];

			clean(gid_, ri->gpu_id, sizeof(gid_));
			clean(gpci, ri->gpu_pci[0] ? ri->gpu_pci : "-", sizeof(gpci));
			clean(dist, ri->gpu_dist, sizeof(dist));
			fprintf(f, "# gpu %s %s %s %s%s\n", ifn, gpci, gid_, dist,
				ri->gpu_far ? " far: a nearer NIC was free" : "");
		}
	}
	for (size_t i = 0; i < v->n; i++)
		fprintf(f, "%s=%s\n", v->v[i].key, v->v[i].value);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

int hpn_nccl_parse(const char *text, const char *owner_line, struct hpn_vars *out, bool *owner_ok)
{
	struct hpn_vars v = { 0 };
	const char *line = text ? text : "";
	size_t olen = owner_line ? strlen(owner_line) : 0;
	int r = 0;

	*owner_ok = false;
	while (r >= 0 && *line) {
		const char *nl = strchr(line, '\n');
		size_t n = nl ? (size_t)(nl - line) : strlen(line);
		const char *eq = memchr(line, '=', n);

		if (line[0] == '#') {
			if (olen && n == olen && !memcmp(line, owner_line, n))
				*owner_ok = true;
		} else if (eq && eq > line) {
			char *k = strndup(line, (size_t)(eq - line));
			char *val = strndup(eq + 1, n - (size_t)(eq - line) - 1);

			/* setenv(name, value, 0): the first setting of a name stays. */
			if (!k || !val)
				r = -ENOMEM;
			else if (!hpn_vars_get(&v, k))
				r = hpn_vars_set(&v, k, val);
			free(k);
			free(val);
		}
		line += n + (nl ? 1 : 0);
	}
	if (r < 0) {
		hpn_vars_free(&v);
		return r;
	}
	*out = v;
	return 0;
}

bool hpn_nccl_valid_key(const char *key)
{
	return hpn_valid_container_id(key) && strlen(key) < HPN_NCCL_KEY_MAX &&
	       strcmp(key, HPN_NCCL_NIC_DIR);
}

void hpn_nccl_key(const char *pod_uid, const char *container_id, char key[HPN_NCCL_KEY_MAX])
{
	/* A container named "nic" (cnitool's choice) is hashed too: the links' directory has it. */
	if (pod_uid ||
	    (strlen(container_id) < HPN_NCCL_KEY_MAX && strcmp(container_id, HPN_NCCL_NIC_DIR))) {
		snprintf(key, HPN_NCCL_KEY_MAX, "%s", pod_uid ? pod_uid : container_id);
		return;
	}
	snprintf(key, HPN_NCCL_KEY_MAX, "%.100s-%016llx", container_id,
		 (unsigned long long)hpn_hash64(container_id));
}

/* The key directory, locked; retried when a remover unlinked it under us. */
static int open_key(int dfd, const char *dir, const char *key, bool create, int *ret,
		    struct hpn_err *err)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		_cleanup_close_ int kfd = -1;
		struct stat st;

		if (create) {
			if (mkdirat(dfd, key, 0755) == 0) {
				/* Exactly 0755 whatever the runtime's umask. */
				kfd = openat(dfd, key,
					     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (kfd >= 0 && fchmod(kfd, 0755) < 0)
					return hpn_err_set(err, HPN_E_IO, errno, "chmod %s/%s: %s",
							   dir, key, strerror(errno));
			} else if (errno != EEXIST) {
				return hpn_err_set(err, HPN_E_IO, errno, "create %s/%s: %s", dir,
						   key, strerror(errno));
			}
		}
		if (kfd < 0)
			kfd = openat(dfd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		/* Not a directory of ours (a planted symlink or file): none to read or remove. */
		if (kfd < 0 && !create && (errno == ENOENT || errno == ELOOP || errno == ENOTDIR))
			return -ENOENT;
		if (kfd < 0 && errno == ENOENT)
			continue;
		if (kfd < 0)
			return hpn_err_set(err, HPN_E_IO, errno,
					   "open %s/%s: %s (a symlink or a file is not a hints "
					   "directory)",
					   dir, key, strerror(errno));
		if (flock(kfd, LOCK_EX) < 0)
			return hpn_err_set(err, HPN_E_IO, errno, "lock %s/%s: %s", dir, key,
					   strerror(errno));
		if (fstat(kfd, &st) < 0)
			return hpn_err_set(err, HPN_E_IO, errno, "stat %s/%s: %s", dir, key,
					   strerror(errno));
		if (st.st_nlink == 0) {
			if (!create)
				return -ENOENT;
			continue;
		}
		/* cppcheck-suppress unreadVariable ; TAKE_FD clears kfd for its cleanup handler */
		*ret = TAKE_FD(kfd);
		return 0;
	}
	return hpn_err_set(err, HPN_E_TRY_AGAIN, EAGAIN, "%s/%s keeps being removed", dir, key);
}

static int open_dir(const char *dir, bool create, int *ret, struct hpn_err *err)
{
	int fd;

	if (create) {
		int r = hpn_mkdir_p(dir, 0755);
		if (r < 0)
			return hpn_err_set(err, HPN_E_IO, -r, "create hints directory %s: %s", dir,
					   strerror(-r));
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && !create)
		return -ENOENT;
	if (fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open hints directory %s: %s", dir,
				   strerror(errno));
	*ret = fd;
	return 0;
}

int hpn_nccl_write(const char *dir, const char *key, const char *text, struct hpn_err *err)
{
	_cleanup_close_ int dfd = -1, kfd = -1;
	char tmp[64];
	int r;

	if (!hpn_nccl_valid_key(key))
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
				   "hints key \"%.64s\" is not a pod UID or container ID", key);
	r = open_dir(dir, true, &dfd, err);
	if (r >= 0)
		r = open_key(dfd, dir, key, true, &kfd, err);
	if (r < 0)
		return r;
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%ld", (long)getpid());
	/* Atomic, not synced: the pods that read it do not outlive a power loss. */
	r = hpn_write_atomic(kfd, tmp, HPN_NCCL_FILE, text, strlen(text), 0644);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, -r, "write %s/%s/%s: %s", dir, key, HPN_NCCL_FILE,
				   strerror(-r));
	return 0;
}

static int read_file(int kfd, const char *dir, const char *key, char **ret, struct hpn_err *err)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	size_t len;
	int r;

	fd = openat(kfd, HPN_NCCL_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return -ENOENT;
	if (fd < 0 || fstat(fd, &st) < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open %s/%s/%s: %s", dir, key,
				   HPN_NCCL_FILE, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return hpn_err_set(err, HPN_E_IO, EINVAL, "%s/%s/%s is not a regular file", dir,
				   key, HPN_NCCL_FILE);
	r = hpn_read_all(fd, FILE_MAX, ret, &len);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, -r, "read %s/%s/%s: %s", dir, key, HPN_NCCL_FILE,
				   strerror(-r));
	return 0;
}

int hpn_nccl_read(const char *dir, const char *key, char **ret, struct hpn_err *err)
{
	_cleanup_close_ int dfd = -1, kfd = -1;
	int r;

	if (!hpn_nccl_valid_key(key))
		return -ENOENT;
	r = open_dir(dir, false, &dfd, err);
	if (r >= 0)
		r = open_key(dfd, dir, key, false, &kfd, err);
	if (r >= 0)
		r = read_file(kfd, dir, key, ret, err);
	return r;
}

/* Temp files a killed writer left; they would keep the directory from going. */
static void remove_temps(int kfd)
{
	int fd = openat(kfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)))
			(void)unlinkat(kfd, e->d_name, 0);
	closedir(d);
}

int hpn_nccl_remove(const char *dir, const char *key, const char *owner_line, struct hpn_err *err)
{
	_cleanup_close_ int dfd = -1, kfd = -1;
	_cleanup_free_ char *text = NULL;
	struct hpn_vars v = { 0 };
	bool mine = false;
	int r;

	if (!hpn_nccl_valid_key(key))
		return 0;
	r = open_dir(dir, false, &dfd, err);
	if (r >= 0)
		r = open_key(dfd, dir, key, false, &kfd, err);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	r = read_file(kfd, dir, key, &text, err);
	if (r >= 0) {
		r = hpn_nccl_parse(text, owner_line, &v, &mine);
		hpn_vars_free(&v);
		if (r < 0)
			return r;
		if (mine && unlinkat(kfd, HPN_NCCL_FILE, 0) < 0 && errno != ENOENT)
			return hpn_err_set(err, HPN_E_IO, errno, "remove %s/%s/%s: %s", dir, key,
					   HPN_NCCL_FILE, strerror(errno));
	} else if (r != -ENOENT) {
		return r;
	}
	remove_temps(kfd);
	/* Still locked: a writer that opened it before re-checks st_nlink after its lock. */
	if (unlinkat(dfd, key, AT_REMOVEDIR) < 0 && errno != ENOTEMPTY && errno != ENOENT &&
	    errno != EEXIST)
		return hpn_err_set(err, HPN_E_IO, errno, "remove %s/%s: %s", dir, key,
				   strerror(errno));
	return 0;
}

bool hpn_nccl_valid_link(const char *id)
{
	size_t n = strlen(id);

	if (!n || n >= HPN_NIC_ID_MAX || !strcmp(id, ".") || !strcmp(id, ".."))
		return false;
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || strchr("_.:@-", *c)))
			return false;
	return true;
}

int hpn_nccl_file_path(const char *dir, const char *key, char *out, size_t len)
{
	if (!hpn_nccl_valid_key(key))
		return -EINVAL;
	return hpn_snprintf(out, len, "%s/%s/%s", dir, key, HPN_NCCL_FILE);
}

int hpn_nccl_link_file_path(const char *dir, const char *id, char *out, size_t len)
{
	if (!hpn_nccl_valid_link(id))
		return -EINVAL;
	return hpn_snprintf(out, len, "%s/%s/%s/%s", dir, HPN_NCCL_NIC_DIR, id, HPN_NCCL_FILE);
}

/* "../<key>": what a link of key's holds. */
static int link_target(const char *key, char out[HPN_NCCL_KEY_MAX + 3])
{
	if (!hpn_nccl_valid_key(key))
		return -EINVAL;
	snprintf(out, HPN_NCCL_KEY_MAX + 3, "../%s", key);
	return 0;
}

/*
 * dir/nic, opened without following a symlink and locked, in *ret (and dir
 * in *ret_dir): 0, or -ENOENT (not created; dir or dir/nic missing, or not a
 * directory of ours). Retried when an unlink removed it, empty, under us.
 */
static int open_nic(const char *dir, bool create, int *ret_dir, int *ret, struct hpn_err *err)
{
	_cleanup_close_ int dfd = -1;
	int r = open_dir(dir, create, &dfd, err);

	if (r < 0)
		return r;
	for (int attempt = 0; attempt < 8; attempt++) {
		_cleanup_close_ int nfd = -1;
		bool made = false;
		struct stat st;

		if (create) {
			made = mkdirat(dfd, HPN_NCCL_NIC_DIR, 0755) == 0;
			if (!made && errno != EEXIST)
				return hpn_err_set(err, HPN_E_IO, errno, "create %s/%s: %s", dir,
						   HPN_NCCL_NIC_DIR, strerror(errno));
		}
		nfd = openat(dfd, HPN_NCCL_NIC_DIR,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && !create && (errno == ENOENT || errno == ELOOP || errno == ENOTDIR))
			return -ENOENT;
		if (nfd < 0 && errno == ENOENT)
			continue;
		if (nfd < 0)
			return hpn_err_set(err, HPN_E_IO, errno,
					   "open %s/%s: %s (a symlink or a file is not the links' "
					   "directory)",
					   dir, HPN_NCCL_NIC_DIR, strerror(errno));
		/* Exactly 0755 whatever the umask: the runtime resolves the links through it. */
		if (made && fchmod(nfd, 0755) < 0)
			return hpn_err_set(err, HPN_E_IO, errno, "chmod %s/%s: %s", dir,
					   HPN_NCCL_NIC_DIR, strerror(errno));
		if (flock(nfd, LOCK_EX) < 0 || fstat(nfd, &st) < 0)
			return hpn_err_set(err, HPN_E_IO, errno, "lock %s/%s: %s", dir,
					   HPN_NCCL_NIC_DIR, strerror(errno));
		if (st.st_nlink == 0) {
			if (!create)
				return -ENOENT;
			continue;
		}
		if (ret_dir)
			*ret_dir = TAKE_FD(dfd);
		/* cppcheck-suppress unreadVariable ; TAKE_FD clears nfd for its cleanup handler */
		*ret = TAKE_FD(nfd);
		return 0;
	}
	return hpn_err_set(err, HPN_E_TRY_AGAIN, EAGAIN, "%s/%s keeps being removed", dir,
			   HPN_NCCL_NIC_DIR);
}

/* What nfd/id is, as hpn_nccl_link_read says. */
static int read_link(int nfd, const char *id, const char *want, char *other, size_t len)
{
	char got[PATH_MAX];
	ssize_t n = readlinkat(nfd, id, got, sizeof(got) - 1);

	if (n < 0)
		return -errno;
	got[n] = '\0';
	if (!strcmp(got, want))
		return 0;
	if (other && len)
		snprintf(other, len, "%s", got);
	return -EXDEV;
}

int hpn_nccl_link(const char *dir, const char *id, const char *key, struct hpn_err *err)
{
	_cleanup_close_ int nfd = -1;
	char want[HPN_NCCL_KEY_MAX + 3], tmp[HPN_NIC_ID_MAX + 32], other[PATH_MAX] = "";
	int r;

	if (!hpn_nccl_valid_link(id) || link_target(key, want) < 0)
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
				   "hints link \"%.64s\" to \"%.64s\": not a device ID and a key",
				   id, key);
	r = open_nic(dir, true, NULL, &nfd, err);
	if (r < 0)
		return r;
	r = read_link(nfd, id, want, other, sizeof(other));
	if (r == 0)
		return 0;
	if (r == -EINVAL)
		return hpn_err_set(err, HPN_E_IO, EEXIST,
				   "%s/%s/%s is not a symlink of hpn-rdma's: left as it is", dir,
				   HPN_NCCL_NIC_DIR, id);
	if (r != -ENOENT && r != -EXDEV)
		return hpn_err_set(err, HPN_E_IO, -r, "read %s/%s/%s: %s", dir, HPN_NCCL_NIC_DIR,
				   id, strerror(-r));
	if (r == -ENOENT) {
		if (symlinkat(want, nfd, id) == 0)
			return 0;
		return hpn_err_set(err, HPN_E_IO, errno, "link %s/%s/%s to %s: %s", dir,
				   HPN_NCCL_NIC_DIR, id, want, strerror(errno));
	}
	/* Another key's, whose attachment is gone (this one holds the NIC now): replaced. */
	snprintf(tmp, sizeof(tmp), ".%s.%ld.tmp", id, (long)getpid());
	(void)unlinkat(nfd, tmp, 0);
	if (symlinkat(want, nfd, tmp) < 0 || renameat(nfd, tmp, nfd, id) < 0) {
		int e = errno;

		(void)unlinkat(nfd, tmp, 0);
		return hpn_err_set(err, HPN_E_IO, e, "link %s/%s/%s to %s (it led to %s): %s", dir,
				   HPN_NCCL_NIC_DIR, id, want, other, strerror(e));
	}
	return 1;
}

int hpn_nccl_unlink(const char *dir, const char *id, const char *key, struct hpn_err *err)
{
	_cleanup_close_ int dfd = -1, nfd = -1;
	char want[HPN_NCCL_KEY_MAX + 3];
	int r;

	if (!hpn_nccl_valid_link(id) || link_target(key, want) < 0)
		return 0;
	r = open_nic(dir, false, &dfd, &nfd, err);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	r = read_link(nfd, id, want, NULL, 0);
	if (r == -ENOENT)
		return 0;
	if (r == -EXDEV || r == -EINVAL)
		return 1;
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, -r, "read %s/%s/%s: %s", dir, HPN_NCCL_NIC_DIR,
				   id, strerror(-r));
	/* Under the lock: no ADD of the NIC's next pod replaces it between the look and this. */
	if (unlinkat(nfd, id, 0) < 0 && errno != ENOENT)
		return hpn_err_set(err, HPN_E_IO, errno, "remove %s/%s/%s: %s", dir,
				   HPN_NCCL_NIC_DIR, id, strerror(errno));
	/* The last link gone, the directory too (a link made meanwhile waits on the lock). */
	if (unlinkat(dfd, HPN_NCCL_NIC_DIR, AT_REMOVEDIR) < 0 && errno != ENOTEMPTY &&
	    errno != ENOENT && errno != EEXIST)
		return hpn_err_set(err, HPN_E_IO, errno, "remove %s/%s: %s", dir, HPN_NCCL_NIC_DIR,
				   strerror(errno));
	return 0;
}

int hpn_nccl_link_read(const char *dir, const char *id, const char *key, char *other, size_t len)
{
	_cleanup_close_ int nfd = -1;
	char want[HPN_NCCL_KEY_MAX + 3];
	struct hpn_err err = { 0 };
	int r;

	if (!hpn_nccl_valid_link(id) || link_target(key, want) < 0)
		return -EINVAL;
	r = open_nic(dir, false, NULL, &nfd, &err);
	if (r < 0)
		return r;
	return read_link(nfd, id, want, other, len);
}

void hpn_nccl_conf_free(struct hpn_nccl_conf *nc)
{
	free(nc->dir);
	free(nc->conf_file);
	free(nc->socket_ifname);
	hpn_vars_free(&nc->env);
	for (size_t i = 0; i < nc->n_profiles; i++) {
		free(nc->profiles[i].name);
		hpn_vars_free(&nc->profiles[i].env);
	}
	free(nc->profiles);
	nc->profiles = NULL;
	nc->n_profiles = 0;
}
