// SPDX-License-Identifier: Apache-2.0
/*
 * Prometheus metrics over HTTP (GET /metrics, text exposition format 0.0.4),
 * served by Debian's libmicrohttpd from the agent's own event loop: MHD runs
 * in its external-epoll mode (MHD_USE_EPOLL without a thread of its own), its
 * epoll fd sits in the loop's epoll, and MHD_run is called when that fd is
 * readable or MHD's connection timeout comes due (a timerfd). So a scrape is
 * answered on the loop's thread, and each service's renderer reads its own
 * state (the devices, the health loop's verdicts, the GC's and the event
 * log's counts) with no lock and no copy; the attachments' renderer
 * (attachmetrics.c) reads the journals and the kernel's counters. Scrapes
 * within a second of the last rendering get the same text. This file: the
 * exporter's own families, the renderers in their order, the cache and the
 * HTTP side; it knows no service (main.c registers them). Every metric, its
 * labels and where it comes from: doc/metrics.md.
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
#include <unistd.h>

#include "exposition.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "util.h"

#define CACHE_S		1.0
#define MAX_CONNECTIONS 16
#define CONN_TIMEOUT_S	10
#define CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"

struct renderer {
	metrics_render_fn *fn;
	void *ud;
};

struct metrics {
	double start_time; /* unix seconds */
	struct renderer *r;
	size_t n_r;
	struct MHD_Daemon *d;
	unsigned int port;
	struct loop_src mhd, timer;
	char *cache;
	size_t cache_len;
	double cache_at;
	double collect_s; /* the last collection's own time */
	uint64_t scrapes;
};

static void own_families(struct sbuf *b, const struct metrics *m)
{
	expo_family(b, "hpn_rdma_agent_build_info", "gauge",
		    "Always 1: the agent's version and the libraries it runs on.");
	expo_sample(b, "hpn_rdma_agent_build_info",
		    (const char *[]){ "version", HPN_VERSION, "grpc", grpc_version_string(),
				      "microhttpd", MHD_get_version(), NULL },
		    1);
	expo_gauge(b, "hpn_rdma_agent_start_time_seconds", "When the agent started (unix time).",
		   m->start_time);
	expo_gauge(b, "hpn_rdma_agent_collect_duration_seconds",
		   "How long the previous collection of the node's counters took.", m->collect_s);
	expo_counter(b, "hpn_rdma_agent_scrapes_total", "Requests for /metrics answered.",
		     m->scrapes);
}

static char *render(struct metrics *m, size_t *len)
{
	struct sbuf b = { 0 };
	double t0 = hpn_mono_s();

	own_families(&b, m);
	for (size_t i = 0; i < m->n_r; i++)
		m->r[i].fn(&b, m->r[i].ud);
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
		char *text = render(m, &len);

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

int metrics_new(double start_time, struct metrics **ret)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->start_time = start_time;
	m->mhd.fd = m->timer.fd = -1;
	*ret = m;
	return 0;
}

int metrics_register(struct metrics *m, metrics_render_fn *render_fn, void *ud)
{
	struct renderer *r = realloc(m->r, (m->n_r + 1) * sizeof(*r));

	if (!r)
		return -ENOMEM;
	r[m->n_r++] = (struct renderer){ .fn = render_fn, .ud = ud };
	m->r = r;
	/* The next scrape renders anew, with the new families. */
	free(m->cache);
	m->cache = NULL;
	m->cache_len = 0;
	return 0;
}

int metrics_start(struct metrics *m, struct loop *l, const char *address)
{
	struct sockaddr_storage sa;
	const union MHD_DaemonInfo *info;
	unsigned int len;
	char host[INET6_ADDRSTRLEN] = "";
	unsigned int flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	int r;

	if (m->d)
		return -EALREADY;
	r = metrics_parse_address(address, &sa, &len);
	if (r < 0)
		return r;
	if (sa.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	m->d = MHD_start_daemon(
		flags, ntohs(((struct sockaddr_in *)&sa)->sin_port), NULL, NULL, on_request, m,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_SOCK_ADDR,
		(struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)MAX_CONNECTIONS,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CONN_TIMEOUT_S, MHD_OPTION_END);
	if (!m->d) {
		hpn_error("metrics: cannot listen on %s", address);
		return -EADDRNOTAVAIL;
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
		return r;
	info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
	m->port = info ? info->port : 0;
	if (sa.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, host, sizeof(host));
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, host, sizeof(host));
	hpn_info("metrics on http://%s%s%s:%u/metrics", sa.ss_family == AF_INET6 ? "[" : "", host,
		 sa.ss_family == AF_INET6 ? "]" : "", m->port);
	return 0;
}

unsigned int metrics_port(const struct metrics *m)
{
	return m->port;
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
	free(m->r);
	free(m);
}
