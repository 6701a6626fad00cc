// SPDX-License-Identifier: Apache-2.0
#include "doctor.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma.h"
#include "util.h"

static void cjson_deletep(cJSON **p)
{
	cJSON_Delete(*p);
}
#define _cleanup_cjson_ __attribute__((cleanup(cjson_deletep)))

static const char *state_name(enum hpn_check_state s)
{
	static const char *const names[] = { "ok", "skip", "warn", "fail" };

	return names[s];
}

/* Appends " what a,b,c" for a non-empty match list. */
static void match_list(FILE *f, const char *what, char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? "," : what, v[i]);
}

static const char *selector_text(const struct hpn_doctor *d, char *buf, size_t len)
{
	static const char *const keys[] = {
		[HPN_SEL_DEVICE] = "device",   [HPN_SEL_HWADDR] = "hwaddr",
		[HPN_SEL_PCI] = "pciBusID",    [HPN_SEL_DEVICE_ID] = "runtimeConfig.deviceID",
		[HPN_SEL_RDMA] = "rdmaDevice",
	};
	const struct hpn_conf *c = &d->conf;
	const struct hpn_match *m = &c->match;
	FILE *f;

	if (d->conf_device_plugin && c->selector == HPN_SEL_DEVICE_ID)
		return "runtimeConfig.deviceID (from the device plugin)";
	if (c->selector == HPN_SEL_RDMA && c->rdma_port) {
		snprintf(buf, len, "rdmaDevice %s:%u", c->selector_value, c->rdma_port);
	} else if (c->selector == HPN_SEL_MATCH && (f = fmemopen(buf, len, "w"))) {
		fprintf(f, "match (count %u):", c->count);
		match_list(f, " devices ", m->devices, m->n_devices);
		match_list(f, " drivers ", m->drivers, m->n_drivers);
		match_list(f, " rdmaDevices ", m->rdma_devices, m->n_rdma_devices);
		match_list(f, " pci ", m->pci, m->n_pci);
		if (m->has_numa_node)
			fprintf(f, " numaNode %d", m->numa_node);
		fclose(f);
	} else if (c->selector > HPN_SEL_NONE && c->selector < HPN_ARRAY_SIZE(keys) &&
		   keys[c->selector] && c->selector_value) {
		snprintf(buf, len, "%s %s", keys[c->selector], c->selector_value);
	} else {
		snprintf(buf, len, "nothing (no selector)");
	}
	return buf;
}

static size_t n_failed(const struct hpn_doctor *d)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n_checks; i++)
		n += d->checks[i].state == HPN_CHECK_FAIL;
	return n;
}

char *hpn_doctor_render_text(const struct hpn_doctor *d)
{
	char *out = NULL;
	size_t len = 0, fails;
	FILE *f = open_memstream(&out, &len);

	if (!f)
		return NULL;
	fprintf(f, "hpn-rdma doctor %s\n\n", HPN_VERSION);
	fprintf(f, "config      %s\n", d->conf_file[0] ? d->conf_file : "(none found)");
	if (d->conf_valid) {
		char sel[128];

		fprintf(f, "network     %s (cniVersion %s", d->conf.name, d->conf.cni_version);
		if (d->conf_plugin >= 0)
			fprintf(f, ", plugin %d of the list", d->conf_plugin + 1);
		fprintf(f, ")\n");
		fprintf(f, "selects     %s\n", selector_text(d, sel, sizeof(sel)));
		fprintf(f, "rdma        rdmaRequired %s, rdmaNetns %s\n",
			d->conf.rdma_required ? "true" : "false",
			hpn_rdma_netns_name(d->conf.rdma_netns));
		fprintf(f, "stateDir    %s\n", d->conf.state_dir);
	}
	fprintf(f, "sysfsRoot   %s\n", d->sysfs_root);
	fprintf(f, "netns mode  %s\n",
		d->rdma_subsystem ? hpn_rdma_netns_name(d->netns_mode)
				  : "none (no RDMA subsystem)");
	fprintf(f, "modules    ");
	for (size_t i = 0; i < d->n_modules; i++)
		fprintf(f, " %s", d->modules[i]);
	fprintf(f, "%s\n\n", d->n_modules ? "" : " (no RDMA modules)");

	fprintf(f, "%-15s %-12s %-10s %-10s %-4s %-6s %-10s %-5s %-4s %s\n", "NETDEV", "PCI",
		"DRIVER", "RDMA", "PORT", "STATE", "LINK", "MTU", "NUMA", "HELD BY");
	for (size_t i = 0; i < d->n_nics; i++) {
		const struct hpn_doctor_nic *n = &d->nics[i];
		char mtu[16] = "-", numa[16] = "-", port[16] = "-", held[400] = "-";

		if (n->mtu >= 0)
			snprintf(mtu, sizeof(mtu), "%d", n->mtu);
		if (n->numa >= 0)
			snprintf(numa, sizeof(numa), "%d", n->numa);
		if (n->port)
			snprintf(port, sizeof(port), "%u", n->port);
		if (n->held_container[0])
			snprintf(held, sizeof(held), "%s/%.12s as %s%s", n->held_network,
				 n->held_container, n->held_ifname,
				 n->held_releasing  ? " (being released)"
				 : n->held_complete ? ""
						    : " (ADD unfinished)");
		fprintf(f, "%-15s %-12s %-10s %-10s %-4s %-6s %-10s %-5s %-4s %s\n",
			n->netdev[0] ? n->netdev : "-", n->pci[0] ? n->pci : "-",
			n->driver[0] ? n->driver : "-", n->rdma[0] ? n->rdma : "-", port,
			n->state[0] ? n->state : "-", n->link_layer[0] ? n->link_layer : "-", mtu,
			numa, held);
	}
	if (!d->n_nics)
		fprintf(f, "(no RDMA devices)\n");

	fprintf(f, "\nchecks\n");
	for (size_t i = 0; i < d->n_checks; i++)
		fprintf(f, "  %-4s  %-8s  %s\n", state_name(d->checks[i].state), d->checks[i].name,
			d->checks[i].msg);
	fails = n_failed(d);
	if (fails)
		fprintf(f, "\nverdict: NOT READY (%zu problem%s)\n", fails, fails == 1 ? "" : "s");
	else
		fprintf(f, "\nverdict: READY\n");
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

static void add_str_or_null(cJSON *o, const char *key, const char *v)
{
	if (v && v[0])
		cJSON_AddStringToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

static void add_int_or_null(cJSON *o, const char *key, int v)
{
	if (v >= 0)
		cJSON_AddNumberToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

char *hpn_doctor_render_json(const struct hpn_doctor *d)
{
	_cleanup_cjson_ cJSON *root = cJSON_CreateObject();
	cJSON *c, *a;

	if (!root)
		return NULL;
	cJSON_AddStringToObject(root, "version", HPN_VERSION);
	cJSON_AddBoolToObject(root, "ready", n_failed(d) == 0);
	c = cJSON_AddObjectToObject(root, "config");
	add_str_or_null(c, "file", d->conf_file);
	cJSON_AddBoolToObject(c, "valid", d->conf_valid);
	if (d->conf_valid) {
		char sel[128];

		cJSON_AddStringToObject(c, "network", d->conf.name);
		cJSON_AddStringToObject(c, "cniVersion", d->conf.cni_version);
		if (d->conf_plugin >= 0)
			cJSON_AddNumberToObject(c, "pluginIndex", d->conf_plugin);
		cJSON_AddStringToObject(c, "selects", selector_text(d, sel, sizeof(sel)));
		cJSON_AddBoolToObject(c, "rdmaRequired", d->conf.rdma_required);
		cJSON_AddStringToObject(c, "rdmaNetns", hpn_rdma_netns_name(d->conf.rdma_netns));
		cJSON_AddStringToObject(c, "stateDir", d->conf.state_dir);
	} else {
		cJSON_AddNumberToObject(c, "code", d->conf_err.code);
		cJSON_AddStringToObject(c, "error", d->conf_err.msg);
	}
	cJSON_AddStringToObject(root, "sysfsRoot", d->sysfs_root);
	add_str_or_null(root, "netnsMode",
			d->rdma_subsystem ? hpn_rdma_netns_name(d->netns_mode) : NULL);
	a = cJSON_AddArrayToObject(root, "modules");
	for (size_t i = 0; a && i < d->n_modules; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(d->modules[i]));
	a = cJSON_AddArrayToObject(root, "nics");
	for (size_t i = 0; a && i < d->n_nics; i++) {
		const struct hpn_doctor_nic *n = &d->nics[i];
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(a, o))
			break;
		add_str_or_null(o, "netdev", n->netdev);
		add_str_or_null(o, "pci", n->pci);
		add_str_or_null(o, "driver", n->driver);
		add_str_or_null(o, "rdmaDevice", n->rdma);
		add_int_or_null(o, "port", n->port ? (int)n->port : -1);
		add_str_or_null(o, "state", n->state);
		add_str_or_null(o, "linkLayer", n->link_layer);
		add_int_or_null(o, "mtu", n->mtu);
		add_int_or_null(o, "numaNode", n->numa);
		cJSON_AddBoolToObject(o, "vf", n->vf);
		if (n->held_container[0]) {
			cJSON *h = cJSON_AddObjectToObject(o, "heldBy");

			cJSON_AddStringToObject(h, "network", n->held_network);
			cJSON_AddStringToObject(h, "containerId", n->held_container);
			cJSON_AddStringToObject(h, "ifName", n->held_ifname);
			cJSON_AddBoolToObject(h, "attached", n->held_complete);
			cJSON_AddBoolToObject(h, "releasing", n->held_releasing);
		} else {
			cJSON_AddNullToObject(o, "heldBy");
		}
	}
	a = cJSON_AddArrayToObject(root, "checks");
	for (size_t i = 0; a && i < d->n_checks; i++) {
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(a, o))
			break;
		cJSON_AddStringToObject(o, "name", d->checks[i].name);
		cJSON_AddStringToObject(o, "state", state_name(d->checks[i].state));
		cJSON_AddStringToObject(o, "message", d->checks[i].msg);
	}
	a = cJSON_AddArrayToObject(root, "reasons");
	for (size_t i = 0; a && i < d->n_checks; i++)
		if (d->checks[i].state == HPN_CHECK_FAIL)
			cJSON_AddItemToArray(a, cJSON_CreateString(d->checks[i].msg));
	return cJSON_Print(root);
}
