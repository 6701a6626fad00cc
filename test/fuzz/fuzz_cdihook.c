// SPDX-License-Identifier: Apache-2.0
/*
 * hpn_cdi_hook_pid (lib/cdihook.c): the OCI state the runtime writes on the
 * createRuntime hook's stdin, NUL-terminated as `hpn-rdma cdi-hook` reads it.
 * A refusal is code 6 with a message naming "pid" and leaves the pid
 * untouched; a success is a pid of 1..INT_MAX, the integer under the state's
 * top-level "pid" (checked against cJSON's reading of the same text); a state
 * that is strict JSON with such a pid is never refused. The pid then goes to
 * hpn_cdi_hook_check against a fake proc root (mkdtemp under $TMPDIR, else
 * /dev/shm, else /tmp) that has only 4242/ns/net and a state dir without
 * journals: code 100 (no pod holds the NIC) for 4242, 103 (no such process)
 * for any other pid, each message naming what it is about.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdihook.h"
#include "fuzz.h"
#include "fuzzdir.h"
#include "util.h"

#define PID 4242
#define NIC "0000:3b:00.0"

static char dir[PATH_MAX - 64], proc[PATH_MAX], state[PATH_MAX];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char p[PATH_MAX + 32];

	(void)argc;
	(void)argv;
	fuzz_dir(dir, sizeof(dir), "cdihook");
	snprintf(proc, sizeof(proc), "%s/proc", dir);
	snprintf(state, sizeof(state), "%s/state", dir);
	FUZZ_ASSERT(mkdir(proc, 0700) == 0 && mkdir(state, 0700) == 0);
	snprintf(p, sizeof(p), "%s/%d", proc, PID);
	FUZZ_ASSERT(mkdir(p, 0700) == 0);
	snprintf(p, sizeof(p), "%s/%d/ns", proc, PID);
	FUZZ_ASSERT(mkdir(p, 0700) == 0);
	snprintf(p, sizeof(p), "%s/%d/ns/net", proc, PID);
	fuzz_put(p, "", 0, 0600);
	return 0;
}

/* The pid strict JSON gives, 0 when it gives none the hook may take. */
static int strict_pid(const char *s)
{
	cJSON *o = hpn_json_parse(s, strlen(s));
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pid");
	double v = cJSON_IsNumber(p) ? p->valuedouble : 0;
	int pid = v >= 1 && v <= INT_MAX && v == (double)(int)v ? (int)v : 0;

	cJSON_Delete(o);
	return pid;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hpn_err err = { 0 };
	char *s = malloc(size + 1);
	int pid = -7, r, want;

	FUZZ_ASSERT(s);
	memcpy(s, data, size);
	s[size] = '\0';
	want = strict_pid(s);
	r = hpn_cdi_hook_pid(s, &pid, &err);
	if (r < 0) {
		FUZZ_ASSERT(r == -EINVAL && err.code == HPN_E_DECODE && strstr(err.msg, "\"pid\""));
		FUZZ_ASSERT(pid == -7);
		FUZZ_ASSERT(!want); /* strict JSON with a pid is never refused */
		free(s);
		return 0;
	}
	FUZZ_ASSERT(r == 0 && err.code == 0 && pid >= 1);
	FUZZ_ASSERT(!want || pid == want);
	/* cJSON's own reading of the text the hook parsed: the same integer. */
	{
		cJSON *o = cJSON_Parse(s);
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pid");

		FUZZ_ASSERT(cJSON_IsObject(o) && cJSON_IsNumber(p) && p->valuedouble == pid);
		cJSON_Delete(o);
	}

	r = hpn_cdi_hook_check(state, "net1", NIC, pid, proc, &err);
	FUZZ_ASSERT(r < 0 && memchr(err.msg, '\0', sizeof(err.msg)));
	if (pid == PID) {
		FUZZ_ASSERT(err.code == HPN_E_DEVICE_NOT_FOUND && strstr(err.msg, NIC) &&
			    strstr(err.msg, "net1"));
	} else {
		char p[32];

		snprintf(p, sizeof(p), "/%d/ns/net", pid);
		FUZZ_ASSERT(err.code == HPN_E_NETNS && strstr(err.msg, p));
	}
	free(s);
	return 0;
}
