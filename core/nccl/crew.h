/* crew.h - threads kept to run communicators' parts of a group's end.
 *
 * A group's end that drives ranks of one communicator from one thread
 * runs each rank's part on a thread of its own (group.c, order.h).
 * Creating and joining those threads cost about 150 us a group, more
 * than a small AllReduce; the crew keeps them parked between groups, so
 * a group's end only wakes them.
 *
 * The threads take no signal of the application's but a fault's
 * (lib_thread.h), and a forked child starts with no crew: its threads
 * did not survive the fork.
 */
#ifndef CXLSHIM_CORE_NCCL_CREW_H
#define CXLSHIM_CORE_NCCL_CREW_H

#include <pthread.h>

/* Parked threads past this many exit: a process drives a few ranks per
 * device at most, and each parked thread holds a stack. */
#define CXLS_CREW_MAX_PARKED 32

/* What a caller waits on for the jobs it handed out. */
struct cxls_crew_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned left;
};

#define CXLS_CREW_WAIT_INIT { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 }

struct cxls_crew_member;

/* A crew thread for one job (a parked one, else a new one), or NULL when
 * none could be had: the caller then runs the job itself.  Hiring all
 * of a group's threads before any job starts tells the group's end, up
 * front, which parts run at once. */
struct cxls_crew_member *cxls_crew_hire(void);

/* Runs fn(arg) on m, counted in w; m parks again when fn returns.  The
 * job uses w until it is done: the caller must not be cancelled before
 * its cxls_crew_wait(w) returns. */
void cxls_crew_run(struct cxls_crew_member *m, void (*fn)(void *), void *arg,
		   struct cxls_crew_wait *w);

/* Returns once every job counted in w has returned. */
void cxls_crew_wait(struct cxls_crew_wait *w);

#endif
