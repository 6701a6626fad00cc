// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for agent/dra/model/dra.c: ResourceClaims as the Kubernetes API returns
 * them, built here one field wrong at a time; each refusal's code and the
 * field its message names.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dra.h"
#include "err.h"
#include "util.h"

#define DRV  "rdma.hpn.example.com"
#define UID  "6a1f0c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"
#define UID2 "7b2a1d3f-4c5e-4f60-9bac-1d2e3f4a5b6c"
#define META                                                                                       \
	"\"name\":\"rdma-0\",\"namespace\":\"ml\",\"uid\":\"" UID "\",\"resourceVersion\":\"42\""
#define RES(req, drv, pool, dev)                                                                   \
	"{\"request\":\"" req "\",\"driver\":\"" drv "\",\"pool\":\"" pool "\",\"device\":\"" dev  \
	"\",\"adminAccess\":false}"
#define ALLOC(results) "{\"allocation\":{\"devices\":{\"results\":[" results "]}}}"
#define POD(uid)       "{\"resource\":\"pods\",\"name\":\"p\",\"uid\":\"" uid "\"}"
#define OURS	       ALLOC(RES("nic", DRV, "node-a", "nic-0"))
#define PREFIX	       "ResourceClaim ml/rdma-0: "
/* A DNS subdomain of 64 bytes: one too long for a driver. */
#define LONG_DRV "a234567890.a234567890.a234567890.a234567890.a234567890.a23456789"

/* A claim of apiVersion api with metadata {meta} and status (NULL: none); free() it. */
static char *claim_json(const char *api, const char *meta, const char *status)
{
	char *s = NULL;

	if (asprintf(&s,
		     "{\"apiVersion\":\"%s\",\"kind\":\"ResourceClaim\",\"metadata\":{%s},"
		     "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"nic\",\"exactly\":"
		     "{\"deviceClassName\":\"hpn-rdma\"}}]}}%s%s}",
		     api, meta, status ? ",\"status\":" : "", status ? status : "") < 0)
		exit(2);
	return s;
}

/* Parses json as the claim ml/rdma-0 of UID for DRV; err reset first. */
static int parse(const char *json, size_t len, struct hpn_dra_claim *out, struct hpn_err *err)
{
	memset(err, 0, sizeof(*err));
	return hpn_dra_claim_parse(json, len, "ml", "rdma-0", UID, DRV, out, err);
}

/* json is refused with code and -e, the message holding what (and the claim's name). */
static void refused_json(const char *json, size_t len, int code, int e, const char *what, int line)
{
	struct hpn_dra_claim out = { .n = 999 };
	struct hpn_err err;
	int r = parse(json, len, &out, &err);

	if (r != -e || !strstr(err.msg, what))
		fprintf(stderr, "\tline %d: r=%d code=%d msg=%s (want: %s)\n", line, r, err.code,
			err.msg, what);
	CHECK_INT_EQ(r, -e);
	CHECK_INT_EQ(err.code, code);
	CHECK_STR_HAS(err.msg, what);
	CHECK_STR_HAS(err.msg, PREFIX);
	CHECK_INT_EQ(out.n, 999); /* untouched on failure */
}

/* The claim (api, meta, status) is refused as a bad answer, naming what. */
static void refused(const char *api, const char *meta, const char *status, const char *what,
		    int line)
{
	char *json = claim_json(api, meta, status);

	refused_json(json, strlen(json), HPN_E_KUBE, EINVAL, what, line);
	free(json);
}

static void test_valid(void)
{
	static const char *const apis[] = { "resource.k8s.io/v1", "resource.k8s.io/v1beta1",
					    "resource.k8s.io/v1beta2" };

	for (size_t a = 0; a < HPN_ARRAY_SIZE(apis); a++) {
		struct hpn_dra_claim out;
		struct hpn_err err;
		char *json = claim_json(
			apis[a], META,
			"{\"allocation\":{\"devices\":{\"results\":[" RES("nic", DRV, "node-a", "nic-0") "," RES(
				"gpu", "gpu.nvidia.com", "node-a",
				"gpu-0") "," RES("nic/fast", DRV, "node-a/rail.1",
						 "nic-1") "," RES("nic", "Other.Example.com",
								  "node-a",
								  "nic-2") "],"
									   "\"config\":[]},"
									   "\"nodeSelector\":{"
									   "\"nodeSelectorTerms\":["
									   "]}},"
									   "\"reservedFor\":[" POD(
										   UID2) ","
											 "{\"apiGro"
											 "up\":"
											 "\"batch\""
											 ",\"resour"
											 "ce\":"
											 "\"jobs\","
											 "\"name\":"
											 "\"j\","
											 "\"uid\":"
											 "\"j-1\"},"
											 "{\"apiGro"
											 "up\":"
											 "\"example"
											 ".com\","
											 "\"resourc"
											 "e\":"
											 "\"pods\","
											 "\"name\":"
											 "\"x\","
											 "\"uid\":"
											 "\"x-1\"},"
											 "{\"apiGro"
											 "up\":"
											 "\"\","
											 "\"resourc"
											 "e\":"
											 "\"pods\","
											 "\"name\":"
											 "\"q\","
											 "\"uid\":"
											 "\"" UID
											 "\"}],"
											 "\"devices"
											 "\":[{"
											 "\"driver"
											 "\":\"" DRV "\",\"pool\":\"node-a\","
											 "\"device"
											 "\":\"nic-"
											 "0\"}]}");
		int r = parse(json, strlen(json), &out, &err);

		if (r)
			fprintf(stderr, "\t%s: %s\n", apis[a], err.msg);
		CHECK_INT_EQ(r, 0);
		CHECK_INT_EQ(err.code, 0);
		CHECK_STR_EQ(out.ns, "ml");
		CHECK_STR_EQ(out.name, "rdma-0");
		CHECK_STR_EQ(out.uid, UID);
		/* Ours only, in the API's order; gpu.nvidia.com's and another driver's left out. */
		CHECK_INT_EQ(out.n, 2);
		CHECK_STR_EQ(out.v[0].request, "nic");
		CHECK_STR_EQ(out.v[0].pool, "node-a");
		CHECK_STR_EQ(out.v[0].device, "nic-0");
		CHECK_STR_EQ(out.v[1].request, "nic/fast");
		CHECK_STR_EQ(out.v[1].pool, "node-a/rail.1");
		CHECK_STR_EQ(out.v[1].device, "nic-1");
		/* Pods of the core group only: not a job, not another group's "pods". */
		CHECK_INT_EQ(out.n_pods, 2);
		CHECK_STR_EQ(out.pods[0], UID2);
		CHECK_STR_EQ(out.pods[1], UID);
		free(json);
	}
	/* No reservedFor (and null members) is no pod. */
	{
		struct hpn_dra_claim out;
		struct hpn_err err;
		char *json =
			claim_json("resource.k8s.io/v1", META,
				   "{\"allocation\":{\"devices\":{\"results\":[" RES(
					   "nic", DRV, "node-a", "nic-0") "]}},"
									  "\"reservedFor\":null}");

		CHECK_INT_EQ(parse(json, strlen(json), &out, &err), 0);
		CHECK_INT_EQ(out.n, 1);
		CHECK_INT_EQ(out.n_pods, 0);
		free(json);
	}
}

/* Every refusal of the answer's shape, identity and allocation. */
static void test_refused(void)
{
	const char *v1 = "resource.k8s.io/v1";

	/* Kind and apiVersion. */
	{
		const char *status = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
				     "\"Failure\",\"code\":404}";

		refused_json(status, strlen(status), HPN_E_KUBE, EINVAL,
			     "apiVersion and kind are v1 Status, not resource.k8s.io/v1", __LINE__);
	}
	refused("resource.k8s.io/v1alpha3", META, OURS,
		"apiVersion and kind are resource.k8s.io/v1alpha3 ResourceClaim", __LINE__);
	refused("v1", META, OURS, "apiVersion and kind are v1 ResourceClaim", __LINE__);
	{
		const char *j = "{\"apiVersion\":\"resource.k8s.io/v1\"}";
		const char *k = "{\"kind\":\"ResourceClaim\",\"apiVersion\":1}";

		refused_json(j, strlen(j), HPN_E_KUBE, EINVAL, "kind is missing", __LINE__);
		refused_json(k, strlen(k), HPN_E_KUBE, EINVAL, "apiVersion must be a string",
			     __LINE__);
	}

	/* Identity: malformed is a bad answer; another claim is code 3, -ESTALE. */
	refused(v1, "\"name\":\"rdma-0\",\"namespace\":\"ml\"", OURS, "metadata.uid is missing",
		__LINE__);
	refused(v1, "\"name\":\"rdma-0\",\"namespace\":7,\"uid\":\"" UID "\"", OURS,
		"metadata.namespace must be a string", __LINE__);
	refused(v1, "\"name\":\"rdma-0\",\"namespace\":\"ML\",\"uid\":\"" UID "\"", OURS,
		"metadata.namespace \"ML\" is not a namespace name", __LINE__);
	refused(v1, "\"name\":\"../x\",\"namespace\":\"ml\",\"uid\":\"" UID "\"", OURS,
		"metadata.name \"../x\" is not a claim name", __LINE__);
	refused(v1, "\"name\":\"rdma-0\",\"namespace\":\"ml\",\"uid\":\"a/b\"", OURS,
		"metadata.uid \"a/b\" is not a UID", __LINE__);
	{
		static const struct {
			const char *meta, *what;
		} other[] = {
			{ "\"name\":\"rdma-0\",\"namespace\":\"ml2\",\"uid\":\"" UID "\"",
			  "the answer is ResourceClaim ml2/rdma-0 (metadata.namespace" },
			{ "\"name\":\"rdma-1\",\"namespace\":\"ml\",\"uid\":\"" UID "\"",
			  "the answer is ResourceClaim ml/rdma-1 (metadata.namespace, "
			  "metadata.name), not the one asked for" },
			{ "\"name\":\"rdma-0\",\"namespace\":\"ml\",\"uid\":\"" UID2 "\"",
			  "metadata.uid is " UID2 ", not " UID " as asked: a different claim" },
		};

		for (size_t i = 0; i < HPN_ARRAY_SIZE(other); i++) {
			char *json = claim_json(v1, other[i].meta, OURS);

			refused_json(json, strlen(json), HPN_E_UNKNOWN_CONTAINER, ESTALE,
				     other[i].what, __LINE__);
			free(json);
		}
	}
	refused(v1, "", OURS, "metadata.namespace is missing", __LINE__);
	refused(v1, "\"namespace\":\"ml\",\"uid\":\"" UID "\"", OURS, "metadata.name is missing",
		__LINE__);
	{
		const char *j = "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
				"\"metadata\":[]}";

		refused_json(j, strlen(j), HPN_E_KUBE, EINVAL, "metadata must be an object",
			     __LINE__);
	}

	/* Not allocated. */
	refused(v1, META, NULL, "not allocated (status is missing)", __LINE__);
	refused(v1, META, "{}", "not allocated (status.allocation is missing)", __LINE__);
	refused(v1, META, "{\"allocation\":null,\"reservedFor\":[" POD(UID2) "]}",
		"not allocated (status.allocation is missing)", __LINE__);

	/* Nothing of ours. */
	refused(v1, META, ALLOC(RES("gpu", "gpu.nvidia.com", "node-a", "gpu-0")),
		"allocates no device of " DRV " (status.allocation.devices.results)", __LINE__);
	refused(v1, META, ALLOC(""), "allocates no device of " DRV, __LINE__);
	refused(v1, META, "{\"allocation\":{}}", "allocates no device of " DRV, __LINE__);
	refused(v1, META, "{\"allocation\":{\"devices\":{}}}", "allocates no device of " DRV,
		__LINE__);

	/* Names, whatever the driver. */
	refused(v1, META,
		ALLOC(RES("nic", DRV, "node-a", "nic-0") "," RES("nic", DRV, "node-a", "Nic_1")),
		"status.allocation.devices.results[1].device \"Nic_1\" is not a device name",
		__LINE__);
	refused(v1, META,
		ALLOC(RES("nic", DRV, "node-a",
			  "a234567890123456789012345678901234567890123456789012345678901234")),
		"status.allocation.devices.results[0].device \"a2345", __LINE__);
	refused(v1, META, ALLOC(RES("gpu", "gpu.nvidia.com", "node-a", "gpu.0")),
		"status.allocation.devices.results[0].device \"gpu.0\" is not a device name",
		__LINE__);
	refused(v1, META, ALLOC(RES("nic", DRV, "node-a//b", "nic-0")),
		"status.allocation.devices.results[0].pool \"node-a//b\" is not a pool name",
		__LINE__);
	refused(v1, META, ALLOC(RES("nic", DRV, "", "nic-0")),
		"status.allocation.devices.results[0].pool \"\" is not a pool name", __LINE__);
	refused(v1, META, ALLOC(RES("nic", DRV, "node-a/", "nic-0")),
		"results[0].pool \"node-a/\" is not a pool name", __LINE__);
	refused(v1, META, ALLOC(RES("nic/a/b", DRV, "node-a", "nic-0")),
		"status.allocation.devices.results[0].request \"nic/a/b\" is not a request name",
		__LINE__);
	refused(v1, META, ALLOC(RES("nic.0", DRV, "node-a", "nic-0")),
		"results[0].request \"nic.0\" is not a request name", __LINE__);
	refused(v1, META, ALLOC(RES("/nic", DRV, "node-a", "nic-0")),
		"results[0].request \"/nic\" is not a request name", __LINE__);
	refused(v1, META, ALLOC(RES("nic", "-rdma.example.com", "node-a", "nic-0")),
		"status.allocation.devices.results[0].driver \"-rdma.example.com\" is not a "
		"driver name",
		__LINE__);
	refused(v1, META, ALLOC(RES("nic", LONG_DRV, "node-a", "nic-0")),
		"results[0].driver \"" LONG_DRV "\" is not a driver name", __LINE__);

	/* The same device twice. */
	refused(v1, META,
		ALLOC(RES("nic", DRV, "node-a", "nic-0") "," RES(
			"nic", DRV, "node-a", "nic-1") "," RES("other", DRV, "node-a", "nic-0")),
		"status.allocation.devices.results[2] allocates device node-a/nic-0 again",
		__LINE__);

	/* Types, each naming its path. */
	refused(v1, META, "[]", "status must be an object", __LINE__);
	refused(v1, META, "{\"allocation\":[]}", "status.allocation must be an object", __LINE__);
	refused(v1, META, "{\"allocation\":{\"devices\":[]}}",
		"status.allocation.devices must be an object", __LINE__);
	refused(v1, META, "{\"allocation\":{\"devices\":{\"results\":{}}}}",
		"status.allocation.devices.results must be an array", __LINE__);
	refused(v1, META, ALLOC("\"nic-0\""),
		"status.allocation.devices.results[0] must be an object", __LINE__);
	refused(v1, META,
		ALLOC(RES("nic", DRV, "node-a", "nic-0") "," RES(
			"nic", DRV, "node-a", "nic-1") ",{\"request\":\"nic\",\"driver\":\"" DRV
						       "\",\"pool\":\"node-a\",\"device\":7}"),
		"status.allocation.devices.results[2].device must be a string", __LINE__);
	refused(v1, META,
		ALLOC("{\"request\":\"nic\",\"driver\":\"" DRV "\",\"device\":\"nic-0\"}"),
		"status.allocation.devices.results[0].pool is missing", __LINE__);
	refused(v1, META,
		ALLOC("{\"request\":[],\"driver\":\"" DRV
		      "\",\"pool\":\"p\",\"device\":\"nic-0\"}"),
		"status.allocation.devices.results[0].request must be a string", __LINE__);
	refused(v1, META,
		ALLOC("{\"request\":\"nic\",\"driver\":null,\"pool\":\"p\",\"device\":\"d\"}"),
		"status.allocation.devices.results[0].driver is missing", __LINE__);
	refused(v1, META,
		"{\"allocation\":{\"devices\":{\"results\":[" RES(
			"nic", DRV, "node-a", "nic-0") "]}},\"reservedFor\":{}}",
		"status.reservedFor must be an array", __LINE__);
	refused(v1, META,
		"{\"allocation\":{\"devices\":{\"results\":[" RES(
			"nic", DRV, "node-a",
			"nic-0") "]}},\"reservedFor\":[" POD(UID) ",{\"resource\":\"pods\","
								  "\"name\":\"p\","
								  "\"uid\":1}]}",
		"status.reservedFor[1].uid must be a string", __LINE__);
	refused(v1, META,
		"{\"allocation\":{\"devices\":{\"results\":[" RES(
			"nic", DRV, "node-a", "nic-0") "]}},\"reservedFor\":[{\"apiGroup\":false,"
						       "\"resource\":\"pods\",\"name\":\"p\","
						       "\"uid\":\"u\"}]}",
		"status.reservedFor[0].apiGroup must be a string", __LINE__);
	refused(v1, META,
		"{\"allocation\":{\"devices\":{\"results\":[" RES(
			"nic", DRV, "node-a",
			"nic-0") "]}},\"reservedFor\":[{\"resource\":\"pods\",\"uid\":\"u\"}]}",
		"status.reservedFor[0].name is missing", __LINE__);
	refused(v1, META,
		"{\"allocation\":{\"devices\":{\"results\":[" RES(
			"nic", DRV, "node-a", "nic-0") "]}},\"reservedFor\":[7]}",
		"status.reservedFor[0] must be an object", __LINE__);
	refused(v1, META,
		"{\"allocation\":{\"devices\":{\"results\":[" RES(
			"nic", DRV, "node-a", "nic-0") "]}},\"reservedFor\":[{\"resource\":"
						       "\"pods\",\"name\":\"p\",\"uid\":\"a b\"}]}",
		"status.reservedFor[0].uid \"a b\" is not a UID", __LINE__);
	refused(v1, META,
		"{\"allocation\":{\"devices\":{\"results\":[" RES(
			"nic", DRV, "node-a",
			"nic-0") "]}},\"reservedFor\":[" POD(UID) "," POD(UID2) "," POD(UID) "]}",
		"status.reservedFor[2].uid " UID ": the pod is there twice", __LINE__);
}

/* Not JSON, not an object, too large, a NUL inside a string. */
static void test_body(void)
{
	static const char *const not_object[] = { "[]", "\"ResourceClaim\"", "42", "null" };
	char *json = claim_json("resource.k8s.io/v1", META, OURS), *big;
	size_t len = strlen(json);
	struct hpn_dra_claim out;
	struct hpn_err err;

	for (size_t i = 0; i < HPN_ARRAY_SIZE(not_object); i++)
		refused_json(not_object[i], strlen(not_object[i]), HPN_E_KUBE, EINVAL,
			     "the answer is not a JSON object", __LINE__);
	refused_json("", 0, HPN_E_KUBE, EINVAL, "the answer is not valid JSON", __LINE__);
	/* Truncated anywhere: never valid. */
	for (size_t cut = 1; cut < len; cut += 7)
		refused_json(json, cut, HPN_E_KUBE, EINVAL, "the answer is not valid JSON",
			     __LINE__);
	refused_json("{} {}", 5, HPN_E_KUBE, EINVAL, "the answer is not valid JSON", __LINE__);
	{
		char *nul = claim_json("resource.k8s.io/v1",
				       "\"name\":\"rdma-0\",\"namespace\":\"ml\",\"uid\":\"" UID
				       "\\u0000x\"",
				       OURS);

		refused_json(nul, strlen(nul), HPN_E_KUBE, EINVAL,
			     "the answer holds a \\u0000 escape", __LINE__);
		free(nul);
	}

	/* HPN_DRA_BODY_MAX bytes (the claim, then blanks) pass; one more is refused. */
	big = malloc(HPN_DRA_BODY_MAX + 1);
	memcpy(big, json, len);
	memset(big + len, ' ', HPN_DRA_BODY_MAX + 1 - len);
	CHECK_INT_EQ(parse(big, HPN_DRA_BODY_MAX, &out, &err), 0);
	CHECK_INT_EQ(out.n, 1);
	refused_json(big, HPN_DRA_BODY_MAX + 1, HPN_E_KUBE, EINVAL,
		     "the answer is 1048577 bytes, more than 1048576", __LINE__);
	free(big);
	free(json);
}

/* HPN_DRA_MAX_RESULTS of ours, and HPN_DRA_MAX_PODS pods, pass; one more does not. */
static void test_limits(void)
{
	for (int n = HPN_DRA_MAX_RESULTS; n <= HPN_DRA_MAX_RESULTS + 1; n++) {
		size_t cap = 256 + (size_t)n * 128, off;
		char *status = malloc(cap), *json;

		off = (size_t)snprintf(status, cap, "{\"allocation\":{\"devices\":{\"results\":[");
		/* Another driver's result among them does not count. */
		off += (size_t)snprintf(status + off, cap - off, "%s,",
					RES("gpu", "gpu.nvidia.com", "node-a", "gpu-0"));
		for (int i = 0; i < n; i++)
			off += (size_t)snprintf(status + off, cap - off,
						"%s{\"request\":\"nic\",\"driver\":\"" DRV
						"\",\"pool\":\"node-a\",\"device\":\"nic-%d\"}",
						i ? "," : "", i);
		snprintf(status + off, cap - off, "]}}}");
		if (n == HPN_DRA_MAX_RESULTS) {
			struct hpn_dra_claim out;
			struct hpn_err err;

			json = claim_json("resource.k8s.io/v1", META, status);
			CHECK_INT_EQ(parse(json, strlen(json), &out, &err), 0);
			CHECK_INT_EQ(out.n, HPN_DRA_MAX_RESULTS);
			CHECK_STR_EQ(out.v[HPN_DRA_MAX_RESULTS - 1].device, "nic-31");
			free(json);
		} else {
			refused("resource.k8s.io/v1", META, status,
				"status.allocation.devices.results holds more than 32 devices "
				"of " DRV,
				__LINE__);
		}
		free(status);
	}
	for (int n = HPN_DRA_MAX_PODS; n <= HPN_DRA_MAX_PODS + 1; n++) {
		char status[4096], *json;
		size_t off;

		off = (size_t)snprintf(
			status, sizeof(status),
			"{\"allocation\":{\"devices\":{\"results\":[" RES(
				"nic", DRV, "node-a", "nic-0") "]}},\"reservedFor\":[");
		for (int i = 0; i < n; i++)
			off += (size_t)snprintf(status + off, sizeof(status) - off,
						"%s{\"resource\":\"pods\",\"name\":\"p%d\","
						"\"uid\":\"pod-%d\"}",
						i ? "," : "", i, i);
		snprintf(status + off, sizeof(status) - off, "]}");
		if (n == HPN_DRA_MAX_PODS) {
			struct hpn_dra_claim out;
			struct hpn_err err;

			json = claim_json("resource.k8s.io/v1", META, status);
			CHECK_INT_EQ(parse(json, strlen(json), &out, &err), 0);
			CHECK_INT_EQ(out.n_pods, HPN_DRA_MAX_PODS);
			CHECK_STR_EQ(out.pods[HPN_DRA_MAX_PODS - 1], "pod-7");
			free(json);
		} else {
			refused("resource.k8s.io/v1", META, status,
				"status.reservedFor holds more than 8 pods", __LINE__);
		}
	}
}

#define SID1 "0f1e2d3c-4b5a-4697-8877-665544332211"
#define SID2 "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
/* A result of a shared device: its shareID, and the capacity it consumes. */
#define SRES(req, dev, sid)                                                                        \
	"{\"request\":\"" req "\",\"driver\":\"" DRV "\",\"pool\":\"node-a\",\"device\":\"" dev    \
	"\",\"shareID\":\"" sid "\",\"consumedCapacity\":{\"shares\":\"1\"}}"

/*
 * Shares (KEP-5075): a shared device's results carry their shareID (kept) and
 * consumedCapacity (checked, not kept); one shared device twice in a claim
 * under two shareIDs; the rules of ours (a share with an ID, a NIC's own
 * device without) and of every driver (the ID's form, the capacity's type).
 */
static void test_shares(void)
{
	const char *v1 = "resource.k8s.io/v1";

	{
		struct hpn_dra_claim out;
		struct hpn_err err;
		char *json = claim_json(
			v1, META,
			ALLOC(SRES("a", "nic-0-shared", SID1) "," RES(
				"b", DRV, "node-a", "nic-1") "," SRES("c", "nic-0-shared", SID2)));
		int r = parse(json, strlen(json), &out, &err);

		if (r)
			fprintf(stderr, "\t%s\n", err.msg);
		CHECK_INT_EQ(r, 0);
		CHECK_INT_EQ(out.n, 3);
		CHECK_STR_EQ(out.v[0].device, "nic-0-shared");
		CHECK_STR_EQ(out.v[0].share_id, SID1);
		CHECK_STR_EQ(out.v[1].device, "nic-1");
		CHECK_STR_EQ(out.v[1].share_id, "");
		CHECK_STR_EQ(out.v[2].device, "nic-0-shared");
		CHECK_STR_EQ(out.v[2].share_id, SID2);
		free(json);
	}
	/* Another driver's shares are its own business, if well-formed. */
	{
		struct hpn_dra_claim out;
		struct hpn_err err;
		char *json = claim_json(
			v1, META,
			ALLOC(RES("nic", DRV, "node-a", "nic-0") ",{\"request\":\"g\",\"driver\":"
								 "\"gpu.example.com\",\"pool\":"
								 "\"node-a\",\"device\":\"gpu-0\","
								 "\"shareID\":\"" SID1 "\"}"));

		CHECK_INT_EQ(parse(json, strlen(json), &out, &err), 0);
		CHECK_INT_EQ(out.n, 1);
		free(json);
	}
	/* The same share twice; a shared device without a shareID; a NIC's own with one. */
	refused(v1, META,
		ALLOC(SRES("a", "nic-0-shared", SID1) "," SRES("b", "nic-0-shared", SID1)),
		"status.allocation.devices.results[1] allocates device node-a/nic-0-shared "
		"share " SID1 " again",
		__LINE__);
	refused(v1, META, ALLOC(RES("a", DRV, "node-a", "nic-0-shared")),
		"status.allocation.devices.results[0] allocates the shared device nic-0-shared "
		"without a shareID",
		__LINE__);
	refused(v1, META, ALLOC(SRES("a", "nic-0", SID1)),
		"status.allocation.devices.results[0].shareID " SID1
		": device nic-0 is a NIC's own "
		"device",
		__LINE__);
	/* The ID's form, whatever the driver: the API's normalized UUID. */
	{
		static const char *const bad[] = {
			"0F1E2D3C-4B5A-4697-8877-665544332211",	 /* upper case */
			"0f1e2d3c4b5a46978877665544332211",	 /* no dashes */
			"0f1e2d3c-4b5a-4697-8877-66554433221",	 /* short */
			"0f1e2d3c-4b5a-4697-8877-6655443322111", /* long */
			"0f1e2d3c-4b5a-4697-8877_665544332211",	 /* a dash elsewhere */
			"0f1e2d3c-4b5a-4697-8877-66554433221g",	 /* not hex */
			"",
		};

		for (size_t i = 0; i < HPN_ARRAY_SIZE(bad); i++) {
			char status[1024], want[160];

			snprintf(status, sizeof(status),
				 ALLOC("{\"request\":\"g\",\"driver\":\"gpu.example.com\",\"pool\":"
				       "\"node-a\",\"device\":\"gpu-0\",\"shareID\":\"%s\"},"
				       "%s"),
				 bad[i], RES("nic", DRV, "node-a", "nic-0"));
			snprintf(
				want, sizeof(want),
				"status.allocation.devices.results[0].shareID \"%s\" is not a UUID",
				bad[i]);
			refused(v1, META, status, want, __LINE__);
		}
	}
	refused(v1, META,
		ALLOC("{\"request\":\"a\",\"driver\":\"" DRV "\",\"pool\":\"node-a\",\"device\":"
		      "\"nic-0-shared\",\"shareID\":7}"),
		"status.allocation.devices.results[0].shareID must be a string", __LINE__);
	refused(v1, META,
		ALLOC("{\"request\":\"a\",\"driver\":\"" DRV "\",\"pool\":\"node-a\",\"device\":"
		      "\"nic-0-shared\",\"shareID\":\"" SID1 "\",\"consumedCapacity\":[\"1\"]}"),
		"status.allocation.devices.results[0].consumedCapacity must be an object",
		__LINE__);
	refused(v1, META,
		ALLOC(RES("nic", DRV, "node-a",
			  "nic-0") ",{\"request\":\"g\",\"driver\":\"gpu.x.com\","
				   "\"pool\":\"node-a\",\"device\":\"g\","
				   "\"consumedCapacity\":{\"memory\":1}}"),
		"status.allocation.devices.results[1].consumedCapacity.memory must be a quantity",
		__LINE__);
}

/* The driver asked for is the caller's: a bad one is code 7, whatever the answer. */
static void test_driver_arg(void)
{
	static const char *const bad[] = { "", "Rdma_hpn", "rdma..example.com", LONG_DRV };
	char *json = claim_json("resource.k8s.io/v1", META, OURS);

	for (size_t i = 0; i < HPN_ARRAY_SIZE(bad); i++) {
		struct hpn_dra_claim out = { .n = 999 };
		struct hpn_err err = { 0 };

		CHECK_INT_EQ(hpn_dra_claim_parse(json, strlen(json), "ml", "rdma-0", UID, bad[i],
						 &out, &err),
			     -EINVAL);
		CHECK_INT_EQ(err.code, HPN_E_INVALID_CONFIG);
		CHECK_STR_HAS(err.msg, "DRA driver name \"");
		CHECK_INT_EQ(out.n, 999);
	}
	free(json);
}

int main(void)
{
	test_valid();
	test_refused();
	test_body();
	test_limits();
	test_shares();
	test_driver_arg();
	return check_done();
}
