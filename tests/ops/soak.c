/* soak.c - random collectives on NRANKS ranks, and checksummed streams on
 * 8 pooled socket connections (soak_sock.c), while a chaos loop SIGKILLs
 * ranks, socket clients and the socket server and starts replacements,
 * for SECONDS.
 *
 *   soak NRANKS SECONDS KILL_EVERY_MS [SOCKETS(0/1, default 1)]
 *
 * Every rank runs generations: rank 0 publishes a unique id, the ranks
 * make a communicator and run a pseudo-random sequence of collectives
 * (the same on every rank: drawn from the generation and op number) on
 * data derived from (generation, op, rank), each result checked exactly.
 * When a peer dies the survivors get an NCCL error (a dead peer, or the
 * op timeout), abort, and meet again in the next generation with the
 * replacement.  Fails when a rank crashes, a result is wrong, or one call
 * takes longer than the op timeout allows.
 *
 * Workloads are a table: the socket streams (a server and 8 clients, see
 * soak_sock.h) are two more entries with their own process counts, and
 * the chaos loop picks its victim among all processes alike.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "soak_sock.h"

#define MAX_RANKS 8
#define MAX_PROCS 16 /* per workload */
#define MAX_COUNT (64 * 1024)

struct shared {
	_Atomic uint32_t gen;
	_Atomic uint32_t stop;
	ncclUniqueId id[2];
	_Atomic uint64_t ok, wrong, errors, init_errors, kills, restarts, slow;
	_Atomic uint64_t max_call_ms;
};

static struct shared *sh;
static double op_limit_s; /* longest one call may take */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* Small integers, so that float sums are exact. */
static float val(uint32_t gen, uint32_t op, int rank, size_t i)
{
	return (float)(mix(((uint64_t)gen << 40) ^ ((uint64_t)op << 20) ^ ((uint64_t)rank << 56) ^ i) & 63);
}

enum { AG, AR, BC, RS, A2A, KINDS };

struct buffers {
	float *send, *recv, *h;
};

/* One collective of the sequence; -1 on an NCCL error, 1 wrong data. */
static int one_op(ncclComm_t comm, cudaStream_t s, struct buffers *b, int rank, int n,
		  uint32_t gen, uint32_t op)
{
	uint64_t r = mix(((uint64_t)gen << 32) | op);
	int kind = (int)(r % KINDS), root = (int)((r >> 8) % (uint64_t)n);
	size_t count = 1 + (size_t)((r >> 16) % (MAX_COUNT / MAX_RANKS)), in = count, out = count;
	ncclResult_t res, e = ncclSuccess;

	if (kind == AG)
		out = count * n;
	if (kind == RS || kind == A2A)
		in = count * n;
	if (kind == A2A)
		out = count * n;
	for (size_t i = 0; i < in; i++)
		b->h[i] = val(gen, op, rank, i);
	cudaMemcpy(b->send, b->h, in * sizeof(float), cudaMemcpyHostToDevice);
	switch (kind) {
	case AG: res = ncclAllGather(b->send, b->recv, count, ncclFloat, comm, s); break;
	case AR: res = ncclAllReduce(b->send, b->recv, count, ncclFloat, ncclSum, comm, s); break;
	case BC: res = ncclBroadcast(b->send, b->recv, count, ncclFloat, root, comm, s); break;
	case RS: res = ncclReduceScatter(b->send, b->recv, count, ncclFloat, ncclSum, comm, s); break;
	default: res = ncclAlltoAll(b->send, b->recv, count, ncclFloat, comm, s); break;
	}
	if (res == ncclSuccess)
		cudaStreamSynchronize(s);
	ncclCommGetAsyncError(comm, &e);
	if (res != ncclSuccess || e != ncclSuccess)
		return -1;
	cudaMemcpy(b->h, b->recv, out * sizeof(float), cudaMemcpyDeviceToHost);
	for (size_t i = 0; i < out; i++) {
		float want = 0;

		if (kind == AG)
			want = val(gen, op, (int)(i / count), i % count);
		else if (kind == BC)
			want = val(gen, op, root, i);
		else if (kind == A2A)
			want = val(gen, op, (int)(i / count), (size_t)rank * count + i % count);
		else
			for (int q = 0; q < n; q++)
				want += val(gen, op, q, kind == RS ? (size_t)rank * count + i : i);
		if (b->h[i] != want) {
			fprintf(stderr, "gen %u op %u kind %d: element %zu is %g, want %g\n", gen, op, kind,
				i, b->h[i], want);
			return 1;
		}
	}
	return 0;
}

static uint32_t next_gen(int rank, uint32_t last)
{
	double t0 = now_s();
	uint32_t g;

	if (rank == 0) {
		g = (last > atomic_load(&sh->gen) ? last : atomic_load(&sh->gen)) + 1;
		if (ncclGetUniqueId(&sh->id[g % 2]) != ncclSuccess)
			return 0;
		atomic_store(&sh->gen, g);
		return g;
	}
	while ((g = atomic_load(&sh->gen)) <= last && !atomic_load(&sh->stop) && now_s() - t0 < 60)
		usleep(1000);
	return g > last ? g : 0;
}

static void note_call(double t0)
{
	uint64_t ms = (uint64_t)((now_s() - t0) * 1000), cur = atomic_load(&sh->max_call_ms);

	while (ms > cur && !atomic_compare_exchange_weak(&sh->max_call_ms, &cur, ms))
		;
	if (now_s() - t0 > op_limit_s)
		atomic_fetch_add(&sh->slow, 1);
}

static int collective_rank(int rank, int n)
{
	struct buffers b = { NULL, NULL, malloc(MAX_COUNT * sizeof(float)) };
	uint32_t g = rank ? atomic_load(&sh->gen) : 0;
	cudaStream_t s;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	cudaSetDevice(0);
	if (!b.h || cudaStreamCreate(&s) != cudaSuccess ||
	    cudaMalloc((void **)&b.send, MAX_COUNT * sizeof(float)) != cudaSuccess ||
	    cudaMalloc((void **)&b.recv, MAX_COUNT * sizeof(float)) != cudaSuccess)
		return 1;
	while (!atomic_load(&sh->stop)) {
		ncclComm_t comm;
		uint32_t op = 0;
		int rc = 0;
		double t0;

		g = next_gen(rank, g);
		if (!g)
			break;
		t0 = now_s();
		if (ncclCommInitRank(&comm, n, sh->id[g % 2], rank) != ncclSuccess) {
			note_call(t0);
			atomic_fetch_add(&sh->init_errors, 1);
			continue;
		}
		while (!atomic_load(&sh->stop)) {
			t0 = now_s();
			rc = one_op(comm, s, &b, rank, n, g, op++);
			note_call(t0);
			if (rc)
				break;
			atomic_fetch_add(&sh->ok, 1);
		}
		atomic_fetch_add(rc > 0 ? &sh->wrong : rc < 0 ? &sh->errors : &sh->ok, rc ? 1 : 0);
		if (rc || atomic_load(&sh->stop))
			ncclCommAbort(comm);
		cudaStreamSynchronize(s);
	}
	return 0;
}

/* ---- workloads and chaos ------------------------------------------------ */

struct workload {
	const char *name;
	int nprocs;
	int (*fn)(int idx, int nprocs);
};

static pid_t spawn(const struct workload *w, int idx)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(w->fn(idx, w->nprocs));
	return pid;
}

struct chaos {
	const struct workload *loads;
	int nloads, total, crashed;
	pid_t pids[4][MAX_PROCS];
};

/* A process that ended by itself is a crash; it is replaced. */
static void reap(struct chaos *x, pid_t pid, int st)
{
	for (int w = 0; w < x->nloads; w++)
		for (int i = 0; i < x->loads[w].nprocs; i++) {
			if (x->pids[w][i] != pid)
				continue;
			fprintf(stderr, "%s %d (pid %d) ended on its own: %s %d\n", x->loads[w].name,
				i, pid, WIFSIGNALED(st) ? "signal" : "status",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			x->crashed++;
			x->pids[w][i] = spawn(&x->loads[w], i);
		}
}

/* Kills one process drawn among all workloads' and starts its successor. */
static void strike(struct chaos *x)
{
	int v = rand() % x->total, w = 0, st;

	while (v >= x->loads[w].nprocs)
		v -= x->loads[w++].nprocs;
	kill(x->pids[w][v], SIGKILL);
	waitpid(x->pids[w][v], &st, 0);
	atomic_fetch_add(&sh->kills, 1);
	x->pids[w][v] = spawn(&x->loads[w], v);
	atomic_fetch_add(&sh->restarts, 1);
}

/* Every process must stop by itself within the limit once told to. */
static void stop_all(struct chaos *x)
{
	int st;

	atomic_store(&sh->stop, 1);
	for (int w = 0; w < x->nloads; w++)
		for (int i = 0; i < x->loads[w].nprocs; i++) {
			pid_t p = x->pids[w][i];
			double t0 = now_s();

			while (waitpid(p, &st, WNOHANG) == 0 && now_s() - t0 < op_limit_s + 10)
				usleep(10000);
			if (waitpid(p, &st, WNOHANG) == 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
				kill(p, SIGKILL);
				waitpid(p, &st, 0);
				fprintf(stderr, "%s %d did not stop cleanly\n", x->loads[w].name, i);
				x->crashed++;
			}
		}
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4, socks = argc > 4 ? atoi(argv[4]) : 1;
	double secs = argc > 2 ? atof(argv[2]) : 30, every = (argc > 3 ? atof(argv[3]) : 2000) / 1e3;
	const char *tmo = getenv("CXLSHIM_TIMEOUT_OP_MS");
	struct workload loads[] = {
		{ "collectives rank", n, collective_rank },
		{ "socket server", 1, soak_sock_server },
		{ "socket client", SOCK_CONNS, soak_sock_client },
	};
	struct chaos x = { .loads = loads, .nloads = socks ? 3 : 1 };
	double end, next_kill;
	int sock_failed = 0;

	if (n < 2 || n > MAX_RANKS) {
		fprintf(stderr, "usage: %s NRANKS(2..8) SECONDS KILL_EVERY_MS [SOCKETS]\n", argv[0]);
		return 2;
	}
	/* a call may wait one op timeout for a peer, plus the abort and slack */
	op_limit_s = (tmo ? atof(tmo) / 1e3 : 60) * 2 + 3;
	setvbuf(stdout, NULL, _IOLBF, 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof(*sh));
	if (socks && soak_sock_init(&sh->stop, op_limit_s)) {
		fprintf(stderr, "soak: no port for the socket server\n");
		return 1;
	}
	srand((unsigned)getpid());
	for (int w = 0; w < x.nloads; w++) {
		for (int i = 0; i < loads[w].nprocs; i++)
			x.pids[w][i] = spawn(&loads[w], i);
		x.total += loads[w].nprocs;
	}
	end = now_s() + secs;
	next_kill = now_s() + every;
	while (now_s() < end && x.crashed < 10) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);

		if (pid > 0) {
			reap(&x, pid, st);
			continue;
		}
		if (now_s() >= next_kill) {
			strike(&x);
			next_kill = now_s() + every * (0.5 + (double)rand() / RAND_MAX);
		}
		usleep(10000);
	}
	stop_all(&x);
	printf("soak: %.0f s, %d ranks, %llu kills: %llu ops ok, %llu wrong, %llu clean errors, "
	       "%llu failed inits, %llu calls over %.1f s (longest %llu ms), %d crashed\n",
	       secs, n, (unsigned long long)sh->kills, (unsigned long long)sh->ok,
	       (unsigned long long)sh->wrong, (unsigned long long)sh->errors,
	       (unsigned long long)sh->init_errors, (unsigned long long)sh->slow, op_limit_s,
	       (unsigned long long)sh->max_call_ms, x.crashed);
	if (socks)
		sock_failed = soak_sock_report(stdout);
	return x.crashed || sh->wrong || sh->slow || !sh->ok || sock_failed;
}
