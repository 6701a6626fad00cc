/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_DRAREGISTER_H
#define HPN_AGENT_DRAREGISTER_H

#include <stdbool.h>

#include "err.h"

struct loop;
struct rpc;

/*
 * The DRA driver's registration with the kubelet's plugin watcher
 * (doc/dra.md, "The kubelet's side"): pluginregistration's Registration
 * service on <kubelet-dir>/plugins_registry/<driver>-reg.sock, type
 * DRAPlugin, the services v1.DRAPlugin, v1beta1.DRAPlugin,
 * v1.DRAResourceHealth and v1alpha1.DRAResourceHealth as its supported
 * versions, the DRAPlugin socket (which serves them all) as endpoint. A
 * refusal (NotifyRegistrationStatus false), or the socket removed, serves it
 * anew, so the kubelet dials it again.
 */
struct drareg;

/* driver and endpoint are copied. */
int drareg_start(struct loop *l, struct rpc *rpc, const char *kubelet_dir, const char *driver,
		 const char *endpoint, struct drareg **ret, struct hpn_err *err);
/* The kubelet's last NotifyRegistrationStatus said registered (false again while served anew). */
bool drareg_registered(const struct drareg *g);
/* At SIGTERM: the server stops, its socket removed. */
void drareg_stop(struct drareg *g);
/* The server is not gone yet. */
bool drareg_serving(const struct drareg *g);
/* After the loop; NULL is fine. */
void drareg_free(struct drareg *g);

#endif
