/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_FUZZ_ROUNDTRIP_H
#define HPN_FUZZ_ROUNDTRIP_H

#include <string.h>

#include "cni.h"
#include "fuzz.h"
#include "result.h"

static inline bool fuzz_str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/*
 * back, parsed from res rendered in version v, lost only what v cannot carry:
 * before 1.0.0 interfaces have no mtu, pciID or socketPath; before 1.1.0
 * routes are dst and gw; an unbound RDMA entry is its interface and reason,
 * and a lid goes with a portGUID (InfiniBand).
 */
static inline void fuzz_result_same(const struct hpn_result *res, const struct hpn_result *back,
				    const char *v)
{
	bool v10 = hpn_version_cmp(v, "1.0.0") >= 0, v11 = hpn_version_cmp(v, "1.1.0") >= 0;

	for (size_t i = 0; i < res->n_ifaces; i++) {
		const struct hpn_iface *a = &res->ifaces[i], *b = &back->ifaces[i];

		FUZZ_ASSERT(fuzz_str_eq(a->name, b->name) && fuzz_str_eq(a->mac, b->mac) &&
			    fuzz_str_eq(a->sandbox, b->sandbox));
		if (v10)
			FUZZ_ASSERT(a->mtu == b->mtu && fuzz_str_eq(a->pci_id, b->pci_id) &&
				    fuzz_str_eq(a->socket_path, b->socket_path));
	}
	for (size_t i = 0; i < res->n_ips; i++)
		FUZZ_ASSERT(fuzz_str_eq(res->ips[i].address, back->ips[i].address) &&
			    fuzz_str_eq(res->ips[i].gateway, back->ips[i].gateway) &&
			    res->ips[i].interface == back->ips[i].interface);
	for (size_t i = 0; i < res->n_routes; i++) {
		const struct hpn_route *a = &res->routes[i], *b = &back->routes[i];

		FUZZ_ASSERT(fuzz_str_eq(a->dst, b->dst) && fuzz_str_eq(a->gw, b->gw));
		if (v11)
			FUZZ_ASSERT(a->has == b->has &&
				    (!(a->has & HPN_ROUTE_HAS_MTU) || a->mtu == b->mtu) &&
				    (!(a->has & HPN_ROUTE_HAS_ADVMSS) || a->advmss == b->advmss) &&
				    (!(a->has & HPN_ROUTE_HAS_PRIORITY) ||
				     a->priority == b->priority) &&
				    (!(a->has & HPN_ROUTE_HAS_TABLE) || a->table == b->table) &&
				    (!(a->has & HPN_ROUTE_HAS_SCOPE) || a->scope == b->scope));
	}
	for (size_t i = 0; i < res->n_rdma; i++) {
		const struct hpn_rdma_info *a = &res->rdma[i], *b = &back->rdma[i];

		FUZZ_ASSERT(a->interface == b->interface && a->bound == b->bound);
		if (!a->bound) {
			FUZZ_ASSERT(!strcmp(a->reason, b->reason));
			continue;
		}
		FUZZ_ASSERT(!strcmp(a->device, b->device) && a->port == b->port &&
			    a->gid_index == b->gid_index && !strcmp(a->gid, b->gid) &&
			    !strcmp(a->driver, b->driver) && !strcmp(a->pci, b->pci) &&
			    a->vf == b->vf && !strcmp(a->netns_mode, b->netns_mode) &&
			    !strcmp(a->link_layer, b->link_layer) &&
			    !strcmp(a->transport, b->transport) &&
			    !strcmp(a->port_guid, b->port_guid));
		FUZZ_ASSERT(!a->port_guid[0] || a->lid == b->lid);
	}
	FUZZ_ASSERT(fuzz_str_eq(res->dns.domain, back->dns.domain));
	for (size_t i = 0; i < res->dns.n_nameservers; i++)
		FUZZ_ASSERT(!strcmp(res->dns.nameservers[i], back->dns.nameservers[i]));
	for (size_t i = 0; i < res->dns.n_search; i++)
		FUZZ_ASSERT(!strcmp(res->dns.search[i], back->dns.search[i]));
	for (size_t i = 0; i < res->dns.n_options; i++)
		FUZZ_ASSERT(!strcmp(res->dns.options[i], back->dns.options[i]));
}

/*
 * What the plugin prints it must be able to read back (a prevResult is the
 * previous plugin's printed result): every version's rendering of a parsed
 * result parses, keeps every list whole and every field the version carries,
 * and renders to the same text again.
 */
static inline void fuzz_result_roundtrip(const struct hpn_result *res)
{
	for (size_t i = 0; hpn_cni_versions[i]; i++) {
		const char *v = hpn_cni_versions[i];
		struct hpn_result *back = NULL;
		struct hpn_err err = { 0 };
		char *text = hpn_result_render(res, v), *again;
		int r;

		FUZZ_ASSERT(text);
		r = hpn_result_parse(text, strlen(text), &back, &err);
		if (r < 0)
			fprintf(stderr, "fuzz: rendered %s: %s\nfuzz: reparse: %s\n", v, text,
				err.msg);
		FUZZ_ASSERT(r == 0 && back && err.code == 0);
		FUZZ_ASSERT(back->n_ifaces == res->n_ifaces && back->n_ips == res->n_ips &&
			    back->n_routes == res->n_routes && back->n_rdma == res->n_rdma);
		FUZZ_ASSERT(back->dns.n_nameservers == res->dns.n_nameservers &&
			    back->dns.n_search == res->dns.n_search &&
			    back->dns.n_options == res->dns.n_options);
		fuzz_result_same(res, back, v);
		again = hpn_result_render(back, v);
		FUZZ_ASSERT(again);
		if (strcmp(text, again))
			fprintf(stderr, "fuzz: rendered %s: %s\nfuzz: rendered again: %s\n", v,
				text, again);
		FUZZ_ASSERT(!strcmp(text, again));
		free(again);
		free(text);
		hpn_result_free(back);
	}
}

/* A failed parse says why (a CNI code and a message); a successful one sets nothing. */
static inline void fuzz_err_matches(int r, const struct hpn_err *err)
{
	if (r < 0)
		FUZZ_ASSERT(err->code != 0 && err->msg[0]);
	else
		FUZZ_ASSERT(r == 0 && err->code == 0 && !err->msg[0]);
}

#endif
