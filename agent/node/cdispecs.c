// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's CDI specs (cdispecs.h): the pool's devices as the node shows
 * them after each scan (node.c), each NIC's RDMA character devices read from
 * sysfs as Allocate reads them (hpn_rdma_cdevs), written and removed through
 * lib/cdi.c. Nothing is remembered but what was said: the directory and
 * the files are the state, so a restarted agent finds its specs and keeps
 * or removes them by the same rules.
 */
#include "cdispecs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi.h"
#include "log.h"
#include "nccl.h"
#include "node.h"
#include "rdma.h"
#include "util.h"

/* What to do with a device's spec. */
enum act { ACT_REMOVE, ACT_WRITE, ACT_KEEP };

/* The last problem said about one spec (or the directory): said again only when it changes. */
struct said {
	char id[HPN_CDI_ID_MAX]; /* "": the directory */
	char msg[HPN_ERR_MSG];
};

struct cdispecs {
	struct cdispecs_opts o;
	struct node *node;
	bool hook_ok;		     /* o.hook names an executable: else no spec at all */
	char hook_said[HPN_ERR_MSG]; /* what was last said of the hook ("": that it is usable) */
	struct said said[HPN_AGENT_MAX_DEVICES + 1];
	size_t n_said;
	/* During a sync: the IDs whose spec stays (written or kept), for the stale sweep. */
	const char *keep[HPN_AGENT_MAX_DEVICES];
	size_t n_keep;
};

static struct said *said_of(struct cdispecs *c, const char *id, bool add)
{
	for (size_t i = 0; i < c->n_said; i++)
		if (!strcmp(c->said[i].id, id))
			return &c->said[i];
	if (!add || c->n_said == HPN_ARRAY_SIZE(c->said))
		return NULL;
	memset(&c->said[c->n_said], 0, sizeof(c->said[0]));
	snprintf(c->said[c->n_said].id, sizeof(c->said[0].id), "%s", id);
	return &c->said[c->n_said++];
}

/* A problem with id's spec (or the directory, id ""): warned once per cause. */
static void problem(struct cdispecs *c, const char *id, const char *msg)
{
	struct said *s = said_of(c, id, true);

	if (s && !strcmp(s->msg, msg))
		return;
	hpn_warn("%s (the device plugin serves on; Allocate names no CDI device for %s)", msg,
		 id[0] ? id : "the pool");
	if (s)
		snprintf(s->msg, sizeof(s->msg), "%s", msg);
}

/* id's spec (or the directory) is fine again: said once. */
static void solved(struct cdispecs *c, const char *id)
{
	struct said *s = said_of(c, id, false);

	if (!s || !s->msg[0])
		return;
	hpn_info("CDI: %s is in order again", id[0] ? id : c->o.dir);
	s->msg[0] = '\0';
}

/* The directory, made if it is missing: whether specs can be written there now. */
static bool dir_ready(struct cdispecs *c)
{
	struct stat st;
	char msg[HPN_ERR_MSG];

	if (lstat(c->o.dir, &st) < 0 && errno == ENOENT && hpn_mkdir_p(c->o.dir, 0755) == 0)
		hpn_info("CDI: made the spec directory %s", c->o.dir);
	if (lstat(c->o.dir, &st) < 0)
		hpn_msgf(msg, sizeof(msg), "the CDI spec directory %s: %s", c->o.dir,
			 strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		hpn_msgf(msg, sizeof(msg), "the CDI spec directory %s is not a directory%s",
			 c->o.dir, S_ISLNK(st.st_mode) ? " (a symbolic link: never followed)" : "");
	else if (access(c->o.dir, W_OK) < 0)
		hpn_msgf(msg, sizeof(msg), "the CDI spec directory %s is not writable: %s",
			 c->o.dir, strerror(errno));
	else {
		solved(c, "");
		return true;
	}
	problem(c, "", msg);
	return false;
}

bool cdispecs_nic_nodes(const char *sysfs_root, const char *dev_root, const char *ibdev,
			struct hpn_cdi_dev *out)
{
	struct hpn_rdma_cdevs cd;
	bool verbs = false;

	hpn_rdma_cdevs(sysfs_root, ibdev, &cd);
	/* uverbsN first, as Allocate lists them for libibverbs; only nodes with numbers. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < cd.n; k++) {
			const struct hpn_rdma_cdev *v = &cd.v[k];
			struct hpn_cdi_node *n = &out->nodes[out->n_nodes];
			bool is_verbs = !strncmp(v->name, "uverbs", 6);

			/* One place is kept for rdma_cm. */
			if (is_verbs != (pass == 0) || !v->major ||
			    out->n_nodes >= HPN_CDI_NODES_MAX - 1)
				continue;
			snprintf(n->name, sizeof(n->name), "%s", v->name);
			snprintf(n->host_path, sizeof(n->host_path), "%s/infiniband/%s", dev_root,
				 v->name);
			n->major = v->major;
			n->minor = v->minor;
			out->n_nodes++;
			verbs |= is_verbs;
		}
	return verbs;
}

void cdispecs_cm_node(const char *sysfs_root, const char *dev_root, struct hpn_cdi_dev *out)
{
	struct hpn_rdma_cdevs cd;
	struct hpn_cdi_node *n;

	/* Only rdma_cm is read: an RDMA device no one has gives no class nodes. */
	hpn_rdma_cdevs(sysfs_root, "", &cd);
	if (!cd.rdma_cm || !cd.cm.major || out->n_nodes >= HPN_CDI_NODES_MAX)
		return;
	n = &out->nodes[out->n_nodes++];
	snprintf(n->name, sizeof(n->name), "rdma_cm");
	snprintf(n->host_path, sizeof(n->host_path), "%s/infiniband/rdma_cm", dev_root);
	n->major = cd.cm.major;
	n->minor = cd.cm.minor;
}

/*
 * With the config's NCCL hints on, out's hints mount: <nccl.dir>/nic/<id>/
 * nccl.conf read-only at nccl.confFile. Whichever pod holds the NIC, the
 * link its ADD makes (nccl.h) leads to its own file by the time the runtime
 * resolves this, at CreateContainer. Hints off (or a path over
 * HPN_CDI_PATH_MAX): no mount.
 */
static void nic_hints(const struct hpn_nccl_conf *nc, const char *id, struct hpn_cdi_dev *out)
{
	char host[PATH_MAX];

	if (nc->enabled && nc->dir && hpn_nccl_link_file_path(nc->dir, id, host, sizeof(host)) == 0)
		(void)hpn_cdi_set_hints(out, host,
					nc->conf_file ? nc->conf_file : HPN_DEFAULT_NCCL_CONF_FILE);
}

/*
 * What d's spec should be: written with d's character devices (out), kept
 * as it is (a NIC moved into a pod whose device the host no longer sees or
 * names: exclusive mode, or a journal that names none), or removed (no
 * device, gone, an ID CDI cannot name, or ADD's own spec for it there: the
 * runtime must never see a name twice).
 */
static enum act want(const struct cdispecs *c, const struct agent_dev *d, struct hpn_cdi_dev *out)
{
	const struct hpn_conf *conf = &c->node->conf;

	/* No hook, no spec: without it any pod that names the device gets it. */
	if (!c->hook_ok || d->gone || !hpn_cdi_id_valid(d->id) ||
	    hpn_cdi_present(c->o.dir, HPN_CDI_POD, d->id))
		return ACT_REMOVE;
	/* In a pod, with a device the host cannot name: the spec made while it was here stays. */
	if (!d->rdma[0])
		return d->held ? ACT_KEEP : ACT_REMOVE;
	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", d->id);
	if (!cdispecs_hook(c->o.hook, conf->state_dir, conf->name, &out->hook, NULL, 0))
		return ACT_REMOVE;
	snprintf(out->ibdev, sizeof(out->ibdev), "%s", d->rdma);
	if (!cdispecs_nic_nodes(conf->sysfs_root, c->o.dev_root, d->rdma, out))
		return d->held ? ACT_KEEP : ACT_REMOVE;
	cdispecs_cm_node(conf->sysfs_root, c->o.dev_root, out);
	nic_hints(&conf->nccl, d->id, out);
	return ACT_WRITE;
}

/* Removes the agent's spec for id if it is there and ours (else says what is there). */
static void remove_spec(struct cdispecs *c, const char *id, const char *why)
{
	char file[HPN_CDI_FILE_MAX];
	struct hpn_err err = { 0 };
	bool there;
	int r;

	if (hpn_cdi_file(HPN_CDI_AGENT, id, file) < 0)
		return;
	there = hpn_cdi_present(c->o.dir, HPN_CDI_AGENT, id);
	r = hpn_cdi_remove(c->o.dir, file, &err);
	if (r != 0) {
		problem(c, id, err.msg);
		return;
	}
	solved(c, id);
	if (there)
		hpn_info("CDI: removed %s/%s (%s)", c->o.dir, file, why);
}

/* d's spec in step: written, kept or removed. Whether a spec of ours is there after. */
static bool sync_dev(struct cdispecs *c, const struct agent_dev *d)
{
	struct hpn_cdi_dev cd;
	struct hpn_err err = { 0 };
	enum act a = want(c, d, &cd);
	int r;

	if (a == ACT_REMOVE) {
		remove_spec(c, d->id,
			    !c->hook_ok	 ? "no CDI hook"
			    : d->gone	 ? d->why
			    : d->rdma[0] ? "its spec is ADD's, or it cannot name a CDI device"
					 : "no RDMA device");
		return false;
	}
	if (c->n_keep < HPN_ARRAY_SIZE(c->keep))
		c->keep[c->n_keep++] = d->id;
	if (a == ACT_KEEP)
		return hpn_cdi_present(c->o.dir, HPN_CDI_AGENT, d->id);
	r = hpn_cdi_write(c->o.dir, HPN_CDI_AGENT, &cd, &err);
	if (r < 0) {
		problem(c, d->id, err.msg);
		return false;
	}
	solved(c, d->id);
	if (r > 0)
		hpn_info("CDI: %s=%s (%s, %s: %zu device nodes) in %s", HPN_CDI_KIND, d->id,
			 d->ifname, d->rdma, cd.n_nodes, c->o.dir);
	return true;
}

static bool kept(const struct cdispecs *c, const char *id)
{
	for (size_t i = 0; i < c->n_keep; i++)
		if (!strcmp(c->keep[i], id))
			return true;
	return false;
}

bool cdispecs_hook(const char *hook, const char *state_dir, const char *network,
		   struct hpn_cdi_hook *h, char *why, size_t len)
{
	if (!hook || !hook[0]) {
		hpn_msgf(why, len, "--cdi-hook is empty");
		return false;
	}
	if (access(hook, X_OK) < 0) {
		hpn_msgf(why, len, "--cdi-hook %s: %s", hook, strerror(errno));
		return false;
	}
	if (hpn_snprintf(h->path, sizeof(h->path), "%s", hook) < 0 ||
	    hpn_snprintf(h->state_dir, sizeof(h->state_dir), "%s", state_dir) < 0 ||
	    hpn_snprintf(h->network, sizeof(h->network), "%s", network) < 0) {
		memset(h, 0, sizeof(*h));
		hpn_msgf(why, len, "the hook's path, stateDir or the network name is too long");
		return false;
	}
	return true;
}

/*
 * Whether the hook names an executable now (a package upgrade may take it
 * away a while): said when that changes. Without it no spec stays.
 */
static bool hook_ready(struct cdispecs *c)
{
	struct hpn_cdi_hook probe;
	char why[HPN_ERR_MSG] = "";

	c->hook_ok = cdispecs_hook(c->o.hook, c->node->conf.state_dir, c->node->conf.name, &probe,
				   why, sizeof(why));
	if (c->hook_ok && c->hook_said[0])
		hpn_info("CDI: the hook %s is there again: specs are written", c->o.hook);
	else if (!c->hook_ok && strcmp(c->hook_said, why))
		hpn_warn("CDI: no specs (%s): a spec without its createRuntime hook would give a "
			 "NIC's RDMA device to any pod that names it; Allocate names no CDI "
			 "device and the agent's specs in %s are removed",
			 why, c->o.dir);
	snprintf(c->hook_said, sizeof(c->hook_said), "%s", c->hook_ok ? "" : why);
	return c->hook_ok;
}

/* A spec of the agent's rule for no device the pool has now: stale. */
static void sweep_one(const char *id, void *ud)
{
	struct cdispecs *c = ud;

	if (!kept(c, id) && !cdispecs_is_claim(id))
		remove_spec(c, id, "no such NIC in the pool now");
}

void cdispecs_sync(struct cdispecs *c)
{
	struct hpn_err err = { 0 };
	int r;

	if (!c || !dir_ready(c))
		return;
	hook_ready(c);
	c->n_keep = 0;
	for (size_t i = 0; i < c->node->devs.n; i++)
		sync_dev(c, &c->node->devs.v[i]);
	r = hpn_cdi_each(c->o.dir, HPN_CDI_AGENT, sweep_one, c, &err);
	if (r < 0)
		problem(c, "", err.msg[0] ? err.msg : strerror(-r));
	c->n_keep = 0;
}

bool cdispecs_ready(struct cdispecs *c, const char *id)
{
	const struct agent_dev *d;
	bool ok;

	if (!c || !(d = agent_devs_find(&c->node->devs, id)) || !dir_ready(c) || !hook_ready(c))
		return false;
	ok = sync_dev(c, d);
	c->n_keep = 0;
	return ok;
}

int cdispecs_start(struct node *node, const struct cdispecs_opts *o, struct cdispecs **ret)
{
	struct cdispecs *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->o = *o;
	c->node = node;
	/* Said at start, whatever the directory: the hook's word comes from the first sync. */
	if (hook_ready(c))
		hpn_info("CDI: specs of kind %s in %s, hook %s cdi-hook", HPN_CDI_KIND, o->dir,
			 o->hook);
	cdispecs_sync(c);
	*ret = c;
	return 0;
}

bool cdispecs_is_claim(const char *id)
{
	return hpn_cdi_is_claim(id);
}

void cdispecs_free(struct cdispecs *c)
{
	free(c);
}
