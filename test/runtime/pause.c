// SPDX-License-Identifier: Apache-2.0
/*
 * The sandbox ("pause") process of the runtime tier's pod image: PID 1 of
 * every pod sandbox containerd starts. It holds the pod's namespaces open
 * while it lives, so it does nothing but wait: SIGINT and SIGTERM (containerd's
 * StopPodSandbox) end it with status 0, and SIGCHLD reaps whatever exits in a
 * PID namespace it heads. Linked statically: the image holds this file alone.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig)
{
	(void)sig;
	_exit(0);
}

static void on_child(int sig)
{
	int saved = errno;

	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	errno = saved;
}

int main(int argc, char **argv)
{
	struct sigaction stop = { .sa_handler = on_stop };
	struct sigaction child = { .sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART };

	if (argc > 1 && strcmp(argv[1], "-v") == 0) {
		puts("hpn-rdma test pause");
		return 0;
	}
	if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
	    sigaction(SIGCHLD, &child, NULL) < 0) {
		perror("pause: sigaction");
		return 1;
	}
	for (;;)
		pause();
}
