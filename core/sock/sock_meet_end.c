/* sock_meet_end.c - the two ends of a record: the processes that hold
 * each (fork, exec, sockets passed over UNIX sockets), when an end is
 * finished, and its close, which frees the record with the other end's.
 */
#include "sock_meet_int.h"

#include <string.h>
#include <unistd.h>

#include "coherence.h"
#include "log.h"
#include "pool.h"
#include "sock_chan.h"
#include "sock_claim.h"
#include "sock_holder.h"
#include "sock_ref.h"

void cxls_meet_init_end(struct cxls_sock_end *e, const struct cxls_proc_id *self)
{
	memset(e->holder, 0, sizeof(e->holder));
	/* a slot's previous connection left its counts */
	atomic_store(&e->forking, 0);
	atomic_store(&e->extra, 0);
	atomic_store(&e->passed_ns, 0);
	atomic_store(&e->rcvlowat, 0);
	e->uid = (uint32_t)getuid();
	e->boot_hash = self->boot_hash;
	atomic_store(&e->flags, 0);
	cxls_holder_add(e->holder, CXLS_SOCK_HOLDERS);
}

/* An end is finished when closed, or when every process recorded as
 * holding it is dead (an end of another host is never declared dead).
 * A socket of it sent over a UNIX socket (SCM_RIGHTS) keeps it for
 * CXLS_PASS_GRACE_NS, whatever its holders: the receiver may still take
 * it over; after that a message never received no longer does. */
int cxls_meet_end_finished(const struct cxls_sock_region *r, const struct cxls_sock_end *e)
{
	uint64_t passed, boot;
	uint32_t flags;
	int recorded, alive;

	cxls_refresh(r->pool->flush_mode, e, offsetof(struct cxls_sock_end, sleeper));
	flags = atomic_load(&e->flags);
	if (flags & CXLS_END_CLOSED)
		return 1;
	if (atomic_load(&e->extra))
		return 0;
	/* the host its holders are looked up on is the one compared below */
	boot = CXLS_MEET_ONCE(e->boot_hash);
	alive = cxls_holder_alive(e->holder, CXLS_SOCK_HOLDERS, boot, &recorded);
	passed = atomic_load(&e->passed_ns);
	if (atomic_load(&e->forking) && passed) {
		struct cxls_proc_id self;

		/* its clock is this host's only when the end is */
		cxls_proc_self(&self);
		return alive == 0 && boot == self.boot_hash &&
		       cxls_now_ns() - passed >= CXLS_PASS_GRACE_NS;
	}
	return recorded > 0 && alive == 0;
}

int cxls_sock_peer_dead(const struct cxls_sconn *c)
{
	struct cxls_proc_id self;

	cxls_proc_self(&self);
	if (CXLS_MEET_ONCE(c->peer->boot_hash) != self.boot_hash)
		return -1;
	if (!cxls_meet_end_finished(cxls_sock_region(), c->peer))
		return 0;
	return atomic_load(&c->peer->forking) ? CXLS_PEER_FORKING : 1;
}

void cxls_sock_hold(struct cxls_sconn *c, const struct cxls_proc_id *id, uint32_t execs)
{
	struct cxls_proc_id self;
	int mine = !id, full;

	if (mine) {
		cxls_proc_self(&self);
		id = &self;
	}
	full = cxls_holder_add_id(c->me->holder, CXLS_SOCK_HOLDERS, id, execs) != 0;
	/* full: this process counts itself beyond the array (a fork's child
	 * inherits c but not its parent's count); another process (a child
	 * of posix_spawn) will when it loads */
	if (mine)
		c->held_extra = full;
	if (mine && full)
		atomic_fetch_add(&c->me->extra, 1);
	cxls_publish(c->tx.flush, c->me, offsetof(struct cxls_sock_end, sleeper));
}

void cxls_count_down(_Atomic uint32_t *n)
{
	uint32_t v = atomic_load(n);

	while (v && !atomic_compare_exchange_weak(n, &v, v - 1))
		;
}

void cxls_end_arrived(struct cxls_sock_end *e)
{
	cxls_count_down(&e->forking);
}

/* Another process holds this end, or is being forked with it. */
int cxls_meet_held_elsewhere(const struct cxls_sock_end *e)
{
	struct cxls_proc_id self;

	if (atomic_load(&e->forking) || atomic_load(&e->extra))
		return 1;
	cxls_proc_self(&self);
	for (int i = 0; i < CXLS_SOCK_HOLDERS; i++) {
		uint32_t pid = atomic_load(&e->holder[i].pid);

		if (pid && pid != self.pid)
			return 1;
	}
	return 0;
}

int cxls_sock_held_elsewhere(struct cxls_sconn *c)
{
	cxls_refresh(c->tx.flush, c->me, offsetof(struct cxls_sock_end, sleeper));
	return cxls_meet_held_elsewhere(c->me);
}

uint32_t cxls_sock_execs(struct cxls_sconn *c)
{
	return c->me ? cxls_holder_execs(c->me->holder, CXLS_SOCK_HOLDERS) : 0;
}

void cxls_sock_exec_count(struct cxls_sconn *c, int delta)
{
	if (!c->me)
		return;
	cxls_holder_exec(c->me->holder, CXLS_SOCK_HOLDERS, delta);
	cxls_publish(c->tx.flush, c->me, offsetof(struct cxls_sock_end, sleeper));
}

/* Whether holder id, recorded with exec count execs, may still have the
 * copy of an item that maker made at since with its count maker_execs:
 * the maker as long as it did not exec since; another process started
 * since (or of unknown start) as long as it never exec'd while holding
 * the socket, as a fork of the maker's would, with the item, and one
 * that exec'd would not (an exec'd image has no items of the earlier
 * one's). */
static int may_have_copy(const struct cxls_proc_id *id, uint32_t execs,
			 const struct cxls_proc_id *maker, uint32_t maker_execs, uint64_t since)
{
	if (id->pid == maker->pid && id->start_time == maker->start_time)
		return execs == maker_execs;
	/* a start time of 0 is unknown (no /proc): it may have a copy */
	return execs == 0 && (!id->start_time || id->start_time >= since);
}

int cxls_sock_held_since(struct cxls_sconn *c, const struct cxls_proc_id *maker,
			 uint32_t maker_execs, uint64_t since)
{
	const struct cxls_sock_end *e = c->me;
	struct cxls_proc_id self;

	cxls_refresh(c->tx.flush, e, offsetof(struct cxls_sock_end, sleeper));
	if (atomic_load(&e->forking) || atomic_load(&e->extra))
		return 1;
	cxls_proc_self(&self);
	for (int i = 0; i < CXLS_SOCK_HOLDERS; i++) {
		struct cxls_proc_id id = { atomic_load(&e->holder[i].pid), e->boot_hash,
					   e->holder[i].start_time };

		if (id.pid && id.pid != self.pid &&
		    may_have_copy(&id, atomic_load(&e->holder[i].execs), maker, maker_execs,
				  since) &&
		    cxls_proc_alive(&id) != 0)
			return 1;
	}
	return 0;
}

void cxls_sock_fork(struct cxls_sconn *c, int phase)
{
	int mode = atomic_load(&c->mode);

	if (mode == CXLS_SC_LISTEN)
		cxls_listener_fork(c->listener, phase);
	if (mode != CXLS_SC_POOL && mode != CXLS_SC_PENDING)
		return;
	if (phase == 0) {
		atomic_fetch_add(&c->me->forking, 1);
		cxls_publish(c->tx.flush, c->me, offsetof(struct cxls_sock_end, sleeper));
		return;
	}
	/* recorded before the count drops: a close meanwhile sees one or
	 * the other */
	cxls_claim_test_delay("fork-child"); /* tests: a child slow to run */
	cxls_sock_hold(c, NULL, 0);
	cxls_end_arrived(c->me);
	cxls_publish(c->tx.flush, c->me, offsetof(struct cxls_sock_end, sleeper));
}

/* Frees the slot when both ends are finished. */
static void maybe_free(struct cxls_sock_rec *rec, uint32_t slot, uint32_t gen)
{
	const struct cxls_sock_region *r = cxls_sock_region();
	int a = cxls_meet_end_finished(r, &rec->end[0]),
	    b = cxls_meet_end_finished(r, &rec->end[1]);

	if (a && b && cxls_meet_free_rec(r, rec, slot, CXLS_SG(gen, CXLS_SK_JOINED)))
		CXLS_TRACE("socket record freed");
	else
		CXLS_TRACE("socket record kept: client end %s, server end %s",
			   a ? "finished" : "open", b ? "finished" : "open");
}

void cxls_sock_peer_gone(struct cxls_sconn *c)
{
	const struct cxls_sock_region *r = cxls_sock_region();
	const struct cxls_ring *tx = &c->tx;
	uint64_t rc, rp;
	int n = 0;

	if (!r || !c->rec || atomic_load(&c->tx_returned) || !cxls_meet_end_finished(r, c->peer) ||
	    atomic_exchange(&c->tx_returned, 1))
		return;
	if (cxls_ring_lock(&tx->hdr->prod_lock)) {
		CXLS_WARN("socket slot %u: ring lock held for seconds: the buffers of a gone peer "
			  "stay lent until the record is freed", c->slot);
		return;
	}
	cxls_ring_fresh(tx);
	rc = atomic_load(&tx->hdr->ref_cons);
	rp = atomic_load(&tx->hdr->ref_prod);
	/* our own entries, in the pool all the same: checked; cxls_buf_put
	 * frees a buffer only while it is still lent to this record */
	for (; rp - rc <= CXLS_SOCK_REFS && rc != rp; rc++) {
		struct cxls_sock_ref ref = tx->refs[rc % CXLS_SOCK_REFS];

		if (ref.cls < c->bufs->n && ref.idx < c->bufs->cls[ref.cls].count) {
			cxls_buf_put(c->bufs, c->owner, &ref);
			n++;
		}
	}
	cxls_ring_unlock(&tx->hdr->prod_lock);
	if (n)
		CXLS_INFO("socket slot %u: peer gone, %d unread buffers given back", c->slot, n);
}

/* TCP's close sends an RST instead of a FIN with SO_LINGER 0 or bytes
 * left unread (RFC 2525), unless the socket was CLOSED already (reset by
 * the peer, or both FINs sent): then it sends nothing.  A connection
 * broken here (a corrupt pool, connect(AF_UNSPEC)) still resets its
 * peer. */
static int close_resets(struct cxls_sconn *c, int mode)
{
	if (mode != CXLS_SC_POOL)
		return atomic_load(&c->linger0);
	if (!atomic_load(&c->broken) && cxls_chan_closed(c))
		return 0;
	return atomic_load(&c->linger0) || cxls_stream_used(&c->rx) > 0;
}

void cxls_sock_release(struct cxls_sconn *c)
{
	struct cxls_sock_end *e = c->me;
	int mode = atomic_load(&c->mode), left;
	uint32_t forks;
	uint64_t sg;

	if (!c->rec || (mode != CXLS_SC_POOL && mode != CXLS_SC_PENDING))
		return;
	cxls_refresh(c->tx.flush, &c->rec->sg, CXLS_LINE);
	sg = atomic_load(&c->rec->sg);
	if (CXLS_SG_GEN(sg) != c->gen)
		return;
	if (mode == CXLS_SC_PENDING) {
		/* never settled: give up the record, a late peer sees TCP;
		 * unless a fork holds it too (a server that forks per
		 * connection closes its copy at once): that one settles */
		if (CXLS_SG_STATE(sg) == CXLS_SK_WAITING && !cxls_meet_held_elsewhere(e) &&
		    atomic_compare_exchange_strong(&c->rec->sg, &sg,
						   CXLS_SG(c->gen, CXLS_SK_ABANDONED))) {
			cxls_publish(c->tx.flush, &c->rec->sg, CXLS_LINE);
			return;
		}
		if (CXLS_SG_STATE(sg) != CXLS_SK_JOINED && CXLS_SG_STATE(sg) != CXLS_SK_WAITING)
			return;
	}
	/* forks before holders: a child records itself, then counts its fork
	 * down (cxls_sock_fork); counted the other way round, a child doing
	 * both in between was seen in neither and the end closed under it */
	forks = atomic_load(&e->forking);
	cxls_claim_test_delay("end-close"); /* between the reads: a child's fork ends */
	left = cxls_holder_remove(e->holder, CXLS_SOCK_HOLDERS);
	if (c->held_extra)
		cxls_count_down(&e->extra);
	cxls_publish(c->tx.flush, e, offsetof(struct cxls_sock_end, sleeper));
	if (left)
		left = cxls_holder_left(e->holder, CXLS_SOCK_HOLDERS, e->boot_hash);
	if (left || forks || atomic_load(&e->extra)) {
		CXLS_TRACE("socket slot %u: still held here (%d holders, %u forks)", c->slot, left,
			   forks);
		return;
	}
	cxls_chan_own_flag_publish(c, CXLS_END_CLOSED |
					      (close_resets(c, mode) ? CXLS_END_RESET : 0));
	maybe_free(c->rec, c->slot, c->gen);
}
