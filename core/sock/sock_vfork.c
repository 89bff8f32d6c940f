/* sock_vfork.c - whose fd records these are, while a child of vfork runs.
 *
 * The parent notes the vfork before the system call (the pid the records
 * belong to, and one more child running) and after it returns (the child
 * has exec'd or exited: one fewer).  Meanwhile a pid other than the
 * parent's running this code is the child.  A child made any other way
 * (fork, _Fork, clone without CLONE_VM) has its own memory, and outside
 * a vfork window nobody is asked at all.
 */
#include "sock_vfork.h"

#include <pthread.h>

#include "sock.h"
#include <unistd.h>

_Atomic int cxls_vfork_running;

/* Process-wide by nature: one parent per address space. */
static _Atomic pid_t owner;

void cxls_sock_vforking(void)
{
	/* the child may exec with any of them: on the pool or not, not
	 * halfway (sock_exec.c) */
	cxls_sock_settle_all();
	atomic_store(&owner, getpid());
	atomic_fetch_add(&cxls_vfork_running, 1);
}

void cxls_sock_vforked(void)
{
	atomic_fetch_sub(&cxls_vfork_running, 1);
}

static void forked_child(void)
{
	atomic_store(&owner, getpid());
}

void cxls_sock_vfork_unwatched(void)
{
	atomic_store(&owner, getpid());
	atomic_store(&cxls_vfork_running, -1);
	pthread_atfork(NULL, NULL, forked_child);
}

int cxls_sock_borrowed_slow(void)
{
	return getpid() != atomic_load(&owner);
}
