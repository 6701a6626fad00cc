// SPDX-License-Identifier: Apache-2.0
#include "attach.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "addr.h"
#include "ipam.h"
#include "link.h"
#include "log.h"
#include "netns.h"
#include "rdma.h"
#include "session.h"
#include "util.h"
#include "verbs.h"

/* How long the kernel may take to fill the GID table after an address is set. */
#define GID_TIMEOUT_MS 10000

/* The NIC of the attachment ADD is working on, for fault(). */
static size_t fault_nic;

/*
 * Test-only fault injection: HPN_FAIL_AT=<step> fails ADD right after <step>
 * of NIC HPN_FAIL_NIC (default 0, the first; steps after IPAM are per
 * attachment); with HPN_FAIL_KILL set, the plugin kills itself there instead.
 */
static int fault(const char *step, struct hpn_err *err)
{
#ifdef HPN_TEST_HOOKS
	const char *at = getenv("HPN_FAIL_AT"), *nic = getenv("HPN_FAIL_NIC");

	if (at && !strcmp(at, step) && fault_nic == (nic ? strtoul(nic, NULL, 10) : 0)) {
		/* HPN_FAIL_KILL: a crash there instead, leaving the journal as it is. */
		if (getenv("HPN_FAIL_KILL"))
			raise(SIGKILL);
		return hpn_err_set(err, HPN_E_INTERNAL, EIO, "injected failure after step %s",
				   step);
	}
#endif
	return 0;
}

/* NIC i's routes, at most: each of its IPAM result's in the main table and in its rail's. */
#define NIC_ROUTES ((size_t)2 * HPN_MAX_ROUTES)

/*
 * Addresses of NIC i's IPAM result on its pod interface, still down; then
 * up, at which the kernel sends a gratuitous ARP for each IPv4 address (the
 * arp_notify attach_nic set): neighbours may cache them for an earlier
 * owner. (An IPAM plugin that brought the link up itself, as dhcp does, gets
 * no announcement.) Then the routes, which need the link up, and for a rail
 * its own table and rules (rails.c).
 */
static int configure_ip(struct hpn_attach *a, size_t i, struct hpn_link *l,
			struct hpn_result *const *ipam, struct hpn_err *err)
{
	struct hpn_route *rts = calloc(NIC_ROUTES, sizeof(*rts));
	size_t n;
	int r = rts ? 0 : -ENOMEM;

	for (size_t k = 0; r == 0 && k < ipam[i]->n_ips; k++)
		r = hpn_addr_add(a->ns.pod, l->ifindex, l->name, ipam[i]->ips[k].address, err);
	if (r == 0)
		r = fault("addr", err);
	if (r == 0)
		r = hpn_link_set(a->ns.pod, l, NULL, 0, 1, 0, err);
	if (r == 0)
		r = fault("up", err);
	n = r == 0 ? hpn_nic_routes(&a->j, ipam, i, rts, NIC_ROUTES) : 0;
	for (size_t k = 0; r == 0 && k < n; k++)
		r = hpn_route_add(a->ns.pod, l->ifindex, l->name, &rts[k],
				  rts[k].gw ? rts[k].gw : hpn_result_route_gw(ipam[i], &rts[k]),
				  err);
	if (r == 0)
		r = fault("route", err);
	if (r == 0)
		r = hpn_rail_apply(a->ns.pod, &a->j.nics[i], l->ifindex, ipam[i], err);
	if (r == 0 && a->j.nics[i].rail_table)
		r = fault("rail", err);
	free(rts);
	return r;
}

/*
 * Neighbours may cache the pod's IPv6 addresses for an earlier owner: tell
 * them (the kernel announced the IPv4 ones when the link came up). Best
 * effort, after ADD is complete.
 */
static void announce(struct hpn_attach *a, const struct hpn_link *l, const struct hpn_result *ipam)
{
	bool entered = false;
	int r;

	for (size_t i = 0; i < ipam->n_ips; i++) {
		if (!strchr(ipam->ips[i].address, ':'))
			continue;
		if (!entered) {
			r = hpn_netns_enter(a->ns.pod_fd);
			if (r < 0) {
				hpn_warn("announce on %s: enter pod netns: %s", l->name,
					 strerror(-r));
				return;
			}
			entered = true;
		}
		r = hpn_announce(l->ifindex, l->mac, ipam->ips[i].address);
		if (r < 0)
			hpn_warn("announce %s on %s: %s", ipam->ips[i].address, l->name,
				 strerror(-r));
	}
	if (entered && hpn_netns_enter(a->ns.host_fd) < 0)
		hpn_warn("announce: return to the host netns: %s", strerror(errno));
}

static int journal_step(struct hpn_attach *a, enum hpn_phase phase, struct hpn_err *err)
{
	a->j.phase = phase;
	return hpn_journal_write(&a->st, a->key, &a->j, err);
}

/* Exclusive mode: the RDMA device follows the netdev. Shared: it must still exist. */
static int move_rdma(struct hpn_attach *a, struct hpn_journal_nic *n, const struct hpn_rdma_plan *p,
		     struct hpn_err *err)
{
	int r;

	if (p->mode == HPN_RDMA_NETNS_EXCLUSIVE) {
		n->rdma.moved = true;
		r = journal_step(a, HPN_PHASE_MOVING, err);
		if (r == 0)
			r = hpn_rdma_set_netns(p->dev.name, a->ns.pod_fd, err);
		if (r < 0)
			hpn_err_details(err, "exclusive RDMA netns mode: the device must move "
					     "with its netdev");
		return r;
	}
	r = hpn_rdma_present(p->dev.name, err);
	if (r == -EPROTONOSUPPORT)
		return 0; /* cannot tell here; the check from the pod will */
	/* From 7.1 a child cannot use its parent's rxe either (softroce.c): one made in the pod. */
	if (r == 0 && hpn_rdma_rxe_per_netns())
		return hpn_err_set(err, HPN_E_RDMA, ENODEV,
				   "RDMA device \"%s\" was destroyed by the kernel when \"%s\" "
				   "left the host netns (%s devices stay with their netdev): "
				   "delete it and set softRoce, which makes one in the pod",
				   p->dev.name, p->dev.netdev, hpn_rdma_kind_name(p->dev.kind));
	if (r == 0)
		return hpn_err_set(err, HPN_E_RDMA, ENODEV,
				   "RDMA device \"%s\" was destroyed by the kernel when \"%s\" "
				   "left the host netns (%s devices stay with their netdev): "
				   "attach a macvlan child of \"%s\" instead",
				   p->dev.name, p->dev.netdev, hpn_rdma_kind_name(p->dev.kind),
				   p->dev.netdev);
	return r < 0 ? r : 0;
}

/* The result's "rdma" entry for interface 0 of this attachment's own result. */
static void rdma_info(const struct hpn_rdma_plan *p, const struct hpn_rdma_bind *b,
		      struct hpn_rdma_info *ri)
{
	memset(ri, 0, sizeof(*ri));
	ri->gid_index = -1;
	if (!p->found) {
		snprintf(ri->reason, sizeof(ri->reason), "%s", p->reason);
		return;
	}
	ri->bound = true;
	snprintf(ri->device, sizeof(ri->device), "%.*s", (int)sizeof(ri->device) - 1, b->device);
	ri->port = (int)b->port;
	ri->gid_index = b->gid_index;
	snprintf(ri->gid, sizeof(ri->gid), "%s", b->gid);
	snprintf(ri->driver, sizeof(ri->driver), "%s", hpn_rdma_kind_name(p->dev.kind));
	ri->vf = p->dev.vf;
	snprintf(ri->pci, sizeof(ri->pci), "%s", p->dev.pci);
	snprintf(ri->netns_mode, sizeof(ri->netns_mode), "%s", hpn_rdma_netns_name(p->mode));
	snprintf(ri->link_layer, sizeof(ri->link_layer), "%s", b->link_layer);
	snprintf(ri->transport, sizeof(ri->transport), "%s", b->transport);
	ri->lid = b->lid;
	snprintf(ri->port_guid, sizeof(ri->port_guid), "%s", b->port_guid);
}

/* Is table one of the attachment's rail tables? */
static bool rail_table(const struct hpn_journal *j, const struct hpn_route *rt)
{
	for (size_t i = 0; j && (rt->has & HPN_ROUTE_HAS_TABLE) && i < j->n_nics; i++)
		if (j->nics[i].rail_table && rt->table == (int)j->nics[i].rail_table)
			return true;
	return false;
}

/*
 * prevResult (if chained) with this attachment's interface, IPs and routes
 * appended. A result before 1.1.0 has no route "table": the routes of the
 * rails' own tables (j; NULL: none) are left out of it rather than shown as
 * main-table routes.
 */
static int build_result(const struct hpn_conf *conf, const struct hpn_journal *j,
			const struct hpn_result *own, struct hpn_result **ret)
{
	struct hpn_result *res = hpn_result_new();
	size_t base, keep;
	int r = 0;

	if (!res)
		return -ENOMEM;
	if (conf->prev_result)
		r = hpn_result_append(res, conf->prev_result, -1);
	if (r >= 0 && hpn_dns_empty(&res->dns))
		r = hpn_dns_copy(&res->dns, &conf->dns);
	base = res->n_routes;
	if (r >= 0)
		r = hpn_result_append(res, own, -1);
	keep = base;
	for (size_t k = base; r >= 0 && k < res->n_routes; k++) {
		if (hpn_version_cmp(conf->cni_version, "1.1.0") < 0 &&
		    rail_table(j, &res->routes[k])) {
			free(res->routes[k].dst);
			free(res->routes[k].gw);
			continue;
		}
		res->routes[keep++] = res->routes[k];
	}
	if (r >= 0)
		res->n_routes = keep;
	if (r < 0) {
		hpn_result_free(res);
		return r;
	}
	*ret = res;
	return 0;
}

/*
 * Renders the NCCL settings for what own bound into own's "nccl" (its class
 * against each NIC's QoS as the plan read it: own's rdma[i].qos) and the file
 * text into *ret, for the file the claim journalled (a->j.hints_*).
 */
static int hints_prepare(struct hpn_attach *a, const struct hpn_env *env,
			 const struct hpn_conf *conf, const struct hpn_nic_plan *plans,
			 struct hpn_result *own, char **ret, struct hpn_err *err)
{
	const struct hpn_nccl_profile *p = hpn_nccl_profile(&conf->nccl, conf->gpu_model);
	struct hpn_bound_nic nics[HPN_MAX_RDMA];
	struct hpn_rdma_qos qos[HPN_MAX_RDMA];
	size_t n = hpn_result_bound(own, nics, HPN_ARRAY_SIZE(nics));
	struct hpn_nccl_owner o;
	int r;

	/* own's rdma[i] is NIC i's (own_result). */
	for (size_t i = 0; i < n && i < a->j.n_nics; i++) {
		nics[i].qos = plans[i].rdma.qos_read ? &plans[i].rdma.qos : NULL;
		qos[i] = own->rdma[i].qos;
	}
	r = hpn_nccl_render(&conf->nccl, p, nics, n, &own->nccl, err);
	if (r >= 0)
		r = hpn_nccl_qos(&conf->nccl, nics, n, &own->nccl, qos, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		if (qos[i].dcb[0])
			snprintf(qos[i].netdev, sizeof(qos[i].netdev), "%s",
				 plans[i].rdma.qos_netdev);
		own->rdma[i].qos = qos[i];
	}
	if (asprintf(&own->nccl_file, "%s/%s/%s", a->j.hints_dir, a->j.hints_key, HPN_NCCL_FILE) <
	    0) {
		own->nccl_file = NULL;
		return -ENOMEM;
	}
	own->nccl_conf_file =
		strdup(conf->nccl.conf_file ? conf->nccl.conf_file : HPN_DEFAULT_NCCL_CONF_FILE);
	if (!own->nccl_conf_file)
		return -ENOMEM;
	hpn_hints_owner(conf, env->container_id, env->ifname, &o);
	o.pod_namespace = hpn_env_arg(env, "K8S_POD_NAMESPACE");
	o.pod_name = hpn_env_arg(env, "K8S_POD_NAME");
	o.pod_uid = hpn_env_arg(env, "K8S_POD_UID");
	*ret = hpn_nccl_format(&own->nccl, &o, conf->nccl.conf_file, nics, n);
	return *ret ? 0 : -ENOMEM;
}

/* A pod podSelector does not pick: prevResult goes through unchanged. */
static int pass_through(const struct hpn_conf *conf, struct hpn_result **ret)
{
	struct hpn_result *none = hpn_result_new();
	int r;

	if (!none)
		return -ENOMEM;
	hpn_info("pod not selected (podSelector %s): passing prevResult through",
		 conf->pod_selector);
	r = build_result(conf, NULL, none, ret);
	hpn_result_free(none);
	return r;
}

/* NIC i into the pod: moved (altnames held back, move+rename) or created as a child; up. */
static int attach_nic(struct hpn_attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		      size_t i, const struct hpn_nic_plan *plan, struct hpn_link *pl,
		      struct hpn_err *err)
{
	struct hpn_journal_nic *n = &a->j.nics[i];
	const struct hpn_link *dev = &plan->dev;
	bool moved = n->kind == HPN_NIC_MOVED;
	int r = 0;

	fault_nic = i;
	if (moved) {
		/* Altnames travel with the device and could clash in the pod: hold them here. */
		for (size_t k = 0; r == 0 && k < dev->n_altnames; k++)
			r = hpn_link_altname(a->ns.host, dev, dev->altnames[k], false, err);
		if (r == 0)
			r = fault("altnames", err);
		if (r == 0)
			r = hpn_link_move(a->ns.host, dev, a->ns.pod_fd, n->pod_ifname, err);
	} else {
		unsigned int child_mode = 0;
		struct hpn_child c;

		/* The config's macvlanMode or ipvlanMode; a share under a move config: bridge. */
		hpn_conf_nic_mode(conf, plan->share, &child_mode);
		c = (struct hpn_child){ .kind = n->child_kind,
					.mode = child_mode,
					.name = n->pod_ifname,
					.netns_fd = a->ns.pod_fd,
					.mtu = (unsigned int)conf->mtu,
					.has_mac = n->has_child_mac };
		memcpy(c.mac, n->child_mac, HPN_MAC_LEN);
		r = hpn_link_create_child(a->ns.host, dev, &c, err);
	}
	if (r == 0)
		r = fault("move", err);
	if (r == 0) {
		r = moved ? hpn_link_find(a->ns.pod, n->pod_ifname, 0, dev, pl, err)
			  : hpn_link_get(a->ns.pod, 0, n->pod_ifname, pl, err);
		if (r == -ENODEV)
			r = hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
					"\"%s\" vanished after the %s into \"%s\"", n->pod_ifname,
					moved ? "move" : "creation", env->netns);
	}
	if (r < 0)
		return r;
	/*
	 * One request: the MTU, arp_notify (and a rail's ARP settings), and up unless IPAM comes (then
	 * configure_ip brings it up once the addresses are on, and the kernel
	 * announces them). The kernel applies IFLA_MTU before the flags.
	 */
	r = hpn_link_set(a->ns.pod, pl, NULL,
			 conf->mtu && pl->mtu != (unsigned int)conf->mtu ? (unsigned int)conf->mtu
									 : 0,
			 conf->has_ipam ? -1 : 1,
			 HPN_LINK_ARP_NOTIFY | (hpn_rails(&a->j) ? HPN_LINK_ARP_RAIL : 0), err);
	if (r == 0 && conf->mtu)
		pl->mtu = (unsigned int)conf->mtu;
	if (r == 0)
		r = fault("mtu", err);
	if (r == 0 && !conf->has_ipam)
		r = fault("up", err);
	if (r == 0 && plan->rdma.found)
		r = plan->rdma.create ? hpn_soft_make(a, n, &plan->rdma, fault, err)
				      : move_rdma(a, n, &plan->rdma, err);
	if (r == 0)
		r = fault("rdma-move", err);
	return r;
}

/* This attachment's own result: every NIC with its RDMA entry and its IPAM addresses. */
static int own_result(struct hpn_attach *a, const struct hpn_env *env,
		      const struct hpn_nic_plan *plans, const struct hpn_link *pl,
		      const struct hpn_rdma_bind *bind, struct hpn_result *const *ipam,
		      struct hpn_result **ret)
{
	struct hpn_result *own = hpn_result_new();
	struct hpn_route *rts = calloc(NIC_ROUTES, sizeof(*rts));
	int r = own && rts ? 0 : -ENOMEM;

	for (size_t i = 0; r >= 0 && i < a->j.n_nics; i++) {
		const struct hpn_journal_nic *n = &a->j.nics[i];
		char mac[HPN_MAC_STR];
		struct hpn_iface ifc;

		hpn_mac_format(pl[i].mac, mac);
		ifc = (struct hpn_iface){ .name = (char *)pl[i].name,
					  .mac = mac,
					  .mtu = (int)pl[i].mtu,
					  .sandbox = (char *)env->netns,
					  .pci_id = n->kind == HPN_NIC_MOVED && n->pci[0]
							    ? (char *)n->pci
							    : NULL };
		r = hpn_result_add_iface(own, &ifc);
		if (r >= 0) {
			struct hpn_rdma_info *ri = &own->rdma[own->n_rdma++];

			rdma_info(&plans[i].rdma, &bind[i], ri);
			ri->interface = (int)i;
			/* The GPU it serves, as claimed. */
			snprintf(ri->gpu_id, sizeof(ri->gpu_id), "%s", n->gpu_id);
			snprintf(ri->gpu_pci, sizeof(ri->gpu_pci), "%s", n->gpu_pci);
			snprintf(ri->gpu_dist, sizeof(ri->gpu_dist), "%s", n->gpu_dist);
			ri->gpu_far = hpn_journal_nic_far(n);
		}
	}
	for (size_t i = 0; r >= 0 && i < a->j.n_nics; i++) {
		size_t n_routes, n;

		if (!ipam[i])
			continue;
		/* Its addresses, then the routes as configure_ip installed them. */
		n_routes = ipam[i]->n_routes;
		ipam[i]->n_routes = 0;
		r = hpn_result_append(own, ipam[i], (int)i);
		ipam[i]->n_routes = n_routes;
		n = r >= 0 ? hpn_nic_routes(&a->j, ipam, i, rts, NIC_ROUTES) : 0;
		for (size_t k = 0; r >= 0 && k < n; k++)
			r = hpn_result_add_route(own, &rts[k]);
	}
	free(rts);
	if (r < 0) {
		hpn_result_free(own);
		return r;
	}
	*ret = own;
	return 0;
}

/*
 * The RDMA proofs of NICs 0..n-1 (those with a device planned), all at once
 * (hpn_rdma_prove: a child each, at most HPN_RDMA_PROOFS_MAX together):
 * (*ret)[i] is NIC i's outcome, bind[i] its device as the pod sees it. A
 * proof changes nothing (it looks from a child), so proving NIC i+1 before
 * NIC i's later steps changes no outcome: the caller takes the outcomes in
 * NIC order with the steps that follow each, and the first failing NIC
 * decides the error, as when the proofs ran one after another. Returns 0 or
 * -ENOMEM; *ret is the caller's to free.
 */
static int prove(struct hpn_attach *a, const struct hpn_nic_plan *plans, const struct hpn_link *pl,
		 size_t n, struct hpn_rdma_bind *bind, struct hpn_rdma_proof **ret)
{
	struct hpn_rdma_proof *p = calloc(n, sizeof(*p));

	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (plans[i].rdma.found)
			p[i] = (struct hpn_rdma_proof){ .device = plans[i].rdma.dev.name,
							.ifname = pl[i].name,
							.port = plans[i].rdma.dev.port,
							.want_gid = -1,
							.ret = &bind[i] };
	hpn_rdma_prove(a->ns.pod_fd, p, n, GID_TIMEOUT_MS);
	*ret = p;
	return 0;
}

/* The steps of ADD after the claim; on error the caller undoes from the journal. */
static int add_steps(struct hpn_attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		     const struct hpn_nic_plan *plans, struct hpn_result **ret, struct hpn_err *err)
{
	struct hpn_rdma_bind bind[HPN_MAX_NICS];
	struct hpn_result *ipam[HPN_MAX_NICS] = { 0 }, *own = NULL;
	struct hpn_link pl[HPN_MAX_NICS];
	struct hpn_rdma_proof *proofs = NULL;
	size_t n = a->j.n_nics;
	char *hints = NULL;
	int r;

	/* The NICs of this pod only: the rest of each array is never touched (no page faults). */
	memset(bind, 0, n * sizeof(*bind));
	memset(pl, 0, n * sizeof(*pl));
	fault_nic = 0;
	r = fault("journal", err);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = attach_nic(a, env, conf, i, &plans[i], &pl[i], err);
	if (r == 0 && conf->has_ipam) {
		/* Rails: each NIC's table, named by its ifindex here, journalled before use. */
		for (size_t i = 0; hpn_rails(&a->j) && i < n; i++)
			hpn_rail_plan(&a->j.nics[i], pl[i].ifindex);
		r = journal_step(a, HPN_PHASE_IPAM, err);
		for (size_t i = 0; r == 0 && i < n; i++) {
			struct hpn_env ienv = *env;

			/* One lease per NIC, keyed like its DEL (see ipam_ifname). */
			fault_nic = i;
			ienv.ifname = hpn_ipam_ifname(&a->j, env->ifname, i);
			r = hpn_ipam_add(conf, &ienv, &ipam[i], err);
			if (r == 0) {
				a->ipam_added = true;
				r = fault("ipam", err);
			}
			if (r == 0)
				r = configure_ip(a, i, &pl[i], ipam, err);
		}
	}
	/*
	 * Prove it from the pod's side, after the address the GID carries is set:
	 * every NIC's proof at once (prove), then each NIC's outcome and the steps
	 * that follow it in NIC order, as if they had run one after another.
	 */
	if (r == 0)
		r = prove(a, plans, pl, n, bind, &proofs);
	for (size_t i = 0; r == 0 && i < n; i++) {
		fault_nic = i;
		if (plans[i].rdma.found && proofs[i].r < 0) {
			*err = proofs[i].err;
			r = proofs[i].r;
		}
		/* Bound, and verbs (NCCL) work; rdma_cm would too, if the port had QP1. */
		if (r == 0 && plans[i].rdma.found && bind[i].gsi_known && !bind[i].gsi)
			hpn_warn("RDMA device \"%s\" port %u has no GSI QP (QP1) in the pod%s: "
				 "verbs work, but rdma_cm connections to and from it fail "
				 "(rdma_connect: Invalid argument)",
				 bind[i].device, bind[i].port,
				 plans[i].rdma.mode == HPN_RDMA_NETNS_EXCLUSIVE
					 ? " (the kernel did not re-create it when the device "
					   "moved into the pod netns)"
					 : "");
		if (r == 0)
			r = fault("rdma", err);
		/* A device made here: its nodes for the containers, journalled first. */
		if (r == 0 && plans[i].rdma.create)
			r = hpn_soft_nodes_plan(&a->j, i, conf->agent.device_dir, &bind[i].cdevs,
						err);
		if (r > 0) {
			r = journal_step(a, a->j.phase, err);
			if (r == 0)
				r = hpn_soft_nodes_make(&a->j, i, err);
			if (r == 0)
				r = fault("nodes", err);
		}
		/*
		 * And its CDI spec, which the agent's Allocate named: journalled
		 * first too, written before ADD returns (the runtime reads it at
		 * CreateContainer, after the sandbox's ADD).
		 */
		if (r == 0 && plans[i].rdma.create)
			r = hpn_soft_cdi_plan(&a->j, i, conf->agent.cdi_dir, err);
		if (r > 0) {
			r = journal_step(a, a->j.phase, err);
			if (r == 0)
				r = hpn_soft_cdi_write(&a->j, i, &bind[i].cdevs, conf, err);
			if (r == 0)
				r = fault("cdi", err);
		}
	}
	fault_nic = 0;
	free(proofs);
	if (r < 0)
		goto out;

	r = own_result(a, env, plans, pl, bind, ipam, &own);
	if (r >= 0 && conf->nccl.enabled)
		r = hints_prepare(a, env, conf, plans, own, &hints, err);
	if (r < 0)
		goto out;
	/* The full result must fit before the attachment is declared done. */
	r = build_result(conf, &a->j, own, ret);
	if (r == -E2BIG) {
		const struct hpn_result *p = conf->prev_result;
		size_t n_if = own->n_ifaces + (p ? p->n_ifaces : 0);
		size_t n_ip = own->n_ips + (p ? p->n_ips : 0);
		size_t n_rt = own->n_routes + (p ? p->n_routes : 0);

		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, E2BIG,
				"prevResult plus this attachment is too large: %zu interfaces, %zu "
				"ips, %zu routes (at most %d, %d, %d)",
				n_if, n_ip, n_rt, HPN_MAX_IFACES, HPN_MAX_IPS, HPN_MAX_ROUTES);
	}
	if (r < 0)
		goto out;
	/* Journalled with the claim: an undo removes the file only if it is still ours. */
	if (hints) {
		r = fault("nccl", err);
		if (r == 0)
			r = hpn_nccl_write(a->j.hints_dir, a->j.hints_key, hints, err);
		/*
		 * Then the links the agent's CDI specs of the NICs mount it through
		 * (journalled with the claim); the runtime resolves them at
		 * CreateContainer, after this ADD.
		 */
		for (size_t i = 0; r == 0 && i < n; i++) {
			const char *link = a->j.nics[i].hints_link;

			if (!link[0])
				continue;
			fault_nic = i;
			r = hpn_nccl_link(a->j.hints_dir, link, a->j.hints_key, err);
			if (r > 0)
				hpn_warn(
					"hints link %s/%s/%s led to another pod's hints: now to %s",
					a->j.hints_dir, HPN_NCCL_NIC_DIR, link, a->j.hints_key);
			if (r >= 0)
				r = fault("hints-link", err);
		}
		fault_nic = 0;
		if (r < 0)
			goto out;
	}
	for (size_t i = 0; i < n; i++)
		a->j.nics[i].pod_ifindex = pl[i].ifindex;
	a->j.result = hpn_result_render(own, HPN_CNI_VERSION_LATEST);
	if (!a->j.result) {
		r = -ENOMEM;
		goto out;
	}
	r = journal_step(a, HPN_PHASE_ATTACHED, err);
	if (r == 0)
		r = fault("done", err);
	/* Nothing can fail from here on: the IPv6 announcements are best effort. */
	for (size_t i = 0; r == 0 && i < n; i++)
		if (ipam[i] && ipam[i]->n_ips)
			announce(a, &pl[i], ipam[i]);
out:
	if (r < 0) {
		hpn_result_free(*ret);
		*ret = NULL;
	}
	for (size_t i = 0; i < n; i++)
		hpn_result_free(ipam[i]);
	hpn_result_free(own);
	free(hints);
	return r;
}

/* CNI_NETNS, which must be a netns and not the one the plugin runs in. */
static int open_pod_netns(const struct hpn_env *env, int *ret_fd, struct hpn_err *err)
{
	_cleanup_close_ int fd = -1;
	int r = hpn_netns_open(env->netns, &fd, err);

	if (r < 0)
		return r;
	r = hpn_netns_is_current(fd);
	/* Fail closed: acting on the host's own netns would rename its NIC. */
	if (r < 0)
		return hpn_err_set(err, HPN_E_NETNS, r, "compare CNI_NETNS \"%s\" with ours: %s",
				   env->netns, strerror(-r));
	if (r > 0)
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
				   "CNI_NETNS \"%s\" is the host's own network namespace",
				   env->netns);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int hpn_add(const struct hpn_env *env, struct hpn_conf *conf, struct hpn_result **ret,
	    struct hpn_err *err)
{
	struct hpn_attach a;
	struct hpn_nic_plan *plans;
	struct hpn_alloc al = { 0 };
	struct hpn_gpus *gpus = NULL;
	unsigned long long start = 0;
	bool allocated = false;
	int r, pod_fd = -1;

	/* The pod decides first: a lookup that fails has changed nothing on the node. */
	if (conf->pod_lookup) {
		r = hpn_add_pod_lookup(env, conf, err);
		if (r < 0)
			return r;
	}
	if (!conf->pod_selected)
		return pass_through(conf, ret);
	r = hpn_add_pod_checks(env, conf, err);
	/* Before the store: a missing netns is bad input, and bad input creates nothing. */
	if (r >= 0)
		r = open_pod_netns(env, &pod_fd, err);
	/* The agent's NRI link, asked before anything changes: a refusal leaves nothing. */
	if (r >= 0 && conf->nri.required) {
		r = hpn_add_nri_ready(env, conf, err);
		if (r < 0)
			close(pod_fd);
	}
	/* The kubelet's choice, asked of the agent without the store lock held. */
	if (r >= 0 && conf->selector == HPN_SEL_MATCH) {
		r = hpn_claim_allocation(env, conf, &al, err);
		allocated = r == 1;
		if (r >= 0)
			r = hpn_add_pod_gpus(conf, &al, &gpus, err);
		if (r < 0)
			close(pod_fd);
	}
	if (r < 0)
		return r;
	plans = calloc(hpn_claim_count(conf, allocated ? &al : NULL, gpus), sizeof(*plans));
	r = hpn_attach_open(&a, env, conf, err);
	a.ns.pod_fd = pod_fd;
	if (r < 0)
		goto out;
	if (!plans) {
		r = -ENOMEM;
		goto out;
	}
	/*
	 * A journal left by an ADD that never finished (crash, kill), or of an
	 * earlier boot (an unreadable one may hold a lease): undo it first.
	 */
	if (a.have_journal || a.stale_file) {
		hpn_warn("found state of an earlier ADD for %s; undoing it first", a.key);
		r = hpn_release(&a.st, &a.ns, env, conf, a.key, a.have_journal ? &a.j : NULL,
				a.stale_file || a.j.phase >= HPN_PHASE_IPAM, err);
		if (r < 0) {
			hpn_err_prefix(err, "undo the unfinished earlier ADD of %s", a.key);
			goto out;
		}
		hpn_journal_free(&a.j);
		a.have_journal = a.stale_file = false;
	}
	r = hpn_nsctx_open_pod(&a.ns, env->netns, err);
	if (r < 0)
		goto out;
	r = hpn_claim(&a, env, conf, allocated ? &al : NULL, gpus, plans, err);
	if (r < 0)
		goto out;
	a.j.container_id = strdup(env->container_id);
	a.j.netns = strdup(env->netns);
	if (!a.j.container_id || !a.j.netns) {
		r = -ENOMEM;
		goto out;
	}
	snprintf(a.j.cni_ifname, sizeof(a.j.cni_ifname), "%s", env->ifname);
	/* Whose it is, for the agent's metrics and logs (optional: never needed to undo). */
	hpn_journal_set_pod(&a.j, hpn_env_arg(env, "K8S_POD_NAMESPACE"),
			    hpn_env_arg(env, "K8S_POD_NAME"), hpn_env_arg(env, "K8S_POD_UID"));
	/* Who holds the claim while ADD runs: GC and other ADDs leave a live one alone. */
	a.j.owner_pid = getpid();
	if (hpn_proc_start(a.j.owner_pid, &start) == 0)
		a.j.owner_start = start;
	/* Where the hints file will go, journalled with the claim (one fsync'd write less). */
	if (conf->nccl.enabled) {
		a.j.hints_dir = strdup(conf->nccl.dir);
		if (!a.j.hints_dir) {
			r = -ENOMEM;
			goto out;
		}
		hpn_nccl_key(hpn_env_arg(env, "K8S_POD_UID"), env->container_id, a.j.hints_key);
		/* And the links to it by its NICs' IDs, undone from here on like the file. */
		hpn_hints_links_plan(&a.j);
	}
	/*
	 * The claim: once journalled, other ADDs see the NICs as taken, and the
	 * lock can go; the slow steps (moves, IPAM, the RDMA proof, the hints)
	 * run unlocked.
	 */
	r = journal_step(&a, HPN_PHASE_MOVING, err);
	if (r < 0)
		goto out;
	hpn_store_unlock(&a.st);

	r = add_steps(&a, env, conf, plans, ret, err);
	if (r < 0) {
		struct hpn_err uerr = { 0 };
		/*
		 * Release the lease only if IPAM ADD succeeded, as the reference
		 * plugins do: after a failed IPAM ADD the runtime's DEL releases it.
		 */
		int ur = hpn_undo(&a.ns, env, conf, &a.j, a.ipam_added, &uerr);

		if (ur < 0) {
			/* Keep the journal: a DEL can finish what the rollback could not. */
			hpn_error("rollback of %s failed: %s", a.key, uerr.msg);
			hpn_err_details(err, "rollback incomplete, state kept for DEL: %s",
					uerr.msg);
		} else {
			hpn_journal_remove(&a.st, a.key, NULL);
		}
		goto out;
	}
out:
	free(plans);
	free(gpus);
	hpn_attach_close(&a);
	if (r == 0 && allocated && !strcmp(al.source, "dra"))
		hpn_add_tell_attached(env, conf);
	return r;
}
