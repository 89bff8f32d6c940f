/* sock_calls.c - a thread's calls in flight on pooled sockets. */
#include "sock_calls.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "log.h"
#include "sock.h"
#include "sock_kept.h"

/* Calls nest only through signal handlers: a few deep at most. */
#define CALLS_MAX 8

struct noted {
	struct cxls_sconn *c;
	const void *frame;
};

_Thread_local int cxls_calls_noted;
static _Thread_local struct noted calls[CALLS_MAX];

int cxls_calls_enter(struct cxls_sconn *c, const void *frame)
{
	int n = cxls_calls_noted;

	cxls_kept_call_in(c);
	if (n == CALLS_MAX)
		return -1;
	calls[n] = (struct noted){ c, frame };
	/* a handler that lands here sees the entry whole or not at all */
	atomic_signal_fence(memory_order_seq_cst);
	cxls_calls_noted = n + 1;
	return 0;
}

void cxls_calls_leave(struct cxls_sconn *c, const void *frame)
{
	int n = cxls_calls_noted;

	cxls_kept_call_out(c);
	/* the innermost, unless calls it nests in were left (reaped later) */
	for (int i = n - 1; i >= 0; i--) {
		if (calls[i].frame != frame || calls[i].c != c)
			continue;
		for (int j = i; j < n - 1; j++)
			calls[j] = calls[j + 1];
		atomic_signal_fence(memory_order_seq_cst);
		cxls_calls_noted = n - 1;
		return;
	}
}

static int on_signal_stack(void)
{
	stack_t ss;

	return sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
}

void cxls_calls_reap_slow(const void *frame)
{
	int n = cxls_calls_noted, kept = 0, checked = 0;

	for (int i = 0; i < n; i++) {
		struct noted e = calls[i];

		/* above frame: the call may be running (the handler we are
		 * in interrupted it); at or below it, the stack it was on has
		 * been given back and taken again */
		if ((uintptr_t)e.frame > (uintptr_t)frame) {
			calls[kept++] = e;
			continue;
		}
		if (!checked++ && on_signal_stack())
			return;
		CXLS_INFO("socket call left by a longjmp: its count and reference given back");
		cxls_kept_call_out(e.c);
		cxls_sconn_put(e.c);
	}
	atomic_signal_fence(memory_order_seq_cst);
	cxls_calls_noted = kept;
}
