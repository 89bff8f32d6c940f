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

/* Dekker-style: the producer stored prod, the sleeper stored armed; each
 * then reads the other's word, so one of them always sees the other. */
void cxls_chan_notify_reader(struct cxls_sconn *c, int fd)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&c->tx.hdr->armed, memory_order_relaxed) &&
	    atomic_exchange(&c->tx.hdr->armed, 0))
		ring_bell(fd);
}

/* A sleeping writer is woken once a quarter of its ring is free, not at
 * every byte: one wake-up then moves a large piece (TCP's write space). */
void cxls_chan_notify_writer(struct cxls_sconn *c, int fd)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&c->rx.hdr->tx_wait, memory_order_relaxed) &&
	    cxls_ring_free(&c->rx) >= (int64_t)(c->rx.cap / 4) &&
	    atomic_exchange(&c->rx.hdr->tx_wait, 0))
		ring_bell(fd);
}

void cxls_chan_drain(struct cxls_sconn *c, int fd)
{
	char buf[256];
	ssize_t n;

	if (atomic_load(&c->tcp_eof) || atomic_load(&c->tcp_rst))
		return;
	if (atomic_exchange(&c->draining, 1))
		return; /* another thread is at it */
	/* Dekker with cxls_chan_sleep: draining stored, then sleepers read */
	if (atomic_load(&c->sleepers))
		n = sys_recv(fd, buf, 1, MSG_DONTWAIT | MSG_PEEK);
	else
		do {
			n = sys_recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		} while (n == (ssize_t)sizeof(buf));
	atomic_store(&c->draining, 0);
	/* after our own shutdown(SHUT_RD) a zero says nothing of the peer */
	if (n == 0 && !atomic_load(&c->shut_rd))
		atomic_store(&c->tcp_eof, 1);
	else if (n < 0 && (errno == ECONNRESET || errno == EPIPE || errno == ETIMEDOUT))
		atomic_store(&c->tcp_rst, 1);
}

/* A drain is one nonblocking recv: microseconds.  The wait is bounded all
 * the same, for a signal handler reading the socket on top of the drain it
 * interrupted (that sleeper then relies on the wait slice). */
#define DRAIN_WAIT_SPINS 4096

void cxls_chan_sleep(struct cxls_sconn *c)
{
	unsigned spins = 0;

	atomic_fetch_add(&c->sleepers, 1);
	while (atomic_load(&c->draining) && ++spins < DRAIN_WAIT_SPINS)
		if (spins < 64)
			cxls_cpu_relax();
		else
			sched_yield();
}

int cxls_chan_woke(struct cxls_sconn *c, int fd, int rang)
{
	int others = atomic_fetch_sub_explicit(&c->sleepers, 1, memory_order_seq_cst) > 1;

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

int cxls_chan_read_state(struct cxls_sconn *c)
{
	uint32_t pf = atomic_load_explicit(&c->peer->flags, memory_order_acquire);

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
	uint32_t pf = atomic_load_explicit(&c->peer->flags, memory_order_acquire);

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

short cxls_chan_arm(struct cxls_sconn *c, short events)
{
	if (events & (POLLIN | POLLRDNORM | POLLRDHUP))
		atomic_store(&c->rx.hdr->armed, 1);
	if (events & (POLLOUT | POLLWRNORM))
		atomic_store(&c->tx.hdr->tx_wait, 1);
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
