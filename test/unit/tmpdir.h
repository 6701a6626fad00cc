/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_TEST_TMPDIR_H
#define HPN_TEST_TMPDIR_H

/* Scratch directories under /tmp for tests that need files; removed at the end. */

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline int tmpdir_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (flag == FTW_DP)
		return rmdir(path);
	return unlink(path);
}

/* Removes path and everything below it, never following symlinks. */
static inline int tmpdir_rm(const char *path)
{
	return nftw(path, tmpdir_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* mkdtemp("/tmp/hpn-unit-<what>-XXXXXX"); exits the test when /tmp is unusable. */
static inline void tmpdir_make(char *buf, size_t len, const char *what)
{
	snprintf(buf, len, "/tmp/hpn-unit-%s-XXXXXX", what);
	if (!mkdtemp(buf)) {
		perror("mkdtemp");
		exit(2);
	}
}

/* text and a newline into <root>/rel, its directories made; exits the test when it cannot. */
static inline void tmpdir_put(const char *root, const char *rel, const char *text)
{
	char path[PATH_MAX + 128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *c = path + strlen(root) + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			perror(path);
			exit(2);
		}
		*c = '/';
	}
	f = fopen(path, "we");
	if (!f) {
		perror(path);
		exit(2);
	}
	fprintf(f, "%s\n", text);
	fclose(f);
}

#endif
