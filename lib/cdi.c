// SPDX-License-Identifier: Apache-2.0
/*
 * CDI specs (cdi.h), written from the public CDI specification
 * (cncf-tags/container-device-interface SPEC.md): cdiVersion, kind,
 * devices[].name and .containerEdits (env, deviceNodes with path, hostPath,
 * type, major, minor, permissions; mounts with hostPath, containerPath,
 * options, type; hooks), every one of them in 0.5.0. Runtimes
 * parse specs strictly (an unknown field fails the whole file), so nothing
 * else is written: no annotations (0.6.0), no marker of our own; a file is
 * told ours by its name, its kind and its one device.
 *
 * Two specs in one directory that define the same device make the runtime
 * drop the device (a conflict), and a torn or half-written .json file makes
 * it fail to load the file: hence one file per NIC, written through a temp
 * name the runtime does not load, renamed into place.
 */
#include "cdi.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define PREFIX_AGENT "alibabacloud.com-hpn-rdma_"
#define PREFIX_POD   "alibabacloud.com-hpn-rdma-pod_"
#define SUFFIX	     ".json"
#define SPEC_MAX     (64u << 10) /* ours are under 2 KiB; anything larger is not ours */
#define SPEC_MODE    0644

static bool alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool hpn_cdi_id_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (!n || n >= HPN_CDI_ID_MAX || !alnum(id[0]) || !alnum(id[n - 1]))
		return false;
	for (size_t i = 1; i + 1 < n; i++)
		if (!alnum(id[i]) && !strchr("_.:-", id[i]))
			return false;
	return true;
}

bool hpn_cdi_is_claim(const char *id)
{
	return strlen(id) >= HPN_IFNAMSIZ &&
	       !strncmp(id, HPN_CDI_CLAIM_PREFIX, strlen(HPN_CDI_CLAIM_PREFIX));
}

void hpn_cdi_name(const char *id, char out[HPN_CDI_NAME_MAX])
{
	snprintf(out, HPN_CDI_NAME_MAX, "%s=%s", HPN_CDI_KIND, id);
}

static const char *prefix(enum hpn_cdi_owner o)
{
	return o == HPN_CDI_POD ? PREFIX_POD : PREFIX_AGENT;
}

int hpn_cdi_file(enum hpn_cdi_owner o, const char *id, char out[HPN_CDI_FILE_MAX])
{
	if (!hpn_cdi_id_valid(id))
		return -EINVAL;
	return hpn_snprintf(out, HPN_CDI_FILE_MAX, "%s%s%s", prefix(o), id, SUFFIX);
}

int hpn_cdi_parse_file(const char *file, enum hpn_cdi_owner *o, char id[HPN_CDI_ID_MAX])
{
	static const enum hpn_cdi_owner owners[] = { HPN_CDI_AGENT, HPN_CDI_POD };
	size_t n = strlen(file), s = strlen(SUFFIX);

	if (n <= s || strcmp(file + n - s, SUFFIX))
		return -EINVAL;
	for (size_t k = 0; k < HPN_ARRAY_SIZE(owners); k++) {
		const char *p = prefix(owners[k]);
		size_t len = strlen(p);
		char v[HPN_CDI_ID_MAX];

		if (strncmp(file, p, len) || n - len - s >= sizeof(v))
			continue;
		memcpy(v, file + len, n - len - s);
		v[n - len - s] = '\0';
		if (!hpn_cdi_id_valid(v))
			return -EINVAL;
		memcpy(id, v, strlen(v) + 1);
		*o = owners[k];
		return 0;
	}
	return -EINVAL;
}

/*
 * cJSON's builders return NULL (Add*, Create*) or false (AddItemTo*) without
 * memory: every one is checked (hpn_json_put, hpn_json_push), for a spec with
 * a field missing (its hook: the access check) is worse than none.
 */

/* "HPN_RDMA_<what>_<S>=<value>", S the ID as an environment name may hold it. */
static cJSON *env_entry(const char *what, const char *id, const char *value)
{
	char key[HPN_CDI_ID_MAX], line[HPN_CDI_ID_MAX + 32 + HPN_CDI_SHARE_IDS_MAX];
	size_t i;

	for (i = 0; id[i] && i + 1 < sizeof(key); i++)
		key[i] = alnum(id[i]) ? (char)toupper((unsigned char)id[i]) : '_';
	key[i] = '\0';
	snprintf(line, sizeof(line), "HPN_RDMA_%s_%s=%s", what, key, value);
	return cJSON_CreateString(line);
}

static cJSON *env_to_json(const struct hpn_cdi_dev *d)
{
	cJSON *env = cJSON_CreateArray();
	bool ok = env &&
		  (!d->ibdev[0] || hpn_json_push(env, env_entry("DEVICE", d->id, d->ibdev))) &&
		  (!d->share_ids[0] ||
		   hpn_json_push(env, env_entry("SHARE_IDS", d->id, d->share_ids)));

	for (size_t k = 0; ok && k < d->n_nodes; k++)
		if (!strncmp(d->nodes[k].name, "uverbs", 6)) {
			char p[64];

			snprintf(p, sizeof(p), "/dev/infiniband/%s", d->nodes[k].name);
			ok = hpn_json_push(env, env_entry("UVERBS", d->id, p));
			break;
		}
	if (!ok) {
		cJSON_Delete(env);
		return NULL;
	}
	return env;
}

static cJSON *node_to_json(const struct hpn_cdi_node *n)
{
	cJSON *o = cJSON_CreateObject();
	char p[64];

	snprintf(p, sizeof(p), "/dev/infiniband/%s", n->name);
	/* With type and major the runtime takes the numbers as given, never a stat. */
	if (o && cJSON_AddStringToObject(o, "path", p) &&
	    cJSON_AddStringToObject(o, "hostPath", n->host_path) &&
	    cJSON_AddStringToObject(o, "type", "c") &&
	    cJSON_AddNumberToObject(o, "major", n->major) &&
	    cJSON_AddNumberToObject(o, "minor", n->minor) &&
	    cJSON_AddStringToObject(o, "permissions", "rw"))
		return o;
	cJSON_Delete(o);
	return NULL;
}

/*
 * The hints mount. The runtime applies it as an OCI mount (the CDI library's
 * Mount.toOCI: source, destination, type, options), removing any mount the
 * container had at that path first; runc bind-mounts a "bind" type, then
 * remounts it with ro, nosuid, nodev and noexec. Type "bind" is what
 * containerd's own CRI mounts carry; the spec allows any for a bind.
 */
static cJSON *mount_to_json(const struct hpn_cdi_mount *m)
{
	static const char *const opts[] = { "ro", "nosuid", "nodev", "noexec", "bind" };
	cJSON *o = cJSON_CreateObject();

	if (o && cJSON_AddStringToObject(o, "hostPath", m->host_path) &&
	    cJSON_AddStringToObject(o, "containerPath", m->container_path) &&
	    hpn_json_put(o, "options", cJSON_CreateStringArray(opts, HPN_ARRAY_SIZE(opts))) &&
	    cJSON_AddStringToObject(o, "type", "bind"))
		return o;
	cJSON_Delete(o);
	return NULL;
}

static cJSON *hook_to_json(const struct hpn_cdi_dev *d)
{
	const char *argv[] = { "hpn-rdma",  "cdi-hook",	     "--state-dir", d->hook.state_dir,
			       "--network", d->hook.network, d->id };
	cJSON *h = cJSON_CreateObject();

	if (h && cJSON_AddStringToObject(h, "hookName", "createRuntime") &&
	    cJSON_AddStringToObject(h, "path", d->hook.path) &&
	    hpn_json_put(h, "args", cJSON_CreateStringArray(argv, HPN_ARRAY_SIZE(argv))))
		return h;
	cJSON_Delete(h);
	return NULL;
}

/* d's containerEdits, NULL without memory. */
static cJSON *edits_to_json(const struct hpn_cdi_dev *d)
{
	cJSON *edits = cJSON_CreateObject(), *nodes = NULL, *mounts = NULL, *hooks = NULL;
	bool ok = edits && hpn_json_put(edits, "env", env_to_json(d)) &&
		  (nodes = cJSON_AddArrayToObject(edits, "deviceNodes"));

	for (size_t k = 0; ok && k < d->n_nodes; k++)
		ok = hpn_json_push(nodes, node_to_json(&d->nodes[k]));
	if (ok && (d->hints.host_path[0] || d->n_mounts))
		ok = (mounts = cJSON_AddArrayToObject(edits, "mounts")) != NULL;
	if (ok && d->hints.host_path[0])
		ok = hpn_json_push(mounts, mount_to_json(&d->hints));
	for (size_t k = 0; ok && k < d->n_mounts; k++)
		ok = hpn_json_push(mounts, mount_to_json(&d->mounts[k]));
	if (ok && d->hook.path[0])
		ok = (hooks = cJSON_AddArrayToObject(edits, "hooks")) &&
		     hpn_json_push(hooks, hook_to_json(d));
	if (!ok) {
		cJSON_Delete(edits);
		return NULL;
	}
	return edits;
}

static cJSON *dev_to_json(const struct hpn_cdi_dev *d)
{
	cJSON *dev = cJSON_CreateObject();

	if (dev && cJSON_AddStringToObject(dev, "name", d->id) &&
	    hpn_json_put(dev, "containerEdits", edits_to_json(d)))
		return dev;
	cJSON_Delete(dev);
	return NULL;
}

int hpn_cdi_set_hints(struct hpn_cdi_dev *d, const char *host_path, const char *container_path)
{
	struct hpn_cdi_mount m;

	if (host_path[0] != '/' || container_path[0] != '/')
		return -EINVAL;
	if (hpn_snprintf(m.host_path, sizeof(m.host_path), "%s", host_path) < 0 ||
	    hpn_snprintf(m.container_path, sizeof(m.container_path), "%s", container_path) < 0)
		return -ENAMETOOLONG;
	d->hints = m;
	return 0;
}

char *hpn_cdi_render(const struct hpn_cdi_dev *d)
{
	cJSON *root = cJSON_CreateObject(), *devs = NULL;
	char *text, *out;
	size_t len;

	if (!root || !cJSON_AddStringToObject(root, "cdiVersion", HPN_CDI_VERSION) ||
	    !cJSON_AddStringToObject(root, "kind", HPN_CDI_KIND) ||
	    !(devs = cJSON_AddArrayToObject(root, "devices")) ||
	    !hpn_json_push(devs, dev_to_json(d))) {
		cJSON_Delete(root);
		return NULL;
	}
	text = cJSON_Print(root);
	cJSON_Delete(root);
	if (!text)
		return NULL;
	/* A text file: a newline at the end. */
	len = strlen(text);
	out = realloc(text, len + 2);
	if (!out) {
		free(text);
		return NULL;
	}
	out[len] = '\n';
	out[len + 1] = '\0';
	return out;
}

/* A device spec the runtime can use: valid ID and nodes, each with its numbers. */
static int check_dev(const struct hpn_cdi_dev *d, struct hpn_err *err)
{
	if (!hpn_cdi_id_valid(d->id))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "\"%.64s\" cannot name a CDI device: not 1-63 bytes of "
				   "[A-Za-z0-9_.:-] that begin and end with a letter or digit",
				   d->id);
	if (!d->n_nodes || d->n_nodes > HPN_CDI_NODES_MAX)
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
				   "CDI device %s: %zu device nodes, not 1 to %d", d->id,
				   d->n_nodes, HPN_CDI_NODES_MAX);
	for (size_t k = 0; k < d->n_nodes; k++) {
		const struct hpn_cdi_node *n = &d->nodes[k];

		if (!hpn_valid_path_component(n->name) || n->host_path[0] != '/' || !n->major)
			return hpn_err_set(
				err, HPN_E_INTERNAL, EINVAL,
				"CDI device %s: device node \"%s\" (%s, %u:%u) is not one "
				"a container can get",
				d->id, n->name, n->host_path, n->major, n->minor);
	}
	if (d->hints.host_path[0] &&
	    (d->hints.host_path[0] != '/' || d->hints.container_path[0] != '/'))
		return hpn_err_set(
			err, HPN_E_INTERNAL, EINVAL,
			"CDI device %s: the hints mount of \"%.128s\" at \"%.128s\" is not "
			"between absolute paths",
			d->id, d->hints.host_path, d->hints.container_path);
	for (size_t k = 0; k < d->n_mounts; k++)
		if (d->mounts[k].host_path[0] != '/' || d->mounts[k].container_path[0] != '/')
			return hpn_err_set(err, HPN_E_INTERNAL, EINVAL,
					   "CDI device %s: the mount of \"%.128s\" at \"%.128s\" "
					   "is not between absolute paths",
					   d->id, d->mounts[k].host_path,
					   d->mounts[k].container_path);
	return 0;
}

static const char *kind_of(mode_t m)
{
	if (S_ISLNK(m))
		return "a symbolic link";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m) || S_ISBLK(m))
		return "a device node";
	return "not a regular file";
}

/* Is text a spec of ours for id (what hpn_cdi_render writes)? If not, why, in why. */
static bool ours(const char *text, size_t len, const char *id, char *why, size_t why_len)
{
	cJSON *root = hpn_json_parse(text, len);
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
	const cJSON *devs = cJSON_GetObjectItemCaseSensitive(root, "devices");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(devs, 0), "name");
	bool ok = false;

	if (!cJSON_IsObject(root))
		snprintf(why, why_len, "not a JSON object");
	/* cJSON's strings end at a NUL: "<kind>\u0000x" would read as ours (fuzz-cdi). */
	else if (hpn_json_has_nul(text, len))
		snprintf(why, why_len, "a spec whose strings hold a NUL (\\u0000)");
	else if (!cJSON_IsString(kind) || strcmp(kind->valuestring, HPN_CDI_KIND))
		snprintf(why, why_len, "a spec of kind \"%.64s\"",
			 cJSON_IsString(kind) ? kind->valuestring : "");
	else if (!cJSON_IsArray(devs) || cJSON_GetArraySize(devs) != 1 || !cJSON_IsString(name) ||
		 strcmp(name->valuestring, id))
		snprintf(why, why_len, "a spec of %s whose devices are not one named %s",
			 HPN_CDI_KIND, id);
	else
		ok = true;
	cJSON_Delete(root);
	return ok;
}

/*
 * What dfd/file holds: 0 a spec of ours for id (its text in *ret, if ret,
 * and *mode), -ENOENT nothing, -EEXIST something else (why says what), or
 * another -errno. Never follows a symlink, never blocks on a FIFO.
 */
static int inspect(int dfd, const char *file, const char *id, char **ret, mode_t *mode, char *why,
		   size_t why_len)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int fd = -1;
	struct stat st, fst;
	size_t len;
	int r;

	if (fstatat(dfd, file, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, why_len, "%s", kind_of(st.st_mode));
		return -EEXIST;
	}
	fd = openat(dfd, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ELOOP) {
		snprintf(why, why_len, "a symbolic link");
		return -EEXIST;
	}
	if (fd < 0)
		return -errno;
	/* Swapped since the look: judge what was opened. */
	if (fstat(fd, &fst) < 0)
		return -errno;
	if (!S_ISREG(fst.st_mode)) {
		snprintf(why, why_len, "%s", kind_of(fst.st_mode));
		return -EEXIST;
	}
	if ((size_t)fst.st_size > SPEC_MAX) {
		snprintf(why, why_len, "a file of %lld bytes", (long long)fst.st_size);
		return -EEXIST;
	}
	r = hpn_read_all(fd, SPEC_MAX, &text, &len);
	if (r < 0)
		return r;
	if (!ours(text, len, id, why, why_len))
		return -EEXIST;
	if (mode)
		*mode = fst.st_mode & 07777;
	if (ret)
		*ret = TAKE_PTR(text);
	return 0;
}

/* dir, opened as a directory that is not a symlink. */
static int open_dir(const char *dir, int *ret, struct hpn_err *err)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		int e = errno;

		if (e == ENOENT)
			return -ENOENT;
		return hpn_err_set(err, HPN_E_IO, e, "open the CDI directory %s: %s", dir,
				   e == ELOOP || e == ENOTDIR ? "not a directory (a symbolic link?)"
							      : strerror(e));
	}
	*ret = fd;
	return 0;
}

/*
 * tmp (a fresh file of ours) renamed to file: over nothing when nothing was
 * there (RENAME_NOREPLACE: what appeared meanwhile is not replaced), over
 * our own spec otherwise.
 */
static int rename_in(int dfd, const char *tmp, const char *file, bool fresh)
{
	if (fresh) {
		if (renameat2(dfd, tmp, dfd, file, RENAME_NOREPLACE) == 0)
			return 0;
		/* A filesystem without the flag: as below. */
		if (errno != EINVAL && errno != ENOSYS)
			return -errno;
	}
	return renameat(dfd, tmp, dfd, file) < 0 ? -errno : 0;
}

/* dir/file (a spec of id) made to hold text: hpn_cdi_write's work once text is rendered. */
static int write_spec(const char *dir, const char *file, const char *id, const char *text,
		      struct hpn_err *err)
{
	_cleanup_free_ char *old = NULL;
	_cleanup_close_ int dfd = -1;
	char tmp[HPN_CDI_FILE_MAX + 32], why[160] = "";
	size_t len = strlen(text);
	mode_t mode = 0;
	int r, fd;

	r = open_dir(dir, &dfd, err);
	if (r == -ENOENT)
		return hpn_err_set(err, HPN_E_IO, ENOENT, "the CDI directory %s does not exist",
				   dir);
	if (r < 0)
		return r;
	r = inspect(dfd, file, id, &old, &mode, why, sizeof(why));
	if (r == 0 && mode == SPEC_MODE && !strcmp(old, text))
		return 0;
	if (r == -EEXIST)
		return hpn_err_set(err, HPN_E_IO, EEXIST,
				   "CDI spec %s/%s is %s, not hpn-rdma's: left as it is", dir, file,
				   why);
	if (r < 0 && r != -ENOENT)
		return hpn_err_set(err, HPN_E_IO, -r, "read CDI spec %s/%s: %s", dir, file,
				   strerror(-r));
	/* Ends in ".tmp": the runtime loads only .json and .yaml files. */
	snprintf(tmp, sizeof(tmp), ".%s.%ld.tmp", file, (long)getpid());
	/* A killed writer's of this pid; never followed (unlink takes a symlink itself). */
	(void)unlinkat(dfd, tmp, 0);
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, SPEC_MODE);
	if (fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "create %s/%s: %s", dir, tmp,
				   strerror(errno));
	/* Exactly 0644 whatever the umask: the runtime reads it, as root or not. */
	r = hpn_write_all(fd, text, len);
	if (r == 0 && fchmod(fd, SPEC_MODE) < 0)
		r = -errno;
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0)
		r = rename_in(dfd, tmp, file, old == NULL);
	if (r < 0) {
		(void)unlinkat(dfd, tmp, 0);
		if (r == -EEXIST)
			return hpn_err_set(err, HPN_E_IO, EEXIST,
					   "CDI spec %s/%s appeared while it was written, not "
					   "hpn-rdma's: left as it is",
					   dir, file);
		return hpn_err_set(err, HPN_E_IO, -r, "write CDI spec %s/%s: %s", dir, file,
				   strerror(-r));
	}
	/* The rename itself, through a power loss (cdiDir may be /etc/cdi). */
	if (fsync(dfd) < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "sync the CDI directory %s: %s", dir,
				   strerror(errno));
	return 1;
}

int hpn_cdi_write(const char *dir, enum hpn_cdi_owner o, const struct hpn_cdi_dev *d,
		  struct hpn_err *err)
{
	char file[HPN_CDI_FILE_MAX], *text;
	int r = check_dev(d, err);

	if (r < 0)
		return r;
	hpn_cdi_file(o, d->id, file);
	text = hpn_cdi_render(d);
	if (!text)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "render CDI spec %s: out of memory",
				   file);
	r = write_spec(dir, file, d->id, text, err);
	free(text);
	return r;
}

int hpn_cdi_remove(const char *dir, const char *file, struct hpn_err *err)
{
	_cleanup_close_ int dfd = -1;
	enum hpn_cdi_owner o;
	char id[HPN_CDI_ID_MAX], why[160] = "";
	int r;

	if (hpn_cdi_parse_file(file, &o, id) < 0)
		return hpn_err_set(err, HPN_E_INTERNAL, EINVAL, "\"%.128s\" is no CDI spec of ours",
				   file);
	r = open_dir(dir, &dfd, err);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	r = inspect(dfd, file, id, NULL, NULL, why, sizeof(why));
	if (r == -ENOENT)
		return 0;
	if (r == -EEXIST) {
		hpn_err_set(err, HPN_E_IO, EEXIST,
			    "CDI spec %s/%s is %s, not hpn-rdma's: left as it is", dir, file, why);
		return 1;
	}
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, -r, "read CDI spec %s/%s: %s", dir, file,
				   strerror(-r));
	if (unlinkat(dfd, file, 0) < 0 && errno != ENOENT)
		return hpn_err_set(err, HPN_E_IO, errno, "remove CDI spec %s/%s: %s", dir, file,
				   strerror(errno));
	if (fsync(dfd) < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "sync the CDI directory %s: %s", dir,
				   strerror(errno));
	return 0;
}

bool hpn_cdi_present(const char *dir, enum hpn_cdi_owner o, const char *id)
{
	_cleanup_close_ int dfd = -1;
	char file[HPN_CDI_FILE_MAX], why[160];
	struct hpn_err err = { 0 };

	if (hpn_cdi_file(o, id, file) < 0 || open_dir(dir, &dfd, &err) < 0)
		return false;
	return inspect(dfd, file, id, NULL, NULL, why, sizeof(why)) == 0;
}

int hpn_cdi_each(const char *dir, enum hpn_cdi_owner o, void (*fn)(const char *id, void *ud),
		 void *ud, struct hpn_err *err)
{
	int dfd = -1, r = open_dir(dir, &dfd, err);
	struct dirent *e;
	DIR *dp;

	if (r < 0)
		return r;
	dp = fdopendir(dfd);
	if (!dp) {
		r = -errno;
		close(dfd);
		return hpn_err_set(err, HPN_E_IO, -r, "read the CDI directory %s: %s", dir,
				   strerror(-r));
	}
	while ((e = readdir(dp))) {
		enum hpn_cdi_owner fo;
		char id[HPN_CDI_ID_MAX];

		if (hpn_cdi_parse_file(e->d_name, &fo, id) == 0 && fo == o)
			fn(id, ud);
	}
	closedir(dp);
	return 0;
}
