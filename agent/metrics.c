// SPDX-License-Identifier: Apache-2.0
/*
 * Prometheus metrics over HTTP (GET /metrics, text exposition format 0.0.4),
 * served by Debian's libmicrohttpd from the agent's own event loop: MHD runs
 * in its external-epoll mode (MHD_USE_EPOLL without a thread of its own), its
 * epoll fd sits in the loop's epoll, and MHD_run is called when that fd is
 * readable or MHD's connection timeout comes due (a timerfd). So a scrape is
 * answered on the loop's thread from the loop's own state (the devices, the
 * health loop's verdicts, the GC's and the event log's counts) with no lock
 * and no copy; the attachments' families (attachmetrics.c) read the
 * journals and the kernel's counters at scrape time, at most once a second
 * (a scrape within a second of the last gets the same text). This file: the
 * node-wide families and the HTTP side. Every metric, its labels and where
 * it comes from: doc/metrics.md.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grpc/grpc.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "attachmetrics.h"
#include "cnilog.h"
#include "deviceplugin.h"
#include "drakubelet.h"
#include "draslices.h"
#include "drastatus.h"
#include "exposition.h"
#include "gc.h"
#include "health.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "node.h"
#include "util.h"

#define CACHE_S		1.0
#define MAX_CONNECTIONS 16
#define CONN_TIMEOUT_S	10
#define CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"

struct metrics {
	struct metrics_sources src;
	struct MHD_Daemon *d;
	struct loop_src mhd, timer;
	char *cache;
	size_t cache_len;
	double cache_at;
	double collect_s; /* the last collection's own time */
	uint64_t scrapes;
};

static void pool(struct sbuf *b, const struct metrics_sources *src)
{
	size_t held = 0, free_ = 0, bad = 0;

	for (size_t i = 0; i < src->node->devs.n; i++) {
		held += src->node->devs.v[i].held;
		free_ += !src->node->devs.v[i].held && src->node->devs.v[i].healthy;
		bad += !src->node->devs.v[i].healthy;
	}
	expo_family(b, "hpn_rdma_pool_nics", "gauge",
		    "NICs of the pool, as the device plugin lists them to the kubelet.");
	expo_sample(b, "hpn_rdma_pool_nics", (const char *[]){ "resource", src->resource, NULL },
		    src->node->devs.n);
	expo_family(b, "hpn_rdma_pool_nics_held", "gauge", "Pool NICs a journal holds (in pods).");
	expo_sample(b, "hpn_rdma_pool_nics_held",
		    (const char *[]){ "resource", src->resource, NULL }, held);
	expo_family(b, "hpn_rdma_pool_nics_free", "gauge", "Pool NICs no journal holds, Healthy.");
	expo_sample(b, "hpn_rdma_pool_nics_free",
		    (const char *[]){ "resource", src->resource, NULL }, free_);
	expo_family(b, "hpn_rdma_pool_nics_unhealthy", "gauge",
		    "Pool NICs the device plugin reports Unhealthy.");
	expo_sample(b, "hpn_rdma_pool_nics_unhealthy",
		    (const char *[]){ "resource", src->resource, NULL }, bad);
	expo_family(b, "hpn_rdma_device_healthy", "gauge",
		    "Each device of the pool as the kubelet sees it: 1 Healthy, 0 Unhealthy.");
	for (size_t i = 0; i < src->node->devs.n; i++) {
		const struct agent_dev *d = &src->node->devs.v[i];
		char numa[12];

		snprintf(numa, sizeof(numa), "%d", d->numa);
		expo_sample(b, "hpn_rdma_device_healthy",
			    (const char *[]){ "resource", src->resource, "device_id", d->id, "nic",
					      d->ifname, "rdma_device", d->rdma, "numa_node",
					      d->numa >= 0 ? numa : "", NULL },
			    d->healthy);
	}
	expo_family(b, "hpn_rdma_device_held", "gauge",
		    "Each device of the pool: 1 when a journal holds it (a pod has it).");
	for (size_t i = 0; i < src->node->devs.n; i++) {
		const struct agent_dev *d = &src->node->devs.v[i];
		char numa[12];

		snprintf(numa, sizeof(numa), "%d", d->numa);
		expo_sample(b, "hpn_rdma_device_held",
			    (const char *[]){ "resource", src->resource, "device_id", d->id, "nic",
					      d->ifname, "rdma_device", d->rdma, "numa_node",
					      d->numa >= 0 ? numa : "", NULL },
			    d->held);
	}
}

static void cni(struct sbuf *b, const struct metrics_sources *src)
{
	const struct cnilog_stats *c = cnilog_stats(src->cnilog);

	if (!c)
		return;
	expo_family(
		b, "hpn_rdma_cni_commands_total", "counter",
		"CNI commands the plugin ran (from its event log), by network, command and result "
		"code (0: success, else the CNI error code).");
	for (size_t i = 0; i < c->n; i++) {
		char code[12];

		snprintf(code, sizeof(code), "%d", c->v[i].code);
		expo_sample_u64(b, "hpn_rdma_cni_commands_total",
				(const char *[]){ "network", c->v[i].network, "command",
						  c->v[i].command, "code", code, NULL },
				c->v[i].count);
	}
	expo_family(
		b, "hpn_rdma_cni_command_duration_seconds", "histogram",
		"The plugin's own wall time per CNI command, by network, command and result code.");
	for (size_t i = 0; i < c->n; i++) {
		const struct cnilog_series *s = &c->v[i];
		char code[12], le[32];
		const char *lab[] = { "network", s->network, "command", s->command, "code",
				      code,	 "le",	     le,	NULL };

		snprintf(code, sizeof(code), "%d", s->code);
		for (size_t k = 0; k < CNILOG_BUCKETS; k++) {
			snprintf(le, sizeof(le), "%g", cnilog_buckets[k]);
			expo_sample_u64(b, "hpn_rdma_cni_command_duration_seconds_bucket", lab,
					s->bucket[k]);
		}
		snprintf(le, sizeof(le), "+Inf");
		expo_sample_u64(b, "hpn_rdma_cni_command_duration_seconds_bucket", lab, s->count);
		lab[6] = NULL;
		expo_sample(b, "hpn_rdma_cni_command_duration_seconds_sum", lab, s->sum);
		expo_sample_u64(b, "hpn_rdma_cni_command_duration_seconds_count", lab, s->count);
	}
	expo_counter(
		b, "hpn_rdma_cni_events_skipped_total",
		"Lines of the plugin's event log that were not a record (or had no series left).",
		c->skipped + c->dropped);
}

static void gc(struct sbuf *b, const struct metrics_sources *src)
{
	const struct gc_stats *g = gc_stats(src->gc);

	if (!g)
		return;
	expo_family(
		b, "hpn_rdma_gc_runs_total", "counter",
		"GC rounds against the runtime's sandboxes: ok, failed (an undo failed), skipped "
		"(the runtime could not be asked, or the last round was still on the worker).");
	expo_by_result(b, "hpn_rdma_gc_runs_total", (const char *[]){ "ok", "failed", "skipped" },
		       (uint64_t[]){ g->runs_ok, g->runs_failed, g->runs_skipped }, 3);
	expo_counter(b, "hpn_rdma_gc_undone_total",
		     "Attachments of pods the runtime no longer has that GC undid.", g->undone);
	expo_counter(
		b, "hpn_rdma_gc_undo_failures_total",
		"Attachments whose undo by GC failed (their journals stay for the next round).",
		g->failed);
	expo_gauge(b, "hpn_rdma_gc_last_run_timestamp_seconds",
		   "When GC last asked the runtime (unix time; 0: not yet).", g->last_run);
	expo_gauge(b, "hpn_rdma_runtime_up",
		   "Whether the runtime answered GC's last ListPodSandbox.", g->runtime_up);
	expo_gauge(b, "hpn_rdma_runtime_sandboxes",
		   "Pod sandboxes the runtime listed at GC's last ListPodSandbox.",
		   (double)g->sandboxes);
}

static void dra(struct sbuf *b, const struct metrics_sources *src)
{
	static const char *from[] = { "record", "api" }, *result[] = { "error", "ok" };
	struct dra_stats st;
	const struct draslices_stats *sl;
	const struct drastatus_stats *ss;

	if (!dra_stats(src->dra, &st))
		return;
	expo_gauge(b, "hpn_rdma_dra_registered", "Whether the kubelet registered the DRA driver.",
		   st.registered);
	expo_gauge(b, "hpn_rdma_dra_claims_prepared",
		   "ResourceClaims prepared on this node (records in <stateDir>/dra).",
		   (double)st.claims);
	expo_family(b, "hpn_rdma_dra_prepares_total", "counter",
		    "Claims NodePrepareResources answered, by where the answer came from (the "
		    "claim read from the API, or a record of an earlier Prepare) and result.");
	for (int a = 1; a >= 0; a--)
		for (int ok = 1; ok >= 0; ok--)
			expo_sample_u64(
				b, "hpn_rdma_dra_prepares_total",
				(const char *[]){ "from", from[a], "result", result[ok], NULL },
				st.prepares[a][ok]);
	expo_counter(b, "hpn_rdma_dra_unprepares_total", "Claims NodeUnprepareResources answered.",
		     st.unprepares);
	ss = st.status;
	expo_family(b, "hpn_rdma_dra_status_writes_total", "counter",
		    "Claims' status.devices written by server-side apply: applied, gone (the "
		    "claim not in the API), failed (retried).");
	expo_by_result(b, "hpn_rdma_dra_status_writes_total",
		       (const char *[]){ "applied", "gone", "failed" },
		       (uint64_t[]){ ss->applied, ss->gone, ss->failed }, 3);
	sl = st.slices;
	if (!sl)
		return;
	expo_family(b, "hpn_rdma_dra_slice_rounds_total", "counter",
		    "Rounds of the ResourceSlice publisher: written (a new generation), unchanged "
		    "(the API held them already), failed (retried with backoff).");
	expo_by_result(b, "hpn_rdma_dra_slice_rounds_total",
		       (const char *[]){ "written", "unchanged", "failed" },
		       (uint64_t[]){ sl->publishes, sl->unchanged, sl->failures }, 3);
	expo_counter(b, "hpn_rdma_dra_slice_writes_total",
		     "ResourceSlices written to the API (PUT or POST).", sl->writes);
	expo_family(b, "hpn_rdma_dra_slice_write_seconds_total", "counter",
		    "Time the written rounds took, from their list to their last write.");
	expo_sample(b, "hpn_rdma_dra_slice_write_seconds_total", NULL, sl->write_s);
	expo_gauge(b, "hpn_rdma_dra_pool_generation",
		   "The pool generation last published (0: none yet).", (double)sl->generation);
	expo_gauge(b, "hpn_rdma_dra_slices",
		   "The pool's ResourceSlices in the API after the last good round.",
		   (double)sl->slices);
}

static void agent_info(struct sbuf *b, const struct metrics_sources *src, const struct metrics *m)
{
	expo_family(b, "hpn_rdma_agent_build_info", "gauge",
		    "Always 1: the agent's version and the libraries it runs on.");
	expo_sample(b, "hpn_rdma_agent_build_info",
		    (const char *[]){ "version", HPN_VERSION, "grpc", grpc_version_string(),
				      "microhttpd", MHD_get_version(), NULL },
		    1);
	expo_gauge(b, "hpn_rdma_agent_start_time_seconds", "When the agent started (unix time).",
		   src->start_time);
	expo_gauge(b, "hpn_rdma_agent_registered",
		   "Whether the device plugin is registered with the kubelet.",
		   deviceplugin_registered(src->dp));
	expo_gauge(b, "hpn_rdma_agent_collect_duration_seconds",
		   "How long the previous collection of the node's counters took.", m->collect_s);
	expo_counter(b, "hpn_rdma_agent_scrapes_total", "Requests for /metrics answered.",
		     m->scrapes);
}

static char *render(const struct metrics_sources *src, struct metrics *m, size_t *len)
{
	struct sbuf b = { 0 };
	double t0 = hpn_mono_s();

	agent_info(&b, src, m);
	pool(&b, src);
	attachmetrics_render(&b, src->node, src->health);
	cni(&b, src);
	gc(&b, src);
	dra(&b, src);
	m->collect_s = hpn_mono_s() - t0;
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}

/* ---- HTTP ----------------------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status, const char *type,
			     const char *body, size_t len, bool copy)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, (void *)body, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ok;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_len, void **req)
{
	static int first;
	static const char index_page[] = "hpn-rdma-agent: metrics at /metrics\n";
	struct metrics *m = cls;
	double now;

	/* The first call has the headers only: answer on the next, once the request is whole. */
	if (*req != &first) {
		*req = &first;
		return MHD_YES;
	}
	if (*upload_len) {
		*upload_len = 0; /* a body is read and ignored */
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n", 9, false);
	if (!strcmp(url, "/"))
		return reply(c, MHD_HTTP_OK, "text/plain", index_page, sizeof(index_page) - 1,
			     false);
	if (strcmp(url, "/metrics"))
		return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n", 10, false);
	now = hpn_mono_s();
	m->scrapes++;
	if (!m->cache || now - m->cache_at >= CACHE_S) {
		size_t len = 0;
		char *text = render(&m->src, m, &len);

		if (!text)
			return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain",
				     "out of memory\n", 14, false);
		free(m->cache);
		m->cache = text;
		m->cache_len = len;
		m->cache_at = now;
	}
	return reply(c, MHD_HTTP_OK, CONTENT_TYPE, m->cache, m->cache_len, true);
}

/* MHD's timeouts (idle connections): run it when the next one is due. */
static void rearm(struct metrics *m)
{
	MHD_UNSIGNED_LONG_LONG ms = 0;

	if (MHD_get_timeout(m->d, &ms) == MHD_YES)
		loop_timer_set(&m->timer, ms > 60000 ? 60000 : (int)ms, 0);
	else
		loop_timer_set(&m->timer, LOOP_OFF, 0);
}

static void on_mhd(struct loop_src *s)
{
	struct metrics *m = s->ud;

	MHD_run(m->d);
	rearm(m);
}

static void on_timer(struct loop_src *s)
{
	struct metrics *m = s->ud;

	MHD_run(m->d);
	rearm(m);
}

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	hpn_warn("metrics: %s", msg);
}

/* "127.0.0.1:9467", "[::1]:9467", "0.0.0.0:0" into sa. */
int metrics_parse_address(const char *s, struct sockaddr_storage *sa, unsigned int *len)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	char *end;
	long port;

	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(host))
		return -EINVAL;
	port = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || port < 0 || port > 65535)
		return -EINVAL;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(sa, 0, sizeof(*sa));
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)sa;

		host[strlen(host) - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
			return -EINVAL;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*s6);
		return 0;
	}
	{
		struct sockaddr_in *s4 = (struct sockaddr_in *)sa;

		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return -EINVAL;
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		*len = sizeof(*s4);
	}
	return 0;
}

int metrics_start(struct loop *l, const char *address, const struct metrics_sources *src,
		  struct metrics **ret)
{
	struct metrics *m = calloc(1, sizeof(*m));
	struct sockaddr_storage sa;
	const union MHD_DaemonInfo *info;
	unsigned int len;
	char host[INET6_ADDRSTRLEN] = "";
	unsigned int flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	int r;

	if (!m)
		return -ENOMEM;
	m->src = *src;
	m->mhd.fd = m->timer.fd = -1;
	r = metrics_parse_address(address, &sa, &len);
	if (r < 0)
		goto fail;
	if (sa.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	m->d = MHD_start_daemon(
		flags, ntohs(((struct sockaddr_in *)&sa)->sin_port), NULL, NULL, on_request, m,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_SOCK_ADDR,
		(struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)MAX_CONNECTIONS,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CONN_TIMEOUT_S, MHD_OPTION_END);
	if (!m->d) {
		hpn_error("metrics: cannot listen on %s", address);
		r = -EADDRNOTAVAIL;
		goto fail;
	}
	info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_EPOLL_FD);
	/* MHD keeps its epoll fd; ours only watches it: a dup, which is ours to close. */
	r = !info || info->epoll_fd < 0 ? -EIO : fcntl(info->epoll_fd, F_DUPFD_CLOEXEC, 0);
	if (r < 0 && r != -EIO)
		r = -errno;
	if (r >= 0)
		r = loop_add(l, &m->mhd, r, on_mhd, m);
	if (r >= 0)
		r = loop_timer(l, &m->timer, LOOP_OFF, 0, on_timer, m);
	if (r < 0)
		goto fail;
	info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
	if (sa.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, host, sizeof(host));
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, host, sizeof(host));
	hpn_info("metrics on http://%s%s%s:%u/metrics", sa.ss_family == AF_INET6 ? "[" : "", host,
		 sa.ss_family == AF_INET6 ? "]" : "", info ? info->port : 0);
	*ret = m;
	return 0;
fail:
	metrics_free(m);
	return r;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	loop_close(&m->mhd);
	loop_close(&m->timer);
	if (m->d)
		MHD_stop_daemon(m->d);
	free(m->cache);
	free(m);
}
