// SPDX-License-Identifier: Apache-2.0
/*
 * The NRI link (nri.h): one unix-socket connection to the runtime, two
 * ttrpc connections multiplexed on it (agent/nri/mux.h): the runtime calls
 * our Plugin service on connection 1, we call its Runtime service on 2.
 * Registered with RegisterPlugin at connect; Configure subscribes to
 * CreateContainer and RemoveContainer; CreateContainer gets
 * agent/nri/adjust.c's answer. Synchronize finds the containers of attached
 * pods that started without their devices (the link was down): the bare
 * set, kept until each is removed (RemoveContainer comes as a StateChange)
 * or its pod's journal is gone, told to whoever watches it (the health
 * loop, through main.c). All on the loop: every call is answered in the
 * round its last byte arrives, far inside the runtime's 2 s.
 */
#include "nri.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "adjust.h"
#include "cdispecs.h"
#include "exposition.h"
#include "log.h"
#include "loop.h"
#include "mux.h"
#include "nccl.h"
#include "node.h"
#include "store.h"
#include "ttrpc.h"
#include "util.h"

#define SVC_PLUGIN	"nri.pkg.api.v1alpha1.Plugin"
#define SVC_RUNTIME	"nri.pkg.api.v1alpha1.Runtime"
#define EV(e)		(1 << (NRI__PKG__API__V1ALPHA1__EVENT__##e - 1))
#define BACKOFF_MIN_MS	500
#define BACKOFF_MAX_MS	10000
#define READ_CHUNK	65536
#define REGISTER_STREAM 1   /* our one call at connect, on connection 2 */
#define NRI_BARE_MAX	256 /* RDMA device names without a verbs node, for one warning */
#define BARE_KEPT	256 /* bare containers kept (more are logged, not kept) */
#define BARE_ID_MAX	129 /* a container or sandbox ID (containerd's: 64 hex digits) */

typedef Nri__Pkg__Api__V1alpha1__Container Container;
#define PB(x)	nri__pkg__api__v1alpha1__##x
#define INIT(X) NRI__PKG__API__V1ALPHA1__##X##__INIT

/* A container of an attached pod that runs without its RDMA device nodes. */
struct bare {
	char id[BARE_ID_MAX], sandbox[BARE_ID_MAX];
	char pod[320]; /* "ns/name" as the journal has it, or "" */
	char name[128];
};

/* Bare containers, at most BARE_KEPT; full: one more was found and not kept (said once). */
struct bare_set {
	struct bare *v;
	size_t n, cap;
	bool full;
};

struct nri {
	char *socket, *name, *index, *dev_root;
	struct loop *loop;
	struct node *node;
	struct loop_src conn, timer;
	struct hpn_mux_rx rx;
	uint8_t *out; /* bytes not yet written, from out_off */
	size_t out_len, out_off;
	bool connected, registered, down; /* down: said once until connected */
	int backoff_ms;
	bool sync_more; /* a Synchronize said more: its next part goes on */
	char runtime[64], version[64];
	/*
	 * bare: the last whole Synchronize's bare containers, less those
	 * removed since; sync: what a split Synchronize found so far, bare
	 * once its last part came (a reader never sees half of one).
	 */
	struct bare_set bare, sync;
	void (*bare_changed)(void *ud);
	void *bare_ud;
	struct {
		unsigned long connects, adjusted, untouched, errors, calls;
	} st;
};

static void drop(struct nri *n, const char *why);

static void schedule(struct nri *n)
{
	loop_timer_set(&n->timer, n->backoff_ms, 0);
	n->backoff_ms = n->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : n->backoff_ms * 2;
}

/* What is queued goes out as far as the socket takes it; the rest on LOOP_OUT. */
static void flush(struct nri *n)
{
	while (n->out_off < n->out_len) {
		ssize_t w = send(n->conn.fd, n->out + n->out_off, n->out_len - n->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			loop_watch(n->loop, &n->conn, LOOP_IN | LOOP_OUT);
			return;
		}
		if (w < 0) {
			char why[128];

			hpn_msgf(why, sizeof(why), "write: %s", strerror(errno));
			drop(n, why);
			return;
		}
		n->out_off += (size_t)w;
	}
	free(n->out);
	n->out = NULL;
	n->out_len = n->out_off = 0;
	loop_watch(n->loop, &n->conn, LOOP_IN);
}

/* One whole ttrpc message for connection conn, in frames of at most 4096 bytes (mux.h). */
static int send_msg(struct nri *n, uint32_t conn, uint8_t *msg, size_t len)
{
	struct hpn_err err = { 0 };
	uint8_t *frames, *out;
	size_t flen;
	int r;

	r = hpn_mux_frames(conn, msg, len, &frames, &flen, &err);
	free(msg);
	if (r < 0) {
		hpn_warn("NRI: %s", err.msg);
		return r;
	}
	out = realloc(n->out, n->out_len + flen);
	if (!out) {
		free(frames);
		return -ENOMEM;
	}
	memcpy(out + n->out_len, frames, flen);
	free(frames);
	n->out = out;
	n->out_len += flen;
	flush(n);
	return 0;
}

/* The answer to call stream: code, words, and a message (NULL: none). */
static void reply(struct nri *n, uint32_t stream, int code, const char *text,
		  const ProtobufCMessage *m)
{
	struct hpn_err err = { 0 };
	uint8_t *payload = NULL, *msg;
	size_t len = 0, mlen;

	if (m) {
		len = protobuf_c_message_get_packed_size(m);
		payload = malloc(len ? len : 1);
		if (!payload) {
			code = HPN_TTRPC_INTERNAL;
			text = "out of memory";
		} else {
			protobuf_c_message_pack(m, payload);
		}
	}
	if (hpn_ttrpc_response_pack(stream, code, text, payload, payload ? len : 0, &msg, &mlen,
				    &err) < 0) {
		free(payload);
		hpn_warn("NRI: %s", err.msg);
		n->st.errors++;
		return;
	}
	free(payload);
	send_msg(n, HPN_MUX_CONN_PLUGIN, msg, mlen);
}

static void reply_packed(struct nri *n, uint32_t stream, uint8_t *payload, size_t len)
{
	struct hpn_err err = { 0 };
	uint8_t *msg;
	size_t mlen;

	if (hpn_ttrpc_response_pack(stream, HPN_TTRPC_OK, NULL, payload, len, &msg, &mlen, &err) <
	    0) {
		hpn_warn("NRI: %s", err.msg);
		n->st.errors++;
		return;
	}
	send_msg(n, HPN_MUX_CONN_PLUGIN, msg, mlen);
}

/* ---- the bare containers ----------------------------------------------------------- */

static void bare_clear(struct bare_set *s)
{
	free(s->v);
	*s = (struct bare_set){ 0 };
}

/* 1 when container id was in s (now gone from it), else 0. */
static int bare_drop(struct bare_set *s, const char *id)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i].id, id)) {
			s->v[i] = s->v[--s->n];
			return 1;
		}
	return 0;
}

/* Container ct of the pod named pod ("ns/name" or ""), kept: 0, or -ENOSPC when s is full. */
static int bare_keep(struct bare_set *s, const Container *ct, const char *pod)
{
	struct bare *b;

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		struct bare *v;

		if (s->cap == BARE_KEPT)
			return -ENOSPC;
		cap = cap > BARE_KEPT ? BARE_KEPT : cap;
		v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	b = &s->v[s->n++];
	/* As the runtime names them (the caller checked their length): RemoveContainer matches. */
	snprintf(b->id, sizeof(b->id), "%s", ct->id);
	snprintf(b->sandbox, sizeof(b->sandbox), "%s", ct->pod_sandbox_id);
	snprintf(b->pod, sizeof(b->pod), "%s", pod);
	hpn_utf8_sanitize(b->name, ct->name ? ct->name : "?", sizeof(b->name));
	return 0;
}

static void bare_tell(struct nri *n)
{
	if (n->bare_changed)
		n->bare_changed(n->bare_ud);
}

/*
 * The bare containers whose pod has no attached journal now (DEL, GC, a
 * RemovePodSandbox that removed them unseen) are dropped: the set names
 * only pods hpn-rdma holds NICs for. Journals that cannot be read drop
 * nothing. 1 when some went.
 */
static int bare_prune(struct nri *n)
{
	const struct hpn_conf *conf = &n->node->conf;
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	char **keys = NULL;
	bool *held;
	size_t before = n->bare.n;
	int r;

	if (!n->bare.n)
		return 0;
	held = calloc(n->bare.n, sizeof(*held));
	if (!held)
		return 0;
	r = hpn_store_open_here(conf->state_dir, conf->name, &st, &err);
	if (r >= 0)
		r = hpn_store_keys(&st, &keys, &err);
	if (r < 0 && r != -ENOENT) {
		hpn_store_close(&st);
		free(held);
		return 0;
	}
	for (size_t k = 0; keys && keys[k]; k++) {
		struct hpn_journal j = { 0 };
		struct hpn_err jerr = { 0 };

		if (hpn_journal_read(&st, keys[k], &j, &jerr) < 0)
			continue;
		for (size_t i = 0; i < n->bare.n; i++)
			held[i] |= j.container_id &&
				   !strcmp(j.container_id, n->bare.v[i].sandbox) && !j.stale &&
				   !j.releasing && j.phase == HPN_PHASE_ATTACHED;
		hpn_journal_free(&j);
	}
	hpn_strv_free(keys);
	hpn_store_close(&st);
	/* From the end: the last entry moves into the place one frees. */
	for (size_t i = n->bare.n; i-- > 0;)
		if (!held[i]) {
			hpn_info("NRI: container %s (%.12s) of pod %s is no longer counted bare: "
				 "its pod's attachment is gone",
				 n->bare.v[i].name, n->bare.v[i].id,
				 n->bare.v[i].pod[0] ? n->bare.v[i].pod : "?");
			n->bare.v[i] = n->bare.v[--n->bare.n];
		}
	free(held);
	return n->bare.n != before;
}

/* ---- what an attached pod's containers get ------------------------------------- */

static void add_dev(struct nri_want *w, const struct hpn_cdi_node *nd)
{
	for (size_t i = 0; i < w->n_devs; i++)
		if (w->devs[i].major == nd->major && w->devs[i].minor == nd->minor)
			return;
	if (w->n_devs == NRI_DEVS_MAX)
		return;
	snprintf(w->devs[w->n_devs].path, sizeof(w->devs[0].path), "/dev/infiniband/%s", nd->name);
	w->devs[w->n_devs].major = nd->major;
	w->devs[w->n_devs].minor = nd->minor;
	w->n_devs++;
}

/* Names in bare, comma-separated, as far as they fit. */
static void bare_add(char bare[NRI_BARE_MAX], const char *name)
{
	size_t l = strlen(bare);

	snprintf(bare + l, NRI_BARE_MAX - l, "%s%s", l ? ", " : "", name);
}

/*
 * What the containers of sandbox id get: 1 when hpn-rdma attached it (a
 * journal of this network holds the sandbox, attached), 0 when not, -errno
 * when the journals cannot be read (err says why). bare gets the RDMA
 * devices the journals name whose verbs node the host does not show (so the
 * containers get none of theirs), for the caller to say.
 */
static int want_for(struct nri *n, const char *id, struct nri_want *w, char pod[320],
		    char bare[NRI_BARE_MAX], struct hpn_err *err)
{
	const struct hpn_conf *conf = &n->node->conf;
	struct hpn_store st = HPN_STORE_INIT;
	char **keys = NULL;
	size_t idlen = strlen(id);
	bool attached = false, uverbs = false;
	int r;

	memset(w, 0, sizeof(*w));
	pod[0] = '\0';
	bare[0] = '\0';
	r = hpn_store_open_here(conf->state_dir, conf->name, &st, err);
	if (r >= 0)
		r = hpn_store_keys(&st, &keys, err);
	if (r < 0) {
		hpn_store_close(&st);
		return r == -ENOENT ? 0 : r;
	}
	for (size_t k = 0; keys[k]; k++) {
		struct hpn_journal j = { 0 };
		struct hpn_err jerr = { 0 };

		/* A key begins with its container ID (hpn_store_key: the first 150 bytes). */
		if (strncmp(keys[k], id, idlen < 150 ? idlen : 150) ||
		    hpn_journal_read(&st, keys[k], &j, &jerr) < 0)
			continue;
		if (!j.container_id || strcmp(j.container_id, id) || j.stale || j.releasing ||
		    j.phase != HPN_PHASE_ATTACHED) {
			hpn_journal_free(&j);
			continue;
		}
		attached = true;
		if (j.pod.name[0])
			snprintf(pod, 320, "%s/%s", j.pod.namespace, j.pod.name);
		for (size_t i = 0; i < j.n_nics; i++) {
			struct hpn_cdi_dev cd = { 0 };

			if (!j.nics[i].rdma.name[0])
				continue;
			if (cdispecs_nic_nodes(conf->sysfs_root, n->dev_root, j.nics[i].rdma.name,
					       &cd))
				uverbs = true;
			else
				bare_add(bare, j.nics[i].rdma.name);
			for (size_t d = 0; d < cd.n_nodes; d++)
				add_dev(w, &cd.nodes[d]);
		}
		if (j.hints_key[0] && j.hints_dir && !w->hints[0]) {
			hpn_msgf(w->hints, sizeof(w->hints), "%s/%s/nccl.conf", j.hints_dir,
				 j.hints_key);
			snprintf(w->hints_at, sizeof(w->hints_at), "%s",
				 conf->nccl.conf_file ? conf->nccl.conf_file
						      : HPN_DEFAULT_NCCL_CONF_FILE);
		}
		hpn_journal_free(&j);
	}
	if (uverbs) {
		struct hpn_cdi_dev cd = { 0 };

		cdispecs_cm_node(conf->sysfs_root, n->dev_root, &cd);
		for (size_t d = 0; d < cd.n_nodes; d++)
			add_dev(w, &cd.nodes[d]);
	}
	w->memlock = attached ? conf->nri.memlock : 0;
	hpn_strv_free(keys);
	hpn_store_close(&st);
	return attached;
}

/* ---- the Plugin service ------------------------------------------------------------ */

static void configure(struct nri *n, const struct hpn_ttrpc_call *c)
{
	Nri__Pkg__Api__V1alpha1__ConfigureRequest *q;
	Nri__Pkg__Api__V1alpha1__ConfigureResponse r = INIT(CONFIGURE_RESPONSE);

	q = PB(configure_request__unpack)(NULL, c->payload_len, c->payload);
	if (!q) {
		reply(n, c->stream, HPN_TTRPC_INVALID_ARGUMENT, "not a ConfigureRequest", NULL);
		return;
	}
	hpn_utf8_sanitize(n->runtime, q->runtime_name, sizeof(n->runtime));
	hpn_utf8_sanitize(n->version, q->runtime_version, sizeof(n->version));
	hpn_info("NRI: configured by %s %s (request timeout %lld ms)", n->runtime, n->version,
		 (long long)q->request_timeout);
	PB(configure_request__free_unpacked)(q, NULL);
	/*
	 * CreateContainer, and RemoveContainer (a StateChange) for the bare set:
	 * Synchronize comes anyway, nothing else is ours.
	 */
	/* cppcheck-suppress unreadVariable ; packed by reply, through &r.base */
	r.events = EV(CREATE_CONTAINER) | EV(REMOVE_CONTAINER);
	reply(n, c->stream, HPN_TTRPC_OK, NULL, &r.base);
}

/*
 * The containers already there: those of attached pods without their
 * devices, told and kept in the bare set, which the last part of the
 * request replaces. A stopped container is not bare: nothing of it runs.
 */
static void synchronize(struct nri *n, const struct hpn_ttrpc_call *c)
{
	Nri__Pkg__Api__V1alpha1__SynchronizeRequest *q;
	Nri__Pkg__Api__V1alpha1__SynchronizeResponse r = INIT(SYNCHRONIZE_RESPONSE);

	q = PB(synchronize_request__unpack)(NULL, c->payload_len, c->payload);
	if (!q) {
		reply(n, c->stream, HPN_TTRPC_INVALID_ARGUMENT, "not a SynchronizeRequest", NULL);
		return;
	}
	if (!n->sync_more)
		bare_clear(&n->sync);
	for (size_t i = 0; i < q->n_containers; i++) {
		const Container *ct = q->containers[i];
		struct hpn_err err = { 0 };
		struct nri_want w;
		char pod[320], bare[NRI_BARE_MAX];
		size_t missing = 0;

		if (!ct->pod_sandbox_id || !ct->id ||
		    ct->state == NRI__PKG__API__V1ALPHA1__CONTAINER_STATE__CONTAINER_STOPPED ||
		    want_for(n, ct->pod_sandbox_id, &w, pod, bare, &err) <= 0)
			continue;
		for (size_t d = 0; d < w.n_devs; d++)
			missing += !nri_has_device(ct, w.devs[d].path);
		if (!missing)
			continue;
		hpn_warn("NRI: container %s (%.12s) of attached pod %s runs without %zu of its %zu "
			 "RDMA device nodes: it started while the NRI link was down; restart it",
			 ct->name ? ct->name : "?", ct->id, pod[0] ? pod : "?", missing, w.n_devs);
		if (strlen(ct->id) < BARE_ID_MAX && strlen(ct->pod_sandbox_id) < BARE_ID_MAX &&
		    bare_keep(&n->sync, ct, pod) == 0)
			continue;
		if (!n->sync.full)
			hpn_warn("NRI: container %.12s, and any more bare ones like it, is logged "
				 "but not counted (at most %d are kept, with IDs under %d bytes)",
				 ct->id, BARE_KEPT, BARE_ID_MAX);
		n->sync.full = true;
	}
	n->sync_more = q->more;
	if (!q->more) {
		/* The whole of the runtime's state came: its bare containers are the set. */
		bare_clear(&n->bare);
		n->bare = n->sync;
		n->sync = (struct bare_set){ 0 };
		bare_tell(n);
	}
	/* cppcheck-suppress unreadVariable ; packed by reply, through &r.base */
	r.more = q->more;
	PB(synchronize_request__free_unpacked)(q, NULL);
	reply(n, c->stream, HPN_TTRPC_OK, NULL, &r.base);
}

static void create_container(struct nri *n, const struct hpn_ttrpc_call *c)
{
	Nri__Pkg__Api__V1alpha1__CreateContainerRequest *q;
	struct hpn_err err = { 0 };
	struct nri_given g;
	struct nri_want w;
	uint8_t *buf;
	size_t len;
	char pod[320], bare[NRI_BARE_MAX];
	int r;

	q = PB(create_container_request__unpack)(NULL, c->payload_len, c->payload);
	if (!q || !q->pod || !q->container || !q->pod->id) {
		if (q)
			PB(create_container_request__free_unpacked)(q, NULL);
		n->st.errors++;
		reply(n, c->stream, HPN_TTRPC_INVALID_ARGUMENT, "not a CreateContainerRequest",
		      NULL);
		return;
	}
	r = want_for(n, q->pod->id, &w, pod, bare, &err);
	if (r < 0) {
		/* A pod we cannot tell: refused, never started without its devices unnoticed. */
		n->st.errors++;
		hpn_warn("NRI: CreateContainer %s of sandbox %.12s: %s", q->container->name,
			 q->pod->id, err.msg[0] ? err.msg : strerror(-r));
		reply(n, c->stream, HPN_TTRPC_UNAVAILABLE, err.msg[0] ? err.msg : strerror(-r),
		      NULL);
		PB(create_container_request__free_unpacked)(q, NULL);
		return;
	}
	if (r == 0) {
		memset(&w, 0, sizeof(w)); /* not ours: nothing */
		n->st.untouched++;
	}
	if (nri_adjust(&w, q->container, &buf, &len, &g) < 0) {
		n->st.errors++;
		reply(n, c->stream, HPN_TTRPC_INTERNAL, "out of memory", NULL);
		PB(create_container_request__free_unpacked)(q, NULL);
		return;
	}
	if (r > 0) {
		n->st.adjusted++;
		/* Not a silent "0 added": the pod was attached with these devices. */
		if (bare[0])
			hpn_warn("NRI: container %s of pod %s gets no character device of RDMA "
				 "device %s: the host shows no verbs node of it under "
				 "%s/class/infiniband_verbs (exclusive RDMA netns mode keeps it in "
				 "the pod's netns; or ib_uverbs is not loaded)",
				 q->container->name, pod[0] ? pod : q->pod->name, bare,
				 n->node->conf.sysfs_root);
		hpn_info("NRI: container %s of pod %s: %zu device nodes added (%zu there "
			 "already), hints %s, RLIMIT_MEMLOCK %s",
			 q->container->name, pod[0] ? pod : q->pod->name, g.devs, g.devs_had,
			 g.hints       ? w.hints_at
			 : g.hints_had ? "(mounted there already)"
				       : "(none)",
			 g.memlock	 ? "raised"
			 : g.memlock_had ? "(higher already)"
					 : "(left)");
	}
	reply_packed(n, c->stream, buf, len);
	free(buf);
	PB(create_container_request__free_unpacked)(q, NULL);
}

/*
 * A pod or container event without an answer of its own: Empty at once (the
 * runtime waits for it), whatever the event. RemoveContainer takes the
 * container out of the bare set.
 */
static void state_change(struct nri *n, const struct hpn_ttrpc_call *c)
{
	Nri__Pkg__Api__V1alpha1__StateChangeEvent *q;
	Nri__Pkg__Api__V1alpha1__Empty empty = INIT(EMPTY);
	const Container *ct;

	q = PB(state_change_event__unpack)(NULL, c->payload_len, c->payload);
	if (!q) {
		n->st.errors++;
		reply(n, c->stream, HPN_TTRPC_INVALID_ARGUMENT, "not a StateChangeEvent", NULL);
		return;
	}
	reply(n, c->stream, HPN_TTRPC_OK, NULL, &empty.base);
	ct = q->container;
	if (q->event == NRI__PKG__API__V1ALPHA1__EVENT__REMOVE_CONTAINER && ct && ct->id) {
		char name[128];

		hpn_utf8_sanitize(name, ct->name ? ct->name : "?", sizeof(name));
		bare_drop(&n->sync, ct->id);
		if (bare_drop(&n->bare, ct->id)) {
			hpn_info("NRI: container %s (%.12s), which ran without its RDMA device "
				 "nodes, is removed",
				 name, ct->id);
			bare_tell(n);
		}
	}
	PB(state_change_event__free_unpacked)(q, NULL);
}

static void serve(struct nri *n, const struct hpn_ttrpc_msg *m)
{
	Nri__Pkg__Api__V1alpha1__Empty empty = INIT(EMPTY);
	struct hpn_err err = { 0 };
	struct hpn_ttrpc_call c;

	if (hpn_ttrpc_call_unpack(m, &c, &err) < 0) {
		n->st.errors++;
		hpn_warn("NRI: %s", err.msg);
		reply(n, m->hdr.stream, HPN_TTRPC_INVALID_ARGUMENT, err.msg, NULL);
		return;
	}
	n->st.calls++;
	if (strcmp(c.service, SVC_PLUGIN) != 0) {
		reply(n, c.stream, HPN_TTRPC_UNIMPLEMENTED, "no such service", NULL);
	} else if (!strcmp(c.method, "Configure")) {
		configure(n, &c);
	} else if (!strcmp(c.method, "Synchronize")) {
		synchronize(n, &c);
	} else if (!strcmp(c.method, "CreateContainer")) {
		create_container(n, &c);
	} else if (!strcmp(c.method, "StateChange")) {
		state_change(n, &c);
	} else if (!strcmp(c.method, "Shutdown")) {
		reply(n, c.stream, HPN_TTRPC_OK, NULL, &empty.base);
		hpn_info("NRI: %s shuts down", n->runtime[0] ? n->runtime : "the runtime");
	} else {
		reply(n, c.stream, HPN_TTRPC_UNIMPLEMENTED, "not subscribed", NULL);
	}
	hpn_ttrpc_call_free(&c);
}

/* The runtime's answer to RegisterPlugin (connection 2). */
static void registered(struct nri *n, const struct hpn_ttrpc_msg *m)
{
	struct hpn_err err = { 0 };
	struct hpn_ttrpc_reply rep;

	if (hpn_ttrpc_reply_unpack(m, &rep, &err) < 0) {
		drop(n, err.msg);
		return;
	}
	if (rep.stream != REGISTER_STREAM || rep.code != HPN_TTRPC_OK) {
		char why[HPN_ERR_MSG + 64];

		hpn_msgf(why, sizeof(why), "RegisterPlugin refused (code %d): %s", rep.code,
			 rep.message);
		hpn_ttrpc_reply_free(&rep);
		n->st.errors++;
		drop(n, why);
		return;
	}
	hpn_ttrpc_reply_free(&rep);
	n->registered = true;
	n->backoff_ms = BACKOFF_MIN_MS;
	hpn_info("NRI: registered as %s (index %s) on %s", n->name, n->index, n->socket);
}

/* ---- the link ---------------------------------------------------------------------- */

static void drop(struct nri *n, const char *why)
{
	if (n->connected)
		hpn_warn("NRI: link to %s closed: %s; connecting again in %d ms", n->socket, why,
			 n->backoff_ms);
	loop_close(&n->conn);
	hpn_mux_rx_free(&n->rx);
	free(n->out);
	n->out = NULL;
	n->out_len = n->out_off = 0;
	n->connected = n->registered = n->sync_more = false;
	/* Half a Synchronize: the next link's comes whole; the bare set stays as it was. */
	bare_clear(&n->sync);
	schedule(n);
}

static void on_io(struct loop_src *s)
{
	struct nri *n = s->ud;
	uint8_t buf[READ_CHUNK];

	if (s->revents & LOOP_OUT)
		flush(n);
	while (n->connected && (s->revents & LOOP_IN)) {
		struct hpn_err err = { 0 };
		const uint8_t *d = buf;
		ssize_t got = recv(n->conn.fd, buf, sizeof(buf), MSG_DONTWAIT);
		size_t left;
		int r;

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (got <= 0) {
			drop(n, got < 0 ? strerror(errno) : "the runtime closed it");
			return;
		}
		left = (size_t)got;
		for (;;) {
			struct hpn_ttrpc_msg m;
			uint32_t conn;

			r = hpn_mux_rx_feed(&n->rx, &d, &left, &conn, &m, &err);
			if (r <= 0)
				break;
			if (conn == HPN_MUX_CONN_PLUGIN)
				serve(n, &m);
			else if (conn == HPN_MUX_CONN_RUNTIME)
				registered(n, &m);
			if (!n->connected)
				return; /* dropped meanwhile: rx is gone */
		}
		if (r < 0) {
			n->st.errors++;
			drop(n, err.msg);
			return;
		}
	}
}

static int register_plugin(struct nri *n)
{
	Nri__Pkg__Api__V1alpha1__RegisterPluginRequest reg = INIT(REGISTER_PLUGIN_REQUEST);
	struct hpn_err err = { 0 };
	uint8_t *payload, *msg;
	size_t len, mlen;
	int r;

	reg.plugin_name = n->name;
	reg.plugin_idx = n->index;
	len = PB(register_plugin_request__get_packed_size)(&reg);
	payload = malloc(len ? len : 1);
	if (!payload)
		return -ENOMEM;
	PB(register_plugin_request__pack)(&reg, payload);
	r = hpn_ttrpc_request_pack(REGISTER_STREAM, SVC_RUNTIME, "RegisterPlugin", payload, len, 0,
				   &msg, &mlen, &err);
	free(payload);
	if (r < 0)
		return r;
	return send_msg(n, HPN_MUX_CONN_RUNTIME, msg, mlen);
}

static void dial(struct loop_src *s)
{
	struct nri *n = s->ud;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, r;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", n->socket);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		/* Said once until it connects: a runtime without NRI, or not up yet. */
		if (!n->down)
			hpn_warn("NRI: cannot connect to %s: %s; trying again (said once until "
				 "it connects)",
				 n->socket, strerror(e));
		n->down = true;
		schedule(n);
		return;
	}
	r = loop_add(n->loop, &n->conn, fd, on_io, n);
	if (r < 0) {
		schedule(n);
		return;
	}
	hpn_mux_rx_init(&n->rx);
	n->connected = true;
	n->down = false;
	n->st.connects++;
	hpn_info("NRI: connected to %s", n->socket);
	r = register_plugin(n);
	if (r < 0 && n->connected)
		drop(n, strerror(-r));
}

int nri_start(struct loop *l, struct node *node, const struct nri_opts *o, struct nri **ret)
{
	struct nri *n = calloc(1, sizeof(*n));
	int r;

	if (!n)
		return -ENOMEM;
	n->loop = l;
	n->node = node;
	n->conn.fd = n->timer.fd = -1;
	n->backoff_ms = BACKOFF_MIN_MS;
	n->socket = strdup(o->socket);
	n->name = strdup(o->name);
	n->index = strdup(o->index);
	n->dev_root = strdup(o->dev_root);
	if (!n->socket || !n->name || !n->index || !n->dev_root) {
		nri_free(n);
		return -ENOMEM;
	}
	r = loop_timer(l, &n->timer, 0, 0, dial, n);
	if (r < 0) {
		nri_free(n);
		return r;
	}
	*ret = n;
	return 0;
}

void nri_free(struct nri *n)
{
	if (!n)
		return;
	loop_close(&n->conn);
	loop_close(&n->timer);
	if (n->connected)
		hpn_mux_rx_free(&n->rx);
	free(n->out);
	bare_clear(&n->bare);
	bare_clear(&n->sync);
	free(n->socket);
	free(n->name);
	free(n->index);
	free(n->dev_root);
	free(n);
}

bool nri_registered(const struct nri *n)
{
	return n && n->registered;
}

void nri_runtime(const struct nri *n, const char **ret_name, const char **ret_version)
{
	*ret_name = n ? n->runtime : "";
	*ret_version = n ? n->version : "";
}

void nri_metrics(struct sbuf *b, void *ud)
{
	struct nri *n = ud;

	if (bare_prune(n))
		bare_tell(n);

	expo_gauge(b, "hpn_rdma_nri_registered",
		   "1 while the agent is registered with the runtime's NRI.", n->registered);
	expo_counter(b, "hpn_rdma_nri_connects_total", "Connections made to the NRI socket.",
		     n->st.connects);
	expo_counter(b, "hpn_rdma_nri_calls_total", "Calls the runtime made over NRI.",
		     n->st.calls);
	expo_counter(b, "hpn_rdma_nri_containers_adjusted_total",
		     "Containers of pods hpn-rdma attached, given their devices, hints and "
		     "memlock at CreateContainer.",
		     n->st.adjusted);
	expo_counter(b, "hpn_rdma_nri_containers_untouched_total",
		     "Containers of other pods, left as they were.", n->st.untouched);
	expo_counter(b, "hpn_rdma_nri_errors_total",
		     "NRI calls refused or failed, and links dropped for bad bytes.", n->st.errors);
	expo_gauge(b, "hpn_rdma_nri_unadjusted_containers",
		   "Containers of attached pods Synchronize found running without their RDMA "
		   "device nodes (started while the link was down), until each is removed.",
		   (double)n->bare.n);
}

int nri_bare_of(const struct nri *n, const char *sandbox, char *msg, size_t len)
{
	const struct bare *first = NULL;
	int count = 0;

	for (size_t i = 0; n && i < n->bare.n; i++)
		if (!strcmp(n->bare.v[i].sandbox, sandbox) && !count++)
			first = &n->bare.v[i];
	if (!first)
		return 0;
	if (count == 1)
		hpn_msgf(msg, len,
			 "container %s (%.12s) started without its RDMA device nodes while the NRI "
			 "link was down: restart it",
			 first->name, first->id);
	else
		hpn_msgf(msg, len,
			 "container %s (%.12s) and %d more started without their RDMA device nodes "
			 "while the NRI link was down: restart them",
			 first->name, first->id, count - 1);
	return count;
}

void nri_watch_bare(struct nri *n, void (*changed)(void *ud), void *ud)
{
	n->bare_changed = changed;
	n->bare_ud = ud;
}
