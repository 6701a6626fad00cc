// SPDX-License-Identifier: Apache-2.0
/*
 * The DRA driver's device health to the kubelet (drahealth.h): the
 * NodeWatchResources streams, each sent the full list of the prepared
 * claims' devices, packed with protobuf-c from dra-health-v1alpha1.proto
 * (v1's bytes are the same). Nothing here polls: a list is built when a
 * stream opens, when the driver or the node says something changed (and is
 * sent only if it did), and every resend period. All of it on the loop.
 */
#include "drahealth.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dra-health-v1alpha1.pb-c.h"
#include "draclaims.h"
#include "exposition.h"
#include "log.h"
#include "loop.h"
#include "node.h"
#include "rpc.h"
#include "util.h"

/* The kubelet takes a status not heard again for 30 s as Unknown: resent well within. */
#define RESEND_MS 20000
#define TIMEOUT_S 30 /* the kubelet's default, said in every status: ours to keep */
#define PTR_SIZE  sizeof(void *)

#define UNKNOWN	  V1ALPHA1__HEALTH_STATUS__UNKNOWN
#define HEALTHY	  V1ALPHA1__HEALTH_STATUS__HEALTHY
#define UNHEALTHY V1ALPHA1__HEALTH_STATUS__UNHEALTHY

/* Why a list went to a stream (hpn_rdma_dra_health_messages_total's cause). */
enum cause { SENT_OPEN, SENT_CHANGE, SENT_RESEND, SENT_N };

/* One prepared device, as the kubelet is told. */
struct dev_health {
	char pool[254];
	char device[HPN_DRA_NAME_MAX];
	V1alpha1__HealthStatus health;
	char msg[AGENT_VERDICT_MSG];
};

struct hlist {
	struct dev_health *v;
	size_t n;
};

struct drahealth {
	const struct node *node;
	const struct dra_claims *cl;
	struct loop_src timer;
	int resend_ms;
	bool stopping;
	struct rpc_streams streams; /* the kubelet's NodeWatchResources calls */
	struct hlist last;	    /* what the streams were sent last */
	uint64_t sent[SENT_N];
};

static const char *health_name(V1alpha1__HealthStatus s)
{
	return s == HEALTHY ? "HEALTHY" : s == UNHEALTHY ? "UNHEALTHY" : "UNKNOWN";
}

/*
 * Device v's health: the health loop's verdict on the attachment that holds
 * its NIC, the node's view of the NIC, in that order. A share's is its NIC's
 * (v->nic): the NIC's port, RDMA device and link are every share's.
 */
static void judge(const struct node *node, const struct dra_rec_dev *v, struct dev_health *out)
{
	const struct agent_dev *d = agent_devs_find(&node->devs, v->nic);

	out->health = HEALTHY;
	out->msg[0] = '\0';
	if (!d) {
		/* A reloaded config whose match no longer selects it. */
		out->health = UNKNOWN;
		hpn_msgf(out->msg, sizeof(out->msg), "NIC %s (%s) is not in the pool now", v->nic,
			 v->ifname);
	} else if (d->verdict == AGENT_VERDICT_BROKEN) {
		out->health = UNHEALTHY;
		hpn_msgf(out->msg, sizeof(out->msg), "%s", d->verdict_msg);
	} else if (!d->base_healthy) {
		out->health = UNHEALTHY;
		hpn_msgf(out->msg, sizeof(out->msg), "%s", d->why);
	} else if (d->verdict == AGENT_VERDICT_UNCHECKED) {
		out->health = UNKNOWN;
		hpn_msgf(out->msg, sizeof(out->msg), "%s", d->verdict_msg);
	}
}

static void hlist_free(struct hlist *l)
{
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* Every prepared claim's devices now, once each; -ENOMEM. */
static int build(const struct drahealth *h, struct hlist *out)
{
	size_t cap = 0, n = 0;
	struct dev_health *v;

	for (const struct dra_rec *r = h->cl->recs; r; r = r->next)
		cap += r->n;
	v = calloc(cap ? cap : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (const struct dra_rec *r = h->cl->recs; r; r = r->next)
		for (size_t k = 0; k < r->n; k++) {
			const struct dra_rec_dev *rd = &r->devs[k];
			bool seen = false;

			/*
			 * Once a device: the kubelet names one by pool and name, and
			 * a shared device is held by many claims (each its share),
			 * all with the health of its one NIC (judge, by the NIC's ID).
			 */
			for (size_t j = 0; !seen && j < n; j++)
				seen = !strcmp(v[j].pool, rd->pool) &&
				       !strcmp(v[j].device, rd->device);
			if (seen)
				continue;
			snprintf(v[n].pool, sizeof(v[n].pool), "%s", rd->pool);
			snprintf(v[n].device, sizeof(v[n].device), "%s", rd->device);
			judge(h->node, rd, &v[n]);
			n++;
		}
	out->v = v;
	out->n = n;
	return 0;
}

static const struct dev_health *find(const struct hlist *l, const struct dev_health *d)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i].pool, d->pool) && !strcmp(l->v[i].device, d->device))
			return &l->v[i];
	return NULL;
}

/* Whether b says what a said (the devices, their health and messages, in order). */
static bool same(const struct hlist *a, const struct hlist *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i].pool, b->v[i].pool) || strcmp(a->v[i].device, b->v[i].device) ||
		    a->v[i].health != b->v[i].health || strcmp(a->v[i].msg, b->v[i].msg))
			return false;
	return true;
}

/* What changed from old to l, logged: a device's health or its message. */
static void say_changes(const struct hlist *old, const struct hlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct dev_health *d = &l->v[i], *was = find(old, d);

		if (was && was->health == d->health && !strcmp(was->msg, d->msg))
			continue;
		if (d->health == HEALTHY)
			hpn_info("DRA: device %s/%s is HEALTHY to the kubelet", d->pool, d->device);
		else
			hpn_warn("DRA: device %s/%s is %s to the kubelet: %s", d->pool, d->device,
				 health_name(d->health), d->msg);
	}
}

/* One device's status as packed: the message and the identifier it points to. */
struct packed {
	V1alpha1__DeviceHealth health;
	V1alpha1__DeviceIdentifier id;
};

/* l as a NodeWatchResourcesResponse (malloc'd), each status determined now; NULL: no memory. */
static uint8_t *pack(const struct hlist *l, size_t *len)
{
	V1alpha1__NodeWatchResourcesResponse resp = V1ALPHA1__NODE_WATCH_RESOURCES_RESPONSE__INIT;
	struct packed *p = calloc(l->n ? l->n : 1, sizeof(*p));
	V1alpha1__DeviceHealth **v = calloc(l->n ? l->n : 1, PTR_SIZE);
	int64_t now = (int64_t)time(NULL);
	uint8_t *buf = NULL;

	for (size_t i = 0; p && v && i < l->n; i++) {
		v1alpha1__device_identifier__init(&p[i].id);
		p[i].id.pool_name = (char *)l->v[i].pool;
		p[i].id.device_name = (char *)l->v[i].device;
		v1alpha1__device_health__init(&p[i].health);
		p[i].health.device = &p[i].id;
		p[i].health.health = l->v[i].health;
		/* Each list is judged anew from the node and the health loop as they are now. */
		p[i].health.last_updated_time = now;
		p[i].health.health_check_timeout_seconds = TIMEOUT_S;
		p[i].health.message = (char *)l->v[i].msg;
		v[i] = &p[i].health;
	}
	resp.n_devices = l->n;
	resp.devices = v;
	if (p && v)
		buf = rpc_pack((const ProtobufCMessage *)&resp, len);
	free(p);
	free(v);
	return buf;
}

/*
 * l (taken) sent and kept as the last: to the stream just opened (NULL:
 * none), as SENT_OPEN, and to every other one unless why is SENT_OPEN.
 */
static void send_list(struct drahealth *h, struct hlist *l, enum cause why, struct rpc_call *opened)
{
	size_t len;
	uint8_t *buf = pack(l, &len);

	if (!buf) {
		hpn_error("DRA: device health: out of memory");
		hlist_free(l);
		return;
	}
	say_changes(&h->last, l);
	hlist_free(&h->last);
	h->last = *l;
	if (opened) {
		rpc_stream_send(opened, buf, len);
		h->sent[SENT_OPEN]++;
	}
	if (why != SENT_OPEN) {
		rpc_streams_send(&h->streams, buf, len, opened);
		h->sent[why] += h->streams.n - (opened != NULL);
	}
	free(buf);
}

/* A new list: sent when it says something new (change), or always (resend). */
static void update(struct drahealth *h, enum cause why)
{
	struct hlist l = { 0 };

	if (h->stopping || !h->streams.n)
		return;
	if (build(h, &l) < 0) {
		hpn_error("DRA: device health: out of memory");
		return;
	}
	if (why == SENT_CHANGE && same(&l, &h->last)) {
		hlist_free(&l);
		return;
	}
	send_list(h, &l, why, NULL);
}

void drahealth_changed(struct drahealth *h)
{
	if (h)
		update(h, SENT_CHANGE);
}

static void on_timer(struct loop_src *s)
{
	update(s->ud, SENT_RESEND);
}

void drahealth_watch(struct drahealth *h, struct rpc_call *c, const uint8_t *req, size_t len,
		     const char *version)
{
	V1alpha1__NodeWatchResourcesRequest *r =
		v1alpha1__node_watch_resources_request__unpack(NULL, len, req);
	struct hlist l = { 0 };
	size_t n;

	if (!r) {
		rpc_fail(c, RPC_INVALID_ARGUMENT, "the request is not a NodeWatchResourcesRequest");
		return;
	}
	v1alpha1__node_watch_resources_request__free_unpacked(r, NULL);
	if (h->stopping) {
		rpc_fail(c, RPC_UNAVAILABLE, "hpn-rdma-agent is stopping");
		return;
	}
	if (build(h, &l) < 0) {
		rpc_fail(c, RPC_INTERNAL, "out of memory");
		return;
	}
	if (rpc_streams_add(&h->streams, c) < 0) {
		hlist_free(&l);
		rpc_fail(c, RPC_RESOURCE_EXHAUSTED, "too many NodeWatchResources streams");
		return;
	}
	n = l.n;
	/* The streams open already were sent every change: this list too only if it is new. */
	send_list(h, &l, same(&l, &h->last) ? SENT_OPEN : SENT_CHANGE, c);
	hpn_info("DRA: the kubelet opened a device health stream (%s): %zu devices sent (%zu open)",
		 version, n, h->streams.n);
}

void drahealth_metrics(struct sbuf *b, const struct drahealth *h)
{
	static const char *cause[SENT_N] = { "open", "change", "resend" };
	static const V1alpha1__HealthStatus order[] = { HEALTHY, UNHEALTHY, UNKNOWN };
	static const char *label[] = { "healthy", "unhealthy", "unknown" };
	struct hlist l = { 0 };

	expo_gauge(b, "hpn_rdma_dra_health_streams",
		   "The kubelet's device health streams (NodeWatchResources) open.",
		   (double)h->streams.n);
	expo_family(b, "hpn_rdma_dra_health_messages_total", "counter",
		    "Lists of the prepared devices' health sent, one per stream, by cause: the "
		    "stream opened, a change, the resend within the kubelet's staleness window.");
	for (int i = 0; i < SENT_N; i++)
		expo_sample_u64(b, "hpn_rdma_dra_health_messages_total",
				(const char *[]){ "cause", cause[i], NULL }, h->sent[i]);
	if (build(h, &l) < 0)
		return;
	expo_family(b, "hpn_rdma_dra_health_devices", "gauge",
		    "The prepared claims' devices by the health the driver tells the kubelet.");
	for (size_t k = 0; k < HPN_ARRAY_SIZE(order); k++) {
		size_t n = 0;

		for (size_t i = 0; i < l.n; i++)
			n += l.v[i].health == order[k];
		expo_sample(b, "hpn_rdma_dra_health_devices",
			    (const char *[]){ "health", label[k], NULL }, (double)n);
	}
	hlist_free(&l);
}

int drahealth_new(struct loop *l, const struct node *node, const struct dra_claims *cl,
		  struct drahealth **ret)
{
	struct drahealth *h = calloc(1, sizeof(*h));
	const char *env = getenv("HPN_DRA_HEALTH_RESEND_MS");
	long ms = env ? strtol(env, NULL, 10) : 0;
	int r;

	if (!h)
		return -ENOMEM;
	h->node = node;
	h->cl = cl;
	h->streams.what = "DRA: device health";
	h->timer.fd = -1;
	/* Tests shorten the resend (test/agent/drahealth.sh); never longer than the kubelet allows. */
	h->resend_ms = ms >= 100 && ms <= RESEND_MS ? (int)ms : RESEND_MS;
	r = loop_timer(l, &h->timer, h->resend_ms, h->resend_ms, on_timer, h);
	if (r < 0) {
		free(h);
		return r;
	}
	*ret = h;
	return 0;
}

void drahealth_stop(struct drahealth *h)
{
	if (!h)
		return;
	h->stopping = true;
	loop_timer_set(&h->timer, LOOP_OFF, 0);
}

void drahealth_free(struct drahealth *h)
{
	if (!h)
		return;
	loop_close(&h->timer);
	hlist_free(&h->last);
	free(h);
}
