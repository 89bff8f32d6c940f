/* trace.h - a per-process ring of the pooled collectives this process ran.
 *
 * On by default (trace.level = ops): one 128-byte record per collective,
 * a few relaxed stores and two clock reads, in a ring of trace.records
 * entries that overwrites the oldest.  Level "stages" also stamps when the
 * streams start the op, publish their last chunk, fetch their last chunk
 * and finish, with host functions on the streams (they cost a stream
 * round trip each: for diagnosis and timelines, not production).
 *
 * The ring is written to trace.file (%h host, %p pid) at exit, on a fatal
 * signal (those left at their default action), on trace.signal (the job
 * goes on) and on cxls_trace_dump().  File format: trace_format.h.
 */
#ifndef CXLSHIM_CORE_TRACE_H
#define CXLSHIM_CORE_TRACE_H

#include <stdint.h>

#include "trace_format.h"

enum cxls_trace_level { CXLS_TRACE_OFF = 0, CXLS_TRACE_OPS = 1, CXLS_TRACE_STAGES = 2 };

/* The level in force (sets the ring up on first use). */
int cxls_trace_level(void);

/* Starts the record of one op from `proto` (its id and t[] are ignored)
 * and stamps CXLS_TS_CALL.  Returns the record's handle, 0 when off. */
uint64_t cxls_trace_begin(const struct cxls_trace_rec *proto);
/* Stamps `stage` of the record now; a handle whose record was overwritten
 * meanwhile is ignored.  Async-signal and any-thread safe. */
void cxls_trace_stamp(uint64_t handle, enum cxls_trace_stage stage);
/* Ops 1..done of communicator `comm` are complete: stamps CXLS_TS_DONE on
 * those of its recent records that lack it (the watchdog's view). */
void cxls_trace_done(uint64_t comm, uint32_t done);

/* Writes the ring to trace.file now; 0, or -1 (no file configured, or
 * it cannot be written). */
int cxls_trace_dump(void);
/* Writes the ring to an open descriptor (async-signal-safe). */
int cxls_trace_write(int fd, enum cxls_trace_reason reason, int signo);

#endif
