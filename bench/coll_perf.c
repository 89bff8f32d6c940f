/* coll_perf.c - nccl-tests style collective benchmark for cxlshim.
 *
 * A plain NCCL program: it runs unchanged on real NCCL + a GPU, and under
 * LD_PRELOAD=build/libcxlshim.so (with LD_LIBRARY_PATH=build/emu for the CPU
 * emulation of CUDA) it measures the pool path. The ranks are processes
 * forked by launch_ranks(); they exchange results through a shared anonymous
 * "board" mapped before the fork, not through NCCL, so the benchmark needs no
 * collective beyond the one it measures.
 *
 * Time of a row: each rank times `iters` back-to-back calls on its stream,
 * bracketed by a host barrier and a cudaStreamSynchronize; per-rank averages
 * are combined across ranks with -a (default: the maximum, i.e. until the
 * slowest rank is done; nccl-tests defaults to the mean).
 */
#include <assert.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench_util.h"
#include "launch.h"

#define MAX_RANKS	   1024
#define POOL_EFF_MIN_BYTES (1u << 20)
#define EFF_REPS	   5
#define REF_MAX_BYTES	   (512ull << 20)
/* The pipe reference moves its bytes as the default policy stages them:
 * 512 KiB chunks (cccl.chunk_size) through 8 slots per rank (cccl.chunks). */
#define PIPE_CHUNK	   (512u << 10)
#define PIPE_SLOTS	   8u

/* ------------------------------------------------------------ NCCL calls */

struct op_call {
	const void *send;
	void *recv;
	const struct bu_case *k;
	ncclDataType_t dtype;
	ncclRedOp_t redop;
	ncclComm_t comm;
	cudaStream_t stream;
};

typedef ncclResult_t (*run_fn)(const struct op_call *c);

static ncclResult_t run_all_gather(const struct op_call *c)
{
	return ncclAllGather(c->send, c->recv, c->k->c.sendcount, c->dtype, c->comm, c->stream);
}

static ncclResult_t run_broadcast(const struct op_call *c)
{
	return ncclBroadcast(c->send, c->recv, c->k->c.paramcount, c->dtype, c->k->root, c->comm,
			     c->stream);
}

static ncclResult_t run_gather(const struct op_call *c)
{
	return ncclGather(c->send, c->recv, c->k->c.paramcount, c->dtype, c->k->root, c->comm,
			  c->stream);
}

static ncclResult_t run_scatter(const struct op_call *c)
{
	return ncclScatter(c->send, c->recv, c->k->c.paramcount, c->dtype, c->k->root, c->comm,
			   c->stream);
}

static ncclResult_t run_alltoall(const struct op_call *c)
{
	return ncclAlltoAll(c->send, c->recv, c->k->c.paramcount, c->dtype, c->comm, c->stream);
}

static ncclResult_t run_reduce(const struct op_call *c)
{
	return ncclReduce(c->send, c->recv, c->k->c.paramcount, c->dtype, c->redop, c->k->root,
			  c->comm, c->stream);
}

static ncclResult_t run_all_reduce(const struct op_call *c)
{
	return ncclAllReduce(c->send, c->recv, c->k->c.paramcount, c->dtype, c->redop, c->comm,
			     c->stream);
}

static ncclResult_t run_reduce_scatter(const struct op_call *c)
{
	return ncclReduceScatter(c->send, c->recv, c->k->c.paramcount, c->dtype, c->redop, c->comm,
				 c->stream);
}

/* As nccl-tests' sendrecv_perf: a ring, in one group. */
static ncclResult_t run_sendrecv(const struct op_call *c)
{
	int rank, n;
	size_t count = c->k->c.paramcount;
	ncclResult_t r;

	ncclCommUserRank(c->comm, &rank);
	ncclCommCount(c->comm, &n);
	ncclGroupStart();
	r = ncclSend(c->send, count, c->dtype, (rank + 1) % n, c->comm, c->stream);
	if (r == ncclSuccess)
		r = ncclRecv(c->recv, count, c->dtype, (rank + n - 1) % n, c->comm, c->stream);
	ncclGroupEnd();
	return r;
}

/* One entry per collective; semantics (sizes, expected data, bus factor) live
 * in bu_colls[] and are shared with mpi_perf. */
static const run_fn runners[BU_NCOLLS] = {
	[BU_ALL_GATHER] = run_all_gather,
	[BU_BROADCAST] = run_broadcast,
	[BU_GATHER] = run_gather,
	[BU_SCATTER] = run_scatter,
	[BU_ALLTOALL] = run_alltoall,
	[BU_REDUCE] = run_reduce,
	[BU_ALL_REDUCE] = run_all_reduce,
	[BU_REDUCE_SCATTER] = run_reduce_scatter,
	[BU_SENDRECV] = run_sendrecv,
};

/* ------------------------------------------------------- shared board */

struct rank_slot {
	/* pipe reference: chunks this rank published and consumed */
	_Alignas(64) atomic_uint pipe_pub;
	_Alignas(64) atomic_uint pipe_ack;
	_Alignas(64) double time_us;
	/* a reference's loop on this rank, one repetition: start and end
	 * (CLOCK_MONOTONIC, s, comparable across the ranks' processes) */
	double ref_t0, ref_t1;
	long wrong;
	int pid;
	int device;
	char host[64];
	char devname[96];
	char busid[32];
};

struct board {
	struct bu_opts opts;
	/* pipe reference: PIPE_SLOTS chunks per rank, shared by the ranks (-p 1) */
	char *pipe_win;
	struct rank_slot slot[];
};

/* ------------------------------------------------------------ per rank */

struct rank_ctx {
	int rank, nranks;
	const struct bu_opts *o;
	struct board *bd;
	run_fn run;
	ncclComm_t comm;
	cudaStream_t stream;
	void *d_send, *d_recv; /* device buffers, max_bytes each */
	void *h_send, *h_exp, *h_got;
	void *h_cpy_a, *h_cpy_b; /* the references' buffers, cpy_bytes each */
	size_t cpy_bytes;
	uint32_t pipe_seq;       /* chunks through the pipe so far, as every rank */
	size_t buf_bytes;
	/* rank 0 bookkeeping */
	struct bu_tally tally;
	FILE *eff; /* pool efficiency rows, printed at the end */
};

static void die(const struct rank_ctx *x, const char *what, const char *err)
{
	fprintf(stderr, "coll_perf: rank %d: %s failed: %s\n", x->rank, what, err);
	fflush(NULL);
	exit(1);
}

#define CUDA(x, call)                                                                              \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess)                                                             \
			die((x), #call, cudaGetErrorString(e_));                                   \
	} while (0)

#define NCCL(x, call)                                                                              \
	do {                                                                                       \
		ncclResult_t r_ = (call);                                                          \
		if (r_ != ncclSuccess)                                                             \
			die((x), #call, ncclGetErrorString(r_));                                   \
	} while (0)

static int pick_device(struct rank_ctx *x)
{
	int ndev = 0;
	CUDA(x, cudaGetDeviceCount(&ndev));
	if (ndev <= 0)
		die(x, "cudaGetDeviceCount", "no device");
	const char *env = getenv("NCCL_TESTS_DEVICE");
	int dev = env && *env ? atoi(env) : x->rank % ndev;
	if (dev < 0 || dev >= ndev)
		die(x, "NCCL_TESTS_DEVICE", "device index out of range");
	CUDA(x, cudaSetDevice(dev));
	return dev;
}

static void publish_device(struct rank_ctx *x, int dev)
{
	struct rank_slot *s = &x->bd->slot[x->rank];
	s->pid = (int)getpid();
	s->device = dev;
	if (gethostname(s->host, sizeof(s->host)) != 0)
		snprintf(s->host, sizeof(s->host), "?");
	s->host[sizeof(s->host) - 1] = 0;
	struct cudaDeviceProp prop;
	memset(&prop, 0, sizeof(prop));
	if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
		snprintf(s->devname, sizeof(s->devname), "%.95s", prop.name);
		snprintf(s->busid, sizeof(s->busid), "%04x:%02x:%02x.0", prop.pciDomainID,
			 prop.pciBusID, prop.pciDeviceID);
	} else {
		snprintf(s->devname, sizeof(s->devname), "unknown");
		snprintf(s->busid, sizeof(s->busid), "?");
	}
}

static void print_header(const struct rank_ctx *x)
{
	const struct bu_opts *o = x->o;
	int ver = 0;
	ncclGetVersion(&ver);
	const char *pre = getenv("LD_PRELOAD");
	printf("# nccl-tests style benchmark: coll_perf %s\n", o->coll->name);
	bu_print_params(o, x->nranks);
	printf("# NCCL version code %d  LD_PRELOAD=%s\n", ver, pre && *pre ? pre : "(none)");
	printf("#\n# Using devices\n");
	for (int r = 0; r < x->nranks; r++) {
		const struct rank_slot *s = &x->bd->slot[r];
		printf("#  Rank %2d Pid %6d on %10s device %2d [%s] %s\n", r, s->pid, s->host,
		       s->device, s->busid, s->devname);
	}
	fflush(stdout);
}

static void alloc_buffers(struct rank_ctx *x)
{
	/* nccl-tests semantics: no buffer of a row is larger than its size. */
	size_t bytes = x->o->max_bytes ? x->o->max_bytes : 1;
	x->buf_bytes = bytes;
	CUDA(x, cudaMalloc(&x->d_send, bytes));
	CUDA(x, cudaMalloc(&x->d_recv, bytes));
	/* Written once before any timing, as mpi_perf does its buffers: under
	 * the CPU emulation device memory is host memory, and a page never
	 * written reads as the kernel's one zero page, always in cache, which
	 * made the first timed loop of a row read its input for free. */
	CUDA(x, cudaMemsetAsync(x->d_send, 0x5a, bytes, x->stream));
	CUDA(x, cudaMemsetAsync(x->d_recv, 0xa5, bytes, x->stream));
	CUDA(x, cudaStreamSynchronize(x->stream));
	x->h_send = malloc(bytes);
	x->h_exp = malloc(bytes);
	x->h_got = malloc(bytes);
	if (!x->h_send || !x->h_exp || !x->h_got)
		die(x, "malloc", "out of memory");
	if (x->o->pool_eff) {
		/* a row's pool bytes are 2 x its size for AlltoAll; more (a
		 * Reduce root's are (n-1) x) go through these in pieces */
		x->cpy_bytes = 2 * bytes;
		x->h_cpy_a = malloc(x->cpy_bytes);
		x->h_cpy_b = malloc(x->cpy_bytes);
		if (!x->h_cpy_a || !x->h_cpy_b)
			die(x, "malloc", "out of memory");
		/* touch once so page faults are not part of the reference */
		memset(x->h_cpy_a, 1, x->cpy_bytes);
		memset(x->h_cpy_b, 2, x->cpy_bytes);
	}
}

static void free_buffers(struct rank_ctx *x)
{
	cudaFree(x->d_send);
	cudaFree(x->d_recv);
	free(x->h_send);
	free(x->h_exp);
	free(x->h_got);
	free(x->h_cpy_a);
	free(x->h_cpy_b);
}

static void op_pointers(const struct rank_ctx *x, const struct bu_case *k, int inplace,
			const void **send, void **recv)
{
	char *s = x->d_send, *r = x->d_recv;
	if (!inplace) {
		*send = s;
		*recv = r;
	} else if (k->c.recv_inplace_off) {
		*send = s;
		*recv = s + k->c.recv_inplace_off * k->tsize;
	} else {
		*send = r + k->c.send_inplace_off * k->tsize;
		*recv = r;
	}
}

static void run_op(const struct rank_ctx *x, const struct bu_case *k, int inplace)
{
	struct op_call c;
	op_pointers(x, k, inplace, &c.send, &c.recv);
	c.k = k;
	c.dtype = (ncclDataType_t)k->type;
	c.redop = (ncclRedOp_t)(k->op < 0 ? 0 : k->op);
	c.comm = x->comm;
	c.stream = x->stream;
	if (k->op != BU_OP_MULSUM) {
		NCCL(x, x->run(&c));
		return;
	}
	/* PreMulSum, made and destroyed around every call as nccl-tests does;
	 * the scalar is this rank's, in the datatype, read at creation */
	uint64_t scalar = 0;
	bu_store_value(&scalar, 0, k->type, bu_premul_scalar(k->rank));
	NCCL(x, ncclRedOpCreatePreMulSum(&c.redop, &scalar, c.dtype, ncclScalarHostImmediate,
					 x->comm));
	NCCL(x, x->run(&c));
	NCCL(x, ncclRedOpDestroy(c.redop, x->comm));
}

/* -G: the timed iterations captured into one graph, launched o->graph
 * times (once untimed first, as a warm-up); the time of one call. */
static double time_graph(const struct rank_ctx *x, const struct bu_case *k, int inplace)
{
	cudaGraph_t g;
	cudaGraphExec_t exec;

	CUDA(x, cudaStreamBeginCapture(x->stream, cudaStreamCaptureModeThreadLocal));
	for (int i = 0; i < x->o->iters; i++)
		run_op(x, k, inplace);
	CUDA(x, cudaStreamEndCapture(x->stream, &g));
	CUDA(x, cudaGraphInstantiate(&exec, g, 0));
	CUDA(x, cudaGraphLaunch(exec, x->stream));
	CUDA(x, cudaStreamSynchronize(x->stream));
	launch_barrier();
	double t0 = bu_now();
	for (int i = 0; i < x->o->graph; i++)
		CUDA(x, cudaGraphLaunch(exec, x->stream));
	CUDA(x, cudaStreamSynchronize(x->stream));
	double us = (bu_now() - t0) * 1e6 / ((double)x->o->iters * x->o->graph);

	CUDA(x, cudaGraphExecDestroy(exec));
	CUDA(x, cudaGraphDestroy(g));
	return us;
}

/* Average time of one call in microseconds, as seen by this rank. */
static double time_op(const struct rank_ctx *x, const struct bu_case *k, int inplace)
{
	for (int i = 0; i < x->o->warmup; i++)
		run_op(x, k, inplace);
	CUDA(x, cudaStreamSynchronize(x->stream));
	if (x->o->graph)
		return time_graph(x, k, inplace);
	launch_barrier(); /* start the timed loop together */
	double t0 = bu_now();
	for (int i = 0; i < x->o->iters; i++)
		run_op(x, k, inplace);
	CUDA(x, cudaStreamSynchronize(x->stream));
	return (bu_now() - t0) * 1e6 / x->o->iters;
}

static void copy_to_dev(const struct rank_ctx *x, void *dst, const void *src, size_t n)
{
	CUDA(x, cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, x->stream));
}

/* Writes inputs and a poisoned output, runs once, counts wrong elements. */
static long check_op(struct rank_ctx *x, const struct bu_case *k, int inplace)
{
	const struct bu_coll *coll = x->o->coll;
	size_t sbytes = k->c.sendcount * k->tsize, rbytes = k->c.recvcount * k->tsize;
	int has_input = coll->fill_input(x->h_send, k);
	int checked = coll->expected(x->h_exp, k);
	if (!checked)
		memset(x->h_exp, 0, rbytes); /* any defined poison will do */
	bu_poison_from(x->h_got, x->h_exp, rbytes);

	const void *send;
	void *recv;
	op_pointers(x, k, inplace, &send, &recv);
	/* Copies go on the benchmark's own (non-blocking) stream: a plain
	 * cudaMemcpy from pageable memory may return before the data reaches the
	 * device and does not order against a non-blocking stream. */
	if (inplace) {
		/* recv first: one buffer lies inside the other (or they are the
		 * same), and the input must win where they overlap */
		copy_to_dev(x, recv, x->h_got, rbytes);
		if (has_input)
			copy_to_dev(x, (void *)send, x->h_send, sbytes);
	} else {
		copy_to_dev(x, (void *)send, x->h_send, sbytes);
		copy_to_dev(x, recv, x->h_got, rbytes);
	}
	CUDA(x, cudaStreamSynchronize(x->stream));
	launch_barrier(); /* nobody's check run overlaps a peer's buffer setup */
	run_op(x, k, inplace);
	CUDA(x, cudaMemcpyAsync(x->h_got, recv, rbytes, cudaMemcpyDeviceToHost, x->stream));
	CUDA(x, cudaStreamSynchronize(x->stream));
	if (!checked)
		return 0; /* this rank's output is undefined (gather at a non-root) */
	return (long)bu_count_wrong(x->h_got, x->h_exp, k->c.recvcount, k->tsize);
}

/* The ranks' times of their last loop (slot time_us), combined as -a says. */
static double combined_time_us(const struct rank_ctx *x)
{
	double t[MAX_RANKS];

	for (int r = 0; r < x->nranks; r++)
		t[r] = x->bd->slot[r].time_us;
	return bu_combine_times(t, x->nranks, x->o->avg);
}

/* Runs one placement on every rank; rank 0 gets the combined result. */
static void measure(struct rank_ctx *x, const struct bu_case *k, int inplace, size_t nbytes,
		    struct bu_result *res)
{
	struct rank_slot *me = &x->bd->slot[x->rank];
	me->time_us = time_op(x, k, inplace);
	me->wrong = x->o->check ? check_op(x, k, inplace) : -1;
	launch_barrier(); /* every slot written */
	if (x->rank != 0)
		return;
	long wrong = 0;
	for (int r = 0; r < x->nranks; r++)
		wrong += x->bd->slot[r].wrong > 0 ? x->bd->slot[r].wrong : 0;
	res->time_us = combined_time_us(x);
	res->wrong = x->o->check ? wrong : -1;
	bu_fill_bw(res, nbytes, x->o->coll->bus_factor(x->nranks));
}

/* One more timed loop of the call on every rank, for the efficiency
 * figure; the combined time (us per call) on rank 0, 0 elsewhere. */
static double op_rep_us(struct rank_ctx *x, const struct bu_case *k, int inplace)
{
	x->bd->slot[x->rank].time_us = time_op(x, k, inplace);
	launch_barrier(); /* every slot written */
	return x->rank == 0 ? combined_time_us(x) : 0;
}

/* What a reference moves once on this rank: `bytes` through memory. */
typedef void (*ref_move_fn)(struct rank_ctx *x, size_t bytes);

/* Every rank runs `move` o->iters times at once, as the ranks of a
 * collective run their timed loop at once.  The repetition lasts from the
 * first rank's start to the last rank's end: with more ranks than cores,
 * a rank that waited for a core starts its own clock late, and timed on it
 * alone a loop looks as if it had a core to itself (4 ranks on 2 cores:
 * about twice the honest rate).  The collective needs no such care: its
 * ranks wait for each other, so each one's clock spans the others' work.
 * Looping as the collective does keeps the start skew of the barrier (tens
 * of us) small against the loop.  GB/s, on rank 0 (0 elsewhere). */
static double reference_rep(struct rank_ctx *x, size_t bytes, size_t mine, ref_move_fn move)
{
	struct rank_slot *me = &x->bd->slot[x->rank];
	/* the collective's loop count, but no more than REF_MAX_BYTES a
	 * repetition (a 1 GiB row would copy 100 GiB per reference) */
	size_t cap = bytes ? REF_MAX_BYTES / bytes : 1;
	int iters = x->o->iters > 0 ? x->o->iters : 1;

	if ((size_t)iters > cap)
		iters = cap > 0 ? (int)cap : 1;
	launch_barrier();
	me->ref_t0 = bu_now();
	for (int i = 0; i < iters; i++)
		move(x, mine);
	me->ref_t1 = bu_now();
	launch_barrier();
	if (x->rank != 0)
		return 0;
	double t0 = me->ref_t0, t1 = me->ref_t1;
	for (int r = 1; r < x->nranks; r++) {
		t0 = x->bd->slot[r].ref_t0 < t0 ? x->bd->slot[r].ref_t0 : t0;
		t1 = x->bd->slot[r].ref_t1 > t1 ? x->bd->slot[r].ref_t1 : t1;
	}
	return t1 > t0 ? (double)bytes * iters / (t1 - t0) / 1e9 : 0;
}

/* What this rank copies in the memcpy bound: the root of a rooted
 * collective and every rank of the others the busiest rank's pool bytes
 * pb, the other ranks of a gather, scatter or reduce their own (peer_bytes),
 * as in the collective: every rank copying pb made the bound read low where
 * ranks share cores (a Reduce at 4 ranks on 2 cores copied 12 S for 6 S). */
static size_t bound_bytes(const struct rank_ctx *x, const struct bu_case *k, size_t nbytes,
			  size_t pb)
{
	const struct bu_coll *coll = x->o->coll;

	if (!coll->peer_bytes || x->rank == k->root)
		return pb;
	return (size_t)coll->peer_bytes(nbytes, x->nranks);
}

/* The memcpy bound: on a machine whose ranks share memory bandwidth (and
 * here two cores), every rank copying its bytes at once bounds the pool
 * scheme; a solo memcpy with the other cores idle overstates it. */
static void memcpy_move(struct rank_ctx *x, size_t bytes)
{
	for (size_t done = 0, n; done < bytes; done += n) {
		n = bytes - done < x->cpy_bytes ? bytes - done : x->cpy_bytes;
		memcpy(x->h_cpy_b, x->h_cpy_a, n);
	}
	__asm__ __volatile__("" : : "r"(x->h_cpy_b) : "memory");
}

/* Until *w reaches v (cyclic): spin a little, then yield the core, which
 * with more ranks than cores the rank we wait for may need. */
static void pipe_wait(atomic_uint *w, unsigned v)
{
	for (int spins = 0; (int)(atomic_load_explicit(w, memory_order_acquire) - v) < 0; spins++)
		if (spins > 1000)
			sched_yield();
}

/* Chunk k (global g) of this rank: into its own slot, once the rank that
 * reads it (rank + 1) consumed what the slot held PIPE_SLOTS chunks ago. */
static void pipe_put(struct rank_ctx *x, const char *src, size_t len, unsigned g)
{
	struct rank_slot *next = &x->bd->slot[(x->rank + 1) % x->nranks];
	char *slot = x->bd->pipe_win + ((size_t)x->rank * PIPE_SLOTS + g % PIPE_SLOTS) * PIPE_CHUNK;

	if (g >= PIPE_SLOTS)
		pipe_wait(&next->pipe_ack, g - PIPE_SLOTS + 1);
	memcpy(slot, src, len);
	atomic_store_explicit(&x->bd->slot[x->rank].pipe_pub, g + 1, memory_order_release);
}

/* Chunk g of the rank behind us, out of its slot. */
static void pipe_get(struct rank_ctx *x, char *dst, size_t len, unsigned g)
{
	int prev = (x->rank + x->nranks - 1) % x->nranks;
	const char *slot = x->bd->pipe_win + ((size_t)prev * PIPE_SLOTS + g % PIPE_SLOTS) * PIPE_CHUNK;

	pipe_wait(&x->bd->slot[prev].pipe_pub, g + 1);
	memcpy(dst, slot, len);
	atomic_store_explicit(&x->bd->slot[x->rank].pipe_ack, g + 1, memory_order_release);
}

static size_t chunk_len(size_t total, unsigned k)
{
	size_t left = total - (size_t)k * PIPE_CHUNK;

	return left < PIPE_CHUNK ? left : PIPE_CHUNK;
}

/* Where chunk k lies in a reference buffer: past its end (pool bytes
 * larger than cpy_bytes) the chunks start over at the beginning. */
static size_t ref_off(const struct rank_ctx *x, unsigned k)
{
	size_t per = x->cpy_bytes / PIPE_CHUNK;

	assert(per > 0); /* efficiency rows are >= 1 MiB: cpy_bytes >= 2 MiB */
	return (size_t)(k % per) * PIPE_CHUNK;
}

/* The pipe bound: the pool's data movement with nothing around it.  Every
 * rank moves `bytes` (half written, half read) through shared memory in
 * the default policy's chunks and window, a producer/consumer ring (rank
 * r's chunks are read by rank r+1 on another core), publishing one chunk
 * ahead of what it reads and waiting on a flag per chunk.  The pool's
 * bytes must cross between cores this way; a memcpy within one core's
 * cache never pays for that. */
static void pipe_move(struct rank_ctx *x, size_t bytes)
{
	size_t half = bytes / 2;
	unsigned n = (unsigned)((half + PIPE_CHUNK - 1) / PIPE_CHUNK);
	unsigned g0 = x->pipe_seq;

	for (unsigned k = 0; k <= n; k++) {
		if (k < n)
			pipe_put(x, (const char *)x->h_cpy_a + ref_off(x, k), chunk_len(half, k),
				 g0 + k);
		if (k > 0)
			pipe_get(x, (char *)x->h_cpy_b + ref_off(x, k - 1), chunk_len(half, k - 1),
				 g0 + k - 1);
	}
	__asm__ __volatile__("" : : "r"(x->h_cpy_b) : "memory");
	x->pipe_seq = g0 + n;
}

/* "  pct" of v against the bound ref, or N/A where the placement did not
 * run or the bound moved nothing: at 1 rank most collectives have no pool
 * bytes, the references copy 0 bytes at "0 GB/s", and a 0.0% cell would
 * read as a collective that reached none of its bound. */
static void pct_cell(FILE *f, double v, double ref, int run)
{
	if (run && ref > 0)
		fprintf(f, "  %6.1f", 100 * v / ref);
	else
		fprintf(f, "  %6s", "N/A");
}

/* Bytes the busiest rank must move through memory for one call: the
 * pool's, plus out of place the copy between its own buffers. */
static double must_move_bytes(const struct bu_coll *coll, size_t nbytes, int nranks, int inplace)
{
	double b = coll->pool_bytes(nbytes, nranks);

	if (!inplace && coll->local_bytes)
		b += coll->local_bytes(nbytes, nranks);
	return b;
}

/* The efficiency figure's timings, each the best of EFF_REPS loops, the
 * four kinds taking turns: a host that slows the whole machine for tens of
 * milliseconds at a time (these are VMs whose vCPUs share cores with other
 * guests) then slows each kind as often.  The table's single loop, timed as
 * nccl-tests times it, would be a single draw against a best of several. */
struct eff_best {
	double out_us, in_us;  /* the collective, per call (0: not run) */
	double bound, pipe;    /* GB/s */
};

/* The smaller of best and v counting only positive values (0: none yet,
 * or not measured: a rank other than 0, an op without in place). */
static double min_pos(double best, double v)
{
	return v > 0 && (best <= 0 || v < best) ? v : best;
}

static void eff_measure(struct rank_ctx *x, const struct bu_case *k, size_t nbytes,
			struct eff_best *b)
{
	size_t pb = (size_t)x->o->coll->pool_bytes(nbytes, x->nranks);

	*b = (struct eff_best){0};
	for (int rep = 0; rep < EFF_REPS; rep++) {
		double v;

		b->out_us = min_pos(b->out_us, op_rep_us(x, k, 0));
		if (!x->o->coll->no_inplace)
			b->in_us = min_pos(b->in_us, op_rep_us(x, k, 1));
		if ((v = reference_rep(x, pb, bound_bytes(x, k, nbytes, pb), memcpy_move)) > b->bound)
			b->bound = v;
		if ((v = reference_rep(x, pb & ~(size_t)1, pb & ~(size_t)1, pipe_move)) > b->pipe)
			b->pipe = v;
	}
}

static void pool_eff_row(struct rank_ctx *x, const struct bu_case *k, size_t nbytes,
			 const struct eff_best *b)
{
	if (!x->eff)
		return;
	const struct bu_coll *coll = x->o->coll;
	double solo = bu_memcpy_gbps(x->h_cpy_a, x->h_cpy_b, nbytes, EFF_REPS);
	double bout = must_move_bytes(coll, nbytes, x->nranks, 0);
	double bin = must_move_bytes(coll, nbytes, x->nranks, 1);
	double gout = bout / 1e9 / (b->out_us * 1e-6);
	int in = b->in_us > 0;
	double gin = in ? bin / 1e9 / (b->in_us * 1e-6) : 0;
	fprintf(x->eff, "# %10zu  %8s  %6d  %8.2f  %8.2f  %12.0f  %8.2f", nbytes,
		bu_types[k->type].name, k->root, solo, b->bound, bout, gout);
	pct_cell(x->eff, gout, b->bound, 1);
	if (in)
		fprintf(x->eff, "  %12.0f  %8.2f", bin, gin);
	else
		fprintf(x->eff, "  %12s  %8s", "N/A", "N/A");
	pct_cell(x->eff, gin, b->bound, in);
	fprintf(x->eff, "  %8.2f", b->pipe);
	pct_cell(x->eff, gout, b->pipe, 1);
	pct_cell(x->eff, gin, b->pipe, in);
	fputc('\n', x->eff);
}

static void run_row(struct rank_ctx *x, int type, int root, int op, size_t nbytes)
{
	const struct bu_coll *coll = x->o->coll;
	struct bu_case k;
	size_t shown = bu_case_init(&k, coll, x->rank, x->nranks, type, root, op, nbytes);

	struct bu_result out = {0}, in = {0};
	k.seed = bu_case_seed(nbytes, type, root, 0);
	measure(x, &k, 0, shown, &out);
	k.seed = bu_case_seed(nbytes, type, root, 1);
	if (coll->no_inplace)
		in.not_run = 1;
	else
		measure(x, &k, 1, shown, &in);
	if (x->rank == 0)
		bu_report_row(&x->tally, &k, shown, &out, &in);
	if (x->o->pool_eff && shown >= POOL_EFF_MIN_BYTES) {
		struct eff_best b;

		eff_measure(x, &k, shown, &b);
		/* The other ranks sleep in the barrier while rank 0 measures the
		 * solo memcpy reference, so they neither compete for cores nor
		 * poll. */
		if (x->rank == 0)
			pool_eff_row(x, &k, shown, &b);
		launch_barrier();
	}
}

static void run_sizes(struct rank_ctx *x, int type, int root, int op)
{
	for (size_t s = x->o->min_bytes; s <= x->o->max_bytes; s = bu_next_size(x->o, s))
		run_row(x, type, root, op, s);
}

/* Iterates types x ops x roots as nccl-tests does. */
static void run_all(struct rank_ctx *x)
{
	struct bu_sweep s;

	bu_sweep_init(&s, x->o, x->nranks);
	for (int t = s.type0; t <= s.type1; t++)
		for (int op = s.op0; op <= s.op1; op++)
			for (int r = s.root0; r <= s.root1; r++)
				run_sizes(x, t, r, op);
}

static void print_pool_eff(struct rank_ctx *x)
{
	if (!x->eff)
		return;
	fflush(x->eff);
	rewind(x->eff);
	printf("#\n# Pool efficiency (sizes >= 1 MiB): bytes the busiest rank must move through\n"
	       "# memory (%s)\n"
	       "# / time of a call (best of %d timed loops, not the table's one), as %% of the memcpy\n"
	       "# bound: every rank memcpys its in-place bytes (a gather's, scatter's or reduce's\n"
	       "# other ranks their own, less than the root's), up to %d times, all at once, timed\n"
	       "# from the first rank's start to the last rank's end (best of %d, taking turns with\n"
	       "# the collective's loops; `solo`: rank 0 alone copies S bytes); and as %% of the pipe\n"
	       "# bound: every rank moves the busiest rank's bytes at once, half written into its\n"
	       "# slots and half read out of the previous rank's, in %u KiB chunks through %u slots\n"
	       "# per rank with a flag per chunk, as the pool stages them (what crossing between\n"
	       "# cores costs; timed the same).\n",
	       x->o->coll->pool_note, EFF_REPS, x->o->iters > 0 ? x->o->iters : 1, EFF_REPS,
	       PIPE_CHUNK >> 10, PIPE_SLOTS);
	printf("# %10s  %8s  %6s  %8s  %8s  %12s  %8s  %6s  %12s  %8s  %6s  %8s  %6s  %6s\n",
	       "size", "type", "root", "solo", "bound", "out-of-place", "", "", "in-place", "", "",
	       "pipe", "out", "in");
	printf("# %10s  %8s  %6s  %8s  %8s  %12s  %8s  %6s  %12s  %8s  %6s  %8s  %6s  %6s\n",
	       "(B)", "", "", "(GB/s)", "(GB/s)", "(B)", "(GB/s)", "(%)", "(B)", "(GB/s)", "(%)",
	       "(GB/s)", "(%)", "(%)");
	char line[256];
	while (fgets(line, sizeof(line), x->eff))
		fputs(line, stdout);
	fclose(x->eff);
	x->eff = NULL;
}

static int rank_main(int rank, int nranks, const ncclUniqueId *id, void *arg)
{
	struct board *bd = arg;
	struct rank_ctx x = {.rank = rank, .nranks = nranks, .o = &bd->opts, .bd = bd};
	x.run = runners[bu_coll_id(x.o->coll)];
	int dev = pick_device(&x);
	publish_device(&x, dev);
	CUDA(&x, cudaStreamCreateWithFlags(&x.stream, cudaStreamNonBlocking));
	NCCL(&x, ncclCommInitRank(&x.comm, nranks, *id, rank));
	alloc_buffers(&x);
	launch_barrier(); /* device lines complete */
	if (rank == 0) {
		print_header(&x);
		if (x.o->pool_eff && !(x.eff = tmpfile()))
			die(&x, "tmpfile", "cannot buffer the pool efficiency table");
		bu_print_columns();
	}
	run_all(&x);
	if (rank == 0) {
		bu_print_footer(&x.tally);
		print_pool_eff(&x);
	}
	launch_barrier(); /* no rank tears down while others still run */
	NCCL(&x, ncclCommDestroy(x.comm));
	free_buffers(&x);
	CUDA(&x, cudaStreamDestroy(x.stream));
	/* wrong results fail the run (rank 0 holds the total) */
	return rank == 0 && x.tally.wrong_total ? 2 : 0;
}

int main(int argc, char **argv)
{
	struct bu_opts o;
	bu_parse_opts(argc, argv, &o, "coll_perf", 0);
	if (!runners[bu_coll_id(o.coll)]) {
		fprintf(stderr, "coll_perf: no NCCL runner for %s\n", o.coll->name);
		return 2;
	}
	if (o.nranks > MAX_RANKS) {
		fprintf(stderr, "coll_perf: at most %d ranks\n", MAX_RANKS);
		return 2;
	}
	if (o.coll->has_root && o.root >= o.nranks) {
		fprintf(stderr, "coll_perf: root %d out of range for %d ranks\n", o.root, o.nranks);
		return 2;
	}
	/* The board is mapped before fork so every rank sees the same page; no
	 * CUDA or NCCL call happens in this process (fork after CUDA init is not
	 * allowed). */
	size_t bsize = sizeof(struct board) + (size_t)o.nranks * sizeof(struct rank_slot);
	struct board *bd =
		mmap(NULL, bsize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (bd == MAP_FAILED) {
		perror("coll_perf: mmap");
		return 1;
	}
	memset(bd, 0, bsize);
	bd->opts = o;
	if (o.pool_eff) {
		size_t wsize = (size_t)o.nranks * PIPE_SLOTS * PIPE_CHUNK;

		bd->pipe_win = mmap(NULL, wsize, PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (bd->pipe_win == MAP_FAILED) {
			perror("coll_perf: mmap");
			return 1;
		}
		memset(bd->pipe_win, 0, wsize);
	}
	int rc = launch_ranks(o.nranks, rank_main, bd, o.timeout_s);
	if (o.pool_eff)
		munmap(bd->pipe_win, (size_t)o.nranks * PIPE_SLOTS * PIPE_CHUNK);
	munmap(bd, bsize);
	if (rc)
		fprintf(stderr, "coll_perf: failed (status %d)\n", rc);
	return rc;
}
