// SPDX-License-Identifier: Apache-2.0
/*
 * The CDI spec check (lib/cdi.c): what the agent and ADD find at the name of
 * one of their specs in a CDI directory, which the runtime and other writers
 * share. The input is written at that name in a private directory (mkdtemp
 * under $TMPDIR, else /dev/shm, else /tmp), mode 0644, for the owner and ID
 * the first byte picks; then the three users of the check must agree:
 * hpn_cdi_present says ours exactly when hpn_cdi_remove removes it (else it
 * refuses, 1 and code 5 naming the file, leaving it byte for byte) and
 * hpn_cdi_write replaces it with its rendering (else -EEXIST, code 5, the
 * file left byte for byte); what hpn_cdi_write wrote is judged ours; no temp
 * file is ever left; hpn_cdi_each names the ID once, whatever the file holds.
 * A first byte 'N' makes the rest a file name instead: hpn_cdi_parse_file
 * accepts exactly the names hpn_cdi_file makes, and gives back their owner
 * and ID.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi.h"
#include "fuzz.h"
#include "fuzzdir.h"
#include "util.h"

static char dir[PATH_MAX - HPN_CDI_FILE_MAX - 64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_dir(dir, sizeof(dir), "cdi");
	return 0;
}

/* The file holds exactly data. */
static bool holds(const char *path, const void *data, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t len = 0;
	bool same;

	if (fd < 0)
		return false;
	FUZZ_ASSERT(hpn_read_all(fd, 1 << 20, &buf, &len) == 0);
	close(fd);
	same = len == size && !memcmp(buf, data, size);
	free(buf);
	return same;
}

/* The directory holds nothing or just file: no temp file left behind. */
static void only(const char *file)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	FUZZ_ASSERT(d);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		FUZZ_ASSERT(file && !strcmp(e->d_name, file));
		n++;
	}
	closedir(d);
	FUZZ_ASSERT(n <= 1);
}

struct seen {
	const char *id;
	int n;
};

static void count(const char *id, void *ud)
{
	struct seen *s = ud;

	FUZZ_ASSERT(!strcmp(id, s->id));
	s->n++;
}

static void names(const uint8_t *data, size_t size)
{
	static const enum hpn_cdi_owner owners[] = { HPN_CDI_AGENT, HPN_CDI_POD };
	char name[256], id[HPN_CDI_ID_MAX], again[HPN_CDI_FILE_MAX];
	enum hpn_cdi_owner o;

	size = size < sizeof(name) - 1 ? size : sizeof(name) - 1;
	memcpy(name, data, size);
	name[size] = '\0';
	memset(id, 0x5a, sizeof(id));
	if (hpn_cdi_parse_file(name, &o, id) == 0) {
		FUZZ_ASSERT(memchr(id, '\0', sizeof(id)) && hpn_cdi_id_valid(id));
		FUZZ_ASSERT(hpn_cdi_file(o, id, again) == 0 && !strcmp(again, name));
	}
	/* The name as an ID: its file names parse back to it. */
	for (size_t k = 0; k < HPN_ARRAY_SIZE(owners); k++) {
		int r = hpn_cdi_file(owners[k], name, again);

		FUZZ_ASSERT((r == 0) == hpn_cdi_id_valid(name));
		if (r < 0)
			continue;
		FUZZ_ASSERT(hpn_cdi_parse_file(again, &o, id) == 0 && o == owners[k] &&
			    !strcmp(id, name));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const ids[] = { "0000:3b:00.0", "mlx5_bond_0" };
	struct hpn_cdi_dev dev = {
		.ibdev = "mlx5_0",
		.nodes = { { "uverbs0", "/dev/infiniband/uverbs0", 231, 192 },
			   { "rdma_cm", "/dev/infiniband/rdma_cm", 10, 58 } },
		.n_nodes = 2,
		.hook = { "/opt/cni/bin/hpn-rdma", "/var/lib/cni/hpn-rdma", "hpn-rdma" },
	};
	char file[HPN_CDI_FILE_MAX], path[PATH_MAX], *text;
	struct hpn_err err = { 0 };
	enum hpn_cdi_owner o;
	struct seen seen;
	bool ours;
	int r;

	if (size && data[0] == 'N') {
		names(data + 1, size - 1);
		return 0;
	}
	o = size && (data[0] & 1) ? HPN_CDI_POD : HPN_CDI_AGENT;
	snprintf(dev.id, sizeof(dev.id), "%s", ids[size && (data[0] & 2)]);
	data += !!size;
	size -= !!size;
	FUZZ_ASSERT(hpn_cdi_file(o, dev.id, file) == 0);
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fuzz_put(path, data, size, 0644);

	ours = hpn_cdi_present(dir, o, dev.id);
	/* A string with a NUL is never ours: cJSON would end it there (found by this target). */
	FUZZ_ASSERT(!ours || !hpn_json_has_nul((const char *)data, size));
	/* Judged for the name's owner and ID only. */
	FUZZ_ASSERT(!hpn_cdi_present(dir, o == HPN_CDI_POD ? HPN_CDI_AGENT : HPN_CDI_POD, dev.id));
	FUZZ_ASSERT(!hpn_cdi_present(dir, o, strcmp(dev.id, ids[0]) ? ids[0] : ids[1]));
	if (ours) {
		/* At least a JSON object (the check's parser is cJSON's). */
		cJSON *j = cJSON_ParseWithLength((const char *)data, size);

		FUZZ_ASSERT(cJSON_IsObject(j));
		cJSON_Delete(j);
	}
	seen = (struct seen){ dev.id, 0 };
	FUZZ_ASSERT(hpn_cdi_each(dir, o, count, &seen, &err) == 0 && seen.n == 1);

	r = hpn_cdi_remove(dir, file, &err);
	if (ours) {
		FUZZ_ASSERT(r == 0 && err.code == 0 && access(path, F_OK) < 0 && errno == ENOENT);
		fuzz_put(path, data, size, 0644);
	} else {
		FUZZ_ASSERT(r == 1 && err.code == HPN_E_IO && strstr(err.msg, file) &&
			    strstr(err.msg, "not hpn-rdma's"));
		FUZZ_ASSERT(holds(path, data, size));
	}
	only(file);

	memset(&err, 0, sizeof(err));
	text = hpn_cdi_render(&dev);
	FUZZ_ASSERT(text);
	r = hpn_cdi_write(dir, o, &dev, &err);
	if (ours) {
		bool same = size == strlen(text) && !memcmp(data, text, size);

		FUZZ_ASSERT(r == (same ? 0 : 1) && err.code == 0);
		FUZZ_ASSERT(holds(path, text, strlen(text)));
		FUZZ_ASSERT(hpn_cdi_present(dir, o, dev.id));
	} else {
		FUZZ_ASSERT(r == -EEXIST && err.code == HPN_E_IO && strstr(err.msg, file));
		FUZZ_ASSERT(holds(path, data, size));
	}
	only(file);
	free(text);
	FUZZ_ASSERT(unlink(path) == 0);
	return 0;
}
