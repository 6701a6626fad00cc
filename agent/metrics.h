/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_METRICS_H
#define HPN_AGENT_METRICS_H

struct cnilog;
struct deviceplugin;
struct dra;
struct gc;
struct health;
struct loop;
struct node;
struct sockaddr_storage;

/*
 * Prometheus metrics over HTTP (doc/metrics.md), in the loop, read from
 * the node and the services' stats at each scrape (cached for a second).
 */
struct metrics_sources {
	const struct node *node;
	const char *resource;
	double start_time; /* unix seconds */
	const struct deviceplugin *dp;
	const struct health *health; /* NULL: the health loop is off */
	const struct gc *gc;	     /* NULL: GC is off */
	const struct cnilog *cnilog;
	const struct dra *dra; /* NULL: no --dra */
};

struct metrics;

/* "127.0.0.1:9467", "[::1]:9467" (port 0: any) into sa (a struct sockaddr_storage). */
int metrics_parse_address(const char *s, struct sockaddr_storage *sa, unsigned int *len);
int metrics_start(struct loop *l, const char *address, const struct metrics_sources *src,
		  struct metrics **ret);
void metrics_free(struct metrics *m);

#endif
