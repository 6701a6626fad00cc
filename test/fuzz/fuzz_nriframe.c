// SPDX-License-Identifier: Apache-2.0
/*
 * NRI's wire (agent/nri/) on the trunk's bytes as a hostile or broken runtime
 * may send them: containerd/nri's multiplexer frames carrying ttrpc messages,
 * through hpn_mux_rx, then each message as the plugin takes it (a call on
 * connection 1, an answer on connection 2). Checks beyond the sanitizers:
 *  - a refusal is HPN_E_DECODE with words, -EMSGSIZE or -EPROTO, and sticks;
 *  - every byte given is taken, and a message is at most 4 MiB;
 *  - the same bytes in other pieces (sizes from the input) give the same
 *    messages and the same verdict;
 *  - each message, framed again by our writer, is frames of at most 4096
 *    bytes that decode to the same message;
 *  - a call that unpacks has a valid name and an odd stream, and the
 *    response packed for it unpacks to its stream and status.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "mux.h"
#include "ttrpc.h"

#define MAX_MSGS 64

struct seen {
	uint32_t conn, stream, len;
	uint8_t type, flags;
	uint64_t hash;
};

static int same(const struct seen *x, const struct seen *y)
{
	return x->conn == y->conn && x->stream == y->stream && x->len == y->len &&
	       x->type == y->type && x->flags == y->flags && x->hash == y->hash;
}

static uint64_t hash(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static int name_ok(const char *s, const char *extra)
{
	size_t n = strlen(s);

	if (n < 1 || n > 255)
		return 0;
	for (; *s; s++)
		if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') &&
		    !(*s >= '0' && *s <= '9') && *s != '_' && !strchr(extra, *s))
			return 0;
	return 1;
}

/* The message framed again by our writer decodes to itself. */
static void reframe(uint32_t conn, const struct hpn_ttrpc_msg *m)
{
	struct hpn_err err = { 0 };
	uint8_t *msg, *frames;
	size_t len, flen, off = 0;
	struct hpn_mux_rx rx;
	struct hpn_ttrpc_msg m2;
	const uint8_t *p;
	uint32_t conn2;

	FUZZ_ASSERT(hpn_ttrpc_encode(m->hdr.stream, m->hdr.type, m->hdr.flags, m->data, m->hdr.len,
				     &msg, &len, &err) == 0);
	FUZZ_ASSERT(hpn_mux_frames(conn, msg, len, &frames, &flen, &err) == 0);
	FUZZ_ASSERT(flen == hpn_mux_frames_len(len));
	while (off < flen) {
		uint32_t n = (uint32_t)frames[off + 4] << 24 | frames[off + 5] << 16 |
			     frames[off + 6] << 8 | frames[off + 7];

		FUZZ_ASSERT(n > 0 && HPN_MUX_HDR_LEN + n <= HPN_MUX_FRAME_MAX);
		off += HPN_MUX_HDR_LEN + n;
	}
	FUZZ_ASSERT(off == flen);
	hpn_mux_rx_init(&rx);
	p = frames;
	FUZZ_ASSERT(hpn_mux_rx_feed(&rx, &p, &flen, &conn2, &m2, &err) == 1);
	FUZZ_ASSERT(conn2 == conn && m2.hdr.len == m->hdr.len && m2.hdr.stream == m->hdr.stream &&
		    m2.hdr.type == m->hdr.type && m2.hdr.flags == m->hdr.flags);
	FUZZ_ASSERT(!m->hdr.len || !memcmp(m2.data, m->data, m->hdr.len));
	FUZZ_ASSERT(hpn_mux_rx_feed(&rx, &p, &flen, &conn2, &m2, &err) == 0 && flen == 0);
	FUZZ_ASSERT(hpn_mux_rx_end(&rx, &err) == 0);
	hpn_mux_rx_free(&rx);
	free(frames);
	free(msg);
}

/* What the plugin does with a message: a call answered, an answer read. */
static void take(uint32_t conn, const struct hpn_ttrpc_msg *m)
{
	struct hpn_err err = { 0 };

	if (conn == HPN_MUX_CONN_PLUGIN) {
		struct hpn_ttrpc_call c;
		struct hpn_ttrpc_reply rep;
		struct hpn_ttrpc_msg rm;
		uint8_t *resp;
		size_t rlen;

		if (hpn_ttrpc_call_unpack(m, &c, &err) < 0) {
			FUZZ_ASSERT(err.code == HPN_E_DECODE && err.msg[0]);
			return;
		}
		FUZZ_ASSERT(m->hdr.type == HPN_TTRPC_REQUEST && m->hdr.flags == 0);
		FUZZ_ASSERT(c.stream == m->hdr.stream && c.stream % 2 == 1);
		FUZZ_ASSERT(name_ok(c.service, ".") && name_ok(c.method, ""));
		FUZZ_ASSERT(c.timeout_ns >= 0 && c.payload_len <= m->hdr.len);
		FUZZ_ASSERT(!c.payload_len == !c.payload);
		FUZZ_ASSERT(hpn_ttrpc_response_pack(c.stream, HPN_TTRPC_UNIMPLEMENTED, c.method,
						    NULL, 0, &resp, &rlen, &err) == 0);
		rm.hdr.len = (uint32_t)(rlen - HPN_TTRPC_HDR_LEN);
		rm.hdr.stream = c.stream;
		rm.hdr.type = resp[8];
		rm.hdr.flags = resp[9];
		rm.data = resp + HPN_TTRPC_HDR_LEN;
		FUZZ_ASSERT(hpn_ttrpc_reply_unpack(&rm, &rep, &err) == 0);
		FUZZ_ASSERT(rep.stream == c.stream && rep.code == HPN_TTRPC_UNIMPLEMENTED &&
			    !strcmp(rep.message, c.method));
		hpn_ttrpc_reply_free(&rep);
		free(resp);
		hpn_ttrpc_call_free(&c);
	} else {
		struct hpn_ttrpc_reply rep;

		if (hpn_ttrpc_reply_unpack(m, &rep, &err) < 0) {
			FUZZ_ASSERT(err.code == HPN_E_DECODE && err.msg[0]);
			return;
		}
		FUZZ_ASSERT(m->hdr.type == HPN_TTRPC_RESPONSE && rep.stream == m->hdr.stream);
		FUZZ_ASSERT(rep.message && rep.payload_len <= m->hdr.len);
		hpn_ttrpc_reply_free(&rep);
	}
}

/*
 * All of data through one hpn_mux_rx in pieces: whole (step 0) or of
 * 1 + (next input byte % step) bytes. Records the messages in out (up to
 * MAX_MSGS); returns the verdict, 0 or the refusal.
 */
static int run(const uint8_t *data, size_t size, size_t step, struct seen *out, int *n_out, int act)
{
	struct hpn_mux_rx rx;
	struct hpn_err err = { 0 };
	size_t off = 0, k = 0;
	int r = 0;

	*n_out = 0;
	hpn_mux_rx_init(&rx);
	while (off < size) {
		size_t n = step ? 1 + data[k++ % size] % step : size - off;
		const uint8_t *p = data + off;
		struct hpn_ttrpc_msg m;
		uint32_t conn;

		if (n > size - off)
			n = size - off;
		off += n;
		while ((r = hpn_mux_rx_feed(&rx, &p, &n, &conn, &m, &err)) > 0) {
			FUZZ_ASSERT(conn == HPN_MUX_CONN_PLUGIN || conn == HPN_MUX_CONN_RUNTIME);
			FUZZ_ASSERT(m.hdr.len <= HPN_TTRPC_MSG_MAX && !m.hdr.len == !m.data);
			if (*n_out < MAX_MSGS)
				out[(*n_out)++] =
					(struct seen){ conn,	    m.hdr.stream,
						       m.hdr.len,   m.hdr.type,
						       m.hdr.flags, hash(m.data, m.hdr.len) };
			if (act) {
				take(conn, &m);
				reframe(conn, &m);
			}
		}
		if (r < 0) {
			FUZZ_ASSERT(r == -EMSGSIZE || r == -EPROTO);
			FUZZ_ASSERT(err.code == HPN_E_DECODE && err.msg[0]);
			/* It sticks. */
			memset(&err, 0, sizeof(err));
			FUZZ_ASSERT(hpn_mux_rx_feed(&rx, &p, &n, &conn, &m, &err) == r);
			FUZZ_ASSERT(hpn_mux_rx_end(&rx, &err) == r);
			break;
		}
		FUZZ_ASSERT(n == 0);
	}
	if (r == 0) {
		r = hpn_mux_rx_end(&rx, &err);
		FUZZ_ASSERT(r == 0 || (r == -EPROTO && err.code == HPN_E_DECODE && err.msg[0]));
	}
	hpn_mux_rx_free(&rx);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct seen a[MAX_MSGS], b[MAX_MSGS];
	int na, nb, ra, rb;

	ra = run(data, size, 0, a, &na, 1);
	for (size_t step = 1; step <= 4096; step *= 64) {
		rb = run(data, size, step, b, &nb, 0);
		FUZZ_ASSERT(ra == rb && na == nb);
		for (int i = 0; i < na; i++)
			FUZZ_ASSERT(same(&a[i], &b[i]));
	}
	return 0;
}
