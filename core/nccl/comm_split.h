/* comm_split.h - child communicators of a pool communicator. */
#ifndef CXLSHIM_CORE_COMM_SPLIT_H
#define CXLSHIM_CORE_COMM_SPLIT_H

#include "comm.h"

/* Collective over the parent; NCCL_SPLIT_NOCOLOR ranks get *newcomm NULL.
 * blocking: the child's mode (its config's, or the parent's).  Inside a
 * group the split is queued, and the group's end finishes it (*newcomm
 * is set then).  A nonblocking parent's split runs in the background
 * (cxls_comm_split_async); meanwhile the parent is busy
 * (cxls_comm_split_busy): it reports ncclInProgress and refuses splits. */
ncclResult_t cxls_comm_split(struct cxls_comm *c, int color, int key, ncclComm_t *newcomm,
			     int blocking);
int cxls_comm_split_busy(struct cxls_comm *c);
/* Split n of a nonblocking parent, from the call or its group's end:
 * ncclInProgress, *newcomm set at once (NULL for NOCOLOR). */
ncclResult_t cxls_comm_split_async(struct cxls_comm *c, uint32_t n, int color, int key,
				   ncclComm_t *newcomm, int blocking);
/* A blocking parent's split at the group's end: this rank's part of
 * split n of c, then the exchange and, for a blocking child, its init
 * joins the group's inits (cxls_group_add_init); a nonblocking one
 * returns ncclInProgress. */
void cxls_comm_split_publish(struct cxls_comm *c, uint32_t n, int color, int key);
ncclResult_t cxls_comm_split_end(struct cxls_comm *c, uint32_t n, int color, int key,
				 ncclComm_t *newcomm, int blocking);
/* A background split's child, in its init thread: the exchange that
 * gives it rank and size (0, or -1 when it failed), and at the end of the
 * init, with its result: the parent told (the job freed). */
int cxls_comm_split_place(struct cxls_comm *child);
void cxls_comm_split_job_end(struct cxls_comm *child, ncclResult_t r);
/* Called by the surviving ranks only; `exclude` lists the others, at
 * least one (ncclInvalidArgument otherwise, as NCCL 2.28). */
ncclResult_t cxls_comm_shrink(struct cxls_comm *c, const int *exclude, int nexclude,
			      ncclComm_t *newcomm, int blocking, int abort_parent);

#endif
