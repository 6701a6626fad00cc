// SPDX-License-Identifier: Apache-2.0
/*
 * The node as the agent sees it (node.h): the config, reloaded when its file
 * changes, and the pool's devices, rescanned on rtnetlink link events and
 * every poll period.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <unistd.h>

#include "exposition.h"
#include "log.h"
#include "nl.h"
#include "node.h"
#include "util.h"

#define CONF_MAX (1u << 20)

/* The config's hpn-rdma entry, parsed by lib/conf.c as an ADD would see it. */
static int load_conf(const char *path, struct hpn_conf *conf, char **ret_text, struct hpn_err *err)
{
	_cleanup_free_ char *text = NULL;
	char *entry_text;
	size_t len;
	int r = hpn_read_file(path, CONF_MAX, &text, &len, err);

	if (r < 0)
		return r;
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
	*ret_text = entry_text;
	return 0;
}

int node_load(struct node *n, const char *path, struct hpn_err *err)
{
	const char *slash = strrchr(path, '/');
	int r = load_conf(path, &n->conf, &n->conf_text, err);

	if (r < 0)
		return r;
	n->path = path;
	n->name = slash ? slash + 1 : path;
	if (!slash)
		snprintf(n->dir, sizeof(n->dir), ".");
	else if (hpn_snprintf(n->dir, sizeof(n->dir), "%.*s", (int)(slash - path), path) < 0)
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG, "%s: path too long",
				   path);
	return 0;
}

static void scan(void *ud)
{
	struct node *n = ud;
	struct hpn_err err = { 0 };
	double t0 = hpn_mono_s(), t1;
	int r;

	if (loop_exiting(n->loop))
		return;
	n->scans++;
	r = agent_devs_scan(&n->devs, &n->conf, n->host, &err);
	t1 = hpn_mono_s();
	if (r < 0)
		hpn_warn("scanning the pool: %s", err.msg[0] ? err.msg : strerror(-r));
	else if (r > 0)
		node_devices_changed(n);
	if (r >= 0 && n->on_scan)
		n->on_scan(n->ud);
	hpn_debug("scan: %zu devices in %.1f ms, %.1f ms more for the services", n->devs.n,
		  (t1 - t0) * 1e3, (hpn_mono_s() - t1) * 1e3);
}

void node_metrics(struct sbuf *b, void *ud)
{
	const struct node *n = ud;

	expo_counter(b, "hpn_rdma_node_scans_total",
		     "Scans of the pool: at start, after link events and config reloads, and every "
		     "--poll-interval.",
		     n->scans);
}

void node_rescan(struct node *n)
{
	loop_defer(n->loop, &n->rescan);
}

void node_devices_changed(struct node *n)
{
	if (n->on_devices)
		n->on_devices(n->ud);
}

/* The config file changed: a new pool is a new device list, and registered again. */
static void reload(struct node *n)
{
	struct hpn_conf conf;
	struct hpn_err err = { 0 };
	char *text = NULL;

	if (load_conf(n->path, &conf, &text, &err) < 0) {
		hpn_warn("config change ignored: %s", err.msg);
		return;
	}
	hpn_conf_free(&n->conf);
	free(n->conf_text);
	n->conf = conf;
	n->conf_text = text;
	memset(&n->devs, 0, sizeof(n->devs));
	hpn_info("config %s reloaded: the pool's devices listed anew", n->path);
	scan(n);
	if (n->on_reload)
		n->on_reload(n->ud);
}

static void on_inotify(struct loop_src *s)
{
	struct node *n = s->ud;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool changed = false;
	ssize_t len;

	while ((len = read(s->fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + len;) {
			struct inotify_event *ev = (struct inotify_event *)p;

			p += sizeof(*ev) + ev->len;
			changed |= ev->len && !strcmp(ev->name, n->name);
		}
	}
	if (changed && !loop_exiting(n->loop))
		reload(n);
}

static void on_links(struct loop_src *s)
{
	char buf[8192];

	while (recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
	node_rescan(s->ud);
}

static void on_poll(struct loop_src *s)
{
	node_rescan(s->ud);
}

static int link_events(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = RTMGRP_LINK };
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

int node_start(struct node *n, struct loop *l, int poll_s, struct hpn_err *err)
{
	int ifd, lfd, r;

	n->loop = l;
	n->rescan = (struct loop_defer){ .fn = scan, .ud = n };
	n->inotify.fd = n->links.fd = n->poll.fd = -1;
	r = hpn_nl_open(NETLINK_ROUTE, &n->host);
	if (r < 0)
		return hpn_err_set(err, HPN_E_INTERNAL, -r, "rtnetlink: %s", strerror(-r));
	lfd = link_events();
	if (lfd < 0 || (r = loop_add(l, &n->links, lfd, on_links, n)) < 0)
		return hpn_err_set(err, HPN_E_INTERNAL, lfd < 0 ? -lfd : -r, "link events: %s",
				   strerror(lfd < 0 ? -lfd : -r));
	ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (ifd < 0 || loop_add(l, &n->inotify, ifd, on_inotify, n) < 0 ||
	    inotify_add_watch(n->inotify.fd, n->dir, IN_CLOSE_WRITE | IN_MOVED_TO) < 0)
		return hpn_err_set(err, HPN_E_INTERNAL, errno, "inotify on %s: %s", n->dir,
				   strerror(errno));
	r = loop_timer(l, &n->poll, poll_s * 1000, poll_s * 1000, on_poll, n);
	if (r < 0)
		return hpn_err_set(err, HPN_E_INTERNAL, -r, "timer: %s", strerror(-r));
	scan(n);
	return 0;
}

void node_free(struct node *n)
{
	loop_close(&n->inotify);
	loop_close(&n->links);
	loop_close(&n->poll);
	hpn_nl_close(n->host);
	n->host = NULL;
	hpn_conf_free(&n->conf);
	free(n->conf_text);
	n->conf_text = NULL;
}
