// SPDX-License-Identifier: Apache-2.0
/*
 * hpn-rdma-agent's flags: --help's text, the defaults, each flag's value
 * checked as it comes, then the flags together (opts.h). It says what is
 * wrong on stderr; main.c wires what they ask for.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "alloc.h"
#include "cdi.h"
#include "conf.h"
#include "draslice.h"
#include "metrics.h"
#include "nri.h"
#include "opts.h"
#include "pod.h"
#include "podresources.h"
#include "util.h"

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
	"                       comma-separated (default " DEFAULT_GPU_RES "; empty: none),\n"
	"                       and the devices of the claim the scheduler made for them\n"
	"                       (DRA behind the resource; with --kubeconfig); the lookup\n"
	"                       answers them to the CNI\n"
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
	"  --dra-taint-effect E  an unhealthy NIC stays in the ResourceSlices with the\n"
	"                       taint DRIVER/unhealthy of effect E: NoSchedule (the\n"
	"                       default), NoExecute (its pods evicted) or None\n"
	"  --dra-shares         publish each RoCE NIC twice: as itself, and as\n"
	"                       DEVICE-shared, which up to N pods share (a macvlan\n"
	"                       child each; N from its GID table), one excluding the\n"
	"                       other; needs --dra and the RDMA netns mode shared\n"
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
bool opts_off(const char *s)
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
		if (opts_off(v) || metrics_parse_address(v, &sa, &len) == 0)
			return true;
		fprintf(stderr,
			"hpn-rdma-agent: --metrics-address \"%s\": %s; give ADDRESS:PORT "
			"(127.0.0.1:9467, [fd00::5]:9467, fd00::5:9467) or none\n",
			v, metrics_address_error(v));
		return false;
	case 'C':
		o->gc.cri_socket = v;
		if (opts_off(v) || v[0] == '/')
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
	case 'W':
		o->dra_shares = true;
		return true;
	case 'N':
		o->dra_driver = v;
		return true;
	case 'T':
		o->dra_taint_effect = v;
		if (hpn_dra_taint_effect_valid(v))
			return true;
		fprintf(stderr,
			"hpn-rdma-agent: --dra-taint-effect is NoSchedule, NoExecute or None\n");
		return false;
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

	if (r >= 0)
		return r;
	if (o->dra_shares && !o->dra) {
		fprintf(stderr, "hpn-rdma-agent: --dra-shares needs --dra\n");
		return 2;
	}
	if (!o->dra)
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

/* What a flag not given means (--help says the same). */
static void defaults(struct opts *o)
{
	*o = (struct opts){
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
	o->dra_driver = HPN_DRA_DRIVER;
	o->node_name = getenv("NODE_NAME");
	if ((!o->node_name || !o->node_name[0]) && gethostname(o->host, sizeof(o->host) - 1) == 0)
		o->node_name = o->host;
}

int opts_parse(int argc, char **argv, struct opts *o)
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
		{ "dra-taint-effect", required_argument, NULL, 'T' },
		{ "dra-shares", no_argument, NULL, 'W' },
		{ "node-name", required_argument, NULL, 'n' },
		{ "nri", optional_argument, NULL, 'i' },
		{ "nri-name", required_argument, NULL, 'Y' },
		{ "nri-index", required_argument, NULL, 'X' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	int c, li = 0;

	defaults(o);

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
