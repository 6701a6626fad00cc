// SPDX-License-Identifier: Apache-2.0
/* A Kubernetes API call's logic without its transport (kubecall.h). */
#include "kubecall.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

#define BACKOFF_FIRST_MS 100
#define RETRY_AFTER_MAX	 3600 /* s: a longer Retry-After is taken as this */

void hpn_kube_answer_free(struct hpn_kube_answer *a)
{
	if (!a)
		return;
	free(a->body);
	a->body = NULL;
	a->len = 0;
}

/* The characters of a URL's path and query (RFC 3986 pchar, '/', '?', '%'). */
static bool url_path(const char *p)
{
	if (!p || p[0] != '/' || strlen(p) > HPN_KUBE_PATH_MAX)
		return false;
	for (; *p; p++)
		if (!(isalnum((unsigned char)*p) || strchr("-._~!$&'()*+,;=:@/?%", *p)))
			return false;
	return true;
}

/* A header's value: visible ASCII and blanks, nothing that ends the line. */
static bool header_value(const char *s)
{
	for (; *s; s++)
		if (*s < ' ' || *s > '~')
			return false;
	return true;
}

bool hpn_kube_call_has_body(const struct hpn_kube_call *call)
{
	const char *m = call->method;

	return call->body || !strcmp(m, "POST") || !strcmp(m, "PUT") || !strcmp(m, "PATCH");
}

unsigned hpn_kube_call_budget(const struct hpn_kube_call *call)
{
	return call->timeout_ms ? call->timeout_ms : HPN_KUBE_TIMEOUT_MS_DEFAULT;
}

int hpn_kube_call_check(const struct hpn_kube_call *call, bool stream, struct hpn_err *err)
{
	static const char *const methods[] = { "GET", "POST", "PUT", "PATCH", "DELETE" };
	bool known = false;

	for (size_t i = 0; call->method && i < HPN_ARRAY_SIZE(methods); i++)
		known |= !strcmp(call->method, methods[i]);
	if (!known)
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
				   "Kubernetes API request: method \"%.16s\" is not GET, POST, "
				   "PUT, PATCH or DELETE",
				   call->method ? call->method : "");
	if (stream && strcmp(call->method, "GET") != 0)
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
				   "Kubernetes API request %s: a stream is a GET", call->method);
	if (!url_path(call->path))
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
				   "Kubernetes API request: path \"%.128s\" is not an escaped "
				   "absolute path",
				   call->path ? call->path : "");
	/* A body would turn a GET into a POST; the API's GETs take none. */
	if (!strcmp(call->method, "GET") && call->body)
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
				   "Kubernetes API request GET %s: a GET has no body", call->path);
	if (!call->what)
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
				   "Kubernetes API request %s %s: what it is for is not said",
				   call->method, call->path);
	if (call->body_len > HPN_KUBE_BODY_MAX)
		return hpn_err_set(err, HPN_E_INTERNAL, EFBIG,
				   "Kubernetes API request %s %s: the body is larger than %d bytes",
				   call->method, call->what, HPN_KUBE_BODY_MAX);
	if (call->content_type && !header_value(call->content_type))
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
				   "Kubernetes API request %s %s: a Content-Type that is not a "
				   "header's value",
				   call->method, call->what);
	if (call->timeout_ms > HPN_KUBE_TIMEOUT_MS_MAX)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "kubernetes timeout %u ms is over %d ms", call->timeout_ms,
				   HPN_KUBE_TIMEOUT_MS_MAX);
	return 0;
}

void hpn_kube_headers_free(char **h)
{
	for (size_t i = 0; h && h[i]; i++) {
		explicit_bzero(h[i], strlen(h[i]));
		free(h[i]);
	}
	free(h);
}

int hpn_kube_headers(const struct hpn_kube_call *call, const char *token, char ***ret)
{
	char **h = calloc(5, sizeof(*h));
	size_t n = 0;

	if (!h)
		return -ENOMEM;
	h[n] = strdup("Accept: application/json");
	if (!h[n++])
		goto fail;
	if (hpn_kube_call_has_body(call)) {
		if (asprintf(&h[n], "Content-Type: %s",
			     call->content_type ? call->content_type : "application/json") < 0) {
			h[n] = NULL;
			goto fail;
		}
		/* No "Expect: 100-continue" round trip before a large body. */
		h[++n] = strdup("Expect:");
		if (!h[n++])
			goto fail;
	}
	if (token && asprintf(&h[n], "Authorization: Bearer %s", token) < 0) {
		h[n] = NULL;
		goto fail;
	}
	*ret = h;
	return 0;
fail:
	hpn_kube_headers_free(h);
	return -ENOMEM;
}

bool hpn_kube_is_json(const char *type)
{
	size_t n = strlen("application/json");

	return type && !strncasecmp(type, "application/json", n) &&
	       (type[n] == '\0' || type[n] == ';' || type[n] == ' ');
}

void hpn_kube_body_reset(struct hpn_kube_body *b)
{
	free(b->buf);
	memset(b, 0, sizeof(*b));
}

bool hpn_kube_body_add(struct hpn_kube_body *b, long status, const char *type, const char *data,
		       size_t n)
{
	if (!b->len && !b->status) {
		b->status = status;
		snprintf(b->type, sizeof(b->type), "%s", type ? type : "");
		if (status >= 200 && status <= 299 && !hpn_kube_is_json(type)) {
			b->not_json = true;
			return false;
		}
	}
	if (n > HPN_KUBE_BODY_MAX - b->len) {
		b->too_big = true;
		return false;
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 16384;
		char *nb;

		while (cap < b->len + n + 1)
			cap *= 2;
		nb = realloc(b->buf, cap);
		if (!nb) {
			b->no_memory = true;
			return false;
		}
		b->buf = nb;
		b->cap = cap;
	}
	if (n)
		memcpy(b->buf + b->len, data, n);
	b->len += n;
	b->buf[b->len] = '\0';
	return true;
}

/* The API server's own words: a Status object's message (sanitised, cut). */
static void status_message(const char *buf, size_t len, char *out, size_t out_len)
{
	cJSON *root;
	const cJSON *m;

	out[0] = '\0';
	if (!buf)
		return;
	root = hpn_json_parse(buf, len);
	m = cJSON_GetObjectItemCaseSensitive(root, "message");
	if (cJSON_IsString(m))
		hpn_utf8_sanitize(out, m->valuestring, out_len);
	cJSON_Delete(root);
}

/* "Kubernetes API https://...: GET pod ns/name: " in front of every message. */
__attribute__((format(printf, 7, 0))) static int
vfail(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call, struct hpn_err *err,
      int code, int e, const char *details, const char *fmt, va_list ap)
{
	char msg[HPN_ERR_MSG];
	int r;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	r = hpn_err_set(err, code, e, "Kubernetes API %s: %s %s: %s", kc->server, call->method,
			call->what, msg);
	if (details && details[0])
		hpn_err_details(err, "%s", details);
	return r;
}

int hpn_kube_call_err(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call,
		      struct hpn_err *err, int code, int e, const char *details, const char *fmt,
		      ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfail(kc, call, err, code, e, details, fmt, ap);
	va_end(ap);
	return r;
}

/* The RBAC verb a request needs, for the 403 message. */
static const char *rbac_verb(const struct hpn_kube_call *call)
{
	static const char *const verbs[][2] = {
		{ "GET", "get" },     { "POST", "create" },   { "PUT", "update" },
		{ "PATCH", "patch" }, { "DELETE", "delete" },
	};

	if (call->verb)
		return call->verb;
	for (size_t i = 0; i < HPN_ARRAY_SIZE(verbs); i++)
		if (!strcmp(call->method, verbs[i][0]))
			return verbs[i][1];
	return call->method;
}

static int forbidden(const struct hpn_kube_try *t, const char *details, struct hpn_err *err)
{
	const struct hpn_kube_call *call = t->call;
	const char *verb = rbac_verb(call);

	if (!call->resource)
		return hpn_kube_call_err(
			t->kc, call, err, HPN_E_KUBE, EPERM, details,
			"403 Forbidden: user \"%s\" of kubeconfig %s may not %s %s", t->kc->user,
			t->kc->path, verb, call->what);
	return hpn_kube_call_err(
		t->kc, call, err, HPN_E_KUBE, EPERM, details,
		"403 Forbidden: user \"%s\" of kubeconfig %s may not %s %s%s%s (it "
		"needs RBAC %s on %s)",
		t->kc->user, t->kc->path, verb, call->resource, call->ns ? " in namespace " : "",
		call->ns ? call->ns : "", verb, call->resource);
}

void hpn_kube_try_start(struct hpn_kube_try *t, const struct hpn_kubeconfig *kc,
			const struct hpn_kube_call *call, long long now_ms)
{
	*t = (struct hpn_kube_try){ .kc = kc,
				    .call = call,
				    .start = now_ms,
				    .deadline = now_ms + hpn_kube_call_budget(call),
				    .backoff = BACKOFF_FIRST_MS };
}

long long hpn_kube_try_left(const struct hpn_kube_try *t, long long now_ms)
{
	return t->deadline - now_ms;
}

/* DONE: an answer for the caller; RETRY; FAIL: *r is the error. */
enum verdict { DONE, RETRY, FAIL };

static enum verdict http_status(struct hpn_kube_try *t, const struct hpn_kube_attempt *a,
				const struct hpn_kube_body *b, int *r, struct hpn_err *err)
{
	char said[HPN_ERR_DETAILS / 2], details[HPN_ERR_DETAILS];
	long status = a->status;
	long long after = a->retry_after_s;

	if (status >= 200 && status <= 299)
		return DONE;
	if (status == 429 || (status >= 500 && status <= 599)) {
		if (after < 0)
			after = 0;
		t->retry_after_ms =
			after > RETRY_AFTER_MAX ? RETRY_AFTER_MAX * 1000LL : after * 1000;
		snprintf(t->why, sizeof(t->why), "HTTP %ld%s%s%s", status,
			 status == 429 ? " Too Many Requests" : "",
			 status == 503 ? " Service Unavailable" : "",
			 after ? " with Retry-After" : "");
		/* kube-apiserver's inflight limits refuse before the handler runs. */
		t->unacted = status == 429;
		return RETRY;
	}
	if (status != 401 && status != 403)
		return DONE;
	status_message(hpn_kube_is_json(b->type) ? b->buf : NULL, b->len, said, sizeof(said));
	snprintf(details, sizeof(details), "%s%s", said[0] ? "the API server says: " : "", said);
	if (status == 401)
		*r = hpn_kube_call_err(
			t->kc, t->call, err, HPN_E_KUBE, EACCES, details,
			"401 Unauthorized: the server does not accept the credentials of "
			"user \"%s\" (kubeconfig %s)",
			t->kc->user, t->kc->path);
	else
		*r = forbidden(t, details, err);
	return FAIL;
}

static enum verdict net_result(struct hpn_kube_try *t, const struct hpn_kube_attempt *a,
			       const struct hpn_kube_body *b, int *r, struct hpn_err *err)
{
	const struct hpn_kubeconfig *kc = t->kc;
	const struct hpn_kube_call *call = t->call;
	const char *text = a->text && a->text[0] ? a->text : "failed";
	long v = a->verify;

	switch (a->net) {
	case HPN_KUBE_NET_OK:
		return DONE;
	case HPN_KUBE_NET_TLS_ALERT:
		*r = hpn_kube_call_err(
			kc, call, err, HPN_E_KUBE, EACCES, text,
			"the server ended the TLS session (%s): does it trust user \"%s\"'s "
			"client certificate?",
			text, kc->user);
		return FAIL;
	case HPN_KUBE_NET_UNSENT:
	case HPN_KUBE_NET_BROKEN:
		snprintf(t->why, sizeof(t->why), "%s", text);
		/* Nothing was sent when there was no connection. */
		t->unacted = a->net == HPN_KUBE_NET_UNSENT;
		t->closed |= !t->unacted;
		return RETRY;
	case HPN_KUBE_NET_TIMEOUT:
		snprintf(t->why, sizeof(t->why), "no answer in time (%s)", text);
		t->unacted = false;
		return RETRY;
	case HPN_KUBE_NET_TLS_VERIFY:
		/*
		 * OpenSSL's verdict on the chain (X509_V_ERR_*). A name that does not
		 * match is 62 (host) or 64 (IP) when OpenSSL checks it, 0 or 1 when
		 * libcurl does, after a chain that verified.
		 */
		if (v == 9 || v == 10)
			*r = hpn_kube_call_err(
				kc, call, err, HPN_E_KUBE, EBADMSG, text,
				"TLS: the server's certificate is expired or not yet valid");
		else if (v <= 1 || v == 62 || v == 64)
			*r = hpn_kube_call_err(
				kc, call, err, HPN_E_KUBE, EBADMSG, text,
				"TLS: the server's certificate is not issued for the host of "
				"cluster \"%s\"'s server URL",
				kc->cluster);
		else
			*r = hpn_kube_call_err(kc, call, err, HPN_E_KUBE, EBADMSG, text,
					       "TLS: the server's certificate is not signed by the "
					       "kubeconfig's %s (cluster \"%s\")",
					       kc->ca_from, kc->cluster);
		return FAIL;
	case HPN_KUBE_NET_STOPPED:
		if (b->not_json)
			*r = hpn_kube_call_err(
				kc, call, err, HPN_E_KUBE, EPROTO, NULL,
				"the answer's Content-Type is \"%s\", not application/json",
				b->type);
		else if (b->no_memory)
			*r = hpn_kube_call_err(kc, call, err, HPN_E_INTERNAL, ENOMEM, NULL,
					       "out of memory");
		else
			*r = hpn_kube_call_err(kc, call, err, HPN_E_KUBE, EFBIG, NULL,
					       "the answer is larger than %d bytes",
					       HPN_KUBE_BODY_MAX);
		return FAIL;
	case HPN_KUBE_NET_CREDS:
	case HPN_KUBE_NET_CA:
		*r = hpn_kube_call_err(kc, call, err, HPN_E_INVALID_CONFIG, EINVAL, text,
				       "TLS: the %s of kubeconfig %s cannot be used (%s)",
				       a->net == HPN_KUBE_NET_CREDS ? "client certificate or key"
								    : "CA",
				       kc->path, text);
		return FAIL;
	case HPN_KUBE_NET_OTHER:
	default:
		*r = hpn_kube_call_err(kc, call, err, HPN_E_KUBE, EPROTO, text, "%s", text);
		return FAIL;
	}
}

/* Out of attempts or time: code 11, with where the last attempt failed. */
static int spent(struct hpn_kube_try *t, long long now_ms, struct hpn_err *err)
{
	const struct hpn_kubeconfig *kc = t->kc;
	bool maybe_cert = t->closed && kc->cert;

	if (!t->why[0])
		snprintf(t->why, sizeof(t->why), "no answer within %u ms",
			 hpn_kube_call_budget(t->call));
	/*
	 * With TLS 1.3 a server that refuses our client certificate says so
	 * after the handshake, and its alert is often lost to the reset that
	 * follows: say what it may be.
	 */
	return hpn_kube_call_err(
		kc, t->call, err, HPN_E_TRY_AGAIN, EAGAIN, NULL,
		"%s; %u attempt%s in %lld ms%s, try again later%s%s%s", t->why, t->attempts,
		t->attempts == 1 ? "" : "s", now_ms - t->start,
		t->call->retry || t->unacted ? "" : " (not repeated: it may have been done)",
		maybe_cert ? " (or the server refuses the client certificate of user \"" : "",
		maybe_cert ? kc->user : "", maybe_cert ? "\")" : "");
}

enum hpn_kube_next hpn_kube_try_judge(struct hpn_kube_try *t, const struct hpn_kube_attempt *a,
				      const struct hpn_kube_body *b, long long now_ms,
				      long long *wait_ms, int *r, struct hpn_err *err)
{
	enum verdict v;
	long long wait;
	size_t at;

	t->attempts++;
	t->retry_after_ms = 0;
	v = net_result(t, a, b, r, err);
	if (v == DONE)
		v = http_status(t, a, b, r, err);
	if (v == FAIL)
		return HPN_KUBE_FAILED;
	if (v == DONE)
		return HPN_KUBE_ANSWER;
	/* Not idempotent, and perhaps done: the caller reads before it repeats. */
	if ((!t->call->retry && !t->unacted) || t->attempts >= HPN_KUBE_ATTEMPTS)
		goto out;
	wait = t->retry_after_ms > t->backoff ? t->retry_after_ms : t->backoff;
	t->backoff *= 2;
	if (now_ms + wait >= t->deadline) {
		at = strlen(t->why);
		if (t->retry_after_ms)
			snprintf(t->why + at, sizeof(t->why) - at,
				 " of %lld s, past the %u ms budget", t->retry_after_ms / 1000,
				 hpn_kube_call_budget(t->call));
		goto out;
	}
	*wait_ms = wait;
	return HPN_KUBE_AGAIN;
out:
	*r = spent(t, now_ms, err);
	return HPN_KUBE_FAILED;
}

int hpn_kube_stream_judge(struct hpn_kube_try *t, const struct hpn_kube_attempt *a,
			  const struct hpn_kube_body *b, bool stopped, struct hpn_err *err)
{
	struct hpn_kube_attempt ended = *a;
	enum verdict v;
	int r = 0;

	if (stopped)
		return hpn_err_set(err, HPN_E_TRY_AGAIN, ECANCELED,
				   "Kubernetes API %s: %s: stopped", t->kc->server, t->call->what);
	/* A watch that ends at its timeout ended well: the server or we closed it. */
	if (a->net == HPN_KUBE_NET_TIMEOUT && a->status == 200)
		ended.net = HPN_KUBE_NET_OK;
	t->attempts++;
	v = net_result(t, &ended, b, &r, err);
	if (v == DONE)
		v = http_status(t, &ended, b, &r, err);
	if (v == FAIL)
		return r;
	if (v == RETRY)
		return hpn_kube_call_err(t->kc, t->call, err, HPN_E_TRY_AGAIN, EAGAIN, NULL, "%s",
					 t->why[0] ? t->why : "the stream broke");
	return 0;
}

int hpn_kube_status_err(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call,
			const struct hpn_kube_answer *a, struct hpn_err *err)
{
	char said[HPN_ERR_DETAILS / 2], details[HPN_ERR_DETAILS];

	status_message(a->body, a->len, said, sizeof(said));
	snprintf(details, sizeof(details), "%s%s", said[0] ? "the API server says: " : "", said);
	switch (a->status) {
	case 404:
		return hpn_kube_call_err(kc, call, err, HPN_E_UNKNOWN_CONTAINER, ENOENT, details,
					 "404 Not Found: %s does not exist", call->what);
	case 409:
		return hpn_kube_call_err(
			kc, call, err, HPN_E_KUBE, EBUSY, details,
			"409 Conflict: %s was changed since it was read, or already "
			"exists",
			call->what);
	case 422:
		return hpn_kube_call_err(kc, call, err, HPN_E_KUBE, EINVAL, details,
					 "422 Invalid: the API server refused %s", call->what);
	default:
		return hpn_kube_call_err(kc, call, err, HPN_E_KUBE, EPROTO, details,
					 "unexpected HTTP status %ld", a->status);
	}
}

int hpn_kube_query_escape(const char *s, char **ret)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(s) * 3 + 1), *o = out;

	if (!out)
		return -ENOMEM;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (isalnum(*p) || strchr("-._~", *p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	*ret = out;
	return 0;
}
