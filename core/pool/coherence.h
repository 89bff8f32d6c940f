/* coherence.h - making CPU stores visible in a non-coherent pool.
 *
 * coherent mode (one host, or hardware-coherent CXL): fences are enough.
 * flush mode (several hosts on a CXL memory box without cross-host
 * coherence): a writer writes its lines back before ringing a doorbell and
 * a reader drops its cached copy before reading, as CCCL's flush_doorbell()
 * does.  clflush both writes back and invalidates, so one primitive serves
 * both directions.
 */
#ifndef CXLSHIM_CORE_COHERENCE_H
#define CXLSHIM_CORE_COHERENCE_H

#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "pool_format.h"

static inline void cxls_flush_lines(const volatile void *p, size_t len)
{
#if defined(__x86_64__) || defined(__i386__)
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(CXLS_LINE - 1);
	uintptr_t end = (uintptr_t)p + len;

	_mm_mfence();
	for (; a < end; a += CXLS_LINE)
		_mm_clflush((const void *)a);
	_mm_mfence();
#else
	(void)p;
	(void)len;
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* After CPU stores to pool memory that other hosts will read. */
static inline void cxls_publish(int flush_mode, const volatile void *p, size_t len)
{
	if (flush_mode)
		cxls_flush_lines(p, len);
	else
		atomic_thread_fence(memory_order_release);
}

/* Before CPU loads of pool memory that other hosts wrote. */
static inline void cxls_refresh(int flush_mode, const volatile void *p, size_t len)
{
	if (flush_mode)
		cxls_flush_lines(p, len);
	else
		atomic_thread_fence(memory_order_acquire);
}

#endif
