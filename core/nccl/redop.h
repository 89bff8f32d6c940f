/* redop.h - NCCL reduction operators on a pool communicator.
 *
 * Built-in operators map to cxls_redop directly (ncclAvg: a sum
 * pre-multiplied by 1/nranks for floating types, a sum divided by nranks
 * for integers, as NCCL does).  ncclRedOpCreatePreMulSum hands out
 * operator values from ncclNumOps up, valid on the communicator that made
 * them (another refuses them) and for their datatype, until
 * ncclRedOpDestroy; collectives already enqueued keep the scalar they were
 * given.
 */
#ifndef CXLSHIM_CORE_REDOP_H
#define CXLSHIM_CORE_REDOP_H

#include "comm.h"
#include "arith.h"

ncclResult_t cxls_redop_resolve(struct cxls_comm *c, ncclRedOp_t op, ncclDataType_t t,
				struct cxls_redop *out);
ncclResult_t cxls_redop_create_premulsum(struct cxls_comm *c, ncclRedOp_t *op, void *scalar,
					 ncclDataType_t t, ncclScalarResidence_t res);
ncclResult_t cxls_redop_destroy(struct cxls_comm *c, ncclRedOp_t op);
/* c's live user operator `op`, or NULL (built-in, another's, destroyed). */
struct cxls_user_op *cxls_redop_user(struct cxls_comm *c, ncclRedOp_t op);

#endif
