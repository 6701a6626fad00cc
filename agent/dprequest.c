// SPDX-License-Identifier: Apache-2.0
/*
 * The device plugin's answers to the kubelet's unpacked requests
 * (dprequest.h): each container's IDs checked against the pool,
 * GetPreferredAllocation's picks, Allocate's devices and softRoce's
 * directory.
 */
#include "dprequest.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdispecs.h"
#include "log.h"
#include "rdma.h"
#include "rpc.h"
#include "sysfs.h"
#include "util.h"

/* protobuf-c's repeated messages are arrays of pointers to them. */
#define PTR_SIZE sizeof(void *)

/* Every ID is one we list, at most once: what a request may name. */
static int check_ids(const struct agent_devs *devs, char **ids, size_t n, char *msg, size_t len)
{
	if (n > HPN_AGENT_MAX_DEVICES) {
		hpn_msgf(msg, len, "%zu device IDs, over %d", n, HPN_AGENT_MAX_DEVICES);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (!hpn_alloc_id_valid(ids[i])) {
			hpn_msgf(msg, len, "device ID %zu is not 1-63 bytes of [A-Za-z0-9_.:@-]",
				 i + 1);
			return -EINVAL;
		}
		if (!agent_devs_find(devs, ids[i])) {
			hpn_msgf(msg, len, "unknown device %s", ids[i]);
			return -ENOENT;
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(ids[i], ids[j])) {
				hpn_msgf(msg, len, "device %s named twice", ids[i]);
				return -EINVAL;
			}
	}
	return 0;
}

/*
 * No ID is a NIC ADD took from the pool for a pod the kubelet gave nothing
 * (listed Unhealthy since: a kubelet that allocates it anyway raced the list).
 */
static int check_untaken(const struct agent_devs *devs, char **ids, size_t n, char *msg, size_t len)
{
	for (size_t i = 0; i < n; i++) {
		const struct agent_dev *d = agent_devs_find(devs, ids[i]);

		if (d && d->taken) {
			hpn_msgf(msg, len,
				 "device %s is held by pod %s, which took it from the pool "
				 "(selected by label or annotation, allocated nothing): not "
				 "allocatable until that pod releases it",
				 ids[i], d->taker);
			return -EBUSY;
		}
	}
	return 0;
}

/* A request for at most DP_MAX_CONTAINERS containers: else INVALID_ARGUMENT, msg says so. */
static int count_ok(size_t n, char *msg, size_t len)
{
	if (n <= DP_MAX_CONTAINERS)
		return RPC_OK;
	hpn_msgf(msg, len, "over 64 container requests");
	return RPC_INVALID_ARGUMENT;
}

/* ---- GetPreferredAllocation --------------------------------------------------- */

int dp_prefer(const struct agent_devs *devs, const V1beta1__PreferredAllocationRequest *r,
	      struct dp_preferred *out, char *msg, size_t len)
{
	size_t n = r->n_container_requests, off = 0;
	int st;

	*out = (struct dp_preferred){ .resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT };
	st = count_ok(n, msg, len);
	if (st != RPC_OK)
		return st;
	out->cr = calloc(n ? n : 1, sizeof(*out->cr));
	out->crp = calloc(n ? n : 1, PTR_SIZE);
	out->picks = calloc(n * HPN_AGENT_MAX_DEVICES + 1, sizeof(*out->picks));
	if (!out->cr || !out->crp || !out->picks) {
		hpn_msgf(msg, len, "out of memory");
		return RPC_INTERNAL;
	}
	for (size_t i = 0; i < n; i++) {
		const V1beta1__ContainerPreferredAllocationRequest *q = r->container_requests[i];
		struct hpn_err err = { 0 };

		if (check_ids(devs, q->available_deviceids, q->n_available_deviceids, msg, len) <
			    0 ||
		    check_ids(devs, q->must_include_deviceids, q->n_must_include_deviceids, msg,
			      len) < 0)
			return RPC_INVALID_ARGUMENT;
		if (q->allocation_size < 0 ||
		    agent_prefer(devs, q->available_deviceids, q->n_available_deviceids,
				 q->must_include_deviceids, q->n_must_include_deviceids,
				 (size_t)q->allocation_size, out->picks + off, &err) < 0) {
			hpn_msgf(msg, len, "%s",
				 err.msg[0] ? err.msg : "allocation_size is negative");
			return RPC_INVALID_ARGUMENT;
		}
		v1beta1__container_preferred_allocation_response__init(&out->cr[i]);
		out->cr[i].n_deviceids = (size_t)q->allocation_size;
		out->cr[i].deviceids = (char **)(out->picks + off);
		out->crp[i] = &out->cr[i];
		off += (size_t)q->allocation_size;
	}
	out->resp.n_container_responses = n;
	out->resp.container_responses = out->crp;
	return RPC_OK;
}

void dp_preferred_free(struct dp_preferred *p)
{
	free(p->picks);
	free(p->crp);
	free(p->cr);
	*p = (struct dp_preferred){ 0 };
}

/* ---- Allocate ------------------------------------------------------------------- */

/* The CDI device of NIC id: resolved by the runtime from a spec in a CDI directory. */
static void add_cdi(struct dp_container_answer *ca, const char *id)
{
	size_t i = ca->resp.n_cdi_devices;

	if (i == HPN_AGENT_MAX_DEVICES)
		return;
	hpn_cdi_name(id, ca->cdi_names[i]);
	v1beta1__cdidevice__init(&ca->cdi[i]);
	ca->cdi[i].name = ca->cdi_names[i];
	ca->cdip[i] = &ca->cdi[i];
	ca->resp.n_cdi_devices = i + 1;
}

/*
 * Will ADD write a CDI spec for the device it makes (softRoce) on NIC id:
 * agent.cdiDir set and a directory, as ADD checks it (softroce.c).
 */
static bool soft_cdi(const struct hpn_conf *conf, const char *id)
{
	struct stat st;

	return conf->soft_roce && conf->agent.cdi_dir && hpn_cdi_id_valid(id) &&
	       stat(conf->agent.cdi_dir, &st) == 0 && S_ISDIR(st.st_mode);
}

static void add_spec(struct dp_container_answer *ca, const char *host, const char *container)
{
	size_t i = ca->resp.n_devices;

	if (i == DP_MAX_SPECS)
		return;
	for (size_t k = 0; k < i; k++)
		if (!strcmp(ca->paths[k], container))
			return;
	snprintf(ca->paths[i], sizeof(ca->paths[i]), "%s", container);
	snprintf(ca->host_paths[i], sizeof(ca->host_paths[i]), "%s", host);
	v1beta1__device_spec__init(&ca->specs[i]);
	ca->specs[i].container_path = ca->paths[i];
	ca->specs[i].host_path = ca->host_paths[i];
	ca->specs[i].permissions = "rw";
	ca->specp[i] = &ca->specs[i];
	ca->resp.n_devices = i + 1;
}

static void add_node(struct dp_container_answer *ca, const char *dev_root, const char *name)
{
	char host[512], container[64];

	snprintf(host, sizeof(host), "%s/infiniband/%s", dev_root, name);
	snprintf(container, sizeof(container), "/dev/infiniband/%s", name);
	add_spec(ca, host, container);
}

static void append(char *list, size_t len, const char *item)
{
	size_t n = strlen(list);

	snprintf(list + n, len - n, "%s%s", n ? "," : "", item);
}

/* Empties <root>/<id>: a link, or a directory of the nodes an earlier ADD made. */
static int clear_entry(const char *root, const char *id)
{
	char path[512];
	struct dirent *de;
	DIR *d;

	if (hpn_snprintf(path, sizeof(path), "%s/%s", root, id) < 0)
		return -ENAMETOOLONG;
	if (unlink(path) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (!(d = opendir(path)))
		return -errno;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT) {
			int r = -errno;

			closedir(d);
			return r;
		}
	closedir(d);
	return rmdir(path) < 0 && errno != ENOENT ? -errno : 0;
}

/*
 * The container's directory for NICs whose RDMA device ADD makes (softRoce):
 * its character devices are born after this answer, so it names a directory
 * that containerd and CRI-O resolve at CreateContainer, after the sandbox's
 * ADD put the nodes in it. <root>/<key> made empty; each other ID a link to
 * it, so ADD finds it by any NIC (softroce.c). One spec for all: the kubelet
 * keeps one device per container path.
 */
static int soft_dir(const char *root, const char *const *ids, size_t n, const char *key, char *host,
		    size_t len)
{
	char path[512];
	int r = hpn_mkdir_p(root, 0755) < 0 ? -errno : 0;

	for (size_t i = 0; r == 0 && i < n; i++)
		r = clear_entry(root, ids[i]);
	if (r == 0 && hpn_snprintf(path, sizeof(path), "%s/%s", root, key) < 0)
		r = -ENAMETOOLONG;
	if (r == 0 && mkdir(path, 0755) < 0)
		r = -errno;
	for (size_t i = 0; r == 0 && i < n; i++) {
		char link[512];

		if (!strcmp(ids[i], key))
			continue;
		if (hpn_snprintf(link, sizeof(link), "%s/%s", root, ids[i]) < 0)
			r = -ENAMETOOLONG;
		else if (symlink(key, link) < 0)
			r = -errno;
	}
	if (r == 0)
		snprintf(host, len, "%s", path);
	return r;
}

/*
 * Container ca's answer for ids (each one the pool lists, checked). The IDs
 * it names are the pool's own strings (the same bytes as the request's).
 */
static int answer_container(const struct dp_node *nd, char **ids, size_t n,
			    struct dp_container_answer *ca, char *msg, size_t len)
{
	const char *soft[HPN_AGENT_MAX_DEVICES];
	const char *key = NULL;
	size_t n_soft = 0;
	bool cm = false;

	v1beta1__container_allocate_response__init(&ca->resp);
	ca->resp.devices = ca->specp;
	ca->resp.cdi_devices = ca->cdip;
	for (size_t i = 0; i < n; i++) {
		const struct agent_dev *d = agent_devs_find(nd->devs, ids[i]);
		struct hpn_rdma_cdevs cd;

		append(ca->ids, sizeof(ca->ids), d->id);
		if (!d->rdma[0]) {
			/* Made by ADD, in the pod: named by the directory below, and its CDI spec. */
			if (nd->conf->soft_roce && n_soft < HPN_AGENT_MAX_DEVICES) {
				soft[n_soft++] = d->id;
				if (!key || strcmp(d->id, key) < 0)
					key = d->id;
				if (soft_cdi(nd->conf, d->id))
					add_cdi(ca, d->id);
			}
			continue;
		}
		/* Its CDI device too (runtimes that read CDI), when its spec is in place now. */
		if (cdispecs_ready(nd->cdi, d->id))
			add_cdi(ca, d->id);
		append(ca->ibdevs, sizeof(ca->ibdevs), d->rdma);
		hpn_rdma_cdevs(nd->conf->sysfs_root, d->rdma, &cd);
		for (size_t k = 0; k < cd.n; k++) {
			add_node(ca, nd->dev_root, cd.v[k].name);
			if (!strncmp(cd.v[k].name, "uverbs", 6)) {
				char p[64];

				snprintf(p, sizeof(p), "/dev/infiniband/%s", cd.v[k].name);
				append(ca->uverbs, sizeof(ca->uverbs), p);
			}
		}
		cm |= cd.rdma_cm;
	}
	if (n_soft) {
		char host[512];
		int r = soft_dir(nd->conf->agent.device_dir, soft, n_soft, key, host, sizeof(host));

		if (r < 0) {
			snprintf(msg, len, "prepare the device directory %s/%s: %s",
				 nd->conf->agent.device_dir, key, strerror(-r));
			return r;
		}
		add_spec(ca, host, "/dev/infiniband");
		cm |= hpn_sysfs_exists("%s/class/misc/rdma_cm", nd->conf->sysfs_root);
	}
	if (cm)
		add_node(ca, nd->dev_root, "rdma_cm");
	{
		static const char *const keys[] = { "HPN_RDMA_DEVICE_IDS", "HPN_RDMA_DEVICES",
						    "HPN_RDMA_UVERBS" };
		const char *const vals[] = { ca->ids, ca->ibdevs, ca->uverbs };

		for (size_t k = 0; k < 3; k++) {
			v1beta1__container_allocate_response__envs_entry__init(&ca->env[k]);
			ca->env[k].key = (char *)keys[k];
			ca->env[k].value = (char *)vals[k];
			ca->envp[k] = &ca->env[k];
		}
		ca->resp.n_envs = 3;
		ca->resp.envs = ca->envp;
	}
	return 0;
}

int dp_allocate(const struct dp_node *nd, const V1beta1__AllocateRequest *r,
		struct dp_allocated *out, char *msg, size_t len)
{
	size_t n = r->n_container_requests;
	int st;

	*out = (struct dp_allocated){ .resp = V1BETA1__ALLOCATE_RESPONSE__INIT };
	st = count_ok(n, msg, len);
	if (st != RPC_OK)
		return st;
	out->ca = calloc(n ? n : 1, sizeof(*out->ca));
	out->crp = calloc(n ? n : 1, PTR_SIZE);
	if (!out->ca || !out->crp) {
		hpn_msgf(msg, len, "out of memory");
		return RPC_INTERNAL;
	}
	for (size_t i = 0; i < n; i++) {
		const V1beta1__ContainerAllocateRequest *q = r->container_requests[i];
		struct dp_container_answer *ca = &out->ca[i];

		if (check_ids(nd->devs, q->devices_ids, q->n_devices_ids, msg, len) < 0) {
			hpn_warn("Allocate refused: %s", msg);
			return RPC_INVALID_ARGUMENT;
		}
		if (check_untaken(nd->devs, q->devices_ids, q->n_devices_ids, msg, len) < 0) {
			hpn_warn("Allocate refused: %s", msg);
			return RPC_FAILED_PRECONDITION;
		}
		if (answer_container(nd, q->devices_ids, q->n_devices_ids, ca, msg, len) < 0) {
			hpn_warn("Allocate failed: %s", msg);
			return RPC_INTERNAL;
		}
		out->crp[i] = &ca->resp;
		hpn_info("Allocate: container %zu gets %s (RDMA %s; %zu device nodes, %zu CDI "
			 "devices)",
			 i + 1, ca->ids, ca->ibdevs[0] ? ca->ibdevs : "none", ca->resp.n_devices,
			 ca->resp.n_cdi_devices);
	}
	out->resp.n_container_responses = n;
	out->resp.container_responses = out->crp;
	return RPC_OK;
}

void dp_allocated_free(struct dp_allocated *a)
{
	free(a->crp);
	free(a->ca);
	*a = (struct dp_allocated){ 0 };
}
