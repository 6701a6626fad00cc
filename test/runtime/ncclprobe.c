// SPDX-License-Identifier: Apache-2.0
/*
 * ncclprobe: the runtime tier's real NCCL user (doc/nccl.md, "A real NCCL
 * without a GPU"). It opens libnccl.so.2 as an application would load it,
 * asks its version and calls ncclGetUniqueId, the one NCCL call that needs
 * no GPU: it reads NCCL's configuration files (~/.nccl.conf or
 * $NCCL_CONF_FILE, then /etc/nccl.conf) and picks the bootstrap interface,
 * which NCCL_DEBUG=INFO makes it log. Prints the version and the result on
 * stdout; exits 0 when both calls succeed, 1 otherwise.
 *
 * No NCCL header: the two prototypes are NCCL's stable C API (nccl.h since
 * 2.0): ncclResult_t is an int-sized enum, 0 success, and ncclUniqueId is 128
 * opaque bytes. Built against Debian 12's glibc and run under trixie's (the
 * NCCL package needs glibc 2.38+), which runs older binaries unchanged.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define NCCL_UNIQUE_ID_BYTES 128

struct nccl_unique_id {
	char internal[NCCL_UNIQUE_ID_BYTES];
};

typedef int (*get_version_fn)(int *version);
typedef int (*get_unique_id_fn)(struct nccl_unique_id *id);
typedef const char *(*error_string_fn)(int result);

int main(int argc, char **argv)
{
	const char *soname = argc > 1 ? argv[1] : "libnccl.so.2";
	struct nccl_unique_id id;
	get_version_fn get_version;
	get_unique_id_fn get_unique_id;
	error_string_fn error_string;
	void *h;
	int version = 0, r;

	h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "ncclprobe: dlopen %s: %s\n", soname, dlerror());
		return 1;
	}
	/* POSIX's way to turn dlsym's void * into a function pointer. */
	*(void **)&get_version = dlsym(h, "ncclGetVersion");
	*(void **)&get_unique_id = dlsym(h, "ncclGetUniqueId");
	*(void **)&error_string = dlsym(h, "ncclGetErrorString");
	if (!get_version || !get_unique_id) {
		fprintf(stderr, "ncclprobe: %s lacks ncclGetVersion or ncclGetUniqueId\n", soname);
		return 1;
	}
	r = get_version(&version);
	if (r != 0) {
		fprintf(stderr, "ncclprobe: ncclGetVersion: %d\n", r);
		return 1;
	}
	/* Since 2.9 the code is major * 10000 + minor * 100 + patch. */
	printf("ncclprobe: NCCL %d.%d.%d\n", version / 10000, version / 100 % 100, version % 100);
	memset(&id, 0, sizeof(id));
	r = get_unique_id(&id);
	printf("ncclprobe: ncclGetUniqueId: %d (%s)\n", r,
	       error_string ? error_string(r) : "no ncclGetErrorString");
	fflush(stdout);
	return r == 0 ? 0 : 1;
}
