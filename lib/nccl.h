/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_NCCL_H
#define HPN_NCCL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "types.h"
#include "vars.h"

/*
 * The per-pod NCCL hints file: what to write, from what ADD bound (each
 * bound NIC's RDMA device and address), and the file itself under
 * <dir>/<key>/nccl.conf, which NCCL reads as KEY=value lines with '#'
 * comments (vars.h has its rules for names and values).
 */

#define HPN_DEFAULT_NCCL_DIR	   "/run/hpn-rdma/pods"
#define HPN_DEFAULT_NCCL_CONF_FILE "/etc/nccl.conf" /* NCCL's file without NCCL_CONF_FILE */
#define HPN_DEFAULT_SOCKET_IF	   "eth0"
#define HPN_NCCL_FILE		   "nccl.conf"
/*
 * <dir>/nic/<device ID> -> ../<key>: the pod's hints by a NIC moved into it,
 * for the agent's per-NIC CDI spec, which is written before any pod holds
 * the NIC and mounts <dir>/nic/<ID>/nccl.conf. No key is ever "nic".
 */
#define HPN_NCCL_NIC_DIR      "nic"
#define HPN_NCCL_MAX_PROFILES 64
#define HPN_NCCL_MAX_GPUS     63

enum hpn_nccl_ib {
	HPN_NCCL_IB_AUTO, /* on when an RDMA device is bound, else off */
	HPN_NCCL_IB_ON,	  /* an RDMA device must be bound */
	HPN_NCCL_IB_OFF,  /* NCCL_IB_DISABLE=1 and an empty NCCL_IB_HCA */
};

/* One GPU model series' settings: the data behind DESIGN.md's profile table. */
struct hpn_nccl_profile {
	char *name; /* GPU model series, matched without regard to case */
	enum hpn_nccl_ib ib;
	unsigned int drivers; /* HPN_NCCL_DRV_* bits the bound devices may have; 0: any */
	uint64_t gpu_counts;  /* bit n: a pod of n GPUs is allowed; 0: any */
	struct hpn_vars env;  /* extra keys of this model */
};

enum {
	HPN_NCCL_DRV_MLX5 = 1,
	HPN_NCCL_DRV_ERDMA = 2,
	HPN_NCCL_DRV_RXE = 4,
	HPN_NCCL_DRV_OTHER = 8,
};

struct hpn_nccl_conf {
	bool enabled;
	char *dir;
	/*
	 * Where the pods mount their hints file: HPN_DEFAULT_NCCL_CONF_FILE, or
	 * a path of their own for NCCL_CONF_FILE (NCCL 2.23+), which keeps the
	 * image's /etc/nccl.conf. Said in the file's header and the result.
	 */
	char *conf_file;
	char *socket_ifname;
	/*
	 * nccl.trafficClass "auto": NCCL_IB_TC, NCCL_IB_FIFO_TC (and under trust
	 * PCP NCCL_IB_SL) from the node's lossless class (ncclqos.c); "profile"
	 * (false): as the profile and env say.
	 */
	bool tc_auto;
	/* nccl.losslessRequired: ADD refuses, CHECK fails, when that class is not lossless. */
	bool lossless_required;
	struct hpn_vars env; /* extra keys for every pod of the network */
	/* The config's own profiles, looked up before the built-in ones. */
	/* Allocated for as many as the config has (each is 1 KB: not in every conf). */
	struct hpn_nccl_profile *profiles;
	size_t n_profiles;
};

/* Who a hints file belongs to; DEL removes a file only when this matches. */
struct hpn_nccl_owner {
	const char *container_id;
	const char *network;
	const char *ifname; /* CNI_IFNAME */
	/* For the header only; any of them may be NULL. */
	const char *pod_namespace, *pod_name, *pod_uid;
};

/* A key the plugin computes from the binding; config may not set it. */
bool hpn_nccl_computed_name(const char *s);
/* The HPN_NCCL_DRV_* bit of a driver name ("mlx5", "erdma", "rxe", "other"); 0 unknown. */
unsigned int hpn_nccl_driver_bit(const char *driver);

/*
 * Profile for a GPU model series (NULL or ""): the config's, the built-in one, else "auto".
 * A driver's name ("erdma") names no GPU model: "auto".
 */
const struct hpn_nccl_profile *hpn_nccl_profile(const struct hpn_nccl_conf *nc, const char *model);
/* Is name a driver's ("mlx5", "erdma", "rxe", "other", any case): a profile of its devices? */
bool hpn_nccl_driver_profile_name(const char *name);
/*
 * The profile of the devices of driver (NULL: none) that NCCL's IB transport
 * uses: the config's of that name, else the built-in one ("erdma": PAI's
 * eRDMA values), else NULL. Only its env applies, before the model's.
 */
const struct hpn_nccl_profile *hpn_nccl_driver_profile(const struct hpn_nccl_conf *nc,
						       const char *driver);
/*
 * Can NCCL's IB transport use a device of this transport ("roce", "ib",
 * "iwarp")? Not iWARP: its QPs connect only through iw_cm, and NCCL connects
 * them itself. NULL: no.
 */
bool hpn_nccl_ib_transport(const char *transport);
/* A device's NCCL_IB_HCA as the hints write it, "=mlx5_2:1" (exact, with the port). */
int hpn_nccl_hca(const char *device, int port, char *out, size_t len);
/* The pod's GPU count (0: unknown) against the profile; code 7 names both. */
int hpn_nccl_check_gpus(const struct hpn_nccl_profile *p, int gpus, struct hpn_err *err);
/* A device of this driver (NULL: none) about to be bound against the profile; code 108. */
int hpn_nccl_check_driver(const struct hpn_nccl_profile *p, const char *driver,
			  struct hpn_err *err);

/*
 * The settings for what this attachment bound on its n NICs, in file order;
 * out is filled only on success and freed with hpn_vars_free().
 */
int hpn_nccl_render(const struct hpn_nccl_conf *nc, const struct hpn_nccl_profile *p,
		    const struct hpn_bound_nic *nics, size_t n, struct hpn_vars *out,
		    struct hpn_err *err);
/*
 * The traffic class the hints v give NCCL's RoCE QPs against each NIC's QoS
 * (nics[i].qos, as ADD read it; ncclqos.c). With nc->tc_auto, first
 * NCCL_IB_TC and NCCL_IB_FIFO_TC (trust DSCP) or NCCL_IB_SL (trust PCP) are
 * set in v from the first such NIC's one lossless priority. Then out[i] is
 * NIC i's verdict (left alone for a NIC NCCL's IB transport does not carry
 * RoCE through, or whose QoS was not read). A class on a NIC with PFC that
 * misses it is a warning (out[i].note, and the log); with
 * nc->lossless_required any verdict but lossless fails, code 108 naming the
 * NIC and why.
 */
int hpn_nccl_qos(const struct hpn_nccl_conf *nc, const struct hpn_bound_nic *nics, size_t n,
		 struct hpn_vars *v, struct hpn_rdma_qos *out, struct hpn_err *err);
/*
 * rq's verdict for its tc, fifo_tc and sl on QoS q (NULL or unread: could
 * not be read) of netdev ifname: dcb, pfc, trust, lossless, and a note (why
 * it is unknown, or the warning when it misses the priority with PFC).
 */
void hpn_nccl_qos_verdict(const struct hpn_qos *q, const char *ifname, struct hpn_rdma_qos *rq);
/*
 * The class the hints of profile p give nics[0..n) and each one's verdict
 * into out, as ADD's hints would render and judge them (hpn_nccl_render,
 * hpn_nccl_qos), the settings themselves thrown away: for a judgement before
 * the proof (the GID and addresses change no class). Errors as theirs.
 */
int hpn_nccl_judge(const struct hpn_nccl_conf *nc, const struct hpn_nccl_profile *p,
		   const struct hpn_bound_nic *nics, size_t n, struct hpn_rdma_qos *out,
		   struct hpn_err *err);
/*
 * The class ADD would give a RoCE NIC of driver driver with QoS q (netdev
 * ifname) under profile p, and its verdict, into out (hpn_nccl_qos on one
 * NIC, never refusing); lossless empty and a note when no class is given
 * (IB off, the profile refusing the driver). For the doctor.
 */
void hpn_nccl_class(const struct hpn_nccl_conf *nc, const struct hpn_nccl_profile *p,
		    const char *driver, const struct hpn_qos *q, const char *ifname,
		    struct hpn_rdma_qos *out);
struct hpn_journal_nic;
struct nl_sock;
/*
 * The verdict now for the class ADD gave journalled NIC n (added: its
 * result's rdma qos), read where ADD read it: a moved NIC's own netdev in
 * the pod (pod, a socket in its netns), a child's parent or a VF's PF on the
 * host (host). Into ret; an unreadable QoS is "unknown" with the reason.
 */
void hpn_nccl_qos_now(const struct hpn_journal_nic *n, const struct hpn_rdma_qos *added,
		      struct nl_sock *host, struct nl_sock *pod, const char *sysfs_root,
		      struct hpn_rdma_qos *ret);
/*
 * The file's text: a '#' header (owner, pod, the NCCL_CONF_FILE it is meant
 * for when conf_file is not NULL or the default, devices) and the KEY=value
 * lines.
 */
char *hpn_nccl_format(const struct hpn_vars *v, const struct hpn_nccl_owner *o,
		      const char *conf_file, const struct hpn_bound_nic *nics, size_t n);
/* A usable nccl.confFile: absolute, [A-Za-z0-9._/-], no "..", not a directory's. */
bool hpn_nccl_valid_conf_file(const char *path);
/* The header line DEL and CHECK compare (malloc'd; NULL when out of memory). */
char *hpn_nccl_owner_line(const struct hpn_nccl_owner *o);
/*
 * Reads text as NCCL does into out (later lines do not override earlier
 * ones: NCCL's setenv(..., 0)); *owner_ok says whether the owner line is there.
 */
int hpn_nccl_parse(const char *text, const char *owner_line, struct hpn_vars *out, bool *owner_ok);

/* Pod UID or container ID usable as the directory name (never HPN_NCCL_NIC_DIR). */
bool hpn_nccl_valid_key(const char *key);
/*
 * The directory name for a pod: its UID (NULL: none), else the container ID,
 * which is shortened with a hash of the whole when it is too long to be one
 * (or is HPN_NCCL_NIC_DIR).
 */
void hpn_nccl_key(const char *pod_uid, const char *container_id, char key[HPN_NCCL_KEY_MAX]);
/* A NIC's device ID usable as a link's name: 1-63 bytes of [A-Za-z0-9_.:@-], not . or .. */
bool hpn_nccl_valid_link(const char *id);
/* "<dir>/<key>/nccl.conf" into out (len bytes): -EINVAL (key), -ENAMETOOLONG. */
int hpn_nccl_file_path(const char *dir, const char *key, char *out, size_t len);
/* "<dir>/nic/<id>/nccl.conf", the pod's file through NIC id's link: as hpn_nccl_file_path. */
int hpn_nccl_link_file_path(const char *dir, const char *id, char *out, size_t len);
/*
 * Writes <dir>/<key>/nccl.conf atomically (temp file, rename), dir and key
 * created 0755 and the file 0644. key is opened relative to dir with
 * O_NOFOLLOW, under an flock on it that hpn_nccl_remove() also takes. Not
 * synced: the pods that read it do not outlive a power loss.
 */
int hpn_nccl_write(const char *dir, const char *key, const char *text, struct hpn_err *err);
/* The file's text (at most 64 KiB); -ENOENT when missing. */
int hpn_nccl_read(const char *dir, const char *key, char **ret, struct hpn_err *err);
/*
 * Removes the file if its owner line is owner_line (a pod recreated under the
 * same key keeps its new file), then the key directory if empty. Missing
 * pieces are not errors.
 */
int hpn_nccl_remove(const char *dir, const char *key, const char *owner_line, struct hpn_err *err);

/*
 * Makes <dir>/nic/<id> a symlink to ../<key> (relative: it resolves on the
 * host to the pod's own directory, whatever dir is mounted as), dir and
 * dir/nic created 0755 as needed, dir/nic opened with O_NOFOLLOW and
 * flock()ed while the link is read and changed (hpn_nccl_unlink takes the
 * same lock). A link to another key (an attachment gone without its DEL) is
 * replaced atomically; anything else at the name (a file, a directory) is
 * refused, code 5, and left. 0 when made or already there, 1 when it
 * replaced a link to another key.
 */
int hpn_nccl_link(const char *dir, const char *id, const char *key, struct hpn_err *err);
/*
 * Removes <dir>/nic/<id> if it is still the symlink to ../<key>: 0 when
 * removed or not there (nor dir, nor dir/nic), 1 when it is something else
 * (a link to another key: another pod's now), left; -errno with err set.
 */
int hpn_nccl_unlink(const char *dir, const char *id, const char *key, struct hpn_err *err);
/*
 * What <dir>/nic/<id> is: 0 the symlink to ../<key>; -ENOENT none; -EXDEV a
 * symlink elsewhere (its target in other, len bytes, may be NULL); -EINVAL
 * not a symlink; another -errno.
 */
int hpn_nccl_link_read(const char *dir, const char *id, const char *key, char *other, size_t len);

void hpn_nccl_conf_free(struct hpn_nccl_conf *nc);

#endif
