// SPDX-License-Identifier: Apache-2.0
#include "store.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define JOURNAL_MAX (256u << 10)

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	int r = hpn_snprintf(buf, sizeof(buf), "%s", path);

	if (r < 0)
		return r;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int hpn_store_open(const char *state_dir, const char *network, struct hpn_store *st,
		   struct hpn_err *err)
{
	int r;

	r = mkdir_p(state_dir, 0700);
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

static volatile sig_atomic_t lock_timed_out;

static void on_lock_timeout(int sig)
{
	(void)sig;
	lock_timed_out = 1;
}

/*
 * Waits in flock() itself, so the kernel hands the lock over the moment its
 * holder lets go (a poll loop with a 5 ms sleep woke each waiter up to 5 ms
 * late, and every waiter at every turn). SIGALRM, installed without
 * SA_RESTART, interrupts the wait at the deadline, and again every 10 ms
 * after it in case the first one came before flock() went to sleep.
 */
int hpn_store_lock(struct hpn_store *st, int timeout_ms, struct hpn_err *err)
{
	struct sigaction sa = { .sa_handler = on_lock_timeout }, old_sa;
	struct itimerval it = { .it_interval = { 0, 10000 } };
	int r, e;

	st->lock_fd = openat(st->root_fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (st->lock_fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open state lock: %s", strerror(errno));
	while ((r = flock(st->lock_fd, LOCK_EX | LOCK_NB)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return 0;
	if (errno != EWOULDBLOCK)
		return hpn_err_set(err, HPN_E_IO, errno, "lock state: %s", strerror(errno));
	if (timeout_ms <= 0)
		goto busy;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, &old_sa) < 0)
		return hpn_err_set(err, HPN_E_INTERNAL, errno, "lock state: sigaction: %s",
				   strerror(errno));
	lock_timed_out = 0;
	it.it_value.tv_sec = timeout_ms / 1000;
	it.it_value.tv_usec = (timeout_ms % 1000) * 1000L;
	r = setitimer(ITIMER_REAL, &it, NULL);
	/* Another signal interrupts too: go on waiting until the deadline. */
	while (r == 0 && (r = flock(st->lock_fd, LOCK_EX)) < 0 && errno == EINTR && !lock_timed_out)
		r = 0;
	e = errno;
	it = (struct itimerval){ 0 };
	setitimer(ITIMER_REAL, &it, NULL);
	sigaction(SIGALRM, &old_sa, NULL);
	if (r == 0)
		return 0;
	if (e != EINTR)
		return hpn_err_set(err, HPN_E_IO, e, "lock state: %s", strerror(e));
busy:
	return hpn_err_set(err, HPN_E_TRY_AGAIN, EAGAIN,
			   "another hpn-rdma run held the state lock for %d ms", timeout_ms);
}

void hpn_store_unlock(struct hpn_store *st)
{
	if (st->lock_fd >= 0)
		close(st->lock_fd);
	st->lock_fd = -1;
}

int hpn_store_key(const char *container_id, const char *ifname, char key[HPN_KEY_MAX])
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	if (strlen(container_id) + strlen(ifname) + 2 <= 200)
		return hpn_snprintf(key, HPN_KEY_MAX, "%s.%s", container_id, ifname);
	/* File names stop at 255 bytes; CNI container IDs do not. */
	for (const char *p = container_id; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return hpn_snprintf(key, HPN_KEY_MAX, "%.150s~%016llx.%s", container_id,
			    (unsigned long long)h, ifname);
}

void hpn_journal_free(struct hpn_journal *j)
{
	free(j->container_id);
	free(j->netns);
	free(j->result);
	memset(j, 0, sizeof(*j));
}

static cJSON *link_to_json(const struct hpn_link *l)
{
	cJSON *o = cJSON_CreateObject(), *alt;
	char mac[HPN_MAC_STR];

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "name", l->name);
	cJSON_AddNumberToObject(o, "ifindex", l->ifindex);
	cJSON_AddNumberToObject(o, "mtu", l->mtu);
	cJSON_AddBoolToObject(o, "up", l->up);
	if (l->has_mac) {
		hpn_mac_format(l->mac, mac);
		cJSON_AddStringToObject(o, "mac", mac);
	}
	if (l->has_perm_mac) {
		hpn_mac_format(l->perm_mac, mac);
		cJSON_AddStringToObject(o, "permMac", mac);
	}
	if (l->kind[0])
		cJSON_AddStringToObject(o, "kind", l->kind);
	alt = cJSON_AddArrayToObject(o, "altnames");
	for (size_t i = 0; alt && i < l->n_altnames; i++)
		cJSON_AddItemToArray(alt, cJSON_CreateString(l->altnames[i]));
	return o;
}

int hpn_journal_write(struct hpn_store *st, const char *key, const struct hpn_journal *j,
		      struct hpn_err *err)
{
	char tmp[HPN_KEY_MAX + 32];
	cJSON *root = cJSON_CreateObject();
	char *text = NULL;
	size_t len, off = 0;
	int fd = -1, r = 0;

	if (!root)
		return -ENOMEM;
	cJSON_AddNumberToObject(root, "version", 1);
	cJSON_AddNumberToObject(root, "phase", j->phase);
	cJSON_AddStringToObject(root, "containerId", j->container_id);
	cJSON_AddStringToObject(root, "cniIfName", j->cni_ifname);
	cJSON_AddStringToObject(root, "podIfName", j->pod_ifname);
	if (j->netns)
		cJSON_AddStringToObject(root, "netns", j->netns);
	cJSON_AddItemToObject(root, "host", link_to_json(&j->host));
	if (j->pci[0])
		cJSON_AddStringToObject(root, "pci", j->pci);
	if (j->pod_ifindex)
		cJSON_AddNumberToObject(root, "podIfIndex", j->pod_ifindex);
	if (j->rdma.name[0]) {
		cJSON *o = cJSON_AddObjectToObject(root, "rdma");

		cJSON_AddStringToObject(o, "name", j->rdma.name);
		cJSON_AddStringToObject(o, "netdev", j->rdma.netdev);
		if (j->rdma.soft_type[0])
			cJSON_AddStringToObject(o, "softType", j->rdma.soft_type);
		cJSON_AddBoolToObject(o, "moved", j->rdma.moved);
	}
	if (j->result)
		cJSON_AddItemToObject(root, "result", cJSON_Parse(j->result));
	text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!text)
		return -ENOMEM;
	len = strlen(text);
	/* What cannot be read back cannot be undone: refuse it before writing. */
	if (len > JOURNAL_MAX) {
		free(text);
		return hpn_err_set(err, HPN_E_IO, EFBIG,
				   "state %s would be %zu bytes, over the %u-byte limit", key, len,
				   JOURNAL_MAX);
	}

	snprintf(tmp, sizeof(tmp), ".tmp.%s.%d", key, (int)getpid());
	fd = openat(st->net_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		off += (size_t)n;
	}
	if (fsync(fd) < 0 || renameat(st->net_fd, tmp, st->net_fd, key) < 0) {
		r = -errno;
		goto out;
	}
	/* The rename is durable only once the directory is. */
	fsync(st->net_fd);
out:
	if (fd >= 0)
		close(fd);
	if (r < 0) {
		unlinkat(st->net_fd, tmp, 0);
		hpn_err_set(err, HPN_E_IO, r, "write state for %s: %s", key, strerror(-r));
	}
	free(text);
	return r;
}

static int json_str(const cJSON *o, const char *k, char *out, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!cJSON_IsString(v))
		return -EINVAL;
	return hpn_snprintf(out, len, "%s", v->valuestring);
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

static int journal_from_json(const cJSON *root, struct hpn_journal *j)
{
	const cJSON *v;

	v = cJSON_GetObjectItemCaseSensitive(root, "phase");
	if (!cJSON_IsNumber(v) || v->valueint < HPN_PHASE_SELECTED ||
	    v->valueint > HPN_PHASE_ATTACHED)
		return -EINVAL;
	j->phase = (enum hpn_phase)v->valueint;
	v = cJSON_GetObjectItemCaseSensitive(root, "containerId");
	if (!cJSON_IsString(v) || !(j->container_id = strdup(v->valuestring)))
		return -EINVAL;
	if (json_str(root, "cniIfName", j->cni_ifname, sizeof(j->cni_ifname)) < 0 ||
	    json_str(root, "podIfName", j->pod_ifname, sizeof(j->pod_ifname)) < 0 ||
	    !hpn_valid_ifname(j->pod_ifname))
		return -EINVAL;
	v = cJSON_GetObjectItemCaseSensitive(root, "netns");
	if (cJSON_IsString(v) && !(j->netns = strdup(v->valuestring)))
		return -ENOMEM;
	if (link_from_json(cJSON_GetObjectItemCaseSensitive(root, "host"), &j->host) < 0)
		return -EINVAL;
	if (cJSON_GetObjectItemCaseSensitive(root, "pci") &&
	    json_str(root, "pci", j->pci, sizeof(j->pci)) < 0)
		return -EINVAL;
	v = cJSON_GetObjectItemCaseSensitive(root, "podIfIndex");
	j->pod_ifindex = cJSON_IsNumber(v) ? v->valueint : 0;
	v = cJSON_GetObjectItemCaseSensitive(root, "rdma");
	if (v &&
	    (!cJSON_IsObject(v) || json_str(v, "name", j->rdma.name, sizeof(j->rdma.name)) < 0 ||
	     json_str(v, "netdev", j->rdma.netdev, sizeof(j->rdma.netdev)) < 0))
		return -EINVAL;
	if (v && cJSON_GetObjectItemCaseSensitive(v, "softType") &&
	    json_str(v, "softType", j->rdma.soft_type, sizeof(j->rdma.soft_type)) < 0)
		return -EINVAL;
	j->rdma.moved = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "moved"));
	v = cJSON_GetObjectItemCaseSensitive(root, "result");
	if (cJSON_IsObject(v) && !(j->result = cJSON_PrintUnformatted(v)))
		return -ENOMEM;
	return 0;
}

int hpn_journal_read(struct hpn_store *st, const char *key, struct hpn_journal *j,
		     struct hpn_err *err)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int fd = -1;
	struct hpn_journal tmp = { 0 };
	cJSON *root;
	size_t len;
	int r;

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
	r = root ? journal_from_json(root, &tmp) : -EINVAL;
	cJSON_Delete(root);
	if (r < 0) {
		hpn_journal_free(&tmp);
		return hpn_err_set(err, HPN_E_IO, r, "state %s is corrupt", key);
	}
	*j = tmp;
	return 0;
}

int hpn_journal_remove(struct hpn_store *st, const char *key, struct hpn_err *err)
{
	if (unlinkat(st->net_fd, key, 0) < 0 && errno != ENOENT)
		return hpn_err_set(err, HPN_E_IO, errno, "remove state %s: %s", key,
				   strerror(errno));
	fsync(st->net_fd);
	return 0;
}
