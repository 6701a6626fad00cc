// SPDX-License-Identifier: Apache-2.0
/*
 * The ResourceSlice publisher's round (agent/dra/draslices.c) as the API's
 * answer decides it (hpn_dra_slices_plan, agent/dra/model/draslice.c): the
 * body of GET /apis/resource.k8s.io/v1/resourceslices?fieldSelector=
 * spec.nodeName=gpu-node-17,spec.driver=rdma.hpn.example.com as a hostile or
 * broken API server, or other writers of slices, may make it.
 *
 * Input: a byte (bits 0-1: the pool's size, 0, 1, 3 or 130 NICs, two
 * slices; bits 2-3: the generation published last, 0, 1, 7 or 10^15 - 1),
 * then the list's body.
 *
 * Checked, beyond the sanitizers: refused, code 109 naming what was listed,
 * exactly when the answer is not JSON with items an array of at most 64;
 * else the pool's slices, hpn_dra_slice_split of them, each named once, of
 * the driver, node and pool, at one generation: either nothing to write,
 * when the listed items are exactly the pool's slices (by name, spec for
 * spec) at the highest generation listed, at least the last one; or the
 * slices at a generation above the last one and every one listed (at most
 * 10^15 - 1, what it reads: found by this target, the publisher wrote 10^15
 * after 10^15 - 1 and, not reading it back, wrote again every round), each
 * to be written over the resourceVersion listed under its name (none: made
 * anew), then the listed slices before the first without a name that are
 * not ours deleted, in order, and never one of ours. And the round
 * converges: the API then holding just what was written (a resourceVersion
 * each), the next round, with this generation as the last, writes nothing.
 */
#include <errno.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "draslice.h"
#include "fuzz.h"
#include "util.h"

#define DRV  "rdma.hpn.example.com"
#define NODE "gpu-node-17"
#define WHAT "the ResourceSlices of node " NODE " and driver " DRV

static struct hpn_dra_nic nics[130];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	for (size_t i = 0; i < HPN_ARRAY_SIZE(nics); i++) {
		struct hpn_dra_nic *n = &nics[i];

		snprintf(n->ifname, sizeof(n->ifname), "ens%zuf%zu", i / 2, i % 2);
		snprintf(n->pci, sizeof(n->pci), "0000:%02zx:00.%zu", 0x18 + i / 2, i % 2);
		snprintf(n->rdma, sizeof(n->rdma), "mlx5_%zu", i);
		snprintf(n->link_layer, sizeof(n->link_layer), "Ethernet");
		snprintf(n->transport, sizeof(n->transport), "roce");
		snprintf(n->driver, sizeof(n->driver), "mlx5_core");
		n->speed_mbps = 400000;
		n->pos.numa = (int)(i % 2);
		n->rail = (unsigned int)i;
	}
	return 0;
}

static const cJSON *at(const cJSON *o, const char *a, const char *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);

	return b ? cJSON_GetObjectItemCaseSensitive(v, b) : v;
}

/* A listed item's generation as the publisher reads it (0: none it takes). */
static long listed_gen(const cJSON *it)
{
	const cJSON *g = at(at(it, "spec", "pool"), "generation", NULL);

	return cJSON_IsNumber(g) && g->valuedouble >= 0 &&
			       g->valuedouble <= (double)HPN_DRA_GENERATION_MAX
		       ? (long)g->valuedouble
		       : 0;
}

static bool ours(const struct hpn_dra_slices_plan *p, const char *name)
{
	for (size_t i = 0; i < p->count; i++)
		if (!strcmp(hpn_dra_slice_meta(p->v[i], "name"), name))
			return true;
	return false;
}

static const cJSON *item_named(const cJSON *items, const char *name)
{
	const cJSON *it;

	cJSON_ArrayForEach (it, items)
		if (hpn_dra_slice_meta(it, "name") && !strcmp(hpn_dra_slice_meta(it, "name"), name))
			return it;
	return NULL;
}

/* The pool's slices at p->gen, as the render makes them. */
static void check_slices(const struct hpn_dra_slices_plan *p, size_t n)
{
	FUZZ_ASSERT(p->count == hpn_dra_slice_split(n) && p->v && p->gen > 0);
	for (size_t i = 0; i < p->count; i++) {
		const cJSON *s = p->v[i], *pool = at(s, "spec", "pool");
		const char *name = hpn_dra_slice_meta(s, "name");

		FUZZ_ASSERT(name);
		for (size_t k = 0; k < i; k++)
			FUZZ_ASSERT(strcmp(hpn_dra_slice_meta(p->v[k], "name"), name));
		FUZZ_ASSERT(!strcmp(cJSON_GetStringValue(at(s, "spec", "driver")), DRV) &&
			    !strcmp(cJSON_GetStringValue(at(s, "spec", "nodeName")), NODE) &&
			    !strcmp(cJSON_GetStringValue(at(pool, "name", NULL)), NODE));
		FUZZ_ASSERT(at(pool, "generation", NULL)->valuedouble == (double)p->gen &&
			    at(pool, "resourceSliceCount", NULL)->valuedouble == (double)p->count);
	}
}

/* The API holding exactly what p wrote: the next round writes nothing. */
static void converges(const struct hpn_dra_slices_plan *p, size_t n)
{
	struct hpn_dra_slices_plan next;
	struct hpn_err err = { 0 };
	cJSON *list = cJSON_CreateObject(), *items = cJSON_AddArrayToObject(list, "items");
	char *body;

	FUZZ_ASSERT(items);
	for (size_t i = 0; i < p->count; i++) {
		cJSON *s = cJSON_Duplicate(p->v[i], true);

		FUZZ_ASSERT(s &&
			    cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(s, "metadata"),
						    "resourceVersion", "4242"));
		cJSON_AddItemToArray(items, s);
	}
	body = cJSON_PrintUnformatted(list);
	FUZZ_ASSERT(body);
	FUZZ_ASSERT(hpn_dra_slices_plan(body, strlen(body), WHAT, DRV, NODE, nics, n, p->gen, &next,
					&err) == 0);
	FUZZ_ASSERT(!next.write && next.gen == p->gen && next.count == p->count && !next.n_del);
	hpn_dra_slices_plan_free(&next);
	cJSON_free(body);
	cJSON_Delete(list);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t sizes[] = { 0, 1, 3, 130 };
	static const long floors[] = { 0, 1, 7, HPN_DRA_GENERATION_MAX };
	struct hpn_dra_slices_plan p;
	struct hpn_err err = { 0 };
	const cJSON *items, *it;
	cJSON *list;
	size_t n, d = 0;
	long floor, max_gen = 0;
	int r;

	if (size < 1)
		return 0;
	n = sizes[data[0] & 3];
	floor = floors[(data[0] >> 2) & 3];
	r = hpn_dra_slices_plan((const char *)data + 1, size - 1, WHAT, DRV, NODE, nics, n, floor,
				&p, &err);
	/* The list as the publisher must read it: cJSON's own reading of the text. */
	list = cJSON_ParseWithLength((const char *)data + 1, size - 1);
	items = at(list, "items", NULL);
	if (!cJSON_IsArray(items) || cJSON_GetArraySize(items) > HPN_DRA_SLICES_LIST_MAX) {
		FUZZ_ASSERT(r == -EPROTO && err.code == HPN_E_KUBE &&
			    !strncmp(err.msg, WHAT ": ", strlen(WHAT ": ")));
		goto out;
	}
	FUZZ_ASSERT(r == 0 && !err.code);
	check_slices(&p, n);
	cJSON_ArrayForEach (it, items)
		if (listed_gen(it) > max_gen)
			max_gen = listed_gen(it);
	if (!p.write) {
		/* What the API holds is the pool at its own generation, none newer. */
		FUZZ_ASSERT(p.gen == max_gen && p.gen >= floor && !p.n_del);
		FUZZ_ASSERT((size_t)cJSON_GetArraySize(items) == p.count);
		for (size_t i = 0; i < p.count; i++) {
			const cJSON *l = item_named(items, hpn_dra_slice_meta(p.v[i], "name"));

			FUZZ_ASSERT(l && cJSON_Compare(at(l, "spec", NULL),
						       at(p.v[i], "spec", NULL), true));
		}
		goto out;
	}
	/* Above both, or at the bound that is read back. */
	if (max_gen < floor)
		max_gen = floor;
	FUZZ_ASSERT(p.gen == (max_gen < HPN_DRA_GENERATION_MAX ? max_gen + 1 : max_gen));
	for (size_t i = 0; i < p.count; i++) {
		const cJSON *l = item_named(items, hpn_dra_slice_meta(p.v[i], "name"));
		const char *rv = l ? hpn_dra_slice_meta(l, "resourceVersion") : NULL;

		FUZZ_ASSERT(p.rv[i] && !strcmp(p.rv[i], rv ? rv : ""));
	}
	cJSON_ArrayForEach (it, items) {
		const char *name = hpn_dra_slice_meta(it, "name");

		if (!name)
			break;
		if (ours(&p, name))
			continue;
		FUZZ_ASSERT(d < p.n_del && !strcmp(p.del[d], name));
		d++;
	}
	FUZZ_ASSERT(d == p.n_del);
	converges(&p, n);
out:
	cJSON_Delete(list);
	hpn_dra_slices_plan_free(&p);
	return 0;
}
