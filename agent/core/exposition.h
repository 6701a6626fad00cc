/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_EXPOSITION_H
#define HPN_AGENT_EXPOSITION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Prometheus' text exposition format (0.0.4) into a buffer that grows; out
 * of memory is remembered (oom) and every later call does nothing.
 */
struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

void expo_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A family's header: # HELP and # TYPE. */
void expo_family(struct sbuf *b, const char *name, const char *type, const char *help);
/* One sample; labels as "k1", "v1", "k2", "v2", ..., NULL (NULL: none). */
void expo_sample(struct sbuf *b, const char *name, const char *const *labels, double v);
void expo_sample_u64(struct sbuf *b, const char *name, const char *const *labels, uint64_t v);
/* A family of one sample without labels: a gauge, a counter. */
void expo_gauge(struct sbuf *b, const char *name, const char *help, double v);
void expo_counter(struct sbuf *b, const char *name, const char *help, uint64_t v);
/* A counter's n samples by label "result": result[i] counted v[i]. */
void expo_by_result(struct sbuf *b, const char *name, const char *const *result, const uint64_t *v,
		    size_t n);

#endif
