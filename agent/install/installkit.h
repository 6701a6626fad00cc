/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_INSTALLKIT_H
#define HPN_AGENT_INSTALLKIT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/*
 * What both modes of hpn-rdma-agent install and uninstall share (install.c:
 * the DaemonSet's; bake.c: with a manifest): their options, trees and
 * bundles, the plugin and the conflist read and checked, the journals that
 * hold NICs, and how a step is said.
 */

#define PLUGIN_NAME   "hpn-rdma"
#define PLUGIN_MAX    (64u << 20)
#define CONF_MAX      (1u << 20)
#define WAIT_RECHECK  10000 /* ms: journals are re-read this often besides inotify */
#define DEFAULT_SA    "/var/run/secrets/kubernetes.io/serviceaccount"
#define DEFAULT_STATE HPN_DEFAULT_STATE_DIR

struct opts {
	bool uninstall;
	const char *plugin, *bin_dir, *conf, *conf_dir, *kubeconfig, *sa_dir, *state_dir;
	const char *plugin_sa;	/* the plugin's ServiceAccount, "[NS/]NAME" (NULL: the default) */
	unsigned plugin_ttl;	/* its token's lifetime asked for (0: the default) */
	const char *bundle_dir; /* where the bundle root is seen here; NULL: at its own path */
	bool wait, check, force, no_conf, no_plugin;
	/* With a manifest (image bakers, or a node beside the .deb): --prefix or --destdir. */
	bool manifest;
	const char *destdir, *prefix, *man, *examples, *netns_mode;
	bool apply_now, dry_run;
};

/* The options of argv (argv[0]: "install" or "uninstall"): -1 to go on, else the exit status. */
int inst_parse(int argc, char **argv, struct opts *o);
/* An absolute path without "." or ".." components, "//" or a trailing slash. */
bool inst_clean_path(const char *p);
/* The conflist's hpn-rdma entry, parsed as an ADD would see it; its stateDir and kubeconfig. */
int inst_conf_read(const char *path, char **ret_text, size_t *ret_len, char **ret_state,
		   char **ret_kubeconfig, struct hpn_err *err);
/* The directory at path (made 0755 first when create), open; code 5 naming it. */
int inst_open_dir(const char *path, bool create, struct hpn_err *err);
/* "<what> <dir>/<name>" and why, on stdout: what each step did. */
void inst_say(const char *what, const char *dir, const char *name, const char *why);
/* Removes the bundles under root other than keep1 and keep2; how many it removed. */
int inst_prune_bundles(const char *root, const char *keep1, const char *keep2, const char *why);
/*
 * The plugin at path, read whole into *ret_bin (the caller frees it), checked
 * to be an executable of this machine; 1 with root, id and src (where its
 * bundle is seen here) when it uses a bundle, else 0.
 */
int inst_plugin_read(const char *path, char **ret_bin, size_t *ret_len, char root[PATH_MAX],
		     char id[NAME_MAX + 1], char src[PATH_MAX], struct hpn_err *err);
/* The bundle (root and id) the executable at dfd/name uses; 0 when none. */
int inst_bundle_of_file(int dfd, const char *name, char root[PATH_MAX], char id[NAME_MAX + 1]);

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

#endif
