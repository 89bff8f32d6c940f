/* sock_fdlist.c - a process's open fds from /proc/PID/fd.
 *
 * getdents64 into a buffer on the stack: no malloc and no stdio streams,
 * nothing a child of vfork must not touch in its parent's memory. */
#include "sock_fdlist.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct dirent64_hdr {
	unsigned long long ino;
	long long off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/* /proc/self/fd or /proc/PID/fd into buf */
static void fd_dir(pid_t pid, char *buf, size_t len)
{
	if (pid)
		snprintf(buf, len, "/proc/%d/fd", (int)pid);
	else
		snprintf(buf, len, "/proc/self/fd");
}

static int parse_fd(const char *s)
{
	long v = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > 0x7fffffff / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return (int)v;
}

int cxls_fd_each(pid_t pid, unsigned lo, unsigned hi, int (*fn)(int fd, void *arg), void *arg)
{
	char path[48], buf[4096];
	int dir, stop = 0;
	long n;

	fd_dir(pid, path, sizeof(path));
	dir = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return -1;
	while (!stop && (n = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n && !stop;) {
			const struct dirent64_hdr *d = (const void *)(buf + off);
			int fd = parse_fd(d->name);

			off += d->reclen;
			/* our own directory fd is no fd of the process's */
			if (fd >= 0 && (pid || fd != dir) && (unsigned)fd >= lo && (unsigned)fd <= hi)
				stop = fn(fd, arg);
		}
	}
	syscall(SYS_close, dir);
	return n < 0 ? -1 : 0;
}

unsigned long cxls_fd_sock_ino(pid_t pid, int fd)
{
	struct stat st;
	char path[64], link[64];
	unsigned long ino = 0;
	long n;

	if (!pid)
		return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) ? st.st_ino : 0;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
	n = syscall(SYS_readlinkat, AT_FDCWD, path, link, sizeof(link) - 1);
	if (n <= 0)
		return 0;
	link[n] = '\0';
	return sscanf(link, "socket:[%lu]", &ino) == 1 ? ino : 0;
}

int cxls_fd_survives_exec(int fd)
{
	long fl = syscall(SYS_fcntl, fd, F_GETFD);

	return fl >= 0 && !(fl & FD_CLOEXEC);
}
