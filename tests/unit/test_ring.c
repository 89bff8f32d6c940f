/* test_ring.c - a ring's fill level as a thread that moves neither cursor
 * sees it (poll, epoll, a writer thread looking at the receive ring).
 *
 * Both cursors move while it looks: its own end's other thread produces
 * (or consumes) and the peer consumes (or produces).  Read one after the
 * other, the consumer cursor can pass the producer cursor read a moment
 * earlier; the level must still come out between 0 and the ring size, not
 * as the "corrupt" that resets the connection (issue 5: the duplex part of
 * `sock_check sleepers` failed every read and write at once on a flush
 * pool, where the cache-line flushes between the two loads widen the
 * window).  Genuinely impossible cursors must still read as corrupt.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sock_ref.h"
#include "sock_ring.h"
#include "../common/check.h"

#define CAP 16384u
#define RUN_NS (300ull * 1000000ull)

struct race {
	struct cxls_ring *ring;
	_Atomic int stop;
	uint64_t moves;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Producer and consumer in one: a few bytes and a reference (of no bytes)
 * in, then all of them out, so that each consumer cursor keeps reaching
 * the producer cursor of a moment ago. */
static void *mover(void *arg)
{
	struct race *x = arg;
	struct cxls_sock_ring_hdr *h = x->ring->hdr;
	uint64_t pos = atomic_load(&h->prod), ref = atomic_load(&h->ref_prod);

	while (!atomic_load_explicit(&x->stop, memory_order_relaxed)) {
		pos += 1 + (x->moves & 63);
		ref++;
		atomic_store_explicit(&h->ref_prod, ref, memory_order_release);
		atomic_store_explicit(&h->prod, pos, memory_order_release);
		atomic_store_explicit(&h->ref_cons, ref, memory_order_release);
		atomic_store_explicit(&h->cons, pos, memory_order_release);
		x->moves++;
	}
	return NULL;
}

static struct cxls_ring *ring_new(int flush)
{
	struct cxls_ring *r = calloc(1, sizeof(*r));

	r->hdr = aligned_alloc(CXLS_LINE, sizeof(*r->hdr));
	memset(r->hdr, 0, sizeof(*r->hdr));
	r->data = aligned_alloc(CXLS_LINE, CAP);
	r->refs = aligned_alloc(CXLS_LINE, CXLS_SOCK_REFS * sizeof(*r->refs));
	memset(r->refs, 0, CXLS_SOCK_REFS * sizeof(*r->refs));
	r->cap = CAP;
	r->flush = flush;
	return r;
}

static void ring_free(struct cxls_ring *r)
{
	free(r->hdr);
	free(r->data);
	free(r->refs);
	free(r);
}

/* Looks for RUN_NS while the cursors move; how many looks said corrupt. */
static void race(int flush)
{
	struct race x = { .ring = ring_new(flush) };
	uint64_t looks = 0, bad = 0, end = now_ns() + RUN_NS;
	pthread_t t;

	pthread_create(&t, NULL, mover, &x);
	while (now_ns() < end) {
		for (int i = 0; i < 256; i++) {
			int64_t u = cxls_ring_used(x.ring), f = cxls_ring_free(x.ring);
			int64_t s = cxls_stream_used(x.ring);

			bad += (u < 0 || u > CAP) + (f < 0 || f > CAP) + (s < 0 || s > CAP);
			looks += 3;
		}
	}
	atomic_store(&x.stop, 1);
	pthread_join(t, NULL);
	printf("%s: %llu looks while the cursors moved %llu times: %llu corrupt\n",
	       flush ? "flush" : "coherent", (unsigned long long)looks,
	       (unsigned long long)x.moves, (unsigned long long)bad);
	CHECK(x.moves > 1000 && looks > 1000, "both threads ran (%llu moves, %llu looks)",
	      (unsigned long long)x.moves, (unsigned long long)looks);
	CHECK(bad == 0, "%s: a moving ring never reads as corrupt: %llu of %llu looks did",
	      flush ? "flush" : "coherent", (unsigned long long)bad, (unsigned long long)looks);
	ring_free(x.ring);
}

/* Cursors that no instant ever had are still caught. */
static void corrupt(void)
{
	struct cxls_ring *r = ring_new(0);

	atomic_store(&r->hdr->prod, 100);
	atomic_store(&r->hdr->cons, 101);
	CHECK(cxls_ring_used(r) == -1 && cxls_ring_free(r) == -1 && cxls_stream_used(r) == -1,
	      "cons past prod reads as corrupt");
	atomic_store(&r->hdr->prod, 100 + CAP + 1);
	atomic_store(&r->hdr->cons, 100);
	CHECK(cxls_ring_used(r) == -1 && cxls_ring_free(r) == -1,
	      "more than the ring size between the cursors reads as corrupt");
	atomic_store(&r->hdr->prod, 100 + CAP);
	CHECK(cxls_ring_used(r) == CAP && cxls_ring_free(r) == 0, "a full ring is full");
	atomic_store(&r->hdr->ref_prod, 5);
	atomic_store(&r->hdr->ref_cons, 6);
	CHECK(cxls_stream_used(r) == -1, "ref_cons past ref_prod reads as corrupt");
	atomic_store(&r->hdr->ref_prod, 6 + CXLS_SOCK_REFS + 1);
	CHECK(cxls_stream_used(r) == -1, "more references than the queue holds reads as corrupt");
	ring_free(r);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	corrupt();
	race(0);
	race(1);
	return CHECK_SUMMARY();
}
