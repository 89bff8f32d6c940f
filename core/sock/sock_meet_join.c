/* sock_meet_join.c - an end joins the record its peer made (checked like
 * anything read from the pool), and two ends that each made a record agree
 * on one (cxls_meet_cross_join()).
 */
#include "sock_meet_int.h"

#include <unistd.h>

#include "coherence.h"
#include "log.h"
#include "pool.h"
#include "sock_chan.h"
#include "sock_denial.h"

/* The creator wrote the record: its ring size cap and its uid (of end
 * creator) are checked like anything else read from the pool, each read
 * once (CXLS_MEET_ONCE).  The state the record gets: JOINED; DENIED for
 * another uid (a reason that lasts: sock_denial.h); REFUSED for a bad
 * ring size (corruption, or a hostile peer: nothing to learn). */
static uint32_t creator_verdict(const struct cxls_sock_region *r, const struct cxls_sock_rec *rec,
				uint32_t cap, uint32_t creator)
{
	if (!cxls_sock_cap_ok(r, cap)) {
		CXLS_WARN("socket record with a bad ring size %u: staying on TCP", cap);
		return CXLS_SK_REFUSED;
	}
	if (CXLS_MEET_ONCE(rec->end[creator].uid) != (uint32_t)getuid())
		return CXLS_SK_DENIED;
	return CXLS_SK_JOINED;
}

/* A creator waiting in an event loop (CXLS_END_RING_JOIN) sleeps on its
 * TCP socket, where nothing else comes: one doorbell, read in the pool's
 * mode.  Only then: a doorbell nobody reads makes the kernel reset the
 * connection at the last close instead of ending it.  The creator sets
 * the flag, then looks at the record; the joiner, having moved the
 * record, looks at the flag: one of them sees the other. */
static void ring_creator(const struct cxls_sock_region *r, const struct cxls_sock_rec *rec,
			 uint32_t creator, int fd)
{
	const struct cxls_sock_end *e = &rec->end[creator];

	atomic_thread_fence(memory_order_seq_cst);
	cxls_refresh(r->pool->flush_mode, &e->flags, sizeof(e->flags));
	if (atomic_load(&e->flags) & CXLS_END_RING_JOIN)
		cxls_chan_ring(fd);
}

int cxls_meet_join(struct cxls_sconn *c, const struct cxls_sock_region *r, uint32_t slot,
		   uint64_t sg, int role, int fd)
{
	struct cxls_sock_rec *rec = cxls_sock_rec(r, slot);
	uint32_t gen = CXLS_SG_GEN(sg), cap, creator, verdict;
	struct cxls_proc_id self;

	cxls_refresh(r->pool->flush_mode, rec, sizeof(*rec));
	cap = CXLS_MEET_ONCE(rec->cap);
	creator = CXLS_MEET_ONCE(rec->creator) & 1;
	verdict = creator_verdict(r, rec, cap, creator);
	if (!atomic_compare_exchange_strong(&rec->sg, &sg, CXLS_SG(gen, verdict)))
		return JOIN_LOST;
	cxls_publish(r->pool->flush_mode, &rec->sg, CXLS_LINE);
	if (verdict == CXLS_SK_DENIED) /* its next record would be denied again */
		cxls_sock_denial_note(&c->tuple, role, cxls_now_ns());
	if (verdict != CXLS_SK_JOINED)
		return CXLS_SC_TCP;
	/* until this is written the creator sees an end with no holder,
	 * which it never takes for a finished one */
	cxls_proc_self(&self);
	cxls_meet_init_end(&rec->end[role], &self);
	cxls_publish(r->pool->flush_mode, &rec->end[role], sizeof(rec->end[role]));
	cxls_sock_attach(c, r, slot, gen, role, cap);
	cxls_sock_denial_clear(&c->tuple, role);
	atomic_store(&c->mode, CXLS_SC_POOL); /* before the channel's settings: to_pool() */
	atomic_thread_fence(memory_order_seq_cst);
	cxls_sock_control_channel(c, fd);
	ring_creator(r, rec, creator, fd);
	CXLS_INFO("socket slot %u: joined, bytes go through the pool", slot);
	return CXLS_SC_POOL;
}

/* Both ends may look before either record is there (connect() and
 * accept() return together) and each make one.  The client's record then
 * decides, by whichever end first moves it out of WAITING: the server
 * joining it (and giving its own up), or the client withdrawing it (FREE)
 * and joining the server's.  The loser's compare-and-swap fails and it
 * finds the outcome in its own record.  Each end looks again right after
 * publishing its record (meet()) and at every step of settling, so the
 * pair agrees while both are still in connect() and accept(): of two ends
 * that each publish, then look, one sees the other's record.  Before, only
 * the server resolved this, in its settle: a client that settled first
 * (an event loop's epoll_ctl) waited out the meeting window for a server
 * blocked in its next accept(), and both stayed on TCP. */
int cxls_meet_cross_join(struct cxls_sconn *c, int fd, uint64_t sg)
{
	const struct cxls_sock_region *r = cxls_sock_region();
	struct cxls_sock_rec *own = c->rec;
	uint32_t gen = c->gen;
	uint64_t psg;
	int slot, mode;

	if (!r)
		return CXLS_SC_PENDING;
	slot = cxls_meet_find(r, c->key, &c->tuple, c->role, &psg);
	if (slot >= 0 && CXLS_SG_STATE(psg) == CXLS_SK_ABANDONED) {
		/* the peer stays on TCP (it gave up, or declined: cxls_meet_decline())
		 * and looks no more: both records go; unless ours was joined
		 * meanwhile (that record was an older connection's, of the
		 * same tuple): the caller sees it */
		if (!atomic_compare_exchange_strong(&own->sg, &sg, CXLS_SG(gen, CXLS_SK_FREE)))
			return CXLS_SC_PENDING;
		cxls_publish(c->tx.flush, &own->sg, CXLS_LINE);
		cxls_meet_found_abandoned(r, (uint32_t)slot, psg);
		return cxls_meet_to_tcp(c, "the peer stays on TCP");
	}
	if (slot < 0 || CXLS_SG_STATE(psg) != CXLS_SK_WAITING)
		return CXLS_SC_PENDING;
	/* an end that another process holds too (a fork) stays on its own
	 * record, where that process settles as well: the peer moves */
	cxls_refresh(c->tx.flush, c->me, offsetof(struct cxls_sock_end, sleeper));
	if (cxls_meet_held_elsewhere(c->me))
		return CXLS_SC_PENDING;
	if (c->role == CXLS_CLIENT) {
		if (!atomic_compare_exchange_strong(&own->sg, &sg, CXLS_SG(gen, CXLS_SK_FREE)))
			return CXLS_SC_PENDING; /* joined meanwhile: the caller sees it */
		cxls_publish(c->tx.flush, &own->sg, CXLS_LINE);
		CXLS_TRACE("socket slot %u: the server made a record too: joining slot %d",
			   c->slot, slot);
		mode = cxls_meet_join(c, r, (uint32_t)slot, psg, CXLS_CLIENT, fd);
		if (mode == CXLS_SC_POOL)
			return mode;
		return cxls_meet_to_tcp(c, "the server's record was given up or refused");
	}
	mode = cxls_meet_join(c, r, (uint32_t)slot, psg, CXLS_SERVER, fd);
	if (mode == JOIN_LOST)
		return CXLS_SC_PENDING; /* withdrawn for ours: the client joins it */
	/* nobody joins ours now: the client's record was decided */
	if (atomic_compare_exchange_strong(&own->sg, &sg, CXLS_SG(gen, CXLS_SK_FREE)))
		cxls_publish(c->tx.flush, &own->sg, CXLS_LINE);
	if (mode == CXLS_SC_POOL) {
		CXLS_TRACE("socket slot %u: the client made a record too: joined it, ours given up",
			   c->slot);
		return mode;
	}
	return cxls_meet_to_tcp(c, "the client's record was refused");
}
