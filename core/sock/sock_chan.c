/* sock_chan.c - doorbells, FIN/RST and readiness of a pooled connection. */
#include "sock_chan.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>

#include "log.h"
#include "proc_id.h"
#include "sock_ref.h"
#include "sock_sys.h"

static void ring_bell(int fd)
{
	static const char bell = 'b';

	/* a full socket buffer means a doorbell is pending anyway */
	sys_send(fd, &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* A wake-up request (want, written by the other end) not yet answered
 * (rung, ours): answer it once, whichever of our threads gets there. */
static int answer(_Atomic uint32_t *want, _Atomic uint32_t *rung)
{
	uint32_t w = atomic_load_explicit(want, memory_order_relaxed);
	uint32_t r = atomic_load_explicit(rung, memory_order_relaxed);

	return w != r && atomic_compare_exchange_strong(rung, &r, w);
}

/* Dekker-style: the producer stored prod, the sleeper bumped data_wait;
 * each then reads the other's word, so one of them always sees the other. */
void cxls_chan_notify_reader(struct cxls_sconn *c, int fd)
{
	struct cxls_sock_ring_hdr *h = c->tx.hdr;

	atomic_thread_fence(memory_order_seq_cst);
	cxls_refresh(c->tx.flush, &h->cons, CXLS_LINE);
	if (answer(&h->data_wait, &h->data_rung)) {
		cxls_ring_wb_prod(&c->tx);
		ring_bell(fd);
	}
}

/* A sleeping writer is woken once a quarter of its ring is free, not at
 * every byte: one wake-up then moves a large piece (TCP's write space). */
void cxls_chan_notify_writer(struct cxls_sconn *c, int fd)
{
	struct cxls_sock_ring_hdr *h = c->rx.hdr;

	atomic_thread_fence(memory_order_seq_cst);
	cxls_refresh(c->rx.flush, &h->prod, CXLS_LINE);
	if (atomic_load_explicit(&h->space_wait, memory_order_relaxed) ==
	    atomic_load_explicit(&h->space_rung, memory_order_relaxed))
		return;
	if (cxls_ring_free(&c->rx) >= (int64_t)(c->rx.cap / 4) &&
	    answer(&h->space_wait, &h->space_rung)) {
		cxls_ring_wb_cons(&c->rx);
		ring_bell(fd);
	}
}

/* Entries of the sleeper table hold deadlines: live while in the future. */
static int live(uint64_t until, uint64_t now)
{
	return until > now;
}

int cxls_chan_sleepers(struct cxls_sconn *c, const struct cxls_sleep *z)
{
	uint64_t now = cxls_now_ns();
	int n = 0;

	for (int i = 0; i < CXLS_SOCK_SLEEPERS; i++)
		n += live(atomic_load(&c->me->sleeper[i]), now) && !(z && z->slot == i);
	return n;
}

/* A drain is one nonblocking recv: microseconds.  Its claim lapses after
 * DRAIN_NS all the same (a drainer killed or longjmp'd out of it). */
#define DRAIN_NS (10ull * 1000000ull)

void cxls_chan_drain(struct cxls_sconn *c, int fd)
{
	_Atomic uint64_t *d = &c->me->draining;
	uint64_t now, was, mine;
	char buf[256];
	ssize_t n;

	if (atomic_load(&c->tcp_eof) || atomic_load(&c->tcp_rst))
		return;
	now = cxls_now_ns();
	was = atomic_load(d);
	mine = now + DRAIN_NS;
	if (live(was, now) || !atomic_compare_exchange_strong(d, &was, mine))
		return; /* another thread or process is at it */
	/* Dekker with cxls_chan_sleep: draining stored, then sleepers read */
	if (cxls_chan_sleepers(c, NULL))
		n = sys_recv(fd, buf, 1, MSG_DONTWAIT | MSG_PEEK);
	else
		do {
			n = sys_recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		} while (n == (ssize_t)sizeof(buf));
	atomic_compare_exchange_strong(d, &mine, 0);
	/* after our own shutdown(SHUT_RD) a zero says nothing of the peer */
	if (n == 0 && !atomic_load(&c->shut_rd))
		atomic_store(&c->tcp_eof, 1);
	else if (n < 0 && (errno == ECONNRESET || errno == EPIPE || errno == ETIMEDOUT))
		atomic_store(&c->tcp_rst, 1);
}

/* How long an entry stays live: a sleeper renews it every slice. */
#define SLEEP_NS (5ull * CXLS_CHAN_SLICE_MS * 1000000ull / 2)
#define DRAIN_WAIT_SPINS 4096

void cxls_chan_sleep(struct cxls_sconn *c, struct cxls_sleep *z)
{
	uint64_t now = cxls_now_ns();
	unsigned spins = 0;

	z->slot = -1;
	z->until = now + SLEEP_NS;
	for (int i = 0; i < CXLS_SOCK_SLEEPERS && z->slot < 0; i++) {
		uint64_t v = atomic_load(&c->me->sleeper[i]);

		if (!live(v, now) && atomic_compare_exchange_strong(&c->me->sleeper[i], &v, z->until))
			z->slot = i;
	}
	if (z->slot < 0)
		CXLS_TRACE("socket slot %u: more sleepers than %d: one relies on its wait slice",
			   c->slot, CXLS_SOCK_SLEEPERS);
	while (live(atomic_load(&c->me->draining), now) && ++spins < DRAIN_WAIT_SPINS)
		if (spins < 64)
			cxls_cpu_relax();
		else
			sched_yield();
}

int cxls_chan_woke(struct cxls_sconn *c, int fd, int rang, struct cxls_sleep *z)
{
	int others;

	if (z->slot >= 0)
		atomic_compare_exchange_strong(&c->me->sleeper[z->slot], &z->until, 0);
	z->slot = -1;
	others = cxls_chan_sleepers(c, NULL) > 0;
	if (rang && !others)
		cxls_chan_drain(c, fd);
	return !(rang && others);
}

/* The peer's socket is gone although it never said goodbye in the pool
 * (exit, SIGKILL): TCP would have reset if it died with unread bytes. */
static int peer_vanished(struct cxls_sconn *c, uint32_t pf)
{
	if (pf & (CXLS_END_SHUT_WR | CXLS_END_CLOSED))
		return 0;
	return atomic_load(&c->tcp_eof) || atomic_load(&c->tcp_rst);
}

/* The peer's flags, as the pool has them now. */
static uint32_t peer_flags(struct cxls_sconn *c)
{
	cxls_refresh(c->tx.flush, &c->peer->flags, sizeof(c->peer->flags));
	return atomic_load_explicit(&c->peer->flags, memory_order_acquire);
}

int cxls_chan_read_state(struct cxls_sconn *c)
{
	uint32_t pf = peer_flags(c);

	if (atomic_load(&c->broken) || (pf & CXLS_END_RESET))
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

	if (atomic_load(&c->broken) || (pf & CXLS_END_RESET) || atomic_load(&c->tcp_rst))
		return ECONNRESET;
	if (atomic_load(&c->shut_wr) || (pf & CXLS_END_CLOSED))
		return EPIPE;
	if (atomic_load(&c->tcp_eof) && !(pf & CXLS_END_SHUT_WR))
		return EPIPE; /* the peer's socket is gone */
	return 0;
}

short cxls_chan_events(struct cxls_sconn *c, short events)
{
	int64_t used = cxls_stream_used(&c->rx), room = cxls_ring_free(&c->tx);
	uint32_t lowat = atomic_load(&c->rcvlowat);
	int rd = cxls_chan_read_state(c), wr = cxls_chan_write_error(c);
	short ev = 0;

	if (used < 0 || room < 0) {
		atomic_store(&c->broken, 1);
		return POLLIN | POLLOUT | POLLERR | POLLHUP;
	}
	if (used > 0 && (uint64_t)used >= (lowat ? lowat : 1))
		ev |= POLLIN | POLLRDNORM;
	if (rd != CXLS_RD_OPEN || atomic_load(&c->shut_rd))
		ev |= POLLIN | POLLRDNORM | POLLRDHUP;
	if (room >= (int64_t)(c->tx.cap / 4) || wr)
		ev |= POLLOUT | POLLWRNORM;
	if (rd == CXLS_RD_RESET || wr == ECONNRESET)
		ev |= POLLERR;
	if ((rd != CXLS_RD_OPEN || atomic_load(&c->shut_rd)) && (wr || atomic_load(&c->shut_wr)))
		ev |= POLLHUP;
	return ev & (events | POLLERR | POLLHUP);
}

/* Raises a wake-up request unless one is pending (want ahead of what the
 * other end answered): one doorbell answers every thread that armed. */
static void request(_Atomic uint32_t *want, _Atomic uint32_t *rung)
{
	uint32_t w = atomic_load(want);

	if (w == atomic_load(rung))
		atomic_compare_exchange_strong(want, &w, w + 1);
}

short cxls_chan_arm(struct cxls_sconn *c, short events)
{
	if (events & (POLLIN | POLLRDNORM | POLLRDHUP)) {
		cxls_refresh(c->rx.flush, &c->rx.hdr->prod, CXLS_LINE);
		request(&c->rx.hdr->data_wait, &c->rx.hdr->data_rung);
		cxls_ring_wb_cons(&c->rx);
	}
	if (events & (POLLOUT | POLLWRNORM)) {
		cxls_refresh(c->tx.flush, &c->tx.hdr->cons, CXLS_LINE);
		request(&c->tx.hdr->space_wait, &c->tx.hdr->space_rung);
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
