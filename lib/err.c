// SPDX-License-Identifier: Apache-2.0
#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int hpn_err_set(struct hpn_err *err, int code, int errno_val, const char *fmt, ...)
{
	if (errno_val < 0)
		errno_val = -errno_val;
	if (err && err->code == 0) {
		va_list ap;

		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return errno_val ? -errno_val : -EINVAL;
}

void hpn_err_details(struct hpn_err *err, const char *fmt, ...)
{
	va_list ap;

	if (!err || err->details[0])
		return;
	va_start(ap, fmt);
	vsnprintf(err->details, sizeof(err->details), fmt, ap);
	va_end(ap);
}

void hpn_err_prefix(struct hpn_err *err, const char *fmt, ...)
{
	char old[HPN_ERR_MSG];
	va_list ap;
	int n;

	if (!err || !err->code)
		return;
	memcpy(old, err->msg, sizeof(old));
	va_start(ap, fmt);
	n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %.*s",
			 (int)(sizeof(err->msg) - (size_t)n), old);
}
