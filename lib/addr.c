// SPDX-License-Identifier: Apache-2.0
#include "addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/fib_rules.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/route/addr.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <netlink/route/rule.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "nl.h"
#include "util.h"

static void nl_addr_putp(struct nl_addr **a)
{
	if (*a)
		nl_addr_put(*a);
}
#define _cleanup_nl_addr_ __attribute__((cleanup(nl_addr_putp)))

static void rtnl_addr_putp(struct rtnl_addr **a)
{
	if (*a)
		rtnl_addr_put(*a);
}

static void rtnl_route_putp(struct rtnl_route **r)
{
	if (*r)
		rtnl_route_put(*r);
}

static void nl_cache_freep(struct nl_cache **c)
{
	if (*c)
		nl_cache_free(*c);
}

static int parse_cidr(const char *cidr, struct nl_addr **ret)
{
	return nl_addr_parse(cidr, AF_UNSPEC, ret) < 0 ? -EINVAL : 0;
}

int hpn_addr_add(struct nl_sock *sk, int ifindex, const char *ifname, const char *cidr,
		 struct hpn_err *err)
{
	__attribute__((cleanup(rtnl_addr_putp))) struct rtnl_addr *addr = rtnl_addr_alloc();
	_cleanup_nl_addr_ struct nl_addr *local = NULL;
	_cleanup_nl_msg_ struct nl_msg *msg = NULL;
	char extack[HPN_EXTACK_LEN];
	int r;

	if (!addr)
		return -ENOMEM;
	if (parse_cidr(cidr, &local) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "address \"%s\" is not a CIDR", cidr);
	rtnl_addr_set_ifindex(addr, ifindex);
	rtnl_addr_set_local(addr, local);
	if (nl_addr_get_family(local) == AF_INET6)
		rtnl_addr_set_flags(addr, IFA_F_NODAD);
	if (rtnl_addr_build_add_request(addr, NLM_F_EXCL, &msg) < 0)
		return -ENOMEM;
	r = hpn_nl_talk(sk, msg, NULL, NULL, extack);
	if (r < 0)
		return hpn_nl_err(err, r, extack, "add address %s to \"%s\"", cidr, ifname);
	return 0;
}

static int build_route(int ifindex, const struct hpn_route *rt, const char *gw,
		       struct rtnl_route **ret)
{
	__attribute__((cleanup(rtnl_route_putp))) struct rtnl_route *route = rtnl_route_alloc();
	_cleanup_nl_addr_ struct nl_addr *dst = NULL, *via = NULL;
	struct rtnl_nexthop *nh;

	if (!route)
		return -ENOMEM;
	if (parse_cidr(rt->dst, &dst) < 0 || (gw && nl_addr_parse(gw, AF_UNSPEC, &via) < 0))
		return -EINVAL;
	if (via && nl_addr_get_family(via) != nl_addr_get_family(dst))
		return -EAFNOSUPPORT;
	rtnl_route_set_family(route, (uint8_t)nl_addr_get_family(dst));
	if (rtnl_route_set_dst(route, dst) < 0)
		return -EINVAL;
	rtnl_route_set_table(route,
			     rt->has & HPN_ROUTE_HAS_TABLE ? (uint32_t)rt->table : RT_TABLE_MAIN);
	rtnl_route_set_protocol(route, RTPROT_BOOT);
	rtnl_route_set_type(route, RTN_UNICAST);
	rtnl_route_set_scope(route, rt->has & HPN_ROUTE_HAS_SCOPE ? (uint8_t)rt->scope
				    : via			  ? RT_SCOPE_UNIVERSE
								  : RT_SCOPE_LINK);
	if (rt->has & HPN_ROUTE_HAS_PRIORITY)
		rtnl_route_set_priority(route, (uint32_t)rt->priority);
	if (rt->has & HPN_ROUTE_HAS_MTU)
		rtnl_route_set_metric(route, RTAX_MTU, (unsigned int)rt->mtu);
	if (rt->has & HPN_ROUTE_HAS_ADVMSS)
		rtnl_route_set_metric(route, RTAX_ADVMSS, (unsigned int)rt->advmss);
	nh = rtnl_route_nh_alloc();
	if (!nh)
		return -ENOMEM;
	rtnl_route_nh_set_ifindex(nh, ifindex);
	if (via)
		rtnl_route_nh_set_gateway(nh, via);
	rtnl_route_add_nexthop(route, nh);
	*ret = TAKE_PTR(route);
	return 0;
}

int hpn_route_add(struct nl_sock *sk, int ifindex, const char *ifname, const struct hpn_route *rt,
		  const char *gw, struct hpn_err *err)
{
	__attribute__((cleanup(rtnl_route_putp))) struct rtnl_route *route = NULL;
	_cleanup_nl_msg_ struct nl_msg *msg = NULL;
	char extack[HPN_EXTACK_LEN];
	int r;

	r = build_route(ifindex, rt, gw, &route);
	if (r < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, r, "route to %s via %s: %s", rt->dst,
				   gw ? gw : "link", strerror(-r));
	if (rtnl_route_build_add_request(route, NLM_F_EXCL, &msg) < 0)
		return -ENOMEM;
	r = hpn_nl_talk(sk, msg, NULL, NULL, extack);
	if (r < 0)
		return hpn_nl_err(err, r, extack, "add route to %s via %s on \"%s\"", rt->dst,
				  gw ? gw : "link", ifname);
	return 0;
}

int hpn_addr_find(struct nl_sock *sk, int ifindex, const char *cidr, struct hpn_err *err)
{
	__attribute__((cleanup(nl_cache_freep))) struct nl_cache *cache = NULL;
	_cleanup_nl_addr_ struct nl_addr *want = NULL;
	struct nl_object *o;

	if (parse_cidr(cidr, &want) < 0)
		return -EINVAL;
	if (rtnl_addr_alloc_cache(sk, &cache) < 0)
		return hpn_err_set(err, HPN_E_NETLINK, EIO, "list addresses");
	for (o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
		struct rtnl_addr *a = (struct rtnl_addr *)o;
		struct nl_addr *local = rtnl_addr_get_local(a);

		if (rtnl_addr_get_ifindex(a) == ifindex && local && !nl_addr_cmp(local, want) &&
		    nl_addr_get_prefixlen(local) == nl_addr_get_prefixlen(want))
			return 0;
	}
	return -ENOENT;
}

/*
 * Same network: family, prefix length and the prefix bits. A default route
 * comes back from the kernel with an empty RTA_DST, while "0.0.0.0/0" parses
 * to four zero bytes, so whole-address comparison would never match it.
 */
static bool same_prefix(struct nl_addr *a, struct nl_addr *b)
{
	if (!a || !b || nl_addr_get_family(a) != nl_addr_get_family(b) ||
	    nl_addr_get_prefixlen(a) != nl_addr_get_prefixlen(b))
		return false;
	return nl_addr_get_prefixlen(a) == 0 || nl_addr_cmp_prefix(a, b) == 0;
}

int hpn_route_find(struct nl_sock *sk, int ifindex, const struct hpn_route *rt, const char *gw,
		   struct hpn_err *err)
{
	__attribute__((cleanup(rtnl_route_putp))) struct rtnl_route *want = NULL;
	__attribute__((cleanup(nl_cache_freep))) struct nl_cache *cache = NULL;
	struct nl_object *o;
	int r = build_route(ifindex, rt, gw, &want);

	if (r < 0)
		return r;
	if (rtnl_route_alloc_cache(sk, rtnl_route_get_family(want), 0, &cache) < 0)
		return hpn_err_set(err, HPN_E_NETLINK, EIO, "list routes");
	for (o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
		struct rtnl_route *got = (struct rtnl_route *)o;
		struct rtnl_nexthop *nh, *wnh = rtnl_route_nexthop_n(want, 0);
		struct nl_addr *ngw, *wgw = rtnl_route_nh_get_gateway(wnh);

		if (rtnl_route_get_table(got) != rtnl_route_get_table(want) ||
		    !same_prefix(rtnl_route_get_dst(got), rtnl_route_get_dst(want)) ||
		    rtnl_route_get_nnexthops(got) < 1)
			continue;
		nh = rtnl_route_nexthop_n(got, 0);
		ngw = rtnl_route_nh_get_gateway(nh);
		if (rtnl_route_nh_get_ifindex(nh) != ifindex)
			continue;
		if ((!ngw) != (!wgw) || (ngw && nl_addr_cmp_prefix(ngw, wgw)))
			continue;
		return 0;
	}
	return -ENOENT;
}

/* ---- a rail's routes and rules ------------------------------------------------ */

static void rtnl_rule_putp(struct rtnl_rule **r)
{
	if (*r)
		rtnl_rule_put(*r);
}

/* The address of cidr alone (prefix /32 or /128), and its network (the prefix). */
static int host_and_net(const char *cidr, struct nl_addr **host, struct nl_addr **net)
{
	_cleanup_nl_addr_ struct nl_addr *h = NULL, *n = NULL;
	unsigned int len, bits;
	uint8_t *b;

	if (parse_cidr(cidr, &n) < 0 || !(h = nl_addr_clone(n)))
		return -EINVAL;
	len = nl_addr_get_prefixlen(n);
	bits = nl_addr_get_len(n) * 8;
	nl_addr_set_prefixlen(h, (int)bits);
	b = nl_addr_get_binary_addr(n);
	for (unsigned int i = len; i < bits; i++)
		b[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
	*host = TAKE_PTR(h);
	*net = TAKE_PTR(n);
	return 0;
}

int hpn_route_add_connected(struct nl_sock *sk, int ifindex, const char *ifname, const char *cidr,
			    unsigned int table, struct hpn_err *err)
{
	__attribute__((cleanup(rtnl_route_putp))) struct rtnl_route *route = rtnl_route_alloc();
	_cleanup_nl_addr_ struct nl_addr *host = NULL, *net = NULL;
	_cleanup_nl_msg_ struct nl_msg *msg = NULL;
	char extack[HPN_EXTACK_LEN];
	struct rtnl_nexthop *nh;
	int r;

	if (!route)
		return -ENOMEM;
	if (host_and_net(cidr, &host, &net) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "address \"%s\" is not a CIDR", cidr);
	rtnl_route_set_family(route, (uint8_t)nl_addr_get_family(net));
	if (rtnl_route_set_dst(route, net) < 0 || rtnl_route_set_pref_src(route, host) < 0)
		return -EINVAL;
	rtnl_route_set_table(route, table);
	rtnl_route_set_protocol(route, RTPROT_BOOT);
	rtnl_route_set_type(route, RTN_UNICAST);
	rtnl_route_set_scope(route, RT_SCOPE_LINK);
	nh = rtnl_route_nh_alloc();
	if (!nh)
		return -ENOMEM;
	rtnl_route_nh_set_ifindex(nh, ifindex);
	rtnl_route_add_nexthop(route, nh);
	if (rtnl_route_build_add_request(route, NLM_F_EXCL, &msg) < 0)
		return -ENOMEM;
	r = hpn_nl_talk(sk, msg, NULL, NULL, extack);
	if (r < 0)
		return hpn_nl_err(err, r, extack, "add the route of %s to table %u on \"%s\"", cidr,
				  table, ifname);
	return 0;
}

int hpn_route_find_connected(struct nl_sock *sk, int ifindex, const char *cidr, unsigned int table,
			     struct hpn_err *err)
{
	_cleanup_nl_addr_ struct nl_addr *host = NULL, *net = NULL;
	__attribute__((cleanup(nl_cache_freep))) struct nl_cache *cache = NULL;
	struct nl_object *o;

	if (host_and_net(cidr, &host, &net) < 0)
		return -EINVAL;
	if (rtnl_route_alloc_cache(sk, nl_addr_get_family(net), 0, &cache) < 0)
		return hpn_err_set(err, HPN_E_NETLINK, EIO, "list routes");
	for (o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
		struct rtnl_route *got = (struct rtnl_route *)o;

		if (rtnl_route_get_table(got) == table &&
		    same_prefix(rtnl_route_get_dst(got), net) &&
		    rtnl_route_get_nnexthops(got) >= 1 &&
		    rtnl_route_nh_get_ifindex(rtnl_route_nexthop_n(got, 0)) == ifindex)
			return 0;
	}
	return -ENOENT;
}

/* A rule "from <address> lookup table" at priority prio (ip rule's FR_ACT_TO_TBL). */
static struct rtnl_rule *rule_of(int family, struct nl_addr *src, unsigned int table,
				 unsigned int prio)
{
	struct rtnl_rule *rule = rtnl_rule_alloc();

	if (!rule)
		return NULL;
	rtnl_rule_set_family(rule, family);
	rtnl_rule_set_prio(rule, prio);
	rtnl_rule_set_table(rule, table);
	rtnl_rule_set_action(rule, FR_ACT_TO_TBL);
	if (src && rtnl_rule_set_src(rule, src) < 0) {
		rtnl_rule_put(rule);
		return NULL;
	}
	return rule;
}

int hpn_rule_add(struct nl_sock *sk, const char *cidr, unsigned int table, unsigned int prio,
		 struct hpn_err *err)
{
	_cleanup_nl_addr_ struct nl_addr *host = NULL, *net = NULL;
	__attribute__((cleanup(rtnl_rule_putp))) struct rtnl_rule *rule = NULL;
	_cleanup_nl_msg_ struct nl_msg *msg = NULL;
	char extack[HPN_EXTACK_LEN];
	int r;

	if (host_and_net(cidr, &host, &net) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "address \"%s\" is not a CIDR", cidr);
	rule = rule_of(nl_addr_get_family(host), host, table, prio);
	if (!rule || rtnl_rule_build_add_request(rule, NLM_F_EXCL, &msg) < 0)
		return -ENOMEM;
	r = hpn_nl_talk(sk, msg, NULL, NULL, extack);
	if (r < 0)
		return hpn_nl_err(err, r, extack, "add the rule from %s to table %u", cidr, table);
	return 0;
}

int hpn_rule_find(struct nl_sock *sk, const char *cidr, unsigned int table, unsigned int prio,
		  struct hpn_err *err)
{
	_cleanup_nl_addr_ struct nl_addr *host = NULL, *net = NULL;
	__attribute__((cleanup(nl_cache_freep))) struct nl_cache *cache = NULL;
	struct nl_object *o;

	if (host_and_net(cidr, &host, &net) < 0)
		return -EINVAL;
	if (rtnl_rule_alloc_cache(sk, nl_addr_get_family(host), &cache) < 0)
		return hpn_err_set(err, HPN_E_NETLINK, EIO, "list rules");
	for (o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
		struct rtnl_rule *got = (struct rtnl_rule *)o;
		struct nl_addr *src = rtnl_rule_get_src(got);

		if (rtnl_rule_get_table(got) == table && rtnl_rule_get_prio(got) == prio &&
		    rtnl_rule_get_action(got) == FR_ACT_TO_TBL && src &&
		    nl_addr_get_prefixlen(src) == nl_addr_get_prefixlen(host) &&
		    !nl_addr_cmp_prefix(src, host))
			return 0;
	}
	return -ENOENT;
}

int hpn_rule_del_table(struct nl_sock *sk, unsigned int table, unsigned int prio,
		       struct hpn_err *err)
{
	static const int families[] = { AF_INET, AF_INET6 };
	int n = 0;

	for (size_t f = 0; f < HPN_ARRAY_SIZE(families); f++) {
		/* The kernel deletes the first rule that matches: until none does. */
		for (int k = 0; k < 1024; k++) {
			__attribute__((cleanup(rtnl_rule_putp))) struct rtnl_rule *rule =
				rule_of(families[f], NULL, table, prio);
			_cleanup_nl_msg_ struct nl_msg *msg = NULL;
			char extack[HPN_EXTACK_LEN];
			int r;

			if (!rule || rtnl_rule_build_delete_request(rule, 0, &msg) < 0)
				return -ENOMEM;
			r = hpn_nl_talk(sk, msg, NULL, NULL, extack);
			if (r == -ENOENT)
				break;
			/* A kernel without IPv6 has no rules of it to delete. */
			if (r == -EAFNOSUPPORT)
				break;
			if (r < 0)
				return hpn_nl_err(err, r, extack,
						  "delete the rules to table %u (priority %u)",
						  table, prio);
			n++;
		}
	}
	return n;
}

static int split_ip(const char *cidr, int *family, void *buf)
{
	char ip[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(cidr, '/');
	size_t n = slash ? (size_t)(slash - cidr) : strlen(cidr);

	if (n >= sizeof(ip))
		return -EINVAL;
	memcpy(ip, cidr, n);
	ip[n] = '\0';
	if (inet_pton(AF_INET, ip, buf) == 1)
		*family = AF_INET;
	else if (inet_pton(AF_INET6, ip, buf) == 1)
		*family = AF_INET6;
	else
		return -EINVAL;
	return 0;
}

/* RFC 4861 7.2.6 unsolicited advertisement to all-nodes; the kernel fills the checksum. */
static int unsolicited_na(int ifindex, const uint8_t mac[HPN_MAC_LEN], const struct in6_addr *ip)
{
	struct {
		struct nd_neighbor_advert na;
		struct nd_opt_hdr opt;
		uint8_t lladdr[6];
	} __attribute__((packed)) pkt = {
		.na = { .nd_na_hdr = { .icmp6_type = ND_NEIGHBOR_ADVERT }, .nd_na_target = *ip },
		.opt = { .nd_opt_type = ND_OPT_TARGET_LINKADDR, .nd_opt_len = 1 },
	};
	struct sockaddr_in6 src = { .sin6_family = AF_INET6, .sin6_addr = *ip };
	struct sockaddr_in6 dst = { .sin6_family = AF_INET6, .sin6_scope_id = (uint32_t)ifindex };
	_cleanup_close_ int fd = socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6);
	int hops = 255;

	if (fd < 0)
		return -errno;
	pkt.na.nd_na_flags_reserved = ND_NA_FLAG_OVERRIDE;
	memcpy(pkt.lladdr, mac, 6);
	inet_pton(AF_INET6, "ff02::1", &dst.sin6_addr);
	if (setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hops, sizeof(hops)) < 0 ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifindex, sizeof(ifindex)) < 0 ||
	    bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0)
		return -errno;
	if (sendto(fd, &pkt, sizeof(pkt), 0, (struct sockaddr *)&dst, sizeof(dst)) < 0)
		return -errno;
	return 0;
}

int hpn_announce(int ifindex, const uint8_t mac[HPN_MAC_LEN], const char *cidr)
{
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} ip;
	int family, r = split_ip(cidr, &family, &ip);

	if (r < 0)
		return r;
	/* IPv4: the kernel's own gratuitous ARP at link up (arp_notify, hpn_link_set). */
	if (family != AF_INET6)
		return -EAFNOSUPPORT;
	return unsolicited_na(ifindex, mac, &ip.v6);
}
