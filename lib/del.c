// SPDX-License-Identifier: Apache-2.0
#include "attach.h"

#include "session.h"

int hpn_del(const struct hpn_env *env, const struct hpn_conf *conf, struct hpn_err *err)
{
	struct hpn_attach a;
	int r;

	if (hpn_untouched_pod(env, conf))
		return 0;
	r = hpn_attach_open(&a, env, conf, err);
	if (r < 0)
		goto out;
	/* IPAM always: its lease must go even when nothing else is left. */
	if (a.have_journal || a.stale_file) {
		r = hpn_release(&a.st, &a.ns, env, conf, a.key, a.have_journal ? &a.j : NULL, true,
				err);
	} else {
		hpn_store_unlock(&a.st);
		r = hpn_undo(&a.ns, env, conf, NULL, true, err);
	}
out:
	hpn_attach_close(&a);
	return r;
}
