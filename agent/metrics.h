/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_METRICS_H
#define HPN_AGENT_METRICS_H

struct loop;
struct sbuf;
struct sockaddr_storage;

/*
 * Prometheus metrics over HTTP (doc/metrics.md), in the loop. The exporter
 * knows no service: it renders its own families (build info, start time,
 * collection time, scrapes), then calls each renderer registered with it, in
 * the order they were registered, at a scrape (the text cached for a second).
 */
struct metrics;

/*
 * Appends a service's families to b (exposition.h), on the loop's thread, so
 * it reads its own state without a lock. ud is the registrant's and must
 * outlive the exporter (metrics_free before the service's own free).
 */
typedef void metrics_render_fn(struct sbuf *b, void *ud);

/*
 * ADDRESS:PORT into sa and len (written only on success), -EINVAL when s is
 * not one. The port is what follows the last ':' (digits, 0-65535; 0: any),
 * the address what comes before it: IPv4 ("127.0.0.1:9467"), IPv6 in
 * brackets ("[fd00::5]:9467"), or IPv6 without them ("fd00::5:9467", as
 * $(HOST_IP):9467 gives on an IPv6 node). No names, no zone (%eth0).
 */
int metrics_parse_address(const char *s, struct sockaddr_storage *sa, unsigned int *len);
/* Why s is not an address metrics_parse_address takes (a phrase, static), NULL when it is one. */
const char *metrics_address_error(const char *s);
/* An exporter with no renderer, serving nothing yet. start_time: unix seconds. */
int metrics_new(double start_time, struct metrics **ret);
/*
 * Adds render after those registered before, before or after metrics_start;
 * the next scrape has its families (a cached text is dropped). -ENOMEM.
 */
int metrics_register(struct metrics *m, metrics_render_fn *render, void *ud);
/* Serves GET /metrics on address from l. On error m stays (metrics_free it). */
int metrics_start(struct metrics *m, struct loop *l, const char *address);
/* The port served (address's port 0: the one the kernel chose); 0 before metrics_start. */
unsigned int metrics_port(const struct metrics *m);
void metrics_free(struct metrics *m);

#endif
