// SPDX-License-Identifier: Apache-2.0
/*
 * Replays inputs through a fuzz harness without libFuzzer, so the seed corpus
 * and every crash turned regression test run in each normal build (gcc, ASan
 * or release): replay DIR|FILE... feeds each regular file (sorted; README* and
 * dot files skipped) to LLVMFuzzerTestOneInput, after LLVMFuzzerInitialize when
 * the harness has one. A broken invariant aborts; ASan reports what it sees.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

/* Defined only by harnesses that need per-process setup. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The file's bytes in a buffer of exactly that size, so ASan sees overreads. */
static int read_file(const char *path, uint8_t **ret, size_t *ret_len)
{
	struct stat sb;
	uint8_t *buf;
	size_t off = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0 || sb.st_size > (1 << 24)) {
		close(fd);
		return -EFBIG;
	}
	buf = malloc(sb.st_size ? (size_t)sb.st_size : 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (off < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + off, (size_t)sb.st_size - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(buf);
			close(fd);
			return n < 0 ? -errno : -EIO;
		}
		off += (size_t)n;
	}
	close(fd);
	*ret = buf;
	*ret_len = off;
	return 0;
}

static int run_file(const char *path)
{
	uint8_t *data = NULL;
	size_t len = 0;
	int r = read_file(path, &data, &len);

	if (r < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(-r));
		return r;
	}
	/* Named first, so a crash report says which input it was. */
	fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
	LLVMFuzzerTestOneInput(data, len);
	free(data);
	return 0;
}

static int skip(const char *name)
{
	return name[0] == '.' || !strncmp(name, "README", 6);
}

/* Returns the number of inputs run, or -errno. */
static int run_path(const char *path)
{
	struct dirent **ents;
	struct stat sb;
	int n, count = 0, r = 0;

	if (stat(path, &sb) < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(sb.st_mode))
		return run_file(path) < 0 ? -EIO : 1;
	n = scandir(path, &ents, NULL, alphasort);
	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	for (int i = 0; i < n; i++) {
		char file[4096];

		if (!skip(ents[i]->d_name) &&
		    snprintf(file, sizeof(file), "%s/%s", path, ents[i]->d_name) <
			    (int)sizeof(file) &&
		    stat(file, &sb) == 0 && S_ISREG(sb.st_mode)) {
			if (run_file(file) < 0)
				r = -EIO;
			else
				count++;
		}
		free(ents[i]);
	}
	free(ents);
	return r < 0 ? r : count;
}

int main(int argc, char **argv)
{
	int total = 0, failed = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
		return 2;
	}
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		int n = run_path(argv[i]);

		if (n < 0)
			failed = 1;
		else
			total += n;
		printf("replayed %d inputs from %s\n", n < 0 ? 0 : n, argv[i]);
	}
	/* Replaying nothing proves nothing: a corpus that went missing is a failure. */
	if (!total) {
		fprintf(stderr, "replay: no inputs found\n");
		return 1;
	}
	printf("replayed %d inputs, no invariant broken\n", total);
	return failed ? 1 : 0;
}
