/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_CRI_H
#define HPN_AGENT_CRI_H

#include <stddef.h>

struct rpc;

/*
 * The runtime's CRI, as a client: RuntimeService.ListPodSandbox on the
 * runtime's socket. done(ud, ids, n, error) on the loop: the sandbox IDs
 * (NULL-terminated, the callee's to free), or error (ids NULL) when the
 * runtime cannot say. -ENOMEM when the call could not be made.
 */
typedef void (*cri_sandboxes_fn)(void *ud, char **ids, size_t n, const char *error);
int cri_list_sandboxes(struct rpc *rpc, const char *socket, int timeout_ms, cri_sandboxes_fn done,
		       void *ud);

#endif
