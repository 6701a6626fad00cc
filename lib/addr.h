/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_ADDR_H
#define HPN_ADDR_H

#include <stdint.h>

#include "err.h"
#include "types.h"

struct nl_sock;

/*
 * Addresses, routes and neighbour announcements on one interface, in the netns
 * of the socket (addresses, routes) or of the caller (announcements).
 */

/* Adds cidr to ifindex; IPv6 without DAD, since IPAM handed out a unique address. */
int hpn_addr_add(struct nl_sock *sk, int ifindex, const char *ifname, const char *cidr,
		 struct hpn_err *err);
/* Adds a route out of ifindex via gw (NULL: on-link). */
int hpn_route_add(struct nl_sock *sk, int ifindex, const char *ifname, const struct hpn_route *rt,
		  const char *gw, struct hpn_err *err);
/* 0 when present, -ENOENT when not. */
int hpn_addr_find(struct nl_sock *sk, int ifindex, const char *cidr, struct hpn_err *err);
int hpn_route_find(struct nl_sock *sk, int ifindex, const struct hpn_route *rt, const char *gw,
		   struct hpn_err *err);
/*
 * A rail's own routing table (policy routing, one table per NIC): the route
 * to cidr's network out of ifindex, scope link, with cidr's address as the
 * preferred source, in table; and whether it is there (0, -ENOENT).
 */
int hpn_route_add_connected(struct nl_sock *sk, int ifindex, const char *ifname, const char *cidr,
			    unsigned int table, struct hpn_err *err);
int hpn_route_find_connected(struct nl_sock *sk, int ifindex, const char *cidr, unsigned int table,
			     struct hpn_err *err);
/*
 * The rule "from <cidr's address> lookup table" at priority prio (ip rule
 * add from ADDR table T priority P); whether it is there (0, -ENOENT); and
 * deleting every rule (IPv4 and IPv6) to table at prio, whatever its source:
 * how many were deleted, or -errno.
 */
int hpn_rule_add(struct nl_sock *sk, const char *cidr, unsigned int table, unsigned int prio,
		 struct hpn_err *err);
int hpn_rule_find(struct nl_sock *sk, const char *cidr, unsigned int table, unsigned int prio,
		  struct hpn_err *err);
int hpn_rule_del_table(struct nl_sock *sk, unsigned int table, unsigned int prio,
		       struct hpn_err *err);

/*
 * Unsolicited neighbour advertisement for cidr's IPv6 address; -EAFNOSUPPORT
 * for IPv4, which the kernel announces itself (arp_notify, hpn_link_set).
 */
int hpn_announce(int ifindex, const uint8_t mac[HPN_MAC_LEN], const char *cidr);

#endif
