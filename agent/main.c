// SPDX-License-Identifier: Apache-2.0
/*
 * hpn-rdma-agent: the node daemon beside the CNI plugin (doc/agent.md). Wires
 * the services the flags (opts.c) ask for to one event loop (loop.h): the
 * node's config and devices, the device plugin, the CNI lookup socket, the
 * health loop, GC, the plugin's event log, the metrics, the kubeconfig watch.
 * Each service owns its state; only this file knows them all.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "attachmetrics.h"
#include "cdi.h"
#include "cdispecs.h"
#include "cnilog.h"
#include "deviceplugin.h"
#include "draclaims.h"
#include "drakubelet.h"
#include "gc.h"
#include "health.h"
#include "install.h"
#include "kubeloop.h"
#include "log.h"
#include "lookup.h"
#include "loop.h"
#include "metrics.h"
#include "node.h"
#include "nri.h"
#include "opts.h"
#include "podresources.h"
#include "podwatch.h"
#include "rpc.h"
#include "sakubeconfig.h"
#include "store.h"
#include "util.h"
#include "verbs.h"

#define STOP_GRACE_S	6
#define WORKER_GRACE_MS 3000
#define DRA_API_MS	10000 /* one claim's GET: the kubelet waits 45 s for all */

/* Everything main wires: the services, each its own. */
struct agent {
	struct loop *loop;
	struct rpc *rpc;
	struct node node;
	struct podres podres;
	struct deviceplugin *dp;
	struct dra *dra;
	const char *dra_driver;
	struct lookup *lookup;
	struct health *health;
	struct gc *gc;
	struct cnilog *cnilog;
	struct cdispecs *cdi;
	char cdi_dir[HPN_CDI_DIR_MAX + 1];
	struct metrics *metrics;
	struct attachmetrics attach; /* what the attachments' families read */
	struct kc_watch *kc;
	struct kubeloop *kube;	/* the API's calls on the loop, with --kubeconfig */
	struct podwatch *pods;	/* the node's pods, with --kubeconfig */
	struct nri *nri;	/* the runtime's NRI, with --nri */
	const char *nri_socket; /* its socket (argv's) */
	struct loop_src signals, kc_events, kc_timer, kc_token;
};
static bool idle(void *ud)
{
	const struct agent *a = ud;

	return !deviceplugin_serving(a->dp) && !dra_serving(a->dra) && rpc_busy(a->rpc) == 0;
}

static void on_signal(struct loop_src *s)
{
	struct agent *a = s->ud;
	struct signalfd_siginfo si;

	while (read(s->fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGPIPE || loop_exiting(a->loop))
			continue;
		hpn_info("signal %u: stopping", si.ssi_signo);
		deviceplugin_stop(a->dp);
		dra_stop(a->dra);
		lookup_stop(a->lookup);
		health_stop(a->health);
		gc_stop(a->gc);
		metrics_free(a->metrics);
		a->metrics = NULL;
		loop_exit(a->loop, STOP_GRACE_S * 1000, idle, a);
	}
}

static void on_kubeconfig(struct loop_src *s)
{
	kc_watch_event(s->ud);
}

static void on_plugin_token(struct loop_src *s)
{
	kc_watch_timer(s->ud);
}

/* The plugin's TokenRequest, on the loop's API client. */
static void plugin_token_done(void *ud, struct kube_result *res)
{
	kc_watch_token_done(ud, res->r, res->r < 0 ? NULL : &res->a, &res->err);
}

static int plugin_token_call(void *ud, const char *kubeconfig, const struct hpn_kube_call *call,
			     struct kc_watch *w)
{
	struct agent *a = ud;

	return kube_call(a->kube, kubeconfig, call, plugin_token_done, w, NULL);
}

static void devices_changed(void *ud)
{
	struct agent *a = ud;

	if (a->dp)
		deviceplugin_broadcast(a->dp);
	dra_devices_changed(a->dra);
}

/* The lookup's DRA answer: the NICs of the driver's prepared claims for the asking pod. */
static struct hpn_alloc *dra_pod_nics(void *ud, const struct hpn_alloc_req *req, char *why,
				      size_t len)
{
	const struct agent *a = ud;

	return draclaims_pod_nics(dra_prepared(a->dra), a->dra_driver, req->uid, req->shares, why,
				  len);
}

static int dra_attached(void *ud, const char *uid)
{
	const struct agent *a = ud;

	return dra_pod_attached(a->dra, uid);
}

/* The lookup's NRI answer: registered with the runtime now, and which one. */
static void nri_state(void *ud, struct hpn_nri_state *ret)
{
	const struct agent *a = ud;
	const char *name, *version;

	memset(ret, 0, sizeof(*ret));
	ret->registered = nri_registered(a->nri);
	snprintf(ret->socket, sizeof(ret->socket), "%s", a->nri_socket);
	nri_runtime(a->nri, &name, &version);
	if (ret->registered) {
		snprintf(ret->runtime, sizeof(ret->runtime), "%s", name);
		snprintf(ret->version, sizeof(ret->version), "%s", version);
	} else {
		snprintf(ret->why, sizeof(ret->why),
			 "not registered with the runtime's NRI at %s: no runtime there, its NRI "
			 "off, or still connecting; the agent's log says which",
			 a->nri_socket);
	}
}

/* The health loop's second source: a container of the sandbox NRI found bare. */
static bool nri_bare_broken(void *ud, const char *sandbox, char *msg, size_t len)
{
	const struct agent *a = ud;

	return nri_bare_of(a->nri, sandbox, msg, len) > 0;
}

static void nri_bare_changed(void *ud)
{
	const struct agent *a = ud;

	health_refresh(a->health);
}

/* Every scan: the CDI specs in step with what it found. */
static void scanned(void *ud)
{
	struct agent *a = ud;

	cdispecs_sync(a->cdi);
	dra_scanned(a->dra);
}

static void config_reloaded(void *ud)
{
	struct agent *a = ud;

	if (a->dp)
		deviceplugin_restart(a->dp);
	dra_reloaded(a->dra);
}

/* The signals the loop takes, blocked in every thread. */
static int signals(struct agent *a)
{
	sigset_t mask;
	int fd;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGPIPE);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	return loop_add(a->loop, &a->signals, fd, on_signal, a);
}

/* The kubeconfig kept from the service account: its inotify, and every poll period besides. */
static int kubeconfig(struct agent *a, int poll_s, struct hpn_err *err)
{
	int fd, r = kc_watch_start(a->kc, err);

	if (r < 0)
		return r;
	fd = fcntl(a->kc->fd, F_DUPFD_CLOEXEC, 0);
	r = fd < 0 ? -errno : loop_add(a->loop, &a->kc_events, fd, on_kubeconfig, a->kc);
	if (r >= 0) /* besides inotify: a watch can miss a swap */
		r = loop_timer(a->loop, &a->kc_timer, poll_s * 1000, poll_s * 1000, on_kubeconfig,
			       a->kc);
	if (r >= 0) {
		fd = fcntl(a->kc->timer_fd, F_DUPFD_CLOEXEC, 0);
		r = fd < 0 ? -errno : loop_add(a->loop, &a->kc_token, fd, on_plugin_token, a->kc);
	}
	return r < 0 ? hpn_err_set(err, HPN_E_IO, -r, "watch: %s", strerror(-r)) : 0;
}

/*
 * The families of each service that is on, in the order doc/metrics.md
 * lists them; a service that is off has none (GC, health's counts, --dra).
 */
static int register_metrics(struct agent *a)
{
	int r;

	a->attach = (struct attachmetrics){ .node = &a->node, .health = a->health };
	r = metrics_register(a->metrics, deviceplugin_metrics, a->dp);
	if (r >= 0)
		r = metrics_register(a->metrics, node_metrics, &a->node);
	if (r >= 0 && a->kube)
		r = metrics_register(a->metrics, kubeloop_metrics, a->kube);
	if (r >= 0 && a->pods)
		r = metrics_register(a->metrics, podwatch_metrics, a->pods);
	if (r >= 0 && a->nri)
		r = metrics_register(a->metrics, nri_metrics, a->nri);
	if (r >= 0)
		r = metrics_register(a->metrics, attachmetrics_render, &a->attach);
	if (r >= 0 && a->cnilog)
		r = metrics_register(a->metrics, cnilog_metrics, a->cnilog);
	if (r >= 0 && a->gc)
		r = metrics_register(a->metrics, gc_metrics, a->gc);
	if (r >= 0 && a->dra)
		r = metrics_register(a->metrics, dra_metrics, a->dra);
	return r;
}

/* The metrics, health and GC services the flags ask for. */
static int start_watchers(struct agent *a, const struct opts *o)
{
	struct timespec ts;
	int r;

	clock_gettime(CLOCK_REALTIME, &ts);
	r = loop_work_start(a->loop);
	if (r < 0) {
		hpn_error("worker thread: %s", strerror(-r));
		return r;
	}
	r = cnilog_start(a->loop, a->node.conf.state_dir, &a->cnilog);
	if (r < 0)
		return r;
	if (o->health.period_s > 0) {
		r = health_start(a->loop, &a->node, &o->health, &a->health);
		if (r < 0) {
			hpn_error("health loop: %s", strerror(-r));
			return r;
		}
		if (a->nri) {
			health_source(a->health, "container", nri_bare_broken, a);
			nri_watch_bare(a->nri, nri_bare_changed, a);
		}
	}
	if (o->gc.period_s > 0 && !opts_off(o->gc.cri_socket)) {
		r = gc_start(a->loop, a->rpc, &a->node, &o->gc, &a->gc);
		if (r < 0) {
			hpn_error("gc: %s", strerror(-r));
			return r;
		}
	} else {
		hpn_info("gc: off (--gc-interval 0 or --cri-socket none)");
	}
	if (opts_off(o->metrics_address))
		return 0;
	r = metrics_new((double)ts.tv_sec + (double)ts.tv_nsec / 1e9, &a->metrics);
	if (r >= 0)
		r = register_metrics(a);
	if (r >= 0)
		r = metrics_start(a->metrics, a->loop, o->metrics_address);
	return r;
}

static int start(struct agent *a, struct opts *o)
{
	struct hpn_err err = { 0 };
	const char *lookup = o->lookup_path;
	int r;

	r = loop_new(&a->loop);
	if (r >= 0)
		r = signals(a);
	if (r >= 0)
		r = rpc_open(a->loop, &a->rpc);
	if (r < 0) {
		hpn_error("event loop setup: %s", strerror(-r));
		return r;
	}
	a->node.on_devices = devices_changed;
	a->node.on_reload = config_reloaded;
	a->node.on_scan = scanned;
	a->node.ud = a;
	r = node_start(&a->node, a->loop, o->poll_s, &err);
	if (r < 0)
		goto fail;
	/*
	 * Journals an older binary left in the old default stateDir come along
	 * once, here, where waiting for its lock stalls nothing: the services open
	 * the store as it is (hpn_store_open_here), never waiting on the loop.
	 */
	if (hpn_store_adopt_old(a->node.conf.state_dir, &err) < 0) {
		hpn_warn("%s (the plugin's next run moves them)", err.msg);
		memset(&err, 0, sizeof(err));
	}
	/* Its own copy: a reloaded config replaces conf (a new socket path needs a restart). */
	if (!lookup)
		lookup = a->node.conf.agent.socket ? a->node.conf.agent.socket
						   : HPN_DEFAULT_AGENT_SOCKET;
	r = podres_init(&a->podres, a->rpc, o->dp.kubelet_dir, o->dp.resource, o->gpu_resources,
			o->gpu_driver);
	if (r < 0) {
		hpn_err_set(&err, HPN_E_INVALID_CONFIG, -r,
			    "--kubelet-dir %s is too long for a unix socket path",
			    o->dp.kubelet_dir);
		goto fail;
	}
	hpn_info("a pod's GPUs: the IDs of %s, the DRA devices of %s",
		 o->gpu_resources[0] ? o->gpu_resources : "(no resource)",
		 o->gpu_driver[0] ? o->gpu_driver : "(no driver)");
	r = lookup_start(a->loop, &a->podres, lookup, &a->lookup);
	if (r < 0) {
		hpn_err_set(&err, HPN_E_IO, -r, "lookup socket %s: %s", lookup, strerror(-r));
		goto fail;
	}
	if (o->kc.path) {
		/*
		 * The plugin's pod lookups answered from a watch of this node's pods.
		 * Without libcurl no API call at all: the pod cache off (the plugin
		 * asks the API itself), no token for the plugin, --dra refused below.
		 */
		struct hpn_err kerr = { 0 };
		int kr = kubeloop_new(a->loop, &a->kube, &kerr);

		a->kc = &o->kc;
		if (kr >= 0) {
			o->kc.call = plugin_token_call;
			o->kc.call_ud = a;
		}
		r = kubeconfig(a, o->poll_s, &err);
		if (r < 0) {
			hpn_error("kubeconfig %s: %s", o->kc.path, err.msg);
			return r;
		}
		/* The agent's own calls: its pod's service account, never the plugin's file. */
		r = kr < 0 ? kr
			   : podwatch_start(a->loop, a->kube, o->kc.own_path, o->node_name,
					    &a->pods);
		if (kr < 0)
			err = kerr;
		if (r < 0) {
			hpn_warn("pod cache: not started (%s): the plugin asks the API itself",
				 err.msg[0] ? err.msg : strerror(-r));
		} else {
			/* Only what the plugin reads, as the node's config (reloaded in place) says. */
			podwatch_keep(a->pods, &a->node.conf);
			lookup_set_pods(a->lookup, a->pods);
		}
		memset(&err, 0, sizeof(err));
	}
	hpn_info("hpn-rdma-agent %s: pool of network %s, %zu devices, resource %s", HPN_VERSION,
		 a->node.conf.name, a->node.devs.n, o->dp.resource);
	/* Its own copy of the directory too: a reloaded config replaces conf. */
	if (!o->cdi_dir && a->node.conf.agent.cdi_dir)
		snprintf(a->cdi_dir, sizeof(a->cdi_dir), "%s", a->node.conf.agent.cdi_dir);
	else if (o->cdi_dir)
		snprintf(a->cdi_dir, sizeof(a->cdi_dir), "%s", o->cdi_dir);
	if (a->cdi_dir[0]) {
		r = cdispecs_start(&a->node,
				   &(struct cdispecs_opts){ .dir = a->cdi_dir,
							    .dev_root = o->dp.dev_root,
							    .hook = o->cdi_hook },
				   &a->cdi);
		if (r < 0) {
			hpn_err_set(&err, HPN_E_INTERNAL, -r, "CDI specs: %s", strerror(-r));
			goto fail;
		}
	} else {
		hpn_info("CDI: off (--cdi-dir or agent.cdiDir empty)");
	}
	o->dp.cdi = a->cdi;
	r = deviceplugin_start(a->loop, a->rpc, &a->node, &o->dp, &a->dp, &err);
	if (r < 0)
		goto fail;
	if (o->dra) {
		if (!a->kube) {
			hpn_err_set(&err, HPN_E_KUBE, ENOTSUP,
				    "--dra reads claims from the API: no client (see the warning "
				    "above)");
			r = -ENOTSUP;
			goto fail;
		}
		if (!a->cdi_dir[0]) {
			hpn_err_set(&err, HPN_E_INVALID_CONFIG, EINVAL,
				    "--dra needs CDI: --cdi-dir and agent.cdiDir are empty");
			r = -EINVAL;
			goto fail;
		}
		r = dra_start(a->loop, a->rpc, &a->node,
			      &(struct dra_opts){ .kubelet_dir = o->dp.kubelet_dir,
						  .driver = o->dra_driver,
						  .node_name = o->node_name,
						  .kubeconfig = o->kc.own_path,
						  .cdi_dir = a->cdi_dir,
						  .dev_root = o->dp.dev_root,
						  .cdi_hook = o->cdi_hook,
						  .api_timeout_ms = DRA_API_MS,
						  .kube = a->kube,
						  .taint_effect = o->dra_taint_effect,
						  .shares = o->dra_shares },
			      &a->dra, &err);
		if (r < 0)
			goto fail;
		a->dra_driver = o->dra_driver;
		lookup_dra(a->lookup, dra_pod_nics, a);
		lookup_attached(a->lookup, dra_attached, a);
	}
	if (o->nri_socket) {
		r = nri_start(a->loop, &a->node,
			      &(struct nri_opts){
				      .socket = o->nri_socket,
				      .name = o->nri_name ? o->nri_name : NRI_DEFAULT_NAME,
				      .index = o->nri_index ? o->nri_index : NRI_DEFAULT_INDEX,
				      .dev_root = o->dp.dev_root },
			      &a->nri);
		if (r < 0) {
			hpn_err_set(&err, HPN_E_INTERNAL, -r, "NRI: %s", strerror(-r));
			goto fail;
		}
		a->nri_socket = o->nri_socket;
		lookup_nri(a->lookup, nri_state, a);
	}
	return start_watchers(a, o);
fail:
	hpn_error("%s", err.msg);
	return r;
}

static void stop(struct agent *a)
{
	/* Jobs the worker hands back now are dropped, not applied. */
	health_stop(a->health);
	gc_stop(a->gc);
	if (a->loop)
		loop_work_stop(a->loop, WORKER_GRACE_MS);
	metrics_free(a->metrics);
	health_free(a->health);
	gc_free(a->gc);
	cnilog_free(a->cnilog);
	lookup_free(a->lookup);
	nri_free(a->nri);
	podwatch_free(a->pods);
	if (a->rpc && !deviceplugin_serving(a->dp) && !dra_serving(a->dra) && rpc_busy(a->rpc) == 0)
		rpc_close(a->rpc);
	deviceplugin_free(a->dp);
	dra_free(a->dra);
	cdispecs_free(a->cdi);
	if (a->kc)
		kc_watch_stop(a->kc);
	loop_close(&a->kc_events);
	loop_close(&a->kc_timer);
	loop_close(&a->kc_token);
	loop_close(&a->signals);
	node_free(&a->node);
	kubeloop_free(a->kube);
	loop_free(a->loop);
}

int main(int argc, char **argv)
{
	struct opts o;
	struct agent a = {
		.signals.fd = -1, .kc_events.fd = -1, .kc_timer.fd = -1, .kc_token.fd = -1
	};
	struct hpn_err err = { 0 };
	int r, rc = 1;

	/* A proof the health loop spawned (hpn_rdma_proofs_by_exec): nothing of the agent runs. */
	if (argc > 1 && !strcmp(argv[1], HPN_RDMA_PROOF_CMD))
		return hpn_rdma_proof_main(argc - 1, argv + 1);
	if (argc > 1 && (!strcmp(argv[1], "install") || !strcmp(argv[1], "uninstall")))
		return agent_install_main(argc - 1, argv + 1);
	r = opts_parse(argc, argv, &o);
	if (r >= 0)
		return r;
	o.dp.retry_s = o.poll_s;
	hpn_log_init("agent", NULL);
	hpn_log_stderr(HPN_LOG_INFO);
	umask(0077); /* every socket and directory it makes: root only */
	/* The health loop's RDMA proofs run beside gRPC's threads: spawned, never forked. */
	r = hpn_rdma_proofs_by_exec();
	if (r < 0) {
		hpn_error("open /proc/self/exe for the RDMA proofs: %s", strerror(-r));
		return 1;
	}
	if (node_load(&a.node, o.config_path, &err) < 0) {
		hpn_error("%s", err.msg);
		return 1;
	}
	if (a.node.conf.log_file && hpn_log_open(a.node.conf.log_file, a.node.conf.log_level) < 0)
		hpn_warn("cannot open logFile %s", a.node.conf.log_file);
	/* Read once, before any thread: lib caches both. */
	hpn_boot_id();
	{
		long long btime;

		hpn_boot_time(&btime);
	}
	if (start(&a, &o) >= 0) {
		r = loop_run(a.loop);
		if (r == -ETIMEDOUT)
			hpn_warn("calls still in flight after %d s: stopping anyway", STOP_GRACE_S);
		else if (r < 0)
			hpn_error("epoll_wait: %s", strerror(-r));
		rc = deviceplugin_serving(a.dp) || dra_serving(a.dra) ? 1 : 0;
		hpn_info("stopped");
	}
	stop(&a);
	hpn_log_close();
	return rc;
}
