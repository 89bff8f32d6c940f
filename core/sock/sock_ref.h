/* sock_ref.h - one direction as the application sees it: the bytes of the
 * ring with references to pool buffers between them.
 *
 * A reference carries the ring position it comes before (the ring's prod
 * when it was queued), so the reader merges both in order: ring bytes up to
 * the oldest reference's position, that buffer, more ring bytes.  The
 * writer publishes ring bytes before any reference that follows them and a
 * reference before any ring byte that follows it (release stores under its
 * producer lock), so a reader that sees a byte also sees every reference
 * queued before it.  Every value read from the pool is checked: a queue
 * count beyond CXLS_SOCK_REFS, a position outside the ring's cursors, a
 * reference sock_buf.c rejects, or a partial-read offset beyond its
 * reference make the call fail (the connection resets).
 */
#ifndef CXLSHIM_CORE_SOCK_REF_H
#define CXLSHIM_CORE_SOCK_REF_H

#include <stdint.h>

#include "sock_buf.h"
#include "sock_ring.h"

/* Writer, holding the producer lock: passes up to want bytes of src
 * through a borrowed buffer, unless references of more than limit bytes
 * would then wait to be read (one always may).  Bytes queued, 0 when no
 * buffer or queue entry is free or the limit is reached (use the ring),
 * -1 corrupt. */
int64_t cxls_ref_put(const struct cxls_ring *r, const struct cxls_sock_bufs *b, uint64_t owner,
		     struct cxls_iovc *src, size_t want, uint64_t limit);

/* Reader, holding the consumer lock: copies up to want bytes of the
 * stream into dst, giving back buffers it finished (peek: takes and gives
 * back nothing, and copies from skip bytes in: SO_PEEK_OFF; a read
 * passes 0).  Bytes, 0 when none are past skip, or -1 corrupt. */
int64_t cxls_stream_get(const struct cxls_ring *r, const struct cxls_sock_bufs *b, uint64_t owner,
			struct cxls_iovc *dst, size_t want, int peek, uint64_t skip);

/* Nothing to read at one instant: no ring byte, no reference, no partial
 * one.  Takes no lock and moves nothing, so a reader about to sleep asks
 * it before the consumer lock and cxls_stream_get (an empty ring is every
 * sleeping read's first look); anything else, a corrupt cursor included,
 * says "not empty" and goes the locked way, which checks it. */
int cxls_stream_empty(const struct cxls_ring *r);

/* Readable bytes (ring and references), or -1 when the cursors make no
 * sense.  A snapshot: exact only while the consumer lock is held. */
int64_t cxls_stream_used(const struct cxls_ring *r);

/* Changes whenever something was produced (edge-triggered epoll). */
static inline uint64_t cxls_stream_produced(const struct cxls_ring *r)
{
	return atomic_load_explicit(&r->hdr->prod, memory_order_acquire) +
	       atomic_load_explicit(&r->hdr->ref_prod, memory_order_acquire);
}

#endif
