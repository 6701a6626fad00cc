/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_TEST_CHECK_H
#define HPN_TEST_CHECK_H

/*
 * A tiny assertion helper for the unit tier. A failed check prints
 * file:line, the expression and the values it compared, and the test goes on;
 * check_done() prints "N passed, N failed" as the last line and gives the exit
 * status (non-zero when anything failed), so one run shows every failure.
 */

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int check_passed, check_failed;

static inline void check_result(bool ok, const char *file, int line, const char *expr)
{
	if (ok) {
		check_passed++;
		return;
	}
	check_failed++;
	fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, expr);
}

static inline void check_int(long long a, long long b, bool want_eq, const char *file, int line,
			     const char *expr, const char *ea, const char *eb)
{
	bool ok = (a == b) == want_eq;

	check_result(ok, file, line, expr);
	if (!ok)
		fprintf(stderr, "\t%s = %lld\n\t%s = %lld\n", ea, a, eb, b);
}

static inline void check_str(const char *a, const char *b, const char *file, int line,
			     const char *expr, const char *ea, const char *eb)
{
	bool ok = a && b ? !strcmp(a, b) : a == b;

	check_result(ok, file, line, expr);
	if (!ok)
		fprintf(stderr, "\t%s = %s%s%s\n\t%s = %s%s%s\n", ea, a ? "\"" : "",
			a ? a : "(null)", a ? "\"" : "", eb, b ? "\"" : "", b ? b : "(null)",
			b ? "\"" : "");
}

static inline void check_has(const char *hay, const char *needle, bool want, const char *file,
			     int line, const char *expr, const char *eh, const char *en)
{
	bool ok = hay && needle && (strstr(hay, needle) != NULL) == want;

	check_result(ok, file, line, expr);
	if (!ok)
		fprintf(stderr, "\t%s = \"%s\"\n\t%s = \"%s\"\n", eh, hay ? hay : "(null)", en,
			needle ? needle : "(null)");
}

/* Plain truth; prints the expression. */
#define CHECK(expr) check_result(!!(expr), __FILE__, __LINE__, "CHECK(" #expr ")")
/* Integers (any width up to long long); prints both expressions and values. */
#define CHECK_INT_EQ(a, b)                                                                         \
	check_int((long long)(a), (long long)(b), true, __FILE__, __LINE__,                        \
		  "CHECK_INT_EQ(" #a ", " #b ")", #a, #b)
#define CHECK_INT_NE(a, b)                                                                         \
	check_int((long long)(a), (long long)(b), false, __FILE__, __LINE__,                       \
		  "CHECK_INT_NE(" #a ", " #b ")", #a, #b)
/* Strings; NULL equals only NULL. */
#define CHECK_STR_EQ(a, b)                                                                         \
	check_str((a), (b), __FILE__, __LINE__, "CHECK_STR_EQ(" #a ", " #b ")", #a, #b)
/* Substring present / absent (a NULL haystack fails both). */
#define CHECK_STR_HAS(hay, needle)                                                                 \
	check_has((hay), (needle), true, __FILE__, __LINE__,                                       \
		  "CHECK_STR_HAS(" #hay ", " #needle ")", #hay, #needle)
#define CHECK_STR_LACKS(hay, needle)                                                               \
	check_has((hay), (needle), false, __FILE__, __LINE__,                                      \
		  "CHECK_STR_LACKS(" #hay ", " #needle ")", #hay, #needle)

/* The final line and the exit status: return check_done(); from main. */
static inline int check_done(void)
{
	fflush(stderr);
	printf("%d passed, %d failed\n", check_passed, check_failed);
	fflush(stdout);
	return check_failed ? 1 : 0;
}

#endif
