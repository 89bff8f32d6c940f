/* format_claim.h - which of the processes that find a blank pool formats it.
 *
 * flock does not cross hosts, so the decision is made in the pool itself,
 * in the superblock's format_claim word (its own line, outside the
 * checksum).  A contender draws a random token and:
 *
 *   coherent pool: compare-and-swaps the word from 0 (or from a claim
 *     found stale) to its token; the CAS alone decides.
 *   flush pool (no coherence between hosts, so no cross-host CAS):
 *     stores its token, writes the line back, waits SETTLE, re-reads it:
 *     the last writer wins, and every contender that wrote before the
 *     settle ended sees the same last token.  A writer that was delayed
 *     past another's settle still sees its own token: the formatter
 *     re-reads the word once more right before it stores the magic and
 *     gives up when the word is no longer its own, so the late writer
 *     formats instead, and a contender that finds the magic already
 *     stored attaches.
 *
 * The loser waits for the winner's magic and validates the superblock.
 * A claim that stands for CLAIM_STALE without a magic (a formatter killed
 * mid-way) is taken over the same way.
 */
#ifndef CXLSHIM_CORE_FORMAT_CLAIM_H
#define CXLSHIM_CORE_FORMAT_CLAIM_H

#include <stdint.h>

#include "pool_format.h"

enum cxls_claim {
	CXLS_CLAIM_WON = 0,   /* format the pool, then cxls_claim_still_ours() */
	CXLS_CLAIM_MAGIC = 1, /* the pool is formatted: validate it */
	CXLS_CLAIM_ERR = -1,  /* no random token, or no magic after retries */
};

/* Claims a blank pool or waits until its formatter stored the magic. */
int cxls_claim_format(struct cxls_super *sb, int flush_mode, uint64_t *token);
/* Right before storing the magic: 1 when the claim is still ours. */
int cxls_claim_still_ours(struct cxls_super *sb, int flush_mode, uint64_t token);

#endif
