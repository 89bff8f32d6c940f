/* watchdog.c - timeouts, dead peers and remote aborts. */
#include "watchdog.h"

#include <pthread.h>
#include <time.h>

#include "comm.h"
#include "lib_thread.h"
#include "log.h"
#include "op_desc.h"
#include "p2p_match.h"
#include "registry.h"
#include "trace.h"
#include "trace_coll.h"

#define TICK_NS (10 * 1000000L)

/* Rank r joined and its process is gone. */
static int died(struct cxls_comm *c, int r)
{
	return atomic_load(&c->view.ranks[r].state) == CXLS_RANK_JOINED &&
	       cxls_comm_rank_alive(&c->view, (uint32_t)r) == 0;
}

/* A peer whose process died, or that left before finishing the
 * collectives this rank is still running (a peer that completed them and
 * destroyed its communicator is fine). */
static int peer_gone(struct cxls_comm *c, uint32_t ops)
{
	for (int r = 0; r < c->nranks; r++) {
		uint32_t done;

		if (r == c->rank)
			continue;
		if (died(c, r))
			return r;
		done = cxls_bell_read(&c->view.done[r], c->pool->flush_mode);
		if (atomic_load(&c->view.ranks[r].state) == CXLS_RANK_LEFT &&
		    !cxls_seq_reached(done, ops))
			return r;
	}
	return -1;
}

/* A replay is not counted as work (its graph runs when the application
 * launches it), but its stream marks each channel it is in, and its
 * captured collectives (pool_format.h: struct cxls_flag_line): a peer
 * that died meanwhile never fills or empties the slot waited for, as
 * with NCCL, whose own wait would last until an abort. */
static int captured_peer_dead(struct cxls_comm *c)
{
	int coll = cxls_comm_coll_busy(c); /* every peer's business */

	for (int r = 0; r < c->nranks; r++)
		if (r != c->rank && (coll || cxls_comm_p2p_busy(c, r)) && died(c, r))
			return r;
	return -1;
}

/* A rank busy in a captured collective while no collective replay of
 * it starts (replay.h) for the op timeout waits for peers that replay
 * something else (a send/receive group, api_check graphkind) or nothing
 * at all: as an eager collective would, it times out.  A captured send or
 * receive is not timed (p2p.h). */
static int replay_stuck(struct cxls_comm *c, uint64_t now)
{
	uint32_t n = atomic_load(&c->replays_started);

	if (!cxls_comm_coll_busy(c) || n != c->wd_replays) {
		c->wd_replays = n;
		c->wd_replay_since_ns = now;
		return 0;
	}
	return now - c->wd_replay_since_ns > (uint64_t)c->timeout_ms * 1000000ull;
}

static const char *abort_reason_name(uint32_t reason)
{
	switch (reason) {
	case CXLS_ABORT_USER: return "ncclCommAbort or ncclCommRevoke";
	case CXLS_ABORT_PEER_DEAD: return "a rank died or left";
	case CXLS_ABORT_TIMEOUT: return "a collective timed out";
	case CXLS_ABORT_MISMATCH: return "ranks called mismatched operations (collectives, or send and receive sizes)";
	default: return "unknown reason";
	}
}

static void check_comm(struct cxls_comm *c, void *arg)
{
	uint64_t now = *(uint64_t *)arg;
	uint32_t ops, done, p2p_done, reason;
	int idle;
	int dead;

	if (atomic_load(&c->async_err) == ncclInProgress || !c->lay.chunk)
		return;
	atomic_fetch_add(&c->view.ranks[c->rank].heartbeat, 1);
	if (atomic_load(&c->aborted)) {
		cxls_comm_unblock(c);
		return;
	}
	reason = atomic_load(&c->view.rec->abort_reason);
	if (reason != CXLS_ABORT_NONE) {
		cxls_log_set_rank(c->rank);
		CXLS_WARN("comm %p: rank %u failed the communicator: %s", (void *)c,
			  atomic_load(&c->view.rec->abort_rank), abort_reason_name(reason));
		cxls_comm_fail(c, CXLS_ABORT_PEER_DEAD,
			       reason == CXLS_ABORT_MISMATCH ? ncclInvalidUsage : ncclRemoteError);
		return;
	}
	cxls_desc_verify(c);
	cxls_p2p_match_verify(c);
	if (atomic_load(&c->aborted))
		return;
	if ((atomic_load(&c->p2p_captured) || atomic_load(&c->coll_captured)) &&
	    (dead = captured_peer_dead(c)) >= 0) {
		cxls_log_set_rank(c->rank);
		CXLS_WARN("comm %p: rank %d died during a replayed send, receive or collective: "
			  "aborting",
			  (void *)c, dead);
		cxls_comm_fail(c, CXLS_ABORT_PEER_DEAD, ncclRemoteError);
		return;
	}
	if (replay_stuck(c, now)) {
		cxls_log_set_rank(c->rank);
		CXLS_WARN("comm %p: replayed collective %u made no progress for %u ms: aborting",
			  (void *)c, atomic_load(&c->replays_started), c->timeout_ms);
		cxls_comm_fail(c, CXLS_ABORT_TIMEOUT, ncclSystemError);
		return;
	}
	ops = atomic_load(&c->ops);
	done = cxls_bell_read(&c->view.done[c->rank], c->pool->flush_mode);
	p2p_done = cxls_bell_read(&c->view.p2p_done[c->rank], c->pool->flush_mode);
	/* An enqueue under way is work in flight too: c->ops and p2p_ops
	 * count an operation only once its enqueue ends, and an enqueue can
	 * block in the driver, its stream's queue full behind a doorbell
	 * wait for a peer that died or never comes (close_enqueues, comm.c);
	 * counted idle, the timeout and a dead peer went unnoticed and the
	 * call never returned.  (Replays are watched apart:
	 * captured_peer_dead(), replay_stuck().) */
	idle = done == ops && p2p_done == atomic_load(&c->p2p_ops) &&
	       !(atomic_load(&c->enq) & ~CXLS_ENQ_CLOSED);
	if (done != c->wd_done)
		cxls_trace_done(cxls_trace_comm_id(c), done);
	if (idle || done != c->wd_done || p2p_done != c->wd_p2p_done) {
		c->wd_done = done;
		c->wd_p2p_done = p2p_done;
		c->wd_since_ns = now;
		return;
	}
	cxls_log_set_rank(c->rank);
	dead = peer_gone(c, ops);
	if (dead >= 0) {
		CXLS_WARN("comm %p: rank %d died or left during collective %u: aborting",
			  (void *)c, dead, done + 1);
		cxls_comm_fail(c, CXLS_ABORT_PEER_DEAD, ncclRemoteError);
	} else if (now - c->wd_since_ns > (uint64_t)c->timeout_ms * 1000000ull) {
		CXLS_WARN("comm %p: collective %u or send/receive group %u made no progress for "
			  "%u ms: aborting",
			  (void *)c, done + 1, p2p_done + 1, c->timeout_ms);
		cxls_comm_fail(c, CXLS_ABORT_TIMEOUT, ncclSystemError);
	}
}

static void *watchdog(void *arg)
{
	struct timespec tick = { 0, TICK_NS };

	(void)arg;
	for (;;) {
		uint64_t now = cxls_now_ns();

		cxls_registry_each(check_comm, &now);
		nanosleep(&tick, NULL);
	}
	return NULL;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void start(void)
{
	pthread_t t;
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (cxls_thread_start(&t, &attr, watchdog, NULL))
		CXLS_WARN("cannot start the watchdog thread: timeouts are not enforced");
	pthread_attr_destroy(&attr);
}

void cxls_watchdog_start(void)
{
	pthread_once(&once, start);
}
