// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/kubeconfig.c: kubeconfigs written here in a scratch
 * directory, good ones in the shapes kubectl writes (YAML, and JSON), then
 * one field wrong at a time; tokenFile read on every call; the warnings for
 * secrets readable by others.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "kubeconfig.h"
#include "tmpdir.h"
#include "util.h"

static char dir[64];

#define PEM_CERT "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n"
#define PEM_KEY	 "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49\n-----END PRIVATE KEY-----\n"
/* base64 of PEM_CERT */
#define PEM_CERT_B64                                                                               \
	"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJzekNDQVZtZ0F3SUJBZ0lVCi0tLS0tRU5EIENFUlRJ"     \
	"RklDQVRFLS0tLS0K"
#define PEM_KEY_B64                                                                                \
	"LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JR0hBZ0VBTUJNR0J5cUdTTTQ5Ci0tLS0tRU5EIFBSSVZB"     \
	"VEUgS0VZLS0tLS0K"

static void put(const char *name, mode_t mode, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void put(const char *name, mode_t mode, const char *fmt, ...)
{
	char path[256];
	va_list ap;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
	f = fopen(path, "we");
	if (!f) {
		perror(path);
		exit(2);
	}
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
	chmod(path, mode);
}

static const char *at(const char *name)
{
	static char path[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(path[i], sizeof(path[i]), "%s/%s", dir, name);
	return path[i];
}

/*
 * A kubeconfig "k" of two clusters, contexts and users, current-context "main"
 * unless cur says otherwise: cluster and user are the YAML lines of main's
 * cluster and user (indented 4), each line ending in \n.
 */
static void kubeconfig(const char *cur, const char *cluster, const char *user)
{
	put("k", 0600,
	    "apiVersion: v1\n"
	    "kind: Config\n"
	    "preferences: {}\n"
	    "clusters:\n"
	    "- name: other\n"
	    "  cluster:\n"
	    "    server: https://other.example:6443\n"
	    "    insecure-skip-tls-verify: true\n"
	    "- cluster:\n"
	    "%s"
	    "  name: prod\n"
	    "contexts:\n"
	    "- name: other\n"
	    "  context: {cluster: other, user: other}\n"
	    "- context:\n"
	    "    cluster: prod\n"
	    "    user: hpn-rdma\n"
	    "    namespace: kube-system\n"
	    "  name: main\n"
	    "current-context: %s\n"
	    "users:\n"
	    "- name: other\n"
	    "  user:\n"
	    "    exec: {command: aws}\n"
	    "- name: hpn-rdma\n"
	    "  user:\n"
	    "%s",
	    cluster, cur, user);
}

#define CLUSTER_OK                                                                                 \
	"    server: https://10.0.0.1:6443/\n"                                                     \
	"    certificate-authority: ca.crt\n"

static int load(struct hpn_kubeconfig *kc, struct hpn_err *err, struct hpn_kube_warn *warn)
{
	memset(err, 0, sizeof(*err));
	memset(warn, 0, sizeof(*warn));
	memset(kc, 0, sizeof(*kc));
	return hpn_kubeconfig_load(at("k"), kc, warn, err);
}

/* The kubeconfig is refused with code and a message holding what (and naming the file). */
static void refused(int code, const char *what, int line)
{
	struct hpn_kubeconfig kc;
	struct hpn_kube_warn warn;
	struct hpn_err err;
	int r = load(&kc, &err, &warn);

	if (r == 0 || !strstr(err.msg, what) || err.code != code)
		fprintf(stderr, "\tline %d: r=%d code=%d msg=%s\n\t(want %d: %s)\n", line, r,
			err.code, err.msg, code, what);
	CHECK(r < 0);
	CHECK_INT_EQ(err.code, code);
	CHECK_STR_HAS(err.msg, what);
	CHECK_STR_HAS(err.msg, at("k"));
	CHECK(!kc.server && !kc.path); /* untouched */
	if (r == 0)
		hpn_kubeconfig_free(&kc);
}

static void test_good(void)
{
	struct hpn_kubeconfig kc;
	struct hpn_kube_warn warn;
	struct hpn_err err;
	char *tok = NULL;

	put("ca.crt", 0644, PEM_CERT);
	kubeconfig("main", CLUSTER_OK, "    token: abc.def-ghi_jkl\n");
	CHECK_INT_EQ(load(&kc, &err, &warn), 0);
	CHECK_STR_EQ(kc.path, at("k"));
	CHECK_STR_EQ(kc.context, "main");
	CHECK_STR_EQ(kc.cluster, "prod");
	CHECK_STR_EQ(kc.user, "hpn-rdma");
	CHECK_STR_EQ(kc.server, "https://10.0.0.1:6443"); /* the trailing '/' dropped */
	CHECK_INT_EQ(kc.ca_len, strlen(PEM_CERT));
	CHECK(kc.ca && !memcmp(kc.ca, PEM_CERT, kc.ca_len));
	/* A relative name is the kubeconfig's directory's, as kubectl takes it. */
	{
		char from[300];

		snprintf(from, sizeof(from), "certificate-authority %s", at("ca.crt"));
		CHECK_STR_EQ(kc.ca_from, from);
	}
	CHECK_STR_EQ(kc.token, "abc.def-ghi_jkl");
	CHECK(!kc.token_file && !kc.cert && !kc.key);
	CHECK_STR_EQ(warn.msg, "");
	CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), 0);
	CHECK_STR_EQ(tok, "abc.def-ghi_jkl");
	hpn_kube_token_free(tok);
	hpn_kubeconfig_free(&kc);
	CHECK(!kc.path && !kc.token);
	hpn_kubeconfig_free(&kc);

	/* -data fields, a client certificate, a path prefix on the server. */
	kubeconfig("main",
		   "    server: https://api.example:443/k8s/clusters/c-1\n"
		   "    certificate-authority-data: " PEM_CERT_B64 "\n"
		   "    insecure-skip-tls-verify: false\n",
		   "    client-certificate-data: " PEM_CERT_B64 "\n"
		   "    client-key-data: " PEM_KEY_B64 "\n");
	CHECK_INT_EQ(load(&kc, &err, &warn), 0);
	CHECK_STR_EQ(kc.server, "https://api.example:443/k8s/clusters/c-1");
	CHECK_STR_EQ(kc.ca_from, "certificate-authority-data");
	CHECK(kc.ca_len == strlen(PEM_CERT) && !memcmp(kc.ca, PEM_CERT, kc.ca_len));
	CHECK(kc.cert_len == strlen(PEM_CERT) && !memcmp(kc.cert, PEM_CERT, kc.cert_len));
	CHECK(kc.key_len == strlen(PEM_KEY) && !memcmp(kc.key, PEM_KEY, kc.key_len));
	CHECK(!kc.token && !kc.token_file);
	CHECK_STR_EQ(warn.msg, "");
	CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), 0);
	CHECK(!tok); /* certificate only */
	hpn_kubeconfig_free(&kc);

	/* Client certificate files, absolute names; a private key readable by others: a warning. */
	put("client.crt", 0644, PEM_CERT);
	put("client.key", 0640, PEM_KEY);
	{
		char user[600];

		snprintf(user, sizeof(user), "    client-certificate: %s\n    client-key: %s\n",
			 at("client.crt"), at("client.key"));
		kubeconfig("main", CLUSTER_OK, user);
	}
	CHECK_INT_EQ(load(&kc, &err, &warn), 0);
	CHECK(kc.key_len == strlen(PEM_KEY) && !memcmp(kc.key, PEM_KEY, kc.key_len));
	CHECK_STR_HAS(warn.msg, "client-key");
	CHECK_STR_HAS(warn.msg, at("client.key"));
	CHECK_STR_HAS(warn.msg, "readable by group or others (mode 0640)");
	hpn_kubeconfig_free(&kc);
	chmod(at("client.key"), 0600);
	CHECK_INT_EQ(load(&kc, &err, &warn), 0);
	CHECK_STR_EQ(warn.msg, "");
	hpn_kubeconfig_free(&kc);

	/* A kubeconfig holding a token, readable by others: a warning. */
	kubeconfig("main", CLUSTER_OK, "    token: t\n");
	chmod(at("k"), 0644);
	CHECK_INT_EQ(load(&kc, &err, &warn), 0);
	CHECK_STR_HAS(warn.msg, "kubeconfig ");
	CHECK_STR_HAS(warn.msg, "(mode 0644)");
	hpn_kubeconfig_free(&kc);

	/* JSON is YAML: kubectl reads kubeconfigs written as JSON too. */
	put("k", 0600,
	    "{\"apiVersion\":\"v1\",\"kind\":\"Config\",\"current-context\":\"c\","
	    "\"clusters\":[{\"name\":\"k\",\"cluster\":{\"server\":\"https://[::1]:6443\","
	    "\"certificate-authority-data\":\"%s\"}}],"
	    "\"contexts\":[{\"name\":\"c\",\"context\":{\"cluster\":\"k\",\"user\":\"u\"}}],"
	    "\"users\":[{\"name\":\"u\",\"user\":{\"token\":\"j.w.t\"}}]}",
	    PEM_CERT_B64);
	CHECK_INT_EQ(load(&kc, &err, &warn), 0);
	CHECK_STR_EQ(kc.server, "https://[::1]:6443");
	CHECK_STR_EQ(kc.token, "j.w.t");
	hpn_kubeconfig_free(&kc);
}

static void test_token_file(void)
{
	struct hpn_kubeconfig kc;
	struct hpn_kube_warn warn;
	struct hpn_err err;
	char *tok = NULL;

	put("token", 0600, "first-token\n");
	/* tokenFile wins over token, as in client-go. */
	kubeconfig("main", CLUSTER_OK, "    token: inline\n    tokenFile: token\n");
	CHECK_INT_EQ(load(&kc, &err, &warn), 0);
	CHECK_STR_EQ(kc.token_file, at("token"));
	CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), 0);
	CHECK_STR_EQ(tok, "first-token"); /* the newline dropped */
	hpn_kube_token_free(tok);
	CHECK_STR_EQ(warn.msg, "");
	/* Read on every call: a rotated token is seen by the next call. */
	put("token", 0600, "  second-token \r\n\n");
	CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), 0);
	CHECK_STR_EQ(tok, "second-token");
	hpn_kube_token_free(tok);
	/* Readable by others: the token still, and a warning naming the file. */
	chmod(at("token"), 0644);
	CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), 0);
	CHECK_STR_EQ(tok, "second-token");
	hpn_kube_token_free(tok);
	CHECK_STR_HAS(warn.msg, "token file ");
	CHECK_STR_HAS(warn.msg, at("token"));
	CHECK_STR_HAS(warn.msg, "(mode 0644)");
	/* Broken files: named, the token untouched. */
	tok = (char *)"untouched";
	put("token", 0600, " \n");
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), -EINVAL);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_CONFIG);
	CHECK_STR_HAS(err.msg, "users[\"hpn-rdma\"].user.tokenFile ");
	CHECK_STR_HAS(err.msg, "the file is empty");
	put("token", 0600, "two words\n");
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), -EINVAL);
	CHECK_STR_HAS(err.msg, "not visible ASCII");
	put("token", 0600, "a%cb", 0);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), -EINVAL);
	CHECK_STR_HAS(err.msg, "holds a NUL byte");
	unlink(at("token"));
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), -ENOENT);
	CHECK_INT_EQ(err.code, HPN_E_IO);
	CHECK_STR_HAS(err.msg, at("token"));
	CHECK_STR_HAS(err.msg, "No such file or directory");
	mkdir(at("token"), 0700);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), -EINVAL);
	CHECK_STR_HAS(err.msg, "not a regular file");
	rmdir(at("token"));
	{
		char *big = malloc(HPN_KUBE_TOKEN_MAX + 2);

		memset(big, 'a', HPN_KUBE_TOKEN_MAX + 1);
		big[HPN_KUBE_TOKEN_MAX + 1] = '\0';
		put("token", 0600, "%s", big + 1);
		CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), 0);
		CHECK_INT_EQ(strlen(tok), HPN_KUBE_TOKEN_MAX);
		hpn_kube_token_free(tok);
		tok = (char *)"untouched";
		put("token", 0600, "%s", big);
		memset(&err, 0, sizeof(err));
		CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), -E2BIG);
		CHECK_STR_HAS(err.msg, "longer than 16384 bytes");
		free(big);
	}
	CHECK_STR_EQ(tok, "untouched");
	hpn_kubeconfig_free(&kc);
}

static void test_refused(void)
{
	struct hpn_kubeconfig kc;
	struct hpn_kube_warn warn;
	struct hpn_err err;

	/* The file itself. */
	unlink(at("k"));
	refused(HPN_E_IO, "No such file or directory", __LINE__);
	mkdir(at("k"), 0700);
	refused(HPN_E_IO, "not a regular file", __LINE__);
	rmdir(at("k"));
	mkfifo(at("k"), 0600); /* O_NONBLOCK: refused, never waited on */
	refused(HPN_E_IO, "not a regular file", __LINE__);
	unlink(at("k"));
	{
		char *big = malloc(HPN_KUBECONFIG_MAX + 2);

		memset(big, '#', HPN_KUBECONFIG_MAX + 1);
		big[HPN_KUBECONFIG_MAX + 1] = '\0';
		put("k", 0600, "%s", big);
		refused(HPN_E_IO, "larger than 1 MiB", __LINE__);
		free(big);
	}
	put("k", 0600, "%s", "");
	refused(HPN_E_INVALID_CONFIG, "the file is empty", __LINE__);
	put("k", 0600, "apiVersion: v1\nclusters: [\n");
	refused(HPN_E_INVALID_CONFIG, "not valid YAML: ", __LINE__);
	put("k", 0600, "apiVersion: v1\n  bad: indent\n");
	refused(HPN_E_INVALID_CONFIG, "at line 2", __LINE__);
	put("k", 0600, "- a\n- b\n");
	refused(HPN_E_INVALID_CONFIG, "the top level must be a mapping", __LINE__);
	put("k", 0600, "current-context: a\ncurrent-context: b\n");
	refused(HPN_E_INVALID_CONFIG, "the top level.current-context is given twice", __LINE__);
	{
		struct hpn_err e = { 0 };

		CHECK_INT_EQ(hpn_kubeconfig_load("", &kc, &warn, &e), -EINVAL);
		CHECK_STR_HAS(e.msg, "kubeconfig: no file given");
	}

	/* The current context and what it names. */
	kubeconfig("\"\"", CLUSTER_OK, "    token: t\n");
	refused(HPN_E_INVALID_CONFIG, "no current-context", __LINE__);
	kubeconfig("nope", CLUSTER_OK, "    token: t\n");
	refused(HPN_E_INVALID_CONFIG,
		"current-context names context \"nope\", which contexts lacks", __LINE__);
	put("k", 0600, "current-context: c\ncontexts: {c: 1}\n");
	refused(HPN_E_INVALID_CONFIG, "contexts must be a list", __LINE__);
	put("k", 0600, "current-context: c\ncontexts:\n- name: c\n  context: [1]\n");
	refused(HPN_E_INVALID_CONFIG, "contexts[\"c\"].context must be a mapping", __LINE__);
	put("k", 0600,
	    "current-context: c\ncontexts:\n- {name: c, context: {cluster: a, user: u}}\n"
	    "- {name: c, context: {cluster: b, user: u}}\n");
	refused(HPN_E_INVALID_CONFIG, "contexts has two entries named \"c\"", __LINE__);
	put("k", 0600, "current-context: c\ncontexts:\n- {name: c, context: {user: u}}\n");
	refused(HPN_E_INVALID_CONFIG, "contexts[\"c\"].context.cluster is missing", __LINE__);
	put("k", 0600, "current-context: c\ncontexts:\n- {name: c, context: {cluster: k}}\n");
	refused(HPN_E_INVALID_CONFIG, "contexts[\"c\"].context.user is missing", __LINE__);
	put("k", 0600,
	    "current-context: c\ncontexts:\n- {name: c, context: {cluster: k, user: u}}\n"
	    "users:\n- {name: u, user: {token: t}}\n");
	refused(HPN_E_INVALID_CONFIG, "contexts[\"c\"] names cluster \"k\", which clusters lacks",
		__LINE__);
	put("k", 0600,
	    "current-context: c\ncontexts:\n- {name: c, context: {cluster: k, user: u}}\n"
	    "clusters:\n- {name: k, cluster: {server: 'https://a'}}\n");
	refused(HPN_E_INVALID_CONFIG, "contexts[\"c\"] names user \"u\", which users lacks",
		__LINE__);
	put("k", 0600, "current-context: [a]\n");
	refused(HPN_E_INVALID_CONFIG, "current-context must be a string", __LINE__);

	/* The cluster. */
	kubeconfig("main", "    server: https://a:6443\n    insecure-skip-tls-verify: true\n",
		   "    token: t\n");
	refused(HPN_E_INVALID_CONFIG,
		"clusters[\"prod\"].cluster.insecure-skip-tls-verify is true: the API server's "
		"certificate is always verified",
		__LINE__);
	kubeconfig("main", CLUSTER_OK "    insecure-skip-tls-verify: yes\n", "    token: t\n");
	refused(HPN_E_INVALID_CONFIG, "insecure-skip-tls-verify is true", __LINE__);
	kubeconfig("main", CLUSTER_OK "    insecure-skip-tls-verify: maybe\n", "    token: t\n");
	refused(HPN_E_INVALID_CONFIG, "insecure-skip-tls-verify must be true or false", __LINE__);
	kubeconfig("main", CLUSTER_OK "    tls-server-name: kubernetes\n", "    token: t\n");
	refused(HPN_E_INVALID_CONFIG, "clusters[\"prod\"].cluster.tls-server-name is not supported",
		__LINE__);
	kubeconfig("main", CLUSTER_OK "    proxy-url: http://proxy:3128\n", "    token: t\n");
	refused(HPN_E_INVALID_CONFIG, "clusters[\"prod\"].cluster.proxy-url is not supported",
		__LINE__);
	kubeconfig("main", "    certificate-authority: ca.crt\n", "    token: t\n");
	refused(HPN_E_INVALID_CONFIG, "clusters[\"prod\"].cluster.server is missing", __LINE__);
	kubeconfig("main", "    server: http://10.0.0.1:8080\n    certificate-authority: ca.crt\n",
		   "    token: t\n");
	refused(HPN_E_INVALID_CONFIG,
		"clusters[\"prod\"].cluster.server \"http://10.0.0.1:8080\" is not an https:// URL",
		__LINE__);
	kubeconfig("main", "    server: https://\n    certificate-authority: ca.crt\n",
		   "    token: t\n");
	refused(HPN_E_INVALID_CONFIG, "has no host", __LINE__);
	kubeconfig("main", "    server: https://a/?x=1\n    certificate-authority: ca.crt\n",
		   "    token: t\n");
	refused(HPN_E_INVALID_CONFIG, "holds a space, control character, '?', '#' or '\\'",
		__LINE__);
	kubeconfig("main",
		   "    server: https://admin:secret@10.0.0.1:6443\n"
		   "    certificate-authority: ca.crt\n",
		   "    token: t\n");
	refused(HPN_E_INVALID_CONFIG,
		"clusters[\"prod\"].cluster.server holds an '@': credentials go in the user",
		__LINE__);
	{
		struct hpn_err e = { 0 };
		struct hpn_kube_warn w;

		CHECK(hpn_kubeconfig_load(at("k"), &kc, &w, &e) < 0);
		CHECK_STR_LACKS(e.msg, "secret"); /* the password is not echoed */
	}
	kubeconfig("main", "    server: \"https://a b\"\n    certificate-authority: ca.crt\n",
		   "    token: t\n");
	refused(HPN_E_INVALID_CONFIG, "holds a space", __LINE__);
	kubeconfig("main", "    server: [https://a]\n", "    token: t\n");
	refused(HPN_E_INVALID_CONFIG, "clusters[\"prod\"].cluster.server must be a string",
		__LINE__);
	kubeconfig("main", "    server: https://a\n", "    token: t\n");
	refused(HPN_E_INVALID_CONFIG,
		"clusters[\"prod\"].cluster has no certificate-authority or "
		"certificate-authority-data",
		__LINE__);
	kubeconfig("main", CLUSTER_OK "    certificate-authority-data: " PEM_CERT_B64 "\n",
		   "    token: t\n");
	refused(HPN_E_INVALID_CONFIG,
		"clusters[\"prod\"].cluster gives both certificate-authority and "
		"certificate-authority-data",
		__LINE__);
	kubeconfig("main", "    server: https://a\n    certificate-authority: missing.crt\n",
		   "    token: t\n");
	refused(HPN_E_IO, "clusters[\"prod\"].cluster.certificate-authority ", __LINE__);
	refused(HPN_E_IO, "missing.crt: No such file or directory", __LINE__);
	kubeconfig("main", "    server: https://a\n    certificate-authority-data: abc!\n",
		   "    token: t\n");
	refused(HPN_E_INVALID_CONFIG,
		"clusters[\"prod\"].cluster.certificate-authority-data is not valid base64",
		__LINE__);
	kubeconfig("main", "    server: https://a\n    certificate-authority-data: QUJD\n",
		   "    token: t\n");
	refused(HPN_E_INVALID_CONFIG,
		"clusters[\"prod\"].cluster.certificate-authority-data holds no PEM CERTIFICATE",
		__LINE__);
	put("notpem.crt", 0644, "hello\n");
	kubeconfig("main", "    server: https://a\n    certificate-authority: notpem.crt\n",
		   "    token: t\n");
	refused(HPN_E_INVALID_CONFIG, "notpem.crt holds no PEM CERTIFICATE", __LINE__);

	/* The user. */
	static const struct {
		const char *yaml, *what;
	} users[] = {
		{ "    exec:\n      command: aws\n      apiVersion: "
		  "client.authentication.k8s.io/v1\n",
		  "users[\"hpn-rdma\"].user.exec (an exec credential plugin) is not supported" },
		{ "    auth-provider:\n      name: oidc\n",
		  "users[\"hpn-rdma\"].user.auth-provider (an auth-provider plugin) is not "
		  "supported" },
		{ "    username: admin\n    password: secret\n",
		  "user.username (basic authentication) is not supported" },
		{ "    token: t\n    as: someone\n", "user.as (impersonation) is not supported" },
		{ "    token: t\n    as-groups: [system:masters]\n",
		  "user.as-groups (impersonation)" },
		{ "    {}\n", "has no token, tokenFile or client-certificate" },
		{ "    client-certificate-data: " PEM_CERT_B64 "\n",
		  "has a client-certificate without a client-key" },
		{ "    client-key-data: " PEM_KEY_B64 "\n",
		  "has a client-key without a client-certificate" },
		{ "    client-certificate-data: " PEM_CERT_B64
		  "\n    client-key-data: " PEM_CERT_B64 "\n",
		  "user.client-key-data holds no PEM PRIVATE KEY" },
		{ "    client-certificate: client.crt\n    client-certificate-data: " PEM_CERT_B64
		  "\n",
		  "gives both client-certificate and client-certificate-data" },
		{ "    token: \"a b\"\n",
		  "users[\"hpn-rdma\"].user.token holds a character that is "
		  "not visible ASCII" },
		{ "    token: \"a\\0b\"\n", "users[\"hpn-rdma\"].user.token holds a NUL byte" },
		{ "    token: [t]\n", "users[\"hpn-rdma\"].user.token must be a string" },
	};
	for (size_t i = 0; i < HPN_ARRAY_SIZE(users); i++) {
		kubeconfig("main", CLUSTER_OK, users[i].yaml);
		refused(HPN_E_INVALID_CONFIG, users[i].what, (int)(1000 + i));
	}
	/* exec set to null is no exec (YAML's null, as kubectl reads it). */
	kubeconfig("main", CLUSTER_OK, "    exec: null\n    token: t\n");
	CHECK_INT_EQ(load(&kc, &err, &warn), 0);
	hpn_kubeconfig_free(&kc);
	kubeconfig("main", CLUSTER_OK, "    exec: ~\n    auth-provider:\n    token: t\n");
	CHECK_INT_EQ(load(&kc, &err, &warn), 0);
	hpn_kubeconfig_free(&kc);
}

static void test_base64(void)
{
	/*
	 * Through the -data fields: whole quanta only, with the padding Go writes.
	 * X is PEM_CERT_B64, the base64 of PEM_CERT; PEM_CERT "x" is X "eA==".
	 */
#define X PEM_CERT_B64
	static const struct {
		const char *b64;
		size_t len; /* decoded; 0: refused */
	} cases[] = {
		{ X, sizeof(PEM_CERT) - 1 },
		{ X "eA==", sizeof(PEM_CERT) },
		{ X "eA=", 0 },	   /* a '=' missing */
		{ X "eA", 0 },	   /* no padding */
		{ X "eA===", 0 },  /* one too many */
		{ X "eA==A", 0 },  /* data after the padding */
		{ X "eB==", 0 },   /* bits set past the end */
		{ X "e", 0 },	   /* one character of a quantum */
		{ X "eA==\n", 0 }, /* (YAML folds the line break: a space) */
	};
#undef X

	for (size_t i = 0; i < HPN_ARRAY_SIZE(cases); i++) {
		struct hpn_kubeconfig kc;
		struct hpn_kube_warn warn;
		struct hpn_err err;
		char cl[600];
		int r;

		snprintf(cl, sizeof(cl),
			 "    server: https://a\n    certificate-authority-data: \"%s\"\n",
			 cases[i].b64);
		kubeconfig("main", cl, "    token: t\n");
		r = load(&kc, &err, &warn);
		if ((r == 0) != (cases[i].len > 0))
			fprintf(stderr, "\tbase64 case %zu: r=%d %s\n", i, r, err.msg);
		CHECK_INT_EQ(r == 0, cases[i].len > 0);
		if (r == 0) {
			CHECK_INT_EQ(kc.ca_len, cases[i].len);
			CHECK(!memcmp(kc.ca, PEM_CERT, strlen(PEM_CERT)));
			hpn_kubeconfig_free(&kc);
		} else {
			CHECK_STR_HAS(err.msg, "is not valid base64");
		}
	}
}

static void test_warn(void)
{
	struct hpn_kube_warn w = { 0 };
	char long_s[600];

	hpn_kube_warn_add(&w, "one %d", 1);
	hpn_kube_warn_add(&w, "two");
	CHECK_STR_EQ(w.msg, "one 1; two");
	memset(long_s, 'x', sizeof(long_s) - 1);
	long_s[sizeof(long_s) - 1] = '\0';
	hpn_kube_warn_add(&w, "%s", long_s);
	CHECK_INT_EQ(strlen(w.msg), sizeof(w.msg) - 1);
	hpn_kube_warn_add(&w, "more"); /* full: ignored */
	CHECK_INT_EQ(strlen(w.msg), sizeof(w.msg) - 1);
	hpn_kube_warn_add(NULL, "nothing");
}

int main(void)
{
	tmpdir_make(dir, sizeof(dir), "kubeconfig");
	test_good();
	test_token_file();
	test_refused();
	test_base64();
	test_warn();
	tmpdir_rm(dir);
	return check_done();
}
