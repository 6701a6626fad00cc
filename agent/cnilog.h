/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_CNILOG_H
#define HPN_AGENT_CNILOG_H

struct loop;
struct sbuf;

/*
 * The plugin's event log, <stateDir>/events.log (lib/events.h), followed
 * with inotify into counts and latency histograms by network, command and
 * result code.
 */
struct cnilog;

/*
 * Reads what state_dir's log holds and follows it. A directory that cannot
 * be followed is logged, and the service stays, counting nothing: -ENOMEM
 * is the only error.
 */
int cnilog_start(struct loop *l, const char *state_dir, struct cnilog **ret);
void cnilog_free(struct cnilog *c);
/*
 * Its metrics_render_fn (metrics.h; ud: the cnilog): the hpn_rdma_cni_*
 * families (doc/metrics.md).
 */
void cnilog_metrics(struct sbuf *b, void *ud);

#endif
