/* sock_meet_record.c - the record table: a slot claimed and this end's
 * record written in it (how big its rings, how long it waits for the
 * peer), the peer's record found, and a record's local view (attach).
 */
#include "sock_meet_int.h"

#include <sched.h>
#include <string.h>

#include "coherence.h"
#include "config.h"
#include "log.h"
#include "pool.h"
#include "sock_claim.h"

/* How long a lookup waits for a record another process is writing. */
#define CLAIM_WAIT_NS (50ull * 1000000ull)

/* Ring bytes per direction: the pool's ring, or less when the creating end
 * set a smaller SO_SNDBUF/SO_RCVBUF before connecting (or on its listener),
 * rounded up to a power of two. */
static uint32_t ring_cap(const struct cxls_sock_region *r, uint32_t app_sndbuf)
{
	uint64_t cap = r->ring_size, want = CXLS_SOCK_RING_MIN;

	if (!app_sndbuf)
		return (uint32_t)cap;
	while (want < app_sndbuf && want < cap)
		want <<= 1;
	return (uint32_t)want;
}

static int claim_slot(const struct cxls_sock_region *r, uint64_t key, uint32_t *slot,
		      uint32_t *gen)
{
	for (uint32_t n = 0; n < r->nslots; n++) {
		uint32_t i = (uint32_t)((key + n) % r->nslots);
		struct cxls_sock_rec *rec = cxls_sock_rec(r, i);
		uint64_t sg;

		cxls_refresh(r->pool->flush_mode, &rec->sg, CXLS_LINE);
		sg = atomic_load(&rec->sg);
		if (CXLS_SG_STATE(sg) != CXLS_SK_FREE)
			continue;
		if (atomic_compare_exchange_strong(&rec->sg, &sg,
						   CXLS_SG(CXLS_SG_GEN(sg) + 1, CXLS_SK_CLAIMING))) {
			cxls_publish(r->pool->flush_mode, &rec->sg, CXLS_LINE);
			*slot = i;
			*gen = CXLS_SG_GEN(sg) + 1;
			return 0;
		}
	}
	return -1;
}

int cxls_sock_cap_ok(const struct cxls_sock_region *r, uint32_t cap)
{
	return cap >= CXLS_SOCK_RING_MIN && cap <= r->ring_size && !(cap & (cap - 1));
}

/* The local view of a record on the pool: rings and ends by role. */
void cxls_sock_attach(struct cxls_sconn *c, const struct cxls_sock_region *r, uint32_t slot,
		      uint32_t gen, int role, uint32_t cap)
{
	c->slot = slot;
	c->gen = gen;
	c->role = role;
	c->rec = cxls_sock_rec(r, slot);
	c->me = &c->rec->end[role];
	c->peer = &c->rec->end[!role];
	c->tx.hdr = &c->rec->ring[role];
	c->tx.data = cxls_sock_ring_data(r, slot, role);
	c->tx.cap = cap;
	c->rx.hdr = &c->rec->ring[!role];
	c->rx.data = cxls_sock_ring_data(r, slot, !role);
	c->rx.cap = cap;
	c->tx.refs = c->rec->ref[role];
	c->rx.refs = c->rec->ref[!role];
	c->tx.flush = r->pool->flush_mode;
	c->rx.flush = r->pool->flush_mode;
	c->bufs = &r->bufs;
	c->owner = CXLS_BUF_OWNER(gen, slot);
	c->ref_min = r->bufs.n ? r->cfg->sock_ref_min : 0;
	c->busy_us = r->cfg->sock_busy_poll_us;
}

struct cxls_sconn *cxls_sock_rejoin(const struct cxls_sock_region *r, uint32_t slot,
				    uint32_t gen, int role, uint32_t execs)
{
	struct cxls_sconn *c = cxls_sconn_new(CXLS_SC_POOL);
	/* the creator's word, read once: checked as a join checks it */
	uint32_t cap = CXLS_MEET_ONCE(cxls_sock_rec(r, slot)->cap);
	int bad = !cxls_sock_cap_ok(r, cap);

	if (!c)
		return NULL;
	cxls_sock_attach(c, r, slot, gen, role, bad ? (uint32_t)r->ring_size : cap);
	if (bad)
		cxls_sconn_break(c, "record with a bad ring size (corrupt pool?)");
	c->tuple = c->rec->tuple;
	/* a process is recorded once: exec keeps the pid */
	cxls_sock_hold(c, NULL, execs);
	atomic_store(&c->app_nodelay, 1);
	return c;
}

/* A full table is said once a second, with how often it was met: under
 * churn it is met several times per connection (the record, then the
 * decline's).  When it was last met decides a window (meet_window_ns()). */
static _Atomic uint64_t table_full_ns;

static void table_full_note(void)
{
	static _Atomic uint64_t said_ns;
	static _Atomic uint32_t times;
	uint64_t now = cxls_now_ns(), t = atomic_load(&said_ns);
	uint32_t n = atomic_fetch_add(&times, 1) + 1;

	atomic_store(&table_full_ns, now);
	if (t && now - t < 1000000000ull)
		return;
	if (!atomic_compare_exchange_strong(&said_ns, &t, now))
		return;
	atomic_fetch_sub(&times, n);
	CXLS_INFO("no free socket slot in the pool (%u times since the last such line): "
		  "connections stay on TCP", n);
}

/* Claims a slot and writes this end's record, published in state st:
 * WAITING for the peer, or ABANDONED by an end that stays on TCP
 * (cxls_meet_decline()).  -1 when no slot is free or a sweeper took the claim. */
int cxls_meet_put_record(const struct cxls_sock_region *r, uint32_t cap, int role,
			 const struct cxls_sock_tuple *t, uint64_t key, uint32_t st, uint32_t *slot,
			 uint32_t *gen)
{
	struct cxls_proc_id self;
	struct cxls_sock_rec *rec;
	uint64_t sg;

	cxls_proc_self(&self); /* now: nothing slow while a claim is held */
	if (claim_slot(r, key, slot, gen) &&
	    (!cxls_meet_sweep_full(r) || claim_slot(r, key, slot, gen))) {
		table_full_note();
		return -1;
	}
	rec = cxls_sock_rec(r, *slot);
	sg = CXLS_SG(*gen, CXLS_SK_CLAIMING);
	/* who claimed it, before anything else (sock_claim.h) */
	rec->creator = (uint32_t)role;
	cxls_meet_init_end(&rec->end[role], &self);
	atomic_store_explicit(&rec->end[role].claim_gen, *gen, memory_order_release);
	cxls_publish(r->pool->flush_mode, rec, sizeof(*rec));
	cxls_claim_test_delay("record");
	memset(rec->ring, 0, sizeof(rec->ring));
	rec->key = key;
	rec->tuple = *t;
	rec->cap = cap;
	rec->created_ns = cxls_now_ns();
	memset(&rec->end[!role], 0, sizeof(rec->end[!role]));
	/* the record before its state: the joiner reads it once WAITING */
	cxls_publish(r->pool->flush_mode, rec, sizeof(*rec));
	if (!atomic_compare_exchange_strong_explicit(&rec->sg, &sg, CXLS_SG(*gen, st),
						     memory_order_release, memory_order_relaxed)) {
		CXLS_WARN("socket slot %u: claim taken back by a sweeper: staying on TCP", *slot);
		return -1;
	}
	cxls_publish(r->pool->flush_mode, &rec->sg, CXLS_LINE);
	return 0;
}

/* How long an end that made the record waits for its peer: the policy's
 * window, but 5 ms for a nonblocking client while the table is full (this
 * process found no free slot within 20 ms of making the record: under
 * churn it does many times a millisecond, where a burst of connections
 * that fills it once, in a slow guest, must not send the rest of the
 * burst to TCP).  A nonblocking client once waited 5 ms always, when a
 * loop waited inside its calls for the meeting; nothing in a loop waits
 * now (the connection is not ready, a nonblocking call says EAGAIN), and
 * a server that accepts later than that, as a loaded one does
 * (redis-server in a TCG guest, 50 connections at once), had 20-40% of
 * its connections on TCP.  In a full table, though, a server that
 * accepted first may have found no slot to say it stays on TCP
 * (cxls_meet_decline_as()), and its client waited the whole window for nobody (ab
 * -c 50 through haproxy to nginx: requests of 500 ms). */
#define FULL_CLIENT_WINDOW_NS (5ull * 1000000ull)
#define FULL_RECENT_NS (20ull * 1000000ull)

static uint64_t meet_window_ns(const struct cxls_sock_region *r, const struct cxls_sconn *c)
{
	uint64_t ns = (uint64_t)r->cfg->sock_meet_timeout_ms * 1000000ull;
	uint64_t full = atomic_load(&table_full_ns);

	if (c->role == CXLS_CLIENT && atomic_load(&c->nonblock) && full &&
	    full + FULL_RECENT_NS > c->met_ns && ns > FULL_CLIENT_WINDOW_NS)
		return FULL_CLIENT_WINDOW_NS;
	return ns;
}

int cxls_meet_create(struct cxls_sconn *c, const struct cxls_sock_region *r, uint32_t sndbuf,
		     int role, const struct cxls_sock_tuple *t, uint64_t key)
{
	uint32_t slot, gen, cap = ring_cap(r, sndbuf);

	if (cxls_meet_put_record(r, cap, role, t, key, CXLS_SK_WAITING, &slot, &gen))
		return CXLS_SC_TCP;
	cxls_sock_attach(c, r, slot, gen, role, cap);
	c->met_ns = c->rec->created_ns;
	c->deadline_ns = c->met_ns + meet_window_ns(r, c);
	atomic_store(&c->mode, CXLS_SC_PENDING);
	CXLS_TRACE("socket slot %u: waiting for the peer", slot);
	return CXLS_SC_PENDING;
}

/* A CLAIMING record whose claimer is dead (sock_claim.h). */
int cxls_meet_claim_stale(struct cxls_sock_rec *rec, uint64_t sg)
{
	struct cxls_sock_end *e = &rec->end[rec->creator & 1];

	return cxls_claim_stale(sg, &e->claim_gen, e->boot_hash, e->holder, CXLS_SOCK_HOLDERS,
				&rec->lease);
}

/* A record of the same connection made by the other end, or -1. */
int cxls_meet_find(const struct cxls_sock_region *r, uint64_t key, const struct cxls_sock_tuple *t,
		   int role, uint64_t *sg_out)
{
	for (uint32_t n = 0; n < r->nslots; n++) {
		uint32_t i = (uint32_t)((key + n) % r->nslots);
		struct cxls_sock_rec *rec = cxls_sock_rec(r, i);
		uint64_t sg, start = 0;

		cxls_refresh(r->pool->flush_mode, rec, offsetof(struct cxls_sock_rec, end));
		sg = atomic_load_explicit(&rec->sg, memory_order_acquire);
		/* a record being written right now may be ours; its writer
		 * needs a few stores, but may be descheduled in between on a
		 * loaded host: missing it leaves both ends on TCP */
		if (CXLS_SG_STATE(sg) == CXLS_SK_CLAIMING && cxls_meet_claim_stale(rec, sg))
			continue; /* its claimer died in the middle: nothing to wait for */
		while (CXLS_SG_STATE(sg) == CXLS_SK_CLAIMING) {
			if (!start)
				start = cxls_now_ns();
			else if (cxls_now_ns() - start > CLAIM_WAIT_NS)
				break;
			sched_yield();
			cxls_refresh(r->pool->flush_mode, rec, offsetof(struct cxls_sock_rec, end));
			sg = atomic_load_explicit(&rec->sg, memory_order_acquire);
		}
		if (CXLS_SG_STATE(sg) < CXLS_SK_WAITING || rec->key != key ||
		    memcmp(&rec->tuple, t, sizeof(*t)) || rec->creator == (uint32_t)role)
			continue;
		*sg_out = sg;
		return (int)i;
	}
	return -1;
}

int cxls_sock_find_joined(const struct cxls_sock_region *r, const struct cxls_sock_tuple *t,
			  uint32_t *gen)
{
	uint64_t key = cxls_meet_tuple_key(r, t);

	for (uint32_t n = 0; n < r->nslots; n++) {
		uint32_t i = (uint32_t)((key + n) % r->nslots);
		struct cxls_sock_rec *rec = cxls_sock_rec(r, i);
		uint64_t sg;

		cxls_refresh(r->pool->flush_mode, rec, offsetof(struct cxls_sock_rec, end));
		sg = atomic_load_explicit(&rec->sg, memory_order_acquire);
		if (CXLS_SG_STATE(sg) == CXLS_SK_JOINED && rec->key == key &&
		    !memcmp(&rec->tuple, t, sizeof(*t))) {
			*gen = CXLS_SG_GEN(sg);
			return (int)i;
		}
	}
	return -1;
}
