/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_TTRPC_H
#define HPN_AGENT_TTRPC_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/*
 * ttrpc, the RPC under NRI: messages of a 10-byte header and their data
 * (containerd/ttrpc PROTOCOL.md, channel.go): data length u32, stream ID u32
 * (both big-endian), type u8, flags u8. A unary call is one request (type 1)
 * on an odd stream the caller picks, answered by one response (type 2) on the
 * same stream; data messages (type 3) belong to streaming calls, which NRI
 * does not make. No message carries more than HPN_TTRPC_MSG_MAX bytes of data
 * (channel.go's messageLengthMax): the runtime refuses a larger one, and so
 * do we, either way.
 *
 * Errors: negative errno, the words in err (code HPN_E_DECODE for bytes that
 * break the protocol): -EPROTO a malformed message, -EMSGSIZE one too large,
 * -ENOMEM. Nothing here does I/O.
 */

/* Big-endian u32s, as ttrpc's and the multiplexer's headers carry them. */
static inline uint32_t hpn_be32_get(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void hpn_be32_put(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

#define HPN_TTRPC_HDR_LEN 10
#define HPN_TTRPC_MSG_MAX (4u << 20)

enum hpn_ttrpc_type {
	HPN_TTRPC_REQUEST = 1,
	HPN_TTRPC_RESPONSE = 2,
	HPN_TTRPC_DATA = 3,
};

/* Flags of requests and data messages (streaming calls only: 0 on a unary call). */
#define HPN_TTRPC_FLAG_REMOTE_CLOSED 0x1
#define HPN_TTRPC_FLAG_REMOTE_OPEN   0x2
#define HPN_TTRPC_FLAG_NO_DATA	     0x4

/* The status codes a response carries: gRPC's (google.golang.org/grpc/codes). */
enum hpn_ttrpc_code {
	HPN_TTRPC_OK = 0,
	HPN_TTRPC_CANCELLED = 1,
	HPN_TTRPC_UNKNOWN = 2,
	HPN_TTRPC_INVALID_ARGUMENT = 3,
	HPN_TTRPC_DEADLINE_EXCEEDED = 4,
	HPN_TTRPC_NOT_FOUND = 5,
	HPN_TTRPC_RESOURCE_EXHAUSTED = 8,
	HPN_TTRPC_FAILED_PRECONDITION = 9,
	HPN_TTRPC_UNIMPLEMENTED = 12,
	HPN_TTRPC_INTERNAL = 13,
	HPN_TTRPC_UNAVAILABLE = 14,
};

struct hpn_ttrpc_hdr {
	uint32_t len; /* data bytes after the header */
	uint32_t stream;
	uint8_t type;
	uint8_t flags;
};

/* The header's 10 bytes. */
void hpn_ttrpc_hdr_put(uint8_t out[HPN_TTRPC_HDR_LEN], const struct hpn_ttrpc_hdr *h);
/* 10 bytes as a header; -EMSGSIZE when its length is over HPN_TTRPC_MSG_MAX. */
int hpn_ttrpc_hdr_get(const uint8_t in[HPN_TTRPC_HDR_LEN], struct hpn_ttrpc_hdr *ret,
		      struct hpn_err *err);

/* A whole message: data is hdr.len bytes (NULL when 0), owned by whoever gave it. */
struct hpn_ttrpc_msg {
	struct hpn_ttrpc_hdr hdr;
	const uint8_t *data;
};

/*
 * The incremental decoder of one connection's byte stream: bytes in pieces of
 * any size, whole messages out. It holds at most one message, and no more
 * memory than twice the bytes of it received so far (a header alone claiming
 * 4 MiB costs nothing); a buffer past 64 KiB is let go when the next message
 * starts. The first refusal sticks: a connection whose stream broke is closed.
 */
struct hpn_ttrpc_dec {
	uint8_t hdr[HPN_TTRPC_HDR_LEN];
	size_t hdr_have;
	struct hpn_ttrpc_hdr cur; /* valid once hdr_have == HPN_TTRPC_HDR_LEN */
	uint8_t *buf;
	size_t cap, have;
	int error;
};

void hpn_ttrpc_dec_init(struct hpn_ttrpc_dec *d);
void hpn_ttrpc_dec_free(struct hpn_ttrpc_dec *d);
/*
 * Takes bytes from *data (advancing it and *len) up to the end of the next
 * whole message: 1 with *ret (its data owned by the decoder, valid until the
 * next call), 0 when all of *len is taken and no message is whole yet, or a
 * negative errno (and every later call returns it too).
 */
int hpn_ttrpc_dec_feed(struct hpn_ttrpc_dec *d, const uint8_t **data, size_t *len,
		       struct hpn_ttrpc_msg *ret, struct hpn_err *err);
/* The stream ended here: 0 between messages, -EPROTO inside one (saying where). */
int hpn_ttrpc_dec_end(const struct hpn_ttrpc_dec *d, struct hpn_err *err);

/*
 * One message, header and data, in a new buffer (*ret, malloc'ed, of *ret_len
 * = HPN_TTRPC_HDR_LEN + len bytes); -EMSGSIZE when len > HPN_TTRPC_MSG_MAX.
 */
int hpn_ttrpc_encode(uint32_t stream, uint8_t type, uint8_t flags, const uint8_t *data, size_t len,
		     uint8_t **ret, size_t *ret_len, struct hpn_err *err);

/* protobuf-c's messages (ttrpc.pb-c.h), which own the strings and bytes below. */
struct Ttrpc__Request;
struct Ttrpc__Response;

/*
 * A call the peer made: a request message unpacked and checked: a unary
 * request (type 1, flags 0) on an odd stream, a service of [A-Za-z0-9_.] and
 * a method of [A-Za-z0-9_], each 1 to 255 bytes. payload is the method's
 * request message, packed (NULL when empty); timeout_ns the caller's deadline
 * from now, 0 for none. Everything points into req, freed by
 * hpn_ttrpc_call_free. A refused call says why and on which stream: the
 * caller may answer it with an error status on that stream.
 */
struct hpn_ttrpc_call {
	uint32_t stream;
	const char *service, *method;
	const uint8_t *payload;
	size_t payload_len;
	int64_t timeout_ns;
	struct Ttrpc__Request *req;
};

int hpn_ttrpc_call_unpack(const struct hpn_ttrpc_msg *m, struct hpn_ttrpc_call *ret,
			  struct hpn_err *err);
void hpn_ttrpc_call_free(struct hpn_ttrpc_call *c);

/*
 * The response message (header included) answering stream with a status:
 * code (enum hpn_ttrpc_code), message (NULL: none) and, with HPN_TTRPC_OK, the
 * method's response message packed in payload. In a new buffer, as
 * hpn_ttrpc_encode; -EMSGSIZE when it would not fit in a ttrpc message.
 */
int hpn_ttrpc_response_pack(uint32_t stream, int code, const char *message, const uint8_t *payload,
			    size_t len, uint8_t **ret, size_t *ret_len, struct hpn_err *err);

/*
 * A request message (header included) of ours: a unary call of
 * service/method on stream (odd, one more than the last by two) with the
 * method's request message packed in payload, timeout_ns 0 for none.
 */
int hpn_ttrpc_request_pack(uint32_t stream, const char *service, const char *method,
			   const uint8_t *payload, size_t len, int64_t timeout_ns, uint8_t **ret,
			   size_t *ret_len, struct hpn_err *err);

/*
 * The answer to a call of ours: a response message (type 2) unpacked. code
 * is the status code (HPN_TTRPC_OK when the peer sent no status), message
 * its text ("" when none), payload the method's response message. Pointers
 * into resp, freed by hpn_ttrpc_reply_free.
 */
struct hpn_ttrpc_reply {
	uint32_t stream;
	int code;
	const char *message;
	const uint8_t *payload;
	size_t payload_len;
	struct Ttrpc__Response *resp;
};

int hpn_ttrpc_reply_unpack(const struct hpn_ttrpc_msg *m, struct hpn_ttrpc_reply *ret,
			   struct hpn_err *err);
void hpn_ttrpc_reply_free(struct hpn_ttrpc_reply *r);

#endif
