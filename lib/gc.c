// SPDX-License-Identifier: Apache-2.0
#include "attach.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "session.h"
#include "util.h"

/*
 * What keeps a journal from GC, besides an ADD or a DEL working on it: the
 * CNI's GC keeps what cni.dev/valid-attachments lists; the agent's keeps the
 * attachments of every sandbox the runtime still lists, and journals written
 * less than min_age_s ago (an ADD that has just finished, whose sandbox the
 * runtime lists only once RunPodSandbox returns).
 *
 * The runtime's list speaks only for the runtime's own attachments: those
 * whose ADD a CRI runtime ran, which journal the pod's UID (K8S_POD_UID).
 * Another caller's (cnitool, a script: a live netns the runtime never had)
 * is left to that caller's DEL or to the CNI's GC, unless it is of an
 * earlier boot: its netns and NICs went with that boot, so nothing that
 * lives can lose anything.
 */
struct gc_keep {
	const struct hpn_conf *valid; /* by container ID and CNI_IFNAME, or NULL */
	const char *const *live;      /* by container ID */
	size_t n_live;
	bool runtime; /* live is a CRI runtime's list: it decides only for its own */
	int min_age_s;
	struct hpn_gc_live *counts; /* or NULL */
};

/* Made by a CRI runtime's ADD (CNI_ARGS K8S_POD_UID): what its sandbox list speaks for. */
static bool runtime_made(const struct hpn_journal *j)
{
	return j->pod.uid[0] != '\0';
}

static bool kept(const struct gc_keep *k, const struct hpn_journal *j, time_t mtime)
{
	for (size_t i = 0; k->valid && i < k->valid->n_valid; i++)
		if (!strcmp(k->valid->valid[i].container_id, j->container_id) &&
		    !strcmp(k->valid->valid[i].ifname, j->cni_ifname))
			return true;
	for (size_t i = 0; i < k->n_live; i++)
		if (!strcmp(k->live[i], j->container_id))
			return true;
	if (k->runtime && !runtime_made(j) && !j->stale) {
		hpn_debug("gc: %s.%s was not made by a CRI runtime (no pod UID): not the "
			  "runtime's to undo",
			  j->container_id, j->cni_ifname);
		return true;
	}
	if (k->min_age_s > 0 && time(NULL) - mtime < k->min_age_s) {
		if (k->counts)
			k->counts->young++;
		return true;
	}
	return false;
}

/*
 * GC of one stale attachment: its NICs back to the host (moved ones) or
 * deleted (children), IPAM released for each, then its journal removed.
 * Per-attachment files other parts keep (the NCCL hints) go here too.
 */
static int gc_one(struct hpn_nsctx *ns, struct hpn_store *st, const struct hpn_env *env,
		  const struct hpn_conf *conf, const char *key, const struct hpn_journal *j,
		  struct hpn_err *err)
{
	struct hpn_env genv = *env;

	if (j->pod.name[0])
		hpn_info("gc: undoing stale attachment %s (pod %s/%s)", key, j->pod.namespace,
			 j->pod.name);
	else
		hpn_info("gc: undoing stale attachment %s", key);
	genv.container_id = j->container_id;
	genv.ifname = j->cni_ifname;
	genv.netns = j->netns;
	return hpn_release(st, ns, &genv, conf, key, j, true, err);
}

/* A journal temp file ".tmp.<key>.<pid>" of a process still running (an ADD in flight). */
static bool tmp_in_use(const char *name)
{
	const char *dot = strrchr(name, '.');
	char *end;
	long pid = dot ? strtol(dot + 1, &end, 10) : 0;

	return pid > 0 && pid != getpid() && !*end && hpn_proc_alive((int)pid, 0);
}

/*
 * Whether the runtime's list may be acted on at all. An empty list while
 * this boot's journals hold attachments a CRI runtime made does not say
 * that all their pods are gone: on a node that runs pods the list is never
 * empty (the agent's own pod is one of its sandboxes), so it says that
 * --cri-socket names another runtime, or one that has not yet read back its
 * state. -ECANCELED (code 11) naming the first such pod: nothing is undone.
 */
static int list_trusted(struct hpn_store *st, const struct gc_keep *k, struct hpn_err *err)
{
	struct hpn_journal_pod first = { 0 };
	char **keys = NULL;
	size_t n = 0;
	int r;

	if (!k->runtime || k->n_live > 0)
		return 0;
	r = hpn_store_keys(st, &keys, err);
	if (r < 0)
		return r;
	for (size_t i = 0; keys[i]; i++) {
		struct hpn_journal j; /* hpn_journal_read inits it */
		struct hpn_err ignored = { 0 };

		if (hpn_journal_read(st, keys[i], &j, &ignored) < 0)
			continue;
		if (runtime_made(&j) && !j.stale && !n++)
			first = j.pod;
		hpn_journal_free(&j);
	}
	hpn_strv_free(keys);
	if (!n)
		return 0;
	return hpn_err_set(
		err, HPN_E_TRY_AGAIN, ECANCELED,
		"the runtime lists no pod sandbox while %zu attachment%s of this boot "
		"made by a CRI runtime %s journalled (pod %s/%s%s): not trusted, nothing "
		"undone",
		n, n == 1 ? "" : "s", n == 1 ? "is" : "are", first.namespace, first.name,
		n == 1 ? "" : ", ...");
}

static int gc_run(const struct hpn_env *env, const struct hpn_conf *conf, const struct gc_keep *k,
		  struct hpn_err *err)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_nsctx ns = { .host_fd = -1, .pod_fd = -1 };
	struct dirent *de;
	DIR *d = NULL;
	int r, failed = 0, dfd;

	r = hpn_session_open(&st, &ns, conf, err);
	if (r >= 0)
		r = list_trusted(&st, k, err);
	if (r < 0)
		goto out;
	dfd = fcntl(st.net_fd, F_DUPFD_CLOEXEC, 0);
	d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		r = hpn_err_set(err, HPN_E_IO, errno, "list state of %s: %s", conf->name,
				strerror(errno));
		goto out;
	}
	for (;;) {
		struct hpn_journal j = { 0 };
		struct hpn_err jerr = { 0 };
		struct stat sb;

		errno = 0;
		de = readdir(d);
		if (!de) {
			/* An unreadable directory must not look like "nothing stale". */
			if (errno && !failed++)
				hpn_err_set(err, HPN_E_IO, errno, "list state of %s: %s",
					    conf->name, strerror(errno));
			break;
		}

		if (!strncmp(de->d_name, ".tmp.", 5)) {
			/* Under the lock only an ADD past its claim writes one. */
			if (!tmp_in_use(de->d_name))
				unlinkat(st.net_fd, de->d_name, 0);
			continue;
		}
		if (de->d_name[0] == '.' || de->d_type == DT_DIR)
			continue;
		if (fstatat(st.net_fd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			sb.st_mtime = time(NULL); /* gone meanwhile: the read below says so */
		r = hpn_journal_read(&st, de->d_name, &j, &jerr);
		if (r == -ESTALE) {
			/* Unreadable, of an earlier boot: nothing to undo, no lease it names. */
			hpn_warn("gc: %s: removing it", jerr.msg);
			r = hpn_journal_remove(&st, de->d_name, &jerr);
			if (r == 0)
				continue;
		}
		if (r < 0) {
			/* Keep going with the others, but do not report success. */
			hpn_warn("gc: %s", jerr.msg);
			if (!failed++)
				*err = jerr;
			continue;
		}

		/* Listed, or an ADD still running: the runtime may not list it yet. */
		if (hpn_journal_busy(&j) || kept(k, &j, sb.st_mtime)) {
			if (k->counts)
				k->counts->kept++;
			hpn_journal_free(&j);
			continue;
		}
		r = gc_one(&ns, &st, env, conf, de->d_name, &j, &jerr);
		if (r < 0) {
			hpn_warn("gc: %s: %s", de->d_name, jerr.msg);
			if (!failed++)
				*err = jerr;
		} else if (k->counts) {
			k->counts->undone++;
		}
		hpn_journal_free(&j);
		/* The lock went for the undo; without it, the others must wait for the next GC. */
		if (st.lock_fd < 0)
			break;
	}
	r = failed ? -EIO : 0;
	if (k->counts)
		k->counts->failed = (size_t)failed;
out:
	if (d)
		closedir(d);
	hpn_nsctx_close(&ns);
	hpn_store_close(&st);
	return r;
}

int hpn_gc(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	const struct gc_keep k = { .valid = conf };

	return gc_run(env, conf, &k, err);
}

int hpn_gc_sandboxes(const struct hpn_conf *conf, struct hpn_gc_live *live, struct hpn_err *err)
{
	const struct gc_keep k = { .live = live->sandboxes,
				   .n_live = live->n_sandboxes,
				   .runtime = true,
				   .min_age_s = live->min_age_s,
				   .counts = live };
	const struct hpn_env env = { .cmd = HPN_CMD_GC, .command = "GC", .path = live->cni_path };

	live->undone = live->kept = live->young = live->failed = 0;
	return gc_run(&env, conf, &k, err);
}
