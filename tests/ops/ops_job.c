/* ops_job.c - NCCL jobs for the operability tests (the scripts in tests/ops):
 *
 *   ops_job hang [N]        every rank runs two AllGathers; then all but
 *                           the last call an AllReduce and wait in it,
 *                           while the last rank never calls it (it sleeps
 *                           until killed): `cxlshim doctor` must name it
 *   ops_job chain           4 ranks split into A = {0,1,2} and B = {2,3}:
 *                           ranks 0 and 1 wait in an AllReduce on A that
 *                           rank 2 never calls, because it waits in an
 *                           AllGather on B that rank 3 never calls (it
 *                           sleeps): the first cause is B's AllGather
 *   ops_job cycle           2 ranks, two communicators A and B (splits of
 *                           the world): rank 0 calls A's AllReduce and
 *                           waits for it, rank 1 calls B's AllGather and
 *                           waits for it: each waits for the other
 *   ops_job cycle1          the same without the waits: rank 0 enqueues
 *                           A's then B's, rank 1 B's then A's, on one
 *                           stream, then synchronizes; each one's second
 *                           op is queued behind its first
 *   ops_job streams         4 ranks, A = {0,1,2} and B = {0,1,3}, each
 *                           of ranks 0 and 1 enqueues on two streams:
 *                           rank 0 A's AllReduce on one then B's
 *                           AllGather on the other, rank 1 the other way
 *                           round; rank 2 never calls A's, rank 3 never
 *                           B's.  Two independent hangs: on one queue per
 *                           process they would look like a wait cycle
 *   ops_job multi           one process drives two ranks on two devices:
 *                           rank 0 of A = {P, Q} and rank 0 of B = {P, R},
 *                           and enqueues A's AllReduce then B's AllGather;
 *                           Q never calls A's, R never B's: B's waits in
 *                           its op, not behind A's (another device)
 *   ops_job traffic [N] [I] [BASE]  I iterations of AllGather, Broadcast
 *                           and AllReduce, results checked (for traces);
 *                           every value offset by BASE (two jobs at once)
 *   ops_job p2p             3 ranks: rank 0 sends to rank 1, rank 2
 *                           receives from rank 1; rank 1 calls neither
 *                           (all stay alive)
 *   ops_job p2pgroup        3 ranks in a ring, each a group of a Recv from
 *                           the previous and a Send to the next, of more
 *                           bytes than a channel stages; rank 1's group
 *                           holds only its Send: rank 0's Send waits
 *                           (part of it staged), its Recv completes
 *   ops_job partial         3 ranks, rank 2 never joins the communicator
 *   ops_job lone            one process is rank 2 of a 3-rank communicator
 *                           of its own id: its init must fail (timeout),
 *                           never join another job's communicator
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "launch.h"

#define COUNT 4096

/* Added to every value a rank contributes (traffic BASE): two jobs with
 * different bases on one pool each check that they only see their own. */
static float base;

static float *dev_floats(size_t n, float v)
{
	float *p = NULL, *h = malloc(n * sizeof(float));

	if (!h || cudaMalloc((void **)&p, n * sizeof(float)) != cudaSuccess) {
		free(h);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		h[i] = v;
	cudaMemcpy(p, h, n * sizeof(float), cudaMemcpyHostToDevice);
	free(h);
	return p;
}

/* 1 when every element of the device buffer equals want(i). */
static int check(const float *dev, size_t n, float (*want)(size_t i, int nranks), int nranks)
{
	float *h = malloc(n * sizeof(float));
	int ok = h != NULL;

	if (ok && cudaMemcpy(h, dev, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
		ok = 0;
	for (size_t i = 0; ok && i < n; i++)
		if (h[i] != want(i, nranks)) {
			fprintf(stderr, "element %zu: %g, want %g\n", i, h[i], want(i, nranks));
			ok = 0;
		}
	free(h);
	return ok;
}

static float gathered(size_t i, int nranks)
{
	(void)nranks;
	return (float)(i / COUNT) + base;
}

static float summed(size_t i, int nranks)
{
	(void)i;
	return (float)(nranks * (nranks - 1) / 2) + (float)nranks * base;
}

static float from_root(size_t i, int nranks)
{
	(void)i;
	(void)nranks;
	return base;
}

static int setup(int rank, int n, const ncclUniqueId *id, ncclComm_t *comm, cudaStream_t *s)
{
	cudaSetDevice(0);
	if (cudaStreamCreate(s) != cudaSuccess)
		return -1;
	return ncclCommInitRank(comm, n, *id, rank) == ncclSuccess ? 0 : -1;
}

static int allgather(ncclComm_t comm, cudaStream_t s, int rank, int n)
{
	float *send = dev_floats(COUNT, (float)rank + base), *recv = dev_floats((size_t)COUNT * n, -1);
	int ok = send && recv &&
		 ncclAllGather(send, recv, COUNT, ncclFloat, comm, s) == ncclSuccess &&
		 cudaStreamSynchronize(s) == cudaSuccess &&
		 check(recv, (size_t)COUNT * n, gathered, n);

	cudaFree(send);
	cudaFree(recv);
	return ok ? 0 : -1;
}

static int allreduce(ncclComm_t comm, cudaStream_t s, int rank, int n)
{
	float *buf = dev_floats(COUNT, (float)rank + base);
	int ok = buf && ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, s) == ncclSuccess &&
		 cudaStreamSynchronize(s) == cudaSuccess && check(buf, COUNT, summed, n);

	cudaFree(buf);
	return ok ? 0 : -1;
}

static int broadcast(ncclComm_t comm, cudaStream_t s, int rank, int n)
{
	float *buf = dev_floats(COUNT, (float)rank + base);
	int ok = buf && ncclBroadcast(buf, buf, COUNT, ncclFloat, 0, comm, s) == ncclSuccess &&
		 cudaStreamSynchronize(s) == cudaSuccess && check(buf, COUNT, from_root, n);

	cudaFree(buf);
	return ok ? 0 : -1;
}

static int hang(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm;
	cudaStream_t s;
	float *buf;

	(void)arg;
	if (setup(rank, n, id, &comm, &s) || allgather(comm, s, rank, n) ||
	    allgather(comm, s, rank, n))
		return 1;
	printf("rank %d: two AllGathers done\n", rank);
	fflush(stdout);
	if (rank == n - 1) {
		for (;;)
			pause(); /* never calls the AllReduce */
	}
	buf = dev_floats(COUNT, 1);
	if (ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, s) != ncclSuccess)
		return 1;
	cudaStreamSynchronize(s); /* hangs until the timeout or a kill */
	return 0;
}

static int chain(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t world, a, b;
	cudaStream_t s;
	float *buf, *all;

	(void)arg;
	if (setup(rank, n, id, &world, &s) || allgather(world, s, rank, n) ||
	    ncclCommSplit(world, rank <= 2 ? 0 : NCCL_SPLIT_NOCOLOR, rank, &a, NULL) != ncclSuccess ||
	    ncclCommSplit(world, rank >= 2 ? 0 : NCCL_SPLIT_NOCOLOR, rank, &b, NULL) != ncclSuccess)
		return 1;
	printf("rank %d: split done\n", rank);
	buf = dev_floats(COUNT, 1);
	all = dev_floats((size_t)COUNT * 2, 0);
	if (rank == 3) {
		for (;;)
			pause(); /* never calls B's AllGather */
	}
	if (rank == 2) {
		if (ncclAllGather(buf, all, COUNT, ncclFloat, b, s) != ncclSuccess)
			return 1;
	} else if (ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, a, s) != ncclSuccess) {
		return 1;
	}
	cudaStreamSynchronize(s); /* hangs until a kill */
	return 0;
}

static int cycle(int rank, int n, const ncclUniqueId *id, void *arg)
{
	int one_stream = *(int *)arg;
	ncclComm_t world, a, b;
	cudaStream_t s;
	float *buf, *all;

	if (setup(rank, n, id, &world, &s) || allgather(world, s, rank, n) ||
	    ncclCommSplit(world, 0, rank, &a, NULL) != ncclSuccess ||
	    ncclCommSplit(world, 0, rank, &b, NULL) != ncclSuccess)
		return 1;
	printf("rank %d: split done\n", rank);
	buf = dev_floats(COUNT, 1);
	all = dev_floats((size_t)COUNT * n, 0);
	for (int i = 0; i < 2; i++) {
		int on_a = (i == 0) == (rank == 0);
		ncclResult_t r = on_a ? ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, a, s) :
					ncclAllGather(buf, all, COUNT, ncclFloat, b, s);

		if (r != ncclSuccess)
			return 1;
		if (!one_stream)
			cudaStreamSynchronize(s); /* hangs until a kill */
	}
	cudaStreamSynchronize(s); /* hangs until a kill */
	return 0;
}

static int streams(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t world, a, b;
	cudaStream_t s[2];
	float *buf, *all;

	(void)arg;
	if (setup(rank, n, id, &world, &s[0]) || cudaStreamCreate(&s[1]) != cudaSuccess ||
	    allgather(world, s[0], rank, n) ||
	    ncclCommSplit(world, rank != 3 ? 0 : NCCL_SPLIT_NOCOLOR, rank, &a, NULL) != ncclSuccess ||
	    ncclCommSplit(world, rank != 2 ? 0 : NCCL_SPLIT_NOCOLOR, rank, &b, NULL) != ncclSuccess)
		return 1;
	printf("rank %d: split done\n", rank);
	buf = dev_floats(COUNT, 1);
	all = dev_floats((size_t)COUNT * 3, 0);
	if (rank >= 2) {
		for (;;)
			pause(); /* never calls its communicator's op */
	}
	for (int i = 0; i < 2; i++) {
		int on_a = (i == 0) == (rank == 0);
		ncclResult_t r = on_a ? ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, a, s[i]) :
					ncclAllGather(buf, all, COUNT, ncclFloat, b, s[i]);

		if (r != ncclSuccess)
			return 1;
	}
	cudaStreamSynchronize(s[0]); /* hangs until a kill */
	cudaStreamSynchronize(s[1]);
	return 0;
}

/* The unique ids of "multi": made by P, read by Q and R. */
struct ids {
	_Atomic int ready;
	ncclUniqueId a, b;
};

static int multi(int proc, int n, const ncclUniqueId *id, void *arg)
{
	struct ids *ids = arg;
	ncclComm_t a, b;
	cudaStream_t sa, sb;
	float *buf, *all;

	(void)n;
	(void)id;
	if (proc == 0) {
		if (ncclGetUniqueId(&ids->a) != ncclSuccess || ncclGetUniqueId(&ids->b) != ncclSuccess)
			return 1;
		atomic_store(&ids->ready, 1);
	}
	while (!atomic_load(&ids->ready))
		usleep(1000);
	if (proc != 0) {
		ncclComm_t c;
		cudaStream_t s;

		if (setup(1, 2, proc == 1 ? &ids->a : &ids->b, &c, &s))
			return 1;
		printf("proc %d: joined\n", proc);
		for (;;)
			pause(); /* never calls its communicator's op */
	}
	if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(&sa) != cudaSuccess ||
	    ncclCommInitRank(&a, 2, ids->a, 0) != ncclSuccess || !(buf = dev_floats(COUNT, 1)) ||
	    ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, a, sa) != ncclSuccess)
		return 1;
	if (cudaSetDevice(1) != cudaSuccess || cudaStreamCreate(&sb) != cudaSuccess ||
	    ncclCommInitRank(&b, 2, ids->b, 0) != ncclSuccess ||
	    !(all = dev_floats((size_t)COUNT * 2, 0)) ||
	    ncclAllGather(buf, all, COUNT, ncclFloat, b, sb) != ncclSuccess)
		return 1;
	printf("proc 0: both enqueued\n");
	cudaStreamSynchronize(sa); /* hangs until a kill */
	return 0;
}

static int p2p(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm;
	cudaStream_t s;
	float *buf;
	ncclResult_t r;

	(void)arg;
	if (setup(rank, n, id, &comm, &s) || allgather(comm, s, rank, n) ||
	    !(buf = dev_floats(COUNT, 1)))
		return 1;
	printf("rank %d: ready\n", rank);
	if (rank == 1) {
		for (;;)
			pause(); /* calls neither its Recv nor its Send */
	}
	r = rank == 0 ? ncclSend(buf, COUNT, ncclFloat, 1, comm, s) :
			ncclRecv(buf, COUNT, ncclFloat, 1, comm, s);
	if (r != ncclSuccess)
		return 1;
	/* a Send that fits the channel's staging completes without its
	 * Recv (eagerly); the Recv waits for its Send */
	cudaStreamSynchronize(s);
	for (;;)
		pause(); /* alive until a kill */
}

#define BIG_FLOATS (9u << 18) /* 9 MiB: more than a channel stages */

static int p2pgroup(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm;
	cudaStream_t s;
	float *in, *out;
	int ok;

	(void)arg;
	if (setup(rank, n, id, &comm, &s) || allgather(comm, s, rank, n) ||
	    !(in = dev_floats(BIG_FLOATS, -1)) || !(out = dev_floats(BIG_FLOATS, (float)rank)))
		return 1;
	printf("rank %d: ready\n", rank);
	ok = ncclGroupStart() == ncclSuccess &&
	     (rank == 1 || /* never posts its Recv from rank 0 */
	      ncclRecv(in, BIG_FLOATS, ncclFloat, (rank + n - 1) % n, comm, s) == ncclSuccess) &&
	     ncclSend(out, BIG_FLOATS, ncclFloat, (rank + 1) % n, comm, s) == ncclSuccess &&
	     ncclGroupEnd() == ncclSuccess;
	if (!ok)
		return 1;
	cudaStreamSynchronize(s); /* rank 0: until a kill */
	printf("rank %d: group done\n", rank);
	fflush(stdout);
	for (;;)
		pause(); /* alive until a kill */
}

static int partial(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm;
	cudaStream_t s;

	(void)arg;
	if (rank == n - 1) {
		for (;;)
			pause(); /* never joins */
	}
	return setup(rank, n, id, &comm, &s) ? 1 : 0;
}

/* Exit status 0 when the init failed, as it must. */
static int lone(void)
{
	ncclUniqueId id;
	ncclComm_t comm;
	ncclResult_t r;

	cudaSetDevice(0);
	if (ncclGetUniqueId(&id) != ncclSuccess)
		return 2;
	r = ncclCommInitRank(&comm, 3, id, 2);
	printf("lone rank 2 of 3: %s\n", ncclGetErrorString(r));
	return r == ncclSuccess;
}

static int traffic(int rank, int n, const ncclUniqueId *id, void *arg)
{
	int iters = *(int *)arg;
	ncclComm_t comm;
	cudaStream_t s;

	if (setup(rank, n, id, &comm, &s))
		return 1;
	for (int i = 0; i < iters; i++)
		if (allgather(comm, s, rank, n) || broadcast(comm, s, rank, n) ||
		    allreduce(comm, s, rank, n)) {
			fprintf(stderr, "rank %d: iteration %d failed\n", rank, i);
			return 1;
		}
	return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 3, iters = argc > 3 ? atoi(argv[3]) : 5;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "hang"))
		return launch_ranks(n, hang, NULL, 600);
	if (argc > 1 && !strcmp(argv[1], "chain"))
		return launch_ranks(4, chain, NULL, 600);
	if (argc > 1 && (!strcmp(argv[1], "cycle") || !strcmp(argv[1], "cycle1"))) {
		int one_stream = !strcmp(argv[1], "cycle1");

		return launch_ranks(2, cycle, &one_stream, 600);
	}
	if (argc > 1 && !strcmp(argv[1], "streams"))
		return launch_ranks(4, streams, NULL, 600);
	if (argc > 1 && !strcmp(argv[1], "multi")) {
		struct ids *ids = mmap(NULL, sizeof(*ids), PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

		return ids == MAP_FAILED ? 1 : launch_ranks(3, multi, ids, 600);
	}
	if (argc > 1 && !strcmp(argv[1], "p2p"))
		return launch_ranks(3, p2p, NULL, 600);
	if (argc > 1 && !strcmp(argv[1], "p2pgroup"))
		return launch_ranks(3, p2pgroup, NULL, 600);
	if (argc > 1 && !strcmp(argv[1], "partial"))
		return launch_ranks(3, partial, NULL, 600);
	if (argc > 1 && !strcmp(argv[1], "lone"))
		return lone();
	if (argc > 4)
		base = (float)atof(argv[4]);
	if (argc > 1 && !strcmp(argv[1], "traffic"))
		return launch_ranks(n, traffic, &iters, 120);
	fprintf(stderr, "usage: %s hang|chain|cycle|cycle1|streams|multi|p2p|p2pgroup|partial|lone|traffic [NRANKS] [ITERS] "
		"[BASE]\n", argv[0]);
	return 2;
}
