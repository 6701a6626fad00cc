/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_ATTACH_H
#define HPN_ATTACH_H

#include "cni.h"
#include "conf.h"
#include "err.h"

/*
 * The commands as ordered, undoable steps over the mechanisms (link, addr,
 * ipam, store). ADD journals before each step that changes the host; any
 * failure runs the same restore that DEL runs, so the undo logic exists once.
 */

/*
 * ADD: on success *ret is the result to print (prevResult plus this
 * attachment's NICs). When conf->pod_lookup, the pod is read from the
 * Kubernetes API first, before anything on the node changes, and conf's pod
 * decision completed from it (hpn_conf_apply_pod: the only change ADD makes
 * to conf). The NICs are selected and claimed (journalled) under the store
 * lock, which is dropped for the slow steps that follow.
 */
int hpn_add(const struct hpn_env *env, struct hpn_conf *conf, struct hpn_result **ret,
	    struct hpn_err *err);
/* DEL: idempotent; succeeds when the netns or the device is already gone. */
int hpn_del(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err);
/* CHECK: the attachment still looks as ADD left it; an error names what differs. */
int hpn_check(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err);
/* STATUS: the plugin can do ADD now (state store writable, netlink, IPAM plugin present,
 * RDMA netns mode, match drivers loaded and enough free NICs in the pool). */
int hpn_status(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err);

/* GC: undoes every attachment of this network not in cni.dev/valid-attachments
 * and not still being added (every NIC back to the host or its child deleted,
 * IPAM DEL for each NIC's lease, journal removed); goes on past errors. */
int hpn_gc(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err);

#endif
