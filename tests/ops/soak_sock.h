/* soak_sock.h - the socket half of the soak (tests/ops/soak.c): SOCK_CONNS
 * client processes stream checksummed data through one echo server, all
 * under the preload, so the connections go through the pool.  Every byte
 * is checked twice, by the server as it arrives and by the client when it
 * comes back.  The chaos loop kills clients and the server alike; a client
 * whose connection breaks (EOF, reset) reconnects, and one that waits
 * longer than the limit for its peer counts as a hang.
 */
#ifndef CXLSHIM_TESTS_SOAK_SOCK_H
#define CXLSHIM_TESTS_SOAK_SOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define SOCK_CONNS 8

/* Sets up the shared counters and the server's port; stop is polled by
 * every process, limit_s bounds one wait for the peer.  0 or -1. */
int soak_sock_init(_Atomic uint32_t *stop, double limit_s);
/* The workloads' process bodies (soak.c's table). */
int soak_sock_server(int idx, int nprocs);
int soak_sock_client(int idx, int nprocs);
/* One line of counters; 1 when something failed (wrong byte, hang). */
int soak_sock_report(FILE *out);

#endif
