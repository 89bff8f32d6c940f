/* coll_check.c - bit-exact AllGather / Broadcast through the NCCL API.
 *
 * A plain NCCL program: run it under LD_PRELOAD=libcxlshim.so and it
 * checks the pool path.  For one rank count it sweeps every datatype,
 * in-place and out-of-place, the counts given with -c and every root, and
 * compares every byte of every output with the pattern the peers wrote.
 * Output buffers are pre-filled with a poison byte, so a chunk that is
 * never written is caught too.
 *
 *   coll_check -n NRANKS [-C COLLS] [-c BYTES,...] [-t TYPES] [-r ROOTS] [-i ITERS] [-m]
 *              [-l MS]
 * COLLS: comma list of allgather, broadcast, gather, scatter, alltoall
 * (default: all of them).  -m: AlltoAll's in-place pass runs in place on
 * odd ranks only and its out-of-place pass on even ranks only (ranks that
 * differ must still agree on the exchange).  -l: the last rank calls each
 * collective MS milliseconds late, so a root that need not wait for it
 * (Broadcast, Scatter) runs ahead into the next op while it has read
 * nothing: flow control must hold the root back before a slot it has not
 * read is written again.
 * BYTES are bytes per rank (rounded down to whole elements; "odd" means
 * 3 elements + 1, "1" one element).  Exit status 0 iff every check passed.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/device.h"
#include "../common/launch.h"

#define POISON 0xee

enum { COLL_ALLGATHER = 1, COLL_BROADCAST = 2, COLL_GATHER = 4, COLL_SCATTER = 8,
       COLL_ALLTOALL = 16, COLL_ALL = 31 };
static const char *coll_names[] = { "allgather", "broadcast", "gather", "scatter", "alltoall" };

struct opts {
	int nranks;
	unsigned colls;      /* COLL_* bits */
	size_t counts[16];   /* bytes per rank; 0 = zero count, 1 = one element */
	int ncounts;
	int types[12];
	int ntypes;
	int max_roots;       /* roots tried: min(nranks, max_roots) */
	int iters;
	int mixed;           /* -m */
	int lag_ms;          /* -l */
};

static const size_t type_size[12] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };
static const char *type_name[12] = { "int8",  "uint8",  "int32", "uint32",
				     "int64", "uint64", "half",  "float",
				     "double", "bf16",  "e4m3",  "e5m2" };

struct bufs {
	char *send, *recv;   /* device */
	char *host, *expect; /* host */
	size_t cap;          /* bytes of recv */
};

static int failures, checks;

#define CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
	exit(3); } } while (0)

/* Per-rank byte stream from a 64-bit xorshift: cheap enough to fill and
 * check gigabytes, and different for every (seed, rank, offset). */
static void fill(char *p, size_t n, uint64_t seed, int rank)
{
	uint64_t x = (seed * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(rank + 1) << 40) ^ 0x5bd1e995;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	for (; i < n; i++)
		p[i] = (char)(x >> (8 * (i & 7)));
}

static void report(int ok, const char *what, int rank, int nranks, int type, size_t count,
		   int root, int inplace, size_t bad)
{
	checks++;
	if (ok)
		return;
	failures++;
	printf("FAIL %s rank %d/%d type %s count %zu root %d %s: first bad byte %zu\n", what,
	       rank, nranks, type_name[type], count, root, inplace ? "in-place" : "out-of-place",
	       bad);
}

static size_t first_diff(const char *a, const char *b, size_t n)
{
	if (!memcmp(a, b, n))
		return (size_t)-1;
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return i;
	return (size_t)-1;
}

static size_t elems_for(size_t bytes, int type)
{
	if (bytes == 1)
		return 1;
	if (bytes == 3)
		return 3 * 1 + 4; /* odd, and not a multiple of any chunk */
	return bytes / type_size[type];
}

static int check_allgather(ncclComm_t comm, cudaStream_t s, struct bufs *b, int rank,
			   int n, int type, size_t count, int inplace, uint64_t seed)
{
	size_t bytes = count * type_size[type], total = bytes * (size_t)n;
	const char *send;
	ncclResult_t r;

	memset(b->host, POISON, total);
	fill(b->host + (size_t)rank * bytes, bytes, seed, rank);
	CUDA(cudaMemcpy(b->recv, b->host, total, cudaMemcpyHostToDevice));
	CUDA(test_upload(b->send, b->host + (size_t)rank * bytes, bytes));
	send = inplace ? b->recv + (size_t)rank * bytes : b->send;
	r = ncclAllGather(send, b->recv, count, (ncclDataType_t)type, comm, s);
	if (r != ncclSuccess) {
		printf("FAIL ncclAllGather returned %s\n", ncclGetErrorString(r));
		failures++;
		return -1;
	}
	CUDA(cudaStreamSynchronize(s));
	CUDA(cudaMemcpy(b->host, b->recv, total, cudaMemcpyDeviceToHost));
	for (int p = 0; p < n; p++)
		fill(b->expect + (size_t)p * bytes, bytes, seed, p);
	size_t bad = first_diff(b->host, b->expect, total);
	report(bad == (size_t)-1, "AllGather", rank, n, type, count, -1, inplace, bad);
	return 0;
}

static int check_broadcast(ncclComm_t comm, cudaStream_t s, struct bufs *b, int rank, int n,
			   int type, size_t count, int root, int inplace, uint64_t seed, int bcast)
{
	size_t bytes = count * type_size[type];
	ncclResult_t r;

	memset(b->host, POISON, bytes);
	CUDA(cudaMemcpy(b->recv, b->host, bytes, cudaMemcpyHostToDevice));
	fill(b->host, bytes, seed, root);
	CUDA(test_upload(rank == root && inplace ? b->recv : b->send, b->host, bytes));
	if (bcast)
		r = ncclBcast(rank == root ? (inplace ? b->recv : b->send) : b->recv, count,
			      (ncclDataType_t)type, root, comm, s);
	else
		r = ncclBroadcast(inplace ? b->recv : b->send, b->recv, count, (ncclDataType_t)type,
				  root, comm, s);
	if (r != ncclSuccess) {
		printf("FAIL ncclBroadcast returned %s\n", ncclGetErrorString(r));
		failures++;
		return -1;
	}
	CUDA(cudaStreamSynchronize(s));
	if (bcast && rank == root && !inplace) {
		checks++; /* ncclBcast at the root: buffer is its own source */
		return 0;
	}
	CUDA(cudaMemcpy(b->host, b->recv, bytes, cudaMemcpyDeviceToHost));
	fill(b->expect, bytes, seed, root);
	size_t bad = first_diff(b->host, b->expect, bytes);
	report(bad == (size_t)-1, bcast ? "Bcast" : "Broadcast", rank, n, type, count, root,
	       inplace, bad);
	return 0;
}

/* Device buffer <- host pattern of `rank` for `bytes`, at offset `off`. */
static void put_pattern(char *dev, char *host, size_t bytes, uint64_t seed, int rank)
{
	fill(host, bytes, seed, rank);
	CUDA(test_upload(dev, host, bytes));
}

static void poison(char *dev, char *host, size_t bytes)
{
	memset(host, POISON, bytes);
	CUDA(test_upload(dev, host, bytes));
}

/* Compares `bytes` of device memory with the pattern of `rank`. */
static void expect(const char *what, const char *dev, struct bufs *b, size_t bytes,
		   uint64_t seed, int prank, int rank, int n, int type, size_t count, int root,
		   int inplace)
{
	CUDA(cudaMemcpy(b->host, dev, bytes, cudaMemcpyDeviceToHost));
	fill(b->expect, bytes, seed, prank);
	size_t bad = first_diff(b->host, b->expect, bytes);
	report(bad == (size_t)-1, what, rank, n, type, count, root, inplace, bad);
}

static int call_ok(ncclResult_t r, const char *what, cudaStream_t s)
{
	if (r != ncclSuccess) {
		printf("FAIL %s returned %s\n", what, ncclGetErrorString(r));
		failures++;
		return 0;
	}
	CUDA(cudaStreamSynchronize(s));
	return 1;
}

/* Gather: rank p's slice lands at p*bytes of the root's recvbuff. */
static void check_gather(ncclComm_t comm, cudaStream_t s, struct bufs *b, int rank, int n,
			 int type, size_t count, int root, int inplace, uint64_t seed)
{
	size_t bytes = count * type_size[type];
	char *send = rank == root && inplace ? b->recv + (size_t)root * bytes : b->send;

	poison(b->recv, b->host, bytes * n);
	put_pattern(send, b->host, bytes, seed, rank);
	if (!call_ok(ncclGather(send, b->recv, count, (ncclDataType_t)type, root, comm, s),
		     "ncclGather", s) || rank != root)
		return;
	for (int p = 0; p < n; p++)
		expect("Gather", b->recv + (size_t)p * bytes, b, bytes, seed, p, rank, n, type,
		       count, root, inplace);
}

/* Scatter: slice p of the root's sendbuff lands in rank p's recvbuff. */
static void check_scatter(ncclComm_t comm, cudaStream_t s, struct bufs *b, int rank, int n,
			  int type, size_t count, int root, int inplace, uint64_t seed)
{
	size_t bytes = count * type_size[type];
	char *recv = rank == root && inplace ? b->send + (size_t)root * bytes : b->recv;

	poison(b->recv, b->host, bytes);
	if (rank == root)
		for (int p = 0; p < n; p++)
			put_pattern(b->send + (size_t)p * bytes, b->host, bytes, seed, p);
	if (!call_ok(ncclScatter(b->send, recv, count, (ncclDataType_t)type, root, comm, s),
		     "ncclScatter", s))
		return;
	expect("Scatter", recv, b, bytes, seed, rank, rank, n, type, count, root, inplace);
}

/* AlltoAll: slice q of rank p's sendbuff lands at slice p of rank q.  In
 * place, both are recvbuff. */
static void check_alltoall(ncclComm_t comm, cudaStream_t s, struct bufs *b, int rank, int n,
			   int type, size_t count, int inplace, uint64_t seed)
{
	size_t bytes = count * type_size[type];
	char *send = inplace ? b->recv : b->send;

	poison(b->recv, b->host, bytes * n);
	for (int q = 0; q < n; q++)
		put_pattern(send + (size_t)q * bytes, b->host, bytes, seed + (uint64_t)q, rank);
	if (!call_ok(ncclAlltoAll(send, b->recv, count, (ncclDataType_t)type, comm, s),
		     "ncclAlltoAll", s))
		return;
	for (int p = 0; p < n; p++)
		expect("AlltoAll", b->recv + (size_t)p * bytes, b, bytes, seed + (uint64_t)rank, p,
		       rank, n, type, count, -1, inplace);
}

/* -l: the last rank's host calls of the collective coll come late (a
 * slow process). */
static void lag(const struct opts *o, unsigned coll, int rank, int n)
{
	if ((o->colls & coll) && o->lag_ms && rank == n - 1)
		usleep((useconds_t)o->lag_ms * 1000);
}

static void sweep(ncclComm_t comm, cudaStream_t s, struct bufs *b, const struct opts *o,
		  int rank, int n, int iter)
{
	for (int ci = 0; ci < o->ncounts; ci++) {
		for (int ti = 0; ti < o->ntypes; ti++) {
			int t = o->types[ti];
			size_t count = o->counts[ci] ? elems_for(o->counts[ci], t) : 0;
			uint64_t seed = ((uint64_t)iter << 48) ^ ((uint64_t)ci << 32) ^
					((uint64_t)t << 24);

			int nroots = n < o->max_roots ? n : o->max_roots;

			for (int inplace = 0; inplace < 2; inplace++) {
				lag(o, COLL_ALLTOALL, rank, n);
				if (o->colls & COLL_ALLTOALL)
					check_alltoall(comm, s, b, rank, n, t, count,
						       o->mixed ? inplace ^ !(rank % 2) : inplace,
						       seed ^ ((uint64_t)inplace << 40));
				lag(o, COLL_ALLGATHER, rank, n);
				if (o->colls & COLL_ALLGATHER)
					check_allgather(comm, s, b, rank, n, t, count, inplace,
							seed ^ (uint64_t)inplace);
				for (int root = 0; root < nroots; root++) {
					uint64_t rs = seed ^ (uint64_t)(root + 7) ^
						      ((uint64_t)inplace << 20);

					lag(o, COLL_BROADCAST, rank, n);
					if (o->colls & COLL_BROADCAST)
						check_broadcast(comm, s, b, rank, n, t, count, root,
								inplace, rs,
								(root + inplace + ci) % 3 == 0);
					lag(o, COLL_GATHER, rank, n);
					if (o->colls & COLL_GATHER)
						check_gather(comm, s, b, rank, n, t, count, root,
							     inplace, rs + 1);
					lag(o, COLL_SCATTER, rank, n);
					if (o->colls & COLL_SCATTER)
						check_scatter(comm, s, b, rank, n, t, count, root,
							      inplace, rs + 2);
				}
			}
		}
	}
}

static size_t max_bytes(const struct opts *o)
{
	size_t m = 64;

	for (int i = 0; i < o->ncounts; i++)
		if (o->counts[i] > m)
			m = o->counts[i];
	return m + 64;
}

static int rank_main(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const struct opts *o = arg;
	struct bufs b;
	ncclComm_t comm;
	cudaStream_t s;
	ncclResult_t r;

	CUDA(cudaSetDevice(test_device(rank)));
	b.cap = max_bytes(o) * (size_t)n;
	CUDA(cudaMalloc((void **)&b.send, b.cap));
	CUDA(cudaMalloc((void **)&b.recv, b.cap));
	b.host = malloc(b.cap);
	b.expect = malloc(b.cap);
	if (!b.host || !b.expect)
		return 3;
	CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	r = ncclCommInitRank(&comm, n, *id, rank);
	if (r != ncclSuccess) {
		printf("FAIL rank %d: ncclCommInitRank: %s\n", rank, ncclGetErrorString(r));
		return 2;
	}
	for (int it = 0; it < o->iters; it++)
		sweep(comm, s, &b, o, rank, n, it);
	r = ncclCommDestroy(comm);
	if (r != ncclSuccess) {
		printf("FAIL rank %d: ncclCommDestroy: %s\n", rank, ncclGetErrorString(r));
		failures++;
	}
	printf("rank %d/%d: %d checks, %d failed\n", rank, n, checks, failures);
	fflush(stdout);
	return failures ? 1 : 0;
}

static unsigned parse_colls(char *s)
{
	unsigned bits = 0;
	char *save = NULL;

	for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned i;

		for (i = 0; i < 5 && strcmp(t, coll_names[i]); i++)
			;
		if (i == 5) {
			fprintf(stderr, "unknown collective %s\n", t);
			exit(2);
		}
		bits |= 1u << i;
	}
	return bits;
}

static size_t parse_size(const char *s)
{
	char *end;
	size_t v = strtoull(s, &end, 0);

	if (*end == 'K' || *end == 'k')
		v <<= 10;
	else if (*end == 'M' || *end == 'm')
		v <<= 20;
	else if (!strcmp(s, "odd"))
		v = 3;
	return v;
}

static int parse_type(const char *s)
{
	for (int i = 0; i < 12; i++)
		if (!strcmp(s, type_name[i]))
			return i;
	return -1;
}

static void parse_list(char *s, void (*add)(struct opts *, const char *), struct opts *o)
{
	char *save = NULL;

	for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save))
		add(o, t);
}

static void add_count(struct opts *o, const char *t)
{
	if (o->ncounts < 16)
		o->counts[o->ncounts++] = parse_size(t);
}

static void add_type(struct opts *o, const char *t)
{
	int ty = parse_type(t);

	if (ty < 0) {
		fprintf(stderr, "unknown type %s\n", t);
		exit(2);
	}
	o->types[o->ntypes++] = ty;
}

int main(int argc, char **argv)
{
	struct opts o = { .nranks = 2, .colls = COLL_ALL, .max_roots = 64, .iters = 1 };
	int opt, rc;

	while ((opt = getopt(argc, argv, "n:C:c:t:r:i:ml:")) != -1) {
		switch (opt) {
		case 'n': o.nranks = atoi(optarg); break;
		case 'C':
			o.colls = parse_colls(optarg);
			break;
		case 'c': parse_list(optarg, add_count, &o); break;
		case 't':
			if (!strcmp(optarg, "all"))
				break;
			parse_list(optarg, add_type, &o);
			break;
		case 'r': o.max_roots = atoi(optarg); break;
		case 'i': o.iters = atoi(optarg); break;
		case 'm': o.mixed = 1; break;
		case 'l': o.lag_ms = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s -n NRANKS [-C COLL,..] "
					"[-c BYTES,..] [-t TYPES|all] [-r MAXROOTS] [-i ITERS] [-m] [-l MS]\n",
				argv[0]);
			return 2;
		}
	}
	if (!o.ncounts) {
		o.counts[0] = 0, o.counts[1] = 1, o.counts[2] = 3;
		o.counts[3] = 1 << 20;
		o.ncounts = 4;
	}
	if (!o.ntypes)
		for (int i = 0; i < 12; i++)
			o.types[o.ntypes++] = i;
	rc = launch_ranks(o.nranks, rank_main, &o, 900);
	printf("coll_check -n %d: %s\n", o.nranks, rc ? "FAILED" : "ok");
	return rc;
}
