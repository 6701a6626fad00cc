// SPDX-License-Identifier: Apache-2.0
#include "cni.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

const char *const hpn_cni_versions[] = { "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0", NULL };

static const struct {
	const char *name;
	enum hpn_cmd cmd;
} commands[] = {
	{ "ADD", HPN_CMD_ADD },		{ "DEL", HPN_CMD_DEL },	      { "CHECK", HPN_CMD_CHECK },
	{ "VERSION", HPN_CMD_VERSION }, { "STATUS", HPN_CMD_STATUS }, { "GC", HPN_CMD_GC },
};

/* CNI_ARGS keys the plugin understands; others need IgnoreUnknown (spec convention). */
static const char *const known_args[] = {
	"IgnoreUnknown", "K8S_POD_NAMESPACE",
	"K8S_POD_NAME",	 "K8S_POD_INFRA_CONTAINER_ID",
	"K8S_POD_UID",	 NULL,
};

static bool str_in(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(s, *list))
			return true;
	return false;
}

bool hpn_version_supported(const char *v)
{
	return v && str_in(v, hpn_cni_versions);
}

static int version_parts(const char *v, long out[3])
{
	char *end;

	for (int i = 0; i < 3; i++) {
		if (!*v || *v < '0' || *v > '9')
			return -EINVAL;
		out[i] = strtol(v, &end, 10);
		v = end;
		if (i < 2 && *v++ != '.')
			return -EINVAL;
	}
	return *v ? -EINVAL : 0;
}

int hpn_version_cmp(const char *a, const char *b)
{
	long pa[3], pb[3];
	int ea = version_parts(a, pa), eb = version_parts(b, pb);

	if (ea || eb)
		return ea && eb ? 0 : (ea ? -1 : 1);
	for (int i = 0; i < 3; i++)
		if (pa[i] != pb[i])
			return pa[i] < pb[i] ? -1 : 1;
	return 0;
}

static int parse_bool(const char *s, bool *ret)
{
	if (!strcasecmp(s, "1") || !strcasecmp(s, "true")) {
		*ret = true;
		return 0;
	}
	if (!strcasecmp(s, "0") || !strcasecmp(s, "false")) {
		*ret = false;
		return 0;
	}
	return -EINVAL;
}

int hpn_args_parse(struct hpn_env *env, const char *s, struct hpn_err *err)
{
	_cleanup_free_ char *copy = NULL;
	bool ignore_unknown = false;
	char *save = NULL, *tok;

	if (!s || !*s)
		return 0;
	if (strlen(s) > 8192)
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
				   "CNI_ARGS is longer than 8192 bytes");
	copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): copy is _cleanup_free_, unseen by the analyzer */
	for (tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(tok, '=');

		if (!eq || eq == tok)
			return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
					   "CNI_ARGS: \"%s\" is not KEY=VALUE", tok);
		if (env->n_args == HPN_MAX_ARGS)
			return hpn_err_set(err, HPN_E_INVALID_ENV, E2BIG,
					   "CNI_ARGS: more than %d pairs", HPN_MAX_ARGS);
		*eq = '\0';
		for (size_t i = 0; i < env->n_args; i++)
			if (!strcmp(env->args[i].key, tok))
				return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
						   "CNI_ARGS: key %s given twice", tok);
		env->args[env->n_args].key = strdup(tok);
		env->args[env->n_args].value = strdup(eq + 1);
		if (!env->args[env->n_args].key || !env->args[env->n_args].value) {
			free(env->args[env->n_args].key);
			free(env->args[env->n_args].value);
			return -ENOMEM;
		}
		env->n_args++;
		if (!strcmp(tok, "IgnoreUnknown") && parse_bool(eq + 1, &ignore_unknown) < 0)
			return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
					   "CNI_ARGS: IgnoreUnknown=%s is not a boolean", eq + 1);
	}
	if (ignore_unknown)
		return 0;
	for (size_t i = 0; i < env->n_args; i++)
		if (!str_in(env->args[i].key, known_args))
			return hpn_err_set(
				err, HPN_E_INVALID_ENV, EINVAL,
				"CNI_ARGS: unknown key %s (set IgnoreUnknown=1 to allow)",
				env->args[i].key);
	return 0;
}

const char *hpn_env_arg(const struct hpn_env *env, const char *key)
{
	for (size_t i = 0; i < env->n_args; i++)
		if (!strcmp(env->args[i].key, key))
			return env->args[i].value;
	return NULL;
}

void hpn_env_free(struct hpn_env *env)
{
	for (size_t i = 0; i < env->n_args; i++) {
		free(env->args[i].key);
		free(env->args[i].value);
	}
	env->n_args = 0;
}

static const char *env_get(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

int hpn_env_parse(struct hpn_env *env, struct hpn_err *err)
{
	const char *cmd = env_get("CNI_COMMAND");
	bool need_netns, found = false;

	memset(env, 0, sizeof(*env));
	if (!cmd)
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL, "CNI_COMMAND is not set");
	for (size_t i = 0; i < HPN_ARRAY_SIZE(commands); i++) {
		if (!strcmp(cmd, commands[i].name)) {
			env->cmd = commands[i].cmd;
			found = true;
		}
	}
	if (!found)
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL, "CNI_COMMAND \"%s\" is unknown",
				   cmd);
	env->command = cmd;
	/* VERSION, STATUS and GC take no per-container parameters. */
	if (env->cmd == HPN_CMD_VERSION)
		return 0;
	env->path = env_get("CNI_PATH");
	if (env->cmd == HPN_CMD_STATUS || env->cmd == HPN_CMD_GC)
		return 0;

	env->container_id = env_get("CNI_CONTAINERID");
	env->netns = env_get("CNI_NETNS");
	env->ifname = env_get("CNI_IFNAME");
	if (!env->container_id)
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL, "CNI_CONTAINERID is not set");
	if (!hpn_valid_container_id(env->container_id))
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
				   "CNI_CONTAINERID \"%.64s\" has characters outside "
				   "[A-Za-z0-9_.-] or does not start alphanumeric",
				   env->container_id);
	/* DEL must work after the namespace is gone: CNI_NETNS is optional there. */
	need_netns = env->cmd != HPN_CMD_DEL;
	if (need_netns && !env->netns)
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL, "CNI_NETNS is not set");
	if (env->netns && (env->netns[0] != '/' || strlen(env->netns) > 4095))
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
				   "CNI_NETNS \"%.64s\" is not an absolute path", env->netns);
	if (!env->ifname)
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL, "CNI_IFNAME is not set");
	if (!hpn_valid_ifname(env->ifname))
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
				   "CNI_IFNAME \"%.64s\" is not a valid interface name (1-15 "
				   "bytes, not . or .., no / : or space)",
				   env->ifname);
	if (!env->path && env->cmd != HPN_CMD_DEL)
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL, "CNI_PATH is not set");
	return hpn_args_parse(env, getenv("CNI_ARGS"), err);
}

/* ---- results ---- */

char *hpn_err_render(const struct hpn_err *err, const char *version)
{
	cJSON *root = cJSON_CreateObject();
	char msg[HPN_ERR_MSG], details[HPN_ERR_DETAILS];

	if (!root)
		return NULL;
	/* Messages quote what they were given; the error object stays valid UTF-8. */
	hpn_utf8_sanitize(msg, err->msg[0] ? err->msg : "internal error", sizeof(msg));
	hpn_utf8_sanitize(details, err->details, sizeof(details));
	cJSON_AddStringToObject(root, "cniVersion",
				hpn_version_supported(version) ? version : HPN_CNI_VERSION_LATEST);
	cJSON_AddNumberToObject(root, "code", err->code ? err->code : HPN_E_INTERNAL);
	cJSON_AddStringToObject(root, "msg", msg);
	if (details[0])
		cJSON_AddStringToObject(root, "details", details);
	return hpn_json_print(root);
}

char *hpn_version_render(const char *version)
{
	cJSON *root = cJSON_CreateObject(), *arr;

	if (!root)
		return NULL;
	cJSON_AddStringToObject(root, "cniVersion",
				hpn_version_supported(version) ? version : HPN_CNI_VERSION_LATEST);
	arr = cJSON_AddArrayToObject(root, "supportedVersions");
	for (size_t i = 0; arr && hpn_cni_versions[i]; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(hpn_cni_versions[i]));
	return hpn_json_print(root);
}
