// SPDX-License-Identifier: Apache-2.0
#include "attach.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <netlink/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "addr.h"
#include "doctor.h"
#include "ipam.h"
#include "link.h"
#include "log.h"
#include "nccl.h"
#include "netns.h"
#include "nl.h"
#include "pool.h"
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
static int open_pod_socket(struct nsctx *ns, const char *netns, struct hpn_err *err)
{
	return hpn_nl_open_in(ns->pod_fd, ns->host_fd, netns, &ns->pod, err);
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

/* The NIC of the attachment ADD is working on, for fault(). */
static size_t fault_nic;

/*
 * Test-only fault injection: HPN_FAIL_AT=<step> fails ADD right after <step>
 * of NIC HPN_FAIL_NIC (default 0, the first; steps after IPAM are per attachment).
 */
static int fault(const char *step, struct hpn_err *err)
{
#ifdef HPN_TEST_HOOKS
	const char *at = getenv("HPN_FAIL_AT"), *nic = getenv("HPN_FAIL_NIC");

	if (at && !strcmp(at, step) && fault_nic == (nic ? strtoul(nic, NULL, 10) : 0))
		return hpn_err_set(err, HPN_E_INTERNAL, EIO, "injected failure after step %s",
				   step);
#endif
	return 0;
}

/* The device in the socket's netns: by name (if given) or ifindex, confirmed by MAC. */
static int find_device(struct nl_sock *sk, const char *name, int ifindex,
		       const struct hpn_link *orig, struct hpn_link *ret, struct hpn_err *err)
{
	struct hpn_link l;
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
 * Exclusive mode: brings the RDMA device back from the pod netns. A dead netns
 * already gave it back to the initial netns, so absent from the pod is fine.
 */
static int restore_rdma_netns(struct nsctx *ns, int pod_fd, const struct hpn_journal *j,
			      const struct hpn_journal_nic *n, struct hpn_err *err)
{
	int r = hpn_netns_enter(pod_fd), present = 0;

	if (r < 0)
		return hpn_err_set(err, HPN_E_NETNS, r, "enter netns \"%s\": %s", j->netns,
				   strerror(-r));
	present = hpn_rdma_present(n->rdma.name, err);
	if (present == 1)
		r = hpn_rdma_set_netns(n->rdma.name, ns->host_fd, err);
	if (hpn_netns_enter(ns->host_fd) < 0)
		return hpn_err_set(err, HPN_E_NETNS, errno, "return to the host netns: %s",
				   strerror(errno));
	return present < 0 ? present : r;
}

/* A software RDMA device (rxe) dies when its netdev leaves the host: make it again. */
static void restore_soft_rdma(const struct hpn_journal_nic *n)
{
	struct hpn_err e = { 0 };
	int r = hpn_rdma_present(n->rdma.name, &e);

	if (r == 0)
		r = hpn_rdma_link_add(n->rdma.name, n->rdma.soft_type, n->rdma.netdev, &e);
	if (r < 0)
		hpn_warn("RDMA device \"%s\" over \"%s\": %s", n->rdma.name, n->rdma.netdev, e.msg);
	else
		hpn_debug("RDMA device \"%s\" is on the host", n->rdma.name);
}

/*
 * Opens the attachment's pod netns for a restore: *pod_fd stays -1 when it is
 * gone (no file, or no longer a netns mount), which is not an error.
 */
static int open_pod_for_restore(const struct hpn_journal *j, int *pod_fd, struct hpn_err *err)
{
	struct hpn_err nerr = { 0 };
	int r;

	*pod_fd = -1;
	if (!j->netns)
		return 0;
	r = hpn_netns_open(j->netns, pod_fd, &nerr);
	if (r == -ENOENT || r == -EINVAL) {
		hpn_debug("netns %s: %s", j->netns, nerr.msg);
		*pod_fd = -1;
		return 0;
	}
	if (r < 0) {
		*err = nerr;
		return r;
	}
	r = hpn_netns_is_current(*pod_fd);
	if (r != 0) {
		close(*pod_fd);
		*pod_fd = -1;
	}
	if (r < 0)
		return hpn_err_set(err, HPN_E_NETNS, r, "compare netns \"%s\" with ours: %s",
				   j->netns, strerror(-r));
	return 0;
}

/*
 * A child ADD created in the pod: delete it there. Found by index or name and
 * confirmed by kind (and for macvlan the MAC ADD chose), so a device the pod
 * made itself is never deleted. A dead netns took the child with it.
 */
static int restore_child(struct nsctx *ns, const struct hpn_journal *j,
			 const struct hpn_journal_nic *n, struct hpn_err *err)
{
	_cleanup_nl_sock_ struct nl_sock *pod = NULL;
	_cleanup_close_ int pod_fd = -1;
	struct hpn_link l;
	int r;

	r = open_pod_for_restore(j, &pod_fd, err);
	if (r < 0 || pod_fd < 0)
		return r;
	r = hpn_nl_open_in(pod_fd, ns->host_fd, j->netns, &pod, err);
	if (r < 0)
		return r;
	for (int pass = 0; pass < 2; pass++) {
		r = pass ? hpn_link_get(pod, 0, n->pod_ifname, &l, err)
			 : (n->pod_ifindex > 0 ? hpn_link_get(pod, n->pod_ifindex, NULL, &l, err)
					       : -ENODEV);
		if (r == -ENODEV)
			continue;
		if (r < 0)
			return r;
		if (strcmp(l.kind, n->child_kind) ||
		    (n->has_child_mac && memcmp(l.mac, n->child_mac, HPN_MAC_LEN)))
			continue;
		hpn_debug("delete %s \"%s\" in %s", l.kind, l.name, j->netns);
		return hpn_link_del(pod, &l, err);
	}
	return 0;
}

/*
 * Puts the device back as the journal recorded it: out of the pod netns if it
 * is still there, then name, MTU, altnames and admin state in the host. Finds
 * it wherever it is (a dead netns hands a physical NIC back to the host under
 * its pod-side name); a device that is gone (a veth dies with its netns) is
 * nothing to restore. Safe to run any number of times.
 */
static int restore_netdev(struct nsctx *ns, const struct hpn_journal *j,
			  const struct hpn_journal_nic *n, const char *sysfs_root,
			  struct hpn_err *err)
{
	const struct hpn_link *orig = &n->host;
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
			if (n->rdma.moved) {
				r = restore_rdma_netns(ns, pod_fd, j, n, err);
				if (r < 0) {
					close(pod_fd);
					return r;
				}
			}
			r = hpn_nl_open_in(pod_fd, ns->host_fd, j->netns, &pod, err);
			if (r < 0) {
				close(pod_fd);
				return r;
			}
			if (find_device(pod, n->pod_ifname, n->pod_ifindex, orig, &l, err) == 0) {
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
	if (r == -ENODEV && n->pci[0]) {
		char names[4][16];
		size_t nn = 0;

		/* PCI identity holds even if the MAC was changed in the pod. */
		if (hpn_sysfs_pci_netdevs(sysfs_root, n->pci, names, 4, &nn) == 0 && nn == 1)
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
			r = hpn_link_set(ns->host, &l, NULL, 0, 0, false, err);
			if (r < 0)
				return r;
			l.up = false;
		}
		r = hpn_link_set(ns->host, &l, strcmp(l.name, orig->name) ? orig->name : NULL,
				 orig->mtu != l.mtu ? orig->mtu : 0, -1, false, err);
		if (r == -EEXIST) {
			hpn_warn("cannot rename \"%s\" back to \"%s\": name in use", l.name,
				 orig->name);
			memset(err, 0, sizeof(*err));
			r = hpn_link_set(ns->host, &l, NULL, orig->mtu != l.mtu ? orig->mtu : 0, -1,
					 false, err);
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
		return hpn_link_set(ns->host, &l, NULL, 0, orig->up, false, err);
	return 0;
}

static int restore_nic(struct nsctx *ns, const struct hpn_journal *j,
		       const struct hpn_journal_nic *n, const char *sysfs_root, struct hpn_err *err)
{
	int r;

	if (n->kind == HPN_NIC_CHILD)
		return restore_child(ns, j, n, err);
	r = restore_netdev(ns, j, n, sysfs_root, err);
	/* Only the moved NIC's own soft device can have died of the move. */
	if (r == 0 && n->rdma.soft_type[0] && !strcmp(n->rdma.netdev, n->host.name))
		restore_soft_rdma(n);
	return r;
}

static void hints_owner(const struct hpn_conf *conf, const char *container_id,
			const char *cni_ifname, struct hpn_nccl_owner *o)
{
	*o = (struct hpn_nccl_owner){ .container_id = container_id,
				      .network = conf->name,
				      .ifname = cni_ifname };
}

/* The hints file, if it is still this attachment's (a recreated pod may own it now). */
static int remove_hints(const struct hpn_conf *conf, const struct hpn_journal *j,
			struct hpn_err *err)
{
	_cleanup_free_ char *owner = NULL;
	struct hpn_nccl_owner o;

	if (!j->hints_key[0])
		return 0;
	hints_owner(conf, j->container_id, j->cni_ifname, &o);
	owner = hpn_nccl_owner_line(&o);
	if (!owner)
		return -ENOMEM;
	return hpn_nccl_remove(j->hints_dir, j->hints_key, owner, err);
}

/* The CNI_IFNAME IPAM sees for NIC i: the attachment's own for the first, its pod name after. */
static const char *ipam_ifname(const struct hpn_journal *j, const char *cni_ifname, size_t i)
{
	return i == 0 || !j ? cni_ifname : j->nics[i].pod_ifname;
}

/*
 * The hints file (if still this attachment's), device restore of every NIC
 * (last first), then IPAM release when ADD got that far (or always, for DEL):
 * one release per NIC. Goes on past a failure so that as much as possible is
 * back; returns the first error, a device not back before the others.
 */
static int undo(struct nsctx *ns, const struct hpn_env *env, const struct hpn_conf *conf,
		const struct hpn_journal *j, bool ipam, struct hpn_err *err)
{
	size_t n = j ? j->n_nics : 0;
	struct hpn_err herr = { 0 };
	bool dev_failed = false;
	int r = 0, rh = 0;

	if (j)
		rh = remove_hints(conf, j, &herr);
	for (size_t i = 0; ipam && conf->has_ipam && i < (n ? n : 1); i++) {
		struct hpn_env ienv = *env;
		struct hpn_err ierr = { 0 };
		int ri;

		ienv.ifname = ipam_ifname(j, env->ifname, i);
		ri = hpn_ipam_run(conf, &ienv, "DEL", &ierr);
		if (ri < 0 && r == 0) {
			*err = ierr;
			r = ri;
		}
	}
	for (size_t i = n; i-- > 0;) {
		struct hpn_err derr = { 0 };
		int rd = restore_nic(ns, j, &j->nics[i], conf->sysfs_root, &derr);

		if (rd < 0) {
			hpn_warn("restore \"%s\": %s", j->nics[i].pod_ifname, derr.msg);
			/* A device not back matters more than a lease: report it. */
			if (!dev_failed) {
				*err = derr;
				r = rd;
			}
			dev_failed = true;
		}
	}
	if (r == 0 && rh < 0) {
		*err = herr;
		return rh;
	}
	return r;
}

/*
 * Undo a journalled attachment and remove its journal without the store lock
 * across the slow steps (IPAM, moves, deletes): the journal is held first,
 * so other runs see it in flight and leave it and its NICs alone; the lock
 * goes; the undo runs; and the journal is removed under the lock again, so
 * that no reader sees it unheld after the NICs are back. Called, and returns,
 * with the store locked (or with code 11 if the lock did not come back). On
 * an undo error the journal stays, no longer held, for a later DEL or GC.
 */
static int release(struct hpn_store *st, struct nsctx *ns, const struct hpn_env *env,
		   const struct hpn_conf *conf, const char *key, const struct hpn_journal *j,
		   bool ipam, struct hpn_err *err)
{
	_cleanup_close_ int fd = -1;
	struct hpn_err lerr = { 0 };
	int r = hpn_journal_hold(st, key, &fd, err), rl;

	if (r < 0)
		return r;
	hpn_store_unlock(st);
	r = undo(ns, env, conf, j, ipam, err);
	rl = hpn_store_lock(st, LOCK_TIMEOUT_MS, &lerr);
	if (r == 0)
		r = hpn_journal_remove(st, key, err);
	if (r == 0 && rl < 0) {
		*err = lerr;
		r = rl;
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
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	a->have_journal = true;
	/* Another run of this very attachment still going (the runtime retried early). */
	if (a->j.releasing)
		return hpn_err_set(err, HPN_E_TRY_AGAIN, EBUSY,
				   "a DEL or GC of %s is still running", a->key);
	if (hpn_journal_busy(&a->j))
		return hpn_err_set(err, HPN_E_TRY_AGAIN, EBUSY,
				   "an ADD of %s (pid %d) is still running", a->key,
				   a->j.owner_pid);
	return 0;
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
	case HPN_SEL_MATCH: /* select_pool */
		break;
	}
	return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "no device selected");
}

/* What ADD decided about RDMA before changing anything. */
struct rdma_plan {
	bool found;
	struct hpn_rdma_dev dev;
	enum hpn_rdma_netns mode; /* the node's */
	char reason[256];	  /* why nothing is bound, when !found */
};

/* One NIC ADD attaches: the host device (moved, or the parent of a child) and its RDMA. */
struct nic_plan {
	struct hpn_link dev;
	struct rdma_plan rdma;
};

/*
 * match: count NICs from the pool (hpn_pool_select). Called with the store
 * locked, so the claim is journalled before another ADD can look.
 */
static int select_pool(struct attach *a, const struct hpn_conf *conf, const struct hpn_holders *h,
		       struct nic_plan *plans, struct hpn_err *err)
{
	struct hpn_pool_pick picks[HPN_MAX_NICS];
	int r = hpn_pool_select(a->ns.host, conf, h, picks, err);

	for (size_t i = 0; r == 0 && i < conf->count; i++) {
		plans[i].dev = picks[i].dev;
		plans[i].rdma.found = picks[i].has_rdma;
		if (picks[i].has_rdma)
			plans[i].rdma.dev = picks[i].rdma;
	}
	return r;
}

/* A single selector's device: refused while another attachment holds it. */
static int check_unclaimed(const struct hpn_holders *h, const struct hpn_conf *conf,
			   const struct hpn_link *dev, struct hpn_err *err)
{
	/* Shared modes share a parent; only a moved NIC is taken from them. */
	const struct hpn_holder *x = hpn_held_by(h, dev, conf->mode != HPN_MODE_MOVE);

	if (!x)
		return 0;
	if (x->live)
		return hpn_err_set(
			err, HPN_E_TRY_AGAIN, EBUSY,
			"\"%s\" is being attached or released by another run (%s); try again",
			dev->name, x->key);
	return hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, EBUSY, "\"%s\" is held by attachment %s%s",
			   dev->name, x->key,
			   x->child ? " (a parent of its child)" : ": DEL or GC it first");
}

/* The pod-side name of NIC i: the attachment's, then the next numbers (hpn0, hpn1...). */
static int nic_name(const char *base, size_t i, char out[HPN_IFNAMSIZ])
{
	size_t len = strlen(base), digits = 0;
	unsigned long first;

	if (i == 0)
		return hpn_snprintf(out, HPN_IFNAMSIZ, "%s", base);
	while (digits < len && digits < 6 && base[len - 1 - digits] >= '0' &&
	       base[len - 1 - digits] <= '9')
		digits++;
	first = digits ? strtoul(base + len - digits, NULL, 10) : 0;
	return hpn_snprintf(out, HPN_IFNAMSIZ, "%.*s%lu", (int)(len - digits), base, first + i);
}

static const char *pod_ifname(const struct hpn_env *env, const struct hpn_conf *conf)
{
	return conf->if_name ? conf->if_name : env->ifname;
}

/*
 * Addresses of the IPAM result on the pod's interface, still down; then up,
 * at which the kernel sends a gratuitous ARP for each IPv4 address (the
 * arp_notify attach_nic set): neighbours may cache them for an earlier
 * owner. (An IPAM plugin that brought the link up itself, as dhcp does, gets
 * no announcement.) Then the routes, which need the link up.
 */
static int configure_ip(struct attach *a, struct hpn_link *l, const struct hpn_result *ipam,
			bool routes, struct hpn_err *err)
{
	int r;

	for (size_t i = 0; i < ipam->n_ips; i++) {
		r = hpn_addr_add(a->ns.pod, l->ifindex, l->name, ipam->ips[i].address, err);
		if (r < 0)
			return r;
	}
	r = fault("addr", err);
	if (r == 0)
		r = hpn_link_set(a->ns.pod, l, NULL, 0, 1, false, err);
	if (r == 0)
		r = fault("up", err);
	for (size_t i = 0; r == 0 && routes && i < ipam->n_routes; i++)
		r = hpn_route_add(a->ns.pod, l->ifindex, l->name, &ipam->routes[i],
				  route_gw(ipam, &ipam->routes[i]), err);
	if (r == 0)
		r = fault("route", err);
	return r;
}

/*
 * Neighbours may cache the pod's IPv6 addresses for an earlier owner: tell
 * them (the kernel announced the IPv4 ones when the link came up). Best
 * effort, after ADD is complete.
 */
static void announce(struct attach *a, const struct hpn_link *l, const struct hpn_result *ipam)
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

static int journal_step(struct attach *a, enum hpn_phase phase, struct hpn_err *err)
{
	a->j.phase = phase;
	return hpn_journal_write(&a->st, a->key, &a->j, err);
}

static bool is_stacked(const struct hpn_link *l)
{
	return !strcmp(l->kind, "macvlan") || !strcmp(l->kind, "ipvlan") ||
	       !strcmp(l->kind, "vlan") || !strcmp(l->kind, "macvtap");
}

/*
 * The RDMA device behind the selected netdev, and whether the node's netns
 * mode is what the config asks for and the attach mode can work in. Nothing
 * is changed here; the facts go to the journal's NIC n.
 */
static int plan_rdma(struct attach *a, const struct hpn_conf *conf, const struct hpn_link *dev,
		     struct rdma_plan *p, struct hpn_journal_nic *n, struct hpn_err *err)
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
	if (p->mode == HPN_RDMA_NETNS_EXCLUSIVE && conf->mode != HPN_MODE_MOVE)
		return hpn_err_set(err, HPN_E_RDMA, EINVAL,
				   "mode %s needs the shared RDMA netns mode, the node's is "
				   "exclusive: a child of \"%s\" cannot carry the whole RDMA "
				   "device \"%s\" into one pod (rdma system set netns shared, or "
				   "mode move)",
				   conf->mode == HPN_MODE_MACVLAN ? "macvlan" : "ipvlan", dev->name,
				   p->dev.name);
	if (p->mode == HPN_RDMA_NETNS_EXCLUSIVE && is_stacked(dev))
		return hpn_err_set(err, HPN_E_RDMA, EINVAL,
				   "\"%s\" is a %s of \"%s\": in exclusive RDMA netns mode "
				   "moving it would take the parent's whole RDMA device \"%s\" "
				   "into this pod (select the parent, or use shared mode with "
				   "mode macvlan)",
				   dev->name, dev->kind, p->dev.netdev, p->dev.name);
	hpn_info("RDMA device \"%s\" port %u (%s%s) serves \"%s\"; netns mode %s", p->dev.name,
		 p->dev.port, hpn_rdma_kind_name(p->dev.kind), p->dev.vf ? " VF" : "",
		 p->dev.netdev, hpn_rdma_netns_name(p->mode));
	snprintf(n->rdma.name, sizeof(n->rdma.name), "%s", p->dev.name);
	snprintf(n->rdma.netdev, sizeof(n->rdma.netdev), "%s", p->dev.netdev);
	/* A child leaves its parent on the host: the soft device cannot die of it. */
	if (p->dev.soft && p->dev.kind == HPN_RDMA_RXE && conf->mode == HPN_MODE_MOVE)
		snprintf(n->rdma.soft_type, sizeof(n->rdma.soft_type), "rxe");
	return 0;
}

/* Exclusive mode: the RDMA device follows the netdev. Shared: it must still exist. */
static int move_rdma(struct attach *a, struct hpn_journal_nic *n, const struct rdma_plan *p,
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

/*
 * Renders the NCCL settings for what own bound into own's "nccl" and the file
 * text into *ret, for the file the claim journalled (a->j.hints_*).
 */
static int hints_prepare(struct attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
			 struct hpn_result *own, char **ret, struct hpn_err *err)
{
	const struct hpn_nccl_profile *p = hpn_nccl_profile(&conf->nccl, conf->gpu_model);
	struct hpn_nccl_owner o;
	int r;

	r = hpn_nccl_render(&conf->nccl, p, own, &own->nccl, err);
	if (r < 0)
		return r;
	if (asprintf(&own->nccl_file, "%s/%s/%s", a->j.hints_dir, a->j.hints_key, HPN_NCCL_FILE) <
	    0) {
		own->nccl_file = NULL;
		return -ENOMEM;
	}
	hints_owner(conf, env->container_id, env->ifname, &o);
	o.pod_namespace = hpn_env_arg(env, "K8S_POD_NAMESPACE");
	o.pod_name = hpn_env_arg(env, "K8S_POD_NAME");
	o.pod_uid = hpn_env_arg(env, "K8S_POD_UID");
	*ret = hpn_nccl_format(&own->nccl, &o, own);
	return *ret ? 0 : -ENOMEM;
}

/* What the pod itself decides before anything changes: hints key, GPU count. */
static int pod_checks(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	const char *uid = hpn_env_arg(env, "K8S_POD_UID");

	if (!conf->nccl.enabled)
		return 0;
	if (uid && !hpn_nccl_valid_key(uid))
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
				   "CNI_ARGS K8S_POD_UID \"%.64s\" cannot name the hints directory "
				   "([A-Za-z0-9][A-Za-z0-9_.-]*, at most %d bytes)",
				   uid, HPN_NCCL_KEY_MAX - 1);
	return hpn_nccl_check_gpus(hpn_nccl_profile(&conf->nccl, conf->gpu_model), conf->gpu_count,
				   err);
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
	r = build_result(conf, none, ret);
	hpn_result_free(none);
	return r;
}

/* DEL and CHECK of a pod podSelector does not pick, which ADD never attached. */
static bool untouched_pod(const struct hpn_env *env, const struct hpn_conf *conf)
{
	char key[HPN_KEY_MAX];

	return !conf->pod_selected && hpn_store_key(env->container_id, env->ifname, key) >= 0 &&
	       !hpn_journal_may_exist(conf->state_dir, conf->name, key);
}

/* NIC i into the pod: moved (altnames held back, move+rename) or created as a child; up. */
static int attach_nic(struct attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		      size_t i, const struct nic_plan *plan, struct hpn_link *pl,
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
		struct hpn_child c = { .kind = n->child_kind,
				       .mode = conf->child_mode,
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
		r = moved ? find_device(a->ns.pod, n->pod_ifname, 0, dev, pl, err)
			  : hpn_link_get(a->ns.pod, 0, n->pod_ifname, pl, err);
		if (r == -ENODEV)
			r = hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
					"\"%s\" vanished after the %s into \"%s\"", n->pod_ifname,
					moved ? "move" : "creation", env->netns);
	}
	if (r < 0)
		return r;
	/*
	 * One request: the MTU and arp_notify, and up unless IPAM comes (then
	 * configure_ip brings it up once the addresses are on, and the kernel
	 * announces them). The kernel applies IFLA_MTU before the flags.
	 */
	r = hpn_link_set(a->ns.pod, pl, NULL,
			 conf->mtu && pl->mtu != (unsigned int)conf->mtu ? (unsigned int)conf->mtu
									 : 0,
			 conf->has_ipam ? -1 : 1, true, err);
	if (r == 0 && conf->mtu)
		pl->mtu = (unsigned int)conf->mtu;
	if (r == 0)
		r = fault("mtu", err);
	if (r == 0 && !conf->has_ipam)
		r = fault("up", err);
	if (r == 0 && plan->rdma.found)
		r = move_rdma(a, n, &plan->rdma, err);
	if (r == 0)
		r = fault("rdma-move", err);
	return r;
}

/* This attachment's own result: every NIC with its RDMA entry and its IPAM addresses. */
static int own_result(struct attach *a, const struct hpn_env *env, const struct nic_plan *plans,
		      const struct hpn_link *pl, const struct hpn_rdma_bind *bind,
		      struct hpn_result *const *ipam, struct hpn_result **ret)
{
	struct hpn_result *own = hpn_result_new();
	int r = own ? 0 : -ENOMEM;

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
			rdma_info(&plans[i].rdma, &bind[i], &own->rdma[own->n_rdma]);
			own->rdma[own->n_rdma++].interface = (int)i;
		}
	}
	for (size_t i = 0; r >= 0 && i < a->j.n_nics; i++) {
		size_t n_routes;

		if (!ipam[i])
			continue;
		/* Routes go on the first NIC only (installed there alone; see configure_ip). */
		n_routes = ipam[i]->n_routes;
		if (i > 0)
			ipam[i]->n_routes = 0;
		r = hpn_result_append(own, ipam[i], (int)i);
		ipam[i]->n_routes = n_routes;
	}
	if (r < 0) {
		hpn_result_free(own);
		return r;
	}
	*ret = own;
	return 0;
}

/* The steps of ADD after the claim; on error the caller undoes from the journal. */
static int add_steps(struct attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		     const struct nic_plan *plans, struct hpn_result **ret, struct hpn_err *err)
{
	struct hpn_rdma_bind bind[HPN_MAX_NICS];
	struct hpn_result *ipam[HPN_MAX_NICS] = { 0 }, *own = NULL;
	struct hpn_link pl[HPN_MAX_NICS];
	size_t n = a->j.n_nics;
	char *hints = NULL;
	int r;

	memset(bind, 0, sizeof(bind));
	memset(pl, 0, sizeof(pl));
	fault_nic = 0;
	r = fault("journal", err);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = attach_nic(a, env, conf, i, &plans[i], &pl[i], err);
	if (r == 0 && conf->has_ipam) {
		r = journal_step(a, HPN_PHASE_IPAM, err);
		for (size_t i = 0; r == 0 && i < n; i++) {
			struct hpn_env ienv = *env;

			/* One lease per NIC, keyed like its DEL (see ipam_ifname). */
			fault_nic = i;
			ienv.ifname = ipam_ifname(&a->j, env->ifname, i);
			r = hpn_ipam_add(conf, &ienv, &ipam[i], err);
			if (r == 0) {
				a->ipam_added = true;
				r = fault("ipam", err);
			}
			if (r == 0)
				r = configure_ip(a, &pl[i], ipam[i], i == 0, err);
		}
	}
	/* Prove it from the pod's side, after the address the GID carries is set. */
	for (size_t i = 0; r == 0 && i < n; i++) {
		fault_nic = i;
		if (plans[i].rdma.found)
			r = hpn_rdma_verify(a->ns.pod_fd, plans[i].rdma.dev.name,
					    plans[i].rdma.dev.port, pl[i].name, -1, GID_TIMEOUT_MS,
					    &bind[i], err);
		if (r == 0)
			r = fault("rdma", err);
	}
	fault_nic = 0;
	if (r < 0)
		goto out;

	r = own_result(a, env, plans, pl, bind, ipam, &own);
	if (r >= 0 && conf->nccl.enabled)
		r = hints_prepare(a, env, conf, own, &hints, err);
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
	/* Journalled with the claim: an undo removes the file only if it is still ours. */
	if (hints) {
		r = fault("nccl", err);
		if (r == 0)
			r = hpn_nccl_write(a->j.hints_dir, a->j.hints_key, hints, err);
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

/* A MAC for a macvlan child, chosen before it exists so the journal can name it. */
static int child_mac(uint8_t mac[HPN_MAC_LEN])
{
	if (getrandom(mac, HPN_MAC_LEN, 0) != HPN_MAC_LEN)
		return -errno;
	mac[0] = (uint8_t)((mac[0] & 0xfe) | 0x02); /* unicast, locally administered */
	return 0;
}

/*
 * Selection, under the store lock: the device(s), each one's pod-side name
 * and RDMA plan, all written to the journal as this attachment's claim.
 */
static int claim(struct attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		 struct nic_plan *plans, struct hpn_err *err)
{
	struct hpn_holders h = { 0 };
	size_t n = conf->selector == HPN_SEL_MATCH ? conf->count : 1;
	const char *base = pod_ifname(env, conf);
	struct hpn_link clash;
	int r;

	/* Nothing is selected for a pod that already has the name. */
	r = hpn_link_get(a->ns.pod, 0, base, &clash, err);
	if (r == 0)
		return hpn_err_set(err, HPN_E_IFNAME_EXISTS, EEXIST,
				   "interface \"%s\" already exists in netns \"%s\"", base,
				   env->netns);
	if (r != -ENODEV)
		return r;
	r = hpn_holders_load(&a->st, a->key, &h, err);
	if (r < 0)
		goto out;
	if (conf->selector == HPN_SEL_MATCH) {
		r = select_pool(a, conf, &h, plans, err);
	} else {
		r = select_device(a->ns.host, conf, &plans[0].dev, &plans[0].rdma.dev, err);
		plans[0].rdma.found = r == 0 && conf->selector == HPN_SEL_RDMA;
		if (r == 0)
			r = check_unclaimed(&h, conf, &plans[0].dev, err);
	}
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct hpn_journal_nic *nic = &a->j.nics[i];

		if (nic_name(base, i, nic->pod_ifname) < 0) {
			r = hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
					"the name of NIC %zu after \"%s\" is over 15 bytes", i + 1,
					base);
			break;
		}
		if (i > 0 && !strcmp(nic->pod_ifname, env->ifname)) {
			r = hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					"NIC %zu would be named \"%s\", the CNI_IFNAME that keys "
					"the first one: set ifName",
					i + 1, nic->pod_ifname);
			break;
		}
		/* The first name was checked before selection. */
		r = i ? hpn_link_get(a->ns.pod, 0, nic->pod_ifname, &clash, err) : -ENODEV;
		if (r == 0) {
			r = hpn_err_set(err, HPN_E_IFNAME_EXISTS, EEXIST,
					"interface \"%s\" already exists in netns \"%s\"",
					nic->pod_ifname, env->netns);
			break;
		}
		if (r != -ENODEV)
			break;
		r = plan_rdma(a, conf, &plans[i].dev, &plans[i].rdma, nic, err);
		if (r < 0)
			break;
		nic->host = plans[i].dev;
		if (hpn_sysfs_netdev_pci(conf->sysfs_root, nic->host.name, nic->pci) < 0)
			nic->pci[0] = '\0';
		if (conf->mode != HPN_MODE_MOVE) {
			nic->kind = HPN_NIC_CHILD;
			snprintf(nic->child_kind, sizeof(nic->child_kind), "%s",
				 conf->mode == HPN_MODE_MACVLAN ? "macvlan" : "ipvlan");
			/* A passthru macvlan's MAC is its parent's: setting one would change the host NIC. */
			if (conf->mode == HPN_MODE_MACVLAN &&
			    conf->child_mode != MACVLAN_MODE_PASSTHRU) {
				r = child_mac(nic->child_mac);
				if (r < 0)
					break;
				nic->has_child_mac = true;
			}
		}
		a->j.n_nics = i + 1;
		hpn_info("attach \"%s\"%s%s as %s\"%s\" in %s", nic->host.name,
			 nic->pci[0] ? " pci " : "", nic->pci,
			 nic->kind == HPN_NIC_CHILD ? "a child " : "", nic->pod_ifname, env->netns);
	}
out:
	hpn_holders_free(&h);
	return r;
}

int hpn_add(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_result **ret,
	    struct hpn_err *err)
{
	struct attach a;
	struct nic_plan *plans;
	unsigned long long start = 0;
	int r;

	if (!conf->pod_selected)
		return pass_through(conf, ret);
	r = pod_checks(env, conf, err);
	if (r < 0)
		return r;
	plans = calloc(HPN_MAX_NICS, sizeof(*plans));
	r = attach_open(&a, env, conf, err);
	if (r < 0)
		goto out;
	if (!plans) {
		r = -ENOMEM;
		goto out;
	}
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
		r = release(&a.st, &a.ns, env, conf, a.key, &a.j, a.j.phase >= HPN_PHASE_IPAM, err);
		if (r < 0) {
			hpn_err_prefix(err, "undo the unfinished earlier ADD of %s", a.key);
			goto out;
		}
		hpn_journal_free(&a.j);
		a.have_journal = false;
	}
	r = open_pod_socket(&a.ns, env->netns, err);
	if (r < 0)
		goto out;
	r = claim(&a, env, conf, plans, err);
	if (r < 0)
		goto out;
	/* The GPU model's profile may need RDMA, or a driver, on every NIC: still nothing changed. */
	for (size_t i = 0; r >= 0 && conf->nccl.enabled && i < a.j.n_nics; i++)
		r = hpn_nccl_check_driver(
			hpn_nccl_profile(&conf->nccl, conf->gpu_model),
			plans[i].rdma.found ? hpn_rdma_kind_name(plans[i].rdma.dev.kind) : NULL,
			err);
	if (r < 0)
		goto out;
	a.j.container_id = strdup(env->container_id);
	a.j.netns = strdup(env->netns);
	if (!a.j.container_id || !a.j.netns) {
		r = -ENOMEM;
		goto out;
	}
	snprintf(a.j.cni_ifname, sizeof(a.j.cni_ifname), "%s", env->ifname);
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
	free(plans);
	attach_close(&a);
	return r;
}

int hpn_del(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	struct attach a;
	int r;

	if (untouched_pod(env, conf))
		return 0;
	r = attach_open(&a, env, conf, err);
	if (r < 0)
		goto out;
	/* IPAM always: its lease must go even when nothing else is left. */
	if (a.have_journal) {
		r = release(&a.st, &a.ns, env, conf, a.key, &a.j, true, err);
	} else {
		hpn_store_unlock(&a.st);
		r = undo(&a.ns, env, conf, NULL, true, err);
	}
out:
	attach_close(&a);
	return r;
}

/* Interface i of the attachment's own result, as ADD left it. */
static int check_nic(struct attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		     const struct hpn_result *own, size_t i, struct hpn_err *err)
{
	const struct hpn_iface *ifc = &own->ifaces[i];
	const char *name = a->j.nics[i].pod_ifname;
	struct hpn_link l;
	char mac[HPN_MAC_STR];
	int r;

	r = hpn_link_get(a->ns.pod, 0, name, &l, err);
	if (r == -ENODEV)
		return hpn_err_set(err, HPN_E_CHECK, ENODEV,
				   "interface \"%s\" is missing from netns \"%s\"", name,
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
	for (size_t k = 0; k < own->n_ips; k++) {
		if (own->ips[k].interface != (int)i)
			continue;
		r = hpn_addr_find(a->ns.pod, l.ifindex, own->ips[k].address, err);
		if (r == -ENOENT)
			return hpn_err_set(err, HPN_E_CHECK, ENOENT,
					   "address %s is missing from \"%s\"", own->ips[k].address,
					   l.name);
		if (r < 0)
			return r;
	}
	/* Routes are installed on the first NIC only. */
	for (size_t k = 0; i == 0 && k < own->n_routes; k++) {
		const char *gw = route_gw(own, &own->routes[k]);

		r = hpn_route_find(a->ns.pod, l.ifindex, &own->routes[k], gw, err);
		if (r == -ENOENT)
			return hpn_err_set(err, HPN_E_CHECK, ENOENT,
					   "route to %s via %s on \"%s\" is missing",
					   own->routes[k].dst, gw ? gw : "link", l.name);
		if (r < 0)
			return r;
	}
	/* The RDMA device as ADD bound it: visible in the pod, port ACTIVE, same GID. */
	for (size_t k = 0; k < own->n_rdma; k++) {
		const struct hpn_rdma_info *ri = &own->rdma[k];
		struct hpn_rdma_bind b;

		if (ri->interface != (int)i || !ri->bound)
			continue;
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

		for (size_t k = 0; k < p->n_ifaces; k++)
			if (!strcmp(p->ifaces[k].name, l.name) && p->ifaces[k].sandbox &&
			    !strcmp(p->ifaces[k].sandbox, env->netns))
				listed = !p->ifaces[k].mac || !strcasecmp(p->ifaces[k].mac, mac);
		if (!listed)
			return hpn_err_set(err, HPN_E_CHECK, EINVAL,
					   "prevResult does not list \"%s\" (MAC %s) in %s", l.name,
					   mac, env->netns);
	}
	return 0;
}

/* The hints file is there, still this attachment's, and says what ADD wrote. */
static int check_hints(struct attach *a, const struct hpn_conf *conf, const struct hpn_result *own,
		       struct hpn_err *err)
{
	const char *dir = a->j.hints_dir, *key = a->j.hints_key;
	_cleanup_free_ char *text = NULL;
	struct hpn_vars got = { 0 };
	_cleanup_free_ char *owner = NULL;
	struct hpn_nccl_owner o;
	bool mine;
	int r;

	hints_owner(conf, a->j.container_id, a->j.cni_ifname, &o);
	owner = hpn_nccl_owner_line(&o);
	r = owner ? hpn_nccl_read(dir, key, &text, err) : -ENOMEM;
	if (r == -ENOENT)
		return hpn_err_set(err, HPN_E_CHECK, ENOENT, "NCCL hints file %s/%s/%s is missing",
				   dir, key, HPN_NCCL_FILE);
	if (r >= 0)
		r = hpn_nccl_parse(text, owner, &got, &mine);
	if (r < 0)
		return r;
	if (!mine)
		r = hpn_err_set(err, HPN_E_CHECK, EINVAL,
				"NCCL hints file %s/%s/%s was rewritten by another attachment", dir,
				key, HPN_NCCL_FILE);
	for (size_t i = 0; r >= 0 && i < own->nccl.n; i++) {
		const char *k = own->nccl.v[i].key, *v = hpn_vars_get(&got, k);

		if (!v || strcmp(v, own->nccl.v[i].value))
			r = hpn_err_set(err, HPN_E_CHECK, EINVAL,
					"NCCL hints file %s/%s/%s has %s=%s, expected %s", dir, key,
					HPN_NCCL_FILE, k, v ? v : "(unset)", own->nccl.v[i].value);
	}
	if (r >= 0 && !hpn_vars_equal(&got, &own->nccl))
		r = hpn_err_set(err, HPN_E_CHECK, EINVAL,
				"NCCL hints file %s/%s/%s has settings ADD did not write", dir, key,
				HPN_NCCL_FILE);
	hpn_vars_free(&got);
	return r;
}

static int check_own(struct attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		     const struct hpn_result *own, struct hpn_err *err)
{
	int r = 0;

	for (size_t i = 0; r == 0 && i < a->j.n_nics; i++)
		r = check_nic(a, env, conf, own, i, err);
	return r;
}

int hpn_check(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	struct hpn_result *own = NULL;
	struct attach a;
	int r;

	if (untouched_pod(env, conf))
		return 0;
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
	/* CHECK only reads: other runs need not wait for its RDMA proofs. */
	hpn_store_unlock(&a.st);
	for (size_t i = 0; conf->has_ipam && i < a.j.n_nics; i++) {
		struct hpn_env ienv = *env;

		ienv.ifname = ipam_ifname(&a.j, env->ifname, i);
		r = hpn_ipam_run(conf, &ienv, "CHECK", err);
		if (r < 0)
			goto out;
	}
	r = hpn_netns_open(env->netns, &a.ns.pod_fd, err);
	if (r >= 0)
		r = open_pod_socket(&a.ns, env->netns, err);
	if (r >= 0)
		r = hpn_result_parse(a.j.result, strlen(a.j.result), &own, err);
	if (r >= 0 && own->n_ifaces != a.j.n_nics)
		r = hpn_err_set(err, HPN_E_IO, EINVAL, "state %s is corrupt", a.key);
	if (r >= 0)
		r = check_own(&a, env, conf, own, err);
	if (r >= 0 && a.j.hints_key[0])
		r = check_hints(&a, conf, own, err);
out:
	hpn_result_free(own);
	attach_close(&a);
	return r;
}

int hpn_status(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	/* The doctor's readiness checks (doctor.c), so both give the same reasons. */
	return hpn_ready_check(conf, env->path, err);
}

static bool still_valid(const struct hpn_conf *conf, const struct hpn_journal *j)
{
	for (size_t i = 0; i < conf->n_valid; i++)
		if (!strcmp(conf->valid[i].container_id, j->container_id) &&
		    !strcmp(conf->valid[i].ifname, j->cni_ifname))
			return true;
	return false;
}

/*
 * GC of one stale attachment: its NICs back to the host (moved ones) or
 * deleted (children), IPAM released for each, then its journal removed.
 * Per-attachment files other parts keep (the NCCL hints) go here too.
 */
static int gc_one(struct nsctx *ns, struct hpn_store *st, const struct hpn_env *env,
		  const struct hpn_conf *conf, const char *key, const struct hpn_journal *j,
		  struct hpn_err *err)
{
	struct hpn_env genv = *env;

	hpn_info("gc: undoing stale attachment %s", key);
	genv.container_id = j->container_id;
	genv.ifname = j->cni_ifname;
	genv.netns = j->netns;
	return release(st, ns, &genv, conf, key, j, true, err);
}

/* A journal temp file ".tmp.<key>.<pid>" of a process still running (an ADD in flight). */
static bool tmp_in_use(const char *name)
{
	const char *dot = strrchr(name, '.');
	char *end;
	long pid = dot ? strtol(dot + 1, &end, 10) : 0;

	return pid > 0 && pid != getpid() && !*end && hpn_proc_alive((int)pid, 0);
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
			/* Under the lock only an ADD past its claim writes one. */
			if (!tmp_in_use(de->d_name))
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
		/* Listed, or an ADD still running: the runtime may not list it yet. */
		if (still_valid(conf, &j) || hpn_journal_busy(&j)) {
			hpn_journal_free(&j);
			continue;
		}
		r = gc_one(&ns, &st, env, conf, de->d_name, &j, &jerr);
		if (r < 0) {
			hpn_warn("gc: %s: %s", de->d_name, jerr.msg);
			if (!failed++)
				*err = jerr;
		}
		hpn_journal_free(&j);
		/* The lock went for the undo; without it, the others must wait for the next GC. */
		if (st.lock_fd < 0)
			break;
	}
	r = failed ? -EIO : 0;
out:
	if (d)
		closedir(d);
	nsctx_close(&ns);
	hpn_store_close(&st);
	return r;
}
