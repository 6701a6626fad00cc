// SPDX-License-Identifier: Apache-2.0
#include "events.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static const char *const commands[] = { "ADD", "DEL", "CHECK", "STATUS", "GC" };

/* s as the inside of a JSON string, cut to max bytes of input; false when out of room. */
static bool put_str(char **p, const char *end, const char *s, size_t max)
{
	for (size_t i = 0; i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		int n;

		if (c == '"' || c == '\\')
			n = snprintf(*p, (size_t)(end - *p), "\\%c", c);
		else if (c < 0x20)
			n = snprintf(*p, (size_t)(end - *p), "\\u%04x", c);
		else
			n = snprintf(*p, (size_t)(end - *p), "%c", c);
		if (n < 0 || n >= end - *p)
			return false;
		*p += n;
	}
	return true;
}

static bool put_fmt(char **p, const char *end, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static bool put_fmt(char **p, const char *end, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(*p, (size_t)(end - *p), fmt, ap);
	va_end(ap);
	if (n < 0 || n >= end - *p)
		return false;
	*p += n;
	return true;
}

int hpn_event_format(const struct hpn_event *ev, char *buf, size_t len)
{
	char *p = buf, *end = buf + len;
	bool ok;

	ok = put_fmt(&p, end, "{\"v\":1,\"time\":%.3f,\"command\":\"", ev->time) &&
	     put_str(&p, end, ev->command, sizeof(ev->command)) &&
	     put_fmt(&p, end, "\",\"network\":\"") &&
	     put_str(&p, end, ev->network, HPN_EVENT_FIELD_MAX - 1) &&
	     put_fmt(&p, end, "\",\"containerId\":\"") &&
	     put_str(&p, end, ev->container_id, HPN_EVENT_FIELD_MAX - 1) &&
	     put_fmt(&p, end, "\",\"ifName\":\"") &&
	     put_str(&p, end, ev->ifname, sizeof(ev->ifname) - 1) &&
	     put_fmt(&p, end, "\",\"code\":%d,\"seconds\":%.6f,\"pid\":%d}\n", ev->code,
		     ev->seconds, ev->pid);
	return ok ? (int)(p - buf) : -ENOSPC;
}

static int open_log(const char *path)
{
	/* O_NONBLOCK: a FIFO planted as the log fails (ENXIO) instead of hanging the plugin. */
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
		    0600);
}

int hpn_event_append(const char *state_dir, const struct hpn_event *ev)
{
	_cleanup_close_ int fd = -1;
	char line[HPN_EVENT_LINE_MAX], path[PATH_MAX], old[PATH_MAX];
	struct stat sb, now;
	int n = hpn_event_format(ev, line, sizeof(line));

	if (n < 0)
		return n;
	/*
	 * By its own path, the one open of the log (no descriptor of stateDir):
	 * never created here, as STATUS creates nothing and ADD made stateDir.
	 */
	if (hpn_snprintf(path, sizeof(path), "%s/" HPN_EVENTS_FILE, state_dir) < 0 ||
	    hpn_snprintf(old, sizeof(old), "%s/" HPN_EVENTS_ROTATED, state_dir) < 0)
		return -ENAMETOOLONG;
	fd = open_log(path);
	if (fd < 0 || fstat(fd, &sb) < 0)
		return -errno;
	if (!S_ISREG(sb.st_mode))
		return -EINVAL;
	if (sb.st_size + n > (off_t)HPN_EVENTS_MAX) {
		/*
		 * Rotate, unless another run did since we opened it (the name is a
		 * newer file then): each run that finds it full renames only the
		 * file it found, so two of them never rotate twice.
		 */
		if (lstat(path, &now) == 0 && now.st_ino == sb.st_ino && now.st_dev == sb.st_dev)
			rename(path, old);
		close(fd);
		fd = open_log(path);
		if (fd < 0 || fstat(fd, &sb) < 0)
			return -errno;
		if (!S_ISREG(sb.st_mode))
			return -EINVAL;
	}
	/* One write: O_APPEND places it whole after every other run's. */
	if (write(fd, line, (size_t)n) != n)
		return -EIO;
	return 0;
}

static bool json_string(const cJSON *o, const char *k, char *out, size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!cJSON_IsString(v))
		return false;
	snprintf(out, len, "%s", v->valuestring);
	return true;
}

int hpn_event_parse(const char *line, size_t len, struct hpn_event *ev)
{
	cJSON *o = len < HPN_EVENT_LINE_MAX ? hpn_json_parse(line, len) : NULL;
	const cJSON *v, *code, *secs, *t, *pid;
	bool known = false;
	int r = -EINVAL;

	memset(ev, 0, sizeof(*ev));
	if (!cJSON_IsObject(o))
		goto out;
	v = cJSON_GetObjectItemCaseSensitive(o, "v");
	code = cJSON_GetObjectItemCaseSensitive(o, "code");
	secs = cJSON_GetObjectItemCaseSensitive(o, "seconds");
	t = cJSON_GetObjectItemCaseSensitive(o, "time");
	pid = cJSON_GetObjectItemCaseSensitive(o, "pid");
	if (!cJSON_IsNumber(v) || v->valuedouble != 1 || !cJSON_IsNumber(code) ||
	    code->valuedouble < 0 || code->valuedouble > 9999 || !cJSON_IsNumber(secs) ||
	    !isfinite(secs->valuedouble) || secs->valuedouble < 0 || secs->valuedouble > 1e6 ||
	    !json_string(o, "command", ev->command, sizeof(ev->command)))
		goto out;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		known |= !strcmp(ev->command, commands[i]);
	if (!known)
		goto out;
	json_string(o, "network", ev->network, sizeof(ev->network));
	json_string(o, "containerId", ev->container_id, sizeof(ev->container_id));
	json_string(o, "ifName", ev->ifname, sizeof(ev->ifname));
	ev->code = code->valueint;
	ev->seconds = secs->valuedouble;
	ev->time = cJSON_IsNumber(t) && isfinite(t->valuedouble) ? t->valuedouble : 0;
	ev->pid = cJSON_IsNumber(pid) && pid->valuedouble >= 0 && pid->valuedouble < 1e7
			  ? pid->valueint
			  : 0;
	r = 0;
out:
	cJSON_Delete(o);
	if (r < 0)
		memset(ev, 0, sizeof(*ev));
	return r;
}
