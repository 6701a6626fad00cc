// SPDX-License-Identifier: Apache-2.0
#include "doctor.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipam.h"
#include "nccl.h"
#include "nl.h"
#include "pool.h"
#include "qos.h"
#include "rdma.h"
#include "status.h"
#include "sysfs.h"

#define CONF_MAX		  (1u << 20) /* the plugin's stdin limit */
#define DEVICE_PLUGIN_PLACEHOLDER "0000:00:00.0"

/* ---- the config --------------------------------------------------------------- */

/*
 * The config a runtime would give hpn-rdma from file text: a .conf as is, or a
 * conflist's hpn-rdma entry with the list's name and cniVersion. A declared
 * deviceID capability gets a placeholder PCI address so that validation runs:
 * the real one comes per pod from the device plugin.
 * 1: an hpn-rdma config (*ret set), 0: none in this file, -EINVAL: not JSON.
 */
static int hpn_entry(const char *text, size_t len, struct hpn_doctor *d, char **ret)
{
	void *v = NULL;
	cJSON *entry, *caps, *rc;
	int index = -1, r = hpn_conf_entry(text, len, &v, &index);

	if (r <= 0)
		return r;
	entry = v;
	caps = cJSON_GetObjectItemCaseSensitive(entry, "capabilities");
	rc = cJSON_GetObjectItemCaseSensitive(entry, "runtimeConfig");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(caps, "deviceID")) &&
	    !cJSON_GetObjectItemCaseSensitive(rc, "deviceID")) {
		if (!rc)
			rc = cJSON_AddObjectToObject(entry, "runtimeConfig");
		if (cJSON_IsObject(rc))
			cJSON_AddStringToObject(rc, "deviceID", DEVICE_PLUGIN_PLACEHOLDER);
		d->conf_device_plugin = true;
	}
	d->conf_plugin = index;
	*ret = cJSON_PrintUnformatted(entry);
	cJSON_Delete(entry);
	return *ret ? 1 : -ENOMEM;
}

/* Reads path and looks for an hpn-rdma config in it; see hpn_entry. */
static int load_file(const char *path, struct hpn_doctor *d, char **ret, struct hpn_err *err)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len;
	int r;

	if (fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open %s: %s", path, strerror(errno));
	r = hpn_read_all(fd, CONF_MAX, &buf, &len);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, r, "read %s: %s", path, strerror(-r));
	r = hpn_entry(buf, len, d, ret);
	if (r == -EINVAL)
		return hpn_err_set(err, HPN_E_DECODE, EINVAL, "%s is not a JSON object", path);
	return r;
}

static int conf_name(const struct dirent *de)
{
	const char *dot = strrchr(de->d_name, '.');

	return de->d_name[0] != '.' && dot &&
	       (!strcmp(dot, ".conf") || !strcmp(dot, ".conflist") || !strcmp(dot, ".json"));
}

/* libcni's order: file names sorted; the first file with an hpn-rdma plugin. */
static int find_conf(const char *dir, struct hpn_doctor *d, char **ret, struct hpn_err *err)
{
	struct dirent **list = NULL;
	int n = scandir(dir, &list, conf_name, alphasort), r = 0;

	if (n < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "list %s: %s", dir, strerror(errno));
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX];
		struct hpn_err ferr = { 0 };

		if (r == 0 &&
		    hpn_snprintf(path, sizeof(path), "%s/%s", dir, list[i]->d_name) == 0) {
			if (!d->conf_first[0])
				snprintf(d->conf_first, sizeof(d->conf_first), "%s", path);
			r = load_file(path, d, ret, &ferr);
			if (r > 0)
				snprintf(d->conf_file, sizeof(d->conf_file), "%s", path);
			else if (r != -ENOMEM)
				r = 0; /* unreadable or not ours: keep looking */
		}
		free(list[i]);
	}
	free(list);
	if (r == 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENOENT,
				   "no CNI config with an hpn-rdma plugin in %s", dir);
	return r;
}

static void load_conf(const char *file, const char *dir, struct hpn_doctor *d)
{
	char *buf = NULL;
	int r;

	if (file) {
		snprintf(d->conf_file, sizeof(d->conf_file), "%s", file);
		r = load_file(file, d, &buf, &d->conf_err);
		if (r == 0)
			hpn_err_set(&d->conf_err, HPN_E_INVALID_CONFIG, ENOENT,
				    "%s has no hpn-rdma plugin", file);
	} else {
		r = find_conf(dir, d, &buf, &d->conf_err);
	}
	if (r <= 0 || !buf)
		return;
	d->conf_buf = buf;
	if (hpn_conf_parse(buf, strlen(buf), HPN_CMD_ADD, &d->conf, &d->conf_err) < 0) {
		hpn_conf_free(&d->conf);
		return;
	}
	d->conf_valid = true;
}

/* ---- facts --------------------------------------------------------------------- */

static int not_dot(const struct dirent *de)
{
	return de->d_name[0] != '.';
}

/* A sysfs number in [0, 1 << 20), else -1 (unknown). */
static int small_int(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	return errno || end == s || *end || v < 0 || v >= (1L << 20) ? -1 : (int)v;
}

/* Is sysfs GID text "0000:...:ffff:xxxx:xxxx" an IPv4-mapped address (RoCE's GID of an IPv4 one)? */
static bool ipv4_gid(const char *g)
{
	return strlen(g) == 39 && !strncmp(g, "0000:0000:0000:0000:0000:ffff:", 30);
}

/*
 * The GID index NCCL would take on port of rdma for netdev here: 0 on
 * InfiniBand, the lowest RoCE v2 entry of the netdev's IPv4 address on
 * RoCE (as ADD's proof chooses, in the pod), -1 when there is none.
 */
static int host_gid(const char *root, const struct hpn_doctor_nic *nic)
{
	char dir[PATH_MAX], v[64];
	int found = -1;

	if (!strcmp(nic->transport, "ib"))
		return 0;
	if (strcmp(nic->transport, "roce") || !nic->netdev[0] ||
	    hpn_snprintf(dir, sizeof(dir), "%s/class/infiniband/%s/ports/%u", root, nic->rdma,
			 nic->port) < 0)
		return -1;
	/* The kernel's table has at most a few hundred entries (rxe: 2048 slots). */
	for (int i = 0; found < 0 && i < 4096; i++) {
		if (hpn_sysfs_read(v, sizeof(v), "%s/gid_attrs/types/%d", dir, i) < 0) {
			if (!hpn_sysfs_exists("%s/gids/%d", dir, i))
				break;
			continue;
		}
		if (strcmp(v, "RoCE v2") ||
		    hpn_sysfs_read(v, sizeof(v), "%s/gid_attrs/ndevs/%d", dir, i) < 0 ||
		    strcmp(v, nic->netdev) ||
		    hpn_sysfs_read(v, sizeof(v), "%s/gids/%d", dir, i) < 0)
			continue;
		if (ipv4_gid(v))
			found = i;
	}
	return found;
}

/* The device's kind, transport and erdma mode from rd, and what NCCL will see of it. */
static void set_kind(struct hpn_doctor_nic *nic, const struct hpn_rdma_dev *rd)
{
	snprintf(nic->kind, sizeof(nic->kind), "%s", hpn_rdma_kind_name(rd->kind));
	snprintf(nic->transport, sizeof(nic->transport), "%s", hpn_rdma_proto_name(rd->proto));
	snprintf(nic->erdma_mode, sizeof(nic->erdma_mode), "%s", hpn_erdma_mode_name(rd->erdma));
	nic->nccl_ib = hpn_rdma_nccl_ib(rd);
	nic->hca[0] = '\0';
	if (nic->nccl_ib && nic->port)
		hpn_nccl_hca(nic->rdma, (int)nic->port, nic->hca, sizeof(nic->hca));
}

static void fill_nic(const char *root, struct hpn_doctor_nic *nic)
{
	char v[64];
	const char *p;

	if (nic->rdma[0]) {
		if (hpn_sysfs_read(v, sizeof(v), "%s/class/infiniband/%s/ports/%u/state", root,
				   nic->rdma, nic->port) == 0) {
			p = strchr(v, ':');
			p = p ? p + 1 + (p[1] == ' ') : v;
			hpn_msgf(nic->state, sizeof(nic->state), "%s", p);
		}
		if (hpn_sysfs_read(v, sizeof(v), "%s/class/infiniband/%s/ports/%u/link_layer", root,
				   nic->rdma, nic->port) == 0)
			hpn_msgf(nic->link_layer, sizeof(nic->link_layer), "%s", v);
	}
	nic->mtu = nic->numa = -1;
	if (nic->netdev[0]) {
		char pci[HPN_PCI_STR];

		if (hpn_sysfs_netdev_pci(root, nic->netdev, pci) == 0)
			memcpy(nic->netdev_pci, pci, sizeof(pci));
		if (hpn_sysfs_read(v, sizeof(v), "%s/class/net/%s/mtu", root, nic->netdev) == 0)
			nic->mtu = small_int(v);
	}
	/* The RDMA device's own function (set by the caller) is the NIC's place, as NCCL's. */
	if (!nic->pci[0])
		memcpy(nic->pci, nic->netdev_pci, sizeof(nic->pci));
	/* The kernel says -1 for "no NUMA node", as we do. */
	if (nic->pci[0] &&
	    hpn_sysfs_read(v, sizeof(v), "%s/bus/pci/devices/%s/numa_node", root, nic->pci) == 0)
		nic->numa = small_int(v);
	nic->gid_index = nic->rdma[0] ? host_gid(root, nic) : -1;
}

/* Every port of every RDMA device, with the netdev rdmasys.c's discovery ties to it. */
static void gather_nics(struct hpn_doctor *d)
{
	const char *root = d->sysfs_root;
	struct dirent **devs = NULL;
	char path[PATH_MAX];
	int n;

	if (hpn_snprintf(path, sizeof(path), "%s/class/infiniband", root) < 0)
		return;
	n = scandir(path, &devs, not_dot, versionsort);
	for (int i = 0; i < n; i++) {
		struct dirent **ports = NULL;
		int np = -1;

		if (strlen(devs[i]->d_name) < HPN_IBDEV_MAX &&
		    hpn_snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports", root,
				 devs[i]->d_name) == 0)
			np = scandir(path, &ports, not_dot, versionsort);
		for (int k = 0; k < np; k++) {
			unsigned long port = strtoul(ports[k]->d_name, NULL, 10);
			struct hpn_doctor_nic *nic = &d->nics[d->n_nics];
			struct hpn_rdma_dev rd = { 0 };
			struct hpn_err e = { 0 };

			if (port && port < 256 && d->n_nics < HPN_DOCTOR_MAX_NICS) {
				char ifname[HPN_IFNAMSIZ];

				memset(nic, 0, sizeof(*nic));
				hpn_msgf(nic->rdma, sizeof(nic->rdma), "%s", devs[i]->d_name);
				nic->port = (unsigned int)port;
				if (hpn_rdma_netdev_of(root, NULL, nic->rdma, nic->port, ifname,
						       &rd, &e) == 0) {
					memcpy(nic->netdev, ifname, sizeof(ifname));
				} else {
					memcpy(rd.name, nic->rdma, sizeof(rd.name));
					hpn_rdma_classify(root, &rd);
				}
				snprintf(nic->driver, sizeof(nic->driver), "%s", rd.driver);
				memcpy(nic->pci, rd.pci, sizeof(nic->pci));
				nic->vf = rd.vf;
				set_kind(nic, &rd);
				fill_nic(root, nic);
				d->n_nics++;
			}
			free(ports[k]);
		}
		free(ports);
		free(devs[i]);
	}
	free(devs);
}

/* The NIC row a journalled NIC j is about; a new row for a NIC no longer visible on the host. */
static struct hpn_doctor_nic *holder_row(struct hpn_doctor *d, const struct hpn_journal_nic *j)
{
	struct hpn_doctor_nic *nic;

	for (size_t i = 0; i < d->n_nics; i++)
		if (d->nics[i].netdev[0] && !strcmp(d->nics[i].netdev, j->host.name))
			return &d->nics[i];
	/* Gone into the pod: its RDMA device (shared mode) is left without a netdev. */
	for (size_t i = 0; i < d->n_nics; i++) {
		nic = &d->nics[i];
		if (nic->netdev[0] || nic->held_container[0])
			continue;
		if (j->rdma.name[0] ? !strcmp(nic->rdma, j->rdma.name)
				    : j->pci[0] && (!strcmp(nic->netdev_pci, j->pci) ||
						    !strcmp(nic->pci, j->pci)))
			goto found;
	}
	if (d->n_nics == HPN_DOCTOR_MAX_NICS)
		return NULL;
	nic = &d->nics[d->n_nics++];
	memset(nic, 0, sizeof(*nic));
	nic->journal_only = true;
	nic->gid_index = -1;
	snprintf(nic->rdma, sizeof(nic->rdma), "%s", j->rdma.name);
	memcpy(nic->pci, j->pci, sizeof(nic->pci));
	if (nic->rdma[0]) {
		struct hpn_rdma_dev rd = { 0 };

		memcpy(rd.name, nic->rdma, sizeof(rd.name));
		hpn_rdma_classify(d->sysfs_root, &rd);
		snprintf(nic->driver, sizeof(nic->driver), "%s", rd.driver);
		/* Its own function, where the tree still shows the device. */
		if (rd.pci[0])
			memcpy(nic->pci, rd.pci, sizeof(nic->pci));
		set_kind(nic, &rd);
	}
	nic->mtu = nic->numa = -1;
found:
	/* Name it as the host knew it; MTU and the like are the pod's business now. */
	snprintf(nic->netdev, sizeof(nic->netdev), "%s", j->host.name);
	if (!nic->netdev_pci[0])
		memcpy(nic->netdev_pci, j->pci, sizeof(nic->netdev_pci));
	if (!nic->pci[0])
		memcpy(nic->pci, j->pci, sizeof(nic->pci));
	nic->mtu = -1;
	return nic;
}

static void gather_network(struct hpn_doctor *d, int root_fd, const char *network)
{
	struct hpn_store st = HPN_STORE_INIT;
	struct dirent **list = NULL;
	char path[PATH_MAX];
	int n;

	st.net_fd = openat(root_fd, network, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (st.net_fd < 0 ||
	    hpn_snprintf(path, sizeof(path), "%s/%s", d->conf.state_dir, network) < 0) {
		hpn_store_close(&st);
		return;
	}
	n = scandir(path, &list, not_dot, versionsort);
	for (int i = 0; i < n; i++) {
		struct hpn_journal j = { 0 };
		struct hpn_err e = { 0 };

		/* An earlier boot's journal holds nothing: the reboot gave its NICs back. */
		if (hpn_journal_read(&st, list[i]->d_name, &j, &e) < 0 || j.stale) {
			hpn_journal_free(&j);
			free(list[i]);
			continue;
		}
		/* A macvlan/ipvlan child holds nothing: its parent stays shared. */
		for (size_t k = 0; k < j.n_nics; k++) {
			struct hpn_doctor_nic *nic;

			if (j.nics[k].kind != HPN_NIC_MOVED || !(nic = holder_row(d, &j.nics[k])))
				continue;
			hpn_msgf(nic->held_network, sizeof(nic->held_network), "%s", network);
			hpn_msgf(nic->held_container, sizeof(nic->held_container), "%s",
				 j.container_id);
			memcpy(nic->held_ifname, j.nics[k].pod_ifname, sizeof(nic->held_ifname));
			nic->held_complete = j.phase == HPN_PHASE_ATTACHED && !j.releasing;
			nic->held_releasing = j.releasing;
		}
		hpn_journal_free(&j);
		free(list[i]);
	}
	free(list);
	hpn_store_close(&st);
}

/* Every journal of every network under stateDir: which attachment holds which NIC. */
static void gather_holders(struct hpn_doctor *d)
{
	_cleanup_close_ int root_fd = -1;
	struct dirent **list = NULL;
	int n;

	root_fd = open(d->conf.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return;
	n = scandir(d->conf.state_dir, &list, not_dot, versionsort);
	for (int i = 0; i < n; i++) {
		struct stat st;

		if (fstatat(root_fd, list[i]->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode) && hpn_valid_path_component(list[i]->d_name))
			gather_network(d, root_fd, list[i]->d_name);
		free(list[i]);
	}
	free(list);
}

static void gather_modules(struct hpn_doctor *d)
{
	static const char *const mods[] = { "ib_core",	 "ib_uverbs", "ib_cm",	   "iw_cm",
					    "rdma_cm",	 "rdma_ucm",  "mlx5_core", "mlx5_ib",
					    "mlx4_core", "mlx4_ib",   "erdma",	   "rdma_rxe" };

	for (size_t i = 0; i < HPN_ARRAY_SIZE(mods) && d->n_modules < HPN_DOCTOR_MAX_MODS; i++)
		if (hpn_sysfs_exists("%s/module/%s", d->sysfs_root, mods[i]))
			snprintf(d->modules[d->n_modules++], sizeof(d->modules[0]), "%s", mods[i]);
}

/*
 * The class the config's hints give a RoCE NIC on o's netdev, with the GPU
 * model the config names (the pod's own, from its annotation, is unknown
 * here), judged on o's QoS: what ADD would write and warn of.
 */
static void judge(struct hpn_doctor *d, struct hpn_doctor_qos *o, const char *driver)
{
	if (!driver || !d->conf_valid || !d->conf.nccl.enabled)
		return;
	o->judged = true;
	hpn_nccl_class(&d->conf.nccl, hpn_nccl_profile(&d->conf.nccl, d->conf.gpu_model), driver,
		       &o->q, o->netdev, &o->hints);
	if (!o->dcb_asked && o->hints.lossless[0])
		snprintf(o->hints.note, sizeof(o->hints.note),
			 "DCB not asked (a fake tree: its netdevs are not the kernel's)");
}

/*
 * The QoS of host netdev name, once per name; driver: the driver of the RoCE
 * device (not eRDMA's) whose traffic it classes, which the hints' class is
 * judged for, else NULL.
 */
static void add_qos(struct hpn_doctor *d, struct nl_sock *rt, const char *name, const char *driver)
{
	struct hpn_doctor_qos *o;
	struct hpn_err e = { 0 };

	for (size_t i = 0; i < d->n_qos; i++)
		if (!strcmp(d->qos[i].netdev, name))
			return;
	if (d->n_qos == HPN_DOCTOR_MAX_QOS)
		return;
	o = &d->qos[d->n_qos++];
	memset(o, 0, sizeof(*o));
	hpn_msgf(o->netdev, sizeof(o->netdev), "%s", name);
	hpn_qos_init(&o->q);
	if (hpn_sysfs_fake(d->sysfs_root)) {
		hpn_qos_read_ecn(d->sysfs_root, name, &o->q);
		judge(d, o, driver);
		return;
	}
	o->dcb_asked = true;
	if (!rt)
		hpn_msgf(o->error, sizeof(o->error), "QoS of \"%s\": no rtnetlink socket", name);
	else if (hpn_qos_read(rt, d->sysfs_root, name, &o->q, &e) < 0)
		hpn_msgf(o->error, sizeof(o->error), "%s", e.msg);
	if (o->error[0])
		hpn_qos_read_ecn(d->sysfs_root, name, &o->q);
	judge(d, o, driver);
}

/*
 * RoCE QoS of every row's netdev still in the host netns, and of the netdev
 * a `device` selector names when no row has it (a NIC without an RDMA device,
 * for softRoce). Runs after the holders: a held NIC's name is gone from here.
 */
static void gather_qos(struct hpn_doctor *d)
{
	_cleanup_nl_sock_ struct nl_sock *rt = NULL;
	const char *sel = d->conf.selector_value;

	/* Without a socket (the netlink check says why) each row says it has none. */
	if (!hpn_sysfs_fake(d->sysfs_root))
		(void)hpn_nl_open(NETLINK_ROUTE, &rt);
	for (size_t i = 0; i < d->n_nics; i++) {
		const struct hpn_doctor_nic *n = &d->nics[i];

		if (n->netdev[0] && !n->held_container[0] && !n->journal_only)
			add_qos(d, rt, n->netdev,
				!strcmp(n->transport, "roce") && strcmp(n->kind, "erdma") ? n->kind
											  : NULL);
	}
	if (d->conf_valid && d->conf.selector == HPN_SEL_DEVICE && sel && hpn_valid_ifname(sel) &&
	    hpn_sysfs_exists("%s/class/net/%s", d->sysfs_root, sel))
		add_qos(d, rt, sel, d->conf.soft_roce ? "rxe" : NULL);
}

/* ---- checks only the doctor makes ------------------------------------------------ */

static struct hpn_doctor_check *add_check(struct hpn_doctor *d, const char *name,
					  enum hpn_check_state state)
{
	struct hpn_doctor_check *c;

	/* More checks than slots would be a bug here: the last one is overwritten. */
	if (d->n_checks < HPN_DOCTOR_MAX_CHECKS)
		d->n_checks++;
	c = &d->checks[d->n_checks - 1];
	c->name = name;
	c->state = state;
	c->msg[0] = '\0';
	if (state == HPN_CHECK_FAIL)
		d->ready = false;
	return c;
}

#define CHECK(d, name, state, ...)                                                                 \
	hpn_msgf(add_check(d, name, state)->msg, HPN_ERR_MSG, __VA_ARGS__)

static void check_conf(struct hpn_doctor *d, const char *dir)
{
	if (!d->conf_valid) {
		CHECK(d, "config", HPN_CHECK_FAIL, "%s (code %d)", d->conf_err.msg,
		      d->conf_err.code);
		return;
	}
	CHECK(d, "config", HPN_CHECK_OK, "%s: network \"%s\" parses", d->conf_file, d->conf.name);
	/* containerd (max_conf_num 1) and CRI-O use the first file only. */
	if (d->conf_first[0] && strcmp(d->conf_first, d->conf_file))
		CHECK(d, "config", HPN_CHECK_WARN,
		      "%s sorts first in %s: a runtime that loads only the first file uses it, "
		      "not %s",
		      d->conf_first, dir, d->conf_file);
}

static bool free_nic(const struct hpn_doctor_nic *n)
{
	return n->rdma[0] && n->netdev[0] && !n->held_container[0];
}

static void check_devices(struct hpn_doctor *d)
{
	size_t rdma = 0, avail = 0;

	for (size_t i = 0; i < d->n_nics; i++) {
		rdma += d->nics[i].rdma[0] && !d->nics[i].journal_only;
		avail += free_nic(&d->nics[i]) && !strcmp(d->nics[i].state, "ACTIVE");
	}
	if (!rdma && d->conf.soft_roce)
		CHECK(d, "devices", HPN_CHECK_OK,
		      "no RDMA devices under %s/class/infiniband: softRoce makes one in each pod",
		      d->sysfs_root);
	else if (!rdma)
		CHECK(d, "devices", d->conf.rdma_required ? HPN_CHECK_FAIL : HPN_CHECK_WARN,
		      "no RDMA devices under %s/class/infiniband", d->sysfs_root);
	else
		CHECK(d, "devices", HPN_CHECK_OK,
		      "%zu RDMA port(s), %zu with a free netdev and an ACTIVE port", rdma, avail);
}

/*
 * On a live node, the row of the RDMA port that serves netdev name as ADD finds
 * it: through rtnetlink and rdmasys.c, so a macvlan or vlan child is served by its
 * parent's device. NULL when none does (or on a fake root: the table decides).
 */
static const struct hpn_doctor_nic *served_by(const struct hpn_doctor *d, const char *name)
{
	_cleanup_nl_sock_ struct nl_sock *sk = NULL;
	struct hpn_rdma_dev rd;
	struct hpn_link l;
	struct hpn_err e = { 0 };

	if (hpn_sysfs_fake(d->sysfs_root) || hpn_nl_open(NETLINK_ROUTE, &sk) < 0 ||
	    hpn_link_get(sk, 0, name, &l, &e) < 0 ||
	    hpn_rdma_of_netdev(d->sysfs_root, sk, &l, &rd, &e) < 0)
		return NULL;
	for (size_t i = 0; i < d->n_nics; i++)
		if (!strcmp(d->nics[i].rdma, rd.name) && d->nics[i].port == rd.port)
			return &d->nics[i];
	return NULL;
}

/* Is the NIC the config selects there, free and usable? */
static void check_selected(struct hpn_doctor *d)
{
	const struct hpn_conf *c = &d->conf;
	const struct hpn_doctor_nic *nic = NULL;
	const char *what = c->selector_value;

	switch (c->selector) {
	case HPN_SEL_DEVICE_ID:
		CHECK(d, "device", HPN_CHECK_SKIP,
		      "chosen per pod by the device plugin (runtimeConfig.deviceID)");
		return;
	case HPN_SEL_HWADDR:
		CHECK(d, "device", HPN_CHECK_SKIP, "hwaddr %s: not checked by the doctor", what);
		return;
	default:
		break;
	}
	for (size_t i = 0; !nic && i < d->n_nics; i++) {
		const struct hpn_doctor_nic *n = &d->nics[i];

		/* pciBusID selects a netdev's function (an eRDMA NIC by its ENI's). */
		if ((c->selector == HPN_SEL_DEVICE && !strcmp(n->netdev, what)) ||
		    (c->selector == HPN_SEL_PCI && !strcmp(n->netdev_pci, what)) ||
		    (c->selector == HPN_SEL_RDMA && !strcmp(n->rdma, what) &&
		     (!c->rdma_port || c->rdma_port == n->port) && (n->netdev[0] || c->rdma_port)))
			nic = n;
	}
	if (!nic && c->selector == HPN_SEL_DEVICE)
		nic = served_by(d, what);
	if (!nic) {
		bool there =
			c->selector == HPN_SEL_DEVICE
				? hpn_sysfs_exists("%s/class/net/%s", d->sysfs_root, what)
			: c->selector == HPN_SEL_PCI
				? hpn_sysfs_exists("%s/bus/pci/devices/%s", d->sysfs_root, what)
				: false;

		if (!there)
			CHECK(d, "device", HPN_CHECK_FAIL, "%s is not on this node", what);
		else if (c->soft_roce)
			CHECK(d, "device", HPN_CHECK_OK,
			      "%s (no RDMA device: softRoce makes one in the pod)", what);
		else if (c->rdma_required)
			CHECK(d, "device", HPN_CHECK_FAIL,
			      "no RDMA device serves %s, and rdmaRequired is true", what);
		else
			CHECK(d, "device", HPN_CHECK_OK, "%s (no RDMA device; rdmaRequired false)",
			      what);
		return;
	}
	if (nic->held_container[0])
		CHECK(d, "device", HPN_CHECK_WARN,
		      "%s is held by container %s (network %s): the next ADD gets nothing until "
		      "it is deleted",
		      what, nic->held_container, nic->held_network);
	else if (strcmp(nic->state, "ACTIVE"))
		CHECK(d, "device", c->rdma_required ? HPN_CHECK_FAIL : HPN_CHECK_WARN,
		      "%s: port %u of %s is %s, not ACTIVE", what, nic->port, nic->rdma,
		      nic->state[0] ? nic->state : "unknown");
	else if (c->selector == HPN_SEL_DEVICE && strcmp(nic->netdev, what))
		CHECK(d, "device", HPN_CHECK_OK, "%s: %s port %u ACTIVE, through %s, free", what,
		      nic->rdma, nic->port, nic->netdev);
	else
		CHECK(d, "device", HPN_CHECK_OK, "%s: %s port %u ACTIVE, netdev %s, free", what,
		      nic->rdma, nic->port, nic->netdev);
}

/* How many GPUs the NVIDIA driver lists under proc_root: a GPU node has some. */
static size_t node_gpus(const char *proc_root)
{
	char path[PATH_MAX];
	struct dirent *de;
	size_t n = 0;
	DIR *dir;

	if (hpn_snprintf(path, sizeof(path), "%s/driver/nvidia/gpus", proc_root) < 0 ||
	    !(dir = opendir(path)))
		return 0;
	while ((de = readdir(dir)))
		n += de->d_name[0] != '.';
	closedir(dir);
	return n;
}

/*
 * Every eRDMA NIC on the host must have MTU 8500 or 1400 on a GPU instance
 * (rdma.h): fail on a node with GPUs, where ADD refuses it for pods with
 * GPUs; warn on one without any (pods there have none), and where
 * erdmaAnyMtu lets ADD take it. No row on a node without eRDMA.
 */
static void check_erdma(struct hpn_doctor *d)
{
	char bad[HPN_ERR_MSG] = "", good[HPN_ERR_MSG] = "";
	size_t n_bad = 0, n = 0, gpus = node_gpus(d->conf.gpus.proc_root);
	enum hpn_check_state st;

	for (size_t i = 0; i < d->n_nics; i++) {
		const struct hpn_doctor_nic *nic = &d->nics[i];
		char *into;
		size_t len;

		if (strcmp(nic->kind, "erdma") || nic->journal_only || nic->held_container[0] ||
		    !nic->netdev[0] || nic->mtu < 0)
			continue;
		n++;
		into = hpn_erdma_gpu_mtu_ok((unsigned int)nic->mtu) ? good : bad;
		n_bad += into == bad;
		len = strlen(into);
		hpn_msgf(into + len, sizeof(bad) - len, "%s%s (%s, %s) MTU %d", len ? ", " : "",
			 nic->netdev, nic->rdma, nic->erdma_mode[0] ? nic->erdma_mode : "?",
			 nic->mtu);
	}
	if (!n)
		return;
	if (!n_bad) {
		CHECK(d, "erdma", HPN_CHECK_OK, "%s: fit for pods with GPUs (%d or %d)", good,
		      HPN_ERDMA_GPU_MTU_JUMBO, HPN_ERDMA_GPU_MTU);
		return;
	}
	st = gpus && !d->conf.erdma_any_mtu ? HPN_CHECK_FAIL : HPN_CHECK_WARN;
	CHECK(d, "erdma", st,
	      "%s: on GPU instances an eRDMA NIC's MTU must be %d (jumbo frames) or %d, or "
	      "NCCL's LL128 protocol corrupts data; %s",
	      bad, HPN_ERDMA_GPU_MTU_JUMBO, HPN_ERDMA_GPU_MTU,
	      d->conf.erdma_any_mtu ? "erdmaAnyMtu lets ADD take it for pods with GPUs"
	      : gpus		    ? "ADD refuses it for pods with GPUs, and this node has GPUs"
				    : "ADD refuses it for pods with GPUs (none listed under "
				      "procRoot/driver/nvidia/gpus here)");
}

int hpn_doctor_run(const char *conf_file, const char *conf_dir, const char *cni_path,
		   struct hpn_doctor *d)
{
	memset(d, 0, sizeof(*d));
	d->conf_plugin = -1;
	d->ready = true;
	d->cni_path = cni_path;
	load_conf(conf_file, conf_dir, d);
	d->sysfs_root = d->conf_valid ? d->conf.sysfs_root : HPN_DEFAULT_SYSFS_ROOT;

	{
		struct hpn_err e = { 0 };

		d->rdma_subsystem =
			hpn_rdma_node_netns_mode(d->sysfs_root, &d->netns_mode, &e) == 0;
	}
	gather_modules(d);
	gather_nics(d);
	if (d->conf_valid)
		gather_holders(d);
	gather_qos(d);

	check_conf(d, conf_dir);
	for (size_t i = 0; hpn_ready_checks[i].name; i++) {
		struct hpn_err e = { 0 };
		char note[HPN_ERR_MSG] = "";
		int r;

		if (!d->conf_valid) {
			CHECK(d, hpn_ready_checks[i].name, HPN_CHECK_SKIP, "no valid config");
			continue;
		}
		r = hpn_ready_checks[i].fn(&d->conf, cni_path, note, &e);
		if (r < 0)
			CHECK(d, hpn_ready_checks[i].name, HPN_CHECK_FAIL, "%s", e.msg);
		else
			CHECK(d, hpn_ready_checks[i].name, r ? HPN_CHECK_SKIP : HPN_CHECK_OK, "%s",
			      note);
	}
	if (d->conf_valid) {
		check_devices(d);
		check_selected(d);
		check_erdma(d);
	}
	return 0;
}

void hpn_doctor_free(struct hpn_doctor *d)
{
	hpn_conf_free(&d->conf);
	free(d->conf_buf);
	d->conf_buf = NULL;
}
