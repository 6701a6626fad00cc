// SPDX-License-Identifier: Apache-2.0
#include "dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#define DL_MAX_SYMS 64

int hpn_dl_load(const char *soname, const char *what, const struct hpn_dl_sym *syms, size_t n,
		int code, struct hpn_err *err)
{
	void *addr[DL_MAX_SYMS];
	void *h;

	if (n > DL_MAX_SYMS)
		return hpn_err_set(err, HPN_E_INTERNAL, E2BIG, "load %s: %zu symbols", soname, n);
	/* RTLD_NOLOAD first: a library this process already opened is not opened twice. */
	h = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (!h)
		h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return hpn_err_set(err, code, ENOENT, "load %s (Debian: %s): %s", soname, what,
				   dlerror());
	for (size_t i = 0; i < n; i++) {
		addr[i] = dlsym(h, syms[i].name);
		if (!addr[i])
			return hpn_err_set(err, code, ENOSYS, "%s (%s) has no %s", soname, what,
					   syms[i].name);
	}
	for (size_t i = 0; i < n; i++)
		*syms[i].ret = addr[i];
	return 0;
}
