// SPDX-License-Identifier: Apache-2.0
#include "kubeconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "dl.h"
#include "util.h"

#define NAME_LEN_MAX   253  /* a context, cluster or user name */
#define SERVER_LEN_MAX 2048 /* the server URL */
#define LIST_MAX       1024 /* entries of clusters, contexts, users */
#define WHAT_MAX       512  /* a field's name in messages: users["u"].user.client-key */

/*
 * libyaml, opened on first use: the plugin links it only when it reads a
 * kubeconfig (yaml_document_get_node is done by hand below, over the
 * document's node array as yaml.h lays it out, so it needs no symbol).
 */
static struct {
	int (*parser_initialize)(yaml_parser_t *parser);
	void (*parser_delete)(yaml_parser_t *parser);
	void (*parser_set_input_string)(yaml_parser_t *parser, const unsigned char *input,
					size_t size);
	int (*parser_load)(yaml_parser_t *parser, yaml_document_t *document);
	void (*document_delete)(yaml_document_t *document);
	bool loaded;
} y;

static int yaml_lib(struct hpn_err *err)
{
	const struct hpn_dl_sym syms[] = {
		{ "yaml_parser_initialize", (void **)&y.parser_initialize },
		{ "yaml_parser_delete", (void **)&y.parser_delete },
		{ "yaml_parser_set_input_string", (void **)&y.parser_set_input_string },
		{ "yaml_parser_load", (void **)&y.parser_load },
		{ "yaml_document_delete", (void **)&y.document_delete },
	};
	int r;

	if (y.loaded)
		return 0;
	r = hpn_dl_load("libyaml-0.so.2", "libyaml-0-2", syms, HPN_ARRAY_SIZE(syms), HPN_E_KUBE,
			err);
	if (r == 0)
		y.loaded = true;
	return r;
}

void hpn_kube_warn_add(struct hpn_kube_warn *warn, const char *fmt, ...)
{
	size_t n;
	va_list ap;

	if (!warn)
		return;
	n = strnlen(warn->msg, sizeof(warn->msg));
	if (n && n + 2 < sizeof(warn->msg)) {
		memcpy(warn->msg + n, "; ", 3);
		n += 2;
	}
	if (n + 1 >= sizeof(warn->msg))
		return;
	va_start(ap, fmt);
	vsnprintf(warn->msg + n, sizeof(warn->msg) - n, fmt, ap);
	va_end(ap);
}

/* One parse: the file, its directory (for relative names) and the tree. */
struct kc {
	const char *path;
	char dir[4096];
	yaml_document_t *doc;
	struct hpn_err *err;
	struct hpn_kube_warn *warn;
};

/*
 * The message of every error: the file, then what is wrong with which field;
 * returns -e (e may be given negative) as hpn_err_set does. A macro, so that
 * the analyzers (which do not follow variadic calls) see the negative return.
 */
#define kc_err(c, code, e, fmt, ...)                                                               \
	(hpn_err_set((c)->err, code, e, "kubeconfig %s: " fmt, (c)->path, ##__VA_ARGS__),          \
	 (e) > 0   ? -(e)                                                                          \
	 : (e) < 0 ? (e)                                                                           \
		   : -EINVAL)

static yaml_node_t *node_at(const struct kc *c, int index)
{
	if (index < 1 || index > c->doc->nodes.top - c->doc->nodes.start)
		return NULL;
	return c->doc->nodes.start + index - 1;
}

/* YAML's null: an empty plain scalar, null, Null, NULL or ~. */
static bool is_null(const yaml_node_t *n)
{
	static const char *const nulls[] = { "", "null", "Null", "NULL", "~" };
	const char *v;
	size_t len;

	if (!n || n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	v = (const char *)n->data.scalar.value;
	len = n->data.scalar.length;
	for (size_t i = 0; i < HPN_ARRAY_SIZE(nulls); i++)
		if (len == strlen(nulls[i]) && !memcmp(v, nulls[i], len))
			return true;
	return false;
}

static bool scalar_is(const yaml_node_t *n, const char *s)
{
	return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == strlen(s) &&
	       !memcmp(n->data.scalar.value, s, n->data.scalar.length);
}

/*
 * The value of key in the mapping map (what names map in messages): NULL when
 * absent or null. A key given twice is an error, as it is for kubectl.
 */
static int get(const struct kc *c, const yaml_node_t *map, const char *what, const char *key,
	       yaml_node_t **ret)
{
	yaml_node_t *found = NULL;

	*ret = NULL;
	if (!map || map->type != YAML_MAPPING_NODE)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s must be a mapping", what);
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		if (!scalar_is(node_at(c, p->key), key))
			continue;
		if (found)
			return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s.%s is given twice", what,
				      key);
		found = node_at(c, p->value);
		if (!found)
			return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s.%s has no value", what,
				      key);
	}
	*ret = is_null(found) ? NULL : found;
	return 0;
}

/*
 * A string member: *ret points into the tree (NUL-terminated by libyaml), or
 * NULL when absent, null or empty (client-go's unset). max_len 0: no limit.
 */
static int get_str(const struct kc *c, const yaml_node_t *map, const char *what, const char *key,
		   size_t max_len, const char **ret)
{
	yaml_node_t *n;
	int r = get(c, map, what, key, &n);

	*ret = NULL;
	if (r < 0 || !n)
		return r;
	if (n->type != YAML_SCALAR_NODE)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s.%s must be a string", what, key);
	if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s.%s holds a NUL byte", what, key);
	if (max_len && n->data.scalar.length > max_len)
		return kc_err(c, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
			      "%s.%s is longer than %zu bytes", what, key, max_len);
	if (n->data.scalar.length)
		*ret = (const char *)n->data.scalar.value;
	return 0;
}

/* A boolean as Go's YAML decoder reads one (YAML 1.1: yes/no/on/off too); absent: false. */
static int get_bool(const struct kc *c, const yaml_node_t *map, const char *what, const char *key,
		    bool *ret)
{
	static const char *const yes[] = { "true", "True", "TRUE", "yes", "Yes", "YES",
					   "on",   "On",   "ON",   "y",	  "Y" };
	static const char *const no[] = { "false", "False", "FALSE", "no", "No", "NO",
					  "off",   "Off",   "OFF",   "n",  "N" };
	yaml_node_t *n;
	int r = get(c, map, what, key, &n);

	*ret = false;
	if (r < 0 || !n)
		return r;
	for (size_t i = 0; i < HPN_ARRAY_SIZE(yes); i++) {
		if (scalar_is(n, yes[i])) {
			*ret = true;
			return 0;
		}
		if (scalar_is(n, no[i]))
			return 0;
	}
	return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s.%s must be true or false", what, key);
}

/*
 * The entry of list key ("clusters") whose name is name: its member inner
 * ("cluster"), a mapping. Absent: ENOENT with the message naming both.
 */
static int find_entry(const struct kc *c, const yaml_node_t *root, const char *key,
		      const char *inner, const char *name, const char *named_by, yaml_node_t **ret)
{
	yaml_node_t *list, *found = NULL;
	char what[WHAT_MAX];
	size_t i = 0;
	int r;

	r = get(c, root, "the top level", key, &list);
	if (r < 0)
		return r;
	if (list && list->type != YAML_SEQUENCE_NODE)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s must be a list", key);
	if (list && list->data.sequence.items.top - list->data.sequence.items.start > LIST_MAX)
		return kc_err(c, HPN_E_INVALID_CONFIG, E2BIG, "%s has more than %d entries", key,
			      LIST_MAX);
	for (yaml_node_item_t *it = list ? list->data.sequence.items.start : NULL;
	     list && it < list->data.sequence.items.top; it++, i++) {
		yaml_node_t *e = node_at(c, *it), *v;
		const char *n;

		snprintf(what, sizeof(what), "%s[%zu]", key, i);
		r = get_str(c, e, what, "name", NAME_LEN_MAX, &n);
		if (r < 0)
			return r;
		if (!n || strcmp(n, name))
			continue;
		if (found)
			return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL,
				      "%s has two entries named \"%s\"", key, name);
		snprintf(what, sizeof(what), "%s[\"%s\"]", key, name);
		r = get(c, e, what, inner, &v);
		if (r < 0)
			return r;
		if (!v || v->type != YAML_MAPPING_NODE)
			return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s.%s must be a mapping",
				      what, inner);
		found = v;
	}
	if (!found)
		return kc_err(c, HPN_E_INVALID_CONFIG, ENOENT, "%s names %s \"%s\", which %s lacks",
			      named_by, inner, name, key);
	*ret = found;
	return 0;
}

/* A file name from the kubeconfig, relative ones taken from its directory (as kubectl does). */
static int resolve(const struct kc *c, const char *what, const char *name, char **ret)
{
	char *p;

	if (name[0] == '/' || !c->dir[0])
		p = strdup(name);
	else if (asprintf(&p, "%s/%s", c->dir, name) < 0)
		p = NULL;
	if (!p)
		return -ENOMEM;
	if (strlen(p) >= 4096) {
		free(p);
		return kc_err(c, HPN_E_INVALID_CONFIG, ENAMETOOLONG, "%s: file name too long",
			      what);
	}
	*ret = p;
	return 0;
}

/*
 * A regular file of at most HPN_KUBECONFIG_MAX bytes: O_NONBLOCK so a FIFO
 * planted there cannot hang the plugin (it is refused after fstat). Sets
 * *mode. Returns 0 or a positive errno (EINVAL: not a regular file, EFBIG:
 * too large; see file_strerror), not the usual negative one, and closes by
 * hand: clang-tidy 14's analyzer loses track of a negated errno and of
 * returns past a cleanup attribute, and then of what was written on success.
 * The caller names the file in a code 5 error.
 */
static int read_file(const char *path, char **ret, size_t *ret_len, mode_t *mode)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), e = 0;
	char *buf = NULL;
	struct stat sb;
	size_t len = 0;

	if (fd < 0) {
		e = errno;
		return e ? e : EIO;
	}
	if (fstat(fd, &sb) < 0) {
		e = errno;
		if (!e)
			e = EIO;
	} else if (!S_ISREG(sb.st_mode)) {
		e = EINVAL;
	} else if (sb.st_size > HPN_KUBECONFIG_MAX) {
		e = EFBIG;
	} else {
		int r = hpn_read_all(fd, HPN_KUBECONFIG_MAX, &buf, &len);

		if (r == -EFBIG || r == -ENOMEM) /* grown past the limit since fstat */
			e = r == -EFBIG ? EFBIG : ENOMEM;
		else if (r < 0 || !buf)
			e = EIO;
	}
	close(fd);
	if (e)
		return e;
	*mode = sb.st_mode;
	*ret = buf;
	*ret_len = len;
	return 0;
}

static const char *file_strerror(int e)
{
	if (e == EINVAL)
		return "not a regular file";
	if (e == EFBIG)
		return "larger than 1 MiB";
	return strerror(e);
}

static void warn_mode(const struct kc *c, const char *what, const char *path, mode_t mode)
{
	if (mode & (S_IRWXG | S_IRWXO))
		hpn_kube_warn_add(c->warn,
				  "%s %s holds a secret and is readable by group or others "
				  "(mode %04o): chmod 600 it",
				  what, path, (unsigned)(mode & 07777));
}

/* Standard base64 (RFC 4648 section 4) as Go writes []byte, line breaks allowed. */
static int base64_decode(const char *in, char **ret, size_t *ret_len)
{
	size_t len = strlen(in), n = 0, pad = 0;
	unsigned acc = 0, bits = 0;
	char *out = malloc(len / 4 * 3 + 4);

	if (!out)
		return -ENOMEM;
	for (const char *p = in; *p; p++) {
		int v;

		if (*p == '\n' || *p == '\r')
			continue;
		if (*p == '=') {
			pad++;
			continue;
		}
		if (pad)
			goto bad; /* data after padding */
		if (*p >= 'A' && *p <= 'Z')
			v = *p - 'A';
		else if (*p >= 'a' && *p <= 'z')
			v = *p - 'a' + 26;
		else if (*p >= '0' && *p <= '9')
			v = *p - '0' + 52;
		else if (*p == '+')
			v = 62;
		else if (*p == '/')
			v = 63;
		else
			goto bad;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[n++] = (char)((acc >> bits) & 0xff);
		}
	}
	/* Whole quanta only: 2 or 3 leftover characters need their padding; 1 is never valid. */
	if (bits == 6 || pad > 2 || (bits == 4 && pad != 2) || (bits == 2 && pad != 1) ||
	    (bits == 0 && pad) || (acc & ((1u << bits) - 1)))
		goto bad;
	out[n] = '\0';
	*ret = out;
	*ret_len = n;
	return 0;
bad:
	free(out);
	return -EINVAL;
}

/*
 * One PEM blob of the user or cluster: from the file named by key, or decoded
 * from key-data; both given is refused, as kubectl's validation does. label
 * is what the PEM must hold ("CERTIFICATE", "PRIVATE KEY"). secret: warn when
 * the file is readable by group or others. *ret stays NULL when neither is
 * given; *ret_from (if given) says where it came from.
 */
static int get_pem(const struct kc *c, const yaml_node_t *map, const char *what, const char *key,
		   const char *label, bool secret, char **ret, size_t *ret_len, char **ret_from)
{
	char *path = NULL, *buf = NULL, *from = NULL;
	char dkey[64], field[WHAT_MAX + 80];
	const char *file, *data;
	size_t len = 0;
	mode_t mode = 0;
	int r;

	snprintf(dkey, sizeof(dkey), "%s-data", key);
	r = get_str(c, map, what, key, 0, &file);
	if (r < 0)
		return r;
	r = get_str(c, map, what, dkey, 0, &data);
	if (r < 0)
		return r;
	if (file && data)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s gives both %s and %s: give one",
			      what, key, dkey);
	if (!file && !data)
		return 0;
	if (file) {
		snprintf(field, sizeof(field), "%s.%s", what, key);
		r = resolve(c, field, file, &path);
		if (r < 0)
			return r;
		r = read_file(path, &buf, &len, &mode);
		if (r) {
			r = kc_err(c, HPN_E_IO, r, "%s %s: %s", field, path, file_strerror(r));
			goto out;
		}
		if (secret)
			warn_mode(c, field, path, mode);
		if (asprintf(&from, "%s %s", key, path) < 0) {
			from = NULL;
			r = -ENOMEM;
			goto out;
		}
	} else {
		snprintf(field, sizeof(field), "%s.%s", what, dkey);
		r = base64_decode(data, &buf, &len);
		if (r == -EINVAL)
			return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s is not valid base64",
				      field);
		if (r < 0)
			return r;
		from = strdup(dkey);
		r = -ENOMEM;
		if (!from)
			goto out;
	}
	/* A clear word now rather than the TLS library's later. */
	if (!memmem(buf, len, "-----BEGIN ", 11) || !memmem(buf, len, label, strlen(label))) {
		r = kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s%s%s holds no PEM %s", field,
			   path ? " " : "", path ? path : "", label);
		goto out;
	}
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	if (ret_from)
		*ret_from = TAKE_PTR(from);
	r = 0;
out:
	if (buf)
		explicit_bzero(buf, len); /* a key read and refused */
	free(buf);
	free(from);
	free(path);
	return r;
}

/* "https://" then a host, no spaces, query or fragment; a trailing '/' is dropped. */
static int check_server(const struct kc *c, const char *what, const char *s, char **ret)
{
	size_t len = strlen(s);
	char *v;

	if (strncmp(s, "https://", 8))
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL,
			      "%s.server \"%.64s\" is not an https:// URL (TLS is required)", what,
			      s);
	if (len == 8 || s[8] == '/')
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s.server \"%.64s\" has no host",
			      what, s);
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f || *p == '?' ||
		    *p == '#' || *p == '\\')
			return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL,
				      "%s.server \"%.64s\" holds a space, control character, "
				      "'?', '#' or '\\'",
				      what, s);
	/* user:password@host: not echoed, it may hold a password. */
	if (strchr(s, '@'))
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL,
			      "%s.server holds an '@': credentials go in the user, not the URL",
			      what);
	while (len > 8 && s[len - 1] == '/')
		len--;
	v = strndup(s, len);
	if (!v)
		return -ENOMEM;
	*ret = v;
	return 0;
}

static int load_cluster(const struct kc *c, const yaml_node_t *cl, struct hpn_kubeconfig *kc)
{
	static const char *const refused[] = { "tls-server-name", "proxy-url" };
	char what[WHAT_MAX];
	const char *server, *s;
	bool insecure;
	int r;

	snprintf(what, sizeof(what), "clusters[\"%s\"].cluster", kc->cluster);
	r = get_bool(c, cl, what, "insecure-skip-tls-verify", &insecure);
	if (r < 0)
		return r;
	if (insecure)
		return kc_err(
			c, HPN_E_INVALID_CONFIG, EPERM,
			"%s.insecure-skip-tls-verify is true: the API server's certificate is "
			"always verified; remove it and give certificate-authority(-data)",
			what);
	for (size_t i = 0; i < HPN_ARRAY_SIZE(refused); i++) {
		r = get_str(c, cl, what, refused[i], 0, &s);
		if (r < 0)
			return r;
		if (s)
			return kc_err(c, HPN_E_INVALID_CONFIG, ENOTSUP, "%s.%s is not supported",
				      what, refused[i]);
	}
	r = get_str(c, cl, what, "server", SERVER_LEN_MAX, &server);
	if (r < 0)
		return r;
	if (!server)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s.server is missing", what);
	r = check_server(c, what, server, &kc->server);
	if (r < 0)
		return r;
	r = get_pem(c, cl, what, "certificate-authority", "CERTIFICATE", false, &kc->ca,
		    &kc->ca_len, &kc->ca_from);
	if (r < 0)
		return r;
	if (!kc->ca)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL,
			      "%s has no certificate-authority or certificate-authority-data: the "
			      "API server is verified against the kubeconfig's CA only",
			      what);
	return 0;
}

static int check_token(const struct kc *c, const char *what, const char *t)
{
	size_t len = strlen(t);

	if (len > HPN_KUBE_TOKEN_MAX)
		return kc_err(c, HPN_E_INVALID_CONFIG, E2BIG, "%s is longer than %d bytes", what,
			      HPN_KUBE_TOKEN_MAX);
	for (const char *p = t; *p; p++)
		if (*p <= ' ' || *p >= 0x7f)
			return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL,
				      "%s holds a character that is not visible ASCII", what);
	return 0;
}

static int load_user(const struct kc *c, const yaml_node_t *u, struct hpn_kubeconfig *kc,
		     bool *inline_secret)
{
	/* Ways to authenticate that hpn-rdma does not implement: refused, never ignored. */
	static const struct {
		const char *key, *why;
	} refused[] = {
		{ "exec", "an exec credential plugin" },
		{ "auth-provider", "an auth-provider plugin" },
		{ "username", "basic authentication" },
		{ "password", "basic authentication" },
		{ "as", "impersonation" },
		{ "as-uid", "impersonation" },
		{ "as-groups", "impersonation" },
		{ "as-user-extra", "impersonation" },
	};
	char what[WHAT_MAX], field[WHAT_MAX + 64];
	const char *token, *file, *key_data;
	yaml_node_t *n;
	int r;

	snprintf(what, sizeof(what), "users[\"%s\"].user", kc->user);
	for (size_t i = 0; i < HPN_ARRAY_SIZE(refused); i++) {
		r = get(c, u, what, refused[i].key, &n);
		if (r < 0)
			return r;
		if (n)
			return kc_err(c, HPN_E_INVALID_CONFIG, ENOTSUP,
				      "%s.%s (%s) is not supported: give the user a token, "
				      "tokenFile or client-certificate and client-key",
				      what, refused[i].key, refused[i].why);
	}
	r = get_str(c, u, what, "token", 0, &token);
	if (r < 0)
		return r;
	if (token) {
		snprintf(field, sizeof(field), "%s.token", what);
		r = check_token(c, field, token);
		if (r < 0)
			return r;
		kc->token = strdup(token);
		if (!kc->token)
			return -ENOMEM;
		*inline_secret = true;
	}
	r = get_str(c, u, what, "tokenFile", 0, &file);
	if (r < 0)
		return r;
	if (file) {
		snprintf(field, sizeof(field), "%s.tokenFile", what);
		r = resolve(c, field, file, &kc->token_file);
		if (r < 0)
			return r;
	}
	r = get_pem(c, u, what, "client-certificate", "CERTIFICATE", false, &kc->cert,
		    &kc->cert_len, NULL);
	if (r < 0)
		return r;
	r = get_pem(c, u, what, "client-key", "PRIVATE KEY", true, &kc->key, &kc->key_len, NULL);
	if (r < 0)
		return r;
	r = get_str(c, u, what, "client-key-data", 0, &key_data);
	if (r < 0)
		return r;
	if (key_data)
		*inline_secret = true;
	if (!kc->cert != !kc->key)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL,
			      "%s has a client-%s without a client-%s", what,
			      kc->cert ? "certificate" : "key", kc->cert ? "key" : "certificate");
	if (!kc->token && !kc->token_file && !kc->cert)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL,
			      "%s has no token, tokenFile or client-certificate: the API server "
			      "would see an anonymous request",
			      what);
	return 0;
}

static int load_doc(struct kc *c, struct hpn_kubeconfig *kc, bool *inline_secret)
{
	yaml_node_t *root = node_at(c, 1), *ctx, *cl, *u;
	const char *cur, *s;
	char what[WHAT_MAX];
	int r;

	if (!root)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "the file is empty");
	if (root->type != YAML_MAPPING_NODE)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "the top level must be a mapping");
	r = get_str(c, root, "the top level", "current-context", NAME_LEN_MAX, &cur);
	if (r < 0)
		return r;
	if (!cur)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL,
			      "no current-context (set it: kubectl config use-context NAME)");
	kc->context = strdup(cur);
	if (!kc->context)
		return -ENOMEM;
	r = find_entry(c, root, "contexts", "context", cur, "current-context", &ctx);
	if (r < 0)
		return r;
	snprintf(what, sizeof(what), "contexts[\"%s\"].context", cur);
	r = get_str(c, ctx, what, "cluster", NAME_LEN_MAX, &s);
	if (r < 0)
		return r;
	if (!s)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s.cluster is missing", what);
	kc->cluster = strdup(s);
	r = get_str(c, ctx, what, "user", NAME_LEN_MAX, &s);
	if (r < 0)
		return r;
	if (!s)
		return kc_err(c, HPN_E_INVALID_CONFIG, EINVAL, "%s.user is missing", what);
	kc->user = strdup(s);
	if (!kc->cluster || !kc->user)
		return -ENOMEM;
	snprintf(what, sizeof(what), "contexts[\"%s\"]", cur);
	r = find_entry(c, root, "clusters", "cluster", kc->cluster, what, &cl);
	if (r < 0)
		return r;
	r = find_entry(c, root, "users", "user", kc->user, what, &u);
	if (r < 0)
		return r;
	r = load_cluster(c, cl, kc);
	if (r < 0)
		return r;
	return load_user(c, u, kc, inline_secret);
}

int hpn_kubeconfig_load(const char *path, struct hpn_kubeconfig *ret, struct hpn_kube_warn *warn,
			struct hpn_err *err)
{
	struct hpn_kubeconfig kc = { 0 };
	_cleanup_free_ char *buf = NULL;
	struct kc c = { .path = path, .err = err, .warn = warn };
	yaml_parser_t parser;
	yaml_document_t doc;
	bool inline_secret = false;
	const char *slash;
	mode_t mode = 0;
	size_t len = 0;
	int r;

	if (!path || !path[0])
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "kubeconfig: no file given");
	slash = strrchr(path, '/');
	if (slash && hpn_snprintf(c.dir, sizeof(c.dir), "%.*s", (int)(slash - path), path) < 0)
		return kc_err(&c, HPN_E_INVALID_CONFIG, ENAMETOOLONG, "file name too long");
	if (slash == path)
		strcpy(c.dir, "/");
	r = read_file(path, &buf, &len, &mode);
	if (r)
		return kc_err(&c, HPN_E_IO, r, "%s", file_strerror(r));
	r = yaml_lib(err);
	if (r < 0)
		return r;
	if (!y.parser_initialize(&parser))
		return -ENOMEM;
	y.parser_set_input_string(&parser, (const unsigned char *)buf, len);
	if (!y.parser_load(&parser, &doc)) {
		r = kc_err(&c, HPN_E_INVALID_CONFIG, EINVAL,
			   "not valid YAML: %s at line %zu column %zu",
			   parser.problem ? parser.problem : "error", parser.problem_mark.line + 1,
			   parser.problem_mark.column + 1);
		y.parser_delete(&parser);
		return r;
	}
	c.doc = &doc;
	c.path = path;
	kc.path = strdup(path);
	r = kc.path ? load_doc(&c, &kc, &inline_secret) : -ENOMEM;
	y.document_delete(&doc);
	y.parser_delete(&parser);
	if (r < 0) {
		hpn_kubeconfig_free(&kc);
		return r;
	}
	if (inline_secret)
		warn_mode(&c, "kubeconfig", path, mode);
	*ret = kc;
	return 0;
}

void hpn_kube_token_free(char *token)
{
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
}

void hpn_kubeconfig_free(struct hpn_kubeconfig *kc)
{
	if (!kc)
		return;
	free(kc->path);
	free(kc->context);
	free(kc->cluster);
	free(kc->user);
	free(kc->server);
	free(kc->ca);
	free(kc->ca_from);
	hpn_kube_token_free(kc->token);
	free(kc->token_file);
	free(kc->cert);
	if (kc->key) {
		explicit_bzero(kc->key, kc->key_len);
		free(kc->key);
	}
	memset(kc, 0, sizeof(*kc));
}

int hpn_kubeconfig_token(const struct hpn_kubeconfig *kc, char **ret_token,
			 struct hpn_kube_warn *warn, struct hpn_err *err)
{
	struct kc c = { .path = kc->path, .err = err, .warn = warn };
	char *buf = NULL, *start, *end, *t;
	char what[WHAT_MAX];
	size_t len = 0;
	mode_t mode = 0;
	int r;

	if (!kc->token_file) {
		t = kc->token ? strdup(kc->token) : NULL;
		if (kc->token && !t)
			return -ENOMEM;
		*ret_token = t;
		return 0;
	}
	snprintf(what, sizeof(what), "users[\"%s\"].user.tokenFile %s", kc->user, kc->token_file);
	r = read_file(kc->token_file, &buf, &len, &mode);
	if (r)
		return kc_err(&c, HPN_E_IO, r, "%s: %s", what, file_strerror(r));
	warn_mode(&c, "token file", kc->token_file, mode);
	for (start = buf; *start == ' ' || *start == '\t' || *start == '\n' || *start == '\r';
	     start++)
		;
	for (end = buf + len; end > start && (end[-1] == ' ' || end[-1] == '\t' ||
					      end[-1] == '\n' || end[-1] == '\r');
	     end--)
		;
	if (end == start || memchr(start, '\0', (size_t)(end - start))) {
		r = kc_err(&c, HPN_E_INVALID_CONFIG, EINVAL, "%s: %s", what,
			   end == start ? "the file is empty" : "holds a NUL byte");
		explicit_bzero(buf, len);
		free(buf);
		return r;
	}
	t = strndup(start, (size_t)(end - start));
	explicit_bzero(buf, len);
	free(buf);
	if (!t)
		return -ENOMEM;
	r = check_token(&c, what, t);
	if (r < 0) {
		hpn_kube_token_free(t);
		return r;
	}
	*ret_token = t;
	return 0;
}
