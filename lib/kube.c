// SPDX-License-Identifier: Apache-2.0
#include "kube.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "dl.h"
#include "util.h"

/*
 * libcurl, opened on the first lookup. Linked into the plugin, libcurl and the
 * ~30 libraries it needs (OpenSSL, GnuTLS through librtmp, Kerberos, LDAP...)
 * were loaded, relocated and initialised by every run: measured with
 * hpn-bench-run, VERSION went from 0.9 to 7.1 ms of CPU. Called through this
 * table by their own names' fields, never by the libcurl names, so nothing
 * here links to libcurl (the headers are used for types and constants only).
 */
static struct {
	CURLcode (*global_init)(long flags);
	curl_version_info_data *(*version_info)(CURLversion v);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
	CURLcode (*easy_perform)(CURL *h);
	CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
	void (*easy_cleanup)(CURL *h);
	const char *(*easy_strerror)(CURLcode rc);
	struct curl_slist *(*slist_append)(struct curl_slist *list, const char *s);
	void (*slist_free_all)(struct curl_slist *list);
	bool loaded;
} k;

/* CURLOPT_CAINFO_BLOB and CURLINFO_RETRY_AFTER: 7.77.0 (0x074d00). */
#define CURL_NEEDED 0x074d00

static int curl_lib(struct hpn_err *err)
{
	const struct hpn_dl_sym syms[] = {
		{ "curl_global_init", (void **)&k.global_init },
		{ "curl_version_info", (void **)&k.version_info },
		{ "curl_easy_init", (void **)&k.easy_init },
		{ "curl_easy_setopt", (void **)&k.easy_setopt },
		{ "curl_easy_perform", (void **)&k.easy_perform },
		{ "curl_easy_getinfo", (void **)&k.easy_getinfo },
		{ "curl_easy_cleanup", (void **)&k.easy_cleanup },
		{ "curl_easy_strerror", (void **)&k.easy_strerror },
		{ "curl_slist_append", (void **)&k.slist_append },
		{ "curl_slist_free_all", (void **)&k.slist_free_all },
	};
	const curl_version_info_data *v;
	int r;

	if (k.loaded)
		return 0;
	r = hpn_dl_load("libcurl.so.4", "libcurl4", syms, HPN_ARRAY_SIZE(syms), HPN_E_KUBE, err);
	if (r < 0)
		return r;
	v = k.version_info(CURLVERSION_NOW);
	if (!v || v->version_num < CURL_NEEDED || !(v->features & CURL_VERSION_SSL))
		return hpn_err_set(err, HPN_E_KUBE, ENOTSUP,
				   "libcurl.so.4 is version %s%s: the Kubernetes lookup needs "
				   "7.77.0 or later, with TLS",
				   v ? v->version : "?",
				   v && !(v->features & CURL_VERSION_SSL) ? " without TLS" : "");
	/* Not thread-safe before 7.84; the plugin has one thread. */
	if (k.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return hpn_err_set(err, HPN_E_KUBE, ENOMEM, "curl_global_init failed");
	k.loaded = true;
	return 0;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void sleep_ms(long long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The answer as it arrives: bounded, and refused early when it is not JSON. */
struct body {
	CURL *h;
	char *buf;
	size_t len, cap;
	bool too_big, not_json;
	char type[64];
};

/* application/json, with parameters or not ("application/json; charset=utf-8"). */
static bool is_json(const char *type)
{
	size_t n = strlen("application/json");

	return type && !strncasecmp(type, "application/json", n) &&
	       (type[n] == '\0' || type[n] == ';' || type[n] == ' ');
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct body *b = arg;
	size_t n = size * nmemb;
	long status = 0;
	char *t = NULL;

	if (!b->len) {
		k.easy_getinfo(b->h, CURLINFO_RESPONSE_CODE, &status);
		k.easy_getinfo(b->h, CURLINFO_CONTENT_TYPE, &t);
		snprintf(b->type, sizeof(b->type), "%s", t ? t : "");
		if (status >= 200 && status <= 299 && !is_json(t)) {
			b->not_json = true;
			return 0; /* stop: the API's objects are never anything but JSON */
		}
	}
	if (n > HPN_KUBE_BODY_MAX - b->len) {
		b->too_big = true;
		return 0;
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 16384;
		char *nb;

		while (cap < b->len + n + 1)
			cap *= 2;
		nb = realloc(b->buf, cap);
		if (!nb)
			return 0;
		b->buf = nb;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, data, n);
	b->len += n;
	b->buf[b->len] = '\0';
	return n;
}

/* POST, PUT and PATCH carry a body, if an empty one. */
static bool has_body(const char *method)
{
	return !strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "PATCH");
}

/* Every socket close-on-exec: the plugin goes on to exec IPAM plugins. */
static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
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

struct lookup {
	const struct hpn_kubeconfig *kc;
	const struct hpn_kube_call *call;
	CURL *h;
	char errbuf[CURL_ERROR_SIZE];
	struct body body;
	struct hpn_err *err;
	/* Where the last retryable attempt failed, for the code 11 message. */
	char why[CURL_ERROR_SIZE + 64];
	long long retry_after_ms;
	bool closed;  /* a connection was closed on us after it was made */
	bool unacted; /* the last failure is one the server never acted on */
};

enum verdict { DONE, RETRY, FAIL };

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

__attribute__((format(printf, 5, 6))) static int fail(struct lookup *l, int code, int e,
						      const char *details, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfail(l->kc, l->call, l->err, code, e, details, fmt, ap);
	va_end(ap);
	return r;
}

__attribute__((format(printf, 7, 8))) static int
call_fail(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call, struct hpn_err *err,
	  int code, int e, const char *details, const char *fmt, ...)
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

static void forbidden(struct lookup *l, const char *details, int *r)
{
	const struct hpn_kube_call *call = l->call;
	const char *verb = rbac_verb(call);

	if (!call->resource)
		*r = fail(l, HPN_E_KUBE, EPERM, details,
			  "403 Forbidden: user \"%s\" of kubeconfig %s may not %s %s", l->kc->user,
			  l->kc->path, verb, call->what);
	else
		*r = fail(l, HPN_E_KUBE, EPERM, details,
			  "403 Forbidden: user \"%s\" of kubeconfig %s may not %s %s%s%s (it needs "
			  "RBAC %s on %s)",
			  l->kc->user, l->kc->path, verb, call->resource,
			  call->ns ? " in namespace " : "", call->ns ? call->ns : "", verb,
			  call->resource);
}

/* DONE: an answer for the caller; RETRY; FAIL: *r is the error. */
static enum verdict http_status(struct lookup *l, long status, int *r)
{
	char said[HPN_ERR_DETAILS / 2], details[HPN_ERR_DETAILS];
	curl_off_t after = 0;

	if (status >= 200 && status <= 299)
		return DONE;
	if (status == 429 || (status >= 500 && status <= 599)) {
		if (k.easy_getinfo(l->h, CURLINFO_RETRY_AFTER, &after) != CURLE_OK || after < 0)
			after = 0;
		l->retry_after_ms = after > 3600 ? 3600000 : (long long)after * 1000;
		snprintf(l->why, sizeof(l->why), "HTTP %ld%s%s%s", status,
			 status == 429 ? " Too Many Requests" : "",
			 status == 503 ? " Service Unavailable" : "",
			 after ? " with Retry-After" : "");
		/* kube-apiserver's inflight limits refuse before the handler runs. */
		l->unacted = status == 429;
		return RETRY;
	}
	if (status != 401 && status != 403)
		return DONE;
	status_message(is_json(l->body.type) ? l->body.buf : NULL, l->body.len, said, sizeof(said));
	snprintf(details, sizeof(details), "%s%s", said[0] ? "the API server says: " : "", said);
	if (status == 401)
		*r = fail(l, HPN_E_KUBE, EACCES, details,
			  "401 Unauthorized: the server does not accept the credentials of user "
			  "\"%s\" (kubeconfig %s)",
			  l->kc->user, l->kc->path);
	else
		forbidden(l, details, r);
	return FAIL;
}

static enum verdict curl_result(struct lookup *l, CURLcode rc, int *r)
{
	const char *text = l->errbuf[0] ? l->errbuf : k.easy_strerror(rc);
	long verify = 0;

	switch (rc) {
	case CURLE_OK:
		return DONE;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
		/* TLS 1.3 reports a refused client certificate on the first read. */
		if (strstr(text, "alert")) {
			*r = fail(l, HPN_E_KUBE, EACCES, text,
				  "the server ended the TLS session (%s): does it trust user "
				  "\"%s\"'s client certificate?",
				  text, l->kc->user);
			return FAIL;
		}
		snprintf(l->why, sizeof(l->why), "%s", text);
		/* Nothing was sent when there was no connection. */
		l->unacted = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST;
		if (!l->unacted)
			l->closed = true;
		return RETRY;
	case CURLE_OPERATION_TIMEDOUT:
		snprintf(l->why, sizeof(l->why), "no answer in time (%s)", text);
		return RETRY; /* the budget is spent: the caller fails with code 11 */
	case CURLE_PEER_FAILED_VERIFICATION:
		/*
		 * OpenSSL's verdict on the chain (X509_V_ERR_*). A name that does not
		 * match is 62 (host) or 64 (IP) when OpenSSL checks it, 0 or 1 when
		 * libcurl does, after a chain that verified.
		 */
		k.easy_getinfo(l->h, CURLINFO_SSL_VERIFYRESULT, &verify);
		if (verify == 9 || verify == 10)
			*r = fail(l, HPN_E_KUBE, EBADMSG, text,
				  "TLS: the server's certificate is expired or not yet valid");
		else if (verify <= 1 || verify == 62 || verify == 64)
			*r = fail(l, HPN_E_KUBE, EBADMSG, text,
				  "TLS: the server's certificate is not issued for the host of "
				  "cluster \"%s\"'s server URL",
				  l->kc->cluster);
		else
			*r = fail(l, HPN_E_KUBE, EBADMSG, text,
				  "TLS: the server's certificate is not signed by the kubeconfig's "
				  "%s (cluster \"%s\")",
				  l->kc->ca_from, l->kc->cluster);
		return FAIL;
	case CURLE_FILESIZE_EXCEEDED:
	case CURLE_WRITE_ERROR:
		if (l->body.not_json)
			*r = fail(l, HPN_E_KUBE, EPROTO, NULL,
				  "the answer's Content-Type is \"%s\", not application/json",
				  l->body.type);
		else if (l->body.too_big || rc == CURLE_FILESIZE_EXCEEDED)
			*r = fail(l, HPN_E_KUBE, EFBIG, NULL, "the answer is larger than %d bytes",
				  HPN_KUBE_BODY_MAX);
		else
			*r = fail(l, HPN_E_INTERNAL, ENOMEM, NULL, "out of memory");
		return FAIL;
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
		*r = fail(l, HPN_E_INVALID_CONFIG, EINVAL, text,
			  "TLS: the %s of kubeconfig %s cannot be used (%s)",
			  rc == CURLE_SSL_CERTPROBLEM ? "client certificate or key" : "CA",
			  l->kc->path, text);
		return FAIL;
	default:
		*r = fail(l, HPN_E_KUBE, EPROTO, text, "%s", text);
		return FAIL;
	}
}

static int setup(struct lookup *l, const char *url, struct curl_slist *headers)
{
	const struct hpn_kubeconfig *kc = l->kc;
	const struct hpn_kube_call *call = l->call;
	struct curl_blob ca = { .data = kc->ca, .len = kc->ca_len, .flags = CURL_BLOB_COPY };
	struct curl_blob cert = { .data = kc->cert, .len = kc->cert_len, .flags = CURL_BLOB_COPY };
	struct curl_blob key = { .data = kc->key, .len = kc->key_len, .flags = CURL_BLOB_COPY };
	CURL *h = l->h;
	CURLcode rc = CURLE_OK;

#define SET(opt, val)                                                                              \
	do {                                                                                       \
		if (rc == CURLE_OK)                                                                \
			rc = k.easy_setopt(h, opt, val);                                           \
	} while (0)
	SET(CURLOPT_URL, url);
	SET(CURLOPT_HTTPHEADER, headers);
	SET(CURLOPT_USERAGENT, "hpn-rdma/" HPN_VERSION);
	SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_PROXY, ""); /* never https_proxy from the environment */
	SET(CURLOPT_SSL_VERIFYPEER, 1L);
	SET(CURLOPT_SSL_VERIFYHOST, 2L);
	/* Only the kubeconfig's CA: not the system's bundle or directory. */
	SET(CURLOPT_CAINFO, (char *)NULL);
	SET(CURLOPT_CAPATH, (char *)NULL);
	SET(CURLOPT_CAINFO_BLOB, &ca);
	if (kc->cert) {
		SET(CURLOPT_SSLCERTTYPE, "PEM");
		SET(CURLOPT_SSLCERT_BLOB, &cert);
		SET(CURLOPT_SSLKEYTYPE, "PEM");
		SET(CURLOPT_SSLKEY_BLOB, &key);
	}
	/*
	 * A body goes out as POSTFIELDS (resent as is by every attempt) under
	 * the call's method; POST, PUT and PATCH always send one, if empty.
	 */
	if (strcmp(call->method, "GET") != 0)
		SET(CURLOPT_CUSTOMREQUEST, call->method);
	if (call->body || has_body(call->method)) {
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(call->body ? call->body_len : 0));
		SET(CURLOPT_POSTFIELDS, call->body ? call->body : "");
	}
	SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)HPN_KUBE_BODY_MAX);
	SET(CURLOPT_WRITEFUNCTION, on_data);
	SET(CURLOPT_WRITEDATA, &l->body);
	SET(CURLOPT_OPENSOCKETFUNCTION, open_socket);
	SET(CURLOPT_ERRORBUFFER, l->errbuf);
#undef SET
	if (rc != CURLE_OK)
		return hpn_err_set(l->err, HPN_E_KUBE, ENOTSUP, "libcurl: %s", k.easy_strerror(rc));
	/* https only, where libcurl knows the option (7.85.0 on); the URL is https:// anyway. */
	k.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
	return 0;
}

static void headers_free(struct curl_slist *h)
{
	for (struct curl_slist *p = h; p; p = p->next)
		explicit_bzero(p->data, strlen(p->data));
	if (h)
		k.slist_free_all(h);
}

/* One call, its attempts and waits inside the budget; see kube.h. */
static int perform(struct lookup *l, const char *url, struct curl_slist *headers,
		   struct hpn_kube_answer *ret)
{
	const struct hpn_kube_call *call = l->call;
	unsigned timeout = call->timeout_ms ? call->timeout_ms : HPN_KUBE_TIMEOUT_MS_DEFAULT;
	long long start = now_ms(), deadline = start + timeout, backoff = 100;
	unsigned attempts = 0;
	long status = 0;
	bool done = false;
	int r;

	r = setup(l, url, headers);
	if (r < 0)
		return r;
	while (!done) {
		long long left = deadline - now_ms(), wait;
		enum verdict v;
		CURLcode rc;

		if (left <= 0)
			break;
		free(l->body.buf);
		memset(&l->body, 0, sizeof(l->body));
		l->body.h = l->h;
		l->errbuf[0] = '\0';
		l->retry_after_ms = 0;
		l->unacted = false;
		k.easy_setopt(l->h, CURLOPT_TIMEOUT_MS, (long)left);
		k.easy_setopt(l->h, CURLOPT_CONNECTTIMEOUT_MS, (long)left);
		rc = k.easy_perform(l->h);
		attempts++;
		v = curl_result(l, rc, &r);
		if (v == DONE) {
			k.easy_getinfo(l->h, CURLINFO_RESPONSE_CODE, &status);
			v = http_status(l, status, &r);
		}
		if (v == FAIL)
			return r;
		if (v == DONE) {
			done = true;
			break;
		}
		/* Not idempotent, and perhaps done: the caller reads before it repeats. */
		if (!call->retry && !l->unacted)
			break;
		if (attempts >= HPN_KUBE_ATTEMPTS)
			break;
		wait = l->retry_after_ms > backoff ? l->retry_after_ms : backoff;
		backoff *= 2;
		if (now_ms() + wait >= deadline) {
			if (l->retry_after_ms)
				snprintf(l->why + strlen(l->why), sizeof(l->why) - strlen(l->why),
					 " of %lld s, past the %u ms budget",
					 l->retry_after_ms / 1000, timeout);
			break;
		}
		sleep_ms(wait);
	}
	if (!done) {
		if (!l->why[0])
			snprintf(l->why, sizeof(l->why), "no answer within %u ms", timeout);
		/*
		 * With TLS 1.3 a server that refuses our client certificate says so
		 * after the handshake, and its alert is often lost to the reset that
		 * follows: say what it may be.
		 */
		return fail(l, HPN_E_TRY_AGAIN, EAGAIN, NULL,
			    "%s; %u attempt%s in %lld ms%s, try again later%s%s%s", l->why,
			    attempts, attempts == 1 ? "" : "s", now_ms() - start,
			    call->retry || l->unacted ? ""
						      : " (not repeated: it may have been done)",
			    l->closed && l->kc->cert ? " (or the server refuses the client "
						       "certificate of user \""
						     : "",
			    l->closed && l->kc->cert ? l->kc->user : "",
			    l->closed && l->kc->cert ? "\")" : "");
	}
	if (!l->body.buf) {
		l->body.buf = calloc(1, 1);
		if (!l->body.buf)
			return fail(l, HPN_E_INTERNAL, ENOMEM, NULL, "out of memory");
	}
	*ret = (struct hpn_kube_answer){ .status = status,
					 .body = l->body.buf,
					 .len = l->body.len };
	l->body.buf = NULL;
	return 0;
}

/* The characters of a URL's path and query (RFC 3986 pchar, '/', '?', '%'). */
static bool url_path(const char *p)
{
	if (!p || p[0] != '/' || strlen(p) > 4096)
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

static int check_call(const struct hpn_kube_call *call, struct hpn_err *err)
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
	if (!url_path(call->path))
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
				   "Kubernetes API request: path \"%.128s\" is not an escaped "
				   "absolute path",
				   call->path ? call->path : "");
	/* A body would turn libcurl's GET into a POST; the API's GETs take none. */
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

/* Appends a header, freeing the list when it cannot. */
static struct curl_slist *header(struct curl_slist *list, const char *line)
{
	struct curl_slist *nl;

	if (!list)
		return NULL;
	nl = k.slist_append(list, line);
	if (!nl)
		headers_free(list);
	return nl;
}

/*
 * What every call starts with: the call checked, its URL, its Authorization
 * header (NULL without a token; free with hpn_kube_token_free), libcurl
 * opened. On failure nothing is left to free.
 */
static int call_start(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call, char **url,
		      char **auth, struct hpn_kube_warn *warn, struct hpn_err *err)
{
	char *token = NULL;
	int r = check_call(call, err);

	*url = *auth = NULL;
	if (r < 0)
		return r;
	if (asprintf(url, "%s%s", kc->server, call->path) < 0) {
		*url = NULL;
		return -ENOMEM;
	}
	r = hpn_kubeconfig_token(kc, &token, warn, err);
	if (r >= 0 && token && asprintf(auth, "Authorization: Bearer %s", token) < 0) {
		*auth = NULL;
		r = -ENOMEM;
	}
	hpn_kube_token_free(token);
	if (r >= 0)
		r = curl_lib(err);
	if (r < 0) {
		hpn_kube_token_free(*auth);
		free(*url);
		*url = *auth = NULL;
	}
	return r < 0 ? r : 0;
}

int hpn_kube_request(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call,
		     struct hpn_kube_answer *ret, struct hpn_kube_warn *warn, struct hpn_err *err)
{
	struct lookup l = { .kc = kc, .call = call, .err = err };
	struct curl_slist *headers = NULL;
	char *url = NULL, *auth = NULL, *type = NULL;
	int r;

	r = call_start(kc, call, &url, &auth, warn, err);
	if (r < 0)
		return r;
	if ((call->body || has_body(call->method)) &&
	    asprintf(&type, "Content-Type: %s",
		     call->content_type ? call->content_type : "application/json") < 0) {
		type = NULL;
		r = -ENOMEM;
		goto out;
	}
	r = -ENOMEM;
	headers = k.slist_append(NULL, "Accept: application/json");
	if (type) {
		headers = header(headers, type);
		/* No "Expect: 100-continue" round trip before a large body. */
		headers = header(headers, "Expect:");
	}
	if (auth)
		headers = header(headers, auth);
	if (!headers)
		goto out;
	l.h = k.easy_init();
	if (!l.h)
		goto out;
	r = perform(&l, url, headers, ret);
out:
	if (l.h)
		k.easy_cleanup(l.h);
	free(l.body.buf);
	headers_free(headers);
	hpn_kube_token_free(auth);
	free(type);
	free(url);
	return r;
}

/* A watch's stream: the 200's bytes to the caller, any other status's body kept (bounded). */
struct stream {
	CURL *h;
	const struct hpn_kube_stream *st;
	long status;
	struct body other;
	bool stopped;
};

static size_t on_stream(char *data, size_t size, size_t nmemb, void *arg)
{
	struct stream *s = arg;
	size_t n = size * nmemb;

	if (!s->status) {
		char *t = NULL;

		k.easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &s->status);
		k.easy_getinfo(s->h, CURLINFO_CONTENT_TYPE, &t);
		if (s->status == 200 && !is_json(t)) {
			s->other.not_json = true;
			snprintf(s->other.type, sizeof(s->other.type), "%s", t ? t : "");
			return 0;
		}
		s->other.h = s->h;
	}
	if (s->status != 200)
		return on_data(data, size, nmemb, &s->other);
	if (s->st->on_data(s->st->ud, data, n) < 0) {
		s->stopped = true;
		return 0;
	}
	return n;
}

/* Called at least once a second by libcurl, also while nothing arrives. */
static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct stream *s = arg;

	if (s->st->stop && s->st->stop(s->st->ud)) {
		s->stopped = true;
		return 1;
	}
	return 0;
}

int hpn_kube_stream(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call,
		    const struct hpn_kube_stream *st, struct hpn_kube_answer *ret,
		    struct hpn_kube_warn *warn, struct hpn_err *err)
{
	struct lookup l = { .kc = kc, .call = call, .err = err };
	struct stream s = { .st = st };
	struct curl_slist *headers = NULL;
	char *url = NULL, *auth = NULL;
	long status = 0;
	CURLcode rc;
	int r;

	if (call->method && strcmp(call->method, "GET") != 0)
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL, "a stream is a GET");
	r = call_start(kc, call, &url, &auth, warn, err);
	if (r < 0)
		return r;
	r = -ENOMEM;
	headers = k.slist_append(NULL, "Accept: application/json");
	if (auth)
		headers = header(headers, auth);
	if (!headers)
		goto out;
	l.h = s.h = k.easy_init();
	if (!l.h)
		goto out;
	r = setup(&l, url, headers);
	if (r < 0)
		goto out;
	/* One request, no retry: the caller's loop re-watches; no size limit on a stream. */
	k.easy_setopt(l.h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)0);
	k.easy_setopt(l.h, CURLOPT_WRITEFUNCTION, on_stream);
	k.easy_setopt(l.h, CURLOPT_WRITEDATA, &s);
	k.easy_setopt(l.h, CURLOPT_NOPROGRESS, 0L);
	k.easy_setopt(l.h, CURLOPT_XFERINFOFUNCTION, on_progress);
	k.easy_setopt(l.h, CURLOPT_XFERINFODATA, &s);
	k.easy_setopt(l.h, CURLOPT_CONNECTTIMEOUT_MS, (long)HPN_KUBE_TIMEOUT_MS_DEFAULT);
	k.easy_setopt(l.h, CURLOPT_TIMEOUT_MS, (long)call->timeout_ms);
	rc = k.easy_perform(l.h);
	k.easy_getinfo(l.h, CURLINFO_RESPONSE_CODE, &status);
	if (s.stopped) {
		r = hpn_err_set(err, HPN_E_TRY_AGAIN, ECANCELED, "Kubernetes API %s: %s: stopped",
				kc->server, call->what);
		goto out;
	}
	/* A watch that ends at its timeout ended well: the server or we closed it. */
	if (rc == CURLE_OPERATION_TIMEDOUT && status == 200)
		rc = CURLE_OK;
	if (rc != CURLE_OK) {
		enum verdict v;

		l.body = s.other;
		v = curl_result(&l, rc, &r);
		s.other = l.body;
		memset(&l.body, 0, sizeof(l.body));
		if (v != FAIL)
			r = fail(&l, HPN_E_TRY_AGAIN, EAGAIN, NULL, "%s",
				 l.why[0] ? l.why : "the stream broke");
		goto out;
	}
	if (status != 200) {
		enum verdict v;

		l.body = s.other;
		v = http_status(&l, status, &r);
		s.other = l.body;
		memset(&l.body, 0, sizeof(l.body));
		if (v == FAIL)
			goto out;
		if (v == RETRY) {
			r = fail(&l, HPN_E_TRY_AGAIN, EAGAIN, NULL, "%s", l.why);
			goto out;
		}
	}
	*ret = (struct hpn_kube_answer){ .status = status,
					 .body = s.other.buf ? s.other.buf : strdup(""),
					 .len = s.other.len };
	if (!ret->body) {
		r = -ENOMEM;
		goto out;
	}
	s.other.buf = NULL;
	r = 0;
out:
	if (l.h)
		k.easy_cleanup(l.h);
	free(s.other.buf);
	headers_free(headers);
	hpn_kube_token_free(auth);
	free(url);
	return r;
}

int hpn_kube_init(struct hpn_err *err)
{
	return curl_lib(err);
}

void hpn_kube_answer_free(struct hpn_kube_answer *a)
{
	if (!a)
		return;
	free(a->body);
	a->body = NULL;
	a->len = 0;
}

int hpn_kube_status_err(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call,
			const struct hpn_kube_answer *a, struct hpn_err *err)
{
	char said[HPN_ERR_DETAILS / 2], details[HPN_ERR_DETAILS];

	status_message(a->body, a->len, said, sizeof(said));
	snprintf(details, sizeof(details), "%s%s", said[0] ? "the API server says: " : "", said);
	switch (a->status) {
	case 404:
		return call_fail(kc, call, err, HPN_E_UNKNOWN_CONTAINER, ENOENT, details,
				 "404 Not Found: %s does not exist", call->what);
	case 409:
		return call_fail(kc, call, err, HPN_E_KUBE, EBUSY, details,
				 "409 Conflict: %s was changed since it was read, or already "
				 "exists",
				 call->what);
	case 422:
		return call_fail(kc, call, err, HPN_E_KUBE, EINVAL, details,
				 "422 Invalid: the API server refused %s", call->what);
	default:
		return call_fail(kc, call, err, HPN_E_KUBE, EPROTO, details,
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

static bool mirror_of(const char *mirror, const char *uid)
{
	return mirror && !strcmp(mirror, uid);
}

static int check_identity(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call,
			  const struct hpn_kube_req *req, const struct hpn_pod *pod,
			  struct hpn_err *err)
{
	if (strcmp(pod->ns, req->ns) || strcmp(pod->name, req->name))
		return call_fail(kc, call, err, HPN_E_UNKNOWN_CONTAINER, ESTALE, NULL,
				 "the answer is pod %s/%s, not the one asked for", pod->ns,
				 pod->name);
	/*
	 * A static pod (a manifest on the node) runs under the UID kubelet made
	 * from the manifest, which the runtime passes as K8S_POD_UID; the API
	 * holds its mirror pod, with a UID of its own and the static one in the
	 * kubernetes.io/config.mirror annotation (kubelet's config.mirror =
	 * config.hash = the static pod's UID).
	 */
	if (req->uid && strcmp(pod->uid, req->uid) &&
	    !mirror_of(hpn_pod_annotation(pod, HPN_KUBE_MIRROR_ANNOTATION), req->uid))
		return call_fail(kc, call, err, HPN_E_UNKNOWN_CONTAINER, ESTALE, NULL,
				 "the pod's uid is %s, not K8S_POD_UID %s: the pod was deleted and "
				 "another created under its name",
				 pod->uid, req->uid);
	return 0;
}

static int validate(const struct hpn_kube_req *req, struct hpn_err *err)
{
	if (!hpn_k8s_dns_label(req->ns))
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
				   "K8S_POD_NAMESPACE \"%.64s\" is not a namespace name (RFC 1123 "
				   "label)",
				   req->ns ? req->ns : "");
	if (!hpn_k8s_dns_subdomain(req->name))
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
				   "K8S_POD_NAME \"%.64s\" is not a pod name (RFC 1123 subdomain)",
				   req->name ? req->name : "");
	return 0;
}

int hpn_kube_get_pod(const struct hpn_kubeconfig *kc, const struct hpn_kube_req *req,
		     struct hpn_pod *ret, struct hpn_kube_warn *warn, struct hpn_err *err)
{
	/* A namespace is at most 63 characters, a name 253. */
	char path[64 + 63 + 253], what[8 + 63 + 253];
	struct hpn_kube_call call = { .method = "GET",
				      .path = path,
				      .what = what,
				      .resource = "pods",
				      .ns = req->ns,
				      .timeout_ms = req->timeout_ms,
				      .retry = true };
	struct hpn_kube_answer a = { 0 };
	struct hpn_pod pod;
	int r;

	/* Names go into the URL: checked before anything else happens. */
	r = validate(req, err);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", req->ns, req->name);
	snprintf(what, sizeof(what), "pod %s/%s", req->ns, req->name);
	r = hpn_kube_request(kc, &call, &a, warn, err);
	if (r < 0)
		return r;
	if (a.status != 200) {
		r = hpn_kube_status_err(kc, &call, &a, err);
		hpn_kube_answer_free(&a);
		return r;
	}
	r = hpn_pod_parse(a.body, a.len, req->resource, &pod, err);
	hpn_kube_answer_free(&a);
	if (r < 0) {
		hpn_err_prefix(err, "Kubernetes API %s: GET pod %s/%s", kc->server, req->ns,
			       req->name);
		return r;
	}
	r = check_identity(kc, &call, req, &pod, err);
	if (r < 0) {
		hpn_pod_free(&pod);
		return r;
	}
	*ret = pod;
	return 0;
}
