/* init.c - how communicators are made: nonblocking init and the calls
 * refused while it runs (nonblocking), ncclCommInitAll and one thread's
 * groups over its communicators (initall), and ranks whose policies differ
 * in overlap, which cut ops in their creator's rounds (mixedoverlap).
 */

#include "api.h"

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

int case_nonblocking(int rank, int n, const ncclUniqueId *id, void *arg)
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

int case_initall(void)
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

/* Ranks whose policies differ in cccl.overlap (two work streams or one)
 * cut ops in as many rounds: the communicator's least rounds are its
 * creator's (rank 0 here), adopted as the geometry is.  Rank 1 turns
 * overlap on before its first call; each cut its collectives in other
 * rounds, and every collective above 128 KiB failed the descriptor
 * check on both ranks (ncclInvalidUsage, "mismatched operations"). */
int case_mixed_overlap(int rank, int n, const ncclUniqueId *id, void *arg)
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
