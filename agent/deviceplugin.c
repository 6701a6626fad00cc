// SPDX-License-Identifier: Apache-2.0
/*
 * The kubelet device plugin (deviceplugin.h): Registration.Register as a
 * client, the DevicePlugin service on our socket, the kubelet's restarts
 * seen with inotify. Messages are packed and unpacked here with protobuf-c
 * (what GetPreferredAllocation and Allocate answer is dprequest.c's); rpc.c
 * carries the bytes.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "deviceplugin.h"
#include "deviceplugin.pb-c.h"
#include "dprequest.h"
#include "exposition.h"
#include "log.h"
#include "loop.h"
#include "node.h"
#include "rpc.h"
#include "util.h"

#define DP_VERSION	    "v1beta1"
#define REGISTER_TIMEOUT_MS 5000
/* protobuf-c's repeated messages are arrays of pointers to them. */
#define PTR_SIZE sizeof(void *)

struct deviceplugin {
	struct dp_opts o;
	struct loop *loop;
	struct rpc *rpc;
	struct node *node;
	struct rpc_server *srv;
	bool srv_stopping, restart_wanted, registered, registering, quitting;
	struct rpc_streams watchers; /* the ListAndWatch streams */
	char dp_dir[PATH_MAX];	     /* <kubelet-dir>/device-plugins */
	char sock_path[PATH_MAX];    /* dp_dir/<endpoint> */
	char kubelet_sock[PATH_MAX]; /* dp_dir/kubelet.sock */
	struct loop_src inotify, retry;
};

/* ---- ListAndWatch ------------------------------------------------------------- */

static uint8_t *pack_list(const struct agent_devs *devs, size_t *len)
{
	size_t n = devs->n;
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
		const struct agent_dev *ad = &devs->v[i];

		v1beta1__device__init(&d[i]);
		d[i].id = (char *)ad->id;
		/* A NIC a pod took from the pool is not the kubelet's to give: not allocatable. */
		d[i].health = ad->healthy && !ad->taken ? "Healthy" : "Unhealthy";
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
	buf = rpc_pack((const ProtobufCMessage *)&resp, len);
out:
	free(d);
	free(dp);
	free(t);
	free(node);
	free(np);
	return buf;
}

void deviceplugin_broadcast(struct deviceplugin *dp)
{
	size_t len;
	uint8_t *buf;

	if (!dp->watchers.n)
		return;
	buf = pack_list(&dp->node->devs, &len);
	if (!buf) {
		hpn_error("ListAndWatch: out of memory");
		return;
	}
	rpc_streams_send(&dp->watchers, buf, len, NULL);
	free(buf);
}

/*
 * The request as a message of type d, or NULL after INVALID_ARGUMENT
 * naming what it should have been ("the request is not <what>").
 */
static ProtobufCMessage *unpack(struct rpc_call *c, const ProtobufCMessageDescriptor *d,
				const uint8_t *req, size_t len, const char *what)
{
	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, req);

	if (!m) {
		char msg[128];

		hpn_msgf(msg, sizeof(msg), "the request is not %s", what);
		rpc_fail(c, RPC_INVALID_ARGUMENT, msg);
	}
	return m;
}

/* A request that carries nothing we read: whether it is one. */
static bool request_ok(struct rpc_call *c, const ProtobufCMessageDescriptor *d, const uint8_t *req,
		       size_t len, const char *what)
{
	ProtobufCMessage *m = unpack(c, d, req, len, what);

	protobuf_c_message_free_unpacked(m, NULL);
	return m != NULL;
}

static void list_and_watch(struct rpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	struct deviceplugin *dp = ud;
	uint8_t *buf;
	size_t n;

	if (!request_ok(c, &v1beta1__empty__descriptor, req, len, "an Empty"))
		return;
	buf = pack_list(&dp->node->devs, &n);
	if (!buf) {
		rpc_fail(c, RPC_INTERNAL, "out of memory");
		return;
	}
	if (rpc_streams_add(&dp->watchers, c) < 0) {
		free(buf);
		rpc_fail(c, RPC_RESOURCE_EXHAUSTED, "too many ListAndWatch streams");
		return;
	}
	rpc_stream_send(c, buf, n);
	free(buf);
	hpn_info("ListAndWatch stream opened: %zu devices sent (%zu open)", dp->node->devs.n,
		 dp->watchers.n);
}

/* ---- unary methods -------------------------------------------------------------- */

static void options(struct rpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;

	if (!request_ok(c, &v1beta1__empty__descriptor, req, len, "an Empty"))
		return;
	o.get_preferred_allocation_available = true;
	rpc_reply_msg(c, (const ProtobufCMessage *)&o);
}

static void pre_start(struct rpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	V1beta1__PreStartContainerResponse o = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;

	if (!request_ok(c, &v1beta1__pre_start_container_request__descriptor, req, len,
			"a PreStartContainerRequest"))
		return;
	/* Never asked for (pre_start_required is false); answered empty if a kubelet calls. */
	rpc_reply_msg(c, (const ProtobufCMessage *)&o);
}

static void preferred(struct rpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	const struct deviceplugin *dp = ud;
	V1beta1__PreferredAllocationRequest *r = (V1beta1__PreferredAllocationRequest *)unpack(
		c, &v1beta1__preferred_allocation_request__descriptor, req, len,
		"a PreferredAllocationRequest");
	struct dp_preferred p;
	char msg[256];
	int st;

	if (!r)
		return;
	st = dp_prefer(&dp->node->devs, r, &p, msg, sizeof(msg));
	if (st == RPC_OK)
		rpc_reply_msg(c, (const ProtobufCMessage *)&p.resp);
	else
		rpc_fail(c, st, msg);
	dp_preferred_free(&p);
	v1beta1__preferred_allocation_request__free_unpacked(r, NULL);
}

static void allocate(struct rpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	const struct deviceplugin *dp = ud;
	V1beta1__AllocateRequest *r = (V1beta1__AllocateRequest *)unpack(
		c, &v1beta1__allocate_request__descriptor, req, len, "an AllocateRequest");
	const struct dp_node nd = { .devs = &dp->node->devs,
				    .conf = &dp->node->conf,
				    .dev_root = dp->o.dev_root,
				    .cdi = dp->o.cdi };
	struct dp_allocated a;
	char msg[256];
	int st;

	if (!r)
		return;
	st = dp_allocate(&nd, r, &a, msg, sizeof(msg));
	if (st == RPC_OK)
		rpc_reply_msg(c, (const ProtobufCMessage *)&a.resp);
	else
		rpc_fail(c, st, msg);
	dp_allocated_free(&a);
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
	struct deviceplugin *dp = ud;

	dp->registering = false;
	if (status != RPC_OK) {
		hpn_warn("Register %s with the kubelet at %s: status %d %s (retrying)",
			 dp->o.resource, dp->kubelet_sock, status, msg);
		return;
	}
	dp->registered = true;
	hpn_info("registered %s (endpoint %s, %zu devices) with the kubelet", dp->o.resource,
		 dp->o.endpoint, dp->node->devs.n);
}

static void do_register(struct deviceplugin *dp)
{
	V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
	V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
	uint8_t buf[1024];
	size_t len;

	if (dp->registering || !dp->srv || dp->srv_stopping || dp->quitting)
		return;
	if (access(dp->kubelet_sock, F_OK) < 0) {
		hpn_debug("no %s yet: registering when it appears", dp->kubelet_sock);
		return;
	}
	o.get_preferred_allocation_available = true;
	req.version = DP_VERSION;
	req.endpoint = (char *)dp->o.endpoint;
	req.resource_name = (char *)dp->o.resource;
	req.options = &o;
	len = v1beta1__register_request__get_packed_size(&req);
	if (len > sizeof(buf))
		return;
	v1beta1__register_request__pack(&req, buf);
	dp->registered = false;
	dp->registering = true;
	if (rpc_unary(dp->rpc, dp->kubelet_sock, "/v1beta1.Registration/Register", buf, len,
		      REGISTER_TIMEOUT_MS, registered, dp) < 0)
		dp->registering = false;
}

static int serve(struct deviceplugin *dp)
{
	int r;

	if (dp->quitting)
		return 0;
	r = rpc_server_start(dp->rpc, dp->sock_path, methods, HPN_ARRAY_SIZE(methods), dp,
			     &dp->srv);
	if (r < 0)
		return r;
	hpn_info("device plugin for %s serving on %s", dp->o.resource, dp->sock_path);
	do_register(dp);
	return 0;
}

static void serve_again(struct deviceplugin *dp)
{
	int r = serve(dp);

	if (r < 0)
		hpn_error("cannot serve the device plugin on %s: %s", dp->sock_path, strerror(-r));
}

static void stopped(void *ud)
{
	struct deviceplugin *dp = ud;

	dp->srv = NULL;
	dp->srv_stopping = false;
	dp->watchers.n = 0;
	if (dp->restart_wanted && !dp->quitting) {
		dp->restart_wanted = false;
		serve_again(dp);
	}
}

void deviceplugin_restart(struct deviceplugin *dp)
{
	dp->registered = false;
	if (dp->srv_stopping) {
		dp->restart_wanted = true;
		return;
	}
	if (!dp->srv) {
		serve_again(dp);
		return;
	}
	dp->restart_wanted = true;
	dp->srv_stopping = true;
	rpc_server_stop(dp->srv, stopped, dp);
}

void deviceplugin_stop(struct deviceplugin *dp)
{
	dp->quitting = true;
	dp->restart_wanted = false;
	loop_timer_set(&dp->retry, LOOP_OFF, 0);
	if (dp->srv && !dp->srv_stopping) {
		dp->srv_stopping = true;
		rpc_server_stop(dp->srv, stopped, dp);
	}
}

/* ---- the kubelet's restarts -------------------------------------------------------- */

static void on_inotify(struct loop_src *s)
{
	struct deviceplugin *dp = s->ud;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool kubelet_new = false, ours_gone = false;
	const char *ours = strrchr(dp->sock_path, '/') + 1;
	ssize_t n;

	while ((n = read(s->fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;

			p += sizeof(*ev) + ev->len;
			if (!ev->len)
				continue;
			if (!strcmp(ev->name, "kubelet.sock") &&
			    (ev->mask & (IN_CREATE | IN_MOVED_TO)))
				kubelet_new = true;
			if (!strcmp(ev->name, ours) && (ev->mask & (IN_DELETE | IN_MOVED_FROM)) &&
			    !dp->srv_stopping)
				ours_gone = true;
		}
	}
	if (dp->quitting)
		return;
	/* Our own restart unlinks the old socket: a new one in its place is ours. */
	if (ours_gone && access(dp->sock_path, F_OK) == 0)
		ours_gone = false;
	/*
	 * A restarting kubelet sweeps device-plugins/ (our socket with it) and
	 * makes kubelet.sock anew; either one means: serve again, register again.
	 */
	if (dp->srv_stopping && (ours_gone || kubelet_new)) {
		dp->restart_wanted = true; /* already serving anew */
	} else if (ours_gone || (kubelet_new && access(dp->sock_path, F_OK) < 0)) {
		hpn_info("%s: the kubelet restarted; serving anew and registering again",
			 ours_gone ? "our socket was removed" : "kubelet.sock is new");
		deviceplugin_restart(dp);
	} else if (kubelet_new) {
		hpn_info("kubelet.sock is new: registering again");
		dp->registered = false;
		do_register(dp);
	}
}

static void on_retry(struct loop_src *s)
{
	struct deviceplugin *dp = s->ud;

	if (!dp->registered)
		do_register(dp);
}

int deviceplugin_start(struct loop *l, struct rpc *rpc, struct node *node, const struct dp_opts *o,
		       struct deviceplugin **ret, struct hpn_err *err)
{
	struct deviceplugin *dp = calloc(1, sizeof(*dp));
	int fd, r;

	if (!dp)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	*dp = (struct deviceplugin){
		.o = *o, .loop = l, .rpc = rpc, .node = node, .watchers.what = "ListAndWatch"
	};
	dp->inotify.fd = dp->retry.fd = -1;
	if (hpn_snprintf(dp->dp_dir, sizeof(dp->dp_dir), "%s/device-plugins", o->kubelet_dir) < 0 ||
	    hpn_snprintf(dp->sock_path, sizeof(dp->sock_path), "%s/%s", dp->dp_dir, o->endpoint) <
		    0 ||
	    hpn_snprintf(dp->kubelet_sock, sizeof(dp->kubelet_sock), "%s/kubelet.sock",
			 dp->dp_dir) < 0 ||
	    strlen(dp->sock_path) >= 108) {
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
				"--kubelet-dir %s is too long for a unix socket path",
				o->kubelet_dir);
		goto fail;
	}
	if (hpn_mkdir_p(dp->dp_dir, 0750) < 0) {
		r = hpn_err_set(err, HPN_E_IO, errno, "create %s: %s", dp->dp_dir, strerror(errno));
		goto fail;
	}
	fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (fd < 0 || loop_add(l, &dp->inotify, fd, on_inotify, dp) < 0 ||
	    inotify_add_watch(dp->inotify.fd, dp->dp_dir,
			      IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM) < 0) {
		r = hpn_err_set(err, HPN_E_INTERNAL, errno, "inotify on %s: %s", dp->dp_dir,
				strerror(errno));
		goto fail;
	}
	r = loop_timer(l, &dp->retry, o->retry_s * 1000, o->retry_s * 1000, on_retry, dp);
	if (r < 0) {
		hpn_err_set(err, HPN_E_INTERNAL, -r, "timer: %s", strerror(-r));
		goto fail;
	}
	r = serve(dp);
	if (r < 0) {
		hpn_err_set(err, HPN_E_INTERNAL, -r, "cannot serve the device plugin on %s: %s",
			    dp->sock_path, strerror(-r));
		goto fail;
	}
	*ret = dp;
	return 0;
fail:
	deviceplugin_free(dp);
	return r;
}

bool deviceplugin_serving(const struct deviceplugin *dp)
{
	return dp && dp->srv;
}

/* ---- Metrics ------------------------------------------------------------------ */

/* The device_healthy and device_held families: each device of the pool, labelled. */
static void device_family(struct sbuf *b, const struct agent_devs *devs, const char *resource,
			  const char *name, const char *help, bool held)
{
	expo_family(b, name, "gauge", help);
	for (size_t i = 0; i < devs->n; i++) {
		const struct agent_dev *d = &devs->v[i];
		char numa[12];

		snprintf(numa, sizeof(numa), "%d", d->numa);
		expo_sample(b, name,
			    (const char *[]){ "resource", resource, "device_id", d->id, "nic",
					      d->ifname, "rdma_device", d->rdma, "numa_node",
					      d->numa >= 0 ? numa : "", NULL },
			    held ? d->held : d->healthy);
	}
}

void deviceplugin_metrics(struct sbuf *b, void *ud)
{
	const struct deviceplugin *dp = ud;
	const struct agent_devs *devs = &dp->node->devs;
	const char *res[] = { "resource", dp->o.resource, NULL };
	size_t held = 0, free_ = 0, bad = 0;

	expo_gauge(b, "hpn_rdma_agent_registered",
		   "Whether the device plugin is registered with the kubelet.", dp->registered);
	for (size_t i = 0; i < devs->n; i++) {
		held += devs->v[i].held;
		free_ += !devs->v[i].held && devs->v[i].healthy;
		bad += !devs->v[i].healthy;
	}
	expo_family(b, "hpn_rdma_pool_nics", "gauge",
		    "NICs of the pool, as the device plugin lists them to the kubelet.");
	expo_sample(b, "hpn_rdma_pool_nics", res, devs->n);
	expo_family(b, "hpn_rdma_pool_nics_held", "gauge", "Pool NICs a journal holds (in pods).");
	expo_sample(b, "hpn_rdma_pool_nics_held", res, held);
	expo_family(b, "hpn_rdma_pool_nics_free", "gauge", "Pool NICs no journal holds, Healthy.");
	expo_sample(b, "hpn_rdma_pool_nics_free", res, free_);
	expo_family(b, "hpn_rdma_pool_nics_unhealthy", "gauge",
		    "Pool NICs the device plugin reports Unhealthy.");
	expo_sample(b, "hpn_rdma_pool_nics_unhealthy", res, bad);
	device_family(b, devs, dp->o.resource, "hpn_rdma_device_healthy",
		      "Each device of the pool as the kubelet sees it: 1 Healthy, 0 Unhealthy.",
		      false);
	device_family(b, devs, dp->o.resource, "hpn_rdma_device_held",
		      "Each device of the pool: 1 when a journal holds it (a pod has it).", true);
}

void deviceplugin_free(struct deviceplugin *dp)
{
	if (!dp)
		return;
	/* Stopping anyway: the socket at least must go. */
	if (dp->srv)
		unlink(dp->sock_path);
	loop_close(&dp->inotify);
	loop_close(&dp->retry);
	free(dp);
}
