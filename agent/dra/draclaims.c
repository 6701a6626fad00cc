// SPDX-License-Identifier: Apache-2.0
/*
 * The DRA driver's prepared claims (draclaims.h): records in <state-dir>/dra
 * and each claim's CDI spec.
 */
#include "draclaims.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cdispecs.h"
#include "log.h"
#include "util.h"

#define REC_MAX ((size_t)64 * 1024)

/* A claim's shareIDs always fit the env of its spec (equal now: either may grow). */
/* NOLINTNEXTLINE(misc-redundant-expression): the sides are two headers' limits */
_Static_assert(HPN_CDI_SHARE_IDS_MAX >= HPN_DRA_MAX_RESULTS * HPN_DRA_SHARE_ID_MAX,
	       "cdi.h's HPN_CDI_SHARE_IDS_MAX holds a claim's shareIDs");

struct dra_rec *draclaims_find(const struct dra_claims *cl, const char *uid)
{
	for (struct dra_rec *r = cl->recs; r; r = r->next)
		if (!strcmp(r->uid, uid))
			return r;
	return NULL;
}

char *draclaims_rec_render(const struct dra_rec *r)
{
	cJSON *root = cJSON_CreateObject(), *pods, *devs;
	char *s = NULL;

	if (!root)
		return NULL;
	cJSON_AddNumberToObject(root, "version", 1);
	cJSON_AddStringToObject(root, "uid", r->uid);
	cJSON_AddStringToObject(root, "namespace", r->ns);
	cJSON_AddStringToObject(root, "name", r->name);
	if (r->pod_claim[0])
		cJSON_AddStringToObject(root, "podClaim", r->pod_claim);
	pods = cJSON_AddArrayToObject(root, "pods");
	for (size_t i = 0; pods && i < r->n_pods; i++)
		cJSON_AddItemToArray(pods, cJSON_CreateString(r->pods[i]));
	devs = cJSON_AddArrayToObject(root, "devices");
	for (size_t i = 0; devs && i < r->n; i++) {
		const struct dra_rec_dev *v = &r->devs[i];
		cJSON *o = cJSON_CreateObject();

		if (!o)
			break;
		cJSON_AddItemToArray(devs, o);
		cJSON_AddStringToObject(o, "request", v->request);
		cJSON_AddStringToObject(o, "pool", v->pool);
		cJSON_AddStringToObject(o, "device", v->device);
		cJSON_AddStringToObject(o, "nic", v->nic);
		cJSON_AddStringToObject(o, "ifname", v->ifname);
		cJSON_AddStringToObject(o, "rdma", v->rdma);
		if (v->share_id[0])
			cJSON_AddStringToObject(o, "shareID", v->share_id);
	}
	s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	return s;
}

/* The string at key into out (at most len - 1 bytes, non-empty unless empty_ok). */
static bool rec_str(const cJSON *o, const char *key, char *out, size_t len, bool empty_ok)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsString(v) || strlen(v->valuestring) >= len ||
	    (!empty_ok && !v->valuestring[0]))
		return false;
	snprintf(out, len, "%s", v->valuestring);
	return true;
}

/* An RDMA device's name as a record may hold it: a sysfs name, and one of a comma-separated list. */
static bool rec_rdma_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n)
		return true;
	if (n >= HPN_IBDEV_MAX || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (!isgraph((unsigned char)*s) || *s == '/' || *s == ',')
			return false;
	return true;
}

/*
 * A record NodePrepareResources could have written: the claim's names and
 * pods as the API's syntax has them, its devices' as the claim parser and
 * the pool gave them. A record is the agent's own file, but what it holds
 * goes into API paths (drastatus.c), CDI specs and the lookup's answers: it
 * is checked as any input is (found by fuzz_drarecord).
 */
static bool rec_valid(const struct dra_rec *r)
{
	if (!draclaims_uid_ok(r->uid) || !hpn_k8s_dns_label(r->ns) ||
	    !hpn_k8s_dns_subdomain(r->name) ||
	    (r->pod_claim[0] && !hpn_k8s_dns_label(r->pod_claim)))
		return false;
	for (size_t i = 0; i < r->n_pods; i++)
		if (!hpn_k8s_uid(r->pods[i]))
			return false;
	for (size_t i = 0; i < r->n; i++) {
		const struct dra_rec_dev *v = &r->devs[i];
		char nic[HPN_DRA_NAME_MAX];

		if (!hpn_dra_request_ok(v->request) || !hpn_dra_pool_ok(v->pool) ||
		    !hpn_k8s_dns_label(v->device) || !hpn_alloc_id_valid(v->nic) ||
		    (v->ifname[0] && !hpn_valid_ifname(v->ifname)) || !rec_rdma_ok(v->rdma))
			return false;
		/* A share, and only a share, has its ID (the claim parser's rule). */
		if (hpn_dra_share_of(v->device, nic) != (v->share_id[0] != '\0') ||
		    (v->share_id[0] && !hpn_dra_share_id_ok(v->share_id)))
			return false;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(r->devs[j].pool, v->pool) &&
			    !strcmp(r->devs[j].device, v->device) &&
			    !strcmp(r->devs[j].share_id, v->share_id))
				return false;
	}
	return true;
}

int draclaims_rec_parse(const char *text, size_t len, struct dra_rec *r)
{
	cJSON *root = cJSON_ParseWithLength(text, len);
	const cJSON *pods, *devs, *e;
	bool ok;

	memset(r, 0, sizeof(*r));
	ok = cJSON_IsObject(root) && rec_str(root, "uid", r->uid, sizeof(r->uid), false) &&
	     rec_str(root, "namespace", r->ns, sizeof(r->ns), false) &&
	     rec_str(root, "name", r->name, sizeof(r->name), false) &&
	     (!cJSON_GetObjectItemCaseSensitive(root, "podClaim") ||
	      rec_str(root, "podClaim", r->pod_claim, sizeof(r->pod_claim), false));
	pods = cJSON_GetObjectItemCaseSensitive(root, "pods");
	devs = cJSON_GetObjectItemCaseSensitive(root, "devices");
	ok = ok && cJSON_IsArray(pods) && cJSON_IsArray(devs) &&
	     cJSON_GetArraySize(pods) <= HPN_DRA_MAX_PODS &&
	     cJSON_GetArraySize(devs) <= HPN_DRA_MAX_RESULTS && cJSON_GetArraySize(devs) > 0;
	if (!ok)
		pods = devs = NULL;
	cJSON_ArrayForEach (e, pods) {
		if (!cJSON_IsString(e) || strlen(e->valuestring) > HPN_POD_UID_MAX) {
			ok = false;
			break;
		}
		snprintf(r->pods[r->n_pods++], HPN_POD_UID_MAX + 1, "%s", e->valuestring);
	}
	if (!ok)
		devs = NULL;
	cJSON_ArrayForEach (e, devs) {
		struct dra_rec_dev *v = &r->devs[r->n];

		if (!rec_str(e, "request", v->request, sizeof(v->request), false) ||
		    !rec_str(e, "pool", v->pool, sizeof(v->pool), false) ||
		    !rec_str(e, "device", v->device, sizeof(v->device), false) ||
		    !rec_str(e, "nic", v->nic, sizeof(v->nic), false) ||
		    !rec_str(e, "ifname", v->ifname, sizeof(v->ifname), true) ||
		    !rec_str(e, "rdma", v->rdma, sizeof(v->rdma), true) ||
		    /* A record before shares has none. */
		    (cJSON_GetObjectItemCaseSensitive(e, "shareID") &&
		     !rec_str(e, "shareID", v->share_id, sizeof(v->share_id), false))) {
			ok = false;
			break;
		}
		r->n++;
	}
	cJSON_Delete(root);
	return ok && rec_valid(r) ? 0 : -EINVAL;
}

static int dir_fd(const struct dra_claims *cl)
{
	return open(cl->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

/* Writes r's file durably (hpn_install_file: temp file, fsync, rename, directory fsync). */
static int rec_write(const struct dra_claims *cl, const struct dra_rec *r, struct hpn_err *err)
{
	char file[DRA_CLAIM_UID_MAX + 8];
	char *text = draclaims_rec_render(r);
	int dfd = dir_fd(cl), ret;

	snprintf(file, sizeof(file), "%s.json", r->uid);
	if (!text || dfd < 0) {
		ret = hpn_err_set(err, HPN_E_IO, text ? errno : ENOMEM, "open %s: %s", cl->dir,
				  text ? strerror(errno) : "out of memory");
	} else {
		ret = hpn_install_file(dfd, file, text, strlen(text), 0600, err);
	}
	if (dfd >= 0)
		close(dfd);
	cJSON_free(text);
	return ret < 0 ? ret : 0;
}

static int rec_remove(const struct dra_claims *cl, const char *uid)
{
	char file[DRA_CLAIM_UID_MAX + 8];
	int dfd = dir_fd(cl), r = 0;

	if (dfd < 0)
		return errno == ENOENT ? 0 : -errno;
	snprintf(file, sizeof(file), "%s.json", uid);
	if ((unlinkat(dfd, file, 0) < 0 && errno != ENOENT) || fsync(dfd) < 0)
		r = -errno;
	close(dfd);
	return r;
}

bool draclaims_uid_ok(const char *s)
{
	size_t len = strlen(s);

	return len && len <= DRA_CLAIM_UID_MAX &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") == len;
}

bool draclaims_request_ok(K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *const *v, size_t n,
			  char *msg, size_t len)
{
	if (n > DRA_CALL_CLAIMS) {
		hpn_msgf(msg, len, "%zu claims in one call, over %d", n, DRA_CALL_CLAIMS);
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		/* The field, not its value: the kubelet's bytes stay out of the log. */
		if (!hpn_k8s_dns_label(v[i]->namespace_)) {
			hpn_msgf(msg, len, "claim %zu: namespace is not a DNS label", i + 1);
			return false;
		}
		if (!hpn_k8s_dns_subdomain(v[i]->name)) {
			hpn_msgf(msg, len, "claim %zu: name is not a DNS subdomain", i + 1);
			return false;
		}
		if (!draclaims_uid_ok(v[i]->uid)) {
			hpn_msgf(msg, len, "claim %zu: uid is not 1-%d of [A-Za-z0-9-]", i + 1,
				 DRA_CLAIM_UID_MAX);
			return false;
		}
		for (size_t k = 0; k < i; k++)
			if (!strcmp(v[i]->uid, v[k]->uid)) {
				hpn_msgf(msg, len, "claim %s named twice", v[i]->uid);
				return false;
			}
	}
	return true;
}

/* r into cl's list, which is in UID order (the lookup's order of a pod's claims). */
static void rec_insert(struct dra_claims *cl, struct dra_rec *r)
{
	struct dra_rec **p = &cl->recs;

	while (*p && strcmp((*p)->uid, r->uid) < 0)
		p = &(*p)->next;
	r->next = *p;
	*p = r;
}

/* The records of an earlier run: a claim prepared then is answered now without the API. */
static void load_all(struct dra_claims *cl)
{
	DIR *dir = opendir(cl->dir);
	struct dirent *de;
	size_t n = 0;

	if (!dir)
		return;
	while ((de = readdir(dir))) {
		size_t len = strlen(de->d_name);
		char path[PATH_MAX], uid[DRA_CLAIM_UID_MAX + 1];
		struct hpn_err err = { 0 };
		struct dra_rec *r;
		char *text = NULL;
		size_t tlen;

		if (len < 6 || len - 5 > DRA_CLAIM_UID_MAX || strcmp(de->d_name + len - 5, ".json"))
			continue;
		snprintf(uid, sizeof(uid), "%.*s", (int)(len - 5), de->d_name);
		if (!draclaims_uid_ok(uid) ||
		    hpn_snprintf(path, sizeof(path), "%s/%s", cl->dir, de->d_name) < 0)
			continue;
		r = calloc(1, sizeof(*r));
		if (!r)
			break;
		if (hpn_read_file(path, REC_MAX, &text, &tlen, &err) < 0 ||
		    draclaims_rec_parse(text, tlen, r) < 0 || strcmp(r->uid, uid)) {
			hpn_warn("DRA: %s is not a claim record of ours: left alone", path);
			free(r);
			free(text);
			continue;
		}
		free(text);
		rec_insert(cl, r);
		n++;
	}
	closedir(dir);
	if (n)
		hpn_info("DRA: %zu prepared claims read back from %s", n, cl->dir);
}

/* ---- the claim's device metadata files ------------------------------------------------ */

/*
 * The index of the first device of each of r's requests (a request's
 * "/<subrequest>" aside: one file a request), in result order: how many.
 */
static size_t meta_requests(const struct dra_rec *r, size_t first[HPN_DRA_MAX_RESULTS])
{
	size_t n = 0;

	for (size_t i = 0; i < r->n; i++) {
		char a[64], b[64];
		bool seen = false;

		hpn_drameta_base_request(r->devs[i].request, a, sizeof(a));
		for (size_t k = 0; k < n && !seen; k++) {
			hpn_drameta_base_request(r->devs[first[k]].request, b, sizeof(b));
			seen = !strcmp(a, b);
		}
		if (!seen)
			first[n++] = i;
	}
	return n;
}

/* The directory of the file of request (its base) of claim uid: <meta_dir>/<uid>/<request>. */
static int meta_dir_of(const struct dra_claims *cl, const char *uid, const char *request,
		       char out[PATH_MAX])
{
	char base[64];

	hpn_drameta_base_request(request, base, sizeof(base));
	return hpn_snprintf(out, PATH_MAX, "%s/%s/%s", cl->meta_dir, uid, base);
}

/* text as <dir>/metadata.json, 0644, atomically (temp file, fsync, rename); dirs 0755. */
static int meta_install(const char *dir, const char *text, char *msg, size_t len)
{
	struct hpn_err err = { 0 };
	int dfd, r;

	if (hpn_mkdir_p(dir, 0755) < 0) {
		hpn_msgf(msg, len, "device metadata: create %s: %s", dir, strerror(errno));
		return -errno;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd < 0) {
		hpn_msgf(msg, len, "device metadata: open %s: %s", dir, strerror(errno));
		return -errno;
	}
	r = hpn_install_file(dfd, "metadata.json", text, strlen(text), 0644, &err);
	close(dfd);
	if (r < 0) {
		hpn_msgf(msg, len, "device metadata: %s", err.msg);
		return r;
	}
	return 0;
}

/* Claim uid's files and directories gone (none there: fine). */
static void meta_remove(const struct dra_claims *cl, const char *uid)
{
	char dir[PATH_MAX];
	struct dirent *de;
	DIR *d;

	if (!cl->meta_dir[0] || hpn_snprintf(dir, sizeof(dir), "%s/%s", cl->meta_dir, uid) < 0)
		return;
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		int dfd = dirfd(d);

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		/* Our own names only: <request>/metadata.json, and a temp file a crash left. */
		{
			int rfd = openat(dfd, de->d_name,
					 O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			DIR *rd = rfd >= 0 ? fdopendir(rfd) : NULL;
			struct dirent *f;

			if (!rd) {
				if (rfd >= 0)
					close(rfd);
				continue;
			}
			while ((f = readdir(rd)))
				if (f->d_type == DT_REG || f->d_type == DT_UNKNOWN)
					unlinkat(rfd, f->d_name, 0);
			closedir(rd);
		}
		if (unlinkat(dfd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
			hpn_warn("DRA: claim %s: remove %s/%s: %s", uid, dir, de->d_name,
				 strerror(errno));
	}
	closedir(d);
	if (rmdir(dir) < 0 && errno != ENOENT)
		hpn_warn("DRA: claim %s: remove %s: %s", uid, dir, strerror(errno));
}

/* The files of claims with no record (unprepared while the agent was down): removed. */
static void meta_sweep(const struct dra_claims *cl)
{
	DIR *d = cl->meta_dir[0] ? opendir(cl->meta_dir) : NULL;
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (draclaims_uid_ok(de->d_name) && !draclaims_find(cl, de->d_name)) {
			hpn_info("DRA: device metadata of claim %s, which has no record: removed",
				 de->d_name);
			meta_remove(cl, de->d_name);
		}
	closedir(d);
}

/* One file a request of r, generation 1, attributes attrs[i] (NULL: none). */
static int meta_add(const struct dra_claims *cl, const struct dra_rec *r, const cJSON *const *attrs,
		    char *msg, size_t len)
{
	size_t first[HPN_DRA_MAX_RESULTS], n = meta_requests(r, first);
	struct hpn_drameta_dev devs[HPN_DRA_MAX_RESULTS];

	for (size_t k = 0; k < n; k++) {
		const char *req = r->devs[first[k]].request;
		struct hpn_drameta m = { .ns = r->ns,
					 .name = r->name,
					 .uid = r->uid,
					 .driver = cl->driver,
					 .pod_claim = r->pod_claim,
					 .request = req,
					 .generation = 1,
					 .devs = devs };
		char dir[PATH_MAX], *text;
		int ret;

		for (size_t i = first[k]; i < r->n; i++) {
			char a[64], b[64];

			hpn_drameta_base_request(req, a, sizeof(a));
			hpn_drameta_base_request(r->devs[i].request, b, sizeof(b));
			if (strcmp(a, b))
				continue;
			devs[m.n++] = (struct hpn_drameta_dev){ .pool = r->devs[i].pool,
								.device = r->devs[i].device,
								.attrs = attrs ? attrs[i] : NULL };
		}
		if (meta_dir_of(cl, r->uid, req, dir) < 0) {
			hpn_msgf(msg, len, "device metadata: %s/%s: path too long", cl->meta_dir,
				 r->uid);
			return -ENAMETOOLONG;
		}
		text = hpn_drameta_render(&m);
		if (!text) {
			hpn_msgf(msg, len, "device metadata: out of memory");
			return -ENOMEM;
		}
		ret = meta_install(dir, text, msg, len);
		free(text);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int draclaims_meta_net(const struct dra_claims *cl, const struct dra_rec *r,
		       const struct hpn_drameta_net *const *net, char *msg, size_t len)
{
	size_t first[HPN_DRA_MAX_RESULTS], n;
	const char *pools[HPN_DRA_MAX_RESULTS], *names[HPN_DRA_MAX_RESULTS];
	int written = 0;

	if (!cl->meta_dir[0])
		return 0;
	n = meta_requests(r, first);
	for (size_t i = 0; i < r->n; i++) {
		pools[i] = r->devs[i].pool;
		names[i] = r->devs[i].device;
	}
	for (size_t k = 0; k < n; k++) {
		char dir[PATH_MAX], path[PATH_MAX + 16], *text = NULL, *out = NULL;
		struct hpn_err err = { 0 };
		bool changed = false;
		size_t tlen;
		int ret;

		if (meta_dir_of(cl, r->uid, r->devs[first[k]].request, dir) < 0 ||
		    hpn_snprintf(path, sizeof(path), "%s/metadata.json", dir) < 0) {
			hpn_msgf(msg, len, "device metadata of claim %s: path too long", r->uid);
			return -ENAMETOOLONG;
		}
		ret = hpn_read_file(path, REC_MAX, &text, &tlen, &err);
		if (ret < 0) {
			hpn_msgf(msg, len, "device metadata: %s", err.msg);
			return ret;
		}
		ret = hpn_drameta_set_net(text, tlen, pools, names, net, r->n, &out, &changed);
		free(text);
		if (ret < 0) {
			hpn_msgf(msg, len, "device metadata: %s is not a file of ours", path);
			return ret;
		}
		ret = changed ? meta_install(dir, out, msg, len) : 0;
		free(out);
		if (ret < 0)
			return ret;
		written += changed;
	}
	return written;
}

/* ---- the claim's CDI spec ---------------------------------------------------------- */

void draclaims_cdi_id(const char *uid, char out[HPN_CDI_ID_MAX])
{
	snprintf(out, HPN_CDI_ID_MAX, HPN_CDI_CLAIM_PREFIX "%s", uid);
}

/* Why a claim gets no spec, and so is not prepared: no hook to name. */
static void no_hook(char *msg, size_t len, const char *why)
{
	hpn_msgf(msg, len,
		 "no CDI spec without its createRuntime hook (%s): the claim's RDMA devices "
		 "would go to any pod that names its CDI device",
		 why);
}

/*
 * The hints mount of claim r's spec: the file of the one pod it is reserved
 * for (its ADD writes it before CreateContainer, when the runtime resolves
 * the mount). Several pods: none of them is the file's (the hook lets only
 * the pod that holds the NICs start; a mount of one pod's file would still
 * be made in the others' containers before it refuses them), so no mount,
 * said when say.
 */
static void claim_hints(const struct dra_claims *cl, const struct dra_rec *r, bool say,
			struct hpn_cdi_dev *cd)
{
	char host[PATH_MAX];

	if (!cl->hints)
		return;
	if (r->n_pods != 1) {
		if (say)
			hpn_info("DRA: claim %s/%s is reserved for %zu pods, not one: its CDI spec "
				 "mounts no NCCL hints (a pod of it mounts its own, or has NRI)",
				 r->ns, r->name, r->n_pods);
		return;
	}
	if (hpn_nccl_file_path(cl->hints_dir, r->pods[0], host, sizeof(host)) < 0 ||
	    hpn_cdi_set_hints(cd, host, cl->hints_at) < 0)
		hpn_warn("DRA: claim %s/%s: no NCCL hints mount for pod %s (%s/%s: not a key or "
			 "too long)",
			 r->ns, r->name, r->pods[0], cl->hints_dir, r->pods[0]);
}

/*
 * The env HPN_RDMA_SHARE_IDS_CLAIM_<UID> of a claim with a share: each
 * device's shareID in device order, comma-separated, "" for a whole NIC; so
 * a container tells which of its NICs' RDMA devices (the DEVICE env's, in
 * the same order) it has as which share. None without a share. 32 devices
 * of 36 bytes and their commas always fit (HPN_CDI_SHARE_IDS_MAX).
 */
static void share_ids(const struct dra_rec *r, struct hpn_cdi_dev *cd)
{
	bool any = false;
	size_t at = 0;

	for (size_t i = 0; i < r->n; i++)
		any |= r->devs[i].share_id[0] != '\0';
	cd->share_ids[0] = '\0';
	for (size_t i = 0; any && i < r->n; i++)
		at += (size_t)snprintf(cd->share_ids + at, sizeof(cd->share_ids) - at, "%s%s",
				       i ? "," : "", r->devs[i].share_id);
}

/*
 * The spec of claim r: one device "claim-<uid>" with the RDMA character
 * devices of its NICs (a shared NIC's as a whole one's: the pod uses the
 * NIC's RDMA device through its child, the node's RDMA netns mode shared;
 * each RDMA device's nodes once), and rdma_cm; its env names the NICs' RDMA
 * devices, comma-separated, one per device (HPN_RDMA_DEVICE_CLAIM_<UID>),
 * and, with a share, the devices' shareIDs (share_ids); the pod's hints mount
 * (claim_hints; say: at Prepare, not at each rewrite); its createRuntime
 * hook, as the NICs' specs have it (hpn-rdma cdi-hook claim-<uid>: every NIC
 * of the record held by the container's pod, a pod the claim is reserved
 * for). No hook, no spec: -ENOEXEC. 0, or an error in msg.
 */
static int cdi_write(const struct dra_claims *cl, const struct dra_rec *r, bool say, char *msg,
		     size_t len)
{
	struct hpn_cdi_dev *cd = calloc(1, sizeof(*cd));
	struct hpn_cdi_mount *mounts = calloc(HPN_DRA_MAX_RESULTS, sizeof(*mounts));
	struct hpn_err err = { 0 };
	char why[HPN_ERR_MSG] = "";
	int ret = 0;

	if (!cd || !mounts) {
		hpn_msgf(msg, len, "out of memory");
		ret = -ENOMEM;
		goto out;
	}
	draclaims_cdi_id(r->uid, cd->id);
	if (!cdispecs_hook(cl->hook, cl->state_dir, cl->network, &cd->hook, why, sizeof(why))) {
		no_hook(msg, len, why);
		ret = -ENOEXEC;
		goto out;
	}
	for (size_t i = 0; i < r->n; i++) {
		size_t at = strlen(cd->ibdev);
		bool again = false;

		/* Two shares of one NIC: one RDMA device, its nodes once; the env names it twice. */
		for (size_t j = 0; j < i && !again; j++)
			again = !strcmp(r->devs[j].rdma, r->devs[i].rdma);
		if (!r->devs[i].rdma[0]) {
			hpn_msgf(msg, len, "NIC %s (%s) has no RDMA device on the host",
				 r->devs[i].nic, r->devs[i].device);
			ret = -ENODEV;
			goto out;
		}
		if (at + strlen(r->devs[i].rdma) + 2 > sizeof(cd->ibdev) ||
		    cd->n_nodes >= HPN_CDI_NODES_MAX - 1) {
			hpn_msgf(msg, len, "too many NICs for one CDI device (%zu)", r->n);
			ret = -E2BIG;
			goto out;
		}
		snprintf(cd->ibdev + at, sizeof(cd->ibdev) - at, "%s%s", at ? "," : "",
			 r->devs[i].rdma);
		if (!again &&
		    !cdispecs_nic_nodes(cl->sysfs_root, cl->dev_root, r->devs[i].rdma, cd)) {
			hpn_msgf(msg, len,
				 "RDMA device %s of NIC %s has no uverbs character device",
				 r->devs[i].rdma, r->devs[i].nic);
			ret = -ENODEV;
			goto out;
		}
	}
	share_ids(r, cd);
	cdispecs_cm_node(cl->sysfs_root, cl->dev_root, cd);
	claim_hints(cl, r, say, cd);
	if (cl->meta_dir[0]) {
		size_t first[HPN_DRA_MAX_RESULTS], n = meta_requests(r, first);

		for (size_t k = 0; k < n; k++) {
			const char *req = r->devs[first[k]].request;
			struct hpn_cdi_mount *m = &mounts[cd->n_mounts];
			char dir[PATH_MAX];

			if (meta_dir_of(cl, r->uid, req, dir) < 0 ||
			    hpn_snprintf(m->host_path, sizeof(m->host_path), "%s/metadata.json",
					 dir) < 0 ||
			    hpn_drameta_container_path(r->name, r->pod_claim, req, cl->driver,
						       m->container_path,
						       sizeof(m->container_path)) < 0) {
				hpn_msgf(msg, len, "device metadata of request %s: path too long",
					 req);
				ret = -ENAMETOOLONG;
				goto out;
			}
			cd->n_mounts++;
		}
		cd->mounts = mounts;
	}
	ret = hpn_cdi_write(cl->cdi_dir, HPN_CDI_AGENT, cd, &err);
	if (ret < 0)
		hpn_msgf(msg, len, "CDI spec: %s", err.msg);
	else
		ret = 0;
out:
	free(cd);
	free(mounts);
	return ret;
}

static void cdi_remove(const struct dra_claims *cl, const char *uid)
{
	char id[HPN_CDI_ID_MAX], file[HPN_CDI_FILE_MAX];
	struct hpn_err err = { 0 };

	draclaims_cdi_id(uid, id);
	if (hpn_cdi_file(HPN_CDI_AGENT, id, file) < 0)
		return;
	if (hpn_cdi_remove(cl->cdi_dir, file, &err) != 0)
		hpn_warn("DRA: claim %s: %s", uid, err.msg[0] ? err.msg : "cannot remove its spec");
}

/*
 * The specs of the claims read back, as this run writes them: with the
 * hook (a spec an earlier version wrote without one gets it), or, the hook
 * not there, none (Prepare then fails those claims until it is).
 */
static void respec_all(const struct dra_claims *cl)
{
	for (const struct dra_rec *r = cl->recs; r; r = r->next) {
		char msg[448] = "";

		if (cdi_write(cl, r, false, msg, sizeof(msg)) == -ENOEXEC) {
			cdi_remove(cl, r->uid);
			hpn_warn("DRA: claim %s/%s: its CDI spec removed: %s", r->ns, r->name, msg);
		} else if (msg[0]) {
			hpn_warn("DRA: claim %s/%s: its CDI spec not rewritten: %s", r->ns, r->name,
				 msg);
		}
	}
}

bool draclaims_set_hints(struct dra_claims *cl, const struct hpn_nccl_conf *nc)
{
	bool on = nc && nc->enabled && nc->dir;
	const char *at = nc && nc->conf_file ? nc->conf_file : HPN_DEFAULT_NCCL_CONF_FILE;
	char dir[PATH_MAX], hints_at[HPN_CDI_PATH_MAX];

	if (on && (hpn_snprintf(dir, sizeof(dir), "%s", nc->dir) < 0 ||
		   hpn_snprintf(hints_at, sizeof(hints_at), "%s", at) < 0)) {
		hpn_warn("DRA: nccl.dir or nccl.confFile too long: the claims' CDI specs mount no "
			 "NCCL hints");
		on = false;
	}
	if (!on) {
		dir[0] = hints_at[0] = '\0';
	}
	if (on == cl->hints && !strcmp(dir, cl->hints_dir) && !strcmp(hints_at, cl->hints_at))
		return false;
	cl->hints = on;
	memcpy(cl->hints_dir, dir, strlen(dir) + 1);
	memcpy(cl->hints_at, hints_at, strlen(hints_at) + 1);
	respec_all(cl);
	return true;
}

int draclaims_open(struct dra_claims *cl, const struct draclaims_opts *o, struct hpn_err *err)
{
	char why[HPN_ERR_MSG] = "";
	struct hpn_cdi_hook probe;

	*cl = (struct dra_claims){ 0 };
	if (hpn_snprintf(cl->dir, sizeof(cl->dir), "%s/dra", o->state_dir) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
				   "stateDir %s is too long", o->state_dir);
	if (hpn_snprintf(cl->state_dir, sizeof(cl->state_dir), "%s", o->state_dir) < 0 ||
	    hpn_snprintf(cl->network, sizeof(cl->network), "%s", o->network) < 0 ||
	    hpn_snprintf(cl->hook, sizeof(cl->hook), "%s", o->hook ? o->hook : "") < 0 ||
	    hpn_snprintf(cl->sysfs_root, sizeof(cl->sysfs_root), "%s", o->sysfs_root) < 0 ||
	    hpn_snprintf(cl->dev_root, sizeof(cl->dev_root), "%s", o->dev_root) < 0 ||
	    hpn_snprintf(cl->cdi_dir, sizeof(cl->cdi_dir), "%s", o->cdi_dir) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
				   "DRA: the network's name, the CDI hook, sysfsRoot, device root "
				   "or CDI directory too long");
	if (o->meta_dir &&
	    (hpn_snprintf(cl->meta_dir, sizeof(cl->meta_dir), "%s", o->meta_dir) < 0 ||
	     hpn_snprintf(cl->driver, sizeof(cl->driver), "%s", o->driver) < 0))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
				   "DRA: the device metadata directory or driver name too long");
	draclaims_set_hints(cl, o->nccl);
	if (hpn_mkdir_p(cl->dir, 0700) < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "DRA: create %s: %s", cl->dir,
				   strerror(errno));
	if (!cdispecs_hook(cl->hook, cl->state_dir, cl->network, &probe, why, sizeof(why)))
		hpn_warn("DRA: no claim gets a CDI spec (%s): Prepare fails every claim until the "
			 "hook is there",
			 why);
	load_all(cl);
	meta_sweep(cl);
	respec_all(cl);
	return 0;
}

int draclaims_add(struct dra_claims *cl, struct dra_rec *r, const struct cJSON *const *attrs,
		  char *msg, size_t len)
{
	struct hpn_err err = { 0 };
	char cmsg[384] = "";
	int ret = cl->meta_dir[0] ? meta_add(cl, r, attrs, cmsg, sizeof(cmsg)) : 0;

	/* The files before the spec that mounts them, the spec before the record. */
	if (ret == 0)
		ret = cdi_write(cl, r, true, cmsg, sizeof(cmsg));
	if (ret < 0) {
		hpn_msgf(msg, len, "%s", cmsg);
		meta_remove(cl, r->uid);
		return ret;
	}
	ret = rec_write(cl, r, &err);
	if (ret < 0) {
		hpn_msgf(msg, len, "record: %s", err.msg);
		cdi_remove(cl, r->uid);
		meta_remove(cl, r->uid);
		return ret;
	}
	rec_insert(cl, r);
	return 0;
}

int draclaims_respec(const struct dra_claims *cl, const struct dra_rec *r, char *msg, size_t len)
{
	char id[HPN_CDI_ID_MAX], file[HPN_CDI_FILE_MAX], path[PATH_MAX], why[HPN_ERR_MSG] = "";
	struct hpn_cdi_hook probe;
	struct stat st;

	/* The hook gone since: the spec goes, and the claim is not answered. */
	if (!cdispecs_hook(cl->hook, cl->state_dir, cl->network, &probe, why, sizeof(why))) {
		cdi_remove(cl, r->uid);
		no_hook(msg, len, why);
		return -ENOEXEC;
	}
	draclaims_cdi_id(r->uid, id);
	if (hpn_cdi_file(HPN_CDI_AGENT, id, file) < 0 ||
	    hpn_snprintf(path, sizeof(path), "%s/%s", cl->cdi_dir, file) < 0) {
		hpn_msgf(msg, len, "no CDI spec name for claim %s", r->uid);
		return -ENAMETOOLONG;
	}
	if (lstat(path, &st) == 0)
		return 0;
	hpn_warn("DRA: claim %s/%s: its CDI spec %s is gone: written anew", r->ns, r->name, path);
	return cdi_write(cl, r, false, msg, len);
}

int draclaims_drop(struct dra_claims *cl, const char *uid, struct dra_rec **gone)
{
	struct dra_rec **p = &cl->recs;
	int r;

	*gone = NULL;
	cdi_remove(cl, uid);
	meta_remove(cl, uid);
	r = rec_remove(cl, uid);
	if (r < 0)
		return r;
	while (*p && strcmp((*p)->uid, uid))
		p = &(*p)->next;
	if (*p) {
		*gone = *p;
		*p = (*gone)->next;
	}
	return 0;
}

void draclaims_free(struct dra_claims *cl)
{
	while (cl->recs) {
		struct dra_rec *r = cl->recs;

		cl->recs = r->next;
		free(r);
	}
}
