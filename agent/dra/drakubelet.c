// SPDX-License-Identifier: Apache-2.0
/*
 * The DRA driver's kubelet side (drakubelet.h; agent/dra/model/dra.h is the claim
 * parser): DRAPlugin's NodePrepareResources and NodeUnprepareResources, and
 * beside them on the socket DRAResourceHealth's stream (drahealth.c's).
 * Prepare's queue and order are agent/dra/model/draprepare.h's machine; this
 * file gives it its ops: the ResourceClaim read from the API on the loop
 * (agent/core/kubeloop.c, FETCHES_MAX at once), the records, a claim checked
 * against the node and recorded, and the reply. All of it runs on the loop.
 * The records in <state-dir>/dra are the driver's state: a claim prepared
 * is answered from its record, by this process or the next one.
 * It is also the driver's root: dra_start makes and dra_free ends its other
 * parts, the Registration for the plugin watcher (draregister.c), the slice
 * publisher (draslices.c), the status writer (drastatus.c) and the health
 * stream (drahealth.c).
 */
#include "drakubelet.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "cdi.h"
#include "cdispecs.h"
#include "dra-v1.pb-c.h"
#include "dra.h"
#include "draclaims.h"
#include "drahealth.h"
#include "draprepare.h"
#include "draregister.h"
#include "draslice.h"
#include "draslices.h"
#include "drastatus.h"
#include "exposition.h"
#include "kubeloop.h"
#include "log.h"
#include "loop.h"
#include "node.h"
#include "pod.h"
#include "rdma.h"
#include "rpc.h"
#include "store.h"
#include "util.h"

/* dra-v1.proto's messages; v1beta1's are the same bytes (agent/proto/dra-v1.proto). */
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim Claim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest PrepareReq;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepareResp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry PrepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepareOne;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device Device;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest UnprepareReq;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepareResp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry
	UnprepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse UnprepareOne;
#define PB(x) k8s__io__kubelet__pkg__apis__dra__v1__##x

#define BUSY_RETRY_MS 20 /* out of memory for a job: ask again this soon */
#define FETCHES_MAX   4	 /* claims read from the API at once */
#define PTR_SIZE      sizeof(void *)
#define PATH_V1	      "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define PATH_V1BETA1  "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"
#define CLAIM_ERR_MAX 512
#define STATUS_API_MS 3000 /* one claim's status write, retries included */

/* The health service's two versions, one message set (dra-health-v1alpha1.proto). */
#define PATH_HEALTH_V1	     "/v1.DRAResourceHealth/"
#define PATH_HEALTH_V1ALPHA1 "/v1alpha1.DRAResourceHealth/"

/* The UIDs claims_ok lets through are the ones the machine holds. */
_Static_assert(DRA_CLAIM_UID_MAX == HPN_DRA_PREP_UID_MAX, "draprepare.h's UIDs are draclaims.h's");

/* A claim being read from the API for the machine (pc is the machine's call). */
struct fetch {
	struct dra *d;
	struct hpn_dra_prep_call *pc;
	size_t i;
	struct kube_op *op;
	struct fetch *next, **prev;
};

struct dra {
	struct dra_opts o;
	struct loop *loop;
	struct rpc *rpc;
	struct fetch *fetches; /* the claims being read from the API */
	struct node *node;
	struct rpc_server *srv;
	struct drareg *reg; /* Registration for the kubelet's plugin watcher */
	bool srv_stopping;
	char plugin_dir[PATH_MAX], sock[PATH_MAX], meta_dir[PATH_MAX];
	struct dra_claims claims;
	/* What the driver took from the config at start (a reload frees the config's strings). */
	char state_dir[PATH_MAX], network[256];
	struct hpn_dra_prep prep; /* NodePrepareResources' calls; its prepares[api][ok] */
	char names[HPN_AGENT_MAX_DEVICES][HPN_DRA_NAME_MAX]; /* node->devs.v[i]'s DRA name */
	size_t n_names;
	/*
	 * node->devs.v[i] as sysfs last showed it (nic_ok[i]): its attributes for
	 * the device metadata; a NIC in a pod keeps those of its last read.
	 */
	struct hpn_dra_nic nics[HPN_AGENT_MAX_DEVICES];
	bool nic_ok[HPN_AGENT_MAX_DEVICES];
	struct loop_src retry;
	struct drastatus *status; /* the claims' status.devices written back */
	struct drahealth *health; /* the devices' health streamed to the kubelet */
	struct draslices *slices; /* the pool published as ResourceSlices */
	bool registered;	  /* the kubelet's last NotifyRegistrationStatus */
	unsigned long unprepares;
};

const struct dra_claims *dra_prepared(const struct dra *d)
{
	return &d->claims;
}

void dra_metrics(struct sbuf *b, void *ud)
{
	static const char *from[] = { "record", "api" }, *result[] = { "error", "ok" };
	const struct dra *d = ud;
	size_t claims = 0;

	for (const struct dra_rec *r = d->claims.recs; r; r = r->next)
		claims++;
	expo_gauge(b, "hpn_rdma_dra_registered", "Whether the kubelet registered the DRA driver.",
		   drareg_registered(d->reg));
	expo_gauge(b, "hpn_rdma_dra_claims_prepared",
		   "ResourceClaims prepared on this node (records in <stateDir>/dra).",
		   (double)claims);
	expo_family(b, "hpn_rdma_dra_prepares_total", "counter",
		    "Claims NodePrepareResources answered, by where the answer came from (the "
		    "claim read from the API, or a record of an earlier Prepare) and result.");
	for (int a = 1; a >= 0; a--)
		for (int ok = 1; ok >= 0; ok--)
			expo_sample_u64(
				b, "hpn_rdma_dra_prepares_total",
				(const char *[]){ "from", from[a], "result", result[ok], NULL },
				d->prep.prepares[a][ok]);
	expo_counter(b, "hpn_rdma_dra_unprepares_total", "Claims NodeUnprepareResources answered.",
		     d->unprepares);
	drastatus_metrics(b, d->status);
	drahealth_metrics(b, d->health);
	if (d->slices)
		draslices_metrics(b, d->slices);
}

/* ---- device names --------------------------------------------------------------- */

void dra_scanned(struct dra *d)
{
	const struct agent_devs *devs;

	if (!d)
		return;
	devs = &d->node->devs;
	for (size_t i = 0; i < devs->n; i++) {
		const struct agent_dev *ad = &devs->v[i];
		struct hpn_dra_nic nic = { 0 };
		struct hpn_err err = { 0 };
		bool ok = hpn_dra_nic_read(d->node->conf.sysfs_root, ad->ifname, (unsigned int)i,
					   &nic, &err) == 0;

		/* A NIC moved into a pod is not in the host's sysfs: named by its ID alone. */
		if (!ok) {
			memset(&nic, 0, sizeof(nic));
			if (hpn_pci_normalise(ad->id, nic.pci) < 0)
				snprintf(nic.ifname, sizeof(nic.ifname), "%s", ad->ifname);
		}
		if (hpn_dra_device_name(&nic, d->names[i]) < 0)
			d->names[i][0] = '\0';
		if (ok) {
			d->nics[i] = nic;
			d->nic_ok[i] = true;
		} else if (d->nic_ok[i]) {
			char was[HPN_DRA_NAME_MAX];

			/* Another NIC at this place since: its last read is not this one's. */
			if (hpn_dra_device_name(&d->nics[i], was) < 0 || strcmp(was, d->names[i]))
				d->nic_ok[i] = false;
		}
	}
	d->n_names = devs->n;
	draslices_scanned(d->slices);
}

/*
 * draclaims_node's holders (ud: the node's config): the journals that hold NIC
 * id, each one's pod UID and whether the NIC itself moved (else a child of it).
 */
static size_t holders(void *ud, const char *id, struct draclaims_hold *out, size_t max)
{
	const struct hpn_conf *conf = ud;
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	char **keys = NULL;
	size_t n = 0;

	if (hpn_store_open_here(conf->state_dir, conf->name, &st, &err) < 0)
		return 0;
	if (hpn_store_keys(&st, &keys, &err) < 0)
		keys = NULL;
	for (size_t k = 0; keys && keys[k]; k++) {
		struct hpn_journal j = { 0 };
		struct hpn_err jerr = { 0 };

		if (hpn_journal_read(&st, keys[k], &j, &jerr) < 0)
			continue;
		for (size_t i = 0; i < j.n_nics; i++) {
			char jid[HPN_ALLOC_ID_MAX];

			hpn_alloc_journal_id(&j.nics[i], jid);
			if (strcmp(jid, id))
				continue;
			if (n < max) {
				snprintf(out[n].pod, sizeof(out[n].pod), "%s",
					 j.pod.uid[0] ? j.pod.uid : "(no pod)");
				out[n].moved = j.nics[i].kind == HPN_NIC_MOVED;
			}
			n++;
		}
		hpn_journal_free(&j);
	}
	hpn_strv_free(keys);
	hpn_store_close(&st);
	return n;
}

/* ---- NodePrepareResources -------------------------------------------------------- */

/* Every claim answered, the kubelet still waiting (ops.reply): the response, keyed by claim UID. */
static void prepare_answer(void *ud, const struct hpn_dra_prep_call *pc)
{
	struct rpc_call *c = pc->owner;
	size_t n = pc->n, nd = 0;
	PrepareResp resp =
		K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
	PrepareEntry *e = calloc(n ? n : 1, sizeof(*e));
	PrepareEntry **ep = calloc(n ? n : 1, PTR_SIZE);
	PrepareOne *one = calloc(n ? n : 1, sizeof(*one));
	Device *dv = calloc(n * HPN_DRA_MAX_RESULTS + 1, sizeof(*dv));
	Device **dvp = calloc(n * HPN_DRA_MAX_RESULTS + 1, PTR_SIZE);
	char(*cdi)[HPN_CDI_NAME_MAX] = calloc(n ? n : 1, HPN_CDI_NAME_MAX);
	char **cdip = calloc(n ? n : 1, PTR_SIZE);
	char **req = calloc(n * HPN_DRA_MAX_RESULTS + 1, PTR_SIZE);

	(void)ud;
	rpc_call_on_close(c, NULL, NULL);
	if (!e || !ep || !one || !dv || !dvp || !cdi || !cdip || !req) {
		rpc_fail(c, RPC_INTERNAL, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const struct hpn_dra_prep_claim *q = &pc->v[i];
		const struct dra_rec *rec = q->rec;

		PB(node_prepare_resources_response__claims_entry__init)(&e[i]);
		PB(node_prepare_resource_response__init)(&one[i]);
		e[i].key = (char *)q->uid;
		e[i].value = &one[i];
		ep[i] = &e[i];
		if (!rec) {
			one[i].error = (char *)(q->err[0] ? q->err : "not prepared");
			continue;
		}
		{
			char id[HPN_CDI_ID_MAX];

			draclaims_cdi_id(q->uid, id);
			hpn_cdi_name(id, cdi[i]);
			cdip[i] = cdi[i];
		}
		one[i].devices = &dvp[nd];
		for (size_t k = 0; k < rec->n; k++, nd++) {
			const struct dra_rec_dev *v = &rec->devs[k];

			PB(device__init)(&dv[nd]);
			req[nd] = (char *)v->request;
			dv[nd].n_request_names = 1;
			dv[nd].request_names = &req[nd];
			dv[nd].pool_name = (char *)v->pool;
			dv[nd].device_name = (char *)v->device;
			dv[nd].n_cdi_device_ids = 1;
			dv[nd].cdi_device_ids = &cdip[i];
			dvp[nd] = &dv[nd];
			one[i].n_devices++;
		}
	}
	resp.n_claims = n;
	resp.claims = ep;
	rpc_reply_msg(c, (const ProtobufCMessage *)&resp);
out:
	free(e);
	free(ep);
	free(one);
	free(dv);
	free(dvp);
	free(cdi);
	free(cdip);
	free(req);
}

/* cppcheck-suppress constParameter ; the type rpc_call_on_close takes */
static void pcall_closed(struct rpc_call *c, void *ud)
{
	(void)c; /* freed by rpc.c after this */
	hpn_dra_prep_gone(ud);
}

/*
 * ops.lookup: q answered from the record of its UID, if there is one.
 * Idempotent: what was prepared is the answer, its spec written anew if it is gone.
 */
static bool from_record(void *ud, struct hpn_dra_prep_claim *q)
{
	struct dra *d = ud;
	const struct dra_rec *r = draclaims_find(&d->claims, q->uid);
	char msg[448] = "";

	if (!r)
		return false;
	if (strcmp(r->ns, q->ns) || strcmp(r->name, q->name))
		hpn_msgf(q->err, sizeof(q->err), "claim %s/%s: UID %s was prepared as claim %s/%s",
			 q->ns, q->name, q->uid, r->ns, r->name);
	else if (draclaims_respec(&d->claims, r, msg, sizeof(msg)) < 0)
		hpn_msgf(q->err, sizeof(q->err), "claim %s/%s: %s", q->ns, q->name, msg);
	else
		q->rec = r;
	return true;
}

/*
 * The attributes of device name as the slice publishes them (NULL: not read,
 * or an error): a shared device's are its NIC's and the bool "shared".
 */
static cJSON *device_attrs(const struct dra *d, const char *name)
{
	char nic[HPN_DRA_NAME_MAX];
	bool share = hpn_dra_share_of(name, nic);

	for (size_t i = 0; i < d->n_names; i++) {
		struct hpn_err err = { 0 };
		cJSON *a, *b;

		if (strcmp(d->names[i], share ? nic : name) || !d->nic_ok[i])
			continue;
		a = hpn_dra_nic_attrs(&d->nics[i], &err);
		if (!a)
			hpn_warn("DRA: device %s: no attributes in its metadata: %s", name,
				 err.msg);
		b = a && share ? cJSON_AddObjectToObject(a, "shared") : NULL;
		if (a && share && (!b || !cJSON_AddBoolToObject(b, "bool", true))) {
			hpn_warn("DRA: device %s: no attributes in its metadata: out of memory",
				 name);
			cJSON_Delete(a);
			a = NULL;
		}
		return a;
	}
	return NULL;
}

/*
 * ops.prepare: the claim read from the API, checked against the node: every
 * result of ours a NIC of this node's pool that no other pod holds. The
 * record made (its spec and file written) and listed, or q->err says why not.
 */
static void prepare_claim(void *ud, struct hpn_dra_prep_claim *q, const struct hpn_dra_claim *cl)
{
	struct dra *d = ud;
	struct draclaims_node nd = { .node_name = d->o.node_name,
				     .devs = &d->node->devs,
				     .names = d->names,
				     .n_names = d->n_names,
				     .holders = holders,
				     .ud = &d->node->conf,
				     .recs = d->claims.recs };
	struct dra_rec *r = calloc(1, sizeof(*r));
	char *msg = q->err;
	size_t len = sizeof(q->err);

	if (!r) {
		hpn_msgf(msg, len, "claim %s/%s: out of memory", q->ns, q->name);
		return;
	}
	/* A share needs the node's RDMA netns mode shared (no RDMA netlink: the kernel's default). */
	for (size_t i = 0; i < cl->n; i++) {
		char nic[HPN_DRA_NAME_MAX];
		enum hpn_rdma_netns mode = HPN_RDMA_NETNS_SHARED;
		struct hpn_err err = { 0 };

		if (!hpn_dra_share_of(cl->v[i].device, nic))
			continue;
		if (hpn_rdma_node_netns_mode(d->node->conf.sysfs_root, &mode, &err) < 0)
			mode = HPN_RDMA_NETNS_SHARED;
		nd.rdma_exclusive = mode == HPN_RDMA_NETNS_EXCLUSIVE;
		break;
	}
	if (draclaims_rec_of(&nd, cl, r, msg, len) < 0)
		goto fail;
	{
		char cmsg[448] = "";
		cJSON *attrs[HPN_DRA_MAX_RESULTS] = { 0 };
		int ar;

		for (size_t i = 0; i < r->n; i++)
			attrs[i] = device_attrs(d, r->devs[i].device);
		ar = draclaims_add(&d->claims, r, (const cJSON *const *)attrs, cmsg, sizeof(cmsg));
		for (size_t i = 0; i < r->n; i++)
			cJSON_Delete(attrs[i]);
		if (ar < 0) {
			hpn_msgf(msg, len, "claim %s/%s: %s", q->ns, q->name, cmsg);
			goto fail;
		}
	}
	q->rec = r;
	{
		char nics[512] = "";

		for (size_t i = 0; i < r->n; i++) {
			size_t at = strlen(nics);

			snprintf(nics + at, sizeof(nics) - at, "%s%s (%s%s%s)", at ? ", " : "",
				 r->devs[i].nic, r->devs[i].rdma,
				 r->devs[i].share_id[0] ? ", share " : "", r->devs[i].share_id);
		}
		hpn_info("DRA: prepared claim %s/%s (%s): %s", q->ns, q->name, q->uid, nics);
	}
	drahealth_changed(d->health);
	return;
fail:
	hpn_warn("DRA: %s", msg);
	free(r);
}

/* ops.fetch's end: the claim parsed, or why not, to the machine. */
static void fetched(void *ud, struct kube_result *res)
{
	struct fetch *f = ud;
	struct dra *d = f->d;
	const struct hpn_dra_prep_claim *q = &f->pc->v[f->i];
	struct hpn_dra_claim claim = { 0 };
	char what[384];

	*f->prev = f->next;
	if (f->next)
		f->next->prev = f->prev;
	snprintf(what, sizeof(what), "ResourceClaim %s/%s", q->ns, q->name);
	if (res->r >= 0 && (res->a.status < 200 || res->a.status > 299))
		kube_result_status_err(res,
				       &(struct hpn_kube_call){ .method = "GET", .what = what });
	if (res->r >= 0)
		res->r = hpn_dra_claim_parse(res->a.body, res->a.len, q->ns, q->name, q->uid,
					     d->o.driver, &claim, &res->err);
	hpn_dra_prep_fetched(&d->prep, f->pc, f->i, res->r, &claim, &res->err);
	free(f);
}

/* ops.fetch: claim i of pc read from the API, on the loop, beside other claims' reads. */
static int fetch_claim(void *ud, struct hpn_dra_prep_call *pc, size_t i)
{
	struct dra *d = ud;
	const struct hpn_dra_prep_claim *q = &pc->v[i];
	struct fetch *f = calloc(1, sizeof(*f));
	char path[512], what[384];
	int r;

	if (!f)
		return -ENOMEM;
	f->d = d;
	f->pc = pc;
	f->i = i;
	snprintf(what, sizeof(what), "ResourceClaim %s/%s", q->ns, q->name);
	snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s",
		 q->ns, q->name);
	r = kube_call(d->o.kube, d->o.kubeconfig,
		      &(struct hpn_kube_call){ .method = "GET",
					       .path = path,
					       .what = what,
					       .resource = "resourceclaims",
					       .ns = q->ns,
					       .timeout_ms = (unsigned)d->o.api_timeout_ms,
					       .retry = true },
		      fetched, f, &f->op);
	if (r < 0) {
		free(f);
		return r;
	}
	f->next = d->fetches;
	if (f->next)
		f->next->prev = &f->next;
	f->prev = &d->fetches;
	d->fetches = f;
	return 0;
}

static void fetch_retry(void *ud)
{
	struct dra *d = ud;

	loop_timer_set(&d->retry, BUSY_RETRY_MS, 0);
}

static void fetch_failed(void *ud, const struct hpn_dra_prep_claim *q)
{
	(void)ud;
	hpn_warn("DRA: %s", q->err);
}

static const struct hpn_dra_prep_ops prep_ops = {
	.fetch = fetch_claim,
	.lookup = from_record,
	.prepare = prepare_claim,
	.reply = prepare_answer,
	.retry = fetch_retry,
	.fetch_failed = fetch_failed,
};

static void on_retry(struct loop_src *s)
{
	struct dra *d = s->ud;

	hpn_dra_prep_pump(&d->prep);
}

/* The kubelet's claims, checked as any input is; INVALID_ARGUMENT names the first bad one. */
static bool claims_ok(struct rpc_call *c, Claim *const *v, size_t n)
{
	char msg[256];

	if (draclaims_request_ok(v, n, msg, sizeof(msg)))
		return true;
	hpn_warn("DRA: request refused: %s", msg);
	rpc_fail(c, RPC_INVALID_ARGUMENT, msg);
	return false;
}

static void prepare(struct rpc_call *c, const uint8_t *buf, size_t len, void *ud)
{
	struct dra *d = ud;
	PrepareReq *req = PB(node_prepare_resources_request__unpack)(NULL, len, buf);
	struct hpn_dra_prep_call *pc;
	size_t n;

	if (!req) {
		rpc_fail(c, RPC_INVALID_ARGUMENT,
			 "the request is not a NodePrepareResourcesRequest");
		return;
	}
	n = req->n_claims;
	if (!claims_ok(c, req->claims, n))
		goto out;
	pc = hpn_dra_prep_call_new(n);
	if (!pc) {
		rpc_fail(c, RPC_INTERNAL, "out of memory");
		goto out;
	}
	pc->owner = c;
	for (size_t i = 0; i < n; i++) {
		struct hpn_dra_prep_claim *q = &pc->v[i];

		snprintf(q->ns, sizeof(q->ns), "%s", req->claims[i]->namespace_);
		snprintf(q->name, sizeof(q->name), "%s", req->claims[i]->name);
		snprintf(q->uid, sizeof(q->uid), "%s", req->claims[i]->uid);
	}
	/* Before the machine has it: a reply made at once clears it again (prepare_answer). */
	rpc_call_on_close(c, pcall_closed, pc);
	hpn_dra_prep_submit(&d->prep, pc);
	hpn_info("DRA: NodePrepareResources for %zu claims", n);
out:
	PB(node_prepare_resources_request__free_unpacked)(req, NULL);
}

/* ---- the device metadata's networkData, at the pod's ADD ----------------------------- */

int dra_pod_attached(struct dra *d, const char *uid)
{
	const struct dra_rec **recs;
	size_t n_recs = 0;
	int written = 0;

	if (!d || !uid[0])
		return 0;
	for (const struct dra_rec *r = d->claims.recs; r; r = r->next)
		n_recs++;
	recs = calloc(n_recs ? n_recs : 1, PTR_SIZE);
	if (!recs)
		return -ENOMEM;
	n_recs = 0;
	for (const struct dra_rec *r = d->claims.recs; r; r = r->next)
		recs[n_recs++] = r;
	for (const struct dra_rec *r = d->claims.recs; r; r = r->next) {
		struct hpn_drameta_net *nets = calloc(HPN_DRA_MAX_RESULTS, sizeof(*nets));
		const struct hpn_drameta_net *netp[HPN_DRA_MAX_RESULTS] = { 0 };
		bool have[HPN_DRA_MAX_RESULTS] = { 0 }, reserved = false;
		char msg[448] = "";
		int w;

		for (size_t p = 0; p < r->n_pods; p++)
			reserved |= !strcmp(r->pods[p], uid);
		if (!reserved || !nets) {
			free(nets);
			continue;
		}
		w = drastatus_pod_nets(d->state_dir, d->network, recs, n_recs, r, uid, nets, have,
				       msg, sizeof(msg));
		for (size_t i = 0; w == 0 && i < r->n; i++)
			netp[i] = have[i] ? &nets[i] : NULL;
		if (w == 0)
			w = draclaims_meta_net(&d->claims, r, netp, msg, sizeof(msg));
		free(nets);
		if (w < 0) {
			hpn_warn("DRA: claim %s/%s: networkData not written: %s", r->ns, r->name,
				 msg);
			free(recs);
			return w;
		}
		if (w > 0)
			hpn_info("DRA: claim %s/%s: networkData of pod %s in its device metadata "
				 "(%d files)",
				 r->ns, r->name, uid, w);
		written += w;
	}
	free(recs);
	return written;
}

/* ---- NodeUnprepareResources -------------------------------------------------------- */

static void unprepare(struct rpc_call *c, const uint8_t *buf, size_t len, void *ud)
{
	struct dra *d = ud;
	UnprepareReq *req = PB(node_unprepare_resources_request__unpack)(NULL, len, buf);
	UnprepareResp resp =
		K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
	UnprepareEntry *e = NULL, **ep = NULL;
	UnprepareOne *one = NULL;
	char(*errs)[CLAIM_ERR_MAX] = NULL;
	size_t n;

	if (!req) {
		rpc_fail(c, RPC_INVALID_ARGUMENT,
			 "the request is not a NodeUnprepareResourcesRequest");
		return;
	}
	n = req->n_claims;
	if (!claims_ok(c, req->claims, n))
		goto out;
	e = calloc(n ? n : 1, sizeof(*e));
	ep = calloc(n ? n : 1, PTR_SIZE);
	one = calloc(n ? n : 1, sizeof(*one));
	errs = calloc(n ? n : 1, sizeof(*errs));
	if (!e || !ep || !one || !errs) {
		rpc_fail(c, RPC_INTERNAL, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const Claim *q = req->claims[i];
		struct dra_rec *gone;
		int r;

		PB(node_unprepare_resources_response__claims_entry__init)(&e[i]);
		PB(node_unprepare_resource_response__init)(&one[i]);
		e[i].key = q->uid;
		e[i].value = &one[i];
		ep[i] = &e[i];
		r = draclaims_drop(&d->claims, q->uid, &gone);
		if (r < 0) {
			hpn_msgf(errs[i], sizeof(errs[i]), "claim %s/%s: remove its record: %s",
				 q->namespace_, q->name, strerror(-r));
			one[i].error = errs[i];
			hpn_warn("DRA: %s", errs[i]);
			continue;
		}
		d->unprepares++;
		if (gone) {
			/* A Prepare still waiting answers from its own copy, not this one. */
			hpn_dra_prep_forget(&d->prep, gone);
			free(gone);
			hpn_info("DRA: unprepared claim %s/%s (%s)", q->namespace_, q->name,
				 q->uid);
		}
	}
	resp.n_claims = n;
	resp.claims = ep;
	rpc_reply_msg(c, (const ProtobufCMessage *)&resp);
	drahealth_changed(d->health);
out:
	free(e);
	free(ep);
	free(one);
	free(errs);
	PB(node_unprepare_resources_request__free_unpacked)(req, NULL);
}

/* ---- DRAResourceHealth ---------------------------------------------------------------- */

static void watch_v1(struct rpc_call *c, const uint8_t *buf, size_t len, void *ud)
{
	const struct dra *d = ud;

	drahealth_watch(d->health, c, buf, len, "v1");
}

static void watch_v1alpha1(struct rpc_call *c, const uint8_t *buf, size_t len, void *ud)
{
	const struct dra *d = ud;

	drahealth_watch(d->health, c, buf, len, "v1alpha1");
}

void dra_devices_changed(struct dra *d)
{
	if (!d)
		return;
	drahealth_changed(d->health);
	draslices_scanned(d->slices);
}

static const struct rpc_method methods[] = {
	{ PATH_V1 "NodePrepareResources", false, prepare },
	{ PATH_V1 "NodeUnprepareResources", false, unprepare },
	{ PATH_V1BETA1 "NodePrepareResources", false, prepare },
	{ PATH_V1BETA1 "NodeUnprepareResources", false, unprepare },
	{ PATH_HEALTH_V1 "NodeWatchResources", true, watch_v1 },
	{ PATH_HEALTH_V1ALPHA1 "NodeWatchResources", true, watch_v1alpha1 },
};

/* ---- start and stop ------------------------------------------------------------------ */

static void srv_stopped(void *ud)
{
	struct dra *d = ud;

	d->srv = NULL;
	d->srv_stopping = false;
}

void dra_stop(struct dra *d)
{
	if (!d)
		return;
	draslices_stop(d->slices);
	drastatus_stop(d->status);
	drahealth_stop(d->health);
	drareg_stop(d->reg);
	loop_timer_set(&d->retry, LOOP_OFF, 0);
	if (d->srv && !d->srv_stopping) {
		d->srv_stopping = true;
		rpc_server_stop(d->srv, srv_stopped, d);
	}
	/* Calls waiting: their claims answer that we stop (or nobody), reads under way too. */
	hpn_dra_prep_stop(&d->prep);
	for (struct fetch *f = d->fetches, *next; f; f = next) {
		struct kube_result res = { 0 };

		next = f->next; /* fetched frees f; the machine stops, so it starts no other */
		kube_cancel(f->op);
		res.r = hpn_err_set(&res.err, HPN_E_TRY_AGAIN, ECANCELED,
				    "hpn-rdma-agent is stopping");
		fetched(f, &res);
	}
}

bool dra_serving(const struct dra *d)
{
	return d && (d->srv || drareg_serving(d->reg));
}

static int paths(struct dra *d, struct hpn_err *err)
{
	const char *kd = d->o.kubelet_dir;

	if (hpn_snprintf(d->plugin_dir, sizeof(d->plugin_dir), "%s/plugins/%s", kd, d->o.driver) <
		    0 ||
	    hpn_snprintf(d->sock, sizeof(d->sock), "%s/dra.sock", d->plugin_dir) < 0 ||
	    strlen(d->sock) >= 108)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
				   "--kubelet-dir %s with driver %s is too long for a unix socket",
				   kd, d->o.driver);
	return 0;
}

int dra_start(struct loop *l, struct rpc *rpc, struct node *node, const struct dra_opts *o,
	      struct dra **ret, struct hpn_err *err)
{
	struct dra *d = calloc(1, sizeof(*d));
	int r;

	if (!d)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	*d = (struct dra){ .o = *o, .loop = l, .rpc = rpc, .node = node };
	d->retry.fd = -1;
	hpn_dra_prep_init(&d->prep, &prep_ops, d, FETCHES_MAX);
	r = paths(d, err);
	if (r < 0)
		goto fail;
	/* plugins/ is the kubelet's; our directory in it root's alone. */
	if (hpn_mkdir_p(d->plugin_dir, 0750) < 0 || chmod(d->plugin_dir, 0750) < 0) {
		r = hpn_err_set(err, HPN_E_IO, errno, "DRA: create %s: %s", d->plugin_dir,
				strerror(errno));
		goto fail;
	}
	if (hpn_snprintf(d->state_dir, sizeof(d->state_dir), "%s", node->conf.state_dir) < 0 ||
	    hpn_snprintf(d->network, sizeof(d->network), "%s", node->conf.name) < 0) {
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
				"DRA: stateDir or the network's name is too long");
		goto fail;
	}
	if (hpn_snprintf(d->meta_dir, sizeof(d->meta_dir), "%s/dra-device-metadata",
			 d->plugin_dir) < 0) {
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
				"DRA: %s/dra-device-metadata is too long", d->plugin_dir);
		goto fail;
	}
	r = draclaims_open(&d->claims,
			   &(struct draclaims_opts){ .meta_dir = d->meta_dir,
						     .driver = o->driver,
						     .state_dir = d->state_dir,
						     .network = d->network,
						     .sysfs_root = node->conf.sysfs_root,
						     .dev_root = o->dev_root,
						     .cdi_dir = o->cdi_dir,
						     .hook = o->cdi_hook,
						     .nccl = &node->conf.nccl },
			   err);
	if (r < 0)
		goto fail;
	r = drastatus_start(l, &d->claims,
			    &(struct drastatus_opts){ .state_dir = d->state_dir,
						      .network = d->network,
						      .kube = o->kube,
						      .kubeconfig = o->kubeconfig,
						      .driver = o->driver,
						      .api_timeout_ms = STATUS_API_MS },
			    &d->status, err);
	if (r < 0)
		goto fail;
	if (o->kubeconfig) {
		struct draslices_opts so = { .driver = o->driver,
					     .node_name = o->node_name,
					     .kube = o->kube,
					     .kubeconfig = o->kubeconfig,
					     .api_timeout_ms = o->api_timeout_ms,
					     .taint_effect = o->taint_effect,
					     .shares = o->shares };

		r = draslices_start(l, node, &so, &d->slices, err);
		if (r < 0)
			goto fail;
	}
	r = drahealth_new(l, node, &d->claims, &d->health);
	if (r < 0) {
		hpn_err_set(err, HPN_E_INTERNAL, -r, "DRA: device health: %s", strerror(-r));
		goto fail;
	}
	dra_scanned(d);
	r = loop_timer(l, &d->retry, LOOP_OFF, 0, on_retry, d);
	if (r < 0) {
		hpn_err_set(err, HPN_E_INTERNAL, -r, "timer: %s", strerror(-r));
		goto fail;
	}
	r = rpc_server_start(rpc, d->sock, methods, HPN_ARRAY_SIZE(methods), d, &d->srv);
	if (r < 0) {
		hpn_err_set(err, HPN_E_INTERNAL, -r, "DRA: cannot serve %s: %s", d->sock,
			    strerror(-r));
		goto fail;
	}
	r = drareg_start(l, rpc, o->kubelet_dir, o->driver, d->sock, &d->reg, err);
	if (r < 0)
		goto fail;
	hpn_info("DRA: driver %s for node %s: DRAPlugin v1 and v1beta1, DRAResourceHealth v1 and "
		 "v1alpha1 on %s; claims' CDI specs in %s, records in %s",
		 o->driver, o->node_name, d->sock, o->cdi_dir, d->claims.dir);
	*ret = d;
	return 0;
fail:
	dra_free(d);
	return r;
}

void dra_reloaded(struct dra *d)
{
	const struct hpn_conf *c;
	struct dra_claims *cl;

	if (!d)
		return;
	c = &d->node->conf;
	cl = &d->claims;
	if (strcmp(c->state_dir, d->state_dir) || strcmp(c->name, d->network))
		hpn_warn("DRA: the config's stateDir or network name changed (%s, %s): the claims' "
			 "records stay in %s for %s until hpn-rdma-agent restarts",
			 c->state_dir, c->name, cl->dir, d->network);
	if (hpn_snprintf(cl->sysfs_root, sizeof(cl->sysfs_root), "%s", c->sysfs_root) < 0)
		hpn_warn("DRA: sysfsRoot %s is too long: the claims' devices still read under %s",
			 c->sysfs_root, cl->sysfs_root);
	if (draclaims_set_hints(cl, &c->nccl))
		hpn_info("DRA: the config's NCCL hints changed (%s): the claims' CDI specs written "
			 "anew",
			 cl->hints ? cl->hints_dir : "off");
}

void dra_free(struct dra *d)
{
	if (!d)
		return;
	if (d->srv)
		unlink(d->sock);
	while (d->fetches) {
		struct fetch *f = d->fetches;

		kube_cancel(f->op);
		d->fetches = f->next;
		free(f);
	}
	hpn_dra_prep_free(&d->prep);
	drastatus_free(d->status);
	drahealth_free(d->health);
	draclaims_free(&d->claims);
	draslices_free(d->slices);
	drareg_free(d->reg);
	loop_close(&d->retry);
	free(d);
}
