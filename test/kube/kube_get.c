// SPDX-License-Identifier: Apache-2.0
/*
 * kube_get: the library's Kubernetes API lookup, end to end, for
 * test/kube/kube.sh and the lookup's benchmark.
 *
 *   kube_get -k KUBECONFIG [-t TIMEOUT_MS] [-r RESOURCE] [-u UID] [-b CMD]
 *            [-l | -n] NS/NAME...
 *
 * Loads the kubeconfig once, then looks up each pod in turn, running CMD
 * (/bin/sh -c) between two lookups (a token file rotated between two calls of
 * one process). Per lookup, one line of JSON on stdout: the parsed pod
 * {"uid", "namespace", "name", "labels", "annotations", "resource", "count"}
 * or the CNI error {"code", "msg", "details"}; warnings go to stderr as
 * "warning: ...". A kubeconfig that does not load is one error line.
 * -l: load the kubeconfig and stop; -n: stop before even that (the cost of
 * starting this program, for the benchmark). Exit 0 when every step
 * succeeded, 1 when one failed, 2 on bad usage.
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"
#include "util.h"

static void print_json(cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);

	if (s)
		puts(s);
	fflush(stdout);
	free(s);
	cJSON_Delete(o);
}

static void print_err(const struct hpn_err *err, int r)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "code", err->code ? err->code : HPN_E_INTERNAL);
	cJSON_AddStringToObject(o, "msg", err->code ? err->msg : strerror(-r));
	cJSON_AddStringToObject(o, "details", err->details);
	print_json(o);
}

static void print_warn(const struct hpn_kube_warn *w)
{
	if (w->msg[0])
		fprintf(stderr, "warning: %s\n", w->msg);
}

static cJSON *kv_object(const struct hpn_pod_kv *kv, size_t n)
{
	cJSON *o = cJSON_CreateObject();

	for (size_t i = 0; i < n; i++)
		cJSON_AddStringToObject(o, kv[i].key, kv[i].value);
	return o;
}

static void print_pod(const struct hpn_pod *pod)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "uid", pod->uid);
	cJSON_AddStringToObject(o, "namespace", pod->ns);
	cJSON_AddStringToObject(o, "name", pod->name);
	cJSON_AddItemToObject(o, "labels", kv_object(pod->labels, pod->n_labels));
	cJSON_AddItemToObject(o, "annotations", kv_object(pod->annotations, pod->n_annotations));
	cJSON_AddStringToObject(o, "resource", pod->resource);
	cJSON_AddNumberToObject(o, "count", (double)pod->count);
	print_json(o);
}

static int usage(void)
{
	fprintf(stderr, "usage: kube_get -k KUBECONFIG [-t TIMEOUT_MS] [-r RESOURCE] [-u UID] "
			"[-b CMD] [-l | -n] NS/NAME...\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *kubeconfig = NULL, *between = NULL;
	struct hpn_kube_req req = { 0 };
	struct hpn_kubeconfig kc;
	struct hpn_kube_warn warn = { 0 };
	struct hpn_err err = { 0 };
	bool load_only = false;
	int c, r, status = 0;

	while ((c = getopt(argc, argv, "k:t:r:u:b:ln")) != -1) {
		switch (c) {
		case 'k':
			kubeconfig = optarg;
			break;
		case 't':
			req.timeout_ms = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'r':
			req.resource = optarg;
			break;
		case 'u':
			req.uid = optarg;
			break;
		case 'b':
			between = optarg;
			break;
		case 'l':
			load_only = true;
			break;
		case 'n':
			return 0;
		default:
			return usage();
		}
	}
	if (!kubeconfig || (optind == argc && !load_only))
		return usage();
	r = hpn_kubeconfig_load(kubeconfig, &kc, &warn, &err);
	print_warn(&warn);
	if (r < 0) {
		print_err(&err, r);
		return 1;
	}
	for (int i = optind; !load_only && i < argc; i++) {
		_cleanup_free_ char *arg = strdup(argv[i]);
		char *slash = arg ? strchr(arg, '/') : NULL;
		struct hpn_pod pod;

		if (!slash) {
			hpn_kubeconfig_free(&kc);
			return usage();
		}
		*slash = '\0';
		req.ns = arg;
		req.name = slash + 1;
		if (i > optind && between && system(between) != 0) {
			fprintf(stderr, "kube_get: %s failed\n", between);
			status = 1;
		}
		memset(&err, 0, sizeof(err));
		memset(&warn, 0, sizeof(warn));
		r = hpn_kube_get_pod(&kc, &req, &pod, &warn, &err);
		print_warn(&warn);
		if (r < 0) {
			print_err(&err, r);
			status = 1;
			continue;
		}
		print_pod(&pod);
		hpn_pod_free(&pod);
	}
	hpn_kubeconfig_free(&kc);
	return status;
}
