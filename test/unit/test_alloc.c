// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/alloc.c: device IDs, the agent lookup protocol (request
 * and reply, their validation; the request's "shares" and the reply's
 * "shared") and its client against small servers in a
 * forked child (an answer, a refusal, silence, no socket); the NRI question
 * (its request, reply and client); the config's "agent" section (lib/conf.c).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "check.h"
#include "conf.h"
#include "tmpdir.h"

static char tmp[64];

static void test_ids(void)
{
	char id[HPN_ALLOC_ID_MAX];
	struct hpn_journal_nic n = { 0 };

	hpn_alloc_nic_id(HPN_FIXTURES "/sysfs", "ens1f0np0", id);
	CHECK_STR_EQ(id, "0000:af:00.0");
	hpn_alloc_nic_id(HPN_FIXTURES "/sysfs", "eth1", id); /* virtio: its PCI parent */
	CHECK_STR_EQ(id, "0000:00:04.0");
	hpn_alloc_nic_id(HPN_FIXTURES "/sysfs", "veth0", id);
	CHECK_STR_EQ(id, "veth0");
	snprintf(n.host.name, sizeof(n.host.name), "pool3");
	hpn_alloc_journal_id(&n, id);
	CHECK_STR_EQ(id, "pool3");
	snprintf(n.pci, sizeof(n.pci), "0000:3b:00.0");
	hpn_alloc_journal_id(&n, id);
	CHECK_STR_EQ(id, "0000:3b:00.0");
	CHECK(hpn_alloc_id_valid("0000:af:00.0"));
	CHECK(hpn_alloc_id_valid("pool_1.x@y-z"));
	CHECK(!hpn_alloc_id_valid(""));
	CHECK(!hpn_alloc_id_valid("../x"));
	CHECK(!hpn_alloc_id_valid("a b"));
	CHECK(!hpn_alloc_id_valid(
		"0123456789012345678901234567890123456789012345678901234567890123"));
}

static void test_request(void)
{
	struct hpn_alloc_req req, back;
	struct hpn_err err = { 0 };
	char *line;

	CHECK_INT_EQ(hpn_alloc_req_set(&req, "team-a", "trainer-0.x", "0f1e-22", &err), 0);
	line = hpn_alloc_req_render(&req);
	CHECK_STR_EQ(line, "{\"version\":1,\"namespace\":\"team-a\",\"name\":\"trainer-0.x\","
			   "\"uid\":\"0f1e-22\"}\n");
	CHECK_INT_EQ(hpn_alloc_req_parse(line, strlen(line) - 1, &back, &err), 0);
	CHECK_STR_EQ(back.namespace, "team-a");
	CHECK_STR_EQ(back.name, "trainer-0.x");
	CHECK_STR_EQ(back.uid, "0f1e-22");
	free(line);

	/* The CNI side refuses what CNI_ARGS may hold but Kubernetes never names. */
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_alloc_req_set(&req, "Team", "p", NULL, &err), -EINVAL);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_ENV);
	CHECK_STR_HAS(err.msg, "namespace");
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_alloc_req_set(&req, "ns", "../etc", NULL, &err), -EINVAL);
	CHECK_STR_HAS(err.msg, "pod name");
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_alloc_req_set(&req, "ns", "p", "x/y", &err), -EINVAL);
	CHECK_STR_HAS(err.msg, "UID");

	/* The agent side: every field checked, the version exact. */
	static const struct {
		const char *json;
		const char *msg;
	} bad[] = {
		{ "", "not a JSON object" },
		{ "[1]", "not a JSON object" },
		{ "{\"namespace\":\"a\",\"name\":\"b\"}", "version 0" },
		{ "{\"version\":2,\"namespace\":\"a\",\"name\":\"b\"}", "version 2" },
		{ "{\"version\":1,\"name\":\"b\"}", "namespace" },
		{ "{\"version\":1,\"namespace\":\"a\"}", "pod name" },
		{ "{\"version\":1,\"namespace\":7,\"name\":\"b\"}", "namespace" },
		{ "{\"version\":1,\"namespace\":\"a\\u0000b\",\"name\":\"b\"}",
		  "not a JSON object" },
		{ "{\"version\":1,\"namespace\":\"a\",\"name\":\"b\"} x", "not a JSON object" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		CHECK(hpn_alloc_req_parse(bad[i].json, strlen(bad[i].json), &back, &err) < 0);
		CHECK_STR_HAS(err.msg, bad[i].msg);
	}
}

/* "shares": said by a plugin that attaches shares, only in the devices question. */
static void test_request_shares(void)
{
	struct hpn_alloc_req req, back;
	struct hpn_err err = { 0 };
	char *line;

	CHECK_INT_EQ(hpn_alloc_req_set(&req, "team-a", "trainer-0", "0f1e-22", &err), 0);
	CHECK(!req.shares);
	req.shares = true;
	line = hpn_alloc_req_render(&req);
	CHECK_STR_EQ(line, "{\"version\":1,\"namespace\":\"team-a\",\"name\":\"trainer-0\","
			   "\"uid\":\"0f1e-22\",\"shares\":true}\n");
	memset(&back, 0, sizeof(back));
	CHECK_INT_EQ(hpn_alloc_req_parse(line, strlen(line) - 1, &back, &err), 0);
	CHECK(back.shares);
	CHECK_INT_EQ(back.query, HPN_ALLOC_QUERY_DEVICES);
	CHECK_STR_EQ(back.name, "trainer-0");
	free(line);

	/* Without it (a plugin older than shares): absent, and read back false. */
	req.shares = false;
	line = hpn_alloc_req_render(&req);
	CHECK_STR_LACKS(line, "shares");
	back.shares = true;
	CHECK_INT_EQ(hpn_alloc_req_parse(line, strlen(line) - 1, &back, &err), 0);
	CHECK(!back.shares);
	free(line);
	/* "shares": false said outright is the same. */
	line = strdup("{\"version\":1,\"namespace\":\"a\",\"name\":\"b\",\"shares\":false}");
	back.shares = true;
	CHECK_INT_EQ(hpn_alloc_req_parse(line, strlen(line), &back, &err), 0);
	CHECK(!back.shares);
	free(line);

	/* Another question never carries it, either way. */
	req.shares = true;
	req.query = HPN_ALLOC_QUERY_ATTACHED;
	line = hpn_alloc_req_render(&req);
	CHECK_STR_LACKS(line, "shares");
	CHECK_STR_HAS(line, "\"query\":\"attached\"");
	free(line);
	line = strdup("{\"version\":1,\"namespace\":\"a\",\"name\":\"b\",\"query\":\"pod\","
		      "\"shares\":true}");
	back.shares = true;
	CHECK_INT_EQ(hpn_alloc_req_parse(line, strlen(line), &back, &err), 0);
	CHECK_INT_EQ(back.query, HPN_ALLOC_QUERY_POD);
	CHECK(!back.shares);
	free(line);

	/* Not a boolean: refused, named. */
	line = strdup("{\"version\":1,\"namespace\":\"a\",\"name\":\"b\",\"shares\":1}");
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_alloc_req_parse(line, strlen(line), &back, &err), -EINVAL);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_CONFIG);
	CHECK_STR_HAS(err.msg, "shares");
	free(line);
}

/* "shared": one boolean per device, only in a reply where a device is a share. */
static void test_reply_shared(void)
{
	struct hpn_alloc a = { .n = 3, .pod_known = true }, back;
	struct hpn_err err = { 0 };
	char *json;

	snprintf(a.resource, sizeof(a.resource), "hpn-rdma.alibabacloud.com");
	snprintf(a.ids[0], HPN_ALLOC_ID_MAX, "0000:af:00.0");
	snprintf(a.ids[1], HPN_ALLOC_ID_MAX, "0000:af:00.0");
	snprintf(a.ids[2], HPN_ALLOC_ID_MAX, "0000:b0:00.0");
	snprintf(a.source, sizeof(a.source), "dra");
	/* No share: no "shared" at all (what an agent without --dra-shares sends). */
	json = hpn_alloc_reply_render(&a, NULL);
	CHECK_STR_LACKS(json, "shared");
	memset(&back, 0, sizeof(back));
	back.shared[0] = back.shared[2] = true;
	CHECK_INT_EQ(hpn_alloc_reply_parse(json, strlen(json), &back, &err), 0);
	CHECK(!back.shared[0] && !back.shared[1] && !back.shared[2]);
	free(json);

	/* Two shares of one NIC and a whole one: every device's flag, in order. */
	a.shared[0] = a.shared[1] = true;
	json = hpn_alloc_reply_render(&a, NULL);
	CHECK_STR_HAS(json, ",\"shared\":[true,true,false]}");
	memset(&back, 0, sizeof(back));
	CHECK_INT_EQ(hpn_alloc_reply_parse(json, strlen(json), &back, &err), 0);
	CHECK_INT_EQ(back.n, 3);
	CHECK(back.shared[0] && back.shared[1] && !back.shared[2]);
	CHECK_STR_EQ(back.ids[1], "0000:af:00.0");
	free(json);
	a.shared[0] = false;
	json = hpn_alloc_reply_render(&a, NULL);
	CHECK_STR_HAS(json, ",\"shared\":[false,true,false]}");
	free(json);

	static const struct {
		const char *json;
		const char *msg;
	} bad[] = {
		{ "{\"version\":1,\"devices\":[\"x\"],\"shared\":true}",
		  "\"shared\" is not an array of 1 booleans, one per device" },
		{ "{\"version\":1,\"devices\":[\"x\"],\"shared\":{}}",
		  "\"shared\" is not an array of 1 booleans" },
		{ "{\"version\":1,\"devices\":[\"x\",\"y\"],\"shared\":[true]}",
		  "\"shared\" is not an array of 2 booleans, one per device" },
		{ "{\"version\":1,\"devices\":[\"x\"],\"shared\":[true,false]}",
		  "\"shared\" is not an array of 1 booleans" },
		{ "{\"version\":1,\"devices\":[],\"shared\":[false]}",
		  "\"shared\" is not an array of 0 booleans" },
		{ "{\"version\":1,\"devices\":[\"x\",\"y\"],\"shared\":[true,1]}",
		  "\"shared\"[1] is not a boolean" },
		{ "{\"version\":1,\"devices\":[\"x\"],\"shared\":[\"true\"]}",
		  "\"shared\"[0] is not a boolean" },
		{ "{\"version\":1,\"devices\":[\"x\"],\"shared\":[null]}",
		  "\"shared\"[0] is not a boolean" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		memset(&back, 0, sizeof(back));
		back.n = 7; /* left as it was on error */
		CHECK_INT_EQ(hpn_alloc_reply_parse(bad[i].json, strlen(bad[i].json), &back, &err),
			     -EINVAL);
		CHECK_INT_EQ(err.code, HPN_E_DECODE);
		CHECK_STR_HAS(err.msg, bad[i].msg);
		CHECK_INT_EQ(back.n, 7);
	}
}

static void test_reply(void)
{
	struct hpn_alloc a = { .n = 2, .pod_known = true }, back;
	struct hpn_err err = { 0 };
	char *json;

	snprintf(a.resource, sizeof(a.resource), "rdma/hpn");
	snprintf(a.ids[0], HPN_ALLOC_ID_MAX, "0000:af:00.1");
	snprintf(a.ids[1], HPN_ALLOC_ID_MAX, "pool0");
	a.n_gpus = 2;
	snprintf(a.gpus[0], HPN_GPU_ID_MAX, "GPU-9a1b2c3d-0000-1111-2222-333344445555::1");
	snprintf(a.gpus[1], HPN_GPU_ID_MAX, "MIG-GPU-9a1b2c3d-0000-1111-2222-333344445556/1/0");
	json = hpn_alloc_reply_render(&a, NULL);
	CHECK_STR_EQ(json, "{\"version\":1,\"resource\":\"rdma/hpn\",\"podKnown\":true,"
			   "\"devices\":[\"0000:af:00.1\",\"pool0\"],\"gpus\":[\"GPU-9a1b2c3d-0000-"
			   "1111-2222-333344445555::1\",\"MIG-GPU-9a1b2c3d-0000-1111-2222-"
			   "333344445556/1/0\"]}");
	CHECK_INT_EQ(hpn_alloc_reply_parse(json, strlen(json), &back, &err), 0);
	CHECK_INT_EQ(back.n, 2);
	CHECK_STR_EQ(back.ids[0], "0000:af:00.1"); /* the order is the kubelet's */
	CHECK_STR_EQ(back.ids[1], "pool0");
	CHECK(back.pod_known);
	CHECK_INT_EQ(back.n_gpus, 2);
	CHECK_STR_EQ(back.gpus[1], "MIG-GPU-9a1b2c3d-0000-1111-2222-333344445556/1/0");
	free(json);

	/* An agent from before GPU lookups: no "gpus", so none known. */
	json = strdup("{\"version\":1,\"resource\":\"r/x\",\"podKnown\":true,\"devices\":[]}");
	back.n_gpus = 5;
	CHECK_INT_EQ(hpn_alloc_reply_parse(json, strlen(json), &back, &err), 0);
	CHECK_INT_EQ(back.n_gpus, 0);
	free(json);

	/* A DRA claim decided: "source" and the claims, carried both ways. */
	a.n_gpus = 0;
	snprintf(a.source, sizeof(a.source), "dra");
	a.n_claims = 2;
	snprintf(a.claims[0], HPN_ALLOC_CLAIM_MAX, "ml/nics-a");
	snprintf(a.claims[1], HPN_ALLOC_CLAIM_MAX, "ml/trainer-0-nics.b");
	json = hpn_alloc_reply_render(&a, NULL);
	CHECK_STR_HAS(json,
		      ",\"source\":\"dra\",\"claims\":[\"ml/nics-a\",\"ml/trainer-0-nics.b\"]}");
	memset(&back, 0, sizeof(back));
	CHECK_INT_EQ(hpn_alloc_reply_parse(json, strlen(json), &back, &err), 0);
	CHECK_STR_EQ(back.source, "dra");
	CHECK_INT_EQ(back.n_claims, 2);
	CHECK_STR_EQ(back.claims[1], "ml/trainer-0-nics.b");
	CHECK_STR_EQ(back.ids[0], "0000:af:00.1");
	free(json);
	/* A reply without them (the device plugin's, an older agent's): no source, no claims. */
	json = strdup("{\"version\":1,\"resource\":\"r/x\",\"podKnown\":true,\"devices\":[]}");
	CHECK_INT_EQ(hpn_alloc_reply_parse(json, strlen(json), &back, &err), 0);
	CHECK_STR_EQ(back.source, "");
	CHECK_INT_EQ(back.n_claims, 0);
	free(json);
	a.source[0] = '\0';
	a.n_claims = 0;
	json = hpn_alloc_reply_render(&a, NULL);
	CHECK(!strstr(json, "\"source\"") && !strstr(json, "\"claims\""));
	free(json);

	json = hpn_alloc_reply_render(NULL, "PodResources List: status 14 connection refused");
	CHECK_INT_EQ(hpn_alloc_reply_parse(json, strlen(json), &back, &err), -EAGAIN);
	CHECK_INT_EQ(err.code, HPN_E_TRY_AGAIN);
	CHECK_STR_HAS(err.msg, "hpn-rdma-agent: PodResources List");
	free(json);

	static const char *const bad[] = {
		"{\"version\":1}",
		"{\"version\":1,\"devices\":[\"../x\"]}",
		"{\"version\":1,\"devices\":[3]}",
		"{\"version\":1,\"devices\":{}}",
		"{\"version\":9,\"devices\":[]}",
		"{\"version\":1,\"devices\":[],\"gpus\":[\"GPU 1\"]}",
		"{\"version\":1,\"devices\":[],\"gpus\":\"GPU-1\"}",
		"{\"version\":1,\"devices\":[],\"gpus\":[\"\"]}",
		"{\"version\":1,\"devices\":[],\"source\":\"d r a\"}",
		"{\"version\":1,\"devices\":[],\"source\":7}",
		"{\"version\":1,\"devices\":[],\"source\":\"dra\",\"claims\":[\"../x\"]}",
		"{\"version\":1,\"devices\":[],\"source\":\"dra\",\"claims\":[\"ml\"]}",
		"{\"version\":1,\"devices\":[],\"source\":\"dra\",\"claims\":[\"ml/x/y\"]}",
		"{\"version\":1,\"devices\":[],\"source\":\"dra\",\"claims\":\"ml/x\"}",
		"nope",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		CHECK_INT_NE(hpn_alloc_reply_parse(bad[i], strlen(bad[i]), &back, &err), 0);
		CHECK_INT_EQ(err.code, HPN_E_DECODE);
	}
}

/* A one-connection server in a child: answers reply (NULL: stays silent). */
static pid_t serve_once(const char *path, const char *reply)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pid_t pid;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 4) == 0);
	pid = fork();
	if (pid == 0) {
		char buf[4096];
		int c = accept(fd, NULL, NULL);
		ssize_t n = c >= 0 ? read(c, buf, sizeof(buf) - 1) : -1;

		/* The request arrived whole, one line. */
		close(fd);
		if (n <= 0 || buf[n - 1] != '\n')
			_exit(3);
		if (!reply) {
			pause();
			_exit(0);
		}
		n = write(c, reply, strlen(reply));
		close(c);
		_exit(n < 0 ? 4 : 0);
	}
	close(fd);
	return pid;
}

static long long ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_lookup(void)
{
	char path[128];
	struct hpn_alloc_req req;
	struct hpn_alloc a;
	struct hpn_err err = { 0 };
	long long t;
	int status = 0;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/agent.sock", tmp);
	CHECK_INT_EQ(hpn_alloc_req_set(&req, "ns", "pod", "", &err), 0);

	/* No agent: ENOENT, then a socket file nobody listens on: ECONNREFUSED. */
	CHECK_INT_EQ(hpn_alloc_lookup(path, 500, &req, &a, &err), -ENOENT);
	CHECK_INT_EQ(err.code, HPN_E_TRY_AGAIN);
	pid = serve_once(path, "{\"version\":1,\"resource\":\"rdma/hpn\",\"podKnown\":true,"
			       "\"devices\":[\"pool1\",\"pool0\"]}");
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_alloc_lookup(path, 500, &req, &a, &err), 0);
	CHECK_INT_EQ(a.n, 2);
	CHECK_STR_EQ(a.ids[0], "pool1");
	CHECK_STR_EQ(a.resource, "rdma/hpn");
	CHECK_INT_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_alloc_lookup(path, 500, &req, &a, &err), -ECONNREFUSED);

	/* An agent that never answers: the bound holds. */
	pid = serve_once(path, NULL);
	memset(&err, 0, sizeof(err));
	t = ms();
	CHECK_INT_EQ(hpn_alloc_lookup(path, 150, &req, &a, &err), -ETIMEDOUT);
	t = ms() - t;
	CHECK(t >= 140 && t < 1000);
	CHECK_STR_HAS(err.msg, "did not answer within 150 ms");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(path);
}

/* The NRI question: the request with and without its pod, both sides. */
static void test_nri_request(void)
{
	struct hpn_alloc_req req = { .query = HPN_ALLOC_QUERY_NRI }, back;
	struct hpn_err err = { 0 };
	char *line;

	/* No pod: the node's question, no pod fields at all. */
	line = hpn_alloc_req_render(&req);
	CHECK_STR_EQ(line, "{\"version\":1,\"query\":\"nri\"}\n");
	CHECK_INT_EQ(hpn_alloc_req_parse(line, strlen(line) - 1, &back, &err), 0);
	CHECK_INT_EQ(back.query, HPN_ALLOC_QUERY_NRI);
	CHECK_STR_EQ(back.namespace, "");
	CHECK_STR_EQ(back.name, "");
	CHECK_STR_EQ(back.uid, "");
	free(line);

	/* With the pod ADD is for: carried for the agent's log. */
	CHECK_INT_EQ(hpn_alloc_req_set(&req, "team-a", "trainer-0", "6f1c-2d", &err), 0);
	req.query = HPN_ALLOC_QUERY_NRI;
	line = hpn_alloc_req_render(&req);
	CHECK_STR_EQ(line, "{\"version\":1,\"namespace\":\"team-a\",\"name\":\"trainer-0\","
			   "\"uid\":\"6f1c-2d\",\"query\":\"nri\"}\n");
	CHECK_INT_EQ(hpn_alloc_req_parse(line, strlen(line) - 1, &back, &err), 0);
	CHECK_INT_EQ(back.query, HPN_ALLOC_QUERY_NRI);
	CHECK_STR_EQ(back.namespace, "team-a");
	CHECK_STR_EQ(back.name, "trainer-0");
	CHECK_STR_EQ(back.uid, "6f1c-2d");
	free(line);

	/* The devices' question still needs its pod; a pod named is checked alike. */
	static const struct {
		const char *json;
		const char *msg;
	} bad[] = {
		{ "{\"version\":1}", "pod namespace" },
		{ "{\"version\":1,\"query\":\"pod\"}", "pod namespace" },
		{ "{\"version\":1,\"query\":\"nri\",\"namespace\":\"a\"}", "pod name" },
		{ "{\"version\":1,\"query\":\"nri\",\"name\":\"b\"}", "pod namespace" },
		{ "{\"version\":1,\"query\":\"nri\",\"uid\":\"ab\"}", "pod namespace" },
		{ "{\"version\":1,\"query\":\"nri\",\"namespace\":\"../x\",\"name\":\"b\"}",
		  "pod namespace" },
		{ "{\"version\":1,\"query\":\"NRI\"}",
		  "query \"NRI\" is not \"pod\", \"nri\" or \"attached\"" },
		{ "{\"version\":1,\"query\":\"nri\",\"namespace\":7}", "namespace" },
		{ "{\"version\":2,\"query\":\"nri\"}", "version 2" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		if (hpn_alloc_req_parse(bad[i].json, strlen(bad[i].json), &back, &err) >= 0 ||
		    !strstr(err.msg, bad[i].msg))
			fprintf(stderr, "\t%s: %s\n", bad[i].json, err.msg);
		CHECK(err.code == HPN_E_INVALID_CONFIG || err.code == HPN_E_DECODE);
		CHECK_STR_HAS(err.msg, bad[i].msg);
	}
}

/* The NRI reply: rendered, parsed back, every bad one refused with words. */
static void test_nri_reply(void)
{
	struct hpn_nri_state st = { .registered = true }, back;
	struct hpn_err err = { 0 };
	char *json;

	snprintf(st.runtime, sizeof(st.runtime), "containerd");
	snprintf(st.version, sizeof(st.version), "v2.1.9");
	snprintf(st.socket, sizeof(st.socket), "/var/run/nri/nri.sock");
	json = hpn_nri_reply_render(&st, NULL);
	CHECK_STR_EQ(json, "{\"version\":1,\"nri\":{\"registered\":true,\"socket\":\"/var/run/nri/"
			   "nri.sock\",\"runtime\":\"containerd\",\"runtimeVersion\":\"v2.1.9\"}}");
	CHECK_INT_EQ(hpn_nri_reply_parse(json, strlen(json), &back, &err), 0);
	CHECK(back.registered);
	CHECK_STR_EQ(back.runtime, "containerd");
	CHECK_STR_EQ(back.version, "v2.1.9");
	CHECK_STR_EQ(back.socket, "/var/run/nri/nri.sock");
	CHECK_STR_EQ(back.why, "");
	free(json);

	/* Not registered: why, and nothing of a runtime. */
	memset(&st, 0, sizeof(st));
	snprintf(st.socket, sizeof(st.socket), "/x/nri.sock");
	snprintf(st.why, sizeof(st.why), "not registered with the runtime's NRI at /x/nri.sock");
	json = hpn_nri_reply_render(&st, NULL);
	CHECK_STR_EQ(json, "{\"version\":1,\"nri\":{\"registered\":false,\"socket\":\"/x/"
			   "nri.sock\",\"why\":\"not registered with the runtime's NRI at "
			   "/x/nri.sock\"}}");
	CHECK_INT_EQ(hpn_nri_reply_parse(json, strlen(json), &back, &err), 0);
	CHECK(!back.registered);
	CHECK_STR_EQ(back.why, st.why);
	CHECK_STR_EQ(back.runtime, "");
	free(json);

	/* What a runtime named is sent as printable ASCII: the CNI's words stay clean. */
	memset(&st, 0, sizeof(st));
	st.registered = true;
	snprintf(st.runtime, sizeof(st.runtime), "cri\x01o\xc3\xa9");
	json = hpn_nri_reply_render(&st, NULL);
	CHECK_STR_EQ(json, "{\"version\":1,\"nri\":{\"registered\":true,\"runtime\":\"cri?o??\"}}");
	CHECK_INT_EQ(hpn_nri_reply_parse(json, strlen(json), &back, &err), 0);
	CHECK_STR_EQ(back.runtime, "cri?o??");
	free(json);

	/* A refusal (an agent older than the question) is code 11 with its words. */
	json = hpn_nri_reply_render(NULL, "query \"nri\" is not \"pod\" (or absent: the devices)");
	CHECK_STR_EQ(json, "{\"version\":1,\"error\":\"query \\\"nri\\\" is not \\\"pod\\\" (or "
			   "absent: the devices)\"}");
	memset(&err, 0, sizeof(err));
	back.registered = true;
	CHECK_INT_EQ(hpn_nri_reply_parse(json, strlen(json), &back, &err), -EAGAIN);
	CHECK_INT_EQ(err.code, HPN_E_TRY_AGAIN);
	CHECK_STR_HAS(err.msg, "hpn-rdma-agent: query \"nri\" is not \"pod\"");
	CHECK(back.registered); /* untouched */
	free(json);

	static const struct {
		const char *json;
		const char *msg;
	} bad[] = {
		{ "", "not a JSON object" },
		{ "[]", "not a JSON object" },
		{ "{\"nri\":{\"registered\":true}}", "version 0" },
		{ "{\"version\":2,\"nri\":{\"registered\":true}}", "version 2" },
		{ "{\"version\":1}", "no \"nri\" object" },
		{ "{\"version\":1,\"nri\":true}", "no \"nri\" object" },
		{ "{\"version\":1,\"nri\":{}}", "\"registered\" true or false" },
		{ "{\"version\":1,\"nri\":{\"registered\":\"yes\"}}", "\"registered\"" },
		{ "{\"version\":1,\"nri\":{\"registered\":1}}", "\"registered\"" },
		{ "{\"version\":1,\"nri\":{\"registered\":true,\"runtime\":7}}",
		  "nri.runtime is not a string" },
		{ "{\"version\":1,\"nri\":{\"registered\":true,\"runtimeVersion\":\"a\\nb\"}}",
		  "nri.runtimeVersion is not printable ASCII" },
		{ "{\"version\":1,\"nri\":{\"registered\":true,\"runtime\":\"\u00e9\"}}",
		  "nri.runtime is not printable ASCII" },
		{ "{\"version\":1,\"nri\":{\"registered\":true,\"runtime\":\"a\\u0000b\"}}",
		  "not a JSON object" },
		{ "{\"version\":1,\"nri\":{\"registered\":true,\"runtime\":\"0123456789012345678901"
		  "234567890123456789012345678901234567890123\"}}",
		  "nri.runtime is over 63 bytes" },
		{ "{\"version\":1,\"nri\":{\"registered\":false,\"why\":[]}}",
		  "nri.why is not a string" },
		{ "{\"version\":1,\"error\":7}", "error must be a string" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		if (hpn_nri_reply_parse(bad[i].json, strlen(bad[i].json), &back, &err) >= 0 ||
		    !strstr(err.msg, bad[i].msg))
			fprintf(stderr, "\t%s: %s\n", bad[i].json, err.msg);
		CHECK_INT_EQ(err.code, HPN_E_DECODE);
		CHECK_STR_HAS(err.msg, bad[i].msg);
	}
}

/* hpn_nri_ask against small servers: an answer, a refusal, no agent, a dead one. */
static void test_nri_ask(void)
{
	char path[128];
	struct hpn_alloc_req req;
	struct hpn_nri_state st;
	struct hpn_err err = { 0 };
	int status = 0;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/agent-nri.sock", tmp);
	CHECK_INT_EQ(hpn_nri_ask(path, 500, NULL, &st, &err), -ENOENT);
	CHECK_INT_EQ(err.code, HPN_E_TRY_AGAIN);
	CHECK_STR_HAS(err.msg, path);

	pid = serve_once(path, "{\"version\":1,\"nri\":{\"registered\":true,\"runtime\":"
			       "\"containerd\",\"runtimeVersion\":\"v2.1.9\"}}");
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_alloc_req_set(&req, "ns", "pod", "", &err), 0);
	CHECK_INT_EQ(hpn_nri_ask(path, 500, &req, &st, &err), 0);
	CHECK(st.registered);
	CHECK_STR_EQ(st.runtime, "containerd");
	CHECK_INT_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	pid = serve_once(path, "{\"version\":1,\"nri\":{\"registered\":false,\"why\":\"no\"}}");
	CHECK_INT_EQ(hpn_nri_ask(path, 500, NULL, &st, &err), 0);
	CHECK(!st.registered);
	CHECK_STR_EQ(st.why, "no");
	waitpid(pid, NULL, 0);

	/* An agent older than the question refuses it. */
	pid = serve_once(path,
			 "{\"version\":1,\"error\":\"query \\\"nri\\\" is not \\\"pod\\\"\"}");
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_nri_ask(path, 500, NULL, &st, &err), -EAGAIN);
	CHECK_INT_EQ(err.code, HPN_E_TRY_AGAIN);
	waitpid(pid, NULL, 0);

	/* The socket file of a killed agent: nobody listens. */
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_nri_ask(path, 500, NULL, &st, &err), -ECONNREFUSED);
	CHECK_INT_EQ(err.code, HPN_E_TRY_AGAIN);
	unlink(path);
}

static void test_conf(void)
{
	static const char base[] = "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"hpn-rdma\","
				   "\"match\":{\"devices\":[\"p*\"]}%s}";
	struct {
		const char *extra;
		int r;
		const char *msg;
	} cases[] = {
		{ "", 0, NULL },
		{ ",\"agent\":{\"socket\":\"/run/x.sock\",\"required\":true,\"timeoutMs\":50}", 0,
		  NULL },
		{ ",\"agent\":{\"lookup\":false}", 0, NULL },
		{ ",\"agent\":[]", -EINVAL, "agent must be an object" },
		{ ",\"agent\":{\"socket\":\"rel.sock\"}", -EINVAL, "agent.socket" },
		{ ",\"agent\":{\"timeoutMs\":5}", -EINVAL, "agent.timeoutMs" },
		{ ",\"agent\":{\"required\":\"yes\"}", -EINVAL, "agent.required" },
		{ ",\"agent\":{\"cdiDir\":\"\"}", 0, NULL },
		{ ",\"agent\":{\"cdiDir\":\"/etc/cdi\"}", 0, NULL },
		{ ",\"agent\":{\"cdiDir\":\"etc/cdi\"}", -EINVAL,
		  "agent.cdiDir \"etc/cdi\" must be"
		  " an absolute path" },
		{ ",\"agent\":{\"cdiDir\":\"/etc/../cdi\"}", -EINVAL, "agent.cdiDir" },
		{ ",\"agent\":{\"cdiDir\":7}", -EINVAL, "agent.cdiDir" },
		{ ",\"agent\":{\"cdiDir\":\"/"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
		  -ENAMETOOLONG, "agent.cdiDir is over 200 bytes" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char json[1024];
		struct hpn_conf conf;
		struct hpn_err err = { 0 };
		int r;

		snprintf(json, sizeof(json), base, cases[i].extra);
		r = hpn_conf_parse(json, strlen(json), HPN_CMD_ADD, &conf, &err);
		CHECK_INT_EQ(r, cases[i].r);
		if (cases[i].msg)
			CHECK_STR_HAS(err.msg, cases[i].msg);
		if (r == 0 && i == 0) {
			CHECK_STR_EQ(conf.agent.socket, HPN_DEFAULT_AGENT_SOCKET);
			CHECK(conf.agent.lookup && !conf.agent.required);
			CHECK_INT_EQ(conf.agent.timeout_ms, HPN_DEFAULT_AGENT_TIMEOUT);
			CHECK_STR_EQ(conf.agent.cdi_dir, "/var/run/cdi");
		}
		if (r == 0 && i == 1) {
			CHECK_STR_EQ(conf.agent.socket, "/run/x.sock");
			CHECK(conf.agent.required);
			CHECK_INT_EQ(conf.agent.timeout_ms, 50);
		}
		if (r == 0 && i == 2)
			CHECK(!conf.agent.lookup);
		/* "": no CDI specs; a directory of one's own. */
		if (r == 0 && i == 7)
			CHECK(conf.agent.cdi_dir == NULL);
		if (r == 0 && i == 8)
			CHECK_STR_EQ(conf.agent.cdi_dir, "/etc/cdi");
		hpn_conf_free(&conf);
	}
}

int main(void)
{
	tmpdir_make(tmp, sizeof(tmp), "alloc");
	test_ids();
	test_request();
	test_reply();
	test_request_shares();
	test_reply_shared();
	test_lookup();
	test_nri_request();
	test_nri_reply();
	test_nri_ask();
	test_conf();
	tmpdir_rm(tmp);
	return check_done();
}
