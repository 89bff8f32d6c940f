/* doorbell.c - ring, wait for and poison doorbells from the CPU. */
#include "doorbell.h"

#include <time.h>

#include "coherence.h"
#include "futex.h"
#include "proc_id.h"

#define POISON_STEP (1u << 30)

uint32_t cxls_bell_read(struct cxls_bell *b, int flush)
{
	cxls_refresh(flush, &b->seq, sizeof(b->seq));
	return atomic_load_explicit(&b->seq, memory_order_acquire);
}

void cxls_bell_ring(struct cxls_bell *b, uint32_t v, int flush)
{
	atomic_store_explicit(&b->seq, v, memory_order_release);
	cxls_publish(flush, &b->seq, sizeof(b->seq));
	if (!flush)
		cxls_futex_wake(&b->seq);
}

void cxls_bell_poison(struct cxls_bell *b, int flush)
{
	atomic_fetch_add(&b->seq, POISON_STEP);
	cxls_publish(flush, &b->seq, sizeof(b->seq));
	cxls_futex_wake(&b->seq);
}

void cxls_wait_until(_Atomic uint32_t *word, int (*ready)(void *arg, uint32_t *seen),
		     void *arg, const struct cxls_wait_cfg *w)
{
	uint64_t spin_end = cxls_now_ns() + (uint64_t)w->spin_us * 1000ull;
	long sleep_ns = 1000;
	uint32_t seen;

	for (;;) {
		if (ready(arg, &seen))
			return;
		if (cxls_now_ns() < spin_end) {
			cxls_cpu_relax();
			continue;
		}
		if (!w->flush) {
			/* bounded, so a ring from a host without futex access
			 * (or a lost wake) still gets noticed; on the word as
			 * checked, so a write since wakes at once */
			cxls_futex_wait(word, seen, 10 * 1000000L);
			continue;
		}
		struct timespec ts = { 0, sleep_ns };
		nanosleep(&ts, NULL);
		if (sleep_ns < (long)w->sleep_max_us * 1000L)
			sleep_ns *= 2;
	}
}

struct bell_wait {
	struct cxls_bell *b;
	uint32_t v;
	int flush;
};

static int bell_reached(void *arg, uint32_t *seen)
{
	struct bell_wait *bw = arg;

	*seen = cxls_bell_read(bw->b, bw->flush);
	return cxls_seq_reached(*seen, bw->v);
}

void cxls_bell_wait(struct cxls_bell *b, uint32_t v, const struct cxls_wait_cfg *w)
{
	struct bell_wait bw = { b, v, w->flush };

	cxls_wait_until(&b->seq, bell_reached, &bw, w);
}
