/* sock_claim.h - claims of socket records left behind by dead processes.
 *
 * A listener or connection record is claimed with one compare-and-swap
 * (FREE -> CLAIMING under the next generation), written, then published
 * (LIVE, WAITING).  A process killed in between leaves it CLAIMING, and
 * nothing else would ever free the slot.  So, right after its swap and
 * before anything that can block, the claimer records itself as a holder
 * (pid and start time, with its boot hash) and then tags that identity
 * with the generation it claimed (claim_gen).  A CLAIMING record is stale
 * when:
 *
 *   - the tag is its generation and every holder recorded is a process of
 *     this host that is gone (a reused pid has another start time): it
 *     can be taken back at once;
 *   - or the claim cannot be checked from here (the tag is not written
 *     yet, which lasts a few stores, or the claimer runs on another host)
 *     and it has stood for CXLS_CLAIM_LEASE_S since a sweeper first saw
 *     it so: that sweeper writes the generation and its clock
 *     (CLOCK_REALTIME, which the hosts of a rack keep in step) in the
 *     record's lease word, and the later sweeps compare.
 *
 * The taking back is a compare-and-swap of the very state word the
 * sweeper saw, so a claim that was published or made again meanwhile is
 * left alone, and a live claimer of this host is never robbed.
 */
#ifndef CXLSHIM_CORE_SOCK_CLAIM_H
#define CXLSHIM_CORE_SOCK_CLAIM_H

#include <stdint.h>

#include "sock_format.h"

#define CXLS_CLAIM_LEASE_S 30u

enum cxls_claimer { CXLS_CLAIMER_ALIVE, CXLS_CLAIMER_DEAD, CXLS_CLAIMER_UNKNOWN };

/* Who holds the claim of a record whose state word is sg (CLAIMING), as
 * far as this host can tell, without writing anything. */
enum cxls_claimer cxls_claimer_of(uint64_t sg, const _Atomic uint32_t *claim_gen,
				  uint64_t boot_hash, const struct cxls_sock_holder *h, int n);

/* The claim of the record whose state word is sg (CLAIMING) may be taken
 * back: 1, or 0.  claim_gen, boot_hash and h[n] are the record's claimer
 * fields; lease its sweepers' word, written here on the first sighting. */
int cxls_claim_stale(uint64_t sg, const _Atomic uint32_t *claim_gen, uint64_t boot_hash,
		     const struct cxls_sock_holder *h, int n, _Atomic uint64_t *lease);

/* Test hook: CXLSHIM_TEST_CLAIM_DELAY_US pauses a claimer between its
 * identity and its publication (where: "record", "listener"), and a
 * connector between reading a listener and checking its generation again
 * ("listener-read"), so that tests can kill it there or change the record
 * under it.  CXLSHIM_TEST_CLAIM_DELAY_AT=WHERE limits it to one place. */
void cxls_claim_test_delay(const char *where);

#endif
