/* futex.h - sleeping on a word of the pool, and the spin hint (also the
 * socket rings').
 *
 * Shared (not FUTEX_PRIVATE) futexes work across processes mapping the
 * same file; a wake from another host's kernel cannot reach us, so every
 * sleep is bounded by its caller.
 */
#ifndef CXLSHIM_CORE_FUTEX_H
#define CXLSHIM_CORE_FUTEX_H

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline void cxls_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

static inline void cxls_futex_wait(_Atomic uint32_t *addr, uint32_t val, long ns)
{
	struct timespec ts = { ns / 1000000000L, ns % 1000000000L };

	syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static inline void cxls_futex_wake(_Atomic uint32_t *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

#endif
