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
/* 1 when a live listener record of port (host order) is in the pool. */
int pool_listening(uint16_t port);
/* How many records of the connection whose client port is cport are in
 * state st (enum cxls_sock_state); 0 without a pool. */
int pool_recs(uint16_t cport, uint32_t st);
/* Slot number of a record pool_rec returned. */
uint32_t pool_slot(const struct cxls_sock_rec *r);
/* 1 when the pool is non-coherent (pool.coherence = flush), 0 when
 * coherent, -1 when there is no pool. */
int pool_flush_mode(void);
/* SOCK_CHECK_COHERENCE=flush|coherent in the environment: 1 when the pool
 * really is in that mode (a run meant for flush mode must not pass on a
 * coherent pool), or when nothing is asked. */
int pool_mode_ok(void);
/* The check of it at the start of a run, counted by the caller's CHECK
 * (tests/common/check.h) and failing at the caller's line. */
#define CHECK_POOL_MODE()                                                                          \
	CHECK(pool_mode_ok(), "the pool is %s (SOCK_CHECK_COHERENCE; flush mode: %d)",             \
	      getenv("SOCK_CHECK_COHERENCE"), pool_flush_mode())
/* 1 when this run's connections should go through the pool: the shim is
 * preloaded and sockets are not disabled, unless SOCK_CHECK_EXPECT=pool|tcp
 * says otherwise. */
int pool_expected(void);
/* The pool's buffer classes (n == 0 when none or no pool). */
const struct cxls_sock_bufs *pool_bufs(void);
uint16_t local_port(int fd);
/* A connected pair in this process: *a client, *b server. */
void tcp_pair(int *a, int *b);

#endif
