// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for agent/lookup.c's socket (issue 38, defect 7): readers that
 * send a request and never take the reply do not block the loop. The pod
 * question is answered by a stand-in for podwatch_answer with a reply larger
 * than a unix socket's send buffer, so a blocking send would wait (200 ms
 * each, the old code's timeout) for every stuck reader; another client's
 * lookup must be answered within 1 s meanwhile (30 stuck readers: 6 s the
 * old way), and the stuck ones are closed by the sweep at their deadline.
 * And the NRI question, answered from what main.c gives (lookup_nri), or
 * "without --nri" when it gives nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "alloc.h"
#include "check.h"
#include "lookup.h"
#include "loop.h"
#include "podresources.h"
#include "podwatch.h"
#include "tmpdir.h"
#include "util.h"

#define BIG   (1 << 20) /* over any unix socket's send buffer */
#define STUCK 30	/* of the lookup's 32 connections */

static char tmp[64], sock_path[96];

/* ---- stand-ins for the kubelet's and the API's answers -------------------------- */

int podres_pod_devices(struct podres *p, const struct hpn_alloc_req *req,
		       const struct podres_xclaim *xc, int timeout_ms, podres_fn fn, void *ud)
{
	(void)p;
	(void)req;
	(void)xc;
	(void)timeout_ms;
	(void)fn;
	(void)ud;
	return -ENOSYS;
}

bool podwatch_xclaim(struct podwatch *pw, const struct hpn_alloc_req *req, char *claim,
		     size_t claim_len, char *res, size_t res_len)
{
	(void)pw;
	(void)req;
	(void)claim;
	(void)claim_len;
	(void)res;
	(void)res_len;
	return false;
}

char *podwatch_answer(struct podwatch *pw, const struct hpn_alloc_req *req)
{
	char *s = malloc(BIG + 1);

	(void)pw;
	(void)req;
	if (!s)
		abort();
	memset(s, 'x', BIG - 1);
	s[BIG - 1] = '\n';
	s[BIG] = '\0';
	return s;
}

/* ---- the clients, on a thread of their own ------------------------------------- */

struct clients {
	int done_fd; /* written when they are through: the loop stops */
	double answered_s;
	size_t answered_len;
	size_t stuck_len[STUCK];
	int stuck_closed;
};

static int ask(void)
{
	static const char req[] =
		"{\"version\":1,\"namespace\":\"ns\",\"name\":\"pod\",\"query\":\"pod\"}\n";
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
		abort();
	return fd;
}

/* Reads to EOF; the bytes read. */
static size_t drain(int fd)
{
	char buf[65536];
	size_t total = 0;
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		total += (size_t)n;
	return total;
}

static void *clients_run(void *arg)
{
	struct clients *cl = arg;
	int stuck[STUCK], fd;
	double t0;

	for (int i = 0; i < STUCK; i++)
		stuck[i] = ask();
	/* The loop is at the stuck ones' replies by now (the old one blocked on them). */
	usleep(100 * 1000);
	t0 = hpn_mono_s();
	fd = ask();
	cl->answered_len = drain(fd);
	cl->answered_s = hpn_mono_s() - t0;
	close(fd);
	/* The stuck ones read only now: past the deadline, closed before the reply's end. */
	sleep(4);
	for (int i = 0; i < STUCK; i++) {
		cl->stuck_len[i] = drain(stuck[i]);
		cl->stuck_closed += cl->stuck_len[i] < BIG;
		close(stuck[i]);
	}
	if (write(cl->done_fd, "x", 1) != 1)
		abort();
	return NULL;
}

static void on_done(struct loop_src *s)
{
	loop_exit(s->ud, 0, NULL, NULL);
}

static void test_stuck_readers(void)
{
	struct loop *l = NULL;
	struct lookup *lk = NULL;
	struct loop_src done = { .fd = -1 };
	struct clients cl = { 0 };
	pthread_t t;
	int fds[2];

	CHECK_INT_EQ(loop_new(&l), 0);
	snprintf(sock_path, sizeof(sock_path), "%s/lookup.sock", tmp);
	CHECK_INT_EQ(lookup_start(l, (struct podres *)tmp, sock_path, &lk), 0);
	lookup_set_pods(lk, (struct podwatch *)tmp);
	if (pipe(fds) < 0 || loop_add(l, &done, fds[0], on_done, l) < 0)
		abort();
	cl.done_fd = fds[1];
	CHECK_INT_EQ(pthread_create(&t, NULL, clients_run, &cl), 0);
	CHECK_INT_EQ(loop_run(l), 0);
	pthread_join(t, NULL);
	fprintf(stderr, "a lookup answered in %.3f s beside %d stuck readers\n", cl.answered_s,
		STUCK);
	CHECK_INT_EQ(cl.answered_len, BIG);
	CHECK(cl.answered_s < 1.0);
	CHECK_INT_EQ(cl.stuck_closed, STUCK);
	CHECK(cl.stuck_len[0] > 0);
	lookup_free(lk);
	loop_close(&done);
	close(fds[1]);
	loop_free(l);
}

/* ---- the NRI question ("query": "nri") ---------------------------------------- */

struct nri_client {
	int done_fd;
	const char *line;
	char reply[4096];
};

static void *nri_client_run(void *arg)
{
	struct nri_client *nc = arg;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	size_t got = 0;
	ssize_t n;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    write(fd, nc->line, strlen(nc->line)) != (ssize_t)strlen(nc->line))
		abort();
	while ((n = read(fd, nc->reply + got, sizeof(nc->reply) - 1 - got)) > 0)
		got += (size_t)n;
	nc->reply[got] = '\0';
	close(fd);
	if (write(nc->done_fd, "x", 1) != 1)
		abort();
	return NULL;
}

/* What main.c's nri_state says of a registered link. */
static void registered(void *ud, struct hpn_nri_state *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->registered = true;
	snprintf(ret->runtime, sizeof(ret->runtime), "containerd");
	snprintf(ret->version, sizeof(ret->version), "v2.1.9");
	snprintf(ret->socket, sizeof(ret->socket), "%s", (const char *)ud);
}

/* line asked of a lookup (with state as its NRI answer, or none); the reply into reply. */
static void ask_nri(const char *line, void (*state)(void *, struct hpn_nri_state *),
		    char reply[4096])
{
	struct loop *l = NULL;
	struct lookup *lk = NULL;
	struct loop_src done = { .fd = -1 };
	struct nri_client nc = { .line = line };
	pthread_t t;
	int fds[2];

	CHECK_INT_EQ(loop_new(&l), 0);
	snprintf(sock_path, sizeof(sock_path), "%s/nri.sock", tmp);
	CHECK_INT_EQ(lookup_start(l, (struct podres *)tmp, sock_path, &lk), 0);
	if (state)
		lookup_nri(lk, state, "/run/nri/nri.sock");
	if (pipe(fds) < 0 || loop_add(l, &done, fds[0], on_done, l) < 0)
		abort();
	nc.done_fd = fds[1];
	CHECK_INT_EQ(pthread_create(&t, NULL, nri_client_run, &nc), 0);
	CHECK_INT_EQ(loop_run(l), 0);
	pthread_join(t, NULL);
	memcpy(reply, nc.reply, sizeof(nc.reply));
	lookup_free(lk);
	loop_close(&done);
	close(fds[1]);
	loop_free(l);
}

static void test_nri_question(void)
{
	struct hpn_nri_state st;
	struct hpn_err err = { 0 };
	char reply[4096];

	/* Without --nri: not registered, and why. */
	ask_nri("{\"version\":1,\"query\":\"nri\"}\n", NULL, reply);
	CHECK_STR_EQ(reply, "{\"version\":1,\"nri\":{\"registered\":false,\"why\":\"no NRI "
			    "link: the agent runs without --nri\"}}");
	CHECK_INT_EQ(hpn_nri_reply_parse(reply, strlen(reply), &st, &err), 0);
	CHECK(!st.registered);

	/* With it: main.c's answer, as it is now; the pod is for the log only. */
	ask_nri("{\"version\":1,\"namespace\":\"ns\",\"name\":\"p\",\"query\":\"nri\"}\n",
		registered, reply);
	CHECK_STR_EQ(reply,
		     "{\"version\":1,\"nri\":{\"registered\":true,\"socket\":\"/run/nri/"
		     "nri.sock\",\"runtime\":\"containerd\",\"runtimeVersion\":\"v2.1.9\"}}");
	CHECK_INT_EQ(hpn_nri_reply_parse(reply, strlen(reply), &st, &err), 0);
	CHECK(st.registered);
	CHECK_STR_EQ(st.runtime, "containerd");

	/* A bad pod in the question is refused like any request. */
	ask_nri("{\"version\":1,\"namespace\":\"ns\",\"query\":\"nri\"}\n", registered, reply);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_nri_reply_parse(reply, strlen(reply), &st, &err), -EAGAIN);
	CHECK_STR_HAS(err.msg, "pod name");
}

int main(void)
{
	tmpdir_make(tmp, sizeof(tmp), "lookup");
	test_nri_question();
	test_stuck_readers();
	tmpdir_rm(tmp);
	return check_done();
}
