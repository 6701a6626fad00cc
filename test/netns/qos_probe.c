// SPDX-License-Identifier: Apache-2.0
/*
 * hpn-qos-probe IFNAME...: lib/qos.c's hpn_qos_read, the real socket path,
 * for each name in the netns the probe runs in (netns.qos runs it with `ip
 * netns exec`), one JSON object a line: {"ifname", "r" (0 or -errno),
 * "code", "msg", "state", "dcbx", "nDscp", "pfcKnown"}. Exit 0 when every
 * read ran (whatever it answered), 2 for a usage error.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "qos.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: hpn-qos-probe IFNAME...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct hpn_err err = { 0 };
		struct hpn_qos q;
		cJSON *o = cJSON_CreateObject();
		char *text;
		int r;

		hpn_qos_init(&q);
		r = hpn_qos_read(NULL, "/sys", argv[i], &q, &err);
		if (!o)
			return 1;
		cJSON_AddStringToObject(o, "ifname", argv[i]);
		cJSON_AddNumberToObject(o, "r", r);
		cJSON_AddNumberToObject(o, "code", err.code);
		cJSON_AddStringToObject(o, "msg", err.msg);
		cJSON_AddStringToObject(o, "state", hpn_qos_state_name(q.state));
		cJSON_AddNumberToObject(o, "dcbx", q.dcbx);
		cJSON_AddNumberToObject(o, "nDscp", q.n_dscp);
		cJSON_AddBoolToObject(o, "pfcKnown", q.pfc_known);
		text = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		if (!text)
			return 1;
		puts(text);
		free(text);
	}
	return 0;
}
