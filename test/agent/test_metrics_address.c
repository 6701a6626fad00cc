// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for metrics_parse_address and metrics_address_error
 * (agent/metrics.c), the parser of --metrics-address: IPv4:PORT, [IPv6]:PORT
 * and unbracketed IPv6 with the port after the last ':' (issue 40 finding 7:
 * $(HOST_IP):9467 on an IPv6 node); everything else refused with a reason,
 * the outputs untouched.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "check.h"
#include "metrics.h"

/* s parses to family, the address text (inet_ntop's) and port, and has no error. */
static void good(const char *s, int family, const char *addr, unsigned int port)
{
	struct sockaddr_storage sa;
	unsigned int len = 0;
	char text[INET6_ADDRSTRLEN] = "";
	int r;

	memset(&sa, 0xa5, sizeof(sa));
	r = metrics_parse_address(s, &sa, &len);
	CHECK_INT_EQ(r, 0);
	CHECK_STR_EQ(metrics_address_error(s), NULL);
	if (r < 0) {
		fprintf(stderr, "\tfor \"%s\"\n", s);
		return;
	}
	CHECK_INT_EQ(sa.ss_family, family);
	if (family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&sa;

		CHECK_INT_EQ(len, sizeof(*s6));
		inet_ntop(AF_INET6, &s6->sin6_addr, text, sizeof(text));
		CHECK_INT_EQ(ntohs(s6->sin6_port), port);
		CHECK_INT_EQ(s6->sin6_scope_id, 0);
		CHECK_INT_EQ(s6->sin6_flowinfo, 0);
	} else {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&sa;

		CHECK_INT_EQ(len, sizeof(*s4));
		inet_ntop(AF_INET, &s4->sin_addr, text, sizeof(text));
		CHECK_INT_EQ(ntohs(s4->sin_port), port);
	}
	CHECK_STR_EQ(text, addr);
}

/* s is refused, sa and len untouched, and the reason has want in it. */
static void bad(const char *s, const char *want)
{
	struct sockaddr_storage sa, before;
	unsigned int len = 12345;
	const char *why;

	memset(&sa, 0x5a, sizeof(sa));
	before = sa;
	CHECK_INT_EQ(metrics_parse_address(s, &sa, &len), -EINVAL);
	CHECK(!memcmp(&sa, &before, sizeof(sa)));
	CHECK_INT_EQ(len, 12345);
	why = metrics_address_error(s);
	CHECK_STR_HAS(why, want);
	if (!why || !strstr(why, want))
		fprintf(stderr, "\tfor \"%s\"\n", s);
}

int main(void)
{
	char lng[300];

	/* IPv4:PORT */
	good("127.0.0.1:9467", AF_INET, "127.0.0.1", 9467);
	good("0.0.0.0:0", AF_INET, "0.0.0.0", 0);
	good("10.0.0.5:65535", AF_INET, "10.0.0.5", 65535);
	good("10.0.0.5:09467", AF_INET, "10.0.0.5", 9467);
	/* [IPv6]:PORT */
	good("[::1]:9467", AF_INET6, "::1", 9467);
	good("[::]:9467", AF_INET6, "::", 9467);
	good("[fd00::5]:9467", AF_INET6, "fd00::5", 9467);
	good("[fd00::5:9467]:9467", AF_INET6, "fd00::5:9467", 9467);
	good("[::ffff:10.0.0.5]:1", AF_INET6, "::ffff:10.0.0.5", 1);
	/* IPv6 unbracketed: the port after the last ':' ($(HOST_IP):9467). */
	good("::1:9467", AF_INET6, "::1", 9467);
	good("fd00::5:9467", AF_INET6, "fd00::5", 9467);
	good(":::9467", AF_INET6, "::", 9467);
	good("2001:db8:1:2:3:4:5:6:9467", AF_INET6, "2001:db8:1:2:3:4:5:6", 9467);
	good("fe80::1:0", AF_INET6, "fe80::1", 0);
	good("::ffff:10.0.0.5:9467", AF_INET6, "::ffff:10.0.0.5", 9467);

	/* The port. */
	bad("127.0.0.1", "no :PORT");
	bad("localhost", "no :PORT");
	bad("", "no :PORT");
	bad("127.0.0.1:", "no port");
	bad("[::1]:", "no port");
	bad("127.0.0.1:65536", "above 65535");
	bad("127.0.0.1:99999999999999999999999", "above 65535");
	bad("127.0.0.1:+1", "not digits");
	bad("127.0.0.1:-1", "not digits");
	bad("127.0.0.1: 1", "not digits");
	bad("127.0.0.1:1 ", "not digits");
	bad("127.0.0.1:0x10", "not digits");
	bad("[::1]9467", "not digits");
	/* The address. */
	bad(":9467", "no address");
	bad("[]:9467", "no address");
	bad("localhost:9467", "names are not resolved");
	bad("1.2.3:9467", "not an IPv4 or IPv6 address");
	bad("127.1:9467", "not an IPv4 or IPv6 address");
	bad("256.0.0.1:9467", "not an IPv4 or IPv6 address");
	bad(" 127.0.0.1:9467", "not an IPv4 or IPv6 address");
	bad("[127.0.0.1]:9467", "not an IPv6 address in the brackets");
	bad("fd00::5", "not an IPv6 address before the last ':'");
	bad("::1", "not an IPv6 address before the last ':'");
	bad("fd00::g:9467", "not an IPv6 address before the last ':'");
	bad("1:2:3:4:5:6:7:8:9:9467", "not an IPv6 address before the last ':'");
	bad("[::1:9467", "'[' without ']'");
	bad("::1]:9467", "brackets");
	bad("[[::1]]:9467", "brackets");
	bad("[::1]x:9467", "'[' without ']'");
	bad("fe80::1%eth0:9467", "zone");
	bad("[fe80::1%eth0]:9467", "zone");
	bad("0000:0000:0000:0000:0000:0000:0000:0000:0000:0000:9467",
	    "not an IPv4 or IPv6 address");
	memset(lng, '1', sizeof(lng) - 1);
	lng[sizeof(lng) - 1] = '\0';
	lng[3] = ':';
	bad(lng, "too long");
	return check_done();
}
