// SPDX-License-Identifier: Apache-2.0
/*
 * dra-nicslice [--shares] SYSFS_ROOT NODE: the ResourceSlices hpn-rdma's DRA
 * driver would publish for the node under SYSFS_ROOT (a fake tree of
 * test/fixtures/gpu-nodes), as one JSON array on stdout. The pool's NICs
 * here are the netdevs with an RDMA device, in PCI order (their rails); each
 * is read by hpn_dra_nic_read and the slices rendered by hpn_dra_slice_render,
 * pool = NODE, generation 1. With --shares, each NIC's shares are
 * hpn_dra_nic_shares' (the agent's --dra-shares on a node whose RDMA netns
 * mode is shared). For unit.dra-align (align.sh) and unit.dra-share (share.sh).
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draslice.h"
#include "util.h"

/* PCI NICs in address order (a function's ports by dev_port), the others after by name. */
static int by_pci(const void *a, const void *b)
{
	const struct hpn_dra_nic *x = a, *y = b;

	if (!x->pci[0] != !y->pci[0])
		return x->pci[0] ? -1 : 1;
	if (strcmp(x->pci, y->pci))
		return strcmp(x->pci, y->pci);
	if (x->dev_port != y->dev_port)
		return x->dev_port < y->dev_port ? -1 : 1;
	return strcmp(x->ifname, y->ifname);
}

int main(int argc, char **argv)
{
	struct hpn_dra_nic *nics;
	struct hpn_err err = { 0 };
	char dir[4096];
	struct dirent *de;
	size_t n = 0, slices;
	bool shares = argc == 4 && !strcmp(argv[1], "--shares");
	DIR *d;

	if (argc != 3 && !shares) {
		fprintf(stderr, "usage: dra-nicslice [--shares] SYSFS_ROOT NODE\n");
		return 2;
	}
	argv += shares;
	nics = calloc(1024, sizeof(*nics));
	snprintf(dir, sizeof(dir), "%s/class/net", argv[1]);
	d = opendir(dir);
	if (!nics || !d) {
		perror(dir);
		return 2;
	}
	while ((de = readdir(d)) && n < 1024) {
		if (de->d_name[0] == '.')
			continue;
		if (hpn_dra_nic_read(argv[1], de->d_name, 0, &nics[n], &err) < 0) {
			fprintf(stderr, "dra-nicslice: %s\n", err.msg);
			return 1;
		}
		if (nics[n].rdma[0])
			n++;
	}
	closedir(d);
	qsort(nics, n, sizeof(*nics), by_pci);
	for (size_t i = 0; i < n; i++) {
		nics[i].rail = (unsigned int)i;
		nics[i].shares = shares ? hpn_dra_nic_shares(argv[1], &nics[i]) : 0;
	}
	slices = hpn_dra_slice_split(nics, n);
	printf("[");
	for (size_t s = 0; s < slices; s++) {
		char *text = hpn_dra_slice_render(HPN_DRA_DRIVER, argv[2], argv[2], 1, nics, n, s,
						  slices, &err);

		if (!text) {
			fprintf(stderr, "dra-nicslice: %s\n", err.msg);
			return 1;
		}
		printf("%s%s", s ? ",\n" : "", text);
		free(text);
	}
	printf("]\n");
	free(nics);
	return 0;
}
