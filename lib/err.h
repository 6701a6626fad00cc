/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_ERR_H
#define HPN_ERR_H

#include <stdarg.h>

/* CNI error codes (spec "Error" section) and the plugin's own (>= 100). */
enum hpn_code {
	HPN_OK = 0,
	HPN_E_INCOMPATIBLE_VERSION = 1,
	HPN_E_UNSUPPORTED_FIELD = 2,
	HPN_E_UNKNOWN_CONTAINER = 3,
	HPN_E_INVALID_ENV = 4,
	HPN_E_IO = 5,
	HPN_E_DECODE = 6,
	HPN_E_INVALID_CONFIG = 7,
	HPN_E_TRY_AGAIN = 11,
	HPN_E_NOT_AVAILABLE = 50, /* STATUS: the plugin cannot serve ADD now */

	HPN_E_DEVICE_NOT_FOUND = 100,
	HPN_E_NETLINK = 102,
	HPN_E_NETNS = 103,
	HPN_E_IFNAME_EXISTS = 104,
	HPN_E_IPAM = 105,
	HPN_E_INTERNAL = 106,
	HPN_E_CHECK = 107,
	HPN_E_RDMA = 108, /* no usable RDMA device behind the NIC, or the node refused it */
	/*
	 * The Kubernetes API lookup failed, for none of the reasons with a code
	 * of their own (the config 7, a local file 5, a pod that does not exist
	 * 3, worth a retry 11): the API server refused the credentials (401,
	 * 403) or answered badly (status, type, size, JSON), TLS verification
	 * failed, or libcurl or libyaml cannot be loaded.
	 */
	HPN_E_KUBE = 109,
};

#define HPN_ERR_MSG	512
#define HPN_ERR_DETAILS 1024

/*
 * What went wrong, in words for the runtime: the CNI code, a message naming the
 * failing object, and optional details (the kernel's extended ACK text, an IPAM
 * plugin's own message). The first error set wins; later ones are ignored so the
 * root cause survives cleanup paths.
 */
struct hpn_err {
	int code;
	char msg[HPN_ERR_MSG];
	char details[HPN_ERR_DETAILS];
};

/* Records code and message (if none yet) and returns -errno_val (or -EINVAL if 0). */
int hpn_err_set(struct hpn_err *err, int code, int errno_val, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Adds details to an error already set (if it has none). */
void hpn_err_details(struct hpn_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Adds context in front of the message: "ctx: old message". */
void hpn_err_prefix(struct hpn_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
