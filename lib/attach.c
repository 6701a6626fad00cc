// SPDX-License-Identifier: Apache-2.0
#include "attach.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netlink/netlink.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "addr.h"
#include "ipam.h"
#include "link.h"
#include "log.h"
#include "netns.h"
#include "nl.h"
#include "rdma.h"
#include "store.h"
#include "sysfs.h"
#include "verbs.h"

#define LOCK_TIMEOUT_MS 30000
/* How long the kernel may take to fill the GID table after an address is set. */
#define GID_TIMEOUT_MS 10000

/*
 * Everything one command needs about the two namespaces: fds and one netlink
 * socket opened in each (a socket stays bound to the netns it was opened in).
 */
struct nsctx {
	int host_fd;
	int pod_fd;
	struct nl_sock *host;
	struct nl_sock *pod;
};

static void nsctx_close(struct nsctx *ns)
{
	hpn_nl_close(ns->host);
	hpn_nl_close(ns->pod);
	if (ns->host_fd >= 0)
		close(ns->host_fd);
	if (ns->pod_fd >= 0)
		close(ns->pod_fd);
	ns->host = ns->pod = NULL;
	ns->host_fd = ns->pod_fd = -1;
}

/* Opens a netlink socket inside netns_fd and comes back to the host netns. */
static int socket_in(const struct nsctx *ns, int netns_fd, const char *netns, struct nl_sock **ret,
		     struct hpn_err *err)
{
	int r = hpn_netns_enter(netns_fd);

	if (r < 0)
		return hpn_err_set(err, HPN_E_NETNS, r, "enter netns \"%s\": %s", netns,
				   strerror(-r));
	r = hpn_nl_open(NETLINK_ROUTE, ret);
	/* Always go home: the rest of the run assumes the host netns. */
	if (hpn_netns_enter(ns->host_fd) < 0)
		return hpn_err_set(err, HPN_E_NETNS, errno, "return to the host netns: %s",
				   strerror(errno));
	if (r < 0)
		return hpn_err_set(err, HPN_E_NETLINK, r, "netlink socket in \"%s\": %s", netns,
				   strerror(-r));
	return 0;
}

static int open_pod_socket(struct nsctx *ns, const char *netns, struct hpn_err *err)
{
	return socket_in(ns, ns->pod_fd, netns, &ns->pod, err);
}

static int nsctx_open_host(struct nsctx *ns, struct hpn_err *err)
{
	int r = hpn_netns_current(&ns->host_fd);

	if (r < 0)
		return hpn_err_set(err, HPN_E_NETNS, r, "open the host netns: %s", strerror(-r));
	r = hpn_nl_open(NETLINK_ROUTE, &ns->host);
	if (r < 0)
		return hpn_err_set(err, HPN_E_NETLINK, r, "netlink socket: %s", strerror(-r));
	return 0;
}

/* Test-only fault injection: HPN_FAIL_AT=<step> fails ADD right after <step>. */
static int fault(const char *step, struct hpn_err *err)
{
#ifdef HPN_TEST_HOOKS
	const char *at = getenv("HPN_FAIL_AT");

	if (at && !strcmp(at, step))
		return hpn_err_set(err, HPN_E_INTERNAL, EIO, "injected failure after step %s",
				   step);
#endif
	return 0;
}

/* A MAC that can identify one device: present and not all zeros (lo has zeros). */
static bool mac_usable(const struct hpn_link *l)
{
	return l->has_perm_mac || (l->has_mac && !hpn_mac_is_zero(l->mac));
}

/*
 * Is l the device the journal recorded? By permanent MAC when it has one, else
 * by its MAC (the plugin never changes it). A device with no usable MAC (IPoIB
 * has 20-byte addresses) can only be trusted by the name or ifindex it was
 * looked up by.
 */
static bool same_device(const struct hpn_link *l, const struct hpn_link *orig)
{
	if (orig->has_perm_mac)
		return l->has_perm_mac && !memcmp(l->perm_mac, orig->perm_mac, HPN_MAC_LEN);
	if (!mac_usable(orig))
		return !strcmp(l->kind, orig->kind);
	return l->has_mac && !memcmp(l->mac, orig->mac, HPN_MAC_LEN);
}

/* The device in the socket's netns: by name (if given) or ifindex, confirmed by MAC. */
static int find_device(struct nl_sock *sk, const char *name, int ifindex,
		       const struct hpn_link *orig, struct hpn_link *ret, struct hpn_err *err)
{
	struct hpn_link l;
	int r;

	if (name && hpn_link_get(sk, 0, name, &l, err) == 0 && same_device(&l, orig))
		goto found;
	if (ifindex > 0 && hpn_link_get(sk, ifindex, NULL, &l, err) == 0 && same_device(&l, orig))
		goto found;
	if (!mac_usable(orig))
		return -ENODEV;
	r = hpn_link_by_mac(sk, orig->has_perm_mac ? orig->perm_mac : orig->mac, orig->has_perm_mac,
			    &l, err);
	if (r < 0)
		return r;
found:
	*ret = l;
	return 0;
}

/* The gateway a route goes through: its own, else the first same-family IP gateway. */
static const char *route_gw(const struct hpn_result *res, const struct hpn_route *rt)
{
	bool v6 = strchr(rt->dst, ':');

	if (rt->gw)
		return rt->gw;
	for (size_t i = 0; i < res->n_ips; i++)
		if (res->ips[i].gateway && (strchr(res->ips[i].gateway, ':') != NULL) == v6)
			return res->ips[i].gateway;
	return NULL;
}

static bool has_altname(const struct hpn_link *l, const char *name)
{
	for (size_t i = 0; i < l->n_altnames; i++)
		if (!strcmp(l->altnames[i], name))
			return true;
	return false;
}

/*
 * Puts the device back as the journal recorded it: out of the pod netns if it
 * is still there, then name, MTU, altnames and admin state in the host. Finds
 * it wherever it is (a dead netns hands a physical NIC back to the host under
 * its pod-side name); a device that is gone (a veth dies with its netns) is
 * nothing to restore. Safe to run any number of times.
 */
/*
 * Exclusive mode: brings the RDMA device back from the pod netns. A dead netns
 * already gave it back to the initial netns, so absent from the pod is fine.
 */
static int restore_rdma_netns(struct nsctx *ns, int pod_fd, const struct hpn_journal *j,
			      struct hpn_err *err)
{
	int r = hpn_netns_enter(pod_fd), present = 0;

	if (r < 0)
		return hpn_err_set(err, HPN_E_NETNS, r, "enter netns \"%s\": %s", j->netns,
				   strerror(-r));
	present = hpn_rdma_present(j->rdma.name, err);
	if (present == 1)
		r = hpn_rdma_set_netns(j->rdma.name, ns->host_fd, err);
	if (hpn_netns_enter(ns->host_fd) < 0)
		return hpn_err_set(err, HPN_E_NETNS, errno, "return to the host netns: %s",
				   strerror(errno));
	return present < 0 ? present : r;
}

/* A software RDMA device (rxe) dies when its netdev leaves the host: make it again. */
static void restore_soft_rdma(const struct hpn_journal *j)
{
	struct hpn_err e = { 0 };
	int r = hpn_rdma_present(j->rdma.name, &e);

	if (r == 0)
		r = hpn_rdma_link_add(j->rdma.name, j->rdma.soft_type, j->rdma.netdev, &e);
	if (r < 0)
		hpn_warn("RDMA device \"%s\" over \"%s\": %s", j->rdma.name, j->rdma.netdev, e.msg);
	else
		hpn_debug("RDMA device \"%s\" is on the host", j->rdma.name);
}

static int restore_netdev(struct nsctx *ns, const struct hpn_journal *j, const char *sysfs_root,
			  struct hpn_err *err)
{
	const struct hpn_link *orig = &j->host;
	struct hpn_link l;
	int pod_fd = -1, r;

	if (j->netns) {
		struct hpn_err nerr = { 0 };

		r = hpn_netns_open(j->netns, &pod_fd, &nerr);
		/* Gone (no file, or no longer a netns mount) is fine; unreadable is not. */
		if (r < 0 && r != -ENOENT && r != -EINVAL) {
			*err = nerr;
			return r;
		}
		if (r == 0 && (r = hpn_netns_is_current(pod_fd)) < 0) {
			close(pod_fd);
			return hpn_err_set(err, HPN_E_NETNS, r,
					   "compare netns \"%s\" with ours: %s", j->netns,
					   strerror(-r));
		}
		if (pod_fd >= 0 && r == 0) {
			_cleanup_nl_sock_ struct nl_sock *pod = NULL;

			/* Reverse order of ADD: the RDMA device left after the netdev. */
			if (j->rdma.moved) {
				r = restore_rdma_netns(ns, pod_fd, j, err);
				if (r < 0) {
					close(pod_fd);
					return r;
				}
			}
			r = socket_in(ns, pod_fd, j->netns, &pod, err);
			if (r < 0) {
				close(pod_fd);
				return r;
			}
			if (find_device(pod, j->pod_ifname, j->pod_ifindex, orig, &l, err) == 0) {
				r = hpn_link_move(pod, &l, ns->host_fd, orig->name, err);
				if (r == -EEXIST) {
					/* The original name is taken on the host: keep ours. */
					hpn_warn("\"%s\" exists on the host; returning \"%s\" "
						 "under its pod name",
						 orig->name, l.name);
					memset(err, 0, sizeof(*err));
					r = hpn_link_move(pod, &l, ns->host_fd, NULL, err);
				}
				if (r < 0) {
					close(pod_fd);
					return r;
				}
			}
		} else if (r < 0) {
			hpn_debug("netns %s: %s; looking for the device on the host", j->netns,
				  nerr.msg);
		}
		if (pod_fd >= 0)
			close(pod_fd);
	}

	r = find_device(ns->host, NULL, orig->ifindex, orig, &l, err);
	if (r == -ENODEV && j->pci[0]) {
		char names[4][16];
		size_t n = 0;

		/* PCI identity holds even if the MAC was changed in the pod. */
		if (hpn_sysfs_pci_netdevs(sysfs_root, j->pci, names, 4, &n) == 0 && n == 1)
			r = hpn_link_get(ns->host, 0, names[0], &l, err);
	}
	if (r == -ENODEV) {
		hpn_info("device \"%s\" is gone; nothing to restore", orig->name);
		return 0;
	}
	if (r < 0)
		return r;
	if (strcmp(l.name, orig->name) || (orig->mtu && l.mtu != orig->mtu)) {
		/* The kernel refuses to rename a running device. */
		if (l.up) {
			r = hpn_link_set(ns->host, &l, NULL, 0, 0, err);
			if (r < 0)
				return r;
			l.up = false;
		}
		r = hpn_link_set(ns->host, &l, strcmp(l.name, orig->name) ? orig->name : NULL,
				 orig->mtu != l.mtu ? orig->mtu : 0, -1, err);
		if (r == -EEXIST) {
			hpn_warn("cannot rename \"%s\" back to \"%s\": name in use", l.name,
				 orig->name);
			memset(err, 0, sizeof(*err));
			r = hpn_link_set(ns->host, &l, NULL, orig->mtu != l.mtu ? orig->mtu : 0, -1,
					 err);
		} else if (r == 0) {
			snprintf(l.name, sizeof(l.name), "%s", orig->name);
		}
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < orig->n_altnames; i++) {
		struct hpn_err aerr = { 0 };

		if (has_altname(&l, orig->altnames[i]))
			continue;
		/* Another device may have taken the name meanwhile; anything else fails. */
		r = hpn_link_altname(ns->host, &l, orig->altnames[i], true, &aerr);
		if (r == -EEXIST)
			hpn_warn("%s", aerr.msg);
		else if (r < 0) {
			*err = aerr;
			return r;
		}
	}
	if (l.up != orig->up)
		return hpn_link_set(ns->host, &l, NULL, 0, orig->up, err);
	return 0;
}

static int restore_device(struct nsctx *ns, const struct hpn_journal *j, const char *sysfs_root,
			  struct hpn_err *err)
{
	int r = restore_netdev(ns, j, sysfs_root, err);

	/* Only the moved NIC's own soft device can have died of the move. */
	if (r == 0 && j->rdma.soft_type[0] && !strcmp(j->rdma.netdev, j->host.name))
		restore_soft_rdma(j);
	return r;
}

/* Device restore, then IPAM release when ADD got that far (or always, for DEL). */
static int undo(struct nsctx *ns, const struct hpn_env *env, const struct hpn_conf *conf,
		const struct hpn_journal *j, bool ipam, struct hpn_err *err)
{
	struct hpn_err ierr = { 0 };
	int r = 0, ri = 0;

	if (ipam && conf->has_ipam)
		ri = hpn_ipam_run(conf, env, "DEL", &ierr);
	if (j)
		r = restore_device(ns, j, conf->sysfs_root, err);
	if (r == 0 && ri < 0) {
		*err = ierr;
		return ri;
	}
	return r;
}

struct attach {
	struct hpn_store st;
	struct nsctx ns;
	struct hpn_journal j;
	char key[HPN_KEY_MAX];
	bool have_journal;
	bool ipam_added; /* IPAM ADD succeeded in this run: a rollback must release it */
};

/* The state store, locked, and the host netns with its netlink socket. */
static int session_open(struct hpn_store *st, struct nsctx *ns, const struct hpn_conf *conf,
			struct hpn_err *err)
{
	int r = hpn_store_open(conf->state_dir, conf->name, st, err);

	if (r >= 0)
		r = hpn_store_lock(st, LOCK_TIMEOUT_MS, err);
	if (r >= 0)
		r = nsctx_open_host(ns, err);
	return r;
}

static int attach_open(struct attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		       struct hpn_err *err)
{
	int r;

	*a = (struct attach){ .st = HPN_STORE_INIT, .ns = { .host_fd = -1, .pod_fd = -1 } };
	r = hpn_store_key(env->container_id, env->ifname, a->key);
	if (r < 0)
		return hpn_err_set(err, HPN_E_INVALID_ENV, r, "state key for %s is too long",
				   env->container_id);
	r = session_open(&a->st, &a->ns, conf, err);
	if (r < 0)
		return r;
	r = hpn_journal_read(&a->st, a->key, &a->j, err);
	if (r == 0)
		a->have_journal = true;
	return r == -ENOENT ? 0 : r;
}

static void attach_close(struct attach *a)
{
	nsctx_close(&a->ns);
	hpn_journal_free(&a->j);
	hpn_store_close(&a->st);
}

static int select_device(struct nl_sock *sk, const struct hpn_conf *conf, struct hpn_link *ret,
			 struct hpn_rdma_dev *rd, struct hpn_err *err)
{
	uint8_t mac[HPN_MAC_LEN];
	char names[4][16];
	size_t n = 0;
	int r;

	switch (conf->selector) {
	case HPN_SEL_RDMA:
		r = hpn_rdma_netdev_of(conf->sysfs_root, sk, conf->selector_value, conf->rdma_port,
				       names[0], rd, err);
		if (r < 0)
			return r;
		r = hpn_link_get(sk, 0, names[0], ret, err);
		if (r == -ENODEV)
			return hpn_err_set(
				err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
				"RDMA device %s: netdev \"%s\" not found in the host netns",
				conf->selector_value, names[0]);
		return r;
	case HPN_SEL_DEVICE:
		r = hpn_link_get(sk, 0, conf->selector_value, ret, err);
		if (r == -ENODEV)
			return hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
					   "device \"%s\" not found in the host netns",
					   conf->selector_value);
		return r;
	case HPN_SEL_HWADDR:
		hpn_mac_parse(conf->selector_value, mac);
		r = hpn_link_by_mac(sk, mac, false, ret, err);
		if (r == -ENODEV)
			return hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
					   "no device with hwaddr %s in the host netns",
					   conf->selector_value);
		return r;
	case HPN_SEL_PCI:
	case HPN_SEL_DEVICE_ID:
		r = hpn_sysfs_pci_netdevs(conf->sysfs_root, conf->selector_value, names,
					  HPN_ARRAY_SIZE(names), &n);
		if (r < 0 || n == 0)
			return hpn_err_set(
				err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
				r < 0 ? "PCI device %s not found under %s/bus/pci/devices"
				      : "PCI device %s (under %s) has no netdev in the host netns",
				conf->selector_value, conf->sysfs_root);
		if (n > 1)
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "PCI device %s has %zu netdevs (%s, %s...): select one "
					   "with \"device\"",
					   conf->selector_value, n, names[0], names[1]);
		r = hpn_link_get(sk, 0, names[0], ret, err);
		if (r == -ENODEV)
			return hpn_err_set(
				err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
				"PCI device %s: netdev \"%s\" not found in the host netns",
				conf->selector_value, names[0]);
		return r;
	case HPN_SEL_NONE:
		break;
	}
	return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "no device selected");
}

static const char *pod_ifname(const struct hpn_env *env, const struct hpn_conf *conf)
{
	return conf->if_name ? conf->if_name : env->ifname;
}

/* Addresses and routes of the IPAM result on the pod's interface. */
static int configure_ip(struct attach *a, const struct hpn_link *l, const struct hpn_result *ipam,
			struct hpn_err *err)
{
	int r;

	for (size_t i = 0; i < ipam->n_ips; i++) {
		r = hpn_addr_add(a->ns.pod, l->ifindex, l->name, ipam->ips[i].address, err);
		if (r < 0)
			return r;
	}
	r = fault("addr", err);
	for (size_t i = 0; r == 0 && i < ipam->n_routes; i++)
		r = hpn_route_add(a->ns.pod, l->ifindex, l->name, &ipam->routes[i],
				  route_gw(ipam, &ipam->routes[i]), err);
	if (r == 0)
		r = fault("route", err);
	return r;
}

/*
 * Neighbours may cache the pod's addresses for an earlier owner: tell them.
 * Best effort, after ADD is complete and the state lock released: closing the
 * ARP announcement's packet socket waits for an RCU grace period in the
 * kernel (packet_release, synchronize_net: 13-18 ms measured), which other
 * ADDs no longer wait for.
 */
static void announce(struct attach *a, const struct hpn_link *l, const struct hpn_result *ipam)
{
	int r = hpn_netns_enter(a->ns.pod_fd);

	if (r < 0) {
		hpn_warn("announce on %s: enter pod netns: %s", l->name, strerror(-r));
		return;
	}
	for (size_t i = 0; i < ipam->n_ips; i++) {
		r = hpn_announce(l->ifindex, l->mac, ipam->ips[i].address);
		if (r < 0)
			hpn_warn("announce %s on %s: %s", ipam->ips[i].address, l->name,
				 strerror(-r));
	}
	if (hpn_netns_enter(a->ns.host_fd) < 0)
		hpn_warn("announce: return to the host netns: %s", strerror(errno));
}

static int journal_step(struct attach *a, enum hpn_phase phase, struct hpn_err *err)
{
	a->j.phase = phase;
	return hpn_journal_write(&a->st, a->key, &a->j, err);
}

/* What ADD decided about RDMA before changing anything. */
struct rdma_plan {
	bool found;
	struct hpn_rdma_dev dev;
	enum hpn_rdma_netns mode; /* the node's */
	char reason[256];	  /* why nothing is bound, when !found */
};

/*
 * The RDMA device behind the selected netdev, and whether the node's netns
 * mode is what the config asks for. Nothing is changed here.
 */
static int plan_rdma(struct attach *a, const struct hpn_conf *conf, const struct hpn_link *dev,
		     struct rdma_plan *p, struct hpn_err *err)
{
	int r = hpn_rdma_netns_mode(&p->mode, err);

	/* No RDMA netlink: no RDMA subsystem; the kernel's default mode is shared. */
	if (r == -EPROTONOSUPPORT)
		p->mode = HPN_RDMA_NETNS_SHARED;
	else if (r < 0)
		return r;
	if (!p->found) {
		r = hpn_rdma_of_netdev(conf->sysfs_root, a->ns.host, dev, &p->dev, err);
		if (r < 0 && r != -ENODEV)
			return r;
		p->found = r == 0;
	}
	if (!p->found) {
		snprintf(p->reason, sizeof(p->reason), "no RDMA device serves \"%s\"", dev->name);
		if (conf->rdma_required)
			return hpn_err_set(err, HPN_E_RDMA, ENODEV,
					   "%s (rdmaRequired is true; set it false to attach a "
					   "plain netdev)",
					   p->reason);
		hpn_info("%s: attaching a plain netdev", p->reason);
		return 0;
	}
	if (conf->rdma_netns != HPN_RDMA_NETNS_AUTO && conf->rdma_netns != p->mode)
		return hpn_err_set(err, HPN_E_RDMA, EINVAL,
				   "the node's RDMA netns mode is %s, but rdmaNetns requires %s "
				   "(rdma system set netns %s)",
				   hpn_rdma_netns_name(p->mode),
				   hpn_rdma_netns_name(conf->rdma_netns),
				   hpn_rdma_netns_name(conf->rdma_netns));
	hpn_info("RDMA device \"%s\" port %u (%s%s) serves \"%s\"; netns mode %s", p->dev.name,
		 p->dev.port, hpn_rdma_kind_name(p->dev.kind), p->dev.vf ? " VF" : "",
		 p->dev.netdev, hpn_rdma_netns_name(p->mode));
	snprintf(a->j.rdma.name, sizeof(a->j.rdma.name), "%s", p->dev.name);
	snprintf(a->j.rdma.netdev, sizeof(a->j.rdma.netdev), "%s", p->dev.netdev);
	if (p->dev.soft && p->dev.kind == HPN_RDMA_RXE)
		snprintf(a->j.rdma.soft_type, sizeof(a->j.rdma.soft_type), "rxe");
	return 0;
}

/* Exclusive mode: the RDMA device follows the netdev. Shared: it must still exist. */
static int move_rdma(struct attach *a, const struct hpn_env *env, const struct rdma_plan *p,
		     struct hpn_err *err)
{
	int r;

	if (p->mode == HPN_RDMA_NETNS_EXCLUSIVE) {
		a->j.rdma.moved = true;
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
static void rdma_info(const struct rdma_plan *p, const struct hpn_rdma_bind *b,
		      struct hpn_rdma_info *ri)
{
	memset(ri, 0, sizeof(*ri));
	ri->gid_index = -1;
	if (!p->found) {
		snprintf(ri->reason, sizeof(ri->reason), "%s", p->reason);
		return;
	}
	ri->bound = true;
	snprintf(ri->device, sizeof(ri->device), "%s", b->device);
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

/* prevResult (if chained) with this attachment's interface, IPs and routes appended. */
static int build_result(const struct hpn_conf *conf, const struct hpn_result *own,
			struct hpn_result **ret)
{
	struct hpn_result *res = hpn_result_new();
	int r = 0;

	if (!res)
		return -ENOMEM;
	if (conf->prev_result)
		r = hpn_result_append(res, conf->prev_result, -1);
	if (r >= 0 && hpn_dns_empty(&res->dns))
		r = hpn_dns_copy(&res->dns, &conf->dns);
	if (r >= 0)
		r = hpn_result_append(res, own, -1);
	if (r < 0) {
		hpn_result_free(res);
		return r;
	}
	*ret = res;
	return 0;
}

/* The steps of ADD after selection; on error the caller undoes from the journal. */
static int add_steps(struct attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		     const struct hpn_link *dev, const struct rdma_plan *plan,
		     struct hpn_result **ret, struct hpn_err *err)
{
	struct hpn_rdma_bind bind = { 0 };
	struct hpn_result *ipam = NULL, *own = NULL;
	struct hpn_link pl = { 0 };
	char mac[HPN_MAC_STR];
	struct hpn_iface ifc;
	int r;

	r = journal_step(a, HPN_PHASE_MOVING, err);
	if (r == 0)
		r = fault("journal", err);
	/* Altnames travel with the device and could clash in the pod: hold them here. */
	for (size_t i = 0; r == 0 && i < dev->n_altnames; i++)
		r = hpn_link_altname(a->ns.host, dev, dev->altnames[i], false, err);
	if (r == 0)
		r = fault("altnames", err);
	if (r == 0)
		r = hpn_link_move(a->ns.host, dev, a->ns.pod_fd, a->j.pod_ifname, err);
	if (r == 0)
		r = fault("move", err);
	if (r == 0) {
		r = find_device(a->ns.pod, a->j.pod_ifname, 0, dev, &pl, err);
		if (r == -ENODEV)
			r = hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
					"\"%s\" vanished after the move into \"%s\"", dev->name,
					env->netns);
	}
	if (r < 0)
		return r;
	/* One request: the kernel applies IFLA_MTU before the flags, as ip(8) would. */
	r = hpn_link_set(a->ns.pod, &pl, NULL,
			 conf->mtu && pl.mtu != (unsigned int)conf->mtu ? (unsigned int)conf->mtu
									: 0,
			 1, err);
	if (r == 0 && conf->mtu)
		pl.mtu = (unsigned int)conf->mtu;
	if (r == 0)
		r = fault("mtu", err);
	if (r == 0)
		r = fault("up", err);
	if (r == 0 && plan->found)
		r = move_rdma(a, env, plan, err);
	if (r == 0)
		r = fault("rdma-move", err);
	if (r == 0 && conf->has_ipam) {
		r = journal_step(a, HPN_PHASE_IPAM, err);
		if (r == 0)
			r = hpn_ipam_add(conf, env, &ipam, err);
		a->ipam_added = r == 0;
		if (r == 0)
			r = fault("ipam", err);
		if (r == 0)
			r = configure_ip(a, &pl, ipam, err);
	}
	/* Prove it from the pod's side, after the address the GID carries is set. */
	if (r == 0 && plan->found)
		r = hpn_rdma_verify(a->ns.pod_fd, plan->dev.name, plan->dev.port, pl.name, -1,
				    GID_TIMEOUT_MS, &bind, err);
	if (r == 0)
		r = fault("rdma", err);
	if (r < 0)
		goto out;

	own = hpn_result_new();
	if (!own) {
		r = -ENOMEM;
		goto out;
	}
	hpn_mac_format(pl.mac, mac);
	ifc = (struct hpn_iface){ .name = pl.name,
				  .mac = mac,
				  .mtu = (int)pl.mtu,
				  .sandbox = (char *)env->netns,
				  .pci_id = a->j.pci[0] ? a->j.pci : NULL };
	r = hpn_result_add_iface(own, &ifc);
	if (r >= 0) {
		rdma_info(plan, &bind, &own->rdma[0]);
		own->n_rdma = 1;
	}
	if (r >= 0 && ipam)
		r = hpn_result_append(own, ipam, 0);
	if (r < 0)
		goto out;
	/* The full result must fit before the attachment is declared done. */
	r = build_result(conf, own, ret);
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
	a->j.pod_ifindex = pl.ifindex;
	a->j.result = hpn_result_render(own, HPN_CNI_VERSION_LATEST);
	if (!a->j.result) {
		r = -ENOMEM;
		goto out;
	}
	r = journal_step(a, HPN_PHASE_ATTACHED, err);
	if (r == 0)
		r = fault("done", err);
	/* Nothing can fail from here on: let the next ADD in while the neighbours hear of us. */
	if (r == 0 && ipam && ipam->n_ips) {
		hpn_store_unlock(&a->st);
		announce(a, &pl, ipam);
	}
out:
	if (r < 0) {
		hpn_result_free(*ret);
		*ret = NULL;
	}
	hpn_result_free(ipam);
	hpn_result_free(own);
	return r;
}

int hpn_add(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_result **ret,
	    struct hpn_err *err)
{
	struct attach a;
	struct hpn_link dev, clash;
	struct rdma_plan plan = { 0 };
	const char *name = pod_ifname(env, conf);
	int r;

	r = attach_open(&a, env, conf, err);
	if (r < 0)
		goto out;
	r = hpn_netns_open(env->netns, &a.ns.pod_fd, err);
	if (r < 0)
		goto out;
	r = hpn_netns_is_current(a.ns.pod_fd);
	if (r != 0) {
		/* Fail closed: acting on the host's own netns would rename its NIC. */
		r = r < 0 ? hpn_err_set(err, HPN_E_NETNS, r,
					"compare CNI_NETNS \"%s\" with ours: %s", env->netns,
					strerror(-r))
			  : hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
					"CNI_NETNS \"%s\" is the host's own network namespace",
					env->netns);
		goto out;
	}
	/* A journal left by an ADD that never finished (crash, kill): undo it first. */
	if (a.have_journal) {
		hpn_warn("found state of an earlier ADD for %s; undoing it first", a.key);
		r = undo(&a.ns, env, conf, &a.j, a.j.phase >= HPN_PHASE_IPAM, err);
		if (r < 0) {
			hpn_err_prefix(err, "undo the unfinished earlier ADD of %s", a.key);
			goto out;
		}
		hpn_journal_free(&a.j);
		r = hpn_journal_remove(&a.st, a.key, err);
		if (r < 0)
			goto out;
		a.have_journal = false;
	}
	r = open_pod_socket(&a.ns, env->netns, err);
	if (r < 0)
		goto out;
	r = hpn_link_get(a.ns.pod, 0, name, &clash, err);
	if (r == 0) {
		r = hpn_err_set(err, HPN_E_IFNAME_EXISTS, EEXIST,
				"interface \"%s\" already exists in netns \"%s\"", name,
				env->netns);
		goto out;
	}
	if (r != -ENODEV)
		goto out;
	r = select_device(a.ns.host, conf, &dev, &plan.dev, err);
	if (r < 0)
		goto out;
	plan.found = conf->selector == HPN_SEL_RDMA;
	r = plan_rdma(&a, conf, &dev, &plan, err);
	if (r < 0)
		goto out;

	a.j.container_id = strdup(env->container_id);
	a.j.netns = strdup(env->netns);
	if (!a.j.container_id || !a.j.netns) {
		r = -ENOMEM;
		goto out;
	}
	snprintf(a.j.cni_ifname, sizeof(a.j.cni_ifname), "%s", env->ifname);
	snprintf(a.j.pod_ifname, sizeof(a.j.pod_ifname), "%s", name);
	a.j.host = dev;
	if (hpn_sysfs_netdev_pci(conf->sysfs_root, dev.name, a.j.pci) < 0)
		a.j.pci[0] = '\0';
	hpn_info("attach \"%s\"%s%s as \"%s\" in %s", dev.name, a.j.pci[0] ? " pci " : "", a.j.pci,
		 name, env->netns);

	r = add_steps(&a, env, conf, &dev, &plan, ret, err);
	if (r < 0) {
		struct hpn_err uerr = { 0 };
		/*
		 * Release the lease only if IPAM ADD succeeded, as the reference
		 * plugins do: after a failed IPAM ADD the runtime's DEL releases it.
		 */
		int ur = undo(&a.ns, env, conf, &a.j, a.ipam_added, &uerr);

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
	attach_close(&a);
	return r;
}

int hpn_del(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	struct attach a;
	int r;

	r = attach_open(&a, env, conf, err);
	if (r < 0)
		goto out;
	/* IPAM first and always: its lease must go even when nothing else is left. */
	r = undo(&a.ns, env, conf, a.have_journal ? &a.j : NULL, true, err);
	if (r == 0 && a.have_journal)
		r = hpn_journal_remove(&a.st, a.key, err);
out:
	attach_close(&a);
	return r;
}

static int check_own(struct attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		     const struct hpn_result *own, struct hpn_err *err)
{
	const struct hpn_iface *ifc = &own->ifaces[0];
	struct hpn_link l;
	char mac[HPN_MAC_STR];
	int r;

	r = hpn_link_get(a->ns.pod, 0, a->j.pod_ifname, &l, err);
	if (r == -ENODEV)
		return hpn_err_set(err, HPN_E_CHECK, ENODEV,
				   "interface \"%s\" is missing from netns \"%s\"", a->j.pod_ifname,
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
	for (size_t i = 0; i < own->n_ips; i++) {
		r = hpn_addr_find(a->ns.pod, l.ifindex, own->ips[i].address, err);
		if (r == -ENOENT)
			return hpn_err_set(err, HPN_E_CHECK, ENOENT,
					   "address %s is missing from \"%s\"", own->ips[i].address,
					   l.name);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < own->n_routes; i++) {
		const char *gw = route_gw(own, &own->routes[i]);

		r = hpn_route_find(a->ns.pod, l.ifindex, &own->routes[i], gw, err);
		if (r == -ENOENT)
			return hpn_err_set(err, HPN_E_CHECK, ENOENT,
					   "route to %s via %s on \"%s\" is missing",
					   own->routes[i].dst, gw ? gw : "link", l.name);
		if (r < 0)
			return r;
	}
	/* The RDMA device as ADD bound it: visible in the pod, port ACTIVE, same GID. */
	if (own->n_rdma && own->rdma[0].bound) {
		const struct hpn_rdma_info *ri = &own->rdma[0];
		struct hpn_rdma_bind b;

		r = hpn_rdma_verify(a->ns.pod_fd, ri->device, (uint32_t)ri->port, l.name,
				    ri->gid_index, 0, &b, err);
		if (r < 0) {
			if (err->code == HPN_E_RDMA)
				err->code = HPN_E_CHECK;
			return r;
		}
	}
	/* The runtime's copy of the result must still describe this interface. */
	if (conf->prev_result) {
		const struct hpn_result *p = conf->prev_result;
		bool listed = false;

		for (size_t i = 0; i < p->n_ifaces; i++)
			if (!strcmp(p->ifaces[i].name, l.name) && p->ifaces[i].sandbox &&
			    !strcmp(p->ifaces[i].sandbox, env->netns))
				listed = !p->ifaces[i].mac || !strcasecmp(p->ifaces[i].mac, mac);
		if (!listed)
			return hpn_err_set(err, HPN_E_CHECK, EINVAL,
					   "prevResult does not list \"%s\" (MAC %s) in %s", l.name,
					   mac, env->netns);
	}
	return 0;
}

int hpn_check(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	struct hpn_result *own = NULL;
	struct attach a;
	int r;

	if (!conf->prev_result)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "CHECK needs prevResult");
	r = attach_open(&a, env, conf, err);
	if (r < 0)
		goto out;
	if (!a.have_journal || a.j.phase != HPN_PHASE_ATTACHED || !a.j.result) {
		r = hpn_err_set(err, HPN_E_CHECK, ENOENT,
				"no completed attachment for container %s, interface %s",
				env->container_id, env->ifname);
		goto out;
	}
	if (conf->has_ipam) {
		r = hpn_ipam_run(conf, env, "CHECK", err);
		if (r < 0)
			goto out;
	}
	r = hpn_netns_open(env->netns, &a.ns.pod_fd, err);
	if (r >= 0)
		r = open_pod_socket(&a.ns, env->netns, err);
	if (r >= 0)
		r = hpn_result_parse(a.j.result, strlen(a.j.result), &own, err);
	if (r >= 0 && own->n_ifaces != 1)
		r = hpn_err_set(err, HPN_E_IO, EINVAL, "state %s is corrupt", a.key);
	if (r >= 0)
		r = check_own(&a, env, conf, own, err);
out:
	hpn_result_free(own);
	attach_close(&a);
	return r;
}

/* With rdmaRequired the node needs an RDMA subsystem, in the rdmaNetns mode if one is set. */
static int status_rdma(const struct hpn_conf *conf, struct hpn_err *err)
{
	enum hpn_rdma_netns mode;
	struct hpn_err rerr = { 0 };
	int r;

	if (!conf->rdma_required)
		return 0;
	r = hpn_rdma_netns_mode(&mode, &rerr);
	if (r == -EPROTONOSUPPORT)
		return hpn_err_set(err, HPN_E_NOT_AVAILABLE, -r,
				   "the kernel has no RDMA subsystem (no RDMA netlink) and "
				   "rdmaRequired is true");
	if (r < 0)
		return hpn_err_set(err, HPN_E_NOT_AVAILABLE, -r, "%s", rerr.msg);
	if (conf->rdma_netns != HPN_RDMA_NETNS_AUTO && conf->rdma_netns != mode)
		return hpn_err_set(err, HPN_E_NOT_AVAILABLE, EINVAL,
				   "the node's RDMA netns mode is %s, but rdmaNetns requires %s",
				   hpn_rdma_netns_name(mode),
				   hpn_rdma_netns_name(conf->rdma_netns));
	return 0;
}

int hpn_status(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err serr = { 0 };
	struct nl_sock *sk = NULL;
	char path[4096];
	int r;

	/* Spec 1.1.0: any reason not to accept ADD now is code 50, with the reason. */
	r = hpn_store_open(conf->state_dir, conf->name, &st, &serr);
	if (r == 0 && faccessat(st.net_fd, ".", W_OK, AT_EACCESS) < 0)
		r = hpn_err_set(&serr, HPN_E_IO, errno, "stateDir %s is not writable",
				conf->state_dir);
	hpn_store_close(&st);
	if (r < 0)
		return hpn_err_set(err, HPN_E_NOT_AVAILABLE, r, "%s", serr.msg);
	r = hpn_nl_open(NETLINK_ROUTE, &sk);
	hpn_nl_close(sk);
	if (r < 0)
		return hpn_err_set(err, HPN_E_NOT_AVAILABLE, r, "netlink: %s", strerror(-r));
	if (conf->has_ipam && hpn_ipam_find(conf->ipam_type, env->path, path) < 0)
		return hpn_err_set(err, HPN_E_NOT_AVAILABLE, ENOENT,
				   "ipam plugin \"%s\" not found in CNI_PATH", conf->ipam_type);
	return status_rdma(conf, err);
}

static bool still_valid(const struct hpn_conf *conf, const struct hpn_journal *j)
{
	for (size_t i = 0; i < conf->n_valid; i++)
		if (!strcmp(conf->valid[i].container_id, j->container_id) &&
		    !strcmp(conf->valid[i].ifname, j->cni_ifname))
			return true;
	return false;
}

int hpn_gc(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct nsctx ns = { .host_fd = -1, .pod_fd = -1 };
	struct dirent *de;
	DIR *d = NULL;
	int r, failed = 0, dfd;

	r = session_open(&st, &ns, conf, err);
	if (r < 0)
		goto out;
	dfd = fcntl(st.net_fd, F_DUPFD_CLOEXEC, 0);
	d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		r = hpn_err_set(err, HPN_E_IO, errno, "list state of %s: %s", conf->name,
				strerror(errno));
		goto out;
	}
	for (;;) {
		struct hpn_journal j = { 0 };
		struct hpn_err jerr = { 0 };
		struct hpn_env genv;

		errno = 0;
		de = readdir(d);
		if (!de) {
			/* An unreadable directory must not look like "nothing stale". */
			if (errno && !failed++)
				hpn_err_set(err, HPN_E_IO, errno, "list state of %s: %s",
					    conf->name, strerror(errno));
			break;
		}

		if (!strncmp(de->d_name, ".tmp.", 5)) {
			/* A temp file is only ever live under the lock we hold. */
			unlinkat(st.net_fd, de->d_name, 0);
			continue;
		}
		if (de->d_name[0] == '.' || de->d_type == DT_DIR)
			continue;
		if (hpn_journal_read(&st, de->d_name, &j, &jerr) < 0) {
			/* Keep going with the others, but do not report success. */
			hpn_warn("gc: %s", jerr.msg);
			if (!failed++)
				*err = jerr;
			continue;
		}
		if (still_valid(conf, &j)) {
			hpn_journal_free(&j);
			continue;
		}
		hpn_info("gc: undoing stale attachment %s", de->d_name);
		genv = *env;
		genv.container_id = j.container_id;
		genv.ifname = j.cni_ifname;
		genv.netns = j.netns;
		r = undo(&ns, &genv, conf, &j, true, &jerr);
		if (r == 0)
			r = hpn_journal_remove(&st, de->d_name, &jerr);
		if (r < 0) {
			hpn_warn("gc: %s: %s", de->d_name, jerr.msg);
			if (!failed++)
				*err = jerr;
		}
		hpn_journal_free(&j);
	}
	r = failed ? -EIO : 0;
out:
	if (d)
		closedir(d);
	nsctx_close(&ns);
	hpn_store_close(&st);
	return r;
}
