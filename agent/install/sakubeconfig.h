/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_SAKUBECONFIG_H
#define HPN_AGENT_SAKUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/*
 * The plugin's kubeconfig (sakubeconfig.c): the token of a ServiceAccount of
 * the plugin's own (allowed to get pods, nothing else), which the agent asks
 * the API for with its own service account (TokenRequest) and renews before
 * it expires; the plugin reads it with lib/kubeconfig.h. The agent's own
 * token never goes into it: the file sits in the CNI conf dir, which other
 * node DaemonSets mount. The agent's own API calls use a kubeconfig of its
 * service account that lives in memory only (kc_agent_memfd).
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
 * The agent's own credential: no longer used for the plugin's file (kept for
 * tests and for a kubeconfig the agent alone reads).
 */
int kc_write(const char *sa_dir, const char *path, struct hpn_err *err);

/* The plugin's ServiceAccount and its token's lifetime (TokenRequest spec.expirationSeconds). */
#define KC_PLUGIN_SA	  "hpn-rdma-plugin"
#define KC_PLUGIN_NS	  "hpn-rdma" /* without sa_dir/namespace */
#define KC_PLUGIN_TTL	  3600u
#define KC_PLUGIN_TTL_MIN 10u	  /* kube-apiserver itself refuses less than 600 */
#define KC_PLUGIN_TTL_MAX 604800u /* 7 days */
/* The first line of every kubeconfig written from the plugin's token. */
#define KC_PLUGIN_MARK "# hpn-rdma-plugin-token: "

/* Which ServiceAccount the plugin's token is for. */
struct kc_plugin {
	char ns[64];	/* a DNS label */
	char name[254]; /* a DNS subdomain */
	unsigned ttl;	/* seconds asked for */
};
/*
 * spec "[NS/]NAME" (NULL: KC_PLUGIN_SA); without NS the agent pod's own
 * namespace, sa_dir/namespace (KC_PLUGIN_NS when there is none). ttl KC_PLUGIN_TTL_MIN..KC_PLUGIN_TTL_MAX.
 * Code 7 for a name that is not one, or no namespace to be had.
 */
int kc_plugin_parse(const char *spec, unsigned ttl, const char *sa_dir, struct kc_plugin *ret,
		    struct hpn_err *err);

/*
 * The agent's own kubeconfig (kc_from_service_account), in a new memfd
 * (0600, close-on-exec): nothing of it on any disk. Read it as
 * "/proc/self/fd/N" (kc_fd_path). *ret_fd on success.
 */
int kc_agent_memfd(const char *sa_dir, int *ret_fd, struct hpn_err *err);
void kc_fd_path(int fd, char buf[32]);

/* The TokenRequest's body: its spec.expirationSeconds. *ret malloc'd. */
int kc_token_request_body(unsigned ttl, char **ret);
/*
 * A TokenRequest's answer (a 200 or 201 body): status.token (visible ASCII,
 * 1..KC_TOKEN_MAX) into *ret_token, status.expirationTimestamp (RFC 3339,
 * UTC) as seconds since the epoch into *ret_expiry (0 when absent). Code
 * HPN_E_KUBE when either is not as the API writes it.
 */
int kc_token_parse(const char *body, size_t len, char **ret_token, long long *ret_expiry,
		   struct hpn_err *err);
/*
 * The plugin's kubeconfig: as kc_render, for the plugin's token (from
 * TokenRequest for p), its first line KC_PLUGIN_MARK and p, the CA and the
 * server from the agent's service account (sa_dir, the environment).
 */
int kc_render_plugin(const char *sa_dir, const struct kc_plugin *p, const char *token,
		     long long expiry, char **ret, struct hpn_err *err);
/* text into path (0600, atomically; its directory made 0700): 1 written, 0 unchanged. */
int kc_write_text(const char *path, const char *text, struct hpn_err *err);
/*
 * path removed unless it is one the plugin's token wrote (its first line
 * KC_PLUGIN_MARK): an older agent's file holds the agent's own token. 1
 * removed, 0 none or kept, negative errno.
 */
int kc_drop_foreign(const char *path);
/* For messages: a refusal of the API (401, 403, 404: RBAC or the ServiceAccount missing). */
bool kc_token_refused(int r);

/*
 * install's step (blocking, lib/kube.h): asks the API for p's token with
 * the service account of sa_dir, then writes path as kc_write_text does.
 * On failure path keeps nothing of the agent's (kc_drop_foreign) and err
 * says why; 1 written, 0 unchanged.
 */
int kc_install_plugin(const char *sa_dir, const struct kc_plugin *p, const char *path,
		      struct hpn_err *err);

/*
 * The agent keeps the kubeconfig current: written at start, and again when
 * the token or CA change. The kubelet updates a projected volume by writing a
 * new hidden directory and renaming the ..data symlink over the old one, so
 * an inotify watch on sa_dir sees IN_MOVED_TO "..data"; a plain directory
 * (tests, a hostPath) sees IN_CLOSE_WRITE or IN_MOVED_TO of the file. Any
 * event makes it render again and write only when the bytes differ.
 */
struct hpn_kube_call;
struct hpn_kube_answer;
struct kc_watch;
/* The caller's API transport: makes call with kubeconfig, then kc_watch_token_done(w, ...). */
typedef int kc_call_fn(void *ud, const char *kubeconfig, const struct hpn_kube_call *call,
		       struct kc_watch *w);
struct kc_watch {
	const char *path;      /* the plugin's kubeconfig; NULL: not kept */
	const char *sa_dir;    /* the service account's files */
	const char *plugin_sa; /* "[NS/]NAME" (NULL: KC_PLUGIN_SA) */
	unsigned plugin_ttl;   /* 0: KC_PLUGIN_TTL */
	kc_call_fn *call;      /* NULL: no API client, the plugin gets no token */
	void *call_ud;
	int fd;		   /* inotify, for the event loop; -1 */
	int timer_fd;	   /* timerfd: the next TokenRequest, for the event loop; -1 */
	int own_fd;	   /* memfd: the agent's own kubeconfig; -1 */
	char own_path[32]; /* "/proc/self/fd/N": the agent's API calls use it */
	bool failing;	   /* the last rewrite of own_fd failed (logged once) */
	bool started, in_flight, refused;
	struct kc_plugin plugin;
	char *token;	       /* the plugin's current token (zeroed when replaced) */
	long long expiry;      /* its status.expirationTimestamp, epoch seconds */
	long long valid_until; /* and on the monotonic clock, ms; 0: no token */
	unsigned backoff_s, failures;
};

/*
 * The agent's kubeconfig made (own_fd, own_path; an error if it cannot be)
 * and the watch opened (w->fd), the first TokenRequest due at once
 * (w->timer_fd).
 */
int kc_watch_start(struct kc_watch *w, struct hpn_err *err);
/* w->fd is readable (or the loop's periodic timer): both kubeconfigs rendered again. */
void kc_watch_event(struct kc_watch *w);
/* w->timer_fd is readable: the plugin's token requested (w->call). */
void kc_watch_timer(struct kc_watch *w);
/*
 * The TokenRequest w->call made ended: r < 0 and err, or the answer a.
 * Writes the plugin's kubeconfig and sets the renewal at 80% of the token's
 * lifetime; a failure is tried again after 1, 2, 4 ... 60 s.
 */
void kc_watch_token_done(struct kc_watch *w, int r, const struct hpn_kube_answer *a,
			 const struct hpn_err *err);
void kc_watch_stop(struct kc_watch *w);

#endif
