// SPDX-License-Identifier: Apache-2.0
#include "conf.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <linux/if_link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi.h"
#include "conf_read.h"
#include "store.h"
#include "util.h"

static void cjson_deletep(cJSON **p)
{
	cJSON_Delete(*p);
}
#define _cleanup_cjson_ __attribute__((cleanup(cjson_deletep)))

char *hpn_conf_peek_version(const char *buf, size_t len)
{
	_cleanup_cjson_ cJSON *root = hpn_json_parse(buf, len);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "cniVersion");

	return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

/* rdmaDevice: "mlx5_3" or "mlx5_3:2" (a port of a multi-port device). */
static int parse_rdma_device(struct hpn_conf *conf, struct hpn_err *err)
{
	char *v = conf->selector_value, *colon = strchr(v, ':');
	size_t n = colon ? (size_t)(colon - v) : strlen(v);
	/* It becomes a path component under class/infiniband: no "." or "..". */
	bool ok = n > 0 && n < HPN_IBDEV_MAX && strncmp(v, ".", n) && strncmp(v, "..", n);

	for (size_t i = 0; ok && i < n; i++)
		ok = (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') ||
		     (v[i] >= '0' && v[i] <= '9') || v[i] == '_' || v[i] == '-' || v[i] == '.';
	if (ok && colon) {
		char *end;
		unsigned long port;

		errno = 0;
		port = strtoul(colon + 1, &end, 10);
		ok = colon[1] >= '1' && colon[1] <= '9' && !*end && !errno && port <= 255;
		conf->rdma_port = (unsigned int)port;
	}
	if (!ok)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "rdmaDevice \"%.64s\" is not an RDMA device name like mlx5_3 "
				   "or mlx5_3:1",
				   v);
	if (colon)
		*colon = '\0';
	return 0;
}

static int parse_rdma(struct hpn_conf *conf, const cJSON *root, struct hpn_err *err)
{
	static const struct hpn_conf_name netns_modes[] = {
		{ "auto", HPN_RDMA_NETNS_AUTO },
		{ "shared", HPN_RDMA_NETNS_SHARED },
		{ "exclusive", HPN_RDMA_NETNS_EXCLUSIVE },
	};
	_cleanup_free_ char *mode = NULL;
	int r, v = HPN_RDMA_NETNS_AUTO;

	conf->rdma_required = true;
	r = hpn_json_bool(root, "rdmaRequired", "", HPN_E_INVALID_CONFIG, &conf->rdma_required,
			  err);
	if (r >= 0)
		r = hpn_conf_str(root, "rdmaNetns", "", &mode, err);
	if (r >= 0)
		r = hpn_json_bool(root, "softRoce", "", HPN_E_INVALID_CONFIG, &conf->soft_roce,
				  err);
	if (r >= 0)
		r = hpn_json_bool(root, "erdmaAnyMtu", "", HPN_E_INVALID_CONFIG,
				  &conf->erdma_any_mtu, err);
	if (r < 0)
		return r;
	if (conf->selector == HPN_SEL_RDMA && !conf->rdma_required)
		return hpn_err_set(
			err, HPN_E_INVALID_CONFIG, EINVAL,
			"rdmaDevice selects by RDMA device: rdmaRequired cannot be false");
	/* softRoce is for NICs that have no RDMA device: it makes the one they get. */
	if (conf->soft_roce && !conf->rdma_required)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "softRoce makes an RDMA device for every NIC without one: "
				   "rdmaRequired cannot be false");
	if (conf->soft_roce && conf->selector == HPN_SEL_RDMA)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "softRoce makes an RDMA device for a NIC without one, but "
				   "rdmaDevice selects a NIC by the RDMA device it has: give one "
				   "of them");
	/* Measured on 7.3: rxe over ipvlan children of one parent, made by hand, carries nothing. */
	if (conf->soft_roce && conf->mode == HPN_MODE_IPVLAN)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "softRoce needs mode move or macvlan: an rxe device on an "
				   "ipvlan child carries no RoCE traffic between pods (Linux 7.3: "
				   "every packet sent, none received)");
	if (conf->soft_roce && conf->match.n_rdma_devices)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "softRoce makes an RDMA device for a NIC without one, but "
				   "match.rdmaDevices takes only NICs that have one: give one of "
				   "them");
	if (!mode)
		return 0;
	r = hpn_conf_pick("", "rdmaNetns", mode, netns_modes, HPN_ARRAY_SIZE(netns_modes), &v, err);
	if (r < 0)
		return r;
	conf->rdma_netns = (enum hpn_rdma_netns)v;
	if (conf->rdma_netns != HPN_RDMA_NETNS_AUTO && !conf->rdma_required)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "rdmaNetns \"%s\" needs rdmaRequired true", mode);
	return 0;
}

/* One list of match: an array of 1..HPN_MATCH_MAX_LIST non-empty strings. */
static int match_list(const cJSON *m, const char *key, size_t max_len, char ***ret, size_t *n,
		      struct hpn_err *err)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(m, key), *v;
	int size;

	if (!arr || cJSON_IsNull(arr))
		return 0;
	size = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1;
	if (size < 1 || size > HPN_MATCH_MAX_LIST)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "match.%s must be an array of 1 to %d strings", key,
				   HPN_MATCH_MAX_LIST);
	*ret = calloc((size_t)size, sizeof(**ret));
	if (!*ret)
		return -ENOMEM;
	cJSON_ArrayForEach (v, arr) {
		if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) > max_len)
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "match.%s[%zu] must be a string of 1 to %zu bytes", key,
					   *n, max_len);
		(*ret)[*n] = strdup(v->valuestring);
		if (!(*ret)[(*n)++])
			return -ENOMEM;
	}
	return 0;
}

/* match: a node-wide pool; at least one field, so that it never means "every NIC". */
static int parse_match(struct hpn_conf *conf, const cJSON *m, struct hpn_err *err)
{
	struct hpn_match *mt = &conf->match;
	int r;

	if (!cJSON_IsObject(m))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "match must be an object");
	r = match_list(m, "devices", 127, &mt->devices, &mt->n_devices, err);
	if (r >= 0)
		r = match_list(m, "drivers", 63, &mt->drivers, &mt->n_drivers, err);
	if (r >= 0)
		r = match_list(m, "rdmaDevices", HPN_IBDEV_MAX - 1, &mt->rdma_devices,
			       &mt->n_rdma_devices, err);
	if (r >= 0)
		r = match_list(m, "pciAddresses", 63, &mt->pci, &mt->n_pci, err);
	if (r >= 0)
		r = hpn_json_int(m, "numaNode", "match.", HPN_E_INVALID_CONFIG, 0, 1023,
				 &mt->numa_node, &mt->has_numa_node, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < mt->n_pci; i++) {
		char pci[HPN_PCI_STR];

		if (hpn_pci_normalise(mt->pci[i], pci) < 0)
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "match.pciAddresses[%zu] \"%.64s\" is not a PCI "
					   "address like 0000:af:00.1",
					   i, mt->pci[i]);
		free(mt->pci[i]);
		mt->pci[i] = strdup(pci);
		if (!mt->pci[i])
			return -ENOMEM;
	}
	/* A driver name becomes a path component under sysfs. */
	for (size_t i = 0; i < mt->n_drivers; i++)
		if (!hpn_valid_path_component(mt->drivers[i]))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "match.drivers[%zu] \"%.64s\" is not a driver name", i,
					   mt->drivers[i]);
	if (!mt->n_devices && !mt->n_drivers && !mt->n_rdma_devices && !mt->n_pci &&
	    !mt->has_numa_node)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "match needs at least one of devices, drivers, rdmaDevices, "
				   "pciAddresses, numaNode");
	return 0;
}

/* mode, macvlanMode / ipvlanMode and count, after the selector is known. */
static int parse_mode(struct hpn_conf *conf, const cJSON *root, struct hpn_err *err)
{
	static const struct hpn_conf_name modes[] = {
		{ "move", HPN_MODE_MOVE },
		{ "macvlan", HPN_MODE_MACVLAN },
		{ "ipvlan", HPN_MODE_IPVLAN },
	};
	static const struct hpn_conf_name macvlan_modes[] = {
		{ "bridge", MACVLAN_MODE_BRIDGE },
		{ "private", MACVLAN_MODE_PRIVATE },
		{ "vepa", MACVLAN_MODE_VEPA },
		{ "passthru", MACVLAN_MODE_PASSTHRU },
	};
	static const struct hpn_conf_name ipvlan_modes[] = {
		{ "l2", IPVLAN_MODE_L2 },
		{ "l3", IPVLAN_MODE_L3 },
		{ "l3s", IPVLAN_MODE_L3S },
	};
	_cleanup_free_ char *mode = NULL, *mv = NULL, *iv = NULL;
	int count = 1, m = HPN_MODE_MOVE, child, r;
	bool has_count = false;

	r = hpn_conf_str(root, "mode", "", &mode, err);
	if (r >= 0)
		r = hpn_conf_str(root, "macvlanMode", "", &mv, err);
	if (r >= 0)
		r = hpn_conf_str(root, "ipvlanMode", "", &iv, err);
	if (r >= 0)
		r = hpn_json_int(root, "count", "", HPN_E_INVALID_CONFIG, 1, HPN_MAX_NICS, &count,
				 &has_count, err);
	if (r >= 0)
		r = hpn_conf_pick("", "mode", mode, modes, HPN_ARRAY_SIZE(modes), &m, err);
	if (r < 0)
		return r;
	conf->mode = (enum hpn_mode)m;
	conf->count = (unsigned int)count;
	if (has_count && count > 1 && conf->selector != HPN_SEL_MATCH)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "count %d needs match: the other selectors name one device",
				   count);
	if (conf->has_master && conf->mode == HPN_MODE_MOVE)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "master needs mode macvlan or ipvlan (move mode: use device)");
	if (mv && conf->mode != HPN_MODE_MACVLAN)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "macvlanMode needs mode macvlan");
	if (iv && conf->mode != HPN_MODE_IPVLAN)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "ipvlanMode needs mode ipvlan");
	if (conf->mode == HPN_MODE_MACVLAN) {
		child = MACVLAN_MODE_BRIDGE;
		r = hpn_conf_pick("", "macvlanMode", mv, macvlan_modes,
				  HPN_ARRAY_SIZE(macvlan_modes), &child, err);
	} else if (conf->mode == HPN_MODE_IPVLAN) {
		child = IPVLAN_MODE_L2;
		r = hpn_conf_pick("", "ipvlanMode", iv, ipvlan_modes, HPN_ARRAY_SIZE(ipvlan_modes),
				  &child, err);
	} else {
		return 0;
	}
	if (r < 0)
		return r;
	conf->child_mode = (unsigned int)child;
	return 0;
}

static int parse_selector(struct hpn_conf *conf, const cJSON *root, const cJSON *rc,
			  struct hpn_err *err)
{
	static const struct {
		const char *key;
		enum hpn_selector sel;
		bool runtime;
	} sels[] = {
		{ "device", HPN_SEL_DEVICE, false },   { "hwaddr", HPN_SEL_HWADDR, false },
		{ "pciBusID", HPN_SEL_PCI, false },    { "deviceID", HPN_SEL_DEVICE_ID, true },
		{ "rdmaDevice", HPN_SEL_RDMA, false }, { "master", HPN_SEL_DEVICE, false },
	};
	char pci[HPN_PCI_STR];
	uint8_t mac[HPN_MAC_LEN];
	char macs[HPN_MAC_STR];
	const char *given = NULL;
	const cJSON *match = cJSON_GetObjectItemCaseSensitive(root, "match");

	if (match && !cJSON_IsNull(match)) {
		given = "match";
		conf->selector = HPN_SEL_MATCH;
	}
	for (size_t i = 0; i < HPN_ARRAY_SIZE(sels); i++) {
		const char *path = sels[i].runtime ? "runtimeConfig." : "";
		char *v = NULL;
		int r = hpn_conf_str(sels[i].runtime ? rc : root, sels[i].key, path, &v, err);

		if (r < 0)
			return r;
		if (!v)
			continue;
		if (given) {
			free(v);
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "%s%s and %s both select the device: give exactly one "
					   "of device, hwaddr, pciBusID, rdmaDevice, "
					   "runtimeConfig.deviceID, match, master",
					   path, sels[i].key, given);
		}
		given = sels[i].key;
		conf->selector = sels[i].sel;
		conf->selector_value = v;
	}
	switch (conf->selector) {
	case HPN_SEL_NONE:
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "no device selected: give one of device, hwaddr, pciBusID, "
				   "rdmaDevice, runtimeConfig.deviceID, match (or master for "
				   "macvlan/ipvlan)");
	case HPN_SEL_MATCH:
		return parse_match(conf, match, err);
	case HPN_SEL_RDMA:
		return parse_rdma_device(conf, err);
	case HPN_SEL_DEVICE:
		if (!hpn_valid_ifname(conf->selector_value))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "%s \"%.64s\" is not a valid interface name", given,
					   conf->selector_value);
		conf->has_master = !strcmp(given, "master");
		return 0;
	case HPN_SEL_HWADDR:
		if (hpn_mac_parse(conf->selector_value, mac) < 0 || hpn_mac_is_zero(mac))
			return hpn_err_set(
				err, HPN_E_INVALID_CONFIG, EINVAL,
				"hwaddr \"%.64s\" is not a MAC address like 02:00:00:00:00:01",
				conf->selector_value);
		/* Parsed, so exactly 17 bytes: the canonical form fits in place. */
		hpn_mac_format(mac, macs);
		memcpy(conf->selector_value, macs, sizeof(macs));
		return 0;
	case HPN_SEL_PCI:
	case HPN_SEL_DEVICE_ID:
		if (hpn_pci_normalise(conf->selector_value, pci) < 0)
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "%s \"%.64s\" is not a PCI address like 0000:af:00.1",
					   conf->selector == HPN_SEL_PCI ? "pciBusID"
									 : "runtimeConfig.deviceID",
					   conf->selector_value);
		free(conf->selector_value);
		conf->selector_value = strdup(pci);
		return conf->selector_value ? 0 : -ENOMEM;
	}
	return 0;
}

static int parse_ipam(struct hpn_conf *conf, const cJSON *root, struct hpn_err *err)
{
	const cJSON *ipam = cJSON_GetObjectItemCaseSensitive(root, "ipam");
	int r;

	if (!ipam || cJSON_IsNull(ipam))
		return 0;
	if (!cJSON_IsObject(ipam))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "ipam must be an object");
	r = hpn_conf_str(ipam, "type", "ipam.", &conf->ipam_type, err);
	if (r < 0)
		return r;
	/* "ipam": {} means no IPAM, as in the reference plugins. */
	if (!conf->ipam_type) {
		if (cJSON_GetArraySize(ipam) == 0)
			return 0;
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "ipam.type is required");
	}
	if (!hpn_valid_plugin_name(conf->ipam_type))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "ipam.type \"%.64s\" is not a plugin name", conf->ipam_type);
	conf->has_ipam = true;
	return 0;
}

static int parse_prev_result(struct hpn_conf *conf, const cJSON *root, struct hpn_err *err)
{
	const cJSON *prev = cJSON_GetObjectItemCaseSensitive(root, "prevResult");
	struct hpn_err perr = { 0 };
	int r;

	if (!prev || cJSON_IsNull(prev))
		return 0;
	r = hpn_result_from_cjson(prev, &conf->prev_result, &perr);
	if (r < 0) {
		hpn_err_set(err, HPN_E_INVALID_CONFIG, -r, "prevResult: %s", perr.msg);
		return r;
	}
	return 0;
}

static int parse_valid_attachments(struct hpn_conf *conf, const cJSON *root, struct hpn_err *err)
{
	const char *key = "cni.dev/valid-attachments";
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, key), *v;
	int n, i = 0;

	if (!arr)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "GC needs %s", key);
	if (!cJSON_IsArray(arr))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "%s must be an array", key);
	n = cJSON_GetArraySize(arr);
	if (n > HPN_MAX_VALID_ATTACHMENTS)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, E2BIG, "%s has more than %d entries",
				   key, HPN_MAX_VALID_ATTACHMENTS);
	conf->valid = calloc((size_t)n + 1, sizeof(*conf->valid));
	if (!conf->valid)
		return -ENOMEM;
	cJSON_ArrayForEach (v, arr) {
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "containerID");
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(v, "ifname");

		if (!cJSON_IsString(c) || !cJSON_IsString(f))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "%s[%d] needs string containerID and ifname", key, i);
		conf->valid[i].container_id = strdup(c->valuestring);
		conf->valid[i].ifname = strdup(f->valuestring);
		conf->n_valid = (size_t)++i;
		if (!conf->valid[i - 1].container_id || !conf->valid[i - 1].ifname)
			return -ENOMEM;
	}
	return 0;
}

static const char *const unsupported_caps[] = { "mac", "infinibandGUID", "portMappings",
						"bandwidth" };

/* "agent.cdiDir": an absolute path, or "" for no CDI specs at all. */
static int parse_cdi_dir(struct hpn_conf *conf, const cJSON *a, struct hpn_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, "cdiDir");
	int r;

	if (cJSON_IsString(v) && !v->valuestring[0])
		return 0;
	r = hpn_conf_abs_path(a, "agent.", "cdiDir", HPN_DEFAULT_CDI_DIR, &conf->agent.cdi_dir,
			      err);
	if (r >= 0 && strlen(conf->agent.cdi_dir) > HPN_CDI_DIR_MAX)
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
				"agent.cdiDir is over %d bytes", HPN_CDI_DIR_MAX);
	return r;
}

/* "agent": the lookup of the kubelet's allocation through hpn-rdma-agent (doc/agent.md). */
static int parse_agent(struct hpn_conf *conf, const cJSON *root, struct hpn_err *err)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "agent");
	int r;

	conf->agent.lookup = true;
	conf->agent.timeout_ms = HPN_DEFAULT_AGENT_TIMEOUT;
	if (a && !cJSON_IsNull(a) && !cJSON_IsObject(a))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "agent must be an object");
	if (!cJSON_IsObject(a))
		a = NULL;
	r = hpn_conf_abs_path(a, "agent.", "socket", HPN_DEFAULT_AGENT_SOCKET, &conf->agent.socket,
			      err);
	if (r >= 0 && strlen(conf->agent.socket) >= 108) /* sun_path */
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
				"agent.socket is over 107 bytes (a unix socket path)");
	if (r >= 0)
		r = hpn_conf_abs_path(a, "agent.", "deviceDir", HPN_DEFAULT_AGENT_DEVICE_DIR,
				      &conf->agent.device_dir, err);
	if (r >= 0 && strlen(conf->agent.device_dir) > HPN_AGENT_DEVICE_DIR_MAX)
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
				"agent.deviceDir is over %d bytes", HPN_AGENT_DEVICE_DIR_MAX);
	if (r >= 0)
		r = parse_cdi_dir(conf, a, err);
	if (r >= 0)
		r = hpn_json_bool(a, "lookup", "agent.", HPN_E_INVALID_CONFIG, &conf->agent.lookup,
				  err);
	if (r >= 0)
		r = hpn_json_bool(a, "required", "agent.", HPN_E_INVALID_CONFIG,
				  &conf->agent.required, err);
	if (r >= 0)
		r = hpn_json_int(a, "timeoutMs", "agent.", HPN_E_INVALID_CONFIG, 10, 10000,
				 &conf->agent.timeout_ms, NULL, err);
	return r;
}

/* "gpus": GPU-aware choice of pool NICs (doc/gpu.md). */
static int parse_gpus(struct hpn_conf *conf, const cJSON *root, struct hpn_err *err)
{
	static const struct hpn_conf_name far[] = { { "allow", 0 }, { "refuse", 1 } };
	static const struct hpn_conf_name near[] = { { "PIX", HPN_DIST_PIX },
						     { "PXB", HPN_DIST_PXB },
						     { "PHB", HPN_DIST_PHB },
						     { "SYS", HPN_DIST_SYS } };
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "gpus");
	_cleanup_free_ char *f = NULL, *n = NULL;
	int r, v = 0;

	conf->gpus.enabled = true;
	conf->gpus.near = HPN_DIST_PXB;
	if (g && !cJSON_IsNull(g) && !cJSON_IsObject(g))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "gpus must be an object");
	if (!cJSON_IsObject(g))
		g = NULL;
	r = hpn_conf_abs_path(g, "gpus.", "procRoot", HPN_DEFAULT_PROC_ROOT, &conf->gpus.proc_root,
			      err);
	if (r >= 0)
		r = hpn_json_bool(g, "enabled", "gpus.", HPN_E_INVALID_CONFIG, &conf->gpus.enabled,
				  err);
	if (r >= 0)
		r = hpn_json_bool(g, "nicPerGpu", "gpus.", HPN_E_INVALID_CONFIG,
				  &conf->gpus.per_gpu, err);
	if (r >= 0)
		r = hpn_conf_str(g, "far", "gpus.", &f, err);
	if (r >= 0 && f)
		r = hpn_conf_pick("gpus.", "far", f, far, HPN_ARRAY_SIZE(far), &v, err);
	conf->gpus.refuse_far = v == 1;
	if (r >= 0)
		r = hpn_conf_str(g, "near", "gpus.", &n, err);
	if (r >= 0 && n) {
		r = hpn_conf_pick("gpus.", "near", n, near, HPN_ARRAY_SIZE(near), &v, err);
		if (r >= 0)
			conf->gpus.near = (enum hpn_gpu_dist)v;
	}
	if (r >= 0 && conf->gpus.per_gpu && conf->selector != HPN_SEL_MATCH)
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				"gpus.nicPerGpu needs match: only a pool has a NIC per GPU");
	return r;
}

/*
 * "nri": whether ADD needs the agent's NRI link (required), and the locked
 * memory its containers get (memlock: "unlimited", or bytes, 0 to leave it).
 */
static int parse_nri(struct hpn_conf *conf, const cJSON *root, struct hpn_err *err)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "nri"), *m;
	int r;

	conf->nri.memlock = HPN_MEMLOCK_UNLIMITED;
	if (o && !cJSON_IsNull(o) && !cJSON_IsObject(o))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "nri must be an object");
	if (!cJSON_IsObject(o))
		return 0;
	r = hpn_json_bool(o, "required", "nri.", HPN_E_INVALID_CONFIG, &conf->nri.required, err);
	if (r < 0)
		return r;
	m = cJSON_GetObjectItemCaseSensitive(o, "memlock");
	if (!m || cJSON_IsNull(m))
		return 0;
	if (cJSON_IsString(m)) {
		if (!strcmp(m->valuestring, "unlimited"))
			return 0;
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "nri.memlock \"%.32s\" is not \"unlimited\": give \"unlimited\" "
				   "or an integer of bytes",
				   m->valuestring);
	}
	/* Range first: converting an out-of-range double is undefined. */
	if (!cJSON_IsNumber(m) || !(m->valuedouble >= 0 && m->valuedouble <= HPN_MEMLOCK_MAX) ||
	    m->valuedouble != (double)(long long)m->valuedouble) {
		if (cJSON_IsNumber(m))
			return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
					   "nri.memlock %g is not an integer of bytes from 0 to "
					   "%llu (0: the container's limit left as it is), nor "
					   "\"unlimited\"",
					   m->valuedouble, HPN_MEMLOCK_MAX);
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "nri.memlock must be \"unlimited\" or an integer of bytes");
	}
	conf->nri.memlock = (uint64_t)m->valuedouble;
	return 0;
}

static int parse_common(struct hpn_conf *conf, const cJSON *root, struct hpn_err *err)
{
	const cJSON *rc = cJSON_GetObjectItemCaseSensitive(root, "runtimeConfig");
	const cJSON *args;
	_cleanup_free_ char *level = NULL;
	int r;

	r = hpn_conf_str(root, "name", "", &conf->name, err);
	if (r < 0)
		return r;
	if (!conf->name)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "name is required");
	/* The network name becomes a directory in stateDir. */
	if (!hpn_valid_container_id(conf->name) || strlen(conf->name) > 200)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "name \"%.64s\" must match [A-Za-z0-9][A-Za-z0-9_.-]*",
				   conf->name);
	r = hpn_conf_str(root, "type", "", &conf->type, err);
	if (r < 0)
		return r;
	if (!conf->type)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "type is required");
	if (rc && !cJSON_IsNull(rc) && !cJSON_IsObject(rc))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "runtimeConfig must be an object");
	/* Conventions: "args" is an object of per-plugin-kind objects; none are used yet. */
	args = cJSON_GetObjectItemCaseSensitive(root, "args");
	if (args && !cJSON_IsNull(args) && !cJSON_IsObject(args))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "args must be an object");

	/* Capabilities a runtime may pass that neither we nor an IPAM plugin would apply. */
	for (size_t i = 0; cJSON_IsObject(rc) && i < HPN_ARRAY_SIZE(unsupported_caps); i++)
		if (cJSON_GetObjectItemCaseSensitive(rc, unsupported_caps[i]))
			return hpn_err_set(err, HPN_E_UNSUPPORTED_FIELD, EOPNOTSUPP,
					   "runtimeConfig.%s is not supported by hpn-rdma: remove "
					   "the \"%s\" capability",
					   unsupported_caps[i], unsupported_caps[i]);

	r = hpn_conf_str(root, "ifName", "", &conf->if_name, err);
	if (r < 0)
		return r;
	if (conf->if_name && !hpn_valid_ifname(conf->if_name))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "ifName \"%.64s\" is not a valid interface name (1-15 bytes, "
				   "not . or .., no / : or space)",
				   conf->if_name);
	r = parse_selector(conf, root, cJSON_IsObject(rc) ? rc : NULL, err);
	if (r >= 0)
		r = parse_mode(conf, root, err);
	if (r < 0)
		return r;

	r = parse_rdma(conf, root, err);
	if (r >= 0)
		r = hpn_json_int(root, "mtu", "", HPN_E_INVALID_CONFIG, 68, 65535, &conf->mtu, NULL,
				 err);
	if (r < 0)
		return r;
	r = hpn_conf_abs_path(root, "", "stateDir", HPN_DEFAULT_STATE_DIR, &conf->state_dir, err);
	if (r >= 0)
		r = hpn_conf_abs_path(root, "", "sysfsRoot", HPN_DEFAULT_SYSFS_ROOT,
				      &conf->sysfs_root, err);
	if (r >= 0)
		r = hpn_conf_abs_path(root, "", "logFile", NULL, &conf->log_file, err);
	if (r >= 0)
		r = hpn_conf_str(root, "logLevel", "", &level, err);
	if (r < 0)
		return r;
	conf->log_level = HPN_LOG_INFO;
	if (level && hpn_log_level_parse(level, &conf->log_level) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "logLevel \"%.32s\" is not one of error, warn, info, debug",
				   level);
	r = parse_ipam(conf, root, err);
	if (r >= 0)
		r = hpn_conf_parse_nccl(conf, root, err);
	if (r >= 0)
		r = hpn_conf_parse_pod(conf, root, cJSON_IsObject(rc) ? rc : NULL, err);
	if (r >= 0)
		r = parse_prev_result(conf, root, err);
	if (r >= 0)
		r = parse_agent(conf, root, err);
	if (r >= 0)
		r = parse_gpus(conf, root, err);
	if (r >= 0)
		r = parse_nri(conf, root, err);
	if (r >= 0) {
		struct hpn_err derr = { 0 };

		r = hpn_dns_from_cjson(cJSON_GetObjectItemCaseSensitive(root, "dns"), &conf->dns,
				       &derr);
		if (r < 0)
			hpn_err_set(err, HPN_E_INVALID_CONFIG, -r, "%s", derr.msg);
	}
	return r;
}

int hpn_conf_parse(const char *buf, size_t len, enum hpn_cmd cmd, struct hpn_conf *conf,
		   struct hpn_err *err)
{
	_cleanup_cjson_ cJSON *root = NULL;
	int r;

	memset(conf, 0, sizeof(*conf));
	conf->raw = buf;
	conf->raw_len = len;
	root = hpn_json_parse(buf, len);
	if (!root)
		return hpn_err_set(err, HPN_E_DECODE, EINVAL,
				   "network configuration on stdin is not valid JSON");
	if (!cJSON_IsObject(root))
		return hpn_err_set(err, HPN_E_DECODE, EINVAL,
				   "network configuration on stdin is not a JSON object");
	/* cJSON's strings end at a NUL: "nic0\u0000x" would read as "nic0". */
	if (hpn_json_has_nul(buf, len))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "a string in the network configuration holds a NUL (\\u0000)");
	r = hpn_conf_str(root, "cniVersion", "", &conf->cni_version, err);
	if (r < 0)
		return r;
	if (!conf->cni_version) {
		if (cmd == HPN_CMD_VERSION)
			return 0;
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "cniVersion is required");
	}
	if (!hpn_version_supported(conf->cni_version))
		return hpn_err_set(err, HPN_E_INCOMPATIBLE_VERSION, EINVAL,
				   "cniVersion \"%.32s\" is not supported (supported: 0.3.0, "
				   "0.3.1, 0.4.0, 1.0.0, 1.1.0)",
				   conf->cni_version);
	if (cmd == HPN_CMD_VERSION)
		return 0;
	/* STATUS and GC arrived in 1.1.0; older configs cannot ask for them. */
	if ((cmd == HPN_CMD_STATUS || cmd == HPN_CMD_GC) &&
	    hpn_version_cmp(conf->cni_version, "1.1.0") < 0)
		return hpn_err_set(err, HPN_E_INCOMPATIBLE_VERSION, EINVAL,
				   "cniVersion %s does not have the %s command (needs 1.1.0)",
				   conf->cni_version, cmd == HPN_CMD_GC ? "GC" : "STATUS");
	if (cmd == HPN_CMD_CHECK && hpn_version_cmp(conf->cni_version, "0.4.0") < 0)
		return hpn_err_set(err, HPN_E_INCOMPATIBLE_VERSION, EINVAL,
				   "cniVersion %s does not have the CHECK command (needs 0.4.0)",
				   conf->cni_version);
	r = parse_common(conf, root, err);
	/* Only ADD reads the pod: DEL, CHECK, GC and STATUS go by the journals. */
	if (cmd != HPN_CMD_ADD)
		conf->pod_lookup = false;
	if (r >= 0 && cmd == HPN_CMD_GC)
		r = parse_valid_attachments(conf, root, err);
	return r;
}

static bool is_hpn(const cJSON *o)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");

	return cJSON_IsString(t) && !strcmp(t->valuestring, "hpn-rdma");
}

int hpn_conf_entry(const char *text, size_t len, void **ret_entry, int *ret_index)
{
	_cleanup_cjson_ cJSON *root = hpn_json_parse(text, len);
	cJSON *plugins, *entry = NULL;
	int index = -1;

	if (!cJSON_IsObject(root))
		return -EINVAL;
	plugins = cJSON_GetObjectItemCaseSensitive(root, "plugins");
	if (cJSON_IsArray(plugins)) {
		cJSON *p;
		int i = 0;

		cJSON_ArrayForEach (p, plugins) {
			if (is_hpn(p)) {
				entry = cJSON_Duplicate(p, true);
				index = i;
				break;
			}
			i++;
		}
		if (index < 0)
			return 0;
		if (!entry)
			return -ENOMEM;
		/* libcni hands each plugin the list's name and cniVersion. */
		for (const char *const *k = (const char *const[]){ "name", "cniVersion", NULL }; *k;
		     k++) {
			cJSON *v = cJSON_GetObjectItemCaseSensitive(root, *k);

			cJSON_DeleteItemFromObjectCaseSensitive(entry, *k);
			if (v)
				cJSON_AddItemToObject(entry, *k, cJSON_Duplicate(v, true));
		}
	} else if (is_hpn(root)) {
		entry = cJSON_Duplicate(root, true);
		if (!entry)
			return -ENOMEM;
	} else {
		return 0;
	}
	*ret_entry = entry;
	*ret_index = index;
	return 1;
}

int hpn_conf_parse_text(const char *path, const char *text, size_t len, enum hpn_cmd cmd,
			struct hpn_conf *conf, char **ret_entry, struct hpn_err *err)
{
	void *entry = NULL;
	char *entry_text;
	int index, r = hpn_conf_entry(text, len, &entry, &index);

	if (r == -EINVAL)
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "%s is not a JSON object", path);
	if (r == 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENOENT,
				   "%s has no plugin of type hpn-rdma", path);
	if (r < 0)
		return r;
	entry_text = hpn_json_print(entry);
	if (!entry_text)
		return -ENOMEM;
	r = hpn_conf_parse(entry_text, strlen(entry_text), cmd, conf, err);
	if (r < 0) {
		hpn_err_prefix(err, "%s", path);
		hpn_conf_free(conf);
		free(entry_text);
		return r;
	}
	*ret_entry = entry_text;
	return 0;
}

static void free_list(char **l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(l[i]);
	free(l);
}

void hpn_match_free(struct hpn_match *m)
{
	free_list(m->devices, m->n_devices);
	free_list(m->drivers, m->n_drivers);
	free_list(m->rdma_devices, m->n_rdma_devices);
	free_list(m->pci, m->n_pci);
	memset(m, 0, sizeof(*m));
}

void hpn_conf_free(struct hpn_conf *conf)
{
	free(conf->cni_version);
	free(conf->name);
	free(conf->type);
	free(conf->if_name);
	free(conf->selector_value);
	hpn_match_free(&conf->match);
	free(conf->state_dir);
	free(conf->sysfs_root);
	free(conf->log_file);
	free(conf->ipam_type);
	free(conf->gpus.proc_root);
	free(conf->agent.socket);
	free(conf->agent.device_dir);
	free(conf->agent.cdi_dir);
	hpn_nccl_conf_free(&conf->nccl);
	free(conf->pod_selector);
	free(conf->pod_annotation);
	free(conf->pod_label);
	free(conf->pod_value);
	free(conf->gpu_model);
	free(conf->gpu_model_annotation);
	free(conf->gpu_model_label);
	free(conf->kube.kubeconfig);
	free(conf->kube.gpu_resource);
	hpn_result_free(conf->prev_result);
	hpn_dns_free(&conf->dns);
	for (size_t i = 0; i < conf->n_valid; i++) {
		free(conf->valid[i].container_id);
		free(conf->valid[i].ifname);
	}
	free(conf->valid);
	memset(conf, 0, sizeof(*conf));
}

enum hpn_mode hpn_conf_nic_mode(const struct hpn_conf *conf, bool share, unsigned int *child_mode)
{
	/* A share is never moved: the NIC serves other pods' shares too. */
	if (share && conf->mode == HPN_MODE_MOVE) {
		if (child_mode)
			*child_mode = MACVLAN_MODE_BRIDGE;
		return HPN_MODE_MACVLAN;
	}
	if (child_mode)
		*child_mode = conf->child_mode;
	return conf->mode;
}
