/* seq_record.h - a record in the pool that one rank rewrites and others
 * read without a lock, stamped with the sequence number it holds (a
 * seqlock whose "odd" state is 0).
 *
 * Writer: seq_record_open(), store the fields (relaxed), then
 * seq_record_close(seq).  Reader: seq_record_begin(want) tells whether the
 * record holds `want`; after loading the fields, seq_record_end(want) says
 * whether they were read whole.  Used by the operation descriptors
 * (op_desc.c, and the tools' snapshot.c), and the send/receive message
 * sizes (p2p_match.c).
 */
#ifndef CXLSHIM_CORE_SEQ_RECORD_H
#define CXLSHIM_CORE_SEQ_RECORD_H

#include <stdatomic.h>
#include <stdint.h>

static inline void seq_record_open(_Atomic uint32_t *seq)
{
	atomic_store(seq, 0);
	atomic_thread_fence(memory_order_release);
}

static inline void seq_record_close(_Atomic uint32_t *seq, uint32_t v)
{
	atomic_store_explicit(seq, v, memory_order_release);
}

/* 1: holds `want`, read the fields; 0: not written yet (or being
 * rewritten); -1: overwritten by a later one (the writer is far ahead). */
static inline int seq_record_begin(const _Atomic uint32_t *seq, uint32_t want)
{
	uint32_t s = atomic_load_explicit(seq, memory_order_acquire);

	if (s == want)
		return 1;
	return s && s - want < (1u << 31) ? -1 : 0;
}

/* 1 when the fields just loaded belong to `want` and nothing tore them. */
static inline int seq_record_end(const _Atomic uint32_t *seq, uint32_t want)
{
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(seq, memory_order_relaxed) == want;
}

#endif
