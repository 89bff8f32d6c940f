/* sock_meet.h - two ends of a TCP connection find each other in the pool.
 *
 * After connect() or accept() returns, each end computes the connection's
 * tuple (client address and port, server address and port) and its key
 * (hash of the tuple and the pool uuid).  The first end to arrive claims a
 * record and waits (PENDING); the second finds it, checks the policy and
 * flips it to JOINED or REFUSED with one compare-and-swap.  The waiting end
 * gives up (ABANDONED) after sock.meet_timeout_ms, or at once when the peer
 * sends TCP bytes (it cannot be on the pool then).  Ends that both made a
 * record agree on the client's (cxls_meet_cross_join, sock_meet_join.c).
 * The stream itself is never touched: a peer without the shim sees plain
 * TCP.
 */
#ifndef CXLSHIM_CORE_SOCK_MEET_H
#define CXLSHIM_CORE_SOCK_MEET_H

#include <sys/socket.h>

#include "proc_id.h"
#include "sock_conn.h"
#include "sock_region.h"

/* The tuple of fd seen from role; -1 when fd is not a TCP/IP socket. */
int cxls_sock_tuple(int fd, int role, struct cxls_sock_tuple *t);

/* Meets the peer of connected fd for c, a CONNECTING connection (sndbuf:
 * SO_SNDBUF the application set, 0 if none).  Returns c's new mode: POOL,
 * PENDING, or TCP. */
int cxls_sock_meet(struct cxls_sconn *c, int fd, int role, uint32_t sndbuf);

/* Connected fd stays on TCP, but its peer may be under the shim and may
 * have looked: tells it in the pool, so that it does not wait. */
void cxls_sock_decline(int fd, int role);

/* Waits (up to the deadline) for the peer of a PENDING connection;
 * returns the new mode, POOL or TCP. */
int cxls_sock_settle(struct cxls_sconn *c, int fd);
/* cxls_sock_settle without the wait, for event loops: one look; PENDING
 * while undecided (or while another thread settles c).  From the first
 * look on, the peer that joins rings one doorbell, so a loop waiting for
 * POLLIN on the TCP socket wakes when it is pooled; for the rest it looks
 * again by itself (cxls_sock_next_look()). */
int cxls_sock_settle_look(struct cxls_sconn *c, int fd);
/* When a loop waiting on a meeting under way (c) looks at it next, after
 * now: a peer that refuses it, or a thread of ours that settles it, rings
 * nothing (a refused connection's TCP stream must carry no doorbell), so
 * the loop looks by itself, more and more seldom, and at the window's end. */
uint64_t cxls_sock_next_look(const struct cxls_sconn *c, uint64_t now);
/* Nonblocking connects of this process that are done meet now, as their
 * first use would (sock_fd.c); the settle calls it while it waits. */
void cxls_sock_meet_connected(void);

/* The peer's end may be gone (EOF, reset, EPIPE seen): when it is
 * finished (closed, or every holder dead) nothing will read what we
 * queued, so the buffers of our references go back to the pool now, not
 * when the record is freed at our close.  Once per connection. */
void cxls_sock_peer_gone(struct cxls_sconn *c);

/* Whether the processes holding the peer's end, which said no goodbye
 * in the pool, are all dead: 1 dead, 0 not, -1 when they are on another
 * host (nothing here can tell), CXLS_PEER_FORKING when all are dead but
 * a fork was under way (its child may not have recorded itself yet). */
#define CXLS_PEER_FORKING 2
int cxls_sock_peer_dead(const struct cxls_sconn *c);

/* Whether another process that is alive holds c's end (a pooled or
 * pending connection) and is `maker`, with the exec count maker_execs
 * still, or was started at or after `since` (cxls_proc_now_ticks()) and
 * never exec'd holding it, or may (a fork of it under way, holders
 * beyond the array): one that died without closing holds nothing, and
 * an exec'd image no copy of what its earlier image made. */
int cxls_sock_held_since(struct cxls_sconn *c, const struct cxls_proc_id *maker,
			 uint32_t maker_execs, uint64_t since);
/* This process's exec count on c's end (sock_format.h; 0 when it is not
 * recorded), and a move of it by delta, published: +1 right before an
 * exec, -1 when the exec failed. */
uint32_t cxls_sock_execs(struct cxls_sconn *c);
void cxls_sock_exec_count(struct cxls_sconn *c, int delta);

/* Whether another process holds c's end (a pooled or pending
 * connection), or is being forked with it. */
int cxls_sock_held_elsewhere(struct cxls_sconn *c);

/* Lets the pool side of a connection go (last reference). */
void cxls_sock_release(struct cxls_sconn *c);

/* fork: phase 0 in the parent before (the coming child counts as a
 * holder), 1 in the child after (it records itself). */
void cxls_sock_fork(struct cxls_sconn *c, int phase);

/* Records a process (id; NULL: this one) as holding c's end, with the
 * exec count execs (1 for an image that exec'd since it came to hold
 * it: sock_format.h); when the
 * holder array is full this process counts itself in the end's extra
 * holders instead (c->held_extra), to take itself off at its close.
 * Published. */
void cxls_sock_hold(struct cxls_sconn *c, const struct cxls_proc_id *id, uint32_t execs);
/* A holder on the way (a fork's child, a socket sent over a UNIX socket)
 * arrived: one fewer, never below 0 (a count nobody made is not ours to
 * take).  The caller publishes. */
void cxls_end_arrived(struct cxls_sock_end *e);
/* *n - 1, never below 0. */
void cxls_count_down(_Atomic uint32_t *n);
/* How long a socket sent over a UNIX socket keeps its end for the
 * receiver once its holders are gone. */
#define CXLS_PASS_GRACE_NS (30ull * 1000000000ull)

/* The JOINED record of the connection whose tuple is t (either end's
 * view of it: the tuple is the client's and server's addresses), its
 * slot and *gen; -1 when none. */
int cxls_sock_find_joined(const struct cxls_sock_region *r, const struct cxls_sock_tuple *t,
			  uint32_t *gen);

/* Frees the records of connections whose ends are all closed or dead;
 * returns how many. */
int cxls_sock_sweep(const struct cxls_sock_region *r);
/* A writer found every buffer lent: some may belong to connections whose
 * processes all died (nobody closed them, so no record was freed).
 * Sweeps, at most once a second per process. */
void cxls_sock_sweep_starved(const struct cxls_sock_region *r);

/* A field of a record that another end wrote, read from the pool once:
 * that end (corruption, or a hostile peer) may rewrite it between two
 * reads, and the compiler may read a plain field again where the source
 * reads it once, so a value checked is kept in a local and only that is
 * used. */
#define CXLS_MEET_ONCE(field) (*(const volatile __typeof__(field) *)&(field))
/* Whether cap, read from a record, is a ring size of this pool. */
int cxls_sock_cap_ok(const struct cxls_sock_region *r, uint32_t cap);

/* The local view of slot's record (rings and ends by role). */
void cxls_sock_attach(struct cxls_sconn *c, const struct cxls_sock_region *r, uint32_t slot,
		      uint32_t gen, int role, uint32_t cap);
/* A new entry, in POOL mode, for our end (role) of slot's record, which
 * must be JOINED with gen and checked by the caller: a socket that came
 * by exec (execs 1: this image has no epoll items of an earlier one) or
 * over a UNIX socket (0).  This process is recorded as a holder, with
 * that exec count unless it was already (exec keeps the pid, and the
 * earlier image counted its exec). */
struct cxls_sconn *cxls_sock_rejoin(const struct cxls_sock_region *r, uint32_t slot,
				    uint32_t gen, int role, uint32_t execs);
/* Makes the TCP socket a doorbell channel (TCP_NODELAY on, no cork). */
void cxls_sock_control_channel(struct cxls_sconn *c, int fd);

/* Before a connect: does a process under the shim listen at sa? */
int cxls_sock_server_listens(const struct sockaddr *sa);

/* Listener table (sock_listen.c). */
int cxls_listener_add(int fd);
void cxls_listener_del(int idx);
/* fork: phase 0 in the parent before, 1 in the child after. */
void cxls_listener_fork(int idx, int phase);
int cxls_listener_serves(const struct cxls_sock_tuple *t);
/* A listener record seen with state word sg may be freed: LIVE with all
 * its holders dead, or CLAIMING by a dead claimer (sock_claim.h). */
int cxls_listener_stale(struct cxls_sock_listener *l, uint64_t sg);

#endif
