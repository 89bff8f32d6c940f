/* doorbell.h - CPU side of the pool doorbells.
 *
 * A doorbell holds an increasing 32-bit sequence number; "ready for v"
 * means (int32_t)(seq - v) >= 0, the comparison cuStreamWaitValue32's GEQ
 * uses, so wrap-around is harmless.  Waiting spins briefly, then sleeps:
 * on a futex for a same-host (coherent) pool, with exponential backoff and
 * cache-line refreshes for a cross-host (flush) one, where a futex wake
 * from another kernel cannot reach us.
 */
#ifndef CXLSHIM_CORE_DOORBELL_H
#define CXLSHIM_CORE_DOORBELL_H

#include <stdint.h>

#include "pool_format.h"

struct cxls_wait_cfg {
	int flush;
	uint32_t spin_us;
	uint32_t sleep_max_us;
};

static inline int cxls_seq_reached(uint32_t seq, uint32_t v)
{
	return (int32_t)(seq - v) >= 0;
}

void cxls_bell_ring(struct cxls_bell *b, uint32_t v, int flush);
void cxls_bell_wait(struct cxls_bell *b, uint32_t v, const struct cxls_wait_cfg *w);
/* Spins, then sleeps on `word` (bounded futex waits; backing off in flush
 * mode, where futexes do not reach) until ready(arg, &seen) says so;
 * seen: the word's value as ready() checked it. */
void cxls_wait_until(_Atomic uint32_t *word, int (*ready)(void *arg, uint32_t *seen),
		     void *arg, const struct cxls_wait_cfg *w);
/* Pushes the bell far ahead so that every waiter passes (abort). */
void cxls_bell_poison(struct cxls_bell *b, int flush);
uint32_t cxls_bell_read(struct cxls_bell *b, int flush);

#endif
