// SPDX-License-Identifier: Apache-2.0
/* The pod question on the agent's lookup socket: its reply, both sides (podask.h). */
#include "podask.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

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
