// SPDX-License-Identifier: Apache-2.0
#include "counters.h"

#include <dirent.h>
#include <errno.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <rdma/rdma_netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netns.h"
#include "nl.h"
#include "sysfs.h"
#include "util.h"

#ifndef NETLINK_RDMA
#define NETLINK_RDMA 20
#endif

#define NLDEV(op) RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op)

/*
 * A netlink socket of protocol in netns_fd (-1: here): the calling thread
 * enters it, opens the socket (which stays bound to that netns) and comes
 * back at once.
 */
static int open_in(int netns_fd, int protocol, struct nl_sock **ret)
{
	_cleanup_close_ int home = -1;
	int r, back;

	if (netns_fd < 0)
		return hpn_nl_open(protocol, ret);
	r = hpn_netns_current(&home);
	if (r < 0)
		return r;
	r = hpn_netns_enter(netns_fd);
	if (r < 0)
		return r;
	r = hpn_nl_open(protocol, ret);
	back = hpn_netns_enter(home);
	if (back < 0) {
		/* Nothing of this thread may go on in the pod's netns: say so loudly. */
		if (r == 0)
			hpn_nl_close(*ret);
		return back;
	}
	return r;
}

/* ---- link statistics --------------------------------------------------------- */

struct link_ctx {
	struct hpn_link_stats *out;
	bool found;
};

static int on_link(struct nl_msg *msg, void *arg)
{
	struct link_ctx *c = arg;
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct nlattr *tb[IFLA_MAX + 1];
	const struct ifinfomsg *ifi;
	struct rtnl_link_stats64 s;

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    nlmsg_parse(nlh, sizeof(*ifi), tb, IFLA_MAX, NULL) < 0)
		return 0;
	ifi = nlmsg_data(nlh);
	memset(c->out, 0, sizeof(*c->out));
	c->out->up = ifi->ifi_flags & IFF_UP;
	c->out->running = ifi->ifi_flags & IFF_RUNNING;
	if (tb[IFLA_MTU] && nla_len(tb[IFLA_MTU]) >= 4)
		c->out->mtu = nla_get_u32(tb[IFLA_MTU]);
	if (tb[IFLA_STATS64] && nla_len(tb[IFLA_STATS64]) >= (int)sizeof(s)) {
		memcpy(&s, nla_data(tb[IFLA_STATS64]), sizeof(s));
		c->out->rx_bytes = s.rx_bytes;
		c->out->tx_bytes = s.tx_bytes;
		c->out->rx_packets = s.rx_packets;
		c->out->tx_packets = s.tx_packets;
		c->out->rx_errors = s.rx_errors;
		c->out->tx_errors = s.tx_errors;
		c->out->rx_dropped = s.rx_dropped;
		c->out->tx_dropped = s.tx_dropped;
	}
	c->found = true;
	return 0;
}

int hpn_link_stats(int netns_fd, const char *ifname, struct hpn_link_stats *ret,
		   struct hpn_err *err)
{
	_cleanup_nl_sock_ struct nl_sock *sk = NULL;
	_cleanup_nl_msg_ struct nl_msg *msg = NULL;
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	char extack[HPN_EXTACK_LEN];
	struct hpn_link_stats s;
	struct link_ctx c = { .out = &s };
	int r;

	r = open_in(netns_fd, NETLINK_ROUTE, &sk);
	if (r < 0)
		return hpn_err_set(err, HPN_E_NETNS, -r, "netlink socket in the pod's netns: %s",
				   strerror(-r));
	msg = nlmsg_alloc_simple(RTM_GETLINK, NLM_F_REQUEST);
	if (!msg)
		return -ENOMEM;
	if (nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
	    nla_put_string(msg, IFLA_IFNAME, ifname) < 0)
		return -EMSGSIZE;
	r = hpn_nl_talk(sk, msg, on_link, &c, extack);
	if (r == -ENODEV || (r == 0 && !c.found))
		return -ENODEV;
	if (r < 0)
		return hpn_nl_err(err, r, extack, "statistics of \"%s\"", ifname);
	*ret = s;
	return 0;
}

/* ---- RDMA counters ------------------------------------------------------------- */

static void add(struct hpn_rdma_counters *c, const char *name, uint64_t value,
		enum hpn_counter_src src)
{
	struct hpn_rdma_counter *e;

	if (c->n == HPN_RDMA_COUNTERS_MAX || !name[0] || strlen(name) >= HPN_RDMA_COUNTER_NAME ||
	    hpn_rdma_counter_find(c, src, name))
		return;
	e = &c->v[c->n++];
	memcpy(e->name, name, strlen(name) + 1);
	e->value = value;
	e->src = src;
}

const struct hpn_rdma_counter *hpn_rdma_counter_find(const struct hpn_rdma_counters *c,
						     enum hpn_counter_src src, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].src == src && !strcmp(c->v[i].name, name))
			return &c->v[i];
	return NULL;
}

struct nldev_ctx {
	const char *name;
	uint32_t index;
	bool found;
	struct hpn_rdma_counters *c;
};

static int nldev_parse(struct nl_msg *msg, struct nlattr **tb)
{
	return nlmsg_parse(nlmsg_hdr(msg), 0, tb, RDMA_NLDEV_ATTR_MAX - 1, NULL) < 0 ? -EINVAL : 0;
}

static int on_dev(struct nl_msg *msg, void *arg)
{
	struct nldev_ctx *x = arg;
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];
	char name[HPN_RDMA_COUNTER_NAME];

	if (nldev_parse(msg, tb) < 0 || !tb[RDMA_NLDEV_ATTR_DEV_INDEX] ||
	    !tb[RDMA_NLDEV_ATTR_DEV_NAME])
		return 0;
	nla_strlcpy(name, tb[RDMA_NLDEV_ATTR_DEV_NAME], sizeof(name));
	if (!strcmp(name, x->name)) {
		x->index = nla_get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
		x->found = true;
	}
	return 0;
}

static int on_port(struct nl_msg *msg, void *arg)
{
	struct nldev_ctx *x = arg;
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];

	if (nldev_parse(msg, tb) < 0)
		return 0;
	if (tb[RDMA_NLDEV_ATTR_PORT_STATE])
		x->c->state = nla_get_u8(tb[RDMA_NLDEV_ATTR_PORT_STATE]);
	if (tb[RDMA_NLDEV_ATTR_PORT_PHYS_STATE])
		x->c->phys_state = nla_get_u8(tb[RDMA_NLDEV_ATTR_PORT_PHYS_STATE]);
	return 0;
}

/* STAT_GET's answer: a nest of entries, each a nest of a name and a u64. */
static int on_stat(struct nl_msg *msg, void *arg)
{
	struct nldev_ctx *x = arg;
	struct nlattr *tb[RDMA_NLDEV_ATTR_MAX], *e;
	int rem;

	if (nldev_parse(msg, tb) < 0 || !tb[RDMA_NLDEV_ATTR_STAT_HWCOUNTERS])
		return 0;
	nla_for_each_nested (e, tb[RDMA_NLDEV_ATTR_STAT_HWCOUNTERS], rem) {
		struct nlattr *et[RDMA_NLDEV_ATTR_MAX];
		char name[HPN_RDMA_COUNTER_NAME];

		if (nla_type(e) != RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY ||
		    nla_parse_nested(et, RDMA_NLDEV_ATTR_MAX - 1, e, NULL) < 0 ||
		    !et[RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME] ||
		    !et[RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE] ||
		    nla_len(et[RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE]) < 8)
			continue;
		nla_strlcpy(name, et[RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME], sizeof(name));
		add(x->c, name, nla_get_u64(et[RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE]),
		    HPN_COUNTER_HW);
	}
	return 0;
}

/* One request on sk: dev index and port attached when index is set. */
static int nldev_ask(struct nl_sock *sk, int op, int flags, const struct nldev_ctx *x,
		     uint32_t port, hpn_nl_cb cb, void *arg, char extack[HPN_EXTACK_LEN])
{
	_cleanup_nl_msg_ struct nl_msg *m = nlmsg_alloc_simple(NLDEV(op), NLM_F_REQUEST | flags);

	if (!m)
		return -ENOMEM;
	if (x->found && (nla_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, x->index) < 0 ||
			 nla_put_u32(m, RDMA_NLDEV_ATTR_PORT_INDEX, port) < 0))
		return -EMSGSIZE;
	return hpn_nl_talk(sk, m, cb, arg, extack);
}

/*
 * Through RDMA netlink, as `rdma statistic show link DEV/PORT` asks: the
 * device's index from a dump, then the port, then its default counters.
 * -EPROTONOSUPPORT without RDMA netlink, -ENODEV when this netns has no such
 * device.
 */
static int by_netlink(int netns_fd, const char *dev, unsigned int port, struct hpn_rdma_counters *c,
		      struct hpn_err *err)
{
	_cleanup_nl_sock_ struct nl_sock *sk = NULL;
	struct nldev_ctx x = { .name = dev, .c = c };
	char extack[HPN_EXTACK_LEN];
	int r;

	r = open_in(netns_fd, NETLINK_RDMA, &sk);
	if (r == -EPROTONOSUPPORT)
		return r;
	if (r < 0)
		return hpn_err_set(err, HPN_E_NETNS, -r, "RDMA netlink socket: %s", strerror(-r));
	r = nldev_ask(sk, RDMA_NLDEV_CMD_GET, NLM_F_DUMP, &x, 0, on_dev, &x, extack);
	if (r == -EOPNOTSUPP || r == -EPROTONOSUPPORT)
		return -EPROTONOSUPPORT;
	if (r < 0)
		return hpn_nl_err(err, r, extack, "RDMA netlink: list RDMA devices");
	if (!x.found)
		return -ENODEV;
	r = nldev_ask(sk, RDMA_NLDEV_CMD_PORT_GET, NLM_F_ACK, &x, port, on_port, &x, extack);
	if (r == -ENODEV || r == -EINVAL)
		return -ENODEV; /* unregistered meanwhile, or no such port */
	if (r < 0)
		return hpn_nl_err(err, r, extack, "RDMA netlink: port %s/%u", dev, port);
	c->netlink = true;
	/* A driver without hardware counters answers EOPNOTSUPP: the port state stands alone. */
	r = nldev_ask(sk, RDMA_NLDEV_CMD_STAT_GET, NLM_F_ACK, &x, port, on_stat, &x, extack);
	if (r < 0 && r != -EOPNOTSUPP && r != -EINVAL && r != -ENODEV)
		return hpn_nl_err(err, r, extack, "RDMA netlink: counters of %s/%u", dev, port);
	return 0;
}

/* "4: ACTIVE" -> 4; 0 when absent or not a number. */
static int state_file(const char *root, const char *dev, unsigned int port, const char *file)
{
	char v[32];

	if (hpn_sysfs_read(v, sizeof(v), "%s/class/infiniband/%s/ports/%u/%s", root, dev, port,
			   file) < 0)
		return 0;
	return (int)strtol(v, NULL, 10);
}

/* Every counter file of <port dir>/<sub> (hw_counters/ or counters/). */
static void counter_dir(const char *root, const char *dev, unsigned int port, const char *sub,
			enum hpn_counter_src src, struct hpn_rdma_counters *c)
{
	char path[4096];
	struct dirent *de;
	DIR *d;

	if (hpn_snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports/%u/%s", root, dev, port,
			 sub) < 0 ||
	    !(d = opendir(path)))
		return;
	while ((de = readdir(d))) {
		char v[32], *end;
		unsigned long long n;

		/* lifespan is hw_counters' refresh interval in ms, a setting, not a counter. */
		if (de->d_name[0] == '.' || !strcmp(de->d_name, "lifespan") ||
		    !hpn_valid_path_component(de->d_name) ||
		    hpn_sysfs_read(v, sizeof(v), "%s/%s", path, de->d_name) < 0)
			continue;
		errno = 0;
		n = strtoull(v, &end, 10);
		if (!errno && end != v && (!*end || *end == '\n'))
			add(c, de->d_name, n, src);
	}
	closedir(d);
}

int hpn_rdma_counters(const char *sysfs_root, int netns_fd, const char *dev, unsigned int port,
		      struct hpn_rdma_counters *ret, struct hpn_err *err)
{
	struct hpn_rdma_counters *c = calloc(1, sizeof(*c));
	bool fake = strcmp(sysfs_root, "/sys") != 0, in_sysfs;
	int r = -EPROTONOSUPPORT;

	if (!c)
		return -ENOMEM;
	if (!port)
		port = 1;
	if (!fake)
		r = by_netlink(netns_fd, dev, port, c, err);
	if (r < 0 && r != -EPROTONOSUPPORT && r != -ENODEV)
		goto out;
	/* sysfs shows the devices of the netns it was mounted in (the host's here). */
	in_sysfs = hpn_sysfs_exists("%s/class/infiniband/%s/ports/%u", sysfs_root, dev, port);
	if (r < 0 && !in_sysfs) {
		r = -ENODEV;
		goto out;
	}
	if (r < 0) {
		/* No RDMA netlink, or a fake tree: the port and its counters from sysfs. */
		memset(c, 0, sizeof(*c));
		c->state = state_file(sysfs_root, dev, port, "state");
		c->phys_state = state_file(sysfs_root, dev, port, "phys_state");
		counter_dir(sysfs_root, dev, port, "hw_counters", HPN_COUNTER_HW, c);
	}
	if (in_sysfs)
		counter_dir(sysfs_root, dev, port, "counters", HPN_COUNTER_PMA, c);
	*ret = *c;
	r = 0;
out:
	free(c);
	return r;
}
