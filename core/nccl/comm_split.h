/* comm_split.h - child communicators of a pool communicator. */
#ifndef CXLSHIM_CORE_COMM_SPLIT_H
#define CXLSHIM_CORE_COMM_SPLIT_H

#include "comm.h"

/* Collective over the parent; NCCL_SPLIT_NOCOLOR ranks get *newcomm NULL. */
ncclResult_t cxls_comm_split(struct cxls_comm *c, int color, int key, ncclComm_t *newcomm,
			     int blocking);
/* Called by the surviving ranks only; `exclude` lists the others. */
ncclResult_t cxls_comm_shrink(struct cxls_comm *c, const int *exclude, int nexclude,
			      ncclComm_t *newcomm, int blocking);

#endif
