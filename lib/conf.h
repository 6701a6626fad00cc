/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_CONF_H
#define HPN_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cni.h"
#include "err.h"
#include "log.h"
#include "nccl.h"
#include "result.h"
#include "types.h"

#define HPN_DEFAULT_SYSFS_ROOT	  "/sys"
#define HPN_DEFAULT_PROC_ROOT	  "/proc" /* gpus.procRoot: the host's, for its GPUs */
#define HPN_MAX_VALID_ATTACHMENTS 65536
/* agent: where hpn-rdma-agent answers which NICs the kubelet gave a pod. */
#define HPN_DEFAULT_AGENT_SOCKET  "/run/hpn-rdma/agent.sock"
#define HPN_DEFAULT_AGENT_TIMEOUT 500 /* ms: connect, ask, answer */
/*
 * agent: where Allocate names a directory per container for devices ADD
 * makes (softRoce), <dir>/<NIC ID>; ADD puts their nodes in it (doc/agent.md).
 */
#define HPN_DEFAULT_AGENT_DEVICE_DIR "/run/hpn-rdma/dev"
#define HPN_AGENT_DEVICE_DIR_MAX     200
/* nri.memlock "unlimited": RLIM_INFINITY, as the OCI spec carries RLIMIT_MEMLOCK. */
#define HPN_MEMLOCK_UNLIMITED UINT64_MAX
/* nri.memlock in bytes: at most 2^53, the largest integer a JSON number holds exactly. */
#define HPN_MEMLOCK_MAX 9007199254740992ull

/* How the host device is chosen: exactly one selector. */
enum hpn_selector {
	HPN_SEL_NONE,
	HPN_SEL_DEVICE,
	HPN_SEL_HWADDR,
	HPN_SEL_PCI,
	HPN_SEL_DEVICE_ID,
	HPN_SEL_RDMA,  /* rdmaDevice: the netdev behind an RDMA device (and port) */
	HPN_SEL_MATCH, /* match: free NICs of a node-wide pool */
};

/* mode: what ADD does with the selected NIC. */
enum hpn_mode {
	HPN_MODE_MOVE,	  /* move the NIC itself into the pod (exclusive use) */
	HPN_MODE_MACVLAN, /* create a macvlan child of it in the pod (shared) */
	HPN_MODE_IPVLAN,  /* create an ipvlan child of it in the pod (shared) */
};

#define HPN_MATCH_MAX_LIST 64 /* entries of each match list */

/* match: every field given must hold for a netdev to be a candidate. */
struct hpn_match {
	char **devices; /* netdev name globs (names and altnames) */
	size_t n_devices;
	char **drivers; /* netdev's driver: mlx5_core, erdma, virtio_net... */
	size_t n_drivers;
	char **rdma_devices; /* RDMA device name globs: mlx5_* */
	size_t n_rdma_devices;
	char **pci; /* normalised PCI addresses */
	size_t n_pci;
	int numa_node;
	bool has_numa_node;
};

struct hpn_pod; /* pod.h */

/*
 * "kubernetes": the API server ADD reads the pod from when the pod's
 * annotations do not decide (a label selects, or the GPU model or count are
 * missing). Only ADD ever makes the request; nothing else reads the file.
 */
struct hpn_kube_conf {
	char *kubeconfig;	 /* absolute path; NULL: no "kubernetes", the API is never read */
	unsigned int timeout_ms; /* the lookup's one budget, retries included */
	char *gpu_resource;	 /* counted over the pod's containers: the GPU count */
};

/* The network configuration from stdin, validated and typed. */
struct hpn_conf {
	char *cni_version;
	char *name;
	char *type;

	char *if_name;		/* pod-side name override; NULL: CNI_IFNAME */
	char *selector_value;	/* device name, MAC, normalised PCI address, or RDMA device */
	struct hpn_match match; /* selector HPN_SEL_MATCH */
	enum hpn_selector selector;
	unsigned int rdma_port; /* rdmaDevice "name:port"; 0: the device's only port */
	int mtu;		/* 0: leave as is */
	unsigned int count;	/* NICs to attach: pod-side name, then the next names */
	enum hpn_mode mode;
	/* macvlanMode (IFLA_MACVLAN_MODE_*) or ipvlanMode (IPVLAN_MODE_L2/L3/L3S) */
	unsigned int child_mode;
	enum hpn_rdma_netns rdma_netns;
	enum hpn_log_level log_level;
	bool has_master;    /* the selector was "master" (HPN_SEL_DEVICE) */
	bool rdma_required; /* rdmaRequired: no RDMA device behind the NIC fails ADD */
	/*
	 * softRoce: a NIC with no RDMA device gets a Soft-RoCE (rxe) device made
	 * on its pod-side interface, deleted again before the NIC leaves the pod.
	 */
	bool soft_roce;
	/*
	 * erdmaAnyMtu: an eRDMA NIC of a pod with GPUs may have an MTU other
	 * than the 8500 or 1400 Alibaba requires on GPU instances (rdma.h).
	 */
	bool erdma_any_mtu;
	bool has_ipam;
	bool pod_selected; /* no podSelector, or the pod's annotation (or label) has the value */
	int gpu_count; /* annotation, else the pod's GPU resource, else nccl.gpuCount; 0: unknown */
	/*
	 * ADD must read the pod (hpn_conf_apply_pod) before it decides: the
	 * config has "kubernetes" and the annotations left open whether the pod
	 * is selected (podSelector.label) or, for a selected pod, its GPU model
	 * or count. pod_lookup_why says which, for messages.
	 */
	bool pod_lookup;
	const char *pod_lookup_why;

	char *state_dir;
	char *sysfs_root;
	char *log_file;
	char *ipam_type;

	struct hpn_result *prev_result; /* NULL when not chained */

	/* GC: cni.dev/valid-attachments, the attachments the runtime still wants. */
	struct hpn_attachment {
		char *container_id;
		char *ifname;
	} * valid;
	size_t n_valid;
	struct hpn_dns dns;

	/* NCCL hints (nccl) and the pod: opted in (podSelector), GPU model and count. */
	struct hpn_nccl_conf nccl;
	char *pod_selector;   /* "key=value" for messages; NULL without podSelector */
	char *pod_annotation; /* podSelector.annotation (or its default); NULL: labels only */
	char *pod_label;      /* podSelector.label; NULL: none */
	char *pod_value;      /* podSelector.value, which either one must have */
	char *gpu_model;      /* annotation, else the pod's label, else nccl.gpuModel; NULL: none */
	char *gpu_model_annotation; /* nccl.gpuModelAnnotation, and the label of the model: */
	char *gpu_model_label;	    /* nccl.gpuModelLabel */
	bool gpu_model_annotated;   /* the pod's annotations named the model */
	bool gpu_count_annotated;   /* and the count */
	struct hpn_kube_conf kube;

	/*
	 * "agent": with match, ADD first asks hpn-rdma-agent which NICs the
	 * kubelet allocated to the pod (device plugin) and attaches exactly those.
	 */
	struct hpn_agent_conf {
		bool lookup;	  /* "lookup" (default true) */
		bool required;	  /* "required" (default false): no agent fails ADD */
		char *socket;	  /* "socket" (default HPN_DEFAULT_AGENT_SOCKET) */
		char *device_dir; /* "deviceDir" (default HPN_DEFAULT_AGENT_DEVICE_DIR) */
		/*
		 * "cdiDir" (default HPN_DEFAULT_CDI_DIR; "": NULL, off): where ADD
		 * writes the CDI spec of a device it made (softRoce), cdi.h.
		 */
		char *cdi_dir;
		int timeout_ms; /* "timeoutMs" (default HPN_DEFAULT_AGENT_TIMEOUT) */
	} agent;
	/*
	 * "gpus": with match and the agent, each NIC is the free one nearest a
	 * GPU of the pod (doc/gpu.md).
	 */
	struct hpn_gpu_conf {
		bool enabled;	 /* "enabled" (default true) */
		bool per_gpu;	 /* "nicPerGpu" (default false): one NIC per GPU, not count */
		bool refuse_far; /* "far": "refuse" fails ADD, "allow" (default) says so */
		enum hpn_gpu_dist near; /* "near": the farthest class counted near (default PXB) */
		char *proc_root;	/* "procRoot" (default /proc): the host's, for its GPUs */
	} gpus;
	/*
	 * "nri": hpn-rdma-agent's NRI plugin, which gives an attached pod's
	 * containers their RDMA devices at CreateContainer (doc/agent.md). A
	 * runtime whose link to it is down starts them without: with required,
	 * ADD first asks the agent whether its link is registered.
	 */
	struct hpn_nri_conf {
		bool required; /* "required" (default false): a link not registered fails ADD */
		/*
		 * "memlock": the containers' RLIMIT_MEMLOCK at least this many
		 * bytes; HPN_MEMLOCK_UNLIMITED ("unlimited", the default); 0:
		 * their own limit left as it is. The agent reads it per call.
		 */
		uint64_t memlock;
	} nri;

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
void hpn_match_free(struct hpn_match *m);
/*
 * The config a runtime would give hpn-rdma from a file's text: a .conf as
 * is, or a conflist's hpn-rdma entry with the list's name and cniVersion.
 * 1: found (*ret_entry a cJSON object to free with cJSON_Delete; *ret_index
 * the entry's index in "plugins", -1 for a .conf), 0: no hpn-rdma config in
 * the text, -EINVAL: not a JSON object, -ENOMEM.
 */
int hpn_conf_entry(const char *text, size_t len, void **ret_entry, int *ret_index);
/*
 * A file's text (path names it in errors) parsed for cmd as the runtime would
 * hand it over (hpn_conf_entry): 6 not a JSON object, 7 no hpn-rdma config or
 * an invalid one. *ret_entry is the entry's text, which conf points into: free
 * it after hpn_conf_free. On an error nothing is left to free.
 */
int hpn_conf_parse_text(const char *path, const char *text, size_t len, enum hpn_cmd cmd,
			struct hpn_conf *conf, char **ret_entry, struct hpn_err *err);
/* Just cniVersion, for answering VERSION or an early error in the right version. */
char *hpn_conf_peek_version(const char *buf, size_t len);

/* ---- conf_pod.c, which conf.c calls (cJSON objects as void *) ---- */

/* conf_pod.c: the "nccl" section (hints directory, settings, profiles). */
int hpn_conf_parse_nccl(struct hpn_conf *conf, const void *root, struct hpn_err *err);
/*
 * conf_pod.c: podSelector and the GPU model and count, from the pod's
 * annotations in rc (runtimeConfig; NULL: none) or the config's nccl section.
 */
int hpn_conf_parse_pod(struct hpn_conf *conf, const void *root, const void *rc,
		       struct hpn_err *err);

/*
 * The rest of the pod decision, from the pod as the Kubernetes API has it
 * (kube.h reads it; ADD calls this when conf->pod_lookup): a podSelector.label
 * with podSelector.value selects a pod its annotations did not; for a selected
 * pod, the GPU model its annotations did not name comes from the label
 * gpu_model_label (else the API's annotation gpu_model_annotation), and the
 * count from the pod's conf->kube.gpu_resource (when it has any). Code 7 for a
 * pod asking for more GPUs than a profile can name. conf->pod_lookup is
 * cleared: the decision is made.
 */
int hpn_conf_apply_pod(struct hpn_conf *conf, const struct hpn_pod *pod, struct hpn_err *err);

/*
 * What ADD does with one NIC: the config's mode, except that a share (a DRA
 * claim's shared device, share) is a child under a move config too, a bridge
 * macvlan with a MAC of its own. child_mode (NULL: not wanted) gets the
 * child's macvlan or ipvlan mode when the answer is not HPN_MODE_MOVE. Every
 * per-NIC decision (holders, RDMA netns mode, soft devices, the child) asks
 * this, never conf->mode.
 */
enum hpn_mode hpn_conf_nic_mode(const struct hpn_conf *conf, bool share, unsigned int *child_mode);

#endif
