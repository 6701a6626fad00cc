// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/store.c: the state directory, the lock and the journal,
 * in a scratch stateDir under /tmp.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "store.h"
#include "tmpdir.h"
#include "util.h"

static char tmp[64]; /* "/tmp/hpn-unit-store-XXXXXX" */

static void write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK_INT_EQ(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* The file's contents (malloc'd), or NULL. */
static char *read_file(const char *path)
{
	char *buf = calloc(1, 1 << 20);
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || !buf) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	n = read(fd, buf, (1 << 20) - 1);
	close(fd);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static bool is_regular(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static const char result_json[] =
	"{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"hpn0\",\"sandbox\":\"/n\"}],"
	"\"ips\":[{\"address\":\"10.0.0.2/24\",\"interface\":0}]}";

/* A journal with every field set. */
static void full_journal(struct hpn_journal *j)
{
	static const uint8_t mac[HPN_MAC_LEN] = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 };
	static const uint8_t perm[HPN_MAC_LEN] = { 0xb8, 0xce, 0xf6, 0x01, 0x02, 0x03 };

	memset(j, 0, sizeof(*j));
	j->n_nics = 1;
	j->phase = HPN_PHASE_ATTACHED;
	j->container_id = strdup("c0ffee0123456789");
	strcpy(j->cni_ifname, "eth0");
	strcpy(j->nics[0].pod_ifname, "hpn0");
	j->netns = strdup("/var/run/netns/pod1");
	j->nics[0].host.ifindex = 7;
	strcpy(j->nics[0].host.name, "ens1f0np0");
	strcpy(j->nics[0].host.altnames[0], "enp175s0f0np0");
	/* Altnames may be up to 127 bytes, unlike names. */
	memset(j->nics[0].host.altnames[1], 'a', HPN_ALTNAMSIZ - 1);
	j->nics[0].host.altnames[1][HPN_ALTNAMSIZ - 1] = '\0';
	j->nics[0].host.n_altnames = 2;
	j->nics[0].host.mtu = 9000;
	memcpy(j->nics[0].host.mac, mac, sizeof(mac));
	j->nics[0].host.has_mac = true;
	memcpy(j->nics[0].host.perm_mac, perm, sizeof(perm));
	j->nics[0].host.has_perm_mac = true;
	j->nics[0].host.up = true;
	strcpy(j->nics[0].pci, "0000:af:00.0");
	j->nics[0].pod_ifindex = 3;
	strcpy(j->nics[0].rdma.name, "rxe0");
	strcpy(j->nics[0].rdma.netdev, "ens1f0np0");
	strcpy(j->nics[0].rdma.soft_type, "rxe");
	j->nics[0].rdma.moved = true;
	j->result = strdup(result_json);
	hpn_journal_set_pod(j, "team-a", "trainer-0.x", "6f1c2d9e-0b7a-4c3e-9d55-2a61f0c4b1aa");
}

static void test_open_close(void)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	char state[PATH_MAX], path[PATH_MAX + 32];
	struct stat sb;

	/* stateDir and its parents are created; stateDir and the network dir are 0700. */
	snprintf(state, sizeof(state), "%s/a/b/state", tmp);
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	CHECK_INT_EQ(err.code, 0);
	CHECK(st.root_fd >= 0);
	CHECK(st.net_fd >= 0);
	CHECK_INT_EQ(st.lock_fd, -1);
	CHECK_INT_EQ(stat(state, &sb), 0);
	CHECK(S_ISDIR(sb.st_mode));
	CHECK_INT_EQ(sb.st_mode & 0777, 0700);
	snprintf(path, sizeof(path), "%s/net1", state);
	CHECK_INT_EQ(stat(path, &sb), 0);
	CHECK(S_ISDIR(sb.st_mode));
	CHECK_INT_EQ(sb.st_mode & 0777, 0700);
	hpn_store_close(&st);
	CHECK_INT_EQ(st.root_fd, -1);
	CHECK_INT_EQ(st.net_fd, -1);
	hpn_store_close(&st); /* twice is harmless */

	/* Opening again finds what exists. */
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	hpn_store_close(&st);

	/* A stateDir under a regular file cannot be made: code 5, naming it. */
	snprintf(path, sizeof(path), "%s/file", tmp);
	write_file(path, "x", 1);
	snprintf(state, sizeof(state), "%s/file/state", tmp);
	memset(&err, 0, sizeof(err));
	CHECK(hpn_store_open(state, "net1", &st, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_IO);
	CHECK_STR_HAS(err.msg, state);
	hpn_store_close(&st);

	/* The network directory is not followed when it is a symlink. */
	snprintf(state, sizeof(state), "%s/symnet", tmp);
	CHECK_INT_EQ(mkdir(state, 0700), 0);
	snprintf(path, sizeof(path), "%s/symnet/elsewhere", tmp);
	CHECK_INT_EQ(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/symnet/net1", tmp);
	CHECK_INT_EQ(symlink("elsewhere", path), 0);
	st = (struct hpn_store)HPN_STORE_INIT;
	memset(&err, 0, sizeof(err));
	CHECK(hpn_store_open(state, "net1", &st, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_IO);
	CHECK_STR_HAS(err.msg, "net1");
	hpn_store_close(&st);
}

static void test_journal_roundtrip(void)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct hpn_journal j, got;
	char state[PATH_MAX], path[PATH_MAX + 300], key[HPN_KEY_MAX];
	struct stat sb;

	snprintf(state, sizeof(state), "%s/rt", tmp);
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	full_journal(&j);
	CHECK_INT_EQ(hpn_store_key(j.container_id, j.cni_ifname, key), 0);
	CHECK_STR_EQ(key, "c0ffee0123456789.eth0");

	/* Missing: -ENOENT and no error recorded (DEL without ADD is fine). */
	memset(&got, 0, sizeof(got));
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), -ENOENT);
	CHECK_INT_EQ(err.code, 0);
	CHECK(got.container_id == NULL);

	CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0);
	CHECK_INT_EQ(err.code, 0);
	snprintf(path, sizeof(path), "%s/net1/%s", state, key);
	CHECK(is_regular(path));
	CHECK_INT_EQ(stat(path, &sb), 0);
	CHECK_INT_EQ(sb.st_mode & 0777, 0600);
	/* The temp file was renamed, not left behind. */
	snprintf(path, sizeof(path), "%s/net1/.tmp.%s.%d", state, key, (int)getpid());
	CHECK(access(path, F_OK) < 0);

	memset(&got, 0, sizeof(got));
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), 0);
	CHECK_INT_EQ(err.code, 0);
	CHECK_INT_EQ(got.phase, HPN_PHASE_ATTACHED);
	CHECK_STR_EQ(got.container_id, "c0ffee0123456789");
	CHECK_STR_EQ(got.cni_ifname, "eth0");
	CHECK_STR_EQ(got.nics[0].pod_ifname, "hpn0");
	CHECK_STR_EQ(got.netns, "/var/run/netns/pod1");
	CHECK_INT_EQ(got.nics[0].host.ifindex, 7);
	CHECK_STR_EQ(got.nics[0].host.name, "ens1f0np0");
	CHECK_INT_EQ(got.nics[0].host.n_altnames, 2);
	CHECK_STR_EQ(got.nics[0].host.altnames[0], "enp175s0f0np0");
	CHECK_STR_EQ(got.nics[0].host.altnames[1], j.nics[0].host.altnames[1]);
	CHECK_INT_EQ(got.nics[0].host.mtu, 9000);
	CHECK(got.nics[0].host.has_mac);
	CHECK(!memcmp(got.nics[0].host.mac, j.nics[0].host.mac, HPN_MAC_LEN));
	CHECK(got.nics[0].host.has_perm_mac);
	CHECK(!memcmp(got.nics[0].host.perm_mac, j.nics[0].host.perm_mac, HPN_MAC_LEN));
	CHECK(got.nics[0].host.up);
	CHECK_STR_EQ(got.nics[0].host.kind, "");
	CHECK_STR_EQ(got.nics[0].pci, "0000:af:00.0");
	CHECK_INT_EQ(got.nics[0].pod_ifindex, 3);
	CHECK_STR_EQ(got.nics[0].rdma.name, "rxe0");
	CHECK_STR_EQ(got.nics[0].rdma.netdev, "ens1f0np0");
	CHECK_STR_EQ(got.nics[0].rdma.soft_type, "rxe");
	CHECK(got.nics[0].rdma.moved);
	CHECK_STR_EQ(got.result, result_json);
	CHECK_STR_EQ(got.pod.namespace, "team-a");
	CHECK_STR_EQ(got.pod.name, "trainer-0.x");
	CHECK_STR_EQ(got.pod.uid, "6f1c2d9e-0b7a-4c3e-9d55-2a61f0c4b1aa");
	hpn_journal_free(&got);
	CHECK(got.container_id == NULL); /* freed and cleared */

	/* A sparse journal: optional fields come back absent, not invented. */
	hpn_journal_free(&j);
	memset(&j, 0, sizeof(j));
	j.n_nics = 1;
	j.phase = HPN_PHASE_SELECTED;
	j.container_id = strdup("c0ffee0123456789");
	strcpy(j.cni_ifname, "eth0");
	strcpy(j.nics[0].pod_ifname, "eth0");
	strcpy(j.nics[0].host.name, "veth-x");
	strcpy(j.nics[0].host.kind, "veth");
	j.nics[0].host.mtu = 1500;
	CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0); /* replaces the full one */
	memset(&got, 0, sizeof(got));
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), 0);
	CHECK_INT_EQ(got.phase, HPN_PHASE_SELECTED);
	CHECK(got.netns == NULL);
	CHECK(!got.nics[0].host.has_mac);
	CHECK(!got.nics[0].host.has_perm_mac);
	CHECK(!got.nics[0].host.up);
	CHECK_INT_EQ(got.nics[0].host.n_altnames, 0);
	CHECK_STR_EQ(got.nics[0].host.kind, "veth");
	CHECK_STR_EQ(got.nics[0].pci, "");
	CHECK_INT_EQ(got.nics[0].pod_ifindex, 0);
	CHECK_STR_EQ(got.nics[0].rdma.name, ""); /* no RDMA device */
	CHECK_STR_EQ(got.nics[0].rdma.soft_type, "");
	CHECK(!got.nics[0].rdma.moved);
	CHECK(got.result == NULL);
	CHECK_STR_EQ(got.pod.namespace, "");
	CHECK_STR_EQ(got.pod.name, "");
	CHECK_STR_EQ(got.pod.uid, "");
	hpn_journal_free(&got);

	/* Each phase survives the trip. */
	for (int p = HPN_PHASE_SELECTED; p <= HPN_PHASE_ATTACHED; p++) {
		j.phase = (enum hpn_phase)p;
		CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0);
		memset(&got, 0, sizeof(got));
		CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), 0);
		CHECK_INT_EQ(got.phase, p);
		hpn_journal_free(&got);
	}

	/* Remove, then it is gone; removing again is not an error. */
	CHECK_INT_EQ(hpn_journal_remove(&st, key, &err), 0);
	snprintf(path, sizeof(path), "%s/net1/%s", state, key);
	CHECK(access(path, F_OK) < 0);
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), -ENOENT);
	CHECK_INT_EQ(hpn_journal_remove(&st, key, &err), 0);
	CHECK_INT_EQ(err.code, 0);

	/* Journals of different networks do not see each other. */
	{
		struct hpn_store st2 = HPN_STORE_INIT;

		CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0);
		CHECK_INT_EQ(hpn_store_open(state, "net2", &st2, &err), 0);
		CHECK_INT_EQ(hpn_journal_read(&st2, key, &got, &err), -ENOENT);
		hpn_store_close(&st2);
	}

	hpn_journal_free(&j);
	hpn_store_close(&st);
}

/* Puts content in place as the journal of key, as an older plugin left it. */
static void put_journal(const char *dir, const char *key, const char *content)
{
	char path[PATH_MAX + 300];

	snprintf(path, sizeof(path), "%s/%s", dir, key);
	write_file(path, content, strlen(content));
}

/*
 * Journals on disk, built from their parts so that a bad one differs from a
 * well-formed one in the flaw it tests alone: J_HEAD(phase) the fields every
 * version starts with, J_NIC a NIC's own (version 1 holds them at the top,
 * version 2 in "nics"), J_NICS(nic) version 2's list of one NIC, unclosed.
 */
#define J_HEAD(phase) "{\"phase\":" phase ",\"containerId\":\"c\",\"cniIfName\":\"eth0\","
#define J_NIC	      "\"podIfName\":\"hpn0\",\"host\":{\"name\":\"ens1\"}"
#define J_NICS(nic)   J_HEAD("2") "\"nics\":[{" nic "}]"

/*
 * content, as the journal of key, is refused as corrupt (code 5) and nothing
 * is handed out; line is the case's, for the message when it is not.
 */
static void check_corrupt(struct hpn_store *st, const char *dir, const char *key,
			  const char *content, int line)
{
	struct hpn_journal got;
	struct hpn_err err = { 0 };
	int r;

	put_journal(dir, key, content);
	memset(&got, 0, sizeof(got));
	r = hpn_journal_read(st, key, &got, &err);
	if (r >= 0 || err.code != HPN_E_IO)
		fprintf(stderr, "\tjournal (line %d): %.200s\n", line, content);
	CHECK(r < 0);
	CHECK(r != -ENOENT);
	CHECK_INT_EQ(err.code, HPN_E_IO);
	CHECK_STR_HAS(err.msg, key);
	CHECK(got.container_id == NULL); /* nothing handed out */
	if (r == 0)
		hpn_journal_free(&got);
}

/* check_corrupt of each of texts[0..n), listed at line. */
static void check_corrupt_each(struct hpn_store *st, const char *dir, const char *key,
			       const char *const *texts, size_t n, int line)
{
	for (size_t i = 0; i < n; i++)
		check_corrupt(st, dir, key, texts[i], line);
}

/*
 * The pod's names (optional, from CNI_ARGS): only Kubernetes' syntax is kept,
 * when set and when read back; a bad one never makes the journal unreadable.
 */
static void test_journal_pod(void)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct hpn_journal j = { 0 }, got;
	char state[PATH_MAX], dir[PATH_MAX + 16], path[PATH_MAX + 300], *text;
	const char *key = "pod.eth0";
	char long_name[300];
	const char *end;

	hpn_journal_set_pod(&j, "ns-1", "web.0", "ABCdef-0123");
	CHECK_STR_EQ(j.pod.namespace, "ns-1");
	CHECK_STR_EQ(j.pod.name, "web.0");
	CHECK_STR_EQ(j.pod.uid, "ABCdef-0123");
	/* Each value is checked on its own: upper case, a slash, a dot in a namespace, a non-hex UID. */
	hpn_journal_set_pod(&j, "Team", "a/b", "xyz");
	CHECK_STR_EQ(j.pod.namespace, "");
	CHECK_STR_EQ(j.pod.name, "");
	CHECK_STR_EQ(j.pod.uid, "");
	hpn_journal_set_pod(&j, "a.b", "ok", NULL);
	CHECK_STR_EQ(j.pod.namespace, "");
	CHECK_STR_EQ(j.pod.name, "ok");
	CHECK_STR_EQ(j.pod.uid, "");
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	end = long_name + strlen(long_name);
	hpn_journal_set_pod(&j, end - 64, end - 254, "");
	CHECK_STR_EQ(j.pod.namespace, ""); /* 63 bytes at most */
	CHECK_STR_EQ(j.pod.name, "");	   /* 253 */
	hpn_journal_set_pod(&j, end - 63, end - 253, "");
	CHECK_INT_EQ(strlen(j.pod.namespace), 63);
	CHECK_INT_EQ(strlen(j.pod.name), 253);

	snprintf(state, sizeof(state), "%s/pod", tmp);
	snprintf(dir, sizeof(dir), "%s/net1", state);
	snprintf(path, sizeof(path), "%s/%s", dir, key);
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);

	/* No pod: no "pod" member written (a journal an older binary can read as before). */
	full_journal(&j);
	memset(&j.pod, 0, sizeof(j.pod));
	CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0);
	text = read_file(path);
	CHECK(text && !strstr(text, "\"pod\""));
	free(text);
	hpn_journal_free(&j);

	/* Read back from disk: bad values dropped, the rest of the journal intact. */
	put_journal(dir, key,
		    "{\"phase\":4,\"containerId\":\"c\",\"cniIfName\":\"eth0\",\"nics\":"
		    "[{\"podIfName\":\"hpn0\",\"host\":{\"name\":\"ens1\"}}],"
		    "\"pod\":{\"namespace\":\"ns\\n1\",\"name\":7,\"uid\":\"00ff-aa\"}}");
	memset(&got, 0, sizeof(got));
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), 0);
	CHECK_INT_EQ(err.code, 0);
	CHECK_STR_EQ(got.pod.namespace, "");
	CHECK_STR_EQ(got.pod.name, "");
	CHECK_STR_EQ(got.pod.uid, "00ff-aa");
	CHECK_STR_EQ(got.nics[0].host.name, "ens1");
	hpn_journal_free(&got);
	put_journal(dir, key,
		    "{\"phase\":4,\"containerId\":\"c\",\"cniIfName\":\"eth0\",\"nics\":"
		    "[{\"podIfName\":\"hpn0\",\"host\":{\"name\":\"ens1\"}}],\"pod\":[]}");
	memset(&got, 0, sizeof(got));
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), 0);
	CHECK_STR_EQ(got.pod.name, "");
	hpn_journal_free(&got);

	hpn_store_close(&st);
}

static void test_journal_corrupt(void)
{
	/* Version 1, each but for one flaw the minimal journal below. */
	static const char *const flawed[] = {
		"not json",
		"[]",
		"{}",
		J_HEAD("9") J_NIC "}",
		J_HEAD("0") J_NIC "}",
		J_HEAD("\"1\"") J_NIC "}",
		"{\"phase\":1,\"cniIfName\":\"eth0\"," J_NIC "}",
		J_HEAD("1") "\"podIfName\":\"../x\",\"host\":{\"name\":\"ens1\"}}",
		J_HEAD("1") "\"podIfName\":\"hpn0\"}",
		J_HEAD("1") "\"podIfName\":\"hpn0\",\"host\":{\"name\":\"a/b\"}}",
		J_HEAD("1") "\"podIfName\":\"hpn0\",\"host\":{\"name\":\"ens1\",\"mac\":\"zz\"}}",
		J_HEAD("1") J_NIC ",\"pci\":\"0000:af:00.0-and-far-too-long\"}",
		/* The RDMA part: an object with string name and netdev that fit. */
		J_HEAD("2") J_NIC ",\"rdma\":[]}",
		J_HEAD("2") J_NIC ",\"rdma\":{\"netdev\":\"ens1\"}}",
		J_HEAD("2") J_NIC ",\"rdma\":{\"name\":\"rxe0\"}}",
		J_HEAD("2") J_NIC ",\"rdma\":{\"name\":\"rxe0\",\"netdev\":\"0123456789abcdef\"}}",
		J_HEAD("2") J_NIC ",\"rdma\":{\"name\":\"rxe0\",\"netdev\":\"e\",\"softType\":7}}",
	};
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct hpn_journal j;
	char state[PATH_MAX], dir[PATH_MAX + 16], path[PATH_MAX + 300];
	char *good, *big;
	const char *key = "corrupt.eth0";
	size_t n;

	snprintf(state, sizeof(state), "%s/corrupt", tmp);
	snprintf(dir, sizeof(dir), "%s/net1", state);
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);

	/* A good journal's text, to cut and bend. */
	full_journal(&j);
	CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0);
	hpn_journal_free(&j);
	snprintf(path, sizeof(path), "%s/%s", dir, key);
	good = read_file(path);
	CHECK(good != NULL);
	if (!good)
		goto out;
	n = strlen(good);
	CHECK(n > 100);

	check_corrupt(&st, dir, key, "", __LINE__);
	good[n / 2] = '\0'; /* torn write */
	check_corrupt(&st, dir, key, good, __LINE__);
	check_corrupt_each(&st, dir, key, flawed, HPN_ARRAY_SIZE(flawed), __LINE__);

	/* The minimal well-formed journal is accepted (so the cases above fail for their flaw). */
	{
		static const char minimal[] = J_HEAD("1") J_NIC "}";
		struct hpn_journal got = { 0 };

		write_file(path, minimal, strlen(minimal));
		CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), 0);
		CHECK_INT_EQ(err.code, 0);
		CHECK_STR_EQ(got.nics[0].host.name, "ens1");
		hpn_journal_free(&got);
	}

	/* Bigger than a journal can be (256 KiB): refused, not read into memory whole. */
	big = malloc(300 << 10);
	if (big) {
		memset(big, ' ', 300 << 10);
		big[0] = '{';
		big[(300 << 10) - 2] = '}';
		big[(300 << 10) - 1] = '\0';
		check_corrupt(&st, dir, key, big, __LINE__);
		free(big);
	}
out:
	free(good);
	hpn_store_close(&st);
}

static void test_journal_symlinks(void)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct hpn_journal j, got;
	char state[PATH_MAX], target[PATH_MAX + 16], path[PATH_MAX + 300];
	const char *key = "victim.eth0";
	char *good, *after;

	snprintf(state, sizeof(state), "%s/sym", tmp);
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);

	/* The target holds a well-formed journal: following the link would "work". */
	full_journal(&j);
	CHECK_INT_EQ(hpn_journal_write(&st, "template", &j, &err), 0);
	snprintf(path, sizeof(path), "%s/net1/template", state);
	good = read_file(path);
	CHECK(good != NULL);
	snprintf(target, sizeof(target), "%s/target", tmp);
	if (good)
		write_file(target, good, strlen(good));

	/* Read: O_NOFOLLOW refuses the link (code 5), and the target is untouched. */
	snprintf(path, sizeof(path), "%s/net1/%s", state, key);
	CHECK_INT_EQ(symlink(target, path), 0);
	memset(&got, 0, sizeof(got));
	CHECK(hpn_journal_read(&st, key, &got, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_IO);
	CHECK_STR_HAS(err.msg, key);
	CHECK(got.container_id == NULL);
	after = read_file(target);
	CHECK_STR_EQ(after, good);
	free(after);

	/* Write replaces the link itself (rename), never writes through it. */
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0);
	CHECK(is_regular(path));
	after = read_file(target);
	CHECK_STR_EQ(after, good);
	free(after);

	/* Remove takes the link away, not its target. */
	CHECK_INT_EQ(unlink(path), 0);
	CHECK_INT_EQ(symlink(target, path), 0);
	CHECK_INT_EQ(hpn_journal_remove(&st, key, &err), 0);
	CHECK(access(target, F_OK) == 0);
	after = read_file(target);
	CHECK_STR_EQ(after, good);
	free(after);

	/* A link planted at the temp file's name is replaced, never written through. */
	snprintf(path, sizeof(path), "%s/net1/.tmp.%s.%d", state, key, (int)getpid());
	CHECK_INT_EQ(symlink(target, path), 0);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0);
	CHECK(access(path, F_OK) < 0 && errno == ENOENT);
	after = read_file(target);
	CHECK_STR_EQ(after, good);
	free(after);
	snprintf(path, sizeof(path), "%s/net1/%s", state, key);
	after = read_file(path);
	CHECK_STR_EQ(after, good);
	free(after);

	hpn_journal_free(&j);
	free(good);
	hpn_store_close(&st);
}

static void test_key(void)
{
	char k1[HPN_KEY_MAX], k2[HPN_KEY_MAX], id[1100], id2[1100];
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct hpn_journal j, got;
	char state[PATH_MAX];
	size_t n;

	CHECK_INT_EQ(hpn_store_key("abc", "eth0", k1), 0);
	CHECK_STR_EQ(k1, "abc.eth0");

	/* Up to 200 bytes with the dot and NUL: kept as is. */
	n = 200 - 2 - strlen("net1");
	memset(id, 'a', n);
	id[n] = '\0';
	CHECK_INT_EQ(hpn_store_key(id, "net1", k1), 0);
	CHECK_INT_EQ(strlen(k1), n + 5);
	CHECK(!strncmp(k1, id, n));
	CHECK_STR_EQ(k1 + n, ".net1");
	/* One more byte: hashed. */
	id[n] = 'a';
	id[n + 1] = '\0';
	CHECK_INT_EQ(hpn_store_key(id, "net1", k2), 0);
	CHECK(strlen(k2) <= 255);
	CHECK_STR_LACKS(k2, "/");
	CHECK_STR_HAS(k2, ".net1");

	/* Long IDs fit a file name (255 bytes) and stay distinct. */
	memset(id, 'f', 1024);
	id[1024] = '\0';
	memcpy(id2, id, sizeof(id));
	id2[1023] = 'e'; /* differs only far past any prefix that is kept */
	CHECK_INT_EQ(hpn_store_key(id, "abcdefghijklmno", k1), 0);
	CHECK_INT_EQ(hpn_store_key(id2, "abcdefghijklmno", k2), 0);
	CHECK(strlen(k1) <= 255);
	CHECK(strlen(k2) <= 255);
	CHECK_STR_LACKS(k1, "/");
	CHECK(strcmp(k1, k2) != 0);
	/* Same input, same key. */
	CHECK_INT_EQ(hpn_store_key(id2, "abcdefghijklmno", k1), 0);
	CHECK_STR_EQ(k1, k2);
	/* Same long ID, another interface: another key. */
	CHECK_INT_EQ(hpn_store_key(id, "net1", k1), 0);
	CHECK_INT_EQ(hpn_store_key(id, "net2", k2), 0);
	CHECK(strcmp(k1, k2) != 0);
	/* Two IDs differing in one early byte. */
	id2[1023] = 'f';
	id2[5] = 'e';
	CHECK_INT_EQ(hpn_store_key(id2, "net1", k2), 0);
	CHECK(strcmp(k1, k2) != 0);

	/* And the longest key is a usable journal name (its temp name too). */
	snprintf(state, sizeof(state), "%s/key", tmp);
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	CHECK_INT_EQ(hpn_store_key(id, "abcdefghijklmno", k1), 0);
	full_journal(&j);
	free(j.container_id);
	j.container_id = strdup(id);
	CHECK_INT_EQ(hpn_journal_write(&st, k1, &j, &err), 0);
	if (err.code)
		fprintf(stderr, "\twrite: %s\n", err.msg);
	memset(&got, 0, sizeof(got));
	CHECK_INT_EQ(hpn_journal_read(&st, k1, &got, &err), 0);
	CHECK_STR_EQ(got.container_id, id);
	hpn_journal_free(&got);
	hpn_journal_free(&j);
	hpn_store_close(&st);
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

static void test_lock(void)
{
	struct hpn_store st = HPN_STORE_INIT, st2 = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	char state[PATH_MAX], lock[PATH_MAX + 16], target[PATH_MAX + 16];
	struct timespec t0;
	struct stat sb;
	long ms;
	int fd;

	snprintf(state, sizeof(state), "%s/lock", tmp);
	snprintf(lock, sizeof(lock), "%s/lock", state);
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	CHECK_INT_EQ(hpn_store_lock(&st, 50, &err), 0);
	CHECK_INT_EQ(err.code, 0);
	CHECK(st.lock_fd >= 0);
	CHECK_INT_EQ(stat(lock, &sb), 0);
	CHECK_INT_EQ(sb.st_mode & 0777, 0600);

	/* Held: another open file description cannot take it. */
	fd = open(lock, O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(flock(fd, LOCK_EX | LOCK_NB) < 0);
	CHECK_INT_EQ(errno, EWOULDBLOCK);
	/* Closing the store releases it. */
	hpn_store_close(&st);
	CHECK_INT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);

	/* Someone else holds it: code 11 after about the timeout, not at once, not never. */
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st2, &err), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK_INT_EQ(hpn_store_lock(&st2, 50, &err), -EAGAIN);
	ms = ms_since(&t0);
	CHECK_INT_EQ(err.code, HPN_E_TRY_AGAIN);
	CHECK_STR_HAS(err.msg, "lock");
	if (ms < 45 || ms > 5000)
		fprintf(stderr, "\tlock timeout of 50 ms took %ld ms\n", ms);
	CHECK(ms >= 45);
	CHECK(ms < 5000);
	hpn_store_close(&st2);

	/* Timeout 0: one try. */
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st2, &err), 0);
	CHECK_INT_EQ(hpn_store_lock(&st2, 0, &err), -EAGAIN);
	CHECK_INT_EQ(err.code, HPN_E_TRY_AGAIN);
	hpn_store_close(&st2);

	/* Released: taken at once. */
	CHECK_INT_EQ(flock(fd, LOCK_UN), 0);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st2, &err), 0);
	CHECK_INT_EQ(hpn_store_lock(&st2, 50, &err), 0);
	CHECK_INT_EQ(err.code, 0);
	hpn_store_close(&st2);

	/* Released early: the next one takes it at once; unlock and close stay safe after. */
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	CHECK_INT_EQ(hpn_store_lock(&st, 50, &err), 0);
	hpn_store_unlock(&st);
	CHECK_INT_EQ(st.lock_fd, -1);
	hpn_store_unlock(&st);
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st2, &err), 0);
	CHECK_INT_EQ(hpn_store_lock(&st2, 0, &err), 0);
	hpn_store_close(&st2);
	hpn_store_close(&st);
	if (fd >= 0)
		close(fd);

	/* A symlink planted as the lock file is not followed (code 5) nor its target made. */
	snprintf(state, sizeof(state), "%s/locksym", tmp);
	snprintf(lock, sizeof(lock), "%s/lock", state);
	snprintf(target, sizeof(target), "%s/locktarget", tmp);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st2, &err), 0);
	CHECK_INT_EQ(symlink(target, lock), 0);
	CHECK(hpn_store_lock(&st2, 50, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_IO);
	CHECK(access(target, F_OK) < 0);
	hpn_store_close(&st2);
}

/* Version 2: several NICs, a child among them; version 1 reads as one moved NIC. */
static void test_journal_nics(void)
{
	static const char v1[] =
		"{\"version\":1,\"phase\":4,\"containerId\":\"c1\",\"cniIfName\":\"eth0\","
		"\"podIfName\":\"hpn0\",\"netns\":\"/run/netns/p\",\"host\":{\"name\":\"ens1\","
		"\"ifindex\":7,\"mtu\":1500,\"mac\":\"02:11:22:33:44:55\",\"altnames\":[]},"
		"\"pci\":\"0000:af:00.0\",\"podIfIndex\":3,\"rdma\":{\"name\":\"mlx5_2\","
		"\"netdev\":\"ens1\",\"moved\":true}}";
	/* Version 2 as the plugin wrote it before softRoce and rails. */
	static const char v2[] =
		"{\"version\":2,\"bootId\":\"0d1e4c7a-7f44-4b8e-9a55-2f1c0b8e3d21\",\"phase\":4,"
		"\"containerId\":\"c2\",\"cniIfName\":\"eth0\",\"netns\":\"/run/netns/p\","
		"\"nics\":[{\"kind\":\"moved\",\"podIfName\":\"hpn0\",\"host\":{\"name\":"
		"\"ens1\",\"ifindex\":7,\"mtu\":1500,\"up\":true,\"mac\":\"02:11:22:33:44:55\","
		"\"altnames\":[]},\"pci\":\"0000:af:00.0\",\"podIfIndex\":3,\"rdma\":{\"name\":"
		"\"mlx5_2\",\"netdev\":\"ens1\",\"moved\":true}},{\"kind\":\"moved\","
		"\"podIfName\":\"hpn1\",\"host\":{\"name\":\"ens2\",\"ifindex\":8,\"mtu\":1500,"
		"\"up\":false,\"altnames\":[]},\"rdma\":{\"name\":\"rxe0\",\"netdev\":\"ens2\","
		"\"softType\":\"rxe\",\"moved\":false}}],\"hints\":{\"dir\":\"/run/hpn-rdma/pods\","
		"\"key\":\"pod-uid-1\"}}";
	/* Shapes DEL could not act on are refused. */
	static const char *const flawed[] = {
		J_HEAD("2") "\"nics\":[]}",
		J_NICS("\"kind\":\"child\",\"childKind\":\"veth\"," J_NIC) "}",
		J_NICS("\"kind\":\"moved\",\"childKind\":\"macvlan\"," J_NIC) "}",
		J_NICS("\"kind\":\"other\"," J_NIC) "}",
		/* DEL deletes a created device and rules by these: only ones ADD makes. */
		J_NICS(J_NIC
		       ",\"rdma\":{\"name\":\"mlx5_0\",\"netdev\":\"hpn0\",\"created\":true}") "}",
		/* Nodes DEL unlinks: only of a device ADD made, only names of RDMA character devices. */
		J_NICS(J_NIC ",\"rdma\":{\"name\":\"mlx5_0\",\"netdev\":\"hpn0\",\"nodes\":[{"
			     "\"name\":\"uverbs0\",\"major\":231,\"minor\":192}]}") "}",
		J_NICS(J_NIC ",\"rdma\":{\"name\":\"rxe_0123456789ab\",\"netdev\":\"hpn0\","
			     "\"created\":true,\"nodes\":[{\"name\":\"../etc\",\"major\":231,"
			     "\"minor\":192}]}") "}",
		J_NICS(J_NIC ",\"rdma\":{\"name\":\"rxe_0123456789ab\",\"netdev\":\"hpn0\","
			     "\"created\":true,\"nodes\":[{\"name\":\"passwd\",\"major\":231,"
			     "\"minor\":192}]}") "}",
		J_NICS(J_NIC) ",\"devicesDir\":\"run\"}",
		/* A CDI spec DEL removes: only of a device ADD made, only a name of ADD's rule. */
		J_NICS(J_NIC ",\"rdma\":{\"name\":\"mlx5_0\",\"netdev\":\"hpn0\","
			     "\"cdiSpec\":\"alibabacloud.com-hpn-rdma-pod_ens1.json\"}") "}",
		J_NICS(J_NIC
		       ",\"rdma\":{\"name\":\"rxe_0123456789ab\",\"netdev\":\"hpn0\","
		       "\"created\":true,\"cdiSpec\":\"alibabacloud.com-hpn-rdma_ens1.json\"}") "}",
		J_NICS(J_NIC ",\"rdma\":{\"name\":\"rxe_0123456789ab\",\"netdev\":\"hpn0\","
			     "\"created\":true,\"cdiSpec\":\"../../etc/cdi/x.json\"}") "}",
		J_NICS(J_NIC ",\"rdma\":{\"name\":\"rxe_0123456789ab\",\"netdev\":\"hpn0\","
			     "\"created\":true,\"cdiSpec\":7}") "}",
		J_NICS(J_NIC) ",\"cdiDir\":\"var/run/cdi\"}",
		J_NICS(J_NIC) ",\"cdiDir\":true}",
		J_NICS(J_NIC ",\"rail\":{\"table\":254,\"priority\":1000}") "}",
		J_NICS(J_NIC ",\"rail\":{\"table\":1003,\"priority\":32766}") "}",
		J_NICS(J_NIC ",\"rail\":{\"table\":\"1003\",\"priority\":1000}") "}",
		/* A hints link DEL removes: only a name of a device ID under nccl.dir/nic. */
		J_NICS(J_NIC ",\"hintsLink\":\"..\"") "}",
		J_NICS(J_NIC ",\"hintsLink\":\"../etc\"") "}",
		J_NICS(J_NIC ",\"hintsLink\":\"\"") "}",
		J_NICS(J_NIC ",\"hintsLink\":7") "}",
	};
	static const uint8_t cmac[HPN_MAC_LEN] = { 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee };
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct hpn_journal j, got;
	char state[PATH_MAX], dir[PATH_MAX + 16];

	snprintf(state, sizeof(state), "%s/nics", tmp);
	CHECK_INT_EQ(hpn_store_open(state, "net", &st, &err), 0);
	snprintf(dir, sizeof(dir), "%s/net", state);

	full_journal(&j);
	j.n_nics = 2;
	j.owner_pid = 1234;
	j.owner_start = 987654321ull;
	j.nics[1].kind = HPN_NIC_CHILD;
	strcpy(j.nics[1].pod_ifname, "hpn1");
	strcpy(j.nics[1].host.name, "ens2");
	j.nics[1].host.ifindex = 9;
	strcpy(j.nics[1].child_kind, "macvlan");
	memcpy(j.nics[1].child_mac, cmac, HPN_MAC_LEN);
	j.nics[1].has_child_mac = true;
	j.nics[1].pod_ifindex = 5;
	/* softRoce's device on the child, and both NICs as rails. */
	strcpy(j.nics[1].rdma.name, "rxe_0123456789ab");
	strcpy(j.nics[1].rdma.netdev, "hpn1");
	j.nics[1].rdma.created = true;
	/* Its device nodes for the containers, in the agent's directory. */
	j.nics[1].rdma.nodes[0] = (struct hpn_journal_node){ "umad3", 231, 3 };
	j.nics[1].rdma.nodes[1] = (struct hpn_journal_node){ "uverbs3", 231, 195 };
	j.nics[1].rdma.n_nodes = 2;
	j.devices_dir = strdup("/run/hpn-rdma/dev");
	/* Its CDI spec, written by ADD. */
	strcpy(j.nics[1].rdma.cdi_spec, "alibabacloud.com-hpn-rdma-pod_ens2.json");
	j.cdi_dir = strdup("/var/run/cdi");
	j.nics[0].rail_table = 1003;
	j.nics[0].rail_priority = 1000;
	j.nics[1].rail_table = 1005;
	j.nics[1].rail_priority = 1000;
	/* The GPU each serves (the second's unknown to procfs: no PCI address). */
	strcpy(j.nics[0].gpu_id, "GPU-4f1c0d2e-9b3a-4e5f-8a7b-6c5d4e3f2a1b");
	strcpy(j.nics[0].gpu_pci, "0000:1b:00.0");
	strcpy(j.nics[0].gpu_dist, "PXB");
	strcpy(j.nics[0].gpu_best, "PIX");
	strcpy(j.nics[1].gpu_id, "MIG-0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f");
	strcpy(j.nics[1].gpu_dist, "unknown");
	strcpy(j.nics[1].gpu_best, "unknown");
	/* The first the kubelet's, with its hints link. */
	strcpy(j.nics[0].hints_link, "0000:af:00.0");
	CHECK_INT_EQ(hpn_journal_write(&st, "c.eth0", &j, &err), 0);
	memset(&got, 0, sizeof(got));
	CHECK_INT_EQ(hpn_journal_read(&st, "c.eth0", &got, &err), 0);
	CHECK_INT_EQ(got.n_nics, 2);
	CHECK_INT_EQ(got.owner_pid, 1234);
	CHECK(got.owner_start == 987654321ull);
	CHECK_INT_EQ(got.nics[0].kind, HPN_NIC_MOVED);
	CHECK_STR_EQ(got.nics[0].host.name, "ens1f0np0");
	CHECK_STR_EQ(got.nics[0].rdma.name, "rxe0");
	CHECK_INT_EQ(got.nics[1].kind, HPN_NIC_CHILD);
	CHECK_STR_EQ(got.nics[1].pod_ifname, "hpn1");
	CHECK_STR_EQ(got.nics[1].host.name, "ens2");
	CHECK_STR_EQ(got.nics[1].child_kind, "macvlan");
	CHECK(got.nics[1].has_child_mac && !memcmp(got.nics[1].child_mac, cmac, HPN_MAC_LEN));
	CHECK_INT_EQ(got.nics[1].pod_ifindex, 5);
	CHECK_STR_EQ(got.nics[1].rdma.name, "rxe_0123456789ab");
	CHECK_STR_EQ(got.nics[1].rdma.netdev, "hpn1");
	CHECK(got.nics[1].rdma.created && !got.nics[1].rdma.moved);
	CHECK_STR_EQ(got.nics[1].rdma.soft_type, "");
	CHECK(!got.nics[0].rdma.created);
	CHECK_INT_EQ(got.nics[0].rdma.n_nodes, 0);
	CHECK_INT_EQ(got.nics[1].rdma.n_nodes, 2);
	CHECK_STR_EQ(got.nics[1].rdma.nodes[0].name, "umad3");
	CHECK_STR_EQ(got.nics[1].rdma.nodes[1].name, "uverbs3");
	CHECK_INT_EQ(got.nics[1].rdma.nodes[1].major, 231);
	CHECK_INT_EQ(got.nics[1].rdma.nodes[1].minor, 195);
	CHECK_STR_EQ(got.devices_dir, "/run/hpn-rdma/dev");
	CHECK_STR_EQ(got.nics[0].rdma.cdi_spec, "");
	CHECK_STR_EQ(got.nics[1].rdma.cdi_spec, "alibabacloud.com-hpn-rdma-pod_ens2.json");
	CHECK_STR_EQ(got.cdi_dir, "/var/run/cdi");
	CHECK_INT_EQ(got.nics[0].rail_table, 1003);
	CHECK_INT_EQ(got.nics[0].rail_priority, 1000);
	CHECK_INT_EQ(got.nics[1].rail_table, 1005);
	CHECK_INT_EQ(got.nics[1].rail_priority, 1000);
	CHECK_STR_EQ(got.nics[0].gpu_id, "GPU-4f1c0d2e-9b3a-4e5f-8a7b-6c5d4e3f2a1b");
	CHECK_STR_EQ(got.nics[0].gpu_pci, "0000:1b:00.0");
	CHECK_STR_EQ(got.nics[0].gpu_dist, "PXB");
	CHECK_STR_EQ(got.nics[0].gpu_best, "PIX");
	CHECK_STR_EQ(got.nics[1].gpu_id, "MIG-0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f");
	CHECK_STR_EQ(got.nics[1].gpu_pci, "");
	CHECK_STR_EQ(got.nics[1].gpu_dist, "unknown");
	CHECK_STR_EQ(got.nics[0].hints_link, "0000:af:00.0");
	CHECK_STR_EQ(got.nics[1].hints_link, "");
	hpn_journal_free(&got);
	/* A GPU member not of its shape is dropped: the NIC is still undone. */
	static const char *const bad_gpu[] = {
		J_NICS(J_NIC
		       ",\"gpu\":{\"id\":\"GPU 1\",\"distance\":\"PIX\",\"best\":\"PIX\"}") "}",
		J_NICS(J_NIC
		       ",\"gpu\":{\"id\":\"GPU-1\",\"distance\":\"near\",\"best\":\"PIX\"}") "}",
		J_NICS(J_NIC ",\"gpu\":{\"id\":\"GPU-1\",\"distance\":\"PIX\",\"best\":\"PIX\","
			     "\"pci\":\"x\"}") "}",
		J_NICS(J_NIC ",\"gpu\":\"GPU-1\"") "}",
	};
	for (size_t i = 0; i < HPN_ARRAY_SIZE(bad_gpu); i++) {
		put_journal(dir, "g.eth0", bad_gpu[i]);
		memset(&got, 0, sizeof(got));
		CHECK_INT_EQ(hpn_journal_read(&st, "g.eth0", &got, &err), 0);
		CHECK_INT_EQ(got.n_nics, 1);
		CHECK_STR_EQ(got.nics[0].gpu_id, "");
		CHECK_STR_EQ(got.nics[0].gpu_dist, "");
		hpn_journal_free(&got);
	}
	hpn_journal_free(&j);

	/* Version 2 as written before softRoce and rails: nothing created, no rail. */
	put_journal(dir, "v2.eth0", v2);
	CHECK_INT_EQ(hpn_journal_read(&st, "v2.eth0", &got, &err), 0);
	CHECK_INT_EQ(got.n_nics, 2);
	CHECK_STR_EQ(got.nics[0].rdma.name, "mlx5_2");
	CHECK(got.nics[0].rdma.moved && !got.nics[0].rdma.created);
	CHECK_STR_EQ(got.nics[1].rdma.name, "rxe0");
	CHECK_STR_EQ(got.nics[1].rdma.soft_type, "rxe");
	CHECK(!got.nics[1].rdma.created);
	CHECK_INT_EQ(got.nics[0].rail_table, 0);
	CHECK_INT_EQ(got.nics[1].rail_table, 0);
	CHECK_STR_EQ(got.hints_key, "pod-uid-1");
	CHECK(got.devices_dir == NULL && got.nics[1].rdma.n_nodes == 0);
	/* Before CDI specs: none to remove. */
	CHECK(got.cdi_dir == NULL && !got.nics[0].rdma.cdi_spec[0] &&
	      !got.nics[1].rdma.cdi_spec[0]);
	/* Before the hints links: none to remove. */
	CHECK(!got.nics[0].hints_link[0] && !got.nics[1].hints_link[0]);
	hpn_journal_free(&got);

	/* A journal written before version 2. */
	put_journal(dir, "old.eth0", v1);
	CHECK_INT_EQ(hpn_journal_read(&st, "old.eth0", &got, &err), 0);
	CHECK_INT_EQ(got.n_nics, 1);
	CHECK_INT_EQ(got.nics[0].kind, HPN_NIC_MOVED);
	CHECK_STR_EQ(got.nics[0].pod_ifname, "hpn0");
	CHECK_STR_EQ(got.nics[0].host.name, "ens1");
	CHECK_STR_EQ(got.nics[0].pci, "0000:af:00.0");
	CHECK_INT_EQ(got.nics[0].pod_ifindex, 3);
	CHECK_STR_EQ(got.nics[0].rdma.name, "mlx5_2");
	CHECK(got.nics[0].rdma.moved);
	CHECK_INT_EQ(got.owner_pid, 0);
	hpn_journal_free(&got);

	check_corrupt_each(&st, dir, "bad.eth0", flawed, HPN_ARRAY_SIZE(flawed), __LINE__);
	hpn_store_close(&st);
}

/* Sets path's mtime to t (seconds since the epoch). */
static void set_mtime(const char *path, long long t)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = (time_t)t } };

	CHECK_INT_EQ(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* Replaces the first occurrence of from in path's text by to. */
static void edit_file(const char *path, const char *from, const char *to)
{
	char *text = read_file(path), *at = text ? strstr(text, from) : NULL, *out = NULL;

	CHECK(at != NULL);
	if (at && asprintf(&out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from)) > 0)
		write_file(path, out, strlen(out));
	free(out);
	free(text);
}

/*
 * Journals carry the boot they were written in: one of an earlier boot is
 * stale (its NICs are back, its owner pid means nothing), whether it says so
 * by its bootId or, without one, by an mtime before this boot; an unparsable
 * one from before this boot is -ESTALE (removable), from this boot corrupt.
 */
static void test_journal_boot(void)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct hpn_journal j, got;
	char state[PATH_MAX], path[PATH_MAX + 300], quoted[64];
	const char *key = "boot.eth0", *id = hpn_boot_id();
	unsigned long long start = 0;
	long long btime = 0;
	char *text;

	CHECK(id != NULL && strlen(id) == 36);
	CHECK_INT_EQ(hpn_boot_time(&btime), 0);
	CHECK(btime > 1000000000 && btime <= (long long)time(NULL));
	if (!id)
		return;
	snprintf(state, sizeof(state), "%s/boot", tmp);
	snprintf(path, sizeof(path), "%s/net1/%s", state, key);
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	full_journal(&j);
	/* An ADD in flight, owned by a live process: busy unless stale. */
	j.phase = HPN_PHASE_MOVING;
	j.owner_pid = (int)getppid();
	CHECK_INT_EQ(hpn_proc_start(j.owner_pid, &start), 0);
	j.owner_start = start;
	CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0);
	hpn_journal_free(&j);
	snprintf(quoted, sizeof(quoted), "\"bootId\":\"%s\"", id);
	text = read_file(path);
	CHECK(text && strstr(text, quoted));
	free(text);

	memset(&got, 0, sizeof(got));
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), 0);
	CHECK(!got.stale);
	CHECK(hpn_journal_busy(&got));
	hpn_journal_free(&got);

	/* Another boot's ID, however recent the file: stale, and not busy. */
	edit_file(path, id, "00000000-1111-2222-3333-444444444444");
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), 0);
	CHECK(got.stale);
	CHECK(!hpn_journal_busy(&got));
	hpn_journal_free(&got);

	/* No bootId (a journal of an earlier version): its mtime decides. */
	edit_file(path, "\"bootId\":\"00000000-1111-2222-3333-444444444444\",", "");
	text = read_file(path);
	CHECK(text && !strstr(text, "bootId"));
	free(text);
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), 0);
	CHECK(!got.stale);
	hpn_journal_free(&got);
	set_mtime(path, btime - 60);
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), 0);
	CHECK(got.stale);
	hpn_journal_free(&got);
	/* This boot's ID wins over an old mtime. */
	full_journal(&j);
	CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0);
	hpn_journal_free(&j);
	set_mtime(path, btime - 60);
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), 0);
	CHECK(!got.stale);
	hpn_journal_free(&got);

	/* Unparsable (a write a power loss cut short): -ESTALE if from before this boot. */
	write_file(path, "{\"phase\":", 10);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), -EINVAL);
	CHECK_STR_HAS(err.msg, "is corrupt");
	set_mtime(path, btime - 60);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), -ESTALE);
	CHECK_INT_EQ(err.code, HPN_E_IO);
	CHECK_STR_HAS(err.msg, "earlier boot");
	write_file(path, "", 0);
	set_mtime(path, btime - 60);
	CHECK_INT_EQ(hpn_journal_read(&st, key, &got, &err), -ESTALE);
	hpn_store_close(&st);
}

/*
 * The default stateDir moved (to tmpfs): hpn_store_adopt moves an older
 * binary's journals, every network's, into the new one, mtimes kept (a torn
 * journal's boot is told by it), drops temp files and the event log, and
 * removes the old directory, under both locks; without an old one, nothing.
 */
static void test_adopt(void)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct hpn_journal j, got;
	char old[PATH_MAX], cur[PATH_MAX], path[PATH_MAX + 300], lock[PATH_MAX + 16];
	char *before, *after;
	struct stat sb;
	long long btime = 0;
	int fd;

	snprintf(old, sizeof(old), "%s/adopt-old", tmp);
	snprintf(cur, sizeof(cur), "%s/adopt-new/state", tmp);
	CHECK_INT_EQ(hpn_boot_time(&btime), 0);
	/* What an older binary left: two networks, a temp file, a torn journal, its log. */
	CHECK_INT_EQ(hpn_store_open(old, "net1", &st, &err), 0);
	full_journal(&j);
	CHECK_INT_EQ(hpn_journal_write(&st, "c1.eth0", &j, &err), 0);
	hpn_journal_free(&j);
	hpn_store_close(&st);
	CHECK_INT_EQ(hpn_store_open(old, "net2", &st, &err), 0);
	hpn_store_close(&st);
	snprintf(path, sizeof(path), "%s/net2/torn.eth0", old);
	write_file(path, "{\"phase\":", 10);
	set_mtime(path, btime - 60);
	snprintf(path, sizeof(path), "%s/net1/.tmp.c2.eth0.99", old);
	write_file(path, "{", 1);
	snprintf(path, sizeof(path), "%s/events.log", old);
	write_file(path, "{}\n", 3);
	snprintf(lock, sizeof(lock), "%s/lock", old);
	write_file(lock, "", 0);
	snprintf(path, sizeof(path), "%s/net1/c1.eth0", old);
	before = read_file(path);

	/* An older binary's run holds its lock: code 11 after the wait, nothing moved. */
	fd = open(lock, O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0);
	CHECK_INT_EQ(hpn_store_adopt(old, cur, 50, &err), -EAGAIN);
	CHECK_INT_EQ(err.code, HPN_E_TRY_AGAIN);
	CHECK(is_regular(path));
	close(fd);

	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_store_adopt(old, cur, 50, &err), 0);
	CHECK_INT_EQ(err.code, 0);
	CHECK(lstat(old, &sb) < 0 && errno == ENOENT);
	snprintf(path, sizeof(path), "%s/net1/c1.eth0", cur);
	after = read_file(path);
	CHECK(before && after && !strcmp(before, after));
	free(before);
	free(after);
	CHECK_INT_EQ(stat(cur, &sb), 0);
	CHECK_INT_EQ(sb.st_mode & 0777, 0700);
	snprintf(path, sizeof(path), "%s/net1/.tmp.c2.eth0.99", cur);
	CHECK(lstat(path, &sb) < 0);
	snprintf(path, sizeof(path), "%s/events.log", cur);
	CHECK(lstat(path, &sb) < 0);
	/* The torn one kept its mtime, so it still reads as an earlier boot's. */
	snprintf(path, sizeof(path), "%s/net2/torn.eth0", cur);
	CHECK_INT_EQ(stat(path, &sb), 0);
	CHECK_INT_EQ((long long)sb.st_mtime, btime - 60);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_store_open(cur, "net2", &st, &err), 0);
	memset(&got, 0, sizeof(got));
	CHECK_INT_EQ(hpn_journal_read(&st, "torn.eth0", &got, &err), -ESTALE);
	hpn_store_close(&st);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_store_open(cur, "net1", &st, &err), 0);
	CHECK_INT_EQ(hpn_journal_read(&st, "c1.eth0", &got, &err), 0);
	CHECK_STR_EQ(got.nics[0].host.name, "ens1f0np0");
	CHECK_INT_EQ(got.phase, HPN_PHASE_ATTACHED);
	hpn_journal_free(&got);
	hpn_store_close(&st);

	/* Done once: no old directory is nothing to do, and changes nothing. */
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_store_adopt(old, cur, 50, &err), 0);
	CHECK(lstat(old, &sb) < 0);
	/* Not the default stateDir: the old default is not looked at. */
	CHECK_INT_EQ(hpn_store_adopt_old(cur, &err), 0);

	/* What cannot be moved (an unreadable old dir) is an error naming both. */
	CHECK_INT_EQ(mkdir(old, 0700), 0);
	snprintf(path, sizeof(path), "%s/net3", old);
	CHECK_INT_EQ(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/net3/fifo.eth0", old);
	CHECK_INT_EQ(mkfifo(path, 0600), 0);
	memset(&err, 0, sizeof(err));
	CHECK(hpn_store_adopt(old, cur, 50, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_IO);
	CHECK_STR_HAS(err.msg, old);
	CHECK_STR_HAS(err.msg, cur);
	CHECK_INT_EQ(unlink(path), 0);
	CHECK_INT_EQ(hpn_store_adopt(old, cur, 50, &err), 0);
	CHECK(lstat(old, &sb) < 0);
}

int main(void)
{
	tmpdir_make(tmp, sizeof(tmp), "store");
	test_open_close();
	test_journal_roundtrip();
	test_journal_corrupt();
	test_journal_pod();
	test_journal_boot();
	test_journal_nics();
	test_journal_symlinks();
	test_key();
	test_lock();
	test_adopt();
	if (tmpdir_rm(tmp) < 0)
		perror("remove scratch directory");
	return check_done();
}
