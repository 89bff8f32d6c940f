/* reduce_check.c - Reduce, AllReduce and ReduceScatter through the NCCL
 * API, checked bit for bit against a reference written independently of
 * the library: half via the compiler's _Float16, fp8 by searching the
 * nearest of the 256 codes, and the documented fold order (a slice is
 * reduced by its owner, in the order owner, owner-1, owner-2, ...; Reduce
 * in the order root, root+1, ...; AllReduce in CCCL's direct scheme in the
 * order 0, 1, ..., N-1 for every element).
 *
 *   reduce_check -n NRANKS [-C reduce,allreduce,reducescatter] [-c COUNTS]
 *                [-t TYPES] [-o OPS] [-r MAXROOTS] [-D BYTES]
 *
 * -D: AllReduce of up to BYTES runs in the direct scheme (the run sets
 * nccl.allreduce_direct_max alike).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/device.h"
#include "../common/launch.h"
#include "cxlshim.h"

enum { C_REDUCE = 1, C_ALLREDUCE = 2, C_REDUCESCATTER = 4 };
enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, OP_PMS_HOST, OP_PMS_DEV, NOPS };
static const char *op_names[NOPS] = { "sum", "prod", "max", "min", "avg", "premulsum-host",
				      "premulsum-dev" };
static const size_t tsize[12] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };
static const char *tname[12] = { "int8", "uint8", "int32", "uint32", "int64", "uint64",
				 "half", "float", "double", "bf16", "e4m3", "e5m2" };

struct opts {
	int n, colls, max_roots;
	size_t counts[8];
	int ncounts, types[12], ntypes, ops[NOPS], nops;
};

static int checks, failures;
static size_t direct_max; /* -D: AllReduce up to this size runs in the direct scheme */

#define CUDA(x) do { if ((x) != cudaSuccess) { printf("FAIL %s:%d %s\n", __FILE__, \
	__LINE__, #x); exit(3); } } while (0)

/* ---- reference arithmetic (independent of core/coll/arith.c) --------------- */

static double fp8_value(int e4m3, unsigned code)
{
	int eb = e4m3 ? 4 : 5, mb = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
	unsigned e = (code >> mb) & ((1u << eb) - 1), m = code & ((1u << mb) - 1);
	double v = e ? ldexp(1.0 + m / (double)(1 << mb), (int)e - bias) :
		       ldexp(m / (double)(1 << mb), 1 - bias);

	return code & 0x80 ? -v : v;
}

static int fp8_finite(int e4m3, unsigned code)
{
	unsigned mag = code & 0x7f;

	return e4m3 ? mag != 0x7f : mag < 0x7c;
}

/* Nearest finite code, ties to the even code, saturating. */
static uint8_t fp8_encode(int e4m3, double x)
{
	unsigned best = 0;
	double bestd = INFINITY;

	for (unsigned c = 0; c < 256; c++) {
		double d;

		if (!fp8_finite(e4m3, c))
			continue;
		d = fabs(fp8_value(e4m3, c) - x);
		if (d < bestd || (d == bestd && !(c & 1) && signbit(fp8_value(e4m3, c)) ==
							   signbit(x))) {
			best = c;
			bestd = d;
		}
	}
	return (uint8_t)best;
}

static double bf16_round(double v)
{
	float f = (float)v;
	uint32_t u;

	memcpy(&u, &f, 4);
	u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
	memcpy(&f, &u, 4);
	return f;
}

static double round_to(int t, double v)
{
	switch (t) {
	case 6: return (double)(_Float16)(float)v;
	case 7: return (float)v;
	case 9: return bf16_round(v);
	case 10: return fp8_value(1, fp8_encode(1, v));
	case 11: return fp8_value(0, fp8_encode(0, v));
	default: return v;
	}
}

static double load(const void *p, size_t i, int t)
{
	switch (t) {
	case 0: return ((const int8_t *)p)[i];
	case 1: return ((const uint8_t *)p)[i];
	case 2: return ((const int32_t *)p)[i];
	case 3: return ((const uint32_t *)p)[i];
	case 4: return (double)((const int64_t *)p)[i];
	case 5: return (double)((const uint64_t *)p)[i];
	case 6: return ((const _Float16 *)p)[i];
	case 7: return ((const float *)p)[i];
	case 8: return ((const double *)p)[i];
	case 9: { uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16; float f;
		memcpy(&f, &u, 4); return f; }
	default: return fp8_value(t == 10, ((const uint8_t *)p)[i]);
	}
}

static void store(void *p, size_t i, int t, double v)
{
	switch (t) {
	case 0: ((int8_t *)p)[i] = (int8_t)(int64_t)v; break;
	case 1: ((uint8_t *)p)[i] = (uint8_t)(uint64_t)(int64_t)v; break;
	case 2: ((int32_t *)p)[i] = (int32_t)(int64_t)v; break;
	case 3: ((uint32_t *)p)[i] = (uint32_t)(uint64_t)(int64_t)v; break;
	case 4: ((int64_t *)p)[i] = (int64_t)v; break;
	case 5: ((uint64_t *)p)[i] = (uint64_t)(int64_t)v; break;
	case 6: ((_Float16 *)p)[i] = (_Float16)(float)v; break;
	case 7: ((float *)p)[i] = (float)v; break;
	case 8: ((double *)p)[i] = v; break;
	case 9: { float f = (float)bf16_round(v); uint32_t u; memcpy(&u, &f, 4);
		((uint16_t *)p)[i] = (uint16_t)(u >> 16); break; }
	default: ((uint8_t *)p)[i] = fp8_encode(t == 10, v); break;
	}
}

static int is_int(int t)
{
	return t <= 5;
}

/* Small values keep every type exact enough and integer products in range:
 * integers in [-3, 3] (unsigned: [0, 3]), floats in quarters of [-2, 2]. */
static double value(uint64_t seed, int rank, size_t i, int t)
{
	uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(rank + 1) * 0xbf58476d1ce4e5b9ull ^ i;

	x ^= x >> 29;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 32;
	if (is_int(t))
		return t % 2 ? (double)(x % 4) : (double)(int)(x % 7) - 3;
	return ((double)(int)(x % 17) - 8) * 0.25;
}

/* The value rank r contributes, pre-multiplied where the op says so. */
static double input(int t, int op, double x, int n, double scalar)
{
	if (is_int(t))
		return op == OP_PMS_HOST || op == OP_PMS_DEV ? x * scalar : x;
	if (op == OP_AVG)
		return round_to(t, x * round_to(t, 1.0 / n));
	if (op == OP_PMS_HOST || op == OP_PMS_DEV)
		return round_to(t, x * round_to(t, scalar));
	return x;
}

static double fold(int t, int op, double acc, double x)
{
	double v;

	switch (op) {
	case OP_PROD: v = acc * x; break;
	case OP_MAX: v = acc > x ? acc : x; break;
	case OP_MIN: v = acc < x ? acc : x; break;
	default: v = acc + x; break;
	}
	if (is_int(t)) { /* wrap like the element type */
		char tmp[8];
		store(tmp, 0, t, v);
		return load(tmp, 0, t);
	}
	return round_to(t, v);
}

/* PreMulSum scalars differ per rank, as NCCL allows: each rank's input is
 * multiplied by its own. */
static double rank_scalar(double base, int r)
{
	return base * (1 + r % 2);
}

/* Reduction of element i over ranks first, first+dir, first+2dir, ... */
static double expected(uint64_t seed, size_t i, int t, int op, int n, int first, int dir,
		       double scalar)
{
	double acc = input(t, op, value(seed, first, i, t), n, rank_scalar(scalar, first));

	for (int s = 1; s < n; s++) {
		int r = ((first + dir * s) % n + n) % n;

		acc = fold(t, op, acc, input(t, op, value(seed, r, i, t), n, rank_scalar(scalar, r)));
	}
	if (is_int(t) && op == OP_AVG)
		acc = (double)((int64_t)acc / n);
	return acc;
}

/* ---- the checks ---------------------------------------------------------- */

struct ctx {
	int rank, n;
	ncclComm_t comm;
	cudaStream_t s;
	char *send, *recv, *host, *dscalar;
};

static ncclRedOp_t make_op(struct ctx *x, int op, int t, double *scalar)
{
	static const ncclRedOp_t builtin[] = { ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg };
	char buf[8];
	ncclRedOp_t r;

	if (op < OP_PMS_HOST)
		return builtin[op];
	*scalar = is_int(t) ? 1 : 0.5; /* base; rank r uses rank_scalar() */
	store(buf, 0, t, rank_scalar(*scalar, x->rank));
	if (op == OP_PMS_DEV) {
		CUDA(test_upload(x->dscalar, buf, tsize[t]));
		if (ncclRedOpCreatePreMulSum(&r, x->dscalar, (ncclDataType_t)t, ncclScalarDevice,
					     x->comm) != ncclSuccess)
			return (ncclRedOp_t)-1;
		return r;
	}
	if (ncclRedOpCreatePreMulSum(&r, buf, (ncclDataType_t)t, ncclScalarHostImmediate,
				     x->comm) != ncclSuccess)
		return (ncclRedOp_t)-1;
	store(buf, 0, t, 99); /* immediate: later changes must not matter */
	return r;
}

static void verify(struct ctx *x, const char *what, const char *dev, size_t count, size_t first_i,
		   uint64_t seed, int t, int op, int first, int dir, double scalar,
		   size_t slice, int inplace)
{
	size_t bad = (size_t)-1;

	CUDA(cudaMemcpy(x->host, dev, count * tsize[t], cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < count && bad == (size_t)-1; i++) {
		size_t gi = first_i + i;
		int owner = slice ? (int)(gi / slice) : first;
		char want[8];

		store(want, 0, t, expected(seed, gi, t, op, x->n, owner, dir, scalar));
		if (memcmp(x->host + i * tsize[t], want, tsize[t]))
			bad = i;
	}
	checks++;
	if (bad != (size_t)-1) {
		failures++;
		printf("FAIL %s rank %d/%d %s %s count %zu %s: element %zu is %g, want %g\n", what,
		       x->rank, x->n, tname[t], op_names[op], count,
		       inplace ? "in-place" : "out-of-place", bad, load(x->host, bad, t),
		       expected(seed, first_i + bad, t, op, x->n,
				slice ? (int)((first_i + bad) / slice) : first, dir, scalar));
	}
}

static void fill(struct ctx *x, char *dev, size_t count, size_t first_i, uint64_t seed, int t)
{
	for (size_t i = 0; i < count; i++)
		store(x->host, i, t, value(seed, x->rank, first_i + i, t));
	CUDA(test_upload(dev, x->host, count * tsize[t]));
}

static int ok(ncclResult_t r, const char *what)
{
	if (r == ncclSuccess)
		return 1;
	printf("FAIL %s returned %s\n", what, ncclGetErrorString(r));
	failures++;
	return 0;
}

/* Pool reads of one AllReduce of S bytes per rank: CCCL's direct scheme
 * folds all n published buffers (n x S); ReduceScatter + AllGather folds
 * n-1 slices and fetches n-1, 2(n-1)/n x S, which the issue bounds by
 * 2.2 x S (slice rounding aside: checked from 64 elements per rank). */
static int read_volume_ok(unsigned long long got, size_t bytes, size_t n, int direct)
{
	if (direct)
		return got == (n > 1 ? n * bytes : got);
	if (bytes < 64 * n * 8)
		return got <= 2 * bytes + 2 * n * 8;
	return (double)got <= 2.2 * (double)bytes;
}

static void one(struct ctx *x, int coll, int t, int op, size_t count, int root, int inplace,
		uint64_t seed)
{
	double scalar = 1;
	ncclRedOp_t rop = make_op(x, op, t, &scalar);
	size_t n = (size_t)x->n, es = tsize[t];

	if ((int)rop == -1) {
		failures++;
		printf("FAIL ncclRedOpCreatePreMulSum %s\n", tname[t]);
		return;
	}
	if (coll == C_REDUCE) {
		char *recv = inplace && x->rank == root ? x->send : x->recv;

		fill(x, x->send, count, 0, seed, t);
		if (ok(ncclReduce(x->send, recv, count, (ncclDataType_t)t, rop, root, x->comm, x->s),
		       "ncclReduce") && cudaStreamSynchronize(x->s) == cudaSuccess &&
		    x->rank == root)
			verify(x, "Reduce", recv, count, 0, seed, t, op, root, 1, scalar, 0, inplace);
	} else if (coll == C_ALLREDUCE) {
		char *recv = inplace ? x->send : x->recv;
		size_t q = (count + n - 1) / n;

		int direct = count * es <= direct_max;
		struct cxlshim_comm_stats st0, st1;
		int counted = cxlshim_comm_stats(x->comm, &st0) == 0;

		fill(x, x->send, count, 0, seed, t);
		if (ok(ncclAllReduce(x->send, recv, count, (ncclDataType_t)t, rop, x->comm, x->s),
		       "ncclAllReduce") && cudaStreamSynchronize(x->s) == cudaSuccess)
			verify(x, "AllReduce", recv, count, 0, seed, t, op, 0, direct ? 1 : -1,
			       scalar, direct ? 0 : q ? q : 1, inplace);
		checks++;
		if (!counted || cxlshim_comm_stats(x->comm, &st1) ||
		    !read_volume_ok(st1.pool_read - st0.pool_read, count * es, n, direct)) {
			failures++;
			printf("FAIL rank %d: AllReduce %s of %zu B read %llu B from the pool\n",
			       x->rank, direct ? "direct" : "RS+AG", count * es,
			       counted ? st1.pool_read - st0.pool_read : 0ull);
		}
	} else {
		char *recv = inplace ? x->send + (size_t)x->rank * count * es : x->recv;

		fill(x, x->send, count * n, 0, seed, t);
		if (ok(ncclReduceScatter(x->send, recv, count, (ncclDataType_t)t, rop, x->comm,
					 x->s), "ncclReduceScatter") &&
		    cudaStreamSynchronize(x->s) == cudaSuccess)
			verify(x, "ReduceScatter", recv, count, (size_t)x->rank * count, seed, t, op,
			       x->rank, -1, scalar, 0, inplace);
	}
	if (op >= OP_PMS_HOST && ncclRedOpDestroy(rop, x->comm) != ncclSuccess) {
		failures++;
		printf("FAIL ncclRedOpDestroy\n");
	}
}

static int rank_main(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const struct opts *o = arg;
	struct ctx x = { .rank = rank, .n = n };
	size_t max = 0;

	for (int i = 0; i < o->ncounts; i++)
		max = o->counts[i] > max ? o->counts[i] : max;
	max = (max + 16) * 8 * (size_t)n;
	CUDA(cudaSetDevice(test_device(rank)));
	CUDA(cudaStreamCreate(&x.s));
	CUDA(cudaMalloc((void **)&x.send, max));
	CUDA(cudaMalloc((void **)&x.recv, max));
	CUDA(cudaMalloc((void **)&x.dscalar, 8));
	x.host = malloc(max);
	if (ncclCommInitRank(&x.comm, n, *id, rank) != ncclSuccess)
		return 2;
	for (int c = 1; c <= C_REDUCESCATTER; c <<= 1) {
		if (!(o->colls & c))
			continue;
		for (int ti = 0; ti < o->ntypes; ti++)
			for (int oi = 0; oi < o->nops; oi++)
				for (int ci = 0; ci < o->ncounts; ci++)
					for (int inplace = 0; inplace < 2; inplace++) {
						int roots = c == C_REDUCE ? (n < o->max_roots ? n :
									     o->max_roots) : 1;

						for (int root = 0; root < roots; root++)
							one(&x, c, o->types[ti], o->ops[oi],
							    o->counts[ci], root, inplace,
							    (uint64_t)(c * 131 + ti * 17 + oi * 5 +
								       ci * 3 + inplace + root * 7));
					}
	}
	if (ncclCommDestroy(x.comm) != ncclSuccess)
		failures++;
	printf("rank %d/%d: %d checks, %d failed\n", rank, n, checks, failures);
	return failures ? 1 : 0;
}

static int find(const char *const *names, int nnames, const char *s)
{
	for (int i = 0; i < nnames; i++)
		if (!strcmp(names[i], s))
			return i;
	fprintf(stderr, "unknown name %s\n", s);
	exit(2);
}

int main(int argc, char **argv)
{
	static const char *colls[] = { "reduce", "allreduce", "reducescatter" };
	struct opts o = { .n = 2, .colls = 7, .max_roots = 64 };
	char *save, *tok;
	int opt, rc;

	while ((opt = getopt(argc, argv, "n:C:c:t:o:r:D:")) != -1) {
		save = NULL;
		switch (opt) {
		case 'n': o.n = atoi(optarg); break;
		case 'r': o.max_roots = atoi(optarg); break;
		case 'D': direct_max = strtoull(optarg, NULL, 0); break;
		case 'C':
			o.colls = 0;
			for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				o.colls |= 1 << find(colls, 3, tok);
			break;
		case 'c':
			for (tok = strtok_r(optarg, ",", &save); tok && o.ncounts < 8;
			     tok = strtok_r(NULL, ",", &save))
				o.counts[o.ncounts++] = strtoull(tok, NULL, 0);
			break;
		case 't':
			for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				o.types[o.ntypes++] = find(tname, 12, tok);
			break;
		case 'o':
			for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				o.ops[o.nops++] = find(op_names, NOPS, tok);
			break;
		default:
			fprintf(stderr, "usage: %s -n N [-C colls] [-c counts] [-t types] [-o ops] "
					"[-r maxroots]\n", argv[0]);
			return 2;
		}
	}
	if (!o.ncounts) {
		size_t d[] = { 0, 1, 7, 1000, 70000 };
		memcpy(o.counts, d, sizeof(d));
		o.ncounts = 5;
	}
	if (!o.ntypes)
		for (; o.ntypes < 12; o.ntypes++)
			o.types[o.ntypes] = o.ntypes;
	if (!o.nops)
		for (; o.nops < NOPS; o.nops++)
			o.ops[o.nops] = o.nops;
	rc = launch_ranks(o.n, rank_main, &o, 900);
	printf("reduce_check -n %d: %s\n", o.n, rc ? "FAILED" : "ok");
	return rc;
}
