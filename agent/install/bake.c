// SPDX-License-Identifier: Apache-2.0
/*
 * hpn-rdma-agent install and uninstall with a manifest (--prefix, --destdir:
 * node images, a node beside the .deb): every file planned and decided
 * before any is written, its SHA-256 in the manifest, uninstall of exactly
 * what the manifest lists and is unchanged (doc/install.md).
 */
#include <dirent.h>

#include <errno.h>
#include <fcntl.h>

#include <spawn.h>

#include <stdio.h>

#include <string.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include "bake.h"

#include "installkit.h"

#include "sha256.h"

#include "util.h"

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
		    !inst_clean_path(k == ENTRY_FILE ? b : a) ||
		    !strcmp(k == ENTRY_FILE ? b : a, "/"))
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
	if (!inst_clean_path(dir) || !hpn_valid_path_component(name) || strpbrk(name, " \t\n") ||
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

		r = inst_plugin_read(o->plugin, &bin, &len, root, id, bundle_src, err);
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
			inst_say("refused", it->path, NULL,
				 "a different file is there that hpn-rdma-agent install did not "
				 "install "
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
		inst_say("unchanged", it->path, NULL, NULL);
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
	inst_say(it->action, it->path, NULL, NULL);
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

int inst_bake_install(const struct opts *o, struct hpn_err *err)
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
		r = inst_conf_read(o->conf, &conf, &conf_len, &state, &kc_path, err);
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
			inst_bundle_of_file(bfd, PLUGIN_NAME, old_root, old_id);
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
			inst_prune_bundles(full, strrchr(t->path, '/') + 1,
					   old_id[0] ? old_id : NULL, "an earlier plugin's bundle");
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
			inst_say("written", b.manifest, NULL, NULL);
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

int inst_bake_uninstall(const struct opts *o, struct hpn_err *err)
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
				inst_say("gone", e->path, NULL, NULL);
			} else if (!o->dry_run && (r = inst_rm_tree(AT_FDCWD, full)) < 0) {
				r = hpn_err_set(err, HPN_E_IO, -r, "remove %s: %s", full,
						strerror(-r));
				goto out;
			} else {
				inst_say("removed", e->path, NULL, NULL);
			}
			continue;
		}
		r = sum_of(&b, e->path, sum, err);
		if (r < 0)
			goto out;
		if (r == 0) {
			inst_say("gone", e->path, NULL, NULL);
		} else if (!strcmp(sum, e->sum) || o->force) {
			if (!o->dry_run && unlink(full) < 0 && errno != ENOENT) {
				r = hpn_err_set(err, HPN_E_IO, errno, "remove %s: %s", full,
						strerror(errno));
				goto out;
			}
			inst_say("removed", e->path, NULL, NULL);
		} else {
			inst_say("kept", e->path, NULL,
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
	inst_say("removed", b.manifest, NULL, NULL);
	/* Deepest first: only the directories install made, and only when empty. */
	for (int i = b.old->n - 1; i >= 0; i--) {
		const struct entry *e = &b.old->e[i];
		struct stat st;

		if (e->kind != ENTRY_DIR || root_path(&b, e->path, full, err) < 0)
			continue;
		snprintf(what, sizeof(what), "%s/", e->path);
		if (o->dry_run || rmdir(full) == 0)
			inst_say("removed", what, NULL, NULL);
		else if (stat(full, &st) == 0 && S_ISDIR(st.st_mode))
			inst_say("kept", what, NULL, "not empty");
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
