/* sock_chan.c - doorbells and sleeps of a pooled connection's control socket. */
#include "sock_chan.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "proc_id.h"
#include "sock.h"
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
			now = cxls_chan_tick_ns();
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

/* inline: every wake-up takes it (out of line it cost 22 instructions per
 * round trip, bench/sock_callgrind.sh) */
static inline int claim_drain(struct cxls_sconn *c, uint64_t *mine)
{
	_Atomic uint64_t *d = &c->me->draining;
	uint64_t was = atomic_load(d);

	if (was && count_live(d, 1, -1, NULL))
		return 0; /* another thread or process is at it */
	*mine = cxls_chan_tick_ns() + DRAIN_NS;
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
	uint64_t d, start = cxls_chan_tick_ns(), now = start;
	unsigned spins = 0;

	while ((d = atomic_load(&c->me->draining)) && d > now && d - now <= DRAIN_NS &&
	       now - start <= DRAIN_NS) {
		if (++spins < 64)
			cxls_cpu_relax();
		else if (spins < 1024)
			sched_yield();
		else
			sys_poll(NULL, 0, 1);
		now = cxls_chan_tick_ns();
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
	uint64_t now = cxls_chan_tick_ns();
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
	now = cxls_chan_tick_ns();
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

int cxls_chan_restartable_lately(void)
{
	static _Atomic uint64_t looked; /* when, in ns; 0: never */
	static _Atomic int was;
	uint64_t now = cxls_now_ns(), at = atomic_load_explicit(&looked, memory_order_relaxed);
	int err = errno, r;

	if (at && now - at < 1000000000ull)
		return atomic_load_explicit(&was, memory_order_relaxed);
	r = cxls_chan_restartable(); /* two threads may both look: alike */
	atomic_store_explicit(&was, r, memory_order_relaxed);
	atomic_store_explicit(&looked, now, memory_order_relaxed);
	errno = err;
	return r;
}
