/* trace.c - the ring of trace records.
 *
 * Writers claim a position with one atomic add and fill the record at
 * position % size; the record's id word (position + 1) is cleared first
 * and published last, so a reader (the watchdog stamping completions, a
 * dump running in a signal handler) skips records being written and
 * notices records overwritten under it.  Every word of a record is read
 * and written with relaxed atomics: records are shared between the
 * enqueuing thread, stream host functions and the watchdog.
 */
#include "trace.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "trace_ring.h"

#define DONE_SCAN 512 /* records the watchdog looks back through */

struct cxls_trace_ring cxls_trace_ring_g;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define WORDS (sizeof(struct cxls_trace_rec) / sizeof(uint64_t))

static uint64_t *words(struct cxls_trace_rec *r)
{
	return (uint64_t *)r;
}

void cxls_trace_rec_load(const struct cxls_trace_rec *r, struct cxls_trace_rec *out)
{
	const uint64_t *w = (const uint64_t *)r;
	uint64_t *o = words(out);

	for (size_t i = 0; i < WORDS; i++)
		o[i] = __atomic_load_n(&w[i], __ATOMIC_RELAXED);
}

/* The record at ring position pos, or NULL before the ring exists. */
static struct cxls_trace_rec *at(struct cxls_trace_ring *ring, uint64_t pos)
{
	struct cxls_trace_rec *recs = atomic_load_explicit(&ring->recs, memory_order_acquire);

	return recs ? &recs[pos & ring->mask] : NULL;
}

uint64_t cxls_trace_begin(const struct cxls_trace_rec *proto)
{
	struct cxls_trace_ring *ring = &cxls_trace_ring_g;
	struct cxls_trace_rec tmp = *proto, *r;
	uint64_t pos, *w;

	if (cxls_trace_level() == CXLS_TRACE_OFF)
		return 0;
	pos = atomic_fetch_add_explicit(&ring->head, 1, memory_order_relaxed);
	r = at(ring, pos);
	if (!r)
		return 0;
	w = words(r);
	__atomic_store_n(&r->id, 0, __ATOMIC_RELAXED);
	atomic_thread_fence(memory_order_release);
	memset(tmp.t, 0, sizeof(tmp.t));
	tmp.t[CXLS_TS_CALL] = mono_ns();
	tmp.id = 0;
	for (size_t i = 1; i < WORDS; i++)
		__atomic_store_n(&w[i], words(&tmp)[i], __ATOMIC_RELAXED);
	__atomic_store_n(&r->id, pos + 1, __ATOMIC_RELEASE);
	return pos + 1;
}

void cxls_trace_stamp(uint64_t handle, enum cxls_trace_stage stage)
{
	struct cxls_trace_ring *ring = &cxls_trace_ring_g;
	struct cxls_trace_rec *r;

	if (!handle || (unsigned)stage >= CXLS_TS_NUM)
		return;
	r = at(ring, handle - 1);
	if (r && __atomic_load_n(&r->id, __ATOMIC_ACQUIRE) == handle)
		__atomic_store_n(&r->t[stage], mono_ns(), __ATOMIC_RELAXED);
}

void cxls_trace_done(uint64_t comm, uint32_t done)
{
	struct cxls_trace_ring *ring = &cxls_trace_ring_g;
	uint64_t head, now, n;

	if (!at(ring, 0))
		return;
	head = atomic_load_explicit(&ring->head, memory_order_acquire);
	n = head < DONE_SCAN ? head : DONE_SCAN;
	if (n > ring->mask + 1)
		n = ring->mask + 1;
	now = mono_ns();
	for (uint64_t pos = head - n; pos < head; pos++) {
		struct cxls_trace_rec *r = at(ring, pos);
		uint32_t seq;

		if (__atomic_load_n(&r->id, __ATOMIC_ACQUIRE) != pos + 1 ||
		    __atomic_load_n(&r->comm, __ATOMIC_RELAXED) != comm)
			continue;
		seq = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);
		/* sequence order with wrap-around, like the doorbells */
		if ((int32_t)(done - seq) < 0 || __atomic_load_n(&r->t[CXLS_TS_DONE], __ATOMIC_RELAXED))
			continue;
		__atomic_store_n(&r->t[CXLS_TS_DONE], now, __ATOMIC_RELAXED);
	}
}

/* Anonymous memory, not malloc: a dump from a signal handler must not
 * depend on the allocator's state. */
int cxls_trace_ring_alloc(struct cxls_trace_ring *ring, uint32_t records)
{
	uint64_t n = 64;
	void *p;

	while (n < records && n < (1u << 20))
		n <<= 1;
	p = mmap(NULL, n * sizeof(struct cxls_trace_rec), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	ring->mask = n - 1;
	atomic_store_explicit(&ring->recs, p, memory_order_release);
	return 0;
}
