/* sock_meet_decline.c - an end that stays on TCP (policy, io_uring, a
 * denial, no slot) tells its peer in the pool, which would otherwise wait
 * out its window; and a peer's ABANDONED record, once found, is freed.
 */
#include "sock_meet_int.h"

#include "coherence.h"
#include "pool.h"
#include "sock_rules.h"
#include "sock_uring.h"

/* The peer's record, ABANDONED (with sg) for us to find: found, it has
 * served (its end stays on TCP, and so do we): freed now rather than
 * after STALE_NS, which under connection churn kept the table full. */
void cxls_meet_found_abandoned(const struct cxls_sock_region *r, uint32_t slot, uint64_t sg)
{
	struct cxls_sock_rec *rec = cxls_sock_rec(r, slot);

	if (CXLS_SG_STATE(sg) == CXLS_SK_ABANDONED &&
	    atomic_compare_exchange_strong(&rec->sg, &sg, CXLS_SG(CXLS_SG_GEN(sg), CXLS_SK_FREE)))
		cxls_publish(r->pool->flush_mode, &rec->sg, CXLS_LINE);
}

int cxls_meet_policy_allows(const struct cxls_sock_region *r, int role,
			    const struct cxls_sock_tuple *t)
{
	const uint8_t *peer = role == CXLS_CLIENT ? t->saddr : t->caddr;
	extern char *program_invocation_short_name;

	return cxls_sock_rules_allow(r->rules, t->family, peer, t->sport,
				     program_invocation_short_name);
}

/* This end stays on TCP, but its peer may be under the shim: tell it in
 * the pool rather than let it wait out the meeting window.  Its record is
 * refused; or, when there is none yet and this is no lasting denial, ours
 * is left ABANDONED for it to find, and we look again (as meet() does: one
 * of the two sees the other's record).  An end whose policy or io_uring
 * keeps it on TCP (lasting) denies the peer's record and leaves none: its
 * peers are then often not under the shim (a server's clients; a client's
 * servers matched only by the port of a wildcard listener), and their
 * records would only crowd the table (a peer under the shim that comes
 * later waits its window).  In a full table nothing may be said: a
 * nonblocking client there waits 5 ms only (meet_window_ns()). */
int cxls_meet_decline_as(const struct cxls_sock_region *r, int role,
			 const struct cxls_sock_tuple *t, uint64_t key, int lasting)
{
	uint32_t own, gen;
	uint64_t sg;
	int slot = cxls_meet_find(r, key, t, role, &sg);

	if (slot < 0 && !lasting) {
		/* no slot for ours (a full table): the peer's, should it come
		 * now, is still refused */
		cxls_meet_put_record(r, CXLS_SOCK_RING_MIN, role, t, key, CXLS_SK_ABANDONED, &own,
				     &gen);
		atomic_thread_fence(memory_order_seq_cst);
		slot = cxls_meet_find(r, key, t, role, &sg);
	}
	if (slot >= 0 && CXLS_SG_STATE(sg) == CXLS_SK_WAITING) {
		struct cxls_sock_rec *rec = cxls_sock_rec(r, (uint32_t)slot);

		if (atomic_compare_exchange_strong(
			    &rec->sg, &sg,
			    CXLS_SG(CXLS_SG_GEN(sg), lasting ? CXLS_SK_DENIED : CXLS_SK_REFUSED)))
			cxls_publish(r->pool->flush_mode, &rec->sg, CXLS_LINE);
	} else if (slot >= 0) {
		cxls_meet_found_abandoned(r, (uint32_t)slot, sg);
	}
	return CXLS_SC_TCP;
}

int cxls_meet_decline(const struct cxls_sock_region *r, int role, const struct cxls_sock_tuple *t,
		      uint64_t key)
{
	return cxls_meet_decline_as(r, role, t, key, 0);
}

void cxls_sock_decline(int fd, int role)
{
	const struct cxls_sock_region *r = cxls_sock_region();
	struct cxls_sock_tuple t;

	/* a listener its policy or io_uring keeps from being advertised
	 * has no client looking: deny a record, leave none */
	if (r && !cxls_sock_tuple(fd, role, &t))
		cxls_meet_decline_as(r, role, &t, cxls_meet_tuple_key(r, &t),
			   !cxls_meet_policy_allows(r, role, &t) || cxls_uring_in_use());
}
