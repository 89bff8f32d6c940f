/* sock_vfork.h - a child of vfork runs in its parent's memory.
 *
 * Until it execs, such a child (Python's subprocess, vfork and exec in C)
 * closes, dups and close_range()s its own copy of the fd table, through
 * the shim's entry points, while the shim's records of fds are its
 * parent's.  Those records must not change: the child hands every such
 * call straight to the kernel, and its exec finds its pooled fds by asking
 * the kernel (sock_exec.c).  A child of fork gets its own memory and its
 * fork handler makes it the owner of its copy.
 */
#ifndef CXLSHIM_CORE_SOCK_VFORK_H
#define CXLSHIM_CORE_SOCK_VFORK_H

#include <stdatomic.h>

/* Set before the first vfork: until then no child shares our memory, and
 * cxls_sock_borrowed() costs one load. */
extern _Atomic int cxls_vfork_seen;

/* Before the real vfork, in the parent. */
void cxls_sock_vforking(void);
/* 1 in a child of vfork (or of clone with CLONE_VM, when the parent used
 * vfork before): the shim's fd records are not this process's. */
int cxls_sock_borrowed_slow(void);

static inline int cxls_sock_borrowed(void)
{
	return atomic_load_explicit(&cxls_vfork_seen, memory_order_relaxed) &&
	       cxls_sock_borrowed_slow();
}

#endif
