// SPDX-License-Identifier: Apache-2.0
/*
 * The agent lookup protocol (lib/alloc.c), both sides of outside input: the
 * request line the agent reads from any root process on its socket, and the
 * reply the CNI reads from the agent. The first byte picks the side; a
 * reply is read both as the devices' answer and as the NRI question's. What
 * parses must render and parse back to the same values, and hold only what
 * the protocol allows (pod names in their character sets, valid device IDs,
 * an NRI reply's words printable ASCII).
 */
#include <stdbool.h>
#include <string.h>

#include "alloc.h"
#include "fuzz.h"
#include "roundtrip.h"

static void request(const char *s, size_t len)
{
	struct hpn_alloc_req req, back;
	struct hpn_err err = { 0 }, err2 = { 0 };
	int r = hpn_alloc_req_parse(s, len, &req, &err);
	char *line;

	fuzz_err_matches(r, &err);
	if (r < 0)
		return;
	FUZZ_ASSERT(req.query <= HPN_ALLOC_QUERY_NRI);
	/* A pod, both names: the NRI question alone may name none (then no UID either). */
	if (req.query == HPN_ALLOC_QUERY_NRI && !req.namespace[0])
		FUZZ_ASSERT(!req.name[0] && !req.uid[0]);
	else
		FUZZ_ASSERT(req.namespace[0] && req.name[0]);
	FUZZ_ASSERT(!strpbrk(req.namespace, "/. ") && !strpbrk(req.name, "/ "));
	line = hpn_alloc_req_render(&req);
	FUZZ_ASSERT(line && line[strlen(line) - 1] == '\n');
	FUZZ_ASSERT(hpn_alloc_req_parse(line, strlen(line) - 1, &back, &err2) == 0);
	FUZZ_ASSERT(!strcmp(back.namespace, req.namespace) && !strcmp(back.name, req.name) &&
		    !strcmp(back.uid, req.uid) && back.query == req.query);
	/* The pod question's keys round-trip whole (both zeroed, then written by the parser). */
	FUZZ_ASSERT(!memcmp(&back.keys, &req.keys, sizeof(req.keys)));
	FUZZ_ASSERT(req.query == HPN_ALLOC_QUERY_POD || !req.keys.set);
	free(line);
}

/* printable ASCII, as both sides keep an NRI reply's words. */
static bool printable(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s >= 0x7f)
			return false;
	return true;
}

/* The same bytes as the NRI question's reply: its fields bounded, rendered back the same. */
static void nri_reply(const char *s, size_t len)
{
	struct hpn_nri_state st, back;
	struct hpn_err err = { 0 }, err2 = { 0 };
	int r = hpn_nri_reply_parse(s, len, &st, &err);
	char *json;

	fuzz_err_matches(r, &err);
	if (r < 0)
		return;
	FUZZ_ASSERT(printable(st.runtime) && printable(st.version) && printable(st.socket) &&
		    printable(st.why));
	json = hpn_nri_reply_render(&st, NULL);
	FUZZ_ASSERT(json);
	FUZZ_ASSERT(hpn_nri_reply_parse(json, strlen(json), &back, &err2) == 0);
	FUZZ_ASSERT(back.registered == st.registered && !strcmp(back.runtime, st.runtime) &&
		    !strcmp(back.version, st.version) && !strcmp(back.socket, st.socket) &&
		    !strcmp(back.why, st.why));
	free(json);
}

static void reply(const char *s, size_t len)
{
	struct hpn_alloc a, back;
	struct hpn_err err = { 0 }, err2 = { 0 };
	int r = hpn_alloc_reply_parse(s, len, &a, &err);
	char *json;

	fuzz_err_matches(r, &err);
	if (r < 0)
		return;
	FUZZ_ASSERT(a.n <= HPN_ALLOC_MAX_DEVICES);
	for (size_t i = 0; i < a.n; i++)
		FUZZ_ASSERT(hpn_alloc_id_valid(a.ids[i]));
	json = hpn_alloc_reply_render(&a, NULL);
	FUZZ_ASSERT(json);
	FUZZ_ASSERT(hpn_alloc_reply_parse(json, strlen(json), &back, &err2) == 0);
	FUZZ_ASSERT(back.n == a.n && back.pod_known == a.pod_known &&
		    !strcmp(back.resource, a.resource));
	for (size_t i = 0; i < a.n; i++)
		FUZZ_ASSERT(!strcmp(back.ids[i], a.ids[i]));
	/* The optional DRA fields: a word, claims "ns/name", both carried back. */
	FUZZ_ASSERT(!strcmp(back.source, a.source) && back.n_claims == a.n_claims);
	FUZZ_ASSERT(a.n_claims <= HPN_ALLOC_MAX_CLAIMS && !strpbrk(a.source, "/ \"{}"));
	for (size_t i = 0; i < a.n_claims; i++)
		FUZZ_ASSERT(!strcmp(back.claims[i], a.claims[i]) && strchr(a.claims[i], '/') &&
			    !strstr(a.claims[i], ".."));
	free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size < 1 || size > HPN_ALLOC_REPLY_MAX)
		return 0;
	s = malloc(size);
	FUZZ_ASSERT(s);
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	if (data[0] & 1) {
		reply(s, size - 1);
		nri_reply(s, size - 1);
	} else
		request(s, size - 1);
	free(s);
	return 0;
}
