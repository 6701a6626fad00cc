// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/util.c: name and path checks, MAC and PCI address
 * parsing, mkdir -p, the atomic file write, the hash.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "tmpdir.h"
#include "util.h"

static void test_ifname(void)
{
	char long_name[64];

	CHECK(hpn_valid_ifname("a"));
	CHECK(hpn_valid_ifname("eth0"));
	CHECK(hpn_valid_ifname("ens1f0np0"));
	CHECK(hpn_valid_ifname("net1-a_b.c"));
	CHECK(hpn_valid_ifname("...")); /* only "." and ".." are special */
	/* IFNAMSIZ is 16 with the NUL: 15 bytes fit, 16 do not. */
	CHECK(hpn_valid_ifname("abcdefghijklmno"));
	CHECK(!hpn_valid_ifname("abcdefghijklmnop"));
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	CHECK(!hpn_valid_ifname(long_name));
	CHECK(!hpn_valid_ifname("."));
	CHECK(!hpn_valid_ifname(".."));
	CHECK(!hpn_valid_ifname("/"));
	CHECK(!hpn_valid_ifname("a/b"));
	CHECK(!hpn_valid_ifname("../eth0"));
	CHECK(!hpn_valid_ifname(":"));
	CHECK(!hpn_valid_ifname("eth0:1"));
	CHECK(!hpn_valid_ifname(" "));
	CHECK(!hpn_valid_ifname("eth 0"));
	CHECK(!hpn_valid_ifname("eth0\t"));
	CHECK(!hpn_valid_ifname("eth0\n"));
	CHECK(!hpn_valid_ifname("eth\x01"));
	CHECK(!hpn_valid_ifname(""));
	CHECK(!hpn_valid_ifname(NULL));
}

static void test_container_id(void)
{
	char id[1100];

	CHECK(hpn_valid_container_id("a"));
	CHECK(hpn_valid_container_id("Z"));
	CHECK(hpn_valid_container_id("0"));
	CHECK(hpn_valid_container_id("abc-DEF_123.x"));
	CHECK(hpn_valid_container_id("a--__..")); /* after the first, any of [_.-] */
	CHECK(hpn_valid_container_id(
		"4b1d5c0e9f7a3e2d8c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d"));
	/* The first character must be alphanumeric. */
	CHECK(!hpn_valid_container_id("_abc"));
	CHECK(!hpn_valid_container_id(".abc"));
	CHECK(!hpn_valid_container_id("-abc"));
	CHECK(!hpn_valid_container_id(".."));
	/* Nothing outside [a-zA-Z0-9_.-]. */
	CHECK(!hpn_valid_container_id("a/b"));
	CHECK(!hpn_valid_container_id("a b"));
	CHECK(!hpn_valid_container_id("a:b"));
	CHECK(!hpn_valid_container_id("a~b"));
	CHECK(!hpn_valid_container_id("a+b"));
	CHECK(!hpn_valid_container_id("a\nb"));
	CHECK(!hpn_valid_container_id("abc\xc3\xa9")); /* UTF-8 letters are not [a-zA-Z] */
	CHECK(!hpn_valid_container_id(""));
	CHECK(!hpn_valid_container_id(NULL));
	/* Long IDs are legal (the store hashes them); 300 bytes pass. */
	memset(id, 'a', 300);
	id[300] = '\0';
	CHECK(hpn_valid_container_id(id));
	id[150] = '/';
	CHECK(!hpn_valid_container_id(id));
}

static void test_path_component(void)
{
	char s[256];

	CHECK(hpn_valid_path_component("net1"));
	CHECK(hpn_valid_path_component("a.b-c_d"));
	CHECK(hpn_valid_path_component(".hidden"));
	CHECK(hpn_valid_path_component("..."));
	CHECK(!hpn_valid_path_component("."));
	CHECK(!hpn_valid_path_component(".."));
	CHECK(!hpn_valid_path_component(""));
	CHECK(!hpn_valid_path_component(NULL));
	CHECK(!hpn_valid_path_component("/"));
	CHECK(!hpn_valid_path_component("a/b"));
	CHECK(!hpn_valid_path_component("../etc"));
	CHECK(!hpn_valid_path_component("a b"));
	CHECK(!hpn_valid_path_component("a:b"));
	CHECK(!hpn_valid_path_component("a\\b"));
	memset(s, 'p', 200);
	s[200] = '\0';
	CHECK(hpn_valid_path_component(s));
	s[200] = 'p';
	s[201] = '\0';
	CHECK(!hpn_valid_path_component(s));

	/* Plugin names: path components that are not hidden files. */
	CHECK(hpn_valid_plugin_name("host-local"));
	CHECK(hpn_valid_plugin_name("whereabouts"));
	CHECK(!hpn_valid_plugin_name(".host-local"));
	CHECK(!hpn_valid_plugin_name("../bin/sh"));
	CHECK(!hpn_valid_plugin_name("/bin/sh"));
	CHECK(!hpn_valid_plugin_name(""));
}

static void test_mac(void)
{
	static const char *const round[] = {
		"00:00:00:00:00:00", "02:00:00:00:00:01", "ff:ff:ff:ff:ff:ff",
		"b8:ce:f6:12:34:56", "0a:1b:2c:3d:4e:5f",
	};
	static const char *const bad[] = {
		"",
		"02:00:00:00:00", /* five octets */
		"02:00:00:00:00:01:02",
		"02:00:00:00:00:001",
		"02:00:00:00:00:0",
		"02-00-00-00-00-01", /* wrong separator */
		"02.00.00.00.00.01",
		"020000000001",
		"0200:0000:0001:",
		"02:00:00:00:00:0g",
		"g2:00:00:00:00:01",
		"02:00:00:00:00:01 ",
		" 02:00:00:00:00:01",
		"02:00:00:00:00:1x",
		"2:0:0:0:0:1",
	};
	uint8_t mac[HPN_MAC_LEN], keep[HPN_MAC_LEN] = { 1, 2, 3, 4, 5, 6 };
	uint8_t zero[HPN_MAC_LEN] = { 0 };
	char out[HPN_MAC_STR];

	CHECK_INT_EQ(hpn_mac_parse("02:Ab:cD:EF:00:9f", mac), 0);
	CHECK_INT_EQ(mac[0], 0x02);
	CHECK_INT_EQ(mac[1], 0xab);
	CHECK_INT_EQ(mac[2], 0xcd);
	CHECK_INT_EQ(mac[3], 0xef);
	CHECK_INT_EQ(mac[4], 0x00);
	CHECK_INT_EQ(mac[5], 0x9f);
	hpn_mac_format(mac, out);
	CHECK_STR_EQ(out, "02:ab:cd:ef:00:9f"); /* lower case out */

	for (size_t i = 0; i < HPN_ARRAY_SIZE(round); i++) {
		memset(out, 'X', sizeof(out));
		CHECK_INT_EQ(hpn_mac_parse(round[i], mac), 0);
		hpn_mac_format(mac, out);
		CHECK_STR_EQ(out, round[i]);
	}

	for (size_t i = 0; i < HPN_ARRAY_SIZE(bad); i++) {
		memcpy(mac, keep, sizeof(mac));
		if (hpn_mac_parse(bad[i], mac) != -EINVAL)
			fprintf(stderr, "\tmac input: \"%s\"\n", bad[i]);
		CHECK_INT_EQ(hpn_mac_parse(bad[i], mac), -EINVAL);
		/* Outputs are written only on success. */
		CHECK(!memcmp(mac, keep, sizeof(mac)));
	}
	CHECK_INT_EQ(hpn_mac_parse(NULL, mac), -EINVAL);

	CHECK(hpn_mac_is_zero(zero));
	CHECK(!hpn_mac_is_zero(keep));
	zero[5] = 1;
	CHECK(!hpn_mac_is_zero(zero));
}

static void check_pci_bad(const char *in, int line)
{
	char out[HPN_PCI_STR] = "untouched";
	int r = hpn_pci_normalise(in, out);

	if (r != -EINVAL || strcmp(out, "untouched"))
		fprintf(stderr, "\tpci input (line %d): \"%s\"\n", line, in ? in : "(null)");
	CHECK_INT_EQ(r, -EINVAL);
	CHECK_STR_EQ(out, "untouched");
}

static void check_pci_good(const char *in, const char *want, int line)
{
	char out[HPN_PCI_STR] = "";
	int r = hpn_pci_normalise(in, out);

	if (r != 0)
		fprintf(stderr, "\tpci input (line %d): \"%s\"\n", line, in);
	CHECK_INT_EQ(r, 0);
	CHECK_STR_EQ(out, want);
}

static void test_pci(void)
{
	check_pci_good("af:00.1", "0000:af:00.1", __LINE__);
	check_pci_good("0000:af:00.1", "0000:af:00.1", __LINE__);
	check_pci_good("0000:AF:00.1", "0000:af:00.1", __LINE__);
	check_pci_good("AF:1F.7", "0000:af:1f.7", __LINE__);
	check_pci_good("00:04.0", "0000:00:04.0", __LINE__);
	check_pci_good("0001:3B:00.0", "0001:3b:00.0", __LINE__);
	check_pci_good("FFFF:ff:1f.0", "ffff:ff:1f.0", __LINE__);

	/* The function number is 0-7. */
	check_pci_bad("af:00.8", __LINE__);
	check_pci_bad("0000:af:00.8", __LINE__);
	check_pci_bad("0000:af:00.9", __LINE__);
	check_pci_bad("0000:af:00.a", __LINE__);
	/* Lengths other than 7 and 12. */
	check_pci_bad("", __LINE__);
	check_pci_bad("f:00.1", __LINE__);
	check_pci_bad("af:00.10", __LINE__);
	check_pci_bad("000:af:00.1", __LINE__);
	check_pci_bad("00000:af:00.1", __LINE__);
	check_pci_bad("0000:af:00.1 ", __LINE__);
	check_pci_bad("0000:0af:00.1", __LINE__);
	/* Right length, wrong shape. */
	check_pci_bad("0000-af:00.1", __LINE__);
	check_pci_bad("0000:af-00.1", __LINE__);
	check_pci_bad("0000:af:00:1", __LINE__);
	check_pci_bad("0000:ag:00.1", __LINE__);
	check_pci_bad("000g:af:00.1", __LINE__);
	check_pci_bad("af:0g.1", __LINE__);
	check_pci_bad("af.00:1", __LINE__);
	check_pci_bad("virtio1", __LINE__); /* a sysfs child of a PCI device, same length */
	check_pci_bad("../../x", __LINE__);
	check_pci_bad(NULL, __LINE__);
}

static void test_snprintf_strdup(void)
{
	char buf[8];
	char *s;

	CHECK_INT_EQ(hpn_snprintf(buf, sizeof(buf), "%s", "1234567"), 0);
	CHECK_STR_EQ(buf, "1234567");
	CHECK_INT_EQ(hpn_snprintf(buf, sizeof(buf), "%s", "12345678"), -ENAMETOOLONG);
	CHECK(hpn_strdup(NULL) == NULL);
	s = hpn_strdup("x");
	CHECK_STR_EQ(s, "x");
	free(s);
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

static void test_files(void)
{
	char dir[64], path[128], other[128], buf[64], *got = NULL;
	struct hpn_err e1 = { 0 }, e2 = { 0 }, e3 = { 0 };
	mode_t old = umask(077);
	size_t len = 0;
	int dfd, fd;
	ssize_t n;

	tmpdir_make(dir, sizeof(dir), "util");
	/* Parents 0755, the path itself exactly the mode asked, whatever the umask. */
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	CHECK_INT_EQ(hpn_mkdir_p(path, 0700), 0);
	CHECK_INT_EQ(mode_of(path), 0700);
	snprintf(path, sizeof(path), "%s/a/b", dir);
	CHECK_INT_EQ(mode_of(path), 0755);
	snprintf(path, sizeof(path), "%s/a", dir);
	CHECK_INT_EQ(mode_of(path), 0755);
	/* What exists is left alone; again is fine. */
	CHECK_INT_EQ(chmod(path, 0711), 0);
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	CHECK_INT_EQ(hpn_mkdir_p(path, 0755), 0);
	CHECK_INT_EQ(mode_of(path), 0700);
	snprintf(path, sizeof(path), "%s/a", dir);
	CHECK_INT_EQ(mode_of(path), 0711);
	/* A file in the way is an error, not a success. */
	snprintf(path, sizeof(path), "%s/f", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/f/x", dir);
	CHECK_INT_EQ(hpn_mkdir_p(path, 0755), -ENOTDIR);

	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0);
	CHECK_INT_EQ(hpn_write_atomic(dfd, ".t", "file", "hello", 5, 0644), 0);
	snprintf(path, sizeof(path), "%s/file", dir);
	CHECK_INT_EQ(mode_of(path), 0644);
	fd = open(path, O_RDONLY);
	n = read(fd, buf, sizeof(buf));
	close(fd);
	CHECK_INT_EQ(n, 5);
	CHECK(!memcmp(buf, "hello", 5));
	/* A symlink planted as the temp file is replaced, its target untouched. */
	snprintf(other, sizeof(other), "%s/target", dir);
	fd = open(other, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0 && write(fd, "keep", 4) == 4);
	close(fd);
	CHECK_INT_EQ(symlinkat(other, dfd, ".t"), 0);
	CHECK_INT_EQ(hpn_write_atomic(dfd, ".t", "file", "bye", 3, 0600), 0);
	CHECK_INT_EQ(mode_of(path), 0600);
	fd = open(other, O_RDONLY);
	n = read(fd, buf, sizeof(buf));
	close(fd);
	CHECK_INT_EQ(n, 4);
	CHECK(faccessat(dfd, ".t", F_OK, AT_SYMLINK_NOFOLLOW) < 0);
	/* A failed rename (a directory in the way) leaves no temp file and the name as it was. */
	CHECK_INT_EQ(mkdirat(dfd, "d", 0755), 0);
	CHECK_INT_EQ(mkdirat(dfd, "d/x", 0755), 0);
	CHECK_INT_EQ(hpn_write_atomic(dfd, ".t", "d", "x", 1, 0600), -EISDIR);
	CHECK(faccessat(dfd, ".t", F_OK, AT_SYMLINK_NOFOLLOW) < 0);
	/* A whole file by path, NUL-terminated; too long or missing is an error naming it. */
	CHECK_INT_EQ(hpn_read_file(path, 3, &got, &len, &e1), 0);
	CHECK_INT_EQ(len, 3);
	CHECK_STR_EQ(got, "bye");
	free(got);
	CHECK_INT_EQ(hpn_read_file(path, 2, &got, &len, &e2), -EFBIG);
	CHECK_INT_EQ(e2.code, HPN_E_IO);
	CHECK_STR_HAS(e2.msg, "read ");
	CHECK_STR_HAS(e2.msg, path);
	snprintf(other, sizeof(other), "%s/none", dir);
	CHECK_INT_EQ(hpn_read_file(other, 16, &got, &len, &e3), -ENOENT);
	CHECK_INT_EQ(e3.code, HPN_E_IO);
	CHECK_STR_HAS(e3.msg, "open ");
	CHECK_STR_HAS(e3.msg, other);
	close(dfd);
	umask(old);
	CHECK_INT_EQ(tmpdir_rm(dir), 0);

	/* Fixed values: the hash names state files, so it must never change. */
	CHECK(hpn_hash64("") == 0x14650fb0739d0383ull);
	CHECK(hpn_hash64("a") == 0x44bd8ad473cd9906ull);
	CHECK(hpn_hash64("foobar") == 0x88fad7c0a8ff07f2ull);
}

/* Kernel releases as uname(2) gives them: "<major>.<minor>" and anything after. */
static void test_kernel_version(void)
{
	static const struct {
		const char *release;
		int r;
		unsigned int major, minor;
	} cases[] = {
		{ "7.3.4+deb13-amd64", 0, 7, 3 },
		{ "6.1.0-57-amd64", 0, 6, 1 },
		{ "6.18.44-fc-v1045", 0, 6, 18 },
		{ "7.1", 0, 7, 1 },
		{ "10.0-rc1", 0, 10, 0 },
		{ "5.14.0-427.el9.x86_64", 0, 5, 14 },
		{ "", -EINVAL, 0, 0 },
		{ "7", -EINVAL, 0, 0 },
		{ "7.", -EINVAL, 0, 0 },
		{ "v7.3", -EINVAL, 0, 0 },
		{ "7.x", -EINVAL, 0, 0 },
		{ ".3", -EINVAL, 0, 0 },
		{ "99999999.1", -EINVAL, 0, 0 },
		{ "unknown", -EINVAL, 0, 0 },
	};

	for (size_t i = 0; i < HPN_ARRAY_SIZE(cases); i++) {
		unsigned int major = 1234, minor = 5678;
		int r = hpn_kernel_version(cases[i].release, &major, &minor);

		if (r != cases[i].r)
			fprintf(stderr, "\trelease \"%s\"\n", cases[i].release);
		CHECK_INT_EQ(r, cases[i].r);
		CHECK_INT_EQ(major, r == 0 ? cases[i].major : 1234);
		CHECK_INT_EQ(minor, r == 0 ? cases[i].minor : 5678);
	}
}

int main(void)
{
	test_ifname();
	test_container_id();
	test_path_component();
	test_mac();
	test_pci();
	test_snprintf_strdup();
	test_files();
	test_kernel_version();
	return check_done();
}
