/* order.c - submission order among the ranks that one thread's group
 * drives on one CUDA context (order.h). */
#include "order.h"

#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "coherence.h"
#include "doorbell.h"
#include "log.h"
#include "proc_id.h"

/* Threads of this process waiting in cxls_order_await: a ring wakes them
 * only when there are some, so ranks without local peers pay nothing. */
static _Atomic int awaiting;

int cxls_order_pair(struct cxls_comm *c, struct cxls_comm *d)
{
	if (c == d || c->view.rec != d->view.rec || c->rank == d->rank)
		return 0;
	if (c->ctx != d->ctx)
		return 1; /* queues of their own: no order to keep */
	c->order_peer[d->rank] = d;
	d->order_peer[c->rank] = c;
	c->order_npeers++;
	d->order_npeers++;
	atomic_store(&c->order_done, 0);
	atomic_store(&d->order_done, 0);
	return 2;
}

void cxls_order_clear(struct cxls_comm *c)
{
	if (!c->order_npeers)
		return;
	memset(c->order_peer, 0, (size_t)c->nranks * sizeof(c->order_peer[0]));
	c->order_npeers = 0;
}

void cxls_order_done(struct cxls_comm *c)
{
	atomic_store(&c->order_done, 1);
}

void cxls_order_begin(struct cxls_comm *c)
{
	atomic_store(&c->order_done, 0);
}

void cxls_order_queued(struct cxls_comm *c, struct cxls_bell *b, uint32_t v)
{
	/* only a rank of this process reads it: unpaired, nothing to say */
	if (!c->order_npeers)
		return;
	/* seq_cst, as the waiters' count and their re-check: either the
	 * ring sees them, or they see the value */
	atomic_store(&b->queued, v);
	/* in a pool without coherence a dirty line written back later would
	 * undo another host's raise of the bell (an abort's) */
	cxls_publish(c->pool->flush_mode, &b->queued, sizeof(b->queued));
	if (atomic_load(&awaiting))
		syscall(SYS_futex, &b->queued, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int submitted(struct cxls_bell *b, uint32_t v, uint32_t *q)
{
	*q = atomic_load(&b->queued);
	return cxls_seq_reached(*q, v) || cxls_seq_reached(atomic_load(&b->seq), v);
}

void cxls_order_await(struct cxls_comm *c, int owner, struct cxls_bell *b, uint32_t v)
{
	uint32_t ms = c->timeout_ms ? c->timeout_ms : 60000, q;
	uint64_t deadline;
	const struct cxls_comm *peer = c->order_npeers ? c->order_peer[owner] : NULL;

	if (!peer || submitted(b, v, &q))
		return;
	CXLS_TRACE("waiting for rank %d of this process to submit doorbell value %u", owner, v);
	deadline = cxls_now_ns() + (uint64_t)ms * 1000000ull;
	atomic_fetch_add(&awaiting, 1);
	/* the peer's part of the group may end without the ring: its calls
	 * dropped (finalized, failed checks); then its waits here are left
	 * to the GPU and the watchdog, as between processes */
	while (!submitted(b, v, &q) && !atomic_load(&c->aborted) &&
	       !atomic_load(&peer->order_done)) {
		struct timespec slice = { 0, 10 * 1000000L };

		if (cxls_now_ns() >= deadline) {
			CXLS_WARN("rank %d of this process has not submitted doorbell value %u in "
				  "%u ms: submitting the wait for it anyway (a GPU may hang on it)",
				  owner, v, ms);
			c->order_peer[owner] = NULL;
			break;
		}
		/* bounded: the ring may have come before we slept */
		syscall(SYS_futex, &b->queued, FUTEX_WAIT, q, &slice, NULL, 0);
	}
	atomic_fetch_sub(&awaiting, 1);
}
