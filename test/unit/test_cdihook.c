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

#include "cdi.h"
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

/* <state>/dra/<uid>.json holding text. */
static void write_rec(const char *state, const char *uid, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/dra", state);
	CHECK_INT_EQ(hpn_mkdir_p(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/dra/%s.json", state, uid);
	f = fopen(path, "we");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/*
 * A DRA claim's device "claim-<uid>": every NIC its record lists held by
 * the container's pod, and that pod one the claim was prepared for.
 */
static void test_claim(void)
{
	static const char uid[] = "5b0c7a51-1f7e-4c55-9d43-2a1c0b9e7f10";
	static const char dev[] = "claim-5b0c7a51-1f7e-4c55-9d43-2a1c0b9e7f10";
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct hpn_journal j;
	char state[PATH_MAX], proc[PATH_MAX], nsc[PATH_MAX], nsd[PATH_MAX], key[HPN_KEY_MAX];
	char rec[1024];

	snprintf(state, sizeof(state), "%s/state2", tmp);
	snprintf(proc, sizeof(proc), "%s/proc", tmp);
	make_ns("pod-c", nsc, sizeof(nsc));
	make_ns("pod-d", nsd, sizeof(nsd));
	make_proc(400, nsc);
	make_proc(500, nsd);
	CHECK(hpn_cdi_is_claim(dev));
	CHECK(!hpn_cdi_is_claim("claim-x"));
	CHECK(!hpn_cdi_is_claim("0000:af:00.0"));

	/* No record: prepared for no pod here. */
	CHECK(hpn_cdi_hook_check(state, "net1", dev, 400, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_DEVICE_NOT_FOUND);
	CHECK_STR_HAS(err.msg, "is prepared for no pod on this node");

	/* Pod c (UID c0-01) holds both NICs of the claim, which is reserved for it. */
	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	memset(&j, 0, sizeof(j));
	j.n_nics = 2;
	j.phase = HPN_PHASE_ATTACHED;
	j.container_id = strdup("c1aa1111deadbeef");
	j.netns = strdup(nsc);
	strcpy(j.cni_ifname, "eth0");
	strcpy(j.nics[0].pod_ifname, "hpn0");
	strcpy(j.nics[0].host.name, "pool0");
	strcpy(j.nics[0].pci, "0000:af:00.0");
	strcpy(j.nics[1].pod_ifname, "hpn1");
	strcpy(j.nics[1].host.name, "pool1");
	strcpy(j.nics[1].pci, "0000:af:00.1");
	hpn_journal_set_pod(&j, "ml", "trainer", "c0-01");
	CHECK_INT_EQ(hpn_store_key(j.container_id, j.cni_ifname, key), 0);
	CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0);
	hpn_store_close(&st);
	hpn_journal_free(&j);
	snprintf(rec, sizeof(rec),
		 "{\"version\":1,\"uid\":\"%s\",\"namespace\":\"ml\",\"name\":\"c\","
		 "\"pods\":[\"c0-01\"],\"devices\":["
		 "{\"request\":\"nics\",\"pool\":\"node1\",\"device\":\"pci-0000-af-00-0\","
		 "\"nic\":\"0000:af:00.0\",\"ifname\":\"pool0\",\"rdma\":\"mlx5_0\"},"
		 "{\"request\":\"nics\",\"pool\":\"node1\",\"device\":\"pci-0000-af-00-1\","
		 "\"nic\":\"0000:af:00.1\",\"ifname\":\"pool1\",\"rdma\":\"mlx5_1\"}]}",
		 uid);
	write_rec(state, uid, rec);

	/* Its own container: given. Another pod's: refused, naming the holder. */
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_cdi_hook_check(state, "net1", dev, 400, proc, &err), 0);
	CHECK_INT_EQ(err.code, 0);
	CHECK(hpn_cdi_hook_check(state, "net1", dev, 500, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_ENV);
	CHECK_STR_HAS(err.msg, "attached to pod ml/trainer, not to this container's pod");
	CHECK_STR_HAS(err.msg, "alibabacloud.com/hpn-rdma=claim-5b0c7a51");

	/* Reserved for another pod: the holder is not one the claim was prepared for. */
	memcpy(strstr(rec, "c0-01"), "d0-02", 5);
	write_rec(state, uid, rec);
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_hook_check(state, "net1", dev, 400, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_ENV);
	CHECK_STR_HAS(err.msg, "which the claim was not prepared for");

	/* A NIC of the claim no pod holds: every NIC must be the pod's. */
	memcpy(strstr(rec, "d0-02"), "c0-01", 5);
	memcpy(strstr(rec, "0000:af:00.1\",\"ifname"), "0000:af:00.7", 12);
	write_rec(state, uid, rec);
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_hook_check(state, "net1", dev, 400, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_DEVICE_NOT_FOUND);
	CHECK_STR_HAS(err.msg, "NIC 0000:af:00.7");

	/* Not a record: refused, never given. */
	write_rec(state, uid, "{\"pods\":[],\"devices\":[]}");
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_hook_check(state, "net1", dev, 400, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_DECODE);
	write_rec(state, uid, "not json");
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_hook_check(state, "net1", dev, 400, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_DECODE);
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_hook_check(state, "net1", "claim-../../../etc/passwd", 400, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_ENV);
}

/* A journal of pod (ns/name, uid) in netns ns: NIC id (pci) as kind, hpn<k> in order. */
static void write_journal(const char *state, const char *cid, const char *ns, const char *name,
			  const char *uid, const char *netns, const enum hpn_nic_kind *kinds,
			  size_t n)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct hpn_journal j;
	char key[HPN_KEY_MAX];

	CHECK_INT_EQ(hpn_store_open(state, "net1", &st, &err), 0);
	memset(&j, 0, sizeof(j));
	j.n_nics = n;
	j.phase = HPN_PHASE_ATTACHED;
	j.container_id = strdup(cid);
	j.netns = strdup(netns);
	strcpy(j.cni_ifname, "eth0");
	for (size_t i = 0; i < n; i++) {
		j.nics[i].kind = kinds[i];
		snprintf(j.nics[i].pod_ifname, sizeof(j.nics[i].pod_ifname), "hpn%u",
			 (unsigned int)(i & 0xff));
		strcpy(j.nics[i].host.name, "pool0");
		strcpy(j.nics[i].pci, "0000:af:00.0");
		if (kinds[i] == HPN_NIC_CHILD)
			strcpy(j.nics[i].child_kind, "macvlan");
	}
	hpn_journal_set_pod(&j, ns, name, uid);
	CHECK_INT_EQ(hpn_store_key(j.container_id, j.cni_ifname, key), 0);
	CHECK_INT_EQ(hpn_journal_write(&st, key, &j, &err), 0);
	hpn_store_close(&st);
	hpn_journal_free(&j);
}

/*
 * A claim's share of a NIC (a device with a shareID): its container's pod
 * holds a child of the NIC, which stays on the host; other pods hold their
 * own children of it. A pod that holds the NIC itself moved does not hold a
 * share of it.
 */
static void test_share(void)
{
	static const char uid1[] = "1b0c7a51-1f7e-4c55-9d43-2a1c0b9e7f11";
	static const char uid2[] = "2b0c7a51-1f7e-4c55-9d43-2a1c0b9e7f12";
	static const char dev1[] = "claim-1b0c7a51-1f7e-4c55-9d43-2a1c0b9e7f11";
	static const char dev2[] = "claim-2b0c7a51-1f7e-4c55-9d43-2a1c0b9e7f12";
	static const enum hpn_nic_kind child[] = { HPN_NIC_CHILD, HPN_NIC_CHILD };
	static const enum hpn_nic_kind moved[] = { HPN_NIC_MOVED };
	struct hpn_err err = { 0 };
	char state[PATH_MAX], proc[PATH_MAX], nse[PATH_MAX], nsf[PATH_MAX], nsg[PATH_MAX];
	char rec[1024];

	snprintf(state, sizeof(state), "%s/state3", tmp);
	snprintf(proc, sizeof(proc), "%s/proc", tmp);
	make_ns("pod-e", nse, sizeof(nse));
	make_ns("pod-f", nsf, sizeof(nsf));
	make_ns("pod-g", nsg, sizeof(nsg));
	make_proc(600, nse);
	make_proc(700, nsf);
	make_proc(800, nsg);
	/* Claim 1 (pod e) holds two shares of the NIC; claim 2 (pod f) one. */
	snprintf(rec, sizeof(rec),
		 "{\"version\":1,\"uid\":\"%s\",\"namespace\":\"ml\",\"name\":\"s1\","
		 "\"pods\":[\"e0-01\"],\"devices\":["
		 "{\"request\":\"nics\",\"pool\":\"node1\",\"device\":\"pci-0000-af-00-0-shared\","
		 "\"nic\":\"0000:af:00.0\",\"ifname\":\"pool0\",\"rdma\":\"mlx5_0\","
		 "\"shareID\":\"0f1e2d3c-4b5a-4697-8877-665544332211\"},"
		 "{\"request\":\"nics\",\"pool\":\"node1\",\"device\":\"pci-0000-af-00-0-shared\","
		 "\"nic\":\"0000:af:00.0\",\"ifname\":\"pool0\",\"rdma\":\"mlx5_0\","
		 "\"shareID\":\"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d\"}]}",
		 uid1);
	write_rec(state, uid1, rec);
	snprintf(rec, sizeof(rec),
		 "{\"version\":1,\"uid\":\"%s\",\"namespace\":\"ml\",\"name\":\"s2\","
		 "\"pods\":[\"f0-01\"],\"devices\":["
		 "{\"request\":\"nics\",\"pool\":\"node1\",\"device\":\"pci-0000-af-00-0-shared\","
		 "\"nic\":\"0000:af:00.0\",\"ifname\":\"pool0\",\"rdma\":\"mlx5_0\","
		 "\"shareID\":\"b1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d\"}]}",
		 uid2);
	write_rec(state, uid2, rec);

	/* Pod f holds the NIC moved (what a share never is): claim 2's container is refused. */
	write_journal(state, "f0f0f0f0aaaa0001", "ml", "pod-f", "f0-01", nsf, moved, 1);
	CHECK(hpn_cdi_hook_check(state, "net1", dev2, 700, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_DEVICE_NOT_FOUND);
	CHECK_STR_HAS(err.msg, "NIC 0000:af:00.0 (a share: a child of it)");
	CHECK_STR_HAS(err.msg, "is attached to no pod");

	/* Pod e holds two children of the NIC, pod f (again) one: each gets its own claim's. */
	write_journal(state, "e0e0e0e0aaaa0001", "ml", "pod-e", "e0-01", nse, child, 2);
	write_journal(state, "f0f0f0f0aaaa0001", "ml", "pod-f", "f0-01", nsf, child, 1);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(hpn_cdi_hook_check(state, "net1", dev1, 600, proc, &err), 0);
	CHECK_INT_EQ(hpn_cdi_hook_check(state, "net1", dev2, 700, proc, &err), 0);
	CHECK_INT_EQ(err.code, 0);
	/* Not the other's claim (reserved for another pod), nor a pod holding none. */
	CHECK(hpn_cdi_hook_check(state, "net1", dev1, 700, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_ENV);
	CHECK_STR_HAS(err.msg, "which the claim was not prepared for");
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_hook_check(state, "net1", dev2, 800, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_INVALID_ENV);
	CHECK_STR_HAS(err.msg, "not to this container's pod");

	/* A shareID that is not a string: not a record of ours. */
	write_rec(state, uid2,
		  "{\"pods\":[\"f0-01\"],\"devices\":[{\"nic\":\"0000:af:00.0\",\"shareID\":7}]}");
	memset(&err, 0, sizeof(err));
	CHECK(hpn_cdi_hook_check(state, "net1", dev2, 700, proc, &err) < 0);
	CHECK_INT_EQ(err.code, HPN_E_DECODE);
}

int main(void)
{
	tmpdir_make(tmp, sizeof(tmp), "cdihook");
	test_pid();
	test_check();
	test_claim();
	test_share();
	if (tmpdir_rm(tmp) < 0)
		perror("remove scratch directory");
	return check_done();
}
