/* sock_kept.h - the kernel socket of a pooled connection whose last fd was
 * closed while another thread was in a call on it.
 *
 * The kernel keeps a socket for a call in flight (the call holds the
 * file): a read blocked when another thread closes the fd goes on, the
 * bytes the peer sends next reach it, and the peer sees the FIN only when
 * the call has returned and let the file go.  The shim's calls sleep on
 * the fd and ring doorbells through it, but a close frees the number (the
 * next open may take it), so the closing thread keeps a copy of the fd for
 * them; the connection's last reference gives the end up and closes the
 * copy, as the application's close would have.
 */
#ifndef CXLSHIM_CORE_SOCK_KEPT_H
#define CXLSHIM_CORE_SOCK_KEPT_H

#include <stdatomic.h>

#include "sock_conn.h"

/* A call that may wait on c (a read, a write, a poll) is in flight in
 * this process: a close of c's last fd meanwhile keeps the socket for it.
 * A forked child counts none (sock_fd.c: fork_phase). */
static inline void cxls_kept_call_in(struct cxls_sconn *c)
{
	atomic_fetch_add(&c->calls, 1);
}

/* Never below 0: a forked child counts none of its parent's calls, but
 * the forking thread may be inside one (a handler that forks), which
 * then ends in the child too. */
static inline void cxls_kept_call_out(struct cxls_sconn *c)
{
	int n = atomic_load(&c->calls);

	while (n > 0 && !atomic_compare_exchange_weak(&c->calls, &n, n - 1))
		;
}

/* fd, c's last fd, is about to be closed while calls are in flight on c:
 * keep the socket for them (a private fd: sock_private_fd.h).  Without a
 * copy (the fd limit) they end with EBADF at their next wait and the peer
 * sees the end at once. */
void cxls_kept_take(struct cxls_sconn *c, int fd);
/* c's last reference is going, with a copy kept: before the end is given
 * up, the doorbells left unread are read (the kernel would reset instead
 * of FIN); after, the copy is closed.  No-ops without a copy. */
void cxls_kept_drain(struct cxls_sconn *c);
void cxls_kept_close(struct cxls_sconn *c);

/* The fd a call on c that was given fd sleeps and rings on: fd while the
 * application has c open, the kept copy after its last close (-1: none). */
static inline int cxls_kept_fd_of(struct cxls_sconn *c, int fd)
{
	return atomic_load(&c->fds) > 0 ? fd : atomic_load(&c->kept_fd);
}

/* fork: the copies are the parent's calls', which the child has none of. */
void cxls_kept_fork_prepare(void);
void cxls_kept_fork_parent(void);
void cxls_kept_fork_child(void);

#endif
