// SPDX-License-Identifier: Apache-2.0
/*
 * The Kubernetes API on the loop (kubeloop.h): libcurl's multi "socket"
 * interface. libcurl says which sockets to watch for what (on_socket) and
 * when to call it back (on_timer); the loop reports readiness and expiry
 * (curl_multi_socket_action); a finished transfer is judged by kubecall.c
 * and either answered, failed, or attempted again after its wait on a timer
 * of its own. Owners' callbacks run only from the loop's rounds, never from
 * inside libcurl, so a done may start or cancel any call.
 */
#include "kubeloop.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exposition.h"
#include "kubeconfig.h"
#include "kubecurl.h"
#include "log.h"
#include "loop.h"
#include "util.h"

struct kubeloop {
	struct loop *loop;
	const struct hpn_curl *c;
	CURLM *m;
	struct loop_src timer; /* libcurl's one timeout */
	struct kube_op *ops;   /* every call not yet done */
	unsigned n;
	/* For metrics: calls ended [0] with an error, [1] with an answer; attempts made. */
	uint64_t calls[2], attempts;
};

/* A socket libcurl asked us to watch: its fd stays libcurl's. */
struct ksock {
	struct loop_src src;
	struct kubeloop *kl;
	curl_socket_t fd;
};

enum op_state {
	OP_WAITING, /* for its retry timer (or the round that reports a failed start) */
	OP_RUNNING, /* in the multi handle */
};

struct kube_op {
	struct kubeloop *kl;
	struct kube_op *next, **prev;
	enum op_state state;
	struct hpn_kube_call call; /* its strings in strs */
	char *strs;
	struct hpn_kubeconfig kc;
	bool kc_loaded, opened;
	struct hpn_kube_xfer x;
	struct loop_src retry;
	kube_done_fn *done;
	void *ud;
	struct kube_result res; /* set when a failed start is reported */
	bool failed_start;
};

static long long now_ms(void)
{
	return hpn_mono_ms();
}

static void op_unlink_free(struct kube_op *op)
{
	struct kubeloop *kl = op->kl;

	if (op->state == OP_RUNNING && op->x.h)
		kl->c->multi_remove_handle(kl->m, op->x.h);
	*op->prev = op->next;
	if (op->next)
		op->next->prev = op->prev;
	kl->n--;
	loop_close(&op->retry);
	if (op->opened)
		hpn_kube_xfer_close(&op->x);
	if (op->kc_loaded)
		hpn_kubeconfig_free(&op->kc);
	hpn_kube_answer_free(&op->res.a);
	free(op->strs);
	free(op);
}

/* The owner told, the op gone. */
static void finish(struct kube_op *op, struct kube_result *res)
{
	kube_done_fn *done = op->done;
	void *ud = op->ud;
	struct kube_result out = *res;

	if (op->kc_loaded)
		snprintf(out.server, sizeof(out.server), "%s", op->kc.server);
	op->kl->calls[out.r >= 0]++;
	memset(res, 0, sizeof(*res));
	op_unlink_free(op);
	done(ud, &out);
	hpn_kube_answer_free(&out.a);
}

/* An end reported in the next round, as every other end is: never inside the caller's call. */
static void fail_later(struct kube_op *op, int r)
{
	op->res.r = r;
	op->failed_start = true;
	loop_timer_set(&op->retry, 0, 0);
}

static void start_attempt(struct kube_op *op)
{
	struct kubeloop *kl = op->kl;
	long long left = op->x.on_data ? (long long)hpn_kube_call_budget(&op->call)
				       : hpn_kube_try_left(&op->x.t, now_ms());
	CURLMcode mc;

	hpn_kube_xfer_rearm(&op->x, left);
	mc = kl->c->multi_add_handle(kl->m, op->x.h);
	if (mc != CURLM_OK) {
		fail_later(op,
			   hpn_err_set(&op->res.err, HPN_E_INTERNAL, ENOMEM,
				       "Kubernetes API %s: %s %s: libcurl: %s", op->kc.server,
				       op->call.method, op->call.what, kl->c->multi_strerror(mc)));
		return;
	}
	op->state = OP_RUNNING;
	kl->attempts++;
}

static void on_retry(struct loop_src *s)
{
	struct kube_op *op = s->ud;

	if (op->failed_start) {
		finish(op, &op->res);
		return;
	}
	start_attempt(op);
}

/* A transfer libcurl finished: judged; answered, failed, or tried again later. */
static void attempt_done(struct kube_op *op, CURLcode rc)
{
	struct kubeloop *kl = op->kl;
	struct kube_result res = { 0 };
	struct hpn_kube_attempt a;
	long long wait = 0;

	kl->c->multi_remove_handle(kl->m, op->x.h);
	op->state = OP_WAITING;
	hpn_kube_xfer_outcome(&op->x, rc, &a);
	if (op->x.on_data) {
		res.r = hpn_kube_stream_judge(&op->x.t, &a, &op->x.body, op->x.stopped, &res.err);
		if (res.r >= 0)
			res.r = hpn_kube_xfer_answer(&op->x, &res.a);
		finish(op, &res);
		return;
	}
	switch (hpn_kube_try_judge(&op->x.t, &a, &op->x.body, now_ms(), &wait, &res.r, &res.err)) {
	case HPN_KUBE_ANSWER:
		res.r = hpn_kube_xfer_answer(&op->x, &res.a);
		finish(op, &res);
		return;
	case HPN_KUBE_FAILED:
		finish(op, &res);
		return;
	case HPN_KUBE_AGAIN:
		hpn_debug("Kubernetes API %s: %s %s: %s; again in %lld ms", op->kc.server,
			  op->call.method, op->call.what, op->x.t.why, wait);
		loop_timer_set(&op->retry, wait > 3600000 ? 3600000 : (int)wait, 0);
		return;
	}
}

/*
 * Every transfer libcurl reports finished, one at a time: an owner's done
 * may cancel a call whose message is still queued (its removal takes the
 * message out of libcurl's queue) or start new ones.
 */
static void reap(struct kubeloop *kl)
{
	CURLMsg *msg;
	int left;

	while ((msg = kl->c->multi_info_read(kl->m, &left))) {
		struct hpn_kube_xfer *x = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		kl->c->easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		if (x)
			attempt_done((struct kube_op *)((char *)x - offsetof(struct kube_op, x)),
				     msg->data.result);
	}
}

static void act(struct kubeloop *kl, curl_socket_t fd, int ev)
{
	int running;

	kl->c->multi_socket_action(kl->m, fd, ev, &running);
	reap(kl);
}

static void on_sock(struct loop_src *s)
{
	struct ksock *ks = s->ud;
	int ev = ((s->revents & LOOP_IN) ? CURL_CSELECT_IN : 0) |
		 ((s->revents & LOOP_OUT) ? CURL_CSELECT_OUT : 0);

	/* ks may be freed by libcurl's REMOVE inside: nothing of it is read after. */
	act(ks->kl, ks->fd, ev);
}

static void on_timeout(struct loop_src *s)
{
	act(s->ud, CURL_SOCKET_TIMEOUT, 0);
}

/* libcurl: watch s for what (CURL_POLL_*), or forget it (REMOVE: before it closes s). */
static int on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct kubeloop *kl = userp;
	struct ksock *ks = socketp;
	unsigned ev =
		((what & CURL_POLL_IN) ? LOOP_IN : 0) | ((what & CURL_POLL_OUT) ? LOOP_OUT : 0);

	(void)e;
	if (what == CURL_POLL_REMOVE) {
		if (ks) {
			loop_mute(kl->loop, &ks->src);
			kl->c->multi_assign(kl->m, s, NULL);
			free(ks);
		}
		return 0;
	}
	if (!ks) {
		ks = calloc(1, sizeof(*ks));
		if (!ks)
			return -1;
		ks->kl = kl;
		ks->fd = s;
		if (loop_borrow(kl->loop, &ks->src, s, on_sock, ks) < 0) {
			free(ks);
			return -1;
		}
		kl->c->multi_assign(kl->m, s, ks);
	}
	return loop_watch(kl->loop, &ks->src, ev) < 0 ? -1 : 0;
}

/* libcurl: call back after ms (-1: never). */
static int on_timer(CURLM *m, long ms, void *userp)
{
	struct kubeloop *kl = userp;

	(void)m;
	loop_timer_set(&kl->timer, ms < 0 ? LOOP_OFF : ms > 3600000 ? 3600000 : (int)ms, 0);
	return 0;
}

int kubeloop_new(struct loop *l, struct kubeloop **ret, struct hpn_err *err)
{
	struct kubeloop *kl = calloc(1, sizeof(*kl));
	int r;

	if (!kl)
		return -ENOMEM;
	kl->loop = l;
	kl->timer.fd = -1;
	r = hpn_curl_get(&kl->c, err);
	if (r < 0)
		goto fail;
	r = loop_timer(l, &kl->timer, LOOP_OFF, 0, on_timeout, kl);
	if (r < 0)
		goto fail;
	kl->m = kl->c->multi_init();
	if (!kl->m || kl->c->multi_setopt(kl->m, CURLMOPT_SOCKETFUNCTION, on_socket) != CURLM_OK ||
	    kl->c->multi_setopt(kl->m, CURLMOPT_SOCKETDATA, kl) != CURLM_OK ||
	    kl->c->multi_setopt(kl->m, CURLMOPT_TIMERFUNCTION, on_timer) != CURLM_OK ||
	    kl->c->multi_setopt(kl->m, CURLMOPT_TIMERDATA, kl) != CURLM_OK) {
		r = hpn_err_set(err, HPN_E_KUBE, ENOMEM, "libcurl: curl_multi_init failed");
		goto fail;
	}
	*ret = kl;
	return 0;
fail:
	if (kl->m)
		kl->c->multi_cleanup(kl->m);
	loop_close(&kl->timer);
	free(kl);
	return r;
}

void kubeloop_free(struct kubeloop *kl)
{
	if (!kl)
		return;
	for (struct kube_op *op = kl->ops, *next; op; op = next) {
		next = op->next;
		op_unlink_free(op);
	}
	/* Its connections closed: on_socket forgets each socket. */
	kl->c->multi_cleanup(kl->m);
	loop_close(&kl->timer);
	free(kl);
}

int kube_result_status_err(struct kube_result *res, const struct hpn_kube_call *call)
{
	struct hpn_kubeconfig kc = { .server = res->server };

	res->r = hpn_kube_status_err(&kc, call, &res->a, &res->err);
	return res->r;
}

unsigned kubeloop_pending(const struct kubeloop *kl)
{
	return kl ? kl->n : 0;
}

/* call's strings copied into one allocation, the copy pointing at them. */
static int copy_call(struct kube_op *op, const struct hpn_kube_call *call)
{
	const char *const src[] = { call->method, call->path,	  call->content_type,
				    call->what,	  call->resource, call->verb,
				    call->ns };
	const char **dst[] = { &op->call.method, &op->call.path,     &op->call.content_type,
			       &op->call.what,	 &op->call.resource, &op->call.verb,
			       &op->call.ns };
	size_t len = call->body ? call->body_len : 0, at;

	for (size_t i = 0; i < HPN_ARRAY_SIZE(src); i++)
		len += src[i] ? strlen(src[i]) + 1 : 0;
	op->strs = malloc(len + 1);
	if (!op->strs)
		return -ENOMEM;
	op->call = *call;
	at = 0;
	for (size_t i = 0; i < HPN_ARRAY_SIZE(src); i++) {
		size_t n;

		if (!src[i])
			continue;
		n = strlen(src[i]) + 1;
		*dst[i] = memcpy(op->strs + at, src[i], n);
		at += n;
	}
	if (call->body) {
		memcpy(op->strs + at, call->body, call->body_len);
		op->call.body = op->strs + at;
	}
	return 0;
}

static int start(struct kubeloop *kl, const char *kubeconfig, const struct hpn_kube_call *call,
		 int (*on_data)(void *ud, const char *data, size_t len), kube_done_fn *done,
		 void *ud, struct kube_op **ret)
{
	struct kube_op *op = calloc(1, sizeof(*op));
	struct hpn_kube_warn warn = { 0 };
	int r;

	if (!op)
		return -ENOMEM;
	op->kl = kl;
	op->done = done;
	op->ud = ud;
	op->retry.fd = -1;
	r = copy_call(op, call);
	if (r >= 0)
		r = loop_timer(kl->loop, &op->retry, LOOP_OFF, 0, on_retry, op);
	if (r < 0) {
		free(op->strs);
		free(op);
		return r;
	}
	op->next = kl->ops;
	if (op->next)
		op->next->prev = &op->next;
	op->prev = &kl->ops;
	kl->ops = op;
	kl->n++;
	r = hpn_kubeconfig_load(kubeconfig, &op->kc, &warn, &op->res.err);
	op->kc_loaded = r >= 0;
	if (r >= 0) {
		r = hpn_kube_xfer_open(&op->x, &op->kc, &op->call, on_data, ud, &warn,
				       &op->res.err);
		op->opened = r >= 0;
	}
	if (warn.msg[0])
		hpn_warn("%s", warn.msg);
	if (r < 0) {
		fail_later(op, r);
	} else {
		start_attempt(op);
	}
	if (ret)
		*ret = op;
	return 0;
}

int kube_call(struct kubeloop *kl, const char *kubeconfig, const struct hpn_kube_call *call,
	      kube_done_fn *done, void *ud, struct kube_op **ret)
{
	return start(kl, kubeconfig, call, NULL, done, ud, ret);
}

int kube_watch(struct kubeloop *kl, const char *kubeconfig, const struct hpn_kube_call *call,
	       int (*on_data)(void *ud, const char *data, size_t len), kube_done_fn *done, void *ud,
	       struct kube_op **ret)
{
	return start(kl, kubeconfig, call, on_data, done, ud, ret);
}

void kube_cancel(struct kube_op *op)
{
	if (op)
		op_unlink_free(op);
}

void kubeloop_metrics(struct sbuf *b, void *ud)
{
	static const char *const result[] = { "error", "answer" };
	const struct kubeloop *kl = ud;

	expo_family(b, "hpn_rdma_kube_calls_total", "counter",
		    "Kubernetes API calls the agent made, by how they ended: an answer (any "
		    "status the caller reads) or an error (after their retries).");
	expo_by_result(b, "hpn_rdma_kube_calls_total", result, kl->calls, 2);
	expo_counter(b, "hpn_rdma_kube_attempts_total",
		     "HTTP requests those calls made, retries included.", kl->attempts);
	expo_gauge(b, "hpn_rdma_kube_calls_in_flight",
		   "Kubernetes API calls and watches under way (or waiting to retry).", kl->n);
}
