// SPDX-License-Identifier: Apache-2.0
/*
 * agent/attachmetrics.c over a scratch stateDir of more journals than its
 * first allocation holds (16): every attachment rendered with its own pod's
 * labels. The labels point into each record, so records moved by a later
 * realloc must not be pointed at before they stop moving (ASan saw the
 * freed array read once the node held 17 attachments).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attachmetrics.h"
#include "check.h"
#include "exposition.h"
#include "node.h"
#include "store.h"
#include "tmpdir.h"

#define N_ATT 40

static void journal(struct hpn_store *st, int i)
{
	struct hpn_journal j;
	struct hpn_err err = { 0 };
	char key[HPN_KEY_MAX], ns[32], pod[32], cid[32];

	memset(&j, 0, sizeof(j));
	snprintf(cid, sizeof(cid), "c0ffee%04d", i);
	snprintf(ns, sizeof(ns), "ns-%d", i);
	snprintf(pod, sizeof(pod), "pod-%d", i);
	j.n_nics = 1;
	j.phase = HPN_PHASE_SELECTED; /* no netns to read counters from */
	j.container_id = strdup(cid);
	strcpy(j.cni_ifname, "eth0");
	strcpy(j.nics[0].pod_ifname, "hpn0");
	snprintf(j.nics[0].host.name, sizeof(j.nics[0].host.name), "nic%d", i);
	hpn_journal_set_pod(&j, ns, pod, NULL);
	CHECK_INT_EQ(hpn_store_key(j.container_id, j.cni_ifname, key), 0);
	CHECK_INT_EQ(hpn_journal_write(st, key, &j, &err), 0);
	hpn_journal_free(&j);
}

int main(void)
{
	char dir[64], want[128];
	struct hpn_store st = HPN_STORE_INIT;
	struct hpn_err err = { 0 };
	struct node n;
	struct attachmetrics am = { .node = &n, .health = NULL };
	struct sbuf b = { 0 };
	int lines = 0;

	tmpdir_make(dir, sizeof(dir), "attachmetrics");
	CHECK_INT_EQ(hpn_store_open(dir, "net1", &st, &err), 0);
	for (int i = 0; i < N_ATT; i++)
		journal(&st, i);
	hpn_store_close(&st);

	memset(&n, 0, sizeof(n));
	n.conf.state_dir = dir;
	n.conf.name = "net1";
	attachmetrics_render(&b, &am);
	CHECK(!b.oom && b.p);
	snprintf(want, sizeof(want), "hpn_rdma_attachments{network=\"net1\"} %d\n", N_ATT);
	CHECK_STR_HAS(b.p, want);
	/* Each attachment once, with its own pod (a stale pointer shows another's, or garbage). */
	for (int i = 0; i < N_ATT; i++) {
		snprintf(want, sizeof(want),
			 "hpn_rdma_attachment_info{network=\"net1\",namespace=\"ns-%d\",pod=\"pod-%"
			 "d\",",
			 i, i);
		CHECK_STR_HAS(b.p, want);
	}
	for (const char *p = b.p; (p = strstr(p, "\nhpn_rdma_attachment_info{")); p++)
		lines++;
	CHECK_INT_EQ(lines, N_ATT);
	free(b.p);
	tmpdir_rm(dir);
	return check_done();
}
