// SPDX-License-Identifier: Apache-2.0
/*
 * kubecall.c: a Kubernetes API call's attempts as a hostile or broken server
 * and network may end them (statuses, Retry-After, bodies of any type and
 * size, resets, timeouts, TLS failures) on a simulated clock, then the
 * answer's Status, and the call itself built from the input's tail.
 */
#include <errno.h>
#include <string.h>

#include "err.h"
#include "fuzz.h"
#include "kubecall.h"
#include "util.h"

/* Reads n bytes big-endian from the input; 0 past its end. */
static unsigned long take(const uint8_t **p, const uint8_t *end, size_t n)
{
	unsigned long v = 0;

	for (size_t i = 0; i < n; i++)
		v = v << 8 | (*p < end ? *(*p)++ : 0);
	return v;
}

static const char *const types[] = { "application/json", "application/json; charset=utf-8",
				     "text/html", "", "APPLICATION/JSON;x" };

static void check_failed(const struct hpn_err *err, int r)
{
	FUZZ_ASSERT(r < 0 && err->code != 0);
	FUZZ_ASSERT(!strncmp(err->msg, "Kubernetes API https://api.test:6443: ", 38));
}

/* The call made of the input's tail: checked, and if valid, its headers. */
static void call_of(const uint8_t *p, size_t n, bool retry)
{
	char path[HPN_KUBE_PATH_MAX + 2], **h = NULL;
	struct hpn_kube_call call = { .method = retry ? "GET" : "PATCH",
				      .path = path,
				      .what = "fuzzed",
				      .content_type = path + 1 };
	struct hpn_err err = { 0 };

	n = n > sizeof(path) - 1 ? sizeof(path) - 1 : n;
	memcpy(path, p, n);
	path[n] = '\0';
	if (hpn_kube_call_check(&call, false, &err) < 0) {
		FUZZ_ASSERT(err.code != 0 && err.msg[0]);
		return;
	}
	FUZZ_ASSERT(path[0] == '/' && strlen(path) <= HPN_KUBE_PATH_MAX);
	FUZZ_ASSERT(!strpbrk(path, " #\r\n\t"));
	if (hpn_kube_headers(&call, "tok", &h) < 0)
		return;
	for (size_t i = 0; h[i]; i++)
		FUZZ_ASSERT(!strpbrk(h[i], "\r\n"));
	hpn_kube_headers_free(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *end = data + size;
	struct hpn_kubeconfig kc = { .path = "/k",
				     .cluster = "c",
				     .user = "u",
				     .server = "https://api.test:6443",
				     .ca_from = "ca" };
	unsigned flags = (unsigned)take(&p, end, 1);
	struct hpn_kube_call call = { .method = flags & 1 ? "GET" : "POST",
				      .path = "/api/v1/pods",
				      .what = "pods",
				      .resource = flags & 2 ? "pods" : NULL,
				      .ns = flags & 4 ? "default" : NULL,
				      .timeout_ms = (unsigned)take(&p, end, 2),
				      .retry = flags & 8 };
	struct hpn_kube_body b = { 0 };
	struct hpn_kube_try t;
	long long now = 1000000;
	bool over = false;

	hpn_kube_try_start(&t, &kc, &call, now);
	for (unsigned i = 0; !over && p < end; i++) {
		struct hpn_kube_attempt a = {
			.net = (enum hpn_kube_net)(take(&p, end, 1) % 10),
			.status = (long)(take(&p, end, 2) % 700),
			.retry_after_s = (long long)take(&p, end, 1) - 8,
			.verify = (long)take(&p, end, 1) % 70,
			.text = "text of the transport",
		};
		size_t len = take(&p, end, 3) % (HPN_KUBE_BODY_MAX + 8192);
		const char *type = types[take(&p, end, 1) % HPN_ARRAY_SIZE(types)];
		size_t avail = (size_t)(end - p), chunk = len < avail ? len : avail;
		struct hpn_err err = { 0 };
		long long wait = -1;
		bool kept = true;
		int r = 0;

		FUZZ_ASSERT(i < HPN_KUBE_ATTEMPTS);
		hpn_kube_body_reset(&b);
		/* The body in two pieces; an answer over the limit is cut by the transport. */
		kept = hpn_kube_body_add(&b, a.status, type, (const char *)p, chunk / 2);
		if (kept)
			kept = hpn_kube_body_add(&b, a.status, type, (const char *)p + chunk / 2,
						 chunk - chunk / 2);
		if (kept && len > chunk) {
			static char zeros[65536];

			for (size_t left = len - chunk; kept && left;) {
				size_t n = left < sizeof(zeros) ? left : sizeof(zeros);

				kept = hpn_kube_body_add(&b, a.status, type, zeros, n);
				left -= n;
			}
		}
		p += chunk;
		FUZZ_ASSERT(b.len <= HPN_KUBE_BODY_MAX);
		FUZZ_ASSERT(!b.buf || b.buf[b.len] == '\0');
		FUZZ_ASSERT(kept || b.too_big || b.not_json || b.no_memory);
		if (!kept && a.net == HPN_KUBE_NET_OK)
			a.net = HPN_KUBE_NET_STOPPED; /* as a transport reports it */
		now += (long long)take(&p, end, 2);
		switch (hpn_kube_try_judge(&t, &a, &b, now, &wait, &r, &err)) {
		case HPN_KUBE_ANSWER:
			FUZZ_ASSERT(a.net == HPN_KUBE_NET_OK);
			FUZZ_ASSERT(a.status != 401 && a.status != 403 && a.status != 429 &&
				    (a.status < 500 || a.status > 599));
			FUZZ_ASSERT(!err.code);
			if (a.status < 200 || a.status > 299) {
				struct hpn_kube_answer ans = { .status = a.status,
							       .body = b.buf ? b.buf : "",
							       .len = b.len };

				check_failed(&err, hpn_kube_status_err(&kc, &call, &ans, &err));
				FUZZ_ASSERT(strstr(err.msg, "pods"));
			}
			over = true;
			break;
		case HPN_KUBE_FAILED:
			check_failed(&err, r);
			/* Only what may be tried again ends as code 11. */
			FUZZ_ASSERT(
				err.code != HPN_E_TRY_AGAIN || a.net == HPN_KUBE_NET_UNSENT ||
				a.net == HPN_KUBE_NET_BROKEN || a.net == HPN_KUBE_NET_TIMEOUT ||
				(a.net == HPN_KUBE_NET_OK && (a.status == 429 || a.status >= 500)));
			over = true;
			break;
		case HPN_KUBE_AGAIN:
			FUZZ_ASSERT(!err.code && wait >= 100 && now + wait < t.deadline);
			FUZZ_ASSERT(call.retry || t.unacted);
			now += wait;
			break;
		}
	}
	FUZZ_ASSERT(t.attempts <= HPN_KUBE_ATTEMPTS);
	{
		struct hpn_kube_attempt a = { .net = HPN_KUBE_NET_TIMEOUT, .status = 200 };
		struct hpn_err err = { 0 };
		int r = hpn_kube_stream_judge(&t, &a, &b, flags & 16, &err);

		/* A watch that ran to its timeout ended well, unless its owner stopped it. */
		FUZZ_ASSERT(flags & 16 ? r == -ECANCELED
				       : r == 0 || b.not_json || b.too_big || b.no_memory);
	}
	hpn_kube_body_reset(&b);
	call_of(data, size, flags & 8);
	return 0;
}
