// SPDX-License-Identifier: Apache-2.0
/*
 * The kubelet's side of the agent: the device plugin (Registration.Register
 * as a client; the DevicePlugin service on our socket) and the PodResources
 * List client the CNI lookup answers from. Messages are packed and checked
 * here with protobuf-c; rpc.c carries the bytes.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "deviceplugin.pb-c.h"
#include "log.h"
#include "podresources.pb-c.h"
#include "rdma.h"
#include "sysfs.h"
#include "util.h"

#define DP_VERSION	       "v1beta1"
#define REGISTER_TIMEOUT_MS    5000
#define MAX_CONTAINER_REQUESTS 64
/* protobuf-c's repeated messages are arrays of pointers to them. */
#define PTR_SIZE sizeof(void *)

/* ---- ListAndWatch ------------------------------------------------------------- */

static uint8_t *pack_list(const struct agent *a, size_t *len)
{
	size_t n = a->devs.n;
	V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
	V1beta1__Device *d = calloc(n ? n : 1, sizeof(*d));
	V1beta1__Device **dp = calloc(n ? n : 1, PTR_SIZE);
	V1beta1__TopologyInfo *t = calloc(n ? n : 1, sizeof(*t));
	V1beta1__NUMANode *node = calloc(n ? n : 1, sizeof(*node));
	V1beta1__NUMANode **np = calloc(n ? n : 1, PTR_SIZE);
	uint8_t *buf = NULL;

	if (!d || !dp || !t || !node || !np)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct agent_dev *ad = &a->devs.v[i];

		v1beta1__device__init(&d[i]);
		d[i].id = (char *)ad->id;
		d[i].health = ad->healthy ? "Healthy" : "Unhealthy";
		if (ad->numa >= 0) {
			v1beta1__topology_info__init(&t[i]);
			v1beta1__numanode__init(&node[i]);
			node[i].id = ad->numa;
			np[i] = &node[i];
			t[i].n_nodes = 1;
			t[i].nodes = &np[i];
			d[i].topology = &t[i];
		}
		dp[i] = &d[i];
	}
	resp.n_devices = n;
	resp.devices = dp;
	*len = v1beta1__list_and_watch_response__get_packed_size(&resp);
	buf = malloc(*len ? *len : 1);
	if (buf)
		v1beta1__list_and_watch_response__pack(&resp, buf);
out:
	free(d);
	free(dp);
	free(t);
	free(node);
	free(np);
	return buf;
}

/* cppcheck-suppress constParameter ; the type rpc_call_on_close takes */
static void watcher_closed(struct rpc_call *c, void *ud)
{
	struct agent *a = ud;

	for (size_t i = 0; i < a->n_watchers; i++)
		if (a->watchers[i] == c) {
			a->watchers[i] = a->watchers[--a->n_watchers];
			hpn_info("ListAndWatch stream closed (%zu open)", a->n_watchers);
			return;
		}
}

void kubelet_broadcast(struct agent *a)
{
	size_t len;
	uint8_t *buf;

	if (!a->n_watchers)
		return;
	buf = pack_list(a, &len);
	if (!buf) {
		hpn_error("ListAndWatch: out of memory");
		return;
	}
	for (size_t i = 0; i < a->n_watchers; i++)
		rpc_stream_send(a->watchers[i], buf, len);
	free(buf);
}

static void list_and_watch(struct rpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	struct agent *a = ud;
	V1beta1__Empty *e = v1beta1__empty__unpack(NULL, len, req);
	uint8_t *buf;
	size_t n;

	if (!e) {
		rpc_fail(c, RPC_INVALID_ARGUMENT, "ListAndWatch: the request is not an Empty");
		return;
	}
	v1beta1__empty__free_unpacked(e, NULL);
	if (a->n_watchers == AGENT_MAX_WATCHERS) {
		rpc_fail(c, RPC_RESOURCE_EXHAUSTED, "too many ListAndWatch streams");
		return;
	}
	buf = pack_list(a, &n);
	if (!buf) {
		rpc_fail(c, RPC_INTERNAL, "out of memory");
		return;
	}
	a->watchers[a->n_watchers++] = c;
	rpc_call_on_close(c, watcher_closed, a);
	rpc_stream_send(c, buf, n);
	free(buf);
	hpn_info("ListAndWatch stream opened: %zu devices sent (%zu open)", a->devs.n,
		 a->n_watchers);
}

/* ---- unary methods -------------------------------------------------------------- */

static void options(struct rpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	V1beta1__Empty *e = v1beta1__empty__unpack(NULL, len, req);
	V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
	uint8_t buf[16];

	if (!e) {
		rpc_fail(c, RPC_INVALID_ARGUMENT, "the request is not an Empty");
		return;
	}
	v1beta1__empty__free_unpacked(e, NULL);
	o.get_preferred_allocation_available = true;
	rpc_reply(c, buf, v1beta1__device_plugin_options__pack(&o, buf));
}

static void pre_start(struct rpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	V1beta1__PreStartContainerRequest *r =
		v1beta1__pre_start_container_request__unpack(NULL, len, req);
	V1beta1__PreStartContainerResponse o = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
	uint8_t buf[4];

	if (!r) {
		rpc_fail(c, RPC_INVALID_ARGUMENT, "the request is not a PreStartContainerRequest");
		return;
	}
	v1beta1__pre_start_container_request__free_unpacked(r, NULL);
	/* Never asked for (pre_start_required is false); answered empty if a kubelet calls. */
	rpc_reply(c, buf, v1beta1__pre_start_container_response__pack(&o, buf));
}

/* Every ID is one we list, at most once: what a request may name. */
static int check_ids(const struct agent *a, char **ids, size_t n, char *msg, size_t len)
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
		if (!agent_devs_find(&a->devs, ids[i])) {
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

static void preferred(struct rpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	struct agent *a = ud;
	V1beta1__PreferredAllocationRequest *r =
		v1beta1__preferred_allocation_request__unpack(NULL, len, req);
	V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
	V1beta1__ContainerPreferredAllocationResponse *cr = NULL, **crp = NULL;
	const char **picks = NULL;
	char msg[256];
	uint8_t *buf = NULL;
	size_t n = 0, off = 0;

	if (!r) {
		rpc_fail(c, RPC_INVALID_ARGUMENT,
			 "the request is not a PreferredAllocationRequest");
		return;
	}
	n = r->n_container_requests;
	if (n > MAX_CONTAINER_REQUESTS) {
		rpc_fail(c, RPC_INVALID_ARGUMENT, "over 64 container requests");
		goto out;
	}
	cr = calloc(n ? n : 1, sizeof(*cr));
	crp = calloc(n ? n : 1, PTR_SIZE);
	picks = calloc(n * HPN_AGENT_MAX_DEVICES + 1, sizeof(*picks));
	if (!cr || !crp || !picks) {
		rpc_fail(c, RPC_INTERNAL, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		V1beta1__ContainerPreferredAllocationRequest *q = r->container_requests[i];
		struct hpn_err err = { 0 };

		if (check_ids(a, q->available_deviceids, q->n_available_deviceids, msg,
			      sizeof(msg)) < 0 ||
		    check_ids(a, q->must_include_deviceids, q->n_must_include_deviceids, msg,
			      sizeof(msg)) < 0) {
			rpc_fail(c, RPC_INVALID_ARGUMENT, msg);
			goto out;
		}
		if (q->allocation_size < 0 ||
		    agent_prefer(&a->devs, q->available_deviceids, q->n_available_deviceids,
				 q->must_include_deviceids, q->n_must_include_deviceids,
				 (size_t)q->allocation_size, picks + off, &err) < 0) {
			rpc_fail(c, RPC_INVALID_ARGUMENT,
				 err.msg[0] ? err.msg : "allocation_size is negative");
			goto out;
		}
		v1beta1__container_preferred_allocation_response__init(&cr[i]);
		cr[i].n_deviceids = (size_t)q->allocation_size;
		cr[i].deviceids = (char **)(picks + off);
		crp[i] = &cr[i];
		off += (size_t)q->allocation_size;
	}
	resp.n_container_responses = n;
	resp.container_responses = crp;
	len = v1beta1__preferred_allocation_response__get_packed_size(&resp);
	buf = malloc(len ? len : 1);
	if (!buf) {
		rpc_fail(c, RPC_INTERNAL, "out of memory");
		goto out;
	}
	v1beta1__preferred_allocation_response__pack(&resp, buf);
	rpc_reply(c, buf, len);
out:
	free(buf);
	free(picks);
	free(crp);
	free(cr);
	v1beta1__preferred_allocation_request__free_unpacked(r, NULL);
}

/* One container's answer: the RDMA character devices of its NICs, and envs naming them. */
#define MAX_SPECS (HPN_AGENT_MAX_DEVICES * 2 + 2)
struct container_answer {
	V1beta1__ContainerAllocateResponse resp;
	V1beta1__DeviceSpec specs[MAX_SPECS];
	V1beta1__DeviceSpec *specp[MAX_SPECS];
	char paths[MAX_SPECS][64];	 /* in the container: /dev/infiniband[/<name>] */
	char host_paths[MAX_SPECS][512]; /* on the host: <dev-root>/infiniband/<name>, a directory */
	V1beta1__ContainerAllocateResponse__EnvsEntry env[3];
	V1beta1__ContainerAllocateResponse__EnvsEntry *envp[3];
	char ids[4096], ibdevs[4096], uverbs[8192];
};

static void add_spec(struct container_answer *ca, const char *host, const char *container)
{
	size_t i = ca->resp.n_devices;

	if (i == MAX_SPECS)
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

static void add_node(struct container_answer *ca, const char *dev_root, const char *name)
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
static int soft_dir(const char *root, char **ids, size_t n, const char *key, char *host, size_t len)
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

static int answer_container(const struct agent *a, char **ids, size_t n,
			    struct container_answer *ca, char *msg, size_t len)
{
	char *soft[HPN_AGENT_MAX_DEVICES];
	const char *key = NULL;
	size_t n_soft = 0;
	bool cm = false;

	v1beta1__container_allocate_response__init(&ca->resp);
	ca->resp.devices = ca->specp;
	for (size_t i = 0; i < n; i++) {
		const struct agent_dev *d = agent_devs_find(&a->devs, ids[i]);
		struct hpn_rdma_cdevs cd;

		append(ca->ids, sizeof(ca->ids), d->id);
		if (!d->rdma[0]) {
			/* Made by ADD, in the pod: named by the directory below. */
			if (a->conf.soft_roce && n_soft < HPN_AGENT_MAX_DEVICES) {
				soft[n_soft++] = ids[i];
				if (!key || strcmp(ids[i], key) < 0)
					key = ids[i];
			}
			continue;
		}
		append(ca->ibdevs, sizeof(ca->ibdevs), d->rdma);
		hpn_rdma_cdevs(a->conf.sysfs_root, d->rdma, &cd);
		for (size_t k = 0; k < cd.n; k++) {
			add_node(ca, a->dev_root, cd.v[k].name);
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
		int r = soft_dir(a->conf.agent.device_dir, soft, n_soft, key, host, sizeof(host));

		if (r < 0) {
			snprintf(msg, len, "prepare the device directory %s/%s: %s",
				 a->conf.agent.device_dir, key, strerror(-r));
			return r;
		}
		add_spec(ca, host, "/dev/infiniband");
		cm |= hpn_sysfs_exists("%s/class/misc/rdma_cm", a->conf.sysfs_root);
	}
	if (cm)
		add_node(ca, a->dev_root, "rdma_cm");
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

static void allocate(struct rpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	struct agent *a = ud;
	V1beta1__AllocateRequest *r = v1beta1__allocate_request__unpack(NULL, len, req);
	V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
	struct container_answer *ca = NULL;
	V1beta1__ContainerAllocateResponse **crp = NULL;
	char msg[256];
	uint8_t *buf = NULL;
	size_t n;

	if (!r) {
		rpc_fail(c, RPC_INVALID_ARGUMENT, "the request is not an AllocateRequest");
		return;
	}
	n = r->n_container_requests;
	if (n > MAX_CONTAINER_REQUESTS) {
		rpc_fail(c, RPC_INVALID_ARGUMENT, "over 64 container requests");
		goto out;
	}
	ca = calloc(n ? n : 1, sizeof(*ca));
	crp = calloc(n ? n : 1, PTR_SIZE);
	if (!ca || !crp) {
		rpc_fail(c, RPC_INTERNAL, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		V1beta1__ContainerAllocateRequest *q = r->container_requests[i];

		if (check_ids(a, q->devices_ids, q->n_devices_ids, msg, sizeof(msg)) < 0) {
			hpn_warn("Allocate refused: %s", msg);
			rpc_fail(c, RPC_INVALID_ARGUMENT, msg);
			goto out;
		}
		if (answer_container(a, q->devices_ids, q->n_devices_ids, &ca[i], msg,
				     sizeof(msg)) < 0) {
			hpn_warn("Allocate failed: %s", msg);
			rpc_fail(c, RPC_INTERNAL, msg);
			goto out;
		}
		crp[i] = &ca[i].resp;
		hpn_info("Allocate: container %zu gets %s (RDMA %s; %zu device nodes)", i + 1,
			 ca[i].ids, ca[i].ibdevs[0] ? ca[i].ibdevs : "none", ca[i].resp.n_devices);
	}
	resp.n_container_responses = n;
	resp.container_responses = crp;
	len = v1beta1__allocate_response__get_packed_size(&resp);
	buf = malloc(len ? len : 1);
	if (!buf) {
		rpc_fail(c, RPC_INTERNAL, "out of memory");
		goto out;
	}
	v1beta1__allocate_response__pack(&resp, buf);
	rpc_reply(c, buf, len);
out:
	free(buf);
	free(crp);
	free(ca);
	v1beta1__allocate_request__free_unpacked(r, NULL);
}

static const struct rpc_method methods[] = {
	{ "/v1beta1.DevicePlugin/GetDevicePluginOptions", false, options },
	{ "/v1beta1.DevicePlugin/ListAndWatch", true, list_and_watch },
	{ "/v1beta1.DevicePlugin/GetPreferredAllocation", false, preferred },
	{ "/v1beta1.DevicePlugin/Allocate", false, allocate },
	{ "/v1beta1.DevicePlugin/PreStartContainer", false, pre_start },
};

/* ---- registration --------------------------------------------------------------- */

static void registered(void *ud, int status, const char *msg, const uint8_t *buf, size_t len)
{
	struct agent *a = ud;

	a->registering = false;
	if (status != RPC_OK) {
		hpn_warn("Register %s with the kubelet at %s: status %d %s (retrying)", a->resource,
			 a->kubelet_sock, status, msg);
		return;
	}
	a->registered = true;
	hpn_info("registered %s (endpoint %s, %zu devices) with the kubelet", a->resource,
		 a->endpoint, a->devs.n);
}

void kubelet_register(struct agent *a)
{
	V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
	V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
	uint8_t buf[1024];
	size_t len;

	if (a->registering || !a->srv || a->srv_stopping || a->quitting)
		return;
	if (access(a->kubelet_sock, F_OK) < 0) {
		hpn_debug("no %s yet: registering when it appears", a->kubelet_sock);
		return;
	}
	o.get_preferred_allocation_available = true;
	req.version = DP_VERSION;
	req.endpoint = (char *)a->endpoint;
	req.resource_name = (char *)a->resource;
	req.options = &o;
	len = v1beta1__register_request__get_packed_size(&req);
	if (len > sizeof(buf))
		return;
	v1beta1__register_request__pack(&req, buf);
	a->registered = false;
	a->registering = true;
	if (rpc_unary(a->rpc, a->kubelet_sock, "/v1beta1.Registration/Register", buf, len,
		      REGISTER_TIMEOUT_MS, registered, a) < 0)
		a->registering = false;
}

int kubelet_start(struct agent *a)
{
	int r;

	if (a->quitting)
		return 0;
	r = rpc_server_start(a->rpc, a->sock_path, methods, HPN_ARRAY_SIZE(methods), a, &a->srv);

	if (r < 0) {
		hpn_error("cannot serve the device plugin on %s: %s", a->sock_path, strerror(-r));
		return r;
	}
	hpn_info("device plugin for %s serving on %s", a->resource, a->sock_path);
	kubelet_register(a);
	return 0;
}

static void stopped(void *ud)
{
	struct agent *a = ud;

	a->srv = NULL;
	a->srv_stopping = false;
	a->n_watchers = 0;
	if (a->restart_wanted && !a->quitting) {
		a->restart_wanted = false;
		kubelet_start(a);
	}
}

void kubelet_restart(struct agent *a)
{
	a->registered = false;
	if (a->srv_stopping) {
		a->restart_wanted = true;
		return;
	}
	if (!a->srv) {
		kubelet_start(a);
		return;
	}
	a->restart_wanted = true;
	a->srv_stopping = true;
	rpc_server_stop(a->srv, stopped, a);
}

void kubelet_stop(struct agent *a)
{
	a->restart_wanted = false;
	if (a->srv && !a->srv_stopping) {
		a->srv_stopping = true;
		rpc_server_stop(a->srv, stopped, a);
	}
}

/* ---- PodResources ------------------------------------------------------------------ */

struct pod_ask {
	struct agent *a;
	struct hpn_alloc_req req;
	pod_devices_fn done;
	void *ud;
};

static void listed(void *ud, int status, const char *msg, const uint8_t *buf, size_t len)
{
	struct pod_ask *q = ud;
	struct agent *a = q->a;
	struct hpn_alloc al = { 0 };
	char why[512];
	V1__ListPodResourcesResponse *r = NULL;

	snprintf(al.resource, sizeof(al.resource), "%s", a->resource);
	if (status != RPC_OK) {
		hpn_msgf(why, sizeof(why), "PodResources List at %s: status %d %s", a->podres_sock,
			 status, msg);
		q->done(a, q->ud, NULL, why);
		goto out;
	}
	r = v1__list_pod_resources_response__unpack(NULL, len, buf);
	if (!r) {
		hpn_msgf(why, sizeof(why), "PodResources List at %s: undecodable reply",
			 a->podres_sock);
		q->done(a, q->ud, NULL, why);
		goto out;
	}
	for (size_t p = 0; p < r->n_pod_resources; p++) {
		const V1__PodResources *pr = r->pod_resources[p];

		if (!pr->name || !pr->namespace_ || strcmp(pr->name, q->req.name) ||
		    strcmp(pr->namespace_, q->req.namespace))
			continue;
		al.pod_known = true;
		for (size_t c = 0; c < pr->n_containers; c++)
			for (size_t d = 0; d < pr->containers[c]->n_devices; d++) {
				const V1__ContainerDevices *cd = pr->containers[c]->devices[d];

				if (!cd->resource_name || strcmp(cd->resource_name, a->resource))
					continue;
				for (size_t i = 0; i < cd->n_device_ids; i++) {
					bool seen = false;

					if (!hpn_alloc_id_valid(cd->device_ids[i]))
						continue;
					for (size_t k = 0; k < al.n; k++)
						seen |= !strcmp(al.ids[k], cd->device_ids[i]);
					if (!seen && al.n < HPN_ALLOC_MAX_DEVICES)
						snprintf(al.ids[al.n++], HPN_ALLOC_ID_MAX, "%s",
							 cd->device_ids[i]);
				}
			}
	}
	q->done(a, q->ud, &al, NULL);
out:
	if (r)
		v1__list_pod_resources_response__free_unpacked(r, NULL);
	free(q);
}

int kubelet_pod_devices(struct agent *a, const struct hpn_alloc_req *req, int timeout_ms,
			pod_devices_fn done, void *ud)
{
	V1__ListPodResourcesRequest lr = V1__LIST_POD_RESOURCES_REQUEST__INIT;
	struct pod_ask *q = calloc(1, sizeof(*q));
	uint8_t buf[8];
	size_t len;

	if (!q)
		return -ENOMEM;
	q->a = a;
	q->req = *req;
	q->done = done;
	q->ud = ud;
	len = v1__list_pod_resources_request__pack(&lr, buf);
	if (rpc_unary(a->rpc, a->podres_sock, "/v1.PodResourcesLister/List", buf, len, timeout_ms,
		      listed, q) < 0) {
		free(q);
		return -ENOMEM;
	}
	return 0;
}
