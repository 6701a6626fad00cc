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
 * Unsolicited neighbour advertisement for cidr's IPv6 address; -EAFNOSUPPORT
 * for IPv4, which the kernel announces itself (arp_notify, hpn_link_set).
 */
int hpn_announce(int ifindex, const uint8_t mac[HPN_MAC_LEN], const char *cidr);

#endif
