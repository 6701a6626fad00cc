// SPDX-License-Identifier: Apache-2.0
/*
 * containerd/nri's multiplexer framing (mux.h), written from
 * pkg/net/multiplex/mux.go and ttrpc.go (nri v0.8.0 to v0.11.0 and main:
 * the line numbers below hold in each).
 *
 * Why a frame we write is at most 4096 bytes: the runtime reads the trunk in
 * mux.go's reader, one frame's payload into a buffer of exactly its length
 * (line 325, make([]byte, cnt)), and hands it whole to the ttrpc connection's
 * Read, which fails with ENOMEM when the reader's buffer is smaller than the
 * payload (line 398, cap(buf) < len(msg)); ttrpc reads its connection
 * through a bufio.Reader of Go's default 4096 bytes (ttrpc channel.go line
 * 110, bufio.NewReader(conn)), whose Read passes its own 4096-byte buffer
 * down whenever the caller's is smaller, as it is for every message header
 * (10 bytes). So the limit upstream checks is the payload alone, 4096 bytes
 * (the 8-byte frame header is read separately, line 305); we keep the whole
 * frame within 4096, 8 bytes to spare. The ttrpc client then fails and is
 * closed: containerd 2.1.9 logs "ttrpc: closed" and drops the plugin, as
 * measured with a 6 KB answer in one frame. Upstream's own writer does not
 * split at 4096 (line 247: at maxPayloadSize, line 142, a ttrpc header and
 * its largest message), so frames the runtime sends us may be that large.
 *
 * A frame never holds bytes of two messages: when bufio's buffer is empty
 * and a message's remaining bytes are 4096 or more, ttrpc reads into the
 * message's own buffer, and a frame running past the message's end would be
 * cut short there (Read copies what fits and claims the whole frame).
 */
#include "mux.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_PAYLOAD (HPN_MUX_FRAME_MAX - HPN_MUX_HDR_LEN)

void hpn_mux_dec_init(struct hpn_mux_dec *d)
{
	memset(d, 0, sizeof(*d));
}

int hpn_mux_dec_feed(struct hpn_mux_dec *d, const uint8_t **data, size_t *len,
		     struct hpn_mux_chunk *ret, struct hpn_err *err)
{
	size_t n;

	if (d->error)
		return hpn_err_set(
			err, HPN_E_DECODE, -d->error,
			"multiplexed stream refused earlier: nothing more is read from it");
	for (;;) {
		if (d->hdr_have < HPN_MUX_HDR_LEN) {
			n = HPN_MUX_HDR_LEN - d->hdr_have;
			if (n > *len)
				n = *len;
			memcpy(d->hdr + d->hdr_have, *data, n);
			d->hdr_have += n;
			*data += n;
			*len -= n;
			if (d->hdr_have < HPN_MUX_HDR_LEN)
				return 0;
			d->conn = hpn_be32_get(d->hdr);
			d->len = d->left = hpn_be32_get(d->hdr + 4);
			if (d->len > HPN_MUX_PAYLOAD_MAX) {
				d->error = -EMSGSIZE;
				return hpn_err_set(
					err, HPN_E_DECODE, EMSGSIZE,
					"multiplexer frame of %u bytes for connection %u: "
					"more than %u (a ttrpc header and its largest "
					"message)",
					d->len, d->conn, HPN_MUX_PAYLOAD_MAX);
			}
		}
		if (d->left == 0) {
			/* A frame of zero bytes, or one just finished. */
			d->hdr_have = 0;
			continue;
		}
		if (*len == 0)
			return 0;
		n = d->left < *len ? d->left : *len;
		*ret = (struct hpn_mux_chunk){ .conn = d->conn, .data = *data, .len = n };
		d->left -= n;
		*data += n;
		*len -= n;
		if (d->left == 0)
			d->hdr_have = 0;
		return 1;
	}
}

int hpn_mux_dec_end(const struct hpn_mux_dec *d, struct hpn_err *err)
{
	if (d->error)
		return hpn_err_set(err, HPN_E_DECODE, -d->error,
				   "multiplexed stream refused earlier");
	if (d->hdr_have == 0)
		return 0;
	if (d->hdr_have < HPN_MUX_HDR_LEN)
		return hpn_err_set(err, HPN_E_DECODE, EPROTO,
				   "multiplexed stream ended %zu bytes into a frame header of %u",
				   d->hdr_have, HPN_MUX_HDR_LEN);
	return hpn_err_set(err, HPN_E_DECODE, EPROTO,
			   "multiplexed stream ended %u of %u bytes into a frame for connection %u",
			   d->len - d->left, d->len, d->conn);
}

size_t hpn_mux_frames_len(size_t len)
{
	return len + (len + FRAME_PAYLOAD - 1) / FRAME_PAYLOAD * HPN_MUX_HDR_LEN;
}

int hpn_mux_frames(uint32_t conn, const uint8_t *msg, size_t len, uint8_t **ret, size_t *ret_len,
		   struct hpn_err *err)
{
	size_t total, off = 0;
	uint8_t *p, *w;

	/* mux.go Open refuses ConnID 0 (reserved): no runtime reads it. */
	if (conn == 0 || len == 0)
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
				   "multiplexer frames of %zu bytes for connection %u: nothing to "
				   "send",
				   len, conn);
	if (len > HPN_MUX_PAYLOAD_MAX)
		return hpn_err_set(err, HPN_E_DECODE, EMSGSIZE,
				   "message of %zu bytes for connection %u: more than one ttrpc "
				   "message (%u)",
				   len, conn, HPN_MUX_PAYLOAD_MAX);
	total = hpn_mux_frames_len(len);
	p = malloc(total);
	if (!p)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM,
				   "multiplexer frames of %zu bytes: out of memory", total);
	w = p;
	while (off < len) {
		size_t n = len - off < FRAME_PAYLOAD ? len - off : FRAME_PAYLOAD;

		hpn_be32_put(w, conn);
		hpn_be32_put(w + 4, (uint32_t)n);
		memcpy(w + HPN_MUX_HDR_LEN, msg + off, n);
		w += HPN_MUX_HDR_LEN + n;
		off += n;
	}
	*ret = p;
	*ret_len = total;
	return 0;
}

void hpn_mux_rx_init(struct hpn_mux_rx *rx)
{
	memset(rx, 0, sizeof(*rx));
	hpn_mux_dec_init(&rx->mux);
	hpn_ttrpc_dec_init(&rx->conn[0]);
	hpn_ttrpc_dec_init(&rx->conn[1]);
}

void hpn_mux_rx_free(struct hpn_mux_rx *rx)
{
	if (!rx)
		return;
	hpn_ttrpc_dec_free(&rx->conn[0]);
	hpn_ttrpc_dec_free(&rx->conn[1]);
	hpn_mux_rx_init(rx);
}

static const char *conn_name(uint32_t conn)
{
	return conn == HPN_MUX_CONN_PLUGIN ? "the plugin's service" : "the runtime's service";
}

int hpn_mux_rx_feed(struct hpn_mux_rx *rx, const uint8_t **data, size_t *len, uint32_t *ret_conn,
		    struct hpn_ttrpc_msg *ret, struct hpn_err *err)
{
	int r;

	if (rx->error)
		return hpn_err_set(err, HPN_E_DECODE, -rx->error,
				   "NRI link refused earlier: nothing more is read from it");
	for (;;) {
		while (rx->cur.len) {
			uint32_t conn = rx->cur.conn;

			r = hpn_ttrpc_dec_feed(&rx->conn[conn - 1], &rx->cur.data, &rx->cur.len,
					       ret, err);
			if (r < 0) {
				hpn_err_prefix(err, "connection %u (%s)", conn, conn_name(conn));
				rx->error = r;
				return r;
			}
			if (r > 0) {
				*ret_conn = conn;
				return 1;
			}
		}
		r = hpn_mux_dec_feed(&rx->mux, data, len, &rx->cur, err);
		if (r <= 0) {
			if (r < 0)
				rx->error = r;
			rx->cur.len = 0;
			return r;
		}
		if (rx->cur.conn != HPN_MUX_CONN_PLUGIN && rx->cur.conn != HPN_MUX_CONN_RUNTIME) {
			/* mux.go's reader drops a frame of a connection not open (line 348). */
			rx->dropped_bytes += rx->cur.len;
			if (rx->mux.left + rx->cur.len == rx->mux.len)
				rx->dropped_frames++;
			rx->last_dropped_conn = rx->cur.conn;
			rx->cur.len = 0;
		}
	}
}

int hpn_mux_rx_end(const struct hpn_mux_rx *rx, struct hpn_err *err)
{
	int r;

	if (rx->error)
		return hpn_err_set(err, HPN_E_DECODE, -rx->error, "NRI link refused earlier");
	r = hpn_mux_dec_end(&rx->mux, err);
	if (r < 0)
		return r;
	for (uint32_t c = HPN_MUX_CONN_PLUGIN; c <= HPN_MUX_CONN_RUNTIME; c++) {
		r = hpn_ttrpc_dec_end(&rx->conn[c - 1], err);
		if (r < 0) {
			hpn_err_prefix(err, "connection %u (%s)", c, conn_name(c));
			return r;
		}
	}
	return 0;
}
