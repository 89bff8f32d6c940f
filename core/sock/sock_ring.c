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
}

size_t cxls_iov_total(const struct iovec *iov, int cnt)
{
	size_t n = 0;

	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

void cxls_iovc_copy(struct cxls_iovc *c, uint8_t *mem, size_t n, int to_iov)
{
	while (n && c->idx < c->cnt) {
		const struct iovec *v = &c->iov[c->idx];
		size_t k = v->iov_len - c->off;

		if (k > n)
			k = n;
		if (to_iov)
			memcpy((uint8_t *)v->iov_base + c->off, mem, k);
		else
			memcpy(mem, (const uint8_t *)v->iov_base + c->off, k);
		mem += k;
		n -= k;
		c->off += k;
		if (c->off == v->iov_len) {
			c->idx++;
			c->off = 0;
		}
	}
}

int64_t cxls_ring_used(const struct cxls_ring *r)
{
	uint64_t prod;
	uint64_t cons;

	cxls_ring_fresh(r);
	prod = atomic_load_explicit(&r->hdr->prod, memory_order_acquire);
	cons = atomic_load_explicit(&r->hdr->cons, memory_order_acquire);
	return prod - cons <= r->cap ? (int64_t)(prod - cons) : -1;
}

int64_t cxls_ring_free(const struct cxls_ring *r)
{
	int64_t used = cxls_ring_used(r);

	return used < 0 ? -1 : (int64_t)r->cap - used;
}

void cxls_ring_data_lines(const struct cxls_ring *r, uint64_t pos, size_t n)
{
	uint64_t at = pos & (r->cap - 1);
	size_t first = n < r->cap - at ? n : (size_t)(r->cap - at);

	if (!r->flush || !n)
		return;
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
