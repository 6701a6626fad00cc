// SPDX-License-Identifier: Apache-2.0
/*
 * The plugin's kubeconfig, made from the agent pod's service account (the
 * in-cluster config: the API server's service address from the environment,
 * the projected token and CA), and kept current while the kubelet rotates the
 * token. The plugin runs on the host and cannot read the pod's projected
 * volume (its path under /var/lib/kubelet/pods/ changes with every pod), so
 * the token goes inline into one file on a host path, which the plugin reads
 * on every ADD that asks the API (lib/kubeconfig.c parses it).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

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

int kc_render(const char *host, const char *port, const char *token, size_t token_len,
	      const char *ca, size_t ca_len, char **ret, struct hpn_err *err)
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
		     "# Written by hpn-rdma-agent from its pod's service account (hpn-rdma), for\n"
		     "# the hpn-rdma CNI plugin's Kubernetes lookups; rewritten when the token\n"
		     "# rotates. Do not edit: the next rotation replaces it.\n"
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
		     v6 ? "[" : "", host, v6 ? "]" : "", port, ca64, tok) < 0)
		return -ENOMEM;
	explicit_bzero(tok, e - b);
	*ret = out;
	return 0;
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

int kc_from_service_account(const char *sa_dir, char **ret, struct hpn_err *err)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST"),
		   *port = getenv("KUBERNETES_SERVICE_PORT");
	_cleanup_free_ char *token = NULL, *ca = NULL;
	size_t token_len = 0, ca_len = 0;
	int r;

	if (!host || !port)
		return hpn_err_set(
			err, HPN_E_INVALID_CONFIG, ENOENT,
			"KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: "
			"not in a pod (the kubelet sets them)");
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

int kc_write(const char *sa_dir, const char *path, struct hpn_err *err)
{
	_cleanup_free_ char *text = NULL, *dir = NULL;
	_cleanup_close_ int dfd = -1;
	const char *slash = strrchr(path, '/');
	int r;

	if (path[0] != '/' || !slash[1])
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "the kubeconfig path \"%s\" is not an absolute file name", path);
	r = kc_from_service_account(sa_dir, &text, err);
	if (r < 0)
		return r;
	if (!text)
		return -ENOMEM;
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
	r = hpn_install_file(dfd, slash + 1, text, strlen(text), 0600, err);
	explicit_bzero(text, strlen(text));
	return r;
}

int kc_watch_start(struct kc_watch *w, struct hpn_err *err)
{
	int r;

	w->fd = -1;
	w->failing = false;
	r = kc_write(w->sa_dir, w->path, err);
	if (r < 0)
		return r;
	hpn_info("kubeconfig %s %s from service account %s", w->path, r ? "written" : "up to date",
		 w->sa_dir);
	w->fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (w->fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "inotify: %s", strerror(errno));
	if (inotify_add_watch(w->fd, w->sa_dir, IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
		r = hpn_err_set(err, HPN_E_IO, errno, "inotify on %s: %s", w->sa_dir,
				strerror(errno));
		kc_watch_stop(w);
		return r;
	}
	return 0;
}

void kc_watch_event(struct kc_watch *w)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct hpn_err err = { 0 };
	int r;

	if (!w->path)
		return;
	/* What the events name does not matter: the files are read and compared anyway. */
	while (w->fd >= 0 && read(w->fd, buf, sizeof(buf)) > 0)
		;
	r = kc_write(w->sa_dir, w->path, &err);
	if (r < 0) {
		/* A rotation in progress may show a missing file for an instant: said once. */
		if (!w->failing)
			hpn_warn("kubeconfig %s not rewritten: %s", w->path,
				 err.msg[0] ? err.msg : strerror(-r));
		w->failing = true;
		return;
	}
	if (r > 0)
		hpn_info("kubeconfig %s rewritten: the service account's token or CA changed",
			 w->path);
	else if (w->failing)
		hpn_info("kubeconfig %s is current again", w->path);
	w->failing = false;
}

void kc_watch_stop(struct kc_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}
