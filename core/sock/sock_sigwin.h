/* sock_sigwin.h - signals between the wait slices of a blocking call.
 *
 * A blocking call on a pooled socket sleeps in slices (sock_chan.h), with
 * the shim's work between them in user space: a signal that lands there
 * runs its handler, and the next slice sleeps on where the kernel's call
 * would have returned EINTR (or restarted, as the handlers say).  So from
 * a call's second sleep on, signals stay blocked between the sleeps and
 * come in only inside them, by the sleep's own mask (ppoll, epoll_pwait:
 * atomically), so that one that came between interrupts the next sleep at
 * once.  The first sleep goes without: most calls end in it (a wake-up
 * with data), and pay nothing; only the gap right after it, once per
 * call, is left.  The mask is the thread's own again when the call
 * returns, which delivers what came meanwhile and was not let in.
 */
#ifndef CXLSHIM_CORE_SOCK_SIGWIN_H
#define CXLSHIM_CORE_SOCK_SIGWIN_H

#include <signal.h>

struct cxls_sigwin {
	int sleeps;   /* so far in this call */
	int blocked;  /* signals blocked, since the second */
	sigset_t old; /* the thread's mask before */
};

#define CXLS_SIGWIN_INIT { 0, 0, { { 0 } } }

/* As CXLS_SIGWIN_INIT, without writing the saved mask (128 bytes) that
 * only a blocking call's second sleep fills: reads and writes start so. */
static inline void cxls_sigwin_init(struct cxls_sigwin *w)
{
	w->sleeps = 0;
	w->blocked = 0;
}

/* The out-of-line halves of the two below. */
int cxls_sigwin_block(struct cxls_sigwin *w);
void cxls_sigwin_restore(struct cxls_sigwin *w);

/* Before each sleep of the call: from the second on signals are blocked
 * (once).  1 when they are.  (The first sleep's path is inline: a round
 * trip's read takes it.) */
static inline int cxls_sigwin_sleep(struct cxls_sigwin *w)
{
	return ++w->sleeps < 2 ? 0 : cxls_sigwin_block(w);
}

/* The mask a sleep lets signals in with: the call's own (ppoll's,
 * pselect's, epoll_pwait's) if it has one, else the thread's from before
 * the call once blocked, else NULL (the thread's). */
static inline const sigset_t *cxls_sigwin_mask(const struct cxls_sigwin *w, const sigset_t *mask)
{
	return mask ? mask : w->blocked ? &w->old : NULL;
}

/* The call returns: the thread's mask as it was. */
static inline void cxls_sigwin_end(struct cxls_sigwin *w)
{
	if (w->blocked)
		cxls_sigwin_restore(w);
}

#endif
