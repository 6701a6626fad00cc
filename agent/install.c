// SPDX-License-Identifier: Apache-2.0
/*
 * hpn-rdma-agent install / uninstall: what the DaemonSet's init container
 * (and the uninstall DaemonSet) do on the node, through hostPath mounts at
 * the host's own paths (doc/install.md).
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
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"
#include "install.h"
#include "sakubeconfig.h"
#include "store.h"
#include "util.h"

#define PLUGIN_NAME   "hpn-rdma"
#define PLUGIN_MAX    (64u << 20)
#define CONF_MAX      (1u << 20)
#define WAIT_RECHECK  10000 /* ms: journals are re-read this often besides inotify */
#define DEFAULT_SA    "/var/run/secrets/kubernetes.io/serviceaccount"
#define DEFAULT_STATE HPN_DEFAULT_STATE_DIR

/* ---- files ------------------------------------------------------------------ */

/* Recursive: a bundle's tree is <id>/lib/<file>, symlinks not followed (O_NOFOLLOW). */
int inst_rm_tree(int dfd, const char *name) /* NOLINT(misc-no-recursion) */
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno != ENOTDIR && errno != ELOOP)
			return -errno;
		return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	}
	d = fdopendir(TAKE_FD(fd));
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (de->d_type == DT_DIR)
			r = inst_rm_tree(dirfd(d), de->d_name);
		else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT)
			r = -errno;
		if (r < 0)
			break;
	}
	closedir(d);
	if (r < 0)
		return r;
	return unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

/* Copies the contents of directory sfd into directory dfd; files are fsync()ed. */
static int copy_dir(int sfd, int dfd, int depth) /* NOLINT(misc-no-recursion): depth <= 8 */
{
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (depth > 8)
		return -ELOOP;
	d = fdopendir(dup(sfd));
	if (!d)
		return -errno;
	while (r == 0 && (de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(sfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
		} else if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t n = readlinkat(sfd, de->d_name, target, sizeof(target) - 1);

			if (n >= 0)
				target[n] = '\0';
			if (n < 0 || symlinkat(target, dfd, de->d_name) < 0)
				r = -errno;
		} else if (S_ISDIR(st.st_mode)) {
			_cleanup_close_ int s = -1, t = -1;

			if (mkdirat(dfd, de->d_name, 0700) < 0 ||
			    (s = openat(sfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
			    (t = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
				r = -errno;
			else
				r = copy_dir(s, t, depth + 1);
			if (r == 0 && fchmod(t, st.st_mode & 07777) < 0)
				r = -errno;
		} else if (S_ISREG(st.st_mode)) {
			_cleanup_close_ int s = openat(sfd, de->d_name, O_RDONLY | O_CLOEXEC);
			_cleanup_free_ char *buf = NULL;
			size_t len;
			struct hpn_err e = { 0 };

			if (s < 0)
				r = -errno;
			else if ((r = hpn_read_all(s, PLUGIN_MAX, &buf, &len)) == 0)
				r = hpn_install_file(dfd, de->d_name, buf, len, st.st_mode & 07777,
						     &e);
			if (r > 0)
				r = 0;
		}
	}
	closedir(d);
	return r;
}

int inst_tree(const char *src, int dfd, const char *name, struct hpn_err *err)
{
	_cleanup_close_ int sfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC), tfd = -1;
	char tmp[NAME_MAX + 1];
	struct stat st;
	int r;

	if (sfd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open %s: %s", src, strerror(errno));
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		return 0;
	if (hpn_snprintf(tmp, sizeof(tmp), ".%s.hpn-new", name) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG, "%s: name too long",
				   name);
	/* A temp tree an earlier, killed run left. */
	inst_rm_tree(dfd, tmp);
	if (mkdirat(dfd, tmp, 0700) < 0 ||
	    (tfd = openat(dfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "create %s: %s", tmp, strerror(errno));
	r = copy_dir(sfd, tfd, 0);
	if (r == 0 && fstat(sfd, &st) == 0 && fchmod(tfd, st.st_mode & 07777) < 0)
		r = -errno;
	if (r == 0 && fsync(tfd) < 0)
		r = -errno;
	if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
		r = -errno;
	if (r < 0) {
		inst_rm_tree(dfd, tmp);
		return hpn_err_set(err, HPN_E_IO, -r, "copy %s to %s: %s", src, name, strerror(-r));
	}
	fsync(dfd);
	return 1;
}

int inst_elf_interp(int fd, char *buf, size_t len)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;

	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(ph) ||
	    eh.e_phnum > 256 ||
	    eh.e_ident[EI_DATA] !=
		    (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB))
		return -ENOEXEC;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (Elf64_Off)i * sizeof(ph))) !=
		    sizeof(ph))
			return -ENOEXEC;
		if (ph.p_type != PT_INTERP)
			continue;
		if (ph.p_filesz < 2 || ph.p_filesz > len ||
		    pread(fd, buf, ph.p_filesz, (off_t)ph.p_offset) != (ssize_t)ph.p_filesz ||
		    buf[ph.p_filesz - 1] != '\0' || strlen(buf) != ph.p_filesz - 1)
			return -ENOEXEC;
		return 1;
	}
	buf[0] = '\0';
	return 0;
}

int inst_bundle_of(const char *interp, char root[], size_t root_len, char id[], size_t id_len)
{
	const char *lib = strstr(interp, "/lib/"), *p;

	if (interp[0] != '/' || !lib || strchr(lib + 5, '/') || !lib[5])
		return 0;
	for (p = lib - 1; p > interp && *p != '/'; p--)
		;
	if (p == interp || lib - p - 1 < 1 || (size_t)(lib - p - 1) >= id_len ||
	    (size_t)(p - interp) >= root_len)
		return 0;
	snprintf(id, id_len, "%.*s", (int)(lib - p - 1), p + 1);
	snprintf(root, root_len, "%.*s", (int)(p - interp), interp);
	return hpn_valid_path_component(id) && id[0] != '.';
}

static int bundle_of(const char *interp, char root[PATH_MAX], char id[NAME_MAX + 1])
{
	return inst_bundle_of(interp, root, PATH_MAX, id, NAME_MAX + 1);
}

/* The bundle (root and id) the executable at dfd/name uses; 0 when none. */
static int bundle_of_file(int dfd, const char *name, char root[PATH_MAX], char id[NAME_MAX + 1])
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	char interp[PATH_MAX];

	if (fd < 0 || inst_elf_interp(fd, interp, sizeof(interp)) <= 0)
		return 0;
	return bundle_of(interp, root, id);
}

/* ---- journals ---------------------------------------------------------------- */

static void append(char *buf, size_t len, const char *s)
{
	size_t n = strlen(buf);

	if (n + 1 < len)
		snprintf(buf + n, len - n, "%s%s", n ? ", " : "", s);
}

int inst_journals_held(const char *state_dir, char *desc, size_t desc_len, struct hpn_err *err)
{
	_cleanup_close_ int fd = -1;
	struct dirent *de;
	int held = 0;
	DIR *d;

	if (!state_dir)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "no state directory");
	if (desc_len)
		desc[0] = '\0';
	/* An older binary's journals are held too: adopted first, as any run does. */
	if (hpn_store_adopt_old(state_dir, err) < 0)
		return -EIO;
	fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0 || !(d = fdopendir(TAKE_FD(fd))))
		return hpn_err_set(err, HPN_E_IO, errno, "open stateDir %s: %s", state_dir,
				   strerror(errno));
	while ((de = readdir(d))) {
		struct hpn_store st = HPN_STORE_INIT;
		struct stat sb;
		char **keys = NULL;

		if (de->d_name[0] == '.' ||
		    fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) || !S_ISDIR(sb.st_mode))
			continue;
		/* It exists, so hpn_store_open creates nothing. */
		if (hpn_store_open(state_dir, de->d_name, &st, err) < 0 ||
		    hpn_store_keys(&st, &keys, err) < 0) {
			hpn_store_close(&st);
			closedir(d);
			return -EIO;
		}
		for (char **k = keys; *k; k++) {
			struct hpn_journal j = { 0 };
			struct hpn_err e = { 0 };
			char what[96];
			int r = hpn_journal_read(&st, *k, &j, &e);

			/* Gone meanwhile (a DEL), or a torn write of an earlier boot: holds nothing. */
			if (r == -ENOENT || r == -ESTALE)
				continue;
			if (r == 0 && j.stale) {
				hpn_journal_free(&j);
				continue;
			}
			held++;
			hpn_msgf(what, sizeof(what), "%s/%.40s%s", de->d_name, *k,
				 strlen(*k) > 40 ? "..." : "");
			append(desc, desc_len, what);
			if (r == 0)
				hpn_journal_free(&j);
		}
		hpn_strv_free(keys);
		hpn_store_close(&st);
	}
	closedir(d);
	return held;
}

/* ---- the subcommands ------------------------------------------------------------ */

struct opts {
	bool uninstall;
	const char *plugin, *bin_dir, *conf, *conf_dir, *kubeconfig, *sa_dir, *state_dir;
	const char *bundle_dir; /* where the bundle root is seen here; NULL: at its own path */
	bool wait, check, force, no_conf;
};

static const char install_usage[] =
	"Usage: hpn-rdma-agent install [OPTIONS]\n"
	"       hpn-rdma-agent uninstall [OPTIONS] [--wait | --check] [--force]\n"
	"\n"
	"install puts hpn-rdma on this node, each file atomically (temp file, fsync,\n"
	"rename) and only when it differs: the plugin's bundle, the plugin, the\n"
	"kubeconfig, then the conflist. uninstall removes the conflist, the kubeconfig,\n"
	"then the plugin and its bundles unless journals of this boot remain (their\n"
	"pods' DEL needs the plugin): then it keeps the plugin, names them, and exits\n"
	"75 (--wait: waits for them, then stays until SIGTERM).\n"
	"\n"
	"  --plugin FILE          the plugin to install (default /usr/lib/hpn-rdma/hpn-rdma);\n"
	"                         its bundle is the directory beside it its loader names\n"
	"  --cni-bin-dir DIR      where the plugin goes (default /opt/cni/bin)\n"
	"  --conf FILE            the conflist to install (its file name kept); it must\n"
	"                         hold a valid hpn-rdma entry. uninstall: the one to remove\n"
	"  --no-conf              install: check --conf but leave it out of the CNI conf\n"
	"                         dir (Multus: a NetworkAttachmentDefinition holds it)\n"
	"  --cni-conf-dir DIR     where the conflist goes (default /etc/cni/net.d)\n"
	"  --kubeconfig PATH      write the plugin's kubeconfig there from the service\n"
	"                         account (must be the conflist's kubernetes.kubeconfig)\n"
	"  --service-account DIR  the token and ca.crt (default " DEFAULT_SA ")\n"
	"  --bundle-dir DIR       where the bundle root its loader names (/opt/hpn-rdma) is\n"
	"                         mounted in here, when not at that path (tests)\n"
	"  --state-dir DIR        uninstall: the journals (default: the conflist's stateDir)\n"
	"  --wait                 uninstall: wait until no journal holds a NIC, then stay\n"
	"  --check                uninstall: change nothing; exit 0 when nothing is left\n"
	"  --force                uninstall: remove a conflist that changed since install\n";

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option opts[] = {
		{ "plugin", required_argument, NULL, 'p' },
		{ "cni-bin-dir", required_argument, NULL, 'b' },
		{ "conf", required_argument, NULL, 'c' },
		{ "cni-conf-dir", required_argument, NULL, 'C' },
		{ "kubeconfig", required_argument, NULL, 'k' },
		{ "service-account", required_argument, NULL, 's' },
		{ "state-dir", required_argument, NULL, 'S' },
		{ "bundle-dir", required_argument, NULL, 'B' },
		{ "no-conf", no_argument, NULL, 'n' },
		{ "wait", no_argument, NULL, 'w' },
		{ "check", no_argument, NULL, 'x' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	o->uninstall = !strcmp(argv[0], "uninstall");
	o->plugin = "/usr/lib/hpn-rdma/" PLUGIN_NAME;
	o->bin_dir = "/opt/cni/bin";
	o->conf_dir = "/etc/cni/net.d";
	o->sa_dir = DEFAULT_SA;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->plugin = optarg;
			break;
		case 'b':
			o->bin_dir = optarg;
			break;
		case 'c':
			o->conf = optarg;
			break;
		case 'C':
			o->conf_dir = optarg;
			break;
		case 'k':
			o->kubeconfig = optarg;
			break;
		case 's':
			o->sa_dir = optarg;
			break;
		case 'S':
			o->state_dir = optarg;
			break;
		case 'B':
			o->bundle_dir = optarg;
			break;
		case 'n':
			o->no_conf = true;
			break;
		case 'w':
			o->wait = true;
			break;
		case 'x':
			o->check = true;
			break;
		case 'f':
			o->force = true;
			break;
		case 'h':
			fputs(install_usage, stdout);
			return 0;
		default:
			fputs(install_usage, stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hpn-rdma-agent %s: unexpected argument %s\n", argv[0],
			argv[optind]);
		return 2;
	}
	if (!o->uninstall && (o->wait || o->check || o->force || o->state_dir)) {
		fprintf(stderr, "hpn-rdma-agent install: --wait, --check, --force and --state-dir "
				"are uninstall's\n");
		return 2;
	}
	if (o->uninstall && o->no_conf) {
		fprintf(stderr, "hpn-rdma-agent uninstall: --no-conf is install's\n");
		return 2;
	}
	if (o->wait && o->check) {
		fprintf(stderr, "hpn-rdma-agent uninstall: --wait or --check, not both\n");
		return 2;
	}
	if (o->uninstall && !o->conf) {
		fprintf(stderr, "hpn-rdma-agent uninstall: --conf names the conflist to remove\n");
		return 2;
	}
	if (o->bin_dir[0] != '/' || o->conf_dir[0] != '/' ||
	    (o->kubeconfig && o->kubeconfig[0] != '/') ||
	    (o->state_dir && o->state_dir[0] != '/') ||
	    (o->bundle_dir && o->bundle_dir[0] != '/')) {
		fprintf(stderr,
			"hpn-rdma-agent %s: directories and the kubeconfig must be "
			"absolute paths\n",
			argv[0]);
		return 2;
	}
	return -1;
}

/* The conflist's hpn-rdma entry, parsed as an ADD would see it; its stateDir and kubeconfig. */
static int conf_read(const char *path, char **ret_text, size_t *ret_len, char **ret_state,
		     char **ret_kubeconfig, struct hpn_err *err)
{
	_cleanup_free_ char *text = NULL, *entry_text = NULL;
	struct hpn_conf conf;
	size_t len = 0;
	int r;

	r = hpn_read_file(path, CONF_MAX, &text, &len, err);
	if (r < 0)
		return r;
	r = hpn_conf_parse_text(path, text, len, HPN_CMD_ADD, &conf, &entry_text, err);
	if (r < 0)
		return r;
	*ret_state = hpn_strdup(conf.state_dir ? conf.state_dir : DEFAULT_STATE);
	*ret_kubeconfig = hpn_strdup(conf.kube.kubeconfig);
	hpn_conf_free(&conf);
	*ret_text = TAKE_PTR(text);
	*ret_len = len;
	return 0;
}

static int open_dir(const char *path, bool create, struct hpn_err *err)
{
	int fd;

	if (create) {
		int r = hpn_mkdir_p(path, 0755);

		if (r < 0)
			return hpn_err_set(err, HPN_E_IO, -r, "create %s: %s", path, strerror(-r));
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open %s: %s", path, strerror(errno));
	return fd;
}

static void say(const char *what, const char *dir, const char *name, const char *why)
{
	printf("  %-10s %s%s%s%s%s\n", what, dir, name ? "/" : "", name ? name : "",
	       why ? ": " : "", why ? why : "");
	fflush(stdout);
}

/* Bundle directory names: "<version>-<hex digest>", as scripts/image.sh makes them. */
static bool bundle_name(const char *n)
{
	const char *dash = strrchr(n, '-');

	return n[0] != '.' && dash && dash != n && strlen(dash + 1) >= 8 &&
	       strspn(dash + 1, "0123456789abcdef") == strlen(dash + 1);
}

/* Removes the bundles under root other than keep1 and keep2; how many it removed. */
static int prune_bundles(const char *root, const char *keep1, const char *keep2, const char *why)
{
	_cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	char *names[64];
	int n = 0, removed = 0;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(dup(fd))))
		return 0;
	while ((de = readdir(d)) && n < (int)HPN_ARRAY_SIZE(names))
		if (de->d_type == DT_DIR && bundle_name(de->d_name) &&
		    (!keep1 || strcmp(de->d_name, keep1)) && (!keep2 || strcmp(de->d_name, keep2)))
			names[n++] = strdup(de->d_name);
	closedir(d);
	for (int i = 0; i < n; i++) {
		if (names[i] && inst_rm_tree(fd, names[i]) == 0) {
			say("removed", root, names[i], why);
			removed++;
		}
		free(names[i]);
	}
	return removed;
}

static int do_install(const struct opts *o, struct hpn_err *err)
{
	_cleanup_free_ char *bin = NULL, *conf = NULL, *state = NULL, *kc_path = NULL;
	_cleanup_close_ int pfd = -1, bfd = -1;
	char interp[PATH_MAX], root[PATH_MAX], id[NAME_MAX + 1], src[PATH_MAX];
	char old_root[PATH_MAX] = "", old_id[NAME_MAX + 1] = "";
	size_t bin_len, conf_len = 0;
	int r, changed = 0, bundled;
	bool existed;

	/* Everything is read and checked before anything on the node changes. */
	if (o->conf) {
		r = conf_read(o->conf, &conf, &conf_len, &state, &kc_path, err);
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
	pfd = open(o->plugin, O_RDONLY | O_CLOEXEC);
	if (pfd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open %s: %s", o->plugin, strerror(errno));
	r = inst_elf_interp(pfd, interp, sizeof(interp));
	if (r < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENOEXEC,
				   "%s is not an executable of this machine", o->plugin);
	r = hpn_read_all(pfd, PLUGIN_MAX, &bin, &bin_len);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, -r, "read %s: %s", o->plugin, strerror(-r));
	bundled = r >= 0 && interp[0] && bundle_of(interp, root, id);
	if (bundled) {
		const char *slash = strrchr(o->plugin, '/');
		struct stat st;

		snprintf(src, sizeof(src), "%.*s/%s", slash ? (int)(slash - o->plugin) : 1,
			 slash ? o->plugin : ".", id);
		if (stat(src, &st) < 0 || !S_ISDIR(st.st_mode))
			return hpn_err_set(err, HPN_E_IO, ENOENT,
					   "%s's loader is %s, but its bundle %s is not there",
					   o->plugin, interp, src);
	}

	if (bundled && o->bundle_dir)
		snprintf(root, sizeof(root), "%s", o->bundle_dir);
	printf("hpn-rdma install: plugin %s%s%s\n", o->plugin, bundled ? ", bundle " : "",
	       bundled ? id : "");
	/* 1. The bundle, whole, before any binary names it. */
	if (bundled) {
		_cleanup_close_ int rfd = open_dir(root, true, err);

		if (rfd < 0)
			return rfd;
		r = inst_tree(src, rfd, id, err);
		if (r < 0)
			return r;
		say(r ? "installed" : "unchanged", root, id, NULL);
		changed += r;
	}
	/* 2. The plugin: a rename over the old one, which running ADDs keep. */
	bfd = open_dir(o->bin_dir, true, err);
	if (bfd < 0)
		return bfd;
	existed = faccessat(bfd, PLUGIN_NAME, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	bundle_of_file(bfd, PLUGIN_NAME, old_root, old_id);
	r = hpn_install_file(bfd, PLUGIN_NAME, bin, bin_len, 0755, err);
	if (r < 0)
		return r;
	say(r ? (existed ? "updated" : "installed") : "unchanged", o->bin_dir, PLUGIN_NAME, NULL);
	changed += r;
	/* Bundles no binary names now: the old one stays for an ADD that started before the swap. */
	if (bundled)
		prune_bundles(root, id, old_id[0] ? old_id : NULL, "an earlier plugin's bundle");
	/* 3. The kubeconfig the conflist names. */
	if (o->kubeconfig) {
		r = kc_write(o->sa_dir, o->kubeconfig, err);
		if (r < 0)
			return r;
		say(r ? "written" : "unchanged", o->kubeconfig, NULL, NULL);
		changed += r;
	}
	/* 4. The conflist, last: what it names is in place. */
	if (o->conf && !o->no_conf) {
		_cleanup_close_ int cfd = open_dir(o->conf_dir, true, err);
		const char *name = strrchr(o->conf, '/') ? strrchr(o->conf, '/') + 1 : o->conf;

		if (cfd < 0)
			return cfd;
		r = hpn_install_file(cfd, name, conf, conf_len, 0644, err);
		if (r < 0)
			return r;
		say(r ? "installed" : "unchanged", o->conf_dir, name, NULL);
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
		say("left", path, name, NULL);
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
			say("left", o->bin_dir, PLUGIN_NAME, NULL);
		if (bundle_of_file(bfd, PLUGIN_NAME, root, id)) {
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

	r = conf_read(o->conf, &conf, &conf_len, &state, &kc_conf, err);
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
			say("kept", o->conf_dir, name,
			    "changed since it was installed (--force removes it); the plugin stays "
			    "for it");
			conf_kept = true;
		} else if (unlinkat(cfd, name, 0) < 0) {
			return hpn_err_set(err, HPN_E_IO, errno, "remove %s: %s", path,
					   strerror(errno));
		} else {
			fsync(cfd);
			say("removed", o->conf_dir, name, NULL);
		}
	} else {
		say("gone", o->conf_dir, name, NULL);
	}
	/* 2. The kubeconfig: a credential, needed by ADD only. */
	if (kc_path) {
		if (unlink(kc_path) == 0) {
			char *dir = strdup(kc_path);

			say("removed", kc_path, NULL, NULL);
			/* Its directory, when that held only it (install made it). */
			if (dir && strrchr(dir, '/') != dir) {
				*strrchr(dir, '/') = '\0';
				if (rmdir(dir) == 0)
					say("removed", dir, NULL, NULL);
			}
			free(dir);
		} else if (errno == ENOENT)
			say("gone", kc_path, NULL, NULL);
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
				say("kept", o->bin_dir, PLUGIN_NAME, NULL);
				printf("             %d attachment(s) in %s may still hold NICs "
				       "(%s): "
				       "DEL of their pods needs the plugin, and the conflist back "
				       "(doc/install.md#uninstall); %s\n",
				       held, state_dir, held_desc,
				       o->wait ? "waiting" : "then run uninstall again");
			} else {
				say("kept", o->bin_dir, PLUGIN_NAME, "a conflist still names it");
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
		bool bundled = bundle_of_file(bfd, PLUGIN_NAME, root, id);

		if (unlinkat(bfd, PLUGIN_NAME, 0) == 0) {
			fsync(bfd);
			say("removed", o->bin_dir, PLUGIN_NAME, NULL);
		} else if (errno == ENOENT) {
			say("gone", o->bin_dir, PLUGIN_NAME, NULL);
		} else {
			return hpn_err_set(err, HPN_E_IO, errno, "remove %s/%s: %s", o->bin_dir,
					   PLUGIN_NAME, strerror(errno));
		}
		if (bundled) {
			if (o->bundle_dir)
				snprintf(root, sizeof(root), "%s", o->bundle_dir);
			prune_bundles(root, NULL, NULL, NULL);
			if (rmdir(root) == 0)
				say("removed", root, NULL, NULL);
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
	int r = parse(argc, argv, &o);

	if (r >= 0)
		return r;
	umask(0022);
	r = o.uninstall ? do_uninstall(&o, &err) : do_install(&o, &err);
	if (r < 0) {
		fprintf(stderr, "hpn-rdma-agent %s: %s\n", argv[0],
			err.msg[0] ? err.msg : strerror(-r));
		return 1;
	}
	return r;
}
