// SPDX-License-Identifier: Apache-2.0
#include "attach.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "addr.h"
#include "ipam.h"
#include "link.h"
#include "netns.h"
#include "session.h"
#include "util.h"
#include "verbs.h"

/* Interface i of the attachment's own result, as ADD left it; l is filled. */
/*
 * The class ADD gave NIC i against the NIC's QoS now (the fabric's can
 * change under a running pod): with nccl.losslessRequired anything but
 * lossless fails; without, a class that misses the NIC's PFC priority is the
 * check's warning (the first such NIC's).
 */
static int check_qos(struct hpn_attach *a, const struct hpn_conf *conf, size_t i,
		     const struct hpn_rdma_info *ri, struct hpn_err *err)
{
	struct hpn_rdma_qos now;

	if (!conf->nccl.enabled || !ri->qos.dcb[0])
		return 0;
	hpn_nccl_qos_now(&a->j.nics[i], &ri->qos, a->ns.host, a->ns.pod, conf->sysfs_root, &now);
	if (!strcmp(now.lossless, "yes"))
		return 0;
	if (!conf->nccl.lossless_required) {
		if (!a->check_warning[0] && !strcmp(now.lossless, "no") && now.pfc > 0)
			snprintf(a->check_warning, sizeof(a->check_warning),
				 "the hints' class on \"%s\" is lossy: %s", a->j.nics[i].pod_ifname,
				 now.note);
		return 0;
	}
	a->check_reason = "qos";
	return hpn_err_set(err, HPN_E_CHECK, EPROTO,
			   "nccl.losslessRequired: the hints' class on \"%s\" (NCCL_IB_TC=%d, "
			   "NCCL_IB_SL=%d) is no longer lossless: %s",
			   a->j.nics[i].pod_ifname, now.tc, now.sl,
			   now.note[0] ? now.note : "it rides no PFC priority");
}

static int check_nic(struct hpn_attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		     const struct hpn_result *own, size_t i, struct hpn_link *ret,
		     struct hpn_err *err)
{
	const struct hpn_iface *ifc = &own->ifaces[i];
	const char *name = a->j.nics[i].pod_ifname;
	struct hpn_link l;
	char mac[HPN_MAC_STR];
	int r;

	r = hpn_link_get(a->ns.pod, 0, name, &l, err);
	if (r == -ENODEV)
		return hpn_err_set(err, HPN_E_CHECK, ENODEV,
				   "interface \"%s\" is missing from netns \"%s\"", name,
				   env->netns);
	if (r < 0)
		return r;
	hpn_mac_format(l.mac, mac);
	if (ifc->mac && strcmp(mac, ifc->mac))
		return hpn_err_set(err, HPN_E_CHECK, EINVAL,
				   "interface \"%s\" has MAC %s, expected %s", l.name, mac,
				   ifc->mac);
	if (ifc->mtu && l.mtu != (unsigned int)ifc->mtu)
		return hpn_err_set(err, HPN_E_CHECK, EINVAL,
				   "interface \"%s\" has MTU %u, expected %d", l.name, l.mtu,
				   ifc->mtu);
	if (!l.up)
		return hpn_err_set(err, HPN_E_CHECK, EINVAL, "interface \"%s\" is down", l.name);
	for (size_t k = 0; k < own->n_ips; k++) {
		if (own->ips[k].interface != (int)i)
			continue;
		r = hpn_addr_find(a->ns.pod, l.ifindex, own->ips[k].address, err);
		if (r == -ENOENT)
			return hpn_err_set(err, HPN_E_CHECK, ENOENT,
					   "address %s is missing from \"%s\"", own->ips[k].address,
					   l.name);
		if (r < 0)
			return r;
	}
	/* A rail's own table and rules (its table's routes are among the result's). */
	r = hpn_rail_check(a->ns.pod, &a->j.nics[i], &l, own, i, err);
	if (r < 0)
		return r;
	/* The RDMA device as ADD bound it: visible in the pod, port ACTIVE, same GID. */
	for (size_t k = 0; k < own->n_rdma; k++) {
		const struct hpn_rdma_info *ri = &own->rdma[k];
		struct hpn_rdma_bind b;

		if (ri->interface != (int)i || !ri->bound)
			continue;
		r = hpn_rdma_verify(a->ns.pod_fd, ri->device, (uint32_t)ri->port, l.name,
				    ri->gid_index, 0, &b, err);
		if (r < 0) {
			if (err->code == HPN_E_RDMA)
				err->code = HPN_E_CHECK;
			a->check_reason = "rdma";
			return r;
		}
		r = check_qos(a, conf, i, ri, err);
		if (r < 0)
			return r;
	}
	/* The runtime's copy of the result must still describe this interface. */
	if (conf->prev_result) {
		const struct hpn_result *p = conf->prev_result;
		bool listed = false;

		for (size_t k = 0; k < p->n_ifaces; k++)
			if (!strcmp(p->ifaces[k].name, l.name) && p->ifaces[k].sandbox &&
			    !strcmp(p->ifaces[k].sandbox, env->netns))
				listed = !p->ifaces[k].mac || !strcasecmp(p->ifaces[k].mac, mac);
		if (!listed)
			return hpn_err_set(err, HPN_E_CHECK, EINVAL,
					   "prevResult does not list \"%s\" (MAC %s) in %s", l.name,
					   mac, env->netns);
	}
	*ret = l;
	return 0;
}

/*
 * The result's routes: one in a rail's table on that rail, one in the main
 * table (or an IPAM route's own table) on the NIC whose result gave it,
 * which the result does not say: on one of the attachment's NICs.
 */
static int check_routes(struct hpn_attach *a, const struct hpn_result *own,
			const struct hpn_link *l, struct hpn_err *err)
{
	for (size_t k = 0; k < own->n_routes; k++) {
		const struct hpn_route *rt = &own->routes[k];
		const char *gw = hpn_result_route_gw(own, rt);
		size_t from = 0, to = a->j.n_nics;
		int r = -ENOENT;

		for (size_t i = 0; (rt->has & HPN_ROUTE_HAS_TABLE) && i < a->j.n_nics; i++)
			if (a->j.nics[i].rail_table && rt->table == (int)a->j.nics[i].rail_table) {
				from = i;
				to = i + 1;
			}
		for (size_t i = from; r == -ENOENT && i < to; i++)
			r = hpn_route_find(a->ns.pod, l[i].ifindex, rt, gw, err);
		if (r == -ENOENT && to - from == 1)
			return hpn_err_set(err, HPN_E_CHECK, ENOENT,
					   "route to %s via %s on \"%s\"%s is missing", rt->dst,
					   gw ? gw : "link", l[from].name,
					   rt->has & HPN_ROUTE_HAS_TABLE ? " (its rail's table)"
									 : "");
		if (r == -ENOENT)
			return hpn_err_set(err, HPN_E_CHECK, ENOENT,
					   "route to %s via %s is missing from every interface of "
					   "the attachment",
					   rt->dst, gw ? gw : "link");
		if (r < 0)
			return r;
	}
	return 0;
}

/* A NIC's hints link ("": none) still leads to the attachment's key. */
static int check_link(const char *dir, const char *key, const char *link, struct hpn_err *err)
{
	char other[256] = "";
	int r;

	if (!link[0])
		return 0;
	r = hpn_nccl_link_read(dir, link, key, other, sizeof(other));
	if (r == 0)
		return 0;
	if (r == -EXDEV)
		return hpn_err_set(err, HPN_E_CHECK, EXDEV,
				   "NCCL hints link %s/%s/%s leads to %s, not to ../%s", dir,
				   HPN_NCCL_NIC_DIR, link, other, key);
	return hpn_err_set(err, HPN_E_CHECK, -r, "NCCL hints link %s/%s/%s %s", dir,
			   HPN_NCCL_NIC_DIR, link,
			   r == -ENOENT	  ? "is missing"
			   : r == -EINVAL ? "is not a symlink"
					  : strerror(-r));
}

/* The hints file and its links are there, still this attachment's, and say what ADD wrote. */
static int check_hints(struct hpn_attach *a, const struct hpn_conf *conf,
		       const struct hpn_result *own, struct hpn_err *err)
{
	const char *dir = a->j.hints_dir, *key = a->j.hints_key;
	_cleanup_free_ char *text = NULL;
	struct hpn_vars got = { 0 };
	_cleanup_free_ char *owner = NULL;
	struct hpn_nccl_owner o;
	bool mine;
	int r;

	hpn_hints_owner(conf, a->j.container_id, a->j.cni_ifname, &o);
	owner = hpn_nccl_owner_line(&o);
	r = owner ? hpn_nccl_read(dir, key, &text, err) : -ENOMEM;
	if (r == -ENOENT)
		return hpn_err_set(err, HPN_E_CHECK, ENOENT, "NCCL hints file %s/%s/%s is missing",
				   dir, key, HPN_NCCL_FILE);
	if (r >= 0)
		r = hpn_nccl_parse(text, owner, &got, &mine);
	if (r < 0)
		return r;
	if (!mine)
		r = hpn_err_set(err, HPN_E_CHECK, EINVAL,
				"NCCL hints file %s/%s/%s was rewritten by another attachment", dir,
				key, HPN_NCCL_FILE);
	for (size_t i = 0; r >= 0 && i < own->nccl.n; i++) {
		const char *k = own->nccl.v[i].key, *v = hpn_vars_get(&got, k);

		if (!v || strcmp(v, own->nccl.v[i].value))
			r = hpn_err_set(err, HPN_E_CHECK, EINVAL,
					"NCCL hints file %s/%s/%s has %s=%s, expected %s", dir, key,
					HPN_NCCL_FILE, k, v ? v : "(unset)", own->nccl.v[i].value);
	}
	if (r >= 0 && !hpn_vars_equal(&got, &own->nccl))
		r = hpn_err_set(err, HPN_E_CHECK, EINVAL,
				"NCCL hints file %s/%s/%s has settings ADD did not write", dir, key,
				HPN_NCCL_FILE);
	hpn_vars_free(&got);
	for (size_t i = 0; r >= 0 && i < a->j.n_nics; i++)
		r = check_link(dir, key, a->j.nics[i].hints_link, err);
	return r;
}

static int check_own(struct hpn_attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		     const struct hpn_result *own, struct hpn_err *err)
{
	struct hpn_link l[HPN_MAX_NICS] = { 0 };
	int r = 0;

	for (size_t i = 0; r == 0 && i < a->j.n_nics; i++)
		r = check_nic(a, env, conf, own, i, &l[i], err);
	if (r == 0)
		r = check_routes(a, own, l, err);
	return r;
}

/*
 * What CHECK verifies from ADD's own record, the journal: every interface in
 * the netns env names as the result says, each RDMA device proven again, the
 * hints file. The CNI's CHECK runs it after IPAM CHECK; the agent's health
 * loop (hpn_check_journal) runs it alone. a->check_reason names the part that
 * failed.
 */
static int check_recorded(struct hpn_attach *a, const struct hpn_env *env,
			  const struct hpn_conf *conf, struct hpn_err *err)
{
	struct hpn_result *own = NULL;
	int r;

	a->check_reason = "netns";
	r = hpn_netns_open(env->netns, &a->ns.pod_fd, err);
	if (r >= 0)
		r = hpn_nsctx_open_pod(&a->ns, env->netns, err);
	if (r >= 0) {
		a->check_reason = "state";
		r = hpn_result_parse(a->j.result, strlen(a->j.result), &own, err);
	}
	if (r >= 0 && own->n_ifaces != a->j.n_nics)
		r = hpn_err_set(err, HPN_E_IO, EINVAL, "state %s is corrupt", a->key);
	if (r >= 0) {
		a->check_reason = "interface";
		r = check_own(a, env, conf, own, err);
	}
	if (r >= 0 && a->j.hints_key[0]) {
		a->check_reason = "hints";
		r = check_hints(a, conf, own, err);
	}
	if (r >= 0)
		a->check_reason = NULL;
	hpn_result_free(own);
	return r;
}

int hpn_check(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	struct hpn_attach a;
	int r;

	if (hpn_untouched_pod(env, conf))
		return 0;
	if (!conf->prev_result)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "CHECK needs prevResult");
	r = hpn_attach_open(&a, env, conf, err);
	if (r < 0)
		goto out;
	if (!a.have_journal || a.j.phase != HPN_PHASE_ATTACHED || !a.j.result || a.j.stale) {
		r = hpn_err_set(err, HPN_E_CHECK, ENOENT,
				"no completed attachment for container %s, interface %s%s",
				env->container_id, env->ifname,
				a.have_journal && a.j.stale ? " (its state is from an earlier boot)"
							    : "");
		goto out;
	}
	/* CHECK only reads: other runs need not wait for its RDMA proofs. */
	hpn_store_unlock(&a.st);
	for (size_t i = 0; conf->has_ipam && i < a.j.n_nics; i++) {
		struct hpn_env ienv = *env;

		ienv.ifname = hpn_ipam_ifname(&a.j, env->ifname, i);
		r = hpn_ipam_run(conf, &ienv, "CHECK", err);
		if (r < 0)
			goto out;
	}
	r = check_recorded(&a, env, conf, err);
	if (r == 0 && a.check_warning[0])
		hpn_warn("CHECK: %s", a.check_warning);
out:
	hpn_attach_close(&a);
	return r;
}

/* A completed attachment of this boot that no other run is working on. */
static bool checkable(const struct hpn_journal *j)
{
	return j->phase == HPN_PHASE_ATTACHED && j->result && j->netns && !j->stale &&
	       !hpn_journal_busy(j);
}

int hpn_check_journal(const struct hpn_conf *conf, const char *key, struct hpn_check_report *rep,
		      struct hpn_err *err)
{
	struct hpn_attach a = { .st = HPN_STORE_INIT, .ns = { .host_fd = -1, .pod_fd = -1 } };
	struct hpn_env env = { .cmd = HPN_CMD_CHECK, .command = "CHECK" };
	struct hpn_journal again = { 0 };
	struct hpn_err rerr = { 0 };
	int r;

	memset(rep, 0, sizeof(*rep));
	if (hpn_snprintf(a.key, sizeof(a.key), "%s", key) < 0)
		return hpn_err_set(err, HPN_E_INVALID_ENV, ENAMETOOLONG,
				   "state key %.64s is too long", key);
	/* No store lock: a journal is replaced by rename, so each read sees a whole one. */
	r = hpn_store_open(conf->state_dir, conf->name, &a.st, err);
	if (r >= 0)
		r = hpn_journal_read(&a.st, key, &a.j, err);
	if (r == -ENOENT || r == -ESTALE) {
		memset(err, 0, sizeof(*err));
		r = 1;
		goto out;
	}
	if (r < 0) {
		rep->reason = "state";
		goto out;
	}
	a.have_journal = true;
	if (!checkable(&a.j)) {
		r = 1;
		goto out;
	}
	env.container_id = a.j.container_id;
	env.ifname = a.j.cni_ifname;
	env.netns = a.j.netns;
	r = hpn_nsctx_open_host(&a.ns, err);
	if (r >= 0)
		r = check_recorded(&a, &env, conf, err);
	rep->reason = a.check_reason;
	snprintf(rep->warning, sizeof(rep->warning), "%s", a.check_warning);
	if (r >= 0)
		goto out;
	/*
	 * A DEL (or a new ADD of the attachment) may have begun meanwhile and
	 * taken the interface away: then what failed was theirs to change.
	 */
	if (hpn_journal_read(&a.st, key, &again, &rerr) < 0 || !checkable(&again) ||
	    strcmp(again.container_id, a.j.container_id)) {
		memset(err, 0, sizeof(*err));
		rep->reason = NULL;
		r = 1;
	}
	hpn_journal_free(&again);
out:
	hpn_attach_close(&a);
	return r;
}
