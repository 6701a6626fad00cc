// SPDX-License-Identifier: Apache-2.0
/*
 * The metrics, health and GC modules as one part of the agent (ext.h): their
 * flags, their fds in the loop's epoll, and their start and stop, so that
 * main.c calls three functions and dispatches one kind of epoll tag.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"
#include "util.h"

#define DEFAULT_METRICS	 "127.0.0.1:9467"
#define DEFAULT_CRI	 "/run/containerd/containerd.sock"
#define DEFAULT_CNI_PATH "/opt/cni/bin"
#define WORKER_GRACE_MS	 3000

int agent_fd_add(struct agent *a, struct agent_fd *f, int fd,
		 void (*fn)(struct agent *a, struct agent_fd *f))
{
	f->type = AGENT_TAG_EXT;
	f->fn = fn;
	f->fd = fd;
	return agent_watch_fd(a, fd, f);
}

void agent_timer_set(struct agent_fd *f, int first_ms, int every_ms)
{
	struct itimerspec it = {
		.it_value = { first_ms / 1000, (first_ms % 1000) * 1000000L },
		.it_interval = { every_ms / 1000, (every_ms % 1000) * 1000000L },
	};

	if (f->fd >= 0)
		timerfd_settime(f->fd, 0, &it, NULL);
}

int agent_timer_add(struct agent *a, struct agent_fd *f, int first_ms, int every_ms,
		    void (*fn)(struct agent *a, struct agent_fd *f))
{
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK), r;

	if (fd < 0)
		return -errno;
	r = agent_fd_add(a, f, fd, fn);
	if (r < 0) {
		close(fd);
		f->fd = -1;
		return r;
	}
	agent_timer_set(f, first_ms, every_ms);
	return 0;
}

void agent_fd_close(struct agent_fd *f)
{
	/* Closing the last fd of a file takes it out of every epoll set. */
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

void ext_defaults(struct agent_ext_opts *o)
{
	*o = (struct agent_ext_opts){ .metrics_address = DEFAULT_METRICS,
				      .cri_socket = DEFAULT_CRI,
				      .cni_path = DEFAULT_CNI_PATH,
				      .health_s = 10,
				      .health_batch = 8,
				      .gc_s = 60,
				      .gc_grace_s = 300 };
}

static bool number(const char *s, int min, int max, int *ret)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return false;
	*ret = (int)v;
	return true;
}

static bool off(const char *s)
{
	return !s[0] || !strcmp(s, "none");
}

int ext_option(struct agent_ext_opts *o, const char *name, const char *v)
{
	struct sockaddr_storage sa;
	unsigned int len;

	if (!strcmp(name, "metrics-address")) {
		if (!off(v) && metrics_parse_address(v, &sa, &len) < 0) {
			fprintf(stderr,
				"hpn-rdma-agent: --metrics-address \"%s\" is not ADDRESS:PORT "
				"(127.0.0.1:9467, [::1]:9467) or none\n",
				v);
			return 2;
		}
		o->metrics_address = v;
	} else if (!strcmp(name, "cri-socket")) {
		if (!off(v) && v[0] != '/') {
			fprintf(stderr,
				"hpn-rdma-agent: --cri-socket must be absolute (or none)\n");
			return 2;
		}
		o->cri_socket = v;
	} else if (!strcmp(name, "cni-path")) {
		if (v[0] != '/') {
			fprintf(stderr, "hpn-rdma-agent: --cni-path is absolute directories, "
					"':'-separated\n");
			return 2;
		}
		o->cni_path = v;
	} else if (!strcmp(name, "health-interval")) {
		if (!number(v, 0, 86400, &o->health_s)) {
			fprintf(stderr,
				"hpn-rdma-agent: --health-interval is 0 (off) to 86400 s\n");
			return 2;
		}
	} else if (!strcmp(name, "health-batch")) {
		if (!number(v, 1, 4096, &o->health_batch)) {
			fprintf(stderr, "hpn-rdma-agent: --health-batch is 1 to 4096\n");
			return 2;
		}
	} else if (!strcmp(name, "gc-interval")) {
		if (!number(v, 0, 86400, &o->gc_s)) {
			fprintf(stderr, "hpn-rdma-agent: --gc-interval is 0 (off) to 86400 s\n");
			return 2;
		}
	} else if (!strcmp(name, "gc-grace")) {
		if (!number(v, 0, 86400, &o->gc_grace_s)) {
			fprintf(stderr, "hpn-rdma-agent: --gc-grace is 0 to 86400 s\n");
			return 2;
		}
	} else {
		return -1;
	}
	return 0;
}

int ext_start(struct agent *a)
{
	struct agent_ext *x = &a->ext;
	struct timespec ts;
	int r;

	clock_gettime(CLOCK_REALTIME, &ts);
	x->start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	r = work_start(a);
	if (r < 0) {
		hpn_error("worker thread: %s", strerror(-r));
		return r;
	}
	r = cnilog_start(a);
	if (r < 0)
		hpn_warn("the plugin's event log in %s cannot be followed: %s (no CNI command "
			 "metrics)",
			 a->conf.state_dir, strerror(-r));
	if (x->opts.health_s > 0) {
		r = health_start(a);
		if (r < 0) {
			hpn_error("health loop: %s", strerror(-r));
			return r;
		}
	}
	if (x->opts.gc_s > 0 && !off(x->opts.cri_socket)) {
		r = gc_start(a);
		if (r < 0) {
			hpn_error("gc: %s", strerror(-r));
			return r;
		}
	} else {
		hpn_info("gc: off (--gc-interval 0 or --cri-socket none)");
	}
	if (!off(x->opts.metrics_address)) {
		r = metrics_start(a);
		if (r < 0)
			return r;
	}
	return 0;
}

void ext_stop(struct agent *a)
{
	health_stop(a);
	gc_stop(a);
	metrics_stop(a);
}

void ext_free(struct agent *a)
{
	work_stop(a, WORKER_GRACE_MS);
	metrics_stop(a);
	health_free(a);
	gc_free(a);
	cnilog_stop(a);
}
