/* sock_meet_settle.c - an end that made the record waits for its peer:
 * blocking (cxls_sock_settle) or one look at a time for event loops, until
 * the pool (the TCP socket becomes the doorbell channel) or TCP.
 */
#include "sock_meet_int.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/time.h>
#include <unistd.h>

#include "coherence.h"
#include "log.h"
#include "sock.h"
#include "sock_chan.h"
#include "sock_denial.h"
#include "sock_peek.h"
#include "sock_sys.h"

/* POOL is stored before the control channel's settings are read and
 * made: an application's TCP_NODELAY or TCP_CORK that reaches the kernel
 * meanwhile is then seen by one of the two (tcp_option_raced(), sock_fd.c). */
static int to_pool(struct cxls_sconn *c, int fd)
{
	cxls_sock_denial_clear(&c->tuple, c->role);
	atomic_store(&c->mode, CXLS_SC_POOL);
	atomic_thread_fence(memory_order_seq_cst);
	cxls_sock_control_channel(c, fd);
	CXLS_INFO("socket slot %u: peer joined, bytes go through the pool", c->slot);
	return CXLS_SC_POOL;
}

/* The creator's record is over: nobody else will look at it. */
int cxls_meet_to_tcp(struct cxls_sconn *c, const char *why)
{
	CXLS_INFO("socket slot %u: %s, staying on TCP", c->slot, why);
	c->rec = NULL;
	atomic_store(&c->mode, CXLS_SC_TCP);
	return CXLS_SC_TCP;
}

/* Peer bytes or EOF on the TCP socket: the peer is not on the pool. */
static int tcp_spoke(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };

	return sys_poll(&p, 1, 0) > 0;
}

/* The meeting is over for an end still WAITING when the window closed
 * or the peer spoke on TCP.  Bytes or EOF on TCP before the meeting mean
 * the peer is not under the shim (one under it meets before its first
 * byte), so nobody will look for the record: it is freed at once (a
 * server under the shim whose clients are not kept a record per client
 * for STALE_NS and filled the table).  Past the window a late peer may
 * still come: the record stays ABANDONED for it to find. */
static int give_up(struct cxls_sconn *c, int fd, struct cxls_sock_rec *rec, uint64_t sg)
{
	int spoke = tcp_spoke(fd);

	if (!spoke && cxls_now_ns() <= c->deadline_ns)
		return 0;
	if (!atomic_compare_exchange_strong(
		    &rec->sg, &sg, CXLS_SG(c->gen, spoke ? CXLS_SK_FREE : CXLS_SK_ABANDONED)))
		return 0;
	cxls_publish(c->tx.flush, &rec->sg, CXLS_LINE);
	return 1;
}

/* A reader alone on the socket may then sleep in a blocking recv of the
 * doorbells, one system call where poll and a recv take two, if the recv
 * ends after a wait slice as poll does (sock_chan.h): so the socket's
 * SO_RCVTIMEO becomes the slice when the application set none, and the
 * application keeps seeing none (sock_fd.c).  The end's flag says so to
 * every holder, also after fork and exec. */
static void own_rcvtimeo(struct cxls_sconn *c, int fd)
{
	struct timeval tv = { 0, 0 };
	socklen_t l = sizeof(tv);

	if (sys_getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &l) || tv.tv_sec || tv.tv_usec)
		return;
	tv.tv_usec = CXLS_CHAN_SLICE_MS * 1000;
	if (syscall(SYS_setsockopt, fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		return;
	atomic_fetch_or(&c->me->flags, CXLS_END_RCVTIMEO);
	cxls_publish(c->tx.flush, &c->me->flags, sizeof(c->me->flags));
}

/* The TCP socket now carries doorbells only: each must leave at once, not
 * wait for an ACK (Nagle) or a cork.  What the application set is kept
 * and shown to it (sock_fd.c). */
void cxls_sock_control_channel(struct cxls_sconn *c, int fd)
{
	int one = 1, v = 0;
	socklen_t l = sizeof(v);

	if (sys_getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &l) == 0)
		atomic_store(&c->app_nodelay, v);
	l = sizeof(v);
	v = 0;
	if (sys_getsockopt(fd, IPPROTO_TCP, TCP_CORK, &v, &l) == 0)
		atomic_store(&c->app_cork, v);
	syscall(SYS_setsockopt, fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (v) {
		v = 0;
		syscall(SYS_setsockopt, fd, IPPROTO_TCP, TCP_CORK, &v, sizeof(v));
	}
	own_rcvtimeo(c, fd);
	/* the file's mode, for every holder from now on (after POOL was
	 * stored: an fcntl meanwhile either saw POOL or came before this) */
	cxls_sock_note_nonblock(c, (syscall(SYS_fcntl, fd, F_GETFL) & O_NONBLOCK) != 0);
	cxls_sock_peek_off_take(c, fd); /* the file's too, as O_NONBLOCK */
}

/* One look at c's meeting (PENDING; c locked): its mode now, PENDING
 * while the peer has not decided and the window is open. */
static int settle_look(struct cxls_sconn *c, int fd)
{
	struct cxls_sock_rec *rec = c->rec;
	uint64_t sg;
	uint32_t st;
	int mode;

	cxls_refresh(c->tx.flush, &rec->sg, CXLS_LINE);
	sg = atomic_load_explicit(&rec->sg, memory_order_acquire);
	st = CXLS_SG_STATE(sg);
	if (CXLS_SG_GEN(sg) != c->gen)
		return cxls_meet_to_tcp(c, "record taken over");
	if (st == CXLS_SK_JOINED)
		return to_pool(c, fd);
	if (st == CXLS_SK_REFUSED || st == CXLS_SK_DENIED) {
		atomic_compare_exchange_strong(&rec->sg, &sg, CXLS_SG(c->gen, CXLS_SK_FREE));
		cxls_publish(c->tx.flush, &rec->sg, CXLS_LINE);
		if (st == CXLS_SK_REFUSED)
			return cxls_meet_to_tcp(c, "the peer refused");
		cxls_sock_denial_note(&c->tuple, c->role, cxls_now_ns());
		return cxls_meet_to_tcp(c, "the peer denied the pool (uid, policy or io_uring)");
	}
	if (st != CXLS_SK_WAITING) {
		/* FREE, CLAIMING, ABANDONED or no state at all under our
		 * generation: only corruption or a hostile peer writes that,
		 * and it would never change (fuzz_handshake) */
		return cxls_meet_to_tcp(c, "record in a state no peer writes");
	}
	mode = cxls_meet_cross_join(c, fd, sg);
	/* not remembered (sock_denial.h): a server that never came may only
	 * have been slow, or found no slot to say it stays on TCP */
	if (mode == CXLS_SC_PENDING && give_up(c, fd, rec, sg))
		mode = cxls_meet_to_tcp(c, "no peer in the pool");
	return mode;
}

int cxls_sock_settle(struct cxls_sconn *c, int fd)
{
	int mode, spins = 0;

	pthread_mutex_lock(&c->lock);
	mode = atomic_load(&c->mode);
	while (mode == CXLS_SC_PENDING) {
		mode = settle_look(c, fd);
		if (mode != CXLS_SC_PENDING)
			break;
		/* at the start and every millisecond: the peer may wait for
		 * one of ours in turn (below) */
		if (spins == 0 || spins >= 200)
			cxls_sock_meet_connected();
		if (++spins < 200) {
			sched_yield();
		} else {
			/* the joiner's doorbell (when a look of an event loop
			 * asked for it, cxls_meet_join()) or the peer's bytes wake it */
			struct pollfd p = { fd, POLLIN, 0 };
			sys_poll(&p, 1, 1);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return mode;
}

/* The first look again 1 ms after the record was made, then at 2, 4,
 * 8... ms, the window's end last; past it (another thread settles), every
 * millisecond. */
#define LOOK_FIRST_NS 1000000ull

uint64_t cxls_sock_next_look(const struct cxls_sconn *c, uint64_t now)
{
	uint64_t gap = LOOK_FIRST_NS;

	if (now >= c->deadline_ns)
		return now + LOOK_FIRST_NS;
	while (c->met_ns + gap <= now)
		gap *= 2;
	return c->met_ns + gap < c->deadline_ns ? c->met_ns + gap : c->deadline_ns;
}

int cxls_sock_settle_look(struct cxls_sconn *c, int fd)
{
	int mode;

	if (pthread_mutex_trylock(&c->lock))
		return CXLS_SC_PENDING; /* another thread settles it */
	mode = atomic_load(&c->mode);
	/* ours still (a record refused and given up may be another's) */
	if (mode == CXLS_SC_PENDING && CXLS_SG_GEN(atomic_load(&c->rec->sg)) == c->gen &&
	    !(atomic_load(&c->me->flags) & CXLS_END_RING_JOIN)) {
		atomic_fetch_or(&c->me->flags, CXLS_END_RING_JOIN);
		cxls_publish(c->tx.flush, &c->me->flags, sizeof(c->me->flags));
		atomic_thread_fence(memory_order_seq_cst); /* ring_creator() */
	}
	if (mode == CXLS_SC_PENDING)
		mode = settle_look(c, fd);
	pthread_mutex_unlock(&c->lock);
	return mode;
}
