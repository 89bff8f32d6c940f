/* lib_thread.c - threads the library starts for itself (lib_thread.h). */
#include "lib_thread.h"

static const int faults[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS };

void cxls_sigfill_but_faults(sigset_t *set)
{
	sigfillset(set);
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		sigdelset(set, faults[i]);
}

int cxls_thread_start(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	sigset_t quiet, old;
	int rc;

	/* the new thread inherits the mask it is created under */
	cxls_sigfill_but_faults(&quiet);
	pthread_sigmask(SIG_SETMASK, &quiet, &old);
	rc = pthread_create(t, attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}
