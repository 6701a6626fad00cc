// SPDX-License-Identifier: Apache-2.0
/* The pod question on the agent's lookup socket: its reply, both sides (podask.h). */
#include "podask.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "util.h"

/* s (NULL or "": nothing) appended to a (n of them). */
static void key_add(char a[][HPN_ALLOC_KEY_MAX], size_t *n, const char *s)
{
	if (s && s[0] && *n < HPN_ALLOC_KEYS_MAX)
		snprintf(a[(*n)++], HPN_ALLOC_KEY_MAX, "%s", s);
}

void hpn_podask_keys(const struct hpn_conf *conf, struct hpn_alloc_keys *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->set = true;
	key_add(ret->labels, &ret->n_labels, conf->pod_label);
	key_add(ret->labels, &ret->n_labels, conf->gpu_model_label);
	key_add(ret->annotations, &ret->n_annotations, conf->gpu_model_annotation);
	snprintf(ret->resource, sizeof(ret->resource), "%s",
		 conf->kube.gpu_resource ? conf->kube.gpu_resource : HPN_POD_GPU_RESOURCE);
}

static bool has_key(const char a[][HPN_ALLOC_KEY_MAX], size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(a[i], s))
			return true;
	return false;
}

bool hpn_podask_keys_kept(const struct hpn_alloc_keys *asked, const struct hpn_alloc_keys *kept,
			  char *why, size_t len)
{
	static const char fmt[] = "the agent's pod cache keeps other keys than this config reads "
				  "(its --config's): %s \"%.318s\" is not kept";

	if (!asked->set || !kept->set)
		return true;
	for (size_t i = 0; i < asked->n_labels; i++)
		if (!has_key(kept->labels, kept->n_labels, asked->labels[i])) {
			snprintf(why, len, fmt, "label", asked->labels[i]);
			return false;
		}
	for (size_t i = 0; i < asked->n_annotations; i++)
		if (!has_key(kept->annotations, kept->n_annotations, asked->annotations[i])) {
			snprintf(why, len, fmt, "annotation", asked->annotations[i]);
			return false;
		}
	if (asked->resource[0] && strcmp(asked->resource, kept->resource)) {
		snprintf(why, len, fmt, "resource", asked->resource);
		return false;
	}
	return true;
}

char *hpn_podask_reply_render(const char *pod_json, const char *why)
{
	cJSON *o;
	char *s;

	/* The cached JSON goes out as it is: no parse and print per question. */
	if (pod_json) {
		if (asprintf(&s, "{\"version\":%d,\"pod\":%s}", HPN_ALLOC_PROTO_VERSION, pod_json) <
		    0)
			return NULL;
		return s;
	}
	o = cJSON_CreateObject();
	if (!o || !cJSON_AddNumberToObject(o, "version", HPN_ALLOC_PROTO_VERSION) ||
	    !cJSON_AddStringToObject(o, "unknown", why ? why : "")) {
		cJSON_Delete(o);
		return NULL;
	}
	return hpn_json_print(o);
}

int hpn_podask_reply_parse(const char *buf, size_t len, const char *resource, struct hpn_pod *ret,
			   struct hpn_err *err)
{
	cJSON *o = hpn_json_parse(buf, len);
	const cJSON *v, *pod, *unknown, *error;
	char *json = NULL;
	int r;

	if (!cJSON_IsObject(o) || hpn_json_has_nul(buf, len)) {
		r = hpn_err_set(err, HPN_E_DECODE, EINVAL,
				"hpn-rdma-agent's pod reply is not a JSON object");
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "version");
	if (!cJSON_IsNumber(v) || v->valuedouble != HPN_ALLOC_PROTO_VERSION) {
		r = hpn_err_set(err, HPN_E_DECODE, EPROTO,
				"hpn-rdma-agent's pod reply is not of version %d",
				HPN_ALLOC_PROTO_VERSION);
		goto out;
	}
	pod = cJSON_GetObjectItemCaseSensitive(o, "pod");
	unknown = cJSON_GetObjectItemCaseSensitive(o, "unknown");
	error = cJSON_GetObjectItemCaseSensitive(o, "error");
	if (cJSON_IsString(error)) {
		r = hpn_err_set(err, HPN_E_TRY_AGAIN, EAGAIN, "hpn-rdma-agent: %.256s",
				error->valuestring);
		goto out;
	}
	if (cJSON_IsString(unknown)) {
		r = hpn_err_set(err, HPN_E_TRY_AGAIN, ENOENT,
				"hpn-rdma-agent does not know: %.256s", unknown->valuestring);
		goto out;
	}
	if (!cJSON_IsObject(pod)) {
		r = hpn_err_set(err, HPN_E_DECODE, EINVAL,
				"hpn-rdma-agent's pod reply has neither \"pod\" nor \"unknown\"");
		goto out;
	}
	json = cJSON_PrintUnformatted(pod);
	if (!json) {
		r = hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
		goto out;
	}
	r = hpn_pod_parse(json, strlen(json), resource, ret, err);
	if (r < 0)
		hpn_err_prefix(err, "hpn-rdma-agent's pod reply");
out:
	free(json);
	cJSON_Delete(o);
	return r < 0 ? r : 0;
}

int hpn_podask(const char *socket_path, int timeout_ms, const struct hpn_alloc_req *req,
	       const char *resource, struct hpn_pod *ret, struct hpn_err *err)
{
	struct hpn_alloc_req q = *req;
	_cleanup_free_ char *line = NULL, *buf = NULL;
	size_t len = 0;
	int r;

	q.query = HPN_ALLOC_QUERY_POD;
	line = hpn_alloc_req_render(&q);
	if (!line)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	r = hpn_agent_ask(socket_path, timeout_ms, line, HPN_PODASK_REPLY_MAX, &buf, &len, err);
	if (r < 0)
		return r;
	return hpn_podask_reply_parse(buf, len, resource, ret, err);
}
