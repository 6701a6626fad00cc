// SPDX-License-Identifier: Apache-2.0
/*
 * The plugin's event log, <stateDir>/events.log (lib/events.h): one line per
 * CNI command the plugin ran, tailed here with inotify on stateDir, into
 * counts and latency histograms by network, command and result code. At
 * start the whole file is read (what it holds since its last rotation), so
 * a restarted agent starts from there; then every line as it is appended.
 * When the plugin rotates the file (renamed to events.log.1), what is left
 * of the old one is read to its end before the new one is opened.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cnilog.h"
#include "events.h"
#include "exposition.h"
#include "log.h"
#include "loop.h"
#include "util.h"

#define CNILOG_BUCKETS 14
static const double cnilog_buckets[CNILOG_BUCKETS] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
						       1,     2.5,  5,	   10,	 30,  60,   120 };

struct cnilog_series {
	char network[HPN_EVENT_FIELD_MAX];
	char command[8];
	int code;
	uint64_t count;
	double sum;
	uint64_t bucket[CNILOG_BUCKETS]; /* cumulative: count of durations <= cnilog_buckets[i] */
};
#define CNILOG_MAX_SERIES 128
struct cnilog_stats {
	struct cnilog_series v[CNILOG_MAX_SERIES];
	size_t n;
	uint64_t lines, skipped, dropped; /* read; unparsable; no series left for them */
};

struct cnilog {
	struct loop_src ino;
	char dir[PATH_MAX];
	int fd; /* events.log as last opened; -1: none yet */
	struct stat sb;
	char buf[HPN_EVENT_LINE_MAX];
	size_t len;
	bool skipping; /* inside a line too long to be one: dropped to its newline */
	struct cnilog_stats st;
};

static void count(struct cnilog *c, const struct hpn_event *ev)
{
	struct cnilog_series *s = NULL;

	for (size_t i = 0; !s && i < c->st.n; i++)
		if (c->st.v[i].code == ev->code && !strcmp(c->st.v[i].command, ev->command) &&
		    !strcmp(c->st.v[i].network, ev->network))
			s = &c->st.v[i];
	if (!s) {
		if (c->st.n == CNILOG_MAX_SERIES) {
			c->st.dropped++;
			return;
		}
		s = &c->st.v[c->st.n++];
		memset(s, 0, sizeof(*s));
		snprintf(s->network, sizeof(s->network), "%s", ev->network);
		snprintf(s->command, sizeof(s->command), "%s", ev->command);
		s->code = ev->code;
	}
	s->count++;
	s->sum += ev->seconds;
	for (size_t i = 0; i < CNILOG_BUCKETS; i++)
		if (ev->seconds <= cnilog_buckets[i])
			s->bucket[i]++;
}

static void line(struct cnilog *c, const char *p, size_t n)
{
	struct hpn_event ev;

	c->st.lines++;
	if (hpn_event_parse(p, n, &ev) < 0)
		c->st.skipped++;
	else
		count(c, &ev);
}

/* Everything fd has past where we are; a partial last line waits for its end. */
static void drain(struct cnilog *c, int fd)
{
	char chunk[8192];
	ssize_t n;

	while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			char ch = chunk[i];

			if (ch == '\n') {
				if (!c->skipping)
					line(c, c->buf, c->len);
				else
					c->st.skipped++;
				c->len = 0;
				c->skipping = false;
			} else if (c->len + 1 < sizeof(c->buf)) {
				c->buf[c->len++] = ch;
			} else {
				c->skipping = true;
			}
		}
	}
}

/* The file at the path now, when it is another than ours (created, or rotated). */
static void follow(struct cnilog *c)
{
	struct stat sb;
	int fd;

	fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstatat(fd, HPN_EVENTS_FILE, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(sb.st_mode) ||
	    (c->fd >= 0 && sb.st_ino == c->sb.st_ino && sb.st_dev == c->sb.st_dev)) {
		close(fd);
		if (c->fd >= 0)
			drain(c, c->fd);
		return;
	}
	if (c->fd >= 0) {
		/* Rotated: the old file's last lines first. */
		drain(c, c->fd);
		close(c->fd);
		c->len = 0;
		c->skipping = false;
	}
	c->fd = openat(fd, HPN_EVENTS_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	close(fd);
	if (c->fd < 0)
		return;
	if (fstat(c->fd, &c->sb) < 0 || !S_ISREG(c->sb.st_mode)) {
		close(c->fd);
		c->fd = -1;
		return;
	}
	drain(c, c->fd);
}

static void on_inotify(struct loop_src *s)
{
	struct cnilog *c = s->ud;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	/* Which event does not matter: the file at the path decides what is read. */
	while (read(s->fd, buf, sizeof(buf)) > 0)
		;
	follow(c);
}

static int watch(struct cnilog *c, struct loop *l, const char *state_dir)
{
	int fd, r;

	if (hpn_snprintf(c->dir, sizeof(c->dir), "%s", state_dir) < 0)
		return -ENAMETOOLONG;
	/* The plugin makes it at its first ADD; it may not have run yet. */
	if (hpn_mkdir_p(c->dir, 0700) < 0)
		return -errno;
	fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (fd < 0)
		return -errno;
	r = loop_add(l, &c->ino, fd, on_inotify, c);
	if (r < 0)
		return r;
	if (inotify_add_watch(fd, c->dir, IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM) < 0)
		return -errno;
	follow(c);
	hpn_info("CNI events from %s/%s: %llu lines read", c->dir, HPN_EVENTS_FILE,
		 (unsigned long long)c->st.lines);
	return 0;
}

int cnilog_start(struct loop *l, const char *state_dir, struct cnilog **ret)
{
	struct cnilog *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	c->fd = -1;
	c->ino.fd = -1;
	r = watch(c, l, state_dir);
	if (r < 0)
		hpn_warn("the plugin's event log in %s cannot be followed: %s (no CNI command "
			 "metrics)",
			 state_dir, strerror(-r));
	*ret = c;
	return 0;
}

void cnilog_free(struct cnilog *c)
{
	if (!c)
		return;
	loop_close(&c->ino);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

void cnilog_metrics(struct sbuf *b, void *ud)
{
	const struct cnilog_stats *c = &((const struct cnilog *)ud)->st;

	expo_family(
		b, "hpn_rdma_cni_commands_total", "counter",
		"CNI commands the plugin ran (from its event log), by network, command and result "
		"code (0: success, else the CNI error code).");
	for (size_t i = 0; i < c->n; i++) {
		char code[12];

		snprintf(code, sizeof(code), "%d", c->v[i].code);
		expo_sample_u64(b, "hpn_rdma_cni_commands_total",
				(const char *[]){ "network", c->v[i].network, "command",
						  c->v[i].command, "code", code, NULL },
				c->v[i].count);
	}
	expo_family(
		b, "hpn_rdma_cni_command_duration_seconds", "histogram",
		"The plugin's own wall time per CNI command, by network, command and result code.");
	for (size_t i = 0; i < c->n; i++) {
		const struct cnilog_series *s = &c->v[i];
		char code[12], le[32];
		const char *lab[] = { "network", s->network, "command", s->command, "code",
				      code,	 "le",	     le,	NULL };

		snprintf(code, sizeof(code), "%d", s->code);
		for (size_t k = 0; k < CNILOG_BUCKETS; k++) {
			snprintf(le, sizeof(le), "%g", cnilog_buckets[k]);
			expo_sample_u64(b, "hpn_rdma_cni_command_duration_seconds_bucket", lab,
					s->bucket[k]);
		}
		snprintf(le, sizeof(le), "+Inf");
		expo_sample_u64(b, "hpn_rdma_cni_command_duration_seconds_bucket", lab, s->count);
		lab[6] = NULL;
		expo_sample(b, "hpn_rdma_cni_command_duration_seconds_sum", lab, s->sum);
		expo_sample_u64(b, "hpn_rdma_cni_command_duration_seconds_count", lab, s->count);
	}
	expo_counter(
		b, "hpn_rdma_cni_events_skipped_total",
		"Lines of the plugin's event log that were not a record (or had no series left).",
		c->skipped + c->dropped);
}
