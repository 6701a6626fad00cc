// SPDX-License-Identifier: Apache-2.0
#include "session.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ipam.h"
#include "link.h"
#include "log.h"
#include "netns.h"
#include "nl.h"
#include "sysfs.h"
#include "util.h"

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
static int restore_rdma_netns(struct hpn_nsctx *ns, int pod_fd, const struct hpn_journal *j,
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
static int restore_child(struct hpn_nsctx *ns, const struct hpn_journal *j,
			 const struct hpn_journal_nic *n, struct hpn_err *err)
{
	_cleanup_nl_sock_ struct nl_sock *pod = NULL;
	_cleanup_close_ int pod_fd = -1;
	struct hpn_link l;
	int r;

	r = open_pod_for_restore(j, &pod_fd, err);
	/* Its own rxe device first, while the child is there (a dead netns took both). */
	if (r == 0)
		r = hpn_soft_remove(ns, pod_fd, j, n, err);
	if (r < 0 || pod_fd < 0)
		return r;
	r = hpn_nl_open_in(pod_fd, ns->host_fd, j->netns, &pod, err);
	/* A rail's rules outlive it in the pod; its table's routes do not. */
	if (r == 0)
		r = hpn_rail_remove(pod, n, err);
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
static int restore_netdev(struct hpn_nsctx *ns, const struct hpn_journal *j,
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

			/* A device made on it dies with the move anyway: delete it first. */
			r = hpn_soft_remove(ns, pod_fd, j, n, err);
			if (r < 0) {
				close(pod_fd);
				return r;
			}
			/* Reverse order of ADD: the RDMA device left after the netdev. */
			if (n->rdma.moved && !n->rdma.created) {
				r = restore_rdma_netns(ns, pod_fd, j, n, err);
				if (r < 0) {
					close(pod_fd);
					return r;
				}
			}
			r = hpn_nl_open_in(pod_fd, ns->host_fd, j->netns, &pod, err);
			/* A rail's rules outlive it in the pod; its table's routes do not. */
			if (r == 0)
				r = hpn_rail_remove(pod, n, err);
			if (r < 0) {
				close(pod_fd);
				return r;
			}
			if (hpn_link_find(pod, n->pod_ifname, n->pod_ifindex, orig, &l, err) == 0) {
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
		} else {
			if (r < 0)
				hpn_debug("netns %s: %s; looking for the device on the host",
					  j->netns, nerr.msg);
			/* The pod is gone: what it made went with it, or never left the host. */
			r = hpn_soft_remove(ns, -1, j, n, err);
			if (r < 0) {
				if (pod_fd >= 0)
					close(pod_fd);
				return r;
			}
		}
		if (pod_fd >= 0)
			close(pod_fd);
	}

	r = hpn_link_find(ns->host, NULL, orig->ifindex, orig, &l, err);
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
			r = hpn_link_set(ns->host, &l, NULL, 0, 0, 0, err);
			if (r < 0)
				return r;
			l.up = false;
		}
		r = hpn_link_set(ns->host, &l, strcmp(l.name, orig->name) ? orig->name : NULL,
				 orig->mtu != l.mtu ? orig->mtu : 0, -1, 0, err);
		if (r == -EEXIST) {
			hpn_warn("cannot rename \"%s\" back to \"%s\": name in use", l.name,
				 orig->name);
			memset(err, 0, sizeof(*err));
			r = hpn_link_set(ns->host, &l, NULL, orig->mtu != l.mtu ? orig->mtu : 0, -1,
					 0, err);
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
		return hpn_link_set(ns->host, &l, NULL, 0, orig->up, 0, err);
	return 0;
}

static int restore_nic(struct hpn_nsctx *ns, const struct hpn_journal *j,
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

/*
 * The hints links, each if it still leads to this attachment's key (the
 * NIC's next pod may have its own there now), in reverse order of ADD.
 */
static int remove_links(const struct hpn_journal *j, struct hpn_err *err)
{
	int r = 0;

	for (size_t i = j->n_nics; i-- > 0;) {
		const char *link = j->nics[i].hints_link;
		struct hpn_err e = { 0 };
		int ri;

		if (!link[0] || !j->hints_dir)
			continue;
		ri = hpn_nccl_unlink(j->hints_dir, link, j->hints_key, &e);
		if (ri > 0)
			hpn_info("hints link %s/%s/%s leads to another pod's hints now: left",
				 j->hints_dir, HPN_NCCL_NIC_DIR, link);
		if (ri < 0 && r == 0) {
			*err = e;
			r = ri;
		}
	}
	return r;
}

/* The hints file, if it is still this attachment's (a recreated pod may own it now). */
static int remove_hints(const struct hpn_conf *conf, const struct hpn_journal *j,
			struct hpn_err *err)
{
	_cleanup_free_ char *owner = NULL;
	struct hpn_nccl_owner o;
	int r;

	if (!j->hints_key[0])
		return 0;
	/* The links first: none is left leading to a file that is gone. */
	r = remove_links(j, err);
	if (r < 0)
		return r;
	hpn_hints_owner(conf, j->container_id, j->cni_ifname, &o);
	owner = hpn_nccl_owner_line(&o);
	if (!owner)
		return -ENOMEM;
	return hpn_nccl_remove(j->hints_dir, j->hints_key, owner, err);
}

int hpn_undo(struct hpn_nsctx *ns, const struct hpn_env *env, const struct hpn_conf *conf,
	     const struct hpn_journal *j, bool ipam, struct hpn_err *err)
{
	size_t n = j ? j->n_nics : 0;
	struct hpn_err herr = { 0 };
	bool dev_failed = false;
	int r = 0, rh = 0;

	if (j)
		rh = remove_hints(conf, j, &herr);
	/* The CDI specs before any device goes (and of an earlier boot's: /etc/cdi persists). */
	if (j && rh == 0)
		rh = hpn_soft_cdi_remove(j, &herr);
	else if (j)
		(void)hpn_soft_cdi_remove(j, &(struct hpn_err){ 0 });
	for (size_t i = 0; ipam && conf->has_ipam && i < (n ? n : 1); i++) {
		struct hpn_env ienv = *env;
		struct hpn_err ierr = { 0 };
		int ri;

		ienv.ifname = hpn_ipam_ifname(j, env->ifname, i);
		ri = hpn_ipam_run(conf, &ienv, "DEL", &ierr);
		if (ri < 0 && r == 0) {
			*err = ierr;
			r = ri;
		}
	}
	/* An earlier boot returned every NIC and ended every netns: nothing to move. */
	if (j && j->stale) {
		hpn_info("state of %s is from an earlier boot: its NICs are back already",
			 j->container_id);
		n = 0;
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

int hpn_release(struct hpn_store *st, struct hpn_nsctx *ns, const struct hpn_env *env,
		const struct hpn_conf *conf, const char *key, const struct hpn_journal *j,
		bool ipam, struct hpn_err *err)
{
	_cleanup_close_ int fd = -1;
	struct hpn_err lerr = { 0 };
	int r = hpn_journal_hold(st, key, &fd, err), rl;

	if (r < 0)
		return r;
	hpn_store_unlock(st);
	r = hpn_undo(ns, env, conf, j, ipam, err);
	rl = hpn_store_lock(st, HPN_LOCK_TIMEOUT_MS, &lerr);
	if (r == 0)
		r = hpn_journal_remove(st, key, err);
	if (r == 0 && rl < 0) {
		*err = lerr;
		r = rl;
	}
	return r;
}
