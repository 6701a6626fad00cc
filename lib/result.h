/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_RESULT_H
#define HPN_RESULT_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "types.h"
#include "vars.h"

/*
 * CNI results (spec "Success"): parsed from any supported version, built up
 * by ADD and chaining, rendered in the requested version. Nothing here
 * touches the host.
 */

#define HPN_MAX_IFACES 64
#define HPN_MAX_IPS    64
#define HPN_MAX_ROUTES 256
#define HPN_MAX_DNS    32
#define HPN_MAX_RDMA   16

/* A superset of every version's fields. */
struct hpn_iface {
	char *name;
	char *mac;
	int mtu; /* 0: unknown */
	char *sandbox;
	char *pci_id;
	char *socket_path;
};

struct hpn_dns {
	char *nameservers[HPN_MAX_DNS];
	size_t n_nameservers;
	char *domain;
	char *search[HPN_MAX_DNS];
	size_t n_search;
	char *options[HPN_MAX_DNS];
	size_t n_options;
};

struct hpn_result {
	struct hpn_iface ifaces[HPN_MAX_IFACES];
	size_t n_ifaces;
	struct hpn_ipcfg ips[HPN_MAX_IPS];
	size_t n_ips;
	struct hpn_route routes[HPN_MAX_ROUTES];
	size_t n_routes;
	struct hpn_dns dns;
	struct hpn_rdma_info rdma[HPN_MAX_RDMA];
	size_t n_rdma;
	/*
	 * The result's "nccl" object, an hpn-rdma extension: the hints file, the
	 * path the pod mounts it at (nccl.confFile) and its settings.
	 */
	char *nccl_file;
	char *nccl_conf_file;
	struct hpn_vars nccl;
};

struct hpn_result *hpn_result_new(void);
void hpn_result_free(struct hpn_result *res);
/* Parses a result of any supported version (JSON text); what is strict: types, CIDRs. */
int hpn_result_parse(const char *json, size_t len, struct hpn_result **ret, struct hpn_err *err);
/* Same, from an already parsed cJSON object (void * keeps cJSON out of callers). */
int hpn_result_from_cjson(const void *obj, struct hpn_result **ret, struct hpn_err *err);
/* Appends a copy of an interface and returns its index, or -errno. */
int hpn_result_add_iface(struct hpn_result *res, const struct hpn_iface *iface);
/* Appends a copy of a route (its strings copied); -E2BIG when full. */
int hpn_result_add_route(struct hpn_result *res, const struct hpn_route *rt);
/*
 * Appends copies of all of src. With iface < 0 its IPs keep pointing at their
 * own interfaces, shifted past dst's (chaining a prevResult); with iface >= 0
 * every IP is attributed to dst's interface iface (an IPAM result, which has
 * none of its own). DNS is taken from src only when dst has none.
 */
int hpn_result_append(struct hpn_result *dst, const struct hpn_result *src, int iface);
/* Parses a "dns" object (cJSON *) into dns; absent or null leaves it empty. */
int hpn_dns_from_cjson(const void *obj, struct hpn_dns *dns, struct hpn_err *err);
void hpn_dns_free(struct hpn_dns *dns);
int hpn_dns_copy(struct hpn_dns *dst, const struct hpn_dns *src);
bool hpn_dns_empty(const struct hpn_dns *dns);
/* Renders the result in the given version's shape; returns malloc'd JSON text. */
char *hpn_result_render(const struct hpn_result *res, const char *version);
/*
 * What res binds, for what renders from the binding (the NCCL hints): one
 * entry per "rdma" entry, in order, with its interface's name and first
 * address. The entries point into res. Returns how many were filled.
 */
size_t hpn_result_bound(const struct hpn_result *res, struct hpn_bound_nic *out, size_t max);
/* The gateway a route goes through: its own, else the first same-family IP gateway of res. */
const char *hpn_result_route_gw(const struct hpn_result *res, const struct hpn_route *rt);

#endif
