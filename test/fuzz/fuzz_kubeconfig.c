// SPDX-License-Identifier: Apache-2.0
/*
 * hpn_kubeconfig_load and hpn_kubeconfig_token (lib/kubeconfig.c): the
 * kubeconfig the plugin and the agent read, its YAML through libyaml's nodes,
 * its -data fields through base64, its tokens inline or in tokenFile. The
 * files live in a private directory (mkdtemp under $TMPDIR, else /dev/shm,
 * else /tmp) beside ca.crt, client.crt, client.key and token, which a
 * kubeconfig may name relative to itself. The first byte picks what the rest is:
 *   % 4 == 0  the kubeconfig, as it is;
 *   % 4 == 1  bytes, base64-encoded (with line breaks when the byte is 5 mod 8)
 *             into certificate-authority-data: they come back as the CA, byte
 *             for byte, exactly when they hold the PEM markers;
 *   % 4 == 2  base64 text (bytes mapped to its alphabet, '=', line ends and a
 *             few strays) as certificate-authority-data: accepted as base64
 *             exactly when it is canonical base64 (RFC 4648 with padding, zero
 *             trailing bits, line ends ignored), and then decoded to what an
 *             independent decoder gives;
 *   % 4 == 3  a token, inline (escaped in a double-quoted scalar) for an even
 *             byte, as tokenFile's content for an odd one: accepted exactly
 *             when it is 1 to HPN_KUBE_TOKEN_MAX visible ASCII characters
 *             (tokenFile: after blanks at either end are dropped).
 * Always: a refusal has code 5, 7 or 109 and a message naming the file, and
 * leaves the output untouched; a success has the fields the header promises
 * (names, an https:// server without '@', '?', '#', blanks or a trailing '/',
 * a CA of PEM CERTIFICATE, a client certificate exactly with its key, some
 * credential); warnings stay NUL-terminated; nothing leaks.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "fuzzdir.h"
#include "kubeconfig.h"

#define PEM_CERT "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n"
#define PEM_KEY	 "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49\n-----END PRIVATE KEY-----\n"

static char dir[PATH_MAX - 64];
static char conf[PATH_MAX];
static char tokpath[PATH_MAX];

static void put_in_dir(const char *name, const char *text)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fuzz_put(p, text, strlen(text), 0600);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_dir(dir, sizeof(dir), "kubeconfig");
	put_in_dir("ca.crt", PEM_CERT);
	put_in_dir("client.crt", PEM_CERT);
	put_in_dir("client.key", PEM_KEY);
	put_in_dir("token", "eyJhbGciOiJSUzI1NiJ9.fuzz.sig\n");
	snprintf(conf, sizeof(conf), "%s/config", dir);
	snprintf(tokpath, sizeof(tokpath), "%s/tok", dir);
	return 0;
}

/* A growing string for the generated kubeconfigs. */
struct buf {
	char *p;
	size_t len, cap;
};

static void add(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		FUZZ_ASSERT(b->p);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void adds(struct buf *b, const char *s)
{
	add(b, s, strlen(s));
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void encode(struct buf *b, const uint8_t *d, size_t n, bool wrap)
{
	size_t col = 0;

	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)d[i] << 16 | (i + 1 < n ? (unsigned)d[i + 1] << 8 : 0) |
			     (i + 2 < n ? d[i + 2] : 0);
		char q[4] = { b64[v >> 18 & 63], b64[v >> 12 & 63],
			      i + 1 < n ? b64[v >> 6 & 63] : '=', i + 2 < n ? b64[v & 63] : '=' };

		add(b, q, 4);
		col += 4;
		if (wrap && col >= 76 && i + 3 < n) {
			adds(b, "\\n"); /* inside a double-quoted scalar */
			col = 0;
		}
	}
}

/*
 * An independent decoder of canonical base64 (line ends skipped): the
 * decoded length, or -1 when s is not canonical.
 */
static long decode(const char *s, size_t n, uint8_t *out)
{
	unsigned acc = 0, bits = 0;
	size_t chars = 0, pad = 0;
	long len = 0;

	for (size_t i = 0; i < n; i++) {
		const char *at;

		if (s[i] == '\n' || s[i] == '\r')
			continue;
		if (s[i] == '=') {
			pad++;
			continue;
		}
		at = s[i] ? strchr(b64, s[i]) : NULL;
		if (pad || !at)
			return -1;
		chars++;
		acc = acc << 6 | (unsigned)(at - b64);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[len++] = (uint8_t)(acc >> bits);
		}
	}
	if ((chars + pad) % 4 || pad > 2 || (pad && (chars % 4) + pad != 4) ||
	    (acc & ((1u << bits) - 1)))
		return -1;
	return len;
}

static const char *const head =
	"apiVersion: v1\nkind: Config\ncurrent-context: c\n"
	"contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
	"clusters:\n- name: k\n  cluster:\n    server: https://10.0.0.1:6443\n";

static bool is_ascii_visible(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

/* What every success promises. */
static void check_loaded(const struct hpn_kubeconfig *kc)
{
	size_t n;

	FUZZ_ASSERT(kc->path && !strcmp(kc->path, conf));
	FUZZ_ASSERT(kc->context && *kc->context && strlen(kc->context) <= 253);
	FUZZ_ASSERT(kc->cluster && *kc->cluster && strlen(kc->cluster) <= 253);
	FUZZ_ASSERT(kc->user && *kc->user && strlen(kc->user) <= 253);
	FUZZ_ASSERT(kc->server && !strncmp(kc->server, "https://", 8));
	n = strlen(kc->server);
	FUZZ_ASSERT(n > 8 && n <= 2048 && kc->server[8] != '/' && kc->server[n - 1] != '/');
	FUZZ_ASSERT(is_ascii_visible(kc->server, n));
	FUZZ_ASSERT(!strpbrk(kc->server, "@?#\\"));
	FUZZ_ASSERT(kc->ca && kc->ca_len && kc->ca[kc->ca_len] == '\0' && kc->ca_from);
	FUZZ_ASSERT(memmem(kc->ca, kc->ca_len, "-----BEGIN ", 11) &&
		    memmem(kc->ca, kc->ca_len, "CERTIFICATE", 11));
	FUZZ_ASSERT(!kc->cert == !kc->key);
	if (kc->cert) {
		FUZZ_ASSERT(kc->cert[kc->cert_len] == '\0' && kc->key[kc->key_len] == '\0');
		FUZZ_ASSERT(memmem(kc->cert, kc->cert_len, "CERTIFICATE", 11) &&
			    memmem(kc->key, kc->key_len, "PRIVATE KEY", 11));
	}
	FUZZ_ASSERT(kc->token || kc->token_file || kc->cert);
	if (kc->token) {
		n = strlen(kc->token);
		FUZZ_ASSERT(n && n <= HPN_KUBE_TOKEN_MAX && is_ascii_visible(kc->token, n));
	}
	/* Relative names are taken from the kubeconfig's directory (absolute here). */
	if (kc->token_file)
		FUZZ_ASSERT((dir[0] != '/' || kc->token_file[0] == '/') &&
			    strlen(kc->token_file) < 4096);
}

static void check_err(const struct hpn_err *err)
{
	FUZZ_ASSERT(err->code == 5 || err->code == 7 || err->code == HPN_E_KUBE);
	FUZZ_ASSERT(memchr(err->msg, '\0', sizeof(err->msg)) && err->msg[0]);
	if (err->code != HPN_E_KUBE)
		FUZZ_ASSERT(!strncmp(err->msg, "kubeconfig ", 11) && strstr(err->msg, conf));
}

static void check_warn(const struct hpn_kube_warn *w)
{
	FUZZ_ASSERT(memchr(w->msg, '\0', sizeof(w->msg)));
}

/*
 * Loads conf, checks what any load promises; the token too when it loaded.
 * Returns the load's verdict; *ret_kc (if given) keeps a success.
 */
static int load(struct hpn_kubeconfig *ret_kc, char **ret_token, int *ret_token_r)
{
	struct hpn_kubeconfig kc, untouched;
	struct hpn_kube_warn warn = { { 0 } };
	struct hpn_err err = { 0 };
	char *token = (char *)"untouched";
	int r;

	memset(&kc, 0x5a, sizeof(kc));
	untouched = kc;
	r = hpn_kubeconfig_load(conf, &kc, &warn, &err);
	check_warn(&warn);
	if (r < 0) {
		check_err(&err);
		FUZZ_ASSERT(!memcmp(&kc, &untouched, sizeof(kc)));
		return r;
	}
	FUZZ_ASSERT(r == 0 && err.code == 0);
	check_loaded(&kc);

	memset(&err, 0, sizeof(err));
	r = hpn_kubeconfig_token(&kc, &token, &warn, &err);
	check_warn(&warn);
	if (r < 0) {
		FUZZ_ASSERT(kc.token_file); /* an inline token was checked by the load */
		check_err(&err);
		FUZZ_ASSERT(token && !strcmp(token, "untouched"));
		token = NULL;
	} else {
		FUZZ_ASSERT(r == 0 && err.code == 0);
		if (token) {
			size_t n = strlen(token);

			FUZZ_ASSERT(n && n <= HPN_KUBE_TOKEN_MAX && is_ascii_visible(token, n));
		} else {
			FUZZ_ASSERT(!kc.token && !kc.token_file && kc.cert);
		}
	}
	if (ret_token_r)
		*ret_token_r = r;
	if (ret_token)
		*ret_token = token;
	else
		hpn_kube_token_free(token);
	if (ret_kc)
		*ret_kc = kc;
	else
		hpn_kubeconfig_free(&kc);
	return 0;
}

/* Mode 1: any bytes through base64 come back as they were. */
static void ca_bytes(const uint8_t *d, size_t n, bool wrap)
{
	struct buf b = { 0 };
	struct hpn_kubeconfig kc;
	bool pem = memmem(d, n, "-----BEGIN ", 11) && memmem(d, n, "CERTIFICATE", 11);
	int r;

	adds(&b, head);
	adds(&b, "    certificate-authority-data: \"");
	encode(&b, d, n, wrap);
	adds(&b, "\"\nusers:\n- name: u\n  user: {token: abc}\n");
	fuzz_put(conf, b.p, b.len, 0600);
	free(b.p);
	r = load(&kc, NULL, NULL);
	FUZZ_ASSERT((r == 0) == pem);
	if (r == 0) {
		FUZZ_ASSERT(kc.ca_len == n && !memcmp(kc.ca, d, n));
		FUZZ_ASSERT(!strcmp(kc.ca_from, "certificate-authority-data"));
		hpn_kubeconfig_free(&kc);
	}
}

/* Mode 2: base64 text as the decoder meets it. */
static void ca_text(const uint8_t *d, size_t n)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\n\r-_ *";
	struct buf b = { 0 }, text = { 0 };
	struct hpn_kubeconfig kc;
	struct hpn_err err = { 0 };
	uint8_t *want = malloc(n + 1);
	long len;
	int r;

	FUZZ_ASSERT(want);
	adds(&b, head);
	adds(&b, "    certificate-authority-data: \"");
	for (size_t i = 0; i < n; i++) {
		char c = alphabet[d[i] % (sizeof(alphabet) - 1)];

		add(&text, &c, 1);
		adds(&b, c == '\n' ? "\\n" : c == '\r' ? "\\r" : (char[]){ c, 0 });
	}
	adds(&b, "\"\nusers:\n- name: u\n  user: {token: abc}\n");
	fuzz_put(conf, b.p, b.len, 0600);
	len = decode(text.p ? text.p : "", text.len, want);
	r = load(&kc, NULL, NULL);
	if (r == 0) {
		FUZZ_ASSERT(len >= 0 && kc.ca_len == (size_t)len &&
			    !memcmp(kc.ca, want, kc.ca_len));
		hpn_kubeconfig_free(&kc);
	} else {
		/* Again for its message: not base64 exactly when the oracle says so. */
		memset(&kc, 0, sizeof(kc));
		FUZZ_ASSERT(hpn_kubeconfig_load(conf, &kc, NULL, &err) < 0);
		if (strstr(err.msg, "is not valid base64"))
			FUZZ_ASSERT(len < 0);
		else if (len > 0)
			FUZZ_ASSERT(strstr(err.msg, "holds no PEM CERTIFICATE"));
		else
			FUZZ_ASSERT(len == 0); /* empty or only line ends: no CA */
	}
	free(want);
	free(text.p);
	free(b.p);
}

/* Mode 3: a token, inline or in tokenFile. */
static void token(const uint8_t *d, size_t n, bool file)
{
	struct buf b = { 0 };
	char *t = NULL;
	size_t s = 0, e = n;
	int r, tr = -1;
	bool ok;

	adds(&b, head);
	adds(&b, "    certificate-authority: ca.crt\nusers:\n- name: u\n  user:\n");
	if (file) {
		fuzz_put(tokpath, d, n, 0600);
		adds(&b, "    tokenFile: tok\n");
		while (s < e && strchr(" \t\n\r", d[s]) && d[s])
			s++;
		while (e > s && strchr(" \t\n\r", d[e - 1]) && d[e - 1])
			e--;
	} else {
		adds(&b, "    token: \"");
		for (size_t i = 0; i < n; i++) {
			char x[8];

			if (d[i] >= 0x20 && d[i] < 0x7f && d[i] != '"' && d[i] != '\\')
				add(&b, (const char *)&d[i], 1);
			else
				add(&b, x, (size_t)snprintf(x, sizeof(x), "\\x%02x", d[i]));
		}
		adds(&b, "\"\n");
	}
	fuzz_put(conf, b.p, b.len, 0600);
	free(b.p);
	ok = e > s && e - s <= HPN_KUBE_TOKEN_MAX && is_ascii_visible((const char *)d + s, e - s);
	r = load(NULL, &t, &tr);
	if (file) {
		/* The file is read per request: the load takes any. */
		FUZZ_ASSERT(r == 0 && (tr == 0) == ok);
	} else {
		FUZZ_ASSERT((r == 0) == ok);
	}
	if (t) {
		FUZZ_ASSERT(ok && strlen(t) == e - s && !memcmp(t, d + s, e - s));
		hpn_kube_token_free(t);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > (1u << 16))
		return 0;
	switch (data[0] % 4) {
	case 0:
		fuzz_put(conf, data + 1, size - 1, 0600);
		load(NULL, NULL, NULL);
		break;
	case 1:
		ca_bytes(data + 1, size - 1, data[0] % 8 == 5);
		break;
	case 2:
		ca_text(data + 1, size - 1);
		break;
	default:
		token(data + 1, size - 1, data[0] & 4);
		break;
	}
	return 0;
}
