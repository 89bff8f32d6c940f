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

static pthread_once_t once = PTHREAD_ONCE_INIT;

/* A child of fork made while another thread's vfork child ran copies
 * that count: it has its own memory and no child of vfork. */
static void forked_child(void)
{
	atomic_store(&owner, getpid());
	if (atomic_load(&cxls_vfork_running) > 0)
		atomic_store(&cxls_vfork_running, 0);
}

static void watch_forks(void)
{
	pthread_atfork(NULL, NULL, forked_child);
}

void cxls_sock_vforking(void)
{
	pthread_once(&once, watch_forks);
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

void cxls_sock_vfork_unwatched(void)
{
	pthread_once(&once, watch_forks);
	atomic_store(&owner, getpid());
	atomic_store(&cxls_vfork_running, -1);
}

int cxls_sock_borrowed_slow(void)
{
	return getpid() != atomic_load(&owner);
}
