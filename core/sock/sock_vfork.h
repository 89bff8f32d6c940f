/* sock_vfork.h - a child of vfork runs in its parent's memory.
 *
 * Until it execs, such a child (CPython's subprocess, vfork and exec in C)
 * closes, dups, close_range()s and may write to its own copy of the fd
 * table through the shim's entry points, while the shim's records of fds
 * are its parent's.  The child must neither change those records nor
 * believe them: while a child of vfork runs, every entry point that reads
 * or changes them asks whether it runs in that child (one getpid), and in
 * the child hands the call straight to the kernel; its exec finds its
 * pooled fds by asking the kernel (sock_exec.c).  Outside those windows
 * the question costs one load.
 */
#ifndef CXLSHIM_CORE_SOCK_VFORK_H
#define CXLSHIM_CORE_SOCK_VFORK_H

#include <stdatomic.h>

/* Children of vfork running now (parents blocked in vfork), or -1 where
 * the shim cannot see vfork (other architectures): always ask. */
extern _Atomic int cxls_vfork_running;

/* In the parent: before the system call, and after it returned. */
void cxls_sock_vforking(void);
void cxls_sock_vforked(void);
/* Where vfork is not the shim's: the pid is compared on every call. */
void cxls_sock_vfork_unwatched(void);
/* 1 in a child of vfork that has not exec'd yet. */
int cxls_sock_borrowed_slow(void);

static inline int cxls_sock_borrowed(void)
{
	return atomic_load_explicit(&cxls_vfork_running, memory_order_relaxed) &&
	       cxls_sock_borrowed_slow();
}

#endif
