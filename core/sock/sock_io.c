/* sock_io.c - reading and writing a pooled connection, TCP semantics:
 * partial reads, MSG_PEEK, MSG_WAITALL, MSG_DONTWAIT, O_NONBLOCK,
 * SO_RCVLOWAT, SO_PEEK_OFF, SO_RCVTIMEO/SO_SNDTIMEO, EOF after the peer's
 * last byte, EPIPE/ECONNRESET when it is gone, EINTR as the kernel would. */
#include "sock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/time.h>

#include "log.h"
#include "proc_id.h"
#include "sock_calls.h"
#include "sock_chan.h"
#include "sock_kept.h"
#include "sock_meet.h"
#include "sock_peek.h"
#include "sock_ref.h"
#include "sock_sigwin.h"
#include "sock_sys.h"

static uint64_t timeo_ns(int fd, int opt)
{
	struct timeval tv = { 0, 0 };
	socklen_t l = sizeof(tv);

	if (sys_getsockopt(fd, SOL_SOCKET, opt, &tv, &l))
		return 0;
	return (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000;
}

/* The deadline of a blocking call starting now (0: none).  The socket's
 * timeouts are read once and kept (a getsockopt per blocking read was a
 * tenth of a small message's round trip); setsockopt of either, in this
 * process or another holder of the socket, makes the next call read them
 * again (sock_fd.c). */
static uint64_t timeout_of(struct cxls_sconn *c, int fd, int rcv)
{
	uint32_t gen = atomic_load_explicit(&c->me->timeo_gen, memory_order_acquire);
	uint64_t ns;

	if (!atomic_load_explicit(&c->timeo_known, memory_order_acquire) || gen != c->timeo_gen) {
		c->timeo_gen = gen;
		/* the slice is the shim's, the application set none */
		c->rcvtimeo_ns = atomic_load(&c->me->flags) & CXLS_END_RCVTIMEO
					 ? 0
					 : timeo_ns(fd, SO_RCVTIMEO);
		c->sndtimeo_ns = timeo_ns(fd, SO_SNDTIMEO);
		atomic_store_explicit(&c->timeo_known, 1, memory_order_release);
	}
	ns = rcv ? c->rcvtimeo_ns : c->sndtimeo_ns;
	return ns ? cxls_now_ns() + ns : 0;
}

/* What a blocking call carries through its waits: its signal window,
 * whether it counted itself among c's calls in flight, at its first wait
 * (a close meanwhile keeps the socket for it: sock_kept.h; a call that
 * never waits is not blocked, and pays nothing), and whether it found the
 * file nonblocking behind the shim's back (look_nonblock). */
struct io_call {
	struct cxls_sconn *c;
	struct cxls_sigwin w;
	int counted;
	int found_nonblock;
};

static void io_call_init(struct io_call *k, struct cxls_sconn *c)
{
	k->c = c;
	k->counted = 0;
	k->found_nonblock = 0;
	cxls_sigwin_init(&k->w);
}

/* A holder of the file may set O_NONBLOCK behind the shim's back (a raw
 * fcntl system call, a process without the shim): a sleep that ended with
 * nothing to show looks, once a slice, and the call then returns as a
 * nonblocking one (it would have waited for ever: the kernel's call
 * started nonblocking, or was set so while under way, which the shim
 * cannot tell apart without a system call per call).  One set through the
 * shim while a call waits is not looked for: that call goes on waiting,
 * as TCP's.  (A file made blocking again behind the shim's back is not
 * seen: the shim's calls return EAGAIN.) */
static void look_nonblock(struct cxls_sconn *c, int fd, struct io_call *k)
{
	long fl;

	if (cxls_sock_nonblocking(c))
		return;
	fl = syscall(SYS_fcntl, fd, F_GETFL);
	if (fl >= 0 && (fl & O_NONBLOCK)) {
		cxls_sock_note_nonblock(c, 1);
		k->found_nonblock = 1;
	}
}

/* After a sleep in recv (cxls_chan_recv_sleep) that returned err. */
static int recv_slept(struct cxls_sconn *c, int fd, int err, struct io_call *k)
{
	if (err == EINTR) {
		errno = err;
		return -1;
	}
	if (err == EAGAIN) /* the slice, or O_NONBLOCK */
		look_nonblock(c, fd, k);
	return 0;
}

/* The call returns: its count, then the thread's signal mask. */
static void io_call_end(struct io_call *k)
{
	if (k->counted)
		cxls_calls_leave(k->c, k);
	cxls_sigwin_end(&k->w);
}

/* A cancelled call's cleanup, which runs before the application's: as if
 * the call had returned, and the caller's reference (cxls_sock_use). */
static void give_back(void *arg)
{
	struct io_call *k = arg;

	io_call_end(k);
	cxls_sock_done(k->c);
}

/* read, write and their kin are cancellation points, but the waits here
 * are raw system calls, which a deferred pthread_cancel does not
 * interrupt: a blocked call looks for a pending cancel before each wait,
 * so it acts within one wait slice.  Here the thread holds no lock and no
 * sleeper entry, only what give_back() returns. */
static void cancel_point(struct io_call *k)
{
	pthread_cleanup_push(give_back, k);
	pthread_testcancel();
	pthread_cleanup_pop(0);
}

/* The bytes a blocking MSG_PEEK needs in the stream: lowat past its
 * offset (skip: SO_PEEK_OFF), up to what a ring can hold, and always one
 * past the offset, where a peek finds nothing to copy. */
static size_t peek_need(struct cxls_sconn *c, uint64_t skip, size_t lowat)
{
	uint64_t n = cxls_chan_reachable(c, skip + lowat);

	return (size_t)(n > skip ? n : skip + 1);
}

/* Whether a blocking MSG_PEEK waits: fewer bytes than it needs
 * (peek_need()) are there and more can come (tcp_recvmsg waits for them as
 * a read does, and a peek copies from its offset each time). */
static int peek_waits(struct cxls_sconn *c, size_t need)
{
	int64_t used;

	if (need <= 1 || cxls_chan_shut_rd(c) || cxls_chan_read_state(c) != CXLS_RD_OPEN)
		return 0;
	used = cxls_stream_used(&c->rx);
	return used >= 0 && (uint64_t)used < need;
}

/* Bytes past a peek's offset now (a snapshot). */
static int past(struct cxls_sconn *c, uint64_t skip)
{
	return skip ? cxls_stream_used(&c->rx) > (int64_t)skip : !cxls_stream_empty(&c->rx);
}

/* A wait a signal cut short: the call goes on only where the kernel
 * restarts it: nothing moved yet (what moved is returned: tcp_recvmsg,
 * sk_stream_wait_memory), no SO_RCVTIMEO / SO_SNDTIMEO (a socket with a
 * timeout says EINTR even under SA_RESTART: sock_intr_errno()), and the
 * handlers ask for it. */
static int restarts(size_t moved, uint64_t deadline)
{
	int r;

	if (errno != EINTR || moved || deadline)
		return 0;
	r = cxls_chan_restartable(); /* its sigaction calls may set errno */
	errno = EINTR;
	return r;
}

/* One sleep of a blocking call: the kernel's, with the mask w gives it
 * (sock_sigwin.h); after the peer's FIN the socket stays readable, so it
 * dozes instead. */
static int sleep_in_kernel(struct cxls_sconn *c, struct pollfd *p, int ms,
			   const struct cxls_sigwin *w)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 }, doze = { 0, 1000000 };

	if (atomic_load(&c->tcp_eof))
		return sys_ppoll(NULL, 0, &doze, cxls_sigwin_mask(w, NULL));
	return sys_ppoll(p, 1, &ts, cxls_sigwin_mask(w, NULL));
}

/* Sleeps until want may have changed; 0, or -1 with errno (EINTR, EAGAIN
 * at the socket's timeout, EBADF when every fd of it was closed and none
 * kept).  *fdp: the call's fd, the kept copy once the application closed
 * it (sock_kept.h).  need: the bytes a peek needs in the stream
 * (peek_need(); 0: any).  held: the call has bytes to return already
 * (read, or found by a peek), so any signal ends it, a stop too, as
 * TCP's.  k: the call's state across its waits. */
static int wait_for(struct cxls_sconn *c, int *fdp, short want, uint64_t deadline, size_t need,
		    int held, struct io_call *k)
{
	int ms = CXLS_CHAN_SLICE_MS, r, err, fd, blocked;
	struct pollfd p;
	struct cxls_sleep z;

	cancel_point(k);
	if (!need && cxls_chan_busy_poll(c, want))
		return 0;
	if (!k->counted) {
		cxls_calls_reap(k); /* calls this thread left by a longjmp */
		cxls_calls_enter(c, k);
		k->counted = 1;
	}
	blocked = cxls_sigwin_sleep(&k->w);
	fd = *fdp = cxls_kept_fd_of(c, *fdp);
	if (fd < 0) {
		errno = EBADF;
		return -1;
	}
	p = (struct pollfd){ fd, POLLIN, 0 };
	if (deadline) {
		uint64_t now = cxls_now_ns();

		if (now >= deadline) {
			errno = EAGAIN;
			return -1;
		}
		if ((deadline - now) / 1000000 < (uint64_t)ms)
			ms = (int)((deadline - now) / 1000000) + 1;
	}
	/* a recv takes no mask: only while signals come in anyway; and after
	 * a stop (SIGSTOP, a debugger's) it says EINTR where the kernel
	 * restarts a poll: what TCP's read does after a stop when it holds
	 * bytes (it returns them), and, where every handler restarts, what
	 * the caller makes good; with nothing held and a handler that does
	 * not restart, a TCP read would go on where the EINTR cannot tell a
	 * stop from that handler */
	if (want == POLLIN && !deadline && !blocked && (held || cxls_chan_restartable_lately()))
		cxls_chan_sleep_reader(c, &z); /* may sleep in recv */
	else
		cxls_chan_sleep(c, &z);
	if (z.slice_ms < ms)
		ms = z.slice_ms;
	/* one connection: nothing to share a doorbell with (token 0) */
	if (cxls_chan_arm(c, want, 0) && !(need && peek_waits(c, need))) {
		cxls_chan_woke(c, fd, 0, &z);
		return 0;
	}
	if (cxls_chan_recv_sleep(c, fd, &z, &err))
		return recv_slept(c, fd, err, k);
	r = sleep_in_kernel(c, &p, ms, &k->w);
	err = errno;
	if (!cxls_chan_woke(c, fd, r > 0, &z))
		sched_yield(); /* the doorbell is another sleeper's to read */
	if (r == 0)
		look_nonblock(c, fd, k);
	if (r < 0) {
		errno = err;
		return -1;
	}
	return 0;
}

/* Why a connection is reset under the application (cxls_sconn_break). */
#define WHY_CURSORS "ring cursors or a buffer reference out of bounds (corrupt pool?)"
#define WHY_LOCK "ring lock held for seconds (a dead or stuck holder?)"

static ssize_t broken(struct cxls_sconn *c, int fd, const char *why)
{
	cxls_sconn_break(c, why);
	cxls_chan_ring(fd); /* the peer may sleep: it sees the reset now */
	cxls_chan_told(c, 1); /* told right here */
	errno = ECONNRESET;
	return -1;
}

static ssize_t done(size_t got, int err)
{
	if (got)
		return (ssize_t)got;
	errno = err;
	return -1;
}

/* A read past a reset: ECONNRESET the first time, then end of file, as
 * TCP says it. */
static ssize_t read_reset(struct cxls_sconn *c, int fd, size_t got)
{
	if (got)
		return (ssize_t)got;
	if (cxls_chan_tell_reset(c, fd))
		return done(0, ECONNRESET);
	return 0;
}

int cxls_sock_take_error(struct cxls_sconn *c, int fd)
{
	if (cxls_chan_read_state(c) == CXLS_RD_RESET && cxls_chan_tell_reset(c, fd))
		return ECONNRESET;
	return 0;
}

void cxls_sock_keep_error(struct cxls_sconn *c, int err)
{
	if (err == ECONNRESET)
		cxls_chan_told(c, 0); /* cxls_chan_tell_reset says it again */
}

/* Whether a read has bytes to return: those it took, or, TCP counts
 * them as copied, those a peek finds past its offset now. */
static int holds(struct cxls_sconn *c, size_t got, int peek, uint64_t skip)
{
	return got || (peek && past(c, skip));
}

/* One copy out of the stream, the consumer lock held: a peek from the
 * offset (start), which it then moves on, a read moving it back (moves),
 * as tcp_recvmsg does under the socket lock. */
static int64_t get(struct cxls_sconn *c, struct cxls_iovc *cur, size_t n, int peek, int start,
		   int moves)
{
	uint64_t skip = start ? cxls_peek_off_start(c) : 0;
	int64_t k = cxls_stream_get(&c->rx, c->bufs, c->owner, cur, n, peek, skip);

	if (k > 0 && moves)
		cxls_peek_off_move(c, peek ? k : -k);
	return k;
}

static ssize_t recv_loop(struct cxls_sconn *c, int fd, const struct iovec *iov, int iovcnt,
			 int flags, enum cxls_peek_off_use use, struct io_call *call)
{
	size_t want = cxls_iov_total(iov, iovcnt), got = 0, lowat;
	int peek = flags & MSG_PEEK, nb = (flags & MSG_DONTWAIT) || cxls_sock_nonblocking(c);
	/* SO_PEEK_OFF: one bit of the flags where none was ever set */
	int follow = use != CXLS_PEEK_OFF_NONE && cxls_peek_off_set(c);
	int start = peek && follow, moves = follow && use == CXLS_PEEK_OFF_MOVE;
	uint64_t deadline = 0;
	struct cxls_iovc cur;
	int timed = 0;

	if (flags & (MSG_OOB | MSG_ERRQUEUE))
		return done(0, EINVAL);
	if (want == 0)
		return 0;
	lowat = (flags & MSG_WAITALL) ? want : cxls_chan_rcvlowat(c);
	if (lowat < 1)
		lowat = 1;
	if (lowat > want)
		lowat = want;
	cxls_iovc_init(&cur, iov, iovcnt);
	/* TCP's MSG_TRUNC takes the bytes (or peeks) without copying them */
	cur.discard = (flags & MSG_TRUNC) != 0;
	for (;;) {
		/* a peek's offset as it is now; get() reads it again locked */
		uint64_t skip = start ? cxls_peek_off_start(c) : 0;
		int64_t k;
		int rd;

		if (atomic_load(&c->broken))
			return read_reset(c, fd, got); /* said why when it broke */
		k = 0;
		if (!cxls_stream_empty(&c->rx) &&
		    !(peek && !nb && peek_waits(c, peek_need(c, skip, lowat)))) {
			if (cxls_ring_lock(&c->rx.hdr->cons_lock))
				return got ? (ssize_t)got : broken(c, fd, WHY_LOCK);
			k = get(c, &cur, want - got, peek, start, moves);
			cxls_ring_unlock(&c->rx.hdr->cons_lock);
		}
		if (k < 0)
			return got ? (ssize_t)got : broken(c, fd, WHY_CURSORS);
		if (k > 0) {
			got += (size_t)k;
			if (!peek)
				cxls_chan_notify_writer(c, fd);
			if (got >= lowat || peek || nb)
				return (ssize_t)got;
			continue;
		}
		rd = cxls_chan_read_state(c);
		/* tcp_recvmsg: the peer's FIN, then a reset, then SHUT_RD */
		if (cxls_chan_shut_rd(c) && rd != CXLS_RD_RESET)
			return (ssize_t)got;
		/* FIN or RST behind doorbells: a blocking read learns of them
		 * when they wake it (the doorbells are read then), a
		 * nonblocking one must look now */
		if (rd == CXLS_RD_OPEN && nb) {
			cxls_chan_drain(c, fd);
			rd = cxls_chan_read_state(c);
		}
		if (rd != CXLS_RD_OPEN) {
			/* bytes written before the FIN are in the ring by now
			 * (a peek past them finds the end, as TCP's) */
			if (cxls_stream_used(&c->rx) > (int64_t)skip)
				continue;
			cxls_sock_peer_gone(c);
			return rd == CXLS_RD_EOF ? (ssize_t)got : read_reset(c, fd, got);
		}
		if (nb)
			return done(got, EAGAIN);
		if (!timed) {
			deadline = timeout_of(c, fd, 1);
			timed = 1;
		}
		/* a signal returns what the read holds when it comes */
		if (wait_for(c, &fd, POLLIN, deadline, peek ? peek_need(c, skip, lowat) : 0,
			     holds(c, got, peek, skip), call) &&
		    !restarts(holds(c, got, peek, skip), deadline)) {
			if (!peek || !past(c, skip))
				return done(got, errno);
			nb = 1; /* TCP's peek would have copied what is there */
		}
		nb = nb || call->found_nonblock;
	}
}

ssize_t cxls_sock_recvv_off(struct cxls_sconn *c, int fd, const struct iovec *iov, int iovcnt,
			    int flags, enum cxls_peek_off_use use)
{
	struct io_call k;
	ssize_t r;

	io_call_init(&k, c);
	r = recv_loop(c, fd, iov, iovcnt, flags, use, &k);
	io_call_end(&k);
	return r;
}

ssize_t cxls_sock_take_to(struct cxls_sconn *c, int fd, const struct iovec *iov,
			  ssize_t (*sink)(void *arg, const void *buf, size_t n), void *arg)
{
	struct iovec none = { NULL, 0 };
	struct cxls_iovc cur;
	int64_t k;
	ssize_t took = 0;
	int err = 0;

	if (atomic_load(&c->broken))
		return read_reset(c, fd, 0);
	if (cxls_ring_lock(&c->rx.hdr->cons_lock))
		return broken(c, fd, WHY_LOCK);
	cxls_iovc_init(&cur, iov, 1);
	k = cxls_stream_get(&c->rx, c->bufs, c->owner, &cur, iov->iov_len, 1, 0);
	if (k > 0) {
		took = sink(arg, iov->iov_base, (size_t)k);
		err = errno;
		if (took > 0) {
			none.iov_len = (size_t)took;
			cxls_iovc_init(&cur, &none, 1);
			cur.discard = 1;
			k = cxls_stream_get(&c->rx, c->bufs, c->owner, &cur, (size_t)took, 0, 0);
		}
	}
	cxls_ring_unlock(&c->rx.hdr->cons_lock);
	if (k < 0)
		return broken(c, fd, WHY_CURSORS);
	if (took > 0)
		cxls_chan_notify_writer(c, fd);
	errno = err ? err : errno;
	return took;
}

/* A write the peer cannot take: past a reset already reported, TCP says
 * EPIPE. */
static ssize_t write_error(struct cxls_sconn *c, int fd, size_t sent, int err, int flags)
{
	cxls_sock_peer_gone(c);
	if (sent)
		return (ssize_t)sent;
	if (err == ECONNRESET && !cxls_chan_tell_reset(c, fd))
		err = EPIPE;
	else if (err == EPIPE && cxls_chan_fin_then_rst(c))
		cxls_chan_tell_reset(c, fd); /* its EPIPE, reported here */
	else
		cxls_chan_take_sk_err(fd);
	atomic_store(&c->rst_err, 0); /* reported here, as sk_err would be */
	if (err == EPIPE && !(flags & MSG_NOSIGNAL))
		pthread_kill(pthread_self(), SIGPIPE);
	errno = err;
	return -1;
}

/* Referenced bytes not yet read, per direction, in rings: a writer far
 * ahead of its reader would spread its bytes over megabytes of buffers that
 * the reader then finds out of cache (streaming 1-4 MiB writes ran at half
 * the speed unbounded), and would hold buffers that other connections
 * could use.  4 rings (1 MiB with the default ring) measured best. */
#define REF_INFLIGHT_RINGS 4

/* Large pieces by reference while a buffer is free, the rest through the
 * ring; holds the producer lock. */
static int64_t put(struct cxls_sconn *c, struct cxls_iovc *cur, size_t want)
{
	if (c->ref_min && want >= c->ref_min) {
		int64_t k = cxls_ref_put(&c->tx, c->bufs, c->owner, cur, want,
					 REF_INFLIGHT_RINGS * c->tx.cap);

		if (k)
			return k;
		cxls_sock_sweep_starved(cxls_sock_region());
	}
	return cxls_ring_put(&c->tx, cur, want);
}

static ssize_t send_loop(struct cxls_sconn *c, int fd, const struct iovec *iov, int iovcnt,
			 int flags, struct io_call *call)
{
	size_t want = cxls_iov_total(iov, iovcnt), sent = 0;
	int nb = (flags & MSG_DONTWAIT) || cxls_sock_nonblocking(c);
	uint64_t deadline = 0;
	struct cxls_iovc cur;
	int timed = 0, err;

	if (flags & MSG_OOB)
		return done(0, EOPNOTSUPP);
	cxls_chan_look_writer(c, fd); /* a peer gone without a word takes one write */
	err = cxls_chan_write_error(c);
	if (err)
		return write_error(c, fd, 0, err, flags);
	if (want == 0)
		return 0;
	if (cxls_chan_refused(c, fd))
		return (ssize_t)want; /* sent, as far as TCP's sender knows */
	cxls_iovc_init(&cur, iov, iovcnt);
	if (cxls_ring_lock(&c->tx.hdr->prod_lock))
		return broken(c, fd, WHY_LOCK);
	for (;;) {
		int64_t k = put(c, &cur, want - sent);

		if (k < 0) {
			cxls_ring_unlock(&c->tx.hdr->prod_lock);
			return sent ? (ssize_t)sent : broken(c, fd, WHY_CURSORS);
		}
		if (k > 0) {
			sent += (size_t)k;
			/* the reader copies this piece while we copy the next */
			cxls_chan_notify_reader(c, fd);
			if (sent < want)
				continue;
		}
		if (sent == want || nb)
			break;
		cxls_ring_unlock(&c->tx.hdr->prod_lock);
		cxls_chan_look_writer(c, fd); /* a full ring: is its reader there? */
		err = cxls_chan_write_error(c);
		if (err)
			return write_error(c, fd, sent, err, flags);
		if (!timed) {
			deadline = timeout_of(c, fd, 0);
			timed = 1;
		}
		if (wait_for(c, &fd, POLLOUT, deadline, 0, 0, call) && !restarts(sent, deadline))
			return done(sent, errno);
		nb = call->found_nonblock;
		if (cxls_ring_lock(&c->tx.hdr->prod_lock))
			return sent ? (ssize_t)sent : broken(c, fd, WHY_LOCK);
	}
	cxls_ring_unlock(&c->tx.hdr->prod_lock);
	return done(sent, EAGAIN);
}

ssize_t cxls_sock_sendv(struct cxls_sconn *c, int fd, const struct iovec *iov, int iovcnt,
			int flags)
{
	struct io_call k;
	ssize_t r;

	io_call_init(&k, c);
	r = send_loop(c, fd, iov, iovcnt, flags, &k);
	io_call_end(&k);
	return r;
}

/* The bytes source gives, at most n and never more than the ring has
 * room for, put in the ring at once: source reads into buf, the ring
 * takes all of it.  Holds the producer lock, so the room cannot shrink
 * between the look and the put.  source's answer when it gave nothing;
 * -2 for cursors that make no sense. */
static ssize_t give(struct cxls_sconn *c, void *buf, size_t n,
		    ssize_t (*source)(void *arg, void *buf, size_t n), void *arg)
{
	int64_t room = cxls_ring_free(&c->tx);
	struct iovec got = { buf, 0 };
	struct cxls_iovc cur;
	ssize_t r;

	if (room < 0)
		return -2;
	r = source(arg, buf, n < (size_t)room ? n : (size_t)room);
	if (r <= 0)
		return r;
	got.iov_len = (size_t)r;
	cxls_iovc_init(&cur, &got, 1);
	return cxls_ring_put(&c->tx, &cur, (size_t)r) == r ? r : -2;
}

static ssize_t give_loop(struct cxls_sconn *c, int fd, const struct iovec *iov,
			 ssize_t (*source)(void *arg, void *buf, size_t n), void *arg,
			 struct io_call *call)
{
	int nb = cxls_sock_nonblocking(c), timed = 0, full, err;
	uint64_t deadline = 0;
	ssize_t r;

	cxls_chan_look_writer(c, fd);
	err = cxls_chan_write_error(c);
	if (err)
		return write_error(c, fd, 0, err, 0);
	if (iov->iov_len == 0)
		return 0;
	if (cxls_chan_refused(c, fd)) /* sent, as far as TCP's sender knows */
		return source(arg, iov->iov_base, iov->iov_len);
	for (;;) {
		if (cxls_ring_lock(&c->tx.hdr->prod_lock))
			return broken(c, fd, WHY_LOCK);
		full = cxls_ring_free(&c->tx) == 0;
		r = full ? 0 : give(c, iov->iov_base, iov->iov_len, source, arg);
		cxls_ring_unlock(&c->tx.hdr->prod_lock);
		if (r == -2)
			return broken(c, fd, WHY_CURSORS);
		if (r > 0)
			cxls_chan_notify_reader(c, fd);
		if (!full)
			return r; /* what went, source's end or its error */
		if (nb)
			return done(0, EAGAIN);
		cxls_chan_look_writer(c, fd); /* a full ring: is its reader there? */
		err = cxls_chan_write_error(c);
		if (err)
			return write_error(c, fd, 0, err, 0);
		if (!timed) {
			deadline = timeout_of(c, fd, 0);
			timed = 1;
		}
		if (wait_for(c, &fd, POLLOUT, deadline, 0, 0, call) && !restarts(0, deadline))
			return done(0, errno);
		nb = call->found_nonblock;
	}
}

ssize_t cxls_sock_give_from(struct cxls_sconn *c, int fd, const struct iovec *iov,
			    ssize_t (*source)(void *arg, void *buf, size_t n), void *arg)
{
	struct io_call k;
	ssize_t r;

	io_call_init(&k, c);
	r = give_loop(c, fd, iov, source, arg, &k);
	io_call_end(&k);
	return r;
}

int cxls_sock_may_give(struct cxls_sconn *c)
{
	return cxls_ring_free(&c->tx) > 0 && !cxls_chan_write_error(c);
}

int cxls_sock_unread(struct cxls_sconn *c)
{
	int64_t used = cxls_stream_used(&c->rx);

	return used < 0 ? 0 : (int)(used > 0x7fffffff ? 0x7fffffff : used);
}

/* TCP counts bytes sent but not yet acknowledged.  The ring is the peer's
 * receive queue: a byte in it has arrived, as an acknowledged one has, so
 * none is outstanding (a loop that waits for 0 before close must not wait
 * for the peer to read). */
int cxls_sock_unsent(struct cxls_sconn *c)
{
	(void)c;
	return 0;
}
