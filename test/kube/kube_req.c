// SPDX-License-Identifier: Apache-2.0
/*
 * kube_req: one hpn_kube_request, as the agent's DRA driver makes them, for
 * test/kube/kube.sh.
 *
 *   kube_req [-t TIMEOUT_MS] [-n] [-w WHAT] [-r RESOURCE] [-v VERB] [-N NS]
 *            [-q KEY=VALUE]... KUBECONFIG METHOD PATH [BODY_FILE [CONTENT_TYPE]]
 *
 * -q appends "KEY=VALUE" to PATH's query with VALUE escaped by
 * hpn_kube_query_escape (a fieldSelector, labelSelector or fieldManager);
 * -n: not idempotent (call.retry false; retried by default); -w: the call's
 * what (default PATH); -r, -v, -N: its RBAC resource, verb and namespace for
 * the 403 message.
 * Prints the status on the first line of stdout ("status 201"), then the body;
 * for a status other than 2xx, a last line of JSON {"code", "msg", "details"}
 * from hpn_kube_status_err. A failed request prints only that line.
 * Warnings go to stderr. Exit 0 on a 2xx, 1 otherwise, 2 on bad usage.
 * Built twice: kube_req makes the call with lib/kube.c's blocking transport
 * (the plugin's), kube_req_loop with the agent's, libcurl's multi on the
 * agent's loop (agent/core/kubeloop.c), so every scenario of slices.sh and
 * claims.sh runs through both. kube_req_loop's -s makes the call a watch:
 * its 200's bytes are printed as they come, then the status line.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube.h"
#include "util.h"
#ifdef HPN_KUBE_REQ_LOOP
#include "kubeloop.h"
#include "loop.h"
#endif

static void print_err(const struct hpn_err *err, int r)
{
	cJSON *o = cJSON_CreateObject();
	char *s;

	cJSON_AddNumberToObject(o, "code", err->code ? err->code : HPN_E_INTERNAL);
	cJSON_AddStringToObject(o, "msg", err->code ? err->msg : strerror(-r));
	cJSON_AddStringToObject(o, "details", err->details);
	s = cJSON_PrintUnformatted(o);
	if (s)
		puts(s);
	free(s);
	cJSON_Delete(o);
}

static int usage(void)
{
	fprintf(stderr,
		"usage: kube_req [-t TIMEOUT_MS] [-n] [-w WHAT] [-r RESOURCE] [-v VERB] [-N NS] "
		"[-q KEY=VALUE]... KUBECONFIG METHOD PATH [BODY_FILE [CONTENT_TYPE]]\n");
	return 2;
}

/* PATH with each KEY=VALUE of -q appended, VALUE escaped. */
static char *with_query(const char *path, char **q, size_t n)
{
	char *url = strdup(path);

	for (size_t i = 0; url && i < n; i++) {
		const char *eq = strchr(q[i], '=');
		char *value = NULL, *next = NULL;

		if (!eq || hpn_kube_query_escape(eq + 1, &value) < 0) {
			free(url);
			return NULL;
		}
		if (asprintf(&next, "%s%c%.*s=%s", url, strchr(url, '?') ? '&' : '?',
			     (int)(eq - q[i]), q[i], value) < 0)
			next = NULL;
		free(value);
		free(url);
		url = next;
	}
	return url;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t cap = 0, n;

	if (!f)
		return NULL;
	*len = 0;
	do {
		char *nb;

		if (*len + 65536 > cap) {
			cap = *len + 65536;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		n = fread(buf + *len, 1, cap - *len, f);
		*len += n;
	} while (n > 0);
	fclose(f);
	return buf;
}

#ifdef HPN_KUBE_REQ_LOOP
static bool watch;

struct outcome {
	struct loop *loop;
	struct kube_result res;
	bool done;
};

static void done(void *ud, struct kube_result *res)
{
	struct outcome *o = ud;

	o->res = *res;
	memset(res, 0, sizeof(*res)); /* the answer is ours now */
	o->done = true;
	loop_exit(o->loop, 0, NULL, NULL);
}

static int on_data(void *ud, const char *data, size_t len)
{
	(void)ud;
	fwrite(data, 1, len, stdout);
	fflush(stdout);
	return 0;
}

/* hpn_kube_request's contract, kept by the loop's transport. */
static int request(const char *kubeconfig, const struct hpn_kube_call *call,
		   struct hpn_kube_answer *ret, struct hpn_err *err)
{
	struct outcome o = { 0 };
	struct kubeloop *kl = NULL;
	int r;

	r = loop_new(&o.loop);
	if (r < 0)
		return r;
	r = kubeloop_new(o.loop, &kl, err);
	if (r >= 0)
		r = watch ? kube_watch(kl, kubeconfig, call, on_data, done, &o, NULL)
			  : kube_call(kl, kubeconfig, call, done, &o, NULL);
	if (r >= 0)
		r = loop_run(o.loop);
	if (r >= 0 && (!o.done || kubeloop_pending(kl)))
		r = hpn_err_set(err, HPN_E_INTERNAL, EPROTO,
				"the loop ended with the call pending");
	kubeloop_free(kl);
	loop_free(o.loop);
	if (r < 0)
		return r;
	if (o.res.r < 0) {
		*err = o.res.err;
		return o.res.r;
	}
	*ret = o.res.a;
	return 0;
}
#endif

/* The request and its printing; see the header. */
static int run(const char *kubeconfig, const struct hpn_kube_call *call)
{
	struct hpn_kubeconfig kc;
	struct hpn_kube_warn warn = { 0 };
	struct hpn_kube_answer a;
	struct hpn_err err = { 0 };
	int r;

	r = hpn_kubeconfig_load(kubeconfig, &kc, &warn, &err);
	if (r < 0) {
		print_err(&err, r);
		return 1;
	}
#ifdef HPN_KUBE_REQ_LOOP
	r = request(kubeconfig, call, &a, &err);
#else
	r = hpn_kube_request(&kc, call, &a, &warn, &err);
#endif
	if (warn.msg[0])
		fprintf(stderr, "warning: %s\n", warn.msg);
	if (r < 0) {
		print_err(&err, r);
		hpn_kubeconfig_free(&kc);
		return 1;
	}
	printf("status %ld\n", a.status);
	fwrite(a.body, 1, a.len, stdout);
	if (a.len && a.body[a.len - 1] != '\n')
		putchar('\n');
	if (a.status < 200 || a.status > 299) {
		r = hpn_kube_status_err(&kc, call, &a, &err);
		print_err(&err, r);
	}
	hpn_kube_answer_free(&a);
	hpn_kubeconfig_free(&kc);
	return r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct hpn_kube_call call = { .retry = true };
	char *q[16], *path, *body = NULL;
	size_t nq = 0;
	int c, status;

	while ((c = getopt(argc, argv, "+t:nw:r:v:N:q:s")) != -1) {
		switch (c) {
#ifdef HPN_KUBE_REQ_LOOP
		case 's':
			watch = true;
			break;
#endif
		case 't':
			call.timeout_ms = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'n':
			call.retry = false;
			break;
		case 'w':
			call.what = optarg;
			break;
		case 'r':
			call.resource = optarg;
			break;
		case 'v':
			call.verb = optarg;
			break;
		case 'N':
			call.ns = optarg;
			break;
		case 'q':
			if (nq == HPN_ARRAY_SIZE(q))
				return usage();
			q[nq++] = optarg;
			break;
		default:
			return usage();
		}
	}
	if (argc - optind < 3 || argc - optind > 5)
		return usage();
	call.method = argv[optind + 1];
	if (!call.what)
		call.what = argv[optind + 2];
	if (argc - optind >= 4) {
		body = read_file(argv[optind + 3], &call.body_len);
		if (!body) {
			fprintf(stderr, "kube_req: %s: %s\n", argv[optind + 3], strerror(errno));
			return 2;
		}
		call.body = body;
	}
	if (argc - optind == 5)
		call.content_type = argv[optind + 4];
	path = with_query(argv[optind + 2], q, nq);
	if (!path) {
		free(body);
		return usage();
	}
	call.path = path;
	status = run(argv[optind], &call);
	free(path);
	free(body);
	return status;
}
