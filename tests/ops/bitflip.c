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
 *
 * With CXLSHIM_TOOL naming the `cxlshim` command, the flipper also holds
 * flips of the checksummed words of the live communicator record (its
 * header and each rank's holder identity) while `cxlshim pool status
 * --json` reads the pool: each must be reported as a damaged record.  A
 * check the job outran (the record was freed or reused meanwhile) is not
 * counted; a damaged record reported intact is a failure.
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
	_Atomic uint64_t detected, undetected, outran;
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

/* `cxlshim pool status --json` into buf; 0 when it ran and said something. */
static int tool_status(const char *tool, const char *path, char *buf, size_t len)
{
	char cmd[1024];
	size_t n;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "env -u LD_PRELOAD %s pool status --json -p %s 2>/dev/null",
		 tool, path);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	return pclose(f) == 0 && n ? 0 : -1;
}

/* What the report says of the communicator in slot: 1 damaged (the
 * header, or `rank` damaged when rank >= 0), 0 intact, -1 not listed. */
static int reported_damaged(const char *json, int slot, int rank)
{
	char key[64];
	const char *p, *q, *end;

	snprintf(key, sizeof(key), "{\"slot\": %d, \"phase\"", slot);
	p = strstr(json, key);
	if (!p)
		return -1;
	end = strstr(p + 1, "{\"slot\": "); /* the next record, if any */
	q = strstr(p, "\"corrupt\": ");
	if (q && (!end || q < end) && q[11] == '"')
		return 1; /* the header itself */
	if (rank < 0)
		return 0;
	snprintf(key, sizeof(key), "{\"rank\": %d, ", rank);
	p = strstr(p, key);
	if (!p || (end && p > end))
		return -1;
	q = strstr(p, "\"corrupt\": ");
	return q && q[11] == '"';
}

static uint64_t record_id(const volatile uint8_t *rec)
{
	const struct cxls_comm_rec *r = (const void *)rec;

	return r->created_ns ^ atomic_load(&((struct cxls_comm_rec *)r)->key_lo);
}

/* Holds each sampled bit of [off, off+len) flipped while the tool reads
 * the pool, and scores what it reports. */
static void detect_range(const char *tool, const char *path, uint8_t *base, size_t rec, size_t off,
			 size_t len, int slot, int rank, int step)
{
	static char json[1 << 20];

	for (size_t b = 0; b < len * 8 && !atomic_load(&sh->stop); b += (size_t)step) {
		uint64_t id = record_id(base + rec);
		int said;

		flip(base + off, (int)b);
		atomic_fetch_add(&sh->flips, 1);
		said = tool_status(tool, path, json, sizeof(json)) ? -1 :
		       reported_damaged(json, slot, rank);
		flip(base + off, (int)b);
		if (said == 1)
			atomic_fetch_add(&sh->detected, 1);
		else if (said < 0 || record_id(base + rec) != id ||
			 CXLS_PHASE(atomic_load(&((struct cxls_comm_rec *)(base + rec))->state)) ==
				 CXLS_COMM_FREE)
			atomic_fetch_add(&sh->outran, 1);
		else {
			fprintf(stderr, "flip of bit %zu at pool offset %zu (slot %d, rank %d) not "
				"reported\n", b, off, slot, rank);
			atomic_fetch_add(&sh->undetected, 1);
		}
	}
}

/* The checksummed words of slot s's record while it is in use. */
static void detect(const char *tool, const char *path, uint8_t *base, const struct cxls_super *sb,
		   int s, int nranks)
{
	size_t rec = sb->comm_offset + sb->comm_stride * (uint64_t)s;
	size_t ranks = rec + ((sizeof(struct cxls_comm_rec) + CXLS_LINE - 1) & ~(size_t)(CXLS_LINE - 1));

	detect_range(tool, path, base, rec, rec + offsetof(struct cxls_comm_rec, key_lo), 16, s, -1, 5);
	detect_range(tool, path, base, rec, rec + offsetof(struct cxls_comm_rec, nranks),
		     offsetof(struct cxls_comm_rec, sum) + 4 - offsetof(struct cxls_comm_rec, nranks),
		     s, -1, 5);
	for (int r = 0; r < nranks; r++) {
		size_t rr = ranks + sizeof(struct cxls_rank_rec) * (size_t)r;

		detect_range(tool, path, base, rec, rr + offsetof(struct cxls_rank_rec, pid), 4, s, r, 3);
		detect_range(tool, path, base, rec, rr + offsetof(struct cxls_rank_rec, boot_hash), 16, s,
			     r, 7);
		detect_range(tool, path, base, rec, rr + offsetof(struct cxls_rank_rec, sum), 4, s, r, 3);
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

static void flipper(const char *path, const char *tool, int nranks)
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
	/* damaged records are reported, once per run */
	if (tool) {
		int s;

		while ((s = live_slot(base, &sb)) < 0 && !atomic_load(&sh->stop))
			usleep(1000);
		if (s >= 0)
			detect(tool, path, base, &sb, s, nranks);
	}
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
	const char *path = getenv("CXLSHIM_POOL_PATH"), *tool = getenv("CXLSHIM_TOOL");
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
		flipper(path, tool, n);
	rc = launch_ranks(n, rank_main, &secs, (int)secs + 120);
	atomic_store(&sh->stop, 1);
	waitpid(fl, &st, 0);
	printf("bitflip: %llu flips, %llu ops ok, %llu wrong results, %llu clean op errors, "
	       "%llu failed inits, %llu attaches to a damaged superblock (%llu crashed), ranks %s, "
	       "flipper %s\n"
	       "bitflip: damaged records reported by cxlshim pool status: %llu, not reported: %llu, "
	       "outran by the job: %llu%s\n",
	       (unsigned long long)sh->flips, (unsigned long long)sh->ok,
	       (unsigned long long)sh->wrong, (unsigned long long)sh->errors,
	       (unsigned long long)sh->init_errors, (unsigned long long)sh->attach_checks,
	       (unsigned long long)sh->attach_crashes, rc ? "FAILED" : "ok",
	       WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "FAILED",
	       (unsigned long long)sh->detected, (unsigned long long)sh->undetected,
	       (unsigned long long)sh->outran, tool ? "" : " (CXLSHIM_TOOL not set: not checked)");
	return rc || sh->attach_crashes || !WIFEXITED(st) || WEXITSTATUS(st) || !sh->ok ||
	       !sh->attach_checks || sh->undetected || (tool && !sh->detected);
}
