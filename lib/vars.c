// SPDX-License-Identifier: Apache-2.0
#include "vars.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int hpn_vars_set(struct hpn_vars *v, const char *key, const char *value)
{
	char *val = strdup(value), *k;

	if (!val)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->v[i].key, key)) {
			free(v->v[i].value);
			v->v[i].value = val;
			return 0;
		}
	if (v->n == HPN_MAX_VARS) {
		free(val);
		return -E2BIG;
	}
	k = strdup(key);
	if (!k) {
		free(val);
		return -ENOMEM;
	}
	v->v[v->n].key = k;
	v->v[v->n++].value = val;
	return 0;
}

const char *hpn_vars_get(const struct hpn_vars *v, const char *key)
{
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->v[i].key, key))
			return v->v[i].value;
	return NULL;
}

int hpn_vars_copy(struct hpn_vars *dst, const struct hpn_vars *src)
{
	hpn_vars_free(dst);
	for (size_t i = 0; i < src->n; i++)
		if (hpn_vars_set(dst, src->v[i].key, src->v[i].value) < 0) {
			hpn_vars_free(dst);
			return -ENOMEM;
		}
	return 0;
}

bool hpn_vars_equal(const struct hpn_vars *a, const struct hpn_vars *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const char *v = hpn_vars_get(b, a->v[i].key);

		if (!v || strcmp(v, a->v[i].value))
			return false;
	}
	return true;
}

void hpn_vars_free(struct hpn_vars *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free(v->v[i].key);
		free(v->v[i].value);
	}
	v->n = 0;
}

bool hpn_nccl_valid_name(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n <= 5 || n > HPN_NCCL_NAME_MAX || strncmp(s, "NCCL_", 5))
		return false;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

bool hpn_nccl_valid_value(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (!s || n > HPN_NCCL_VALUE_MAX)
		return false;
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return false;
	return true;
}
