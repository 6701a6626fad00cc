// SPDX-License-Identifier: Apache-2.0
#include "store.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "util.h"

#define JOURNAL_MAX (256u << 10)

/* One state file into the new network dir, its mtime kept (stale journals are told by it). */
static int adopt_file(int old_net, int new_net, const char *name)
{
	_cleanup_close_ int fd =
		openat(old_net, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	_cleanup_free_ char *data = NULL;
	char tmp[HPN_KEY_MAX + 32];
	struct timespec times[2];
	struct stat sb;
	size_t len;
	int r;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0)
		return -errno;
	if (!S_ISREG(sb.st_mode))
		return -EINVAL;
	r = hpn_read_all(fd, JOURNAL_MAX, &data, &len);
	if (r < 0)
		return r;
	snprintf(tmp, sizeof(tmp), ".tmp.%s.%d", name, (int)getpid());
	r = hpn_write_atomic(new_net, tmp, name, data, len, 0600);
	times[0] = sb.st_atim;
	times[1] = sb.st_mtim;
	if (r == 0 && utimensat(new_net, name, times, AT_SYMLINK_NOFOLLOW) < 0)
		r = -errno;
	if (r == 0 && unlinkat(old_net, name, 0) < 0)
		r = -errno;
	return r;
}

/* Every journal of one network; the network's old directory goes last. */
static int adopt_network(int old_root, int new_root, const char *network)
{
	_cleanup_close_ int old_net = -1, new_net = -1;
	DIR *d;
	int r = 0;

	if (mkdirat(new_root, network, 0700) < 0 && errno != EEXIST)
		return -errno;
	new_net = openat(new_root, network, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	old_net = openat(old_root, network, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (new_net < 0 || old_net < 0)
		return -errno;
	d = fdopendir(fcntl(old_net, F_DUPFD_CLOEXEC, 0));
	if (!d)
		return -errno;
	for (const struct dirent *de; r == 0 && (de = readdir(d));) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		/* A temp file is a write that never landed: nothing to keep. */
		if (de->d_name[0] == '.')
			r = unlinkat(old_net, de->d_name, 0) < 0 ? -errno : 0;
		else
			r = adopt_file(old_net, new_net, de->d_name);
	}
	closedir(d);
	if (r == 0 && unlinkat(old_root, network, AT_REMOVEDIR) < 0)
		r = -errno;
	return r;
}

int hpn_store_adopt(const char *old_dir, const char *state_dir, int timeout_ms, struct hpn_err *err)
{
	struct hpn_store old = HPN_STORE_INIT, cur = HPN_STORE_INIT;
	DIR *d = NULL;
	int r;

	old.root_fd = open(old_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (old.root_fd < 0)
		return errno == ENOENT
			       ? 0
			       : hpn_err_set(err, HPN_E_IO, errno, "open old stateDir \"%s\": %s",
					     old_dir, strerror(errno));
	r = hpn_mkdir_p(state_dir, 0700);
	if (r == 0 && (cur.root_fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		r = -errno;
	if (r < 0) {
		r = hpn_err_set(err, HPN_E_IO, -r, "open stateDir \"%s\": %s", state_dir,
				strerror(-r));
		goto out;
	}
	/* An older binary's run in flight ends first; always the old lock, then the new. */
	r = hpn_store_lock(&old, timeout_ms, err);
	if (r == 0)
		r = hpn_store_lock(&cur, timeout_ms, err);
	if (r < 0)
		goto out;
	d = fdopendir(fcntl(old.root_fd, F_DUPFD_CLOEXEC, 0));
	if (!d) {
		r = -errno;
		goto fail;
	}
	for (const struct dirent *de; r == 0 && (de = readdir(d));) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, "lock"))
			continue;
		if (de->d_type == DT_DIR)
			r = adopt_network(old.root_fd, cur.root_fd, de->d_name);
		else /* events.log and its rotation: the history of an older binary */
			r = unlinkat(old.root_fd, de->d_name, 0) < 0 ? -errno : 0;
	}
	if (r == 0 && unlinkat(old.root_fd, "lock", 0) < 0 && errno != ENOENT)
		r = -errno;
	if (r == 0 && rmdir(old_dir) < 0)
		r = -errno;
fail:
	if (r < 0)
		r = hpn_err_set(err, HPN_E_IO, -r, "move the state in \"%s\" to \"%s\": %s",
				old_dir, state_dir, strerror(-r));
out:
	if (d)
		closedir(d);
	hpn_store_close(&cur);
	hpn_store_close(&old);
	return r;
}

int hpn_store_adopt_old(const char *state_dir, struct hpn_err *err)
{
	/* The default moved to tmpfs: journals an older binary left on disk come along once. */
	return strcmp(state_dir, HPN_DEFAULT_STATE_DIR)
		       ? 0
		       : hpn_store_adopt(HPN_OLD_STATE_DIR, state_dir, HPN_ADOPT_LOCK_MS, err);
}

int hpn_store_open(const char *state_dir, const char *network, struct hpn_store *st,
		   struct hpn_err *err)
{
	int r = hpn_store_adopt_old(state_dir, err);

	return r < 0 ? r : hpn_store_open_here(state_dir, network, st, err);
}

int hpn_store_open_here(const char *state_dir, const char *network, struct hpn_store *st,
			struct hpn_err *err)
{
	int r = hpn_mkdir_p(state_dir, 0700);

	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, r, "create stateDir \"%s\": %s", state_dir,
				   strerror(-r));
	st->root_fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->root_fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open stateDir \"%s\": %s", state_dir,
				   strerror(errno));
	if (mkdirat(st->root_fd, network, 0700) < 0 && errno != EEXIST)
		return hpn_err_set(err, HPN_E_IO, errno, "create \"%s/%s\": %s", state_dir, network,
				   strerror(errno));
	st->net_fd = openat(st->root_fd, network, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (st->net_fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open \"%s/%s\": %s", state_dir, network,
				   strerror(errno));
	return 0;
}

void hpn_store_close(struct hpn_store *st)
{
	if (st->lock_fd >= 0)
		close(st->lock_fd);
	if (st->net_fd >= 0)
		close(st->net_fd);
	if (st->root_fd >= 0)
		close(st->root_fd);
	st->lock_fd = st->net_fd = st->root_fd = -1;
}

/* The wait for the state lock: its first nap between tries and its longest (hpn_store_lock). */
#define LOCK_NAP_FIRST_NS 500000LL  /* 0.5 ms */
#define LOCK_NAP_MAX_NS	  4000000LL /* 4 ms */

static long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * Tries flock(LOCK_NB) and naps between tries, 0.5 ms doubling to 4 ms,
 * never past the deadline, with a last try at it. No signal and no timer:
 * the agent calls this on its loop and on its worker thread, and a
 * process-wide SIGALRM or ITIMER_REAL is shared by them (the alarm lands in
 * whichever thread has it unblocked, not the one waiting, and a disposition
 * restored while the timer is armed kills the process).
 *
 * Not fair: the kernel queues no one here, a released lock goes to the
 * first waiter to try, and a waiter that has waited longest tries least
 * often (every 4 ms, a newcomer at 0.5 ms), so it can lose turn after turn;
 * only timeout_ms bounds its wait. A release is noticed up to one nap late
 * (4 ms at most), against a holder that keeps the lock for all of an ADD.
 */
int hpn_store_lock(struct hpn_store *st, int timeout_ms, struct hpn_err *err)
{
	long long deadline, nap = LOCK_NAP_FIRST_NS;

	st->lock_fd = openat(st->root_fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (st->lock_fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open state lock: %s", strerror(errno));
	deadline = mono_ns() + (timeout_ms > 0 ? timeout_ms : 0) * 1000000LL;
	for (;;) {
		struct timespec ts = { 0 };
		long long left;

		if (flock(st->lock_fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return hpn_err_set(err, HPN_E_IO, errno, "lock state: %s", strerror(errno));
		left = deadline - mono_ns();
		if (left <= 0)
			break;
		/* Under a second: tv_sec stays 0. An interrupted nap is only an early try. */
		ts.tv_nsec = (long)(left < nap ? left : nap);
		clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
		nap = nap * 2 < LOCK_NAP_MAX_NS ? nap * 2 : LOCK_NAP_MAX_NS;
	}
	return hpn_err_set(err, HPN_E_TRY_AGAIN, EAGAIN,
			   "another hpn-rdma run held the state lock for %d ms", timeout_ms);
}

void hpn_store_unlock(struct hpn_store *st)
{
	/* Closing the only fd of the open file description drops the flock. */
	if (st->lock_fd >= 0)
		close(st->lock_fd);
	st->lock_fd = -1;
}

void hpn_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

int hpn_store_keys(struct hpn_store *st, char ***ret, struct hpn_err *err)
{
	int dfd = fcntl(st->net_fd, F_DUPFD_CLOEXEC, 0);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	char **v = NULL;
	size_t n = 0, cap = 0;
	int r = 0;

	if (!d) {
		r = -errno;
		if (dfd >= 0)
			close(dfd);
		return hpn_err_set(err, HPN_E_IO, -r, "list state: %s", strerror(-r));
	}
	/* The dup shares net_fd's offset: a second listing would start at the end. */
	rewinddir(d);
	for (;;) {
		const struct dirent *de;

		errno = 0;
		de = readdir(d);
		if (!de) {
			/* An unreadable directory must not look like "nothing there". */
			if (errno)
				r = hpn_err_set(err, HPN_E_IO, errno, "list state: %s",
						strerror(errno));
			break;
		}
		if (de->d_name[0] == '.' || de->d_type == DT_DIR)
			continue;
		if (n + 2 > cap) {
			char **nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));

			if (!nv) {
				r = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[n] = strdup(de->d_name);
		if (!v[n]) {
			r = -ENOMEM;
			break;
		}
		v[++n] = NULL;
	}
	closedir(d);
	if (r == 0 && !v)
		v = calloc(1, sizeof(*v));
	if (r == 0 && !v)
		r = -ENOMEM;
	if (r < 0) {
		hpn_strv_free(v);
		return r;
	}
	*ret = v;
	return 0;
}

int hpn_store_key(const char *container_id, const char *ifname, char key[HPN_KEY_MAX])
{
	if (strlen(container_id) + strlen(ifname) + 2 <= 200)
		return hpn_snprintf(key, HPN_KEY_MAX, "%s.%s", container_id, ifname);
	/* File names stop at 255 bytes; CNI container IDs do not. */
	return hpn_snprintf(key, HPN_KEY_MAX, "%.150s~%016llx.%s", container_id,
			    (unsigned long long)hpn_hash64(container_id), ifname);
}

/* 1-max bytes of [a-z0-9] and extra (lower case), or of hex digits and extra (hex). */
static bool pod_value_ok(const char *s, size_t max, const char *extra, bool hex)
{
	size_t n = strlen(s);

	if (n < 1 || n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool ok = hex ? ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
				 (c >= 'A' && c <= 'F'))
			      : ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'));

		if (!ok && !strchr(extra, c))
			return false;
	}
	return true;
}

void hpn_journal_set_pod(struct hpn_journal *j, const char *ns, const char *name, const char *uid)
{
	struct hpn_journal_pod *p = &j->pod;

	memset(p, 0, sizeof(*p));
	/* A namespace is a DNS label, a pod name a DNS subdomain, a UID hex and dashes. */
	if (ns && pod_value_ok(ns, sizeof(p->namespace) - 1, "-", false))
		memcpy(p->namespace, ns, strlen(ns) + 1);
	if (name && pod_value_ok(name, sizeof(p->name) - 1, ".-", false))
		memcpy(p->name, name, strlen(name) + 1);
	if (uid && pod_value_ok(uid, sizeof(p->uid) - 1, "-", true))
		memcpy(p->uid, uid, strlen(uid) + 1);
}

void hpn_journal_init(struct hpn_journal *j)
{
	memset(j, 0, offsetof(struct hpn_journal, nics));
}

void hpn_journal_free(struct hpn_journal *j)
{
	free(j->container_id);
	free(j->netns);
	free(j->result);
	free(j->hints_dir);
	free(j->devices_dir);
	free(j->cdi_dir);
	hpn_journal_init(j);
}

/*
 * cJSON's builders return NULL (Add*, Create*) or false (AddItemTo*) without
 * memory: every one is checked (hpn_json_put, hpn_json_push), for a journal
 * with a field missing is one DEL cannot undo.
 */

static bool put_mac(cJSON *o, const char *k, const uint8_t *mac)
{
	char s[HPN_MAC_STR];

	hpn_mac_format(mac, s);
	return cJSON_AddStringToObject(o, k, s);
}

/* NULL without memory, as for every *_to_json here. */
static cJSON *link_to_json(const struct hpn_link *l)
{
	cJSON *o = cJSON_CreateObject(), *alt = NULL;
	bool ok = o && cJSON_AddStringToObject(o, "name", l->name) &&
		  cJSON_AddNumberToObject(o, "ifindex", l->ifindex) &&
		  cJSON_AddNumberToObject(o, "mtu", l->mtu) &&
		  cJSON_AddBoolToObject(o, "up", l->up) &&
		  (!l->has_mac || put_mac(o, "mac", l->mac)) &&
		  (!l->has_perm_mac || put_mac(o, "permMac", l->perm_mac)) &&
		  (!l->kind[0] || cJSON_AddStringToObject(o, "kind", l->kind)) &&
		  (alt = cJSON_AddArrayToObject(o, "altnames"));

	for (size_t i = 0; ok && i < l->n_altnames; i++)
		ok = hpn_json_push(alt, cJSON_CreateString(l->altnames[i]));
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *gpu_to_json(const struct hpn_journal_nic *n)
{
	cJSON *g = cJSON_CreateObject();

	if (g && cJSON_AddStringToObject(g, "id", n->gpu_id) &&
	    (!n->gpu_pci[0] || cJSON_AddStringToObject(g, "pci", n->gpu_pci)) &&
	    cJSON_AddStringToObject(g, "distance", n->gpu_dist) &&
	    cJSON_AddStringToObject(g, "best", n->gpu_best))
		return g;
	cJSON_Delete(g);
	return NULL;
}

static cJSON *node_to_json(const struct hpn_journal_node *d)
{
	cJSON *e = cJSON_CreateObject();

	if (e && cJSON_AddStringToObject(e, "name", d->name) &&
	    cJSON_AddNumberToObject(e, "major", d->major) &&
	    cJSON_AddNumberToObject(e, "minor", d->minor))
		return e;
	cJSON_Delete(e);
	return NULL;
}

static cJSON *rdma_to_json(const struct hpn_journal_rdma *rd)
{
	cJSON *r = cJSON_CreateObject(), *a = NULL;
	bool ok = r && cJSON_AddStringToObject(r, "name", rd->name) &&
		  cJSON_AddStringToObject(r, "netdev", rd->netdev) &&
		  (!rd->soft_type[0] || cJSON_AddStringToObject(r, "softType", rd->soft_type)) &&
		  cJSON_AddBoolToObject(r, "moved", rd->moved) &&
		  /* Absent before softRoce: older journals read as not created. */
		  (!rd->created || cJSON_AddBoolToObject(r, "created", true)) &&
		  (!rd->n_nodes || (a = cJSON_AddArrayToObject(r, "nodes")));

	for (size_t k = 0; ok && a && k < rd->n_nodes; k++)
		ok = hpn_json_push(a, node_to_json(&rd->nodes[k]));
	if (ok && rd->cdi_spec[0])
		ok = cJSON_AddStringToObject(r, "cdiSpec", rd->cdi_spec);
	if (!ok) {
		cJSON_Delete(r);
		return NULL;
	}
	return r;
}

static cJSON *rail_to_json(const struct hpn_journal_nic *n)
{
	cJSON *r = cJSON_CreateObject();

	if (r && cJSON_AddNumberToObject(r, "table", n->rail_table) &&
	    cJSON_AddNumberToObject(r, "priority", n->rail_priority))
		return r;
	cJSON_Delete(r);
	return NULL;
}

/* enum hpn_nic_source's names in the journal ("nicSource"); [0], unknown, is never written. */
static const char *const nic_sources[] = { "", "pool", "kubelet", "dra", "config" };

static cJSON *nic_to_json(const struct hpn_journal_nic *n)
{
	cJSON *o = cJSON_CreateObject();

	if (o && cJSON_AddStringToObject(o, "kind", n->kind == HPN_NIC_CHILD ? "child" : "moved") &&
	    cJSON_AddStringToObject(o, "podIfName", n->pod_ifname) &&
	    hpn_json_put(o, "host", link_to_json(&n->host)) &&
	    (!n->pci[0] || cJSON_AddStringToObject(o, "pci", n->pci)) &&
	    (!n->pod_ifindex || cJSON_AddNumberToObject(o, "podIfIndex", n->pod_ifindex)) &&
	    (!n->gpu_id[0] || hpn_json_put(o, "gpu", gpu_to_json(n))) &&
	    (!n->child_kind[0] || cJSON_AddStringToObject(o, "childKind", n->child_kind)) &&
	    (!n->has_child_mac || put_mac(o, "childMac", n->child_mac)) &&
	    (!n->rdma.name[0] || hpn_json_put(o, "rdma", rdma_to_json(&n->rdma))) &&
	    (!n->rail_table || hpn_json_put(o, "rail", rail_to_json(n))) &&
	    (!n->hints_link[0] || cJSON_AddStringToObject(o, "hintsLink", n->hints_link)))
		return o;
	cJSON_Delete(o);
	return NULL;
}

static cJSON *hints_to_json(const struct hpn_journal *j)
{
	cJSON *o = cJSON_CreateObject();

	if (o && cJSON_AddStringToObject(o, "dir", j->hints_dir) &&
	    cJSON_AddStringToObject(o, "key", j->hints_key))
		return o;
	cJSON_Delete(o);
	return NULL;
}

static cJSON *pod_to_json(const struct hpn_journal_pod *p)
{
	cJSON *o = cJSON_CreateObject();

	if (o && (!p->namespace[0] || cJSON_AddStringToObject(o, "namespace", p->namespace)) &&
	    (!p->name[0] || cJSON_AddStringToObject(o, "name", p->name)) &&
	    (!p->uid[0] || cJSON_AddStringToObject(o, "uid", p->uid)))
		return o;
	cJSON_Delete(o);
	return NULL;
}

/*
 * The journal's JSON, NULL without memory. j->result is what
 * hpn_result_render made (or a read printed back), so only memory fails
 * its parse: a journal without it would be refused, not written short.
 */
static cJSON *journal_to_json(const struct hpn_journal *j)
{
	cJSON *root = cJSON_CreateObject(), *nics = NULL;
	bool ok = root && cJSON_AddNumberToObject(root, "version", 2) &&
		  (!hpn_boot_id() || cJSON_AddStringToObject(root, "bootId", hpn_boot_id())) &&
		  cJSON_AddNumberToObject(root, "phase", j->phase) &&
		  cJSON_AddStringToObject(root, "containerId", j->container_id) &&
		  cJSON_AddStringToObject(root, "cniIfName", j->cni_ifname) &&
		  (!j->netns || cJSON_AddStringToObject(root, "netns", j->netns));

	/* Start times are clock ticks since boot: exact in a double for centuries. */
	if (ok && j->owner_pid > 0)
		ok = cJSON_AddNumberToObject(root, "ownerPid", j->owner_pid) &&
		     cJSON_AddNumberToObject(root, "ownerStart", (double)j->owner_start);
	ok = ok && (!j->nic_source ||
		    cJSON_AddStringToObject(root, "nicSource", nic_sources[j->nic_source]));
	ok = ok && (nics = cJSON_AddArrayToObject(root, "nics"));
	for (size_t i = 0; ok && i < j->n_nics && i < HPN_MAX_NICS; i++)
		ok = hpn_json_push(nics, nic_to_json(&j->nics[i]));
	ok = ok &&
	     (!j->hints_key[0] || !j->hints_dir || hpn_json_put(root, "hints", hints_to_json(j))) &&
	     (!j->devices_dir || cJSON_AddStringToObject(root, "devicesDir", j->devices_dir)) &&
	     (!j->cdi_dir || cJSON_AddStringToObject(root, "cdiDir", j->cdi_dir)) &&
	     (!j->result || hpn_json_put(root, "result", cJSON_Parse(j->result))) &&
	     /* Optional: journals before it read as a pod with no names. */
	     (!(j->pod.namespace[0] || j->pod.name[0] || j->pod.uid[0]) ||
	      hpn_json_put(root, "pod", pod_to_json(&j->pod)));
	if (!ok) {
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

int hpn_journal_write(struct hpn_store *st, const char *key, const struct hpn_journal *j,
		      struct hpn_err *err)
{
	char tmp[HPN_KEY_MAX + 32];
	cJSON *root;
	char *text = NULL;
	size_t len;
	int r;

	/* The one field the reader requires that a caller could leave out: not memory. */
	if (!j->container_id)
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL, "state for %s: no container ID",
				   key);
	root = journal_to_json(j);
	if (!root)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM,
				   "encode state for %s: out of memory", key);
	text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!text)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM,
				   "encode state for %s: out of memory", key);
	len = strlen(text);
	/* What cannot be read back cannot be undone: refuse it before writing. */
	if (len > JOURNAL_MAX) {
		free(text);
		return hpn_err_set(err, HPN_E_IO, EFBIG,
				   "state %s would be %zu bytes, over the %u-byte limit", key, len,
				   JOURNAL_MAX);
	}

	snprintf(tmp, sizeof(tmp), ".tmp.%s.%d", key, (int)getpid());
	/*
	 * The journal must survive the plugin being killed, which needs no sync:
	 * the rename is atomic in the page cache. It need not survive a power
	 * loss: that reboot returns every NIC and ends every netns, so a journal
	 * of an earlier boot (its bootId, or an mtime before this boot when it
	 * was cut short) is only leases and files to drop (see stale).
	 */
	r = hpn_write_atomic(st->net_fd, tmp, key, text, len, 0600);
	free(text);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, r, "write state for %s: %s", key, strerror(-r));
	return 0;
}

static int json_str(const cJSON *o, const char *k, char *out, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!cJSON_IsString(v))
		return -EINVAL;
	return hpn_snprintf(out, len, "%s", v->valuestring);
}

bool hpn_journal_nic_far(const struct hpn_journal_nic *n)
{
	int d = hpn_gpu_dist_parse(n->gpu_dist), best = hpn_gpu_dist_parse(n->gpu_best);

	return n->gpu_id[0] && d >= 0 && best >= 0 && d > best;
}

/*
 * "gpu": {"id", "pci", "distance", "best"}, the GPU the NIC serves. Never
 * needed to undo: one that is not of this shape is dropped, not refused.
 */
static void gpu_from_json(const cJSON *g, struct hpn_journal_nic *n)
{
	char pci[HPN_PCI_STR] = "";

	if (!cJSON_IsObject(g) || json_str(g, "id", n->gpu_id, sizeof(n->gpu_id)) < 0 ||
	    !hpn_gpu_id_valid(n->gpu_id) ||
	    json_str(g, "distance", n->gpu_dist, sizeof(n->gpu_dist)) < 0 ||
	    hpn_gpu_dist_parse(n->gpu_dist) < 0 ||
	    json_str(g, "best", n->gpu_best, sizeof(n->gpu_best)) < 0 ||
	    hpn_gpu_dist_parse(n->gpu_best) < 0 ||
	    (cJSON_GetObjectItemCaseSensitive(g, "pci") &&
	     (json_str(g, "pci", pci, sizeof(pci)) < 0 ||
	      hpn_pci_normalise(pci, n->gpu_pci) < 0))) {
		n->gpu_id[0] = n->gpu_pci[0] = n->gpu_dist[0] = n->gpu_best[0] = '\0';
		return;
	}
}

/* A NIC's device nodes: names DEL may unlink (uverbsN, umadN, issmN), and their numbers. */
static int json_nodes(const cJSON *a, struct hpn_journal_rdma *r)
{
	const cJSON *o;

	if (!a)
		return 0;
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > HPN_JOURNAL_NODES_MAX || !r->created)
		return -EINVAL;
	cJSON_ArrayForEach (o, a) {
		struct hpn_journal_node *d = &r->nodes[r->n_nodes];
		const cJSON *ma = cJSON_GetObjectItemCaseSensitive(o, "major");
		const cJSON *mi = cJSON_GetObjectItemCaseSensitive(o, "minor");

		if (json_str(o, "name", d->name, sizeof(d->name)) < 0 ||
		    !hpn_valid_path_component(d->name) ||
		    (strncmp(d->name, "uverbs", 6) && strncmp(d->name, "umad", 4) &&
		     strncmp(d->name, "issm", 4)) ||
		    !cJSON_IsNumber(ma) || !cJSON_IsNumber(mi) || ma->valuedouble < 1 ||
		    ma->valuedouble > 4095 || mi->valuedouble < 0 || mi->valuedouble > 1048575)
			return -EINVAL;
		d->major = (unsigned int)ma->valuedouble;
		d->minor = (unsigned int)mi->valuedouble;
		r->n_nodes++;
	}
	return 0;
}

/* A created device's CDI spec: a file DEL may remove, so only a name of ADD's rule. */
static int json_cdi_spec(const cJSON *v, struct hpn_journal_rdma *r)
{
	enum hpn_cdi_owner o;
	char id[HPN_CDI_ID_MAX];

	if (!r->created || json_str(v, "cdiSpec", r->cdi_spec, sizeof(r->cdi_spec)) < 0 ||
	    hpn_cdi_parse_file(r->cdi_spec, &o, id) < 0 || o != HPN_CDI_POD)
		return -EINVAL;
	return 0;
}

static int json_mac(const cJSON *o, const char *k, uint8_t *mac, bool *has)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	*has = false;
	if (!v)
		return 0;
	if (!cJSON_IsString(v) || hpn_mac_parse(v->valuestring, mac) < 0)
		return -EINVAL;
	*has = true;
	return 0;
}

static int link_from_json(const cJSON *o, struct hpn_link *l)
{
	const cJSON *v, *alt;

	memset(l, 0, sizeof(*l));
	if (!cJSON_IsObject(o) || json_str(o, "name", l->name, sizeof(l->name)) < 0 ||
	    !hpn_valid_ifname(l->name))
		return -EINVAL;
	v = cJSON_GetObjectItemCaseSensitive(o, "ifindex");
	l->ifindex = cJSON_IsNumber(v) ? v->valueint : 0;
	v = cJSON_GetObjectItemCaseSensitive(o, "mtu");
	l->mtu = cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e6
			 ? (unsigned int)v->valuedouble
			 : 0;
	l->up = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "up"));
	if (json_mac(o, "mac", l->mac, &l->has_mac) < 0 ||
	    json_mac(o, "permMac", l->perm_mac, &l->has_perm_mac) < 0)
		return -EINVAL;
	json_str(o, "kind", l->kind, sizeof(l->kind));
	alt = cJSON_GetObjectItemCaseSensitive(o, "altnames");
	cJSON_ArrayForEach (v, alt) {
		size_t n = cJSON_IsString(v) ? strlen(v->valuestring) : HPN_ALTNAMSIZ;

		if (l->n_altnames < HPN_MAX_ALTNAMES && n < HPN_ALTNAMSIZ)
			memcpy(l->altnames[l->n_altnames++], v->valuestring, n + 1);
	}
	return 0;
}

/*
 * One NIC from o. A version 1 journal keeps the fields of its one moved NIC at
 * the top level, in the same shape: the same function reads both.
 */
static int nic_from_json(const cJSON *o, struct hpn_journal_nic *n)
{
	const cJSON *v;
	char kind[16] = "moved";

	memset(n, 0, sizeof(*n));
	if (!cJSON_IsObject(o))
		return -EINVAL;
	if (cJSON_GetObjectItemCaseSensitive(o, "kind") &&
	    json_str(o, "kind", kind, sizeof(kind)) < 0)
		return -EINVAL;
	if (!strcmp(kind, "child"))
		n->kind = HPN_NIC_CHILD;
	else if (!strcmp(kind, "moved"))
		n->kind = HPN_NIC_MOVED;
	else
		return -EINVAL;
	if (json_str(o, "podIfName", n->pod_ifname, sizeof(n->pod_ifname)) < 0 ||
	    !hpn_valid_ifname(n->pod_ifname))
		return -EINVAL;
	if (link_from_json(cJSON_GetObjectItemCaseSensitive(o, "host"), &n->host) < 0)
		return -EINVAL;
	if (cJSON_GetObjectItemCaseSensitive(o, "pci") &&
	    json_str(o, "pci", n->pci, sizeof(n->pci)) < 0)
		return -EINVAL;
	v = cJSON_GetObjectItemCaseSensitive(o, "podIfIndex");
	n->pod_ifindex = cJSON_IsNumber(v) ? v->valueint : 0;
	gpu_from_json(cJSON_GetObjectItemCaseSensitive(o, "gpu"), n);
	if (cJSON_GetObjectItemCaseSensitive(o, "childKind") &&
	    json_str(o, "childKind", n->child_kind, sizeof(n->child_kind)) < 0)
		return -EINVAL;
	/* A child is found again by its kind: it must be one ADD creates. */
	if ((n->kind == HPN_NIC_CHILD) !=
	    (!strcmp(n->child_kind, "macvlan") || !strcmp(n->child_kind, "ipvlan")))
		return -EINVAL;
	if (json_mac(o, "childMac", n->child_mac, &n->has_child_mac) < 0)
		return -EINVAL;
	v = cJSON_GetObjectItemCaseSensitive(o, "rdma");
	if (v &&
	    (!cJSON_IsObject(v) || json_str(v, "name", n->rdma.name, sizeof(n->rdma.name)) < 0 ||
	     json_str(v, "netdev", n->rdma.netdev, sizeof(n->rdma.netdev)) < 0))
		return -EINVAL;
	if (v && cJSON_GetObjectItemCaseSensitive(v, "softType") &&
	    json_str(v, "softType", n->rdma.soft_type, sizeof(n->rdma.soft_type)) < 0)
		return -EINVAL;
	n->rdma.moved = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "moved"));
	n->rdma.created = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "created"));
	/* A device DEL would delete must be one softRoce names. */
	if (n->rdma.created &&
	    strncmp(n->rdma.name, HPN_RDMA_SOFT_PREFIX, strlen(HPN_RDMA_SOFT_PREFIX)))
		return -EINVAL;
	if (v && json_nodes(cJSON_GetObjectItemCaseSensitive(v, "nodes"), &n->rdma) < 0)
		return -EINVAL;
	if (v && cJSON_GetObjectItemCaseSensitive(v, "cdiSpec") && json_cdi_spec(v, &n->rdma) < 0)
		return -EINVAL;
	v = cJSON_GetObjectItemCaseSensitive(o, "rail");
	if (v) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "table");
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(v, "priority");

		/* Rules DEL deletes by table and priority: both must be ones ADD makes. */
		if (!cJSON_IsObject(v) || !cJSON_IsNumber(t) || !cJSON_IsNumber(p) ||
		    t->valuedouble < 256 || t->valuedouble > 4294967295.0 || p->valuedouble < 1 ||
		    p->valuedouble >= 32766)
			return -EINVAL;
		n->rail_table = (unsigned int)t->valuedouble;
		n->rail_priority = (unsigned int)p->valuedouble;
	}
	/* A link DEL may remove: only a name it can be. */
	if (cJSON_GetObjectItemCaseSensitive(o, "hintsLink") &&
	    (json_str(o, "hintsLink", n->hints_link, sizeof(n->hints_link)) < 0 ||
	     !hpn_nccl_valid_link(n->hints_link)))
		return -EINVAL;
	return 0;
}

static int journal_from_json(const cJSON *root, struct hpn_journal *j)
{
	const cJSON *v, *nics;

	v = cJSON_GetObjectItemCaseSensitive(root, "phase");
	if (!cJSON_IsNumber(v) || v->valueint < HPN_PHASE_SELECTED ||
	    v->valueint > HPN_PHASE_ATTACHED)
		return -EINVAL;
	j->phase = (enum hpn_phase)v->valueint;
	v = cJSON_GetObjectItemCaseSensitive(root, "containerId");
	if (!cJSON_IsString(v) || !(j->container_id = strdup(v->valuestring)))
		return -EINVAL;
	if (json_str(root, "cniIfName", j->cni_ifname, sizeof(j->cni_ifname)) < 0)
		return -EINVAL;
	v = cJSON_GetObjectItemCaseSensitive(root, "netns");
	if (cJSON_IsString(v) && !(j->netns = strdup(v->valuestring)))
		return -ENOMEM;
	v = cJSON_GetObjectItemCaseSensitive(root, "ownerPid");
	if (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= 4194304) {
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "ownerStart");

		j->owner_pid = v->valueint;
		j->owner_start = cJSON_IsNumber(st) && st->valuedouble >= 0 &&
						 st->valuedouble < 9007199254740992.0
					 ? (unsigned long long)st->valuedouble
					 : 0;
	}
	nics = cJSON_GetObjectItemCaseSensitive(root, "nics");
	if (!nics) {
		/* Version 1: one moved NIC, described at the top level. */
		if (cJSON_GetObjectItemCaseSensitive(root, "kind") ||
		    nic_from_json(root, &j->nics[0]) < 0)
			return -EINVAL;
		j->n_nics = 1;
	} else {
		if (!cJSON_IsArray(nics) || cJSON_GetArraySize(nics) < 1 ||
		    cJSON_GetArraySize(nics) > HPN_MAX_NICS)
			return -EINVAL;
		cJSON_ArrayForEach (v, nics) {
			if (nic_from_json(v, &j->nics[j->n_nics]) < 0)
				return -EINVAL;
			j->n_nics++;
		}
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "hints");
	if (v) {
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(v, "dir");

		if (!cJSON_IsString(d) || d->valuestring[0] != '/' ||
		    json_str(v, "key", j->hints_key, sizeof(j->hints_key)) < 0 ||
		    !hpn_nccl_valid_key(j->hints_key))
			return -EINVAL;
		j->hints_dir = strdup(d->valuestring);
		if (!j->hints_dir)
			return -ENOMEM;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "devicesDir");
	if (v) {
		if (!cJSON_IsString(v) || v->valuestring[0] != '/')
			return -EINVAL;
		j->devices_dir = strdup(v->valuestring);
		if (!j->devices_dir)
			return -ENOMEM;
	}
	/* Who chose the NICs names nothing DEL needs: unknown when absent or not known. */
	v = cJSON_GetObjectItemCaseSensitive(root, "nicSource");
	for (size_t i = 1; cJSON_IsString(v) && i < HPN_ARRAY_SIZE(nic_sources); i++)
		if (!strcmp(v->valuestring, nic_sources[i]))
			j->nic_source = (enum hpn_nic_source)i;
	v = cJSON_GetObjectItemCaseSensitive(root, "cdiDir");
	if (v) {
		if (!cJSON_IsString(v) || v->valuestring[0] != '/')
			return -EINVAL;
		j->cdi_dir = strdup(v->valuestring);
		if (!j->cdi_dir)
			return -ENOMEM;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "result");
	if (cJSON_IsObject(v) && !(j->result = cJSON_PrintUnformatted(v)))
		return -ENOMEM;
	/* The pod names nothing DEL needs: a bad one is dropped, never fatal. */
	v = cJSON_GetObjectItemCaseSensitive(root, "pod");
	if (cJSON_IsObject(v)) {
		const cJSON *ns = cJSON_GetObjectItemCaseSensitive(v, "namespace");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(v, "name");
		const cJSON *uid = cJSON_GetObjectItemCaseSensitive(v, "uid");

		hpn_journal_set_pod(j, cJSON_IsString(ns) ? ns->valuestring : NULL,
				    cJSON_IsString(name) ? name->valuestring : NULL,
				    cJSON_IsString(uid) ? uid->valuestring : NULL);
	}
	return 0;
}

/*
 * Written in an earlier boot: by its bootId when it has one (a string, else
 * NULL), else by its mtime (a journal of a version before bootIds, or one a
 * power loss left unparsable). Unknown is this boot: nothing is dropped on a
 * guess.
 */
static bool earlier_boot(int fd, const cJSON *boot_id)
{
	struct stat sb;
	long long btime;

	if (boot_id && cJSON_IsString(boot_id) && hpn_boot_id())
		return strcmp(boot_id->valuestring, hpn_boot_id()) != 0;
	return fstat(fd, &sb) == 0 && hpn_boot_time(&btime) == 0 && sb.st_mtime < btime;
}

/* Whether some run holds the journal open at fd (hpn_journal_hold); tests, takes nothing. */
static bool held(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

	return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

int hpn_journal_read(struct hpn_store *st, const char *key, struct hpn_journal *j,
		     struct hpn_err *err)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int fd = -1;
	cJSON *root;
	size_t len;
	int r;

	hpn_journal_init(j);
	fd = openat(st->net_fd, key, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return -ENOENT;
		return hpn_err_set(err, HPN_E_IO, errno, "open state %s: %s", key, strerror(errno));
	}
	r = hpn_read_all(fd, JOURNAL_MAX, &buf, &len);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, r, "read state %s: %s", key, strerror(-r));
	root = hpn_json_parse(buf, len);
	r = root ? journal_from_json(root, j) : -EINVAL;
	if (r == 0)
		j->stale = earlier_boot(fd, cJSON_GetObjectItemCaseSensitive(root, "bootId"));
	cJSON_Delete(root);
	if (r < 0) {
		hpn_journal_free(j);
		if (earlier_boot(fd, NULL))
			return hpn_err_set(err, HPN_E_IO, ESTALE,
					   "state %s is unreadable and from an earlier boot", key);
		return hpn_err_set(err, HPN_E_IO, r, "state %s is corrupt", key);
	}
	j->releasing = held(fd);
	return 0;
}

int hpn_journal_remove(struct hpn_store *st, const char *key, struct hpn_err *err)
{
	if (unlinkat(st->net_fd, key, 0) < 0 && errno != ENOENT)
		return hpn_err_set(err, HPN_E_IO, errno, "remove state %s: %s", key,
				   strerror(errno));
	/* No directory fsync: see hpn_journal_write. */
	return 0;
}

int hpn_journal_hold(struct hpn_store *st, const char *key, int *fd, struct hpn_err *err)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int r;

	*fd = openat(st->net_fd, key, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open state %s: %s", key, strerror(errno));
	if (fcntl(*fd, F_OFD_SETLK, &fl) == 0)
		return 0;
	r = errno;
	close(*fd);
	*fd = -1;
	if (r == EAGAIN || r == EACCES)
		return hpn_err_set(err, HPN_E_TRY_AGAIN, EBUSY,
				   "%s is being released by another run; try again", key);
	return hpn_err_set(err, HPN_E_IO, r, "hold state %s: %s", key, strerror(r));
}

bool hpn_journal_may_exist(const char *state_dir, const char *network, const char *key)
{
	char path[4096];
	struct stat st;

	if (hpn_snprintf(path, sizeof(path), "%s/%s/%s", state_dir, network, key) < 0)
		return true;
	return !(lstat(path, &st) < 0 && errno == ENOENT);
}

bool hpn_journal_busy(const struct hpn_journal *j)
{
	/* An earlier boot's owner pid is some other process now, or none. */
	return j->releasing ||
	       (!j->stale && j->phase < HPN_PHASE_ATTACHED && j->owner_pid != getpid() &&
		hpn_proc_alive(j->owner_pid, j->owner_start));
}
