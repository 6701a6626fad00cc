// SPDX-License-Identifier: Apache-2.0
/*
 * hpn_pod_parse: the body of GET /api/v1/namespaces/NS/pods/NAME, as a
 * hostile or broken API server may send it, counting nvidia.com/gpu.
 */
#include <errno.h>
#include <string.h>

#include "err.h"
#include "fuzz.h"
#include "pod.h"
#include "roundtrip.h"

static void check_kv(const struct hpn_pod_kv *kv, size_t n, bool labels,
		     const char *(*get)(const struct hpn_pod *, const char *),
		     const struct hpn_pod *pod)
{
	size_t bytes = 0;

	FUZZ_ASSERT(n <= HPN_POD_META_MAX);
	for (size_t i = 0; i < n; i++) {
		FUZZ_ASSERT(kv[i].key && kv[i].value);
		FUZZ_ASSERT(hpn_k8s_qualified_name(kv[i].key));
		FUZZ_ASSERT(!labels || hpn_k8s_label_value(kv[i].value));
		bytes += strlen(kv[i].key) + strlen(kv[i].value);
		/* Keys are unique, so a lookup finds this very entry. */
		FUZZ_ASSERT(get(pod, kv[i].key) == kv[i].value);
	}
	FUZZ_ASSERT(bytes <= HPN_POD_ANNOTATIONS_BYTES);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hpn_pod pod = { .count = 4242 };
	struct hpn_err err = { 0 };
	int r;

	r = hpn_pod_parse((const char *)data, size, NULL, &pod, &err);
	fuzz_err_matches(r, &err);
	if (r < 0) {
		/* Nothing but the API's answer is wrong here: always HPN_E_KUBE. */
		FUZZ_ASSERT(err.code == HPN_E_KUBE && r == -EINVAL);
		FUZZ_ASSERT(!strncmp(err.msg, "the answer is not a valid Pod: ", 31));
		FUZZ_ASSERT(pod.count == 4242 && !pod.uid); /* untouched */
		return 0;
	}
	FUZZ_ASSERT(pod.uid && pod.uid[0] && strlen(pod.uid) <= HPN_POD_UID_MAX &&
		    strspn(pod.uid, "0123456789abcdefABCDEF"
				    "ghijklmnopqrstuvwxyz"
				    "GHIJKLMNOPQRSTUVWXYZ-") == strlen(pod.uid));
	FUZZ_ASSERT(hpn_k8s_dns_label(pod.ns));
	FUZZ_ASSERT(hpn_k8s_dns_subdomain(pod.name));
	FUZZ_ASSERT(!strcmp(pod.resource, HPN_POD_GPU_RESOURCE));
	FUZZ_ASSERT(pod.count <= HPN_POD_COUNT_MAX);
	check_kv(pod.labels, pod.n_labels, true, hpn_pod_label, &pod);
	check_kv(pod.annotations, pod.n_annotations, false, hpn_pod_annotation, &pod);
	/*
	 * The shape does not depend on the resource counted: counting one that the
	 * input never names succeeds, with 0, and finds the same pod.
	 */
	if (!memmem(data, size, "example.com/none", 16)) {
		struct hpn_pod other = { 0 };
		struct hpn_err err2 = { 0 };

		FUZZ_ASSERT(hpn_pod_parse((const char *)data, size, "example.com/none", &other,
					  &err2) == 0);
		FUZZ_ASSERT(other.count == 0 && other.n_labels == pod.n_labels &&
			    other.n_annotations == pod.n_annotations &&
			    !strcmp(other.uid, pod.uid));
		hpn_pod_free(&other);
	}
	hpn_pod_free(&pod);
	FUZZ_ASSERT(!pod.uid && !pod.n_labels && !pod.n_annotations);
	return 0;
}
