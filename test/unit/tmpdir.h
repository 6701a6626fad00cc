/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_TEST_TMPDIR_H
#define HPN_TEST_TMPDIR_H

/* Scratch directories under /tmp for tests that need files; removed at the end. */

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
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

#endif
