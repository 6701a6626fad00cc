// SPDX-License-Identifier: Apache-2.0
#include "cdihook.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "cdi.h"
#include "store.h"
#include "util.h"

#define CLAIM_REC_MAX ((size_t)64 * 1024) /* as the agent reads its records */

int hpn_cdi_hook_pid(const char *state_json, int *pid, struct hpn_err *err)
{
	cJSON *st = hpn_json_parse(state_json, strlen(state_json));
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(st, "pid");
	bool ok = cJSON_IsNumber(p) && p->valuedouble >= 1 && p->valuedouble <= INT_MAX &&
		  p->valuedouble == (double)(int)p->valuedouble;

	if (ok)
		*pid = (int)p->valuedouble;
	cJSON_Delete(st);
	if (!ok)
		return hpn_err_set(err, HPN_E_DECODE, EINVAL,
				   "the OCI state on stdin has no \"pid\" of the container");
	return 0;
}

/* The pod a journal names, for messages: "ns/name", else its container ID. */
static void pod_of(const struct hpn_journal *j, char *buf, size_t len)
{
	if (j->pod.name[0])
		snprintf(buf, len, "%s/%s", j->pod.namespace, j->pod.name);
	else
		snprintf(buf, len, "sandbox %.12s", j->container_id ? j->container_id : "?");
}

/*
 * Whether journal j holds NIC id; child: as the parent of a child in the pod
 * (a DRA share of it), not the NIC itself moved.
 */
static bool holds(const struct hpn_journal *j, const char *id, bool child)
{
	for (size_t i = 0; i < j->n_nics; i++) {
		char nid[HPN_ALLOC_ID_MAX];

		hpn_alloc_journal_id(&j->nics[i], nid);
		if (!strcmp(nid, id) && (!child || j->nics[i].kind == HPN_NIC_CHILD))
			return true;
	}
	return false;
}

/* Is uid one of the strings of array pods (NULL: no check asked)? */
static bool pod_ok(const cJSON *pods, const char *uid)
{
	const cJSON *e;

	if (!pods || !uid[0])
		return true;
	cJSON_ArrayForEach (e, pods)
		if (cJSON_IsString(e) && !strcmp(e->valuestring, uid))
			return true;
	return false;
}

/*
 * NIC id held by a journal of network in the netns mine is (and, pods
 * given, of a pod among them when the journal names its pod; child: a child
 * of the NIC, a share's, the NIC itself staying on the host); what, as
 * hpn_cdi_hook_check says it, naming the CDI device cdi.
 */
static int check_nic(const char *state_dir, const char *network, const char *id, bool child,
		     const char *cdi, const struct stat *mine, const cJSON *pods,
		     struct hpn_err *err)
{
	struct hpn_store st = HPN_STORE_INIT;
	char path[PATH_MAX], other[320] = "";
	char **keys = NULL;
	struct stat theirs;
	bool found = false, unlisted = false;
	int r;

	/* No journals yet: nothing to open (a hook creates nothing on the node). */
	if (hpn_snprintf(path, sizeof(path), "%s/%s", state_dir, network) < 0)
		return hpn_err_set(err, HPN_E_INVALID_ENV, ENAMETOOLONG, "state dir too long");
	r = access(path, F_OK) < 0 && errno == ENOENT
		    ? 1
		    : hpn_store_open(state_dir, network, &st, err);
	if (r == 0)
		r = hpn_store_keys(&st, &keys, err);
	for (size_t k = 0; r == 0 && keys[k] && !found; k++) {
		struct hpn_journal j = { 0 };
		struct hpn_err jerr = { 0 };

		/* Journals are replaced by rename: each read sees a whole one. */
		if (hpn_journal_read(&st, keys[k], &j, &jerr) < 0)
			continue;
		if (holds(&j, id, child) && !j.stale) {
			found = j.netns && stat(j.netns, &theirs) == 0 &&
				theirs.st_dev == mine->st_dev && theirs.st_ino == mine->st_ino;
			if (found && !pod_ok(pods, j.pod.uid)) {
				found = false;
				unlisted = true;
			}
			if (!found && !other[0])
				pod_of(&j, other, sizeof(other));
		}
		hpn_journal_free(&j);
	}
	hpn_strv_free(keys);
	hpn_store_close(&st);
	if (r < 0)
		return r;
	if (found)
		return 0;
	if (unlisted)
		return hpn_err_set(err, HPN_E_INVALID_ENV, EPERM,
				   "NIC %s%s (CDI device " HPN_CDI_KIND "=%s) is attached to pod "
				   "%s, which the claim was not prepared for: its RDMA device is "
				   "not given",
				   id, child ? " (a share: a child of it)" : "", cdi, other);
	if (other[0])
		return hpn_err_set(err, HPN_E_INVALID_ENV, EPERM,
				   "NIC %s%s (CDI device " HPN_CDI_KIND "=%s) is attached to pod "
				   "%s, not to this container's pod: its RDMA device is not given",
				   id, child ? " (a share: a child of it)" : "", cdi, other);
	return hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENOENT,
			   "NIC %s%s (CDI device " HPN_CDI_KIND "=%s) is attached to no pod "
			   "of network %s: its RDMA device is given only to the pod that holds it",
			   id, child ? " (a share: a child of it)" : "", cdi, network);
}

/*
 * A DRA claim's device "claim-<uid>": every NIC its record
 * (<state_dir>/dra/<uid>.json, agent/dra/draclaims.h) lists is held by
 * this container's pod (a device with a shareID, a share of the NIC: by a
 * child of it there), and that pod is one the claim was prepared for.
 */
static int check_claim(const char *state_dir, const char *network, const char *cdi,
		       const struct stat *mine, struct hpn_err *err)
{
	const char *uid = cdi + strlen(HPN_CDI_CLAIM_PREFIX);
	char path[PATH_MAX];
	const cJSON *pods, *devs, *e;
	struct hpn_err rerr = { 0 };
	cJSON *rec = NULL;
	char *text = NULL;
	size_t len, n = 0;
	bool bad;
	int r;

	if (strspn(uid, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") !=
		    strlen(uid) ||
	    hpn_snprintf(path, sizeof(path), "%s/dra/%s.json", state_dir, uid) < 0)
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL, "bad claim device \"%.64s\"",
				   cdi);
	r = hpn_read_file(path, CLAIM_REC_MAX, &text, &len, &rerr);
	if (r == -ENOENT)
		return hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENOENT,
				   "claim %s (CDI device " HPN_CDI_KIND "=%s) is prepared for no "
				   "pod on this node (no %s): its RDMA devices are not given",
				   uid, cdi, path);
	if (r < 0)
		return hpn_err_set(err, rerr.code, r, "%s", rerr.msg);
	rec = cJSON_ParseWithLength(text, len);
	free(text);
	pods = cJSON_GetObjectItemCaseSensitive(rec, "pods");
	devs = cJSON_GetObjectItemCaseSensitive(rec, "devices");
	bad = !cJSON_IsArray(pods) || !cJSON_IsArray(devs);
	if (bad)
		devs = NULL;
	cJSON_ArrayForEach (e, devs) {
		const cJSON *nic = cJSON_GetObjectItemCaseSensitive(e, "nic");
		const cJSON *share = cJSON_GetObjectItemCaseSensitive(e, "shareID");

		bad = !cJSON_IsString(nic) || !hpn_alloc_id_valid(nic->valuestring) ||
		      (share && !cJSON_IsString(share));
		if (bad)
			break;
		/* A share (its shareID): the pod holds a child of the NIC, never the NIC. */
		r = check_nic(state_dir, network, nic->valuestring, share != NULL, cdi, mine, pods,
			      err);
		if (r < 0)
			break;
		n++;
	}
	cJSON_Delete(rec);
	if (r == 0 && (bad || n == 0))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL,
				   "%s is not a claim record of hpn-rdma's: the RDMA devices of "
				   "claim %s are not given",
				   path, uid);
	return r;
}

int hpn_cdi_hook_check(const char *state_dir, const char *network, const char *id, int pid,
		       const char *proc_root, struct hpn_err *err)
{
	char path[PATH_MAX];
	struct stat mine;
	bool claim = hpn_cdi_is_claim(id);

	if (!claim && !hpn_alloc_id_valid(id))
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL, "bad NIC ID \"%.64s\"", id);
	if (hpn_snprintf(path, sizeof(path), "%s/%d/ns/net", proc_root, pid) < 0 ||
	    stat(path, &mine) < 0)
		return hpn_err_set(err, HPN_E_NETNS, errno, "the container's netns %s: %s", path,
				   strerror(errno));
	if (claim)
		return check_claim(state_dir, network, id, &mine, err);
	return check_nic(state_dir, network, id, false, id, &mine, NULL, err);
}
