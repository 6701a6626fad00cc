/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_UTIL_H
#define HPN_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "err.h"
#include "types.h"

#define HPN_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Scope-bound cleanup (systemd/crun style). Ownership moves out with TAKE_*. */
static inline void hpn_freep(void *p)
{
	free(*(void **)p);
}

static inline void hpn_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

#define _cleanup_free_	__attribute__((cleanup(hpn_freep)))
#define _cleanup_close_ __attribute__((cleanup(hpn_closep)))

#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _p = (p);                                                            \
		(p) = NULL;                                                                        \
		_p;                                                                                \
	})
#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int _fd = (fd);                                                                    \
		(fd) = -1;                                                                         \
		_fd;                                                                               \
	})

/* Strict character-set checks for anything that becomes a name or a path. */
bool hpn_valid_ifname(const char *s);
bool hpn_valid_container_id(const char *s);
bool hpn_valid_path_component(const char *s);
bool hpn_valid_plugin_name(const char *s);

/* Parse "aa:bb:cc:dd:ee:ff" (case-insensitive). 0 or -EINVAL. */
int hpn_mac_parse(const char *s, uint8_t mac[HPN_MAC_LEN]);
void hpn_mac_format(const uint8_t mac[HPN_MAC_LEN], char out[HPN_MAC_STR]);
bool hpn_mac_is_zero(const uint8_t mac[HPN_MAC_LEN]);

/* A PCI distance class's name: "PIX", "PXB", "PHB", "SYS", "unknown". */
const char *hpn_gpu_dist_name(enum hpn_gpu_dist d);
/* The class of a name (case-sensitive, as hpn_gpu_dist_name gives them); -1 when none. */
int hpn_gpu_dist_parse(const char *s);
/* A GPU ID as the kubelet names it (1 to HPN_GPU_ID_MAX - 1 of [A-Za-z0-9_.:@/-]). */
bool hpn_gpu_id_valid(const char *id);

/* Normalise a PCI address to "DDDD:BB:DD.F" (lower case); accepts "BB:DD.F". */
int hpn_pci_normalise(const char *s, char out[HPN_PCI_STR]);

/* snprintf that reports truncation as -ENAMETOOLONG. */
int hpn_snprintf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* snprintf that truncates quietly: for messages, which are cut, never wrong. */
void hpn_msgf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* strdup that returns NULL on NULL input. */
char *hpn_strdup(const char *s);

struct cJSON;
/*
 * item added to object o as k (array a): true; else false, item freed (NULL
 * too: the result of a cJSON_Create* that found no memory), so a builder
 * checks each step with one call.
 */
bool hpn_json_put(struct cJSON *o, const char *k, struct cJSON *item);
bool hpn_json_push(struct cJSON *a, struct cJSON *item);

/* cJSON tree (as void *) of exactly one JSON value in buf[0..len), blanks around
 * it allowed; NULL for bad JSON or trailing bytes. Free with cJSON_Delete(). */
void *hpn_json_parse(const char *buf, size_t len);

/*
 * Optional members of a cJSON object (void * keeps cJSON out of callers).
 * Absent or null leaves *ret untouched and returns 0; a wrong type or value is
 * an error with the given CNI code naming "<prefix><key>". max_len 0: no limit.
 */
int hpn_json_str(const void *obj, const char *key, const char *prefix, int code, size_t max_len,
		 char **ret, struct hpn_err *err);
/* An integer in [min, max]; *present (if given) says whether it was there. */
int hpn_json_int(const void *obj, const char *key, const char *prefix, int code, int min, int max,
		 int *ret, bool *present, struct hpn_err *err);

/* A boolean; absent or null leaves *ret untouched. */
int hpn_json_bool(const void *obj, const char *key, const char *prefix, int code, bool *ret,
		  struct hpn_err *err);

/* Compact JSON text of a cJSON tree (as void *), which it frees; NULL on failure. */
char *hpn_json_print(void *root);

/* Does JSON text hold the escape \u0000 (a NUL inside a string)? */
bool hpn_json_has_nul(const char *buf, size_t len);
/* Copies src into dst (size n, NUL-terminated), each byte of invalid UTF-8 as '?'. */
void hpn_utf8_sanitize(char *dst, const char *src, size_t n);

/* Reads all of fd up to max bytes (more is an error); the buffer is NUL-terminated. */
int hpn_read_all(int fd, size_t max, char **ret_buf, size_t *ret_len);
/* The file at path, as hpn_read_all reads it; code 5 naming path ("open <path>: ..."). */
int hpn_read_file(const char *path, size_t max, char **ret, size_t *ret_len, struct hpn_err *err);
/*
 * mkdir -p of an absolute path. What it creates gets exactly 0755 (parents)
 * and mode (path itself), whatever the umask. What exists is left as it is,
 * but for path itself when it is ours: named "hpn-rdma..." (a real
 * directory, not a symlink), owned by our effective uid, not sticky; that
 * one loses the permission bits mode lacks (an older or a hostPath 0755
 * /run/hpn-rdma becomes 0700), and gains none. Returns -errno on failure.
 */
int hpn_mkdir_p(const char *path, mode_t mode);
/* All of data to fd, through short writes and EINTR: 0 or -errno. */
int hpn_write_all(int fd, const char *data, size_t len);
/*
 * Replaces dfd/name with data atomically: a fresh dfd/tmp (never written
 * through a symlink or an earlier file), exactly mode, data, rename. Atomic
 * for every reader and a killed writer; nothing is synced, so after a power
 * loss the file may be the old one, empty or torn (callers say why that is
 * fine: hpn_journal_write, hpn_nccl_write). On error tmp is gone.
 */
int hpn_write_atomic(int dfd, const char *tmp, const char *name, const char *data, size_t len,
		     mode_t mode);
/*
 * The durable, idempotent kind, for what a runtime loads or runs (the
 * installer's plugin, bundle, conflist; the agent's kubeconfig): dfd/name
 * holds exactly data[0..len) with exactly mode afterwards. When it already
 * does, nothing is written (its mtime stays): returns 0. Else a temp file in
 * the same directory (".<name>.hpn-" and a random suffix: no .conf/.conflist/
 * .json ending, so a runtime watching the directory never loads it), written,
 * fsync()ed, closed, renamed over name, and the directory fsync()ed: returns
 * 1. A reader (the runtime, an exec) sees the old file or the new one, never
 * a part; a running program keeps its old inode (no ETXTBSY). On error the
 * temp file is gone and name is as it was: code 7 for a name that is not one
 * file name, else 5.
 */
int hpn_install_file(int dfd, const char *name, const char *data, size_t len, mode_t mode,
		     struct hpn_err *err);
/*
 * FNV-1a's xor-multiply over s, from the offset 1469598103934665603 (not
 * the published basis; kept, as it names existing state files): short
 * stable names for over-long IDs.
 */
uint64_t hpn_hash64(const char *s);

/* CLOCK_MONOTONIC in milliseconds, and in seconds. */
long long hpn_mono_ms(void);
double hpn_mono_s(void);

/*
 * This boot: its ID (/proc/sys/kernel/random/boot_id, NULL when unreadable),
 * and when it began in seconds since the epoch (/proc/stat btime). Read once.
 */
const char *hpn_boot_id(void);
int hpn_boot_time(long long *ret);

/*
 * The major and minor version of a kernel release string as uname(2) gives
 * it ("7.3.4+deb13-amd64": 7, 3). -EINVAL when it does not start with
 * "<major>.<minor>".
 */
int hpn_kernel_version(const char *release, unsigned int *major, unsigned int *minor);

/* The start time of process pid (clock ticks since boot, /proc/<pid>/stat field 22). */
int hpn_proc_start(int pid, unsigned long long *ret);
/* Is process pid alive and the one that started at start (0: any)? */
bool hpn_proc_alive(int pid, unsigned long long start);

/*
 * Test hook (builds with HPN_TEST_HOOKS): with HPN_FD_CHECK=<file> in the
 * environment, the fds open now are noted, and at this process's exit every
 * fd open then and not now is appended to <file>, a line each ("fd 5:
 * socket:[123]"). The tests' harness fails a run whose file is not empty.
 */
void hpn_fd_check_arm(void);

#endif
