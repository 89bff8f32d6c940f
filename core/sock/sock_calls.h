/* sock_calls.h - a thread's calls in flight on pooled sockets.
 *
 * A read or a write that waits counts itself on its connection (a close
 * meanwhile keeps the socket for it: sock_kept.h) and its caller holds a
 * reference.  A signal handler that longjmps out of the wait skips the
 * call's return, so both would stay: a later close of the socket kept it
 * open for a call that no longer exists, and the peer never saw the FIN
 * (alarm() and siglongjmp() around a blocking read, an old way to time it
 * out).  So each thread notes its counted calls with the address of the
 * call's state on its stack.  A frame of the shim above that address
 * (stacks grow down) cannot be running inside the call, as a handler
 * nested in it runs below it: the call was left, and its count and the
 * reference are given back; a thread that exits gives back all it left.
 * On a signal stack nothing is judged; the calls of a thread whose
 * signal stack the kernel disarms in its handlers (SS_AUTODISARM: they
 * may run at any address, above a live call too, and the kernel then
 * says no stack is set) are judged only at its exit; a thread with
 * several stacks of its own (coroutines switched from a handler) is not
 * supported.  poll and select count their sockets
 * outside this table: one left so keeps them.
 */
#ifndef CXLSHIM_CORE_SOCK_CALLS_H
#define CXLSHIM_CORE_SOCK_CALLS_H

#include "sock_conn.h"

/* The call whose state is at `frame` counts itself on c (its first
 * wait).  0, or -1 when the thread's table is full: counted, not noted. */
int cxls_calls_enter(struct cxls_sconn *c, const void *frame);
/* It returns: its count goes (noted or not). */
void cxls_calls_leave(struct cxls_sconn *c, const void *frame);

/* In a fork's child (the forking thread's table). */
void cxls_calls_forked(void);

extern __attribute__((tls_model("initial-exec"))) _Thread_local int cxls_calls_noted;

void cxls_calls_reap_slow(const void *frame);

/* The calls this thread left, as seen from a frame of the shim (the
 * entry of a close, or a call's own state): given back.  Inline while
 * the thread has none. */
static inline void cxls_calls_reap(const void *frame)
{
	if (cxls_calls_noted)
		cxls_calls_reap_slow(frame);
}

#endif
