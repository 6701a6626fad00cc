// SPDX-License-Identifier: Apache-2.0
#include "link.h"

#include <errno.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/ip.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <stdio.h>
#include <string.h>

#include "nl.h"
#include "util.h"

static int parse_link(struct nl_msg *msg, struct hpn_link *l)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct nlattr *tb[IFLA_MAX + 1];
	struct ifinfomsg *ifi;
	int r;

	if (nlh->nlmsg_type != RTM_NEWLINK)
		return 0;
	r = nlmsg_parse(nlh, sizeof(*ifi), tb, IFLA_MAX, NULL);
	if (r < 0)
		return -EINVAL;
	ifi = nlmsg_data(nlh);
	memset(l, 0, sizeof(*l));
	l->ifindex = ifi->ifi_index;
	l->up = ifi->ifi_flags & IFF_UP;
	if (tb[IFLA_IFNAME])
		nla_strlcpy(l->name, tb[IFLA_IFNAME], sizeof(l->name));
	if (tb[IFLA_MTU])
		l->mtu = nla_get_u32(tb[IFLA_MTU]);
	/* The lower device of a macvlan/ipvlan/vlan, when it lives in this netns. */
	if (tb[IFLA_LINK] && !tb[IFLA_LINK_NETNSID])
		l->lower_ifindex = (int)nla_get_u32(tb[IFLA_LINK]);
	if (tb[IFLA_ADDRESS] && nla_len(tb[IFLA_ADDRESS]) == HPN_MAC_LEN) {
		memcpy(l->mac, nla_data(tb[IFLA_ADDRESS]), HPN_MAC_LEN);
		l->has_mac = true;
	}
	if (tb[IFLA_PERM_ADDRESS] && nla_len(tb[IFLA_PERM_ADDRESS]) == HPN_MAC_LEN) {
		memcpy(l->perm_mac, nla_data(tb[IFLA_PERM_ADDRESS]), HPN_MAC_LEN);
		l->has_perm_mac = !hpn_mac_is_zero(l->perm_mac);
	}
	if (tb[IFLA_PROP_LIST]) {
		struct nlattr *a;
		int rem;

		nla_for_each_nested (a, tb[IFLA_PROP_LIST], rem) {
			if (nla_type(a) != IFLA_ALT_IFNAME || l->n_altnames == HPN_MAX_ALTNAMES)
				continue;
			nla_strlcpy(l->altnames[l->n_altnames++], a, HPN_ALTNAMSIZ);
		}
	}
	/* IFLA_INET_CONF: every IPV4_DEVCONF_* value, u32s in order from 1. */
	if (tb[IFLA_AF_SPEC]) {
		struct nlattr *af, *in[IFLA_INET_MAX + 1];
		int rem;

		nla_for_each_nested (af, tb[IFLA_AF_SPEC], rem) {
			const uint32_t *v;

			if (nla_type(af) != AF_INET ||
			    nla_parse_nested(in, IFLA_INET_MAX, af, NULL) < 0 ||
			    !in[IFLA_INET_CONF] ||
			    nla_len(in[IFLA_INET_CONF]) < (int)(IPV4_DEVCONF_ARP_IGNORE * 4))
				continue;
			v = nla_data(in[IFLA_INET_CONF]);
			l->arp_ignore = v[IPV4_DEVCONF_ARP_IGNORE - 1];
			l->arp_announce = v[IPV4_DEVCONF_ARP_ANNOUNCE - 1];
			l->has_inet_conf = true;
		}
	}
	if (tb[IFLA_LINKINFO]) {
		struct nlattr *li[IFLA_INFO_MAX + 1];

		if (nla_parse_nested(li, IFLA_INFO_MAX, tb[IFLA_LINKINFO], NULL) == 0 &&
		    li[IFLA_INFO_KIND])
			nla_strlcpy(l->kind, li[IFLA_INFO_KIND], sizeof(l->kind));
	}
	return 1;
}

static struct nl_msg *link_msg(int type, int flags, int ifindex)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = ifindex };

	return hpn_nl_msg(type, flags, &ifi, sizeof(ifi));
}

struct get_ctx {
	struct hpn_link *out;
	bool found;
};

static int get_cb(struct nl_msg *msg, void *arg)
{
	struct get_ctx *c = arg;
	int r = parse_link(msg, c->out);

	if (r > 0)
		c->found = true;
	return r < 0 ? r : 0;
}

int hpn_link_get(struct nl_sock *sk, int ifindex, const char *name, struct hpn_link *ret,
		 struct hpn_err *err)
{
	_cleanup_nl_msg_ struct nl_msg *msg = link_msg(RTM_GETLINK, 0, ifindex > 0 ? ifindex : 0);
	char extack[HPN_EXTACK_LEN];
	struct hpn_link l;
	struct get_ctx c = { .out = &l };
	int r;

	if (!msg)
		return -ENOMEM;
	if (ifindex <= 0 && name && nla_put_string(msg, IFLA_IFNAME, name) < 0)
		return -EMSGSIZE;
	/* Skip statistics and VF tables: only identity is needed here. */
	if (nla_put_u32(msg, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS) < 0)
		return -EMSGSIZE;
	r = hpn_nl_talk(sk, msg, get_cb, &c, extack);
	if (r == -ENODEV || (r == 0 && !c.found))
		return -ENODEV;
	if (r < 0)
		return hpn_nl_err(err, r, extack, "look up link %s", name ? name : "by index");
	*ret = l;
	return 0;
}

struct each_ctx {
	int (*each)(const struct hpn_link *l, void *arg);
	void *arg;
};

static int each_cb(struct nl_msg *msg, void *arg)
{
	struct each_ctx *c = arg;
	struct hpn_link l;
	int r = parse_link(msg, &l);

	if (r <= 0)
		return r;
	return c->each(&l, c->arg);
}

int hpn_link_foreach(struct nl_sock *sk, int (*each)(const struct hpn_link *l, void *arg),
		     void *arg, struct hpn_err *err)
{
	_cleanup_nl_msg_ struct nl_msg *msg = link_msg(RTM_GETLINK, NLM_F_DUMP, 0);
	struct each_ctx c = { .each = each, .arg = arg };
	char extack[HPN_EXTACK_LEN];
	int r;

	if (!msg)
		return -ENOMEM;
	if (nla_put_u32(msg, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS) < 0)
		return -EMSGSIZE;
	r = hpn_nl_talk(sk, msg, each_cb, &c, extack);
	if (r < 0 && r != -ECANCELED)
		return hpn_nl_err(err, r, extack, "list links");
	return r;
}

struct mac_ctx {
	const uint8_t *mac;
	bool perm_only;
	struct hpn_link *out;
	bool found;
};

static int mac_cb(const struct hpn_link *l, void *arg)
{
	struct mac_ctx *c = arg;
	bool hit;

	if (c->found)
		return 0;
	if (l->has_perm_mac)
		hit = !memcmp(l->perm_mac, c->mac, HPN_MAC_LEN);
	else
		hit = !c->perm_only && l->has_mac && !memcmp(l->mac, c->mac, HPN_MAC_LEN);
	if (hit) {
		*c->out = *l;
		c->found = true;
	}
	return 0;
}

int hpn_link_by_mac(struct nl_sock *sk, const uint8_t mac[HPN_MAC_LEN], bool perm_only,
		    struct hpn_link *ret, struct hpn_err *err)
{
	struct hpn_link l;
	struct mac_ctx c = { .mac = mac, .perm_only = perm_only, .out = &l };
	int r = hpn_link_foreach(sk, mac_cb, &c, err);

	if (r < 0)
		return r;
	if (!c.found)
		return -ENODEV;
	*ret = l;
	return 0;
}

int hpn_link_move(struct nl_sock *sk, const struct hpn_link *l, int netns_fd, const char *new_name,
		  struct hpn_err *err)
{
	_cleanup_nl_msg_ struct nl_msg *msg = link_msg(RTM_NEWLINK, 0, l->ifindex);
	char extack[HPN_EXTACK_LEN];
	int r;

	if (!msg)
		return -ENOMEM;
	if (nla_put_u32(msg, IFLA_NET_NS_FD, (uint32_t)netns_fd) < 0 ||
	    (new_name && nla_put_string(msg, IFLA_IFNAME, new_name) < 0))
		return -EMSGSIZE;
	r = hpn_nl_talk(sk, msg, NULL, NULL, extack);
	if (r < 0)
		return hpn_nl_err(err, r, extack, "move \"%s\" to netns as \"%s\"", l->name,
				  new_name ? new_name : l->name);
	return 0;
}

/*
 * IFLA_AF_SPEC { AF_INET { IFLA_INET_CONF { ARP_NOTIFY: 1, ARP_IGNORE: 1,
 * ARP_ANNOUNCE: 2 } } }: the interface's own IPv4 settings, as sysctl
 * net.ipv4.conf.<if>.* writes them.
 */
static int put_inet_conf(struct nl_msg *msg, unsigned int inet)
{
	struct nlattr *spec = nla_nest_start(msg, IFLA_AF_SPEC), *in, *conf;

	in = spec ? nla_nest_start(msg, AF_INET) : NULL;
	conf = in ? nla_nest_start(msg, IFLA_INET_CONF) : NULL;
	if (!conf ||
	    ((inet & HPN_LINK_ARP_NOTIFY) && nla_put_u32(msg, IPV4_DEVCONF_ARP_NOTIFY, 1) < 0))
		return -EMSGSIZE;
	if ((inet & HPN_LINK_ARP_RAIL) && (nla_put_u32(msg, IPV4_DEVCONF_ARP_IGNORE, 1) < 0 ||
					   nla_put_u32(msg, IPV4_DEVCONF_ARP_ANNOUNCE, 2) < 0))
		return -EMSGSIZE;
	nla_nest_end(msg, conf);
	nla_nest_end(msg, in);
	nla_nest_end(msg, spec);
	return 0;
}

int hpn_link_set(struct nl_sock *sk, const struct hpn_link *l, const char *name, unsigned int mtu,
		 int up, unsigned int inet, struct hpn_err *err)
{
	_cleanup_nl_msg_ struct nl_msg *msg = NULL;
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = l->ifindex };
	char extack[HPN_EXTACK_LEN];
	int r;

	if (up >= 0) {
		ifi.ifi_change = IFF_UP;
		ifi.ifi_flags = up ? IFF_UP : 0;
	}
	msg = nlmsg_alloc_simple(RTM_NEWLINK, 0);
	if (!msg)
		return -ENOMEM;
	if (nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
	    (name && nla_put_string(msg, IFLA_IFNAME, name) < 0) ||
	    (mtu && nla_put_u32(msg, IFLA_MTU, mtu) < 0) || (inet && put_inet_conf(msg, inet) < 0))
		return -EMSGSIZE;
	r = hpn_nl_talk(sk, msg, NULL, NULL, extack);
	if (r < 0) {
		char what[96] = "";

		snprintf(what, sizeof(what), "%s%s%s%s%s%s%s", name ? "rename to " : "",
			 name ? name : "", mtu ? " mtu" : "", up == 1 ? " up" : "",
			 up == 0 ? " down" : "", (inet & HPN_LINK_ARP_NOTIFY) ? " arp_notify" : "",
			 (inet & HPN_LINK_ARP_RAIL) ? " arp_ignore arp_announce" : "");
		return hpn_nl_err(err, r, extack, "set link \"%s\"%s%s", l->name,
				  what[0] ? ": " : "", what);
	}
	return 0;
}

int hpn_link_altname(struct nl_sock *sk, const struct hpn_link *l, const char *altname, bool add,
		     struct hpn_err *err)
{
	_cleanup_nl_msg_ struct nl_msg *msg =
		link_msg(add ? RTM_NEWLINKPROP : RTM_DELLINKPROP,
			 add ? NLM_F_EXCL | NLM_F_CREATE : 0, l->ifindex);
	char extack[HPN_EXTACK_LEN];
	struct nlattr *nest;
	int r;

	if (!msg)
		return -ENOMEM;
	nest = nla_nest_start(msg, IFLA_PROP_LIST | NLA_F_NESTED);
	if (!nest || nla_put_string(msg, IFLA_ALT_IFNAME, altname) < 0)
		return -EMSGSIZE;
	nla_nest_end(msg, nest);
	r = hpn_nl_talk(sk, msg, NULL, NULL, extack);
	if (r < 0)
		return hpn_nl_err(err, r, extack, "%s altname \"%s\" of \"%s\"",
				  add ? "add" : "delete", altname, l->name);
	return 0;
}

int hpn_link_create_child(struct nl_sock *sk, const struct hpn_link *parent,
			  const struct hpn_child *c, struct hpn_err *err)
{
	_cleanup_nl_msg_ struct nl_msg *msg = link_msg(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0);
	bool macvlan = !strcmp(c->kind, "macvlan");
	char extack[HPN_EXTACK_LEN];
	struct nlattr *info, *data;
	int r;

	if (!msg)
		return -ENOMEM;
	/* Created straight in the pod, under its pod-side name: it never exists on the host. */
	if (nla_put_u32(msg, IFLA_LINK, (uint32_t)parent->ifindex) < 0 ||
	    nla_put_string(msg, IFLA_IFNAME, c->name) < 0 ||
	    nla_put_u32(msg, IFLA_NET_NS_FD, (uint32_t)c->netns_fd) < 0 ||
	    (c->mtu && nla_put_u32(msg, IFLA_MTU, c->mtu) < 0) ||
	    (c->has_mac && nla_put(msg, IFLA_ADDRESS, HPN_MAC_LEN, c->mac) < 0))
		return -EMSGSIZE;
	info = nla_nest_start(msg, IFLA_LINKINFO);
	if (!info || nla_put_string(msg, IFLA_INFO_KIND, c->kind) < 0)
		return -EMSGSIZE;
	data = nla_nest_start(msg, IFLA_INFO_DATA);
	if (!data || (macvlan ? nla_put_u32(msg, IFLA_MACVLAN_MODE, c->mode)
			      : nla_put_u16(msg, IFLA_IPVLAN_MODE, (uint16_t)c->mode)) < 0)
		return -EMSGSIZE;
	nla_nest_end(msg, data);
	nla_nest_end(msg, info);
	r = hpn_nl_talk(sk, msg, NULL, NULL, extack);
	if (r < 0)
		return hpn_nl_err(err, r, extack, "create %s \"%s\" of \"%s\" in the pod", c->kind,
				  c->name, parent->name);
	return 0;
}

int hpn_link_del(struct nl_sock *sk, const struct hpn_link *l, struct hpn_err *err)
{
	_cleanup_nl_msg_ struct nl_msg *msg = link_msg(RTM_DELLINK, 0, l->ifindex);
	char extack[HPN_EXTACK_LEN];
	int r;

	if (!msg)
		return -ENOMEM;
	r = hpn_nl_talk(sk, msg, NULL, NULL, extack);
	if (r == -ENODEV)
		return 0;
	if (r < 0)
		return hpn_nl_err(err, r, extack, "delete \"%s\"", l->name);
	return 0;
}

bool hpn_link_mac_usable(const struct hpn_link *l)
{
	return l->has_perm_mac || (l->has_mac && !hpn_mac_is_zero(l->mac));
}

bool hpn_link_same_device(const struct hpn_link *l, const struct hpn_link *orig)
{
	if (orig->has_perm_mac)
		return l->has_perm_mac && !memcmp(l->perm_mac, orig->perm_mac, HPN_MAC_LEN);
	if (!hpn_link_mac_usable(orig))
		return !strcmp(l->kind, orig->kind);
	return l->has_mac && !memcmp(l->mac, orig->mac, HPN_MAC_LEN);
}

int hpn_link_find(struct nl_sock *sk, const char *name, int ifindex, const struct hpn_link *orig,
		  struct hpn_link *ret, struct hpn_err *err)
{
	/* Zeroed: the analyzer cannot see that hpn_link_get fills it when it returns 0. */
	struct hpn_link l = { 0 };
	int r;

	if (name && hpn_link_get(sk, 0, name, &l, err) == 0 && hpn_link_same_device(&l, orig))
		goto found;
	if (ifindex > 0 && hpn_link_get(sk, ifindex, NULL, &l, err) == 0 &&
	    hpn_link_same_device(&l, orig))
		goto found;
	if (!hpn_link_mac_usable(orig))
		return -ENODEV;
	r = hpn_link_by_mac(sk, orig->has_perm_mac ? orig->perm_mac : orig->mac, orig->has_perm_mac,
			    &l, err);
	if (r < 0)
		return r;
found:
	*ret = l;
	return 0;
}
