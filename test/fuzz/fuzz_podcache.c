// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's pod cache (agent/podwatch.c offline, on podcache.c and
 * podstream.c): the list pages and the watch stream of GET
 * /api/v1/pods?fieldSelector=spec.nodeName=NODE as a hostile API server, or
 * tenants writing their pods, may send them.
 *
 * Input: a flags byte (bit 0: the plugin's keys, as podwatch_keep with the
 * config below, else every label and annotation; bit 1: small caps, 512
 * bytes a pod and 2048 in all, so that small inputs reach them; bits 2-7:
 * the size of the pieces the stream arrives in, 1 to 64 bytes), then
 * segments split by the line "@@": list pages while the last page asks for
 * more (its continue) or failed (asked again), then one watch stream, then a
 * list again, and so on.
 *
 * Two caches are fed the same segments, one whole, one in pieces: they end
 * each segment the same way and answer every pod named in the input with
 * the same bytes. Every answer is bounded, parses as the plugin parses it
 * (a pod, "unknown", or code 109 for a pod that is not a valid one), is the
 * pod asked for and, with keys, carries no other label or annotation; the
 * cache stays within its caps. When a list ends whole and each of its pages
 * is JSON, every item with a pod's identity is in the cache (or the cache
 * says it is full).
 */
#include <errno.h>
#include <string.h>

#include "conf.h"
#include "exposition.h"
#include "fuzz.h"
#include "kube.h"
#include "log.h"
#include "podask.h"
#include "podwatch.h"
#include "util.h"

#include <cjson/cJSON.h>

#define NAMES_MAX 64

static const char conf_text[] =
	"{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"hpn-rdma\",\"ifName\":\"hpn0\","
	"\"device\":\"eth1\",\"kubernetes\":{\"kubeconfig\":\"/etc/hpn/kubeconfig\","
	"\"gpuResource\":\"example.com/gpu\"},\"podSelector\":{\"label\":\"example.com/rdma\","
	"\"value\":\"yes\"},\"nccl\":{\"gpuModelLabel\":\"example.com/model\","
	"\"gpuModelAnnotation\":\"example.com/model-a\"}}";
static struct hpn_conf conf;

struct name {
	struct hpn_alloc_req req;
	bool in_list; /* a valid item of the list under way */
	bool seen;    /* an item of it, valid or not */
	bool twice;   /* named twice in it */
};

static struct name names[NAMES_MAX];
static size_t n_names;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct hpn_err err = { 0 };

	(void)argc;
	(void)argv;
	hpn_log_stderr(HPN_LOG_ERROR);
	if (hpn_conf_parse(conf_text, sizeof(conf_text) - 1, HPN_CMD_ADD, &conf, &err) < 0) {
		fprintf(stderr, "fuzz_podcache: the config: %s\n", err.msg);
		abort();
	}
	return 0;
}

static const char *str_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Does the object look like a pod the cache keeps (podcache.c's entry_of)? */
static bool identity(const cJSON *pod)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const char *ns = str_of(meta, "namespace"), *name = str_of(meta, "name");
	const char *uid = str_of(meta, "uid");

	return ns && name && uid && hpn_k8s_dns_label(ns) && hpn_k8s_dns_subdomain(name) &&
	       uid[0] && strlen(uid) <= HPN_POD_UID_MAX &&
	       cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(pod, "spec"));
}

/*
 * The pod's names, to ask for (list: an item of the list under way, which
 * the cache must hold when valid; another item of its name, valid or not, may
 * replace or drop it).
 */
static void note(const cJSON *pod, bool list, bool valid)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const char *ns = str_of(meta, "namespace"), *name = str_of(meta, "name");
	const char *uid = str_of(meta, "uid");
	struct hpn_alloc_req req;
	struct hpn_err err = { 0 };

	if (!ns || !name)
		return;
	for (size_t i = 0; i < n_names; i++) {
		if (strcmp(names[i].req.namespace, ns) || strcmp(names[i].req.name, name))
			continue;
		if (list && (names[i].in_list || names[i].seen))
			names[i].twice = true;
		names[i].seen |= list;
		if (list && valid && !hpn_alloc_req_set(&req, ns, name, uid, &err)) {
			/* The list's pod: its uid is the one to ask with. */
			names[i].req = req;
			names[i].in_list = true;
		}
		return;
	}
	if (n_names < NAMES_MAX &&
	    !hpn_alloc_req_set(&req, ns, name, uid && uid[0] ? uid : NULL, &err))
		names[n_names++] =
			(struct name){ .req = req, .in_list = list && valid, .seen = list };
}

/* A list page's items: noted; false when the page is not JSON with items whole. */
static bool note_page(const char *seg, size_t len)
{
	cJSON *o = hpn_json_parse(seg, len);
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(o, "items"), *it;
	bool whole = cJSON_IsArray(items);

	cJSON_ArrayForEach (it, items)
		note(it, true, identity(it));
	cJSON_Delete(o);
	return whole;
}

/* A watch stream's events: their pods noted. */
static void note_watch(const char *seg, size_t len)
{
	while (len) {
		const char *nl = memchr(seg, '\n', len);
		size_t n = nl ? (size_t)(nl - seg) : len;
		cJSON *o = hpn_json_parse(seg, n);

		note(cJSON_GetObjectItemCaseSensitive(o, "object"), false, false);
		cJSON_Delete(o);
		seg += n + (nl ? 1 : 0);
		len -= n + (nl ? 1 : 0);
	}
}

/* A metric's value in an exposition, -1 when absent. */
static double metric(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, name, n) && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

static size_t pod_max, bytes_max;

static char *exposition(struct podwatch *pw)
{
	struct sbuf b = { 0 };

	podwatch_metrics(&b, pw);
	FUZZ_ASSERT(!b.oom && b.p);
	FUZZ_ASSERT(metric(b.p, "hpn_rdma_pod_cache_bytes_max") == (double)bytes_max);
	FUZZ_ASSERT(metric(b.p, "hpn_rdma_pod_cache_bytes") <= (double)bytes_max);
	FUZZ_ASSERT(metric(b.p, "hpn_rdma_pod_cache_pods") <= 4096);
	return b.p;
}

static bool only(const struct hpn_pod_kv *kv, size_t n, const char *a, const char *b)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, a) && strcmp(kv[i].key, b))
			return false;
	return true;
}

/* The answers of both caches for every name: the same, each as the plugin reads it. */
static void check_answers(struct podwatch *a, struct podwatch *b, bool keys, bool list_done)
{
	char *ea = exposition(a), *eb = exposition(b);
	bool full =
		strstr(ea, "hpn_rdma_pod_cache_skipped_total{reason=\"cache_full\"} 0\n") == NULL;

	FUZZ_ASSERT(!strcmp(ea, eb));
	free(ea);
	free(eb);
	for (size_t i = 0; i < n_names; i++) {
		const struct hpn_alloc_req *req = &names[i].req;
		char *ra = podwatch_answer(a, req), *rb = podwatch_answer(b, req);
		struct hpn_pod pod = { 0 };
		struct hpn_err err = { 0 };
		int r;

		FUZZ_ASSERT(ra && rb && !strcmp(ra, rb));
		FUZZ_ASSERT(strlen(ra) <= pod_max + 64);
		r = hpn_podask_reply_parse(ra, strlen(ra), keys ? conf.kube.gpu_resource : NULL,
					   &pod, &err);
		if (r == 0) {
			FUZZ_ASSERT(!strcmp(pod.ns, req->namespace) &&
				    !strcmp(pod.name, req->name));
			FUZZ_ASSERT(!req->uid[0] || !strcmp(pod.uid, req->uid) ||
				    (hpn_pod_annotation(&pod, HPN_KUBE_MIRROR_ANNOTATION) &&
				     !strcmp(hpn_pod_annotation(&pod, HPN_KUBE_MIRROR_ANNOTATION),
					     req->uid)));
			if (keys) {
				FUZZ_ASSERT(only(pod.labels, pod.n_labels, conf.pod_label,
						 conf.gpu_model_label));
				FUZZ_ASSERT(only(pod.annotations, pod.n_annotations,
						 conf.gpu_model_annotation,
						 HPN_KUBE_MIRROR_ANNOTATION));
			}
			hpn_pod_free(&pod);
		} else {
			/* Unknown (the API is asked), or a trimmed pod that is not a valid one. */
			FUZZ_ASSERT(r == -ENOENT || err.code == HPN_E_KUBE);
		}
		/* A pod of a whole list is in the cache: by name at least. */
		if (list_done && names[i].in_list && !names[i].twice && !full) {
			cJSON *o = hpn_json_parse(ra, strlen(ra));
			const char *u = str_of(o, "unknown");

			FUZZ_ASSERT(!u || (strcmp(u, "the pod is not in the cache") &&
					   strcmp(u, "the cached pod has another UID") &&
					   strcmp(u, "the pod cache is not synced with the API")));
			cJSON_Delete(o);
		}
		free(ra);
		free(rb);
	}
}

/* seg to both caches, b in pieces of step bytes (stopping where a piece is refused). */
static int feed(struct podwatch *a, struct podwatch *b, bool list, const char *seg, size_t len,
		size_t step)
{
	int ra, rb = 0;

	ra = list ? podwatch_offline_page(a, seg, len) : podwatch_offline_watch(a, seg, len);
	for (size_t at = 0; at < len && rb >= 0; at += step) {
		size_t n = len - at < step ? len - at : step;

		rb = list ? podwatch_offline_page(b, seg + at, n)
			  : podwatch_offline_watch(b, seg + at, n);
	}
	FUZZ_ASSERT((ra < 0) == (rb < 0));
	return ra;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char sep[] = "\n@@\n";
	static const char gone[] = "{\"type\":\"ERROR\",\"object\":{\"code\":410}}\n";
	const char *p = (const char *)data + 1, *end = (const char *)data + size;
	struct podwatch *a, *b;
	bool keys, list = true, whole = true;
	size_t step;

	if (size < 1)
		return 0;
	keys = data[0] & 1;
	pod_max = data[0] & 2 ? 512 : PODWATCH_POD_BYTES_MAX;
	bytes_max = data[0] & 2 ? 2048 : PODWATCH_BYTES_MAX;
	step = (size_t)(data[0] >> 2) + 1;
	a = podwatch_offline(keys ? &conf : NULL, pod_max, bytes_max);
	b = podwatch_offline(keys ? &conf : NULL, pod_max, bytes_max);
	FUZZ_ASSERT(a && b);
	n_names = 0;
	while (p <= end) {
		const char *s = memmem(p, (size_t)(end - p), sep, sizeof(sep) - 1);
		size_t len = (size_t)((s ? s : end) - p);
		bool done = false;
		int r;

		if (list) {
			whole &= note_page(p, len);
			r = feed(a, b, true, p, len, step);
			if (r >= 0) {
				int ea = podwatch_offline_page_end(a),
				    eb = podwatch_offline_page_end(b);

				FUZZ_ASSERT(ea == eb || (ea < 0 && eb < 0));
				r = ea;
			}
			/* The page asked again, or the next page: still the list; else the watch. */
			done = r == 0;
			list = r != 0;
			if (r < 0)
				whole = false;
		} else {
			note_watch(p, len);
			r = feed(a, b, false, p, len, step);
			if (r >= 0)
				FUZZ_ASSERT(feed(a, b, false, gone, sizeof(gone) - 1, step) < 0);
			list = true;
			whole = true;
			for (size_t i = 0; i < n_names; i++)
				names[i].in_list = names[i].seen = names[i].twice = false;
		}
		check_answers(a, b, keys, done && whole);
		if (done)
			for (size_t i = 0; i < n_names; i++)
				names[i].in_list = names[i].seen = names[i].twice = false;
		if (!s)
			break;
		p = s + sizeof(sep) - 1;
	}
	podwatch_free(a);
	podwatch_free(b);
	return 0;
}
