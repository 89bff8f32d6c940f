/* bad_input.c - calls NCCL refuses, refused alike under the preload: NULL,
 * foreign and destroyed handles, bad counts, roots, datatypes, operators
 * and overlapping buffers, memory and window registrations, a forked
 * child's use of its parent's communicator (badargs, noargs); then bad
 * configs, registrations from several threads at once, handles of the
 * wrong kind and InitAll device lists (badargs2).
 */

#include "api.h"

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

int case_badargs(int rank, int n, const ncclUniqueId *id, void *arg)
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

int case_noargs(void)
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

int case_badargs2(int rank, int n, const ncclUniqueId *id, void *arg)
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
