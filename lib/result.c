// SPDX-License-Identifier: Apache-2.0
#include "result.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cni.h"
#include "util.h"

struct hpn_result *hpn_result_new(void)
{
	struct hpn_result *res = calloc(1, sizeof(*res));

	return res;
}

void hpn_dns_free(struct hpn_dns *dns)
{
	for (size_t i = 0; i < dns->n_nameservers; i++)
		free(dns->nameservers[i]);
	for (size_t i = 0; i < dns->n_search; i++)
		free(dns->search[i]);
	for (size_t i = 0; i < dns->n_options; i++)
		free(dns->options[i]);
	free(dns->domain);
	memset(dns, 0, sizeof(*dns));
}

void hpn_result_free(struct hpn_result *res)
{
	if (!res)
		return;
	for (size_t i = 0; i < res->n_ifaces; i++) {
		free(res->ifaces[i].name);
		free(res->ifaces[i].mac);
		free(res->ifaces[i].sandbox);
		free(res->ifaces[i].pci_id);
		free(res->ifaces[i].socket_path);
	}
	for (size_t i = 0; i < res->n_ips; i++) {
		free(res->ips[i].address);
		free(res->ips[i].gateway);
	}
	for (size_t i = 0; i < res->n_routes; i++) {
		free(res->routes[i].dst);
		free(res->routes[i].gw);
	}
	hpn_dns_free(&res->dns);
	free(res->nccl_file);
	free(res->nccl_conf_file);
	hpn_vars_free(&res->nccl);
	free(res);
}

static bool valid_ip(const char *s)
{
	unsigned char buf[16];

	return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

static bool valid_cidr(const char *s)
{
	char ip[64];
	const char *slash = strchr(s, '/');
	char *end;
	long plen;
	unsigned char buf[16];

	if (!slash || (size_t)(slash - s) >= sizeof(ip))
		return false;
	memcpy(ip, s, (size_t)(slash - s));
	ip[slash - s] = '\0';
	/* Digits only, no sign, blanks or leading zeros: "/010" must not mean 8 or 10. */
	if (!slash[1] || strspn(slash + 1, "0123456789") != strlen(slash + 1) ||
	    strlen(slash + 1) > 3 || (slash[1] == '0' && slash[2]))
		return false;
	plen = strtol(slash + 1, &end, 10);
	if (inet_pton(AF_INET, ip, buf) == 1)
		return plen <= 32;
	if (inet_pton(AF_INET6, ip, buf) == 1)
		return plen <= 128;
	return false;
}

static int get_str(const cJSON *obj, const char *key, const char *prefix, char **ret,
		   struct hpn_err *err)
{
	return hpn_json_str(obj, key, prefix, HPN_E_DECODE, 0, ret, err);
}

static int get_int(const cJSON *obj, const char *key, const char *prefix, int min, int max,
		   int *ret, bool *present, struct hpn_err *err)
{
	return hpn_json_int(obj, key, prefix, HPN_E_DECODE, min, max, ret, present, err);
}

static int get_str_array(const cJSON *obj, const char *key, const char *what, char **out, size_t *n,
			 struct hpn_err *err)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, key), *v;

	if (!arr || cJSON_IsNull(arr))
		return 0;
	if (!cJSON_IsArray(arr))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "%s.%s must be an array", what, key);
	cJSON_ArrayForEach (v, arr) {
		if (!cJSON_IsString(v))
			return hpn_err_set(err, HPN_E_DECODE, EINVAL, "%s.%s must hold strings",
					   what, key);
		if (*n == HPN_MAX_DNS)
			return hpn_err_set(err, HPN_E_DECODE, E2BIG,
					   "%s.%s has more than %d entries", what, key,
					   HPN_MAX_DNS);
		out[*n] = strdup(v->valuestring);
		if (!out[*n])
			return -ENOMEM;
		(*n)++;
	}
	return 0;
}

int hpn_dns_from_cjson(const void *vobj, struct hpn_dns *dns, struct hpn_err *err)
{
	const cJSON *obj = vobj;
	int r;

	if (!obj || cJSON_IsNull(obj))
		return 0;
	if (!cJSON_IsObject(obj))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "dns must be an object");
	r = get_str_array(obj, "nameservers", "dns", dns->nameservers, &dns->n_nameservers, err);
	if (r >= 0)
		r = get_str(obj, "domain", "dns.", &dns->domain, err);
	if (r >= 0)
		r = get_str_array(obj, "search", "dns", dns->search, &dns->n_search, err);
	if (r >= 0)
		r = get_str_array(obj, "options", "dns", dns->options, &dns->n_options, err);
	return r;
}

static int parse_iface(const cJSON *o, size_t idx, struct hpn_iface *ifc, struct hpn_err *err)
{
	char what[32];
	int r;

	snprintf(what, sizeof(what), "interfaces[%zu].", idx);
	if (!cJSON_IsObject(o))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "interfaces[%zu] must be an object",
				   idx);
	r = get_str(o, "name", what, &ifc->name, err);
	if (r >= 0 && !ifc->name)
		r = hpn_err_set(err, HPN_E_DECODE, EINVAL, "%sname is required", what);
	if (r >= 0)
		r = get_str(o, "mac", what, &ifc->mac, err);
	if (r >= 0)
		r = get_int(o, "mtu", what, 0, 65535 * 16, &ifc->mtu, NULL, err);
	if (r >= 0)
		r = get_str(o, "sandbox", what, &ifc->sandbox, err);
	if (r >= 0)
		r = get_str(o, "pciID", what, &ifc->pci_id, err);
	if (r >= 0)
		r = get_str(o, "socketPath", what, &ifc->socket_path, err);
	return r;
}

static int parse_ip(const cJSON *o, size_t idx, size_t n_ifaces, struct hpn_ipcfg *ip,
		    struct hpn_err *err)
{
	bool has_if;
	char what[32];
	int r;

	snprintf(what, sizeof(what), "ips[%zu].", idx);
	ip->interface = -1;
	if (!cJSON_IsObject(o))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "ips[%zu] must be an object", idx);
	r = get_str(o, "address", what, &ip->address, err);
	if (r < 0)
		return r;
	if (!ip->address || !valid_cidr(ip->address))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "%saddress must be an IP/prefix",
				   what);
	r = get_str(o, "gateway", what, &ip->gateway, err);
	if (r < 0)
		return r;
	if (ip->gateway && !valid_ip(ip->gateway))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "%sgateway is not an IP address",
				   what);
	r = get_int(o, "interface", what, 0, HPN_MAX_IFACES - 1, &ip->interface, &has_if, err);
	if (r < 0)
		return r;
	if (!has_if)
		ip->interface = -1;
	else if ((size_t)ip->interface >= n_ifaces)
		return hpn_err_set(err, HPN_E_DECODE, EINVAL,
				   "%sinterface %d is past the %zu interfaces", what, ip->interface,
				   n_ifaces);
	return 0;
}

static int parse_route(const cJSON *o, size_t idx, struct hpn_route *rt, struct hpn_err *err)
{
	static const struct {
		const char *key;
		unsigned flag;
		int min, max;
		size_t off;
	} ints[] = {
		{ "mtu", HPN_ROUTE_HAS_MTU, 0, 1 << 20, offsetof(struct hpn_route, mtu) },
		{ "advmss", HPN_ROUTE_HAS_ADVMSS, 0, 1 << 20, offsetof(struct hpn_route, advmss) },
		{ "priority", HPN_ROUTE_HAS_PRIORITY, 0, 0x7fffffff,
		  offsetof(struct hpn_route, priority) },
		{ "table", HPN_ROUTE_HAS_TABLE, 0, 0x7fffffff, offsetof(struct hpn_route, table) },
		{ "scope", HPN_ROUTE_HAS_SCOPE, 0, 255, offsetof(struct hpn_route, scope) },
	};
	char what[32];
	int r;

	snprintf(what, sizeof(what), "routes[%zu].", idx);
	if (!cJSON_IsObject(o))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "routes[%zu] must be an object", idx);
	r = get_str(o, "dst", what, &rt->dst, err);
	if (r < 0)
		return r;
	if (!rt->dst || !valid_cidr(rt->dst))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "%sdst must be an IP/prefix", what);
	r = get_str(o, "gw", what, &rt->gw, err);
	if (r < 0)
		return r;
	if (rt->gw && !valid_ip(rt->gw))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "%sgw is not an IP address", what);
	for (size_t i = 0; i < HPN_ARRAY_SIZE(ints); i++) {
		bool present;

		r = get_int(o, ints[i].key, what, ints[i].min, ints[i].max,
			    (int *)((char *)rt + ints[i].off), &present, err);
		if (r < 0)
			return r;
		if (present)
			rt->has |= ints[i].flag;
	}
	return 0;
}

static int parse_array(const cJSON *obj, const char *key, size_t max, const cJSON **ret,
		       struct hpn_err *err)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, key);

	*ret = NULL;
	if (!arr || cJSON_IsNull(arr))
		return 0;
	if (!cJSON_IsArray(arr))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "result.%s must be an array", key);
	if ((size_t)cJSON_GetArraySize(arr) > max)
		return hpn_err_set(err, HPN_E_DECODE, E2BIG, "result.%s has more than %zu entries",
				   key, max);
	*ret = arr;
	return 0;
}

/* Copies an optional string member into a fixed buffer; too long is an error. */
static int get_buf(const cJSON *obj, const char *key, const char *prefix, char *buf, size_t len,
		   struct hpn_err *err)
{
	char *v = NULL;
	int r = hpn_json_str(obj, key, prefix, HPN_E_DECODE, len - 1, &v, err);

	if (r >= 0 && v)
		memcpy(buf, v, strlen(v) + 1);
	free(v);
	return r;
}

/* rdma[i].gpu: {"id", "pciID", "distance", "far"}, the GPU the NIC serves (optional). */
static int parse_rdma_gpu(const cJSON *g, const char *what, struct hpn_rdma_info *ri,
			  struct hpn_err *err)
{
	char gwhat[48];
	int r;

	if (!g || cJSON_IsNull(g))
		return 0;
	snprintf(gwhat, sizeof(gwhat), "%sgpu.", what);
	if (!cJSON_IsObject(g))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "%sgpu must be an object", what);
	r = get_buf(g, "id", gwhat, ri->gpu_id, sizeof(ri->gpu_id), err);
	if (r >= 0)
		r = get_buf(g, "pciID", gwhat, ri->gpu_pci, sizeof(ri->gpu_pci), err);
	if (r >= 0)
		r = get_buf(g, "distance", gwhat, ri->gpu_dist, sizeof(ri->gpu_dist), err);
	if (r >= 0)
		r = hpn_json_bool(g, "far", gwhat, HPN_E_DECODE, &ri->gpu_far, err);
	return r;
}

/*
 * rdma[i].qos: {"dcb", "netdev", "pfc": [priorities], "trust", "trafficClass",
 * "fifoTrafficClass", "serviceLevel", "lossless", "note"} (optional).
 */
static int parse_rdma_qos(const cJSON *q, const char *what, struct hpn_rdma_qos *rq,
			  struct hpn_err *err)
{
	const cJSON *pfc, *p;
	char qwhat[48];
	int r;

	rq->pfc = -1;
	if (!q || cJSON_IsNull(q))
		return 0;
	snprintf(qwhat, sizeof(qwhat), "%sqos.", what);
	if (!cJSON_IsObject(q))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "%sqos must be an object", what);
	r = get_buf(q, "dcb", qwhat, rq->dcb, sizeof(rq->dcb), err);
	if (r >= 0)
		r = get_buf(q, "netdev", qwhat, rq->netdev, sizeof(rq->netdev), err);
	if (r >= 0)
		r = get_buf(q, "trust", qwhat, rq->trust, sizeof(rq->trust), err);
	if (r >= 0)
		r = get_buf(q, "lossless", qwhat, rq->lossless, sizeof(rq->lossless), err);
	if (r >= 0)
		r = get_buf(q, "note", qwhat, rq->note, sizeof(rq->note), err);
	if (r >= 0)
		r = get_int(q, "trafficClass", qwhat, 0, 255, &rq->tc, NULL, err);
	if (r >= 0)
		r = get_int(q, "fifoTrafficClass", qwhat, 0, 255, &rq->fifo_tc, NULL, err);
	if (r >= 0)
		r = get_int(q, "serviceLevel", qwhat, 0, 15, &rq->sl, NULL, err);
	if (r < 0)
		return r;
	pfc = cJSON_GetObjectItemCaseSensitive(q, "pfc");
	if (!pfc || cJSON_IsNull(pfc))
		return 0;
	if (!cJSON_IsArray(pfc))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "%spfc must be an array", qwhat);
	rq->pfc = 0;
	cJSON_ArrayForEach (p, pfc) {
		if (!cJSON_IsNumber(p) || p->valuedouble != (int)p->valuedouble ||
		    p->valueint < 0 || p->valueint > 7)
			return hpn_err_set(err, HPN_E_DECODE, EINVAL,
					   "%spfc must hold priorities 0-7", qwhat);
		rq->pfc |= 1 << p->valueint;
	}
	return 0;
}

static int parse_rdma(const cJSON *o, size_t idx, size_t n_ifaces, struct hpn_rdma_info *ri,
		      struct hpn_err *err)
{
	const struct {
		const char *key;
		char *buf;
		size_t len;
	} strs[] = {
		{ "device", ri->device, sizeof(ri->device) },
		{ "gid", ri->gid, sizeof(ri->gid) },
		{ "driver", ri->driver, sizeof(ri->driver) },
		{ "netnsMode", ri->netns_mode, sizeof(ri->netns_mode) },
		{ "linkLayer", ri->link_layer, sizeof(ri->link_layer) },
		{ "transport", ri->transport, sizeof(ri->transport) },
		{ "portGUID", ri->port_guid, sizeof(ri->port_guid) },
		{ "pciID", ri->pci, sizeof(ri->pci) },
		{ "reason", ri->reason, sizeof(ri->reason) },
	};
	char what[32];
	int r;

	snprintf(what, sizeof(what), "rdma[%zu].", idx);
	if (!cJSON_IsObject(o))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "rdma[%zu] must be an object", idx);
	memset(ri, 0, sizeof(*ri));
	ri->gid_index = -1;
	r = get_int(o, "interface", what, 0, (int)n_ifaces - 1, &ri->interface, NULL, err);
	if (r >= 0)
		r = hpn_json_bool(o, "bound", what, HPN_E_DECODE, &ri->bound, err);
	if (r >= 0)
		r = hpn_json_bool(o, "vf", what, HPN_E_DECODE, &ri->vf, err);
	if (r >= 0)
		r = get_int(o, "port", what, 0, 255, &ri->port, NULL, err);
	if (r >= 0)
		r = get_int(o, "gidIndex", what, -1, 65535, &ri->gid_index, NULL, err);
	if (r >= 0)
		r = get_int(o, "lid", what, 0, 65535, &ri->lid, NULL, err);
	for (size_t i = 0; r >= 0 && i < HPN_ARRAY_SIZE(strs); i++)
		r = get_buf(o, strs[i].key, what, strs[i].buf, strs[i].len, err);
	if (r >= 0 && !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "interface")))
		r = hpn_err_set(err, HPN_E_DECODE, EINVAL, "%sinterface is required", what);
	if (r >= 0)
		r = parse_rdma_gpu(cJSON_GetObjectItemCaseSensitive(o, "gpu"), what, ri, err);
	if (r >= 0)
		r = parse_rdma_qos(cJSON_GetObjectItemCaseSensitive(o, "qos"), what, &ri->qos, err);
	return r;
}

/*
 * "nccl": {"file": "/run/hpn-rdma/pods/<key>/nccl.conf", "confFile": "/etc/nccl.conf",
 * "env": {"NCCL_...": "..."}}; confFile is newer than the others.
 */
static int parse_nccl(const cJSON *o, struct hpn_result *res, struct hpn_err *err)
{
	const cJSON *env, *v;
	int r;

	if (!o || cJSON_IsNull(o))
		return 0;
	if (!cJSON_IsObject(o))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "nccl must be an object");
	r = hpn_json_str(o, "file", "nccl.", HPN_E_DECODE, 4095, &res->nccl_file, err);
	if (r >= 0)
		r = hpn_json_str(o, "confFile", "nccl.", HPN_E_DECODE, HPN_NCCL_VALUE_MAX,
				 &res->nccl_conf_file, err);
	if (r < 0)
		return r;
	env = cJSON_GetObjectItemCaseSensitive(o, "env");
	if (env && !cJSON_IsObject(env))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "nccl.env must be an object");
	cJSON_ArrayForEach (v, env) {
		if (!hpn_nccl_valid_name(v->string) || !cJSON_IsString(v) ||
		    !hpn_nccl_valid_value(v->valuestring))
			return hpn_err_set(err, HPN_E_DECODE, EINVAL,
					   "nccl.env.%.64s must be an NCCL_ name with a printable "
					   "string value of at most %d bytes",
					   v->string, HPN_NCCL_VALUE_MAX);
		if (hpn_vars_get(&res->nccl, v->string))
			return hpn_err_set(err, HPN_E_DECODE, EINVAL, "nccl.env.%s is repeated",
					   v->string);
		r = hpn_vars_set(&res->nccl, v->string, v->valuestring);
		if (r == -E2BIG)
			return hpn_err_set(err, HPN_E_DECODE, E2BIG,
					   "nccl.env has more than %d settings", HPN_MAX_VARS);
		if (r < 0)
			return r;
	}
	return 0;
}

int hpn_result_from_cjson(const void *vobj, struct hpn_result **ret, struct hpn_err *err)
{
	const cJSON *obj = vobj, *arr, *v;
	struct hpn_result *res;
	int r;

	if (!cJSON_IsObject(obj))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "result must be a JSON object");
	res = hpn_result_new();
	if (!res)
		return -ENOMEM;
	r = parse_array(obj, "interfaces", HPN_MAX_IFACES, &arr, err);
	if (r >= 0 && arr)
		cJSON_ArrayForEach (v, arr) {
			r = parse_iface(v, res->n_ifaces, &res->ifaces[res->n_ifaces], err);
			res->n_ifaces++;
			if (r < 0)
				break;
		}
	if (r >= 0)
		r = parse_array(obj, "ips", HPN_MAX_IPS, &arr, err);
	if (r >= 0 && arr)
		cJSON_ArrayForEach (v, arr) {
			r = parse_ip(v, res->n_ips, res->n_ifaces, &res->ips[res->n_ips], err);
			res->n_ips++;
			if (r < 0)
				break;
		}
	if (r >= 0)
		r = parse_array(obj, "routes", HPN_MAX_ROUTES, &arr, err);
	if (r >= 0 && arr)
		cJSON_ArrayForEach (v, arr) {
			r = parse_route(v, res->n_routes, &res->routes[res->n_routes], err);
			res->n_routes++;
			if (r < 0)
				break;
		}
	if (r >= 0)
		r = parse_array(obj, "rdma", HPN_MAX_RDMA, &arr, err);
	if (r >= 0 && arr)
		cJSON_ArrayForEach (v, arr) {
			r = parse_rdma(v, res->n_rdma, res->n_ifaces, &res->rdma[res->n_rdma], err);
			res->n_rdma++;
			if (r < 0)
				break;
		}
	if (r >= 0)
		r = parse_nccl(cJSON_GetObjectItemCaseSensitive(obj, "nccl"), res, err);
	if (r >= 0)
		r = hpn_dns_from_cjson(cJSON_GetObjectItemCaseSensitive(obj, "dns"), &res->dns,
				       err);
	if (r < 0) {
		hpn_result_free(res);
		return r;
	}
	*ret = res;
	return 0;
}

int hpn_result_parse(const char *json, size_t len, struct hpn_result **ret, struct hpn_err *err)
{
	cJSON *obj = hpn_json_parse(json, len);
	int r;

	if (!obj)
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "result is not valid JSON");
	if (hpn_json_has_nul(json, len)) {
		cJSON_Delete(obj);
		return hpn_err_set(err, HPN_E_DECODE, EINVAL,
				   "result: a string holds a NUL (\\u0000)");
	}
	r = hpn_result_from_cjson(obj, ret, err);
	cJSON_Delete(obj);
	return r;
}

static int dup_into(char **dst, const char *src)
{
	*dst = NULL;
	if (!src)
		return 0;
	*dst = strdup(src);
	return *dst ? 0 : -ENOMEM;
}

int hpn_result_add_iface(struct hpn_result *res, const struct hpn_iface *src)
{
	struct hpn_iface *d;

	if (res->n_ifaces == HPN_MAX_IFACES)
		return -E2BIG;
	d = &res->ifaces[res->n_ifaces];
	memset(d, 0, sizeof(*d));
	d->mtu = src->mtu;
	/* Count it first so hpn_result_free() owns whatever was copied. */
	res->n_ifaces++;
	if (dup_into(&d->name, src->name) || dup_into(&d->mac, src->mac) ||
	    dup_into(&d->sandbox, src->sandbox) || dup_into(&d->pci_id, src->pci_id) ||
	    dup_into(&d->socket_path, src->socket_path))
		return -ENOMEM;
	return (int)res->n_ifaces - 1;
}

int hpn_dns_copy(struct hpn_dns *dst, const struct hpn_dns *src)
{
	hpn_dns_free(dst);
	for (size_t i = 0; i < src->n_nameservers; i++, dst->n_nameservers++)
		if (dup_into(&dst->nameservers[i], src->nameservers[i]))
			return -ENOMEM;
	for (size_t i = 0; i < src->n_search; i++, dst->n_search++)
		if (dup_into(&dst->search[i], src->search[i]))
			return -ENOMEM;
	for (size_t i = 0; i < src->n_options; i++, dst->n_options++)
		if (dup_into(&dst->options[i], src->options[i]))
			return -ENOMEM;
	return dup_into(&dst->domain, src->domain);
}

bool hpn_dns_empty(const struct hpn_dns *dns)
{
	return !dns->n_nameservers && !dns->domain && !dns->n_search && !dns->n_options;
}

int hpn_result_add_route(struct hpn_result *res, const struct hpn_route *rt)
{
	struct hpn_route *d;

	if (res->n_routes == HPN_MAX_ROUTES)
		return -E2BIG;
	d = &res->routes[res->n_routes];
	*d = *rt;
	d->dst = d->gw = NULL;
	if (dup_into(&d->dst, rt->dst) || dup_into(&d->gw, rt->gw)) {
		free(d->dst);
		free(d->gw);
		return -ENOMEM;
	}
	res->n_routes++;
	return 0;
}

int hpn_result_append(struct hpn_result *dst, const struct hpn_result *src, int iface)
{
	size_t base = dst->n_ifaces;
	int r = 0;

	if (dst->n_ifaces + src->n_ifaces > HPN_MAX_IFACES ||
	    dst->n_ips + src->n_ips > HPN_MAX_IPS ||
	    dst->n_routes + src->n_routes > HPN_MAX_ROUTES ||
	    dst->n_rdma + src->n_rdma > HPN_MAX_RDMA)
		return -E2BIG;
	/* Like IPs, RDMA entries point at their interface: shifted past dst's, or iface. */
	for (size_t i = 0; i < src->n_rdma; i++) {
		struct hpn_rdma_info *d = &dst->rdma[dst->n_rdma++];

		*d = src->rdma[i];
		d->interface = iface >= 0 ? iface : d->interface + (int)base;
	}
	for (size_t i = 0; r >= 0 && i < src->n_ifaces; i++)
		r = hpn_result_add_iface(dst, &src->ifaces[i]);
	if (r < 0)
		return r;
	for (size_t i = 0; i < src->n_ips; i++) {
		struct hpn_ipcfg *d = &dst->ips[dst->n_ips++];

		if (iface >= 0)
			d->interface = iface;
		else if (src->ips[i].interface >= 0)
			d->interface = src->ips[i].interface + (int)base;
		else
			d->interface = -1;
		if (dup_into(&d->address, src->ips[i].address) ||
		    dup_into(&d->gateway, src->ips[i].gateway))
			return -ENOMEM;
	}
	for (size_t i = 0; i < src->n_routes; i++) {
		struct hpn_route *d = &dst->routes[dst->n_routes++];

		*d = src->routes[i];
		d->dst = d->gw = NULL;
		if (dup_into(&d->dst, src->routes[i].dst) || dup_into(&d->gw, src->routes[i].gw))
			return -ENOMEM;
	}
	/* The newest hints describe the file as it now is. */
	if (src->nccl_file || src->nccl.n) {
		free(dst->nccl_file);
		free(dst->nccl_conf_file);
		dst->nccl_file = dst->nccl_conf_file = NULL;
		if (dup_into(&dst->nccl_file, src->nccl_file) ||
		    dup_into(&dst->nccl_conf_file, src->nccl_conf_file) ||
		    hpn_vars_copy(&dst->nccl, &src->nccl) < 0)
			return -ENOMEM;
	}
	if (hpn_dns_empty(&dst->dns))
		return hpn_dns_copy(&dst->dns, &src->dns);
	return 0;
}

/* ---- rendering ---- */

static void add_str_array(cJSON *obj, const char *key, char *const *v, size_t n)
{
	cJSON *arr;

	if (!n)
		return;
	arr = cJSON_AddArrayToObject(obj, key);
	for (size_t i = 0; arr && i < n; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(v[i]));
}

static void add_nonempty(cJSON *o, const char *key, const char *v)
{
	if (v[0])
		cJSON_AddStringToObject(o, key, v);
}

static void render_rdma_qos(cJSON *o, const struct hpn_rdma_qos *rq)
{
	cJSON *q = cJSON_AddObjectToObject(o, "qos"), *pfc;

	if (!q)
		return;
	cJSON_AddStringToObject(q, "dcb", rq->dcb);
	add_nonempty(q, "netdev", rq->netdev);
	if (rq->pfc >= 0 && (pfc = cJSON_AddArrayToObject(q, "pfc")))
		for (int p = 0; p < 8; p++)
			if (rq->pfc & (1 << p))
				cJSON_AddItemToArray(pfc, cJSON_CreateNumber(p));
	add_nonempty(q, "trust", rq->trust);
	cJSON_AddNumberToObject(q, "trafficClass", rq->tc);
	cJSON_AddNumberToObject(q, "fifoTrafficClass", rq->fifo_tc);
	cJSON_AddNumberToObject(q, "serviceLevel", rq->sl);
	cJSON_AddStringToObject(q, "lossless", rq->lossless);
	add_nonempty(q, "note", rq->note);
}

static cJSON *render_rdma(const struct hpn_rdma_info *ri)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "interface", ri->interface);
	cJSON_AddBoolToObject(o, "bound", ri->bound);
	if (ri->gpu_id[0]) {
		cJSON *g = cJSON_AddObjectToObject(o, "gpu");

		cJSON_AddStringToObject(g, "id", ri->gpu_id);
		add_nonempty(g, "pciID", ri->gpu_pci);
		cJSON_AddStringToObject(g, "distance", ri->gpu_dist);
		if (ri->gpu_far)
			cJSON_AddBoolToObject(g, "far", true);
	}
	if (!ri->bound) {
		add_nonempty(o, "reason", ri->reason);
		return o;
	}
	cJSON_AddStringToObject(o, "device", ri->device);
	cJSON_AddNumberToObject(o, "port", ri->port);
	if (ri->gid_index >= 0)
		cJSON_AddNumberToObject(o, "gidIndex", ri->gid_index);
	add_nonempty(o, "gid", ri->gid);
	add_nonempty(o, "driver", ri->driver);
	add_nonempty(o, "pciID", ri->pci);
	if (ri->vf)
		cJSON_AddBoolToObject(o, "vf", true);
	add_nonempty(o, "netnsMode", ri->netns_mode);
	add_nonempty(o, "linkLayer", ri->link_layer);
	add_nonempty(o, "transport", ri->transport);
	if (ri->port_guid[0]) {
		cJSON_AddNumberToObject(o, "lid", ri->lid);
		cJSON_AddStringToObject(o, "portGUID", ri->port_guid);
	}
	if (ri->qos.dcb[0])
		render_rdma_qos(o, &ri->qos);
	return o;
}

char *hpn_result_render(const struct hpn_result *res, const char *version)
{
	/* 0.3.x and 0.4.0 carry ips[].version; mtu/pciID/socketPath came with 1.x. */
	bool legacy = hpn_version_cmp(version, "1.0.0") < 0;
	cJSON *root = cJSON_CreateObject(), *arr, *o;

	if (!root)
		return NULL;
	cJSON_AddStringToObject(root, "cniVersion", version);
	if (res->n_ifaces) {
		arr = cJSON_AddArrayToObject(root, "interfaces");
		for (size_t i = 0; i < res->n_ifaces; i++) {
			const struct hpn_iface *ifc = &res->ifaces[i];

			o = cJSON_CreateObject();
			cJSON_AddItemToArray(arr, o);
			cJSON_AddStringToObject(o, "name", ifc->name);
			if (ifc->mac)
				cJSON_AddStringToObject(o, "mac", ifc->mac);
			if (!legacy && ifc->mtu)
				cJSON_AddNumberToObject(o, "mtu", ifc->mtu);
			if (ifc->sandbox)
				cJSON_AddStringToObject(o, "sandbox", ifc->sandbox);
			if (!legacy && ifc->socket_path)
				cJSON_AddStringToObject(o, "socketPath", ifc->socket_path);
			if (!legacy && ifc->pci_id)
				cJSON_AddStringToObject(o, "pciID", ifc->pci_id);
		}
	}
	if (res->n_ips) {
		arr = cJSON_AddArrayToObject(root, "ips");
		for (size_t i = 0; i < res->n_ips; i++) {
			const struct hpn_ipcfg *ip = &res->ips[i];

			o = cJSON_CreateObject();
			cJSON_AddItemToArray(arr, o);
			if (legacy)
				cJSON_AddStringToObject(o, "version",
							strchr(ip->address, ':') ? "6" : "4");
			cJSON_AddStringToObject(o, "address", ip->address);
			if (ip->gateway)
				cJSON_AddStringToObject(o, "gateway", ip->gateway);
			if (ip->interface >= 0)
				cJSON_AddNumberToObject(o, "interface", ip->interface);
		}
	}
	if (res->n_routes) {
		arr = cJSON_AddArrayToObject(root, "routes");
		for (size_t i = 0; i < res->n_routes; i++) {
			const struct hpn_route *rt = &res->routes[i];
			bool v11 = hpn_version_cmp(version, "1.1.0") >= 0;

			o = cJSON_CreateObject();
			cJSON_AddItemToArray(arr, o);
			cJSON_AddStringToObject(o, "dst", rt->dst);
			if (rt->gw)
				cJSON_AddStringToObject(o, "gw", rt->gw);
			/* Route attributes beyond dst/gw are CNI 1.1.0 fields. */
			if (v11 && (rt->has & HPN_ROUTE_HAS_MTU))
				cJSON_AddNumberToObject(o, "mtu", rt->mtu);
			if (v11 && (rt->has & HPN_ROUTE_HAS_ADVMSS))
				cJSON_AddNumberToObject(o, "advmss", rt->advmss);
			if (v11 && (rt->has & HPN_ROUTE_HAS_PRIORITY))
				cJSON_AddNumberToObject(o, "priority", rt->priority);
			if (v11 && (rt->has & HPN_ROUTE_HAS_TABLE))
				cJSON_AddNumberToObject(o, "table", rt->table);
			if (v11 && (rt->has & HPN_ROUTE_HAS_SCOPE))
				cJSON_AddNumberToObject(o, "scope", rt->scope);
		}
	}
	if (res->n_rdma) {
		arr = cJSON_AddArrayToObject(root, "rdma");
		for (size_t i = 0; i < res->n_rdma; i++)
			cJSON_AddItemToArray(arr, render_rdma(&res->rdma[i]));
	}
	if (res->nccl_file || res->nccl.n) {
		cJSON *env;

		o = cJSON_AddObjectToObject(root, "nccl");
		if (o && res->nccl_file)
			cJSON_AddStringToObject(o, "file", res->nccl_file);
		if (o && res->nccl_conf_file)
			cJSON_AddStringToObject(o, "confFile", res->nccl_conf_file);
		env = o ? cJSON_AddObjectToObject(o, "env") : NULL;
		for (size_t i = 0; env && i < res->nccl.n; i++)
			cJSON_AddStringToObject(env, res->nccl.v[i].key, res->nccl.v[i].value);
	}
	o = cJSON_AddObjectToObject(root, "dns");
	if (o) {
		add_str_array(o, "nameservers", res->dns.nameservers, res->dns.n_nameservers);
		if (res->dns.domain)
			cJSON_AddStringToObject(o, "domain", res->dns.domain);
		add_str_array(o, "search", res->dns.search, res->dns.n_search);
		add_str_array(o, "options", res->dns.options, res->dns.n_options);
	}
	return hpn_json_print(root);
}

/* The first address of interface iface, IPv4 first: RoCE v2 GIDs of IPv4 are what NCCL picks. */
static const char *iface_addr(const struct hpn_result *res, int iface)
{
	const char *v6 = NULL;

	for (size_t i = 0; i < res->n_ips; i++) {
		if (res->ips[i].interface != iface)
			continue;
		if (!strchr(res->ips[i].address, ':'))
			return res->ips[i].address;
		if (!v6)
			v6 = res->ips[i].address;
	}
	return v6;
}

size_t hpn_result_bound(const struct hpn_result *res, struct hpn_bound_nic *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < res->n_rdma && n < max; i++) {
		const struct hpn_rdma_info *ri = &res->rdma[i];
		bool known = ri->interface >= 0 && (size_t)ri->interface < res->n_ifaces;

		out[n++] = (struct hpn_bound_nic){
			.ifname = known ? res->ifaces[ri->interface].name : NULL,
			.address = iface_addr(res, ri->interface),
			.rdma = ri,
		};
	}
	return n;
}

const char *hpn_result_route_gw(const struct hpn_result *res, const struct hpn_route *rt)
{
	bool v6 = strchr(rt->dst, ':');

	if (rt->gw)
		return rt->gw;
	for (size_t i = 0; i < res->n_ips; i++)
		if (res->ips[i].gateway && (strchr(res->ips[i].gateway, ':') != NULL) == v6)
			return res->ips[i].gateway;
	return NULL;
}
