/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_INSTALL_H
#define HPN_AGENT_INSTALL_H

#include <stddef.h>

#include "err.h"

/*
 * hpn-rdma's one installer (doc/install.md): the agent's `install` and
 * `uninstall` subcommands, for the DaemonSet (from the image, through
 * hostPath mounts) and, with a manifest (--prefix, --destdir), for node
 * images and nodes beside the .deb (scripts/install.sh runs it). It writes
 * the plugin's kubeconfig with sakubeconfig.h's kc_write; files go in place
 * with util.h's hpn_install_file. No gRPC here: the unit tests link
 * install.c and sakubeconfig.c alone, and the subcommands run before the
 * agent starts any of it.
 */

/* The subcommands: argv[0] is "install" or "uninstall". Exit statuses. */
#define INST_EXIT_KEPT 75 /* uninstall: the binary kept, journals hold NICs (EX_TEMPFAIL) */
int agent_install_main(int argc, char **argv);

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

/* The SHA-256 of data[0..len) in lower-case hex, as sha256sum(1) prints it (the manifest's). */
#define INST_SHA256_HEX 65
void inst_sha256(const void *data, size_t len, char out[INST_SHA256_HEX]);

#endif
