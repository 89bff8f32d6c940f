/* trace_format.h - the records the shim keeps of every pooled collective,
 * in memory and in the files `cxlshim trace` reads.
 *
 * A trace file is one header followed by `nrec` records, oldest first,
 * written with plain write(2) so that a fatal-signal handler can produce
 * it.  Host byte order; a reader checks magic, version and rec_size and
 * refuses anything else.  Times are CLOCK_MONOTONIC nanoseconds of the
 * writing host; mono_ns/real_ns, sampled together at dump time, map them
 * to wall-clock time so that files of several hosts line up.
 */
#ifndef CXLSHIM_CORE_TRACE_FORMAT_H
#define CXLSHIM_CORE_TRACE_FORMAT_H

#include <stdint.h>

#define CXLS_TRACE_MAGIC 0x31435254534c5843ull /* "CXLSTRC1" */
#define CXLS_TRACE_VERSION 1u

/* Stage time stamps of one operation; 0 = not recorded.  ENQUEUED is
 * taken on the host when the call returns; START, PUBLISHED and FETCHED
 * by host functions on the streams (trace level "stages" only); DONE by a
 * host function after the op's done doorbell (level "stages") or, at
 * level "ops", by the watchdog when it sees that doorbell move (within a
 * watchdog tick, 10 ms). */
enum cxls_trace_stage {
	CXLS_TS_CALL = 0,  /* the collective was called */
	CXLS_TS_ENQUEUED,  /* every copy and doorbell enqueued; call returns */
	CXLS_TS_START,     /* the streams reached the op */
	CXLS_TS_PUBLISHED, /* write stream: last chunk copied in and rung */
	CXLS_TS_FETCHED,   /* read stream: last peer chunk waited for, copied
			    * out (and reduced) and acknowledged */
	CXLS_TS_DONE,      /* done doorbell rung: the op is complete */
	CXLS_TS_NUM
};

struct cxls_trace_rec {
	uint64_t id;        /* ring position + 1; 0 while being written */
	uint64_t comm;      /* hash of the communicator key: equal on every rank */
	uint32_t seq;       /* op number on the communicator, 1-based */
	uint32_t kind;      /* enum cxls_op_kind (pool_format.h) */
	uint32_t rank;
	uint32_t nranks;    /* the peer set: every rank of the communicator */
	int32_t root;       /* -1 without a root */
	uint32_t type;      /* ncclDataType_t */
	uint32_t redop;     /* ncclRedOp_t; ncclNumOps for PreMulSum */
	uint32_t slot;      /* communicator record in the pool */
	uint64_t count;     /* elements, as passed to the call */
	uint64_t bytes;     /* bytes of one rank's slice */
	uint32_t rounds;    /* doorbell rounds */
	uint32_t flags;     /* CXLS_TRACE_F_* */
	uint32_t tid;       /* thread that enqueued the op */
	uint32_t pad;
	uint64_t t[CXLS_TS_NUM];
};

_Static_assert(sizeof(struct cxls_trace_rec) == 128, "trace record size is part of the format");

#define CXLS_TRACE_F_CAPTURED 1u /* enqueued into a CUDA graph capture */

enum cxls_trace_reason {
	CXLS_TRACE_AT_EXIT = 1,
	CXLS_TRACE_ON_SIGNAL = 2, /* trace.signal: on demand, the job goes on */
	CXLS_TRACE_ON_FATAL = 3,  /* a fatal signal; `signo` says which */
	CXLS_TRACE_ON_CALL = 4,   /* cxls_trace_dump() */
};

struct cxls_trace_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t rec_size;
	uint64_t nrec;      /* records that follow */
	uint64_t dropped;   /* older records overwritten in the ring */
	uint64_t mono_ns;   /* CLOCK_MONOTONIC at dump */
	uint64_t real_ns;   /* CLOCK_REALTIME at the same moment */
	uint32_t pid;
	uint32_t reason;    /* enum cxls_trace_reason */
	int32_t signo;
	uint32_t level;     /* trace level the records were taken at */
	char host[64];
};

_Static_assert(sizeof(struct cxls_trace_hdr) == 128, "trace header size is part of the format");

#endif
