// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/podask.c and the pod question of the lookup protocol
 * (lib/alloc.c): the request's "query", the reply around a cached pod or
 * "unknown", and the plugin's parse of both (a refusal, malformed replies,
 * a pod that hpn_pod_parse refuses); the question's keys and whether a cache
 * keeping some holds them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "check.h"
#include "conf.h"
#include "podask.h"

#define POD                                                                                        \
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"ns1\","             \
	"\"name\":\"trainer\",\"uid\":\"ab-12\",\"labels\":{\"alibabacloud.com/hpn-type\":"        \
	"\"rdma\"}},\"spec\":{\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":"          \
	"{\"nvidia.com/gpu\":\"8\"}}}]}}"

static void test_request(void)
{
	struct hpn_alloc_req req, back;
	struct hpn_err err = { 0 };
	char *line;

	CHECK_INT_EQ(hpn_alloc_req_set(&req, "ns1", "trainer", "ab-12", &err), 0);
	CHECK_INT_EQ(req.query, HPN_ALLOC_QUERY_DEVICES);
	req.query = HPN_ALLOC_QUERY_POD;
	line = hpn_alloc_req_render(&req);
	CHECK_STR_EQ(line, "{\"version\":1,\"namespace\":\"ns1\",\"name\":\"trainer\","
			   "\"uid\":\"ab-12\",\"query\":\"pod\"}\n");
	CHECK_INT_EQ(hpn_alloc_req_parse(line, strlen(line) - 1, &back, &err), 0);
	CHECK_INT_EQ(back.query, HPN_ALLOC_QUERY_POD);
	CHECK_STR_EQ(back.uid, "ab-12");
	free(line);

	static const char *const bad[] = {
		"{\"version\":1,\"namespace\":\"a\",\"name\":\"b\",\"query\":\"node\"}",
		"{\"version\":1,\"namespace\":\"a\",\"name\":\"b\",\"query\":7}",
		"{\"version\":1,\"namespace\":\"a\",\"name\":\"b\",\"query\":\"\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		CHECK(hpn_alloc_req_parse(bad[i], strlen(bad[i]), &back, &err) < 0);
		CHECK_STR_HAS(err.msg, "query");
	}
}

static void test_reply(void)
{
	struct hpn_err err = { 0 };
	struct hpn_pod pod;
	char *s;

	s = hpn_podask_reply_render(POD, NULL);
	CHECK_STR_EQ(s, "{\"version\":1,\"pod\":" POD "}");
	CHECK_INT_EQ(hpn_podask_reply_parse(s, strlen(s), NULL, &pod, &err), 0);
	CHECK_STR_EQ(pod.uid, "ab-12");
	CHECK_STR_EQ(pod.ns, "ns1");
	CHECK_INT_EQ((int)pod.count, 8);
	CHECK_STR_EQ(hpn_pod_label(&pod, "alibabacloud.com/hpn-type"), "rdma");
	hpn_pod_free(&pod);
	free(s);

	s = hpn_podask_reply_render(NULL, "the pod is not in the cache");
	CHECK_STR_EQ(s, "{\"version\":1,\"unknown\":\"the pod is not in the cache\"}");
	CHECK_INT_EQ(hpn_podask_reply_parse(s, strlen(s), NULL, &pod, &err), -ENOENT);
	CHECK_INT_EQ(err.code, HPN_E_TRY_AGAIN);
	CHECK_STR_HAS(err.msg, "the pod is not in the cache");
	free(s);

	static const struct {
		const char *json;
		const char *msg;
	} bad[] = {
		{ "", "not a JSON object" },
		{ "{\"version\":2,\"pod\":{}}", "version" },
		{ "{\"version\":1}", "neither" },
		{ "{\"version\":1,\"pod\":7}", "neither" },
		{ "{\"version\":1,\"error\":\"query refused\"}", "query refused" },
		{ "{\"version\":1,\"pod\":{\"kind\":\"Pod\"}}", "pod reply" },
		{ "{\"version\":1,\"pod\":{\"a\":\"\\u0000\"}}", "not a JSON object" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		CHECK(hpn_podask_reply_parse(bad[i].json, strlen(bad[i].json), NULL, &pod, &err) <
		      0);
		CHECK_STR_HAS(err.msg, bad[i].msg);
	}
}

/* The keys a config reads, sent with the question, checked against what a cache keeps. */
static void test_keys(void)
{
	struct hpn_conf conf = { .pod_label = (char *)"alibabacloud.com/hpn-type",
				 .gpu_model_label = (char *)"alibabacloud.com/gpu-model-series" };
	struct hpn_alloc_keys kept, asked;
	struct hpn_alloc_req req, back;
	struct hpn_err err = { 0 };
	char why[512] = "", *line;

	hpn_podask_keys(&conf, &kept);
	CHECK(kept.set);
	CHECK_INT_EQ(kept.n_labels, 2);
	CHECK_INT_EQ(kept.n_annotations, 0);
	CHECK_STR_EQ(kept.resource, "nvidia.com/gpu");
	CHECK(hpn_podask_keys_kept(&kept, &kept, why, sizeof(why)));

	/* Sent and read back whole. */
	CHECK_INT_EQ(hpn_alloc_req_set(&req, "ns1", "trainer", "ab-12", &err), 0);
	req.query = HPN_ALLOC_QUERY_POD;
	req.keys = kept;
	line = hpn_alloc_req_render(&req);
	CHECK_STR_HAS(line, "\"keys\":{\"labels\":[\"alibabacloud.com/hpn-type\","
			    "\"alibabacloud.com/gpu-model-series\"],\"annotations\":[],"
			    "\"resource\":\"nvidia.com/gpu\"}");
	CHECK_INT_EQ(hpn_alloc_req_parse(line, strlen(line) - 1, &back, &err), 0);
	CHECK(!memcmp(&back.keys, &req.keys, sizeof(req.keys)));
	free(line);

	/* Another label, annotation or resource than the cache keeps: not held, and said which. */
	conf.pod_label = (char *)"example.com/rdma";
	hpn_podask_keys(&conf, &asked);
	CHECK(!hpn_podask_keys_kept(&asked, &kept, why, sizeof(why)));
	CHECK_STR_HAS(why, "label \"example.com/rdma\" is not kept");
	conf.pod_label = (char *)"alibabacloud.com/hpn-type";
	conf.gpu_model_annotation = (char *)"example.com/model";
	hpn_podask_keys(&conf, &asked);
	CHECK(!hpn_podask_keys_kept(&asked, &kept, why, sizeof(why)));
	CHECK_STR_HAS(why, "annotation \"example.com/model\"");
	conf.gpu_model_annotation = NULL;
	conf.kube.gpu_resource = (char *)"amd.com/gpu";
	hpn_podask_keys(&conf, &asked);
	CHECK(!hpn_podask_keys_kept(&asked, &kept, why, sizeof(why)));
	CHECK_STR_HAS(why, "resource \"amd.com/gpu\"");
	/* Fewer keys than kept: held. A plugin that says none (older): held. */
	conf.kube.gpu_resource = NULL;
	conf.gpu_model_label = NULL;
	hpn_podask_keys(&conf, &asked);
	CHECK(hpn_podask_keys_kept(&asked, &kept, why, sizeof(why)));
	memset(&asked, 0, sizeof(asked));
	CHECK(hpn_podask_keys_kept(&asked, &kept, why, sizeof(why)));

	/* A resource as long as a qualified name may be (253 + 1 + 63) goes whole, and matches. */
	{
		char res[318];

		memset(res, 'a', 253);
		res[253] = '/';
		memset(res + 254, 'g', 63);
		res[317] = '\0';
		conf.kube.gpu_resource = res;
		hpn_podask_keys(&conf, &asked);
		CHECK_STR_EQ(asked.resource, res);
		CHECK_INT_EQ(hpn_alloc_req_set(&req, "ns1", "trainer", "ab-12", &err), 0);
		req.query = HPN_ALLOC_QUERY_POD;
		req.keys = asked;
		line = hpn_alloc_req_render(&req);
		CHECK_INT_EQ(hpn_alloc_req_parse(line, strlen(line) - 1, &back, &err), 0);
		CHECK_STR_EQ(back.keys.resource, res);
		CHECK(hpn_podask_keys_kept(&back.keys, &asked, why, sizeof(why)));
		free(line);
		conf.kube.gpu_resource = NULL;
	}

	/* Keys on any other question are not kept; bad ones are refused naming the field. */
	static const struct {
		const char *req, *msg;
	} bad[] = {
		{ "{\"version\":1,\"namespace\":\"a\",\"name\":\"b\",\"query\":\"pod\","
		  "\"keys\":[]}",
		  "keys is not an object" },
		{ "{\"version\":1,\"namespace\":\"a\",\"name\":\"b\",\"query\":\"pod\","
		  "\"keys\":{\"labels\":[\"a\",\"b\",\"c\"]}}",
		  "keys.labels is not an array of at most 2" },
		{ "{\"version\":1,\"namespace\":\"a\",\"name\":\"b\",\"query\":\"pod\","
		  "\"keys\":{\"annotations\":[\"a b\"]}}",
		  "keys.annotations[0]" },
		{ "{\"version\":1,\"namespace\":\"a\",\"name\":\"b\",\"query\":\"pod\","
		  "\"keys\":{\"labels\":[\"a/b/c\"]}}",
		  "keys.labels[0]" },
		{ "{\"version\":1,\"namespace\":\"a\",\"name\":\"b\",\"query\":\"pod\","
		  "\"keys\":{\"resource\":\"/gpu\"}}",
		  "keys.resource" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		CHECK(hpn_alloc_req_parse(bad[i].req, strlen(bad[i].req), &back, &err) < 0);
		CHECK_STR_HAS(err.msg, bad[i].msg);
	}
	line = (char *)"{\"version\":1,\"namespace\":\"a\",\"name\":\"b\","
		       "\"keys\":{\"labels\":[\"x\"]}}";
	CHECK_INT_EQ(hpn_alloc_req_parse(line, strlen(line), &back, &err), 0);
	CHECK(!back.keys.set);
}

int main(void)
{
	test_request();
	test_keys();
	test_reply();
	return check_done();
}
