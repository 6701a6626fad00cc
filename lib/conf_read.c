// SPDX-License-Identifier: Apache-2.0
#include "conf_read.h"

#include <errno.h>
#include <string.h>

#include "util.h"

int hpn_conf_str(const void *obj, const char *key, const char *path, char **ret,
		 struct hpn_err *err)
{
	return hpn_json_str(obj, key, path, HPN_E_INVALID_CONFIG, 4095, ret, err);
}

int hpn_conf_abs_path(const void *obj, const char *path, const char *key, const char *def,
		      char **ret, struct hpn_err *err)
{
	int r = hpn_conf_str(obj, key, path, ret, err);
	size_t n;

	if (r < 0)
		return r;
	if (!*ret) {
		*ret = hpn_strdup(def);
		return (*ret || !def) ? 0 : -ENOMEM;
	}
	n = strlen(*ret);
	if ((*ret)[0] != '/' || strstr(*ret, "/../") || (n >= 3 && !strcmp(*ret + n - 3, "/..")))
		return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL,
				   "%s%s \"%s\" must be an absolute path without ..", path, key,
				   *ret);
	return 0;
}

int hpn_conf_pick(const char *path, const char *key, const char *val,
		  const struct hpn_conf_name *names, size_t n, int *ret, struct hpn_err *err)
{
	char list[128] = "";
	size_t len = 0;

	if (!val)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(val, names[i].name)) {
			*ret = names[i].v;
			return 0;
		}
		/* Cut quietly: the lists are short, and a message is never wrong, only cut. */
		hpn_msgf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", names[i].name);
		len = strlen(list);
	}
	return hpn_err_set(err, HPN_E_INVALID_CONFIG, EINVAL, "%s%s \"%.32s\" is not one of %s",
			   path, key, val, list);
}
