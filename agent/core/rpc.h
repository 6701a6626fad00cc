/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_RPC_H
#define HPN_AGENT_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * gRPC over unix sockets for the agent, on gRPC's C core: one completion
 * queue, drained by one thread of ours (the pump) that does nothing but hand
 * each completion to the event loop through an eventfd. Every batch is
 * started, and every callback below runs, on the loop's thread: the agent's
 * state has one owner. Messages are bytes here; protobuf-c packs them.
 */

struct rpc;
struct rpc_server;
struct rpc_call;

struct loop;

/* grpc_init, the queue, the pump thread; the pump's completions are run on the loop. */
int rpc_open(struct loop *l, struct rpc **ret);
/*
 * Client calls, server calls not yet finished and servers not yet done (a
 * serving server counts itself and the call it waits for); rpc_close needs 0.
 */
size_t rpc_busy(const struct rpc *r);
/*
 * Shuts the queue down, joins the pump, grpc_shutdown. Servers must be
 * stopped (done) and rpc_busy 0 first: the queue ends only after every call
 * on it, so with one in flight this waits for it (a held call: forever).
 */
void rpc_close(struct rpc *r);

/*
 * A server method. fn gets the request's bytes and must answer through
 * rpc_reply or rpc_fail, now or later; a stream method keeps the call and
 * sends with rpc_stream_send until the peer closes (on_close). A service
 * that keeps c past fn sets on_close: rpc.c frees a cancelled call right
 * after calling it, and without it the service could not know. A request
 * that arrives while its server stops is answered UNAVAILABLE without fn.
 */
struct rpc_method {
	const char *path; /* "/v1beta1.DevicePlugin/Allocate" */
	bool stream;
	void (*fn)(struct rpc_call *c, const uint8_t *req, size_t len, void *ud);
};

/*
 * Serves methods on a unix socket at path, created mode 0600; a file left
 * there (an agent killed) is replaced. A server may be started on the path
 * of one still stopping: the old one removes only the socket file it made.
 */
int rpc_server_start(struct rpc *r, const char *path, const struct rpc_method *m, size_t n,
		     void *ud, struct rpc_server **ret);
/*
 * Stops: stops listening, cancels its calls (their clients hear UNAVAILABLE)
 * and calls done(ud) once everything of it is gone, its socket file removed.
 * The cancellations reach the services later, on the loop, as on_close: until
 * then a kept call stays valid, and an answer or stream send to it goes nowhere.
 */
void rpc_server_stop(struct rpc_server *s, void (*done)(void *ud), void *ud);

/* gRPC status codes this agent answers with, or tells apart in an answer. */
enum {
	RPC_OK = 0,
	RPC_INVALID_ARGUMENT = 3,
	RPC_DEADLINE_EXCEEDED = 4,
	RPC_NOT_FOUND = 5,
	RPC_RESOURCE_EXHAUSTED = 8,
	RPC_FAILED_PRECONDITION = 9,
	RPC_UNIMPLEMENTED = 12,
	RPC_INTERNAL = 13,
	RPC_UNAVAILABLE = 14,
};

/* Unary answers; the call is released after. buf is copied. */
void rpc_reply(struct rpc_call *c, const uint8_t *buf, size_t len);
void rpc_fail(struct rpc_call *c, int status, const char *msg);
/* A protobuf-c message packed as the unary answer (INTERNAL when there is no memory for it). */
struct ProtobufCMessage;
void rpc_reply_msg(struct rpc_call *c, const struct ProtobufCMessage *m);
/* m packed into malloc'd bytes (*len of them), for rpc_stream_send; NULL: no memory. */
uint8_t *rpc_pack(const struct ProtobufCMessage *m, size_t *len);
/* A stream's next message (copied); while one is in flight, only the latest waits. */
void rpc_stream_send(struct rpc_call *c, const uint8_t *buf, size_t len);
/*
 * on_close(c, ud) once, when the call ends: the peer gone, the call cancelled
 * (its deadline, the client, rpc_server_stop), and also after the call's own
 * answer went out, unless cleared first (fn NULL); c is invalid after it.
 * The service is not told which.
 */
void rpc_call_on_close(struct rpc_call *c, void (*fn)(struct rpc_call *c, void *ud), void *ud);

/*
 * The open calls of one stream method, which a service sends the same
 * message to (ListAndWatch, NodeWatchResources): a call added leaves the set
 * when it ends (the set takes its on_close), said in the log as "<what>
 * stream closed (N open)". Zeroed, with what set, it is empty.
 */
#define RPC_STREAMS_MAX 8
struct rpc_streams {
	const char *what;
	struct rpc_call *v[RPC_STREAMS_MAX];
	size_t n;
};
/* c joins s; -EBUSY when s is full (c untouched: the caller answers it). */
int rpc_streams_add(struct rpc_streams *s, struct rpc_call *c);
/* buf to every call of s but skip (NULL: none). */
void rpc_streams_send(const struct rpc_streams *s, const uint8_t *buf, size_t len,
		      const struct rpc_call *skip);

/*
 * A unary client call to the server at unix socket path: done(ud, status,
 * message, reply bytes) once, within timeout_ms (status 4, DEADLINE_EXCEEDED,
 * after); UNAVAILABLE when nothing serves the path. Each call opens a channel
 * of its own: nothing is kept across a server's restart. A call the C core
 * refuses to start is done (UNAVAILABLE) before rpc_unary returns; -ENOMEM
 * is the only error returned, and then done is never called.
 */
typedef void (*rpc_done_fn)(void *ud, int status, const char *msg, const uint8_t *buf, size_t len);
int rpc_unary(struct rpc *r, const char *path, const char *method, const uint8_t *req, size_t len,
	      int timeout_ms, rpc_done_fn done, void *ud);

#endif
