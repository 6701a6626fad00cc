// SPDX-License-Identifier: Apache-2.0
#include "ipam.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

extern char **environ;

int hpn_ipam_find(const char *type, const char *cni_path, char out[PATH_MAX])
{
	_cleanup_free_ char *copy = hpn_strdup(cni_path);
	char *save = NULL, *dir;

	if (!cni_path)
		return -ENOENT;
	if (!copy)
		return -ENOMEM;
	for (dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		if (hpn_snprintf(out, PATH_MAX, "%s/%s", dir, type) < 0)
			continue;
		if (access(out, X_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

/*
 * environ with the per-call CNI_* variables set from env (the same values the
 * runtime gave us, except for GC, which releases other attachments' leases;
 * and CNI_PATH, which hpn-rdma-agent's GC has only in env). The strings are
 * owned by environ or by bufs.
 */
#define OWN_VARS 5
static char **child_env(const struct hpn_env *env, const char *command, char bufs[OWN_VARS][4200])
{
	static const char *const own[OWN_VARS] = { "CNI_COMMAND=", "CNI_CONTAINERID=",
						   "CNI_IFNAME=", "CNI_NETNS=", "CNI_PATH=" };
	/* A CNI_PATH too long for its buffer stays as environ has it. */
	const char *vals[OWN_VARS] = { command, env->container_id, env->ifname, env->netns,
				       env->path && strlen(env->path) < 4100 ? env->path : NULL };
	size_t n = 0, k = 0;
	char **envp;

	while (environ[n])
		n++;
	envp = calloc(n + OWN_VARS + 1, sizeof(*envp));
	if (!envp)
		return NULL;
	for (size_t i = 0; i < OWN_VARS; i++) {
		if (!vals[i])
			continue;
		snprintf(bufs[i], 4200, "%s%s", own[i], vals[i]);
		envp[k++] = bufs[i];
	}
	for (size_t i = 0; i < n; i++) {
		bool skip = false;

		for (size_t o = 0; o < OWN_VARS; o++)
			skip |= (o < 4 || vals[o]) && !strncmp(environ[i], own[o], strlen(own[o]));
		if (!skip)
			envp[k++] = environ[i];
	}
	return envp;
}

/* Writes stdin and drains stdout together so neither side can block the other. */
static int pump(int in_fd, const char *buf, size_t len, int out_fd, char **ret, size_t *ret_len)
{
	size_t cap = 4096, used = 0, off = 0;
	char *out = malloc(cap);
	struct pollfd p[2];
	int r = 0;

	if (!out)
		return -ENOMEM;
	if (len == 0) {
		close(in_fd);
		in_fd = -1;
	}
	for (;;) {
		int np = 0, outi = -1, ini = -1;

		if (in_fd >= 0) {
			p[np] = (struct pollfd){ .fd = in_fd, .events = POLLOUT };
			ini = np++;
		}
		p[np] = (struct pollfd){ .fd = out_fd, .events = POLLIN };
		outi = np++;
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (ini >= 0 && p[ini].revents) {
			ssize_t n = write(in_fd, buf + off, len - off);

			if (n > 0)
				off += (size_t)n;
			if (n < 0 && errno == EPIPE)
				off = len; /* the child closed stdin: it has what it wants */
			else if (n < 0 && errno != EINTR && errno != EAGAIN) {
				r = -errno; /* the delegate would get a cut config */
				break;
			}
			if (off == len) {
				close(in_fd);
				in_fd = -1;
			}
		}
		if (p[outi].revents) {
			ssize_t n;

			if (used + 1 >= cap) {
				char *nb;

				if (cap > HPN_STDIN_MAX)
					break;
				nb = realloc(out, cap * 2);
				if (!nb)
					break;
				out = nb;
				cap *= 2;
			}
			n = read(out_fd, out + used, cap - used - 1);
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0)
				break;
			used += (size_t)n;
		}
	}
	if (in_fd >= 0)
		close(in_fd);
	if (r < 0) {
		free(out);
		return r;
	}
	out[used] = '\0';
	*ret = out;
	*ret_len = used;
	return 0;
}

/* The delegate's error object, passed through so its code reaches the runtime. */
static int delegate_error(const char *type, const char *command, const char *out, size_t len,
			  int status, struct hpn_err *err)
{
	cJSON *root = hpn_json_parse(out, len);
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(root, "code");
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(root, "msg");
	const cJSON *details = cJSON_GetObjectItemCaseSensitive(root, "details");
	int r;

	if (cJSON_IsNumber(code) && code->valueint > 0 && cJSON_IsString(msg)) {
		r = hpn_err_set(err, code->valueint, EIO, "ipam plugin %s %s: %s", type, command,
				msg->valuestring);
		if (cJSON_IsString(details) && details->valuestring[0])
			hpn_err_details(err, "%s", details->valuestring);
	} else if (WIFSIGNALED(status)) {
		r = hpn_err_set(err, HPN_E_IPAM, EIO, "ipam plugin %s %s killed by signal %d", type,
				command, WTERMSIG(status));
	} else {
		r = hpn_err_set(err, HPN_E_IPAM, EIO,
				"ipam plugin %s %s failed (exit %d) without a CNI error", type,
				command, WEXITSTATUS(status));
	}
	cJSON_Delete(root);
	return r;
}

int hpn_ipam_exec(const struct hpn_conf *conf, const struct hpn_env *env, const char *command,
		  char **ret_out, size_t *ret_len, struct hpn_err *err)
{
	char path[PATH_MAX], bufs[OWN_VARS][4200];
	_cleanup_free_ char **envp = NULL;
	_cleanup_free_ char *out = NULL;
	posix_spawn_file_actions_t fa;
	int in[2] = { -1, -1 }, outp[2] = { -1, -1 };
	char *argv[] = { conf->ipam_type, NULL };
	size_t len = 0;
	int r, status;
	pid_t pid;

	r = hpn_ipam_find(conf->ipam_type, env->path, path);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IPAM, r,
				   "ipam plugin \"%s\" not found in CNI_PATH \"%s\"",
				   conf->ipam_type, env->path ? env->path : "");
	envp = child_env(env, command, bufs);
	if (!envp)
		return -ENOMEM;
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0) {
		r = -errno;
		goto fail;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
	posix_spawn_file_actions_adddup2(&fa, outp[1], STDOUT_FILENO);
	hpn_debug("exec %s %s", path, command);
	r = -posix_spawn(&pid, path, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(outp[1]);
	in[0] = outp[1] = -1;
	if (r < 0)
		goto fail;
	/* A child that exits early must not kill us with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	r = pump(in[1], conf->raw, conf->raw_len, outp[0], &out, &len);
	in[1] = -1;
	close(outp[0]);
	outp[0] = -1;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): out is _cleanup_free_ */
			r = -errno;
			goto fail;
		}
	}
	if (r < 0)
		goto fail;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return delegate_error(conf->ipam_type, command, out, len, status, err);
	*ret_out = TAKE_PTR(out);
	*ret_len = len;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (outp[i] >= 0)
			close(outp[i]);
	}
	return hpn_err_set(err, HPN_E_IPAM, r, "run ipam plugin %s: %s", path, strerror(-r));
}

int hpn_ipam_add(const struct hpn_conf *conf, const struct hpn_env *env, struct hpn_result **ret,
		 struct hpn_err *err)
{
	_cleanup_free_ char *out = NULL;
	struct hpn_err perr = { 0 };
	size_t len;
	int r;

	r = hpn_ipam_exec(conf, env, "ADD", &out, &len, err);
	if (r < 0)
		return r;
	r = hpn_result_parse(out, len, ret, &perr);
	if (r < 0)
		return hpn_err_set(err, HPN_E_IPAM, r, "ipam plugin %s returned a bad result: %s",
				   conf->ipam_type, perr.msg);
	return 0;
}

int hpn_ipam_run(const struct hpn_conf *conf, const struct hpn_env *env, const char *command,
		 struct hpn_err *err)
{
	char *out = NULL;
	size_t len;
	int r = hpn_ipam_exec(conf, env, command, &out, &len, err);

	free(out);
	return r;
}
