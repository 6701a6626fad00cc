// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for agent/core/rpc.c, the agent's gRPC (gRPC's C core, unsecure) on
 * its event loop, over a unix socket in a mkdtemp dir:
 *  - a call answered at once, and one answered later (on_close after it);
 *  - cancel: a client call past its deadline while the service holds it,
 *    and a server call whose client cancels it mid-call: the caller hears
 *    DEADLINE_EXCEEDED once, the service hears on_close once, nothing leaks;
 *  - send during close: a reply and stream sends started while the server
 *    stops, a client call started then: an error or nothing, never a use
 *    after free (ASan's build says so) or a leak (its leak check);
 *  - restart: a server stopped and started again on its path (the device
 *    plugin after a kubelet restart), also over a stale socket file (an
 *    agent killed) and before the old one is done.
 * rpc.c moves bytes: the messages are a protobuf message packed by hand
 * (field 1, a string), as protobuf-c would pack it; nothing here unpacks them.
 * Every callback is checked to run on the loop's thread, as rpc.h promises.
 */
#include <errno.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "loop.h"
#include "rpc.h"
#include "tmpdir.h"

#define M_ECHO	    "/hpn.test.v1.Test/Echo"  /* answers with the request at once */
#define M_HOLD	    "/hpn.test.v1.Test/Hold"  /* keeps the call; the test answers it or not */
#define M_WATCH	    "/hpn.test.v1.Test/Watch" /* a stream, kept like ListAndWatch */
#define GRACE_MS    10000		      /* a test that hangs fails here */
#define MAX_REPLIES 4

/* Field 1 (length-delimited) "ping" / "pong". */
static const uint8_t PING[] = { 0x0a, 0x04, 'p', 'i', 'n', 'g' };
static const uint8_t PONG[] = { 0x0a, 0x04, 'p', 'o', 'n', 'g' };

struct reply {
	int status;
	char msg[128];
	uint8_t buf[64];
	size_t len;
};

struct fx {
	struct loop *l;
	struct rpc *r;
	char dir[64], sock[160];
	pthread_t loop_thread;
	int off_loop; /* callbacks that ran on another thread */
	struct rpc_server *srv, *old;
	int stops; /* server done(ud) calls */
	/* The service. */
	int fn_calls, closes;
	struct rpc_call *held; /* the call Hold or Watch kept; NULL after its on_close */
	bool closed_wrong;     /* on_close named a call that is not the one kept */
	void (*then)(struct fx *f);
	struct loop_defer later; /* runs then(f) after the round that called fn */
	struct loop_src tick;	 /* a step of a test that waits */
	/* The client: its answers, in the order they came. */
	struct reply rep[MAX_REPLIES];
	int n_rep;
	/* The server is stopped (final) once this many answers and closes came. */
	int want_rep, want_closes;
	bool final_stop;
	atomic_bool *cancel; /* a raw client to cancel when Hold has its call */
};

static void on_loop(struct fx *f)
{
	f->off_loop += !pthread_equal(pthread_self(), f->loop_thread);
}

static void server_done(void *ud)
{
	struct fx *f = ud;

	on_loop(f);
	f->stops++;
}

/* The test's last step: stop the server when what it waits for came. */
static void maybe_stop(struct fx *f)
{
	if (f->final_stop || f->n_rep < f->want_rep || f->closes < f->want_closes)
		return;
	f->final_stop = true;
	rpc_server_stop(f->srv, server_done, f);
}

static void client_done(void *ud, int status, const char *msg, const uint8_t *buf, size_t len)
{
	struct fx *f = ud;
	struct reply *p;

	on_loop(f);
	if (f->n_rep >= MAX_REPLIES)
		abort();
	p = &f->rep[f->n_rep++];
	p->status = status;
	snprintf(p->msg, sizeof(p->msg), "%s", msg ? msg : "(null)");
	p->len = len < sizeof(p->buf) ? len : sizeof(p->buf);
	if (p->len)
		memcpy(p->buf, buf, p->len);
	maybe_stop(f);
}

static void echo(struct rpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	struct fx *f = ud;

	on_loop(f);
	f->fn_calls++;
	rpc_reply(c, req, len);
}

/* cppcheck-suppress constParameter ; the type rpc_call_on_close takes */
static void held_closed(struct rpc_call *c, void *ud)
{
	struct fx *f = ud;

	on_loop(f);
	f->closes++;
	f->closed_wrong |= c != f->held;
	f->held = NULL; /* freed by rpc.c after this */
	maybe_stop(f);
}

static void later(void *ud)
{
	struct fx *f = ud;

	if (f->then)
		f->then(f);
}

static void hold(struct rpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	struct fx *f = ud;

	on_loop(f);
	f->fn_calls++;
	f->held = c;
	rpc_call_on_close(c, held_closed, f);
	if (f->cancel)
		atomic_store(f->cancel, true);
	loop_defer(f->l, &f->later);
}

static void watch(struct rpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	hold(c, req, len, ud);
	rpc_stream_send(c, PING, sizeof(PING));
}

static const struct rpc_method methods[] = {
	{ .path = M_ECHO, .fn = echo },
	{ .path = M_HOLD, .fn = hold },
	{ .path = M_WATCH, .stream = true, .fn = watch },
};

static bool fx_idle(void *ud)
{
	const struct fx *f = ud;

	return f->final_stop && f->stops && rpc_busy(f->r) == 0;
}

static int start(struct fx *f, struct rpc_server **ret)
{
	return rpc_server_start(f->r, f->sock, methods, sizeof(methods) / sizeof(methods[0]), f,
				ret);
}

/* A loop, rpc on it, and a server on dir/t.sock. */
static void fx_open(struct fx *f, const char *what)
{
	memset(f, 0, sizeof(*f));
	tmpdir_make(f->dir, sizeof(f->dir), what);
	snprintf(f->sock, sizeof(f->sock), "%s/t.sock", f->dir);
	f->loop_thread = pthread_self();
	f->later.fn = later;
	f->later.ud = f;
	f->tick.fd = -1;
	if (loop_new(&f->l) < 0 || rpc_open(f->l, &f->r) < 0)
		abort();
	CHECK_INT_EQ(start(f, &f->srv), 0);
}

/* Runs until the server is stopped and nothing is busy (GRACE_MS at most), then closes. */
static void fx_run_close(struct fx *f)
{
	loop_exit(f->l, GRACE_MS, fx_idle, f);
	CHECK_INT_EQ(loop_run(f->l), 0);
	CHECK_INT_EQ(f->off_loop, 0);
	CHECK(!f->closed_wrong);
	CHECK_INT_EQ(rpc_busy(f->r), 0);
	/* rpc_close with calls in flight would wait for them: leave it to the exit. */
	if (rpc_busy(f->r) == 0)
		rpc_close(f->r);
	loop_close(&f->tick);
	loop_free(f->l);
	tmpdir_rm(f->dir);
}

static bool is_ping(const struct reply *p)
{
	return p->len == sizeof(PING) && !memcmp(p->buf, PING, sizeof(PING));
}

static bool is_pong(const struct reply *p)
{
	return p->len == sizeof(PONG) && !memcmp(p->buf, PONG, sizeof(PONG));
}

/* Answers may come in any order: the one with status OK (ok) or the one without, if only one. */
static const struct reply *only(const struct fx *f, bool ok)
{
	const struct reply *p = NULL;

	for (int i = 0; i < f->n_rep; i++) {
		if ((f->rep[i].status == RPC_OK) != ok)
			continue;
		if (p)
			return NULL;
		p = &f->rep[i];
	}
	return p;
}

/* ---- answers --------------------------------------------------------------------- */

/* The harness itself: a call answered at once; the socket root's alone, gone after stop. */
static void test_echo(void)
{
	struct fx f;
	struct stat st;

	fx_open(&f, "rpc-echo");
	CHECK_INT_EQ(stat(f.sock, &st), 0);
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_INT_EQ(st.st_mode & 0777, 0600);
	f.want_rep = 1;
	CHECK_INT_EQ(rpc_unary(f.r, f.sock, M_ECHO, PING, sizeof(PING), 5000, client_done, &f), 0);
	/* A method the server does not have. */
	CHECK_INT_EQ(rpc_unary(f.r, f.sock, "/hpn.test.v1.Test/Nope", PING, sizeof(PING), 2000,
			       client_done, &f),
		     0);
	f.want_rep = 2;
	fx_run_close(&f);
	CHECK_INT_EQ(f.n_rep, 2);
	CHECK_INT_EQ(f.fn_calls, 1);
	CHECK_INT_EQ(f.stops, 1);
	for (int i = 0; i < f.n_rep; i++) {
		if (f.rep[i].status == RPC_OK) {
			CHECK(is_ping(&f.rep[i]));
		} else {
			CHECK_INT_EQ(f.rep[i].status, RPC_UNIMPLEMENTED);
			CHECK_STR_HAS(f.rep[i].msg, "does not serve");
		}
	}
	CHECK_INT_NE(f.rep[0].status, f.rep[1].status);
	CHECK_INT_EQ(access(f.sock, F_OK), -1);
}

static void reply_pong(struct fx *f)
{
	rpc_reply(f->held, PONG, sizeof(PONG));
}

/*
 * An answer given after fn returned, on_close still set: the client has it,
 * and on_close comes once after it (the call ended, not only when cancelled).
 */
static void test_reply_later(void)
{
	struct fx f;

	fx_open(&f, "rpc-later");
	f.then = reply_pong;
	f.want_rep = 1;
	f.want_closes = 1;
	CHECK_INT_EQ(rpc_unary(f.r, f.sock, M_HOLD, PING, sizeof(PING), 5000, client_done, &f), 0);
	fx_run_close(&f);
	CHECK_INT_EQ(f.n_rep, 1);
	CHECK_INT_EQ(f.rep[0].status, RPC_OK);
	CHECK(is_pong(&f.rep[0]));
	CHECK_INT_EQ(f.closes, 1);
	CHECK(f.held == NULL);
	CHECK_INT_EQ(f.stops, 1);
}

/* ---- cancel ---------------------------------------------------------------------- */

/*
 * A client call past its deadline while the service holds it: the caller
 * hears DEADLINE_EXCEEDED once, the service on_close once (the call is gone:
 * it answers nothing), and rpc_busy comes back to 0.
 */
static void test_deadline(void)
{
	struct fx f;

	fx_open(&f, "rpc-deadline");
	f.want_rep = 1;
	f.want_closes = 1;
	CHECK_INT_EQ(rpc_unary(f.r, f.sock, M_HOLD, PING, sizeof(PING), 500, client_done, &f), 0);
	CHECK_INT_NE(rpc_busy(f.r), 0);
	fx_run_close(&f);
	CHECK_INT_EQ(f.fn_calls, 1);
	CHECK_INT_EQ(f.n_rep, 1);
	CHECK_INT_EQ(f.rep[0].status, RPC_DEADLINE_EXCEEDED);
	CHECK_INT_EQ(f.rep[0].len, 0);
	CHECK_INT_EQ(f.closes, 1);
	CHECK(f.held == NULL);
	CHECK_INT_EQ(f.stops, 1);
}

/* A client of gRPC's own (the kubelet's place), on a thread: cancels when told. */
struct raw {
	pthread_t t;
	const char *sock, *method;
	atomic_bool cancel;
	int status;
	bool gave_up; /* never told to cancel within GRACE_MS */
};

static void *raw_client(void *arg)
{
	struct raw *k = arg;
	grpc_completion_queue *cq;
	grpc_channel_credentials *cred;
	grpc_channel *ch;
	grpc_call *call;
	grpc_metadata_array imd, tmd;
	grpc_byte_buffer *send, *recv = NULL;
	grpc_status_code status = GRPC_STATUS_OK;
	grpc_slice details = grpc_empty_slice(), m, s;
	gpr_timespec give_up;
	grpc_op ops[6];
	char addr[200];
	bool cancelled = false;

	grpc_init();
	cq = grpc_completion_queue_create_for_next(NULL);
	snprintf(addr, sizeof(addr), "unix:%s", k->sock);
	cred = grpc_insecure_credentials_create();
	ch = grpc_channel_create(addr, cred, NULL);
	grpc_channel_credentials_release(cred);
	m = grpc_slice_from_static_string(k->method);
	call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL,
					gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	grpc_metadata_array_init(&imd);
	grpc_metadata_array_init(&tmd);
	s = grpc_slice_from_static_buffer(PING, sizeof(PING));
	send = grpc_raw_byte_buffer_create(&s, 1);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &imd;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &tmd;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	if (grpc_call_start_batch(call, ops, 6, k, NULL) != GRPC_CALL_OK)
		abort();
	give_up = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
			       gpr_time_from_millis(GRACE_MS, GPR_TIMESPAN));
	for (;;) {
		gpr_timespec tick = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
						 gpr_time_from_millis(10, GPR_TIMESPAN));
		grpc_event ev = grpc_completion_queue_next(cq, tick, NULL);

		if (ev.type == GRPC_OP_COMPLETE)
			break;
		if (cancelled)
			continue;
		if (atomic_load(&k->cancel) ||
		    (k->gave_up = gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), give_up) > 0)) {
			grpc_call_cancel(call, NULL);
			cancelled = true;
		}
	}
	k->status = (int)status;
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&imd);
	grpc_metadata_array_destroy(&tmd);
	grpc_byte_buffer_destroy(send);
	if (recv)
		grpc_byte_buffer_destroy(recv);
	grpc_call_unref(call);
	grpc_channel_destroy(ch);
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	grpc_shutdown();
	return NULL;
}

/*
 * A server call whose client cancels it while the service holds it (the
 * kubelet gone mid-Prepare): the service hears on_close once and nothing
 * after; the server then stops with nothing left.
 */
static void test_client_cancels(void)
{
	struct fx f;
	struct raw k = { .method = M_HOLD };

	fx_open(&f, "rpc-cancel");
	k.sock = f.sock;
	atomic_init(&k.cancel, false);
	f.cancel = &k.cancel;
	f.want_closes = 1;
	if (pthread_create(&k.t, NULL, raw_client, &k))
		abort();
	fx_run_close(&f);
	pthread_join(k.t, NULL);
	CHECK(!k.gave_up);
	CHECK_INT_EQ(k.status, GRPC_STATUS_CANCELLED);
	CHECK_INT_EQ(f.fn_calls, 1);
	CHECK_INT_EQ(f.closes, 1);
	CHECK(f.held == NULL);
	CHECK_INT_EQ(f.stops, 1);
}

/* ---- send during close -------------------------------------------------------------- */

/* The service answers in the same breath as the server is stopped (its on_close not yet run). */
static void stop_then_reply(struct fx *f)
{
	f->final_stop = true;
	rpc_server_stop(f->srv, server_done, f);
	rpc_reply(f->held, PONG, sizeof(PONG));
}

/*
 * A reply started after rpc_server_stop, to a call the stop cancelled: it
 * goes nowhere; the client hears an error, the service on_close once, and the
 * server's done comes once, after all of it.
 */
static void test_reply_during_stop(void)
{
	struct fx f;

	fx_open(&f, "rpc-stopreply");
	f.then = stop_then_reply;
	CHECK_INT_EQ(rpc_unary(f.r, f.sock, M_HOLD, PING, sizeof(PING), 5000, client_done, &f), 0);
	fx_run_close(&f);
	CHECK_INT_EQ(f.fn_calls, 1);
	CHECK_INT_EQ(f.n_rep, 1);
	CHECK_INT_EQ(f.rep[0].status, RPC_UNAVAILABLE); /* gRPC's "Cancelling all calls" */
	CHECK(!is_pong(&f.rep[0]));
	CHECK_INT_EQ(f.closes, 1);
	CHECK(f.held == NULL);
	CHECK_INT_EQ(f.stops, 1);
}

/*
 * A stream's sends around the stop. Messages of 1 KiB, not 6 bytes: gRPC
 * keeps a slice that small inside itself, and one never freed would leak
 * nothing the leak check could see. BIG is larger than any flow-control
 * window, and the client (rpc_unary) reads one message only: once it is in
 * flight it stays there, so the next send waits, and still waits at the stop.
 */
#define BIG_LEN (8u << 20)
static uint8_t big[BIG_LEN], mid[1024];

static void stream_stop(struct loop_src *s)
{
	struct fx *f = s->ud;

	if (f->held) {
		rpc_stream_send(f->held, mid, sizeof(mid)); /* waits behind BIG */
		mid[0]++;
	}
	f->final_stop = true;
	rpc_server_stop(f->srv, server_done, f);
	if (f->held)
		rpc_stream_send(f->held, mid, sizeof(mid)); /* replaces the one waiting */
}

static void stream_big(struct fx *f)
{
	/* Waits behind fn's PING, then goes out and sticks. */
	rpc_stream_send(f->held, big, sizeof(big));
	if (loop_timer(f->l, &f->tick, 300, 0, stream_stop, f) < 0)
		abort();
}

/* The messages waiting when the stop cancels the stream are freed with it (the leak check). */
static void test_stream_during_stop(void)
{
	struct fx f;

	fx_open(&f, "rpc-stopstream");
	f.then = stream_big;
	CHECK_INT_EQ(rpc_unary(f.r, f.sock, M_WATCH, PING, sizeof(PING), 1500, client_done, &f), 0);
	fx_run_close(&f);
	CHECK_INT_EQ(f.fn_calls, 1);
	CHECK_INT_EQ(f.n_rep, 1);
	/*
	 * The first message, then no answer: with BIG unread, the client's core
	 * gives it the stop's cancellation only at its deadline.
	 */
	CHECK(is_ping(&f.rep[0]));
	CHECK_INT_NE(f.rep[0].status, RPC_OK);
	CHECK_INT_EQ(f.closes, 1);
	CHECK(f.held == NULL);
	CHECK_INT_EQ(f.stops, 1);
}

/* A client call started right after rpc_server_stop: UNAVAILABLE; the service never sees it. */
static void test_call_during_stop(void)
{
	struct fx f;

	fx_open(&f, "rpc-stopcall");
	f.final_stop = true;
	rpc_server_stop(f.srv, server_done, &f);
	CHECK_INT_EQ(rpc_unary(f.r, f.sock, M_ECHO, PING, sizeof(PING), 5000, client_done, &f), 0);
	fx_run_close(&f);
	CHECK_INT_EQ(f.n_rep, 1);
	CHECK_INT_EQ(f.rep[0].status, RPC_UNAVAILABLE);
	CHECK_INT_EQ(f.fn_calls, 0);
	CHECK_INT_EQ(f.stops, 1);
}

/* ---- restart --------------------------------------------------------------------- */

static void restart_stopped(void *ud)
{
	struct fx *f = ud;
	struct stat st;

	on_loop(f);
	f->stops++;
	/* The old server took its socket file with it; the new one makes its own. */
	CHECK_INT_EQ(access(f->sock, F_OK), -1);
	CHECK_INT_EQ(start(f, &f->srv), 0);
	CHECK_INT_EQ(stat(f->sock, &st), 0);
	CHECK_INT_EQ(st.st_mode & 0777, 0600);
	f->want_rep = 2;
	CHECK_INT_EQ(rpc_unary(f->r, f->sock, M_ECHO, PING, sizeof(PING), 5000, client_done, f), 0);
}

static void stop_for_restart(struct fx *f)
{
	rpc_server_stop(f->srv, restart_stopped, f);
}

/*
 * Stopped and started again on its path once the old one is done, as the
 * device plugin does: the call in flight to the old server fails (not a
 * deadline: at the stop), a call after reaches the new one. rpc_unary opens
 * a channel per call, so no client of rpc.c holds a connection across it.
 */
static void test_restart(void)
{
	struct fx f;

	fx_open(&f, "rpc-restart");
	f.then = stop_for_restart;
	f.want_rep = MAX_REPLIES + 1; /* set by restart_stopped */
	CHECK_INT_EQ(rpc_unary(f.r, f.sock, M_HOLD, PING, sizeof(PING), 5000, client_done, &f), 0);
	fx_run_close(&f);
	CHECK_INT_EQ(f.stops, 2);
	CHECK_INT_EQ(f.fn_calls, 2);
	CHECK_INT_EQ(f.closes, 1);
	CHECK_INT_EQ(f.n_rep, 2);
	/* The held call, cut by the stop, and the one to the new server. */
	CHECK(only(&f, false) && only(&f, false)->status == RPC_UNAVAILABLE);
	CHECK(only(&f, true) && is_ping(only(&f, true)));
}

/* A socket file left by a process killed while serving (bound, never unlinked). */
static void stale_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (strlen(path) >= sizeof(sa.sun_path))
		abort();
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		abort();
	close(fd);
}

/* The agent killed and started again: a server starts over the socket file left behind. */
static void test_start_over_stale(void)
{
	struct fx f;
	struct stat st;

	memset(&f, 0, sizeof(f));
	tmpdir_make(f.dir, sizeof(f.dir), "rpc-stale");
	snprintf(f.sock, sizeof(f.sock), "%s/t.sock", f.dir);
	stale_socket(f.sock);
	CHECK_INT_EQ(stat(f.sock, &st), 0);
	CHECK(S_ISSOCK(st.st_mode));
	f.loop_thread = pthread_self();
	f.later.fn = later;
	f.later.ud = &f;
	f.tick.fd = -1;
	if (loop_new(&f.l) < 0 || rpc_open(f.l, &f.r) < 0)
		abort();
	CHECK_INT_EQ(start(&f, &f.srv), 0);
	f.want_rep = 1;
	CHECK_INT_EQ(rpc_unary(f.r, f.sock, M_ECHO, PING, sizeof(PING), 5000, client_done, &f), 0);
	fx_run_close(&f);
	CHECK_INT_EQ(f.n_rep, 1);
	CHECK_INT_EQ(f.rep[0].status, RPC_OK);
	CHECK(is_ping(&f.rep[0]));
}

static void old_done(void *ud)
{
	struct fx *f = ud;

	on_loop(f);
	f->stops++;
	f->old = NULL;
	/* The new server's socket outlives the old server. */
	CHECK_INT_EQ(access(f->sock, F_OK), 0);
	f->want_rep = 2; /* the held call's and this one's */
	CHECK_INT_EQ(rpc_unary(f->r, f->sock, M_ECHO, PING, sizeof(PING), 5000, client_done, f), 0);
}

/* The old server stopped and a new one started on its path at once, the old one's calls still out. */
static void stop_and_start_at_once(struct fx *f)
{
	f->old = f->srv;
	rpc_server_stop(f->old, old_done, f);
	CHECK_INT_EQ(start(f, &f->srv), 0);
}

/*
 * A new server on the path before the old one is done (its held call not
 * yet closed): the old one, when done, leaves the new one's socket alone.
 */
static void test_restart_before_done(void)
{
	struct fx f;

	fx_open(&f, "rpc-early");
	f.then = stop_and_start_at_once;
	f.want_rep = MAX_REPLIES + 1; /* set by old_done */
	CHECK_INT_EQ(rpc_unary(f.r, f.sock, M_HOLD, PING, sizeof(PING), 5000, client_done, &f), 0);
	fx_run_close(&f);
	CHECK_INT_EQ(f.stops, 2);
	CHECK_INT_EQ(f.closes, 1);
	CHECK_INT_EQ(f.n_rep, 2);
	CHECK(only(&f, false) && only(&f, false)->status == RPC_UNAVAILABLE);
	CHECK(only(&f, true) && is_ping(only(&f, true)));
}

int main(void)
{
	test_echo();
	test_reply_later();
	test_deadline();
	test_client_cancels();
	test_reply_during_stop();
	test_stream_during_stop();
	test_call_during_stop();
	test_restart();
	test_start_over_stale();
	test_restart_before_done();
	return check_done();
}
