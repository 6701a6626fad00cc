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
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "conf.h"
#include "install.h"
#include "sakubeconfig.h"
#include "store.h"
#include "util.h"

extern char **environ;

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
	bool wait, check, force, no_conf, no_plugin;
	/* With a manifest (image bakers, or a node beside the .deb): --prefix or --destdir. */
	bool manifest;
	const char *destdir, *prefix, *man, *examples, *netns_mode;
	bool apply_now, dry_run;
};

static const char install_usage[] =
	"Usage: hpn-rdma-agent install [OPTIONS]\n"
	"       hpn-rdma-agent install --prefix DIR [--destdir DIR] [OPTIONS]\n"
	"       hpn-rdma-agent uninstall --conf FILE [--wait | --check] [--force] [OPTIONS]\n"
	"       hpn-rdma-agent uninstall --prefix DIR [--destdir DIR] [--force] [--dry-run]\n"
	"\n"
	"install puts hpn-rdma on this node, each file atomically (temp file, fsync,\n"
	"rename) and only when it differs: the plugin's bundle, the plugin, the\n"
	"kubeconfig, then the conflist. uninstall removes the conflist, the kubeconfig,\n"
	"then the plugin and its bundles unless journals of this boot remain (their\n"
	"pods' DEL needs the plugin): then it keeps the plugin, names them, and exits\n"
	"75 (--wait: waits for them, then stays until SIGTERM).\n"
	"\n"
	"With --prefix or --destdir (node images, or a node beside the .deb) install\n"
	"keeps a manifest, PREFIX/share/hpn-rdma/install.manifest (each file's SHA-256\n"
	"and the directories it made): a file in the way that differs and that it did\n"
	"not install is refused and nothing changes (exit 1) unless --force; a file it\n"
	"installed is upgraded; uninstall --prefix removes exactly what it lists (a\n"
	"file changed since: kept, unless --force), then the directories it made.\n"
	"\n"
	"  --plugin FILE          the plugin to install (default /usr/lib/hpn-rdma/hpn-rdma);\n"
	"                         its bundle is the directory beside it its loader names\n"
	"  --no-plugin            install no plugin (the .deb's is in place)\n"
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
	"  --force                uninstall: remove a conflist that changed since install;\n"
	"                         with a manifest: replace (install) or remove (uninstall)\n"
	"                         files that differ from what it installed\n"
	"With a manifest:\n"
	"  --prefix DIR           the manifest, the man page and the examples under\n"
	"                         DIR/share (default /usr/local with --destdir)\n"
	"  --destdir DIR          install under an image root (made when missing)\n"
	"  --man FILE             the man page, into PREFIX/share/man/man8\n"
	"  --examples DIR         DIR/*.conf and DIR/*.conflist, into\n"
	"                         PREFIX/share/hpn-rdma/examples\n"
	"  --netns-mode MODE      shared or exclusive: DESTDIR/etc/modprobe.d/hpn-rdma.conf\n"
	"                         (options ib_core netns_mode=1|0), used when ib_core loads\n"
	"  --apply-now            also rdma system set netns MODE now; not with --destdir\n"
	"  --dry-run              say what would be done, change nothing\n"
	"Exit status: 0 done (or nothing to do), 1 refused or failed, 2 usage error,\n"
	"75 uninstall kept the plugin.\n";

/* An absolute path of plain components (none empty, ".", ".." or with white
 * space: the manifest is whitespace-separated), "/" for the root. */
static bool clean_path(const char *p)
{
	if (p[0] != '/')
		return false;
	if (!p[1])
		return true;
	for (const char *c = p; *c; c++)
		if (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r' || *c == '\v' || *c == '\f')
			return false;
	for (const char *c = p; *c;) {
		const char *e = strchr(c + 1, '/');
		size_t n = e ? (size_t)(e - c - 1) : strlen(c + 1);

		if (n == 0 || (n == 1 && c[1] == '.') || (n == 2 && c[1] == '.' && c[2] == '.'))
			return false;
		c = e ? e : c + 1 + n;
	}
	return true;
}

/* Drops trailing slashes of an option's value (never of "/" itself). */
static const char *trim_slash(char *p)
{
	size_t n = strlen(p);

	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	return p;
}

static int usage_error(const char *cmd, const char *msg)
{
	fprintf(stderr, "hpn-rdma-agent %s: %s (see --help)\n", cmd, msg);
	return 2;
}

/* The rules of the options with a manifest: -1 when they hold, else 2. */
static int parse_manifest_mode(const char *cmd, struct opts *o)
{
	const char *dirs[] = { o->prefix, o->bin_dir, o->conf_dir, o->destdir };

	if (o->kubeconfig || o->bundle_dir || o->wait || o->check || o->state_dir)
		return usage_error(cmd, "--kubeconfig, --bundle-dir, --wait, --check and "
					"--state-dir are the DaemonSet's: not with --prefix or "
					"--destdir");
	if (o->uninstall && (o->conf || o->no_conf || o->no_plugin || o->man || o->examples ||
			     o->netns_mode || o->apply_now))
		return usage_error(cmd, "uninstall --prefix removes what the manifest lists: "
					"no --conf, --no-conf, --no-plugin, --man, --examples, "
					"--netns-mode or --apply-now");
	if (!o->prefix)
		o->prefix = "/usr/local";
	dirs[0] = o->prefix;
	for (size_t i = 0; i < HPN_ARRAY_SIZE(dirs); i++)
		if (dirs[i] && !clean_path(dirs[i])) {
			fprintf(stderr,
				"hpn-rdma-agent %s: %s is not an absolute path of plain names "
				"(no ., .., // or white space)\n",
				cmd, dirs[i]);
			return 2;
		}
	if (o->destdir && !strcmp(o->destdir, "/"))
		o->destdir = NULL;
	if (o->netns_mode && strcmp(o->netns_mode, "shared") &&
	    strcmp(o->netns_mode, "exclusive")) {
		fprintf(stderr, "hpn-rdma-agent %s: --netns-mode is shared or exclusive, not %s\n",
			cmd, o->netns_mode);
		return 2;
	}
	if (o->apply_now && !o->netns_mode)
		return usage_error(cmd, "--apply-now needs --netns-mode");
	if (o->apply_now && o->destdir) {
		fprintf(stderr,
			"hpn-rdma-agent %s: --apply-now changes the running kernel: not with "
			"--destdir (%s)\n",
			cmd, o->destdir);
		return 2;
	}
	return -1;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option opts[] = {
		{ "plugin", required_argument, NULL, 'p' },
		{ "no-plugin", no_argument, NULL, 'P' },
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
		{ "prefix", required_argument, NULL, 'r' },
		{ "destdir", required_argument, NULL, 'D' },
		{ "man", required_argument, NULL, 'm' },
		{ "examples", required_argument, NULL, 'e' },
		{ "netns-mode", required_argument, NULL, 'N' },
		{ "apply-now", no_argument, NULL, 'a' },
		{ "dry-run", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *cmd = argv[0];
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
		case 'P':
			o->no_plugin = true;
			break;
		case 'b':
			o->bin_dir = trim_slash(optarg);
			break;
		case 'c':
			o->conf = optarg;
			break;
		case 'C':
			o->conf_dir = trim_slash(optarg);
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
		case 'r':
			o->prefix = trim_slash(optarg);
			break;
		case 'D':
			o->destdir = trim_slash(optarg);
			break;
		case 'm':
			o->man = optarg;
			break;
		case 'e':
			o->examples = optarg;
			break;
		case 'N':
			o->netns_mode = optarg;
			break;
		case 'a':
			o->apply_now = true;
			break;
		case 'd':
			o->dry_run = true;
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
	o->manifest = o->prefix || o->destdir;
	if (o->manifest)
		return parse_manifest_mode(cmd, o);
	if (o->man || o->examples || o->netns_mode || o->apply_now || o->dry_run)
		return usage_error(cmd,
				   "--man, --examples, --netns-mode, --apply-now and --dry-run "
				   "keep a manifest: give --prefix (or --destdir)");
	if (!o->uninstall && (o->wait || o->check || o->force || o->state_dir)) {
		fprintf(stderr, "hpn-rdma-agent install: --wait, --check and --state-dir are "
				"uninstall's, --force needs a manifest (--prefix)\n");
		return 2;
	}
	if (o->uninstall && (o->no_conf || o->no_plugin)) {
		fprintf(stderr,
			"hpn-rdma-agent uninstall: --no-conf and --no-plugin are install's\n");
		return 2;
	}
	if (o->wait && o->check) {
		fprintf(stderr, "hpn-rdma-agent uninstall: --wait or --check, not both\n");
		return 2;
	}
	if (o->uninstall && !o->conf) {
		fprintf(stderr, "hpn-rdma-agent uninstall: --conf names the conflist to remove (or "
				"--prefix the manifest of what install put there)\n");
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

/*
 * The hpn-rdma entry of text as a runtime hands it to ADD: an entry that
 * takes its NIC from the runtime (capabilities.deviceID: a device plugin's
 * ID, as conf/10-hpn-rdma.conflist) gets a stand-in runtimeConfig.deviceID
 * for the check. NULL when there is nothing to add (or no memory: then the
 * check goes on without it, and says what is missing).
 */
static char *conf_as_runtime(const char *text, size_t len)
{
	void *entry = NULL;
	cJSON *e, *caps, *rc;
	char *out = NULL;
	int index;

	if (hpn_conf_entry(text, len, &entry, &index) != 1)
		return NULL;
	e = entry;
	caps = cJSON_GetObjectItemCaseSensitive(e, "capabilities");
	rc = cJSON_GetObjectItemCaseSensitive(e, "runtimeConfig");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(caps, "deviceID")) && !rc &&
	    (rc = cJSON_AddObjectToObject(e, "runtimeConfig")) &&
	    cJSON_AddStringToObject(rc, "deviceID", "0000:00:00.0"))
		out = cJSON_PrintUnformatted(e);
	cJSON_Delete(e);
	return out;
}

/* The conflist's hpn-rdma entry, parsed as an ADD would see it; its stateDir and kubeconfig. */
static int conf_read(const char *path, char **ret_text, size_t *ret_len, char **ret_state,
		     char **ret_kubeconfig, struct hpn_err *err)
{
	_cleanup_free_ char *text = NULL, *entry_text = NULL, *as_runtime = NULL;
	struct hpn_conf conf;
	size_t len = 0;
	int r;

	r = hpn_read_file(path, CONF_MAX, &text, &len, err);
	if (r < 0)
		return r;
	as_runtime = conf_as_runtime(text, len);
	r = hpn_conf_parse_text(path, as_runtime ? as_runtime : text,
				as_runtime ? strlen(as_runtime) : len, HPN_CMD_ADD, &conf,
				&entry_text, err);
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

/*
 * The plugin at path, read whole into *ret_bin (the caller frees it), checked
 * to be an executable of this machine. 1 when its loader is a bundle's
 * (root, id: where it must be; src: the bundle beside path, which is there),
 * 0 when it runs on the host's own loader.
 */
static int plugin_read(const char *path, char **ret_bin, size_t *ret_len, char root[PATH_MAX],
		       char id[NAME_MAX + 1], char src[PATH_MAX], struct hpn_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *bin = NULL;
	char interp[PATH_MAX];
	size_t len = 0;
	bool bundled;
	int r;

	if (fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open %s: %s", path, strerror(errno));
	if (inst_elf_interp(fd, interp, sizeof(interp)) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENOEXEC,
				   "%s is not an executable of this machine", path);
	r = hpn_read_all(fd, PLUGIN_MAX, &bin, &len);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, -r, "read %s: %s", path, strerror(-r));
	bundled = interp[0] && bundle_of(interp, root, id);
	if (bundled) {
		const char *slash = strrchr(path, '/');
		struct stat st;

		snprintf(src, PATH_MAX, "%.*s/%s", slash ? (int)(slash - path) : 1,
			 slash ? path : ".", id);
		if (stat(src, &st) < 0 || !S_ISDIR(st.st_mode))
			return hpn_err_set(err, HPN_E_IO, ENOENT,
					   "%s's loader is %s, but its bundle %s is not there",
					   path, interp, src);
	}
	*ret_bin = TAKE_PTR(bin);
	*ret_len = len;
	return bundled;
}

static int do_install(const struct opts *o, struct hpn_err *err)
{
	_cleanup_free_ char *bin = NULL, *conf = NULL, *state = NULL, *kc_path = NULL;
	char root[PATH_MAX], id[NAME_MAX + 1], src[PATH_MAX];
	size_t bin_len = 0, conf_len = 0;
	int r = 0, changed = 0;
	bool bundled;

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
	if (!o->no_plugin) {
		r = plugin_read(o->plugin, &bin, &bin_len, root, id, src, err);
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
	if (!o->no_plugin) {
		_cleanup_close_ int bfd = open_dir(o->bin_dir, true, err);
		char old_root[PATH_MAX] = "", old_id[NAME_MAX + 1] = "";
		bool existed;

		if (bfd < 0)
			return bfd;
		existed = faccessat(bfd, PLUGIN_NAME, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
		bundle_of_file(bfd, PLUGIN_NAME, old_root, old_id);
		r = hpn_install_file(bfd, PLUGIN_NAME, bin, bin_len, 0755, err);
		if (r < 0)
			return r;
		say(r ? (existed ? "updated" : "installed") : "unchanged", o->bin_dir, PLUGIN_NAME,
		    NULL);
		changed += r;
		/* Bundles no binary names now: the old one stays for an ADD that started
		 * before the swap. */
		if (bundled)
			prune_bundles(root, id, old_id[0] ? old_id : NULL,
				      "an earlier plugin's bundle");
	}
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

/* ---- with a manifest: node images, a node beside the .deb ------------------------ */

/*
 * The SHA-256 of what install put in place, as sha256sum(1) prints it: the
 * manifest names each file with it (FIPS 180-4; no library of the node's
 * needed for it).
 */
static const uint32_t sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
	0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
	0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
	0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
	0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2,
};

static uint32_t ror32(uint32_t x, unsigned n)
{
	return (x >> n) | (x << (32 - n));
}

static void sha256_block(uint32_t h[8], const unsigned char *p)
{
	uint32_t w[64], v[8];

	for (size_t i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
	for (size_t i = 16; i < 64; i++)
		w[i] = w[i - 16] + (ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3)) +
		       w[i - 7] + (ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10));
	memcpy(v, h, sizeof(v));
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = v[7] + (ror32(v[4], 6) ^ ror32(v[4], 11) ^ ror32(v[4], 25)) +
			      ((v[4] & v[5]) ^ (~v[4] & v[6])) + sha256_k[i] + w[i];
		uint32_t t2 = (ror32(v[0], 2) ^ ror32(v[0], 13) ^ ror32(v[0], 22)) +
			      ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));

		memmove(v + 1, v, 7 * sizeof(v[0]));
		v[4] += t1;
		v[0] = t1 + t2;
	}
	for (int i = 0; i < 8; i++)
		h[i] += v[i];
}

void inst_sha256(const void *data, size_t len, char out[INST_SHA256_HEX])
{
	uint32_t h[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
			  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
	const unsigned char *p = data;
	unsigned char tail[128] = { 0 };
	size_t full = len / 64 * 64, rest = len - full, tail_len;
	uint64_t bits = (uint64_t)len * 8;

	for (size_t i = 0; i < full; i += 64)
		sha256_block(h, p + i);
	if (rest)
		memcpy(tail, p + full, rest);
	tail[rest] = 0x80;
	tail_len = rest + 1 + 8 <= 64 ? 64 : 128;
	for (int i = 0; i < 8; i++)
		tail[tail_len - 1 - i] = (unsigned char)(bits >> (8 * i));
	for (size_t i = 0; i < tail_len; i += 64)
		sha256_block(h, tail + i);
	for (size_t i = 0; i < 8; i++)
		snprintf(out + 8 * i, INST_SHA256_HEX - 8 * i, "%08x", h[i]);
}

/* What a manifest lists: "file <sha256> <path>", "dir <path>", "tree <path>". */
enum entry_kind { ENTRY_FILE, ENTRY_DIR, ENTRY_TREE };

struct entry {
	enum entry_kind kind;
	char sum[INST_SHA256_HEX]; /* ENTRY_FILE */
	char *path;		   /* without DESTDIR */
};

#define ENTRIES_MAX  512
#define MANIFEST_MAX (1u << 20)
#define MANIFEST_REL "/share/hpn-rdma/install.manifest"
#define MODPROBE     "/etc/modprobe.d/hpn-rdma.conf"

struct manifest {
	struct entry e[ENTRIES_MAX];
	int n;
};

static void manifest_free(struct manifest *m)
{
	for (int i = 0; m && i < m->n; i++)
		free(m->e[i].path);
	free(m);
}

static struct entry *manifest_find(struct manifest *m, enum entry_kind kind, const char *path)
{
	for (int i = 0; i < m->n; i++)
		if (m->e[i].kind == kind && !strcmp(m->e[i].path, path))
			return &m->e[i];
	return NULL;
}

/* Adds (a file: sets) path; a directory or tree listed already stays where it is. */
static int manifest_add(struct manifest *m, enum entry_kind kind, const char *sum, const char *path)
{
	struct entry *e = manifest_find(m, kind, path);

	if (!e) {
		if (m->n == ENTRIES_MAX)
			return -ENOSPC;
		e = &m->e[m->n];
		e->path = hpn_strdup(path);
		if (!e->path)
			return -ENOMEM;
		e->kind = kind;
		e->sum[0] = '\0';
		m->n++;
	}
	if (sum)
		snprintf(e->sum, sizeof(e->sum), "%s", sum);
	return 0;
}

/* The manifest's text into m; a line that is not one of the three is an error. */
static int manifest_parse(const char *text, struct manifest *m, struct hpn_err *err)
{
	_cleanup_free_ char *copy = hpn_strdup(text);
	char *line, *save = NULL;
	int n = 0;

	if (!copy)
		return -ENOMEM;
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *kind, *a, *b, *more, *ws = NULL;
		enum entry_kind k;
		int r;

		n++;
		kind = strtok_r(line, " \t", &ws);
		if (!kind || kind[0] == '#')
			continue;
		a = strtok_r(NULL, " \t", &ws);
		b = strtok_r(NULL, " \t", &ws);
		more = strtok_r(NULL, " \t", &ws);
		k = !strcmp(kind, "file")  ? ENTRY_FILE
		    : !strcmp(kind, "dir") ? ENTRY_DIR
					   : ENTRY_TREE;
		if (more || !a || (k == ENTRY_FILE) != !!b ||
		    (k == ENTRY_TREE && strcmp(kind, "tree")) ||
		    (k == ENTRY_FILE && (strlen(a) != INST_SHA256_HEX - 1 ||
					 strspn(a, "0123456789abcdef") != strlen(a))) ||
		    !clean_path(k == ENTRY_FILE ? b : a) || !strcmp(k == ENTRY_FILE ? b : a, "/"))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "line %d is not \"file SHA256 PATH\", \"dir PATH\" or "
					   "\"tree PATH\"",
					   n);
		r = manifest_add(m, k, k == ENTRY_FILE ? a : NULL, k == ENTRY_FILE ? b : a);
		if (r < 0)
			return hpn_err_set(err, HPN_E_IO, -r, "line %d: %s", n, strerror(-r));
	}
	return 0;
}

static int path_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct entry *const *)a)->path,
		      (*(const struct entry *const *)b)->path);
}

/* The manifest's text: its directories in the order made, then trees and files by path. */
static char *manifest_render(const struct manifest *m)
{
	const struct entry *sorted[ENTRIES_MAX];
	char *out = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&out, &size);
	int n = 0;

	if (!f)
		return NULL;
	fputs("# hpn-rdma install manifest: what hpn-rdma-agent install installed (paths without "
	      "DESTDIR)\n",
	      f);
	for (int i = 0; i < m->n; i++) {
		if (m->e[i].kind == ENTRY_DIR)
			fprintf(f, "dir %s\n", m->e[i].path);
		else
			sorted[n++] = &m->e[i];
	}
	qsort(sorted, (size_t)n, sizeof(const struct entry *), path_cmp);
	for (int i = 0; i < n; i++) {
		if (sorted[i]->kind == ENTRY_TREE)
			fprintf(f, "tree %s\n", sorted[i]->path);
		else
			fprintf(f, "file %s %s\n", sorted[i]->sum, sorted[i]->path);
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* Drops the trees of m that are not there any more (an earlier plugin's bundle, pruned). */
static void manifest_drop_gone(struct manifest *m, const char *destdir)
{
	int k = 0;

	for (int i = 0; i < m->n; i++) {
		char full[PATH_MAX];
		struct stat st;

		if (m->e[i].kind == ENTRY_TREE &&
		    hpn_snprintf(full, sizeof(full), "%s%s", destdir, m->e[i].path) == 0 &&
		    lstat(full, &st) < 0 && errno == ENOENT) {
			free(m->e[i].path);
			continue;
		}
		m->e[k++] = m->e[i];
	}
	m->n = k;
}

/* One run with a manifest: where things go, what was there, what is now. */
struct bake {
	const struct opts *o;
	const char *destdir; /* "" for none */
	char manifest[PATH_MAX];
	struct manifest *old, *now;
};

/* DESTDIR and path as one path in buf. */
static int root_path(const struct bake *b, const char *path, char buf[PATH_MAX],
		     struct hpn_err *err)
{
	if (hpn_snprintf(buf, PATH_MAX, "%s%s", b->destdir, path) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG, "%s%s: too long",
				   b->destdir, path);
	return 0;
}

/* The directory part of an absolute path ("/" for "/x"). */
static void dir_of(const char *path, char buf[PATH_MAX])
{
	const char *slash = strrchr(path, '/');

	snprintf(buf, PATH_MAX, "%.*s", slash && slash != path ? (int)(slash - path) : 1, path);
}

/* Creates the missing directories of dir (without DESTDIR), parent first, each listed. */
static int mkdirs(struct bake *b, const char *dir, struct hpn_err *err)
{
	char d[PATH_MAX], full[PATH_MAX], *missing[PATH_MAX / 2];
	int n = 0, r = 0;

	snprintf(d, sizeof(d), "%s", dir);
	while (strcmp(d, "/")) {
		struct stat st;

		r = root_path(b, d, full, err);
		if (r < 0)
			break;
		if (stat(full, &st) == 0 && S_ISDIR(st.st_mode))
			break;
		missing[n] = hpn_strdup(d);
		if (!missing[n]) {
			r = -ENOMEM;
			break;
		}
		n++;
		dir_of(missing[n - 1], d);
	}
	while (n > 0) {
		char *m = missing[--n];

		if (r == 0 && !b->o->dry_run && (r = root_path(b, m, full, err)) == 0 &&
		    mkdir(full, 0755) < 0 && errno != EEXIST)
			r = hpn_err_set(err, HPN_E_IO, errno, "create %s: %s", full,
					strerror(errno));
		if (r == 0 && manifest_add(b->now, ENTRY_DIR, NULL, m) < 0)
			r = hpn_err_set(err, HPN_E_IO, ENOSPC, "more than %d entries", ENTRIES_MAX);
		free(m);
	}
	return r;
}

/* The SHA-256 of the file at DESTDIR/path: 1, 0 when there is none, or an error. */
static int sum_of(const struct bake *b, const char *path, char sum[INST_SHA256_HEX],
		  struct hpn_err *err)
{
	_cleanup_free_ char *buf = NULL;
	char full[PATH_MAX];
	size_t len = 0;
	int fd, r;

	r = root_path(b, path, full, err);
	if (r < 0)
		return r;
	fd = open(full, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open %s: %s", full, strerror(errno));
	r = hpn_read_all(fd, PLUGIN_MAX, &buf, &len);
	close(fd);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, -r, "read %s: %s", full, strerror(-r));
	inst_sha256(buf, len, sum);
	return 1;
}

/* What to install: a file (data) or, for a bundle, a tree (src). */
struct item {
	char path[PATH_MAX]; /* without DESTDIR */
	char *data;
	size_t len;
	mode_t mode;
	char sum[INST_SHA256_HEX];
	const char *tree_src;
	const char *action; /* "installed", "unchanged", "update", "replace"; NULL: refused */
};

#define ITEMS_MAX 64

struct plan {
	struct item it[ITEMS_MAX];
	int n;
};

/* Adds dir/name with data (taken), or with tree_src a bundle's tree. */
static int plan_add(struct plan *p, const char *dir, const char *name, char *data, size_t len,
		    mode_t mode, const char *tree_src, struct hpn_err *err)
{
	struct item *it;

	if (p->n == ITEMS_MAX) {
		free(data);
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENOSPC, "more than %d files",
				   ITEMS_MAX);
	}
	it = &p->it[p->n];
	*it = (struct item){ .data = data, .len = len, .mode = mode, .tree_src = tree_src };
	if (!clean_path(dir) || !hpn_valid_path_component(name) || strpbrk(name, " \t\n") ||
	    hpn_snprintf(it->path, sizeof(it->path), "%s/%s", strcmp(dir, "/") ? dir : "", name) <
		    0) {
		free(data);
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "\"%s\" cannot be installed (a plain file name, no white "
				   "space)",
				   name);
	}
	if (data)
		inst_sha256(data, len, it->sum);
	p->n++;
	return 0;
}

/* Adds the file at src as dir/<its name> (or name), mode. */
static int plan_file(struct plan *p, const char *src, const char *dir, const char *name,
		     mode_t mode, struct hpn_err *err)
{
	char *data = NULL;
	size_t len = 0;
	int r = hpn_read_file(src, PLUGIN_MAX, &data, &len, err);

	if (r < 0)
		return r;
	if (!name)
		name = strrchr(src, '/') ? strrchr(src, '/') + 1 : src;
	return plan_add(p, dir, name, data, len, mode, NULL, err);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .conf and .conflist files of src, by name, into the examples directory. */
static int plan_examples(struct plan *p, const char *src, const char *dir, struct hpn_err *err)
{
	DIR *d = opendir(src);
	struct dirent *de;
	char *names[ITEMS_MAX];
	int n = 0, r = 0;

	if (!d)
		return hpn_err_set(err, HPN_E_IO, errno, "open %s: %s", src, strerror(errno));
	while ((de = readdir(d)) && r == 0) {
		size_t len = strlen(de->d_name);

		if (de->d_name[0] == '.' ||
		    !((len > 5 && !strcmp(de->d_name + len - 5, ".conf")) ||
		      (len > 9 && !strcmp(de->d_name + len - 9, ".conflist"))))
			continue;
		if (n == ITEMS_MAX || !(names[n] = hpn_strdup(de->d_name)))
			r = hpn_err_set(err, HPN_E_IO, ENOSPC, "%s: too many examples", src);
		else
			n++;
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), name_cmp);
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX];

		if (r == 0 && hpn_snprintf(path, sizeof(path), "%s/%s", src, names[i]) < 0)
			r = hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG, "%s: too long",
					src);
		if (r == 0)
			r = plan_file(p, path, dir, names[i], 0644, err);
		free(names[i]);
	}
	return r;
}

/* The manifest at DESTDIR/<prefix>/share/hpn-rdma/install.manifest into b->old: 1, 0 if none. */
static int manifest_load(struct bake *b, struct hpn_err *err)
{
	_cleanup_free_ char *text = NULL;
	char full[PATH_MAX];
	size_t len;
	int r = root_path(b, b->manifest, full, err);

	if (r < 0)
		return r;
	if (access(full, F_OK) < 0 && errno == ENOENT)
		return 0;
	r = hpn_read_file(full, MANIFEST_MAX, &text, &len, err);
	if (r < 0)
		return r;
	r = manifest_parse(text, b->old, err);
	if (r < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, -r, "%s: %s", full,
				   err->msg[0] ? err->msg : strerror(-r));
	return 1;
}

static int bake_init(struct bake *b, const struct opts *o, struct hpn_err *err)
{
	b->o = o;
	b->destdir = o->destdir ? o->destdir : "";
	if (hpn_snprintf(b->manifest, sizeof(b->manifest), "%s" MANIFEST_REL,
			 strcmp(o->prefix, "/") ? o->prefix : "") < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG, "--prefix is too long");
	b->old = calloc(1, sizeof(*b->old));
	b->now = calloc(1, sizeof(*b->now));
	if (!b->old || !b->now)
		return -ENOMEM;
	return manifest_load(b, err);
}

static void bake_free(struct bake *b)
{
	manifest_free(b->old);
	manifest_free(b->now);
}

static void plan_free(struct plan *p)
{
	for (int i = 0; i < p->n; i++)
		free(p->it[i].data);
	free(p);
}

/* What the install would put where, read whole before anything is decided. */
static int plan_make(struct bake *b, struct plan *p, char bundle_src[PATH_MAX], struct hpn_err *err)
{
	const struct opts *o = b->o;
	const char *prefix = strcmp(o->prefix, "/") ? o->prefix : "";
	char dir[PATH_MAX];
	int r;

	if (!o->no_plugin) {
		char root[PATH_MAX], id[NAME_MAX + 1];
		char *bin = NULL;
		size_t len = 0;

		r = plugin_read(o->plugin, &bin, &len, root, id, bundle_src, err);
		if (r < 0)
			return r;
		/* The bundle first: nothing names it yet. */
		if (r == 1) {
			r = plan_add(p, root, id, NULL, 0, 0755, bundle_src, err);
			if (r < 0) {
				free(bin);
				return r;
			}
		}
		r = plan_add(p, o->bin_dir, PLUGIN_NAME, bin, len, 0755, NULL, err);
		if (r < 0)
			return r;
	}
	if (o->man) {
		snprintf(dir, sizeof(dir), "%s/share/man/man8", prefix);
		r = plan_file(p, o->man, dir, NULL, 0644, err);
		if (r < 0)
			return r;
	}
	if (o->examples) {
		snprintf(dir, sizeof(dir), "%s/share/hpn-rdma/examples", prefix);
		r = plan_examples(p, o->examples, dir, err);
		if (r < 0)
			return r;
	}
	if (o->netns_mode) {
		char text[512];
		int n = snprintf(text, sizeof(text),
				 "# Written by hpn-rdma-agent install: the RDMA netns mode ib_core "
				 "starts in\n# (1 shared: every netns sees every RDMA device; 0 "
				 "exclusive: a device lives in one netns).\noptions ib_core "
				 "netns_mode=%d\n",
				 strcmp(o->netns_mode, "shared") ? 0 : 1);

		r = plan_add(p, "/etc/modprobe.d", strrchr(MODPROBE, '/') + 1, hpn_strdup(text),
			     (size_t)n, 0644, NULL, err);
		if (r < 0)
			return r;
	}
	/* The conflist last: what it names is in place when a runtime reads it. */
	if (o->conf && !o->no_conf) {
		r = plan_file(p, o->conf, o->conf_dir, NULL, 0644, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Each item's action from what is there and the old manifest; how many are in the way. */
static int plan_decide(struct bake *b, struct plan *p, struct hpn_err *err)
{
	int conflicts = 0;

	for (int i = 0; i < p->n; i++) {
		struct item *it = &p->it[i];
		const struct entry *old = manifest_find(b->old, ENTRY_FILE, it->path);
		char sum[INST_SHA256_HEX];
		int r;

		if (it->tree_src) {
			char full[PATH_MAX];
			struct stat st;

			/* A bundle is named for its contents: there already is the same. */
			r = root_path(b, it->path, full, err);
			if (r < 0)
				return r;
			it->action = stat(full, &st) == 0 && S_ISDIR(st.st_mode) ? "unchanged"
										 : "installed";
			continue;
		}
		r = sum_of(b, it->path, sum, err);
		if (r < 0)
			return r;
		if (r == 0)
			it->action = "installed";
		else if (!strcmp(sum, it->sum))
			it->action = "unchanged";
		else if (old && !strcmp(old->sum, sum))
			it->action = "update"; /* ours, as we left it: an upgrade */
		else if (b->o->force)
			it->action = "replace";
		else {
			say("refused", it->path, NULL,
			    "a different file is there that hpn-rdma-agent install did not install "
			    "(--force replaces it)");
			conflicts++;
		}
	}
	return conflicts;
}

/* Puts one item in place (or, dry, only says so); 1 when it changed something. */
static int item_apply(struct bake *b, const struct item *it, struct hpn_err *err)
{
	const char *name = strrchr(it->path, '/') + 1;
	char dir[PATH_MAX];
	int r;

	if (!strcmp(it->action, "unchanged")) {
		say("unchanged", it->path, NULL, NULL);
		return 0;
	}
	dir_of(it->path, dir);
	r = mkdirs(b, dir, err);
	if (r < 0)
		return r;
	if (!b->o->dry_run) {
		_cleanup_close_ int dfd = -1;
		char full[PATH_MAX];

		r = root_path(b, dir, full, err);
		if (r < 0)
			return r;
		dfd = open(full, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return hpn_err_set(err, HPN_E_IO, errno, "open %s: %s", full,
					   strerror(errno));
		r = it->tree_src ? inst_tree(it->tree_src, dfd, name, err)
				 : hpn_install_file(dfd, name, it->data, it->len, it->mode, err);
		if (r < 0)
			return r;
	}
	say(it->action, it->path, NULL, NULL);
	return 1;
}

/* rdma system set netns MODE, now: spawned, never forked (no threads here, but the rule). */
static int netns_apply(const char *mode)
{
	char *argv[] = { (char *)"rdma",  (char *)"system", (char *)"set",
			 (char *)"netns", (char *)mode,	    NULL };
	int status;
	pid_t pid;

	if (posix_spawnp(&pid, "rdma", NULL, NULL, argv, environ) != 0)
		return -1;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int bake_install(const struct opts *o, struct hpn_err *err)
{
	struct bake b = { 0 };
	struct plan *p = calloc(1, sizeof(*p));
	_cleanup_free_ char *conf = NULL, *state = NULL, *kc_path = NULL, *text = NULL;
	char bundle_src[PATH_MAX] = "", full[PATH_MAX], old_id[NAME_MAX + 1] = "";
	char old_root[PATH_MAX] = "";
	size_t conf_len = 0;
	int r, changed = 0;

	if (!p)
		return -ENOMEM;
	r = bake_init(&b, o, err);
	/* Everything is read and checked before anything changes. */
	if (r >= 0 && o->conf) {
		r = conf_read(o->conf, &conf, &conf_len, &state, &kc_path, err);
		if (r >= 0 && kc_path)
			printf("note: %s reads %s, which this install does not write\n", o->conf,
			       kc_path);
	}
	if (r >= 0)
		r = plan_make(&b, p, bundle_src, err);
	if (r < 0)
		goto out;
	printf("hpn-rdma install%s%s%s, prefix %s%s\n", b.destdir[0] ? " (DESTDIR=" : "", b.destdir,
	       b.destdir[0] ? ")" : "", o->prefix, o->dry_run ? ", dry run" : "");
	fflush(stdout);
	r = plan_decide(&b, p, err);
	if (r < 0)
		goto out;
	if (r > 0) {
		printf("nothing changed: %d file(s) in the way\n", r);
		r = 1;
		goto out;
	}
	/* A DESTDIR that is not there yet is made, as make install DESTDIR= does; it is
	 * not part of what is installed (not in the manifest). */
	if (b.destdir[0] && !o->dry_run && (r = hpn_mkdir_p(b.destdir, 0755)) < 0) {
		r = hpn_err_set(err, HPN_E_IO, -r, "create %s: %s", b.destdir, strerror(-r));
		goto out;
	}
	/* The directories an earlier run made, in order; its files and trees still as it left them. */
	for (int i = 0; i < b.old->n; i++) {
		const struct entry *e = &b.old->e[i];
		char sum[INST_SHA256_HEX];
		struct stat st;

		bool keep = e->kind == ENTRY_DIR ||
			    (e->kind == ENTRY_FILE && sum_of(&b, e->path, sum, err) == 1 &&
			     !strcmp(sum, e->sum)) ||
			    (e->kind == ENTRY_TREE && root_path(&b, e->path, full, err) == 0 &&
			     stat(full, &st) == 0 && S_ISDIR(st.st_mode));

		r = keep ? manifest_add(b.now, e->kind, e->kind == ENTRY_FILE ? e->sum : NULL,
					e->path)
			 : 0;
		if (r < 0)
			goto out;
	}
	if (!o->no_plugin && bundle_src[0]) {
		_cleanup_close_ int bfd = -1;

		r = root_path(&b, o->bin_dir, full, err);
		if (r < 0)
			goto out;
		bfd = open(full, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (bfd >= 0)
			bundle_of_file(bfd, PLUGIN_NAME, old_root, old_id);
	}
	for (int i = 0; i < p->n; i++) {
		r = item_apply(&b, &p->it[i], err);
		if (r < 0)
			goto out;
		changed += r;
		r = manifest_add(b.now, p->it[i].tree_src ? ENTRY_TREE : ENTRY_FILE,
				 p->it[i].tree_src ? NULL : p->it[i].sum, p->it[i].path);
		if (r < 0)
			goto out;
	}
	/* Bundles no binary names now (the old one stays for an ADD that started before). */
	if (bundle_src[0] && !o->dry_run) {
		const struct item *t = &p->it[0];
		char root[PATH_MAX];

		dir_of(t->path, root);
		if (root_path(&b, root, full, err) == 0)
			prune_bundles(full, strrchr(t->path, '/') + 1, old_id[0] ? old_id : NULL,
				      "an earlier plugin's bundle");
		manifest_drop_gone(b.now, b.destdir);
	}
	dir_of(b.manifest, full);
	r = mkdirs(&b, full, err);
	if (r < 0)
		goto out;
	text = manifest_render(b.now);
	if (!text) {
		r = -ENOMEM;
		goto out;
	}
	if (!o->dry_run) {
		_cleanup_close_ int mfd = -1;
		char mdir[PATH_MAX];

		dir_of(b.manifest, mdir);
		r = root_path(&b, mdir, full, err);
		if (r < 0)
			goto out;
		mfd = open(full, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		r = mfd < 0 ? hpn_err_set(err, HPN_E_IO, errno, "open %s: %s", full,
					  strerror(errno))
			    : hpn_install_file(mfd, strrchr(b.manifest, '/') + 1, text,
					       strlen(text), 0644, err);
		if (r < 0)
			goto out;
		if (r)
			say("written", b.manifest, NULL, NULL);
	}
	if (o->apply_now && !o->dry_run) {
		if (netns_apply(o->netns_mode) < 0) {
			fprintf(stderr,
				"rdma system set netns %s failed (exclusive mode needs no other "
				"netns to exist); %s applies when ib_core next loads\n",
				o->netns_mode, o->netns_mode);
			r = 1;
			goto out;
		}
		printf("  %-10s rdma system set netns %s\n", "applied", o->netns_mode);
	}
	if (o->netns_mode && !b.destdir[0])
		printf("note: if ib_core loads from the initramfs, run update-initramfs -u for the "
		       "option\n");
	if (changed)
		printf("done: %d file(s) installed or updated\n", changed);
	else
		printf("nothing changed: everything was already installed\n");
	r = 0;
out:
	plan_free(p);
	bake_free(&b);
	return r;
}

static int bake_uninstall(const struct opts *o, struct hpn_err *err)
{
	struct bake b = { 0 };
	const struct entry *files[ENTRIES_MAX];
	char full[PATH_MAX], what[PATH_MAX + 2];
	int r, n = 0, kept = 0;

	r = bake_init(&b, o, err);
	if (r < 0)
		goto out;
	printf("hpn-rdma uninstall%s%s%s%s\n", b.destdir[0] ? " (DESTDIR=" : "", b.destdir,
	       b.destdir[0] ? ")" : "", o->dry_run ? ", dry run" : "");
	if (r == 0) {
		r = root_path(&b, b.manifest, full, err);
		if (r == 0)
			printf("nothing to do: no manifest at %s\n", full);
		goto out;
	}
	for (int i = 0; i < b.old->n; i++)
		if (b.old->e[i].kind != ENTRY_DIR)
			files[n++] = &b.old->e[i];
	qsort(files, (size_t)n, sizeof(const struct entry *), path_cmp);
	for (int i = 0; i < n; i++) {
		const struct entry *e = files[i];
		char sum[INST_SHA256_HEX];
		struct stat st;

		r = root_path(&b, e->path, full, err);
		if (r < 0)
			goto out;
		if (e->kind == ENTRY_TREE) {
			if (lstat(full, &st) < 0) {
				say("gone", e->path, NULL, NULL);
			} else if (!o->dry_run && (r = inst_rm_tree(AT_FDCWD, full)) < 0) {
				r = hpn_err_set(err, HPN_E_IO, -r, "remove %s: %s", full,
						strerror(-r));
				goto out;
			} else {
				say("removed", e->path, NULL, NULL);
			}
			continue;
		}
		r = sum_of(&b, e->path, sum, err);
		if (r < 0)
			goto out;
		if (r == 0) {
			say("gone", e->path, NULL, NULL);
		} else if (!strcmp(sum, e->sum) || o->force) {
			if (!o->dry_run && unlink(full) < 0 && errno != ENOENT) {
				r = hpn_err_set(err, HPN_E_IO, errno, "remove %s: %s", full,
						strerror(errno));
				goto out;
			}
			say("removed", e->path, NULL, NULL);
		} else {
			say("kept", e->path, NULL,
			    "changed since it was installed (--force removes it)");
			kept++;
		}
	}
	r = root_path(&b, b.manifest, full, err);
	if (r < 0)
		goto out;
	if (!o->dry_run && unlink(full) < 0 && errno != ENOENT) {
		r = hpn_err_set(err, HPN_E_IO, errno, "remove %s: %s", full, strerror(errno));
		goto out;
	}
	say("removed", b.manifest, NULL, NULL);
	/* Deepest first: only the directories install made, and only when empty. */
	for (int i = b.old->n - 1; i >= 0; i--) {
		const struct entry *e = &b.old->e[i];
		struct stat st;

		if (e->kind != ENTRY_DIR || root_path(&b, e->path, full, err) < 0)
			continue;
		snprintf(what, sizeof(what), "%s/", e->path);
		if (o->dry_run || rmdir(full) == 0)
			say("removed", what, NULL, NULL);
		else if (stat(full, &st) == 0 && S_ISDIR(st.st_mode))
			say("kept", what, NULL, "not empty");
	}
	if (kept)
		printf("done, %d file(s) kept\n", kept);
	else
		printf("done\n");
	r = 0;
out:
	bake_free(&b);
	return r;
}

int agent_install_main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct hpn_err err = { 0 };
	int r = parse(argc, argv, &o);

	if (r >= 0)
		return r;
	umask(0022);
	if (o.manifest)
		r = o.uninstall ? bake_uninstall(&o, &err) : bake_install(&o, &err);
	else
		r = o.uninstall ? do_uninstall(&o, &err) : do_install(&o, &err);
	if (r < 0) {
		fprintf(stderr, "hpn-rdma-agent %s: %s\n", argv[0],
			err.msg[0] ? err.msg : strerror(-r));
		return 1;
	}
	return r;
}
