// SPDX-License-Identifier: Apache-2.0
/*
 * dra-gpuslice SYSFS_ROOT PROC_ROOT NODE: the GPUs of a fake node of
 * test/fixtures/gpu-nodes as a gpu.nvidia.com ResourceSlice (a JSON array of
 * one), the shape NVIDIA's DRA driver publishes: device gpu-<minor>, with
 * "type" and "minor" and the standard resource.kubernetes.io/pcieRoot,
 * pciBusID and numaNode of where sysfs places the GPU. The GPUs are found by
 * asking lib/gpu.c for gpu-0..gpu-63 (hpn_gpus_resolve reads the minors from
 * procfs), so the names are the ones the kubelet would report. For
 * unit.dra-align (align.sh): the other side of each GPU/NIC pair.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "util.h"

static void attr(cJSON *attrs, const char *key, const char *type, cJSON *v)
{
	cJSON *o = cJSON_AddObjectToObject(attrs, key);

	cJSON_AddItemToObject(o, type, v);
}

int main(int argc, char **argv)
{
	static char ids[HPN_MAX_GPUS][HPN_GPU_ID_MAX];
	static struct hpn_gpus g;
	struct hpn_err err = { 0 };
	cJSON *root, *meta, *spec, *pool, *devs;
	char name[300], *text;

	if (argc != 4) {
		fprintf(stderr, "usage: dra-gpuslice SYSFS_ROOT PROC_ROOT NODE\n");
		return 2;
	}
	for (int k = 0; k < HPN_MAX_GPUS; k++)
		snprintf(ids[k], sizeof(ids[k]), "gpu-%d", k);
	if (hpn_gpus_resolve(argv[2], argv[1], (const char(*)[HPN_GPU_ID_MAX])ids, HPN_MAX_GPUS, &g,
			     &err) < 0) {
		fprintf(stderr, "dra-gpuslice: %s\n", err.msg);
		return 1;
	}
	root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "apiVersion", "resource.k8s.io/v1");
	cJSON_AddStringToObject(root, "kind", "ResourceSlice");
	meta = cJSON_AddObjectToObject(root, "metadata");
	snprintf(name, sizeof(name), "%s-gpu.nvidia.com-0", argv[3]);
	cJSON_AddStringToObject(meta, "name", name);
	spec = cJSON_AddObjectToObject(root, "spec");
	cJSON_AddStringToObject(spec, "driver", "gpu.nvidia.com");
	cJSON_AddStringToObject(spec, "nodeName", argv[3]);
	pool = cJSON_AddObjectToObject(spec, "pool");
	cJSON_AddStringToObject(pool, "name", argv[3]);
	cJSON_AddNumberToObject(pool, "generation", 1);
	cJSON_AddNumberToObject(pool, "resourceSliceCount", 1);
	devs = cJSON_AddArrayToObject(spec, "devices");
	/* Placed GPUs come first, in PCI order; the IDs procfs does not know are left out. */
	for (size_t i = 0; i < g.n - g.n_unknown; i++) {
		const struct hpn_gpu *gpu = &g.v[i];
		cJSON *dev = cJSON_CreateObject(), *attrs;

		cJSON_AddItemToArray(devs, dev);
		cJSON_AddStringToObject(dev, "name", gpu->id);
		attrs = cJSON_AddObjectToObject(dev, "attributes");
		attr(attrs, "type", "string", cJSON_CreateString("gpu"));
		attr(attrs, "minor", "int", cJSON_CreateNumber(atoi(gpu->id + 4)));
		if (gpu->pos.path[0]) {
			char pcie_root[64];

			snprintf(pcie_root, sizeof(pcie_root), "%.*s",
				 (int)strcspn(gpu->pos.path, "/"), gpu->pos.path);
			attr(attrs, "resource.kubernetes.io/pcieRoot", "string",
			     cJSON_CreateString(pcie_root));
		}
		attr(attrs, "resource.kubernetes.io/pciBusID", "string",
		     cJSON_CreateString(gpu->pci));
		if (gpu->pos.numa >= 0)
			attr(attrs, "resource.kubernetes.io/numaNode", "int",
			     cJSON_CreateNumber(gpu->pos.numa));
	}
	text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!text)
		return 1;
	printf("[%s]\n", text);
	free(text);
	return 0;
}
