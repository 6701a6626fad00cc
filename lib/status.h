/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_STATUS_H
#define HPN_STATUS_H

#include "conf.h"
#include "err.h"

/*
 * The readiness checks: what STATUS answers and the doctor reports, so both
 * give the same reasons. Each looks and creates nothing.
 */

/*
 * One check: 0 ok (note, HPN_ERR_MSG bytes, says what), 1 not applicable
 * (note says why), < 0 failed (err is set).
 */
struct hpn_ready_check {
	const char *name;
	int (*fn)(const struct hpn_conf *conf, const char *cni_path, char *note,
		  struct hpn_err *err);
};

/* In order, ending with a NULL name. */
extern const struct hpn_ready_check hpn_ready_checks[];

/*
 * Every readiness check that concerns the network config, in order,
 * stopping at the first failure (code 50, the reason in err->msg): stateDir
 * writable, rtnetlink, the IPAM plugin in cni_path, and with rdmaRequired an
 * RDMA subsystem in the rdmaNetns mode with the verbs and rdma_cm interfaces,
 * then the pool's drivers and free NICs.
 */
int hpn_ready_check(const struct hpn_conf *conf, const char *cni_path, struct hpn_err *err);

#endif
