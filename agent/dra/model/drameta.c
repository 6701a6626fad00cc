// SPDX-License-Identifier: Apache-2.0
/*
 * A claim's device metadata file (drameta.h), rendered and updated as text.
 * The shape is upstream's DeviceMetadata (k8s.io/dynamic-resource-allocation
 * api/metadata/v1beta1 and v1alpha1: the same fields, v1beta1 validated),
 * in the order its encoder writes the fields.
 */
#include "drameta.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Newest first: the versions a consumer tries in order. */
static const char *const versions[] = { HPN_DRAMETA_GROUP "/v1beta1",
					HPN_DRAMETA_GROUP "/v1alpha1" };

static cJSON *net_json(const struct hpn_drameta_net *n)
{
	cJSON *o = cJSON_CreateObject(), *ips = NULL;
	bool ok = o != NULL;

	/* Each field omitted when empty, as upstream's encoder does (omitempty). */
	if (ok && n->ifname[0])
		ok = cJSON_AddStringToObject(o, "interfaceName", n->ifname) != NULL;
	if (ok && n->n_ips)
		ok = (ips = cJSON_AddArrayToObject(o, "ips")) != NULL;
	for (size_t i = 0; ok && i < n->n_ips; i++)
		ok = hpn_json_push(ips, cJSON_CreateString(n->ips[i]));
	if (ok && n->mac[0])
		ok = cJSON_AddStringToObject(o, "hardwareAddress", n->mac) != NULL;
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* The object once per version, one line each. */
static char *stream(cJSON *root)
{
	cJSON *api = cJSON_GetObjectItemCaseSensitive(root, "apiVersion");
	char *parts[HPN_ARRAY_SIZE(versions)] = { 0 }, *out = NULL;
	size_t len = 0;

	for (size_t i = 0; i < HPN_ARRAY_SIZE(versions); i++) {
		if (!cJSON_SetValuestring(api, versions[i]) ||
		    !(parts[i] = cJSON_PrintUnformatted(root)))
			goto out;
		len += strlen(parts[i]) + 1;
	}
	out = malloc(len + 1);
	for (size_t i = 0, at = 0; out && i < HPN_ARRAY_SIZE(versions); i++) {
		size_t n = strlen(parts[i]);

		memcpy(out + at, parts[i], n);
		out[at + n] = '\n';
		at += n + 1;
		out[at] = '\0';
	}
out:
	for (size_t i = 0; i < HPN_ARRAY_SIZE(versions); i++)
		cJSON_free(parts[i]);
	return out;
}

char *hpn_drameta_render(const struct hpn_drameta *m)
{
	cJSON *root = cJSON_CreateObject(), *meta = NULL, *reqs = NULL, *req = NULL, *devs = NULL;
	bool ok = root && cJSON_AddStringToObject(root, "kind", "DeviceMetadata") &&
		  cJSON_AddStringToObject(root, "apiVersion", versions[0]) &&
		  (meta = cJSON_AddObjectToObject(root, "metadata")) &&
		  cJSON_AddStringToObject(meta, "name", m->name) &&
		  cJSON_AddStringToObject(meta, "namespace", m->ns) &&
		  cJSON_AddStringToObject(meta, "uid", m->uid) &&
		  cJSON_AddNumberToObject(meta, "generation", (double)m->generation);
	char *s = NULL;

	if (ok && m->pod_claim && m->pod_claim[0])
		ok = cJSON_AddStringToObject(root, "podClaimName", m->pod_claim) != NULL;
	ok = ok && (reqs = cJSON_AddArrayToObject(root, "requests")) &&
	     (req = cJSON_CreateObject()) && cJSON_AddItemToArray(reqs, req) &&
	     cJSON_AddStringToObject(req, "name", m->request) &&
	     (devs = cJSON_AddArrayToObject(req, "devices"));
	for (size_t i = 0; ok && i < m->n; i++) {
		const struct hpn_drameta_dev *d = &m->devs[i];
		cJSON *o = cJSON_CreateObject();

		ok = hpn_json_push(devs, o) && cJSON_AddStringToObject(o, "driver", m->driver) &&
		     cJSON_AddStringToObject(o, "pool", d->pool) &&
		     cJSON_AddStringToObject(o, "name", d->device);
		if (ok && d->attrs && cJSON_GetArraySize(d->attrs) > 0)
			ok = hpn_json_put(o, "attributes", cJSON_Duplicate(d->attrs, true));
		if (ok && d->net)
			ok = hpn_json_put(o, "networkData", net_json(d->net));
	}
	if (ok)
		s = stream(root);
	cJSON_Delete(root);
	return s;
}

/* The first object of the stream: its first line. */
static cJSON *first_object(const char *text, size_t len)
{
	const char *nl = memchr(text, '\n', len);

	return cJSON_ParseWithLength(text, nl ? (size_t)(nl - text) : len);
}

/* Sets dev's networkData to net (NULL: none): whether it changed; -ENOMEM. */
static int set_net(cJSON *dev, const struct hpn_drameta_net *net)
{
	cJSON *old = cJSON_GetObjectItemCaseSensitive(dev, "networkData"), *want = NULL;
	bool same;

	if (net && !(want = net_json(net)))
		return -ENOMEM;
	same = (!old && !want) || (old && want && cJSON_Compare(old, want, true));
	if (same) {
		cJSON_Delete(want);
		return 0;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(dev, "networkData");
	if (want && !cJSON_AddItemToObject(dev, "networkData", want)) {
		cJSON_Delete(want);
		return -ENOMEM;
	}
	return 1;
}

int hpn_drameta_set_net(const char *text, size_t len, const char *const *pool,
			const char *const *device, const struct hpn_drameta_net *const *net,
			size_t n, char **ret, bool *changed)
{
	cJSON *root = first_object(text, len), *meta, *gen, *reqs, *req;
	bool any = false, *used = calloc(n ? n : 1, sizeof(*used));
	char *s;
	int r = -EINVAL;

	if (!used) {
		cJSON_Delete(root);
		return -ENOMEM;
	}

	meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
	gen = cJSON_GetObjectItemCaseSensitive(meta, "generation");
	reqs = cJSON_GetObjectItemCaseSensitive(root, "requests");
	if (!cJSON_IsObject(root) || !cJSON_IsNumber(gen) || !cJSON_IsArray(reqs) ||
	    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "apiVersion")))
		goto out;
	cJSON_ArrayForEach (req, reqs) {
		cJSON *devs = cJSON_GetObjectItemCaseSensitive(req, "devices"), *dev;

		cJSON_ArrayForEach (dev, devs) {
			const cJSON *p = cJSON_GetObjectItemCaseSensitive(dev, "pool");
			const cJSON *d = cJSON_GetObjectItemCaseSensitive(dev, "name");

			if (!cJSON_IsString(p) || !cJSON_IsString(d))
				goto out;
			/*
			 * The first of (pool, device) not taken: two shares of one NIC
			 * (one device name) are two entries, in order, each its own.
			 */
			for (size_t i = 0; i < n; i++) {
				if (used[i] || strcmp(p->valuestring, pool[i]) ||
				    strcmp(d->valuestring, device[i]))
					continue;
				used[i] = true;
				r = set_net(dev, net[i]);
				if (r < 0)
					goto out;
				any |= r > 0;
				break;
			}
		}
	}
	if (any && gen)
		cJSON_SetNumberHelper(gen, gen->valuedouble + 1);
	s = stream(root);
	r = s ? 0 : -ENOMEM;
	if (s) {
		*ret = s;
		*changed = any;
	}
out:
	cJSON_Delete(root);
	free(used);
	return r;
}

void hpn_drameta_base_request(const char *request, char *out, size_t len)
{
	snprintf(out, len, "%.*s", (int)strcspn(request, "/"), request);
}

int hpn_drameta_container_path(const char *claim, const char *pod_claim, const char *request,
			       const char *driver, char *out, size_t len)
{
	bool tmpl = pod_claim && pod_claim[0];
	char base[64];

	hpn_drameta_base_request(request, base, sizeof(base));
	return hpn_snprintf(out, len, "%s/%s/%s/%s/%s-metadata.json", HPN_DRAMETA_CONTAINER_DIR,
			    tmpl ? "resourceclaimtemplates" : "resourceclaims",
			    tmpl ? pod_claim : claim, base, driver) < 0
		       ? -ENAMETOOLONG
		       : 0;
}
