/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_IPAM_H
#define HPN_IPAM_H

#include "cni.h"
#include "conf.h"
#include "err.h"

/*
 * IPAM delegation as the spec's "Delegated plugins" section says: the plugin
 * named ipam.type, looked up in CNI_PATH, run with this process's environment
 * (CNI_COMMAND set to the delegated command) and the same network config on
 * stdin. An IPAM plugin's own CNI error (code, msg, details) is passed through.
 */
int hpn_ipam_exec(const struct hpn_conf *conf, const struct hpn_env *env, const char *command,
		  char **ret_out, size_t *ret_len, struct hpn_err *err);

/* The executable named type in the ':'-separated cni_path; -ENOENT if none. */
int hpn_ipam_find(const char *type, const char *cni_path, char out[4096]);

/* ADD: the allocation, parsed. */
int hpn_ipam_add(const struct hpn_conf *conf, const struct hpn_env *env, struct hpn_result **ret,
		 struct hpn_err *err);
/* DEL and CHECK: success or the plugin's error. */
int hpn_ipam_run(const struct hpn_conf *conf, const struct hpn_env *env, const char *command,
		 struct hpn_err *err);

#endif
