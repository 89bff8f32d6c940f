/* sock_chan.h - the TCP socket as control channel of a pooled connection.
 *
 * Once a connection is on the pool its TCP socket carries no payload, only
 * one-byte doorbells, sent when the other end said it may sleep (its
 * data_want or space_want moved past what we answered), and the kernel's
 * own FIN and RST, which tell that the peer's
 * socket is gone even when the peer died without a word.  Doorbells are
 * read and thrown away inside the shim; the application never sees them.
 */
#ifndef CXLSHIM_CORE_SOCK_CHAN_H
#define CXLSHIM_CORE_SOCK_CHAN_H

#include <stdint.h>
#include <time.h>

#include "coherence.h"
#include "sock_conn.h"

/* This end's own shutdowns and the RST it drew: another process holding
 * the socket (a fork) may have made them, which only the pool's flags
 * tell; ours says so when the pool's could not (a shutdown of a socket
 * TCP had closed publishes nothing). */
static inline uint32_t cxls_chan_own_flags(const struct cxls_sconn *c)
{
	return atomic_load_explicit(&c->me->flags, memory_order_acquire);
}

static inline int cxls_chan_shut_rd(struct cxls_sconn *c)
{
	return atomic_load_explicit(&c->shut_rd, memory_order_relaxed) ||
	       (cxls_chan_own_flags(c) & CXLS_END_SHUT_RD);
}

static inline int cxls_chan_shut_wr(struct cxls_sconn *c)
{
	return atomic_load_explicit(&c->shut_wr, memory_order_relaxed) ||
	       (cxls_chan_own_flags(c) & CXLS_END_SHUT_WR);
}

/* Our end took bytes its peer reads no more (cxls_chan_refused): TCP's
 * RST closed the socket, for every process holding it. */
static inline int cxls_chan_rst_drawn(struct cxls_sconn *c)
{
	return atomic_load_explicit(&c->rst_drawn, memory_order_relaxed) ||
	       (cxls_chan_own_flags(c) & CXLS_END_RESET);
}

/* Sets own flags f and publishes them at once, for the peer's next look:
 * a reset (drawn, or a corrupt connection broken) or the last close. */
static inline void cxls_chan_own_flag_publish(struct cxls_sconn *c, uint32_t f)
{
	atomic_fetch_or_explicit(&c->me->flags, f, memory_order_acq_rel);
	cxls_publish(c->tx.flush, &c->me->flags, sizeof(c->me->flags));
}

/* The peer's kernel sent its FIN or RST on the control socket (drained,
 * cxls_chan_drain): it stays readable for good and carries nothing more
 * (no doorbell follows a FIN). */
static inline int cxls_chan_tcp_ended(struct cxls_sconn *c)
{
	return atomic_load_explicit(&c->tcp_eof, memory_order_relaxed) ||
	       atomic_load_explicit(&c->tcp_rst, memory_order_relaxed);
}

/* The sleeper table's clock: every process of an end is on one host, and
 * a deadline needs no better than the tick (CLOCK_MONOTONIC_COARSE: no
 * clock read of its own, a sleep of one slice is 25 ticks or more). */
static inline uint64_t cxls_chan_tick_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sets own flag f; the flags before. */
static inline uint32_t cxls_chan_own_flag_set(struct cxls_sconn *c, uint32_t f)
{
	return atomic_fetch_or_explicit(&c->me->flags, f, memory_order_acq_rel);
}

/* The reset was reported (yes), or is to be reported again (no: an
 * error a call kept for the next one), for every holder of the end. */
void cxls_chan_told(struct cxls_sconn *c, int yes);

/* SO_RCVLOWAT: a forked holder's setsockopt is every holder's. */
static inline uint32_t cxls_chan_rcvlowat(struct cxls_sconn *c)
{
	uint32_t v = atomic_load_explicit(&c->me->rcvlowat, memory_order_relaxed);

	return v ? v : atomic_load_explicit(&c->rcvlowat, memory_order_relaxed);
}

/* One doorbell, unasked: the peer's end just became pooled. */
void cxls_chan_ring(int fd);
/* Wakes the reader of c's tx ring if it may sleep (after producing). */
void cxls_chan_notify_reader(struct cxls_sconn *c, int fd);
/* Wakes the writer of c's rx ring if it waits for space (after consuming). */
void cxls_chan_notify_writer(struct cxls_sconn *c, int fd);
/* Reads pending doorbells; notes FIN and RST in c.  While another thread
 * sleeps on the socket the doorbells stay for it: only FIN and RST are
 * looked for (a peek). */
void cxls_chan_drain(struct cxls_sconn *c, int fd);
/* A look at a pooled fd before its readiness is reported: a peer that
 * exited without closing in the pool (exit, a crash, SIGKILL) says so
 * only on the control socket, as a FIN or an RST, which a sleep or a read
 * drains; a wait that finds the ring ready at once (room to write) would
 * report the connection open for ever.  At most every 10 ms per
 * connection, the control socket is drained (after the peer's shutdown,
 * whose FIN came then: its holders are looked up on this host, and on
 * another a writer probes with a doorbell, which a socket that is gone
 * answers with an RST).  1 when that found the
 * peer's FIN or RST just now (its readiness changed).  Called for the fds
 * a poll or an epoll_wait is about to report, and by writes (one system
 * call per 10 ms on a busy connection; the probe only while the peer has
 * read nothing since the last look). */
int cxls_chan_look(struct cxls_sconn *c, int fd);
int cxls_chan_look_writer(struct cxls_sconn *c, int fd);
/* For an fd a wait finds not ready: looks only where a peer's death
 * would show no other way (it shut down writing, our bytes are unread). */
int cxls_chan_look_idle(struct cxls_sconn *c, int fd);

/* Several threads, of one process or of several after fork, may sleep on
 * one socket (two readers, a reader and a writer, a read and a poll): one
 * doorbell wakes them all, but the first to read it would leave a thread
 * that had armed and not yet reached the kernel asleep with its wake-up
 * gone.  So a thread claims an entry in its end's sleeper table in the
 * pool before arming (cxls_chan_sleep) and gives it back after the kernel
 * returned (cxls_chan_woke, rang: the kernel said the socket is readable);
 * the last one out reads the doorbells, and a drain under way when a
 * thread claims its entry is waited for: it cannot take that thread's
 * doorbell.  An entry holds a deadline, not a count: a thread never sleeps
 * in the kernel longer than CXLS_CHAN_SLICE_MS at a time, so the entry of
 * a thread that never came back (a signal handler that longjmp'd out of
 * the wait, a killed process) lapses on its own instead of keeping every
 * doorbell unread.  cxls_chan_woke returns 0 when it left the doorbells for
 * the others (the caller should yield rather than spin on them). */
#define CXLS_CHAN_SLICE_MS 100

/* A thread alone on its socket may sleep in a blocking recv of the
 * doorbell instead (cxls_chan_recv_sleep): it reads the doorbell it wakes
 * on, so a thread that comes to sleep beside it may lose that doorbell and
 * waits slices this short meanwhile. */
#define CXLS_CHAN_SHORT_MS 2

struct cxls_sleep {
	int slot;       /* entry in the end's table; -1: table full */
	uint64_t until; /* what we wrote there (odd: sleeping in a recv) */
	int slice_ms;   /* longest kernel wait: a slice, or short beside a recv */
};

void cxls_chan_sleep(struct cxls_sconn *c, struct cxls_sleep *z);
/* cxls_chan_sleep for a blocking read without a deadline: when the shim
 * owns the socket's SO_RCVTIMEO (CXLS_END_RCVTIMEO: it is one slice) and
 * no other thread of the end sleeps or drains, the entry is marked at
 * once as sleeping in recv (one claim, one look at the table). */
void cxls_chan_sleep_reader(struct cxls_sconn *c, struct cxls_sleep *z);
int cxls_chan_woke(struct cxls_sconn *c, int fd, int rang, struct cxls_sleep *z);
/* After cxls_chan_sleep_reader and an arm for POLLIN that found nothing:
 * when the entry is marked, sleeps in one blocking recv that also reads
 * the doorbells, where poll and then a recv would take two system calls.
 * 0: nothing done (sleep as usual); 1: slept and cxls_chan_woke done,
 * *err the recv's errno or 0 (EAGAIN: a slice went by, or the file is
 * nonblocking now). */
int cxls_chan_recv_sleep(struct cxls_sconn *c, int fd, struct cxls_sleep *z, int *err);
/* Live entries of c's end other than z's (z may be NULL); tests. */
int cxls_chan_sleepers(struct cxls_sconn *c, const struct cxls_sleep *z);

/* What the peer's end means for reading once the ring is empty. */
enum cxls_peer_rd { CXLS_RD_OPEN = 0, CXLS_RD_EOF = 1, CXLS_RD_RESET = 2 };
int cxls_chan_read_state(struct cxls_sconn *c);
/* 0 while the peer can take bytes, else EPIPE or ECONNRESET. */
int cxls_chan_write_error(struct cxls_sconn *c);
/* Bytes about to be written into a peer that reads no more (closed, or
 * shut down both ways): 1 when so, and then, as TCP's RST would, this
 * socket is closed with EPIPE pending (rst_err) and the peer, if still
 * there, is reset; the bytes are dropped.  0: write them. */
int cxls_chan_refused(struct cxls_sconn *c, int fd);
/* Whether TCP's socket would be CLOSED: reset, or both FINs sent (the
 * first to send went through TIME_WAIT, which a socket still open leaves
 * for CLOSE at once, the other through LAST_ACK). */
int cxls_chan_closed(struct cxls_sconn *c);
/* The peer's RST came after its FIN: the reset's error is EPIPE, pending
 * (POLLERR, SO_ERROR) until a write or SO_ERROR reports it. */
int cxls_chan_fin_then_rst(struct cxls_sconn *c);
/* A reset is reported once, as the kernel's sk_err is: 1 when this call
 * is the first to say ECONNRESET (the caller then says it), 0 when one
 * did already (reading is then at end of file, writing EPIPE).  It takes
 * the kernel socket's own pending error along, so SO_ERROR says 0 after
 * it as over TCP. */
int cxls_chan_tell_reset(struct cxls_sconn *c, int fd);
/* Takes the kernel socket's pending error (sk_err), as a TCP call that
 * reports an error does: an RST that reached the control socket too is
 * the error the pool's answer just reported.  Returns it (0: none). */
int cxls_chan_take_sk_err(int fd);

/* poll(2) bits of c for the requested events (POLLERR and POLLHUP always). */
short cxls_chan_events(struct cxls_sconn *c, short events);
/* The bytes a reader asking for `want` (SO_RCVLOWAT, a MSG_WAITALL peek)
 * can find: the kernel grows its receive buffer to hold that much, a ring
 * holds no more than its size, after which the writer waits for the
 * reader. */
static inline uint64_t cxls_chan_reachable(const struct cxls_sconn *c, uint64_t want)
{
	return want > c->rx.cap ? c->rx.cap : want;
}
/* Says the waiter may sleep on the TCP socket for these events, then
 * reports whether they are already there (the store-then-check half of the
 * doorbell handshake).  tok names the sleep: a thread that sleeps on
 * several connections at once arms them all under one fresh token and,
 * woken by any, looks at all of them again (the peer rings once for them
 * all); 0 asks for a doorbell whatever else rang. */
short cxls_chan_arm(struct cxls_sconn *c, short events, uint64_t tok);
/* A fresh token for one sleep (one round of a poll or epoll_wait), never 0
 * and never one a sleep of this host used before, as far as 48 bits of
 * hash tell. */
uint64_t cxls_chan_token(void);

/* Spins up to the policy's busy-poll window for events; returns them. */
short cxls_chan_busy_poll(struct cxls_sconn *c, short events);

/* SA_RESTART semantics for a wait that the kernel saw interrupted: 1 when
 * every installed handler restarts. */
int cxls_chan_restartable(void);
/* The same, as it was within the last second: handlers change rarely (a
 * program installs them as it starts) and each look reads every signal's. */
int cxls_chan_restartable_lately(void);

#endif
