/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_VARS_H
#define HPN_VARS_H

#include <stdbool.h>
#include <stddef.h>

#include "types.h"

/*
 * Ordered KEY=value settings (the NCCL hints: the config's, a profile's, the
 * rendered ones, a result's "nccl.env"), and NCCL's rules for them: it reads
 * KEY=value lines, the first '=' splits, nothing is trimmed or unquoted, and
 * a name or value longer than 1023 bytes is cut (src/misc/param.cc), so every
 * value the project writes is checked against those rules instead.
 */

#define HPN_MAX_VARS	   64
#define HPN_NCCL_NAME_MAX  128	/* ours; NCCL cuts at 1023 */
#define HPN_NCCL_VALUE_MAX 1023 /* NCCL's envValue[1024] */

/* A key appears once. */
struct hpn_vars {
	struct hpn_kv v[HPN_MAX_VARS];
	size_t n;
};

/* Sets key to value: replaces it in place when present, else appends; -E2BIG when full. */
int hpn_vars_set(struct hpn_vars *v, const char *key, const char *value);
const char *hpn_vars_get(const struct hpn_vars *v, const char *key);
/* Replaces dst with a copy of src; dst is left empty on failure. */
int hpn_vars_copy(struct hpn_vars *dst, const struct hpn_vars *src);
/* Same keys with the same values, in any order. */
bool hpn_vars_equal(const struct hpn_vars *a, const struct hpn_vars *b);
void hpn_vars_free(struct hpn_vars *v);

/* "NCCL_" then [A-Z0-9_], at most HPN_NCCL_NAME_MAX bytes. */
bool hpn_nccl_valid_name(const char *s);
/* Printable ASCII without newlines, at most HPN_NCCL_VALUE_MAX bytes. */
bool hpn_nccl_valid_value(const char *s);

#endif
