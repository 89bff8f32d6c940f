/* bitflip.c - flip bits of a live pool's metadata, systematically, under
 * a running job, and check that no rank ever crashes or hangs: each flip
 * either goes unnoticed, costs a wrong result (a flipped doorbell can let a
 * reader in early: it is counted, not hidden), or fails the communicator
 * with a clean NCCL error, after which the ranks make a new one.
 *
 *   bitflip NRANKS SECONDS
 *
 * A flipper process walks every bit of: the superblock's geometry (and
 * for each of those bits a fresh process attaches to the pool and must get
 * a clean refusal), then, for the communicator record in use, its header,
 * every rank record, the pub/ack/done doorbells and the op descriptors.
 * Each flip holds for HOLD_US, then is undone.  The superblock's table
 * lock word is left alone: a lock that looks held by a foreign host is
 * stolen only after 10 s, by design.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "launch.h"
#include "pool_format.h"

#define COUNT 1024
#define HOLD_US 300
#define MAX_RANKS 8

struct shared {
	_Atomic uint32_t gen;     /* communicator generation rank 0 published */
	_Atomic uint32_t stop;
	ncclUniqueId id[2];
	_Atomic uint64_t ok, wrong, errors, init_errors;
	_Atomic uint64_t flips, attach_checks, attach_crashes;
};

static struct shared *sh;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- ranks -------------------------------------------------------------- */

static int run_op(ncclComm_t comm, cudaStream_t s, int rank, int n, float *send, float *recv,
		  float *host, int which)
{
	ncclResult_t r, e = ncclSuccess;
	size_t m = which ? COUNT : (size_t)COUNT * n;

	for (size_t i = 0; i < COUNT; i++)
		host[i] = (float)(rank + 1);
	cudaMemcpy(send, host, COUNT * sizeof(float), cudaMemcpyHostToDevice);
	r = which ? ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, s) :
		    ncclAllGather(send, recv, COUNT, ncclFloat, comm, s);
	if (r == ncclSuccess)
		cudaStreamSynchronize(s);
	ncclCommGetAsyncError(comm, &e);
	if (r != ncclSuccess || e != ncclSuccess)
		return -1;
	cudaMemcpy(host, recv, m * sizeof(float), cudaMemcpyDeviceToHost);
	for (size_t i = 0; i < m; i++) {
		float want = which ? (float)(n * (n + 1) / 2) : (float)(i / COUNT + 1);

		if (host[i] != want)
			return 1;
	}
	return 0;
}

/* The generation to use next: rank 0 makes one, the others take the
 * newest rank 0 published after `last` (bounded wait). */
static uint32_t next_gen(int rank, uint32_t last)
{
	double t0 = now_s();
	uint32_t g;

	if (rank == 0) {
		g = last + 1;
		if (ncclGetUniqueId(&sh->id[g % 2]) != ncclSuccess)
			return 0;
		atomic_store(&sh->gen, g);
		return g;
	}
	while ((g = atomic_load(&sh->gen)) <= last && !atomic_load(&sh->stop) && now_s() - t0 < 30)
		usleep(1000);
	return g > last ? g : 0;
}

static int rank_main(int rank, int n, const ncclUniqueId *unused, void *arg)
{
	double end = now_s() + *(double *)arg;
	float *send, *recv, *host = malloc((size_t)COUNT * MAX_RANKS * sizeof(float));
	cudaStream_t s;
	uint32_t g = 0;

	(void)unused;
	cudaSetDevice(0);
	if (!host || cudaStreamCreate(&s) != cudaSuccess ||
	    cudaMalloc((void **)&send, COUNT * sizeof(float)) != cudaSuccess ||
	    cudaMalloc((void **)&recv, (size_t)COUNT * MAX_RANKS * sizeof(float)) != cudaSuccess) {
		fprintf(stderr, "rank %d: no stream or device memory\n", rank);
		return 1;
	}
	while (now_s() < end) {
		ncclComm_t comm;
		int k = 0, rc = 0;

		g = next_gen(rank, g);
		if (!g)
			break;
		if (ncclCommInitRank(&comm, n, sh->id[g % 2], rank) != ncclSuccess) {
			atomic_fetch_add(&sh->init_errors, 1);
			continue;
		}
		while (now_s() < end && (rc = run_op(comm, s, rank, n, send, recv, host, k++ & 1)) >= 0)
			atomic_fetch_add(rc ? &sh->wrong : &sh->ok, 1);
		if (rc < 0)
			atomic_fetch_add(&sh->errors, 1);
		ncclCommAbort(comm);
		cudaStreamSynchronize(s);
	}
	atomic_store(&sh->stop, 1);
	return 0;
}

/* ---- flipper ------------------------------------------------------------ */

static void flip(volatile uint8_t *p, int bit)
{
	p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
}

/* A fresh process attaches to the pool (ncclGetUniqueId loads the shim's
 * runtime) while the superblock is damaged: any exit but a signal is fine. */
static void attach_check(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		ncclUniqueId id;

		alarm(20);
		ncclGetUniqueId(&id);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return;
	atomic_fetch_add(&sh->attach_checks, 1);
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "attaching process died of signal %d\n", WTERMSIG(st));
		atomic_fetch_add(&sh->attach_crashes, 1);
	}
}

static void flip_range(uint8_t *base, size_t off, size_t len, int attach)
{
	for (size_t b = 0; b < len * 8 && !atomic_load(&sh->stop); b++) {
		flip(base + off, (int)b);
		atomic_fetch_add(&sh->flips, 1);
		if (attach)
			attach_check();
		else
			usleep(HOLD_US);
		flip(base + off, (int)b);
	}
}

static int live_slot(const uint8_t *base, const struct cxls_super *sb)
{
	for (uint32_t s = 0; s < sb->max_comms; s++) {
		const struct cxls_comm_rec *r = (const void *)(base + sb->comm_offset + sb->comm_stride * s);

		if (CXLS_PHASE(atomic_load(&r->state)) == CXLS_COMM_READY)
			return (int)s;
	}
	return -1;
}

static void flipper(const char *path, int nranks)
{
	struct cxls_super sb;
	struct stat st;
	uint8_t *base;
	int fd;

	while ((fd = open(path, O_RDWR)) < 0 || fstat(fd, &st) || st.st_size < (off_t)CXLS_PAGE) {
		if (fd >= 0)
			close(fd);
		if (atomic_load(&sh->stop))
			_exit(0);
		usleep(10000);
	}
	base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		_exit(1);
	/* every rank attached and ran a collective before the first flip */
	while (atomic_load(&sh->ok) < (uint64_t)nranks) {
		if (atomic_load(&sh->stop))
			_exit(0);
		usleep(1000);
	}
	memcpy(&sb, base, sizeof(sb));
	/* the geometry, with a process attaching for every flipped bit */
	flip_range(base, 0, offsetof(struct cxls_super, table_lock) < 128 ?
		   offsetof(struct cxls_super, table_lock) : 128, 1);
	while (!atomic_load(&sh->stop)) {
		size_t per_rank_desc = (size_t)CXLS_DESC_RING * sizeof(struct cxls_op_desc);
		size_t rec, ranks, bells, desc;
		int s = live_slot(base, &sb);

		if (s < 0) {
			usleep(1000);
			continue;
		}
		rec = sb.comm_offset + sb.comm_stride * (uint64_t)s;
		ranks = rec + ((sizeof(struct cxls_comm_rec) + CXLS_LINE - 1) & ~(size_t)(CXLS_LINE - 1));
		bells = ranks + sizeof(struct cxls_rank_rec) * sb.max_ranks;
		desc = bells + 3 * sizeof(struct cxls_bell) * sb.max_ranks;
		flip_range(base, rec, sizeof(struct cxls_comm_rec), 0);
		flip_range(base, ranks, sizeof(struct cxls_rank_rec) * (size_t)nranks, 0);
		for (int b = 0; b < 3 * nranks; b++) {
			int arr = b / nranks, r = b % nranks;

			flip_range(base, bells + sizeof(struct cxls_bell) * (arr * sb.max_ranks + (size_t)r),
				   sizeof(uint32_t), 0);
		}
		for (int r = 0; r < nranks; r++)
			flip_range(base, desc + per_rank_desc * (size_t)r, per_rank_desc, 0);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	double secs = argc > 2 ? atof(argv[2]) : 20;
	const char *path = getenv("CXLSHIM_POOL_PATH");
	pid_t fl;
	int rc, st;

	if (!path || n < 2 || n > MAX_RANKS) {
		fprintf(stderr, "usage: CXLSHIM_POOL_PATH=... %s NRANKS(2..8) SECONDS\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof(*sh));
	fl = fork();
	if (fl == 0)
		flipper(path, n);
	rc = launch_ranks(n, rank_main, &secs, (int)secs + 120);
	atomic_store(&sh->stop, 1);
	waitpid(fl, &st, 0);
	printf("bitflip: %llu flips, %llu ops ok, %llu wrong results, %llu clean op errors, "
	       "%llu failed inits, %llu attaches to a damaged superblock (%llu crashed), ranks %s, "
	       "flipper %s\n",
	       (unsigned long long)sh->flips, (unsigned long long)sh->ok,
	       (unsigned long long)sh->wrong, (unsigned long long)sh->errors,
	       (unsigned long long)sh->init_errors, (unsigned long long)sh->attach_checks,
	       (unsigned long long)sh->attach_crashes, rc ? "FAILED" : "ok",
	       WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "FAILED");
	return rc || sh->attach_crashes || !WIFEXITED(st) || WEXITSTATUS(st) || !sh->ok ||
	       !sh->attach_checks;
}
