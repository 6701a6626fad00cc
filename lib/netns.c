// SPDX-License-Identifier: Apache-2.0
#include "netns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "util.h"

int hpn_netns_open(const char *path, int *ret_fd, struct hpn_err *err)
{
	_cleanup_close_ int fd = -1;
	struct statfs sfs;
	int type;

	/* O_NONBLOCK: a FIFO planted as CNI_NETNS must not hang us (it then fails the nsfs check). */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;

		if (e == ENOENT)
			return hpn_err_set(err, HPN_E_UNKNOWN_CONTAINER, e,
					   "netns \"%s\" does not exist", path);
		return hpn_err_set(err, HPN_E_NETNS, e, "open netns \"%s\": %s", path, strerror(e));
	}
	/* A bind-mounted namespace lives on nsfs; a plain file does not. */
	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != NSFS_MAGIC)
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
				   "CNI_NETNS \"%s\" is not a namespace", path);
	type = ioctl(fd, NS_GET_NSTYPE);
	if (type >= 0 && type != CLONE_NEWNET)
		return hpn_err_set(err, HPN_E_INVALID_ENV, EINVAL,
				   "CNI_NETNS \"%s\" is not a network namespace", path);
	/* cppcheck-suppress unreadVariable ; TAKE_FD clears fd for its cleanup handler */
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int hpn_netns_current(int *ret_fd)
{
	int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	*ret_fd = fd;
	return 0;
}

int hpn_netns_enter(int fd)
{
	return setns(fd, CLONE_NEWNET) < 0 ? -errno : 0;
}

int hpn_netns_is_current(int fd)
{
	struct stat a, b;

	/* stat follows the magic link to the namespace itself: no fd to open and close. */
	if (fstat(fd, &a) < 0 || stat("/proc/thread-self/ns/net", &b) < 0)
		return -errno;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}
