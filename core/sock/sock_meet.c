/* sock_meet.c - the meeting in the pool, its agreement and its clean-up.
 *
 * After connect() or accept(), each end names the connection (its tuple
 * and key) and looks for the record its peer made: found WAITING, it joins
 * it; else it makes its own and waits (PENDING) until the peer joins,
 * refuses, or the window closes (sock_meet.h tells the protocol).  An end
 * that stays on TCP says so in the pool, so that its peer does not wait.
 * A record is freed when both its ends are finished: closed, or held by
 * dead processes only.
 *
 * This file holds the meeting itself, what an end does first; the rest,
 * one part each: sock_meet_tuple.c, how both ends name a connection (and
 * whether a server listens under the shim); sock_meet_record.c, the
 * record table (slots claimed, records made and found); sock_meet_join.c,
 * joining the peer's record, and two records of one connection;
 * sock_meet_decline.c, an end that stays on TCP telling its peer;
 * sock_meet_settle.c, a waiting end settling for the pool or TCP;
 * sock_meet_end.c, a record's ends: their holders, fork, close;
 * sock_meet_sweep.c, the records of closed or dead connections freed.
 * What they share is in sock_meet_int.h.
 */
#include "sock_meet_int.h"

#include <netinet/in.h>
#include <pthread.h>

#include "log.h"
#include "sock_claim.h"
#include "sock_denial.h"
#include "sock_origin.h"
#include "sock_uring.h"

/* No slot for our record: the peer may have taken the last one for its
 * own since we looked (a table of one slot, or a full one), so we look
 * again and join it; else it must not wait for us (cxls_meet_decline()). */
static int no_slot(struct cxls_sconn *c, const struct cxls_sock_region *r, int role,
		   const struct cxls_sock_tuple *t, uint64_t key, int fd)
{
	uint64_t sg;
	int slot = cxls_meet_find(r, key, t, role, &sg), mode;

	if (slot >= 0 && CXLS_SG_STATE(sg) == CXLS_SK_WAITING) {
		mode = cxls_meet_join(c, r, (uint32_t)slot, sg, role, fd);
		if (mode != JOIN_LOST)
			return mode;
	}
	return cxls_meet_decline(r, role, t, key);
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
	key = cxls_meet_tuple_key(r, &t);
	c->key = key; /* ours, not the pool's copies */
	c->tuple = t;
	/* the peer may be under the shim and have met: its record is
	 * refused, or it would wait out its window */
	if (!cxls_meet_policy_allows(r, role, &t)) {
		CXLS_TRACE("socket fd %d: policy keeps it on TCP", fd);
		return cxls_meet_decline_as(r, role, &t, key, 1);
	}
	if (cxls_uring_in_use()) {
		CXLS_INFO("io_uring in use in this process: sockets stay on TCP");
		return cxls_meet_decline_as(r, role, &t, key, 1);
	}
	if (cxls_sock_denied_lately(&t, role, cxls_now_ns())) {
		CXLS_INFO("socket fd %d: the server denied the pool lately, staying on TCP", fd);
		return cxls_meet_decline(r, role, &t, key);
	}
	cxls_claim_test_delay("look");
	if (role == CXLS_CLIENT && !cxls_sock_origin_private(fd)) {
		CXLS_INFO("socket fd %d: connected while another process may hold it (made before "
			  "a fork, or inherited): it stays on TCP", fd);
		return cxls_meet_decline(r, role, &t, key);
	}
	slot = cxls_meet_find(r, key, &t, role, &sg);
	if (slot >= 0) {
		if (CXLS_SG_STATE(sg) != CXLS_SK_WAITING) {
			cxls_meet_found_abandoned(r, (uint32_t)slot, sg);
			return CXLS_SC_TCP; /* the other end already settled for TCP */
		}
		mode = cxls_meet_join(c, r, (uint32_t)slot, sg, role, fd);
		return mode == JOIN_LOST ? CXLS_SC_TCP : mode; /* the creator gave up first */
	}
	cxls_claim_test_delay("meet");
	mode = cxls_meet_create(c, r, sndbuf, role, &t, key);
	if (mode != CXLS_SC_PENDING)
		return no_slot(c, r, role, &t, key, fd);
	/* our record is published: a peer that looks from now on sees it;
	 * one that looked before made its own, which we see now */
	atomic_thread_fence(memory_order_seq_cst);
	return cxls_meet_cross_join(c, fd, CXLS_SG(c->gen, CXLS_SK_WAITING));
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
