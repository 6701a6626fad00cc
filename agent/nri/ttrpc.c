// SPDX-License-Identifier: Apache-2.0
/*
 * ttrpc's framing and its Request/Response envelope (ttrpc.h), written from
 * containerd/ttrpc's PROTOCOL.md, channel.go and server.go.
 */
#include "ttrpc.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttrpc.pb-c.h"
#include "util.h"

/* A buffer larger than this is let go once its message is done. */
#define KEEP_MAX (64u << 10)
/* service and method names: the longest one NRI uses is 28 bytes. */
#define NAME_MAX_LEN 255

static const char *type_name(uint8_t type, char buf[16])
{
	switch (type) {
	case HPN_TTRPC_REQUEST:
		return "request";
	case HPN_TTRPC_RESPONSE:
		return "response";
	case HPN_TTRPC_DATA:
		return "data";
	}
	snprintf(buf, 16, "type %u", type);
	return buf;
}

void hpn_ttrpc_hdr_put(uint8_t out[HPN_TTRPC_HDR_LEN], const struct hpn_ttrpc_hdr *h)
{
	hpn_be32_put(out, h->len);
	hpn_be32_put(out + 4, h->stream);
	out[8] = h->type;
	out[9] = h->flags;
}

int hpn_ttrpc_hdr_get(const uint8_t in[HPN_TTRPC_HDR_LEN], struct hpn_ttrpc_hdr *ret,
		      struct hpn_err *err)
{
	struct hpn_ttrpc_hdr h = {
		.len = hpn_be32_get(in),
		.stream = hpn_be32_get(in + 4),
		.type = in[8],
		.flags = in[9],
	};

	/* channel.go refuses these too (messageLengthMax); its first byte is then never 0. */
	if (h.len > HPN_TTRPC_MSG_MAX) {
		char tn[16];

		return hpn_err_set(err, HPN_E_DECODE, EMSGSIZE,
				   "ttrpc %s of %u bytes on stream %u: more than the %u a message "
				   "may carry",
				   type_name(h.type, tn), h.len, h.stream, HPN_TTRPC_MSG_MAX);
	}
	*ret = h;
	return 0;
}

void hpn_ttrpc_dec_init(struct hpn_ttrpc_dec *d)
{
	memset(d, 0, sizeof(*d));
}

void hpn_ttrpc_dec_free(struct hpn_ttrpc_dec *d)
{
	if (!d)
		return;
	free(d->buf);
	hpn_ttrpc_dec_init(d);
}

/* The buffer grows with what arrives, never past the message's length. */
static int reserve(struct hpn_ttrpc_dec *d, size_t need, struct hpn_err *err)
{
	size_t cap;
	uint8_t *p;

	if (need <= d->cap)
		return 0;
	cap = d->cap < 4096 ? 4096 : d->cap * 2;
	if (cap < need)
		cap = need;
	if (cap > d->cur.len)
		cap = d->cur.len;
	p = realloc(d->buf, cap);
	if (!p) {
		hpn_err_set(err, HPN_E_INTERNAL, ENOMEM,
			    "ttrpc message of %u bytes on stream %u: out of memory", d->cur.len,
			    d->cur.stream);
		return -ENOMEM; /* said so: the analyzer cannot see hpn_err_set's sign */
	}
	d->buf = p;
	d->cap = cap;
	return 0;
}

static int refuse(struct hpn_ttrpc_dec *d, int r)
{
	d->error = r;
	return r;
}

int hpn_ttrpc_dec_feed(struct hpn_ttrpc_dec *d, const uint8_t **data, size_t *len,
		       struct hpn_ttrpc_msg *ret, struct hpn_err *err)
{
	size_t n;
	int r;

	if (d->error)
		return hpn_err_set(err, HPN_E_DECODE, -d->error,
				   "ttrpc stream refused earlier: nothing more is read from it");
	if (d->hdr_have < HPN_TTRPC_HDR_LEN) {
		if (d->hdr_have == 0 && d->cap > KEEP_MAX) {
			free(d->buf);
			d->buf = NULL;
			d->cap = 0;
		}
		n = HPN_TTRPC_HDR_LEN - d->hdr_have;
		if (n > *len)
			n = *len;
		memcpy(d->hdr + d->hdr_have, *data, n);
		d->hdr_have += n;
		*data += n;
		*len -= n;
		if (d->hdr_have < HPN_TTRPC_HDR_LEN)
			return 0;
		r = hpn_ttrpc_hdr_get(d->hdr, &d->cur, err);
		if (r < 0)
			return refuse(d, r);
		d->have = 0;
	}
	n = d->cur.len - d->have;
	if (n > *len)
		n = *len;
	if (n) {
		r = reserve(d, d->have + n, err);
		if (r < 0)
			return refuse(d, r);
		memcpy(d->buf + d->have, *data, n);
		d->have += n;
		*data += n;
		*len -= n;
	}
	if (d->have < d->cur.len)
		return 0;
	ret->hdr = d->cur;
	ret->data = d->cur.len ? d->buf : NULL;
	d->hdr_have = 0;
	d->have = 0;
	return 1;
}

int hpn_ttrpc_dec_end(const struct hpn_ttrpc_dec *d, struct hpn_err *err)
{
	char tn[16];

	if (d->error)
		return hpn_err_set(err, HPN_E_DECODE, -d->error, "ttrpc stream refused earlier");
	if (d->hdr_have == 0)
		return 0;
	if (d->hdr_have < HPN_TTRPC_HDR_LEN)
		return hpn_err_set(err, HPN_E_DECODE, EPROTO,
				   "ttrpc stream ended %zu bytes into a message header of %u",
				   d->hdr_have, HPN_TTRPC_HDR_LEN);
	return hpn_err_set(err, HPN_E_DECODE, EPROTO,
			   "ttrpc stream ended %zu of %u bytes into a %s on stream %u", d->have,
			   d->cur.len, type_name(d->cur.type, tn), d->cur.stream);
}

/* A buffer of HPN_TTRPC_HDR_LEN + len bytes with the header written; the caller fills the data. */
static int message_new(uint32_t stream, uint8_t type, uint8_t flags, size_t len, uint8_t **ret,
		       struct hpn_err *err)
{
	struct hpn_ttrpc_hdr h = { .stream = stream, .type = type, .flags = flags };
	uint8_t *p;
	char tn[16];

	/* -errno said outright: the analyzer cannot see hpn_err_set's sign. */
	if (len > HPN_TTRPC_MSG_MAX) {
		hpn_err_set(
			err, HPN_E_DECODE, EMSGSIZE,
			"ttrpc %s of %zu bytes on stream %u: more than the runtime accepts (%u)",
			type_name(type, tn), len, stream, HPN_TTRPC_MSG_MAX);
		return -EMSGSIZE;
	}
	p = malloc(HPN_TTRPC_HDR_LEN + len);
	if (!p) {
		hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "ttrpc %s of %zu bytes: out of memory",
			    type_name(type, tn), len);
		return -ENOMEM;
	}
	h.len = (uint32_t)len;
	hpn_ttrpc_hdr_put(p, &h);
	*ret = p;
	return 0;
}

int hpn_ttrpc_encode(uint32_t stream, uint8_t type, uint8_t flags, const uint8_t *data, size_t len,
		     uint8_t **ret, size_t *ret_len, struct hpn_err *err)
{
	uint8_t *p;
	int r;

	r = message_new(stream, type, flags, len, &p, err);
	if (r < 0)
		return r;
	if (len)
		memcpy(p + HPN_TTRPC_HDR_LEN, data, len);
	*ret = p;
	*ret_len = HPN_TTRPC_HDR_LEN + len;
	return 0;
}

/* A protobuf-c message packed behind a ttrpc header, in one buffer. */
static int pack_message(uint32_t stream, uint8_t type, const ProtobufCMessage *m, uint8_t **ret,
			size_t *ret_len, struct hpn_err *err)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *p;
	int r;

	r = message_new(stream, type, 0, len, &p, err);
	if (r < 0)
		return r;
	protobuf_c_message_pack(m, p + HPN_TTRPC_HDR_LEN);
	*ret = p;
	*ret_len = HPN_TTRPC_HDR_LEN + len;
	return 0;
}

static bool name_ok(const char *s, const char *extra)
{
	size_t n = strlen(s);

	if (n < 1 || n > NAME_MAX_LEN)
		return false;
	for (; *s; s++)
		if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') &&
		    !(*s >= '0' && *s <= '9') && *s != '_' && !strchr(extra, *s))
			return false;
	return true;
}

int hpn_ttrpc_call_unpack(const struct hpn_ttrpc_msg *m, struct hpn_ttrpc_call *ret,
			  struct hpn_err *err)
{
	Ttrpc__Request *req;

	if (m->hdr.type != HPN_TTRPC_REQUEST) {
		char tn[16];

		return hpn_err_set(err, HPN_E_DECODE, EPROTO,
				   "ttrpc stream %u: a %s where a request was expected",
				   m->hdr.stream, type_name(m->hdr.type, tn));
	}
	/* server.go: client-initiated streams are odd. */
	if (m->hdr.stream % 2 != 1)
		return hpn_err_set(err, HPN_E_DECODE, EPROTO,
				   "ttrpc request on stream %u: a caller's stream is odd",
				   m->hdr.stream);
	if (m->hdr.flags)
		return hpn_err_set(err, HPN_E_DECODE, EPROTO,
				   "ttrpc request on stream %u with flags 0x%x: a streaming call "
				   "(NRI makes only unary ones)",
				   m->hdr.stream, m->hdr.flags);
	req = ttrpc__request__unpack(NULL, m->hdr.len, m->data);
	if (!req)
		return hpn_err_set(
			err, HPN_E_DECODE, EPROTO,
			"ttrpc request on stream %u: %u bytes that are not a ttrpc.Request",
			m->hdr.stream, m->hdr.len);
	if (!name_ok(req->service, ".") || !name_ok(req->method, "")) {
		hpn_err_set(err, HPN_E_DECODE, EPROTO,
			    "ttrpc request on stream %u: service \"%.64s\" method \"%.64s\": not a "
			    "method name",
			    m->hdr.stream, req->service, req->method);
		ttrpc__request__free_unpacked(req, NULL);
		return -EPROTO;
	}
	*ret = (struct hpn_ttrpc_call){
		.stream = m->hdr.stream,
		.service = req->service,
		.method = req->method,
		.payload = req->payload.len ? req->payload.data : NULL,
		.payload_len = req->payload.len,
		.timeout_ns = req->timeout_nano > 0 ? req->timeout_nano : 0,
		.req = req,
	};
	return 0;
}

void hpn_ttrpc_call_free(struct hpn_ttrpc_call *c)
{
	if (!c || !c->req)
		return;
	ttrpc__request__free_unpacked(c->req, NULL);
	memset(c, 0, sizeof(*c));
}

int hpn_ttrpc_response_pack(uint32_t stream, int code, const char *message, const uint8_t *payload,
			    size_t len, uint8_t **ret, size_t *ret_len, struct hpn_err *err)
{
	Ttrpc__Status st = TTRPC__STATUS__INIT;
	Ttrpc__Response resp = TTRPC__RESPONSE__INIT;

	/*
	 * As ttrpc's server (services.go: status.FromError(nil) is nil): no
	 * status on success, as containerd 2.1.9 answered RegisterPlugin.
	 */
	st.code = code;
	st.message = (char *)(message ? message : "");
	if (code != HPN_TTRPC_OK || st.message[0])
		/* cppcheck-suppress unreadVariable ; packed below, through &resp.base */
		resp.status = &st;
	resp.payload.data = (uint8_t *)payload;
	resp.payload.len = payload ? len : 0;
	return pack_message(stream, HPN_TTRPC_RESPONSE, &resp.base, ret, ret_len, err);
}

int hpn_ttrpc_request_pack(uint32_t stream, const char *service, const char *method,
			   const uint8_t *payload, size_t len, int64_t timeout_ns, uint8_t **ret,
			   size_t *ret_len, struct hpn_err *err)
{
	Ttrpc__Request req = TTRPC__REQUEST__INIT;

	if (stream % 2 != 1 || !name_ok(service, ".") || !name_ok(method, ""))
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
				   "ttrpc request %s/%s on stream %u: not a call to make", service,
				   method, stream);
	/* Packed below, through &req.base (cppcheck sees no read of the fields). */
	/* cppcheck-suppress unreadVariable */
	req.service = (char *)service;
	/* cppcheck-suppress unreadVariable */
	req.method = (char *)method;
	req.payload.data = (uint8_t *)payload;
	req.payload.len = payload ? len : 0;
	/* cppcheck-suppress unreadVariable */
	req.timeout_nano = timeout_ns > 0 ? timeout_ns : 0;
	return pack_message(stream, HPN_TTRPC_REQUEST, &req.base, ret, ret_len, err);
}

int hpn_ttrpc_reply_unpack(const struct hpn_ttrpc_msg *m, struct hpn_ttrpc_reply *ret,
			   struct hpn_err *err)
{
	Ttrpc__Response *resp;

	if (m->hdr.type != HPN_TTRPC_RESPONSE) {
		char tn[16];

		return hpn_err_set(err, HPN_E_DECODE, EPROTO,
				   "ttrpc stream %u: a %s where a response was expected",
				   m->hdr.stream, type_name(m->hdr.type, tn));
	}
	resp = ttrpc__response__unpack(NULL, m->hdr.len, m->data);
	if (!resp)
		return hpn_err_set(err, HPN_E_DECODE, EPROTO,
				   "ttrpc response on stream %u: %u bytes that are not a "
				   "ttrpc.Response",
				   m->hdr.stream, m->hdr.len);
	*ret = (struct hpn_ttrpc_reply){
		.stream = m->hdr.stream,
		.code = resp->status ? resp->status->code : HPN_TTRPC_OK,
		.message = resp->status ? resp->status->message : "",
		.payload = resp->payload.len ? resp->payload.data : NULL,
		.payload_len = resp->payload.len,
		.resp = resp,
	};
	return 0;
}

void hpn_ttrpc_reply_free(struct hpn_ttrpc_reply *r)
{
	if (!r || !r->resp)
		return;
	ttrpc__response__free_unpacked(r->resp, NULL);
	memset(r, 0, sizeof(*r));
}
