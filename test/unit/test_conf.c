// SPDX-License-Identifier: Apache-2.0
/* Unit tests for lib/conf.c: the network configuration on stdin, per command. */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "conf.h"
#include "pod.h"
#include "store.h"
#include "util.h"

/* A valid config is BASE plus one selector; tests add or swap one member. */
#define BASE_V(v) "\"cniVersion\":\"" v "\",\"name\":\"rdma-net\",\"type\":\"hpn-rdma\""
#define BASE	  BASE_V("1.0.0")
#define DEV	  "\"device\":\"ens1f0np0\""

static int parse(const char *json, enum hpn_cmd cmd, struct hpn_conf *conf, struct hpn_err *err)
{
	memset(err, 0, sizeof(*err));
	return hpn_conf_parse(json, strlen(json), cmd, conf, err);
}

/* Expects failure with code and, when given, want in the message. */
static void check_bad_cmd(const char *json, enum hpn_cmd cmd, int code, const char *want, int line)
{
	struct hpn_conf conf;
	struct hpn_err err;
	int r = parse(json, cmd, &conf, &err);

	if (r >= 0 || err.code != code || (want && !strstr(err.msg, want)))
		fprintf(stderr, "\tconfig (line %d): %.200s\n\tmsg: %s\n", line, json, err.msg);
	CHECK(r < 0);
	CHECK_INT_EQ(err.code, code);
	if (want)
		CHECK_STR_HAS(err.msg, want);
	hpn_conf_free(&conf);
}

static void check_bad(const char *json, int code, const char *want, int line)
{
	check_bad_cmd(json, HPN_CMD_ADD, code, want, line);
}

static void check_ok_cmd(const char *json, enum hpn_cmd cmd, int line)
{
	struct hpn_conf conf;
	struct hpn_err err;
	int r = parse(json, cmd, &conf, &err);

	if (r != 0)
		fprintf(stderr, "\tconfig (line %d): %.200s\n\tmsg: %s\n", line, json, err.msg);
	CHECK_INT_EQ(r, 0);
	CHECK_INT_EQ(err.code, 0);
	hpn_conf_free(&conf);
}

static void check_ok(const char *json, int line)
{
	check_ok_cmd(json, HPN_CMD_ADD, line);
}

static void test_decode(void)
{
	/* 6: not JSON, or not an object. */
	check_bad("", HPN_E_DECODE, "JSON", __LINE__);
	check_bad("not json", HPN_E_DECODE, "JSON", __LINE__);
	check_bad("{" BASE "," DEV, HPN_E_DECODE, NULL, __LINE__);
	check_bad("[]", HPN_E_DECODE, "object", __LINE__);
	check_bad("[{" BASE "," DEV "}]", HPN_E_DECODE, "object", __LINE__);
	check_bad("\"x\"", HPN_E_DECODE, "object", __LINE__);
	check_bad("42", HPN_E_DECODE, "object", __LINE__);
	check_bad("null", HPN_E_DECODE, "object", __LINE__);
	check_bad_cmd("[]", HPN_CMD_VERSION, HPN_E_DECODE, NULL, __LINE__);
	/* Trailing blanks are not garbage (echo adds a newline). */
	check_ok("{" BASE "," DEV "}\n", __LINE__);
	check_ok(" \t{" BASE "," DEV "} \r\n", __LINE__);
	/*
	 * Regression test for a fixed bug (lib/conf.c hpn_conf_parse): cJSON_ParseWithLength stops after
	 * the first value and ignores what follows, so stdin with trailing garbage
	 * or a second object is taken as valid; expected code 6 (a Go runtime's
	 * json.Unmarshal rejects the same bytes).
	 */
	check_bad("{" BASE "," DEV "}}", HPN_E_DECODE, NULL, __LINE__);
	check_bad("{" BASE "," DEV "}{\"cniVersion\":\"0.3.1\"}", HPN_E_DECODE, NULL, __LINE__);
	check_bad("{" BASE "," DEV "} x", HPN_E_DECODE, NULL, __LINE__);
}

static void test_versions(void)
{
	/* 1: a version we do not speak, named in the message. */
	check_bad("{" BASE_V("0.2.0") "," DEV "}", HPN_E_INCOMPATIBLE_VERSION, "0.2.0", __LINE__);
	check_bad("{" BASE_V("2.0.0") "," DEV "}", HPN_E_INCOMPATIBLE_VERSION, "2.0.0", __LINE__);
	check_bad("{" BASE_V("1.0") "," DEV "}", HPN_E_INCOMPATIBLE_VERSION, NULL, __LINE__);
	check_bad("{" BASE_V("") "," DEV "}", HPN_E_INCOMPATIBLE_VERSION, NULL, __LINE__);
	for (size_t i = 0; hpn_cni_versions[i]; i++) {
		char json[256];

		snprintf(json, sizeof(json),
			 "{\"cniVersion\":\"%s\",\"name\":\"n\",\"type\":\"hpn-rdma\"," DEV "}",
			 hpn_cni_versions[i]);
		check_ok(json, __LINE__);
		check_ok_cmd(json, HPN_CMD_DEL, __LINE__);
	}

	/* CHECK arrived in 0.4.0. */
	check_bad_cmd("{" BASE_V("0.3.1") "," DEV "}", HPN_CMD_CHECK, HPN_E_INCOMPATIBLE_VERSION,
		      "CHECK", __LINE__);
	check_bad_cmd("{" BASE_V("0.3.0") "," DEV "}", HPN_CMD_CHECK, HPN_E_INCOMPATIBLE_VERSION,
		      "CHECK", __LINE__);
	check_ok_cmd("{" BASE_V("0.4.0") "," DEV "}", HPN_CMD_CHECK, __LINE__);
	check_ok_cmd("{" BASE_V("1.1.0") "," DEV "}", HPN_CMD_CHECK, __LINE__);
	check_ok_cmd("{" BASE_V("0.3.1") "," DEV "}", HPN_CMD_ADD, __LINE__);

	/* STATUS and GC arrived in 1.1.0. */
	check_bad_cmd("{" BASE_V("1.0.0") "," DEV "}", HPN_CMD_STATUS, HPN_E_INCOMPATIBLE_VERSION,
		      "STATUS", __LINE__);
	check_bad_cmd("{" BASE_V("0.4.0") "," DEV "}", HPN_CMD_STATUS, HPN_E_INCOMPATIBLE_VERSION,
		      "STATUS", __LINE__);
	check_bad_cmd("{" BASE_V("1.0.0") "," DEV ",\"cni.dev/valid-attachments\":[]}", HPN_CMD_GC,
		      HPN_E_INCOMPATIBLE_VERSION, "GC", __LINE__);
	check_ok_cmd("{" BASE_V("1.1.0") "," DEV "}", HPN_CMD_STATUS, __LINE__);

	/* VERSION needs only cniVersion, and not even that. */
	check_ok_cmd("{\"cniVersion\":\"1.0.0\"}", HPN_CMD_VERSION, __LINE__);
	check_ok_cmd("{}", HPN_CMD_VERSION, __LINE__);
	check_ok_cmd("{\"cniVersion\":\"0.3.1\",\"name\":5,\"mtu\":1}", HPN_CMD_VERSION, __LINE__);

	/* Peek: just the version, or NULL. */
	{
		static const char cfg[] = "{" BASE_V("0.4.0") ",\"mtu\":\"junk\"}";
		char *v = hpn_conf_peek_version(cfg, strlen(cfg));

		CHECK_STR_EQ(v, "0.4.0");
		free(v);
		v = hpn_conf_peek_version("{", 1);
		CHECK(v == NULL);
		free(v);
		v = hpn_conf_peek_version("{\"cniVersion\":1}", 16);
		CHECK(v == NULL);
		free(v);
	}
}

static void test_required(void)
{
	/* 7: the required members, present and of the right type. */
	check_bad("{\"name\":\"n\",\"type\":\"t\"," DEV "}", HPN_E_INVALID_CONFIG, "cniVersion",
		  __LINE__);
	check_bad_cmd("{\"name\":\"n\",\"type\":\"t\"," DEV "}", HPN_CMD_DEL, HPN_E_INVALID_CONFIG,
		      "cniVersion", __LINE__);
	check_bad("{\"cniVersion\":null,\"name\":\"n\",\"type\":\"t\"," DEV "}",
		  HPN_E_INVALID_CONFIG, "cniVersion", __LINE__);
	check_bad("{\"cniVersion\":\"1.0.0\",\"type\":\"t\"," DEV "}", HPN_E_INVALID_CONFIG, "name",
		  __LINE__);
	check_bad("{\"cniVersion\":\"1.0.0\",\"name\":\"n\"," DEV "}", HPN_E_INVALID_CONFIG, "type",
		  __LINE__);
	/* Wrong types. */
	check_bad("{\"cniVersion\":1.0,\"name\":\"n\",\"type\":\"t\"," DEV "}",
		  HPN_E_INVALID_CONFIG, "cniVersion", __LINE__);
	check_bad("{\"cniVersion\":\"1.0.0\",\"name\":5,\"type\":\"t\"," DEV "}",
		  HPN_E_INVALID_CONFIG, "name", __LINE__);
	check_bad("{\"cniVersion\":\"1.0.0\",\"name\":[\"n\"],\"type\":\"t\"," DEV "}",
		  HPN_E_INVALID_CONFIG, "name", __LINE__);
	check_bad("{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":true," DEV "}",
		  HPN_E_INVALID_CONFIG, "type", __LINE__);
	check_bad("{" BASE ",\"device\":5}", HPN_E_INVALID_CONFIG, "device", __LINE__);
	check_bad("{" BASE ",\"hwaddr\":{}}", HPN_E_INVALID_CONFIG, "hwaddr", __LINE__);
	check_bad("{" BASE ",\"pciBusID\":175}", HPN_E_INVALID_CONFIG, "pciBusID", __LINE__);
	check_bad("{" BASE ",\"runtimeConfig\":{\"deviceID\":1}}", HPN_E_INVALID_CONFIG, "deviceID",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"runtimeConfig\":5}", HPN_E_INVALID_CONFIG, "runtimeConfig",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"runtimeConfig\":[]}", HPN_E_INVALID_CONFIG, "runtimeConfig",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"args\":\"K8S_POD_NAME=x\"}", HPN_E_INVALID_CONFIG, "args",
		  __LINE__);
	check_ok("{" BASE "," DEV ",\"args\":{\"cni\":{\"ips\":[]}}}", __LINE__);
	check_bad("{" BASE "," DEV ",\"ifName\":5}", HPN_E_INVALID_CONFIG, "ifName", __LINE__);
	check_bad("{" BASE "," DEV ",\"stateDir\":true}", HPN_E_INVALID_CONFIG, "stateDir",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"logLevel\":3}", HPN_E_INVALID_CONFIG, "logLevel", __LINE__);

	/* The network name becomes a directory: container-ID charset, at most 200 bytes. */
	check_bad("{\"cniVersion\":\"1.0.0\",\"name\":\"../etc\",\"type\":\"t\"," DEV "}",
		  HPN_E_INVALID_CONFIG, "name", __LINE__);
	check_bad("{\"cniVersion\":\"1.0.0\",\"name\":\"a/b\",\"type\":\"t\"," DEV "}",
		  HPN_E_INVALID_CONFIG, "name", __LINE__);
	check_bad("{\"cniVersion\":\"1.0.0\",\"name\":\"\",\"type\":\"t\"," DEV "}",
		  HPN_E_INVALID_CONFIG, "name", __LINE__);
	check_bad("{\"cniVersion\":\"1.0.0\",\"name\":\".hidden\",\"type\":\"t\"," DEV "}",
		  HPN_E_INVALID_CONFIG, "name", __LINE__);
	{
		char json[512], name[202];

		memset(name, 'n', 201);
		name[201] = '\0';
		snprintf(json, sizeof(json),
			 "{\"cniVersion\":\"1.0.0\",\"name\":\"%s\",\"type\":\"t\"," DEV "}", name);
		check_bad(json, HPN_E_INVALID_CONFIG, "name", __LINE__);
		name[200] = '\0';
		snprintf(json, sizeof(json),
			 "{\"cniVersion\":\"1.0.0\",\"name\":\"%s\",\"type\":\"t\"," DEV "}", name);
		check_ok(json, __LINE__);
	}
}

static void test_selectors(void)
{
	struct hpn_conf conf;
	struct hpn_err err;

	/* Exactly one selector. */
	check_bad("{" BASE "}", HPN_E_INVALID_CONFIG, "no device selected", __LINE__);
	check_bad("{" BASE ",\"device\":null}", HPN_E_INVALID_CONFIG, "no device selected",
		  __LINE__);
	check_bad("{" BASE ",\"runtimeConfig\":{}}", HPN_E_INVALID_CONFIG, "no device selected",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"hwaddr\":\"02:00:00:00:00:01\"}", HPN_E_INVALID_CONFIG,
		  "exactly one", __LINE__);
	check_bad("{" BASE "," DEV ",\"pciBusID\":\"0000:af:00.1\"}", HPN_E_INVALID_CONFIG,
		  "exactly one", __LINE__);
	check_bad("{" BASE ",\"hwaddr\":\"02:00:00:00:00:01\",\"pciBusID\":\"0000:af:00.1\"}",
		  HPN_E_INVALID_CONFIG, "exactly one", __LINE__);
	check_bad("{" BASE "," DEV ",\"runtimeConfig\":{\"deviceID\":\"0000:af:00.2\"}}",
		  HPN_E_INVALID_CONFIG, "exactly one", __LINE__);

	/* Each selector's value is checked. */
	check_bad("{" BASE ",\"device\":\"a/b\"}", HPN_E_INVALID_CONFIG, "device", __LINE__);
	check_bad("{" BASE ",\"device\":\"abcdefghijklmnop\"}", HPN_E_INVALID_CONFIG, "device",
		  __LINE__);
	check_bad("{" BASE ",\"device\":\"\"}", HPN_E_INVALID_CONFIG, "device", __LINE__);
	check_bad("{" BASE ",\"device\":\"..\"}", HPN_E_INVALID_CONFIG, "device", __LINE__);
	check_bad("{" BASE ",\"hwaddr\":\"02:00:00:00:00\"}", HPN_E_INVALID_CONFIG, "hwaddr",
		  __LINE__);
	check_bad("{" BASE ",\"hwaddr\":\"02-00-00-00-00-01\"}", HPN_E_INVALID_CONFIG, "hwaddr",
		  __LINE__);
	check_bad("{" BASE ",\"hwaddr\":\"0g:00:00:00:00:01\"}", HPN_E_INVALID_CONFIG, "hwaddr",
		  __LINE__);
	check_bad("{" BASE ",\"hwaddr\":\"00:00:00:00:00:00\"}", HPN_E_INVALID_CONFIG, "hwaddr",
		  __LINE__);
	check_bad("{" BASE ",\"pciBusID\":\"0000:af:00.8\"}", HPN_E_INVALID_CONFIG, "pciBusID",
		  __LINE__);
	check_bad("{" BASE ",\"pciBusID\":\"0000:af:00\"}", HPN_E_INVALID_CONFIG, "pciBusID",
		  __LINE__);
	check_bad("{" BASE ",\"pciBusID\":\"../../../etc\"}", HPN_E_INVALID_CONFIG, "pciBusID",
		  __LINE__);
	check_bad("{" BASE ",\"runtimeConfig\":{\"deviceID\":\"mlx5_0\"}}", HPN_E_INVALID_CONFIG,
		  "runtimeConfig.deviceID", __LINE__);

	/* Values come back normalised. */
	CHECK_INT_EQ(parse("{" BASE "," DEV "}", HPN_CMD_ADD, &conf, &err), 0);
	CHECK_INT_EQ(conf.selector, HPN_SEL_DEVICE);
	CHECK_STR_EQ(conf.selector_value, "ens1f0np0");
	hpn_conf_free(&conf);

	CHECK_INT_EQ(parse("{" BASE ",\"hwaddr\":\"B8:CE:F6:Aa:bB:0C\"}", HPN_CMD_ADD, &conf, &err),
		     0);
	CHECK_INT_EQ(conf.selector, HPN_SEL_HWADDR);
	CHECK_STR_EQ(conf.selector_value, "b8:ce:f6:aa:bb:0c");
	hpn_conf_free(&conf);

	CHECK_INT_EQ(parse("{" BASE ",\"pciBusID\":\"AF:00.1\"}", HPN_CMD_ADD, &conf, &err), 0);
	CHECK_INT_EQ(conf.selector, HPN_SEL_PCI);
	CHECK_STR_EQ(conf.selector_value, "0000:af:00.1");
	hpn_conf_free(&conf);

	/* A device plugin's runtimeConfig.deviceID selects by PCI address. */
	CHECK_INT_EQ(parse("{" BASE ",\"runtimeConfig\":{\"deviceID\":\"0000:AF:00.2\","
			   "\"io.kubernetes.cri.pod-annotations\":{}}}",
			   HPN_CMD_ADD, &conf, &err),
		     0);
	CHECK_INT_EQ(conf.selector, HPN_SEL_DEVICE_ID);
	CHECK_STR_EQ(conf.selector_value, "0000:af:00.2");
	hpn_conf_free(&conf);

	/* Capabilities nothing here would apply are refused with code 2, by name. */
	check_bad("{" BASE "," DEV ",\"runtimeConfig\":{\"mac\":\"02:00:00:00:00:01\"}}",
		  HPN_E_UNSUPPORTED_FIELD, "runtimeConfig.mac", __LINE__);
	check_bad("{" BASE "," DEV ",\"runtimeConfig\":{\"infinibandGUID\":\"x\"}}",
		  HPN_E_UNSUPPORTED_FIELD, "runtimeConfig.infinibandGUID", __LINE__);
	check_bad("{" BASE "," DEV ",\"runtimeConfig\":{\"portMappings\":[]}}",
		  HPN_E_UNSUPPORTED_FIELD, "runtimeConfig.portMappings", __LINE__);
	check_bad("{" BASE "," DEV ",\"runtimeConfig\":{\"bandwidth\":{}}}",
		  HPN_E_UNSUPPORTED_FIELD, "runtimeConfig.bandwidth", __LINE__);
	check_bad("{" BASE ",\"runtimeConfig\":{\"deviceID\":\"0000:af:00.2\","
		  "\"bandwidth\":{\"ingressRate\":1}}}",
		  HPN_E_UNSUPPORTED_FIELD, "bandwidth", __LINE__);
	/* Only inside runtimeConfig: a top-level "mac" is just an unknown field. */
	check_ok("{" BASE "," DEV ",\"mac\":\"02:00:00:00:00:01\",\"bandwidth\":{}}", __LINE__);

	/* deviceID only counts inside runtimeConfig. */
	check_bad("{" BASE ",\"deviceID\":\"0000:af:00.2\"}", HPN_E_INVALID_CONFIG,
		  "no device selected", __LINE__);
}

/* rdmaDevice selects the netdev behind an RDMA device: "name" or "name:port". */
static void test_rdma_device(void)
{
	/* Each goes into a JSON string as is: "\\n" is an escaped newline. */
	static const char *const bad[] = {
		"",	      "mlx5 3",	   ":1",	 "mlx5_3:0",  "mlx5_3:x",
		"mlx5_3:256", "mlx5_3:",   "mlx5_3:1:2", "mlx5_3:-1", "mlx5_3:+1",
		"mlx5_3:01",  "mlx5_3: 1", "mlx5/3",	 "../mlx5_3", "mlx5_3\\n",
		"mlx5_3:1 ",  ".",	   "..",	 "..:1",
	};
	struct hpn_conf conf;
	struct hpn_err err;
	char json[512], name[65];

	CHECK_INT_EQ(parse("{" BASE ",\"rdmaDevice\":\"mlx5_3\"}", HPN_CMD_ADD, &conf, &err), 0);
	CHECK_INT_EQ(conf.selector, HPN_SEL_RDMA);
	CHECK_STR_EQ(conf.selector_value, "mlx5_3");
	CHECK_INT_EQ(conf.rdma_port, 0);
	hpn_conf_free(&conf);

	/* A port of a multi-port device: the name alone is the selector value. */
	CHECK_INT_EQ(parse("{" BASE ",\"rdmaDevice\":\"mlx5_3:1\"}", HPN_CMD_ADD, &conf, &err), 0);
	CHECK_INT_EQ(conf.selector, HPN_SEL_RDMA);
	CHECK_STR_EQ(conf.selector_value, "mlx5_3");
	CHECK_INT_EQ(conf.rdma_port, 1);
	hpn_conf_free(&conf);
	CHECK_INT_EQ(parse("{" BASE ",\"rdmaDevice\":\"mlx4_0:255\"}", HPN_CMD_ADD, &conf, &err),
		     0);
	CHECK_STR_EQ(conf.selector_value, "mlx4_0");
	CHECK_INT_EQ(conf.rdma_port, 255);
	hpn_conf_free(&conf);
	/* Letters, digits, _ - . (udev's names are like rocep175s0f0). */
	CHECK_INT_EQ(
		parse("{" BASE ",\"rdmaDevice\":\"rocep175s0f0.RXE-1\"}", HPN_CMD_ADD, &conf, &err),
		0);
	CHECK_STR_EQ(conf.selector_value, "rocep175s0f0.RXE-1");
	hpn_conf_free(&conf);

	/* Rejected with code 7, naming rdmaDevice. */
	for (size_t i = 0; i < HPN_ARRAY_SIZE(bad); i++) {
		snprintf(json, sizeof(json), "{" BASE ",\"rdmaDevice\":\"%s\"}", bad[i]);
		check_bad(json, HPN_E_INVALID_CONFIG, "rdmaDevice", __LINE__);
	}
	check_bad("{" BASE ",\"rdmaDevice\":5}", HPN_E_INVALID_CONFIG, "rdmaDevice", __LINE__);
	check_bad("{" BASE ",\"rdmaDevice\":[\"mlx5_3\"]}", HPN_E_INVALID_CONFIG, "rdmaDevice",
		  __LINE__);

	/* IB_DEVICE_NAME_MAX is 64 with the NUL: 63 bytes fit, 64 do not. */
	memset(name, 'm', 64);
	name[64] = '\0';
	snprintf(json, sizeof(json), "{" BASE ",\"rdmaDevice\":\"%s\"}", name);
	check_bad(json, HPN_E_INVALID_CONFIG, "rdmaDevice", __LINE__);
	snprintf(json, sizeof(json), "{" BASE ",\"rdmaDevice\":\"%s:1\"}", name);
	check_bad(json, HPN_E_INVALID_CONFIG, "rdmaDevice", __LINE__);
	name[63] = '\0';
	snprintf(json, sizeof(json), "{" BASE ",\"rdmaDevice\":\"%s:1\"}", name);
	CHECK_INT_EQ(parse(json, HPN_CMD_ADD, &conf, &err), 0);
	CHECK_STR_EQ(conf.selector_value, name);
	CHECK_INT_EQ(conf.rdma_port, 1);
	hpn_conf_free(&conf);

	/* One selector only: rdmaDevice with any other is 7, naming both. */
	check_bad("{" BASE "," DEV ",\"rdmaDevice\":\"mlx5_3\"}", HPN_E_INVALID_CONFIG,
		  "rdmaDevice and device", __LINE__);
	check_bad("{" BASE ",\"rdmaDevice\":\"mlx5_3\",\"pciBusID\":\"0000:af:00.1\"}",
		  HPN_E_INVALID_CONFIG, "exactly one", __LINE__);
	check_bad("{" BASE ",\"rdmaDevice\":\"mlx5_3\","
		  "\"runtimeConfig\":{\"deviceID\":\"0000:af:00.2\"}}",
		  HPN_E_INVALID_CONFIG, "rdmaDevice", __LINE__);
	check_ok("{" BASE ",\"rdmaDevice\":\"mlx5_3\",\"device\":null}", __LINE__);
}

/* rdmaRequired (default true) and rdmaNetns (auto, shared, exclusive). */
static void test_rdma_options(void)
{
	static const struct {
		const char *value;
		enum hpn_rdma_netns mode;
	} modes[] = {
		{ "auto", HPN_RDMA_NETNS_AUTO },
		{ "shared", HPN_RDMA_NETNS_SHARED },
		{ "exclusive", HPN_RDMA_NETNS_EXCLUSIVE },
	};
	struct hpn_conf conf;
	struct hpn_err err;
	char json[256];

	/* Defaults: RDMA required, whatever mode the node is in. */
	CHECK_INT_EQ(parse("{" BASE "," DEV "}", HPN_CMD_ADD, &conf, &err), 0);
	CHECK(conf.rdma_required);
	CHECK_INT_EQ(conf.rdma_netns, HPN_RDMA_NETNS_AUTO);
	CHECK_INT_EQ(conf.rdma_port, 0);
	hpn_conf_free(&conf);
	CHECK_INT_EQ(parse("{" BASE "," DEV ",\"rdmaRequired\":null,\"rdmaNetns\":null}",
			   HPN_CMD_ADD, &conf, &err),
		     0);
	CHECK(conf.rdma_required);
	CHECK_INT_EQ(conf.rdma_netns, HPN_RDMA_NETNS_AUTO);
	hpn_conf_free(&conf);

	CHECK_INT_EQ(parse("{" BASE "," DEV ",\"rdmaRequired\":false}", HPN_CMD_ADD, &conf, &err),
		     0);
	CHECK(!conf.rdma_required);
	hpn_conf_free(&conf);
	CHECK_INT_EQ(parse("{" BASE "," DEV ",\"rdmaRequired\":true}", HPN_CMD_ADD, &conf, &err),
		     0);
	CHECK(conf.rdma_required);
	hpn_conf_free(&conf);
	check_bad("{" BASE "," DEV ",\"rdmaRequired\":\"yes\"}", HPN_E_INVALID_CONFIG,
		  "rdmaRequired", __LINE__);
	check_bad("{" BASE "," DEV ",\"rdmaRequired\":1}", HPN_E_INVALID_CONFIG, "rdmaRequired",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"rdmaRequired\":\"false\"}", HPN_E_INVALID_CONFIG,
		  "rdmaRequired", __LINE__);

	for (size_t i = 0; i < HPN_ARRAY_SIZE(modes); i++) {
		snprintf(json, sizeof(json), "{" BASE "," DEV ",\"rdmaNetns\":\"%s\"}",
			 modes[i].value);
		CHECK_INT_EQ(parse(json, HPN_CMD_ADD, &conf, &err), 0);
		CHECK_INT_EQ(conf.rdma_netns, modes[i].mode);
		hpn_conf_free(&conf);
	}
	check_bad("{" BASE "," DEV ",\"rdmaNetns\":\"bogus\"}", HPN_E_INVALID_CONFIG, "rdmaNetns",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"rdmaNetns\":\"bogus\"}", HPN_E_INVALID_CONFIG, "bogus",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"rdmaNetns\":\"Exclusive\"}", HPN_E_INVALID_CONFIG,
		  "rdmaNetns", __LINE__);
	check_bad("{" BASE "," DEV ",\"rdmaNetns\":\"\"}", HPN_E_INVALID_CONFIG, "rdmaNetns",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"rdmaNetns\":1}", HPN_E_INVALID_CONFIG, "rdmaNetns",
		  __LINE__);

	/* A required mode means an RDMA device is required too. */
	check_bad("{" BASE "," DEV ",\"rdmaNetns\":\"exclusive\",\"rdmaRequired\":false}",
		  HPN_E_INVALID_CONFIG, "rdmaRequired", __LINE__);
	check_bad("{" BASE "," DEV ",\"rdmaNetns\":\"shared\",\"rdmaRequired\":false}",
		  HPN_E_INVALID_CONFIG, "rdmaRequired", __LINE__);
	check_ok("{" BASE "," DEV ",\"rdmaNetns\":\"auto\",\"rdmaRequired\":false}", __LINE__);
	check_ok("{" BASE "," DEV ",\"rdmaNetns\":\"exclusive\",\"rdmaRequired\":true}", __LINE__);

	/* Selecting by RDMA device and not requiring one contradict each other. */
	check_bad("{" BASE ",\"rdmaDevice\":\"mlx5_3\",\"rdmaRequired\":false}",
		  HPN_E_INVALID_CONFIG, "rdmaRequired", __LINE__);
	check_bad("{" BASE ",\"rdmaDevice\":\"mlx5_3\",\"rdmaRequired\":false,"
		  "\"rdmaNetns\":\"auto\"}",
		  HPN_E_INVALID_CONFIG, "rdmaDevice", __LINE__);
	check_bad("{" BASE ",\"rdmaDevice\":\"mlx5_3:1\",\"rdmaRequired\":false,"
		  "\"rdmaNetns\":\"auto\"}",
		  HPN_E_INVALID_CONFIG, "rdmaRequired", __LINE__);
	CHECK_INT_EQ(parse("{" BASE ",\"rdmaDevice\":\"mlx5_3:2\",\"rdmaRequired\":true,"
			   "\"rdmaNetns\":\"exclusive\"}",
			   HPN_CMD_ADD, &conf, &err),
		     0);
	CHECK_STR_EQ(conf.selector_value, "mlx5_3");
	CHECK_INT_EQ(conf.rdma_port, 2);
	CHECK(conf.rdma_required);
	CHECK_INT_EQ(conf.rdma_netns, HPN_RDMA_NETNS_EXCLUSIVE);
	hpn_conf_free(&conf);
}

/* softRoce: a boolean; it makes an RDMA device, so it contradicts not requiring one. */
static void test_soft_roce(void)
{
	struct hpn_conf conf;
	struct hpn_err err;

	CHECK_INT_EQ(parse("{" BASE "," DEV "}", HPN_CMD_ADD, &conf, &err), 0);
	CHECK(!conf.soft_roce);
	hpn_conf_free(&conf);
	CHECK_INT_EQ(parse("{" BASE "," DEV ",\"softRoce\":true}", HPN_CMD_ADD, &conf, &err), 0);
	CHECK(conf.soft_roce);
	CHECK(conf.rdma_required);
	hpn_conf_free(&conf);
	CHECK_INT_EQ(parse("{" BASE "," DEV ",\"softRoce\":false,\"rdmaRequired\":false}",
			   HPN_CMD_ADD, &conf, &err),
		     0);
	CHECK(!conf.soft_roce);
	hpn_conf_free(&conf);
	CHECK_INT_EQ(parse("{" BASE "," DEV ",\"softRoce\":null}", HPN_CMD_ADD, &conf, &err), 0);
	CHECK(!conf.soft_roce);
	hpn_conf_free(&conf);
	/* Move and macvlan modes (not ipvlan), and exclusive RDMA netns mode too. */
	check_ok("{" BASE ",\"master\":\"eth0\",\"mode\":\"macvlan\",\"softRoce\":true}", __LINE__);
	check_bad("{" BASE ",\"master\":\"eth0\",\"mode\":\"ipvlan\",\"softRoce\":true}",
		  HPN_E_INVALID_CONFIG, "softRoce needs mode move or macvlan", __LINE__);
	check_ok("{" BASE "," DEV ",\"softRoce\":true,\"rdmaNetns\":\"exclusive\"}", __LINE__);
	check_ok("{" BASE ",\"match\":{\"drivers\":[\"virtio_net\"]},\"count\":2,"
		 "\"softRoce\":true}",
		 __LINE__);
	check_ok("{" BASE ",\"pciBusID\":\"0000:00:04.0\",\"softRoce\":true}", __LINE__);

	check_bad("{" BASE "," DEV ",\"softRoce\":\"true\"}", HPN_E_INVALID_CONFIG, "softRoce",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"softRoce\":1}", HPN_E_INVALID_CONFIG, "softRoce", __LINE__);
	check_bad("{" BASE "," DEV ",\"softRoce\":{}}", HPN_E_INVALID_CONFIG, "softRoce", __LINE__);
	check_bad("{" BASE "," DEV ",\"softRoce\":true,\"rdmaRequired\":false}",
		  HPN_E_INVALID_CONFIG, "rdmaRequired cannot be false", __LINE__);
	/* rdmaDevice and match.rdmaDevices take only NICs that have a device already. */
	check_bad("{" BASE ",\"rdmaDevice\":\"mlx5_3\",\"softRoce\":true}", HPN_E_INVALID_CONFIG,
		  "rdmaDevice selects a NIC by the RDMA device", __LINE__);
	check_bad("{" BASE ",\"match\":{\"rdmaDevices\":[\"mlx5_*\"]},\"softRoce\":true}",
		  HPN_E_INVALID_CONFIG, "match.rdmaDevices", __LINE__);
}

/* erdmaAnyMtu: a boolean, false by default (ADD then holds eRDMA NICs of GPU pods to 8500/1400). */
static void test_erdma_any_mtu(void)
{
	static const struct {
		const char *member; /* after the device */
		int flag;	    /* the value parsed; -1: refused with code 7 */
	} c[] = {
		{ "", 0 },
		{ ",\"erdmaAnyMtu\":true,\"mtu\":9000", 1 },
		{ ",\"erdmaAnyMtu\":false", 0 },
		{ ",\"erdmaAnyMtu\":null", 0 },
		{ ",\"erdmaAnyMtu\":\"yes\"", -1 },
		{ ",\"erdmaAnyMtu\":1", -1 },
		{ ",\"erdmaAnyMtu\":[true]", -1 },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		char json[256];
		struct hpn_conf conf;
		struct hpn_err err;
		int r;

		snprintf(json, sizeof(json), "{" BASE "," DEV "%s}", c[i].member);
		r = parse(json, HPN_CMD_ADD, &conf, &err);
		if (c[i].flag < 0) {
			CHECK(r < 0);
			CHECK_INT_EQ(err.code, HPN_E_INVALID_CONFIG);
			CHECK_STR_HAS(err.msg, "erdmaAnyMtu");
		} else {
			CHECK_INT_EQ(r, 0);
			CHECK_INT_EQ(conf.erdma_any_mtu, c[i].flag);
		}
		hpn_conf_free(&conf);
	}
}

static void test_members(void)
{
	struct hpn_conf conf;
	struct hpn_err err;
	static const char full[] =
		"{" BASE "," DEV ",\"ifName\":\"rdma0\",\"mtu\":9000,"
		"\"stateDir\":\"/tmp/hpn-state\",\"sysfsRoot\":\"/tmp/fakesys\","
		"\"logFile\":\"/tmp/hpn.log\",\"logLevel\":\"debug\","
		"\"ipam\":{\"type\":\"host-local\",\"subnet\":\"10.0.0.0/24\"},"
		"\"dns\":{\"nameservers\":[\"10.0.0.53\"]},"
		"\"prevResult\":{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"eth0\"}],"
		"\"ips\":[{\"address\":\"10.1.0.2/24\",\"interface\":0}]},"
		"\"capabilities\":{\"deviceID\":true},\"args\":{\"cni\":{\"x\":1}},"
		"\"somethingNew\":[1,{\"a\":null}]}";

	/* Defaults. */
	CHECK_INT_EQ(parse("{" BASE "," DEV "}", HPN_CMD_ADD, &conf, &err), 0);
	CHECK_STR_EQ(conf.cni_version, "1.0.0");
	CHECK_STR_EQ(conf.name, "rdma-net");
	CHECK_STR_EQ(conf.type, "hpn-rdma");
	CHECK_STR_EQ(conf.state_dir, "/run/hpn-rdma/state");
	CHECK_STR_EQ(conf.state_dir, HPN_DEFAULT_STATE_DIR);
	CHECK_STR_EQ(conf.sysfs_root, "/sys");
	CHECK(conf.log_file == NULL);
	CHECK_INT_EQ(conf.log_level, HPN_LOG_INFO);
	CHECK(conf.if_name == NULL);
	CHECK_INT_EQ(conf.mtu, 0);
	CHECK(!conf.has_ipam);
	CHECK(conf.ipam_type == NULL);
	CHECK(conf.prev_result == NULL);
	CHECK(hpn_dns_empty(&conf.dns));
	CHECK_INT_EQ(conf.n_valid, 0);
	hpn_conf_free(&conf);

	/* Everything given, unknown members tolerated, raw kept for IPAM. */
	CHECK_INT_EQ(parse(full, HPN_CMD_ADD, &conf, &err), 0);
	if (err.code)
		fprintf(stderr, "\tfull config: %s\n", err.msg);
	CHECK_STR_EQ(conf.if_name, "rdma0");
	CHECK_INT_EQ(conf.mtu, 9000);
	CHECK_STR_EQ(conf.state_dir, "/tmp/hpn-state");
	CHECK_STR_EQ(conf.sysfs_root, "/tmp/fakesys");
	CHECK_STR_EQ(conf.log_file, "/tmp/hpn.log");
	CHECK_INT_EQ(conf.log_level, HPN_LOG_DEBUG);
	CHECK(conf.has_ipam);
	CHECK_STR_EQ(conf.ipam_type, "host-local");
	CHECK(conf.prev_result != NULL);
	if (conf.prev_result) {
		CHECK_INT_EQ(conf.prev_result->n_ifaces, 1);
		CHECK_INT_EQ(conf.prev_result->n_ips, 1);
		CHECK_INT_EQ(conf.prev_result->ips[0].interface, 0);
	}
	CHECK_INT_EQ(conf.dns.n_nameservers, 1);
	CHECK(conf.raw == full);
	CHECK_INT_EQ(conf.raw_len, strlen(full));
	hpn_conf_free(&conf);

	/* ifName: null is absent; anything else must be a kernel name. */
	check_ok("{" BASE "," DEV ",\"ifName\":null}", __LINE__);
	check_bad("{" BASE "," DEV ",\"ifName\":\"eth0:1\"}", HPN_E_INVALID_CONFIG, "ifName",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"ifName\":\"\"}", HPN_E_INVALID_CONFIG, "ifName", __LINE__);
	check_bad("{" BASE "," DEV ",\"ifName\":\"abcdefghijklmnop\"}", HPN_E_INVALID_CONFIG,
		  "ifName", __LINE__);
	check_bad("{" BASE "," DEV ",\"ifName\":\"a b\"}", HPN_E_INVALID_CONFIG, "ifName",
		  __LINE__);

	/* mtu: an integer in [68, 65535]. */
	check_ok("{" BASE "," DEV ",\"mtu\":68}", __LINE__);
	check_ok("{" BASE "," DEV ",\"mtu\":65535}", __LINE__);
	check_bad("{" BASE "," DEV ",\"mtu\":67}", HPN_E_INVALID_CONFIG, "mtu", __LINE__);
	check_bad("{" BASE "," DEV ",\"mtu\":65536}", HPN_E_INVALID_CONFIG, "mtu", __LINE__);
	check_bad("{" BASE "," DEV ",\"mtu\":1.5}", HPN_E_INVALID_CONFIG, "mtu", __LINE__);
	check_bad("{" BASE "," DEV ",\"mtu\":1500.5}", HPN_E_INVALID_CONFIG, "mtu", __LINE__);
	check_bad("{" BASE "," DEV ",\"mtu\":0}", HPN_E_INVALID_CONFIG, "mtu", __LINE__);
	check_bad("{" BASE "," DEV ",\"mtu\":-1500}", HPN_E_INVALID_CONFIG, "mtu", __LINE__);
	check_bad("{" BASE "," DEV ",\"mtu\":\"9000\"}", HPN_E_INVALID_CONFIG, "mtu", __LINE__);

	/* Paths: absolute, no "..". */
	check_bad("{" BASE "," DEV ",\"stateDir\":\"var/lib/hpn\"}", HPN_E_INVALID_CONFIG,
		  "stateDir", __LINE__);
	check_bad("{" BASE "," DEV ",\"stateDir\":\"\"}", HPN_E_INVALID_CONFIG, "stateDir",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"stateDir\":\"./state\"}", HPN_E_INVALID_CONFIG, "stateDir",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"stateDir\":\"/var/lib/../../etc\"}", HPN_E_INVALID_CONFIG,
		  "stateDir", __LINE__);
	check_bad("{" BASE "," DEV ",\"stateDir\":\"/var/lib/..\"}", HPN_E_INVALID_CONFIG,
		  "stateDir", __LINE__);
	check_bad("{" BASE "," DEV ",\"stateDir\":\"/..\"}", HPN_E_INVALID_CONFIG, "stateDir",
		  __LINE__);
	check_ok("{" BASE "," DEV ",\"stateDir\":\"/var/lib/..hpn\"}", __LINE__);
	check_bad("{" BASE "," DEV ",\"sysfsRoot\":\"sys\"}", HPN_E_INVALID_CONFIG, "sysfsRoot",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"logFile\":\"hpn.log\"}", HPN_E_INVALID_CONFIG, "logFile",
		  __LINE__);

	/* logLevel: one of four words. */
	check_ok("{" BASE "," DEV ",\"logLevel\":\"error\"}", __LINE__);
	check_ok("{" BASE "," DEV ",\"logLevel\":\"warn\"}", __LINE__);
	check_ok("{" BASE "," DEV ",\"logLevel\":\"info\"}", __LINE__);
	check_bad("{" BASE "," DEV ",\"logLevel\":\"verbose\"}", HPN_E_INVALID_CONFIG, "logLevel",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"logLevel\":\"\"}", HPN_E_INVALID_CONFIG, "logLevel",
		  __LINE__);

	/* dns must be an object of string lists. */
	check_bad("{" BASE "," DEV ",\"dns\":[]}", HPN_E_INVALID_CONFIG, "dns", __LINE__);
	check_bad("{" BASE "," DEV ",\"dns\":{\"nameservers\":\"10.0.0.53\"}}",
		  HPN_E_INVALID_CONFIG, "nameservers", __LINE__);
}

static void test_ipam(void)
{
	struct hpn_conf conf;
	struct hpn_err err;

	/* "ipam": {} and null mean no IPAM, as in the reference plugins. */
	CHECK_INT_EQ(parse("{" BASE "," DEV ",\"ipam\":{}}", HPN_CMD_ADD, &conf, &err), 0);
	CHECK(!conf.has_ipam);
	CHECK(conf.ipam_type == NULL);
	hpn_conf_free(&conf);
	CHECK_INT_EQ(parse("{" BASE "," DEV ",\"ipam\":null}", HPN_CMD_ADD, &conf, &err), 0);
	CHECK(!conf.has_ipam);
	hpn_conf_free(&conf);
	CHECK_INT_EQ(parse("{" BASE "," DEV ",\"ipam\":{\"type\":\"static\",\"addresses\":[]}}",
			   HPN_CMD_ADD, &conf, &err),
		     0);
	CHECK(conf.has_ipam);
	CHECK_STR_EQ(conf.ipam_type, "static");
	hpn_conf_free(&conf);

	check_bad("{" BASE "," DEV ",\"ipam\":{\"subnet\":\"10.0.0.0/24\"}}", HPN_E_INVALID_CONFIG,
		  "ipam.type", __LINE__);
	check_bad("{" BASE "," DEV ",\"ipam\":{\"type\":null,\"subnet\":\"10.0.0.0/24\"}}",
		  HPN_E_INVALID_CONFIG, "ipam.type", __LINE__);
	check_bad("{" BASE "," DEV ",\"ipam\":{\"type\":5}}", HPN_E_INVALID_CONFIG, "ipam.type",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"ipam\":\"host-local\"}", HPN_E_INVALID_CONFIG, "ipam",
		  __LINE__);
	/* The type is an executable name looked up in CNI_PATH: no paths, no dot files. */
	check_bad("{" BASE "," DEV ",\"ipam\":{\"type\":\"../../bin/sh\"}}", HPN_E_INVALID_CONFIG,
		  "ipam.type", __LINE__);
	check_bad("{" BASE "," DEV ",\"ipam\":{\"type\":\"/bin/sh\"}}", HPN_E_INVALID_CONFIG,
		  "ipam.type", __LINE__);
	check_bad("{" BASE "," DEV ",\"ipam\":{\"type\":\"host/local\"}}", HPN_E_INVALID_CONFIG,
		  "ipam.type", __LINE__);
	check_bad("{" BASE "," DEV ",\"ipam\":{\"type\":\".hidden\"}}", HPN_E_INVALID_CONFIG,
		  "ipam.type", __LINE__);
	check_bad("{" BASE "," DEV ",\"ipam\":{\"type\":\"\"}}", HPN_E_INVALID_CONFIG, "ipam.type",
		  __LINE__);
}

static void test_prev_result(void)
{
	check_ok("{" BASE "," DEV ",\"prevResult\":null}", __LINE__);
	check_ok("{" BASE "," DEV ",\"prevResult\":{}}", __LINE__);
	/* Invalid prevResult is an invalid config (7), and says where. */
	check_bad("{" BASE "," DEV ",\"prevResult\":\"x\"}", HPN_E_INVALID_CONFIG, "prevResult",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"prevResult\":[]}", HPN_E_INVALID_CONFIG, "prevResult",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"prevResult\":{\"ips\":[{\"address\":\"10.0.0.1\"}]}}",
		  HPN_E_INVALID_CONFIG, "prevResult", __LINE__);
	check_bad("{" BASE "," DEV ",\"prevResult\":{\"ips\":[{\"address\":\"10.0.0.1/8\","
		  "\"interface\":3}]}}",
		  HPN_E_INVALID_CONFIG, "prevResult", __LINE__);
	check_bad("{" BASE "," DEV ",\"prevResult\":{\"interfaces\":[{}]}}", HPN_E_INVALID_CONFIG,
		  "prevResult", __LINE__);
	check_bad_cmd("{" BASE_V("0.4.0") "," DEV ",\"prevResult\":{\"routes\":5}}", HPN_CMD_CHECK,
		      HPN_E_INVALID_CONFIG, "prevResult", __LINE__);
}

static void test_gc(void)
{
	struct hpn_conf conf;
	struct hpn_err err;

	check_bad_cmd("{" BASE_V("1.1.0") "," DEV "}", HPN_CMD_GC, HPN_E_INVALID_CONFIG,
		      "cni.dev/valid-attachments", __LINE__);
	check_bad_cmd("{" BASE_V("1.1.0") "," DEV ",\"cni.dev/valid-attachments\":{}}", HPN_CMD_GC,
		      HPN_E_INVALID_CONFIG, "cni.dev/valid-attachments", __LINE__);
	check_bad_cmd(
		"{" BASE_V("1.1.0") "," DEV
				    ",\"cni.dev/valid-attachments\":[{\"containerID\":\"c1\"}]}",
		HPN_CMD_GC, HPN_E_INVALID_CONFIG, "cni.dev/valid-attachments", __LINE__);
	check_bad_cmd(
		"{" BASE_V(
			"1.1.0") "," DEV ",\"cni.dev/"
				 "valid-attachments\":[{\"containerID\":1,\"ifname\":\"net1\"}]}",
		HPN_CMD_GC, HPN_E_INVALID_CONFIG, "cni.dev/valid-attachments", __LINE__);
	check_bad_cmd("{" BASE_V("1.1.0") "," DEV ",\"cni.dev/valid-attachments\":[5]}", HPN_CMD_GC,
		      HPN_E_INVALID_CONFIG, "cni.dev/valid-attachments", __LINE__);
	/* Only GC needs the list. */
	check_ok_cmd("{" BASE_V("1.1.0") "," DEV "}", HPN_CMD_ADD, __LINE__);

	CHECK_INT_EQ(parse("{" BASE_V("1.1.0") "," DEV ",\"cni.dev/valid-attachments\":[]}",
			   HPN_CMD_GC, &conf, &err),
		     0);
	CHECK_INT_EQ(conf.n_valid, 0);
	hpn_conf_free(&conf);

	CHECK_INT_EQ(parse("{" BASE_V("1.1.0") "," DEV ",\"cni.dev/valid-attachments\":["
					       "{\"containerID\":\"c1\",\"ifname\":\"net1\"},"
					       "{\"containerID\":\"c2\",\"ifname\":\"net2\","
					       "\"extra\":true}]}",
			   HPN_CMD_GC, &conf, &err),
		     0);
	CHECK_INT_EQ(conf.n_valid, 2);
	if (conf.n_valid == 2) {
		CHECK_STR_EQ(conf.valid[0].container_id, "c1");
		CHECK_STR_EQ(conf.valid[0].ifname, "net1");
		CHECK_STR_EQ(conf.valid[1].container_id, "c2");
		CHECK_STR_EQ(conf.valid[1].ifname, "net2");
	}
	hpn_conf_free(&conf);
}

/*
 * Runs fn in a child so that a crash (an AddressSanitizer report in the
 * sanitizer build) becomes a failed check here instead of ending the test.
 */
static bool run_isolated(void (*fn)(void))
{
	int status = 0;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		check_passed = check_failed = 0;
		fn();
		fflush(NULL);
		_exit(check_failed ? 1 : 0);
	}
	if (waitpid(pid, &status, 0) != pid)
		return false;
	if (WIFSIGNALED(status))
		fprintf(stderr, "\tchild killed by signal %d\n", WTERMSIG(status));
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void short_paths(void)
{
	/*
	 * Regression test for a fixed bug (lib/conf.c conf_abs_path): the "/.." suffix test is
	 * strcmp(*ret + strlen(*ret) - 3, "/..") with no length check, so a path
	 * of one or two bytes ("/", "/x") makes it read before the start of the
	 * heap string (heap-buffer-overflow under ASan). Both are valid absolute
	 * paths and must be accepted without reading out of bounds.
	 */
	check_ok("{" BASE "," DEV ",\"stateDir\":\"/x\"}", __LINE__);
	check_ok("{" BASE "," DEV ",\"sysfsRoot\":\"/\"}", __LINE__);
}

/* match, count, mode, master, macvlanMode, ipvlanMode. */
static void test_pools_and_modes(void)
{
	struct hpn_conf conf;
	struct hpn_err err;

	CHECK_INT_EQ(parse("{" BASE
			   ",\"match\":{\"devices\":[\"ens*\"],\"drivers\":[\"mlx5_core\"],"
			   "\"rdmaDevices\":[\"mlx5_*\"],\"pciAddresses\":[\"af:00.1\"],"
			   "\"numaNode\":1},\"count\":4}",
			   HPN_CMD_ADD, &conf, &err),
		     0);
	CHECK_INT_EQ(conf.selector, HPN_SEL_MATCH);
	CHECK_INT_EQ(conf.count, 4);
	CHECK_INT_EQ(conf.mode, HPN_MODE_MOVE);
	CHECK_INT_EQ(conf.match.n_devices, 1);
	CHECK_STR_EQ(conf.match.devices[0], "ens*");
	CHECK_STR_EQ(conf.match.drivers[0], "mlx5_core");
	CHECK_STR_EQ(conf.match.rdma_devices[0], "mlx5_*");
	CHECK_STR_EQ(conf.match.pci[0], "0000:af:00.1"); /* normalised */
	CHECK(conf.match.has_numa_node);
	CHECK_INT_EQ(conf.match.numa_node, 1);
	hpn_conf_free(&conf);

	CHECK_INT_EQ(parse("{" BASE ",\"mode\":\"macvlan\",\"master\":\"ens1\","
			   "\"macvlanMode\":\"private\"}",
			   HPN_CMD_ADD, &conf, &err),
		     0);
	CHECK_INT_EQ(conf.mode, HPN_MODE_MACVLAN);
	CHECK_INT_EQ(conf.selector, HPN_SEL_DEVICE);
	CHECK(conf.has_master);
	CHECK_INT_EQ(conf.child_mode, MACVLAN_MODE_PRIVATE);
	CHECK_INT_EQ(conf.count, 1);
	hpn_conf_free(&conf);
	CHECK_INT_EQ(parse("{" BASE ",\"mode\":\"macvlan\"," DEV "}", HPN_CMD_ADD, &conf, &err), 0);
	CHECK_INT_EQ(conf.child_mode, MACVLAN_MODE_BRIDGE); /* default */
	hpn_conf_free(&conf);
	CHECK_INT_EQ(parse("{" BASE ",\"mode\":\"ipvlan\",\"ipvlanMode\":\"l3s\"," DEV "}",
			   HPN_CMD_ADD, &conf, &err),
		     0);
	CHECK_INT_EQ(conf.mode, HPN_MODE_IPVLAN);
	CHECK_INT_EQ(conf.child_mode, IPVLAN_MODE_L3S);
	hpn_conf_free(&conf);
	check_ok("{" BASE ",\"mode\":\"move\"," DEV "}", __LINE__);
	check_ok("{" BASE ",\"mode\":\"ipvlan\",\"match\":{\"numaNode\":0}}", __LINE__);

	check_bad("{" BASE "," DEV ",\"match\":{\"devices\":[\"a\"]}}", HPN_E_INVALID_CONFIG,
		  "device and match both select", __LINE__);
	check_bad("{" BASE ",\"match\":{}}", HPN_E_INVALID_CONFIG, "match needs at least one",
		  __LINE__);
	check_bad("{" BASE ",\"match\":[]}", HPN_E_INVALID_CONFIG, "match must be an object",
		  __LINE__);
	check_bad("{" BASE ",\"match\":{\"devices\":[]}}", HPN_E_INVALID_CONFIG, "match.devices",
		  __LINE__);
	check_bad("{" BASE ",\"match\":{\"devices\":[1]}}", HPN_E_INVALID_CONFIG,
		  "match.devices[0]", __LINE__);
	check_bad("{" BASE ",\"match\":{\"drivers\":[\"../x\"]}}", HPN_E_INVALID_CONFIG,
		  "not a driver name", __LINE__);
	check_bad("{" BASE ",\"match\":{\"pciAddresses\":[\"zz\"]}}", HPN_E_INVALID_CONFIG,
		  "pciAddresses[0]", __LINE__);
	check_bad("{" BASE ",\"match\":{\"numaNode\":-1}}", HPN_E_INVALID_CONFIG, "numaNode",
		  __LINE__);
	check_bad("{" BASE ",\"match\":{\"numaNode\":0},\"count\":0}", HPN_E_INVALID_CONFIG,
		  "count", __LINE__);
	check_bad("{" BASE ",\"match\":{\"numaNode\":0},\"count\":17}", HPN_E_INVALID_CONFIG,
		  "count", __LINE__);
	check_bad("{" BASE "," DEV ",\"count\":2}", HPN_E_INVALID_CONFIG, "count 2 needs match",
		  __LINE__);
	check_bad("{" BASE ",\"master\":\"ens1\"}", HPN_E_INVALID_CONFIG,
		  "master needs mode macvlan or ipvlan", __LINE__);
	check_bad("{" BASE ",\"master\":\"ens1\",\"mode\":\"macvlan\"," DEV "}",
		  HPN_E_INVALID_CONFIG, "both select", __LINE__);
	check_bad("{" BASE "," DEV ",\"mode\":\"bridge\"}", HPN_E_INVALID_CONFIG,
		  "not one of move, macvlan, ipvlan", __LINE__);
	check_bad("{" BASE "," DEV ",\"mode\":\"macvlan\",\"macvlanMode\":\"l2\"}",
		  HPN_E_INVALID_CONFIG, "macvlanMode \"l2\"", __LINE__);
	check_bad("{" BASE "," DEV ",\"mode\":\"ipvlan\",\"ipvlanMode\":\"bridge\"}",
		  HPN_E_INVALID_CONFIG, "ipvlanMode \"bridge\"", __LINE__);
	check_bad("{" BASE "," DEV ",\"macvlanMode\":\"bridge\"}", HPN_E_INVALID_CONFIG,
		  "macvlanMode needs mode macvlan", __LINE__);
	check_bad("{" BASE "," DEV ",\"mode\":\"macvlan\",\"ipvlanMode\":\"l2\"}",
		  HPN_E_INVALID_CONFIG, "ipvlanMode needs mode ipvlan", __LINE__);
}

/* ---- kubernetes, podSelector.label, and the pod from the API ---------------- */

#define KUBE	  "\"kubernetes\":{\"kubeconfig\":\"/etc/cni/net.d/hpn-rdma.d/hpn-rdma.kubeconfig\"}"
#define LABEL_SEL "\"podSelector\":{\"label\":\"alibabacloud.com/hpn-type\"}"
#define BOTH_SEL                                                                                   \
	"\"podSelector\":{\"annotation\":\"alibabacloud.com/hpn-type\","                           \
	"\"label\":\"alibabacloud.com/hpn-type\",\"value\":\"rdma\"}"
#define ANNOS(x) "\"runtimeConfig\":{\"io.kubernetes.cri.pod-annotations\":{" x "}}"
#define A_SEL	 "\"alibabacloud.com/hpn-type\":\"rdma\""
#define A_MODEL	 "\"alibabacloud.com/gpu-model-series\":\"GU8TF\""
#define A_COUNT	 "\"alibabacloud.com/gpu-count\":\"8\""

/* Parses json for ADD (it must be valid); the caller frees *c. */
/* "gpus": defaults, every member, and each bad value named. */
static void test_gpus(void)
{
	struct hpn_conf conf;
	struct hpn_err err;

	CHECK_INT_EQ(
		parse("{" BASE ",\"match\":{\"devices\":[\"ens*\"]}}", HPN_CMD_ADD, &conf, &err),
		0);
	CHECK(conf.gpus.enabled);
	CHECK(!conf.gpus.per_gpu);
	CHECK(!conf.gpus.refuse_far);
	CHECK_INT_EQ(conf.gpus.near, HPN_DIST_PXB); /* NCCL_NET_GDR_LEVEL's default */
	CHECK_STR_EQ(conf.gpus.proc_root, "/proc");
	hpn_conf_free(&conf);
	CHECK_INT_EQ(parse("{" BASE ",\"match\":{\"devices\":[\"ens*\"]},\"gpus\":{"
			   "\"nicPerGpu\":true,\"far\":\"refuse\",\"near\":\"PIX\","
			   "\"procRoot\":\"/host/proc\",\"enabled\":true}}",
			   HPN_CMD_ADD, &conf, &err),
		     0);
	CHECK(conf.gpus.per_gpu);
	CHECK(conf.gpus.refuse_far);
	CHECK_INT_EQ(conf.gpus.near, HPN_DIST_PIX);
	CHECK_STR_EQ(conf.gpus.proc_root, "/host/proc");
	hpn_conf_free(&conf);
	check_ok("{" BASE ",\"match\":{\"devices\":[\"e*\"]},\"gpus\":{\"enabled\":false}}",
		 __LINE__);
	check_ok("{" BASE "," DEV ",\"gpus\":null}", __LINE__);
	check_bad("{" BASE "," DEV ",\"gpus\":[]}", 7, "gpus must be an object", __LINE__);
	check_bad("{" BASE "," DEV ",\"gpus\":{\"nicPerGpu\":true}}", 7,
		  "gpus.nicPerGpu needs match", __LINE__);
	check_bad("{" BASE "," DEV ",\"gpus\":{\"far\":\"maybe\"}}", 7, "gpus.far \"maybe\"",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"gpus\":{\"near\":\"pix\"}}", 7, "gpus.near \"pix\"",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"gpus\":{\"near\":\"unknown\"}}", 7, "gpus.near", __LINE__);
	check_bad("{" BASE "," DEV ",\"gpus\":{\"procRoot\":\"proc\"}}", 7, "gpus.procRoot",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"gpus\":{\"enabled\":1}}", 7, "gpus.enabled", __LINE__);
}

static void parse_ok(const char *json, struct hpn_conf *c, int line)
{
	struct hpn_err err;

	if (parse(json, HPN_CMD_ADD, c, &err) != 0)
		fprintf(stderr, "\tconfig (line %d): %.300s\n\tmsg: %s\n", line, json, err.msg);
	CHECK_INT_EQ(err.code, 0);
}

/* "nri": required and memlock, their defaults, every bad value named (code 7). */
static void test_nri(void)
{
	static const struct {
		const char *nri; /* the member, or NULL: absent */
		bool required;
		uint64_t memlock;
	} ok[] = {
		{ NULL, false, HPN_MEMLOCK_UNLIMITED },
		{ "null", false, HPN_MEMLOCK_UNLIMITED },
		{ "{}", false, HPN_MEMLOCK_UNLIMITED },
		{ "{\"required\":true}", true, HPN_MEMLOCK_UNLIMITED },
		{ "{\"required\":false,\"memlock\":\"unlimited\"}", false, HPN_MEMLOCK_UNLIMITED },
		{ "{\"required\":null,\"memlock\":null}", false, HPN_MEMLOCK_UNLIMITED },
		{ "{\"memlock\":0}", false, 0 },
		{ "{\"memlock\":-0}", false, 0 },
		{ "{\"memlock\":8388608}", false, 8388608 },
		{ "{\"memlock\":6.8719476736e10}", false, 68719476736ull },
		{ "{\"memlock\":9007199254740992,\"required\":true}", true, HPN_MEMLOCK_MAX },
	};
	static const struct {
		const char *nri;
		const char *msg;
	} bad[] = {
		{ "[]", "nri must be an object" },
		{ "\"required\"", "nri must be an object" },
		{ "true", "nri must be an object" },
		{ "{\"required\":1}", "nri.required must be true or false" },
		{ "{\"required\":\"true\"}", "nri.required must be true or false" },
		{ "{\"memlock\":-1}", "nri.memlock -1 is not an integer of bytes from 0 to "
				      "9007199254740992" },
		{ "{\"memlock\":1.5}", "nri.memlock 1.5 is not an integer of bytes" },
		{ "{\"memlock\":1e16}", "nri.memlock 1e+16 is not an integer" },
		{ "{\"memlock\":1e999}", "nri.memlock" },
		{ "{\"memlock\":\"8M\"}", "nri.memlock \"8M\" is not \"unlimited\"" },
		{ "{\"memlock\":\"8388608\"}", "nri.memlock \"8388608\" is not \"unlimited\"" },
		{ "{\"memlock\":\"Unlimited\"}", "nri.memlock \"Unlimited\"" },
		{ "{\"memlock\":\"\"}", "nri.memlock \"\" is not" },
		{ "{\"memlock\":\"infinity\"}", "nri.memlock \"infinity\"" },
		{ "{\"memlock\":true}",
		  "nri.memlock must be \"unlimited\" or an integer of bytes" },
		{ "{\"memlock\":[0]}", "nri.memlock must be" },
		{ "{\"memlock\":{}}", "nri.memlock must be" },
	};
	char json[512];

	for (size_t i = 0; i < HPN_ARRAY_SIZE(ok); i++) {
		struct hpn_conf c;

		snprintf(json, sizeof(json), "{" BASE "," DEV "%s%s}", ok[i].nri ? ",\"nri\":" : "",
			 ok[i].nri ? ok[i].nri : "");
		parse_ok(json, &c, __LINE__);
		if (c.nri.required != ok[i].required || c.nri.memlock != ok[i].memlock)
			fprintf(stderr, "\t%s: required %d, memlock %llu\n", json, c.nri.required,
				(unsigned long long)c.nri.memlock);
		CHECK(c.nri.required == ok[i].required);
		CHECK(c.nri.memlock == ok[i].memlock);
		hpn_conf_free(&c);
	}
	for (size_t i = 0; i < HPN_ARRAY_SIZE(bad); i++) {
		snprintf(json, sizeof(json), "{" BASE "," DEV ",\"nri\":%s}", bad[i].nri);
		check_bad(json, HPN_E_INVALID_CONFIG, bad[i].msg, __LINE__);
		/* Every command reads the same config: DEL refuses it alike. */
		check_bad_cmd(json, HPN_CMD_DEL, HPN_E_INVALID_CONFIG, bad[i].msg, __LINE__);
	}
}

/* ADD reads the pod (why names it) or does not (why NULL). */
static void check_lookup(const char *json, bool selected, const char *why, int line)
{
	struct hpn_conf c;

	parse_ok(json, &c, line);
	if (c.pod_lookup != (why != NULL) || c.pod_selected != selected)
		fprintf(stderr, "\tline %d: pod_lookup %d (%s), pod_selected %d\n", line,
			c.pod_lookup, c.pod_lookup_why ? c.pod_lookup_why : "-", c.pod_selected);
	CHECK(c.pod_lookup == (why != NULL));
	CHECK(c.pod_selected == selected);
	if (why)
		CHECK_STR_EQ(c.pod_lookup_why, why);
	hpn_conf_free(&c);
}

static void test_kubernetes(void)
{
	struct hpn_conf c;

	/* Defaults. */
	parse_ok("{" BASE "," DEV "," KUBE "}", &c, __LINE__);
	CHECK_STR_EQ(c.kube.kubeconfig, "/etc/cni/net.d/hpn-rdma.d/hpn-rdma.kubeconfig");
	CHECK_INT_EQ(c.kube.timeout_ms, 5000);
	CHECK_STR_EQ(c.kube.gpu_resource, "nvidia.com/gpu");
	hpn_conf_free(&c);
	parse_ok("{" BASE "," DEV "}", &c, __LINE__);
	CHECK(c.kube.kubeconfig == NULL);
	CHECK(!c.pod_lookup);
	hpn_conf_free(&c);
	parse_ok("{" BASE "," DEV ",\"kubernetes\":{\"kubeconfig\":\"/k\",\"timeout\":60000,"
		 "\"gpuResource\":\"example.com/accel\"}}",
		 &c, __LINE__);
	CHECK_INT_EQ(c.kube.timeout_ms, 60000);
	CHECK_STR_EQ(c.kube.gpu_resource, "example.com/accel");
	hpn_conf_free(&c);
	check_ok("{" BASE "," DEV ",\"kubernetes\":{\"kubeconfig\":\"/k\",\"timeout\":1}}",
		 __LINE__);
	check_ok("{" BASE "," DEV ",\"kubernetes\":null}", __LINE__);

	check_bad("{" BASE "," DEV ",\"kubernetes\":\"/k\"}", HPN_E_INVALID_CONFIG,
		  "kubernetes must be an object", __LINE__);
	check_bad("{" BASE "," DEV ",\"kubernetes\":{}}", HPN_E_INVALID_CONFIG,
		  "kubernetes.kubeconfig is required", __LINE__);
	check_bad("{" BASE "," DEV ",\"kubernetes\":{\"kubeconfig\":\"kubeconfig\"}}",
		  HPN_E_INVALID_CONFIG, "kubernetes.kubeconfig \"kubeconfig\" must be an absolute",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"kubernetes\":{\"kubeconfig\":\"/etc/../k\"}}",
		  HPN_E_INVALID_CONFIG, "kubernetes.kubeconfig", __LINE__);
	check_bad("{" BASE "," DEV ",\"kubernetes\":{\"kubeconfig\":7}}", HPN_E_INVALID_CONFIG,
		  "kubernetes.kubeconfig must be a string", __LINE__);
	check_bad("{" BASE "," DEV ",\"kubernetes\":{\"kubeconfig\":\"/k\",\"timeout\":0}}",
		  HPN_E_INVALID_CONFIG, "kubernetes.timeout must be an integer in [1, 60000]",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"kubernetes\":{\"kubeconfig\":\"/k\",\"timeout\":60001}}",
		  HPN_E_INVALID_CONFIG, "kubernetes.timeout", __LINE__);
	check_bad("{" BASE "," DEV ",\"kubernetes\":{\"kubeconfig\":\"/k\",\"timeout\":2.5}}",
		  HPN_E_INVALID_CONFIG, "kubernetes.timeout", __LINE__);
	check_bad("{" BASE "," DEV ",\"kubernetes\":{\"kubeconfig\":\"/k\",\"timeout\":\"5s\"}}",
		  HPN_E_INVALID_CONFIG, "kubernetes.timeout", __LINE__);
	check_bad("{" BASE "," DEV
		  ",\"kubernetes\":{\"kubeconfig\":\"/k\",\"gpuResource\":\"nvidia.com/\"}}",
		  HPN_E_INVALID_CONFIG, "kubernetes.gpuResource \"nvidia.com/\" is not a resource",
		  __LINE__);
	check_bad("{" BASE "," DEV ",\"kubernetes\":{\"kubeconfig\":\"/k\",\"gpuResource\":\"\"}}",
		  HPN_E_INVALID_CONFIG, "kubernetes.gpuResource", __LINE__);

	/* podSelector.label: needs the API, a label key, a value a label can have. */
	check_bad("{" BASE "," DEV "," LABEL_SEL "}", HPN_E_INVALID_CONFIG,
		  "podSelector.label needs kubernetes.kubeconfig", __LINE__);
	check_bad("{" BASE "," DEV "," KUBE ",\"podSelector\":{\"label\":\"a b\"}}",
		  HPN_E_INVALID_CONFIG, "podSelector.label \"a b\" is not a label key", __LINE__);
	check_bad("{" BASE "," DEV "," KUBE ",\"podSelector\":{\"label\":\"\"}}",
		  HPN_E_INVALID_CONFIG, "podSelector.label \"\" is not a label key", __LINE__);
	check_bad("{" BASE "," DEV "," KUBE ",\"podSelector\":{\"label\":\"x\",\"value\":\"on!\"}}",
		  HPN_E_INVALID_CONFIG, "podSelector.value \"on!\" is not a label value", __LINE__);
	check_bad("{" BASE "," DEV "," KUBE ",\"podSelector\":{\"label\":1}}", HPN_E_INVALID_CONFIG,
		  "podSelector.label must be a string", __LINE__);
	/* An annotation's value need not be a label value. */
	check_ok("{" BASE "," DEV ",\"podSelector\":{\"value\":\"on!\"}}", __LINE__);
	check_bad("{" BASE "," DEV "," KUBE ",\"nccl\":{\"gpuModelLabel\":\"-x\"}}",
		  HPN_E_INVALID_CONFIG, "nccl.gpuModelLabel \"-x\" is not a label key", __LINE__);

	/* The selector in messages. */
	parse_ok("{" BASE "," DEV "," KUBE "," LABEL_SEL "}", &c, __LINE__);
	CHECK_STR_EQ(c.pod_selector, "label alibabacloud.com/hpn-type=rdma");
	CHECK(c.pod_annotation == NULL);
	CHECK_STR_EQ(c.pod_value, "rdma");
	hpn_conf_free(&c);
	parse_ok("{" BASE "," DEV "," KUBE "," BOTH_SEL "}", &c, __LINE__);
	CHECK_STR_EQ(c.pod_selector,
		     "alibabacloud.com/hpn-type=rdma or label alibabacloud.com/hpn-type=rdma");
	hpn_conf_free(&c);

	/* When ADD reads the pod, and when it does not. */
	check_lookup("{" BASE "," DEV "," KUBE "," LABEL_SEL "}", false,
		     "podSelector.label decides", __LINE__);
	/* A label selector: the annotation is not consulted, even when it is there. */
	check_lookup("{" BASE "," DEV "," KUBE "," LABEL_SEL
		     "," ANNOS(A_SEL "," A_MODEL "," A_COUNT) "}",
		     false, "podSelector.label decides", __LINE__);
	check_lookup("{" BASE "," DEV "," KUBE "," BOTH_SEL
		     "," ANNOS(A_SEL "," A_MODEL "," A_COUNT) "}",
		     true, NULL, __LINE__);
	check_lookup("{" BASE "," DEV "," KUBE "," BOTH_SEL "," ANNOS(A_SEL "," A_MODEL) "}", true,
		     "the GPU count is not in the pod's annotations", __LINE__);
	check_lookup("{" BASE "," DEV "," KUBE "," BOTH_SEL "," ANNOS(A_SEL "," A_COUNT) "}", true,
		     "the GPU model is not in the pod's annotations", __LINE__);
	check_lookup("{" BASE "," DEV "," KUBE "," BOTH_SEL
		     "," ANNOS("\"alibabacloud.com/hpn-type\":\"tcp\"") "}",
		     false, "podSelector.label decides", __LINE__);
	/* An annotation selector that does not select: passed through, nothing to ask. */
	check_lookup("{" BASE "," DEV "," KUBE ",\"podSelector\":{}}", false, NULL, __LINE__);
	check_lookup("{" BASE "," DEV "," KUBE ",\"podSelector\":{}," ANNOS(A_SEL) "}", true,
		     "the GPU model is not in the pod's annotations", __LINE__);
	/* No selector: every pod; the GPU fields decide whether to ask. */
	check_lookup("{" BASE "," DEV "," KUBE "}", true,
		     "the GPU model is not in the pod's annotations", __LINE__);
	check_lookup("{" BASE "," DEV "," KUBE "," ANNOS(A_MODEL "," A_COUNT) "}", true, NULL,
		     __LINE__);
	/* Without hints the GPU model and count do not matter. */
	check_lookup("{" BASE "," DEV "," KUBE ",\"nccl\":{\"enabled\":false}}", true, NULL,
		     __LINE__);
	/* Without "kubernetes" nothing is ever read. */
	check_lookup("{" BASE "," DEV ",\"podSelector\":{}," ANNOS(A_SEL) "}", true, NULL,
		     __LINE__);
	/* Only ADD reads the pod. */
	for (enum hpn_cmd cmd = HPN_CMD_DEL; cmd <= HPN_CMD_GC; cmd++) {
		static const char json[] = "{" BASE_V("1.1.0") "," DEV "," KUBE "," LABEL_SEL
							       ",\"cni.dev/valid-attachments\":[]}";
		struct hpn_err err;

		if (cmd == HPN_CMD_VERSION)
			continue;
		CHECK_INT_EQ(parse(json, cmd, &c, &err), 0);
		CHECK(!c.pod_lookup);
		hpn_conf_free(&c);
	}
}

/* A fixture pod (test/fixtures/pods/REL.json), parsed counting resource. */
static void fixture_pod(const char *rel, const char *resource, struct hpn_pod *pod)
{
	char path[4096];
	_cleanup_free_ char *buf = NULL;
	struct hpn_err err = { 0 };
	size_t len;
	int fd;

	snprintf(path, sizeof(path), "%s/pods/%s.json", HPN_FIXTURES, rel);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || hpn_read_all(fd, 1 << 20, &buf, &len) < 0) {
		perror(path);
		exit(2);
	}
	close(fd);
	if (hpn_pod_parse(buf, len, resource, pod, &err) < 0) {
		fprintf(stderr, "%s: %s\n", path, err.msg);
		exit(2);
	}
}

/* json parsed for ADD, then the fixture pod applied: returns its code, *c kept. */
static int apply(const char *json, const char *rel, struct hpn_conf *c, struct hpn_err *err,
		 int line)
{
	struct hpn_pod pod;
	int r;

	parse_ok(json, c, line);
	fixture_pod(rel, c->kube.gpu_resource, &pod);
	memset(err, 0, sizeof(*err));
	r = hpn_conf_apply_pod(c, &pod, err);
	CHECK(!c->pod_lookup);
	hpn_pod_free(&pod);
	return r;
}

#define SEED  "default/seed-gu8tf-7d9c5b8f4-x2kqp"
#define P16   "ml/p16en-16gpu-0"
#define P8    "ml/p16en-8gpu-0"
#define PLAIN "default/plain-web-5c6d7e8f9-abcde"
#define SIDE  "ml/init-sidecar-0"

static void test_apply_pod(void)
{
	struct hpn_conf c;
	struct hpn_err e;

	/* The seed's pod: the label selects, the model from its label, 8 GPUs. */
	CHECK_INT_EQ(apply("{" BASE "," DEV "," KUBE "," LABEL_SEL "}", SEED, &c, &e, __LINE__), 0);
	CHECK(c.pod_selected);
	CHECK_STR_EQ(c.gpu_model, "GU8TF");
	CHECK_INT_EQ(c.gpu_count, 8);
	hpn_conf_free(&c);
	CHECK_INT_EQ(apply("{" BASE "," DEV "," KUBE "," BOTH_SEL "}", P16, &c, &e, __LINE__), 0);
	CHECK(c.pod_selected);
	CHECK_STR_EQ(c.gpu_model, "P16EN");
	CHECK_INT_EQ(c.gpu_count, 16);
	hpn_conf_free(&c);
	CHECK_INT_EQ(apply("{" BASE "," DEV "," KUBE "," LABEL_SEL "}", P8, &c, &e, __LINE__), 0);
	CHECK_STR_EQ(c.gpu_model, "P16EN");
	CHECK_INT_EQ(c.gpu_count, 8);
	hpn_conf_free(&c);
	/* Init containers and a sidecar: the scheduler's count. */
	CHECK_INT_EQ(apply("{" BASE "," DEV "," KUBE "," LABEL_SEL "}", SIDE, &c, &e, __LINE__), 0);
	CHECK_STR_EQ(c.gpu_model, "gpu-hpn");
	CHECK_INT_EQ(c.gpu_count, 9);
	hpn_conf_free(&c);

	/* No label: not selected, and the GPU fields stay as the config has them. */
	CHECK_INT_EQ(apply("{" BASE "," DEV "," KUBE "," LABEL_SEL
			   ",\"nccl\":{\"gpuModel\":\"GU8TF\",\"gpuCount\":8}}",
			   PLAIN, &c, &e, __LINE__),
		     0);
	CHECK(!c.pod_selected);
	CHECK_STR_EQ(c.gpu_model, "GU8TF");
	CHECK_INT_EQ(c.gpu_count, 8);
	hpn_conf_free(&c);
	/* Another value: not selected. */
	CHECK_INT_EQ(apply("{" BASE "," DEV "," KUBE ",\"podSelector\":{\"label\":\"alibabacloud."
			   "com/hpn-type\",\"value\":\"tcp\"}}",
			   SEED, &c, &e, __LINE__),
		     0);
	CHECK(!c.pod_selected);
	hpn_conf_free(&c);
	/* A pod without GPUs keeps the config's count; the model from the label. */
	CHECK_INT_EQ(apply("{" BASE "," DEV "," KUBE ",\"nccl\":{\"gpuCount\":4}}", PLAIN, &c, &e,
			   __LINE__),
		     0);
	CHECK(c.pod_selected);
	CHECK(c.gpu_model == NULL);
	CHECK_INT_EQ(c.gpu_count, 4);
	hpn_conf_free(&c);

	/* The annotations win over the pod where they spoke. */
	CHECK_INT_EQ(apply("{" BASE "," DEV "," KUBE "," BOTH_SEL
			   "," ANNOS(A_SEL ",\"alibabacloud.com/gpu-count\":\"4\"") "}",
			   SEED, &c, &e, __LINE__),
		     0);
	CHECK_STR_EQ(c.gpu_model, "GU8TF");
	CHECK_INT_EQ(c.gpu_count, 4);
	hpn_conf_free(&c);
	CHECK_INT_EQ(apply("{" BASE "," DEV "," KUBE "," BOTH_SEL
			   "," ANNOS(A_SEL ",\"alibabacloud.com/gpu-model-series\":\"H20\"") "}",
			   SEED, &c, &e, __LINE__),
		     0);
	CHECK_STR_EQ(c.gpu_model, "H20");
	CHECK_INT_EQ(c.gpu_count, 8);
	hpn_conf_free(&c);

	/* Configured keys: the model label, and the resource counted. */
	CHECK_INT_EQ(apply("{" BASE "," DEV "," KUBE "," LABEL_SEL
			   ",\"nccl\":{\"gpuModelLabel\":\"app\"}}",
			   SEED, &c, &e, __LINE__),
		     0);
	CHECK_STR_EQ(c.gpu_model, "seed-gu8tf");
	hpn_conf_free(&c);
	CHECK_INT_EQ(
		apply("{" BASE "," DEV
		      ",\"kubernetes\":{\"kubeconfig\":\"/k\",\"gpuResource\":\"cpu\"}," LABEL_SEL
		      "}",
		      P8, &c, &e, __LINE__),
		0);
	CHECK_INT_EQ(c.gpu_count, 16);
	hpn_conf_free(&c);
}

static void test_apply_pod_inline(void)
{
	static const char pod_fmt[] =
		"{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"p\","
		"\"namespace\":\"ml\",\"uid\":\"u-1\",\"labels\":{\"alibabacloud.com/hpn-type\":"
		"\"rdma\"},\"annotations\":{\"alibabacloud.com/gpu-model-series\":\"P16EN\"}},"
		"\"spec\":{\"containers\":[{\"name\":\"a\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"%s\"}}}]}}";
	char json[1024];
	struct hpn_conf c;
	struct hpn_err e = { 0 };
	struct hpn_pod pod;

	/* The model from the API's annotation when the pod has no model label. */
	snprintf(json, sizeof(json), pod_fmt, "16");
	CHECK_INT_EQ(hpn_pod_parse(json, strlen(json), NULL, &pod, &e), 0);
	parse_ok("{" BASE "," DEV "," KUBE "," LABEL_SEL "}", &c, __LINE__);
	CHECK_INT_EQ(hpn_conf_apply_pod(&c, &pod, &e), 0);
	CHECK(c.pod_selected);
	CHECK_STR_EQ(c.gpu_model, "P16EN");
	CHECK_INT_EQ(c.gpu_count, 16);
	hpn_conf_free(&c);
	hpn_pod_free(&pod);

	/* More GPUs than a count can be: refused, naming the pod. */
	snprintf(json, sizeof(json), pod_fmt, "64");
	CHECK_INT_EQ(hpn_pod_parse(json, strlen(json), NULL, &pod, &e), 0);
	parse_ok("{" BASE "," DEV "," KUBE "," LABEL_SEL "}", &c, __LINE__);
	CHECK(hpn_conf_apply_pod(&c, &pod, &e) < 0);
	CHECK_INT_EQ(e.code, HPN_E_INVALID_CONFIG);
	CHECK_STR_HAS(e.msg, "pod ml/p asks for 64 nvidia.com/gpu, more than a GPU count can be");
	hpn_conf_free(&c);
	hpn_pod_free(&pod);
}

int main(void)
{
	test_decode();
	test_versions();
	test_required();
	test_selectors();
	test_rdma_device();
	test_rdma_options();
	test_soft_roce();
	test_erdma_any_mtu();
	test_members();
	test_ipam();
	test_prev_result();
	test_gc();
	test_pools_and_modes();
	test_gpus();
	test_nri();
	test_kubernetes();
	test_apply_pod();
	test_apply_pod_inline();
	CHECK(run_isolated(short_paths));
	return check_done();
}
