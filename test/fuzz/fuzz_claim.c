// SPDX-License-Identifier: Apache-2.0
/*
 * hpn_dra_claim_parse: the body of GET
 * /apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/rdma-0, as a hostile
 * or broken API server may send it, for the DRA driver rdma.hpn.example.com.
 */
#include <errno.h>
#include <string.h>

#include "dra.h"
#include "err.h"
#include "fuzz.h"
#include "pod.h"
#include "roundtrip.h"

#define NS     "ml"
#define NAME   "rdma-0"
#define UID    "6a1f0c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"
#define DRV    "rdma.hpn.example.com"
#define PREFIX "ResourceClaim " NS "/" NAME ": "

/* data parsed for driver: code 109 naming the claim, or a success. */
static int parse(const uint8_t *data, size_t size, const char *uid, const char *driver,
		 struct hpn_dra_claim *out, struct hpn_err *err)
{
	return hpn_dra_claim_parse((const char *)data, size, NS, NAME, uid, driver, out, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct hpn_dra_claim claim, other;
	struct hpn_err err = { 0 };
	int r;

	memset(&claim, 0, sizeof(claim));
	claim.n = 4242;
	r = parse(data, size, UID, DRV, &claim, &err);
	fuzz_err_matches(r, &err);
	if (r < 0) {
		/* The answer is wrong, or another claim: nothing else. */
		FUZZ_ASSERT((err.code == HPN_E_KUBE && r == -EINVAL) ||
			    (err.code == HPN_E_UNKNOWN_CONTAINER && r == -ESTALE));
		FUZZ_ASSERT(!strncmp(err.msg, PREFIX, strlen(PREFIX)));
		FUZZ_ASSERT(claim.n == 4242 && !claim.uid[0]); /* untouched */
		return 0;
	}
	FUZZ_ASSERT(!strcmp(claim.ns, NS) && !strcmp(claim.name, NAME) && !strcmp(claim.uid, UID));
	FUZZ_ASSERT(claim.n >= 1 && claim.n <= HPN_DRA_MAX_RESULTS);
	for (size_t i = 0; i < claim.n; i++) {
		const struct hpn_dra_result *v = &claim.v[i];

		FUZZ_ASSERT(hpn_dra_request_ok(v->request) && hpn_dra_pool_ok(v->pool) &&
			    hpn_k8s_dns_label(v->device));
		for (size_t j = 0; j < i; j++)
			FUZZ_ASSERT(strcmp(claim.v[j].pool, v->pool) ||
				    strcmp(claim.v[j].device, v->device));
	}
	FUZZ_ASSERT(claim.n_pods <= HPN_DRA_MAX_PODS);
	for (size_t i = 0; i < claim.n_pods; i++) {
		size_t n = strlen(claim.pods[i]);

		FUZZ_ASSERT(n >= 1 && n <= HPN_POD_UID_MAX &&
			    strspn(claim.pods[i], "0123456789abcdefghijklmnopqrstuvwxyz"
						  "ABCDEFGHIJKLMNOPQRSTUVWXYZ-") == n);
		for (size_t j = 0; j < i; j++)
			FUZZ_ASSERT(strcmp(claim.pods[j], claim.pods[i]));
	}
	/* The same answer asked under another UID is another claim: code 3. */
	memset(&err, 0, sizeof(err));
	FUZZ_ASSERT(parse(data, size, "00000000-0000-4000-8000-000000000000", DRV, &other, &err) ==
			    -ESTALE &&
		    err.code == HPN_E_UNKNOWN_CONTAINER);
	/*
	 * Only the driver decides which results are kept: for a driver the
	 * input never names (no escapes either, which could spell it), the same
	 * answer allocates nothing.
	 */
	if (!memmem(data, size, "none.example.com", 16) && !memmem(data, size, "\\u", 2)) {
		memset(&err, 0, sizeof(err));
		FUZZ_ASSERT(parse(data, size, UID, "none.example.com", &other, &err) == -EINVAL &&
			    strstr(err.msg, "allocates no device of none.example.com"));
	}
	return 0;
}
