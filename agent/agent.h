/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_AGENT_H
#define HPN_AGENT_H

#include <limits.h>
#include <stdbool.h>

#include "alloc.h"
#include "conf.h"
#include "devices.h"
#include "ext.h"
#include "rpc.h"

/*
 * hpn-rdma-agent's state, owned by the event loop in main.c: the options,
 * the pool's config, the devices, and the two services (kubelet.c: the
 * device plugin and the PodResources client; lookup.c: the CNI's socket).
 */

#define AGENT_MAX_WATCHERS 8
#define AGENT_MAX_CONNS	   32

struct lookup_conn;

struct agent {
	/* options */
	const char *config_path;
	const char *kubelet_dir;
	const char *resource;
	const char *endpoint; /* socket name in device-plugins/ */
	const char *lookup_path;
	const char *dev_root; /* where Allocate's host paths are: /dev */
	int poll_s;

	struct hpn_conf conf;
	char *conf_buf; /* conf points into it */
	struct nl_sock *host;
	struct agent_devs devs;

	struct rpc *rpc;
	struct rpc_server *srv;
	bool srv_stopping, restart_wanted, registered, registering;
	struct rpc_call *watchers[AGENT_MAX_WATCHERS];
	size_t n_watchers;

	int epfd;
	int lookup_fd;
	struct lookup_conn *conns[AGENT_MAX_CONNS];

	bool quitting;
	char dp_dir[PATH_MAX];	     /* <kubelet-dir>/device-plugins */
	char sock_path[PATH_MAX];    /* dp_dir/<endpoint> */
	char kubelet_sock[PATH_MAX]; /* dp_dir/kubelet.sock */
	char podres_sock[PATH_MAX];  /* <kubelet-dir>/pod-resources/kubelet.sock */

	/* metrics, the health loop, GC (ext.h) */
	struct agent_ext ext;
};

/* kubelet.c */
int kubelet_start(struct agent *a);
/* Our socket is gone (the kubelet restarted and swept its directory): serve anew, register. */
void kubelet_restart(struct agent *a);
void kubelet_register(struct agent *a);
/* The device list changed: every ListAndWatch stream gets it. */
void kubelet_broadcast(struct agent *a);
void kubelet_stop(struct agent *a);
/* PodResources List, answered through done(ud, devices or error). */
typedef void (*pod_devices_fn)(struct agent *a, void *ud, const struct hpn_alloc *al,
			       const char *error);
int kubelet_pod_devices(struct agent *a, const struct hpn_alloc_req *req, int timeout_ms,
			pod_devices_fn done, void *ud);

/* lookup.c */
int lookup_listen(struct agent *a);
void lookup_accept(struct agent *a);
void lookup_io(struct agent *a, struct lookup_conn *c);
/* Closes connections past their deadline; whether any remain. */
bool lookup_sweep(struct agent *a);
void lookup_close_all(struct agent *a);
/* main.c: epoll registration of a lookup connection (ptr) */
int agent_watch_fd(struct agent *a, int fd, void *ptr);

#endif
