// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/pod.c: Pod objects as the Kubernetes API returns them
 * (test/fixtures/pods/, see its README) and objects built here, one field
 * wrong at a time; the count rule (limits, requests, init containers,
 * sidecars); Kubernetes' name rules.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "err.h"
#include "pod.h"
#include "util.h"

static char *slurp(const char *rel, size_t *len)
{
	char path[4096];
	char *buf = NULL;
	int fd;

	snprintf(path, sizeof(path), "%s/pods/%s.json", HPN_FIXTURES, rel);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || hpn_read_all(fd, 1 << 20, &buf, len) < 0) {
		perror(path);
		exit(2);
	}
	close(fd);
	return buf;
}

static void test_fixtures(void)
{
	static const struct {
		const char *file, *uid, *model;
		unsigned long count;
		size_t n_labels, n_annotations;
	} want[] = {
		{ "default/seed-gu8tf-7d9c5b8f4-x2kqp", "5f0c6a2e-3b1d-4c8e-9a57-2d4e6f8a0b1c",
		  "GU8TF", 8, 4, 0 },
		{ "ml/p16en-16gpu-0", "a3b1c2d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", "P16EN", 16, 4, 0 },
		{ "ml/p16en-8gpu-0", "b4c2d3e5-f6a7-4b8c-9d0e-1f2a3b4c5d6e", "P16EN", 8, 3, 0 },
		{ "default/plain-web-5c6d7e8f9-abcde", "c5d3e4f6-a7b8-4c9d-8e1f-2a3b4c5d6e7f", NULL,
		  0, 2, 1 },
		{ "ml/init-sidecar-0", "d6e4f5a7-b8c9-4d0e-9f2a-3b4c5d6e7f80", "gpu-hpn", 9, 2, 1 },
		{ "kube-system/rdma-probe-gpu-node-17", "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d",
		  NULL, 1, 3, 4 },
	};

	for (size_t i = 0; i < HPN_ARRAY_SIZE(want); i++) {
		struct hpn_err err = { 0 };
		struct hpn_pod pod = { 0 };
		size_t len;
		char *json = slurp(want[i].file, &len);
		const char *slash = strchr(want[i].file, '/');
		int r = hpn_pod_parse(json, len, NULL, &pod, &err);

		if (r)
			fprintf(stderr, "\t%s: %s\n", want[i].file, err.msg);
		CHECK_INT_EQ(r, 0);
		CHECK_INT_EQ(err.code, 0);
		CHECK_STR_EQ(pod.uid, want[i].uid);
		CHECK(pod.ns && !strncmp(pod.ns, want[i].file, (size_t)(slash - want[i].file)));
		CHECK_STR_EQ(pod.name, slash + 1);
		CHECK_STR_EQ(pod.resource, "nvidia.com/gpu");
		CHECK_INT_EQ(pod.count, want[i].count);
		CHECK_INT_EQ(pod.n_labels, want[i].n_labels);
		CHECK_INT_EQ(pod.n_annotations, want[i].n_annotations);
		CHECK_STR_EQ(hpn_pod_label(&pod, "alibabacloud.com/gpu-model-series"),
			     want[i].model);
		if (want[i].model || i == 5)
			CHECK_STR_EQ(hpn_pod_label(&pod, "alibabacloud.com/hpn-type"), "rdma");
		if (i == 5)
			CHECK_STR_EQ(hpn_pod_annotation(&pod, "kubernetes.io/config.mirror"),
				     "3c1f0e9a7b5d42c8a6e4f2d0b8c6a4e2");
		CHECK(!hpn_pod_label(&pod, "no-such-label"));
		hpn_pod_free(&pod);
		CHECK(!pod.uid && !pod.labels && pod.n_labels == 0);
		hpn_pod_free(&pod); /* twice: harmless */
		free(json);
	}
	/* Another resource, counted the same way: cpu quantities are not counts. */
	{
		struct hpn_err err = { 0 };
		struct hpn_pod pod = { 0 };
		size_t len;
		char *json = slurp("ml/p16en-16gpu-0", &len);

		CHECK_INT_EQ(hpn_pod_parse(json, len, "example.com/fpga", &pod, &err), 0);
		CHECK_INT_EQ(pod.count, 0);
		CHECK_STR_EQ(pod.resource, "example.com/fpga");
		hpn_pod_free(&pod);
		/* worker-a's limits.cpu "64", worker-b's requests.cpu "8" (it has no cpu limit). */
		CHECK_INT_EQ(hpn_pod_parse(json, len, "cpu", &pod, &err), 0);
		CHECK_INT_EQ(pod.count, 72);
		hpn_pod_free(&pod);
		free(json);
		json = slurp("default/plain-web-5c6d7e8f9-abcde", &len);
		memset(&err, 0, sizeof(err));
		CHECK_INT_EQ(hpn_pod_parse(json, len, "cpu", &pod, &err), -EINVAL);
		CHECK_STR_HAS(err.msg, "pod.spec.containers[0].resources.limits.cpu is \"500m\"");
		free(json);
	}
}

/* A minimal Pod as the API writes one, with meta (inside metadata) and spec members. */
static char *pod_json(const char *meta, const char *spec)
{
	char *s = NULL;

	if (asprintf(
		    &s,
		    "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"p-0\","
		    "\"namespace\":\"ns\",\"uid\":\"0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0\","
		    "\"resourceVersion\":\"7\",\"creationTimestamp\":\"2026-03-02T10:01:44Z\"%s%s},"
		    "\"spec\":{%s},\"status\":{\"phase\":\"Pending\"}}",
		    meta[0] ? "," : "", meta, spec) < 0)
		exit(2);
	return s;
}

#define GPU(n) "{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"" #n "\"}}}"
#define SIDE(n)                                                                                    \
	"{\"name\":\"s\",\"restartPolicy\":\"Always\",\"resources\":{\"limits\":{\"nvidia.com/"    \
	"gpu\":\"" #n "\"}}}"

/* Parses (meta, spec): returns r; on success *count, else the message in err. */
static int parse(const char *meta, const char *spec, unsigned long *count, struct hpn_err *err)
{
	struct hpn_pod pod = { .count = 12345 };
	char *json = pod_json(meta, spec);
	int r;

	memset(err, 0, sizeof(*err));
	r = hpn_pod_parse(json, strlen(json), NULL, &pod, err);
	if (r == 0) {
		*count = pod.count;
		CHECK_INT_EQ(err->code, 0);
	} else {
		CHECK_INT_EQ(pod.count, 12345); /* untouched on failure */
		CHECK(err->code != 0 && err->msg[0]);
	}
	hpn_pod_free(&pod);
	free(json);
	return r;
}

static void count_is(const char *spec, unsigned long want, int line)
{
	struct hpn_err err;
	unsigned long n = 0;
	int r = parse("", spec, &n, &err);

	if (r || n != want)
		fprintf(stderr, "\tline %d: r=%d count=%lu (want %lu) %s\n", line, r, n, want,
			err.msg);
	CHECK_INT_EQ(r, 0);
	CHECK_INT_EQ(n, want);
}

/* The spec (or metadata, with meta) is refused with HPN_E_KUBE and a message holding what. */
static void refused(const char *meta, const char *spec, const char *what, int line)
{
	struct hpn_err err;
	unsigned long n = 0;
	int r = parse(meta, spec, &n, &err);

	if (r == 0 || !strstr(err.msg, what))
		fprintf(stderr, "\tline %d: r=%d msg=%s (want: %s)\n", line, r, err.msg, what);
	CHECK_INT_EQ(r, -EINVAL);
	CHECK_INT_EQ(err.code, HPN_E_KUBE);
	CHECK_STR_HAS(err.msg, what);
	CHECK_STR_HAS(err.msg, "the answer is not a valid Pod: ");
}

static void test_count(void)
{
	count_is("\"containers\":[" GPU(8) "]", 8, __LINE__);
	count_is("\"containers\":[" GPU(8) "," GPU(8) "]", 16, __LINE__);
	count_is("\"containers\":[" GPU(0) "]", 0, __LINE__);
	count_is("\"containers\":[" GPU(08) "]", 8, __LINE__); /* digits: a plain integer */
	count_is("\"containers\":[{\"name\":\"c\"}]", 0, __LINE__);
	count_is("\"containers\":[{\"name\":\"c\",\"resources\":{}}]", 0, __LINE__);
	count_is("\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"cpu\":\"2\"}}}]", 0,
		 __LINE__);
	/* A limit wins over a request; a request counts where there is no limit. */
	count_is("\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
		 "\"2\"},\"requests\":{\"nvidia.com/gpu\":\"3\"}}}]",
		 2, __LINE__);
	count_is("\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"cpu\":\"1\"},"
		 "\"requests\":{\"nvidia.com/gpu\":\"4\"}}}," GPU(1) "]",
		 5, __LINE__);
	count_is("\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
		 "null},\"requests\":{\"nvidia.com/gpu\":\"4\"}}}]",
		 4, __LINE__);
	/* Init containers run one at a time, before the app containers. */
	count_is("\"initContainers\":[" GPU(8) "],\"containers\":[" GPU(2) "," GPU(2) "]", 8,
		 __LINE__);
	count_is("\"initContainers\":[" GPU(2) "," GPU(3) "],\"containers\":[" GPU(4) "]", 4,
		 __LINE__);
	count_is("\"initContainers\":[],\"containers\":[" GPU(4) "]", 4, __LINE__);
	/* A sidecar runs from its start on: with later init containers and the app. */
	count_is("\"initContainers\":[" SIDE(1) "," GPU(8) "],\"containers\":[" GPU(2) "," GPU(
			 2) "]",
		 9, __LINE__);
	count_is("\"initContainers\":[" GPU(8) "," SIDE(1) "],\"containers\":[" GPU(2) "," GPU(
			 2) "]",
		 8, __LINE__);
	count_is("\"initContainers\":[" SIDE(3) "," SIDE(3) "],\"containers\":[" GPU(1) "]", 7,
		 __LINE__);
	count_is("\"initContainers\":[" SIDE(3) "," GPU(2) "," SIDE(1) "," GPU(
			 5) "],"
			    "\"containers\":[" GPU(0) "]",
		 9, __LINE__);

	refused("", "\"containers\":[" GPU(1.5) "]",
		"pod.spec.containers[0].resources.limits.nvidia.com/gpu is \"1.5\": a count must "
		"be a plain non-negative integer",
		__LINE__);
	refused("", "\"containers\":[" GPU(0) "," GPU(1) "," GPU(1k) "]",
		"pod.spec.containers[2].resources.limits.nvidia.com/gpu is \"1k\"", __LINE__);
	refused("", "\"containers\":[" GPU(-1) "]", "is \"-1\"", __LINE__);
	refused("", "\"containers\":[" GPU(+1) "]", "is \"+1\"", __LINE__);
	refused("", "\"containers\":[" GPU() "]", "is \"\"", __LINE__);
	refused("", "\"containers\":[" GPU(1234567890) "]", "is \"1234567890\"", __LINE__);
	refused("", "\"containers\":[" GPU(8m) "]", "is \"8m\"", __LINE__);
	refused("",
		"\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":"
		"8}}}]",
		"pod.spec.containers[0].resources.requests.nvidia.com/gpu must be a string",
		__LINE__);
	refused("", "\"initContainers\":[" GPU(x) "],\"containers\":[" GPU(1) "]",
		"pod.spec.initContainers[0].resources.limits.nvidia.com/gpu is \"x\"", __LINE__);
	refused("", "\"containers\":[" GPU(999999999) "," GPU(1) "]",
		"the pod asks for 1000000000 nvidia.com/gpu, more than 999999999", __LINE__);
	refused("", "\"containers\":[" SIDE(1) "]",
		"pod.spec.containers[0].restartPolicy must be Always, and only in an init "
		"container",
		__LINE__);
	refused("",
		"\"initContainers\":[{\"name\":\"i\",\"restartPolicy\":\"OnFailure\"}],"
		"\"containers\":[" GPU(1) "]",
		"pod.spec.initContainers[0].restartPolicy must be Always", __LINE__);
	refused("", "\"containers\":[]", "pod.spec.containers is missing or empty", __LINE__);
	refused("", "\"nodeName\":\"n\"", "pod.spec.containers is missing or empty", __LINE__);
	refused("", "\"containers\":{}", "pod.spec.containers must be an array", __LINE__);
	refused("", "\"containers\":[7]", "pod.spec.containers[0] must be an object", __LINE__);
	refused("", "\"containers\":[{\"resources\":[]}]",
		"pod.spec.containers[0].resources must be an object", __LINE__);
	refused("", "\"containers\":[{\"resources\":{\"limits\":\"8\"}}]",
		"pod.spec.containers[0].resources.limits must be an object", __LINE__);
	refused("", "\"initContainers\":{},\"containers\":[" GPU(1) "]",
		"pod.spec.initContainers must be an array", __LINE__);
}

static void test_shape(void)
{
	static const struct {
		const char *json, *what;
	} bad[] = {
		{ "", "it is not valid JSON" },
		{ "{\"kind\":\"Pod\"", "it is not valid JSON" },
		{ "[]", "it is not a JSON object" },
		{ "{} {}", "it is not valid JSON" },
		{ "{\"apiVersion\":\"v1\"}", "pod.kind is missing" },
		{ "{\"kind\":\"Pod\",\"apiVersion\":1}", "pod.apiVersion must be a string" },
		{ "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"code\":404}",
		  "it is a v1/Status, not a v1/Pod" },
		{ "{\"kind\":\"Pod\",\"apiVersion\":\"v2\"}", "it is a v2/Pod, not a v1/Pod" },
		{ "{\"kind\":\"Pod\",\"apiVersion\":\"v1\"}", "pod.metadata is missing" },
		{ "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":[]}",
		  "pod.metadata must be an object" },
		{ "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"p\","
		  "\"namespace\":\"n\"}}",
		  "pod.metadata.uid is missing" },
		{ "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"uid\":\"a/b\"}}",
		  "pod.metadata.uid \"a/b\" is not a UID" },
		{ "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"uid\":\"u\"}}",
		  "pod.metadata.namespace is missing" },
		{ "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"uid\":\"u\","
		  "\"namespace\":\"Kube_System\"}}",
		  "pod.metadata.namespace \"Kube_System\" is not a namespace name" },
		{ "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"uid\":\"u\","
		  "\"namespace\":\"n\",\"name\":\"../etc\"}}",
		  "pod.metadata.name \"../etc\" is not a pod name" },
		{ "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"uid\":\"u\","
		  "\"namespace\":\"n\",\"name\":\"p\"}}",
		  "pod.spec is missing" },
		{ "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"uid\":\"u\","
		  "\"namespace\":\"n\",\"name\":\"p\\u0000x\"},\"spec\":{}}",
		  "it holds a \\u0000 escape" },
	};

	for (size_t i = 0; i < HPN_ARRAY_SIZE(bad); i++) {
		struct hpn_err err = { 0 };
		struct hpn_pod pod = { 0 };
		int r = hpn_pod_parse(bad[i].json, strlen(bad[i].json), NULL, &pod, &err);

		if (r == 0 || !strstr(err.msg, bad[i].what))
			fprintf(stderr, "\tbad[%zu]: r=%d %s\n", i, r, err.msg);
		CHECK_INT_EQ(r, -EINVAL);
		CHECK_INT_EQ(err.code, HPN_E_KUBE);
		CHECK_STR_HAS(err.msg, bad[i].what);
		CHECK(!pod.uid);
	}
	/* The resource name given by the config is the caller's error: code 7. */
	{
		struct hpn_err err = { 0 };
		struct hpn_pod pod = { 0 };
		char *json = pod_json("", "\"containers\":[" GPU(1) "]");

		CHECK_INT_EQ(hpn_pod_parse(json, strlen(json), "nvidia.com/", &pod, &err), -EINVAL);
		CHECK_INT_EQ(err.code, HPN_E_INVALID_CONFIG);
		CHECK_STR_HAS(err.msg, "resource name \"nvidia.com/\"");
		free(json);
	}
}

static void test_meta(void)
{
	const char *spec = "\"containers\":[" GPU(1) "]";
	struct hpn_err err = { 0 };
	struct hpn_pod pod = { 0 };
	char *json, *big, *meta;
	size_t off;

	json = pod_json("\"labels\":{\"a\":\"1\",\"example.com/b\":\"\",\"c.d-e_f\":\"X.y-z_0\"},"
			"\"annotations\":{\"kubectl.kubernetes.io/last-applied-configuration\":"
			"\"{\\\"kind\\\": \\\"Pod\\\"}\\n\",\"k\":\"any text: é, spaces\"}",
			spec);
	CHECK_INT_EQ(hpn_pod_parse(json, strlen(json), NULL, &pod, &err), 0);
	CHECK_INT_EQ(pod.n_labels, 3);
	CHECK_STR_EQ(hpn_pod_label(&pod, "example.com/b"), "");
	CHECK_STR_EQ(hpn_pod_label(&pod, "c.d-e_f"), "X.y-z_0");
	CHECK_STR_EQ(hpn_pod_annotation(&pod, "k"), "any text: é, spaces");
	CHECK_STR_EQ(hpn_pod_annotation(&pod, "kubectl.kubernetes.io/last-applied-configuration"),
		     "{\"kind\": \"Pod\"}\n");
	CHECK(!hpn_pod_annotation(&pod, "a"));
	CHECK(!hpn_pod_label(&pod, NULL));
	hpn_pod_free(&pod);
	free(json);

	refused("\"labels\":[]", spec, "pod.metadata.labels must be an object", __LINE__);
	refused("\"labels\":{\"a\":1}", spec, "pod.metadata.labels.a must be a string", __LINE__);
	refused("\"labels\":{\"-a\":\"1\"}", spec,
		"pod.metadata.labels key \"-a\" is not a Kubernetes qualified name", __LINE__);
	refused("\"labels\":{\"Ex.com/a\":\"1\"}", spec, "key \"Ex.com/a\" is not", __LINE__);
	refused("\"labels\":{\"a\":\"has space\"}", spec,
		"pod.metadata.labels.a value \"has space\" is not a label value", __LINE__);
	refused("\"labels\":{\"a\":\"1\",\"a\":\"2\"}", spec,
		"pod.metadata.labels.a is given twice", __LINE__);
	refused("\"annotations\":{\"a\":{}}", spec, "pod.metadata.annotations.a must be a string",
		__LINE__);
	refused("\"annotations\":{\"\":\"x\"}", spec, "pod.metadata.annotations key \"\"",
		__LINE__);

	/* 1024 labels pass, 1025 do not. */
	for (int n = HPN_POD_META_MAX; n <= HPN_POD_META_MAX + 1; n++) {
		meta = malloc(32 + (size_t)n * 16);
		off = (size_t)sprintf(meta, "\"labels\":{");
		for (int i = 0; i < n; i++)
			off += (size_t)sprintf(meta + off, "%s\"l%d\":\"v\"", i ? "," : "", i);
		strcpy(meta + off, "}");
		if (n == HPN_POD_META_MAX) {
			json = pod_json(meta, spec);
			memset(&err, 0, sizeof(err));
			CHECK_INT_EQ(hpn_pod_parse(json, strlen(json), NULL, &pod, &err), 0);
			CHECK_INT_EQ(pod.n_labels, HPN_POD_META_MAX);
			CHECK_STR_EQ(hpn_pod_label(&pod, "l1023"), "v");
			hpn_pod_free(&pod);
			free(json);
		} else {
			refused(meta, spec, "pod.metadata.labels has more than 1024 entries",
				__LINE__);
		}
		free(meta);
	}
	/* Annotations: 256 KiB in all, as Kubernetes allows; one byte more is refused. */
	big = malloc(HPN_POD_ANNOTATIONS_BYTES + 64);
	for (size_t extra = 0; extra <= 1; extra++) {
		size_t n = HPN_POD_ANNOTATIONS_BYTES - 1 + extra; /* key "a" + value */

		off = (size_t)sprintf(big, "\"annotations\":{\"a\":\"");
		memset(big + off, 'x', n);
		strcpy(big + off + n, "\"}");
		if (!extra) {
			json = pod_json(big, spec);
			memset(&err, 0, sizeof(err));
			CHECK_INT_EQ(hpn_pod_parse(json, strlen(json), NULL, &pod, &err), 0);
			CHECK_INT_EQ(strlen(hpn_pod_annotation(&pod, "a")), n);
			hpn_pod_free(&pod);
			free(json);
		} else {
			refused(big, spec, "pod.metadata.annotations is larger than 262144 bytes",
				__LINE__);
		}
	}
	free(big);
}

static void test_names(void)
{
	CHECK(hpn_k8s_dns_label("default"));
	CHECK(hpn_k8s_dns_label("kube-system"));
	CHECK(hpn_k8s_dns_label("a"));
	CHECK(hpn_k8s_dns_label("0abc9"));
	CHECK(!hpn_k8s_dns_label(""));
	CHECK(!hpn_k8s_dns_label(NULL));
	CHECK(!hpn_k8s_dns_label("-a"));
	CHECK(!hpn_k8s_dns_label("a-"));
	CHECK(!hpn_k8s_dns_label("A"));
	CHECK(!hpn_k8s_dns_label("a.b"));
	CHECK(!hpn_k8s_dns_label("a_b"));
	CHECK(hpn_k8s_dns_label("a23456789012345678901234567890123456789012345678901234567890123"));
	CHECK(!hpn_k8s_dns_label(
		"a234567890123456789012345678901234567890123456789012345678901234"));
	CHECK(hpn_k8s_dns_subdomain("seed-gu8tf-7d9c5b8f4-x2kqp"));
	CHECK(hpn_k8s_dns_subdomain("a.b-c.d"));
	CHECK(!hpn_k8s_dns_subdomain("a..b"));
	CHECK(!hpn_k8s_dns_subdomain(".a"));
	CHECK(!hpn_k8s_dns_subdomain("a."));
	CHECK(!hpn_k8s_dns_subdomain("a/b"));
	CHECK(!hpn_k8s_dns_subdomain("a%2Fb"));
	CHECK(!hpn_k8s_dns_subdomain("a b"));
	{
		char s[300];

		memset(s, 'a', sizeof(s));
		for (size_t i = 63; i < sizeof(s); i += 64)
			s[i] = '.';
		s[253] = '\0';
		CHECK(hpn_k8s_dns_subdomain(s));
		s[253] = 'a';
		s[254] = '\0';
		CHECK(!hpn_k8s_dns_subdomain(s));
	}
	CHECK(hpn_k8s_qualified_name("nvidia.com/gpu"));
	CHECK(hpn_k8s_qualified_name("alibabacloud.com/hpn-type"));
	CHECK(hpn_k8s_qualified_name("app"));
	CHECK(hpn_k8s_qualified_name("A_b.C-9"));
	CHECK(!hpn_k8s_qualified_name("nvidia.com/"));
	CHECK(!hpn_k8s_qualified_name("/gpu"));
	CHECK(!hpn_k8s_qualified_name("a/b/c"));
	CHECK(!hpn_k8s_qualified_name("NVIDIA.com/gpu"));
	CHECK(!hpn_k8s_qualified_name("_a"));
	CHECK(hpn_k8s_label_value(""));
	CHECK(hpn_k8s_label_value("GU8TF"));
	CHECK(!hpn_k8s_label_value("a/b"));
	CHECK(!hpn_k8s_label_value("a-"));
}

int main(void)
{
	test_fixtures();
	test_count();
	test_shape();
	test_meta();
	test_names();
	return check_done();
}
