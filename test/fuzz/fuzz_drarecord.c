// SPDX-License-Identifier: Apache-2.0
/*
 * A prepared claim's record (agent/dra/draclaims.c): made by
 * NodePrepareResources from the API's answer for the claim, checked against
 * the node (draclaims_rec_of), and read back from <stateDir>/dra/<uid>.json
 * at start (draclaims_rec_parse).
 *
 * Input: a byte; bit 0 clear: the next byte says who holds each of the
 * pool's four NICs (two bits each: none, the claim's pod, another pod, a
 * journal without a pod), and the rest is the body of GET
 * /apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/rdma-0 for driver
 * rdma.hpn.example.com on node gpu-node-17 (hpn_dra_claim_parse, fuzzed by
 * itself as target claim); bit 0 set: the rest is a record file.
 *
 * Checked, beyond the sanitizers: a parsed claim is made a record exactly
 * when each of its results is a device of this node's pool that is a NIC
 * here (by its DRA name, a shared device by its NIC's), the claim not
 * holding that NIC both whole and shared, a NIC's own device held by no
 * journal or by one of a pod the claim is reserved for, a share's NIC held
 * moved by no pod (another pod holds a child of it: allowed); else the
 * message names the claim and the first result that is not. A record holds the claim's namespace, name, uid and pods, and per
 * result its request, pool and device with the NIC's ID, netdev and RDMA
 * device. A record read back is one NodePrepareResources could have made:
 * a uid draclaims_uid_ok, a namespace and name of the API's syntax, pod UIDs,
 * 1 to 32 devices each with a request, pool and device of the API's syntax,
 * a device ID, a netdev name or none, an RDMA device name or none. Either
 * way, the record renders to text that reads back to the same record and
 * renders to the same text.
 */
#include <errno.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "alloc.h"
#include "devices.h"
#include "dra.h"
#include "draclaims.h"
#include "draslice.h"
#include "fuzz.h"
#include "log.h"
#include "pod.h"
#include "util.h"

#define NS     "ml"
#define NAME   "rdma-0"
#define UID    "6a1f0c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"
#define DRV    "rdma.hpn.example.com"
#define NODE   "gpu-node-17"
#define POD    "7b2a1d3f-4c5e-4f60-9bac-1d2e3f4a5b6c" /* the claim's pod in the seeds */
#define OTHER  "1f2e3d4c-0000-4000-8000-000000000001"
#define PREFIX "claim " NS "/" NAME ": "

static struct agent_devs devs;
static char names[HPN_AGENT_MAX_DEVICES][HPN_DRA_NAME_MAX];
static const char *holders[HPN_AGENT_MAX_DEVICES];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* Three NICs with a PCI function, one without (a virtual NIC): rxe made its RDMA device. */
	static const struct {
		const char *id, *ifname, *rdma;
	} pool[] = {
		{ "0000:3b:00.0", "ens1f0np0", "mlx5_0" },
		{ "0000:3b:00.1", "ens1f1np1", "mlx5_1" },
		{ "0000:af:00.0", "ens3f0", "" },
		{ "eth9", "eth9", "rxe_eth9" },
	};

	(void)argc;
	(void)argv;
	hpn_log_stderr(HPN_LOG_ERROR);
	for (size_t i = 0; i < HPN_ARRAY_SIZE(pool); i++) {
		struct agent_dev *d = &devs.v[devs.n++];
		struct hpn_dra_nic nic = { 0 };

		snprintf(d->id, sizeof(d->id), "%s", pool[i].id);
		snprintf(d->ifname, sizeof(d->ifname), "%s", pool[i].ifname);
		snprintf(d->rdma, sizeof(d->rdma), "%s", pool[i].rdma);
		d->healthy = true;
		/* As dra_scanned names a NIC sysfs does not show: by its PCI address, else netdev. */
		if (hpn_pci_normalise(d->id, nic.pci) < 0)
			snprintf(nic.ifname, sizeof(nic.ifname), "%s", d->ifname);
		FUZZ_ASSERT(hpn_dra_device_name(&nic, names[i]) == 0);
	}
	return 0;
}

/* The claim's pod and a journal without a pod hold their NIC moved; another pod a child of it. */
static bool moved(const char *who)
{
	return strcmp(who, OTHER) != 0;
}

static size_t holders_of(void *ud, const char *id, struct draclaims_hold *out, size_t max)
{
	(void)ud;
	for (size_t i = 0; i < devs.n; i++)
		if (!strcmp(devs.v[i].id, id) && holders[i]) {
			if (max) {
				snprintf(out[0].pod, sizeof(out[0].pod), "%s", holders[i]);
				out[0].moved = moved(holders[i]);
			}
			return 1;
		}
	return 0;
}

static bool same(const struct dra_rec *a, const struct dra_rec *b)
{
	if (strcmp(a->uid, b->uid) || strcmp(a->ns, b->ns) || strcmp(a->name, b->name) ||
	    a->n_pods != b->n_pods || a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n_pods; i++)
		if (strcmp(a->pods[i], b->pods[i]))
			return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct dra_rec_dev *x = &a->devs[i], *y = &b->devs[i];

		if (strcmp(x->request, y->request) || strcmp(x->pool, y->pool) ||
		    strcmp(x->device, y->device) || strcmp(x->nic, y->nic) ||
		    strcmp(x->ifname, y->ifname) || strcmp(x->rdma, y->rdma) ||
		    strcmp(x->share_id, y->share_id))
			return false;
	}
	return true;
}

/* An RDMA device's name as a record keeps it: a sysfs name, one of a comma-separated list. */
static bool rdma_ok(const char *s)
{
	if (!s[0])
		return true;
	if (strlen(s) >= HPN_IBDEV_MAX || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (*s <= ' ' || *s > '~' || *s == '/' || *s == ',')
			return false;
	return true;
}

/* A record NodePrepareResources could have made. */
static void valid(const struct dra_rec *r)
{
	FUZZ_ASSERT(draclaims_uid_ok(r->uid) && hpn_k8s_dns_label(r->ns) &&
		    hpn_k8s_dns_subdomain(r->name));
	FUZZ_ASSERT(r->n_pods <= HPN_DRA_MAX_PODS && r->n >= 1 && r->n <= HPN_DRA_MAX_RESULTS);
	for (size_t i = 0; i < r->n_pods; i++)
		FUZZ_ASSERT(hpn_k8s_uid(r->pods[i]));
	for (size_t i = 0; i < r->n; i++) {
		const struct dra_rec_dev *v = &r->devs[i];

		FUZZ_ASSERT(hpn_dra_request_ok(v->request) && hpn_dra_pool_ok(v->pool) &&
			    hpn_k8s_dns_label(v->device) && hpn_alloc_id_valid(v->nic));
		FUZZ_ASSERT(!v->ifname[0] || hpn_valid_ifname(v->ifname));
		FUZZ_ASSERT(rdma_ok(v->rdma));
		{
			char nic[HPN_DRA_NAME_MAX];

			/* A shared device, and only one, with its ID; no share twice. */
			FUZZ_ASSERT(hpn_dra_share_of(v->device, nic) == (v->share_id[0] != '\0'));
			FUZZ_ASSERT(!v->share_id[0] || hpn_dra_share_id_ok(v->share_id));
			for (size_t j = 0; j < i; j++)
				FUZZ_ASSERT(strcmp(r->devs[j].device, v->device) ||
					    strcmp(r->devs[j].pool, v->pool) ||
					    strcmp(r->devs[j].share_id, v->share_id));
		}
	}
	FUZZ_ASSERT(!r->next);
}

/* r rendered reads back the same, and renders to the same text. */
static void round_trip(const struct dra_rec *r)
{
	static struct dra_rec back;
	char *text = draclaims_rec_render(r), *again;

	FUZZ_ASSERT(text);
	FUZZ_ASSERT(draclaims_rec_parse(text, strlen(text), &back) == 0 && same(r, &back));
	again = draclaims_rec_render(&back);
	FUZZ_ASSERT(again && !strcmp(text, again));
	cJSON_free(text);
	cJSON_free(again);
}

/* Why claim cl must not be a record on the node (want), or NULL: it must be one. */
static const char *refusal(const struct hpn_dra_claim *cl, char *want, size_t len)
{
	for (size_t i = 0; i < cl->n; i++) {
		const struct hpn_dra_result *res = &cl->v[i];
		size_t k;
		bool reserved = false;

		if (strcmp(res->pool, NODE)) {
			snprintf(want, len, PREFIX "device %s/%s is in pool %s", res->pool,
				 res->device, res->pool);
			return want;
		}
		char nic[HPN_DRA_NAME_MAX];
		bool share = hpn_dra_share_of(res->device, nic);
		const char *name = share ? nic : res->device;

		for (k = 0; k < devs.n && (!names[k][0] || strcmp(names[k], name)); k++)
			;
		if (k == devs.n) {
			snprintf(want, len, PREFIX "device %s is no NIC of the pool", res->device);
			return want;
		}
		/* The claim's NIC whole and shared. */
		for (size_t j = 0; j < i; j++) {
			char other[HPN_DRA_NAME_MAX];
			bool s2 = hpn_dra_share_of(cl->v[j].device, other);

			if (s2 != share && !strcmp(s2 ? other : cl->v[j].device, name)) {
				snprintf(want, len,
					 PREFIX "NIC %s is allocated both whole and shared",
					 devs.v[k].id);
				return want;
			}
		}
		for (size_t p = 0; holders[k] && p < cl->n_pods; p++)
			reserved |= !strcmp(cl->pods[p], holders[k]);
		if (share && holders[k] && moved(holders[k])) {
			snprintf(want, len, PREFIX "NIC %s (device %s) is held whole by pod %s",
				 devs.v[k].id, res->device, holders[k]);
			return want;
		}
		if (!share && holders[k] && !reserved) {
			snprintf(want, len, PREFIX "NIC %s (device %s) is held by pod %s",
				 devs.v[k].id, res->device, holders[k]);
			return want;
		}
	}
	return NULL;
}

static void on_node(const uint8_t *data, size_t size)
{
	static const char *const who[] = { NULL, POD, OTHER, "(no pod)" };
	static struct hpn_dra_claim cl;
	static struct dra_rec r;
	const struct draclaims_node nd = { .node_name = NODE,
					   .devs = &devs,
					   .names = names,
					   .n_names = devs.n,
					   .holders = holders_of };
	struct hpn_err err = { 0 };
	char msg[512], want[512];
	const char *why;
	int ret;

	if (size < 1)
		return;
	for (size_t i = 0; i < devs.n; i++)
		holders[i] = who[(data[0] >> (2 * i)) & 3];
	memset(&cl, 0, sizeof(cl));
	if (hpn_dra_claim_parse((const char *)data + 1, size - 1, NS, NAME, UID, DRV, &cl, &err) <
	    0)
		return;
	why = refusal(&cl, want, sizeof(want));
	memset(msg, 0x5a, sizeof(msg));
	ret = draclaims_rec_of(&nd, &cl, &r, msg, sizeof(msg));
	if (why) {
		FUZZ_ASSERT(ret < 0 && memchr(msg, '\0', sizeof(msg)) && strstr(msg, why) == msg);
		return;
	}
	FUZZ_ASSERT(ret == 0);
	FUZZ_ASSERT(!strcmp(r.uid, UID) && !strcmp(r.ns, NS) && !strcmp(r.name, NAME));
	FUZZ_ASSERT(r.n_pods == cl.n_pods && r.n == cl.n);
	for (size_t i = 0; i < cl.n_pods; i++)
		FUZZ_ASSERT(!strcmp(r.pods[i], cl.pods[i]));
	for (size_t i = 0; i < cl.n; i++) {
		const struct dra_rec_dev *v = &r.devs[i];
		size_t k;

		char nic[HPN_DRA_NAME_MAX];
		bool share = hpn_dra_share_of(v->device, nic);

		FUZZ_ASSERT(!strcmp(v->request, cl.v[i].request) && !strcmp(v->pool, NODE) &&
			    !strcmp(v->device, cl.v[i].device) &&
			    !strcmp(v->share_id, cl.v[i].share_id));
		for (k = 0; k < devs.n && strcmp(names[k], share ? nic : v->device); k++)
			;
		FUZZ_ASSERT(k < devs.n && !strcmp(v->nic, devs.v[k].id) &&
			    !strcmp(v->ifname, devs.v[k].ifname) &&
			    !strcmp(v->rdma, devs.v[k].rdma));
	}
	valid(&r);
	round_trip(&r);
}

static void read_back(const uint8_t *data, size_t size)
{
	static struct dra_rec r;

	if (draclaims_rec_parse((const char *)data, size, &r) < 0)
		return;
	valid(&r);
	round_trip(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		read_back(data + 1, size - 1);
	else
		on_node(data + 1, size - 1);
	return 0;
}
