/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_INSTALL_H
#define HPN_AGENT_INSTALL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/*
 * The installer of hpn-rdma's DaemonSet (doc/install.md): the agent's
 * `install` and `uninstall` subcommands (install.c), and the plugin's
 * kubeconfig made from the pod's service account, which the agent keeps
 * current while the kubelet rotates the token (kubeconfig.c). No gRPC here:
 * the unit tests link these two files alone.
 */

/* The subcommands: argv[0] is "install" or "uninstall". Exit statuses. */
#define INST_EXIT_KEPT 75 /* uninstall: the binary kept, journals hold NICs (EX_TEMPFAIL) */
int agent_install_main(int argc, char **argv);

/*
 * dfd/name holds exactly data[0..len) with exactly mode afterwards. When it
 * already does, nothing is written (its mtime stays): returns 0. Else a temp
 * file in the same directory (".<name>.hpn-" and a random suffix: no .conf/.conflist/.json
 * ending, so a runtime watching the directory never loads it), written,
 * fsync()ed, renamed over name, and the directory fsync()ed: returns 1. A
 * reader (the runtime, an exec) sees the old file or the new one, never a
 * part; a running program keeps its old inode (no ETXTBSY). On error the temp
 * file is gone and name is as it was.
 */
int inst_file(int dfd, const char *name, const char *data, size_t len, mode_t mode,
	      struct hpn_err *err);

/*
 * The directory src (regular files, symlinks and directories; modes kept)
 * as dfd/name, made whole under a temp name and renamed into place. An
 * existing dfd/name is left alone (a bundle is named for its contents):
 * returns 0; 1 when it was made.
 */
int inst_tree(const char *src, int dfd, const char *name, struct hpn_err *err);

/* rm -rf of dfd/name (never following symlinks); 0 when it is not there. */
int inst_rm_tree(int dfd, const char *name);

/*
 * The ELF program interpreter (PT_INTERP) of the executable open at fd into
 * buf: 1 when it has one, 0 when it has none (static), -ENOEXEC when fd is not
 * a 64-bit ELF file of this machine's byte order.
 */
int inst_elf_interp(int fd, char *buf, size_t len);

/*
 * A bundle's loader path "<root>/<id>/lib/<loader>" into root and id: 1, or
 * 0 when interp is not one (a plugin built for the host's own libraries).
 */
int inst_bundle_of(const char *interp, char root[], size_t root_len, char id[], size_t id_len);

/*
 * Attachments whose journals under state_dir (every network) may hold NICs:
 * any journal not written in an earlier boot. Returns how many (0 when
 * state_dir does not exist), and their names ("<network>/<key>", container
 * IDs cut short) in desc, comma-separated; negative errno when state_dir
 * cannot be read.
 */
int inst_journals_held(const char *state_dir, char *desc, size_t desc_len, struct hpn_err *err);

/* kubeconfig.c */

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
 * when what it holds differs: 1 written, 0 unchanged (see inst_file).
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
