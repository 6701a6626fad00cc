// SPDX-License-Identifier: Apache-2.0
/* NRI's CreateContainer answer for an attached pod's container, as data (adjust.h). */
#include "adjust.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef Nri__Pkg__Api__V1alpha1__Container Container;
typedef Nri__Pkg__Api__V1alpha1__LinuxDevice Device;
typedef Nri__Pkg__Api__V1alpha1__LinuxDeviceCgroup Rule;
typedef Nri__Pkg__Api__V1alpha1__Mount Mount;
typedef Nri__Pkg__Api__V1alpha1__POSIXRlimit Rlimit;
#define PB(x)	nri__pkg__api__v1alpha1__##x
#define INIT(X) NRI__PKG__API__V1ALPHA1__##X##__INIT

#define DEV_MODE 0666 /* as the kubelet's device plugin answers them: rw for the container */

bool nri_has_device(const Container *c, const char *path)
{
	for (size_t i = 0; c->linux && i < c->linux->n_devices; i++)
		if (c->linux->devices[i]->path && !strcmp(c->linux->devices[i]->path, path))
			return true;
	return false;
}

static bool has_mount(const Container *c, const char *dest)
{
	for (size_t i = 0; i < c->n_mounts; i++)
		if (c->mounts[i]->destination && !strcmp(c->mounts[i]->destination, dest))
			return true;
	return false;
}

/* The container's RLIMIT_MEMLOCK soft limit, or 0 when its spec sets none. */
static uint64_t memlock_of(const Container *c)
{
	for (size_t i = 0; i < c->n_rlimits; i++)
		if (c->rlimits[i]->type && !strcmp(c->rlimits[i]->type, "RLIMIT_MEMLOCK"))
			return c->rlimits[i]->soft;
	return 0;
}

/* The pod's hints file, read-only at its path in the container. */
static void hints_mount(Mount *m, const struct nri_want *w)
{
	static char *opts[] = { "bind", "ro" };

	m->destination = (char *)w->hints_at;
	m->type = "bind";
	m->source = (char *)w->hints;
	m->n_options = 2;
	m->options = opts;
}

static void memlock_rlimit(Rlimit *rl, uint64_t bytes)
{
	rl->type = "RLIMIT_MEMLOCK";
	rl->hard = rl->soft = bytes;
}

int nri_adjust(const struct nri_want *w, const Container *c, uint8_t **ret, size_t *ret_len,
	       struct nri_given *given)
{
	Nri__Pkg__Api__V1alpha1__CreateContainerResponse resp = INIT(CREATE_CONTAINER_RESPONSE);
	Nri__Pkg__Api__V1alpha1__ContainerAdjustment adj = INIT(CONTAINER_ADJUSTMENT);
	Nri__Pkg__Api__V1alpha1__LinuxContainerAdjustment lin = INIT(LINUX_CONTAINER_ADJUSTMENT);
	Nri__Pkg__Api__V1alpha1__LinuxResources res = INIT(LINUX_RESOURCES);
	Nri__Pkg__Api__V1alpha1__OptionalFileMode mode = INIT(OPTIONAL_FILE_MODE);
	Nri__Pkg__Api__V1alpha1__OptionalInt64 majors[NRI_DEVS_MAX], minors[NRI_DEVS_MAX];
	Device devs[NRI_DEVS_MAX], *devp[NRI_DEVS_MAX];
	Rule rules[NRI_DEVS_MAX], *rulep[NRI_DEVS_MAX];
	Mount mount = INIT(MOUNT), *mountp = &mount;
	Rlimit rl = INIT(POSIXRLIMIT), *rlp = &rl;
	struct nri_given g = { 0 };
	size_t n = 0, len;
	uint8_t *buf;

	mode.value = DEV_MODE;
	for (size_t i = 0; i < w->n_devs && i < NRI_DEVS_MAX; i++) {
		if (nri_has_device(c, w->devs[i].path)) {
			g.devs_had++;
			continue;
		}
		PB(linux_device__init)(&devs[n]);
		devs[n].path = (char *)w->devs[i].path;
		devs[n].type = "c";
		devs[n].major = w->devs[i].major;
		devs[n].minor = w->devs[i].minor;
		devs[n].file_mode = &mode;
		devp[n] = &devs[n];
		/*
		 * The rule the device needs. containerd (1.7.24, 2.1.9) drops it and
		 * writes its own from the device's mode; another runtime may not.
		 */
		PB(linux_device_cgroup__init)(&rules[n]);
		PB(optional_int64__init)(&majors[n]);
		PB(optional_int64__init)(&minors[n]);
		majors[n].value = w->devs[i].major;
		minors[n].value = w->devs[i].minor;
		rules[n].allow = true;
		rules[n].type = "c";
		rules[n].major = &majors[n];
		rules[n].minor = &minors[n];
		rules[n].access = "rwm";
		rulep[n] = &rules[n];
		n++;
	}
	g.devs = n;
	if (n) {
		lin.n_devices = n;
		lin.devices = devp;
		res.n_devices = n;
		res.devices = rulep;
		lin.resources = &res;
		adj.linux = &lin;
	}
	if (w->hints[0]) {
		/*
		 * The pod's own choice wins; so does a CDI device's mount of the same
		 * file (containerd 1.7 and 2.x apply CDI to the spec NRI is shown).
		 */
		if (has_mount(c, w->hints_at)) {
			g.hints_had = true;
		} else {
			hints_mount(&mount, w);
			adj.n_mounts = 1;
			adj.mounts = &mountp;
			g.hints = true;
		}
	}
	if (w->memlock) {
		if (memlock_of(c) >= w->memlock) {
			g.memlock_had = true;
		} else {
			memlock_rlimit(&rl, w->memlock);
			adj.n_rlimits = 1;
			adj.rlimits = &rlp;
			g.memlock = true;
		}
	}
	if (g.devs || g.hints || g.memlock)
		resp.adjust = &adj;
	len = PB(create_container_response__get_packed_size)(&resp);
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	PB(create_container_response__pack)(&resp, buf);
	*ret = buf;
	*ret_len = len;
	if (given)
		*given = g;
	return 0;
}
