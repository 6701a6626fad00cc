/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_TEST_DRAPLAN_H
#define HPN_TEST_DRAPLAN_H

/*
 * The publisher's round in the unit tier: the API's list holding exactly a
 * plan's slices, and the plan of node "n1" from a list (draslice.h).
 */

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "draslice.h"

/* The API's list holding exactly plan p's slices (resourceVersion "7" each). */
static inline char *list_of(const struct hpn_dra_slices_plan *p)
{
	cJSON *list = cJSON_CreateObject(), *items = cJSON_AddArrayToObject(list, "items");
	char *body;

	for (size_t i = 0; i < p->count; i++) {
		cJSON *c = cJSON_Duplicate(p->v[i], true);

		cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(c, "metadata"),
					"resourceVersion", "7");
		cJSON_AddItemToArray(items, c);
	}
	body = cJSON_PrintUnformatted(list);
	cJSON_Delete(list);
	return body;
}

/* The plan of node n1's pool nics[0..n) from the list body, floor the lowest generation. */
static inline int plan(const char *body, const struct hpn_dra_nic *nics, size_t n, long floor,
		       struct hpn_dra_slices_plan *p)
{
	struct hpn_err err = { 0 };
	int r = hpn_dra_slices_plan(body, strlen(body), "the slices", HPN_DRA_DRIVER, "n1", nics, n,
				    floor, p, &err);

	if (r < 0)
		fprintf(stderr, "\tplan: %s\n", err.msg);
	return r;
}

#endif
