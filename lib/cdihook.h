/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_CDIHOOK_H
#define HPN_CDIHOOK_H

/*
 * The createRuntime hook of hpn-rdma's CDI devices (`hpn-rdma cdi-hook`):
 * a container may be given a NIC's RDMA device only when the NIC is attached
 * to the container's own pod. The runtime resolves CDI names with no notion
 * of pods, so a CreateContainer naming another pod's device would otherwise
 * get it; runc runs this hook once the container's namespaces exist and
 * fails CreateContainer with its message.
 */

#include "err.h"

/* The container's pid from the OCI state a hook reads on stdin (code 6 when absent). */
int hpn_cdi_hook_pid(const char *state_json, int *pid, struct hpn_err *err);

/*
 * 0 when NIC id (its device ID: PCI address, else its host name) is in a
 * journal of network under state_dir whose netns is the one process pid is
 * in (<proc_root>/<pid>/ns/net); else code 100 (no pod holds it) or 4 (it is
 * another pod's), naming the NIC and, when known, the pod that holds it.
 */
int hpn_cdi_hook_check(const char *state_dir, const char *network, const char *id, int pid,
		       const char *proc_root, struct hpn_err *err);

#endif
