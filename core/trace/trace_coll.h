/* trace_coll.h - what the collective path calls to trace an op: one call
 * when it is enqueued and two at its end (coll/common.c). */
#ifndef CXLSHIM_CORE_TRACE_COLL_H
#define CXLSHIM_CORE_TRACE_COLL_H

#include <stdint.h>

struct cxls_op;
struct cxls_call;
struct cxls_comm;

/* After the op's streams forked: opens its record (op->trace). */
void cxls_trace_op_begin(struct cxls_op *op, const struct cxls_call *call);
/* Before the work streams join back: stage stamps on them (level stages). */
void cxls_trace_op_streams(struct cxls_op *op);
/* After everything is enqueued: stamps ENQUEUED, and DONE in stream order
 * (level stages). */
void cxls_trace_op_end(struct cxls_op *op);
/* The communicator's id in trace records (a hash of its key). */
uint64_t cxls_trace_comm_id(const struct cxls_comm *c);

#endif
