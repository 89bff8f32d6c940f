/* sock_sigwin.c - signals between the wait slices of a blocking call. */
#include "sock_sigwin.h"

#include <errno.h>
#include <pthread.h>

#include "lib_thread.h"
#include "sock_claim.h"

int cxls_sigwin_block(struct cxls_sigwin *w)
{
	sigset_t all;

	if (!w->blocked) {
		/* glibc keeps its own signals (cancellation, setxid) out; a
		 * fault's must come at once, to its handler (a blocked one
		 * the kernel delivers by its default: the process dies) */
		cxls_sigfill_but_faults(&all);
		w->blocked = pthread_sigmask(SIG_BLOCK, &all, &w->old) == 0;
	}
	cxls_claim_test_delay("slice-gap"); /* tests widen the gap */
	return w->blocked;
}

void cxls_sigwin_restore(struct cxls_sigwin *w)
{
	int err = errno;

	pthread_sigmask(SIG_SETMASK, &w->old, NULL);
	w->blocked = 0;
	errno = err;
}
