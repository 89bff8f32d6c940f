/* sock_chan.h - the TCP socket as control channel of a pooled connection.
 *
 * Once a connection is on the pool its TCP socket carries no payload, only
 * one-byte doorbells, sent when the other end said it may sleep (armed,
 * tx_wait), and the kernel's own FIN and RST, which tell that the peer's
 * socket is gone even when the peer died without a word.  Doorbells are
 * read and thrown away inside the shim; the application never sees them.
 */
#ifndef CXLSHIM_CORE_SOCK_CHAN_H
#define CXLSHIM_CORE_SOCK_CHAN_H

#include <stdint.h>

#include "sock_conn.h"

/* Wakes the reader of c's tx ring if it may sleep (after producing). */
void cxls_chan_notify_reader(struct cxls_sconn *c, int fd);
/* Wakes the writer of c's rx ring if it waits for space (after consuming). */
void cxls_chan_notify_writer(struct cxls_sconn *c, int fd);
/* Reads pending doorbells; notes FIN and RST in c.  While another thread
 * sleeps on the socket the doorbells stay for it: only FIN and RST are
 * looked for (a peek). */
void cxls_chan_drain(struct cxls_sconn *c, int fd);

/* Several threads may sleep on one socket (two readers, a reader and a
 * writer, a read and a poll): one doorbell wakes them all, but the first
 * to read it would leave a thread that had armed and not yet reached the
 * kernel asleep with its wake-up gone.  So a thread counts itself before
 * arming (cxls_chan_sleep) and uncounts itself after the kernel returned
 * (cxls_chan_woke, rang: the kernel said the socket is readable); the
 * last one out reads the doorbells (and a drain under way when a thread
 * counts itself is waited for: it cannot take that thread's doorbell).
 * cxls_chan_woke returns 0 when it left the doorbells for the others (the
 * caller should yield rather than spin on them). */
void cxls_chan_sleep(struct cxls_sconn *c);
int cxls_chan_woke(struct cxls_sconn *c, int fd, int rang);

/* What the peer's end means for reading once the ring is empty. */
enum cxls_peer_rd { CXLS_RD_OPEN = 0, CXLS_RD_EOF = 1, CXLS_RD_RESET = 2 };
int cxls_chan_read_state(struct cxls_sconn *c);
/* 0 while the peer can take bytes, else EPIPE or ECONNRESET. */
int cxls_chan_write_error(struct cxls_sconn *c);

/* poll(2) bits of c for the requested events (POLLERR and POLLHUP always). */
short cxls_chan_events(struct cxls_sconn *c, short events);
/* Says the waiter may sleep on the TCP socket for these events, then
 * reports whether they are already there (the store-then-check half of the
 * doorbell handshake). */
short cxls_chan_arm(struct cxls_sconn *c, short events);

/* Spins up to the policy's busy-poll window for events; returns them. */
short cxls_chan_busy_poll(struct cxls_sconn *c, short events);

/* SA_RESTART semantics for a wait that the kernel saw interrupted: 1 when
 * every installed handler restarts. */
int cxls_chan_restartable(void);

#endif
