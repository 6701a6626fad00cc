// SPDX-License-Identifier: Apache-2.0
/*
 * hpn_journal_read: the per-attachment state file DEL, GC and a retried ADD
 * trust to undo an earlier ADD. A crash, a full disk or a hand edit can leave
 * anything there. The input is written as <stateDir>/<net>/k.eth0 in a private
 * stateDir; what reads back is written with hpn_journal_write and must read
 * back the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "fuzzdir.h"
#include "store.h"
#include "util.h"

#define KEY "k.eth0"

static char dir[PATH_MAX];
static char path[PATH_MAX + 32]; /* <dir>/net/KEY */
static struct hpn_store store = HPN_STORE_INIT;

/* Before fuzz_dir's removal (registered earlier, so run later). */
static void cleanup(void)
{
	hpn_store_close(&store);
}

/* A private stateDir per process, on tmpfs when there is one (writes fsync). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct hpn_err err = { 0 };

	(void)argc;
	(void)argv;
	fuzz_dir(dir, sizeof(dir), "journal");
	atexit(cleanup);
	FUZZ_ASSERT(hpn_store_open(dir, "net", &store, &err) == 0);
	snprintf(path, sizeof(path), "%s/net/%s", dir, KEY);
	return 0;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static void check_same_nic(const struct hpn_journal_nic *a, const struct hpn_journal_nic *b)
{
	const struct hpn_link *x = &a->host, *y = &b->host;

	FUZZ_ASSERT(a->kind == b->kind);
	FUZZ_ASSERT(!strcmp(a->pod_ifname, b->pod_ifname));
	FUZZ_ASSERT(!strcmp(a->pci, b->pci));
	FUZZ_ASSERT(a->pod_ifindex == b->pod_ifindex);
	FUZZ_ASSERT(!strcmp(a->child_kind, b->child_kind));
	FUZZ_ASSERT(a->has_child_mac == b->has_child_mac &&
		    (!a->has_child_mac || !memcmp(a->child_mac, b->child_mac, 6)));

	FUZZ_ASSERT(!strcmp(x->name, y->name) && x->ifindex == y->ifindex && x->mtu == y->mtu &&
		    x->up == y->up && !strcmp(x->kind, y->kind));
	FUZZ_ASSERT(x->has_mac == y->has_mac && (!x->has_mac || !memcmp(x->mac, y->mac, 6)));
	FUZZ_ASSERT(x->has_perm_mac == y->has_perm_mac &&
		    (!x->has_perm_mac || !memcmp(x->perm_mac, y->perm_mac, 6)));
	FUZZ_ASSERT(x->n_altnames == y->n_altnames);
	for (size_t i = 0; i < x->n_altnames; i++)
		FUZZ_ASSERT(!strcmp(x->altnames[i], y->altnames[i]));

	/* An empty RDMA device name means none: the rest is not written then. */
	FUZZ_ASSERT(!strcmp(a->rdma.name, b->rdma.name));
	if (a->rdma.name[0])
		FUZZ_ASSERT(!strcmp(a->rdma.netdev, b->rdma.netdev) &&
			    !strcmp(a->rdma.soft_type, b->rdma.soft_type) &&
			    a->rdma.moved == b->rdma.moved &&
			    !strcmp(a->rdma.cdi_spec, b->rdma.cdi_spec));
}

static void check_same(const struct hpn_journal *a, const struct hpn_journal *b)
{
	FUZZ_ASSERT(a->phase == b->phase);
	FUZZ_ASSERT(str_eq(a->container_id, b->container_id));
	FUZZ_ASSERT(!strcmp(a->cni_ifname, b->cni_ifname));
	FUZZ_ASSERT(str_eq(a->netns, b->netns));
	FUZZ_ASSERT(str_eq(a->result, b->result));
	FUZZ_ASSERT(str_eq(a->cdi_dir, b->cdi_dir));
	FUZZ_ASSERT(a->owner_pid == b->owner_pid &&
		    (!a->owner_pid || a->owner_start == b->owner_start));
	FUZZ_ASSERT(a->n_nics == b->n_nics);
	for (size_t i = 0; i < a->n_nics; i++)
		check_same_nic(&a->nics[i], &b->nics[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hpn_journal j = { 0 }, again = { 0 };
	struct hpn_err err = { 0 };
	int r, w;

	fuzz_put(path, data, size, 0600);
	r = hpn_journal_read(&store, KEY, &j, &err);
	FUZZ_ASSERT(r <= 0 && r != -ENOENT);
	if (r < 0) {
		FUZZ_ASSERT(err.code == HPN_E_IO && err.msg[0]);
		/* Not written on failure. */
		FUZZ_ASSERT(!j.container_id && !j.netns && !j.result);
		return 0;
	}
	FUZZ_ASSERT(err.code == 0);
	/* What the reader promises DEL: fields it uses as names are usable. */
	FUZZ_ASSERT(j.phase >= HPN_PHASE_SELECTED && j.phase <= HPN_PHASE_ATTACHED);
	FUZZ_ASSERT(j.container_id);
	FUZZ_ASSERT(j.n_nics >= 1 && j.n_nics <= HPN_MAX_NICS);
	FUZZ_ASSERT(!j.cdi_dir || j.cdi_dir[0] == '/');
	for (size_t i = 0; i < j.n_nics; i++) {
		const struct hpn_journal_nic *n = &j.nics[i];

		FUZZ_ASSERT(hpn_valid_ifname(n->pod_ifname) && hpn_valid_ifname(n->host.name));
		FUZZ_ASSERT(n->host.n_altnames <= HPN_MAX_ALTNAMES);
		/* A child is deleted by kind: only the kinds ADD creates. */
		FUZZ_ASSERT((n->kind == HPN_NIC_CHILD) == (!strcmp(n->child_kind, "macvlan") ||
							   !strcmp(n->child_kind, "ipvlan")));
		/* A CDI spec DEL removes: a file name of ADD's rule, in an absolute directory. */
		if (n->rdma.cdi_spec[0]) {
			enum hpn_cdi_owner o;
			char id[HPN_CDI_ID_MAX];

			FUZZ_ASSERT(hpn_cdi_parse_file(n->rdma.cdi_spec, &o, id) == 0 &&
				    o == HPN_CDI_POD && n->rdma.created);
		}
	}

	/*
	 * Written back, it reads back the same. A write may fail, saying why,
	 * but atomically: the journal on disk is still the one just read. What
	 * it must not do is succeed and leave a journal the reader refuses (DEL
	 * and GC could then never undo the attachment).
	 */
	w = hpn_journal_write(&store, KEY, &j, &err);
	FUZZ_ASSERT(w <= 0);
	if (w < 0)
		FUZZ_ASSERT(err.code != 0 && err.msg[0]);
	memset(&err, 0, sizeof(err));
	r = hpn_journal_read(&store, KEY, &again, &err);
	if (r < 0)
		fprintf(stderr,
			"fuzz: journal written back (write returned %d) does not read: %s\n", w,
			err.msg);
	FUZZ_ASSERT(r == 0);
	check_same(&j, &again);
	/* Written in this boot, it reads back as this boot's (stale only if not rewritten). */
	FUZZ_ASSERT(w < 0 || !again.stale);
	hpn_journal_free(&again);
	hpn_journal_free(&j);
	return 0;
}
