// SPDX-License-Identifier: Apache-2.0
/*
 * The installer's pieces (agent/install/install.c, agent/install/sakubeconfig.c): atomic,
 * idempotent file installs (lib/util.c's hpn_install_file, which they use)
 * and tree installs (a running program replaced without ETXTBSY), the ELF
 * loader path and the bundle it names, journals that hold
 * the plugin, and the kubeconfig made from a service account: rendered,
 * read back by the plugin's own parser (lib/kubeconfig.c), rewritten when
 * the kubelet swaps the projected volume's ..data symlink; the SHA-256 the
 * manifest names files with (test/install/install.sh runs install and
 * uninstall with a manifest end to end).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "installkit.h"
#include "kubecall.h"
#include "kubeconfig.h" /* the plugin's parser (lib/), which reads back what the agent writes */
#include "sakubeconfig.h"
#include "sha256.h"
#include "tmpdir.h"
#include "util.h"

static char dir[128];

static const char *at(const char *name)
{
	static char buf[8][512];
	static int i;

	i = (i + 1) % 8;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

static void put(const char *name, const char *text, mode_t mode)
{
	int fd = open(at(name), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		perror(name);
	fchmod(fd, mode);
	close(fd);
}

static char *slurp(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t len;

	if (fd < 0)
		return NULL;
	if (hpn_read_all(fd, 1 << 26, &buf, &len) < 0)
		buf = NULL;
	close(fd);
	return buf;
}

/* Entries of dir whose names start with '.': temp files an install left. */
static int dotfiles(const char *d)
{
	char cmd[600];
	FILE *p;
	int n = 0;

	snprintf(cmd, sizeof(cmd), "find %s -name '.*' ! -name '..*' | wc -l", d);
	p = popen(cmd, "r");
	if (p && fscanf(p, "%d", &n) != 1)
		n = -1;
	if (p)
		pclose(p);
	return n;
}

static void test_file(void)
{
	struct hpn_err err = { 0 };
	struct stat a, b;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char *got;

	CHECK_INT_EQ(hpn_install_file(dfd, "f.conflist", "one\n", 4, 0644, &err), 1);
	got = slurp(at("f.conflist"));
	CHECK_STR_EQ(got, "one\n");
	free(got);
	CHECK_INT_EQ(stat(at("f.conflist"), &a), 0);
	CHECK_INT_EQ(a.st_mode & 07777, 0644);
	/* The same bytes and mode: nothing written, the same inode and mtime. */
	usleep(20000);
	CHECK_INT_EQ(hpn_install_file(dfd, "f.conflist", "one\n", 4, 0644, &err), 0);
	CHECK_INT_EQ(stat(at("f.conflist"), &b), 0);
	CHECK_INT_EQ(a.st_ino, b.st_ino);
	CHECK_INT_EQ(a.st_mtim.tv_nsec, b.st_mtim.tv_nsec);
	/* Another mode is another file; other bytes too, each a new inode. */
	CHECK_INT_EQ(hpn_install_file(dfd, "f.conflist", "one\n", 4, 0600, &err), 1);
	CHECK_INT_EQ(stat(at("f.conflist"), &b), 0);
	CHECK_INT_EQ(b.st_mode & 07777, 0600);
	CHECK_INT_NE(a.st_ino, b.st_ino);
	CHECK_INT_EQ(hpn_install_file(dfd, "f.conflist", "two\n", 4, 0600, &err), 1);
	got = slurp(at("f.conflist"));
	CHECK_STR_EQ(got, "two\n");
	free(got);
	/* A symlink in the target's place is replaced, never written through. */
	put("victim", "keep", 0644);
	CHECK_INT_EQ(symlink("victim", at("link")), 0);
	CHECK_INT_EQ(hpn_install_file(dfd, "link", "new", 3, 0644, &err), 1);
	got = slurp(at("victim"));
	CHECK_STR_EQ(got, "keep");
	free(got);
	CHECK_INT_EQ(lstat(at("link"), &b), 0);
	CHECK(S_ISREG(b.st_mode));
	/* Names that are not one file name are refused, nothing made. */
	CHECK_INT_EQ(hpn_install_file(dfd, "../escape", "x", 1, 0644, &err), -EINVAL);
	CHECK_INT_EQ(hpn_install_file(dfd, "", "x", 1, 0644, &err), -EINVAL);
	CHECK_INT_EQ(dotfiles(dir), 0);
	close(dfd);
}

/* A running program is replaced: a write into it would be ETXTBSY, a rename is not. */
static void test_running(void)
{
	struct hpn_err err = { 0 };
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd, status;
	char *sleep_bin = slurp("/bin/sleep"), *true_bin = slurp("/bin/true");
	struct stat st;
	pid_t pid;

	if (!sleep_bin || !true_bin || stat("/bin/sleep", &st) < 0) {
		CHECK(!"/bin/sleep and /bin/true are readable");
		goto out;
	}
	CHECK_INT_EQ(hpn_install_file(dfd, "prog", sleep_bin, st.st_size, 0755, &err), 1);
	pid = fork();
	if (pid == 0) {
		execl(at("prog"), "prog", "30", (char *)NULL);
		_exit(127);
	}
	usleep(200000);
	fd = open(at("prog"), O_WRONLY | O_CLOEXEC);
	CHECK(fd < 0 && errno == ETXTBSY); /* the premise: writing in place fails */
	if (fd >= 0)
		close(fd);
	CHECK_INT_EQ(stat("/bin/true", &st), 0);
	CHECK_INT_EQ(hpn_install_file(dfd, "prog", true_bin, st.st_size, 0755, &err), 1);
	CHECK_INT_EQ(kill(pid, 0), 0); /* the old one runs on, on its inode */
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	/* And the new one is what runs now. */
	pid = fork();
	if (pid == 0) {
		execl(at("prog"), "prog", (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
out:
	free(sleep_bin);
	free(true_bin);
	close(dfd);
}

static void test_tree(void)
{
	struct hpn_err err = { 0 };
	int dfd;
	struct stat st;
	char *got;

	mkdir(at("src"), 0755);
	mkdir(at("src/sub"), 0750);
	put("src/libx.so.1.2", "lib", 0644);
	put("src/sub/tool", "#!", 0755);
	CHECK_INT_EQ(symlink("libx.so.1.2", at("src/libx.so.1")), 0);
	mkdir(at("dst"), 0755);
	dfd = open(at("dst"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK_INT_EQ(inst_tree(at("src"), dfd, "b-0123456789ab", &err), 1);
	got = slurp(at("dst/b-0123456789ab/libx.so.1"));
	CHECK_STR_EQ(got, "lib");
	free(got);
	CHECK_INT_EQ(lstat(at("dst/b-0123456789ab/libx.so.1"), &st), 0);
	CHECK(S_ISLNK(st.st_mode));
	CHECK_INT_EQ(stat(at("dst/b-0123456789ab/sub/tool"), &st), 0);
	CHECK_INT_EQ(st.st_mode & 07777, 0755);
	CHECK_INT_EQ(stat(at("dst/b-0123456789ab/sub"), &st), 0);
	CHECK_INT_EQ(st.st_mode & 07777, 0750);
	/* A bundle is named for its contents: there already, left alone. */
	CHECK_INT_EQ(inst_tree(at("src"), dfd, "b-0123456789ab", &err), 0);
	CHECK_INT_EQ(dotfiles(at("dst")), 0);
	/* A missing source changes nothing. */
	CHECK(inst_tree(at("nonexistent"), dfd, "b-1111111111ab", &err) < 0);
	CHECK_INT_EQ(access(at("dst/b-1111111111ab"), F_OK), -1);
	/* rm -rf never follows a symlink out of the tree. */
	CHECK_INT_EQ(symlink(at("src"), at("dst/b-0123456789ab/out")), 0);
	CHECK_INT_EQ(inst_rm_tree(dfd, "b-0123456789ab"), 0);
	CHECK_INT_EQ(access(at("dst/b-0123456789ab"), F_OK), -1);
	CHECK_INT_EQ(access(at("src/libx.so.1.2"), F_OK), 0);
	CHECK_INT_EQ(inst_rm_tree(dfd, "b-0123456789ab"), 0); /* gone: fine */
	close(dfd);
}

static void test_elf(void)
{
	char buf[4096], root[256], id[64];
	Elf64_Ehdr eh = { 0 };
	int fd;

	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	CHECK_INT_EQ(inst_elf_interp(fd, buf, sizeof(buf)), 1);
	CHECK_STR_HAS(buf, "ld-linux");
	close(fd);
	/* No PT_INTERP: a static program. */
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = 0;
	put("static", "", 0755);
	fd = open(at("static"), O_WRONLY | O_CLOEXEC);
	CHECK(write(fd, &eh, sizeof(eh)) == sizeof(eh));
	close(fd);
	fd = open(at("static"), O_RDONLY | O_CLOEXEC);
	CHECK_INT_EQ(inst_elf_interp(fd, buf, sizeof(buf)), 0);
	close(fd);
	/* Not ELF, or cut short. */
	put("text", "#!/bin/sh\n", 0755);
	fd = open(at("text"), O_RDONLY | O_CLOEXEC);
	CHECK_INT_EQ(inst_elf_interp(fd, buf, sizeof(buf)), -ENOEXEC);
	close(fd);
	put("short", "\177ELF\002\001", 0755);
	fd = open(at("short"), O_RDONLY | O_CLOEXEC);
	CHECK_INT_EQ(inst_elf_interp(fd, buf, sizeof(buf)), -ENOEXEC);
	close(fd);

	CHECK_INT_EQ(inst_bundle_of("/opt/hpn-rdma/0.1.0-2a3c68a063ab/lib/ld-linux-x86-64.so.2",
				    root, sizeof(root), id, sizeof(id)),
		     1);
	CHECK_STR_EQ(root, "/opt/hpn-rdma");
	CHECK_STR_EQ(id, "0.1.0-2a3c68a063ab");
	CHECK_INT_EQ(
		inst_bundle_of("/lib64/ld-linux-x86-64.so.2", root, sizeof(root), id, sizeof(id)),
		0);
	CHECK_INT_EQ(inst_bundle_of("/opt/x/lib/sub/ld.so", root, sizeof(root), id, sizeof(id)), 0);
	CHECK_INT_EQ(inst_bundle_of("/lib/ld.so", root, sizeof(root), id, sizeof(id)), 0);
	CHECK_INT_EQ(inst_bundle_of("/opt/.hidden/lib/ld.so", root, sizeof(root), id, sizeof(id)),
		     0);
}

/* The fixture journal with its placeholders filled, as network/key under state. */
static void journal(const char *fixture, const char *net, const char *key, const char *boot)
{
	static const char *const subst[][2] = {
		{ "@CID@", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" },
		{ "@NETNS@", "/var/run/netns/gone" },
		{ "@MAC0@", "02:00:00:00:00:01" },
		{ "@IFINDEX0@", "7" },
		{ "@PODS@", "/tmp/pods" },
		{ "@KEY@", "k" },
		{ "@BOOT@", NULL },
	};
	char path[512], *text, out[8192], *o = out;

	snprintf(path, sizeof(path), HPN_FIXTURES "/journals/%s", fixture);
	text = slurp(path);
	if (!text) {
		CHECK(!"the journal fixture is readable");
		return;
	}
	for (const char *p = text; *p && o < out + sizeof(out) - 100;) {
		size_t i;

		for (i = 0; i < HPN_ARRAY_SIZE(subst); i++) {
			size_t n = strlen(subst[i][0]);

			if (!strncmp(p, subst[i][0], n)) {
				o += sprintf(o, "%s", subst[i][1] ? subst[i][1] : boot);
				p += n;
				break;
			}
		}
		if (i == HPN_ARRAY_SIZE(subst))
			*o++ = *p++;
	}
	*o = '\0';
	free(text);
	snprintf(path, sizeof(path), "state/%s", net);
	mkdir(at("state"), 0700);
	mkdir(at(path), 0700);
	snprintf(path, sizeof(path), "state/%s/%s", net, key);
	put(path, out, 0600);
}

static void test_journals(void)
{
	struct hpn_err err = { 0 };
	char desc[256];

	CHECK_INT_EQ(inst_journals_held(at("state"), desc, sizeof(desc), &err), 0);
	CHECK_STR_EQ(desc, "");
	/* One of this boot (no bootId, written now), one of another boot. */
	journal("v2-attached.json", "net-a", "abc.eth0", NULL);
	journal("v2-boot.json", "net-b", "old.eth0", "00000000-0000-4000-8000-000000000000");
	CHECK_INT_EQ(inst_journals_held(at("state"), desc, sizeof(desc), &err), 1);
	CHECK_STR_EQ(desc, "net-a/abc.eth0");
	/* This boot's ID: held too; the lock file and temp files are not journals. */
	journal("v2-boot.json", "net-b", "new.eth0", hpn_boot_id());
	put("state/lock", "", 0600);
	CHECK_INT_EQ(inst_journals_held(at("state"), desc, sizeof(desc), &err), 2);
	CHECK_STR_HAS(desc, "net-b/new.eth0");
	CHECK_STR_LACKS(desc, "old.eth0");
	unlink(at("state/net-a/abc.eth0"));
	unlink(at("state/net-b/new.eth0"));
	CHECK_INT_EQ(inst_journals_held(at("state"), desc, sizeof(desc), &err), 0);
}

static const char ca_pem[] = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n";

static void test_render(void)
{
	struct hpn_err err = { 0 };
	char *out = NULL;

	CHECK_INT_EQ(kc_render("10.96.0.1", "443", "abc.def-ghi_", 12, ca_pem, strlen(ca_pem), &out,
			       &err),
		     0);
	CHECK_STR_HAS(out, "server: \"https://10.96.0.1:443\"");
	CHECK_STR_HAS(out, "token: \"abc.def-ghi_\"");
	/* base64 of the PEM, padded */
	CHECK_STR_HAS(out, "certificate-authority-data: "
			   "\"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJ0ZXN0Ci0tLS0tRU5EIENFUlRJR"
			   "klDQVRFLS0tLS0K\"");
	free(out);
	out = NULL;
	/* IPv6 in brackets; the token's blanks at its ends dropped. */
	CHECK_INT_EQ(
		kc_render("fd00::1", "6443", "\n tok \n", 7, ca_pem, strlen(ca_pem), &out, &err),
		0);
	CHECK_STR_HAS(out, "https://[fd00::1]:6443");
	CHECK_STR_HAS(out, "token: \"tok\"");
	free(out);
	out = NULL;
	/* Refused: what would break the YAML, the URL or the header. */
	CHECK_INT_EQ(kc_render("10.0.0.1", "443", "a b", 3, ca_pem, strlen(ca_pem), &out, &err),
		     -EINVAL);
	CHECK_INT_EQ(kc_render("10.0.0.1", "443", "a\"b", 3, ca_pem, strlen(ca_pem), &out, &err),
		     -EINVAL);
	CHECK_INT_EQ(kc_render("10.0.0.1", "443", " \n", 2, ca_pem, strlen(ca_pem), &out, &err),
		     -EINVAL);
	CHECK_INT_EQ(kc_render("10.0.0.1/x", "443", "t", 1, ca_pem, strlen(ca_pem), &out, &err),
		     -EINVAL);
	CHECK_INT_EQ(kc_render("h\"ost", "443", "t", 1, ca_pem, strlen(ca_pem), &out, &err),
		     -EINVAL);
	CHECK_INT_EQ(kc_render("10.0.0.1", "0", "t", 1, ca_pem, strlen(ca_pem), &out, &err),
		     -EINVAL);
	CHECK_INT_EQ(kc_render("10.0.0.1", "65536", "t", 1, ca_pem, strlen(ca_pem), &out, &err),
		     -EINVAL);
	CHECK_INT_EQ(kc_render("10.0.0.1", "44a", "t", 1, ca_pem, strlen(ca_pem), &out, &err),
		     -EINVAL);
	CHECK_INT_EQ(kc_render("10.0.0.1", "443", "t", 1, "not pem", 7, &out, &err), -EINVAL);
	CHECK(out == NULL);
}

/*
 * The service account's projected volume as the kubelet's atomic writer
 * updates it: a new hidden directory with the files (sa_stage), a symlink
 * ..data_tmp to it, renamed over ..data (sa_swap); token and ca.crt are
 * symlinks through ..data.
 */
static void sa_stage(const char *version, const char *token)
{
	char path[256];

	mkdir(at("sa"), 0755);
	snprintf(path, sizeof(path), "sa/..%s", version);
	mkdir(at(path), 0755);
	snprintf(path, sizeof(path), "sa/..%s/token", version);
	put(path, token, 0644);
	snprintf(path, sizeof(path), "sa/..%s/ca.crt", version);
	put(path, ca_pem, 0644);
}

static void sa_link(const char *version)
{
	char path[256];

	snprintf(path, sizeof(path), "..%s", version);
	unlink(at("sa/..data_tmp"));
	CHECK_INT_EQ(symlink(path, at("sa/..data_tmp")), 0);
}

static void sa_swap(void)
{
	CHECK_INT_EQ(rename(at("sa/..data_tmp"), at("sa/..data")), 0);
	symlink("..data/token", at("sa/token"));
	symlink("..data/ca.crt", at("sa/ca.crt"));
}

/* The watch fires within 2 s; its event handled. */
static bool fired(struct kc_watch *w)
{
	struct pollfd p = { .fd = w->fd, .events = POLLIN };
	bool ok = poll(&p, 1, 2000) == 1;

	kc_watch_event(w);
	return ok;
}

static void test_kubeconfig(void)
{
	struct hpn_err err = { 0 };
	struct hpn_kube_warn warn = { 0 };
	struct hpn_kubeconfig kc = { 0 };
	char *path = strdup(at("etc/hpn-rdma.d/hpn-rdma.kubeconfig")), *sa = strdup(at("sa"));
	struct kc_watch w = { .path = path, .sa_dir = sa }; /* no API client: no .call */
	struct stat st;
	char *tok = NULL;

	sa_stage("2026_01_01_00_00_00.1", "first-token");
	sa_link("2026_01_01_00_00_00.1");
	sa_swap();
	unsetenv("KUBERNETES_SERVICE_HOST");
	CHECK_INT_EQ(kc_write(at("sa"), w.path, &err), -ENOENT);
	CHECK_STR_HAS(err.msg, "not in a pod");
	setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
	mkdir(at("etc"), 0755);
	/* An older agent's file, with its own token: removed, never rewritten with it. */
	mkdir(at("etc/hpn-rdma.d"), 0700);
	put("etc/hpn-rdma.d/hpn-rdma.kubeconfig", "token: \"first-token\"\n", 0600);
	err = (struct hpn_err){ 0 };
	CHECK_INT_EQ(kc_watch_start(&w, &err), 0);
	CHECK(stat(w.path, &st) < 0 && errno == ENOENT);
	CHECK_STR_EQ(w.plugin.ns, "hpn-rdma");
	CHECK_STR_EQ(w.plugin.name, "hpn-rdma-plugin");
	/* The agent's own calls: its service account's token, in a memfd. */
	CHECK_INT_EQ(hpn_kubeconfig_load(w.own_path, &kc, &warn, &err), 0);
	CHECK_STR_EQ(kc.server, "https://127.0.0.1:6443");
	CHECK(kc.ca && kc.ca_len == strlen(ca_pem) && !memcmp(kc.ca, ca_pem, kc.ca_len));
	CHECK_STR_EQ(warn.msg, "");
	CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), 0);
	CHECK_STR_EQ(tok, "first-token");
	hpn_kube_token_free(tok);
	hpn_kubeconfig_free(&kc);
	/* The kubelet rotates the token: the agent's own kubeconfig follows. */
	sa_stage("2026_01_01_01_00_00.2", "second-token");
	CHECK(fired(&w));
	sa_link("2026_01_01_01_00_00.2");
	CHECK(fired(&w));
	sa_swap();
	CHECK(fired(&w));
	CHECK_INT_EQ(hpn_kubeconfig_load(w.own_path, &kc, &warn, &err), 0);
	CHECK_INT_EQ(hpn_kubeconfig_token(&kc, &tok, &warn, &err), 0);
	CHECK_STR_EQ(tok, "second-token");
	hpn_kube_token_free(tok);
	hpn_kubeconfig_free(&kc);
	CHECK(stat(w.path, &st) < 0 && errno == ENOENT);
	/* The plugin's token from a TokenRequest's answer: 0600, the marker, not the agent's. */
	{
		static const char body[] =
			"{\"kind\":\"TokenRequest\",\"status\":{\"token\":\"plugin-token\","
			"\"expirationTimestamp\":\"2099-01-01T00:00:00Z\"}}";
		struct hpn_kube_answer a = { .status = 201,
					     .body = (char *)body,
					     .len = sizeof(body) - 1 };
		char *text;

		kc_watch_token_done(&w, 0, &a, NULL);
		CHECK_INT_EQ(stat(w.path, &st), 0);
		CHECK_INT_EQ(st.st_mode & 07777, 0600);
		text = slurp(w.path);
		CHECK(!strncmp(text,
			       KC_PLUGIN_MARK
			       "hpn-rdma/hpn-rdma-plugin until 2099-01-01T00:00:00Z\n",
			       strlen(KC_PLUGIN_MARK)));
		CHECK_STR_HAS(text, "token: \"plugin-token\"");
		CHECK(!strstr(text, "second-token"));
		free(text);
		CHECK_INT_EQ(w.backoff_s, 0);
		/* Refused later (RBAC gone): the plugin's own file stays; retried after 1 s. */
		kc_watch_token_done(&w, -EPERM, NULL, &(struct hpn_err){ .msg = "403" });
		CHECK(w.refused);
		CHECK_INT_EQ(w.backoff_s, 1);
		CHECK_INT_EQ(stat(w.path, &st), 0);
		kc_watch_token_done(&w, -EAGAIN, NULL, &(struct hpn_err){ .msg = "503" });
		CHECK_INT_EQ(w.backoff_s, 2);
	}
	/* Answers that are not a TokenRequest's. */
	{
		char *t = NULL;
		long long e = 0;

		CHECK_INT_EQ(kc_token_parse("{}", 2, &t, &e, &err), -EPROTO);
		CHECK_INT_EQ(kc_token_parse("{\"status\":{\"token\":\"a b\"}}", 26, &t, &e, &err),
			     -EPROTO);
		CHECK_INT_EQ(kc_token_parse("{\"status\":{\"token\":\"t\",\"expirationTimestamp\":"
					    "\"2099-01-01 00:00\"}}",
					    60, &t, &e, &err),
			     -EPROTO);
		CHECK(t == NULL);
	}
	/* A broken token leaves the agent's last good kubeconfig in place. */
	unlink(at("sa/..2026_01_01_01_00_00.2/token"));
	put("sa/..2026_01_01_01_00_00.2/token", "bad token", 0644);
	kc_watch_event(&w);
	CHECK(w.failing);
	CHECK_INT_EQ(hpn_kubeconfig_load(w.own_path, &kc, &warn, &err), 0);
	hpn_kubeconfig_free(&kc);
	kc_watch_stop(&w);
	CHECK_INT_EQ(dotfiles(at("etc")), 0);
	free(path);
	free(sa);
}

/* FIPS 180-2's examples: one block, the padding spilling into a second, many blocks. */
static void test_sha256(void)
{
	char out[INST_SHA256_HEX], *big = malloc(1000000);

	inst_sha256("", 0, out);
	CHECK_STR_EQ(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	inst_sha256("abc", 3, out);
	CHECK_STR_EQ(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	inst_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, out);
	CHECK_STR_EQ(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	if (!big) {
		CHECK(!"1 MB for the long example");
		return;
	}
	memset(big, 'a', 1000000);
	inst_sha256(big, 1000000, out);
	CHECK_STR_EQ(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(big);
}

int main(void)
{
	tmpdir_make(dir, sizeof(dir), "install");
	test_file();
	test_running();
	test_tree();
	test_elf();
	test_journals();
	test_render();
	test_kubeconfig();
	test_sha256();
	tmpdir_rm(dir);
	return check_done();
}
