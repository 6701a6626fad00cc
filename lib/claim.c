// SPDX-License-Identifier: Apache-2.0
#include "session.h"

#include <errno.h>
#include <limits.h>
#include <linux/if_link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "alloc.h"
#include "link.h"
#include "log.h"
#include "pool.h"
#include "sysfs.h"
#include "util.h"

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

/*
 * A NIC farther from its GPU than gpus.near: ADD fails when gpus.far is
 * "refuse" and hpn-rdma chose (own), else it says so and goes on.
 */
static int check_near(const struct hpn_conf *conf, const struct hpn_gpus *g,
		      const struct hpn_nic_plan *plans, size_t n, bool own, struct hpn_err *err)
{
	bool refuse = own && conf->gpus.refuse_far;

	for (size_t i = 0; i < n; i++) {
		const struct hpn_gpu *gpu = plans[i].gpu < g->n ? &g->v[plans[i].gpu] : NULL;
		struct hpn_err e = { 0 };

		if (!gpu || plans[i].dist <= conf->gpus.near)
			continue;
		if (!gpu->pos.path[0])
			hpn_err_set(
				&e, HPN_E_DEVICE_NOT_FOUND, ENODEV,
				"GPU %s of the pod is not under %s/driver/nvidia/gpus or not on "
				"the host's PCI tree: how near NIC \"%s\" is cannot be told",
				gpu->id, conf->gpus.proc_root, plans[i].dev.name);
		else
			hpn_err_set(
				&e, HPN_E_DEVICE_NOT_FOUND, ENODEV,
				"GPU %s (%s) has no free NIC within %s of it: NIC \"%s\" is %s%s",
				gpu->pci, gpu->id, hpn_gpu_dist_name(conf->gpus.near),
				plans[i].dev.name, hpn_gpu_dist_name(plans[i].dist),
				own ? "" : " (the kubelet's choice)");
		if (refuse)
			return hpn_err_set(err, e.code, ENODEV, "%s (gpus.far is \"refuse\")",
					   e.msg);
		hpn_warn("%s", e.msg);
	}
	return 0;
}

static void plan_gpu(struct hpn_nic_plan *p, const struct hpn_pool_pick *k)
{
	p->gpu = k->gpu;
	p->dist = k->dist;
	p->best = k->best;
}

/*
 * match: n NICs from the pool (hpn_pool_select), the nearest to the pod's
 * GPUs when it has some. Called with the store locked, so the claim is
 * journalled before another ADD can look.
 */
static int select_pool(struct hpn_attach *a, const struct hpn_conf *conf,
		       const struct hpn_holders *h, const struct hpn_gpus *g, size_t n,
		       struct hpn_nic_plan *plans, struct hpn_err *err)
{
	struct hpn_pool_pick picks[HPN_MAX_NICS];
	int r = hpn_pool_select(a->ns.host, conf, h, g, n, picks, err);

	for (size_t i = 0; r == 0 && i < n; i++) {
		plans[i].dev = picks[i].dev;
		plans[i].rdma.found = picks[i].has_rdma;
		if (picks[i].has_rdma)
			plans[i].rdma.dev = picks[i].rdma;
		plan_gpu(&plans[i], &picks[i]);
	}
	return r == 0 && g->n ? check_near(conf, g, plans, n, true, err) : r;
}

/* The kubelet's NICs: which GPU each serves, and how far it is (said, never refused). */
static int pair_allocated(struct hpn_attach *a, const struct hpn_conf *conf,
			  const struct hpn_holders *h, const struct hpn_gpus *g, size_t n,
			  struct hpn_nic_plan *plans, struct hpn_err *err)
{
	struct hpn_pool_pick picks[HPN_MAX_NICS];
	int r;

	for (size_t i = 0; i < n; i++) {
		picks[i].dev = plans[i].dev;
		/* Its RDMA device when match found it already (its place is NCCL's). */
		picks[i].has_rdma = plans[i].rdma.found;
		if (picks[i].has_rdma)
			picks[i].rdma = plans[i].rdma.dev;
	}
	r = hpn_pool_pair(a->ns.host, conf, h, g, n, picks, err);
	for (size_t i = 0; r == 0 && i < n; i++)
		plan_gpu(&plans[i], &picks[i]);
	return r == 0 ? check_near(conf, g, plans, n, false, err) : r;
}

int hpn_claim_allocation(const struct hpn_env *env, const struct hpn_conf *conf,
			 struct hpn_alloc *ret, struct hpn_err *err)
{
	const char *ns = hpn_env_arg(env, "K8S_POD_NAMESPACE");
	const char *name = hpn_env_arg(env, "K8S_POD_NAME");
	struct hpn_alloc_req req;
	struct hpn_err lerr = { 0 };
	size_t shares = 0;
	char note[40] = "";
	int r;

	if (!conf->agent.lookup)
		return 0;
	if (!ns || !name) {
		if (conf->agent.required)
			return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
					   "agent.required is true, but CNI_ARGS has no "
					   "K8S_POD_NAMESPACE and K8S_POD_NAME to ask the agent "
					   "about");
		return 0;
	}
	r = hpn_alloc_req_set(&req, ns, name, hpn_env_arg(env, "K8S_POD_UID"), err);
	if (r < 0)
		return r;
	/* A share of a NIC (a DRA claim's) becomes a child of it: this plugin attaches them. */
	req.shares = true;
	r = hpn_alloc_lookup(conf->agent.socket, conf->agent.timeout_ms, &req, ret, &lerr);
	if ((r == -ENOENT || r == -ECONNREFUSED) && !conf->agent.required) {
		hpn_debug("no hpn-rdma-agent at %s: taking from the pool", conf->agent.socket);
		return 0;
	}
	if (r < 0) {
		*err = lerr;
		if (r == -ENOENT || r == -ECONNREFUSED)
			hpn_err_prefix(err, "agent.required is true");
		return r;
	}
	if (ret->n == 0) {
		hpn_info("pod %s/%s holds no %s devices%s: taking from the pool", ns, name,
			 ret->resource, ret->pod_known ? "" : " (the kubelet does not list it)");
		return 0;
	}
	if (ret->n > HPN_MAX_NICS)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, E2BIG,
				   "pod %s/%s holds %zu %s devices, over the %d NICs of one "
				   "attachment",
				   ns, name, ret->n, ret->resource, HPN_MAX_NICS);
	/* Which source decided: a DRA claim, else the device plugin (the pool is above). */
	for (size_t i = 0; i < ret->n; i++)
		shares += ret->shared[i];
	if (shares)
		snprintf(note, sizeof(note), " (%zu of them shares)", shares);
	if (!strcmp(ret->source, "dra"))
		hpn_info("pod %s/%s: %zu NICs%s of DRA claim %s%s, as prepared", ns, name, ret->n,
			 note, ret->n_claims ? ret->claims[0] : "(unnamed)",
			 ret->n_claims > 1 ? " and more" : "");
	else
		hpn_info("pod %s/%s: %zu %s devices the kubelet allocated%s%s", ns, name, ret->n,
			 ret->resource, ret->source[0] ? ", source " : "", ret->source);
	return 1;
}

/*
 * The attachment whose journal holds device ID id moved away (so not on the
 * host), into key. A child's journal names its parent's ID too, but holds
 * nothing off the host: not counted.
 */
static bool journal_holding(struct hpn_store *st, const char *self, const char *id,
			    char key[HPN_KEY_MAX])
{
	char **keys = NULL;
	struct hpn_err e = { 0 };
	bool found = false;

	if (hpn_store_keys(st, &keys, &e) < 0)
		return false;
	for (size_t k = 0; !found && keys[k]; k++) {
		struct hpn_journal j; /* hpn_journal_read inits it */

		if (!strcmp(keys[k], self) || hpn_journal_read(st, keys[k], &j, &e) < 0)
			continue;
		for (size_t i = 0; !found && i < j.n_nics; i++) {
			char jid[HPN_ALLOC_ID_MAX];

			if (j.nics[i].kind != HPN_NIC_MOVED)
				continue;
			hpn_alloc_journal_id(&j.nics[i], jid);
			if (!strcmp(jid, id)) {
				snprintf(key, HPN_KEY_MAX, "%s", keys[k]);
				found = true;
			}
		}
		hpn_journal_free(&j);
	}
	hpn_strv_free(keys);
	return found;
}

/*
 * Exactly the allocated NICs, in the allocation's order: each must be a NIC
 * of the pool that no other attachment holds. A held one is an error, never
 * a silent other pick: the kubelet and the journals disagree about it. A
 * share (al->shared[i]) is held only by an attachment that moved its NIC
 * (children share a parent: several shares of one NIC, in one pod too);
 * the NIC's own ID under a move config also by another's child of it.
 */
static int select_allocated(struct hpn_attach *a, const struct hpn_conf *conf,
			    const struct hpn_holders *h, const struct hpn_alloc *al,
			    struct hpn_nic_plan *plans, struct hpn_err *err)
{
	struct hpn_linkv lv = { 0 };
	int r = hpn_pool_candidates(a->ns.host, conf, &lv, err);

	for (size_t i = 0; r == 0 && i < al->n; i++) {
		const struct hpn_holder *x;
		size_t k;

		plans[i].share = al->shared[i];
		/* The kernel gives a NIC one passthru macvlan and nothing beside it: no sharing. */
		if (plans[i].share && conf->mode == HPN_MODE_MACVLAN &&
		    conf->child_mode == MACVLAN_MODE_PASSTHRU) {
			r = hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					"%s device %s is a share of a NIC, but macvlanMode is "
					"passthru, which gives a NIC one child and nothing beside "
					"it: set macvlanMode bridge (or private, vepa)",
					al->resource, al->ids[i]);
			break;
		}
		for (k = 0; k < lv.n; k++) {
			char id[HPN_ALLOC_ID_MAX];

			hpn_alloc_nic_id(conf->sysfs_root, lv.v[k].name, id);
			if (!strcmp(id, al->ids[i]))
				break;
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(al->ids[j], al->ids[i]) && !(al->shared[j] && al->shared[i]))
				r = hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
						"the kubelet allocated %s device %s twice%s",
						al->resource, al->ids[i],
						al->shared[j] || al->shared[i]
							? " (whole and as a share)"
							: "");
		if (r < 0)
			break;
		if (k == lv.n) {
			char key[HPN_KEY_MAX];

			if (journal_holding(&a->st, a->key, al->ids[i], key)) {
				r = hpn_err_set(
					err, HPN_E_DEVICE_NOT_FOUND, EBUSY,
					"the kubelet allocated %s device %s to the pod, but "
					"attachment %s holds it: the kubelet and the node "
					"disagree (DEL or GC that attachment)",
					al->resource, al->ids[i], key);
				break;
			}
			r = hpn_err_set(err, HPN_E_DEVICE_NOT_FOUND, ENODEV,
					"the kubelet allocated %s device %s to the pod, but no "
					"free-standing NIC of the pool has that ID on the host",
					al->resource, al->ids[i]);
			break;
		}
		x = hpn_held_by(h, &lv.v[k],
				hpn_conf_nic_mode(conf, plans[i].share, NULL) != HPN_MODE_MOVE);
		if (x) {
			r = hpn_err_set(err, x->live ? HPN_E_TRY_AGAIN : HPN_E_DEVICE_NOT_FOUND,
					EBUSY,
					"the kubelet allocated %s device %s (\"%s\") to the pod%s, "
					"but attachment %s holds %s%s",
					al->resource, al->ids[i], lv.v[k].name,
					plans[i].share ? " as a share" : "", x->key,
					x->child ? "a child of it" : "it",
					x->live ? " (in flight; try again)"
						: ": the kubelet and the node disagree (DEL or GC "
						  "that attachment)");
			break;
		}
		plans[i].dev = lv.v[k];
		/* lv.rd holds RDMA devices only when match asked for them (else plan_rdma looks). */
		plans[i].rdma.found = conf->match.n_rdma_devices > 0;
		if (plans[i].rdma.found)
			plans[i].rdma.dev = lv.rd[k];
	}
	hpn_linkv_free(&lv);
	return r;
}

/* A single selector's device: refused while another attachment holds it. */
static int check_unclaimed(const struct hpn_holders *h, const struct hpn_conf *conf,
			   const struct hpn_nic_plan *p, struct hpn_err *err)
{
	const struct hpn_link *dev = &p->dev;
	/* Shared modes share a parent; only a moved NIC is taken from them. */
	const struct hpn_holder *x =
		hpn_held_by(h, dev, hpn_conf_nic_mode(conf, p->share, NULL) != HPN_MODE_MOVE);

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

static bool is_stacked(const struct hpn_link *l)
{
	return !strcmp(l->kind, "macvlan") || !strcmp(l->kind, "ipvlan") ||
	       !strcmp(l->kind, "vlan") || !strcmp(l->kind, "macvtap");
}

/*
 * The RoCE QoS that classes the NIC's traffic, read on the host before
 * anything changes: its netdev's DCB, or for a VF without DCB of its own
 * (mlx5 gives its VFs none: the PF's port classes their traffic) the PF's.
 * A read that fails leaves the verdict unknown (ncclqos.c), said in the log.
 */
static void plan_qos(const struct hpn_attach *a, const struct hpn_conf *conf, const char *netdev,
		     struct hpn_rdma_plan *p)
{
	char link[PATH_MAX], target[PATH_MAX], pf[1][16];
	struct hpn_err e = { 0 };
	size_t n = 0;
	ssize_t len;

	p->qos_read = true;
	snprintf(p->qos_netdev, sizeof(p->qos_netdev), "%s", netdev);
	if (hpn_qos_read(a->ns.host, conf->sysfs_root, netdev, &p->qos, &e) < 0) {
		hpn_qos_init(&p->qos);
		hpn_warn("%s", e.msg);
		return;
	}
	if (p->qos.state != HPN_QOS_NO_DCB || !p->dev.vf)
		return;
	snprintf(link, sizeof(link), "%s/class/net/%s/device/physfn", conf->sysfs_root, netdev);
	len = readlink(link, target, sizeof(target) - 1);
	if (len <= 0)
		return;
	target[len] = '\0';
	if (hpn_sysfs_pci_netdevs(conf->sysfs_root,
				  strrchr(target, '/') ? strrchr(target, '/') + 1 : target, pf, 1,
				  &n) < 0 ||
	    !n)
		return;
	snprintf(p->qos_netdev, sizeof(p->qos_netdev), "%s", pf[0]);
	if (hpn_qos_read(a->ns.host, conf->sysfs_root, pf[0], &p->qos, &e) < 0) {
		hpn_qos_init(&p->qos);
		hpn_warn("%s", e.msg);
		return;
	}
	hpn_info("RoCE QoS of VF \"%s\": its PF \"%s\"'s", netdev, pf[0]);
}

/*
 * The RDMA device behind the selected netdev, and whether the node's netns
 * mode is what the config asks for and the attach mode can work in. Nothing
 * is changed here; the facts go to the journal's NIC n.
 */
static int plan_rdma(struct hpn_attach *a, const struct hpn_conf *conf, size_t i,
		     struct hpn_nic_plan *np, struct hpn_journal_nic *n, struct hpn_err *err)
{
	const struct hpn_link *dev = &np->dev;
	struct hpn_rdma_plan *p = &np->rdma;
	enum hpn_mode mode = hpn_conf_nic_mode(conf, np->share, NULL);
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
	/* softRoce: a device made in the pod when there is none to bind (softroce.c). */
	r = hpn_soft_plan(a, conf, i, np, n, err);
	if (r < 0)
		return r;
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
	if (p->mode == HPN_RDMA_NETNS_EXCLUSIVE && np->share)
		return hpn_err_set(err, HPN_E_RDMA, EINVAL,
				   "a share of \"%s\" needs the shared RDMA netns mode, the "
				   "node's is exclusive: a child of \"%s\" cannot carry the whole "
				   "RDMA device \"%s\" into one pod (rdma system set netns shared, "
				   "or claim the whole NIC)",
				   dev->name, dev->name, p->dev.name);
	if (p->mode == HPN_RDMA_NETNS_EXCLUSIVE && mode != HPN_MODE_MOVE)
		return hpn_err_set(err, HPN_E_RDMA, EINVAL,
				   "mode %s needs the shared RDMA netns mode, the node's is "
				   "exclusive: a child of \"%s\" cannot carry the whole RDMA "
				   "device \"%s\" into one pod (rdma system set netns shared, or "
				   "mode move)",
				   mode == HPN_MODE_MACVLAN ? "macvlan" : "ipvlan", dev->name,
				   p->dev.name);
	if (p->mode == HPN_RDMA_NETNS_EXCLUSIVE && is_stacked(dev) && !p->create)
		return hpn_err_set(err, HPN_E_RDMA, EINVAL,
				   "\"%s\" is a %s of \"%s\": in exclusive RDMA netns mode "
				   "moving it would take the parent's whole RDMA device \"%s\" "
				   "into this pod (select the parent, or use shared mode with "
				   "mode macvlan)",
				   dev->name, dev->kind, p->dev.netdev, p->dev.name);
	hpn_info("RDMA device \"%s\" port %u (%s%s%s%s) serves \"%s\"; netns mode %s", p->dev.name,
		 p->dev.port, hpn_rdma_kind_name(p->dev.kind), p->dev.vf ? " VF" : "",
		 p->dev.erdma ? " " : "", hpn_erdma_mode_name(p->dev.erdma), p->dev.netdev,
		 hpn_rdma_netns_name(p->mode));
	if (conf->nccl.enabled && p->dev.proto == HPN_RDMA_PROTO_ROCE &&
	    p->dev.kind != HPN_RDMA_ERDMA)
		plan_qos(a, conf, p->create ? dev->name : p->dev.netdev, p);
	snprintf(n->rdma.name, sizeof(n->rdma.name), "%s", p->dev.name);
	snprintf(n->rdma.netdev, sizeof(n->rdma.netdev), "%s", p->dev.netdev);
	/* A child leaves its parent on the host: the soft device cannot die of it. */
	if (p->dev.soft && p->dev.kind == HPN_RDMA_RXE && mode == HPN_MODE_MOVE && !p->create)
		snprintf(n->rdma.soft_type, sizeof(n->rdma.soft_type), "rxe");
	return 0;
}

/*
 * The NIC's RDMA device against the GPU model's profile, before anything
 * changes: a profile whose ib is on needs a device NCCL's IB transport can
 * use, which an iWARP one is not (erdma's default mode: its QPs connect
 * only through iw_cm), then a device of its drivers.
 */
static int check_profile(const struct hpn_conf *conf, const struct hpn_rdma_plan *p,
			 struct hpn_err *err)
{
	const struct hpn_nccl_profile *prof = hpn_nccl_profile(&conf->nccl, conf->gpu_model);
	const struct hpn_rdma_dev *d = &p->dev;

	if (p->found && !p->create && prof->ib == HPN_NCCL_IB_ON && !hpn_rdma_nccl_ib(d)) {
		if (d->kind == HPN_RDMA_ERDMA)
			return hpn_err_set(
				err, HPN_E_RDMA, EPROTONOSUPPORT,
				"GPU model series %s needs NCCL's IB transport (ib on), "
				"but RDMA device \"%s\" serving \"%s\" is eRDMA in iWARP "
				"mode (the erdma driver's default), which NCCL's IB "
				"transport cannot use: load erdma with compat_mode=1, or "
				"install the eRDMA controller's OFED package",
				prof->name, d->name, d->netdev);
		return hpn_err_set(err, HPN_E_RDMA, EPROTONOSUPPORT,
				   "GPU model series %s needs NCCL's IB transport (ib on), but "
				   "RDMA device \"%s\" serving \"%s\" speaks iWARP (%s), which "
				   "NCCL's IB transport cannot use",
				   prof->name, d->name, d->netdev, d->driver[0] ? d->driver : "?");
	}
	return hpn_nccl_check_driver(prof, p->found ? hpn_rdma_kind_name(d->kind) : NULL, err);
}

/*
 * nccl.losslessRequired, before anything changes: the hints' class judged
 * on each NIC's QoS as ADD's hints will judge it (hpn_nccl_render, then
 * hpn_nccl_qos), from the plan's facts. The class comes from the profile,
 * the config and the QoS alone; the proof's GID and the addresses, which
 * are not known yet, change no verdict.
 */
static int check_lossless(const struct hpn_conf *conf, const struct hpn_journal_nic *nics,
			  const struct hpn_nic_plan *plans, size_t n, struct hpn_err *err)
{
	struct hpn_rdma_info ri[HPN_MAX_NICS];
	struct hpn_bound_nic b[HPN_MAX_NICS];
	struct hpn_rdma_qos rq[HPN_MAX_NICS];

	if (!conf->nccl.enabled || !conf->nccl.lossless_required)
		return 0;
	for (size_t i = 0; i < n; i++) {
		const struct hpn_rdma_plan *p = &plans[i].rdma;

		ri[i] = (struct hpn_rdma_info){ .interface = (int)i,
						.bound = p->found,
						.port = (int)p->dev.port,
						.gid_index = -1 };
		snprintf(ri[i].device, sizeof(ri[i].device), "%s", p->dev.name);
		snprintf(ri[i].driver, sizeof(ri[i].driver), "%s", hpn_rdma_kind_name(p->dev.kind));
		snprintf(ri[i].transport, sizeof(ri[i].transport), "%s",
			 hpn_rdma_proto_name(p->dev.proto));
		b[i] = (struct hpn_bound_nic){ .ifname = nics[i].pod_ifname,
					       .rdma = &ri[i],
					       .qos = p->qos_read ? &p->qos : NULL };
	}
	return hpn_nccl_judge(&conf->nccl, hpn_nccl_profile(&conf->nccl, conf->gpu_model), b, n, rq,
			      err);
}

/*
 * An eRDMA NIC of a pod with GPUs (its count known, from any source) must
 * have an MTU in the pod of 8500 or 1400, Alibaba's rule for GPU instances
 * (NCCL's LL128 corrupts data over another): the config's mtu, else the
 * host NIC's, which a move keeps and a child inherits. Refused before
 * anything changes; erdmaAnyMtu lets it through.
 */
static int check_erdma_mtu(const struct hpn_conf *conf, const struct hpn_nic_plan *p,
			   struct hpn_err *err)
{
	const struct hpn_rdma_dev *d = &p->rdma.dev;
	unsigned int mtu = conf->mtu ? (unsigned int)conf->mtu : p->dev.mtu;

	if (!p->rdma.found || p->rdma.create || d->kind != HPN_RDMA_ERDMA || conf->gpu_count <= 0 ||
	    conf->erdma_any_mtu || hpn_erdma_gpu_mtu_ok(mtu))
		return 0;
	return hpn_err_set(err, conf->mtu ? HPN_E_INVALID_CONFIG : HPN_E_RDMA, EINVAL,
			   "NIC \"%s\" (eRDMA %s, RDMA device \"%s\") would have MTU %u%s in a "
			   "pod with %d GPUs: on GPU instances an eRDMA NIC's MTU must be %d "
			   "(jumbo frames) or %d, or NCCL's LL128 protocol corrupts data (set "
			   "%s, or erdmaAnyMtu to allow it)",
			   p->dev.name, hpn_erdma_mode_name(d->erdma), d->name, mtu,
			   conf->mtu ? " (the config's mtu)" : "", conf->gpu_count,
			   HPN_ERDMA_GPU_MTU_JUMBO, HPN_ERDMA_GPU_MTU,
			   conf->mtu ? "mtu to 8500 or 1400"
				     : "the NIC's MTU, or mtu, to 8500 or 1400");
}

/* A MAC for a macvlan child, chosen before it exists so the journal can name it. */
static int child_mac(uint8_t mac[HPN_MAC_LEN])
{
	if (getrandom(mac, HPN_MAC_LEN, 0) != HPN_MAC_LEN)
		return -errno;
	mac[0] = (uint8_t)((mac[0] & 0xfe) | 0x02); /* unicast, locally administered */
	return 0;
}

size_t hpn_claim_count(const struct hpn_conf *conf, const struct hpn_alloc *al,
		       const struct hpn_gpus *gpus)
{
	if (al)
		return al->n;
	if (conf->selector != HPN_SEL_MATCH)
		return 1;
	return conf->gpus.per_gpu && gpus && gpus->n ? gpus->n : conf->count;
}

int hpn_claim(struct hpn_attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
	      const struct hpn_alloc *al, const struct hpn_gpus *gpus, struct hpn_nic_plan *plans,
	      struct hpn_err *err)
{
	static const struct hpn_gpus none = { .n = 0 };
	struct hpn_holders h = { 0 };
	size_t n = hpn_claim_count(conf, al, gpus);
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
	if (!gpus)
		gpus = &none;
	for (size_t i = 0; i < n; i++)
		plans[i].gpu = SIZE_MAX;
	a->j.nic_source = al ? (!strcmp(al->source, "dra") ? HPN_NIC_SRC_DRA : HPN_NIC_SRC_KUBELET)
			  : conf->selector == HPN_SEL_MATCH ? HPN_NIC_SRC_POOL
							    : HPN_NIC_SRC_CONFIG;
	if (al) {
		r = select_allocated(a, conf, &h, al, plans, err);
		if (r == 0 && gpus->n)
			r = pair_allocated(a, conf, &h, gpus, n, plans, err);
	} else if (conf->selector == HPN_SEL_MATCH) {
		r = select_pool(a, conf, &h, gpus, n, plans, err);
	} else {
		r = select_device(a->ns.host, conf, &plans[0].dev, &plans[0].rdma.dev, err);
		plans[0].rdma.found = r == 0 && conf->selector == HPN_SEL_RDMA;
		if (r == 0)
			r = check_unclaimed(&h, conf, &plans[0], err);
	}
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct hpn_journal_nic *nic = &a->j.nics[i];
		unsigned int child_mode = 0;
		enum hpn_mode mode;

		memset(nic, 0, sizeof(*nic));
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
		r = plan_rdma(a, conf, i, &plans[i], nic, err);
		/* The GPU model's profile may need RDMA, NCCL's IB, or a driver, on every NIC. */
		if (r == 0 && conf->nccl.enabled)
			r = check_profile(conf, &plans[i].rdma, err);
		if (r == 0)
			r = check_erdma_mtu(conf, &plans[i], err);
		if (r < 0)
			break;
		nic->host = plans[i].dev;
		if (hpn_sysfs_netdev_pci(conf->sysfs_root, nic->host.name, nic->pci) < 0)
			nic->pci[0] = '\0';
		if (plans[i].gpu < gpus->n) {
			const struct hpn_gpu *g = &gpus->v[plans[i].gpu];

			snprintf(nic->gpu_id, sizeof(nic->gpu_id), "%s", g->id);
			snprintf(nic->gpu_pci, sizeof(nic->gpu_pci), "%s", g->pci);
			snprintf(nic->gpu_dist, sizeof(nic->gpu_dist), "%s",
				 hpn_gpu_dist_name(plans[i].dist));
			snprintf(nic->gpu_best, sizeof(nic->gpu_best), "%s",
				 hpn_gpu_dist_name(plans[i].best));
		}
		mode = hpn_conf_nic_mode(conf, plans[i].share, &child_mode);
		if (mode != HPN_MODE_MOVE) {
			nic->kind = HPN_NIC_CHILD;
			snprintf(nic->child_kind, sizeof(nic->child_kind), "%s",
				 mode == HPN_MODE_MACVLAN ? "macvlan" : "ipvlan");
			/* A passthru macvlan's MAC is its parent's: setting one would change the host NIC. */
			if (mode == HPN_MODE_MACVLAN && child_mode != MACVLAN_MODE_PASSTHRU) {
				r = child_mac(nic->child_mac);
				if (r < 0)
					break;
				nic->has_child_mac = true;
			}
		}
		a->j.n_nics = i + 1;
		hpn_info("attach \"%s\"%s%s as %s\"%s\" in %s%s%s%s%s%s", nic->host.name,
			 nic->pci[0] ? " pci " : "", nic->pci,
			 nic->kind == HPN_NIC_CHILD ? "a child " : "", nic->pod_ifname, env->netns,
			 !plans[i].share		      ? ""
			 : a->j.nic_source == HPN_NIC_SRC_DRA ? ", a share of a DRA claim"
							      : ", a share",
			 nic->gpu_id[0] ? ", for GPU " : "",
			 nic->gpu_pci[0] ? nic->gpu_pci : nic->gpu_id, nic->gpu_id[0] ? " at " : "",
			 nic->gpu_dist);
	}
	if (r == 0)
		r = check_lossless(conf, a->j.nics, plans, n, err);
out:
	hpn_holders_free(&h);
	return r;
}
