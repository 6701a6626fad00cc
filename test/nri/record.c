// SPDX-License-Identifier: Apache-2.0
/*
 * nri-record SOCKET OUTDIR [--pad N] [--one-frame] [--seconds S]: a test-only
 * NRI plugin that records what a runtime sends it, for the fixtures of
 * test/fixtures/nri/ (test/nri/record.sh runs it against a throwaway
 * containerd). Through the project's own wire (agent/nri/): it connects to
 * the runtime's NRI socket, registers as "hpn-record" (index 50) on
 * connection 2, subscribes to the pod events, CreateContainer and
 * RemoveContainer, and answers every call with an empty success (Synchronize
 * echoing `more`). Everything the runtime sends is appended, byte for byte, to
 * OUTDIR/recv.bin; what it sends the runtime to OUTDIR/sent.bin; each call's
 * payload to OUTDIR/NN-Method.pb; and one line per frame and per message to
 * stdout.
 *
 * --pad N: CreateContainer's answer carries an annotation of N bytes
 * (hpn.test/pad), so the answer is larger than one frame may be; the runtime
 * must apply it. --one-frame: each answer goes out in one frame, whatever its
 * size, as upstream's writer does: the negative control for the runtime's
 * 4096-byte frame reader. It exits when the runtime closes the socket, on
 * SIGTERM or SIGINT, or after S seconds (default 120): 0 when the link ended
 * between messages, 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "mux.h"
#include "nri.pb-c.h"
#include "ttrpc.h"

#define SVC_PLUGIN  "nri.pkg.api.v1alpha1.Plugin"
#define SVC_RUNTIME "nri.pkg.api.v1alpha1.Runtime"
#define EV(e)	    (1 << (NRI__PKG__API__V1ALPHA1__EVENT__##e - 1))

static volatile sig_atomic_t stop;
static const char *outdir;
static int fd_recv = -1, fd_sent = -1, calls;
static size_t pad;
static bool one_frame;

static void on_signal(int sig)
{
	stop = sig;
}

static void die(const char *what, const struct hpn_err *err)
{
	fprintf(stderr, "nri-record: %s: %s\n", what,
		err && err->msg[0] ? err->msg : strerror(errno));
	exit(1);
}

static void write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("write", NULL);
		p += n;
		len -= (size_t)n;
	}
}

static int open_out(const char *name)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", outdir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		die(path, NULL);
	return fd;
}

/* One ttrpc message to the runtime on conn: frames of at most 4096 bytes, or one frame. */
static void send_msg(int sock, uint32_t conn, uint8_t *msg, size_t len)
{
	struct hpn_err err = { 0 };
	uint8_t *frames;
	size_t flen;

	if (one_frame) {
		flen = HPN_MUX_HDR_LEN + len;
		frames = malloc(flen);
		if (!frames)
			die("malloc", NULL);
		for (int i = 0; i < 4; i++) {
			frames[i] = conn >> (24 - 8 * i);
			frames[4 + i] = (uint32_t)len >> (24 - 8 * i);
		}
		memcpy(frames + HPN_MUX_HDR_LEN, msg, len);
	} else if (hpn_mux_frames(conn, msg, len, &frames, &flen, &err) < 0) {
		die("frames", &err);
	}
	printf("sent conn=%u message=%zu bytes in %zu frame bytes\n", conn, len, flen);
	write_all(sock, frames, flen);
	write_all(fd_sent, frames, flen);
	free(frames);
	free(msg);
}

static void reply(int sock, uint32_t stream, int code, const char *text, const ProtobufCMessage *m)
{
	struct hpn_err err = { 0 };
	uint8_t *payload = NULL, *msg;
	size_t len = 0, mlen;

	if (m) {
		len = protobuf_c_message_get_packed_size(m);
		payload = malloc(len ? len : 1);
		if (!payload)
			die("malloc", NULL);
		protobuf_c_message_pack(m, payload);
	}
	if (hpn_ttrpc_response_pack(stream, code, text, payload, len, &msg, &mlen, &err) < 0)
		die("response", &err);
	free(payload);
	send_msg(sock, HPN_MUX_CONN_PLUGIN, msg, mlen);
}

static void save_payload(const struct hpn_ttrpc_call *c)
{
	char name[128];
	int fd;

	snprintf(name, sizeof(name), "%02d-%s.pb", ++calls, c->method);
	fd = open_out(name);
	if (c->payload_len)
		write_all(fd, c->payload, c->payload_len);
	close(fd);
}

static void serve(int sock, const struct hpn_ttrpc_msg *m)
{
	Nri__Pkg__Api__V1alpha1__Empty empty = NRI__PKG__API__V1ALPHA1__EMPTY__INIT;
	struct hpn_ttrpc_call c;
	struct hpn_err err = { 0 };

	if (hpn_ttrpc_call_unpack(m, &c, &err) < 0) {
		printf("refused: %s\n", err.msg);
		reply(sock, m->hdr.stream, HPN_TTRPC_INVALID_ARGUMENT, err.msg, NULL);
		return;
	}
	printf("call stream=%u %s/%s payload=%zu bytes timeout=%lld ms\n", c.stream, c.service,
	       c.method, c.payload_len, (long long)(c.timeout_ns / 1000000));
	save_payload(&c);
	if (strcmp(c.service, SVC_PLUGIN)) {
		reply(sock, c.stream, HPN_TTRPC_UNIMPLEMENTED, "unknown service", NULL);
	} else if (!strcmp(c.method, "Configure")) {
		Nri__Pkg__Api__V1alpha1__ConfigureResponse r =
			NRI__PKG__API__V1ALPHA1__CONFIGURE_RESPONSE__INIT;

		r.events = EV(RUN_POD_SANDBOX) | EV(STOP_POD_SANDBOX) | EV(REMOVE_POD_SANDBOX) |
			   EV(CREATE_CONTAINER) | EV(REMOVE_CONTAINER);
		reply(sock, c.stream, HPN_TTRPC_OK, NULL, &r.base);
	} else if (!strcmp(c.method, "Synchronize")) {
		Nri__Pkg__Api__V1alpha1__SynchronizeRequest *q;
		Nri__Pkg__Api__V1alpha1__SynchronizeResponse r =
			NRI__PKG__API__V1ALPHA1__SYNCHRONIZE_RESPONSE__INIT;

		q = nri__pkg__api__v1alpha1__synchronize_request__unpack(NULL, c.payload_len,
									 c.payload);
		r.more = q && q->more;
		printf("  synchronize: %zu pods, %zu containers, more %d\n", q ? q->n_pods : 0,
		       q ? q->n_containers : 0, r.more);
		nri__pkg__api__v1alpha1__synchronize_request__free_unpacked(q, NULL);
		reply(sock, c.stream, HPN_TTRPC_OK, NULL, &r.base);
	} else if (!strcmp(c.method, "CreateContainer")) {
		Nri__Pkg__Api__V1alpha1__CreateContainerResponse r =
			NRI__PKG__API__V1ALPHA1__CREATE_CONTAINER_RESPONSE__INIT;
		Nri__Pkg__Api__V1alpha1__ContainerAdjustment a =
			NRI__PKG__API__V1ALPHA1__CONTAINER_ADJUSTMENT__INIT;
		Nri__Pkg__Api__V1alpha1__ContainerAdjustment__AnnotationsEntry e =
			NRI__PKG__API__V1ALPHA1__CONTAINER_ADJUSTMENT__ANNOTATIONS_ENTRY__INIT;
		Nri__Pkg__Api__V1alpha1__ContainerAdjustment__AnnotationsEntry *ep = &e;
		char *v = NULL;

		if (pad) {
			v = malloc(pad + 1);
			if (!v)
				die("malloc", NULL);
			memset(v, 'x', pad);
			v[pad] = 0;
			e.key = "hpn.test/pad";
			e.value = v;
			a.n_annotations = 1;
			a.annotations = &ep;
			r.adjust = &a;
		}
		reply(sock, c.stream, HPN_TTRPC_OK, NULL, &r.base);
		free(v);
	} else if (!strcmp(c.method, "StateChange") || !strcmp(c.method, "Shutdown")) {
		reply(sock, c.stream, HPN_TTRPC_OK, NULL, &empty.base);
	} else {
		reply(sock, c.stream, HPN_TTRPC_UNIMPLEMENTED, "not subscribed", NULL);
	}
	hpn_ttrpc_call_free(&c);
}

static int dial(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		die(path, NULL);
	}
	strcpy(sa.sun_path, path);
	for (int i = 0; i < 200; i++) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die("socket", NULL);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		close(fd);
		usleep(50000);
	}
	die(path, NULL);
	return -1;
}

int main(int argc, char **argv)
{
	Nri__Pkg__Api__V1alpha1__RegisterPluginRequest reg =
		NRI__PKG__API__V1ALPHA1__REGISTER_PLUGIN_REQUEST__INIT;
	struct hpn_err err = { 0 };
	struct hpn_mux_rx rx;
	struct hpn_mux_dec frames;
	uint8_t payload[64], *msg, buf[65536];
	size_t len, mlen;
	int sock, seconds = 120, rc = 0;
	time_t end;

	if (argc < 3) {
		fprintf(stderr, "usage: nri-record SOCKET OUTDIR [--pad N] [--one-frame] "
				"[--seconds S]\n");
		return 2;
	}
	outdir = argv[2];
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--pad") && i + 1 < argc)
			pad = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--one-frame"))
			one_frame = true;
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atoi(argv[++i]);
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	fd_recv = open_out("recv.bin");
	fd_sent = open_out("sent.bin");
	sock = dial(argv[1]);
	end = time(NULL) + seconds;

	reg.plugin_name = "hpn-record";
	reg.plugin_idx = "50";
	len = nri__pkg__api__v1alpha1__register_plugin_request__pack(&reg, payload);
	if (hpn_ttrpc_request_pack(1, SVC_RUNTIME, "RegisterPlugin", payload, len, 0, &msg, &mlen,
				   &err) < 0)
		die("register", &err);
	send_msg(sock, HPN_MUX_CONN_RUNTIME, msg, mlen);

	hpn_mux_rx_init(&rx);
	hpn_mux_dec_init(&frames);
	while (!stop && time(NULL) < end) {
		struct pollfd p = { .fd = sock, .events = POLLIN };
		const uint8_t *d, *fdat;
		size_t flen;
		struct hpn_mux_chunk ch;
		struct hpn_ttrpc_msg m;
		uint32_t conn;
		ssize_t n;
		int r;

		if (poll(&p, 1, 200) <= 0)
			continue;
		n = read(sock, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		write_all(fd_recv, buf, (size_t)n);
		/* Frame by frame, for the record: where each frame starts. */
		fdat = buf;
		flen = (size_t)n;
		while ((r = hpn_mux_dec_feed(&frames, &fdat, &flen, &ch, &err)) > 0)
			if (frames.left + ch.len == frames.len)
				printf("frame conn=%u payload=%u bytes\n", ch.conn, frames.len);
		d = buf;
		len = (size_t)n;
		while ((r = hpn_mux_rx_feed(&rx, &d, &len, &conn, &m, &err)) > 0) {
			char tn[16];

			snprintf(tn, sizeof(tn), "%u", m.hdr.type);
			printf("message conn=%u stream=%u type=%s flags=%u data=%u bytes\n", conn,
			       m.hdr.stream, tn, m.hdr.flags, m.hdr.len);
			if (conn == HPN_MUX_CONN_PLUGIN) {
				serve(sock, &m);
			} else {
				struct hpn_ttrpc_reply rep;

				if (hpn_ttrpc_reply_unpack(&m, &rep, &err) < 0)
					die("reply", &err);
				printf("reply stream=%u code=%d \"%s\" payload=%zu bytes\n",
				       rep.stream, rep.code, rep.message, rep.payload_len);
				hpn_ttrpc_reply_free(&rep);
			}
		}
		if (r < 0)
			die("the runtime's bytes", &err);
		fflush(stdout);
	}
	if (hpn_mux_rx_end(&rx, &err) < 0) {
		printf("ended inside a message: %s\n", err.msg);
		rc = 1;
	}
	printf("end: %s; %d calls; %llu bytes for other connections dropped\n",
	       stop		   ? "signal"
	       : time(NULL) >= end ? "timeout"
				   : "the runtime closed the socket",
	       calls, (unsigned long long)rx.dropped_bytes);
	hpn_mux_rx_free(&rx);
	close(sock);
	close(fd_recv);
	close(fd_sent);
	return rc;
}
