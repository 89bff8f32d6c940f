/* route_check.c - the pool and a real NCCL on one handle, and falling back
 * to the real NCCL, with a working stand-in for libnccl (fake_nccl.c).
 *
 *   route_check route    MODE   policy sends AllGather to NCCL: the shim
 *                               makes the real communicator at init and
 *                               uses both paths on the handle it returns
 *   route_check fallback MODE   rank 1 sees another pool: every rank ends
 *                               up on the real NCCL, within the timeout
 *   route_check declined MODE   rank 1's policy keeps 2-rank communicators
 *                               off the pool: rank 0 learns it from the
 *                               pool at once, not at its 30 s init timeout,
 *                               and both meet on the real NCCL
 *   route_check declined-first  the same, rank 1 declining before rank 0
 *                               arrives
 *   route_check initall         one process, ncclCommInitAll of 2 ranks
 *                               while the policy keeps 2-rank communicators
 *                               off the pool: the real library makes them
 *   route_check premulsum       policy sends AllReduce to NCCL: a PreMulSum
 *                               made on the handle works there
 *   route_check foreign         a communicator of the real library's own
 *                               id passes through untouched
 *   route_check release         as route, then ncclCommAbort and
 *                               ncclCommDestroy race on the handle: the
 *                               real side is released exactly once
 *   route_check mixed           rank 1's policy routes every collective
 *                               to the pool, rank 0's (the environment's)
 *                               does not: both ranks route each call as
 *                               the communicator's creator says
 * MODE is how rank 0 creates its communicator: blocking, nonblocking
 * (config.blocking = 0, polled) or group (blocking, inside a group, so it
 * completes at ncclGroupEnd).  Prints "N passed, M failed".
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/check.h"
#include "../common/device.h"
#include "../common/launch.h"

/* fake_nccl.c: collectives the stand-in ran in this process, and its
 * destroy and abort calls */
int fakenccl_served(void);
int fakenccl_released(void);

#define COUNT 4099

enum mode { BLOCKING, NONBLOCKING, GROUP };

struct job {
	const char *name;
	enum mode mode;
	int decliner_first; /* declined: rank 1 before rank 0 */
	char other_pool[96];
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static ncclResult_t init(ncclComm_t *comm, int n, ncclUniqueId id, int rank, enum mode m)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclResult_t r, e = ncclInProgress;
	double t0 = now_s();

	switch (m) {
	case GROUP:
		if ((r = ncclGroupStart()) != ncclSuccess)
			return r;
		r = ncclCommInitRank(comm, n, id, rank);
		CHECK(r == ncclSuccess, "init inside a group returned %d", r);
		return ncclGroupEnd();
	case NONBLOCKING:
		cfg.blocking = 0;
		r = ncclCommInitRankConfig(comm, n, id, rank, &cfg);
		if (r != ncclInProgress && r != ncclSuccess)
			return r;
		while (ncclCommGetAsyncError(*comm, &e) == ncclSuccess && e == ncclInProgress &&
		       now_s() - t0 < 20)
			usleep(1000);
		return e;
	default:
		return ncclCommInitRank(comm, n, id, rank);
	}
}

/* How every case starts: this rank's device, a stream, the communicator
 * (init in mode m), its init checked. */
static ncclResult_t join(ncclComm_t *comm, cudaStream_t *s, int n, const ncclUniqueId *id,
			 int rank, enum mode m)
{
	ncclResult_t r;

	cudaSetDevice(test_device(rank));
	cudaStreamCreate(s);
	r = init(comm, n, *id, rank, m);
	CHECK(r == ncclSuccess, "rank %d: init %d", rank, r);
	return r;
}

static void *dev(size_t bytes)
{
	void *p = NULL;

	return cudaMalloc(&p, bytes) == cudaSuccess ? p : NULL;
}

/* One collective on the handle, checked; returns how many collectives the
 * real (fake) library ran meanwhile. */
static int allgather(ncclComm_t comm, cudaStream_t s, int rank, int n)
{
	int32_t *send = dev(COUNT * 4), *recv = dev((size_t)COUNT * 4 * n);
	int32_t *host = malloc((size_t)COUNT * 4 * n);
	int before = fakenccl_served(), bad = 0;

	for (int i = 0; i < COUNT; i++)
		host[i] = rank * 100000 + i;
	test_upload(send, host, COUNT * 4);
	CHECK(ncclAllGather(send, recv, COUNT, ncclInt32, comm, s) == ncclSuccess, "allgather");
	cudaStreamSynchronize(s);
	cudaMemcpy(host, recv, (size_t)COUNT * 4 * n, cudaMemcpyDeviceToHost);
	for (int i = 0; i < COUNT * n; i++)
		bad += host[i] != (i / COUNT) * 100000 + i % COUNT;
	CHECK(bad == 0, "rank %d: %d wrong AllGather elements", rank, bad);
	cudaFree(send);
	cudaFree(recv);
	free(host);
	return fakenccl_served() - before;
}

static int broadcast(ncclComm_t comm, cudaStream_t s, int rank, int root)
{
	float *buf = dev(COUNT * 4), *host = malloc(COUNT * 4);
	int before = fakenccl_served(), bad = 0;

	for (int i = 0; i < COUNT; i++)
		host[i] = rank == root ? 0.5f * (float)i : -1.0f;
	test_upload(buf, host, COUNT * 4);
	CHECK(ncclBroadcast(buf, buf, COUNT, ncclFloat32, root, comm, s) == ncclSuccess,
	      "broadcast");
	cudaStreamSynchronize(s);
	cudaMemcpy(host, buf, COUNT * 4, cudaMemcpyDeviceToHost);
	for (int i = 0; i < COUNT; i++)
		bad += host[i] != 0.5f * (float)i;
	CHECK(bad == 0, "rank %d: %d wrong Broadcast elements", rank, bad);
	cudaFree(buf);
	free(host);
	return fakenccl_served() - before;
}

/* In-place AllReduce of floats with op (rank r gives (r + 1) x i): each
 * element must come out as scale x the sum. */
static int allreduce(ncclComm_t comm, cudaStream_t s, int rank, int n, ncclRedOp_t op,
		     float scale)
{
	float *buf = dev(COUNT * 4), *host = malloc(COUNT * 4);
	int before = fakenccl_served(), bad = 0;

	for (int i = 0; i < COUNT; i++)
		host[i] = (float)((rank + 1) * (i % 1000));
	test_upload(buf, host, COUNT * 4);
	CHECK(ncclAllReduce(buf, buf, COUNT, ncclFloat32, op, comm, s) == ncclSuccess,
	      "allreduce");
	cudaStreamSynchronize(s);
	cudaMemcpy(host, buf, COUNT * 4, cudaMemcpyDeviceToHost);
	for (int i = 0; i < COUNT; i++)
		bad += host[i] != scale * (float)(n * (n + 1) / 2 * (i % 1000));
	CHECK(bad == 0, "rank %d: %d wrong AllReduce elements", rank, bad);
	cudaFree(buf);
	free(host);
	return fakenccl_served() - before;
}

static void queries(ncclComm_t comm, int rank, int n)
{
	int count = -1, me = -1;
	ncclResult_t e = ncclInternalError;

	CHECK(ncclCommCount(comm, &count) == ncclSuccess && count == n, "count %d", count);
	CHECK(ncclCommUserRank(comm, &me) == ncclSuccess && me == rank, "rank %d", me);
	CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclSuccess,
	      "async error %d", e);
}

/* AllGather goes to NCCL by policy, Broadcast stays on the pool. */
static int case_route(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const struct job *j = arg;
	cudaStream_t s;
	ncclComm_t comm = NULL;
	ncclResult_t r;

	r = join(&comm, &s, n, id, rank, rank == 0 ? j->mode : BLOCKING);
	if (r != ncclSuccess)
		return CHECK_SUMMARY();
	queries(comm, rank, n);
	CHECK(allgather(comm, s, rank, n) == 1, "AllGather ran on the real side");
	CHECK(broadcast(comm, s, rank, n - 1) == 0, "Broadcast ran on the pool");
	CHECK(allgather(comm, s, rank, n) == 1, "AllGather again on the real side");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

struct racer {
	ncclComm_t comm;
	int abort;
	pthread_barrier_t *go;
	ncclResult_t r;
};

static void *race(void *arg)
{
	struct racer *t = arg;

	pthread_barrier_wait(t->go);
	t->r = t->abort ? ncclCommAbort(t->comm) : ncclCommDestroy(t->comm);
	return NULL;
}

/* An abort and a destroy of one handle from two threads at once (the
 * application's error handler and its normal exit): our side is released
 * once, by whichever comes first, and the real side with it, once.
 * (The two may also meet where no test can time them: this checks the
 * outcome, not that interleaving.) */
static int case_release(int rank, int n, const ncclUniqueId *id, void *arg)
{
	struct racer t[2];
	pthread_barrier_t go;
	pthread_t th[2];
	cudaStream_t s;
	ncclComm_t comm = NULL;
	ncclResult_t r;
	int before;

	(void)arg;
	r = join(&comm, &s, n, id, rank, BLOCKING);
	if (r != ncclSuccess)
		return CHECK_SUMMARY();
	CHECK(allgather(comm, s, rank, n) == 1, "the handle has a real side");
	before = fakenccl_released();
	pthread_barrier_init(&go, NULL, 2);
	for (int i = 0; i < 2; i++) {
		t[i] = (struct racer){ .comm = comm, .abort = i, .go = &go };
		pthread_create(&th[i], NULL, race, &t[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	/* the later one may find the handle dead already: ncclInvalidArgument */
	CHECK((t[0].r == ncclSuccess || t[1].r == ncclSuccess) &&
		      (t[0].r == ncclSuccess || t[0].r == ncclInvalidArgument) &&
		      (t[1].r == ncclSuccess || t[1].r == ncclInvalidArgument),
	      "destroy %d, abort %d", t[0].r, t[1].r);
	CHECK(fakenccl_released() - before == 1, "the real side released %d times",
	      fakenccl_released() - before);
	return CHECK_SUMMARY();
}

/* The ranks' policies route AllGather differently (the environment sends
 * it to NCCL, rank 1 sets every collective on the pool): each rank
 * following its own would run it on the real side on one rank and on the
 * pool on the other, and both would wait for the other until their
 * timeouts.  The rank that creates the communicator's record decides for
 * every rank, as for the staging window: rank 1 comes late, so rank 0
 * (nearly always) creates it and AllGather goes to NCCL on both; either
 * way the calls complete and agree. */
static int case_mixed(int rank, int n, const ncclUniqueId *id, void *arg)
{
	double t0;
	cudaStream_t s;
	ncclComm_t comm = NULL;
	ncclResult_t r, e = ncclInternalError;
	int ag;

	(void)arg;
	if (rank == 1) {
		setenv("CXLSHIM_NCCL_COLLECTIVES", "all", 1);
		usleep(200 * 1000);
	}
	r = join(&comm, &s, n, id, rank, BLOCKING);
	if (r != ncclSuccess)
		return CHECK_SUMMARY();
	t0 = now_s();
	ag = allgather(comm, s, rank, n);
	CHECK(ag == 0 || ag == 1, "rank %d: AllGather ran %d times on the real side", rank, ag);
	CHECK(broadcast(comm, s, rank, 0) == 0, "rank %d: Broadcast ran on the pool", rank);
	CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclSuccess,
	      "rank %d: the communicator is healthy: %d", rank, e);
	CHECK(now_s() - t0 < 2, "rank %d: the collectives took %.1fs", rank, now_s() - t0);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* Rank 1 refuses the pool at once; the others find out by the init
 * timeout; all of them meet on the real library. */
static int case_fallback(int rank, int n, const ncclUniqueId *id, void *arg)
{
	struct job *j = arg;
	double t0 = now_s();
	cudaStream_t s;
	ncclComm_t comm = NULL;
	ncclResult_t r;

	if (rank == 1) {
		snprintf(j->other_pool, sizeof(j->other_pool),
			 "/dev/shm/cxlshim-test-route-%d.pool", (int)getpid());
		setenv("CXLSHIM_POOL_PATH", j->other_pool, 1);
	}
	r = join(&comm, &s, n, id, rank, rank == 0 ? j->mode : BLOCKING);
	CHECK(now_s() - t0 < 10, "rank %d: init took %.1fs", rank, now_s() - t0);
	if (r == ncclSuccess) {
		queries(comm, rank, n);
		CHECK(allgather(comm, s, rank, n) == 1, "AllGather on the real NCCL");
		CHECK(broadcast(comm, s, rank, 0) == 1, "Broadcast on the real NCCL");
		CHECK(ncclCommFinalize(comm) == ncclSuccess, "finalize");
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
		/* a deferred init handed out our handle: its tombstone stays */
		if (rank == 0 && j->mode != BLOCKING)
			CHECK(ncclCommDestroy(comm) == ncclInvalidArgument, "destroyed twice");
	}
	if (rank == 1)
		unlink(j->other_pool);
	return CHECK_SUMMARY();
}

/* Rank 1's policy refuses 2-rank communicators, rank 0's takes them: the
 * record rank 1 fails in the pool sends rank 0 to the real library well
 * before the default 30 s init timeout, whichever comes first, and the
 * record is gone afterwards (a communicator on the same pool works). */
static int case_declined(int rank, int n, const ncclUniqueId *id, void *arg)
{
	struct job *j = arg;
	double t0;
	cudaStream_t s;
	ncclComm_t comm = NULL;
	ncclResult_t r;

	if (rank == 1)
		setenv("CXLSHIM_NCCL_MIN_RANKS", "3", 1);
	if (rank == (j->decliner_first ? 0 : 1))
		usleep(300 * 1000);
	t0 = now_s();
	r = join(&comm, &s, n, id, rank, rank == 0 ? j->mode : BLOCKING);
	CHECK(now_s() - t0 < 10, "rank %d: init took %.1fs", rank, now_s() - t0);
	if (r != ncclSuccess)
		return CHECK_SUMMARY();
	queries(comm, rank, n);
	CHECK(allgather(comm, s, rank, n) == 1, "rank %d: AllGather on the real NCCL", rank);
	CHECK(broadcast(comm, s, rank, 0) == 1, "rank %d: Broadcast on the real NCCL", rank);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* The policy sends AllReduce to NCCL (the step's environment): a PreMulSum
 * made on the handle is made on the real side too, and the routed
 * AllReduce names it by the real library's number; destroyed on both. */
static int case_premulsum(int rank, int n, const ncclUniqueId *id, void *arg)
{
	float half = 0.5f;
	cudaStream_t s;
	ncclComm_t comm = NULL;
	ncclRedOp_t op;

	(void)arg;
	if (join(&comm, &s, n, id, rank, BLOCKING) != ncclSuccess)
		return CHECK_SUMMARY();
	CHECK(ncclRedOpCreatePreMulSum(&op, &half, ncclFloat32, ncclScalarHostImmediate, comm) ==
		      ncclSuccess,
	      "rank %d: PreMulSum made", rank);
	CHECK(allreduce(comm, s, rank, n, op, 0.5f) == 1, "rank %d: AllReduce on the real side",
	      rank);
	CHECK(allreduce(comm, s, rank, n, ncclSum, 1.0f) == 1, "rank %d: a built-in op too", rank);
	CHECK(ncclRedOpDestroy(op, comm) == ncclSuccess, "rank %d: destroyed", rank);
	CHECK(ncclRedOpDestroy(op, comm) == ncclInvalidArgument, "rank %d: destroyed twice", rank);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* The policy sends 2-rank communicators to NCCL (the step's environment):
 * ncclCommInitAll hands the whole job to the real library, whose
 * communicators then serve the collectives. */
static int case_initall(void)
{
	ncclComm_t comms[2] = { NULL, NULL };
	cudaStream_t s;
	ncclResult_t r = ncclCommInitAll(comms, 2, NULL);
	int served;

	CHECK(r == ncclSuccess, "ncclCommInitAll: %d", r);
	if (r != ncclSuccess)
		return CHECK_SUMMARY();
	cudaStreamCreate(&s);
	served = fakenccl_served();
	/* the stand-in's collectives wait for every rank: a 1-rank view of
	 * each is all one thread can drive, so ask only what it holds */
	for (int i = 0; i < 2; i++) {
		int n = 0, rank = -1;

		CHECK(ncclCommCount(comms[i], &n) == ncclSuccess && n == 2, "comm %d: count %d", i, n);
		CHECK(ncclCommUserRank(comms[i], &rank) == ncclSuccess && rank == i,
		      "comm %d: rank %d", i, rank);
	}
	CHECK(fakenccl_served() == served, "nothing ran yet");
	for (int i = 0; i < 2; i++)
		CHECK(ncclCommDestroy(comms[i]) == ncclSuccess, "destroy %d", i);
	CHECK(fakenccl_released() == 2, "the real library released both: %d", fakenccl_released());
	return CHECK_SUMMARY();
}

/* The head of our id is the real library's own id: a communicator made
 * from it alone is the real library's, and everything passes through. */
static int case_foreign(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclUniqueId real = *id;
	cudaStream_t s;
	ncclComm_t comm = NULL;
	ncclResult_t r;

	(void)arg;
	memset(real.internal + 64, 0, sizeof(real.internal) - 64);
	cudaSetDevice(test_device(rank));
	cudaStreamCreate(&s);
	r = ncclCommInitRank(&comm, n, real, rank);
	CHECK(r == ncclSuccess, "rank %d: init %d", rank, r);
	if (r != ncclSuccess)
		return CHECK_SUMMARY();
	queries(comm, rank, n);
	CHECK(allgather(comm, s, rank, n) == 1, "AllGather passed through");
	CHECK(broadcast(comm, s, rank, 1) == 1, "Broadcast passed through");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

int main(int argc, char **argv)
{
	static const char *modes[] = { "blocking", "nonblocking", "group" };
	struct job j = { .name = argc > 1 ? argv[1] : "" };
	launch_rank_fn fn = NULL;

	int known = argc == 2;

	for (int m = 0; argc == 3 && m < 3; m++)
		if (!strcmp(argv[2], modes[m])) {
			j.mode = (enum mode)m;
			known = 1;
		}
	if (!strcmp(j.name, "initall") && argc == 2)
		return case_initall() ? 1 : 0;
	if (!strcmp(j.name, "route"))
		fn = case_route;
	else if (!strcmp(j.name, "fallback"))
		fn = case_fallback;
	else if (!strcmp(j.name, "foreign"))
		fn = case_foreign;
	else if (!strcmp(j.name, "release"))
		fn = case_release;
	else if (!strcmp(j.name, "mixed"))
		fn = case_mixed;
	else if (!strcmp(j.name, "premulsum"))
		fn = case_premulsum;
	else if (!strcmp(j.name, "declined") || !strcmp(j.name, "declined-first"))
		fn = case_declined;
	j.decliner_first = !strcmp(j.name, "declined-first");
	if (!fn || !known ||
	    (fn == case_route || fn == case_fallback || (fn == case_declined && !j.decliner_first)) ==
		    (argc == 2)) {
		fprintf(stderr, "usage: %s route|fallback|declined blocking|nonblocking|group | "
				"declined-first | initall | premulsum | foreign | release | mixed\n", argv[0]);
		return 2;
	}
	return launch_ranks(fn == case_route ? 3 : 2, fn, &j, 60);
}
