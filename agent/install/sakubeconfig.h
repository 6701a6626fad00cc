/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_SAKUBECONFIG_H
#define HPN_AGENT_SAKUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/*
 * The plugin's kubeconfig made from the agent pod's service account, kept
 * current while the kubelet rotates the token (sakubeconfig.c); the plugin
 * reads it with lib/kubeconfig.h.
 */

#define KC_TOKEN_MAX ((size_t)16 * 1024)
#define KC_CA_MAX    ((size_t)256 * 1024)

/*
 * The plugin's kubeconfig: server https://host:port (an IPv6 host in
 * brackets), certificate-authority-data the CA bundle in base64, the token
 * inline; one context, current. host is an IP address or a DNS name, port
 * 1-65535, the token visible ASCII (blanks at its ends dropped, as client-go
 * does), the CA PEM. *ret (malloc'd) on success.
 */
int kc_render(const char *host, const char *port, const char *token, size_t token_len,
	      const char *ca, size_t ca_len, char **ret, struct hpn_err *err);

/*
 * The kubeconfig of the pod's service account as the API's in-cluster config
 * has it: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT from the
 * environment, sa_dir/token and sa_dir/ca.crt (the projected volume at
 * /var/run/secrets/kubernetes.io/serviceaccount).
 */
int kc_from_service_account(const char *sa_dir, char **ret, struct hpn_err *err);

/*
 * Writes path (mode 0600, its directory made 0700 when missing) from sa_dir
 * when what it holds differs: 1 written, 0 unchanged (see hpn_install_file).
 */
int kc_write(const char *sa_dir, const char *path, struct hpn_err *err);

/*
 * The agent keeps the kubeconfig current: written at start, and again when
 * the token or CA change. The kubelet updates a projected volume by writing a
 * new hidden directory and renaming the ..data symlink over the old one, so
 * an inotify watch on sa_dir sees IN_MOVED_TO "..data"; a plain directory
 * (tests, a hostPath) sees IN_CLOSE_WRITE or IN_MOVED_TO of the file. Any
 * event makes it render again and write only when the bytes differ.
 */
struct kc_watch {
	const char *path;   /* the kubeconfig; NULL: not kept */
	const char *sa_dir; /* the service account's files */
	int fd;		    /* inotify, for the event loop; -1 */
	bool failing;	    /* the last try failed (logged once until it works again) */
};

/* Writes once and opens the watch (w->fd). A first write that fails is an error. */
int kc_watch_start(struct kc_watch *w, struct hpn_err *err);
/* w->fd is readable (or the loop's periodic timer): render, write when it changed. */
void kc_watch_event(struct kc_watch *w);
void kc_watch_stop(struct kc_watch *w);

#endif
