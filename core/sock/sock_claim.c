/* sock_claim.c - see sock_claim.h. */
#include "sock_claim.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "proc_id.h"
#include "sock_holder.h"

_Static_assert((int)CXLS_SK_CLAIMING == (int)CXLS_LST_CLAIMING, "one CLAIMING for both kinds of record");

static uint32_t wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint32_t)ts.tv_sec;
}

static uint32_t lease_s(void)
{
	const char *s = getenv("CXLSHIM_TEST_CLAIM_LEASE_S");

	return s ? (uint32_t)strtoul(s, NULL, 10) : CXLS_CLAIM_LEASE_S;
}

/* The first sighting of this claim starts its lease; 1 once it ran out. */
static int lease_over(uint32_t gen, _Atomic uint64_t *lease)
{
	uint64_t seen = atomic_load(lease), now = wall_s();

	if ((uint32_t)(seen >> 32) != gen) {
		atomic_compare_exchange_strong(lease, &seen, ((uint64_t)gen << 32) | now);
		return 0;
	}
	return (uint32_t)(now - (uint32_t)seen) >= lease_s();
}

enum cxls_claimer cxls_claimer_of(uint64_t sg, const _Atomic uint32_t *claim_gen,
				  uint64_t boot_hash, const struct cxls_sock_holder *h, int n)
{
	struct cxls_proc_id self;
	int recorded, alive;

	cxls_proc_self(&self);
	if (atomic_load_explicit(claim_gen, memory_order_acquire) != CXLS_SG_GEN(sg) ||
	    boot_hash != self.boot_hash)
		return CXLS_CLAIMER_UNKNOWN;
	alive = cxls_holder_alive(h, n, boot_hash, &recorded);
	return recorded > 0 && alive == 0 ? CXLS_CLAIMER_DEAD : CXLS_CLAIMER_ALIVE;
}

int cxls_claim_stale(uint64_t sg, const _Atomic uint32_t *claim_gen, uint64_t boot_hash,
		     const struct cxls_sock_holder *h, int n, _Atomic uint64_t *lease)
{
	if (CXLS_SG_STATE(sg) != CXLS_SK_CLAIMING)
		return 0;
	switch (cxls_claimer_of(sg, claim_gen, boot_hash, h, n)) {
	case CXLS_CLAIMER_DEAD:
		return 1;
	case CXLS_CLAIMER_UNKNOWN:
		return lease_over(CXLS_SG_GEN(sg), lease);
	default: /* a live claimer of this host is never robbed */
		return 0;
	}
}

void cxls_claim_test_delay(const char *where)
{
	const char *us = getenv("CXLSHIM_TEST_CLAIM_DELAY_US");
	const char *at = getenv("CXLSHIM_TEST_CLAIM_DELAY_AT");
	struct timespec ts;
	unsigned long v;

	if (!us || (at && strcmp(at, where)))
		return;
	v = strtoul(us, NULL, 10);
	CXLS_TRACE("test delay: %lu us at %s", v, where);
	ts.tv_sec = (time_t)(v / 1000000);
	ts.tv_nsec = (long)(v % 1000000) * 1000;
	while (nanosleep(&ts, &ts))
		;
}
