/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_KUBECURL_H
#define HPN_KUBECURL_H

#include <curl/curl.h>
#include <stdbool.h>

#include "kubecall.h"

/*
 * libcurl for the Kubernetes API's two transports: lib/kube.c's blocking
 * one (the plugin) and the agent's multi on its loop (agent/core/kubeloop.c).
 * libcurl is dlopen()ed on first use (see kube.c): callers reach it only
 * through this table, so nothing links to it.
 */
struct hpn_curl {
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
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_setopt)(CURLM *m, CURLMoption opt, ...);
	CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_socket_action)(CURLM *m, curl_socket_t s, int ev, int *running);
	CURLMsg *(*multi_info_read)(CURLM *m, int *left);
	CURLMcode (*multi_assign)(CURLM *m, curl_socket_t s, void *p);
	CURLMcode (*multi_cleanup)(CURLM *m);
	const char *(*multi_strerror)(CURLMcode rc);
};

/*
 * libcurl loaded and curl_global_init run (once; on the process's first
 * thread when others will make requests: before 7.84 it is not
 * thread-safe). Errors (HPN_E_KUBE) for a libcurl it cannot use.
 */
int hpn_curl_get(const struct hpn_curl **ret, struct hpn_err *err);

/*
 * One call's transfer: an easy handle set up for call to kc's server (TLS
 * always verified against kc's CA only, kc's client certificate as memory
 * blobs, the bearer token read now, no proxy, no redirect, HTTP/1.1), its
 * answer's bytes kept in body, its attempts judged by t (kubecall.h).
 * A stream's 200 goes to on_data as it comes instead (< 0 stops it).
 * kc and call are borrowed until hpn_kube_xfer_close.
 */
struct hpn_kube_xfer {
	CURL *h;
	const struct hpn_curl *c;
	struct curl_slist *headers;
	char **lines; /* the headers' text (the token zeroed when freed) */
	char *url;
	char errbuf[CURL_ERROR_SIZE];
	struct hpn_kube_body body;
	struct hpn_kube_try t;
	int (*on_data)(void *ud, const char *data, size_t len); /* NULL: a request */
	void *ud;
	bool streaming; /* the 200's bytes go to on_data */
	bool stopped;	/* on_data ended the stream */
};

/*
 * Sets x up (call checked first: nothing else happens for a bad one).
 * warn (may be NULL) gets what the caller should log. On failure nothing
 * is left to close.
 */
int hpn_kube_xfer_open(struct hpn_kube_xfer *x, const struct hpn_kubeconfig *kc,
		       const struct hpn_kube_call *call,
		       int (*on_data)(void *ud, const char *data, size_t len), void *ud,
		       struct hpn_kube_warn *warn, struct hpn_err *err);
/* Ready for an attempt of at most timeout_ms (a stream: the call's whole timeout). */
void hpn_kube_xfer_rearm(struct hpn_kube_xfer *x, long long timeout_ms);
/* How the attempt that libcurl ended with rc went, for hpn_kube_try_judge. */
void hpn_kube_xfer_outcome(struct hpn_kube_xfer *x, CURLcode rc, struct hpn_kube_attempt *a);
/* The body as the answer (never NULL); x's body emptied. */
int hpn_kube_xfer_answer(struct hpn_kube_xfer *x, struct hpn_kube_answer *ret);
void hpn_kube_xfer_close(struct hpn_kube_xfer *x);

#endif
