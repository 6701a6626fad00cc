// SPDX-License-Identifier: Apache-2.0
#include "session.h"

#include <errno.h>
#include <netlink/netlink.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cdi.h"
#include "netns.h"
#include "nl.h"
#include "util.h"

void hpn_nsctx_close(struct hpn_nsctx *ns)
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

int hpn_nsctx_open_pod(struct hpn_nsctx *ns, const char *netns, struct hpn_err *err)
{
	return hpn_nl_open_in(ns->pod_fd, ns->host_fd, netns, &ns->pod, err);
}

int hpn_nsctx_open_host(struct hpn_nsctx *ns, struct hpn_err *err)
{
	int r = hpn_netns_current(&ns->host_fd);

	if (r < 0)
		return hpn_err_set(err, HPN_E_NETNS, r, "open the host netns: %s", strerror(-r));
	r = hpn_nl_open(NETLINK_ROUTE, &ns->host);
	if (r < 0)
		return hpn_err_set(err, HPN_E_NETLINK, r, "netlink socket: %s", strerror(-r));
	return 0;
}

int hpn_session_open(struct hpn_store *st, struct hpn_nsctx *ns, const struct hpn_conf *conf,
		     struct hpn_err *err)
{
	int r = hpn_store_open(conf->state_dir, conf->name, st, err);

	if (r >= 0)
		r = hpn_store_lock(st, HPN_LOCK_TIMEOUT_MS, err);
	if (r >= 0)
		r = hpn_nsctx_open_host(ns, err);
	return r;
}

int hpn_attach_open(struct hpn_attach *a, const struct hpn_env *env, const struct hpn_conf *conf,
		    struct hpn_err *err)
{
	int r;

	/* Not a compound literal: that would zero the journal's whole NIC list. */
	memset(a, 0, offsetof(struct hpn_attach, j));
	hpn_journal_init(&a->j);
	a->st = (struct hpn_store)HPN_STORE_INIT;
	a->ns.host_fd = a->ns.pod_fd = -1;
	r = hpn_store_key(env->container_id, env->ifname, a->key);
	if (r < 0)
		return hpn_err_set(err, HPN_E_INVALID_ENV, r, "state key for %s is too long",
				   env->container_id);
	r = hpn_session_open(&a->st, &a->ns, conf, err);
	if (r < 0)
		return r;
	r = hpn_journal_read(&a->st, a->key, &a->j, err);
	if (r == -ENOENT)
		return 0;
	if (r == -ESTALE) {
		hpn_warn("%s", err->msg);
		memset(err, 0, sizeof(*err));
		a->stale_file = true;
		return 0;
	}
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

void hpn_attach_close(struct hpn_attach *a)
{
	hpn_nsctx_close(&a->ns);
	hpn_journal_free(&a->j);
	hpn_store_close(&a->st);
}

void hpn_hints_owner(const struct hpn_conf *conf, const char *container_id, const char *cni_ifname,
		     struct hpn_nccl_owner *o)
{
	*o = (struct hpn_nccl_owner){ .container_id = container_id,
				      .network = conf->name,
				      .ifname = cni_ifname };
}

void hpn_hints_links_plan(struct hpn_journal *j)
{
	if (!j->hints_key[0])
		return;
	for (size_t i = 0; i < j->n_nics; i++) {
		char id[HPN_ALLOC_ID_MAX];

		/*
		 * A moved NIC is in one pod at a time, so its link leads to the one
		 * pod that can hold it; a child's parent serves several pods: none.
		 */
		if (j->nics[i].kind != HPN_NIC_MOVED)
			continue;
		hpn_alloc_journal_id(&j->nics[i], id);
		/* The agent writes no spec for an ID CDI cannot name: no link to read then. */
		if (hpn_cdi_id_valid(id) && hpn_nccl_valid_link(id))
			snprintf(j->nics[i].hints_link, sizeof(j->nics[i].hints_link), "%s", id);
	}
}

const char *hpn_ipam_ifname(const struct hpn_journal *j, const char *cni_ifname, size_t i)
{
	return i == 0 || !j ? cni_ifname : j->nics[i].pod_ifname;
}

bool hpn_untouched_pod(const struct hpn_env *env, const struct hpn_conf *conf)
{
	char key[HPN_KEY_MAX];

	return !conf->pod_selected && hpn_store_key(env->container_id, env->ifname, key) >= 0 &&
	       !hpn_journal_may_exist(conf->state_dir, conf->name, key);
}
