/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_CNI_H
#define HPN_CNI_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "types.h"

/*
 * The CNI protocol: environment, versions and error objects (results are in
 * result.h). Nothing here touches the host; it turns bytes into structs and
 * structs into bytes.
 */

#define HPN_CNI_VERSION_LATEST "1.1.0"
#define HPN_STDIN_MAX	       (1u << 20)
#define HPN_MAX_ARGS	       32

enum hpn_cmd {
	HPN_CMD_ADD,
	HPN_CMD_DEL,
	HPN_CMD_CHECK,
	HPN_CMD_VERSION,
	HPN_CMD_STATUS,
	HPN_CMD_GC
};

struct hpn_env {
	enum hpn_cmd cmd;
	const char *command; /* as given, for logs */
	const char *container_id;
	const char *netns;
	const char *ifname;
	const char *path; /* CNI_PATH, ':'-separated */
	struct hpn_kv args[HPN_MAX_ARGS];
	size_t n_args;
};

/* Reads and validates the CNI_* variables for the command (spec "Parameters"). */
int hpn_env_parse(struct hpn_env *env, struct hpn_err *err);
void hpn_env_free(struct hpn_env *env);
/* Value of a CNI_ARGS key, or NULL. */
const char *hpn_env_arg(const struct hpn_env *env, const char *key);
/* Parses "K=V;K=V" into env->args; unknown keys fail unless IgnoreUnknown is true. */
int hpn_args_parse(struct hpn_env *env, const char *s, struct hpn_err *err);

/* Versions this plugin speaks, oldest first, NULL-terminated. */
extern const char *const hpn_cni_versions[];
bool hpn_version_supported(const char *v);
/* Compares "a.b.c" strings numerically; unparsable sorts first. */
int hpn_version_cmp(const char *a, const char *b);

/* CNI error object; returns malloc'd JSON text. */
char *hpn_err_render(const struct hpn_err *err, const char *version);
/* VERSION's answer. */
char *hpn_version_render(const char *version);

#endif
