// SPDX-License-Identifier: Apache-2.0
/*
 * hpn-bench-run: runs prepared CNI plugin invocations from inside a throwaway
 * "node" netns and measures each one, for scripts/bench.sh.
 *
 *   hpn-bench-run [-n NETNS] [-r REPS] [-w WARMUP] [-l LABEL] STEPDIR...
 *
 * A STEPDIR holds one job per numbered subdirectory (0, 1, ...): argv and env
 * (one entry a line) and stdin. Every rep runs the steps in order; a step
 * starts all its jobs at once (fork + execve, no shell) and waits for them.
 * Per step and rep it prints one line on stdout:
 *   LABEL REP STEP JOBS WALL_NS CPU_US MAXRSS_KB USER_US
 * WALL_NS: first fork to last reap. CPU_US: user + system time of the jobs,
 * including the children they waited for (an IPAM plugin), from wait4();
 * USER_US: the user part of it.
 * MAXRSS_KB: the largest ru_maxrss of the jobs, which for wait4() is the
 * largest of the job and its waited-for children.
 * A job that exits non-zero stops the run (exit 2) with its stdout and stderr
 * on our stderr: a benchmark of failing runs would measure nothing.
 *
 * With -n, the runner enters NETNS once, as `ip netns exec` does (a private
 * mount namespace with that netns's sysfs on /sys), so the jobs pay no
 * `ip netns exec` of their own and the machine's own netns is never theirs.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_JOBS  256
#define MAX_STEPS 16
#define MAX_WORDS 64

struct job {
	char *argv[MAX_WORDS + 1];
	char *envp[MAX_WORDS + 1];
	char stdin_path[4096];
	char out_path[4096];
	char err_path[4096];
	pid_t pid;
};

struct step {
	const char *dir;
	const char *name;
	struct job *jobs;
	size_t n;
};

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0;

	if (!f)
		return NULL;
	if (getdelim(&buf, &len, '\0', f) < 0) {
		free(buf);
		buf = strdup("");
	}
	fclose(f);
	return buf;
}

/* Splits the file at path into lines: words[] point into the (leaked) buffer. */
static int lines(const char *path, char **words)
{
	char *buf = slurp(path), *save = NULL, *w;
	int n = 0;

	if (!buf)
		return -errno;
	for (w = strtok_r(buf, "\n", &save); w; w = strtok_r(NULL, "\n", &save)) {
		if (n == MAX_WORDS)
			return -E2BIG;
		words[n++] = w;
	}
	words[n] = NULL;
	return n;
}

static int load_step(const char *dir, struct step *s)
{
	char path[4096];
	struct stat st;

	s->dir = dir;
	s->name = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
	s->jobs = calloc(MAX_JOBS, sizeof(*s->jobs));
	if (!s->jobs)
		return -ENOMEM;
	for (s->n = 0; s->n < MAX_JOBS; s->n++) {
		struct job *j = &s->jobs[s->n];

		snprintf(path, sizeof(path), "%s/%zu", dir, s->n);
		if (stat(path, &st) < 0)
			break;
		snprintf(path, sizeof(path), "%s/%zu/argv", dir, s->n);
		if (lines(path, j->argv) <= 0) {
			fprintf(stderr, "hpn-bench-run: %s: no argv\n", path);
			return -EINVAL;
		}
		snprintf(path, sizeof(path), "%s/%zu/env", dir, s->n);
		if (lines(path, j->envp) < 0) {
			fprintf(stderr, "hpn-bench-run: %s: %s\n", path, strerror(errno));
			return -EINVAL;
		}
		snprintf(j->stdin_path, sizeof(j->stdin_path), "%s/%zu/stdin", dir, s->n);
		snprintf(j->out_path, sizeof(j->out_path), "%s/%zu/out", dir, s->n);
		snprintf(j->err_path, sizeof(j->err_path), "%s/%zu/err", dir, s->n);
	}
	if (!s->n) {
		fprintf(stderr, "hpn-bench-run: %s has no jobs (0/, 1/, ...)\n", dir);
		return -EINVAL;
	}
	return 0;
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void show(const char *what, const char *path)
{
	char *text = slurp(path);

	fprintf(stderr, "  %s: %s\n", what, text ? text : "(unreadable)");
	free(text);
}

static void child(const struct job *j)
{
	int in = open(j->stdin_path, O_RDONLY | O_CLOEXEC);
	int out = open(j->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int err = open(j->err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		_exit(126);
	execve(j->argv[0], j->argv, j->envp);
	_exit(127);
}

/* Runs every job of s at once; 0, or -1 after reporting a failed job. */
static int run_step(struct step *s, long long *wall, long long *cpu_us, long long *user_us,
		    long *maxrss)
{
	long long t0 = now_ns();
	size_t left = s->n;
	int failed = 0;

	*cpu_us = *user_us = 0;
	*maxrss = 0;
	for (size_t i = 0; i < s->n; i++) {
		s->jobs[i].pid = fork();
		if (s->jobs[i].pid < 0) {
			perror("hpn-bench-run: fork");
			exit(2);
		}
		if (s->jobs[i].pid == 0)
			child(&s->jobs[i]);
	}
	while (left) {
		struct rusage ru;
		int status;
		pid_t pid = wait4(-1, &status, 0, &ru);

		if (pid < 0) {
			if (errno == EINTR)
				continue;
			perror("hpn-bench-run: wait4");
			exit(2);
		}
		left--;
		*user_us += ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec;
		*cpu_us += ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec +
			   ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec;
		if (ru.ru_maxrss > *maxrss)
			*maxrss = ru.ru_maxrss;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			continue;
		for (size_t i = 0; i < s->n; i++) {
			if (s->jobs[i].pid != pid)
				continue;
			fprintf(stderr, "hpn-bench-run: %s/%zu (%s) failed with status 0x%x\n",
				s->dir, i, s->jobs[i].argv[0], status);
			show("stdout", s->jobs[i].out_path);
			show("stderr", s->jobs[i].err_path);
		}
		failed = 1;
	}
	*wall = now_ns() - t0;
	return failed ? -1 : 0;
}

/* What `ip netns exec` does: the netns, and its own sysfs in a private mount namespace. */
static int enter_netns(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		fprintf(stderr, "hpn-bench-run: enter netns %s: %s\n", path, strerror(errno));
		return -1;
	}
	close(fd);
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
		perror("hpn-bench-run: private mount namespace");
		return -1;
	}
	umount2("/sys", MNT_DETACH);
	if (mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		perror("hpn-bench-run: mount sysfs");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *netns = NULL, *label = "-";
	struct step steps[MAX_STEPS];
	int reps = 1, warmup = 0, opt;
	size_t n_steps = 0;

	while ((opt = getopt(argc, argv, "n:r:w:l:")) != -1) {
		switch (opt) {
		case 'n':
			netns = optarg;
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		case 'w':
			warmup = atoi(optarg);
			break;
		case 'l':
			label = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: %s [-n NETNS] [-r REPS] [-w WARMUP] [-l LABEL] "
				"STEPDIR...\n",
				argv[0]);
			return 2;
		}
	}
	if (optind == argc || argc - optind > MAX_STEPS || reps < 1 || warmup < 0) {
		fprintf(stderr, "hpn-bench-run: give 1 to %d step directories, REPS >= 1\n",
			MAX_STEPS);
		return 2;
	}
	for (int i = optind; i < argc; i++)
		if (load_step(argv[i], &steps[n_steps++]) < 0)
			return 2;
	if (netns && enter_netns(netns) < 0)
		return 2;
	for (int rep = -warmup; rep < reps; rep++) {
		for (size_t i = 0; i < n_steps; i++) {
			long long wall, cpu, user;
			long rss;

			if (run_step(&steps[i], &wall, &cpu, &user, &rss) < 0)
				return 2;
			if (rep >= 0)
				printf("%s\t%d\t%s\t%zu\t%lld\t%lld\t%ld\t%lld\n", label, rep,
				       steps[i].name, steps[i].n, wall, cpu, rss, user);
		}
	}
	return fflush(stdout) == 0 ? 0 : 2;
}
