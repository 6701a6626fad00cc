// SPDX-License-Identifier: Apache-2.0
/*
 * hpn_result_parse: IPAM plugins' results and runtimes' prevResults (any
 * version, with the "rdma" list), then rendering in every version, parsing the
 * rendering back, and joining results the way ADD does.
 */
#include <errno.h>
#include <string.h>

#include "cni.h"
#include "fuzz.h"
#include "result.h"
#include "roundtrip.h"

/* A result whose IPs and RDMA entries all point at existing interfaces. */
static bool indexes_valid(const struct hpn_result *res)
{
	for (size_t i = 0; i < res->n_ips; i++)
		if (res->ips[i].interface >= (int)res->n_ifaces)
			return false;
	for (size_t i = 0; i < res->n_rdma; i++)
		if (res->rdma[i].interface < 0 || res->rdma[i].interface >= (int)res->n_ifaces)
			return false;
	return true;
}

static void render_all(const struct hpn_result *res)
{
	for (size_t i = 0; hpn_cni_versions[i]; i++) {
		char *text = hpn_result_render(res, hpn_cni_versions[i]);

		FUZZ_ASSERT(text);
		free(text);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hpn_result *res = (struct hpn_result *)0x1, *joined;
	struct hpn_err err = { 0 };
	int r;

	r = hpn_result_parse((const char *)data, size, &res, &err);
	fuzz_err_matches(r, &err);
	if (r < 0) {
		FUZZ_ASSERT(res == (struct hpn_result *)0x1); /* not written on failure */
		return 0;
	}
	FUZZ_ASSERT(indexes_valid(res));
	fuzz_result_roundtrip(res);

	/*
	 * Chaining (iface -1: a prevResult keeps its own interface indexes) and
	 * IPAM (iface 0: every IP belongs to our interface), one after the other
	 * onto a fresh result, as ADD builds its answer.
	 */
	joined = hpn_result_new();
	FUZZ_ASSERT(joined);
	r = hpn_result_append(joined, res, -1);
	FUZZ_ASSERT(r == 0); /* parsing keeps within the limits appending checks */
	FUZZ_ASSERT(joined->n_ifaces == res->n_ifaces && joined->n_ips == res->n_ips &&
		    joined->n_routes == res->n_routes && joined->n_rdma == res->n_rdma);
	FUZZ_ASSERT(indexes_valid(joined));
	fuzz_result_roundtrip(joined);
	r = hpn_result_append(joined, res, 0);
	FUZZ_ASSERT(r == 0 || r == -E2BIG);
	render_all(joined);
	/* Interface 0 exists unless the result had none (an IPAM result alone). */
	if (joined->n_ifaces > 0) {
		FUZZ_ASSERT(indexes_valid(joined));
		fuzz_result_roundtrip(joined);
	}
	hpn_result_free(joined);
	hpn_result_free(res);
	return 0;
}
