/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_CNI_H
#define HPN_CNI_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/*
 * The CNI protocol: environment, versions, results and error objects. Nothing
 * here touches the host; it turns bytes into structs and structs into bytes.
 */

#define HPN_CNI_VERSION_LATEST "1.1.0"
#define HPN_STDIN_MAX	       (1u << 20)
#define HPN_MAX_ARGS	       32
#define HPN_MAX_IFACES	       64
#define HPN_MAX_IPS	       64
#define HPN_MAX_ROUTES	       256
#define HPN_MAX_DNS	       32
#define HPN_MAX_RDMA	       16
#define HPN_MAX_VARS	       64

enum hpn_cmd {
	HPN_CMD_ADD,
	HPN_CMD_DEL,
	HPN_CMD_CHECK,
	HPN_CMD_VERSION,
	HPN_CMD_STATUS,
	HPN_CMD_GC
};

struct hpn_kv {
	char *key;
	char *value;
};

struct hpn_env {
	enum hpn_cmd cmd;
	const char *command; /* as given, for logs */
	const char *container_id;
	const char *netns;
	const char *ifname;
	const char *path; /* CNI_PATH, ':'-separated */
	struct hpn_kv args[HPN_MAX_ARGS];
	size_t n_args;
};

/* Reads and validates the CNI_* variables for the command (spec "Parameters"). */
int hpn_env_parse(struct hpn_env *env, struct hpn_err *err);
void hpn_env_free(struct hpn_env *env);
/* Value of a CNI_ARGS key, or NULL. */
const char *hpn_env_arg(const struct hpn_env *env, const char *key);
/* Parses "K=V;K=V" into env->args; unknown keys fail unless IgnoreUnknown is true. */
int hpn_args_parse(struct hpn_env *env, const char *s, struct hpn_err *err);

/* Versions this plugin speaks, oldest first, NULL-terminated. */
extern const char *const hpn_cni_versions[];
bool hpn_version_supported(const char *v);
/* Compares "a.b.c" strings numerically; unparsable sorts first. */
int hpn_version_cmp(const char *a, const char *b);

/* Result types (spec "Success"), a superset of every version's fields. */
struct hpn_iface {
	char *name;
	char *mac;
	int mtu; /* 0: unknown */
	char *sandbox;
	char *pci_id;
	char *socket_path;
};

struct hpn_ipcfg {
	char *address; /* CIDR */
	char *gateway;
	int interface; /* index into interfaces, -1 when absent */
};

struct hpn_route {
	char *dst; /* CIDR */
	char *gw;
	int mtu, advmss, priority, table, scope;
	unsigned has; /* HPN_ROUTE_HAS_* */
};

enum {
	HPN_ROUTE_HAS_MTU = 1,
	HPN_ROUTE_HAS_ADVMSS = 2,
	HPN_ROUTE_HAS_PRIORITY = 4,
	HPN_ROUTE_HAS_TABLE = 8,
	HPN_ROUTE_HAS_SCOPE = 16,
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

/*
 * The RDMA device bound for one interface: the result's "rdma" list, an
 * hpn-rdma extension (decoders ignore unknown keys). bound false carries the
 * reason (rdmaRequired false and no RDMA device behind the NIC).
 */
struct hpn_rdma_info {
	int interface; /* index into interfaces */
	bool bound;
	char device[64];
	int port;
	int gid_index;	     /* -1: none */
	char gid[48];	     /* IPv6 notation */
	char driver[16];     /* "mlx5", "erdma", "rxe", "other" */
	char netns_mode[16]; /* "shared" or "exclusive" */
	char link_layer[16]; /* "Ethernet" or "InfiniBand" */
	char transport[8];   /* "roce", "iwarp", "ib" */
	bool vf;	     /* an SR-IOV VF */
	char pci[16];	     /* the RDMA device's PCI function (eRDMA: not the NIC's) */
	int lid;	     /* InfiniBand only */
	char port_guid[20];  /* InfiniBand only */
	char reason[256];    /* why nothing is bound */
};

/* Ordered KEY=value settings (the NCCL hints); a key appears once. */
struct hpn_vars {
	struct hpn_kv v[HPN_MAX_VARS];
	size_t n;
};

/* Sets key to value: replaces it in place when present, else appends; -E2BIG when full. */
int hpn_vars_set(struct hpn_vars *v, const char *key, const char *value);
const char *hpn_vars_get(const struct hpn_vars *v, const char *key);
int hpn_vars_copy(struct hpn_vars *dst, const struct hpn_vars *src);
bool hpn_vars_equal(const struct hpn_vars *a, const struct hpn_vars *b);
void hpn_vars_free(struct hpn_vars *v);

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
	/* The result's "nccl" object, an hpn-rdma extension: the hints file and its settings. */
	char *nccl_file;
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
/* Appends copies of src's ips (pointing at interface index iface_idx) and routes. */
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
/* CNI error object; returns malloc'd JSON text. */
char *hpn_err_render(const struct hpn_err *err, const char *version);
/* VERSION's answer. */
char *hpn_version_render(const char *version);

#endif
