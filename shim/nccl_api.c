/* nccl_api.c - the NCCL API as seen by a preloaded application.
 *
 * Thin entry points only: classify the communicator handle, then either
 * call the core (our communicators) or the real library (everything
 * else).  The real libnccl calls its own public API through the PLT, so
 * these functions also see the real library's own communicators: those go
 * back to it untouched.  No lock is held across a call to the real
 * library.  Every ncclX is also exported as pncclX, like libnccl does.
 */
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#include "coll.h"
#include "comm.h"
#include "comm_config.h"
#include "comm_reg.h"
#include "comm_split.h"
#include "fold_gpu.h"
#include "group.h"
#include "log.h"
#include "mem_alloc.h"
#include "nccl_init.h"
#include "redop.h"
#include "registry.h"
#include "runtime.h"
#include "nccl_real.h"

#define SIM_INFO_MAGIC 0x74685283u /* NCCL_SIM_INFO_INITIALIZER */

#define EXPORT __attribute__((visibility("default")))
#define PALIAS(name) \
	EXPORT __typeof__(nccl##name) pnccl##name __attribute__((alias("nccl" #name)))

/* The real entry point, or NULL when there is no real library. */
#define REAL(name) (cxls_real_nccl() ? cxls_real_nccl()->name : NULL)

/* Forwards to the real library, or fails cleanly without one. */
#define FORWARD(name, ...)                                                         \
	do {                                                                       \
		__typeof__(&pnccl##name) f_ = REAL(name);                          \
		if (!f_) {                                                         \
			CXLS_WARN("nccl" #name ": no real NCCL library to call");  \
			return ncclSystemError;                                    \
		}                                                                  \
		return f_(__VA_ARGS__);                                            \
	} while (0)

/* Our communicator for `comm`, or NULL when it belongs to the real library.
 * A destroyed one of ours sets *err and returns NULL with *ours = 1. */
static struct cxls_comm *ours(const void *comm, int *mine, ncclResult_t *err, const char *fn)
{
	if (!comm) {
		*mine = 1;
		*err = ncclInvalidArgument;
		CXLS_WARN("%s: NULL communicator", fn);
		return NULL;
	}
	switch (cxls_registry_kind(comm)) {
	case CXLS_HANDLE_LIVE:
		*mine = 1;
		cxls_log_set_rank(cxls_comm_known_rank((struct cxls_comm *)comm));
		return (struct cxls_comm *)comm;
	case CXLS_HANDLE_DEAD:
		*mine = 1;
		*err = ncclInvalidArgument;
		CXLS_WARN("%s: communicator %p was destroyed (or belongs to the parent "
			  "process of this fork)", fn, comm);
		return NULL;
	default:
		*mine = 0;
		return NULL;
	}
}

/* Body prologue for calls taking a communicator: ours -> c, dead -> error
 * (passed through on_bad), foreign -> real library.  DISPATCH_OWN keeps
 * delegated ones (comm.h) for the calls that must release our handle too. */
#define DISPATCH_OWN_(on_bad, fn, comm, ...)                                       \
	int mine_;                                                                 \
	ncclResult_t err_ = ncclSuccess;                                           \
	struct cxls_comm *c = ours((comm), &mine_, &err_, "nccl" #fn);             \
	if (!mine_)                                                                \
		FORWARD(fn, __VA_ARGS__);                                          \
	if (!c)                                                                    \
		return on_bad(err_)

#define AS_IS(err) (err)
#define DISPATCH_OWN(fn, comm, ...) DISPATCH_OWN_(AS_IS, fn, comm, __VA_ARGS__)

/* A delegated handle forwards with its real communicator: the block's
 * `comm` shadows the parameter, so the arguments name the real one. */
#define DISPATCH_(on_bad, fn, comm, ...)                                           \
	DISPATCH_OWN_(on_bad, fn, comm, __VA_ARGS__);                              \
	if (cxls_comm_delegated(c)) {                                              \
		ncclComm_t comm = c->real;                                         \
		FORWARD(fn, __VA_ARGS__);                                          \
	}

#define DISPATCH(fn, comm, ...) DISPATCH_(AS_IS, fn, comm, __VA_ARGS__)
/* The calls a group takes (collectives, send, receive): a NULL or
 * destroyed handle fails an open group too, as NCCL's ncclGroupErrCheck. */
#define DISPATCH_COLL(fn, comm, ...) DISPATCH_(cxls_group_check, fn, comm, __VA_ARGS__)

/* Entry checks every collective on our communicators shares.  Their
 * errors, as the pool's argument checks', fail an open group too
 * (cxls_group_check). */
static ncclResult_t coll_ready(struct cxls_comm *c, const char *fn)
{
	ncclResult_t err;

	if (cxls_comm_usable(c, &err))
		return ncclSuccess;
	CXLS_WARN("%s on communicator %p: %s", fn, (void *)c, ncclGetErrorString(err));
	return cxls_group_check(err);
}

/* Collectives the pool does not run yet: the communicator's real NCCL
 * side when it has one, else a clear error. */
#define NOT_ON_POOL(name, ...)                                                     \
	do {                                                                       \
		if (c->real && REAL(name))                                         \
			return REAL(name)(__VA_ARGS__);                            \
		cxls_comm_set_error(c, "nccl" #name " is not supported on pool "    \
					"communicators yet");                      \
		return ncclInvalidUsage;                                           \
	} while (0)

/* On a GPU, reductions on the pool need the fold kernels (fold_gpu.h):
 * a library built without them sends reductions to the communicator's
 * real side when it has one. */
static ncclComm_t reduction_route(struct cxls_comm *c, unsigned coll_bit, size_t bytes)
{
	ncclComm_t real = cxls_comm_route(c, coll_bit, bytes);
	char why[160];

	if (!real && c->real && !cxls_cuda_emulated() &&
	    cxls_fold_gpu_ready(c->st.cu, why, sizeof(why)))
		real = c->real;
	return real;
}

static const struct cxls_real_init *real_init(struct cxls_real_init *ri)
{
	const struct cxls_real_nccl *r = cxls_real_nccl();

	ri->get_unique_id = r ? r->GetUniqueId : NULL;
	ri->init_rank_config = r ? r->CommInitRankConfig : NULL;
	ri->init_all = r ? r->CommInitAll : NULL;
	ri->destroy = r ? r->CommDestroy : NULL;
	ri->abort = r ? r->CommAbort : NULL;
	ri->get_async_error = r ? r->CommGetAsyncError : NULL;
	return ri;
}

/* ---- library ---------------------------------------------------------- */

EXPORT ncclResult_t ncclGetVersion(int *version)
{
	if (!version)
		return ncclInvalidArgument;
	if (REAL(GetVersion))
		return REAL(GetVersion)(version);
	*version = NCCL_VERSION_CODE; /* pool-only: the headers we were built with */
	return ncclSuccess;
}
PALIAS(GetVersion);

EXPORT const char *ncclGetErrorString(ncclResult_t result)
{
	if (REAL(GetErrorString))
		return REAL(GetErrorString)(result);
	switch (result) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error";
	case ncclSystemError: return "unhandled system error";
	case ncclInternalError: return "internal error";
	case ncclInvalidArgument: return "invalid argument";
	case ncclInvalidUsage: return "invalid usage";
	case ncclRemoteError: return "remote process exited or there was a network error";
	case ncclInProgress: return "NCCL operation in progress";
	default: return "unknown result code";
	}
}
PALIAS(GetErrorString);

EXPORT const char *ncclGetLastError(ncclComm_t comm)
{
	struct cxls_comm *c = (struct cxls_comm *)comm;

	if (cxls_registry_kind(comm) != CXLS_HANDLE_FOREIGN) {
		if (cxls_registry_kind(comm) == CXLS_HANDLE_LIVE && cxls_comm_delegated(c))
			comm = c->real;
		else
			return c->last_error;
	}
	return REAL(GetLastError) ? REAL(GetLastError)(comm) : "";
}
PALIAS(GetLastError);

/* The real library's allocator when it works here; plain driver memory
 * (mem_alloc.h) when it does not, e.g. under the CPU emulation. */
EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
	if (!ptr || !size)
		return ncclInvalidArgument;
	if (REAL(MemAlloc) && REAL(MemAlloc)(ptr, size) == ncclSuccess)
		return ncclSuccess;
	return cxls_mem_alloc(ptr, size);
}
PALIAS(MemAlloc);

EXPORT ncclResult_t ncclMemFree(void *ptr)
{
	ncclResult_t r;

	if (!ptr)
		return ncclSuccess;
	/* ncclInvalidArgument: not made by ncclMemAlloc here */
	if ((r = cxls_mem_free(ptr)) != ncclInvalidArgument)
		return r;
	FORWARD(MemFree, ptr);
}
PALIAS(MemFree);

/* What ncclCommGetAsyncError says of c. */
static ncclResult_t state_of(struct cxls_comm *c)
{
	ncclResult_t e;

	cxls_comm_async_error(c, &e);
	return e;
}

/* NCCL's ncclCommEnsureReady before the attribute calls, shrink,
 * finalize, PreMulSum, registrations and windows: a communicator whose
 * init, nonblocking split or revoke is under way is refused (a split
 * child's rank and size are not known before); a failed one gives its
 * error.  (Collectives and sends on a parent whose split is under way
 * go on: only its init must be done, cxls_comm_usable.) */
static ncclResult_t ensure_ready(struct cxls_comm *c, const char *call)
{
	ncclResult_t e = state_of(c);

	if (e == ncclInProgress) {
		cxls_comm_set_error(c, "%s: the communicator's init, nonblocking split or "
				       "revoke is still in progress", call);
		return ncclInvalidArgument;
	}
	return e;
}

/* ---- communicators ------------------------------------------------------ */

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
	struct cxls_real_init ri;

	return cxls_nccl_unique_id(uniqueId, real_init(&ri));
}
PALIAS(GetUniqueId);

EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
					   int rank, ncclConfig_t *config)
{
	struct cxls_real_init ri;

	return cxls_nccl_init_rank(comm, nranks, &commId, rank, config, real_init(&ri));
}
PALIAS(CommInitRankConfig);

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
	struct cxls_real_init ri;

	return cxls_nccl_init_rank(comm, nranks, &commId, rank, NULL, real_init(&ri));
}
PALIAS(CommInitRank);

EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank,
					     int nId, ncclUniqueId *commIds,
					     ncclConfig_t *config)
{
	struct cxls_real_init ri;

	if (!commIds || nId < 1 || nId > nranks)
		return ncclInvalidArgument;
	/* our ids carry the whole rendezvous: the first one is enough */
	if (cxls_nccl_is_our_id(&commIds[0]))
		return cxls_nccl_init_rank(newcomm, nranks, &commIds[0], myrank, config,
					   real_init(&ri));
	FORWARD(CommInitRankScalable, newcomm, nranks, myrank, nId, commIds, config);
}
PALIAS(CommInitRankScalable);

EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
	struct cxls_real_init ri;

	return cxls_nccl_init_all(comm, ndev, devlist, real_init(&ri));
}
PALIAS(CommInitAll);

EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	ncclResult_t r;

	if (!comm)
		return ncclSuccess; /* as NCCL: nothing to finalize */
	DISPATCH(CommFinalize, comm, comm);
	if ((r = ensure_ready(c, "ncclCommFinalize")))
		return r;
	return cxls_comm_finalize(c);
}
PALIAS(CommFinalize);

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	if (!comm)
		return ncclSuccess; /* as NCCL: destroying NULL is a no-op */
	DISPATCH_OWN(CommDestroy, comm, comm);
	return cxls_comm_destroy(c);
}
PALIAS(CommDestroy);

EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	if (!comm)
		return ncclSuccess;
	DISPATCH_OWN(CommAbort, comm, comm);
	return cxls_comm_abort(c);
}
PALIAS(CommAbort);

EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
	if (!comm)
		return ncclSuccess; /* as NCCL */
	DISPATCH(CommRevoke, comm, comm, revokeFlags);
	if (revokeFlags != NCCL_REVOKE_DEFAULT) {
		cxls_comm_set_error(c, "ncclCommRevoke: flags must be 0, got %d", revokeFlags);
		return ncclInvalidArgument;
	}
	if (c->real && REAL(CommRevoke))
		REAL(CommRevoke)(c->real, revokeFlags);
	return cxls_comm_revoke(c);
}
PALIAS(CommRevoke);

/* NCCL copies the parent's configuration into a child made with config
 * NULL: a nonblocking parent's split or shrink is a nonblocking init. */
static ncclResult_t child_blocking(const struct cxls_comm *c, const ncclConfig_t *config,
				   int *blocking)
{
	if (config)
		return cxls_nccl_config_blocking(config, blocking);
	*blocking = c->blocking;
	return ncclSuccess;
}

EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
				  ncclConfig_t *config)
{
	int blocking;
	ncclResult_t r;

	DISPATCH(CommSplit, comm, comm, color, key, newcomm, config);
	if (!cxls_comm_splittable(c, &r))
		CXLS_WARN("ncclCommSplit on communicator %p: %s", (void *)c, ncclGetErrorString(r));
	/* NCCL reads no config for a rank that gets no child: a bad one must
	 * not keep it from the exchange, which its peers wait for */
	else if (!(r = child_blocking(c, color == NCCL_SPLIT_NOCOLOR ? NULL : config, &blocking)))
		r = cxls_comm_split(c, color, key, newcomm, blocking);
	return cxls_group_check(r);
}
PALIAS(CommSplit);

EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList,
				   int excludeRanksCount, ncclComm_t *newcomm,
				   ncclConfig_t *config, int shrinkFlags)
{
	int blocking;
	ncclResult_t r;

	DISPATCH(CommShrink, comm, comm, excludeRanksList, excludeRanksCount, newcomm, config,
		 shrinkFlags);
	/* a failed parent is the usual reason to shrink: no health check,
	 * but its init or nonblocking split must be done (its size may not
	 * be known before) */
	if (state_of(c) == ncclInProgress)
		return cxls_group_check(ensure_ready(c, "ncclCommShrink"));
	if ((r = child_blocking(c, config, &blocking)))
		return cxls_group_check(r);
	return cxls_group_check(cxls_comm_shrink(c, excludeRanksList, excludeRanksCount, newcomm,
						 blocking, (shrinkFlags & NCCL_SHRINK_ABORT) != 0));
}
PALIAS(CommShrink);

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
	if (!asyncError)
		return ncclInvalidArgument;
	DISPATCH(CommGetAsyncError, comm, comm, asyncError);
	return cxls_comm_async_error(c, asyncError);
}
PALIAS(CommGetAsyncError);

EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	ncclResult_t r;

	if (!count)
		return ncclInvalidArgument;
	DISPATCH(CommCount, comm, comm, count);
	if ((r = ensure_ready(c, "ncclCommCount")))
		return r;
	*count = c->nranks;
	return ncclSuccess;
}
PALIAS(CommCount);

EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
	ncclResult_t r;

	if (!device)
		return ncclInvalidArgument;
	DISPATCH(CommCuDevice, comm, comm, device);
	if ((r = ensure_ready(c, "ncclCommCuDevice")))
		return r;
	*device = c->device;
	return ncclSuccess;
}
PALIAS(CommCuDevice);

EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	ncclResult_t r;

	if (!rank)
		return ncclInvalidArgument;
	DISPATCH(CommUserRank, comm, comm, rank);
	if ((r = ensure_ready(c, "ncclCommUserRank")))
		return r;
	*rank = c->rank;
	return ncclSuccess;
}
PALIAS(CommUserRank);

/* Registration is an optimisation hint: pool communicators copy through
 * the pool anyway, so they accept it and hand back the buffer as handle
 * (comm_reg.h). */
EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size,
				     void **handle)
{
	ncclResult_t r;

	DISPATCH(CommRegister, comm, comm, buff, size, handle);
	if (!handle)
		return ncclInvalidArgument;
	if ((r = ensure_ready(c, "ncclCommRegister")))
		return r;
	/* nothing to register: NCCL's handle for a skipped registration,
	 * which deregisters as a no-op */
	if (!buff || !size) {
		*handle = NULL;
		return ncclSuccess;
	}
	if (cxls_reg_add(c, buff, CXLS_REG_BUFFER))
		return ncclSystemError;
	*handle = buff;
	return ncclSuccess;
}
PALIAS(CommRegister);

EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
	DISPATCH(CommDeregister, comm, comm, handle);
	if (handle && cxls_reg_remove(c, handle, CXLS_REG_BUFFER)) {
		cxls_comm_set_error(c, "ncclCommDeregister: %p is not a registration of this "
				       "communicator", handle);
		return ncclInvalidUsage;
	}
	return ncclSuccess; /* NULL: nothing registered, as NCCL */
}
PALIAS(CommDeregister);

EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
					   ncclWindow_t *win, int winFlags)
{
	ncclResult_t r;

	DISPATCH(CommWindowRegister, comm, comm, buff, size, win, winFlags);
	if (!win)
		return ncclInvalidArgument;
	if ((r = ensure_ready(c, "ncclCommWindowRegister")))
		return r;
	/* the real side's window, for operations routed there */
	if (c->real && REAL(CommWindowRegister))
		return REAL(CommWindowRegister)(c->real, buff, size, win, winFlags);
	/* the pool copies through its staging windows: a window is only a
	 * checked promise that the buffer is device memory, a registration
	 * as NCCL's windows are without symmetric memory */
	if ((r = cxls_op_check_buf(c, buff, size, "ncclCommWindowRegister buffer")))
		return r;
	if (!buff || !size) {
		*win = NULL;
		return ncclSuccess;
	}
	if (cxls_reg_add(c, buff, CXLS_REG_WINDOW))
		return ncclSystemError;
	*win = (ncclWindow_t)buff;
	return ncclSuccess;
}
PALIAS(CommWindowRegister);

EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
	DISPATCH(CommWindowDeregister, comm, comm, win);
	if (c->real && REAL(CommWindowDeregister))
		return REAL(CommWindowDeregister)(c->real, win);
	if (win && cxls_reg_remove(c, win, CXLS_REG_WINDOW)) {
		cxls_comm_set_error(c, "ncclCommWindowDeregister: %p is not a window of this "
				       "communicator", (void *)win);
		return ncclInvalidUsage;
	}
	return ncclSuccess; /* NULL included, as NCCL */
}
PALIAS(CommWindowDeregister);

/* The operator as the real side knows it: a PreMulSum made on both sides
 * has a number of each (the real library's never the pool's). */
static ncclRedOp_t real_op(struct cxls_comm *c, ncclRedOp_t op)
{
	struct cxls_user_op *u = cxls_redop_user(c, op);

	return u && u->real_live ? u->real_op : op;
}

/* A communicator with a real side makes its PreMulSum there too, so that
 * the reductions the policy routes to NCCL can use it. */
EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
					     ncclDataType_t datatype,
					     ncclScalarResidence_t residence, ncclComm_t comm)
{
	struct cxls_user_op *u;
	ncclResult_t r;

	DISPATCH(RedOpCreatePreMulSum, comm, op, scalar, datatype, residence, comm);
	/* the real side, if any, is there only once the init is done */
	if ((r = ensure_ready(c, "ncclRedOpCreatePreMulSum")))
		return r;
	r = cxls_redop_create_premulsum(c, op, scalar, datatype, residence);
	if (r != ncclSuccess || !c->real || !REAL(RedOpCreatePreMulSum))
		return r;
	u = cxls_redop_user(c, *op);
	r = REAL(RedOpCreatePreMulSum)(&u->real_op, scalar, datatype, residence, c->real);
	if (r != ncclSuccess) {
		cxls_redop_destroy(c, *op);
		return r;
	}
	u->real_live = 1;
	return ncclSuccess;
}
PALIAS(RedOpCreatePreMulSum);

EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
	struct cxls_user_op *u;

	DISPATCH(RedOpDestroy, comm, op, comm);
	u = cxls_redop_user(c, op);
	if (u && u->real_live && REAL(RedOpDestroy)) {
		REAL(RedOpDestroy)(u->real_op, c->real);
		u->real_live = 0;
	}
	return cxls_redop_destroy(c, op);
}
PALIAS(RedOpDestroy);

/* ---- collectives ------------------------------------------------------- */

EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
				  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	ncclComm_t real;
	ncclResult_t r;

	DISPATCH_COLL(AllGather, comm, sendbuff, recvbuff, sendcount, datatype, comm, stream);
	if ((r = coll_ready(c, "ncclAllGather")))
		return r;
	real = cxls_comm_route(c, CXLS_COLL_ALLGATHER,
			       sendcount * cxls_type_size(datatype) * (size_t)c->nranks);
	if (real)
		return REAL(AllGather)(sendbuff, recvbuff, sendcount, datatype, real, stream);
	return cxls_group_check(cxls_allgather(c, sendbuff, recvbuff, sendcount, datatype, (CUstream)stream));
}
PALIAS(AllGather);

EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
				  ncclDataType_t datatype, int root, ncclComm_t comm,
				  cudaStream_t stream)
{
	ncclComm_t real;
	ncclResult_t r;

	DISPATCH_COLL(Broadcast, comm, sendbuff, recvbuff, count, datatype, root, comm, stream);
	if ((r = coll_ready(c, "ncclBroadcast")))
		return r;
	real = cxls_comm_route(c, CXLS_COLL_BROADCAST, count * cxls_type_size(datatype));
	if (real)
		return REAL(Broadcast)(sendbuff, recvbuff, count, datatype, root, real, stream);
	return cxls_group_check(cxls_broadcast(c, sendbuff, recvbuff, count, datatype, root, (CUstream)stream));
}
PALIAS(Broadcast);

EXPORT ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
			      ncclComm_t comm, cudaStream_t stream)
{
	ncclComm_t real;
	ncclResult_t r;

	DISPATCH_COLL(Bcast, comm, buff, count, datatype, root, comm, stream);
	if ((r = coll_ready(c, "ncclBcast")))
		return r;
	real = cxls_comm_route(c, CXLS_COLL_BROADCAST, count * cxls_type_size(datatype));
	if (real)
		return REAL(Bcast)(buff, count, datatype, root, real, stream);
	return cxls_group_check(cxls_broadcast(c, buff, buff, count, datatype, root, (CUstream)stream));
}
PALIAS(Bcast);

EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
			       ncclDataType_t datatype, ncclRedOp_t op, int root,
			       ncclComm_t comm, cudaStream_t stream)
{
	ncclComm_t real;
	ncclResult_t r;

	DISPATCH_COLL(Reduce, comm, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
	if ((r = coll_ready(c, "ncclReduce")))
		return r;
	real = reduction_route(c, CXLS_COLL_REDUCE,
			       count * cxls_type_size(datatype));
	if (real)
		return REAL(Reduce)(sendbuff, recvbuff, count, datatype, real_op(c, op), root,
				    real, stream);
	return cxls_group_check(cxls_reduce(c, sendbuff, recvbuff, count, datatype, op, root, (CUstream)stream));
}
PALIAS(Reduce);

EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
				  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
				  cudaStream_t stream)
{
	ncclComm_t real;
	ncclResult_t r;

	DISPATCH_COLL(AllReduce, comm, sendbuff, recvbuff, count, datatype, op, comm, stream);
	if ((r = coll_ready(c, "ncclAllReduce")))
		return r;
	real = reduction_route(c, CXLS_COLL_ALLREDUCE,
			       count * cxls_type_size(datatype));
	if (real)
		return REAL(AllReduce)(sendbuff, recvbuff, count, datatype, real_op(c, op), real,
				       stream);
	return cxls_group_check(cxls_allreduce(c, sendbuff, recvbuff, count, datatype, op, (CUstream)stream));
}
PALIAS(AllReduce);

EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
				      ncclDataType_t datatype, ncclRedOp_t op,
				      ncclComm_t comm, cudaStream_t stream)
{
	ncclComm_t real;
	ncclResult_t r;

	DISPATCH_COLL(ReduceScatter, comm, sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
	if ((r = coll_ready(c, "ncclReduceScatter")))
		return r;
	real = reduction_route(c, CXLS_COLL_REDUCESCATTER,
			       recvcount * cxls_type_size(datatype) * (size_t)c->nranks);
	if (real)
		return REAL(ReduceScatter)(sendbuff, recvbuff, recvcount, datatype,
					   real_op(c, op), real, stream);
	return cxls_group_check(cxls_reducescatter(c, sendbuff, recvbuff, recvcount, datatype, op, (CUstream)stream));
}
PALIAS(ReduceScatter);

EXPORT ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
				 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	ncclComm_t real;
	ncclResult_t r;

	DISPATCH_COLL(AlltoAll, comm, sendbuff, recvbuff, count, datatype, comm, stream);
	if ((r = coll_ready(c, "ncclAlltoAll")))
		return r;
	real = cxls_comm_route(c, CXLS_COLL_ALLTOALL,
			       count * cxls_type_size(datatype) * (size_t)c->nranks);
	if (real)
		return REAL(AlltoAll)(sendbuff, recvbuff, count, datatype, real, stream);
	return cxls_group_check(cxls_alltoall(c, sendbuff, recvbuff, count, datatype, (CUstream)stream));
}
PALIAS(AlltoAll);

EXPORT ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
			       ncclDataType_t datatype, int root, ncclComm_t comm,
			       cudaStream_t stream)
{
	ncclComm_t real;
	ncclResult_t r;

	DISPATCH_COLL(Gather, comm, sendbuff, recvbuff, count, datatype, root, comm, stream);
	if ((r = coll_ready(c, "ncclGather")))
		return r;
	real = cxls_comm_route(c, CXLS_COLL_GATHER,
			       count * cxls_type_size(datatype) * (size_t)c->nranks);
	if (real)
		return REAL(Gather)(sendbuff, recvbuff, count, datatype, root, real, stream);
	return cxls_group_check(cxls_gather(c, sendbuff, recvbuff, count, datatype, root, (CUstream)stream));
}
PALIAS(Gather);

EXPORT ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
				ncclDataType_t datatype, int root, ncclComm_t comm,
				cudaStream_t stream)
{
	ncclComm_t real;
	ncclResult_t r;

	DISPATCH_COLL(Scatter, comm, sendbuff, recvbuff, count, datatype, root, comm, stream);
	if ((r = coll_ready(c, "ncclScatter")))
		return r;
	real = cxls_comm_route(c, CXLS_COLL_SCATTER,
			       count * cxls_type_size(datatype) * (size_t)c->nranks);
	if (real)
		return REAL(Scatter)(sendbuff, recvbuff, count, datatype, root, real, stream);
	return cxls_group_check(cxls_scatter(c, sendbuff, recvbuff, count, datatype, root, (CUstream)stream));
}
PALIAS(Scatter);

/* ---- point-to-point and groups ------------------------------------------ */

static ncclResult_t p2p(struct cxls_comm *c, int send, const void *buf, size_t count,
			ncclDataType_t type, int peer, cudaStream_t stream)
{
	struct cxls_p2p p;
	ncclResult_t r;

	if ((r = coll_ready(c, send ? "ncclSend" : "ncclRecv")))
		return r;
	if ((r = cxls_p2p_check(c, send, buf, count, type, peer, &p)))
		return cxls_group_check(r);
	return cxls_group_check(cxls_group_p2p(c, &p, (CUstream)stream));
}

EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
			     int peer, ncclComm_t comm, cudaStream_t stream)
{
	DISPATCH_COLL(Send, comm, sendbuff, count, datatype, peer, comm, stream);
	return p2p(c, 1, sendbuff, count, datatype, peer, stream);
}
PALIAS(Send);

EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
			     ncclComm_t comm, cudaStream_t stream)
{
	DISPATCH_COLL(Recv, comm, recvbuff, count, datatype, peer, comm, stream);
	return p2p(c, 0, recvbuff, count, datatype, peer, stream);
}
PALIAS(Recv);

/* Our groups hold pool sends and receives (group.h); the real library's
 * hold its own communicators' operations, so both are opened and closed.
 * Ours runs first at the end: a real operation in the same group never
 * waits for a pool one. */
EXPORT ncclResult_t ncclGroupStart(void)
{
	cxls_group_start();
	return REAL(GroupStart) ? REAL(GroupStart)() : ncclSuccess;
}
PALIAS(GroupStart);

EXPORT ncclResult_t ncclGroupEnd(void)
{
	ncclResult_t r = cxls_group_end();
	ncclResult_t rr = REAL(GroupEnd) ? REAL(GroupEnd)() : ncclSuccess;

	return r != ncclSuccess ? r : rr;
}
PALIAS(GroupEnd);

/* Whether sim, checked by NCCL's rule, has room for an estimate. */
static int sim_has_time(const ncclSimInfo_t *sim)
{
	return sim->size >= offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float);
}

/* A simulated group without the real library: NCCL's check of the
 * struct, and an estimate of 0 (the pool's is added). */
static ncclResult_t sim_nothing(ncclSimInfo_t *sim)
{
	if (sim->magic != SIM_INFO_MAGIC) {
		CXLS_WARN("ncclSimInfo_t not initialised with NCCL_SIM_INFO_INITIALIZER");
		return ncclInvalidArgument;
	}
	if (sim_has_time(sim))
		sim->estimatedTime = 0.0f;
	return ncclSuccess;
}

/* Ends the group without running it, as NCCL does.  The estimate is the
 * real library's for its operations (NCCL_UNDEF_FLOAT, negative, when it
 * held none) plus the pool's model of those the shim held (estimate.h),
 * in microseconds.  Without a simInfo NCCL simulates nothing: the group
 * ends and runs, as at ncclGroupEnd (and outside a group it is the same
 * misuse). */
EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
	ncclResult_t r, rr = ncclSuccess;
	double pool_us = 0;
	int outermost;

	if (!simInfo)
		return ncclGroupEnd();
	outermost = cxls_group_depth() == 1; /* NCCL reads simInfo only there */
	r = cxls_group_discard(&pool_us);
	if (REAL(GroupSimulateEnd))
		rr = REAL(GroupSimulateEnd)(simInfo);
	else if (outermost)
		rr = sim_nothing(simInfo);
	if (rr == ncclSuccess && outermost && pool_us > 0 && sim_has_time(simInfo))
		simInfo->estimatedTime = (float)((simInfo->estimatedTime > 0 ?
						  simInfo->estimatedTime : 0) + pool_us);
	/* a call that failed in the group fails its end, simulated too */
	return r != ncclSuccess ? r : rr;
}
PALIAS(GroupSimulateEnd);
