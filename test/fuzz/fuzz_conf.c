// SPDX-License-Identifier: Apache-2.0
/*
 * hpn_conf_parse: the network configuration on stdin, for every command (the
 * first input byte picks it: A D C V S G, or any other byte modulo 6). Every
 * field is reached: selectors (rdmaDevice, runtimeConfig.deviceID...),
 * rdmaRequired, rdmaNetns, prevResult, dns, args, runtimeConfig and GC's
 * cni.dev/valid-attachments, nccl, podSelector (annotation and label),
 * kubernetes and the pod annotations. On success the promises of struct
 * hpn_conf are checked (among them: only an ADD with "kubernetes" asks the
 * API, and only for what the annotations left open), prevResult is rendered
 * in every version and parsed back, and the NCCL hints for prevResult's
 * devices are rendered, written out and read back with NCCL's rules.
 */
#include <stdlib.h>
#include <string.h>

#include "cni.h"
#include "conf.h"
#include "fuzz.h"
#include "kubeconfig.h"
#include "nccl.h"
#include "pod.h"
#include "result.h"
#include "roundtrip.h"
#include "util.h"

/* The hints render from what a result binds (hpn_result_bound), as ADD's do. */
static int nccl_render(const struct hpn_nccl_conf *nc, const struct hpn_nccl_profile *p,
		       const struct hpn_result *res, struct hpn_vars *v, struct hpn_err *err)
{
	struct hpn_bound_nic b[HPN_MAX_RDMA];

	return hpn_nccl_render(nc, p, b, hpn_result_bound(res, b, HPN_MAX_RDMA), v, err);
}

static char *nccl_format(const struct hpn_vars *v, const struct hpn_nccl_owner *o,
			 const char *conf_file, const struct hpn_result *res)
{
	struct hpn_bound_nic b[HPN_MAX_RDMA];

	return hpn_nccl_format(v, o, conf_file, b, hpn_result_bound(res, b, HPN_MAX_RDMA));
}

static enum hpn_cmd pick_cmd(uint8_t c)
{
	static const enum hpn_cmd cmds[] = { HPN_CMD_ADD,     HPN_CMD_DEL,    HPN_CMD_CHECK,
					     HPN_CMD_VERSION, HPN_CMD_STATUS, HPN_CMD_GC };

	switch (c) {
	case 'A':
		return HPN_CMD_ADD;
	case 'D':
		return HPN_CMD_DEL;
	case 'C':
		return HPN_CMD_CHECK;
	case 'V':
		return HPN_CMD_VERSION;
	case 'S':
		return HPN_CMD_STATUS;
	case 'G':
		return HPN_CMD_GC;
	}
	return cmds[c % HPN_ARRAY_SIZE(cmds)];
}

/* stateDir, sysfsRoot, logFile: absolute, no ".." component. */
static bool abs_path_ok(const char *p)
{
	size_t n = strlen(p);

	return p[0] == '/' && !strstr(p, "/../") && !(n >= 3 && !strcmp(p + n - 3, "/.."));
}

/* NCCL settings a config may add: NCCL names NCCL reads whole, none computed. */
static void check_vars(const struct hpn_vars *v)
{
	FUZZ_ASSERT(v->n <= HPN_MAX_VARS);
	for (size_t i = 0; i < v->n; i++) {
		FUZZ_ASSERT(hpn_nccl_valid_name(v->v[i].key));
		FUZZ_ASSERT(!hpn_nccl_computed_name(v->v[i].key));
		FUZZ_ASSERT(hpn_nccl_valid_value(v->v[i].value));
	}
}

/*
 * The hints config, and the file it gives for prevResult's devices (or none):
 * read back with NCCL's rules it holds exactly the rendered settings, and the
 * owner line is recognised.
 */
static void check_nccl(const struct hpn_conf *c)
{
	const struct hpn_nccl_conf *nc = &c->nccl;
	struct hpn_nccl_owner o = {
		.container_id = "c", .network = c->name, .ifname = "eth0", .pod_name = c->gpu_model
	};
	struct hpn_result *empty = hpn_result_new();
	const struct hpn_result *res = c->prev_result ? c->prev_result : empty;
	struct hpn_vars v = { 0 }, back = { 0 };
	struct hpn_err err = { 0 };
	char *owner;
	bool mine = false;
	char *text;

	FUZZ_ASSERT(nc->dir && abs_path_ok(nc->dir));
	FUZZ_ASSERT(nc->conf_file && hpn_nccl_valid_conf_file(nc->conf_file));
	FUZZ_ASSERT(!nc->socket_ifname ||
		    (nc->socket_ifname[0] && hpn_nccl_valid_value(nc->socket_ifname)));
	check_vars(&nc->env);
	FUZZ_ASSERT(nc->n_profiles <= HPN_NCCL_MAX_PROFILES);
	for (size_t i = 0; i < nc->n_profiles; i++) {
		FUZZ_ASSERT(nc->profiles[i].name && nc->profiles[i].name[0]);
		FUZZ_ASSERT(!(nc->profiles[i].gpu_counts & 1));
		check_vars(&nc->profiles[i].env);
	}
	FUZZ_ASSERT(c->gpu_count >= 0 && c->gpu_count <= HPN_NCCL_MAX_GPUS);
	FUZZ_ASSERT(c->pod_selected || c->pod_selector);
	FUZZ_ASSERT(c->gpu_model_annotation && c->gpu_model_label &&
		    hpn_k8s_qualified_name(c->gpu_model_label));
	/* "kubernetes" is whole or absent; a label selector needs it. */
	FUZZ_ASSERT(!c->kube.kubeconfig ||
		    (abs_path_ok(c->kube.kubeconfig) && c->kube.timeout_ms >= 1 &&
		     c->kube.timeout_ms <= HPN_KUBE_TIMEOUT_MS_MAX && c->kube.gpu_resource &&
		     hpn_k8s_qualified_name(c->kube.gpu_resource)));
	FUZZ_ASSERT(!c->pod_selector || c->pod_value);
	FUZZ_ASSERT(!c->pod_label || (c->kube.kubeconfig && hpn_k8s_qualified_name(c->pod_label) &&
				      hpn_k8s_label_value(c->pod_value)));
	/* Only a config with the API asks it, and only for what the annotations left open. */
	FUZZ_ASSERT(!c->pod_lookup || (c->kube.kubeconfig && c->pod_lookup_why));
	FUZZ_ASSERT(!c->pod_lookup || (c->pod_label && !c->pod_selected) ||
		    (c->pod_selected && c->nccl.enabled &&
		     (!c->gpu_model_annotated || !c->gpu_count_annotated)));
	if (nccl_render(nc, hpn_nccl_profile(nc, c->gpu_model), res, &v, &err) == 0) {
		/* The header's NCCL_CONF_FILE line adds no setting either. */
		text = nccl_format(&v, &o, nc->conf_file, res);
		FUZZ_ASSERT(text);
		owner = hpn_nccl_owner_line(&o);
		FUZZ_ASSERT(owner);
		FUZZ_ASSERT(hpn_nccl_parse(text, owner, &back, &mine) == 0);
		free(owner);
		FUZZ_ASSERT(mine && hpn_vars_equal(&v, &back) && back.n == v.n);
		free(text);
	} else {
		FUZZ_ASSERT(err.code == HPN_E_RDMA || err.code == HPN_E_INVALID_CONFIG);
	}
	hpn_vars_free(&v);
	hpn_vars_free(&back);
	hpn_result_free(empty);
}

/* What "validated and typed" promises the rest of the plugin. */
static void check_conf(const struct hpn_conf *c, enum hpn_cmd cmd)
{
	char pci[HPN_PCI_STR];
	uint8_t mac[HPN_MAC_LEN];

	if (cmd == HPN_CMD_VERSION) {
		FUZZ_ASSERT(!c->cni_version || hpn_version_supported(c->cni_version));
		return;
	}
	FUZZ_ASSERT(hpn_version_supported(c->cni_version));
	if (cmd == HPN_CMD_STATUS || cmd == HPN_CMD_GC)
		FUZZ_ASSERT(hpn_version_cmp(c->cni_version, "1.1.0") >= 0);
	if (cmd == HPN_CMD_CHECK)
		FUZZ_ASSERT(hpn_version_cmp(c->cni_version, "0.4.0") >= 0);
	/* The network name becomes a directory under stateDir. */
	FUZZ_ASSERT(c->name && hpn_valid_path_component(c->name) && c->name[0] != '.');
	FUZZ_ASSERT(c->type);
	FUZZ_ASSERT(!c->if_name || hpn_valid_ifname(c->if_name));
	FUZZ_ASSERT(c->selector != HPN_SEL_NONE &&
		    (c->selector_value || c->selector == HPN_SEL_MATCH));
	FUZZ_ASSERT(c->count >= 1 && c->count <= HPN_MAX_NICS);
	FUZZ_ASSERT(c->count == 1 || c->selector == HPN_SEL_MATCH);
	FUZZ_ASSERT(!c->has_master || c->mode != HPN_MODE_MOVE);
	switch (c->selector) {
	case HPN_SEL_NONE:
		break;
	case HPN_SEL_MATCH:
		/* Never "every NIC": at least one field. */
		FUZZ_ASSERT(c->match.n_devices || c->match.n_drivers || c->match.n_rdma_devices ||
			    c->match.n_pci || c->match.has_numa_node);
		for (size_t i = 0; i < c->match.n_pci; i++)
			FUZZ_ASSERT(hpn_pci_normalise(c->match.pci[i], pci) == 0 &&
				    !strcmp(pci, c->match.pci[i]));
		for (size_t i = 0; i < c->match.n_drivers; i++)
			FUZZ_ASSERT(hpn_valid_path_component(c->match.drivers[i]));
		break;
	case HPN_SEL_DEVICE:
		FUZZ_ASSERT(hpn_valid_ifname(c->selector_value));
		break;
	case HPN_SEL_HWADDR:
		FUZZ_ASSERT(hpn_mac_parse(c->selector_value, mac) == 0 && !hpn_mac_is_zero(mac));
		break;
	case HPN_SEL_PCI:
	case HPN_SEL_DEVICE_ID:
		/* Normalised: normalising again changes nothing. */
		FUZZ_ASSERT(hpn_pci_normalise(c->selector_value, pci) == 0 &&
			    !strcmp(pci, c->selector_value));
		break;
	case HPN_SEL_RDMA:
		/* A path component under class/infiniband, the port split off. */
		FUZZ_ASSERT(hpn_valid_path_component(c->selector_value) &&
			    strlen(c->selector_value) < HPN_IBDEV_MAX);
		FUZZ_ASSERT(c->rdma_port <= 255);
		FUZZ_ASSERT(c->rdma_required);
		break;
	}
	if (c->selector != HPN_SEL_RDMA)
		FUZZ_ASSERT(c->rdma_port == 0);
	FUZZ_ASSERT(c->rdma_netns == HPN_RDMA_NETNS_AUTO || c->rdma_required);
	FUZZ_ASSERT(c->mtu == 0 || (c->mtu >= 68 && c->mtu <= 65535));
	FUZZ_ASSERT(c->state_dir && abs_path_ok(c->state_dir));
	FUZZ_ASSERT(c->sysfs_root && abs_path_ok(c->sysfs_root));
	FUZZ_ASSERT(!c->log_file || abs_path_ok(c->log_file));
	FUZZ_ASSERT(c->log_level <= HPN_LOG_DEBUG);
	FUZZ_ASSERT(!c->has_ipam || (c->ipam_type && hpn_valid_plugin_name(c->ipam_type)));
	FUZZ_ASSERT(c->n_valid == 0 || cmd == HPN_CMD_GC);
	FUZZ_ASSERT(!c->pod_lookup || cmd == HPN_CMD_ADD);
	for (size_t i = 0; i < c->n_valid; i++)
		FUZZ_ASSERT(c->valid[i].container_id && c->valid[i].ifname);
	FUZZ_ASSERT(c->dns.n_nameservers <= HPN_MAX_DNS && c->dns.n_search <= HPN_MAX_DNS &&
		    c->dns.n_options <= HPN_MAX_DNS);
	/* nri.memlock: "unlimited", or bytes a JSON number holds exactly. */
	FUZZ_ASSERT(c->nri.memlock == HPN_MEMLOCK_UNLIMITED || c->nri.memlock <= HPN_MEMLOCK_MAX);
	check_nccl(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hpn_conf conf;
	struct hpn_err err = { 0 };
	enum hpn_cmd cmd;
	int r;

	if (size < 1)
		return 0;
	cmd = pick_cmd(data[0]);
	r = hpn_conf_parse((const char *)data + 1, size - 1, cmd, &conf, &err);
	fuzz_err_matches(r, &err);
	if (r == 0) {
		check_conf(&conf, cmd);
		if (conf.prev_result)
			fuzz_result_roundtrip(conf.prev_result);
	}
	hpn_conf_free(&conf);
	return 0;
}
