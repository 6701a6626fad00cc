/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_EVENTS_H
#define HPN_EVENTS_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The plugin's record of what it did: <stateDir>/events.log, one JSON line
 * per CNI command (ADD, DEL, CHECK, GC; not STATUS, a poll) that got as far as its
 * config, appended with O_APPEND in one write() when the command ends, so
 * concurrent runs never interleave. hpn-rdma-agent tails it (inotify) for
 * its command counts and latency histograms (doc/metrics.md). Bounded: an
 * append that finds the file at HPN_EVENTS_MAX or more first renames it to
 * events.log.1 (replacing the one before), so the two files never hold much
 * more than twice that. Best effort: the command's outcome never depends on
 * the record, and nothing is synced.
 *
 *   {"v":1,"time":1718000000.123,"command":"ADD","network":"net","containerId":"c",
 *    "ifName":"eth0","code":0,"seconds":0.0123,"pid":4242}
 */

#define HPN_EVENTS_FILE	    "events.log"
#define HPN_EVENTS_ROTATED  "events.log.1"
#define HPN_EVENTS_MAX	    (1u << 20) /* bytes before the file is rotated */
#define HPN_EVENT_LINE_MAX  1024       /* a line, newline included */
#define HPN_EVENT_FIELD_MAX 256	       /* network and container ID: longer ones are cut */

struct hpn_event {
	char command[8];		   /* "ADD", "DEL", "CHECK", "GC" */
	char network[HPN_EVENT_FIELD_MAX]; /* the config's name */
	char container_id[HPN_EVENT_FIELD_MAX];
	char ifname[16];
	int code;	/* 0: success; else the CNI error code it answered */
	double seconds; /* the plugin's own wall time for the command */
	double time;	/* when it ended: seconds since the epoch */
	int pid;
};

/* The line for ev, newline included, in buf; its length, or -ENOSPC. */
int hpn_event_format(const struct hpn_event *ev, char *buf, size_t len);
/*
 * Appends ev to <state_dir>/events.log (created 0600; rotated as above).
 * -errno when it could not; the caller logs it at most.
 */
int hpn_event_append(const char *state_dir, const struct hpn_event *ev);
/*
 * One line (without its newline) back into *ev: 0, or -EINVAL for anything
 * that is not a version 1 record with a known command, a code and a
 * non-negative duration (the agent skips such lines).
 */
int hpn_event_parse(const char *line, size_t len, struct hpn_event *ev);

#endif
