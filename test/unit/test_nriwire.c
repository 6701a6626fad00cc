// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for agent/nri/, NRI's wire: ttrpc's framing and envelope
 * (ttrpc.c) and containerd/nri's multiplexer (mux.c):
 *  - round trips: messages encoded, decoded whole, one byte at a time and in
 *    random splits; requests and responses packed and unpacked;
 *  - the runtime's limits: a 6 KB and a 4 MiB message cut into frames of at
 *    most 4096 bytes, header included, and put together again; a message
 *    over 4 MiB refused both ways; frames as large as upstream writes taken;
 *  - refusals with words: truncated and garbage headers, a stream that ends
 *    inside a message, calls that are not unary requests; frames of
 *    connections other than 1 and 2 dropped and counted, as upstream does;
 *  - the byte stream a real containerd 2.1.9 sent a plugin
 *    (test/fixtures/nri/containerd-2.1.9/recv.bin, test/nri/record.sh): every
 *    message decoded, whole and byte by byte, its calls and their fields as
 *    the recording's pods and containers were made.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "mux.h"
#include "nri.pb-c.h"
#include "ttrpc.h"
#include "ttrpc.pb-c.h"

#define FIXTURE HPN_FIXTURES "/nri/containerd-2.1.9/recv.bin"
#define PLUGIN	"nri.pkg.api.v1alpha1.Plugin"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint8_t *pattern(size_t len, uint8_t seed)
{
	uint8_t *p = malloc(len ? len : 1);

	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 31 + seed + (i >> 8));
	return p;
}

/*
 * Feeds buf to a ttrpc decoder in pieces: step 0 all at once, 1 byte by byte,
 * else random pieces of 1..step bytes. Returns the number of whole messages
 * (their data compared with want[i] of len want_len[i]), or -1.
 */
static int ttrpc_feed_all(const uint8_t *buf, size_t len, size_t step, uint8_t *const *want,
			  const size_t *want_len, int nwant)
{
	struct hpn_ttrpc_dec d;
	struct hpn_err err = { 0 };
	size_t off = 0;
	int got = 0, r = 0;

	hpn_ttrpc_dec_init(&d);
	while (off < len) {
		size_t n = step == 0 ? len - off : step == 1 ? 1 : 1 + rnd() % step;
		const uint8_t *p = buf + off;
		struct hpn_ttrpc_msg m;

		if (n > len - off)
			n = len - off;
		off += n;
		while ((r = hpn_ttrpc_dec_feed(&d, &p, &n, &m, &err)) > 0) {
			if (got >= nwant || m.hdr.len != want_len[got] ||
			    (m.hdr.len && memcmp(m.data, want[got], m.hdr.len))) {
				got = -1;
				goto out;
			}
			got++;
		}
		if (r < 0 || n) {
			got = -1;
			goto out;
		}
	}
	if (hpn_ttrpc_dec_end(&d, &err) < 0)
		got = -1;
out:
	hpn_ttrpc_dec_free(&d);
	return got;
}

static void test_hdr(void)
{
	struct hpn_ttrpc_hdr h = { .len = 0x010203, .stream = 0xfffffffe, .type = 2, .flags = 4 };
	struct hpn_ttrpc_hdr g;
	struct hpn_err err = { 0 };
	uint8_t b[HPN_TTRPC_HDR_LEN];
	const uint8_t want[] = { 0, 1, 2, 3, 0xff, 0xff, 0xff, 0xfe, 2, 4 };

	hpn_ttrpc_hdr_put(b, &h);
	CHECK(!memcmp(b, want, sizeof(want)));
	CHECK_INT_EQ(hpn_ttrpc_hdr_get(b, &g, &err), 0);
	CHECK_INT_EQ(g.len, h.len);
	CHECK_INT_EQ(g.stream, h.stream);
	CHECK_INT_EQ(g.type, 2);
	CHECK_INT_EQ(g.flags, 4);
	/* 4 MiB is the largest; one more byte is refused, and says so. */
	h.len = HPN_TTRPC_MSG_MAX;
	hpn_ttrpc_hdr_put(b, &h);
	CHECK_INT_EQ(hpn_ttrpc_hdr_get(b, &g, &err), 0);
	h.len = HPN_TTRPC_MSG_MAX + 1;
	hpn_ttrpc_hdr_put(b, &h);
	CHECK_INT_EQ(hpn_ttrpc_hdr_get(b, &g, &err), -EMSGSIZE);
	CHECK_INT_EQ(err.code, HPN_E_DECODE);
	CHECK_STR_HAS(err.msg, "response of 4194305 bytes on stream 4294967294");
	CHECK_STR_HAS(err.msg, "more than the 4194304");
}

static void test_ttrpc_roundtrip(void)
{
	static const size_t sizes[] = { 0, 1, 9, 10, 100, 4086, 4096, 5000, 70000 };
	uint8_t *want[16], *stream = NULL;
	size_t want_len[16], total = 0;
	int n = (int)(sizeof(sizes) / sizeof(sizes[0]));

	for (int i = 0; i < n; i++) {
		struct hpn_err err = { 0 };
		uint8_t *msg;
		size_t len;

		want[i] = pattern(sizes[i], (uint8_t)i);
		want_len[i] = sizes[i];
		CHECK_INT_EQ(hpn_ttrpc_encode(2 * i + 1, HPN_TTRPC_REQUEST, 0, want[i], sizes[i],
					      &msg, &len, &err),
			     0);
		CHECK_INT_EQ(len, HPN_TTRPC_HDR_LEN + sizes[i]);
		stream = realloc(stream, total + len);
		memcpy(stream + total, msg, len);
		total += len;
		free(msg);
	}
	CHECK_INT_EQ(ttrpc_feed_all(stream, total, 0, want, want_len, n), n);
	CHECK_INT_EQ(ttrpc_feed_all(stream, total, 1, want, want_len, n), n);
	for (size_t step = 2; step < 20000; step = step * 3 + 1)
		CHECK_INT_EQ(ttrpc_feed_all(stream, total, step, want, want_len, n), n);
	for (int i = 0; i < n; i++)
		free(want[i]);
	free(stream);
}

static void test_ttrpc_refused(void)
{
	struct hpn_ttrpc_dec d;
	struct hpn_ttrpc_msg m;
	struct hpn_err err = { 0 };
	uint8_t *msg, *big;
	size_t len, n;
	const uint8_t *p;
	const uint8_t garbage[] = { 0x47, 0x45, 0x54, 0x20, 0x2f, 0x20, 0x48, 0x54, 0x54, 0x50 };

	/* Encoding more than 4 MiB: refused, nothing allocated. */
	big = pattern(HPN_TTRPC_MSG_MAX + 1, 7);
	msg = NULL;
	CHECK_INT_EQ(hpn_ttrpc_encode(1, HPN_TTRPC_RESPONSE, 0, big, HPN_TTRPC_MSG_MAX + 1, &msg,
				      &len, &err),
		     -EMSGSIZE);
	CHECK(msg == NULL);
	CHECK_STR_HAS(err.msg, "more than the runtime accepts (4194304)");
	/* Exactly 4 MiB: taken, and decoded again. */
	CHECK_INT_EQ(hpn_ttrpc_encode(1, HPN_TTRPC_RESPONSE, 0, big, HPN_TTRPC_MSG_MAX, &msg, &len,
				      &err),
		     0);
	hpn_ttrpc_dec_init(&d);
	p = msg;
	n = len;
	CHECK_INT_EQ(hpn_ttrpc_dec_feed(&d, &p, &n, &m, &err), 1);
	CHECK_INT_EQ(m.hdr.len, HPN_TTRPC_MSG_MAX);
	CHECK(!memcmp(m.data, big, HPN_TTRPC_MSG_MAX));
	CHECK_INT_EQ(n, 0);
	hpn_ttrpc_dec_free(&d);
	free(msg);
	free(big);

	/* Garbage (an HTTP request line): a length of 1.2 GB, refused at once, for good. */
	memset(&err, 0, sizeof(err));
	hpn_ttrpc_dec_init(&d);
	p = garbage;
	n = sizeof(garbage);
	CHECK_INT_EQ(hpn_ttrpc_dec_feed(&d, &p, &n, &m, &err), -EMSGSIZE);
	CHECK_STR_HAS(err.msg, "type 84 of 1195725856 bytes");
	CHECK(d.buf == NULL); /* the claim cost nothing */
	p = garbage;
	n = 1;
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_ttrpc_dec_feed(&d, &p, &n, &m, &err), -EMSGSIZE);
	CHECK_STR_HAS(err.msg, "refused earlier");
	CHECK_INT_EQ(hpn_ttrpc_dec_end(&d, &err), -EMSGSIZE);
	hpn_ttrpc_dec_free(&d);

	/* Truncated: inside a header, inside the data. */
	CHECK_INT_EQ(hpn_ttrpc_encode(5, HPN_TTRPC_REQUEST, 0, garbage, sizeof(garbage), &msg, &len,
				      &err),
		     0);
	hpn_ttrpc_dec_init(&d);
	p = msg;
	n = 3;
	CHECK_INT_EQ(hpn_ttrpc_dec_feed(&d, &p, &n, &m, &err), 0);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_ttrpc_dec_end(&d, &err), -EPROTO);
	CHECK_STR_HAS(err.msg, "ended 3 bytes into a message header of 10");
	n = len - 3 - 4;
	CHECK_INT_EQ(hpn_ttrpc_dec_feed(&d, &p, &n, &m, &err), 0);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_ttrpc_dec_end(&d, &err), -EPROTO);
	CHECK_STR_HAS(err.msg, "ended 6 of 10 bytes into a request on stream 5");
	n = 4;
	CHECK_INT_EQ(hpn_ttrpc_dec_feed(&d, &p, &n, &m, &err), 1);
	CHECK_INT_EQ(hpn_ttrpc_dec_end(&d, &err), 0);
	hpn_ttrpc_dec_free(&d);
	free(msg);
}

/* A ttrpc message as the decoder would give it, from encoded bytes. */
static struct hpn_ttrpc_msg as_msg(const uint8_t *buf)
{
	struct hpn_ttrpc_msg m;
	struct hpn_err err = { 0 };

	hpn_ttrpc_hdr_get(buf, &m.hdr, &err);
	m.data = m.hdr.len ? buf + HPN_TTRPC_HDR_LEN : NULL;
	return m;
}

static void test_calls(void)
{
	struct hpn_err err = { 0 };
	struct hpn_ttrpc_call c;
	struct hpn_ttrpc_reply rep;
	struct hpn_ttrpc_msg m;
	uint8_t *msg, *resp;
	size_t len, rlen;
	const uint8_t payload[] = { 0x0a, 0x03, 'a', 'b', 'c' };

	CHECK_INT_EQ(hpn_ttrpc_request_pack(7, PLUGIN, "Configure", payload, sizeof(payload),
					    2000000000, &msg, &len, &err),
		     0);
	m = as_msg(msg);
	CHECK_INT_EQ(m.hdr.type, HPN_TTRPC_REQUEST);
	CHECK_INT_EQ(m.hdr.stream, 7);
	CHECK_INT_EQ(hpn_ttrpc_call_unpack(&m, &c, &err), 0);
	CHECK_STR_EQ(c.service, PLUGIN);
	CHECK_STR_EQ(c.method, "Configure");
	CHECK_INT_EQ(c.payload_len, sizeof(payload));
	CHECK(c.payload && !memcmp(c.payload, payload, sizeof(payload)));
	CHECK_INT_EQ(c.timeout_ns, 2000000000);
	CHECK_INT_EQ(c.stream, 7);
	hpn_ttrpc_call_free(&c);
	hpn_ttrpc_call_free(&c); /* twice: nothing */

	/* Not a unary request: a response, an even stream, streaming flags. */
	m.hdr.type = HPN_TTRPC_RESPONSE;
	CHECK_INT_EQ(hpn_ttrpc_call_unpack(&m, &c, &err), -EPROTO);
	CHECK_STR_HAS(err.msg, "stream 7: a response where a request was expected");
	m.hdr.type = HPN_TTRPC_REQUEST;
	m.hdr.stream = 8;
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_ttrpc_call_unpack(&m, &c, &err), -EPROTO);
	CHECK_STR_HAS(err.msg, "stream 8: a caller's stream is odd");
	m.hdr.stream = 7;
	m.hdr.flags = HPN_TTRPC_FLAG_REMOTE_OPEN;
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_ttrpc_call_unpack(&m, &c, &err), -EPROTO);
	CHECK_STR_HAS(err.msg, "flags 0x2: a streaming call");
	m.hdr.flags = 0;
	/* Not a ttrpc.Request: a field 1 claiming 100 bytes. */
	m.hdr.len = 2;
	memcpy(msg + HPN_TTRPC_HDR_LEN, "\x0a\x64", 2);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_ttrpc_call_unpack(&m, &c, &err), -EPROTO);
	CHECK_STR_HAS(err.msg, "2 bytes that are not a ttrpc.Request");
	free(msg);
	/* A method name that is not one; an empty request. */
	{
		Ttrpc__Request q = TTRPC__REQUEST__INIT;
		uint8_t buf[64 + HPN_TTRPC_HDR_LEN];
		struct hpn_ttrpc_hdr h = { .stream = 1, .type = HPN_TTRPC_REQUEST };

		q.service = PLUGIN;
		q.method = "Con figure";
		h.len = (uint32_t)ttrpc__request__pack(&q, buf + HPN_TTRPC_HDR_LEN);
		hpn_ttrpc_hdr_put(buf, &h);
		m = as_msg(buf);
		memset(&err, 0, sizeof(err));
		CHECK_INT_EQ(hpn_ttrpc_call_unpack(&m, &c, &err), -EPROTO);
		CHECK_STR_HAS(err.msg, "method \"Con figure\": not a method name");
		h.len = 0;
		hpn_ttrpc_hdr_put(buf, &h);
		m = as_msg(buf);
		memset(&err, 0, sizeof(err));
		CHECK_INT_EQ(hpn_ttrpc_call_unpack(&m, &c, &err), -EPROTO);
		CHECK_STR_HAS(err.msg, "service \"\" method \"\"");
	}
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_ttrpc_request_pack(2, PLUGIN, "Configure", NULL, 0, 0, &msg, &len, &err),
		     -EINVAL);

	/* Responses: an error status, a success with a payload. */
	CHECK_INT_EQ(hpn_ttrpc_response_pack(9, HPN_TTRPC_UNIMPLEMENTED, "not subscribed", NULL, 0,
					     &resp, &rlen, &err),
		     0);
	m = as_msg(resp);
	CHECK_INT_EQ(m.hdr.type, HPN_TTRPC_RESPONSE);
	CHECK_INT_EQ(m.hdr.flags, 0);
	CHECK_INT_EQ(hpn_ttrpc_reply_unpack(&m, &rep, &err), 0);
	CHECK_INT_EQ(rep.stream, 9);
	CHECK_INT_EQ(rep.code, HPN_TTRPC_UNIMPLEMENTED);
	CHECK_STR_EQ(rep.message, "not subscribed");
	CHECK_INT_EQ(rep.payload_len, 0);
	hpn_ttrpc_reply_free(&rep);
	free(resp);
	CHECK_INT_EQ(hpn_ttrpc_response_pack(11, HPN_TTRPC_OK, NULL, payload, sizeof(payload),
					     &resp, &rlen, &err),
		     0);
	m = as_msg(resp);
	CHECK_INT_EQ(hpn_ttrpc_reply_unpack(&m, &rep, &err), 0);
	CHECK_INT_EQ(rep.code, HPN_TTRPC_OK);
	CHECK_STR_EQ(rep.message, "");
	CHECK(rep.payload_len == sizeof(payload) && !memcmp(rep.payload, payload, sizeof(payload)));
	hpn_ttrpc_reply_free(&rep);
	/* As ttrpc's server writes an OK: no status, the payload alone (field 2). */
	CHECK(rlen == HPN_TTRPC_HDR_LEN + 2 + sizeof(payload) &&
	      !memcmp(resp + HPN_TTRPC_HDR_LEN, "\x12\x05", 2));
	m.hdr.type = HPN_TTRPC_REQUEST;
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_ttrpc_reply_unpack(&m, &rep, &err), -EPROTO);
	CHECK_STR_HAS(err.msg, "a request where a response was expected");
	free(resp);
	/* A response without a status is a success. */
	{
		struct hpn_ttrpc_msg e = { .hdr = { .len = 0, .stream = 1, .type = 2 } };

		CHECK_INT_EQ(hpn_ttrpc_reply_unpack(&e, &rep, &err), 0);
		CHECK_INT_EQ(rep.code, HPN_TTRPC_OK);
		hpn_ttrpc_reply_free(&rep);
	}
}

/* Every frame of frames (len bytes) is at most 4096 bytes with its header, and carries conn. */
static int frames_ok(const uint8_t *f, size_t len, uint32_t conn, size_t payload)
{
	size_t off = 0, sum = 0;

	while (off < len) {
		uint32_t c =
			(uint32_t)f[off] << 24 | f[off + 1] << 16 | f[off + 2] << 8 | f[off + 3];
		uint32_t n = (uint32_t)f[off + 4] << 24 | f[off + 5] << 16 | f[off + 6] << 8 |
			     f[off + 7];

		if (c != conn || n == 0 || HPN_MUX_HDR_LEN + n > HPN_MUX_FRAME_MAX ||
		    off + HPN_MUX_HDR_LEN + n > len)
			return 0;
		off += HPN_MUX_HDR_LEN + n;
		sum += n;
	}
	return sum == payload;
}

/*
 * The trunk's bytes through hpn_mux_rx in pieces (step as ttrpc_feed_all);
 * returns the messages seen, each checked against want[i] on conn[i].
 */
static int rx_feed_all(const uint8_t *buf, size_t len, size_t step, uint8_t *const *want,
		       const size_t *want_len, const uint32_t *want_conn, int nwant,
		       struct hpn_mux_rx *rx)
{
	struct hpn_err err = { 0 };
	size_t off = 0;
	int got = 0, r;

	while (off < len) {
		size_t n = step == 0 ? len - off : step == 1 ? 1 : 1 + rnd() % step;
		const uint8_t *p = buf + off;
		struct hpn_ttrpc_msg m;
		uint32_t conn;

		if (n > len - off)
			n = len - off;
		off += n;
		while ((r = hpn_mux_rx_feed(rx, &p, &n, &conn, &m, &err)) > 0) {
			if (got >= nwant || conn != want_conn[got] ||
			    HPN_TTRPC_HDR_LEN + m.hdr.len != want_len[got] ||
			    memcmp(m.data, want[got] + HPN_TTRPC_HDR_LEN, m.hdr.len))
				return -1;
			got++;
		}
		if (r < 0 || n)
			return -1;
	}
	return hpn_mux_rx_end(rx, &err) < 0 ? -1 : got;
}

static void test_mux_split(void)
{
	/* A 6 KB answer (as one frame it drops the plugin) and the largest message. */
	static const size_t sizes[] = { 6 * 1024, HPN_TTRPC_MSG_MAX, 4088 - HPN_TTRPC_HDR_LEN, 1 };
	struct hpn_err err = { 0 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint8_t *data = pattern(sizes[i], (uint8_t)i), *msg, *frames;
		size_t len, flen;
		uint32_t conn = HPN_MUX_CONN_PLUGIN;
		struct hpn_mux_rx rx;

		CHECK_INT_EQ(hpn_ttrpc_encode(3, HPN_TTRPC_RESPONSE, 0, data, sizes[i], &msg, &len,
					      &err),
			     0);
		CHECK_INT_EQ(hpn_mux_frames(conn, msg, len, &frames, &flen, &err), 0);
		CHECK_INT_EQ(flen, hpn_mux_frames_len(len));
		CHECK_INT_EQ(flen, len + (len + 4087) / 4088 * 8);
		CHECK(frames_ok(frames, flen, conn, len));
		hpn_mux_rx_init(&rx);
		CHECK_INT_EQ(rx_feed_all(frames, flen, 0, &msg, &len, &conn, 1, &rx), 1);
		hpn_mux_rx_free(&rx);
		hpn_mux_rx_init(&rx);
		CHECK_INT_EQ(rx_feed_all(frames, flen, sizes[i] > 100000 ? 65536 : 1, &msg, &len,
					 &conn, 1, &rx),
			     1);
		hpn_mux_rx_free(&rx);
		free(frames);
		free(msg);
		free(data);
	}
	/* A 4088-byte message is one frame of exactly 4096; one more byte is two. */
	CHECK_INT_EQ(hpn_mux_frames_len(4088), 4096);
	CHECK_INT_EQ(hpn_mux_frames_len(4089), 4089 + 16);
	/* Nothing to send, connection 0, more than one ttrpc message: refused. */
	{
		uint8_t b[1] = { 0 }, *f = NULL, *big;
		size_t fl;

		CHECK_INT_EQ(hpn_mux_frames(1, b, 0, &f, &fl, &err), -EINVAL);
		CHECK_INT_EQ(hpn_mux_frames(0, b, 1, &f, &fl, &err), -EINVAL);
		big = pattern(HPN_MUX_PAYLOAD_MAX + 1, 1);
		memset(&err, 0, sizeof(err));
		CHECK_INT_EQ(hpn_mux_frames(2, big, HPN_MUX_PAYLOAD_MAX + 1, &f, &fl, &err),
			     -EMSGSIZE);
		CHECK_STR_HAS(err.msg, "more than one ttrpc message (4194314)");
		CHECK(f == NULL);
		free(big);
	}
}

static void put_frame(uint8_t **buf, size_t *len, uint32_t conn, const uint8_t *p, uint32_t n)
{
	uint8_t h[8] = { conn >> 24, conn >> 16, conn >> 8, conn, n >> 24, n >> 16, n >> 8, n };

	*buf = realloc(*buf, *len + 8 + n);
	memcpy(*buf + *len, h, 8);
	if (n)
		memcpy(*buf + *len + 8, p, n);
	*len += 8 + n;
}

static void test_mux_streams(void)
{
	struct hpn_err err = { 0 };
	uint8_t *a, *b, *ma, *mb, *trunk = NULL, *want[2];
	size_t la, lb, trunk_len = 0, want_len[2];
	uint32_t want_conn[2] = { HPN_MUX_CONN_RUNTIME, HPN_MUX_CONN_PLUGIN };
	struct hpn_mux_rx rx;

	/*
	 * Two messages on connections 1 and 2, their frames interleaved, with
	 * zero-length frames and frames of connections 0, 3 and 0xffffffff
	 * between them, and one frame far over 4096 bytes (the runtime's own
	 * writer splits only at 4 MiB).
	 */
	a = pattern(20000, 1);
	b = pattern(9000, 2);
	hpn_ttrpc_encode(1, HPN_TTRPC_REQUEST, 0, a, 20000, &ma, &la, &err);
	hpn_ttrpc_encode(1, HPN_TTRPC_RESPONSE, 0, b, 9000, &mb, &lb, &err);
	put_frame(&trunk, &trunk_len, 1, ma, 4096);
	put_frame(&trunk, &trunk_len, 2, mb, 100);
	put_frame(&trunk, &trunk_len, 0, a, 50);
	put_frame(&trunk, &trunk_len, 1, NULL, 0);
	put_frame(&trunk, &trunk_len, 3, a, 5000);
	put_frame(&trunk, &trunk_len, 2, mb + 100, (uint32_t)lb - 100);
	put_frame(&trunk, &trunk_len, 0xffffffff, b, 1);
	put_frame(&trunk, &trunk_len, 1, ma + 4096, (uint32_t)la - 4096);
	want[0] = mb;
	want_len[0] = lb;
	want[1] = ma;
	want_len[1] = la;
	for (size_t step = 0; step < 30000; step = step ? step * 5 : 1) {
		hpn_mux_rx_init(&rx);
		CHECK_INT_EQ(rx_feed_all(trunk, trunk_len, step, want, want_len, want_conn, 2, &rx),
			     2);
		CHECK_INT_EQ(rx.dropped_frames, 3);
		CHECK_INT_EQ(rx.dropped_bytes, 50 + 5000 + 1);
		CHECK_INT_EQ(rx.last_dropped_conn, 0xffffffff);
		hpn_mux_rx_free(&rx);
	}

	/* The bare demultiplexer names every connection, 0 and 3 too, and skips empty frames. */
	{
		struct hpn_mux_dec d;
		struct hpn_mux_chunk ch;
		const uint8_t *p = trunk;
		size_t n = trunk_len;
		uint32_t seen[16];
		int k = 0, r;

		hpn_mux_dec_init(&d);
		while ((r = hpn_mux_dec_feed(&d, &p, &n, &ch, &err)) > 0 && k < 16)
			seen[k++] = ch.conn;
		CHECK_INT_EQ(r, 0);
		CHECK_INT_EQ(k, 7);
		CHECK(k == 7 && seen[0] == 1 && seen[1] == 2 && seen[2] == 0 && seen[3] == 3 &&
		      seen[4] == 2 && seen[5] == 0xffffffff && seen[6] == 1);
		CHECK_INT_EQ(hpn_mux_dec_end(&d, &err), 0);
	}

	/* Truncated: inside a frame header, inside a payload, inside a ttrpc message. */
	{
		struct hpn_mux_dec d;
		struct hpn_mux_chunk ch;
		const uint8_t *p = trunk;
		size_t n = 5;

		hpn_mux_dec_init(&d);
		CHECK_INT_EQ(hpn_mux_dec_feed(&d, &p, &n, &ch, &err), 0);
		memset(&err, 0, sizeof(err));
		CHECK_INT_EQ(hpn_mux_dec_end(&d, &err), -EPROTO);
		CHECK_STR_HAS(err.msg, "ended 5 bytes into a frame header of 8");
		n = 3 + 1000;
		CHECK_INT_EQ(hpn_mux_dec_feed(&d, &p, &n, &ch, &err), 1);
		memset(&err, 0, sizeof(err));
		CHECK_INT_EQ(hpn_mux_dec_end(&d, &err), -EPROTO);
		CHECK_STR_HAS(err.msg, "ended 1000 of 4096 bytes into a frame for connection 1");

		hpn_mux_rx_init(&rx);
		p = trunk;
		n = 8 + 4096;
		{
			struct hpn_ttrpc_msg m;
			uint32_t conn;

			CHECK_INT_EQ(hpn_mux_rx_feed(&rx, &p, &n, &conn, &m, &err), 0);
		}
		memset(&err, 0, sizeof(err));
		CHECK_INT_EQ(hpn_mux_rx_end(&rx, &err), -EPROTO);
		CHECK_STR_HAS(err.msg, "connection 1 (the plugin's service): ttrpc stream ended "
				       "4086 of 20000 bytes into a request on stream 1");
		hpn_mux_rx_free(&rx);
	}

	/* Garbage: a frame claiming more than upstream ever writes; a ttrpc header too large. */
	{
		const uint8_t huge[] = { 0, 0, 0, 1, 0, 0x40, 0, 0x0b };
		const uint8_t bad[] = { 0, 0, 0, 2, 0, 0, 0, 10, 0, 0x40, 0, 1, 0, 0, 0, 1, 2, 0 };
		const uint8_t *p = huge;
		size_t n = sizeof(huge);
		struct hpn_ttrpc_msg m;
		uint32_t conn;

		hpn_mux_rx_init(&rx);
		memset(&err, 0, sizeof(err));
		CHECK_INT_EQ(hpn_mux_rx_feed(&rx, &p, &n, &conn, &m, &err), -EMSGSIZE);
		CHECK_STR_HAS(err.msg, "multiplexer frame of 4194315 bytes for connection 1: more "
				       "than 4194314");
		memset(&err, 0, sizeof(err));
		CHECK_INT_EQ(hpn_mux_rx_feed(&rx, &p, &n, &conn, &m, &err), -EMSGSIZE);
		CHECK_STR_HAS(err.msg, "refused earlier");
		hpn_mux_rx_free(&rx);
		hpn_mux_rx_init(&rx);
		p = bad;
		n = sizeof(bad);
		memset(&err, 0, sizeof(err));
		CHECK_INT_EQ(hpn_mux_rx_feed(&rx, &p, &n, &conn, &m, &err), -EMSGSIZE);
		CHECK_STR_HAS(err.msg, "connection 2 (the runtime's service): ttrpc response of "
				       "4194305 bytes on stream 1");
		hpn_mux_rx_free(&rx);
	}
	free(a);
	free(b);
	free(ma);
	free(mb);
	free(trunk);
}

static uint8_t *read_fixture(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *p;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0 || !(p = malloc(st.st_size ? st.st_size : 1)) ||
	    read(fd, p, st.st_size) != st.st_size) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		exit(1);
	}
	close(fd);
	*len = st.st_size;
	return p;
}

static const char *map_get(Nri__Pkg__Api__V1alpha1__PodSandbox__LabelsEntry **e, size_t n,
			   const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(e[i]->key, key))
			return e[i]->value;
	return NULL;
}

/* The labels and annotations entries of a pod and a container have one layout. */
#define POD_MAP(m, field, key)                                                                     \
	map_get((Nri__Pkg__Api__V1alpha1__PodSandbox__LabelsEntry **)(m)->field, (m)->n_##field,   \
		key)

static int has_str(char **v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i], s))
			return 1;
	return 0;
}

static void check_pod(const Nri__Pkg__Api__V1alpha1__PodSandbox *p, const char *name,
		      const char *uid)
{
	const char *netns = NULL;

	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_INT_EQ(strlen(p->id), 64);
	CHECK_STR_EQ(p->name, name);
	CHECK_STR_EQ(p->uid, uid);
	CHECK_STR_EQ(p->namespace_, "hpnr");
	CHECK_STR_EQ(POD_MAP(p, labels, "app"), name);
	CHECK_STR_EQ(POD_MAP(p, labels, "alibabacloud.com/hpn-type"), "rdma");
	CHECK_STR_HAS(POD_MAP(p, annotations, "hpn.example/note"), name);
	CHECK(p->linux != NULL);
	for (size_t i = 0; p->linux && i < p->linux->n_namespaces; i++)
		if (!strcmp(p->linux->namespaces[i]->type, "network"))
			netns = p->linux->namespaces[i]->path;
	CHECK_STR_HAS(netns, "/netns/cni-");
	CHECK_INT_EQ(p->n_ips, 1);
	CHECK(p->n_ips == 1 && !strncmp(p->ips[0], "10.252.0.", 9));
}

static void check_container(const Nri__Pkg__Api__V1alpha1__Container *c,
			    const Nri__Pkg__Api__V1alpha1__PodSandbox *p)
{
	int data = 0;

	CHECK(c != NULL && p != NULL);
	if (!c || !p)
		return;
	CHECK_INT_EQ(strlen(c->id), 64);
	CHECK_STR_EQ(c->pod_sandbox_id, p->id);
	CHECK_STR_EQ(c->name, "main");
	CHECK_STR_EQ(POD_MAP(c, labels, "role"), "main");
	CHECK_STR_EQ(POD_MAP(c, annotations, "hpn.example/ctr"), "main");
	CHECK(has_str(c->env, c->n_env, "HPN_TEST=1"));
	CHECK(c->n_args == 1 && !strcmp(c->args[0], "/pause"));
	for (size_t i = 0; i < c->n_mounts; i++)
		if (!strcmp(c->mounts[i]->destination, "/data")) {
			data = 1;
			CHECK(has_str(c->mounts[i]->options, c->mounts[i]->n_options, "ro"));
			CHECK_STR_HAS(c->mounts[i]->source, "/data");
		}
	CHECK(data);
	CHECK(c->linux != NULL && c->linux->n_namespaces > 0);
}

/*
 * What containerd 2.1.9 sent the recorder (test/nri/record.sh): the answer to
 * RegisterPlugin on connection 2, then on connection 1 Configure,
 * Synchronize with pod nri-before and its running container, then pod
 * nri-after's events and its CreateContainer.
 */
static void test_recorded(void)
{
	size_t len, off = 0;
	uint8_t *buf = read_fixture(FIXTURE, &len);
	struct hpn_mux_rx rx, rx1;
	struct hpn_err err = { 0 };
	const uint8_t *p = buf;
	struct hpn_ttrpc_msg m;
	uint32_t conn, stream = 1;
	int calls = 0, creates = 0, syncs = 0, configs = 0, replies = 0, r;
	int events[16] = { 0 };

	hpn_mux_rx_init(&rx);
	hpn_mux_rx_init(&rx1);
	while ((r = hpn_mux_rx_feed(&rx, &p, &len, &conn, &m, &err)) > 0) {
		struct hpn_ttrpc_msg m1;
		uint32_t conn1;
		int r1 = 0;

		/* The same message byte by byte. */
		while (off < (size_t)(p - buf)) {
			const uint8_t *q = buf + off++;
			size_t one = 1;

			r1 = hpn_mux_rx_feed(&rx1, &q, &one, &conn1, &m1, &err);
			CHECK(r1 >= 0 && one == 0);
			if (r1)
				break;
		}
		CHECK_INT_EQ(r1, 1);
		CHECK(r1 == 1 && conn1 == conn && m1.hdr.len == m.hdr.len &&
		      (!m.hdr.len || !memcmp(m1.data, m.data, m.hdr.len)));

		if (conn == HPN_MUX_CONN_RUNTIME) {
			struct hpn_ttrpc_reply rep;

			CHECK_INT_EQ(hpn_ttrpc_reply_unpack(&m, &rep, &err), 0);
			CHECK_INT_EQ(rep.stream, 1); /* RegisterPlugin's */
			CHECK_INT_EQ(rep.code, HPN_TTRPC_OK);
			hpn_ttrpc_reply_free(&rep);
			replies++;
			continue;
		}
		struct hpn_ttrpc_call c;

		CHECK_INT_EQ(conn, HPN_MUX_CONN_PLUGIN);
		CHECK_INT_EQ(hpn_ttrpc_call_unpack(&m, &c, &err), 0);
		calls++;
		/* The runtime's client: streams 1, 3, 5, ...; its request timeout, 2 s. */
		CHECK_INT_EQ(c.stream, stream);
		stream += 2;
		CHECK_STR_EQ(c.service, PLUGIN);
		CHECK(c.timeout_ns > 1900000000 && c.timeout_ns <= 2000000000);
		if (!strcmp(c.method, "Configure")) {
			Nri__Pkg__Api__V1alpha1__ConfigureRequest *q =
				nri__pkg__api__v1alpha1__configure_request__unpack(
					NULL, c.payload_len, c.payload);

			configs++;
			CHECK(calls == 1 && q != NULL);
			CHECK_STR_EQ(q ? q->runtime_name : NULL, "containerd");
			CHECK_STR_HAS(q ? q->runtime_version : NULL, "2.1.9");
			CHECK_INT_EQ(q ? q->registration_timeout : 0, 5000);
			CHECK_INT_EQ(q ? q->request_timeout : 0, 2000);
			nri__pkg__api__v1alpha1__configure_request__free_unpacked(q, NULL);
		} else if (!strcmp(c.method, "Synchronize")) {
			Nri__Pkg__Api__V1alpha1__SynchronizeRequest *q =
				nri__pkg__api__v1alpha1__synchronize_request__unpack(
					NULL, c.payload_len, c.payload);

			syncs++;
			CHECK(calls == 2 && q != NULL);
			CHECK(q && q->n_pods == 1 && q->n_containers == 1 && !q->more);
			if (q && q->n_pods == 1 && q->n_containers == 1) {
				check_pod(q->pods[0], "nri-before",
					  "11111111-2222-4333-8444-555555555555");
				check_container(q->containers[0], q->pods[0]);
				CHECK_INT_EQ(
					q->containers[0]->state,
					NRI__PKG__API__V1ALPHA1__CONTAINER_STATE__CONTAINER_RUNNING);
			}
			nri__pkg__api__v1alpha1__synchronize_request__free_unpacked(q, NULL);
		} else if (!strcmp(c.method, "CreateContainer")) {
			Nri__Pkg__Api__V1alpha1__CreateContainerRequest *q =
				nri__pkg__api__v1alpha1__create_container_request__unpack(
					NULL, c.payload_len, c.payload);

			creates++;
			CHECK(q != NULL);
			if (q) {
				check_pod(q->pod, "nri-after",
					  "66666666-7777-4888-9999-000000000000");
				check_container(q->container, q->pod);
			}
			nri__pkg__api__v1alpha1__create_container_request__free_unpacked(q, NULL);
		} else if (!strcmp(c.method, "StateChange")) {
			Nri__Pkg__Api__V1alpha1__StateChangeEvent *q =
				nri__pkg__api__v1alpha1__state_change_event__unpack(
					NULL, c.payload_len, c.payload);

			CHECK(q && q->pod && q->event > 0 && q->event < 16);
			if (q && q->event > 0 && q->event < 16)
				events[q->event]++;
			/* A pod's event names no container; a container's names its pod's. */
			if (q && q->container)
				CHECK_STR_EQ(q->container->pod_sandbox_id, q->pod->id);
			nri__pkg__api__v1alpha1__state_change_event__free_unpacked(q, NULL);
		} else {
			CHECK_STR_EQ(c.method, "(a call the recorder did not subscribe to)");
		}
		hpn_ttrpc_call_free(&c);
	}
	CHECK_INT_EQ(r, 0);
	CHECK_INT_EQ(len, 0);
	CHECK_INT_EQ(hpn_mux_rx_end(&rx, &err), 0);
	CHECK_INT_EQ(rx.dropped_bytes, 0);
	CHECK_INT_EQ(replies, 1);
	CHECK_INT_EQ(configs, 1);
	CHECK_INT_EQ(syncs, 1);
	CHECK_INT_EQ(creates, 1);
	/* nri-after ran, stopped and was removed; its container removed; nri-before too. */
	CHECK_INT_EQ(events[NRI__PKG__API__V1ALPHA1__EVENT__RUN_POD_SANDBOX], 1);
	CHECK_INT_EQ(events[NRI__PKG__API__V1ALPHA1__EVENT__STOP_POD_SANDBOX], 2);
	CHECK_INT_EQ(events[NRI__PKG__API__V1ALPHA1__EVENT__REMOVE_POD_SANDBOX], 2);
	CHECK_INT_EQ(events[NRI__PKG__API__V1ALPHA1__EVENT__REMOVE_CONTAINER], 2);
	hpn_mux_rx_free(&rx);
	hpn_mux_rx_free(&rx1);
	free(buf);
}

int main(void)
{
	test_hdr();
	test_ttrpc_roundtrip();
	test_ttrpc_refused();
	test_calls();
	test_mux_split();
	test_mux_streams();
	test_recorded();
	return check_done();
}
