// SPDX-License-Identifier: Apache-2.0
/*
 * hpn-rdma-agent: the node daemon beside the CNI plugin. A kubelet device
 * plugin for the pool's NICs, and the socket the CNI asks which of them the
 * kubelet gave a pod (doc/agent.md). One event loop owns the process: epoll
 * over a signalfd, timerfds, inotify, an rtnetlink link-event socket, the
 * lookup socket and the eventfd through which gRPC's completions arrive.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "install.h"
#include "log.h"
#include "nl.h"
#include "util.h"

#define CONF_MAX	 (1u << 20)
#define DEFAULT_RESOURCE "rdma/hpn"
#define DEFAULT_ENDPOINT "hpn-rdma.sock"
#define DEFAULT_KUBELET	 "/var/lib/kubelet"
#define DEFAULT_POLL_S	 10
#define STOP_GRACE_S	 6

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
	"\n"
	"Metrics, health and GC (doc/metrics.md):\n"
	"  --metrics-address ADDR:PORT  Prometheus metrics at http://ADDR:PORT/metrics\n"
	"                       (default 127.0.0.1:9467: loopback only; none: off)\n"
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
	"  --kubeconfig PATH    keep the plugin's kubeconfig there, from the pod's\n"
	"                       service account, rewritten when its token rotates\n"
	"  --service-account DIR  its token and ca.crt (default\n"
	"                       /var/run/secrets/kubernetes.io/serviceaccount)\n"
	"  --help, --version\n"
	"\n"
	"hpn-rdma-agent install|uninstall [OPTIONS]: put hpn-rdma on the node, or take\n"
	"it off (hpn-rdma-agent install --help).\n"
	"\n"
	"Logs go to stderr, and to the entry's logFile when it has one. SIGTERM or\n"
	"SIGINT stop it cleanly (its sockets removed). GC moves NICs back to the\n"
	"host: it needs CAP_NET_ADMIN and CAP_SYS_ADMIN. See hpn-rdma-agent(8),\n"
	"doc/agent.md and doc/metrics.md.\n";

/* epoll tags: the first int of what data.ptr points at. */
enum { TAG_CONN = 1, TAG_SIGNAL, TAG_TIMER, TAG_SWEEP, TAG_INOTIFY, TAG_LINK, TAG_RPC, TAG_LISTEN };
struct tag {
	int type;
};
static struct tag tags[] = {
	[TAG_SIGNAL] = { TAG_SIGNAL },	 [TAG_TIMER] = { TAG_TIMER }, [TAG_SWEEP] = { TAG_SWEEP },
	[TAG_INOTIFY] = { TAG_INOTIFY }, [TAG_LINK] = { TAG_LINK },   [TAG_RPC] = { TAG_RPC },
	[TAG_LISTEN] = { TAG_LISTEN }
};
/* The kubeconfig watch (install.h), numbered apart from the tags above. */
enum { TAG_KUBECONFIG = 100 };
static struct tag kc_tag = { TAG_KUBECONFIG };

int agent_watch_fd(struct agent *a, int fd, void *ptr)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = ptr };

	return epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* The config's hpn-rdma entry, parsed by lib/conf.c as an ADD would see it. */
static int load_conf(const char *path, struct hpn_conf *conf, char **ret_buf, struct hpn_err *err)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *entry_text;
	size_t len;
	int r;

	if (fd < 0)
		return hpn_err_set(err, HPN_E_IO, errno, "open %s: %s", path, strerror(errno));
	r = hpn_read_all(fd, CONF_MAX, &text, &len);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IO, -r, "read %s: %s", path, strerror(-r));
	r = hpn_conf_parse_text(path, text, len, HPN_CMD_ADD, conf, &entry_text, err);
	if (r < 0)
		return r;
	if (conf->selector != HPN_SEL_MATCH) {
		hpn_conf_free(conf);
		free(entry_text);
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "%s: the hpn-rdma entry selects no pool (\"match\"): the "
				   "agent lists a pool's NICs",
				   path);
	}
	*ret_buf = entry_text;
	return 0;
}

static void rescan(struct agent *a)
{
	struct hpn_err err = { 0 };
	int r = agent_devs_scan(&a->devs, &a->conf, a->host, &err);

	if (r < 0)
		hpn_warn("scanning the pool: %s", err.msg[0] ? err.msg : strerror(-r));
	else if (r > 0)
		kubelet_broadcast(a);
}

/* The config file changed: a new pool is a new device list, and registered again. */
static void reload(struct agent *a)
{
	struct hpn_conf conf;
	struct hpn_err err = { 0 };
	char *buf = NULL;

	if (load_conf(a->config_path, &conf, &buf, &err) < 0) {
		hpn_warn("config change ignored: %s", err.msg);
		return;
	}
	hpn_conf_free(&a->conf);
	free(a->conf_buf);
	a->conf = conf;
	a->conf_buf = buf;
	memset(&a->devs, 0, sizeof(a->devs));
	hpn_info("config %s reloaded: the pool's devices listed anew", a->config_path);
	rescan(a);
	kubelet_restart(a);
}

static void on_inotify(struct agent *a, int fd, int dp_wd, int conf_wd, const char *conf_name)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool kubelet_new = false, ours_gone = false, conf_changed = false;
	const char *ours = strrchr(a->sock_path, '/') + 1;
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;

			p += sizeof(*ev) + ev->len;
			if (!ev->len)
				continue;
			if (ev->wd == dp_wd && !strcmp(ev->name, "kubelet.sock") &&
			    (ev->mask & (IN_CREATE | IN_MOVED_TO)))
				kubelet_new = true;
			if (ev->wd == dp_wd && !strcmp(ev->name, ours) &&
			    (ev->mask & (IN_DELETE | IN_MOVED_FROM)) && !a->srv_stopping)
				ours_gone = true;
			if (ev->wd == conf_wd && !strcmp(ev->name, conf_name) &&
			    (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)))
				conf_changed = true;
		}
	}
	if (a->quitting)
		return;
	if (conf_changed) {
		reload(a);
		return;
	}
	/* Our own restart unlinks the old socket: a new one in its place is ours. */
	if (ours_gone && access(a->sock_path, F_OK) == 0)
		ours_gone = false;
	/*
	 * A restarting kubelet sweeps device-plugins/ (our socket with it) and
	 * makes kubelet.sock anew; either one means: serve again, register again.
	 */
	if (a->srv_stopping && (ours_gone || kubelet_new)) {
		a->restart_wanted = true; /* already serving anew */
	} else if (ours_gone || (kubelet_new && access(a->sock_path, F_OK) < 0)) {
		hpn_info("%s: the kubelet restarted; serving anew and registering again",
			 ours_gone ? "our socket was removed" : "kubelet.sock is new");
		kubelet_restart(a);
	} else if (kubelet_new) {
		hpn_info("kubelet.sock is new: registering again");
		a->registered = false;
		kubelet_register(a);
	}
}

static int link_events(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = RTMGRP_LINK };
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -errno;
	}
	return fd;
}

static void drain(int fd)
{
	char buf[8192];

	while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

static int arm(int tfd, int first_ms, int every_ms)
{
	struct itimerspec it = {
		.it_value = { first_ms / 1000, (first_ms % 1000) * 1000000L },
		.it_interval = { every_ms / 1000, (every_ms % 1000) * 1000000L },
	};

	return timerfd_settime(tfd, 0, &it, NULL);
}

static int parse_args(int argc, char **argv, struct agent *a, const char **lookup,
		      struct kc_watch *kc)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "kubelet-dir", required_argument, NULL, 'k' },
		{ "resource", required_argument, NULL, 'r' },
		{ "endpoint", required_argument, NULL, 'e' },
		{ "lookup-socket", required_argument, NULL, 'l' },
		{ "poll-interval", required_argument, NULL, 'p' },
		{ "dev-root", required_argument, NULL, 'd' },
		/* ext.c's: metrics, health, GC */
		{ "metrics-address", required_argument, NULL, 'X' },
		{ "health-interval", required_argument, NULL, 'X' },
		{ "health-batch", required_argument, NULL, 'X' },
		{ "cri-socket", required_argument, NULL, 'X' },
		{ "gc-interval", required_argument, NULL, 'X' },
		{ "gc-grace", required_argument, NULL, 'X' },
		{ "cni-path", required_argument, NULL, 'X' },
		{ "kubeconfig", required_argument, NULL, 'K' },
		{ "service-account", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	int c, li = 0;

	ext_defaults(&a->ext.opts);
	a->kubelet_dir = DEFAULT_KUBELET;
	a->resource = DEFAULT_RESOURCE;
	a->endpoint = DEFAULT_ENDPOINT;
	a->poll_s = DEFAULT_POLL_S;
	a->dev_root = "/dev";
	while ((c = getopt_long(argc, argv, "", opts, &li)) != -1) {
		switch (c) {
		case 'X':
			if (ext_option(&a->ext.opts, opts[li].name, optarg))
				return 2;
			break;
		case 'c':
			a->config_path = optarg;
			break;
		case 'k':
			a->kubelet_dir = optarg;
			break;
		case 'r':
			a->resource = optarg;
			break;
		case 'e':
			a->endpoint = optarg;
			break;
		case 'l':
			*lookup = optarg;
			break;
		case 'd':
			a->dev_root = optarg;
			break;
		case 'K':
			kc->path = optarg;
			break;
		case 'S':
			kc->sa_dir = optarg;
			break;
		case 'p': {
			char *end;
			long v = strtol(optarg, &end, 10);

			a->poll_s = *end || v < 1 || v > 3600 ? 0 : (int)v;
			if (!a->poll_s) {
				fprintf(stderr, "hpn-rdma-agent: --poll-interval is 1-3600 s\n");
				return 2;
			}
			break;
		}
		case 'h':
			fputs(usage, stdout);
			return 0;
		case 'V':
			printf("hpn-rdma-agent %s\n", HPN_VERSION);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (optind < argc || !a->config_path) {
		fprintf(stderr, "hpn-rdma-agent: %s\n\n%s",
			optind < argc ? "unexpected arguments" : "--config is required", usage);
		return 2;
	}
	/* "<domain>/<name>", as the kubelet wants extended resources. */
	{
		const char *slash = strchr(a->resource, '/');

		if (!slash || slash == a->resource || !slash[1] || strchr(slash + 1, '/') ||
		    strlen(a->resource) >= HPN_ALLOC_RESOURCE_MAX ||
		    !hpn_alloc_id_valid(slash + 1)) {
			fprintf(stderr,
				"hpn-rdma-agent: --resource \"%s\" is not <domain>/<name>\n",
				a->resource);
			return 2;
		}
	}
	if (!hpn_valid_path_component(a->endpoint) || !strcmp(a->endpoint, "kubelet.sock")) {
		fprintf(stderr, "hpn-rdma-agent: --endpoint \"%s\" is not a file name of its own\n",
			a->endpoint);
		return 2;
	}
	if (a->kubelet_dir[0] != '/' || a->dev_root[0] != '/' || strlen(a->dev_root) > 200) {
		fprintf(stderr, "hpn-rdma-agent: --kubelet-dir and --dev-root must be absolute\n");
		return 2;
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct agent a = { .lookup_fd = -1, .epfd = -1 };
	struct kc_watch kc = { .sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount",
			       .fd = -1 };
	struct hpn_err err = { 0 };
	const char *lookup = NULL, *conf_name;
	char conf_dir[PATH_MAX];
	int r, sfd = -1, tfd = -1, swfd = -1, ifd = -1, lfd = -1, rfd = -1, dp_wd = -1,
	       conf_wd = -1, rc = 1;
	sigset_t mask;
	time_t stop_at = 0;

	if (argc > 1 && (!strcmp(argv[1], "install") || !strcmp(argv[1], "uninstall")))
		return agent_install_main(argc - 1, argv + 1);
	r = parse_args(argc, argv, &a, &lookup, &kc);
	if (r >= 0)
		return r;
	hpn_log_init("agent", NULL);
	hpn_log_stderr(HPN_LOG_INFO);
	umask(0077); /* every socket and directory it makes: root only */
	if (load_conf(a.config_path, &a.conf, &a.conf_buf, &err) < 0) {
		hpn_error("%s", err.msg);
		return 1;
	}
	if (a.conf.log_file && hpn_log_open(a.conf.log_file, a.conf.log_level) < 0)
		hpn_warn("cannot open logFile %s", a.conf.log_file);
	/* Its own copy: a reloaded config replaces conf (a new socket path needs a restart). */
	if (!lookup)
		lookup = a.conf.agent.socket ? a.conf.agent.socket : HPN_DEFAULT_AGENT_SOCKET;
	a.lookup_path = strdup(lookup);
	if (!a.lookup_path) {
		hpn_error("out of memory");
		goto out;
	}
	if (hpn_snprintf(a.dp_dir, sizeof(a.dp_dir), "%s/device-plugins", a.kubelet_dir) < 0 ||
	    hpn_snprintf(a.sock_path, sizeof(a.sock_path), "%s/%s", a.dp_dir, a.endpoint) < 0 ||
	    hpn_snprintf(a.kubelet_sock, sizeof(a.kubelet_sock), "%s/kubelet.sock", a.dp_dir) < 0 ||
	    hpn_snprintf(a.podres_sock, sizeof(a.podres_sock), "%s/pod-resources/kubelet.sock",
			 a.kubelet_dir) < 0 ||
	    strlen(a.sock_path) >= 108) {
		hpn_error("--kubelet-dir %s is too long for a unix socket path", a.kubelet_dir);
		goto out;
	}
	snprintf(conf_dir, sizeof(conf_dir), "%s", a.config_path);
	conf_name = strrchr(a.config_path, '/') ? strrchr(a.config_path, '/') + 1 : a.config_path;
	if (strrchr(conf_dir, '/'))
		*strrchr(conf_dir, '/') = '\0';
	else
		snprintf(conf_dir, sizeof(conf_dir), ".");
	if (hpn_mkdir_p(a.dp_dir, 0750) < 0) {
		hpn_error("create %s: %s", a.dp_dir, strerror(errno));
		goto out;
	}

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGPIPE);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	{
		/* lib/store.c times the state lock with SIGALRM: for the worker thread alone. */
		sigset_t alarm;

		sigemptyset(&alarm);
		sigaddset(&alarm, SIGALRM);
		sigprocmask(SIG_BLOCK, &alarm, NULL);
	}
	/* Read once, before any thread: lib caches both. */
	hpn_boot_id();
	{
		long long btime;

		hpn_boot_time(&btime);
	}
	a.epfd = epoll_create1(EPOLL_CLOEXEC);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	swfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	lfd = link_events();
	r = hpn_nl_open(NETLINK_ROUTE, &a.host);
	if (a.epfd < 0 || sfd < 0 || tfd < 0 || swfd < 0 || ifd < 0 || lfd < 0 || r < 0) {
		hpn_error("event loop setup: %s", strerror(errno ? errno : -r));
		goto out;
	}
	dp_wd = inotify_add_watch(ifd, a.dp_dir,
				  IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM);
	conf_wd = inotify_add_watch(ifd, conf_dir, IN_CLOSE_WRITE | IN_MOVED_TO);
	if (dp_wd < 0 || conf_wd < 0) {
		hpn_error("inotify on %s and %s: %s", a.dp_dir, conf_dir, strerror(errno));
		goto out;
	}
	r = rpc_open(&a.rpc, &rfd);
	if (r < 0) {
		hpn_error("gRPC: %s", strerror(-r));
		goto out;
	}
	r = lookup_listen(&a);
	if (r < 0) {
		hpn_error("lookup socket %s: %s", a.lookup_path, strerror(-r));
		goto out;
	}
	if (agent_watch_fd(&a, sfd, &tags[TAG_SIGNAL]) < 0 ||
	    agent_watch_fd(&a, tfd, &tags[TAG_TIMER]) < 0 ||
	    agent_watch_fd(&a, swfd, &tags[TAG_SWEEP]) < 0 ||
	    agent_watch_fd(&a, ifd, &tags[TAG_INOTIFY]) < 0 ||
	    agent_watch_fd(&a, lfd, &tags[TAG_LINK]) < 0 ||
	    agent_watch_fd(&a, rfd, &tags[TAG_RPC]) < 0 ||
	    agent_watch_fd(&a, a.lookup_fd, &tags[TAG_LISTEN]) < 0) {
		hpn_error("epoll: %s", strerror(errno));
		goto out;
	}
	if (kc.path && (kc_watch_start(&kc, &err) < 0 || agent_watch_fd(&a, kc.fd, &kc_tag) < 0)) {
		hpn_error("kubeconfig %s: %s", kc.path, err.msg[0] ? err.msg : strerror(errno));
		goto out;
	}
	arm(tfd, a.poll_s * 1000, a.poll_s * 1000);
	rescan(&a);
	hpn_info("hpn-rdma-agent %s: pool of network %s, %zu devices, resource %s", HPN_VERSION,
		 a.conf.name, a.devs.n, a.resource);
	if (kubelet_start(&a) < 0)
		goto out;
	if (ext_start(&a) < 0)
		goto out;

	for (;;) {
		struct epoll_event evs[16];
		bool links = false;
		int n;

		if (a.quitting && !a.srv && rpc_busy(a.rpc) == 0)
			break;
		if (a.quitting && time(NULL) >= stop_at) {
			hpn_warn("calls still in flight after %d s: stopping anyway", STOP_GRACE_S);
			break;
		}
		n = epoll_wait(a.epfd, evs, HPN_ARRAY_SIZE(evs), a.quitting ? 200 : -1);
		if (n < 0 && errno != EINTR) {
			hpn_error("epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			struct tag *t = evs[i].data.ptr;
			struct signalfd_siginfo si;
			uint64_t ticks;

			switch (t->type) {
			case TAG_CONN:
				lookup_io(&a, (struct lookup_conn *)t);
				break;
			case TAG_LISTEN:
				lookup_accept(&a);
				arm(swfd, 500, 500);
				break;
			case TAG_SWEEP:
				if (read(swfd, &ticks, sizeof(ticks)) < 0)
					break;
				if (!lookup_sweep(&a))
					arm(swfd, 0, 0);
				break;
			case TAG_RPC:
				rpc_dispatch(a.rpc);
				break;
			case TAG_LINK:
				drain(lfd);
				links = true;
				break;
			case TAG_TIMER:
				if (read(tfd, &ticks, sizeof(ticks)) < 0)
					break;
				links = true;
				kc_watch_event(&kc); /* besides inotify: a watch can miss a swap */
				if (!a.registered)
					kubelet_register(&a);
				break;
			case TAG_KUBECONFIG:
				kc_watch_event(&kc);
				break;
			case TAG_INOTIFY:
				on_inotify(&a, ifd, dp_wd, conf_wd, conf_name);
				break;
			case AGENT_TAG_EXT:
				((struct agent_fd *)t)->fn(&a, (struct agent_fd *)t);
				break;
			case TAG_SIGNAL:
				while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
					if (si.ssi_signo == SIGPIPE || a.quitting)
						continue;
					hpn_info("signal %u: stopping", si.ssi_signo);
					a.quitting = true;
					stop_at = time(NULL) + STOP_GRACE_S;
					kubelet_stop(&a);
					lookup_close_all(&a);
					ext_stop(&a);
				}
				break;
			}
		}
		if (links && !a.quitting)
			rescan(&a);
	}
	rc = a.srv ? 1 : 0;
	hpn_info("stopped");
out:
	ext_free(&a);
	lookup_close_all(&a);
	if (a.rpc && !a.srv && rpc_busy(a.rpc) == 0) {
		rpc_close(a.rpc);
	} else if (a.srv) {
		/* Stopping anyway: the socket at least must go. */
		unlink(a.sock_path);
	}
	for (int *fd = (int[]){ sfd, tfd, swfd, ifd, lfd, a.epfd }, i = 0; i < 6; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	kc_watch_stop(&kc);
	hpn_nl_close(a.host);
	hpn_conf_free(&a.conf);
	free(a.conf_buf);
	free((char *)a.lookup_path);
	hpn_log_close();
	return rc;
}
