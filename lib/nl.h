/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_NL_H
#define HPN_NL_H

#include <stddef.h>

#include "err.h"

struct nl_sock;
struct nl_msg;

#define HPN_EXTACK_LEN 256

/*
 * One netlink conversation: send msg, hand each reply to cb (may be NULL), wait
 * for the ACK or the end of a dump. Returns 0 or the kernel's -errno (libnl's
 * NLE_* codes are converted here and nowhere else); the kernel's extended ACK
 * text, when it gave one, is copied into extack.
 */
typedef int (*hpn_nl_cb)(struct nl_msg *msg, void *arg);
int hpn_nl_talk(struct nl_sock *sk, struct nl_msg *msg, hpn_nl_cb cb, void *arg,
		char extack[HPN_EXTACK_LEN]);

/* A connected socket of the given protocol in the current netns, with NETLINK_EXT_ACK. */
int hpn_nl_open(int protocol, struct nl_sock **ret);
void hpn_nl_close(struct nl_sock *sk);
/*
 * hpn_nl_open(NETLINK_ROUTE) inside the netns netns_fd (named netns in
 * errors), then back to home_fd whatever happened: a netlink socket belongs
 * to the netns it was made in. err names the step that failed: entering or
 * returning (HPN_E_NETNS), or the socket (HPN_E_NETLINK).
 */
int hpn_nl_open_in(int netns_fd, int home_fd, const char *netns, struct nl_sock **ret,
		   struct hpn_err *err);

static inline void hpn_nl_closep(struct nl_sock **sk)
{
	hpn_nl_close(*sk);
}
#define _cleanup_nl_sock_ __attribute__((cleanup(hpn_nl_closep)))

/* A request of type with its fixed header hdr (len bytes); NULL: out of memory. */
struct nl_msg *hpn_nl_msg(int type, int flags, const void *hdr, size_t len);

void hpn_nl_msg_freep(struct nl_msg **msg);
#define _cleanup_nl_msg_ __attribute__((cleanup(hpn_nl_msg_freep)))

/* Fills err with "<what>: <strerror>" and the extended ACK text as details. */
int hpn_nl_err(struct hpn_err *err, int r, const char *extack, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
