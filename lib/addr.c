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
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "nl.h"
#include "util.h"

/*
 * Addresses, routes and rules as rtnetlink messages built and read here with
 * libnl-3's core (messages, attributes, nl_addr): libnl-route's object model
 * would cost every start of the plugin its constructors and its tables'
 * relocations, for three message types.
 */

static void nl_addr_putp(struct nl_addr **a)
{
	if (*a)
		nl_addr_put(*a);
}
#define _cleanup_nl_addr_ __attribute__((cleanup(nl_addr_putp)))

static int parse_cidr(const char *cidr, struct nl_addr **ret)
{
	return nl_addr_parse(cidr, AF_UNSPEC, ret) < 0 ? -EINVAL : 0;
}

/* Does the attribute hold exactly the bytes of want (same family assumed)? */
static bool attr_is(const struct nlattr *a, struct nl_addr *want)
{
	unsigned int n = nl_addr_get_len(want);

	return a && (unsigned int)nla_len(a) == n &&
	       !memcmp(nla_data(a), nl_addr_get_binary_addr(want), n);
}

/*
 * Are the first plen bits of the attribute's address (absent: all zero, as
 * the kernel sends a default route) those of want?
 */
static bool attr_prefix_is(const struct nlattr *a, unsigned int plen, struct nl_addr *want)
{
	const uint8_t *w = nl_addr_get_binary_addr(want), *g;
	unsigned int n = nl_addr_get_len(want);

	if (plen != (unsigned int)nl_addr_get_prefixlen(want) || plen > n * 8)
		return false;
	if (plen == 0)
		return true;
	if (!a || (unsigned int)nla_len(a) != n)
		return false;
	g = nla_data(a);
	for (unsigned int i = 0; i < plen; i++) {
		uint8_t bit = (uint8_t)(0x80u >> (i % 8));

		if ((g[i / 8] & bit) != (w[i / 8] & bit))
			return false;
	}
	return true;
}

int hpn_addr_add(struct nl_sock *sk, int ifindex, const char *ifname, const char *cidr,
		 struct hpn_err *err)
{
	_cleanup_nl_addr_ struct nl_addr *local = NULL;
	_cleanup_nl_msg_ struct nl_msg *msg = NULL;
	char extack[HPN_EXTACK_LEN];
	struct ifaddrmsg ifa = { .ifa_index = (unsigned int)ifindex };
	int r;

	if (parse_cidr(cidr, &local) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "address \"%s\" is not a CIDR", cidr);
	ifa.ifa_family = (uint8_t)nl_addr_get_family(local);
	ifa.ifa_prefixlen = (uint8_t)nl_addr_get_prefixlen(local);
	if (ifa.ifa_family == AF_INET6)
		ifa.ifa_flags = IFA_F_NODAD;
	/* As ip(8) does: 127/8 is the host's, everything else the world's. */
	ifa.ifa_scope =
		ifa.ifa_family == AF_INET && *(const uint8_t *)nl_addr_get_binary_addr(local) == 127
			? RT_SCOPE_HOST
			: RT_SCOPE_UNIVERSE;
	msg = hpn_nl_msg(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &ifa, sizeof(ifa));
	if (!msg || nla_put_addr(msg, IFA_LOCAL, local) < 0 ||
	    nla_put_addr(msg, IFA_ADDRESS, local) < 0)
		return -ENOMEM;
	r = hpn_nl_talk(sk, msg, NULL, NULL, extack);
	if (r < 0)
		return hpn_nl_err(err, r, extack, "add address %s to \"%s\"", cidr, ifname);
	return 0;
}

/* What a route request says: its scope, table and attributes. */
struct route_req {
	uint8_t scope;
	unsigned int table;
	struct nl_addr *dst, *gw, *src; /* src: RTA_PREFSRC */
	int ifindex;
	const struct hpn_route *rt; /* priority and metrics, when given */
};

static struct nl_msg *route_msg(const struct route_req *q)
{
	struct rtmsg rtm = {
		.rtm_family = (uint8_t)nl_addr_get_family(q->dst),
		.rtm_dst_len = (uint8_t)nl_addr_get_prefixlen(q->dst),
		.rtm_table = q->table < 256 ? (uint8_t)q->table : RT_TABLE_UNSPEC,
		.rtm_protocol = RTPROT_BOOT,
		.rtm_scope = q->scope,
		.rtm_type = RTN_UNICAST,
	};
	struct nl_msg *msg;
	struct nlattr *mx;

	msg = hpn_nl_msg(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &rtm, sizeof(rtm));
	if (!msg)
		return NULL;
	if (nla_put_u32(msg, RTA_TABLE, q->table) < 0 ||
	    (rtm.rtm_dst_len && nla_put_addr(msg, RTA_DST, q->dst) < 0) ||
	    nla_put_u32(msg, RTA_OIF, (uint32_t)q->ifindex) < 0 ||
	    (q->gw && nla_put_addr(msg, RTA_GATEWAY, q->gw) < 0) ||
	    (q->src && nla_put_addr(msg, RTA_PREFSRC, q->src) < 0))
		goto fail;
	if (q->rt && (q->rt->has & HPN_ROUTE_HAS_PRIORITY) &&
	    nla_put_u32(msg, RTA_PRIORITY, (uint32_t)q->rt->priority) < 0)
		goto fail;
	if (q->rt && (q->rt->has & (HPN_ROUTE_HAS_MTU | HPN_ROUTE_HAS_ADVMSS))) {
		mx = nla_nest_start(msg, RTA_METRICS);
		if (!mx ||
		    ((q->rt->has & HPN_ROUTE_HAS_MTU) &&
		     nla_put_u32(msg, RTAX_MTU, (uint32_t)q->rt->mtu) < 0) ||
		    ((q->rt->has & HPN_ROUTE_HAS_ADVMSS) &&
		     nla_put_u32(msg, RTAX_ADVMSS, (uint32_t)q->rt->advmss) < 0))
			goto fail;
		nla_nest_end(msg, mx);
	}
	return msg;
fail:
	nlmsg_free(msg);
	return NULL;
}

/* rt (via gw, or on the link) as a request; the caller puts q->dst and q->gw. */
static int route_of(int ifindex, const struct hpn_route *rt, const char *gw, struct route_req *q)
{
	*q = (struct route_req){ .ifindex = ifindex, .rt = rt };
	if (parse_cidr(rt->dst, &q->dst) < 0 || (gw && nl_addr_parse(gw, AF_UNSPEC, &q->gw) < 0))
		return -EINVAL;
	if (q->gw && nl_addr_get_family(q->gw) != nl_addr_get_family(q->dst))
		return -EAFNOSUPPORT;
	q->scope = rt->has & HPN_ROUTE_HAS_SCOPE ? (uint8_t)rt->scope
		   : q->gw			 ? RT_SCOPE_UNIVERSE
						 : RT_SCOPE_LINK;
	q->table = rt->has & HPN_ROUTE_HAS_TABLE ? (unsigned int)rt->table : RT_TABLE_MAIN;
	return 0;
}

static void route_req_free(struct route_req *q)
{
	if (q->dst)
		nl_addr_put(q->dst);
	if (q->gw)
		nl_addr_put(q->gw);
	if (q->src)
		nl_addr_put(q->src);
}
#define _cleanup_route_req_ __attribute__((cleanup(route_req_free)))

static int route_send(struct nl_sock *sk, const struct route_req *q, char extack[HPN_EXTACK_LEN])
{
	_cleanup_nl_msg_ struct nl_msg *msg = route_msg(q);

	return msg ? hpn_nl_talk(sk, msg, NULL, NULL, extack) : -ENOMEM;
}

int hpn_route_add(struct nl_sock *sk, int ifindex, const char *ifname, const struct hpn_route *rt,
		  const char *gw, struct hpn_err *err)
{
	_cleanup_route_req_ struct route_req q = { 0 };
	char extack[HPN_EXTACK_LEN];
	int r;

	r = route_of(ifindex, rt, gw, &q);
	if (r < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, r, "route to %s via %s: %s", rt->dst,
				   gw ? gw : "link", strerror(-r));
	r = route_send(sk, &q, extack);
	if (r < 0)
		return hpn_nl_err(err, r, extack, "add route to %s via %s on \"%s\"", rt->dst,
				  gw ? gw : "link", ifname);
	return 0;
}

/* A dump of one family (AF_UNSPEC: all) of RTM_GET<what>; cb sees each reply. */
static int dump(struct nl_sock *sk, int type, int family, hpn_nl_cb cb, void *arg)
{
	/* rtgenmsg's one byte is the family in every RTM_GET* header. */
	struct rtmsg hdr = { .rtm_family = (uint8_t)family };
	_cleanup_nl_msg_ struct nl_msg *msg = hpn_nl_msg(type, NLM_F_DUMP, &hdr, sizeof(hdr));

	return msg ? hpn_nl_talk(sk, msg, cb, arg, NULL) : -ENOMEM;
}

/* A search over a dump: want describes it, found is set by the callback. */
struct find {
	int ifindex;
	unsigned int table, prio;
	struct nl_addr *addr, *gw;
	bool found;
};

/* The dump of type and family searched by cb for f: 0 found, -ENOENT not, else what failed. */
static int search(struct nl_sock *sk, int type, int family, hpn_nl_cb cb, struct find *f,
		  const char *what, struct hpn_err *err)
{
	int r = dump(sk, type, family, cb, f);

	if (r < 0)
		return hpn_nl_err(err, r, NULL, "list %s", what);
	return f->found ? 0 : -ENOENT;
}

static int addr_cb(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	const struct ifaddrmsg *ifa = nlmsg_data(nlh);
	struct nlattr *tb[IFA_MAX + 1];
	struct find *f = arg;
	struct nlattr *local;

	if (nlh->nlmsg_type != RTM_NEWADDR || nlmsg_parse(nlh, sizeof(*ifa), tb, IFA_MAX, NULL) < 0)
		return 0;
	/* IPv6 sends IFA_ADDRESS alone; IFA_LOCAL is the local end when both are. */
	local = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
	if ((int)ifa->ifa_index == f->ifindex && ifa->ifa_family == nl_addr_get_family(f->addr) &&
	    ifa->ifa_prefixlen == nl_addr_get_prefixlen(f->addr) && attr_is(local, f->addr))
		f->found = true;
	return 0;
}

int hpn_addr_find(struct nl_sock *sk, int ifindex, const char *cidr, struct hpn_err *err)
{
	_cleanup_nl_addr_ struct nl_addr *want = NULL;
	struct find f = { .ifindex = ifindex };

	if (parse_cidr(cidr, &want) < 0)
		return -EINVAL;
	f.addr = want;
	return search(sk, RTM_GETADDR, AF_UNSPEC, addr_cb, &f, "addresses", err);
}

/*
 * A route in f's table to f's prefix whose first next hop is f's ifindex
 * (and gateway, when f has one, or no gateway when it has none).
 */
static int route_cb(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	const struct rtmsg *rtm = nlmsg_data(nlh);
	struct nlattr *tb[RTA_MAX + 1], *gw;
	struct find *f = arg;
	unsigned int table;
	int oif;

	if (nlh->nlmsg_type != RTM_NEWROUTE ||
	    nlmsg_parse(nlh, sizeof(*rtm), tb, RTA_MAX, NULL) < 0)
		return 0;
	table = tb[RTA_TABLE] ? nla_get_u32(tb[RTA_TABLE]) : rtm->rtm_table;
	if (table != f->table || rtm->rtm_family != nl_addr_get_family(f->addr) ||
	    !attr_prefix_is(tb[RTA_DST], rtm->rtm_dst_len, f->addr))
		return 0;
	oif = tb[RTA_OIF] ? (int)nla_get_u32(tb[RTA_OIF]) : 0;
	gw = tb[RTA_GATEWAY];
	if (tb[RTA_MULTIPATH] && nla_len(tb[RTA_MULTIPATH]) >= (int)sizeof(struct rtnexthop)) {
		/* The first next hop, with its own attributes after it. */
		const struct rtnexthop *nh = nla_data(tb[RTA_MULTIPATH]);
		struct nlattr *ntb[RTA_MAX + 1];
		int len = (int)nh->rtnh_len - (int)RTNH_LENGTH(0);

		if (len < 0 || len > nla_len(tb[RTA_MULTIPATH]) - (int)RTNH_LENGTH(0) ||
		    nla_parse(ntb, RTA_MAX, (struct nlattr *)RTNH_DATA(nh), len, NULL) < 0)
			return 0;
		oif = nh->rtnh_ifindex;
		gw = ntb[RTA_GATEWAY];
	}
	if (oif == f->ifindex && (!gw) == (!f->gw) && (!gw || attr_is(gw, f->gw)))
		f->found = true;
	return 0;
}

int hpn_route_find(struct nl_sock *sk, int ifindex, const struct hpn_route *rt, const char *gw,
		   struct hpn_err *err)
{
	_cleanup_route_req_ struct route_req q = { 0 };
	struct find f = { .ifindex = ifindex };
	int r = route_of(ifindex, rt, gw, &q);

	if (r < 0)
		return r;
	f.table = q.table;
	f.addr = q.dst;
	f.gw = q.gw;
	return search(sk, RTM_GETROUTE, nl_addr_get_family(q.dst), route_cb, &f, "routes", err);
}

/* ---- a rail's routes and rules ------------------------------------------------ */

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
	_cleanup_route_req_ struct route_req q = { .scope = RT_SCOPE_LINK,
						   .ifindex = ifindex,
						   .table = table };
	char extack[HPN_EXTACK_LEN];
	int r;

	if (host_and_net(cidr, &q.src, &q.dst) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "address \"%s\" is not a CIDR", cidr);
	r = route_send(sk, &q, extack);
	if (r < 0)
		return hpn_nl_err(err, r, extack, "add the route of %s to table %u on \"%s\"", cidr,
				  table, ifname);
	return 0;
}

/* search() for cidr's network (net) or its address alone: -EINVAL when cidr is not one. */
static int search_cidr(struct nl_sock *sk, const char *cidr, bool net, int type, hpn_nl_cb cb,
		       struct find *f, const char *what, struct hpn_err *err)
{
	_cleanup_nl_addr_ struct nl_addr *h = NULL, *n = NULL;

	if (host_and_net(cidr, &h, &n) < 0)
		return -EINVAL;
	f->addr = net ? n : h;
	return search(sk, type, nl_addr_get_family(f->addr), cb, f, what, err);
}

int hpn_route_find_connected(struct nl_sock *sk, int ifindex, const char *cidr, unsigned int table,
			     struct hpn_err *err)
{
	/* A connected route has no gateway: f.gw NULL asks for none. */
	struct find f = { .ifindex = ifindex, .table = table };

	return search_cidr(sk, cidr, true, RTM_GETROUTE, route_cb, &f, "routes", err);
}

/*
 * A rule "from <address> lookup table" at priority prio (ip rule's
 * FR_ACT_TO_TBL); src NULL: any source (the delete by table and priority).
 */
static struct nl_msg *rule_msg(int type, int flags, int family, struct nl_addr *src,
			       unsigned int table, unsigned int prio)
{
	struct fib_rule_hdr frh = {
		.family = (uint8_t)family,
		.src_len = src ? (uint8_t)nl_addr_get_prefixlen(src) : 0,
		.table = table < 256 ? (uint8_t)table : RT_TABLE_UNSPEC,
		.action = FR_ACT_TO_TBL,
	};
	struct nl_msg *msg = hpn_nl_msg(type, flags, &frh, sizeof(frh));

	if (msg &&
	    (nla_put_u32(msg, FRA_PRIORITY, prio) < 0 || nla_put_u32(msg, FRA_TABLE, table) < 0 ||
	     (src && nla_put_addr(msg, FRA_SRC, src) < 0))) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

int hpn_rule_add(struct nl_sock *sk, const char *cidr, unsigned int table, unsigned int prio,
		 struct hpn_err *err)
{
	_cleanup_nl_addr_ struct nl_addr *host = NULL, *net = NULL;
	_cleanup_nl_msg_ struct nl_msg *msg = NULL;
	char extack[HPN_EXTACK_LEN];
	int r;

	if (host_and_net(cidr, &host, &net) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "address \"%s\" is not a CIDR", cidr);
	msg = rule_msg(RTM_NEWRULE, NLM_F_CREATE | NLM_F_EXCL, nl_addr_get_family(host), host,
		       table, prio);
	if (!msg)
		return -ENOMEM;
	r = hpn_nl_talk(sk, msg, NULL, NULL, extack);
	if (r < 0)
		return hpn_nl_err(err, r, extack, "add the rule from %s to table %u", cidr, table);
	return 0;
}

static int rule_cb(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	const struct fib_rule_hdr *frh = nlmsg_data(nlh);
	struct nlattr *tb[FRA_MAX + 1];
	struct find *f = arg;
	unsigned int table;

	if (nlh->nlmsg_type != RTM_NEWRULE || nlmsg_parse(nlh, sizeof(*frh), tb, FRA_MAX, NULL) < 0)
		return 0;
	table = tb[FRA_TABLE] ? nla_get_u32(tb[FRA_TABLE]) : frh->table;
	if (table == f->table && frh->action == FR_ACT_TO_TBL &&
	    (tb[FRA_PRIORITY] ? nla_get_u32(tb[FRA_PRIORITY]) : 0) == f->prio &&
	    frh->src_len == nl_addr_get_prefixlen(f->addr) && attr_is(tb[FRA_SRC], f->addr))
		f->found = true;
	return 0;
}

int hpn_rule_find(struct nl_sock *sk, const char *cidr, unsigned int table, unsigned int prio,
		  struct hpn_err *err)
{
	struct find f = { .table = table, .prio = prio };

	return search_cidr(sk, cidr, false, RTM_GETRULE, rule_cb, &f, "rules", err);
}

int hpn_rule_del_table(struct nl_sock *sk, unsigned int table, unsigned int prio,
		       struct hpn_err *err)
{
	static const int families[] = { AF_INET, AF_INET6 };
	int n = 0;

	for (size_t f = 0; f < HPN_ARRAY_SIZE(families); f++) {
		/* The kernel deletes the first rule that matches: until none does. */
		for (int k = 0; k < 1024; k++) {
			_cleanup_nl_msg_ struct nl_msg *msg =
				rule_msg(RTM_DELRULE, 0, families[f], NULL, table, prio);
			char extack[HPN_EXTACK_LEN];
			int r;

			if (!msg)
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
