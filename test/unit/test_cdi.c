// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/cdi.c: the names (IDs, file names both ways, the
 * qualified name), a spec's content as a runtime reads it, the write
 * (atomic, durable, idempotent, no temp file left, exactly 0644 whatever
 * the umask), and every kind of thing another writer may have put at our
 * name (a symlink, a FIFO, a directory, a foreign spec, garbage): refused
 * by the write, left alone by the remove, never followed or blocked on. A
 * directory that is not writable (as an unprivileged user), one that is a
 * symlink or is missing; the remove idempotent; the listing by owner.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdi.h"
#include "check.h"
#include "tmpdir.h"
#include "util.h"

#define F_AGENT "alibabacloud.com-hpn-rdma_0000:af:00.1.json"
#define F_POD	"alibabacloud.com-hpn-rdma-pod_0000:af:00.1.json"

static char tmp[64];

static void dev_init(struct hpn_cdi_dev *d, const char *id, unsigned int minor)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->id, sizeof(d->id), "%s", id);
	snprintf(d->ibdev, sizeof(d->ibdev), "mlx5_1");
	d->nodes[0] = (struct hpn_cdi_node){ .name = "uverbs1",
					     .host_path = "/dev/infiniband/uverbs1",
					     .major = 231,
					     .minor = minor };
	d->nodes[1] = (struct hpn_cdi_node){
		.name = "umad1", .host_path = "/dev/infiniband/umad1", .major = 231, .minor = 1
	};
	d->nodes[2] = (struct hpn_cdi_node){
		.name = "rdma_cm", .host_path = "/dev/infiniband/rdma_cm", .major = 10, .minor = 58
	};
	d->n_nodes = 3;
}

/* The names of dir's entries, sorted, one string "a b c". */
static char *listing(const char *dir)
{
	struct dirent **v;
	int n = scandir(dir, &v, NULL, alphasort);
	char *out = calloc(1, 4096);

	for (int i = 0; i < n; i++) {
		if (strcmp(v[i]->d_name, ".") && strcmp(v[i]->d_name, "..")) {
			if (out[0])
				strcat(out, " ");
			strncat(out, v[i]->d_name, 4095 - strlen(out) - 1);
		}
		free(v[i]);
	}
	if (n >= 0)
		free(v);
	return out;
}

static char *slurp(const char *path)
{
	char *buf = NULL;
	size_t len;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (hpn_read_all(fd, 1 << 20, &buf, &len) < 0)
		buf = NULL;
	close(fd);
	return buf;
}

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		abort();
	close(fd);
}

static void test_names(void)
{
	static const char *const good[] = { "0000:af:00.1", "pool3", "a", "eth_0.1-x", "9" };
	static const char *const bad[] = { "",	  "-a", "a-", "a@b", "../x", "a/b",
					   "a b", ".",	"..", ":a",  "a:",   "a\nb" };
	char name[HPN_CDI_NAME_MAX], file[HPN_CDI_FILE_MAX], id[HPN_CDI_ID_MAX], long_id[80];
	enum hpn_cdi_owner o = HPN_CDI_AGENT;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK(hpn_cdi_id_valid(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(!hpn_cdi_id_valid(bad[i]));
		CHECK_INT_EQ(hpn_cdi_file(HPN_CDI_AGENT, bad[i], file), -EINVAL);
	}
	CHECK(!hpn_cdi_id_valid(NULL));
	memset(long_id, 'a', 63);
	long_id[63] = '\0';
	CHECK(hpn_cdi_id_valid(long_id));
	long_id[63] = 'a';
	long_id[64] = '\0';
	CHECK(!hpn_cdi_id_valid(long_id));

	hpn_cdi_name("0000:af:00.1", name);
	CHECK_STR_EQ(name, "alibabacloud.com/hpn-rdma=0000:af:00.1");
	CHECK_INT_EQ(hpn_cdi_file(HPN_CDI_AGENT, "0000:af:00.1", file), 0);
	CHECK_STR_EQ(file, F_AGENT);
	CHECK_INT_EQ(hpn_cdi_file(HPN_CDI_POD, "0000:af:00.1", file), 0);
	CHECK_STR_EQ(file, F_POD);

	/* Back: each name to its owner and ID, none mistaken for the other's. */
	CHECK_INT_EQ(hpn_cdi_parse_file(F_POD, &o, id), 0);
	CHECK(o == HPN_CDI_POD);
	CHECK_STR_EQ(id, "0000:af:00.1");
	CHECK_INT_EQ(hpn_cdi_parse_file(F_AGENT, &o, id), 0);
	CHECK(o == HPN_CDI_AGENT);
	CHECK_STR_EQ(id, "0000:af:00.1");
	/* An agent's NIC whose ID starts with "pod": still the agent's. */
	CHECK_INT_EQ(hpn_cdi_parse_file("alibabacloud.com-hpn-rdma_pod-x.json", &o, id), 0);
	CHECK(o == HPN_CDI_AGENT);
	CHECK_STR_EQ(id, "pod-x");
	CHECK_INT_EQ(hpn_cdi_parse_file("alibabacloud.com-hpn-rdma-pod_pod-x.json", &o, id), 0);
	CHECK(o == HPN_CDI_POD);
	CHECK_STR_EQ(id, "pod-x");
	CHECK_INT_EQ(hpn_cdi_parse_file("alibabacloud.com-hpn-rdma_x.yaml", &o, id), -EINVAL);
	CHECK_INT_EQ(hpn_cdi_parse_file("alibabacloud.com-hpn-rdma_.json", &o, id), -EINVAL);
	CHECK_INT_EQ(hpn_cdi_parse_file("alibabacloud.com-hpn-rdma_a@b.json", &o, id), -EINVAL);
	CHECK_INT_EQ(hpn_cdi_parse_file("nvidia.com-gpu_0.json", &o, id), -EINVAL);
	CHECK_INT_EQ(hpn_cdi_parse_file(".alibabacloud.com-hpn-rdma_x.json.12.tmp", &o, id),
		     -EINVAL);
	CHECK_INT_EQ(hpn_cdi_parse_file("alibabacloud.com-hpn-rdma_x.json.12.tmp", &o, id),
		     -EINVAL);
}

/* The spec as a runtime reads it: every field CDI 0.5.0 defines that we use, nothing else. */
static void test_content(void)
{
	struct hpn_cdi_dev d;
	char *text;
	cJSON *root, *dev, *edits, *n0;

	dev_init(&d, "0000:af:00.1", 192);
	text = hpn_cdi_render(&d);
	root = cJSON_Parse(text);
	CHECK(root != NULL);
	CHECK(text && text[strlen(text) - 1] == '\n');
	CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(root, "cdiVersion")), "0.5.0");
	CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(root, "kind")),
		     "alibabacloud.com/hpn-rdma");
	CHECK_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(root, "devices")), 1);
	CHECK_INT_EQ(cJSON_GetArraySize(root), 3); /* cdiVersion, kind, devices */
	dev = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0);
	CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(dev, "name")), "0000:af:00.1");
	edits = cJSON_GetObjectItem(dev, "containerEdits");
	CHECK_INT_EQ(cJSON_GetArraySize(edits), 2); /* env, deviceNodes */
	CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetObjectItem(edits, "env"), 0)),
		     "HPN_RDMA_DEVICE_0000_AF_00_1=mlx5_1");
	CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetObjectItem(edits, "env"), 1)),
		     "HPN_RDMA_UVERBS_0000_AF_00_1=/dev/infiniband/uverbs1");
	CHECK_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(edits, "deviceNodes")), 3);
	n0 = cJSON_GetArrayItem(cJSON_GetObjectItem(edits, "deviceNodes"), 0);
	CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(n0, "path")),
		     "/dev/infiniband/uverbs1");
	CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(n0, "hostPath")),
		     "/dev/infiniband/uverbs1");
	CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(n0, "type")), "c");
	CHECK_INT_EQ(cJSON_GetNumberValue(cJSON_GetObjectItem(n0, "major")), 231);
	CHECK_INT_EQ(cJSON_GetNumberValue(cJSON_GetObjectItem(n0, "minor")), 192);
	CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(n0, "permissions")), "rw");
	CHECK_INT_EQ(cJSON_GetArraySize(n0), 6);
	CHECK_STR_EQ(
		cJSON_GetStringValue(cJSON_GetObjectItem(
			cJSON_GetArrayItem(cJSON_GetObjectItem(edits, "deviceNodes"), 2), "path")),
		"/dev/infiniband/rdma_cm");
	cJSON_Delete(root);
	free(text);

	/* No RDMA device name (made at ADD, named later): no env for it, the uverbs one stays. */
	d.ibdev[0] = '\0';
	text = hpn_cdi_render(&d);
	CHECK_STR_LACKS(text, "HPN_RDMA_DEVICE_");
	CHECK_STR_HAS(text, "HPN_RDMA_UVERBS_0000_AF_00_1=/dev/infiniband/uverbs1");
	CHECK_STR_LACKS(text, "hooks");
	free(text);

	/* With a hook: createRuntime, the binary, and the arguments cdi-hook reads. */
	strcpy(d.hook.path, "/opt/cni/bin/hpn-rdma");
	strcpy(d.hook.state_dir, "/run/hpn-rdma/state");
	strcpy(d.hook.network, "hpn-containerd");
	text = hpn_cdi_render(&d);
	root = cJSON_Parse(text);
	{
		const cJSON *h = cJSON_GetArrayItem(
			cJSON_GetObjectItem(
				cJSON_GetObjectItem(
					cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0),
					"containerEdits"),
				"hooks"),
			0);
		char *args = cJSON_PrintUnformatted(cJSON_GetObjectItem(h, "args"));

		CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(h, "hookName")),
			     "createRuntime");
		CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(h, "path")),
			     "/opt/cni/bin/hpn-rdma");
		CHECK_STR_EQ(args,
			     "[\"hpn-rdma\",\"cdi-hook\",\"--state-dir\",\"/run/hpn-rdma/state\","
			     "\"--network\",\"hpn-containerd\",\"0000:af:00.1\"]");
		free(args);
	}
	cJSON_Delete(root);
	free(text);
}

/*
 * The hints mount (containerEdits.mounts, CDI 0.4.0 with type): the file
 * read-only, nosuid, nodev, noexec, bound; after deviceNodes, before hooks;
 * none without a host path; paths that are not absolute refused.
 */
static void test_hints_mount(void)
{
	static const char *const opts[] = { "ro", "nosuid", "nodev", "noexec", "bind" };
	char big[HPN_CDI_PATH_MAX + 8], *text, *keys = NULL;
	struct hpn_cdi_dev d;
	struct hpn_err err = { 0 };
	const cJSON *edits, *m, *e;
	cJSON *root;
	size_t i = 0;

	dev_init(&d, "0000:af:00.1", 192);
	CHECK_INT_EQ(hpn_cdi_set_hints(&d, "/run/hpn-rdma/pods/nic/0000:af:00.1/nccl.conf",
				       "/etc/nccl.conf"),
		     0);
	strcpy(d.hook.path, "/opt/cni/bin/hpn-rdma");
	text = hpn_cdi_render(&d);
	root = cJSON_Parse(text);
	edits = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0),
				    "containerEdits");
	cJSON_ArrayForEach (e, edits) {
		size_t at = keys ? strlen(keys) : 0;

		keys = realloc(keys, at + strlen(e->string) + 2);
		snprintf(keys + at, strlen(e->string) + 2, "%s%s", at ? " " : "", e->string);
	}
	CHECK_STR_EQ(keys, "env deviceNodes mounts hooks");
	free(keys);
	CHECK_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(edits, "mounts")), 1);
	m = cJSON_GetArrayItem(cJSON_GetObjectItem(edits, "mounts"), 0);
	CHECK_INT_EQ(cJSON_GetArraySize(m), 4);
	CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(m, "hostPath")),
		     "/run/hpn-rdma/pods/nic/0000:af:00.1/nccl.conf");
	CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(m, "containerPath")),
		     "/etc/nccl.conf");
	CHECK_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(m, "type")), "bind");
	CHECK_INT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(m, "options")), 5);
	cJSON_ArrayForEach (e, cJSON_GetObjectItem(m, "options"))
		CHECK_STR_EQ(cJSON_GetStringValue(e), opts[i++]);
	cJSON_Delete(root);
	free(text);

	/* Refused: relative paths, too long ones; the mount stays as it was. */
	CHECK_INT_EQ(hpn_cdi_set_hints(&d, "pods/x/nccl.conf", "/etc/nccl.conf"), -EINVAL);
	CHECK_INT_EQ(hpn_cdi_set_hints(&d, "/run/x/nccl.conf", "etc/nccl.conf"), -EINVAL);
	memset(big, 'a', sizeof(big) - 1);
	big[0] = '/';
	big[sizeof(big) - 1] = '\0';
	CHECK_INT_EQ(hpn_cdi_set_hints(&d, big, "/etc/nccl.conf"), -ENAMETOOLONG);
	CHECK_STR_EQ(d.hints.host_path, "/run/hpn-rdma/pods/nic/0000:af:00.1/nccl.conf");
	/* A mount set by hand that is not absolute: the write refuses the spec. */
	strcpy(d.hints.container_path, "etc/nccl.conf");
	CHECK_INT_EQ(hpn_cdi_write(tmp, HPN_CDI_AGENT, &d, &err), -EINVAL);
	CHECK_STR_HAS(err.msg, "the hints mount");

	/* No host path: no mounts at all. */
	memset(&d.hints, 0, sizeof(d.hints));
	text = hpn_cdi_render(&d);
	CHECK_STR_LACKS(text, "mounts");
	free(text);
}

static void test_write(void)
{
	char dir[128], path[256], *l, *text;
	struct hpn_cdi_dev d;
	struct hpn_err err = { 0 };
	struct stat st, st2;
	mode_t old = umask(0077);

	snprintf(dir, sizeof(dir), "%s/w", tmp);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/" F_AGENT, dir);
	dev_init(&d, "0000:af:00.1", 192);

	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_AGENT, &d, &err), 1);
	CHECK_STR_EQ(err.msg, "");
	text = slurp(path);
	l = hpn_cdi_render(&d);
	CHECK_STR_EQ(text, l);
	free(text);
	free(l);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0644);
	/* Atomic: the temp file is gone, renamed into place. */
	l = listing(dir);
	CHECK_STR_EQ(l, F_AGENT);
	free(l);
	CHECK(hpn_cdi_present(dir, HPN_CDI_AGENT, "0000:af:00.1"));
	CHECK(!hpn_cdi_present(dir, HPN_CDI_POD, "0000:af:00.1"));

	/* Idempotent: the same spec again writes nothing (same inode, same mtime). */
	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_AGENT, &d, &err), 0);
	CHECK(stat(path, &st2) == 0 && st2.st_ino == st.st_ino);
	/* New numbers: a new file in its place. */
	dev_init(&d, "0000:af:00.1", 193);
	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_AGENT, &d, &err), 1);
	CHECK(stat(path, &st2) == 0 && st2.st_ino != st.st_ino);
	text = slurp(path);
	CHECK_STR_HAS(text, "\"minor\":\t193");
	free(text);
	/* A mode someone changed is put back. */
	chmod(path, 0600);
	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_AGENT, &d, &err), 1);
	CHECK(stat(path, &st2) == 0 && (st2.st_mode & 07777) == 0644);
	/* A temp file a killed writer of this pid left is replaced, and gone after. */
	snprintf(path, sizeof(path), "%s/." F_AGENT ".%ld.tmp", dir, (long)getpid());
	put(path, "torn");
	dev_init(&d, "0000:af:00.1", 194);
	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_AGENT, &d, &err), 1);
	l = listing(dir);
	CHECK_STR_EQ(l, F_AGENT);
	free(l);

	/* The pod's beside the agent's: two files, two owners. */
	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_POD, &d, &err), 1);
	l = listing(dir);
	CHECK_STR_EQ(l, F_POD " " F_AGENT);
	free(l);
	umask(old);
}

static void test_bad_input(void)
{
	char dir[128], link[128], *l;
	struct hpn_cdi_dev d;
	struct hpn_err err = { 0 };
	int r;

	snprintf(dir, sizeof(dir), "%s/b", tmp);
	mkdir(dir, 0755);
	dev_init(&d, "a@b", 192);
	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_AGENT, &d, &err), -EINVAL);
	CHECK_INT_EQ(err.code, 7);
	CHECK_STR_HAS(err.msg, "\"a@b\" cannot name a CDI device");
	memset(&err, 0, sizeof(err));
	dev_init(&d, "../../etc", 192);
	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_AGENT, &d, &err), -EINVAL);
	/* A node without numbers, or none at all: nothing a runtime could use. */
	memset(&err, 0, sizeof(err));
	dev_init(&d, "pool3", 192);
	d.nodes[0].major = 0;
	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_AGENT, &d, &err), -EINVAL);
	CHECK_STR_HAS(err.msg, "uverbs1");
	memset(&err, 0, sizeof(err));
	d.n_nodes = 0;
	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_AGENT, &d, &err), -EINVAL);
	l = listing(dir);
	CHECK_STR_EQ(l, "");
	free(l);
	/* Remove takes only names of the rule. */
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_remove(dir, "../x.json", &err) < 0);
	CHECK(hpn_cdi_remove(dir, "nvidia.com-gpu.json", &err) < 0);

	/* No directory: the write says so, the remove has nothing to do. */
	memset(&err, 0, sizeof(err));
	dev_init(&d, "pool3", 192);
	snprintf(link, sizeof(link), "%s/none", tmp);
	CHECK_INT_EQ(hpn_cdi_write(link, HPN_CDI_AGENT, &d, &err), -ENOENT);
	CHECK_STR_HAS(err.msg, "does not exist");
	CHECK_INT_EQ(hpn_cdi_remove(link, "alibabacloud.com-hpn-rdma_pool3.json", &err), 0);
	/* The directory a symlink: never followed. */
	memset(&err, 0, sizeof(err));
	snprintf(link, sizeof(link), "%s/dirlink", tmp);
	CHECK(symlink(dir, link) == 0);
	r = hpn_cdi_write(link, HPN_CDI_AGENT, &d, &err);
	CHECK(r == -ENOTDIR || r == -ELOOP);
	CHECK_STR_HAS(err.msg, "dirlink: not a directory (a symbolic link?)");
	l = listing(dir);
	CHECK_STR_EQ(l, "");
	free(l);
}

/*
 * Something not ours at the name: the write refuses it (code 5, the path and
 * what is there in the message), the remove leaves it (1), neither changes it.
 */
static void not_ours(const char *what, const char *dir, const char *path, const char *says)
{
	struct hpn_cdi_dev d;
	struct hpn_err err = { 0 };
	struct stat before, after;
	char *l;

	fprintf(stderr, "not ours: %s\n", what);
	dev_init(&d, "0000:af:00.1", 192);
	CHECK(lstat(path, &before) == 0);
	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_AGENT, &d, &err), -EEXIST);
	CHECK_INT_EQ(err.code, 5);
	CHECK_STR_HAS(err.msg, path);
	CHECK_STR_HAS(err.msg, says);
	CHECK_STR_HAS(err.msg, "not hpn-rdma's: left as it is");
	CHECK(!hpn_cdi_present(dir, HPN_CDI_AGENT, "0000:af:00.1"));
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_cdi_remove(dir, F_AGENT, &err), 1);
	CHECK_STR_HAS(err.msg, says);
	CHECK(lstat(path, &after) == 0 && after.st_ino == before.st_ino &&
	      after.st_mode == before.st_mode && after.st_size == before.st_size &&
	      after.st_mtime == before.st_mtime);
	/* No temp file left behind either. */
	l = listing(dir);
	CHECK_STR_EQ(l, F_AGENT);
	free(l);
	unlink(path);
	rmdir(path);
}

static void test_not_ours(void)
{
	char dir[128], path[256], target[256], *t;

	snprintf(dir, sizeof(dir), "%s/n", tmp);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/" F_AGENT, dir);

	/* A symlink to a file of ours elsewhere: not followed, not replaced, target untouched. */
	snprintf(target, sizeof(target), "%s/target.json", tmp);
	put(target, "{\"keep\": true}\n");
	CHECK(symlink(target, path) == 0);
	not_ours("symlink", dir, path, "a symbolic link");
	t = slurp(target);
	CHECK_STR_EQ(t, "{\"keep\": true}\n");
	free(t);
	/* Dangling: a write through it would create the target. */
	snprintf(target, sizeof(target), "%s/created-through-link", tmp);
	CHECK(symlink(target, path) == 0);
	not_ours("dangling symlink", dir, path, "a symbolic link");
	CHECK(access(target, F_OK) < 0);

	/* A FIFO: no open blocks on it (the test would hang). */
	CHECK(mkfifo(path, 0644) == 0);
	not_ours("FIFO", dir, path, "a FIFO");
	CHECK(mkdir(path, 0755) == 0);
	not_ours("directory", dir, path, "a directory");

	/* Another writer's spec at our name: another kind, or our kind for another device. */
	put(path, "{\"cdiVersion\":\"0.5.0\",\"kind\":\"example.com/nic\",\"devices\":[{\"name\":"
		  "\"0000:af:00.1\",\"containerEdits\":{\"env\":[\"A=1\"]}}]}");
	not_ours("foreign kind", dir, path, "a spec of kind \"example.com/nic\"");
	put(path, "{\"cdiVersion\":\"0.5.0\",\"kind\":\"alibabacloud.com/hpn-rdma\",\"devices\":["
		  "{\"name\":\"pool3\",\"containerEdits\":{\"env\":[\"A=1\"]}}]}");
	not_ours("our kind, another device", dir, path, "not one named 0000:af:00.1");
	put(path, "{\"cdiVersion\":\"0.5.0\",\"kind\":\"alibabacloud.com/hpn-rdma\",\"devices\":["
		  "{\"name\":\"0000:af:00.1\"},{\"name\":\"0000:af:00.2\"}]}");
	not_ours("our kind, two devices", dir, path, "not one named 0000:af:00.1");
	put(path, "cdiVersion: 0.5.0\nkind: alibabacloud.com/hpn-rdma\n");
	not_ours("YAML", dir, path, "not a JSON object");
	put(path, "");
	not_ours("empty", dir, path, "not a JSON object");
}

static void test_not_writable(void)
{
	char dir[128], *l;
	struct hpn_cdi_dev d;
	pid_t pid;
	int status = -1;

	snprintf(dir, sizeof(dir), "%s/ro", tmp);
	mkdir(dir, 0755);
	chmod(tmp, 0755);
	chmod(dir, 0555);
	dev_init(&d, "0000:af:00.1", 192);
	/* In a child: as root, as nobody (root writes anywhere), exit status = checks failed. */
	pid = fork();
	if (pid == 0) {
		struct hpn_err err = { 0 };
		int bad = 0;

		if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
			_exit(100);
		bad += hpn_cdi_write(dir, HPN_CDI_AGENT, &d, &err) != -EACCES;
		bad += !strstr(err.msg, dir) || !strstr(err.msg, "Permission denied");
		if (bad)
			fprintf(stderr, "not writable: %s\n", err.msg);
		_exit(bad);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	l = listing(dir);
	CHECK_STR_EQ(l, "");
	free(l);
	chmod(dir, 0755);
}

static void collect(const char *id, void *ud)
{
	char *s = ud;

	if (s[0])
		strcat(s, " ");
	strcat(s, id);
}

static void test_remove_and_list(void)
{
	char dir[128], path[256], ids[512] = "", *l;
	struct hpn_cdi_dev d;
	struct hpn_err err = { 0 };

	snprintf(dir, sizeof(dir), "%s/r", tmp);
	mkdir(dir, 0755);
	dev_init(&d, "0000:af:00.1", 192);
	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_AGENT, &d, &err), 1);
	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_POD, &d, &err), 1);
	dev_init(&d, "pool3", 192);
	CHECK_INT_EQ(hpn_cdi_write(dir, HPN_CDI_AGENT, &d, &err), 1);
	snprintf(path, sizeof(path), "%s/nvidia.com-gpu.json", dir);
	put(path, "{}");
	snprintf(path, sizeof(path), "%s/alibabacloud.com-hpn-rdma_bad@id.json", dir);
	put(path, "{}");

	CHECK_INT_EQ(hpn_cdi_each(dir, HPN_CDI_AGENT, collect, ids, &err), 0);
	/* Directory order: compare as a set. */
	CHECK(!strcmp(ids, "0000:af:00.1 pool3") || !strcmp(ids, "pool3 0000:af:00.1"));
	ids[0] = '\0';
	CHECK_INT_EQ(hpn_cdi_each(dir, HPN_CDI_POD, collect, ids, &err), 0);
	CHECK_STR_EQ(ids, "0000:af:00.1");
	snprintf(path, sizeof(path), "%s/none", tmp);
	CHECK_INT_EQ(hpn_cdi_each(path, HPN_CDI_POD, collect, ids, &err), -ENOENT);

	/* Removed once, then nothing to do: idempotent. The other owner's stays. */
	CHECK_INT_EQ(hpn_cdi_remove(dir, F_AGENT, &err), 0);
	CHECK_INT_EQ(hpn_cdi_remove(dir, F_AGENT, &err), 0);
	CHECK_STR_EQ(err.msg, "");
	CHECK(!hpn_cdi_present(dir, HPN_CDI_AGENT, "0000:af:00.1"));
	CHECK(hpn_cdi_present(dir, HPN_CDI_POD, "0000:af:00.1"));
	CHECK_INT_EQ(hpn_cdi_remove(dir, F_POD, &err), 0);
	CHECK_INT_EQ(hpn_cdi_remove(dir, "alibabacloud.com-hpn-rdma_pool3.json", &err), 0);
	l = listing(dir);
	CHECK_STR_EQ(l, "alibabacloud.com-hpn-rdma_bad@id.json nvidia.com-gpu.json");
	free(l);
}

int main(void)
{
	tmpdir_make(tmp, sizeof(tmp), "cdi");
	test_names();
	test_content();
	test_hints_mount();
	test_write();
	test_bad_input();
	test_not_ours();
	test_not_writable();
	test_remove_and_list();
	tmpdir_rm(tmp);
	return check_done();
}
