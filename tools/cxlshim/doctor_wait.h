/* doctor_wait.h - the doctor's picture of who waits for whom (doctor.c),
 * shared with the search for wait cycles (doctor_cycle.c). */
#ifndef CXLSHIM_TOOLS_DOCTOR_WAIT_H
#define CXLSHIM_TOOLS_DOCTOR_WAIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "snapshot.h"

/* What one communicator waits for. */
struct diag {
	const struct snap_comm *c;
	int stuck;                    /* op `seq` is not complete everywhere */
	uint32_t seq;
	const struct snap_desc *desc; /* how some rank described op seq */
	uint64_t since_ns;            /* earliest enqueue of op seq (realtime) */
	int dead;                     /* ranks whose process died */
	int root;                     /* a missing rank is idle or dead here */
	char culprits[160];           /* "rank 2 (pid 123) has not called it" */
	int p2p;                      /* a send/receive channel is unmatched */
	char p2p_culprits[160];       /* "rank 1 (pid 124) has not called Recv from rank 0" */
};

/* The operation a queue is in.  NCCLX's rule: the ops of one queue run
 * in the order they were enqueued, so of the ops a queue holds and did
 * not complete, on every communicator, the earliest enqueued is active
 * and the others are pending behind it.  A queue is a stream of one
 * process (the pool records it with each op): a process driving several
 * ranks, or one rank enqueuing on several streams, has several queues,
 * each with its own active op.  Only the next op of each communicator
 * (one past its completed ones) can be active: the ops of a communicator
 * complete in order. */
struct act {
	const struct diag *d;         /* NULL: the queue has no op in flight */
	uint32_t rank, seq;           /* its rank in d's communicator, the op */
	const struct snap_desc *desc;
	uint64_t queue;               /* the op's queue, 0: not recorded */
};

int same_proc(const struct snap_rank *a, const struct snap_rank *b);
const struct snap_desc *desc_of(const struct snap_rank *r, uint32_t seq);
/* The queue rank record r enqueued op seq on; 0 when not recorded. */
uint64_t queue_of(const struct snap_rank *r, uint32_t seq);
/* The active op of queue q of the process holding rank record k (any
 * communicator); q == 0: the earliest op the process has in flight on
 * any queue (what a process that has not called an op may be held by). */
void active_op(const struct diag *all, uint32_t n, const struct snap_rank *k, uint64_t q,
	       struct act *out);
/* "AllReduce(count 4096, float32, sum)" of a's op. */
void act_call(const struct act *a, char *buf, size_t len);

/* Prints every cycle of processes each waiting, in its active op, for the
 * next ("cycle: rank0@slot3#1 -> rank1@slot4#1 -> rank0@slot3#1" and one
 * line per hop); returns how many, or -1 when out of memory. */
int doctor_cycles(const struct diag *all, uint32_t n, FILE *out);

#endif
