/* sock_calls.c - a thread's calls in flight on pooled sockets.
 *
 * The table is the thread's own, but a signal handler may make a call of
 * its own in the middle of any change to it.  So a change marks the
 * table busy first, and a handler that finds it busy leaves it alone: its
 * call is counted but not noted (as when the table is full), and it
 * gives back nothing (a later call will). */
#include "sock_calls.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "sock.h"
#include "sock_kept.h"

#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1u << 31) /* linux/signal.h, since Linux 4.7 */
#endif

/* Calls nest only through signal handlers: a few deep at most. */
#define CALLS_MAX 8

struct noted {
	struct cxls_sconn *c;
	const void *frame;
	unsigned judged : 1; /* by address: no disarming signal stack then */
	unsigned counted : 1; /* its count is this process's (not a fork's) */
};

/* Initial-exec: one %fs-relative access, where the general model calls
 * __tls_get_addr in each function (every blocking call enters and
 * leaves); the library is preloaded, so its static TLS is there. */
#define TLS_IE __attribute__((tls_model("initial-exec")))

TLS_IE _Thread_local int cxls_calls_noted;
static TLS_IE _Thread_local struct noted calls[CALLS_MAX];
static TLS_IE _Thread_local int busy;
static TLS_IE _Thread_local int exit_hooked;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int have_exit_key;

/* Marks the table busy; 0 when it was already (a handler in the middle
 * of a change: hands off). */
static int take(void)
{
	if (busy)
		return 0;
	busy = 1;
	atomic_signal_fence(memory_order_seq_cst);
	return 1;
}

static void give(void)
{
	atomic_signal_fence(memory_order_seq_cst);
	busy = 0;
}

/* A thread that ends is in no call: whatever it left is given back. */
static void thread_exits(void *arg)
{
	(void)arg;
	cxls_calls_reap_slow((const void *)UINTPTR_MAX);
}

static void make_exit_key(void)
{
	have_exit_key = pthread_key_create(&exit_key, thread_exits) == 0;
}

static void hook_exit(void)
{
	exit_hooked = 1;
	pthread_once(&exit_once, make_exit_key);
	if (have_exit_key)
		pthread_setspecific(exit_key, (void *)1);
}

/* The thread has a signal stack that the kernel disarms while a handler
 * runs on it (SS_AUTODISARM): that handler may run above a live call and
 * the kernel then says no stack is set, so the call is never judged by
 * address (only at the thread's exit).  Other signal stacks say
 * SS_ONSTACK in their handlers (on_signal_stack).  A system call, not
 * libc's: sanitizer runtimes set their own stacks through it. */
static int disarming_stack(void)
{
	stack_t ss;

	return syscall(SYS_sigaltstack, NULL, &ss) == 0 && (ss.ss_flags & SS_AUTODISARM);
}

int cxls_calls_enter(struct cxls_sconn *c, const void *frame)
{
	int n;

	cxls_kept_call_in(c);
	if (!exit_hooked)
		hook_exit();
	if (!take())
		return -1;
	n = cxls_calls_noted;
	if (n == CALLS_MAX) {
		give();
		return -1;
	}
	calls[n] = (struct noted){ c, frame, !disarming_stack(), 1 };
	cxls_calls_noted = n + 1;
	give();
	return 0;
}

void cxls_calls_leave(struct cxls_sconn *c, const void *frame)
{
	int n;

	cxls_kept_call_out(c);
	if (!take())
		return; /* a handler's call, never noted */
	n = cxls_calls_noted;
	/* the innermost, unless calls it nests in were left (reaped later) */
	for (int i = n - 1; i >= 0; i--) {
		if (calls[i].frame != frame || calls[i].c != c)
			continue;
		for (int j = i; j < n - 1; j++)
			calls[j] = calls[j + 1];
		cxls_calls_noted = n - 1;
		break;
	}
	give();
}

static int on_signal_stack(void)
{
	stack_t ss;

	return sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
}

void cxls_calls_reap_slow(const void *frame)
{
	int exiting = frame == (const void *)UINTPTR_MAX, n, kept = 0, checked = 0;

	if (!take())
		return;
	n = cxls_calls_noted;
	for (int i = 0; i < n; i++) {
		struct noted e = calls[i];

		/* above frame: the call may be running (the handler we are
		 * in interrupted it); at or below it, the stack it was on has
		 * been given back and taken again */
		if (!exiting && (!e.judged || (uintptr_t)e.frame > (uintptr_t)frame)) {
			calls[kept++] = e;
			continue;
		}
		if (!checked++ && !exiting && on_signal_stack()) {
			give();
			return;
		}
		CXLS_INFO("socket call left by a longjmp: its count and reference given back");
		if (e.counted)
			cxls_kept_call_out(e.c);
		cxls_sconn_put(e.c);
	}
	cxls_calls_noted = kept;
	give();
}

/* The fork's child: the counts were its parent's (sock_fd.c zeroes
 * them), the references its own copies. */
void cxls_calls_forked(void)
{
	for (int i = 0; i < cxls_calls_noted; i++)
		calls[i].counted = 0;
}
