// SPDX-License-Identifier: Apache-2.0
/*
 * The device plugin's answers to the kubelet (agent/dprequest.c, which
 * deviceplugin.c's handlers call once protobuf-c unpacked the request):
 * GetPreferredAllocation and Allocate as a hostile or broken kubelet may ask.
 *
 * Input: a flags byte (bit 0: Allocate, else GetPreferredAllocation; bit 1:
 * softRoce; bit 2: agent.cdiDir is a directory; bits 3-7: the pool's size,
 * 0-16), one byte per NIC of the pool (bit 0 healthy, bit 1 held by a
 * journal, bit 2 taken from the pool by a pod the kubelet gave nothing, when
 * held; bits 3-4 its NUMA node, -1 to 2; bits 5-7 its RDMA device mlx5_0 to
 * mlx5_3, or none from 4 on: softRoce makes one in the pod), then the
 * request's bytes as the kubelet sends them, unpacked with the generated
 * descriptors. The NICs are named as a scan names them (PCI addresses,
 * netdev names); the node's sysfs is a private one (mkdtemp) with
 * uverbsN and umadN for mlx5_N and rdma_cm, and agent.deviceDir is there.
 *
 * Checked, beyond the sanitizers: a call of over 64 containers is refused;
 * else the first container whose IDs are not all valid, listed and distinct
 * (at most 256) is refused INVALID_ARGUMENT naming the ID or its index, and
 * for Allocate the first naming a NIC taken from the pool is refused
 * FAILED_PRECONDITION naming it and its pod; a GetPreferredAllocation with a
 * negative size, more than is available, fewer than must be in, or an ID
 * that must be in but is not available is refused (found by this target:
 * the answer named it); everything else is answered. Each preferred answer is the size
 * asked, no ID twice, every must-include ID in, every ID available; free NICs
 * (healthy, held by no journal) before held ones, on the NUMA nodes of the
 * must-include NICs while they have some, else on one node when one has
 * enough. Each Allocate answer's envs name exactly its IDs, their RDMA
 * devices and uverbs nodes; its device specs are exactly those devices'
 * nodes under /dev, rdma_cm, and for softRoce NICs one directory,
 * <deviceDir>/<least ID>, empty, with a link to it for each other ID; its
 * CDI devices are those softRoce NICs' when cdiDir is there; nothing else
 * is made in deviceDir. Every answer packs, and unpacks to the same bytes.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi.h"
#include "conf.h"
#include "deviceplugin.pb-c.h"
#include "devices.h"
#include "dprequest.h"
#include "fuzz.h"
#include "fuzzdir.h"
#include "log.h"
#include "rpc.h"
#include "util.h"

#define POOL_MAX 16
#define RDMA_MAX 4

static const char *const nic_ids[POOL_MAX] = {
	"0000:3b:00.0", "0000:3b:00.1", "0000:5e:00.0", "0000:5e:00.1",
	"0000:af:00.0", "0000:af:00.1", "0000:d8:00.0", "0000:d8:00.1",
	"eth1",		"eth2",		"ens1f0",	"ens1f1",
	"0000:18:00.0", "0000:18:00.1", "0000:86:00.0", "0000:86:00.1",
};

static char dir[PATH_MAX / 4], sysfs[PATH_MAX / 2], devdir[PATH_MAX / 2], cdidir[PATH_MAX / 2],
	nocdi[PATH_MAX / 2];
static struct agent_devs devs;
static struct hpn_conf conf;

/* The file at the formatted path (its directory made) holds text. */
static void put(const char *text, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(const char *text, const char *fmt, ...)
{
	char p[PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p, sizeof(p), fmt, ap);
	va_end(ap);
	*strrchr(p, '/') = '\0';
	FUZZ_ASSERT(hpn_mkdir_p(p, 0755) == 0);
	p[strlen(p)] = '/';
	fuzz_put(p, text, strlen(text), 0644);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	hpn_log_stderr(HPN_LOG_ERROR);
	fuzz_dir(dir, sizeof(dir), "dprequest");
	snprintf(sysfs, sizeof(sysfs), "%s/sys", dir);
	snprintf(devdir, sizeof(devdir), "%s/devices", dir);
	snprintf(cdidir, sizeof(cdidir), "%s/cdi", dir);
	snprintf(nocdi, sizeof(nocdi), "%s/nocdi", dir);
	FUZZ_ASSERT(mkdir(cdidir, 0755) == 0);
	/* mlx5_N: uverbsN (231:192+N) and umadN (231:N); and rdma_cm (10:58). */
	for (unsigned k = 0; k < RDMA_MAX; k++) {
		char ibdev[16], dev[16];

		snprintf(ibdev, sizeof(ibdev), "mlx5_%u\n", k);
		put(ibdev, "%s/class/infiniband_verbs/uverbs%u/ibdev", sysfs, k);
		snprintf(dev, sizeof(dev), "231:%u\n", 192 + k);
		put(dev, "%s/class/infiniband_verbs/uverbs%u/dev", sysfs, k);
		put(ibdev, "%s/class/infiniband_mad/umad%u/ibdev", sysfs, k);
		snprintf(dev, sizeof(dev), "231:%u\n", k);
		put(dev, "%s/class/infiniband_mad/umad%u/dev", sysfs, k);
	}
	put("10:58\n", "%s/class/misc/rdma_cm/dev", sysfs);
	conf.sysfs_root = sysfs;
	conf.agent.device_dir = devdir;
	return 0;
}

/* ---- what the answers must be ------------------------------------------------------ */

static const struct agent_dev *find(const char *id)
{
	for (size_t i = 0; i < devs.n; i++)
		if (!strcmp(devs.v[i].id, id))
			return &devs.v[i];
	return NULL;
}

/* 1-63 bytes of [A-Za-z0-9_.:@-]: what a device ID may be. */
static bool id_syntax(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr("_.:@-", s[i])))
			return false;
	return true;
}

/*
 * Whether ids may be named (0), else what the refusal must say, in want:
 * the first ID that is not one, not listed, or named again, or their count.
 */
static int ids_verdict(char **ids, size_t n, char *want, size_t len)
{
	if (n > HPN_AGENT_MAX_DEVICES) {
		snprintf(want, len, "%zu device IDs, over %d", n, HPN_AGENT_MAX_DEVICES);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (!id_syntax(ids[i])) {
			snprintf(want, len, "device ID %zu is not", i + 1);
			return -1;
		}
		if (!find(ids[i])) {
			snprintf(want, len, "unknown device %s", ids[i]);
			return -1;
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(ids[i], ids[j])) {
				snprintf(want, len, "device %s named twice", ids[i]);
				return -1;
			}
	}
	return 0;
}

static bool in(char **v, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i], id))
			return true;
	return false;
}

static bool is_free(const char *id)
{
	const struct agent_dev *d = find(id);

	return d && d->healthy && !d->held;
}

static int numa(const char *id)
{
	return find(id)->numa;
}

/* The response packs, and what it packs to unpacks and packs again to the same bytes. */
static void packs(const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m), n2;
	uint8_t *a = malloc(n ? n : 1), *b;
	ProtobufCMessage *back;

	FUZZ_ASSERT(a && protobuf_c_message_pack(m, a) == n);
	back = protobuf_c_message_unpack(m->descriptor, NULL, n, a);
	FUZZ_ASSERT(back);
	n2 = protobuf_c_message_get_packed_size(back);
	b = malloc(n2 ? n2 : 1);
	FUZZ_ASSERT(b && protobuf_c_message_pack(back, b) == n2 && n2 == n && !memcmp(a, b, n));
	protobuf_c_message_free_unpacked(back, NULL);
	free(a);
	free(b);
}

/* ---- GetPreferredAllocation -------------------------------------------------------- */

/* One container's answer, as agent_prefer promises it. */
static void check_picks(const V1beta1__ContainerPreferredAllocationRequest *q,
			const V1beta1__ContainerPreferredAllocationResponse *a)
{
	size_t size = (size_t)q->allocation_size, extra = size - q->n_must_include_deviceids;
	size_t free_left = 0, free_near = 0, picked_held = 0, picked_far = 0;
	int nodes[HPN_AGENT_MAX_DEVICES];
	size_t n_nodes = 0;

	FUZZ_ASSERT(a->n_deviceids == size);
	for (size_t i = 0; i < size; i++) {
		FUZZ_ASSERT(in(q->available_deviceids, q->n_available_deviceids, a->deviceids[i]));
		for (size_t j = 0; j < i; j++)
			FUZZ_ASSERT(strcmp(a->deviceids[i], a->deviceids[j]));
	}
	for (size_t i = 0; i < q->n_must_include_deviceids; i++) {
		FUZZ_ASSERT(in(a->deviceids, size, q->must_include_deviceids[i]));
		nodes[n_nodes++] = numa(q->must_include_deviceids[i]);
	}
	/* Free NICs first; on the must-include NICs' nodes first while they have some. */
	for (size_t i = 0; i < q->n_available_deviceids; i++) {
		const char *id = q->available_deviceids[i];
		bool near = false;

		if (in(q->must_include_deviceids, q->n_must_include_deviceids, id) || !is_free(id))
			continue;
		free_left++;
		for (size_t k = 0; k < n_nodes; k++)
			near |= nodes[k] == numa(id);
		free_near += near;
	}
	for (size_t i = 0; i < size; i++) {
		const char *id = a->deviceids[i];
		bool near = false;

		if (in(q->must_include_deviceids, q->n_must_include_deviceids, id))
			continue;
		picked_held += !is_free(id);
		for (size_t k = 0; k < n_nodes; k++)
			near |= nodes[k] == numa(id);
		picked_far += !near;
	}
	if (free_left >= extra)
		FUZZ_ASSERT(picked_held == 0);
	if (n_nodes && free_near >= extra)
		FUZZ_ASSERT(picked_far == 0);
	/* Nothing must be in, and one node has enough free NICs: all on one node. */
	if (!n_nodes && size) {
		bool one_enough = false, one_node = true;

		for (size_t i = 0; i < q->n_available_deviceids; i++) {
			size_t here = 0;

			for (size_t j = 0; j < q->n_available_deviceids; j++)
				here += is_free(q->available_deviceids[j]) &&
					numa(q->available_deviceids[j]) ==
						numa(q->available_deviceids[i]);
			one_enough |= here >= size;
		}
		for (size_t i = 1; i < size; i++)
			one_node &= numa(a->deviceids[i]) == numa(a->deviceids[0]);
		if (one_enough)
			FUZZ_ASSERT(one_node);
	}
}

/* What a request of n containers gets before its IDs are read: RPC_OK, or refused saying why. */
static int count_verdict(size_t n, char *want, size_t len)
{
	if (n <= DP_MAX_CONTAINERS)
		return RPC_OK;
	snprintf(want, len, "over 64 container requests");
	return RPC_INVALID_ARGUMENT;
}

static void preferred(const uint8_t *data, size_t size)
{
	V1beta1__PreferredAllocationRequest *r =
		v1beta1__preferred_allocation_request__unpack(NULL, size, data);
	struct dp_preferred p;
	char msg[256], want[256] = "";
	int st, expect;

	if (!r)
		return;
	expect = count_verdict(r->n_container_requests, want, sizeof(want));
	for (size_t i = 0; expect == RPC_OK && i < r->n_container_requests; i++) {
		const V1beta1__ContainerPreferredAllocationRequest *q = r->container_requests[i];

		if (ids_verdict(q->available_deviceids, q->n_available_deviceids, want,
				sizeof(want)) < 0 ||
		    ids_verdict(q->must_include_deviceids, q->n_must_include_deviceids, want,
				sizeof(want)) < 0)
			expect = RPC_INVALID_ARGUMENT;
		else if (q->allocation_size < 0 ||
			 (size_t)q->allocation_size > q->n_available_deviceids ||
			 q->n_must_include_deviceids > (size_t)q->allocation_size)
			expect = RPC_INVALID_ARGUMENT;
		for (size_t k = 0; expect == RPC_OK && k < q->n_must_include_deviceids; k++)
			if (!in(q->available_deviceids, q->n_available_deviceids,
				q->must_include_deviceids[k])) {
				snprintf(want, sizeof(want), "device %s must be in",
					 q->must_include_deviceids[k]);
				expect = RPC_INVALID_ARGUMENT;
			}
	}
	memset(msg, 0x5a, sizeof(msg));
	st = dp_prefer(&devs, r, &p, msg, sizeof(msg));
	FUZZ_ASSERT(st == expect);
	if (st != RPC_OK) {
		FUZZ_ASSERT(memchr(msg, '\0', sizeof(msg)) && msg[0] && strstr(msg, want));
	} else {
		FUZZ_ASSERT(p.resp.n_container_responses == r->n_container_requests);
		for (size_t i = 0; i < r->n_container_requests; i++)
			check_picks(r->container_requests[i], p.resp.container_responses[i]);
		packs(&p.resp.base);
	}
	dp_preferred_free(&p);
	v1beta1__preferred_allocation_request__free_unpacked(r, NULL);
}

/* ---- Allocate ------------------------------------------------------------------------ */

static const char *env(const V1beta1__ContainerAllocateResponse *a, const char *key)
{
	const char *v = NULL;

	for (size_t i = 0; i < a->n_envs; i++)
		if (!strcmp(a->envs[i]->key, key)) {
			FUZZ_ASSERT(!v); /* once */
			v = a->envs[i]->value;
		}
	FUZZ_ASSERT(v);
	return v;
}

static void join(char *out, size_t len, const char *item)
{
	size_t n = strlen(out);

	FUZZ_ASSERT(n + strlen(item) + 2 <= len);
	snprintf(out + n, len - n, "%s%s", n ? "," : "", item);
}

/* The spec for container path c: there once, from host, rw. */
static void spec(const V1beta1__ContainerAllocateResponse *a, const char *c, const char *host)
{
	size_t seen = 0;

	for (size_t i = 0; i < a->n_devices; i++) {
		if (strcmp(a->devices[i]->container_path, c))
			continue;
		seen++;
		FUZZ_ASSERT(!strcmp(a->devices[i]->host_path, host));
		FUZZ_ASSERT(!strcmp(a->devices[i]->permissions, "rw"));
	}
	FUZZ_ASSERT(seen == 1);
}

/* One container's answer; its softRoce NICs (their least first) into soft. */
static void check_answer(const V1beta1__ContainerAllocateRequest *q,
			 const V1beta1__ContainerAllocateResponse *a, bool cdi, char **soft,
			 size_t *n_soft)
{
	static char ids[8192], ibdevs[8192], uverbs[8192];
	bool rdma_seen[RDMA_MAX] = { false }, cm = false;
	size_t specs = 0, n_cdi = 0;

	ids[0] = ibdevs[0] = uverbs[0] = '\0';
	*n_soft = 0;
	for (size_t i = 0; i < q->n_devices_ids; i++) {
		const struct agent_dev *d = find(q->devices_ids[i]);

		join(ids, sizeof(ids), d->id);
		if (!d->rdma[0]) {
			if (!conf.soft_roce)
				continue;
			soft[(*n_soft)++] = q->devices_ids[i];
			if (strcmp(soft[*n_soft - 1], soft[0]) < 0) {
				soft[*n_soft - 1] = soft[0];
				soft[0] = q->devices_ids[i];
			}
			if (cdi && hpn_cdi_id_valid(d->id)) {
				char name[HPN_CDI_NAME_MAX];

				hpn_cdi_name(d->id, name);
				FUZZ_ASSERT(n_cdi < a->n_cdi_devices &&
					    !strcmp(a->cdi_devices[n_cdi]->name, name));
				n_cdi++;
			}
			cm = true;
			continue;
		}
		join(ibdevs, sizeof(ibdevs), d->rdma);
		{
			unsigned k = (unsigned)(d->rdma[5] - '0');
			char c[64], host[64];

			snprintf(c, sizeof(c), "/dev/infiniband/uverbs%u", k);
			join(uverbs, sizeof(uverbs), c);
			snprintf(host, sizeof(host), "/dev/infiniband/uverbs%u", k);
			spec(a, c, host);
			snprintf(c, sizeof(c), "/dev/infiniband/umad%u", k);
			spec(a, c, c);
			specs += rdma_seen[k] ? 0 : 2;
			rdma_seen[k] = true;
		}
		cm = true;
	}
	FUZZ_ASSERT(!strcmp(env(a, "HPN_RDMA_DEVICE_IDS"), ids));
	FUZZ_ASSERT(!strcmp(env(a, "HPN_RDMA_DEVICES"), ibdevs));
	FUZZ_ASSERT(!strcmp(env(a, "HPN_RDMA_UVERBS"), uverbs));
	FUZZ_ASSERT(a->n_envs == 3 && a->n_cdi_devices == n_cdi);
	if (cm) {
		spec(a, "/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm");
		specs++;
	}
	if (*n_soft) {
		char host[PATH_MAX];

		FUZZ_ASSERT((size_t)snprintf(host, sizeof(host), "%s/%s", devdir, soft[0]) <
			    sizeof(host));
		spec(a, "/dev/infiniband", host);
		specs++;
	}
	FUZZ_ASSERT(a->n_devices == specs);
}

/* deviceDir holds only what the answers name: the last softRoce container's directory and links. */
static void check_devdir(const V1beta1__AllocateRequest *r, char **soft, size_t n_soft)
{
	DIR *d = opendir(devdir);
	struct dirent *e;

	if (!d) {
		FUZZ_ASSERT(errno == ENOENT && !n_soft);
		return;
	}
	while ((e = readdir(d))) {
		bool named = false;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		for (size_t i = 0; i < r->n_container_requests && !named; i++)
			named = in(r->container_requests[i]->devices_ids,
				   r->container_requests[i]->n_devices_ids, e->d_name);
		FUZZ_ASSERT(named);
	}
	closedir(d);
	for (size_t i = 0; i < n_soft; i++) {
		char p[PATH_MAX], link[PATH_MAX];
		struct stat st;
		ssize_t n;

		FUZZ_ASSERT((size_t)snprintf(p, sizeof(p), "%s/%s", devdir, soft[i]) < sizeof(p));
		FUZZ_ASSERT(lstat(p, &st) == 0);
		if (i == 0) {
			DIR *k = opendir(p);
			size_t entries = 0;

			FUZZ_ASSERT(S_ISDIR(st.st_mode) && k);
			while ((e = readdir(k)))
				entries++;
			closedir(k);
			FUZZ_ASSERT(entries == 2);
			continue;
		}
		n = readlink(p, link, sizeof(link) - 1);
		FUZZ_ASSERT(S_ISLNK(st.st_mode) && n > 0);
		link[n] = '\0';
		FUZZ_ASSERT(!strcmp(link, soft[0]));
	}
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void allocate(const uint8_t *data, size_t size, bool cdi)
{
	V1beta1__AllocateRequest *r = v1beta1__allocate_request__unpack(NULL, size, data);
	const struct dp_node nd = { .devs = &devs, .conf = &conf, .dev_root = "/dev" };
	static char *soft[HPN_AGENT_MAX_DEVICES], *last[HPN_AGENT_MAX_DEVICES];
	size_t n_soft = 0, n_last = 0;
	struct dp_allocated a;
	char msg[256], want[256] = "";
	int st, expect;

	if (!r)
		return;
	expect = count_verdict(r->n_container_requests, want, sizeof(want));
	for (size_t i = 0; expect == RPC_OK && i < r->n_container_requests; i++) {
		const V1beta1__ContainerAllocateRequest *q = r->container_requests[i];

		if (ids_verdict(q->devices_ids, q->n_devices_ids, want, sizeof(want)) < 0) {
			expect = RPC_INVALID_ARGUMENT;
			break;
		}
		for (size_t k = 0; k < q->n_devices_ids; k++) {
			const struct agent_dev *d = find(q->devices_ids[k]);

			if (d->taken) {
				FUZZ_ASSERT((size_t)snprintf(want, sizeof(want),
							     "device %s is held by pod %s", d->id,
							     d->taker) < sizeof(want));
				expect = RPC_FAILED_PRECONDITION;
				break;
			}
		}
	}
	memset(msg, 0x5a, sizeof(msg));
	st = dp_allocate(&nd, r, &a, msg, sizeof(msg));
	FUZZ_ASSERT(st == expect);
	if (st != RPC_OK) {
		FUZZ_ASSERT(memchr(msg, '\0', sizeof(msg)) && msg[0] && strstr(msg, want));
	} else {
		FUZZ_ASSERT(a.resp.n_container_responses == r->n_container_requests);
		for (size_t i = 0; i < r->n_container_requests; i++) {
			check_answer(r->container_requests[i], a.resp.container_responses[i], cdi,
				     soft, &n_soft);
			if (n_soft) {
				memcpy(last, soft, n_soft * sizeof(*soft));
				n_last = n_soft;
			}
		}
		packs(&a.resp.base);
		check_devdir(r, last, n_last);
	}
	dp_allocated_free(&a);
	v1beta1__allocate_request__free_unpacked(r, NULL);
	nftw(devdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t n;
	uint8_t flags;

	if (size < 1)
		return 0;
	flags = data[0];
	n = (size_t)(flags >> 3) % (POOL_MAX + 1);
	if (size < 1 + n)
		return 0;
	memset(&devs, 0, sizeof(devs));
	for (size_t i = 0; i < n; i++) {
		struct agent_dev *d = &devs.v[i];
		uint8_t b = data[1 + i];

		snprintf(d->id, sizeof(d->id), "%s", nic_ids[i]);
		snprintf(d->ifname, sizeof(d->ifname), "eth%zu", i);
		d->healthy = b & 1;
		d->held = b & 2;
		d->taken = d->held && (b & 4);
		if (d->taken)
			snprintf(d->taker, sizeof(d->taker), "ns%zu/selected", i);
		d->numa = (int)((b >> 3) & 3) - 1;
		if ((b >> 5) < RDMA_MAX)
			snprintf(d->rdma, sizeof(d->rdma), "mlx5_%u", (unsigned)(b >> 5));
	}
	devs.n = n;
	conf.soft_roce = flags & 2;
	conf.agent.cdi_dir = flags & 4 ? cdidir : nocdi;
	if (flags & 1)
		allocate(data + 1 + n, size - 1 - n, flags & 4);
	else
		preferred(data + 1 + n, size - 1 - n);
	return 0;
}
