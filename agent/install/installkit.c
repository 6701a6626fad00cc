// SPDX-License-Identifier: Apache-2.0
/*
 * What both modes of hpn-rdma-agent install and uninstall share
 * (installkit.h): options, trees and bundles, the plugin and the conflist
 * read and checked, the journals that hold NICs.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>

#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "conf.h"
#include "installkit.h"
#include "sakubeconfig.h"

#include "store.h"
#include "util.h"

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
int inst_bundle_of_file(int dfd, const char *name, char root[PATH_MAX], char id[NAME_MAX + 1])
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

/* ---- the options, the plugin and the conflist --------------------------------- */

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
	"  --kubeconfig PATH      write the plugin's kubeconfig there (must be the\n"
	"                         conflist's kubernetes.kubeconfig): the token of the\n"
	"                         plugin's own service account, asked of the API with\n"
	"                         this pod's (TokenRequest); refused: none written, and\n"
	"                         one holding another token removed (the install goes on)\n"
	"  --plugin-service-account [NS/]NAME  the plugin's (default " KC_PLUGIN_SA "\n"
	"                         in this pod's namespace)\n"
	"  --plugin-token-seconds N  the token's lifetime asked for (default 3600)\n"
	"  --service-account DIR  this pod's token, ca.crt and namespace (default\n"
	"                         " DEFAULT_SA ")\n"
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
bool inst_clean_path(const char *p)
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
		if (dirs[i] && !inst_clean_path(dirs[i])) {
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

int inst_parse(int argc, char **argv, struct opts *o)
{
	static const struct option opts[] = {
		{ "plugin", required_argument, NULL, 'p' },
		{ "no-plugin", no_argument, NULL, 'P' },
		{ "cni-bin-dir", required_argument, NULL, 'b' },
		{ "conf", required_argument, NULL, 'c' },
		{ "cni-conf-dir", required_argument, NULL, 'C' },
		{ "kubeconfig", required_argument, NULL, 'k' },
		{ "service-account", required_argument, NULL, 's' },
		{ "plugin-service-account", required_argument, NULL, 'A' },
		{ "plugin-token-seconds", required_argument, NULL, 'T' },
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
		case 'A':
			o->plugin_sa = optarg;
			break;
		case 'T': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || !*optarg || optarg[0] == '-' || v < KC_PLUGIN_TTL_MIN ||
			    v > KC_PLUGIN_TTL_MAX)
				return usage_error(cmd, "--plugin-token-seconds is out of range");
			o->plugin_ttl = (unsigned)v;
			break;
		}
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
int inst_conf_read(const char *path, char **ret_text, size_t *ret_len, char **ret_state,
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

int inst_open_dir(const char *path, bool create, struct hpn_err *err)
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

void inst_say(const char *what, const char *dir, const char *name, const char *why)
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
int inst_prune_bundles(const char *root, const char *keep1, const char *keep2, const char *why)
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
			inst_say("removed", root, names[i], why);
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
int inst_plugin_read(const char *path, char **ret_bin, size_t *ret_len, char root[PATH_MAX],
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
