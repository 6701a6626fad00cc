// SPDX-License-Identifier: Apache-2.0
/*
 * The plugin's kubeconfig, and the agent's own. The plugin runs on the host
 * and cannot read a pod's projected volume (its path under
 * /var/lib/kubelet/pods/ changes with every pod), so its token goes inline
 * into one file on a host path, which it reads on every ADD that asks the
 * API (lib/kubeconfig.c parses it). That file is in the CNI conf dir, which
 * other node DaemonSets (Multus, Calico, Cilium) mount: it carries the token
 * of a ServiceAccount of the plugin's own, allowed to get pods and nothing
 * else, which the agent asks the API for (TokenRequest) with its own service
 * account and renews before it expires. The agent's token (the pods of the
 * cluster, DRA claims' status, reviews for the metrics proxy) never goes
 * there: when the API refuses the plugin's token the plugin gets none, and
 * a file an older agent wrote with the agent's token is removed.
 * The agent's own API calls read an in-cluster kubeconfig (the API server's
 * service address from the environment, the projected token and CA) kept in
 * a memfd, rewritten when the kubelet rotates the token.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "kube.h"
#include "kubecall.h"
#include "log.h"
#include "sakubeconfig.h"
#include "util.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Standard base64 with padding (RFC 4648 section 4), one line. */
static char *base64(const char *in, size_t len)
{
	char *out = malloc(4 * ((len + 2) / 3) + 1), *o = out;
	const unsigned char *p = (const unsigned char *)in;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		unsigned v = p[i] << 16 | (i + 1 < len ? p[i + 1] << 8 : 0) |
			     (i + 2 < len ? p[i + 2] : 0);

		*o++ = b64[v >> 18 & 63];
		*o++ = b64[v >> 12 & 63];
		*o++ = i + 1 < len ? b64[v >> 6 & 63] : '=';
		*o++ = i + 2 < len ? b64[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

/* An IP address or a DNS name: the characters either may hold, nothing YAML or a URL treats specially. */
static bool host_ok(const char *h)
{
	size_t n = strlen(h);

	if (!n || n > 253)
		return false;
	for (const char *p = h; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == ':'))
			return false;
	return true;
}

static bool port_ok(const char *p)
{
	char *end;
	long v;

	if (!*p || strlen(p) > 5 || strspn(p, "0123456789") != strlen(p))
		return false;
	v = strtol(p, &end, 10);
	return v >= 1 && v <= 65535;
}

#define KC_AGENT_HEAD "# Written by hpn-rdma-agent from its pod's service account (hpn-rdma).\n"

/* kc_render's work, head the comment lines it starts with. */
static int render(const char *host, const char *port, const char *token, size_t token_len,
		  const char *ca, size_t ca_len, const char *head, char **ret, struct hpn_err *err)
{
	_cleanup_free_ char *ca64 = NULL, *tok = NULL;
	char *out = NULL;
	size_t b = 0, e = token_len;
	bool v6;

	if (!host_ok(host))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "KUBERNETES_SERVICE_HOST \"%.64s\" is not an address or a name",
				   host);
	if (!port_ok(port))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "KUBERNETES_SERVICE_PORT \"%.16s\" is not a port", port);
	/* client-go trims the token file the same way. */
	while (b < e && strchr(" \t\r\n", token[b]))
		b++;
	while (e > b && strchr(" \t\r\n", token[e - 1]))
		e--;
	if (b == e || e - b > KC_TOKEN_MAX)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "the service account token is %s",
				   b == e ? "empty" : "too long");
	for (size_t i = b; i < e; i++)
		/* Visible ASCII, and nothing a double-quoted YAML scalar would escape. */
		if (token[i] <= ' ' || token[i] > '~' || token[i] == '"' || token[i] == '\\')
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "the service account token holds a byte 0x%02x at %zu",
					   (unsigned char)token[i], i - b);
	if (!ca_len || ca_len > KC_CA_MAX || !memmem(ca, ca_len, "-----BEGIN CERTIFICATE-----", 27))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "the service account's ca.crt is not a PEM certificate bundle");
	tok = strndup(token + b, e - b);
	ca64 = base64(ca, ca_len);
	/* NOLINTBEGIN(clang-analyzer-unix.Malloc): tok and ca64 are _cleanup_free_ */
	if (!tok || !ca64)
		return -ENOMEM;
	/* NOLINTEND(clang-analyzer-unix.Malloc) */
	v6 = strchr(host, ':') != NULL;
	if (asprintf(&out,
		     "%s"
		     "apiVersion: v1\n"
		     "kind: Config\n"
		     "clusters:\n"
		     "  - name: in-cluster\n"
		     "    cluster:\n"
		     "      server: \"https://%s%s%s:%s\"\n"
		     "      certificate-authority-data: \"%s\"\n"
		     "users:\n"
		     "  - name: hpn-rdma\n"
		     "    user:\n"
		     "      token: \"%s\"\n"
		     "contexts:\n"
		     "  - name: hpn-rdma\n"
		     "    context:\n"
		     "      cluster: in-cluster\n"
		     "      user: hpn-rdma\n"
		     "current-context: hpn-rdma\n",
		     head, v6 ? "[" : "", host, v6 ? "]" : "", port, ca64, tok) < 0)
		return -ENOMEM;
	explicit_bzero(tok, e - b);
	*ret = out;
	return 0;
}

int kc_render(const char *host, const char *port, const char *token, size_t token_len,
	      const char *ca, size_t ca_len, char **ret, struct hpn_err *err)
{
	return render(host, port, token, token_len, ca, ca_len, KC_AGENT_HEAD, ret, err);
}

/* dir/name, at most max bytes. */
static int read_file(const char *dir, const char *name, size_t max, char **ret, size_t *ret_len,
		     struct hpn_err *err)
{
	char path[PATH_MAX];

	if (hpn_snprintf(path, sizeof(path), "%s/%s", dir, name) < 0)
		return hpn_err_set(err, HPN_E_IO, ENAMETOOLONG, "%s/%s: path too long", dir, name);
	return hpn_read_file(path, max, ret, ret_len, err);
}

/* The API server's service address, as the kubelet gives every pod. */
static int service_env(const char **host, const char **port, struct hpn_err *err)
{
	*host = getenv("KUBERNETES_SERVICE_HOST");
	*port = getenv("KUBERNETES_SERVICE_PORT");
	if (!*host || !*port)
		return hpn_err_set(
			err, HPN_E_INVALID_CONFIG, ENOENT,
			"KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: "
			"not in a pod (the kubelet sets them)");
	return 0;
}

int kc_from_service_account(const char *sa_dir, char **ret, struct hpn_err *err)
{
	const char *host, *port;
	_cleanup_free_ char *token = NULL, *ca = NULL;
	size_t token_len = 0, ca_len = 0;
	int r = service_env(&host, &port, err);

	if (r < 0)
		return r;
	r = read_file(sa_dir, "token", KC_TOKEN_MAX + 64, &token, &token_len, err);
	if (r < 0)
		return r;
	r = read_file(sa_dir, "ca.crt", KC_CA_MAX, &ca, &ca_len, err);
	if (r >= 0)
		r = kc_render(host, port, token, token_len, ca, ca_len, ret, err);
	if (token)
		explicit_bzero(token, token_len);
	if (r < 0)
		hpn_err_prefix(err, "service account %s", sa_dir);
	return r;
}

int kc_write_text(const char *path, const char *text, struct hpn_err *err)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_close_ int dfd = -1;
	const char *slash = strrchr(path, '/');
	int r;

	if (!text)
		return -ENOMEM;
	if (path[0] != '/' || !slash[1])
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "the kubeconfig path \"%s\" is not an absolute file name", path);
	dir = slash == path ? strdup("/") : strndup(path, slash - path);
	if (!dir)
		return -ENOMEM;
	/* Its directory holds a credential: root's alone when we make it. */
	r = hpn_mkdir_p(dir, 0700);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, -r, "create %s: %s", dir, strerror(-r));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open %s: %s", dir, strerror(errno));
	/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): dir is _cleanup_free_ */
	return hpn_install_file(dfd, slash + 1, text, strlen(text), 0600, err);
}

int kc_write(const char *sa_dir, const char *path, struct hpn_err *err)
{
	_cleanup_free_ char *text = NULL;
	int r;

	if (path[0] != '/' || !strrchr(path, '/')[1])
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "the kubeconfig path \"%s\" is not an absolute file name", path);
	r = kc_from_service_account(sa_dir, &text, err);
	if (r < 0)
		return r;
	if (!text)
		return -ENOMEM;
	r = kc_write_text(path, text, err);
	explicit_bzero(text, strlen(text));
	return r;
}

/* A DNS-1123 label (at most 63) or, subdomain, a subdomain (at most 253). */
static bool dns_name(const char *s, size_t len, bool subdomain)
{
	if (!len || len > (subdomain ? 253u : 63u) || s[0] == '-' || s[len - 1] == '-' ||
	    s[0] == '.' || s[len - 1] == '.')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		      (subdomain && s[i] == '.')))
			return false;
	return true;
}

int kc_plugin_parse(const char *spec, unsigned ttl, const char *sa_dir, struct kc_plugin *ret,
		    struct hpn_err *err)
{
	struct kc_plugin p = { .ttl = ttl ? ttl : KC_PLUGIN_TTL };
	const char *slash, *name;

	if (!spec)
		spec = KC_PLUGIN_SA;
	slash = strchr(spec, '/');
	name = slash ? slash + 1 : spec;
	if (!dns_name(name, strlen(name), true))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "the plugin's service account \"%.64s\" is not [NAMESPACE/]NAME",
				   spec);
	if (p.ttl < KC_PLUGIN_TTL_MIN || p.ttl > KC_PLUGIN_TTL_MAX)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ERANGE,
				   "the plugin's token lifetime %u s is not in %u..%u", p.ttl,
				   KC_PLUGIN_TTL_MIN, KC_PLUGIN_TTL_MAX);
	snprintf(p.name, sizeof(p.name), "%s", name);
	if (slash) {
		if (!dns_name(spec, slash - spec, false))
			return hpn_err_set(
				err, HPN_E_INVALID_CONFIG, EINVAL,
				"the plugin's service account \"%.64s\": its namespace is "
				"not a DNS label",
				spec);
		snprintf(p.ns, sizeof(p.ns), "%.*s", (int)(slash - spec), spec);
	} else {
		/* The namespace of the agent's pod, as the projected volume has it. */
		_cleanup_free_ char *ns = NULL;
		size_t len = 0;
		int r = read_file(sa_dir, "namespace", 256, &ns, &len, err);

		if (r == -ENOENT) {
			/* Not a pod's projected volume (tests, a hostPath): the manifest's. */
			memset(err, 0, sizeof(*err));
			snprintf(p.ns, sizeof(p.ns), "%s", KC_PLUGIN_NS);
			*ret = p;
			return 0;
		}
		if (r < 0) {
			hpn_err_prefix(err, "the plugin's service account %s: no namespace", spec);
			return r;
		}
		while (len && strchr(" \t\r\n", ns[len - 1]))
			len--;
		if (!ns || !dns_name(ns, len, false))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "%s/namespace is not a namespace's name", sa_dir);
		snprintf(p.ns, sizeof(p.ns), "%.*s", (int)len, ns);
	}
	*ret = p;
	return 0;
}

void kc_fd_path(int fd, char buf[32])
{
	snprintf(buf, 32, "/proc/self/fd/%d", fd);
}

int kc_agent_memfd(const char *sa_dir, int *ret_fd, struct hpn_err *err)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int fd = -1;
	size_t len, off = 0;
	int r = kc_from_service_account(sa_dir, &text, err);

	if (r < 0)
		return r;
	if (!text)
		return -ENOMEM;
	len = strlen(text);
	fd = memfd_create("hpn-rdma-agent.kubeconfig", MFD_CLOEXEC);
	if (fd < 0 || fchmod(fd, 0600) < 0)
		r = hpn_err_set(err, HPN_E_IO, errno, "memfd: %s", strerror(errno));
	while (r >= 0 && off < len) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			r = hpn_err_set(err, HPN_E_IO, n < 0 ? errno : EIO, "memfd: %s",
					strerror(n < 0 ? errno : EIO));
		else
			off += n;
	}
	explicit_bzero(text, len);
	if (r < 0)
		return r;
	/* cppcheck-suppress unreadVariable ; TAKE_FD clears fd for its cleanup handler */
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int kc_token_request_body(unsigned ttl, char **ret)
{
	/* No audiences: the API server's own, which it accepts for a pod's GET. */
	return asprintf(ret,
			"{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\","
			"\"spec\":{\"expirationSeconds\":%u}}",
			ttl) < 0
		       ? -ENOMEM
		       : 0;
}

/* "YYYY-MM-DDTHH:MM:SSZ" (fractions allowed, as RFC 3339 has them) as epoch seconds; -1: not one. */
static long long rfc3339_utc(const char *s)
{
	struct tm tm = { 0 };
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	time_t t;

	if (!end)
		return -1;
	if (*end == '.')
		end += 1 + strspn(end + 1, "0123456789");
	if (strcmp(end, "Z"))
		return -1;
	t = timegm(&tm);
	return t == (time_t)-1 ? -1 : (long long)t;
}

int kc_token_parse(const char *body, size_t len, char **ret_token, long long *ret_expiry,
		   struct hpn_err *err)
{
	cJSON *root = cJSON_ParseWithLength(body, len);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "status");
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(st, "token");
	const cJSON *exp = cJSON_GetObjectItemCaseSensitive(st, "expirationTimestamp");
	long long expiry = 0;
	char *t = NULL;
	int r = 0;

	if (!root)
		r = hpn_err_set(err, HPN_E_KUBE, EPROTO, "the TokenRequest's answer is not JSON");
	else if (!cJSON_IsString(tok) || !tok->valuestring[0] ||
		 strlen(tok->valuestring) > KC_TOKEN_MAX)
		r = hpn_err_set(err, HPN_E_KUBE, EPROTO,
				"the TokenRequest's answer has no status.token");
	else if (exp && !cJSON_IsNull(exp) &&
		 (!cJSON_IsString(exp) || (expiry = rfc3339_utc(exp->valuestring)) < 0))
		r = hpn_err_set(err, HPN_E_KUBE, EPROTO,
				"the TokenRequest's status.expirationTimestamp is not an RFC 3339 "
				"time in UTC");
	for (const char *c = r < 0 ? "" : tok->valuestring; *c; c++)
		if (*c <= ' ' || *c > '~' || *c == '"' || *c == '\\') {
			r = hpn_err_set(err, HPN_E_KUBE, EPROTO,
					"the TokenRequest's status.token holds a byte 0x%02x",
					(unsigned char)*c);
			break;
		}
	if (r >= 0) {
		t = strdup(tok->valuestring);
		if (!t)
			r = -ENOMEM;
	}
	if (tok && cJSON_IsString(tok))
		explicit_bzero(tok->valuestring, strlen(tok->valuestring));
	cJSON_Delete(root);
	if (r < 0)
		return r;
	*ret_token = t;
	*ret_expiry = expiry;
	return 0;
}

int kc_render_plugin(const char *sa_dir, const struct kc_plugin *p, const char *token,
		     long long expiry, char **ret, struct hpn_err *err)
{
	const char *host, *port;
	_cleanup_free_ char *ca = NULL, *head = NULL;
	size_t ca_len = 0;
	char until[32] = "?";
	struct tm tm;
	time_t t = (time_t)expiry;
	int r = service_env(&host, &port, err);

	if (r < 0)
		return r;
	r = read_file(sa_dir, "ca.crt", KC_CA_MAX, &ca, &ca_len, err);
	if (r < 0)
		return r;
	if (expiry > 0 && gmtime_r(&t, &tm))
		strftime(until, sizeof(until), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (asprintf(&head,
		     KC_PLUGIN_MARK "%s/%s until %s\n"
				    "# Written by hpn-rdma-agent for the hpn-rdma CNI plugin's pod "
				    "lookups: the token of\n"
				    "# the service account %s/%s (get pods, nothing else), from "
				    "the API's\n"
				    "# TokenRequest, renewed before it expires. Do not edit.\n",
		     p->ns, p->name, until, p->ns, p->name) < 0)
		return -ENOMEM;
	r = render(host, port, token, strlen(token), ca, ca_len, head, ret, err);
	if (r < 0)
		hpn_err_prefix(err, "the plugin's kubeconfig");
	return r;
}

int kc_drop_foreign(const char *path)
{
	char line[sizeof(KC_PLUGIN_MARK)] = "";
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	ssize_t n;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	n = read(fd, line, sizeof(line) - 1);
	if (n == (ssize_t)sizeof(line) - 1 && !memcmp(line, KC_PLUGIN_MARK, n))
		return 0;
	if (unlink(path) < 0)
		return errno == ENOENT ? 0 : -errno;
	return 1;
}

bool kc_token_refused(int r)
{
	return r == -EPERM || r == -EACCES || r == -ENOENT;
}

/* The TokenRequest for p: path into buf, body malloc'd into *body. */
static int token_call(const struct kc_plugin *p, struct hpn_kube_call *call, char **body,
		      char *path, size_t path_len, char *what, size_t what_len)
{
	int r = kc_token_request_body(p->ttl, body);

	if (r < 0)
		return r;
	snprintf(path, path_len, "/api/v1/namespaces/%s/serviceaccounts/%s/token", p->ns, p->name);
	snprintf(what, what_len, "TokenRequest for service account %s/%s", p->ns, p->name);
	*call = (struct hpn_kube_call){
		.method = "POST",
		.path = path,
		.body = *body,
		.body_len = strlen(*body),
		.what = what,
		.resource = "serviceaccounts/token",
		.verb = "create",
		.ns = p->ns,
		.timeout_ms = 10000,
		/* A second token made by a retry costs nothing: each expires alone. */
		.retry = true,
	};
	return 0;
}

/* The answer of a TokenRequest: its token and expiry, or an error naming call. */
static int token_answer(const struct hpn_kube_call *call, const struct hpn_kube_answer *a,
			char **ret_token, long long *ret_expiry, struct hpn_err *err)
{
	if (a->status != 200 && a->status != 201) {
		struct hpn_kubeconfig kc = { .server = (char *)"the API server" };

		return hpn_kube_status_err(&kc, call, a, err);
	}
	return kc_token_parse(a->body, a->len, ret_token, ret_expiry, err);
}

/*
 * path holds p's token, renders exactly as it would now (server, CA, the
 * marker) and has more than a fifth of p->ttl left, the point where the agent
 * renews it: install again (an init container's restart) leaves it as it is.
 */
static bool still_good(const char *sa_dir, const struct kc_plugin *p, const char *path)
{
	_cleanup_free_ char *text = NULL, *again = NULL;
	struct hpn_kubeconfig kc = { 0 };
	struct hpn_kube_warn warn = { 0 };
	struct hpn_err e = { 0 };
	char want[sizeof(KC_PLUGIN_MARK) + sizeof(p->ns) + sizeof(p->name) + 8], until[32];
	long long expiry;
	size_t n;
	int r;

	bool same;

	r = hpn_read_file(path, (size_t)64 << 10, &text, &n, &e);
	if (r < 0 || n <= sizeof(KC_PLUGIN_MARK) + 1 ||
	    memcmp(text, KC_PLUGIN_MARK, sizeof(KC_PLUGIN_MARK) - 1))
		return false;
	snprintf(want, sizeof(want), KC_PLUGIN_MARK "%s/%s until ", p->ns, p->name);
	if (strncmp(text, want, strlen(want)) ||
	    sscanf(text + strlen(want), "%31[^\n]", until) != 1)
		return false;
	expiry = rfc3339_utc(until);
	if (expiry <= (long long)time(NULL) + p->ttl / 5)
		return false;
	r = hpn_kubeconfig_load(path, &kc, &warn, &e);
	if (r >= 0 && kc.token)
		r = kc_render_plugin(sa_dir, p, kc.token, expiry, &again, &e);
	hpn_kubeconfig_free(&kc);
	same = r >= 0 && again && strlen(again) == n && !memcmp(again, text, n);
	explicit_bzero(text, n);
	if (again)
		explicit_bzero(again, strlen(again));
	return same;
}

int kc_install_plugin(const char *sa_dir, const struct kc_plugin *p, const char *path,
		      struct hpn_err *err)
{
	_cleanup_free_ char *body = NULL, *token = NULL, *text = NULL;
	_cleanup_close_ int fd = -1;
	struct hpn_kubeconfig kc = { 0 };
	struct hpn_kube_answer a = { 0 };
	struct hpn_kube_warn warn = { 0 };
	long long expiry = 0;
	int r;

	if (still_good(sa_dir, p, path))
		return 0;
	r = kc_agent_memfd(sa_dir, &fd, err);
	if (r >= 0) {
		char own[32];

		kc_fd_path(fd, own);
		r = hpn_kubeconfig_load(own, &kc, &warn, err);
	}
	if (r >= 0) {
		struct hpn_kube_call call;
		char upath[512], what[384];

		r = token_call(p, &call, &body, upath, sizeof(upath), what, sizeof(what));
		if (r >= 0)
			r = hpn_kube_request(&kc, &call, &a, &warn, err);
		if (r >= 0)
			r = token_answer(&call, &a, &token, &expiry, err);
		hpn_kube_answer_free(&a);
		hpn_kubeconfig_free(&kc);
	}
	if (r >= 0)
		r = kc_render_plugin(sa_dir, p, token, expiry, &text, err);
	if (token)
		explicit_bzero(token, strlen(token));
	/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): token is _cleanup_free_ */
	if (r >= 0 && !text)
		r = -ENOMEM;
	if (r >= 0) {
		r = kc_write_text(path, text, err);
		explicit_bzero(text, strlen(text));
	}
	if (r < 0 && kc_drop_foreign(path) > 0)
		hpn_err_prefix(err, "%s removed (it held the agent's own token)", path);
	return r;
}

/* The timer: the next TokenRequest after ms (at least 1). */
static void timer_in(struct kc_watch *w, long long ms)
{
	struct itimerspec it = { 0 };

	if (ms < 1)
		ms = 1;
	it.it_value.tv_sec = ms / 1000;
	it.it_value.tv_nsec = (ms % 1000) * 1000000;
	if (w->timer_fd >= 0)
		timerfd_settime(w->timer_fd, 0, &it, NULL);
}

/* The agent's own kubeconfig rendered again, swapped in under the same fd number. */
static int own_rewrite(struct kc_watch *w, struct hpn_err *err)
{
	int fd, r = kc_agent_memfd(w->sa_dir, &fd, err);

	if (r < 0)
		return r;
	/* dup3 replaces it at once: a reader opens the old kubeconfig or the new one. */
	if (dup3(fd, w->own_fd, O_CLOEXEC) < 0)
		r = hpn_err_set(err, HPN_E_IO, errno, "memfd: %s", strerror(errno));
	close(fd);
	return r;
}

/* The plugin's kubeconfig from the token held (the CA read again). */
static int plugin_rewrite(struct kc_watch *w, struct hpn_err *err)
{
	_cleanup_free_ char *text = NULL;
	int r;

	if (!w->token)
		return 0;
	r = kc_render_plugin(w->sa_dir, &w->plugin, w->token, w->expiry, &text, err);
	if (r < 0)
		return r;
	if (!text)
		return -ENOMEM;
	r = kc_write_text(w->path, text, err);
	explicit_bzero(text, strlen(text));
	return r;
}

int kc_watch_start(struct kc_watch *w, struct hpn_err *err)
{
	int r;

	w->fd = w->timer_fd = w->own_fd = -1;
	w->failing = w->in_flight = w->refused = false;
	w->token = NULL;
	w->valid_until = w->expiry = 0;
	w->backoff_s = w->failures = 0;
	w->started = true;
	r = kc_plugin_parse(w->plugin_sa, w->plugin_ttl, w->sa_dir, &w->plugin, err);
	if (r < 0)
		return r;
	r = kc_agent_memfd(w->sa_dir, &w->own_fd, err);
	if (r < 0)
		return r;
	kc_fd_path(w->own_fd, w->own_path);
	hpn_info("kubeconfig of the agent's own calls: service account %s (in memory)", w->sa_dir);
	w->fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	w->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (w->fd < 0 || w->timer_fd < 0)
		r = hpn_err_set(err, HPN_E_IO, errno, "inotify, timerfd: %s", strerror(errno));
	else if (inotify_add_watch(w->fd, w->sa_dir, IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE) < 0)
		r = hpn_err_set(err, HPN_E_IO, errno, "inotify on %s: %s", w->sa_dir,
				strerror(errno));
	if (r < 0) {
		kc_watch_stop(w);
		return r;
	}
	if (!w->call) {
		hpn_error("kubeconfig %s: no API client to ask for the plugin's token (service "
			  "account %s/%s): not written; the agent's own token is never written "
			  "for the plugin",
			  w->path, w->plugin.ns, w->plugin.name);
		if (kc_drop_foreign(w->path) > 0)
			hpn_warn(
				"kubeconfig %s removed: an older agent wrote it with its own token",
				w->path);
		return 0;
	}
	hpn_info("kubeconfig %s: the token of service account %s/%s, %u s, renewed at 80%%",
		 w->path, w->plugin.ns, w->plugin.name, w->plugin.ttl);
	timer_in(w, 0);
	return 0;
}

void kc_watch_event(struct kc_watch *w)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct hpn_err err = { 0 };
	int r;

	if (!w->started || w->own_fd < 0)
		return;
	/* What the events name does not matter: the files are read and compared anyway. */
	while (w->fd >= 0 && read(w->fd, buf, sizeof(buf)) > 0)
		;
	r = own_rewrite(w, &err);
	if (r >= 0)
		r = plugin_rewrite(w, &err);
	if (r < 0) {
		/* A rotation in progress may show a missing file for an instant: said once. */
		if (!w->failing)
			hpn_warn("kubeconfigs not rewritten from service account %s: %s", w->sa_dir,
				 err.msg[0] ? err.msg : strerror(-r));
		w->failing = true;
		return;
	}
	if (r > 0)
		hpn_info("kubeconfig %s rewritten: the service account's CA changed", w->path);
	else if (w->failing)
		hpn_info("kubeconfigs from service account %s are current again", w->sa_dir);
	w->failing = false;
}

void kc_watch_timer(struct kc_watch *w)
{
	_cleanup_free_ char *body = NULL;
	struct hpn_kube_call call;
	char path[512], what[384];
	uint64_t n;
	int r;

	if (w->timer_fd >= 0 && read(w->timer_fd, &n, sizeof(n)) < 0 && errno == EAGAIN)
		return;
	if (!w->call || w->in_flight)
		return;
	r = token_call(&w->plugin, &call, &body, path, sizeof(path), what, sizeof(what));
	if (r >= 0)
		r = w->call(w->call_ud, w->own_path, &call, w);
	if (r < 0) {
		struct hpn_err err = { 0 };

		hpn_err_set(&err, HPN_E_INTERNAL, -r, "%s", strerror(-r));
		kc_watch_token_done(w, r, NULL, &err);
		return;
	}
	w->in_flight = true;
}

void kc_watch_token_done(struct kc_watch *w, int r, const struct hpn_kube_answer *a,
			 const struct hpn_err *err)
{
	_cleanup_free_ char *body = NULL;
	struct hpn_err e = err ? *err : (struct hpn_err){ 0 };
	char *token = NULL;
	long long expiry = 0, now = hpn_mono_ms(), left;
	time_t wall = time(NULL);

	w->in_flight = false;
	if (r >= 0 && a) {
		struct hpn_kube_call call;
		char path[512], what[384];

		r = token_call(&w->plugin, &call, &body, path, sizeof(path), what, sizeof(what));
		if (r >= 0)
			r = token_answer(&call, a, &token, &expiry, &e);
	}
	if (r >= 0) {
		/* The lifetime the API gave (it may cap or extend what was asked). */
		long long life = expiry > wall ? expiry - wall : (long long)w->plugin.ttl;
		if (w->token) {
			explicit_bzero(w->token, strlen(w->token));
			free(w->token);
		}
		w->token = token;
		w->expiry = expiry ? expiry : wall + life;
		w->valid_until = now + life * 1000;
		r = plugin_rewrite(w, &e);
		if (r >= 0) {
			hpn_info(
				"kubeconfig %s: a token of service account %s/%s, for %lld s; next "
				"in %lld s",
				w->path, w->plugin.ns, w->plugin.name, life, life * 4 / 5);
			if (w->failures || w->refused)
				hpn_info("kubeconfig %s: the plugin's token renewed after %u "
					 "failure(s)",
					 w->path, w->failures);
			w->failures = w->backoff_s = 0;
			w->refused = false;
			timer_in(w, life * 800);
			return;
		}
	}
	/* Failed: again after 1, 2, 4 ... 60 s, the old token (if any) still in place. */
	w->backoff_s = w->backoff_s ? (w->backoff_s * 2 > 60 ? 60 : w->backoff_s * 2) : 1;
	w->failures++;
	left = w->valid_until > now ? (w->valid_until - now) / 1000 : 0;
	if (kc_token_refused(r)) {
		if (!w->refused)
			hpn_error(
				"kubeconfig %s: the API refused the plugin's token: %s. The "
				"manifest must grant the agent create on serviceaccounts/token for "
				"%s/%s (conf/k8s/hpn-rdma.yaml); the agent's own token is never "
				"written for the plugin. %s; asking again every %u s at most",
				w->path, e.msg[0] ? e.msg : strerror(-r), w->plugin.ns,
				w->plugin.name,
				left ? "The plugin keeps its current token until it expires"
				     : "The plugin has no token",
				60u);
		w->refused = true;
		if (kc_drop_foreign(w->path) > 0)
			hpn_warn(
				"kubeconfig %s removed: an older agent wrote it with its own token",
				w->path);
	} else if (w->failures == 1 || w->failures % 10 == 0) {
		hpn_warn(
			"kubeconfig %s: the plugin's token not %s (failure %u): %s; again in %u s, "
			"%s",
			w->path, w->token ? "renewed" : "requested", w->failures,
			e.msg[0] ? e.msg : strerror(-r), w->backoff_s,
			left ? "the current one valid for a while" : "the plugin has none valid");
	}
	if (w->token && !left && w->failures > 0)
		hpn_debug("kubeconfig %s: the plugin's token expired %lld s ago", w->path,
			  (now - w->valid_until) / 1000);
	timer_in(w, (long long)w->backoff_s * 1000);
}

void kc_watch_stop(struct kc_watch *w)
{
	if (!w->started)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (w->timer_fd >= 0)
		close(w->timer_fd);
	if (w->own_fd >= 0)
		close(w->own_fd);
	w->fd = w->timer_fd = w->own_fd = -1;
	if (w->token) {
		explicit_bzero(w->token, strlen(w->token));
		free(w->token);
	}
	w->token = NULL;
	w->started = false;
}
