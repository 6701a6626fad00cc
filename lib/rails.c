// SPDX-License-Identifier: Apache-2.0
/*
 * Rails: an attachment of several NICs (count > 1), each its own path to
 * the fabric, often all in one subnet. Without more, the pod's main table
 * sends everything out of the first NIC with a connected route, and any NIC
 * answers ARP for every address of the pod (measured in the vm7 tier: rail 1
 * at 0.22 MB/s through rail 0 instead of 3.34 on its own; neighbours holding
 * the wrong NIC's MAC). So each NIC gets
 *  - its own routing table, HPN_RAIL_TABLE_BASE + its ifindex in the pod
 *    (unique in the pod, whatever else is attached), holding the network of
 *    each of its addresses (scope link, the address as source) and a copy of
 *    every route its IPAM result gave it;
 *  - a rule "from <address> lookup <its table>" per address, at priority
 *    HPN_RAIL_PRIORITY, before the main table (32766): traffic bound to a
 *    rail's address (rdma_cm binds the GID's address, RoCE sends from it)
 *    leaves by that rail;
 *  - arp_ignore 1 and arp_announce 2 on the interface (set in ADD's one
 *    link request, HPN_LINK_ARP_RAIL).
 * The main table keeps each NIC's IPAM routes too, the first NIC to name a
 * destination keeping it. The table and priority are journalled before the
 * routes and rules are made; DEL deletes the rules, and the table's routes go
 * with the NIC when it leaves the pod.
 */
#include "session.h"

#include <errno.h>
#include <string.h>

#include "addr.h"
#include "log.h"

bool hpn_rails(const struct hpn_journal *j)
{
	return j->n_nics > 1;
}

void hpn_rail_plan(struct hpn_journal_nic *n, int pod_ifindex)
{
	n->rail_table = HPN_RAIL_TABLE_BASE + (unsigned int)pod_ifindex;
	n->rail_priority = HPN_RAIL_PRIORITY;
}

/* Does a route of an earlier NIC's result already hold rt's place in the main table? */
static bool main_taken(struct hpn_result *const *ipam, size_t i, const struct hpn_route *rt)
{
	for (size_t p = 0; p < i; p++) {
		for (size_t k = 0; ipam[p] && k < ipam[p]->n_routes; k++) {
			const struct hpn_route *o = &ipam[p]->routes[k];

			if (!(o->has & HPN_ROUTE_HAS_TABLE) && !strcmp(o->dst, rt->dst) &&
			    (o->has & HPN_ROUTE_HAS_PRIORITY) ==
				    (rt->has & HPN_ROUTE_HAS_PRIORITY) &&
			    (!(o->has & HPN_ROUTE_HAS_PRIORITY) || o->priority == rt->priority))
				return true;
		}
	}
	return false;
}

size_t hpn_nic_routes(const struct hpn_journal *j, struct hpn_result *const *ipam, size_t i,
		      struct hpn_route *out, size_t max)
{
	const struct hpn_result *me = ipam[i];
	unsigned int table = j->nics[i].rail_table;
	size_t n = 0;

	for (size_t k = 0; me && k < me->n_routes && n < max; k++) {
		struct hpn_route rt = me->routes[k];
		bool own_table = rt.has & HPN_ROUTE_HAS_TABLE;

		/* The first NIC's gateways are the result's first: later ones are spelled out. */
		if (i > 0)
			rt.gw = (char *)hpn_result_route_gw(me, &me->routes[k]);
		if (own_table || !main_taken(ipam, i, &rt))
			out[n++] = rt;
		if (!table || own_table || n == max)
			continue;
		rt.gw = (char *)hpn_result_route_gw(me, &me->routes[k]);
		rt.has |= HPN_ROUTE_HAS_TABLE;
		rt.table = (int)table;
		out[n++] = rt;
	}
	return n;
}

int hpn_rail_apply(struct nl_sock *pod, const struct hpn_journal_nic *n, int ifindex,
		   const struct hpn_result *ipam, struct hpn_err *err)
{
	int r = 0;

	if (!n->rail_table)
		return 0;
	/* The table first: a rule never points at a table without the rail's networks. */
	for (size_t k = 0; r == 0 && k < ipam->n_ips; k++)
		r = hpn_route_add_connected(pod, ifindex, n->pod_ifname, ipam->ips[k].address,
					    n->rail_table, err);
	for (size_t k = 0; r == 0 && k < ipam->n_ips; k++)
		r = hpn_rule_add(pod, ipam->ips[k].address, n->rail_table, n->rail_priority, err);
	if (r < 0)
		hpn_err_prefix(err, "rail \"%s\"", n->pod_ifname);
	else
		hpn_debug("rail \"%s\": table %u, rules at priority %u", n->pod_ifname,
			  n->rail_table, n->rail_priority);
	return r;
}

int hpn_rail_check(struct nl_sock *pod, const struct hpn_journal_nic *n, const struct hpn_link *l,
		   const struct hpn_result *own, size_t i, struct hpn_err *err)
{
	int r;

	if (!n->rail_table)
		return 0;
	for (size_t k = 0; k < own->n_ips; k++) {
		const char *a = own->ips[k].address;

		if (own->ips[k].interface != (int)i)
			continue;
		r = hpn_rule_find(pod, a, n->rail_table, n->rail_priority, err);
		if (r == -ENOENT)
			return hpn_err_set(err, HPN_E_CHECK, ENOENT,
					   "rail \"%s\": the rule from %s to table %u (priority "
					   "%u) is gone",
					   l->name, a, n->rail_table, n->rail_priority);
		if (r < 0)
			return r;
		r = hpn_route_find_connected(pod, l->ifindex, a, n->rail_table, err);
		if (r == -ENOENT)
			return hpn_err_set(err, HPN_E_CHECK, ENOENT,
					   "rail \"%s\": table %u has no route to the network of "
					   "%s on \"%s\"",
					   l->name, n->rail_table, a, l->name);
		if (r < 0)
			return r;
	}
	if (l->has_inet_conf && (l->arp_ignore != 1 || l->arp_announce != 2))
		return hpn_err_set(err, HPN_E_CHECK, EINVAL,
				   "rail \"%s\": arp_ignore is %u and arp_announce %u, ADD set 1 "
				   "and 2",
				   l->name, l->arp_ignore, l->arp_announce);
	return 0;
}

int hpn_rail_remove(struct nl_sock *pod, const struct hpn_journal_nic *n, struct hpn_err *err)
{
	int r;

	if (!n->rail_table)
		return 0;
	r = hpn_rule_del_table(pod, n->rail_table, n->rail_priority, err);
	if (r > 0)
		hpn_debug("rail \"%s\": %d rule(s) to table %u deleted", n->pod_ifname, r,
			  n->rail_table);
	return r < 0 ? r : 0;
}
