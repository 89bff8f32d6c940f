/* sock_format.h - the socket region of the pool, as every host sees it.
 *
 *   sock_offset                    sock_listeners listener records (128 B)
 *   + listeners                    sock_slots connection records (2 KiB)
 *   + page aligned                 2 * sock_slots rings of sock_ring bytes:
 *                                  slot s owns rings 2s (client to server)
 *                                  and 2s + 1 (server to client)
 *   + page aligned                 one descriptor per buffer, class by class
 *   + page aligned                 the buffers, class by class (sock_buf.c)
 *
 * A ring's place follows from its slot number alone, never from a value
 * read from the pool, and every cursor read from the pool is checked
 * against the ring size before use (sock_ring.c): a corrupted or hostile
 * peer can garble the bytes of its own connection, nothing else.  The same
 * holds for references to buffers: class, index, length and generation
 * are checked against the superblock's geometry and the buffer's owner
 * before a byte is read (sock_buf.c).
 */
#ifndef CXLSHIM_CORE_SOCK_FORMAT_H
#define CXLSHIM_CORE_SOCK_FORMAT_H

#include <stdatomic.h>
#include <stdint.h>

#include "pool_format.h"

#define CXLS_SOCK_REC_SIZE 2048u
#define CXLS_SOCK_LISTENER_SIZE 256u
#define CXLS_SOCK_RING_MIN (16u << 10)
#define CXLS_SOCK_RING_MAX (64u << 20)
#define CXLS_SOCK_HOLDERS 12
#define CXLS_SOCK_REFS 16 /* references in flight per direction */
#define CXLS_SOCK_BUF_MIN (4u << 10)
#define CXLS_SOCK_BUF_MAX (64u << 20)
#define CXLS_SOCK_BUF_COUNT_MAX 65536u

/* execs: how many times the holder exec'd while recorded (the old image
 * counts its own before exec; a holder recorded by another process, a
 * child of vfork, posix_spawn's, or by an exec'd image starts at 1).  An
 * exec'd image has none of the epoll items its earlier image had (the
 * shim's memory went), which decides whether a kernel registration may
 * still be another process's (sock_epoll_close.c, shared_reg()).  It was
 * padding, written 0 by releases before it and meaning "never exec'd"
 * there, which is what they assumed: the layout is the same, so is the
 * format version.  Listeners leave it 0. */
struct cxls_sock_holder {
	_Atomic uint32_t pid;
	_Atomic uint32_t execs;
	uint64_t start_time;
};

/* A listening socket of a process under the shim: connecting clients only
 * look for a peer in the pool when the server port has one.  Pre-forked
 * servers share it: every holder is recorded.  A fork counts as a holder
 * from before it starts until the child recorded itself, so that a parent
 * closing its copy right after fork() does not end the socket. */
enum cxls_listener_state { CXLS_LST_FREE = 0, CXLS_LST_CLAIMING = 1, CXLS_LST_LIVE = 2 };

#define CXLS_LISTENER_HOLDERS 12

/* sg is state and generation in one word (CXLS_SG below), the generation
 * bumped at every claim: a reader copies the record between two equal
 * loads of it, and a take-over's compare-and-swap fails on a record that
 * was freed and claimed again meanwhile.  claim_gen and lease: who claimed
 * it, for sweeping a claim whose process died (sock_claim.h). */
struct cxls_sock_listener {
	_Alignas(CXLS_LINE) _Atomic uint64_t sg;
	uint16_t port;     /* network order */
	uint16_t family;
	uint8_t addr[16];  /* bound address, all zero for a wildcard */
	uint32_t uid;
	uint32_t untracked; /* more holders than slots: never declared dead */
	_Atomic uint32_t forking; /* forks under way: children not yet recorded */
	_Atomic uint32_t claim_gen; /* boot_hash and holder[] are the claimer's */
	uint32_t pad;
	uint64_t boot_hash;
	struct cxls_sock_holder holder[CXLS_LISTENER_HOLDERS];
	_Atomic uint64_t lease;
};

_Static_assert(sizeof(struct cxls_sock_listener) == CXLS_SOCK_LISTENER_SIZE, "listener lines");

/* Connection record state: the creator moves FREE -> CLAIMING -> WAITING;
 * the other end then decides with one compare-and-swap (JOINED, REFUSED
 * or DENIED), unless the creator gave up first (ABANDONED).  Only one of
 * those can win, so both ends always agree on pool or TCP.  DENIED is a
 * refusal for a reason that lasts (uid, policy, io_uring): the creator
 * remembers the peer for a while (sock_denial.h). */
enum cxls_sock_state {
	CXLS_SK_FREE = 0,
	CXLS_SK_CLAIMING = 1,
	CXLS_SK_WAITING = 2,
	CXLS_SK_JOINED = 3,
	CXLS_SK_REFUSED = 4,
	CXLS_SK_ABANDONED = 5,
	CXLS_SK_DENIED = 6,
};

enum cxls_sock_role { CXLS_CLIENT = 0, CXLS_SERVER = 1 };

/* The connection as both ends name it: client first, whoever asks. */
struct cxls_sock_tuple {
	uint8_t caddr[16];
	uint8_t saddr[16];
	uint16_t cport;    /* network order */
	uint16_t sport;
	uint16_t family;
	uint16_t pad;
};

/* Flags of one end, set by that end only. */
enum cxls_end_flag {
	CXLS_END_SHUT_WR = 1u << 0, /* shutdown(SHUT_WR): EOF after the ring */
	CXLS_END_CLOSED = 1u << 1,  /* last holder closed the socket */
	CXLS_END_RESET = 1u << 2,   /* ECONNRESET: closed with SO_LINGER 0 or with
				     * bytes unread, or it wrote into a peer that
				     * reads no more (TCP's RST either way) */
	CXLS_END_RCVTIMEO = 1u << 4,  /* the socket's SO_RCVTIMEO is the shim's wait
				       * slice; the application's is none */
	CXLS_END_SHUT_RD = 1u << 5, /* shutdown(SHUT_RD): with SHUT_WR, bytes that
				     * come reset the connection (TCP in FIN_WAIT) */
	CXLS_END_RING_JOIN = 1u << 6, /* the creator of a record waits for its
				       * peer in an event loop, not in a settle:
				       * the joiner rings one doorbell */
	CXLS_END_NONBLOCK = 1u << 7, /* O_NONBLOCK of the file, which every
				      * holder of the end shares (sock_fd.c) */
	CXLS_END_PEEK_OFF = 1u << 8, /* peek_off holds the file's SO_PEEK_OFF
				      * (without it: -1, none; sock_peek.c) */
	CXLS_END_TOLD = 1u << 9, /* a reset was reported by one of the holders
				  * (the kernel's sk_err goes to one call) */
};

/* Threads that may sleep on one end's control socket (all its processes). */
#define CXLS_SOCK_SLEEPERS 8

/* One end of a connection: its flags and the processes holding it (a
 * forked child holds it too).  An end whose holders are all gone or dead
 * no longer needs the connection's memory.  Only that end's host writes
 * it.  sleeper[] and draining hold deadlines (CLOCK_MONOTONIC ns of that
 * host, 0: free): a thread asleep on the control socket, or reading its
 * doorbells, claims an entry until a deadline it renews while it waits,
 * so an entry left behind (a signal handler that longjmp'd out of the
 * wait, a process killed in it) expires by itself (sock_chan.c). */
struct cxls_sock_end {
	_Alignas(CXLS_LINE) _Atomic uint32_t flags;
	_Atomic uint32_t forking;   /* forks under way: children not yet recorded */
	uint32_t uid;
	_Atomic uint32_t claim_gen; /* the creator's end: holder[] is the claimer */
	uint64_t boot_hash;
	struct cxls_sock_holder holder[CXLS_SOCK_HOLDERS];
	/* when a socket of this end was last sent over a UNIX socket
	 * (SCM_RIGHTS, sock_pass.c; CLOCK_MONOTONIC ns): a receiver may take
	 * it over for a while after its holders are gone */
	_Atomic uint64_t passed_ns;
	/* holders beyond holder[] (a process forked with the socket while
	 * all entries were taken): counted, not named; each takes itself off
	 * at its close (one that dies without closing keeps the end) */
	_Atomic uint32_t extra;
	/* SO_PEEK_OFF, the file's as O_NONBLOCK is: valid once
	 * CXLS_END_PEEK_OFF is set (a claim clears the flag, not this) */
	_Atomic int32_t peek_off;
	/* SO_RCVLOWAT as a holder last set it, for all of them (0: none
	 * did since the meeting: each process's own, read from the socket) */
	_Atomic uint32_t rcvlowat;
	/* bumped by a holder's SO_RCVTIMEO or SO_SNDTIMEO: each holder
	 * keeps the socket's timeouts, and reads them again when this moved
	 * (the kernel socket, which holds them, is every holder's) */
	_Atomic uint32_t timeo_gen;
	_Alignas(CXLS_LINE) _Atomic uint64_t sleeper[CXLS_SOCK_SLEEPERS];
	_Alignas(CXLS_LINE) _Atomic uint64_t draining;
};

/* One direction.  Cursors count bytes ever produced / consumed; the
 * position in the ring is the cursor modulo the ring size.  ref_prod and
 * ref_cons count references ever queued / consumed (entry n is
 * ref[dir][n % CXLS_SOCK_REFS]); ref_off is how much of the oldest one
 * the reader already took (a partial read).
 *
 * Each cache line has one writer, the producing or the consuming end, so
 * that a pool without cross-host coherence (pool.coherence = flush) can
 * write lines back whole.  Wake-up requests are counters for the same
 * reason: a sleeper bumps the sequence of its *_want, the other end
 * answers with a doorbell and copies the sequence it answered into its
 * *_rung; a request is pending while its sequence differs from both
 * *_rung and *_cancel, which the sleeping end sets to it when its last
 * sleeper woke before an answer came (no doorbell is needed then: it is
 * awake).
 *
 * A request also names the sleep it was made for (a token, CXLS_REQ):
 * one thread's poll or epoll_wait arms every connection it watches under
 * one token and, woken by any of them, looks at all of them again.  So an
 * end that rang a doorbell for a token answers the other requests made
 * under it without one: an event loop asleep on n connections costs its
 * peer one doorbell per sleep, not one per connection written to.  Token
 * 0 always rings: a request that threads with different sleeps joined. */
#define CXLS_REQ_SEQ_BITS 16
#define CXLS_REQ_SEQ_MASK ((1u << CXLS_REQ_SEQ_BITS) - 1)
#define CXLS_REQ(seq, tok) (((uint64_t)(tok) << CXLS_REQ_SEQ_BITS) | ((seq) & CXLS_REQ_SEQ_MASK))
#define CXLS_REQ_SEQ(w) ((uint32_t)(w) & CXLS_REQ_SEQ_MASK)
#define CXLS_REQ_TOKEN(w) ((uint64_t)(w) >> CXLS_REQ_SEQ_BITS)

struct cxls_sock_ring_hdr {
	/* the producer's line */
	_Alignas(CXLS_LINE) _Atomic uint64_t prod;
	_Atomic uint64_t ref_prod;
	_Atomic uint64_t space_want; /* a writer may sleep: wake it on space */
	_Atomic uint32_t prod_lock;  /* writers of this end (threads, forks) */
	_Atomic uint32_t data_rung;  /* the data_want sequence last answered */
	_Atomic uint32_t space_cancel; /* the space_want sequence no longer wanted */
	/* the consumer's line */
	_Alignas(CXLS_LINE) _Atomic uint64_t cons;
	_Atomic uint64_t ref_cons;
	_Atomic uint64_t ref_off;
	_Atomic uint64_t data_want;  /* a reader may sleep: wake it on data */
	_Atomic uint32_t cons_lock;
	_Atomic uint32_t space_rung; /* the space_want sequence last answered */
	_Atomic uint32_t data_cancel; /* the data_want sequence no longer wanted */
};

/* A large write passed by reference (after DFabric): the bytes sit in a
 * pool buffer lent to the connection, and they come in the stream right
 * before byte-ring position pos (the ring's prod when it was queued). */
struct cxls_sock_ref {
	uint64_t pos;
	uint32_t len;  /* bytes in the buffer, 1 .. its class's size */
	uint16_t cls;  /* buffer class */
	uint16_t pad;
	uint32_t idx;  /* buffer within the class */
	uint32_t gen;  /* the buffer's generation when lent */
};

/* One buffer: free (owner 0) or lent to a connection, owner
 * CXLS_BUF_OWNER(record generation, slot); gen is bumped at every loan
 * so that a stale reference never matches a later one.  A line each:
 * hosts lend neighbouring buffers without sharing a line to write back. */
struct cxls_sock_buf_desc {
	_Alignas(CXLS_LINE) _Atomic uint64_t owner;
	_Atomic uint32_t gen;
	uint32_t pad;
};

#define CXLS_BUF_OWNER(gen, slot) (((uint64_t)(gen) << 32) | ((uint64_t)(slot) + 1))

/* State and generation in one word, so that a compare-and-swap made with
 * an old view of a record can never change a later reuse of its slot. */
#define CXLS_SG(gen, state) (((uint64_t)(gen) << 32) | (uint32_t)(state))
#define CXLS_SG_STATE(sg) ((uint32_t)(sg))
#define CXLS_SG_GEN(sg) ((uint32_t)((sg) >> 32))

struct cxls_sock_rec {
	_Alignas(CXLS_LINE) _Atomic uint64_t sg; /* gen bumped at every claim */
	uint64_t key;                /* hash of the pool uuid and the tuple */
	struct cxls_sock_tuple tuple;
	uint32_t creator;            /* enum cxls_sock_role */
	uint32_t cap;                /* bytes used of each ring, power of two */
	uint64_t created_ns;
	struct cxls_sock_end end[2]; /* indexed by role */
	struct cxls_sock_ring_hdr ring[2]; /* 0: client to server */
	_Alignas(CXLS_LINE) struct cxls_sock_ref ref[2][CXLS_SOCK_REFS]; /* written by the producer */
	_Alignas(CXLS_LINE) _Atomic uint64_t lease; /* sweepers' (sock_claim.h) */
};

_Static_assert(sizeof(struct cxls_sock_rec) <= CXLS_SOCK_REC_SIZE, "record fits its stride");
_Static_assert(sizeof(struct cxls_sock_ref) * CXLS_SOCK_REFS % CXLS_LINE == 0,
	       "each direction's reference queue has lines of its own");

static inline uint64_t cxls_sock_align(uint64_t v)
{
	return (v + CXLS_PAGE - 1) & ~(CXLS_PAGE - 1);
}

/* Offset of the rings from sock_offset. */
static inline uint64_t cxls_sock_rings_off(uint32_t listeners, uint32_t slots)
{
	return cxls_sock_align((uint64_t)listeners * CXLS_SOCK_LISTENER_SIZE +
			       (uint64_t)slots * CXLS_SOCK_REC_SIZE);
}

/* Offset of the buffer descriptors from sock_offset. */
static inline uint64_t cxls_sock_descs_off(uint32_t listeners, uint32_t slots, uint64_t ring)
{
	return cxls_sock_rings_off(listeners, slots) + 2ull * slots * ring;
}

static inline uint64_t cxls_sock_nbufs(const uint32_t count[CXLS_SOCK_BUF_CLASSES])
{
	uint64_t n = 0;

	for (int k = 0; k < CXLS_SOCK_BUF_CLASSES; k++)
		n += count[k];
	return n;
}

/* Bytes of the descriptors and the buffers together. */
static inline uint64_t cxls_sock_bufs_size(const uint32_t size[CXLS_SOCK_BUF_CLASSES],
					   const uint32_t count[CXLS_SOCK_BUF_CLASSES])
{
	uint64_t n = cxls_sock_align(cxls_sock_nbufs(count) * sizeof(struct cxls_sock_buf_desc));

	for (int k = 0; k < CXLS_SOCK_BUF_CLASSES; k++)
		n += (uint64_t)size[k] * count[k];
	return n;
}

/* Bytes of the whole region (no overflow for the ranges pool.c allows). */
static inline uint64_t cxls_sock_region_size(uint32_t listeners, uint32_t slots, uint64_t ring,
					     const uint32_t size[CXLS_SOCK_BUF_CLASSES],
					     const uint32_t count[CXLS_SOCK_BUF_CLASSES])
{
	return cxls_sock_align(cxls_sock_descs_off(listeners, slots, ring)) +
	       cxls_sock_bufs_size(size, count);
}

#endif
