/* sock_peek.h - SO_PEEK_OFF of a pooled socket (TCP's since Linux 6.9).
 *
 * The offset belongs to the file, as O_NONBLOCK does: dup'd fds, forked
 * holders, an exec'd image and a process the socket was passed to share
 * it.  So a pooled end keeps it in the pool (peek_off), valid once its
 * flags say CXLS_END_PEEK_OFF: a program that never set it pays one bit
 * test of the flags per read, nothing more.  The kernel socket, which now
 * carries doorbells, keeps -1: the shim's own peeks at it (FIN, RST) must
 * start at its first byte; getsockopt answers the pool's value.
 */
#ifndef CXLSHIM_CORE_SOCK_PEEK_H
#define CXLSHIM_CORE_SOCK_PEEK_H

#include <stdint.h>

#include "sock_conn.h"

/* Whether c's file has SO_PEEK_OFF set (any value, -1 included). */
static inline int cxls_peek_off_set(struct cxls_sconn *c)
{
	return (atomic_load_explicit(&c->me->flags, memory_order_acquire) &
		CXLS_END_PEEK_OFF) != 0;
}

/* Where a peek starts: the offset, 0 when it is negative (tcp_recvmsg's
 * max(sk_peek_offset(), 0)).  Only when cxls_peek_off_set(). */
static inline uint64_t cxls_peek_off_start(struct cxls_sconn *c)
{
	int32_t v = atomic_load_explicit(&c->me->peek_off, memory_order_relaxed);

	return v > 0 ? (uint64_t)v : 0;
}

/* n bytes were peeked (forward) or read (back): the offset moves with
 * them as sk_peek_offset_fwd/bwd move it, and a negative one stays. */
void cxls_peek_off_move(struct cxls_sconn *c, int64_t n);

/* The connection just went to the pool: an offset the application set
 * on the kernel socket before (or on the listener it was accepted from)
 * moves to the end.  Looked for only in a process that set one. */
void cxls_sock_peek_off_take(struct cxls_sconn *c, int fd);

#endif
