// SPDX-License-Identifier: Apache-2.0
/*
 * hpn-rdma: the CNI command layer. Parses the environment and stdin, dispatches
 * one command, prints the result or the CNI error. Only this file prints.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "cdihook.h"
#include "cni.h"
#include "conf.h"
#include "doctor.h"
#include "events.h"
#include "log.h"
#include "result.h"
#include "util.h"

static const char usage[] =
	"hpn-rdma " HPN_VERSION " - CNI plugin that moves an RDMA NIC into a pod as hpn0\n"
	"and binds the RDMA verbs device behind it (mlx5, eRDMA, Soft-RoCE)\n"
	"\n"
	"Run by a container runtime (or cnitool) with the CNI environment:\n"
	"  CNI_COMMAND      ADD, DEL, CHECK, VERSION, STATUS or GC\n"
	"  CNI_CONTAINERID  container ID ([A-Za-z0-9][A-Za-z0-9_.-]*)\n"
	"  CNI_NETNS        path of the pod's network namespace (optional for DEL)\n"
	"  CNI_IFNAME       interface name in the pod (config \"ifName\" overrides it)\n"
	"  CNI_ARGS         K=V;K=V (K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID, IgnoreUnknown)\n"
	"  CNI_PATH         directories holding the IPAM plugins\n"
	"and the network configuration as JSON on stdin. The result, or a CNI error\n"
	"{cniVersion, code, msg, details}, is printed on stdout; diagnostics go to\n"
	"stderr (all of them with HPN_DEBUG=1) and to \"logFile\" when configured.\n"
	"\n"
	"Supported CNI versions: 0.3.0 0.3.1 0.4.0 1.0.0 1.1.0\n"
	"Options: --help, --version. Every config field: doc/configuration.md; the result\n"
	"and every error code: doc/results.md (in /usr/share/doc/hpn-rdma/ when packaged).\n"
	"\n"
	"hpn-rdma doctor [--json] [--config FILE] [--conf-dir DIR] [--cni-path PATH]\n"
	"  checks this node: RDMA NICs and which pod holds each, the RDMA netns mode,\n"
	"  modules, the CNI config (default: the first file in /etc/cni/net.d with an\n"
	"  hpn-rdma plugin) and the checks STATUS makes. Exit 0 ready, 1 not ready\n"
	"  (the reasons are listed), 2 usage error. See hpn-rdma(8).\n"
	"\n"
	"hpn-rdma cdi-hook --state-dir DIR --network NAME ID\n"
	"  the createRuntime hook of hpn-rdma's CDI devices (written into their specs):\n"
	"  reads the OCI state on stdin (at most 1 MiB, else exit 1) and exits 0 only\n"
	"  when NIC ID is attached to the container's own pod; else 1, saying why on\n"
	"  stderr, and the runtime fails CreateContainer. 2 usage error.\n";

/* hpn-rdma cdi-hook ...: the runtime's hook (lib/cdihook.h); the exit code is the verdict. */
static int cdi_hook(int argc, char **argv)
{
	const char *state_dir = NULL, *network = NULL, *id = NULL;
	struct hpn_err err = { 0 };
	char *state = NULL;
	size_t len;
	int pid, r;

	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && !strcmp(argv[i], "--state-dir")) {
			state_dir = argv[++i];
		} else if (i + 1 < argc && !strcmp(argv[i], "--network")) {
			network = argv[++i];
		} else if (!id && argv[i][0] != '-') {
			id = argv[i];
		} else {
			fprintf(stderr, "hpn-rdma cdi-hook: bad argument \"%s\" (see --help)\n",
				argv[i]);
			return 2;
		}
	}
	if (!state_dir || !network || !id) {
		fprintf(stderr, "hpn-rdma cdi-hook: --state-dir, --network and the NIC ID are "
				"needed (see --help)\n");
		return 2;
	}
	/*
	 * Whole or not at all: the state carries the container's annotations
	 * (CRI-O copies the pod's, up to 256 KiB), and a cut state would be
	 * refused as JSON without "pid", which is not what went wrong.
	 */
	r = hpn_read_all(STDIN_FILENO, HPN_STDIN_MAX, &state, &len);
	if (r == -EFBIG) {
		fprintf(stderr, "hpn-rdma cdi-hook: the OCI state on stdin exceeds %u bytes\n",
			HPN_STDIN_MAX);
		return 1;
	}
	if (r < 0) {
		fprintf(stderr, "hpn-rdma cdi-hook: read the OCI state on stdin: %s\n",
			strerror(-r));
		return 1;
	}
	r = hpn_cdi_hook_pid(state, &pid, &err);
	free(state);
	if (r < 0 || hpn_cdi_hook_check(state_dir, network, id, pid, "/proc", &err) < 0) {
		fprintf(stderr, "hpn-rdma: %s\n", err.msg);
		return 1;
	}
	return 0;
}

/* hpn-rdma doctor ...: the report on stdout; the exit code is the verdict. */
static int doctor(int argc, char **argv)
{
	const char *file = NULL, *dir = "/etc/cni/net.d", *cni_path = getenv("CNI_PATH");
	struct hpn_doctor *d;
	bool json = false;
	char *out;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (i + 1 < argc && !strcmp(argv[i], "--config")) {
			file = argv[++i];
		} else if (i + 1 < argc && !strcmp(argv[i], "--conf-dir")) {
			dir = argv[++i];
		} else if (i + 1 < argc && !strcmp(argv[i], "--cni-path")) {
			cni_path = argv[++i];
		} else {
			fprintf(stderr, "hpn-rdma doctor: bad argument \"%s\" (see --help)\n",
				argv[i]);
			return 2;
		}
	}
	d = calloc(1, sizeof(*d));
	if (!d || hpn_doctor_run(file, dir, cni_path ? cni_path : "/opt/cni/bin", d) < 0) {
		fprintf(stderr, "hpn-rdma doctor: out of memory\n");
		free(d);
		return 2;
	}
	out = json ? hpn_doctor_render_json(d) : hpn_doctor_render_text(d);
	rc = d->ready ? 0 : 1;
	if (!out || fputs(out, stdout) < 0 || (json && putchar('\n') < 0) || fflush(stdout))
		rc = 2;
	free(out);
	hpn_doctor_free(d);
	free(d);
	return rc;
}

/* conf is not const: ADD completes the pod decision from the Kubernetes API. */
typedef int (*cmd_fn)(const struct hpn_env *env, struct hpn_conf *conf, struct hpn_result **ret,
		      struct hpn_err *err);

static int cmd_add(const struct hpn_env *env, struct hpn_conf *conf, struct hpn_result **ret,
		   struct hpn_err *err)
{
	return hpn_add(env, conf, ret, err);
}

static int cmd_del(const struct hpn_env *env, struct hpn_conf *conf, struct hpn_result **ret,
		   struct hpn_err *err)
{
	return hpn_del(env, conf, err);
}

static int cmd_check(const struct hpn_env *env, struct hpn_conf *conf, struct hpn_result **ret,
		     struct hpn_err *err)
{
	return hpn_check(env, conf, err);
}

static int cmd_status(const struct hpn_env *env, struct hpn_conf *conf, struct hpn_result **ret,
		      struct hpn_err *err)
{
	return hpn_status(env, conf, err);
}

static int cmd_gc(const struct hpn_env *env, struct hpn_conf *conf, struct hpn_result **ret,
		  struct hpn_err *err)
{
	return hpn_gc(env, conf, err);
}

/* Indexed by enum hpn_cmd; VERSION is answered before any config is parsed. */
static const cmd_fn commands[] = {
	[HPN_CMD_ADD] = cmd_add,       [HPN_CMD_DEL] = cmd_del, [HPN_CMD_CHECK] = cmd_check,
	[HPN_CMD_STATUS] = cmd_status, [HPN_CMD_GC] = cmd_gc,
};

static int emit(char *json)
{
	if (!json)
		return 1;
	puts(json);
	free(json);
	return fflush(stdout) == 0 ? 0 : 1;
}

static int fail(const struct hpn_err *err, const char *version)
{
	hpn_error("%s%s%s", err->msg, err->details[0] ? ": " : "", err->details);
	emit(hpn_err_render(err, version));
	return 1;
}

static double now_s(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * The command's line in <stateDir>/events.log (lib/events.h), for the agent's
 * metrics: what it was, how it ended, how long it took from here. Best
 * effort: a record that cannot be written changes nothing of the answer.
 * STATUS is not recorded: containerd >= 2.1 calls it every few seconds, which
 * would fill the log with polls, and it must leave the state dir untouched
 * (the doctor's promise).
 */
static void record(const struct hpn_env *env, const struct hpn_conf *conf, int code, double t0)
{
	struct hpn_event ev = { .code = code, .pid = (int)getpid() };
	int r;

	if (env->cmd == HPN_CMD_STATUS)
		return;
	ev.seconds = now_s(CLOCK_MONOTONIC) - t0;
	ev.time = now_s(CLOCK_REALTIME);
	snprintf(ev.command, sizeof(ev.command), "%s", env->command);
	snprintf(ev.network, sizeof(ev.network), "%s", conf->name ? conf->name : "");
	snprintf(ev.container_id, sizeof(ev.container_id), "%s",
		 env->container_id ? env->container_id : "");
	snprintf(ev.ifname, sizeof(ev.ifname), "%s", env->ifname ? env->ifname : "");
	r = hpn_event_append(conf->state_dir, &ev);
	if (r < 0 && r != -ENOENT)
		hpn_debug("event log in %s: %s", conf->state_dir, strerror(-r));
}

int main(int argc, char **argv)
{
	double t0 = now_s(CLOCK_MONOTONIC);
	struct hpn_err err = { 0 };
	struct hpn_env env = { 0 };
	struct hpn_conf conf = { 0 };
	struct hpn_result *res = NULL;
	char *buf = NULL, *version = NULL;
	size_t len = 0;
	int r, rc = 1;

	hpn_fd_check_arm();
	if (argc > 1 && !strcmp(argv[1], "--help")) {
		fputs(usage, stdout);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "doctor"))
		return doctor(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "cdi-hook"))
		return cdi_hook(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "--version")) {
		printf("hpn-rdma %s\n", HPN_VERSION);
		return 0;
	}
	hpn_log_init(getenv("CNI_COMMAND"), getenv("CNI_CONTAINERID"));

	r = hpn_read_all(STDIN_FILENO, HPN_STDIN_MAX, &buf, &len);
	if (r < 0) {
		if (r == -EFBIG)
			hpn_err_set(&err, HPN_E_INVALID_CONFIG, r,
				    "network configuration on stdin is larger than %u bytes",
				    HPN_STDIN_MAX);
		else
			hpn_err_set(&err, HPN_E_IO, r, "read stdin: %s", strerror(-r));
		return fail(&err, NULL);
	}
	version = len ? hpn_conf_peek_version(buf, len) : NULL;
	if (hpn_env_parse(&env, &err) < 0) {
		rc = fail(&err, version);
		goto out;
	}
	if (env.cmd == HPN_CMD_VERSION) {
		/* Answer in the caller's version when it is one we speak. */
		rc = emit(hpn_version_render(version));
		goto out;
	}
	if (hpn_conf_parse(buf, len, env.cmd, &conf, &err) < 0) {
		rc = fail(&err, version);
		goto out;
	}
	if (conf.log_file && hpn_log_open(conf.log_file, conf.log_level) < 0)
		hpn_warn("cannot open logFile %s: %s", conf.log_file, strerror(errno));
	hpn_debug("%s container %s ifname %s netns %s", env.command,
		  env.container_id ? env.container_id : "-", env.ifname ? env.ifname : "-",
		  env.netns ? env.netns : "-");

	r = commands[env.cmd](&env, &conf, &res, &err);
	if (r < 0) {
		if (!err.code)
			hpn_err_set(&err, HPN_E_INTERNAL, r, "%s failed: %s", env.command,
				    strerror(-r));
		rc = fail(&err, conf.cni_version);
		record(&env, &conf, err.code, t0);
		goto out;
	}
	rc = res ? emit(hpn_result_render(res, conf.cni_version)) : 0;
	if (rc && env.cmd == HPN_CMD_ADD) {
		/* A runtime that never saw the result will not DEL it: undo now. */
		struct hpn_err derr = { 0 };

		hpn_error("ADD: the result could not be written to stdout; undoing the attachment");
		if (hpn_del(&env, &conf, &derr) < 0)
			hpn_error("undo after the lost result: %s", derr.msg);
		record(&env, &conf, HPN_E_IO, t0);
		goto out;
	}
	record(&env, &conf, 0, t0);
	hpn_info("%s done", env.command);
out:
	hpn_result_free(res);
	hpn_conf_free(&conf);
	hpn_env_free(&env);
	hpn_log_close();
	free(version);
	free(buf);
	return rc;
}
