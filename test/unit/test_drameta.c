// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for agent/dra/model/drameta.c, a claim's device metadata file
 * (KEP-5304): the exact bytes for a fixture claim of two NICs of one request
 * with a NIC's attributes as the slice renders them (draslice.c), v1beta1
 * then v1alpha1, one object a line; a claim from a template (podClaimName);
 * networkData set (generation 2), set again unchanged (no new generation),
 * removed (generation 3); a file that is not ours refused; the paths in the
 * container, a subrequest's dropped from the path; two shares of one NIC in
 * a request, each with its own child's networkData.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "drameta.h"
#include "draslice.h"
#include "err.h"

#define DRIVER "hpn-rdma.alibabacloud.com"
#define UID    "0d2ef7a4-5a9d-4b7c-9a43-3c1e6f1f2a10"

static const char body_v[] =
	"{\"kind\":\"DeviceMetadata\",\"apiVersion\":\"metadata.resource.k8s.io/%s\","
	"\"metadata\":{\"name\":\"c1\",\"namespace\":\"ml\",\"uid\":\"" UID "\",\"generation\":%d},"
	"%s\"requests\":[{\"name\":\"nics\",\"devices\":["
	"{\"driver\":\"" DRIVER "\",\"pool\":\"node1\",\"name\":\"pci-0000-af-00-2\","
	"\"attributes\":{\"resource.kubernetes.io/pcieRoot\":{\"string\":\"pci0000:ae\"},"
	"\"resource.kubernetes.io/pciBusID\":{\"string\":\"0000:af:00.2\"},"
	"\"resource.kubernetes.io/numaNode\":{\"int\":1},"
	"\"interface\":{\"string\":\"ens2f2\"},\"rdmaDevice\":{\"string\":\"mlx5_2\"},"
	"\"linkLayer\":{\"string\":\"Ethernet\"},\"transport\":{\"string\":\"roce\"},"
	"\"speedMbps\":{\"int\":200000},\"kernelDriver\":{\"string\":\"mlx5_core\"},"
	"\"softRoce\":{\"bool\":false},\"rail\":{\"int\":2}}%s},"
	"{\"driver\":\"" DRIVER "\",\"pool\":\"node1\",\"name\":\"net-veth1-0a1b2c3d\"}]}]}\n";

static char *expect(int gen, const char *pod_claim, const char *net)
{
	static char out[2][4096];
	char *buf = malloc(8192);

	for (int i = 0; i < 2; i++)
		snprintf(out[i], sizeof(out[i]), body_v, i ? "v1alpha1" : "v1beta1", gen, pod_claim,
			 net);
	snprintf(buf, 8192, "%s%s", out[0], out[1]);
	return buf;
}

static cJSON *fixture_attrs(void)
{
	struct hpn_dra_nic nic = { .ifname = "ens2f2",
				   .pci = "0000:af:00.0",
				   .pos = { .path = "pci0000:ae/0000:ae:02.0", .numa = 1 },
				   .rdma = "mlx5_2",
				   .rdma_pci = "0000:af:00.2",
				   .link_layer = "Ethernet",
				   .transport = "roce",
				   .speed_mbps = 200000,
				   .driver = "mlx5_core",
				   .rail = 2 };
	struct hpn_err err = { 0 };
	cJSON *a = hpn_dra_nic_attrs(&nic, &err);

	CHECK(a != NULL);
	return a;
}

int main(void)
{
	cJSON *attrs = fixture_attrs();
	struct hpn_drameta_dev devs[2] = {
		{ .pool = "node1", .device = "pci-0000-af-00-2", .attrs = attrs },
		{ .pool = "node1", .device = "net-veth1-0a1b2c3d" },
	};
	struct hpn_drameta m = { .ns = "ml",
				 .name = "c1",
				 .uid = UID,
				 .driver = DRIVER,
				 .request = "nics",
				 .generation = 1,
				 .devs = devs,
				 .n = 2 };
	struct hpn_drameta_net net = { .ifname = "hpn0",
				       .ips = { "10.93.0.2/24", "fd00::2/64" },
				       .n_ips = 2,
				       .mac = "6e:02:17:35:09:2c" };
	const char *pools[] = { "node1" }, *names[] = { "pci-0000-af-00-2" };
	const struct hpn_drameta_net *nets[] = { &net }, *none[] = { NULL };
	char *s = hpn_drameta_render(&m), *want = expect(1, "", ""), *s2 = NULL, *s3 = NULL;
	char path[512];
	bool changed = false;

	/* Prepare: generation 1, the devices and attributes, no networkData. */
	CHECK_STR_EQ(s, want);
	free(want);

	/* ADD: networkData on the NIC it names, generation 2; the other untouched. */
	CHECK_INT_EQ(hpn_drameta_set_net(s, strlen(s), pools, names, nets, 1, &s2, &changed), 0);
	CHECK(changed);
	want = expect(2, "",
		      ",\"networkData\":{\"interfaceName\":\"hpn0\",\"ips\":[\"10.93.0.2/24\","
		      "\"fd00::2/64\"],\"hardwareAddress\":\"6e:02:17:35:09:2c\"}");
	CHECK_STR_EQ(s2, want);
	free(want);
	/* The same again: nothing changed, the generation stays. */
	CHECK_INT_EQ(hpn_drameta_set_net(s2, strlen(s2), pools, names, nets, 1, &s3, &changed), 0);
	CHECK(!changed);
	CHECK_STR_EQ(s3, s2);
	free(s3);
	/* Removed (DEL): generation 3, no networkData. */
	CHECK_INT_EQ(hpn_drameta_set_net(s2, strlen(s2), pools, names, none, 1, &s3, &changed), 0);
	CHECK(changed);
	want = expect(3, "", "");
	CHECK_STR_EQ(s3, want);
	free(want);
	free(s3);
	free(s2);
	/* Not a file of ours. */
	s2 = NULL;
	CHECK_INT_EQ(hpn_drameta_set_net("[]\n", 3, pools, names, nets, 1, &s2, &changed), -EINVAL);
	CHECK_INT_EQ(
		hpn_drameta_set_net("{\"metadata\":{}}", 15, pools, names, nets, 1, &s2, &changed),
		-EINVAL);
	CHECK(s2 == NULL);
	free(s);

	/* A claim from a template: podClaimName after metadata. */
	m.pod_claim = "rdma";
	s = hpn_drameta_render(&m);
	want = expect(1, "\"podClaimName\":\"rdma\",", "");
	CHECK_STR_EQ(s, want);
	free(want);
	free(s);
	cJSON_Delete(attrs);

	/* The paths in the container. */
	CHECK_INT_EQ(hpn_drameta_container_path("c1", NULL, "nics", DRIVER, path, sizeof(path)), 0);
	CHECK_STR_EQ(path, "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/c1/nics/"
			   "hpn-rdma.alibabacloud.com-metadata.json");
	CHECK_INT_EQ(hpn_drameta_container_path("pod-x-rdma-7fz2k", "rdma", "nic-0/root", DRIVER,
						path, sizeof(path)),
		     0);
	CHECK_STR_EQ(path, "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/"
			   "rdma/nic-0/hpn-rdma.alibabacloud.com-metadata.json");
	CHECK_INT_EQ(hpn_drameta_container_path("c1", "", "nics", DRIVER, path, 40), -ENAMETOOLONG);

	/*
	 * Two shares of one NIC in a request: two devices of one name (the
	 * v1beta1 Device has no shareID, so none is written), each getting the
	 * networkData of its own child, in order.
	 */
	{
		static const char shared_v[] =
			"{\"kind\":\"DeviceMetadata\",\"apiVersion\":\"metadata.resource.k8s.io/"
			"%s\",\"metadata\":{\"name\":\"c1\",\"namespace\":\"ml\",\"uid\":\"" UID
			"\",\"generation\":%d},\"requests\":[{\"name\":\"nics\",\"devices\":["
			"{\"driver\":\"" DRIVER "\",\"pool\":\"node1\",\"name\":\"pci-0000-af-00-2-"
			"shared\"%s},{\"driver\":\"" DRIVER "\",\"pool\":\"node1\",\"name\":\"pci-"
			"0000-af-00-2-shared\"%s}]}]}\n";
		struct hpn_drameta_dev sd[2] = {
			{ .pool = "node1", .device = "pci-0000-af-00-2-shared" },
			{ .pool = "node1", .device = "pci-0000-af-00-2-shared" },
		};
		struct hpn_drameta_net net1 = { .ifname = "hpn1", .mac = "6e:02:17:35:09:2d" };
		const char *sp[] = { "node1", "node1" },
			   *sn[] = { "pci-0000-af-00-2-shared", "pci-0000-af-00-2-shared" };
		const struct hpn_drameta_net *two[] = { &net, &net1 };
		char w[2][1024], all[2048];

		m.pod_claim = NULL;
		m.devs = sd;
		m.n = 2;
		s = hpn_drameta_render(&m);
		for (int i = 0; i < 2; i++)
			snprintf(w[i], sizeof(w[i]), shared_v, i ? "v1alpha1" : "v1beta1", 1, "",
				 "");
		snprintf(all, sizeof(all), "%s%s", w[0], w[1]);
		CHECK_STR_EQ(s, all);
		CHECK_INT_EQ(hpn_drameta_set_net(s, strlen(s), sp, sn, two, 2, &s2, &changed), 0);
		CHECK(changed);
		for (int i = 0; i < 2; i++)
			snprintf(
				w[i], sizeof(w[i]), shared_v, i ? "v1alpha1" : "v1beta1", 2,
				",\"networkData\":{\"interfaceName\":\"hpn0\",\"ips\":[\"10.93.0."
				"2/24\",\"fd00::2/64\"],\"hardwareAddress\":\"6e:02:17:35:09:2c\"}",
				",\"networkData\":{\"interfaceName\":\"hpn1\",\"hardwareAddress\":"
				"\"6e:02:17:35:09:2d\"}");
		snprintf(all, sizeof(all), "%s%s", w[0], w[1]);
		CHECK_STR_EQ(s2, all);
		free(s2);
		free(s);
	}
	return check_done();
}
