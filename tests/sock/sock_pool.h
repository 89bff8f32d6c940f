/* sock_pool.h - the socket tests look into the pool from outside: the
 * record of a connection, its buffers, a connected pair in one process. */
#ifndef CXLSHIM_TESTS_SOCK_POOL_H
#define CXLSHIM_TESTS_SOCK_POOL_H

#include <stdint.h>

#include "sock_buf.h"
#include "sock_format.h"

/* The record of the connection whose client port is cport (host order),
 * JOINED only unless any_state; NULL when none or no pool. */
struct cxls_sock_rec *pool_rec(uint16_t cport, int any_state);
/* Slot number of a record pool_rec returned. */
uint32_t pool_slot(const struct cxls_sock_rec *r);
/* The pool's buffer classes (n == 0 when none or no pool). */
const struct cxls_sock_bufs *pool_bufs(void);
uint16_t local_port(int fd);
/* A connected pair in this process: *a client, *b server. */
void tcp_pair(int *a, int *b);

#endif
