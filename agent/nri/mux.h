/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_MUX_H
#define HPN_AGENT_MUX_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "ttrpc.h"

/*
 * containerd/nri's multiplexer (pkg/net/multiplex): the plugin's one unix
 * socket connection to the runtime (the trunk) carries two ttrpc
 * connections. Each frame is an 8-byte header, connection ID u32 and payload
 * length u32 (both big-endian), then that many payload bytes: a piece of the
 * connection's byte stream. Connection 1 carries the plugin's service (the
 * runtime calls Configure, Synchronize, CreateContainer ... and we answer),
 * connection 2 the runtime's (we call RegisterPlugin and UpdateContainers).
 * There is no handshake and no close frame: a connection is "open" at both
 * ends by convention, the trunk's end closes them all, and a frame for a
 * connection nobody opened is dropped (mux.go's reader). ID 0 is reserved.
 *
 * Sizes: upstream's writer cuts a message into frames of at most
 * HPN_MUX_PAYLOAD_MAX payload bytes (a ttrpc header and its largest message),
 * so that is what the runtime may send us and all we accept. But the
 * runtime's reader cannot take a frame larger than 4096 bytes (see
 * HPN_MUX_FRAME_MAX): our writer cuts every message into frames of at most
 * that, header included, and never puts two messages in one frame.
 *
 * Errors as ttrpc.h: negative errno, the words in err (HPN_E_DECODE). Nothing
 * here does I/O.
 */

#define HPN_MUX_HDR_LEN	     8
#define HPN_MUX_CONN_PLUGIN  1 /* the plugin's service: the runtime calls us */
#define HPN_MUX_CONN_RUNTIME 2 /* the runtime's service: we call it */
#define HPN_MUX_PAYLOAD_MAX  (HPN_TTRPC_HDR_LEN + HPN_TTRPC_MSG_MAX)
#define HPN_MUX_FRAME_MAX    4096

/*
 * The demultiplexer: the trunk's bytes in pieces of any size, each frame's
 * payload out as chunks pointing into those bytes (a frame that arrives in
 * pieces comes out in as many chunks). It keeps 8 header bytes and two
 * counters, nothing else. A frame of zero bytes gives no chunk (upstream
 * queues it, and ttrpc reads nothing from it). The first refusal sticks.
 */
struct hpn_mux_dec {
	uint8_t hdr[HPN_MUX_HDR_LEN];
	size_t hdr_have;
	uint32_t conn; /* the frame being read, once hdr_have == HPN_MUX_HDR_LEN */
	uint32_t len, left;
	int error;
};

struct hpn_mux_chunk {
	uint32_t conn;
	const uint8_t *data;
	size_t len;
};

void hpn_mux_dec_init(struct hpn_mux_dec *d);
/*
 * Takes bytes from *data (advancing it and *len): 1 with the next chunk in
 * *ret (pointing into the caller's bytes), 0 when all of *len is taken
 * without one, or a negative errno: -EMSGSIZE for a frame longer than
 * HPN_MUX_PAYLOAD_MAX (and every later call returns it too). Connection IDs
 * are not judged here: every chunk names its own.
 */
int hpn_mux_dec_feed(struct hpn_mux_dec *d, const uint8_t **data, size_t *len,
		     struct hpn_mux_chunk *ret, struct hpn_err *err);
/* The trunk ended here: 0 between frames, -EPROTO inside one (saying where). */
int hpn_mux_dec_end(const struct hpn_mux_dec *d, struct hpn_err *err);

/* The bytes hpn_mux_frames makes of a message of len bytes. */
size_t hpn_mux_frames_len(size_t len);
/*
 * One message (a whole ttrpc message, 1 to HPN_MUX_PAYLOAD_MAX bytes) for
 * connection conn as frames of at most HPN_MUX_FRAME_MAX bytes each, header
 * included, in a new buffer (*ret, malloc'ed, of *ret_len bytes) to write to
 * the trunk as it is. -EINVAL for connection 0 or nothing to send, -EMSGSIZE
 * for a message too large.
 */
int hpn_mux_frames(uint32_t conn, const uint8_t *msg, size_t len, uint8_t **ret, size_t *ret_len,
		   struct hpn_err *err);

/*
 * The NRI link's receiving side: the trunk's bytes to whole ttrpc messages of
 * connections 1 and 2, each connection's stream decoded on its own. Chunks of
 * other connections are dropped and counted, as upstream drops them. At most
 * one message per connection is held (ttrpc.h's bound), and a chunk not yet
 * fed: call hpn_mux_rx_feed until it returns 0 before the bytes given to it
 * go away. A refusal on either connection sticks for the whole link (the
 * trunk is closed: the runtime then drops the plugin).
 */
struct hpn_mux_rx {
	struct hpn_mux_dec mux;
	struct hpn_ttrpc_dec conn[2]; /* HPN_MUX_CONN_PLUGIN, HPN_MUX_CONN_RUNTIME */
	struct hpn_mux_chunk cur;     /* the rest of the chunk being fed */
	uint64_t dropped_frames, dropped_bytes;
	uint32_t last_dropped_conn;
	int error;
};

void hpn_mux_rx_init(struct hpn_mux_rx *rx);
void hpn_mux_rx_free(struct hpn_mux_rx *rx);
/*
 * Takes bytes from *data as hpn_mux_dec_feed does: 1 with the next whole
 * message in *ret (its data owned by rx, valid until the next call) and its
 * connection in *ret_conn, 0 when everything given is taken, or a negative
 * errno whose words name the connection.
 */
int hpn_mux_rx_feed(struct hpn_mux_rx *rx, const uint8_t **data, size_t *len, uint32_t *ret_conn,
		    struct hpn_ttrpc_msg *ret, struct hpn_err *err);
/* The trunk ended: 0 when it ended between messages of both connections. */
int hpn_mux_rx_end(const struct hpn_mux_rx *rx, struct hpn_err *err);

#endif
