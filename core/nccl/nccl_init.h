/* nccl_init.h - ncclGetUniqueId / ncclCommInitRank* / ncclCommInitAll on
 * the pool, with the decision to fall back to the real NCCL.
 *
 * The caller passes the real library's entry points (NULL when there is
 * none); the core calls them when the pool cannot serve a communicator.
 */
#ifndef CXLSHIM_CORE_NCCL_INIT_H
#define CXLSHIM_CORE_NCCL_INIT_H

#include <nccl.h>

struct cxls_real_init {
	ncclResult_t (*get_unique_id)(ncclUniqueId *id);
	ncclResult_t (*init_rank_config)(ncclComm_t *comm, int nranks, ncclUniqueId id,
					 int rank, ncclConfig_t *config);
	ncclResult_t (*init_all)(ncclComm_t *comms, int ndev, const int *devlist);
	ncclResult_t (*destroy)(ncclComm_t comm);
	ncclResult_t (*abort)(ncclComm_t comm);
	ncclResult_t (*get_async_error)(ncclComm_t comm, ncclResult_t *err);
};

/* 1 when the id was made by cxlshim (see uid.h). */
int cxls_nccl_is_our_id(const ncclUniqueId *id);
ncclResult_t cxls_nccl_unique_id(ncclUniqueId *id, const struct cxls_real_init *real);
ncclResult_t cxls_nccl_init_rank(ncclComm_t *comm, int nranks, const ncclUniqueId *id,
				 int rank, ncclConfig_t *config,
				 const struct cxls_real_init *real);
ncclResult_t cxls_nccl_init_all(ncclComm_t *comms, int ndev, const int *devlist,
				const struct cxls_real_init *real);

#endif
