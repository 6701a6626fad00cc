/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_ATTACHMETRICS_H
#define HPN_AGENT_ATTACHMETRICS_H

struct health;
struct node;
struct sbuf;

/*
 * The metrics of each attachment the network's journals record and of its
 * NICs (doc/metrics.md): read at each scrape, the kernel's counters from each
 * pod's netns. What they are read from, the caller's, for as long as the
 * exporter renders them.
 */
struct attachmetrics {
	const struct node *node;
	const struct health *health; /* NULL: the health loop is off */
};

/* Its metrics_render_fn (metrics.h; ud: a struct attachmetrics). */
void attachmetrics_render(struct sbuf *b, void *ud);

#endif
