/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_LINK_H
#define HPN_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "types.h"

struct nl_sock;

/* Looks a link up by ifindex (> 0) or by name (also matches altnames). -ENODEV if absent. */
int hpn_link_get(struct nl_sock *sk, int ifindex, const char *name, struct hpn_link *ret,
		 struct hpn_err *err);
/* Calls each() for every link in the socket's netns; a negative return stops the walk. */
int hpn_link_foreach(struct nl_sock *sk, int (*each)(const struct hpn_link *l, void *arg),
		     void *arg, struct hpn_err *err);
/* First link whose permanent MAC (or, when it has none, current MAC) is mac. */
int hpn_link_by_mac(struct nl_sock *sk, const uint8_t mac[HPN_MAC_LEN], bool perm_only,
		    struct hpn_link *ret, struct hpn_err *err);

/*
 * Moves l into the netns of netns_fd and names it new_name in one RTM_NEWLINK
 * (IFLA_NET_NS_FD + IFLA_IFNAME). The kernel may still complete the move and
 * then fail the rename; callers undo by finding the link again, not by assuming.
 */
int hpn_link_move(struct nl_sock *sk, const struct hpn_link *l, int netns_fd, const char *new_name,
		  struct hpn_err *err);
/* IPv4 settings of an interface hpn_link_set can make (inet, OR-ed). */
enum {
	/* The kernel sends a gratuitous ARP for the link's IPv4 addresses at each up. */
	HPN_LINK_ARP_NOTIFY = 1,
	/*
	 * A rail among other NICs of one subnet: answer ARP only for addresses
	 * of this interface (arp_ignore 1) and ask with its own address as the
	 * source (arp_announce 2), so that no NIC answers for another (ARP flux).
	 */
	HPN_LINK_ARP_RAIL = 2,
};

/*
 * Changes what is given: name (NULL: keep), mtu (0: keep), up (-1: keep, 0
 * down, 1 up), the inet settings (HPN_LINK_ARP_*, set after the flags:
 * arp_notify takes effect from the next up). A move to another netns resets
 * them.
 */
int hpn_link_set(struct nl_sock *sk, const struct hpn_link *l, const char *name, unsigned int mtu,
		 int up, unsigned int inet, struct hpn_err *err);
/* Adds or removes one alternative name (RTM_NEWLINKPROP / RTM_DELLINKPROP). */
int hpn_link_altname(struct nl_sock *sk, const struct hpn_link *l, const char *altname, bool add,
		     struct hpn_err *err);

/* A macvlan or ipvlan to create over a parent, directly in another netns. */
struct hpn_child {
	const char *kind;  /* "macvlan" or "ipvlan" */
	unsigned int mode; /* MACVLAN_MODE_* or IPVLAN_MODE_* */
	const char *name;  /* its name in netns_fd */
	int netns_fd;
	unsigned int mtu; /* 0: the parent's */
	uint8_t mac[HPN_MAC_LEN];
	bool has_mac;
};

/* One RTM_NEWLINK: the child of parent (in sk's netns) is created in c->netns_fd. */
int hpn_link_create_child(struct nl_sock *sk, const struct hpn_link *parent,
			  const struct hpn_child *c, struct hpn_err *err);
/* Deletes l (RTM_DELLINK); already gone is success. */
int hpn_link_del(struct nl_sock *sk, const struct hpn_link *l, struct hpn_err *err);

/* A MAC that can identify one device: present and not all zeros (lo has zeros). */
bool hpn_link_mac_usable(const struct hpn_link *l);
/*
 * Is l the device the journal recorded? By permanent MAC when it has one, else
 * by its MAC (the plugin never changes it). A device with no usable MAC (IPoIB
 * has 20-byte addresses) can only be trusted by the name or ifindex it was
 * looked up by.
 */
bool hpn_link_same_device(const struct hpn_link *l, const struct hpn_link *orig);

/*
 * The device the journal recorded as orig, in sk's netns: by name (if given)
 * or ifindex, confirmed by hpn_link_same_device, else by its MAC. -ENODEV
 * when it is not there.
 */
int hpn_link_find(struct nl_sock *sk, const char *name, int ifindex, const struct hpn_link *orig,
		  struct hpn_link *ret, struct hpn_err *err);

#endif
