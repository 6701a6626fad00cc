// SPDX-License-Identifier: Apache-2.0
/*
 * Soft-RoCE for pods (softRoce): a NIC with no RDMA device gets an rxe device
 * made on its pod-side interface, the way `rdma link add NAME type rxe netdev
 * hpn0` run inside the pod makes one. What the kernel (7.3, measured in the
 * vm7 tier) forces:
 *  - an rxe device dies whenever its netdev changes netns, either way: it is
 *    made after the NIC is in the pod and deleted before the NIC leaves;
 *  - the netdev is looked up in the netns of the RDMA netlink socket: the
 *    request is sent from inside the pod;
 *  - shared mode: the device stays registered where it was asked for and
 *    gets the pod's own UDP 4791 socket (from Linux 7.1; before, every rxe
 *    sent from the initial netns, so a pod's carried nothing); its name is
 *    one namespace for the whole node;
 *  - exclusive mode: the kernel registers it in the initial netns whoever
 *    asks, and it is moved into the pod from there (RDMA_NLDEV_CMD_SET, the
 *    move mlx5 takes); names are per netns there, but every name made here is
 *    unique on the node anyway (hpn_rdma_soft_name), so a move never meets
 *    its own name;
 *  - a macvlan child needs an rxe of its own, made in its pod: its parent's
 *    rxe puts the child's addresses in its GID table but carries no byte for
 *    a pod netns, and while it exists rdma_cm resolves them to it. An rxe on
 *    an ipvlan child carries nothing between pods (every packet sent, none
 *    received): the config refuses softRoce with ipvlan.
 * Its character devices are born at ADD, after the kubelet's Allocate: their
 * nodes go into the directory Allocate named for the container, and their
 * numbers into a CDI spec of the NIC's ID that Allocate named too (the
 * runtime reads both at CreateContainer, after ADD; doc/agent.md).
 */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "alloc.h"
#include "cdi.h"
#include "log.h"
#include "netns.h"
#include "util.h"

int hpn_soft_plan(const struct hpn_attach *a, const struct hpn_conf *conf, size_t i,
		  struct hpn_nic_plan *plan, struct hpn_journal_nic *n, struct hpn_err *err)
{
	const struct hpn_link *dev = &plan->dev;
	struct hpn_rdma_plan *p = &plan->rdma;
	enum hpn_mode mode = hpn_conf_nic_mode(conf, plan->share, NULL);
	bool rxe = p->found && p->dev.soft && p->dev.kind == HPN_RDMA_RXE;
	/* On the NIC itself, which moves; else on a parent that stays (a child, a moved macvlan). */
	bool own = rxe && mode == HPN_MODE_MOVE && !strcmp(p->dev.netdev, dev->name);
	char why[HPN_ERR_MSG - 128];
	int r;

	/*
	 * A child's RDMA device is its parent's: an rxe there serves the host
	 * netns only. And while it exists it also holds the child's GID entries,
	 * so rdma_cm resolves the child's address to it, not to one made for the
	 * child (measured: the bind proof then fails): it has to go first.
	 */
	if (rxe && !own && hpn_rdma_rxe_per_netns())
		return conf->soft_roce
			       ? hpn_err_set(err, HPN_E_RDMA, EBUSY,
					     "the rxe device \"%s\" of \"%s\" serves only the host "
					     "netns, yet rdma_cm would resolve the child's address "
					     "to it: delete it (rdma link delete %s), and softRoce "
					     "makes an rxe device for each child in its pod",
					     p->dev.name, p->dev.netdev, p->dev.name)
			       : hpn_err_set(err, HPN_E_RDMA, EOPNOTSUPP,
					     "the rxe device \"%s\" of \"%s\" cannot carry the "
					     "traffic of \"%s\"'s %s in a pod: from Linux %d.%d an "
					     "rxe device serves only its own netns (delete it and "
					     "set softRoce: each child gets an rxe device of its "
					     "own)",
					     p->dev.name, p->dev.netdev, p->dev.netdev,
					     mode == HPN_MODE_IPVLAN ? "ipvlan" : "macvlan",
					     HPN_RDMA_SOFT_KERNEL_MAJOR,
					     HPN_RDMA_SOFT_KERNEL_MINOR);
	/* A device that serves the pod: softRoce has nothing to make. */
	if (!conf->soft_roce || (p->found && !own))
		return 0;
	/* The move would destroy it, and the one made in the pod could not bring it back. */
	if (p->found)
		return hpn_err_set(
			err, HPN_E_RDMA, EBUSY,
			"\"%s\" carries the rxe device \"%s\", which the kernel destroys "
			"when \"%s\" leaves the host netns: delete it (rdma link delete "
			"%s), and softRoce makes one in the pod",
			dev->name, p->dev.name, dev->name, p->dev.name);
	r = hpn_rdma_soft_ready(conf->sysfs_root, why, sizeof(why));
	if (r < 0)
		return hpn_err_set(
			err, HPN_E_RDMA, -r,
			"softRoce: no RDMA device serves \"%s\", and this node cannot make "
			"one: %s",
			dev->name, why);
	memset(&p->dev, 0, sizeof(p->dev));
	hpn_rdma_soft_name(conf->name, a->key, i, p->dev.name);
	p->dev.port = 1;
	snprintf(p->dev.netdev, sizeof(p->dev.netdev), "%s", n->pod_ifname);
	p->dev.kind = HPN_RDMA_RXE;
	p->dev.soft = true;
	snprintf(p->dev.driver, sizeof(p->dev.driver), "rdma_rxe");
	p->found = p->create = true;
	/* Journalled with the claim, before it exists: an undo deletes it by this name. */
	snprintf(n->rdma.name, sizeof(n->rdma.name), "%s", p->dev.name);
	snprintf(n->rdma.netdev, sizeof(n->rdma.netdev), "%s", n->pod_ifname);
	n->rdma.created = true;
	/* Exclusive mode: it is moved into the pod, and home again before it is deleted. */
	n->rdma.moved = p->mode == HPN_RDMA_NETNS_EXCLUSIVE;
	hpn_info("no RDMA device serves \"%s\": softRoce makes rxe device \"%s\" on \"%s\" in the "
		 "pod",
		 dev->name, p->dev.name, n->pod_ifname);
	return 0;
}

int hpn_soft_make(struct hpn_attach *a, const struct hpn_journal_nic *n,
		  const struct hpn_rdma_plan *p,
		  int (*fault)(const char *step, struct hpn_err *err), struct hpn_err *err)
{
	int r = hpn_netns_enter(a->ns.pod_fd), rh;

	if (r < 0)
		return hpn_err_set(err, HPN_E_NETNS, -r, "enter the pod netns: %s", strerror(-r));
	r = hpn_rdma_link_add(p->dev.name, "rxe", n->pod_ifname, err);
	rh = hpn_netns_enter(a->ns.host_fd);
	if (rh < 0)
		return hpn_err_set(err, HPN_E_NETNS, -rh, "return to the host netns: %s",
				   strerror(-rh));
	if (r == 0)
		r = fault("rdma-create", err);
	if (r < 0 || p->mode != HPN_RDMA_NETNS_EXCLUSIVE)
		return r;
	/* Registered in the initial netns (this one): the pod's only once moved. */
	r = hpn_rdma_set_netns(p->dev.name, a->ns.pod_fd, err);
	if (r < 0)
		hpn_err_details(err,
				"exclusive RDMA netns mode: the rxe device made for \"%s\" is "
				"registered in the initial netns and must move into the pod",
				n->pod_ifname);
	return r;
}

/* <devices dir>/<NIC ID>: the directory, or Allocate's link to the container's. */
static int nodes_dir(const char *root, const struct hpn_journal_nic *n, char *path, size_t len)
{
	char id[HPN_ALLOC_ID_MAX];

	hpn_alloc_journal_id(n, id);
	/* A PCI address has colons: the protocol's charset, which has no '/'. */
	if (!hpn_alloc_id_valid(id) || !strcmp(id, ".") || !strcmp(id, ".."))
		return -EINVAL;
	return hpn_snprintf(path, len, "%s/%s", root, id);
}

int hpn_soft_nodes_plan(struct hpn_journal *j, size_t i, const char *root,
			const struct hpn_rdma_cdevs *cd, struct hpn_err *err)
{
	struct hpn_journal_rdma *r = &j->nics[i].rdma;
	char path[PATH_MAX];
	struct stat st;

	if (!r->created || nodes_dir(root, &j->nics[i], path, sizeof(path)) < 0 ||
	    lstat(path, &st) < 0)
		return 0;
	r->n_nodes = 0;
	/* uverbsN first: it is what libibverbs opens; then umadN. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < cd->n && r->n_nodes < HPN_JOURNAL_NODES_MAX; k++) {
			const struct hpn_rdma_cdev *c = &cd->v[k];
			struct hpn_journal_node *d = &r->nodes[r->n_nodes];
			bool verbs = !strncmp(c->name, "uverbs", 6);

			if (verbs != (pass == 0) || !c->major || strlen(c->name) >= sizeof(d->name))
				continue;
			memcpy(d->name, c->name, strlen(c->name) + 1);
			d->major = c->major;
			d->minor = c->minor;
			r->n_nodes++;
		}
	if (!r->n_nodes)
		return 0;
	if (!j->devices_dir && !(j->devices_dir = strdup(root)))
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	return 1;
}

int hpn_soft_nodes_make(const struct hpn_journal *j, size_t i, struct hpn_err *err)
{
	const struct hpn_journal_nic *n = &j->nics[i];
	_cleanup_close_ int dfd = -1;
	char path[PATH_MAX];

	if (nodes_dir(j->devices_dir, n, path, sizeof(path)) < 0)
		return hpn_err_set(err, HPN_E_INTERNAL, ENAMETOOLONG, "device directory of \"%s\"",
				   n->pod_ifname);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return hpn_err_set(err, HPN_E_INTERNAL, errno, "open %s: %s", path,
				   strerror(errno));
	for (size_t k = 0; k < n->rdma.n_nodes; k++) {
		const struct hpn_journal_node *d = &n->rdma.nodes[k];

		/* A node of an earlier pod's device may have this name: its numbers are not ours. */
		if ((unlinkat(dfd, d->name, 0) < 0 && errno != ENOENT) ||
		    mknodat(dfd, d->name, S_IFCHR | 0600, makedev(d->major, d->minor)) < 0 ||
		    fchmodat(dfd, d->name, 0666, 0) < 0)
			return hpn_err_set(err, HPN_E_INTERNAL, errno,
					   "make device node %s/%s (%u:%u) for \"%s\": %s", path,
					   d->name, d->major, d->minor, n->rdma.name,
					   strerror(errno));
		hpn_debug("device node %s/%s (%u:%u) for \"%s\"", path, d->name, d->major, d->minor,
			  n->rdma.name);
	}
	return 0;
}

int hpn_soft_cdi_plan(struct hpn_journal *j, size_t i, const char *cdi_dir, struct hpn_err *err)
{
	struct hpn_journal_nic *n = &j->nics[i];
	char id[HPN_ALLOC_ID_MAX];
	struct stat st;

	/* No directory, no runtime that reads one (and no Allocate that named the device). */
	if (!n->rdma.created || !cdi_dir || stat(cdi_dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	hpn_alloc_journal_id(n, id);
	if (hpn_cdi_file(HPN_CDI_POD, id, n->rdma.cdi_spec) < 0) {
		/* The agent's Allocate names no CDI device for it either. */
		hpn_warn("NIC ID \"%s\" cannot name a CDI device: no CDI spec for \"%s\"", id,
			 n->rdma.name);
		return 0;
	}
	if (!j->cdi_dir && !(j->cdi_dir = strdup(cdi_dir)))
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	return 1;
}

/* cd's node named name into out (host path host_dir/name), if it has numbers. */
static void cdi_node(struct hpn_cdi_dev *out, const struct hpn_rdma_cdev *c, const char *host_dir)
{
	struct hpn_cdi_node *d = &out->nodes[out->n_nodes];

	if (!c->major || out->n_nodes == HPN_CDI_NODES_MAX || strlen(c->name) >= sizeof(d->name) ||
	    hpn_snprintf(d->host_path, sizeof(d->host_path), "%s/%s", host_dir, c->name) < 0)
		return;
	memcpy(d->name, c->name, strlen(c->name) + 1);
	d->major = c->major;
	d->minor = c->minor;
	out->n_nodes++;
}

int hpn_soft_cdi_write(const struct hpn_journal *j, size_t i, const struct hpn_rdma_cdevs *cd,
		       const struct hpn_conf *conf, struct hpn_err *err)
{
	const struct hpn_journal_nic *n = &j->nics[i];
	struct hpn_cdi_dev d = { 0 };
	char made[PATH_MAX] = "";
	ssize_t len;
	int r;

	/* The hook is this binary, as the runtime that ran it found it. */
	len = readlink("/proc/self/exe", d.hook.path, sizeof(d.hook.path) - 1);
	if (len <= 0 || (size_t)len >= sizeof(d.hook.path) - 1 ||
	    strlen(conf->state_dir) >= sizeof(d.hook.state_dir) ||
	    strlen(conf->name) >= sizeof(d.hook.network))
		return hpn_err_set(err, HPN_E_INTERNAL, ENAMETOOLONG,
				   "the CDI hook of \"%s\": this binary's path, stateDir or the "
				   "network name is too long",
				   n->pod_ifname);
	d.hook.path[len] = '\0';
	memcpy(d.hook.state_dir, conf->state_dir, strlen(conf->state_dir) + 1);
	memcpy(d.hook.network, conf->name, strlen(conf->name) + 1);

	hpn_alloc_journal_id(n, d.id);
	snprintf(d.ibdev, sizeof(d.ibdev), "%s", n->rdma.name);
	/* Where the node is on the host: the one ADD made in Allocate's directory, else devtmpfs's. */
	if (n->rdma.n_nodes && j->devices_dir &&
	    nodes_dir(j->devices_dir, n, made, sizeof(made)) < 0)
		made[0] = '\0';
	/* uverbsN first: it is what libibverbs opens; then umadN (issmN). */
	for (int pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < cd->n; k++) {
			bool verbs = !strncmp(cd->v[k].name, "uverbs", 6), here = false;

			if (verbs != (pass == 0))
				continue;
			for (size_t m = 0; made[0] && m < n->rdma.n_nodes; m++)
				here |= !strcmp(n->rdma.nodes[m].name, cd->v[k].name);
			cdi_node(&d, &cd->v[k], here ? made : "/dev/infiniband");
		}
	if (cd->rdma_cm)
		cdi_node(&d, &cd->cm, "/dev/infiniband");
	/*
	 * The pod's hints, which this ADD writes before it returns: the spec is
	 * the pod's own, so it names the pod's file itself (no link).
	 */
	if (j->hints_key[0] && j->hints_dir) {
		char hints[PATH_MAX];

		r = hpn_nccl_file_path(j->hints_dir, j->hints_key, hints, sizeof(hints));
		if (r == 0)
			r = hpn_cdi_set_hints(&d, hints,
					      conf->nccl.conf_file ? conf->nccl.conf_file
								   : HPN_DEFAULT_NCCL_CONF_FILE);
		if (r < 0)
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, -r,
					   "the CDI spec of \"%s\": the hints mount of %s/%s: %s",
					   n->pod_ifname, j->hints_dir, j->hints_key, strerror(-r));
	}
	r = hpn_cdi_write(j->cdi_dir, HPN_CDI_POD, &d, err);
	if (r < 0)
		return r;
	hpn_debug("CDI spec %s/%s: device %s=%s, %zu device nodes", j->cdi_dir, n->rdma.cdi_spec,
		  HPN_CDI_KIND, d.id, d.n_nodes);
	return 0;
}

int hpn_soft_cdi_remove(const struct hpn_journal *j, struct hpn_err *err)
{
	int r = 0;

	for (size_t i = 0; j->cdi_dir && i < j->n_nics; i++) {
		const struct hpn_journal_nic *n = &j->nics[i];
		struct hpn_err e = { 0 };
		int ri;

		if (!n->rdma.cdi_spec[0])
			continue;
		ri = hpn_cdi_remove(j->cdi_dir, n->rdma.cdi_spec, &e);
		if (ri == 1)
			hpn_warn("%s", e.msg);
		else if (ri == 0)
			hpn_debug("removed CDI spec %s/%s", j->cdi_dir, n->rdma.cdi_spec);
		else if (r == 0) {
			*err = e;
			r = ri;
		}
	}
	return r;
}

/* Removes n's device nodes that still carry the numbers ADD gave them. */
static int nodes_remove(const struct hpn_journal *j, const struct hpn_journal_nic *n,
			struct hpn_err *err)
{
	_cleanup_close_ int dfd = -1;
	char path[PATH_MAX];

	if (!n->rdma.n_nodes || !j->devices_dir ||
	    nodes_dir(j->devices_dir, n, path, sizeof(path)) < 0)
		return 0;
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* Gone: the agent cleared it for a new allocation. */
	if (dfd < 0)
		return errno == ENOENT || errno == ENOTDIR
			       ? 0
			       : hpn_err_set(err, HPN_E_INTERNAL, errno, "open %s: %s", path,
					     strerror(errno));
	for (size_t k = 0; k < n->rdma.n_nodes; k++) {
		const struct hpn_journal_node *d = &n->rdma.nodes[k];
		struct stat st;

		if (fstatat(dfd, d->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISCHR(st.st_mode) ||
		    st.st_rdev != makedev(d->major, d->minor))
			continue;
		if (unlinkat(dfd, d->name, 0) < 0 && errno != ENOENT)
			return hpn_err_set(err, HPN_E_INTERNAL, errno, "remove %s/%s: %s", path,
					   d->name, strerror(errno));
		hpn_debug("removed device node %s/%s", path, d->name);
	}
	return 0;
}

int hpn_soft_remove(struct hpn_nsctx *ns, int pod_fd, const struct hpn_journal *j,
		    const struct hpn_journal_nic *n, struct hpn_err *err)
{
	bool home = false;
	int r;

	if (!n->rdma.created)
		return 0;
	/* The nodes first: once the device is gone its numbers may serve another. */
	r = nodes_remove(j, n, err);
	if (r < 0)
		return r;
	if (pod_fd >= 0) {
		int rh, present;

		r = hpn_netns_enter(pod_fd);
		if (r < 0)
			return hpn_err_set(err, HPN_E_NETNS, -r, "enter netns \"%s\": %s", j->netns,
					   strerror(-r));
		present = hpn_rdma_present(n->rdma.name, err);
		/* No RDMA netlink: nothing of it to delete. */
		r = present = present == -EPROTONOSUPPORT ? 0 : present;
		/*
		 * Exclusive mode: home the way an mlx5 device goes (RDMA netlink,
		 * asked from the pod), then deleted there. Names are per netns in
		 * this mode and a device of the same name in the host would refuse
		 * it (EEXIST): then it is deleted where it is.
		 */
		if (present == 1 && n->rdma.moved) {
			r = hpn_rdma_set_netns(n->rdma.name, ns->host_fd, err);
			home = r == 0;
			if (r == -EEXIST) {
				hpn_warn("%s; deleting it in the pod", err->msg);
				memset(err, 0, sizeof(*err));
				r = hpn_rdma_link_del(n->rdma.name, err);
			}
		} else if (present == 1) {
			r = hpn_rdma_link_del(n->rdma.name, err);
		}
		rh = hpn_netns_enter(ns->host_fd);
		if (rh < 0)
			return hpn_err_set(err, HPN_E_NETNS, -rh, "return to the host netns: %s",
					   strerror(-rh));
		if (r < 0 && r != -ENODEV)
			return r;
		if (present == 1 && !home) {
			hpn_debug("deleted RDMA device \"%s\" in %s", n->rdma.name, j->netns);
			return 0;
		}
	}
	/*
	 * In the host: brought home just now, or made in exclusive mode and not
	 * moved yet (the kernel registers it here); or gone with its netdev or
	 * the netns (shared mode: seen from here too).
	 */
	r = hpn_rdma_link_del(n->rdma.name, err);
	if (r == 0)
		hpn_debug("deleted RDMA device \"%s\" in the host netns%s", n->rdma.name,
			  home ? ", brought home from the pod" : "");
	return r == -ENODEV ? 0 : r;
}
