// SPDX-License-Identifier: Apache-2.0
/*
 * The Kubernetes API over libcurl: the transfer both transports share
 * (kubecurl.h) and the blocking transport the plugin uses (kube.h). What a
 * call means is kubecall.c's.
 */
#include "kube.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "dl.h"
#include "kubecurl.h"
#include "util.h"

/*
 * libcurl, opened on the first lookup. Linked into the plugin, libcurl and the
 * ~30 libraries it needs (OpenSSL, GnuTLS through librtmp, Kerberos, LDAP...)
 * were loaded, relocated and initialised by every run: measured with
 * hpn-bench-run, VERSION went from 0.9 to 7.1 ms of CPU. Called through this
 * table by their own names' fields, never by the libcurl names, so nothing
 * here links to libcurl (the headers are used for types and constants only).
 */
static struct hpn_curl k;
static bool loaded;

/* CURLOPT_CAINFO_BLOB and CURLINFO_RETRY_AFTER: 7.77.0 (0x074d00). */
#define CURL_NEEDED 0x074d00

int hpn_curl_get(const struct hpn_curl **ret, struct hpn_err *err)
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
		{ "curl_multi_init", (void **)&k.multi_init },
		{ "curl_multi_setopt", (void **)&k.multi_setopt },
		{ "curl_multi_add_handle", (void **)&k.multi_add_handle },
		{ "curl_multi_remove_handle", (void **)&k.multi_remove_handle },
		{ "curl_multi_socket_action", (void **)&k.multi_socket_action },
		{ "curl_multi_info_read", (void **)&k.multi_info_read },
		{ "curl_multi_assign", (void **)&k.multi_assign },
		{ "curl_multi_cleanup", (void **)&k.multi_cleanup },
		{ "curl_multi_strerror", (void **)&k.multi_strerror },
	};

	if (!loaded) {
		const curl_version_info_data *v;
		int r = hpn_dl_load("libcurl.so.4", "libcurl4", syms, HPN_ARRAY_SIZE(syms),
				    HPN_E_KUBE, err);

		if (r < 0)
			return r;
		v = k.version_info(CURLVERSION_NOW);
		if (!v || v->version_num < CURL_NEEDED || !(v->features & CURL_VERSION_SSL))
			return hpn_err_set(err, HPN_E_KUBE, ENOTSUP,
					   "libcurl.so.4 is version %s%s: the Kubernetes lookup "
					   "needs 7.77.0 or later, with TLS",
					   v ? v->version : "?",
					   v && !(v->features & CURL_VERSION_SSL) ? " without TLS"
										  : "");
		if (k.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return hpn_err_set(err, HPN_E_KUBE, ENOMEM, "curl_global_init failed");
		loaded = true;
	}
	*ret = &k;
	return 0;
}

static long long now_ms(void)
{
	return hpn_mono_ms();
}

static void sleep_ms(long long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The answer's bytes: a stream's 200 to its owner, anything else kept (bounded). */
static size_t on_bytes(char *data, size_t size, size_t nmemb, void *arg)
{
	struct hpn_kube_xfer *x = arg;
	size_t n = size * nmemb;

	if (!x->body.status && !x->streaming) {
		long status = 0;
		char *t = NULL;

		x->c->easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
		x->c->easy_getinfo(x->h, CURLINFO_CONTENT_TYPE, &t);
		if (x->on_data && status == 200 && hpn_kube_is_json(t)) {
			x->streaming = true;
			x->body.status = status;
		} else if (!hpn_kube_body_add(&x->body, status, t, data, n)) {
			return 0;
		} else {
			return n;
		}
	}
	if (x->streaming) {
		if (x->on_data(x->ud, data, n) < 0) {
			x->stopped = true;
			return 0;
		}
		return n;
	}
	return hpn_kube_body_add(&x->body, x->body.status, x->body.type, data, n) ? n : 0;
}

/* Every socket close-on-exec: the plugin goes on to exec IPAM plugins. */
static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static int setup(struct hpn_kube_xfer *x, const struct hpn_kubeconfig *kc,
		 const struct hpn_kube_call *call, struct hpn_err *err)
{
	struct curl_blob ca = { .data = kc->ca, .len = kc->ca_len, .flags = CURL_BLOB_COPY };
	struct curl_blob cert = { .data = kc->cert, .len = kc->cert_len, .flags = CURL_BLOB_COPY };
	struct curl_blob key = { .data = kc->key, .len = kc->key_len, .flags = CURL_BLOB_COPY };
	CURL *h = x->h;
	CURLcode rc = CURLE_OK;

#define SET(opt, val)                                                                              \
	do {                                                                                       \
		if (rc == CURLE_OK)                                                                \
			rc = k.easy_setopt(h, opt, val);                                           \
	} while (0)
	SET(CURLOPT_URL, x->url);
	SET(CURLOPT_HTTPHEADER, x->headers);
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
	if (hpn_kube_call_has_body(call)) {
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(call->body ? call->body_len : 0));
		SET(CURLOPT_POSTFIELDS, call->body ? call->body : "");
	}
	/* A stream is unbounded; the rest is held to HPN_KUBE_BODY_MAX by on_bytes too. */
	SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)(x->on_data ? 0 : HPN_KUBE_BODY_MAX));
	SET(CURLOPT_WRITEFUNCTION, on_bytes);
	SET(CURLOPT_WRITEDATA, x);
	SET(CURLOPT_OPENSOCKETFUNCTION, open_socket);
	SET(CURLOPT_ERRORBUFFER, x->errbuf);
	SET(CURLOPT_PRIVATE, x);
#undef SET
	if (rc != CURLE_OK)
		return hpn_err_set(err, HPN_E_KUBE, ENOTSUP, "libcurl: %s", k.easy_strerror(rc));
	/* https only, where libcurl knows the option (7.85.0 on); the URL is https:// anyway. */
	k.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
	return 0;
}

void hpn_kube_xfer_close(struct hpn_kube_xfer *x)
{
	if (x->h)
		k.easy_cleanup(x->h);
	if (x->headers)
		k.slist_free_all(x->headers);
	hpn_kube_headers_free(x->lines);
	hpn_kube_body_reset(&x->body);
	free(x->url);
	memset(x, 0, sizeof(*x));
}

int hpn_kube_xfer_open(struct hpn_kube_xfer *x, const struct hpn_kubeconfig *kc,
		       const struct hpn_kube_call *call,
		       int (*on_data)(void *ud, const char *data, size_t len), void *ud,
		       struct hpn_kube_warn *warn, struct hpn_err *err)
{
	char *token = NULL;
	int r;

	memset(x, 0, sizeof(*x));
	r = hpn_kube_call_check(call, on_data != NULL, err);
	if (r < 0)
		return r;
	x->on_data = on_data;
	x->ud = ud;
	r = hpn_curl_get(&x->c, err);
	if (r < 0)
		return r;
	r = hpn_kubeconfig_token(kc, &token, warn, err);
	if (r < 0)
		return r;
	r = hpn_kube_headers(call, token, &x->lines);
	hpn_kube_token_free(token);
	if (r < 0)
		return r;
	r = -ENOMEM;
	if (asprintf(&x->url, "%s%s", kc->server, call->path) < 0) {
		x->url = NULL;
		goto fail;
	}
	for (size_t i = 0; x->lines[i]; i++) {
		struct curl_slist *nl = k.slist_append(x->headers, x->lines[i]);

		if (!nl)
			goto fail;
		x->headers = nl;
	}
	x->h = k.easy_init();
	if (!x->h)
		goto fail;
	r = setup(x, kc, call, err);
	if (r < 0)
		goto fail;
	hpn_kube_try_start(&x->t, kc, call, now_ms());
	return 0;
fail:
	hpn_kube_xfer_close(x);
	return r;
}

void hpn_kube_xfer_rearm(struct hpn_kube_xfer *x, long long timeout_ms)
{
	hpn_kube_body_reset(&x->body);
	x->errbuf[0] = '\0';
	x->streaming = x->stopped = false;
	if (timeout_ms < 1)
		timeout_ms = 1;
	k.easy_setopt(x->h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	/* A stream's timeout is its length: connecting gets a request's default. */
	k.easy_setopt(x->h, CURLOPT_CONNECTTIMEOUT_MS,
		      (long)(x->on_data && timeout_ms > HPN_KUBE_TIMEOUT_MS_DEFAULT
				     ? HPN_KUBE_TIMEOUT_MS_DEFAULT
				     : timeout_ms));
}

void hpn_kube_xfer_outcome(struct hpn_kube_xfer *x, CURLcode rc, struct hpn_kube_attempt *a)
{
	curl_off_t after = 0;
	long status = 0;

	*a = (struct hpn_kube_attempt){ .text = x->errbuf[0] ? x->errbuf : k.easy_strerror(rc) };
	k.easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
	a->status = status;
	switch (rc) {
	case CURLE_OK:
		a->net = HPN_KUBE_NET_OK;
		if ((status == 429 || status >= 500) &&
		    k.easy_getinfo(x->h, CURLINFO_RETRY_AFTER, &after) == CURLE_OK)
			a->retry_after_s = after;
		break;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
		a->net = HPN_KUBE_NET_UNSENT;
		break;
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
		/* TLS 1.3 reports a refused client certificate on the first read. */
		a->net = strstr(a->text, "alert") ? HPN_KUBE_NET_TLS_ALERT : HPN_KUBE_NET_BROKEN;
		break;
	case CURLE_OPERATION_TIMEDOUT:
		a->net = HPN_KUBE_NET_TIMEOUT;
		break;
	case CURLE_PEER_FAILED_VERIFICATION:
		a->net = HPN_KUBE_NET_TLS_VERIFY;
		k.easy_getinfo(x->h, CURLINFO_SSL_VERIFYRESULT, &a->verify);
		break;
	case CURLE_FILESIZE_EXCEEDED:
		x->body.too_big = true;
		a->net = HPN_KUBE_NET_STOPPED;
		break;
	case CURLE_WRITE_ERROR:
		a->net = HPN_KUBE_NET_STOPPED;
		break;
	case CURLE_SSL_CERTPROBLEM:
		a->net = HPN_KUBE_NET_CREDS;
		break;
	case CURLE_SSL_CACERT_BADFILE:
		a->net = HPN_KUBE_NET_CA;
		break;
	default:
		a->net = HPN_KUBE_NET_OTHER;
		break;
	}
}

int hpn_kube_xfer_answer(struct hpn_kube_xfer *x, struct hpn_kube_answer *ret)
{
	long status = 0;

	k.easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
	if (!x->body.buf) {
		x->body.buf = calloc(1, 1);
		if (!x->body.buf)
			return -ENOMEM;
	}
	*ret = (struct hpn_kube_answer){ .status = status,
					 .body = x->body.buf,
					 .len = x->body.len };
	x->body.buf = NULL;
	hpn_kube_body_reset(&x->body);
	return 0;
}

int hpn_kube_request(const struct hpn_kubeconfig *kc, const struct hpn_kube_call *call,
		     struct hpn_kube_answer *ret, struct hpn_kube_warn *warn, struct hpn_err *err)
{
	struct hpn_kube_xfer x;
	int r;

	r = hpn_kube_xfer_open(&x, kc, call, NULL, NULL, warn, err);
	if (r < 0)
		return r;
	for (;;) {
		struct hpn_kube_attempt a;
		long long wait = 0;

		hpn_kube_xfer_rearm(&x, hpn_kube_try_left(&x.t, now_ms()));
		hpn_kube_xfer_outcome(&x, k.easy_perform(x.h), &a);
		switch (hpn_kube_try_judge(&x.t, &a, &x.body, now_ms(), &wait, &r, err)) {
		case HPN_KUBE_ANSWER:
			r = hpn_kube_xfer_answer(&x, ret);
			goto out;
		case HPN_KUBE_FAILED:
			goto out;
		case HPN_KUBE_AGAIN:
			sleep_ms(wait);
			break;
		}
	}
out:
	hpn_kube_xfer_close(&x);
	return r;
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
		return hpn_kube_call_err(kc, call, err, HPN_E_UNKNOWN_CONTAINER, ESTALE, NULL,
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
		return hpn_kube_call_err(
			kc, call, err, HPN_E_UNKNOWN_CONTAINER, ESTALE, NULL,
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
