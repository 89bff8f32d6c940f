/* nccl_funcs.h - every function of nccl.h 2.28, as an X-macro list.
 * Used to build the table of real entry points (nccl_real.c). */
#ifndef CXLSHIM_SHIM_NCCL_FUNCS_H
#define CXLSHIM_SHIM_NCCL_FUNCS_H

#define CXLS_NCCL_FUNCS(X) \
	X(MemAlloc) X(MemFree) X(GetVersion) X(GetUniqueId) \
	X(CommInitRankConfig) X(CommInitRank) X(CommInitAll) X(CommFinalize) \
	X(CommDestroy) X(CommAbort) X(CommRevoke) X(CommSplit) X(CommShrink) \
	X(CommInitRankScalable) X(GetErrorString) X(GetLastError) \
	X(CommGetAsyncError) X(CommCount) X(CommCuDevice) X(CommUserRank) \
	X(CommRegister) X(CommDeregister) X(CommWindowRegister) \
	X(CommWindowDeregister) X(RedOpCreatePreMulSum) X(RedOpDestroy) \
	X(Reduce) X(Bcast) X(Broadcast) X(AllReduce) X(ReduceScatter) \
	X(AllGather) X(AlltoAll) X(Gather) X(Scatter) X(Send) X(Recv) \
	X(GroupStart) X(GroupEnd) X(GroupSimulateEnd)

#endif
