// SPDX-License-Identifier: Apache-2.0
#include "rpc.h"

#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <protobuf-c/protobuf-c.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"

/* Every tag on the queue is one of these: what to run on the loop when it completes. */
struct rpc_op {
	void (*fn)(struct rpc_op *op, bool ok);
	struct rpc_op *next; /* the pump's hand-over list */
	bool ok;
};

struct rpc {
	grpc_completion_queue *cq;
	pthread_t pump;
	struct loop_src efd; /* the pump's hand-over, in the loop */
	pthread_mutex_t lock;
	struct rpc_op *head, **tail; /* completions waiting for the loop */
	size_t busy;
};

struct rpc_server {
	struct rpc *r;
	grpc_server *srv;
	const struct rpc_method *m;
	size_t n_m;
	void *ud;
	char *path;
	dev_t sock_dev; /* the socket file this server bound, the one it may unlink */
	ino_t sock_ino;
	/* The one grpc_server_request_call outstanding. */
	struct rpc_call *next_call;
	struct rpc_op op_shutdown;
	size_t calls; /* rpc_call objects alive */
	bool stopping, shut;
	void (*done)(void *ud);
	void *done_ud;
};

struct rpc_call {
	struct rpc_server *s;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array md;
	const struct rpc_method *m;
	struct rpc_op op_new, op_recv, op_send, op_close;
	grpc_byte_buffer *recv, *send;
	int cancelled;
	int refs;	    /* batches in flight */
	bool answered;	    /* unary: status sent; stream: closed */
	bool md_sent;	    /* initial metadata went with the first message */
	bool sending;	    /* a stream send in flight */
	grpc_slice pending; /* the stream's latest unsent message */
	bool has_pending;
	grpc_slice status_msg;
	void (*on_close)(struct rpc_call *c, void *ud);
	void *on_close_ud;
};

#define container_of(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))

/* ---- the pump and the loop's side --------------------------------------------- */

static void *pump(void *arg)
{
	struct rpc *r = arg;

	for (;;) {
		grpc_event ev =
			grpc_completion_queue_next(r->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		struct rpc_op *op;
		uint64_t one = 1;

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		op = ev.tag;
		op->ok = ev.success;
		op->next = NULL;
		pthread_mutex_lock(&r->lock);
		*r->tail = op;
		r->tail = &op->next;
		pthread_mutex_unlock(&r->lock);
		if (write(r->efd.fd, &one, sizeof(one)) < 0)
			hpn_warn("rpc: eventfd: %s", strerror(errno));
	}
	return NULL;
}

/* The loop's side: runs the callbacks of every completion the pump handed over. */
static void dispatch(struct loop_src *s)
{
	struct rpc *r = s->ud;
	struct rpc_op *op;
	uint64_t n;

	if (read(s->fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		hpn_warn("rpc: eventfd: %s", strerror(errno));
	pthread_mutex_lock(&r->lock);
	op = r->head;
	r->head = NULL;
	r->tail = &r->head;
	pthread_mutex_unlock(&r->lock);
	while (op) {
		struct rpc_op *next = op->next;

		op->fn(op, op->ok);
		op = next;
	}
}

int rpc_open(struct loop *l, struct rpc **ret)
{
	struct rpc *r = calloc(1, sizeof(*r));
	int fd, e;

	if (!r)
		return -ENOMEM;
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	e = fd < 0 ? -errno : loop_add(l, &r->efd, fd, dispatch, r);
	if (e < 0) {
		free(r);
		return e;
	}
	pthread_mutex_init(&r->lock, NULL);
	r->tail = &r->head;
	grpc_init();
	r->cq = grpc_completion_queue_create_for_next(NULL);
	e = pthread_create(&r->pump, NULL, pump, r);
	if (e) {
		grpc_completion_queue_shutdown(r->cq);
		grpc_completion_queue_destroy(r->cq);
		grpc_shutdown();
		loop_close(&r->efd);
		free(r);
		return -e;
	}
	*ret = r;
	return 0;
}

size_t rpc_busy(const struct rpc *r)
{
	return r->busy;
}

void rpc_close(struct rpc *r)
{
	if (!r)
		return;
	grpc_completion_queue_shutdown(r->cq);
	pthread_join(r->pump, NULL);
	/* Completions handed over but never dispatched belong to nothing now. */
	grpc_completion_queue_destroy(r->cq);
	grpc_shutdown();
	pthread_mutex_destroy(&r->lock);
	loop_close(&r->efd);
	free(r);
}

/* ---- bytes ------------------------------------------------------------------ */

static grpc_byte_buffer *bytes_buffer(const uint8_t *buf, size_t len)
{
	grpc_slice s = grpc_slice_from_copied_buffer((const char *)buf, len);
	grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);

	grpc_slice_unref(s);
	return bb;
}

/* The whole message as one slice (unref it); an empty slice for no message. */
static grpc_slice buffer_bytes(grpc_byte_buffer *bb)
{
	grpc_byte_buffer_reader rd;
	grpc_slice s;

	if (!bb || !grpc_byte_buffer_reader_init(&rd, bb))
		return grpc_empty_slice();
	s = grpc_byte_buffer_reader_readall(&rd);
	grpc_byte_buffer_reader_destroy(&rd);
	return s;
}

/* ---- server calls ------------------------------------------------------------ */

static void server_maybe_done(struct rpc_server *s);
static int request_next(struct rpc_server *s);

/* NOLINTBEGIN(clang-analyzer-unix.Malloc): refs counts the batches in flight; only 0 frees */
static void call_unref(struct rpc_call *c)
{
	struct rpc_server *s = c->s;

	if (--c->refs > 0)
		return;
	if (c->call)
		grpc_call_unref(c->call);
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->md);
	if (c->recv)
		grpc_byte_buffer_destroy(c->recv);
	if (c->send)
		grpc_byte_buffer_destroy(c->send);
	if (c->has_pending)
		grpc_slice_unref(c->pending);
	grpc_slice_unref(c->status_msg);
	free(c);
	s->calls--;
	s->r->busy--;
	server_maybe_done(s);
}
/* NOLINTEND(clang-analyzer-unix.Malloc) */

static void on_close(struct rpc_op *op, bool ok)
{
	struct rpc_call *c = container_of(op, struct rpc_call, op_close);

	c->answered = true;
	if (c->on_close)
		c->on_close(c, c->on_close_ud);
	c->on_close = NULL;
	call_unref(c);
}

static void on_sent(struct rpc_op *op, bool ok);

static void start_send(struct rpc_call *c, grpc_byte_buffer *bb, bool status, int code,
		       const char *msg)
{
	grpc_op ops[3];
	size_t n = 0;
	grpc_call_error e;

	memset(ops, 0, sizeof(ops));
	if (!c->md_sent) {
		ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
		c->md_sent = true;
	}
	if (bb) {
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = bb;
	}
	if (status) {
		grpc_slice_unref(c->status_msg);
		c->status_msg = grpc_slice_from_copied_string(msg ? msg : "");
		ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
		ops[n].data.send_status_from_server.status = (grpc_status_code)code;
		ops[n++].data.send_status_from_server.status_details = &c->status_msg;
		c->answered = true;
	}
	c->send = bb;
	c->sending = true;
	c->refs++;
	c->op_send.fn = on_sent;
	e = grpc_call_start_batch(c->call, ops, n, &c->op_send, NULL);
	if (e != GRPC_CALL_OK) {
		hpn_warn("rpc: %s: start_batch: %d", c->m ? c->m->path : "call", e);
		c->sending = false;
		c->send = NULL;
		if (bb)
			grpc_byte_buffer_destroy(bb);
		call_unref(c);
	}
}

static void on_sent(struct rpc_op *op, bool ok)
{
	struct rpc_call *c = container_of(op, struct rpc_call, op_send);

	if (c->send)
		grpc_byte_buffer_destroy(c->send);
	c->send = NULL;
	c->sending = false;
	if (ok && c->has_pending && !c->answered) {
		grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&c->pending, 1);

		grpc_slice_unref(c->pending);
		c->has_pending = false;
		start_send(c, bb, false, 0, NULL);
	}
	call_unref(c);
}

void rpc_reply(struct rpc_call *c, const uint8_t *buf, size_t len)
{
	start_send(c, bytes_buffer(buf, len), true, RPC_OK, NULL);
}

void rpc_fail(struct rpc_call *c, int status, const char *msg)
{
	start_send(c, NULL, true, status, msg);
}

void rpc_stream_send(struct rpc_call *c, const uint8_t *buf, size_t len)
{
	if (c->answered)
		return;
	if (c->sending) {
		if (c->has_pending)
			grpc_slice_unref(c->pending);
		c->pending = grpc_slice_from_copied_buffer((const char *)buf, len);
		c->has_pending = true;
		return;
	}
	start_send(c, bytes_buffer(buf, len), false, 0, NULL);
}

void rpc_call_on_close(struct rpc_call *c, void (*fn)(struct rpc_call *c, void *ud), void *ud)
{
	c->on_close = fn;
	c->on_close_ud = ud;
}

/* cppcheck-suppress constParameter ; the type rpc_call_on_close takes */
static void streams_closed(struct rpc_call *c, void *ud)
{
	struct rpc_streams *s = ud;

	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == c) {
			s->v[i] = s->v[--s->n];
			hpn_info("%s stream closed (%zu open)", s->what, s->n);
			return;
		}
}

int rpc_streams_add(struct rpc_streams *s, struct rpc_call *c)
{
	if (s->n == RPC_STREAMS_MAX)
		return -EBUSY;
	s->v[s->n++] = c;
	rpc_call_on_close(c, streams_closed, s);
	return 0;
}

void rpc_streams_send(const struct rpc_streams *s, const uint8_t *buf, size_t len,
		      const struct rpc_call *skip)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] != skip)
			rpc_stream_send(s->v[i], buf, len);
}

static void on_recv(struct rpc_op *op, bool ok)
{
	struct rpc_call *c = container_of(op, struct rpc_call, op_recv);
	grpc_slice s;

	if (!ok || !c->recv) {
		if (!c->answered)
			rpc_fail(c, RPC_INVALID_ARGUMENT, "no request message");
		call_unref(c);
		return;
	}
	s = buffer_bytes(c->recv);
	grpc_byte_buffer_destroy(c->recv);
	c->recv = NULL;
	if (c->s->stopping)
		rpc_fail(c, RPC_UNAVAILABLE, "hpn-rdma-agent is stopping");
	else
		c->m->fn(c, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s), c->s->ud);
	grpc_slice_unref(s);
	call_unref(c);
}

static bool slice_is(grpc_slice s, const char *str)
{
	size_t n = strlen(str);

	return GRPC_SLICE_LENGTH(s) == n && !memcmp(GRPC_SLICE_START_PTR(s), str, n);
}

static void on_new(struct rpc_op *op, bool ok)
{
	struct rpc_call *c = container_of(op, struct rpc_call, op_new);
	struct rpc_server *s = c->s;
	grpc_op ops[1];

	s->next_call = NULL;
	if (!ok) { /* the server is shutting down */
		call_unref(c);
		return;
	}
	if (!s->stopping && request_next(s) < 0)
		hpn_warn("rpc: %s: cannot take more calls", s->path);
	/* Learn when the peer goes: the ListAndWatch streams live until then. */
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[0].data.recv_close_on_server.cancelled = &c->cancelled;
	c->op_close.fn = on_close;
	c->refs++;
	if (grpc_call_start_batch(c->call, ops, 1, &c->op_close, NULL) != GRPC_CALL_OK)
		c->refs--;
	for (size_t i = 0; i < s->n_m; i++)
		if (slice_is(c->details.method, s->m[i].path))
			c->m = &s->m[i];
	if (!c->m) {
		rpc_fail(c, RPC_UNIMPLEMENTED, "hpn-rdma-agent does not serve this method");
		call_unref(c);
		return;
	}
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_RECV_MESSAGE;
	ops[0].data.recv_message.recv_message = &c->recv;
	c->op_recv.fn = on_recv;
	/* The reference of op_new passes to op_recv. */
	if (grpc_call_start_batch(c->call, ops, 1, &c->op_recv, NULL) != GRPC_CALL_OK) {
		rpc_fail(c, RPC_INTERNAL, "cannot read the request");
		call_unref(c);
	}
}

static int request_next(struct rpc_server *s)
{
	struct rpc_call *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->s = s;
	c->refs = 1;
	c->status_msg = grpc_empty_slice();
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->md);
	c->op_new.fn = on_new;
	s->calls++;
	s->r->busy++;
	if (grpc_server_request_call(s->srv, &c->call, &c->details, &c->md, s->r->cq, s->r->cq,
				     &c->op_new) != GRPC_CALL_OK) {
		call_unref(c);
		return -EIO;
	}
	s->next_call = c;
	return 0;
}

/* ---- servers ---------------------------------------------------------------- */

static void server_maybe_done(struct rpc_server *s)
{
	struct stat st;

	if (!s->stopping || !s->shut || s->calls)
		return;
	grpc_server_destroy(s->srv);
	/*
	 * gRPC may leave the socket file; nothing serves it now. Only our own:
	 * a server started on the path since (its calls kept this one going)
	 * bound a new file there, and unlinking that would leave it serving
	 * nobody (test/unit/test_rpc.c, test_restart_before_done).
	 */
	if (lstat(s->path, &st) == 0 && st.st_dev == s->sock_dev && st.st_ino == s->sock_ino)
		unlink(s->path);
	s->r->busy--;
	if (s->done)
		s->done(s->done_ud);
	free(s->path);
	free(s);
}

static void on_shutdown(struct rpc_op *op, bool ok)
{
	struct rpc_server *s = container_of(op, struct rpc_server, op_shutdown);

	s->shut = true;
	server_maybe_done(s);
}

int rpc_server_start(struct rpc *r, const char *path, const struct rpc_method *m, size_t n,
		     void *ud, struct rpc_server **ret)
{
	struct rpc_server *s = calloc(1, sizeof(*s));
	/* Requests are small: IDs and counts. */
	grpc_arg args[1] = { { .type = GRPC_ARG_INTEGER,
			       .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
			       .value.integer = 64 * 1024 } };
	grpc_channel_args ca = { .num_args = 1, .args = args };
	grpc_server_credentials *cred;
	struct stat st;
	char *addr = NULL;
	int port;

	if (!s)
		return -ENOMEM;
	s->r = r;
	s->m = m;
	s->n_m = n;
	s->ud = ud;
	s->path = strdup(path);
	if (!s->path || asprintf(&addr, "unix:%s", path) < 0) {
		free(s->path);
		free(s);
		return -ENOMEM;
	}
	s->srv = grpc_server_create(&ca, NULL);
	grpc_server_register_completion_queue(s->srv, r->cq, NULL);
	cred = grpc_insecure_server_credentials_create();
	port = grpc_server_add_http2_port(s->srv, addr, cred);
	grpc_server_credentials_release(cred);
	free(addr);
	if (port == 0) {
		grpc_server_destroy(s->srv);
		free(s->path);
		free(s);
		return -EADDRNOTAVAIL;
	}
	/* The umask made it 0600 already (main); say so explicitly for the reader. */
	if (chmod(path, 0600) < 0)
		hpn_warn("chmod 0600 %s: %s", path, strerror(errno));
	if (lstat(path, &st) == 0) {
		s->sock_dev = st.st_dev;
		s->sock_ino = st.st_ino;
	}
	grpc_server_start(s->srv);
	r->busy++;
	if (request_next(s) < 0) {
		s->stopping = true;
		grpc_server_shutdown_and_notify(s->srv, r->cq, &s->op_shutdown);
		s->op_shutdown.fn = on_shutdown;
		return -EIO;
	}
	*ret = s;
	return 0;
}

void rpc_server_stop(struct rpc_server *s, void (*done)(void *ud), void *ud)
{
	s->stopping = true;
	s->done = done;
	s->done_ud = ud;
	s->op_shutdown.fn = on_shutdown;
	grpc_server_shutdown_and_notify(s->srv, s->r->cq, &s->op_shutdown);
	grpc_server_cancel_all_calls(s->srv);
}

/* ---- client calls ------------------------------------------------------------ */

struct rpc_client {
	struct rpc_op op;
	struct rpc *r;
	grpc_channel *ch;
	grpc_call *call;
	grpc_metadata_array init_md, trail_md;
	grpc_byte_buffer *send, *recv;
	grpc_status_code status;
	grpc_slice details;
	rpc_done_fn done;
	void *ud;
};

static void on_client_done(struct rpc_op *op, bool ok)
{
	struct rpc_client *k = container_of(op, struct rpc_client, op);
	grpc_slice s = buffer_bytes(k->recv);
	char *msg = grpc_slice_to_c_string(k->details);
	int status = ok ? (int)k->status : RPC_UNAVAILABLE;

	k->done(k->ud, status, msg, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s));
	gpr_free(msg);
	grpc_slice_unref(s);
	grpc_slice_unref(k->details);
	grpc_metadata_array_destroy(&k->init_md);
	grpc_metadata_array_destroy(&k->trail_md);
	if (k->send)
		grpc_byte_buffer_destroy(k->send);
	if (k->recv)
		grpc_byte_buffer_destroy(k->recv);
	grpc_call_unref(k->call);
	grpc_channel_destroy(k->ch);
	k->r->busy--;
	free(k);
}

int rpc_unary(struct rpc *r, const char *path, const char *method, const uint8_t *req, size_t len,
	      int timeout_ms, rpc_done_fn done, void *ud)
{
	struct rpc_client *k = calloc(1, sizeof(*k));
	grpc_channel_credentials *cred;
	grpc_slice mslice;
	gpr_timespec deadline;
	grpc_op ops[6];
	char *addr = NULL;
	/*
	 * A subchannel pool of the channel's own: gRPC otherwise shares one
	 * connection per address process-wide, and a call right after the peer
	 * restarted on its path went out on the old server's dying connection
	 * ("Broken pipe", unit.rpc's restart tests under load).
	 */
	grpc_arg own_pool = { .type = GRPC_ARG_INTEGER,
			      .key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL,
			      .value.integer = 1 };
	grpc_channel_args ca = { .num_args = 1, .args = &own_pool };

	if (!k || asprintf(&addr, "unix:%s", path) < 0) {
		free(k);
		return -ENOMEM;
	}
	k->r = r;
	k->done = done;
	k->ud = ud;
	k->op.fn = on_client_done;
	cred = grpc_insecure_credentials_create();
	k->ch = grpc_channel_create(addr, cred, &ca);
	grpc_channel_credentials_release(cred);
	free(addr);
	deadline = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
				gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
	mslice = grpc_slice_from_copied_string(method);
	k->call = grpc_channel_create_call(k->ch, NULL, GRPC_PROPAGATE_DEFAULTS, r->cq, mslice,
					   NULL, deadline, NULL);
	grpc_slice_unref(mslice);
	grpc_metadata_array_init(&k->init_md);
	grpc_metadata_array_init(&k->trail_md);
	k->details = grpc_empty_slice();
	k->send = bytes_buffer(req, len);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = k->send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &k->init_md;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &k->recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &k->trail_md;
	ops[5].data.recv_status_on_client.status = &k->status;
	ops[5].data.recv_status_on_client.status_details = &k->details;
	r->busy++;
	if (grpc_call_start_batch(k->call, ops, 6, &k->op, NULL) != GRPC_CALL_OK) {
		/* As if it completed at once, failed: the caller hears through done. */
		k->op.ok = false;
		on_client_done(&k->op, false);
	}
	return 0;
}

uint8_t *rpc_pack(const ProtobufCMessage *m, size_t *len)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(n ? n : 1);

	if (buf) {
		protobuf_c_message_pack(m, buf);
		*len = n;
	}
	return buf;
}

void rpc_reply_msg(struct rpc_call *c, const ProtobufCMessage *m)
{
	size_t len;
	uint8_t *buf = rpc_pack(m, &len);

	if (!buf) {
		rpc_fail(c, RPC_INTERNAL, "out of memory");
		return;
	}
	rpc_reply(c, buf, len);
	free(buf);
}
