/* sock_fdlist.h - the fds this process has open, as the kernel says.
 *
 * The shim's fd table knows only the fds it saw made; a few calls must ask
 * the kernel instead: close_range() and closefrom(), which close fds by
 * number, and a program just exec'd by a child of vfork or posix_spawn,
 * whose fds were dup'd where the shim could not see.
 */
#ifndef CXLSHIM_CORE_SOCK_FDLIST_H
#define CXLSHIM_CORE_SOCK_FDLIST_H

#include <sys/types.h>

/* Calls fn(fd, arg) for each fd from lo to hi (inclusive) open in process
 * pid (0: this one), in no particular order; stops early when fn returns
 * nonzero.  No malloc and no interposed call (a child of vfork may call
 * it).  Returns 0, or -1 when /proc cannot be read (errno set). */
int cxls_fd_each(pid_t pid, unsigned lo, unsigned hi, int (*fn)(int fd, void *arg), void *arg);

/* The inode of the socket fd of process pid (0: this one) names, 0 when
 * it is not a socket or cannot be read. */
unsigned long cxls_fd_sock_ino(pid_t pid, int fd);

/* Whether fd of this process stays open across exec (no FD_CLOEXEC). */
int cxls_fd_survives_exec(int fd);

#endif
