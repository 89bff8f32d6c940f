/* doorbell.c - ring, wait for and poison doorbells from the CPU. */
#include "doorbell.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "coherence.h"
#include "proc_id.h"

#define POISON_STEP (1u << 30)

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Shared (not FUTEX_PRIVATE) futexes work across processes mapping the
 * same file. */
static void futex_wait(_Atomic uint32_t *addr, uint32_t val, long ns)
{
	struct timespec ts = { ns / 1000000000L, ns % 1000000000L };

	syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

uint32_t cxls_bell_read(struct cxls_bell *b, int flush)
{
	cxls_refresh(flush, &b->seq, sizeof(b->seq));
	return atomic_load_explicit(&b->seq, memory_order_acquire);
}

void cxls_bell_ring(struct cxls_bell *b, uint32_t v, int flush)
{
	atomic_store_explicit(&b->seq, v, memory_order_release);
	cxls_publish(flush, &b->seq, sizeof(b->seq));
	if (!flush)
		futex_wake(&b->seq);
}

void cxls_bell_poison(struct cxls_bell *b, int flush)
{
	atomic_fetch_add(&b->seq, POISON_STEP);
	cxls_publish(flush, &b->seq, sizeof(b->seq));
	futex_wake(&b->seq);
}

void cxls_bell_wait(struct cxls_bell *b, uint32_t v, const struct cxls_wait_cfg *w)
{
	uint64_t spin_end = cxls_now_ns() + (uint64_t)w->spin_us * 1000ull;
	long sleep_ns = 1000;
	uint32_t seq;

	for (;;) {
		seq = cxls_bell_read(b, w->flush);
		if (cxls_seq_reached(seq, v))
			return;
		if (cxls_now_ns() < spin_end) {
			cpu_relax();
			continue;
		}
		if (!w->flush) {
			/* bounded, so a ring from a host without futex access
			 * (or a lost wake) still gets noticed */
			futex_wait(&b->seq, seq, 10 * 1000000L);
			continue;
		}
		struct timespec ts = { 0, sleep_ns };
		nanosleep(&ts, NULL);
		if (sleep_ns < (long)w->sleep_max_us * 1000L)
			sleep_ns *= 2;
	}
}
