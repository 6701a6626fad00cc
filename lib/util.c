// SPDX-License-Identifier: Apache-2.0
#include "util.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Kernel rules (dev_valid_name): 1..15 bytes, not "." or "..", no '/', ':' or space. */
bool hpn_valid_ifname(const char *s)
{
	size_t n;

	if (!s)
		return false;
	n = strlen(s);
	if (n == 0 || n > 15 || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (*s == '/' || *s == ':' || isspace((unsigned char)*s) ||
		    !isprint((unsigned char)*s))
			return false;
	return true;
}

/* CNI spec: container ID matches ^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$ . */
bool hpn_valid_container_id(const char *s)
{
	if (!s || !isalnum((unsigned char)*s))
		return false;
	if (strlen(s) > 1024)
		return false;
	for (s++; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '.' && *s != '-')
			return false;
	return true;
}

/* A single file name we create: [A-Za-z0-9_.-], not "." or "..", at most 200 bytes. */
bool hpn_valid_path_component(const char *s)
{
	size_t n;

	if (!s)
		return false;
	n = strlen(s);
	if (n == 0 || n > 200 || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '.' && *s != '-')
			return false;
	return true;
}

/* A plugin executable name looked up in CNI_PATH: a path component, not hidden. */
bool hpn_valid_plugin_name(const char *s)
{
	return hpn_valid_path_component(s) && s[0] != '.';
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int hpn_mac_parse(const char *s, uint8_t mac[HPN_MAC_LEN])
{
	uint8_t tmp[HPN_MAC_LEN];

	if (!s || strlen(s) != 17)
		return -EINVAL;
	for (size_t i = 0; i < HPN_MAC_LEN; i++) {
		int hi = hexval(s[3 * i]), lo = hexval(s[3 * i + 1]);

		if (hi < 0 || lo < 0 || (i < 5 && s[3 * i + 2] != ':'))
			return -EINVAL;
		tmp[i] = (uint8_t)(hi << 4 | lo);
	}
	memcpy(mac, tmp, HPN_MAC_LEN);
	return 0;
}

void hpn_mac_format(const uint8_t mac[HPN_MAC_LEN], char out[HPN_MAC_STR])
{
	snprintf(out, HPN_MAC_STR, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
		 mac[4], mac[5]);
}

bool hpn_mac_is_zero(const uint8_t mac[HPN_MAC_LEN])
{
	for (int i = 0; i < HPN_MAC_LEN; i++)
		if (mac[i])
			return false;
	return true;
}

static bool hexn(const char *s, int n)
{
	for (int i = 0; i < n; i++)
		if (hexval(s[i]) < 0)
			return false;
	return true;
}

static const char *const dist_names[] = { "PIX", "PXB", "PHB", "SYS", "unknown" };

const char *hpn_gpu_dist_name(enum hpn_gpu_dist d)
{
	return (unsigned)d < HPN_ARRAY_SIZE(dist_names) ? dist_names[d] : "unknown";
}

int hpn_gpu_dist_parse(const char *s)
{
	for (size_t i = 0; s && i < HPN_ARRAY_SIZE(dist_names); i++)
		if (!strcmp(s, dist_names[i]))
			return (int)i;
	return -1;
}

bool hpn_gpu_id_valid(const char *id)
{
	size_t n = strnlen(id, HPN_GPU_ID_MAX);

	if (n == 0 || n >= HPN_GPU_ID_MAX)
		return false;
	for (const char *c = id; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr("_.:@/-", *c))
			return false;
	return true;
}

int hpn_pci_normalise(const char *s, char out[HPN_PCI_STR])
{
	char buf[HPN_PCI_STR];
	size_t n;

	if (!s)
		return -EINVAL;
	n = strlen(s);
	if (n == 7)
		snprintf(buf, sizeof(buf), "0000:%s", s);
	else if (n == 12)
		snprintf(buf, sizeof(buf), "%s", s);
	else
		return -EINVAL;
	/* DDDD:BB:DD.F with F an octal function number 0-7 */
	if (!hexn(buf, 4) || buf[4] != ':' || !hexn(buf + 5, 2) || buf[7] != ':' ||
	    !hexn(buf + 8, 2) || buf[10] != '.' || buf[11] < '0' || buf[11] > '7')
		return -EINVAL;
	for (char *p = buf; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	memcpy(out, buf, HPN_PCI_STR);
	return 0;
}

int hpn_snprintf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

char *hpn_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

/*
 * Is the existing directory at path ours to tighten? Only by its own name
 * (the directories the project names all begin with "hpn-rdma":
 * /run/hpn-rdma, /etc/cni/net.d/hpn-rdma.d, /var/lib/cni/hpn-rdma,
 * /opt/hpn-rdma), as a directory itself (a symlink of that name is not
 * followed), owned by our effective uid, and without the sticky bit (a
 * shared directory). A path a user pointed elsewhere (/tmp, /run, a socket
 * directory of their own) is never ours: we would take it from whoever
 * shares it. Then its mode loses the bits mode lacks and gains none.
 */
static int tighten_ours(const char *path, mode_t mode)
{
	_cleanup_close_ int fd = -1;
	size_t n = strlen(path);
	const char *base;
	struct stat st;

	while (n > 1 && path[n - 1] == '/')
		n--;
	for (base = path + n; base > path && base[-1] != '/'; base--)
		;
	if ((size_t)(path + n - base) < strlen("hpn-rdma") || strncmp(base, "hpn-rdma", 8))
		return 0;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* A symlink (ELOOP), not a directory, or one we cannot open: not ours. */
	if (fd < 0 || fstat(fd, &st) < 0)
		return 0;
	if (st.st_uid != geteuid() || (st.st_mode & S_ISVTX) || !(st.st_mode & 07777 & ~mode))
		return 0;
	return fchmod(fd, st.st_mode & 07777 & mode) < 0 ? -errno : 0;
}

int hpn_mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	int r = hpn_snprintf(buf, sizeof(buf), "%s", path);

	if (r < 0)
		return r;
	/* Mostly it is there: one syscall, not one per component. */
	if (mkdir(buf, mode) == 0)
		return chmod(buf, mode) < 0 ? -errno : 0;
	if (errno != ENOENT)
		return errno == EEXIST ? tighten_ours(buf, mode) : -errno;
	for (char *p = buf + 1;; p++) {
		bool last = !*p;
		mode_t m = last ? mode : 0755;

		if (*p != '/' && !last)
			continue;
		*p = '\0';
		if (mkdir(buf, m) == 0) {
			if (chmod(buf, m) < 0)
				return -errno;
		} else if (errno != EEXIST) {
			return -errno;
		} else if (last) {
			return tighten_ours(buf, mode);
		}
		if (last)
			return 0;
		*p = '/';
	}
}

int hpn_write_all(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t n = write(fd, data, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * fd, open for writing on the temp file dfd/tmp: data, exactly mode,
 * fsync()ed when durable, closed, renamed over dfd/name. Closed before the
 * rename: a file open for writing cannot be exec()ed (ETXTBSY), and a runtime
 * may exec a plugin as soon as it has its name. On error tmp is gone.
 */
static int tmp_finish(int fd, int dfd, const char *tmp, const char *name, const char *data,
		      size_t len, mode_t mode, bool durable)
{
	int r = hpn_write_all(fd, data, len);

	if (r == 0 && fchmod(fd, mode) < 0)
		r = -errno;
	if (r == 0 && durable && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
		r = -errno;
	if (r < 0)
		(void)unlinkat(dfd, tmp, 0);
	return r;
}

int hpn_write_atomic(int dfd, const char *tmp, const char *name, const char *data, size_t len,
		     mode_t mode)
{
	int fd;

	(void)unlinkat(dfd, tmp, 0);
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	/* No fsync: see hpn_write_atomic's callers on what a power loss leaves. */
	return tmp_finish(fd, dfd, tmp, name, data, len, mode, false);
}

/* Does dfd/name (not a symlink) hold exactly data with exactly mode? */
static bool same_file(int dfd, const char *name, const char *data, size_t len, mode_t mode)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_free_ char *old = NULL;
	size_t old_len;
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 07777) != mode ||
	    (size_t)st.st_size != len)
		return false;
	if (hpn_read_all(fd, len, &old, &old_len) < 0 || old_len != len)
		return false;
	return !memcmp(old, data, len);
}

int hpn_install_file(int dfd, const char *name, const char *data, size_t len, mode_t mode,
		     struct hpn_err *err)
{
	char tmp[NAME_MAX + 1];
	int fd = -1;
	int r;

	if (!hpn_valid_path_component(name) || strlen(name) > NAME_MAX - 12)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "\"%s\" is not a file name",
				   name);
	if (same_file(dfd, name, data, len, mode))
		return 0;
	for (int i = 0;; i++) {
		snprintf(tmp, sizeof(tmp), ".%s.hpn-%06x", name,
			 (unsigned)((getpid() * 2654435761u + i * 40503u) & 0xffffff));
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST || i >= 100)
			break;
	}
	if (fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "create %s beside %s: %s", tmp, name,
				   strerror(errno));
	/* The runtime must never exec or load a torn file, not even after a power loss. */
	r = tmp_finish(fd, dfd, tmp, name, data, len, mode, true);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, -r, "install %s: %s", name, strerror(-r));
	fsync(dfd);
	return 1;
}

long long hpn_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double hpn_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t hpn_hash64(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

int hpn_read_all(int fd, size_t max, char **ret_buf, size_t *ret_len)
{
	/* Room for max bytes, one more to notice an overflow, and the NUL. */
	size_t cap = max + 2 < 4096 ? max + 2 : 4096, len = 0;
	char *buf = malloc(cap), *nb;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (len + 1 == cap) {
			cap = cap * 2 < max + 2 ? cap * 2 : max + 2;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			free(buf);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max) {
			free(buf);
			return -EFBIG;
		}
	}
	buf[len] = '\0';
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

int hpn_read_file(const char *path, size_t max, char **ret, size_t *ret_len, struct hpn_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	int r;

	if (fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open %s: %s", path, strerror(errno));
	r = hpn_read_all(fd, max, ret, ret_len);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, -r, "read %s: %s", path, strerror(-r));
	return 0;
}

int hpn_json_str(const void *obj, const char *key, const char *prefix, int code, size_t max_len,
		 char **ret, struct hpn_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v))
		return hpn_err_set(err, code, EINVAL, "%s%s must be a string", prefix, key);
	if (max_len && strlen(v->valuestring) > max_len)
		return hpn_err_set(err, code, ENAMETOOLONG, "%s%s is longer than %zu bytes", prefix,
				   key, max_len);
	*ret = strdup(v->valuestring);
	return *ret ? 0 : -ENOMEM;
}

int hpn_json_int(const void *obj, const char *key, const char *prefix, int code, int min, int max,
		 int *ret, bool *present, struct hpn_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (present)
		*present = false;
	if (!v || cJSON_IsNull(v))
		return 0;
	/* Range first: converting an out-of-range double is undefined. */
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= min && v->valuedouble <= max) ||
	    v->valuedouble != (double)(long long)v->valuedouble)
		return hpn_err_set(err, code, EINVAL, "%s%s must be an integer in [%d, %d]", prefix,
				   key, min, max);
	*ret = (int)v->valuedouble;
	if (present)
		*present = true;
	return 0;
}

int hpn_json_bool(const void *obj, const char *key, const char *prefix, int code, bool *ret,
		  struct hpn_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsBool(v))
		return hpn_err_set(err, code, EINVAL, "%s%s must be true or false", prefix, key);
	*ret = cJSON_IsTrue(v);
	return 0;
}

bool hpn_json_has_nul(const char *buf, size_t len)
{
	for (size_t i = 0; i + 6 <= len; i++) {
		size_t bs = 0;

		if (buf[i] != '\\' || buf[i + 1] != 'u' || memcmp(buf + i + 2, "0000", 4))
			continue;
		/* Escaped only if the backslash itself is not: count the run before it. */
		while (bs < i && buf[i - 1 - bs] == '\\')
			bs++;
		if (bs % 2 == 0)
			return true;
	}
	return false;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len = s[0] < 0x80		    ? 1
		     : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
		     : s[0] >= 0xe0 && s[0] <= 0xef ? 3
		     : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
						    : 0;

	if (!len || len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

void hpn_utf8_sanitize(char *dst, const char *src, size_t n)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t in = strlen(src), i = 0, o = 0;

	while (i < in && o + 1 < n) {
		size_t l = utf8_len(s + i, in - i);

		if (!l || o + l >= n) {
			dst[o++] = '?';
			i += l ? l : 1;
			continue;
		}
		memcpy(dst + o, s + i, l);
		o += l;
		i += l;
	}
	dst[o] = '\0';
}

void *hpn_json_parse(const char *buf, size_t len)
{
	const char *end = NULL;
	cJSON *root;

	/* cJSON stops after the first value; anything but blanks after it is an error. */
	root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
	if (!root)
		return NULL;
	for (; end && end < buf + len; end++) {
		if (*end != ' ' && *end != '\t' && *end != '\n' && *end != '\r') {
			cJSON_Delete(root);
			return NULL;
		}
	}
	return root;
}

int hpn_proc_start(int pid, unsigned long long *ret)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int fd = -1;
	char path[64];
	const char *p;
	size_t len;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = hpn_read_all(fd, 4096, &buf, &len);
	if (r < 0 || !buf)
		return r < 0 ? r : -EIO;
	/* Field 2 (comm) may hold spaces and parentheses: count from the last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return -EINVAL;
	/* The space after ")" starts field 3 (state); find the one before field 22 (starttime). */
	for (int field = 3; field <= 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EINVAL;
	}
	errno = 0;
	*ret = strtoull(p + 1, NULL, 10);
	return errno ? -errno : 0;
}

const char *hpn_boot_id(void)
{
	static char id[40];
	static int state; /* 0 unread, 1 read, -1 unreadable */

	if (!state) {
		_cleanup_close_ int fd =
			open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, id, sizeof(id) - 1) : -1;

		/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx\n" */
		while (n > 0 && (id[n - 1] == '\n' || id[n - 1] == ' '))
			n--;
		id[n > 0 ? n : 0] = '\0';
		state = n >= 32 ? 1 : -1;
	}
	return state > 0 ? id : NULL;
}

int hpn_boot_time(long long *ret)
{
	static long long btime = -1;

	if (btime < 0) {
		_cleanup_close_ int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
		_cleanup_free_ char *buf = NULL;
		const char *p;
		char *end = NULL;
		size_t len;
		int r;

		if (fd < 0)
			return -errno;
		r = hpn_read_all(fd, 1u << 20, &buf, &len);
		if (r < 0)
			return r;
		p = strstr(buf, "\nbtime ");
		errno = 0;
		btime = p ? strtoll(p + 7, &end, 10) : -1;
		if (!p || errno || end == p + 7 || (*end != '\n' && *end) || btime < 0) {
			btime = -1;
			return -EINVAL;
		}
	}
	*ret = btime;
	return 0;
}

int hpn_kernel_version(const char *release, unsigned int *major, unsigned int *minor)
{
	unsigned long v[2];
	const char *p = release;
	char *end;

	for (int i = 0; i < 2; i++) {
		if (!p || *p < '0' || *p > '9')
			return -EINVAL;
		errno = 0;
		v[i] = strtoul(p, &end, 10);
		if (errno || v[i] > 65535 || (i == 0 && *end != '.'))
			return -EINVAL;
		p = end + 1;
	}
	*major = (unsigned int)v[0];
	*minor = (unsigned int)v[1];
	return 0;
}

bool hpn_proc_alive(int pid, unsigned long long start)
{
	unsigned long long now = 0;

	if (pid <= 0)
		return false;
	/* Same pid, same start time: the same process, not a reuse of its pid. */
	return hpn_proc_start(pid, &now) == 0 && (!start || now == start);
}

char *hpn_json_print(void *root)
{
	char *out = root ? cJSON_PrintUnformatted(root) : NULL;

	cJSON_Delete(root);
	return out;
}

void hpn_msgf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

bool hpn_json_put(cJSON *o, const char *k, cJSON *item)
{
	if (item && cJSON_AddItemToObject(o, k, item))
		return true;
	cJSON_Delete(item);
	return false;
}

bool hpn_json_push(cJSON *a, cJSON *item)
{
	if (item && cJSON_AddItemToArray(a, item))
		return true;
	cJSON_Delete(item);
	return false;
}

#ifdef HPN_TEST_HOOKS
#define FD_CHECK_MAX 1024
static struct {
	pid_t pid;
	const char *out;
	unsigned char open[FD_CHECK_MAX / 8];
} fd_check;

/*
 * Each fd below the soft RLIMIT_NOFILE (valgrind keeps its own above the
 * limit it shows the program) and FD_CHECK_MAX, but the listing's own:
 * fn(fd, ud).
 */
static void fds_each(void (*fn)(int fd, void *ud), void *ud)
{
	struct rlimit rl = { 0 };
	struct dirent *de;
	DIR *d = opendir("/proc/self/fd");

	if (!d)
		return;
	getrlimit(RLIMIT_NOFILE, &rl);
	while ((de = readdir(d))) {
		char *end;
		long fd = strtol(de->d_name, &end, 10);

		if (*end || end == de->d_name || fd == dirfd(d) || fd >= FD_CHECK_MAX ||
		    (rl.rlim_cur != RLIM_INFINITY && (rlim_t)fd >= rl.rlim_cur))
			continue;
		fn((int)fd, ud);
	}
	closedir(d);
}

static void fd_note(int fd, void *ud)
{
	fd_check.open[fd / 8] |= (unsigned char)(1u << (fd % 8));
}

static void fd_report(int fd, void *ud)
{
	FILE *f = ud;
	char link[64], target[PATH_MAX] = "?";
	ssize_t n;

	if (fd_check.open[fd / 8] & (1u << (fd % 8)))
		return;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	target[n > 0 ? n : 1] = '\0';
	fprintf(f, "fd %d: %s\n", fd, target);
}

static void fd_check_exit(void)
{
	int fd;
	FILE *f;

	/* A forked child that exits shares the parent's notes, not its fds. */
	if (getpid() != fd_check.pid)
		return;
	fd = open(fd_check.out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	f = fdopen(fd, "a");
	if (!f) {
		close(fd);
		return;
	}
	/* The report's own fd was opened at exit: note it as there from the start. */
	fd_note(fd, NULL);
	fds_each(fd_report, f);
	fclose(f);
}

void hpn_fd_check_arm(void)
{
	const char *out = getenv("HPN_FD_CHECK");

	if (!out || !*out || fd_check.pid)
		return;
	fd_check.pid = getpid();
	fd_check.out = out;
	fds_each(fd_note, NULL);
	atexit(fd_check_exit);
}
#else
void hpn_fd_check_arm(void)
{
}
#endif
