/* sock_conn.h - a socket the shim follows, and the fd table that finds it.
 *
 * Only TCP sockets that may go through the pool get an entry: listening
 * sockets (to advertise themselves), connects in flight, connections whose
 * peer is not there yet and connections on the pool.  A connection that
 * falls back to TCP leaves the table, so plain TCP pays one lookup.
 *
 * Dup'd fds share one entry, like they share one open file description.
 * Lifetime: refs counts table entries and calls in flight; the pool side
 * (rings, record) is let go when the last reference goes, so a thread still
 * blocked in a read after another thread closed the fd never reads freed
 * memory, just like the kernel keeps a socket alive for a blocked read.
 */
#ifndef CXLSHIM_CORE_SOCK_CONN_H
#define CXLSHIM_CORE_SOCK_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "sock_buf.h"
#include "sock_format.h"
#include "sock_ring.h"

enum cxls_sc_mode {
	CXLS_SC_LISTEN = 1,     /* advertised in the pool's listener table */
	CXLS_SC_CONNECTING = 2, /* nonblocking connect in flight */
	CXLS_SC_PENDING = 3,    /* our record waits for the peer */
	CXLS_SC_POOL = 4,       /* bytes go through the rings */
	CXLS_SC_TCP = 5,        /* fell back; about to leave the table */
};

struct cxls_sconn {
	_Atomic int refs;
	_Atomic int fds;          /* fd table entries */
	_Atomic int mode;
	pthread_mutex_t lock;     /* serialises mode changes */
	int role;                 /* enum cxls_sock_role */
	uint32_t slot;
	uint32_t gen;
	int listener;             /* LISTEN: index of our listener record */
	int server_listens;       /* client: the server was in the pool */
	uint64_t met_ns;          /* PENDING: when our record was made */
	uint64_t deadline_ns;     /* PENDING: stay on TCP after this */
	uint64_t key;             /* PENDING: the meeting's, and what it is */
	struct cxls_sock_tuple tuple; /* derived from (our copies, not the pool's) */
	struct cxls_sock_rec *rec;
	struct cxls_sock_end *me;
	struct cxls_sock_end *peer;
	struct cxls_ring tx;
	struct cxls_ring rx;
	const struct cxls_sock_bufs *bufs; /* the pool's buffer classes */
	uint64_t owner;           /* CXLS_BUF_OWNER of our record */
	uint64_t ref_min;         /* writes from this size go by reference; 0 never */
	_Atomic int nonblock;     /* O_NONBLOCK of the file description */
	_Atomic int shut_rd;
	_Atomic int shut_wr;
	_Atomic int tcp_eof;      /* FIN seen on the control socket */
	_Atomic int tcp_rst;      /* RST seen on it */
	_Atomic int peer_dead;    /* the peer's holders died after its shutdown
				   * (no FIN or RST left to tell) */
	_Atomic uint64_t peer_fork_ns; /* when they were first seen dead but
					* forking (sock_chan.c: fork_lapsed) */
	_Atomic uint64_t looked_ns; /* the last cxls_chan_look() that read it */
	_Atomic uint64_t looked_cons; /* tx consumer cursor a write last saw */
	_Atomic int broken;       /* the pool side is corrupt: reset */
	_Atomic int tx_returned;  /* the peer is gone: our buffers given back */
	_Atomic int linger0;      /* SO_LINGER {1, 0}: close resets */
	_Atomic int reset_told;   /* the reset was reported (cxls_chan_tell_reset) */
	_Atomic int rst_drawn;    /* bytes written into a peer that reads no more:
				   * TCP's answer, an RST, closed this socket */
	_Atomic int rst_err;      /* that RST's error until reported (sk_err) */
	_Atomic uint32_t sndbuf;  /* SO_SNDBUF set by the application */
	_Atomic uint32_t rcvlowat;
	_Atomic int timeo_known;  /* the two below are SO_RCVTIMEO/SO_SNDTIMEO */
	uint32_t timeo_gen;       /* me->timeo_gen when they were read */
	uint64_t rcvtimeo_ns;     /* 0: none; read from the socket once, again */
	uint64_t sndtimeo_ns;     /* after the application sets either */
	_Atomic int app_nodelay;  /* TCP_NODELAY and TCP_CORK as the application */
	_Atomic int app_cork;     /* set them: the socket itself keeps 1 and 0 */
	uint32_t busy_us;
	int held_extra;           /* this process counts in me->extra, not
				   * in me->holder[] (the array was full) */
	_Atomic int calls;        /* reads, writes, polls in flight here */
	_Atomic int kept_fd;      /* closed under a call in flight: the
				   * socket kept for it (sock_kept.h), or -1 */
	struct cxls_sconn *kept_next;
};

struct cxls_sconn *cxls_sconn_new(int mode);
void cxls_sconn_hold(struct cxls_sconn *c);
/* Drops a reference; the last one lets the pool side go and frees. */
void cxls_sconn_put(struct cxls_sconn *c);
/* The pool side of c cannot be trusted any more: every later read and
 * write fails with ECONNRESET, as after a TCP reset.  The first caller
 * says why in one WARN (an application sees only the reset). */
void cxls_sconn_break(struct cxls_sconn *c, const char *why);

/* Number of table entries; 0 makes every interposed call a plain one. */
extern _Atomic int cxls_fdtab_count;

static inline int cxls_fdtab_empty(void)
{
	return atomic_load_explicit(&cxls_fdtab_count, memory_order_relaxed) == 0;
}

/* The entry of fd with a reference held, or NULL. */
struct cxls_sconn *cxls_fdtab_get(int fd);
/* Makes fd point at c (taking a reference); what fd held before is
 * dropped.  -1 when fd is out of range or memory is short. */
int cxls_fdtab_set(int fd, struct cxls_sconn *c);
/* Removes fd's entry and returns it (the caller owns its reference). */
struct cxls_sconn *cxls_fdtab_take(int fd);
/* Calls fn for every entry, table locked (fork handlers). */
void cxls_fdtab_each(void (*fn)(int fd, struct cxls_sconn *c, void *arg), void *arg);
void cxls_fdtab_lock(void);
void cxls_fdtab_unlock(void);
void cxls_fdtab_reinit(void);

#endif
