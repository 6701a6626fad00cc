// SPDX-License-Identifier: Apache-2.0
/*
 * Prometheus' text exposition format (0.0.4) into a growing buffer:
 * families, samples, label values escaped (exposition.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "exposition.h"

__attribute__((format(printf, 2, 0))) static void sb_vadd(struct sbuf *b, const char *fmt,
							  va_list ap)
{
	va_list cp;
	int n;

	if (b->oom)
		return;
	va_copy(cp, ap);
	n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, cp);
	va_end(cp);
	if (n < 0) {
		b->oom = true;
		return;
	}
	if (!b->p || b->len + (size_t)n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 16384;
		char *p;

		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	}
	b->len += (size_t)n;
}

void expo_add(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sb_vadd(b, fmt, ap);
	va_end(ap);
}

/* A label value: backslash, double quote and newline escaped (the exposition format's rule). */
static void value(struct sbuf *b, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\')
			expo_add(b, "\\\\");
		else if (*v == '"')
			expo_add(b, "\\\"");
		else if (*v == '\n')
			expo_add(b, "\\n");
		else
			expo_add(b, "%c", *v);
	}
}

/* A family's header. */
void expo_family(struct sbuf *b, const char *name, const char *type, const char *help)
{
	expo_add(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A sample's name and labels ("k1", "v1", ..., NULL), up to its value. */
static void series(struct sbuf *b, const char *name, const char *const *labels)
{
	expo_add(b, "%s", name);
	for (size_t i = 0; labels && labels[i]; i += 2) {
		expo_add(b, "%s%s=\"", i ? "," : "{", labels[i]);
		value(b, labels[i + 1]);
		expo_add(b, "\"");
	}
	if (labels && labels[0])
		expo_add(b, "}");
}

void expo_sample(struct sbuf *b, const char *name, const char *const *labels, double v)
{
	series(b, name, labels);
	/* Integers print as integers; %.17g keeps every bit of the others. */
	if (v == (double)(long long)v && v < 9e15 && v > -9e15)
		expo_add(b, " %lld\n", (long long)v);
	else
		expo_add(b, " %.17g\n", v);
}

void expo_sample_u64(struct sbuf *b, const char *name, const char *const *labels, uint64_t v)
{
	series(b, name, labels);
	expo_add(b, " %llu\n", (unsigned long long)v);
}

void expo_by_result(struct sbuf *b, const char *name, const char *const *result, const uint64_t *v,
		    size_t n)
{
	for (size_t i = 0; i < n; i++)
		expo_sample_u64(b, name, (const char *[]){ "result", result[i], NULL }, v[i]);
}

void expo_gauge(struct sbuf *b, const char *name, const char *help, double v)
{
	expo_family(b, name, "gauge", help);
	expo_sample(b, name, NULL, v);
}

void expo_counter(struct sbuf *b, const char *name, const char *help, uint64_t v)
{
	expo_family(b, name, "counter", help);
	expo_sample_u64(b, name, NULL, v);
}
