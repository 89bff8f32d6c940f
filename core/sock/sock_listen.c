/* sock_listen.c - listening sockets advertise themselves in the pool, so a
 * client only looks for its peer when the server runs the shim. */
#include "sock_meet.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coherence.h"
#include "log.h"
#include "pool.h"
#include "proc_id.h"
#include "sock_claim.h"
#include "sock_holder.h"
#include "sock_rules.h"
#include "sock_sys.h"
#include "sock_uring.h"

/* A listener's lines: written by its server's host, read by clients'. */
static void wb(const struct cxls_sock_region *r, const struct cxls_sock_listener *l)
{
	cxls_publish(r->pool->flush_mode, l, sizeof(*l));
}

static void fresh(const struct cxls_sock_region *r, const struct cxls_sock_listener *l)
{
	cxls_refresh(r->pool->flush_mode, l, sizeof(*l));
}

static int listener_alive(const struct cxls_sock_listener *l)
{
	int recorded;

	return l->untracked || atomic_load(&l->forking) ||
	       cxls_holder_alive(l->holder, CXLS_LISTENER_HOLDERS, l->boot_hash, &recorded) > 0;
}

/* A client asks whether its server's listener is alive at every connect,
 * and each holder's answer is a read of /proc/PID/stat: a yes is kept
 * for ALIVE_MEMO_NS per listener record and generation in this process
 * (one whose holders died since is seen that much later: its port
 * refuses connections meanwhile, unless a process the shim does not know
 * of holds the socket; then the client waits its meeting window). */
#define ALIVE_MEMO_NS (100ull * 1000000ull)

struct alive_memo {
	_Atomic uint64_t sg;    /* the record's state word when it was alive */
	_Atomic uint64_t until; /* cxls_now_ns() until which that holds */
};

static _Atomic(struct alive_memo *) memos; /* one per listener slot */

static struct alive_memo *memo_of(const struct cxls_sock_region *r,
				  const struct cxls_sock_listener *l)
{
	struct alive_memo *m = atomic_load(&memos), *none = NULL;

	if (!m) {
		m = calloc(r->nlisteners, sizeof(*m));
		if (!m)
			return NULL;
		if (!atomic_compare_exchange_strong(&memos, &none, m)) {
			free(m); /* another thread's came first */
			m = none;
		}
	}
	return &m[l - r->listeners];
}

static int listener_alive_memo(const struct cxls_sock_region *r,
			       const struct cxls_sock_listener *l, uint64_t sg)
{
	struct alive_memo *m = memo_of(r, l);
	uint64_t now = cxls_now_ns();

	if (m && atomic_load(&m->sg) == sg && atomic_load(&m->until) > now)
		return 1;
	if (!listener_alive(l))
		return 0;
	if (m) {
		atomic_store(&m->until, 0); /* no reader pairs the new sg with the old time */
		atomic_store(&m->sg, sg);
		atomic_store(&m->until, now + ALIVE_MEMO_NS);
	}
	return 1;
}

int cxls_listener_stale(struct cxls_sock_listener *l, uint64_t sg)
{
	if (CXLS_SG_STATE(sg) == CXLS_LST_CLAIMING)
		return cxls_claim_stale(sg, &l->claim_gen, l->boot_hash, l->holder,
					CXLS_LISTENER_HOLDERS, &l->lease);
	return CXLS_SG_STATE(sg) == CXLS_LST_LIVE && !listener_alive(l);
}

/* Writes our claim of l under gen: who we are first (a claim left by a
 * killed process is then told from a slow one, sock_claim.h), then what
 * we listen on; LIVE last, unless a sweeper took the claim back. */
static int fill(const struct cxls_sock_region *r, struct cxls_sock_listener *l, uint32_t gen,
		const struct cxls_sock_tuple *t, const struct cxls_proc_id *self)
{
	uint64_t sg = CXLS_SG(gen, CXLS_LST_CLAIMING);

	l->boot_hash = self->boot_hash;
	memset(l->holder, 0, sizeof(l->holder));
	cxls_holder_add(l->holder, CXLS_LISTENER_HOLDERS);
	atomic_store_explicit(&l->claim_gen, gen, memory_order_release);
	wb(r, l);
	cxls_claim_test_delay("listener");
	l->port = t->sport;
	l->family = t->family;
	memcpy(l->addr, t->saddr, sizeof(l->addr));
	l->uid = (uint32_t)getuid();
	l->untracked = 0;
	wb(r, l);
	if (!atomic_compare_exchange_strong_explicit(&l->sg, &sg, CXLS_SG(gen, CXLS_LST_LIVE),
						     memory_order_release, memory_order_relaxed))
		return -1;
	wb(r, l);
	return 0;
}

static int claim(const struct cxls_sock_region *r, const struct cxls_sock_tuple *t)
{
	struct cxls_proc_id self;

	cxls_proc_self(&self); /* now: nothing slow while a claim is held */
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < r->nlisteners; i++) {
			struct cxls_sock_listener *l = &r->listeners[i];
			uint64_t sg;

			fresh(r, l);
			sg = atomic_load(&l->sg);
			/* second pass: take over records of dead processes */
			if (pass == 1 && cxls_listener_stale(l, sg) &&
			    atomic_compare_exchange_strong(&l->sg, &sg,
							   CXLS_SG(CXLS_SG_GEN(sg), CXLS_LST_FREE)))
				sg = CXLS_SG(CXLS_SG_GEN(sg), CXLS_LST_FREE);
			if (CXLS_SG_STATE(sg) != CXLS_LST_FREE ||
			    !atomic_compare_exchange_strong(
				    &l->sg, &sg, CXLS_SG(CXLS_SG_GEN(sg) + 1, CXLS_LST_CLAIMING)))
				continue;
			if (fill(r, l, CXLS_SG_GEN(sg) + 1, t, &self))
				return -1;
			return (int)i;
		}
	}
	return -1;
}

/* Said once per port in a row: a listener shared since a fork is looked
 * at again at every accept (sock_fd.c). */
static void not_advertised(uint16_t sport, const char *why)
{
	static _Atomic uint16_t last;

	if (atomic_exchange(&last, sport) != sport)
		CXLS_INFO("socket listener: port %u not advertised: %s", ntohs(sport), why);
}

int cxls_listener_add(int fd)
{
	const struct cxls_sock_region *r = cxls_sock_region();
	struct cxls_sock_tuple t;
	int idx;

	if (!r || cxls_sock_tuple(fd, CXLS_SERVER, &t))
		return -1;
	/* a client that finds the listener waits for its server's record:
	 * one whose policy or io_uring keeps it on TCP leaves none when it
	 * accepts first, and its clients waited their whole window */
	if (!cxls_sock_rules_allow_some(r->rules, t.sport, program_invocation_short_name)) {
		not_advertised(t.sport, "the policy keeps every connection on it on TCP");
		return -1;
	}
	if (cxls_uring_in_use()) {
		not_advertised(t.sport, "io_uring in use in this process");
		return -1;
	}
	idx = claim(r, &t);
	if (idx < 0)
		CXLS_INFO("socket listener table full: port %u not advertised, its connections "
			  "stay on TCP", ntohs(t.sport));
	else
		CXLS_TRACE("listener %d: port %u advertised", idx, ntohs(t.sport));
	return idx;
}

static struct cxls_sock_listener *listener_at(int idx)
{
	const struct cxls_sock_region *r = cxls_sock_region();

	return r && idx >= 0 && (uint32_t)idx < r->nlisteners ? &r->listeners[idx] : NULL;
}

void cxls_listener_del(int idx)
{
	struct cxls_sock_listener *l = listener_at(idx);
	uint64_t sg;
	uint32_t forks;
	int left;

	if (!l)
		return;
	sg = atomic_load(&l->sg);
	/* forks before holders: a child records itself, then counts its fork
	 * down (cxls_listener_fork); counted the other way round, a child
	 * doing both in between was seen in neither and its listener freed */
	forks = atomic_load(&l->forking);
	cxls_claim_test_delay("listener-close"); /* between the reads: a child's fork ends */
	left = cxls_holder_remove(l->holder, CXLS_LISTENER_HOLDERS);
	if (left)
		left = cxls_holder_left(l->holder, CXLS_LISTENER_HOLDERS, l->boot_hash);
	CXLS_TRACE("listener %d: closed here, %d holders and %u forks left", idx, left, forks);
	/* under the generation we saw: never a record claimed since */
	if (!left && !l->untracked && !forks && CXLS_SG_STATE(sg) == CXLS_LST_LIVE)
		atomic_compare_exchange_strong(&l->sg, &sg,
					       CXLS_SG(CXLS_SG_GEN(sg), CXLS_LST_FREE));
	wb(cxls_sock_region(), l);
}

void cxls_listener_fork(int idx, int phase)
{
	struct cxls_sock_listener *l = listener_at(idx);

	if (!l)
		return;
	CXLS_TRACE("listener %d: fork phase %d", idx, phase);
	if (phase == 0) {
		atomic_fetch_add(&l->forking, 1);
	} else {
		if (cxls_holder_add(l->holder, CXLS_LISTENER_HOLDERS))
			l->untracked = 1;
		atomic_fetch_sub(&l->forking, 1);
	}
	wb(cxls_sock_region(), l);
}

static int addr_any(const uint8_t *a)
{
	static const uint8_t zero[16];

	return !memcmp(a, zero, 16);
}

/* Does l advertise t?  Read between two equal loads of its state word: a
 * record closed and claimed again while we read it (its generation moved)
 * is read again, never taken for a mix of the old and the new. */
/* A LIVE record (sg) whose holders are all dead, a killed server's: every
 * later connect to its port would check them again, until a listen()
 * reused the slot.  Freed by the first to see it. */
static void drop_dead(const struct cxls_sock_region *r, struct cxls_sock_listener *l, uint64_t sg)
{
	if (!atomic_compare_exchange_strong(&l->sg, &sg, CXLS_SG(CXLS_SG_GEN(sg), CXLS_LST_FREE)))
		return;
	wb(r, l);
	CXLS_INFO("listener %ld: its processes are gone: freed", (long)(l - r->listeners));
}

static int serves_one(const struct cxls_sock_region *r, struct cxls_sock_listener *l,
		      const struct cxls_sock_tuple *t)
{
	for (int tries = 0; tries < 8; tries++) {
		uint64_t sg;
		int match, alive;

		fresh(r, l);
		sg = atomic_load_explicit(&l->sg, memory_order_acquire);
		if (CXLS_SG_STATE(sg) != CXLS_LST_LIVE)
			return 0;
		match = l->port == t->sport &&
			(addr_any(l->addr) ||
			 (l->family == t->family && !memcmp(l->addr, t->saddr, 16)));
		if (match)
			cxls_claim_test_delay("listener-read");
		alive = match && listener_alive_memo(r, l, sg);
		atomic_thread_fence(memory_order_acquire);
		fresh(r, l);
		if (atomic_load_explicit(&l->sg, memory_order_relaxed) == sg) {
			if (match && !alive)
				drop_dead(r, l, sg);
			return alive;
		}
		CXLS_TRACE("listener %ld: closed or taken over while read: read again",
			   (long)(l - r->listeners));
	}
	return 0;
}

int cxls_listener_serves(const struct cxls_sock_tuple *t)
{
	const struct cxls_sock_region *r = cxls_sock_region();

	if (!r)
		return 0;
	for (uint32_t i = 0; i < r->nlisteners; i++)
		if (serves_one(r, &r->listeners[i], t))
			return 1;
	return 0;
}
