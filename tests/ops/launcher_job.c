/* launcher_job.c - one rank of an NCCL job, started by a real launcher.
 *
 *   launcher_job DIR [TIMEOUT_S]
 *
 * Unlike the other test programs it forks nothing: torchrun, srun or
 * mpirun start one process per rank, and the process takes its rank and
 * the job size from the variables that launcher sets.  Rank 0 gets the
 * unique id and publishes it as DIR/nccl-id; the others poll for it (up to
 * TIMEOUT_S, 60 by default).  DIR must be fresh for every job: rank 0
 * refuses to replace an id an earlier job left there.
 *
 * Every rank then runs an AllGather, a Broadcast and an AllReduce, checks
 * the results, checks with cxlshim_comm_stats() that each was one
 * collective on the pool and that its bytes went through the pool, and
 * prints one line:
 *
 *   launcher_job: srun rank 1/3 local 1 pid 4242: ok, 3 pool ops, 98304 B written, 294912 B read
 *
 * Exit status: 0 when every check held, 2 when no launcher variables are
 * set or they are inconsistent, 1 otherwise.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cxlshim.h"

/* divisible by 2, 3 and 4: every rank gets a whole share of an AllReduce */
#define COUNT	(12 * 1024)
#define BYTES	(COUNT * sizeof(float))
#define POLL_US 20000
#define ID_FILE "nccl-id"

/* What each launcher tells its processes; the first whose rank variable
 * is set wins (mpirun's children of an srun allocation see both). */
static const struct launcher {
	const char *name;
	const char *rank, *size, *local;
} launchers[] = {
	{"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
	{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
	{"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

struct job {
	const char *launcher;
	int rank, size, local;
	ncclComm_t comm;
	cudaStream_t stream;
};

static int env_int(const char *name, int *out)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > INT_MAX)
		return -1;
	*out = (int)v;
	return 0;
}

/* 0, or -1 with the reason printed: no launcher, or numbers that make no job. */
static int from_launcher(struct job *j)
{
	const struct launcher *l = NULL;

	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]) && !l; i++)
		if (getenv(launchers[i].rank))
			l = &launchers[i];
	if (!l) {
		fprintf(stderr, "launcher_job: no launcher environment: want RANK/WORLD_SIZE "
				"(torchrun), SLURM_PROCID/SLURM_NTASKS (srun) or "
				"OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (mpirun)\n");
		return -1;
	}
	j->launcher = l->name;
	if (env_int(l->rank, &j->rank) || env_int(l->size, &j->size) || j->size < 1 ||
	    j->rank >= j->size) {
		fprintf(stderr, "launcher_job: %s: %s=%s %s=%s is not a rank of a job\n", l->name,
			l->rank, getenv(l->rank), l->size,
			getenv(l->size) ? getenv(l->size) : "(unset)");
		return -1;
	}
	if (env_int(l->local, &j->local))
		j->local = 0; /* a launcher that does not say runs one rank per host */
	return 0;
}

/* Rank 0: the id goes to DIR/nccl-id.tmp, then is renamed into place, so
 * a reader never sees half of it; RENAME_NOREPLACE keeps an id an earlier
 * job left from being taken for this one's. */
static int publish_id(const char *dir, const ncclUniqueId *id)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	int fd, ok;

	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, ID_FILE);
	snprintf(path, sizeof(path), "%s/%s", dir, ID_FILE);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		goto fail;
	ok = write(fd, id, sizeof(*id)) == (ssize_t)sizeof(*id);
	ok &= close(fd) == 0;
	if (!ok || renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE)) {
		unlink(tmp);
		goto fail;
	}
	return 0;
fail:
	fprintf(stderr, "launcher_job: rank 0: cannot publish %s: %s%s\n", path, strerror(errno),
		errno == EEXIST ? " (left by an earlier job: use a fresh directory)" : "");
	return -1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The other ranks: poll, since DIR may be on a file system shared by hosts. */
static int read_id(const char *dir, int rank, int timeout_s, ncclUniqueId *id)
{
	char path[PATH_MAX];
	double deadline = now_s() + timeout_s;

	snprintf(path, sizeof(path), "%s/%s", dir, ID_FILE);
	for (;;) {
		int fd = open(path, O_RDONLY);

		if (fd >= 0) {
			ssize_t n = read(fd, id, sizeof(*id));

			close(fd);
			if (n == (ssize_t)sizeof(*id))
				return 0;
		}
		if (now_s() >= deadline)
			break;
		usleep(POLL_US);
	}
	fprintf(stderr, "launcher_job: rank %d: no id in %s after %d s\n", rank, path, timeout_s);
	return -1;
}

static float *dev_floats(size_t n, float v)
{
	float *p = NULL, *h = malloc(n * sizeof(float));

	if (h && cudaMalloc((void **)&p, n * sizeof(float)) == cudaSuccess) {
		for (size_t i = 0; i < n; i++)
			h[i] = v;
		if (cudaMemcpy(p, h, n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) {
			cudaFree(p);
			p = NULL;
		}
	}
	free(h);
	return p;
}

/* 1 when element i of the device buffer is want(i) for every i. */
static int holds(const char *what, const float *dev, size_t n, float (*want)(size_t, int), int size)
{
	float *h = malloc(n * sizeof(float));
	int ok = h && cudaMemcpy(h, dev, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;

	for (size_t i = 0; ok && i < n; i++)
		if (h[i] != want(i, size)) {
			fprintf(stderr, "launcher_job: %s: element %zu is %g, want %g\n", what, i,
				h[i], want(i, size));
			ok = 0;
		}
	free(h);
	return ok;
}

/* rank r contributes r + 1 everywhere: 0 would hide a missing rank */
static float gathered(size_t i, int size)
{
	(void)size;
	return (float)(i / COUNT + 1);
}

static float from_root(size_t i, int size)
{
	(void)i;
	(void)size;
	return 1.0f;
}

static float summed(size_t i, int size)
{
	(void)i;
	return (float)(size * (size + 1) / 2);
}

/* What one collective must have moved through the pool, at least. */
struct pool_min {
	size_t written, read;
};

/* One more op on the pool, and at least `min` bytes each way. */
static int through_pool(const struct job *j, const char *what,
			const struct cxlshim_comm_stats *before, struct pool_min min)
{
	struct cxlshim_comm_stats now;

	if (cxlshim_comm_stats(j->comm, &now)) {
		fprintf(stderr, "launcher_job: %s: not a pool communicator\n", what);
		return 0;
	}
	if (now.ops != before->ops + 1 || now.pool_written - before->pool_written < min.written ||
	    now.pool_read - before->pool_read < min.read) {
		fprintf(stderr,
			"launcher_job: %s: %llu pool ops, %llu B written, %llu B read; "
			"want 1, >= %zu, >= %zu\n",
			what, now.ops - before->ops, now.pool_written - before->pool_written,
			now.pool_read - before->pool_read, min.written, min.read);
		return 0;
	}
	return 1;
}

/* Every rank writes its share and reads everyone else's. */
static int allgather(const struct job *j)
{
	size_t total = (size_t)COUNT * j->size;
	struct pool_min min = {BYTES, BYTES * (j->size - 1)};
	float *send = dev_floats(COUNT, (float)(j->rank + 1)), *recv = dev_floats(total, -1);
	struct cxlshim_comm_stats st;
	int ok = send && recv && cxlshim_comm_stats(j->comm, &st) == 0 &&
		 ncclAllGather(send, recv, COUNT, ncclFloat, j->comm, j->stream) == ncclSuccess &&
		 cudaStreamSynchronize(j->stream) == cudaSuccess &&
		 holds("AllGather", recv, total, gathered, j->size) &&
		 through_pool(j, "AllGather", &st, min);

	cudaFree(send);
	cudaFree(recv);
	return ok;
}

/* The root writes the message, every other rank reads it. */
static int broadcast(const struct job *j)
{
	struct pool_min min = {j->rank == 0 && j->size > 1 ? BYTES : 0, j->rank ? BYTES : 0};
	float *buf = dev_floats(COUNT, j->rank == 0 ? 1.0f : -1.0f);
	struct cxlshim_comm_stats st;
	int ok = buf && cxlshim_comm_stats(j->comm, &st) == 0 &&
		 ncclBroadcast(buf, buf, COUNT, ncclFloat, 0, j->comm, j->stream) == ncclSuccess &&
		 cudaStreamSynchronize(j->stream) == cudaSuccess &&
		 holds("Broadcast", buf, COUNT, from_root, j->size) &&
		 through_pool(j, "Broadcast", &st, min);

	cudaFree(buf);
	return ok;
}

/* Whatever the scheme, a rank must put out its share of the sum and read
 * the other ranks' contributions to it: (n-1)/n of the message at least. */
static int allreduce(const struct job *j)
{
	size_t share = BYTES / j->size;
	struct pool_min min = {j->size > 1 ? share : 0, share * (j->size - 1)};
	float *buf = dev_floats(COUNT, (float)(j->rank + 1));
	struct cxlshim_comm_stats st;
	int ok = buf && cxlshim_comm_stats(j->comm, &st) == 0 &&
		 ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, j->comm, j->stream) ==
			 ncclSuccess &&
		 cudaStreamSynchronize(j->stream) == cudaSuccess &&
		 holds("AllReduce", buf, COUNT, summed, j->size) &&
		 through_pool(j, "AllReduce", &st, min);

	cudaFree(buf);
	return ok;
}

static int join(struct job *j, const char *dir, int timeout_s)
{
	ncclUniqueId id;
	ncclResult_t r;
	int ndev = 0;

	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1 ||
	    cudaSetDevice(j->local % ndev) != cudaSuccess ||
	    cudaStreamCreate(&j->stream) != cudaSuccess) {
		fprintf(stderr, "launcher_job: rank %d: no CUDA device (%d)\n", j->rank, ndev);
		return -1;
	}
	if (j->rank == 0) {
		r = ncclGetUniqueId(&id);
		if (r != ncclSuccess) {
			fprintf(stderr, "launcher_job: ncclGetUniqueId: %s\n",
				ncclGetErrorString(r));
			return -1;
		}
		if (publish_id(dir, &id))
			return -1;
	} else if (read_id(dir, j->rank, timeout_s, &id)) {
		return -1;
	}
	r = ncclCommInitRank(&j->comm, j->size, id, j->rank);
	if (r != ncclSuccess) {
		fprintf(stderr, "launcher_job: rank %d: ncclCommInitRank: %s\n", j->rank,
			ncclGetErrorString(r));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct job j = {0};
	struct cxlshim_comm_stats st = {0};
	int timeout_s = argc > 2 ? atoi(argv[2]) : 60, ok;

	if (argc < 2 || argc > 3 || timeout_s <= 0) {
		fprintf(stderr,
			"usage: launcher_job DIR [TIMEOUT_S]  (one rank; run by a launcher)\n");
		return 2;
	}
	if (from_launcher(&j))
		return 2;
	if (!CXLSHIM_LOADED()) {
		fprintf(stderr,
			"launcher_job: rank %d: libcxlshim.so is not loaded "
			"(start it with cxlshim run)\n",
			j.rank);
		return 1;
	}
	if (join(&j, argv[1], timeout_s))
		return 1;
	ok = allgather(&j) && broadcast(&j) && allreduce(&j) &&
	     cxlshim_comm_stats(j.comm, &st) == 0;
	ok &= ncclCommDestroy(j.comm) == ncclSuccess;
	printf("launcher_job: %s rank %d/%d local %d pid %d: %s, %llu pool ops, %llu B written, "
	       "%llu B read\n",
	       j.launcher, j.rank, j.size, j.local, (int)getpid(), ok ? "ok" : "FAILED", st.ops,
	       st.pool_written, st.pool_read);
	return ok ? 0 : 1;
}
