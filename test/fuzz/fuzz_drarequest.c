// SPDX-License-Identifier: Apache-2.0
/*
 * NodePrepareResources and NodeUnprepareResources as a hostile or broken
 * kubelet may call them: the request's bytes unpacked by protobuf-c, then
 * its claims checked as drakubelet.c's handlers check them
 * (draclaims_request_ok) before anything is read, recorded or removed.
 *
 * Input: a byte (bit 0: NodeUnprepareResourcesRequest, else
 * NodePrepareResourcesRequest), then the request's bytes.
 *
 * Checked, beyond the sanitizers: the bytes unpack with dra-v1.proto's code
 * (the agent's, for both versions' method paths) exactly when they unpack
 * with dra-v1beta1.proto's (generated for this harness), to the same claims;
 * a call of over 32 claims is refused; else the first claim whose namespace
 * is not a DNS label, name not a DNS subdomain or uid not 1-57 of
 * [A-Za-z0-9-] is refused with a message naming its place and that field,
 * and a uid named twice is refused naming it; everything else is accepted,
 * and each accepted claim fits NodePrepareResources' machine
 * (draprepare.h) uncut.
 */
#include <string.h>

#include "dra-v1.pb-c.h"
#include "dra-v1beta1.pb-c.h"
#include "draclaims.h"
#include "draprepare.h"
#include "fuzz.h"
#include "pod.h"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim Claim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__Claim ClaimBeta;

/* The claims of either request, either version: their count and array. */
struct claims {
	size_t n;
	void *const *v;
};

static struct claims claims_of(const ProtobufCMessage *m)
{
	/* Both requests are one repeated Claim claims = 1: its count and array. */
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field(m->descriptor, 1);

	FUZZ_ASSERT(f && f->label == PROTOBUF_C_LABEL_REPEATED);
	return (struct claims){ *(const size_t *)((const char *)m + f->quantifier_offset),
				*(void *const *)((const char *)m + f->offset) };
}

/* 1-57 of [A-Za-z0-9-]: a claim UID the records and CDI names carry. */
static bool uid_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > DRA_CLAIM_UID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* What the check must answer: true, or false with what its message must hold in want. */
static bool verdict(Claim *const *v, size_t n, char *want, size_t len)
{
	if (n > DRA_CALL_CLAIMS) {
		snprintf(want, len, "%zu claims in one call, over %d", n, DRA_CALL_CLAIMS);
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		const char *field = !hpn_k8s_dns_label(v[i]->namespace_) ? "namespace"
				    : !hpn_k8s_dns_subdomain(v[i]->name) ? "name"
				    : !uid_ok(v[i]->uid)		 ? "uid"
									 : NULL;

		if (field) {
			snprintf(want, len, "claim %zu: %s is not ", i + 1, field);
			return false;
		}
		for (size_t k = 0; k < i; k++)
			if (!strcmp(v[i]->uid, v[k]->uid)) {
				snprintf(want, len, "claim %s named twice", v[i]->uid);
				return false;
			}
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const ProtobufCMessageDescriptor *const v1[] = {
		&k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__descriptor,
		&k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__descriptor,
	};
	static const ProtobufCMessageDescriptor *const v1beta1[] = {
		&k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_request__descriptor,
		&k8s__io__kubelet__pkg__apis__dra__v1beta1__node_unprepare_resources_request__descriptor,
	};
	ProtobufCMessage *m, *mb;
	struct claims c, cb;
	char msg[256], want[256] = "";
	bool ok, expect;

	if (size < 1)
		return 0;
	m = protobuf_c_message_unpack(v1[data[0] & 1], NULL, size - 1, data + 1);
	mb = protobuf_c_message_unpack(v1beta1[data[0] & 1], NULL, size - 1, data + 1);
	FUZZ_ASSERT(!m == !mb);
	if (!m)
		return 0;
	c = claims_of(m);
	cb = claims_of(mb);
	FUZZ_ASSERT(c.n == cb.n && c.n <= size);
	for (size_t i = 0; i < c.n; i++) {
		const Claim *a = c.v[i];
		const ClaimBeta *b = cb.v[i];

		FUZZ_ASSERT(!strcmp(a->namespace_, b->namespace_) && !strcmp(a->name, b->name) &&
			    !strcmp(a->uid, b->uid));
	}
	expect = verdict((Claim *const *)c.v, c.n, want, sizeof(want));
	memset(msg, 0x5a, sizeof(msg));
	ok = draclaims_request_ok((Claim *const *)c.v, c.n, msg, sizeof(msg));
	FUZZ_ASSERT(ok == expect);
	if (!ok) {
		FUZZ_ASSERT(memchr(msg, '\0', sizeof(msg)) && strstr(msg, want));
	} else {
		for (size_t i = 0; i < c.n; i++) {
			const Claim *a = c.v[i];
			struct hpn_dra_prep_claim q;

			FUZZ_ASSERT(strlen(a->namespace_) < sizeof(q.ns) &&
				    strlen(a->name) < sizeof(q.name) &&
				    strlen(a->uid) < sizeof(q.uid));
		}
	}
	protobuf_c_message_free_unpacked(m, NULL);
	protobuf_c_message_free_unpacked(mb, NULL);
	return 0;
}
