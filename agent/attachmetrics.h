/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_ATTACHMETRICS_H
#define HPN_AGENT_ATTACHMETRICS_H

struct health;
struct node;
struct sbuf;

/*
 * The metrics of each attachment the network's journals record and of its
 * NICs (doc/metrics.md), rendered into b: read at each call, the kernel's
 * counters from each pod's netns. health: NULL when the health loop is off.
 */
void attachmetrics_render(struct sbuf *b, const struct node *node, const struct health *health);

#endif
