/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_KUBECONFIG_H
#define HPN_KUBECONFIG_H

#include <stddef.h>

#include "err.h"

/*
 * A kubeconfig file (the format kubectl reads, clientcmd v1 Config), reduced to
 * what one request of the current context needs. Parsed with libyaml, which
 * is dlopen()ed here on first use (see dl.h).
 */

#define HPN_KUBECONFIG_MAX (1 << 20) /* the kubeconfig and each file it names */
#define HPN_KUBE_TOKEN_MAX 16384     /* a bearer token (service account tokens are ~1 KB) */
#define HPN_KUBE_WARN_MAX  512

/* The lookup's one time budget, retries included (config kubernetes.timeout). */
#define HPN_KUBE_TIMEOUT_MS_DEFAULT 5000
#define HPN_KUBE_TIMEOUT_MS_MAX	    60000

/*
 * Things the caller should log (lib never prints): "; "-separated, cut at
 * HPN_KUBE_WARN_MAX. Empty when there is nothing to say.
 */
struct hpn_kube_warn {
	char msg[HPN_KUBE_WARN_MAX];
};

/*
 * The current context of a kubeconfig. Every certificate and key is held in
 * memory as PEM (read from its file, or decoded from its -data field), so the
 * request writes nothing to disk. Names are for messages.
 */
struct hpn_kubeconfig {
	char *path;    /* the kubeconfig file, as given */
	char *context; /* current-context */
	char *cluster; /* the context's cluster and user names */
	char *user;
	char *server; /* "https://host[:port][/prefix]", without a trailing '/' */
	char *ca;     /* certificate-authority(-data): the only CAs trusted */
	size_t ca_len;
	char *ca_from;	  /* "certificate-authority /abs/path" or "certificate-authority-data" */
	char *token;	  /* user.token, or NULL */
	char *token_file; /* user.tokenFile (resolved as kubectl does), read on every request */
	char *cert;	  /* client-certificate(-data) PEM, or NULL */
	size_t cert_len;
	char *key; /* client-key(-data) PEM, or NULL (zeroed when freed) */
	size_t key_len;
};

/*
 * Reads the kubeconfig at path: current-context, then that context's cluster
 * and user. Relative file names inside are taken relative to the kubeconfig's
 * directory, as kubectl does; the files are read now, except tokenFile (read
 * by hpn_kubeconfig_token on every request: tokens rotate).
 * Refused with a message naming the file and the field: no current-context, a
 * context naming a missing cluster or user, a server that is not https://, no
 * certificate-authority(-data), insecure-skip-tls-verify: true, tls-server-name
 * and proxy-url, exec and auth-provider users, basic auth and impersonation, a
 * user with no token, tokenFile or client certificate, a client certificate
 * without its key. Codes: 5 when a file cannot be read, 7 for its content,
 * HPN_E_KUBE when libyaml cannot be loaded.
 * warn (may be NULL) gets a line when a file holding a secret (client-key, or
 * the kubeconfig itself with an inline token or key) is readable by group or
 * others. *ret is written only on success; free it with hpn_kubeconfig_free.
 */
int hpn_kubeconfig_load(const char *path, struct hpn_kubeconfig *ret, struct hpn_kube_warn *warn,
			struct hpn_err *err);
void hpn_kubeconfig_free(struct hpn_kubeconfig *kc);

/*
 * The bearer token for one request: tokenFile read now (leading and trailing
 * blanks dropped, as client-go does), which wins over an inline token as in
 * client-go; else the inline token; *ret_token = NULL when the user has
 * neither (client certificate only). A token must be 1..HPN_KUBE_TOKEN_MAX
 * visible ASCII characters (it goes into a header). warn gets a line when the
 * token file is readable by group or others. Free *ret_token with
 * hpn_kube_token_free (it is zeroed).
 */
int hpn_kubeconfig_token(const struct hpn_kubeconfig *kc, char **ret_token,
			 struct hpn_kube_warn *warn, struct hpn_err *err);
void hpn_kube_token_free(char *token);

/* Appends a warning (see struct hpn_kube_warn). */
void hpn_kube_warn_add(struct hpn_kube_warn *warn, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
