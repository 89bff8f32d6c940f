/* api_util.c - the helpers the cases of several files of api_check use
 * (declared in api.h): the time, device buffers filled and compared, the
 * AllGather that most cases check a communicator with, joining the
 * communicator of all ranks, ending a capture and replaying it, waiting
 * for a communicator's error, an abort from another thread, and a stream
 * that must drain or fail its rank.
 */

#include "api.h"

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

char *dev_alloc(size_t n, int fill)
{
	char *p = NULL;

	if (cudaMalloc((void **)&p, n) != cudaSuccess)
		return NULL;
	test_memset(p, fill, n);
	return p;
}

/* Copied on st, not on the legacy stream, which CUDA refuses while a
 * blocking stream captures (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT). */
int all_bytes_on(const char *dev, size_t n, int fill, cudaStream_t st)
{
	char *host = malloc(n);
	int ok = host && cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, st) == cudaSuccess &&
		 cudaStreamSynchronize(st) == cudaSuccess;

	for (size_t i = 0; ok && i < n; i++)
		ok = host[i] == fill;
	free(host);
	return ok;
}

/* 1 when the n bytes at dev are all `fill`. */
int all_bytes(const char *dev, size_t n, int fill)
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
char *stream_alloc(size_t n, int fill, cudaStream_t s)
{
	char *p = NULL;

	if (cudaMalloc((void **)&p, n) != cudaSuccess)
		return NULL;
	cudaMemsetAsync(p, fill, n, s);
	return p;
}

/* AllGather of one byte pattern per rank; returns 1 when correct. */
int allgather_ok(ncclComm_t comm, cudaStream_t s, int rank, int n, size_t bytes)
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
ncclComm_t join(int rank, int n, const ncclUniqueId *id, cudaStream_t *s)
{
	ncclComm_t comm = NULL;

	cudaSetDevice(test_device(rank));
	cudaStreamCreate(s);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	return comm;
}

/* Ends the capture on s, instantiates it and replays it `replays` times,
 * each synchronized; NULL when that failed (reported). */
cudaGraphExec_t end_and_replay(cudaStream_t s, cudaGraph_t *g, int replays)
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

/* A captured graph and its instance, either of them possibly never made. */
void graph_free(cudaGraphExec_t exec, cudaGraph_t g)
{
	if (exec)
		cudaGraphExecDestroy(exec);
	if (g)
		cudaGraphDestroy(g);
}

int fill_is(const char *dev, size_t n, int v, char *host)
{
	int ok = cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost) == cudaSuccess;

	for (size_t i = 0; ok && i < n; i++)
		ok = (unsigned char)host[i] == (unsigned char)v;
	return ok;
}

/* Polls until the communicator reports an error; returns seconds taken
 * or -1 when none came within `limit` seconds. */
double wait_error(ncclComm_t comm, ncclResult_t *e, double limit)
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

void *abort_later(void *arg)
{
	struct aborter *a = arg;

	usleep((useconds_t)a->delay_ms * 1000);
	ncclCommAbort(a->comm);
	return NULL;
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
void drains_or_leave(cudaStream_t st, double limit, const char *what)
{
	double took = stream_drains(st, limit);

	CHECK(took >= 0, "%s drained (%.2fs)", what, took);
	if (took < 0) {
		(void)CHECK_SUMMARY();
		fflush(NULL);
		_exit(1);
	}
}
