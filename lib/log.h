/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_LOG_H
#define HPN_LOG_H

enum hpn_log_level { HPN_LOG_ERROR, HPN_LOG_WARN, HPN_LOG_INFO, HPN_LOG_DEBUG };

/*
 * Diagnostics go to stderr (the runtime logs it) and, once hpn_log_open() has
 * succeeded, also to an append-only file with timestamp, pid, command and
 * container ID. Never to stdout: that belongs to the CNI result.
 */
void hpn_log_init(const char *command, const char *container_id);
/* What reaches stderr (default warn; HPN_DEBUG=1 wins): a daemon shows info there. */
void hpn_log_stderr(enum hpn_log_level level);
int hpn_log_open(const char *path, enum hpn_log_level level);
int hpn_log_level_parse(const char *s, enum hpn_log_level *ret);
void hpn_log_close(void);
void hpn_log(enum hpn_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define hpn_error(...) hpn_log(HPN_LOG_ERROR, __VA_ARGS__)
#define hpn_warn(...)  hpn_log(HPN_LOG_WARN, __VA_ARGS__)
#define hpn_info(...)  hpn_log(HPN_LOG_INFO, __VA_ARGS__)
#define hpn_debug(...) hpn_log(HPN_LOG_DEBUG, __VA_ARGS__)

#endif
