/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_DRAHEALTH_H
#define HPN_AGENT_DRAHEALTH_H

#include <stddef.h>
#include <stdint.h>

struct dra_claims;
struct loop;
struct node;
struct rpc_call;
struct sbuf;

/*
 * The DRA driver's device health to the kubelet (doc/dra.md, "Device
 * health"): DRAResourceHealth.NodeWatchResources (v1alpha1 and v1, the same
 * bytes), a stream the kubelet opens on the driver's DRAPlugin socket. Each
 * stream gets the health of every prepared claim's device at once, again
 * whenever it changes (drahealth_changed: a claim prepared or unprepared,
 * the node's hook of a changed device or health verdict) and every resend
 * period (20 s; the kubelet takes a status it has not heard again for 30 s
 * as Unknown). A device's health is the health loop's verdict on the
 * attachment that holds its NIC (broken: UNHEALTHY with what broke; its
 * check could not run: UNKNOWN with why), else the node's own view of the
 * NIC (gone, its RDMA port DOWN: UNHEALTHY), else HEALTHY.
 */
struct drahealth;

/*
 * node and cl are borrowed and outlive h. The unchanged list is resent
 * every 20 s (the environment's HPN_DRA_HEALTH_RESEND_MS, 100 to 20000,
 * shortens it for the tests).
 */
int drahealth_new(struct loop *l, const struct node *node, const struct dra_claims *cl,
		  struct drahealth **ret);
/*
 * The stream method (rpc.h) of either version, which the DRAPlugin server's
 * table names with the driver's ud: version is for the log.
 */
void drahealth_watch(struct drahealth *h, struct rpc_call *c, const uint8_t *req, size_t len,
		     const char *version);
/* The claims or the devices changed: a new list to every stream, if what it says changed. */
void drahealth_changed(struct drahealth *h);
/* The hpn_rdma_dra_health_* families into b (exposition.h), for dra_metrics. */
void drahealth_metrics(struct sbuf *b, const struct drahealth *h);
/* At SIGTERM: nothing more is sent (the server's stop ends the streams). */
void drahealth_stop(struct drahealth *h);
/* After the loop; NULL is fine. */
void drahealth_free(struct drahealth *h);

#endif
