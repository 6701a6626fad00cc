/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_CNILOG_H
#define HPN_AGENT_CNILOG_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"

struct loop;

/*
 * The plugin's event log, <stateDir>/events.log (lib/events.h), followed
 * with inotify into counts and latency histograms by network, command and
 * result code.
 */
#define CNILOG_BUCKETS 14
extern const double cnilog_buckets[CNILOG_BUCKETS];
struct cnilog_series {
	char network[HPN_EVENT_FIELD_MAX];
	char command[8];
	int code;
	uint64_t count;
	double sum;
	uint64_t bucket[CNILOG_BUCKETS]; /* cumulative: count of durations <= cnilog_buckets[i] */
};
#define CNILOG_MAX_SERIES 128
struct cnilog_stats {
	struct cnilog_series v[CNILOG_MAX_SERIES];
	size_t n;
	uint64_t lines, skipped, dropped; /* read; unparsable; no series left for them */
};

struct cnilog;

/*
 * Reads what state_dir's log holds and follows it. A directory that cannot
 * be followed is logged, and the service stays, counting nothing: -ENOMEM
 * is the only error.
 */
int cnilog_start(struct loop *l, const char *state_dir, struct cnilog **ret);
void cnilog_free(struct cnilog *c);
/* NULL for NULL. */
const struct cnilog_stats *cnilog_stats(const struct cnilog *c);

#endif
