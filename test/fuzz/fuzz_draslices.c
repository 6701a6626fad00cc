// SPDX-License-Identifier: Apache-2.0
/*
 * The ResourceSlice publisher's round (agent/dra/draslices.c) as the API's
 * answer decides it (hpn_dra_slices_plan, agent/dra/model/draslice.c): the
 * body of GET /apis/resource.k8s.io/v1/resourceslices?fieldSelector=
 * spec.nodeName=gpu-node-17,spec.driver=rdma.hpn.example.com as a hostile or
 * broken API server, or other writers of slices, may make it.
 *
 * Input: a byte (bits 0-1: the pool's size, 0, 1, 3 or 130 NICs, two
 * slices; bits 2-3: the generation published last, 0, 1, 7 or 10^15 - 1;
 * bits 4-5: the unhealthy NICs, with the driver's taint: none, NIC 1
 * (NoSchedule), every third (NoExecute), all (None); bits 6-7: the NICs pods
 * share (--dra-shares): none, NIC 1 (4 shares), every second (1 to 5), all
 * (8)), then the list's body.
 *
 * Checked, beyond the sanitizers: refused, code 109 naming what was listed,
 * exactly when the answer is not JSON with items an array of at most 64;
 * else the pool's slices, hpn_dra_slice_split of them, each named once, of
 * the driver, node and pool, at one generation, holding the pool's devices
 * in order, each once, at most 128 to a slice and 64 to a slice with a
 * taint or counters consumed; a shared NIC followed in its slice by its
 * shared device (its attributes, taint and counter set, allowMultipleAllocations,
 * capacity its shares), both consuming its counter set; the counter sets,
 * one a shared NIC in order, in the slices after the device slices, 8 at
 * most a slice, which hold no device; a tainted device's timeAdded its own
 * or one the list holds for it (same name, key and effect). Then either nothing to write, when the
 * listed items are exactly the pool's slices (by name, spec for spec) at
 * the highest generation listed, at least the last one; or, when they are
 * exactly the pool's slices by name at that generation, of as many slices,
 * each with our devices by name in order, just the slices whose spec
 * differs written over at that generation; or every slice at a generation
 * above the last one and every one listed (at most 10^15 - 1, what it
 * reads: found by this target, the publisher wrote 10^15 after 10^15 - 1
 * and, not reading it back, wrote again every round); each written over the
 * resourceVersion listed under its name (none: made anew), then the listed
 * slices before the first without a name that are not ours deleted, in
 * order, and never one of ours. And the round converges: the API then
 * holding just what was written (a resourceVersion each), the next round,
 * with this generation as the last, writes nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "drashare.h"
#include "draslice.h"
#include "fuzz.h"
#include "util.h"

#define DRV  "rdma.hpn.example.com"
#define NODE "gpu-node-17"
#define WHAT "the ResourceSlices of node " NODE " and driver " DRV

static struct hpn_dra_nic nics[130], pnics[130]; /* pnics: nics, this input's taints, shares */
/* 2026-12-04T13:07:59Z: when the unhealthy NICs were first seen so. */
#define SINCE	1796389679LL
#define SINCE_S "2026-12-04T13:07:59Z"
#define TAINT	DRV "/unhealthy"

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

/* A listed device named name has our taint of effect with timeAdded t. */
static bool listed_time(const cJSON *items, const char *name, const char *effect, const char *t)
{
	const cJSON *it, *dev, *taint;

	cJSON_ArrayForEach (it, items)
		cJSON_ArrayForEach (dev, at(at(it, "spec", NULL), "devices", NULL)) {
			const char *dn = cJSON_GetStringValue(at(dev, "name", NULL));

			if (!dn || strcmp(dn, name))
				continue;
			cJSON_ArrayForEach (taint, at(dev, "taints", NULL)) {
				const char *k = cJSON_GetStringValue(at(taint, "key", NULL));
				const char *e = cJSON_GetStringValue(at(taint, "effect", NULL));
				const char *ta = cJSON_GetStringValue(at(taint, "timeAdded", NULL));

				if (k && e && ta && !strcmp(k, TAINT) && !strcmp(e, effect) &&
				    !strcmp(ta, t))
					return true;
			}
		}
	return false;
}

/* A device's taints: ours, as the NIC's, its time its own or one listed for it; true: tainted. */
static bool check_taint(const cJSON *dev, const struct hpn_dra_nic *nic, const char *name,
			const cJSON *items)
{
	const cJSON *t = at(dev, "taints", NULL), *t0 = cJSON_GetArrayItem(t, 0);
	const char *when = cJSON_GetStringValue(at(t0, "timeAdded", NULL));

	if (!nic->taint.effect[0]) {
		FUZZ_ASSERT(!t);
		return false;
	}
	FUZZ_ASSERT(cJSON_GetArraySize(t) == 1 &&
		    !strcmp(cJSON_GetStringValue(at(t0, "key", NULL)), TAINT) &&
		    !strcmp(cJSON_GetStringValue(at(t0, "effect", NULL)), nic->taint.effect) &&
		    when);
	FUZZ_ASSERT(!strcmp(when, SINCE_S) || listed_time(items, name, nic->taint.effect, when));
	return true;
}

/* The device consumes its NIC's counter set (set), or nothing (NULL). */
static void check_consumes(const cJSON *dev, const char *set)
{
	const cJSON *cc = at(dev, "consumesCounters", NULL), *c0 = cJSON_GetArrayItem(cc, 0);
	const cJSON *v =
		at(at(at(c0, "counters", NULL), HPN_DRA_SHARE_COUNTER, NULL), "value", NULL);

	if (!set) {
		FUZZ_ASSERT(!cc);
		return;
	}
	FUZZ_ASSERT(cJSON_GetArraySize(cc) == 1 &&
		    !strcmp(cJSON_GetStringValue(at(c0, "counterSet", NULL)), set) &&
		    !strcmp(cJSON_GetStringValue(v), "1"));
}

/*
 * Slice s's devices: the pool's next ones, in order (*next: the first NIC
 * not yet seen), a shared NIC and its shared device together, at most 128,
 * 64 when one has a taint or consumes counters.
 */
static void check_devices(const cJSON *s, size_t n, size_t *next, const cJSON *items)
{
	const cJSON *dev = at(at(s, "spec", NULL), "devices", NULL)->child;
	size_t count = 0;
	bool advanced = false;

	while (dev) {
		const struct hpn_dra_nic *nic = &pnics[*next];
		char name[HPN_DRA_NAME_MAX], share[HPN_DRA_NAME_MAX];
		const cJSON *cap;

		FUZZ_ASSERT(*next < n && hpn_dra_device_name(nic, name) == 0 &&
			    !strcmp(cJSON_GetStringValue(at(dev, "name", NULL)), name));
		advanced = check_taint(dev, nic, name, items) || advanced;
		check_consumes(dev, nic->shares ? name : NULL);
		FUZZ_ASSERT(!at(dev, "allowMultipleAllocations", NULL) &&
			    !at(dev, "capacity", NULL) &&
			    !at(at(dev, "attributes", NULL), HPN_DRA_SHARE_ATTR, NULL));
		count++;
		dev = dev->next;
		(*next)++;
		if (!nic->shares)
			continue;
		/* Its shared device next, in this slice: the NIC's attributes, shared: true. */
		advanced = true;
		FUZZ_ASSERT(dev && hpn_dra_share_name(name, share) == 0 &&
			    !strcmp(cJSON_GetStringValue(at(dev, "name", NULL)), share));
		check_taint(dev, nic, share, items);
		check_consumes(dev, name);
		cap = at(at(at(dev, "capacity", NULL), HPN_DRA_SHARE_CAPACITY, NULL), "value",
			 NULL);
		FUZZ_ASSERT(
			cJSON_IsTrue(at(dev, "allowMultipleAllocations", NULL)) &&
			cJSON_IsString(cap) && strtoul(cap->valuestring, NULL, 10) == nic->shares &&
			cJSON_IsTrue(at(at(at(dev, "attributes", NULL), HPN_DRA_SHARE_ATTR, NULL),
					"bool", NULL)));
		count++;
		dev = dev->next;
	}
	FUZZ_ASSERT(count <= (advanced ? HPN_DRA_MAX_DEVICES_TAINTED : HPN_DRA_MAX_DEVICES));
}

/* A counter slice's sets: the next shared NICs' (*next_set: the NIC index to look from on). */
static void check_counters(const cJSON *s, size_t n, size_t *next_set)
{
	const cJSON *set, *sets = at(at(s, "spec", NULL), "sharedCounters", NULL);

	FUZZ_ASSERT(cJSON_IsArray(sets) && cJSON_GetArraySize(sets) >= 1 &&
		    cJSON_GetArraySize(sets) <= HPN_DRA_MAX_COUNTER_SETS);
	cJSON_ArrayForEach (set, sets) {
		char name[HPN_DRA_NAME_MAX];
		const cJSON *c = at(set, "counters", NULL);

		while (*next_set < n && !pnics[*next_set].shares)
			(*next_set)++;
		FUZZ_ASSERT(*next_set < n && hpn_dra_device_name(&pnics[*next_set], name) == 0 &&
			    !strcmp(cJSON_GetStringValue(at(set, "name", NULL)), name));
		FUZZ_ASSERT(cJSON_GetArraySize(c) == 1 &&
			    !strcmp(cJSON_GetStringValue(
					    at(at(c, HPN_DRA_SHARE_COUNTER, NULL), "value", NULL)),
				    "1"));
		(*next_set)++;
	}
}

/* The pool's slices at p->gen, as the render makes them. */
static void check_slices(const struct hpn_dra_slices_plan *p, size_t n, const cJSON *items)
{
	size_t next = 0, next_set = 0;
	bool counters = false;

	FUZZ_ASSERT(p->count == hpn_dra_slice_split(pnics, n) && p->v && p->gen > 0);
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
		/* Devices or counter sets, never both; the counter slices after the device slices. */
		if (at(at(s, "spec", NULL), "devices", NULL)) {
			FUZZ_ASSERT(!counters && !at(at(s, "spec", NULL), "sharedCounters", NULL));
			check_devices(s, n, &next, items);
		} else {
			counters = true;
			check_counters(s, n, &next_set);
		}
	}
	FUZZ_ASSERT(next == n);
	while (next_set < n && !pnics[next_set].shares)
		next_set++;
	FUZZ_ASSERT(next_set == n);
}

/* A slice's device (or counter set) names in order, as a JSON array (a nameless one null). */
static cJSON *names_of(const cJSON *slice, const char *what)
{
	const cJSON *devs = at(at(slice, "spec", NULL), what, NULL), *dev;
	cJSON *names = cJSON_IsArray(devs) ? cJSON_CreateArray() : NULL;

	cJSON_ArrayForEach (dev, devs) {
		const cJSON *n = at(dev, "name", NULL);

		FUZZ_ASSERT(cJSON_AddItemToArray(
			names, cJSON_IsString(n) ? cJSON_Duplicate(n, false) : cJSON_CreateNull()));
	}
	return names;
}

/* Two slices' devices (counter sets, when ours b has them) have the same names in order. */
static bool same_names(const cJSON *a, const cJSON *b)
{
	const char *what = at(at(b, "spec", NULL), "devices", NULL) ? "devices" : "sharedCounters";
	cJSON *na = names_of(a, what), *nb = names_of(b, what);
	bool same = na && nb && cJSON_Compare(na, nb, true);

	cJSON_Delete(na);
	cJSON_Delete(nb);
	return same;
}

/*
 * The list is the pool's slices by name, as many, each at gen of a pool of
 * as many slices, with the pool's devices as the plan places them.
 */
static bool in_place(const struct hpn_dra_slices_plan *p, const cJSON *items, long gen)
{
	if ((size_t)cJSON_GetArraySize(items) != p->count)
		return false;
	for (size_t i = 0; i < p->count; i++) {
		const cJSON *l = item_named(items, hpn_dra_slice_meta(p->v[i], "name"));
		const cJSON *c = at(at(l, "spec", "pool"), "resourceSliceCount", NULL);

		if (!l || listed_gen(l) != gen || !cJSON_IsNumber(c) ||
		    c->valuedouble != (double)p->count || !same_names(l, p->v[i]))
			return false;
	}
	return true;
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
	FUZZ_ASSERT(hpn_dra_slices_plan(body, strlen(body), WHAT, DRV, NODE, pnics, n, p->gen,
					&next, &err) == 0);
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
	memcpy(pnics, nics, sizeof(pnics));
	for (size_t i = 0; i < n; i++) {
		static const char *const effects[] = { "", "NoSchedule", "NoExecute", "None" };
		unsigned int how = (data[0] >> 4) & 3;
		struct hpn_dra_taint *t = &pnics[i].taint;

		if ((how == 1 && i == 1) || (how == 2 && i % 3 == 0) || how == 3) {
			snprintf(t->effect, sizeof(t->effect), "%s", effects[how]);
			snprintf(t->value, sizeof(t->value), "%s", how == 3 ? "" : "PortDown");
			t->since = SINCE;
		}
		switch (data[0] >> 6) {
		case 1:
			pnics[i].shares = i == 1 ? 4 : 0;
			break;
		case 2:
			pnics[i].shares = i % 2 ? 0 : 1 + (unsigned int)(i % 5);
			break;
		case 3:
			pnics[i].shares = 8;
			break;
		}
	}
	r = hpn_dra_slices_plan((const char *)data + 1, size - 1, WHAT, DRV, NODE, pnics, n, floor,
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
	check_slices(&p, n, items);
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
	if (max_gen > 0 && max_gen >= floor && in_place(&p, items, max_gen)) {
		/* Our devices where the API holds them: the slices that differ, at its generation. */
		FUZZ_ASSERT(!p.bumped && p.gen == max_gen && !p.n_del);
		for (size_t i = 0; i < p.count; i++) {
			const cJSON *l = item_named(items, hpn_dra_slice_meta(p.v[i], "name"));

			FUZZ_ASSERT(p.put[i] == !cJSON_Compare(at(l, "spec", NULL),
							       at(p.v[i], "spec", NULL), true));
		}
	} else {
		/* Above both, or at the bound that is read back; every slice written. */
		if (max_gen < floor)
			max_gen = floor;
		FUZZ_ASSERT(p.bumped &&
			    p.gen == (max_gen < HPN_DRA_GENERATION_MAX ? max_gen + 1 : max_gen));
		for (size_t i = 0; i < p.count; i++)
			FUZZ_ASSERT(p.put[i]);
	}
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
