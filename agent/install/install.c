// SPDX-License-Identifier: Apache-2.0
/*
 * hpn-rdma-agent install / uninstall: what the DaemonSet's init container
 * (and the uninstall DaemonSet) do on the node, through hostPath mounts at
 * the host's own paths (doc/install.md); with a manifest (--prefix,
 * --destdir) bake.c does the work instead.
 *
 * install puts, in this order, each file atomically and only when it differs:
 * the plugin's bundle (<bundle-root>/<id>/lib: its loader and libraries, see
 * scripts/image.sh), the plugin into the CNI bin dir, the kubeconfig the
 * plugin reads, and the conflist into the CNI conf dir last, so a runtime
 * that sees the config finds everything it names. Bundles other than the new
 * one and the one the replaced binary used are removed.
 *
 * uninstall goes the other way: the conflist first (no new pod is attached),
 * the kubeconfig, then the binary and its bundles, but only when no journal
 * of this boot is left (a journal may hold a NIC, and only the plugin's DEL
 * gives it back). Otherwise the binary stays and it says which attachments
 * hold it; --wait waits for them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bake.h"
#include "install.h"
#include "installkit.h"
#include "sakubeconfig.h"
#include "util.h"

static int do_install(const struct opts *o, struct hpn_err *err)
{
	_cleanup_free_ char *bin = NULL, *conf = NULL, *state = NULL, *kc_path = NULL;
	char root[PATH_MAX], id[NAME_MAX + 1], src[PATH_MAX];
	size_t bin_len = 0, conf_len = 0;
	struct kc_plugin plugin = { 0 };
	int r = 0, changed = 0;
	bool bundled;

	/* Everything is read and checked before anything on the node changes. */
	if (o->kubeconfig) {
		r = kc_plugin_parse(o->plugin_sa, o->plugin_ttl, o->sa_dir, &plugin, err);
		if (r < 0)
			return r;
	}
	if (o->conf) {
		r = inst_conf_read(o->conf, &conf, &conf_len, &state, &kc_path, err);
		if (r < 0)
			return r;
		if (o->kubeconfig && (!kc_path || strcmp(kc_path, o->kubeconfig)))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "--kubeconfig %s, but %s's kubernetes.kubeconfig is %s: "
					   "the plugin would not read it",
					   o->kubeconfig, o->conf, kc_path ? kc_path : "not set");
		if (kc_path && !o->kubeconfig)
			printf("note: %s reads %s, which this install does not write (no "
			       "--kubeconfig)\n",
			       o->conf, kc_path);
	}
	if (!o->no_plugin) {
		r = inst_plugin_read(o->plugin, &bin, &bin_len, root, id, src, err);
		if (r < 0)
			return r;
	}
	bundled = !o->no_plugin && r == 1;
	if (bundled && o->bundle_dir)
		snprintf(root, sizeof(root), "%s", o->bundle_dir);
	if (o->no_plugin)
		printf("hpn-rdma install: no plugin (--no-plugin)\n");
	else
		printf("hpn-rdma install: plugin %s%s%s\n", o->plugin, bundled ? ", bundle " : "",
		       bundled ? id : "");
	/* 1. The bundle, whole, before any binary names it. */
	if (bundled) {
		_cleanup_close_ int rfd = inst_open_dir(root, true, err);

		if (rfd < 0)
			return rfd;
		r = inst_tree(src, rfd, id, err);
		if (r < 0)
			return r;
		inst_say(r ? "installed" : "unchanged", root, id, NULL);
		changed += r;
	}
	/* 2. The plugin: a rename over the old one, which running ADDs keep. */
	if (!o->no_plugin) {
		_cleanup_close_ int bfd = inst_open_dir(o->bin_dir, true, err);
		char old_root[PATH_MAX] = "", old_id[NAME_MAX + 1] = "";
		bool existed;

		if (bfd < 0)
			return bfd;
		existed = faccessat(bfd, PLUGIN_NAME, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
		inst_bundle_of_file(bfd, PLUGIN_NAME, old_root, old_id);
		r = hpn_install_file(bfd, PLUGIN_NAME, bin, bin_len, 0755, err);
		if (r < 0)
			return r;
		inst_say(r ? (existed ? "updated" : "installed") : "unchanged", o->bin_dir,
			 PLUGIN_NAME, NULL);
		changed += r;
		/* Bundles no binary names now: the old one stays for an ADD that started
		 * before the swap. */
		if (bundled)
			inst_prune_bundles(root, id, old_id[0] ? old_id : NULL,
					   "an earlier plugin's bundle");
	}
	/*
	 * 3. The kubeconfig the conflist names: the plugin's own token, never
	 * this pod's. Refused (an older manifest without the plugin's service
	 * account or the agent's Role), the plugin gets none and the install goes
	 * on: the agent answers the plugin's pod lookups from its cache and keeps
	 * asking for the token; the plugin's own API lookups fail until then.
	 */
	if (o->kubeconfig) {
		struct hpn_err kerr = { 0 };
		bool had = access(o->kubeconfig, F_OK) == 0;

		r = kc_install_plugin(o->sa_dir, &plugin, o->kubeconfig, &kerr);
		if (r >= 0) {
			inst_say(r ? "written" : "unchanged", o->kubeconfig, NULL, NULL);
			printf("             the token of service account %s/%s (%u s; the agent "
			       "renews it)\n",
			       plugin.ns, plugin.name, plugin.ttl);
			changed += r;
		} else {
			/* One an older agent wrote with its own token is gone: a change. */
			bool gone = had && access(o->kubeconfig, F_OK) < 0;

			inst_say(gone ? "removed" : "NOT WRITTEN", o->kubeconfig, NULL, NULL);
			changed += gone;
			fprintf(stderr,
				"hpn-rdma-agent install: ERROR: the plugin's kubeconfig %s: %s%s\n",
				o->kubeconfig, kerr.msg[0] ? kerr.msg : strerror(-r),
				kc_token_refused(r)
					? " -- the agent may not create a token for the plugin's "
					  "service account: apply this version's manifest "
					  "(conf/k8s/hpn-rdma.yaml). The agent's own token is "
					  "never "
					  "written for the plugin"
					: " -- the agent asks again once it runs");
			fflush(stderr);
		}
	}
	/* 4. The conflist, last: what it names is in place. */
	if (o->conf && !o->no_conf) {
		_cleanup_close_ int cfd = inst_open_dir(o->conf_dir, true, err);
		const char *name = strrchr(o->conf, '/') ? strrchr(o->conf, '/') + 1 : o->conf;

		if (cfd < 0)
			return cfd;
		r = hpn_install_file(cfd, name, conf, conf_len, 0644, err);
		if (r < 0)
			return r;
		inst_say(r ? "installed" : "unchanged", o->conf_dir, name, NULL);
		changed += r;
	}
	if (changed)
		printf("done: %d item(s) installed or updated\n", changed);
	else
		printf("nothing changed: everything was already installed\n");
	return 0;
}

/* 1 when PATH exists (and, say_it, one line saying so), else 0. */
static int left(const char *path, const char *name, bool say_it)
{
	char p[PATH_MAX];

	if (hpn_snprintf(p, sizeof(p), "%s%s%s", path, name ? "/" : "", name ? name : "") < 0 ||
	    access(p, F_OK) < 0)
		return 0;
	if (say_it)
		inst_say("left", path, name, NULL);
	return 1;
}

/* What is left of an install; its count. say_it: one line each. */
static int leftovers(const struct opts *o, const char *conf_name, const char *kc_path, bool say_it)
{
	_cleanup_close_ int bfd = open(o->bin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int n = left(o->conf_dir, conf_name, say_it);

	if (kc_path)
		n += left(kc_path, NULL, say_it);
	if (bfd >= 0 && faccessat(bfd, PLUGIN_NAME, F_OK, 0) == 0) {
		char root[PATH_MAX], id[NAME_MAX + 1];

		n++;
		if (say_it)
			inst_say("left", o->bin_dir, PLUGIN_NAME, NULL);
		if (inst_bundle_of_file(bfd, PLUGIN_NAME, root, id)) {
			if (o->bundle_dir)
				snprintf(root, sizeof(root), "%s", o->bundle_dir);
			n += left(root, id, say_it);
		}
	}
	return n;
}

/* Waits for a change under state_dir (or WAIT_RECHECK), or a signal: 1 on a signal. */
static int wait_journals(const char *state_dir, int sfd)
{
	_cleanup_close_ int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	DIR *d = opendir(state_dir);
	struct dirent *de;
	struct pollfd p[2] = { { .fd = ifd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
	char path[PATH_MAX];

	if (ifd >= 0)
		inotify_add_watch(ifd, state_dir, IN_CREATE | IN_DELETE | IN_MOVED_FROM);
	while (d && ifd >= 0 && (de = readdir(d)))
		if (de->d_name[0] != '.' &&
		    hpn_snprintf(path, sizeof(path), "%s/%s", state_dir, de->d_name) == 0)
			inotify_add_watch(ifd, path, IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO);
	if (d)
		closedir(d);
	if (poll(p, 2, WAIT_RECHECK) > 0 && (p[1].revents & POLLIN))
		return 1;
	return 0;
}

static int do_uninstall(const struct opts *o, struct hpn_err *err)
{
	_cleanup_free_ char *conf = NULL, *state = NULL, *kc_conf = NULL, *cur = NULL;
	_cleanup_close_ int cfd = -1, bfd = -1, sfd = -1;
	const char *name = strrchr(o->conf, '/') ? strrchr(o->conf, '/') + 1 : o->conf;
	const char *kc_path, *state_dir;
	char held_desc[1024];
	size_t conf_len = 0, cur_len = 0;
	bool conf_kept = false, announced = false;
	int r;
	sigset_t mask;

	r = inst_conf_read(o->conf, &conf, &conf_len, &state, &kc_conf, err);
	if (r < 0)
		return r;
	kc_path = o->kubeconfig ? o->kubeconfig : kc_conf;
	state_dir = o->state_dir ? o->state_dir : state;
	if (o->check) {
		r = leftovers(o, name, kc_path, true);
		printf(r ? "hpn-rdma is still installed here: %d item(s) left\n"
			 : "hpn-rdma is not installed here\n",
		       r);
		return r ? 1 : 0;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

	printf("hpn-rdma uninstall\n");
	/* 1. The conflist: from now on no pod is attached. Only the one we installed. */
	cfd = open(o->conf_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cfd >= 0 && faccessat(cfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/%s", o->conf_dir, name);
		if (hpn_read_file(path, CONF_MAX, &cur, &cur_len, err) < 0)
			return -EIO;
		if (!o->force &&
		    (!cur || !conf || cur_len != conf_len || memcmp(cur, conf, conf_len))) {
			inst_say("kept", o->conf_dir, name,
				 "changed since it was installed (--force removes it); the plugin "
				 "stays "
				 "for it");
			conf_kept = true;
		} else if (unlinkat(cfd, name, 0) < 0) {
			return hpn_err_set(err, HPN_E_IO, errno, "remove %s: %s", path,
					   strerror(errno));
		} else {
			fsync(cfd);
			inst_say("removed", o->conf_dir, name, NULL);
		}
	} else {
		inst_say("gone", o->conf_dir, name, NULL);
	}
	/* 2. The kubeconfig: a credential, needed by ADD only. */
	if (kc_path) {
		if (unlink(kc_path) == 0) {
			char *dir = strdup(kc_path);

			inst_say("removed", kc_path, NULL, NULL);
			/* Its directory, when that held only it (install made it). */
			if (dir && strrchr(dir, '/') != dir) {
				*strrchr(dir, '/') = '\0';
				if (rmdir(dir) == 0)
					inst_say("removed", dir, NULL, NULL);
			}
			free(dir);
		} else if (errno == ENOENT)
			inst_say("gone", kc_path, NULL, NULL);
		else
			return hpn_err_set(err, HPN_E_IO, errno, "remove %s: %s", kc_path,
					   strerror(errno));
	}
	/* 3. The plugin, once no journal may hold a NIC: their DEL needs it. */
	for (;;) {
		int held = inst_journals_held(state_dir, held_desc, sizeof(held_desc), err);

		if (held < 0)
			return held;
		if (!held && !conf_kept)
			break;
		if (!announced || !o->wait) {
			if (held) {
				inst_say("kept", o->bin_dir, PLUGIN_NAME, NULL);
				printf("             %d attachment(s) in %s may still hold NICs "
				       "(%s): "
				       "DEL of their pods needs the plugin, and the conflist back "
				       "(doc/install.md#uninstall); %s\n",
				       held, state_dir, held_desc,
				       o->wait ? "waiting" : "then run uninstall again");
			} else {
				inst_say("kept", o->bin_dir, PLUGIN_NAME,
					 "a conflist still names it");
			}
			fflush(stdout);
			announced = true;
		}
		if (!o->wait || conf_kept)
			return INST_EXIT_KEPT;
		if (wait_journals(state_dir, sfd) == 1)
			return INST_EXIT_KEPT;
	}
	bfd = open(o->bin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (bfd >= 0) {
		char root[PATH_MAX], id[NAME_MAX + 1];
		bool bundled = inst_bundle_of_file(bfd, PLUGIN_NAME, root, id);

		if (unlinkat(bfd, PLUGIN_NAME, 0) == 0) {
			fsync(bfd);
			inst_say("removed", o->bin_dir, PLUGIN_NAME, NULL);
		} else if (errno == ENOENT) {
			inst_say("gone", o->bin_dir, PLUGIN_NAME, NULL);
		} else {
			return hpn_err_set(err, HPN_E_IO, errno, "remove %s/%s: %s", o->bin_dir,
					   PLUGIN_NAME, strerror(errno));
		}
		if (bundled) {
			if (o->bundle_dir)
				snprintf(root, sizeof(root), "%s", o->bundle_dir);
			inst_prune_bundles(root, NULL, NULL, NULL);
			if (rmdir(root) == 0)
				inst_say("removed", root, NULL, NULL);
		}
	}
	printf("done: hpn-rdma is uninstalled from this node\n");
	fflush(stdout);
	if (o->wait && sfd >= 0) {
		/* A DaemonSet's pod must not exit: it would be restarted. Until SIGTERM. */
		struct pollfd p = { .fd = sfd, .events = POLLIN };

		while (poll(&p, 1, -1) < 0 && errno == EINTR)
			;
	}
	return 0;
}

int agent_install_main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct hpn_err err = { 0 };
	int r = inst_parse(argc, argv, &o);

	if (r >= 0)
		return r;
	umask(0022);
	if (o.manifest)
		r = o.uninstall ? inst_bake_uninstall(&o, &err) : inst_bake_install(&o, &err);
	else
		r = o.uninstall ? do_uninstall(&o, &err) : do_install(&o, &err);
	if (r < 0) {
		fprintf(stderr, "hpn-rdma-agent %s: %s\n", argv[0],
			err.msg[0] ? err.msg : strerror(-r));
		return 1;
	}
	return r;
}
