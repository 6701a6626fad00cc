// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for agent/dra/draclaims.c and drastatus.c's body, against a
 * scratch stateDir, CDI directory and fake sysfs tree: shared NICs
 * (KEP-5075). A claim's record with its shares' IDs, read back (and a record
 * from before shares); Prepare's rules (a share's NIC, the node's RDMA netns
 * mode, a NIC whole in one claim and shared in another, who holds it); the
 * claim's CDI spec (a shared NIC's RDMA nodes, once, and the shareIDs env);
 * the lookup's answer (shares marked, refused to a plugin that would move
 * them); a share's place among its pod's children of the NIC; the status
 * body with each share's entry and its own child's networkData.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "devices.h"
#include "dra.h"
#include "draclaims.h"
#include "drastatus.h"
#include "log.h"
#include "store.h"
#include "tmpdir.h"
#include "util.h"

#define DRV  "hpn-rdma.alibabacloud.com"
#define NODE "node1"
#define SID1 "0f1e2d3c-4b5a-4697-8877-665544332211"
#define SID2 "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
#define SID3 "b1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
#define UIDA "1a000000-0000-4000-8000-000000000001" /* claims in UID order: a, b, c */
#define UIDB "2b000000-0000-4000-8000-000000000002"
#define UIDC "3c000000-0000-4000-8000-000000000003"
#define POD1 "9a000000-0000-4000-8000-0000000000a1"
#define POD2 "9b000000-0000-4000-8000-0000000000b2"
#define NIC0 "pci-0000-af-00-0"
#define NIC1 "pci-0000-af-00-1"

static char tmp[64];

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* <tmp>/sys: mlx5_0 (uverbs0, umad0) and mlx5_1 (uverbs1), rdma_cm, as the kernel numbers them. */
static void fake_sysfs(void)
{
	static const struct {
		const char *cls, *name, *ib, *dev;
	} nodes[] = {
		{ "infiniband_verbs", "uverbs0", "mlx5_0", "231:192" },
		{ "infiniband_mad", "umad0", "mlx5_0", "231:0" },
		{ "infiniband_verbs", "uverbs1", "mlx5_1", "231:193" },
	};
	char p[PATH_MAX];

	for (size_t i = 0; i < HPN_ARRAY_SIZE(nodes); i++) {
		snprintf(p, sizeof(p), "%s/sys/class/%s/%s", tmp, nodes[i].cls, nodes[i].name);
		CHECK_INT_EQ(hpn_mkdir_p(p, 0755), 0);
		snprintf(p, sizeof(p), "%s/sys/class/%s/%s/ibdev", tmp, nodes[i].cls,
			 nodes[i].name);
		put(p, nodes[i].ib);
		snprintf(p, sizeof(p), "%s/sys/class/%s/%s/dev", tmp, nodes[i].cls, nodes[i].name);
		put(p, nodes[i].dev);
	}
	snprintf(p, sizeof(p), "%s/sys/class/misc/rdma_cm", tmp);
	CHECK_INT_EQ(hpn_mkdir_p(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/sys/class/misc/rdma_cm/dev", tmp);
	put(p, "10:58");
}

/* A device of a record. */
static void dev(struct dra_rec *r, const char *device, const char *nic, const char *rdma,
		const char *share)
{
	struct dra_rec_dev *v = &r->devs[r->n++];

	snprintf(v->request, sizeof(v->request), "nics");
	snprintf(v->pool, sizeof(v->pool), NODE);
	snprintf(v->device, sizeof(v->device), "%s", device);
	snprintf(v->nic, sizeof(v->nic), "%s", nic);
	snprintf(v->ifname, sizeof(v->ifname), "pool%c", nic[strlen(nic) - 1]);
	snprintf(v->rdma, sizeof(v->rdma), "%s", rdma);
	snprintf(v->share_id, sizeof(v->share_id), "%s", share);
}

/* A record of claim ml/name (uid) reserved for pod; malloc'd. */
static struct dra_rec *rec(const char *uid, const char *name, const char *pod)
{
	struct dra_rec *r = calloc(1, sizeof(*r));

	snprintf(r->uid, sizeof(r->uid), "%s", uid);
	snprintf(r->ns, sizeof(r->ns), "ml");
	snprintf(r->name, sizeof(r->name), "%s", name);
	snprintf(r->pods[r->n_pods++], sizeof(r->pods[0]), "%s", pod);
	return r;
}

/* The record's text and back: shareIDs kept; a record before shares reads; what is not a record. */
static void test_record(void)
{
	struct dra_rec *r = rec(UIDA, "c1", POD1), back;
	char *text;

	dev(r, NIC0 "-shared", "0000:af:00.0", "mlx5_0", SID1);
	dev(r, NIC1, "0000:af:00.1", "mlx5_1", "");
	dev(r, NIC0 "-shared", "0000:af:00.0", "mlx5_0", SID2);
	text = draclaims_rec_render(r);
	CHECK(text != NULL);
	CHECK_STR_HAS(text, "\"device\":\"" NIC0 "-shared\",\"nic\":\"0000:af:00.0\",\"ifname\":"
			    "\"pool0\",\"rdma\":\"mlx5_0\",\"shareID\":\"" SID1 "\"}");
	CHECK_STR_HAS(text, "\"device\":\"" NIC1 "\",\"nic\":\"0000:af:00.1\",\"ifname\":\"pool1\","
			    "\"rdma\":\"mlx5_1\"}");
	CHECK_INT_EQ(draclaims_rec_parse(text, strlen(text), &back), 0);
	CHECK_INT_EQ(back.n, 3);
	CHECK_STR_EQ(back.devs[0].share_id, SID1);
	CHECK_STR_EQ(back.devs[1].share_id, "");
	CHECK_STR_EQ(back.devs[2].share_id, SID2);
	CHECK_STR_EQ(back.devs[2].device, NIC0 "-shared");
	cJSON_free(text);

	/* A record an agent before shares wrote. */
	{
		static const char old[] =
			"{\"version\":1,\"uid\":\"" UIDA "\",\"namespace\":\"ml\",\"name\":\"c1\","
			"\"pods\":[\"" POD1 "\"],\"devices\":[{\"request\":\"nics\",\"pool\":"
			"\"node1\",\"device\":\"" NIC0 "\",\"nic\":\"0000:af:00.0\",\"ifname\":"
			"\"pool0\",\"rdma\":\"mlx5_0\"}]}";

		CHECK_INT_EQ(draclaims_rec_parse(old, strlen(old), &back), 0);
		CHECK_INT_EQ(back.n, 1);
		CHECK_STR_EQ(back.devs[0].share_id, "");
	}
	/* Not records: a share without its ID, a NIC's own device with one, a bad ID, a share twice. */
	{
		static const struct {
			const char *device, *share;
		} bad[] = {
			{ NIC0 "-shared", NULL },
			{ NIC0, "\"" SID1 "\"" },
			{ NIC0 "-shared", "\""
					  "0F1E2D3C-4B5A-4697-8877-665544332211"
					  "\"" },
			{ NIC0 "-shared", "\"\"" },
			{ NIC0 "-shared", "7" },
		};

		for (size_t i = 0; i < HPN_ARRAY_SIZE(bad); i++) {
			char t[1024];

			snprintf(t, sizeof(t),
				 "{\"uid\":\"" UIDA
				 "\",\"namespace\":\"ml\",\"name\":\"c1\",\"pods\":"
				 "[],\"devices\":[{\"request\":\"nics\",\"pool\":\"node1\","
				 "\"device\":"
				 "\"%s\",\"nic\":\"0000:af:00.0\",\"ifname\":\"\",\"rdma\":\"\"%s%"
				 "s}]}",
				 bad[i].device, bad[i].share ? ",\"shareID\":" : "",
				 bad[i].share ? bad[i].share : "");
			if (draclaims_rec_parse(t, strlen(t), &back) == 0)
				fprintf(stderr, "\tread as a record: %s\n", t);
			CHECK_INT_EQ(draclaims_rec_parse(t, strlen(t), &back), -EINVAL);
		}
		snprintf(r->devs[2].share_id, sizeof(r->devs[2].share_id), SID1);
		text = draclaims_rec_render(r);
		CHECK_INT_EQ(draclaims_rec_parse(text, strlen(text), &back), -EINVAL);
		cJSON_free(text);
	}
	free(r);
}

/* ---- Prepare's rules ---------------------------------------------------------------- */

static struct agent_devs devs;
static char names[2][HPN_DRA_NAME_MAX] = { NIC0, NIC1 };
/* Who holds NIC 0000:af:00.0 now, as the journals would say. */
static struct draclaims_hold holds[4];
static size_t n_holds;

static size_t holders(void *ud, const char *id, struct draclaims_hold *out, size_t max)
{
	(void)ud;
	if (strcmp(id, "0000:af:00.0"))
		return 0;
	for (size_t i = 0; i < n_holds && i < max; i++)
		out[i] = holds[i];
	return n_holds;
}

/* A parsed claim ml/<name> of uid for POD1, of the devices (share IDs "" for a NIC's own). */
static void claim(struct hpn_dra_claim *cl, const char *uid, const char *name,
		  const char *const *devices, const char *const *shares, size_t n)
{
	memset(cl, 0, sizeof(*cl));
	snprintf(cl->ns, sizeof(cl->ns), "ml");
	snprintf(cl->name, sizeof(cl->name), "%s", name);
	snprintf(cl->uid, sizeof(cl->uid), "%s", uid);
	snprintf(cl->pods[cl->n_pods++], sizeof(cl->pods[0]), POD1);
	for (size_t i = 0; i < n; i++) {
		snprintf(cl->v[i].request, sizeof(cl->v[i].request), "nics");
		snprintf(cl->v[i].pool, sizeof(cl->v[i].pool), NODE);
		snprintf(cl->v[i].device, sizeof(cl->v[i].device), "%s", devices[i]);
		snprintf(cl->v[i].share_id, sizeof(cl->v[i].share_id), "%s", shares[i]);
	}
	cl->n = n;
}

static void test_rec_of(void)
{
	struct draclaims_node nd = {
		.node_name = NODE, .devs = &devs, .names = names, .n_names = 2, .holders = holders
	};
	struct dra_rec r, *other;
	struct hpn_dra_claim cl;
	char msg[512];

	devs.n = 2;
	snprintf(devs.v[0].id, sizeof(devs.v[0].id), "0000:af:00.0");
	snprintf(devs.v[0].ifname, sizeof(devs.v[0].ifname), "pool0");
	snprintf(devs.v[0].rdma, sizeof(devs.v[0].rdma), "mlx5_0");
	snprintf(devs.v[1].id, sizeof(devs.v[1].id), "0000:af:00.1");
	snprintf(devs.v[1].ifname, sizeof(devs.v[1].ifname), "pool1");
	snprintf(devs.v[1].rdma, sizeof(devs.v[1].rdma), "mlx5_1");

	/* Two shares of NIC 0, and NIC 1 whole: the shares are the NIC's, each with its ID. */
	claim(&cl, UIDA, "c1", (const char *[]){ NIC0 "-shared", NIC1, NIC0 "-shared" },
	      (const char *[]){ SID1, "", SID2 }, 3);
	CHECK_INT_EQ(draclaims_rec_of(&nd, &cl, &r, msg, sizeof(msg)), 0);
	CHECK_INT_EQ(r.n, 3);
	CHECK_STR_EQ(r.devs[0].device, NIC0 "-shared");
	CHECK_STR_EQ(r.devs[0].nic, "0000:af:00.0");
	CHECK_STR_EQ(r.devs[0].rdma, "mlx5_0");
	CHECK_STR_EQ(r.devs[0].share_id, SID1);
	CHECK_STR_EQ(r.devs[1].nic, "0000:af:00.1");
	CHECK_STR_EQ(r.devs[1].share_id, "");
	CHECK_STR_EQ(r.devs[2].share_id, SID2);

	/* Other pods hold children of NIC 0 (their shares): a share is fine, the NIC whole is not. */
	n_holds = 2;
	snprintf(holds[0].pod, sizeof(holds[0].pod), POD2);
	snprintf(holds[1].pod, sizeof(holds[1].pod), "9c000000-0000-4000-8000-0000000000c3");
	holds[0].moved = holds[1].moved = false;
	CHECK_INT_EQ(draclaims_rec_of(&nd, &cl, &r, msg, sizeof(msg)), 0);
	claim(&cl, UIDA, "c1", (const char *[]){ NIC0 }, (const char *[]){ "" }, 1);
	CHECK_INT_EQ(draclaims_rec_of(&nd, &cl, &r, msg, sizeof(msg)), -EBUSY);
	CHECK_STR_HAS(msg, "claim ml/c1: NIC 0000:af:00.0 (device " NIC0 ") is held by pod " POD2
			   ", which the claim is not reserved for");
	/* A pod holding NIC 0 moved: no share of it. */
	holds[1].moved = true;
	claim(&cl, UIDA, "c1", (const char *[]){ NIC0 "-shared" }, (const char *[]){ SID1 }, 1);
	CHECK_INT_EQ(draclaims_rec_of(&nd, &cl, &r, msg, sizeof(msg)), -EBUSY);
	CHECK_STR_HAS(msg, "claim ml/c1: NIC 0000:af:00.0 (device " NIC0 "-shared) is held whole "
			   "by pod 9c000000-0000-4000-8000-0000000000c3");
	n_holds = 0;

	/* The claim holding NIC 0 whole and shared. */
	claim(&cl, UIDA, "c1", (const char *[]){ NIC0, NIC0 "-shared" },
	      (const char *[]){ "", SID1 }, 2);
	CHECK_INT_EQ(draclaims_rec_of(&nd, &cl, &r, msg, sizeof(msg)), -EBUSY);
	CHECK_STR_HAS(msg, "claim ml/c1: NIC 0000:af:00.0 is allocated both whole and shared "
			   "(devices " NIC0 " and " NIC0 "-shared)");

	/* Another prepared claim holds a share of NIC 0: the NIC whole is refused, naming it. */
	other = rec(UIDB, "c2", POD2);
	dev(other, NIC0 "-shared", "0000:af:00.0", "mlx5_0", SID3);
	nd.recs = other;
	claim(&cl, UIDA, "c1", (const char *[]){ NIC1, NIC0 }, (const char *[]){ "", "" }, 2);
	CHECK_INT_EQ(draclaims_rec_of(&nd, &cl, &r, msg, sizeof(msg)), -EBUSY);
	CHECK_STR_HAS(msg, "claim ml/c1: NIC 0000:af:00.0 (device " NIC0 ") is shared: claim "
			   "ml/c2 (" UIDB ") holds a share of it (device " NIC0
			   "-shared, share " SID3 ")");
	/* ...and a share beside it is fine. */
	claim(&cl, UIDA, "c1", (const char *[]){ NIC0 "-shared" }, (const char *[]){ SID1 }, 1);
	CHECK_INT_EQ(draclaims_rec_of(&nd, &cl, &r, msg, sizeof(msg)), 0);
	/* The other claim holds NIC 0 whole: a share is refused, naming it. */
	dev(other, NIC0, "0000:af:00.0", "mlx5_0", "");
	other->devs[0] = other->devs[1];
	other->n = 1;
	CHECK_INT_EQ(draclaims_rec_of(&nd, &cl, &r, msg, sizeof(msg)), -EBUSY);
	CHECK_STR_HAS(msg, "claim ml/c1: device " NIC0 "-shared is a share of NIC 0000:af:00.0, "
			   "which claim ml/c2 (" UIDB ") holds whole (device " NIC0 ")");
	/* The claim's own record (Prepare again) is not another claim. */
	snprintf(other->uid, sizeof(other->uid), UIDA);
	CHECK_INT_EQ(draclaims_rec_of(&nd, &cl, &r, msg, sizeof(msg)), 0);
	nd.recs = NULL;
	free(other);

	/* The node's RDMA netns mode exclusive: no share; the NIC whole still. */
	nd.rdma_exclusive = true;
	CHECK_INT_EQ(draclaims_rec_of(&nd, &cl, &r, msg, sizeof(msg)), -EOPNOTSUPP);
	CHECK_STR_HAS(msg, "claim ml/c1: device " NIC0 "-shared is a share of NIC 0000:af:00.0, "
			   "but the node's RDMA netns mode is exclusive");
	claim(&cl, UIDA, "c1", (const char *[]){ NIC0 }, (const char *[]){ "" }, 1);
	CHECK_INT_EQ(draclaims_rec_of(&nd, &cl, &r, msg, sizeof(msg)), 0);
	nd.rdma_exclusive = false;

	/* A shared device of no NIC here. */
	claim(&cl, UIDA, "c1", (const char *[]){ "pci-0000-b0-00-0-shared" },
	      (const char *[]){ SID1 }, 1);
	CHECK_INT_EQ(draclaims_rec_of(&nd, &cl, &r, msg, sizeof(msg)), -ENODEV);
	CHECK_STR_HAS(msg, "device pci-0000-b0-00-0-shared is no NIC of the pool");
}

/* ---- the CDI spec, the lookup, a share's place ---------------------------------------- */

static cJSON *spec_of(const char *uid)
{
	char path[PATH_MAX], *text = NULL;
	struct hpn_err err = { 0 };
	size_t len;
	cJSON *j;

	snprintf(path, sizeof(path), "%s/cdi/alibabacloud.com-hpn-rdma_claim-%s.json", tmp, uid);
	if (hpn_read_file(path, 1 << 20, &text, &len, &err) < 0) {
		fprintf(stderr, "\t%s\n", err.msg);
		return NULL;
	}
	j = cJSON_ParseWithLength(text, len);
	free(text);
	return j;
}

/* containerEdits' env, and its device nodes' names, of claim uid's spec, each comma-joined. */
static void spec_edits(const char *uid, char *env, char *nodes, size_t len)
{
	cJSON *j = spec_of(uid);
	const cJSON *ed = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "devices"), 0),
		"containerEdits");
	const cJSON *e;

	env[0] = nodes[0] = '\0';
	cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(ed, "env"))
		snprintf(env + strlen(env), len - strlen(env), "%s%s", env[0] ? " " : "",
			 e->valuestring);
	cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(ed, "deviceNodes"))
		snprintf(nodes + strlen(nodes), len - strlen(nodes), "%s%s", nodes[0] ? "," : "",
			 cJSON_GetObjectItemCaseSensitive(e, "path")->valuestring);
	cJSON_Delete(j);
}

static void test_spec_and_lookup(void)
{
	char state[PATH_MAX], sys[PATH_MAX], cdi[PATH_MAX], env[2048], nodes[1024], why[512];
	struct draclaims_opts o = { .state_dir = state,
				    .network = "net1",
				    .sysfs_root = sys,
				    .dev_root = "/dev",
				    .cdi_dir = cdi,
				    .hook = "/bin/true" };
	struct dra_claims cl;
	struct dra_rec *a = rec(UIDA, "ca", POD1), *b = rec(UIDB, "cb", POD1),
		       *c = rec(UIDC, "cc", POD2);
	struct hpn_err err = { 0 };
	struct hpn_alloc *al;
	char msg[512] = "";

	snprintf(state, sizeof(state), "%s/state", tmp);
	snprintf(sys, sizeof(sys), "%s/sys", tmp);
	snprintf(cdi, sizeof(cdi), "%s/cdi", tmp);
	CHECK_INT_EQ(hpn_mkdir_p(cdi, 0755), 0);
	fake_sysfs();
	CHECK_INT_EQ(draclaims_open(&cl, &o, &err), 0);

	/* Claim b: NIC 1 whole, then two shares of NIC 0; claim a: NIC 0 shared. Both pod 1's. */
	dev(b, NIC1, "0000:af:00.1", "mlx5_1", "");
	dev(b, NIC0 "-shared", "0000:af:00.0", "mlx5_0", SID1);
	dev(b, NIC0 "-shared", "0000:af:00.0", "mlx5_0", SID2);
	dev(a, NIC0 "-shared", "0000:af:00.0", "mlx5_0", SID3);
	dev(c, NIC1, "0000:af:00.1", "mlx5_1", "");
	CHECK_INT_EQ(draclaims_add(&cl, b, NULL, msg, sizeof(msg)), 0);
	CHECK_INT_EQ(draclaims_add(&cl, c, NULL, msg, sizeof(msg)), 0);
	CHECK_INT_EQ(draclaims_add(&cl, a, NULL, msg, sizeof(msg)), 0);
	if (msg[0])
		fprintf(stderr, "\t%s\n", msg);
	/* Listed in UID order, whatever the order of Prepare. */
	CHECK(cl.recs == a && a->next == b && b->next == c);

	/*
	 * b's spec: NIC 0's nodes once for its two shares, NIC 1's; its RDMA devices one
	 * per device; the shareIDs in device order, "" for NIC 1 whole.
	 */
	spec_edits(UIDB, env, nodes, sizeof(nodes));
	CHECK_STR_EQ(nodes, "/dev/infiniband/uverbs1,/dev/infiniband/uverbs0,"
			    "/dev/infiniband/umad0,/dev/infiniband/rdma_cm");
	CHECK_STR_HAS(env, "HPN_RDMA_DEVICE_CLAIM_2B000000_0000_4000_8000_000000000002="
			   "mlx5_1,mlx5_0,mlx5_0");
	CHECK_STR_HAS(env, "HPN_RDMA_SHARE_IDS_CLAIM_2B000000_0000_4000_8000_000000000002=," SID1
			   "," SID2 " ");
	/* c has no share: no such env. */
	spec_edits(UIDC, env, nodes, sizeof(nodes));
	CHECK_STR_HAS(env, "HPN_RDMA_DEVICE_CLAIM_3C000000_0000_4000_8000_000000000003=mlx5_1");
	CHECK_STR_LACKS(env, "SHARE_IDS");
	CHECK_STR_EQ(nodes, "/dev/infiniband/uverbs1,/dev/infiniband/rdma_cm");

	/* The lookup for pod 1: a's share, then b's devices; shares marked, NIC 0 thrice. */
	al = draclaims_pod_nics(&cl, DRV, POD1, true, why, sizeof(why));
	CHECK(al != NULL);
	if (al) {
		CHECK_INT_EQ(al->n, 4);
		CHECK_STR_EQ(al->ids[0], "0000:af:00.0");
		CHECK_STR_EQ(al->ids[1], "0000:af:00.1");
		CHECK_STR_EQ(al->ids[2], "0000:af:00.0");
		CHECK_STR_EQ(al->ids[3], "0000:af:00.0");
		CHECK(al->shared[0] && !al->shared[1] && al->shared[2] && al->shared[3]);
		CHECK_INT_EQ(al->n_claims, 2);
		CHECK_STR_EQ(al->claims[0], "ml/ca");
		CHECK_STR_EQ(al->source, "dra");
	}
	free(al);
	/* A plugin that would move NICs: refused, naming the claim and the share. */
	al = draclaims_pod_nics(&cl, DRV, POD1, false, why, sizeof(why));
	CHECK(al == NULL);
	CHECK_STR_HAS(why, "DRA claim ml/ca holds a share of NIC 0000:af:00.0 (device " NIC0
			   "-shared, share " SID3 ")");
	CHECK_STR_HAS(why, "the plugin must be upgraded to attach shares");
	/* Pod 2's claim has no share: answered either way. */
	al = draclaims_pod_nics(&cl, DRV, POD2, false, why, sizeof(why));
	CHECK(al != NULL && al->n == 1 && !al->shared[0] && !why[0]);
	free(al);

	/* A share's place among the pod's children of NIC 0: a's, then b's two. */
	{
		const struct dra_rec *recs[] = { c, b, a };

		CHECK_INT_EQ(draclaims_share_rank(recs, 3, a, 0, POD1), 0);
		CHECK_INT_EQ(draclaims_share_rank(recs, 3, b, 1, POD1), 1);
		CHECK_INT_EQ(draclaims_share_rank(recs, 3, b, 2, POD1), 2);
	}

	/* Read back at start: the same records, the same order, the shareIDs. */
	draclaims_free(&cl);
	CHECK_INT_EQ(draclaims_open(&cl, &o, &err), 0);
	CHECK(cl.recs && !strcmp(cl.recs->uid, UIDA) && cl.recs->next &&
	      !strcmp(cl.recs->next->uid, UIDB));
	if (cl.recs && cl.recs->next)
		CHECK_STR_EQ(cl.recs->next->devs[2].share_id, SID2);
	draclaims_free(&cl);
}

/* ---- the status body -------------------------------------------------------------------- */

/* A completed attachment of pod (uid) in the journals: children of NIC 0 named hpn0.., MACs. */
static void attach(const char *state, const char *cid, const char *pod, size_t n)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct hpn_journal j;
	char key[HPN_KEY_MAX], res[2048];
	size_t at;

	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	memset(&j, 0, sizeof(j));
	j.n_nics = n;
	j.phase = HPN_PHASE_ATTACHED;
	j.container_id = strdup(cid);
	j.netns = strdup("/var/run/netns/x");
	strcpy(j.cni_ifname, "eth0");
	at = (size_t)snprintf(res, sizeof(res),
			      "{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"eth0\"}");
	for (size_t i = 0; i < n; i++) {
		j.nics[i].kind = HPN_NIC_CHILD;
		snprintf(j.nics[i].pod_ifname, sizeof(j.nics[i].pod_ifname), "hpn%u",
			 (unsigned int)(i & 0xff));
		strcpy(j.nics[i].host.name, "pool0");
		strcpy(j.nics[i].pci, "0000:af:00.0");
		strcpy(j.nics[i].child_kind, "macvlan");
		at += (size_t)snprintf(res + at, sizeof(res) - at,
				       ",{\"name\":\"hpn%zu\",\"mac\":\"02:00:00:00:0%c:0%zu\","
				       "\"sandbox\":\"/var/run/netns/x\"}",
				       i, cid[0], i);
	}
	at += (size_t)snprintf(res + at, sizeof(res) - at, "],\"ips\":[");
	for (size_t i = 0; i < n; i++)
		at += (size_t)snprintf(res + at, sizeof(res) - at,
				       "%s{\"address\":\"10.9.%c.%zu/24\",\"interface\":%zu}",
				       i ? "," : "", cid[0], i + 2, i + 1);
	snprintf(res + at, sizeof(res) - at, "]}");
	j.result = strdup(res);
	hpn_journal_set_pod(&j, "ml", cid, pod);
	CHECK_INT_EQ(hpn_store_key(j.container_id, j.cni_ifname, key), 0);
	CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0);
	hpn_store_close(&st);
	hpn_journal_free(&j);
}

/* devices[i] of body: "<device> <shareID> <interfaceName> <ip> <mac>". */
static void entry(const char *body, int i, char *out, size_t len)
{
	cJSON *j = cJSON_Parse(body);
	const cJSON *d = cJSON_GetArrayItem(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "status"),
						 "devices"),
		i);
	const cJSON *net = cJSON_GetObjectItemCaseSensitive(d, "networkData");
	const cJSON *sid = cJSON_GetObjectItemCaseSensitive(d, "shareID");

	snprintf(out, len, "%s %s %s %s %s",
		 d ? cJSON_GetObjectItemCaseSensitive(d, "device")->valuestring : "-",
		 sid ? sid->valuestring : "-",
		 net ? cJSON_GetObjectItemCaseSensitive(net, "interfaceName")->valuestring : "-",
		 net ? cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(net, "ips"), 0)
				 ->valuestring
		     : "-",
		 net ? cJSON_GetObjectItemCaseSensitive(net, "hardwareAddress")->valuestring : "-");
	cJSON_Delete(j);
}

static void test_status(void)
{
	struct dra_rec *a = rec(UIDA, "ca", POD1), *b = rec(UIDB, "cb", POD1),
		       *c = rec(UIDC, "cc", POD2);
	const struct dra_rec *recs[] = { c, a, b };
	char state[PATH_MAX], msg[256], e[256], *body;
	struct hpn_drameta_net nets[3];
	bool have[3];

	snprintf(state, sizeof(state), "%s/state-status", tmp);
	/* Pod 1: claim a's share, then claim b's two; pod 2: claim c's. All of NIC 0. */
	dev(a, NIC0 "-shared", "0000:af:00.0", "mlx5_0", SID3);
	dev(b, NIC0 "-shared", "0000:af:00.0", "mlx5_0", SID1);
	dev(b, NIC0 "-shared", "0000:af:00.0", "mlx5_0", SID2);
	dev(c, NIC0 "-shared", "0000:af:00.0", "mlx5_0", "c1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d");
	attach(state, "1111aaaa", POD1, 3);
	attach(state, "2222bbbb", POD2, 1);

	body = drastatus_render(state, "net1", DRV, recs, 3, b, "2026-12-04T13:07:59Z", msg,
				sizeof(msg));
	CHECK(body != NULL);
	if (body) {
		CHECK_STR_HAS(body, "\"driver\":\"" DRV "\",\"pool\":\"node1\",\"device\":\"" NIC0
				    "-shared\",\"shareID\":\"" SID1 "\",\"networkData\"");
		entry(body, 0, e, sizeof(e));
		CHECK_STR_EQ(e, NIC0 "-shared " SID1 " hpn1 10.9.1.3/24 02:00:00:00:01:01");
		entry(body, 1, e, sizeof(e));
		CHECK_STR_EQ(e, NIC0 "-shared " SID2 " hpn2 10.9.1.4/24 02:00:00:00:01:02");
		entry(body, 2, e, sizeof(e));
		CHECK_STR_EQ(e, "- - - - -");
	}
	free(body);
	body = drastatus_render(state, "net1", DRV, recs, 3, a, "", msg, sizeof(msg));
	entry(body ? body : "{}", 0, e, sizeof(e));
	CHECK_STR_EQ(e, NIC0 "-shared " SID3 " hpn0 10.9.1.2/24 02:00:00:00:01:00");
	free(body);
	/* Another pod's share of the same NIC: its own child. */
	body = drastatus_render(state, "net1", DRV, recs, 3, c, "", msg, sizeof(msg));
	entry(body ? body : "{}", 0, e, sizeof(e));
	CHECK_STR_EQ(e, NIC0 "-shared c1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d hpn0 10.9.2.2/24 "
			     "02:00:00:00:02:00");
	free(body);
	/* The device metadata's networkData: the same children. */
	CHECK_INT_EQ(
		drastatus_pod_nets(state, "net1", recs, 3, b, POD1, nets, have, msg, sizeof(msg)),
		0);
	CHECK(have[0] && have[1]);
	CHECK_STR_EQ(nets[0].ifname, "hpn1");
	CHECK_STR_EQ(nets[1].ifname, "hpn2");
	CHECK_STR_EQ(nets[1].mac, "02:00:00:00:01:02");

	/* Pod 1 holds only one child of NIC 0 now: a's share has it, b's none. */
	attach(state, "1111aaaa", POD1, 1);
	body = drastatus_render(state, "net1", DRV, recs, 3, b, "", msg, sizeof(msg));
	CHECK(body && strstr(body, "\"devices\":[]"));
	free(body);
	free(a);
	free(b);
	free(c);
}

int main(void)
{
	hpn_log_stderr(HPN_LOG_ERROR);
	tmpdir_make(tmp, sizeof(tmp), "draclaims");
	test_record();
	test_rec_of();
	test_spec_and_lookup();
	test_status();
	if (tmpdir_rm(tmp) < 0)
		perror("remove scratch directory");
	return check_done();
}
