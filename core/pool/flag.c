/* flag.c - set, wait for and fail slot flags from the CPU. */
#include "flag.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "coherence.h"
#include "futex.h"

/* Unlike a doorbell's line, a flag line has two writers, the writer and
 * the reader of its slots (a channel's sender and receiver, a captured
 * collective's slot owner and one reader): a slot's state is written by
 * whichever end holds the slot (the hand-off keeps their writes apart),
 * other slots' by the other end meanwhile, the busy marks by one end
 * each.  Without
 * coherence a store to a cached line followed by a write-back writes the
 * whole line, and could put back a word the other end wrote meanwhile; a
 * non-temporal store writes those four bytes alone. */
static void store_word(_Atomic uint32_t *w, uint32_t v, int flush)
{
#if defined(__x86_64__) || defined(__i386__)
	if (flush) {
		_mm_sfence();
		_mm_stream_si32((int *)(uintptr_t)w, (int)v);
		_mm_sfence();
		return;
	}
#endif
	atomic_store_explicit(w, v, memory_order_release);
	cxls_publish(flush, w, sizeof(*w));
}

struct flag_wait {
	struct cxls_flag *f;
	uint32_t state;
	int flush;
};

/* 1 when the flag holds the state or failed; *seen: the state word read. */
static int holds(void *arg, uint32_t *seen)
{
	struct flag_wait *fw = arg;

	cxls_refresh(fw->flush, fw->f, sizeof(*fw->f));
	*seen = atomic_load_explicit(&fw->f->state, memory_order_acquire);
	return (*seen & fw->state) || atomic_load_explicit(&fw->f->failed, memory_order_acquire);
}

void cxls_flag_set_word(_Atomic uint32_t *w, uint32_t v, int flush)
{
	store_word(w, v, flush);
	if (!flush)
		cxls_futex_wake(w);
}

/* Sleeps on the state word: a failure wakes it too (cxls_flag_fail). */
void cxls_flag_wait(struct cxls_flag *f, uint32_t state, const struct cxls_wait_cfg *w)
{
	struct flag_wait fw = { f, state, w->flush };

	cxls_wait_until(&f->state, holds, &fw, w);
}

void cxls_flag_fail(struct cxls_flag *f, int flush)
{
	store_word(&f->failed, 0xffffffffu, flush);
	/* for a device that waits on the state alone: every state at once,
	 * until a stream writes it again (cxls_comm_unblock repeats) */
	store_word(&f->state, CXLS_FLAG_FULL | CXLS_FLAG_EMPTY, flush);
	/* a device's (or the emulation's) 64-bit wait sleeps on the low word */
	cxls_futex_wake(&f->state);
}
