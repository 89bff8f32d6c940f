/* group_perf.c - the cost of a group's end when one thread drives several
 * ranks of one communicator (ncclCommInitAll, or ncclCommInitRank in a
 * group for ranks on one device), as nccl-tests' -g mode does.
 *
 *   group_perf [-n ranks] [-c floats] [-i iterations] [-1]
 *
 * Each iteration is one group with an in-place AllReduce per rank; the
 * figure is the wall time per group, enqueue to completion, after a
 * warm-up of the same length, and beside it what ncclGroupSimulateEnd
 * estimates for that group (core/coll/estimate.c: fit nccl.sim_bw and
 * nccl.sim_round_ns to it).  -1 puts every rank on device 0 (the pool
 * path then orders the ranks' submissions, core/coll/order.h). */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 8

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int init(ncclComm_t *c, int n, int one_device)
{
	ncclUniqueId id;
	int ok = 1;

	if (!one_device)
		return ncclCommInitAll(c, n, NULL) == ncclSuccess;
	if (ncclGetUniqueId(&id) != ncclSuccess || ncclGroupStart() != ncclSuccess)
		return 0;
	cudaSetDevice(0);
	for (int i = 0; ok && i < n; i++)
		ok = ncclCommInitRank(&c[i], n, id, i) == ncclSuccess;
	return ncclGroupEnd() == ncclSuccess && ok;
}

/* Seconds per group, or -1 when a call failed. */
static double groups(ncclComm_t *c, float **b, cudaStream_t *s, int n, size_t count, int iters,
		     int one_device)
{
	double t0 = now_s();
	int ok = 1;

	for (int k = 0; ok && k < iters; k++) {
		ok = ncclGroupStart() == ncclSuccess;
		for (int i = 0; ok && i < n; i++)
			ok = ncclAllReduce(b[i], b[i], count, ncclFloat, ncclSum, c[i], s[i]) ==
			     ncclSuccess;
		ok = ncclGroupEnd() == ncclSuccess && ok;
	}
	for (int i = 0; i < n; i++) {
		cudaSetDevice(one_device ? 0 : i);
		ok = cudaStreamSynchronize(s[i]) == cudaSuccess && ok;
	}
	return ok ? (now_s() - t0) / iters : -1;
}

/* ncclGroupSimulateEnd's estimate of the same group, in us (negative:
 * none). */
static double simulated(ncclComm_t *c, float **b, cudaStream_t *s, int n, size_t count)
{
	ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;

	ncclGroupStart();
	for (int i = 0; i < n; i++)
		ncclAllReduce(b[i], b[i], count, ncclFloat, ncclSum, c[i], s[i]);
	return ncclGroupSimulateEnd(&sim) == ncclSuccess ? sim.estimatedTime : -1;
}

int main(int argc, char **argv)
{
	int n = 4, iters = 1000, one_device = 0, opt;
	size_t count = 1;
	double t;
	ncclComm_t c[MAX_RANKS];
	cudaStream_t s[MAX_RANKS];
	float *b[MAX_RANKS];

	while ((opt = getopt(argc, argv, "n:c:i:1")) != -1) {
		if (opt == 'n')
			n = atoi(optarg);
		else if (opt == 'c')
			count = strtoull(optarg, NULL, 0);
		else if (opt == 'i')
			iters = atoi(optarg);
		else if (opt == '1')
			one_device = 1;
		else
			return fprintf(stderr, "usage: %s [-n ranks] [-c floats] [-i iters] [-1]\n",
				       argv[0]), 2;
	}
	if (n < 2 || n > MAX_RANKS || iters < 1 || !count)
		return fprintf(stderr, "group_perf: 2..%d ranks, iters and count > 0\n", MAX_RANKS), 2;
	if (!init(c, n, one_device))
		return fprintf(stderr, "group_perf: init failed\n"), 1;
	for (int i = 0; i < n; i++) {
		cudaSetDevice(one_device ? 0 : i);
		if (cudaStreamCreate(&s[i]) != cudaSuccess ||
		    cudaMalloc((void **)&b[i], count * sizeof(float)) != cudaSuccess)
			return fprintf(stderr, "group_perf: no stream or buffer\n"), 1;
	}
	if (groups(c, b, s, n, count, iters, one_device) < 0 ||
	    (t = groups(c, b, s, n, count, iters, one_device)) < 0)
		return fprintf(stderr, "group_perf: a group failed\n"), 1;
	printf("%d ranks%s, %zu floats: %.1f us per group (ncclGroupSimulateEnd: %.1f)\n", n,
	       one_device ? " on one device" : "", count, t * 1e6, simulated(c, b, s, n, count));
	for (int i = 0; i < n; i++)
		ncclCommDestroy(c[i]);
	return 0;
}
