// SPDX-License-Identifier: Apache-2.0
/*
 * hpn-rdma-agent: the node daemon beside the CNI plugin (doc/agent.md). Parses
 * the flags and wires the services to one event loop (loop.h): the node's
 * config and devices, the device plugin, the CNI lookup socket, the health
 * loop, GC, the plugin's event log, the metrics, the kubeconfig watch. Each
 * service owns its state; only this file knows them all.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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
#include "draslice.h"
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
#include "pod.h"
#include "podresources.h"
#include "podwatch.h"
#include "rpc.h"
#include "sakubeconfig.h"
#include "store.h"
#include "util.h"
#include "verbs.h"

#define DEFAULT_RESOURCE "rdma/hpn"
#define DEFAULT_ENDPOINT "hpn-rdma.sock"
#define DEFAULT_KUBELET	 "/var/lib/kubelet"
#define DEFAULT_METRICS	 "127.0.0.1:9467"
#define DEFAULT_CRI	 "/run/containerd/containerd.sock"
#define DEFAULT_CNI_PATH "/opt/cni/bin"
#define DEFAULT_GPU_RES	 "nvidia.com/gpu"
#define DEFAULT_GPU_DRV	 "gpu.nvidia.com"
#define DEFAULT_CDI_HOOK DEFAULT_CNI_PATH "/hpn-rdma"
#define DEFAULT_POLL_S	 10
#define STOP_GRACE_S	 6
#define WORKER_GRACE_MS	 3000
#define DRA_API_MS	 10000 /* one claim's GET: the kubelet waits 45 s for all */

static const char usage[] =
	"Usage: hpn-rdma-agent --config FILE [OPTIONS]\n"
	"\n"
	"The node agent of hpn-rdma: a kubelet device plugin that lists the NICs of\n"
	"the pool (the hpn-rdma entry's match, count, mode, sysfsRoot, stateDir) as\n"
	"devices of one resource, and the socket the CNI plugin asks which of them\n"
	"the kubelet allocated to a pod.\n"
	"\n"
	"  --config FILE        a .conflist or .conf with an hpn-rdma entry using match\n"
	"  --kubelet-dir DIR    the kubelet's root (default " DEFAULT_KUBELET "): it\n"
	"                       registers at DIR/device-plugins/kubelet.sock and asks\n"
	"                       DIR/pod-resources/kubelet.sock\n"
	"  --resource NAME      the extended resource (default " DEFAULT_RESOURCE ")\n"
	"  --endpoint NAME      its socket in DIR/device-plugins (default " DEFAULT_ENDPOINT ")\n"
	"  --lookup-socket PATH the CNI's lookup socket (default: the entry's\n"
	"                       agent.socket, " HPN_DEFAULT_AGENT_SOCKET ")\n"
	"  --poll-interval SEC  health re-check besides link events (default 10)\n"
	"  --dev-root DIR       where Allocate's host device paths are (default /dev;\n"
	"                       the container path is always /dev/infiniband/NAME)\n"
	"  --cdi-dir DIR        keep a CDI spec of each pool NIC with an RDMA device\n"
	"                       there, and name it in Allocate's answer (default: the\n"
	"                       entry's agent.cdiDir, " HPN_DEFAULT_CDI_DIR "; empty: no CDI)\n"
	"  --cdi-hook PATH      the hpn-rdma binary each spec names as its createRuntime\n"
	"                       hook (hpn-rdma cdi-hook: only the pod that holds the NIC\n"
	"                       gets its device; default " DEFAULT_CDI_HOOK "; empty,\n"
	"                       or not executable: no spec at all, Allocate names no\n"
	"                       CDI device and DRA prepares no claim; said at start)\n"
	"  --gpu-resource NAMES the device plugin resources whose IDs are a pod's GPUs,\n"
	"                       comma-separated (default " DEFAULT_GPU_RES "; empty: none);\n"
	"                       the lookup answers them to the CNI\n"
	"  --gpu-driver NAME    the DRA driver whose claimed devices are GPUs (default\n"
	"                       " DEFAULT_GPU_DRV "; empty: none)\n"
	"\n"
	"DRA driver, the kubelet's side (doc/dra.md):\n"
	"  --dra                serve DRAPlugin (v1, v1beta1) and DRAResourceHealth\n"
	"                       (v1, v1alpha1: the prepared devices' health) on\n"
	"                       DIR/plugins/DRIVER/dra.sock and register it at\n"
	"                       DIR/plugins_registry/DRIVER-reg.sock; claims are read\n"
	"                       with --kubeconfig, their CDI specs go to --cdi-dir\n"
	"  --dra-driver NAME    the driver's name (default " HPN_DRA_DRIVER ")\n"
	"  --node-name NAME     this node, the pool's name in claims (default\n"
	"                       $NODE_NAME, else the host name)\n"
	"\n"
	"NRI, the runtime's plugin interface (doc/agent.md, \"NRI\"):\n"
	"  --nri[=SOCKET]       connect to the runtime's NRI socket (default\n"
	"                       " NRI_DEFAULT_SOCKET ") and give the containers of\n"
	"                       attached pods their RDMA devices, NCCL hints and\n"
	"                       RLIMIT_MEMLOCK, with no change to the pod\n"
	"  --nri-name NAME      the plugin's name (default " NRI_DEFAULT_NAME ")\n"
	"  --nri-index NN       its place among the runtime's plugins, 00-99\n"
	"                       (default " NRI_DEFAULT_INDEX ")\n"
	"\n"
	"Metrics, health and GC (doc/metrics.md):\n"
	"  --metrics-address ADDR:PORT  Prometheus metrics at http://ADDR:PORT/metrics\n"
	"                       (default 127.0.0.1:9467: loopback only; none: off;\n"
	"                       IPv6 as [ADDR]:PORT or ADDR:PORT, the port after the last ':')\n"
	"  --health-interval SEC  CHECK every journal's attachment, a batch per\n"
	"                       period (default 10; 0: off); a broken one makes its\n"
	"                       devices Unhealthy\n"
	"  --health-batch N     attachments checked per period at most (default 8)\n"
	"  --cri-socket PATH    the runtime's CRI socket GC asks for the live pod\n"
	"                       sandboxes (default /run/containerd/containerd.sock;\n"
	"                       none: no GC)\n"
	"  --gc-interval SEC    undo attachments of pods the runtime no longer has\n"
	"                       (default 60; 0: off)\n"
	"  --gc-grace SEC       never GC a journal younger than this (default 300)\n"
	"  --cni-path DIRS      where GC finds the IPAM plugin (default /opt/cni/bin)\n"
	"  --kubeconfig PATH    keep the plugin's kubeconfig there: the token of the\n"
	"                       plugin's own service account (TokenRequest), renewed\n"
	"                       at 80% of its lifetime; the agent's own calls use its\n"
	"                       pod's service account, in memory. With it, the pods of\n"
	"                       --node-name are watched and the plugin's pod lookup\n"
	"                       answered from that cache\n"
	"  --plugin-service-account [NS/]NAME  the plugin's (default " KC_PLUGIN_SA "\n"
	"                       in the pod's namespace)\n"
	"  --plugin-token-seconds SEC  its token's lifetime (default 3600)\n"
	"  --service-account DIR  the pod's token, ca.crt and namespace (default\n"
	"                       /var/run/secrets/kubernetes.io/serviceaccount)\n"
	"  --help, --version\n"
	"\n"
	"hpn-rdma-agent install|uninstall [OPTIONS]: put hpn-rdma on the node, or take\n"
	"it off; with --prefix or --destdir, keeping a manifest, into a node image too\n"
	"(hpn-rdma-agent install --help).\n"
	"\n"
	"Logs go to stderr, and to the entry's logFile when it has one. SIGTERM or\n"
	"SIGINT stop it cleanly (its sockets removed). GC moves NICs back to the\n"
	"host: it needs CAP_NET_ADMIN and CAP_SYS_ADMIN. See hpn-rdma-agent(8),\n"
	"doc/agent.md and doc/metrics.md.\n";

struct opts {
	const char *config_path;
	const char *lookup_path; /* NULL: the entry's agent.socket */
	const char *cdi_dir;	 /* NULL: the entry's agent.cdiDir; "": off */
	const char *cdi_hook;	 /* the hpn-rdma binary the specs name as their hook */
	const char *metrics_address;
	const char *gpu_resources, *gpu_driver;
	bool dra;
	const char *dra_driver, *node_name;
	const char *nri_socket, *nri_name, *nri_index; /* nri_socket NULL: no NRI */
	int poll_s;
	struct dp_opts dp;
	struct health_opts health;
	struct gc_opts gc;
	struct kc_watch kc;
};

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

static bool off(const char *s)
{
	return !s[0] || !strcmp(s, "none");
}

/* --name's value as an integer in [min, max], else a message and false. */
static bool number(const char *name, const char *s, int min, int max, const char *range, int *ret)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "hpn-rdma-agent: --%s is %s\n", name, range);
		return false;
	}
	*ret = (int)v;
	return true;
}

/* One option's value checked and stored: false (said why) when it is bad. */
static bool option(struct opts *o, int c, const char *name, const char *v)
{
	struct sockaddr_storage sa;
	unsigned int len;

	switch (c) {
	case 'p':
		return number(name, v, 1, 3600, "1-3600 s", &o->poll_s);
	case 'H':
		return number(name, v, 0, 86400, "0 (off) to 86400 s", &o->health.period_s);
	case 'B':
		return number(name, v, 1, 4096, "1 to 4096", &o->health.batch);
	case 'G':
		return number(name, v, 0, 86400, "0 (off) to 86400 s", &o->gc.period_s);
	case 'g':
		return number(name, v, 0, 86400, "0 to 86400 s", &o->gc.grace_s);
	case 'M':
		o->metrics_address = v;
		if (off(v) || metrics_parse_address(v, &sa, &len) == 0)
			return true;
		fprintf(stderr,
			"hpn-rdma-agent: --metrics-address \"%s\": %s; give ADDRESS:PORT "
			"(127.0.0.1:9467, [fd00::5]:9467, fd00::5:9467) or none\n",
			v, metrics_address_error(v));
		return false;
	case 'C':
		o->gc.cri_socket = v;
		if (off(v) || v[0] == '/')
			return true;
		fprintf(stderr, "hpn-rdma-agent: --cri-socket must be absolute (or none)\n");
		return false;
	case 'P':
		o->gc.cni_path = v;
		if (v[0] == '/')
			return true;
		fprintf(stderr,
			"hpn-rdma-agent: --cni-path is absolute directories, ':'-separated\n");
		return false;
	case 'c':
		o->config_path = v;
		return true;
	case 'k':
		o->dp.kubelet_dir = v;
		return true;
	case 'r':
		o->dp.resource = v;
		return true;
	case 'e':
		o->dp.endpoint = v;
		return true;
	case 'l':
		o->lookup_path = v;
		return true;
	case 'd':
		o->dp.dev_root = v;
		return true;
	case 'J':
		o->cdi_hook = v;
		if (!v[0] || (v[0] == '/' && strlen(v) < sizeof(((struct hpn_cdi_hook *)0)->path)))
			return true;
		fprintf(stderr, "hpn-rdma-agent: --cdi-hook must be an absolute path, or empty\n");
		return false;
	case 'I':
		o->cdi_dir = v;
		if (!v[0] || (v[0] == '/' && strlen(v) <= HPN_CDI_DIR_MAX && !strstr(v, "/../")))
			return true;
		fprintf(stderr,
			"hpn-rdma-agent: --cdi-dir must be absolute (at most %d bytes), or empty\n",
			HPN_CDI_DIR_MAX);
		return false;
	case 'U':
		o->gpu_resources = v;
		return true;
	case 'D':
		o->gpu_driver = v;
		return true;
	case 'K':
		o->kc.path = v;
		return true;
	case 'S':
		o->kc.sa_dir = v;
		return true;
	case 'A':
		o->kc.plugin_sa = v;
		return true;
	case 'Q': {
		int ttl;

		if (!number(name, v, KC_PLUGIN_TTL_MIN, KC_PLUGIN_TTL_MAX, "10 to 604800 s", &ttl))
			return false;
		o->kc.plugin_ttl = (unsigned)ttl;
		return true;
	}
	case 'R':
		o->dra = true;
		return true;
	case 'N':
		o->dra_driver = v;
		return true;
	case 'n':
		o->node_name = v;
		return true;
	case 'i':
		o->nri_socket = v[0] ? v : NRI_DEFAULT_SOCKET;
		if (o->nri_socket[0] == '/' &&
		    strlen(o->nri_socket) < sizeof(((struct sockaddr_un *)0)->sun_path))
			return true;
		fprintf(stderr, "hpn-rdma-agent: --nri must name an absolute socket path of at "
				"most 107 bytes\n");
		return false;
	case 'Y':
		o->nri_name = v;
		if (v[0] && strlen(v) <= 63 &&
		    strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(v))
			return true;
		fprintf(stderr, "hpn-rdma-agent: --nri-name is 1-63 of [a-z0-9-]\n");
		return false;
	case 'X':
		o->nri_index = v;
		if (strlen(v) == 2 && strspn(v, "0123456789") == 2)
			return true;
		fprintf(stderr, "hpn-rdma-agent: --nri-index is two digits, 00-99\n");
		return false;
	}
	return false;
}

/* "<domain>/<name>", as the kubelet wants extended resources; len bytes of res. */
static bool resource_name(const char *res, size_t len)
{
	char name[HPN_ALLOC_RESOURCE_MAX];
	const char *slash;

	if (len >= sizeof(name))
		return false;
	memcpy(name, res, len);
	name[len] = '\0';
	slash = strchr(name, '/');
	return slash && slash != name && slash[1] && !strchr(slash + 1, '/') &&
	       hpn_alloc_id_valid(slash + 1);
}

/* A DRA driver's name: a DNS subdomain (lower case letters, digits, '-', '.'). */
static bool driver_name(const char *s)
{
	size_t len = strlen(s);

	if (!len || len >= PODRES_DRIVER_MAX || s[0] == '.' || s[0] == '-' || s[len - 1] == '.' ||
	    s[len - 1] == '-')
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-.") == len;
}

/* --gpu-resource and --gpu-driver: -1 to go on, else the exit status. */
static int check_gpu_opts(const struct opts *o)
{
	size_t n = 0;

	for (const char *s = o->gpu_resources; *s;) {
		size_t len = strcspn(s, ",");

		if (len && (!resource_name(s, len) || ++n > PODRES_GPU_RESOURCES)) {
			fprintf(stderr,
				"hpn-rdma-agent: --gpu-resource \"%s\" is not up to %d "
				"<domain>/<name>, comma-separated\n",
				o->gpu_resources, PODRES_GPU_RESOURCES);
			return 2;
		}
		s += len + (s[len] == ',');
	}
	if (o->gpu_driver[0] && !driver_name(o->gpu_driver)) {
		fprintf(stderr, "hpn-rdma-agent: --gpu-driver \"%s\" is not a DNS subdomain\n",
			o->gpu_driver);
		return 2;
	}
	return -1;
}

/* --dra and its flags: -1 to go on, else the exit status. */
static int check_dra_opts(const struct opts *o)
{
	int r = check_gpu_opts(o);

	if (r >= 0 || !o->dra)
		return r;
	/* The API allows 63 for a driver's name, though a DNS subdomain may be longer. */
	if (!driver_name(o->dra_driver) || strlen(o->dra_driver) > 63) {
		fprintf(stderr,
			"hpn-rdma-agent: --dra-driver \"%s\" is not a DNS subdomain of at most "
			"63\n",
			o->dra_driver);
		return 2;
	}
	if (!o->node_name || !hpn_k8s_dns_subdomain(o->node_name)) {
		fprintf(stderr, "hpn-rdma-agent: --node-name \"%s\" is not a DNS subdomain\n",
			o->node_name ? o->node_name : "");
		return 2;
	}
	if (!o->kc.path) {
		fprintf(stderr, "hpn-rdma-agent: --dra reads claims with --kubeconfig: give it\n");
		return 2;
	}
	if (o->cdi_dir && !o->cdi_dir[0]) {
		fprintf(stderr, "hpn-rdma-agent: --dra needs CDI: --cdi-dir is empty\n");
		return 2;
	}
	return -1;
}

/* The flags together: -1 to go on, else the exit status. */
static int check_opts(const struct opts *o)
{
	const char *res = o->dp.resource;

	if (!o->config_path) {
		fprintf(stderr, "hpn-rdma-agent: --config is required\n\n%s", usage);
		return 2;
	}
	if (!resource_name(res, strlen(res))) {
		fprintf(stderr, "hpn-rdma-agent: --resource \"%s\" is not <domain>/<name>\n", res);
		return 2;
	}
	if (!hpn_valid_path_component(o->dp.endpoint) || !strcmp(o->dp.endpoint, "kubelet.sock")) {
		fprintf(stderr, "hpn-rdma-agent: --endpoint \"%s\" is not a file name of its own\n",
			o->dp.endpoint);
		return 2;
	}
	if (o->dp.kubelet_dir[0] != '/' || o->dp.dev_root[0] != '/' ||
	    strlen(o->dp.dev_root) > 200) {
		fprintf(stderr, "hpn-rdma-agent: --kubelet-dir and --dev-root must be absolute\n");
		return 2;
	}
	return check_dra_opts(o);
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "kubelet-dir", required_argument, NULL, 'k' },
		{ "resource", required_argument, NULL, 'r' },
		{ "endpoint", required_argument, NULL, 'e' },
		{ "lookup-socket", required_argument, NULL, 'l' },
		{ "poll-interval", required_argument, NULL, 'p' },
		{ "dev-root", required_argument, NULL, 'd' },
		{ "cdi-dir", required_argument, NULL, 'I' },
		{ "cdi-hook", required_argument, NULL, 'J' },
		{ "gpu-resource", required_argument, NULL, 'U' },
		{ "gpu-driver", required_argument, NULL, 'D' },
		{ "metrics-address", required_argument, NULL, 'M' },
		{ "health-interval", required_argument, NULL, 'H' },
		{ "health-batch", required_argument, NULL, 'B' },
		{ "cri-socket", required_argument, NULL, 'C' },
		{ "gc-interval", required_argument, NULL, 'G' },
		{ "gc-grace", required_argument, NULL, 'g' },
		{ "cni-path", required_argument, NULL, 'P' },
		{ "kubeconfig", required_argument, NULL, 'K' },
		{ "service-account", required_argument, NULL, 'S' },
		{ "plugin-service-account", required_argument, NULL, 'A' },
		{ "plugin-token-seconds", required_argument, NULL, 'Q' },
		{ "dra", no_argument, NULL, 'R' },
		{ "dra-driver", required_argument, NULL, 'N' },
		{ "node-name", required_argument, NULL, 'n' },
		{ "nri", optional_argument, NULL, 'i' },
		{ "nri-name", required_argument, NULL, 'Y' },
		{ "nri-index", required_argument, NULL, 'X' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	int c, li = 0;

	while ((c = getopt_long(argc, argv, "", opts, &li)) != -1) {
		if (c == 'h') {
			fputs(usage, stdout);
			return 0;
		}
		if (c == 'V') {
			printf("hpn-rdma-agent %s\n", HPN_VERSION);
			return 0;
		}
		if (c == '?') {
			fputs(usage, stderr);
			return 2;
		}
		if (!option(o, c, opts[li].name, optarg ? optarg : ""))
			return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "hpn-rdma-agent: unexpected arguments\n\n%s", usage);
		return 2;
	}
	return check_opts(o);
}

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

/* The lookup's DRA answer: the NICs of the driver's prepared claims for pod uid. */
static struct hpn_alloc *dra_pod_nics(void *ud, const char *uid)
{
	const struct agent *a = ud;

	return draclaims_pod_nics(dra_prepared(a->dra), a->dra_driver, uid);
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
	if (o->gc.period_s > 0 && !off(o->gc.cri_socket)) {
		r = gc_start(a->loop, a->rpc, &a->node, &o->gc, &a->gc);
		if (r < 0) {
			hpn_error("gc: %s", strerror(-r));
			return r;
		}
	} else {
		hpn_info("gc: off (--gc-interval 0 or --cri-socket none)");
	}
	if (off(o->metrics_address))
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
						  .kube = a->kube },
			      &a->dra, &err);
		if (r < 0)
			goto fail;
		a->dra_driver = o->dra_driver;
		lookup_dra(a->lookup, dra_pod_nics, a);
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
	struct opts o = {
		.poll_s = DEFAULT_POLL_S,
		.metrics_address = DEFAULT_METRICS,
		.gpu_resources = DEFAULT_GPU_RES,
		.gpu_driver = DEFAULT_GPU_DRV,
		.cdi_hook = DEFAULT_CDI_HOOK,
		.dp = { .kubelet_dir = DEFAULT_KUBELET,
			.resource = DEFAULT_RESOURCE,
			.endpoint = DEFAULT_ENDPOINT,
			.dev_root = "/dev" },
		.health = { .period_s = 10, .batch = 8 },
		.gc = { .cri_socket = DEFAULT_CRI,
			.cni_path = DEFAULT_CNI_PATH,
			.period_s = 60,
			.grace_s = 300 },
		.kc = { .sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount", .fd = -1 },
	};
	struct agent a = {
		.signals.fd = -1, .kc_events.fd = -1, .kc_timer.fd = -1, .kc_token.fd = -1
	};
	struct hpn_err err = { 0 };
	char host[256] = "";
	int r, rc = 1;

	/* A proof the health loop spawned (hpn_rdma_proofs_by_exec): nothing of the agent runs. */
	if (argc > 1 && !strcmp(argv[1], HPN_RDMA_PROOF_CMD))
		return hpn_rdma_proof_main(argc - 1, argv + 1);
	o.dra_driver = HPN_DRA_DRIVER;
	o.node_name = getenv("NODE_NAME");
	if ((!o.node_name || !o.node_name[0]) && gethostname(host, sizeof(host) - 1) == 0)
		o.node_name = host;
	if (argc > 1 && (!strcmp(argv[1], "install") || !strcmp(argv[1], "uninstall")))
		return agent_install_main(argc - 1, argv + 1);
	r = parse_args(argc, argv, &o);
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
