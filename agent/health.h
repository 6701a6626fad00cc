/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_HEALTH_H
#define HPN_AGENT_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "types.h"

struct loop;
struct node;

/*
 * The health loop (doc/metrics.md): CHECK's logic over every journal of the
 * network, a batch per period on the loop's worker, with a second source
 * of verdicts (health_source); a broken attachment makes its NICs' devices
 * Unhealthy, and every verdict is each NIC's device's (agent_devs_set_verdict,
 * node_devices_changed).
 */
struct health_opts {
	int period_s; /* --health-interval */
	int batch;    /* --health-batch: attachments checked per period at most */
};

#define HEALTH_MSG 512

/*
 * One attachment's latest verdict, for the metrics: CHECK's, or broken for
 * the source health_source gave (its reason) when CHECK finds nothing.
 */
struct health_entry {
	char key[256];
	int state; /* 1 healthy, 0 broken, -1 never checked */
	const char *reason;
	char msg[HEALTH_MSG];
	int check_state; /* CHECK's own: 1, 0, -1 as state */
	const char *check_reason;
	char check_msg[HEALTH_MSG];
	char sandbox[256]; /* its journal's container ID: the pod sandbox ("": none) */
	double checked_at; /* unix seconds */
	bool unchecked;	   /* CHECK's last run could not check it (hpn_check_journal's 1) */
	bool seen;	   /* its journal was there at the last listing */
	char pod[340];	   /* " (pod ns/name)" for the log, or empty */
	char ids[HPN_MAX_NICS][HPN_ALLOC_ID_MAX]; /* its NICs, as devices.c names them */
	size_t n_ids;
	bool gpus_seen;		  /* its NICs' GPUs were looked at (far ones warned about, once) */
	char warning[HEALTH_MSG]; /* CHECK's last warning, said once (a lossy hints class) */
};
struct health_stats {
	uint64_t checks_healthy, checks_broken, checks_skipped;
	double last_tick;
	struct health_entry *v;
	size_t n;
};

struct health;

int health_start(struct loop *l, struct node *node, const struct health_opts *o,
		 struct health **ret);
/* At SIGTERM: no new period. */
void health_stop(struct health *h);
/* After the worker stopped. */
void health_free(struct health *h);
/* NULL for NULL (the loop is off). */
const struct health_stats *health_stats(const struct health *h);
/*
 * A second source of verdicts beside CHECK (main.c wires NRI's bare
 * containers): broken(ud, sandbox, msg, len) says whether the attachment of
 * pod sandbox sandbox is broken for it, with msg saying why; reason is a
 * static word for hpn_rdma_attachment_broken. Asked at every verdict; ud
 * outlives h.
 */
void health_source(struct health *h, const char *reason,
		   bool (*broken)(void *ud, const char *sandbox, char *msg, size_t len), void *ud);
/* The source changed: every verdict again now (CHECK's as last found), applied. */
void health_refresh(struct health *h);

#endif
