/* sock_ring.c - copy bytes through a ring, trusting no cursor. */
#include "sock_ring.h"

#include <sched.h>
#include <string.h>

#include "proc_id.h"

#define LOCK_GIVE_UP_NS (5ull * 1000000000ull)

void cxls_iovc_init(struct cxls_iovc *c, const struct iovec *iov, int cnt)
{
	c->iov = iov;
	c->cnt = cnt;
	c->idx = 0;
	c->off = 0;
	c->discard = 0;
}

/* Saturates: segments whose lengths add up past SIZE_MAX (the shim
 * refuses what the kernel refuses, but lengths it accepts may still add
 * up that far) ask for everything, never for the wrapped remainder (a
 * total of 0 reads as a call asking for nothing: EOF). */
size_t cxls_iov_total(const struct iovec *iov, int cnt)
{
	size_t n = 0;

	for (int i = 0; i < cnt; i++)
		n = iov[i].iov_len > SIZE_MAX - n ? SIZE_MAX : n + iov[i].iov_len;
	return n;
}

void cxls_iovc_copy(struct cxls_iovc *c, uint8_t *mem, size_t n, int to_iov)
{
	while (n && c->idx < c->cnt) {
		const struct iovec *v = &c->iov[c->idx];
		size_t k = v->iov_len - c->off;

		if (k > n)
			k = n;
		if (!to_iov)
			memcpy(mem, (const uint8_t *)v->iov_base + c->off, k);
		else if (!c->discard)
			memcpy((uint8_t *)v->iov_base + c->off, mem, k);
		mem += k;
		n -= k;
		c->off += k;
		if (c->off == v->iov_len) {
			c->idx++;
			c->off = 0;
		}
	}
}

static uint64_t fresh_load(const struct cxls_ring *r, _Atomic uint64_t *v)
{
	cxls_refresh(r->flush, v, sizeof(*v));
	return atomic_load_explicit(v, memory_order_acquire);
}

/* The two cursors are loaded one after the other, and a caller that moves
 * neither (poll and epoll, a writer thread looking at the receive ring, a
 * reader thread at the send ring) sees both move meanwhile: the other
 * thread of its end produces or consumes, the peer the other way round.
 * Both only grow, and cons never passes prod.  Loaded prod first, cons
 * can only have grown by its load: a gap in range holds (it is at most
 * the one of the instant prod was loaded), one too large was too large
 * then already (corrupt).  But cons may have passed that prod meanwhile
 * (issue 5: a reader thread's poll took a healthy connection for a
 * corrupt one and reset it): prod loaded again now is at least that cons,
 * or the pool is corrupt.  That gap holds, unless prod ran more than max
 * ahead between the two loads (the consumer freed room and the producer
 * filled it): any level was possible then, and a full one is said. */
int64_t cxls_cursor_gap(const struct cxls_ring *r, _Atomic uint64_t *prod,
			_Atomic uint64_t *cons, uint64_t max, uint64_t *cons_at)
{
	uint64_t p = atomic_load_explicit(prod, memory_order_acquire);
	uint64_t c = atomic_load_explicit(cons, memory_order_acquire);

	*cons_at = c;
	if (p - c <= max)
		return (int64_t)(p - c);
	if ((int64_t)(p - c) > 0)
		return -1;
	p = fresh_load(r, prod);
	if ((int64_t)(p - c) < 0)
		return -1;
	return (int64_t)(p - c <= max ? p - c : max);
}

int64_t cxls_ring_used(const struct cxls_ring *r)
{
	uint64_t cons;

	cxls_ring_fresh(r);
	return cxls_cursor_gap(r, &r->hdr->prod, &r->hdr->cons, r->cap, &cons);
}

int64_t cxls_ring_free(const struct cxls_ring *r)
{
	int64_t used = cxls_ring_used(r);

	return used < 0 ? -1 : (int64_t)r->cap - used;
}

void cxls_ring_flush_data(const struct cxls_ring *r, uint64_t pos, size_t n)
{
	uint64_t at = pos & (r->cap - 1);
	size_t first = n < r->cap - at ? n : (size_t)(r->cap - at);

	cxls_flush_lines(r->data + at, first);
	if (n > first)
		cxls_flush_lines(r->data, n - first);
}

void cxls_ring_copy(const struct cxls_ring *r, struct cxls_iovc *c, uint64_t pos, size_t n,
		    int to_iov)
{
	uint64_t at = pos & (r->cap - 1);
	size_t first = n < r->cap - at ? n : (size_t)(r->cap - at);

	cxls_iovc_copy(c, r->data + at, first, to_iov);
	if (n > first)
		cxls_iovc_copy(c, r->data, n - first, to_iov);
}

int64_t cxls_ring_put(const struct cxls_ring *r, struct cxls_iovc *src, size_t want)
{
	uint64_t prod, cons, n;

	cxls_ring_fresh(r);
	prod = atomic_load_explicit(&r->hdr->prod, memory_order_relaxed);
	cons = atomic_load_explicit(&r->hdr->cons, memory_order_acquire);
	if (prod - cons > r->cap)
		return -1;
	n = r->cap - (prod - cons);
	if (n > want)
		n = want;
	cxls_ring_copy(r, src, prod, (size_t)n, 0);
	if (n) {
		cxls_ring_data_lines(r, prod, (size_t)n);
		atomic_store_explicit(&r->hdr->prod, prod + n, memory_order_release);
		cxls_ring_wb_prod(r);
	}
	return (int64_t)n;
}

int cxls_ring_lock(_Atomic uint32_t *lock)
{
	uint64_t start = 0;
	unsigned spins = 0;

	while (atomic_exchange_explicit(lock, 1, memory_order_acquire)) {
		if (++spins < 128) {
			cxls_cpu_relax();
			continue;
		}
		if (!start)
			start = cxls_now_ns();
		else if (cxls_now_ns() - start > LOCK_GIVE_UP_NS)
			return -1; /* the caller says what it gives up */
		sched_yield();
	}
	return 0;
}

void cxls_ring_unlock(_Atomic uint32_t *lock)
{
	atomic_store_explicit(lock, 0, memory_order_release);
}
