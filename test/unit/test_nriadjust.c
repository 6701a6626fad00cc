// SPDX-License-Identifier: Apache-2.0
/*
 * agent/nri/adjust.c: NRI's CreateContainer answer for a container of an
 * attached pod, unpacked again and read field by field: the pod's devices
 * with their cgroup rules, its hints file read-only, RLIMIT_MEMLOCK; and what
 * the container had already left out (a device given by the device plugin,
 * CDI or a DRA claim, its own mount at the path or a CDI device's, a higher
 * limit).
 */
#include <stdlib.h>
#include <string.h>

#include "adjust.h"
#include "check.h"

typedef Nri__Pkg__Api__V1alpha1__Container Container;
typedef Nri__Pkg__Api__V1alpha1__CreateContainerResponse Response;
#define PB(x)	nri__pkg__api__v1alpha1__##x
#define INIT(X) NRI__PKG__API__V1ALPHA1__##X##__INIT

static const struct nri_want want = {
	.devs = { { "/dev/infiniband/uverbs0", 231, 192 },
		  { "/dev/infiniband/uverbs1", 231, 193 },
		  { "/dev/infiniband/rdma_cm", 10, 58 } },
	.n_devs = 3,
	.hints = "/run/hpn-rdma/nccl/net1/podx/nccl.conf",
	.hints_at = "/etc/nccl.conf",
	.memlock = UINT64_MAX,
};

/* The answer for c, unpacked (free with PB(create_container_response__free_unpacked)). */
static Response *answer(const struct nri_want *w, const Container *c, struct nri_given *g)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	Response *r;

	CHECK_INT_EQ(nri_adjust(w, c, &buf, &len, g), 0);
	r = PB(create_container_response__unpack)(NULL, len, buf);
	free(buf);
	CHECK(r != NULL);
	if (!r)
		abort();
	return r;
}

/* A bare container: everything is given, each device with its rule. */
static void test_bare(void)
{
	Container c = INIT(CONTAINER);
	struct nri_given g;
	Response *r = answer(&want, &c, &g);
	const Nri__Pkg__Api__V1alpha1__ContainerAdjustment *a = r->adjust;

	CHECK(a && a->linux && a->linux->resources);
	if (!a || !a->linux || !a->linux->resources)
		return;
	CHECK_INT_EQ(a->linux->n_devices, 3);
	CHECK_INT_EQ(a->linux->resources->n_devices, 3);
	for (size_t i = 0; i < a->linux->n_devices && i < 3; i++) {
		const Nri__Pkg__Api__V1alpha1__LinuxDevice *d = a->linux->devices[i];
		const Nri__Pkg__Api__V1alpha1__LinuxDeviceCgroup *rule =
			a->linux->resources->devices[i];

		CHECK_STR_EQ(d->path, want.devs[i].path);
		CHECK_STR_EQ(d->type, "c");
		CHECK_INT_EQ(d->major, want.devs[i].major);
		CHECK_INT_EQ(d->minor, want.devs[i].minor);
		CHECK(d->file_mode && d->file_mode->value == 0666);
		CHECK(rule->allow);
		CHECK_STR_EQ(rule->type, "c");
		CHECK(rule->major && rule->major->value == want.devs[i].major);
		CHECK(rule->minor && rule->minor->value == want.devs[i].minor);
		CHECK_STR_EQ(rule->access, "rwm");
	}
	CHECK_INT_EQ(a->n_mounts, 1);
	if (a->n_mounts == 1) {
		CHECK_STR_EQ(a->mounts[0]->destination, "/etc/nccl.conf");
		CHECK_STR_EQ(a->mounts[0]->source, want.hints);
		CHECK_STR_EQ(a->mounts[0]->type, "bind");
		CHECK_INT_EQ(a->mounts[0]->n_options, 2);
		if (a->mounts[0]->n_options == 2) {
			CHECK_STR_EQ(a->mounts[0]->options[0], "bind");
			CHECK_STR_EQ(a->mounts[0]->options[1], "ro");
		}
	}
	CHECK_INT_EQ(a->n_rlimits, 1);
	if (a->n_rlimits == 1) {
		CHECK_STR_EQ(a->rlimits[0]->type, "RLIMIT_MEMLOCK");
		CHECK(a->rlimits[0]->soft == UINT64_MAX && a->rlimits[0]->hard == UINT64_MAX);
	}
	CHECK_INT_EQ(a->n_annotations + a->n_env + a->n_cdi_devices, 0);
	CHECK(g.devs == 3 && g.devs_had == 0 && g.hints && !g.hints_had && g.memlock &&
	      !g.memlock_had);
	PB(create_container_response__free_unpacked)(r, NULL);
}

/* What the container has already is not given twice; the pod's own choices win. */
static void test_had(void)
{
	Nri__Pkg__Api__V1alpha1__LinuxDevice had = INIT(LINUX_DEVICE), *hadp = &had;
	Nri__Pkg__Api__V1alpha1__LinuxContainer lin = INIT(LINUX_CONTAINER);
	Nri__Pkg__Api__V1alpha1__Mount m = INIT(MOUNT), *mp = &m;
	Nri__Pkg__Api__V1alpha1__POSIXRlimit rl = INIT(POSIXRLIMIT), *rlp = &rl;
	Container c = INIT(CONTAINER);
	struct nri_given g;
	Response *r;

	had.path = "/dev/infiniband/uverbs1"; /* the device plugin's, or a CDI device's */
	had.type = "c";
	had.major = 231;
	had.minor = 193;
	lin.n_devices = 1;
	lin.devices = &hadp;
	c.linux = &lin;
	m.destination = "/etc/nccl.conf"; /* the pod's own file */
	m.source = "/somewhere/else";
	c.n_mounts = 1;
	c.mounts = &mp;
	rl.type = "RLIMIT_MEMLOCK";
	rl.soft = rl.hard = UINT64_MAX;
	c.n_rlimits = 1;
	c.rlimits = &rlp;
	r = answer(&want, &c, &g);
	CHECK(r->adjust && r->adjust->linux);
	if (r->adjust && r->adjust->linux) {
		CHECK_INT_EQ(r->adjust->linux->n_devices, 2);
		CHECK_STR_EQ(r->adjust->linux->devices[0]->path, "/dev/infiniband/uverbs0");
		CHECK_STR_EQ(r->adjust->linux->devices[1]->path, "/dev/infiniband/rdma_cm");
		CHECK_INT_EQ(r->adjust->n_mounts, 0);
		CHECK_INT_EQ(r->adjust->n_rlimits, 0);
	}
	CHECK(g.devs == 2 && g.devs_had == 1 && !g.hints && g.hints_had && !g.memlock &&
	      g.memlock_had);
	PB(create_container_response__free_unpacked)(r, NULL);

	/* A lower limit of its own is raised. */
	rl.soft = rl.hard = 8u << 20;
	r = answer(&want, &c, &g);
	CHECK(r->adjust && r->adjust->n_rlimits == 1 && g.memlock);
	PB(create_container_response__free_unpacked)(r, NULL);
}

/*
 * The hints mount of a CDI device's spec (the agent's per-NIC spec, a DRA
 * claim's), as containerd shows the container to NRI: CDI is applied to the
 * OCI spec at CreateContainer before NRI's adjustment is asked (containerd
 * 2.1.9 internal/cri/server: WithCDI among the spec options, then
 * nri.WithContainerAdjustment over that spec), so the mount is among the
 * container's mounts; NRI adds none over it.
 */
static void test_cdi_mount(void)
{
	static char *opts[] = { "ro", "nosuid", "nodev", "noexec", "bind" };
	Nri__Pkg__Api__V1alpha1__Mount m = INIT(MOUNT), *mp = &m;
	Container c = INIT(CONTAINER);
	struct nri_given g;
	Response *r;

	m.destination = "/etc/nccl.conf";
	m.source = "/run/hpn-rdma/pods/nic/0000:af:00.1/nccl.conf";
	m.type = "bind";
	m.n_options = 5;
	m.options = opts;
	c.n_mounts = 1;
	c.mounts = &mp;
	r = answer(&want, &c, &g);
	CHECK(r->adjust != NULL);
	if (r->adjust)
		CHECK_INT_EQ(r->adjust->n_mounts, 0);
	CHECK(!g.hints && g.hints_had && g.devs == 3);
	PB(create_container_response__free_unpacked)(r, NULL);
}

/* Nothing wanted (a pod hpn-rdma did not attach): an empty answer, no adjustment at all. */
static void test_nothing(void)
{
	struct nri_want none = { 0 };
	Container c = INIT(CONTAINER);
	struct nri_given g;
	Response *r = answer(&none, &c, &g);

	CHECK(r->adjust == NULL);
	CHECK_INT_EQ(r->n_update + r->n_evict, 0);
	CHECK(!g.devs && !g.hints && !g.memlock);
	PB(create_container_response__free_unpacked)(r, NULL);
}

int main(void)
{
	test_bare();
	test_had();
	test_cdi_mount();
	test_nothing();
	return check_done();
}
