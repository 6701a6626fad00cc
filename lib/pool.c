// SPDX-License-Identifier: Apache-2.0
#include "pool.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "nl.h"
#include "sysfs.h"

void hpn_holders_free(struct hpn_holders *h)
{
	free(h->v);
	h->v = NULL;
	h->n = 0;
}

int hpn_holders_load(struct hpn_store *st, const char *skip_key, struct hpn_holders *h,
		     struct hpn_err *err)
{
	char **keys = NULL;
	size_t cap = 0;
	int r = hpn_store_keys(st, &keys, err);

	if (r < 0)
		return r;
	for (size_t k = 0; keys[k]; k++) {
		struct hpn_journal j; /* hpn_journal_read inits it */
		struct hpn_err jerr = { 0 };

		if (skip_key && !strcmp(keys[k], skip_key))
			continue;
		if (hpn_journal_read(st, keys[k], &j, &jerr) < 0) {
			hpn_warn("%s", jerr.msg);
			continue;
		}
		/* An earlier boot's journal holds nothing: the reboot gave its NICs back. */
		if (j.stale) {
			hpn_journal_free(&j);
			continue;
		}
		for (size_t i = 0; i < j.n_nics; i++) {
			struct hpn_holder *x;

			if (h->n == cap) {
				struct hpn_holder *nv =
					realloc(h->v, (cap = cap ? cap * 2 : 32) * sizeof(*nv));

				if (!nv) {
					r = -ENOMEM;
					break;
				}
				h->v = nv;
			}
			x = &h->v[h->n++];
			x->host = j.nics[i].host;
			x->child = j.nics[i].kind == HPN_NIC_CHILD;
			x->live = hpn_journal_busy(&j);
			snprintf(x->key, sizeof(x->key), "%s", keys[k]);
		}
		hpn_journal_free(&j);
		if (r < 0)
			break;
	}
	hpn_strv_free(keys);
	return r;
}

const struct hpn_holder *hpn_held_by(const struct hpn_holders *h, const struct hpn_link *l,
				     bool moved_only)
{
	for (size_t i = 0; i < h->n; i++) {
		const struct hpn_link *o = &h->v[i].host;

		if (moved_only && h->v[i].child)
			continue;
		/* By MAC, as DEL finds it; without one, only the same ifindex and name. */
		if (hpn_link_same_device(l, o) &&
		    (hpn_link_mac_usable(o) ||
		     (l->ifindex == o->ifindex && !strcmp(l->name, o->name))))
			return &h->v[i];
	}
	return NULL;
}

void hpn_linkv_free(struct hpn_linkv *lv)
{
	free(lv->v);
	free(lv->rd);
	memset(lv, 0, sizeof(*lv));
}

#define MAX_HOST_LINKS 4096

static int collect_link(const struct hpn_link *l, void *arg)
{
	struct hpn_linkv *lv = arg;

	if (lv->n == lv->cap) {
		struct hpn_link *nv;

		if (lv->cap >= MAX_HOST_LINKS)
			return -E2BIG;
		nv = realloc(lv->v, (lv->cap = lv->cap ? lv->cap * 2 : 64) * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		lv->v = nv;
	}
	lv->v[lv->n++] = *l;
	return 0;
}

/* The driver bound to netdev name's device: basename of class/net/<name>/device/driver. */
static int netdev_driver(const char *root, const char *name, char *out, size_t len)
{
	char path[4096], target[4096];
	const char *base;
	ssize_t n;

	if (hpn_snprintf(path, sizeof(path), "%s/class/net/%s/device/driver", root, name) < 0)
		return -ENAMETOOLONG;
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	base = strrchr(target, '/');
	return hpn_snprintf(out, len, "%s", base ? base + 1 : target);
}

/* The NUMA node of netdev name's device (a virtio device asks its PCI parent). */
int hpn_netdev_numa(const char *root, const char *name, int *ret)
{
	char v[32];

	if (hpn_sysfs_read(v, sizeof(v), "%s/class/net/%s/device/numa_node", root, name) < 0 &&
	    hpn_sysfs_read(v, sizeof(v), "%s/class/net/%s/device/../numa_node", root, name) < 0)
		return -ENOENT;
	*ret = (int)strtol(v, NULL, 10);
	return 0;
}

static bool glob_any(char *const *globs, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (fnmatch(globs[i], s, 0) == 0)
			return true;
	return false;
}

/* Does host netdev l meet every field match gives? rd gets its RDMA device when asked for. */
static bool match_link(const struct hpn_conf *conf, struct nl_sock *host, const struct hpn_link *l,
		       struct hpn_rdma_dev *rd)
{
	const struct hpn_match *m = &conf->match;
	char buf[HPN_PCI_STR > 64 ? HPN_PCI_STR : 64];
	bool ok = !!strcmp(l->name, "lo");

	if (ok && m->n_devices) {
		ok = glob_any(m->devices, m->n_devices, l->name);
		for (size_t i = 0; !ok && i < l->n_altnames; i++)
			ok = glob_any(m->devices, m->n_devices, l->altnames[i]);
	}
	if (ok && m->n_drivers) {
		ok = netdev_driver(conf->sysfs_root, l->name, buf, sizeof(buf)) == 0;
		for (size_t i = 0; ok && i < m->n_drivers; i++)
			if (!strcmp(m->drivers[i], buf))
				break;
			else if (i + 1 == m->n_drivers)
				ok = false;
	}
	if (ok && m->n_pci) {
		ok = hpn_sysfs_netdev_pci(conf->sysfs_root, l->name, buf) == 0;
		for (size_t i = 0; ok && i < m->n_pci; i++)
			if (!strcmp(m->pci[i], buf))
				break;
			else if (i + 1 == m->n_pci)
				ok = false;
	}
	if (ok && m->has_numa_node) {
		int node = -1;

		ok = hpn_netdev_numa(conf->sysfs_root, l->name, &node) == 0 && node == m->numa_node;
	}
	if (ok && m->n_rdma_devices) {
		struct hpn_err e = { 0 };

		ok = hpn_rdma_of_netdev(conf->sysfs_root, host, l, rd, &e) == 0 &&
		     glob_any(m->rdma_devices, m->n_rdma_devices, rd->name);
	}
	return ok;
}

static int by_name(const void *a, const void *b)
{
	/* nic2 before nic10, as a person would number them. */
	return strverscmp(((const struct hpn_link *)a)->name, ((const struct hpn_link *)b)->name);
}

int hpn_pool_candidates(struct nl_sock *host, const struct hpn_conf *conf, struct hpn_linkv *out,
			struct hpn_err *err)
{
	struct hpn_linkv all = { 0 };
	int r = hpn_link_foreach(host, collect_link, &all, err);

	if (r == -E2BIG)
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, E2BIG,
				"the host has more than %d netdevs", MAX_HOST_LINKS);
	if (r < 0)
		goto out;
	qsort(all.v, all.n, sizeof(*all.v), by_name);
	out->v = calloc(all.n + 1, sizeof(*out->v));
	out->rd = calloc(all.n + 1, sizeof(*out->rd));
	if (!out->v || !out->rd) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < all.n; i++) {
		struct hpn_rdma_dev rd = { 0 };

		if (!match_link(conf, host, &all.v[i], &rd))
			continue;
		out->rd[out->n] = rd;
		out->v[out->n++] = all.v[i];
	}
out:
	hpn_linkv_free(&all);
	return r;
}

/*
 * Where NIC l sits as NCCL sees it: its RDMA device's PCI function (an eRDMA
 * device's is not its ENI's), rd when match already found it, else found
 * here; the netdev's function for a NIC without one of its own.
 */
static void nic_pos(const struct hpn_conf *conf, struct nl_sock *host, const struct hpn_link *l,
		    const struct hpn_rdma_dev *rd, struct hpn_pci_pos *pos)
{
	struct hpn_rdma_dev found;
	struct hpn_err e = { 0 };

	if ((!rd || !rd->name[0]) && hpn_rdma_of_netdev(conf->sysfs_root, host, l, &found, &e) == 0)
		rd = &found;
	if (hpn_pci_pos_of_nic(conf->sysfs_root, l->name, rd && rd->name[0] ? rd->pci : NULL, pos) <
	    0)
		*pos = (struct hpn_pci_pos){ .numa = -1 };
}

/*
 * Candidates k of c, least used first (stable: name order among equals), as
 * the choice sees them: positions when there are GPUs to be near.
 */
static struct hpn_gpu_nic *gpu_nics(struct nl_sock *host, const struct hpn_conf *conf,
				    const struct hpn_linkv *c, const unsigned int *load,
				    const struct hpn_gpus *g, size_t *order)
{
	struct hpn_gpu_nic *v = calloc(c->n + 1, sizeof(*v));

	if (!v)
		return NULL;
	for (size_t i = 0; i < c->n; i++)
		order[i] = i;
	for (size_t i = 1; i < c->n; i++)
		for (size_t k = i; k > 0 && load[order[k]] < load[order[k - 1]]; k--) {
			size_t t = order[k];

			order[k] = order[k - 1];
			order[k - 1] = t;
		}
	for (size_t i = 0; i < c->n; i++) {
		v[i].free = load[order[i]] != UINT_MAX;
		v[i].pos.numa = -1;
		if (g && g->n)
			nic_pos(conf, host, &c->v[order[i]], &c->rd[order[i]], &v[i].pos);
	}
	return v;
}

/* The GPU a pick serves, and how near, as the choice said. */
static void take_gpu(struct hpn_pool_pick *p, const struct hpn_gpu_pick *g)
{
	p->gpu = g->gpu;
	p->dist = g->dist;
	p->best = g->best;
}

int hpn_pool_select(struct nl_sock *host, const struct hpn_conf *conf, const struct hpn_holders *h,
		    const struct hpn_gpus *g, size_t n, struct hpn_pool_pick *picks,
		    struct hpn_err *err)
{
	static const struct hpn_gpus none = { .n = 0 };
	struct hpn_linkv c = { 0 };
	size_t nfree = 0, nlive = 0, nheld = 0, *order = NULL;
	unsigned int *load = NULL;
	struct hpn_gpu_nic *nics = NULL;
	struct hpn_gpu_pick *gp = NULL;
	int r = hpn_pool_candidates(host, conf, &c, err);

	if (r < 0)
		goto out;
	load = calloc(c.n + 1, sizeof(*load));
	order = calloc(c.n + 1, sizeof(*order));
	gp = calloc(n + 1, sizeof(*gp));
	if (!load || !order || !gp) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c.n; i++) {
		const struct hpn_holder *x = hpn_held_by(h, &c.v[i], conf->mode != HPN_MODE_MOVE);

		if (x) {
			load[i] = UINT_MAX;
			continue;
		}
		nfree++;
		/* Children already on this parent (shared modes only count them). */
		for (size_t k = 0; conf->mode != HPN_MODE_MOVE && k < h->n; k++)
			if (h->v[k].child && hpn_link_same_device(&c.v[i], &h->v[k].host))
				load[i]++;
	}
	/*
	 * NICs of ADDs still running (of this network, so picked from this pool)
	 * may come back if those fail, and NICs a DEL or GC is giving back will:
	 * on the host still, or already in their pod.
	 */
	for (size_t k = 0; conf->mode == HPN_MODE_MOVE && k < h->n; k++) {
		nlive += h->v[k].live && !h->v[k].child;
		nheld += !h->v[k].child;
	}
	if (nfree < n) {
		if (nfree + nlive >= n)
			r = hpn_err_set(
				err, HPN_E_TRY_AGAIN, EBUSY,
				"match selects %zu devices; %zu free, %zu being attached or "
				"released by other runs, %zu needed: try again",
				c.n, nfree, nlive, n);
		else
			r = hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
					"match selects %zu devices in the host netns, %zu of them "
					"free, and pods hold %zu of the pool; count needs %zu%s",
					c.n, nfree, nheld, n, nheld ? ": the pool is used up" : "");
		goto out;
	}
	nics = gpu_nics(host, conf, &c, load, g, order);
	if (!nics) {
		r = -ENOMEM;
		goto out;
	}
	r = hpn_gpu_assign(g ? g : &none, nics, c.n, n, gp);
	for (size_t i = 0; r == 0 && i < n; i++) {
		size_t k = order[gp[i].nic];

		picks[i].dev = c.v[k];
		picks[i].has_rdma = conf->match.n_rdma_devices > 0;
		if (picks[i].has_rdma)
			picks[i].rdma = c.rd[k];
		take_gpu(&picks[i], &gp[i]);
	}
out:
	free(gp);
	free(nics);
	free(order);
	free(load);
	hpn_linkv_free(&c);
	return r;
}

int hpn_pool_pair(struct nl_sock *host, const struct hpn_conf *conf, const struct hpn_holders *h,
		  const struct hpn_gpus *g, size_t n, struct hpn_pool_pick *picks,
		  struct hpn_err *err)
{
	struct hpn_linkv c = { 0 };
	struct hpn_gpu_nic *nics = NULL;
	struct hpn_gpu_pick *gp = NULL;
	int r = hpn_pool_candidates(host, conf, &c, err);

	if (r < 0)
		goto out;
	/* The pool's NICs, then the picks: free are those nobody holds and not picked. */
	nics = calloc(c.n + n + 1, sizeof(*nics));
	gp = calloc(n + 1, sizeof(*gp));
	if (!nics || !gp) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c.n; i++) {
		bool picked = false;

		for (size_t k = 0; !picked && k < n; k++)
			picked = hpn_link_same_device(&c.v[i], &picks[k].dev);
		nics[i].free = !picked && !hpn_held_by(h, &c.v[i], conf->mode != HPN_MODE_MOVE);
		nic_pos(conf, host, &c.v[i], &c.rd[i], &nics[i].pos);
	}
	for (size_t k = 0; k < n; k++) {
		nic_pos(conf, host, &picks[k].dev, picks[k].has_rdma ? &picks[k].rdma : NULL,
			&nics[c.n + k].pos);
		gp[k].nic = c.n + k;
	}
	hpn_gpu_pair(g, nics, c.n + n, n, gp);
	for (size_t k = 0; k < n; k++)
		take_gpu(&picks[k], &gp[k]);
out:
	free(gp);
	free(nics);
	hpn_linkv_free(&c);
	return r;
}

/* A driver match names is loaded: registered on a bus, or a module. */
static bool driver_loaded(const char *root, const char *driver)
{
	static const char *const where[] = { "bus/pci/drivers", "bus/virtio/drivers",
					     "bus/auxiliary/drivers", "module" };

	for (size_t i = 0; i < HPN_ARRAY_SIZE(where); i++) {
		char path[4096];

		if (hpn_snprintf(path, sizeof(path), "%s/%s/%s", root, where[i], driver) == 0 &&
		    access(path, F_OK) == 0)
			return true;
	}
	return false;
}

/* Is held NIC l one of the candidates on the host (claimed, not yet moved, or a parent)? */
static bool on_host(const struct hpn_linkv *c, const struct hpn_link *l)
{
	for (size_t i = 0; i < c->n; i++)
		if (hpn_link_same_device(&c->v[i], l))
			return true;
	return false;
}

int hpn_pool_ready(const struct hpn_conf *conf, char *note, size_t len, struct hpn_err *err)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct nl_sock *host = NULL;
	struct hpn_holders h = { 0 };
	struct hpn_linkv c = { 0 };
	struct hpn_err serr = { 0 };
	char dir[4096];
	struct stat sb;
	size_t nfree = 0, away = 0;
	int r;

	if (conf->selector != HPN_SEL_MATCH) {
		snprintf(note, len, "no match in the config");
		return 1;
	}
	for (size_t i = 0; i < conf->match.n_drivers; i++)
		if (!driver_loaded(conf->sysfs_root, conf->match.drivers[i]))
			return hpn_err_set(err, HPN_E_NOT_AVAILABLE, ENOENT,
					   "driver \"%s\" of match.drivers is not loaded",
					   conf->match.drivers[i]);
	r = hpn_snprintf(dir, sizeof(dir), "%s/%s", conf->state_dir, conf->name);
	/* Nothing is created: without a state directory no NIC is held. Journals are
	 * replaced by rename, so reading them needs no lock. */
	if (r >= 0 && stat(dir, &sb) == 0) {
		r = hpn_store_open(conf->state_dir, conf->name, &st, &serr);
		if (r >= 0)
			r = hpn_holders_load(&st, NULL, &h, &serr);
	}
	if (r >= 0 && (r = hpn_nl_open(NETLINK_ROUTE, &host)) < 0)
		hpn_err_set(&serr, HPN_E_NETLINK, r, "netlink socket: %s", strerror(-r));
	if (r >= 0)
		r = hpn_pool_candidates(host, conf, &c, &serr);
	for (size_t i = 0; r >= 0 && i < c.n; i++)
		nfree += !hpn_held_by(&h, &c.v[i], conf->mode != HPN_MODE_MOVE);
	/* NICs moved into pods are the pool's too, though no longer on the host. */
	for (size_t i = 0; r >= 0 && i < h.n; i++)
		away += !h.v[i].child && !on_host(&c, &h.v[i].host);
	if (r < 0)
		hpn_err_set(err, HPN_E_NOT_AVAILABLE, -r, "%s",
			    serr.msg[0] ? serr.msg : strerror(-r));
	else if (c.n + away < conf->count)
		r = hpn_err_set(err, HPN_E_NOT_AVAILABLE, ENODEV,
				"match selects %zu devices (%zu free on the host, %zu in pods), "
				"count needs %u: no ADD can be served",
				c.n + away, nfree, c.n - nfree + away, conf->count);
	else
		snprintf(note, len,
			 "match selects %zu devices: %zu free, %zu held by pods; count %u%s",
			 c.n + away, nfree, c.n - nfree + away, conf->count,
			 nfree < conf->count ? " (ADD answers 100 until a pod gives NICs back)"
					     : "");
	hpn_linkv_free(&c);
	hpn_holders_free(&h);
	hpn_nl_close(host);
	hpn_store_close(&st);
	return r;
}
