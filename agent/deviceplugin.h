/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_DEVICEPLUGIN_H
#define HPN_AGENT_DEVICEPLUGIN_H

#include <stdbool.h>

#include "err.h"

struct cdispecs;
struct loop;
struct node;
struct rpc;
struct sbuf;

/*
 * The kubelet device plugin for the pool's NICs (doc/agent.md): the
 * DevicePlugin service on <kubelet-dir>/device-plugins/<endpoint>,
 * Registration.Register as a client, and the kubelet's restarts (it sweeps
 * device-plugins/ and makes kubelet.sock anew): served anew, registered
 * again. The devices are the node's (node.h).
 */
struct dp_opts {
	const char *kubelet_dir;
	const char *resource; /* "<domain>/<name>" */
	const char *endpoint; /* our socket's name in device-plugins/ */
	const char *dev_root; /* where Allocate's host device paths are: /dev */
	int retry_s;	      /* Register again this often until it took */
	struct cdispecs *cdi; /* the agent's CDI specs (cdispecs.h); NULL: off */
};

struct deviceplugin;

int deviceplugin_start(struct loop *l, struct rpc *rpc, struct node *node, const struct dp_opts *o,
		       struct deviceplugin **ret, struct hpn_err *err);
/* The device list changed: every ListAndWatch stream gets it. */
void deviceplugin_broadcast(struct deviceplugin *dp);
/* A new pool: serve anew, register again. */
void deviceplugin_restart(struct deviceplugin *dp);
/* At SIGTERM: the server stops (its socket removed), nothing is registered again. */
void deviceplugin_stop(struct deviceplugin *dp);
/* Its server is not gone yet (stopping takes the gRPC core a moment). */
bool deviceplugin_serving(const struct deviceplugin *dp);
/*
 * Its metrics_render_fn (metrics.h; ud: the deviceplugin): whether it is
 * registered, and the pool's devices as it lists them to the kubelet.
 */
void deviceplugin_metrics(struct sbuf *b, void *ud);
/* After the loop; a server still there has its socket removed at least. */
void deviceplugin_free(struct deviceplugin *dp);

#endif
