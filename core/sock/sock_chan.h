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
/* Reads pending doorbells; notes FIN and RST in c. */
void cxls_chan_drain(struct cxls_sconn *c, int fd);

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
