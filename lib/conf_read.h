/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_CONF_READ_H
#define HPN_CONF_READ_H

#include <stddef.h>

#include "err.h"

/*
 * The config's typed member readers, which conf.c and conf_pod.c both use:
 * each error is code 7 (invalid config) naming "<path><key>". cJSON objects
 * are passed as void *, as in util.h.
 */

/* An optional string member (at most 4095 bytes); absent or null leaves *ret untouched. */
int hpn_conf_str(const void *obj, const char *key, const char *path, char **ret,
		 struct hpn_err *err);
/* An optional absolute path without "..", def (may be NULL) when absent. */
int hpn_conf_abs_path(const void *obj, const char *path, const char *key, const char *def,
		      char **ret, struct hpn_err *err);

/* One of the names a member may have, and what it stands for. */
struct hpn_conf_name {
	const char *name;
	int v;
};

/*
 * val, a member read with hpn_conf_str (NULL: absent, *ret untouched), as
 * one of names[0..n): else "<path><key> "<val>" is not one of <the names>".
 */
int hpn_conf_pick(const char *path, const char *key, const char *val,
		  const struct hpn_conf_name *names, size_t n, int *ret, struct hpn_err *err);

#endif
