/* sock_ref.c - references to pool buffers in a direction's stream. */
#include "sock_ref.h"

#include <string.h>

/* Bytes of the references queued and not yet read (entries we wrote). */
static uint64_t queued_bytes(const struct cxls_ring *r, uint64_t rc, uint64_t rp)
{
	uint64_t n = 0;

	for (uint64_t i = rc; i != rp; i++)
		n += r->refs[i % CXLS_SOCK_REFS].len;
	return n;
}

int64_t cxls_ref_put(const struct cxls_ring *r, const struct cxls_sock_bufs *b, uint64_t owner,
		     struct cxls_iovc *src, size_t want, uint64_t limit)
{
	struct cxls_sock_ring_hdr *h = r->hdr;
	uint64_t big = b->n ? b->cls[b->n - 1].size : 0, q, rp, rc;
	struct cxls_sock_ref ref;

	cxls_ring_fresh(r);
	rp = atomic_load_explicit(&h->ref_prod, memory_order_relaxed);
	rc = atomic_load_explicit(&h->ref_cons, memory_order_acquire);
	if (rp - rc > CXLS_SOCK_REFS)
		return -1;
	if (rp - rc == CXLS_SOCK_REFS)
		return 0;
	q = rp != rc ? queued_bytes(r, rc, rp) : 0;
	if (q && q + (want < big ? want : big) > limit)
		return 0;
	if (cxls_buf_get(b, owner, want, &ref))
		return 0;
	cxls_iovc_copy(src, cxls_buf_data(b, &ref), ref.len, 0);
	cxls_publish(r->flush, cxls_buf_data(b, &ref), ref.len);
	ref.pos = atomic_load_explicit(&h->prod, memory_order_relaxed);
	memcpy(&r->refs[rp % CXLS_SOCK_REFS], &ref, sizeof(ref));
	cxls_publish(r->flush, &r->refs[rp % CXLS_SOCK_REFS], sizeof(ref));
	atomic_store_explicit(&h->ref_prod, rp + 1, memory_order_release);
	cxls_ring_wb_prod(r);
	return ref.len;
}

/* The reader's place in the stream: ring cursor, oldest reference, bytes
 * of it already taken.  Published only by a read that is not a peek. */
struct rd_pos {
	uint64_t cons;
	uint64_t rc;
	uint64_t off;
};

/* Copies from the buffer of the reference at the head (which comes at
 * p->cons), or passes over its bytes (dst NULL: checked all the same);
 * bytes, or -1 when the pool's view of it is wrong. */
static int64_t take_ref(const struct cxls_sock_ref *ref, const struct cxls_sock_bufs *b,
			uint64_t owner, struct rd_pos *p, struct cxls_iovc *dst, uint64_t want,
			int peek)
{
	const uint8_t *data = cxls_buf_check(b, owner, ref);
	uint64_t k;

	if (!data || p->off >= ref->len)
		return -1;
	k = ref->len - p->off;
	if (k > want)
		k = want;
	if (dst) {
		cxls_refresh(b->flush, data + p->off, (size_t)k);
		cxls_iovc_copy(dst, (uint8_t *)data + p->off, (size_t)k, 1);
	}
	p->off += k;
	if (p->off == ref->len) {
		if (!peek)
			cxls_buf_put(b, owner, ref);
		p->rc++;
		p->off = 0;
	}
	return (int64_t)k;
}

/* k bytes of the stream went by: passed over while skip lasts, else
 * copied. */
static void went_by(uint64_t *skip, size_t *got, uint64_t k)
{
	if (*skip)
		*skip -= k;
	else
		*got += (size_t)k;
}

int64_t cxls_stream_get(const struct cxls_ring *r, const struct cxls_sock_bufs *b, uint64_t owner,
			struct cxls_iovc *dst, size_t want, int peek, uint64_t skip)
{
	struct cxls_sock_ring_hdr *h = r->hdr;
	struct rd_pos p = {
		atomic_load_explicit(&h->cons, memory_order_relaxed),
		atomic_load_explicit(&h->ref_cons, memory_order_relaxed),
		atomic_load_explicit(&h->ref_off, memory_order_relaxed),
	};
	size_t got = 0;

	while (got < want) {
		/* a piece is passed over or copied, never both */
		uint64_t prod, rp, end, n, most = skip ? skip : want - got;

		/* prod first: a reference queued before these bytes is
		 * visible in ref_prod then */
		cxls_ring_fresh(r);
		prod = atomic_load_explicit(&h->prod, memory_order_acquire);
		rp = atomic_load_explicit(&h->ref_prod, memory_order_acquire);
		end = prod;
		if (prod - p.cons > r->cap || rp - p.rc > CXLS_SOCK_REFS)
			return -1;
		if (rp != p.rc) {
			struct cxls_sock_ref ref;
			int64_t k;

			/* one copy: the peer may rewrite the pool's meanwhile */
			cxls_refresh(r->flush, &r->refs[p.rc % CXLS_SOCK_REFS], sizeof(ref));
			memcpy(&ref, &r->refs[p.rc % CXLS_SOCK_REFS], sizeof(ref));
			if (ref.pos - p.cons > prod - p.cons) { /* queued after prod was read? */
				cxls_ring_fresh(r);
				prod = atomic_load_explicit(&h->prod, memory_order_acquire);
			}
			if (ref.pos - p.cons > prod - p.cons || prod - p.cons > r->cap)
				return -1;
			if (ref.pos == p.cons) {
				k = take_ref(&ref, b, owner, &p, skip ? NULL : dst, most, peek);
				if (k < 0)
					return -1;
				went_by(&skip, &got, (uint64_t)k);
				continue;
			}
			end = ref.pos;
		} else if (p.off) {
			return -1; /* a partial read of no reference */
		}
		n = end - p.cons;
		if (n > most)
			n = most;
		if (!n)
			break;
		if (!skip) {
			cxls_ring_data_lines(r, p.cons, (size_t)n);
			cxls_ring_copy(r, dst, p.cons, (size_t)n, 1);
		}
		p.cons += n;
		went_by(&skip, &got, n);
	}
	if (!peek && got) {
		atomic_store_explicit(&h->ref_off, p.off, memory_order_relaxed);
		atomic_store_explicit(&h->ref_cons, p.rc, memory_order_release);
		atomic_store_explicit(&h->cons, p.cons, memory_order_release);
		cxls_ring_wb_cons(r);
	}
	return (int64_t)got;
}

/* The consumer's cursors first (cons last stored, so ref_cons and ref_off
 * are at least as new as the cons seen), the producer's after: those only
 * grow, so a prod equal to the cons seen means none was unread when prod
 * was loaded, and ref_prod, loaded later, was no further then either. */
int cxls_stream_empty(const struct cxls_ring *r)
{
	struct cxls_sock_ring_hdr *h = r->hdr;
	uint64_t cons, rc, off;

	cxls_ring_fresh(r);
	cons = atomic_load_explicit(&h->cons, memory_order_acquire);
	rc = atomic_load_explicit(&h->ref_cons, memory_order_relaxed);
	off = atomic_load_explicit(&h->ref_off, memory_order_relaxed);
	return !off && atomic_load_explicit(&h->prod, memory_order_acquire) == cons &&
	       atomic_load_explicit(&h->ref_prod, memory_order_acquire) == rc;
}

int64_t cxls_stream_used(const struct cxls_ring *r)
{
	int64_t used = cxls_ring_used(r), queued;
	uint64_t rp, rc, off, n = 0;

	if (used < 0)
		return -1;
	/* both reference cursors may move while we look, as the ring's */
	queued = cxls_cursor_gap(r, &r->hdr->ref_prod, &r->hdr->ref_cons, CXLS_SOCK_REFS, &rc);
	if (queued <= 0)
		return queued < 0 ? -1 : used;
	rp = rc + (uint64_t)queued;
	cxls_refresh(r->flush, r->refs, CXLS_SOCK_REFS * sizeof(*r->refs));
	for (uint64_t i = rc; i != rp; i++) {
		uint32_t len = r->refs[i % CXLS_SOCK_REFS].len;

		n += len <= CXLS_SOCK_BUF_MAX ? len : 0;
	}
	off = atomic_load_explicit(&r->hdr->ref_off, memory_order_relaxed);
	return used + (int64_t)(off < n ? n - off : 0);
}
