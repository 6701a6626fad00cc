/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_DL_H
#define HPN_DL_H

#include <stddef.h>

#include "err.h"

/*
 * Libraries opened with dlopen() on the one path that needs them, so that a
 * plugin run that does not (VERSION, DEL, an ADD decided by annotations)
 * never maps, relocates or initialises them. Linked instead, libcurl and its
 * 30 dependencies cost every start of the plugin several milliseconds of CPU
 * (measured in the commit that added this file).
 */

struct hpn_dl_sym {
	const char *name;
	void **ret; /* where the address goes */
};

/*
 * Opens soname for the rest of the process (never closed: the library's own
 * state, such as curl_global_init's, lives as long as the process) and
 * resolves every symbol of syms[0..n) into *syms[i].ret; the addresses are
 * written only when all resolved. Callers keep their own "loaded" flag (a
 * second call finds the library already open and resolves again). what
 * names the Debian package for the error; code is the CNI code for "cannot
 * load".
 */
int hpn_dl_load(const char *soname, const char *what, const struct hpn_dl_sym *syms, size_t n,
		int code, struct hpn_err *err);

#endif
