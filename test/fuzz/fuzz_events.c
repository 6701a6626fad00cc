// SPDX-License-Identifier: Apache-2.0
/*
 * hpn_event_parse: a line of <stateDir>/events.log, which the agent tails for
 * its command counts and latencies (agent/cnilog.c). Any process that can
 * write the state directory can write the file, so a line is outside input.
 * A refusal leaves the event zeroed; an accepted event has every field within
 * its bounds, and renders (hpn_event_format) to a line that parses back to the
 * same event, and renders again to the same text.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "events.h"
#include "fuzz.h"

static const char *const commands[] = { "ADD", "DEL", "CHECK", "STATUS", "GC" };

static bool zeroed(const struct hpn_event *ev)
{
	static const struct hpn_event zero;

	return !memcmp(ev, &zero, sizeof(zero));
}

static void check_bounded(const struct hpn_event *ev)
{
	bool known = false;

	FUZZ_ASSERT(memchr(ev->command, '\0', sizeof(ev->command)));
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		known |= !strcmp(ev->command, commands[i]);
	FUZZ_ASSERT(known);
	FUZZ_ASSERT(memchr(ev->network, '\0', sizeof(ev->network)));
	FUZZ_ASSERT(memchr(ev->container_id, '\0', sizeof(ev->container_id)));
	FUZZ_ASSERT(memchr(ev->ifname, '\0', sizeof(ev->ifname)));
	FUZZ_ASSERT(ev->code >= 0 && ev->code <= 9999);
	FUZZ_ASSERT(isfinite(ev->seconds) && ev->seconds >= 0 && ev->seconds <= 1e6);
	FUZZ_ASSERT(isfinite(ev->time));
	FUZZ_ASSERT(ev->pid >= 0 && ev->pid < 10000000);
}

/* Rendered with %.3f and %.6f: back within half a unit of the last digit. */
static bool near(double a, double b, double half)
{
	return fabs(a - b) <= half + fabs(a) * 4e-16;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hpn_event ev, back;
	char line[HPN_EVENT_LINE_MAX], big[4 * HPN_EVENT_LINE_MAX], again[sizeof(big)];
	int r, n, m;

	memset(&ev, 0x5a, sizeof(ev));
	r = hpn_event_parse((const char *)data, size, &ev);
	if (r < 0) {
		FUZZ_ASSERT(r == -EINVAL);
		FUZZ_ASSERT(zeroed(&ev));
		return 0;
	}
	FUZZ_ASSERT(r == 0 && size < HPN_EVENT_LINE_MAX);
	check_bounded(&ev);

	/* Any accepted event renders, one line ending in its newline. */
	n = hpn_event_format(&ev, big, sizeof(big));
	FUZZ_ASSERT(n > 0 && big[n - 1] == '\n' && memchr(big, '\n', (size_t)n) == big + n - 1);
	/* In the writer's buffer exactly when it fits there. */
	m = hpn_event_format(&ev, line, sizeof(line));
	FUZZ_ASSERT(n < HPN_EVENT_LINE_MAX ? m == n && !memcmp(line, big, (size_t)n)
					   : m == -ENOSPC);
	if (m < 0)
		return 0; /* the plugin would not write it (best effort) */

	/* What the writer writes, the reader reads back: the same event. */
	memset(&back, 0x5a, sizeof(back));
	r = hpn_event_parse(line, (size_t)m - 1, &back);
	FUZZ_ASSERT(r == 0);
	check_bounded(&back);
	FUZZ_ASSERT(!strcmp(back.command, ev.command));
	FUZZ_ASSERT(!strcmp(back.network, ev.network));
	FUZZ_ASSERT(!strcmp(back.container_id, ev.container_id));
	FUZZ_ASSERT(!strcmp(back.ifname, ev.ifname));
	FUZZ_ASSERT(back.code == ev.code && back.pid == ev.pid);
	FUZZ_ASSERT(near(back.seconds, ev.seconds, 5e-7));
	FUZZ_ASSERT(near(back.time, ev.time, 5e-4));
	/* And renders to the same text: a fixpoint after one round. */
	FUZZ_ASSERT(hpn_event_format(&back, again, sizeof(again)) == m &&
		    !memcmp(again, line, (size_t)m));
	return 0;
}
