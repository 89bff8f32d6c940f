/* format_claim.c - the in-pool claim on a blank pool (format_claim.h). */
#include "format_claim.h"

#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

#include "coherence.h"
#include "log.h"
#include "proc_id.h"

/* Longer than any contender needs between reading an empty claim and
 * writing its own back (a few stores, unless it is preempted). */
#define SETTLE_NS (100ull * 1000000ull)
/* Formatting writes one page: a claim this old without a magic is dead. */
#define CLAIM_STALE_NS (5ull * 1000000000ull)
#define POLL_NS (1000000ull)
#define MAX_ROUNDS 8

static void nap(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	nanosleep(&ts, NULL);
}

static uint64_t magic_of(struct cxls_super *sb, int flush_mode)
{
	cxls_refresh(flush_mode, sb, CXLS_LINE);
	return atomic_load((_Atomic uint64_t *)&sb->magic);
}

static uint64_t claim_of(struct cxls_super *sb, int flush_mode)
{
	cxls_refresh(flush_mode, &sb->format_claim, CXLS_LINE);
	return atomic_load(&sb->format_claim);
}

/* Test hook: a pause between reading the claim and writing one, so that
 * contenders that start a little apart (processes on two cores, or two
 * guests) all find the pool blank, as racing hosts may (tests/unit/
 * test_pool.c, tests/ops/format_race.sh). */
static void test_delay(void)
{
	const char *us = getenv("CXLSHIM_TEST_CLAIM_DELAY_US");

	if (us)
		nap(strtoull(us, NULL, 10) * 1000ull);
}

/* Replaces `seen` (0 or a stale claim) by token; 1 when it is ours now. */
static int take(struct cxls_super *sb, int flush_mode, uint64_t seen, uint64_t token)
{
	test_delay();
	if (!flush_mode)
		return atomic_compare_exchange_strong(&sb->format_claim, &seen, token);
	if (claim_of(sb, flush_mode) != seen)
		return 0;
	test_delay();
	atomic_store(&sb->format_claim, token);
	cxls_publish(flush_mode, &sb->format_claim, CXLS_LINE);
	nap(SETTLE_NS);
	return claim_of(sb, flush_mode) == token;
}

/* Waits for the magic while the claim stands; returns 1 when the magic is
 * there, 0 with *stale set when the claim stood too long without one (or
 * 0 when it was released). */
static int await_magic(struct cxls_super *sb, int flush_mode, uint64_t *stale)
{
	uint64_t seen = claim_of(sb, flush_mode), since = cxls_now_ns();

	for (;;) {
		uint64_t cur;

		if (magic_of(sb, flush_mode))
			return 1;
		cur = claim_of(sb, flush_mode);
		if (!cur) { /* released by a formatter that failed: claim again */
			*stale = 0;
			return 0;
		}
		if (cur != seen) {
			seen = cur;
			since = cxls_now_ns();
		} else if (cxls_now_ns() - since > CLAIM_STALE_NS) {
			*stale = cur;
			return 0;
		}
		nap(POLL_NS);
	}
}

int cxls_claim_format(struct cxls_super *sb, int flush_mode, uint64_t *token)
{
	uint64_t seen = 0;

	if (getrandom(token, sizeof(*token), 0) != sizeof(*token))
		return CXLS_CLAIM_ERR;
	*token |= 1; /* never 0, the empty claim */
	for (int round = 0; round < MAX_ROUNDS; round++) {
		if (magic_of(sb, flush_mode))
			return CXLS_CLAIM_MAGIC;
		if (claim_of(sb, flush_mode) == seen && take(sb, flush_mode, seen, *token)) {
			/* a late writer's settle may have ended after a magic */
			if (magic_of(sb, flush_mode))
				return CXLS_CLAIM_MAGIC;
			if (seen)
				CXLS_WARN("pool: took over the format claim of a formatter that "
					  "stopped %llu s ago", CLAIM_STALE_NS / 1000000000ull);
			return CXLS_CLAIM_WON;
		}
		seen = 0;
		if (await_magic(sb, flush_mode, &seen))
			return CXLS_CLAIM_MAGIC;
	}
	return CXLS_CLAIM_ERR;
}

int cxls_claim_still_ours(struct cxls_super *sb, int flush_mode, uint64_t token)
{
	return claim_of(sb, flush_mode) == token;
}
