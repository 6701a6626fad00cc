/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_OPTS_H
#define HPN_AGENT_OPTS_H

#include <stdbool.h>

#include "deviceplugin.h"
#include "gc.h"
#include "health.h"
#include "sakubeconfig.h"

/* hpn-rdma-agent's flags (opts.c; --help lists them), checked: main.c wires what they ask for. */
struct opts {
	const char *config_path;
	const char *lookup_path; /* NULL: the entry's agent.socket */
	const char *cdi_dir;	 /* NULL: the entry's agent.cdiDir; "": off */
	const char *cdi_hook;	 /* the hpn-rdma binary the specs name as their hook */
	const char *metrics_address;
	const char *gpu_resources, *gpu_driver;
	bool dra, dra_shares;
	const char *dra_driver, *node_name, *dra_taint_effect;
	const char *nri_socket, *nri_name, *nri_index; /* nri_socket NULL: no NRI */
	int poll_s;
	struct dp_opts dp;
	struct health_opts health;
	struct gc_opts gc;
	struct kc_watch kc;
	char host[256]; /* node_name's storage when it is the host name */
};

/*
 * argv into *o: the defaults, then each flag checked, then the flags
 * together. -1 to go on, else the exit status: 0 after --help or --version,
 * 2 for a bad flag (said on stderr). *o points into argv and the
 * environment, and into itself (node_name, the host name): it stays where
 * it is.
 */
int opts_parse(int argc, char **argv, struct opts *o);
/* A value that turns a service off: empty or "none" (--metrics-address, --cri-socket). */
bool opts_off(const char *s);

#endif
