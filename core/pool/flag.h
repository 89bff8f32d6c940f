/* flag.h - CPU side of the slot flags of captured sends and collectives
 * (pool_format.h: struct cxls_flag): hand-offs of one staging slot
 * between its writer and a reader, EMPTY -> FULL -> EMPTY, whose values
 * do not count up, so a graph that froze them replays any number of
 * times.
 */
#ifndef CXLSHIM_CORE_FLAG_H
#define CXLSHIM_CORE_FLAG_H

#include <stdint.h>

#include "doorbell.h"

/* The 64-bit word a device waits on for `state` with
 * CU_STREAM_WAIT_VALUE_AND: that bit of the state, or any of the failure. */
static inline uint64_t cxls_flag_mask(uint32_t state)
{
	return 0xffffffff00000000ull | state;
}

/* A word of a flag line: a flag's state (the stream's writes, host
 * functions'), a busy mark. */
void cxls_flag_set_word(_Atomic uint32_t *w, uint32_t v, int flush);
/* Until the flag holds `state` or failed. */
void cxls_flag_wait(struct cxls_flag *f, uint32_t state, const struct cxls_wait_cfg *w);
/* Every wait on f passes from now on (the communicator failed); on a
 * device that waits on the state word alone, until a stream writes it
 * again. */
void cxls_flag_fail(struct cxls_flag *f, int flush);

#endif
