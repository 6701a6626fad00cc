// SPDX-License-Identifier: Apache-2.0
/*
 * metrics_parse_address and metrics_address_error (agent/metrics.c): the
 * agent's --metrics-address, from its command line, which a DaemonSet builds
 * from the Downward API ($(HOST_IP):9467).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "fuzz.h"
#include "metrics.h"

/* t parses to exactly sa (family, address, port; the rest zero). */
static void same(const char *t, const struct sockaddr_storage *sa, unsigned int len)
{
	struct sockaddr_storage again;
	unsigned int len2 = 0;

	memset(&again, 0x5a, sizeof(again));
	FUZZ_ASSERT(metrics_parse_address(t, &again, &len2) == 0);
	FUZZ_ASSERT(len2 == len && !memcmp(&again, sa, len));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_storage sa, before;
	char s[512], text[INET6_ADDRSTRLEN], t[INET6_ADDRSTRLEN + 16];
	const char *why, *colon;
	unsigned int len = 7, port = 0;
	int r;

	if (size >= sizeof(s))
		size = sizeof(s) - 1;
	memcpy(s, data, size);
	s[size] = '\0';
	memset(&sa, 0xa5, sizeof(sa));
	before = sa;
	r = metrics_parse_address(s, &sa, &len);
	why = metrics_address_error(s);
	FUZZ_ASSERT(r == 0 || r == -EINVAL);
	/* The reason is there exactly when the address is refused, and words. */
	FUZZ_ASSERT((r == 0) == (why == NULL));
	if (r < 0) {
		FUZZ_ASSERT(why[0] && strlen(why) < 120);
		/* Outputs are written only on success. */
		FUZZ_ASSERT(len == 7 && !memcmp(&sa, &before, sizeof(sa)));
		return 0;
	}
	/* The port is the digits after the last ':', and nothing else is there. */
	colon = strrchr(s, ':');
	FUZZ_ASSERT(colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1));
	for (const char *p = colon + 1; *p; p++)
		port = port * 10 + (unsigned int)(*p - '0');
	FUZZ_ASSERT(port <= 65535);
	FUZZ_ASSERT(!strpbrk(s, " \t\n%"));
	if (sa.ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&sa;

		FUZZ_ASSERT(len == sizeof(*s4) && ntohs(s4->sin_port) == port);
		FUZZ_ASSERT(!strchr(s, '[') && colon == strchr(s, ':'));
		FUZZ_ASSERT(inet_ntop(AF_INET, &s4->sin_addr, text, sizeof(text)));
		/* IPv4 is only the dotted quad: inet_ntop writes back the address given. */
		FUZZ_ASSERT(strlen(text) == (size_t)(colon - s) && !strncmp(s, text, strlen(text)));
		snprintf(t, sizeof(t), "%s:%u", text, port);
		same(t, &sa, len);
	} else {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&sa;

		FUZZ_ASSERT(sa.ss_family == AF_INET6);
		FUZZ_ASSERT(len == sizeof(*s6) && ntohs(s6->sin6_port) == port);
		FUZZ_ASSERT(!s6->sin6_scope_id && !s6->sin6_flowinfo);
		FUZZ_ASSERT(inet_ntop(AF_INET6, &s6->sin6_addr, text, sizeof(text)));
		/* Bracketed or not, the same address and port. */
		snprintf(t, sizeof(t), "[%s]:%u", text, port);
		same(t, &sa, len);
		snprintf(t, sizeof(t), "%s:%u", text, port);
		same(t, &sa, len);
	}
	return 0;
}
