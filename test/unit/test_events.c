// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/events.c: the plugin's event log, its lines, its bound,
 * and appends from many processes at once, in a scratch stateDir under /tmp.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "events.h"
#include "tmpdir.h"

static char tmp[64];

static struct hpn_event sample(void)
{
	struct hpn_event ev = { .code = 0, .seconds = 0.012345, .time = 1718000000.25, .pid = 42 };

	strcpy(ev.command, "ADD");
	strcpy(ev.network, "hpn-net");
	strcpy(ev.container_id, "c0ffee");
	strcpy(ev.ifname, "eth0");
	return ev;
}

static void test_format_parse(void)
{
	struct hpn_event ev = sample(), got;
	char line[HPN_EVENT_LINE_MAX];
	int n = hpn_event_format(&ev, line, sizeof(line));

	CHECK(n > 0);
	CHECK(line[n - 1] == '\n');
	CHECK_STR_HAS(line, "\"command\":\"ADD\"");
	CHECK_INT_EQ(hpn_event_parse(line, (size_t)n - 1, &got), 0);
	CHECK_STR_EQ(got.command, "ADD");
	CHECK_STR_EQ(got.network, "hpn-net");
	CHECK_STR_EQ(got.container_id, "c0ffee");
	CHECK_STR_EQ(got.ifname, "eth0");
	CHECK_INT_EQ(got.code, 0);
	CHECK(got.seconds > 0.0123 && got.seconds < 0.0124);
	CHECK(got.time > 1718000000.2 && got.time < 1718000000.3);
	CHECK_INT_EQ(got.pid, 42);

	/* What a string holds is escaped, and comes back as it was. */
	strcpy(ev.network, "a\"b\\c\nd");
	ev.code = 107;
	strcpy(ev.command, "CHECK");
	n = hpn_event_format(&ev, line, sizeof(line));
	CHECK(n > 0);
	CHECK(!memchr(line, '\n', (size_t)n - 1)); /* one line, whatever the fields hold */
	CHECK_INT_EQ(hpn_event_parse(line, (size_t)n - 1, &got), 0);
	CHECK_STR_EQ(got.network, "a\"b\\c\nd");
	CHECK_INT_EQ(got.code, 107);
	CHECK_STR_EQ(got.command, "CHECK");

	/* Too small a buffer: refused, not cut. */
	CHECK_INT_EQ(hpn_event_format(&ev, line, 40), -ENOSPC);

	/* Long fields fit a line: every field has its bound. */
	memset(ev.network, 'n', sizeof(ev.network) - 1);
	ev.network[sizeof(ev.network) - 1] = '\0';
	memset(ev.container_id, 'c', sizeof(ev.container_id) - 1);
	ev.container_id[sizeof(ev.container_id) - 1] = '\0';
	n = hpn_event_format(&ev, line, sizeof(line));
	CHECK(n > 0 && n < HPN_EVENT_LINE_MAX);
	CHECK_INT_EQ(hpn_event_parse(line, (size_t)n - 1, &got), 0);
	CHECK_INT_EQ(strlen(got.container_id), HPN_EVENT_FIELD_MAX - 1);
}

static void bad(const char *line)
{
	struct hpn_event got;

	if (hpn_event_parse(line, strlen(line), &got) != -EINVAL)
		fprintf(stderr, "\taccepted: %s\n", line);
	CHECK_INT_EQ(hpn_event_parse(line, strlen(line), &got), -EINVAL);
	CHECK_STR_EQ(got.command, "");
}

static void test_parse_refuses(void)
{
	struct hpn_event got;
	const char *ok = "{\"v\":1,\"command\":\"DEL\",\"code\":11,\"seconds\":0.5}";

	/* The minimum: version, a known command, a code, a duration. */
	CHECK_INT_EQ(hpn_event_parse(ok, strlen(ok), &got), 0);
	CHECK_STR_EQ(got.command, "DEL");
	CHECK_INT_EQ(got.code, 11);
	bad("");
	bad("not json");
	bad("[]");
	bad("{\"v\":2,\"command\":\"DEL\",\"code\":11,\"seconds\":0.5}");
	bad("{\"command\":\"DEL\",\"code\":11,\"seconds\":0.5}");
	bad("{\"v\":1,\"command\":\"VERSION\",\"code\":0,\"seconds\":0.5}");
	bad("{\"v\":1,\"command\":\"add\",\"code\":0,\"seconds\":0.5}");
	bad("{\"v\":1,\"command\":\"DEL\",\"code\":\"11\",\"seconds\":0.5}");
	bad("{\"v\":1,\"command\":\"DEL\",\"code\":-1,\"seconds\":0.5}");
	bad("{\"v\":1,\"command\":\"DEL\",\"code\":11,\"seconds\":-0.5}");
	bad("{\"v\":1,\"command\":\"DEL\",\"code\":11}");
	bad("{\"v\":1,\"command\":\"DEL\",\"code\":11,\"seconds\":1e300}");
	/* Longer than a line may be: not even parsed. */
	{
		char big[HPN_EVENT_LINE_MAX + 64];

		snprintf(big, sizeof(big),
			 "{\"v\":1,\"command\":\"DEL\",\"code\":0,\"seconds\":0,"
			 "\"network\":\"%0*d\"}",
			 HPN_EVENT_LINE_MAX, 0);
		bad(big);
	}
}

static size_t count_lines(const char *path, size_t *good)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0, n = 0;
	ssize_t len;

	*good = 0;
	if (!f)
		return 0;
	while ((len = getline(&line, &cap, f)) > 0) {
		struct hpn_event ev;

		n++;
		if (line[len - 1] == '\n' && hpn_event_parse(line, (size_t)len - 1, &ev) == 0)
			(*good)++;
	}
	free(line);
	fclose(f);
	return n;
}

static void test_append(void)
{
	char state[PATH_MAX], path[PATH_MAX + 32], old[PATH_MAX + 32];
	struct hpn_event ev = sample();
	struct stat sb;
	size_t good;
	int fd;

	snprintf(state, sizeof(state), "%s/state", tmp);
	/* No stateDir: nothing is created (STATUS makes nothing). */
	CHECK_INT_EQ(hpn_event_append(state, &ev), -ENOENT);
	CHECK(access(state, F_OK) < 0);
	CHECK_INT_EQ(mkdir(state, 0700), 0);
	snprintf(path, sizeof(path), "%s/%s", state, HPN_EVENTS_FILE);
	snprintf(old, sizeof(old), "%s/%s", state, HPN_EVENTS_ROTATED);
	CHECK_INT_EQ(hpn_event_append(state, &ev), 0);
	CHECK_INT_EQ(hpn_event_append(state, &ev), 0);
	CHECK_INT_EQ(stat(path, &sb), 0);
	CHECK_INT_EQ(sb.st_mode & 0777, 0600);
	CHECK_INT_EQ(count_lines(path, &good), 2);
	CHECK_INT_EQ(good, 2);

	/* Full: the next append rotates it, and the new file starts with that line. */
	CHECK_INT_EQ(truncate(path, HPN_EVENTS_MAX), 0);
	CHECK_INT_EQ(hpn_event_append(state, &ev), 0);
	CHECK_INT_EQ(stat(old, &sb), 0);
	CHECK_INT_EQ(sb.st_size, HPN_EVENTS_MAX);
	CHECK_INT_EQ(count_lines(path, &good), 1);
	CHECK_INT_EQ(good, 1);
	/* Again: the older rotated file is replaced, so two files at most. */
	CHECK_INT_EQ(truncate(path, HPN_EVENTS_MAX - 10), 0);
	CHECK_INT_EQ(hpn_event_append(state, &ev), 0);
	CHECK_INT_EQ(stat(old, &sb), 0);
	CHECK_INT_EQ(sb.st_size, HPN_EVENTS_MAX - 10);

	/* Not a regular file there (a FIFO, a symlink): nothing is written, nothing hangs. */
	CHECK_INT_EQ(unlink(path), 0);
	CHECK_INT_EQ(mkfifo(path, 0600), 0);
	CHECK(hpn_event_append(state, &ev) < 0);
	CHECK_INT_EQ(unlink(path), 0);
	CHECK_INT_EQ(symlink("/dev/null", path), 0);
	CHECK(hpn_event_append(state, &ev) < 0);
	CHECK_INT_EQ(unlink(path), 0);

	/* Many processes at once: every line whole, none lost. */
	for (int p = 0; p < 8; p++) {
		pid_t pid = fork();

		if (pid == 0) {
			struct hpn_event mine = sample();

			mine.pid = p;
			for (int i = 0; i < 200; i++)
				if (hpn_event_append(state, &mine) < 0)
					_exit(1);
			_exit(0);
		}
	}
	for (int p = 0; p < 8; p++) {
		int status = 0;

		wait(&status);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	CHECK_INT_EQ(count_lines(path, &good), 1600);
	CHECK_INT_EQ(good, 1600);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
}

int main(void)
{
	tmpdir_make(tmp, sizeof(tmp), "events");
	test_format_parse();
	test_parse_refuses();
	test_append();
	if (tmpdir_rm(tmp) < 0)
		perror("remove scratch directory");
	return check_done();
}
