/* sock_vfork.c - whose fd records these are: the pid that owns them.
 *
 * The owner is the process that called vfork (set before the first one)
 * and, after a fork, the child (its fork handler).  Any other pid running
 * this code shares the owner's memory without being it.
 */
#include "sock_vfork.h"

#include <pthread.h>
#include <unistd.h>

_Atomic int cxls_vfork_seen;

/* Process-wide by nature: one owner per address space. */
static _Atomic pid_t owner;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void forked_child(void)
{
	atomic_store(&owner, getpid());
}

static void first_vfork(void)
{
	atomic_store(&owner, getpid());
	pthread_atfork(NULL, NULL, forked_child);
}

void cxls_sock_vforking(void)
{
	pthread_once(&once, first_vfork);
	atomic_store(&cxls_vfork_seen, 1);
}

int cxls_sock_borrowed_slow(void)
{
	return getpid() != atomic_load(&owner);
}
