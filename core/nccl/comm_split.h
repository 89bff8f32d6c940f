/* comm_split.h - child communicators of a pool communicator. */
#ifndef CXLSHIM_CORE_COMM_SPLIT_H
#define CXLSHIM_CORE_COMM_SPLIT_H

#include "comm.h"

/* Collective over the parent; NCCL_SPLIT_NOCOLOR ranks get *newcomm NULL.
 * Inside a group the split is queued, and the group's end publishes this
 * rank's part and finishes it (*newcomm is set then).  Nonblocking
 * outside a group: ncclInProgress at once, *newcomm set (NULL for
 * NOCOLOR), the parent in progress until the child is ready. */
ncclResult_t cxls_comm_split(struct cxls_comm *c, int color, int key, ncclComm_t *newcomm,
			     int blocking);
/* The group's end: this rank's part of split n of c, then the exchange
 * and, for a blocking child, its init joins the group's inits
 * (cxls_group_add_init); a nonblocking one returns ncclInProgress. */
void cxls_comm_split_publish(struct cxls_comm *c, uint32_t n, int color, int key);
ncclResult_t cxls_comm_split_end(struct cxls_comm *c, uint32_t n, int color, int key,
				 ncclComm_t *newcomm, int blocking);
/* A nonblocking split's child, in its init thread: the exchange that
 * gives it rank and size (0, or -1 when it failed), and at the end of the
 * init, the parent told (the job freed). */
int cxls_comm_split_place(struct cxls_comm *child);
void cxls_comm_split_job_end(struct cxls_comm *child);
/* Called by the surviving ranks only; `exclude` lists the others, at
 * least one (ncclInvalidArgument otherwise, as NCCL 2.28). */
ncclResult_t cxls_comm_shrink(struct cxls_comm *c, const int *exclude, int nexclude,
			      ncclComm_t *newcomm, int blocking, int abort_parent);

#endif
