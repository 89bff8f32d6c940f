/* mem_perf.c - what placing pinned buffers by policy costs and buys.
 *
 *   LD_PRELOAD=build/libcxlshim.so LD_LIBRARY_PATH=build/emu build/bench/mem_perf
 *
 * 1. cudaHostAlloc + cudaFreeHost latency, the shim placing the buffer
 *    (rule place = dram: mmap, mbind, populate, register, move_pages
 *    check) versus the plain call of the same libcudart in the same
 *    process (reached through a handle on libcudart, past the preload),
 *    in rounds of plain, shim, shim, plain; the overhead is the median of
 *    the rounds' ratios.
 * 2. A CPU Adam step (fp32 params, grads, m, v) over buffers placed by the
 *    policy (optimizer data in DRAM, the seed paper's scheme) versus naive
 *    interleave over every memory node (numactl --interleave=all).
 *
 * Options: -n ITERS (allocation rounds per size, default 20), -N FLOATS
 * (Adam elements, default 4M), -s STEPS (Adam steps, default 5).
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../include/cxlshim.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static char conf[64];

/* optimizer data in DRAM; "naive" interleaves over every memory node */
static void write_policy(void)
{
	char nodes[128] = "0";
	FILE *f = fopen("/sys/devices/system/node/has_memory", "r");

	if (f) {
		if (fgets(nodes, sizeof(nodes), f))
			nodes[strcspn(nodes, "\n")] = '\0';
		fclose(f);
	}
	snprintf(conf, sizeof(conf), "/tmp/cxlshim-mem-perf-%d.conf", (int)getpid());
	f = fopen(conf, "w");
	fprintf(f, "[rule.bench]\ntag = bench\nplace = dram\n"
		   "[rule.optimizer]\ntag = optimizer\nplace = dram\n"
		   "[rule.naive]\ntag = naive\nplace = interleave\nnodes = %s\n", nodes);
	fclose(f);
	setenv("CXLSHIM_CONF", conf, 1);
}

typedef cudaError_t (*host_alloc_fn)(void **, size_t, unsigned);
typedef cudaError_t (*free_host_fn)(void *);

static double one_alloc_free(host_alloc_fn a, free_host_fn f, size_t size)
{
	double t0 = now_us();
	void *p = NULL;

	if (a(&p, size, 0) || f(p)) {
		fprintf(stderr, "alloc/free of %zu failed\n", size);
		exit(1);
	}
	return now_us() - t0;
}

struct timing {
	double plain_med, shim_med, plain_min, shim_min;
	double ratio_med; /* median over rounds of shim / plain */
};

static double median(double *v, int n)
{
	qsort(v, n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A round is plain, shim, shim, plain: load that drifts during the round
 * hits both sides alike, and neither side always runs right after the
 * other's free (whose pages are still warm in the allocator).  Each
 * round gives one ratio, (shim + shim) / (plain + plain); their median is
 * the overhead, robust to the rounds that another process disturbed. */
static void time_size(host_alloc_fn pa, free_host_fn pf, size_t size, int n, struct timing *t)
{
	double *tp = malloc(2 * n * sizeof(double)), *ts = malloc(2 * n * sizeof(double));
	double *r = malloc(n * sizeof(double));

	one_alloc_free(pa, pf, size);
	one_alloc_free(cudaHostAlloc, cudaFreeHost, size);
	for (int i = 0; i < n; i++) {
		tp[2 * i] = one_alloc_free(pa, pf, size);
		ts[2 * i] = one_alloc_free(cudaHostAlloc, cudaFreeHost, size);
		ts[2 * i + 1] = one_alloc_free(cudaHostAlloc, cudaFreeHost, size);
		tp[2 * i + 1] = one_alloc_free(pa, pf, size);
		r[i] = (ts[2 * i] + ts[2 * i + 1]) / (tp[2 * i] + tp[2 * i + 1]);
	}
	t->ratio_med = median(r, n);
	t->plain_med = median(tp, 2 * n);
	t->shim_med = median(ts, 2 * n);
	t->plain_min = tp[0];
	t->shim_min = ts[0];
	free(tp);
	free(ts);
	free(r);
}

static void bench_alloc(int iters)
{
	void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
	host_alloc_fn plain_alloc = rt ? (host_alloc_fn)dlsym(rt, "cudaHostAlloc") : NULL;
	free_host_fn plain_free = rt ? (free_host_fn)dlsym(rt, "cudaFreeHost") : NULL;
	static const size_t sizes[] = { 64 << 10, 2 << 20, 8 << 20, 32 << 20, 128 << 20 };
	double worst = -1e9;
	size_t worst_size = 0;
	struct cxlshim_mem_stats s;

	if (!plain_alloc || !plain_free) {
		printf("no libcudart.so.13 loaded: cannot time the plain call\n");
		return;
	}
	printf("# cudaHostAlloc + cudaFreeHost: %d rounds of plain, shim, shim, plain (us)\n",
	       iters);
	printf("%12s %10s %10s %9s %10s %10s\n", "bytes", "plain_med", "shim_med", "overhead",
	       "plain_min", "shim_min");
	cxlshim_tag("bench");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int n = sizes[i] >= (32u << 20) ? (iters + 1) / 2 : iters;
		struct timing t;
		double ov;

		time_size(plain_alloc, plain_free, sizes[i], n, &t);
		ov = (t.ratio_med - 1) * 100;
		printf("%12zu %10.1f %10.1f %+8.1f%% %10.1f %10.1f\n", sizes[i], t.plain_med,
		       t.shim_med, ov, t.plain_min, t.shim_min);
		if (sizes[i] >= (2u << 20) && ov > worst) {
			worst = ov;
			worst_size = sizes[i];
		}
	}
	cxlshim_tag(NULL);
	cxlshim_mem_stats("rule.bench", &s);
	printf("# overhead: median over rounds of shim/plain; shim placed %llu buffers "
	       "(rule.bench)\n", s.allocs);
	printf("# buffers >= 2 MiB: at most %+.1f%% (%zu bytes); target <= 5%%: %s\n", worst,
	       worst_size, worst <= 5.0 ? "met" : "NOT met");
}

/* One Adam step, the loop DeepSpeed's CPU Adam vectorises. */
static void adam_step(float *p, const float *g, float *m, float *v, size_t n, int t)
{
	const float b1 = 0.9f, b2 = 0.999f, lr = 1e-3f, eps = 1e-8f;
	const float c1 = 1.0f / (1.0f - powf(b1, (float)t)), c2 = 1.0f / (1.0f - powf(b2, (float)t));

	for (size_t i = 0; i < n; i++) {
		m[i] = b1 * m[i] + (1 - b1) * g[i];
		v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
		p[i] -= lr * (m[i] * c1) / (sqrtf(v[i] * c2) + eps);
	}
}

/* Best seconds per step over `steps`, buffers allocated under `tag`. */
static double adam(const char *tag, size_t n, int steps)
{
	float *buf[4];
	double best = 1e30;

	cxlshim_tag(tag);
	for (int i = 0; i < 4; i++) {
		if (cudaHostAlloc((void **)&buf[i], n * sizeof(float), 0)) {
			fprintf(stderr, "cudaHostAlloc failed\n");
			exit(1);
		}
		for (size_t j = 0; j < n; j++)
			buf[i][j] = i == 1 ? (float)(j % 97) * 1e-3f : 0.0f;
	}
	cxlshim_tag(NULL);
	for (int s = 1; s <= steps; s++) {
		double t0 = now_us();

		adam_step(buf[0], buf[1], buf[2], buf[3], n, s);
		t0 = (now_us() - t0) / 1e6;
		best = t0 < best ? t0 : best;
	}
	for (int i = 0; i < 4; i++)
		cudaFreeHost(buf[i]);
	return best;
}

static void bench_adam(size_t n, int steps)
{
	/* bytes touched per step: read p g m v, write p m v */
	double bytes = 7.0 * n * sizeof(float), pol, naive;

	printf("# CPU Adam step over %zu fp32 elements (4 buffers of %zu MiB), best of %d\n", n,
	       n * sizeof(float) >> 20, steps);
	pol = adam("optimizer", n, steps);
	naive = adam("naive", n, steps);
	pol = fmin(pol, adam("optimizer", n, steps));
	naive = fmin(naive, adam("naive", n, steps));
	printf("%-28s %10.2f ms %8.2f GB/s\n", "policy (optimizer in DRAM)", pol * 1e3,
	       bytes / pol / 1e9);
	printf("%-28s %10.2f ms %8.2f GB/s\n", "naive interleave (all nodes)", naive * 1e3,
	       bytes / naive / 1e9);
	printf("policy / naive throughput: %.3fx\n", naive / pol);
}

int main(int argc, char **argv)
{
	int iters = 20, steps = 5, opt;
	size_t n = 4u << 20;

	while ((opt = getopt(argc, argv, "n:N:s:")) != -1) {
		if (opt == 'n')
			iters = atoi(optarg);
		else if (opt == 'N')
			n = strtoull(optarg, NULL, 0);
		else if (opt == 's')
			steps = atoi(optarg);
		else
			return fprintf(stderr, "usage: %s [-n iters] [-N floats] [-s steps]\n",
				       argv[0]), 2;
	}
	if (!CXLSHIM_LOADED()) {
		fprintf(stderr, "run under LD_PRELOAD=libcxlshim.so\n");
		return 2;
	}
	if (iters < 1)
		iters = 1;
	write_policy();
	bench_alloc(iters);
	bench_adam(n, steps);
	cxlshim_mem_stats_print(stdout);
	unlink(conf);
	return 0;
}
