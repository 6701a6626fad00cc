/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_FUZZDIR_H
#define HPN_FUZZDIR_H

/*
 * A harness's private directory, for the code under test that reads and
 * writes files: made once per process under $TMPDIR, else /dev/shm (writes
 * fsync), else /tmp, as hpn-fuzz-NAME-XXXXXX, and removed whole at exit.
 * Header-only: each harness is one file beside replay.c or libFuzzer.
 */

#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

static char *fuzz_dir_made;

static inline int fuzz_dir_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static inline void fuzz_dir_cleanup(void)
{
	if (fuzz_dir_made && fuzz_dir_made[0])
		nftw(fuzz_dir_made, fuzz_dir_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Makes dir (len bytes) for harness name; its removal runs at exit, after what is registered later. */
static inline void fuzz_dir(char *dir, size_t len, const char *name)
{
	const char *tmp = getenv("TMPDIR");
	struct stat sb;

	if (!tmp || !*tmp)
		tmp = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) &&
				      access("/dev/shm", W_OK) == 0
			      ? "/dev/shm"
			      : "/tmp";
	FUZZ_ASSERT((size_t)snprintf(dir, len, "%s/hpn-fuzz-%s-XXXXXX", tmp, name) < len);
	FUZZ_ASSERT(mkdtemp(dir));
	fuzz_dir_made = dir;
	atexit(fuzz_dir_cleanup);
}

/* path holds exactly data[0..size), mode mode whatever the umask. */
static inline void fuzz_put(const char *path, const void *data, size_t size, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	size_t off = 0;

	FUZZ_ASSERT(fd >= 0 && fchmod(fd, mode) == 0);
	while (off < size) {
		ssize_t n = write(fd, (const char *)data + off, size - off);

		FUZZ_ASSERT(n > 0);
		off += (size_t)n;
	}
	close(fd);
}

#endif
