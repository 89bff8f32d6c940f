/* trace_ring.h - the ring's state, shared by trace.c (recording) and
 * trace_dump.c (setup and writing).  Not for use outside core/trace. */
#ifndef CXLSHIM_CORE_TRACE_RING_H
#define CXLSHIM_CORE_TRACE_RING_H

#include <stdatomic.h>
#include <stdint.h>

#include "trace_format.h"

struct cxls_trace_ring {
	/* NULL until set up, or when off; published with release order,
	 * since stream host functions and signal handlers read it without
	 * taking part in the setup */
	struct cxls_trace_rec *_Atomic recs;
	uint64_t mask;               /* records - 1 (a power of two) */
	_Atomic uint64_t head;       /* next position to claim */
	uint64_t first;              /* first position of this process (fork) */
	int level;
};

/* One ring per process: the trace is the process's, like its log. */
extern struct cxls_trace_ring cxls_trace_ring_g;

int cxls_trace_ring_alloc(struct cxls_trace_ring *ring, uint32_t records);
/* A consistent copy of one record's words. */
void cxls_trace_rec_load(const struct cxls_trace_rec *r, struct cxls_trace_rec *out);

#endif
