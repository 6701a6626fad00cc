/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_DRASHARE_H
#define HPN_DRASHARE_H

#include <stdbool.h>
#include <stddef.h>

/*
 * A NIC that pods share (KEP-5075, consumable capacity; doc/dra.md): how many
 * shares its RoCE GID table allows, and the parts of the slices that say so
 * (resource.k8s.io/v1): its counter set, each device's consumption of it, the
 * shared device's capacity; and what of them an API server dropped. Plain
 * strings and cJSON in, no NIC struct: draslice.c builds the slices from these.
 */

/*
 * The addresses one child of the NIC puts in its GID table: an IPv4 and the
 * IPv6 link-local one; each once per RoCE GID type the port carries (mlx5:
 * v1 and v2, 4 entries; rxe: v2 only, 2; measured on 7.3 by vm7.shared).
 */
#define HPN_DRA_ADDRS_PER_SHARE 2
/* GID table entries read at most (the kernel's tables hold a few hundred; rxe 2048). */
#define HPN_DRA_GID_TABLE_MAX 4096
/* The shared device's capacity, its counter set's counter, the attribute that marks it. */
#define HPN_DRA_SHARE_CAPACITY "shares"
#define HPN_DRA_SHARE_COUNTER  "nic"
#define HPN_DRA_SHARE_ATTR     "shared"
/* ResourceSliceMaxCounterSets: counter sets of one slice (a slice has them or devices). */
#define HPN_DRA_MAX_COUNTER_SETS 8

/*
 * The shares port `port` of RDMA device rdma can give children of netdev,
 * from sysfs under sysfs_root: floor((L - U) / (HPN_DRA_ADDRS_PER_SHARE * T)),
 * L the entries of ports/<port>/gids/ (HPN_DRA_GID_TABLE_MAX at most), U the
 * non-zero GIDs whose gid_attrs/ndevs/<i> names netdev (its own addresses:
 * its children's GIDs are not counted, so N stays as they come and go), T
 * the RoCE types (gid_attrs/types/<i>: "IB/RoCE v1", "RoCE v2") among those,
 * 2 when none reads. 0
 * without a table, or when the parent takes all of it. The caller judges
 * whether the NIC may be shared at all (RoCE on a hardware device).
 */
unsigned int hpn_dra_gid_shares(const char *sysfs_root, const char *rdma, unsigned int port,
				const char *netdev);

struct cJSON;

/* dev.consumesCounters: [{counterSet, counters: {nic: {value: "1"}}}]. -ENOMEM. */
int hpn_dra_share_consumes(struct cJSON *dev, const char *counter_set);
/*
 * The shared device's own fields: allowMultipleAllocations true, and
 * capacity shares of value N with requestPolicy {default "1", validValues
 * ["1"]}: each allocation takes one share. -EINVAL for 0, -ENOMEM.
 */
int hpn_dra_share_capacity(struct cJSON *dev, unsigned int shares);
/* {name, counters: {nic: {value: "1"}}} appended to sets (a slice's sharedCounters). -ENOMEM. */
int hpn_dra_share_counter_set(struct cJSON *sets, const char *name);

/*
 * The features of a slice an API server may drop when its feature gate is
 * off (it stores the rest and says nothing): the devices' taints
 * (DRADeviceTaints), and the shares (DRAConsumableCapacity drops
 * allowMultipleAllocations and requestPolicy, DRAPartitionableDevices
 * sharedCounters and consumesCounters).
 */
#define HPN_DRA_DROP_TAINTS 1u
#define HPN_DRA_DROP_SHARES 2u
/* The features of slice sent of which the API's answer body[0..len) to its write holds fewer. */
unsigned int hpn_dra_slice_dropped(const struct cJSON *sent, const char *body, size_t len);

#endif
