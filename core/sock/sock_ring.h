/* sock_ring.h - one direction of a connection: a byte ring in the pool.
 *
 * The producer copies in and then publishes prod; the consumer copies out
 * and then publishes cons (release/acquire pairs, so the bytes are there
 * before the cursor says so).  Both cursors may have been written by the
 * other end: every value read is checked (prod - cons <= cap) and every
 * position is masked by cap, so no copy leaves the ring whatever the pool
 * holds.  cap and the data pointer are local, fixed at setup.
 *
 * In a pool without cross-host coherence (flush set, coherence.h) the
 * producer writes the data lines back before it publishes prod and then
 * writes prod's line back; the consumer drops its copy of prod's line
 * before reading it and of the data lines before copying them out, and
 * writes cons's line back.  Each line has one writer (sock_format.h).
 */
#ifndef CXLSHIM_CORE_SOCK_RING_H
#define CXLSHIM_CORE_SOCK_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "coherence.h"
#include "futex.h"
#include "sock_format.h"

struct cxls_ring {
	struct cxls_sock_ring_hdr *hdr;
	uint8_t *data;
	uint64_t cap;      /* power of two */
	struct cxls_sock_ref *refs; /* its reference queue (sock_ref.c) */
	int flush;         /* the pool is non-coherent: see above */
};

/* The producer's and the consumer's line of the header. */
static inline void cxls_ring_wb_prod(const struct cxls_ring *r)
{
	cxls_publish(r->flush, &r->hdr->prod, CXLS_LINE);
}

static inline void cxls_ring_wb_cons(const struct cxls_ring *r)
{
	cxls_publish(r->flush, &r->hdr->cons, CXLS_LINE);
}

/* Fresh copies of both cursor lines (a no-op when coherent). */
static inline void cxls_ring_fresh(const struct cxls_ring *r)
{
	if (r->flush) {
		cxls_flush_lines(&r->hdr->prod, CXLS_LINE);
		cxls_flush_lines(&r->hdr->cons, CXLS_LINE);
	}
}

/* Writes back (producer) or drops (consumer) the data lines of n bytes at
 * cursor pos; flush mode only (inline: a coherent pool pays one test). */
void cxls_ring_flush_data(const struct cxls_ring *r, uint64_t pos, size_t n);

static inline void cxls_ring_data_lines(const struct cxls_ring *r, uint64_t pos, size_t n)
{
	if (r->flush && n)
		cxls_ring_flush_data(r, pos, n);
}

/* Walks an iovec array as one buffer. */
struct cxls_iovc {
	const struct iovec *iov;
	int cnt;
	int idx;
	size_t off;
	int discard; /* copies to it move past bytes, write none (MSG_TRUNC) */
};

void cxls_iovc_init(struct cxls_iovc *c, const struct iovec *iov, int cnt);
size_t cxls_iov_total(const struct iovec *iov, int cnt);
/* Copies n bytes between mem and the iovec (to_iov: mem -> iovec). */
void cxls_iovc_copy(struct cxls_iovc *c, uint8_t *mem, size_t n, int to_iov);

/* prod - cons of a producer and a consumer cursor of r's header, at most
 * max, or -1 when no instant had them so (corrupt); *cons_at: the cons it
 * counts from.  Right for a caller that moves neither (see sock_ring.c). */
int64_t cxls_cursor_gap(const struct cxls_ring *r, _Atomic uint64_t *prod,
			_Atomic uint64_t *cons, uint64_t max, uint64_t *cons_at);
/* Readable bytes, or -1 when the cursors make no sense (corrupt). */
int64_t cxls_ring_used(const struct cxls_ring *r);
/* Writable bytes, or -1. */
int64_t cxls_ring_free(const struct cxls_ring *r);

/* Copies n bytes at cursor pos out of the ring (to_iov) or into it;
 * positions wrap at cap, the caller checked the cursors. */
void cxls_ring_copy(const struct cxls_ring *r, struct cxls_iovc *c, uint64_t pos, size_t n,
		    int to_iov);
/* Copies up to want bytes in; bytes, or -1 corrupt.  Holds the producer
 * lock. */
int64_t cxls_ring_put(const struct cxls_ring *r, struct cxls_iovc *src, size_t want);

/* Pool spin locks of one end (threads and forked children share them);
 * 0, or -1 when held for seconds (a corrupt or dead holder). */
int cxls_ring_lock(_Atomic uint32_t *lock);
void cxls_ring_unlock(_Atomic uint32_t *lock);

#endif
