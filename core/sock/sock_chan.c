/* sock_chan.c - doorbells, FIN/RST and readiness of a pooled connection. */
#include "sock_chan.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "proc_id.h"
#include "sock.h"
#include "sock_meet.h"
#include "sock_ref.h"
#include "sock_sys.h"

static void ring_bell(int fd)
{
	static const char bell = 'b';

	/* a full socket buffer means a doorbell is pending anyway */
	sys_send(fd, &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void cxls_chan_ring(int fd)
{
	ring_bell(fd);
}

/* One direction's wake-up request as both ends see it (sock_format.h):
 * want and cancel on the sleeping end's line, rung on the answering
 * end's, and the two lines to write back or refresh in a flush pool. */
struct req {
	_Atomic uint64_t *want;
	_Atomic uint32_t *rung;
	_Atomic uint32_t *cancel;
	int flush;
	const void *sleeper_line;
	const void *answer_line;
};

/* Requests of the reader of r (wake it on data) and of its writer (on
 * space). */
static struct req data_req(const struct cxls_ring *r)
{
	struct cxls_sock_ring_hdr *h = r->hdr;

	return (struct req){ &h->data_want, &h->data_rung, &h->data_cancel, r->flush, &h->cons,
			     &h->prod };
}

static struct req space_req(const struct cxls_ring *r)
{
	struct cxls_sock_ring_hdr *h = r->hdr;

	return (struct req){ &h->space_want, &h->space_rung, &h->space_cancel, r->flush, &h->prod,
			     &h->cons };
}

static int pending(uint64_t want, uint32_t rung, uint32_t cancel)
{
	return CXLS_REQ_SEQ(want) != rung && CXLS_REQ_SEQ(want) != cancel;
}

/* Sleeps this thread rang a doorbell for lately (tokens, sock_format.h):
 * their other requests need none.  A forked child inherits them, rightly:
 * the doorbells were sent. */
#define RECENT_BELLS 4

static _Thread_local uint64_t recent_bell[RECENT_BELLS];
static _Thread_local unsigned recent_next;

static int rang_lately(uint64_t tok)
{
	for (int i = 0; i < RECENT_BELLS; i++)
		if (recent_bell[i] == tok)
			return 1;
	return 0;
}

static void rang_now(uint64_t tok)
{
	if (tok && !rang_lately(tok))
		recent_bell[recent_next++ % RECENT_BELLS] = tok;
}

/* A request neither answered (rung) nor withdrawn (cancel): answer it
 * once, whichever of our threads gets there; 1 when that takes a
 * doorbell.  None when its sleep was rung already, unless a sleeper
 * joined the request meanwhile (it cleared the token, or raised a new
 * one): the want read again after rung was moved tells, and a joiner
 * reads rung after clearing (request()), so one of them sees the other. */
static int answer(const struct req *q)
{
	uint64_t w = atomic_load(q->want), tok = CXLS_REQ_TOKEN(w);
	uint32_t r = atomic_load(q->rung);

	if (!pending(w, r, atomic_load(q->cancel)) ||
	    !atomic_compare_exchange_strong(q->rung, &r, CXLS_REQ_SEQ(w)))
		return 0;
	cxls_publish(q->flush, q->answer_line, CXLS_LINE);
	if (tok && rang_lately(tok)) {
		cxls_refresh(q->flush, q->sleeper_line, CXLS_LINE);
		if (atomic_load(q->want) == w)
			return 0;
	}
	rang_now(tok);
	return 1;
}

/* Dekker-style: the producer stored prod, the sleeper bumped data_want;
 * each then reads the other's word, so one of them always sees the other. */
void cxls_chan_notify_reader(struct cxls_sconn *c, int fd)
{
	struct req q = data_req(&c->tx);

	atomic_thread_fence(memory_order_seq_cst);
	cxls_refresh(c->tx.flush, &c->tx.hdr->cons, CXLS_LINE);
	if (answer(&q))
		ring_bell(fd);
}

/* A sleeping writer is woken once a quarter of its ring is free, not at
 * every byte: one wake-up then moves a large piece (TCP's write space). */
void cxls_chan_notify_writer(struct cxls_sconn *c, int fd)
{
	struct req q = space_req(&c->rx);

	atomic_thread_fence(memory_order_seq_cst);
	cxls_refresh(c->rx.flush, &c->rx.hdr->prod, CXLS_LINE);
	if (!pending(atomic_load_explicit(q.want, memory_order_relaxed),
		     atomic_load_explicit(q.rung, memory_order_relaxed),
		     atomic_load_explicit(q.cancel, memory_order_relaxed)))
		return;
	if (cxls_ring_free(&c->rx) >= (int64_t)(c->rx.cap / 4) && answer(&q))
		ring_bell(fd);
}

/* The sleeper table's clock: every process of an end is on one host, and
 * a deadline needs no better than the tick (CLOCK_MONOTONIC_COARSE: no
 * clock read of its own, a sleep of one slice is 25 ticks or more). */
static uint64_t tick_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A sleeper entry's deadline is even; odd: its thread sleeps in a recv
 * that reads the doorbells (cxls_chan_recv_sleep). */
#define IN_RECV 1ull

/* A deadline is live while in the future, but never further than a
 * sleeper entry or a drain claim is set ahead (2.5 slices), with as much
 * again for a clock read a while before the other thread's: one further
 * out is a corrupt pool's, which would never lapse (every wait would
 * find the doorbells unread, and spin). */
#define LIVE_MAX_NS (5ull * CXLS_CHAN_SLICE_MS * 1000000ull)

static int live_at(uint64_t v, uint64_t now)
{
	return v > now && v - now <= LIVE_MAX_NS;
}

/* Entries hold deadlines: live_at, free at 0.  Counts the live ones
 * other than skip and, given in_recv, says whether one of those sleeps
 * in a recv.  The clock is read only when some entry is set. */
static int count_live(const _Atomic uint64_t *e, int n, int skip, int *in_recv)
{
	uint64_t now = 0;
	int live = 0;

	if (in_recv)
		*in_recv = 0;
	for (int i = 0; i < n; i++) {
		uint64_t v = atomic_load(&e[i]);

		if (!v || i == skip)
			continue;
		if (!now)
			now = tick_ns();
		if (!live_at(v, now))
			continue;
		live++;
		if (in_recv && (v & IN_RECV))
			*in_recv = 1;
	}
	return live;
}

int cxls_chan_sleepers(struct cxls_sconn *c, const struct cxls_sleep *z)
{
	return count_live(c->me->sleeper, CXLS_SOCK_SLEEPERS, z ? z->slot : -1, NULL);
}

/* Reading doorbells and withdrawing requests exclude each other (threads
 * and processes of one end) and exclude arming: a sleeper that claimed
 * its entry waits until no claim is live before it arms (cxls_chan_sleep),
 * so whoever holds the claim and counts no sleeper knows that nobody armed
 * a request it is about to withdraw or waits for a doorbell it is about
 * to read.  That holds only while the sleeper waits as long as the claim
 * lasts: a holder descheduled between its count and its withdraw or read
 * (milliseconds on a loaded machine) would otherwise take the wake-up of
 * a sleeper that stopped waiting meanwhile, which then slept a whole
 * slice.  A claim is a deadline: one nonblocking recv takes microseconds,
 * so it lasts as long as a sleeper entry, and a holder killed or
 * longjmp'd out of it lapses. */
#define DRAIN_NS (5ull * CXLS_CHAN_SLICE_MS * 1000000ull / 2)

static int claim_drain(struct cxls_sconn *c, uint64_t *mine)
{
	_Atomic uint64_t *d = &c->me->draining;
	uint64_t was = atomic_load(d);

	if (was && count_live(d, 1, -1, NULL))
		return 0; /* another thread or process is at it */
	*mine = tick_ns() + DRAIN_NS;
	return atomic_compare_exchange_strong(d, &was, *mine);
}

static void release_drain(struct cxls_sconn *c, uint64_t mine)
{
	atomic_compare_exchange_strong(&c->me->draining, &mine, 0);
}

/* What a recv of the control socket returned says of the peer's socket. */
static void note_fin_rst(struct cxls_sconn *c, ssize_t n, int err)
{
	/* after our own shutdown(SHUT_RD) a zero says nothing of the peer */
	if (n == 0 && !cxls_chan_shut_rd(c))
		atomic_store(&c->tcp_eof, 1);
	else if (n < 0 && (err == ECONNRESET || err == EPIPE || err == ETIMEDOUT))
		atomic_store(&c->tcp_rst, 1);
}

/* Reads the doorbells, or only peeks while a sleeper may need them; notes
 * FIN and RST.  Holds the claim. */
static void read_bells(struct cxls_sconn *c, int fd, int sleepers)
{
	char buf[256];
	ssize_t n;

	if (sleepers)
		n = sys_recv(fd, buf, 1, MSG_DONTWAIT | MSG_PEEK);
	else
		do {
			n = sys_recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		} while (n == (ssize_t)sizeof(buf));
	note_fin_rst(c, n, errno);
}

void cxls_chan_drain(struct cxls_sconn *c, int fd)
{
	uint64_t mine;

	if (atomic_load(&c->tcp_eof) || atomic_load(&c->tcp_rst) || !claim_drain(c, &mine))
		return;
	/* Dekker with cxls_chan_sleep: the claim stored, then sleepers read */
	read_bells(c, fd, cxls_chan_sleepers(c, NULL));
	release_drain(c, mine);
}

/* How long an entry stays live: a sleeper renews it every slice. */
#define SLEEP_NS (5ull * CXLS_CHAN_SLICE_MS * 1000000ull / 2)

static uint64_t entry_until(uint64_t now)
{
	return (now + SLEEP_NS) & ~IN_RECV;
}

/* Until no drain claim of c's end is live (see DRAIN_NS): spin a little,
 * then yield, then doze, as the holder is then descheduled or gone.  A
 * claim never runs more than DRAIN_NS ahead, nor does the wait: a
 * deadline further out is a corrupt pool's (fuzz_handshake), not a
 * holder's. */
static void wait_drained(struct cxls_sconn *c)
{
	uint64_t d, start = tick_ns(), now = start;
	unsigned spins = 0;

	while ((d = atomic_load(&c->me->draining)) && d > now && d - now <= DRAIN_NS &&
	       now - start <= DRAIN_NS) {
		if (++spins < 64)
			cxls_cpu_relax();
		else if (spins < 1024)
			sched_yield();
		else
			sys_poll(NULL, 0, 1);
		now = tick_ns();
	}
}

/* z's entry no longer sleeps in recv (another sleeper or a drain is
 * there: cxls_chan_recv_sleep would take their doorbell). */
static void unmark_recv(struct cxls_sconn *c, struct cxls_sleep *z)
{
	uint64_t was = z->until;

	if (z->slot >= 0 && (was & IN_RECV) &&
	    atomic_compare_exchange_strong(&c->me->sleeper[z->slot], &was, was & ~IN_RECV))
		z->until = was & ~IN_RECV;
}

/* Claims z's entry, marked as sleeping in recv when recv is set and no
 * other thread of the end sleeps or drains.  Dekker with a sleeper
 * arriving (it stores its entry, then reads the marks: count_live) and
 * with claim_drain (it stores its claim, then reads the entries): the
 * entry is stored first, marked or not, then the others and the claim are
 * read, so of two threads one always sees the other. */
static void sleep_as(struct cxls_sconn *c, struct cxls_sleep *z, int recv)
{
	_Atomic uint64_t *e = c->me->sleeper;
	uint64_t now = tick_ns();
	int live, in_recv;

	z->slot = -1;
	z->until = entry_until(now) | (recv ? IN_RECV : 0);
	for (int i = 0; i < CXLS_SOCK_SLEEPERS && z->slot < 0; i++) {
		uint64_t v = atomic_load(&e[i]);

		if (!live_at(v, now) && atomic_compare_exchange_strong(&e[i], &v, z->until))
			z->slot = i;
	}
	if (z->slot < 0) {
		z->until &= ~IN_RECV;
		CXLS_TRACE("socket slot %u: more sleepers than %d: one relies on its wait slice",
			   c->slot, CXLS_SOCK_SLEEPERS);
	}
	live = count_live(e, CXLS_SOCK_SLEEPERS, z->slot, &in_recv);
	if ((z->until & IN_RECV) && (live || atomic_load(&c->me->draining)))
		unmark_recv(c, z);
	z->slice_ms = in_recv ? CXLS_CHAN_SHORT_MS : CXLS_CHAN_SLICE_MS;
	/* Dekker with claim_drain: the entry stored, then the claim read */
	if (!atomic_load(&c->me->draining))
		return;
	wait_drained(c);
	/* the wait may have taken a good part of the entry's life */
	now = tick_ns();
	if (z->slot >= 0 && now + SLEEP_NS / 2 > z->until) {
		uint64_t was = z->until, until = entry_until(now) | (was & IN_RECV);

		/* fails when it lapsed and another thread took it */
		if (atomic_compare_exchange_strong(&e[z->slot], &was, until))
			z->until = until;
	}
}

void cxls_chan_sleep(struct cxls_sconn *c, struct cxls_sleep *z)
{
	sleep_as(c, z, 0);
}

/* Whether a read may sleep in recv: the shim owns the socket's
 * SO_RCVTIMEO (it is one slice), no FIN or RST came, and the file is not
 * O_NONBLOCK (a recv would return at once: a blocking call that began
 * before this process's fcntl, or another holder's that a recv's EAGAIN
 * told, sleeps in poll instead of spinning). */
static int recv_sleep_may(struct cxls_sconn *c)
{
	return !atomic_load(&c->tcp_eof) && !atomic_load(&c->tcp_rst) &&
	       !cxls_sock_nonblocking(c) &&
	       (atomic_load_explicit(&c->me->flags, memory_order_relaxed) & CXLS_END_RCVTIMEO);
}

void cxls_chan_sleep_reader(struct cxls_sconn *c, struct cxls_sleep *z)
{
	sleep_as(c, z, recv_sleep_may(c));
}

/* The last sleeper is awake: requests the other end has not answered yet
 * would only cost it a doorbell (one per connection of a sleeper that
 * waited on many, like an event loop). */
static void withdraw(struct cxls_sconn *c)
{
	struct cxls_sock_ring_hdr *rx = c->rx.hdr, *tx = c->tx.hdr;

	atomic_store_explicit(&rx->data_cancel,
			      CXLS_REQ_SEQ(atomic_load_explicit(&rx->data_want, memory_order_relaxed)),
			      memory_order_relaxed);
	atomic_store_explicit(&tx->space_cancel,
			      CXLS_REQ_SEQ(atomic_load_explicit(&tx->space_want, memory_order_relaxed)),
			      memory_order_relaxed);
}

int cxls_chan_woke(struct cxls_sconn *c, int fd, int rang, struct cxls_sleep *z)
{
	uint64_t mine;
	int others;

	if (z->slot >= 0)
		atomic_compare_exchange_strong(&c->me->sleeper[z->slot], &z->until, 0);
	z->slot = -1;
	if (!claim_drain(c, &mine))
		return 1; /* its holder reads the doorbells */
	others = cxls_chan_sleepers(c, NULL) > 0;
	if (!others) {
		withdraw(c);
		if (rang && !atomic_load(&c->tcp_eof) && !atomic_load(&c->tcp_rst))
			read_bells(c, fd, 0);
	}
	release_drain(c, mine);
	return !(rang && others);
}

int cxls_chan_recv_sleep(struct cxls_sconn *c, int fd, struct cxls_sleep *z, int *err)
{
	char buf[256];
	ssize_t n;

	if (z->slot < 0 || !(z->until & IN_RECV))
		return 0;
	/* a FIN, an RST or the application's SO_RCVTIMEO since the claim */
	if (!recv_sleep_may(c)) {
		unmark_recv(c, z);
		return 0;
	}
	/* the socket's SO_RCVTIMEO ends it after a slice, like poll's */
	n = sys_recv(fd, buf, sizeof(buf), 0);
	*err = n < 0 ? errno : 0;
	note_fin_rst(c, n, *err);
	cxls_chan_woke(c, fd, 0, z); /* the doorbells are read */
	return 1;
}

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

static int tcp_ended(struct cxls_sconn *c)
{
	return atomic_load_explicit(&c->tcp_eof, memory_order_relaxed) ||
	       atomic_load_explicit(&c->tcp_rst, memory_order_relaxed);
}

/* Every holder of the peer's end is dead, but one was forking: its child
 * records itself at once, unless it died first.  Dead once that state
 * lasted FORK_GRACE_NS (the first look that saw it starts the clock). */
#define FORK_GRACE_NS (1000ull * 1000000ull)

static int fork_lapsed(struct cxls_sconn *c)
{
	uint64_t now = tick_ns(), seen = atomic_load_explicit(&c->peer_fork_ns, memory_order_relaxed);

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
	now = tick_ns();
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
	return tcp_ended(c);
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
	atomic_fetch_or_explicit(&c->me->flags, CXLS_END_RESET, memory_order_release);
	cxls_publish(c->tx.flush, &c->me->flags, sizeof(c->me->flags));
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

/* Raises a wake-up request for the sleep tok unless one is pending.  A
 * pending one made for another sleep is joined by clearing its token (0:
 * always ring), and if it turns out answered meanwhile (perhaps without a
 * doorbell, for that other sleep) a new one is raised.  The next sequence
 * skips the one last answered, so it never looks answered, however many
 * requests were withdrawn since. */
static void request(const struct req *q, uint64_t tok)
{
	uint64_t w = atomic_load(q->want);

	for (;;) {
		uint32_t r = atomic_load(q->rung), seq = CXLS_REQ_SEQ(w);

		if (!pending(w, r, atomic_load(q->cancel))) {
			uint32_t next = (seq + 1) & CXLS_REQ_SEQ_MASK;

			if (next == r)
				next = (next + 1) & CXLS_REQ_SEQ_MASK;
			if (atomic_compare_exchange_strong(q->want, &w, CXLS_REQ(next, tok)))
				return;
			continue;
		}
		if (CXLS_REQ_TOKEN(w) == tok)
			return;
		if (CXLS_REQ_TOKEN(w) && !atomic_compare_exchange_strong(q->want, &w, CXLS_REQ(seq, 0)))
			continue;
		w = CXLS_REQ(seq, 0);
		cxls_publish(q->flush, q->sleeper_line, CXLS_LINE);
		cxls_refresh(q->flush, q->answer_line, CXLS_LINE);
		if (atomic_load(q->rung) != seq)
			return;
	}
}

uint64_t cxls_chan_token(void)
{
	static _Atomic uint64_t seq, salt;
	struct {
		uint64_t salt;
		uint64_t seq;
		uint32_t pid;
		uint32_t pad;
	} k = { 0, 0, 0, 0 };
	uint64_t tok;

	/* a process's first token; two threads racing here pick either */
	k.salt = atomic_load_explicit(&salt, memory_order_relaxed);
	if (!k.salt) {
		k.salt = cxls_now_ns() | 1;
		atomic_store_explicit(&salt, k.salt, memory_order_relaxed);
	}
	k.seq = atomic_fetch_add(&seq, 1);
	k.pid = (uint32_t)getpid(); /* a forked child counts on from its parent */
	tok = cxls_hash64(&k, sizeof(k)) >> CXLS_REQ_SEQ_BITS;
	return tok ? tok : 1;
}

short cxls_chan_arm(struct cxls_sconn *c, short events, uint64_t tok)
{
	if (events & (POLLIN | POLLRDNORM | POLLRDHUP)) {
		struct req q = data_req(&c->rx);

		cxls_refresh(c->rx.flush, &c->rx.hdr->prod, CXLS_LINE);
		request(&q, tok);
		cxls_ring_wb_cons(&c->rx);
	}
	if (events & (POLLOUT | POLLWRNORM)) {
		struct req q = space_req(&c->tx);

		cxls_refresh(c->tx.flush, &c->tx.hdr->cons, CXLS_LINE);
		request(&q, tok);
		cxls_ring_wb_prod(&c->tx);
	}
	atomic_thread_fence(memory_order_seq_cst);
	return cxls_chan_events(c, events);
}

#define PURE_SPIN_NS 0

short cxls_chan_busy_poll(struct cxls_sconn *c, short events)
{
	uint64_t start, end;
	short ev = 0;

	if (!c->busy_us)
		return 0;
	start = cxls_now_ns();
	end = start + (uint64_t)c->busy_us * 1000;
	do {
		for (int i = 0; i < 32 && !ev; i++) {
			ev = cxls_chan_events(c, events);
			cxls_cpu_relax();
		}
		/* past the first microseconds, with more runnable threads than
		 * cores, the peer may be waiting for this very core */
		if (!ev && cxls_now_ns() - start > PURE_SPIN_NS)
			sched_yield();
	} while (!ev && cxls_now_ns() < end);
	return ev;
}

int cxls_chan_restartable(void)
{
	struct sigaction sa;

	for (int sig = 1; sig < NSIG; sig++) {
		if (sigaction(sig, NULL, &sa))
			continue;
		if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			return 0;
	}
	return 1;
}
