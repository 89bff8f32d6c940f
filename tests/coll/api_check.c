/* api_check.c - the NCCL API under the preload: bad input, nonblocking
 * init, ncclCommInitAll, groups, a rank killed mid-collective, abort from
 * another thread, unusable pools and ranks that disagree on the pool.
 *
 *   api_check CASE        (cases: see table at the end)
 * Prints one line per failed check and "N passed, M failed".
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <nccl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/check.h"
#include "../common/device.h"
#include "../common/launch.h"

#define MIB (1u << 20)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *dev_alloc(size_t n, int fill)
{
	char *p = NULL;

	if (cudaMalloc((void **)&p, n) != cudaSuccess)
		return NULL;
	test_memset(p, fill, n);
	return p;
}

/* Copied on st, not on the legacy stream, which CUDA refuses while a
 * blocking stream captures (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT). */
static int all_bytes_on(const char *dev, size_t n, int fill, cudaStream_t st)
{
	char *host = malloc(n);
	int ok = host && cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, st) == cudaSuccess &&
		 cudaStreamSynchronize(st) == cudaSuccess;

	for (size_t i = 0; ok && i < n; i++)
		ok = host[i] == fill;
	free(host);
	return ok;
}

static int all_bytes(const char *dev, size_t n, int fill)
{
	char *host = malloc(n);
	int ok = host && cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost) == cudaSuccess;

	for (size_t i = 0; ok && i < n; i++)
		ok = host[i] == fill;
	free(host);
	return ok;
}

/* Device memory filled on stream s (no host synchronisation: the graph
 * test queues an eager op right behind a replay). */
static char *stream_alloc(size_t n, int fill, cudaStream_t s)
{
	char *p = NULL;

	if (cudaMalloc((void **)&p, n) != cudaSuccess)
		return NULL;
	cudaMemsetAsync(p, fill, n, s);
	return p;
}

/* AllGather of one byte pattern per rank; returns 1 when correct. */
static int allgather_ok(ncclComm_t comm, cudaStream_t s, int rank, int n, size_t bytes)
{
	char *send = stream_alloc(bytes, 'a' + rank, s), *recv = stream_alloc(bytes * n, 0, s);
	char *host = malloc(bytes * n);
	int ok;

	ok = ncclAllGather(send, recv, bytes, ncclInt8, comm, s) == ncclSuccess &&
	     cudaStreamSynchronize(s) == cudaSuccess &&
	     cudaMemcpy(host, recv, bytes * n, cudaMemcpyDeviceToHost) == cudaSuccess;
	for (size_t i = 0; ok && i < bytes * n; i++)
		ok = host[i] == 'a' + (int)(i / bytes);
	cudaStreamSynchronize(s); /* the fills, also when the call failed */
	cudaFree(send);
	cudaFree(recv);
	free(host);
	return ok;
}

/* How most cases start: this rank's device, a stream, and the communicator
 * of all n ranks, its init checked. */
static ncclComm_t join(int rank, int n, const ncclUniqueId *id, cudaStream_t *s)
{
	ncclComm_t comm = NULL;

	cudaSetDevice(test_device(rank));
	cudaStreamCreate(s);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	return comm;
}

/* Ends the capture on s, instantiates it and replays it `replays` times,
 * each synchronized; NULL when that failed (reported). */
static cudaGraphExec_t end_and_replay(cudaStream_t s, cudaGraph_t *g, int replays)
{
	cudaGraphExec_t exec = NULL;

	*g = NULL;
	CHECK(cudaStreamEndCapture(s, g) == cudaSuccess, "end capture");
	CHECK(*g && cudaGraphInstantiate(&exec, *g, 0) == cudaSuccess, "instantiate");
	for (int it = 0; exec && it < replays; it++) {
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
	}
	return exec;
}

/* Ranks whose policies differ in cccl.overlap (two work streams or one)
 * cut ops in as many rounds: the communicator's least rounds are its
 * creator's (rank 0 here), adopted as the geometry is.  Rank 1 turns
 * overlap on before its first call; each cut its collectives in other
 * rounds, and every collective above 128 KiB failed the descriptor
 * check on both ranks (ncclInvalidUsage, "mismatched operations"). */
static int case_mixed_overlap(int rank, int n, const ncclUniqueId *id, void *arg)
{
	cudaStream_t s;
	ncclComm_t comm;

	(void)arg;
	if (rank == 1)
		setenv("CXLSHIM_CCCL_OVERLAP", "1", 1);
	comm = join(rank, n, id, &s);
	for (size_t bytes = 4096; bytes <= 3 * MIB; bytes *= 8)
		CHECK(allgather_ok(comm, s, rank, n, bytes), "AllGather of %zu bytes", bytes);
	CHECK(allgather_ok(comm, s, rank, n, 3 * MIB + 5), "AllGather of 3 MiB + 5");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* ---- bad input ---------------------------------------------------------- */

static void bad_collectives(ncclComm_t comm, cudaStream_t s, int n)
{
	char *buf = dev_alloc(MIB, 0), host[64];
	void *foreign = calloc(1, 8 * MIB); /* zeroed: real NCCL rejects it */
	int count, me = -1;
	ncclResult_t e;

	CHECK(ncclAllGather(NULL, buf, 16, ncclInt8, comm, s) == ncclInvalidArgument, "NULL send");
	CHECK(ncclAllGather(buf, NULL, 16, ncclInt8, comm, s) == ncclInvalidArgument, "NULL recv");
	CHECK(ncclAllGather(host, buf, 16, ncclInt8, comm, s) == ncclInvalidArgument,
	      "host stack buffer");
	CHECK(ncclAllGather(buf, buf, SIZE_MAX / 2, ncclInt64, comm, s) == ncclInvalidArgument,
	      "count overflow");
	CHECK(ncclAllGather(buf, buf, MIB, ncclInt8, comm, s) == ncclInvalidArgument,
	      "count beyond the allocation");
	CHECK(ncclAllGather(buf, buf, 16, (ncclDataType_t)99, comm, s) == ncclInvalidArgument,
	      "bad datatype");
	CHECK(ncclAllGather(buf, buf, 16, (ncclDataType_t)-1, comm, s) == ncclInvalidArgument,
	      "negative datatype");
	CHECK(ncclBroadcast(buf, buf, 16, ncclInt8, -1, comm, s) == ncclInvalidArgument, "root -1");
	CHECK(ncclBroadcast(buf, buf, 16, ncclInt8, n, comm, s) == ncclInvalidArgument,
	      "root == nranks");
	CHECK(ncclBcast(NULL, 16, ncclFloat, 0, comm, s) == ncclInvalidArgument, "Bcast NULL");
	CHECK(ncclGather(buf, buf, 16, ncclInt8, n, comm, s) == ncclInvalidArgument, "Gather root");
	CHECK(ncclGather(NULL, buf, 16, ncclInt8, 0, comm, s) == ncclInvalidArgument, "Gather NULL");
	CHECK(ncclScatter(buf, buf, 16, ncclInt8, -2, comm, s) == ncclInvalidArgument,
	      "Scatter root");
	CHECK(ncclScatter(buf, buf, 2 * MIB, ncclInt8, 0, comm, s) == ncclInvalidArgument,
	      "Scatter beyond the allocation");
	CHECK(ncclAlltoAll(buf, buf + 16, 16, ncclInt8, comm, s) == ncclInvalidArgument,
	      "AlltoAll with overlapping buffers, not in place");
	/* overlaps other than in place; each rank the root of its own call,
	 * so that every rank fails before anything is enqueued */
	CHECK(ncclCommUserRank(comm, &me) == ncclSuccess, "user rank");
	CHECK(ncclAllGather(buf + 8, buf, 16, ncclInt8, comm, s) == ncclInvalidArgument,
	      "AllGather with overlapping buffers, not in place");
	CHECK(ncclBroadcast(buf, buf + 8, 16, ncclInt8, me, comm, s) == ncclInvalidArgument,
	      "Broadcast with overlapping buffers");
	CHECK(ncclGather(buf + 8, buf, 16, ncclInt8, me, comm, s) == ncclInvalidArgument,
	      "Gather with overlapping buffers, not in place");
	CHECK(ncclScatter(buf, buf + 8, 16, ncclInt8, me, comm, s) == ncclInvalidArgument,
	      "Scatter with overlapping buffers, not in place");
	CHECK(ncclAlltoAll(buf, buf + 16, 16, (ncclDataType_t)12, comm, s) == ncclInvalidArgument,
	      "AlltoAll datatype");
	CHECK(ncclAlltoAll(buf, buf + MIB / 2, SIZE_MAX / 4, ncclInt8, comm, s) ==
		      ncclInvalidArgument, "AlltoAll count overflow");
	/* operators that are neither built in nor made here; INT_MIN overflowed
	 * the handle's arithmetic (UBSan stopped the process) */
	CHECK(ncclAllReduce(buf, buf, 16, ncclFloat, (ncclRedOp_t)ncclNumOps, comm, s) ==
		      ncclInvalidArgument, "AllReduce operator ncclNumOps");
	CHECK(ncclAllReduce(buf, buf, 16, ncclFloat, (ncclRedOp_t)(-2147483647 - 1), comm, s) ==
		      ncclInvalidArgument, "AllReduce operator INT_MIN");
	CHECK(ncclRedOpDestroy((ncclRedOp_t)(-2147483647 - 1), comm) == ncclInvalidArgument,
	      "destroy operator INT_MIN");
	CHECK(ncclRedOpDestroy(ncclSum, comm) == ncclInvalidArgument, "destroy a built-in operator");
	CHECK(ncclAllGather(buf, buf, 16, ncclInt8, NULL, s) == ncclInvalidArgument, "NULL comm");
	CHECK(ncclAllGather(buf, buf, 16, ncclInt8, (ncclComm_t)foreign, s) ==
		      ncclInvalidArgument, "foreign comm goes to real NCCL, which refuses it");
	CHECK(ncclCommCount((ncclComm_t)foreign, &count) == ncclInvalidArgument, "foreign count");
	CHECK(ncclCommCount(comm, NULL) == ncclInvalidArgument, "NULL count");
	CHECK(ncclCommUserRank(comm, NULL) == ncclInvalidArgument, "NULL rank");
	CHECK(ncclCommCuDevice(comm, NULL) == ncclInvalidArgument, "NULL device");
	CHECK(ncclCommGetAsyncError(comm, NULL) == ncclInvalidArgument, "NULL async");
	CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclSuccess,
	      "bad calls leave the communicator healthy");
	CHECK(ncclAllGather(buf, buf, 0, ncclInt8, comm, s) == ncclSuccess, "count 0");
	CHECK(ncclGetLastError(comm) && *ncclGetLastError(comm), "last error is kept");
	free(foreign);
	cudaFree(buf);
}

/* ncclMemAlloc memory works as collective buffers; windows and
 * registrations are accepted for good buffers and refused for bad ones. */
static void memory_calls(ncclComm_t comm, cudaStream_t s, int rank, int n)
{
	char *buf = NULL, host[64], *check = malloc(MIB * (size_t)n);
	ncclWindow_t win = NULL;
	void *handle = NULL;
	int ok = 1;

	CHECK(ncclMemAlloc(NULL, MIB) == ncclInvalidArgument, "MemAlloc NULL");
	CHECK(ncclMemAlloc((void **)&buf, 0) == ncclInvalidArgument, "MemAlloc 0 bytes");
	CHECK(ncclMemFree(NULL) == ncclSuccess, "MemFree NULL");
	CHECK(ncclMemAlloc((void **)&buf, MIB * (size_t)n) == ncclSuccess && buf, "MemAlloc");
	CHECK(ncclCommWindowRegister(comm, buf, MIB * (size_t)n, &win, 0) == ncclSuccess && win,
	      "window on ncclMemAlloc memory");
	CHECK(ncclCommWindowRegister(comm, host, sizeof(host), &win, 0) == ncclInvalidArgument,
	      "window on a host stack buffer");
	CHECK(ncclCommWindowRegister(comm, buf, MIB, NULL, 0) == ncclInvalidArgument, "NULL win");
	CHECK(ncclCommRegister(comm, buf, MIB, NULL) == ncclInvalidArgument, "NULL handle");
	CHECK(ncclCommRegister(comm, buf, MIB, &handle) == ncclSuccess, "register");
	test_memset(buf + (size_t)rank * MIB, 'm' + rank, MIB);
	CHECK(ncclAllGather(buf + (size_t)rank * MIB, buf, MIB, ncclInt8, comm, s) == ncclSuccess &&
		      cudaStreamSynchronize(s) == cudaSuccess,
	      "AllGather in ncclMemAlloc memory");
	cudaMemcpy(check, buf, MIB * (size_t)n, cudaMemcpyDeviceToHost);
	for (size_t i = 0; i < MIB * (size_t)n; i++)
		ok &= check[i] == 'm' + (int)(i / MIB);
	CHECK(ok, "its result");
	CHECK(ncclCommRegister(comm, buf, MIB, &handle) == ncclSuccess, "register it again");
	CHECK(ncclCommDeregister(comm, handle) == ncclSuccess, "deregister");
	CHECK(ncclCommDeregister(comm, handle) == ncclSuccess, "deregister the second");
	CHECK(ncclCommDeregister(comm, handle) == ncclInvalidUsage,
	      "a third deregister: no such registration (NCCL's 'Could not find handle')");
	CHECK(ncclCommDeregister(comm, host) == ncclInvalidUsage, "deregister what was never given");
	CHECK(ncclCommDeregister(comm, NULL) == ncclSuccess, "deregister NULL: nothing, as NCCL");
	CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess, "window deregister");
	CHECK(ncclCommWindowDeregister(comm, NULL) == ncclSuccess, "window NULL: nothing, as NCCL");
	CHECK(ncclMemFree(buf) == ncclSuccess, "MemFree");
	free(check);
}

static int case_badargs(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER, bad = NCCL_CONFIG_INITIALIZER;
	ncclComm_t comm, junk;
	cudaStream_t s;
	int v;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreate(&s);
	bad.magic = 0;
	CHECK(ncclCommInitRank(NULL, n, *id, rank) == ncclInvalidArgument, "NULL comm out");
	CHECK(ncclCommInitRank(&junk, n, *id, n) == ncclInvalidArgument, "rank == nranks");
	CHECK(ncclCommInitRank(&junk, 0, *id, 0) == ncclInvalidArgument, "nranks 0");
	CHECK(ncclCommInitRank(&junk, n, *id, -1) == ncclInvalidArgument, "rank -1");
	CHECK(ncclCommInitRankConfig(&junk, n, *id, rank, &bad) == ncclInvalidArgument,
	      "uninitialised config");
	CHECK(ncclCommInitRankConfig(&comm, n, *id, rank, &cfg) == ncclSuccess, "init");
	CHECK(ncclCommCount(comm, &v) == ncclSuccess && v == n, "count %d", v);
	CHECK(ncclCommUserRank(comm, &v) == ncclSuccess && v == rank, "rank %d", v);
	CHECK(ncclCommCuDevice(comm, &v) == ncclSuccess && v == test_device(rank), "device %d", v);
	bad_collectives(comm, s, n);
	memory_calls(comm, s, rank, n);
	/* a forked child inherits the handle but not the rank: refused there,
	 * and the parent's communicator is untouched */
	pid_t pid = fork();
	if (pid == 0)
		_exit(ncclCommDestroy(comm) == ncclInvalidArgument &&
		      ncclCommAbort(comm) == ncclInvalidArgument ? 0 : 1);
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child refused the parent's comm");
	CHECK(allgather_ok(comm, s, rank, n, 3 * MIB + 5), "data correct after bad calls");
	CHECK(ncclCommInitRankScalable(&junk, n, rank, n + 1, (ncclUniqueId *)id, NULL) ==
		      ncclInvalidArgument, "InitRankScalable: more ids than ranks");
	CHECK(ncclCommFinalize(comm) == ncclSuccess, "finalize");
	CHECK(ncclCommFinalize(comm) == ncclInvalidArgument, "finalize twice");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	CHECK(ncclAllGather(NULL, NULL, 0, ncclInt8, comm, s) == ncclInvalidArgument,
	      "destroyed comm refused");
	CHECK(ncclCommCount(comm, &v) == ncclInvalidArgument, "destroyed count");
	CHECK(ncclCommDestroy(comm) == ncclInvalidArgument, "double destroy");
	CHECK(ncclCommDestroy(NULL) == ncclSuccess, "destroy NULL is a no-op");
	CHECK(ncclCommAbort(NULL) == ncclSuccess, "abort NULL is a no-op");
	CHECK(ncclCommFinalize(NULL) == ncclSuccess, "finalize NULL is a no-op, as NCCL's");
	return CHECK_SUMMARY();
}

static int case_noargs(void)
{
	ncclComm_t more[9];
	int v = 0, ndev = 0;

	CHECK(ncclGetVersion(NULL) == ncclInvalidArgument, "NULL version");
	CHECK(ncclGetVersion(&v) == ncclSuccess && v == NCCL_VERSION_CODE,
	      "real library's version: %d", v);
	CHECK(ncclGetUniqueId(NULL) == ncclInvalidArgument, "NULL id");
	CHECK(ncclGetErrorString((ncclResult_t)999) != NULL, "unknown error string");
	CHECK(ncclCommInitAll(NULL, 2, NULL) == ncclInvalidArgument, "InitAll NULL");
	CHECK(cudaGetDeviceCount(&ndev) == cudaSuccess && ndev <= 8, "devices: %d", ndev);
	CHECK(ncclCommInitAll(more, ndev + 1, NULL) == ncclInvalidArgument,
	      "InitAll of more ranks than devices, without a list");
	/* NCCL: without a simInfo, a plain group end */
	CHECK(ncclGroupSimulateEnd(NULL) == ncclInvalidUsage, "SimulateEnd NULL, no group");
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	CHECK(ncclGroupSimulateEnd(NULL) == ncclSuccess, "SimulateEnd NULL ends the group");
	CHECK(ncclGroupEnd() == ncclInvalidUsage, "the group was ended");
	return CHECK_SUMMARY();
}

/* ---- PyTorch's expandable segments ------------------------------------- */

/* The driver's virtual memory calls, found the way PyTorch finds them
 * (dlopen of libcuda, no link-time dependency). */
struct vmm {
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*free)(CUdeviceptr, size_t);
	CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
			   unsigned long long);
	CUresult (*release)(CUmemGenericAllocationHandle);
	CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
			unsigned long long);
	CUresult (*unmap)(CUdeviceptr, size_t);
	CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
};

static int vmm_load(struct vmm *v)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

	memset(v, 0, sizeof(*v));
	if (!h)
		h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h)
		return -1;
	*(void **)&v->reserve = dlsym(h, "cuMemAddressReserve");
	*(void **)&v->free = dlsym(h, "cuMemAddressFree");
	*(void **)&v->create = dlsym(h, "cuMemCreate");
	*(void **)&v->release = dlsym(h, "cuMemRelease");
	*(void **)&v->map = dlsym(h, "cuMemMap");
	*(void **)&v->unmap = dlsym(h, "cuMemUnmap");
	*(void **)&v->access = dlsym(h, "cuMemSetAccess");
	return v->reserve && v->free && v->create && v->release && v->map && v->unmap &&
			       v->access ? 0 : -1;
}

#define SEG (2u * MIB)

/* A segment of `nseg` allocations of SEG bytes mapped side by side on
 * device `dev`, as expandable segments grow one. */
static CUdeviceptr segment(const struct vmm *v, int dev, int nseg,
			   CUmemGenericAllocationHandle *h)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, dev } };
	CUmemAccessDesc acc = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, dev },
				.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	CUdeviceptr base = 0;

	if (v->reserve(&base, (size_t)(nseg + 1) * SEG, 0, 0, 0) != CUDA_SUCCESS)
		return 0;
	for (int i = 0; i < nseg; i++)
		if (v->create(&h[i], SEG, &prop, 0) != CUDA_SUCCESS ||
		    v->map(base + (CUdeviceptr)i * SEG, SEG, 0, h[i], 0) != CUDA_SUCCESS)
			return 0;
	return v->access(base, (size_t)nseg * SEG, &acc, 1) == CUDA_SUCCESS ? base : 0;
}

static void segment_free(const struct vmm *v, CUdeviceptr base, int nseg,
			 CUmemGenericAllocationHandle *h)
{
	v->unmap(base, (size_t)nseg * SEG);
	for (int i = 0; i < nseg; i++)
		v->release(h[i]);
	v->free(base, (size_t)(nseg + 1) * SEG);
}

/* Buffers that straddle two mappings are one buffer (in place, so the
 * send slice straddles too); one that runs past the last mapping into
 * reserved but unmapped space is refused. */
static int case_expandable(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const size_t bytes = MIB + 4096; /* n x bytes from mid-mapping: crosses a seam */
	CUmemGenericAllocationHandle h[3];
	char *recv, *host = malloc(bytes * n);
	struct vmm v;
	ncclComm_t comm;
	cudaStream_t s;
	CUdeviceptr base;
	int ok = 1;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaFree(NULL); /* the primary context, as PyTorch makes it */
	cudaStreamCreate(&s);
	base = vmm_load(&v) ? 0 : segment(&v, rank, 3, h);
	CHECK(base, "a segment of 3 mappings (the driver's virtual memory calls)");
	if (!base)
		return CHECK_SUMMARY();
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	recv = (char *)(uintptr_t)(base + SEG - MIB / 2);
	test_memset(recv + rank * bytes, 'a' + rank, bytes);
	CHECK(ncclAllGather(recv + rank * bytes, recv, bytes, ncclInt8, comm, s) == ncclSuccess &&
		      cudaStreamSynchronize(s) == cudaSuccess,
	      "in-place AllGather across a seam");
	CHECK(cudaMemcpy(host, recv, bytes * n, cudaMemcpyDeviceToHost) == cudaSuccess, "read back");
	for (size_t i = 0; ok && i < bytes * n; i++)
		ok = host[i] == 'a' + (int)(i / bytes);
	CHECK(ok, "every rank's slice, bit-exact");
	/* from the middle of the last mapping, past its end */
	recv = (char *)(uintptr_t)(base + 3 * SEG - MIB);
	CHECK(ncclAllGather(recv, recv, bytes, ncclInt8, comm, s) == ncclInvalidArgument,
	      "past the last mapping: refused");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	segment_free(&v, base, 3, h);
	free(host);
	return CHECK_SUMMARY();
}

/* ---- init modes ------------------------------------------------------- */

/* NCCL's ncclCommEnsureReady: calls on a communicator whose nonblocking
 * init is under way are refused with ncclInvalidArgument (a PreMulSum made
 * then would miss the real side the init may still attach). */
static void during_init(ncclComm_t comm, cudaStream_t s)
{
	ncclResult_t e = ncclSuccess;
	ncclRedOp_t op;
	float two = 2;
	int v;

	CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclInProgress,
	      "in progress: %d", e);
	CHECK(ncclRedOpCreatePreMulSum(&op, &two, ncclFloat32, ncclScalarHostImmediate, comm) ==
		      ncclInvalidArgument, "PreMulSum during init");
	CHECK(ncclCommFinalize(comm) == ncclInvalidArgument, "finalize during init");
	CHECK(ncclCommCount(comm, &v) == ncclInvalidArgument, "count during init");
	CHECK(ncclSend(&two, 1, ncclFloat32, 0, comm, s) == ncclInvalidArgument,
	      "send during init");
}

static int case_nonblocking(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclComm_t comm;
	ncclResult_t r, e = ncclInProgress;
	cudaStream_t s;
	double t0 = now_s();

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreate(&s);
	cfg.blocking = 0;
	usleep(100000 * rank); /* arrive at different times */
	r = ncclCommInitRankConfig(&comm, n, *id, rank, &cfg);
	CHECK(r == ncclInProgress || r == ncclSuccess, "init returns %d", r);
	CHECK(comm != NULL, "*newcomm valid as soon as init returns");
	if (rank == 0) /* the others arrive later: still in progress */
		during_init(comm, s);
	while (e == ncclInProgress && now_s() - t0 < 20) {
		CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess, "poll");
		usleep(1000);
	}
	CHECK(e == ncclSuccess, "init completed: %d", e);
	CHECK(allgather_ok(comm, s, rank, n, MIB + 3), "collective after nonblocking init");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

static int case_initall(void)
{
	enum { N = 4 };
	ncclComm_t comms[N], more[N];
	cudaStream_t s[N];
	char *send[N], *recv[N], host[N * 4096];
	int ok = 1;

	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll");
	CHECK(ncclCommInitAll(more, N, NULL) == ncclSuccess, "a second set at the same time");
	for (int i = 0; i < N; i++) {
		int r = -1, d = -1;

		cudaSetDevice(i);
		cudaStreamCreate(&s[i]);
		send[i] = dev_alloc(4096, 'A' + i);
		recv[i] = dev_alloc(N * 4096, 0);
		ncclCommUserRank(comms[i], &r);
		ncclCommCuDevice(comms[i], &d);
		CHECK(r == i && d == i, "comm %d: rank %d device %d", i, r, d);
	}
	/* one thread drives all ranks: the group lets it enqueue them all */
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	for (int i = 0; i < N; i++)
		CHECK(ncclAllGather(send[i], recv[i], 4096, ncclInt8, comms[i], s[i]) == ncclSuccess,
		      "enqueue %d", i);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	CHECK(ncclGroupStart() == ncclSuccess, "group start 2");
	for (int i = 0; i < N; i++)
		CHECK(ncclBroadcast(send[i], send[i], 4096, ncclInt8, 2, more[i], s[i]) ==
			      ncclSuccess, "bcast %d", i);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end 2");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		cudaStreamSynchronize(s[i]);
		cudaMemcpy(host, recv[i], sizeof(host), cudaMemcpyDeviceToHost);
		for (int b = 0; b < N * 4096; b++)
			ok &= host[b] == 'A' + b / 4096;
		cudaMemcpy(host, send[i], 4096, cudaMemcpyDeviceToHost);
		for (int b = 0; b < 4096; b++)
			ok &= host[b] == 'C';
	}
	CHECK(ok, "AllGather and Broadcast across the ranks of one process");
	for (int i = 0; i < N; i++) {
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
		CHECK(ncclCommDestroy(more[i]) == ncclSuccess, "destroy more %d", i);
	}
	return CHECK_SUMMARY();
}

/* ---- several ranks of one process on one device ----------------------- */

/* Ranks that one process drives on one GPU share its hardware queues, which
 * may run the streams' work in submission order: a doorbell wait submitted
 * before the ring it waits for then never ends (emu: CUDAEMU_CONNECTIONS=1,
 * run with CUDAEMU_DEVICES=1).  One thread and groups: AllReduce over many
 * rounds (so that the flow control's waits on peers matter too) with
 * AllGather, then a ring of sends and receives with AlltoAll. */
enum { ONE_N = 3, ONE_FLOATS = 2 << 20 };

static float *floats_on(int rank, size_t n)
{
	float *host = malloc(n * sizeof(float)), *dev = NULL;

	for (size_t i = 0; host && i < n; i++)
		host[i] = (float)((rank + 1) * (int)(i % 1000));
	if (!host || cudaMalloc((void **)&dev, n * sizeof(float)) != cudaSuccess ||
	    test_upload(dev, host, n * sizeof(float)) != cudaSuccess)
		dev = NULL;
	free(host);
	return dev;
}

/* Every element i of the AllReduce's sum: (1 + ... + N) * (i % 1000). */
static int sum_is_right(const float *dev, size_t n, cudaStream_t st)
{
	float *host = malloc(n * sizeof(float));
	int ok = host && cudaStreamSynchronize(st) == cudaSuccess &&
		 cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;

	for (size_t i = 0; ok && i < n; i++)
		ok = host[i] == (float)(ONE_N * (ONE_N + 1) / 2 * (int)(i % 1000));
	free(host);
	return ok;
}

struct one_rank {
	cudaStream_t s;
	float *data;
	char *small, *gathered;
};

/* One thread's groups over ranks comms[0..ONE_N) of one process, rank i
 * on device dev[i]. */
static void one_process_groups(ncclComm_t *comms, const int *dev)
{
	struct one_rank o[ONE_N];
	char *ring[ONE_N], *a2a[ONE_N];
	int ok = 1;

	for (int i = 0; i < ONE_N; i++) {
		o[i] = (struct one_rank){ 0 };
		cudaSetDevice(dev[i]);
		cudaStreamCreate(&o[i].s);
		o[i].data = floats_on(i, ONE_FLOATS);
		o[i].small = dev_alloc(4096, 'a' + i);
		o[i].gathered = dev_alloc(ONE_N * 4096, 0);
		ring[i] = dev_alloc(1 << 20, 'r' + i);
		a2a[i] = dev_alloc(ONE_N << 16, 'A' + i);
		CHECK(o[i].data && o[i].small && ring[i] && a2a[i], "buffers of rank %d", i);
	}
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	for (int i = 0; i < ONE_N; i++)
		CHECK(ncclAllReduce(o[i].data, o[i].data, ONE_FLOATS, ncclFloat, ncclSum, comms[i],
				    o[i].s) == ncclSuccess &&
		      ncclAllGather(o[i].small, o[i].gathered, 4096, ncclInt8, comms[i], o[i].s) ==
			      ncclSuccess, "collectives of rank %d", i);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	for (int i = 0; i < ONE_N; i++) {
		cudaSetDevice(dev[i]);
		CHECK(sum_is_right(o[i].data, ONE_FLOATS, o[i].s), "AllReduce of rank %d", i);
		for (int r = 0; r < ONE_N; r++)
			ok &= all_bytes_on(o[i].gathered + r * 4096, 4096, 'a' + r, o[i].s);
	}
	CHECK(ok, "AllGather");

	/* ring: rank i receives rank i-1's buffer in place of its own, and
	 * every rank's AlltoAll block r goes to rank r */
	CHECK(ncclGroupStart() == ncclSuccess, "group start 2");
	for (int i = 0; i < ONE_N; i++) {
		char *got;

		cudaSetDevice(dev[i]);
		got = dev_alloc(1 << 20, 0);
		CHECK(ncclSend(ring[i], 1 << 20, ncclInt8, (i + 1) % ONE_N, comms[i], o[i].s) ==
			      ncclSuccess &&
		      ncclRecv(got, 1 << 20, ncclInt8, (i + ONE_N - 1) % ONE_N, comms[i], o[i].s) ==
			      ncclSuccess &&
		      ncclAlltoAll(a2a[i], a2a[i], 1 << 16, ncclInt8, comms[i], o[i].s) == ncclSuccess,
		      "sends, receives and AlltoAll of rank %d", i);
		ring[i] = got; /* the sent buffer is not freed: a test */
	}
	CHECK(ncclGroupEnd() == ncclSuccess, "group end 2");
	for (int i = 0; ok && i < ONE_N; i++) {
		cudaSetDevice(dev[i]);
		ok &= all_bytes_on(ring[i], 1 << 20, 'r' + (i + ONE_N - 1) % ONE_N, o[i].s);
		for (int r = 0; r < ONE_N; r++)
			ok &= all_bytes_on(a2a[i] + (r << 16), 1 << 16, 'A' + r, o[i].s);
	}
	CHECK(ok, "send/receive ring and AlltoAll");
	for (int i = 0; i < ONE_N; i++)
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
}

static int case_onegpu(void)
{
	int devs[ONE_N] = { 0 };
	ncclComm_t comms[ONE_N];
	ncclUniqueId id;

	/* as NCCL: InitAll takes a device once; ranks sharing one are made
	 * by InitRank, here from one thread in a group */
	CHECK(ncclCommInitAll(comms, ONE_N, devs) == ncclInvalidUsage,
	      "InitAll with a device listed twice is refused");
	CHECK(ncclGetUniqueId(&id) == ncclSuccess && ncclGroupStart() == ncclSuccess, "id");
	cudaSetDevice(0);
	for (int i = 0; i < ONE_N; i++)
		CHECK(ncclCommInitRank(&comms[i], ONE_N, id, i) == ncclSuccess, "init rank %d", i);
	CHECK(ncclGroupEnd() == ncclSuccess, "every rank on device 0 from one thread");
	one_process_groups(comms, devs);
	return CHECK_SUMMARY();
}

/* The same over a device per rank (ncclCommInitAll): with many rounds
 * (64K chunks), a rank's part of a group fills its streams' queues
 * (emu: CUDAEMU_QUEUE_DEPTH), where one thread enqueueing it would wait
 * for a rank it has yet to enqueue. */
static int case_manydev(void)
{
	int devs[ONE_N];
	ncclComm_t comms[ONE_N];

	for (int i = 0; i < ONE_N; i++)
		devs[i] = test_device(i);
	CHECK(ncclCommInitAll(comms, ONE_N, devs) == ncclSuccess, "InitAll");
	one_process_groups(comms, devs);
	return CHECK_SUMMARY();
}

/* Ranks first .. first+count-1 of a 3-rank communicator, on device 0,
 * from this thread: one group with an AllReduce and a send/receive ring
 * per rank. */
static int mixed_ranks(const ncclUniqueId *id, int first, int count)
{
	ncclComm_t c[2];
	cudaStream_t s[2];
	float *x[2];
	char *out[2], *in[2];
	int ok = ncclGroupStart() == ncclSuccess;

	cudaSetDevice(0);
	for (int i = 0; ok && i < count; i++)
		ok = ncclCommInitRank(&c[i], ONE_N, *id, first + i) == ncclSuccess;
	ok = ncclGroupEnd() == ncclSuccess && ok;
	for (int i = 0; ok && i < count; i++) {
		ok = cudaStreamCreate(&s[i]) == cudaSuccess &&
		     (x[i] = floats_on(first + i, ONE_FLOATS)) != NULL &&
		     (out[i] = dev_alloc(1 << 16, 'a' + first + i)) != NULL &&
		     (in[i] = dev_alloc(1 << 16, 0)) != NULL;
	}
	ok = ok && ncclGroupStart() == ncclSuccess;
	for (int i = 0; ok && i < count; i++) {
		int r = first + i;

		ok = ncclAllReduce(x[i], x[i], ONE_FLOATS, ncclFloat, ncclSum, c[i], s[i]) ==
			     ncclSuccess &&
		     ncclSend(out[i], 1 << 16, ncclInt8, (r + 1) % ONE_N, c[i], s[i]) == ncclSuccess &&
		     ncclRecv(in[i], 1 << 16, ncclInt8, (r + ONE_N - 1) % ONE_N, c[i], s[i]) ==
			     ncclSuccess;
	}
	ok = ok && ncclGroupEnd() == ncclSuccess;
	for (int i = 0; ok && i < count; i++)
		ok = sum_is_right(x[i], ONE_FLOATS, s[i]) &&
		     all_bytes_on(in[i], 1 << 16, 'a' + (first + i + ONE_N - 1) % ONE_N, s[i]);
	for (int i = 0; ok && i < count; i++)
		ok = ncclCommDestroy(c[i]) == ncclSuccess;
	return ok;
}

/* Forks this process, then makes n unique ids in the parent and hands
 * them to the child through a pipe: NCCL's id starts a thread, and a
 * child forked while a thread held a lock (ASan's allocator's, as the
 * thread started) hung at its first allocation.  fork()'s answer; *ok (in
 * the parent): the ids were made and sent.  The child leaves if it got
 * none. */
static pid_t fork_then_ids(ncclUniqueId *ids, int n, int *ok)
{
	size_t len = (size_t)n * sizeof(*ids), got = 0;
	int p[2];
	pid_t pid;

	*ok = 0;
	if (pipe(p))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		ssize_t r = 1;

		close(p[1]);
		while (got < len && (r = read(p[0], (char *)ids + got, len - got)) > 0)
			got += (size_t)r;
		if (got < len)
			_exit(3);
		close(p[0]);
		return 0;
	}
	close(p[0]);
	*ok = pid > 0;
	for (int i = 0; *ok && i < n; i++)
		*ok = ncclGetUniqueId(&ids[i]) == ncclSuccess;
	*ok = *ok && write(p[1], ids, len) == (ssize_t)len;
	close(p[1]);
	return pid;
}

/* One process drives ranks 0 and 1 on one device, whose group's end gives
 * each a thread (order.h); another process drives rank 2 alone, whose
 * group's end runs on its own thread.  Every rank must run the group's
 * collectives before its sends and receives, or two ranks run a mixed
 * group in opposite orders and wait for each other. */
static int case_mixedpaths(void)
{
	ncclUniqueId id;
	int ok, st = -1;
	pid_t pid = fork_then_ids(&id, 1, &ok);

	if (pid == 0)
		_exit(mixed_ranks(&id, 2, 1) ? 0 : 1);
	CHECK(ok, "id");
	CHECK(mixed_ranks(&id, 0, 2), "ranks 0 and 1, threads of their own: AllReduce, ring");
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "rank 2 alone in its process: AllReduce, ring (status %d)", st);
	return CHECK_SUMMARY();
}

/* A rank this process drives in case_twocomms: of communicator id (n
 * ranks), its buffers filled with base + rank. */
struct comm_rank {
	const ncclUniqueId *id;
	int n, rank;
	char base;
};

#define TWO_BYTES (5 * (1 << 20) + 3) /* larger than the staging window */

/* Initialises the k ranks of r on device 0 from this thread, then runs 3
 * groups, each with an AllGather and a send/receive ring on every rank,
 * called in r's order. */
static int comm_ranks(const struct comm_rank *r, int k)
{
	ncclComm_t c[3];
	cudaStream_t s[3];
	char *send[3], *recv[3], *out[3], *in[3];
	int ok = ncclGroupStart() == ncclSuccess;

	cudaSetDevice(0);
	for (int i = 0; ok && i < k; i++)
		ok = ncclCommInitRank(&c[i], r[i].n, *r[i].id, r[i].rank) == ncclSuccess;
	ok = ncclGroupEnd() == ncclSuccess && ok;
	for (int i = 0; ok && i < k; i++)
		ok = cudaStreamCreate(&s[i]) == cudaSuccess &&
		     (send[i] = dev_alloc(TWO_BYTES, r[i].base + r[i].rank)) != NULL &&
		     (recv[i] = dev_alloc((size_t)TWO_BYTES * (size_t)r[i].n, 0)) != NULL &&
		     (out[i] = dev_alloc(1 << 16, r[i].base + r[i].rank)) != NULL &&
		     (in[i] = dev_alloc(1 << 16, 0)) != NULL;
	for (int rep = 0; ok && rep < 3; rep++) {
		ok = ncclGroupStart() == ncclSuccess;
		for (int i = 0; ok && i < k; i++) {
			int n = r[i].n, me = r[i].rank;

			ok = ncclAllGather(send[i], recv[i], TWO_BYTES, ncclInt8, c[i], s[i]) ==
				     ncclSuccess &&
			     ncclSend(out[i], 1 << 16, ncclInt8, (me + 1) % n, c[i], s[i]) ==
				     ncclSuccess &&
			     ncclRecv(in[i], 1 << 16, ncclInt8, (me + n - 1) % n, c[i], s[i]) ==
				     ncclSuccess;
		}
		ok = ncclGroupEnd() == ncclSuccess && ok;
		for (int i = 0; ok && i < k; i++) {
			int n = r[i].n;

			for (int p = 0; ok && p < n; p++)
				ok = all_bytes_on(recv[i] + (size_t)TWO_BYTES * (size_t)p, TWO_BYTES,
						  r[i].base + p, s[i]);
			ok = ok && all_bytes_on(in[i], 1 << 16, r[i].base + (r[i].rank + n - 1) % n,
						s[i]);
		}
	}
	for (int i = 0; i < k; i++)
		ok = ncclCommDestroy(c[i]) == ncclSuccess && ok;
	return ok;
}

/* Two communicators over two processes on one device: this one drives
 * ranks 0 and 1 of A (so its group's end gives each a thread, order.h)
 * and rank 0 of B, and calls B first; the other drives rank 2 of A and
 * rank 1 of B, and calls A first.  With the device's streams on one
 * queue, every rank must submit the communicators in one order (job
 * key), on either path of the group's end, or each waits for the
 * other's second. */
static int case_twocomms(void)
{
	ncclUniqueId ids[2];
	int ok, st = -1;
	pid_t pid = fork_then_ids(ids, 2, &ok);

	if (pid == 0) {
		const struct comm_rank q[] = { { &ids[0], 3, 2, 'a' }, { &ids[1], 2, 1, 'A' } };

		_exit(comm_ranks(q, 2) ? 0 : 1);
	}
	CHECK(ok, "ids");
	const struct comm_rank p[] = { { &ids[1], 2, 0, 'A' }, { &ids[0], 3, 0, 'a' },
				       { &ids[0], 3, 1, 'a' } };

	CHECK(comm_ranks(p, 3), "ranks 0 and 1 of A, 0 of B: AllGathers, rings");
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "rank 2 of A and 1 of B in the other process (status %d)", st);
	return CHECK_SUMMARY();
}

/* One thread splits every rank of a communicator inside a group, as NCCL
 * allows (a grouped split completes at ncclGroupEnd): by parity, rank 3
 * out (NCCL_SPLIT_NOCOLOR); then a grouped AllGather on the children. */
static int case_splitgroup(void)
{
	enum { N = 4 };
	ncclComm_t comms[N], kids[N];
	cudaStream_t s[N];
	char *send[N], *recv[N], host[2 * 4096];
	int ok = 1;

	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll");
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	for (int i = 0; i < N; i++)
		CHECK(ncclCommSplit(comms[i], i == 3 ? NCCL_SPLIT_NOCOLOR : i % 2, i, &kids[i],
				    NULL) == ncclSuccess, "split %d", i);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	for (int i = 0; i < N; i++) {
		int want = i == 3 ? -1 : i == 1 ? 1 : 2, v = -1, r = -1;

		if (want < 0) {
			CHECK(kids[i] == NULL, "NOCOLOR rank %d gets no communicator", i);
			continue;
		}
		CHECK(kids[i] && ncclCommCount(kids[i], &v) == ncclSuccess && v == want,
		      "child of rank %d: %d ranks", i, v);
		CHECK(kids[i] && ncclCommUserRank(kids[i], &r) == ncclSuccess && r == i / 2,
		      "child of rank %d: rank %d", i, r);
	}
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		cudaStreamCreate(&s[i]);
		send[i] = dev_alloc(4096, 'A' + i);
		recv[i] = dev_alloc(2 * 4096, 0);
	}
	CHECK(ncclGroupStart() == ncclSuccess, "group start 2");
	for (int i = 0; i < N; i++)
		if (kids[i])
			CHECK(ncclAllGather(send[i], recv[i], 4096, ncclInt8, kids[i], s[i]) ==
				      ncclSuccess, "AllGather %d", i);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end 2");
	for (int i = 0; i < N; i++) {
		int n = i == 1 ? 1 : 2;

		if (!kids[i])
			continue;
		cudaSetDevice(i);
		cudaStreamSynchronize(s[i]);
		cudaMemcpy(host, recv[i], (size_t)n * 4096, cudaMemcpyDeviceToHost);
		for (int b = 0; b < n * 4096; b++)
			ok &= host[b] == 'A' + (i % 2) + 2 * (b / 4096);
	}
	CHECK(ok, "AllGather on the children");
	for (int i = 0; i < N; i++) {
		if (kids[i])
			CHECK(ncclCommDestroy(kids[i]) == ncclSuccess, "destroy child %d", i);
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	}
	return CHECK_SUMMARY();
}

static int fill_is(const char *dev, size_t n, int v, char *host);

/* A captured graph and its instance, either of them possibly never made. */
static void graph_free(cudaGraphExec_t exec, cudaGraph_t g)
{
	if (exec)
		cudaGraphExecDestroy(exec);
	if (g)
		cudaGraphDestroy(g);
}

/* One thread drives two ranks and replays what it captured of both: a
 * group with an AllReduce per rank, each on its rank's stream, captured
 * into a graph per stream and replayed 20 times, the two graphs at once.
 * CUDA may run the host functions of a process one at a time (run with
 * CUDAEMU_SERIAL_HOST_FNS=1): a host node that blocked (the replay
 * barriers before gcoll.h) would wait for the other rank's, queued
 * behind it. */
static int case_graphall(void)
{
	enum { N = 2, B = 4096, REPLAYS = 20 };
	ncclComm_t comms[N];
	cudaStream_t s[N];
	cudaGraph_t g[N] = { NULL, NULL };
	cudaGraphExec_t exec[N] = { NULL, NULL };
	char *in[N], *out[N], host[B];
	int bad = -1;

	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		cudaStreamCreate(&s[i]);
		in[i] = dev_alloc(B, 0);
		out[i] = dev_alloc(B, 0);
	}
	for (int i = 0; i < N; i++)
		CHECK(cudaStreamBeginCapture(s[i], cudaStreamCaptureModeThreadLocal) ==
			      cudaSuccess, "capture %d", i);
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	for (int i = 0; i < N; i++)
		CHECK(ncclAllReduce(in[i], out[i], B, ncclInt8, ncclSum, comms[i], s[i]) ==
			      ncclSuccess, "AllReduce %d", i);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		CHECK(cudaStreamEndCapture(s[i], &g[i]) == cudaSuccess && g[i], "end capture %d", i);
		CHECK(g[i] && cudaGraphInstantiate(&exec[i], g[i], 0) == cudaSuccess,
		      "instantiate %d", i);
	}
	for (int it = 0; exec[0] && exec[1] && it < REPLAYS && bad < 0; it++) {
		for (int i = 0; i < N; i++) {
			cudaSetDevice(i);
			cudaMemsetAsync(in[i], it + 1 + i, B, s[i]);
			CHECK(cudaGraphLaunch(exec[i], s[i]) == cudaSuccess, "launch %d/%d", i, it);
		}
		for (int i = 0; i < N; i++) {
			cudaSetDevice(i);
			cudaStreamSynchronize(s[i]);
			cudaMemcpy(host, out[i], B, cudaMemcpyDeviceToHost);
			for (int b = 0; b < B; b++)
				if (host[b] != (char)(2 * it + 3))
					bad = it;
		}
	}
	CHECK(bad < 0, "replay %d gave wrong sums", bad);
	for (int i = 0; i < N; i++) {
		graph_free(exec[i], g[i]);
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	}
	return CHECK_SUMMARY();
}

/* As graphall, with a send/receive pair per rank (each rank sends to the
 * other and receives from it, bigger than the captured slots hold), and
 * the two graphs launched one after the other from one thread. */
static int case_graphall_p2p(void)
{
	enum { N = 2, REPLAYS = 20 };
	const size_t B = 3 * MIB + 5;
	ncclComm_t comms[N];
	cudaStream_t s[N];
	cudaGraph_t g[N] = { NULL, NULL };
	cudaGraphExec_t exec[N] = { NULL, NULL };
	char *in[N], *out[N], *host = malloc(B);
	int bad = -1;

	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		cudaStreamCreate(&s[i]);
		in[i] = dev_alloc(B, 0);
		out[i] = dev_alloc(B, 0);
	}
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		CHECK(cudaStreamBeginCapture(s[i], cudaStreamCaptureModeThreadLocal) ==
			      cudaSuccess, "capture %d", i);
		CHECK(ncclGroupStart() == ncclSuccess, "group start");
		CHECK(ncclSend(in[i], B, ncclInt8, 1 - i, comms[i], s[i]) == ncclSuccess, "send %d", i);
		CHECK(ncclRecv(out[i], B, ncclInt8, 1 - i, comms[i], s[i]) == ncclSuccess, "recv %d", i);
		CHECK(ncclGroupEnd() == ncclSuccess, "group end");
		CHECK(cudaStreamEndCapture(s[i], &g[i]) == cudaSuccess && g[i], "end capture %d", i);
		CHECK(g[i] && cudaGraphInstantiate(&exec[i], g[i], 0) == cudaSuccess,
		      "instantiate %d", i);
	}
	for (int it = 0; exec[0] && exec[1] && it < REPLAYS && bad < 0; it++) {
		double t0 = now_s();

		for (int i = 0; i < N; i++) {
			cudaSetDevice(i);
			cudaMemsetAsync(in[i], it + 1 + i, B, s[i]);
			CHECK(cudaGraphLaunch(exec[i], s[i]) == cudaSuccess, "launch %d/%d", i, it);
		}
		for (int i = 0; i < N; i++) {
			cudaSetDevice(i);
			while (cudaStreamQuery(s[i]) == cudaErrorNotReady && now_s() - t0 < 10)
				usleep(1000);
			if (cudaStreamQuery(s[i]) == cudaErrorNotReady) {
				CHECK(0, "replay %d of rank %d stuck", it, i);
				(void)CHECK_SUMMARY();
				fflush(NULL);
				_exit(1);
			}
			if (!fill_is(out[i], B, it + 1 + (1 - i), host))
				bad = it;
		}
	}
	CHECK(bad < 0, "replay %d received wrong bytes", bad);
	for (int i = 0; i < N; i++) {
		graph_free(exec[i], g[i]);
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	}
	free(host);
	return CHECK_SUMMARY();
}

/* Captures a group AllReduce of in[i] into out[i] (CAPTURE_B bytes) on each
 * of n communicators, one stream each, and replays it once.  No allocation or free, which another
 * thread's global capture would forbid.  1 when the sums are right. */
#define CAPTURE_B 4096

static int capture_all(ncclComm_t *comms, cudaStream_t *s, int n, char **in, char **out,
		       cudaGraph_t *g, cudaGraphExec_t *exec)
{
	char host[CAPTURE_B];
	int ok = 1;

	for (int i = 0; i < n; i++)
		ok = ok && cudaStreamBeginCapture(s[i], cudaStreamCaptureModeThreadLocal) ==
				   cudaSuccess;
	ncclGroupStart();
	for (int i = 0; i < n; i++)
		ok = ok && ncclAllReduce(in[i], out[i], CAPTURE_B, ncclInt8, ncclSum, comms[i], s[i]) ==
				   ncclSuccess;
	ok = ncclGroupEnd() == ncclSuccess && ok;
	for (int i = 0; i < n; i++) {
		cudaSetDevice(i);
		g[i] = NULL;
		exec[i] = NULL;
		ok = cudaStreamEndCapture(s[i], &g[i]) == cudaSuccess && ok;
		ok = ok && cudaGraphInstantiate(&exec[i], g[i], 0) == cudaSuccess;
	}
	for (int i = 0; ok && i < n; i++) {
		cudaSetDevice(i);
		cudaMemsetAsync(in[i], i + 1, CAPTURE_B, s[i]);
		cudaMemsetAsync(out[i], 0, CAPTURE_B, s[i]);
		ok = cudaGraphLaunch(exec[i], s[i]) == cudaSuccess;
	}
	for (int i = 0; ok && i < n; i++) {
		cudaSetDevice(i);
		ok = cudaStreamSynchronize(s[i]) == cudaSuccess &&
		     cudaMemcpyAsync(host, out[i], CAPTURE_B, cudaMemcpyDeviceToHost, s[i]) ==
			     cudaSuccess &&
		     cudaStreamSynchronize(s[i]) == cudaSuccess;
		for (int b = 0; ok && b < CAPTURE_B; b++)
			ok = host[b] == (char)(n * (n + 1) / 2);
	}
	return ok;
}

/* Another thread's global capture, open while the main thread captures
 * and destroys. */
struct bystander {
	pthread_mutex_t m;
	pthread_cond_t cv;
	int stage;              /* 1: capturing, 2: the main thread is done */
	cudaError_t begin, end;
};

static void bystander_step(struct bystander *b, int stage)
{
	pthread_mutex_lock(&b->m);
	b->stage = stage;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->m);
}

static void bystander_wait(struct bystander *b, int stage)
{
	pthread_mutex_lock(&b->m);
	while (b->stage < stage)
		pthread_cond_wait(&b->cv, &b->m);
	pthread_mutex_unlock(&b->m);
}

static void *bystander_capture(void *arg)
{
	struct bystander *b = arg;
	cudaStream_t s;
	cudaGraph_t g = NULL;
	char *buf;

	cudaSetDevice(0);
	buf = dev_alloc(4096, 0);
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	b->begin = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
	cudaMemsetAsync(buf, 7, 4096, s);
	bystander_step(b, 1);
	bystander_wait(b, 2);
	b->end = cudaStreamEndCapture(s, &g);
	if (g)
		cudaGraphDestroy(g);
	cudaStreamDestroy(s);
	cudaFree(buf);
	return NULL;
}

/* While another thread captures in global mode (PyTorch may capture on
 * one thread while another sets up or tears down a process group),
 * communicators capture their first operations, then are destroyed:
 * what they do then (once, registering a page of the gate words replays
 * had until session 33) must neither fail nor invalidate that capture
 * (destroy's did).  Then new communicators capture and
 * replay. */
static int case_graph_destroy_capturing(void)
{
	enum { N = 2 };
	ncclComm_t comms[N];
	cudaStream_t s[N];
	cudaGraph_t g[N];
	cudaGraphExec_t exec[N];
	char *in[N], *out[N];
	struct bystander b = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
			       cudaSuccess, cudaSuccess };
	pthread_t t;

	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking);
		in[i] = dev_alloc(CAPTURE_B, 0);
		out[i] = dev_alloc(CAPTURE_B, 0);
	}
	pthread_create(&t, NULL, bystander_capture, &b);
	bystander_wait(&b, 1);
	CHECK(capture_all(comms, s, N, in, out, g, exec), "captured AllReduces replay");
	for (int i = 0; i < N; i++) {
		graph_free(exec[i], g[i]);
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	}
	bystander_step(&b, 2);
	pthread_join(t, NULL);
	CHECK(b.begin == cudaSuccess && b.end == cudaSuccess,
	      "the other thread's capture survived: begin %d, end %d", b.begin, b.end);
	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll again");
	CHECK(capture_all(comms, s, N, in, out, g, exec), "new communicators capture and replay");
	for (int i = 0; i < N; i++) {
		graph_free(exec[i], g[i]);
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d again", i);
		cudaFree(in[i]);
		cudaFree(out[i]);
	}
	return CHECK_SUMMARY();
}

/* Many captured operations on one communicator (more than a page of the
 * gate words replays had until session 33 held, 512): a chain of ncclMax
 * AllReduces, each reading the one before, replayed with new inputs.
 * Its many slot-flag waits a replay must not each wait out a sleep of
 * the emulation's stream wait (50 ms: a replay of 1200 such waits took
 * 60 s, and the case timed out). */
#define MANY_OPS 600

static int case_graph_many(int rank, int n, const ncclUniqueId *id, void *arg)
{
	enum { B = 64 };
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	char *chain = dev_alloc((size_t)B * (MANY_OPS + 1), 0), host[B];
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	int bad = -1;

	(void)arg;
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	for (int k = 0; k < MANY_OPS; k++)
		if (ncclAllReduce(chain + k * B, chain + (k + 1) * B, B, ncclInt8, ncclMax, comm, s) !=
		    ncclSuccess) {
			CHECK(0, "captured AllReduce %d", k);
			break;
		}
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(g && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	for (int it = 0; exec && it < 3 && bad < 0; it++) {
		cudaMemsetAsync(chain, 0, (size_t)B * (MANY_OPS + 1), s);
		cudaMemsetAsync(chain, 10 * it + rank + 1, B, s);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		cudaMemcpy(host, chain + (size_t)MANY_OPS * B, B, cudaMemcpyDeviceToHost);
		for (int b = 0; b < B; b++)
			if (host[b] != (char)(10 * it + n))
				bad = it;
	}
	CHECK(bad < 0, "replay %d: the chain's end is wrong", bad);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op after the replays");
	if (exec)
		cudaGraphExecDestroy(exec);
	if (g)
		cudaGraphDestroy(g);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* One thread drives two ranks on two devices and calls each with the
 * other device current, outside any group (NCCL sets the communicator's
 * device itself): an AllReduce, a send/receive, and an AllReduce captured
 * and replayed.  CUDA records an event only on a stream of the event's
 * own context (cuEventRecord), which the emulation checks: the shim must
 * enqueue in the communicator's context. */
static int case_wrongctx(void)
{
	enum { N = 2, B = 4096 };
	ncclComm_t comms[N];
	cudaStream_t s[N];
	cudaGraph_t g[N] = { NULL, NULL };
	cudaGraphExec_t exec[N] = { NULL, NULL };
	char *in[N], *out[N], *got[N];
	ncclResult_t err;

	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		cudaStreamCreate(&s[i]);
		in[i] = dev_alloc(B, i + 1);
		out[i] = dev_alloc(B, 0);
		got[i] = dev_alloc(B, 0);
	}
	for (int i = 0; i < N; i++) {
		cudaSetDevice(1 - i);
		CHECK(ncclAllReduce(in[i], out[i], B, ncclInt8, ncclSum, comms[i], s[i]) ==
			      ncclSuccess, "AllReduce %d, device %d current", i, 1 - i);
	}
	cudaSetDevice(1);
	CHECK(ncclSend(in[0], B, ncclInt8, 1, comms[0], s[0]) == ncclSuccess, "send, device 1 current");
	cudaSetDevice(0);
	CHECK(ncclRecv(got[1], B, ncclInt8, 0, comms[1], s[1]) == ncclSuccess, "receive, device 0 current");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(i);
		CHECK(all_bytes_on(out[i], B, 3, s[i]), "AllReduce %d's sum", i);
	}
	CHECK(all_bytes_on(got[1], B, 1, s[1]), "the received bytes");
	for (int i = 0; i < N; i++) {
		cudaSetDevice(1 - i);
		CHECK(cudaStreamBeginCapture(s[i], cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture %d", i);
		CHECK(ncclAllReduce(in[i], out[i], B, ncclInt8, ncclMax, comms[i], s[i]) ==
			      ncclSuccess, "captured AllReduce %d", i);
		CHECK(cudaStreamEndCapture(s[i], &g[i]) == cudaSuccess && g[i], "end capture %d", i);
		CHECK(g[i] && cudaGraphInstantiate(&exec[i], g[i], 0) == cudaSuccess,
		      "instantiate %d", i);
	}
	for (int it = 0; exec[0] && exec[1] && it < 3; it++) {
		for (int i = 0; i < N; i++) {
			cudaSetDevice(i);
			CHECK(cudaGraphLaunch(exec[i], s[i]) == cudaSuccess, "launch %d/%d", i, it);
		}
		for (int i = 0; i < N; i++) {
			cudaSetDevice(i);
			CHECK(all_bytes_on(out[i], B, 2, s[i]), "replay %d of %d: the max", it, i);
		}
	}
	for (int i = 0; i < N; i++) {
		err = ncclInternalError;
		CHECK(ncclCommGetAsyncError(comms[i], &err) == ncclSuccess && err == ncclSuccess,
		      "communicator %d healthy (%d)", i, (int)err);
		graph_free(exec[i], g[i]);
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	}
	return CHECK_SUMMARY();
}

/* One thread shrinks two of three ranks inside a group (rank 2 out), as
 * NCCL allows: each shrink returns at once and the children are ready at
 * ncclGroupEnd, with 2 ranks, their ranks kept in order. */
static int case_shrinkgroup(void)
{
	enum { N = 3 };
	ncclComm_t comms[N], kids[2] = { NULL, NULL };
	int out = 2;
	double t0;

	CHECK(ncclCommInitAll(comms, N, NULL) == ncclSuccess, "InitAll");
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	t0 = now_s();
	for (int i = 0; i < 2; i++)
		CHECK(ncclCommShrink(comms[i], &out, 1, &kids[i], NULL, NCCL_SHRINK_DEFAULT) ==
			      ncclSuccess,
		      "shrink %d", i);
	CHECK(now_s() - t0 < 1.0, "the shrinks returned at once: %.2f s", now_s() - t0);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	for (int i = 0; i < 2; i++) {
		int v = -1, r = -1;

		CHECK(kids[i] && ncclCommCount(kids[i], &v) == ncclSuccess && v == 2,
		      "child %d: %d ranks", i, v);
		CHECK(kids[i] && ncclCommUserRank(kids[i], &r) == ncclSuccess && r == i,
		      "child %d: rank %d", i, r);
		if (kids[i])
			CHECK(ncclCommDestroy(kids[i]) == ncclSuccess, "destroy child %d", i);
	}
	for (int i = 0; i < N; i++)
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	return CHECK_SUMMARY();
}

/* ---- failures --------------------------------------------------------- */

/* Polls until the communicator reports an error; returns seconds taken
 * or -1 when none came within `limit` seconds. */
static double wait_error(ncclComm_t comm, ncclResult_t *e, double limit)
{
	double t0 = now_s();

	do {
		ncclCommGetAsyncError(comm, e);
		if (*e != ncclSuccess && *e != ncclInProgress)
			return now_s() - t0;
		usleep(2000);
	} while (now_s() - t0 < limit);
	return -1;
}

/* The victim: joins, does one good collective, then dies with the second
 * one half enqueued. */
static void victim(int rank, int n, const ncclUniqueId *id)
{
	ncclComm_t comm;
	cudaStream_t s;
	char *send, *recv;

	cudaSetDevice(test_device(rank));
	cudaStreamCreate(&s);
	if (ncclCommInitRank(&comm, n, *id, rank) != ncclSuccess)
		_exit(3);
	if (!allgather_ok(comm, s, rank, n, 4096))
		_exit(4);
	launch_barrier();
	send = dev_alloc(64 * MIB, 1);
	recv = dev_alloc(64 * MIB * (size_t)n, 0);
	ncclAllGather(send, recv, 64 * MIB, ncclInt8, comm, s);
	usleep(20000);
	raise(SIGKILL);
}

static int case_kill(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm;
	cudaStream_t s;
	ncclResult_t e = ncclSuccess;
	char *send, *recv;
	double took;

	(void)arg;
	if (rank == n - 1) {
		pid_t pid = fork();
		int st;

		if (pid == 0)
			victim(rank, n, id);
		waitpid(pid, &st, 0);
		return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : 1;
	}
	comm = join(rank, n, id, &s);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "first collective");
	launch_barrier();
	send = dev_alloc(64 * MIB, 1);
	recv = dev_alloc(64 * MIB * (size_t)n, 0);
	/* the death is reported by this call when the watchdog already saw
	 * it, otherwise by ncclCommGetAsyncError while the call is pending */
	e = ncclAllGather(send, recv, 64 * MIB, ncclInt8, comm, s);
	CHECK(e == ncclSuccess || e == ncclRemoteError, "enqueue: %d", e);
	took = e == ncclSuccess ? wait_error(comm, &e, 20) : 0;
	CHECK(took >= 0 && e == ncclRemoteError, "peer death reported: %d after %.2fs", e, took);
	CHECK(ncclAllGather(send, recv, 16, ncclInt8, comm, s) != ncclSuccess,
	      "a failed communicator refuses new work");
	CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the stream drained after the abort");
	return CHECK_SUMMARY();
}

struct aborter {
	ncclComm_t comm;
	int delay_ms;
};

static void *abort_later(void *arg)
{
	struct aborter *a = arg;

	usleep((useconds_t)a->delay_ms * 1000);
	ncclCommAbort(a->comm);
	return NULL;
}

/* An enqueue that blocks in the driver, its stream's queue full behind a
 * doorbell wait (run with CUDAEMU_QUEUE_DEPTH=4, as a GPU's bounded queue,
 * and a short CXLSHIM_TIMEOUT_OP_MS): rank 0's large AllGather, which
 * rank 1 never joins ("never") or which it cannot join, having died
 * ("dead").  The operation is not counted before its enqueue ends, and
 * the watchdog took the communicator for idle: neither the timeout nor
 * the dead peer was noticed and the call never returned. */
static int case_enqueue_blocked(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *how = arg;
	size_t bytes = 16 * MIB;
	ncclResult_t r, e = ncclSuccess;
	ncclComm_t comm;
	cudaStream_t s;
	char *buf;
	double t0;

	comm = join(rank, n, id, &s);
	buf = dev_alloc(bytes * (size_t)n, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "first collective");
	launch_barrier();
	if (rank == 1) {
		if (!strcmp(how, "dead"))
			_exit(0); /* dies without a word, its communicator joined */
		CHECK(wait_error(comm, &e, 30) >= 0 && e == ncclRemoteError,
		      "%s: the peer's timeout seen: %d", how, e);
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
		return CHECK_SUMMARY();
	}
	usleep(100000);
	t0 = now_s();
	r = ncclAllGather(buf, buf, bytes, ncclInt8, comm, s);
	CHECK(now_s() - t0 < 30, "%s: the blocked enqueue returned after %.2fs", how, now_s() - t0);
	CHECK(r == ncclSuccess || r == ncclSystemError || r == ncclRemoteError, "%s: call %d", how,
	      r);
	CHECK(wait_error(comm, &e, 30) >= 0 &&
		      e == (!strcmp(how, "dead") ? ncclRemoteError : ncclSystemError),
	      "%s: error %d", how, e);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "%s: the stream drained", how);
	CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
	return CHECK_SUMMARY();
}

/* Rank 0 enqueues a collective rank 1 never joins; another thread aborts. */
static int case_abort(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm;
	cudaStream_t s;
	pthread_t t;
	struct aborter a;
	char *buf;
	double t0;

	(void)arg;
	comm = join(rank, n, id, &s);
	buf = dev_alloc(MIB * (size_t)n, 0);
	if (rank == 0) {
		a.comm = comm;
		a.delay_ms = 300;
		CHECK(ncclAllGather(buf, buf, MIB, ncclInt8, comm, s) == ncclSuccess, "enqueue");
		t0 = now_s();
		pthread_create(&t, NULL, abort_later, &a);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "stream sync returns");
		CHECK(now_s() - t0 < 10, "unblocked by the abort after %.2fs", now_s() - t0);
		pthread_join(t, NULL);
	} else {
		ncclResult_t e = ncclSuccess;

		/* the peer sees the abort as a remote error */
		CHECK(wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError, "remote abort: %d", e);
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after remote abort");
	}
	return CHECK_SUMMARY();
}

/* Rank 0 replays a captured AllGather alone, its stream waiting for rank
 * 1's slot flags, and another thread aborts: the abort returns, the
 * stream completes, and replays after the abort complete too.  Rank 1
 * sees the remote error, replays as well (the failed flags let its waits
 * pass) and destroys. */
static int case_graph_abort(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 4096;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	char *send = dev_alloc(bytes, rank + 1), *recv = dev_alloc(bytes * n, 0);
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	ncclResult_t e = ncclSuccess;
	double t0;

	(void)arg;
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclAllGather(send, recv, bytes, ncclInt8, comm, s) == ncclSuccess, "captured");
	exec = end_and_replay(s, &g, 2);
	launch_barrier();
	if (rank == 0) {
		struct aborter a = { comm, 300 };
		pthread_t t;

		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch alone");
		t0 = now_s();
		pthread_create(&t, NULL, abort_later, &a);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync after the abort");
		pthread_join(t, NULL);
		CHECK(now_s() - t0 < 3, "abort and stream done after %.2fs", now_s() - t0);
		t0 = now_s();
		for (int it = 0; it < 3; it++)
			CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d after abort", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync replays after the abort");
		CHECK(now_s() - t0 < 3, "replays after the abort done in %.2fs", now_s() - t0);
	} else {
		CHECK(wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError, "remote abort: %d", e);
		t0 = now_s();
		for (int it = 0; it < 3; it++)
			CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d after failure", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync replays after the failure");
		CHECK(now_s() - t0 < 3, "replays after the failure done in %.2fs", now_s() - t0);
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after remote abort");
	}
	launch_barrier();
	if (exec)
		cudaGraphExecDestroy(exec);
	if (g)
		cudaGraphDestroy(g);
	return CHECK_SUMMARY();
}

/* The enqueue that rank 0's main thread makes while its other thread
 * aborts: a collective, or a send/receive group. */
static ncclResult_t enqueue_one(ncclComm_t comm, cudaStream_t s, int rank, const char *what,
				char *send, char *recv)
{
	ncclResult_t r, r2;

	if (!strcmp(what, "coll"))
		return ncclAllGather(send, recv, MIB, ncclInt8, comm, s);
	ncclGroupStart();
	r = ncclSend(send, MIB, ncclInt8, 1 - rank, comm, s);
	r2 = ncclRecv(recv, MIB, ncclInt8, 1 - rank, comm, s);
	if (r == ncclSuccess)
		r = r2;
	r2 = ncclGroupEnd();
	return r != ncclSuccess ? r : r2;
}

struct enq_aborter {
	ncclComm_t comm;
	double took;            /* how long ncclCommAbort took */
	ncclResult_t r;
};

static void *abort_during_enqueue(void *arg)
{
	struct enq_aborter *a = arg;

	double t0;

	usleep(200 * 1000); /* the main thread is held in its enqueue by now */
	t0 = now_s();
	a->r = ncclCommAbort(a->comm);
	a->took = now_s() - t0;
	return NULL;
}

/* ncclCommAbort from another thread while the main thread is inside an
 * enqueue on the same communicator (PyTorch's watchdog does this).  On
 * rank 0 CXLSHIM_TEST_ENQUEUE_PAUSE_MS holds the enqueue at its start
 * until the abort began, then 300 ms more: the abort must not give the
 * pool record back before the enqueue left (it would queue work against
 * a record the next communicator may own), so it takes those 300 ms, and
 * the enqueue must see the abort and fail instead of enqueueing.  The pool has one communicator
 * slot (tests/run.sh): the next communicator gets the same record, so
 * it must have been given back, and only once. */
static int case_abort_enqueue(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *what = arg;
	struct enq_aborter a = { 0 };
	ncclComm_t comm, next;
	cudaStream_t s;
	pthread_t t;
	ncclResult_t r, e = ncclSuccess;
	char *send, *recv;
	double t0;

	if (rank == 0)
		setenv("CXLSHIM_TEST_ENQUEUE_PAUSE_MS", "300", 1);
	comm = join(rank, n, id, &s);
	unsetenv("CXLSHIM_TEST_ENQUEUE_PAUSE_MS");
	send = dev_alloc(MIB, 'a' + rank);
	recv = dev_alloc(MIB * (size_t)n, 0);
	if (rank == 0) {
		a.comm = comm;
		t0 = now_s();
		pthread_create(&t, NULL, abort_during_enqueue, &a);
		r = enqueue_one(comm, s, rank, what, send, recv);
		pthread_join(t, NULL);
		CHECK(r == ncclRemoteError, "the enqueue saw the abort and failed: %d", r);
		CHECK(a.r == ncclSuccess, "abort: %d", a.r);
		CHECK(a.took >= 0.29, "the abort returned after %.3fs, before the held enqueue left",
		      a.took);
		CHECK(now_s() - t0 < 5, "the abort released the held enqueue (%.2fs)", now_s() - t0);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the stream drains");
	} else {
		r = enqueue_one(comm, s, rank, what, send, recv);
		CHECK(r == ncclSuccess || r == ncclRemoteError, "peer's enqueue: %d", r);
		CHECK(wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError, "remote abort: %d", e);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the peer's stream drains");
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after remote abort");
	}
	/* both gave the record back: the same id makes a new communicator in
	 * the pool's only slot */
	launch_barrier();
	CHECK(ncclCommInitRank(&next, n, *id, rank) == ncclSuccess,
	      "the next communicator gets the record");
	CHECK(ncclCommDestroy(comm) == ncclInvalidArgument, "the aborted handle stays dead");
	CHECK(allgather_ok(next, s, rank, n, MIB), "the next communicator works");
	CHECK(ncclCommDestroy(next) == ncclSuccess, "destroy the next one");
	cudaFree(send);
	cudaFree(recv);
	return CHECK_SUMMARY();
}

/* ---- revoke ------------------------------------------------------------- */

/* Rank 2 stops taking part; ranks 0 and 1 revoke their communicator while
 * an AllGather waits for it, see it quiesce, shrink it to the two of them
 * and carry on. */
static int case_revoke(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm, small = NULL;
	cudaStream_t s;
	ncclResult_t e = ncclSuccess;
	int gone = 2, count = 0;
	char *buf;
	double t0;

	(void)arg;
	comm = join(rank, n, id, &s);
	buf = dev_alloc(MIB * (size_t)n, 0);
	if (rank == gone) {
		CHECK(wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError, "revoke seen: %d", e);
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
		return CHECK_SUMMARY();
	}
	CHECK(ncclAllGather(buf + rank * MIB, buf, MIB, ncclInt8, comm, s) == ncclSuccess, "enqueue");
	usleep(200000);
	CHECK(ncclCommRevoke(comm, 1) == ncclInvalidArgument, "flags must be 0");
	t0 = now_s();
	CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclSuccess, "revoke");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the waiting stream is released");
	do
		ncclCommGetAsyncError(comm, &e);
	while (e == ncclInProgress && now_s() - t0 < 10);
	CHECK(e == ncclSuccess, "quiescent after revoke: %d", e);
	/* as NCCL 2.28: new work is misuse, and a revoke is a finalize */
	CHECK(ncclAllGather(buf, buf, 16, ncclInt8, comm, s) == ncclInvalidUsage, "no new work");
	CHECK(ncclSend(buf, 16, ncclInt8, 0, comm, s) == ncclInvalidUsage, "no send either");
	CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclInvalidArgument, "not twice");
	CHECK(ncclCommFinalize(comm) == ncclInvalidArgument, "no finalize after revoke");
	CHECK(ncclCommShrink(comm, &gone, 1, &small, NULL, NCCL_SHRINK_DEFAULT) == ncclSuccess,
	      "shrink the revoked communicator");
	CHECK(small && ncclCommCount(small, &count) == ncclSuccess && count == 2, "2 ranks left");
	CHECK(small && allgather_ok(small, s, rank, 2, MIB), "the shrunk communicator works");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy the revoked one");
	if (small)
		CHECK(ncclCommDestroy(small) == ncclSuccess, "destroy the shrunk one");
	return CHECK_SUMMARY();
}

/* Both ranks revoke their communicator (rank 0 with an AllGather waiting
 * for rank 1), see it quiesce, and split it: nccl.h lets destroy, split
 * and shrink follow a revoke. */
/* Polls comm until it leaves ncclInProgress (10 s at most). */
static ncclResult_t settle(ncclComm_t comm)
{
	ncclResult_t e = ncclInProgress;
	double t0 = now_s();

	do
		ncclCommGetAsyncError(comm, &e);
	while (e == ncclInProgress && now_s() - t0 < 10);
	return e;
}

/* arg "nb": a nonblocking communicator, whose split runs in the
 * background. */
static int case_revoke_split(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	int nb = arg && !strcmp(arg, "nb");
	ncclComm_t comm = NULL, kid = NULL;
	cudaStream_t s;
	ncclResult_t r;
	int v = -1;
	char *buf;

	cudaSetDevice(test_device(rank));
	cudaStreamCreate(&s);
	cfg.blocking = !nb;
	r = ncclCommInitRankConfig(&comm, n, *id, rank, &cfg);
	CHECK((r == ncclSuccess || (nb && r == ncclInProgress)) && settle(comm) == ncclSuccess,
	      "init: %d", r);
	buf = dev_alloc(MIB * (size_t)n, 0);
	if (rank == 0)
		CHECK(ncclAllGather(buf, buf, MIB, ncclInt8, comm, s) == ncclSuccess, "enqueue");
	launch_barrier();
	CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclSuccess, "revoke");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the stream is released");
	CHECK(settle(comm) == ncclSuccess, "quiescent after revoke");
	r = ncclCommSplit(comm, 0, -rank, &kid, NULL);
	CHECK(r == (nb ? ncclInProgress : ncclSuccess), "split the revoked one: %d", r);
	CHECK(kid && settle(kid) == ncclSuccess && settle(comm) == ncclSuccess, "split done");
	CHECK(kid && ncclCommCount(kid, &v) == ncclSuccess && v == n, "split size %d", v);
	CHECK(kid && allgather_ok(kid, s, n - 1 - rank, n, MIB), "the split works");
	if (kid)
		CHECK(ncclCommDestroy(kid) == ncclSuccess, "destroy the split");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy the revoked one");
	cudaFree(buf);
	return CHECK_SUMMARY();
}

/* ---- mismatched calls --------------------------------------------------- */

/* Rank 1 disagrees with the others about operation 2 (AllGather count,
 * Broadcast root or the collective itself, by `arg`): every rank must see
 * ncclInvalidUsage, from the call or asynchronously, and no stream may hang.
 * Operation 1 is a good AllGather, so the check runs on a working
 * communicator. */
static int case_argmismatch(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *what = arg;
	ncclComm_t comm;
	cudaStream_t s;
	ncclResult_t r, e = ncclSuccess;
	char *buf;
	double took;
	int odd = rank == 1;

	comm = join(rank, n, id, &s);
	buf = dev_alloc(4 * MIB * (size_t)n, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "operation 1 agrees");
	/* a mismatch fails the communicator at once, in-flight operations
	 * included: nobody starts operation 2 before everyone checked 1 */
	launch_barrier();
	if (rank == 0)
		usleep(100000); /* both orders of arrival: rank 0 comes last */
	if (!strcmp(what, "count"))
		r = ncclAllGather(buf + rank * MIB, buf, odd ? MIB / 2 : MIB, ncclInt8, comm, s);
	else if (!strcmp(what, "root"))
		r = ncclBroadcast(buf, buf, MIB, ncclFloat, odd, comm, s);
	else
		r = odd ? ncclBroadcast(buf, buf, MIB, ncclInt8, 0, comm, s) :
			  ncclAllGather(buf + rank * MIB, buf, MIB, ncclInt8, comm, s);
	CHECK(r == ncclSuccess || r == ncclInvalidUsage, "%s: call returned %d", what, r);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "%s: the stream completes", what);
	took = r == ncclSuccess ? wait_error(comm, &e, 10) : 0;
	if (r == ncclInvalidUsage)
		ncclCommGetAsyncError(comm, &e);
	CHECK(took >= 0 && e == ncclInvalidUsage, "%s: rank %d async error %d after %.2fs", what,
	      rank, e, took);
	CHECK(ncclAllGather(buf + rank * MIB, buf, MIB, ncclInt8, comm, s) != ncclSuccess,
	      "%s: a failed communicator refuses further work", what);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after the mismatch");
	cudaFree(buf);
	return CHECK_SUMMARY();
}

/* ---- ordering ----------------------------------------------------------- */

/* NCCL orders the collectives of a communicator even when they are issued
 * on different streams without any synchronisation between them.  Ranks
 * arrive at different times; every op has its own buffers. */
static int case_streams(int rank, int n, const ncclUniqueId *id, void *arg)
{
	enum { OPS = 12 };
	size_t bytes = 3 * MIB + 4096;
	char *send[OPS], *recv[OPS], *host = malloc(bytes * n);
	cudaStream_t st[2];
	ncclComm_t comm;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&st[0], cudaStreamNonBlocking);
	cudaStreamCreateWithFlags(&st[1], cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	for (int i = 0; i < OPS; i++) {
		send[i] = dev_alloc(bytes, 'a' + (i + rank) % 26);
		recv[i] = dev_alloc(bytes * n, 0);
	}
	cudaDeviceSynchronize();
	if (rank == 0)
		usleep(50000);
	for (int i = 0; i < OPS; i++) {
		cudaStream_t s = st[i % 2];

		if (i % 3 == 2)
			CHECK(ncclAllGather(send[i], recv[i], bytes, ncclInt8, comm, s) == ncclSuccess,
			      "allgather %d", i);
		else
			CHECK(ncclBroadcast(send[i], recv[i], bytes, ncclInt8, i % n, comm, s) ==
				      ncclSuccess, "broadcast %d", i);
	}
	cudaDeviceSynchronize();
	for (int i = 0; i < OPS; i++) {
		size_t len = i % 3 == 2 ? bytes * n : bytes;

		cudaMemcpy(host, recv[i], len, cudaMemcpyDeviceToHost);
		size_t bad = (size_t)-1;

		for (size_t b = 0; b < len && bad == (size_t)-1; b++) {
			int src = i % 3 == 2 ? (int)(b / bytes) : i % n;

			if (host[b] != 'a' + (i + src) % 26)
				bad = b;
		}
		CHECK(bad == (size_t)-1, "rank %d op %d: byte %zu of %zu is %d", rank, i, bad, len,
		      bad == (size_t)-1 ? 0 : host[bad]);
	}
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* ---- split and shrink ---------------------------------------------------- */

/* What NCCL 2.28 refuses before a shrink starts (ncclInvalidArgument,
 * nothing created): a shrink must exclude someone (count 0 is refused
 * even with a list), and never the caller.  Every rank calls: a shrink
 * let through would not wait for an absent rank. */
static void shrink_badargs(ncclComm_t comm, int rank, int n)
{
	ncclComm_t none = NULL;
	int other = (rank + 1) % n, list[2] = { other, rank };

	CHECK(ncclCommShrink(comm, NULL, 0, &none, NULL, NCCL_SHRINK_DEFAULT) ==
		      ncclInvalidArgument, "shrink excluding nobody, NULL list");
	CHECK(ncclCommShrink(comm, &other, 0, &none, NULL, NCCL_SHRINK_DEFAULT) ==
		      ncclInvalidArgument, "shrink excluding nobody, with a list");
	CHECK(ncclCommShrink(comm, NULL, 1, &none, NULL, NCCL_SHRINK_DEFAULT) ==
		      ncclInvalidArgument, "NULL list");
	CHECK(ncclCommShrink(comm, &other, -1, &none, NULL, NCCL_SHRINK_DEFAULT) ==
		      ncclInvalidArgument, "negative count");
	CHECK(ncclCommShrink(comm, list, 2, &none, NULL, NCCL_SHRINK_DEFAULT) ==
		      ncclInvalidArgument, "the caller in the list");
	CHECK(ncclCommShrink(comm, &other, 1, NULL, NULL, NCCL_SHRINK_DEFAULT) ==
		      ncclInvalidArgument, "NULL newcomm");
	CHECK(none == NULL, "no communicator made");
}

/* 4 ranks: split by parity with reversed keys, split again with one rank
 * out (NCCL_SPLIT_NOCOLOR), split a child, run collectives on each. */
static int case_split(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm, half, trio = NULL, solo = NULL;
	cudaStream_t s;
	int v = -1;

	(void)arg;
	comm = join(rank, n, id, &s);
	CHECK(ncclCommSplit(comm, rank % 2, -rank, &half, NULL) == ncclSuccess, "split parity");
	CHECK(ncclCommCount(half, &v) == ncclSuccess && v == n / 2, "half has %d ranks", v);
	CHECK(ncclCommUserRank(half, &v) == ncclSuccess && v == (n - 1 - rank) / 2,
	      "reversed keys: rank %d -> %d", rank, v);
	CHECK(ncclCommSplit(comm, rank == 1 ? NCCL_SPLIT_NOCOLOR : 7, rank, &trio, NULL) ==
		      ncclSuccess, "split with one rank out");
	CHECK(rank == 1 ? trio == NULL : trio != NULL, "NOCOLOR rank gets no communicator");
	if (trio) {
		CHECK(ncclCommCount(trio, &v) == ncclSuccess && v == n - 1, "trio size %d", v);
		CHECK(ncclCommSplit(trio, 0, 0, &solo, NULL) == ncclSuccess, "split of a child");
	}
	/* collectives on parent and children, interleaved */
	CHECK(allgather_ok(half, s, (n - 1 - rank) / 2, n / 2, 70000), "allgather on half");
	CHECK(allgather_ok(comm, s, rank, n, 5000), "allgather on parent");
	if (trio) {
		int r = -1;

		ncclCommUserRank(trio, &r);
		CHECK(allgather_ok(trio, s, r, n - 1, 123457), "allgather on trio");
		ncclCommUserRank(solo, &r);
		CHECK(allgather_ok(solo, s, r, n - 1, 4096), "allgather on the child's child");
		CHECK(ncclCommDestroy(solo) == ncclSuccess, "destroy solo");
		CHECK(ncclCommDestroy(trio) == ncclSuccess, "destroy trio");
	}
	CHECK(ncclCommSplit(comm, -5, 0, &trio, NULL) == ncclInvalidArgument, "negative color");
	shrink_badargs(comm, rank, n);
	CHECK(ncclCommDestroy(half) == ncclSuccess, "destroy half");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* 3 ranks; the last dies; the two others shrink it away and go on. */
static int case_shrink(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm, small;
	cudaStream_t s;
	int gone = n - 1, v = -1;
	ncclResult_t e = ncclSuccess;

	(void)arg;
	comm = join(rank, n, id, &s);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "before");
	launch_barrier();
	if (rank == gone)
		_exit(0); /* dies without a word */
	CHECK(ncclCommShrink(comm, &gone, 1, &small, NULL, NCCL_SHRINK_DEFAULT) == ncclSuccess,
	      "shrink");
	CHECK(ncclCommShrink(comm, &rank, 1, &small, NULL, 0) == ncclInvalidArgument,
	      "cannot exclude oneself");
	CHECK(ncclCommCount(small, &v) == ncclSuccess && v == n - 1, "shrunk size %d", v);
	CHECK(allgather_ok(small, s, rank, n - 1, 300000), "after");
	ncclCommGetAsyncError(small, &e);
	CHECK(e == ncclSuccess, "shrunk communicator healthy: %d", e);
	CHECK(ncclCommDestroy(small) == ncclSuccess, "destroy small");
	CHECK(ncclCommAbort(comm) == ncclSuccess, "abort the parent");
	return CHECK_SUMMARY();
}

/* 3 ranks; 0 and 1 shrink the last one away while it stays, then all 3
 * split the parent: a shrink is made by the survivors only, so it must
 * not count as one of the parent's splits, which every rank numbers
 * alike. */
static int case_shrinksplit(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm, small = NULL, all = NULL;
	cudaStream_t s;
	int gone = n - 1, v = -1;

	(void)arg;
	comm = join(rank, n, id, &s);
	if (rank != gone) {
		CHECK(ncclCommShrink(comm, &gone, 1, &small, NULL, NCCL_SHRINK_DEFAULT) ==
			      ncclSuccess, "shrink");
		CHECK(small && allgather_ok(small, s, rank, n - 1, 4096), "on the shrunk one");
		CHECK(ncclCommDestroy(small) == ncclSuccess, "destroy small");
	}
	launch_barrier();
	CHECK(ncclCommSplit(comm, 0, rank, &all, NULL) == ncclSuccess, "split of the parent");
	CHECK(all && ncclCommCount(all, &v) == ncclSuccess && v == n, "split size %d", v);
	CHECK(all && allgather_ok(all, s, rank, n, 5000), "on the split");
	if (all)
		CHECK(ncclCommDestroy(all) == ncclSuccess, "destroy the split");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* Two splits of one communicator in a group, then a third outside it, the
 * last rank slow to end its group.  A record holds two splits' parts (split
 * n in slot n mod 2).  The group's splits give every rank a child of its
 * own, so rank 0 ends its group without waiting for the slow rank and
 * makes the third split, whose color is the slow rank's in the first: had
 * it published into the first one's slot before the slow rank read it, the
 * slow rank would count rank 0 in its first child and wait for it. */
static int case_splitgroup2(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm, one = NULL, two = NULL, all = NULL;
	cudaStream_t s;
	int v = -1;

	(void)arg;
	comm = join(rank, n, id, &s);
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	CHECK(ncclCommSplit(comm, rank, 0, &one, NULL) == ncclSuccess, "first split");
	CHECK(ncclCommSplit(comm, rank, 0, &two, NULL) == ncclSuccess, "second split");
	if (rank == n - 1)
		usleep(500 * 1000);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	CHECK(one && ncclCommCount(one, &v) == ncclSuccess && v == 1, "first split size %d", v);
	CHECK(two && ncclCommCount(two, &v) == ncclSuccess && v == 1, "second split size %d", v);
	CHECK(ncclCommSplit(comm, n - 1, rank, &all, NULL) == ncclSuccess, "third split");
	CHECK(all && ncclCommCount(all, &v) == ncclSuccess && v == n, "third split size %d", v);
	CHECK(all && allgather_ok(all, s, rank, n, 4096), "on the third split");
	if (one)
		ncclCommDestroy(one);
	if (two)
		ncclCommDestroy(two);
	if (all)
		ncclCommDestroy(all);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* Polls a nonblocking init until it ends; returns its result. */
static ncclResult_t wait_ready(ncclComm_t comm)
{
	ncclResult_t e = ncclInProgress;
	double t0 = now_s();

	while (e == ncclInProgress && now_s() - t0 < 20) {
		if (ncclCommGetAsyncError(comm, &e) != ncclSuccess)
			return ncclInternalError;
		usleep(1000);
	}
	return e;
}

/* NCCL gives a child made with config NULL its parent's configuration: a
 * nonblocking parent's split and shrink are nonblocking inits.  Rank 0
 * splits while the last rank holds its part in a group, and shrinks while
 * rank 1 has not started its shrink, so its child cannot be ready when
 * the call returns: ncclInProgress, then ready by polling. */
static int case_split_nonblocking(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclComm_t comm = NULL, kid = NULL, small = NULL;
	cudaStream_t s;
	ncclResult_t r, r2;
	int last = n - 1;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreate(&s);
	cfg.blocking = 0;
	r = ncclCommInitRankConfig(&comm, n, *id, rank, &cfg);
	CHECK((r == ncclInProgress || r == ncclSuccess) && wait_ready(comm) == ncclSuccess,
	      "nonblocking init: %d", r);
	launch_barrier();
	if (rank == last) {
		ncclGroupStart();
		r = ncclCommSplit(comm, 0, rank, &kid, NULL);
		usleep(500000);
		r2 = ncclGroupEnd();
		CHECK(r == ncclSuccess && (r2 == ncclInProgress || r2 == ncclSuccess),
		      "split in a group: %d, group end %d", r, r2);
	} else {
		r = ncclCommSplit(comm, 0, rank, &kid, NULL);
		CHECK(r == ncclInProgress || (r == ncclSuccess && rank), "split returned %d", r);
	}
	CHECK(kid && wait_ready(kid) == ncclSuccess, "the split's child gets ready");
	CHECK(kid && allgather_ok(kid, s, rank, n, 4096), "on the split");
	launch_barrier();
	if (rank != last) {
		if (rank == 1)
			usleep(500000);
		r = ncclCommShrink(comm, &last, 1, &small, NULL, NCCL_SHRINK_DEFAULT);
		CHECK(r == ncclInProgress || (r == ncclSuccess && rank), "shrink returned %d", r);
		CHECK(small && wait_ready(small) == ncclSuccess, "the shrunk child gets ready");
		CHECK(small && allgather_ok(small, s, rank, n - 1, 4096), "on the shrunk one");
		if (small)
			CHECK(ncclCommDestroy(small) == ncclSuccess, "destroy the shrunk one");
	}
	if (kid)
		CHECK(ncclCommDestroy(kid) == ncclSuccess, "destroy the split");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* Makes N nonblocking communicators of one id from this thread. */
static int init_nonblocking_all(ncclComm_t *comms, int n)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclUniqueId id;
	int ok = ncclGetUniqueId(&id) == ncclSuccess;

	cfg.blocking = 0;
	for (int i = 0; i < n; i++) {
		ncclResult_t r;

		cudaSetDevice(test_device(i));
		comms[i] = NULL;
		r = ncclCommInitRankConfig(&comms[i], n, id, i, &cfg);
		ok &= r == ncclSuccess || r == ncclInProgress;
	}
	for (int i = 0; i < n; i++)
		ok &= comms[i] && wait_ready(comms[i]) == ncclSuccess;
	return ok;
}

/* Three splits of every rank's parent from this thread, a group per
 * rank: the group's end runs them in the background and returns
 * ncclInProgress at once, before any other rank joined its first split.
 * Split k by colors[k][], keys[k][]. */
static void split3_in_groups(ncclComm_t *parents, int n, const int (*colors)[4],
			     const int (*keys)[4], ncclComm_t (*kids)[4])
{
	double t0 = now_s();

	for (int i = 0; i < n; i++) {
		ncclResult_t r;

		CHECK(ncclGroupStart() == ncclSuccess, "group of rank %d", i);
		for (int k = 0; k < 3; k++)
			CHECK(ncclCommSplit(parents[i], colors[k][i], keys[k][i], &kids[k][i],
					    NULL) == ncclSuccess,
			      "split %d of rank %d in the group", k, i);
		r = ncclGroupEnd();
		CHECK(r == ncclInProgress, "the group of rank %d ended with %d", i, r);
	}
	CHECK(now_s() - t0 < 2.0, "the groups ended at once: %.2f s", now_s() - t0);
}

/* A grouped AllGather of 4 KiB on the two ranks a and b of a 2-rank
 * communicator, driven from this thread (a is rank 0's, b rank 2's). */
static int allgather_pair_ok(ncclComm_t a, ncclComm_t b, cudaStream_t sa, cudaStream_t sb)
{
	ncclComm_t c[2] = { a, b };
	cudaStream_t s[2] = { sa, sb };
	char *send[2], *recv[2], host[2 * 4096];
	int ok = ncclGroupStart() == ncclSuccess;

	for (int i = 0; i < 2; i++) {
		cudaSetDevice(test_device(2 * i));
		send[i] = dev_alloc(4096, 'a' + i);
		recv[i] = dev_alloc(2 * 4096, 0);
		ok &= ncclAllGather(send[i], recv[i], 4096, ncclInt8, c[i], s[i]) == ncclSuccess;
	}
	ok &= ncclGroupEnd() == ncclSuccess;
	for (int i = 0; ok && i < 2; i++) {
		cudaSetDevice(test_device(2 * i));
		cudaStreamSynchronize(s[i]);
		cudaMemcpy(host, recv[i], sizeof(host), cudaMemcpyDeviceToHost);
		for (int b = 0; b < 2 * 4096; b++)
			ok &= host[b] == 'a' + b / 4096;
	}
	return ok;
}

/* 1 when kid is ready with `size` ranks and rank `rank`. */
static int child_is(ncclComm_t kid, int size, int rank)
{
	int v = -1, r = -1;

	return kid && wait_ready(kid) == ncclSuccess && ncclCommCount(kid, &v) == ncclSuccess &&
	       v == size && ncclCommUserRank(kid, &r) == ncclSuccess && r == rank;
}

/* 1 when comm's release returned ncclSuccess within a second. */
static int released_at_once(ncclComm_t comm, int abort)
{
	double t0 = now_s();
	ncclResult_t r = abort ? ncclCommAbort(comm) : ncclCommDestroy(comm);

	return r == ncclSuccess && now_s() - t0 < 1.0;
}

/* NCCL runs a nonblocking parent's split in the background: one thread
 * may split every rank of a parent outside a group, one call after the
 * other (a split that exchanged colours before returning waited forever
 * for the ranks after it).  Until the child is ready the parent reports
 * ncclInProgress and refuses another split and the attribute queries, and
 * the child's rank and size are not there to ask.  Then three splits of
 * every rank's parent in one group per rank, whose end returns at once:
 * the third takes the record slot of the first, so it waits until every
 * rank read that one.  Last, splits no other rank joins: their children
 * and the parent are released at once. */
static int case_split_nonblocking_one_thread(void)
{
	enum { N = 4 };
	ncclComm_t comms[N], kids[N], three[3][N], more = NULL, lone[2] = { NULL, NULL };
	int parity[N] = { 0, 1, 0, NCCL_SPLIT_NOCOLOR }, keys[N] = { 0, 1, 2, 3 };
	/* all, last rank first; in pairs by halves; by parity */
	const int colors3[3][N] = { { 0, 0, 0, 0 }, { 0, 0, 1, 1 }, { 0, 1, 0, 1 } };
	const int keys3[3][N] = { { 0, -1, -2, -3 }, { 0, 1, 2, 3 }, { 0, 1, 2, 3 } };
	cudaStream_t s[N];
	ncclResult_t e = ncclSuccess;
	int v = 0;

	CHECK(init_nonblocking_all(comms, N), "nonblocking inits from one thread");
	CHECK(ncclCommSplit(comms[0], 0, 0, &kids[0], NULL) == ncclInProgress, "first split");
	CHECK(ncclCommGetAsyncError(comms[0], &e) == ncclSuccess && e == ncclInProgress,
	      "the parent is in progress while its split is: %d", e);
	CHECK(ncclCommSplit(comms[0], 0, 0, &more, NULL) == ncclInvalidArgument && !more,
	      "a second split of a parent in progress is refused");
	CHECK(ncclCommCount(comms[0], &v) == ncclInvalidArgument, "so is the parent's size");
	CHECK(kids[0] && ncclCommCount(kids[0], &v) == ncclInvalidArgument,
	      "a child's size is not known before its exchange");
	for (int i = 1; i < N; i++)
		CHECK(ncclCommSplit(comms[i], parity[i], keys[i], &kids[i], NULL) == ncclInProgress,
		      "split %d", i);
	for (int i = 0; i < N; i++)
		CHECK(wait_ready(comms[i]) == ncclSuccess, "parent %d ready after the split", i);
	CHECK(kids[3] == NULL, "the NOCOLOR rank gets no communicator");
	for (int i = 0; i < 3; i++)
		CHECK(child_is(kids[i], i == 1 ? 1 : 2, i / 2), "child of rank %d", i);
	for (int i = 0; i < N; i++) {
		cudaSetDevice(test_device(i));
		cudaStreamCreate(&s[i]);
	}
	CHECK(kids[0] && kids[2] && allgather_pair_ok(kids[0], kids[2], s[0], s[2]),
	      "AllGather on the even ranks' child");

	split3_in_groups(comms, N, colors3, keys3, three);
	for (int i = 0; i < N; i++) {
		CHECK(child_is(three[0][i], N, N - 1 - i), "reversed child of rank %d", i);
		CHECK(child_is(three[1][i], 2, i % 2), "pair child of rank %d", i);
		CHECK(child_is(three[2][i], 2, i / 2), "odd-even child of rank %d", i);
		CHECK(wait_ready(comms[i]) == ncclSuccess, "parent %d ready after the groups", i);
	}

	/* two splits only rank 0 makes: the second waits its turn behind the
	 * first, which waits for ranks that never come */
	CHECK(ncclGroupStart() == ncclSuccess, "group of lone splits");
	for (int k = 0; k < 2; k++)
		CHECK(ncclCommSplit(comms[0], 0, 0, &lone[k], NULL) == ncclSuccess, "lone split %d", k);
	CHECK(ncclGroupEnd() == ncclInProgress, "their group ended at once");
	CHECK(lone[1] && released_at_once(lone[1], 1), "abort of the queued child at once");
	CHECK(lone[0] && released_at_once(lone[0], 0), "destroy of the waiting child at once");
	CHECK(released_at_once(comms[0], 0), "destroy of their parent at once");
	for (int i = 0; i < N; i++) {
		if (kids[i])
			CHECK(ncclCommDestroy(kids[i]) == ncclSuccess, "destroy child %d", i);
		for (int k = 0; k < 3; k++)
			CHECK(three[k][i] && ncclCommDestroy(three[k][i]) == ncclSuccess,
			      "destroy child %d of rank %d", k, i);
		if (i)
			CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	}
	return CHECK_SUMMARY();
}

/* ---- CUDA graphs --------------------------------------------------------- */

/* Captured AllGather, Broadcast and a send/receive ring, replayed
 * REPLAYS times with new inputs each time and eager collectives in
 * between: every replay must give that replay's results. */
#define REPLAYS 100

static int graph_results_ok(const char *send, const char *recv, const char *ring, size_t bytes,
			    int rank, int n, int it, char *host)
{
	int ok = cudaMemcpy(host, recv, bytes * n, cudaMemcpyDeviceToHost) == cudaSuccess;

	for (size_t i = 0; ok && i < bytes * n; i++)
		ok = host[i] == (char)('A' + (int)(i / bytes) + it % 40);
	ok = ok && cudaMemcpy(host, send, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
	for (size_t i = 0; ok && i < bytes; i++)
		ok = host[i] == (char)('A' + 1 + it % 40); /* rank 1's, broadcast in place */
	ok = ok && cudaMemcpy(host, ring, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
	for (size_t i = 0; ok && i < bytes; i++)
		ok = host[i] == (char)('A' + 1 + it % 40); /* rank 1's bytes, passed on */
	(void)rank;
	return ok;
}

static int case_graph(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = MIB + 4096;
	char *send, *recv, *ring, *host = malloc(bytes * n);
	int next = (rank + 1) % n, prev = (rank + n - 1) % n, bad = -1;
	ncclComm_t comm;
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;

	(void)arg;
	(void)prev;
	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	send = dev_alloc(bytes, 0);
	recv = dev_alloc(bytes * n, 0);
	ring = dev_alloc(bytes, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op before the capture");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclAllGather(send, recv, bytes, ncclInt8, comm, s) == ncclSuccess, "captured op");
	CHECK(ncclBroadcast(send, send, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "captured bcast");
	/* after the broadcast every rank's send holds rank 1's bytes: the ring
	 * passes them on */
	CHECK(ncclGroupStart() == ncclSuccess, "group");
	CHECK(ncclSend(send, bytes, ncclInt8, next, comm, s) == ncclSuccess, "captured send");
	CHECK(ncclRecv(ring, bytes, ncclInt8, prev, comm, s) == ncclSuccess, "captured recv");
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	cudaMemcpy(host, recv, bytes * n, cudaMemcpyDeviceToHost);
	CHECK(host[0] == 0 && host[bytes * n - 1] == 0, "nothing ran during capture");
	CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	CHECK(allgather_ok(comm, s, rank, n, 5000), "eager op between capture and first launch");
	for (int it = 0; it < REPLAYS; it++) {
		cudaMemsetAsync(send, 'A' + rank + it % 40, bytes, s);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		/* an eager op queued right behind the replay, no host sync */
		if (it % 10 == 4)
			CHECK(allgather_ok(comm, s, rank, n, 2 * MIB + 1), "eager op right after "
			      "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		if (bad < 0 && !graph_results_ok(send, recv, ring, bytes, rank, n, it, host))
			bad = it;
		if (it % 10 == 9)
			CHECK(allgather_ok(comm, s, rank, n, 3 * 4096 + 1), "eager op after replay %d",
			      it);
	}
	CHECK(bad < 0, "replay %d gave wrong results", bad);
	CHECK(allgather_ok(comm, s, rank, n, MIB), "eager op after the replays");
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(graph);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* Rank 1 captured another call than the others (an AllGather of half the
 * count, or a send/receive group with rank 0, whose replay meets nobody
 * while the others wait for it in their AllGather's): the capture cannot
 * tell, the first replay must.  Every rank gets an asynchronous error
 * within the timeout (ncclInvalidUsage where the replays compare their
 * calls: "count"), the replay's stream completes (no hang), and the
 * communicator refuses further work. */
static int case_graph_mismatch(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *what = arg;
	size_t bytes = MIB + 4096;
	char *send, *recv;
	ncclResult_t e = ncclSuccess;
	ncclComm_t comm;
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	double took;

	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	send = dev_alloc(bytes, 0);
	recv = dev_alloc(bytes * n, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op before the capture");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	if (rank != 1) {
		CHECK(ncclAllGather(send, recv, bytes, ncclInt8, comm, s) == ncclSuccess, "captured");
	} else if (!strcmp(what, "count")) {
		CHECK(ncclAllGather(send, recv, bytes / 2, ncclInt8, comm, s) == ncclSuccess,
		      "captured, half the count");
	} else {
		CHECK(ncclGroupStart() == ncclSuccess, "group");
		CHECK(ncclSend(send, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "send to 0");
		CHECK(ncclRecv(recv, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "recv from 0");
		CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	}
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "%s: the replay's stream completes", what);
	took = wait_error(comm, &e, 10);
	CHECK(took >= 0 && (strcmp(what, "count") ? e != ncclSuccess : e == ncclInvalidUsage),
	      "%s: rank %d async error %d after %.2fs", what, rank, e, took);
	CHECK(ncclAllGather(send, recv, bytes, ncclInt8, comm, s) != ncclSuccess,
	      "%s: a failed communicator refuses further work", what);
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(graph);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after the mismatch");
	return CHECK_SUMMARY();
}

/* A pipeline captured outside groups, as a pipeline-parallel step does:
 * rank 0 sends to 1, rank 1 receives from 0 and sends on to 2 (two
 * captures), rank 2 receives.  Each replay's send/receive meets its peer
 * alone (replay.h), so the ranks need not capture as many of them; before,
 * every replay met the whole communicator and the first one timed out.
 * Each replay carries new bytes end to end, and eager AllGathers run
 * between replays. */
#define PIPE_REPLAYS 20

static int case_graph_pipe(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = MIB + 4096 + 7;
	char *buf, *host = malloc(bytes);
	ncclComm_t comm;
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	int bad = -1;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	buf = dev_alloc(bytes, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op before the capture");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	if (rank > 0)
		CHECK(ncclRecv(buf, bytes, ncclInt8, rank - 1, comm, s) == ncclSuccess, "captured recv");
	if (rank < n - 1)
		CHECK(ncclSend(buf, bytes, ncclInt8, rank + 1, comm, s) == ncclSuccess, "captured send");
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	for (int it = 0; it < PIPE_REPLAYS; it++) {
		int v = (it * 3 + 1) & 0xff;

		if (rank == 0)
			cudaMemsetAsync(buf, v, bytes, s);
		else
			cudaMemsetAsync(buf, 0xee, bytes, s);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		cudaMemcpy(host, buf, bytes, cudaMemcpyDeviceToHost);
		for (size_t i = 0; bad < 0 && i < bytes; i++)
			if ((unsigned char)host[i] != v)
				bad = it;
		if (it % 5 == 2)
			CHECK(allgather_ok(comm, s, rank, n, 3 * 4096 + 1), "eager op after replay %d",
			      it);
	}
	CHECK(bad < 0, "rank %d: replay %d carried wrong bytes", rank, bad);
	CHECK(allgather_ok(comm, s, rank, n, MIB), "eager op after the replays");
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(graph);
	cudaFree(buf);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* Graphs that mix collectives and send/receive groups (mode): "pingpong"
 * (2 ranks: rank 0 sends then receives, rank 1 receives then sends back,
 * outside groups), "bystander" (the same on ranks 0 and 1 while rank 2,
 * which captured nothing, exchanges eagerly with rank 1 right behind each
 * replay), "mixed" (AllGather, a pipeline outside groups, Broadcast),
 * "mixedb" (the pipeline, AllGather, a ring group), "grpcoll" (a group
 * holding a ring's send and receive and an AllGather), "self" (a group
 * sending to itself and to a peer).  Eager sends or AllGathers are queued
 * right behind every replay, no host sync; MIX_SLOW=rank delays that
 * rank's launches. */
#define MIX_REPLAYS 40

static int fill_is(const char *dev, size_t n, int v, char *host)
{
	int ok = cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost) == cudaSuccess;

	for (size_t i = 0; ok && i < n; i++)
		ok = (unsigned char)host[i] == (unsigned char)v;
	return ok;
}

static int capture_pipe(char *buf, size_t bytes, int rank, int n, ncclComm_t comm, cudaStream_t s)
{
	int ok = 1;

	if (rank > 0)
		ok &= ncclRecv(buf, bytes, ncclInt8, rank - 1, comm, s) == ncclSuccess;
	if (rank < n - 1)
		ok &= ncclSend(buf, bytes, ncclInt8, rank + 1, comm, s) == ncclSuccess;
	return ok;
}

static int case_graph_mix(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *mode = arg;
	size_t bytes = MIB + 4096 + 7;
	char *a, *b, *e, *x, *y, *host = malloc(bytes * n);
	ncclComm_t comm;
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec = NULL;
	int bad = -1, captures = 1, slow = getenv("MIX_SLOW") ? atoi(getenv("MIX_SLOW")) : -1;

	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	a = dev_alloc(bytes, 0);
	b = dev_alloc(bytes, 0);
	e = dev_alloc(bytes, 0);
	x = dev_alloc(bytes, 0);
	y = dev_alloc(bytes * n, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op before the capture");
	if (!strcmp(mode, "bystander") && rank == 2)
		captures = 0;
	if (captures) {
		CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture");
		if (!strcmp(mode, "pingpong") || !strcmp(mode, "bystander")) {
			if (rank == 0) {
				CHECK(ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "send");
				CHECK(ncclRecv(b, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "recv");
			} else {
				CHECK(ncclRecv(a, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "recv");
				CHECK(ncclSend(a, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "send");
			}
		} else if (!strcmp(mode, "mixed")) {
			CHECK(ncclAllGather(x, y, bytes, ncclInt8, comm, s) == ncclSuccess, "ag");
			CHECK(capture_pipe(a, bytes, rank, n, comm, s), "pipe");
			CHECK(ncclBroadcast(x, x, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "bc");
		} else if (!strcmp(mode, "mixedb")) {
			CHECK(capture_pipe(a, bytes, rank, n, comm, s), "pipe");
			CHECK(ncclAllGather(x, y, bytes, ncclInt8, comm, s) == ncclSuccess, "ag");
			CHECK(ncclGroupStart() == ncclSuccess, "group");
			CHECK(ncclSend(x, bytes, ncclInt8, (rank + 1) % n, comm, s) == ncclSuccess, "s");
			CHECK(ncclRecv(b, bytes, ncclInt8, (rank + n - 1) % n, comm, s) == ncclSuccess,
			      "r");
			CHECK(ncclGroupEnd() == ncclSuccess, "group end");
		} else if (!strcmp(mode, "grpcoll")) {
			CHECK(capture_pipe(a, bytes, rank, n, comm, s), "pipe");
			CHECK(ncclGroupStart() == ncclSuccess, "group");
			CHECK(ncclSend(x, bytes, ncclInt8, (rank + 1) % n, comm, s) == ncclSuccess, "s");
			CHECK(ncclAllGather(x, y, bytes, ncclInt8, comm, s) == ncclSuccess, "ag");
			CHECK(ncclRecv(b, bytes, ncclInt8, (rank + n - 1) % n, comm, s) == ncclSuccess,
			      "r");
			CHECK(ncclGroupEnd() == ncclSuccess, "group end");
		} else if (!strcmp(mode, "self")) {
			if (rank == 0) {
				CHECK(ncclGroupStart() == ncclSuccess, "group");
				CHECK(ncclSend(a, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "s0");
				CHECK(ncclRecv(b, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "r0");
				CHECK(ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "s1");
				CHECK(ncclGroupEnd() == ncclSuccess, "group end");
			} else {
				CHECK(ncclRecv(a, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "r");
			}
		}
		CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
		CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	}
	for (int it = 0; it < MIX_REPLAYS; it++) {
		int v = (it * 3 + 1) & 0xff, w = v ^ 0x55;

		cudaMemsetAsync(a, rank == 0 ? v : 0xee, bytes, s);
		cudaMemsetAsync(b, 0xee, bytes, s);
		cudaMemsetAsync(x, 'A' + rank + it % 40, bytes, s);
		if (rank == slow && it % 3 == 0)
			usleep(20000);
		if (exec)
			CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		/* eager work right behind the replay, no host sync */
		if (!strcmp(mode, "bystander")) {
			cudaMemsetAsync(e, rank == 2 ? w : 0xee, bytes, s);
			if (rank == 2)
				CHECK(ncclSend(e, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "eager s");
			else if (rank == 1)
				CHECK(ncclRecv(e, bytes, ncclInt8, 2, comm, s) == ncclSuccess, "eager r");
		} else if (it % 2) {
			cudaMemsetAsync(e, rank != 1 ? w : 0xee, bytes, s);
			if (rank == 0)
				CHECK(ncclSend(e, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "eager s");
			else if (rank == 1)
				CHECK(ncclRecv(e, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "eager r");
		} else {
			CHECK(allgather_ok(comm, s, rank, n, 3 * 4096 + 1), "eager ag after %d", it);
			cudaMemsetAsync(e, w, bytes, s);
		}
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		if (bad >= 0)
			continue;
		if ((strcmp(mode, "bystander") || rank > 0) && !fill_is(e, bytes, w, host))
			bad = it, fprintf(stderr, "rank %d it %d: eager bytes\n", rank, it);
		if (!strcmp(mode, "pingpong") || (!strcmp(mode, "bystander") && rank < 2)) {
			if (!fill_is(rank == 0 ? b : a, bytes, v, host))
				bad = it;
		} else if (!strcmp(mode, "self")) {
			if (!fill_is(rank == 0 ? b : a, bytes, v, host))
				bad = it;
		} else if (!strcmp(mode, "mixed") || !strcmp(mode, "mixedb") ||
			   !strcmp(mode, "grpcoll")) {
			if (!fill_is(a, bytes, v, host))
				bad = it, fprintf(stderr, "rank %d it %d: pipe\n", rank, it);
			for (int r = 0; r < n; r++)
				if (bad < 0 && !fill_is(y + r * bytes, bytes, 'A' + r + it % 40, host))
					bad = it, fprintf(stderr, "rank %d it %d: ag\n", rank, it);
			if (bad < 0 && !strcmp(mode, "mixed") &&
			    !fill_is(x, bytes, 'A' + 1 + it % 40, host))
				bad = it, fprintf(stderr, "rank %d it %d: bc\n", rank, it);
			if (bad < 0 && strcmp(mode, "mixed") &&
			    !fill_is(b, bytes, 'A' + (rank + n - 1) % n + it % 40, host))
				bad = it, fprintf(stderr, "rank %d it %d: ring\n", rank, it);
		}
	}
	CHECK(bad < 0, "%s rank %d: replay %d gave wrong results", mode, rank, bad);
	CHECK(allgather_ok(comm, s, rank, n, MIB), "eager op after the replays");
	if (exec) {
		cudaGraphExecDestroy(exec);
		cudaGraphDestroy(graph);
	}
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* Captured sends whose receives the peer replays later or groups
 * otherwise, which NCCL runs (its sends complete into its buffers):
 * "sendsend" (both ranks send, then receive, outside groups), "sepgrp"
 * (rank 0 captures two sends to 1, rank 1 one group of both receives),
 * "order3" (a send before an AllGather on rank 0, its receive after it
 * on rank 1: the send must fit the channel's captured slots, as NCCL's
 * must fit its buffers), "twographs" (rank 0's send and receive in two graphs,
 * rank 1's receive and send in one).  Before the slots had flags of their
 * own, each replay met its peer's replay of the same position, and these
 * failed at the op timeout.  Each replay carries new bytes; eager sends
 * and AllGathers run between replays. */
#define LATER_REPLAYS 30

static int capture_later(const char *mode, int rank, int n, ncclComm_t comm, cudaStream_t s,
			 char *a, char *b, char *y, size_t bytes, int part)
{
	int ok = 1;

	if (!strcmp(mode, "sendsend")) {
		ok &= ncclSend(a, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess;
		ok &= ncclRecv(b, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess;
	} else if (!strcmp(mode, "sepgrp") && rank == 0) {
		ok &= ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess;
		ok &= ncclSend(a + bytes, bytes, ncclInt8, 1, comm, s) == ncclSuccess;
	} else if (!strcmp(mode, "sepgrp")) {
		ok &= ncclGroupStart() == ncclSuccess;
		ok &= ncclRecv(b, bytes, ncclInt8, 0, comm, s) == ncclSuccess;
		ok &= ncclRecv(b + bytes, bytes, ncclInt8, 0, comm, s) == ncclSuccess;
		ok &= ncclGroupEnd() == ncclSuccess;
	} else if (!strcmp(mode, "order3")) {
		if (rank == 0)
			ok &= ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess;
		ok &= ncclAllGather(a, y, bytes, ncclInt8, comm, s) == ncclSuccess;
		if (rank == 1)
			ok &= ncclRecv(b, bytes, ncclInt8, 0, comm, s) == ncclSuccess;
	} else if (!strcmp(mode, "twographs") && rank == 0) {
		if (part == 0)
			ok &= ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess;
		else
			ok &= ncclRecv(b, bytes, ncclInt8, 1, comm, s) == ncclSuccess;
	} else if (!strcmp(mode, "twographs") && part == 0) {
		ok &= ncclRecv(b, bytes, ncclInt8, 0, comm, s) == ncclSuccess;
		ok &= ncclSend(a, bytes, ncclInt8, 0, comm, s) == ncclSuccess;
	}
	(void)n;
	return ok;
}

/* What rank `rank` holds in b after replay `it`: the peer's a. */
static int later_ok(const char *mode, int rank, int n, int it, const char *b, const char *y,
		    size_t bytes, char *host)
{
	int peer = 1 - rank;
	int ok = 1;

	if (!strcmp(mode, "sepgrp")) {
		if (rank == 1)
			ok = fill_is(b, bytes, 'a' + it % 20, host) &&
			     fill_is(b + bytes, bytes, 'A' + it % 20, host);
	} else if (!strcmp(mode, "order3")) {
		for (int r = 0; ok && r < n; r++)
			ok = fill_is(y + r * bytes, bytes, 'a' + r + it % 20, host);
		if (ok && rank == 1)
			ok = fill_is(b, bytes, 'a' + it % 20, host);
	} else {
		ok = fill_is(b, bytes, 'a' + peer + it % 20, host);
	}
	return ok;
}

static int case_graph_later(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *mode = arg;
	/* sends that complete before their receives must fit the channel's
	 * captured slots: 224 KiB at 3 ranks in tests/run.sh's 256 MiB pool */
	size_t bytes = strcmp(mode, "order3") && strcmp(mode, "sendsend") ? MIB + 4096 + 7 :
									   128 * 1024 + 7;
	char *a = dev_alloc(2 * bytes, 0), *b = dev_alloc(2 * bytes, 0), *e = dev_alloc(bytes, 0);
	char *y, *host = malloc(bytes * n);
	int graphs = !strcmp(mode, "twographs") && rank == 0 ? 2 : 1, bad = -1;
	cudaGraphExec_t exec[2] = { NULL, NULL };
	cudaGraph_t graph[2] = { NULL, NULL };
	ncclComm_t comm;
	cudaStream_t s;

	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	y = dev_alloc(bytes * n, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op before the capture");
	for (int g = 0; g < graphs; g++) {
		CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture %d", g);
		CHECK(capture_later(mode, rank, n, comm, s, a, b, y, bytes, g), "%s: captured calls",
		      mode);
		CHECK(cudaStreamEndCapture(s, &graph[g]) == cudaSuccess, "end capture %d", g);
		CHECK(cudaGraphInstantiate(&exec[g], graph[g], 0) == cudaSuccess, "instantiate %d", g);
	}
	for (int it = 0; it < LATER_REPLAYS; it++) {
		cudaMemsetAsync(a, 'a' + rank + it % 20, bytes, s);
		cudaMemsetAsync(a + bytes, 'A' + rank + it % 20, bytes, s);
		cudaMemsetAsync(b, 0xee, 2 * bytes, s);
		for (int g = 0; g < graphs; g++)
			CHECK(cudaGraphLaunch(exec[g], s) == cudaSuccess, "launch %d.%d", it, g);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		if (bad < 0 && !later_ok(mode, rank, n, it, b, y, bytes, host))
			bad = it;
		/* eager traffic on the same channels between replays */
		if (it % 3 == 1) {
			cudaMemsetAsync(e, rank == 0 ? 0x5a : 0xee, bytes, s);
			if (rank < 2)
				CHECK((rank == 0 ? ncclSend(e, bytes, ncclInt8, 1, comm, s) :
						   ncclRecv(e, bytes, ncclInt8, 0, comm, s)) ==
					      ncclSuccess, "eager send/recv after %d", it);
			CHECK(cudaStreamSynchronize(s) == cudaSuccess, "eager sync %d", it);
			CHECK(rank > 1 || fill_is(e, bytes, 0x5a, host), "eager bytes after %d", it);
		} else if (it % 3 == 2) {
			CHECK(allgather_ok(comm, s, rank, n, 3 * 4096 + 1), "eager ag after %d", it);
		}
	}
	CHECK(bad < 0, "%s rank %d: replay %d gave wrong results", mode, rank, bad);
	CHECK(allgather_ok(comm, s, rank, n, MIB), "eager op after the replays");
	for (int g = 0; g < graphs; g++) {
		cudaGraphExecDestroy(exec[g]);
		cudaGraphDestroy(graph[g]);
	}
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* Synchronizes s, whose replay waits for a peer that does not come,
 * through an abort: by another thread of ours after delay_ms (self), or
 * by a peer, which this rank's async error then tells. */
static int sync_through_abort(ncclComm_t comm, cudaStream_t s, int self, int delay_ms)
{
	ncclResult_t e = ncclSuccess;
	int ok;

	if (self) {
		struct aborter ab = { comm, delay_ms };
		pthread_t t;

		pthread_create(&t, NULL, abort_later, &ab);
		ok = cudaStreamSynchronize(s) == cudaSuccess;
		pthread_join(t, NULL);
		return ok;
	}
	ok = cudaStreamSynchronize(s) == cudaSuccess;
	return ok && wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError;
}

/* Many ranks in a small pool (24 in 256 MiB): the lane holds eager
 * channels but no captured ones.  Eager sends and receives work; a
 * captured group is refused with ncclInvalidUsage, nothing enqueued, and
 * the communicator stays usable. */
static int case_graph_noroom(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 1000;
	char *a = dev_alloc(bytes, 'a' + rank % 20), *b = dev_alloc(bytes, 0);
	char *host = malloc(bytes);
	int next = (rank + 1) % n, prev = (rank + n - 1) % n;
	cudaGraph_t graph = NULL;
	ncclResult_t r;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);

	(void)arg;
	CHECK(ncclGroupStart() == ncclSuccess && ncclSend(a, bytes, ncclInt8, next, comm, s) ==
		      ncclSuccess && ncclRecv(b, bytes, ncclInt8, prev, comm, s) == ncclSuccess &&
		      ncclGroupEnd() == ncclSuccess,
	      "eager ring");
	CHECK(fill_is(b, bytes, 'a' + prev % 20, host), "eager ring: the bytes of rank %d", prev);
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	ncclGroupStart();
	ncclSend(a, bytes, ncclInt8, next, comm, s);
	ncclRecv(b, bytes, ncclInt8, prev, comm, s);
	r = ncclGroupEnd();
	CHECK(r == ncclInvalidUsage, "captured ring refused: %d", r);
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	if (graph)
		cudaGraphDestroy(graph);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "the communicator still works");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* Both ranks capture a send larger than the captured slots hold, then the
 * receive: NCCL hangs there too (each send waits for the other's
 * receive).  An abort from another thread must end both replays: the
 * failed communicator's slot flags let every wait pass for good, also
 * the waits of replays launched after it. */
static int case_graph_stuck(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 64 * MIB;
	char *a = dev_alloc(bytes, 0), *b = dev_alloc(bytes, 0);
	cudaGraphExec_t exec = NULL;
	cudaGraph_t graph = NULL;
	ncclComm_t comm;
	cudaStream_t s;
	double t0;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclSend(a, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess, "send");
	CHECK(ncclRecv(b, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess, "recv");
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch");
	usleep(500000);
	CHECK(cudaStreamQuery(s) == cudaErrorNotReady, "rank %d: the replay waits", rank);
	t0 = now_s();
	CHECK(sync_through_abort(comm, s, rank == 0, 0), "rank %d: the abort ends the replay", rank);
	CHECK(now_s() - t0 < 3, "rank %d: stream done %.2fs after the abort", rank, now_s() - t0);
	t0 = now_s();
	for (int it = 0; it < 3; it++)
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d after the abort", it);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync replays after the abort");
	CHECK(now_s() - t0 < 3, "replays after the abort done in %.2fs", now_s() - t0);
	if (rank == 1)
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after the remote abort");
	launch_barrier();
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(graph);
	return CHECK_SUMMARY();
}

/* Rank 0 replays a send/receive pair with rank 1 alone, its stream
 * waiting for a slot rank 1 never fills, and is aborted: by another thread of its
 * own (arg NULL) or by rank 2, which captured nothing (arg "2").  The
 * stream completes, later replays complete, the others see the error. */
static int case_graph_pair_abort(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 4096;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	char *a = dev_alloc(bytes, rank + 1), *b = dev_alloc(bytes, 0);
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	ncclResult_t e = ncclSuccess;
	int aborter = arg ? atoi(arg) : 0;
	double t0;

	if (rank < 2) {
		CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture");
		if (rank == 0)
			CHECK(ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "send");
		CHECK(ncclRecv(b, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess, "recv");
		if (rank == 1)
			CHECK(ncclSend(a, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "send");
		exec = end_and_replay(s, &g, 2);
	}
	launch_barrier();
	if (rank == 0) {
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch alone");
		t0 = now_s();
		CHECK(sync_through_abort(comm, s, aborter == 0, 300), "the abort ends the replay");
		CHECK(now_s() - t0 < 3, "abort and stream done after %.2fs", now_s() - t0);
		t0 = now_s();
		for (int it = 0; it < 3; it++)
			CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d after abort", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync replays after the abort");
		CHECK(now_s() - t0 < 3, "replays after the abort done in %.2fs", now_s() - t0);
	} else if (rank == aborter) {
		usleep(300000);
		CHECK(ncclCommAbort(comm) == ncclSuccess, "abort from bystander");
	} else {
		CHECK(wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError, "remote abort: %d", e);
		t0 = now_s();
		for (int it = 0; exec && it < 3; it++)
			CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d after failure", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync replays after the failure");
		CHECK(now_s() - t0 < 3, "replays after the failure done in %.2fs", now_s() - t0);
	}
	/* Rank 0's replays after its own abort pass the flags because rank
	 * 1's failed communicator lives: on a device that waits on the state
	 * word alone only a live failed communicator fails them again (once
	 * none is left, such replays wait for ever: api_check graphreleased).
	 * So rank 1 destroys after rank 0 replayed, not while it may. */
	launch_barrier();
	if (rank != aborter)
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after the failure");
	launch_barrier();
	if (exec)
		cudaGraphExecDestroy(exec);
	if (g)
		cudaGraphDestroy(g);
	return CHECK_SUMMARY();
}

/* The n-th send of a channel matches its n-th receive in
 * execution order, as NCCL's do, also when the ranks put them in graphs
 * differently: "counts": rank 0 captures one send and replays it twice
 * per step, rank 1 captures both receives in one graph replayed once;
 * "split": rank 0 captures its two sends in two graphs, rank 1 one
 * receive replayed twice.  Each step must complete within 10 s with the
 * bytes of each send in order; a stuck step aborts (so the case ends). */
static int case_graph_replays(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *mode = arg;
	size_t bytes = 8192;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	char *a = dev_alloc(bytes, 0), *b = dev_alloc(2 * bytes, 0), *host = malloc(bytes);
	cudaGraph_t g[2] = { NULL, NULL };
	cudaGraphExec_t exec[2] = { NULL, NULL };
	int graphs = !strcmp(mode, "split") && rank == 0 ? 2 : 1, stuck = 0, bad = -1;

	(void)n;
	for (int k = 0; k < graphs; k++) {
		CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture");
		if (rank == 0) {
			CHECK(ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "send");
		} else {
			CHECK(ncclRecv(b, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "recv");
			if (!strcmp(mode, "counts"))
				CHECK(ncclRecv(b + bytes, bytes, ncclInt8, 0, comm, s) == ncclSuccess,
				      "recv 2");
		}
		CHECK(cudaStreamEndCapture(s, &g[k]) == cudaSuccess, "end capture");
		CHECK(cudaGraphInstantiate(&exec[k], g[k], 0) == cudaSuccess, "instantiate");
	}
	for (int it = 0; it < 5 && !stuck; it++) {
		double t0;

		if (rank == 0) {
			for (int j = 0; j < 2; j++) {
				cudaMemsetAsync(a, 'a' + 2 * it + j, bytes, s);
				cudaGraphLaunch(exec[graphs == 2 ? j : 0], s);
			}
		} else {
			cudaMemsetAsync(b, 0xee, 2 * bytes, s);
			for (int j = 0; j < (!strcmp(mode, "counts") ? 1 : 2); j++) {
				cudaGraphLaunch(exec[0], s);
				if (strcmp(mode, "counts") && j == 0)
					cudaMemcpyAsync(b + bytes, b, bytes, cudaMemcpyDeviceToDevice, s);
			}
		}
		t0 = now_s();
		while (cudaStreamQuery(s) == cudaErrorNotReady && now_s() - t0 < 10)
			usleep(1000);
		if (cudaStreamQuery(s) == cudaErrorNotReady) {
			stuck = 1;
			break;
		}
		if (rank == 1 && bad < 0) {
			/* "split": b + bytes holds the first receive, b the second */
			int first = !strcmp(mode, "counts") ? 0 : 1;

			if (!fill_is(b + first * bytes, bytes, 'a' + 2 * it, host) ||
			    !fill_is(b + (1 - first) * bytes, bytes, 'a' + 2 * it + 1, host))
				bad = it;
		}
	}
	CHECK(!stuck, "%s rank %d: a step did not complete in 10 s", mode, rank);
	CHECK(bad < 0, "%s rank %d: step %d received other bytes", mode, rank, bad);
	if (stuck) {
		CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
		cudaStreamSynchronize(s);
	} else {
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	}
	for (int k = 0; k < graphs; k++) {
		cudaGraphExecDestroy(exec[k]);
		cudaGraphDestroy(g[k]);
	}
	free(host);
	return CHECK_SUMMARY();
}

/* Rank 1 (a child process) replays a captured send once
 * and dies; rank 0 then replays its captured receive, which waits for a
 * send that never comes.  The death must be reported (ncclRemoteError by
 * ncclCommGetAsyncError), as for an eager receive (case_kill). */
static int case_graph_dead(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 8192;
	ncclResult_t e = ncclSuccess;
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	cudaStream_t s;
	ncclComm_t comm;
	char *buf;
	double took;

	(void)arg;
	if (rank == 1) {
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			comm = join(rank, n, id, &s);
			buf = dev_alloc(bytes, 1);
			cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
			ncclSend(buf, bytes, ncclInt8, 0, comm, s);
			cudaStreamEndCapture(s, &g);
			cudaGraphInstantiate(&exec, g, 0);
			cudaGraphLaunch(exec, s);
			cudaStreamSynchronize(s);
			raise(SIGKILL);
		}
		waitpid(pid, &st, 0);
		launch_barrier();
		return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : 1;
	}
	comm = join(rank, n, id, &s);
	buf = dev_alloc(bytes, 0);
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclRecv(buf, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "recv");
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	CHECK(cudaGraphLaunch(exec, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess,
	      "first replay");
	launch_barrier();
	CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "replay after the peer died");
	took = wait_error(comm, &e, 20);
	CHECK(took >= 0 && e == ncclRemoteError, "peer death reported: %d after %.2fs", e, took);
	CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the stream drained after the abort");
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(g);
	return CHECK_SUMMARY();
}

/* Polls st until it drained or `limit` seconds passed: seconds taken, or
 * -1 (a stream that never drains must fail the case, not hang it). */
static double stream_drains(cudaStream_t st, double limit)
{
	double t0 = now_s();

	while (cudaStreamQuery(st) == cudaErrorNotReady)
		if (now_s() - t0 > limit)
			return -1;
		else
			usleep(1000);
	return now_s() - t0;
}

/* The stream drains within limit seconds, or the rank reports and leaves
 * at once: the stream's worker would wait for ever, and exit with it. */
static void drains_or_leave(cudaStream_t st, double limit, const char *what)
{
	double took = stream_drains(st, limit);

	CHECK(took >= 0, "%s drained (%.2fs)", what, took);
	if (took < 0) {
		(void)CHECK_SUMMARY();
		fflush(NULL);
		_exit(1);
	}
}

/* As graphdead, with a message of many more chunks than the channel has
 * captured slots (4 MiB): after the death is reported and ncclCommAbort
 * returns, the replay in flight drains.  On a device without 64-bit
 * stream waits the failure is the flag's state word, which the replay's
 * own writes (EMPTY after each chunk) take back: with the communicator
 * released and the peer dead nobody failed it again, and the stream
 * waited for ever at its first reused slot (CUDAEMU_NO_MEMOPS64=1).
 * arg "coll": a captured Reduce of as many bytes instead, which waits for
 * the dead rank at every chunk of its slot flags (gcoll.h). */
static int case_graph_dead_big(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 4 * MIB;
	ncclResult_t e = ncclSuccess;
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	cudaStream_t s;
	ncclComm_t comm;
	char *buf;
	double took;

	if (rank == 1) {
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			comm = join(rank, n, id, &s);
			raise(SIGKILL);
		}
		waitpid(pid, &st, 0);
		launch_barrier();
		return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : 1;
	}
	comm = join(rank, n, id, &s);
	buf = dev_alloc(bytes, 0);
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	if (arg) /* a collective that waits for the dead rank at every chunk */
		CHECK(ncclReduce(buf, buf, bytes / 4, ncclFloat32, ncclSum, 0, comm, s) ==
		      ncclSuccess, "Reduce");
	else
		CHECK(ncclRecv(buf, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "recv");
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	launch_barrier();
	CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "replay after the peer died");
	took = wait_error(comm, &e, 20);
	CHECK(took >= 0 && e == ncclRemoteError, "peer death reported: %d after %.2fs", e, took);
	CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
	drains_or_leave(s, 10, "the replay in flight, after the abort,");
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(g);
	return CHECK_SUMMARY();
}

/* A send/receive pair captured by both ranks and replayed twice; rank 0
 * aborts, rank 1 sees the failure and destroys its communicator; then
 * rank 0 launches the graph three times more.  The failed flags must let
 * these replays through ("also in later replays", README), as they do
 * with 64-bit waits.  On a device that waits on the state word alone the
 * first replay's own writes take the failure back, and with neither
 * communicator left no watchdog sets it again: the second replay waits
 * for ever (CUDAEMU_NO_MEMOPS64=1).  arg "coll": an AllGather and a
 * Broadcast of many captured slots each instead. */
static int case_graph_replay_released(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 4096;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	char *a = dev_alloc(bytes, rank + 1), *b = dev_alloc(bytes, 0);
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	ncclResult_t e = ncclSuccess;
	char *big = arg ? dev_alloc(2 * MIB, rank + 1) : NULL;
	char *all = arg ? dev_alloc(4 * MIB, 0) : NULL;

	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	if (arg) { /* collectives of several captured slots */
		CHECK(ncclAllGather(big, all, 2 * MIB, ncclInt8, comm, s) == ncclSuccess,
		      "AllGather");
		CHECK(ncclBroadcast(big, big, 2 * MIB, ncclInt8, 0, comm, s) == ncclSuccess,
		      "Broadcast");
	} else {
		CHECK(ncclGroupStart() == ncclSuccess, "group");
		CHECK(ncclSend(a, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess, "send");
		CHECK(ncclRecv(b, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess, "recv");
		CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	}
	exec = end_and_replay(s, &g, 2);
	launch_barrier();
	if (rank == 0) {
		CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
	} else {
		CHECK(wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError, "remote abort: %d", e);
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	}
	launch_barrier();
	if (rank == 0) {
		for (int it = 0; it < 3; it++)
			CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d after the abort", it);
		drains_or_leave(s, 10, "the replays after the abort");
	}
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(g);
	return CHECK_SUMMARY();
}

/* Every rank captures one group that sends FUZZ_MSGS messages to every
 * rank (itself included) and receives as many from each, of sizes around
 * the captured chunk (45056 at 3 ranks in a 256 MiB pool: 0, 1, one
 * chunk less, exactly 1, 2, 4 (every slot) and 5 chunks, one more), and
 * replays it FUZZ_REPLAYS times with new bytes, checked each time. */
#define FUZZ_MSGS 3
#define FUZZ_REPLAYS 8

static const size_t fuzz_sizes[] = { 0, 1, 45055, 45056, 45057, 90112, 180224, 180225,
				     225280, 4096, 1 << 20 };
#define FUZZ_NS (sizeof(fuzz_sizes) / sizeof(fuzz_sizes[0]))

static size_t fuzz_size(int src, int dst, int m, int salt)
{
	return fuzz_sizes[(size_t)(src * 7 + dst * 3 + m * 5 + salt) % FUZZ_NS];
}

static int fuzz_val(int src, int dst, int m, int it)
{
	int v = (1 + src * 31 + dst * 7 + m * 3 + it * 11) & 0xff;

	return v == 0xee ? 0x11 : v;
}

static int case_graph_fuzz(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *a = arg ? arg : "0";
	enum cudaStreamCaptureMode mode = a[0] == 'g' ? cudaStreamCaptureModeGlobal :
				     a[0] == 'r' ? cudaStreamCaptureModeRelaxed :
						   cudaStreamCaptureModeThreadLocal;
	int salt = atoi(a[0] == 'g' || a[0] == 'r' ? a + 1 : a);
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	char *sb[16][FUZZ_MSGS], *rb[16][FUZZ_MSGS], *host = malloc(1 << 20);
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	int bad = -1;

	for (int p = 0; p < n; p++)
		for (int m = 0; m < FUZZ_MSGS; m++) {
			sb[p][m] = dev_alloc(fuzz_size(rank, p, m, salt) + 1, 0);
			rb[p][m] = dev_alloc(fuzz_size(p, rank, m, salt) + 1, 0);
		}
	CHECK(cudaStreamBeginCapture(s, mode) == cudaSuccess, "capture");
	CHECK(ncclGroupStart() == ncclSuccess, "group");
	for (int p = 0; p < n; p++)
		for (int m = 0; m < FUZZ_MSGS; m++) {
			CHECK(ncclSend(sb[p][m], fuzz_size(rank, p, m, salt), ncclInt8, p, comm, s) ==
				      ncclSuccess, "send");
			CHECK(ncclRecv(rb[p][m], fuzz_size(p, rank, m, salt), ncclInt8, p, comm, s) ==
				      ncclSuccess, "recv");
		}
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(g && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	for (int it = 0; exec && it < FUZZ_REPLAYS; it++) {
		for (int p = 0; p < n; p++)
			for (int m = 0; m < FUZZ_MSGS; m++) {
				cudaMemsetAsync(sb[p][m], fuzz_val(rank, p, m, it),
						fuzz_size(rank, p, m, salt), s);
				cudaMemsetAsync(rb[p][m], 0xee, fuzz_size(p, rank, m, salt), s);
			}
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		drains_or_leave(s, 20, "a replay");
		for (int p = 0; bad < 0 && p < n; p++)
			for (int m = 0; bad < 0 && m < FUZZ_MSGS; m++)
				if (!fill_is(rb[p][m], fuzz_size(p, rank, m, salt),
					     fuzz_val(p, rank, m, it), host)) {
					bad = it;
					fprintf(stderr, "rank %d replay %d: from %d msg %d (%zu bytes) wrong\n",
						rank, it, p, m, fuzz_size(p, rank, m, salt));
				}
	}
	CHECK(bad < 0, "rank %d: replay %d received wrong bytes", rank, bad);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op after the replays");
	graph_free(exec, g);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* Split children (colors rank % 2 of 4 ranks) capture a send/receive
 * exchange each; parent AllGathers and a parent captured exchange run
 * between the children's replays. */
static int case_graph_split_p2p(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const size_t B = 300 * 1024 + 3;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s), kid = NULL;
	char *a = dev_alloc(B, 0), *b = dev_alloc(B, 0), *pa = dev_alloc(B, 0),
	     *pb = dev_alloc(B, 0), *host = malloc(B);
	cudaGraph_t g[2] = { NULL, NULL };
	cudaGraphExec_t exec[2] = { NULL, NULL };
	int kr = -1, kn = 0, bad = -1, pp = rank ^ 1;

	(void)arg;
	CHECK(ncclCommSplit(comm, rank % 2, rank, &kid, NULL) == ncclSuccess, "split");
	CHECK(ncclCommUserRank(kid, &kr) == ncclSuccess && ncclCommCount(kid, &kn) == ncclSuccess,
	      "child rank");
	for (int k = 0; k < 2; k++) {
		ncclComm_t c = k ? comm : kid;
		int peer = k ? pp : 1 - kr;

		CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture");
		CHECK(ncclGroupStart() == ncclSuccess, "group");
		CHECK(ncclSend(k ? pa : a, B, ncclInt8, peer, c, s) == ncclSuccess, "send");
		CHECK(ncclRecv(k ? pb : b, B, ncclInt8, peer, c, s) == ncclSuccess, "recv");
		CHECK(ncclGroupEnd() == ncclSuccess, "group end");
		CHECK(cudaStreamEndCapture(s, &g[k]) == cudaSuccess, "end capture");
		CHECK(cudaGraphInstantiate(&exec[k], g[k], 0) == cudaSuccess, "instantiate");
	}
	for (int it = 0; it < 10; it++) {
		cudaMemsetAsync(a, 1 + rank + it, B, s);
		cudaMemsetAsync(pa, 101 + rank + it, B, s);
		CHECK(cudaGraphLaunch(exec[0], s) == cudaSuccess, "launch child");
		CHECK(cudaGraphLaunch(exec[1], s) == cudaSuccess, "launch parent");
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
		/* child peer 1 - kr is parent rank (1 - kr) * 2 + rank % 2 */
		if (bad < 0 && (!fill_is(b, B, 1 + (1 - kr) * 2 + rank % 2 + it, host) ||
				!fill_is(pb, B, 101 + pp + it, host)))
			bad = it;
		CHECK(allgather_ok(comm, s, rank, n, 4096 * 3 + 1), "parent ag %d", it);
		CHECK(allgather_ok(kid, s, kr, kn, 4096 * 3 + 1), "child ag %d", it);
	}
	CHECK(bad < 0, "rank %d: replay %d received wrong bytes", rank, bad);
	for (int k = 0; k < 2; k++)
		graph_free(exec[k], g[k]);
	CHECK(ncclCommDestroy(kid) == ncclSuccess, "destroy child");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* ---- pools the shim must not use --------------------------------------- */

static int case_badpool(void)
{
	const char *path = getenv("CXLSHIM_POOL_PATH");
	ncclUniqueId id;
	FILE *f;

	if (!path)
		return 2;
	/* something else's data, 16 MiB of it: must be refused, not formatted */
	f = fopen(path, "w");
	for (int i = 0; i < 16 * 1024; i++)
		fwrite("NOT A CXLSHIM POOL, SOMEBODY ELSE'S DATA.......................", 1, 64, f);
	fseek(f, 1 << 24, SEEK_SET);
	fputc(0, f);
	fclose(f);
	CHECK(ncclGetUniqueId(&id) == ncclSuccess, "unique id from the real NCCL");
	CHECK(memcmp(id.internal + 64, "CXLSHMID", 8) != 0, "not a pool id");
	f = fopen(path, "r");
	char head[16] = "";
	CHECK(f && fread(head, 1, 10, f) == 10 && !memcmp(head, "NOT A CXLS", 10),
	      "the file was left alone");
	if (f)
		fclose(f);
	unlink(path);
	return CHECK_SUMMARY();
}

/* Rank 1 sees another pool: nobody may wait forever; both fail cleanly
 * (fallback=fail) within the init timeout. */
static int case_mismatch(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm;
	double t0 = now_s();
	ncclResult_t r;
	char path[64];

	(void)arg;
	if (rank == 1) {
		snprintf(path, sizeof(path), "/dev/shm/cxlshim-test-other-%d.pool", (int)getpid());
		setenv("CXLSHIM_POOL_PATH", path, 1);
	}
	cudaSetDevice(test_device(rank));
	r = ncclCommInitRank(&comm, n, *id, rank);
	CHECK(r != ncclSuccess, "rank %d must fail, got %d", rank, r);
	CHECK(now_s() - t0 < 10, "rank %d gave up after %.2fs", rank, now_s() - t0);
	if (rank == 1)
		unlink(path);
	return CHECK_SUMMARY();
}

/* AlltoAll in place captured once and replayed with new inputs, eager
 * collectives between replays: in place, a rank's fetch from a peer waits
 * for its own publication of the same block, a doorbell the replay
 * rebases like the others (alltoall.c, replay.h). */
#define A2A_REPLAYS 30

static int case_graph_a2a(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t per = 200 * 1024 + 13;
	char *buf, *host = malloc(per * n);
	ncclComm_t comm;
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	int bad = -1;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	buf = dev_alloc(per * n, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op before the capture");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclAlltoAll(buf, buf, per, ncclInt8, comm, s) == ncclSuccess, "captured AlltoAll");
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	for (int it = 0; it < A2A_REPLAYS; it++) {
		/* block q of rank r holds r * 7 + q * 3 + it; it lands as block
		 * r of rank q */
		for (int q = 0; q < n; q++)
			cudaMemsetAsync(buf + per * q, (rank * 7 + q * 3 + it) & 0xff, per, s);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		cudaMemcpy(host, buf, per * n, cudaMemcpyDeviceToHost);
		for (size_t i = 0; bad < 0 && i < per * n; i++)
			if ((unsigned char)host[i] !=
			    (unsigned char)(((int)(i / per) * 7 + rank * 3 + it) & 0xff))
				bad = it;
		if (it % 5 == 2)
			CHECK(allgather_ok(comm, s, rank, n, 3 * 4096 + 1), "eager op after replay %d",
			      it);
	}
	CHECK(bad < 0, "replay %d gave wrong results", bad);
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(graph);
	cudaFree(buf);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* Reductions captured once and replayed: under the emulation their folds
 * are host functions, which every replay runs again with the same
 * argument (fold.c), so that argument must outlive the first replay.
 * AllReduce (SUM), ReduceScatter (PreMulSum: the scaling put) and Reduce
 * (MAX, own-first folds), each replay with new inputs. */
#define RED_REPLAYS 20

static int red_results_ok(const float *ar, const float *rs, const float *rd, size_t count,
			  int rank, int n, int it)
{
	float *h = malloc(count * sizeof(float));
	float sum = 0, scaled = 0;
	int ok = h != NULL;

	for (int r = 0; r < n; r++) {
		sum += (float)(r + it);
		scaled += 2.0f * (float)(r + it);
	}
	ok = ok && cudaMemcpy(h, ar, count * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
	for (size_t i = 0; ok && i < count; i++)
		ok = h[i] == sum;
	ok = ok && cudaMemcpy(h, rs, count / n * sizeof(float), cudaMemcpyDeviceToHost) ==
			   cudaSuccess;
	for (size_t i = 0; ok && i < count / n; i++)
		ok = h[i] == scaled;
	if (ok && rank == 0) {
		ok = cudaMemcpy(h, rd, count * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
		for (size_t i = 0; ok && i < count; i++)
			ok = h[i] == (float)(n - 1 + it);
	}
	free(h);
	return ok;
}

static int case_graph_reduce(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t count = 3 * 100000; /* several chunks per slice */
	float *send, *ar, *rs, *rd, two = 2, *host = malloc(count * sizeof(float));
	ncclComm_t comm;
	ncclRedOp_t pms;
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	int bad = -1;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	send = (float *)dev_alloc(count * sizeof(float), 0);
	ar = (float *)dev_alloc(count * sizeof(float), 0);
	rs = (float *)dev_alloc(count * sizeof(float), 0);
	rd = (float *)dev_alloc(count * sizeof(float), 0);
	CHECK(ncclRedOpCreatePreMulSum(&pms, &two, ncclFloat32, ncclScalarHostImmediate, comm) ==
	      ncclSuccess, "PreMulSum");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclAllReduce(send, ar, count, ncclFloat32, ncclSum, comm, s) == ncclSuccess,
	      "captured AllReduce");
	CHECK(ncclReduceScatter(send, rs, count / n, ncclFloat32, pms, comm, s) == ncclSuccess,
	      "captured ReduceScatter");
	CHECK(ncclReduce(send, rd, count, ncclFloat32, ncclMax, 0, comm, s) == ncclSuccess,
	      "captured Reduce");
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	for (int it = 0; it < RED_REPLAYS; it++) {
		for (size_t i = 0; i < count; i++)
			host[i] = (float)(rank + it);
		cudaMemcpyAsync(send, host, count * sizeof(float), cudaMemcpyHostToDevice, s);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		if (bad < 0 && !red_results_ok(ar, rs, rd, count, rank, n, it))
			bad = it;
	}
	CHECK(bad < 0, "replay %d gave wrong results", bad);
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(graph);
	CHECK(ncclRedOpDestroy(pms, comm) == ncclSuccess, "PreMulSum destroy");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	cudaFree(send);
	cudaFree(ar);
	cudaFree(rs);
	cudaFree(rd);
	free(host);
	return CHECK_SUMMARY();
}

/* PreMulSum on 64-bit integers multiplies by the scalar exactly, wrapping
 * like the type, as NCCL does: 2^53 + 1 and the unsigned ones from 2^63 on
 * are not doubles. */
static void premulsum64(ncclComm_t comm, cudaStream_t s, int n, ncclDataType_t t,
			uint64_t scalar)
{
	uint64_t in[4] = { 1, 2, 3, 5 }, out[4] = { 0 }, *send, *recv;
	ncclRedOp_t op;

	send = (uint64_t *)dev_alloc(sizeof(in), 0);
	recv = (uint64_t *)dev_alloc(sizeof(in), 0);
	test_upload(send, in, sizeof(in));
	CHECK(ncclRedOpCreatePreMulSum(&op, &scalar, t, ncclScalarHostImmediate, comm) ==
	      ncclSuccess, "PreMulSum");
	CHECK(ncclAllReduce(send, recv, 4, t, op, comm, s) == ncclSuccess, "AllReduce");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
	cudaMemcpy(out, recv, sizeof(out), cudaMemcpyDeviceToHost);
	for (int i = 0; i < 4; i++)
		CHECK(out[i] == in[i] * scalar * (uint64_t)n, "type %d, scalar %#llx: [%d] = %#llx, "
		      "want %#llx", (int)t, (unsigned long long)scalar, i,
		      (unsigned long long)out[i], (unsigned long long)(in[i] * scalar * (uint64_t)n));
	ncclRedOpDestroy(op, comm);
	cudaFree(send);
	cudaFree(recv);
}

/* An operator belongs to the communicator that made it: another one
 * refuses it in a reduction and in ncclRedOpDestroy (NCCL's handles are
 * mangled per communicator), and its own operator stays usable. */
static void foreign_op(ncclComm_t comm, cudaStream_t s, int rank)
{
	float two = 2, three = 3, *x = (float *)dev_alloc(sizeof(float), 0);
	ncclComm_t other = NULL;
	ncclRedOp_t opa, opb;

	CHECK(ncclCommSplit(comm, 0, rank, &other, NULL) == ncclSuccess && other, "split");
	CHECK(ncclRedOpCreatePreMulSum(&opa, &two, ncclFloat32, ncclScalarHostImmediate, comm) ==
		      ncclSuccess, "operator of the parent");
	CHECK(ncclRedOpCreatePreMulSum(&opb, &three, ncclFloat32, ncclScalarHostImmediate,
				       other) == ncclSuccess, "operator of the child");
	CHECK(ncclAllReduce(x, x, 1, ncclFloat32, opa, other, s) == ncclInvalidArgument,
	      "the parent's operator refused by the child");
	CHECK(ncclRedOpDestroy(opa, other) == ncclInvalidArgument,
	      "nor destroyed there");
	CHECK(ncclAllReduce(x, x, 1, ncclFloat32, opb, other, s) == ncclSuccess &&
		      cudaStreamSynchronize(s) == cudaSuccess, "the child's own operator works");
	CHECK(ncclRedOpDestroy(opb, other) == ncclSuccess, "destroy the child's");
	CHECK(ncclRedOpDestroy(opa, comm) == ncclSuccess, "destroy the parent's");
	CHECK(ncclRedOpDestroy(opa, comm) == ncclInvalidArgument, "not twice");
	CHECK(ncclCommDestroy(other) == ncclSuccess, "destroy the child");
	cudaFree(x);
}

/* As many operators at once as the caller likes (NCCL grows its table):
 * each has its own handle and scalar, and is refused once destroyed. */
static void many_ops(ncclComm_t comm, cudaStream_t s, int n)
{
	enum { N_OPS = 200 };
	static const int used[] = { 0, 63, 64, 130, N_OPS - 1 };
	float *x = (float *)dev_alloc(sizeof(float), 0), one = 1, out = 0;
	ncclRedOp_t ops[N_OPS];
	int made = 0, distinct = 1;

	for (int i = 0; i < N_OPS; i++) {
		float v = (float)(i + 1);

		made += ncclRedOpCreatePreMulSum(&ops[i], &v, ncclFloat32, ncclScalarHostImmediate,
						 comm) == ncclSuccess;
		for (int j = 0; j < i; j++)
			distinct &= ops[j] != ops[i];
	}
	CHECK(made == N_OPS && distinct, "%d live operators, %d made, handles distinct: %d", N_OPS,
	      made, distinct);
	for (size_t k = 0; made == N_OPS && k < sizeof(used) / sizeof(used[0]); k++) {
		int i = used[k];

		cudaMemcpy(x, &one, sizeof(one), cudaMemcpyHostToDevice);
		CHECK(ncclAllReduce(x, x, 1, ncclFloat32, ops[i], comm, s) == ncclSuccess &&
			      cudaStreamSynchronize(s) == cudaSuccess, "AllReduce with operator %d", i);
		cudaMemcpy(&out, x, sizeof(out), cudaMemcpyDeviceToHost);
		CHECK(out == (float)((i + 1) * n), "operator %d: %g, want %d", i, out, (i + 1) * n);
	}
	for (int i = 0; i < made; i++)
		CHECK(ncclRedOpDestroy(ops[i], comm) == ncclSuccess, "destroy operator %d", i);
	CHECK(ncclAllReduce(x, x, 1, ncclFloat32, ops[N_OPS - 1], comm, s) == ncclInvalidArgument,
	      "a destroyed operator is refused");
	cudaFree(x);
}

static int case_premulsum64(int rank, int n, const ncclUniqueId *id, void *arg)
{
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);

	(void)arg;
	premulsum64(comm, s, n, ncclInt64, (1ull << 53) + 1);
	premulsum64(comm, s, n, ncclInt64, (uint64_t)-((1ll << 60) + 7));
	premulsum64(comm, s, n, ncclUint64, UINT64_MAX);
	premulsum64(comm, s, n, ncclUint64, (1ull << 63) + 3);
	foreign_op(comm, s, rank);
	many_ops(comm, s, n);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* ---- ncclCommAbort from another thread during a split -------------------- */

/* Rank 1 never splits (a hung peer); rank 0's watchdog thread aborts the
 * parent while rank 0's split waits for it: the split returns an error
 * at once, not at the 30 s init timeout, and the abort does not wait for
 * it longer either. */
static int case_split_abort(int rank, int n, const ncclUniqueId *id, void *arg)
{
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s), kid = NULL;
	struct aborter a = { comm, 500 };
	double t0 = now_s();
	pthread_t t;
	ncclResult_t r;

	(void)arg;
	if (rank != 0) {
		sleep(4);
		ncclCommDestroy(comm);
		return CHECK_SUMMARY();
	}
	pthread_create(&t, NULL, abort_later, &a);
	r = ncclCommSplit(comm, 0, 0, &kid, NULL);
	CHECK(r != ncclSuccess && kid == NULL, "split failed: %d", r);
	CHECK(now_s() - t0 < 2.0, "the split returned %.2f s after it began, 0.5 s after it the "
				  "abort", now_s() - t0);
	pthread_join(t, NULL);
	return CHECK_SUMMARY();
}

/* ---- NCCL 2.28's device API on a pool communicator ---------------------- */

/* nccl_device/core.h is CUDA C++: its host calls, restated (ncclTeam_t's
 * layout), as an application's kernel setup would call them. */
struct team {
	int nRanks, rank, stride;
};
struct team ncclTeamWorld(ncclComm_t);
struct team ncclTeamLsa(ncclComm_t);
struct team ncclTeamRail(ncclComm_t);
int ncclTeamRankToWorld(ncclComm_t, struct team, int);
int ncclTeamRankToLsa(ncclComm_t, struct team, int);
ncclResult_t ncclDevCommCreate(ncclComm_t, const void *, void *);
ncclResult_t ncclDevCommDestroy(ncclComm_t, const void *);

/* Teams are answered (the world; a load/store team of the rank alone),
 * a device communicator refused with ncclInvalidUsage: no crash in a real
 * library reading our handle as its own. */
static int case_devapi(int rank, int n, const ncclUniqueId *id, void *arg)
{
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	struct team w = ncclTeamWorld(comm), l = ncclTeamLsa(comm), r = ncclTeamRail(comm);
	char req[256] = { 0 }, dev[1024];
	ncclResult_t e = ncclInternalError;

	(void)arg;
	CHECK(w.nRanks == n && w.rank == rank && w.stride == 1, "world team %d %d %d", w.nRanks,
	      w.rank, w.stride);
	CHECK(l.nRanks == 1 && l.rank == 0 && l.stride == 1, "load/store team %d %d %d",
	      l.nRanks, l.rank, l.stride);
	CHECK(r.nRanks == n && r.rank == rank && r.stride == 1, "rail team %d %d %d", r.nRanks,
	      r.rank, r.stride);
	for (int p = 0; p < n; p++)
		CHECK(ncclTeamRankToWorld(comm, w, p) == p, "world rank %d", p);
	CHECK(ncclTeamRankToLsa(comm, l, 0) == 0, "load/store rank");
	CHECK(ncclDevCommCreate(comm, req, dev) == ncclInvalidUsage, "device communicator refused");
	CHECK(ncclDevCommDestroy(comm, dev) == ncclInvalidUsage, "nothing to destroy");
	CHECK(ncclDevCommCreate(NULL, req, dev) == ncclInvalidArgument, "NULL communicator");
	w = ncclTeamWorld(NULL);
	CHECK(w.nRanks == 0, "NULL communicator: empty team");
	CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclSuccess,
	      "the communicator is fine: %d", e);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* 1 when the n bytes at dev are all `fill`. */

/* ---- a group's collectives start at its end ----------------------------- */

static void CUDART_CB nap(void *ms)
{
	usleep((useconds_t)(uintptr_t)ms * 1000);
}

/* The estimate of a simulated group of calls on comm (SIM_*). */
enum { SIM_AR = 1, SIM_AG = 2, SIM_P2P = 4 };

static float simulate(ncclComm_t comm, unsigned what, float *in, float *out, float *all,
		      size_t n, int rank, int nranks, cudaStream_t s)
{
	ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
	int peer = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;

	ncclGroupStart();
	if (what & SIM_AR)
		ncclAllReduce(in, out, n, ncclFloat, ncclSum, comm, s);
	if (what & SIM_AG)
		ncclAllGather(in, all, n, ncclFloat, comm, s);
	if (what & SIM_P2P) {
		ncclSend(in, n, ncclFloat, peer, comm, s);
		ncclRecv(out, n, ncclFloat, from, comm, s);
	}
	if (ncclGroupSimulateEnd(&sim) != ncclSuccess)
		return -2;
	return sim.estimatedTime;
}

/* ncclGroupSimulateEnd's estimate (core/coll/estimate.c): the pool's time
 * for what the group held, summed over its calls, growing with their
 * sizes; none for a group that held nothing (the real library's
 * NCCL_UNDEF_FLOAT, or 0 without one). */
static void check_estimates(ncclComm_t comm, float *in, float *out, float *all, size_t n,
			   float both, int rank, int nranks, cudaStream_t s)
{
	float ar = simulate(comm, SIM_AR, in, out, all, n, rank, nranks, s);
	float ag = simulate(comm, SIM_AG, in, out, all, n, rank, nranks, s);
	float half = simulate(comm, SIM_AR, in, out, all, n / 2, rank, nranks, s);
	float p2p = simulate(comm, SIM_P2P, in, out, all, n, rank, nranks, s);
	float none = simulate(comm, 0, in, out, all, n, rank, nranks, s);

	CHECK(ar > 0 && ag > 0 && p2p > 0, "estimates: AllReduce %g, AllGather %g, send/recv %g us",
	      ar, ag, p2p);
	CHECK(fabsf(both - (ar + ag)) <= 1e-3f * both, "a group's estimate is its calls' sum: "
	      "%g against %g + %g", both, ar, ag);
	CHECK(half > 0 && half < ar, "half the message, less time: %g against %g", half, ar);
	CHECK(none <= 0, "an empty simulated group: %g (NCCL_UNDEF_FLOAT or 0)", none);
}

/* NCCL enqueues a group's operations at ncclGroupEnd: what the caller puts
 * on their streams between a call and the end runs first.  Here each
 * rank's input is rewritten after the calls, behind a 50 ms host function
 * so that a collective that started early reads the old input, on two
 * user streams (AllReduce on one, AllGather on the other; the group ends
 * once both streams got there).  A PreMulSum operator destroyed inside the
 * group, after the call that names it, still scales it (NCCL resolves the
 * operator at the call).  Then a simulated group (ncclGroupSimulateEnd),
 * which runs nothing: its AllReduce leaves the output as it was, and the
 * communicator goes on with the next collective in step. */
static int case_group_order(int rank, int n, const ncclUniqueId *id, void *arg)
{
	enum { N = 4096 };
	float h[N], *in = (float *)dev_alloc(N * sizeof(float), 0);
	float *sum = (float *)dev_alloc(N * sizeof(float), 0);
	float *all = (float *)dev_alloc((size_t)N * n * sizeof(float), 0);
	cudaStream_t s, t;
	ncclComm_t comm = join(rank, n, id, &s);
	ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
	float three = 3.0f;
	ncclRedOp_t pms;
	int bad = 0;

	(void)arg;
	cudaStreamCreate(&t);
	for (int i = 0; i < N; i++)
		h[i] = 1;
	cudaMemcpyAsync(in, h, sizeof(h), cudaMemcpyHostToDevice, s);
	cudaStreamSynchronize(s);
	for (int i = 0; i < N; i++)
		h[i] = (float)(rank + 2);
	CHECK(ncclGroupStart() == ncclSuccess, "group");
	CHECK(ncclAllReduce(in, sum, N, ncclFloat, ncclSum, comm, s) == ncclSuccess, "AllReduce");
	CHECK(ncclAllGather(in, all, N, ncclFloat, comm, t) == ncclSuccess, "AllGather");
	cudaLaunchHostFunc(s, nap, (void *)(uintptr_t)50);
	cudaMemcpyAsync(in, h, sizeof(h), cudaMemcpyHostToDevice, s);
	cudaLaunchHostFunc(t, nap, (void *)(uintptr_t)50);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	cudaStreamSynchronize(s);
	cudaStreamSynchronize(t);
	cudaMemcpy(h, sum, sizeof(h), cudaMemcpyDeviceToHost);
	for (int i = N - 1; i >= 0; i--)
		if (h[i] != (float)(n * (n + 3)) / 2) /* sum of rank + 2 */
			bad = i + 1;
	CHECK(!bad, "AllReduce read the input from before the group's end ([%d] = %g)",
	      bad - 1, bad ? h[bad - 1] : 0.0f);
	for (int p = 0; p < n; p++) {
		cudaMemcpy(h, all + (size_t)p * N, sizeof(h), cudaMemcpyDeviceToHost);
		CHECK(h[0] == (float)(p + 2) && h[N - 1] == (float)(p + 2),
		      "AllGather slice %d: %g, want %d", p, h[0], p + 2);
	}
	CHECK(ncclRedOpCreatePreMulSum(&pms, &three, ncclFloat, ncclScalarHostImmediate, comm) ==
	      ncclSuccess, "PreMulSum");
	CHECK(ncclGroupStart() == ncclSuccess, "group with a PreMulSum");
	CHECK(ncclAllReduce(in, sum, N, ncclFloat, pms, comm, s) == ncclSuccess, "AllReduce");
	CHECK(ncclRedOpDestroy(pms, comm) == ncclSuccess, "destroyed before the group's end");
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	cudaStreamSynchronize(s);
	cudaMemcpy(h, sum, sizeof(h), cudaMemcpyDeviceToHost);
	CHECK(h[0] == 3.0f * (float)(n * (n + 3)) / 2 && h[N - 1] == h[0],
	      "PreMulSum AllReduce: %g, want %g", h[0], 3.0 * (n * (n + 3)) / 2);
	cudaMemset(sum, 0, N * sizeof(float));
	cudaDeviceSynchronize();
	CHECK(ncclGroupStart() == ncclSuccess, "group to simulate");
	CHECK(ncclAllReduce(in, sum, N, ncclFloat, ncclSum, comm, s) == ncclSuccess, "AllReduce");
	CHECK(ncclAllGather(in, all, N, ncclFloat, comm, t) == ncclSuccess, "AllGather");
	CHECK(ncclGroupSimulateEnd(&sim) == ncclSuccess, "simulated end");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess && cudaStreamSynchronize(t) == cudaSuccess,
	      "the streams complete");
	CHECK(all_bytes((const char *)sum, N * sizeof(float), 0),
	      "the simulated group's AllReduce wrote its output");
	check_estimates(comm, in, sum, all, N, sim.estimatedTime, rank, n, s);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "a collective after the simulated group");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	cudaStreamDestroy(t);
	return CHECK_SUMMARY();
}

/* ---- a failed call inside a group ---------------------------------------- */

/* A send to and a receive from the other rank and an AllGather in a
 * group; `bad`: one more call, which fails its argument check.  Returns
 * what ncclGroupEnd returned. */
static ncclResult_t group_with(ncclComm_t comm, cudaStream_t s, int rank, int bad, char *send,
			       char *recv, char *all)
{
	int peer = 1 - rank;

	ncclGroupStart();
	CHECK(ncclAllGather(send, all, 4096, ncclInt8, comm, s) == ncclSuccess, "AllGather");
	CHECK(ncclSend(send, 4096, ncclInt8, peer, comm, s) == ncclSuccess, "send");
	CHECK(ncclRecv(recv, 4096, ncclInt8, peer, comm, s) == ncclSuccess, "receive");
	if (bad)
		CHECK(ncclAllGather(send, all, 4096, (ncclDataType_t)99, comm, s) ==
			      ncclInvalidArgument, "bad datatype refused");
	return ncclGroupEnd();
}

/* NCCL (group.cc) records the error of a call that fails inside a group
 * and, at the outermost ncclGroupEnd, drops the group's operations and
 * returns that error; the communicator stays usable.  2 ranks; "all":
 * both make the bad call, so both drop the AllGather and the send/receive
 * pair and go on;
 * "one": only rank 1 does, and rank 0, whose receive never comes, is
 * released by the operation timeout instead of hanging. */
static int case_group_error(int rank, int n, const ncclUniqueId *id, void *arg)
{
	int every = !strcmp(arg, "all"), peer = 1 - rank;
	char *send = dev_alloc(4096, 'a' + rank), *recv = dev_alloc(4096, 0);
	char *all = dev_alloc(4096 * (size_t)n, 0);
	ncclResult_t r, e = ncclSuccess;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);

	r = group_with(comm, s, rank, every || rank == 1, send, recv, all);
	CHECK(r == (every || rank == 1 ? ncclInvalidArgument : ncclSuccess),
	      "rank %d: group end returned %d", rank, r);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the stream completes");
	if (!every) {
		/* rank 0 waits for a receive that was dropped */
		CHECK(wait_error(comm, &e, 30) >= 0, "rank %d: the communicator fails: %d", rank, e);
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
		return CHECK_SUMMARY();
	}
	CHECK(all_bytes(recv, 4096, 0), "the failed group's receive was dropped");
	CHECK(all_bytes(all, 4096 * (size_t)n, 0), "and its AllGather");
	/* errors of an inner group come out at the outermost end, once */
	ncclGroupStart();
	ncclGroupStart();
	CHECK(ncclSend(send, 4096, ncclInt8, n, comm, s) == ncclInvalidArgument, "bad peer");
	CHECK(ncclGroupEnd() == ncclSuccess, "inner group end");
	CHECK(ncclGroupEnd() == ncclInvalidArgument, "outer group end");
	/* a NULL communicator inside a group fails its end as well */
	ncclGroupStart();
	CHECK(ncclAllGather(send, all, 4096, ncclInt8, NULL, s) == ncclInvalidArgument,
	      "NULL communicator");
	CHECK(ncclGroupEnd() == ncclInvalidArgument, "its group's end");
	CHECK(group_with(comm, s, rank, 0, send, recv, all) == ncclSuccess, "a good group after");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess && all_bytes(recv, 4096, 'a' + peer),
	      "its receive delivered");
	CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclSuccess,
	      "the communicator is healthy: %d", e);
	CHECK(allgather_ok(comm, s, rank, n, MIB), "and works");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	cudaFree(send);
	cudaFree(recv);
	cudaFree(all);
	return CHECK_SUMMARY();
}

/* ---- more bad input (session 25's audit) ---------------------------------- */

/* ncclInvalidArgument for a config NCCL 2.28 refuses (parseCommConfig),
 * in init and in split; an attribute newer than the config's version is
 * ignored, as NCCL reads it. */
static void bad_configs(ncclComm_t comm, int n, const ncclUniqueId *id, int rank)
{
	static const struct { const char *what; size_t off; int value; } bad[] = {
		{ "blocking 5", offsetof(ncclConfig_t, blocking), 5 },
		{ "cgaClusterSize -3", offsetof(ncclConfig_t, cgaClusterSize), -3 },
		{ "minCTAs 0", offsetof(ncclConfig_t, minCTAs), 0 },
		{ "splitShare 7", offsetof(ncclConfig_t, splitShare), 7 },
		{ "collnetEnable 2", offsetof(ncclConfig_t, collnetEnable), 2 },
		{ "CTAPolicy 9", offsetof(ncclConfig_t, CTAPolicy), 9 },
		{ "shrinkShare -1", offsetof(ncclConfig_t, shrinkShare), -1 },
		{ "nvlsCTAs 0", offsetof(ncclConfig_t, nvlsCTAs), 0 },
		{ "nChannelsPerNetPeer 65", offsetof(ncclConfig_t, nChannelsPerNetPeer), 65 },
		{ "nvlinkCentricSched 3", offsetof(ncclConfig_t, nvlinkCentricSched), 3 },
	};
	ncclComm_t junk = NULL;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;

		memcpy((char *)&cfg + bad[i].off, &bad[i].value, sizeof(int));
		junk = (ncclComm_t)&cfg;
		CHECK(ncclCommInitRankConfig(&junk, n, *id, rank, &cfg) == ncclInvalidArgument &&
			      !junk, "init with %s refused, no handle", bad[i].what);
		CHECK(ncclCommSplit(comm, 0, rank, &junk, &cfg) == ncclInvalidArgument,
		      "split with %s refused", bad[i].what);
	}
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;

	cfg.minCTAs = 64;
	cfg.maxCTAs = 2;
	CHECK(ncclCommSplit(comm, 0, rank, &junk, &cfg) == ncclInvalidArgument,
	      "minCTAs above maxCTAs refused");
	CHECK(junk == NULL, "nothing made");
	/* a rank that takes no part reads no config, as NCCL: its peers'
	 * split goes through */
	CHECK(ncclCommSplit(comm, rank ? NCCL_SPLIT_NOCOLOR : 0, 0, &junk, rank ? &cfg : NULL) ==
		      ncclSuccess, "NOCOLOR split with a bad config");
	CHECK(rank ? !junk : junk != NULL, "rank %d's child", rank);
	if (junk)
		CHECK(ncclCommDestroy(junk) == ncclSuccess, "destroy the child");
}

/* Threads of one rank register and deregister buffers of their own on
 * one communicator at once: every call succeeds. */
enum { REG_THREADS = 4, REG_ITERS = 5000 };

struct reg_thread {
	ncclComm_t comm;
	char *base;
	int fails;
};

static void *reg_worker(void *arg)
{
	struct reg_thread *t = arg;

	for (int i = 0; i < REG_ITERS; i++) {
		void *h = NULL;

		if (ncclCommRegister(t->comm, t->base + (i & 63) * 64, 64, &h) != ncclSuccess ||
		    ncclCommDeregister(t->comm, h) != ncclSuccess)
			t->fails++;
	}
	return NULL;
}

static void reg_threads(ncclComm_t comm)
{
	char *base = dev_alloc(REG_THREADS * 4096, 0);
	struct reg_thread t[REG_THREADS];
	pthread_t th[REG_THREADS];
	int fails = 0;

	for (int i = 0; i < REG_THREADS; i++) {
		t[i] = (struct reg_thread){ comm, base + i * 4096, 0 };
		pthread_create(&th[i], NULL, reg_worker, &t[i]);
	}
	for (int i = 0; i < REG_THREADS; i++) {
		pthread_join(th[i], NULL);
		fails += t[i].fails;
	}
	CHECK(!fails, "%d of %d register/deregister pairs from %d threads failed", fails,
	      REG_THREADS * REG_ITERS, REG_THREADS);
	cudaFree(base);
}

/* The registration calls of NULL or size 0 hand out NCCL's "nothing"
 * handle; a window is its own kind of handle, refused by the other
 * deregister; a simulated group's simInfo is checked as NCCL does. */
static void bad_handles(ncclComm_t comm)
{
	char *buf = dev_alloc(MIB, 0);
	ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
	ncclWindow_t win = NULL;
	void *h = (void *)1;

	CHECK(ncclCommRegister(comm, NULL, MIB, &h) == ncclSuccess && !h, "register NULL");
	CHECK(ncclCommRegister(comm, buf, 0, &h) == ncclSuccess && !h, "register 0 bytes");
	CHECK(ncclCommDeregister(comm, h) == ncclSuccess, "its handle deregisters");
	CHECK(ncclCommWindowRegister(comm, buf, MIB, &win, 0) == ncclSuccess && win, "window");
	CHECK(ncclCommDeregister(comm, win) == ncclInvalidUsage, "a window is no registration");
	CHECK(ncclCommWindowDeregister(comm, (ncclWindow_t)(buf + 64)) == ncclInvalidUsage,
	      "window deregister of what was never given");
	CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess, "window deregister");
	CHECK(ncclCommWindowDeregister(comm, win) == ncclInvalidUsage, "not twice");
	sim.magic = 0;
	ncclGroupStart();
	ncclGroupStart();
	CHECK(ncclGroupSimulateEnd(&sim) == ncclSuccess, "simInfo read only at the outermost end");
	CHECK(ncclGroupSimulateEnd(&sim) == ncclInvalidArgument, "simInfo not initialised");
	CHECK(ncclCommRevoke(NULL, 0) == ncclSuccess, "revoke NULL: nothing, as NCCL");
	cudaFree(buf);
}

static int case_badargs2(int rank, int n, const ncclUniqueId *id, void *arg)
{
	int two[2] = { 0, 0 };
	ncclComm_t comms[2] = { NULL, NULL };
	cudaStream_t s;
	ncclComm_t comm;
	void *p = NULL;

	(void)arg;
	/* a process's first CUDA call: NCCL's cudaMalloc makes a context */
	CHECK(ncclMemAlloc(&p, MIB) == ncclSuccess && p, "ncclMemAlloc before any context");
	CHECK(ncclMemFree(p) == ncclSuccess, "and its free");
	comm = join(rank, n, id, &s);
	bad_configs(comm, n, id, rank);
	bad_handles(comm);
	reg_threads(comm);
	if (rank == 0) { /* one process, devices of its own */
		CHECK(ncclCommInitAll(comms, 2, two) == ncclInvalidUsage, "InitAll: a device twice");
		two[1] = 9999;
		CHECK(ncclCommInitAll(comms, 2, two) == ncclInvalidArgument,
		      "InitAll: no such device");
		CHECK(!comms[0] && !comms[1], "InitAll made nothing");
	}
	CHECK(allgather_ok(comm, s, rank, n, 4096), "the communicator works after");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* ---- a group whose streams cannot meet, captured and uncaptured calls ---- */

/* Two AllReduces held on two streams; rank 0 starts capturing the first
 * stream before the end (ncclInvalidUsage: the call was not made for a
 * graph), or destroys the second (the end cannot make the first wait for
 * it).  Neither may run on rank 0 then, or rank 1 would pair its
 * AllReduce n with rank 0's n + 1: the communicator fails on both ranks,
 * and nothing hangs.  The destroyed stream is for the emulation only:
 * CUDA leaves using a destroyed stream undefined, and the driver faults
 * (tests/gpu/accept.sh runs the capture variant). */
static int case_group_meet_fail(int rank, int n, const ncclUniqueId *id, void *arg)
{
	char *a = dev_alloc(4096, 1), *b = dev_alloc(4096, 0);
	char *c = dev_alloc(4096, 2), *d = dev_alloc(4096, 0);
	ncclResult_t r, e = ncclSuccess;
	cudaGraph_t g = NULL;
	cudaStream_t s, t;
	ncclComm_t comm = join(rank, n, id, &s);

	int destroy = arg != NULL;

	cudaStreamCreate(&t);
	ncclGroupStart();
	/* rank 1 may come to its calls after rank 0 failed the communicator */
	r = ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, s);
	CHECK(r == ncclSuccess || (rank && r == ncclRemoteError), "AllReduce: %d", r);
	r = ncclAllReduce(c, d, 4096, ncclInt8, ncclSum, comm, t);
	CHECK(r == ncclSuccess || (rank && r == ncclRemoteError), "AllReduce 2: %d", r);
	if (rank == 0 && destroy)
		cudaStreamDestroy(t);
	else if (rank == 0)
		cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
	r = ncclGroupEnd();
	if (rank == 0) {
		CHECK(r == (destroy ? ncclUnhandledCudaError : ncclInvalidUsage),
		      "rank 0: group end returned %d", r);
		if (!destroy)
			cudaStreamEndCapture(s, &g);
		if (g)
			cudaGraphDestroy(g);
		CHECK(all_bytes(b, 4096, 0) && all_bytes(d, 4096, 0), "rank 0 ran nothing");
	}
	CHECK(wait_error(comm, &e, 20) >= 0 && e != ncclSuccess,
	      "rank %d: the communicator fails: %d", rank, e);
	cudaGetLastError();
	if (rank == 0 && destroy)
		t = s;
	CHECK(cudaStreamSynchronize(t) == cudaSuccess, "rank %d: its streams complete", rank);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	if (t != s)
		cudaStreamDestroy(t);
	return CHECK_SUMMARY();
}

/* As NCCL: within a group the streams given to one communicator are all
 * uncaptured or all captured by the same graph; the call that mixes them
 * is refused, and fails the group.  The communicator stays usable. */
static int case_group_mixed_capture(int rank, int n, const ncclUniqueId *id, void *arg)
{
	char *a = dev_alloc(4096, 1), *b = dev_alloc(4096, 0);
	cudaGraph_t g = NULL;
	cudaStream_t s, t;
	ncclComm_t comm = join(rank, n, id, &s);

	(void)arg;
	cudaStreamCreate(&t);
	ncclGroupStart();
	CHECK(ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, s) == ncclSuccess, "AllReduce");
	CHECK(cudaStreamBeginCapture(t, cudaStreamCaptureModeRelaxed) == cudaSuccess, "capture");
	CHECK(ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, t) == ncclInvalidUsage,
	      "a captured call after an uncaptured one is refused");
	CHECK(ncclGroupEnd() == ncclInvalidUsage, "and fails the group");
	CHECK(cudaStreamEndCapture(t, &g) == cudaSuccess, "end capture");
	cudaGraphDestroy(g);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess && all_bytes(b, 4096, 0),
	      "the group's AllReduce was dropped");
	ncclGroupStart();
	CHECK(cudaStreamBeginCapture(t, cudaStreamCaptureModeRelaxed) == cudaSuccess, "capture");
	CHECK(ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, t) == ncclSuccess,
	      "captured AllReduce");
	CHECK(ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, s) == ncclInvalidUsage,
	      "an uncaptured call after a captured one is refused");
	CHECK(ncclGroupEnd() == ncclInvalidUsage, "and fails the group");
	CHECK(cudaStreamEndCapture(t, &g) == cudaSuccess, "end capture");
	cudaGraphDestroy(g);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "the communicator works after");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	cudaStreamDestroy(t);
	return CHECK_SUMMARY();
}

/* ---- one graph launched again before its last launch is done ---------- */

#define TWICE_LAUNCHES 3

/* Rank r's input element i of buffer k (small: sums of TWICE_LAUNCHES
 * launches fit an int). */
static int twice_in(int r, int k, size_t i)
{
	return (int)((r + 1) * (k + 1) + i % 7);
}

/* Element i of AllReduce buffer k after `launches` in-place sums. */
static int twice_sum(int n, int k, size_t i, int launches)
{
	int s = 0;

	for (int r = 0; r < n; r++)
		s += twice_in(r, k, i);
	for (int l = 1; l < launches; l++)
		s *= n;
	return s;
}

/* Block p, element j, of rank r's AlltoAll buffer before any launch. */
static int twice_a2a(int r, int p, size_t j)
{
	return (int)(r * 4096 + p * 64 + j % 61);
}

static int twice_fill(int *dev, const int *host, size_t count, cudaStream_t s)
{
	return cudaMemcpyAsync(dev, host, count * sizeof(int), cudaMemcpyHostToDevice, s) ==
		       cudaSuccess &&
	       cudaStreamSynchronize(s) == cudaSuccess;
}

/* A captured group of in-place AllReduces on two communicators, then an
 * in-place AlltoAll, in one graph launched TWICE_LAUNCHES times back to
 * back on one stream with no synchronisation between: each launch starts
 * once the previous one ended (stream order), and each captured op counts
 * its own rounds from 0 again (with overlap its two streams' doorbells,
 * gcoll.h), however close behind the previous op of the same rank it
 * comes.  arg: elements per buffer (per block for the AlltoAll). */
static int case_graph_twice(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t count = strtoul(arg, NULL, 0), a2a = count * (size_t)n;
	cudaStream_t s;
	ncclComm_t a = join(rank, n, id, &s), b = NULL;
	int *x[2], *y, *host = malloc(a2a * sizeof(int));
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	int ok = host != NULL;

	CHECK(ncclCommSplit(a, 0, rank, &b, NULL) == ncclSuccess && b, "split");
	for (int k = 0; k < 2; k++) {
		x[k] = (int *)dev_alloc(count * sizeof(int), 0);
		for (size_t i = 0; ok && i < count; i++)
			host[i] = twice_in(rank, k, i);
		ok = ok && x[k] && twice_fill(x[k], host, count, s);
	}
	y = (int *)dev_alloc(a2a * sizeof(int), 0);
	for (size_t i = 0; ok && i < a2a; i++)
		host[i] = twice_a2a(rank, (int)(i / count), i % count);
	ok = ok && y && twice_fill(y, host, a2a, s);
	CHECK(ok, "buffers");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	for (int i = 0; i < 2; i++) {
		int k = (i + rank) % 2; /* the ranks call the communicators in other orders */

		CHECK(ncclAllReduce(x[k], x[k], count, ncclInt32, ncclSum, k ? b : a, s) ==
			      ncclSuccess, "AllReduce on communicator %d", k);
	}
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	CHECK(ncclAlltoAll(y, y, count, ncclInt32, a, s) == ncclSuccess, "AlltoAll");
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(g && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	for (int l = 0; ok && exec && l < TWICE_LAUNCHES; l++)
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", l);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
	for (int k = 0; ok && k < 2; k++) {
		ok = cudaMemcpy(host, x[k], count * sizeof(int), cudaMemcpyDeviceToHost) ==
		     cudaSuccess;
		for (size_t i = 0; ok && i < count; i++)
			ok = host[i] == twice_sum(n, k, i, TWICE_LAUNCHES);
		CHECK(ok, "AllReduce %d after %d launches", k, TWICE_LAUNCHES);
	}
	ok = ok && cudaMemcpy(host, y, a2a * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
	/* an odd number of exchanges: block p holds rank p's block for us */
	for (size_t i = 0; ok && i < a2a; i++)
		ok = host[i] == twice_a2a((int)(i / count), rank, i % count);
	CHECK(ok, "AlltoAll after %d launches", TWICE_LAUNCHES);
	CHECK(allgather_ok(a, s, rank, n, 4096) && allgather_ok(b, s, rank, n, 4096),
	      "both communicators work after the launches");
	if (exec)
		cudaGraphExecDestroy(exec);
	if (g)
		cudaGraphDestroy(g);
	CHECK(ncclCommDestroy(b) == ncclSuccess && ncclCommDestroy(a) == ncclSuccess, "destroy");
	cudaFree(x[0]);
	cudaFree(x[1]);
	cudaFree(y);
	free(host);
	return CHECK_SUMMARY();
}

/* ---- a captured group: held to its end, communicators in any order ----- */

#define CAP_REPLAYS 20
#define CAP_BYTES 4096

/* What rank r feeds buffer k at replay `it`, and the int8 sum over n ranks. */
static int cap_byte(int r, int k, int it)
{
	return (r * 7 + k * 3 + it) % 50;
}

static unsigned char cap_sum(int n, int k, int it)
{
	int sum = 0;

	for (int r = 0; r < n; r++)
		sum += cap_byte(r, k, it);
	return (unsigned char)sum;
}

static int cap_sums_ok(char *const out[3], int n, int it)
{
	unsigned char host[CAP_BYTES];

	for (int k = 0; k < 3; k++) {
		if (cudaMemcpy(host, out[k], CAP_BYTES, cudaMemcpyDeviceToHost) != cudaSuccess)
			return 0;
		for (int i = 0; i < CAP_BYTES; i++)
			if (host[i] != (it < 0 ? 0 : cap_sum(n, k, it)))
				return 0;
	}
	return 1;
}

/* One captured group: AllReduces on two communicators, which even ranks
 * call in one order and odd ranks in the other, plus a second AllReduce
 * of the first communicator on a second captured stream.  As with NCCL,
 * they run at the group's end, each communicator's on its own streams:
 * recorded in call order on one stream, the replays deadlocked (each
 * rank waited on the communicator its peers had not reached).  Replayed
 * with new inputs each time. */
static int case_group_capture(int rank, int n, const ncclUniqueId *id, void *arg)
{
	cudaStream_t s, t;
	ncclComm_t a = join(rank, n, id, &s), b = NULL;
	char *in[3], *out[3];
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	cudaEvent_t fork, back;
	int bad = -1;

	(void)arg;
	CHECK(ncclCommSplit(a, 0, rank, &b, NULL) == ncclSuccess && b, "split");
	cudaStreamCreate(&t);
	cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
	cudaEventCreateWithFlags(&back, cudaEventDisableTiming);
	for (int k = 0; k < 3; k++) {
		in[k] = dev_alloc(CAP_BYTES, 0);
		out[k] = dev_alloc(CAP_BYTES, 0);
	}
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	cudaEventRecord(fork, s);
	cudaStreamWaitEvent(t, fork, 0);
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	for (int i = 0; i < 2; i++) {
		int k = (i + rank) % 2; /* buffer k goes with communicator k */

		CHECK(ncclAllReduce(in[k], out[k], CAP_BYTES, ncclInt8, ncclSum, k ? b : a, s) ==
			      ncclSuccess, "AllReduce on communicator %d", k);
	}
	CHECK(ncclAllReduce(in[2], out[2], CAP_BYTES, ncclInt8, ncclSum, a, t) == ncclSuccess,
	      "AllReduce on the second stream");
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	cudaEventRecord(back, t);
	cudaStreamWaitEvent(s, back, 0);
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(cap_sums_ok(out, n, -1), "nothing ran during the capture");
	CHECK(cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	for (int it = 0; exec && it < CAP_REPLAYS && bad < 0; it++) {
		for (int k = 0; k < 3; k++)
			cudaMemsetAsync(in[k], cap_byte(rank, k, it), CAP_BYTES, s);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		if (!cap_sums_ok(out, n, it))
			bad = it;
	}
	CHECK(bad < 0, "replay %d gave wrong sums", bad);
	CHECK(allgather_ok(a, s, rank, n, 4096) && allgather_ok(b, t, rank, n, 4096),
	      "both communicators work after the replays");
	if (exec)
		cudaGraphExecDestroy(exec);
	if (g)
		cudaGraphDestroy(g);
	CHECK(ncclCommDestroy(b) == ncclSuccess && ncclCommDestroy(a) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* A communicator used eagerly while a capture of its calls is open (NCCL
 * allows it): a captured group's AllReduce and send/receive, then an
 * eager group's on another stream, which rank 1 makes after its capture
 * ended and rank 0 before.  The captured work ran on streams that joined
 * the capture until it ends: the eager group must not wait on them (it
 * failed, and broke the application's capture).  Then the graph replays. */
static int case_group_capture_mixed(int rank, int n, const ncclUniqueId *id, void *arg)
{
	char *a = dev_alloc(4096, 1), *b = dev_alloc(4096, 0), *c = dev_alloc(4096, 0);
	char *ring = dev_alloc(4096, 0), *eager_ring = dev_alloc(4096, 0);
	int next = (rank + 1) % n, prev = (rank + n - 1) % n;
	cudaGraphExec_t exec = NULL;
	cudaGraph_t g = NULL;
	cudaStream_t s, t;
	ncclComm_t comm = join(rank, n, id, &s);

	(void)arg;
	cudaStreamCreate(&t);
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess, "capture");
	ncclGroupStart();
	CHECK(ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, s) == ncclSuccess, "captured");
	CHECK(ncclSend(a, 4096, ncclInt8, next, comm, s) == ncclSuccess &&
		      ncclRecv(ring, 4096, ncclInt8, prev, comm, s) == ncclSuccess, "captured p2p");
	CHECK(ncclGroupEnd() == ncclSuccess, "captured group");
	if (rank == 1)
		CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "rank 1 ends its capture");
	ncclGroupStart();
	CHECK(ncclAllReduce(a, c, 4096, ncclInt8, ncclSum, comm, t) == ncclSuccess, "eager");
	CHECK(ncclSend(a, 4096, ncclInt8, next, comm, t) == ncclSuccess &&
		      ncclRecv(eager_ring, 4096, ncclInt8, prev, comm, t) == ncclSuccess, "eager p2p");
	CHECK(ncclGroupEnd() == ncclSuccess, "eager group, the capture open on rank 0");
	CHECK(cudaStreamSynchronize(t) == cudaSuccess && all_bytes_on(c, 4096, n, t) &&
		      all_bytes_on(eager_ring, 4096, 1, t), "the eager group's results");
	if (rank == 0)
		CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "rank 0 ends its capture");
	CHECK(all_bytes(b, 4096, 0) && all_bytes(ring, 4096, 0), "nothing captured ran");
	CHECK(g && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	for (int it = 0; exec && it < 3; it++)
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess && cudaStreamSynchronize(s) ==
			      cudaSuccess && all_bytes(b, 4096, n) && all_bytes(ring, 4096, 1),
		      "replay %d", it);
	if (exec)
		cudaGraphExecDestroy(exec);
	if (g)
		cudaGraphDestroy(g);
	CHECK(allgather_ok(comm, t, rank, n, 4096), "the communicator works after");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	cudaStreamDestroy(t);
	return CHECK_SUMMARY();
}

/* A capture invalidated (by a wait on an event from outside it) but not
 * ended holds its streams still: another capture on the communicator must
 * get other ones (it took them for idle, CUDA refused to merge the two
 * captures, and the communicator failed).  Then 65 captures open at once:
 * past the communicator's 64 pairs the call fails, the communicator does
 * not. */
static int case_group_capture_streams(int rank, int n, const ncclUniqueId *id, void *arg)
{
	enum { K = 65 };
	char *a = dev_alloc(4096, 1), *b = dev_alloc(4096, 0), *b2 = dev_alloc(4096, 0);
	cudaStream_t s, s2, u, *st = calloc(K, sizeof(*st));
	cudaGraph_t g = NULL, g2 = NULL, *gs = calloc(K, sizeof(*gs));
	cudaGraphExec_t x = NULL;
	ncclComm_t comm = join(rank, n, id, &s);
	ncclResult_t e = ncclSuccess;
	cudaEvent_t ev;
	int made = 0;

	(void)arg;
	cudaStreamCreate(&s2);
	cudaStreamCreate(&u);
	cudaEventCreate(&ev);
	cudaEventRecord(ev, u);
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess, "capture 1");
	ncclGroupStart();
	CHECK(ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, s) == ncclSuccess, "AllReduce 1");
	CHECK(ncclGroupEnd() == ncclSuccess, "group 1");
	cudaStreamWaitEvent(s, ev, 0); /* invalidates capture 1 */
	CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed) == cudaSuccess, "capture 2");
	ncclGroupStart();
	CHECK(ncclAllReduce(a, b2, 4096, ncclInt8, ncclSum, comm, s2) == ncclSuccess, "AllReduce 2");
	CHECK(ncclGroupEnd() == ncclSuccess, "group 2, in a valid capture");
	CHECK(cudaStreamEndCapture(s2, &g2) == cudaSuccess, "end capture 2");
	CHECK(cudaStreamEndCapture(s, &g) != cudaSuccess, "capture 1 was invalidated");
	cudaGetLastError();
	CHECK(g2 && cudaGraphInstantiate(&x, g2, 0) == cudaSuccess && cudaGraphLaunch(x, s2) ==
		      cudaSuccess && cudaStreamSynchronize(s2) == cudaSuccess &&
		      all_bytes(b2, 4096, n), "capture 2 replays");
	for (int i = 0; i < K && st && gs; i++) {
		ncclResult_t r;

		cudaStreamCreate(&st[i]);
		cudaStreamBeginCapture(st[i], cudaStreamCaptureModeRelaxed);
		ncclGroupStart();
		r = ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, st[i]);
		r = ncclGroupEnd() ? ncclSystemError : r;
		made += r == ncclSuccess;
	}
	for (int i = 0; i < K && st && gs; i++) {
		cudaStreamEndCapture(st[i], &gs[i]);
		if (gs[i])
			cudaGraphDestroy(gs[i]);
		cudaStreamDestroy(st[i]);
	}
	cudaGetLastError();
	CHECK(made == K - 1, "%d of %d captures open at once took a collective", made, K);
	CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclSuccess,
	      "the communicator did not fail: %d", e);
	if (x)
		cudaGraphExecDestroy(x);
	if (g2)
		cudaGraphDestroy(g2);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "the communicator works after");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(st);
	free(gs);
	return CHECK_SUMMARY();
}

/* A capture that ends between a call and the group's end: the call was
 * made for the graph, which no longer takes work.  ncclInvalidUsage, and
 * the communicator fails (a peer that captured it would otherwise pair
 * its next operation with this one); nothing runs, nothing hangs.  (The
 * rank that fails it second may find it failed at its call or its end.) */
static int case_group_capture_ended(int rank, int n, const ncclUniqueId *id, void *arg)
{
	char *x = dev_alloc(4096, 1), *y = dev_alloc(4096, 0);
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	cudaGraph_t g = NULL;
	ncclResult_t e = ncclSuccess, r;

	(void)arg;
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	ncclGroupStart();
	r = ncclAllReduce(x, y, 4096, ncclInt8, ncclSum, comm, s);
	CHECK(r == ncclSuccess || r == ncclRemoteError, "AllReduce: %d", r);
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	r = ncclGroupEnd();
	CHECK(r == ncclInvalidUsage || r == ncclRemoteError, "the group's end refuses it: %d", r);
	CHECK(wait_error(comm, &e, 20) >= 0 && e != ncclSuccess, "the communicator fails: %d", e);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess && all_bytes(y, 4096, 0), "nothing ran");
	if (g)
		cudaGraphDestroy(g);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* ---- driver ------------------------------------------------------------ */

struct rank_case {
	const char *name;
	int nranks;
	launch_rank_fn fn;
	void *arg;
};

/* ---- every collective captured, replayed with new inputs ------------- */

#define COLLS_REPLAYS 20
#define COLLS_N 9 /* the collectives struct colls captures */

/* Buffers of one rank for every collective, b bytes a slice (c 32-bit
 * integers for the reductions, cr per rank for ReduceScatter). */
struct colls {
	int rank, n, inplace; /* inplace: every input inside its output */
	size_t b, c, cr;
	char *ag_s, *ag_r, *bc, *ga_s, *ga_r, *sc_s, *sc_r, *a2a_s, *a2a_r;
	int32_t *rd_s, *rd_r, *ar_s, *ar_r, *ard, *rs_s, *rs_r;
};

/* The roots: a different one for each rooted collective. */
static int colls_root(const struct colls *a, int k)
{
	return (k == 1 ? 1 : k == 2 ? a->n - 1 : k == 3 ? 2 : 1) % a->n;
}

/* What rank r feeds element i of collective k's input at replay it. */
static uint8_t colls_byte(int r, int k, size_t i, int it)
{
	return (uint8_t)(r * 37 + k * 11 + i * 7 + (i >> 9) + (size_t)it * 13);
}

static int32_t colls_int(int r, int k, size_t i, int it)
{
	return r * 100003 + k * 17 + (int32_t)(i % 100019) * 3 + it * 7;
}

static int32_t colls_sum(int n, int k, size_t i, int it)
{
	int32_t s = 0;

	for (int r = 0; r < n; r++)
		s += colls_int(r, k, i, it);
	return s;
}

static int colls_alloc(struct colls *a, int rank, int n, size_t b)
{
	size_t nb = (size_t)n * b;

	a->rank = rank;
	a->n = n;
	a->b = b;
	a->c = b / 4 + 1;
	a->cr = a->c / (size_t)n + 1;
	a->ag_s = dev_alloc(b, 0);
	a->ag_r = dev_alloc(nb, 0);
	a->bc = dev_alloc(b, 0);
	a->ga_s = dev_alloc(b, 0);
	a->ga_r = dev_alloc(nb, 0);
	a->sc_s = dev_alloc(nb, 0);
	a->sc_r = dev_alloc(b, 0);
	a->a2a_s = dev_alloc(nb, 0);
	a->a2a_r = dev_alloc(nb, 0);
	a->rd_s = (int32_t *)dev_alloc(a->c * 4, 0);
	a->rd_r = (int32_t *)dev_alloc(a->c * 4, 0);
	a->ar_s = (int32_t *)dev_alloc(a->c * 4, 0);
	a->ar_r = (int32_t *)dev_alloc(a->c * 4, 0);
	a->ard = (int32_t *)dev_alloc(37 * 4, 0);
	a->rs_s = (int32_t *)dev_alloc(a->cr * (size_t)n * 4, 0);
	a->rs_r = (int32_t *)dev_alloc(a->cr * 4, 0);
	return a->ag_s && a->ag_r && a->bc && a->ga_s && a->ga_r && a->sc_s && a->sc_r &&
	       a->a2a_s && a->a2a_r && a->rd_s && a->rd_r && a->ar_s && a->ar_r && a->ard &&
	       a->rs_s && a->rs_r;
}

static void colls_free(struct colls *a)
{
	void *p[] = { a->ag_s, a->ag_r, a->bc, a->ga_s, a->ga_r, a->sc_s, a->sc_r, a->a2a_s,
		      a->a2a_r, a->rd_s, a->rd_r, a->ar_s, a->ar_r, a->ard, a->rs_s, a->rs_r };

	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		cudaFree(p[i]);
}

/* Collective k of the sequence on stream s. */
/* Where collective k reads its input and writes its output: in place,
 * inside the output as NCCL defines it (the root's slice, our slice). */
static void *colls_in(const struct colls *a, int k)
{
	size_t me = (size_t)a->rank;

	if (!a->inplace)
		return k == 0 ? a->ag_s : k == 2 ? a->ga_s : k == 3 ? a->sc_s : k == 4 ? (void *)a->rd_s :
		       k == 5 ? (void *)a->ar_s : k == 6 ? (void *)a->ard : k == 7 ? (void *)a->rs_s :
		       k == 8 ? a->a2a_s : a->bc;
	return k == 0 ? a->ag_r + me * a->b : k == 2 ? a->ga_r + me * a->b : k == 3 ? a->sc_s :
	       k == 4 ? (void *)a->rd_r : k == 5 ? (void *)a->ar_r : k == 6 ? (void *)a->ard :
	       k == 7 ? (void *)a->rs_s : k == 8 ? a->a2a_r : a->bc;
}

static void *colls_out(const struct colls *a, int k)
{
	int root = a->rank == colls_root(a, 3);

	if (k == 3)
		return a->inplace && root ? a->sc_s + (size_t)a->rank * a->b : a->sc_r;
	if (k == 7)
		return a->inplace ? (void *)(a->rs_s + (size_t)a->rank * a->cr) : (void *)a->rs_r;
	return k == 0 ? a->ag_r : k == 2 ? a->ga_r : k == 4 ? (void *)a->rd_r :
	       k == 5 ? (void *)a->ar_r : k == 6 ? (void *)a->ard : k == 8 ? a->a2a_r : a->bc;
}

static ncclResult_t colls_call(const struct colls *a, int k, ncclComm_t comm, cudaStream_t s)
{
	size_t b = a->b, c = a->c;
	void *in = colls_in(a, k), *out = colls_out(a, k);

	switch (k) {
	case 0:
		return ncclAllGather(in, out, b, ncclUint8, comm, s);
	case 1:
		return ncclBroadcast(in, out, b, ncclUint8, colls_root(a, 1), comm, s);
	case 2:
		return ncclGather(in, out, b, ncclUint8, colls_root(a, 2), comm, s);
	case 3:
		return ncclScatter(in, out, b, ncclUint8, colls_root(a, 3), comm, s);
	case 4:
		return ncclReduce(in, out, c, ncclInt32, ncclSum, colls_root(a, 4), comm, s);
	case 5:
		return ncclAllReduce(in, out, c, ncclInt32, ncclSum, comm, s);
	case 6:
		return ncclAllReduce(in, out, 37, ncclInt32, ncclSum, comm, s);
	case 7:
		return ncclReduceScatter(in, out, a->cr, ncclInt32, ncclSum, comm, s);
	default:
		return ncclAlltoAll(in, out, b, ncclUint8, comm, s);
	}
}

static int put_bytes(char *dev, size_t len, int r, int k, size_t from, int it)
{
	uint8_t *h = malloc(len ? len : 1);
	int ok = h != NULL;

	for (size_t i = 0; ok && i < len; i++)
		h[i] = colls_byte(r, k, from + i, it);
	ok = ok && cudaMemcpy(dev, h, len, cudaMemcpyHostToDevice) == cudaSuccess;
	free(h);
	return ok;
}

static int put_ints(int32_t *dev, size_t len, int r, int k, int it)
{
	int32_t *h = malloc(len * 4);
	int ok = h != NULL;

	for (size_t i = 0; ok && i < len; i++)
		h[i] = colls_int(r, k, i, it);
	ok = ok && cudaMemcpy(dev, h, len * 4, cudaMemcpyHostToDevice) == cudaSuccess;
	free(h);
	return ok;
}

/* Every input of replay it, outputs poisoned. */
static int colls_inputs(const struct colls *a, int it)
{
	int me = a->rank, n = a->n, ok;
	size_t b = a->b, nb = (size_t)n * b;

	/* outputs poisoned first: in place, the inputs go inside them */
	ok = cudaMemset(a->ag_r, 0xee, nb) == cudaSuccess &&
	     cudaMemset(a->ga_r, 0xee, nb) == cudaSuccess &&
	     cudaMemset(a->sc_r, 0xee, b) == cudaSuccess &&
	     cudaMemset(a->rd_r, 0xee, a->c * 4) == cudaSuccess &&
	     cudaMemset(a->ar_r, 0xee, a->c * 4) == cudaSuccess &&
	     cudaMemset(a->rs_r, 0xee, a->cr * 4) == cudaSuccess &&
	     cudaMemset(a->a2a_r, 0xee, nb) == cudaSuccess;
	return ok && put_bytes(colls_in(a, 0), b, me, 0, 0, it) &&
	       put_bytes(a->bc, b, me == colls_root(a, 1) ? me : me + 1000, 1, 0, it) &&
	       put_bytes(colls_in(a, 2), b, me, 2, 0, it) && put_bytes(a->sc_s, nb, me, 3, 0, it) &&
	       put_ints(colls_in(a, 4), a->c, me, 4, it) && put_ints(colls_in(a, 5), a->c, me, 5, it) &&
	       put_ints(a->ard, 37, me, 6, it) && put_ints(a->rs_s, a->cr * (size_t)n, me, 7, it) &&
	       put_bytes(colls_in(a, 8), nb, me, 8, 0, it) && cudaDeviceSynchronize() == cudaSuccess;
}

static void *from_dev(const void *dev, size_t len)
{
	void *h = malloc(len ? len : 1);

	if (h && cudaMemcpy(h, dev, len, cudaMemcpyDeviceToHost) != cudaSuccess) {
		free(h);
		return NULL;
	}
	return h;
}

/* Collective k's output of replay it: first wrong byte or element, -1
 * when all are right (-2: could not look). */
static long colls_wrong(const struct colls *a, int k, int it)
{
	int me = a->rank, n = a->n;
	size_t b = a->b, nb = (size_t)n * b, i, len;
	uint8_t *h8;
	int32_t *h32;
	long bad = -1;

	switch (k) {
	case 0: case 2: case 8:
		if (k == 2 && me != colls_root(a, 2))
			return -1;
		if (!(h8 = from_dev(colls_out(a, k), nb)))
			return -2;
		for (i = 0; bad < 0 && i < nb; i++)
			if (h8[i] != colls_byte((int)(i / b), k, (k == 8 ? (size_t)me * b : 0) + i % b,
						it))
				bad = (long)i;
		break;
	case 1: case 3:
		if (!(h8 = from_dev(colls_out(a, k), b)))
			return -2;
		for (i = 0; bad < 0 && i < b; i++)
			if (h8[i] != colls_byte(colls_root(a, k), k, (k == 3 ? (size_t)me * b : 0) + i,
						it))
				bad = (long)i;
		break;
	default:
		if (k == 4 && me != colls_root(a, 4))
			return -1;
		len = k == 6 ? 37 : k == 7 ? a->cr : a->c;
		if (!(h32 = from_dev(colls_out(a, k), len * 4)))
			return -2;
		for (i = 0; bad < 0 && i < len; i++)
			if (h32[i] != colls_sum(n, k, (k == 7 ? (size_t)me * a->cr : 0) + i, it))
				bad = (long)i;
		h8 = (uint8_t *)h32;
	}
	free(h8);
	return bad;
}

static int colls_check(const struct colls *a, int it, const char *what)
{
	int ok = 1;

	for (int k = 0; k < COLLS_N; k++) {
		long bad = colls_wrong(a, k, it);

		CHECK(bad == -1, "%s: rank %d replay %d: collective %d wrong at %ld (b=%zu)", what,
		      a->rank, it, k, bad, a->b);
		ok = ok && bad == -1;
	}
	return ok;
}

/* All nine collectives (AllReduce in both schemes where
 * nccl.allreduce_direct_max says so) captured in one graph on each rank,
 * replayed with new inputs each time; every result checked bit for bit.
 * arg: bytes per slice, after an 'i' for every collective in place. */
static int case_graph_colls(int rank, int n, const ncclUniqueId *id, void *arg)
{
	struct colls a;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	const char *size = arg;
	int ok = colls_alloc(&a, rank, n, strtoul(size + (*size == 'i'), NULL, 0));

	a.inplace = *size == 'i';

	CHECK(ok, "buffers");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	for (int k = 0; k < COLLS_N; k++)
		CHECK(colls_call(&a, k, comm, s) == ncclSuccess, "captured collective %d", k);
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(g && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	for (int it = 0; ok && exec && it < COLLS_REPLAYS; it++) {
		CHECK(colls_inputs(&a, it), "inputs %d", it);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		ok = colls_check(&a, it, "one graph");
		if (it % 5 == 2)
			CHECK(allgather_ok(comm, s, rank, n, 3 * 4096 + 1), "eager op after %d", it);
	}
	CHECK(allgather_ok(comm, s, rank, n, MIB + 3), "eager op after the replays");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	if (exec)
		cudaGraphExecDestroy(exec);
	if (g)
		cudaGraphDestroy(g);
	colls_free(&a);
	return CHECK_SUMMARY();
}

/* The same sequence of collectives, which the ranks put in graphs in
 * different ways: rank 0 all in one graph, rank 1 one graph per
 * collective, the others two graphs (the first four, the rest).
 * Collectives match in the order they run, whatever graph holds them;
 * eager collectives run between the replays.  arg: bytes per slice. */
static int case_graph_grouped(int rank, int n, const ncclUniqueId *id, void *arg)
{
	struct colls a;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	cudaGraph_t g[COLLS_N] = { NULL };
	cudaGraphExec_t exec[COLLS_N] = { NULL };
	int ok = colls_alloc(&a, rank, n, strtoul(arg, NULL, 0));
	int graphs = rank == 0 ? 1 : rank == 1 ? COLLS_N : 2, k = 0;

	CHECK(ok, "buffers");
	for (int j = 0; j < graphs; j++) {
		int end = graphs == 1 ? COLLS_N : graphs == COLLS_N ? j + 1 : j ? COLLS_N : 4;

		CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture");
		for (; k < end; k++)
			CHECK(colls_call(&a, k, comm, s) == ncclSuccess, "captured collective %d", k);
		CHECK(cudaStreamEndCapture(s, &g[j]) == cudaSuccess, "end capture");
		CHECK(g[j] && cudaGraphInstantiate(&exec[j], g[j], 0) == cudaSuccess, "instantiate");
	}
	CHECK(allgather_ok(comm, s, rank, n, 5000), "eager op before the replays");
	for (int it = 0; ok && it < COLLS_REPLAYS; it++) {
		CHECK(colls_inputs(&a, it), "inputs %d", it);
		for (int j = 0; j < graphs; j++)
			CHECK(cudaGraphLaunch(exec[j], s) == cudaSuccess, "launch %d.%d", it, j);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		ok = colls_check(&a, it, "grouped");
		CHECK(allgather_ok(comm, s, rank, n, it % 2 ? 3 * 4096 + 1 : 1), "eager op after %d",
		      it);
	}
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	for (int j = 0; j < graphs; j++) {
		cudaGraphExecDestroy(exec[j]);
		cudaGraphDestroy(g[j]);
	}
	colls_free(&a);
	return CHECK_SUMMARY();
}

static const struct rank_case rank_cases[] = {
	{ "badargs", 2, case_badargs, NULL },
	{ "expandable", 2, case_expandable, NULL },
	{ "nonblocking", 3, case_nonblocking, NULL },
	{ "kill", 3, case_kill, NULL },
	{ "mixedoverlap", 2, case_mixed_overlap, NULL },
	{ "abort", 2, case_abort, NULL },
	{ "enqblocked", 2, case_enqueue_blocked, "never" },
	{ "enqblockeddead", 2, case_enqueue_blocked, "dead" },
	{ "abortenq", 2, case_abort_enqueue, "coll" },
	{ "abortenqp2p", 2, case_abort_enqueue, "p2p" },
	{ "mismatch", 2, case_mismatch, NULL },
	{ "graph", 3, case_graph, NULL },
	{ "graphpipe", 3, case_graph_pipe, NULL },
	{ "graphpipe4", 4, case_graph_pipe, NULL },
	{ "graphpairabort", 2, case_graph_pair_abort, NULL },
	{ "graphpairabort3", 3, case_graph_pair_abort, "2" },
	{ "graphsepgrp", 2, case_graph_later, "sepgrp" },
	{ "graphorder3", 3, case_graph_later, "order3" },
	{ "graphsendsend", 2, case_graph_later, "sendsend" },
	{ "graphtwographs", 2, case_graph_later, "twographs" },
	{ "graphstuck", 2, case_graph_stuck, NULL },
	{ "graphnoroom", 24, case_graph_noroom, NULL },
	{ "graphreplays-counts", 2, case_graph_replays, "counts" },
	{ "graphdead", 2, case_graph_dead, NULL },
	{ "graphdeadbig", 2, case_graph_dead_big, NULL },
	{ "graphdeadcoll", 2, case_graph_dead_big, "coll" },
	{ "graphreleased", 2, case_graph_replay_released, NULL },
	{ "graphreleasedc", 2, case_graph_replay_released, "coll" },
	{ "graphfuzz", 3, case_graph_fuzz, NULL },
	{ "graphfuzz1", 3, case_graph_fuzz, "1" },
	{ "graphfuzz2", 3, case_graph_fuzz, "2" },
	{ "graphfuzz4", 4, case_graph_fuzz, "3" },
	{ "graphfuzzg", 3, case_graph_fuzz, "g1" },
	{ "graphsplitp2p", 4, case_graph_split_p2p, NULL },
	{ "graphfuzz8", 8, case_graph_fuzz, "5" },
	{ "graphfuzz11", 11, case_graph_fuzz, "6" },
	{ "graphfuzzr", 3, case_graph_fuzz, "r2" },
	{ "graphreplays-split", 2, case_graph_replays, "split" },
	{ "graphmix-pingpong", 2, case_graph_mix, "pingpong" },
	{ "graphmix-bystander", 3, case_graph_mix, "bystander" },
	{ "graphmix-mixed", 3, case_graph_mix, "mixed" },
	{ "graphmix-mixedb", 3, case_graph_mix, "mixedb" },
	{ "graphmix-grpcoll", 3, case_graph_mix, "grpcoll" },
	{ "graphmix-self", 2, case_graph_mix, "self" },
	{ "grapha2a", 5, case_graph_a2a, NULL },
	{ "graphcount", 2, case_graph_mismatch, "count" },
	{ "graphkind", 3, case_graph_mismatch, "kind" },
	{ "graphreduce", 3, case_graph_reduce, NULL },
	{ "graphmany", 2, case_graph_many, NULL },
	{ "graphabort", 2, case_graph_abort, NULL },
	{ "graphcolls", 3, case_graph_colls, "300001" },
	{ "graphcolls4", 4, case_graph_colls, "200003" },
	{ "graphcolls5", 5, case_graph_colls, "65536" },
	{ "graphcolls2s", 2, case_graph_colls, "1" },
	{ "graphcolls8", 8, case_graph_colls, "40001" },
	{ "graphcollsi", 3, case_graph_colls, "i300001" },
	{ "graphcollsi4", 4, case_graph_colls, "i65536" },
	{ "graphgrouped", 3, case_graph_grouped, "150001" },
	{ "graphgrouped4", 4, case_graph_grouped, "7" },
	{ "graphtwice", 3, case_graph_twice, "300001" },
	{ "graphtwice4", 4, case_graph_twice, "4099" },
	{ "premulsum64", 2, case_premulsum64, NULL },
	{ "devapi", 3, case_devapi, NULL },
	{ "splitabort", 2, case_split_abort, NULL },
	{ "grouporder", 3, case_group_order, NULL },
	{ "streams", 2, case_streams, NULL },
	{ "split", 4, case_split, NULL },
	{ "shrink", 3, case_shrink, NULL },
	{ "shrinksplit", 3, case_shrinksplit, NULL },
	{ "splitgroup2", 2, case_splitgroup2, NULL },
	{ "splitnb", 3, case_split_nonblocking, NULL },
	{ "streams3", 3, case_streams, NULL },
	{ "revoke", 3, case_revoke, NULL },
	{ "revokesplit", 2, case_revoke_split, NULL },
	{ "revokesplitnb", 2, case_revoke_split, "nb" },
	{ "argcount", 2, case_argmismatch, "count" },
	{ "argroot", 3, case_argmismatch, "root" },
	{ "argcoll", 2, case_argmismatch, "collective" },
	{ "grouperr", 2, case_group_error, "all" },
	{ "grouperr1", 2, case_group_error, "one" },
	{ "badargs2", 2, case_badargs2, NULL },
	{ "groupmeet", 2, case_group_meet_fail, NULL },
	{ "groupmeet2", 2, case_group_meet_fail, "destroyed stream" },
	{ "groupmixcap", 2, case_group_mixed_capture, NULL },
	{ "groupcapture", 3, case_group_capture, NULL },
	{ "groupcapend", 2, case_group_capture_ended, NULL },
	{ "groupcapmix", 2, case_group_capture_mixed, NULL },
	{ "groupcapstreams", 2, case_group_capture_streams, NULL },
};

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s noargs|initall|onegpu|manydev|mixedpaths|twocomms|splitgroup|shrinkgroup|splitnb1|graphall|"
				"graphdestroycap|wrongctx|badpool",
			argv[0]);
		for (size_t i = 0; i < sizeof(rank_cases) / sizeof(rank_cases[0]); i++)
			fprintf(stderr, "|%s", rank_cases[i].name);
		fprintf(stderr, "\n");
		return 2;
	}
	if (!strcmp(argv[1], "noargs"))
		return case_noargs();
	if (!strcmp(argv[1], "initall"))
		return case_initall();
	if (!strcmp(argv[1], "splitgroup"))
		return case_splitgroup();
	if (!strcmp(argv[1], "shrinkgroup"))
		return case_shrinkgroup();
	if (!strcmp(argv[1], "onegpu"))
		return case_onegpu();
	if (!strcmp(argv[1], "manydev"))
		return case_manydev();
	if (!strcmp(argv[1], "mixedpaths"))
		return case_mixedpaths();
	if (!strcmp(argv[1], "twocomms"))
		return case_twocomms();
	if (!strcmp(argv[1], "splitnb1"))
		return case_split_nonblocking_one_thread();
	if (!strcmp(argv[1], "graphall"))
		return case_graphall();
	if (!strcmp(argv[1], "graphallp2p"))
		return case_graphall_p2p();
	if (!strcmp(argv[1], "graphdestroycap"))
		return case_graph_destroy_capturing();
	if (!strcmp(argv[1], "wrongctx"))
		return case_wrongctx();
	if (!strcmp(argv[1], "badpool"))
		return case_badpool();
	for (size_t i = 0; i < sizeof(rank_cases) / sizeof(rank_cases[0]); i++)
		if (!strcmp(argv[1], rank_cases[i].name)) {
			int rc = launch_ranks(rank_cases[i].nranks, rank_cases[i].fn,
					      rank_cases[i].arg, 120);
			printf("api_check %s: %s\n", argv[1], rc ? "FAILED" : "ok");
			return rc;
		}
	fprintf(stderr, "unknown case %s\n", argv[1]);
	return 2;
}
