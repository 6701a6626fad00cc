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
 *
 * Any pod may connect to the port when it is on the node's address: a client
 * that holds connections open without a request, or one that opens thousands,
 * must never stop the scrapes. So MHD is driven whatever state it is in (see
 * run_mhd), one address gets a few connections (the rest are closed as they
 * come), an idle one is closed after CONN_TIMEOUT_S, and what MHD logs about
 * them is rate-limited.
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

#define CACHE_S 1.0
/* Connections at once: every Prometheus of a cluster and a few humans, with room to spare. */
#define MAX_CONNECTIONS 64
/* From one address: a scraper needs one; one pod cannot take the listener. */
#define PER_IP_CONNECTIONS 4
/* Idle (no byte either way) this long, a connection is closed: a scrape is answered at once. */
#define CONN_TIMEOUT_S 5
/* MHD is run at least this often, whatever it asked for (run_mhd). */
#define TICK_MS 1000
/* MHD's log lines a minute at most (one per refused connection): then a count. */
#define LOG_BURST    10
#define LOG_WINDOW_S 60.0
/* Longer is no ADDRESS:PORT: "[" an IPv6 address (45 at most) "]:65535" is 54. */
#define ADDRESS_MAX  128
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

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
	double log_since;		 /* the start of the current minute of MHD's log */
	unsigned int log_n, log_dropped; /* lines logged in it, lines dropped */
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

/* MHD's log, at most LOG_BURST lines a minute; the count of the rest when the minute is over. */
static void log_window(struct metrics *m, double now)
{
	if (now - m->log_since < LOG_WINDOW_S)
		return;
	if (m->log_dropped)
		hpn_warn("metrics: %u more libmicrohttpd messages in a minute, not logged",
			 m->log_dropped);
	m->log_since = now;
	m->log_n = m->log_dropped = 0;
}

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct metrics *m = cls;
	char msg[512];

	log_window(m, hpn_mono_s());
	if (m->log_n >= LOG_BURST) {
		m->log_dropped++;
		return;
	}
	m->log_n++;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	hpn_warn("metrics: %s", msg);
}

static unsigned int connections(struct metrics *m)
{
	const union MHD_DaemonInfo *info =
		MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

	return info ? info->num_connections : 0;
}

/*
 * One run of MHD, then the timer for the next. MHD (0.9.75 to 1.0.1,
 * daemon.c's MHD_epoll) takes its listen socket out of its epoll set while it
 * is at its connection limit (or accept failed for want of fds), and puts it
 * back only at the start of a later run, once a connection is gone. It does
 * not ask for that run: MHD_get_timeout gives the next connection's timeout,
 * none when the one closed was the last, and its epoll fd, without the listen
 * socket, never turns readable for a client waiting in the backlog. So a run
 * that closed a connection is followed by another at the next round; and the
 * timer is never off: MHD's own timeout, else TICK_MS, against any other state
 * of MHD's that waits for a run (a run with nothing to do is one epoll_wait).
 */
static void run_mhd(struct metrics *m)
{
	unsigned int before = connections(m);
	MHD_UNSIGNED_LONG_LONG ms = 0;

	MHD_run(m->d);
	if (connections(m) < before)
		ms = 0;
	else if (MHD_get_timeout(m->d, &ms) != MHD_YES || ms > TICK_MS)
		ms = TICK_MS;
	loop_timer_set(&m->timer, (int)ms, 0);
	log_window(m, hpn_mono_s());
}

static void on_mhd(struct loop_src *s)
{
	run_mhd(s->ud);
}

static int address_fail(const char **why, const char *what)
{
	if (why)
		*why = what;
	return -EINVAL;
}

/*
 * ADDRESS:PORT into sa, or -EINVAL and *why (a phrase, static): the port is
 * what follows the last ':', so that an IPv6 address needs no brackets (the
 * Downward API's status.hostIP of an IPv6 node, then ":9467").
 */
static int parse_address(const char *s, struct sockaddr_storage *ret_sa, unsigned int *ret_len,
			 const char **why)
{
	struct sockaddr_storage sa = { 0 };
	char host[INET6_ADDRSTRLEN];
	const char *colon, *h, *h_end, *p;
	unsigned long port = 0;
	bool brackets = s[0] == '[';

	if (strnlen(s, ADDRESS_MAX + 1) > ADDRESS_MAX)
		return address_fail(why, "too long for ADDRESS:PORT");
	colon = strrchr(s, ':');
	if (!colon)
		return address_fail(why, "no :PORT");
	if (!colon[1])
		return address_fail(why, "no port after the last ':'");
	for (p = colon + 1; *p; p++) {
		if (*p < '0' || *p > '9')
			return address_fail(why, "the port (after the last ':') is not digits");
		port = port * 10 + (unsigned long)(*p - '0');
		if (port > 65535)
			return address_fail(why, "the port (after the last ':') is above 65535");
	}
	h = s;
	h_end = colon;
	if (brackets) {
		if (colon == s || colon[-1] != ']')
			return address_fail(why, "'[' without ']' right before :PORT");
		h++;
		h_end--;
	}
	if (memchr(h, '[', (size_t)(h_end - h)) || memchr(h, ']', (size_t)(h_end - h)))
		return address_fail(why, "brackets other than [IPV6]:PORT");
	if (h == h_end)
		return address_fail(why, "no address before :PORT");
	if (memchr(h, '%', (size_t)(h_end - h)))
		return address_fail(why, "an IPv6 zone (%...) is not supported");
	if ((size_t)(h_end - h) >= sizeof(host))
		return address_fail(why, "not an IPv4 or IPv6 address before :PORT");
	memcpy(host, h, (size_t)(h_end - h));
	host[h_end - h] = '\0';
	if (brackets || strchr(host, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&sa;

		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
			return address_fail(why,
					    brackets ? "not an IPv6 address in the brackets"
						     : "not an IPv6 address before the last ':'");
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		*ret_len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&sa;

		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return address_fail(why, "not an IPv4 or IPv6 address before :PORT (names "
						 "are not resolved)");
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		*ret_len = sizeof(*s4);
	}
	*ret_sa = sa;
	return 0;
}

int metrics_parse_address(const char *s, struct sockaddr_storage *sa, unsigned int *len)
{
	return parse_address(s, sa, len, NULL);
}

const char *metrics_address_error(const char *s)
{
	struct sockaddr_storage sa;
	unsigned int len;
	const char *why = NULL;

	return parse_address(s, &sa, &len, &why) < 0 ? why : NULL;
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
	const char *why = NULL;
	int r;

	if (m->d)
		return -EALREADY;
	r = parse_address(address, &sa, &len, &why);
	if (r < 0) {
		hpn_error("metrics: address \"%s\": %s", address, why);
		return r;
	}
	if (sa.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	m->log_since = hpn_mono_s();
	m->d = MHD_start_daemon(
		flags, ntohs(((struct sockaddr_in *)&sa)->sin_port), NULL, NULL, on_request, m,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, m, MHD_OPTION_SOCK_ADDR,
		(struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)MAX_CONNECTIONS,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)PER_IP_CONNECTIONS,
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
		r = loop_timer(l, &m->timer, TICK_MS, 0, on_mhd, m);
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
