/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_CONF_H
#define HPN_CONF_H

#include <stdbool.h>
#include <stddef.h>

#include "cni.h"
#include "err.h"
#include "log.h"

#define HPN_DEFAULT_STATE_DIR	  "/var/lib/cni/hpn-rdma"
#define HPN_DEFAULT_SYSFS_ROOT	  "/sys"
#define HPN_MAX_VALID_ATTACHMENTS 65536

/* How the host device is chosen: exactly one selector. */
enum hpn_selector { HPN_SEL_NONE, HPN_SEL_DEVICE, HPN_SEL_HWADDR, HPN_SEL_PCI, HPN_SEL_DEVICE_ID };

/* The network configuration from stdin, validated and typed. */
struct hpn_conf {
	char *cni_version;
	char *name;
	char *type;

	char *if_name; /* pod-side name override; NULL: CNI_IFNAME */
	enum hpn_selector selector;
	char *selector_value; /* device name, MAC, or normalised PCI address */
	int mtu;	      /* 0: leave as is */

	char *state_dir;
	char *sysfs_root;
	char *log_file;
	enum hpn_log_level log_level;

	bool has_ipam;
	char *ipam_type;

	struct hpn_result *prev_result; /* NULL when not chained */

	/* GC: cni.dev/valid-attachments, the attachments the runtime still wants. */
	struct hpn_attachment {
		char *container_id;
		char *ifname;
	} * valid;
	size_t n_valid;
	struct hpn_dns dns;

	/* Verbatim stdin, handed unchanged to the IPAM plugin (spec: same config). */
	const char *raw;
	size_t raw_len;
};

/*
 * Parses and validates the config for a command. VERSION needs only cniVersion.
 * Errors: 6 for bad JSON, 1 for an unsupported cniVersion, 7 for anything invalid.
 * conf keeps a pointer to buf (raw), which must outlive it.
 */
int hpn_conf_parse(const char *buf, size_t len, enum hpn_cmd cmd, struct hpn_conf *conf,
		   struct hpn_err *err);
void hpn_conf_free(struct hpn_conf *conf);
/* Just cniVersion, for answering VERSION or an early error in the right version. */
char *hpn_conf_peek_version(const char *buf, size_t len);

#endif
