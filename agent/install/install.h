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

#endif
