/* pg_check.c - the NCCL API driven the way PyTorch's ProcessGroupNCCL
 * drives it, under the preload, with emulated CUDA.
 *
 *   pg_check NRANKS
 *
 * One training-like job per rank process:
 *   - rendezvous like TCPStore: rank 0 makes the unique id and sends it to
 *     every rank over a real TCP connection;
 *   - ncclCommInitRankConfig with blocking = 0 between ncclGroupEnd and
 *     ncclGroupStart (ProcessGroupNCCL closes an open coalescing group to
 *     init, then reopens it), polled with ncclCommGetAsyncError;
 *   - a watchdog thread polling ncclCommGetAsyncError all along;
 *   - ncclCommSplit of the default group (odd ranks, even ranks pass
 *     NCCL_SPLIT_NOCOLOR), nonblocking;
 *   - FSDP2 steps: in-place AllGather of parameter shards, ReduceScatter of
 *     gradients with ncclAvg and with a PreMulSum of 1/N, barrier as a
 *     1-float AllReduce;
 *   - all_to_all_single, gather and scatter as ncclSend/ncclRecv loops in
 *     a group, as ProcessGroupNCCL implements them;
 *   - finally the last rank stops calling collectives and the others'
 *     watchdogs time out and ncclCommAbort the communicator from their
 *     thread, which must unblock the hung stream.
 * Results are compared with values computed on the host.
 */
#include <arpa/inet.h>
#include <cuda_runtime.h>
#include <math.h>
#include <nccl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../common/check.h"
#include "../common/device.h"
#include "../common/launch.h"

#define SHARD 4099 /* floats per rank: odd, several pool chunks in total */

static int store_fd = -1; /* the "TCPStore" listening socket, made before fork */
static int store_port;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- TCPStore-like broadcast of the unique id --------------------------- */

static int store_listen(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	store_fd = socket(AF_INET, SOCK_STREAM, 0);
	if (store_fd < 0 || bind(store_fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(store_fd, 64) || getsockname(store_fd, (struct sockaddr *)&a, &len))
		return -1;
	store_port = ntohs(a.sin_port);
	return 0;
}

static int full_io(int fd, void *buf, size_t n, int wr)
{
	for (size_t done = 0; done < n;) {
		ssize_t k = wr ? write(fd, (char *)buf + done, n - done) :
				 read(fd, (char *)buf + done, n - done);

		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

static int store_exchange(int rank, int n, ncclUniqueId *id)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)store_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd, rc = 0;

	if (rank == 0) {
		if (ncclGetUniqueId(id) != ncclSuccess)
			return -1;
		for (int i = 1; i < n && !rc; i++) {
			fd = accept(store_fd, NULL, NULL);
			rc = fd < 0 || full_io(fd, id, sizeof(*id), 1);
			close(fd);
		}
		return rc ? -1 : 0;
	}
	fd = socket(AF_INET, SOCK_STREAM, 0);
	rc = fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) ||
	     full_io(fd, id, sizeof(*id), 0);
	close(fd);
	return rc ? -1 : 0;
}

/* ---- watchdog thread ---------------------------------------------------- */

struct watchdog {
	pthread_t thread;
	ncclComm_t comm;
	_Atomic int stop;
	_Atomic double busy_since; /* 0: no collective outstanding */
	double timeout_s;
	_Atomic int aborted;
	_Atomic int polls;
	_Atomic int saw_error;     /* an error before the deliberate hang */
};

static void *watchdog_main(void *arg)
{
	struct watchdog *w = arg;

	while (!atomic_load(&w->stop)) {
		ncclResult_t e = ncclSuccess;
		double since = atomic_load(&w->busy_since);

		ncclCommGetAsyncError(w->comm, &e);
		atomic_fetch_add(&w->polls, 1);
		if (e != ncclSuccess && e != ncclInProgress && !atomic_load(&w->aborted))
			atomic_store(&w->saw_error, 1);
		if (since > 0 && now_s() - since > w->timeout_s && !atomic_exchange(&w->aborted, 1))
			ncclCommAbort(w->comm); /* as ProcessGroupNCCL's watchdog */
		usleep(2000);
	}
	return NULL;
}

/* Waits for the watchdog to poll once more than it had: proof that it is
 * alive and not stuck in ncclCommGetAsyncError, whatever the scheduler
 * did.  Counting its polls over a run instead failed a 1-rank run that was
 * over before a loaded machine first scheduled the thread. */
static int watchdog_polls_again(struct watchdog *w)
{
	int seen = atomic_load(&w->polls);
	double t0 = now_s();

	while (atomic_load(&w->polls) == seen) {
		if (now_s() - t0 > 60) /* a stuck watchdog, not a slow one */
			return 0;
		usleep(1000);
	}
	return 1;
}

/* ---- helpers ------------------------------------------------------------ */

static float *dev_floats(size_t n, float (*f)(size_t, void *), void *arg)
{
	float *h = malloc(n * sizeof(float)), *d = NULL;

	for (size_t i = 0; i < n; i++)
		h[i] = f ? f(i, arg) : 0.0f;
	if (cudaMalloc((void **)&d, n * sizeof(float)) != cudaSuccess)
		abort();
	test_upload(d, h, n * sizeof(float));
	free(h);
	return d;
}

static float *host_floats(const float *d, size_t n)
{
	float *h = malloc(n * sizeof(float));

	cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
	return h;
}

/* Small integers: sums and averages over ranks stay exact in float. */
static float param(size_t i, void *arg)
{
	return (float)(int)((i * 7 + (size_t)(intptr_t)arg * 13) % 64);
}

static float grad(size_t i, void *arg)
{
	return (float)(int)((i * 3 + (size_t)(intptr_t)arg * 5) % 32) * 2.0f;
}

static ncclResult_t wait_ready(ncclComm_t comm)
{
	ncclResult_t e;

	do {
		if (ncclCommGetAsyncError(comm, &e) != ncclSuccess)
			return ncclInternalError;
	} while (e == ncclInProgress && usleep(500) == 0);
	return e;
}

static void nonblocking(ncclConfig_t *cfg)
{
	ncclConfig_t c = NCCL_CONFIG_INITIALIZER;

	c.blocking = 0;
	*cfg = c;
}

/* ---- the steps ---------------------------------------------------------- */

static ncclComm_t init_default(int rank, int n)
{
	ncclUniqueId id;
	ncclConfig_t cfg;
	ncclComm_t comm = NULL;
	ncclResult_t r;

	CHECK(store_exchange(rank, n, &id) == 0, "id over TCP");
	nonblocking(&cfg);
	CHECK(ncclGroupStart() == ncclSuccess, "coalescing group open");
	CHECK(ncclGroupEnd() == ncclSuccess, "closed for init");
	r = ncclCommInitRankConfig(&comm, n, id, rank, &cfg);
	CHECK(r == ncclSuccess || r == ncclInProgress, "init returned %d", r);
	CHECK(comm != NULL, "handle valid at once");
	CHECK(ncclGroupStart() == ncclSuccess, "reopened");
	CHECK(ncclGroupEnd() == ncclSuccess, "closed");
	CHECK(wait_ready(comm) == ncclSuccess, "init completes");
	return comm;
}

/* FSDP2: parameters all-gathered in place, gradients reduce-scattered
 * with AVG and with PreMulSum(1/N). */
static void fsdp_step(ncclComm_t comm, cudaStream_t s, int rank, int n)
{
	size_t total = (size_t)SHARD * (size_t)n;
	float *params = dev_floats(total, NULL, NULL), *g = dev_floats(total, grad, (void *)(intptr_t)rank);
	float *shard_avg = dev_floats(SHARD, NULL, NULL), *shard_pms = dev_floats(SHARD, NULL, NULL);
	float *mine = dev_floats(SHARD, param, (void *)(intptr_t)rank), *h;
	float scale = 1.0f / (float)n;
	ncclRedOp_t pms;
	int bad = 0;

	/* on the collectives' stream: a synchronous device-to-device copy may
	 * still run when the non-blocking stream starts (as PyTorch copies) */
	cudaMemcpyAsync(params + (size_t)rank * SHARD, mine, SHARD * sizeof(float),
			cudaMemcpyDeviceToDevice, s);
	CHECK(ncclAllGather(params + (size_t)rank * SHARD, params, SHARD, ncclFloat, comm, s) ==
		      ncclSuccess, "in-place all-gather");
	CHECK(ncclReduceScatter(g, shard_avg, SHARD, ncclFloat, ncclAvg, comm, s) == ncclSuccess,
	      "reduce-scatter avg");
	CHECK(ncclRedOpCreatePreMulSum(&pms, &scale, ncclFloat, ncclScalarHostImmediate, comm) ==
		      ncclSuccess, "premulsum");
	CHECK(ncclReduceScatter(g, shard_pms, SHARD, ncclFloat, pms, comm, s) == ncclSuccess,
	      "reduce-scatter premulsum");
	CHECK(ncclRedOpDestroy(pms, comm) == ncclSuccess, "destroy premulsum after enqueue");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
	h = host_floats(params, total);
	for (size_t i = 0; i < total && !bad; i++)
		bad = h[i] != param(i % SHARD, (void *)(intptr_t)(i / SHARD));
	CHECK(!bad, "all-gathered parameters");
	free(h);
	for (int which = 0; which < 2; which++) {
		h = host_floats(which ? shard_pms : shard_avg, SHARD);
		bad = 0;
		for (size_t i = 0; i < SHARD && !bad; i++) {
			double want = 0;

			for (int r = 0; r < n; r++)
				want += grad((size_t)rank * SHARD + i, (void *)(intptr_t)r);
			want /= n;
			bad = fabs(h[i] - want) > 1e-5 * (fabs(want) + 1);
		}
		CHECK(!bad, "%s gradients", which ? "premulsum" : "avg");
		free(h);
	}
	cudaFree(params);
	cudaFree(g);
	cudaFree(shard_avg);
	cudaFree(shard_pms);
	cudaFree(mine);
}

static void barrier(ncclComm_t comm, cudaStream_t s)
{
	float *one = dev_floats(1, NULL, NULL);

	CHECK(ncclAllReduce(one, one, 1, ncclFloat, ncclSum, comm, s) == ncclSuccess, "barrier");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "barrier sync");
	cudaFree(one);
}

static float a2a_val(size_t i, void *arg)
{
	int from = (int)((intptr_t)arg >> 8), to = (int)((intptr_t)arg & 0xff);

	return (float)(from * 1000 + to * 10) + (float)(i % 7);
}

/* all_to_all_single, gather and scatter the ProcessGroupNCCL way. */
static void p2p_collectives(ncclComm_t comm, cudaStream_t s, int rank, int n)
{
	size_t per = 12345;
	float *send, *recv, *h;
	int bad = 0, root = 1 % n;

	send = dev_floats(per * (size_t)n, NULL, NULL);
	recv = dev_floats(per * (size_t)n, NULL, NULL);
	for (int p = 0; p < n; p++) {
		float *part = dev_floats(per, a2a_val, (void *)(intptr_t)(rank << 8 | p));

		cudaMemcpyAsync(send + per * (size_t)p, part, per * sizeof(float),
				cudaMemcpyDeviceToDevice, s);
		cudaStreamSynchronize(s); /* before the part is freed */
		cudaFree(part);
	}
	CHECK(ncclGroupStart() == ncclSuccess, "a2a group");
	for (int p = 0; p < n; p++) {
		ncclSend(send + per * (size_t)p, per, ncclFloat, p, comm, s);
		ncclRecv(recv + per * (size_t)p, per, ncclFloat, p, comm, s);
	}
	CHECK(ncclGroupEnd() == ncclSuccess, "a2a end");
	cudaStreamSynchronize(s);
	h = host_floats(recv, per * (size_t)n);
	for (size_t i = 0; i < per * (size_t)n && !bad; i++)
		bad = h[i] != a2a_val(i % per, (void *)(intptr_t)((int)(i / per) << 8 | rank));
	CHECK(!bad, "all_to_all_single");
	free(h);

	/* gather to root 1 % n: root receives from everyone, all send */
	CHECK(ncclGroupStart() == ncclSuccess, "gather group");
	if (rank == root)
		for (int p = 0; p < n; p++)
			ncclRecv(recv + per * (size_t)p, per, ncclFloat, p, comm, s);
	ncclSend(send + per * (size_t)root, per, ncclFloat, root, comm, s);
	CHECK(ncclGroupEnd() == ncclSuccess, "gather end");
	cudaStreamSynchronize(s);
	if (rank == root) {
		h = host_floats(recv, per * (size_t)n);
		bad = 0;
		for (size_t i = 0; i < per * (size_t)n && !bad; i++)
			bad = h[i] != a2a_val(i % per, (void *)(intptr_t)((int)(i / per) << 8 | root));
		CHECK(!bad, "gather");
		free(h);
	}
	/* scatter from root: root sends part p to p, all receive */
	CHECK(ncclGroupStart() == ncclSuccess, "scatter group");
	if (rank == root)
		for (int p = 0; p < n; p++)
			ncclSend(send + per * (size_t)p, per, ncclFloat, p, comm, s);
	ncclRecv(recv, per, ncclFloat, root, comm, s);
	CHECK(ncclGroupEnd() == ncclSuccess, "scatter end");
	cudaStreamSynchronize(s);
	h = host_floats(recv, per);
	bad = 0;
	for (size_t i = 0; i < per && !bad; i++)
		bad = h[i] != a2a_val(i, (void *)(intptr_t)(root << 8 | rank));
	CHECK(!bad, "scatter");
	free(h);
	cudaFree(send);
	cudaFree(recv);
}

static void split_step(ncclComm_t comm, cudaStream_t s, int rank, int n)
{
	ncclConfig_t cfg;
	ncclComm_t sub = NULL;
	ncclResult_t r;
	int color = rank % 2 ? 1 : NCCL_SPLIT_NOCOLOR, count = 0;

	nonblocking(&cfg);
	r = ncclCommSplit(comm, color, rank, &sub, &cfg);
	CHECK(r == ncclSuccess || r == ncclInProgress, "split returned %d", r);
	if (color == NCCL_SPLIT_NOCOLOR) {
		CHECK(wait_ready(comm) == ncclSuccess && sub == NULL, "non-member gets NULL");
		return;
	}
	CHECK(sub != NULL && wait_ready(sub) == ncclSuccess, "split completes");
	CHECK(ncclCommCount(sub, &count) == ncclSuccess && count == n / 2, "odd ranks: %d", count);
	barrier(sub, s);
	CHECK(ncclCommDestroy(sub) == ncclSuccess, "destroy subgroup");
}

/* The last rank stops; the others' next collective hangs until their
 * watchdog aborts the communicator from its own thread. */
static void hang_and_abort(struct watchdog *w, cudaStream_t s, int rank, int n)
{
	float *x = dev_floats(SHARD * (size_t)n, NULL, NULL);
	double t0;

	if (rank == n - 1) {
		launch_barrier();
		cudaFree(x);
		return; /* leaves without calling: its process lingers until the end */
	}
	launch_barrier();
	atomic_store(&w->busy_since, now_s());
	t0 = now_s();
	CHECK(ncclAllGather(x + (size_t)rank * SHARD, x, SHARD, ncclFloat, w->comm, s) ==
		      ncclSuccess,
	      "enqueued");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the hung stream is released");
	/* by this rank's watchdog, or by a peer's abort reaching us first */
	if (!atomic_load(&w->aborted)) {
		ncclResult_t e = ncclSuccess;
		double t1 = now_s();

		/* the peer's abort may release the stream a watchdog tick
		 * before this rank records it */
		while (!atomic_load(&w->aborted) && ncclCommGetAsyncError(w->comm, &e) == ncclSuccess &&
		       e == ncclSuccess && now_s() - t1 < 5)
			usleep(1000);
		CHECK(e == ncclRemoteError || atomic_load(&w->aborted),
		      "released by a peer's abort (async error %d)", e);
	}
	if (!atomic_exchange(&w->aborted, 1))
		ncclCommAbort(w->comm);
	CHECK(now_s() - t0 < 15, "within %.1fs", now_s() - t0);
	cudaFree(x);
}

static int rank_main(int rank, int n, const ncclUniqueId *unused, void *arg)
{
	struct watchdog w = { .timeout_s = 1.0 };
	cudaStream_t s;

	(void)unused;
	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	w.comm = init_default(rank, n);
	pthread_create(&w.thread, NULL, watchdog_main, &w);
	/* the collectives run while the watchdog polls, as under PyTorch */
	CHECK(watchdog_polls_again(&w), "the watchdog polls");
	for (int step = 0; step < 2; step++)
		fsdp_step(w.comm, s, rank, n);
	barrier(w.comm, s);
	p2p_collectives(w.comm, s, rank, n);
	if (n >= 2)
		split_step(w.comm, s, rank, n);
	barrier(w.comm, s);
	CHECK(!atomic_load(&w.saw_error), "no error before the hang");
	if (n >= 2)
		hang_and_abort(&w, s, rank, n);
	launch_barrier(); /* the idle rank stays until the others are done */
	CHECK(watchdog_polls_again(&w), "the watchdog still polls after the collectives");
	atomic_store(&w.stop, 1);
	pthread_join(w.thread, NULL);
	if (!atomic_load(&w.aborted))
		CHECK(ncclCommDestroy(w.comm) == ncclSuccess, "destroy");
	printf("rank %d: %d passed, %d failed\n", rank, check_passed, check_failed);
	return check_failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4, rc;

	if (n < 1 || n > 64 || store_listen()) {
		fprintf(stderr, "usage: %s NRANKS (1..64)\n", argv[0]);
		return 2;
	}
	rc = launch_ranks(n, rank_main, NULL, 300);
	printf("pg_check %d ranks: %s\n", n, rc ? "FAILED" : "ok");
	return rc;
}
