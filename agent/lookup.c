// SPDX-License-Identifier: Apache-2.0
/*
 * The CNI's question, on the agent's own unix socket (doc/agent.md, "The
 * lookup protocol"): which devices of our resource does pod ns/name hold,
 * and which GPUs?
 * One JSON request line in, one JSON reply out, then the agent closes. The
 * reply is written as the socket takes it, never blocking the loop: a reader
 * that leaves it untaken is closed by the sweep at its deadline. A pod
 * (by its UID) that prepared DRA claims of our driver reserve is answered
 * their NICs ("source": "dra"); else the answer comes from the kubelet's
 * PodResources List, asked per request: the kubelet's word, never a cache of
 * it. The GPUs come from PodResources either way, the scheduler's claim for
 * the pod's extended resources named by its status in the pod cache. Two
 * more questions: the pod ("query": "pod", from the pod cache) and the NRI
 * link ("query": "nri", from what main.c gives: whether the agent is
 * registered with the runtime now), both answered at once from memory. Root only: the socket is 0600 and
 * the peer's credentials are checked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "lookup.h"
#include "loop.h"
#include "podask.h"
#include "podresources.h"
#include "podwatch.h"
#include "util.h"

#define CONN_DEADLINE_MS 2000 /* to send the request line, then to take the reply */
#define LIST_TIMEOUT_MS	 400  /* PodResources List: within the CNI's default 500 ms */
#define MAX_CONNS	 32
#define SWEEP_MS	 500

struct lookup_conn {
	struct lookup *lk;
	struct loop_src src;
	size_t slot;
	long long deadline;
	bool asked; /* PodResources in flight: the conn waits for its answer */
	char *out;  /* the reply, being written (NULL: none yet) */
	size_t out_len, out_off;
	size_t len;
	char buf[HPN_ALLOC_REQ_MAX + 1];
	struct hpn_alloc_req req;
	struct hpn_alloc *dra; /* the pod's DRA claims' NICs (NULL: none) */
};

struct lookup {
	struct loop *loop;
	struct podres *pr;
	/* The DRA driver's claims' NICs for a pod (NULL: the driver is off). */
	struct hpn_alloc *(*pod_nics)(void *ud, const struct hpn_alloc_req *req, char *why,
				      size_t len);
	void *pod_nics_ud;
	/* The pod's ADD done: its DRA claims' networkData written (NULL: the driver is off). */
	int (*attached)(void *ud, const char *uid);
	void *attached_ud;
	struct podwatch *pw; /* the pod question's cache, or NULL */
	/* The NRI link's state now (NULL: the agent runs without --nri). */
	void (*nri_state)(void *ud, struct hpn_nri_state *ret);
	void *nri_state_ud;
	char *path;
	struct loop_src listen, sweep;
	struct lookup_conn *conns[MAX_CONNS];
};

static void on_accept(struct loop_src *s);

static int listen_on(struct lookup *lk)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	char dir[PATH_MAX];
	char *slash;

	if (hpn_snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", lk->path) < 0)
		return -ENAMETOOLONG;
	/* Its directory is ours (/run/hpn-rdma): root only. */
	snprintf(dir, sizeof(dir), "%s", lk->path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (hpn_mkdir_p(dir, 0700) < 0)
			return -errno;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* A socket file left by a killed agent: nothing listens on it. */
	if (unlink(lk->path) < 0 && errno != ENOENT)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	if (chmod(lk->path, 0600) < 0 || listen(fd, 64) < 0)
		return -errno;
	hpn_info("CNI lookups on %s", lk->path);
	/* cppcheck-suppress unreadVariable ; TAKE_FD clears fd for its cleanup handler */
	return loop_add(lk->loop, &lk->listen, TAKE_FD(fd), on_accept, lk);
}

static void conn_free(struct lookup_conn *c)
{
	loop_close(&c->src);
	c->lk->conns[c->slot] = NULL;
	free(c->out);
	free(c->dra);
	free(c);
}

/*
 * Writes what the socket takes of the reply; c is freed (and true returned)
 * once all went, or when the peer is gone.
 */
static bool flush(struct lookup_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->src.fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return false; /* the rest when the socket is writable (on_io) */
		if (n <= 0) {
			hpn_warn("CNI lookup: the reply was not taken (%zu of %zu bytes): %s",
				 c->out_off, c->out_len, n < 0 ? strerror(errno) : "closed");
			break;
		}
		c->out_off += (size_t)n;
	}
	conn_free(c);
	return true;
}

/*
 * Sends json (taken; NULL: nothing) and ends c: what the socket does not take
 * at once waits for it to be writable, until the sweep's deadline. The loop
 * never waits for a reader (32 that stop reading would stall every service).
 */
static void reply(struct lookup_conn *c, char *json)
{
	int r;

	if (c->src.fd < 0 || !json) {
		free(json);
		conn_free(c);
		return;
	}
	c->out = json;
	c->out_len = strlen(json);
	c->out_off = 0;
	c->deadline = hpn_mono_ms() + CONN_DEADLINE_MS;
	if (flush(c))
		return;
	r = loop_watch(c->lk->loop, &c->src, LOOP_OUT);
	if (r < 0) {
		hpn_warn("CNI lookup: cannot wait to send the reply: %s", strerror(-r));
		conn_free(c);
		return;
	}
	loop_timer_set(&c->lk->sweep, SWEEP_MS, SWEEP_MS);
}

static void refuse(struct lookup_conn *c, const char *why)
{
	char *json = hpn_alloc_reply_render(NULL, why);

	hpn_warn("CNI lookup refused: %s", why);
	reply(c, json);
}

/* The DRA claims' NICs, with the GPUs PodResources gave (none when it failed). */
static void answered_dra(struct lookup_conn *c, const struct hpn_alloc *al, const char *error)
{
	struct hpn_alloc *d = c->dra;
	char *json;

	if (error) {
		hpn_warn("CNI lookup for pod %s/%s: %s; answering its DRA claims' NICs, no GPUs",
			 c->req.namespace, c->req.name, error);
	} else {
		memcpy(d->gpus, al->gpus, sizeof(d->gpus));
		d->n_gpus = al->n_gpus;
	}
	json = hpn_alloc_reply_render(d, NULL);
	hpn_info("CNI lookup for pod %s/%s: %zu NICs of DRA claim %s%s, %zu GPUs", c->req.namespace,
		 c->req.name, d->n, d->claims[0], d->n_claims > 1 ? " and more" : "", d->n_gpus);
	reply(c, json);
}

static void answered(void *ud, const struct hpn_alloc *al, const char *error)
{
	struct lookup_conn *c = ud;
	char *json;

	if (c->dra) {
		answered_dra(c, al, error);
		return;
	}
	json = hpn_alloc_reply_render(al, error);

	if (error)
		hpn_warn("CNI lookup for pod %s/%s: %s", c->req.namespace, c->req.name, error);
	else
		hpn_info("CNI lookup for pod %s/%s: %zu %s devices, %zu GPUs%s", c->req.namespace,
			 c->req.name, al->n, al->resource, al->n_gpus,
			 al->pod_known ? "" : " (pod not listed)");
	reply(c, json);
}

/* The NRI question: the link's state as main.c's nri_state says it now. */
static void answer_nri(struct lookup_conn *c)
{
	const struct lookup *lk = c->lk;
	struct hpn_nri_state st = { 0 };
	char pod[sizeof(c->req.namespace) + sizeof(c->req.name) + 16] = "";

	if (lk->nri_state)
		lk->nri_state(lk->nri_state_ud, &st);
	else
		snprintf(st.why, sizeof(st.why), "no NRI link: the agent runs without --nri");
	if (c->req.namespace[0])
		snprintf(pod, sizeof(pod), " (pod %s/%s)", c->req.namespace, c->req.name);
	if (st.registered)
		hpn_info("CNI NRI question%s: registered with %s %s", pod,
			 st.runtime[0] ? st.runtime : "the runtime", st.version);
	else
		hpn_warn("CNI NRI question%s: not registered (%s): an ADD with nri.required fails",
			 pod, st.why);
	reply(c, hpn_nri_reply_render(&st, NULL));
}

static void on_io(struct loop_src *s);

static void on_accept(struct loop_src *s)
{
	struct lookup *lk = s->ud;

	for (;;) {
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		int fd = accept4(lk->listen.fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct lookup_conn *c;
		size_t slot;

		if (fd < 0)
			return;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 ||
		    (cred.uid != 0 && cred.uid != geteuid())) {
			hpn_warn("CNI lookup from uid %u refused: root only", (unsigned)cred.uid);
			close(fd);
			continue;
		}
		for (slot = 0; slot < MAX_CONNS && lk->conns[slot]; slot++)
			;
		c = slot < MAX_CONNS ? calloc(1, sizeof(*c)) : NULL;
		if (!c) {
			hpn_warn("CNI lookup dropped: %d connections open", MAX_CONNS);
			close(fd);
			continue;
		}
		c->lk = lk;
		c->slot = slot;
		c->deadline = hpn_mono_ms() + CONN_DEADLINE_MS;
		lk->conns[slot] = c;
		if (loop_add(lk->loop, &c->src, fd, on_io, c) < 0)
			conn_free(c);
		loop_timer_set(&lk->sweep, SWEEP_MS, SWEEP_MS);
	}
}

static void on_io(struct loop_src *s)
{
	struct lookup_conn *c = s->ud;
	struct hpn_err err = { 0 };
	struct podres_xclaim xc;
	bool have_xc;
	char *nl;

	if (c->out) {
		flush(c); /* writable, or the peer gone */
		return;
	}
	if (c->asked || c->src.fd < 0)
		return;
	for (;;) {
		ssize_t n = recv(c->src.fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len, 0);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return; /* more later */
		if (n <= 0) {
			if (c->len == 0) {
				conn_free(c);
				return;
			}
			break; /* EOF ends the request too */
		}
		c->len += (size_t)n;
		c->buf[c->len] = '\0';
		if (memchr(c->buf, '\n', c->len))
			break;
		if (c->len == sizeof(c->buf) - 1) {
			refuse(c, "request over 4096 bytes");
			return;
		}
	}
	c->buf[c->len] = '\0';
	nl = memchr(c->buf, '\n', c->len);
	if (nl)
		*nl = '\0';
	if (hpn_alloc_req_parse(c->buf, strlen(c->buf), &c->req, &err) < 0) {
		refuse(c, err.msg);
		return;
	}
	if (c->req.query == HPN_ALLOC_QUERY_NRI) {
		answer_nri(c);
		return;
	}
	if (c->req.query == HPN_ALLOC_QUERY_ATTACHED) {
		int w = c->lk->attached && c->req.uid[0]
				? c->lk->attached(c->lk->attached_ud, c->req.uid)
				: 0;
		char *json = malloc(64);

		if (w < 0) {
			free(json);
			refuse(c, "the pod's DRA claims' device metadata could not be written");
			return;
		}
		if (json)
			snprintf(json, 64, "{\"version\":%d,\"written\":%d}",
				 HPN_ALLOC_PROTO_VERSION, w);
		reply(c, json);
		return;
	}
	if (c->req.query == HPN_ALLOC_QUERY_POD) {
		char *json = c->lk->pw ? podwatch_answer(c->lk->pw, &c->req)
				       : hpn_podask_reply_render(NULL, "no pod cache: the agent "
								       "runs without --kubeconfig");

		reply(c, json);
		return;
	}
	if (c->lk->pod_nics && c->req.uid[0]) {
		char why[512] = "";

		c->dra = c->lk->pod_nics(c->lk->pod_nics_ud, &c->req, why, sizeof(why));
		/* A share for a plugin that would move the NIC: no answer it could attach. */
		if (!c->dra && why[0]) {
			char msg[sizeof(why) + 320];

			if (hpn_snprintf(msg, sizeof(msg), "pod %s/%s: %s", c->req.namespace,
					 c->req.name, why) < 0)
				msg[sizeof(msg) - 1] = '\0';
			refuse(c, msg);
			return;
		}
	}
	/* No more input is read from it; the reply goes out when the kubelet answers. */
	loop_mute(c->lk->loop, &c->src);
	c->asked = true;
	/* The scheduler's claim for the pod's extended resources, from its status (the cache). */
	have_xc = podwatch_xclaim(c->lk->pw, &c->req, xc.name, sizeof(xc.name), xc.resources,
				  sizeof(xc.resources));
	if (podres_pod_devices(c->lk->pr, &c->req, have_xc ? &xc : NULL, LIST_TIMEOUT_MS, answered,
			       c) < 0)
		refuse(c, "out of memory");
}

/*
 * Closes connections past their deadline, for the request or for taking the
 * reply; the timer stops when none is left.
 */
static void on_sweep(struct loop_src *s)
{
	struct lookup *lk = s->ud;
	long long now = hpn_mono_ms();
	bool any = false;

	for (size_t i = 0; i < MAX_CONNS; i++) {
		struct lookup_conn *c = lk->conns[i];

		if (!c)
			continue;
		if (c->out && now > c->deadline) {
			hpn_warn("CNI lookup: the reply was not taken within %d ms (%zu of %zu "
				 "bytes); closed",
				 CONN_DEADLINE_MS, c->out_off, c->out_len);
			conn_free(c);
			continue;
		}
		if (!c->asked && !c->out && now > c->deadline) {
			hpn_warn("CNI lookup: no request within %d ms; closed", CONN_DEADLINE_MS);
			conn_free(c);
			continue;
		}
		any = true;
	}
	if (!any)
		loop_timer_set(s, LOOP_OFF, 0);
}

int lookup_start(struct loop *l, struct podres *pr, const char *path, struct lookup **ret)
{
	struct lookup *lk = calloc(1, sizeof(*lk));
	int r;

	if (!lk)
		return -ENOMEM;
	lk->loop = l;
	lk->pr = pr;
	lk->listen.fd = lk->sweep.fd = -1;
	lk->path = strdup(path);
	r = lk->path ? loop_timer(l, &lk->sweep, LOOP_OFF, 0, on_sweep, lk) : -ENOMEM;
	if (r >= 0)
		r = listen_on(lk);
	if (r < 0) {
		lookup_free(lk);
		return r;
	}
	*ret = lk;
	return 0;
}

void lookup_dra(struct lookup *lk,
		struct hpn_alloc *(*pod_nics)(void *ud, const struct hpn_alloc_req *req, char *why,
					      size_t len),
		void *ud)
{
	lk->pod_nics = pod_nics;
	lk->pod_nics_ud = ud;
}

void lookup_attached(struct lookup *lk, int (*attached)(void *ud, const char *uid), void *ud)
{
	lk->attached = attached;
	lk->attached_ud = ud;
}

void lookup_set_pods(struct lookup *lk, struct podwatch *pw)
{
	lk->pw = pw;
}

void lookup_nri(struct lookup *lk, void (*nri_state)(void *ud, struct hpn_nri_state *ret), void *ud)
{
	lk->nri_state = nri_state;
	lk->nri_state_ud = ud;
}

void lookup_stop(struct lookup *lk)
{
	if (!lk)
		return;
	for (size_t i = 0; i < MAX_CONNS; i++)
		if (lk->conns[i] && !lk->conns[i]->asked && !lk->conns[i]->out)
			conn_free(lk->conns[i]);
	if (lk->listen.fd >= 0) {
		loop_close(&lk->listen);
		unlink(lk->path);
	}
}

void lookup_free(struct lookup *lk)
{
	if (!lk)
		return;
	lookup_stop(lk);
	/* Connections still waiting for the kubelet: the loop is over, no answer comes. */
	for (size_t i = 0; i < MAX_CONNS; i++)
		if (lk->conns[i])
			conn_free(lk->conns[i]);
	loop_close(&lk->sweep);
	free(lk->path);
	free(lk);
}
