// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for agent/metrics.c, the exporter, linked with no service (the
 * link proves it calls none): renderers registered before metrics_start
 * appear after the exporter's own families, in the order registered, each
 * with its own ud; one registered after the start is in the very next scrape
 * (the second's cache dropped), after them; a scrape within the second gets
 * the cached text without calling a renderer. Scrapes are plain HTTP/1.0
 * GETs made on the loop's worker while the loop serves them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"
#include "exposition.h"
#include "loop.h"
#include "metrics.h"
#include "util.h"

struct fam {
	const char *name;
	int calls;
};

static void render_fam(struct sbuf *b, void *ud)
{
	struct fam *f = ud;

	f->calls++;
	expo_gauge(b, f->name, "A family of the test.", f->calls);
}

/* GET path from 127.0.0.1:port, the whole answer (headers and body) or NULL. */
static char *http_get(unsigned int port, const char *path)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { .tv_sec = 5 };
	char req[256], *buf = NULL;
	size_t len = 0, cap = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ssize_t n;

	if (fd < 0)
		return NULL;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    write(fd, req, strlen(req)) != (ssize_t)strlen(req))
		goto fail;
	for (;;) {
		if (cap - len < 4096) {
			char *p = realloc(buf, cap + 65536);

			if (!p)
				goto fail;
			buf = p;
			cap += 65536;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return buf;
fail:
	close(fd);
	free(buf);
	return NULL;
}

/* The test's steps, each a scrape on the worker and a check back on the loop. */
struct scenario {
	struct loop *l;
	struct metrics *m;
	struct fam a, b, c;
	int step;
	char *text[3];
	double t1, t2; /* before the second scrape, after the third */
};

struct scrape_job {
	struct loop_job job; /* first: the worker hands this back */
	struct scenario *s;
	unsigned int port;
	char *text;
};

static void scrape_run(struct loop_job *j)
{
	struct scrape_job *sj = (struct scrape_job *)j;

	sj->text = http_get(sj->port, "/metrics");
}

static void next(struct scenario *s);

static void scrape_done(struct loop_job *j)
{
	struct scrape_job *sj = (struct scrape_job *)j;
	struct scenario *s = sj->s;

	CHECK(!j->cancelled);
	s->text[s->step++] = sj->text;
	free(sj);
	next(s);
}

static void scrape(struct scenario *s)
{
	struct scrape_job *sj = calloc(1, sizeof(*sj));
	int r;

	CHECK(sj != NULL);
	if (!sj) {
		loop_exit(s->l, 0, NULL, NULL);
		return;
	}
	*sj = (struct scrape_job){ .job = { .run = scrape_run, .done = scrape_done },
				   .s = s,
				   .port = metrics_port(s->m) };
	r = loop_work_post(s->l, &sj->job, LOOP_PRIO_HOST);
	CHECK_INT_EQ(r, 0);
	if (r < 0) {
		free(sj);
		loop_exit(s->l, 0, NULL, NULL);
	}
}

static void next(struct scenario *s)
{
	switch (s->step) {
	case 0:
		scrape(s);
		break;
	case 1:
		/* After the start, and within the cached second: in the next scrape all the same. */
		s->t1 = hpn_mono_s();
		CHECK_INT_EQ(metrics_register(s->m, render_fam, &s->c), 0);
		scrape(s);
		break;
	case 2:
		scrape(s);
		break;
	default:
		s->t2 = hpn_mono_s();
		loop_exit(s->l, 0, NULL, NULL);
	}
}

static void on_start(struct loop_src *src)
{
	next(src->ud);
}

/* Where name's family starts in text (its # HELP line), or NULL. */
static const char *family_at(const char *text, const char *name)
{
	char help[128];

	snprintf(help, sizeof(help), "# HELP %s ", name);
	return text ? strstr(text, help) : NULL;
}

static void test_register(void)
{
	struct scenario s = { .a = { .name = "hpn_test_a" },
			      .b = { .name = "hpn_test_b" },
			      .c = { .name = "hpn_test_c" } };
	struct loop_src kick = { .fd = -1 };
	const char *own, *fa, *fb, *fc;

	CHECK_INT_EQ(loop_new(&s.l), 0);
	CHECK_INT_EQ(loop_work_start(s.l), 0);
	CHECK_INT_EQ(metrics_new(1234.5, &s.m), 0);
	if (!s.l || !s.m)
		return;
	CHECK_INT_EQ(metrics_port(s.m), 0);
	CHECK_INT_EQ(metrics_register(s.m, render_fam, &s.a), 0);
	CHECK_INT_EQ(metrics_register(s.m, render_fam, &s.b), 0);
	CHECK_INT_EQ(metrics_start(s.m, s.l, "127.0.0.1:0"), 0);
	CHECK(metrics_port(s.m) > 0);
	CHECK_INT_EQ(metrics_start(s.m, s.l, "127.0.0.1:0"), -EALREADY);
	CHECK_INT_EQ(loop_timer(s.l, &kick, 0, 0, on_start, &s), 0);
	CHECK_INT_EQ(loop_run(s.l), 0);
	loop_close(&kick);
	loop_work_stop(s.l, 1000);

	/* Before the start: the exporter's own families, then a, then b; no c yet. */
	CHECK_STR_HAS(s.text[0], " 200 OK\r\n");
	CHECK_STR_HAS(s.text[0], "\r\n\r\n# HELP hpn_rdma_agent_build_info ");
	CHECK_STR_HAS(s.text[0], "\nhpn_rdma_agent_start_time_seconds 1234.5\n");
	CHECK_STR_HAS(s.text[0], "\nhpn_rdma_agent_scrapes_total 1\n");
	CHECK_STR_HAS(s.text[0], "# TYPE hpn_test_a gauge\nhpn_test_a 1\n");
	CHECK_STR_HAS(s.text[0], "# TYPE hpn_test_b gauge\nhpn_test_b 1\n");
	CHECK_STR_LACKS(s.text[0], "hpn_test_c");
	own = family_at(s.text[0], "hpn_rdma_agent_scrapes_total");
	fa = family_at(s.text[0], "hpn_test_a");
	fb = family_at(s.text[0], "hpn_test_b");
	CHECK(own && fa && fb && own < fa && fa < fb);

	/* Registered after the start, within the second: the next scrape has it, last. */
	CHECK_STR_HAS(s.text[1], "\nhpn_rdma_agent_scrapes_total 2\n");
	CHECK_STR_HAS(s.text[1], "# TYPE hpn_test_c gauge\nhpn_test_c 1\n");
	fa = family_at(s.text[1], "hpn_test_a");
	fb = family_at(s.text[1], "hpn_test_b");
	fc = family_at(s.text[1], "hpn_test_c");
	CHECK(fa && fb && fc && fa < fb && fb < fc);
	CHECK_STR_HAS(s.text[1], "\nhpn_test_a 2\n");

	/*
	 * Within the second again, nothing registered: the cached text, no
	 * renderer called. (A machine too busy to scrape twice in a second
	 * renders anew: then only that the third has every family.)
	 */
	CHECK_STR_HAS(s.text[2], "# TYPE hpn_test_c gauge\n");
	if (s.t2 - s.t1 < 0.9) {
		CHECK_INT_EQ(s.a.calls, 2);
		CHECK_INT_EQ(s.c.calls, 1);
		CHECK_STR_HAS(s.text[2], "\nhpn_rdma_agent_scrapes_total 2\n");
		CHECK_STR_HAS(s.text[2], "\nhpn_test_c 1\n");
	} else {
		fprintf(stderr, "note: %.2f s for two scrapes: the cache was not checked\n",
			s.t2 - s.t1);
	}

	for (size_t i = 0; i < 3; i++)
		free(s.text[i]);
	metrics_free(s.m);
	loop_free(s.l);
}

/* Registered with no HTTP at all: nothing served, and freed whole (ASan's leak check). */
static void test_never_started(void)
{
	struct metrics *m = NULL;
	struct fam a = { .name = "hpn_test_a" };

	CHECK_INT_EQ(metrics_new(0, &m), 0);
	CHECK_INT_EQ(metrics_register(m, render_fam, &a), 0);
	CHECK_INT_EQ(metrics_port(m), 0);
	CHECK_INT_EQ(a.calls, 0);
	metrics_free(m);
	metrics_free(NULL);
}

int main(void)
{
	test_register();
	test_never_started();
	return check_done();
}
