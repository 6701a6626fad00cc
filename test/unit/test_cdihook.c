// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests for lib/cdihook.c: the OCI state's pid, and which container may
 * have a NIC's CDI device, against a scratch stateDir with one journal and a
 * fake /proc whose ns/net links stand for the containers' netns.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdihook.h"
#include "check.h"
#include "store.h"
#include "tmpdir.h"
#include "util.h"

static char tmp[64]; /* "/tmp/hpn-unit-cdihook-XXXXXX" */

static void test_pid(void)
{
	static const char *const bad[] = { "",
					   "{}",
					   "not json",
					   "{\"pid\": 0}",
					   "{\"pid\": -4}",
					   "{\"pid\": 1.5}",
					   "{\"pid\": \"12\"}",
					   "{\"pid\": 99999999999}",
					   "[1]" };
	struct hpn_err err = { 0 };
	int pid = 0;

	CHECK_INT_EQ(
		hpn_cdi_hook_pid("{\"ociVersion\":\"1.0.2\",\"id\":\"c1\",\"status\":\"created\","
				 "\"pid\":4242,\"bundle\":\"/b\"}",
				 &pid, &err),
		0);
	CHECK_INT_EQ(pid, 4242);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		CHECK(hpn_cdi_hook_pid(bad[i], &pid, &err) < 0);
		CHECK_INT_EQ(err.code, HPN_E_DECODE);
		CHECK_STR_HAS(err.msg, "pid");
	}
}

/* <tmp>/<name>: an empty file standing for a netns (stat's dev and inode are its identity). */
static void make_ns(const char *name, char *path, size_t len)
{
	int fd;

	snprintf(path, len, "%s/%s", tmp, name);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
}

/* <tmp>/proc/<pid>/ns/net -> target. */
static void make_proc(int pid, const char *target)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/proc/%d/ns", tmp, pid);
	CHECK_INT_EQ(hpn_mkdir_p(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/proc/%d/ns/net", tmp, pid);
	CHECK_INT_EQ(symlink(target, path), 0);
}

static void test_check(void)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct hpn_journal j;
	char state[PATH_MAX], proc[PATH_MAX], nsa[PATH_MAX], nsb[PATH_MAX], key[HPN_KEY_MAX];
	struct stat sb;

	snprintf(state, sizeof(state), "%s/state", tmp);
	snprintf(proc, sizeof(proc), "%s/proc", tmp);
	make_ns("pod-a", nsa, sizeof(nsa));
	make_ns("pod-b", nsb, sizeof(nsb));
	make_proc(100, nsa);
	make_proc(200, nsb);

	/* No journal of the network yet: no pod holds it, and nothing is created. */
	CHECK(hpn_cdi_hook_check(state, "net1", "0000:af:00.0", 100, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_DEVICE_NOT_FOUND);
	CHECK_STR_HAS(err.msg, "attached to no pod");
	CHECK_STR_HAS(err.msg, "alibabacloud.com/hpn-rdma=0000:af:00.0");
	CHECK(stat(state, &sb) < 0 && errno == ENOENT);

	/* Pod a holds the PCI NIC and rnic3 (a NIC without PCI address: its name is its ID). */
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	memset(&j, 0, sizeof(j));
	j.n_nics = 2;
	j.phase = HPN_PHASE_ATTACHED;
	j.container_id = strdup("c0ffee0123456789");
	j.netns = strdup(nsa);
	strcpy(j.cni_ifname, "eth0");
	strcpy(j.nics[0].pod_ifname, "hpn0");
	strcpy(j.nics[0].host.name, "ens1f0np0");
	strcpy(j.nics[0].pci, "0000:af:00.0");
	strcpy(j.nics[1].pod_ifname, "hpn1");
	strcpy(j.nics[1].host.name, "rnic3");
	hpn_journal_set_pod(&j, "team-a", "trainer-0", NULL);
	CHECK_INT_EQ(hpn_store_key(j.container_id, j.cni_ifname, key), 0);
	CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0);
	hpn_store_close(&st);

	/* Its own container: given. */
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_cdi_hook_check(state, "net1", "0000:af:00.0", 100, proc, &err), 0);
	CHECK_INT_EQ(hpn_cdi_hook_check(state, "net1", "rnic3", 100, proc, &err), 0);
	CHECK_INT_EQ(err.code, 0);

	/* Another pod's container: refused, naming the pod that holds it. */
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_hook_check(state, "net1", "0000:af:00.0", 200, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_ENV);
	CHECK_STR_HAS(err.msg, "attached to pod team-a/trainer-0, not to this container's pod");

	/* A NIC no journal holds; another network's journals do not count. */
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_hook_check(state, "net1", "0000:b0:00.0", 100, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_DEVICE_NOT_FOUND);
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_hook_check(state, "net2", "0000:af:00.0", 100, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_DEVICE_NOT_FOUND);

	/* A process that is gone; an ID the device plugin API would refuse. */
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_hook_check(state, "net1", "0000:af:00.0", 300, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_NETNS);
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_hook_check(state, "net1", "../../x", 100, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_ENV);

	/* The pod's netns gone (the pod is being torn down): nobody gets the device. */
	CHECK_INT_EQ(unlink(nsa), 0);
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_hook_check(state, "net1", "0000:af:00.0", 200, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_ENV);
	hpn_journal_free(&j);
}

int main(void)
{
	tmpdir_make(tmp, sizeof(tmp), "cdihook");
	test_pid();
	test_check();
	if (tmpdir_rm(tmp) < 0)
		perror("remove scratch directory");
	return check_done();
}
