// SPDX-License-Identifier: Apache-2.0
/*
 * hpn_args_parse: CNI_ARGS ("K=V;K=V", from the runtime's environment) into
 * struct hpn_env, then lookups by every parsed key.
 */
#include <string.h>
#include <strings.h>

#include "cni.h"
#include "fuzz.h"
#include "roundtrip.h"

static const char *const known[] = { "IgnoreUnknown", "K8S_POD_NAMESPACE", "K8S_POD_NAME",
				     "K8S_POD_INFRA_CONTAINER_ID", "K8S_POD_UID" };

static bool is_known(const char *key)
{
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(key, known[i]))
			return true;
	return false;
}

static bool is_true(const char *v)
{
	return v && (!strcasecmp(v, "1") || !strcasecmp(v, "true"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hpn_env env;
	struct hpn_err err = { 0 };
	char *s = malloc(size + 1);
	int r;

	FUZZ_ASSERT(s);
	memcpy(s, data, size);
	s[size] = '\0';
	memset(&env, 0, sizeof(env));
	r = hpn_args_parse(&env, s, &err);
	fuzz_err_matches(r, &err);
	FUZZ_ASSERT(env.n_args <= HPN_MAX_ARGS);
	if (r == 0) {
		for (size_t i = 0; i < env.n_args; i++) {
			const char *k = env.args[i].key, *v = env.args[i].value;

			FUZZ_ASSERT(k && v);
			/* A key is what stands before the first '=' of a ';'-separated pair. */
			FUZZ_ASSERT(k[0] && !strpbrk(k, "=;") && !strchr(v, ';'));
			/* Keys are unique, so a lookup finds this very pair. */
			FUZZ_ASSERT(hpn_env_arg(&env, k) == v);
			FUZZ_ASSERT(is_known(k) || is_true(hpn_env_arg(&env, "IgnoreUnknown")));
		}
		FUZZ_ASSERT(!hpn_env_arg(&env, ""));
	}
	hpn_env_free(&env);
	FUZZ_ASSERT(env.n_args == 0);
	free(s);
	return 0;
}
