/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_TEST_TJSON_H
#define HPN_TEST_TJSON_H

/*
 * Looking into rendered JSON from assertions: jget(root, "ips.1.interface")
 * walks object keys and array indexes separated by '.'; NULL when any step is
 * missing, so a missing member fails the check that uses it.
 */

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline const cJSON *jget(const cJSON *root, const char *path)
{
	char buf[256], *save = NULL, *tok;
	const cJSON *cur = root;

	if (!root || strlen(path) >= sizeof(buf))
		return NULL;
	strcpy(buf, path);
	for (tok = strtok_r(buf, ".", &save); tok && cur; tok = strtok_r(NULL, ".", &save)) {
		char *end;
		long idx = strtol(tok, &end, 10);

		if (cJSON_IsArray(cur) && *tok && !*end)
			cur = cJSON_GetArrayItem(cur, (int)idx);
		else if (cJSON_IsObject(cur))
			cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
		else
			cur = NULL;
	}
	return cur;
}

/* The string at path, or NULL when it is absent or not a string. */
static inline const char *jstr(const cJSON *root, const char *path)
{
	const cJSON *v = jget(root, path);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The number at path, or -12345 (no field here uses it) when absent or not a number. */
#define JNONE (-12345)
static inline long long jnum(const cJSON *root, const char *path)
{
	const cJSON *v = jget(root, path);

	return cJSON_IsNumber(v) ? (long long)v->valuedouble : JNONE;
}

static inline bool jhas(const cJSON *root, const char *path)
{
	return jget(root, path) != NULL;
}

static inline int jsize(const cJSON *root, const char *path)
{
	const cJSON *v = jget(root, path);

	return cJSON_IsArray(v) || cJSON_IsObject(v) ? cJSON_GetArraySize(v) : -1;
}

#endif
