// SPDX-License-Identifier: Apache-2.0
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static struct {
	int fd;
	enum hpn_log_level file_level;
	enum hpn_log_level stderr_level;
	char command[16];
	char container[80];
} logger = { .fd = -1, .file_level = HPN_LOG_INFO, .stderr_level = HPN_LOG_WARN };

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void hpn_log_init(const char *command, const char *container_id)
{
	snprintf(logger.command, sizeof(logger.command), "%s", command ? command : "-");
	snprintf(logger.container, sizeof(logger.container), "%s",
		 container_id && *container_id ? container_id : "-");
	/* HPN_DEBUG=1 in the environment shows everything on stderr, for cnitool users. */
	if (getenv("HPN_DEBUG"))
		logger.stderr_level = HPN_LOG_DEBUG;
}

void hpn_log_stderr(enum hpn_log_level level)
{
	if (!getenv("HPN_DEBUG"))
		logger.stderr_level = level;
}

int hpn_log_level_parse(const char *s, enum hpn_log_level *ret)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (!strcmp(s, level_names[i])) {
			*ret = (enum hpn_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

int hpn_log_open(const char *path, enum hpn_log_level level)
{
	/* O_NONBLOCK: a FIFO as logFile fails (ENXIO) instead of hanging the plugin. */
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
		      0640);

	if (fd < 0)
		return -errno;
	hpn_log_close();
	logger.fd = fd;
	logger.file_level = level;
	return 0;
}

void hpn_log_close(void)
{
	if (logger.fd >= 0)
		close(logger.fd);
	logger.fd = -1;
}

void hpn_log(enum hpn_log_level level, const char *fmt, ...)
{
	char msg[1024], line[1280], ts[40];
	struct timeval tv;
	struct tm tm;
	va_list ap;
	int n;

	if (level > logger.stderr_level && (logger.fd < 0 || level > logger.file_level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	if (level <= logger.stderr_level)
		fprintf(stderr, "hpn-rdma: %s: %s\n", level_names[level], msg);
	if (logger.fd < 0 || level > logger.file_level)
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	n = snprintf(line, sizeof(line), "%s.%06ldZ hpn-rdma[%d] %s %s %s: %s\n", ts,
		     (long)tv.tv_usec, (int)getpid(), logger.command, logger.container,
		     level_names[level], msg);
	if (n > (int)sizeof(line) - 1) {
		n = (int)sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	/* One write() per line: O_APPEND keeps concurrent plugin runs from interleaving. */
	if (write(logger.fd, line, (size_t)n) < 0)
		return;
}
