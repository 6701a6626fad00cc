// SPDX-License-Identifier: Apache-2.0
/*
 * The DRA driver's Registration for the kubelet's plugin watcher
 * (draregister.h), on the loop, through rpc.c like the DRAPlugin service.
 */
#include "draregister.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "pluginregistration.pb-c.h"
#include "rpc.h"
#include "util.h"

#define REGISTRY_DIR "plugins_registry"
#define TYPE_DRA     "DRAPlugin"
#define WATCH_MASK   (IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF)

struct drareg {
	struct rpc *rpc;
	char *driver, *endpoint;
	char dir[PATH_MAX], sock[PATH_MAX];
	struct rpc_server *srv;
	bool stopping, again, quitting, registered;
	struct loop_src inotify;
};

static void get_info(struct rpc_call *c, const uint8_t *buf, size_t len, void *ud)
{
	struct drareg *g = ud;
	Pluginregistration__InfoRequest *req =
		pluginregistration__info_request__unpack(NULL, len, buf);
	Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
	/*
	 * The services on the endpoint, "<package>.<service>". A kubelet takes
	 * the first DRAPlugin it knows and passes over what it does not know
	 * (1.34, 1.35); 1.37 opens the health stream of the newest
	 * DRAResourceHealth listed, and only then. 1.36 opens v1alpha1's on
	 * every driver, listed or not.
	 */
	static char *versions[] = { "v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
				    "v1alpha1.DRAResourceHealth" };

	if (!req) {
		rpc_fail(c, RPC_INVALID_ARGUMENT, "the request is not an InfoRequest");
		return;
	}
	pluginregistration__info_request__free_unpacked(req, NULL);
	info.type = TYPE_DRA;
	info.name = g->driver;
	info.endpoint = g->endpoint;
	info.n_supported_versions = HPN_ARRAY_SIZE(versions);
	info.supported_versions = versions;
	rpc_reply_msg(c, (const ProtobufCMessage *)&info);
}

static void restart(struct drareg *g);

static void notify(struct rpc_call *c, const uint8_t *buf, size_t len, void *ud)
{
	struct drareg *g = ud;
	Pluginregistration__RegistrationStatus *st =
		pluginregistration__registration_status__unpack(NULL, len, buf);
	Pluginregistration__RegistrationStatusResponse resp =
		PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
	bool ok;

	if (!st) {
		rpc_fail(c, RPC_INVALID_ARGUMENT, "the request is not a RegistrationStatus");
		return;
	}
	ok = st->plugin_registered;
	g->registered = ok;
	if (ok)
		hpn_info("DRA: the kubelet registered driver %s (%s)", g->driver, g->endpoint);
	else
		hpn_warn("DRA: the kubelet did not register driver %s: %s; its registration "
			 "socket is made anew for the kubelet to try again",
			 g->driver, st->error && st->error[0] ? st->error : "no reason given");
	pluginregistration__registration_status__free_unpacked(st, NULL);
	rpc_reply_msg(c, (const ProtobufCMessage *)&resp);
	if (!ok)
		restart(g);
}

static const struct rpc_method methods[] = {
	{ "/pluginregistration.Registration/GetInfo", false, get_info },
	{ "/pluginregistration.Registration/NotifyRegistrationStatus", false, notify },
};

static int serve(struct drareg *g)
{
	int r;

	if (g->quitting)
		return 0;
	if (hpn_mkdir_p(g->dir, 0750) < 0)
		return -errno;
	r = rpc_server_start(g->rpc, g->sock, methods, HPN_ARRAY_SIZE(methods), g, &g->srv);
	if (r >= 0)
		hpn_info("DRA: registration for the kubelet's plugin watcher on %s", g->sock);
	return r;
}

static void stopped(void *ud)
{
	struct drareg *g = ud;

	g->srv = NULL;
	g->stopping = false;
	if (g->again && !g->quitting) {
		int r;

		g->again = false;
		r = serve(g);
		if (r < 0)
			hpn_error("DRA: cannot serve %s: %s", g->sock, strerror(-r));
	}
}

/* The socket anew: the kubelet's plugin watcher sees a new file and dials it again. */
static void restart(struct drareg *g)
{
	if (g->quitting)
		return;
	g->registered = false; /* until the kubelet registers the new socket */
	g->again = true;
	if (g->stopping)
		return;
	if (!g->srv) {
		stopped(g);
		return;
	}
	g->stopping = true;
	rpc_server_stop(g->srv, stopped, g);
}

/* plugins_registry: our socket removed (a kubelet's cleanup, a wiped directory): serve anew. */
static void on_inotify(struct loop_src *s)
{
	struct drareg *g = s->ud;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	const char *ours = strrchr(g->sock, '/') + 1;
	bool gone = false;
	ssize_t n;

	while ((n = read(s->fd, buf, sizeof(buf))) > 0)
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			p += sizeof(*ev) + ev->len;
			gone |= (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) ||
				(ev->len && !strcmp(ev->name, ours) &&
				 (ev->mask & (IN_DELETE | IN_MOVED_FROM)));
		}
	if (!gone || g->quitting || g->stopping || access(g->sock, F_OK) == 0)
		return;
	hpn_info("DRA: %s was removed: serving it anew", g->sock);
	restart(g);
	if (s->fd >= 0 && hpn_mkdir_p(g->dir, 0750) == 0)
		inotify_add_watch(s->fd, g->dir, WATCH_MASK);
}

int drareg_start(struct loop *l, struct rpc *rpc, const char *kubelet_dir, const char *driver,
		 const char *endpoint, struct drareg **ret, struct hpn_err *err)
{
	struct drareg *g = calloc(1, sizeof(*g));
	int fd, r;

	if (!g)
		return hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
	g->rpc = rpc;
	g->inotify.fd = -1;
	g->driver = strdup(driver);
	g->endpoint = strdup(endpoint);
	if (!g->driver || !g->endpoint) {
		r = hpn_err_set(err, HPN_E_INTERNAL, ENOMEM, "out of memory");
		goto fail;
	}
	if (hpn_snprintf(g->dir, sizeof(g->dir), "%s/" REGISTRY_DIR, kubelet_dir) < 0 ||
	    hpn_snprintf(g->sock, sizeof(g->sock), "%s/%s-reg.sock", g->dir, driver) < 0 ||
	    strlen(g->sock) >= 108) {
		r = hpn_err_set(err, HPN_E_INVALID_CONFIG, ENAMETOOLONG,
				"--kubelet-dir %s with driver %s is too long for a unix socket",
				kubelet_dir, driver);
		goto fail;
	}
	if (hpn_mkdir_p(g->dir, 0750) < 0) {
		r = hpn_err_set(err, HPN_E_IO, errno, "DRA: create %s: %s", g->dir,
				strerror(errno));
		goto fail;
	}
	fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (fd < 0 || loop_add(l, &g->inotify, fd, on_inotify, g) < 0 ||
	    inotify_add_watch(g->inotify.fd, g->dir, WATCH_MASK) < 0) {
		r = hpn_err_set(err, HPN_E_INTERNAL, errno, "inotify on %s: %s", g->dir,
				strerror(errno));
		goto fail;
	}
	r = serve(g);
	if (r < 0) {
		hpn_err_set(err, HPN_E_INTERNAL, -r, "DRA: cannot serve %s: %s", g->sock,
			    strerror(-r));
		goto fail;
	}
	*ret = g;
	return 0;
fail:
	drareg_free(g);
	return r;
}

bool drareg_registered(const struct drareg *g)
{
	return g && g->registered;
}

void drareg_stop(struct drareg *g)
{
	if (!g)
		return;
	g->quitting = true;
	g->again = false;
	if (g->srv && !g->stopping) {
		g->stopping = true;
		rpc_server_stop(g->srv, stopped, g);
	}
}

bool drareg_serving(const struct drareg *g)
{
	return g && g->srv;
}

void drareg_free(struct drareg *g)
{
	if (!g)
		return;
	if (g->srv)
		unlink(g->sock);
	loop_close(&g->inotify);
	free(g->driver);
	free(g->endpoint);
	free(g);
}
