/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_NETNS_H
#define HPN_NETNS_H

#include "err.h"

/*
 * Network namespaces by fd. The plugin is single-threaded, so setns() moves the
 * whole process; every enter is paired with a return to the saved host netns.
 */

/* Opens path O_CLOEXEC and checks it is a network namespace (nsfs, CLONE_NEWNET).
 * -ENOENT when it does not exist (code 3), -EINVAL when it is not a netns (code 4). */
int hpn_netns_open(const char *path, int *ret_fd, struct hpn_err *err);
/* The namespace this process is in now. */
int hpn_netns_current(int *ret_fd);
int hpn_netns_enter(int fd);
/* True when fd and the current netns are the same namespace. */
int hpn_netns_is_current(int fd);

#endif
