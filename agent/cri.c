// SPDX-License-Identifier: Apache-2.0
/*
 * The runtime's side of the agent's GC: CRI v1 RuntimeService.ListPodSandbox
 * on the runtime's socket (containerd's by default), through rpc.c like the
 * kubelet's APIs, messages in protobuf-c from agent/proto/cri.proto. Only the
 * sandbox IDs are kept: what the runtime passed to CNI as CNI_CONTAINERID.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cri.h"
#include "cri.pb-c.h"
#include "log.h"
#include "rpc.h"
#include "store.h"
#include "util.h"

/* More sandboxes than a node can run (the kubelet's default limit is 110 pods). */
#define MAX_SANDBOXES 65536

struct cri_ask {
	char *socket;
	cri_sandboxes_fn done;
	void *ud;
};

static void listed(void *ud, int status, const char *msg, const uint8_t *buf, size_t len)
{
	struct cri_ask *q = ud;
	Runtime__V1__ListPodSandboxResponse *r = NULL;
	char why[512];
	char **ids = NULL;
	size_t n = 0;

	if (status != RPC_OK) {
		hpn_msgf(why, sizeof(why), "ListPodSandbox at %s: status %d %s", q->socket, status,
			 msg);
		q->done(q->ud, NULL, 0, why);
		goto out;
	}
	r = runtime__v1__list_pod_sandbox_response__unpack(NULL, len, buf);
	if (!r || r->n_items > MAX_SANDBOXES) {
		hpn_msgf(why, sizeof(why), "ListPodSandbox at %s: %s", q->socket,
			 r ? "more sandboxes than a node runs" : "undecodable reply");
		q->done(q->ud, NULL, 0, why);
		goto out;
	}
	ids = calloc(r->n_items + 1, sizeof(*ids));
	if (!ids) {
		q->done(q->ud, NULL, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < r->n_items; i++) {
		const char *id = r->items[i]->id;

		/* A sandbox ID is a CNI_CONTAINERID: nothing else could match a journal. */
		if (!id || !hpn_valid_container_id(id))
			continue;
		ids[n] = strdup(id);
		if (!ids[n]) {
			hpn_strv_free(ids);
			q->done(q->ud, NULL, 0, "out of memory");
			goto out;
		}
		n++;
	}
	q->done(q->ud, ids, n, NULL);
out:
	if (r)
		runtime__v1__list_pod_sandbox_response__free_unpacked(r, NULL);
	free(q->socket);
	free(q);
}

int cri_list_sandboxes(struct rpc *rpc, const char *socket, int timeout_ms, cri_sandboxes_fn done,
		       void *ud)
{
	Runtime__V1__ListPodSandboxRequest req = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
	struct cri_ask *q = calloc(1, sizeof(*q));
	uint8_t buf[16];
	size_t len;

	if (!q || !(q->socket = strdup(socket))) {
		free(q);
		return -ENOMEM;
	}
	q->done = done;
	q->ud = ud;
	/* gRPC would wait out its deadline on a socket that is not there: say so at once. */
	if (access(socket, F_OK) < 0) {
		char why[512];
		int e = errno;

		hpn_msgf(why, sizeof(why), "the runtime's CRI socket %s: %s", socket, strerror(e));
		done(ud, NULL, 0, why);
		free(q->socket);
		free(q);
		return 0;
	}
	len = runtime__v1__list_pod_sandbox_request__pack(&req, buf);
	if (rpc_unary(rpc, socket, "/runtime.v1.RuntimeService/ListPodSandbox", buf, len,
		      timeout_ms, listed, q) < 0) {
		free(q->socket);
		free(q);
		return -ENOMEM;
	}
	return 0;
}
