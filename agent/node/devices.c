// SPDX-License-Identifier: Apache-2.0
#include "devices.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "log.h"
#include "pool.h"
#include "rdma.h"
#include "store.h"
#include "sysfs.h"
#include "util.h"

static struct agent_dev *find(struct agent_dev *v, size_t n, const char *id)
{
	for (size_t i = 0; id && i < n; i++)
		if (!strcmp(v[i].id, id))
			return &v[i];
	return NULL;
}

const struct agent_dev *agent_devs_find(const struct agent_devs *devs, const char *id)
{
	return find((struct agent_dev *)devs->v, devs->n, id);
}

/* The RDMA port's state file says "1: DOWN" when the port is down. */
static bool port_down(const char *root, const char *ibdev, unsigned int port)
{
	char v[32];

	if (hpn_sysfs_read(v, sizeof(v), "%s/class/infiniband/%s/ports/%u/state", root, ibdev,
			   port ? port : 1) < 0)
		return false;
	return !strncmp(v, "1:", 2) || strstr(v, "DOWN");
}

/* One NIC the pool selects on the host now. */
static void host_dev(const struct hpn_conf *conf, struct nl_sock *host, const struct hpn_link *l,
		     const struct hpn_rdma_dev *rd, struct agent_dev *d)
{
	struct hpn_rdma_dev found;
	struct hpn_err e = { 0 };

	memset(d, 0, sizeof(*d));
	hpn_alloc_nic_id(conf->sysfs_root, l->name, d->id);
	snprintf(d->ifname, sizeof(d->ifname), "%s", l->name);
	if (hpn_netdev_numa(conf->sysfs_root, l->name, &d->numa) < 0 || d->numa < 0)
		d->numa = -1;
	if (!rd && hpn_rdma_of_netdev(conf->sysfs_root, host, l, &found, &e) == 0)
		rd = &found;
	d->healthy = true;
	/* The topology hint is where the RDMA device is (an eRDMA function is its own). */
	if (rd && rd->pci[0]) {
		struct hpn_pci_pos pos;

		if (hpn_pci_pos_of_pci(conf->sysfs_root, rd->pci, &pos) == 0)
			d->numa = pos.numa;
	}
	if (rd) {
		snprintf(d->rdma, sizeof(d->rdma), "%s", rd->name);
		d->port = rd->port;
		if (port_down(conf->sysfs_root, rd->name, rd->port)) {
			d->healthy = false;
			d->fault = AGENT_FAULT_PORT_DOWN;
			snprintf(d->why, sizeof(d->why), "RDMA device %s port %u is DOWN", rd->name,
				 rd->port ? rd->port : 1);
		}
	}
}

/* d, held by journal j: taken (out of the kubelet's hands) when ADD chose it from the pool. */
static void take(struct agent_dev *d, const struct hpn_journal *j)
{
	if (j->nic_source != HPN_NIC_SRC_POOL || j->stale || d->taken)
		return;
	d->taken = true;
	if (j->pod.name[0])
		snprintf(d->taker, sizeof(d->taker), "%s/%s", j->pod.namespace, j->pod.name);
	else
		snprintf(d->taker, sizeof(d->taker), "sandbox %.12s", j->container_id);
}

/* Said when d's place in the ledger changed since old (NULL: first seen). */
static void say_taken(const struct agent_dev *d, const struct agent_dev *old)
{
	if (d->taken && (!old || !old->taken || strcmp(d->taker, old->taker)))
		hpn_info("device %s (\"%s\") is out of the kubelet's hands: pod %s took it from "
			 "the pool (selected, allocated nothing); Unhealthy to the kubelet, left "
			 "out of the DRA slices until it is released",
			 d->id, d->ifname, d->taker);
	else if (!d->taken && old && old->taken)
		hpn_info("device %s (\"%s\") is the kubelet's to give again: pod %s released it",
			 d->id, d->ifname, old->taker);
}

/* NICs of the network's journals: moved into pods (gone from the host) or parents of children. */
static int held_devs(const struct hpn_conf *conf, struct agent_dev *v, size_t *n,
		     struct hpn_err *err)
{
	struct hpn_store st = HPN_STORE_INIT;
	char **keys = NULL;
	int r = hpn_store_open_here(conf->state_dir, conf->name, &st, err);

	if (r >= 0)
		r = hpn_store_keys(&st, &keys, err);
	for (size_t k = 0; r >= 0 && keys[k]; k++) {
		struct hpn_journal j = { 0 };
		struct hpn_err jerr = { 0 };

		/* Journals are replaced by rename: each read sees a whole one. */
		if (hpn_journal_read(&st, keys[k], &j, &jerr) < 0)
			continue;
		for (size_t i = 0; i < j.n_nics; i++) {
			const struct hpn_journal_nic *jn = &j.nics[i];
			char id[HPN_ALLOC_ID_MAX];
			struct agent_dev *d;

			hpn_alloc_journal_id(jn, id);
			d = find(v, *n, id);
			if (d) {
				d->held = true;
				take(d, &j);
				continue;
			}
			if (jn->kind != HPN_NIC_MOVED || *n == HPN_AGENT_MAX_DEVICES)
				continue;
			d = &v[(*n)++];
			memset(d, 0, sizeof(*d));
			snprintf(d->id, sizeof(d->id), "%s", id);
			snprintf(d->ifname, sizeof(d->ifname), "%s", jn->host.name);
			/* A device ADD made (softRoce) is the pod's, not the NIC's: it goes at DEL. */
			if (!jn->rdma.created)
				snprintf(d->rdma, sizeof(d->rdma), "%s", jn->rdma.name);
			d->held = true;
			d->healthy = true; /* in its pod, where the host cannot look */
			take(d, &j);
			d->numa = -1;
			if (jn->pci[0]) {
				char s[16];

				if (hpn_sysfs_read(s, sizeof(s), "%s/bus/pci/devices/%s/numa_node",
						   conf->sysfs_root, jn->pci) == 0)
					d->numa = (int)strtol(s, NULL, 10);
			}
		}
		hpn_journal_free(&j);
	}
	hpn_strv_free(keys);
	hpn_store_close(&st);
	return r < 0 ? r : 0;
}

int agent_devs_scan(struct agent_devs *devs, const struct hpn_conf *conf, struct nl_sock *host,
		    struct hpn_err *err)
{
	struct hpn_linkv lv = { 0 };
	struct agent_dev *fresh = calloc(HPN_AGENT_MAX_DEVICES, sizeof(*fresh));
	struct agent_devs *out = calloc(1, sizeof(*out));
	size_t n = 0;
	int r, changed = 0;

	if (!fresh || !out) {
		r = -ENOMEM;
		goto done;
	}
	r = hpn_pool_candidates(host, conf, &lv, err);
	if (r < 0)
		goto done;
	for (size_t k = 0; k < lv.n && n < HPN_AGENT_MAX_DEVICES; k++) {
		struct agent_dev d;

		host_dev(conf, host, &lv.v[k], conf->match.n_rdma_devices ? &lv.rd[k] : NULL, &d);
		if (find(fresh, n, d.id)) {
			hpn_warn("pool NIC \"%s\" has the device ID %s of another: left out (NICs "
				 "sharing one PCI function cannot be told apart)",
				 d.ifname, d.id);
			continue;
		}
		fresh[n++] = d;
	}
	r = held_devs(conf, fresh, &n, err);
	if (r < 0)
		goto done;

	/* The last scan's devices keep their places; what is gone stays, Unhealthy. */
	for (size_t i = 0; i < devs->n; i++) {
		const struct agent_dev *old = &devs->v[i];
		struct agent_dev *now = find(fresh, n, old->id), d;

		if (now) {
			d = *now;
			/* Broken stays until the health loop says otherwise, while a journal holds it. */
			d.broken = old->broken && d.held;
			if (d.broken)
				snprintf(d.why, sizeof(d.why), "%s", old->why);
			if (d.held) {
				d.verdict = old->verdict;
				snprintf(d.verdict_msg, sizeof(d.verdict_msg), "%s",
					 old->verdict_msg);
			}
			/* An RDMA device seen before and gone now is a fault of the NIC. */
			if (!d.rdma[0] && old->rdma[0] && !d.held) {
				snprintf(d.rdma, sizeof(d.rdma), "%s", old->rdma);
				d.port = old->port;
				d.healthy = false;
				d.gone = true;
				d.fault = AGENT_FAULT_RDMA_GONE;
				snprintf(d.why, sizeof(d.why), "its RDMA device %s vanished",
					 old->rdma);
			}
			if (d.numa < 0)
				d.numa = old->numa;
		} else {
			d = *old;
			d.healthy = false;
			d.held = false;
			d.broken = false;
			d.verdict = AGENT_VERDICT_NONE;
			d.verdict_msg[0] = '\0';
			d.gone = true;
			d.fault = AGENT_FAULT_VANISHED;
			snprintf(d.why, sizeof(d.why), "\"%s\" vanished from the host",
				 old->ifname);
		}
		d.base_healthy = d.healthy;
		d.healthy = d.base_healthy && !d.broken;
		say_taken(&d, old);
		changed |= d.taken != old->taken || d.verdict != old->verdict;
		if (d.healthy != old->healthy || d.numa != old->numa) {
			changed = 1;
			if (d.healthy)
				hpn_info("device %s (\"%s\") is Healthy again", d.id, d.ifname);
			else
				hpn_warn("device %s (\"%s\") is Unhealthy: %s", d.id, d.ifname,
					 d.why);
		}
		out->v[out->n++] = d;
	}
	for (size_t i = 0; i < n && out->n < HPN_AGENT_MAX_DEVICES; i++) {
		if (find(out->v, out->n, fresh[i].id))
			continue;
		fresh[i].base_healthy = fresh[i].healthy;
		out->v[out->n++] = fresh[i];
		changed = 1;
		say_taken(&fresh[i], NULL);
		hpn_info("device %s: \"%s\"%s%s, NUMA node %d, %s%s%s", fresh[i].id,
			 fresh[i].ifname, fresh[i].rdma[0] ? " RDMA " : "", fresh[i].rdma,
			 fresh[i].numa, fresh[i].healthy ? "Healthy" : "Unhealthy: ",
			 fresh[i].healthy ? "" : fresh[i].why, fresh[i].held ? " (held)" : "");
	}
	*devs = *out;
	r = changed;
done:
	hpn_linkv_free(&lv);
	free(fresh);
	free(out);
	return r;
}

int agent_devs_set_verdict(struct agent_devs *devs, const char *id, enum agent_verdict v,
			   const char *msg)
{
	struct agent_dev *d = find(devs->v, devs->n, id);
	bool was, same;

	if (!d || (!d->held && v != AGENT_VERDICT_NONE))
		return 0;
	if (!msg)
		msg = "";
	same = d->verdict == v && !strcmp(d->verdict_msg, msg);
	was = d->healthy;
	d->verdict = v;
	snprintf(d->verdict_msg, sizeof(d->verdict_msg), "%s", msg);
	d->broken = v == AGENT_VERDICT_BROKEN;
	if (d->broken)
		snprintf(d->why, sizeof(d->why), "%s", msg);
	d->healthy = d->base_healthy && !d->broken;
	if (d->healthy == was)
		return !same;
	if (d->healthy)
		hpn_info("device %s (\"%s\") is Healthy again: its attachment is whole", d->id,
			 d->ifname);
	else
		hpn_warn("device %s (\"%s\") is Unhealthy: %s", d->id, d->ifname, d->why);
	return 1;
}

const char *agent_dev_fault(const struct agent_dev *d)
{
	if (d->healthy)
		return NULL;
	if (d->broken)
		return "AttachmentBroken";
	switch (d->fault) {
	case AGENT_FAULT_VANISHED:
		return "Vanished";
	case AGENT_FAULT_RDMA_GONE:
		return "RDMADeviceGone";
	case AGENT_FAULT_PORT_DOWN:
		return "PortDown";
	case AGENT_FAULT_NONE:
		break;
	}
	return "Unhealthy";
}

/* ---- GetPreferredAllocation ------------------------------------------------------ */

static bool listed(const char **v, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] && !strcmp(v[i], id))
			return true;
	return false;
}

static int numa_of(const struct agent_devs *devs, const char *id)
{
	const struct agent_dev *d = agent_devs_find(devs, id);

	return d ? d->numa : -1;
}

static bool is_free(const struct agent_devs *devs, const char *id)
{
	const struct agent_dev *d = agent_devs_find(devs, id);

	return d && !d->held && d->healthy;
}

int agent_prefer(const struct agent_devs *devs, char **avail, size_t n_avail, char **must,
		 size_t n_must, size_t size, const char **out, struct hpn_err *err)
{
	size_t n = 0;
	int nodes[HPN_AGENT_MAX_DEVICES];
	size_t n_nodes = 0;

	if (size > n_avail || n_must > size)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "%zu devices asked of %zu available with %zu that must be in",
				   size, n_avail, n_must);
	/* The kubelet's must-include are among the available: an answer names no other. */
	for (size_t i = 0; i < n_must; i++)
		if (!listed((const char **)avail, n_avail, must[i]))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "device %s must be in but is not available", must[i]);
	for (size_t i = 0; i < n_must; i++) {
		if (listed(out, n, must[i]))
			continue;
		out[n++] = must[i];
	}
	/* Nodes in use so far: must_include's, then those we add. */
	for (size_t i = 0; i < n; i++) {
		int node = numa_of(devs, out[i]);
		bool seen = false;

		for (size_t k = 0; k < n_nodes; k++)
			seen |= nodes[k] == node;
		if (!seen)
			nodes[n_nodes++] = node;
	}
	/* Passes: free NICs on chosen nodes; then, node by node, the fullest; then any held. */
	while (n < size) {
		const char *pick = NULL;

		for (size_t i = 0; !pick && i < n_avail; i++) {
			if (listed(out, n, avail[i]) || !is_free(devs, avail[i]))
				continue;
			for (size_t k = 0; k < n_nodes; k++)
				if (nodes[k] == numa_of(devs, avail[i]))
					pick = avail[i];
		}
		if (!pick) {
			/* The node with the most free, unchosen NICs opens next. */
			size_t best = 0;
			int best_node = -2;

			for (size_t i = 0; i < n_avail; i++) {
				size_t count = 0;
				int node = numa_of(devs, avail[i]);

				if (listed(out, n, avail[i]) || !is_free(devs, avail[i]))
					continue;
				for (size_t j = 0; j < n_avail; j++)
					count += !listed(out, n, avail[j]) &&
						 is_free(devs, avail[j]) &&
						 numa_of(devs, avail[j]) == node;
				if (count > best) {
					best = count;
					best_node = node;
					pick = avail[i];
				}
			}
			if (pick)
				nodes[n_nodes++] = best_node;
		}
		for (size_t i = 0; !pick && i < n_avail; i++)
			if (!listed(out, n, avail[i]))
				pick = avail[i];
		if (!pick)
			break;
		out[n++] = pick;
	}
	if (n != size)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "cannot choose %zu distinct devices", size);
	return 0;
}
