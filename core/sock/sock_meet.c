/* sock_meet.c - the meeting in the pool, its agreement and its clean-up. */
#include "sock_meet.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "coherence.h"
#include "config.h"
#include "log.h"
#include "pool.h"
#include "proc_id.h"
#include "sock_chan.h"
#include "sock_claim.h"
#include "sock_denial.h"
#include "sock_holder.h"
#include "sock_origin.h"
#include "sock_ref.h"
#include "sock_rules.h"
#include "sock_sys.h"
#include "sock_uring.h"

/* ABANDONED and REFUSED records stay this long so that a late peer finds
 * them and stays on TCP without waiting, then the sweep frees them; when
 * the table is full, the sweep that a claim makes frees them after
 * FULL_STALE_NS: under connection churn a full table is mostly records
 * whose peers went by already (a server that had no slot for its own
 * leaves nothing to find), and kept full it keeps every new connection
 * on TCP.  A peer later than that makes its own record, which the other
 * end's first TCP byte ends at once (a server that speaks first waits
 * its window). */
#define STALE_NS (10ull * 1000000000ull)
#define FULL_STALE_NS (20ull * 1000000ull)

static int sweep(const struct cxls_sock_region *r, uint64_t stale_ns);
/* How long a lookup waits for a record another process is writing. */
#define CLAIM_WAIT_NS (50ull * 1000000ull)

static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* Both ends must name the connection alike: a v4-mapped IPv6 address (a
 * dual-stack server) is written as the IPv4 address it maps. */
static int put_addr(const struct sockaddr_storage *ss, uint8_t addr[16], uint16_t *port,
		    uint16_t *family)
{
	memset(addr, 0, 16);
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;

		memcpy(addr, &in->sin_addr, 4);
		*port = in->sin_port;
		*family = AF_INET;
		return 0;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;

		*port = in6->sin6_port;
		if (!memcmp(in6->sin6_addr.s6_addr, v4mapped, 12)) {
			memcpy(addr, in6->sin6_addr.s6_addr + 12, 4);
			*family = AF_INET;
		} else {
			memcpy(addr, in6->sin6_addr.s6_addr, 16);
			*family = AF_INET6;
		}
		return 0;
	}
	return -1;
}

int cxls_sock_tuple(int fd, int role, struct cxls_sock_tuple *t)
{
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);
	uint16_t fam_me, fam_peer = 0;
	int type = 0, proto = 0;
	socklen_t tl = sizeof(type), pr = sizeof(proto);

	memset(t, 0, sizeof(*t));
	if (sys_getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) || type != SOCK_STREAM ||
	    sys_getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &pr) || proto != IPPROTO_TCP)
		return -1;
	if (sys_getsockname(fd, (struct sockaddr *)&me, &ml))
		return -1;
	if (role == CXLS_SERVER && put_addr(&me, t->saddr, &t->sport, &fam_me) == 0 &&
	    sys_getpeername(fd, (struct sockaddr *)&peer, &pl) && errno == ENOTCONN) {
		t->family = fam_me; /* a listening socket: server end only */
		return 0;
	}
	if (sys_getpeername(fd, (struct sockaddr *)&peer, &pl))
		return -1;
	if (role == CXLS_CLIENT) {
		if (put_addr(&me, t->caddr, &t->cport, &fam_me) ||
		    put_addr(&peer, t->saddr, &t->sport, &fam_peer))
			return -1;
	} else if (put_addr(&me, t->saddr, &t->sport, &fam_me) ||
		   put_addr(&peer, t->caddr, &t->cport, &fam_peer)) {
		return -1;
	}
	if (fam_me != fam_peer)
		return -1;
	t->family = fam_me;
	return 0;
}

static uint64_t tuple_key(const struct cxls_sock_region *r, const struct cxls_sock_tuple *t)
{
	uint8_t buf[16 + sizeof(*t)];

	memcpy(buf, r->pool->sb->uuid, 16);
	memcpy(buf + 16, t, sizeof(*t));
	return cxls_hash64(buf, sizeof(buf)) | 1;
}

static void init_end(struct cxls_sock_end *e, const struct cxls_proc_id *self)
{
	memset(e->holder, 0, sizeof(e->holder));
	/* a slot's previous connection left its counts */
	atomic_store(&e->forking, 0);
	atomic_store(&e->extra, 0);
	atomic_store(&e->passed_ns, 0);
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
static int end_finished(const struct cxls_sock_region *r, const struct cxls_sock_end *e)
{
	uint64_t passed;
	uint32_t flags;
	int recorded, alive;

	cxls_refresh(r->pool->flush_mode, e, offsetof(struct cxls_sock_end, sleeper));
	flags = atomic_load(&e->flags);
	if (flags & CXLS_END_CLOSED)
		return 1;
	if (atomic_load(&e->extra))
		return 0;
	alive = cxls_holder_alive(e->holder, CXLS_SOCK_HOLDERS, e->boot_hash, &recorded);
	passed = atomic_load(&e->passed_ns);
	if (atomic_load(&e->forking) && passed) {
		struct cxls_proc_id self;

		/* its clock is this host's only when the end is */
		cxls_proc_self(&self);
		return alive == 0 && e->boot_hash == self.boot_hash &&
		       cxls_now_ns() - passed >= CXLS_PASS_GRACE_NS;
	}
	return recorded > 0 && alive == 0;
}

void cxls_sock_hold(struct cxls_sconn *c, const struct cxls_proc_id *id)
{
	struct cxls_proc_id self;
	int mine = !id, full;

	if (mine) {
		cxls_proc_self(&self);
		id = &self;
	}
	full = cxls_holder_add_id(c->me->holder, CXLS_SOCK_HOLDERS, id) != 0;
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
				    uint32_t gen, int role)
{
	struct cxls_sconn *c = cxls_sconn_new(CXLS_SC_POOL);

	if (!c)
		return NULL;
	cxls_sock_attach(c, r, slot, gen, role, cxls_sock_rec(r, slot)->cap);
	c->tuple = c->rec->tuple;
	/* a process is recorded once: exec keeps the pid */
	cxls_sock_hold(c, NULL);
	atomic_store(&c->app_nodelay, 1);
	return c;
}

/* A sweep looks at every record, each holder's /proc/PID/stat: when one
 * found the table full of live connections, the claims of the next
 * FULL_RESWEEP_NS stay on TCP without sweeping again (a server taking
 * hundreds of connections a second swept at every one of them). */
#define FULL_RESWEEP_NS (20ull * 1000000ull)

static int sweep_full(const struct cxls_sock_region *r)
{
	static _Atomic uint64_t fruitless; /* when the last one freed nothing */
	uint64_t now = cxls_now_ns(), t = atomic_load(&fruitless);
	int freed;

	if (t && now - t < FULL_RESWEEP_NS)
		return 0;
	freed = sweep(r, FULL_STALE_NS);
	atomic_store(&fruitless, freed ? 0 : now);
	return freed;
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
 * (decline()).  -1 when no slot is free or a sweeper took the claim. */
static int put_record(const struct cxls_sock_region *r, uint32_t cap, int role,
		      const struct cxls_sock_tuple *t, uint64_t key, uint32_t st, uint32_t *slot,
		      uint32_t *gen)
{
	struct cxls_proc_id self;
	struct cxls_sock_rec *rec;
	uint64_t sg;

	cxls_proc_self(&self); /* now: nothing slow while a claim is held */
	if (claim_slot(r, key, slot, gen) && (!sweep_full(r) || claim_slot(r, key, slot, gen))) {
		table_full_note();
		return -1;
	}
	rec = cxls_sock_rec(r, *slot);
	sg = CXLS_SG(*gen, CXLS_SK_CLAIMING);
	/* who claimed it, before anything else (sock_claim.h) */
	rec->creator = (uint32_t)role;
	init_end(&rec->end[role], &self);
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
 * (decline_as()), and its client waited the whole window for nobody (ab
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

static int create(struct cxls_sconn *c, const struct cxls_sock_region *r, uint32_t sndbuf,
		  int role, const struct cxls_sock_tuple *t, uint64_t key)
{
	uint32_t slot, gen, cap = ring_cap(r, sndbuf);

	if (put_record(r, cap, role, t, key, CXLS_SK_WAITING, &slot, &gen))
		return CXLS_SC_TCP;
	cxls_sock_attach(c, r, slot, gen, role, cap);
	c->met_ns = c->rec->created_ns;
	c->deadline_ns = c->met_ns + meet_window_ns(r, c);
	atomic_store(&c->mode, CXLS_SC_PENDING);
	CXLS_TRACE("socket slot %u: waiting for the peer", slot);
	return CXLS_SC_PENDING;
}

/* The creator wrote the record: its ring size and uid are checked like
 * anything else read from the pool.  The state the record gets: JOINED;
 * DENIED for another uid (a reason that lasts: sock_denial.h); REFUSED
 * for a bad ring size (corruption, or a hostile peer: nothing to learn). */
static uint32_t creator_verdict(const struct cxls_sock_region *r, const struct cxls_sock_rec *rec)
{
	uint32_t cap = rec->cap;

	if (cap < CXLS_SOCK_RING_MIN || cap > r->ring_size || (cap & (cap - 1))) {
		CXLS_WARN("socket record with a bad ring size %u: staying on TCP", cap);
		return CXLS_SK_REFUSED;
	}
	if (rec->end[rec->creator & 1].uid != (uint32_t)getuid())
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
			 int fd)
{
	const struct cxls_sock_end *e = &rec->end[rec->creator & 1];

	atomic_thread_fence(memory_order_seq_cst);
	cxls_refresh(r->pool->flush_mode, &e->flags, sizeof(e->flags));
	if (atomic_load(&e->flags) & CXLS_END_RING_JOIN)
		cxls_chan_ring(fd);
}

/* join(): the record was no longer WAITING under the generation seen (its
 * creator gave it up, or withdrew it for ours: cross_join). */
#define JOIN_LOST 0

static int join(struct cxls_sconn *c, const struct cxls_sock_region *r, uint32_t slot,
		uint64_t sg, int role, int fd)
{
	struct cxls_sock_rec *rec = cxls_sock_rec(r, slot);
	uint32_t gen = CXLS_SG_GEN(sg), cap, verdict;
	struct cxls_proc_id self;

	cxls_refresh(r->pool->flush_mode, rec, sizeof(*rec));
	cap = rec->cap;
	verdict = creator_verdict(r, rec);
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
	init_end(&rec->end[role], &self);
	cxls_publish(r->pool->flush_mode, &rec->end[role], sizeof(rec->end[role]));
	cxls_sock_attach(c, r, slot, gen, role, cap);
	cxls_sock_denial_clear(&c->tuple, role);
	atomic_store(&c->mode, CXLS_SC_POOL); /* before the channel's settings: to_pool() */
	atomic_thread_fence(memory_order_seq_cst);
	cxls_sock_control_channel(c, fd);
	ring_creator(r, rec, fd);
	CXLS_INFO("socket slot %u: joined, bytes go through the pool", slot);
	return CXLS_SC_POOL;
}

int cxls_sock_server_listens(const struct sockaddr *sa)
{
	struct cxls_sock_tuple t;
	struct sockaddr_storage ss;
	uint16_t fam;

	if (!cxls_sock_region())
		return 0;
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						   : sizeof(struct sockaddr_in));
	memset(&t, 0, sizeof(t));
	if (put_addr(&ss, t.saddr, &t.sport, &fam))
		return 0;
	t.family = fam;
	return cxls_listener_serves(&t);
}

/* A CLAIMING record whose claimer is dead (sock_claim.h). */
static int claim_stale(struct cxls_sock_rec *rec, uint64_t sg)
{
	struct cxls_sock_end *e = &rec->end[rec->creator & 1];

	return cxls_claim_stale(sg, &e->claim_gen, e->boot_hash, e->holder, CXLS_SOCK_HOLDERS,
				&rec->lease);
}

/* A record of the same connection made by the other end, or -1. */
static int find(const struct cxls_sock_region *r, uint64_t key, const struct cxls_sock_tuple *t,
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
		if (CXLS_SG_STATE(sg) == CXLS_SK_CLAIMING && claim_stale(rec, sg))
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
	uint64_t key = tuple_key(r, t);

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

/* POOL is stored before the control channel's settings are read and
 * made: an application's TCP_NODELAY or TCP_CORK that reaches the kernel
 * meanwhile is then seen by one of the two (tcp_option_raced(), sock_fd.c). */
static int to_pool(struct cxls_sconn *c, int fd)
{
	cxls_sock_denial_clear(&c->tuple, c->role);
	atomic_store(&c->mode, CXLS_SC_POOL);
	atomic_thread_fence(memory_order_seq_cst);
	cxls_sock_control_channel(c, fd);
	CXLS_INFO("socket slot %u: peer joined, bytes go through the pool", c->slot);
	return CXLS_SC_POOL;
}

/* The creator's record is over: nobody else will look at it. */
static int to_tcp(struct cxls_sconn *c, const char *why)
{
	CXLS_INFO("socket slot %u: %s, staying on TCP", c->slot, why);
	c->rec = NULL;
	atomic_store(&c->mode, CXLS_SC_TCP);
	return CXLS_SC_TCP;
}

/* Peer bytes or EOF on the TCP socket: the peer is not on the pool. */
static int tcp_spoke(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };

	return sys_poll(&p, 1, 0) > 0;
}

/* The meeting is over for an end still WAITING when the window closed
 * or the peer spoke on TCP.  Bytes or EOF on TCP before the meeting mean
 * the peer is not under the shim (one under it meets before its first
 * byte), so nobody will look for the record: it is freed at once (a
 * server under the shim whose clients are not kept a record per client
 * for STALE_NS and filled the table).  Past the window a late peer may
 * still come: the record stays ABANDONED for it to find. */
static int give_up(struct cxls_sconn *c, int fd, struct cxls_sock_rec *rec, uint64_t sg)
{
	int spoke = tcp_spoke(fd);

	if (!spoke && cxls_now_ns() <= c->deadline_ns)
		return 0;
	if (!atomic_compare_exchange_strong(
		    &rec->sg, &sg, CXLS_SG(c->gen, spoke ? CXLS_SK_FREE : CXLS_SK_ABANDONED)))
		return 0;
	cxls_publish(c->tx.flush, &rec->sg, CXLS_LINE);
	return 1;
}

/* Another process holds this end, or is being forked with it. */
static int held_elsewhere(const struct cxls_sock_end *e)
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

/* The peer's record, ABANDONED (with sg) for us to find: found, it has
 * served (its end stays on TCP, and so do we): freed now rather than
 * after STALE_NS, which under connection churn kept the table full. */
static void found_abandoned(const struct cxls_sock_region *r, uint32_t slot, uint64_t sg)
{
	struct cxls_sock_rec *rec = cxls_sock_rec(r, slot);

	if (CXLS_SG_STATE(sg) == CXLS_SK_ABANDONED &&
	    atomic_compare_exchange_strong(&rec->sg, &sg, CXLS_SG(CXLS_SG_GEN(sg), CXLS_SK_FREE)))
		cxls_publish(r->pool->flush_mode, &rec->sg, CXLS_LINE);
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
static int cross_join(struct cxls_sconn *c, int fd, uint64_t sg)
{
	const struct cxls_sock_region *r = cxls_sock_region();
	struct cxls_sock_rec *own = c->rec;
	uint32_t gen = c->gen;
	uint64_t psg;
	int slot, mode;

	if (!r)
		return CXLS_SC_PENDING;
	slot = find(r, c->key, &c->tuple, c->role, &psg);
	if (slot >= 0 && CXLS_SG_STATE(psg) == CXLS_SK_ABANDONED) {
		/* the peer stays on TCP (it gave up, or declined: decline())
		 * and looks no more: both records go; unless ours was joined
		 * meanwhile (that record was an older connection's, of the
		 * same tuple): the caller sees it */
		if (!atomic_compare_exchange_strong(&own->sg, &sg, CXLS_SG(gen, CXLS_SK_FREE)))
			return CXLS_SC_PENDING;
		cxls_publish(c->tx.flush, &own->sg, CXLS_LINE);
		found_abandoned(r, (uint32_t)slot, psg);
		return to_tcp(c, "the peer stays on TCP");
	}
	if (slot < 0 || CXLS_SG_STATE(psg) != CXLS_SK_WAITING)
		return CXLS_SC_PENDING;
	/* an end that another process holds too (a fork) stays on its own
	 * record, where that process settles as well: the peer moves */
	cxls_refresh(c->tx.flush, c->me, offsetof(struct cxls_sock_end, sleeper));
	if (held_elsewhere(c->me))
		return CXLS_SC_PENDING;
	if (c->role == CXLS_CLIENT) {
		if (!atomic_compare_exchange_strong(&own->sg, &sg, CXLS_SG(gen, CXLS_SK_FREE)))
			return CXLS_SC_PENDING; /* joined meanwhile: the caller sees it */
		cxls_publish(c->tx.flush, &own->sg, CXLS_LINE);
		CXLS_TRACE("socket slot %u: the server made a record too: joining slot %d",
			   c->slot, slot);
		mode = join(c, r, (uint32_t)slot, psg, CXLS_CLIENT, fd);
		if (mode == CXLS_SC_POOL)
			return mode;
		return to_tcp(c, "the server's record was given up or refused");
	}
	mode = join(c, r, (uint32_t)slot, psg, CXLS_SERVER, fd);
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
	return to_tcp(c, "the client's record was refused");
}

static int policy_allows(const struct cxls_sock_region *r, int role,
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
static int decline_as(const struct cxls_sock_region *r, int role,
		      const struct cxls_sock_tuple *t, uint64_t key, int lasting)
{
	uint32_t own, gen;
	uint64_t sg;
	int slot = find(r, key, t, role, &sg);

	if (slot < 0 && !lasting) {
		/* no slot for ours (a full table): the peer's, should it come
		 * now, is still refused */
		put_record(r, CXLS_SOCK_RING_MIN, role, t, key, CXLS_SK_ABANDONED, &own, &gen);
		atomic_thread_fence(memory_order_seq_cst);
		slot = find(r, key, t, role, &sg);
	}
	if (slot >= 0 && CXLS_SG_STATE(sg) == CXLS_SK_WAITING) {
		struct cxls_sock_rec *rec = cxls_sock_rec(r, (uint32_t)slot);

		if (atomic_compare_exchange_strong(
			    &rec->sg, &sg,
			    CXLS_SG(CXLS_SG_GEN(sg), lasting ? CXLS_SK_DENIED : CXLS_SK_REFUSED)))
			cxls_publish(r->pool->flush_mode, &rec->sg, CXLS_LINE);
	} else if (slot >= 0) {
		found_abandoned(r, (uint32_t)slot, sg);
	}
	return CXLS_SC_TCP;
}

static int decline(const struct cxls_sock_region *r, int role, const struct cxls_sock_tuple *t,
		   uint64_t key)
{
	return decline_as(r, role, t, key, 0);
}

/* No slot for our record: the peer may have taken the last one for its
 * own since we looked (a table of one slot, or a full one), so we look
 * again and join it; else it must not wait for us (decline()). */
static int no_slot(struct cxls_sconn *c, const struct cxls_sock_region *r, int role,
		   const struct cxls_sock_tuple *t, uint64_t key, int fd)
{
	uint64_t sg;
	int slot = find(r, key, t, role, &sg), mode;

	if (slot >= 0 && CXLS_SG_STATE(sg) == CXLS_SK_WAITING) {
		mode = join(c, r, (uint32_t)slot, sg, role, fd);
		if (mode != JOIN_LOST)
			return mode;
	}
	return decline(r, role, t, key);
}

static int meet(struct cxls_sconn *c, int fd, int role, uint32_t sndbuf)
{
	/* a client only looks when the server listened under the shim when
	 * the connect began (it may close its listener right after accept) */
	int server_listens = c->server_listens;
	const struct cxls_sock_region *r = cxls_sock_region();
	struct cxls_sock_tuple t;
	uint64_t key, sg;
	int slot, mode;

	if (!r || cxls_sock_tuple(fd, role, &t))
		return CXLS_SC_TCP;
	if (role == CXLS_CLIENT && !server_listens) {
		CXLS_TRACE("socket fd %d: server port %u not in the pool: TCP", fd, ntohs(t.sport));
		return CXLS_SC_TCP; /* the server does not run the shim */
	}
	key = tuple_key(r, &t);
	c->key = key; /* ours, not the pool's copies */
	c->tuple = t;
	/* the peer may be under the shim and have met: its record is
	 * refused, or it would wait out its window */
	if (!policy_allows(r, role, &t)) {
		CXLS_TRACE("socket fd %d: policy keeps it on TCP", fd);
		return decline_as(r, role, &t, key, 1);
	}
	if (cxls_uring_in_use()) {
		CXLS_INFO("io_uring in use in this process: sockets stay on TCP");
		return decline_as(r, role, &t, key, 1);
	}
	if (cxls_sock_denied_lately(&t, role, cxls_now_ns())) {
		CXLS_INFO("socket fd %d: the server denied the pool lately, staying on TCP", fd);
		return decline(r, role, &t, key);
	}
	cxls_claim_test_delay("look");
	if (role == CXLS_CLIENT && !cxls_sock_origin_private(fd)) {
		CXLS_INFO("socket fd %d: connected while another process may hold it (made before "
			  "a fork, or inherited): it stays on TCP", fd);
		return decline(r, role, &t, key);
	}
	slot = find(r, key, &t, role, &sg);
	if (slot >= 0) {
		if (CXLS_SG_STATE(sg) != CXLS_SK_WAITING) {
			found_abandoned(r, (uint32_t)slot, sg);
			return CXLS_SC_TCP; /* the other end already settled for TCP */
		}
		mode = join(c, r, (uint32_t)slot, sg, role, fd);
		return mode == JOIN_LOST ? CXLS_SC_TCP : mode; /* the creator gave up first */
	}
	cxls_claim_test_delay("meet");
	mode = create(c, r, sndbuf, role, &t, key);
	if (mode != CXLS_SC_PENDING)
		return no_slot(c, r, role, &t, key, fd);
	/* our record is published: a peer that looks from now on sees it;
	 * one that looked before made its own, which we see now */
	atomic_thread_fence(memory_order_seq_cst);
	return cross_join(c, fd, CXLS_SG(c->gen, CXLS_SK_WAITING));
}

void cxls_sock_decline(int fd, int role)
{
	const struct cxls_sock_region *r = cxls_sock_region();
	struct cxls_sock_tuple t;

	/* a listener its policy or io_uring keeps from being advertised
	 * has no client looking: deny a record, leave none */
	if (r && !cxls_sock_tuple(fd, role, &t))
		decline_as(r, role, &t, tuple_key(r, &t),
			   !policy_allows(r, role, &t) || cxls_uring_in_use());
}

int cxls_sock_meet(struct cxls_sconn *c, int fd, int role, uint32_t sndbuf)
{
	int mode;

	pthread_mutex_lock(&c->lock);
	mode = atomic_load(&c->mode);
	if (mode == CXLS_SC_CONNECTING) {
		mode = meet(c, fd, role, sndbuf);
		atomic_store(&c->mode, mode);
	}
	pthread_mutex_unlock(&c->lock);
	return mode;
}

/* A reader alone on the socket may then sleep in a blocking recv of the
 * doorbells, one system call where poll and a recv take two, if the recv
 * ends after a wait slice as poll does (sock_chan.h): so the socket's
 * SO_RCVTIMEO becomes the slice when the application set none, and the
 * application keeps seeing none (sock_fd.c).  The end's flag says so to
 * every holder, also after fork and exec. */
static void own_rcvtimeo(struct cxls_sconn *c, int fd)
{
	struct timeval tv = { 0, 0 };
	socklen_t l = sizeof(tv);

	if (sys_getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &l) || tv.tv_sec || tv.tv_usec)
		return;
	tv.tv_usec = CXLS_CHAN_SLICE_MS * 1000;
	if (syscall(SYS_setsockopt, fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		return;
	atomic_fetch_or(&c->me->flags, CXLS_END_RCVTIMEO);
	cxls_publish(c->tx.flush, &c->me->flags, sizeof(c->me->flags));
}

/* The TCP socket now carries doorbells only: each must leave at once, not
 * wait for an ACK (Nagle) or a cork.  What the application set is kept
 * and shown to it (sock_fd.c). */
void cxls_sock_control_channel(struct cxls_sconn *c, int fd)
{
	int one = 1, v = 0;
	socklen_t l = sizeof(v);

	if (sys_getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &l) == 0)
		atomic_store(&c->app_nodelay, v);
	l = sizeof(v);
	v = 0;
	if (sys_getsockopt(fd, IPPROTO_TCP, TCP_CORK, &v, &l) == 0)
		atomic_store(&c->app_cork, v);
	syscall(SYS_setsockopt, fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (v) {
		v = 0;
		syscall(SYS_setsockopt, fd, IPPROTO_TCP, TCP_CORK, &v, sizeof(v));
	}
	own_rcvtimeo(c, fd);
}

/* One look at c's meeting (PENDING; c locked): its mode now, PENDING
 * while the peer has not decided and the window is open. */
static int settle_look(struct cxls_sconn *c, int fd)
{
	struct cxls_sock_rec *rec = c->rec;
	uint64_t sg;
	uint32_t st;
	int mode;

	cxls_refresh(c->tx.flush, &rec->sg, CXLS_LINE);
	sg = atomic_load_explicit(&rec->sg, memory_order_acquire);
	st = CXLS_SG_STATE(sg);
	if (CXLS_SG_GEN(sg) != c->gen)
		return to_tcp(c, "record taken over");
	if (st == CXLS_SK_JOINED)
		return to_pool(c, fd);
	if (st == CXLS_SK_REFUSED || st == CXLS_SK_DENIED) {
		atomic_compare_exchange_strong(&rec->sg, &sg, CXLS_SG(c->gen, CXLS_SK_FREE));
		cxls_publish(c->tx.flush, &rec->sg, CXLS_LINE);
		if (st == CXLS_SK_REFUSED)
			return to_tcp(c, "the peer refused");
		cxls_sock_denial_note(&c->tuple, c->role, cxls_now_ns());
		return to_tcp(c, "the peer denied the pool (uid, policy or io_uring)");
	}
	if (st != CXLS_SK_WAITING) {
		/* FREE, CLAIMING, ABANDONED or no state at all under our
		 * generation: only corruption or a hostile peer writes that,
		 * and it would never change (fuzz_handshake) */
		return to_tcp(c, "record in a state no peer writes");
	}
	mode = cross_join(c, fd, sg);
	/* not remembered (sock_denial.h): a server that never came may only
	 * have been slow, or found no slot to say it stays on TCP */
	if (mode == CXLS_SC_PENDING && give_up(c, fd, rec, sg))
		mode = to_tcp(c, "no peer in the pool");
	return mode;
}

int cxls_sock_settle(struct cxls_sconn *c, int fd)
{
	int mode, spins = 0;

	pthread_mutex_lock(&c->lock);
	mode = atomic_load(&c->mode);
	while (mode == CXLS_SC_PENDING) {
		mode = settle_look(c, fd);
		if (mode != CXLS_SC_PENDING)
			break;
		/* at the start and every millisecond: the peer may wait for
		 * one of ours in turn (below) */
		if (spins == 0 || spins >= 200)
			cxls_sock_meet_connected();
		if (++spins < 200) {
			sched_yield();
		} else {
			/* the joiner's doorbell (when a look of an event loop
			 * asked for it, join()) or the peer's bytes wake it */
			struct pollfd p = { fd, POLLIN, 0 };
			sys_poll(&p, 1, 1);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return mode;
}

/* The first look again 1 ms after the record was made, then at 2, 4,
 * 8... ms, the window's end last; past it (another thread settles), every
 * millisecond. */
#define LOOK_FIRST_NS 1000000ull

uint64_t cxls_sock_next_look(const struct cxls_sconn *c, uint64_t now)
{
	uint64_t gap = LOOK_FIRST_NS;

	if (now >= c->deadline_ns)
		return now + LOOK_FIRST_NS;
	while (c->met_ns + gap <= now)
		gap *= 2;
	return c->met_ns + gap < c->deadline_ns ? c->met_ns + gap : c->deadline_ns;
}

int cxls_sock_settle_look(struct cxls_sconn *c, int fd)
{
	int mode;

	if (pthread_mutex_trylock(&c->lock))
		return CXLS_SC_PENDING; /* another thread settles it */
	mode = atomic_load(&c->mode);
	/* ours still (a record refused and given up may be another's) */
	if (mode == CXLS_SC_PENDING && CXLS_SG_GEN(atomic_load(&c->rec->sg)) == c->gen &&
	    !(atomic_load(&c->me->flags) & CXLS_END_RING_JOIN)) {
		atomic_fetch_or(&c->me->flags, CXLS_END_RING_JOIN);
		cxls_publish(c->tx.flush, &c->me->flags, sizeof(c->me->flags));
		atomic_thread_fence(memory_order_seq_cst); /* ring_creator() */
	}
	if (mode == CXLS_SC_PENDING)
		mode = settle_look(c, fd);
	pthread_mutex_unlock(&c->lock);
	return mode;
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
	cxls_sock_hold(c, NULL);
	cxls_end_arrived(c->me);
	cxls_publish(c->tx.flush, c->me, offsetof(struct cxls_sock_end, sleeper));
}

/* Frees the record (one CAS: one winner) and the buffers its references
 * still held. */
static int free_rec(const struct cxls_sock_region *r, struct cxls_sock_rec *rec, uint32_t slot,
		    uint64_t sg)
{
	cxls_refresh(r->pool->flush_mode, &rec->sg, CXLS_LINE);
	if (!atomic_compare_exchange_strong(&rec->sg, &sg, CXLS_SG(CXLS_SG_GEN(sg), CXLS_SK_FREE)))
		return 0;
	cxls_publish(r->pool->flush_mode, &rec->sg, CXLS_LINE);
	cxls_buf_reclaim(&r->bufs, CXLS_BUF_OWNER(CXLS_SG_GEN(sg), slot));
	return 1;
}

/* Frees the slot when both ends are finished. */
static void maybe_free(struct cxls_sock_rec *rec, uint32_t slot, uint32_t gen)
{
	const struct cxls_sock_region *r = cxls_sock_region();
	int a = end_finished(r, &rec->end[0]), b = end_finished(r, &rec->end[1]);

	if (a && b && free_rec(r, rec, slot, CXLS_SG(gen, CXLS_SK_JOINED)))
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

	if (!r || !c->rec || atomic_load(&c->tx_returned) || !end_finished(r, c->peer) ||
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
		if (CXLS_SG_STATE(sg) == CXLS_SK_WAITING && !held_elsewhere(e) &&
		    atomic_compare_exchange_strong(&c->rec->sg, &sg,
						   CXLS_SG(c->gen, CXLS_SK_ABANDONED))) {
			cxls_publish(c->tx.flush, &c->rec->sg, CXLS_LINE);
			return;
		}
		if (CXLS_SG_STATE(sg) != CXLS_SK_JOINED && CXLS_SG_STATE(sg) != CXLS_SK_WAITING)
			return;
	}
	left = cxls_holder_remove(e->holder, CXLS_SOCK_HOLDERS);
	if (c->held_extra)
		cxls_count_down(&e->extra);
	cxls_publish(c->tx.flush, e, offsetof(struct cxls_sock_end, sleeper));
	if (left)
		left = cxls_holder_left(e->holder, CXLS_SOCK_HOLDERS, e->boot_hash);
	if (left || atomic_load(&e->forking) || atomic_load(&e->extra)) {
		CXLS_TRACE("socket slot %u: still held here (%d holders, %u forks)", c->slot, left,
			   atomic_load(&e->forking));
		return;
	}
	atomic_fetch_or(&e->flags, CXLS_END_CLOSED | (close_resets(c, mode) ? CXLS_END_RESET : 0));
	cxls_publish(c->tx.flush, &e->flags, sizeof(e->flags));
	maybe_free(c->rec, c->slot, c->gen);
}

void cxls_sock_sweep_starved(const struct cxls_sock_region *r)
{
	static _Atomic uint64_t last; /* process-wide: one sweep a second is plenty */
	uint64_t now = cxls_now_ns(), t = atomic_load(&last);

	if ((t && now - t < 1000000000ull) || !atomic_compare_exchange_strong(&last, &t, now))
		return;
	if (r && cxls_buf_lent(&r->bufs) >= r->bufs.total)
		cxls_sock_sweep(r);
}

int cxls_sock_sweep(const struct cxls_sock_region *r)
{
	return sweep(r, STALE_NS);
}

static int sweep(const struct cxls_sock_region *r, uint64_t stale_ns)
{
	uint64_t now = cxls_now_ns();
	int freed = 0;

	cxls_proc_memo_begin(); /* a few processes hold all the records */
	for (uint32_t i = 0; i < r->nslots; i++) {
		struct cxls_sock_rec *rec = cxls_sock_rec(r, i);
		uint64_t sg;
		uint32_t st;
		int done;

		cxls_refresh(r->pool->flush_mode, rec, offsetof(struct cxls_sock_rec, end));
		sg = atomic_load(&rec->sg);
		st = CXLS_SG_STATE(sg);
		switch (st) {
		case CXLS_SK_FREE:
			continue;
		case CXLS_SK_CLAIMING: /* microseconds long, unless its claimer died */
			done = claim_stale(rec, sg);
			break;
		case CXLS_SK_WAITING:
			done = end_finished(r, &rec->end[rec->creator & 1]);
			break;
		case CXLS_SK_JOINED:
			done = end_finished(r, &rec->end[0]) && end_finished(r, &rec->end[1]);
			break;
		default: /* REFUSED, ABANDONED: only the creator ever held it */
			done = now - rec->created_ns > stale_ns ||
			       end_finished(r, &rec->end[rec->creator & 1]);
			break;
		}
		if (done)
			freed += free_rec(r, rec, i, sg);
	}
	cxls_proc_memo_end();
	if (freed)
		CXLS_INFO("socket sweep: %d records of closed or dead connections freed", freed);
	return freed;
}
