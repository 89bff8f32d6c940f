/* lib_thread.h - threads the library starts for itself.
 *
 * They take none of the application's signals (its handlers expect its
 * own threads), except a fault's: a fault with its signal blocked is
 * delivered by its default action, so the process would die without the
 * application's handler or the trace's dump running.
 */
#ifndef CXLSHIM_CORE_LIB_THREAD_H
#define CXLSHIM_CORE_LIB_THREAD_H

#include <pthread.h>
#include <signal.h>

/* Every signal but the faults' (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP,
 * SIGSYS). */
void cxls_sigfill_but_faults(sigset_t *set);

/* pthread_create with that mask on the new thread; its result. */
int cxls_thread_start(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);

#endif
