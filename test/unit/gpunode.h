/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HPN_TEST_GPUNODE_H
#define HPN_TEST_GPUNODE_H

/* A GPU node of test/fixtures/gpu-nodes built at test time: mknode.sh NAME DEST, as a child. */

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define GPUNODES HPN_FIXTURES "/gpu-nodes"

/* Writes DEST/sys and DEST/proc of node name; exits the test when mknode.sh fails. */
static inline void gpunode_make(const char *name, const char *dest)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		execl("/bin/bash", "bash", GPUNODES "/mknode.sh", name, dest, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "mknode.sh %s %s failed\n", name, dest);
		exit(2);
	}
}

#endif
