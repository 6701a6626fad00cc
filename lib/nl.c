// SPDX-License-Identifier: Apache-2.0
#include "nl.h"

#include <errno.h>
#include <linux/netlink.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "netns.h"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

struct talk {
	uint32_t seq;
	int error;
	bool done;
	int cb_error;
	hpn_nl_cb cb;
	void *arg;
	char *extack;
};

/* The kernel appends TLVs after the nlmsgerr when NETLINK_EXT_ACK is on. */
static void copy_extack(const struct nlmsgerr *e, char *out)
{
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)((const char *)e - NLMSG_HDRLEN);
	const struct nlattr *a;
	size_t off = sizeof(*e);
	int len, rem;

	if (!out || !(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return;
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
		off += e->msg.nlmsg_len - NLMSG_HDRLEN;
	len = (int)nlh->nlmsg_len - NLMSG_HDRLEN - (int)off;
	if (len <= 0)
		return;
	nla_for_each_attr (a, (const struct nlattr *)((const char *)e + off), len, rem) {
		if (nla_type(a) == NLMSGERR_ATTR_MSG) {
			snprintf(out, HPN_EXTACK_LEN, "%.*s", nla_len(a),
				 (const char *)nla_data(a));
			return;
		}
	}
}

static int on_error(struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
	struct talk *t = arg;

	t->error = e->error;
	t->done = true;
	if (e->error)
		copy_extack(e, t->extack);
	return NL_STOP;
}

static int on_done(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct talk *t = arg;

	/* A dump that failed says so in NLMSG_DONE's payload (an int, -errno). */
	if (nlh->nlmsg_type == NLMSG_DONE && nlmsg_datalen(nlh) >= (int)sizeof(int))
		t->error = *(int *)nlmsg_data(nlh);
	t->done = true;
	return NL_STOP;
}

/*
 * Only replies to this conversation count. A conversation cut short (a failed
 * send, an early error) can leave its ACK in the socket; libnl's default check
 * would then fail every later request with a sequence mismatch.
 */
static int on_seq(struct nl_msg *msg, void *arg)
{
	struct talk *t = arg;

	return nlmsg_hdr(msg)->nlmsg_seq == t->seq ? NL_OK : NL_SKIP;
}

static int on_valid(struct nl_msg *msg, void *arg)
{
	struct talk *t = arg;
	int r;

	if (!t->cb || t->cb_error)
		return NL_OK;
	r = t->cb(msg, t->arg);
	if (r < 0)
		t->cb_error = r;
	return NL_OK;
}

static int nle_to_errno(int nle)
{
	switch (nle < 0 ? -nle : nle) {
	case NLE_NOMEM:
		return ENOMEM;
	case NLE_AGAIN:
		return EAGAIN;
	case NLE_BUSY:
		return EBUSY;
	case NLE_EXIST:
		return EEXIST;
	case NLE_OBJ_NOTFOUND:
		return ENODEV;
	case NLE_PERM:
		return EPERM;
	case NLE_OPNOTSUPP:
		return EOPNOTSUPP;
	case NLE_MSGSIZE:
		return EMSGSIZE;
	case NLE_INVAL:
		return EINVAL;
	case NLE_PROTO_MISMATCH: /* socket(): the kernel lacks the protocol (no NETLINK_RDMA) */
		return EPROTONOSUPPORT;
	case NLE_AF_NOSUPPORT:
		return EAFNOSUPPORT;
	case NLE_NOACCESS:
		return EACCES;
	case NLE_NODEV:
		return ENODEV;
	default:
		return EIO;
	}
}

int hpn_nl_talk(struct nl_sock *sk, struct nl_msg *msg, hpn_nl_cb cb, void *arg,
		char extack[HPN_EXTACK_LEN])
{
	struct talk t = { .cb = cb, .arg = arg, .extack = extack };
	struct nl_cb *ncb;
	int r;

	if (extack)
		extack[0] = '\0';
	ncb = nl_cb_alloc(NL_CB_CUSTOM);
	if (!ncb)
		return -ENOMEM;
	nl_cb_err(ncb, NL_CB_CUSTOM, on_error, &t);
	nl_cb_set(ncb, NL_CB_ACK, NL_CB_CUSTOM, on_done, &t);
	nl_cb_set(ncb, NL_CB_FINISH, NL_CB_CUSTOM, on_done, &t);
	nl_cb_set(ncb, NL_CB_VALID, NL_CB_CUSTOM, on_valid, &t);
	nl_cb_set(ncb, NL_CB_SEQ_CHECK, NL_CB_CUSTOM, on_seq, &t);

	r = nl_send_auto(sk, msg);
	if (r < 0) {
		nl_cb_put(ncb);
		return -nle_to_errno(r);
	}
	t.seq = nlmsg_hdr(msg)->nlmsg_seq;
	while (!t.done) {
		r = nl_recvmsgs(sk, ncb);
		/* cppcheck-suppress knownConditionTrueFalse ; the callbacks set t.done */
		if (r < 0 && !t.done) {
			if (r == -NLE_INTR || r == -NLE_AGAIN)
				continue;
			nl_cb_put(ncb);
			return -nle_to_errno(r);
		}
	}
	nl_cb_put(ncb);
	if (t.error)
		return t.error;
	return t.cb_error;
}

int hpn_nl_open(int protocol, struct nl_sock **ret)
{
	struct nl_sock *sk = nl_socket_alloc();
	int one = 1, r;

	if (!sk)
		return -ENOMEM;
	r = nl_connect(sk, protocol);
	if (r < 0) {
		nl_socket_free(sk);
		return -nle_to_errno(r);
	}
	/* Dumps of links with many VFs exceed a page; let libnl size reads. */
	nl_socket_enable_msg_peek(sk);
	/* Kernel's reason for a refusal, passed to the user as CNI error details. */
	setsockopt(nl_socket_get_fd(sk), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	setsockopt(nl_socket_get_fd(sk), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	*ret = sk;
	return 0;
}

int hpn_nl_open_in(int netns_fd, int home_fd, const char *netns, struct nl_sock **ret,
		   struct hpn_err *err)
{
	int r = hpn_netns_enter(netns_fd);

	if (r < 0)
		return hpn_err_set(err, HPN_E_NETNS, r, "enter netns \"%s\": %s", netns,
				   strerror(-r));
	r = hpn_nl_open(NETLINK_ROUTE, ret);
	/* Always go home: the caller's run assumes the netns it started in. */
	if (hpn_netns_enter(home_fd) < 0)
		return hpn_err_set(err, HPN_E_NETNS, errno, "return to the host netns: %s",
				   strerror(errno));
	if (r < 0)
		return hpn_err_set(err, HPN_E_NETLINK, r, "netlink socket in \"%s\": %s", netns,
				   strerror(-r));
	return 0;
}

void hpn_nl_close(struct nl_sock *sk)
{
	if (sk)
		nl_socket_free(sk);
}

struct nl_msg *hpn_nl_msg(int type, int flags, const void *hdr, size_t len)
{
	struct nl_msg *msg = nlmsg_alloc_simple(type, flags);

	if (msg && nlmsg_append(msg, (void *)hdr, len, NLMSG_ALIGNTO) < 0) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

void hpn_nl_msg_freep(struct nl_msg **msg)
{
	if (*msg)
		nlmsg_free(*msg);
}

int hpn_nl_err(struct hpn_err *err, int r, const char *extack, const char *fmt, ...)
{
	char what[HPN_ERR_MSG];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (err && !err->code && extack && extack[0])
		snprintf(err->details, sizeof(err->details), "kernel: %s", extack);
	return hpn_err_set(err, HPN_E_NETLINK, r, "%s: %s", what, strerror(r < 0 ? -r : r));
}
