/* sock_chan_state.c - what the peer's end means for this one, as TCP
 * would show it: end of file, resets, a peer gone without a word in the
 * pool (its kernel's FIN or RST, its holders' deaths), SO_ERROR and the
 * poll readiness that follows. */
#include "sock_chan.h"

#include <errno.h>
#include <poll.h>

#include "sock.h"
#include "sock_meet.h"
#include "sock_ref.h"
#include "sock_sys.h"

/* The peer's socket is gone although it never said goodbye in the pool
 * (exit, SIGKILL): TCP would have reset if it died with unread bytes.
 * Its kernel's FIN or RST tells, but after a shutdown the FIN came with
 * it; then only an RST (its kernel had doorbells unread, or answered a
 * probe) or its holders' deaths do.  An RST after a close in the pool is
 * the doorbells' and says nothing: the pool's flags do. */
static inline int peer_vanished(struct cxls_sconn *c, uint32_t pf)
{
	int eof = atomic_load_explicit(&c->tcp_eof, memory_order_relaxed);
	int rst = atomic_load_explicit(&c->tcp_rst, memory_order_relaxed);

	if (!eof && !rst && !atomic_load_explicit(&c->peer_dead, memory_order_relaxed))
		return 0; /* the common case: nothing came */
	if (pf & CXLS_END_CLOSED)
		return 0;
	if (pf & CXLS_END_SHUT_WR)
		return rst || atomic_load(&c->peer_dead);
	return eof || rst;
}

/* The peer's flags, as the pool has them now. */
static uint32_t peer_flags(struct cxls_sconn *c)
{
	cxls_refresh(c->tx.flush, &c->peer->flags, sizeof(c->peer->flags));
	return atomic_load_explicit(&c->peer->flags, memory_order_acquire);
}

/* Like a network's delay for the FIN: small beside a slice, large beside
 * a round trip of a busy connection. */
#define LOOK_NS (10ull * 1000000ull)

/* Every holder of the peer's end is dead, but one was forking: its child
 * records itself at once, unless it died first.  Dead once that state
 * lasted FORK_GRACE_NS (the first look that saw it starts the clock). */
#define FORK_GRACE_NS (1000ull * 1000000ull)

static int fork_lapsed(struct cxls_sconn *c)
{
	uint64_t now = cxls_chan_tick_ns(), seen = atomic_load_explicit(&c->peer_fork_ns, memory_order_relaxed);

	if (!seen) {
		atomic_store_explicit(&c->peer_fork_ns, now, memory_order_relaxed);
		return 0;
	}
	return now - seen >= FORK_GRACE_NS;
}

/* A peer that shut down writing: its FIN came then, so its death since
 * (exit, SIGKILL, no word in the pool) leaves nothing to drain.  On this
 * host its holders tell.  On another, a writer probes with a doorbell,
 * as TCP's own next segment would: a socket that is gone answers with an
 * RST, whose error the next look finds (a live peer reads the doorbell
 * as any other). */
static int look_half_closed(struct cxls_sconn *c, int fd, int writer)
{
	int dead = cxls_sock_peer_dead(c);

	if (dead == CXLS_PEER_FORKING)
		dead = fork_lapsed(c);
	else
		atomic_store_explicit(&c->peer_fork_ns, 0, memory_order_relaxed);
	if (dead > 0)
		atomic_store(&c->peer_dead, 1);
	else if (dead < 0 && cxls_chan_take_sk_err(fd)) /* an RST's, after the FIN */
		atomic_store(&c->tcp_rst, 1);
	/* a probe after our own shutdown would only fail here (EPIPE) */
	else if (dead < 0 && (writer || cxls_stream_used(&c->tx) > 0) && !cxls_chan_shut_wr(c) &&
		 sys_send(fd, "p", 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == ECONNRESET)
		atomic_store(&c->tcp_rst, 1);
	return atomic_load(&c->peer_dead) || atomic_load(&c->tcp_rst);
}

static int look(struct cxls_sconn *c, int fd, int writer)
{
	uint64_t now;
	uint32_t pf;

	if (fd < 0 || atomic_load(&c->tcp_rst) || atomic_load(&c->peer_dead))
		return 0;
	now = cxls_chan_tick_ns();
	if (now - atomic_load_explicit(&c->looked_ns, memory_order_relaxed) < LOOK_NS)
		return 0;
	atomic_store_explicit(&c->looked_ns, now, memory_order_relaxed);
	pf = peer_flags(c);
	if (pf & (CXLS_END_CLOSED | CXLS_END_RESET))
		return 0; /* it said goodbye in the pool: the rings tell it all */
	if (pf & CXLS_END_SHUT_WR)
		return look_half_closed(c, fd, writer);
	if (atomic_load(&c->tcp_eof))
		return 0;
	cxls_chan_drain(c, fd);
	return cxls_chan_tcp_ended(c);
}

int cxls_chan_look(struct cxls_sconn *c, int fd)
{
	return look(c, fd, 0);
}

/* An fd whose wait reports nothing yet: a peer that shut down writing
 * and holds our bytes unread (a full ring) may have died since; nothing
 * else would ever wake a wait for POLLOUT, or an edge-triggered one. */
int cxls_chan_look_idle(struct cxls_sconn *c, int fd)
{
	uint32_t pf;

	/* its shutdown's FIN came: a word of ours, which most idle fds lack,
	 * before the peer's cache lines */
	if (!atomic_load_explicit(&c->tcp_eof, memory_order_relaxed) ||
	    atomic_load(&c->mode) != CXLS_SC_POOL)
		return 0;
	pf = peer_flags(c);
	if ((pf & (CXLS_END_SHUT_WR | CXLS_END_CLOSED | CXLS_END_RESET)) != CXLS_END_SHUT_WR ||
	    cxls_stream_used(&c->tx) <= 0)
		return 0;
	return look(c, fd, 0);
}

/* A peer that read since the last look was there then, but may have
 * exited since: bytes written now, after its FIN, must not count as
 * unread at its end (TCP says EPIPE, not ECONNRESET), so the look is
 * made anyway; only the probe waits for a peer that reads no more. */
int cxls_chan_look_writer(struct cxls_sconn *c, int fd)
{
	uint64_t cons = atomic_load_explicit(&c->tx.hdr->cons, memory_order_relaxed);
	int read_since = cons != atomic_load_explicit(&c->looked_cons, memory_order_relaxed);

	if (read_since)
		atomic_store_explicit(&c->looked_cons, cons, memory_order_relaxed);
	return look(c, fd, !read_since);
}

/* An RST after the peer's FIN (it shut down writing, then closed with
 * bytes unread or SO_LINGER 0): tcp_reset in CLOSE_WAIT leaves EPIPE, not
 * ECONNRESET, and reads stay at end of file (SOCK_DONE comes first). */
static int fin_then_rst(uint32_t pf)
{
	return (pf & CXLS_END_RESET) && (pf & CXLS_END_SHUT_WR);
}

/* The peer vanished with our bytes unread: its kernel reset. */
static int vanished_unread(struct cxls_sconn *c, uint32_t pf)
{
	return peer_vanished(c, pf) && cxls_stream_used(&c->tx) > 0;
}

/* Or its FIN, then its death with our bytes unread: its kernel's RST. */
static int fin_then_gone(struct cxls_sconn *c, uint32_t pf)
{
	return fin_then_rst(pf) || ((pf & CXLS_END_SHUT_WR) && vanished_unread(c, pf));
}

/* An RST that comes after this end drew one of its own finds the socket
 * CLOSED: it leaves no error. */
int cxls_chan_fin_then_rst(struct cxls_sconn *c)
{
	return !atomic_load(&c->broken) && !cxls_chan_rst_drawn(c) &&
	       fin_then_gone(c, peer_flags(c));
}

int cxls_chan_read_state(struct cxls_sconn *c)
{
	uint32_t pf = peer_flags(c);

	if (atomic_load(&c->broken) || ((pf & CXLS_END_RESET) && !fin_then_rst(pf)))
		return CXLS_RD_RESET;
	if (pf & (CXLS_END_SHUT_WR | CXLS_END_CLOSED))
		return CXLS_RD_EOF;
	if (peer_vanished(c, pf))
		return cxls_stream_used(&c->tx) > 0 ? CXLS_RD_RESET : CXLS_RD_EOF;
	return CXLS_RD_OPEN;
}

int cxls_sock_inq(struct cxls_sconn *c)
{
	int n = cxls_sock_unread(c);

	return n || cxls_chan_read_state(c) != CXLS_RD_EOF ? n : 1;
}

int cxls_chan_write_error(struct cxls_sconn *c)
{
	uint32_t pf = peer_flags(c);

	if (atomic_load(&c->broken) || ((pf & CXLS_END_RESET) && !fin_then_rst(pf)))
		return ECONNRESET;
	if (cxls_chan_shut_wr(c) || cxls_chan_rst_drawn(c) || fin_then_gone(c, pf))
		return EPIPE;
	/* A peer gone without a word in the pool (exit, SIGKILL): its kernel
	 * reset the connection if it left our bytes unread; else, as a peer
	 * closed in the pool, it takes the next write, which draws the RST
	 * (cxls_chan_refused). */
	if (vanished_unread(c, pf))
		return ECONNRESET;
	return 0;
}

int cxls_chan_closed(struct cxls_sconn *c)
{
	uint32_t pf = peer_flags(c);

	if (atomic_load(&c->broken) || cxls_chan_rst_drawn(c) || (pf & CXLS_END_RESET) ||
	    vanished_unread(c, pf))
		return 1;
	return cxls_chan_shut_wr(c) && (pf & (CXLS_END_SHUT_WR | CXLS_END_CLOSED));
}

int cxls_chan_refused(struct cxls_sconn *c, int fd)
{
	uint32_t pf = peer_flags(c);
	uint32_t rdwr = CXLS_END_SHUT_WR | CXLS_END_SHUT_RD;

	if (!(pf & CXLS_END_CLOSED) && (pf & rdwr) != rdwr && !peer_vanished(c, pf))
		return 0;
	/* the peer sent its FIN first: this end was in CLOSE_WAIT, where an
	 * RST leaves EPIPE (tcp_reset); a peer still there is reset */
	atomic_store(&c->rst_err, EPIPE);
	atomic_store(&c->rst_drawn, 1);
	cxls_chan_own_flag_publish(c, CXLS_END_RESET);
	cxls_chan_notify_reader(c, fd);
	return 1;
}

int cxls_chan_take_sk_err(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	return sys_getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 ? err : 0;
}

/* Marks the reset reported, for every holder of the end; whether it
 * was before. */
static int told_before(struct cxls_sconn *c)
{
	int was = atomic_exchange(&c->reset_told, 1);

	return (cxls_chan_own_flag_set(c, CXLS_END_TOLD) & CXLS_END_TOLD) || was;
}

static int told(struct cxls_sconn *c)
{
	return atomic_load(&c->reset_told) || (cxls_chan_own_flags(c) & CXLS_END_TOLD);
}

void cxls_chan_told(struct cxls_sconn *c, int yes)
{
	atomic_store(&c->reset_told, yes);
	if (yes)
		cxls_chan_own_flag_set(c, CXLS_END_TOLD);
	else
		atomic_fetch_and_explicit(&c->me->flags, ~(uint32_t)CXLS_END_TOLD,
					  memory_order_acq_rel);
}

int cxls_chan_tell_reset(struct cxls_sconn *c, int fd)
{
	if (told_before(c))
		return 0;
	cxls_chan_take_sk_err(fd); /* an RST's, if one came */
	return 1;
}

/* err if the reset was not reported yet (it is now), else 0. */
static int first_report(struct cxls_sconn *c, int err)
{
	return told_before(c) ? 0 : err;
}

void cxls_sock_so_error(struct cxls_sconn *c, int fd, int *val)
{
	int drawn;

	/* The kernel's socket carries doorbells, and its state is not the
	 * connection's: an RST there is the pool's reset seen twice, or a
	 * peer gone without one (noted as such); the answer is the pool's. */
	if (*val == ECONNRESET || *val == EPIPE) {
		atomic_store(&c->tcp_rst, 1); /* EPIPE: an RST after the peer's FIN */
		*val = 0;
	}
	/* asked before any wait or write: the peer may be gone (a look,
	 * as a poll's) */
	cxls_chan_look(c, fd);
	drawn = atomic_exchange(&c->rst_err, 0);
	if (*val)
		return;
	if (drawn)
		*val = drawn;
	else if (cxls_chan_fin_then_rst(c))
		*val = first_report(c, EPIPE);
	else if (cxls_chan_read_state(c) == CXLS_RD_RESET ||
		 cxls_chan_write_error(c) == ECONNRESET)
		*val = first_report(c, ECONNRESET);
}

/* Whether the write side's error can change what cxls_chan_events says:
 * it gives POLLOUT, and POLLHUP once reading is over.  While the peer's
 * end reads open, it can give POLLERR only with a reset the read side
 * sees too (broken, the peer's RESET flag, an RST: read state RESET or
 * EOF), so a reader's arm skips it. */
static int wants_write_error(short events, int rd, struct cxls_sconn *c)
{
	return (events & (POLLOUT | POLLWRNORM)) || rd != CXLS_RD_OPEN || cxls_chan_shut_rd(c);
}

short cxls_chan_events(struct cxls_sconn *c, short events)
{
	int64_t used = cxls_stream_used(&c->rx), room = cxls_ring_free(&c->tx);
	uint32_t lowat = cxls_chan_rcvlowat(c);
	int rd = cxls_chan_read_state(c);
	int wr = wants_write_error(events, rd, c) ? cxls_chan_write_error(c) : 0, reading_over;
	short ev = 0;

	if (used < 0 || room < 0) {
		cxls_sconn_break(c, used < 0 ? "receive ring cursors out of bounds (corrupt pool?)"
					      : "send ring cursors out of bounds (corrupt pool?)");
		ev = POLLIN | POLLRDNORM | POLLRDHUP | POLLOUT | POLLWRNORM | POLLHUP;
		return (ev & events) | POLLHUP | (told(c) ? 0 : POLLERR);
	}
	lowat = (uint32_t)cxls_chan_reachable(c, lowat);
	if (used > 0 && (uint64_t)used >= (lowat ? lowat : 1))
		ev |= POLLIN | POLLRDNORM;
	reading_over = rd != CXLS_RD_OPEN || cxls_chan_shut_rd(c);
	if (reading_over)
		ev |= POLLIN | POLLRDNORM | POLLRDHUP;
	if (room >= (int64_t)(c->tx.cap / 4) || wr)
		ev |= POLLOUT | POLLWRNORM;
	if (((rd == CXLS_RD_RESET || wr == ECONNRESET || (wr && cxls_chan_fin_then_rst(c))) &&
	     !told(c)) ||
	    atomic_load(&c->rst_err))
		ev |= POLLERR; /* the kernel's sk_err, until reported */
	if (reading_over && (wr || cxls_chan_shut_wr(c)))
		ev |= POLLHUP;
	return ev & (events | POLLERR | POLLHUP);
}
