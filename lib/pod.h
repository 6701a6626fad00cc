/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_POD_H
#define HPN_POD_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/*
 * A Pod object as the Kubernetes API returns it (core/v1 Pod, JSON), reduced
 * to what the plugin decides by: identity, labels, annotations and the count
 * of one extended resource (GPUs).
 */

#define HPN_POD_GPU_RESOURCE "nvidia.com/gpu" /* the default resource counted */
#define HPN_POD_META_MAX     1024	      /* labels, and annotations, each */
/* Kubernetes' own limit on the annotations' total size (keys and values). */
#define HPN_POD_ANNOTATIONS_BYTES ((size_t)256 * 1024)
#define HPN_POD_CONTAINERS_MAX	  1024 /* containers, and initContainers, each */
#define HPN_POD_UID_MAX		  64
#define HPN_POD_COUNT_MAX	  999999999UL /* a resource count, per container and in all */

struct hpn_pod_kv {
	char *key;
	char *value;
};

struct hpn_pod {
	char *uid;  /* metadata.uid */
	char *ns;   /* metadata.namespace */
	char *name; /* metadata.name */
	struct hpn_pod_kv *labels;
	size_t n_labels;
	struct hpn_pod_kv *annotations;
	size_t n_annotations;
	char *resource;	     /* the resource counted (copy of the argument) */
	unsigned long count; /* the pod's effective request of it (see hpn_pod_parse) */
};

/*
 * Parses json[0..len) (the body of GET /api/v1/namespaces/NS/pods/NAME) into
 * *ret. resource (NULL: HPN_POD_GPU_RESOURCE) is the extended resource to
 * count. The count is the pod's effective request as the scheduler computes it
 * (k8s.io/component-helpers resource.PodRequests), for this one resource:
 *   - a container asks for its limits[resource], else its requests[resource],
 *     else 0 (an extended resource's request defaults to, and must equal, its
 *     limit);
 *   - the app containers run together: their sum;
 *   - init containers run one at a time, before them: the largest one; a
 *     restartable init container (restartPolicy: Always, a sidecar) keeps
 *     running from its start on, so it adds to every init container after it
 *     and to the app containers;
 *   - count = max(sum(containers) + sum(sidecars),
 *                 max over init containers i of (its request + sidecars before i)).
 *   Pod overhead and pod-level resources never hold extended resources.
 * A quantity must be a JSON string of 1..9 decimal digits ("8"): anything else
 * ("8.5", "1k", "-1", 8) is refused, naming the field, e.g.
 * pod.spec.containers[2].resources.limits.nvidia.com/gpu.
 * Strict: kind Pod, apiVersion v1, metadata.uid, .namespace and .name present
 * and well-formed, labels and annotations objects of strings with Kubernetes'
 * key and value syntax, unique, at most HPN_POD_META_MAX each and annotations
 * within HPN_POD_ANNOTATIONS_BYTES, spec.containers a non-empty array, every
 * field read of the right JSON type. Every error is code HPN_E_KUBE (the API
 * answered something that is not a valid Pod) with a message naming the field.
 * *ret is written only on success; free it with hpn_pod_free.
 */
int hpn_pod_parse(const char *json, size_t len, const char *resource, struct hpn_pod *ret,
		  struct hpn_err *err);
void hpn_pod_free(struct hpn_pod *pod);

/* The value of a label or annotation, or NULL. */
const char *hpn_pod_label(const struct hpn_pod *pod, const char *key);
const char *hpn_pod_annotation(const struct hpn_pod *pod, const char *key);

/* Kubernetes' name rules (k8s.io/apimachinery/pkg/util/validation). */
bool hpn_k8s_dns_label(const char *s);	    /* RFC 1123 label, <= 63: a namespace */
bool hpn_k8s_dns_subdomain(const char *s);  /* RFC 1123 subdomain, <= 253: a pod name */
bool hpn_k8s_qualified_name(const char *s); /* [prefix/]name: label, annotation, resource keys */
bool hpn_k8s_label_value(const char *s);    /* empty, or a name part of <= 63 */
bool hpn_k8s_uid(const char *s); /* an object's uid: 1 to HPN_POD_UID_MAX of [A-Za-z0-9-] */

#endif
