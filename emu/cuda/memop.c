/* memop.c - stream memory operations: wait on / write to a 32/64-bit word.
 *
 * The word usually lives in a MAP_SHARED mapping that several processes use
 * as their "device" memory, written by another process's worker or by plain
 * CPU stores. So waits use SHARED futexes (keyed on the physical page, not on
 * this process's mm) and never trust a wake-up to arrive: each sleep is
 * bounded and the condition re-checked, so a writer that does not issue
 * FUTEX_WAKE still lets the waiter progress within CUDAEMU_SLICE_MS.
 *
 * Ordering: the writer uses a seq_cst exchange, so everything the stream did
 * before (copies, memsets on the same worker thread) is visible before the
 * flag; the waiter loads with acquire, so what the stream does after the
 * wait sees what the writer published before its store.
 */
#include "emu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static long futex_bits(void *addr, int op, uint32_t val,
		       const struct timespec *timeout, uint32_t bits)
{
	return syscall(SYS_futex, addr, op, val, timeout, NULL, bits);
}

static uint64_t load_word(void *addr, bool is64)
{
	if (is64)
		return __atomic_load_n((uint64_t *)addr, __ATOMIC_ACQUIRE);
	return __atomic_load_n((uint32_t *)addr, __ATOMIC_ACQUIRE);
}

/* The four CUstreamWaitValue_flags conditions. GEQ is a cyclic comparison:
 * (int32_t)(cur - value) >= 0, so counters may wrap around. */
static bool satisfied(uint64_t cur, uint64_t value, unsigned cond, bool is64)
{
	uint64_t mask = is64 ? UINT64_MAX : UINT32_MAX;

	cur &= mask;
	value &= mask;
	switch (cond) {
	case CU_STREAM_WAIT_VALUE_EQ:
		return cur == value;
	case CU_STREAM_WAIT_VALUE_AND:
		return (cur & value) != 0;
	case CU_STREAM_WAIT_VALUE_NOR:
		return (~(cur | value) & mask) != 0;
	default:
		if (is64)
			return (int64_t)(cur - value) >= 0;
		return (int32_t)(uint32_t)(cur - value) >= 0;
	}
}

/* Waiters sleep on one bit of a FUTEX bitset: bit (value mod 32) of the
 * value they wait for (EQ and GEQ), or every bit (AND, NOR).  A writer that
 * moves the word forward by d < 32 wakes only the bits of the values it
 * passed, old + 1 .. new: a 1-to-N doorbell (a root publishing round after
 * round for its receivers in turn) then wakes the one receiver whose round
 * came instead of all of them, each of which would cost the writer's core a
 * wake-up and a preemption for nothing.  Any other change wakes everyone. */
static uint32_t wait_bit(uint64_t value, unsigned cond)
{
	if (cond == CU_STREAM_WAIT_VALUE_AND || cond == CU_STREAM_WAIT_VALUE_NOR)
		return FUTEX_BITSET_MATCH_ANY;
	return 1u << (value & 31);
}

static uint32_t passed_bits(uint64_t old, uint64_t value, bool is64)
{
	uint64_t d = is64 ? value - old : (uint32_t)((uint32_t)value - (uint32_t)old);
	unsigned from = (unsigned)((old + 1) & 31);
	uint32_t run;

	if (d == 0 || d >= 32)
		return d ? FUTEX_BITSET_MATCH_ANY : 0;
	run = (1u << d) - 1;
	return from ? run << from | run >> (32 - from) : run;
}

void emu_memop_write(void *addr, uint64_t value, bool is64)
{
	uint64_t old;
	uint32_t bits;

	if (is64)
		old = __atomic_exchange_n((uint64_t *)addr, value, __ATOMIC_SEQ_CST);
	else
		old = __atomic_exchange_n((uint32_t *)addr, (uint32_t)value,
					  __ATOMIC_SEQ_CST);
	/* An unchanged word changed no waiter's condition.  A 64-bit waiter
	 * sleeps on the low word, which on little-endian hosts is at addr. */
	bits = passed_bits(old, value, is64);
	if (bits && futex_bits(addr, FUTEX_WAKE_BITSET, INT_MAX, NULL, bits) > 0 &&
	    emu_stats_self)
		emu_stats_self->wakes++;
}

void emu_memop_wait(void *addr, uint64_t value, unsigned flags, bool is64)
{
	unsigned cond = flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH;
	uint64_t spin_end = emu_now_ns() + emu_config.spin_us * 1000ull;
	uint64_t cur;
	struct emu_stats *st = emu_stats_self;

	if (satisfied(load_word(addr, is64), value, cond, is64)) {
		if (st)
			st->waits_ready++;
		goto done;
	}
	/* Short waits are common (the peer is a few µs behind): spin first,
	 * a futex round trip costs more than that. */
	do {
		if (satisfied(load_word(addr, is64), value, cond, is64)) {
			if (st)
				st->waits_spun++;
			goto done;
		}
		emu_cpu_relax();
	} while (emu_now_ns() < spin_end);

	if (emu_config.yield_us) {
		uint64_t yield_end = emu_now_ns() + emu_config.yield_us * 1000ull;

		do {
			sched_yield();
			if (satisfied(load_word(addr, is64), value, cond, is64)) {
				if (st)
					st->waits_yielded++;
				goto done;
			}
		} while (emu_now_ns() < yield_end);
	}

	for (;;) {
		/* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline */
		struct timespec slice = emu_ns_to_ts(emu_now_ns() +
						     emu_config.slice_ms * 1000000ull);

		cur = load_word(addr, is64);
		if (satisfied(cur, value, cond, is64))
			break;
		if (st)
			st->sleeps++;
		/* Returns at once (EAGAIN) if the low word changed since the
		 * load: no wake-up can be lost between check and sleep. */
		if (futex_bits(addr, FUTEX_WAIT_BITSET, (uint32_t)cur, &slice,
			       wait_bit(value, cond)) < 0 &&
		    errno != ETIMEDOUT && errno != EAGAIN && errno != EINTR)
			emu_cpu_relax();	/* e.g. ENOSYS: poll */
	}
done:
	if (flags & CU_STREAM_WAIT_VALUE_FLUSH)
		atomic_thread_fence(memory_order_seq_cst);
}

/* ---- API ---- */

static CUresult check_memop(CUdeviceptr addr, bool is64)
{
	size_t size = is64 ? 8 : 4;

	if (!addr || (addr & (size - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	return emu_mem_check_access(addr, size);
}

static bool wait_flags_ok(unsigned int flags)
{
	return (flags & ~(3u | CU_STREAM_WAIT_VALUE_FLUSH)) == 0;
}

static bool write_flags_ok(unsigned int flags)
{
	return (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) == 0;
}

/* One wait on or write of a 32- or 64-bit word, as a single call or a
 * batch entry gives it.  Only the flags (and the width, under
 * CUDAEMU_NO_MEMOPS64) are checked here: the address is checked
 * (check_memop) once the stream is taken, so that a bad stream or an
 * uninitialised driver is reported first. */
static CUresult memop_fill(struct emu_op *op, enum emu_op_kind kind,
			   CUdeviceptr addr, uint64_t value,
			   unsigned int flags, bool is64)
{
	bool ok = kind == EMU_OP_WAIT_VALUE ? wait_flags_ok(flags) :
					      write_flags_ok(flags);

	if (is64 && emu_config.no_memops64)
		return CUDA_ERROR_NOT_SUPPORTED;
	op->kind = kind;
	op->u.memop.addr = (void *)(uintptr_t)addr;
	op->u.memop.value = value;
	op->u.memop.flags = flags;
	op->u.memop.is64 = is64;
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult submit_memop(CUstream stream, enum emu_op_kind kind,
			     CUdeviceptr addr, uint64_t value,
			     unsigned int flags, bool is64)
{
	struct emu_op op = { 0 };
	struct CUstream_st *s;
	CUresult res = memop_fill(&op, kind, addr, value, flags, is64);

	if (res != CUDA_SUCCESS)
		return res;
	res = emu_stream_get(stream, &s);
	if (res != CUDA_SUCCESS)
		return res;
	res = check_memop(addr, is64);
	if (res == CUDA_SUCCESS)
		res = emu_stream_submit(s, &op);
	emu_stream_put(s);
	return res;
}

CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr,
				cuuint32_t value, unsigned int flags)
{
	return submit_memop(stream, EMU_OP_WAIT_VALUE, addr, value, flags,
			    false);
}

CUresult cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr addr,
				cuuint64_t value, unsigned int flags)
{
	return submit_memop(stream, EMU_OP_WAIT_VALUE, addr, value, flags,
			    true);
}

CUresult cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr,
				 cuuint32_t value, unsigned int flags)
{
	return submit_memop(stream, EMU_OP_WRITE_VALUE, addr, value, flags,
			    false);
}

CUresult cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr,
				 cuuint64_t value, unsigned int flags)
{
	return submit_memop(stream, EMU_OP_WRITE_VALUE, addr, value, flags,
			    true);
}

/* Translates one batch entry; checked before anything is submitted so a
 * bad entry leaves the stream untouched. */
static CUresult batch_entry(const CUstreamBatchMemOpParams *p,
			    struct emu_op *op)
{
	const struct CUstreamMemOpWaitValueParams_st *w = &p->waitValue;
	const struct CUstreamMemOpWriteValueParams_st *v = &p->writeValue;
	CUresult res;
	bool is64;

	memset(op, 0, sizeof(*op));
	switch (p->operation) {
	case CU_STREAM_MEM_OP_WAIT_VALUE_32:
	case CU_STREAM_MEM_OP_WAIT_VALUE_64:
		is64 = p->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64;
		res = memop_fill(op, EMU_OP_WAIT_VALUE, w->address,
				 is64 ? w->value64 : w->value, w->flags, is64);
		return res != CUDA_SUCCESS ? res : check_memop(w->address, is64);
	case CU_STREAM_MEM_OP_WRITE_VALUE_32:
	case CU_STREAM_MEM_OP_WRITE_VALUE_64:
		is64 = p->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
		res = memop_fill(op, EMU_OP_WRITE_VALUE, v->address,
				 is64 ? v->value64 : v->value, v->flags, is64);
		return res != CUDA_SUCCESS ? res : check_memop(v->address, is64);
	case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
	case CU_STREAM_MEM_OP_BARRIER:
		op->kind = EMU_OP_FENCE;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

CUresult cuStreamBatchMemOp_v2(CUstream stream, unsigned int count,
			       CUstreamBatchMemOpParams *paramArray,
			       unsigned int flags)
{
	struct CUstream_st *s;
	struct emu_op *ops = NULL;
	CUresult res = emu_stream_get(stream, &s);
	unsigned int i;

	if (res != CUDA_SUCCESS)
		return res;
	if ((count && !paramArray) || flags != 0) {
		res = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	ops = calloc(count ? count : 1, sizeof(*ops));
	if (!ops) {
		res = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	for (i = 0; i < count && res == CUDA_SUCCESS; i++)
		res = batch_entry(&paramArray[i], &ops[i]);
	/* In order, as the GPU front end would process them. */
	for (i = 0; i < count && res == CUDA_SUCCESS; i++)
		res = emu_stream_submit(s, &ops[i]);
out:
	free(ops);
	emu_stream_put(s);
	return res;
}
