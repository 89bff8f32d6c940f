/* sock_denial.h - peers that denied this process the pool lately.
 *
 * A peer denies the pool for reasons that last: its uid is not ours, or
 * its policy (sock.peers, sock.ports, sock.programs) or io_uring keeps it
 * on TCP.
 * It tells us in the pool, in the record we made (CXLS_SK_DENIED), which
 * moves no byte on the stream, so nothing wakes an event loop waiting for
 * the outcome: the loop learns it at its next look, a millisecond or more
 * later.  A client that opens one short connection after another to such
 * a peer (ab against nginx, whose workers run as nobody) paid that on
 * every connection: 0.25x TCP's rate at one connection at a time.
 *
 * So a client remembers the server for a while and stays on TCP with it
 * at once, leaving the server a record that says so (sock_meet_decline.c,
 * cxls_meet_decline()).  The server is named by its address and port,
 * so every connection of this process to it stays on TCP meanwhile, also
 * one the server would have taken: the period starts at one second and
 * doubles, up to 64 s, each time the next meeting is denied again (a
 * denial more than a period after the last one starts over at a second);
 * a meeting that goes to the pool forgets the peer.  Per process and
 * only a hint: a full table or a contended lock remembers nothing.
 *
 * A server that never comes to a client's record is not remembered: it
 * may only have been slow, or have found no slot in a full table to say
 * it stays on TCP (a first version did, and a busy haproxy's clients
 * went to TCP for seconds at a time).  A listener whose process has
 * io_uring or a policy that denies everyone is not advertised at all.
 *
 * A server remembers nothing: it could name a client by its address
 * only (clients come from new ports), and one denying client would put
 * every other client of that host on TCP, those of its own uid too; a
 * server denies a client's waiting record at once when it finds it.
 */
#ifndef CXLSHIM_CORE_SOCK_DENIAL_H
#define CXLSHIM_CORE_SOCK_DENIAL_H

#include "sock_format.h"

#include <stdint.h>

/* The peer of t (this end in role) denied the pool, or we denied it
 * (a server's end: nothing noted). */
void cxls_sock_denial_note(const struct cxls_sock_tuple *t, int role, uint64_t now_ns);
/* 1 while the peer of t is remembered as denying: no meeting now. */
int cxls_sock_denied_lately(const struct cxls_sock_tuple *t, int role, uint64_t now_ns);
/* The meeting of t went to the pool: the peer is forgotten. */
void cxls_sock_denial_clear(const struct cxls_sock_tuple *t, int role);
/* In a child just forked: the lock may have been held by another thread
 * of the parent, which the child does not have. */
void cxls_sock_denial_forked(void);
/* Every peer forgotten (a test harness between independent inputs). */
void cxls_sock_denial_reset(void);

#endif
