/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_BAKE_H
#define HPN_AGENT_BAKE_H

#include "err.h"

struct opts;

/* install and uninstall with a manifest (o->manifest): 0 or a negative errno with err set. */
int inst_bake_install(const struct opts *o, struct hpn_err *err);
int inst_bake_uninstall(const struct opts *o, struct hpn_err *err);

#endif
