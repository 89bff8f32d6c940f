/* order.c - submission order among the ranks of one process on one CUDA
 * context (order.h). */
#include "order.h"

#include <limits.h>
#include <pthread.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "doorbell.h"
#include "log.h"
#include "proc_id.h"
#include "registry.h"

/* Threads of this process waiting in cxls_order_await: a ring wakes them
 * only when there are some, so ranks without local peers pay nothing. */
static _Atomic int awaiting;

static void mark_local(struct cxls_comm *d, void *arg)
{
	struct cxls_comm *c = arg;

	if (d != c && d->view.rec == c->view.rec && d->ctx == c->ctx && d->rank >= 0 &&
	    d->rank < c->nranks && !atomic_load(&d->aborted))
		c->order_local[d->rank] = pthread_equal(d->home, pthread_self()) ? 2 : 1;
}

int cxls_order_scan(struct cxls_comm *c)
{
	int n = 0;

	memset(c->order_local, 0, sizeof(c->order_local));
	cxls_registry_each(mark_local, c);
	for (int r = 0; r < c->nranks; r++)
		n += c->order_local[r] != 0;
	c->order_nlocal = n;
	return n;
}

void cxls_order_queued(struct cxls_comm *c, struct cxls_bell *b, uint32_t v)
{
	(void)c;
	atomic_store_explicit(&b->queued, v, memory_order_release);
	if (atomic_load_explicit(&awaiting, memory_order_acquire))
		syscall(SYS_futex, &b->queued, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int submitted(struct cxls_bell *b, uint32_t v, uint32_t *q)
{
	*q = atomic_load_explicit(&b->queued, memory_order_acquire);
	return cxls_seq_reached(*q, v) ||
	       cxls_seq_reached(atomic_load_explicit(&b->seq, memory_order_acquire), v);
}

void cxls_order_await(struct cxls_comm *c, int owner, struct cxls_bell *b, uint32_t v)
{
	uint64_t deadline;
	uint32_t q;

	/* a rank this thread made is most likely driven by it too: waiting
	 * for it here would wait for a call this thread has still to make
	 * (one thread driving several ranks outside a group, which NCCL
	 * forbids: a group's end gives each rank a thread, group.c) */
	if (!c->order_nlocal || c->order_local[owner] != 1 || submitted(b, v, &q))
		return;
	CXLS_TRACE("waiting for rank %d of this process to submit doorbell value %u", owner, v);
	deadline = cxls_now_ns() + (uint64_t)(c->timeout_ms ? c->timeout_ms : 60000) * 1000000ull;
	atomic_fetch_add(&awaiting, 1);
	while (!submitted(b, v, &q) && !atomic_load(&c->aborted)) {
		struct timespec slice = { 0, 10 * 1000000L };

		if (cxls_now_ns() >= deadline) {
			CXLS_WARN("rank %d of this process has not submitted doorbell value %u in "
				  "%u ms: submitting the wait for it anyway (one thread driving "
				  "several ranks outside a group?)", owner, v, c->timeout_ms);
			break;
		}
		/* bounded: the ring may have come before we slept */
		syscall(SYS_futex, &b->queued, FUTEX_WAIT, q, &slice, NULL, 0);
	}
	atomic_fetch_sub(&awaiting, 1);
}
