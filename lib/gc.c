// SPDX-License-Identifier: Apache-2.0
#include "attach.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "session.h"
#include "util.h"

static bool still_valid(const struct hpn_conf *conf, const struct hpn_journal *j)
{
	for (size_t i = 0; i < conf->n_valid; i++)
		if (!strcmp(conf->valid[i].container_id, j->container_id) &&
		    !strcmp(conf->valid[i].ifname, j->cni_ifname))
			return true;
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

int hpn_gc(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_nsctx ns = { .host_fd = -1, .pod_fd = -1 };
	struct dirent *de;
	DIR *d = NULL;
	int r, failed = 0, dfd;

	r = hpn_session_open(&st, &ns, conf, err);
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
		if (still_valid(conf, &j) || hpn_journal_busy(&j)) {
			hpn_journal_free(&j);
			continue;
		}
		r = gc_one(&ns, &st, env, conf, de->d_name, &j, &jerr);
		if (r < 0) {
			hpn_warn("gc: %s: %s", de->d_name, jerr.msg);
			if (!failed++)
				*err = jerr;
		}
		hpn_journal_free(&j);
		/* The lock went for the undo; without it, the others must wait for the next GC. */
		if (st.lock_fd < 0)
			break;
	}
	r = failed ? -EIO : 0;
out:
	if (d)
		closedir(d);
	hpn_nsctx_close(&ns);
	hpn_store_close(&st);
	return r;
}
