/* hwqueue.c - the hardware queues a context's streams share.
 *
 * A GPU has a few hardware work queues ("connections",
 * CUDA_DEVICE_MAX_CONNECTIONS) per context, and the driver maps every
 * stream onto one of them; copies may share the copy engines' queues too.
 * A queue starts its work in the order it was submitted, whatever stream
 * it came from, and a wait at its head (a value wait, an event wait, a
 * host function the stream must wait for) holds up everything behind it.
 * cuStreamWaitValue32 warns about it: "Improper use of this API may
 * deadlock the application ... the scheduler [may] serialize them in an
 * improper order."  So a program that submits a wait before the write that
 * ends it, on another stream of the same process, may hang on a GPU and
 * would pass on an emulation whose streams are all independent.
 *
 * With CUDAEMU_CONNECTIONS=n, a context's streams are dealt round-robin
 * onto n queues: each op takes a ticket from its stream's queue when it is
 * submitted, may begin only after the op with the ticket before it began,
 * and an op that waits (value, event, another stream, host function or
 * callback) begins only once its wait is over.  1 is the strictest: every
 * stream of the context behind one queue, the order a driver is allowed
 * to choose.  0 (the default) keeps every stream independent.
 *
 * Ops held back as "late" (late.c) take no ticket: CUDA lets them finish
 * after the call, and they wait for nothing.  A graph launch takes one
 * ticket and begins at once: the driver spreads a graph over streams of
 * its own.
 */
#include "emu.h"

#include <stdlib.h>

struct emu_hwq {
	pthread_mutex_t lock;
	pthread_cond_t turn;
	uint64_t issued;	/* tickets handed out */
	uint64_t begun;		/* every ticket up to this one began */
};

struct emu_hwqs {
	unsigned n;
	atomic_uint next;	/* the queue the next stream gets */
	struct emu_hwq q[];
};

struct emu_hwqs *emu_hwqs_new(unsigned n)
{
	struct emu_hwqs *qs;

	if (!n)
		return NULL;
	qs = calloc(1, sizeof(*qs) + n * sizeof(qs->q[0]));
	if (!qs)
		return NULL;
	qs->n = n;
	atomic_init(&qs->next, 0);
	for (unsigned i = 0; i < n; i++) {
		pthread_mutex_init(&qs->q[i].lock, NULL);
		pthread_cond_init(&qs->q[i].turn, NULL);
	}
	return qs;
}

void emu_hwqs_free(struct emu_hwqs *qs)
{
	if (!qs)
		return;
	for (unsigned i = 0; i < qs->n; i++) {
		pthread_cond_destroy(&qs->q[i].turn);
		pthread_mutex_destroy(&qs->q[i].lock);
	}
	free(qs);
}

struct emu_hwq *emu_hwq_assign(struct emu_hwqs *qs)
{
	if (!qs)
		return NULL;
	return &qs->q[atomic_fetch_add(&qs->next, 1) % qs->n];
}

uint64_t emu_hwq_ticket(struct emu_hwq *q)
{
	uint64_t t;

	pthread_mutex_lock(&q->lock);
	t = ++q->issued;
	pthread_mutex_unlock(&q->lock);
	return t;
}

/* Ops that hold their queue until their wait is over. */
static bool op_waits(const struct emu_op *op)
{
	switch (op->kind) {
	case EMU_OP_WAIT_VALUE:
	case EMU_OP_EVENT_WAIT:
	case EMU_OP_STREAM_WAIT:
	case EMU_OP_HOST_FN:
	case EMU_OP_CALLBACK:
		return true;
	default:
		return false;
	}
}

static void mark_begun(struct emu_hwq *q, uint64_t ticket)
{
	pthread_mutex_lock(&q->lock);
	q->begun = ticket;
	pthread_cond_broadcast(&q->turn);
	pthread_mutex_unlock(&q->lock);
}

void emu_hwq_enter(struct emu_hwq *q, uint64_t ticket, const struct emu_op *op)
{
	pthread_mutex_lock(&q->lock);
	while (q->begun != ticket - 1)
		pthread_cond_wait(&q->turn, &q->lock);
	pthread_mutex_unlock(&q->lock);
	if (!op_waits(op))
		mark_begun(q, ticket);
}

void emu_hwq_leave(struct emu_hwq *q, uint64_t ticket, const struct emu_op *op)
{
	if (op_waits(op))
		mark_begun(q, ticket);
}
