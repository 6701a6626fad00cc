// SPDX-License-Identifier: Apache-2.0
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach.h"
#include "ipam.h"
#include "nccl.h"
#include "nl.h"
#include "pool.h"
#include "rdma.h"
#include "sysfs.h"

int hpn_status(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	/* The doctor's readiness checks (doctor.c), so both give the same reasons. containerd
	 * 2.x shows the message alone as NetworkReady's ("Network plugin returns error: ..."),
	 * and kubelet marks the node NotReady with it: it names the plugin. */
	int r = hpn_ready_check(conf, env->path, err);

	if (r < 0)
		hpn_err_prefix(err, "hpn-rdma");
	return r;
}

#define NOTE(...) hpn_msgf(note, HPN_ERR_MSG, __VA_ARGS__)

/* Without creating anything (the doctor only looks): the nearest existing
 * ancestor of <stateDir>/<name> must be a directory this process can write. */
static int check_state_dir(const struct hpn_conf *conf, const char *cni_path, char *note,
			   struct hpn_err *err)
{
	char path[PATH_MAX];
	struct stat st;
	bool exists = true;

	if (hpn_snprintf(path, sizeof(path), "%s/%s", conf->state_dir, conf->name) < 0)
		return hpn_err_set(err, HPN_E_IO, ENAMETOOLONG, "stateDir %s: name too long",
				   conf->state_dir);
	while (stat(path, &st) < 0) {
		if (errno != ENOENT)
			return hpn_err_set(err, HPN_E_IO, errno, "stateDir %s: %s: %s",
					   conf->state_dir, path, strerror(errno));
		char *slash = strrchr(path, '/');

		exists = false;
		if (!slash || slash == path)
			return hpn_err_set(err, HPN_E_IO, ENOENT, "stateDir %s: no such directory",
					   conf->state_dir);
		*slash = '\0';
	}
	if (!S_ISDIR(st.st_mode))
		return hpn_err_set(err, HPN_E_IO, ENOTDIR, "stateDir %s: %s is not a directory",
				   conf->state_dir, path);
	if (faccessat(AT_FDCWD, path, W_OK | X_OK, AT_EACCESS) < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "stateDir %s is not writable (%s: %s)",
				   conf->state_dir, path, strerror(errno));
	NOTE("%s/%s %s", conf->state_dir, conf->name,
	     exists ? "is writable" : "can be created (ADD creates it)");
	return 0;
}

static int check_netlink(const struct hpn_conf *conf, const char *cni_path, char *note,
			 struct hpn_err *err)
{
	struct nl_sock *sk = NULL;
	int r = hpn_nl_open(NETLINK_ROUTE, &sk);

	hpn_nl_close(sk);
	if (r < 0)
		return hpn_err_set(err, HPN_E_NOT_AVAILABLE, -r, "netlink: %s", strerror(-r));
	NOTE("rtnetlink socket opens");
	return 0;
}

static int check_ipam(const struct hpn_conf *conf, const char *cni_path, char *note,
		      struct hpn_err *err)
{
	char path[PATH_MAX];

	if (!conf->has_ipam) {
		NOTE("no ipam in the config");
		return 1;
	}
	if (hpn_ipam_find(conf->ipam_type, cni_path, path) < 0)
		return hpn_err_set(err, HPN_E_NOT_AVAILABLE, ENOENT,
				   "ipam plugin \"%s\" not found in CNI_PATH", conf->ipam_type);
	NOTE("ipam plugin %s", path);
	return 0;
}

/* With rdmaRequired the node needs an RDMA subsystem, in the rdmaNetns mode if one is set. */
static int check_rdma(const struct hpn_conf *conf, const char *cni_path, char *note,
		      struct hpn_err *err)
{
	enum hpn_rdma_netns mode;
	struct hpn_err rerr = { 0 };
	int r;

	if (!conf->rdma_required) {
		NOTE("rdmaRequired is false");
		return 1;
	}
	/* What ADD of a NIC without an RDMA device would be refused for, with every reason. */
	if (conf->soft_roce) {
		char why[HPN_ERR_MSG - 32];

		r = hpn_rdma_soft_ready(conf->sysfs_root, why, sizeof(why));
		if (r < 0)
			return hpn_err_set(err, HPN_E_NOT_AVAILABLE, -r, "softRoce: %s", why);
	}
	r = hpn_rdma_node_netns_mode(conf->sysfs_root, &mode, &rerr);
	if (r == -EPROTONOSUPPORT)
		return hpn_sysfs_fake(conf->sysfs_root)
			       ? hpn_err_set(
					 err, HPN_E_NOT_AVAILABLE, -r,
					 "the kernel has no RDMA subsystem (no %s/module/ib_core) "
					 "and rdmaRequired is true",
					 conf->sysfs_root)
			       : hpn_err_set(
					 err, HPN_E_NOT_AVAILABLE, -r,
					 "the kernel has no RDMA subsystem (no RDMA netlink) and "
					 "rdmaRequired is true");
	if (r < 0)
		return hpn_err_set(err, HPN_E_NOT_AVAILABLE, -r, "%s", rerr.msg);
	if (conf->rdma_netns != HPN_RDMA_NETNS_AUTO && conf->rdma_netns != mode)
		return hpn_err_set(err, HPN_E_NOT_AVAILABLE, EINVAL,
				   "the node's RDMA netns mode is %s, but rdmaNetns requires %s",
				   hpn_rdma_netns_name(mode),
				   hpn_rdma_netns_name(conf->rdma_netns));
	if (mode == HPN_RDMA_NETNS_EXCLUSIVE && conf->mode != HPN_MODE_MOVE)
		return hpn_err_set(err, HPN_E_NOT_AVAILABLE, EINVAL,
				   "mode %s needs the shared RDMA netns mode; the node's is "
				   "exclusive",
				   conf->mode == HPN_MODE_MACVLAN ? "macvlan" : "ipvlan");
	NOTE("RDMA netns mode %s (rdmaNetns %s)%s", hpn_rdma_netns_name(mode),
	     hpn_rdma_netns_name(conf->rdma_netns),
	     conf->soft_roce ? "; softRoce: rxe serves pod netns on this kernel, rdma_rxe is there"
			     : "");
	return 0;
}

/* The proof inside the pod opens the device (ib_uverbs) and binds with rdma_cm (rdma_ucm).
 * Their class directories exist whether the modules are loaded or built in. */
static int check_verbs(const struct hpn_conf *conf, const char *cni_path, char *note,
		       struct hpn_err *err)
{
	const char *root = conf->sysfs_root;

	if (!conf->rdma_required) {
		NOTE("rdmaRequired is false");
		return 1;
	}
	if (!hpn_sysfs_exists("%s/class/infiniband_verbs", root))
		return hpn_err_set(err, HPN_E_NOT_AVAILABLE, ENOENT,
				   "no verbs interface (%s/class/infiniband_verbs): load ib_uverbs",
				   root);
	if (!hpn_sysfs_exists("%s/class/misc/rdma_cm", root))
		return hpn_err_set(err, HPN_E_NOT_AVAILABLE, ENOENT,
				   "no rdma_cm interface (%s/class/misc/rdma_cm): load rdma_ucm",
				   root);
	NOTE("verbs (ib_uverbs) and rdma_cm (rdma_ucm) interfaces present");
	return 0;
}

/*
 * The config's GPU model (nccl.gpuModel) may need a kind of RDMA device: the
 * module that registers it must be loaded, or every ADD fails with 108.
 */
static int check_profile(const struct hpn_conf *conf, const char *cni_path, char *note,
			 struct hpn_err *err)
{
	static const enum hpn_rdma_kind kinds[] = { HPN_RDMA_MLX5, HPN_RDMA_ERDMA, HPN_RDMA_RXE };
	const struct hpn_nccl_profile *p;
	char wanted[64] = "";
	size_t off = 0;

	if (!conf->nccl.enabled || !conf->gpu_model) {
		NOTE("no nccl.gpuModel in the config (a pod's comes with the pod)");
		return 1;
	}
	p = hpn_nccl_profile(&conf->nccl, conf->gpu_model);
	if (!p->drivers || (p->drivers & HPN_NCCL_DRV_OTHER)) {
		NOTE("GPU model %s (profile %s) takes any RDMA driver", conf->gpu_model, p->name);
		return 1;
	}
	for (size_t i = 0; i < HPN_ARRAY_SIZE(kinds); i++) {
		const char *mod = hpn_rdma_kind_module(kinds[i]);

		if (!(p->drivers & hpn_nccl_driver_bit(hpn_rdma_kind_name(kinds[i]))))
			continue;
		if (hpn_sysfs_exists("%s/module/%s", conf->sysfs_root, mod)) {
			NOTE("GPU model %s (profile %s): %s is loaded", conf->gpu_model, p->name,
			     mod);
			return 0;
		}
		off += (size_t)snprintf(wanted + off, sizeof(wanted) - off, "%s%s",
					off ? " or " : "", mod);
		if (off >= sizeof(wanted))
			off = sizeof(wanted) - 1;
	}
	return hpn_err_set(err, HPN_E_NOT_AVAILABLE, ENOENT,
			   "nccl.gpuModel %s (profile %s) needs an RDMA device of %s, and that "
			   "module is not loaded",
			   conf->gpu_model, p->name, wanted);
}

static int check_pool(const struct hpn_conf *conf, const char *cni_path, char *note,
		      struct hpn_err *err)
{
	return hpn_pool_ready(conf, note, HPN_ERR_MSG, err);
}

const struct hpn_ready_check hpn_ready_checks[] = {
	{ "stateDir", check_state_dir }, { "netlink", check_netlink },
	{ "ipam", check_ipam },		 { "rdma", check_rdma },
	{ "verbs", check_verbs },	 { "profile", check_profile },
	{ "pool", check_pool },		 { NULL, NULL },
};

int hpn_ready_check(const struct hpn_conf *conf, const char *cni_path, struct hpn_err *err)
{
	char note[HPN_ERR_MSG];

	/* Spec 1.1.0: any reason not to accept ADD now is code 50, with the reason. */
	for (size_t i = 0; hpn_ready_checks[i].name; i++) {
		struct hpn_err cerr = { 0 };
		int r = hpn_ready_checks[i].fn(conf, cni_path, note, &cerr);

		if (r < 0)
			return hpn_err_set(err, HPN_E_NOT_AVAILABLE, -r, "%s", cerr.msg);
	}
	return 0;
}
